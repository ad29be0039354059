/*
 * test_mix_jrec.c — the cluster's agreement on checkpoint records
 * (fusefs/cluster/fs_jrec.c) over three in-process lockspaces
 * (lk_local.h), with the journal replaced by a recorder: node 1's device
 * covers every writer's writes, nodes 2 and 3's do not.
 *
 *  - order: node 2's join returns only after node 1's records-off call
 *    (its flush) has returned, however long that takes;
 *  - side by side: nodes 2 and 3 hold CW at once (the second join does
 *    not wait for the first to leave); node 1 stays off while either is
 *    in (its NOQUEUE requests refused), and is on again once both left;
 *  - no pass: while a slow covering node flushes, the other covering
 *    node's requests (every RETRY_MS) are refused: it gives PR up once;
 *  - a failed flush calls conf.fail (the node fences itself there) and
 *    keeps the PR: the joiner waits until the node is gone;
 *  - a bounded join (conf.timeout_s, records_timeout=): a flush that does
 *    not return makes the join fail with -ETIMEDOUT, holding nothing;
 *    once the flush returns the holder takes PR back, and a second join
 *    gets its CW.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fusefs/cluster/fs_jrec.h"
#include "glock_util.h"
#include "harness.h"
#include "lk_local.h"
#include "lockmgr/cv_wait.h"

#define RETRY_MS 20

/* A node's journal, as the agreement sees it. */
struct fake {
	int on;		   /* records allowed now */
	int offs;	   /* set(0) calls that returned */
	int fails;	   /* fail() calls */
	int flush_ret;	   /* what set(0) returns */
	unsigned delay_ms; /* set(0) "flushes" this long */
	int hold;	   /* set(0) "flushes" until this is cleared */
	uint64_t off_done; /* cvw_now_ns when the last set(0) returned */
};

static struct fake fk[4];
static struct fs_jrec *jr[4];

static int fake_set(void *arg, int on)
{
	struct fake *f = arg;

	if (on) {
		__atomic_store_n(&f->on, 1, __ATOMIC_SEQ_CST);
		return 0;
	}
	__atomic_store_n(&f->on, 0, __ATOMIC_SEQ_CST);
	if (f->delay_ms)
		usleep(f->delay_ms * 1000);
	while (__atomic_load_n(&f->hold, __ATOMIC_SEQ_CST))
		usleep(1000);
	__atomic_store_n(&f->off_done, cvw_now_ns(), __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&f->offs, 1, __ATOMIC_SEQ_CST);
	return f->flush_ret;
}

static void fake_fail(void *arg, const char *why)
{
	struct fake *f = arg;

	(void)why;
	__atomic_fetch_add(&f->fails, 1, __ATOMIC_SEQ_CST);
}

/* Node @i's agreement (@covers: its device's flush covers all; a join
 * waits at most @timeout_s, 0: no bound; refused, it asks again every
 * @retry_ms unless woken). */
static int node_new_conf(int i, int covers, unsigned timeout_s,
			 unsigned retry_ms)
{
	struct fs_jrec_conf c = {
	    .ls = lkl_ls[i],
	    .covers = covers,
	    .retry_ms = retry_ms,
	    .timeout_s = timeout_s,
	    .node = (uint32_t)i,
	    .set = fake_set,
	    .fail = fake_fail,
	    .arg = &fk[i],
	};
	memset(&fk[i], 0, sizeof(fk[i]));
	return fs_jrec_new(&c, &jr[i]);
}

static int node_new_timeout(int i, int covers, unsigned timeout_s)
{
	return node_new_conf(i, covers, timeout_s, RETRY_MS);
}

static int node_new(int i, int covers)
{
	return node_new_conf(i, covers, 0, RETRY_MS);
}

static void node_free(int i)
{
	fs_jrec_stop(jr[i], 1);
	fs_jrec_free(jr[i]);
	jr[i] = NULL;
}

static int is_on(int i)
{
	return __atomic_load_n(&fk[i].on, __ATOMIC_SEQ_CST);
}

static uint64_t refused(int i)
{
	struct fs_jrec_stats s;

	fs_jrec_stats(jr[i], &s);
	return s.refused;
}

static void test_join_waits_for_the_flush(void)
{
	uint64_t joined;

	REQUIRE(node_new(1, 1) == 0 && node_new(2, 0) == 0);
	REQUIRE(fs_jrec_start(jr[1]) == 0);
	WAIT_FOR(is_on(1));
	CHECK(is_on(1));
	fk[1].delay_ms = 300; /* a slow flush */
	CHECK_EQ(fs_jrec_join(jr[2]), 0);
	joined = cvw_now_ns();
	CHECK(!is_on(1));
	CHECK_EQ(__atomic_load_n(&fk[1].offs, __ATOMIC_SEQ_CST), 1);
	CHECK(fk[1].off_done != 0 && fk[1].off_done <= joined);
	node_free(2);
	node_free(1);
}

static void test_two_cw_side_by_side(void)
{
	uint64_t r0;

	REQUIRE(node_new(1, 1) == 0 && node_new(2, 0) == 0 &&
		node_new(3, 0) == 0);
	REQUIRE(fs_jrec_start(jr[1]) == 0);
	WAIT_FOR(is_on(1));
	CHECK(is_on(1));
	CHECK_EQ(fs_jrec_join(jr[2]), 0);
	CHECK_EQ(fs_jrec_join(jr[3]), 0); /* CW and CW: no wait */
	CHECK(!is_on(1));
	/* node 2 leaves: node 3 still keeps node 1 off */
	fs_jrec_stop(jr[2], 1);
	r0 = refused(1);
	WAIT_FOR(refused(1) >= r0 + 3);
	CHECK(refused(1) >= r0 + 3);
	CHECK(!is_on(1));
	fs_jrec_stop(jr[3], 1);
	WAIT_FOR(is_on(1));
	CHECK(is_on(1));
	node_free(3);
	node_free(2);
	node_free(1);
}

static int offs(int i)
{
	return __atomic_load_n(&fk[i].offs, __ATOMIC_SEQ_CST);
}

/* Two covering nodes, one slow to flush: the other keeps asking every
 * RETRY_MS meanwhile, and must not get PR back past the waiting CW (it
 * gives its PR up exactly once). */
static void test_no_pass_past_the_joiner(void)
{
	REQUIRE(node_new(1, 1) == 0 && node_new(2, 0) == 0 &&
		node_new(3, 1) == 0);
	REQUIRE(fs_jrec_start(jr[1]) == 0 && fs_jrec_start(jr[3]) == 0);
	WAIT_FOR(is_on(1) && is_on(3));
	CHECK(is_on(1) && is_on(3));
	fk[3].delay_ms = 500;
	CHECK_EQ(fs_jrec_join(jr[2]), 0);
	CHECK(!is_on(1) && !is_on(3));
	CHECK_EQ(offs(1), 1);
	CHECK_EQ(offs(3), 1);
	printf("  node 1 asked %llu times in all, %llu refused\n",
	       (unsigned long long)(refused(1) + 1),
	       (unsigned long long)refused(1));
	node_free(3);
	node_free(2);
	node_free(1);
}

static void *join_thread(void *arg)
{
	return (void *)(intptr_t)fs_jrec_join(arg);
}

static int joined(int i)
{
	struct fs_jrec_stats s;

	fs_jrec_stats(jr[i], &s);
	return strcmp(s.mode, "cw") == 0;
}

/* The flush fails: conf.fail (the product fences there) and the PR is
 * kept, so the joiner waits (until the cluster recovers the node: here,
 * until it leaves). */
static void test_flush_failure_keeps_the_pr(void)
{
	pthread_t t;
	void *ret = NULL;

	REQUIRE(node_new(1, 1) == 0 && node_new(2, 0) == 0);
	REQUIRE(fs_jrec_start(jr[1]) == 0);
	WAIT_FOR(is_on(1));
	fk[1].flush_ret = -EIO;
	REQUIRE(pthread_create(&t, NULL, join_thread, jr[2]) == 0);
	WAIT_FOR(__atomic_load_n(&fk[1].fails, __ATOMIC_SEQ_CST) == 1);
	CHECK_EQ(__atomic_load_n(&fk[1].fails, __ATOMIC_SEQ_CST), 1);
	usleep(100000); /* a wrong grant would come meanwhile */
	CHECK(!joined(2));
	fs_jrec_stop(jr[1], 1); /* node 1 goes */
	pthread_join(t, &ret);
	CHECK_EQ((int)(intptr_t)ret, 0);
	CHECK(joined(2));
	node_free(2);
	node_free(1);
}

static int join_done; /* join_thread_done returned */

static void *join_thread_done(void *arg)
{
	void *ret = join_thread(arg);

	__atomic_store_n(&join_done, 1, __ATOMIC_SEQ_CST);
	return ret;
}

/* A flush that does not return: the bounded join gives up with
 * -ETIMEDOUT and holds nothing; the holder, once its flush returns, gives
 * the PR up and (no CW left) takes it back; a new join then succeeds. */
static void test_join_bounded(void)
{
	pthread_t t;
	void *ret = NULL;
	struct fs_jrec_stats s;

	REQUIRE(node_new(1, 1) == 0 && node_new_timeout(2, 0, 1) == 0);
	REQUIRE(fs_jrec_start(jr[1]) == 0);
	WAIT_FOR(is_on(1));
	CHECK(is_on(1));
	__atomic_store_n(&fk[1].hold, 1, __ATOMIC_SEQ_CST);
	REQUIRE(pthread_create(&t, NULL, join_thread_done, jr[2]) == 0);
	WAIT_FOR(__atomic_load_n(&join_done, __ATOMIC_SEQ_CST));
	CHECK(__atomic_load_n(&join_done, __ATOMIC_SEQ_CST)); /* bounded */
	if (!__atomic_load_n(&join_done, __ATOMIC_SEQ_CST))
		__atomic_store_n(&fk[1].hold, 0, __ATOMIC_SEQ_CST);
	pthread_join(t, &ret);
	CHECK_EQ((int)(intptr_t)ret, -ETIMEDOUT);
	CHECK(!joined(2));
	fs_jrec_stats(jr[2], &s);
	CHECK_EQ(s.join_ms, 0);
	CHECK_EQ(offs(1), 0); /* the flush has not returned */
	__atomic_store_n(&fk[1].hold, 0, __ATOMIC_SEQ_CST);
	WAIT_FOR(offs(1) == 1 && is_on(1)); /* gave PR up, got it back */
	CHECK_EQ(offs(1), 1);
	CHECK(is_on(1));
	CHECK_EQ(fs_jrec_join(jr[2]), 0); /* nothing hangs now */
	CHECK(joined(2));
	CHECK(!is_on(1));
	CHECK_EQ(offs(1), 2);
	node_free(2);
	node_free(1);
}

#define NO_POLL_MS 600000 /* a retry that never comes in a test */

static uint64_t stat_of(int i, int which)
{
	struct fs_jrec_stats s;

	fs_jrec_stats(jr[i], &s);
	return which == 0 ? s.tries : s.wakes;
}

/* No poll: node 1 asks again only when a leaving CW holder wakes it;
 * one joiner leaves, node 1 is on again. */
static void test_wake_on_leave(void)
{
	REQUIRE(node_new_conf(1, 1, 0, NO_POLL_MS) == 0 && node_new(2, 0) == 0);
	REQUIRE(fs_jrec_start(jr[1]) == 0);
	CHECK(is_on(1));
	CHECK_EQ(fs_jrec_join(jr[2]), 0);
	CHECK(!is_on(1));
	WAIT_FOR(refused(1) >= 1); /* its try right after giving PR up */
	CHECK_EQ(refused(1), 1);
	fs_jrec_stop(jr[2], 1); /* leaves: wakes node 1 */
	WAIT_FOR(is_on(1));
	CHECK(is_on(1));
	CHECK(stat_of(1, 1) >= 1);
	printf("  node 1: %llu requests, %llu wakes\n",
	       (unsigned long long)stat_of(1, 0),
	       (unsigned long long)stat_of(1, 1));
	node_free(2);
	node_free(1);
}

/* No poll, two joiners: the first one's leave wakes node 1, which is
 * refused (the second still holds CW); the second's leave brings it on. */
static void test_wakes_side_by_side(void)
{
	uint64_t t0;

	REQUIRE(node_new_conf(1, 1, 0, NO_POLL_MS) == 0 &&
		node_new(2, 0) == 0 && node_new(3, 0) == 0);
	REQUIRE(fs_jrec_start(jr[1]) == 0);
	CHECK(is_on(1));
	CHECK_EQ(fs_jrec_join(jr[2]), 0);
	WAIT_FOR(refused(1) >= 1); /* its try right after giving PR up */
	CHECK_EQ(refused(1), 1);
	CHECK_EQ(fs_jrec_join(jr[3]), 0);
	t0 = stat_of(1, 0);
	fs_jrec_stop(jr[2], 1);
	WAIT_FOR(stat_of(1, 0) > t0);
	CHECK(stat_of(1, 1) >= 1);
	CHECK_EQ(refused(1), 2); /* node 3 is still in */
	CHECK(!is_on(1));
	fs_jrec_stop(jr[3], 1);
	WAIT_FOR(is_on(1));
	CHECK(is_on(1));
	CHECK(stat_of(1, 1) >= 2);
	node_free(3);
	node_free(2);
	node_free(1);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	if (lkl_start(3, "", 5000) != 0)
		return 1;
	T_RUN(test_join_waits_for_the_flush);
	T_RUN(test_two_cw_side_by_side);
	T_RUN(test_no_pass_past_the_joiner);
	T_RUN(test_flush_failure_keeps_the_pr);
	T_RUN(test_join_bounded);
	T_RUN(test_wake_on_leave);
	T_RUN(test_wakes_side_by_side);
	lkl_close();
	return t_done();
}
