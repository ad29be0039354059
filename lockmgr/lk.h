/*
 * lk.h — the ucfs distributed lock manager (DLM), as a library.
 *
 * A struct lk_ls is a lockspace: one per process per cluster. Every node of
 * the cluster opens the same lockspace from the same JSON configuration
 * (lk_ls_open); the nodes talk to each other over authenticated TCP. A
 * struct lk_lock is one lock on one resource (a "lkb" in VMS/Linux terms).
 * Both handles are opaque. lockmgr/PROTOCOL.md describes the wire protocol,
 * mastering and recovery.
 *
 * Modes are the VMS/Linux DLM set with the standard compatibility matrix
 * (lk_mode_compat). Requests are asynchronous: lk_lock() and lk_convert()
 * either grant at once (return LK_GRANTED_NOW, no completion callback
 * follows) or queue the request (return 0; the completion callback runs
 * later with the status: 0, -EAGAIN for a NOQUEUE request that could not be
 * granted, -EDEADLK for the victim of a conversion deadlock, -ECANCELED
 * after lk_cancel(), -ESHUTDOWN when the lockspace closes). lk_wait() turns
 * any of them into a blocking call.
 *
 * Callbacks: completion and blocking callbacks run on the lockspace's
 * callback thread, one at a time, never with library locks held. They may
 * call every lk_* function except lk_wait() on the same lockspace and
 * lk_ls_close(), and should return quickly (they delay every other
 * callback of the lockspace). The node-down callback (lk_ls_config's
 * recover) runs on the same thread.
 *
 * Hold cache: lk_unlock(lk, LK_UNLOCK_CACHE) keeps the lock granted in the
 * DLM but idle; the next lk_lock() of that name on this node in a mode the
 * cached one covers reuses it with no message (well under 1 us). A cached
 * lock that blocks another node's request is released by the library.
 *
 * Handles: a handle is the caller's from lk_lock() until lk_unlock(). A
 * new request that fails (-EAGAIN, -ECANCELED, -ESHUTDOWN) releases its
 * handle itself once the caller has been told: when its completion
 * callback has returned, or, without a callback, when lk_wait (or
 * lk_wait_batch) returns the failure, or lk_unlock on it returns -ENOENT.
 * Until then the handle stays valid, however early the failure came.
 *
 * Errors: functions return 0 (or a positive documented value) or -errno;
 * they never print (diagnostics go to the log callback).
 */
#ifndef UCFS_LK_H
#define UCFS_LK_H

#include <stddef.h>
#include <stdint.h>

#include "lockmgr/lk_list.h"

struct lk_ls;
struct lk_lock;

enum lk_mode {
	LK_NL = 0, /* null: holds a place, conflicts with nothing */
	LK_CR = 1, /* concurrent read */
	LK_CW = 2, /* concurrent write */
	LK_PR = 3, /* protected read */
	LK_PW = 4, /* protected write */
	LK_EX = 5, /* exclusive */
	LK_NMODES = 6,
};

/* Request flags (lk_lock, lk_convert, lk_lock_batch). */
enum {
	LK_NOQUEUE = 1 << 0,	 /* grant now or fail with -EAGAIN */
	LK_NOQUEUEBAST = 1 << 1, /* with NOQUEUE: still send the holders one
				    blocking callback */
	LK_VALBLK = 1 << 2,	 /* the lock carries the lock value block */
	LK_NOEXP = 1 << 3,	 /* may be granted while the user's node-down
				    recovery callback runs (journal locks) */
	LK_QUECVT = 1 << 4,	 /* conversion goes to the back of the
				    convert queue even if grantable */
};

/* lk_unlock() flags */
enum {
	LK_UNLOCK_CACHE = 1 << 0, /* keep granted in the hold cache */
	LK_UNLOCK_IVLVB = 1 << 1, /* mark the value block invalid */
};

#define LK_GRANTED_NOW 1 /* lk_lock/lk_convert: granted, no callback */

/* Lock value block: LK_LVB_LEN bytes attached to a resource. */
#define LK_LVB_LEN 32

/*
 * A resource name: a type, a 64-bit number and an optional short string.
 * Compare all 32 bytes: zero the unused bytes (lk_name_make). @place is
 * the placement key (PROTOCOL.md §5): 0, the directory node of the name
 * is chosen by its hash; else it is lk_place_node(@place), the same for
 * every name with that key, so that a user can pick keys whose directory
 * is its own node (ucfs: the resource group of an inode). A name must
 * always be built with the same key (it is part of the name).
 */
#define LK_NAME_STR 16
struct lk_name {
	uint16_t type;
	uint16_t slen;	/* bytes used in str (0..LK_NAME_STR) */
	uint32_t place; /* placement key, 0: by hash */
	uint64_t num;
	char str[LK_NAME_STR];
};

/* Fill @n from @type, @num and optional @str (NULL: none). -EINVAL if
 * @str is longer than LK_NAME_STR. */
int lk_name_make(struct lk_name *n, uint16_t type, uint64_t num,
		 const char *str);
/* 64-bit hash of a name (the same on every node). */
uint64_t lk_name_hash(const struct lk_name *n);
/* "type:num[:str]" into buf; returns buf. */
const char *lk_name_fmt(const struct lk_name *n, char *buf, size_t len);

/* 1 if a lock in mode @a may be granted while another holds mode @b. */
int lk_mode_compat(int a, int b);
/* "NL", "CR", ... or "??" */
const char *lk_mode_name(int mode);
/* 1 if holding @have gives at least what @want gives (lattice order). */
int lk_mode_covers(int have, int want);

/*
 * Per-lock callbacks, given at lk_lock(). Both run on the callback thread
 * (see above). completion: a queued request or conversion finished with
 * @status (0 granted; -EAGAIN, -EDEADLK, -ECANCELED, -ESHUTDOWN). blocking:
 * another request wants @mode, which conflicts with what this lock holds;
 * the holder should down-convert or unlock soon. Either may be NULL.
 */
struct lk_lock_ops {
	void (*completion)(struct lk_lock *lk, int status, void *arg);
	void (*blocking)(struct lk_lock *lk, int mode, void *arg);
};
/* Inside @lk's blocking callback: the node whose request wants the mode
 * (this node's own id when one of its own requests does; 0 if not known).
 * Only on the callback thread, while that callback runs. */
uint32_t lk_bast_node(const struct lk_lock *lk);

/*
 * Node-down recovery callback (per lockspace): node @nodeid died and the
 * DLM has rebuilt its state. The user must recover what the node owned
 * (e.g. replay its journal) before trusting data it protected; it may take
 * LK_NOEXP locks to do so. Requests without LK_NOEXP are held back on
 * every node until every node's callback returned.
 */
typedef void (*lk_recover_fn)(struct lk_ls *ls, uint32_t nodeid, void *arg);
/* Log callback: @level 0 error, 1 warning, 2 info, 3 debug. */
typedef void (*lk_log_fn)(int level, const char *msg, void *arg);

/*
 * Disk liveness (a shared-disk heartbeat, fusefs/cluster/fs_hb.c): the state of
 * node @nodeid on the disk, and in *@changed_ns the CLOCK_MONOTONIC time
 * its disk beat was last seen to change (0: never). Called under the
 * lockspace lock: must not block and must not call lk_*.
 *
 * The lock manager asks it only when an answer may have changed: by time
 * alone, an ALIVE answer may turn DEAD at *@changed_ns +
 * disk_timeout_ms (or, if it is ALIVE with no beat that recent, at any
 * time: it is then asked every heartbeat_ms); every other change (a new
 * beat, a node that appears, leaves or says it stopped, the first read,
 * a read after reads were held up) the user announces with
 * lk_ls_disk_changed.
 */
enum {
	LK_DISK_NONE = 0,  /* not on the disk (never beat, or left cleanly) */
	LK_DISK_DEAD = 1,  /* its beat stopped a disk timeout ago */
	LK_DISK_ALIVE = 2, /* beating (or not watched long enough) */
};
typedef int (*lk_disk_fn)(uint32_t nodeid, uint64_t *changed_ns, void *arg);

struct lk_ls_config {
	const char *cluster_file; /* JSON cluster configuration */
	uint32_t nodeid;	  /* this node's id in it */
	lk_recover_fn recover;	  /* may be NULL */
	lk_log_fn log;		  /* may be NULL: errors to stderr */
	void *arg;		  /* passed to recover, log and disk */
	/* May be NULL (membership by the network alone). Set: a node that
	 * the network lost is declared dead only once it is not ALIVE on
	 * the disk either (and, NONE, once it has been silent for
	 * disk_timeout_ms); no membership is formed without a configured
	 * node that is; a node that sees a lower id beat on the disk while
	 * it cannot reach it fences itself (PROTOCOL.md §9). */
	lk_disk_fn disk;
	unsigned disk_timeout_ms;
};

/*
 * Open the lockspace: read the configuration, listen on this node's
 * address, start the network and callback threads and join the cluster.
 * Returns at once; lk_ls_wait_quorum() waits until locks can be granted.
 * -ENOENT/-EACCES (files), -EINVAL (bad configuration, unknown node id,
 * secret too short), -EADDRINUSE, -ENOMEM. May block briefly.
 */
int lk_ls_open(const struct lk_ls_config *cfg, struct lk_ls **out);
/* Wait until this node is a member of a quorate membership (-ETIMEDOUT
 * after @timeout_ms). May block; not from a callback. */
int lk_ls_wait_quorum(struct lk_ls *ls, int timeout_ms);
/*
 * Leave cleanly: cancel pending requests (completions get -ESHUTDOWN),
 * release every lock, hand mastered resources on, stop the threads and
 * free everything. Outstanding handles become invalid. May block; not from
 * a callback. NULL is a no-op.
 */
void lk_ls_close(struct lk_ls *ls);
/* Leave without telling anyone (tests: behaves like a crash for the
 * others, without killing the process). */
void lk_ls_abandon(struct lk_ls *ls);

/* The disk hook's answers (lk_disk_fn) may have changed for the nodes of
 * the bitmap @nodes (bit n = node n) other than by time: call after each
 * read of the disk that saw such a change. Wakes the network thread if a
 * membership rule waits on one of those nodes, else does nothing. Any
 * thread, any lock held: takes no lock and never blocks. Not once
 * lk_ls_close or lk_ls_abandon began. */
void lk_ls_disk_changed(struct lk_ls *ls, uint64_t nodes);

/* Membership as seen now: generation and bitmap of node ids (bit n =
 * node n). Returns 1 if quorate. */
int lk_ls_members(struct lk_ls *ls, uint64_t *gen, uint64_t *members);
/* lk_ls_members' answer without taking the lockspace's mutex (a request
 * handler asks before every operation): as the network thread saw it at
 * the end of its last turn (it turns after every event that changes
 * it: a frame, a connection, a deadline, the end of a recovery
 * callback), 0 at once after lk_ls_fence. 0 may be stale: ask
 * lk_ls_members then. */
int lk_ls_usable(struct lk_ls *ls);
uint32_t lk_ls_nodeid(const struct lk_ls *ls);
/* The directory node of the names with placement key @place (> 0) in the
 * membership in force: the ((@place - 1) % members)-th member by node id.
 * 0 before the first membership. Lock-free (any thread, ~1 ns): a hint
 * that may change at the next membership change. */
uint32_t lk_place_node(struct lk_ls *ls, uint32_t place);
/* Fence this node now (the user lost its disk lease, or gave up): every
 * call fails with -ESHUTDOWN from now on, connections are dropped and
 * nobody is dialed, so the others see it dead. @why is logged. Nothing
 * will answer a fenced node, however it was fenced (here, by the others,
 * by the disk tie-break): every pending request and conversion completes
 * with -ESHUTDOWN (within one turn of the network thread; a conversion
 * keeps the mode it held), so no lk_wait and no completion callback
 * waits for ever. */
void lk_ls_fence(struct lk_ls *ls, const char *why);
/* 1 once this node was fenced (by lk_ls_fence, by the others, or by the
 * disk tie-break). */
int lk_ls_fenced(struct lk_ls *ls);
/* Node @node: 1 if its link is up (both connections authenticated),
 * and in *@rx_age_ms the time since the last frame from it (UINT64_MAX:
 * never). */
int lk_ls_peer(struct lk_ls *ls, uint32_t node, uint64_t *rx_age_ms);

/*
 * Request a lock on @name in @mode. On success *@out is the new handle,
 * owned by the caller until lk_unlock(). Returns LK_GRANTED_NOW, or 0 when
 * queued (completion callback follows). With LK_NOQUEUE a request that
 * cannot be granted returns -EAGAIN directly when the master is this node
 * (no handle), else through the completion. -EINVAL (mode, flags, name),
 * -ENOMEM, -ESHUTDOWN (closing, or this node was fenced out). Any
 * thread, including callbacks. Never blocks.
 */
int lk_lock(struct lk_ls *ls, const struct lk_name *name, int mode,
	    unsigned flags, const struct lk_lock_ops *ops, void *arg,
	    struct lk_lock **out);

/*
 * Request @n locks at once (e.g. PR on every inode of a directory): one
 * message per master, grants batched. out[i] receives each handle; each
 * lock completes on its own (completion per lock, or lk_wait each, or
 * lk_wait_batch). Returns the number granted at once (no callback for
 * those: check lk_lock_granted), or -errno with no handle created
 * (-EINVAL, -ENOMEM). With LK_NOQUEUE (a statahead that must not wait
 * for, or disturb, another node's holders), out[i] is NULL for a name
 * this node masters and refused at once; one a remote master refuses
 * completes with -EAGAIN. Never blocks.
 */
int lk_lock_batch(struct lk_ls *ls, const struct lk_name *names, size_t n,
		  int mode, unsigned flags, const struct lk_lock_ops *ops,
		  void *arg, struct lk_lock **out);
/*
 * lk_lock_batch with a callback argument per name (args[i] for names[i]:
 * a caller that keeps one object per lock, the glock engine's lock-ahead)
 * and, in now[i] (may be NULL), 1 when that name's request ended inside
 * the call: granted at once (out[i] set) or refused or failed (out[i]
 * NULL); no completion callback follows then. 0: queued, out[i] set, its
 * completion callback brings the answer.
 */
int lk_lock_batch_args(struct lk_ls *ls, const struct lk_name *names, size_t n,
		       int mode, unsigned flags, const struct lk_lock_ops *ops,
		       void *const *args, struct lk_lock **out, uint8_t *now);

/*
 * Convert a granted lock to @mode (up or down). Same return convention as
 * lk_lock. Until it completes the lock protects only what both the old
 * and the new mode protect (e.g. CR while converting CW -> PR). -EBUSY if
 * a request or conversion is already pending, -ENOENT if the handle was
 * released, -ESHUTDOWN (this node was fenced), -EINVAL. When the master
 * is this node, -EAGAIN (LK_NOQUEUE)
 * or -EDEADLK may come back directly; the lock keeps its mode.
 * A down-conversion from PW/EX writes the value block back (LK_VALBLK).
 */
int lk_convert(struct lk_lock *lk, int mode, unsigned flags);

/*
 * Release a granted lock (LK_UNLOCK_CACHE: keep it in the hold cache). The
 * handle is invalid after return; a blocking callback already running on
 * the callback thread may still see it (calls on it return -ENOENT).
 * -EBUSY if a request or conversion is pending (lk_cancel first).
 */
int lk_unlock(struct lk_lock *lk, unsigned flags);

/*
 * lk_unlock() for @n locks of one lockspace at once: one message per
 * master. Returns the number released; NULL entries, and locks that could
 * not be (pending, cached, dead), are skipped and left as they were.
 */
int lk_unlock_batch(struct lk_lock **locks, size_t n, unsigned flags);

/*
 * Cancel a pending request or conversion. Its completion reports
 * -ECANCELED (a conversion falls back to the mode held), or the grant if
 * it won the race. Returns 0, or -EALREADY if nothing is pending.
 */
int lk_cancel(struct lk_lock *lk);

/*
 * Wait until no request or conversion is pending on @lk; returns the last
 * completion status (0 if granted; -ESHUTDOWN once this node is fenced:
 * see lk_ls_fence). Do not call from a callback. Works
 * whether or not the lock has a completion callback. While it waits for a
 * remote master's reply, the calling thread may itself read and process
 * what that master sends (saving a thread wake-up per remote grant); user
 * callbacks this causes are still queued for the callback thread.
 */
int lk_wait(struct lk_lock *lk);
/*
 * lk_wait on each of @locks (NULL entries skipped), taking the lockspace
 * lock once rather than once per lock: for the handles of an
 * lk_lock_batch. Returns 0 if every lock was granted, else the first
 * non-zero status met (all of them are waited for anyway). As for
 * lk_wait, a failed new request's handle is released: its entry is set
 * to NULL (a NOQUEUE batch: what is left non-NULL is granted).
 */
int lk_wait_batch(struct lk_lock **locks, size_t n);

/* Mode granted now (-1 if none yet). */
int lk_lock_mode(const struct lk_lock *lk);
/* 1 if granted and nothing pending. */
int lk_lock_granted(const struct lk_lock *lk);
/* The name the lock was asked for (immutable: no lock taken; valid
 * while the handle is). */
const struct lk_name *lk_lock_name(const struct lk_lock *lk);
/* Copy the value block into @buf (LK_LVB_LEN). 0, or -ENODATA if it is
 * invalid — no value written yet, or a PW/EX holder died (buf zeroed) —
 * or -EINVAL if the lock has no LK_VALBLK or is not granted. */
int lk_lvb_get(const struct lk_lock *lk, void *buf);
/* Set the value block to write back at the next down-conversion from or
 * unlock of PW/EX (kept, not overwritten, across an up-conversion PW ->
 * EX meanwhile). -EPERM unless granted PW or EX with LK_VALBLK. */
int lk_lvb_set(struct lk_lock *lk, const void *buf);

/*
 * Statistics: plain structs, copied out consistently (under the lockspace
 * lock). Times in nanoseconds. Smoothed figures follow GFS2 (srtt/srttvar
 * of remote requests granted without queueing, srttb for those that
 * waited, sirt/sirtvar the smoothed time between requests; gain 1/8 and
 * 1/4); per-mode counts, totals and maxima of the time to grant follow
 * OCFS2.
 */
#define LK_HIST_BUCKETS 24 /* [2^i, 2^(i+1)) us; bucket 0 also < 1 us */
#define LK_STAT_TYPES 16   /* per lock type; type >= 15 shares slot 15 */
#define LK_MAX_NODES 64	   /* node ids 1..63 */

struct lk_counts {
	uint64_t requests;	 /* lk_lock + lk_lock_batch entries */
	uint64_t grants_local;	 /* granted by this node as master */
	uint64_t grants_remote;	 /* granted by another master */
	uint64_t lookups;	 /* master lookups sent to another node
				    (the directory node) */
	uint64_t lookups_local;	 /* ... answered by this node's own
				    directory, no message */
	uint64_t cache_hits;	 /* re-acquired from the hold cache */
	uint64_t waits;		 /* had to queue behind a conflict */
	uint64_t conversions;	 /* lk_convert calls */
	uint64_t demotes;	 /* down-conversions and unlocks of PW/EX */
	uint64_t basts_sent;	 /* blocking callbacks this master sent */
	uint64_t basts_recv;	 /* blocking callbacks this node got */
	int64_t srtt, srttvar;	 /* remote, granted without waiting */
	int64_t srttb, srttvarb; /* remote, granted after waiting */
	int64_t sirt, sirtvar;	 /* between requests */
};

struct lk_type_stats {
	struct lk_counts c;
	uint64_t wait_hist[LK_HIST_BUCKETS]; /* request to grant */
	uint64_t mode_count[LK_NMODES];
	uint64_t mode_total_ns[LK_NMODES];
	uint64_t mode_max_ns[LK_NMODES];
};

struct lk_peer_stats {
	uint64_t frames_tx, frames_rx, bytes_tx, bytes_rx;
	uint64_t records_tx, records_rx;
	uint64_t dropped; /* bad frames from this peer */
	uint64_t basts_for; /* blocking callbacks this node's locks got for
			       a request of that node (peer[own id]: our
			       own requests; peer[0]: not known) */
};

struct lk_stats {
	struct lk_type_stats type[LK_STAT_TYPES];
	struct lk_peer_stats peer[LK_MAX_NODES];
	uint64_t resources;   /* resources in memory now */
	uint64_t tossed;      /* now on the toss list */
	uint64_t toss_freed;  /* freed from the toss list since open */
	uint64_t toss_max;    /* the toss list's bound (0: none) */
	uint64_t bytes;	      /* memory of the lkbs, master copies,
				 resources, directory entries (their
				 pools' slabs: kept at their peak) and
				 hash tables */
	uint64_t lookups;     /* master lookups sent */
	uint64_t placed_mastered; /* another node's LOOKUP of a placed
				     name mastered here (lk_dir.c) */
	uint64_t dir_entries; /* directory entries held now (names
				 another node masters: lk_dir.c) */
	uint64_t recoveries;  /* recovery generations completed */
	uint64_t bad_frames;  /* dropped: size, type, state */
	uint64_t auth_failures;
	uint64_t rx_spins;	/* waits for a master's reply that polled
				   its link briefly before sleeping */
	uint64_t rx_spin_hits;	/* ... and saw the reply come meanwhile */
	uint64_t net_wakeups;	/* network thread turns: returns from its
				   wait, for events or a deadline */
	uint64_t net_spins;	/* network thread waits that polled first
				   (lock traffic came in lately) */
	uint64_t net_spin_hits; /* ... and saw input come meanwhile */
	uint64_t net_spin_skips; /* ... did not poll: of the last 16 poll
				    windows, under 4 saw input (lk_net.c
				    net_wait) */
	uint64_t poll_backoffs; /* polling switched off for a while: a
				   yield found the CPU busy with others */
	uint64_t runs_answered_first; /* batch runs granted before their
					 master copies were made */
	uint64_t unlocks_waited;      /* idle unlocks whose record waited for
					 the next frame to their master
					 (lk_unlock) */
	struct lk_plock_stats {	      /* POSIX record locks (lk_plock) */
		uint64_t locks;	      /* LK_PL_LOCK requests */
		uint64_t unlocks;     /* LK_PL_UNLOCK and LK_PL_DROP */
		uint64_t getlks;      /* LK_PL_GETLK */
		uint64_t granted;     /* LK_PL_LOCK granted */
		uint64_t waits;	      /* ... of which had to wait */
		uint64_t conflicts;   /* refused: -EAGAIN (no LK_PL_WAIT) */
		uint64_t deadlocks;   /* refused: -EDEADLK */
		uint64_t cancels;     /* waits ended by lk_plock_cancel */
		uint64_t local_only;  /* unlocks answered with no message */
		uint64_t served;      /* as the plock server: requests */
		uint64_t rebuilt;     /* as the plock server: ranges
					 received in recovery */
	} plock;
};

/* Copy the lockspace statistics. Any thread. */
void lk_ls_stats(struct lk_ls *ls, struct lk_stats *out);
/* Keep at most @n unused resources on the toss list (0: no bound but
 * the configuration's toss_ms): beyond, the oldest are freed as if
 * toss_ms had passed, by the network thread, which turns for it once
 * the list holds an eighth and 16 more (or at once after this call). A user
 * that bounds the locks it keeps (a glock cache) bounds the lockspace's memory
 * with it. Any thread. */
void lk_ls_set_toss_max(struct lk_ls *ls, uint64_t n);
/* Counters of one resource known on this node: requests,
 * grants_remote, basts_sent, basts_recv, srttb and srttvarb (a node
 * keeps only these per resource; the rest are 0). -ENOENT if none. */
int lk_res_stats(struct lk_ls *ls, const struct lk_name *name,
		 struct lk_counts *out);

/*
 * POSIX record locks (lk_plock.c; PROTOCOL.md §14): byte-range locks with
 * Linux fcntl semantics, enforced across the lockspace. One member, the
 * plock server (the lowest node id of the membership), keeps every range
 * of every node; the others ask it over the lockspace's links. A node that
 * dies loses its ranges in the next recovery (the survivors rebuild the
 * server's table from their own), after which its waiters are granted.
 *
 * An owner is the caller's 64-bit id (FUSE's lock_owner), scoped to this
 * node. Ranges are inclusive, end UINT64_MAX meaning "to the end". A
 * range held by one owner is split, merged and converted exactly as
 * fcntl(F_SETLK) does on one machine.
 */
enum lk_plock_op {
	LK_PL_LOCK = 1,	  /* take [start, end] as @type for @owner */
	LK_PL_UNLOCK = 2, /* release [start, end] of @owner */
	LK_PL_GETLK = 3,  /* the first lock another owner holds that
			     conflicts with @type on [start, end] */
	LK_PL_DROP = 4,	  /* release every range of @owner on @ino */
};
enum { LK_PL_UN = 0, LK_PL_RD = 1, LK_PL_WR = 2 }; /* lock types */
enum { LK_PL_WAIT = 1 << 0 }; /* LK_PL_LOCK: wait for the conflicts to go */

/*
 * One request, owned by the caller from lk_plock() until it completes
 * (lk_plock returned 0, or @done was called). Set the fields marked "in".
 */
struct lk_plock {
	/* in */
	uint64_t ino;
	uint64_t owner;
	uint64_t start, end; /* inclusive */
	uint64_t tag;	     /* the caller's (e.g. the open file): see
				lk_plock_drop_tag */
	uint32_t pid;	     /* of the owner, reported by GETLK */
	uint8_t op, type, flags;
	void (*done)(struct lk_plock *pl, void *arg);
	void *arg;
	/* out: status 0, -EAGAIN (conflict), -EDEADLK (waiting would
	 * deadlock), -EINTR (cancelled), -ESHUTDOWN, -ENOMEM */
	int status;
	uint8_t cf_type;	   /* GETLK: LK_PL_UN if nothing conflicts */
	uint64_t cf_start, cf_end; /* GETLK: the conflicting range */
	uint32_t cf_pid, cf_node;  /* GETLK: its owner's pid and node */
	/* the library's (under the lockspace lock) */
	struct lk_list link;
	uint64_t reqid;
	uint8_t state, in_call, rx_polled;
	void *wcv; /* lk_plock_wait's condvar */
};

/*
 * Submit @pl. Returns 0 when it completed inside the call (pl->status
 * set; @done is not called), 1 when it is pending (@done runs on the
 * callback thread when it completes, or, with @done NULL, lk_plock_wait
 * returns; a LK_PL_WAIT lock may wait for a long time, see
 * lk_plock_cancel), -EINVAL (op, type, range), or -ESHUTDOWN. Requests
 * made while recovery runs or without quorum wait for the next
 * generation. Any thread, including callbacks. Never blocks.
 */
int lk_plock(struct lk_ls *ls, struct lk_plock *pl);
/*
 * Wait until @pl, submitted with no @done, completes; returns its status.
 * While it waits for the plock server's answer the calling thread may
 * read the server's link itself (as lk_wait does): no thread hand-over.
 * -ESHUTDOWN if this node is fenced meanwhile (no answer will come).
 * Blocks; not from a callback.
 */
int lk_plock_wait(struct lk_ls *ls, struct lk_plock *pl);
/*
 * Cancel a pending @pl: it completes with -EINTR, or with the grant if
 * that crossed the cancel (at once if it was not sent yet or this node
 * is fenced). 0, or -EALREADY if it is not pending. Never blocks.
 */
int lk_plock_cancel(struct lk_ls *ls, struct lk_plock *pl);
/*
 * Release every range on @ino of the owners whose latest request carried
 * @tag (open file description locks, released when the description is;
 * see MOUNT.md). Returns the number of owners released; their unlock
 * goes out asynchronously. Never blocks.
 */
int lk_plock_drop_tag(struct lk_ls *ls, uint64_t ino, uint64_t tag);

#endif /* UCFS_LK_H */
