/*
 * test_flog.c — a dead slot's free log (fs_flog_dead_apply, fs_flog.c)
 * applied through read errors. A RAM image with two slots, mounted (slot
 * 0) on a fault device; slot 1's slotinfo gets a free log of blocks
 * allocated and referenced by nothing, as a node that died after logging
 * its frees leaves it. Then, with the cache dropped so that every block
 * comes from the device:
 *  - one failed read: the second pass applies the whole log (stats
 *    flog_dead_retries 1, flog_dead_errors 0, the blocks free again, the
 *    log empty on disk);
 *  - every read failing: FS_FLOG_DEAD_TRIES passes, then -EIO with the
 *    log left whole on disk (flog_dead_errors 1); once the device reads
 *    again the next call applies it;
 *  - a damaged log (a count beyond the slotinfo block) is not retried:
 *    -EUCLEAN at once, no retry counted.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blockdev/bd.h"
#include "fusefs/core/fs_core_priv.h"
#include "fusefs/core/fs_internal.h"
#include "core_fixture.h"
#include "harness.h"

#define RUN_BLOCKS 8u

struct fx {
	struct bd_dev *bd;
	struct bd_fault *f;
	struct fs *fs;
	uint64_t before;    /* free blocks before the logged run */
	uint64_t after_log; /* and once it was allocated and logged */
};

static int fx_open(struct fx *x)
{
	struct bd_dev *lower = cf_ram_fs_slots(64, 4, 16, 2);

	memset(x, 0, sizeof(*x));
	if (lower == NULL || bd_fault_open(lower, &x->bd, &x->f) < 0)
		return -1;
	x->fs = cf_mount(x->bd, 8);
	return x->fs == NULL ? -1 : 0;
}

static void fx_close(struct fx *x)
{
	if (x->fs != NULL)
		fs_core_unmount(x->fs);
	if (x->bd != NULL)
		bd_close(x->bd);
}

/* Slot @s's slotinfo: its log count, or -errno. */
static int dead_count(struct fs *fs, unsigned s)
{
	struct fs_buf *b;
	int ret = fs_buf_read(fs, fs_slotinfo_blk(s), FS_BT_SLOTINFO, &b);

	if (ret < 0)
		return ret;
	ret = (int)((const struct fs_slotinfo *)b->data)->flog_count;
	fs_buf_put(b);
	return ret;
}

/* Allocate RUN_BLOCKS blocks that nothing references and log them in
 * slot 1's slotinfo (@count: the log's count, 1 unless damaged), all
 * written home. *@start: the run. 0 or -errno. */
static int log_dead_run(struct fs *fs, uint32_t count, uint64_t *start)
{
	struct fs_slotinfo *si;
	struct fs_buf *b;
	struct fs_tx *tx;
	uint32_t len;
	int ret = fs_tx_begin(fs, 2 + fs_alloc_credits(fs), &tx);

	if (ret < 0)
		return ret;
	ret = fs_alloc(tx, 0, RUN_BLOCKS, RUN_BLOCKS, start, &len);
	if (ret == 0 && len != RUN_BLOCKS)
		ret = -ENOSPC;
	if (ret == 0)
		ret = fs_buf_read(fs, fs_slotinfo_blk(1), FS_BT_SLOTINFO, &b);
	if (ret == 0) {
		ret = fs_tx_write(tx, b);
		si = b->data;
		if (ret == 0) {
			memset(&si->flog[0], 0, sizeof(si->flog[0]));
			si->flog[0].start = *start;
			si->flog[0].len = RUN_BLOCKS;
			si->flog_count = count;
		}
		fs_buf_put(b);
	}
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	if (ret == 0)
		ret = fs_journal_checkpoint(fs, FS_CR_SYNC);
	return ret;
}

static uint64_t free_blocks(struct fs *fs)
{
	struct fs_space sp;

	fs_space_get(fs, &sp);
	return sp.free_blocks;
}

static void drop_cache(struct fs *fs)
{
	unsigned busy = 0;

	fs_cache_drop_all(fs, &busy);
}

/* Every case's start: the fixture mounted, slot 1 given a free log of
 * one run (@count: its count) and the cache dropped, so that applying
 * it reads from the device. x->before: the free blocks before the run
 * was allocated. 0, or -1 with the fixture closed. */
static int fx_dead_log(struct fx *x, uint32_t count)
{
	uint64_t start;

	if (fx_open(x) < 0)
		goto out_close;
	x->before = free_blocks(x->fs);
	if (log_dead_run(x->fs, count, &start) < 0)
		goto out_close;
	x->after_log = free_blocks(x->fs);
	drop_cache(x->fs);
	return 0;
out_close:
	fx_close(x);
	return -1;
}

static void test_one_read_error_retried(void)
{
	struct fs_core_stats st;
	struct fx x;

	REQUIRE(fx_dead_log(&x, 1) == 0);
	CHECK_EQ(x.after_log, x.before - RUN_BLOCKS);
	bd_fault_fail_nth(x.f, BD_READ, 1, 0);
	CHECK_EQ(fs_flog_dead_apply(x.fs, 1), 0);
	fs_core_stats_get(x.fs, &st);
	CHECK_EQ(st.flog_dead_retries, 1);
	CHECK_EQ(st.flog_dead_errors, 0);
	CHECK_EQ(st.flog_dead_slots, 1);
	CHECK_EQ(st.flog_dead_applied, RUN_BLOCKS);
	CHECK_EQ(free_blocks(x.fs), x.before);
	REQUIRE(fs_journal_checkpoint(x.fs, FS_CR_SYNC) == 0);
	drop_cache(x.fs);
	CHECK_EQ(dead_count(x.fs, 1), 0);
	fx_close(&x);
}

static void test_persistent_error_left_then_applied(void)
{
	struct fs_core_stats st;
	struct fx x;

	REQUIRE(fx_dead_log(&x, 1) == 0);
	bd_fault_fail_nth(x.f, BD_READ, 1, 1);
	CHECK_EQ(fs_flog_dead_apply(x.fs, 1), -EIO);
	fs_core_stats_get(x.fs, &st);
	CHECK_EQ(st.flog_dead_retries, FS_FLOG_DEAD_TRIES - 1);
	CHECK_EQ(st.flog_dead_errors, 1);
	CHECK_EQ(st.flog_dead_applied, 0);
	bd_fault_fail_nth(x.f, BD_READ, 0, 0);
	drop_cache(x.fs);
	CHECK_EQ(dead_count(x.fs, 1), 1); /* left whole for later */
	CHECK_EQ(fs_flog_dead_apply(x.fs, 1), 0);
	fs_core_stats_get(x.fs, &st);
	CHECK_EQ(st.flog_dead_retries, FS_FLOG_DEAD_TRIES - 1);
	CHECK_EQ(st.flog_dead_applied, RUN_BLOCKS);
	CHECK_EQ(free_blocks(x.fs), x.before);
	fx_close(&x);
}

static void test_damaged_log_not_retried(void)
{
	struct fs_core_stats st;
	struct fx x;

	REQUIRE(fx_dead_log(&x, FS_FLOG_MAX + 1) == 0);
	CHECK_EQ(fs_flog_dead_apply(x.fs, 1), -EUCLEAN);
	fs_core_stats_get(x.fs, &st);
	CHECK_EQ(st.flog_dead_retries, 0);
	CHECK_EQ(st.flog_dead_errors, 1);
	fx_close(&x);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_one_read_error_retried);
	T_RUN(test_persistent_error_left_then_applied);
	T_RUN(test_damaged_log_not_retried);
	return t_done();
}
