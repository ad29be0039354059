/*
 * lk_grant.h — the pure grant engine: the queues of one resource as its
 * master sees them, and the VMS/Linux DLM rules that move requests
 * between them. No threads, no sockets, no clock: the caller feeds it
 * operations and it reports outcomes through struct lk_grant_out, so unit
 * tests drive it directly (tests/unit/test_lk_grant.c).
 *
 * States of one request (struct lk_rq, "rq"):
 *
 *	NONE --request--> WAIT --grant--> GRANT --convert--> CONVERT
 *	  ^                |                |  ^                 |
 *	  |  -EAGAIN/cancel|       unlock   |  +--grant/EDEADLK/-+
 *	  +----------------+<---------------+       cancel
 *
 * Queues of a resource (struct lk_rsq): grantq holds granted requests;
 * convertq holds granted requests converting to rqmode (they still hold
 * grmode); waitq holds new requests (no grmode). Invariants: every pair
 * of grmodes on grantq+convertq is compatible; an rq is on exactly the
 * queue named by rq->queue; waitq entries have grmode == -1.
 *
 * Grant order: the convert queue before the wait queue; conversions in
 * FIFO order, each granted when compatible with every other grmode; the
 * wait queue strictly FIFO and only when the convert queue is empty (the
 * head blocks those behind it, so nothing starves). A new request is
 * granted at once only if both queues are empty and it is compatible.
 * A conversion deadlock (a cycle of converters each blocked by another's
 * grmode) is broken by failing the last converter of the cycle in queue
 * order with -EDEADLK; it keeps its grmode.
 */
#ifndef UCFS_LK_GRANT_H
#define UCFS_LK_GRANT_H

#include <stdint.h>

#include "lockmgr/lk.h"
#include "lockmgr/lk_list.h"

enum lk_queue { LK_Q_NONE = 0, LK_Q_GRANT, LK_Q_CONVERT, LK_Q_WAIT };

/* One lock as the master sees it. Owned by the caller of the engine. */
struct lk_rq {
	struct lk_list link; /* on the queue named by @queue */
	uint64_t lkid;	     /* holder's lock id (unique per node) */
	uint64_t qtime;	     /* caller's timestamp when queued */
	void *owner;	     /* caller's (local lkb or master copy) */
	uint32_t nodeid;     /* holder's node */
	uint32_t flags;	     /* LK_* request flags of the pending op */
	int8_t grmode;	     /* granted mode, -1 none */
	int8_t rqmode;	     /* requested mode while queued, else -1 */
	int8_t bastmode;     /* highest mode a blocking cb was sent for */
	uint8_t queue;	     /* enum lk_queue */
	uint8_t lvbret;	     /* last grant returns the LVB (lk_lvb_op) */
	uint8_t waited;	     /* set when put on convertq/waitq */
	/* no holes: 56 bytes, one per lock mastered here (in its lkb, or
	 * a master copy) */
};

/* A resource's queues and value block. */
struct lk_rsq {
	struct lk_list grantq, convertq, waitq;
	uint8_t lvb[LK_LVB_LEN];
	uint64_t lvb_seq; /* bumped at each write-back */
	uint8_t lvb_valid;
	uint8_t hold;	 /* 1: grant nothing (recovery) but LK_NOEXP */
	uint32_t nlocks; /* rqs on any queue */
};

/* Outcomes. grant: a queued or immediate request/conversion of @rq
 * finished with @status (0: granted, rq->grmode is the new mode; -EAGAIN,
 * -EDEADLK, -ECANCELED: rq is back to its previous state). bast: send the
 * holder of @rq a blocking callback for @mode, which the request of node
 * @from (the blocked request's holder) wants. */
struct lk_grant_out {
	void (*grant)(void *ctx, struct lk_rsq *q, struct lk_rq *rq,
		      int status);
	void (*bast)(void *ctx, struct lk_rsq *q, struct lk_rq *rq, int mode,
		     uint32_t from);
	void *ctx;
};

/* What happens to the value block when a lock goes from @from (-1 for a
 * new request) to @to: LK_LVB_NONE, LK_LVB_RETURN (copy resource -> lock
 * on grant) or LK_LVB_WRITE (copy lock -> resource). */
enum { LK_LVB_NONE = 0, LK_LVB_RETURN = 1, LK_LVB_WRITE = 2 };

/* The tables of lk_mode.c, for the inline checks on the grant path. */
extern const uint8_t lk_compat_tab[LK_NMODES][LK_NMODES];
extern const uint8_t lk_lvbop_tab[LK_NMODES + 1][LK_NMODES];

/* lk_mode_compat, inline */
static inline int lk_compat(int a, int b)
{
	return (unsigned)a < LK_NMODES && (unsigned)b < LK_NMODES &&
	       lk_compat_tab[a][b];
}

/* What a grant from @from (-1: a new request) to @to does with the LVB:
 * LK_LVB_NONE, RETURN it to the holder, or WRITE the holder's back. */
static inline int lk_lvb_op(int from, int to)
{
	if (from < -1 || from >= LK_NMODES || (unsigned)to >= LK_NMODES)
		return LK_LVB_NONE;
	return lk_lvbop_tab[from + 1][to];
}
/* The strongest mode both @a and @b cover (what a lock converting between
 * them is sure to protect). */
int lk_mode_meet(int a, int b);

void lk_rsq_init(struct lk_rsq *q);
/* A fresh entry on no queue (every field set: objects come unzeroed). */
static inline void lk_rq_init(struct lk_rq *rq, uint32_t nodeid, uint64_t lkid,
			      void *owner)
{
	*rq = (struct lk_rq){.nodeid = nodeid,
			     .lkid = lkid,
			     .grmode = -1,
			     .rqmode = -1,
			     .bastmode = -1,
			     .owner = owner};
	lk_list_init(&rq->link);
}

/* New request of @rq (LK_Q_NONE) for @mode with @flags. Reports the
 * outcome through @out (maybe at once). */
void lk_grant_request(struct lk_rsq *q, struct lk_rq *rq, int mode,
		      uint32_t flags, const struct lk_grant_out *out);
/* Would lk_grant_request grant a new request for @mode at once? */
int lk_grant_now(const struct lk_rsq *q, int mode, uint32_t flags);
/* Grant new @rq in @mode, which lk_grant_now allowed, telling nobody
 * (its holder has been answered already). */
void lk_grant_take(struct lk_rsq *q, struct lk_rq *rq, int mode,
		   uint32_t flags);
/* Conversion of a granted @rq to @mode. @lvb: the holder's value block to
 * write back if the LVB table says so (NULL: none). -EBUSY if @rq is not
 * on the grant queue (nothing reported). */
int lk_grant_convert(struct lk_rsq *q, struct lk_rq *rq, int mode,
		     uint32_t flags, const void *lvb,
		     const struct lk_grant_out *out);
/* Unlock a granted @rq (taken off the queues; the caller frees it).
 * @lvb written back from PW/EX; @invalidate marks the LVB invalid.
 * -EBUSY if not granted. */
int lk_grant_unlock(struct lk_rsq *q, struct lk_rq *rq, const void *lvb,
		    int invalidate, const struct lk_grant_out *out);
/* Cancel a queued request or conversion (-ECANCELED reported).
 * -EALREADY if nothing queued. */
int lk_grant_cancel(struct lk_rsq *q, struct lk_rq *rq,
		    const struct lk_grant_out *out);
/* Remove @rq whatever its state, without any report (dead holder,
 * recovery). Grants that become possible are reported. */
void lk_grant_purge(struct lk_rsq *q, struct lk_rq *rq,
		    const struct lk_grant_out *out);
/* Put @rq straight onto a queue during recovery (no grant attempt). */
void lk_grant_restore(struct lk_rsq *q, struct lk_rq *rq, int grmode,
		      int rqmode, uint32_t flags);
/* Grant what can be granted, send blocking callbacks, break deadlocks. */
void lk_grant_pending(struct lk_rsq *q, const struct lk_grant_out *out);
/* Verify the invariants; 0 or -EPROTO (tests, debug). */
int lk_grant_check(const struct lk_rsq *q);

#endif /* UCFS_LK_GRANT_H */
