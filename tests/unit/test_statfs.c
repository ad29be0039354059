/*
 * test_statfs.c — the statfs records (FORMAT.md "Statfs records",
 * fusefs/core/fs_statfs.c): a master record plus one change record per
 * slot, moved in the transaction of every allocation and free, folded
 * into the master.
 *
 *  - mkfs: the master holds the new filesystem's counts, every change
 *    zero; an image made without the records (as before ro_compat
 *    STATFS) mounts, allocates and checks clean as before;
 *  - every transaction keeps master + changes equal to the group
 *    headers' sums; a fold moves our change into the master (change
 *    zero after it) and keeps the sum;
 *  - power loss at every device write of a workload that allocates,
 *    frees, commits and folds (seeded: --seed): fsck before any mount
 *    (the committed journal applied in memory) finds the records
 *    consistent, and so does the mount after its replay, then the
 *    unmount's fold; some crash points fall between a committed
 *    allocation and its fold (the change record is not zero after the
 *    replay) and the test says how many;
 *  - fsck finds a wrong master and fsck -y rewrites the records;
 *  - a damaged change record of our slot does not fail allocations:
 *    they go on untracked (counted), fsck -y rewrites the records;
 *  - statfs_percent: a change past that percent of the master wakes the
 *    worker for a fold long before its quantum; one below it does not;
 *  - fs_fsck_add_statfs (fsck.ucfs -O statfs): an image made without
 *    the records, with files on it, gets them (master = the groups,
 *    checked clean, used by the next mount); refused while a slot is
 *    claimed; power loss at every write of the upgrade leaves an image
 *    that mounts and that fsck -y makes clean.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core_fixture.h"
#include "fusefs/core/fs_core_priv.h"
#include "fusefs/fs.h"
#include "fusefs/fsck/fs_fsck.h"
#include "harness.h"

static struct bd_dev *ram_fs(unsigned mb, int no_statfs)
{
	struct fs_mkfs_params p;

	fs_mkfs_defaults(&p);
	p.journal_mb = 2;
	p.rgrp_mb = 8;
	p.slots = 2;
	p.no_statfs = no_statfs;
	return cf_ram_mkfs(mb, &p);
}

static struct fs *mnt_pct(struct bd_dev *bd, int slot, unsigned percent)
{
	struct fs_core_opts o;
	struct fs *fs;
	char why[200];

	fs_core_opts_init(&o);
	o.slot = slot;
	o.commit_s = 3600;
	o.statfs_quantum_s = 3600; /* folds only where the test says */
	o.statfs_percent = percent;
	if (fs_core_mount(bd, &o, &fs, why, sizeof(why)) < 0) {
		fprintf(stderr, "  mount: %s\n", why);
		return NULL;
	}
	return fs;
}

static struct fs *mnt_slot(struct bd_dev *bd, int slot)
{
	return mnt_pct(bd, slot, 0);
}

static struct fs *mnt(struct bd_dev *bd)
{
	return mnt_slot(bd, -1);
}

/* The records on the device (read directly): master + every change in
 * *@free, *@inodes; slot 0's change in *@c0 (may be NULL). 0, or -1 if
 * a record is bad. */
static int records(struct bd_dev *bd, int64_t *free_, int64_t *inodes,
		   int64_t *c0)
{
	struct fs_sb *sb = bd_buf_alloc(FS_BLOCK_SIZE);
	struct fs_statfs_rec *r = bd_buf_alloc(FS_BLOCK_SIZE);
	int ret = -1;

	*free_ = *inodes = 0;
	if (sb == NULL || r == NULL || bd_read(bd, sb, FS_BLOCK_SIZE, 0) < 0)
		goto out;
	for (unsigned i = 0; i <= sb->slot_count; i++) {
		uint64_t b = sb->statfs_blk + i;

		if (bd_read(bd, r, FS_BLOCK_SIZE, b * FS_BLOCK_SIZE) < 0 ||
		    fs_blk_verify(r, FS_BT_STATFS, b) < 0)
			goto out;
		*free_ += r->free;
		*inodes += r->dinodes;
		if (i == 1 && c0 != NULL)
			*c0 = r->free;
	}
	ret = 0;
out:
	free(sb);
	free(r);
	return ret;
}

/* The records as the mount's cache has them (master + changes). */
static void cached_records(struct fs *fs, int64_t *free_, int64_t *inodes,
			   int64_t *c0)
{
	*free_ = *inodes = 0;
	for (unsigned i = 0; i <= fs->sb.slot_count; i++) {
		const struct fs_statfs_rec *r;
		struct fs_buf *b;

		if (fs_buf_read(fs, fs->sb.statfs_blk + i, FS_BT_STATFS, &b) <
		    0) {
			*free_ = -1;
			return;
		}
		r = b->data;
		*free_ += r->free;
		*inodes += r->dinodes;
		if (i == 1 && c0 != NULL)
			*c0 = r->free;
		fs_buf_put(b);
	}
}

/* fsck (-y with @repair): its error count; printed when @fixed is NULL
 * (errors unexpected). */
static int fsck_errors(struct bd_dev *bd, int repair, uint64_t *fixed)
{
	struct fs_fsck_opts o = {.out = NULL, .repair = repair};
	struct fs_fsck_result r;

	if (fs_fsck_run(bd, &o, &r) < 0)
		return -1;
	if (r.errors != 0 && !repair && fixed == NULL) { /* unexpected */
		o.out = stderr;
		o.max_report = 8;
		fs_fsck_run(bd, &o, &r);
	}
	if (fixed != NULL)
		*fixed = r.fixed;
	return (int)r.errors;
}

/* Allocate @n blocks (one extent per call) and an inode in one
 * transaction: their starts in @blk (n + 1 entries). */
static int alloc_some(struct fs *fs, unsigned n, uint64_t *blk)
{
	struct fs_tx *tx;
	uint64_t gen;
	uint32_t len;
	int ret;

	ret = fs_tx_begin(fs, 2 * fs_alloc_credits(fs), &tx);
	if (ret < 0)
		return ret;
	ret = fs_alloc(tx, 0, n, n, &blk[0], &len);
	if (ret == 0 && len != n)
		ret = -ENOSPC;
	if (ret == 0)
		ret = fs_alloc_inode(tx, fs->sb.root_ino, &blk[1], &gen);
	fs_tx_end(tx);
	return ret;
}

static int free_some(struct fs *fs, unsigned n, const uint64_t *blk)
{
	struct fs_tx *tx;
	int ret;

	ret = fs_tx_begin(fs, 2 * fs_alloc_credits(fs), &tx);
	if (ret < 0)
		return ret;
	ret = fs_free(tx, blk[0], n);
	if (ret == 0)
		ret = fs_free_inode(tx, blk[1]);
	fs_tx_end(tx);
	return ret;
}

static void test_statfs_mkfs(void)
{
	struct bd_dev *bd = ram_fs(64, 0);
	struct fs_space sp;
	int64_t f, in, c0 = -1;
	struct fs *fs;

	REQUIRE(bd != NULL && (fs = mnt(bd)) != NULL);
	fs_space_get(fs, &sp);
	CHECK_EQ(records(bd, &f, &in, &c0), 0);
	CHECK_EQ(f, (int64_t)sp.free_blocks);
	CHECK_EQ(in, 1);
	CHECK_EQ(c0, 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	CHECK_EQ(fsck_errors(bd, 0, NULL), 0);
	bd_close(bd);
}

/* An image without the records: no ro_compat bit, no records, mounts
 * and works as before (statfs from the groups). */
static void test_statfs_old_image(void)
{
	struct bd_dev *bd = ram_fs(64, 1);
	struct fs_space sp, sp2;
	uint64_t blk[2];
	struct fs *fs;

	REQUIRE(bd != NULL && (fs = mnt(bd)) != NULL);
	CHECK_EQ(fs->sb.feature_ro_compat, 0);
	CHECK_EQ(fs->sb.statfs_blk, 0);
	CHECK(fs->sfs == NULL);
	fs_space_get(fs, &sp);
	CHECK_EQ(sp.free_blocks + 1, sp.data_blocks); /* the root only */
	CHECK_EQ(alloc_some(fs, 10, blk), 0);
	CHECK_EQ(fs_statfs_space(fs, &sp2), 0);
	CHECK_EQ(sp2.free_blocks, sp.free_blocks - 11);
	CHECK_EQ(fs_statfs_fold(fs), 0); /* nothing to fold */
	CHECK_EQ(free_some(fs, 10, blk), 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	CHECK_EQ(fsck_errors(bd, 0, NULL), 0);
	bd_close(bd);
}

/* Every transaction keeps master + changes == groups; a fold moves our
 * change into the master. */
static void test_statfs_track_fold(void)
{
	struct bd_dev *bd = ram_fs(64, 0);
	struct fs_core_stats st;
	uint64_t blk[6][2];
	struct fs_space sp;
	int64_t f, in, c0 = 0;
	struct fs *fs;

	REQUIRE(bd != NULL && (fs = mnt(bd)) != NULL);
	for (int i = 0; i < 6; i++) {
		CHECK_EQ(alloc_some(fs, 20 + 7 * (unsigned)i, blk[i]), 0);
		if (i % 2 == 1)
			CHECK_EQ(free_some(fs, 20 + 7 * (unsigned)(i - 1),
					   blk[i - 1]),
				 0);
		fs_space_get(fs, &sp);
		cached_records(fs, &f, &in, &c0);
		CHECK_EQ(f, (int64_t)sp.free_blocks);
		CHECK_EQ(in, (int64_t)sp.inodes);
	}
	CHECK(c0 < 0); /* 3 allocations left: our change is negative */
	CHECK_EQ(fs_statfs_fold(fs), 0);
	cached_records(fs, &f, &in, &c0);
	CHECK_EQ(c0, 0);
	CHECK_EQ(f, (int64_t)sp.free_blocks);
	fs_core_stats_get(fs, &st);
	CHECK_EQ(st.statfs_folds, 1);
	CHECK_EQ(fs_statfs_fold(fs), 0); /* nothing left: no fold */
	fs_core_stats_get(fs, &st);
	CHECK_EQ(st.statfs_folds, 1);
	for (int i = 1; i < 6; i += 2)
		CHECK_EQ(free_some(fs, 20 + 7 * (unsigned)i, blk[i]), 0);
	fs_space_get(fs, &sp);
	CHECK_EQ(fs_core_unmount(fs), 0); /* folds */
	CHECK_EQ(records(bd, &f, &in, &c0), 0);
	CHECK_EQ(f, (int64_t)sp.free_blocks);
	CHECK_EQ(in, (int64_t)sp.inodes);
	CHECK_EQ(c0, 0);
	CHECK_EQ(fsck_errors(bd, 0, NULL), 0);
	bd_close(bd);
}

/* The crash workload (fs.h, so that fsck sees every block referenced):
 * rounds of file creates with data and unlinks, fsyncs now and then, a
 * fold every third round. Stops at the first error (the device died). */
static void workload(struct fs *fs, uint64_t seed)
{
	static uint8_t data[128 << 10];
	struct fs_cred cred = {.flags = FS_CRED_FSETID};
	uint64_t x = seed | 1, ino[8] = {0};
	uint64_t root = fs_root(fs);
	struct fs_attr a;
	char name[16];

	memset(data, 0x5a, sizeof(data));
	for (int round = 0; round < 64; round++) {
		int i = round % 8;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		snprintf(name, sizeof(name), "f%d", i);
		if (ino[i] != 0) {
			if (fs_unlink(fs, &cred, root, name) < 0)
				return;
			fs_forget(fs, ino[i], 1);
			ino[i] = 0;
		} else {
			size_t len = 4096 * (1 + x % 32);

			if (fs_create(fs, &cred, root, name, 0644, 0, &a) < 0)
				return;
			ino[i] = a.ino;
			if (fs_write(fs, &cred, a.ino, data, len, 0) < 0)
				return;
			fs_release(fs, a.ino);
			if (x % 2 == 0 && fs_fsync(fs, a.ino, 0) < 0)
				return;
		}
		if (round % 3 == 2 && fs_statfs_fold(fs) < 0)
			return;
	}
	fs_sync(fs);
}

/* Run the workload on a copy of @base whose device dies at write @n
 * after the mount (0: never); *@writes: the writes it issued. Returns
 * what survived (a copy), or NULL. */
static struct bd_dev *crash_run(struct bd_dev *base, uint64_t n, uint64_t seed,
				uint64_t *writes)
{
	struct bd_dev *lower = cf_ram_copy(base), *bd, *after;
	struct bd_fault *f;
	struct fs *fs;

	if (lower == NULL || bd_fault_open(lower, &bd, &f) < 0) {
		if (lower != NULL)
			bd_close(lower);
		return NULL;
	}
	fs = cf_ns_mount(bd, 0);
	if (fs == NULL) {
		bd_close(bd);
		return NULL;
	}
	if (n > 0)
		bd_fault_crash_nth(f, n);
	workload(fs, seed);
	*writes = bd_fault_writes(f);
	if (!bd_fault_crashed(f))
		bd_fault_crash(f, 0);
	fs_abandon(fs); /* writes nothing more */
	after = cf_ram_copy(lower);
	bd_close(bd);
	return after;
}

/* After the crash: consistent for fsck (before a mount) and after the
 * replay of a mount, which folds at its unmount. 1 if the change of
 * slot 0 was not zero after the replay. */
static int check_survivor(struct bd_dev *img, uint64_t n, int *bad)
{
	struct fs_space sp;
	int64_t f, in, c0 = 0;
	struct fs *fs;
	int pending;

	if (fsck_errors(img, 0, NULL) != 0) {
		fprintf(stderr, "  crash point %llu: fsck before mount\n",
			(unsigned long long)n);
		(*bad)++;
		return 0;
	}
	fs = cf_ns_mount(img, 0);
	if (fs == NULL) {
		(*bad)++;
		return 0;
	}
	fs_space_get(fs, &sp);
	cached_records(fs, &f, &in, &c0);
	pending = c0 != 0;
	if (f != (int64_t)sp.free_blocks || in != (int64_t)sp.inodes) {
		fprintf(stderr,
			"  crash point %llu: records %lld/%lld, groups "
			"%llu/%llu\n",
			(unsigned long long)n, (long long)f, (long long)in,
			(unsigned long long)sp.free_blocks,
			(unsigned long long)sp.inodes);
		(*bad)++;
	}
	if (fs_unmount(fs) != 0 || records(img, &f, &in, &c0) < 0 || c0 != 0 ||
	    f != (int64_t)sp.free_blocks || fsck_errors(img, 0, NULL) != 0) {
		fprintf(stderr,
			"  crash point %llu: after the unmount's fold\n",
			(unsigned long long)n);
		(*bad)++;
	}
	return pending;
}

static void test_statfs_crash(void)
{
	struct bd_dev *base = ram_fs(64, 0), *img;
	uint64_t seed = t_seed(), w = 0, dummy;
	int bad = 0, pending = 0, points = 0;

	REQUIRE(base != NULL);
	printf("  seed %llu\n", (unsigned long long)seed);
	img = crash_run(base, 0, seed, &w);
	REQUIRE(img != NULL);
	bd_close(img);
	printf("  dry run: %llu device writes\n", (unsigned long long)w);
	for (uint64_t n = 1; n <= w + 1; n++) {
		img = crash_run(base, n, seed, &dummy);
		REQUIRE(img != NULL);
		pending += check_survivor(img, n, &bad);
		points++;
		bd_close(img);
	}
	printf("  %d crash points, %d with a committed change not folded\n",
	       points, pending);
	CHECK_EQ(bad, 0);
	CHECK(pending > 0); /* the crash between allocation and fold */
	bd_close(base);
}

/* Slot @s's change record on the device (free blocks). */
static int64_t change_of(struct bd_dev *bd, const struct fs_sb *sb, unsigned s)
{
	struct fs_statfs_rec *r = bd_buf_alloc(FS_BLOCK_SIZE);
	uint64_t b = fs_statfs_change_blk(sb, s);
	int64_t v = INT64_MIN;

	if (r != NULL &&
	    bd_read(bd, r, FS_BLOCK_SIZE, b * FS_BLOCK_SIZE) == 0 &&
	    fs_blk_verify(r, FS_BT_STATFS, b) == 0 && r->slot == s)
		v = r->free;
	free(r);
	return v;
}

/*
 * A dead slot's change: slot 1 allocates and commits, then dies (its
 * journal holds the change, nothing folded). A mount of slot 0 replays
 * it (the records consistent, slot 1's change -41 at home) and folds
 * it as a recovering node does (fs_statfs_fold_slot): the master gets
 * it, slot 1's change is zero, and the statfs counts are unchanged.
 */
static void test_statfs_dead_slot(void)
{
	struct bd_dev *bd = ram_fs(64, 0);
	struct fs_core_stats st;
	struct fs_space sp;
	struct fs_sb sb;
	uint64_t blk[2];
	int64_t f, in;
	struct fs *fs;

	REQUIRE(bd != NULL && (fs = mnt_slot(bd, 1)) != NULL);
	CHECK_EQ(alloc_some(fs, 40, blk), 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	fs_core_abandon(fs); /* dies: committed, not folded */
	REQUIRE((fs = mnt_slot(bd, 0)) != NULL);
	sb = fs->sb;
	fs_space_get(fs, &sp);
	/* replayed home: 40 blocks and an inode block */
	CHECK_EQ(change_of(bd, &sb, 1), -41);
	cached_records(fs, &f, &in, NULL);
	CHECK_EQ(f, (int64_t)sp.free_blocks);
	CHECK_EQ(fs_statfs_slot_pending(fs, 1), 1);
	CHECK_EQ(fs_statfs_fold_slot(fs, 1), 0);
	/* written back before the slot lock goes, as recovery does */
	CHECK_EQ(fs_journal_checkpoint(fs, FS_CR_SYNC), 0);
	CHECK_EQ(fs_statfs_slot_pending(fs, 1), 0);
	fs_core_stats_get(fs, &st);
	CHECK_EQ(st.statfs_dead_folds, 1);
	cached_records(fs, &f, &in, NULL);
	CHECK_EQ(f, (int64_t)sp.free_blocks);
	CHECK_EQ(in, (int64_t)sp.inodes);
	CHECK_EQ(free_some(fs, 40, blk), 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	CHECK_EQ(change_of(bd, &sb, 1), 0);
	CHECK_EQ(fsck_errors(bd, 0, NULL), 0);
	bd_close(bd);
}

/* fsck finds the damage, fsck -y repairs it, and the records then hold
 * @sp's counts, every change zero. */
static void check_repaired(struct bd_dev *bd, const struct fs_space *sp)
{
	uint64_t fixed = 0;
	int64_t f, in, c0 = -1;

	CHECK(fsck_errors(bd, 0, &fixed) > 0);
	CHECK(fsck_errors(bd, 1, &fixed) > 0);
	CHECK(fixed > 0);
	CHECK_EQ(fsck_errors(bd, 0, NULL), 0);
	CHECK_EQ(records(bd, &f, &in, &c0), 0);
	CHECK_EQ(f, (int64_t)sp->free_blocks);
	CHECK_EQ(in, (int64_t)sp->inodes);
	CHECK_EQ(c0, 0);
}

/* A wrong master: fsck finds it, fsck -y rewrites the records. */
static void test_statfs_fsck_repair(void)
{
	struct bd_dev *bd = ram_fs(64, 0);
	struct fs_statfs_rec *r = bd_buf_alloc(FS_BLOCK_SIZE);
	uint64_t blk[2], b;
	struct fs_space sp;
	struct fs *fs;

	REQUIRE(bd != NULL && r != NULL && (fs = mnt(bd)) != NULL);
	b = fs->sb.statfs_blk;
	CHECK_EQ(alloc_some(fs, 33, blk), 0);
	CHECK_EQ(free_some(fs, 33, blk), 0);
	fs_space_get(fs, &sp);
	CHECK_EQ(fs_core_unmount(fs), 0);
	REQUIRE(bd_read(bd, r, FS_BLOCK_SIZE, b * FS_BLOCK_SIZE) == 0);
	r->free += 1000;
	fs_blk_update_crc(r);
	REQUIRE(bd_write(bd, r, FS_BLOCK_SIZE, b * FS_BLOCK_SIZE, 0) == 0);
	check_repaired(bd, &sp);
	free(r);
	bd_close(bd);
}

/* Slot 0's change record damaged (checksum): allocations and frees go
 * on without it (counted), fsck finds it and -y repairs the records. */
static void test_statfs_bad_change(void)
{
	struct bd_dev *bd = ram_fs(64, 0);
	uint8_t *r = bd_buf_alloc(FS_BLOCK_SIZE);
	struct fs_core_stats st;
	uint64_t blk[2], b;
	struct fs_space sp;
	struct fs *fs;

	REQUIRE(bd != NULL && r != NULL && (fs = mnt(bd)) != NULL);
	b = fs_statfs_change_blk(&fs->sb, 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	REQUIRE(bd_read(bd, r, FS_BLOCK_SIZE, b * FS_BLOCK_SIZE) == 0);
	r[40] ^= 0xff; /* its free count, the checksum now wrong */
	REQUIRE(bd_write(bd, r, FS_BLOCK_SIZE, b * FS_BLOCK_SIZE, 0) == 0);
	REQUIRE((fs = mnt(bd)) != NULL);
	CHECK_EQ(alloc_some(fs, 30, blk), 0);
	CHECK_EQ(free_some(fs, 30, blk), 0);
	CHECK_EQ(alloc_some(fs, 20, blk), 0);
	fs_core_stats_get(fs, &st);
	CHECK(st.statfs_untracked >= 4);
	CHECK_EQ(fs_statfs_space(fs, &sp), 0);
	CHECK(fs_statfs_fold(fs) < 0); /* nothing right to fold */
	CHECK_EQ(free_some(fs, 20, blk), 0);
	fs_space_get(fs, &sp);
	CHECK_EQ(fs_core_unmount(fs), 0);
	check_repaired(bd, &sp);
	REQUIRE((fs = mnt(bd)) != NULL);
	CHECK_EQ(alloc_some(fs, 30, blk), 0);
	fs_core_stats_get(fs, &st);
	CHECK_EQ(st.statfs_untracked, 0); /* the records in use again */
	CHECK_EQ(free_some(fs, 30, blk), 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	CHECK_EQ(fsck_errors(bd, 0, NULL), 0);
	free(r);
	bd_close(bd);
}

static uint64_t stat_of(struct fs *fs, int which)
{
	struct fs_core_stats st;

	fs_core_stats_get(fs, &st);
	return which ? st.statfs_percent_wakes : st.statfs_folds;
}

/* Poll until @fs counted a fold (60 s at most: a bound, not a measure). */
static int fold_seen(struct fs *fs)
{
	struct timespec ts = {0, 10 * 1000 * 1000};

	for (int i = 0; i < 6000; i++) {
		if (stat_of(fs, 0) > 0)
			return 1;
		nanosleep(&ts, NULL);
	}
	return 0;
}

/* statfs_percent: 200 blocks of ~12,000 free (1.7%) pass 1% but not
 * 100%; every fold here is the worker's (the quantum is an hour). */
static void test_statfs_percent(void)
{
	struct bd_dev *bd = ram_fs(64, 0);
	struct fs_space sp;
	uint64_t blk[2];
	int64_t f, in, c0 = -1;
	struct fs *fs;

	REQUIRE(bd != NULL && (fs = mnt_pct(bd, -1, 100)) != NULL);
	CHECK_EQ(alloc_some(fs, 200, blk), 0);
	CHECK_EQ(stat_of(fs, 1), 0); /* below: no wake-up, no fold */
	CHECK_EQ(free_some(fs, 200, blk), 0);
	CHECK_EQ(fs_core_unmount(fs), 0);

	REQUIRE((fs = mnt_pct(bd, -1, 1)) != NULL);
	CHECK_EQ(alloc_some(fs, 10, blk), 0);
	CHECK_EQ(stat_of(fs, 1), 0); /* 11 blocks: below 1% */
	CHECK_EQ(free_some(fs, 10, blk), 0);
	CHECK_EQ(alloc_some(fs, 200, blk), 0);
	CHECK_EQ(stat_of(fs, 1), 1);
	CHECK(fold_seen(fs));
	fs_space_get(fs, &sp);
	cached_records(fs, &f, &in, &c0);
	/* folded: the 200 blocks are in the master (the worker may have
	 * folded between them and the inode, in the same transaction) */
	CHECK(c0 == 0 || c0 == -1);
	CHECK_EQ(f, (int64_t)sp.free_blocks);
	CHECK_EQ(stat_of(fs, 1), 1); /* counted once per crossing */
	CHECK_EQ(free_some(fs, 200, blk), 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	CHECK_EQ(fsck_errors(bd, 0, NULL), 0);
	bd_close(bd);
}

/* Files written and kept through fs.h on a nolock mount of @bd. */
static int some_files(struct bd_dev *bd)
{
	static uint8_t data[64 << 10];
	struct fs_cred cred = {.flags = FS_CRED_FSETID};
	struct fs_attr a;
	char name[16];
	struct fs *fs = cf_ns_mount(bd, 0);
	int ret = fs == NULL ? -1 : 0;

	memset(data, 0x3c, sizeof(data));
	for (int i = 0; i < 5 && ret == 0; i++) {
		snprintf(name, sizeof(name), "u%d", i);
		ret = fs_create(fs, &cred, fs_root(fs), name, 0644, 0, &a);
		if (ret == 0 &&
		    fs_write(fs, &cred, a.ino, data, sizeof(data) >> i, 0) < 0)
			ret = -1;
		if (ret == 0)
			fs_release(fs, a.ino);
	}
	if (fs != NULL && fs_unmount(fs) != 0)
		ret = -1;
	return ret;
}

/* An old image with files gets the records; a claimed slot refuses. */
static void test_statfs_upgrade(void)
{
	struct bd_dev *bd = ram_fs(64, 1), *busy;
	char why[240] = "";
	struct fs_space sp;
	int64_t f, in, c0;
	struct fs *fs;

	REQUIRE(bd != NULL && some_files(bd) == 0);
	REQUIRE((busy = cf_ram_copy(bd)) != NULL);
	REQUIRE((fs = mnt_slot(busy, 1)) != NULL);
	fs_core_abandon(fs); /* stopped without unmounting: slot 1 held */
	CHECK_EQ(fs_fsck_add_statfs(busy, why, sizeof(why)), -EBUSY);
	printf("  refused: %s\n", why);
	CHECK(strstr(why, "slot 1") != NULL);
	REQUIRE((fs = mnt(busy)) != NULL); /* untouched: as before */
	CHECK(fs->sfs == NULL);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(busy);

	CHECK_EQ(fs_fsck_add_statfs(bd, why, sizeof(why)), 0);
	CHECK_EQ(fsck_errors(bd, 0, NULL), 0);
	REQUIRE((fs = mnt(bd)) != NULL);
	CHECK(fs->sfs != NULL);
	fs_space_get(fs, &sp);
	cached_records(fs, &f, &in, &c0);
	CHECK_EQ(f, (int64_t)sp.free_blocks);
	CHECK_EQ(in, 6); /* the root and five files */
	CHECK_EQ(in, (int64_t)sp.inodes);
	CHECK_EQ(c0, 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	CHECK_EQ(some_files(bd), -EEXIST); /* the names are taken */
	CHECK_EQ(fs_fsck_add_statfs(bd, why, sizeof(why)), 1);
	CHECK_EQ(fsck_errors(bd, 0, NULL), 0);
	bd_close(bd);
}

/* A full filesystem: no room in group 0 for the records, refused with
 * nothing written. */
static void test_statfs_upgrade_full(void)
{
	static uint8_t data[1 << 20];
	struct fs_cred cred = {.flags = FS_CRED_FSETID};
	struct bd_dev *bd = ram_fs(64, 1);
	char why[240] = "";
	struct fs_attr a;
	uint64_t off = 0;
	struct fs *fs;

	REQUIRE(bd != NULL && (fs = cf_ns_mount(bd, 0)) != NULL);
	REQUIRE(fs_create(fs, &cred, fs_root(fs), "big", 0644, 0, &a) == 0);
	while (off < (64u << 20) &&
	       fs_write(fs, &cred, a.ino, data, sizeof(data), off) > 0)
		off += sizeof(data);
	while (fs_write(fs, &cred, a.ino, data, 4096, off) > 0)
		off += 4096; /* the last blocks */
	fs_release(fs, a.ino);
	CHECK_EQ(fs_unmount(fs), 0);
	printf("  filled with %llu KiB\n", (unsigned long long)(off >> 10));
	CHECK_EQ(fs_fsck_add_statfs(bd, why, sizeof(why)), -ENOSPC);
	printf("  refused: %s\n", why);
	CHECK_EQ(fsck_errors(bd, 0, NULL), 0);
	REQUIRE((fs = mnt(bd)) != NULL);
	CHECK(fs->sfs == NULL); /* as before */
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* The upgrade on a copy of @base whose power fails at write @n (0:
 * never): with @tear, that write is torn (its first 512 * (n % 8) bytes
 * kept), else the unflushed writes before it are kept, dropped or
 * garbled (seeded). *@writes: the writes it issued. Returns what
 * survived (a copy), or NULL. */
static struct bd_dev *upgrade_cut(struct bd_dev *base, uint64_t n, int tear,
				  uint64_t seed, uint64_t *writes)
{
	struct bd_dev *lower = cf_ram_copy(base), *bd, *after;
	struct bd_fault *flt;

	if (lower == NULL || bd_fault_open(lower, &bd, &flt) < 0)
		return NULL;
	if (n > 0 && tear)
		bd_fault_tear_nth(flt, n, 512 * (n % 8));
	else if (n > 0)
		bd_fault_crash_nth_garble(flt, n, seed + n);
	fs_fsck_add_statfs(bd, NULL, 0);
	*writes = bd_fault_writes(flt);
	if (!bd_fault_crashed(flt))
		bd_fault_crash(flt, seed + n);
	after = cf_ram_copy(lower);
	bd_close(bd);
	return after;
}

/* An interrupted upgrade's image: mounts (if the superblock has the
 * bit, with every record there and master + changes = the groups) and
 * unmounts, and fsck -y leaves it clean. 0, or -1; *@with counts the
 * images that have the records. */
static int upgrade_survivor(struct bd_dev *img, int *with)
{
	struct fs *fs = cf_ns_mount(img, 0);
	struct fs_space sp;
	uint64_t fixed;
	int64_t f, in;
	int ret = 0;

	if (fs == NULL)
		return -1;
	if (fs->sfs != NULL) {
		(*with)++;
		fs_space_get(fs, &sp);
		cached_records(fs, &f, &in, NULL);
		if (f != (int64_t)sp.free_blocks || in != (int64_t)sp.inodes)
			ret = -1;
	}
	if (fs_unmount(fs) != 0 || fsck_errors(img, 1, &fixed) < 0 ||
	    fsck_errors(img, 0, NULL) != 0)
		ret = -1;
	return ret;
}

/* Power loss at every write of the upgrade, also torn: the image mounts,
 * and fsck -y leaves it clean, with or without the records. */
static void test_statfs_upgrade_crash(void)
{
	struct bd_dev *base = ram_fs(64, 1), *img;
	uint64_t seed = t_seed(), w = 0, dummy;
	int bad = 0, with = 0, points = 0;

	REQUIRE(base != NULL && some_files(base) == 0);
	printf("  seed %llu\n", (unsigned long long)seed);
	REQUIRE((img = upgrade_cut(base, 0, 0, seed, &w)) != NULL);
	bd_close(img);
	for (int tear = 0; tear <= 1; tear++) {
		for (uint64_t n = 1; n <= w + !tear; n++) {
			img = upgrade_cut(base, n, tear, seed, &dummy);
			REQUIRE(img != NULL);
			points++;
			if (upgrade_survivor(img, &with) < 0) {
				fprintf(stderr,
					"  %s at write %llu: not clean\n",
					tear ? "torn" : "crash",
					(unsigned long long)n);
				bad++;
			}
			bd_close(img);
		}
	}
	printf("  %llu writes, %d cut points, %d with the records\n",
	       (unsigned long long)w, points, with);
	CHECK(w >= 6);
	CHECK_EQ(bad, 0);
	CHECK(with >= 1); /* the last point: after the backup */
	bd_close(base);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_statfs_mkfs);
	T_RUN(test_statfs_old_image);
	T_RUN(test_statfs_track_fold);
	T_RUN(test_statfs_crash);
	T_RUN(test_statfs_dead_slot);
	T_RUN(test_statfs_fsck_repair);
	T_RUN(test_statfs_bad_change);
	T_RUN(test_statfs_percent);
	T_RUN(test_statfs_upgrade);
	T_RUN(test_statfs_upgrade_full);
	T_RUN(test_statfs_upgrade_crash);
	return t_done();
}
