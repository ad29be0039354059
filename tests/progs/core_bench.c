/*
 * core_bench — rough figures for the storage layer on an image file:
 * fsync latency of a one-block transaction, a create-like workload
 * (inode allocation + new inode block + directory B+tree insert, one
 * handle each, then one sync), and extent allocation throughput.
 *
 *   core_bench IMAGE     (the image is reformatted)
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fusefs/core/fs_internal.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int fsync_lat(struct fs *fs, struct fs_btree *dir)
{
	double t0 = now_s();
	int n = 200;

	for (int i = 0; i < n; i++) {
		struct fs_tx *tx;
		uint8_t v[40] = { 0 };

		if (fs_tx_begin(fs, fs_btree_credits(dir), &tx) < 0)
			return -1;
		fs_btree_insert(tx, dir, 1000000000ull + (uint64_t)i, v, 40);
		fs_tx_end(tx);
		if (fs_journal_sync(fs) < 0)
			return -1;
	}
	printf("fsync of a 1-entry transaction: %.0f us avg over %d\n",
	       (now_s() - t0) / n * 1e6, n);
	return 0;
}

static int creates(struct fs *fs, struct fs_btree *dir, int n)
{
	double t0 = now_s(), t1;

	for (int i = 0; i < n; i++) {
		unsigned cr = fs_btree_credits(dir) + fs_alloc_credits(fs) + 1;
		uint8_t v[48] = { 0 };
		struct fs_buf *ib;
		struct fs_tx *tx;
		uint64_t ino, gen;

		if (fs_tx_begin(fs, cr, &tx) < 0 ||
		    fs_alloc_inode(tx, dir->owner, &ino, &gen) < 0 ||
		    fs_buf_new(tx, ino, FS_BT_INODE, &ib) < 0)
			return -1;
		((struct fs_dinode *)ib->data)->generation = gen;
		fs_buf_put(ib);
		memcpy(v, &ino, 8);
		if (fs_btree_insert(tx, dir, (uint64_t)i * 2654435761u, v,
				    sizeof(v)) < 0)
			return -1;
		fs_tx_end(tx);
	}
	t1 = now_s();
	if (fs_journal_sync(fs) < 0)
		return -1;
	printf("%d creates (inode + dir insert): %.3f s + sync %.3f s = "
	       "%.0f creates/s\n", n, t1 - t0, now_s() - t1,
	       n / (now_s() - t0));
	return 0;
}

static int extents(struct fs *fs)
{
	double t0 = now_s();
	uint64_t got = 0, target = (1ull << 31) / FS_BLOCK_SIZE;
	unsigned calls = 0;

	while (got < target) {
		struct fs_tx *tx;
		uint64_t s;
		uint32_t l;

		if (fs_tx_begin(fs, fs_alloc_credits(fs), &tx) < 0)
			return -1;
		if (fs_alloc(tx, 0, 1, 1024, &s, &l) < 0) {
			fs_tx_end(tx);
			break;
		}
		fs_tx_end(tx);
		got += l;
		calls++;
	}
	fs_journal_sync(fs);
	printf("allocated %.0f MiB in %u extents: %.3f s\n",
	       got * 4096.0 / 1048576, calls, now_s() - t0);
	return 0;
}

int main(int argc, char **argv)
{
	struct fs_mkfs_params p;
	struct fs_core_opts o;
	struct fs_core_stats st;
	struct fs_btree dir;
	struct fs_buf *rb;
	struct bd_dev *bd;
	struct fs *fs;
	char why[256];

	if (argc != 2) {
		fprintf(stderr, "usage: core_bench IMAGE\n");
		return 2;
	}
	if (bd_file_open(argv[1], 0, &bd) < 0) {
		fprintf(stderr, "cannot open %s\n", argv[1]);
		return 1;
	}
	fs_mkfs_defaults(&p);
	if (fs_mkfs(bd, &p, why, sizeof(why)) < 0) {
		fprintf(stderr, "mkfs: %s\n", why);
		return 1;
	}
	fs_core_opts_init(&o);
	if (fs_core_mount(bd, &o, &fs, why, sizeof(why)) < 0 ||
	    fs_buf_read(fs, fs->sb.root_ino, FS_BT_INODE, &rb) < 0) {
		fprintf(stderr, "mount: %s\n", why);
		return 1;
	}
	fs_btree_init(&dir, fs, rb, FS_INODE_INLINE_OFF,
		      FS_INODE_INLINE_SIZE, fs->sb.root_ino);
	if (fsync_lat(fs, &dir) < 0 || creates(fs, &dir, 15000) < 0 ||
	    extents(fs) < 0)
		fprintf(stderr, "failed\n");
	fs_core_stats_get(fs, &st);
	{
		/* crash with a full-ish journal, time the replaying mount */
		double t0;

		creates(fs, &dir, 8000);
		fs_buf_put(rb);
		fs_core_abandon(fs);
		t0 = now_s();
		if (fs_core_mount(bd, &o, &fs, why, sizeof(why)) < 0 ||
		    fs_buf_read(fs, fs->sb.root_ino, FS_BT_INODE, &rb) < 0)
			return 1;
		fs_core_stats_get(fs, &st);
		printf("mount after crash: replayed %llu tx, %llu blocks in "
		       "%.3f s\n", (unsigned long long)st.replay_tx,
		       (unsigned long long)st.replay_blocks, now_s() - t0);
	}
	printf("commits %llu (avg %.0f us, max %.0f us), checkpoints %llu, "
	       "flushes %llu\n", (unsigned long long)st.commits,
	       st.commit_ns_total / 1e3 / (st.commits ? st.commits : 1),
	       st.commit_ns_max / 1e3, (unsigned long long)st.checkpoints,
	       (unsigned long long)st.flushes);
	fs_buf_put(rb);
	fs_core_unmount(fs);
	bd_close(bd);
	return 0;
}
