/*
 * bd_internal.h — what the block-device backends share: the vtable, the
 * common device header and the async worker. Only the blockdev .c files
 * include it.
 *
 * Layering: bd.c is the only entry point. It checks arguments (alignment,
 * bounds, read-only, flags), keeps the counters and then calls the
 * backend through dev->ops, so a backend sees only valid requests:
 * buf non-NULL and BD_ALIGN-aligned, len > 0 and a multiple of BD_ALIGN,
 * off + len <= dev->size, no write on a read-only device, io_flags within
 * BD_IO_FUA, n > 0.
 *
 * A backend embeds struct bd_dev as its first member, fills it with
 * bd_dev_init() and releases it with bd_dev_fini() from its ->close.
 *
 * Locking:
 *   struct bd_dev: ops, name, size, flags are immutable after open; the
 *   counters in stats are atomics (relaxed; they are statistics and order
 *   nothing). Backends document their own locks in their .c files.
 *   struct bd_worker: wk->lock protects the job queue, stop and the
 *   thread handle; a job is owned by the worker from bd_worker_submit()
 *   until its callback has returned.
 *   Lock order (outer first): bd_fault.lock -> lower device's locks ->
 *   bd_file.lock; in bd_nbd, libnbd's handle lock -> bd_nbd.lock (libnbd
 *   calls our completion callback with its lock held; libnbd is never
 *   called with bd_nbd.lock held). The worker lock is never held while
 *   calling out.
 */
#ifndef UCFS_BD_INTERNAL_H
#define UCFS_BD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "blockdev/bd.h"

/*
 * The vtable. All functions get already-validated arguments (above).
 *  read/write: one synchronous I/O; 0 or -errno. write honours BD_IO_FUA.
 *  submit: perform n I/Os, wait for all, set each ios[i].ret; return 0 or
 *	the first -errno.
 *  submit_async: start n I/Os and return; call done(ios, n, arg) exactly
 *	once from a backend thread (never the caller's) when all completed.
 *	0, or -errno if nothing was started (done is then not called).
 *  flush: make completed writes durable.
 *  close: wait for outstanding async I/O, call bd_dev_fini(), free.
 */
struct bd_ops {
	int (*read)(struct bd_dev *dev, void *buf, size_t len, uint64_t off);
	int (*write)(struct bd_dev *dev, const void *buf, size_t len,
		     uint64_t off, unsigned io_flags);
	int (*submit)(struct bd_dev *dev, struct bd_io *ios, unsigned n);
	int (*submit_async)(struct bd_dev *dev, struct bd_io *ios, unsigned n,
			    bd_done_fn done, void *arg);
	int (*flush)(struct bd_dev *dev);
	void (*close)(struct bd_dev *dev);
};

/* Counters of one op; the atomic mirror of struct bd_op_stats. */
struct bd_op_counters {
	_Atomic uint64_t count;
	_Atomic uint64_t bytes;
	_Atomic uint64_t errors;
	_Atomic uint64_t total_ns;
	_Atomic uint64_t max_ns;
	_Atomic uint64_t hist[BD_HIST_BUCKETS];
};

struct bd_counters {
	struct bd_op_counters read;
	struct bd_op_counters write;
	struct bd_op_counters flush;
	_Atomic uint64_t fua_writes;
	_Atomic uint64_t batches;
	_Atomic uint64_t inflight;
	_Atomic uint64_t max_inflight;
	_Atomic uint64_t gate_refused;
};

struct bd_dev {
	const struct bd_ops *ops; /* immutable after open */
	char *name;               /* immutable after open; owned */
	uint64_t size;            /* immutable; a multiple of BD_ALIGN */
	unsigned flags;           /* immutable; BD_RDONLY, BD_BUFFERED ... */
	struct bd_counters stats; /* atomics */
	bd_gate_fn gate;	  /* atomic (__atomic): bd_set_gate */
	void *gate_arg;		  /* atomic: set before gate */
	int fenced;		  /* atomic: bd_fence, never cleared */
	int flush_local;	  /* immutable after open: a flush may not
				   * cover other clients' writes */
};

/* Fill the common header; @name is copied. 0 or -ENOMEM. */
int bd_dev_init(struct bd_dev *dev, const struct bd_ops *ops,
		const char *name, uint64_t size, unsigned flags);
/* Release what bd_dev_init() allocated. */
void bd_dev_fini(struct bd_dev *dev);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bd_now_ns(void);

/*
 * A worker thread that runs async batches through a synchronous submit
 * function, for backends without native async I/O (ram, fault). The
 * thread starts on the first submit; callbacks run on it in FIFO order.
 */
typedef int (*bd_sync_submit_fn)(struct bd_dev *dev, struct bd_io *ios,
				 unsigned n);

struct bd_worker_job;

struct bd_worker {
	pthread_mutex_t lock;
	pthread_cond_t cond;           /* queue non-empty, or empty, or stop */
	struct bd_worker_job *head;    /* protected by lock */
	struct bd_worker_job *tail;    /* protected by lock */
	unsigned busy;                 /* protected by lock: queued+running */
	int started;                   /* protected by lock */
	int stop;                      /* protected by lock */
	pthread_t thread;              /* protected by lock (set once) */
	struct bd_dev *dev;            /* immutable after init */
	bd_sync_submit_fn submit;      /* immutable after init */
};

int bd_worker_init(struct bd_worker *wk, struct bd_dev *dev,
		   bd_sync_submit_fn submit);
/* Queue a batch; 0, -ENOMEM or -EAGAIN (thread could not start). */
int bd_worker_submit(struct bd_worker *wk, struct bd_io *ios, unsigned n,
		     bd_done_fn done, void *arg);
/* Wait until every queued batch has completed, stop the thread. */
void bd_worker_fini(struct bd_worker *wk);

/* The write gate and the fence flag again (bd.h bd_set_gate), for a
 * backend about to issue a write that waited in its queue after
 * bd_submit_async checked it: a node frozen meanwhile past its disk lease
 * must not issue it when it resumes. 0 or -errno. */
int bd_gate_check(struct bd_dev *dev);

#endif /* UCFS_BD_INTERNAL_H */
