/*
 * test_lk_batch_net.c — lk_lock_batch over real TCP: three lockspaces in
 * this process, one per node, on 127.0.0.1-3.
 *
 * The simulation (test_lk_sim) checks the batch logic with no transport;
 * here the requests of a batch leave before their lkbs exist (the early
 * send, lk_batch.c early_send) and the replies may come back while
 * the batch is still being built, so what is checked is that every kind
 * of name a batch can hold ends up with the right lock: names mastered by
 * two different nodes interleaved, names whose master is this node,
 * names cached in the hold cache, the same name twice, names with a
 * string part, names nobody has used yet, names another node holds in a
 * conflicting mode, and locks with completion callbacks. A batch's long
 * run to one master is answered before the master's bookkeeping (lk_master.c
 * run_answer_first): checked that the master then knows every lock it
 * granted, and that runs it must not answer first take the usual path.
 * Idle unlocks wait for the next frame to their master, and an unlock a
 * blocking callback asked for does not; the network thread stops polling
 * when its poll windows go empty.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lockmgr/lk.h"
#include "tests/unit/harness.h"
#include "tests/unit/lk_local.h"

#define NNODES 3

static struct lk_name nm(uint16_t type, uint64_t num, const char *str)
{
	struct lk_name n;

	lk_name_make(&n, type, num, str);
	return n;
}

/* Lock @name on @node in @mode and wait for the grant; NULL on failure. */
static struct lk_lock *lock_wait(int node, const struct lk_name *name,
				 int mode)
{
	struct lk_lock *lk = NULL;
	int ret = lk_lock(lkl_ls[node], name, mode, 0, NULL, NULL, &lk);

	if (ret < 0)
		return NULL;
	if (ret == 0 && lk_wait(lk) != 0)
		return NULL;
	return lk;
}

/* Make @node the master of @name: it locks and unlocks it first. */
static int master_on(int node, const struct lk_name *name)
{
	struct lk_lock *lk = lock_wait(node, name, LK_EX);

	return lk != NULL && lk_unlock(lk, 0) == 0 ? 0 : -1;
}

enum { N = 700 };
static struct lk_name names[N];
static struct lk_lock *lks[N];

/*
 * Names 0..599 in groups: masters 2 and 3 alternating (0..399), this
 * node's own (400..449), cached here in PR (450..499), string names
 * mastered by 2 (500..549), fresh (550..599); then 600..699 repeat names
 * of the first group (the same name twice in one batch).
 */
static int setup_names(uint16_t type)
{
	for (int i = 0; i < 600; i++) {
		if (i >= 500 && i < 550) {
			char s[16];

			snprintf(s, sizeof(s), "s%d", i);
			names[i] = nm(type, (uint64_t)i, s);
		} else {
			names[i] = nm(type, (uint64_t)i, NULL);
		}
		if (i < 400 && master_on(2 + i % 2, &names[i]) != 0)
			return -1;
		if (i >= 400 && i < 450 && master_on(1, &names[i]) != 0)
			return -1;
		if (i >= 500 && i < 550 && master_on(2, &names[i]) != 0)
			return -1;
		if (i >= 450 && i < 500) {
			struct lk_lock *lk;

			if (master_on(2, &names[i]) != 0)
				return -1;
			lk = lock_wait(1, &names[i], LK_PR);
			if (lk == NULL || lk_unlock(lk, LK_UNLOCK_CACHE) != 0)
				return -1;
		}
	}
	for (int i = 600; i < N; i++)
		names[i] = names[(i - 600) * 4];
	return 0;
}

/* Every handle granted in @mode, then released. */
static void check_and_unlock(int n, int mode)
{
	int bad = 0;

	for (int i = 0; i < n; i++)
		bad += lks[i] == NULL || !lk_lock_granted(lks[i]) ||
		       lk_lock_mode(lks[i]) != mode;
	CHECK_EQ(bad, 0);
	CHECK_EQ(lk_unlock_batch(lks, (size_t)n, 0), n);
}

/* The mixed batch, several times (the first run also looks masters up). */
static void test_mixed_batch(void)
{
	REQUIRE(setup_names(7) == 0);
	for (int run = 0; run < 5; run++) {
		int ret = lk_lock_batch(lkl_ls[1], names, N, LK_PR, 0, NULL, NULL,
					lks);

		REQUIRE(ret >= 0);
		/* at least the 50 cached and the 50 mastered here */
		CHECK(run > 0 || ret >= 100);
		CHECK_EQ(lk_wait_batch(lks, N), 0);
		check_and_unlock(N, LK_PR);
	}
}

/* Names another node holds EX: the batch's locks on them wait, the others
 * are granted; the waiting ones are granted once the holder lets go. */
static void test_batch_behind_holder(void)
{
	struct lk_lock *held[10];
	struct timespec ts = {0, 20 * 1000 * 1000};
	int granted = 0;

	REQUIRE(setup_names(8) == 0);
	for (int k = 0; k < 10; k++) {
		held[k] = lock_wait(3, &names[k * 20], LK_EX);
		REQUIRE(held[k] != NULL);
	}
	REQUIRE(lk_lock_batch(lkl_ls[1], names, 600, LK_PR, 0, NULL, NULL, lks) >=
		0);
	/* wait for all but the ten held ones */
	for (int i = 0; i < 600; i++)
		if (i % 20 != 0 || i >= 200)
			CHECK_EQ(lk_wait(lks[i]), 0);
	nanosleep(&ts, NULL);
	for (int k = 0; k < 10; k++)
		granted += lk_lock_granted(lks[k * 20]);
	CHECK_EQ(granted, 0);
	for (int k = 0; k < 10; k++)
		CHECK_EQ(lk_unlock(held[k], 0), 0);
	CHECK_EQ(lk_wait_batch(lks, 600), 0);
	check_and_unlock(600, LK_PR);
}

static uint64_t answered_first(int node)
{
	struct lk_stats st;

	lk_ls_stats(lkl_ls[node], &st);
	return st.runs_answered_first;
}

/* Names 0..@n - 1 of type @type, with no string part, mastered by node
 * 2, and node 1 knowing it (one batch looked the masters up). */
static int setup_run(uint16_t type, int n)
{
	for (int i = 0; i < n; i++) {
		names[i] = nm(type, (uint64_t)i, NULL);
		if (master_on(2, &names[i]) != 0)
			return -1;
	}
	if (lk_lock_batch(lkl_ls[1], names, (size_t)n, LK_PR, 0, NULL, NULL,
			  lks) < 0 ||
	    lk_wait_batch(lks, (size_t)n) != 0)
		return -1;
	return lk_unlock_batch(lks, (size_t)n, 0) == n ? 0 : -1;
}

/* A 600-lock PR batch all mastered by node 2: one run, answered first.
 * The master must hold a copy of each lock it granted that way: node 3's
 * EX requests on some of them wait while node 1 holds them, its PR is
 * granted, and the EX ones are granted once node 1 unlocks. */
static void test_answer_first(void)
{
	struct timespec ts = {0, 20 * 1000 * 1000};
	struct lk_lock *x[6], *pr;
	struct lk_stats s0, s1;
	uint64_t a0;
	int granted = 0;

	REQUIRE(setup_run(10, 600) == 0);
	a0 = answered_first(2);
	lk_ls_stats(lkl_ls[1], &s0);
	REQUIRE(lk_lock_batch(lkl_ls[1], names, 600, LK_PR, 0, NULL, NULL,
			      lks) >= 0);
	CHECK_EQ(lk_wait_batch(lks, 600), 0);
	CHECK_EQ(answered_first(2), a0 + 1);
	/* the type's figures count each lock, though added once */
	lk_ls_stats(lkl_ls[1], &s1);
	CHECK_EQ(s1.type[10].c.requests - s0.type[10].c.requests, 600);
	CHECK_EQ(s1.type[10].c.grants_remote - s0.type[10].c.grants_remote,
		 600);
	CHECK_EQ(s1.type[10].mode_count[LK_PR] - s0.type[10].mode_count[LK_PR],
		 600);
	CHECK(s1.type[10].c.srtt > 0);
	for (int k = 0; k < 6; k++)
		REQUIRE(lk_lock(lkl_ls[3], &names[k * 111], LK_EX, 0, NULL,
				NULL, &x[k]) >= 0);
	pr = lock_wait(3, &names[599], LK_PR);
	CHECK(pr != NULL);
	if (pr != NULL)
		lk_unlock(pr, 0);
	nanosleep(&ts, NULL);
	for (int k = 0; k < 6; k++)
		granted += lk_lock_granted(x[k]);
	CHECK_EQ(granted, 0);
	check_and_unlock(600, LK_PR);
	for (int k = 0; k < 6; k++) {
		CHECK_EQ(lk_wait(x[k]), 0);
		CHECK_EQ(lk_unlock(x[k], 0), 0);
	}
}

/* Runs that must take the per-request path: one lock of the run held EX
 * elsewhere (the run waits for it, the others are granted), and an EX
 * batch (a name twice would conflict with itself). */
static void test_answer_first_not(void)
{
	struct lk_lock *held;
	uint64_t a0;

	REQUIRE(setup_run(11, 600) == 0);
	held = lock_wait(3, &names[250], LK_EX);
	REQUIRE(held != NULL);
	a0 = answered_first(2);
	REQUIRE(lk_lock_batch(lkl_ls[1], names, 600, LK_PR, 0, NULL, NULL,
			      lks) >= 0);
	for (int i = 0; i < 600; i++)
		if (i != 250)
			CHECK_EQ(lk_wait(lks[i]), 0);
	CHECK(!lk_lock_granted(lks[250]));
	CHECK_EQ(lk_unlock(held, 0), 0);
	CHECK_EQ(lk_wait_batch(lks, 600), 0);
	check_and_unlock(600, LK_PR);
	REQUIRE(lk_lock_batch(lkl_ls[1], names, 300, LK_EX, 0, NULL, NULL,
			      lks) >= 0);
	CHECK_EQ(lk_wait_batch(lks, 300), 0);
	check_and_unlock(300, LK_EX);
	CHECK_EQ(answered_first(2), a0);
}

/* A NOQUEUE batch (a statahead's): names another node holds EX are
 * refused, at once where this node masters them (no handle) and by the
 * remote master otherwise (lk_wait_batch drops the handle); the rest are
 * granted, and the holder gets no blocking callback. */
static void test_noqueue_batch(void)
{
	struct lk_lock *held[4];
	static const int busy[4] = {10, 20, 310, 320};
	struct lk_stats s0, s1;
	int ret, null_now = 0, left = 0;

	for (int i = 0; i < 600; i++) {
		names[i] = nm(13, (uint64_t)i, NULL);
		REQUIRE(master_on(i < 300 ? 2 : 1, &names[i]) == 0);
	}
	/* node 1 learns the masters */
	REQUIRE(lk_lock_batch(lkl_ls[1], names, 600, LK_PR, 0, NULL, NULL,
			      lks) >= 0);
	REQUIRE(lk_wait_batch(lks, 600) == 0);
	REQUIRE(lk_unlock_batch(lks, 600, 0) == 600);
	for (int k = 0; k < 4; k++) {
		held[k] = lock_wait(3, &names[busy[k]], LK_EX);
		REQUIRE(held[k] != NULL);
	}
	lk_ls_stats(lkl_ls[3], &s0);
	ret = lk_lock_batch(lkl_ls[1], names, 600, LK_PR, LK_NOQUEUE, NULL,
			    NULL, lks);
	REQUIRE(ret >= 0);
	for (int i = 0; i < 600; i++)
		null_now += lks[i] == NULL;
	CHECK_EQ(null_now, 2); /* 310 and 320: mastered here */
	CHECK(lks[310] == NULL && lks[320] == NULL);
	CHECK_EQ(lk_wait_batch(lks, 600), -EAGAIN);
	CHECK(lks[10] == NULL && lks[20] == NULL);
	for (int i = 0; i < 600; i++)
		left += lks[i] != NULL && lk_lock_granted(lks[i]);
	CHECK_EQ(left, 596);
	lk_ls_stats(lkl_ls[3], &s1);
	CHECK_EQ(s1.type[13].c.basts_recv, s0.type[13].c.basts_recv);
	CHECK_EQ(lk_unlock_batch(lks, 600, 0), 596);
	for (int k = 0; k < 4; k++)
		CHECK_EQ(lk_unlock(held[k], 0), 0);
}

/* A NOQUEUE request without a completion callback that a remote master
 * refuses: its handle stays valid until lk_wait (or lk_unlock) tells the
 * failure, however early the refusal came (it used to be freed at once,
 * and the lk_wait after it read a recycled lkb). */
static void test_failed_handle(void)
{
	struct timespec ts = {0, 50 * 1000 * 1000};
	struct lk_name n = nm(12, 1, NULL);
	struct lk_lock *held, *a = NULL, *b = NULL;

	REQUIRE(master_on(2, &n) == 0);
	held = lock_wait(3, &n, LK_EX);
	REQUIRE(held != NULL);
	CHECK_EQ(lk_lock(lkl_ls[1], &n, LK_EX, LK_NOQUEUE, NULL, NULL, &a), 0);
	CHECK_EQ(lk_lock(lkl_ls[1], &n, LK_PR, LK_NOQUEUE, NULL, NULL, &b), 0);
	nanosleep(&ts, NULL); /* both refusals have come */
	CHECK_EQ(lk_wait(a), -EAGAIN);
	CHECK_EQ(lk_unlock(b, 0), -ENOENT);
	CHECK_EQ(lk_unlock(held, 0), 0);
	a = lock_wait(1, &n, LK_EX);
	CHECK(a != NULL);
	if (a != NULL)
		CHECK_EQ(lk_unlock(a, 0), 0);
}

/*
 * Idle unlocks (lk_core.c unlock_may_wait): node 1 lets 200 PR locks
 * mastered by node 2, held for over 1 ms, go one lk_unlock at a time
 * with no blocking callback pending: their records wait for the next
 * frame to node 2, so far fewer frames than unlocks leave (one each
 * before); still they all reach the master: node 3's EX on every name
 * is granted.
 */
static void test_idle_unlocks_wait(void)
{
	struct timespec held = {0, 5 * 1000 * 1000};
	struct lk_stats s0, s1;

	REQUIRE(setup_run(13, 200) == 0);
	REQUIRE(lk_lock_batch(lkl_ls[1], names, 200, LK_PR, 0, NULL, NULL,
			      lks) >= 0);
	REQUIRE(lk_wait_batch(lks, 200) == 0);
	nanosleep(&held, NULL); /* requested over 1 ms ago */
	lk_ls_stats(lkl_ls[1], &s0);
	for (int i = 0; i < 200; i++)
		CHECK_EQ(lk_unlock(lks[i], 0), 0);
	lk_ls_stats(lkl_ls[1], &s1);
	CHECK_EQ(s1.unlocks_waited - s0.unlocks_waited, 200);
	CHECK(s1.peer[2].frames_tx - s0.peer[2].frames_tx < 50);
	REQUIRE(lk_lock_batch(lkl_ls[3], names, 200, LK_EX, 0, NULL, NULL,
			      lks) >= 0);
	CHECK_EQ(lk_wait_batch(lks, 200), 0);
	check_and_unlock(200, LK_EX);
}

static atomic_int basts;

static void on_bast(struct lk_lock *lk, int mode, void *arg)
{
	(void)lk;
	(void)mode;
	(void)arg;
	atomic_fetch_add(&basts, 1);
}

/* An unlock a blocking callback asked for is sent at once (unlocks_waited
 * unchanged), and node 3's waiting EX is granted. */
static void test_asked_unlock_now(void)
{
	static const struct lk_lock_ops ops = {NULL, on_bast};
	struct timespec held = {0, 5 * 1000 * 1000};
	struct lk_name n = nm(13, 1000, NULL);
	struct lk_lock *pr = NULL, *ex = NULL;
	struct lk_stats s0, s1;
	int tries = 0, ret;

	REQUIRE(master_on(2, &n) == 0);
	atomic_store(&basts, 0);
	ret = lk_lock(lkl_ls[1], &n, LK_PR, 0, &ops, NULL, &pr);
	REQUIRE(ret >= 0);
	if (ret == 0)
		CHECK_EQ(lk_wait(pr), 0);
	nanosleep(&held, NULL);
	REQUIRE(lk_lock(lkl_ls[3], &n, LK_EX, 0, NULL, NULL, &ex) == 0);
	while (atomic_load(&basts) == 0 && tries++ < 2000)
		usleep(5000);
	CHECK(atomic_load(&basts) > 0);
	lk_ls_stats(lkl_ls[1], &s0);
	CHECK_EQ(lk_unlock(pr, 0), 0);
	lk_ls_stats(lkl_ls[1], &s1);
	CHECK_EQ(s1.unlocks_waited - s0.unlocks_waited, 0);
	CHECK_EQ(lk_wait(ex), 0);
	CHECK_EQ(lk_unlock(ex, 0), 0);
}

/*
 * The network thread polls after a lock frame only while recent poll
 * windows saw input (lk_net.c spin_learn): node 1 locks a name mastered
 * by node 2, holds it 3 ms, unlocks it and waits 3 ms, 100 times, so
 * every frame node 2 gets is followed by milliseconds of nothing; after
 * a dozen empty windows node 2 stops polling (net_spin_skips) and polls
 * in far fewer waits than the frames it got (one per frame before).
 */
static void test_net_spin_skips(void)
{
	struct timespec gap = {0, 3 * 1000 * 1000};
	struct lk_name n = nm(14, 1, NULL);
	struct lk_stats s0, s1;

	REQUIRE(master_on(2, &n) == 0);
	lk_ls_stats(lkl_ls[2], &s0);
	for (int i = 0; i < 100; i++) {
		struct lk_lock *lk = lock_wait(1, &n, LK_EX);

		REQUIRE(lk != NULL);
		nanosleep(&gap, NULL);
		CHECK_EQ(lk_unlock(lk, 0), 0);
		nanosleep(&gap, NULL);
	}
	lk_ls_stats(lkl_ls[2], &s1);
	CHECK(s1.net_spin_skips - s0.net_spin_skips > 0);
	CHECK(s1.net_spins - s0.net_spins < 50);
}

static atomic_int completions;

static void on_completion(struct lk_lock *lk, int status, void *arg)
{
	(void)lk;
	(void)arg;
	if (status == 0)
		atomic_fetch_add(&completions, 1);
}

/* With a completion callback: one per lock not granted inside the call. */
static void test_batch_completions(void)
{
	static const struct lk_lock_ops ops = {on_completion, NULL};
	int now, tries = 0;

	REQUIRE(setup_names(9) == 0);
	atomic_store(&completions, 0);
	now = lk_lock_batch(lkl_ls[1], names, 600, LK_PR, 0, &ops, NULL, lks);
	REQUIRE(now >= 0);
	while (atomic_load(&completions) < 600 - now && tries++ < 2000)
		usleep(5000);
	CHECK_EQ(atomic_load(&completions), 600 - now);
	CHECK_EQ(lk_wait_batch(lks, 600), 0);
	check_and_unlock(600, LK_PR);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	if (lkl_start(NNODES, "", 5000) != 0)
		return 1;
	T_RUN(test_mixed_batch);
	T_RUN(test_batch_behind_holder);
	T_RUN(test_batch_completions);
	T_RUN(test_answer_first);
	T_RUN(test_answer_first_not);
	T_RUN(test_failed_handle);
	T_RUN(test_noqueue_batch);
	T_RUN(test_idle_unlocks_wait);
	T_RUN(test_asked_unlock_now);
	T_RUN(test_net_spin_skips);
	lkl_close();
	return t_done();
}
