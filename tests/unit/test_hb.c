/*
 * test_hb.c — the disk heartbeat (fusefs/fs_hb.c) on one RAM device
 * shared by two heartbeats (nodes 1 and 2 in slots 0 and 1), with short
 * times (interval 20 ms, timeout 200 ms, lease 160 ms):
 *
 * - nobody writes before its first beat (the gate is shut); each node
 *   then sees the other ALIVE, itself NONE; a clean stop reads NONE;
 * - a crash (no clean stop) reads ALIVE until the timeout, then DEAD,
 *   and the slot too;
 * - a fence with a last word: the other reads DEAD at once (FENCED
 *   mark; timeout 20 s there), the fenced node's gate and device refuse every
 * write;
 * - a node whose beats fail (the device refuses its writes) loses its
 *   lease: the gate shuts and fs_hb_fenced says so.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blockdev/bd.h"
#include "fusefs/fs_hb.h"
#include "fusefs/fs_internal.h"
#include "harness.h"

static struct bd_dev *ram_fs(void)
{
	struct fs_mkfs_params p;
	struct bd_dev *bd;
	char why[200];

	fs_mkfs_defaults(&p);
	p.journal_mb = 4;
	p.rgrp_mb = 16;
	p.slots = 2;
	if (bd_ram_open(64ull << 20, &bd) < 0)
		return NULL;
	if (fs_mkfs(bd, &p, why, sizeof(why)) < 0) {
		bd_close(bd);
		return NULL;
	}
	return bd;
}

static struct fs_hb *hb_open_t(struct bd_dev *bd, uint32_t node,
			       unsigned timeout_ms)
{
	struct fs_hb_opts o = {
	    .node = node, .interval_ms = 20, .timeout_ms = timeout_ms};
	struct fs_hb *hb = NULL;
	char why[200];

	if (fs_hb_open(bd, &o, &hb, why, sizeof(why)) < 0)
		fprintf(stderr, "fs_hb_open: %s\n", why);
	return hb;
}

static struct fs_hb *hb_open(struct bd_dev *bd, uint32_t node)
{
	return hb_open_t(bd, node, 200);
}

static void ms_sleep(unsigned ms)
{
	usleep(ms * 1000);
}

/* Wait up to @ms for @hb to see @node in @state. */
static int sees(struct fs_hb *hb, uint32_t node, int state, unsigned ms)
{
	for (unsigned t = 0; t <= ms; t += 5) {
		if (fs_hb_node(hb, node, NULL) == state)
			return 1;
		ms_sleep(5);
	}
	return 0;
}

static void test_beat_and_clean_stop(void)
{
	struct bd_dev *bd = ram_fs();
	struct fs_hb *a, *b;
	char *buf = bd_buf_alloc(4096);

	REQUIRE(bd != NULL && buf != NULL);
	a = hb_open(bd, 1);
	b = hb_open(bd, 2);
	REQUIRE(a != NULL && b != NULL);
	bd_set_gate(bd, fs_hb_gate, a);
	memset(buf, 0, 4096);
	CHECK_EQ(bd_write(bd, buf, 4096, 100ull << 20 >> 1, 0), -EIO);
	CHECK_EQ(fs_hb_start(a, 0), 0);
	CHECK_EQ(bd_write(bd, buf, 4096, 100ull << 20 >> 1, 0), 0);
	CHECK_EQ(fs_hb_start(b, 1), 0);
	CHECK(sees(a, 2, FS_HB_ALIVE, 500));
	CHECK(sees(b, 1, FS_HB_ALIVE, 500));
	CHECK_EQ(fs_hb_node(a, 1, NULL), FS_HB_NONE); /* ourselves */
	CHECK_EQ(fs_hb_node(a, 3, NULL), FS_HB_NONE); /* never mounted */
	fs_hb_close(b, 1);
	CHECK(sees(a, 2, FS_HB_NONE, 500));
	CHECK_EQ(fs_hb_slot(a, 1), FS_HB_NONE);
	bd_set_gate(bd, NULL, NULL);
	fs_hb_close(a, 1);
	free(buf);
	bd_close(bd);
}

static void test_crash_then_dead(void)
{
	struct bd_dev *bd = ram_fs();
	struct fs_hb *a, *b;
	struct timespec t0, t1;
	long ms;

	REQUIRE(bd != NULL);
	a = hb_open(bd, 1);
	b = hb_open(bd, 2);
	REQUIRE(a != NULL && b != NULL);
	REQUIRE(fs_hb_start(a, 0) == 0 && fs_hb_start(b, 1) == 0);
	CHECK(sees(a, 2, FS_HB_ALIVE, 500));
	fs_hb_close(b, 0); /* as if killed: the block stays live */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK_EQ(fs_hb_node(a, 2, NULL), FS_HB_ALIVE);
	CHECK_EQ(fs_hb_slot(a, 1), FS_HB_ALIVE);
	CHECK(sees(a, 2, FS_HB_DEAD, 2000));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 +
	     (t1.tv_nsec - t0.tv_nsec) / 1000000;
	CHECK(ms >= 150); /* not before the timeout (less a beat) */
	CHECK_EQ(fs_hb_slot(a, 1), FS_HB_DEAD);
	/* a fresh reader watches a stale block for the timeout first */
	b = hb_open(bd, 3);
	REQUIRE(b != NULL);
	ms_sleep(60);
	CHECK_EQ(fs_hb_node(b, 2, NULL), FS_HB_ALIVE);
	CHECK(sees(b, 2, FS_HB_DEAD, 2000));
	fs_hb_close(b, 0);
	fs_hb_close(a, 1);
	bd_close(bd);
}

static void test_fence_mark(void)
{
	struct bd_dev *bd = ram_fs(), *dev = NULL;
	struct fs_hb *a, *b;
	char *buf = bd_buf_alloc(4096);

	/* node 2's filesystem device: a second handle would be the usual
	 * case; here a RAM device of its own stands for it */
	REQUIRE(bd != NULL && buf != NULL && bd_ram_open(1 << 20, &dev) == 0);
	a = hb_open_t(bd, 1, 20000);
	b = hb_open_t(bd, 2, 20000);
	REQUIRE(a != NULL && b != NULL);
	REQUIRE(fs_hb_start(a, 0) == 0 && fs_hb_start(b, 1) == 0);
	bd_set_gate(dev, fs_hb_gate, b);
	memset(buf, 0, 4096);
	CHECK_EQ(bd_write(dev, buf, 4096, 0, 0), 0);
	CHECK(sees(a, 2, FS_HB_ALIVE, 500));
	fs_hb_fence_mark(b, dev);
	CHECK(fs_hb_fenced(b));
	CHECK_EQ(bd_write(dev, buf, 4096, 0, 0), -EIO);
	CHECK_EQ(fs_hb_gate(b), -EIO);
	/* DEAD at the next read, long before the 20 s timeout */
	CHECK(sees(a, 2, FS_HB_DEAD, 5000));
	CHECK_EQ(fs_hb_slot(a, 1), FS_HB_DEAD);
	bd_set_gate(dev, NULL, NULL);
	CHECK_EQ(bd_write(dev, buf, 4096, 0, 0), -EIO); /* bd_fence stays */
	fs_hb_close(b, 1);
	fs_hb_close(a, 1);
	free(buf);
	bd_close(dev);
	bd_close(bd);
}

static void test_failed_beats_lose_the_lease(void)
{
	struct bd_dev *ram = ram_fs(), *bd = NULL;
	struct bd_fault *f = NULL;
	struct fs_hb *a;

	REQUIRE(ram != NULL && bd_fault_open(ram, &bd, &f) == 0);
	a = hb_open(bd, 1);
	REQUIRE(a != NULL);
	REQUIRE(fs_hb_start(a, 0) == 0);
	CHECK_EQ(fs_hb_gate(a), 0);
	bd_fault_fail_nth(f, BD_WRITE, 1, 1); /* every write fails */
	for (int t = 0; t < 100 && !fs_hb_fenced(a); t++)
		ms_sleep(10);
	CHECK(fs_hb_fenced(a));
	CHECK_EQ(fs_hb_gate(a), -EIO);
	fs_hb_close(a, 1);
	bd_close(bd);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_beat_and_clean_stop);
	T_RUN(test_crash_then_dead);
	T_RUN(test_fence_mark);
	T_RUN(test_failed_beats_lose_the_lease);
	return t_done();
}
