/*
 * stats_fake.c — a stand-in for a mounted ucfs node, for testing the
 * stats server and the tools (ucfs-stat, ucfs-top, ucfs-trace) without a
 * daemon. It owns a real struct fs_stats and serves it; only the workload
 * is simulated.
 *
 *   stats_fake --sock PATH [--node N] [--seed S] [--creates N]
 *              [--rate OPS] [--seconds S] [--trace FILE [--trace-ops]]
 *              [--pingpong MS]
 *
 * --creates N   count exactly N create ops at start (then "ready" is
 *               printed on stdout)
 * --rate OPS    a background thread counts about OPS random ops a second
 *               (lookup/getattr/read/write/create), with random latencies,
 *               and moves the fake blockdev/journal/locks sections
 * --pingpong MS with --trace: simulate a 2-node ping-pong on resource
 *               "inode:4242": node N holds EX in slots of MS ms where
 *               slot % 2 == N % 2, and writes the lock events a real node
 *               would (request, grant, bast_recv, demote, release)
 * --seconds S   exit after S seconds (default: run until SIGTERM/SIGINT)
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fusefs/stats/fs_stats.h"

struct fake {
	struct fs_stats *st;
	struct fs_trace *tr;
	int node;
	uint64_t seed;
	double rate;
	int pingpong_ms;
	_Atomic int stop;
	pthread_mutex_t lock;
	/* fake section state; protected by lock */
	uint64_t bd_reads, bd_writes, bd_rbytes, bd_wbytes, bd_inflight;
	uint64_t commits, flush_fsync, flush_timer, flush_demote;
	uint64_t lk_requests, lk_local, lk_remote, lk_waits, lk_wait_ns;
	uint64_t lk_bast_sent, lk_bast_recv, lk_demotes;
};

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	(void)sig;
	got_signal = 1;
}

static uint64_t rnd(uint64_t *s)
{
	/* xorshift64*: deterministic for a given --seed */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static void sec_blockdev(struct fs_json *o, void *arg)
{
	struct fake *f = arg;
	struct fs_json *r, *w;

	pthread_mutex_lock(&f->lock);
	r = fs_json_obj(o, "read");
	fs_json_u64(r, "count", f->bd_reads);
	fs_json_u64(r, "bytes", f->bd_rbytes);
	w = fs_json_obj(o, "write");
	fs_json_u64(w, "count", f->bd_writes);
	fs_json_u64(w, "bytes", f->bd_wbytes);
	fs_json_u64(o, "inflight", f->bd_inflight);
	pthread_mutex_unlock(&f->lock);
}

static void sec_journal(struct fs_json *o, void *arg)
{
	struct fake *f = arg;
	struct fs_json *fl;

	pthread_mutex_lock(&f->lock);
	fs_json_u64(o, "commits", f->commits);
	fl = fs_json_obj(o, "flush");
	fs_json_u64(fl, "fsync", f->flush_fsync);
	fs_json_u64(fl, "timer", f->flush_timer);
	fs_json_u64(fl, "demote", f->flush_demote);
	fs_json_u64(fl, "full", 0);
	pthread_mutex_unlock(&f->lock);
}

static void sec_locks(struct fs_json *o, void *arg)
{
	struct fake *f = arg;
	struct fs_json *t, *top, *r, *h;

	pthread_mutex_lock(&f->lock);
	t = fs_json_obj(fs_json_obj(o, "types"), "inode");
	fs_json_u64(t, "requests", f->lk_requests);
	fs_json_u64(t, "grants_local", f->lk_local);
	fs_json_u64(t, "grants_remote", f->lk_remote);
	fs_json_u64(t, "waits", f->lk_waits);
	fs_json_u64(t, "wait_ns", f->lk_wait_ns);
	fs_json_u64(t, "bast_sent", f->lk_bast_sent);
	fs_json_u64(t, "bast_recv", f->lk_bast_recv);
	fs_json_u64(t, "demotes", f->lk_demotes);
	top = fs_json_arr(o, "top");
	r = fs_json_obj(top, NULL);
	fs_json_str(r, "res", "inode:4242");
	fs_json_str(r, "type", "inode");
	fs_json_str(r, "mode", "EX");
	fs_json_u64(r, "waits", f->lk_waits);
	fs_json_u64(r, "wait_ns", f->lk_wait_ns);
	h = fs_json_obj(fs_json_arr(r, "holders"), NULL);
	fs_json_i64(h, "node", f->node);
	fs_json_str(h, "mode", "EX");
	h = fs_json_obj(fs_json_arr(r, "waiters"), NULL);
	fs_json_i64(h, "node", f->node == 1 ? 2 : 1);
	fs_json_str(h, "mode", "PR");
	pthread_mutex_unlock(&f->lock);
}

static const enum fs_op mix[] = {
    FS_OP_LOOKUP, FS_OP_LOOKUP, FS_OP_GETATTR, FS_OP_GETATTR,
    FS_OP_READ,	  FS_OP_WRITE,	FS_OP_WRITE,   FS_OP_CREATE,
};

static void fake_one_op(struct fake *f, uint64_t *s)
{
	enum fs_op op = mix[rnd(s) % (sizeof(mix) / sizeof(mix[0]))];
	uint64_t lat = 1000 + rnd(s) % 200000; /* 1..201 us */

	/* the op "started" lat ns ago */
	fs_stats_op_end(f->st, op, fs_stats_now() - lat,
			op == FS_OP_LOOKUP && rnd(s) % 4 == 0 ? -ENOENT : 0);
	pthread_mutex_lock(&f->lock);
	if (op == FS_OP_READ) {
		f->bd_reads++;
		f->bd_rbytes += 65536;
	} else if (op == FS_OP_WRITE || op == FS_OP_CREATE) {
		f->bd_writes++;
		f->bd_wbytes += 4096;
		f->commits += rnd(s) % 8 == 0;
		f->flush_timer += rnd(s) % 16 == 0;
	}
	f->bd_inflight = rnd(s) % 4;
	f->lk_requests++;
	f->lk_local++;
	pthread_mutex_unlock(&f->lock);
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000u),
			      (long)(ns % 1000000000u)};

	nanosleep(&ts, NULL);
}

static void *workload(void *arg)
{
	struct fake *f = arg;
	uint64_t s = f->seed | 1;
	uint64_t gap = (uint64_t)(1e9 / f->rate) * 10; /* 10 ops a tick */

	while (!atomic_load(&f->stop)) {
		for (int i = 0; i < 10; i++)
			fake_one_op(f, &s);
		sleep_ns(gap);
	}
	return NULL;
}

static void trace_ev(struct fake *f, enum fs_trace_ev ev, int mode, int from,
		     uint64_t wait_ns)
{
	struct fs_trace_lock e = {
	    .ev = ev,
	    .type = "inode",
	    .res = "inode:4242",
	    .mode = mode,
	    .from = from,
	    .peer = f->node == 1 ? 2 : 1,
	    .remote = ev == FS_TR_GRANT,
	    .wait_ns = wait_ns,
	};

	if (FS_TRACE_ON(f->tr))
		fs_trace_lock(f->tr, &e);
}

/* Wall-clock slots of pingpong_ms: ours when slot % 2 == node % 2. */
static void *pingpong(void *arg)
{
	struct fake *f = arg;
	uint64_t ms = (uint64_t)f->pingpong_ms;

	while (!atomic_load(&f->stop)) {
		struct timespec ts;
		uint64_t now_ms, slot, t_req;

		clock_gettime(CLOCK_REALTIME, &ts);
		now_ms =
		    (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
		slot = now_ms / ms;
		if (slot % 2 != (uint64_t)(f->node % 2)) {
			/* the peer's slot: ask now, get it at our slot */
			t_req = fs_stats_now();
			trace_ev(f, FS_TR_REQUEST, FS_LK_EX, FS_LK_NL, 0);
			pthread_mutex_lock(&f->lock);
			f->lk_bast_sent++;
			pthread_mutex_unlock(&f->lock);
			sleep_ns(((slot + 1) * ms - now_ms) * 1000000);
			trace_ev(f, FS_TR_GRANT, FS_LK_EX, FS_LK_NL,
				 fs_stats_now() - t_req);
			pthread_mutex_lock(&f->lock);
			f->lk_requests++;
			f->lk_remote++;
			f->lk_waits++;
			f->lk_wait_ns += fs_stats_now() - t_req;
			pthread_mutex_unlock(&f->lock);
			continue;
		}
		/* our slot: hold until its end, then the peer's callback */
		sleep_ns(((slot + 1) * ms - now_ms) * 1000000);
		trace_ev(f, FS_TR_BAST_RECV, FS_LK_EX, FS_LK_EX, 0);
		trace_ev(f, FS_TR_DEMOTE, FS_LK_NL, FS_LK_EX, 0);
		trace_ev(f, FS_TR_RELEASE, FS_LK_NL, FS_LK_EX, ms * 1000000);
		pthread_mutex_lock(&f->lock);
		f->lk_bast_recv++;
		f->lk_demotes++;
		f->flush_demote++;
		pthread_mutex_unlock(&f->lock);
	}
	return NULL;
}

static int fake_sections(struct fake *f)
{
	int ret = fs_stats_add_section(f->st, "blockdev", sec_blockdev, f);

	if (ret == 0)
		ret = fs_stats_add_section(f->st, "journal", sec_journal, f);
	if (ret == 0)
		ret = fs_stats_add_section(f->st, "locks", sec_locks, f);
	return ret;
}

int main(int argc, char **argv)
{
	struct fake f = {.node = 1, .seed = 1};
	const char *sock = NULL, *trace = NULL;
	unsigned tflags = 0;
	long creates = 0;
	double seconds = 0;
	pthread_t wl, pp;
	int ret;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--trace-ops") == 0) {
			tflags |= FS_TRACE_OPS;
			continue;
		}
		if (v == NULL) {
			fprintf(stderr, "stats_fake: %s needs a value\n", a);
			return 2;
		}
		i++;
		if (strcmp(a, "--sock") == 0)
			sock = v;
		else if (strcmp(a, "--node") == 0)
			f.node = atoi(v);
		else if (strcmp(a, "--seed") == 0)
			f.seed = strtoull(v, NULL, 0);
		else if (strcmp(a, "--creates") == 0)
			creates = atol(v);
		else if (strcmp(a, "--rate") == 0)
			f.rate = atof(v);
		else if (strcmp(a, "--seconds") == 0)
			seconds = atof(v);
		else if (strcmp(a, "--trace") == 0)
			trace = v;
		else if (strcmp(a, "--pingpong") == 0)
			f.pingpong_ms = atoi(v);
		else {
			fprintf(stderr, "stats_fake: unknown option %s\n", a);
			return 2;
		}
	}
	if (sock == NULL) {
		fprintf(stderr, "stats_fake: --sock PATH is required\n");
		return 2;
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	pthread_mutex_init(&f.lock, NULL);
	if (fs_stats_new(&f.st) != 0)
		return 1;
	fs_stats_set_node(f.st, f.node, f.node - 1);
	fs_stats_set_mount(f.st, "fake.img", "/fake", "rw,lockproto=fake");
	ret = fake_sections(&f);
	if (ret == 0 && trace != NULL)
		ret = fs_trace_open(trace, f.node, tflags, &f.tr);
	if (ret == 0) {
		fs_stats_set_trace(f.st, f.tr);
		ret = fs_stats_serve(f.st, sock);
	}
	if (ret != 0) {
		fprintf(stderr, "stats_fake: %s\n", strerror(-ret));
		return 1;
	}
	for (long i = 0; i < creates; i++)
		fs_stats_op_end(f.st, FS_OP_CREATE, fs_stats_op_begin(), 0);
	if (f.rate > 0)
		pthread_create(&wl, NULL, workload, &f);
	if (f.pingpong_ms > 0)
		pthread_create(&pp, NULL, pingpong, &f);
	printf("ready %s\n", sock);
	fflush(stdout);
	for (double t = 0; !got_signal && (seconds <= 0 || t < seconds);
	     t += 0.05)
		sleep_ns(50000000);
	atomic_store(&f.stop, 1);
	if (f.rate > 0)
		pthread_join(wl, NULL);
	if (f.pingpong_ms > 0)
		pthread_join(pp, NULL);
	fs_stats_stop(f.st);
	fs_stats_set_trace(f.st, NULL);
	fs_trace_close(f.tr);
	fs_stats_free(f.st);
	return 0;
}
