/*
 * fs_glock_internal.h — the bodies of the glock engine's structs, shared
 * by fs_glock.c (one glock's state machine) and fs_glocks.c (the table,
 * the LRU, the demote workers, stats). Nothing else includes this.
 *
 * Locking (numbered: take a lower number before a higher one):
 *   1. e->mu (fs_glocks.c): the table, the LRU, the job queues, every
 *      glock's reference count and queue flags, the engine's flags.
 *   2. gl->mu (fs_glock.c): one glock's state (mode, holders, busy,
 *      demote, counters). Taken under e->mu only to (re)initialise a
 *      glock, to fence it, to read its counters, to claim it for a
 *      lock-ahead batch (fs_glock_ahead_claim) and to ask an idle
 *      one to demote ahead (fs_glock_ahead_one); code that holds
 *      gl->mu never takes e->mu (it lets gl->mu go first: fs_glock.c's
 *      kick()).
 *   3. the DLM's lockspace lock (lk_lvb_get/lk_lvb_set/lk_lock/lk_unlock
 *      under gl->mu), the trace buffer's lock and the contention
 *      tracker's lock (fs_trace_lock, fs_stats_lk_note_wait under gl->mu):
 *      leaves. The DLM calls our callbacks with none of its locks held.
 * No lock is held while an op (sync, inval, recover, drop) runs.
 *
 * Memory: a glock's struct is never given back to malloc while the engine
 * lives: a dropped glock goes to the engine's free list and may be reused
 * for another name. A blocking callback of a lock this node has already
 * unlocked can still run (lk.h, lk_unlock); it finds gl->lk different
 * from its lock (the DLM keeps that lock's memory until the callback
 * returns, so no new lock can have its address) and does nothing.
 */
#ifndef UCFS_FS_GLOCK_INTERNAL_H
#define UCFS_FS_GLOCK_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "fusefs/cluster/fs_glock.h"
#include "fusefs/stats/fs_stats.h"
#include "lockmgr/lk.h"

/* One glock's counters, copied out into struct fs_glock_stats (the same
 * meanings; per mode only PR [0] and EX [1]: holders use nothing else).
 * Kept small: the engine holds up to conf.max of them. Events that
 * come at most once per lock request, transfer or lock-ahead batch of
 * the glock are 32-bit (4 billion of them on one glock; the engine adds
 * a dropped glock's into 64-bit totals); acquires, hits, tries and
 * times 64-bit. */
struct fs_glock_counts {
	uint64_t acquires, hits, requests, try_fails, waits;
	uint64_t demote_ns, wait_ns, max_wait_ns, generation;
	uint64_t mode_acquires[2], mode_wait_ns[2], mode_max_ns[2];
	uint32_t retries, demote_pr, demote_nl;
	uint32_t invals, recovers, drops, syncs, bounces, hold_refusals;
	uint32_t minhold_grows, minhold_shrinks, evict_syncs;
	uint32_t bad_releases, flushes, aheads, gen_kept;
	uint32_t ahead_requests, ahead_grants, ahead_hits, ahead_unused;
	uint32_t mode_failed[2];
};

/* A job queue: glocks chained by qnext, first in first out. */
struct gl_fifo {
	struct fs_glock *head;
	struct fs_glock **tail; /* &head when empty */
	size_t n;
};

struct fs_glocks_job {
	uint64_t due; /* CLOCK_MONOTONIC ns */
	struct fs_glock *gl;
};

/* A node's streak of blocking callbacks on idle PR glocks: demote-ahead
 * sweeps from the second on (fs_glocks.c GL_AHEAD_STREAK_NS); an engine
 * follows the GL_AHEAD_PEERS nodes that asked last. */
#define GL_AHEAD_PEERS 4
struct gl_streak {
	uint64_t last_ns; /* its last callback; 0: slot free */
	int peer;	  /* the node, -1 unknown */
	unsigned n;	  /* callbacks of the streak before the last */
};

struct fs_glocks {
	struct lk_ls *ls;	    /* immutable */
	struct fs_glocks_conf conf; /* immutable */
	uint64_t base_ns;	    /* immutable: conf.minhold_ms */
	uint64_t gen_seed;	    /* atomic: random_gen's state */
	/* set before the first get (set_ops, set_trace): */
	struct {
		const struct fs_glock_ops *ops;
		void *arg;
	} type[FS_GLOCK_TYPES];
	struct fs_trace *tr;
	const char *(*type_name)(unsigned type);
	struct fs_stats_lk *lkst;

	pthread_mutex_t mu;
	pthread_cond_t wcv;	      /* workers: a job came, stop */
	pthread_cond_t idle_cv;	      /* a worker ended */
	struct fs_glock **bucket;     /* mu: hash chains */
	size_t nbucket;		      /* mu */
	size_t count;		      /* mu: glocks in the table */
	size_t nevict;		      /* mu: ... of them picked for dropping */
	struct lk_list lru;	      /* mu: idle glocks, oldest first */
	size_t nidle;		      /* mu: on the LRU */
	struct lk_list plru;	      /* mu: glocks only a pin keeps (the
					 kernel holds the inode, nobody uses
					 it), least recently used first */
	size_t npidle;		      /* mu: on plru */
	size_t npinned;		      /* mu: glocks pinned */
	int prune_off;		      /* mu: the pins' owner does not bound
					 them (fs_glocks_set_pruned): the
					 bound drops them */
	uint64_t pin_drops;	      /* mu: pins dropped by the engine */
	struct fs_glock *free;	      /* mu: dropped structs, for reuse */
	size_t nalloc;		      /* mu: structs allocated (table + free) */
	struct gl_fifo ready;	      /* mu: jobs to run now */
	struct gl_fifo later;	      /* mu: demote-ahead jobs, run when
					 nothing else is due */
	struct fs_glocks_job *delayed; /* mu: min-heap by due */
	size_t ndelayed, delayed_cap;  /* mu */
	pthread_t *workers;	       /* immutable after new */
	unsigned nworkers;	       /* immutable after new */
	unsigned alive;		       /* mu: workers not yet ended */
	uint64_t jobs;		       /* mu: jobs run */
	uint64_t ahead_unlock_calls;   /* mu: lockspace calls that unlocked
					  demote-ahead jobs (run_aheads) */
	struct gl_streak ahead[GL_AHEAD_PEERS]; /* mu: the streaks of the
						   nodes that asked last */
	uint64_t ahead_widened;	       /* mu: passes wider than ahead_span */
	uint64_t ahead_unswept;	       /* mu: passes that started a streak */
	struct fs_glock_stats gone[FS_GLOCK_TYPES]; /* mu: counters of
						       freed glocks */
	uint64_t ahead_batches[FS_GLOCK_TYPES];	    /* mu: lock-ahead
						       batches sent */
	uint64_t ahead_ns[FS_GLOCK_TYPES];	    /* mu: ... time in them */
	int fenced;				    /* mu */
	int stopping;				    /* mu */
};

enum { GQ_NOW = 1, GQ_LATER = 2 }; /* fs_glock.queued */
enum { GL_IDLE = 1, GL_PIDLE = 2 }; /* fs_glock.on_lru */

struct fs_glock {
	struct fs_glocks *e; /* immutable */
	/* e->mu, and gl->mu too where marked (+): */
	struct lk_name name;		/* + set at (re)init */
	const struct fs_glock_ops *ops; /* + set at (re)init */
	void *arg;			/* + set at (re)init */
	struct fs_glock *hnext;		/* hash chain, or free list */
	struct lk_list lru;		/* on e->lru when on_lru */
	struct fs_glock *qnext;		/* e->ready or e->later chain */
	unsigned ref;			/* references (holders', workers',
					   the pin's) */
	uint8_t live;			/* in the table */
	uint8_t on_lru;			/* GL_IDLE: on e->lru, GL_PIDLE: on
					   e->plru (lru is the link) */
	uint8_t pinned;			/* a pin's reference is in ref
					   (fs_glock_pin) */
	uint8_t queued; /* GQ_NOW: on e->ready or e->delayed; GQ_LATER:
			   on e->later */
	uint8_t evict;	/* picked from the LRU to be dropped */
	uint8_t delayed;  /* its GQ_NOW job is on e->delayed (the heap) */
	uint64_t idle_ns; /* when it went on the LRU (demote-ahead) */

	pthread_mutex_t mu;
	pthread_cond_t cv;	     /* any state change (broadcast) */
	struct lk_lock *lk;	     /* mu: NULL until the first grant */
	int mode;		     /* mu: granted now, -1 none */
	int busy;		     /* mu: a DLM call or an op runs */
	int demote_to;		     /* mu: -1, or asked to go down to */
	int bast_peer;		     /* mu: the node whose request the last
					blocking callback was for (trace
					peer), -1 none since the last demote */
	int ahead_peer;		     /* mu: bast_peer is a demote-ahead's (the
					neighbour's blocking callback): its
					release names it */
	unsigned holders[LK_NMODES]; /* mu */
	unsigned nholders;	     /* mu */
	unsigned nwaiters;	     /* mu: acquires waiting now */
	uint64_t grant_ns;	     /* mu: time of the last grant */
	uint64_t minhold_ns;	     /* mu: adaptive minimum hold */
	uint64_t gen;		     /* mu: last generation seen */
	int comp_status;	     /* mu: the pending DLM call's status */
	uint8_t seen;		     /* mu: gen is meaningful */
	uint8_t lost;		     /* mu: demoted for another node since
					the last grant (a bounce follows) */
	uint8_t contended;	     /* mu: holders waited on this grant */
	uint8_t refused;	     /* mu: this demote was deferred */
	uint8_t flush;		     /* mu: ops->flush for this demote: 0 not
					run, 1 running (every holder the mode
					covers is admitted), 2 done */
	uint8_t fenced;		     /* mu */
	uint8_t stop;		     /* mu: no DLM request from now on */
	uint8_t comp_done;	     /* mu: the pending DLM call ended */
	uint8_t ahead;		     /* mu: granted by a lock-ahead batch,
					no holder yet */
	uint8_t tracked;	     /* mu: the generation moves when EX is
					given up, if ops->changed (the EX
					grant left it as it was) */
	uint64_t mark;		     /* mu: ops->stamp at the EX grant */
	struct fs_glock_counts st;   /* mu */
	struct fs_trace_wb rep;	     /* busy: what the running demote's or
					unlock's ops did (fs_glock_report) */
};

/* fs_glock.c, for fs_glocks.c (each documents its locking) */
void fs_glock_init(struct fs_glock *gl, const struct lk_name *name,
		   const struct fs_glock_ops *ops, void *arg);
void fs_glock_job(struct fs_glock *gl, uint64_t *due, int *fence);
int fs_glock_unlock(struct fs_glock *gl, int *fence);
/* fs_glock_unlock in two halves, so that many locks can be given back in
 * one lk_unlock_batch (fs_glocks_drop_all): _begin waits for a busy
 * glock, runs sync, lvb_write and drop and returns the handle to unlock
 * with the glock busy (NULL: nothing to unlock; *@ret 0, -EBUSY holders,
 * -EIO fenced or a sync failed: *@fence set); once it is unlocked,
 * _end marks the glock unlocked and not busy. */
struct lk_lock *fs_glock_unlock_begin(struct fs_glock *gl, int *ret,
				      int *fence);
void fs_glock_unlock_end(struct fs_glock *gl);
void fs_glock_fence_one(struct fs_glock *gl);
/* fs_glocks_free is about to unlock @gl without ops: a generation a
 * tracking EX grant left as it was (fs_glock_ops.changed) moves on, since
 * nothing tells what its holders changed. Only once the engine stopped
 * (no lock taken). */
void fs_glock_free_lvb(struct fs_glock *gl);
void fs_glock_stop_one(struct fs_glock *gl, uint64_t deadline);
void fs_glock_trace(struct fs_glock *gl, int ev, int mode, int from, int remote,
		    uint64_t ns);
uint64_t fs_glock_now(void);
/* A random 64-bit value (getrandom; the clock if that fails). */
uint64_t fs_glock_seed(void);
/* Lock-ahead (fs_glocks_prefetch). May @gl get a lock-ahead request in
 * @mode? 1: yes, and claimed (busy: the caller must pass it to
 * fs_glock_ahead_run), only if @claim; 0: it holds a mode covering
 * @mode already; -1: no (busy, a demote due, holders, a lock held in a
 * lower mode, fenced, stopped). Takes gl->mu (under e->mu: allowed). */
int fs_glock_ahead_claim(struct fs_glock *gl, int mode, int claim);
/* One lk_lock_batch_args (NOQUEUE) for the @n claimed glocks @gls,
 * waiting only for the masters' answers; each granted one is finished
 * as a request is (generation, inval) and left idle, got[i] = 1. The
 * number granted, or -EIO (fenced). No engine lock held. */
int fs_glock_ahead_run(struct fs_glocks *e, struct fs_glock **gls, size_t n,
		       int mode, uint8_t *got);
/* fs_glocks.c, for fs_glock.c: queue @gl for a worker (no lock held). */
void fs_glocks_kick(struct fs_glock *gl);
/* fs_glocks.c, for fs_glock.c: a blocking callback on idle PR glock
 * @num of @type from node @peer (-1 unknown). The first of a streak
 * (GL_AHEAD_STREAK_NS) only counts; the next ones demote ahead the idle
 * PR glocks of @type numbered within @span of @num
 * (fs_glock_ops.ahead_span), doubled per further callback, queued
 * behind every other job. No lock held. */
void fs_glocks_ahead(struct fs_glocks *e, uint16_t type, uint64_t num,
		     unsigned span, int peer);
/* fs_glock.c, for fs_glocks.c: ask idle @gl to go from PR to NL (a
 * demote-ahead for node @peer's request, -1 unknown: its trace events
 * name it); 1 if asked (queue it), 0 if it is not idle PR. e->mu held
 * (then gl->mu). */
int fs_glock_ahead_one(struct fs_glock *gl, uint64_t now, int peer);

#endif /* UCFS_FS_GLOCK_INTERNAL_H */
