/*
 * test_lk_fence.c — a fenced lockspace answers every waiter (lk.h): once
 * a node is fenced (lk_ls_fence here; the others' verdict or the disk
 * tie-break end the same way), nothing will ever answer its pending
 * requests, so each must fail with -ESHUTDOWN rather than wait for ever
 * (clu_split once hung in lk_wait on a fenced node). Three nodes over
 * real TCP (tests/unit/lk_local.h); node 3 queues, behind locks of node
 * 1 or of its own:
 *
 * - a new request whose master is node 1, waited for by lk_wait (the
 *   waiter reads the master's link itself);
 * - a new request this node masters (a local queue), by lk_wait;
 * - an up-conversion PR -> EX, by lk_wait: it fails and keeps PR;
 * - a request with a completion callback (no waiter): the callback
 *   gets -ESHUTDOWN;
 * - a batch of two, by lk_wait_batch;
 * then it is fenced: every waiter returns -ESHUTDOWN, and new lk_lock
 * and lk_convert calls fail with -ESHUTDOWN at once. Before the fix the
 * waiters never returned (the case fails after 20 s and the program
 * exits: a thread stuck in lk_wait cannot be cleaned up).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lockmgr/lk.h"
#include "tests/unit/harness.h"
#include "tests/unit/lk_local.h"

/* A name whose directory (and so, locked first there, master) is node
 * @node of the 3 (placement key, lk.h). */
static struct lk_name nm(uint64_t num, uint32_t node)
{
	struct lk_name n;

	lk_name_make(&n, 3, num, NULL);
	n.place = node;
	return n;
}

struct waiter {
	pthread_t thr;
	struct lk_lock *lk;	  /* lk_wait on it ... */
	struct lk_lock *batch[2]; /* ... or lk_wait_batch on these */
	int ret;
	int done; /* atomic */
};

static void *wait_one(void *arg)
{
	struct waiter *w = arg;

	if (w->lk != NULL)
		w->ret = lk_wait(w->lk);
	else
		w->ret = lk_wait_batch(w->batch, 2);
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static int comp_status = 1; /* atomic: the callback's, 1 none yet */

static void comp(struct lk_lock *lk, int status, void *arg)
{
	(void)lk;
	(void)arg;
	__atomic_store_n(&comp_status, status, __ATOMIC_RELEASE);
}

static const struct lk_lock_ops comp_ops = {comp, NULL};

/* Granted on node @i in @mode within 10 s. */
static struct lk_lock *hold(int i, struct lk_name n, int mode)
{
	struct lk_lock *lk = NULL;
	int ret = lk_lock(lkl_ls[i], &n, mode, 0, NULL, NULL, &lk);

	if (ret == 0)
		ret = lk_wait(lk);
	return ret >= 0 ? lk : NULL;
}

/* Still queued after a while (the waiter must really wait). */
static int queued(struct lk_lock *lk)
{
	usleep(100000);
	return !lk_lock_granted(lk);
}

static int all_done(struct waiter *w, int n, int ms)
{
	for (int t = 0; t < ms; t += 10) {
		int k = 0;

		for (int i = 0; i < n; i++)
			k += __atomic_load_n(&w[i].done, __ATOMIC_ACQUIRE);
		if (k == n &&
		    __atomic_load_n(&comp_status, __ATOMIC_ACQUIRE) != 1)
			return 1;
		usleep(10000);
	}
	return 0;
}

static void test_fence_ends_every_wait(void)
{
	struct lk_ls *ls3;
	struct lk_lock *h1a, *h3b, *h1c, *h3c, *h1d, *h1e, *h1f, *lk, *lkd;
	struct lk_name e[2] = {nm(5, 1), nm(6, 1)};
	struct waiter w[4];
	int ret, started = 0;

	memset(w, 0, sizeof(w));
	REQUIRE(lkl_start(3, "", 5000) == 0);
	ls3 = lkl_ls[3];
	h1a = hold(1, nm(1, 1), LK_EX);
	h3b = hold(3, nm(2, 3), LK_EX);
	h1c = hold(1, nm(3, 1), LK_PR);
	h3c = hold(3, nm(3, 1), LK_PR);
	h1d = hold(1, nm(4, 1), LK_EX);
	h1e = hold(1, e[0], LK_EX);
	h1f = hold(1, e[1], LK_EX);
	REQUIRE(h1a && h3b && h1c && h3c && h1d && h1e && h1f);

	ret = lk_lock(ls3, &(struct lk_name[]){nm(1, 1)}[0], LK_EX, 0, NULL,
		      NULL, &w[0].lk);
	CHECK_EQ(ret, 0);
	ret = lk_lock(ls3, &(struct lk_name[]){nm(2, 3)}[0], LK_EX, 0, NULL,
		      NULL, &w[1].lk);
	CHECK_EQ(ret, 0);
	CHECK_EQ(lk_convert(h3c, LK_EX, 0), 0);
	w[2].lk = h3c;
	ret = lk_lock(ls3, &(struct lk_name[]){nm(4, 1)}[0], LK_EX, 0,
		      &comp_ops, NULL, &lkd);
	CHECK_EQ(ret, 0);
	CHECK_EQ(lk_lock_batch(ls3, e, 2, LK_EX, 0, NULL, NULL, w[3].batch), 0);
	REQUIRE(queued(w[0].lk) && queued(w[1].lk) && queued(h3c) &&
		queued(lkd));
	for (; started < 4; started++)
		if (pthread_create(&w[started].thr, NULL, wait_one,
				   &w[started]) != 0)
			break;
	if (started < 4) {
		/* the waiters started return once fenced: no thread is left
		 * in a lockspace that LKL_RUN closes */
		lk_ls_fence(ls3, "test");
		for (int i = 0; i < started; i++)
			pthread_join(w[i].thr, NULL);
		REQUIRE(started == 4);
	}
	usleep(200000);
	for (int i = 0; i < 4; i++)
		CHECK(!__atomic_load_n(&w[i].done, __ATOMIC_ACQUIRE));

	lk_ls_fence(ls3, "test");
	if (!all_done(w, 4, 20000)) {
		fprintf(stderr, "a waiter never returned on a fenced node\n");
		printf("FAIL test_fence_ends_every_wait\n");
		fflush(stdout);
		_exit(1); /* a thread stuck in lk_wait: no clean-up */
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(w[i].thr, NULL);
		CHECK_EQ(w[i].ret, -ESHUTDOWN);
	}
	CHECK_EQ(__atomic_load_n(&comp_status, __ATOMIC_ACQUIRE), -ESHUTDOWN);
	CHECK_EQ(lk_lock_mode(h3c), LK_PR); /* the conversion failed */
	CHECK(w[3].batch[0] == NULL && w[3].batch[1] == NULL);
	/* from now on every call fails at once */
	CHECK_EQ(lk_lock(ls3, &(struct lk_name[]){nm(7, 3)}[0], LK_PR, 0, NULL,
			 NULL, &lk),
		 -ESHUTDOWN);
	CHECK_EQ(lk_convert(h3b, LK_PR, 0), -ESHUTDOWN);
	CHECK(lk_ls_fenced(ls3));
	/* the others go on: node 1 gets what node 3 held once node 3 is
	 * declared dead */
	lk_unlock(h1a, 0);
	CHECK_EQ(lkl_lock_soon(1, &(struct lk_name[]){nm(2, 3)}[0], 1000), 0);
	lkl_close();
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	LKL_RUN(test_fence_ends_every_wait);
	return t_done();
}
