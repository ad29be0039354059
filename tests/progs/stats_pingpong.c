/*
 * stats_pingpong.c — a 2-node lock ping-pong over the real DLM (two
 * lockspaces in one process, talking TCP on 127.0.0.1), each node with
 * its own struct fs_stats ("locks" and "net" sections from lk), its own
 * socket and its own trace. It plays the part of the glock layer that
 * ucfs's cluster mode will have: it traces request, grant, bast_recv,
 * demote and release around lk calls (fs_trace_lock).
 *
 *   stats_pingpong --dir DIR [--rounds N] [--port P] [--hold-us U]
 *
 * Writes DIR/cluster.json and DIR/secret, serves DIR/n1.sock and
 * DIR/n2.sock, traces to DIR/n1.trace and DIR/n2.trace. Each node loops N
 * times: request EX on "inode:4242", hold it until the other node's
 * request arrives as a blocking callback, release. So the lock moves
 * 2N-1 times and each node receives about N blocking callbacks. Prints
 * "ready" when done and keeps serving until SIGTERM/SIGINT.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fusefs/stats/fs_stats.h"
#include "lockmgr/lk.h"

#define RES_TYPE 1
#define RES_NUM 4242

struct node {
	uint32_t id;
	struct lk_ls *ls;
	struct fs_stats *st;
	struct fs_stats_lk *lkst;
	struct fs_trace *tr;
	atomic_int bast;      /* a blocking callback arrived */
	atomic_int bast_mode; /* the mode it asked for */
	atomic_int done;      /* finished all rounds */
	struct node *other;
	int rounds;
	int hold_us;
	int failed;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static const char *type_name(unsigned type)
{
	return type == RES_TYPE ? "inode" : NULL;
}

static void on_blocking(struct lk_lock *lk, int mode, void *arg)
{
	struct node *n = arg;

	(void)lk;
	atomic_store(&n->bast_mode, mode);
	atomic_store(&n->bast, 1);
}

static const struct lk_lock_ops ops = {NULL, on_blocking};

static void trace(struct node *n, enum fs_trace_ev ev, int mode, int from,
		  uint64_t ns)
{
	struct fs_trace_lock e = {
	    .ev = ev,
	    .type = "inode",
	    .res = "inode:4242",
	    .mode = mode,
	    .from = from,
	    .peer = (int)n->other->id,
	    .remote = ev == FS_TR_GRANT,
	    .wait_ns = ns,
	};

	if (FS_TRACE_ON(n->tr))
		fs_trace_lock(n->tr, &e);
}

static void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

/* Hold until the other node wants the lock (or has finished). */
static void hold(struct node *n)
{
	sleep_us(n->hold_us);
	while (!atomic_load(&n->bast) && !atomic_load(&n->other->done) && !stop)
		sleep_us(50);
}

static void *node_main(void *arg)
{
	struct node *n = arg;
	struct lk_name name;

	lk_name_make(&name, RES_TYPE, RES_NUM, NULL);
	for (int r = 0; r < n->rounds && !stop; r++) {
		struct lk_lock *lk;
		uint64_t t0 = fs_stats_now(), t1;
		int ret;

		trace(n, FS_TR_REQUEST, FS_LK_EX, FS_LK_NL, 0);
		atomic_store(&n->bast, 0);
		ret = lk_lock(n->ls, &name, LK_EX, 0, &ops, n, &lk);
		if (ret == 0)
			ret = lk_wait(lk);
		if (ret < 0) {
			fprintf(stderr, "node %u: lock: %s\n", n->id,
				strerror(-ret));
			n->failed = 1;
			break;
		}
		t1 = fs_stats_now();
		trace(n, FS_TR_GRANT, FS_LK_EX, FS_LK_NL, t1 - t0);
		if (ret == 0) /* queued: it waited */
			fs_stats_lk_note_wait(n->lkst, &name, LK_EX, t1 - t0);
		hold(n);
		if (atomic_load(&n->bast))
			trace(n, FS_TR_BAST_RECV, atomic_load(&n->bast_mode),
			      FS_LK_EX, 0);
		trace(n, FS_TR_DEMOTE, FS_LK_NL, FS_LK_EX, 0);
		ret = lk_unlock(lk, 0);
		trace(n, FS_TR_RELEASE, FS_LK_NL, FS_LK_EX,
		      fs_stats_now() - t1);
		if (ret < 0) {
			fprintf(stderr, "node %u: unlock: %s\n", n->id,
				strerror(-ret));
			n->failed = 1;
			break;
		}
	}
	atomic_store(&n->done, 1);
	return NULL;
}

static int write_config(const char *dir, int port)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/secret", dir);
	f = fopen(path, "w");
	if (f == NULL)
		return -errno;
	fprintf(f, "stats-pingpong-test-secret-0123456789\n");
	fclose(f);
	snprintf(path, sizeof(path), "%s/cluster.json", dir);
	f = fopen(path, "w");
	if (f == NULL)
		return -errno;
	fprintf(f,
		"{\"cluster\":\"statspp\",\"secret_file\":\"%s/secret\","
		"\"heartbeat_ms\":100,\"timeout_ms\":2000,\"nodes\":["
		"{\"id\":1,\"addr\":\"127.0.0.1\",\"port\":%d},"
		"{\"id\":2,\"addr\":\"127.0.0.1\",\"port\":%d}]}\n",
		dir, port, port + 1);
	fclose(f);
	return 0;
}

static int node_open(struct node *n, const char *dir)
{
	char path[4096];
	struct lk_ls_config cfg = {0};
	int ret;

	snprintf(path, sizeof(path), "%s/cluster.json", dir);
	cfg.cluster_file = path;
	cfg.nodeid = n->id;
	ret = lk_ls_open(&cfg, &n->ls);
	if (ret < 0)
		return ret;
	ret = fs_stats_new(&n->st);
	if (ret < 0)
		return ret;
	fs_stats_set_node(n->st, (int)n->id, (int)n->id - 1);
	ret = fs_stats_add_locks(n->st, n->ls, type_name, &n->lkst);
	if (ret < 0)
		return ret;
	snprintf(path, sizeof(path), "%s/n%u.trace", dir, n->id);
	ret = fs_trace_open(path, (int)n->id, 0, &n->tr);
	if (ret < 0)
		return ret;
	fs_stats_set_trace(n->st, n->tr);
	snprintf(path, sizeof(path), "%s/n%u.sock", dir, n->id);
	return fs_stats_serve(n->st, path);
}

static void node_close(struct node *n)
{
	fs_stats_stop(n->st);
	fs_stats_remove_locks(n->st, n->lkst);
	fs_stats_set_trace(n->st, NULL);
	fs_trace_close(n->tr);
	fs_stats_free(n->st);
	lk_ls_close(n->ls);
}

int main(int argc, char **argv)
{
	struct node nodes[2] = {{.id = 1}, {.id = 2}};
	const char *dir = NULL;
	int rounds = 50, hold_us = 200, port = 0, ret;
	pthread_t th[2];

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--dir") == 0)
			dir = argv[i + 1];
		else if (strcmp(argv[i], "--rounds") == 0)
			rounds = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--port") == 0)
			port = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--hold-us") == 0)
			hold_us = atoi(argv[i + 1]);
	}
	if (dir == NULL || rounds < 1) {
		fprintf(stderr, "usage: stats_pingpong --dir DIR [--rounds N] "
				"[--port P] [--hold-us U]\n");
		return 2;
	}
	if (port == 0)
		port = 20000 + (int)(getpid() % 20000) * 2;
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	ret = write_config(dir, port);
	for (int i = 0; ret == 0 && i < 2; i++) {
		nodes[i].other = &nodes[1 - i];
		nodes[i].rounds = rounds;
		nodes[i].hold_us = hold_us;
		ret = node_open(&nodes[i], dir);
	}
	for (int i = 0; ret == 0 && i < 2; i++)
		ret = lk_ls_wait_quorum(nodes[i].ls, 10000);
	if (ret < 0) {
		fprintf(stderr, "stats_pingpong: setup: %s\n", strerror(-ret));
		return 1;
	}
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, node_main, &nodes[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	if (nodes[0].failed || nodes[1].failed)
		return 1;
	fs_trace_flush(nodes[0].tr);
	fs_trace_flush(nodes[1].tr);
	printf("ready\n");
	fflush(stdout);
	while (!stop)
		sleep_us(50000);
	for (int i = 0; i < 2; i++)
		node_close(&nodes[i]);
	return 0;
}
