/*
 * fs_glock.h — the glock engine: the cluster locks (lockmgr/lk.h) this
 * node caches, each shared by any number of local holders, with the cache
 * state it protects (GFS2's glocks, reduced to what ucfs needs).
 *
 * One engine per mount (fs_glocks_new) keeps a table of glocks keyed by
 * (lock type, number). fs_glock_get finds or creates one and returns a
 * reference; fs_glock_put gives it back. A glock nobody references is
 * idle: it stays cached (with the mode it holds) on an LRU list, and once
 * the engine holds more than conf.max glocks the oldest idle ones are
 * dropped: a worker writes back what an EX mode covered (ops->sync), lets
 * the cached copies go (ops->drop), unlocks, and frees the glock. A glock
 * with holders or references is never dropped; an inode the kernel
 * holds keeps one on its glock (a pin, fs_glock_pin), and the bound
 * asks the kernel to forget such inodes instead (a prune round).
 *
 * A holder asks for PR (read) or EX (modify) with fs_glock_acquire() and
 * gives it back with fs_glock_release(). The first holder that needs a
 * mode this node does not hold requests it from the DLM (one request at a
 * time per glock); every later holder the granted mode covers runs at
 * once with no message ("cached hit"). The mode stays granted between
 * holders: it only goes down when another node asks (the DLM's blocking
 * callback) or when the glock is dropped from the LRU. A blocking
 * callback queues the glock for the engine's small pool of demote
 * workers (no thread per glock); once no local holder uses the glock,
 * or else once its minimum hold time has passed since its grant (new
 * local holders are admitted until then), a worker stops admitting new
 * holders, waits for the ones in flight to leave (their release queues
 * it again), calls
 * ops->sync (from EX), ops->drop (to NL) and converts down: EX -> PR when
 * the other node wants PR, else to NL.
 *
 * The minimum hold time adapts per glock (GFS2's gl_hold_time): it starts
 * at conf.minhold_ms; it doubles (at least 1 ms above the base, up to
 * FS_GLOCK_MINHOLD_MAX_MS) at a grant of a glock this node had given up to
 * another node (the lock bounced) while other local acquires wait behind
 * the one that asked, so that they run before it goes again; it halves
 * (never below conf.minhold_ms) at a demote for another node of a grant
 * that no other local acquire waited for. Both are counted. (One thread
 * per node taking turns never grows it: a transfer costs no more than it
 * must.) The hold only serves local holders: a glock that no local
 * holder uses goes at once when another node asks (or when its last
 * holder leaves), however recent its grant (GFS2 delays a demote only
 * for a glock with holders); hold_refusals counts the demotes deferred
 * for local holders.
 *
 * Cache validity: the lock carries its value block (LK_VALBLK) whose
 * first 8 bytes are a generation (little-endian u64, FORMAT.md "Cluster
 * locks"). Each EX grant moves it on (+1; a fresh random value when the
 * LVB is invalid, i.e. unset or a PW/EX holder died) and the DLM writes
 * it back when EX is given up; for a type with ops->stamp and
 * ops->changed, a valid one moves on (+1) only when EX is given up after
 * ops->changed said the holders may have changed something (counted:
 * gen_kept when it did not move). A grant that finds a generation other than
 * the last one this node saw (or an invalid LVB) calls ops->inval before
 * any holder runs: what this node cached under the lock may be stale;
 * not an up-conversion from PR, which this node held since a grant that
 * did that check (nobody could write meanwhile).
 * Bytes 8..31 belong to the lock type: ops->lvb_read sees them at each
 * grant, ops->lvb_write sets them before EX is given up.
 *
 * Lock-ahead (fs_glocks_prefetch): a caller that knows which locks
 * will be wanted next (directory readahead: the inodes of the entries
 * ahead of a reader) asks for them in one lk_lock_batch with
 * LK_NOQUEUE: one message per master instead of a round trip per lock,
 * never a wait for another node. Each grant is finished as an
 * acquire's (the generation check, ops->inval) and the glock left idle
 * on the LRU with its mode, so the acquire that follows is a cached
 * hit. The rule of one DLM request at a time per glock holds: a glock
 * is only asked for while nothing else runs on it (it is busy until the
 * answer came), and a glock with a lock already (NL) or holders is not
 * asked for at all.
 *
 * Fencing: fs_glocks_fence() (or a DLM call failing with -ESHUTDOWN)
 * makes every acquire fail with -EIO from then on, and every wait for the
 * DLM end at once: no wait of a fenced engine is unbounded.
 *
 * Threads: ops run on a demote worker or on the thread of a holder, never
 * on the DLM's callback thread, and never with an engine lock held; while
 * an op runs the glock is "busy" (no holder runs, no other DLM request is
 * made for it). Holders may block in the DLM: never call
 * fs_glock_acquire() from a DLM callback or from an op of the same
 * glock. fs_glock_try() waits for no other node and no local demote: it
 * may be called while holding a journal transaction handle.
 */
#ifndef UCFS_FS_GLOCK_H
#define UCFS_FS_GLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "lockmgr/lk.h"

struct fs_glocks;
struct fs_glock;
struct fs_json;
struct fs_trace;
struct fs_stats_lk;
struct fs_trace_wb;

#define FS_GLOCK_TYPES 16	     /* lk_name.type 0..15 */
#define FS_GLOCK_MINHOLD_MAX_MS 200u /* adaptive minimum hold: ceiling */

struct fs_glock_ops {
	/* Before the mode drops from @from (LK_EX or LK_PR) to @to (LK_PR,
	 * LK_NL, or -1: the glock is dropped): write back what the lower
	 * mode does not protect. Called only when leaving EX. A failure
	 * fences the engine (the lock is then never given up by this node:
	 * the cluster must declare it dead and recover its journal). May be
	 * NULL. */
	int (*sync)(struct fs_glock *gl, int from, int to, void *arg);
	/* After a grant whose generation is not the one last seen: drop
	 * every cached copy of what the lock protects (and reload what the
	 * mount keeps in memory: the lock is held). May be NULL. */
	void (*inval)(struct fs_glock *gl, void *arg);
	/* The LVB is invalid (never set, or a PW/EX holder died, which may
	 * have left its work half done): called in EX before inval and
	 * before any holder runs (a PR grant that finds an invalid LVB is
	 * converted to NL and then EX first). A failure fences the engine.
	 * May be NULL (then an invalid LVB only means inval). */
	int (*recover)(struct fs_glock *gl, void *arg);
	/* The mode goes down to NL (or the glock is dropped: -1) from
	 * @from, after sync, before the down-conversion: nothing the lock
	 * covered may stay cached where a reader would trust it without a
	 * new grant (the kernel's pages, attributes, entries). Must not
	 * read what the lock protects. May be NULL. */
	void (*drop)(struct fs_glock *gl, int from, void *arg);
	/* Around the drops of a demote-ahead batch (@on 1 before, 0 after
	 * the last, before any of their locks is given up; fs_glocks.c
	 * run_aheads), on the worker's thread: the drops may leave a wait
	 * to the 0 call (fs_kinval_defer: one wait for the kernel for the
	 * batch). May be NULL. */
	void (*drops)(int on, void *arg);
	/* Before a demote from EX, once the minimum hold time has passed,
	 * while holders of any mode are still admitted: start writing back
	 * what lives outside ucfs and comes back as requests that need this
	 * lock (the kernel's pages dirtied through a shared mapping come
	 * back as WRITEs). Returns 1 if it started such work: it then calls
	 * fs_glock_flushed(@gl) once, from any thread, when it is done (the
	 * engine holds a reference until then), and no new holder is held
	 * back meanwhile; 0 if there was nothing to do. Then the demote goes
	 * on as usual (no new holder, sync, drop, down-conversion). May be
	 * NULL. */
	int (*flush)(struct fs_glock *gl, void *arg);
	/* The value block's bytes the type may use (FS_GLOCK_LVB_USER from
	 * byte 8 on; bytes 0..7 are the generation): @val after every
	 * grant, after recover and before inval and any new holder (@valid
	 * 0: the value block is invalid and @val zero; holders of a mode
	 * held before may still run). May be NULL. */
	void (*lvb_read)(struct fs_glock *gl, const uint8_t *val, int valid,
			 void *arg);
	/* Before the mode leaves EX (a demote, a drop), after sync: fill
	 * @val (FS_GLOCK_LVB_USER bytes, holding what is there now) for the
	 * next holder on any node. May be NULL: the bytes go on unchanged. */
	void (*lvb_write)(struct fs_glock *gl, uint8_t *val, void *arg);
	/* The placement key of lock @num's name (lk_name.place, PROTOCOL.md
	 * §5: its directory node is lk_place_node(key); 0: by hash). Must
	 * be a pure function of @num, the same on every node. May be NULL
	 * (0). */
	uint32_t (*place)(uint64_t num, void *arg);
	/* Change tracking: with both set, the generation moves on only when
	 * EX is given up after a holder may have changed what the lock
	 * covers, so that the next grant on another node keeps what it
	 * cached if nothing changed (without them: at every EX grant).
	 * stamp: at each EX grant (before any holder runs), a mark of "now"
	 * for changed. changed: when the mode leaves EX, before sync: 1 if
	 * anything the lock covers may have changed since @mark (when in
	 * doubt: 1; a wrong 0 serves stale caches on other nodes), 0 if
	 * surely not. */
	uint64_t (*stamp)(struct fs_glock *gl, void *arg);
	int (*changed)(struct fs_glock *gl, uint64_t mark, void *arg);
	/* Demote-ahead span (0: none). A blocking callback that takes an
	 * idle PR glock of this type to NL (another node will change what
	 * it covers) and is not the first from that node lately (a streak:
	 * fs_glocks.c GL_AHEAD_STREAK_NS) also gives up, in the same pass,
	 * the idle PR glocks of this type whose numbers lie within this
	 * distance of it (doubled per further callback of the streak) and
	 * that no holder used for FS_GLOCK_AHEAD_IDLE_MS (unlocked by a worker,
	 * fs_glocks.c run_job: no wait for the master's answer that a
	 * conversion to NL needs): the other node's next
	 * requests (an rm -rf of a tree this node read: the inodes of a
	 * directory are allocated side by side) then find them free, with
	 * no blocking callback round trip each. Costs this node a new PR
	 * request for any of them it reads again. */
	unsigned ahead_span;
};

/* Demote-ahead skips glocks used more recently than this: long enough
 * for a stat and the open right after it, short enough that a tree read
 * just before another node removes it (du, then rm -rf at once: the
 * reader's walk ends a few ms before the remover reaches it) still goes
 * ahead. At 100 ms, a third to a quarter of a 1,300-entry tree read in
 * the last 100 ms waited for a blocking callback round trip each on the
 * remover (ucfs-bench untar). */
#define FS_GLOCK_AHEAD_IDLE_MS 10u

/* Bytes of the value block a lock type's ops may use (from byte 8). */
#define FS_GLOCK_LVB_USER (LK_LVB_LEN - 8)

struct fs_glocks_conf {
	unsigned max;	     /* glocks kept (glock_max=); idle ones beyond
				are dropped, LRU. 0: no bound */
	unsigned workers;    /* demote workers (0: 2) */
	unsigned minhold_ms; /* base minimum hold time */
};

/* Counters of one glock, of one lock type, or of the whole engine. */
struct fs_glock_stats {
	uint64_t acquires;	  /* acquires and tries that succeeded */
	uint64_t hits;		  /* ... served by the mode already held */
	uint64_t requests;	  /* DLM requests / up-conversions made */
	uint64_t retries;	  /* up-conversions refused (-EDEADLK) */
	uint64_t try_fails;	  /* fs_glock_try calls answered -EAGAIN */
	uint64_t waits;		  /* acquires that waited (not a hit) */
	uint64_t demote_pr;	  /* EX -> PR */
	uint64_t demote_nl;	  /* EX/PR -> NL */
	uint64_t demote_ns;	  /* time in sync + down-conversion */
	uint64_t wait_ns;	  /* time holders waited for a grant */
	uint64_t max_wait_ns;	  /* longest such wait */
	uint64_t invals;	  /* ops->inval calls */
	uint64_t recovers;	  /* ops->recover calls (invalid LVB) */
	uint64_t drops;		  /* ops->drop calls */
	uint64_t syncs;		  /* ops->sync calls */
	uint64_t bounces;	  /* remote grants of a glock held before */
	uint64_t hold_refusals;	  /* blocking callbacks deferred by the
				     minimum hold time */
	uint64_t minhold_grows;	  /* adaptive minimum hold doubled */
	uint64_t minhold_shrinks; /* ... halved */
	uint64_t evictions;	  /* glocks dropped from the LRU */
	uint64_t evict_syncs;	  /* ... that held a mode (unlocked) */
	uint64_t bad_releases;	  /* releases of a mode not held (a
				     caller's bug: ignored, counted) */
	uint64_t flushes;	  /* ops->flush calls that started work
				     (a demote that let holders in first) */
	uint64_t aheads;	  /* demotes to NL queued ahead (without
				     a blocking callback of their own) */
	uint64_t gen_kept;	  /* EX given up with the generation
				     unchanged (ops->changed: nothing
				     changed; other nodes keep caches) */
	/* lock-ahead (fs_glocks_prefetch): */
	uint64_t ahead_batches;	 /* batches sent (per type; engine) */
	uint64_t ahead_ns;	 /* time in them: answers, grants */
	uint64_t ahead_requests; /* locks requested in them */
	uint64_t ahead_grants;	 /* ... granted */
	uint64_t ahead_hits;	 /* ... whose first holder came */
	uint64_t ahead_unused;	 /* ... given up before any holder */
	/* OCFS2's per-mode counts (LK_PR, LK_EX used): acquires, their
	 * waits (total, longest) and failed tries */
	uint64_t mode_acquires[LK_NMODES];
	uint64_t mode_wait_ns[LK_NMODES];
	uint64_t mode_max_ns[LK_NMODES];
	uint64_t mode_failed[LK_NMODES];
	/* one glock only (fs_glock_stats_get): */
	uint64_t generation; /* last generation seen */
	uint64_t minhold_ms; /* its minimum hold time now */
	int mode;	     /* granted now (-1 none) */
	unsigned holders;    /* local holders now */
	unsigned waiters;    /* acquires waiting now */
	int fenced;
};

/* A contended glock (fs_glocks_top). */
struct fs_glock_top {
	uint16_t type;
	uint64_t num;
	int mode;	     /* granted now (-1 none) */
	unsigned holders;    /* local holders now */
	uint64_t waits;	     /* acquires that waited */
	uint64_t wait_ns;    /* total wait */
	uint64_t bounces;    /* remote grants after losing it */
	uint64_t minhold_ms; /* its minimum hold time now */
};

/* Engine gauges and counters (fs_glocks_stats). */
struct fs_glocks_stats {
	struct fs_glock_stats type[FS_GLOCK_TYPES]; /* per lock type */
	struct fs_glock_stats total;
	uint64_t glocks_now; /* in the table */
	uint64_t idle_now;   /* ... on the LRU (no reference) */
	uint64_t held_now;   /* ... holding PR or EX */
	uint64_t bytes_now;  /* memory of the engine's glocks and table */
	uint64_t max;	     /* conf.max */
	uint64_t queued_now; /* jobs waiting for a worker */
	uint64_t workers;
	uint64_t jobs; /* jobs the workers ran */
	uint64_t ahead_unlock_calls; /* lockspace calls that unlocked the
					demote-ahead ones, GL_AHEAD_BATCH
					at most each */
	uint64_t ahead_widened;	     /* demote-ahead passes wider than
					ahead_span (one node kept asking) */
	uint64_t ahead_unswept;	     /* ... that gave up only the lock
					asked for: the first of a streak */
	/* pins (fs_glock_pin) */
	uint64_t pinned_now;	   /* glocks in the table pinned */
	uint64_t pinned_idle_now;  /* ... of them kept by the pin alone */
	int prune;		   /* pins are let go by their owner's prune
				      (fs_glocks_set_pruned) */
	uint64_t pin_drops;	   /* pins the engine dropped for the bound
				      (no prune) */
};

/* ---- the engine --------------------------------------------------- */

/* Create an engine on lockspace @ls (NULL: conf defaults) and start its
 * workers. 0 or -ENOMEM / -errno of pthread_create. */
int fs_glocks_new(struct lk_ls *ls, const struct fs_glocks_conf *c,
		  struct fs_glocks **out);
/* The ops (and their @arg) every glock of lock @type uses; set before the
 * first fs_glock_get of that type. A type without ops has none. */
void fs_glocks_set_ops(struct fs_glocks *e, uint16_t type,
		       const struct fs_glock_ops *ops, void *arg);
/* Lock events (request, grant, bast_recv, demote, release) go to @tr
 * (NULL: none), types named by @type_name (NULL: "type<N>"); waits for
 * grants are fed to @lk's contention tracker ("locks.top", may be NULL).
 * Set before the first get, or when no glock is busy. */
void fs_glocks_set_trace(struct fs_glocks *e, struct fs_trace *tr,
			 const char *(*type_name)(unsigned type),
			 struct fs_stats_lk *lk);

/* Find or create the glock (@type, @num): a reference, no DLM request
 * yet. 0, -EINVAL (type >= FS_GLOCK_TYPES), -ENOMEM, -EIO (fenced or
 * stopped). Never waits for the DLM or a demote. */
int fs_glock_get(struct fs_glocks *e, uint16_t type, uint64_t num,
		 struct fs_glock **out);
/* Give a reference back (after its holds). NULL is a no-op. */
void fs_glock_put(struct fs_glock *gl);

/*
 * Pins (GFS2: an in-core inode's reference on its inode glock). A pin is
 * one reference on glock (@type, @num), kept by its owner for as long as
 * that owner caches what the lock covers outside ucfs (an inode the
 * kernel holds: its attributes, pages, names). Pinning a pinned glock
 * does nothing (at most one pin per glock). While the pins' owner
 * bounds them itself (fs_glocks_set_pruned: on dlm mounts the inode
 * bound, fs_iprune.c, asks the kernel to forget the least recently used
 * inodes past 7/8 of the smaller of inode_max and conf.max / 2, and their
 * FORGETs unpin them), the LRU bound never drops a pinned glock: the
 * table may then pass conf.max until the unpins come. Otherwise (the
 * default, or the kernel cannot prune), a pinned glock is dropped as an
 * idle one once no idle one is left, its pin with it (counted:
 * pin_drops; its owner's unpin then finds none).
 * fs_glock_pin: 0, -EINVAL, -ENOMEM, -EIO (fenced, stopped); never
 * waits for the DLM. fs_glock_unpin: the pin goes (none: nothing).
 */
int fs_glock_pin(struct fs_glocks *e, uint16_t type, uint64_t num);
void fs_glock_unpin(struct fs_glocks *e, uint16_t type, uint64_t num);
/* @on: the pins' owner bounds them (above); 0: the bound drops them. */
void fs_glocks_set_pruned(struct fs_glocks *e, int on);
/* conf.max (0: unbounded). */
unsigned fs_glocks_max(const struct fs_glocks *e);

/* Become a holder in @mode (LK_PR or LK_EX): 0, or -EIO (fenced),
 * -EINVAL (mode). May block (DLM round trips, a demote in progress,
 * ops->inval). The caller holds a reference. */
int fs_glock_acquire(struct fs_glock *gl, int mode);
/*
 * Lock-ahead: ask for @mode (LK_PR; LK_EX is allowed) on the glocks
 * (@type, nums[i]) this node does not hold yet, in one lk_lock_batch
 * with LK_NOQUEUE, before anyone needs them (directory readahead asks
 * for the inodes of the entries ahead of a reader). It never waits for
 * another node's holder (a conflicting one refuses the request, and is
 * not disturbed: no blocking callback), nor for a local demote, request
 * or holder (such glocks are skipped, as are glocks holding NL: one
 * request per glock); it waits only for the masters' answers, all in
 * flight at once (one round trip per master, not per lock). Each grant
 * is finished as an acquire's is (generation, ops->inval) and the glock
 * is left idle on the LRU with its mode, so that the next
 * fs_glock_acquire of it is a cached hit (counted: ahead_hits; one
 * dropped before any holder came: ahead_unused). At most
 * FS_GLOCK_AHEAD_MAX names, and a quarter of the LRU bound, get a
 * request per call (the rest are only looked at), so that a batch never
 * pushes its own glocks out of the table. held[i] (n bytes) is set to 1
 * when glock i is held in a mode covering @mode when the call returns
 * (granted now or before: a hint, another node may take it back after
 * the minimum hold time), else 0. Returns the number granted by this
 * call, or -EIO (fenced), -EINVAL, -ENOMEM. May be called while holding
 * other glocks and a journal transaction handle (it never waits for a
 * lock), never from a DLM callback.
 */
#define FS_GLOCK_AHEAD_MAX 1024u
int fs_glocks_prefetch(struct fs_glocks *e, uint16_t type, const uint64_t *nums,
		       size_t n, int mode, uint8_t *held);

/* Become a holder in @mode if this can be done without waiting for any
 * other node or local demote (a DLM request with LK_NOQUEUE): 0 held,
 * -EAGAIN (another node holds a conflicting mode, a local demote or
 * request is in progress, local holders would need an up-conversion, or
 * the grant found an invalid LVB that needs recovery: acquire instead),
 * -EIO (fenced), -EINVAL (mode). Waits at most for the master's answer. */
int fs_glock_try(struct fs_glock *gl, int mode);
/* Stop being a holder in @mode. Never blocks for long. Releasing a mode
 * with no holder is a caller's bug: it aborts in debug builds, else it is
 * ignored and counted (bad_releases). */
void fs_glock_release(struct fs_glock *gl, int mode);
/* 1 if this node holds @gl in a mode covering @mode (LK_PR, LK_EX) and has
 * a holder: for assertions (FS_GLOCK_ASSERT_HELD). */
int fs_glock_held(struct fs_glock *gl, int mode);
#ifdef UCFS_DEBUG
#define FS_GLOCK_ASSERT_HELD(gl, mode)                                         \
	do {                                                                   \
		if (!fs_glock_held((gl), (mode)))                              \
			fs_glock_assert_failed((gl), (mode), __FILE__,         \
					       __LINE__);                      \
	} while (0)
#else
#define FS_GLOCK_ASSERT_HELD(gl, mode) ((void)0)
#endif
/* Print the glock and the mode that should have been held, abort. */
void fs_glock_assert_failed(struct fs_glock *gl, int mode, const char *file,
			    int line);

/* The work ops->flush started for @gl is done (any thread, no lock of
 * the engine held): the demote goes on. Gives the engine's reference
 * back. */
void fs_glock_flushed(struct fs_glock *gl);

uint16_t fs_glock_type(const struct fs_glock *gl);
uint64_t fs_glock_num(const struct fs_glock *gl);
/* Acquires of this node waiting for @gl now (a hint: it may change at
 * once). */
unsigned fs_glock_waiters(struct fs_glock *gl);
/* The mode granted to this node now (LK_NL, LK_PR, LK_EX; -1: none).
 * Only what holders of this node keep it from changing. */
int fs_glock_mode(struct fs_glock *gl);

/* Fail every acquire from now on with -EIO and end every wait for the
 * DLM. Any thread. */
void fs_glocks_fence(struct fs_glocks *e);
int fs_glocks_fenced(struct fs_glocks *e);

/* Unmount: sync (from EX), drop (from PR/EX) and unlock every glock
 * (the unlocks in one lk_unlock_batch: one lockspace call, one message
 * per master).
 * A glock with holders is left as it is (-EBUSY). 0 or the first error
 * (-EBUSY; -EIO: fenced, or a sync failed: that glock stays locked and
 * the engine is fenced). May block (ops, a demote in progress). */
int fs_glocks_drop_all(struct fs_glocks *e);
/* Stop the workers: no DLM call is made after this returns. Waits for a
 * DLM call in progress at most 10 s (then fences: no unmount hangs on a
 * lockspace that stopped answering); a fenced engine does not wait for
 * the DLM at all. Then lk_ls_abandon may run before fs_glocks_free (no
 * callback can then reach a freed glock). Idempotent. */
void fs_glocks_stop(struct fs_glocks *e);
/* Stop, then give every lock up WITHOUT ops->sync (the caller wrote
 * everything back, or is crashing on purpose; nothing when fenced) and
 * free everything. No references may be left. NULL is a no-op. */
void fs_glocks_free(struct fs_glocks *e);

/* What the demote (or the drop from the LRU) running @gl's ops now wrote
 * back and told the kernel to drop, for its trace event (fusefs/STATS.md,
 * "Trace format"): the type's sync and drop ops add to it (the glock is
 * busy while they run: no lock needed). Only from inside those ops. */
struct fs_trace_wb *fs_glock_report(struct fs_glock *gl);

/* ---- stats ---------------------------------------------------------- */

/* Copy the counters of one glock. Any thread. */
void fs_glock_stats_get(struct fs_glock *gl, struct fs_glock_stats *out);
/* Per type, totals and gauges. Any thread. */
void fs_glocks_stats(struct fs_glocks *e, struct fs_glocks_stats *out);
/* The at most @n glocks in the table with the most wait, most first.
 * Returns how many were written. Scans the table: the stats thread. */
unsigned fs_glocks_top(struct fs_glocks *e, struct fs_glock_top *top,
		       unsigned n);
/*
 * Render the engine into @o (a stats section's object, STATS.md
 * "glocks"): the gauges, "types": one object per lock type used (GFS2
 * glstats / OCFS2 names: STATS.md) named by @type_name (NULL: "type<N>"),
 * and "top": the @ntop most contended glocks.
 */
void fs_glocks_stats_render(struct fs_glocks *e, struct fs_json *o,
			    const char *(*type_name)(unsigned type),
			    unsigned ntop);

/* ---- one glock on its own (v1's fs glock) ---------------------------
 * An engine of one glock: fs_glocks_new + set_ops + get. */
int fs_glock_new(struct lk_ls *ls, const struct lk_name *name,
		 unsigned minhold_ms, const struct fs_glock_ops *ops, void *arg,
		 struct fs_glock **out);
/* fs_glocks_fence / fenced / stop of its engine. */
void fs_glock_fence(struct fs_glock *gl);
int fs_glock_fenced(struct fs_glock *gl);
void fs_glock_stop(struct fs_glock *gl);
/* Put and fs_glocks_free the engine (no holder). NULL is a no-op. */
void fs_glock_free(struct fs_glock *gl);

#endif /* UCFS_FS_GLOCK_H */
