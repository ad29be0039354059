/*
 * test_prefetch.c — asynchronous prefetch into the block cache
 * (fs_buf_prefetch, fs_buf_readahead): nearby blocks are read by merged
 * device reads (counted; the gap blocks are not cached), later demand
 * reads of prefetched blocks are hits with the right content, the bound
 * (a quarter of the cache unused, and never past the cache bound) holds,
 * merged reads' bounce buffers are reused, not mapped again,
 * dirty and pinned buffers are never evicted or replaced by a prefetch,
 * unused prefetched blocks are counted as wasted when evicted, a failed
 * prefetch read loses nothing, unmount with prefetches in flight is safe,
 * and prefetching threads racing readers never expose a wrong block.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fusefs/core/fs_core_priv.h"
#include "core_fixture.h"
#include "harness.h"

#define NBLK 3000

static uint64_t blks[NBLK];

static struct fs_core_stats stats(struct fs *fs)
{
	struct fs_core_stats st;

	fs_core_stats_get(fs, &st);
	return st;
}

/* A formatted RAM device with the NBLK blocks (value @v), and a fresh
 * mount of it with a cold cache of @cache_mb. */
static struct fs *cold_fs(struct bd_dev **bd, uint32_t v, unsigned cache_mb)
{
	struct fs *fs;

	memset(blks, 0, sizeof(blks));
	*bd = cf_ram_fs(128, 4, 16);
	if (*bd == NULL || (fs = cf_mount(*bd, 64)) == NULL)
		return NULL;
	if (cf_make_blocks(fs, blks, NBLK, v, NULL) < 0 ||
	    fs_core_unmount(fs) < 0)
		return NULL;
	return cf_mount(*bd, cache_mb);
}

static unsigned count_bad(struct fs *fs, unsigned from, unsigned to,
			  unsigned step, uint32_t v)
{
	unsigned bad = 0;
	uint32_t got;

	for (unsigned i = from; i < to; i += step)
		if (cf_read_val(fs, blks[i], &got) < 0 || got != v)
			bad++;
	return bad;
}

/* Contiguous blocks: few device reads, then every read is a hit. */
static void test_merged_hits(void)
{
	struct fs_core_stats a, b;
	struct bd_dev *bd;
	struct fs *fs;

	REQUIRE((fs = cold_fs(&bd, 3, 16)) != NULL);
	a = stats(fs);
	CHECK_EQ(fs_buf_prefetch(fs, blks, 300), 300);	/* no wait */
	CHECK_EQ(count_bad(fs, 0, 300, 1, 3), 0);
	b = stats(fs);
	printf("  300 blocks: %llu device reads\n",
	       (unsigned long long)(b.ra_ios - a.ra_ios));
	CHECK_EQ(b.cache_readahead - a.cache_readahead, 300);
	CHECK(b.ra_ios - a.ra_ios <= 300 / 8);
	CHECK_EQ(b.cache_misses, a.cache_misses);
	CHECK_EQ(b.ra_hits - a.ra_hits, 300);
	CHECK_EQ(b.ra_unused, 0);
	CHECK_EQ(b.ra_wasted, a.ra_wasted);
	/* cached already: nothing to do; duplicates are read once */
	CHECK_EQ(fs_buf_prefetch(fs, blks, 300), 0);
	{
		uint64_t dup[4] = { blks[400], blks[400], blks[401],
				    blks[400] };

		CHECK_EQ(fs_buf_prefetch(fs, dup, 4), 2);
	}
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* Every 3rd block: merged across the gaps, gap blocks not cached; every
 * 10th: too far apart, one read each. */
static void test_gaps(void)
{
	struct fs_core_stats a, b;
	uint64_t v[100];
	struct bd_dev *bd;
	struct fs *fs;

	REQUIRE((fs = cold_fs(&bd, 5, 16)) != NULL);
	for (unsigned i = 0; i < 100; i++) {
		v[i] = blks[i * 3];
		REQUIRE(i == 0 || v[i] == v[i - 1] + 3);	/* layout */
	}
	a = stats(fs);
	CHECK_EQ(fs_buf_readahead(fs, v, 100), 0);
	b = stats(fs);
	CHECK_EQ(b.cache_readahead - a.cache_readahead, 100);
	CHECK(b.ra_gap_blocks - a.ra_gap_blocks >= 100);
	CHECK(b.ra_ios - a.ra_ios < 20);
	CHECK_EQ(b.cache_bufs - a.cache_bufs, 100);	/* gaps not kept */
	CHECK(fs_buf_read_cached(fs, blks[1], FS_BT_XATTR,
				 &(struct fs_buf *){ NULL }) == -EAGAIN);
	CHECK_EQ(count_bad(fs, 0, 300, 3, 5), 0);
	CHECK_EQ(count_bad(fs, 1, 300, 3, 5), 0);	/* gaps read fine */
	for (unsigned i = 0; i < 100; i++)
		v[i] = blks[1000 + i * 10];
	a = stats(fs);
	CHECK_EQ(fs_buf_readahead(fs, v, 100), 0);
	b = stats(fs);
	CHECK_EQ(b.ra_ios - a.ra_ios, 100);
	CHECK_EQ(b.ra_gap_blocks, a.ra_gap_blocks);
	CHECK_EQ(count_bad(fs, 1000, 2000, 10, 5), 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* Merged reads go through bounce buffers that are kept for the next
 * batch: rounds of 30 merged reads map 30 buffers once, not 22 more per
 * round (an mmap, page faults and an munmap each: a cold tree walk
 * issues thousands of such reads). */
static void test_bounce_reuse(void)
{
	struct fs_core_stats a, b;
	uint64_t v[60];
	struct bd_dev *bd;
	struct fs *fs;

	REQUIRE((fs = cold_fs(&bd, 6, 16)) != NULL);
	a = stats(fs);
	for (unsigned r = 0; r < 10; r++) {
		/* 30 runs of 2 blocks with one between: each a bounce */
		for (unsigned k = 0; k < 30; k++) {
			v[2 * k] = blks[r * 240 + k * 8];
			v[2 * k + 1] = blks[r * 240 + k * 8 + 2];
			REQUIRE(v[2 * k + 1] == v[2 * k] + 2); /* layout */
		}
		CHECK_EQ(fs_buf_readahead(fs, v, 60), 0);
	}
	b = stats(fs);
	printf("  300 merged reads: %llu bounce buffers mapped\n",
	       (unsigned long long)(b.ra_bounce_maps - a.ra_bounce_maps));
	CHECK_EQ(b.ra_ios - a.ra_ios, 300);
	CHECK_EQ(b.ra_gap_blocks - a.ra_gap_blocks, 300);
	CHECK(b.ra_bounce_maps - a.ra_bounce_maps <= 30);
	CHECK_EQ(count_bad(fs, 0, 2400, 1, 6), 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* At most a quarter of the cache holds unused prefetched blocks. */
static void test_bound(void)
{
	struct fs_core_stats a, b;
	struct bd_dev *bd;
	struct fs *fs;
	uint64_t cap;
	unsigned n;

	REQUIRE((fs = cold_fs(&bd, 6, 8)) != NULL);
	cap = fs_cache_capacity(fs);
	printf("  cache of %llu buffers\n", (unsigned long long)cap);
	REQUIRE(cap >= 512 && cap < 2000);
	a = stats(fs);
	n = fs_buf_prefetch(fs, blks, 2000);
	b = stats(fs);
	CHECK(n <= cap / 4);
	CHECK(n >= cap / 4 - 16);	/* minus what mount left unused */
	CHECK(b.ra_unused <= cap / 4);
	CHECK_EQ(b.ra_skipped - a.ra_skipped, 2000 - n);
	CHECK(b.cache_bufs <= cap);
	/* using them makes room again */
	CHECK_EQ(count_bad(fs, 0, 100, 1, 6), 0);
	CHECK_EQ(stats(fs).ra_unused, b.ra_unused - 100);
	CHECK(fs_buf_prefetch(fs, blks + 2000, 1000) >= 100);
	CHECK(stats(fs).ra_unused <= cap / 4);
	CHECK_EQ(count_bad(fs, 0, NBLK, 1, 6), 0);
	CHECK(stats(fs).cache_bufs <= cap);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* Dirty buffers are never evicted for a prefetch nor replaced by one;
 * with the cache full of them, a prefetch does not grow it. */
static void test_dirty_kept(void)
{
	struct fs_core_stats st;
	struct bd_dev *bd;
	struct fs_tx *tx;
	struct fs *fs;
	unsigned nd;
	uint64_t cap;

	REQUIRE((fs = cold_fs(&bd, 1, 1)) != NULL);
	cap = fs_cache_capacity(fs);
	nd = fs_tx_max_credits(fs);
	nd = nd > 100 ? 100 : nd;
	printf("  %u dirty buffers in a cache of %llu\n", nd,
	       (unsigned long long)cap);
	REQUIRE(nd >= 20 && cap >= nd);
	REQUIRE(fs_tx_begin(fs, nd, &tx) == 0);
	for (unsigned i = 0; i < nd; i++) {
		struct fs_buf *b;

		REQUIRE(fs_buf_read(fs, blks[i], FS_BT_XATTR, &b) == 0);
		CHECK_EQ(fs_tx_write(tx, b), 0);
		((struct fs_xattr_blk *)b->data)->count = 99;
		fs_buf_put(b);
	}
	CHECK_EQ(fs_tx_end(tx), 0);	/* not committed: nd pinned */
	CHECK_EQ(fs_buf_prefetch(fs, blks, nd), 0);	/* cached, dirty */
	for (unsigned round = 0; round < 10; round++) {
		fs_buf_readahead(fs, blks + 100 + round * 250, 250);
		st = stats(fs);
		CHECK(st.cache_bufs <= cap);
		CHECK(st.ra_unused <= cap / 4);
	}
	CHECK_EQ(count_bad(fs, 0, nd, 1, 99), 0);
	CHECK_EQ(count_bad(fs, 100, NBLK, 7, 1), 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	CHECK_EQ(count_bad(fs, 0, nd, 1, 99), 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* Nearly every buffer referenced: a prefetch takes only the room left
 * (and what it can evict) and never grows the cache past its bound. */
static void test_cache_full(void)
{
	static struct fs_buf *held[NBLK];
	struct bd_dev *bd;
	struct fs *fs;
	uint64_t cap;
	unsigned n, nh = 0;

	REQUIRE((fs = cold_fs(&bd, 7, 1)) != NULL);
	cap = fs_cache_capacity(fs);
	REQUIRE(cap + 100 < NBLK);
	while (stats(fs).cache_bufs + 10 < cap &&
	       fs_buf_read(fs, blks[nh], FS_BT_XATTR, &held[nh]) == 0)
		nh++;
	n = fs_buf_prefetch(fs, blks + nh, 64);
	printf("  %u held of %llu: %u prefetched\n", nh,
	       (unsigned long long)cap, n);
	CHECK(n <= cap - nh);	/* only clean unreferenced ones evicted */
	CHECK(stats(fs).cache_bufs <= cap);
	CHECK_EQ(count_bad(fs, nh, nh + 64, 1, 7), 0);
	for (unsigned i = 0; i < nh; i++) {
		CHECK_EQ(((struct fs_xattr_blk *)held[i]->data)->count, 7);
		fs_buf_put(held[i]);
	}
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* Prefetched, never used, evicted: counted as wasted. */
static void test_wasted(void)
{
	struct fs_core_stats a, b;
	struct bd_dev *bd;
	struct fs *fs;

	REQUIRE((fs = cold_fs(&bd, 2, 8)) != NULL);
	REQUIRE(fs_cache_capacity(fs) >= 4 * 100);
	a = stats(fs);
	CHECK_EQ(fs_buf_readahead(fs, blks, 100), 0);
	CHECK_EQ(count_bad(fs, 1000, 3000, 1, 2), 0);	/* evicts them */
	b = stats(fs);
	CHECK_EQ(b.ra_wasted - a.ra_wasted, 100);
	CHECK_EQ(b.ra_hits, a.ra_hits);
	CHECK_EQ(b.ra_unused, 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* A failed prefetch read is forgotten; the demand read then succeeds. */
static void test_read_error(void)
{
	struct bd_dev *bd, *fbd;
	struct fs_core_stats a, b;
	struct bd_fault *f;
	struct fs *fs;

	REQUIRE((fs = cold_fs(&bd, 8, 16)) != NULL);
	CHECK_EQ(fs_core_unmount(fs), 0);
	REQUIRE(bd_fault_open(bd, &fbd, &f) == 0);
	REQUIRE((fs = cf_mount(fbd, 16)) != NULL);
	a = stats(fs);
	bd_fault_fail_nth(f, BD_READ, 1, 0);
	CHECK_EQ(fs_buf_readahead(fs, blks, 300), -EIO);
	b = stats(fs);
	CHECK_EQ(b.ra_errors - a.ra_errors, 1);
	CHECK(b.ra_unused < 300);
	CHECK_EQ(count_bad(fs, 0, 300, 1, 8), 0);
	b = stats(fs);
	CHECK(b.cache_misses > a.cache_misses);	/* the failed run again */
	CHECK_EQ(b.ra_unused, 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(fbd);
}

/* Unmount right after prefetching: waits for the reads in flight. */
static void test_unmount_inflight(void)
{
	struct bd_dev *bd;
	struct fs *fs;

	REQUIRE((fs = cold_fs(&bd, 9, 64)) != NULL);
	CHECK(fs_buf_prefetch(fs, blks, NBLK) > 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	REQUIRE((fs = cf_mount(bd, 64)) != NULL);
	CHECK_EQ(count_bad(fs, 0, NBLK, 13, 9), 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

struct racer {
	struct fs *fs;
	uint64_t seed;
	int prefetch;
	unsigned bad;
};

static void *race(void *p)
{
	struct racer *r = p;
	uint64_t s = r->seed | 1;

	for (unsigned i = 0; i < 3000; i++) {
		unsigned k;
		uint32_t v;

		s ^= s >> 12;
		s ^= s << 25;
		s ^= s >> 27;
		k = (unsigned)((s * 0x2545F4914F6CDD1Dull) >> 33) % (NBLK - 64);
		if (r->prefetch)
			fs_buf_prefetch(r->fs, blks + k, 64);
		else if (cf_read_val(r->fs, blks[k], &v) < 0 || v != 4)
			r->bad++;
	}
	return NULL;
}

/* Prefetchers and readers at once, through a small cache. */
static void test_race(void)
{
	uint64_t seed = t_seed();
	struct racer r[4];
	pthread_t th[4];
	struct bd_dev *bd;
	struct fs *fs;

	REQUIRE((fs = cold_fs(&bd, 4, 2)) != NULL);	/* a small cache */
	for (unsigned i = 0; i < 4; i++) {
		r[i] = (struct racer){ fs, seed + i, i < 2, 0 };
		pthread_create(&th[i], NULL, race, &r[i]);
	}
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(r[i].bad, 0);
	}
	CHECK(stats(fs).cache_bufs <= fs_cache_capacity(fs));
	CHECK(stats(fs).ra_unused <= fs_cache_capacity(fs) / 4);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_merged_hits);
	T_RUN(test_gaps);
	T_RUN(test_bounce_reuse);
	T_RUN(test_bound);
	T_RUN(test_dirty_kept);
	T_RUN(test_cache_full);
	T_RUN(test_wasted);
	T_RUN(test_read_error);
	T_RUN(test_unmount_inflight);
	T_RUN(test_race);
	return t_done();
}
