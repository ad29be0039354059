/*
 * lk_node.c — one DLM node for the multi-process tests
 * (tests/integration/lk_*.sh). Usage:
 *
 *   lk_node CONFIG ID MODE [N]
 *
 * MODE:
 *   join   wait until all configured nodes are members, print "MEMBERS",
 *          take and release one lock per node, then leave cleanly.
 *   hold   wait for the full membership, take EX (with LVB) on N
 *          resources, print "HELD", then sleep until killed.
 *   wait   wait for the full membership and for the file $LK_GO, request
 *          EX on the same N resources, print "WAITING", and succeed when
 *          all were granted after the node-down callback ran, each with
 *          an invalid LVB or one written by a survivor.
 *   churn  N random PR/EX lock-hold-unlock cycles on 8 shared resources,
 *          checking mutual exclusion through the shared file $LK_SHM
 *          (the node-down callback clears what the dead node owned),
 *          print "OK", then wait for the file $LK_GO before leaving (a
 *          lone survivor of three has no quorum). N = 0: until $LK_GO,
 *          then wait for $LK_LEAVE.
 *
 * Exit 0 on success; prints "FAIL why" and exits 1 otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "lockmgr/lk.h"

#define NSHARED 8
#define BASE 1000

static uint32_t me;
static atomic_int recovered;
static _Atomic uint32_t *shm;

static void die(const char *why)
{
	printf("FAIL node %u: %s\n", me, why);
	fflush(stdout);
	exit(1);
}

static void logcb(int level, const char *msg, void *arg)
{
	(void)arg;
	if (level <= 2)
		fprintf(stderr, "node %u: %s\n", me, msg);
}

static void on_recover(struct lk_ls *ls, uint32_t dead, void *arg)
{
	(void)ls;
	(void)arg;
	fprintf(stderr, "node %u: recovering for dead node %u\n", me, dead);
	if (shm != NULL)
		for (int i = 0; i < NSHARED; i++) {
			uint32_t v = dead;

			/* EX owned by the dead node: released by recovery */
			atomic_compare_exchange_strong(&shm[i], &v, 0);
		}
	atomic_store(&recovered, 1);
}

static void sleep_ms(long ms)
{
	nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
}

static struct lk_ls *open_ls(const char *cfg, int want)
{
	struct lk_ls_config c = {cfg, me, on_recover, logcb, NULL, NULL, 0};
	struct lk_ls *ls;
	uint64_t gen, members;
	int ret = lk_ls_open(&c, &ls);

	if (ret < 0)
		die("lk_ls_open");
	const char *w = getenv("LK_WAIT_MS");
	int tries = (w != NULL ? atoi(w) : 10000) / 10;

	for (int i = 0; i < tries; i++) {
		if (lk_ls_members(ls, &gen, &members) &&
		    __builtin_popcountll(members) >= want)
			return ls;
		sleep_ms(10);
	}
	die("no full membership in time");
	return NULL;
}

static struct lk_name rname(uint64_t i)
{
	struct lk_name n;

	lk_name_make(&n, 3, BASE + i, NULL);
	return n;
}

static void mode_join(struct lk_ls *ls)
{
	struct lk_name n = rname(me);
	struct lk_lock *lk;
	int ret;

	printf("MEMBERS\n");
	fflush(stdout);
	ret = lk_lock(ls, &n, LK_EX, 0, NULL, NULL, &lk);
	if (ret == 0)
		ret = lk_wait(lk);
	if (ret < 0 || lk_unlock(lk, 0) != 0)
		die("lock/unlock");
	sleep_ms(300); /* let every node finish before anyone leaves */
}

static void mode_hold(struct lk_ls *ls, int n)
{
	uint8_t v[LK_LVB_LEN] = {0};

	for (int i = 0; i < n; i++) {
		struct lk_name x = rname((uint64_t)i);
		struct lk_lock *lk;
		int ret = lk_lock(ls, &x, LK_EX, LK_VALBLK, NULL, NULL, &lk);

		if (ret == 0)
			ret = lk_wait(lk);
		if (ret < 0)
			die("hold: lock");
		v[0] = (uint8_t)me;
		lk_lvb_set(lk, v);
	}
	printf("HELD\n");
	fflush(stdout);
	sleep_ms(60000);
}

static void mode_wait(struct lk_ls *ls, int n)
{
	static struct lk_lock *lks[1024];
	const char *go = getenv("LK_GO");
	int invalid = 0;

	if (n > 1024 || go == NULL)
		die("wait: N or LK_GO");
	while (access(go, F_OK) != 0)
		sleep_ms(10);
	for (int i = 0; i < n; i++) {
		struct lk_name x = rname((uint64_t)i);

		if (lk_lock(ls, &x, LK_EX, LK_VALBLK, NULL, NULL, &lks[i]) < 0)
			die("wait: lock");
	}
	printf("WAITING\n");
	fflush(stdout);
	for (int i = 0; i < n; i++) {
		uint8_t v[LK_LVB_LEN];
		int ret = lk_wait(lks[i]);

		if (ret != 0)
			die("wait: request failed");
		if (!atomic_load(&recovered))
			die("granted before the node-down callback");
		ret = lk_lvb_get(lks[i], v);
		if (ret == -ENODATA)
			invalid++;
		else if (ret != 0 || (v[0] != 1 && v[0] != 2))
			die("LVB neither invalid nor written by a survivor");
		v[0] = (uint8_t)me;
		lk_lvb_set(lks[i], v);
		lk_unlock(lks[i], 0);
	}
	printf("OK granted=%d invalid_lvb=%d\n", n, invalid);
}

static void check_slot(int r, int mode)
{
	uint32_t v = 0;

	if (mode == LK_EX) {
		if (!atomic_compare_exchange_strong(&shm[r], &v, me))
			die("EX granted while another node holds it");
		sleep_ms(rand() % 3);
		v = me;
		if (!atomic_compare_exchange_strong(&shm[r], &v, 0))
			die("EX holder's slot changed under it");
	} else if (atomic_load(&shm[r]) != 0) {
		die("PR granted while another node holds EX");
	}
}

static void mode_churn(struct lk_ls *ls, int n)
{
	const char *path = getenv("LK_SHM"), *go = getenv("LK_GO");
	int fd = path != NULL ? open(path, O_RDWR) : -1;

	if (fd < 0 || (n == 0 && go == NULL))
		die("churn: LK_SHM, or LK_GO with N = 0");
	shm = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (shm == MAP_FAILED)
		die("mmap");
	srand(me * 7919u);
	for (int i = 0; n == 0 || i < n; i++) {
		if (n == 0 && (i & 63) == 0 && access(go, F_OK) == 0) {
			n = i; /* "churn 0": until $LK_GO appears */
			break;
		}
		int r = rand() % NSHARED;
		int mode = rand() % 2 ? LK_EX : LK_PR;
		struct lk_name x = rname(100 + (uint64_t)r);
		struct lk_lock *lk;
		int ret = lk_lock(ls, &x, mode, 0, NULL, NULL, &lk);

		if (ret == 0)
			ret = lk_wait(lk);
		if (ret < 0)
			die("churn: lock failed");
		check_slot(r, mode);
		if (lk_unlock(lk, 0) != 0)
			die("churn: unlock");
	}
	printf("OK churn=%d\n", n);
	/* stay a member (quorum) until the script lets everybody leave */
	if (getenv("LK_LEAVE") != NULL)
		go = getenv("LK_LEAVE");
	for (int i = 0; i < 3000 && go != NULL && access(go, F_OK) != 0; i++)
		sleep_ms(10);
}

int main(int argc, char **argv)
{
	struct lk_ls *ls;
	int n;

	if (argc < 4) {
		fprintf(stderr, "usage: lk_node CONFIG ID MODE [N]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(getenv("LK_ALARM") != NULL ? (unsigned)atoi(getenv("LK_ALARM"))
					 : 40); /* bounded in time */
	me = (uint32_t)atoi(argv[2]);
	n = argc > 4 ? atoi(argv[4]) : 1;
	/* churn may start with a quorum: its victim may die while joining */
	ls = open_ls(argv[1], strcmp(argv[3], "churn") == 0 ? 2 : 3);
	if (strcmp(argv[3], "join") == 0)
		mode_join(ls);
	else if (strcmp(argv[3], "hold") == 0)
		mode_hold(ls, n);
	else if (strcmp(argv[3], "wait") == 0)
		mode_wait(ls, n);
	else if (strcmp(argv[3], "churn") == 0)
		mode_churn(ls, n);
	else
		die("unknown mode");
	lk_ls_close(ls);
	return 0;
}
