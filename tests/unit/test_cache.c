/*
 * test_cache.c — the block cache: the cache_mb bound holds while reading
 * many more blocks than fit (LRU eviction); buffers of an uncommitted
 * transaction are never evicted; a corrupted block reads as -EUCLEAN, is
 * not cached as valid, and reads fine once repaired; readahead turns later
 * reads into hits; concurrent readers of the same blocks agree; heavy
 * writing through transactions stays within the bound (throttling).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fusefs/core/fs_internal.h"
#include "core_fixture.h"
#include "harness.h"

#define NBLK 3000

static uint64_t blks[NBLK];

static void test_bound(void)
{
	struct bd_dev *bd = cf_ram_fs(128, 4, 16);
	struct fs_core_stats st;
	uint64_t maxb = 0;
	struct fs *fs;
	uint32_t v = 0;
	int bad = 0;

	memset(blks, 0, sizeof(blks));
	REQUIRE(bd != NULL && (fs = cf_mount(bd, 1)) != NULL);	/* 256 bufs */
	REQUIRE(cf_make_blocks(fs, blks, NBLK, 7, &maxb) == 0);
	printf("  writing %d blocks: at most %llu buffers (bound 256)\n",
	       NBLK, (unsigned long long)maxb);
	CHECK(maxb <= 256 + 16);
	for (int round = 0; round < 2; round++)
		for (unsigned i = 0; i < NBLK; i++) {
			if (cf_read_val(fs, blks[i], &v) < 0 || v != 7)
				bad++;
			if (cf_bufs(fs) > 256)
				bad++;
		}
	CHECK_EQ(bad, 0);
	fs_core_stats_get(fs, &st);
	CHECK(st.cache_evictions >= NBLK);
	CHECK(st.cache_misses >= 2 * NBLK - 256);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* Modified, uncommitted buffers survive any amount of other reads. */
static void test_dirty_not_evicted(void)
{
	struct bd_dev *bd = cf_ram_fs(128, 4, 16);
	uint64_t maxb = 0;
	struct fs_tx *tx;
	struct fs *fs;
	uint32_t v = 0;
	int bad = 0;

	memset(blks, 0, sizeof(blks));
	REQUIRE(bd != NULL && (fs = cf_mount(bd, 1)) != NULL);
	REQUIRE(cf_make_blocks(fs, blks, NBLK, 1, &maxb) == 0);
	REQUIRE(fs_tx_begin(fs, 20, &tx) == 0);
	for (unsigned i = 0; i < 20; i++) {
		struct fs_buf *b;

		REQUIRE(fs_buf_read(fs, blks[i], FS_BT_XATTR, &b) == 0);
		CHECK_EQ(fs_tx_write(tx, b), 0);
		((struct fs_xattr_blk *)b->data)->count = 99;
		fs_buf_put(b);
	}
	CHECK_EQ(fs_tx_end(tx), 0);	/* not committed */
	for (unsigned i = 20; i < NBLK; i++)
		if (cf_read_val(fs, blks[i], &v) < 0 || v != 1)
			bad++;
	for (unsigned i = 0; i < 20; i++)
		if (cf_read_val(fs, blks[i], &v) < 0 || v != 99)
			bad++;	/* evicted: would read 1 from disk */
	CHECK_EQ(bad, 0);
	/* nor after the commit, until the checkpoint wrote them */
	CHECK_EQ(fs_journal_sync(fs), 0);
	for (unsigned i = 20; i < NBLK; i++)
		cf_read_val(fs, blks[i], &v);
	for (unsigned i = 0; i < 20; i++)
		if (cf_read_val(fs, blks[i], &v) < 0 || v != 99)
			bad++;
	CHECK_EQ(bad, 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

static void test_corrupt_block(void)
{
	struct bd_dev *bd = cf_ram_fs(128, 4, 16);
	uint8_t *raw = bd_buf_alloc(FS_BLOCK_SIZE);
	struct fs_core_stats st;
	uint64_t maxb = 0;
	struct fs *fs;
	uint32_t v = 0;

	memset(blks, 0, sizeof(blks));
	REQUIRE(raw != NULL);
	REQUIRE(bd != NULL && (fs = cf_mount(bd, 1)) != NULL);
	REQUIRE(cf_make_blocks(fs, blks, NBLK, 5, &maxb) == 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	REQUIRE((fs = cf_mount(bd, 1)) != NULL);	/* cold cache */
	bd_read(bd, raw, FS_BLOCK_SIZE, blks[3] * FS_BLOCK_SIZE);
	raw[1000] ^= 1;
	bd_write(bd, raw, FS_BLOCK_SIZE, blks[3] * FS_BLOCK_SIZE, 0);
	CHECK_EQ(cf_read_val(fs, blks[3], &v), -EUCLEAN);
	CHECK_EQ(cf_read_val(fs, blks[3], &v), -EUCLEAN);	/* still bad */
	/* right block, wrong type */
	CHECK_EQ(fs_buf_read(fs, blks[4], FS_BT_INODE, &(struct fs_buf *){ 0 }),
		 -EUCLEAN);
	/* misdirected: block 5's content at block 6 */
	bd_read(bd, raw, FS_BLOCK_SIZE, blks[5] * FS_BLOCK_SIZE);
	bd_write(bd, raw, FS_BLOCK_SIZE, blks[6] * FS_BLOCK_SIZE, 0);
	CHECK_EQ(cf_read_val(fs, blks[6], &v), -EUCLEAN);
	fs_core_stats_get(fs, &st);
	CHECK(st.bad_blocks >= 4);
	/* repair: reads fine (the bad copy was not kept) */
	bd_read(bd, raw, FS_BLOCK_SIZE, blks[3] * FS_BLOCK_SIZE);
	raw[1000] ^= 1;
	bd_write(bd, raw, FS_BLOCK_SIZE, blks[3] * FS_BLOCK_SIZE, 0);
	CHECK_EQ(cf_read_val(fs, blks[3], &v), 0);
	CHECK_EQ(v, 5);
	CHECK_EQ(cf_read_val(fs, fs->sb.total_blocks, &v), -EINVAL);
	CHECK_EQ(fs_core_unmount(fs), 0);
	free(raw);
	bd_close(bd);
}

static void test_readahead(void)
{
	struct bd_dev *bd = cf_ram_fs(128, 4, 16);
	struct fs_core_stats z, a, b;
	uint64_t maxb = 0;
	struct fs *fs;
	uint32_t v = 0;
	int bad = 0;

	memset(blks, 0, sizeof(blks));
	REQUIRE(bd != NULL && (fs = cf_mount(bd, 8)) != NULL);
	REQUIRE(cf_make_blocks(fs, blks, NBLK, 3, &maxb) == 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	REQUIRE((fs = cf_mount(bd, 8)) != NULL);
	fs_core_stats_get(fs, &z);	/* mount read rgroup headers ahead */
	CHECK_EQ(fs_buf_readahead(fs, blks, 200), 0);
	fs_core_stats_get(fs, &a);
	for (unsigned i = 0; i < 200; i++)
		if (cf_read_val(fs, blks[i], &v) < 0 || v != 3)
			bad++;
	fs_core_stats_get(fs, &b);
	CHECK_EQ(bad, 0);
	CHECK_EQ(b.cache_misses, a.cache_misses);
	CHECK_EQ(b.cache_readahead - z.cache_readahead, 200);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

struct rd_arg {
	struct fs *fs;
	int bad;
	unsigned seed;
};

static void *reader(void *p)
{
	struct rd_arg *a = p;
	uint32_t v = 0;

	for (unsigned i = 0; i < 20000; i++) {
		unsigned k = (i * 7919u + a->seed * 104729u) % NBLK;

		if (cf_read_val(a->fs, blks[k], &v) < 0 || v != 4)
			a->bad++;
	}
	return NULL;
}

static void test_concurrent_readers(void)
{
	struct bd_dev *bd = cf_ram_fs(128, 4, 16);
	struct rd_arg args[4];
	pthread_t th[4];
	uint64_t maxb = 0;
	struct fs *fs;

	memset(blks, 0, sizeof(blks));
	REQUIRE(bd != NULL && (fs = cf_mount(bd, 4)) != NULL);	/* 1024 */
	REQUIRE(cf_make_blocks(fs, blks, NBLK, 4, &maxb) == 0);
	for (unsigned i = 0; i < 4; i++) {
		args[i] = (struct rd_arg){ fs, 0, i + 1 };
		pthread_create(&th[i], NULL, reader, &args[i]);
	}
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(args[i].bad, 0);
	}
	CHECK(cf_bufs(fs) <= 1024);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_bound);
	T_RUN(test_dirty_not_evicted);
	T_RUN(test_corrupt_block);
	T_RUN(test_readahead);
	T_RUN(test_concurrent_readers);
	return t_done();
}
