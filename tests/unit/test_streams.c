/*
 * test_streams.c — files written at once (fs.h on a RAM device): each
 * file keeps long extents in its own region (allocator reservations,
 * fs_alloc.c) instead of interleaving with the other file request by
 * request, and the data of both is intact; in turns from one thread (the
 * interleaving is then certain) and from two threads; a reservation
 * never causes ENOSPC (a writer takes the free blocks another file
 * reserved once nothing else is left).
 */
#include "tests/unit/fs_testutil.h"
#include "tests/unit/harness.h"
#include "fusefs/core/fs_internal.h"
#include "fusefs/namespace/fs_ns.h"

#include <pthread.h>

#define FILE_MB 16u
#define CHUNK (128u * 1024)
#define MAX_EXTENTS 16u	/* 16 MiB in 128 KiB writes: 128 if interleaved */

static char pattern(unsigned file, uint64_t off)
{
	return (char)((off / 4096) * 7 + off % 4096 + file * 101);
}

static void fill(char *buf, unsigned file, uint64_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(file, off + i);
}

/* Extents of regular file @ino (entries of its extent tree). */
static long long extents(struct fs *fs, uint64_t ino)
{
	struct fs_btree bt;
	struct fs_buf *b;
	uint64_t entries = 0, nodes = 0;
	unsigned depth = 0;
	int ret;

	ret = fs_ino_read(fs, ino, &b);
	if (ret < 0)
		return ret;
	fs_btree_init(&bt, fs, b, FS_INODE_INLINE_OFF, FS_INODE_INLINE_SIZE,
		      ino);
	ret = fs_btree_stat(&bt, &depth, &entries, &nodes);
	fs_buf_put(b);
	return ret < 0 ? ret : (long long)entries;
}

/* Read file @k (of FILE_MB) back and compare; mismatches. */
static unsigned verify(struct tfs *t, uint64_t ino, unsigned k)
{
	static char want[CHUNK], got[CHUNK];
	unsigned bad = 0;

	for (uint64_t off = 0; off < (uint64_t)FILE_MB << 20; off += CHUNK) {
		fill(want, k, off, CHUNK);
		if (fs_read(t->fs, ino, got, CHUNK, off) != CHUNK ||
		    memcmp(got, want, CHUNK) != 0)
			bad++;
	}
	return bad;
}

static void check_files(struct tfs *t, const int64_t *f)
{
	for (unsigned k = 0; k < 2; k++) {
		long long n = extents(t->fs, (uint64_t)f[k]);

		printf("# file %u: %lld extents\n", k, n);
		CHECK(n >= 1 && n <= MAX_EXTENTS);
		CHECK_EQ(verify(t, (uint64_t)f[k], k), 0);
	}
}

/* A fresh filesystem with two empty files, a and b; 0 or -1. */
static int open_two(struct tfs *t, int64_t *f)
{
	if (tfs_open(t, 96) != 0)
		return -1;
	f[0] = tfs_creat(t, t->root, "a", 0644);
	f[1] = tfs_creat(t, t->root, "b", 0644);
	return f[0] > 0 && f[1] > 0 ? 0 : -1;
}

/* Two files written in turns, one 128 KiB request each. */
static void test_turns(void)
{
	static char buf[CHUNK];
	struct tfs t;
	int64_t f[2];

	REQUIRE(open_two(&t, f) == 0);
	for (uint64_t off = 0; off < (uint64_t)FILE_MB << 20; off += CHUNK) {
		for (unsigned k = 0; k < 2; k++) {
			fill(buf, k, off, CHUNK);
			CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)f[k],
					  buf, CHUNK, off), CHUNK);
		}
	}
	check_files(&t, f);
	REQUIRE(tfs_remount(&t) == 0);
	check_files(&t, f);
	tfs_close(&t);
}

struct writer {
	struct tfs *t;
	uint64_t ino;
	unsigned k;
	size_t piece;		/* request size */
	unsigned bad;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	char *buf = malloc(w->piece);

	if (buf == NULL) {
		w->bad++;
		return NULL;
	}
	for (uint64_t off = 0; off < (uint64_t)FILE_MB << 20;
	     off += w->piece) {
		fill(buf, w->k, off, w->piece);
		if (fs_write(w->t->fs, tfs_cred(w->t), w->ino, buf, w->piece,
			     off) != (ssize_t)w->piece)
			w->bad++;
	}
	free(buf);
	return NULL;
}

/* Two threads, one file each (each under its own inode lock, so they
 * allocate at the same time): 64 KiB and 256 KiB requests. */
static void test_threads(void)
{
	struct writer w[2];
	pthread_t th[2];
	struct tfs t;
	int64_t f[2];

	REQUIRE(open_two(&t, f) == 0);
	for (unsigned k = 0; k < 2; k++) {
		w[k] = (struct writer){ &t, (uint64_t)f[k], k,
					k == 0 ? 65536 : 262144, 0 };
		REQUIRE(pthread_create(&th[k], NULL, writer_main, &w[k]) == 0);
	}
	for (unsigned k = 0; k < 2; k++) {
		pthread_join(th[k], NULL);
		CHECK_EQ(w[k].bad, 0);
	}
	CHECK_EQ(fs_fsync(t.fs, (uint64_t)f[0], 0), 0);
	check_files(&t, f);
	REQUIRE(tfs_remount(&t) == 0);
	check_files(&t, f);
	tfs_close(&t);
}

/* File a keeps a reservation (it is never released); file b then fills
 * the filesystem: it must end up using a's reserved blocks too. */
static void test_resv_enospc(void)
{
	static char buf[1 << 20];
	struct fs_core_stats st;
	struct statvfs sv;
	struct fs_attr a, b;
	uint64_t off = 0;
	ssize_t n;
	struct tfs t;

	REQUIRE(tfs_open(&t, 64) == 0);
	REQUIRE(fs_create(t.fs, tfs_cred(&t), t.root, "a", 0644, 0, &a) == 0);
	REQUIRE(fs_create(t.fs, tfs_cred(&t), t.root, "b", 0644, 0, &b) == 0);
	memset(buf, 'a', sizeof(buf));
	for (unsigned i = 0; i < 2; i++)
		CHECK_EQ(fs_write(t.fs, tfs_cred(&t), a.ino, buf, sizeof(buf),
				  i * sizeof(buf)), sizeof(buf));
	memset(buf, 'b', sizeof(buf));
	do {
		n = fs_write(t.fs, tfs_cred(&t), b.ino, buf, sizeof(buf),
			     off);
		if (n > 0)
			off += (uint64_t)n;
	} while (n > 0 && off < (1ull << 30));
	CHECK_EQ(n, -ENOSPC);
	CHECK_EQ(fs_statfs(t.fs, &sv), 0);
	printf("# b: %llu MiB written, %llu blocks left free\n",
	       (unsigned long long)(off >> 20),
	       (unsigned long long)sv.f_bfree);
	CHECK(sv.f_bfree < 16);
	CHECK_EQ(tfs_stat(&t, b.ino).size, off);
	/* a's reservation was set up, then b took from it (alloc stats) */
	fs_core_stats_get(t.fs, &st);
	printf("# alloc: %llu reservations, %llu stolen\n",
	       (unsigned long long)st.alloc_resv_made,
	       (unsigned long long)st.alloc_stolen);
	CHECK(st.alloc_resv_made >= 1);
	CHECK(st.alloc_stolen >= 1);
	fs_release(t.fs, a.ino);
	fs_release(t.fs, b.ino);
	tfs_close(&t);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_turns);
	T_RUN(test_threads);
	T_RUN(test_resv_enospc);
	return t_done();
}
