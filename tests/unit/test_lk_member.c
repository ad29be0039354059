/*
 * test_lk_member.c — the network thread sleeps while membership is
 * unsettled (lockmgr/PROTOCOL.md §7 "The network thread's sleep"), and
 * the timed membership rules still fire on time without its old 5 ms
 * ticks (lockspaces in this process over real TCP, tests/unit/lk_local.h;
 * heartbeat 100 ms, timeout 1 s):
 *
 * - two-node mode, node 2 down: node 1 forms a membership alone, then
 *   sleeps (wake-ups counted over 1 s, stats net_wakeups); node 2 opens
 *   and both form one membership (the coordinator's stable interval);
 * - two-node mode, node 1 down: node 2 goes on alone once timeout_ms
 *   passed (its lone-start deadline) and sleeps; node 1 opens and joins;
 * - three nodes, only node 1 open: no quorum, it sleeps; the others open
 *   and all three form one membership.
 *
 * The bound (at most 8 wake-ups in a second, counted once the redials
 * of a missing peer are a second apart) is not a speed check: the
 * thread wakes for its deadlines and events only (here a redial of
 * each missing peer every second, two turns each: the timer and the
 * refused connection), and a slow machine makes fewer turns, not more.
 * Before the deadlines it ticked every 5 ms in these states (about 200
 * a second), and with them, until it had no idle cap, every 100 ms at
 * least (11-12 a second).
 */
#include <stdio.h>
#include <unistd.h>

#include "lockmgr/lk.h"
#include "tests/unit/harness.h"
#include "tests/unit/lk_local.h"

#define WAKEUPS_MAX 8

/* Redials of a missing peer back off 100 ms, 200, 400, 800, then 1 s
 * apart: wait for that before counting. */
#define SETTLE_US 1600000

static uint64_t wakeups(int i)
{
	struct lk_stats st;

	lk_ls_stats(lkl_ls[i], &st);
	return st.net_wakeups;
}

/* Node @i's network thread turns over one second. */
static uint64_t idle_second(int i)
{
	uint64_t w0 = wakeups(i);

	sleep(1);
	return wakeups(i) - w0;
}

/* Node @i sees @members as its quorate membership within 10 s. */
static int sees_soon(int i, uint64_t members)
{
	for (int t = 0; t < 1000; t++) {
		if (lkl_sees(i, members))
			return 1;
		usleep(10000);
	}
	return 0;
}

static void alone_then_joined(uint64_t open, int alone, int other)
{
	uint64_t w;

	REQUIRE(lkl_open_set(2, open, "\"two_node\":true,", 1000) == 0);
	CHECK(sees_soon(alone, 1ull << alone));
	usleep(SETTLE_US);
	w = idle_second(alone);
	printf("# two-node, node %d alone: %llu wake-ups in 1 s\n", alone,
	       (unsigned long long)w);
	CHECK(w <= WAKEUPS_MAX);
	REQUIRE(lkl_open_quiet(other) == 0);
	CHECK_EQ(lkl_full(2, 10000), 0);
	lkl_close();
}

static void test_two_node_lower_alone(void)
{
	alone_then_joined(0x2, 1, 2);
}

static void test_two_node_higher_alone(void)
{
	alone_then_joined(0x4, 2, 1);
}

static void test_no_quorum_sleeps(void)
{
	uint64_t w;

	REQUIRE(lkl_open_set(3, 0x2, "", 1000) == 0);
	usleep(SETTLE_US);
	w = idle_second(1);
	printf("# three nodes, node 1 alone (no quorum): %llu wake-ups in "
	       "1 s\n",
	       (unsigned long long)w);
	CHECK(w <= WAKEUPS_MAX);
	CHECK(!lkl_sees(1, 0x2));
	REQUIRE(lkl_open_quiet(2) == 0);
	REQUIRE(lkl_open_quiet(3) == 0);
	CHECK_EQ(lkl_full(3, 10000), 0);
	lkl_close();
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	LKL_RUN(test_two_node_lower_alone);
	LKL_RUN(test_two_node_higher_alone);
	LKL_RUN(test_no_quorum_sleeps);
	return t_done();
}
