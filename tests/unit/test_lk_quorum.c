/*
 * test_lk_quorum.c — quorum over real TCP (lockspaces in this process,
 * tests/unit/lk_local.h):
 *
 * - of three nodes, after one leaves and one dies (abandons), the last
 *   has no quorum and grants nothing (every configured node has a vote);
 * - two-node mode: the higher id alone is not quorate until the peer has
 *   come up or timeout_ms has passed (the lower may start alone); two
 *   nodes opened at once form one membership of two;
 * - lk_ls_usable (no mutex) follows lk_ls_members: 1 once quorate, 0
 *   once quorum is lost, and 0 at once after lk_ls_fence.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lockmgr/lk.h"
#include "tests/unit/harness.h"
#include "tests/unit/lk_local.h"

static struct lk_name nm(uint64_t num)
{
	struct lk_name n;

	lk_name_make(&n, 3, num, NULL);
	return n;
}

/* A lock on node @i that is granted within a few seconds: 0, or the
 * error (-ETIMEDOUT if it stayed queued). */
static int lock_soon(int i, uint64_t num)
{
	struct lk_name n = nm(num);

	return lkl_lock_soon(i, &n, 300);
}

static int quorate(int i)
{
	uint64_t gen, m;

	return lk_ls_members(lkl_ls[i], &gen, &m);
}

/* lk_ls_usable(@i) becomes @want within a few seconds: 1 if it did. */
static int usable_soon(int i, int want)
{
	for (int t = 0; t < 300 && lk_ls_usable(lkl_ls[i]) != want; t++)
		usleep(10000);
	return lk_ls_usable(lkl_ls[i]) == want;
}

static void test_dead_node_keeps_its_vote(void)
{
	REQUIRE(lkl_open(3, 3, "", 1000) == 0);
	REQUIRE(lkl_full(3, 20000) == 0);
	CHECK(usable_soon(1, 1));
	lk_ls_close(lkl_ls[3]); /* leaves: 2 of 2 needed now */
	lkl_ls[3] = NULL;
	CHECK_EQ(lkl_full(2, 10000), 0);
	lk_ls_abandon(lkl_ls[2]); /* dies: it may be alive elsewhere */
	lkl_ls[2] = NULL;
	for (int t = 0; t < 300 && quorate(1); t++)
		usleep(10000);
	CHECK(!quorate(1));
	CHECK(usable_soon(1, 0));
	CHECK_EQ(lock_soon(1, 3), -ETIMEDOUT);
	lkl_close();
}

static void test_two_node_waits_for_the_peer(void)
{
	/* node 2 of two opened alone: no quorum at first, then alone
	 * after timeout_ms (2 s) */
	REQUIRE(lkl_open_set(2, 0x4, "\"two_node\":true,", 2000) == 0);
	CHECK_EQ(lk_ls_wait_quorum(lkl_ls[2], 500), -ETIMEDOUT);
	CHECK_EQ(lk_ls_wait_quorum(lkl_ls[2], 10000), 0);
	lkl_close();
	/* node 1, the lower id, may start alone at once */
	REQUIRE(lkl_open_set(2, 0x2, "\"two_node\":true,", 2000) == 0);
	CHECK_EQ(lk_ls_wait_quorum(lkl_ls[1], 1500), 0);
	lkl_close();
}

static void test_two_nodes_opened_together_form_one_membership(void)
{
	REQUIRE(lkl_open(2, 2, "\"two_node\":true,", 5000) == 0);
	/* both quorate, each seeing both: never two memberships of one */
	CHECK_EQ(lkl_full(2, 10000), 0);
	CHECK_EQ(lock_soon(2, 4), 0);
	CHECK(usable_soon(2, 1));
	lk_ls_fence(lkl_ls[2], "test"); /* no turn of its thread needed */
	CHECK_EQ(lk_ls_usable(lkl_ls[2]), 0);
	lkl_close();
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	LKL_RUN(test_dead_node_keeps_its_vote);
	LKL_RUN(test_two_node_waits_for_the_peer);
	LKL_RUN(test_two_nodes_opened_together_form_one_membership);
	return t_done();
}
