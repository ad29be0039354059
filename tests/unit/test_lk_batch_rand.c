/*
 * test_lk_batch_rand.c — randomized safety of batches over real TCP.
 *
 * Three lockspaces in this process (tests/unit/lk_local.h), one thread
 * per node taking, at random, PR batches (a third of them NOQUEUE: the
 * refused names come back NULL) of 1 to 700 consecutive names
 * (long runs to one master: a master answers those first, lk_master.c
 * run_answer_first) or single EX, PW or CW locks, holding them a little
 * and releasing them. Every grant is checked against a table of who holds
 * what: no EX beside anything, no PW beside PR, PW or CW, no CW beside PR
 * or PW. A holder is counted from the moment its wait returned to just
 * before its unlock, inside the time it really holds the lock, so an
 * overlap seen is a real one. Every batch must complete. Batches are all
 * PR and the other locks single, so no two threads can deadlock. Seeded
 * (--seed N); each thread draws from its own stream.
 */
#include <errno.h>
#include <pthread.h>
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
enum { NAMES = 2000, BLOCK = 500, ROUNDS = 300, MAXB = 700, TYPE = 20 };

/* holders now, per name: [0] PR, [1] CW, [2] PW, [3] EX */
static atomic_int held[NAMES][4];
static atomic_int violations, stuck;
static atomic_long grants, refused;

static struct lk_name nm(uint64_t num)
{
	struct lk_name n;

	lk_name_make(&n, TYPE, num, NULL);
	return n;
}

static int slot(int mode)
{
	switch (mode) {
	case LK_PR:
		return 0;
	case LK_CW:
		return 1;
	case LK_PW:
		return 2;
	default:
		return 3;
	}
}

/* Count @mode in on @i, after checking what is held beside it. */
static void enter(int i, int mode)
{
	int pr = atomic_load(&held[i][0]), cw = atomic_load(&held[i][1]);
	int pw = atomic_load(&held[i][2]), ex = atomic_load(&held[i][3]);
	int bad;

	switch (mode) {
	case LK_PR:
		bad = cw + pw + ex;
		break;
	case LK_CW:
		bad = pr + pw + ex;
		break;
	case LK_PW:
		bad = pr + cw + pw + ex;
		break;
	default:
		bad = pr + cw + pw + ex;
		break;
	}
	if (bad != 0 && atomic_fetch_add(&violations, 1) < 5)
		fprintf(stderr,
			"name %d granted %d beside PR %d CW %d PW %d "
			"EX %d\n",
			i, mode, pr, cw, pw, ex);
	atomic_fetch_add(&held[i][slot(mode)], 1);
	atomic_fetch_add(&grants, 1);
}

static void leave(int i, int mode)
{
	atomic_fetch_sub(&held[i][slot(mode)], 1);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void pause_us(uint64_t *s)
{
	struct timespec ts = {0, (long)(rnd(s) % 200) * 1000};

	nanosleep(&ts, NULL);
}

struct worker {
	int node;
	uint64_t seed;
	pthread_t th;
};

static void batch_round(struct worker *w, struct lk_name *names,
			struct lk_lock **lks)
{
	static const int sizes[] = {1, 50, 300, 700};
	int n = sizes[rnd(&w->seed) % 4], first = (int)(rnd(&w->seed) % NAMES);
	unsigned flags = rnd(&w->seed) % 3 == 0 ? LK_NOQUEUE : 0;
	int ret, got = 0;

	for (int k = 0; k < n; k++)
		names[k] = nm((uint64_t)((first + k) % NAMES));
	ret = lk_lock_batch(lkl_ls[w->node], names, (size_t)n, LK_PR, flags,
			    NULL, NULL, lks);
	if (ret >= 0)
		ret = lk_wait_batch(lks, (size_t)n);
	/* NOQUEUE: the refused ones are NULL, the rest granted */
	if (ret != 0 && !(flags && ret == -EAGAIN)) {
		atomic_fetch_add(&stuck, 1);
		return;
	}
	for (int k = 0; k < n; k++) {
		if (lks[k] == NULL) {
			atomic_fetch_add(&refused, 1);
			continue;
		}
		if (!lk_lock_granted(lks[k]))
			atomic_fetch_add(&stuck, 1);
		enter((first + k) % NAMES, LK_PR);
		got++;
	}
	pause_us(&w->seed);
	for (int k = 0; k < n; k++)
		if (lks[k] != NULL)
			leave((first + k) % NAMES, LK_PR);
	if (lk_unlock_batch(lks, (size_t)n, 0) != got)
		atomic_fetch_add(&stuck, 1);
}

static void single_round(struct worker *w)
{
	static const int modes[] = {LK_EX, LK_PW, LK_CW};
	int mode = modes[rnd(&w->seed) % 3], i = (int)(rnd(&w->seed) % NAMES);
	struct lk_name n = nm((uint64_t)i);
	struct lk_lock *lk = NULL;
	int ret = lk_lock(lkl_ls[w->node], &n, mode, 0, NULL, NULL, &lk);

	if (ret == 0)
		ret = lk_wait(lk);
	else if (ret == LK_GRANTED_NOW)
		ret = 0;
	if (ret != 0) {
		atomic_fetch_add(&stuck, 1);
		return;
	}
	enter(i, mode);
	pause_us(&w->seed);
	leave(i, mode);
	lk_unlock(lk, 0);
}

static void *worker_main(void *arg)
{
	static __thread struct lk_name names[MAXB];
	static __thread struct lk_lock *lks[MAXB];
	struct worker *w = arg;

	for (int r = 0; r < ROUNDS; r++) {
		if (rnd(&w->seed) % 4 == 0)
			single_round(w);
		else
			batch_round(w, names, lks);
	}
	return NULL;
}

/* Name i mastered by node 1 + (i / BLOCK) % 3: consecutive names go to
 * one master in long runs. */
static int master_blocks(void)
{
	for (int i = 0; i < NAMES; i++) {
		struct lk_name n = nm((uint64_t)i);
		struct lk_lock *lk = NULL;
		int node = 1 + (i / BLOCK) % NNODES;
		int ret = lk_lock(lkl_ls[node], &n, LK_EX, 0, NULL, NULL, &lk);

		if (ret == 0)
			ret = lk_wait(lk);
		if (ret < 0 || lk_unlock(lk, 0) != 0)
			return -1;
	}
	return 0;
}

static uint64_t answered_first(void)
{
	uint64_t sum = 0;

	for (int i = 1; i <= NNODES; i++) {
		struct lk_stats st;

		lk_ls_stats(lkl_ls[i], &st);
		sum += st.runs_answered_first;
	}
	return sum;
}

static void test_random_batches(void)
{
	struct worker w[NNODES];
	uint64_t seed = t_seed();
	int started = 0;

	REQUIRE(master_blocks() == 0);
	for (int i = 0; i < NNODES; i++) {
		w[i].node = i + 1;
		w[i].seed =
		    (seed + 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1)) | 1;
		if (pthread_create(&w[i].th, NULL, worker_main, &w[i]) != 0)
			break;
		started++;
	}
	/* (every started worker is joined before a failure returns: the
	 * lockspaces close after this case) */
	for (int i = 0; i < started; i++)
		pthread_join(w[i].th, NULL);
	REQUIRE(started == NNODES);
	printf("%ld grants checked, %ld NOQUEUE refusals, %llu runs answered "
	       "first\n",
	       atomic_load(&grants), atomic_load(&refused),
	       (unsigned long long)answered_first());
	CHECK_EQ(atomic_load(&violations), 0);
	CHECK_EQ(atomic_load(&stuck), 0);
	/* the first-answer path was taken (masters answered long runs) */
	CHECK(answered_first() > 0);
	for (int i = 0; i < NAMES; i++)
		for (int m = 0; m < 4; m++)
			CHECK_EQ(atomic_load(&held[i][m]), 0);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	if (lkl_start(NNODES, "", 5000) != 0)
		return 1;
	T_RUN(test_random_batches);
	lkl_close();
	return t_done();
}
