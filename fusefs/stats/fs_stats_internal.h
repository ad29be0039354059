/*
 * fs_stats_internal.h — struct bodies of the stats code (fs_stats*.c,
 * fs_trace.c). Nothing outside those files includes this.
 *
 * Locking
 *   1. st->sec_lock: the section list; held while section callbacks run
 *      (so fs_stats_remove_section waits for a running callback).
 *   2. st->info_lock: node identity and mount strings.
 *   3. tr->lock (fs_trace.c): the trace buffer and fd.
 *   Order: sec_lock before info_lock before tr->lock. The op counters
 *   take no lock: relaxed atomics in per-thread shards.
 */
#ifndef UCFS_FS_STATS_INTERNAL_H
#define UCFS_FS_STATS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "fusefs/stats/fs_stats.h"

/* Threads hash to shards by a per-thread index; 16 covers FUSE's default
 * max_threads (10) with few collisions. A collision only costs a shared
 * cache line, never a wrong count. */
#define FS_STATS_SHARDS 16

struct fs_op_shard {
	_Atomic uint64_t count;
	_Atomic uint64_t errors;
	_Atomic uint64_t total_ns;
	_Atomic uint64_t max_ns;
	_Atomic uint64_t hist[FS_HIST_BUCKETS];
};

struct fs_stats_shard {
	struct fs_op_shard ops[FS_OP__COUNT];
} __attribute__((aligned(64)));

struct fs_stats_section {
	char *name;
	fs_stats_section_fn fn;
	void *arg;
	struct fs_stats_section *next;
};

struct fs_stats {
	struct fs_stats_shard *shards; /* [FS_STATS_SHARDS]; atomics */

	pthread_mutex_t sec_lock;
	struct fs_stats_section *sections; /* protected by sec_lock */

	pthread_mutex_t info_lock;
	int node_id;	  /* protected by info_lock */
	int slot;	  /* protected by info_lock */
	char *device;	  /* protected by info_lock */
	char *mountpoint; /* protected by info_lock */
	char *options;	  /* protected by info_lock */

	uint64_t start_mono_ns; /* immutable after init */
	double start_real;	/* immutable after init */

	/* set by fs_stats_set_trace: the trace (flushed by the server) and
	 * the same pointer only if it traces ops (the one hot-path branch) */
	_Atomic(struct fs_trace *) trace;
	_Atomic(struct fs_trace *) trace_ops;

	/* server (fs_stats_srv.c); srv_* written only by serve/stop, which
	 * the owner calls from one thread */
	int srv_running;
	pthread_t srv_thread;
	int srv_fd;	 /* listening socket */
	int srv_stop[2]; /* pipe: write end wakes the thread to quit */
	char *srv_path;
	_Atomic uint64_t srv_served;  /* documents sent */
	_Atomic uint64_t srv_refused; /* peers refused (uid) */
	_Atomic uint64_t srv_errors;  /* render / write failures */
};

/* fs_trace.c: one FUSE op line (called by fs_stats_op_end). */
void fs_trace_op(struct fs_trace *tr, enum fs_op op, uint64_t lat_ns, int err);
/* fs_trace.c: 1 if the trace wants FUSE ops. */
int fs_trace_wants_ops(const struct fs_trace *tr);

#endif /* UCFS_FS_STATS_INTERNAL_H */
