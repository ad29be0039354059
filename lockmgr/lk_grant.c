/*
 * lk_grant.c — the grant engine (see lk_grant.h for the states, queues,
 * invariants and grant order). Pure: no locking of its own; the caller
 * serialises every call on one struct lk_rsq.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lockmgr/lk_grant.h"

static struct lk_rq *rq_of(struct lk_list *l)
{
	return LK_CONTAINER(l, struct lk_rq, link);
}

static struct lk_list *queue_head(struct lk_rsq *q, int queue)
{
	switch (queue) {
	case LK_Q_GRANT:
		return &q->grantq;
	case LK_Q_CONVERT:
		return &q->convertq;
	default:
		return &q->waitq;
	}
}

static void move(struct lk_rsq *q, struct lk_rq *rq, int queue)
{
	if (rq->queue != LK_Q_NONE) {
		lk_list_del(&rq->link);
		q->nlocks--;
	}
	rq->queue = (uint8_t)queue;
	if (queue == LK_Q_WAIT || queue == LK_Q_CONVERT)
		rq->waited = 1;
	if (queue != LK_Q_NONE) {
		lk_list_add_tail(queue_head(q, queue), &rq->link);
		q->nlocks++;
	}
}

void lk_rsq_init(struct lk_rsq *q)
{
	memset(q, 0, sizeof(*q));
	lk_list_init(&q->grantq);
	lk_list_init(&q->convertq);
	lk_list_init(&q->waitq);
	q->lvb_valid = 0; /* no value until a PW/EX holder writes one */
}

/* Is @mode compatible with every grmode but @self's? */
static int compat_others(struct lk_rsq *q, struct lk_rq *self, int mode)
{
	struct lk_list *l, *n;

	lk_list_each (l, n, &q->grantq)
		if (rq_of(l) != self && !lk_compat(mode, rq_of(l)->grmode))
			return 0;
	lk_list_each (l, n, &q->convertq)
		if (rq_of(l) != self && !lk_compat(mode, rq_of(l)->grmode))
			return 0;
	return 1;
}

static int held_back(const struct lk_rsq *q, const struct lk_rq *rq)
{
	return q->hold && !(rq->flags & LK_NOEXP);
}

static int can_grant(struct lk_rsq *q, struct lk_rq *rq)
{
	return !held_back(q, rq) && compat_others(q, rq, rq->rqmode);
}

/* @rq's rqmode granted, nobody told yet. */
static void do_grant_quiet(struct lk_rsq *q, struct lk_rq *rq)
{
	rq->lvbret = lk_lvb_op(rq->grmode, rq->rqmode) == LK_LVB_RETURN;
	rq->grmode = rq->rqmode;
	rq->rqmode = -1;
	rq->bastmode = -1;
	move(q, rq, LK_Q_GRANT);
}

static void do_grant(struct lk_rsq *q, struct lk_rq *rq,
		     const struct lk_grant_out *out)
{
	do_grant_quiet(q, rq);
	out->grant(out->ctx, q, rq, 0);
}

static void write_lvb(struct lk_rsq *q, const void *lvb)
{
	memcpy(q->lvb, lvb, LK_LVB_LEN);
	q->lvb_seq++;
	q->lvb_valid = 1;
}

/* Blocking callbacks to every holder whose grmode conflicts with @mode. */
static void bast_holders(struct lk_rsq *q, struct lk_rq *want, int mode,
			 const struct lk_grant_out *out)
{
	struct lk_list *heads[2] = {&q->grantq, &q->convertq};
	struct lk_list *l, *n;
	struct lk_rq *h;

	for (int i = 0; i < 2; i++) {
		lk_list_each (l, n, heads[i]) {
			h = rq_of(l);
			if (h == want || lk_compat(mode, h->grmode))
				continue;
			if (h->bastmode >= mode)
				continue;
			h->bastmode = (int8_t)mode;
			out->bast(out->ctx, q, h, mode, want->nodeid);
		}
	}
}

static void send_basts(struct lk_rsq *q, const struct lk_grant_out *out)
{
	struct lk_list *l, *n;

	lk_list_each (l, n, &q->convertq)
		bast_holders(q, rq_of(l), rq_of(l)->rqmode, out);
	if (!lk_list_empty(&q->waitq)) {
		struct lk_rq *head = rq_of(q->waitq.next);

		bast_holders(q, head, head->rqmode, out);
	}
}

/* Is converter @i on a cycle of the wait-for graph among @cv? */
static int on_cycle(struct lk_rq **cv, size_t n, size_t i, char *seen,
		    size_t *stack)
{
	size_t sp = 0;

	memset(seen, 0, n);
	stack[sp++] = i;
	while (sp > 0) {
		size_t a = stack[--sp];

		for (size_t b = 0; b < n; b++) {
			if (b == a || lk_compat(cv[a]->rqmode, cv[b]->grmode))
				continue;
			if (b == i)
				return 1;
			if (!seen[b]) {
				seen[b] = 1;
				stack[sp++] = b;
			}
		}
	}
	return 0;
}

/* Fail the last converter on a cycle with -EDEADLK; 1 if one was. */
static int break_deadlock(struct lk_rsq *q, const struct lk_grant_out *out)
{
	struct lk_list *l, *n;
	struct lk_rq **cv;
	size_t cnt = 0, k = 0, *stack;
	char *seen;
	int found = 0;

	lk_list_each (l, n, &q->convertq)
		cnt++;
	if (cnt < 2)
		return 0;
	cv = malloc(cnt * (sizeof(*cv) + sizeof(*stack) + 1));
	if (cv == NULL)
		return 0;
	stack = (size_t *)(cv + cnt);
	seen = (char *)(stack + cnt);
	lk_list_each (l, n, &q->convertq)
		cv[k++] = rq_of(l);
	for (size_t i = cnt; i-- > 0;) {
		if (on_cycle(cv, cnt, i, seen, stack)) {
			cv[i]->rqmode = -1;
			move(q, cv[i], LK_Q_GRANT);
			out->grant(out->ctx, q, cv[i], -EDEADLK);
			found = 1;
			break;
		}
	}
	free(cv);
	return found;
}

static void grant_waiters(struct lk_rsq *q, const struct lk_grant_out *out)
{
	struct lk_list *l, *n;

	if (q->hold) {
		/* recovery: only LK_NOEXP requests, in order, may pass */
		lk_list_each (l, n, &q->waitq)
			if ((rq_of(l)->flags & LK_NOEXP) &&
			    can_grant(q, rq_of(l)))
				do_grant(q, rq_of(l), out);
		return;
	}
	while (!lk_list_empty(&q->waitq)) {
		struct lk_rq *head = rq_of(q->waitq.next);

		if (!can_grant(q, head))
			break;
		do_grant(q, head, out);
	}
}

/*
 * A NOQUEUE request is answered at once, so it never waits in a queue,
 * except one rebuilt by recovery (lk_grant_restore: it was in flight
 * when the old master went away). What could not be granted now is
 * refused now, as lk_grant_request and lk_grant_convert do; left
 * waiting it would wait behind a holder that may never let go. Returns
 * how many were refused (the requests behind them may go now).
 */
static int refuse_noqueue(struct lk_rsq *q, const struct lk_grant_out *out)
{
	struct lk_list *l, *n;
	struct lk_rq *rq;
	int refused = 0;

	lk_list_each (l, n, &q->convertq) {
		rq = rq_of(l);
		if (rq->flags & LK_NOQUEUE) {
			move(q, rq, LK_Q_GRANT);
			rq->rqmode = -1;
			out->grant(out->ctx, q, rq, -EAGAIN);
			refused++;
		}
	}
	lk_list_each (l, n, &q->waitq) {
		rq = rq_of(l);
		if (rq->flags & LK_NOQUEUE) {
			move(q, rq, LK_Q_NONE);
			rq->rqmode = -1;
			out->grant(out->ctx, q, rq, -EAGAIN);
			refused++;
		}
	}
	return refused;
}

void lk_grant_pending(struct lk_rsq *q, const struct lk_grant_out *out)
{
	struct lk_list *l, *n;

again:
	lk_list_each (l, n, &q->convertq) {
		if (can_grant(q, rq_of(l))) {
			do_grant(q, rq_of(l), out);
			goto again;
		}
	}
	if (!q->hold && break_deadlock(q, out))
		goto again;
	if (lk_list_empty(&q->convertq) || q->hold)
		grant_waiters(q, out);
	if (refuse_noqueue(q, out) > 0)
		goto again;
	send_basts(q, out);
}

int lk_grant_now(const struct lk_rsq *q, int mode, uint32_t flags)
{
	const struct lk_list *l;

	if (!lk_list_empty(&q->convertq) || !lk_list_empty(&q->waitq) ||
	    (q->hold && !(flags & LK_NOEXP)))
		return 0;
	for (l = q->grantq.next; l != &q->grantq; l = l->next)
		if (!lk_compat(mode,
			       LK_CONTAINER(l, struct lk_rq, link)->grmode))
			return 0;
	return 1;
}

void lk_grant_take(struct lk_rsq *q, struct lk_rq *rq, int mode, uint32_t flags)
{
	rq->grmode = -1;
	rq->rqmode = (int8_t)mode;
	rq->flags = flags;
	do_grant_quiet(q, rq);
}

void lk_grant_request(struct lk_rsq *q, struct lk_rq *rq, int mode,
		      uint32_t flags, const struct lk_grant_out *out)
{
	if (lk_grant_now(q, mode, flags)) {
		lk_grant_take(q, rq, mode, flags);
		out->grant(out->ctx, q, rq, 0);
		return;
	}
	rq->grmode = -1;
	rq->rqmode = (int8_t)mode;
	rq->flags = flags;
	if (flags & LK_NOQUEUE) {
		if (flags & LK_NOQUEUEBAST)
			bast_holders(q, rq, mode, out);
		rq->rqmode = -1;
		out->grant(out->ctx, q, rq, -EAGAIN);
		return;
	}
	move(q, rq, LK_Q_WAIT);
	lk_grant_pending(q, out);
}

int lk_grant_convert(struct lk_rsq *q, struct lk_rq *rq, int mode,
		     uint32_t flags, const void *lvb,
		     const struct lk_grant_out *out)
{
	if (rq->queue != LK_Q_GRANT)
		return -EBUSY;
	if (lvb != NULL && lk_lvb_op(rq->grmode, mode) == LK_LVB_WRITE)
		write_lvb(q, lvb);
	rq->rqmode = (int8_t)mode;
	rq->flags = flags;
	if (can_grant(q, rq) &&
	    (!(flags & LK_QUECVT) || lk_list_empty(&q->convertq))) {
		do_grant(q, rq, out);
		lk_grant_pending(q, out);
		return 0;
	}
	if (flags & LK_NOQUEUE) {
		if (flags & LK_NOQUEUEBAST)
			bast_holders(q, rq, mode, out);
		rq->rqmode = -1;
		out->grant(out->ctx, q, rq, -EAGAIN);
		return 0;
	}
	move(q, rq, LK_Q_CONVERT);
	lk_grant_pending(q, out);
	return 0;
}

int lk_grant_unlock(struct lk_rsq *q, struct lk_rq *rq, const void *lvb,
		    int invalidate, const struct lk_grant_out *out)
{
	if (rq->queue != LK_Q_GRANT)
		return -EBUSY;
	if (lvb != NULL && rq->grmode >= LK_PW)
		write_lvb(q, lvb);
	if (invalidate)
		q->lvb_valid = 0;
	move(q, rq, LK_Q_NONE);
	rq->grmode = -1;
	lk_grant_pending(q, out);
	return 0;
}

int lk_grant_cancel(struct lk_rsq *q, struct lk_rq *rq,
		    const struct lk_grant_out *out)
{
	if (rq->queue == LK_Q_WAIT)
		move(q, rq, LK_Q_NONE);
	else if (rq->queue == LK_Q_CONVERT)
		move(q, rq, LK_Q_GRANT);
	else
		return -EALREADY;
	rq->rqmode = -1;
	out->grant(out->ctx, q, rq, -ECANCELED);
	lk_grant_pending(q, out);
	return 0;
}

void lk_grant_purge(struct lk_rsq *q, struct lk_rq *rq,
		    const struct lk_grant_out *out)
{
	move(q, rq, LK_Q_NONE);
	rq->grmode = -1;
	rq->rqmode = -1;
	if (out != NULL)
		lk_grant_pending(q, out);
}

void lk_grant_restore(struct lk_rsq *q, struct lk_rq *rq, int grmode,
		      int rqmode, uint32_t flags)
{
	rq->grmode = (int8_t)grmode;
	rq->rqmode = (int8_t)rqmode;
	rq->flags = flags;
	rq->bastmode = -1;
	if (rqmode >= 0 && grmode >= 0)
		move(q, rq, LK_Q_CONVERT);
	else if (rqmode >= 0)
		move(q, rq, LK_Q_WAIT);
	else
		move(q, rq, LK_Q_GRANT);
}

static int check_queue(const struct lk_list *h, int queue, uint32_t *cnt)
{
	const struct lk_list *l;

	for (l = h->next; l != h; l = l->next) {
		const struct lk_rq *rq = LK_CONTAINER(l, struct lk_rq, link);

		(*cnt)++;
		if (rq->queue != queue)
			return -EPROTO;
		if ((queue == LK_Q_WAIT) != (rq->grmode < 0))
			return -EPROTO;
		if ((queue == LK_Q_GRANT) != (rq->rqmode < 0))
			return -EPROTO;
	}
	return 0;
}

static int grmode_of(const struct lk_list *l)
{
	return LK_CONTAINER(l, struct lk_rq, link)->grmode;
}

static int check_compat(const struct lk_list *a, const struct lk_list *b)
{
	const struct lk_list *x, *y;

	for (x = a->next; x != a; x = x->next)
		for (y = b->next; y != b; y = y->next)
			if (x != y && !lk_compat(grmode_of(x), grmode_of(y)))
				return -EPROTO;
	return 0;
}

int lk_grant_check(const struct lk_rsq *q)
{
	uint32_t cnt = 0;

	if (check_queue(&q->grantq, LK_Q_GRANT, &cnt) ||
	    check_queue(&q->convertq, LK_Q_CONVERT, &cnt) ||
	    check_queue(&q->waitq, LK_Q_WAIT, &cnt) || cnt != q->nlocks)
		return -EPROTO;
	if (check_compat(&q->grantq, &q->grantq) ||
	    check_compat(&q->grantq, &q->convertq) ||
	    check_compat(&q->convertq, &q->convertq))
		return -EPROTO;
	return 0;
}
