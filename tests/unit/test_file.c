/*
 * test_file.c — file data through fs.h on a RAM device: inline data and
 * its conversion to extents, unaligned writes (read-modify-write), sparse
 * files and files over 4 GiB, truncate down and up (zeros), fallocate
 * (plain, KEEP_SIZE, PUNCH_HOLE, unsupported modes), a random
 * write/truncate/read test against an in-memory model (--seed), and
 * tar's write pattern (no device read for its read-modify-writes).
 */
#include "tests/unit/fs_testutil.h"
#include "tests/unit/harness.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <sys/stat.h>

#define MODEL_SIZE (3u << 20)

static int is_zero(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0)
			return 0;
	return 1;
}

static void test_inline_to_extents(void)
{
	struct tfs t;
	char buf[8192], out[8192];
	int64_t f;

	REQUIRE(tfs_open(&t, 64) == 0);
	f = tfs_creat(&t, t.root, "f", 0644);
	REQUIRE(f > 0);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 7 + 3);
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)f, buf, 100, 0), 100);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).blocks, 0);	/* inline */
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)f, buf + 100, 3000,
			  100), 3000);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).blocks, 0);
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)f, buf + 3100,
			  sizeof(buf) - 3100, 3100),
		 (long long)(sizeof(buf) - 3100));
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).size, sizeof(buf));
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).blocks, 16);
	memset(out, 0, sizeof(out));
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, out, sizeof(out), 0),
		 sizeof(out));
	CHECK(memcmp(out, buf, sizeof(buf)) == 0);
	/* short read at EOF, read past EOF */
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, out, 100, sizeof(buf) - 10), 10);
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, out, 100, sizeof(buf) + 10), 0);
	REQUIRE(tfs_remount(&t) == 0);
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, out, sizeof(out), 0),
		 sizeof(out));
	CHECK(memcmp(out, buf, sizeof(buf)) == 0);
	/* truncate to 0 returns the blocks */
	{
		struct fs_attr in = { .size = 0 }, o;

		CHECK_EQ(fs_setattr(t.fs, tfs_cred(&t), (uint64_t)f, &in,
				    FS_SET_SIZE, &o), 0);
		CHECK_EQ(o.blocks, 0);
		CHECK_EQ(o.size, 0);
	}
	tfs_close(&t);
}

static void test_sparse_big(void)
{
	struct tfs t;
	char buf[4096];
	uint64_t big = 5ull << 30;	/* 5 GiB on a 64 MiB device */
	int64_t f;

	REQUIRE(tfs_open(&t, 64) == 0);
	f = tfs_creat(&t, t.root, "sparse", 0644);
	REQUIRE(f > 0);
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)f, "head", 4, 0), 4);
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)f, "tail", 4,
			  big - 4), 4);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).size, big);
	CHECK(tfs_stat(&t, (uint64_t)f).blocks <= 16);
	memset(buf, 1, sizeof(buf));
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, buf, sizeof(buf), 1ull << 32),
		 sizeof(buf));
	CHECK(is_zero(buf, sizeof(buf)));
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, buf, sizeof(buf), big - 4), 4);
	CHECK(memcmp(buf, "tail", 4) == 0);
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, buf, 8, 0), 8);
	CHECK(memcmp(buf, "head\0\0\0\0", 8) == 0);
	REQUIRE(tfs_remount(&t) == 0);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).size, big);
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, buf, sizeof(buf), big - 4), 4);
	CHECK(memcmp(buf, "tail", 4) == 0);
	tfs_close(&t);
}

static void test_truncate_zeroes(void)
{
	struct tfs t;
	struct fs_attr in, o;
	static char buf[20000];
	int64_t f;

	REQUIRE(tfs_open(&t, 64) == 0);
	f = tfs_creat(&t, t.root, "f", 0644);
	memset(buf, 'a', sizeof(buf));
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)f, buf, sizeof(buf),
			  0), sizeof(buf));
	memset(&in, 0, sizeof(in));
	in.size = 5000;
	CHECK_EQ(fs_setattr(t.fs, tfs_cred(&t), (uint64_t)f, &in, FS_SET_SIZE,
			    &o), 0);
	CHECK_EQ(o.blocks, 16);	/* 2 blocks of 4 KiB */
	in.size = sizeof(buf);
	CHECK_EQ(fs_setattr(t.fs, tfs_cred(&t), (uint64_t)f, &in, FS_SET_SIZE,
			    &o), 0);
	memset(buf, 1, sizeof(buf));
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, buf, sizeof(buf), 0),
		 sizeof(buf));
	CHECK(buf[4999] == 'a');
	CHECK(is_zero(buf + 5000, sizeof(buf) - 5000));
	/* inline file truncate */
	f = tfs_creat(&t, t.root, "g", 0644);
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)f, "abcdef", 6, 0), 6);
	in.size = 2;
	CHECK_EQ(fs_setattr(t.fs, tfs_cred(&t), (uint64_t)f, &in, FS_SET_SIZE,
			    &o), 0);
	in.size = 6;
	CHECK_EQ(fs_setattr(t.fs, tfs_cred(&t), (uint64_t)f, &in, FS_SET_SIZE,
			    &o), 0);
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, buf, 6, 0), 6);
	CHECK(memcmp(buf, "ab\0\0\0\0", 6) == 0);
	tfs_close(&t);
}

static void test_fallocate(void)
{
	struct tfs t;
	static char buf[65536];
	struct statvfs s0, s1;
	int64_t f;

	REQUIRE(tfs_open(&t, 64) == 0);
	f = tfs_creat(&t, t.root, "f", 0644);
	REQUIRE(f > 0);
	CHECK_EQ(fs_fallocate(t.fs, tfs_cred(&t), (uint64_t)f, 0, 0, 1 << 20),
		 0);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).size, 1 << 20);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).blocks, (1 << 20) / 512);
	CHECK_EQ(fs_fallocate(t.fs, tfs_cred(&t), (uint64_t)f,
			      FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20), 0);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).size, 1 << 20);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).blocks, (2 << 20) / 512);
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, buf, sizeof(buf), 4096),
		 sizeof(buf));
	CHECK(is_zero(buf, sizeof(buf)));
	/* punch: the middle 64 KiB (+ partial edges) */
	memset(buf, 'p', sizeof(buf));
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)f, buf, sizeof(buf),
			  0), sizeof(buf));
	fs_sync(t.fs);
	fs_statfs(t.fs, &s0);
	CHECK_EQ(fs_fallocate(t.fs, tfs_cred(&t), (uint64_t)f,
			      FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100,
			      40000), 0);
	fs_sync(t.fs);
	fs_statfs(t.fs, &s1);
	CHECK_EQ(s1.f_bfree - s0.f_bfree, 8);	/* blocks 1..8 */
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, buf, sizeof(buf), 0),
		 sizeof(buf));
	CHECK(buf[99] == 'p');
	CHECK(is_zero(buf + 100, 40000));
	CHECK(buf[40100] == 'p');
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).size, 1 << 20);
	/* unsupported modes */
	CHECK_EQ(fs_fallocate(t.fs, tfs_cred(&t), (uint64_t)f,
			      FALLOC_FL_PUNCH_HOLE, 0, 4096), -EOPNOTSUPP);
	CHECK_EQ(fs_fallocate(t.fs, tfs_cred(&t), (uint64_t)f,
			      FALLOC_FL_UNSHARE_RANGE, 0, 4096),
		 -EOPNOTSUPP);
	CHECK_EQ(fs_fallocate(t.fs, tfs_cred(&t), (uint64_t)f,
			      FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE, 0,
			      4096),
		 -EOPNOTSUPP);
	CHECK_EQ(fs_fallocate(t.fs, tfs_cred(&t), (uint64_t)f, 0x400, 0, 4096),
		 -EOPNOTSUPP); /* unknown */
	tfs_close(&t);
}

/* Random writes, truncates and reads against a model. */
static void test_random_model(void)
{
	struct tfs t;
	uint64_t seed = t_seed(), s = seed | 1, size = 0;
	char *model, *buf;
	int64_t f;

	model = calloc(1, MODEL_SIZE);
	buf = malloc(MODEL_SIZE);
	REQUIRE(model != NULL && buf != NULL);
	REQUIRE(tfs_open(&t, 64) == 0);
	f = tfs_creat(&t, t.root, "r", 0644);
	REQUIRE(f > 0);
	for (int i = 0; i < 300; i++) {
		unsigned op = trand(&s) % 10;
		uint64_t off = trand(&s) % MODEL_SIZE;
		uint64_t len = trand(&s) % (op < 2 ? 200 : 70000) + 1;

		if (off + len > MODEL_SIZE)
			len = MODEL_SIZE - off;
		if (op < 7) {
			for (uint64_t k = 0; k < len; k++)
				buf[k] = (char)trand(&s);
			if (fs_write(t.fs, tfs_cred(&t), (uint64_t)f, buf, len,
				     off) != (ssize_t)len) {
				CHECK(0);
				break;
			}
			memcpy(model + off, buf, len);
			if (off + len > size)
				size = off + len;
		} else if (op < 9) {
			struct fs_attr in = { .size = off }, o;

			CHECK_EQ(fs_setattr(t.fs, tfs_cred(&t), (uint64_t)f,
					    &in, FS_SET_SIZE, &o), 0);
			if (off < size)
				memset(model + off, 0, size - off);
			size = off;
		} else {
			CHECK_EQ(fs_fallocate(t.fs, tfs_cred(&t), (uint64_t)f,
					      FALLOC_FL_PUNCH_HOLE |
					      FALLOC_FL_KEEP_SIZE, off, len),
				 0);
			if (off < size)
				memset(model + off, 0,
				       (off + len < size ? off + len : size) -
				       off);
		}
		if (i % 50 == 49 && tfs_remount(&t) != 0) {
			CHECK(0);
			break;
		}
	}
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).size, size);
	/* unaligned destination (bounce copies) ... */
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, buf + 1, MODEL_SIZE - 1, 0),
		 (long long)(size < MODEL_SIZE - 1 ? size : MODEL_SIZE - 1));
	CHECK(memcmp(buf + 1, model, size < MODEL_SIZE - 1 ? size :
		     MODEL_SIZE - 1) == 0);
	/* ... and an aligned one (whole blocks read in place) */
	{
		void *al = NULL;

		REQUIRE(posix_memalign(&al, 4096, MODEL_SIZE) == 0);
		CHECK_EQ(fs_read(t.fs, (uint64_t)f, al, MODEL_SIZE, 0),
			 (long long)size);
		CHECK(memcmp(al, model, size) == 0);
		if (size > 5000) {
			CHECK_EQ(fs_read(t.fs, (uint64_t)f, al, size - 5000,
					 5000), (long long)(size - 5000));
			CHECK(memcmp(al, model + 5000, size - 5000) == 0);
		}
		free(al);
	}
	tfs_close(&t);
	free(model);
	free(buf);
}

/* Threads writing and reading disjoint 64 KiB slots of one file and one
 * file each, while another thread truncates and re-extends a third file:
 * the data I/O runs outside the namespace lock, this checks it neither
 * deadlocks nor mixes data up. */
#define CT_THREADS 4
#define CT_SLOT (64u << 10)
#define CT_ROUNDS 40

struct ct {
	struct tfs *t;
	uint64_t shared, own, victim;
	unsigned id;
	int bad;
};

static void *ct_worker(void *arg)
{
	struct ct *c = arg;
	static _Thread_local char buf[CT_SLOT], out[CT_SLOT];

	for (unsigned r = 0; r < CT_ROUNDS; r++) {
		uint64_t off = ((uint64_t)r * CT_THREADS + c->id) * CT_SLOT;

		memset(buf, (int)(c->id * 31 + r), sizeof(buf));
		if (fs_write(c->t->fs, tfs_cred(c->t), c->shared, buf,
			     sizeof(buf), off) != (ssize_t)sizeof(buf) ||
		    fs_write(c->t->fs, tfs_cred(c->t), c->own, buf,
			     sizeof(buf), (uint64_t)r * CT_SLOT) !=
		    (ssize_t)sizeof(buf))
			c->bad++;
		if (fs_read(c->t->fs, c->shared, out, sizeof(out), off) !=
		    (ssize_t)sizeof(out) || memcmp(buf, out, sizeof(out)) != 0)
			c->bad++;
	}
	return NULL;
}

static void *ct_truncater(void *arg)
{
	struct ct *c = arg;
	static _Thread_local char buf[CT_SLOT];

	memset(buf, 'v', sizeof(buf));
	for (unsigned r = 0; r < CT_ROUNDS; r++) {
		struct fs_attr in = { .size = (r % 3) * 5000 }, o;

		fs_write(c->t->fs, tfs_cred(c->t), c->victim, buf, sizeof(buf),
			 (r % 5) * CT_SLOT);
		if (fs_setattr(c->t->fs, tfs_cred(c->t), c->victim, &in,
			       FS_SET_SIZE, &o) != 0)
			c->bad++;
	}
	return NULL;
}

/* The pattern of tar through FUSE: 10 KiB writes at unaligned offsets,
 * each split by the kernel at a page boundary. The partial block each
 * piece starts in was just written by the previous piece: its
 * read-modify-write is served from the open data run, not the device
 * (at most one device read per commit, which submits the open run). */
static void test_tar_pattern(void)
{
	const size_t piece = 10240, fsize = 200 * 1024 + 777;
	static char want[200 * 1024 + 777], got[200 * 1024 + 777];
	uint64_t rmw0, commits0, absorbed0;
	struct tfs t;
	int64_t f[4];

	REQUIRE(tfs_open(&t, 64) == 0);
	rmw0 = t.fs->st.data_rmw_dev;
	commits0 = t.fs->st.commits;
	absorbed0 = t.fs->st.data_absorbed;
	for (unsigned k = 0; k < 4; k++) {
		char name[8];

		snprintf(name, sizeof(name), "f%u", k);
		f[k] = tfs_creat(&t, t.root, name, 0644);
		REQUIRE(f[k] > 0);
		for (size_t i = 0; i < fsize; i++)
			want[i] = (char)(i * 13 + k);
		for (size_t off = 0; off < fsize; off += piece) {
			size_t len = fsize - off < piece ? fsize - off : piece;
			size_t cut = (off + 4095) / 4096 * 4096 - off;

			if (cut > len)
				cut = len;
			if (cut > 0)
				CHECK_EQ(fs_write(t.fs, tfs_cred(&t),
						  (uint64_t)f[k], want + off,
						  cut, off), (long long)cut);
			if (len > cut)
				CHECK_EQ(fs_write(t.fs, tfs_cred(&t),
						  (uint64_t)f[k],
						  want + off + cut, len - cut,
						  off + cut),
					 (long long)(len - cut));
		}
	}
	CHECK(t.fs->st.data_rmw_dev - rmw0 <= t.fs->st.commits - commits0);
	CHECK(t.fs->st.data_absorbed - absorbed0 > 0);
	for (unsigned k = 0; k < 4; k++) {
		for (size_t i = 0; i < fsize; i++)
			want[i] = (char)(i * 13 + k);
		CHECK_EQ(fs_read(t.fs, (uint64_t)f[k], got, fsize, 0),
			 (long long)fsize);
		CHECK(memcmp(got, want, fsize) == 0);
	}
	REQUIRE(tfs_remount(&t) == 0);
	for (unsigned k = 0; k < 4; k++) {
		for (size_t i = 0; i < fsize; i++)
			want[i] = (char)(i * 13 + k);
		CHECK_EQ(fs_read(t.fs, (uint64_t)f[k], got, fsize, 0),
			 (long long)fsize);
		CHECK(memcmp(got, want, fsize) == 0);
	}
	tfs_close(&t);
}

static void test_concurrent_io(void)
{
	struct tfs t;
	struct ct c[CT_THREADS + 1];
	pthread_t th[CT_THREADS + 1];
	static char out[CT_SLOT];
	int64_t shared, victim;
	int bad = 0;

	REQUIRE(tfs_open(&t, 96) == 0);
	shared = tfs_creat(&t, t.root, "shared", 0644);
	victim = tfs_creat(&t, t.root, "victim", 0644);
	REQUIRE(shared > 0 && victim > 0);
	for (unsigned i = 0; i <= CT_THREADS; i++) {
		char name[16];

		snprintf(name, sizeof(name), "own%u", i);
		c[i] = (struct ct){ .t = &t, .shared = (uint64_t)shared,
				    .victim = (uint64_t)victim, .id = i };
		c[i].own = (uint64_t)tfs_creat(&t, t.root, name, 0644);
		REQUIRE(pthread_create(&th[i], NULL, i < CT_THREADS ?
				       ct_worker : ct_truncater, &c[i]) == 0);
	}
	for (unsigned i = 0; i <= CT_THREADS; i++) {
		pthread_join(th[i], NULL);
		bad += c[i].bad;
	}
	CHECK_EQ(bad, 0);
	REQUIRE(tfs_remount(&t) == 0);
	for (unsigned r = 0; r < CT_ROUNDS; r++)
		for (unsigned id = 0; id < CT_THREADS; id++) {
			uint64_t off = ((uint64_t)r * CT_THREADS + id) * CT_SLOT;

			if (fs_read(t.fs, (uint64_t)shared, out, sizeof(out),
				    off) != (ssize_t)sizeof(out) ||
			    out[0] != (char)(id * 31 + r) ||
			    out[CT_SLOT - 1] != (char)(id * 31 + r))
				bad++;
		}
	CHECK_EQ(bad, 0);
	CHECK_EQ(tfs_stat(&t, (uint64_t)victim).size,
		 ((CT_ROUNDS - 1) % 3) * 5000);
	tfs_close(&t);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_inline_to_extents);
	T_RUN(test_sparse_big);
	T_RUN(test_truncate_zeroes);
	T_RUN(test_fallocate);
	T_RUN(test_random_model);
	T_RUN(test_concurrent_io);
	T_RUN(test_tar_pattern);
	return t_done();
}
