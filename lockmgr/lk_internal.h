/*
 * lk_internal.h — struct bodies shared by the lockmgr .c files.
 *
 * Pieces (one concept per file):
 *   lk_grant.c    pure grant engine for one resource (lk_grant.h)
 *   lk_core.c     lockspace state, resources, lkbs, the public lock API
 *   lk_batch.c    lk_lock_batch: many locks in one call, the early send
 *   lk_out.c      framed output per peer (lk_out_add, lk_out_flush)
 *   lk_master.c   master side: requests from peers, grant outcomes
 *   lk_dir.c      the resource directory (name -> master)
 *   lk_recover.c  the recovery state machine (membership change)
 *   lk_plock.c    POSIX record locks: plock server and client tables
 *   lk_cb.c       callback queue and callback thread
 *   lk_stats.c    counters and smoothed figures
 *   lk_wire.c     frame format and validation (lk_wire.h)
 *   lk_config.c   JSON cluster configuration (jansson)
 *   lk_auth.c     HMAC challenge-response (libsodium)
 *   lk_net.c      TCP transport: epoll thread, framing, connections
 *   lk_member.c   heartbeats, liveness, quorum, starting recovery
 *   lk_ls.c       lk_ls_open/close: wires the pieces together
 *
 * Locking
 * -------
 * 1. ls->mu — the lockspace lock. Protects every field of struct lk_ls not
 *    marked otherwise, every struct lk_res, struct lk_lock (but the fields
 *    marked "immutable"), struct lk_mst and directory entries, the
 *    membership state (lk_member.c) and the whole transport state
 *    (lk_net.c: connections and their buffers). Public API calls, the
 *    network thread (for everything but epoll_wait), a thread in
 *    lk_wait reading its master's connection (xp.wait_rx, but for
 *    poll) and the callback thread (to pop events) take it. It is
 *    never held while a user callback runs, and nothing blocks while
 *    holding it (sockets are non-blocking).
 * There is no other lock: no lock order to keep. ls->cv (lk_wait
 * without an own condvar, quorum, close), ls->cbcv (callback thread) and
 * a waiter's own condvar (struct lk_lock.wcv) are all used with ls->mu.
 * Fairness (not a lock): ls->net_wants, an atomic word, is raised by the
 * network thread while it waits for ls->mu; API calls (lk_api_lock) wait
 * on it before taking ls->mu, so a caller looping on local locks cannot
 * keep the network thread out. An API call may also read pending input
 * itself (xp.poll_rx, from lk_lock on a contended resource mastered
 * here) with ls->mu held, as the rx poller does.
 *
 * The core (lk_core/master/dir/recover) never touches sockets or threads:
 * it emits frames through ls->xp.xmit and callbacks through ls->cbq, so
 * tests can run several lockspaces in one thread over a simulated network
 * (tests/unit/test_lk_sim.c).
 */
#ifndef UCFS_LK_INTERNAL_H
#define UCFS_LK_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lockmgr/cv_wait.h"
#include "lockmgr/cv_worker.h"
#include "lockmgr/lk.h"
#include "lockmgr/lk_grant.h"
#include "lockmgr/lk_list.h"
#include "lockmgr/lk_wire.h"

#define LK_HASH_SIZE (1u << 16)
#define LK_HASH_MASK (LK_HASH_SIZE - 1)

/* Transport used by the core; ctx is the transport's. */
struct lk_xport {
	/* Send one complete frame to @node. Called with ls->mu held; must
	 * not block long and must not call back into the core. 0 or
	 * -errno (the frame is dropped: the peer is treated as dead). */
	int (*xmit)(void *ctx, uint32_t node, const void *frame, size_t len);
	void *ctx;
	/* Optional (NULL in simulation). wait_rx: called with ls->mu held
	 * by the one thread in lk_wait allowed to (ls->rx_poller) — it
	 * drops ls->mu, polls @node's link without sleeping for up to
	 * @spin_ns, then sleeps until input from @node (or wake_rx, or a
	 * few ms) and, ls->mu retaken, processes that input itself: the
	 * reply wakes the waiter directly, not through the network thread.
	 * 0 if it waited (re-check), -EAGAIN if it cannot (no link: sleep on
	 * the condvar). wake_rx: the lock being waited for that way
	 * completed in another thread; ls->mu held, must not block. */
	int (*wait_rx)(void *ctx, uint32_t node, uint64_t spin_ns);
	void (*wake_rx)(void *ctx);
	/* Optional. poll_rx: ls->mu held, from an API call: process the
	 * input already waiting on every connection (no sleeping), so that
	 * a local lock loop does not overtake remote requests that the
	 * network thread has not been scheduled to read yet. */
	void (*poll_rx)(void *ctx);
	/* Optional. rx_hold: ls->mu held, from lk_lock_batch about to send
	 * @node requests whose replies may come back before the call ends:
	 * the network thread stops reading @node's link (it would only
	 * block on ls->mu, then need waking). Returns 1 if held (0: another
	 * thread reads that link already, or there is none). rx_release:
	 * ls->mu held, process what @node sent meanwhile (no sleeping), and
	 * hand the link back to the network thread. */
	int (*rx_hold)(void *ctx, uint32_t node);
	void (*rx_release)(void *ctx, uint32_t node);
	/* Set if the transport's own thread sends what is queued within a
	 * few ms (lk_net.c: lk_out_flush every turn, and turns every
	 * LK_TICK_BUSY_NS while records wait, woken by lk_unlock when it
	 * sleeps longer: lk_net_wake_by): an idle unlock's record may then
	 * wait for the next frame (lk_core.c unlock_may_wait). 0 in
	 * simulation. */
	int flushes;
};

/* Pool of fixed-size objects carved from slabs (lk_pool.c). Under ls->mu. */
struct lk_pool {
	void *head;  /* free objects linked through their first word */
	size_t n;    /* objects on the free list */
	size_t size; /* object size, rounded up to 16 bytes */
	struct lk_slab *slabs;
	size_t nslabs;	  /* slabs allocated (LK_SLAB_BYTES each) */
	char *next, *end; /* never used part of the newest slab */
};

/* Frame being built for one peer (see lk_out_add). */
struct lk_outbuf {
	uint8_t *buf;
	size_t len, cap;
	size_t hdr_off; /* offset of the frame being appended to */
	int open;	/* a frame is open at hdr_off */
	uint8_t type;	/* its type */
	uint16_t count; /* its records (the header gets it when closed) */
	size_t run_off; /* RUNREQ: offset of its last run header, 0 none */
	uint64_t seq;	/* frames sent to this peer */
};

/* One resource's counters (lk_res_stats: the contention tracker's
 * top): the few it shows, so that a node keeping a resource per cached
 * lock keeps them small (the lock types' counters have the rest). The
 * counts are 32-bit, saturating (lk_res_count): a resource lives
 * while it is used or on the toss list, and 4G requests on one name are
 * far beyond what the top compares; the 16 bytes saved per resource are
 * 2 MiB at 130,000 cached locks. */
struct lk_res_counts {
	uint32_t requests;	 /* lk_lock + lk_lock_batch entries */
	uint32_t grants_remote;	 /* granted by another master */
	uint32_t basts_sent;	 /* blocking callbacks sent as its master */
	uint32_t basts_recv;	 /* blocking callbacks this node got */
	int64_t srttb, srttvarb; /* remote, granted after waiting */
};

/* Count one in a resource's saturating counter. */
static inline void lk_res_count(uint32_t *c)
{
	if (*c != UINT32_MAX)
		(*c)++;
}

/* A resource as this node knows it. */
struct lk_res {
	struct lk_res *hnext; /* ls->res_hash chain */
	struct lk_name name;  /* immutable; its hash is lk_res_hash (not
				 kept: 8 bytes per cached lock) */
	uint32_t master;      /* node id, 0 = unknown */
	uint8_t lookup_sent;  /* LOOKUP in flight */
	uint8_t on_toss;
	uint8_t streak;	      /* master: unlocks here since the last lock record
				 from a peer, while contended (lk_unlock) */
	uint8_t remaster;     /* recovery: old master died */
	struct lk_rsq q;      /* master side: queues + LVB */
	struct lk_list locks; /* this node's lkbs (lkb->res_link) */
	struct lk_list toss;  /* on ls->toss when unused */
	uint64_t remote_ns;   /* master: last lock record from a peer (in
				 the cache line of the queues' tails) */
	uint64_t last_req;    /* ns, for the type's sirt */
	struct lk_res_counts stats;
	/* the fields above are what a lock operation touches (see
	 * LK_RES_HOT); those below only the toss list and recovery */
	uint64_t toss_time; /* ns, when put on the toss list */
	struct lk_res_rc *rc; /* recovery's value blocks, or NULL: made
				 when one is offered or handed over, freed
				 when recovery ends (lk_recover.c) */
};

/* A resource's value blocks while recovery (or a leaving master's
 * HANDOFF) needs them: apart, as few resources ever have one. */
struct lk_res_rc {
	int8_t rc_mode;	  /* best mode seen with an LVB, -1 none */
	uint8_t rc_valid; /* validity of rc_lvb at rank 4 */
	uint8_t ho;	  /* a leaving master handed us its LVB: */
	uint8_t ho_valid;
	uint64_t rc_seq; /* rc_lvb's sequence */
	uint64_t ho_seq;
	uint8_t rc_lvb[LK_LVB_LEN];
	uint8_t ho_lvb[LK_LVB_LEN];
};
/* @r's recovery block, made (rc_mode -1) if it has none; NULL on
 * -ENOMEM (the value block is then treated as lost: invalid). */
struct lk_res_rc *lk_res_rc(struct lk_res *r);
void lk_res_rc_free(struct lk_res *r);
/* @r's name hash (lk_name_hash: a multiply or two for a numeric name). */
static inline uint64_t lk_res_hash(const struct lk_res *r)
{
	return lk_name_hash(&r->name);
}
/* Bytes of struct lk_res worth prefetching before a lock operation. */
#define LK_RES_HOT offsetof(struct lk_res, toss_time)

/* lkb states on the requesting node */
enum lk_lkb_state {
	LK_S_NEW = 0, /* waiting for the master lookup */
	LK_S_WAITING, /* request sent / queued at master */
	LK_S_GRANTED, /* granted, nothing pending */
	LK_S_CONVERTING,
	LK_S_DEAD, /* unlocked, waiting for last reference */
};

struct lk_lock {
	struct lk_ls *ls;	 /* immutable */
	struct lk_res *res;	 /* immutable */
	uint64_t lkid;		 /* immutable, unique in this lockspace */
	struct lk_lock *hnext;	 /* ls->lkb_hash chain */
	struct lk_list res_link; /* res->locks */
	uint8_t state;	 /* enum lk_lkb_state */
	int8_t grmode, rqmode;
	uint8_t cached; /* idle in the hold cache */
	uint8_t cancel_pending;
	uint8_t sync_done;    /* completed inside its own API call */
	uint8_t rx_polled;    /* its waiter is the rx poller (xp.wait_rx) */
	uint8_t unlock_ivlvb; /* pending unlock invalidates the LVB */
	uint8_t zombie;	      /* failed new request without a completion
				 callback: the user's reference stays until
				 lk_wait or lk_unlock tells the failure */
	int8_t bast_mode;     /* highest mode asked by a blocking callback
				 since the last grant, -1 none */
	uint8_t deferred_op;  /* LK_M_* op waiting for traffic, or 0 */
	uint8_t lvb_valid : 1;
	uint8_t lvb_dirty : 1; /* set by lk_lvb_set, not yet written back */
	uint32_t cb_node;     /* callback thread only: the node whose
				 request the running blocking callback is
				 for (lk_bast_node) */
	struct lk_list dlink; /* ls->deferred while deferred_op != 0 */
	uint32_t flags;	      /* LK_* of the lock/pending op */
	int status;	      /* last completion status */
	int refs;	      /* user + callback queue + waiters */
	int waiters;	      /* threads in lk_wait */
	pthread_cond_t *wcv;  /* the sole waiter's own condvar, or NULL */
	const struct lk_lock_ops *ops;
	void *arg;
	uint64_t t_req; /* ns, start of pending op */
	/* the fields above are what a remote request and its completion
	 * touch (two cache lines); the value block and the master-side
	 * entry come last */
	uint8_t lvb[LK_LVB_LEN];
	uint64_t lvb_seq;
	struct lk_rq rq; /* master-side entry when res is mastered here */
};

/* A master copy of another node's lock on a resource mastered here. */
struct lk_mst {
	struct lk_rq rq; /* rq.nodeid, rq.lkid are the key */
	struct lk_mst *hnext;
	struct lk_res *res;
};

/* A directory entry (this node is the directory node of the name). */
struct lk_dirent {
	struct lk_dirent *hnext;
	struct lk_name name;
	uint64_t hash;
	uint32_t master;
};

enum lk_cb_kind { LK_CB_COMP = 1, LK_CB_BAST, LK_CB_RECOVER, LK_CB_PLOCK };
struct lk_cbev {
	uint8_t kind;
	int val;	    /* status, mode or node id */
	uint32_t node;	    /* BAST: the node that wants the mode */
	uint64_t gen;	    /* RECOVER: generation it belongs to */
	struct lk_lock *lk; /* holds a reference; NULL for RECOVER */
	struct lk_plock *pl; /* PLOCK: the completed request */
};

/* Recovery states (lk_recover.c): RUNNING, then phases 1..5 of a
 * generation, of which phase 5 (user recovery) lets LK_NOEXP traffic
 * through. */
enum { LK_RS_RUNNING = 0, LK_RS_NPHASES = 6 };

/* Two names are the same when all their bytes are (lk_name_make zeroes
 * the unused string bytes); memcmp without the call. */
static inline int lk_name_eq(const struct lk_name *a, const struct lk_name *b)
{
	uint64_t x[4], y[4];

	_Static_assert(sizeof(struct lk_name) == sizeof(x), "lk_name size");
	memcpy(x, a, sizeof(x));
	memcpy(y, b, sizeof(y));
	return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) |
		(x[3] ^ y[3])) == 0;
}

/* Requests of one call (lk_stats.c): the type's figures added once, by
 * lk_stats_requests_end. */
struct lk_req_stats {
	struct lk_type_stats *t;
	uint32_t n, irt_n;
	int64_t irt_sum; /* inter-request times, ns */
};

struct lk_ls {
	pthread_mutex_t mu;
	int net_wants;	    /* atomic: the network thread waits for mu (1),
			       and API calls sleep on this word (2) */
	pthread_cond_t cv;  /* lk_wait, quorum, close; with mu */
	uint64_t now;	    /* ns, clock read at the current entry point */
	int now_fresh;	    /* lk_lock_one: now is this call's */
	struct lk_req_stats req_stats; /* this lock call's, not yet added */
	uint32_t nodeid;    /* immutable */
	struct lk_xport xp; /* immutable after open */
	int closing;	    /* lk_ls_close or lk_ls_abandon began: set once,
			       under mu, like every reader of it */

	/* membership, set by recovery */
	uint64_t gen;		     /* generation in force (0 = none yet) */
	uint64_t members;	     /* bitmap of members of gen */
	uint32_t memv[LK_MAX_NODES]; /* members, sorted */
	unsigned nmemb;
	int quorate;
	int usable;	      /* atomic: quorate, not recovering, not fenced,
				 as of the network thread's last turn or
				 lk_ls_fence (lk_ls_usable) */
	int fenced;	      /* excluded from the membership: no more locks */
	int fence_failed;     /* pending requests failed since the fence */
	unsigned quorum_need; /* members needed for quorum (0: always) */

	/* recovery (lk_recover.c) */
	int rphase;	   /* 0 running, 1..5 */
	uint64_t rgen;	   /* generation being recovered to */
	uint64_t rmembers; /* its members */
	uint64_t rdead;	   /* died (callbacks owed), since last done */
	uint64_t rdone[LK_RS_NPHASES + 1]; /* DONE(p) received from */
	unsigned rlookups;		   /* RLOOKUPs awaiting reply */
	int ruser_pending; /* user recover callbacks not yet run */
	int rphase_sent;   /* phase whose DONE we already sent */
	uint64_t rstart_ns;
	struct lk_saved *saved;	      /* new-gen frames held until phase 5 */
	struct lk_rec_name *rl_saved; /* RLOOKUPs held until phase 3 */
	uint32_t *rl_from;
	size_t rl_n, rl_cap;
	uint64_t fut_gen; /* DONEs of a generation not started yet */
	uint64_t fut_done[LK_RS_NPHASES + 1];
	uint64_t fut_dead;
	uint64_t left;	       /* nodes that said LEAVE (not dead); one
				  that came back stays until a generation
				  with its new incarnation starts */
	uint64_t rejoined;     /* nodes of left back as a new incarnation */
	uint64_t admitted;     /* members a generation took in from left
				  before we saw their new incarnation */
	uint64_t done_gen;     /* last generation whose state took effect */
	uint64_t done_members; /* (reached phase 5) and its members */

	/* tables */
	struct lk_res **res_hash;
	struct lk_lock **lkb_hash;
	struct lk_mst **mst_hash;
	struct lk_dirent **dir_hash;
	struct lk_pool lkb_pool, mst_pool, res_pool, dir_pool;
	void *tables; /* the block holding the four hash tables */
	uint64_t nres, ndir;
	struct lk_list toss;
	struct lk_list deferred; /* lkbs with a deferred_op */
	uint64_t toss_ns;	 /* keep unused resources this long */
	uint64_t toss_max;	 /* ... and no more of them than this (0:
				    no bound; lk_ls_set_toss_max) */
	uint64_t spin_ns;	 /* a waiter polls this long (immutable
				    after open; lk_wait_batch: + 100 ns a
				    lock, at most 25/3 of it) */
	uint64_t next_lkid;
	struct lk_lock *sync_lkb; /* lkb whose API call is running */
	int rx_poller;		  /* a waiter is in xp.wait_rx */
	int rx_in_poller;	  /* ... and is processing input now */

	/* output, per peer */
	struct lk_outbuf out[LK_MAX_NODES];
	uint64_t out_dirty; /* bitmap of peers with an open frame */
	uint64_t net_next;  /* ns: when the network thread wakes next
			       unless an event comes (CVW_NEVER: not
			       before one; 0 without the thread): another
			       thread that makes work due sooner wakes it
			       (lk_net_wake_by) */
	uint64_t disk_watch; /* atomic: nodes whose disk answer a
				membership rule waits on
				(lk_ls_disk_changed, lk_member_tick) */

	/* callbacks */
	struct lk_cbev *cbq;
	size_t cbq_head, cbq_len, cbq_cap;
	pthread_cond_t cbcv; /* callback thread waits; with mu */
	int cb_running;	     /* callback thread is in a user callback */

	struct lk_stats stats;

	struct lk_pl *pl; /* POSIX record locks (lk_plock.c), NULL until
			     first used */

	/* user */
	lk_recover_fn recover;
	lk_log_fn log;
	void *uarg;

	/* threaded parts (NULL in simulation) */
	struct lk_net *net;
	struct lk_member *memb;
	struct lk_config *cfg;
	struct cvw_worker cb_worker; /* the callback thread: mu, cbcv */
};

/* lk_core.c */
int lk_core_create(uint32_t nodeid, const struct lk_xport *xp,
		   struct lk_ls **out);
void lk_core_destroy(struct lk_ls *ls);
/* The lock manager's clock: cv_wait.h's (CLOCK_MONOTONIC, ns). */
static inline uint64_t lk_now_ns(void)
{
	return cvw_now_ns();
}
/* How long an idle unlock's record may wait in out[] for another frame
 * before the network thread's turn sends it (lk_unlock, lk_net.c
 * net_main). */
#define LK_TICK_BUSY_NS (5ull * 1000 * 1000)

/* lk_pool.c */
void lk_pool_init(struct lk_pool *p, size_t size);
/* A zeroed object from @p; NULL on -ENOMEM. */
void *lk_pool_get(struct lk_pool *p);
/* Give @p a new slab: 0, or -1 on ENOMEM. */
int lk_pool_grow(struct lk_pool *p);

/* The same, not zeroed: for objects whose constructor sets every field
 * (a batch makes thousands of lkbs and master copies). Inline: it is
 * a few instructions on every lock's path. */
static inline void *lk_pool_get_raw(struct lk_pool *p)
{
	void *obj = p->head;

	if (obj != NULL) {
		memcpy(&p->head, obj, sizeof(p->head));
		p->n--;
		return obj;
	}
	if ((size_t)(p->end - p->next) < p->size && lk_pool_grow(p) != 0)
		return NULL;
	obj = p->next;
	p->next += p->size;
	return obj;
}

/* Make the next @n lk_pool_get calls unable to fail. 0 or -ENOMEM. */
int lk_pool_reserve(struct lk_pool *p, size_t n);

static inline void lk_pool_put(struct lk_pool *p, void *obj)
{
	memcpy(obj, &p->head, sizeof(p->head));
	p->head = obj;
	p->n++;
}
/* Free every slab: every object of the pool, in use or not. */
void lk_pool_destroy(struct lk_pool *p);
/* Bytes of the pool's slabs. */
size_t lk_pool_bytes(const struct lk_pool *p);
/* @bytes of zeroed memory for hash tables (huge pages if offered). */
void *lk_tables_alloc(size_t bytes);
/* Lock ls->mu from an API call: lets a waiting network thread go first. */
void lk_api_lock(struct lk_ls *ls);
/* Lock ls->mu from the network thread (API calls give way to it). */
void lk_net_lock(struct lk_ls *ls);
void lk_log(struct lk_ls *ls, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Handle one validated frame from @sender; ls->mu held. */
void lk_core_rx(struct lk_ls *ls, uint32_t sender, const void *frame,
		size_t len);
/* Periodic work (toss list); ls->mu held. */
uint64_t lk_core_tick(struct lk_ls *ls, uint64_t now);
struct lk_res *lk_res_find(struct lk_ls *ls, const struct lk_name *n,
			   uint64_t hash);
struct lk_res *lk_res_get(struct lk_ls *ls, const struct lk_name *n);
void lk_res_maybe_toss(struct lk_ls *ls, struct lk_res *res);
/* Take @res off the toss list (it is in use again). */
void lk_res_untoss(struct lk_ls *ls, struct lk_res *res);
void lk_res_free(struct lk_ls *ls, struct lk_res *res);
struct lk_lock *lk_lkb_find(struct lk_ls *ls, uint64_t lkid);
void lk_lkb_put(struct lk_lock *lk);
void lk_lkb_complete(struct lk_ls *ls, struct lk_lock *lk, int status, int mode,
		     const struct lk_rec_reply *r);
/* A blocking callback for @lk: node @from wants @mode (0: not known). */
void lk_lkb_bast(struct lk_ls *ls, struct lk_lock *lk, int mode, uint32_t from);
void lk_lkb_submit(struct lk_ls *ls, struct lk_lock *lk);
void lk_res_master_known(struct lk_ls *ls, struct lk_res *res);
uint32_t lk_dir_node(const struct lk_ls *ls, const struct lk_name *n,
		     uint64_t hash);
int lk_traffic_ok(const struct lk_ls *ls);
/* Output: append a record to the open frame for @node (or start one). */
void *lk_out_add(struct lk_ls *ls, uint32_t node, unsigned type);
/* The same for @n records of @type, contiguous in one frame. */
void *lk_out_addn(struct lk_ls *ls, uint32_t node, unsigned type, unsigned n);
/* The last record (of @size bytes) of the open frame for @node if that
 * frame is of @type (it may still be changed), else NULL. Inline: the
 * grant of every lock of a batch asks it. */
static inline void *lk_out_last(struct lk_ls *ls, uint32_t node,
				unsigned type, size_t size)
{
	struct lk_outbuf *ob;

	if (node == 0 || node >= LK_MAX_NODES)
		return NULL;
	ob = &ls->out[node];
	if (!ob->open || ob->type != type || ob->count == 0)
		return NULL;
	return ob->buf + ob->len - size;
}
void lk_out_flush(struct lk_ls *ls);
/* Send what is queued for @node now (the others stay queued). */
void lk_out_flush_node(struct lk_ls *ls, uint32_t node);
void lk_out_seal(struct lk_ls *ls);

/* What an lk_lock or lk_lock_batch call asks for (lk_core.c, lk_batch.c). */
struct lk_lock_args {
	int mode;
	unsigned flags;
	const struct lk_lock_ops *ops;
	void *arg;
	/* lk_lock only: may read pending input (xp.poll_rx) first. Never
	 * in a batch, which keeps resource pointers across its calls: the
	 * input could start a recovery that frees unused resources. */
	int may_poll;
};

/* -EINVAL unless @mode and @flags are an API call's and @n (if not
 * NULL) a valid name. */
int lk_check_args(int mode, unsigned flags, const struct lk_name *n);
/* A new lkb on @res for @a, its request submitted (granted inside the
 * call when this node masters @res). @sent_lkid: 0, or the id of the lkb
 * whose request an early batch send already took to its master (its
 * reply may even have come: the link is held, see lk_batch.c
 * early_send). ls->mu held. LK_GRANTED_NOW, 0 (queued) or -errno. */
int lk_lock_new(struct lk_ls *ls, const struct lk_lock_args *a,
		struct lk_res *res, uint64_t sent_lkid, struct lk_lock **out);
/* One lk_lock under ls->mu; no flush. @res: the resource of @name if
 * the caller already found it, else NULL. */
int lk_lock_one(struct lk_ls *ls, const struct lk_lock_args *a,
		const struct lk_name *name, uint64_t hash, struct lk_res *res,
		struct lk_lock **out);
/* A cached lock of @res covering @mode, or NULL. */
static inline struct lk_lock *lk_cache_find(struct lk_res *res, int mode,
					    unsigned flags)
{
	struct lk_list *l, *n;

	lk_list_each (l, n, &res->locks) {
		struct lk_lock *lk = LK_CONTAINER(l, struct lk_lock, res_link);

		if (lk->cached && lk->state == LK_S_GRANTED &&
		    lk->deferred_op == 0 && lk_mode_covers(lk->grmode, mode) &&
		    (!(flags & LK_VALBLK) || (lk->flags & LK_VALBLK)))
			return lk;
	}
	return NULL;
}

/* A name with no string part: its request travels in a RUNREQ run. */
static inline int lk_name_numeric(const struct lk_name *n)
{
	uint64_t s[2];

	memcpy(s, n->str, sizeof(s));
	return n->slen == 0 && (s[0] | s[1]) == 0;
}

/* lk_out.c: the request of a new lock to @res's remote master, in a
 * RUNREQ run (@res: a numeric name). */
void lk_out_run_request(struct lk_ls *ls, const struct lk_res *res,
			uint64_t lkid, int mode, uint32_t flags);

void lk_core_kick_deferred(struct lk_ls *ls);
void lk_core_drop_lock(struct lk_ls *ls, struct lk_lock *lk);
void lk_core_rx_record(struct lk_ls *ls, uint32_t sender, unsigned type,
		       const void *rec);

/* lk_master.c */
extern const struct lk_grant_out lk_master_out_ops;
/* The @n lock records (REQUEST, CONVERT, UNLOCK, CANCEL) of @type of one
 * frame. */
void lk_master_rx_locks(struct lk_ls *ls, uint32_t sender, unsigned type,
			const void *recs, unsigned n);
/* The @n slots of a RUNREQ frame (malformed runs are dropped, logged). */
/* One UNLOCKS record from @sender. */
void lk_master_rx_unlocks(struct lk_ls *ls, uint32_t sender,
			  const struct lk_rec_unlocks *u);
void lk_master_rx_runs(struct lk_ls *ls, uint32_t sender,
		       const struct lk_rec_slot *s, unsigned n);
void lk_master_local_op(struct lk_ls *ls, struct lk_lock *lk, unsigned type);
struct lk_mst *lk_mst_find(struct lk_ls *ls, uint32_t node, uint64_t lkid);
struct lk_mst *lk_mst_new(struct lk_ls *ls, struct lk_res *res, uint32_t node,
			  uint64_t lkid);
void lk_mst_free(struct lk_ls *ls, struct lk_mst *m);
void lk_master_fill_lvb(struct lk_res *res, struct lk_rq *rq, uint8_t *lvbf,
			uint64_t *seq, uint8_t *lvb);

/* lk_dir.c */
uint32_t lk_dir_lookup(struct lk_ls *ls, const struct lk_name *n, uint64_t hash,
		       uint32_t requester);
void lk_dir_remove(struct lk_ls *ls, const struct lk_name *n, uint64_t hash,
		   uint32_t master);
void lk_dir_set(struct lk_ls *ls, const struct lk_name *n, uint64_t hash,
		uint32_t master);
void lk_dir_clear(struct lk_ls *ls);
/* The @n name records (LOOKUP, LOOKUP_REPLY, REMOVE) of one frame. */
void lk_dir_rx(struct lk_ls *ls, uint32_t sender, unsigned type,
	       const struct lk_rec_name *r, unsigned n);

/* lk_recover.c */
struct lk_saved {
	struct lk_saved *next;
	uint32_t sender;
	size_t len;
	uint8_t frame[];
};
/* Start recovery to generation @gen (coordinator, or START received).
 * 0, or -ESTALE if @gen is not newer than the one under way. */
int lk_recover_start(struct lk_ls *ls, uint64_t gen, uint64_t members,
		     uint64_t dead);
int lk_recover_begin(struct lk_ls *ls, uint64_t gen, uint64_t members,
		     uint64_t dead);
void lk_recover_rx(struct lk_ls *ls, uint32_t sender, unsigned type,
		   const void *rec);
/* A lock-traffic frame arrived during recovery: 1 if consumed here. */
int lk_recover_filter(struct lk_ls *ls, uint32_t sender, const void *frame,
		      size_t len);
void lk_recover_user_done(struct lk_ls *ls, uint64_t gen);
/* Did the others form a generation without us after ours? Then fence
 * (1 returned). */
int lk_recover_check_stale(struct lk_ls *ls, uint32_t sender, uint64_t prev_gen,
			   uint64_t prev);
void lk_recover_free(struct lk_ls *ls);
/* Leaving: send the LVB of every resource we master to one of its
 * holders (HANDOFF). */
void lk_recover_handoff(struct lk_ls *ls);

/* lk_cb.c */
int lk_cb_push(struct lk_ls *ls, int kind, struct lk_lock *lk, int val);
/* The event lk_cb_push queued last (ls->mu held, the queue not empty). */
static inline struct lk_cbev *lk_cb_last(struct lk_ls *ls)
{
	return &ls->cbq[(ls->cbq_head + ls->cbq_len - 1) % ls->cbq_cap];
}
/* Run queued callbacks; drops and retakes ls->mu around each. Returns
 * the number run. */
int lk_cb_run(struct lk_ls *ls);
int lk_cb_thread_start(struct lk_ls *ls);
void lk_cb_thread_stop(struct lk_ls *ls);

/* lk_cb.c: queue the completion of a plock request */
int lk_cb_push_plock(struct lk_ls *ls, struct lk_plock *pl);

/* lk_plock.c (ls->mu held for all) */
/* The @n records of a PLOCK frame, or one PRCOM record (recovery). */
void lk_plock_rx(struct lk_ls *ls, uint32_t sender,
		 const struct lk_rec_plock *r, unsigned n);
void lk_plock_rx_rcom(struct lk_ls *ls, uint32_t sender,
		      const struct lk_rec_plock *r);
/* Recovery phase 1: the server drops its table, sent requests will be
 * sent again. Phase 4: send our granted ranges to the new server. Phase
 * 5: send the requests again. */
void lk_plock_recover_stop(struct lk_ls *ls);
void lk_plock_recover_send(struct lk_ls *ls);
void lk_plock_recover_resume(struct lk_ls *ls);
/* Closing: pending requests complete with -ESHUTDOWN. */
void lk_plock_shutdown(struct lk_ls *ls);
void lk_plock_free(struct lk_ls *ls);

/* lk_stats.c */
struct lk_type_stats *lk_stats_type(struct lk_ls *ls, uint16_t type);
void lk_stats_request_add(struct lk_ls *ls, struct lk_req_stats *g,
			  struct lk_res *res, uint64_t now);
void lk_stats_requests_end(struct lk_req_stats *g);
/* Grants completed together (lk_stats.c): the type's figures of a run
 * of alike grants are added once, by lk_stats_grants_end. */
struct lk_grant_stats {
	struct lk_type_stats *t;
	uint64_t d;   /* request to grant, ns */
	uint32_t n;   /* grants gathered, 0: none */
	uint32_t key; /* name type << 16 | mode << 8 | remote << 1 | queued */
};
void lk_stats_grant_add(struct lk_ls *ls, struct lk_grant_stats *g,
			struct lk_lock *lk, int remote, int queued,
			uint64_t now);
void lk_stats_grants_end(struct lk_grant_stats *g);
void lk_stats_peer_tx(struct lk_ls *ls, uint32_t node, size_t bytes,
		      unsigned records);
void lk_stats_peer_rx(struct lk_ls *ls, uint32_t node, size_t bytes,
		      unsigned records);

/*
 * Profiling aid: built with -DLK_TIMELINE, the steps of a large batch
 * (the last one of the process, any node) leave their times in lk_tl[],
 * and `ucfs-lockbench -w` prints their medians from the call. Nothing
 * is compiled in otherwise.
 */
enum lk_tl_point {
	LK_TL_CALL,	   /* lk_lock_batch entered */
	LK_TL_PLANNED,	   /* resources found, early requests written */
	LK_TL_SENT,	   /* ... and sent */
	LK_TL_BUILT,	   /* every lkb built */
	LK_TL_RETURN,	   /* lk_lock_batch about to return */
	LK_TL_MASTER_RX,   /* master: the RUNREQ frame verified */
	LK_TL_MASTER_DONE, /* master: its requests granted */
	LK_TL_MASTER_SENT, /* master: the GRANTS sent */
	LK_TL_GRANTS_RX,   /* requester: the GRANTS frame verified */
	LK_TL_GRANTS_DONE, /* requester: every lock completed */
	LK_TL_WAITED,	   /* lk_wait_batch returns */
	LK_TL_N
};
#ifdef LK_TIMELINE
extern uint64_t lk_tl[LK_TL_N];
#define LK_TL(i) (lk_tl[i] = lk_now_ns())
#else
#define LK_TL(i) ((void)0)
#endif
#endif /* UCFS_LK_INTERNAL_H */
