/*
 * glock_bench.c — the glock engine (fusefs/cluster/fs_glock.h) at unit level,
 * over three real lockspaces in this process (loopback TCP, as test_glock.c).
 *
 *   glock_bench [-n TOUCH] [-m MAX] [-s SECONDS]
 *
 * Rows, each measured in this one run (tools/BENCH.md "glock_bench"):
 *   touch     node 1 takes PR on TOUCH (100,000) fresh inode glocks, one
 *             after the other (get, acquire, release, put), with the LRU
 *             bound at MAX (10,000), then again on a second engine with
 *             no bound: rate, glocks left in the table, the engine's
 *             memory (fs_glocks_stats bytes_now), RSS growth, and the
 *             lock manager's resources once its toss time (set to 1 s
 *             here) passed. Nothing else runs meanwhile.
 *   hits      cached hits on 1,000 glocks node 1 holds: get + acquire +
 *             release + put (the lookup included), and acquire + release
 *             on glocks the caller keeps a reference to; 1 and 2 threads;
 *             beside them, the lock manager's own hold-cache re-acquire
 *             (lk_lock + lk_unlock(LK_UNLOCK_CACHE)) as the yardstick.
 *   bounce    one thread on node 1 and one on node 2 take EX on one glock
 *             in turn for SECONDS: transfers (demotes of either node) per
 *             second, with minhold 0 and with the default 5 ms (adaptive);
 *             each thread either loops at once (its cached hits keep a
 *             CPU busy, which the lock manager's and the engine's threads
 *             then wait for) or sleeps 20 us after each release (as a
 *             holder doing I/O would); beside them, the same with bare
 *             lk_lock/lk_wait/lk_unlock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fusefs/cluster/fs_glock.h"
#include "lockmgr/lk.h"
#include "tests/unit/glock_util.h"
#include "tests/unit/lk_local.h"

static struct lk_ls *ls[3];

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* "VmRSS:" or "VmHWM:" of this process, KiB. */
static long proc_kb(const char *key)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, key, strlen(key)) == 0)
			v = strtol(line + strlen(key), NULL, 10);
	fclose(f);
	return v;
}

/* The three nodes (tests/unit/lk_local.h), ls[i] = node i + 1; the
 * lock manager's toss time 1 s (touch_row waits for it). */
static int setup(void)
{
	if (lkl_open(3, 3, "\"toss_ms\":1000,", 5000) < 0 ||
	    lkl_full(3, 20000) < 0)
		return -1;
	for (int i = 0; i < 3; i++)
		ls[i] = lkl_ls[i + 1];
	return 0;
}

static struct fs_glocks *engine(int node, unsigned max, unsigned minhold)
{
	struct fs_glocks_conf c = {
	    .max = max, .workers = 2, .minhold_ms = minhold};
	struct fs_glocks *e;

	if (fs_glocks_new(ls[node], &c, &e) < 0)
		exit(1);
	return e;
}

static uint64_t resources(int node)
{
	struct lk_stats *s = malloc(sizeof(*s));
	uint64_t r;

	if (s == NULL)
		return 0;
	lk_ls_stats(ls[node], s);
	r = s->resources;
	free(s);
	return r;
}

/* ---- touch -------------------------------------------------------------- */

static void touch_row(const char *what, unsigned n, unsigned max, uint64_t base)
{
	struct fs_glocks *e = engine(0, max, 0);
	struct fs_glocks_stats s;
	struct timespec toss = {1, 500000000}; /* toss_ms + 0.5 s */
	long rss0 = proc_kb("VmRSS:"), rss1;
	double t0 = now_s(), t;

	for (unsigned i = 0; i < n; i++)
		if (touch(e, base + i, LK_PR) < 0)
			exit(1);
	t = now_s() - t0;
	for (int w = 0; w < 500; w++) { /* let the workers finish */
		struct timespec ts = {0, 10000000};

		fs_glocks_stats(e, &s);
		if (s.queued_now == 0 && (max == 0 || s.glocks_now <= max))
			break;
		nanosleep(&ts, NULL);
	}
	rss1 = proc_kb("VmRSS:");
	fs_glocks_stats(e, &s);
	nanosleep(&toss, NULL);
	printf("touch %-7s %6u glocks in %5.2f s: %6.0f /s; table %6llu, "
	       "evicted %6llu, engine %6llu KiB; RSS +%6ld KiB; lk "
	       "resources 1.5 s later %llu\n",
	       what, n, t, n / t, (unsigned long long)s.glocks_now,
	       (unsigned long long)s.total.evictions,
	       (unsigned long long)s.bytes_now / 1024, rss1 - rss0,
	       (unsigned long long)resources(0));
	fs_glocks_free(e);
}

/* ---- hits --------------------------------------------------------------- */

struct hit_arg {
	struct fs_glocks *e;
	struct fs_glock **gl; /* NULL: get/put each time */
	unsigned ngl, iters, seed;
	double secs;
};

static void *hit_main(void *arg)
{
	struct hit_arg *h = arg;
	unsigned x = h->seed;
	double t0 = now_s();

	for (unsigned i = 0; i < h->iters; i++) {
		struct fs_glock *gl;
		unsigned k;

		x = x * 1103515245u + 12345u;
		k = (x >> 8) % h->ngl;
		if (h->gl != NULL)
			gl = h->gl[k];
		else if (fs_glock_get(h->e, T_INODE, 1000000 + k, &gl) < 0)
			exit(1);
		if (fs_glock_acquire(gl, LK_PR) < 0)
			exit(1);
		fs_glock_release(gl, LK_PR);
		if (h->gl == NULL)
			fs_glock_put(gl);
	}
	h->secs = now_s() - t0;
	return NULL;
}

static double hit_run(struct fs_glocks *e, struct fs_glock **gl, unsigned ngl,
		      unsigned threads, unsigned iters)
{
	struct hit_arg h[2];
	pthread_t t[2];
	double ops = 0;

	for (unsigned i = 0; i < threads; i++) {
		h[i] = (struct hit_arg){e, gl, ngl, iters, i * 7919 + 1, 0};
		pthread_create(&t[i], NULL, hit_main, &h[i]);
	}
	for (unsigned i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		ops += iters / h[i].secs;
	}
	return ops;
}

static double lk_cache_rate(unsigned iters)
{
	struct lk_lock *lk;
	struct lk_name n;
	double t0;

	lk_name_make(&n, 9, 1, NULL);
	if (lk_lock(ls[0], &n, LK_PR, 0, NULL, NULL, &lk) < 0 || lk_wait(lk))
		exit(1);
	lk_unlock(lk, LK_UNLOCK_CACHE);
	t0 = now_s();
	for (unsigned i = 0; i < iters; i++) {
		if (lk_lock(ls[0], &n, LK_PR, 0, NULL, NULL, &lk) !=
		    LK_GRANTED_NOW)
			exit(1);
		lk_unlock(lk, LK_UNLOCK_CACHE);
	}
	return iters / (now_s() - t0);
}

static void hits_rows(void)
{
	enum { NGL = 1000, ITERS = 2000000 };
	struct fs_glocks *e = engine(0, 10000, 0);
	struct fs_glock **gl = calloc(NGL, sizeof(*gl));

	for (unsigned k = 0; k < NGL; k++)
		if (gl == NULL || touch(e, 1000000 + k, LK_PR) < 0 ||
		    fs_glock_get(e, T_INODE, 1000000 + k, &gl[k]) < 0)
			exit(1);
	printf("hits get+acquire+release+put: 1 thread %9.0f /s, "
	       "2 threads %9.0f /s\n",
	       hit_run(e, NULL, NGL, 1, ITERS),
	       hit_run(e, NULL, NGL, 2, ITERS));
	printf("hits acquire+release (ref kept): 1 thread %9.0f /s, "
	       "2 threads %9.0f /s\n",
	       hit_run(e, gl, NGL, 1, ITERS), hit_run(e, gl, NGL, 2, ITERS));
	printf("yardstick lk hold-cache re-acquire (lk_lock + "
	       "lk_unlock(CACHE)): %9.0f /s\n",
	       lk_cache_rate(ITERS));
	for (unsigned k = 0; k < NGL; k++)
		fs_glock_put(gl[k]);
	free(gl);
	fs_glocks_free(e);
}

/* ---- bounce ------------------------------------------------------------- */

struct bounce_arg {
	struct fs_glock *gl; /* NULL: bare lk */
	int node;
	unsigned pause_us; /* sleep after each release */
	double until;
	uint64_t acquires;
};

static void *bounce_main(void *arg)
{
	struct bounce_arg *b = arg;
	struct lk_name n;

	lk_name_make(&n, 9, 2, NULL);
	while (now_s() < b->until) {
		struct lk_lock *lk;

		if (b->gl != NULL) {
			if (fs_glock_acquire(b->gl, LK_EX) < 0)
				exit(1);
			fs_glock_release(b->gl, LK_EX);
		} else {
			if (lk_lock(ls[b->node], &n, LK_EX, 0, NULL, NULL,
				    &lk) < 0 ||
			    lk_wait(lk) != 0)
				exit(1);
			lk_unlock(lk, 0);
		}
		b->acquires++;
		if (b->pause_us > 0) {
			struct timespec ts = {0, (long)b->pause_us * 1000};

			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

static void bounce_row(unsigned minhold, unsigned pause_us, double secs)
{
	struct fs_glocks *e[2];
	struct fs_glock *gl[2] = {NULL, NULL};
	struct bounce_arg b[2];
	pthread_t t[2];
	uint64_t demotes = 0;

	for (int i = 0; i < 2 && minhold != ~0u; i++) {
		e[i] = engine(i, 0, minhold);
		if (fs_glock_get(e[i], T_INODE, 77, &gl[i]) < 0)
			exit(1);
	}
	for (int i = 0; i < 2; i++) {
		b[i] =
		    (struct bounce_arg){gl[i], i, pause_us, now_s() + secs, 0};
		pthread_create(&t[i], NULL, bounce_main, &b[i]);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 2 && minhold != ~0u; i++) {
		struct fs_glock_stats s;

		fs_glock_stats_get(gl[i], &s);
		demotes += s.demote_nl + s.demote_pr;
		fs_glock_put(gl[i]);
		fs_glocks_free(e[i]);
	}
	if (minhold == ~0u)
		printf("bounce bare lk_lock+lk_wait+lk_unlock, pause %2u us: "
		       "%8.0f locks/s (%llu + %llu)\n",
		       pause_us, (b[0].acquires + b[1].acquires) / secs,
		       (unsigned long long)b[0].acquires,
		       (unsigned long long)b[1].acquires);
	else
		printf("bounce glock minhold %u ms, pause %2u us: %8.0f "
		       "transfers/s, %8.0f acquires/s (%llu + %llu)\n",
		       minhold, pause_us, demotes / secs,
		       (b[0].acquires + b[1].acquires) / secs,
		       (unsigned long long)b[0].acquires,
		       (unsigned long long)b[1].acquires);
}

int main(int argc, char **argv)
{
	unsigned n = 100000, max = 10000;
	double secs = 3;
	int opt;

	while ((opt = getopt(argc, argv, "n:m:s:")) != -1) {
		if (opt == 'n')
			n = (unsigned)atoi(optarg);
		else if (opt == 'm')
			max = (unsigned)atoi(optarg);
		else if (opt == 's')
			secs = atof(optarg);
		else
			return 2;
	}
	if (setup() < 0) {
		fprintf(stderr, "glock_bench: cannot start the lockspaces\n");
		return 1;
	}
	printf("RSS at start %ld KiB\n", proc_kb("VmRSS:"));
	touch_row("bounded", n, max, 0);
	touch_row("no bound", n, 0, 10000000);
	hits_rows();
	bounce_row(0, 0, secs);
	bounce_row(0, 20, secs);
	bounce_row(5, 20, secs);
	bounce_row(~0u, 0, secs);
	bounce_row(~0u, 20, secs);
	printf("peak RSS %ld KiB\n", proc_kb("VmHWM:"));
	lkl_close();
	return 0;
}
