/*
 * test_lk_plock.c — POSIX record locks of the lock manager (lk_plock.c,
 * PROTOCOL.md §14) over real TCP, several lockspaces in one process
 * (lk_local.h):
 *  - seeded random locks, unlocks and GETLKs by two owners on each of 3
 *    nodes, against a byte-by-byte model (outcomes, and the merged range
 *    GETLK reports for a write lock);
 *  - a deadlock cycle across 3 nodes and 3 inodes: the request that
 *    would close it gets -EDEADLK, the others are granted in turn;
 *  - a waiter cancelled (-EINTR); lk_plock_drop_tag drops only the
 *    owners whose latest request carried the tag;
 *  - 5 nodes: the holder's node dies (its waiter is granted after
 *    recovery), then the plock server dies (the survivors' ranges are
 *    rebuilt on the new server: still enforced, still reported).
 */
#include "lockmgr/cv_wait.h"
#include "tests/unit/harness.h"
#include "tests/unit/lk_local.h"

#include <pthread.h>

#define SPAN 48

struct waiter {
	struct lk_plock pl;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done;
};

static void w_done(struct lk_plock *pl, void *arg)
{
	struct waiter *w = arg;

	(void)pl;
	pthread_mutex_lock(&w->mu);
	w->done = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

/* Submit a request with a completion callback (it may be waited for
 * with w_wait). */
static int w_submit(int node, struct waiter *w, uint8_t op, uint64_t ino,
		    uint64_t owner, uint8_t type, uint64_t s, uint64_t e,
		    int wait)
{
	memset(&w->pl, 0, sizeof(w->pl));
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->done = 0;
	w->pl = (struct lk_plock){.ino = ino,
				  .owner = owner,
				  .start = s,
				  .end = e,
				  .pid = (uint32_t)(node * 100 + owner),
				  .tag = owner,
				  .op = op,
				  .type = type,
				  .flags = wait ? LK_PL_WAIT : 0,
				  .done = w_done,
				  .arg = w};
	return lk_plock(lkl_ls[node], &w->pl);
}

/* Wait up to @ms for @w: its status, or 1 if still pending. */
static int w_wait(struct waiter *w, int ms)
{
	uint64_t end = cvw_deadline_ms((uint64_t)ms);
	int done;

	pthread_mutex_lock(&w->mu);
	while (!w->done && cvw_wait_until(&w->cv, &w->mu, end) == 0)
		;
	done = w->done;
	pthread_mutex_unlock(&w->mu);
	return done ? w->pl.status : 1;
}

/* A request run to completion (lk_plock_wait); the lk_plock is copied
 * out to @out if not NULL. Returns the status. */
static int op(int node, uint8_t o, uint64_t ino, uint64_t owner, uint8_t type,
	      uint64_t s, uint64_t e, struct lk_plock *out)
{
	struct lk_plock pl = {.ino = ino,
			      .owner = owner,
			      .start = s,
			      .end = e,
			      .pid = (uint32_t)(node * 100 + owner),
			      .tag = owner,
			      .op = o,
			      .type = type};
	int ret = lk_plock(lkl_ls[node], &pl);

	if (ret == 1)
		ret = lk_plock_wait(lkl_ls[node], &pl);
	else if (ret == 0)
		ret = pl.status;
	if (out != NULL)
		*out = pl;
	return ret;
}

/* ---- random ops against a model ---- */

#define NOWN 6 /* owners: node = 1 + o / 2, owner id = o % 2 + 1 */
static uint8_t model[NOWN][SPAN];

static int model_conflict(int who, uint8_t type, int s, int e, int *by, int *at)
{
	for (int b = s; b <= e; b++)
		for (int o = 0; o < NOWN; o++)
			if (o != who && model[o][b] != LK_PL_UN &&
			    (type == LK_PL_WR || model[o][b] == LK_PL_WR)) {
				*by = o;
				*at = b;
				return 1;
			}
	return 0;
}

static void check_getlk(int who, int node, uint64_t owner, uint8_t type, int s,
			int e)
{
	struct lk_plock pl;
	int by, at, ret;

	ret = op(node, LK_PL_GETLK, 7, owner, type, (uint64_t)s, (uint64_t)e,
		 &pl);
	CHECK_EQ(ret, 0);
	if (!model_conflict(who, type, s, e, &by, &at)) {
		CHECK_EQ(pl.cf_type, LK_PL_UN);
		return;
	}
	REQUIRE(pl.cf_type != LK_PL_UN);
	REQUIRE(pl.cf_node >= 1 && pl.cf_node <= 3);
	by = (int)(pl.cf_node - 1) * 2 + (int)(pl.cf_pid % 100) - 1;
	REQUIRE(by >= 0 && by < NOWN && by != who);
	/* the range reported is that owner's, merged, and conflicts */
	CHECK(pl.cf_start <= (uint64_t)e && pl.cf_end >= (uint64_t)s);
	for (uint64_t b = pl.cf_start; b <= pl.cf_end && b < SPAN; b++)
		CHECK_EQ(model[by][b], pl.cf_type);
	if (pl.cf_start > 0)
		CHECK(model[by][pl.cf_start - 1] != pl.cf_type);
	if (pl.cf_end + 1 < SPAN)
		CHECK(model[by][pl.cf_end + 1] != pl.cf_type);
}

static void test_random_against_model(void)
{
	unsigned granted = 0, refused = 0;

	t_rnd_seed(t_seed());
	memset(model, 0, sizeof(model));
	for (int i = 0; i < 600 && !t_case_failed; i++) {
		int who = (int)(t_rnd() % NOWN), node = 1 + who / 2;
		uint64_t owner = (uint64_t)(who % 2 + 1);
		int s = (int)(t_rnd() % SPAN), len = 1 + (int)(t_rnd() % 12);
		int e = s + len - 1 < SPAN ? s + len - 1 : SPAN - 1;
		uint8_t type = (uint8_t)(1 + t_rnd() % 2);
		int pick = (int)(t_rnd() % 10), by, at, ret;

		if (pick < 2) {
			check_getlk(who, node, owner, type, s, e);
			continue;
		}
		if (pick < 5) {
			CHECK_EQ(op(node, LK_PL_UNLOCK, 7, owner, 0,
				    (uint64_t)s, (uint64_t)e, NULL),
				 0);
			memset(&model[who][s], LK_PL_UN, (size_t)(e - s + 1));
			continue;
		}
		ret = op(node, LK_PL_LOCK, 7, owner, type, (uint64_t)s,
			 (uint64_t)e, NULL);
		if (model_conflict(who, type, s, e, &by, &at)) {
			CHECK_EQ(ret, -EAGAIN);
			refused++;
		} else {
			CHECK_EQ(ret, 0);
			memset(&model[who][s], type, (size_t)(e - s + 1));
			granted++;
		}
	}
	printf("model: %u granted, %u refused\n", granted, refused);
	CHECK(granted > 50 && refused > 50);
	for (int o = 0; o < NOWN; o++)
		CHECK_EQ(op(1 + o / 2, LK_PL_DROP, 7, (uint64_t)(o % 2 + 1), 0,
			    0, UINT64_MAX, NULL),
			 0);
}

/* ---- deadlock ---- */

static void test_deadlock_three_nodes(void)
{
	struct waiter wa, wb, wc;

	/* owner 1 of node n holds inode 100 + n, byte 0 */
	for (int n = 1; n <= 3; n++)
		REQUIRE(op(n, LK_PL_LOCK, 100 + n, 1, LK_PL_WR, 0, 0, NULL) ==
			0);
	/* 1 waits for 2, 2 waits for 3 */
	CHECK_EQ(w_submit(1, &wa, LK_PL_LOCK, 102, 1, LK_PL_WR, 0, 0, 1), 1);
	CHECK_EQ(w_submit(2, &wb, LK_PL_LOCK, 103, 1, LK_PL_WR, 0, 0, 1), 1);
	CHECK_EQ(w_wait(&wa, 200), 1);
	/* 3 waiting for 1 would close the cycle */
	w_submit(3, &wc, LK_PL_LOCK, 101, 1, LK_PL_WR, 0, 0, 1);
	CHECK_EQ(w_wait(&wc, 10000), -EDEADLK);
	/* node 2 still waits */
	CHECK_EQ(w_wait(&wb, 100), 1);
	/* 3 lets go: 2 gets inode 103, then lets go of 102: 1 gets it */
	CHECK_EQ(op(3, LK_PL_UNLOCK, 103, 1, 0, 0, 0, NULL), 0);
	CHECK_EQ(w_wait(&wb, 10000), 0);
	CHECK_EQ(w_wait(&wa, 100), 1);
	CHECK_EQ(op(2, LK_PL_DROP, 102, 1, 0, 0, UINT64_MAX, NULL), 0);
	CHECK_EQ(w_wait(&wa, 10000), 0);
	for (int n = 1; n <= 3; n++)
		for (uint64_t ino = 101; ino <= 103; ino++)
			op(n, LK_PL_DROP, ino, 1, 0, 0, UINT64_MAX, NULL);
}

static void test_cancel_and_drop_tag(void)
{
	struct waiter w;
	struct lk_plock pl;

	REQUIRE(op(1, LK_PL_LOCK, 200, 1, LK_PL_WR, 0, 9, NULL) == 0);
	CHECK_EQ(w_submit(2, &w, LK_PL_LOCK, 200, 1, LK_PL_RD, 5, 5, 1), 1);
	CHECK_EQ(w_wait(&w, 100), 1);
	CHECK_EQ(lk_plock_cancel(lkl_ls[2], &w.pl), 0);
	CHECK_EQ(w_wait(&w, 10000), -EINTR);
	CHECK_EQ(lk_plock_cancel(lkl_ls[2], &w.pl), -EALREADY);
	/* owners 2 and 3 of node 1 (tags 2 and 3) */
	CHECK_EQ(op(1, LK_PL_LOCK, 200, 2, LK_PL_RD, 20, 20, NULL), 0);
	CHECK_EQ(op(1, LK_PL_LOCK, 200, 3, LK_PL_RD, 30, 30, NULL), 0);
	CHECK_EQ(lk_plock_drop_tag(lkl_ls[1], 200, 2), 1);
	for (int i = 0; i < 500; i++) { /* the drop goes asynchronously */
		op(3, LK_PL_GETLK, 200, 1, LK_PL_WR, 20, 20, &pl);
		if (pl.cf_type == LK_PL_UN)
			break;
		usleep(10000);
	}
	CHECK_EQ(pl.cf_type, LK_PL_UN);
	CHECK_EQ(op(3, LK_PL_GETLK, 200, 1, LK_PL_WR, 30, 30, &pl), 0);
	CHECK_EQ(pl.cf_type, LK_PL_RD);
	CHECK_EQ(pl.cf_node, 1u);
	for (uint64_t o = 1; o <= 3; o++)
		op(1, LK_PL_DROP, 200, o, 0, 0, UINT64_MAX, NULL);
}

/* ---- node deaths (5 nodes) ---- */

static void test_holder_and_server_die(void)
{
	struct waiter w;
	struct lk_plock pl;

	/* node 3 holds [0, 9] of inode 300; node 2 waits for byte 5 */
	REQUIRE(op(3, LK_PL_LOCK, 300, 1, LK_PL_WR, 0, 9, NULL) == 0);
	REQUIRE(op(2, LK_PL_LOCK, 301, 1, LK_PL_WR, 0, UINT64_MAX, NULL) == 0);
	CHECK_EQ(w_submit(2, &w, LK_PL_LOCK, 300, 1, LK_PL_WR, 5, 5, 1), 1);
	CHECK_EQ(w_wait(&w, 200), 1);
	lk_ls_abandon(lkl_ls[3]); /* a crash, for the others */
	lkl_ls[3] = NULL;
	CHECK_EQ(w_wait(&w, 30000), 0);
	/* node 1 (the server) dies: node 2's ranges are rebuilt on node 2 */
	lk_ls_abandon(lkl_ls[1]);
	lkl_ls[1] = NULL;
	for (int i = 0; i < 3000; i++) { /* until recovery let it through */
		if (op(4, LK_PL_GETLK, 301, 1, LK_PL_RD, 7, 7, &pl) == 0 &&
		    pl.cf_type != LK_PL_UN)
			break;
		usleep(10000);
	}
	CHECK_EQ(pl.cf_type, LK_PL_WR);
	CHECK_EQ(pl.cf_node, 2u);
	CHECK_EQ(pl.cf_end, UINT64_MAX);
	CHECK_EQ(op(5, LK_PL_LOCK, 300, 1, LK_PL_RD, 5, 5, NULL), -EAGAIN);
	CHECK_EQ(op(5, LK_PL_LOCK, 300, 1, LK_PL_RD, 6, 6, NULL), 0);
	CHECK_EQ(w_submit(4, &w, LK_PL_LOCK, 301, 1, LK_PL_RD, 100, 200, 1), 1);
	CHECK_EQ(w_wait(&w, 100), 1);
	CHECK_EQ(op(2, LK_PL_UNLOCK, 301, 1, 0, 50, UINT64_MAX, NULL), 0);
	CHECK_EQ(w_wait(&w, 10000), 0);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	if (lkl_start(3, "", 3000) != 0)
		return 1;
	T_RUN(test_random_against_model);
	T_RUN(test_deadlock_three_nodes);
	T_RUN(test_cancel_and_drop_tag);
	lkl_close();
	if (lkl_start(5, "", 1500) != 0)
		return 1;
	T_RUN(test_holder_and_server_die);
	lkl_close();
	return t_done();
}
