/*
 * lk_master.c — the master side of a resource: lock records from peers
 * (REQUEST/CONVERT/UNLOCK/CANCEL) and this node's own operations are fed
 * to the grant engine; its outcomes become REPLY and BAST records for
 * remote holders and direct completions for local ones.
 *
 * A remote holder's lock is a struct lk_mst ("master copy") found by
 * (node, lkid) in ls->mst_hash; a local lkb's entry is lk->rq itself.
 * Records that contradict the master's state (a convert for an unknown
 * lock, a request for an existing lkid) are dropped, logged and counted
 * in stats.bad_frames: a peer can never make the master crash or lie.
 * All under ls->mu.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "lockmgr/lk_internal.h"

/* A node's lkids are consecutive, so consecutive buckets: a batch of
 * requests touches a few contiguous cache lines of the table, not one
 * random line per lock. Nodes are spread 4096 buckets apart. */
static uint64_t mst_key(uint32_t node, uint64_t lkid)
{
	return lkid + ((uint64_t)node << 12);
}

struct lk_mst *lk_mst_find(struct lk_ls *ls, uint32_t node, uint64_t lkid)
{
	struct lk_mst *m = ls->mst_hash[mst_key(node, lkid) & LK_HASH_MASK];

	while (m != NULL && (m->rq.nodeid != node || m->rq.lkid != lkid))
		m = m->hnext;
	return m;
}

struct lk_mst *lk_mst_new(struct lk_ls *ls, struct lk_res *res, uint32_t node,
			  uint64_t lkid)
{
	struct lk_mst *m = lk_pool_get_raw(&ls->mst_pool); /* all set below */
	uint64_t k = mst_key(node, lkid) & LK_HASH_MASK;

	if (m == NULL)
		return NULL;
	lk_rq_init(&m->rq, node, lkid, m);
	m->res = res;
	m->hnext = ls->mst_hash[k];
	ls->mst_hash[k] = m;
	return m;
}

/* Unhash and free; @m must be off every queue. */
void lk_mst_free(struct lk_ls *ls, struct lk_mst *m)
{
	struct lk_mst **pp =
	    &ls->mst_hash[mst_key(m->rq.nodeid, m->rq.lkid) & LK_HASH_MASK];

	while (*pp != m)
		pp = &(*pp)->hnext;
	*pp = m->hnext;
	lk_pool_put(&ls->mst_pool, m);
}

static struct lk_res *res_of(struct lk_rsq *q)
{
	return LK_CONTAINER(q, struct lk_res, q);
}

void lk_master_fill_lvb(struct lk_res *res, struct lk_rq *rq, uint8_t *lvbf,
			uint64_t *seq, uint8_t *lvb)
{
	if (!rq->lvbret || !(rq->flags & LK_VALBLK))
		return;
	*lvbf |= LK_RF_LVB | (res->q.lvb_valid ? LK_RF_LVB_VALID : 0);
	*seq = res->q.lvb_seq;
	memcpy(lvb, res->q.lvb, LK_LVB_LEN);
}

/* Grants of @node's lkids @lkid .. @lkid + @count - 1 (at most a run's
 * 65,532) in @mode that return no LVB: they extend the GRANTS record
 * they follow when the lkids go on from it (a batch), else make one.
 * 0, or -ENOMEM with nothing written. */
static int grants_add(struct lk_ls *ls, uint32_t node, uint64_t lkid,
		      uint32_t count, int mode, uint8_t lvbf)
{
	struct lk_rec_grants *g =
	    lk_out_last(ls, node, LK_M_GRANTS, sizeof(*g));

	if (g != NULL && g->lkid + g->count == lkid && g->mode == mode &&
	    g->lvbf == lvbf && g->count <= LK_GRANTS_MAX - count) {
		g->count += count;
		return 0;
	}
	g = lk_out_add(ls, node, LK_M_GRANTS);
	if (g == NULL)
		return -ENOMEM;
	*g = (struct lk_rec_grants){
	    .lkid = lkid, .count = count, .mode = (int8_t)mode, .lvbf = lvbf};
	return 0;
}

/* A grant that returns no LVB. */
static void send_grant(struct lk_ls *ls, struct lk_rq *rq)
{
	(void)grants_add(ls, rq->nodeid, rq->lkid, 1, rq->grmode,
			 rq->waited ? LK_RF_QUEUED : 0);
}

/* The outcome for a remote holder: REPLY when it returns the LVB, a
 * GRANTS range for another grant, else (a failure) the 16-byte SREPLY. */
static void send_reply(struct lk_ls *ls, struct lk_res *res, struct lk_rq *rq,
		       int status)
{
	int lvb = status == 0 && rq->lvbret && (rq->flags & LK_VALBLK);
	struct lk_rec_sreply *h;
	struct lk_rec_reply *r;

	if (status == 0 && !lvb) {
		send_grant(ls, rq);
		return;
	}
	h = lk_out_add(ls, rq->nodeid, lvb ? LK_M_REPLY : LK_M_SREPLY);
	r = (struct lk_rec_reply *)h;
	if (h == NULL)
		return;
	h->lkid = rq->lkid;
	h->status = status;
	h->mode = rq->grmode;
	if (rq->waited)
		h->lvbf |= LK_RF_QUEUED;
	if (lvb)
		lk_master_fill_lvb(res, rq, &r->lvbf, &r->lvb_seq, r->lvb);
}

static void m_grant(void *ctx, struct lk_rsq *q, struct lk_rq *rq, int status)
{
	struct lk_ls *ls = ctx;
	struct lk_res *res = res_of(q);
	struct lk_rec_reply r;

	if (rq->nodeid != ls->nodeid) {
		send_reply(ls, res, rq, status);
		/* a new request that failed leaves no master copy behind */
		if (status != 0 && rq->queue == LK_Q_NONE)
			lk_mst_free(ls, rq->owner);
		return;
	}
	memset(&r, 0, sizeof(r));
	r.lkid = rq->lkid;
	r.status = status;
	r.mode = rq->grmode;
	if (rq->waited)
		r.lvbf |= LK_RF_QUEUED;
	if (status == 0)
		lk_master_fill_lvb(res, rq, &r.lvbf, &r.lvb_seq, r.lvb);
	lk_lkb_complete(ls, rq->owner, status, rq->grmode, &r);
}

static void m_bast(void *ctx, struct lk_rsq *q, struct lk_rq *rq, int mode,
		   uint32_t from)
{
	struct lk_ls *ls = ctx;
	struct lk_res *res = res_of(q);
	struct lk_rec_bast *b;

	lk_res_count(&res->stats.basts_sent);
	lk_stats_type(ls, res->name.type)->c.basts_sent++;
	if (rq->nodeid == ls->nodeid) {
		lk_lkb_bast(ls, rq->owner, mode, from);
		return;
	}
	b = lk_out_add(ls, rq->nodeid, LK_M_BAST);
	if (b != NULL) {
		b->lkid = rq->lkid;
		b->mode = (int8_t)mode;
		b->node = from;
	}
}

const struct lk_grant_out lk_master_out_ops = {m_grant, m_bast, NULL};

static struct lk_grant_out out_for(struct lk_ls *ls)
{
	struct lk_grant_out o = lk_master_out_ops;

	o.ctx = ls;
	return o;
}

/* @r: the record's first fields (all a REQUEST has). */
static void bad(struct lk_ls *ls, uint32_t sender, const char *what,
		const struct lk_rec_req *r)
{
	char nb[64];

	ls->stats.bad_frames++;
	if (sender < LK_MAX_NODES)
		ls->stats.peer[sender].dropped++;
	lk_log(ls, 1, "dropped record from node %u: %s (%s lkid %llu)", sender,
	       what, lk_name_fmt(&r->name, nb, sizeof(nb)),
	       (unsigned long long)r->lkid);
}

static int mode_flags_ok(int mode, uint32_t flags)
{
	return mode >= 0 && mode < LK_NMODES &&
	       !(flags & ~(uint32_t)(LK_NOQUEUE | LK_NOQUEUEBAST | LK_VALBLK |
				     LK_NOEXP | LK_QUECVT));
}

/* A request whose mode and flags are valid, on @res (or NULL) whose
 * name is valid; @r is only read to log a refusal. */
static void request_one(struct lk_ls *ls, uint32_t sender, uint64_t lkid,
			int mode, uint32_t flags, struct lk_res *res,
			const struct lk_grant_out *o,
			const struct lk_rec_req *r)
{
	struct lk_mst *m;

	if (res == NULL || res->master != ls->nodeid) {
		struct lk_rec_sreply *rep = lk_out_add(ls, sender, LK_M_SREPLY);

		if (rep != NULL) {
			rep->lkid = lkid;
			rep->status = LK_ST_NOTMASTER;
			rep->mode = -1;
		}
		return;
	}
	if (lk_mst_find(ls, sender, lkid) != NULL) {
		bad(ls, sender, "request for a lock it already has", r);
		return;
	}
	m = lk_mst_new(ls, res, sender, lkid);
	if (m == NULL)
		return;
	lk_res_untoss(ls, res);
	lk_grant_request(&res->q, &m->rq, mode, flags, o);
}

static void rx_request(struct lk_ls *ls, uint32_t sender,
		       const struct lk_rec_req *r, struct lk_res *res,
		       const struct lk_grant_out *o)
{
	if (res != NULL && res->master == ls->nodeid &&
	    !mode_flags_ok(r->mode, r->flags)) {
		bad(ls, sender, "bad mode or flags", r);
		return;
	}
	request_one(ls, sender, r->lkid, r->mode, r->flags, res, o, r);
}

/* CONVERT, UNLOCK or CANCEL of the master copy @m. */
static void rx_op(struct lk_ls *ls, uint32_t sender, unsigned type,
		  const struct lk_rec_lock *r, struct lk_mst *m,
		  const struct lk_grant_out *o)
{
	struct lk_res *res = m->res;
	const uint8_t *lvb = r->has_lvb ? r->lvb : NULL;

	switch (type) {
	case LK_M_CONVERT:
		m->rq.waited = 0;
		if (r->mode < 0 || r->mode >= LK_NMODES ||
		    lk_grant_convert(&res->q, &m->rq, r->mode, r->flags, lvb,
				     o) < 0)
			bad(ls, sender, "convert of a lock not granted",
			    (const struct lk_rec_req *)r);
		break;
	case LK_M_UNLOCK:
		if (lk_grant_unlock(&res->q, &m->rq, lvb,
				    (r->flags & LK_UNLOCK_IVLVB) != 0, o) < 0) {
			bad(ls, sender, "unlock of a lock not granted",
			    (const struct lk_rec_req *)r);
			break;
		}
		lk_mst_free(ls, m);
		break;
	case LK_M_CANCEL:
		lk_grant_cancel(&res->q, &m->rq, o); /* -EALREADY: crossed */
		break;
	}
}

/* One lock record of @type whose name is valid and whose resource here
 * (or NULL) is @res. @r: the record, a full struct lk_rec_lock unless
 * @type is LK_M_REQUEST. */
static void rx_lock(struct lk_ls *ls, uint32_t sender, unsigned type,
		    const struct lk_rec_req *r, struct lk_res *res)
{
	struct lk_grant_out o = out_for(ls);
	struct lk_mst *m;

	if (res != NULL) {
		res->remote_ns = ls->now; /* lk_lock_new: contended */
		res->streak = 0;
	}
	if (type == LK_M_REQUEST) {
		rx_request(ls, sender, r, res, &o);
	} else {
		m = lk_mst_find(ls, sender, r->lkid);
		if (m == NULL || m->res != res) {
			/* a CANCEL may cross the grant: harmless */
			if (type != LK_M_CANCEL)
				bad(ls, sender, "operation on an unknown lock",
				    r);
			return;
		}
		rx_op(ls, sender, type, (const struct lk_rec_lock *)r, m, &o);
	}
	if (res != NULL)
		lk_res_maybe_toss(ls, res);
}

enum { LK_RX_CHUNK = 256 };

/*
 * @c lock records of @type at @p, @ps bytes apart: their resources are
 * looked up first, in a tight loop whose iterations do not depend on
 * each other, so the cache misses on the hash buckets overlap instead of
 * stalling each record's processing in turn. Sound because handling a
 * lock record never creates or frees a resource (requests for unknown
 * resources are refused, unused ones only go on the toss list).
 */
static void rx_chunk(struct lk_ls *ls, uint32_t sender, unsigned type,
		     const uint8_t *p, size_t ps, unsigned c)
{
	struct lk_res *rv[LK_RX_CHUNK];
	uint64_t hv[LK_RX_CHUNK];
	const struct lk_rec_req *r;

	for (unsigned j = 0; j < c; j++) {
		r = (const void *)(p + j * ps);
		hv[j] = lk_name_hash(&r->name);
		__builtin_prefetch(&ls->res_hash[hv[j] & LK_HASH_MASK]);
	}
	for (unsigned j = 0; j < c; j++) {
		r = (const void *)(p + j * ps);
		rv[j] = lk_res_find(ls, &r->name, hv[j]);
		/* the grant reads its queues and lists too */
		for (size_t o = 64; rv[j] != NULL && o < LK_RES_HOT; o += 64)
			__builtin_prefetch((const char *)rv[j] + o);
	}
	for (unsigned j = 0; j < c; j++) {
		r = (const void *)(p + j * ps);
		if (lk_wire_check_name(&r->name) != 0)
			bad(ls, sender, "malformed name", r);
		else
			rx_lock(ls, sender, type, r, rv[j]);
	}
}

/* A frame of lock records (REQUEST, CONVERT, UNLOCK, CANCEL; or a single
 * record of one), a chunk at a time. */
void lk_master_rx_locks(struct lk_ls *ls, uint32_t sender, unsigned type,
			const void *recs, unsigned n)
{
	size_t rs = lk_wire_recsize(type);

	for (unsigned base = 0; base < n; base += LK_RX_CHUNK) {
		unsigned c = n - base < LK_RX_CHUNK ? n - base : LK_RX_CHUNK;

		rx_chunk(ls, sender, type, (const uint8_t *)recs + base * rs,
			 rs, c);
	}
}

/*
 * Requests @base .. @base + @c - 1 of a run whose mode and flags were
 * checked once for the whole run: the names differ only in their number,
 * so nothing is copied into REQUEST records and no name is re-checked;
 * the resources are found first as in rx_chunk.
 */
/* The resources (or NULL) of @c slots of a run of type @type, as in
 * rx_chunk: hashes and buckets first, then the finds, whose cache misses
 * overlap; the hot part of each resource found is prefetched. */
static void run_find(struct lk_ls *ls, const struct lk_run_hdr *h,
		     const struct lk_rec_slot *num, unsigned c,
		     struct lk_res **rv)
{
	uint64_t hv[LK_RX_CHUNK];
	struct lk_name n;

	memset(&n, 0, sizeof(n));
	n.type = h->type;
	n.place = h->place;
	for (unsigned j = 0; j < c; j++) {
		n.num = num[j].v;
		hv[j] = lk_name_hash(&n);
		__builtin_prefetch(&ls->res_hash[hv[j] & LK_HASH_MASK]);
	}
	for (unsigned j = 0; j < c; j++) {
		n.num = num[j].v;
		rv[j] = lk_res_find(ls, &n, hv[j]);
		for (size_t off = 64; rv[j] != NULL && off < LK_RES_HOT;
		     off += 64)
			__builtin_prefetch((const char *)rv[j] + off);
	}
}

static void run_chunk(struct lk_ls *ls, uint32_t sender,
		      const struct lk_run_hdr *h, const struct lk_rec_slot *num,
		      unsigned c, const struct lk_grant_out *o)
{
	struct lk_res *rv[LK_RX_CHUNK];
	struct lk_rec_req r;

	memset(&r, 0, sizeof(r));
	r.name.type = h->type;
	r.name.place = h->place;
	r.flags = h->flags;
	r.mode = h->mode;
	run_find(ls, h, num, c, rv);
	for (unsigned j = 0; j < c; j++) {
		struct lk_res *res = rv[j];

		r.name.num = num[j].v;
		r.lkid = h->lkid + j;
		if (res != NULL) {
			res->remote_ns = ls->now; /* lk_lock_new: contended */
			res->streak = 0;
		}
		request_one(ls, sender, r.lkid, h->mode, h->flags, res, o, &r);
		if (res != NULL)
			lk_res_maybe_toss(ls, res);
	}
}

/*
 * Answer first: a run whose requests are all granted at once (the usual
 * batch: a shared mode, resources mastered here and idle or shared) is
 * answered before its master copies exist. Its GRANTS go out as soon as
 * every request is known to be grantable; the master copies and queues
 * are made after the send, while the requester reads the answer, so the
 * master's per-lock work leaves the batch's critical path. Sound because
 * nothing can see the gap: this thread holds ls->mu from the check to the
 * last master copy (the master copy pool is reserved first, so making
 * them cannot fail), and the requester's next records on these locks are
 * read by this thread, after. Only for a mode compatible with itself (a
 * name twice in the run is granted twice, as lk_grant_request would) and
 * without LK_VALBLK (GRANTS carry no LVB); else, or if any request would
 * queue or be refused, 0: the run takes the per-request path. Only for
 * a frame's last run, and a long one (LK_ANSWER_FIRST_MIN): the early
 * send is one more system call when other replies follow (a cold batch's
 * frames hold many short runs: answering each first made it 3x slower).
 */
enum { LK_ANSWER_FIRST_MIN = 256 };

static int run_answer_first(struct lk_ls *ls, uint32_t sender,
			    const struct lk_run_hdr *h,
			    const struct lk_rec_slot *num)
{
	struct lk_res *stack_rv[LK_RX_CHUNK], **rv = stack_rv;
	int ok = 0;

	if (!lk_compat(h->mode, h->mode) || (h->flags & LK_VALBLK) ||
	    lk_pool_reserve(&ls->mst_pool, h->count) != 0)
		return 0;
	if (h->count > LK_RX_CHUNK) {
		rv = malloc(h->count * sizeof(*rv));
		if (rv == NULL)
			return 0;
	}
	for (uint32_t base = 0; base < h->count; base += LK_RX_CHUNK) {
		uint32_t c = h->count - base < LK_RX_CHUNK ? h->count - base
							   : LK_RX_CHUNK;

		run_find(ls, h, num + base, c, rv + base);
		for (uint32_t j = 0; j < c; j++) {
			struct lk_res *res = rv[base + j];

			if (res == NULL || res->master != ls->nodeid ||
			    !lk_grant_now(&res->q, h->mode, h->flags) ||
			    lk_mst_find(ls, sender, h->lkid + base + j) != NULL)
				goto out;
		}
	}
	if (grants_add(ls, sender, h->lkid, h->count, h->mode, 0) != 0)
		goto out;
	ok = 1;
	ls->stats.runs_answered_first++;
	LK_TL(LK_TL_MASTER_DONE);
	lk_out_flush_node(ls, sender);
	LK_TL(LK_TL_MASTER_SENT);
	/* a requester on this CPU (nodes on one machine) completes its
	 * batch now rather than after the bookkeeping below. ls->mu stays
	 * held (the gap must stay invisible): a thread of this node that
	 * wants it meanwhile sleeps on it for the few µs of the yield;
	 * with nothing else runnable here the yield returns at once */
	sched_yield();
	for (uint32_t j = 0; j < h->count; j++) {
		struct lk_res *res = rv[j];
		struct lk_mst *m = lk_mst_new(ls, res, sender, h->lkid + j);

		res->remote_ns = ls->now; /* lk_lock_new: contended */
		res->streak = 0;
		lk_res_untoss(ls, res);
		lk_grant_take(&res->q, &m->rq, h->mode, h->flags);
	}
out:
	if (rv != stack_rv)
		free(rv);
	return ok;
}

/* One run of a RUNREQ frame, a chunk at a time; a run with a bad mode or
 * flags is dropped whole (its count is good: the next run is found).
 * @last: the frame's last run. */
static void rx_run(struct lk_ls *ls, uint32_t sender,
		   const struct lk_run_hdr *h, const struct lk_rec_slot *num,
		   int last)
{
	struct lk_grant_out o = out_for(ls);
	struct lk_run_hdr part = *h;

	if (!mode_flags_ok(h->mode, h->flags)) {
		ls->stats.bad_frames++;
		if (sender < LK_MAX_NODES)
			ls->stats.peer[sender].dropped++;
		lk_log(ls, 1,
		       "RUNREQ from %u: run of %u with a bad mode or flags "
		       "(%d, %#x) dropped",
		       sender, h->count, h->mode, h->flags);
		return;
	}
	if (last && h->count >= LK_ANSWER_FIRST_MIN &&
	    run_answer_first(ls, sender, h, num))
		return;
	for (unsigned base = 0; base < h->count; base += LK_RX_CHUNK) {
		unsigned c = h->count - base < LK_RX_CHUNK ? h->count - base
							   : LK_RX_CHUNK;

		part.lkid = h->lkid + base;
		run_chunk(ls, sender, &part, num + base, c, &o);
	}
}

void lk_master_rx_runs(struct lk_ls *ls, uint32_t sender,
		       const struct lk_rec_slot *s, unsigned n)
{
	const struct lk_run_hdr *h;
	unsigned i = 0;

	while (i < n) {
		h = (const void *)&s[i];
		if (n - i <= LK_RUN_HDR_SLOTS || h->count == 0 ||
		    h->count > n - i - LK_RUN_HDR_SLOTS) {
			/* the following slots cannot be told apart */
			ls->stats.bad_frames++;
			lk_log(ls, 1,
			       "RUNREQ from %u: run with a bad count (%u slots "
			       "left) dropped with the rest of the frame",
			       sender, n - i);
			return;
		}
		i += LK_RUN_HDR_SLOTS + h->count;
		rx_run(ls, sender, h, &s[i - h->count], i == n);
	}
}

/*
 * UNLOCKS: each lkid of the range is an UNLOCK with no value block. The
 * master copy gives the resource (the record has no name). A range with
 * a bad count or flags is dropped whole; an lkid with no master copy
 * here is counted and the rest still released; all logged once.
 */
void lk_master_rx_unlocks(struct lk_ls *ls, uint32_t sender,
			  const struct lk_rec_unlocks *u)
{
	struct lk_grant_out o = out_for(ls);
	uint32_t bad_ids = 0;

	if (u->count == 0 || u->count > LK_UNLOCKS_MAX ||
	    u->lkid + u->count < u->lkid ||
	    (u->flags & ~(uint32_t)LK_UNLOCK_IVLVB)) {
		ls->stats.bad_frames++;
		if (sender < LK_MAX_NODES)
			ls->stats.peer[sender].dropped++;
		lk_log(ls, 1,
		       "UNLOCKS from %u with a bad count or flags dropped",
		       sender);
		return;
	}
	for (uint32_t i = 0; i < u->count; i++) {
		struct lk_mst *m = lk_mst_find(ls, sender, u->lkid + i);
		struct lk_res *res;

		if (m == NULL) {
			bad_ids++;
			continue;
		}
		res = m->res;
		res->remote_ns = ls->now; /* lk_lock_new: contended */
		res->streak = 0;
		if (lk_grant_unlock(&res->q, &m->rq, NULL,
				    (u->flags & LK_UNLOCK_IVLVB) != 0, &o) < 0) {
			bad_ids++;
			continue;
		}
		lk_mst_free(ls, m);
		lk_res_maybe_toss(ls, res);
	}
	if (bad_ids != 0) {
		ls->stats.bad_frames += bad_ids;
		if (sender < LK_MAX_NODES)
			ls->stats.peer[sender].dropped += bad_ids;
		lk_log(ls, 1,
		       "UNLOCKS from %u: %u of locks %llu..+%u unknown or not "
		       "granted",
		       sender, bad_ids, (unsigned long long)u->lkid, u->count);
	}
}

/* This node's own operation on a resource it masters. */
void lk_master_local_op(struct lk_ls *ls, struct lk_lock *lk, unsigned type)
{
	struct lk_grant_out o = out_for(ls);
	struct lk_res *res = lk->res;
	int wb;

	lk->rq.waited = 0;
	switch (type) {
	case LK_M_REQUEST:
		lk_grant_request(&res->q, &lk->rq, lk->rqmode, lk->flags, &o);
		break;
	case LK_M_CONVERT:
		wb = (lk->flags & LK_VALBLK) &&
		     lk_lvb_op(lk->grmode, lk->rqmode) == LK_LVB_WRITE;
		if (wb)
			lk->lvb_dirty = 0;
		lk_grant_convert(&res->q, &lk->rq, lk->rqmode, lk->flags,
				 wb ? lk->lvb : NULL, &o);
		break;
	case LK_M_UNLOCK:
		wb = (lk->flags & LK_VALBLK) && lk->grmode >= LK_PW;
		lk_grant_unlock(&res->q, &lk->rq, wb ? lk->lvb : NULL,
				lk->unlock_ivlvb, &o);
		break;
	case LK_M_CANCEL:
		lk_grant_cancel(&res->q, &lk->rq, &o);
		break;
	}
}
