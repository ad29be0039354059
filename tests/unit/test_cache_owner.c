/*
 * test_cache_owner.c — per-owner storage for the cluster glocks
 * (fs_core_priv.h "struct fs_owner"): the owner of every block type is
 * derived from its content (on read, on prefetch, on creation, a new
 * BTREE/XATTR block once its owner field is filled); fs_cache_drop_owner
 * drops exactly that owner's clean buffers; fs_journal_sync_owner writes
 * nothing for a clean owner and, for a dirty one, leaves a journal whose
 * replay writes nothing; the owner table stays bounded after 100,000
 * owners; a prefetched copy that fails its check is read again; a
 * prefetch racing a drop of its block's owner (its completion held by
 * the fault device) is not cached, and drops do not wait for it unless
 * the ring of drops is full; writer threads and a demoter racing on
 * owners (seeded).
 *
 * With UCFS_OWNER_BENCH=PATH (a file, created, 64 MiB) it also times
 * fs_journal_sync_owner of a clean owner against fs_journal_writeback
 * with other dirty state on that file (real flushes) and prints the
 * figures, and times the journal's part of a lock hand-over (an
 * appender's fsync, then the sync of its inode owner) with checkpoint
 * records against the header move of a filesystem without JCKPT; no
 * assertion is made on the times.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fusefs/core/fs_core_priv.h"
#include "core_fixture.h"
#include "harness.h"

static struct fs_owner OI(uint64_t n) {
	return (struct fs_owner){FS_OWNER_INODE, n};
}

/* In one transaction: a new block of @type (allocated) whose owner field
 * (BTREE, XATTR) is @owner; checkpointed home. 0 on failure. */
static uint64_t
new_block(struct fs *fs, unsigned type, uint64_t owner)
{
	struct fs_tx *tx;
	struct fs_buf *b;
	uint64_t blk = 0;
	uint32_t len;

	if (fs_tx_begin(fs, 2 + 2 * fs_alloc_credits(fs), &tx) < 0)
		return 0;
	if (fs_alloc(tx, 0, 1, 1, &blk, &len) < 0 ||
	    fs_buf_new(tx, blk, type, &b) < 0) {
		fs_tx_end(tx);
		return 0;
	}
	if (type == FS_BT_BTREE)
		((struct fs_btree_blk *)b->data)->owner = owner;
	else if (type == FS_BT_XATTR)
		((struct fs_xattr_blk *)b->data)->owner = owner;
	fs_buf_put(b);
	if (fs_tx_end(tx) < 0 || fs_journal_checkpoint(fs, FS_CR_SYNC) < 0)
		return 0;
	return blk;
}

/* The owner the cache recorded for @blk (read if not cached). */
static struct fs_owner cached_owner(struct fs *fs, uint64_t blk)
{
	struct fs_owner o = {0xeeee, 0};
	struct fs_buf *b;

	if (fs_buf_read(fs, blk, 0, &b) == 0) {
		o = fs_cache_owner(b);
		fs_buf_put(b);
	}
	return o;
}

static int cached(struct fs *fs, uint64_t blk)
{
	struct fs_buf *b = fs_cache_lookup(fs, blk);

	fs_buf_put(b);
	return b != NULL;
}

/* Rewrite the count field of xattr block @blk in @tx. */
static int touch(struct fs_tx *tx, uint64_t blk, uint32_t v)
{
	struct fs_buf *b;
	int ret = fs_buf_read(fs_tx_fs(tx), blk, FS_BT_XATTR, &b);

	if (ret == 0)
		ret = fs_tx_write(tx, b);
	if (ret == 0)
		((struct fs_xattr_blk *)b->data)->count = v;
	fs_buf_put(b);
	return ret;
}

/* Every block type: the owner recorded at creation, after a cold read
 * (remount) and after a prefetch (no demand read), and fs_owner_of on
 * headers that are not metadata of an owner. */
static void test_owner_of(void)
{
	struct bd_dev *bd = cf_ram_fs(64, 4, 8);
	static const unsigned types[4] = {FS_BT_INODE, FS_BT_BTREE, FS_BT_XATTR,
					  FS_BT_REFCOUNT};
	uint64_t blk[4], want[4], g1;
	struct fs *fs;
	uint8_t *d;

	REQUIRE(bd != NULL && (fs = cf_mount(bd, 16)) != NULL);
	for (int i = 0; i < 4; i++) {
		blk[i] = new_block(fs, types[i], 777 + i);
		REQUIRE(blk[i] != 0);
		want[i] = i == 0 || i == 3 ? blk[i] : 777 + (uint64_t)i;
		CHECK(fs_owner_eq(cached_owner(fs, blk[i]), OI(want[i])));
	}
	REQUIRE(fs->sb.rgrp_count >= 2);
	g1 = fs_rgrp_blk(&fs->sb, 1);
	CHECK(fs_owner_eq(cached_owner(fs, g1),
			  (struct fs_owner){FS_OWNER_RGRP, 1}));
	CHECK(fs_owner_eq(cached_owner(fs, g1 + 1), /* its bitmap */
			  (struct fs_owner){FS_OWNER_RGRP, 1}));
	CHECK(fs_owner_eq(cached_owner(fs, fs_rgrp_blk(&fs->sb, 0)),
			  (struct fs_owner){FS_OWNER_RGRP, 0}));
	CHECK_EQ(fs_core_unmount(fs), 0);

	/* cold: derived on read */
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	for (int i = 0; i < 4; i++)
		CHECK(fs_owner_eq(cached_owner(fs, blk[i]), OI(want[i])));
	CHECK_EQ(fs_core_unmount(fs), 0);

	/* prefetched, never demanded: on the owner's chain all the same */
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	CHECK_EQ(fs_buf_readahead(fs, blk, 4), 0);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(fs_cache_owner_count(fs, OI(want[i])), 1);

	/* not owned: superblock, slot info, a foreign or torn header */
	d = bd_buf_alloc(FS_BLOCK_SIZE);
	REQUIRE(d != NULL);
	CHECK_EQ(bd_read(bd, d, FS_BLOCK_SIZE, 0), 0);
	CHECK_EQ(fs_owner_of(fs, 0, d).type, FS_OWNER_NONE);
	CHECK_EQ(bd_read(bd, d, FS_BLOCK_SIZE, blk[0] << FS_BLOCK_SHIFT), 0);
	CHECK(fs_owner_eq(fs_owner_of(fs, blk[0], d), OI(blk[0])));
	CHECK_EQ(fs_owner_of(fs, blk[0] + 1, d).type, FS_OWNER_NONE);
	((struct fs_blk_hdr *)d)->magic ^= 1;
	CHECK_EQ(fs_owner_of(fs, blk[0], d).type, FS_OWNER_NONE);
	CHECK_EQ(
	    bd_read(bd, d, FS_BLOCK_SIZE, fs_slotinfo_blk(0) << FS_BLOCK_SHIFT),
	    0);
	CHECK_EQ(fs_owner_of(fs, fs_slotinfo_blk(0), d).type, FS_OWNER_NONE);
	free(d);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* A new BTREE block is PENDING until its owner field is read: an owner
 * query inside the transaction finds it, and its buffer then sits on the
 * owner's chain (a drop of that owner would find it). */
static void test_pending_owner(void)
{
	struct bd_dev *bd = cf_ram_fs(64, 4, 8);
	struct fs_tx *tx;
	struct fs_buf *b;
	struct fs *fs;
	uint64_t blk;
	uint32_t len;

	REQUIRE(bd != NULL && (fs = cf_mount(bd, 16)) != NULL);
	REQUIRE(fs_tx_begin(fs, 2 + 2 * fs_alloc_credits(fs), &tx) == 0);
	REQUIRE(fs_alloc(tx, 0, 1, 1, &blk, &len) == 0);
	REQUIRE(fs_buf_new(tx, blk, FS_BT_BTREE, &b) == 0);
	CHECK_EQ(fs_cache_owner(b).type, FS_OWNER_PENDING);
	CHECK_EQ(fs_journal_owner_dirty(fs, OI(4242)), 0);
	((struct fs_btree_blk *)b->data)->owner = 4242;
	CHECK_EQ(fs_journal_owner_dirty(fs, OI(4242)), 1);
	CHECK(fs_owner_eq(fs_cache_owner(b), OI(4242)));
	CHECK_EQ(fs_cache_owner_count(fs, OI(4242)), 1);
	fs_buf_put(b);
	CHECK_EQ(fs_tx_end(tx), 0);

	/* filled after the query's look: the snapshot reads it */
	REQUIRE(fs_tx_begin(fs, 2 + 2 * fs_alloc_credits(fs), &tx) == 0);
	REQUIRE(fs_alloc(tx, 0, 1, 1, &blk, &len) == 0);
	REQUIRE(fs_buf_new(tx, blk, FS_BT_XATTR, &b) == 0);
	((struct fs_xattr_blk *)b->data)->owner = 5151;
	CHECK_EQ(fs_tx_end(tx), 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	CHECK(fs_owner_eq(fs_cache_owner(b), OI(5151)));
	CHECK_EQ(fs_journal_owner_dirty(fs, OI(5151)), 1); /* committed */
	fs_buf_put(b);
	CHECK_EQ(fs_journal_checkpoint(fs, FS_CR_SYNC), 0);
	CHECK_EQ(fs_journal_owner_dirty(fs, OI(5151)), 0);
	CHECK_EQ(fs_journal_owner_dirty(fs, OI(4242)), 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* drop_owner drops A's clean buffers (also a referenced one, unhashed),
 * keeps A's dirty one, and every buffer of B. */
static void test_drop_owner(void)
{
	struct bd_dev *bd = cf_ram_fs(64, 4, 8);
	uint64_t a[4], b[3];
	struct fs_buf *held;
	struct fs_tx *tx;
	unsigned busy = 99, n;
	struct fs *fs;

	REQUIRE(bd != NULL && (fs = cf_mount(bd, 16)) != NULL);
	for (int i = 0; i < 4; i++)
		REQUIRE((a[i] = new_block(fs, FS_BT_XATTR, 100)) != 0);
	for (int i = 0; i < 3; i++)
		REQUIRE((b[i] = new_block(fs, FS_BT_XATTR, 200)) != 0);
	CHECK_EQ(fs_cache_owner_count(fs, OI(100)), 4);
	CHECK_EQ(fs_cache_owner_count(fs, OI(200)), 3);
	REQUIRE(fs_buf_read(fs, a[1], FS_BT_XATTR, &held) == 0);
	REQUIRE(fs_tx_begin(fs, 4, &tx) == 0);
	REQUIRE(touch(tx, a[0], 7) == 0); /* dirty: stays */

	n = fs_cache_drop_owner(fs, OI(100), &busy);
	CHECK_EQ(n, 3);
	CHECK_EQ(busy, 1);
	CHECK(cached(fs, a[0]));
	for (int i = 1; i < 4; i++)
		CHECK(!cached(fs, a[i]));
	for (int i = 0; i < 3; i++)
		CHECK(cached(fs, b[i]));
	CHECK_EQ(fs_cache_owner_count(fs, OI(100)), 1);
	CHECK_EQ(fs_cache_owner_count(fs, OI(200)), 3);
	/* the holder keeps its copy; the next read gets a fresh one */
	CHECK_EQ(((struct fs_xattr_blk *)held->data)->owner, 100);
	fs_buf_put(held);
	CHECK_EQ(fs_tx_end(tx), 0);

	/* an owner nobody has, and after a sync the dirty one goes too */
	CHECK_EQ(fs_cache_drop_owner(fs, OI(300), &busy), 0);
	CHECK_EQ(busy, 0);
	CHECK_EQ(fs_journal_sync_owner(fs, OI(100)), 0);
	CHECK_EQ(fs_cache_drop_owner(fs, OI(100), &busy), 1);
	CHECK_EQ(busy, 0);
	CHECK(!cached(fs, a[0]));
	CHECK(fs_owner_eq(cached_owner(fs, a[0]), OI(100))); /* reread */
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

static uint64_t dev_writes(struct bd_dev *bd, uint64_t *flushes)
{
	struct bd_stats st;

	bd_stats_get(bd, &st);
	if (flushes != NULL)
		*flushes = st.flush.count;
	return st.write.count;
}

/* 1 if home block @blk on the device has count @v. */
static int home_count(struct bd_dev *bd, uint64_t blk, uint32_t v)
{
	struct fs_xattr_blk *x = bd_buf_alloc(FS_BLOCK_SIZE);
	int ok;

	ok = x != NULL &&
	     bd_read(bd, x, FS_BLOCK_SIZE, blk << FS_BLOCK_SHIFT) == 0 &&
	     x->count == v;
	free(x);
	return ok;
}

/*
 * A clean owner: sync writes and flushes nothing while B is dirty.
 * A dirty one (running and committed transactions): sync writes B home
 * and a crash right after it replays nothing. Control: the same crash
 * after a plain commit replays B's transaction.
 */
static void sync_case(int use_sync_owner)
{
	struct bd_dev *bd = cf_ram_fs(64, 4, 8);
	struct fs_core_stats st;
	uint64_t a, b1, b2, w0, f0, f1;
	struct fs_tx *tx;
	struct fs *fs;

	REQUIRE(bd != NULL && (fs = cf_mount(bd, 16)) != NULL);
	REQUIRE((a = new_block(fs, FS_BT_XATTR, 100)) != 0);
	REQUIRE((b1 = new_block(fs, FS_BT_XATTR, 200)) != 0);
	REQUIRE((b2 = new_block(fs, FS_BT_XATTR, 200)) != 0);
	/* B: one committed transaction and one running */
	REQUIRE(fs_tx_begin(fs, 4, &tx) == 0);
	REQUIRE(touch(tx, b1, 11) == 0);
	CHECK_EQ(fs_tx_end(tx), 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	REQUIRE(fs_tx_begin(fs, 4, &tx) == 0);
	REQUIRE(touch(tx, b2, 22) == 0);
	CHECK_EQ(fs_tx_end(tx), 0);

	CHECK_EQ(fs_journal_owner_dirty(fs, OI(100)), 0);
	CHECK_EQ(fs_journal_owner_dirty(fs, OI(200)), 1);
	w0 = dev_writes(bd, &f0);
	CHECK_EQ(fs_journal_sync_owner(fs, OI(100)), 0);
	CHECK_EQ(dev_writes(bd, &f1), w0);
	CHECK_EQ(f1, f0);
	CHECK(!home_count(bd, b1, 11) && !home_count(bd, b2, 22));

	if (use_sync_owner) {
		CHECK_EQ(fs_journal_sync_owner(fs, OI(200)), 0);
		CHECK(dev_writes(bd, NULL) > w0);
		CHECK_EQ(fs_journal_owner_dirty(fs, OI(200)), 0);
		CHECK(home_count(bd, b1, 11) && home_count(bd, b2, 22));
	} else {
		CHECK_EQ(fs_journal_sync(fs), 0);
	}
	fs_core_abandon(fs); /* crash */
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	fs_core_stats_get(fs, &st);
	if (use_sync_owner) {
		CHECK_EQ(st.replay_tx, 0);
		CHECK_EQ(st.replay_blocks, 0);
	} else {
		CHECK(st.replay_tx >= 2);
	}
	CHECK(home_count(bd, b1, 11) && home_count(bd, b2, 22));
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

static void test_sync_owner(void)
{
	sync_case(1);
}

static void test_sync_control(void)
{
	sync_case(0);
}

/* Data written after an inode's last transaction (truncate's zeroing):
 * the sync of a clean INODE owner still completes and flushes it; an
 * RGRP owner's sync does not touch data. */
static void test_sync_owner_data(void)
{
	struct bd_dev *bd = cf_ram_fs(64, 4, 8);
	uint8_t *buf = bd_buf_alloc(FS_BLOCK_SIZE);
	uint8_t *raw = bd_buf_alloc(FS_BLOCK_SIZE);
	uint64_t off, w0, f0, f1;
	struct fs *fs;

	REQUIRE(buf != NULL && raw != NULL && bd != NULL);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	off = (fs->sb.total_blocks - 1) << FS_BLOCK_SHIFT;
	memset(buf, 0xc3, FS_BLOCK_SIZE);
	REQUIRE(fs_data_write(fs, buf, FS_BLOCK_SIZE, off) == 0);
	w0 = dev_writes(bd, &f0);
	CHECK_EQ(fs_journal_sync_owner(fs, (struct fs_owner){FS_OWNER_RGRP, 0}),
		 0);
	CHECK_EQ(dev_writes(bd, &f1), w0); /* still in its open run */
	CHECK_EQ(f1, f0);
	CHECK_EQ(fs_journal_owner_dirty(fs, OI(12345)), 0);
	CHECK_EQ(fs_journal_sync_owner(fs, OI(12345)), 0);
	CHECK_EQ(dev_writes(bd, &f1), w0 + 1);
	CHECK_EQ(f1, f0 + 1);
	CHECK(bd_read(bd, raw, FS_BLOCK_SIZE, off) == 0 &&
	      memcmp(raw, buf, FS_BLOCK_SIZE) == 0);
	/* nothing in flight, nothing unflushed: no I/O */
	CHECK_EQ(fs_journal_sync_owner(fs, OI(12345)), 0);
	CHECK_EQ(dev_writes(bd, &f0), w0 + 1);
	CHECK_EQ(f0, f1);
	CHECK_EQ(fs_core_unmount(fs), 0);
	free(buf);
	free(raw);
	bd_close(bd);
}

/* 100,000 owners, ten per transaction, each committed: the table holds
 * only the owners since the last checkpoint (the journal's own ones when
 * the log is half full, ours every 1,000 transactions), never the
 * 100,000. */
static void test_table_bounded(void)
{
	struct bd_dev *bd = cf_ram_fs(64, 16, 8);
	uint64_t blk[10], next = 1000000;
	size_t max = 0, n;
	struct fs *fs;

	REQUIRE(bd != NULL && (fs = cf_mount(bd, 16)) != NULL);
	for (int i = 0; i < 10; i++)
		REQUIRE((blk[i] = new_block(fs, FS_BT_XATTR, 1)) != 0);
	for (int t = 0; t < 10000; t++) {
		struct fs_tx *tx;

		REQUIRE(fs_tx_begin(fs, 10, &tx) == 0);
		for (int i = 0; i < 10; i++) {
			struct fs_buf *b;

			REQUIRE(fs_buf_read(fs, blk[i], FS_BT_XATTR, &b) == 0);
			fs_cache_set_owner(b, OI(next++));
			fs_tx_write(tx, b);
			fs_buf_put(b);
		}
		REQUIRE(fs_tx_end(tx) == 0);
		CHECK_EQ(fs_journal_owner_dirty(fs, OI(next - 1)), 1);
		REQUIRE(fs_journal_sync(fs) == 0);
		n = fs_journal_owner_count(fs);
		if (n > max)
			max = n;
		if (t % 1000 == 999) {
			REQUIRE(fs_journal_checkpoint(fs, FS_CR_SYNC) == 0);
			CHECK_EQ(fs_journal_owner_count(fs), 0);
		}
	}
	printf("owner table: at most %zu entries for %llu owners\n", max,
	       (unsigned long long)(next - 1000000));
	CHECK_EQ(next - 1000000, 100000);
	CHECK(max <= 10000);
	CHECK(max >= 100);
	CHECK_EQ(fs_journal_owner_dirty(fs, OI(next - 1)), 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/*
 * A prefetched copy that fails its check (read while the block held
 * something else; another node has written it since) is read again
 * before the read fails; a block bad on the device still fails, once
 * counted.
 */
static void test_stale_prefetch(void)
{
	struct bd_dev *bd = cf_ram_fs(64, 4, 8);
	uint8_t *good = bd_buf_alloc(FS_BLOCK_SIZE);
	uint8_t *junk = bd_buf_alloc(FS_BLOCK_SIZE);
	struct fs_core_stats st;
	struct fs_buf *b;
	struct fs *fs;
	uint64_t blk;

	REQUIRE(good != NULL && junk != NULL && bd != NULL);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	REQUIRE((blk = new_block(fs, FS_BT_XATTR, 300)) != 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	REQUIRE(bd_read(bd, good, FS_BLOCK_SIZE, blk << FS_BLOCK_SHIFT) == 0);
	memset(junk, 0x5a, FS_BLOCK_SIZE);

	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	REQUIRE(bd_write(bd, junk, FS_BLOCK_SIZE, blk << FS_BLOCK_SHIFT, 0) ==
		0);
	CHECK_EQ(fs_buf_readahead(fs, &blk, 1), 0); /* caches the junk */
	REQUIRE(bd_write(bd, good, FS_BLOCK_SIZE, blk << FS_BLOCK_SHIFT, 0) ==
		0);
	b = NULL;
	CHECK_EQ(fs_buf_read(fs, blk, FS_BT_XATTR, &b), 0);
	if (b != NULL)
		CHECK_EQ(((struct fs_xattr_blk *)b->data)->owner, 300);
	fs_buf_put(b);
	fs_core_stats_get(fs, &st);
	CHECK_EQ(st.bad_blocks, 0);
	CHECK_EQ(fs_core_unmount(fs), 0);

	/* bad on the device too: fails, counted once */
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	REQUIRE(bd_write(bd, junk, FS_BLOCK_SIZE, blk << FS_BLOCK_SHIFT, 0) ==
		0);
	CHECK_EQ(fs_buf_readahead(fs, &blk, 1), 0);
	CHECK_EQ(fs_buf_read(fs, blk, FS_BT_XATTR, &b), -EUCLEAN);
	fs_core_stats_get(fs, &st);
	CHECK_EQ(st.bad_blocks, 1);
	CHECK_EQ(fs_core_unmount(fs), 0);
	free(good);
	free(junk);
	bd_close(bd);
}

/* ---- drops racing a prefetch (fs_cache.c "Drops racing prefetches") ---- */

/* A fs_cache_drop_owner in its own thread. */
struct dropper {
	struct fs *fs;
	struct fs_owner o;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done; /* mu */
};

static void *drop_main(void *arg)
{
	struct dropper *d = arg;

	fs_cache_drop_owner(d->fs, d->o, NULL);
	pthread_mutex_lock(&d->mu);
	d->done = 1;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

static int drop_start(struct dropper *d, struct fs *fs, struct fs_owner o)
{
	memset(d, 0, sizeof(*d));
	d->fs = fs;
	d->o = o;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	return pthread_create(&d->th, NULL, drop_main, d);
}

/* 1 if the drop returned within @secs (a liveness bound, far above any
 * cache-lock hold: a drop that waits for the held prefetch never
 * returns while it is held). */
static int drop_done_within(struct dropper *d, int secs)
{
	struct timespec ts;
	int done;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += secs;
	pthread_mutex_lock(&d->mu);
	while (!d->done &&
	       pthread_cond_timedwait(&d->cv, &d->mu, &ts) != ETIMEDOUT)
		;
	done = d->done;
	pthread_mutex_unlock(&d->mu);
	return done;
}

static void drop_join(struct dropper *d)
{
	pthread_join(d->th, NULL);
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->cv);
}

/* The count field of xattr block @blk as a demand read sees it, or -1. */
static int64_t read_count(struct fs *fs, uint64_t blk)
{
	struct fs_buf *b;
	int64_t v = -1;

	if (fs_buf_read(fs, blk, FS_BT_XATTR, &b) == 0) {
		v = ((struct fs_xattr_blk *)b->data)->count;
		fs_buf_put(b);
	}
	return v;
}

/* A demand read of xattr block @blk in its own thread. */
struct reader {
	struct fs *fs;
	uint64_t blk;
	pthread_t th;
	int64_t count; /* read_count's, once joined */
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;

	r->count = read_count(r->fs, r->blk);
	return NULL;
}

/*
 * Xattr block *@blk of owner 300 on a RAM device with count 0 on it; the
 * same block with count 7 in @fresh. Mounted on a fault device (*@f)
 * (*@f, device *@dev) over that RAM device (*@ram).
 */
static struct fs *race_setup(struct bd_dev **ram, struct bd_dev **dev,
			     struct bd_fault **f, uint64_t *blk, void *fresh)
{
	uint8_t *old = bd_buf_alloc(FS_BLOCK_SIZE);
	struct fs_tx *tx;
	struct fs *fs = NULL;
	uint64_t off;

	*ram = cf_ram_fs(64, 4, 8);
	if (old == NULL || *ram == NULL || (fs = cf_mount(*ram, 16)) == NULL)
		goto out;
	*blk = new_block(fs, FS_BT_XATTR, 300);
	off = *blk << FS_BLOCK_SHIFT;
	if (*blk == 0 || bd_read(*ram, old, FS_BLOCK_SIZE, off) != 0 ||
	    fs_tx_begin(fs, 4, &tx) < 0)
		goto out_umount;
	if (touch(tx, *blk, 7) < 0 || fs_tx_end(tx) < 0 ||
	    fs_journal_checkpoint(fs, FS_CR_SYNC) < 0)
		goto out_umount;
	if (fs_core_unmount(fs) < 0)
		goto out;
	fs = NULL;
	if (bd_read(*ram, fresh, FS_BLOCK_SIZE, off) != 0 ||
	    bd_write(*ram, old, FS_BLOCK_SIZE, off, 0) != 0 ||
	    bd_fault_open(*ram, dev, f) != 0)
		goto out;
	fs = cf_mount(*dev, 16);
	goto out;
out_umount:
	fs_core_unmount(fs);
	fs = NULL;
out:
	free(old);
	return fs;
}

/*
 * A prefetch of X reads X's old content and its completion is held; X's
 * owner is dropped (and another owner: neither drop waits for the held
 * prefetch), X is rewritten on the device, then the completion arrives:
 * a demand read (waiting on the prefetch or coming after it) returns the
 * device's new content, not the prefetched one.
 */
static void test_drop_racing_prefetch(void)
{
	uint8_t *fresh = bd_buf_alloc(FS_BLOCK_SIZE);
	struct fs_buf *b;
	struct dropper d;
	struct reader rd;
	struct fs_core_stats st;
	struct bd_dev *ram, *dev;
	struct bd_fault *f;
	struct fs *fs;
	uint64_t blk = 0;

	REQUIRE(fresh != NULL);
	REQUIRE((fs = race_setup(&ram, &dev, &f, &blk, fresh)) != NULL);
	CHECK_EQ(read_count(fs, blk), 0);
	fs_cache_drop_all(fs, NULL);

	bd_fault_hold_async(f, 1);
	CHECK_EQ(fs_buf_prefetch(fs, &blk, 1), 1);
	bd_fault_wait_held(f, 1); /* read the old copy */
	REQUIRE(bd_write(ram, fresh, FS_BLOCK_SIZE, blk << FS_BLOCK_SHIFT, 0) ==
		0);
	REQUIRE(drop_start(&d, fs, OI(999)) == 0);
	CHECK(drop_done_within(&d, 20));
	bd_fault_hold_async(f, d.done); /* else let the drop end */
	drop_join(&d);
	REQUIRE(drop_start(&d, fs, OI(300)) == 0);
	CHECK(drop_done_within(&d, 20));
	bd_fault_hold_async(f, d.done);
	drop_join(&d);

	/* a demand reader, most likely waiting on the held prefetch */
	rd.fs = fs;
	rd.blk = blk;
	REQUIRE(pthread_create(&rd.th, NULL, reader_main, &rd) == 0);
	usleep(20000);
	bd_fault_hold_async(f, 0);
	pthread_join(rd.th, NULL);
	CHECK_EQ(rd.count, 7);
	CHECK_EQ(read_count(fs, blk), 7);
	fs_core_stats_get(fs, &st);
	CHECK_EQ(st.ra_discarded, 1);
	CHECK_EQ(st.ra_drain_waits, 0);

	/* a prefetch issued after those drops is cached as usual */
	fs_cache_drop_all(fs, NULL);
	CHECK_EQ(fs_buf_readahead(fs, &blk, 1), 0);
	b = NULL;
	CHECK_EQ(fs_buf_read_cached(fs, blk, FS_BT_XATTR, &b), 0);
	if (b != NULL)
		CHECK_EQ(((struct fs_xattr_blk *)b->data)->count, 7);
	fs_buf_put(b);
	fs_core_stats_get(fs, &st);
	CHECK_EQ(st.ra_discarded, 1);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(dev);
	free(fresh);
}

/*
 * The ring of drops is full of entries the held prefetch still needs:
 * the next drop (of X's owner) waits for it as the old rule did, and a
 * read of X after it returns the device's new content.
 */
static void test_drop_ring_full(void)
{
	uint8_t *fresh = bd_buf_alloc(FS_BLOCK_SIZE);
	struct fs_core_stats st;
	struct bd_dev *ram, *dev;
	struct bd_fault *f;
	struct dropper d;
	struct fs *fs;
	uint64_t blk = 0;
	int k, ok = 1;

	REQUIRE(fresh != NULL);
	REQUIRE((fs = race_setup(&ram, &dev, &f, &blk, fresh)) != NULL);
	bd_fault_hold_async(f, 1);
	CHECK_EQ(fs_buf_prefetch(fs, &blk, 1), 1);
	bd_fault_wait_held(f, 1);
	REQUIRE(bd_write(ram, fresh, FS_BLOCK_SIZE, blk << FS_BLOCK_SHIFT, 0) ==
		0);
	for (k = 0; k < (int)FS_CACHE_RA_DROPS && ok; k++) {
		REQUIRE(drop_start(&d, fs, OI(1000 + k)) == 0);
		ok = drop_done_within(&d, 20);
		bd_fault_hold_async(f, ok);
		drop_join(&d);
	}
	CHECK(ok);
	REQUIRE(drop_start(&d, fs, OI(300)) == 0);
	for (k = 0; k < 20000; k++) { /* until it waits: 20 s at most */
		fs_core_stats_get(fs, &st);
		if (st.ra_drain_waits > 0)
			break;
		usleep(1000);
	}
	CHECK_EQ(st.ra_drain_waits, 1);
	pthread_mutex_lock(&d.mu);
	CHECK(!d.done);
	pthread_mutex_unlock(&d.mu);
	bd_fault_hold_async(f, 0);
	drop_join(&d);
	CHECK_EQ(read_count(fs, blk), 7);
	fs_core_stats_get(fs, &st);
	CHECK_EQ(st.ra_drain_waits, 1);
	CHECK_EQ(st.ra_discarded, 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(dev);
	free(fresh);
}

/*
 * Concurrency: writer threads change the blocks of their owners (each
 * owner under a mutex, standing in for its glock) in transactions while
 * a demoter takes owners away: under the owner's mutex it syncs and
 * drops it, and then every block of it must be home on the device with
 * the last value written, none left cached or dirty. Seeded.
 */
enum { CC_WRITERS = 3, CC_OWNERS = 12, CC_BLKS = 3, CC_ROUNDS = 300 };

struct cc_owner {
	pthread_mutex_t mu;
	uint64_t blk[CC_BLKS];
	uint32_t ver;
};

struct cc_state {
	struct fs *fs;
	struct bd_dev *bd;
	struct cc_owner own[CC_OWNERS];
	uint64_t seed;
	int stop; /* atomic */
	int bad;  /* atomic: failed checks in threads */
};

static uint64_t cc_rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

struct cc_arg {
	struct cc_state *st;
	unsigned id;
};

/* One transaction over owner @k's blocks: count = ++ver. */
static int cc_write(struct cc_state *st, unsigned k)
{
	struct cc_owner *o = &st->own[k];
	struct fs_tx *tx;
	int ret;

	ret = fs_tx_begin(st->fs, CC_BLKS, &tx);
	if (ret < 0)
		return ret;
	o->ver++;
	for (unsigned i = 0; i < CC_BLKS && ret == 0; i++)
		ret = touch(tx, o->blk[i], o->ver);
	return fs_tx_end(tx) < 0 ? -EIO : ret;
}

static void *cc_writer(void *p)
{
	struct cc_arg *a = p;
	struct cc_state *st = a->st;
	uint64_t x = st->seed * 2654435761u + a->id + 1;

	while (!__atomic_load_n(&st->stop, __ATOMIC_ACQUIRE)) {
		/* writers share owners: the mutex orders them */
		unsigned k = (unsigned)(cc_rnd(&x) % CC_OWNERS);

		pthread_mutex_lock(&st->own[k].mu);
		if (cc_write(st, k) < 0)
			__atomic_add_fetch(&st->bad, 1, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&st->own[k].mu);
	}
	return NULL;
}

/* Owner @k given up: synced, dropped, every block home. Mutex held. */
static int cc_demote(struct cc_state *st, unsigned k, uint64_t *x)
{
	struct cc_owner *o = &st->own[k];
	unsigned busy = 0;
	int ok = 1;

	if (fs_journal_sync_owner(st->fs, OI(100 + k)) < 0)
		return 0;
	if (cc_rnd(x) % 2) { /* to NL (else to PR: kept cached) */
		fs_cache_drop_owner(st->fs, OI(100 + k), &busy);
		for (unsigned i = 0; i < CC_BLKS; i++)
			ok &= !cached(st->fs, o->blk[i]);
	}
	ok &= busy == 0;
	ok &= fs_journal_owner_dirty(st->fs, OI(100 + k)) == 0;
	for (unsigned i = 0; i < CC_BLKS; i++)
		ok &= home_count(st->bd, o->blk[i], o->ver);
	return ok;
}

static void test_concurrent_demotes(void)
{
	struct cc_state *st = calloc(1, sizeof(*st));
	pthread_t th[CC_WRITERS];
	struct cc_arg args[CC_WRITERS];
	uint64_t x;
	int fails = 0;

	REQUIRE(st != NULL);
	st->seed = t_seed();
	x = st->seed | 1;
	st->bd = cf_ram_fs(64, 8, 8);
	REQUIRE(st->bd != NULL && (st->fs = cf_mount(st->bd, 16)) != NULL);
	for (unsigned k = 0; k < CC_OWNERS; k++) {
		pthread_mutex_init(&st->own[k].mu, NULL);
		for (unsigned i = 0; i < CC_BLKS; i++)
			REQUIRE((st->own[k].blk[i] = new_block(
				     st->fs, FS_BT_XATTR, 100 + k)) != 0);
	}
	for (unsigned t = 0; t < CC_WRITERS; t++) {
		args[t] = (struct cc_arg){st, t};
		REQUIRE(pthread_create(&th[t], NULL, cc_writer, &args[t]) == 0);
	}
	for (unsigned r = 0; r < CC_ROUNDS; r++) {
		unsigned k = (unsigned)(cc_rnd(&x) % CC_OWNERS);

		pthread_mutex_lock(&st->own[k].mu);
		fails += !cc_demote(st, k, &x);
		pthread_mutex_unlock(&st->own[k].mu);
	}
	__atomic_store_n(&st->stop, 1, __ATOMIC_RELEASE);
	for (unsigned t = 0; t < CC_WRITERS; t++)
		pthread_join(th[t], NULL);
	CHECK_EQ(fails, 0);
	CHECK_EQ(st->bad, 0);
	CHECK_EQ(fs_core_unmount(st->fs), 0);
	bd_close(st->bd);
	free(st);
}

/* ---- bench (UCFS_OWNER_BENCH=file) ------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

/* Dirty @n blocks of owner B (one transaction, committed if @commit). */
static int dirty_b(struct fs *fs, const uint64_t *b, unsigned n, uint32_t v,
		   int commit)
{
	struct fs_tx *tx;
	int ret = fs_tx_begin(fs, n, &tx);

	for (unsigned i = 0; i < n && ret == 0; i++)
		ret = touch(tx, b[i], v);
	if (ret == 0)
		ret = fs_tx_end(tx);
	if (ret == 0 && commit)
		ret = fs_journal_sync(fs);
	return ret;
}

static void bench(const char *path)
{
	enum { NB = 64, ROUNDS = 200 };
	struct fs_mkfs_params p;
	uint64_t a, b[NB], t_clean = 0, t_wb = 0, t_dirty = 0, t0;
	struct bd_dev *bd;
	struct fs *fs;
	char why[200];
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	REQUIRE(fd >= 0 && ftruncate(fd, 64 << 20) == 0);
	close(fd);
	REQUIRE(bd_file_open(path, 0, &bd) == 0);
	fs_mkfs_defaults(&p);
	p.journal_mb = 4;
	p.rgrp_mb = 8;
	REQUIRE(fs_mkfs(bd, &p, why, sizeof(why)) == 0);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	REQUIRE((a = new_block(fs, FS_BT_XATTR, 100)) != 0);
	for (int i = 0; i < NB; i++)
		REQUIRE((b[i] = new_block(fs, FS_BT_XATTR, 200)) != 0);
	for (int r = 0; r < ROUNDS; r++) {
		/* B: a committed transaction and a running one */
		REQUIRE(dirty_b(fs, b, NB, 2 * r, 1) == 0);
		REQUIRE(dirty_b(fs, b, NB / 2, 2 * r + 1, 0) == 0);
		t0 = now_ns();
		REQUIRE(fs_journal_sync_owner(fs, OI(100)) == 0);
		t_clean += now_ns() - t0;
		t0 = now_ns();
		REQUIRE(fs_journal_writeback(fs) == 0);
		t_wb += now_ns() - t0;
		REQUIRE(dirty_b(fs, b, NB, 2 * r, 1) == 0);
		REQUIRE(dirty_b(fs, b, NB / 2, 2 * r + 1, 0) == 0);
		t0 = now_ns();
		REQUIRE(fs_journal_sync_owner(fs, OI(200)) == 0);
		t_dirty += now_ns() - t0;
	}
	printf("bench sync_owner (%d rounds, %d dirty blocks of another owner,"
	       " %s):\n  clean owner %.3f us  writeback %.1f us  dirty owner"
	       " %.1f us  (writeback / clean %.0fx)\n",
	       ROUNDS, NB, path, (double)t_clean / ROUNDS / 1000,
	       (double)t_wb / ROUNDS / 1000, (double)t_dirty / ROUNDS / 1000,
	       t_clean ? (double)t_wb / (double)t_clean : 0.0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
	unlink(path);
}

/* A 64 MiB file at @path with a fresh filesystem, JCKPT on or off (a
 * filesystem made before it), mounted. NULL on failure. */
static struct fs *bench_fs(const char *path, int jckpt, struct bd_dev **bd)
{
	struct fs_mkfs_params p;
	struct fs_sb *sb = bd_buf_alloc(FS_BLOCK_SIZE);
	char why[200];
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	int ok = fd >= 0 && ftruncate(fd, 64 << 20) == 0 && sb != NULL;

	if (fd >= 0)
		close(fd);
	ok = ok && bd_file_open(path, 0, bd) == 0;
	fs_mkfs_defaults(&p);
	p.journal_mb = 4;
	p.rgrp_mb = 8;
	ok = ok && fs_mkfs(*bd, &p, why, sizeof(why)) == 0;
	for (uint64_t b = 0; ok && !jckpt && b < 2; b++) {
		ok = bd_read(*bd, sb, FS_BLOCK_SIZE, b * FS_BLOCK_SIZE) == 0;
		sb->feature_incompat &= ~FS_FEATURE_INCOMPAT_JCKPT;
		fs_blk_update_crc(sb);
		ok = ok && bd_write(*bd, sb, FS_BLOCK_SIZE, b * FS_BLOCK_SIZE,
				    0) == 0;
	}
	free(sb);
	return ok ? cf_mount(*bd, 16) : NULL;
}

/* One appender's turn on @fs: a 4 KiB data write and its inode block in
 * a transaction, fsync (the commit), then the lock leaves (sync of the
 * inode owner: checkpoint). Adds the times to @t_fsync / @t_sync. */
static int bench_turn(struct fs *fs, uint64_t blk, uint64_t data_off,
		      void *data, uint32_t v, uint64_t *t_fsync,
		      uint64_t *t_sync)
{
	uint64_t t0;
	int ret = fs_data_write(fs, data, FS_BLOCK_SIZE, data_off);

	if (ret == 0)
		ret = dirty_b(fs, &blk, 1, v, 0);
	t0 = now_ns();
	if (ret == 0)
		ret = fs_journal_sync(fs);
	*t_fsync += now_ns() - t0;
	t0 = now_ns();
	if (ret == 0)
		ret = fs_journal_sync_owner(fs, OI(300));
	*t_sync += now_ns() - t0;
	return ret;
}

/* The journal's part of a lock hand-over with checkpoint records and with
 * the header move (JCKPT off), interleaved in blocks of 20 turns on two
 * files beside @path, each with real flushes. */
static void bench_handover(const char *path)
{
	enum { ROUNDS = 400, BLOCK = 20 };
	char alt[4096];
	struct bd_dev *bd[2];
	struct fs *fs[2];
	uint64_t blk[2], t_f[2] = {0}, t_s[2] = {0}, w0[2], w1[2];
	uint8_t *data = bd_buf_alloc(FS_BLOCK_SIZE);
	struct bd_stats st;

	snprintf(alt, sizeof(alt), "%s.old", path);
	REQUIRE(data != NULL);
	memset(data, 0x5a, FS_BLOCK_SIZE);
	for (int k = 0; k < 2; k++) {
		REQUIRE((fs[k] = bench_fs(k ? alt : path, !k, &bd[k])) != NULL);
		REQUIRE((blk[k] = new_block(fs[k], FS_BT_XATTR, 300)) != 0);
		bd_stats_get(bd[k], &st);
		w0[k] = st.flush.count + st.fua_writes;
	}
	for (int r = 0; r < ROUNDS; r++) {
		int k = (r / BLOCK) % 2;
		uint64_t off = (fs[k]->sb.total_blocks - 1 - (uint64_t)r / 2)
			       << FS_BLOCK_SHIFT;

		REQUIRE(bench_turn(fs[k], blk[k], off, data, (uint32_t)r,
				   &t_f[k], &t_s[k]) == 0);
	}
	for (int k = 0; k < 2; k++) {
		bd_stats_get(bd[k], &st);
		w1[k] = st.flush.count + st.fua_writes;
		printf("bench hand-over, %s (%d turns, %s): fsync %.1f us, "
		       "lock sync %.1f us, durability waits %.2f a turn\n",
		       k ? "header move" : "checkpoint record", ROUNDS / 2,
		       k ? alt : path, (double)t_f[k] / (ROUNDS / 2) / 1000,
		       (double)t_s[k] / (ROUNDS / 2) / 1000,
		       (double)(w1[k] - w0[k]) / (ROUNDS / 2));
		CHECK_EQ(fs_core_unmount(fs[k]), 0);
		bd_close(bd[k]);
	}
	unlink(path);
	unlink(alt);
	free(data);
}

/* drop_owner of one owner among many cached vs drop_all (RAM device). */
static void bench_drop(void)
{
	enum { NBLK = 20000, NOWN = 2000, NDROP = 200 };
	struct bd_dev *bd = cf_ram_fs(256, 16, 32);
	uint64_t *blks = calloc(NBLK, sizeof(*blks)), t0, t_own, t_all;
	unsigned busy, dropped = 0, all;
	struct fs *fs;

	REQUIRE(blks != NULL && bd != NULL);
	REQUIRE((fs = cf_mount(bd, 256)) != NULL);
	REQUIRE(cf_make_blocks(fs, blks, NBLK, 1, NULL) == 0);
	for (unsigned i = 0; i < NBLK; i++) {
		struct fs_buf *b;

		REQUIRE(fs_buf_read(fs, blks[i], FS_BT_XATTR, &b) == 0);
		fs_cache_set_owner(b, OI(1 + i % NOWN));
		fs_buf_put(b);
	}
	t0 = now_ns();
	for (unsigned k = 0; k < NDROP; k++)
		dropped += fs_cache_drop_owner(fs, OI(1 + k), &busy);
	t_own = now_ns() - t0;
	t0 = now_ns();
	all = fs_cache_drop_all(fs, &busy);
	t_all = now_ns() - t0;
	printf("bench drop: %u cached blocks of %u owners: drop_owner %.2f us"
	       " (%u blocks each), drop_all %.1f us (%u blocks)\n",
	       NBLK, NOWN, (double)t_own / NDROP / 1000, dropped / NDROP,
	       (double)t_all / 1000, all);
	CHECK_EQ(dropped, NDROP * (NBLK / NOWN));
	CHECK_EQ(fs_core_unmount(fs), 0);
	free(blks);
	bd_close(bd);
}

static void test_bench(void)
{
	const char *path = getenv("UCFS_OWNER_BENCH");

	if (path != NULL && path[0] != '\0') {
		bench(path);
		bench_handover(path);
		bench_drop();
	}
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_owner_of);
	T_RUN(test_pending_owner);
	T_RUN(test_drop_owner);
	T_RUN(test_sync_owner);
	T_RUN(test_sync_control);
	T_RUN(test_sync_owner_data);
	T_RUN(test_table_bounded);
	T_RUN(test_stale_prefetch);
	T_RUN(test_drop_racing_prefetch);
	T_RUN(test_drop_ring_full);
	T_RUN(test_concurrent_demotes);
	T_RUN(test_bench);
	return t_done();
}
