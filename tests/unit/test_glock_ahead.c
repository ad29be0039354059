/*
 * test_glock_ahead.c — the glock engine's lock-ahead batches
 * (fs_glocks_prefetch, fusefs/cluster/fs_glocks.c and fs_glock.c) over real
 * lockspaces: three lock manager nodes in this process on loopback
 * (lk_local.h; node 3 only a vote), one engine per node for nodes 1
 * and 2, the names mastered on all three (so a batch has local and
 * remote answers). Checks:
 *  - a batch grants every free name in one call, the glocks stay
 *    cached, and the holders that follow are hits (no request of their
 *    own); asking again sends nothing;
 *  - it never waits for, nor disturbs, another node: names another
 *    node holds EX (with a holder in, or only cached) are refused while
 *    that node keeps them, with no blocking callback sent to it;
 *  - a lock-ahead grant given up to another node (the blocking callback
 *    reaches the right glock: one callback argument per lock) before
 *    any holder came counts as unused;
 *  - the LRU bound: a quarter of glock_max asked per call, the table
 *    stays within the bound, evicted grants count as unused;
 *  - glocks busy or held by a local holder are not asked again (one
 *    request per glock), a name given twice is asked once; bad
 *    arguments; a fenced engine.
 * Nothing is timed: waits for another thread poll for a state, bounded
 * by a generous limit.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fusefs/cluster/fs_glock.h"
#include "glock_util.h"
#include "harness.h"
#include "lk_local.h"
#include "lockmgr/lk.h"

static struct fs_glocks *fenced_engine; /* freed after the lockspaces */
static atomic_int invals[2];

static void c_inval(struct fs_glock *gl, void *arg)
{
	(void)gl;
	atomic_fetch_add((atomic_int *)arg, 1);
}

/* As the filesystem's inode locks: no recover op (an invalid value
 * block needs no EX), so a NOQUEUE PR grant stays PR. */
static const struct fs_glock_ops ops = {.inval = c_inval};

static struct fs_glocks *eng_on(int node, unsigned max, unsigned minhold)
{
	struct fs_glocks_conf c = {
	    .max = max, .workers = 2, .minhold_ms = minhold};
	struct fs_glocks *e = NULL;

	if (fs_glocks_new(lkl_ls[node + 1], &c, &e) < 0)
		return NULL;
	fs_glocks_set_ops(e, T_INODE, &ops, &invals[node]);
	return e;
}

static struct fs_glock_stats tstats(struct fs_glocks *e)
{
	struct fs_glocks_stats s;

	fs_glocks_stats(e, &s);
	return s.type[T_INODE];
}

static uint64_t glocks_now(struct fs_glocks *e)
{
	struct fs_glocks_stats s;

	fs_glocks_stats(e, &s);
	return s.glocks_now;
}

static void fill(uint64_t *v, size_t n, uint64_t first)
{
	for (size_t i = 0; i < n; i++)
		v[i] = first + i;
}

static size_t count(const uint8_t *held, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += held[i] != 0;
	return k;
}

static uint64_t basts_recv(int node)
{
	struct lk_stats *s = malloc(sizeof(*s));
	uint64_t n = 0;

	if (s != NULL) {
		lk_ls_stats(lkl_ls[node + 1], s);
		n = s->type[T_INODE].c.basts_recv;
		free(s);
	}
	return n;
}

#define N 200

static void test_batch_then_hits(void)
{
	struct fs_glocks *ea = eng_on(0, 0, 0);
	uint64_t nums[N];
	uint8_t held[N];
	struct fs_glock_stats s;

	REQUIRE(ea != NULL);
	fill(nums, N, 1000);
	CHECK_EQ(fs_glocks_prefetch(ea, T_INODE, nums, N, LK_PR, held), N);
	CHECK_EQ(count(held, N), N);
	s = tstats(ea);
	CHECK_EQ(s.ahead_batches, 1);
	CHECK_EQ(s.ahead_requests, N);
	CHECK_EQ(s.ahead_grants, N);
	CHECK_EQ(s.requests, 0);
	CHECK_EQ(atomic_load(&invals[0]), N); /* first grants: inval */
	CHECK_EQ(glocks_now(ea), N);	      /* idle, cached */
	for (int i = 0; i < N; i++)
		CHECK_EQ(touch(ea, nums[i], LK_PR), 0);
	s = tstats(ea);
	CHECK_EQ(s.hits, N);
	CHECK_EQ(s.waits, 0);
	CHECK_EQ(s.requests, 0); /* no request of their own */
	CHECK_EQ(s.ahead_hits, N);
	/* held now: nothing is asked again */
	memset(held, 0, sizeof(held));
	CHECK_EQ(fs_glocks_prefetch(ea, T_INODE, nums, N, LK_PR, held), 0);
	CHECK_EQ(count(held, N), N);
	s = tstats(ea);
	CHECK_EQ(s.ahead_batches, 1);
	CHECK_EQ(s.ahead_requests, N);
	fs_glocks_free(ea);
	atomic_store(&invals[0], 0);
}

struct ahead_call {
	struct fs_glocks *e;
	uint64_t nums[N];
	uint8_t held[N];
	int ret;
	atomic_int done;
};

static void *ahead_main(void *arg)
{
	struct ahead_call *c = arg;

	c->ret = fs_glocks_prefetch(c->e, T_INODE, c->nums, N, LK_PR, c->held);
	atomic_store(&c->done, 1);
	return NULL;
}

static void test_never_waits_for_remote(void)
{
	struct fs_glocks *ea = eng_on(0, 0, 0), *eb = eng_on(1, 0, 60000);
	struct fs_glock *bg[N / 2];
	struct ahead_call *c = calloc(1, sizeof(*c));
	uint64_t basts;
	pthread_t t;
	int ok = 1;

	REQUIRE(ea != NULL && eb != NULL && c != NULL);
	/* B: EX on the first half; a holder in on the first quarter, the
	 * second quarter only cached */
	for (int i = 0; i < N / 2; i++) {
		REQUIRE(fs_glock_get(eb, T_INODE, 2000 + i, &bg[i]) == 0);
		CHECK_EQ(fs_glock_acquire(bg[i], LK_EX), 0);
		if (i >= N / 4)
			fs_glock_release(bg[i], LK_EX);
	}
	basts = basts_recv(1);
	c->e = ea;
	fill(c->nums, N, 2000);
	REQUIRE(pthread_create(&t, NULL, ahead_main, c) == 0);
	WAIT_FOR(atomic_load(&c->done));
	CHECK(atomic_load(&c->done)); /* came back while B holds */
	pthread_join(t, NULL);
	CHECK_EQ(c->ret, N / 2);
	for (int i = 0; i < N; i++)
		ok &= c->held[i] == (i >= N / 2);
	CHECK(ok);
	CHECK_EQ(basts_recv(1), basts); /* B was not disturbed */
	for (int i = 0; i < N / 2; i++) {
		CHECK_EQ(fs_glock_mode(bg[i]), LK_EX);
		if (i < N / 4)
			fs_glock_release(bg[i], LK_EX);
		fs_glock_put(bg[i]);
	}
	CHECK_EQ(tstats(ea).ahead_requests, N);
	CHECK_EQ(tstats(ea).ahead_grants, N / 2);
	CHECK_EQ(tstats(eb).demote_nl + tstats(eb).demote_pr, 0);
	fs_glocks_free(ea);
	fs_glocks_free(eb);
	free(c);
	atomic_store(&invals[0], 0);
	atomic_store(&invals[1], 0);
}

struct acq {
	struct fs_glocks *e;
	uint64_t num;
	int ret;
	atomic_int done;
};

static void *acq_main(void *arg)
{
	struct acq *a = arg;

	a->ret = touch(a->e, a->num, LK_EX);
	atomic_store(&a->done, 1);
	return NULL;
}

static void test_given_up_unused(void)
{
	struct fs_glocks *ea = eng_on(0, 0, 0), *eb = eng_on(1, 0, 0);
	uint64_t nums[8];
	uint8_t held[8];
	struct acq a = {.num = 3003};
	pthread_t t;

	REQUIRE(ea != NULL && eb != NULL);
	fill(nums, 8, 3000);
	CHECK_EQ(fs_glocks_prefetch(ea, T_INODE, nums, 8, LK_PR, held), 8);
	/* B wants one of them EX: its blocking callback must reach that
	 * glock on A, which gives it up though no holder used it */
	a.e = eb;
	REQUIRE(pthread_create(&t, NULL, acq_main, &a) == 0);
	WAIT_FOR(atomic_load(&a.done));
	CHECK(atomic_load(&a.done));
	pthread_join(t, NULL);
	CHECK_EQ(a.ret, 0);
	WAIT_FOR(tstats(ea).ahead_unused == 1);
	CHECK_EQ(tstats(ea).ahead_unused, 1);
	CHECK_EQ(tstats(ea).demote_nl, 1);
	/* the others are still cached: hits */
	CHECK_EQ(touch(ea, 3000, LK_PR), 0);
	CHECK_EQ(touch(ea, 3007, LK_PR), 0);
	CHECK_EQ(tstats(ea).ahead_hits, 2);
	CHECK_EQ(tstats(ea).requests, 0);
	fs_glocks_free(ea);
	fs_glocks_free(eb);
	atomic_store(&invals[0], 0);
	atomic_store(&invals[1], 0);
}

static void test_lru_bound(void)
{
	struct fs_glocks *ea = eng_on(0, 16, 0);
	uint64_t nums[N];
	uint8_t held[N];
	uint64_t grants = 0;

	REQUIRE(ea != NULL);
	for (int round = 0; round < 10; round++) {
		int r;

		fill(nums, N, 4000 + (uint64_t)round * N);
		r = fs_glocks_prefetch(ea, T_INODE, nums, N, LK_PR, held);
		CHECK(r >= 0 && r <= 4); /* a quarter of 16 */
		CHECK_EQ(count(held, N), r);
		grants += (uint64_t)r;
	}
	CHECK(grants > 16);
	WAIT_FOR(glocks_now(ea) <= 16);
	CHECK(glocks_now(ea) <= 16);
	WAIT_FOR(tstats(ea).ahead_unused >= grants - 16);
	CHECK(tstats(ea).ahead_unused >= grants - 16);
	CHECK(tstats(ea).evictions >= grants - 16);
	fs_glocks_free(ea);
	atomic_store(&invals[0], 0);
}

static void test_local_holders_and_args(void)
{
	struct fs_glocks *ea = eng_on(0, 0, 0);
	struct fs_glock *x;
	uint64_t nums[4] = {5000, 5001, 5001, 5002};
	uint8_t held[4];

	REQUIRE(ea != NULL);
	CHECK_EQ(fs_glocks_prefetch(ea, T_INODE, nums, 4, 7, held), -EINVAL);
	CHECK_EQ(fs_glocks_prefetch(ea, FS_GLOCK_TYPES, nums, 4, LK_PR, held),
		 -EINVAL);
	/* a local holder in EX covers PR: held, not asked */
	REQUIRE(fs_glock_get(ea, T_INODE, 5000, &x) == 0);
	CHECK_EQ(fs_glock_acquire(x, LK_EX), 0);
	CHECK_EQ(fs_glocks_prefetch(ea, T_INODE, nums, 4, LK_PR, held), 2);
	CHECK_EQ(held[0], 1);
	CHECK_EQ(held[1], 1);
	CHECK_EQ(held[2], 0); /* given twice: asked once (busy then) */
	CHECK_EQ(held[3], 1);
	CHECK_EQ(tstats(ea).ahead_requests, 2);
	CHECK_EQ(fs_glock_mode(x), LK_EX);
	/* an EX holder wanting... EX ahead: held already */
	CHECK_EQ(fs_glocks_prefetch(ea, T_INODE, nums, 1, LK_EX, held), 0);
	CHECK_EQ(held[0], 1);
	fs_glock_release(x, LK_EX);
	fs_glock_put(x);
	fs_glocks_fence(ea);
	CHECK_EQ(fs_glocks_prefetch(ea, T_INODE, nums, 4, LK_PR, held), -EIO);
	fenced_engine = ea;
	atomic_store(&invals[0], 0);
}

int main(int argc, char **argv)
{
	int ok;

	t_init(argc, argv);
	ok = lkl_open(3, 3, "", 5000) == 0 && lkl_full(3, 20000) == 0;
	if (!ok) {
		printf(
		    "FAIL glock_ahead_setup (three lockspaces on loopback)\n");
	} else {
		T_RUN(test_batch_then_hits);
		T_RUN(test_never_waits_for_remote);
		T_RUN(test_given_up_unused);
		T_RUN(test_lru_bound);
		T_RUN(test_local_holders_and_args);
	}
	lkl_close();
	fs_glocks_free(fenced_engine);
	return ok ? t_done() : 1;
}
