/*
 * test_lk_disk.c — the lock manager's disk liveness hook (lk_ls_config
 * disk; PROTOCOL.md §9), without a disk: a fake table says which node
 * beats. Two-node mode over real TCP (tests/unit/lk_local.h), node 2's
 * links cut by the UCFS_LK_CUT fault hook:
 *
 * - both beating: node 2 (the higher id) fences itself, node 1 keeps the
 *   old membership and forms none without node 2 while it beats; once
 *   node 2's beat stops (DEAD), node 1 forms a membership alone and
 *   grants;
 * - node 1 frozen (its beat stopped before the cut): node 2 does not
 *   fence itself, and goes on alone once node 1 is DEAD on the disk;
 * - a node started alone while its peer beats but cannot be reached
 *   (another secret, a cut) never forms a membership: the higher id
 *   fences itself, the lower waits;
 * - the rules that wait on the disk sleep (PROTOCOL.md §7 "The network
 *   thread's sleep"): node 2 alone with node 1 DEAD on the disk keeps
 *   its tie-break for a beat of node 1, and node 1 alone waits for
 *   node 2 beating on the disk (disk timeout 60 s), each with few
 *   wake-ups (they asked the hook every heartbeat, 100 ms, before);
 *   the change announced (lk_ls_disk_changed) acts at once: node 2
 *   fences itself, node 1 goes on without the disk timeout (redials
 *   60 s apart, so that no other turn asks the rules again).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lockmgr/lk.h"
#include "tests/unit/harness.h"
#include "tests/unit/lk_local.h"

static int disk_state[3];  /* per node: LK_DISK_* */
static int disk_frozen[3]; /* the beat stopped changing */
static uint64_t disk_changed[3];
static char cut_path[128];
static unsigned disk_timeout_ms = 1000;
static int cut_armed = 1; /* node 2 opens with UCFS_LK_CUT */

/* At most this many wake-ups of a network thread in 2 s while a rule
 * waits on the disk (no redials: UCFS_LK_REDIAL_MS; the rules' own
 * deadlines are a disk timeout away). Asking the hook every heartbeat
 * made 20 turns alone. */
#define DISK_WAKEUPS_MAX 12

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int fake_disk(uint32_t node, uint64_t *changed, void *arg)
{
	int st = node < 3 ? __atomic_load_n(&disk_state[node], __ATOMIC_ACQUIRE)
			  : LK_DISK_NONE;

	(void)arg;
	if (node < 3 && !__atomic_load_n(&disk_frozen[node], __ATOMIC_ACQUIRE))
		__atomic_store_n(&disk_changed[node], mono_ns(),
				 __ATOMIC_RELEASE);
	*changed = node < 3
		       ? __atomic_load_n(&disk_changed[node], __ATOMIC_ACQUIRE)
		       : 0;
	return st;
}

/* Node 1 as usual; node 2 with the cut hook armed. */
static int open_node(int i)
{
	struct lk_ls_config c = {.cluster_file = lkl_cfg,
				 .nodeid = (uint32_t)i,
				 .log = lkl_quiet,
				 .disk = fake_disk,
				 .disk_timeout_ms = disk_timeout_ms};
	int ret;

	if (i == 2 && cut_armed)
		setenv("UCFS_LK_CUT", cut_path, 1);
	ret = lk_ls_open(&c, &lkl_ls[i]);
	unsetenv("UCFS_LK_CUT");
	return ret;
}

/* As a disk heartbeat's read would see it, and announce it
 * (lk_ls_disk_changed: the lock manager does not ask again by itself). */
static void set_disk(int node, int state, int frozen)
{
	__atomic_store_n(&disk_frozen[node], frozen, __ATOMIC_RELEASE);
	__atomic_store_n(&disk_state[node], state, __ATOMIC_RELEASE);
	for (int i = 1; i <= 2; i++)
		if (lkl_ls[i] != NULL)
			lk_ls_disk_changed(lkl_ls[i], 1ull << node);
}

static void cut(int on)
{
	if (on) {
		FILE *f = fopen(cut_path, "w");

		if (f != NULL)
			fclose(f);
	} else {
		unlink(cut_path);
	}
}

/* Wait up to @ms for node @i to be fenced. */
static int fenced_within(int i, int ms)
{
	for (int t = 0; t < ms; t += 10) {
		if (lk_ls_fenced(lkl_ls[i]))
			return 1;
		usleep(10000);
	}
	return 0;
}

static struct lk_name nm(uint64_t num)
{
	struct lk_name n;

	lk_name_make(&n, 3, num, NULL);
	return n;
}

static void test_cut_lower_id_survives(void)
{
	struct lk_name n = nm(1);

	set_disk(1, LK_DISK_ALIVE, 0);
	set_disk(2, LK_DISK_ALIVE, 0);
	REQUIRE(lkl_open_with(2, 0x6, "\"two_node\":true,", 1000, open_node) ==
		0);
	REQUIRE(lkl_full(2, 10000) == 0);
	cut(1);
	CHECK(fenced_within(2, 10000));
	CHECK(!lk_ls_fenced(lkl_ls[1]));
	/* node 2 still beats (it has not stopped writing yet): node 1
	 * keeps the old membership and grants nothing node 2 could hold */
	usleep(1500000);
	CHECK(lkl_sees(1, 0x6));
	CHECK_EQ(lkl_lock_soon(1, &n, 50), -ETIMEDOUT);
	/* node 2's beat stops: node 1 goes on alone */
	set_disk(2, LK_DISK_DEAD, 1);
	CHECK_EQ(lkl_full(1, 10000), 0);
	CHECK(lkl_sees(1, 0x2));
	CHECK_EQ(lkl_lock_soon(1, &n, 500), 0);
	cut(0);
	lkl_close();
}

static void test_frozen_lower_id_is_not_a_cut(void)
{
	/* node 1's beat stopped before the link went: frozen, not cut off */
	set_disk(1, LK_DISK_ALIVE, 0);
	set_disk(2, LK_DISK_ALIVE, 0);
	REQUIRE(lkl_open_with(2, 0x6, "\"two_node\":true,", 1000, open_node) ==
		0);
	REQUIRE(lkl_full(2, 10000) == 0);
	set_disk(1, LK_DISK_ALIVE, 1);
	cut(1);
	usleep(2500000);
	CHECK(!lk_ls_fenced(lkl_ls[2]));
	set_disk(1, LK_DISK_DEAD, 1);
	for (int t = 0; t < 1000 && !lkl_sees(2, 0x4); t++)
		usleep(10000);
	CHECK(lkl_sees(2, 0x4));
	CHECK(!lk_ls_fenced(lkl_ls[2]));
	cut(0);
	lkl_close();
}

static void test_alone_while_the_peer_beats(void)
{
	set_disk(1, LK_DISK_ALIVE, 0);
	set_disk(2, LK_DISK_ALIVE, 0);
	/* node 2 alone, node 1 beating elsewhere: never quorate, fenced */
	REQUIRE(lkl_open_with(2, 0x4, "\"two_node\":true,", 1000, open_node) ==
		0);
	CHECK(fenced_within(2, 10000));
	CHECK_EQ(lk_ls_wait_quorum(lkl_ls[2], 100), -ESHUTDOWN);
	lkl_close();
	/* node 1 alone, node 2 beating elsewhere: waits, not fenced */
	REQUIRE(lkl_open_with(2, 0x2, "\"two_node\":true,", 1000, open_node) ==
		0);
	CHECK_EQ(lk_ls_wait_quorum(lkl_ls[1], 3000), -ETIMEDOUT);
	CHECK(!lk_ls_fenced(lkl_ls[1]));
	set_disk(2, LK_DISK_DEAD, 1);
	CHECK_EQ(lk_ls_wait_quorum(lkl_ls[1], 10000), 0);
	lkl_close();
}

/* Node @i's network thread turns over two seconds. */
static uint64_t idle_2s(int i)
{
	struct lk_stats a, b;

	lk_ls_stats(lkl_ls[i], &a);
	sleep(2);
	lk_ls_stats(lkl_ls[i], &b);
	return b.net_wakeups - a.net_wakeups;
}

static void test_disk_waits_asleep(void)
{
	uint64_t w;

	disk_timeout_ms = 60000;
	cut_armed = 0; /* (its file is read every 100 ms) */
	/* every turn asks the rules again: no redial turns either, so
	 * that only the announced change can act */
	setenv("UCFS_LK_REDIAL_MS", "60000", 1);
	__atomic_store_n(&disk_changed[1], 0, __ATOMIC_RELEASE);
	set_disk(1, LK_DISK_DEAD, 1);
	/* node 2 alone: its tie-break waits for a beat of node 1 */
	REQUIRE(lkl_open_with(2, 0x4, "\"two_node\":true,", 1000, open_node) ==
		0);
	for (int t = 0; t < 1000 && !lkl_sees(2, 0x4); t++)
		usleep(10000);
	REQUIRE(lkl_sees(2, 0x4));
	usleep(1500000); /* past the tie-break's grace and fast redials */
	w = idle_2s(2);
	printf("# node 2 alone, node 1 dead on the disk: %llu wake-ups in "
	       "2 s\n",
	       (unsigned long long)w);
	CHECK(w <= DISK_WAKEUPS_MAX);
	CHECK(!lk_ls_fenced(lkl_ls[2]));
	set_disk(1, LK_DISK_ALIVE, 0); /* node 1 beats again: a cut */
	CHECK(fenced_within(2, 10000));
	lkl_close();
	/* node 1 alone: no membership while node 2 beats */
	set_disk(2, LK_DISK_ALIVE, 0);
	REQUIRE(lkl_open_with(2, 0x2, "\"two_node\":true,", 1000, open_node) ==
		0);
	usleep(2000000);
	w = idle_2s(1);
	printf("# node 1 alone, node 2 beating: %llu wake-ups in 2 s\n",
	       (unsigned long long)w);
	CHECK(w <= DISK_WAKEUPS_MAX);
	CHECK(!lkl_sees(1, 0x2));
	set_disk(2, LK_DISK_DEAD, 1);
	/* at once, not a disk timeout (60 s) after node 2's last beat */
	CHECK_EQ(lk_ls_wait_quorum(lkl_ls[1], 20000), 0);
	lkl_close();
	disk_timeout_ms = 1000;
	cut_armed = 1;
	unsetenv("UCFS_LK_REDIAL_MS");
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	snprintf(cut_path, sizeof(cut_path), "/tmp/ucfs-lkdisk-cut.%d",
		 getpid());
	unlink(cut_path);
	LKL_RUN(test_cut_lower_id_survives);
	LKL_RUN(test_frozen_lower_id_is_not_a_cut);
	LKL_RUN(test_alone_while_the_peer_beats);
	LKL_RUN(test_disk_waits_asleep);
	unlink(cut_path);
	return t_done();
}
