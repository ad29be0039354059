/*
 * fs_glock.h — a glock: one cluster lock (lockmgr/lk.h) cached on this
 * node, shared by any number of local holders, with the cache state it
 * protects (GFS2's glock, reduced to what ucfs needs).
 *
 * A holder asks for PR (read) or EX (modify) with fs_glock_acquire() and
 * gives it back with fs_glock_release(). The first holder that needs a
 * mode this node does not hold requests it from the DLM (one request at a
 * time per glock); every later holder the granted mode covers runs at
 * once with no message ("cached hit"). The mode stays granted between
 * holders: it only goes down when another node asks (the DLM's blocking
 * callback). Then a dedicated thread, once the minimum hold time has
 * passed since the grant, stops admitting new holders, waits for the ones
 * in flight, calls ops->sync (EX: write everything back) and converts
 * down: EX -> PR when the other node wants PR, else to NL.
 *
 * DLM requests complete through the completion callback (never lk_wait,
 * so that a request failing at once cannot leave a released handle
 * behind): the DLM's callback thread must not be blocked by the user.
 *
 * Cache validity: the lock carries its value block (LK_VALBLK) whose
 * first 8 bytes are a generation (little-endian u64, FORMAT.md "Cluster
 * locks"). Each EX grant moves it on (+1; a fresh random value when the
 * LVB is invalid, i.e. unset or a PW/EX holder died) and the DLM writes
 * it back when EX is given up. A grant that finds a generation other than
 * the last one this node saw (or an invalid LVB) calls ops->inval before
 * any holder runs: what this node cached under the lock may be stale.
 *
 * Fencing: fs_glock_fence() (or a DLM call failing with -ESHUTDOWN) makes
 * every acquire fail with -EIO from then on, and every wait for the DLM
 * end at once: no wait of a fenced glock is unbounded.
 *
 * Locking: gl->mu protects every field of struct fs_glock (fs_glock.c);
 * ops->sync and ops->inval run without it, while the glock is "busy" (no
 * holder runs and no other DLM request is made meanwhile). Holders may
 * block in the DLM: never call fs_glock_acquire() from a DLM callback.
 */
#ifndef UCFS_FS_GLOCK_H
#define UCFS_FS_GLOCK_H

#include <stdint.h>

#include "lockmgr/lk.h"

struct fs_glock;

struct fs_glock_ops {
	/* Before the mode drops from @from (LK_EX or LK_PR) to @to: write
	 * back what the lower mode does not protect. A failure fences the
	 * glock (the lock is then never given up by this node: the cluster
	 * must declare it dead and recover its journal). May be NULL. */
	int (*sync)(struct fs_glock *gl, int from, int to, void *arg);
	/* After a grant whose generation is not the one last seen: drop
	 * every cached copy of what the lock protects. May be NULL. */
	void (*inval)(struct fs_glock *gl, void *arg);
	/* The LVB is invalid (never set, or a PW/EX holder died, which may
	 * have left its work half done): called in EX before inval and
	 * before any holder runs (a PR grant that finds an invalid LVB is
	 * converted to NL and then EX first). A failure fences the glock.
	 * May be NULL (then an invalid LVB only means inval). */
	int (*recover)(struct fs_glock *gl, void *arg);
};

struct fs_glock_stats {
	uint64_t acquires;   /* fs_glock_acquire calls that succeeded */
	uint64_t hits;	     /* ... served by the mode already held */
	uint64_t requests;   /* DLM requests / up-conversions made */
	uint64_t retries;    /* up-conversions refused (-EDEADLK) */
	uint64_t demote_pr;  /* EX -> PR */
	uint64_t demote_nl;  /* EX/PR -> NL */
	uint64_t demote_ns;  /* time in sync + down-conversion */
	uint64_t wait_ns;    /* time holders waited for a grant */
	uint64_t invals;     /* ops->inval calls */
	uint64_t recovers;   /* ops->recover calls (invalid LVB) */
	uint64_t generation; /* last generation seen */
	int mode;	     /* granted now (-1 none) */
	unsigned holders;    /* local holders now */
	int fenced;
};

/*
 * Create a glock on @name of lockspace @ls and start its thread. No DLM
 * request is made yet. @minhold_ms: how long a grant is kept at least
 * before a blocking callback is honoured. 0 or -ENOMEM / -errno of
 * pthread_create.
 */
int fs_glock_new(struct lk_ls *ls, const struct lk_name *name,
		 unsigned minhold_ms, const struct fs_glock_ops *ops, void *arg,
		 struct fs_glock **out);

/* Become a holder in @mode (LK_PR or LK_EX): 0, or -EIO (fenced),
 * -EINVAL (mode). May block (DLM round trips, a demote in progress,
 * ops->inval). */
int fs_glock_acquire(struct fs_glock *gl, int mode);
/* Stop being a holder in @mode. Never blocks for long. */
void fs_glock_release(struct fs_glock *gl, int mode);

/* Fail every acquire from now on with -EIO. Any thread. */
void fs_glock_fence(struct fs_glock *gl);
int fs_glock_fenced(struct fs_glock *gl);

/* Copy the counters. Any thread. */
void fs_glock_stats_get(struct fs_glock *gl, struct fs_glock_stats *out);

/*
 * Stop the thread: no DLM call is made for @gl after this returns. Waits
 * for a DLM call in progress, at most 10 s (then the glock is fenced:
 * no unmount hangs on a lockspace that stopped answering); a fenced
 * glock does not wait for the DLM at all. Then lk_ls_abandon may run
 * before fs_glock_free (no callback can then reach a freed glock).
 */
void fs_glock_stop(struct fs_glock *gl);

/*
 * Stop the thread (fs_glock_stop) and give the lock up WITHOUT ops->sync (the
 * caller has written everything back, or is crashing on purpose): unlock (an EX
 * holder's generation is written back), free. There must be no holder.
 * NULL is a no-op.
 */
void fs_glock_free(struct fs_glock *gl);

#endif /* UCFS_FS_GLOCK_H */
