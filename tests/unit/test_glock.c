/*
 * test_glock.c — the glock engine (fusefs/cluster/fs_glock.c, fs_glocks.c)
 * over real lockspaces: three lock manager nodes in this process on loopback
 * (127.0.0.1..3, one port derived from the PID), node 3 only a vote.
 * Checks, on single glocks (fs_glock_new): the first grant ever sees an
 * invalid LVB and recovers in EX even for a PR holder; readers share; a
 * writer demotes the others (sync only when leaving EX; inval only when
 * the generation moved); cached holders cost no request; two nodes
 * converting PR -> EX at once (a conversion deadlock) both get through,
 * EX stays exclusive; fencing. On engines (one per node): get/put
 * identity; fs_glock_try -EAGAIN against another node's EX and success
 * once it let go; the LRU bound drops the oldest idle glocks (sync, drop,
 * unlock) and never a referenced one; demotes run on the engine's
 * workers with sync/drop; a flush op lets holders in until it is done;
 * the adaptive minimum hold grows on a bounce
 * with local acquires queued and shrinks again, and keeps a lock only for
 * local holders; with change tracking the generation moves only when an
 * EX holder changed something; a fence ends a wait for
 * another node; drop_all; the type's value block bytes go from one
 * node's lvb_write to the next grant's lvb_read; lock events in the
 * trace.
 * Nothing is timed: waits for another thread poll for a state, bounded
 * by a generous limit.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fusefs/cluster/fs_glock.h"
#include "fusefs/stats/fs_stats.h"
#include "glock_util.h"
#include "harness.h"
#include "lk_local.h"
#include "lockmgr/cv_wait.h"
#include "lockmgr/lk.h"

struct ops_count {
	atomic_int sync, inval, recover, drop;
	atomic_int sync_off_worker; /* syncs not on a glock worker */
	atomic_ullong synced;	    /* bit (num % 64) of each sync */
};

static struct lk_ls *ls[3]; /* lkl_ls[1..3] */
/* test_fence_ends_wait's engine: freed once the lockspaces are closed */
static struct fs_glocks *fenced_engine;
static struct ops_count cnt[3]; /* per node, as ls */

static int c_sync(struct fs_glock *gl, int from, int to, void *arg)
{
	struct ops_count *c = arg;

	char name[16] = "";

	(void)to;
	if (from == LK_EX)
		atomic_fetch_add(&c->sync, 1);
	atomic_fetch_or(&c->synced, 1ull << (fs_glock_num(gl) % 64));
	pthread_getname_np(pthread_self(), name, sizeof(name));
	if (strncmp(name, "glock-w", 7) != 0)
		atomic_fetch_add(&c->sync_off_worker, 1);
	return 0;
}

static void c_inval(struct fs_glock *gl, void *arg)
{
	(void)gl;
	atomic_fetch_add(&((struct ops_count *)arg)->inval, 1);
}

static int c_recover(struct fs_glock *gl, void *arg)
{
	(void)gl;
	atomic_fetch_add(&((struct ops_count *)arg)->recover, 1);
	return 0;
}

static void c_drop(struct fs_glock *gl, int from, void *arg)
{
	(void)gl;
	(void)from;
	atomic_fetch_add(&((struct ops_count *)arg)->drop, 1);
}

static const struct fs_glock_ops ops = {
    .sync = c_sync,
    .inval = c_inval,
    .recover = c_recover,
    .drop = c_drop,
};

/* The three nodes (lk_local.h), ls[i] = node i + 1. */
static int setup(void)
{
	if (lkl_open(3, 3, "", 5000) < 0 || lkl_full(3, 20000) < 0)
		return -1;
	for (int i = 0; i < 3; i++)
		ls[i] = lkl_ls[i + 1];
	return 0;
}

static struct fs_glock_stats gstats(struct fs_glock *gl)
{
	struct fs_glock_stats s;

	fs_glock_stats_get(gl, &s);
	return s;
}

static struct fs_glock *gl_on(int node, uint64_t num)
{
	struct lk_name n;
	struct fs_glock *gl = NULL;

	lk_name_make(&n, 1, num, NULL);
	if (fs_glock_new(ls[node], &n, 0, &ops, &cnt[node], &gl) < 0)
		return NULL;
	return gl;
}

static void reset(void)
{
	memset(cnt, 0, sizeof(cnt));
}

static void test_first_grant_recovers(void)
{
	struct fs_glock *a = gl_on(0, 1);
	struct fs_glock_stats st;

	reset();
	REQUIRE(a != NULL);
	CHECK_EQ(fs_glock_acquire(a, LK_PR), 0);
	fs_glock_stats_get(a, &st);
	CHECK_EQ(atomic_load(&cnt[0].recover), 1);
	CHECK_EQ(atomic_load(&cnt[0].inval), 1);
	CHECK_EQ(st.mode, LK_EX); /* stepped up to recover */
	CHECK_EQ(st.recovers, 1);
	fs_glock_release(a, LK_PR);
	fs_glock_free(a);
}

static void test_readers_share_writer_demotes(void)
{
	struct fs_glock *a = gl_on(0, 2), *b = gl_on(1, 2);
	struct fs_glock_stats sa, sb;

	reset();
	REQUIRE(a != NULL && b != NULL);
	CHECK_EQ(fs_glock_acquire(a, LK_EX), 0); /* first: recover */
	fs_glock_release(a, LK_EX);
	/* b reads: a goes EX -> PR, writing back; b sees a new gen */
	CHECK_EQ(fs_glock_acquire(b, LK_PR), 0);
	CHECK_EQ(atomic_load(&cnt[0].sync), 1);
	CHECK_EQ(atomic_load(&cnt[1].inval), 1);
	CHECK_EQ(atomic_load(&cnt[1].recover), 0);
	/* both read at once, a from its cache (once its down-conversion,
	 * which the master answered before granting b, completed on a) */
	WAIT_FOR(gstats(a).demote_pr == 1);
	CHECK_EQ(fs_glock_acquire(a, LK_PR), 0);
	fs_glock_stats_get(a, &sa);
	CHECK_EQ(sa.mode, LK_PR);
	CHECK_EQ(sa.demote_pr, 1);
	CHECK(sa.hits >= 1);
	fs_glock_release(a, LK_PR);
	fs_glock_release(b, LK_PR);
	/* a writes: b goes to NL (no sync: it held PR); a reads again
	 * from cache, b reads again: a new generation */
	CHECK_EQ(fs_glock_acquire(a, LK_EX), 0);
	fs_glock_release(a, LK_EX);
	/* b's demote completes on its own thread, maybe just after a's
	 * grant: wait for its counter (no timing asserted) */
	for (int i = 0; i < 500; i++) {
		struct timespec ts = {0, 10000000};

		fs_glock_stats_get(b, &sb);
		if (sb.demote_nl == 1)
			break;
		nanosleep(&ts, NULL);
	}
	CHECK_EQ(sb.demote_nl, 1);
	CHECK_EQ(atomic_load(&cnt[1].sync), 0);
	CHECK_EQ(atomic_load(&cnt[0].inval), 1); /* only the first */
	CHECK_EQ(fs_glock_acquire(b, LK_PR), 0);
	CHECK_EQ(atomic_load(&cnt[1].inval), 2);
	fs_glock_release(b, LK_PR);
	/* b reads once more: nobody wrote, no inval, no request */
	fs_glock_stats_get(b, &sb);
	CHECK_EQ(fs_glock_acquire(b, LK_PR), 0);
	fs_glock_release(b, LK_PR);
	fs_glock_stats_get(b, &sa);
	CHECK_EQ(atomic_load(&cnt[1].inval), 2);
	CHECK_EQ(sa.requests, sb.requests);
	fs_glock_free(a);
	fs_glock_free(b);
}

struct worker {
	struct fs_glock *gl;
	int n;
	atomic_int *in_ex;
	atomic_int *bad;
};

static void *ex_worker(void *arg)
{
	struct worker *w = arg;
	struct timespec ts = {0, 200000};

	for (int i = 0; i < w->n; i++) {
		/* PR first, then EX: up-conversions from PR on both nodes */
		if (fs_glock_acquire(w->gl, LK_PR) == 0)
			fs_glock_release(w->gl, LK_PR);
		if (fs_glock_acquire(w->gl, LK_EX) != 0) {
			atomic_fetch_add(w->bad, 1);
			continue;
		}
		if (atomic_fetch_add(w->in_ex, 1) != 0)
			atomic_fetch_add(w->bad, 1);
		nanosleep(&ts, NULL);
		atomic_fetch_sub(w->in_ex, 1);
		fs_glock_release(w->gl, LK_EX);
	}
	return NULL;
}

static void test_two_writers_take_turns(void)
{
	struct fs_glock *a = gl_on(0, 3), *b = gl_on(1, 3);
	atomic_int in_ex = 0, bad = 0;
	struct worker wa = {a, 60, &in_ex, &bad};
	struct worker wb = {b, 60, &in_ex, &bad};
	pthread_t ta, tb;
	struct fs_glock_stats sa, sb;

	reset();
	REQUIRE(a != NULL && b != NULL);
	pthread_create(&ta, NULL, ex_worker, &wa);
	pthread_create(&tb, NULL, ex_worker, &wb);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	CHECK_EQ(atomic_load(&bad), 0);
	fs_glock_stats_get(a, &sa);
	fs_glock_stats_get(b, &sb);
	printf("    two writers: demotes %llu + %llu, deadlock retries "
	       "%llu + %llu\n",
	       (unsigned long long)(sa.demote_pr + sa.demote_nl),
	       (unsigned long long)(sb.demote_pr + sb.demote_nl),
	       (unsigned long long)sa.retries, (unsigned long long)sb.retries);
	CHECK(sa.demote_pr + sa.demote_nl + sb.demote_pr + sb.demote_nl > 0);
	fs_glock_free(a);
	fs_glock_free(b);
}

static void test_fence(void)
{
	struct fs_glock *a = gl_on(0, 4);

	REQUIRE(a != NULL);
	CHECK_EQ(fs_glock_acquire(a, LK_PR), 0);
	fs_glock_release(a, LK_PR);
	fs_glock_fence(a);
	CHECK(fs_glock_fenced(a));
	CHECK_EQ(fs_glock_acquire(a, LK_PR), -EIO);
	CHECK_EQ(fs_glock_acquire(a, 7), -EINVAL);
	fs_glock_free(a);
}

/* ---- engines ------------------------------------------------------ */

static struct fs_glocks *eng_on(int node, unsigned max, unsigned minhold)
{
	struct fs_glocks_conf c = {
	    .max = max, .workers = 2, .minhold_ms = minhold};
	struct fs_glocks *e = NULL;

	if (fs_glocks_new(ls[node], &c, &e) < 0)
		return NULL;
	fs_glocks_set_ops(e, T_INODE, &ops, &cnt[node]);
	return e;
}

static uint64_t glocks_now(struct fs_glocks *e)
{
	struct fs_glocks_stats s;

	fs_glocks_stats(e, &s);
	return s.glocks_now;
}

static void test_get_put_identity(void)
{
	struct fs_glocks *e = eng_on(0, 0, 0);
	struct fs_glock *a, *b, *c, *d, *x;

	REQUIRE(e != NULL);
	CHECK_EQ(fs_glock_get(e, T_INODE, 100, &a), 0);
	CHECK_EQ(fs_glock_get(e, T_INODE, 100, &b), 0);
	CHECK_EQ(fs_glock_get(e, T_INODE, 101, &c), 0);
	CHECK_EQ(fs_glock_get(e, T_INODE + 1, 100, &d), 0);
	CHECK(a == b);
	CHECK(a != c && a != d && c != d);
	CHECK_EQ(fs_glock_type(a), T_INODE);
	CHECK_EQ(fs_glock_num(a), 100);
	CHECK_EQ(fs_glock_type(d), T_INODE + 1);
	CHECK_EQ(fs_glock_mode(a), -1); /* no DLM request yet */
	CHECK_EQ(fs_glock_get(e, FS_GLOCK_TYPES, 1, &x), -EINVAL);
	CHECK_EQ(glocks_now(e), 3);
	fs_glock_put(b);
	fs_glock_put(c);
	CHECK_EQ(fs_glock_get(e, T_INODE, 100, &b), 0);
	CHECK(a == b); /* still referenced once: the same glock */
	fs_glock_put(a);
	fs_glock_put(b);
	fs_glock_put(d);
	CHECK_EQ(glocks_now(e), 3); /* idle glocks stay (no bound) */
	fs_glocks_free(e);
}

/* fs_glock_try until granted (an unlock of another node reaches the
 * master on its own); returns the refusals, -1 if it never came. */
static int try_until_granted(struct fs_glock *gl, int mode)
{
	int n = 0, ret;

	while ((ret = fs_glock_try(gl, mode)) == -EAGAIN && n < 2000) {
		struct timespec ts = {0, 10000000};

		nanosleep(&ts, NULL);
		n++;
	}
	return ret == 0 ? n : -1;
}

static void test_try_vs_remote_ex(void)
{
	struct fs_glocks *ea = eng_on(0, 0, 0), *eb = eng_on(1, 0, 0);
	struct fs_glock *a, *b;
	struct fs_glock_stats s;
	int extra;

	reset();
	REQUIRE(ea != NULL && eb != NULL);
	REQUIRE(fs_glock_get(ea, T_INODE, 200, &a) == 0);
	REQUIRE(fs_glock_get(eb, T_INODE, 200, &b) == 0);
	CHECK_EQ(fs_glock_acquire(b, LK_EX), 0);
	CHECK_EQ(fs_glock_try(a, LK_EX), -EAGAIN);
	CHECK_EQ(fs_glock_try(a, LK_PR), -EAGAIN);
	CHECK_EQ(fs_glock_try(a, 7), -EINVAL);
	fs_glock_release(b, LK_EX);
	/* B still caches EX: a try sends no blocking callback */
	CHECK_EQ(fs_glock_try(a, LK_EX), -EAGAIN);
	CHECK_EQ(fs_glock_mode(b), LK_EX);
	CHECK_EQ(fs_glocks_drop_all(eb), 0); /* B lets go */
	CHECK_EQ(fs_glock_mode(b), -1);
	/* B's unlock travels to the master on its own: try until it got
	 * there (each refusal counted) */
	extra = try_until_granted(a, LK_EX);
	CHECK_EQ(fs_glock_mode(a), LK_EX);
	fs_glock_release(a, LK_EX);
	CHECK_EQ(fs_glock_try(a, LK_PR), 0); /* covered: a hit */
	/* a local holder in PR and a want of EX: never waits */
	fs_glock_release(a, LK_PR);
	s = gstats(a);
	CHECK_EQ(s.try_fails, 3 + extra);
	CHECK_EQ(s.mode_failed[LK_EX], 2 + extra);
	CHECK_EQ(s.mode_failed[LK_PR], 1);
	CHECK_EQ(s.acquires, 2);
	fs_glock_put(a);
	fs_glock_put(b);
	fs_glocks_free(ea);
	fs_glocks_free(eb);
}

static void test_held_and_bad_release(void)
{
	struct fs_glocks *ea = eng_on(0, 0, 0);
	struct fs_glock *a;

	REQUIRE(ea != NULL);
	REQUIRE(fs_glock_get(ea, T_INODE, 220, &a) == 0);
	CHECK(!fs_glock_held(a, LK_PR));
	CHECK_EQ(fs_glock_acquire(a, LK_EX), 0);
	CHECK(fs_glock_held(a, LK_PR));
	CHECK(fs_glock_held(a, LK_EX));
	FS_GLOCK_ASSERT_HELD(a, LK_EX);
	fs_glock_release(a, LK_EX);
	CHECK(!fs_glock_held(a, LK_PR)); /* cached EX, but no holder */
#ifndef UCFS_DEBUG			 /* debug builds abort on it */
	fs_glock_release(a, LK_EX);
	CHECK_EQ(gstats(a).bad_releases, 1);
	CHECK_EQ(gstats(a).holders, 0);
#endif
	fs_glock_put(a);
	fs_glocks_free(ea);
}

static void test_try_never_waits_for_local(void)
{
	struct fs_glocks *ea = eng_on(0, 0, 0);
	struct fs_glock *a;

	REQUIRE(ea != NULL);
	/* a type without ops: no recovery, so a PR grant stays PR */
	REQUIRE(fs_glock_get(ea, T_INODE + 2, 210, &a) == 0);
	CHECK_EQ(fs_glock_acquire(a, LK_PR), 0);
	CHECK_EQ(fs_glock_mode(a), LK_PR);
	CHECK_EQ(fs_glock_try(a, LK_EX), -EAGAIN); /* holder in PR */
	fs_glock_release(a, LK_PR);
	CHECK_EQ(fs_glock_try(a, LK_EX), 0); /* alone: up-converts */
	CHECK_EQ(fs_glock_mode(a), LK_EX);
	fs_glock_release(a, LK_EX);
	fs_glock_put(a);
	fs_glocks_free(ea);
}

static void test_lru_drops_oldest(void)
{
	struct fs_glocks *ea = eng_on(0, 4, 0), *eb = eng_on(1, 0, 0);
	struct fs_glocks_stats s;
	struct fs_glock *a, *b;

	reset();
	REQUIRE(ea != NULL && eb != NULL);
	for (uint64_t n = 300; n < 310; n++)
		CHECK_EQ(touch(ea, n, LK_EX), 0);
	WAIT_FOR(glocks_now(ea) == 4);
	fs_glocks_stats(ea, &s);
	CHECK_EQ(s.glocks_now, 4);
	CHECK_EQ(s.type[T_INODE].evictions, 6);
	CHECK_EQ(s.type[T_INODE].evict_syncs, 6);
	CHECK_EQ(atomic_load(&cnt[0].sync), 6); /* each held EX */
	CHECK_EQ(atomic_load(&cnt[0].drop), 6);
	CHECK_EQ(atomic_load(&cnt[0].sync_off_worker), 0);
	/* the oldest six went: 300..305 */
	CHECK_EQ(atomic_load(&cnt[0].synced), 0x3full << (300 % 64));
	/* ... and were unlocked: another node gets them at once */
	REQUIRE(fs_glock_get(eb, T_INODE, 300, &b) == 0);
	CHECK(try_until_granted(b, LK_EX) >= 0);
	fs_glock_release(b, LK_EX);
	fs_glock_put(b);
	/* the newest four still hold EX here */
	REQUIRE(fs_glock_get(ea, T_INODE, 309, &a) == 0);
	CHECK_EQ(fs_glock_mode(a), LK_EX);
	fs_glock_put(a);
	fs_glocks_free(ea);
	fs_glocks_free(eb);
}

static void test_lru_keeps_referenced(void)
{
	struct fs_glocks *ea = eng_on(0, 2, 0);
	struct fs_glock *kept;

	reset();
	REQUIRE(ea != NULL);
	REQUIRE(fs_glock_get(ea, T_INODE, 400, &kept) == 0);
	CHECK_EQ(fs_glock_acquire(kept, LK_EX), 0);
	fs_glock_release(kept, LK_EX); /* idle mode, but referenced */
	for (uint64_t n = 401; n < 409; n++)
		CHECK_EQ(touch(ea, n, LK_EX), 0);
	WAIT_FOR(glocks_now(ea) == 2);
	CHECK_EQ(glocks_now(ea), 2);
	CHECK_EQ(atomic_load(&cnt[0].sync), 7); /* 401..407 */
	CHECK_EQ(atomic_load(&cnt[0].synced) & (1ull << (400 % 64)), 0);
	CHECK_EQ(fs_glock_mode(kept), LK_EX);
	fs_glock_put(kept);
	fs_glocks_free(ea);
}

static struct fs_glocks_stats estats(struct fs_glocks *e)
{
	struct fs_glocks_stats s;

	fs_glocks_stats(e, &s);
	return s;
}

/* While the pins' owner prunes them (fs_glocks_set_pruned: the
 * namespace's one prune asks the kernel to forget inodes, fs_iprune.c),
 * a pinned glock is never dropped for the bound, even past it; the
 * unpins the owner's prune brings let the LRU drop those glocks, not
 * the pinned ones; once the owner says it cannot prune, the bound drops
 * the oldest pins itself. */
static void test_pins_pruned(void)
{
	struct fs_glocks *ea = eng_on(0, 16, 0);
	struct fs_glocks_stats s;

	reset();
	REQUIRE(ea != NULL);
	fs_glocks_set_pruned(ea, 1);
	CHECK_EQ(fs_glocks_max(ea), 16u);
	for (uint64_t n = 500; n < 540; n++) {
		CHECK_EQ(fs_glock_pin(ea, T_INODE, n), 0);
		CHECK_EQ(fs_glock_pin(ea, T_INODE, n), 0); /* one pin */
		CHECK_EQ(touch(ea, n, LK_EX), 0);
	}
	s = estats(ea);
	CHECK_EQ(s.glocks_now, 40); /* nothing dropped under a pin */
	CHECK_EQ(atomic_load(&cnt[0].drop), 0);
	CHECK_EQ(s.pinned_now, 40);
	CHECK_EQ(s.pinned_idle_now, 40); /* idle: demote-ahead sees them */
	CHECK_EQ(s.pin_drops, 0);
	CHECK_EQ(s.prune, 1);
	/* the owner's prune: the kernel forgot the 28 oldest */
	for (uint64_t n = 500; n < 528; n++)
		fs_glock_unpin(ea, T_INODE, n);
	WAIT_FOR(glocks_now(ea) <= 16);
	s = estats(ea);
	CHECK(s.glocks_now <= 16);
	CHECK_EQ(s.pinned_now, 12);
	CHECK_EQ(s.pin_drops, 0);
	/* the kernel cannot prune: the bound takes the oldest pins */
	for (uint64_t n = 540; n < 550; n++) {
		CHECK_EQ(fs_glock_pin(ea, T_INODE, n), 0);
		CHECK_EQ(touch(ea, n, LK_PR), 0);
	}
	CHECK(glocks_now(ea) > 16);
	fs_glocks_set_pruned(ea, 0);
	WAIT_FOR(glocks_now(ea) <= 16);
	s = estats(ea);
	CHECK(s.glocks_now <= 16);
	CHECK(s.pin_drops >= 22 - 16);
	CHECK_EQ(s.prune, 0);
	fs_glocks_free(ea);
}

/* With no prune function, pins go as idle glocks did (the oldest once
 * no unpinned idle one is left), counted; a later unpin finds none. */
static void test_pins_dropped_without_prune(void)
{
	struct fs_glocks *ea = eng_on(0, 4, 0);
	struct fs_glocks_stats s;

	reset();
	REQUIRE(ea != NULL);
	for (uint64_t n = 600; n < 610; n++) {
		CHECK_EQ(fs_glock_pin(ea, T_INODE, n), 0);
		CHECK_EQ(touch(ea, n, LK_PR), 0);
	}
	WAIT_FOR(glocks_now(ea) == 4);
	s = estats(ea);
	CHECK_EQ(s.glocks_now, 4);
	CHECK_EQ(s.pin_drops, 6);
	CHECK_EQ(s.pinned_now, 4);
	CHECK_EQ(s.prune, 0);
	for (uint64_t n = 600; n < 610; n++)
		fs_glock_unpin(ea, T_INODE, n);
	s = estats(ea);
	CHECK_EQ(s.pinned_now, 0);
	CHECK_EQ(s.idle_now, 4);
	fs_glocks_free(ea);
}

static void test_demote_on_worker(void)
{
	struct fs_glocks *ea = eng_on(0, 0, 0), *eb = eng_on(1, 0, 0);
	struct fs_glock *a, *b;
	struct fs_glock_stats s;

	reset();
	REQUIRE(ea != NULL && eb != NULL);
	REQUIRE(fs_glock_get(ea, T_INODE, 500, &a) == 0);
	REQUIRE(fs_glock_get(eb, T_INODE, 500, &b) == 0);
	CHECK_EQ(fs_glock_acquire(a, LK_EX), 0);
	fs_glock_release(a, LK_EX);
	CHECK_EQ(atomic_load(&cnt[0].inval), 1); /* the first grant */
	/* B reads: A's worker writes back, EX -> PR; nothing dropped */
	CHECK_EQ(fs_glock_acquire(b, LK_PR), 0);
	CHECK_EQ(atomic_load(&cnt[0].sync), 1); /* before B's grant */
	CHECK_EQ(atomic_load(&cnt[0].drop), 0);
	/* A's down-conversion completes on A after the master granted B */
	WAIT_FOR(gstats(a).demote_pr == 1);
	CHECK_EQ(fs_glock_mode(a), LK_PR);
	fs_glock_release(b, LK_PR);
	/* B writes: A goes PR -> NL: drop, no sync */
	CHECK_EQ(fs_glock_acquire(b, LK_EX), 0);
	WAIT_FOR(gstats(a).demote_nl == 1);
	CHECK_EQ(atomic_load(&cnt[0].drop), 1);
	CHECK_EQ(atomic_load(&cnt[0].sync), 1);
	CHECK_EQ(fs_glock_mode(a), LK_NL);
	fs_glock_release(b, LK_EX);
	/* A reads again: B wrote, the generation moved: inval */
	CHECK_EQ(fs_glock_acquire(a, LK_PR), 0);
	CHECK_EQ(atomic_load(&cnt[0].inval), 2);
	fs_glock_release(a, LK_PR);
	CHECK_EQ(atomic_load(&cnt[0].sync_off_worker), 0);
	CHECK_EQ(atomic_load(&cnt[1].sync_off_worker), 0);
	s = gstats(a);
	CHECK_EQ(s.demote_pr, 1);
	CHECK_EQ(s.demote_nl, 1);
	fs_glock_put(a);
	fs_glock_put(b);
	fs_glocks_free(ea);
	fs_glocks_free(eb);
}

/* Mode of glock @num on engine @e (a reference for the look only). */
static int mode_of(struct fs_glocks *e, uint64_t num)
{
	struct fs_glock *gl;
	int m;

	if (fs_glock_get(e, T_INODE, num, &gl) < 0)
		return -2;
	m = fs_glock_mode(gl);
	fs_glock_put(gl);
	return m;
}

/* @which: 0 demotes to NL, 1 demote-ahead jobs, 2 unlocks of a held
 * mode */
static uint64_t type_stat(struct fs_glocks *e, int which)
{
	struct fs_glocks_stats s;

	fs_glocks_stats(e, &s);
	return which == 2   ? s.type[T_INODE].evict_syncs
	       : which == 1 ? s.type[T_INODE].aheads
			    : s.type[T_INODE].demote_nl;
}

/* Demote-ahead passes of engine @e that swept nothing (a streak's
 * first callback) */
static uint64_t unswept(struct fs_glocks *e)
{
	struct fs_glocks_stats s;

	fs_glocks_stats(e, &s);
	return s.ahead_unswept;
}

/*
 * Demote-ahead answers a streak, not one request: A reads glocks
 * 1000..1010 and leaves them idle; B asks for 1004 in EX. A's blocking
 * callback, the first from B, gives up 1004 alone (to NL): its
 * neighbours stay PR, whenever the callback came. B then asks for 1005:
 * within the streak window of the first, A's pass also gives up its
 * idle PR neighbours within the span (8): not 1002 (used just now),
 * not 1100 (too far): unlocked (no wait for the master's answer). B
 * then takes 1009 and 1010 with no demote on A of their own. A callback
 * that came after the window starts a new streak (a loaded machine):
 * B asks for the next number, up to 1008. If the sweep came
 * FS_GLOCK_AHEAD_IDLE_MS or more after 1002's use, 1002 was idle by
 * then and may go too: only what holds either way is checked.
 */
static void test_demote_ahead(void)
{
	static const struct fs_glock_ops ahead_ops = {
	    .sync = c_sync, .drop = c_drop, .ahead_span = 8};
	struct fs_glocks_conf c = {.workers = 2};
	struct fs_glocks *ea = NULL, *eb = eng_on(1, 0, 0);
	struct timespec idle = {0, (FS_GLOCK_AHEAD_IDLE_MS + 50) * 1000000L};
	uint64_t t0, ahead, n, asked;
	int late;

	reset();
	REQUIRE(fs_glocks_new(ls[0], &c, &ea) == 0 && eb != NULL);
	fs_glocks_set_ops(ea, T_INODE, &ahead_ops, &cnt[0]);
	for (n = 1000; n <= 1010; n++)
		CHECK_EQ(touch(ea, n, LK_PR), 0);
	CHECK_EQ(touch(ea, 1100, LK_PR), 0);
	nanosleep(&idle, NULL);
	CHECK_EQ(touch(eb, 1004, LK_EX), 0);
	/* B's first callback: 1004 alone */
	WAIT_FOR(unswept(ea) == 1 && type_stat(ea, 0) == 1);
	CHECK_EQ(unswept(ea), 1);
	CHECK_EQ(type_stat(ea, 0), 1);
	CHECK_EQ(type_stat(ea, 1), 0);
	CHECK_EQ(mode_of(ea, 1004), LK_NL);
	CHECK_EQ(mode_of(ea, 1003), LK_PR);
	CHECK_EQ(mode_of(ea, 1005), LK_PR);
	CHECK_EQ(mode_of(ea, 1000), LK_PR);
	nanosleep(&idle, NULL); /* the looks above were uses */
	t0 = cvw_now_ns();
	CHECK_EQ(touch(ea, 1002, LK_PR), 0); /* in use lately */
	/* B keeps asking: a sweep */
	for (asked = 1005; asked <= 1008; asked++) {
		CHECK_EQ(touch(eb, asked, LK_EX), 0);
		WAIT_FOR(unswept(ea) > asked - 1004 || type_stat(ea, 1) > 0);
		if (type_stat(ea, 1) > 0)
			break;
		printf("# callback for %llu after the streak window\n",
		       (unsigned long long)asked);
	}
	REQUIRE(asked <= 1008);
	/* 1000, 1001, 1003, asked + 1..1010 (and 1002 if the pass came
	 * late), the ones asked before swept neither */
	WAIT_FOR(type_stat(ea, 2) >= 3 + 1010 - asked);
	late = cvw_now_ns() - t0 >= FS_GLOCK_AHEAD_IDLE_MS * 1000000ull;
	if (late)
		printf("# pass %llu ms after 1002's use: 1002 not checked\n",
		       (unsigned long long)((cvw_now_ns() - t0) / 1000000));
	ahead = 3 + 1010 - asked; /* 1000, 1001, 1003, asked+1..1010 */
	CHECK(type_stat(ea, 1) == ahead ||
	      (late && type_stat(ea, 1) == ahead + 1));
	ahead = type_stat(ea, 1);
	CHECK_EQ(type_stat(ea, 2), ahead);
	CHECK_EQ(type_stat(ea, 0), asked - 1003);
	CHECK_EQ(mode_of(ea, 1000), -1);
	CHECK_EQ(mode_of(ea, 1010), -1);
	for (n = 1004; n <= asked; n++)
		CHECK_EQ(mode_of(ea, n), LK_NL);
	CHECK_EQ(mode_of(ea, 1002), ahead == 3 + 1010 - asked ? LK_PR : -1);
	CHECK_EQ(mode_of(ea, 1100), LK_PR);
	CHECK_EQ(touch(eb, 1009, LK_EX), 0);
	CHECK_EQ(touch(eb, 1010, LK_EX), 0);
	CHECK_EQ(type_stat(ea, 0), asked - 1003); /* no demote of their own */
	CHECK_EQ(atomic_load(&cnt[0].drop), ahead + asked - 1003);
	fs_glocks_free(ea);
	fs_glocks_free(eb);
}

/*
 * Demote-ahead widens while one node keeps asking: B takes 1040, 1010
 * and 1030 in EX, one after another. A's first callback (1040) gives up
 * that lock alone (1039 and 1041 stay); the second, within the streak
 * window, sweeps 8 numbers around 1010 (1002..1018); the third, 16
 * around 1030 (1014..1046): 1044 goes too, 1001 and 1047 (beyond every
 * pass) stay. Passes after the window would not widen: then only what
 * holds either way is checked (a slow machine). The count of locks
 * given up is awaited before any look: a look is a use. A streak that
 * swept outlives a pause of 300 ms (GL_AHEAD_KEEP_NS): B's next
 * callback sweeps too.
 */
static void test_demote_ahead_widens(void)
{
	static const struct fs_glock_ops ahead_ops = {
	    .sync = c_sync, .drop = c_drop, .ahead_span = 8};
	struct fs_glocks_conf c = {.workers = 2};
	struct fs_glocks *ea = NULL, *eb = eng_on(1, 0, 0);
	struct timespec idle = {0, (FS_GLOCK_AHEAD_IDLE_MS + 50) * 1000000L};
	struct timespec pause = {0, 300000000L};
	struct fs_glocks_stats s;
	uint64_t t0, t1;

	reset();
	REQUIRE(fs_glocks_new(ls[0], &c, &ea) == 0 && eb != NULL);
	fs_glocks_set_ops(ea, T_INODE, &ahead_ops, &cnt[0]);
	for (uint64_t n = 1000; n <= 1050; n++)
		CHECK_EQ(touch(ea, n, LK_PR), 0);
	nanosleep(&idle, NULL);
	t0 = cvw_now_ns();
	CHECK_EQ(touch(eb, 1040, LK_EX), 0); /* 1040 alone */
	WAIT_FOR(unswept(ea) == 1);
	CHECK_EQ(unswept(ea), 1);
	CHECK_EQ(type_stat(ea, 1), 0);
	CHECK_EQ(touch(eb, 1010, LK_EX), 0); /* 1002..1018 */
	CHECK_EQ(touch(eb, 1030, LK_EX), 0); /* 1014..1046 */
	t1 = cvw_now_ns();
	fs_glocks_stats(ea, &s);
	if (t1 - t0 < 150000000ull) {
		/* 1002..1018 but 1010, 1019..1046 but 1030 and 1040 */
		WAIT_FOR(type_stat(ea, 2) >= 42);
		CHECK_EQ(type_stat(ea, 1), 42);
		fs_glocks_stats(ea, &s);
		CHECK_EQ(s.ahead_unswept, 1);
		CHECK_EQ(s.ahead_widened, 1);
		CHECK_EQ(mode_of(ea, 1002), -1);
		CHECK_EQ(mode_of(ea, 1018), -1);
		CHECK_EQ(mode_of(ea, 1020), -1);
		CHECK_EQ(mode_of(ea, 1044), -1);
	} else {
		printf("# callbacks more than 150 ms apart: not checked\n");
	}
	CHECK_EQ(mode_of(ea, 1001), LK_PR);
	CHECK_EQ(mode_of(ea, 1047), LK_PR);
	/* a streak that swept outlives a pause longer than the window:
	 * 300 ms later, B's callback for 1049 sweeps 32 numbers around it
	 * (1047, 1048, 1050 are left) */
	nanosleep(&pause, NULL);
	CHECK_EQ(touch(eb, 1049, LK_EX), 0);
	if (t1 - t0 < 150000000ull && cvw_now_ns() - t1 < 900000000ull) {
		WAIT_FOR(type_stat(ea, 2) >= 45);
		CHECK_EQ(unswept(ea), 1);
		CHECK_EQ(type_stat(ea, 1), 45);
	} else {
		printf("# pause longer than 900 ms: not checked\n");
	}
	fs_glocks_free(ea);
	fs_glocks_free(eb);
}

/*
 * Each node asking has a streak of its own: B asks for 1010, C for
 * 1030, then B for 1012. The first callback of each node gives up its
 * lock alone, whenever they came; B's second, within the window of its
 * first, sweeps 8 numbers around 1012 (1004..1020 but 1010 and 1012:
 * 15 locks), though C asked in between. A second callback of B after
 * the window would not sweep: then only what holds either way is
 * checked (a slow machine).
 */
static void test_demote_ahead_peers(void)
{
	static const struct fs_glock_ops ahead_ops = {
	    .sync = c_sync, .drop = c_drop, .ahead_span = 8};
	struct fs_glocks_conf c = {.workers = 2};
	struct fs_glocks *ea = NULL, *eb = eng_on(1, 0, 0);
	struct fs_glocks *ec = eng_on(2, 0, 0);
	struct timespec idle = {0, (FS_GLOCK_AHEAD_IDLE_MS + 50) * 1000000L};
	uint64_t t0, t1;

	reset();
	REQUIRE(fs_glocks_new(ls[0], &c, &ea) == 0 && eb != NULL && ec != NULL);
	fs_glocks_set_ops(ea, T_INODE, &ahead_ops, &cnt[0]);
	for (uint64_t n = 1000; n <= 1040; n++)
		CHECK_EQ(touch(ea, n, LK_PR), 0);
	nanosleep(&idle, NULL);
	t0 = cvw_now_ns();
	CHECK_EQ(touch(eb, 1010, LK_EX), 0);
	CHECK_EQ(touch(ec, 1030, LK_EX), 0);
	WAIT_FOR(unswept(ea) == 2);
	CHECK_EQ(unswept(ea), 2);
	CHECK_EQ(type_stat(ea, 1), 0);
	CHECK_EQ(touch(eb, 1012, LK_EX), 0);
	t1 = cvw_now_ns();
	if (t1 - t0 < 150000000ull) {
		WAIT_FOR(type_stat(ea, 2) >= 15);
		CHECK_EQ(unswept(ea), 2);
		CHECK_EQ(type_stat(ea, 1), 15);
		CHECK_EQ(type_stat(ea, 2), 15);
	} else {
		printf("# callbacks more than 150 ms apart: not checked\n");
	}
	CHECK_EQ(type_stat(ea, 0), 3);
	fs_glocks_free(ea);
	fs_glocks_free(eb);
	fs_glocks_free(ec);
}

struct acq {
	struct fs_glock *gl;
	int mode, ret;
};

static void *acq_main(void *arg)
{
	struct acq *q = arg;

	q->ret = fs_glock_acquire(q->gl, q->mode);
	if (q->ret == 0)
		fs_glock_release(q->gl, q->mode);
	return NULL;
}

/* ops->flush: started, finished later by the test (fs_glock_flushed) */
static struct fs_glock *flushing;
static atomic_int flush_calls;

static int c_flush(struct fs_glock *gl, void *arg)
{
	(void)arg;
	flushing = gl;
	atomic_fetch_add(&flush_calls, 1);
	return 1;
}

static const struct fs_glock_ops flush_ops = {
    .sync = c_sync,
    .inval = c_inval,
    .recover = c_recover,
    .drop = c_drop,
    .flush = c_flush,
};

/* A demote from EX with a flush op lets holders in (the requests the
 * flush causes need the lock) until fs_glock_flushed; then it goes on
 * as usual. */
static void test_flush_admits_holders(void)
{
	struct fs_glocks_conf c = {.workers = 2};
	struct fs_glocks *ea = NULL, *eb = eng_on(1, 0, 0);
	struct fs_glock *a, *b;
	struct acq q;
	pthread_t th;

	reset();
	flushing = NULL;
	atomic_store(&flush_calls, 0);
	REQUIRE(fs_glocks_new(ls[0], &c, &ea) == 0 && eb != NULL);
	fs_glocks_set_ops(ea, T_INODE, &flush_ops, &cnt[0]);
	REQUIRE(fs_glock_get(ea, T_INODE, 900, &a) == 0);
	REQUIRE(fs_glock_get(eb, T_INODE, 900, &b) == 0);
	CHECK_EQ(fs_glock_acquire(a, LK_EX), 0);
	fs_glock_release(a, LK_EX);
	/* B reads: A's worker starts the flush, the demote waits for it */
	q = (struct acq){.gl = b, .mode = LK_PR, .ret = 1};
	REQUIRE(pthread_create(&th, NULL, acq_main, &q) == 0);
	WAIT_FOR(atomic_load(&flush_calls) == 1);
	REQUIRE(atomic_load(&flush_calls) == 1 && flushing == a);
	/* a holder of A in EX runs meanwhile (a demote is pending) */
	CHECK_EQ(fs_glock_try(a, LK_EX), 0);
	fs_glock_release(a, LK_EX);
	CHECK_EQ(fs_glock_acquire(a, LK_PR), 0);
	fs_glock_release(a, LK_PR);
	CHECK_EQ(atomic_load(&cnt[0].sync), 0); /* nothing given up yet */
	CHECK_EQ(fs_glock_mode(a), LK_EX);
	fs_glock_flushed(a);
	pthread_join(th, NULL);
	CHECK_EQ(q.ret, 0);
	WAIT_FOR(gstats(a).demote_pr == 1);
	CHECK_EQ(fs_glock_mode(a), LK_PR);
	CHECK_EQ(atomic_load(&cnt[0].sync), 1);
	CHECK_EQ(gstats(a).flushes, 1);
	CHECK_EQ(atomic_load(&flush_calls), 1); /* once per demote */
	fs_glock_put(a);
	fs_glock_put(b);
	fs_glocks_free(ea);
	fs_glocks_free(eb);
}

static void test_minhold_adapts(void)
{
	struct fs_glocks *ea = eng_on(0, 0, 0), *eb = eng_on(1, 0, 0);
	struct fs_glock *a, *b;
	struct acq q1, q2;
	pthread_t t1, t2;
	struct fs_glock_stats s;

	REQUIRE(ea != NULL && eb != NULL);
	REQUIRE(fs_glock_get(ea, T_INODE, 600, &a) == 0);
	REQUIRE(fs_glock_get(eb, T_INODE, 600, &b) == 0);
	CHECK_EQ(touch(ea, 600, LK_EX), 0);
	CHECK_EQ(fs_glock_acquire(b, LK_EX), 0); /* A loses it */
	/* two holders of A queue behind B's */
	q1 = (struct acq){a, LK_EX, -1};
	q2 = (struct acq){a, LK_EX, -1};
	pthread_create(&t1, NULL, acq_main, &q1);
	pthread_create(&t2, NULL, acq_main, &q2);
	WAIT_FOR(gstats(a).waiters == 2);
	CHECK_EQ(gstats(a).waiters, 2);
	fs_glock_release(b, LK_EX);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	CHECK_EQ(q1.ret, 0);
	CHECK_EQ(q2.ret, 0);
	s = gstats(a);
	CHECK_EQ(s.bounces, 1);
	CHECK_EQ(s.minhold_grows, 1);
	CHECK(s.minhold_ms >= 1);
	/* a bounce no other acquire queued for: no growth; then a demote
	 * of that uncontended grant shrinks it back to the base */
	CHECK_EQ(fs_glock_acquire(b, LK_EX), 0);
	fs_glock_release(b, LK_EX);
	CHECK_EQ(touch(ea, 600, LK_EX), 0);
	CHECK_EQ(fs_glock_acquire(b, LK_EX), 0);
	fs_glock_release(b, LK_EX);
	/* A's third demote ends on A after the master granted B */
	WAIT_FOR(gstats(a).demote_nl == 3);
	s = gstats(a);
	CHECK_EQ(s.demote_nl, 3);
	CHECK_EQ(s.bounces, 2);
	CHECK_EQ(s.minhold_grows, 1);
	CHECK(s.minhold_shrinks >= 1);
	CHECK_EQ(s.minhold_ms, 0);
	fs_glock_put(a);
	fs_glock_put(b);
	fs_glocks_free(ea);
	fs_glocks_free(eb);
}

/* The minimum hold keeps a lock only for local holders: with a hold far
 * longer than any wait here (60 s; WAIT_FOR gives up after 20), a lock
 * nobody on A uses goes to B at once (no deferral counted); while A has
 * a holder, B's request is deferred and new holders of A still run, and
 * once the last one left, the lock goes at once, before the hold ends
 * (the deferred job is brought forward). */
static void test_minhold_only_for_holders(void)
{
	struct fs_glocks *ea = eng_on(0, 0, 60000), *eb = eng_on(1, 0, 0);
	struct fs_glock *a, *b;
	struct fs_glock_stats s;
	struct acq q;
	pthread_t t;

	REQUIRE(ea != NULL && eb != NULL);
	REQUIRE(fs_glock_get(ea, T_INODE, 650, &a) == 0);
	REQUIRE(fs_glock_get(eb, T_INODE, 650, &b) == 0);
	CHECK_EQ(fs_glock_acquire(a, LK_EX), 0);
	fs_glock_release(a, LK_EX); /* cached EX, no holder */
	q = (struct acq){b, LK_EX, 1};
	pthread_create(&t, NULL, acq_main, &q);
	WAIT_FOR(__atomic_load_n(&q.ret, __ATOMIC_ACQUIRE) == 0);
	CHECK_EQ(__atomic_load_n(&q.ret, __ATOMIC_ACQUIRE), 0);
	pthread_join(t, NULL);
	WAIT_FOR(gstats(a).demote_nl == 1);
	s = gstats(a);
	CHECK_EQ(s.demote_nl, 1);
	CHECK_EQ(s.hold_refusals, 0); /* nobody here used it: no hold */
	/* A takes it back and keeps a holder: B's request waits */
	CHECK_EQ(fs_glock_acquire(a, LK_EX), 0);
	q = (struct acq){b, LK_EX, 1};
	pthread_create(&t, NULL, acq_main, &q);
	WAIT_FOR(gstats(a).hold_refusals == 1);
	CHECK_EQ(gstats(a).hold_refusals, 1);
	CHECK_EQ(__atomic_load_n(&q.ret, __ATOMIC_ACQUIRE), 1);
	/* within the hold, a new holder of A still runs */
	CHECK_EQ(fs_glock_try(a, LK_EX), 0);
	fs_glock_release(a, LK_EX);
	CHECK_EQ(gstats(a).demote_nl, 1);
	fs_glock_release(a, LK_EX); /* the last holder: it goes now */
	WAIT_FOR(__atomic_load_n(&q.ret, __ATOMIC_ACQUIRE) == 0);
	CHECK_EQ(__atomic_load_n(&q.ret, __ATOMIC_ACQUIRE), 0);
	pthread_join(t, NULL);
	WAIT_FOR(gstats(a).demote_nl == 2);
	s = gstats(a);
	CHECK_EQ(s.demote_nl, 2);
	CHECK_EQ(s.hold_refusals, 1);
	fs_glock_put(a);
	fs_glock_put(b);
	fs_glocks_free(ea);
	fs_glocks_free(eb);
}

/* Change tracking ops: stamp 1; changed as the test sets it. */
static atomic_int track_changes;

static uint64_t c_stamp(struct fs_glock *gl, void *arg)
{
	(void)gl;
	(void)arg;
	return 1;
}

static int c_changed(struct fs_glock *gl, uint64_t mark, void *arg)
{
	(void)gl;
	(void)arg;
	return mark == 1 ? atomic_load(&track_changes) : 1;
}

static const struct fs_glock_ops track_ops = {
    .sync = c_sync,
    .inval = c_inval,
    .recover = c_recover,
    .drop = c_drop,
    .stamp = c_stamp,
    .changed = c_changed,
};

static struct fs_glocks *eng_track(int node)
{
	struct fs_glocks_conf c = {.workers = 2};
	struct fs_glocks *e = NULL;

	if (fs_glocks_new(ls[node], &c, &e) < 0)
		return NULL;
	fs_glocks_set_ops(e, T_INODE, &track_ops, &cnt[node]);
	return e;
}

/* A's EX turn with (@change) or without a change, then B reads: B drops
 * its cache (inval) only after a change. Returns B's invals. */
static int track_turn(struct fs_glock *a, struct fs_glock *b, int change)
{
	atomic_store(&track_changes, change);
	CHECK_EQ(fs_glock_acquire(a, LK_EX), 0); /* B goes to NL */
	fs_glock_release(a, LK_EX);
	CHECK_EQ(fs_glock_acquire(b, LK_PR), 0); /* A goes to PR */
	fs_glock_release(b, LK_PR);
	return atomic_load(&cnt[1].inval);
}

/* With ops->stamp and ops->changed, the generation moves on only when an
 * EX holder changed something: an EX turn on A that changed nothing
 * leaves B's cache valid (no inval on B, gen_kept on A); one that
 * changed something makes B drop it; A never drops its own. */
static void test_gen_moves_only_on_change(void)
{
	struct fs_glocks *ea = eng_track(0), *eb = eng_track(1);
	struct fs_glock *a, *b;
	uint64_t g;

	reset();
	REQUIRE(ea != NULL && eb != NULL);
	REQUIRE(fs_glock_get(ea, T_INODE, 660, &a) == 0);
	REQUIRE(fs_glock_get(eb, T_INODE, 660, &b) == 0);
	CHECK_EQ(track_turn(a, b, 1), 1); /* B's first grant */
	g = gstats(b).generation;
	CHECK_EQ(track_turn(a, b, 0), 1); /* nothing changed */
	CHECK_EQ(gstats(b).generation, g);
	CHECK_EQ(gstats(a).gen_kept, 1);
	CHECK_EQ(track_turn(a, b, 1), 2); /* changed */
	CHECK_EQ(gstats(b).generation, g + 1);
	CHECK_EQ(gstats(a).generation, g + 1);
	CHECK_EQ(track_turn(a, b, 0), 2);
	CHECK_EQ(gstats(a).gen_kept, 2);
	CHECK_EQ(atomic_load(&cnt[0].inval), 1); /* A's first grant only */
	fs_glock_put(a);
	fs_glock_put(b);
	fs_glocks_free(ea);
	fs_glocks_free(eb);
}

static void test_fence_ends_wait(void)
{
	struct fs_glocks *ea = eng_on(0, 0, 0), *eb = eng_on(1, 0, 0);
	struct fs_glock *a, *b, *x;
	struct acq q;
	pthread_t t;

	REQUIRE(ea != NULL && eb != NULL);
	REQUIRE(fs_glock_get(ea, T_INODE, 700, &a) == 0);
	REQUIRE(fs_glock_get(eb, T_INODE, 700, &b) == 0);
	CHECK_EQ(fs_glock_acquire(b, LK_EX), 0); /* and keeps it */
	q = (struct acq){a, LK_EX, 1};
	pthread_create(&t, NULL, acq_main, &q);
	WAIT_FOR(gstats(a).waiters == 1);
	fs_glocks_fence(ea);
	pthread_join(t, NULL);
	CHECK_EQ(q.ret, -EIO);
	CHECK(fs_glocks_fenced(ea));
	CHECK_EQ(fs_glock_acquire(a, LK_PR), -EIO);
	CHECK_EQ(fs_glock_try(a, LK_PR), -EIO);
	CHECK_EQ(fs_glock_get(ea, T_INODE, 701, &x), -EIO);
	fs_glock_release(b, LK_EX);
	fs_glock_put(b);
	fs_glocks_free(eb);
	/* A's request stays queued in the lock manager (a fenced node's
	 * lockspace is abandoned before its engine is freed: fs_glocks_stop);
	 * this lockspace lives on, so A's engine is freed after it closed:
	 * its completion lands in a live glock. */
	fs_glock_put(a);
	fs_glocks_stop(ea);
	fenced_engine = ea;
}

/* The type's bytes of the value block: what one node's lvb_write puts
 * there the next grant's lvb_read sees, on any node. */
struct lvb_node {
	uint8_t out[FS_GLOCK_LVB_USER]; /* written when leaving EX */
	uint8_t in[FS_GLOCK_LVB_USER];	/* last read */
	atomic_int reads, writes, valid;
};

static struct lvb_node lvbn[2];

static void c_lvb_read(struct fs_glock *gl, const uint8_t *val, int valid,
		       void *arg)
{
	struct lvb_node *n = arg;

	(void)gl;
	memcpy(n->in, val, sizeof(n->in));
	atomic_store(&n->valid, valid);
	atomic_fetch_add(&n->reads, 1);
}

static void c_lvb_write(struct fs_glock *gl, uint8_t *val, void *arg)
{
	struct lvb_node *n = arg;

	(void)gl;
	memcpy(val, n->out, sizeof(n->out));
	atomic_fetch_add(&n->writes, 1);
}

static const struct fs_glock_ops lvb_ops = {
    .lvb_read = c_lvb_read,
    .lvb_write = c_lvb_write,
};

static void test_lvb_carries(void)
{
	struct fs_glocks *ea = eng_on(0, 0, 0), *eb = eng_on(1, 0, 0);
	struct fs_glock *a, *b;

	REQUIRE(ea != NULL && eb != NULL);
	fs_glocks_set_ops(ea, T_INODE + 3, &lvb_ops, &lvbn[0]);
	fs_glocks_set_ops(eb, T_INODE + 3, &lvb_ops, &lvbn[1]);
	REQUIRE(fs_glock_get(ea, T_INODE + 3, 950, &a) == 0);
	REQUIRE(fs_glock_get(eb, T_INODE + 3, 950, &b) == 0);
	CHECK_EQ(fs_glock_acquire(a, LK_EX), 0);
	CHECK_EQ(atomic_load(&lvbn[0].valid), 0); /* never set */
	memcpy(lvbn[0].out, "size=4096", 10);
	fs_glock_release(a, LK_EX);
	CHECK_EQ(fs_glock_acquire(b, LK_PR), 0); /* A: EX -> PR writes */
	CHECK_EQ(atomic_load(&lvbn[0].writes), 1);
	CHECK_EQ(atomic_load(&lvbn[1].valid), 1);
	CHECK(memcmp(lvbn[1].in, "size=4096", 10) == 0);
	fs_glock_release(b, LK_PR);
	memcpy(lvbn[1].out, "size=8192", 10);
	CHECK_EQ(fs_glock_acquire(b, LK_EX), 0);
	fs_glock_release(b, LK_EX);
	CHECK_EQ(fs_glocks_drop_all(eb), 0); /* B leaves EX: writes */
	CHECK_EQ(atomic_load(&lvbn[1].writes), 1);
	CHECK_EQ(fs_glock_acquire(a, LK_PR), 0);
	CHECK(memcmp(lvbn[0].in, "size=8192", 10) == 0);
	CHECK_EQ(atomic_load(&lvbn[0].valid), 1);
	fs_glock_release(a, LK_PR);
	fs_glock_put(a);
	fs_glock_put(b);
	fs_glocks_free(ea);
	fs_glocks_free(eb);
}

static const struct fs_glock_ops ops_norecover = {
    .sync = c_sync,
    .inval = c_inval,
    .drop = c_drop,
};

/* A type without recover: an invalid value block only means inval. The
 * PR grant of a fresh resource invalidates (nothing seen yet); the PR ->
 * EX up-conversion after it must not (PR was held all along), although
 * the value block is still invalid then (a PR grant cannot set it). */
static void test_upconvert_keeps_cache(void)
{
	struct fs_glocks *ea = eng_on(0, 0, 0);
	struct fs_glock *a;

	reset();
	REQUIRE(ea != NULL);
	fs_glocks_set_ops(ea, T_INODE + 4, &ops_norecover, &cnt[0]);
	REQUIRE(fs_glock_get(ea, T_INODE + 4, 960, &a) == 0);
	CHECK_EQ(fs_glock_acquire(a, LK_PR), 0);
	CHECK_EQ(fs_glock_mode(a), LK_PR);
	CHECK_EQ(atomic_load(&cnt[0].inval), 1);
	fs_glock_release(a, LK_PR);
	CHECK_EQ(fs_glock_acquire(a, LK_EX), 0); /* up-conversion */
	CHECK_EQ(atomic_load(&cnt[0].inval), 1);
	fs_glock_release(a, LK_EX);
	CHECK_EQ(fs_glocks_drop_all(ea), 0);
	CHECK_EQ(fs_glock_acquire(a, LK_PR), 0); /* a new lock: nobody */
	CHECK_EQ(atomic_load(&cnt[0].inval), 1); /* wrote since: valid */
	fs_glock_release(a, LK_PR);
	fs_glock_put(a);
	fs_glocks_free(ea);
}

static void test_drop_all(void)
{
	struct fs_glocks *ea = eng_on(0, 0, 0);
	struct fs_glock *held;

	reset();
	REQUIRE(ea != NULL);
	CHECK_EQ(touch(ea, 800, LK_EX), 0);
	CHECK_EQ(touch(ea, 801, LK_PR), 0);
	REQUIRE(fs_glock_get(ea, T_INODE, 802, &held) == 0); /* no lock */
	CHECK_EQ(fs_glocks_drop_all(ea), 0);
	/* 801's first grant found the LVB invalid: recovered in EX */
	CHECK_EQ(atomic_load(&cnt[0].sync), 2);
	CHECK_EQ(atomic_load(&cnt[0].drop), 2);
	CHECK_EQ(fs_glock_mode(held), -1);
	CHECK_EQ(fs_glock_acquire(held, LK_PR), 0);
	CHECK_EQ(touch(ea, 803, LK_EX), 0);
	CHECK_EQ(fs_glocks_drop_all(ea), -EBUSY); /* 802 has a holder */
	CHECK_EQ(fs_glock_mode(held), LK_EX);	  /* recovered: stepped up */
	CHECK_EQ(atomic_load(&cnt[0].sync), 3);	  /* 803 went anyway */
	fs_glock_release(held, LK_PR);
	CHECK_EQ(fs_glocks_drop_all(ea), 0);
	CHECK_EQ(fs_glock_mode(held), -1);
	fs_glock_put(held);
	fs_glocks_free(ea);
}

static const char *t_type_name(unsigned type)
{
	return type == T_INODE ? "inode" : NULL;
}

static void test_trace_events(void)
{
	struct fs_glocks *ea = eng_on(0, 0, 0), *eb = eng_on(1, 0, 0);
	struct fs_trace *tr = NULL;
	char path[128], line[600];
	int grant = 0, demote = 0, bast = 0, release = 0;
	FILE *f;

	REQUIRE(ea != NULL && eb != NULL);
	snprintf(path, sizeof(path), "%s/trace", lkl_dir);
	REQUIRE(fs_trace_open(path, 1, 0, &tr) == 0);
	fs_glocks_set_trace(ea, tr, t_type_name, NULL);
	CHECK_EQ(touch(ea, 900, LK_EX), 0);
	CHECK_EQ(touch(eb, 900, LK_EX), 0); /* A demotes */
	CHECK_EQ(fs_glocks_drop_all(ea), 0);
	fs_glocks_free(ea);
	fs_glocks_free(eb);
	fs_trace_close(tr);
	f = fopen(path, "r");
	REQUIRE(f != NULL);
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strstr(line, "\"res\":\"inode:900\"") == NULL)
			continue;
		grant += strstr(line, "\"ev\":\"grant\"") != NULL;
		demote += strstr(line, "\"ev\":\"demote\"") != NULL;
		bast += strstr(line, "\"ev\":\"bast_recv\"") != NULL;
		release += strstr(line, "\"ev\":\"release\"") != NULL;
	}
	fclose(f);
	unlink(path);
	CHECK_EQ(grant, 1);
	CHECK(bast >= 1);
	CHECK_EQ(demote, 1);
	CHECK_EQ(release, 1);
}

/* Random holders on two nodes over a few glocks, with an LRU bound far
 * below their number (drops race with gets, acquires and blocking
 * callbacks) and tries mixed in. The glocks' exclusion across nodes is
 * checked by counting each node's holders per glock: a holder never sees
 * a conflicting holder of the other node. Seeded (UCFS_SEED). */
#define R_NUMS 24
#define R_THREADS 2 /* per node */
#define R_ITERS 250

static atomic_int r_ex[R_NUMS][2], r_pr[R_NUMS][2];
static atomic_int r_bad, r_tries_ok, r_tries_fail;

struct rnd_arg {
	struct fs_glocks *e;
	int node;
	uint64_t rng;
};

static uint64_t r_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Count ourselves in, then look at the other node. */
static void r_enter(int num, int node, int mode)
{
	int other = !node;

	if (mode == LK_EX) {
		atomic_fetch_add(&r_ex[num][node], 1);
		if (atomic_load(&r_ex[num][other]) != 0 ||
		    atomic_load(&r_pr[num][other]) != 0)
			atomic_fetch_add(&r_bad, 1);
	} else {
		atomic_fetch_add(&r_pr[num][node], 1);
		if (atomic_load(&r_ex[num][other]) != 0)
			atomic_fetch_add(&r_bad, 1);
	}
}

static void r_leave(int num, int node, int mode)
{
	atomic_fetch_sub(mode == LK_EX ? &r_ex[num][node] : &r_pr[num][node],
			 1);
}

static void *rnd_main(void *arg)
{
	struct rnd_arg *r = arg;

	for (int i = 0; i < R_ITERS; i++) {
		uint64_t x = r_next(&r->rng);
		int num = (int)(x % R_NUMS);
		int mode = (x >> 8) % 10 < 3 ? LK_EX : LK_PR;
		int try = (x >> 16) % 10 < 2, ret;
		struct fs_glock *gl;

		if (fs_glock_get(r->e, T_INODE, 1000 + num, &gl) < 0) {
			atomic_fetch_add(&r_bad, 1);
			continue;
		}
		ret = try ? fs_glock_try(gl, mode) : fs_glock_acquire(gl, mode);
		if (try)
			atomic_fetch_add(ret == 0 ? &r_tries_ok : &r_tries_fail,
					 1);
		if (ret == 0) {
			r_enter(num, r->node, mode);
			if ((x >> 24) % 4 == 0)
				sched_yield();
			r_leave(num, r->node, mode);
			fs_glock_release(gl, mode);
		} else if (ret != -EAGAIN || !try) {
			atomic_fetch_add(&r_bad, 1);
		}
		fs_glock_put(gl);
	}
	return NULL;
}

static void test_random_two_nodes(void)
{
	struct fs_glocks *e[2] = {eng_on(0, 8, 0), eng_on(1, 8, 0)};
	struct rnd_arg ra[2 * R_THREADS];
	pthread_t t[2 * R_THREADS];
	struct fs_glocks_stats s[2];
	uint64_t seed = t_seed();

	REQUIRE(e[0] != NULL && e[1] != NULL);
	for (int i = 0; i < 2 * R_THREADS; i++) {
		ra[i] = (struct rnd_arg){e[i % 2], i % 2,
					 seed * 0x9e3779b97f4a7c15ull +
					     (uint64_t)i * 7919 + 1};
		pthread_create(&t[i], NULL, rnd_main, &ra[i]);
	}
	for (int i = 0; i < 2 * R_THREADS; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(atomic_load(&r_bad), 0);
	for (int n = 0; n < 2; n++) {
		CHECK_EQ(fs_glocks_drop_all(e[n]), 0);
		fs_glocks_stats(e[n], &s[n]);
		CHECK(s[n].glocks_now <= R_NUMS);
	}
	printf(
	    "    evictions %llu + %llu, demotes %llu + %llu, tries %d "
	    "ok %d refused\n",
	    (unsigned long long)s[0].total.evictions,
	    (unsigned long long)s[1].total.evictions,
	    (unsigned long long)(s[0].total.demote_nl + s[0].total.demote_pr),
	    (unsigned long long)(s[1].total.demote_nl + s[1].total.demote_pr),
	    atomic_load(&r_tries_ok), atomic_load(&r_tries_fail));
	CHECK(s[0].total.evictions + s[1].total.evictions > 0);
	fs_glocks_free(e[0]);
	fs_glocks_free(e[1]);
}

int main(int argc, char **argv)
{
	int ok;

	t_init(argc, argv);
	ok = setup() == 0;
	if (!ok) {
		printf("FAIL glock_setup (three lockspaces on loopback)\n");
	} else {
		T_RUN(test_first_grant_recovers);
		T_RUN(test_readers_share_writer_demotes);
		T_RUN(test_two_writers_take_turns);
		T_RUN(test_fence);
		T_RUN(test_get_put_identity);
		T_RUN(test_try_vs_remote_ex);
		T_RUN(test_try_never_waits_for_local);
		T_RUN(test_held_and_bad_release);
		T_RUN(test_lru_drops_oldest);
		T_RUN(test_lru_keeps_referenced);
		T_RUN(test_pins_pruned);
		T_RUN(test_pins_dropped_without_prune);
		T_RUN(test_demote_on_worker);
		T_RUN(test_flush_admits_holders);
		T_RUN(test_demote_ahead);
		T_RUN(test_demote_ahead_widens);
		T_RUN(test_demote_ahead_peers);
		T_RUN(test_minhold_adapts);
		T_RUN(test_minhold_only_for_holders);
		T_RUN(test_gen_moves_only_on_change);
		T_RUN(test_fence_ends_wait);
		T_RUN(test_drop_all);
		T_RUN(test_lvb_carries);
		T_RUN(test_upconvert_keeps_cache);
		T_RUN(test_trace_events);
		T_RUN(test_random_two_nodes);
	}
	lkl_close();
	fs_glocks_free(fenced_engine);
	return ok ? t_done() : 1;
}
