/*
 * ucfs-lockbench — measures the lock manager on loopback, in one run:
 *
 *   rtt        the loopback TCP round trip itself (two threads, 64-byte
 *              ping-pong over blocking sockets): the yardstick, measured
 *              interleaved one for one with the remote grants
 *   local      an uncached grant mastered on this node (lk_lock + unlock)
 *   cached     a re-acquire from the hold cache (lk_unlock(CACHE) + lk_lock)
 *   remote     a grant from another node's master (lk_lock + lk_wait)
 *   pingpong   two nodes taking EX on one resource in turn: transfers/s
 *   batch      1,000 PR locks mastered elsewhere in one lk_lock_batch,
 *              until lk_wait_batch returns: cold (fresh names, master lookups
 *              included; median of 5) and warm (masters known; median and
 *              best of 9). Every lock is checked to be a remote grant;
 *              each run is also divided by the median of 21 remote
 *              grants taken just before it (same load).
 *   throughput many threads on many resources over all nodes: ops/s
 *
 * Usage: ucfs-lockbench [-n NODES] [-t THREADS] [-s SECONDS] [-P POLL_US]
 *                       [-F] [-j FILE]
 * -P sets the configuration's poll_us (0: the lock manager never polls
 * without sleeping; default 100). -F leaves threads free (Placement).
 * The N peers are N lockspaces in this process, each with its own
 * threads and its own address 127.0.0.K, talking over real TCP. Prints a
 * table, then JSON (to stdout, or to FILE with -j).
 *
 * Placement: nodes are separate machines, so by default each node's
 * threads (its lock manager's, and the bench threads that lock through
 * it) are bound to a CPU of their own, node K to the (K-1)th allowed CPU
 * modulo their count; the yardstick's client and echo threads likewise to
 * node 1's and node 2's. Left free (-F, or a single allowed CPU), the
 * kernel tends to put the requester and the master's network thread on
 * one CPU (a socket ping-pong's wake-ups are synchronous and pull the
 * reader to the writer's CPU; polling threads never sleep, so never move
 * again), and the two nodes then take turns on it.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lockmgr/lk.h"

#define MAXN 8

static struct lk_ls *ls[MAXN + 1];
static int nnodes = 3, nthreads = 8, poll_us = -1;
static double seconds = 1.0;
static char dir[64];
static int free_threads;	/* -F */
static int ncpus;		/* CPUs nodes are bound to; 0: threads free */
static int cpu_of[CPU_SETSIZE]; /* the allowed CPUs, in order */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double median_us(uint64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_u64);
	return (double)v[n / 2] / 1000.0;
}

static void die(const char *what, int err)
{
	fprintf(stderr, "ucfs-lockbench: %s: %s\n", what, strerror(err));
	exit(1);
}

static struct lk_name nm(uint16_t type, uint64_t num)
{
	struct lk_name n;

	lk_name_make(&n, type, num, NULL);
	return n;
}

/* lk_lock + wait; returns the lock or dies */
static struct lk_lock *lock_wait(int node, struct lk_name *n, int mode)
{
	struct lk_lock *lk;
	int ret = lk_lock(ls[node], n, mode, 0, NULL, NULL, &lk);

	if (ret == 0)
		ret = lk_wait(lk);
	if (ret < 0)
		die("lk_lock", -ret);
	return lk;
}

/* ---- polling back-offs ---- */

/*
 * The lock manager's threads poll for input before sleeping, and stop
 * polling for 200 ms (LK_POLL_BACKOFF_NS, lockmgr/lk_net.c) when a yield
 * shows the CPU is contended. Rows that load both CPUs (ping-pong, cold
 * batches: every node of this process busy at once) switch it off for
 * the rows after them, which would then measure a state their own
 * contention does not cause. So before the remote grants and the warm
 * batches the bench waits for such back-offs to run out; it counts the
 * back-offs that happen during the warm batches (JSON poll_backoffs).
 */
#define BACKOFF_SETTLE_US 210000

static uint64_t backoffs(void)
{
	uint64_t n = 0;

	for (int i = 1; i <= nnodes; i++) {
		struct lk_stats st;

		lk_ls_stats(ls[i], &st);
		n += st.poll_backoffs;
	}
	return n;
}

/* Sleep out the back-offs taken since the last call. */
static void settle_polling(void)
{
	static uint64_t seen;
	uint64_t n = backoffs();

	if (n != seen)
		usleep(BACKOFF_SETTLE_US);
	seen = backoffs();
}

static uint64_t warm_backoffs;

/* ---- placement ---- */

/* The CPUs this process may use; with -F or only one, threads stay free. */
static void placement_init(void)
{
	static int done;
	cpu_set_t set;

	if (done++ || free_threads ||
	    sched_getaffinity(0, sizeof(set), &set) != 0)
		return;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			cpu_of[ncpus++] = c;
	if (ncpus < 2)
		ncpus = 0;
}

/* Bind the calling thread to node @node's CPU (threads it creates
 * inherit it). */
static void bind_to_node(int node)
{
	cpu_set_t set;

	if (ncpus == 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu_of[(node - 1) % ncpus], &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* ---- cluster set-up ---- */

static void quiet(int level, const char *msg, void *arg)
{
	(void)arg;
	if (level <= 0)
		fprintf(stderr, "lk: %s\n", msg);
}

static void write_config(const char *path, int port)
{
	FILE *f = fopen(path, "w");

	if (f == NULL)
		die("config", errno);
	fprintf(f,
		"{\"cluster\":\"bench\",\"secret_file\":\"%s/secret\","
		"\"heartbeat_ms\":200,\"timeout_ms\":5000,",
		dir);
	if (poll_us >= 0)
		fprintf(f, "\"poll_us\":%d,", poll_us);
	fprintf(f, "\"nodes\":[");
	for (int i = 1; i <= nnodes; i++)
		fprintf(f, "%s{\"id\":%d,\"addr\":\"127.0.0.%d\",\"port\":%d}",
			i > 1 ? "," : "", i, i, port);
	fprintf(f, "]}\n");
	fclose(f);
}

/* Open the N lockspaces; another port if one is taken. */
static void open_nodes(const char *path)
{
	for (int attempt = 0;; attempt++) {
		/* 20000-31999: below the ephemeral ports (clulib.sh) */
		int port = 20000 + (getpid() + attempt * 7919) % 12000;
		int ret = 0, i;

		write_config(path, port);
		for (i = 1; i <= nnodes && ret == 0; i++) {
			struct lk_ls_config c = {path, (uint32_t)i, NULL, quiet,
						 NULL, NULL, 0};

			bind_to_node(i); /* its threads start here */
			ret = lk_ls_open(&c, &ls[i]);
		}
		bind_to_node(1); /* this thread asks as node 1 */
		if (ret == 0)
			return;
		for (int j = i - 2; j >= 1; j--)
			lk_ls_abandon(ls[j]);
		if (ret != -EADDRINUSE || attempt == 5)
			die("lk_ls_open", -ret);
	}
}

static void start_cluster(void)
{
	char path[128];
	FILE *f;

	placement_init();
	snprintf(dir, sizeof(dir), "/tmp/ucfs-lockbench.XXXXXX");
	if (mkdtemp(dir) == NULL)
		die("mkdtemp", errno);
	snprintf(path, sizeof(path), "%s/secret", dir);
	f = fopen(path, "w");
	if (f == NULL)
		die("secret", errno);
	fprintf(f, "lockbench-secret-%d-%lu\n", getpid(),
		(unsigned long)now_ns());
	fclose(f);
	snprintf(path, sizeof(path), "%s/cluster.json", dir);
	open_nodes(path);
	for (int tries = 0; tries < 1000; tries++) {
		uint64_t gen, m;
		int ok = 1;

		for (int i = 1; i <= nnodes; i++)
			ok &= lk_ls_members(ls[i], &gen, &m) &&
			      __builtin_popcountll(m) == nnodes;
		if (ok)
			return;
		usleep(10000);
	}
	die("cluster did not form", ETIMEDOUT);
}

static void stop_cluster(void)
{
	char cmd[128];

	for (int i = nnodes; i >= 1; i--)
		lk_ls_close(ls[i]);
	snprintf(cmd, sizeof(cmd), "%s/secret", dir);
	unlink(cmd);
	snprintf(cmd, sizeof(cmd), "%s/cluster.json", dir);
	unlink(cmd);
	rmdir(dir);
}

/* ---- 1. loopback TCP round trip ---- */

/*
 * Two yardstick pairs, each a client and an echo thread on one TCP
 * connection with TCP_NODELAY (as the lock traffic), 64 bytes each way:
 * [0] blocking reads, the plain round trip; [1] reads that first poll
 * without sleeping, yielding at each turn, as the lock manager's threads
 * do (the client for LK_SPIN_CLIENT_NS like a waiter, the echo thread
 * for LK_SPIN_ECHO_NS like a network thread), then block.
 */
enum { LK_SPIN_CLIENT_NS = 30000, LK_SPIN_ECHO_NS = 100000 };

struct rtt_pair {
	int c, s, l;
	uint64_t spin; /* echo side's poll time, 0: blocking */
	pthread_t th;
};
static struct rtt_pair rtt[2];

/* Read @len bytes; poll without sleeping for @spin_ns first. */
static int read_n(int fd, char *buf, size_t len, uint64_t spin_ns)
{
	uint64_t end = now_ns() + spin_ns;
	size_t got = 0;

	while (got < len) {
		int f = spin_ns != 0 && now_ns() < end ? MSG_DONTWAIT : 0;
		ssize_t n = recv(fd, buf + got, len - got, f);

		if (n < 0 && f != 0 && errno == EAGAIN) {
			sched_yield();
			continue;
		}
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

static void *echo_main(void *arg)
{
	struct rtt_pair *p = arg;
	char buf[64];

	while (read_n(p->s, buf, sizeof(buf), p->spin) == 0)
		if (write(p->s, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			break;
	return NULL;
}

static void rtt_open_one(struct rtt_pair *p, uint64_t spin)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t alen = sizeof(a);
	int one = 1;

	p->spin = spin;
	p->l = socket(AF_INET, SOCK_STREAM, 0);
	a.sin_addr.s_addr = htonl(0x7f000001);
	if (bind(p->l, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(p->l, 1) < 0 ||
	    getsockname(p->l, (struct sockaddr *)&a, &alen) < 0)
		die("rtt socket", errno);
	p->c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(p->c, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("rtt connect", errno);
	p->s = accept(p->l, NULL, NULL);
	setsockopt(p->c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(p->s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	bind_to_node(2); /* the echo side is the other machine */
	pthread_create(&p->th, NULL, echo_main, p);
	bind_to_node(1);
	pthread_setname_np(p->th, spin ? "rtt-echo-poll" : "rtt-echo");
}

static void rtt_open(void)
{
	placement_init();
	rtt_open_one(&rtt[0], 0);
	rtt_open_one(&rtt[1], LK_SPIN_ECHO_NS);
}

/* One round trip on pair @k. */
static uint64_t rtt_once_on(int k)
{
	char buf[64] = {0};
	uint64_t t0 = now_ns();

	if (write(rtt[k].c, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
		die("rtt write", errno);
	if (read_n(rtt[k].c, buf, sizeof(buf),
		   k == 1 ? LK_SPIN_CLIENT_NS : 0) != 0)
		die("rtt read", errno);
	return now_ns() - t0;
}

static uint64_t rtt_once(void)
{
	return rtt_once_on(0);
}

static void rtt_close(void)
{
	for (int k = 0; k < 2; k++) {
		close(rtt[k].c);
		pthread_join(rtt[k].th, NULL);
		close(rtt[k].s);
		close(rtt[k].l);
	}
}

/* ---- 2/3. local and cached grants ---- */

static double bench_local(void)
{
	enum { N = 20000 };
	static uint64_t t[N];
	struct lk_name n = nm(1, 1);
	struct lk_lock *lk = lock_wait(1, &n, LK_EX);

	lk_unlock(lk, 0); /* node 1 is now the master */
	for (int i = 0; i < N; i++) {
		uint64_t t0 = now_ns();

		if (lk_lock(ls[1], &n, LK_EX, 0, NULL, NULL, &lk) !=
		    LK_GRANTED_NOW)
			die("local grant not immediate", EAGAIN);
		t[i] = now_ns() - t0;
		lk_unlock(lk, 0);
	}
	return median_us(t, N);
}

static double bench_cached(double *mean_ns)
{
	enum { N = 200000 };
	struct lk_name n = nm(1, 2);
	struct lk_lock *lk = lock_wait(1, &n, LK_EX);
	uint64_t t0;

	lk_unlock(lk, LK_UNLOCK_CACHE);
	t0 = now_ns();
	for (int i = 0; i < N; i++) {
		if (lk_lock(ls[1], &n, LK_PR, 0, NULL, NULL, &lk) !=
		    LK_GRANTED_NOW)
			die("cached re-acquire missed", EAGAIN);
		lk_unlock(lk, LK_UNLOCK_CACHE);
	}
	*mean_ns = (double)(now_ns() - t0) / N;
	/* the lock+unlock pair above; now the lock alone, per call */
	{
		static uint64_t t[20000];

		for (int i = 0; i < 20000; i++) {
			uint64_t a = now_ns();

			lk_lock(ls[1], &n, LK_PR, 0, NULL, NULL, &lk);
			t[i] = now_ns() - a;
			lk_unlock(lk, LK_UNLOCK_CACHE);
		}
		return median_us(t, 20000);
	}
}

/* ---- 4. remote grant ---- */

/* Remote grants and the two kinds of loopback round trips, interleaved
 * one for one so that all see the same machine load; medians of each. */
static double bench_remote(double *rtt_us, double *rtt_poll_us)
{
	enum { N = 3000 };
	static uint64_t t[N], r[N], rp[N];
	struct lk_name n = nm(1, 3);
	struct lk_lock *lk = lock_wait(2, &n, LK_EX);

	lk_unlock(lk, 0);	      /* node 2 masters it */
	lk = lock_wait(1, &n, LK_EX); /* master lookup, once */
	lk_unlock(lk, 0);
	for (int i = 0; i < N; i++) {
		uint64_t t0;

		r[i] = rtt_once();
		rp[i] = rtt_once_on(1);
		t0 = now_ns();
		lk = lock_wait(1, &n, LK_EX);
		t[i] = now_ns() - t0;
		lk_unlock(lk, 0);
	}
	*rtt_us = median_us(r + 100, N - 100);
	*rtt_poll_us = median_us(rp + 100, N - 100);
	return median_us(t + 100, N - 100);
}

static uint64_t proc_cpu_ns(void);

/* Profiling aid (-r): remote grants alone, then round trips alone, with
 * the CPU time and context switches of the whole process per operation
 * (all nodes' threads, kernel included). */
static void remote_profile(void)
{
	enum { N = 20000 };
	static uint64_t t[N];
	struct lk_name n = nm(1, 7);
	struct lk_lock *lk = lock_wait(2, &n, LK_EX);
	struct rusage r0, r1;
	uint64_t c0;

	lk_unlock(lk, 0);
	lk_unlock(lock_wait(1, &n, LK_EX), 0);
	for (int pass = 0; pass < 2; pass++) {
		getrusage(RUSAGE_SELF, &r0);
		c0 = proc_cpu_ns();
		for (int i = 0; i < N; i++) {
			uint64_t t0 = now_ns();

			if (pass == 0) {
				lk = lock_wait(1, &n, LK_EX);
				t[i] = now_ns() - t0;
				lk_unlock(lk, 0);
			} else {
				t[i] = rtt_once();
			}
		}
		c0 = proc_cpu_ns() - c0;
		getrusage(RUSAGE_SELF, &r1);
		printf("%-6s median %.2f us, CPU %.2f us, csw %.2f vol + "
		       "%.2f invol per op\n",
		       pass == 0 ? "remote" : "rtt", median_us(t, N),
		       (double)c0 / N / 1000.0,
		       (double)(r1.ru_nvcsw - r0.ru_nvcsw) / N,
		       (double)(r1.ru_nivcsw - r0.ru_nivcsw) / N);
	}
	for (int i = 1; i <= 2; i++) {
		struct lk_stats st;

		lk_ls_stats(ls[i], &st);
		printf("node %d: waits polled %llu (caught %llu), network "
		       "thread polled %llu (caught %llu), polling switched "
		       "off %llu times\n",
		       i, (unsigned long long)st.rx_spins,
		       (unsigned long long)st.rx_spin_hits,
		       (unsigned long long)st.net_spins,
		       (unsigned long long)st.net_spin_hits,
		       (unsigned long long)st.poll_backoffs);
	}
}

/* A remote grant on a name node 1 never used: the master lookup (to a
 * directory node that is not node 1, counted) and then the request;
 * median of the first touches that needed a LOOKUP message. */
static double bench_first_touch(void)
{
	enum { N = 300 };
	static uint64_t t[N];
	int k = 0;

	for (int i = 0; i < N; i++) {
		struct lk_name n = nm(8, (uint64_t)i);
		struct lk_stats a, b;
		uint64_t t0;
		struct lk_lock *lk;

		lk_unlock(lock_wait(2, &n, LK_EX), 0); /* node 2 masters it */
		lk_ls_stats(ls[1], &a);
		t0 = now_ns();
		lk = lock_wait(1, &n, LK_EX);
		t0 = now_ns() - t0;
		lk_ls_stats(ls[1], &b);
		lk_unlock(lk, 0);
		if (b.lookups == a.lookups + 1)
			t[k++] = t0;
	}
	return k > 0 ? median_us(t, k) : 0;
}

/* ---- 5. ping-pong ---- */

static atomic_int pp_stop;
static atomic_uint pp_last;
static atomic_ulong pp_transfers, pp_grants;

static void *pp_main(void *arg)
{
	int node = (int)(intptr_t)arg;
	struct lk_name n = nm(1, 4);

	bind_to_node(node);
	while (!atomic_load(&pp_stop)) {
		struct lk_lock *lk = lock_wait(node, &n, LK_EX);

		if (atomic_exchange(&pp_last, (unsigned)node) != (unsigned)node)
			atomic_fetch_add(&pp_transfers, 1);
		atomic_fetch_add(&pp_grants, 1);
		lk_unlock(lk, 0);
	}
	return NULL;
}

static double bench_pingpong(void)
{
	pthread_t a, b;
	uint64_t t0, t1;
	unsigned long tr0;

	pthread_create(&a, NULL, pp_main, (void *)1);
	pthread_create(&b, NULL, pp_main, (void *)2);
	usleep(100000); /* warm up */
	tr0 = atomic_load(&pp_transfers);
	t0 = now_ns();
	usleep((useconds_t)(seconds * 1e6));
	t1 = now_ns();
	tr0 = atomic_load(&pp_transfers) - tr0;
	atomic_store(&pp_stop, 1);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	return (double)tr0 / ((double)(t1 - t0) / 1e9);
}

/* ---- 6. batch ---- */

static double batch_submit_us, batch_submit_cpu_us;

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t remote_grants(int node, uint16_t type)
{
	struct lk_stats st;

	lk_ls_stats(ls[node], &st);
	return st.type[type].c.grants_remote;
}

/* One timed batch of @n PR locks on node 1, from the lk_lock_batch call
 * to the end of lk_wait_batch; then unlocked (untimed). Dies unless every lock
 * was a real remote grant: none granted inside the call (no cache hit, no local
 * master), @n more remote grants counted. */
static double batch_once(struct lk_name *names, struct lk_lock **lks, int n)
{
	uint64_t g0 = remote_grants(1, names[0].type);
	uint64_t c0 = cpu_ns(), t0 = now_ns();
	int ret =
	    lk_lock_batch(ls[1], names, (size_t)n, LK_PR, 0, NULL, NULL, lks);

	if (ret < 0)
		die("lk_lock_batch", -ret);
	if (ret != 0)
		die("batch granted locally (not a remote batch)", EINVAL);
	batch_submit_us = (double)(now_ns() - t0) / 1000.0;
	batch_submit_cpu_us = (double)(cpu_ns() - c0) / 1000.0;
	if (lk_wait_batch(lks, (size_t)n) != 0)
		die("batch lock", EIO);
	t0 = now_ns() - t0;
	if (remote_grants(1, names[0].type) - g0 != (uint64_t)n)
		die("batch: not every lock was a remote grant", EINVAL);
	if (lk_unlock_batch(lks, (size_t)n, 0) != n)
		die("lk_unlock_batch", EIO);
	return (double)t0 / 1000.0;
}

/* Make node 2 the master of @names (it locks and unlocks them all). */
static void master_on_2(struct lk_name *names, struct lk_lock **lks, int n)
{
	if (lk_lock_batch(ls[2], names, (size_t)n, LK_EX, 0, NULL, NULL, lks) <
	    0)
		die("lk_lock_batch", EINVAL);
	for (int i = 0; i < n; i++)
		lk_wait(lks[i]);
	lk_unlock_batch(lks, (size_t)n, 0);
}

static double batch_min_us, batch_ratio_warm, batch_ratio_cold;
static double idle_remote_us, idle_batch_us;

/* One remote grant (node 1 asking node 2's master) on @n. */
static uint64_t remote_once(const struct lk_name *n)
{
	struct lk_name nn = *n;
	uint64_t t0 = now_ns();
	struct lk_lock *lk = lock_wait(1, &nn, LK_EX);

	t0 = now_ns() - t0;
	lk_unlock(lk, 0);
	return t0;
}

/* Median of 21 remote grants, taken just before a batch so that both see
 * the same machine state. They are also the barrier that replaces a
 * pause: each link is one ordered stream, so once the first of them is
 * granted node 2 has processed every unlock of the previous batch. */
static double remote_now_us(void)
{
	enum { N = 21 };
	struct lk_name n = nm(1, 6);
	uint64_t t[N];

	for (int i = 0; i < N; i++)
		t[i] = remote_once(&n);
	return median_us(t, N);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median_of(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

/* After 5 ms of idleness (the vCPUs halt; waking them is the dominant
 * cost here): one remote grant, then, after another 5 ms, one batch on
 * @names; medians of @runs of each into idle_remote_us, idle_batch_us. */
static void bench_idle(struct lk_name *names, struct lk_lock **lks, int n,
		       int runs)
{
	struct lk_name r = nm(1, 6);
	uint64_t t[16], b[16];

	for (int i = 0; i < runs && i < 16; i++) {
		usleep(5000);
		t[i] = remote_once(&r);
		usleep(5000);
		b[i] = (uint64_t)(batch_once(names, lks, n) * 1000.0);
	}
	idle_remote_us = median_us(t, runs);
	idle_batch_us = median_us(b, runs);
}

/*
 * cold: node 1 has never used the names (master lookups included: a third
 * of the names have node 1 as directory node, the others ask nodes 2 and
 * 3), a fresh set of names per run. warm: the same names again; node 1
 * knows their master (the resources wait on its toss list), node 2 still
 * masters them, no lock is held anywhere in between. Each run follows 21
 * remote grants (remote_now_us) at once, so both see the same load and
 * the same cache and CPU state; the run is also divided by their median:
 * the paired ratios' median. Medians of the runs.
 */
static void bench_batch(double *cold_us, double *warm_us)
{
	enum { N = 1000, RUNS = 9, COLD = 5 };
	static struct lk_name names[N];
	static struct lk_lock *lks[N];
	static uint16_t set;
	uint64_t runs[RUNS], cold[COLD];
	double rw[RUNS], rc[COLD];
	struct lk_name r = nm(1, 6);

	lk_unlock(lock_wait(2, &r, LK_EX), 0); /* node 2 masters it */
	lk_unlock(lock_wait(1, &r, LK_EX), 0); /* node 1 knows that */
	for (int i = 0; i < COLD; i++) {
		double rem;

		set++;
		for (int k = 0; k < N; k++)
			names[k] = nm(2, (uint64_t)set << 32 | (uint64_t)k);
		master_on_2(names, lks, N);
		rem = remote_now_us();
		cold[i] = (uint64_t)(batch_once(names, lks, N) * 1000.0);
		rc[i] = (double)cold[i] / 1000.0 / rem;
	}
	*cold_us = median_us(cold, COLD);
	batch_ratio_cold = median_of(rc, COLD);
	settle_polling();
	warm_backoffs = backoffs();
	/* the machine may be shared: median and best of several runs */
	for (int i = 0; i < RUNS; i++) {
		double rem = remote_now_us();

		runs[i] = (uint64_t)(batch_once(names, lks, N) * 1000.0);
		rw[i] = (double)runs[i] / 1000.0 / rem;
	}
	warm_backoffs = backoffs() - warm_backoffs;
	*warm_us = median_us(runs, RUNS);
	batch_min_us = (double)runs[0] / 1000.0;
	batch_ratio_warm = median_of(rw, RUNS);
	bench_idle(names, lks, N, RUNS);
}

static uint64_t proc_cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) *
		   1000000000ull +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

/* Profiling aid (-b): the CPU time the whole process (all nodes' threads,
 * kernel included) spends on a warm batch, which other load on the
 * machine disturbs less than the elapsed time. */
static void batch_cpu(void)
{
	enum { N = 1000, RUNS = 41 };
	static struct lk_name names[N];
	static struct lk_lock *lks[N];
	uint64_t wall[RUNS], cpu[RUNS];

	for (int i = 0; i < N; i++)
		names[i] = nm(5, (uint64_t)i);
	master_on_2(names, lks, N);
	batch_once(names, lks, N);
	for (int r = 0; r < RUNS; r++) {
		uint64_t c0;

		usleep(5000);
		c0 = proc_cpu_ns();
		wall[r] = (uint64_t)(batch_once(names, lks, N) * 1000.0);
		cpu[r] = proc_cpu_ns() - c0; /* the unlock batch included */
	}
	printf("warm batch: median %.1f us elapsed, %.1f us CPU "
	       "(lock, wait and unlock)\n",
	       median_us(wall, RUNS), median_us(cpu, RUNS));
}

/* Profiling aid (-w): warm batches only, @runs of them, each after the
 * same 5 ms pause as in the table; medians of the elapsed time and of
 * the lk_lock_batch call. */
static void batch_warm_only(int runs)
{
	enum { N = 1000 };
	static struct lk_name names[N];
	static struct lk_lock *lks[N];
	static uint64_t wall[1000], sub[1000];
	struct lk_name r6 = nm(1, 6);

	uint64_t b0;

	if (runs > 1000)
		runs = 1000;
	for (int i = 0; i < N; i++)
		names[i] = nm(5, (uint64_t)i);
	master_on_2(names, lks, N);
	lk_unlock(lock_wait(2, &r6, LK_EX), 0); /* remote_now_us: remote */
	lk_unlock(lock_wait(1, &r6, LK_EX), 0);
	batch_once(names, lks, N);
	b0 = backoffs();
#ifdef LK_TIMELINE
	/* lockmgr/lk_internal.h, enum lk_tl_point */
	extern uint64_t lk_tl[];
	static const char *const step[] = {"call",
					   "early requests written",
					   "... sent",
					   "lkbs built",
					   "lk_lock_batch returns",
					   "master: rx",
					   "master: granted",
					   "master: GRANTS sent",
					   "GRANTS rx",
					   "completed",
					   "lk_wait_batch returns"};
	/* the step each one follows */
	static const int prev[] = {0, 0, 1, 2, 3, 2, 5, 6, 7, 8, 9};
	enum { NSTEP = sizeof(step) / sizeof(step[0]) };
	static uint64_t tl[NSTEP][1000], dt[NSTEP][1000];
#endif
	for (int r = 0; r < runs; r++) {
		remote_now_us(); /* as in the table: no pause */
		wall[r] = (uint64_t)(batch_once(names, lks, N) * 1000.0);
		sub[r] = (uint64_t)(batch_submit_us * 1000.0);
#ifdef LK_TIMELINE
		for (int k = 1; k < NSTEP; k++) {
			uint64_t p = lk_tl[prev[k]];

			tl[k][r] = lk_tl[k] > lk_tl[0] ? lk_tl[k] - lk_tl[0] : 0;
			dt[k][r] = lk_tl[k] > p ? lk_tl[k] - p : 0;
		}
#endif
	}
#ifdef LK_TIMELINE
	for (int k = 1; k < NSTEP; k++)
		printf("  %-24s median %6.1f us from the call, %6.1f us "
		       "after %s\n",
		       step[k], median_us(tl[k], runs), median_us(dt[k], runs),
		       step[prev[k]]);
#endif
	double med = median_us(wall, runs); /* sorts wall */

	printf("  deciles:");
	for (int k = 1; k < 10; k++)
		printf(" %.1f", (double)wall[runs * k / 10] / 1000.0);
	printf(" us\n");
	printf("warm batch: median %.1f us (best %.1f), lk_lock_batch call "
	       "%.1f us, %llu polling back-offs\n",
	       med, (double)wall[0] / 1000.0, median_us(sub, runs),
	       (unsigned long long)(backoffs() - b0));
}

/* ---- 7. throughput ---- */

static atomic_ulong tp_ops;
static atomic_int tp_stop;

static void *tp_main(void *arg)
{
	int id = (int)(intptr_t)arg;
	int node = 1 + id % nnodes;
	uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
	unsigned long ops = 0;

	bind_to_node(node);
	while (!atomic_load(&tp_stop)) {
		struct lk_name n;
		struct lk_lock *lk;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		n = nm(3, x % 1000);
		lk = lock_wait(node, &n, x % 5 == 0 ? LK_EX : LK_PR);
		lk_unlock(lk, 0);
		ops++;
	}
	atomic_fetch_add(&tp_ops, ops);
	return NULL;
}

static double bench_throughput(void)
{
	pthread_t th[64];
	uint64_t t0, t1;
	int n = nthreads > 64 ? 64 : nthreads;

	t0 = now_ns();
	for (int i = 0; i < n; i++)
		pthread_create(&th[i], NULL, tp_main, (void *)(intptr_t)i);
	usleep((useconds_t)(seconds * 1e6));
	atomic_store(&tp_stop, 1);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	t1 = now_ns();
	return (double)atomic_load(&tp_ops) / ((double)(t1 - t0) / 1e9);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: ucfs-lockbench [-n NODES 2..%d] [-t THREADS] "
		"[-s SECONDS] [-P POLL_US] [-F] [-j FILE]\n"
		"       -F: threads free, not one CPU per node\n"
		"       profiling modes, after the options: -r (remote "
		"grants, round trips), -w (warm batches),\n"
		"       -b (batch rows), -p (ping-pong)\n",
		MAXN);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *jpath = NULL;
	double rtt_us, rtt_poll, local, cached, cached_mean, remote, first, pp,
	    cold, warm, tp;
	FILE *jf = stdout;
	int opt;

	while ((opt = getopt(argc, argv, "n:t:s:j:P:Fbprwh")) != -1) {
		switch (opt) {
		case 'p': /* profiling aid: only the ping-pong */
			start_cluster();
			pp = bench_pingpong();
			printf(
			    "pingpong %.0f transfers/s (%lu grants in all)\n",
			    pp, atomic_load(&pp_grants));
			for (int i = 1; i <= 2; i++) {
				struct lk_stats st;

				lk_ls_stats(ls[i], &st);
				printf(
				    "  node %d: %lu local grants, %lu remote, "
				    "%lu waits, %lu blocking callbacks sent\n",
				    i, (unsigned long)st.type[1].c.grants_local,
				    (unsigned long)st.type[1].c.grants_remote,
				    (unsigned long)st.type[1].c.waits,
				    (unsigned long)st.type[1].c.basts_sent);
			}
			stop_cluster();
			return 0;
		case 'w': /* profiling aid: warm batches only */
			start_cluster();
			batch_warm_only(400);
			stop_cluster();
			return 0;
		case 'r': /* profiling aid: remote grants, then rtt */
			rtt_open();
			start_cluster();
			remote_profile();
			rtt_close();
			stop_cluster();
			return 0;
		case 'b': /* profiling aid: only the batch, many times */
			start_cluster();
			for (int i = 0; i < 10; i++) {
				bench_batch(&cold, &warm);
				printf("batch cold %.1f us, warm %.1f us "
				       "(paired: %.1fx, %.1fx)\n",
				       cold, warm, batch_ratio_cold,
				       batch_ratio_warm);
			}
			batch_cpu();
			stop_cluster();
			return 0;
		case 'n':
			nnodes = atoi(optarg);
			break;
		case 't':
			nthreads = atoi(optarg);
			break;
		case 's':
			seconds = atof(optarg);
			break;
		case 'j':
			jpath = optarg;
			break;
		case 'P':
			poll_us = atoi(optarg);
			break;
		case 'F':
			free_threads = 1;
			break;
		default:
			usage();
		}
	}
	if (nnodes < 2 || nnodes > MAXN || nthreads < 1 || seconds <= 0)
		usage();
	rtt_open();
	start_cluster();
	local = bench_local();
	cached = bench_cached(&cached_mean);
	settle_polling();
	remote = bench_remote(&rtt_us, &rtt_poll);
	rtt_close();
	first = bench_first_touch();
	pp = bench_pingpong();
	bench_batch(&cold, &warm);
	tp = bench_throughput();
	stop_cluster();

	if (ncpus != 0)
		printf("placement: one CPU per node (node K on CPU %d + K-1 "
		       "modulo %d; -F: free)\n",
		       cpu_of[0], ncpus);
	else
		printf("placement: threads free (%s)\n",
		       free_threads ? "-F" : "one CPU allowed");
	printf("%-34s %12s %s\n", "measure", "value", "target");
	printf("%-34s %9.2f us\n", "loopback TCP round trip (median)", rtt_us);
	printf("%-34s %9.2f us  (both ends poll first, as lk does)\n",
	       "  the same, polling reads", rtt_poll);
	printf("%-34s %9.3f us\n", "uncached local grant (median)", local);
	printf("%-34s %9.3f us  < 1 us\n", "cached re-acquire (median)",
	       cached);
	printf("%-34s %9.3f us\n", "cached lock+unlock pair (mean)",
	       cached_mean / 1000.0);
	printf("%-34s %9.2f us  <= 2 x rtt = %.2f us (%.2fx; %.2fx the "
	       "polling one)\n",
	       "remote grant (median)", remote, 2 * rtt_us, remote / rtt_us,
	       remote / rtt_poll);
	printf("%-34s %9.2f us  (master lookup + request)\n",
	       "remote grant, first touch", first);
	printf("%-34s %9.0f /s  >= 5000 /s\n", "2-node EX ping-pong transfers",
	       pp);
	printf("%-34s %9.1f us  (%.1fx remote grant)\n",
	       "1000-lock batch, cold (median)", cold, cold / remote);
	printf("%-34s %9.1f us  <= 5 x remote = %.1f us (%.1fx)\n",
	       "1000-lock batch, known (median)", warm, 5 * remote,
	       warm / remote);
	printf("%-34s %9.1f us  (%.1fx remote grant)\n",
	       "1000-lock batch, best of 9", batch_min_us,
	       batch_min_us / remote);
	printf("%-34s %9.1fx warm, %.1fx cold (median of per-run ratios)\n",
	       "  batch / remote grant just before", batch_ratio_warm,
	       batch_ratio_cold);
	printf("%-34s %9llu    (polling switched off: CPU contended)\n",
	       "  back-offs during the warm runs",
	       (unsigned long long)warm_backoffs);
	printf("%-34s %9.1f us  batch %.1f us (%.1fx)\n",
	       "after 5 ms idle: remote grant", idle_remote_us, idle_batch_us,
	       idle_batch_us / idle_remote_us);
	printf("%-34s %9.1f us  (%.1f us on the CPU)\n",
	       "  last run: lk_lock_batch call", batch_submit_us,
	       batch_submit_cpu_us);
	printf("%-34s %9.0f /s  (%d threads, %d nodes, 1000 res)\n",
	       "throughput lock+unlock", tp, nthreads, nnodes);
	if (jpath != NULL) {
		jf = fopen(jpath, "w");
		if (jf == NULL)
			die(jpath, errno);
	}
	fprintf(jf,
		"{\"nodes\": %d, \"threads\": %d, \"cpus_bound\": %d, "
		"\"rtt_us\": %.3f, "
		"\"local_grant_us\": %.3f, \"cached_reacquire_us\": %.3f, "
		"\"cached_pair_mean_us\": %.3f, \"remote_grant_us\": %.3f, "
		"\"remote_over_rtt\": %.3f, \"rtt_polling_us\": %.3f, "
		"\"remote_first_touch_us\": %.3f, "
		"\"pingpong_per_s\": %.0f, "
		"\"batch1000_cold_us\": %.1f, \"batch1000_warm_us\": %.1f, "
		"\"batch_over_remote\": %.2f, \"batch1000_best_us\": %.1f, "
		"\"batch_over_remote_paired_warm\": %.2f, "
		"\"batch_over_remote_paired_cold\": %.2f, "
		"\"poll_backoffs_warm_batches\": %llu, "
		"\"idle_remote_grant_us\": %.3f, \"idle_batch1000_us\": %.1f, "
		"\"throughput_ops_s\": %.0f}\n",
		nnodes, nthreads, ncpus, rtt_us, local, cached,
		cached_mean / 1000.0, remote, remote / rtt_us, rtt_poll, first,
		pp, cold, warm, warm / remote, batch_min_us, batch_ratio_warm,
		batch_ratio_cold, (unsigned long long)warm_backoffs,
		idle_remote_us, idle_batch_us, tp);
	if (jf != stdout)
		fclose(jf);
	return 0;
}
