/*
 * lk_plock.c — POSIX record locks across the lockspace (PROTOCOL.md §14).
 *
 * One member, the plock server (the lowest node id of the generation in
 * force, ls->memv[0]), keeps the ranges of every owner of every node in
 * a table per inode, with the FIFO of the requests that wait. Every node
 * (the server too, without a message) sends it its requests as PLOCK
 * records and applies the answers to its own copy of the ranges its
 * owners hold (the client table). Because one node sees every waiting
 * request of the cluster, a deadlock across inodes and nodes is a cycle
 * in a graph it holds whole: the request that would close one is refused
 * with -EDEADLK, as fcntl(F_SETLKW) does on one machine.
 *
 * Request states (client side, struct lk_plock.state):
 *
 *   IDLE --lk_plock--> QUEUED --traffic allowed--> SENT --reply--> DONE
 *                        ^                           |
 *                        +--- recovery phase 1 ------+
 *
 * A request completes only by its server's reply (or by a cancel before
 * it was sent, or the close), and the client applies a reply to its own
 * table in the order the server answered, so the client table of a node
 * is the server's table restricted to that node's owners. Recovery needs
 * nothing else: in phase 1 the server drops its table and every SENT
 * request goes back to QUEUED (a reply from the old generation is
 * dropped by the recovery filter); in phase 4 each node sends its client
 * table to the new server (PRCOM, before its DONE(4): the server has every
 * survivor's ranges when it enters phase 5, and none of a dead node's);
 * in phase 5 the requests are sent again, in order.
 *
 * Locking: ls->mu protects all of it (struct lk_pl and every struct
 * lk_plock between lk_plock() and its completion). Completions run on
 * the callback thread (lk_cb_push_plock), without ls->mu.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lockmgr/cv_wait.h"
#include "lockmgr/lk_internal.h"

#define PL_HASH 1024u
#define PL_DL_MAX 1024u /* owners a deadlock search visits at most */

enum { PL_CANCEL = 5, PL_REPLY = 6 }; /* wire ops beyond the API's */
enum { PL_WAITED = 1 << 1 };	      /* reply flag: it had to wait */
enum pl_state { PL_IDLE = 0, PL_QUEUED, PL_SENT, PL_DONE };

struct pl_range {
	uint64_t start, end; /* inclusive */
	uint32_t pid;
	uint8_t type; /* LK_PL_RD or LK_PL_WR */
};

struct pl_owner {
	struct lk_list link; /* pl_ino.owners */
	uint32_t node;
	uint64_t owner;
	uint64_t tag; /* client: tag of its latest request */
	unsigned n;
	struct pl_range *r; /* n ranges, sorted by start, disjoint */
};

/* Server: a LK_PL_WAIT lock that conflicts. */
struct pl_wait {
	struct lk_list link; /* pl_ino.waiters, FIFO */
	struct lk_list all;  /* lk_pl.waiters (the deadlock search) */
	struct pl_ino *pi;
	uint32_t node;
	struct lk_rec_plock rec;
};

struct pl_ino {
	struct pl_ino *hnext;
	uint64_t ino;
	struct lk_list owners;	/* struct pl_owner */
	struct lk_list waiters; /* server: struct pl_wait */
};

struct pl_table {
	struct pl_ino *hash[PL_HASH];
};

struct lk_pl {
	struct pl_table cli;	/* this node's owners' ranges */
	struct pl_table srv;	/* server: every node's */
	struct lk_list pending; /* struct lk_plock, QUEUED or SENT, FIFO */
	struct lk_list waiters; /* server: every struct pl_wait */
	uint64_t next_reqid;
};

/* ---- ranges of one owner ---- */

static int type_conflict(uint8_t a, uint8_t b)
{
	return a == LK_PL_WR || b == LK_PL_WR;
}

static int overlaps(const struct pl_range *r, uint64_t s, uint64_t e)
{
	return r->start <= e && s <= r->end;
}

/* Insert @nr[k] = @x keeping @nr sorted by start. */
static void sorted_add(struct pl_range *nr, unsigned k, struct pl_range x)
{
	unsigned i = k;

	while (i > 0 && nr[i - 1].start > x.start) {
		nr[i] = nr[i - 1];
		i--;
	}
	nr[i] = x;
}

/* Merge neighbours of one type that overlap or touch. Returns the count. */
static unsigned merge_adjacent(struct pl_range *nr, unsigned k)
{
	unsigned out = 0;

	for (unsigned i = 0; i < k; i++) {
		struct pl_range *prev = out > 0 ? &nr[out - 1] : NULL;

		if (prev != NULL && prev->type == nr[i].type &&
		    (prev->end == UINT64_MAX || prev->end + 1 >= nr[i].start)) {
			if (nr[i].end > prev->end)
				prev->end = nr[i].end;
			prev->pid = nr[i].pid;
			continue;
		}
		nr[out++] = nr[i];
	}
	return out;
}

/*
 * Set [s, e] of @o to @type (LK_PL_UN: release it) as fcntl does: what it
 * covers of the owner's ranges is replaced (split where it covers part
 * of one), then ranges of one type that overlap or touch are merged.
 * 0, or -ENOMEM with @o unchanged.
 */
static int owner_set(struct pl_owner *o, uint8_t type, uint64_t s, uint64_t e,
		     uint32_t pid)
{
	/* one range can stick out on both sides: n + 1 pieces, + the new */
	struct pl_range *nr = malloc((o->n + 2) * sizeof(*nr));
	unsigned k = 0;

	if (nr == NULL)
		return -ENOMEM;
	for (unsigned i = 0; i < o->n; i++) {
		struct pl_range r = o->r[i];

		if (!overlaps(&r, s, e)) {
			nr[k++] = r;
			continue;
		}
		if (r.start < s) {
			nr[k] = r;
			nr[k++].end = s - 1;
		}
		if (r.end > e) {
			nr[k] = r;
			nr[k++].start = e + 1;
		}
	}
	if (type != LK_PL_UN) {
		sorted_add(nr, k, (struct pl_range){s, e, pid, type});
		k++;
	}
	free(o->r);
	o->r = nr;
	o->n = merge_adjacent(nr, k);
	return 0;
}

static int owner_holds(const struct pl_owner *o, uint64_t s, uint64_t e)
{
	for (unsigned i = 0; i < o->n; i++)
		if (overlaps(&o->r[i], s, e))
			return 1;
	return 0;
}

/* ---- tables ---- */

static struct pl_ino *ino_get(struct pl_table *t, uint64_t ino, int create)
{
	struct pl_ino **pp = &t->hash[(ino * 0x9e3779b97f4a7c15ull) >> 54];
	struct pl_ino *pi;

	for (pi = *pp; pi != NULL; pi = pi->hnext)
		if (pi->ino == ino)
			return pi;
	if (!create)
		return NULL;
	pi = calloc(1, sizeof(*pi));
	if (pi == NULL)
		return NULL;
	pi->ino = ino;
	lk_list_init(&pi->owners);
	lk_list_init(&pi->waiters);
	pi->hnext = *pp;
	*pp = pi;
	return pi;
}

/* Free @pi if nothing is left in it. */
static void ino_put(struct pl_table *t, struct pl_ino *pi)
{
	struct pl_ino **pp = &t->hash[(pi->ino * 0x9e3779b97f4a7c15ull) >> 54];

	if (!lk_list_empty(&pi->owners) || !lk_list_empty(&pi->waiters))
		return;
	while (*pp != pi)
		pp = &(*pp)->hnext;
	*pp = pi->hnext;
	free(pi);
}

static struct pl_owner *owner_get(struct pl_ino *pi, uint32_t node,
				  uint64_t owner, int create)
{
	struct lk_list *l, *n;
	struct pl_owner *o;

	lk_list_each (l, n, &pi->owners) {
		o = LK_CONTAINER(l, struct pl_owner, link);
		if (o->node == node && o->owner == owner)
			return o;
	}
	if (!create)
		return NULL;
	o = calloc(1, sizeof(*o));
	if (o == NULL)
		return NULL;
	o->node = node;
	o->owner = owner;
	lk_list_add_tail(&pi->owners, &o->link);
	return o;
}

static void owner_free(struct pl_owner *o)
{
	lk_list_del(&o->link);
	free(o->r);
	free(o);
}

/* Drop @o if it holds nothing. */
static void owner_put(struct pl_owner *o)
{
	if (o != NULL && o->n == 0)
		owner_free(o);
}

static void table_clear(struct pl_table *t)
{
	struct lk_list *l, *n;

	for (unsigned h = 0; h < PL_HASH; h++) {
		while (t->hash[h] != NULL) {
			struct pl_ino *pi = t->hash[h];

			lk_list_each (l, n, &pi->owners)
				owner_free(
				    LK_CONTAINER(l, struct pl_owner, link));
			lk_list_each (l, n, &pi->waiters) {
				struct pl_wait *w =
				    LK_CONTAINER(l, struct pl_wait, link);

				lk_list_del(&w->all);
				free(w);
			}
			t->hash[h] = pi->hnext;
			free(pi);
		}
	}
}

/*
 * The first range another owner than (@node, @owner) holds on @pi that
 * conflicts with @type on [s, e]; its owner in *@who. NULL if none.
 */
static const struct pl_range *ino_conflict(struct pl_ino *pi, uint32_t node,
					   uint64_t owner, uint8_t type,
					   uint64_t s, uint64_t e,
					   struct pl_owner **who)
{
	struct lk_list *l, *n;

	lk_list_each (l, n, &pi->owners) {
		struct pl_owner *o = LK_CONTAINER(l, struct pl_owner, link);

		if (o->node == node && o->owner == owner)
			continue;
		for (unsigned i = 0; i < o->n; i++) {
			if (o->r[i].start > e)
				break;
			if (overlaps(&o->r[i], s, e) &&
			    type_conflict(type, o->r[i].type)) {
				if (who != NULL)
					*who = o;
				return &o->r[i];
			}
		}
	}
	return NULL;
}

static struct lk_pl *pl_get(struct lk_ls *ls)
{
	if (ls->pl == NULL) {
		ls->pl = calloc(1, sizeof(*ls->pl));
		if (ls->pl == NULL)
			return NULL;
		lk_list_init(&ls->pl->pending);
		lk_list_init(&ls->pl->waiters);
	}
	return ls->pl;
}

/* The plock server of the generation in force (or being recovered to). */
static uint32_t pl_server(const struct lk_ls *ls)
{
	return ls->nmemb > 0 ? ls->memv[0] : 0;
}

/* ---- deadlock search (server) ---- */

struct pl_key {
	uint32_t node;
	uint64_t owner;
};

struct pl_walk {
	struct pl_key *k;
	unsigned n;
};

static void walk_push(struct pl_walk *w, uint32_t node, uint64_t owner)
{
	for (unsigned i = 0; i < w->n; i++)
		if (w->k[i].node == node && w->k[i].owner == owner)
			return;
	if (w->n < PL_DL_MAX)
		w->k[w->n++] = (struct pl_key){node, owner};
}

/* Push every owner that blocks the lock @r of (@node, r->owner) on @pi. */
static void walk_blockers(struct pl_walk *w, struct pl_ino *pi, uint32_t node,
			  const struct lk_rec_plock *r)
{
	struct lk_list *l, *n;

	lk_list_each (l, n, &pi->owners) {
		struct pl_owner *o = LK_CONTAINER(l, struct pl_owner, link);

		if (o->node == node && o->owner == r->owner)
			continue;
		for (unsigned i = 0; i < o->n; i++) {
			if (overlaps(&o->r[i], r->start, r->end) &&
			    type_conflict(r->type, o->r[i].type)) {
				walk_push(w, o->node, o->owner);
				break;
			}
		}
	}
}

/*
 * Would (@node, r->owner) waiting for @r on @pi close a cycle? Walks the
 * wait-for graph from the owners blocking @r: an owner waits for those
 * that block its waiting requests (on any inode). At most PL_DL_MAX
 * owners are visited (beyond that the wait is allowed).
 */
static int pl_deadlock(struct lk_pl *p, struct pl_ino *pi, uint32_t node,
		       const struct lk_rec_plock *r)
{
	struct pl_key keys[PL_DL_MAX];
	struct pl_walk w = {keys, 0};
	struct lk_list *l, *n;

	walk_blockers(&w, pi, node, r);
	for (unsigned i = 0; i < w.n; i++) {
		struct pl_key k = w.k[i];

		if (k.node == node && k.owner == r->owner)
			return 1;
		lk_list_each (l, n, &p->waiters) {
			struct pl_wait *x =
			    LK_CONTAINER(l, struct pl_wait, all);

			if (x->node == k.node && x->rec.owner == k.owner)
				walk_blockers(&w, x->pi, x->node, &x->rec);
		}
	}
	return 0;
}

/* ---- server ---- */

static void cli_rx_reply(struct lk_ls *ls, const struct lk_rec_plock *r);

/* Answer @req of @node with @status (@cf: GETLK's conflict, or NULL). */
static void srv_answer(struct lk_ls *ls, uint32_t node,
		       const struct lk_rec_plock *req, int status,
		       uint8_t flags)
{
	struct lk_rec_plock a = *req, *out;

	a.op = PL_REPLY;
	a.status = status;
	a.flags = flags;
	if (node == ls->nodeid) {
		cli_rx_reply(ls, &a);
		return;
	}
	out = lk_out_add(ls, node, LK_M_PLOCK);
	if (out != NULL)
		*out = a;
}

static void srv_getlk(struct lk_ls *ls, uint32_t node,
		      const struct lk_rec_plock *r)
{
	struct pl_ino *pi = ino_get(&ls->pl->srv, r->ino, 0);
	const struct pl_range *cf = NULL;
	struct pl_owner *who = NULL;
	struct lk_rec_plock a = *r;

	if (pi != NULL)
		cf = ino_conflict(pi, node, r->owner, r->type, r->start, r->end,
				  &who);
	a.type = LK_PL_UN;
	if (cf != NULL) {
		a.type = cf->type;
		a.start = cf->start;
		a.end = cf->end;
		a.pid = cf->pid;
		a.node = who->node;
	}
	srv_answer(ls, node, &a, 0, 0);
}

/* Grant, in FIFO order, the waiters of @pi nothing blocks any more. */
static void srv_retry(struct lk_ls *ls, struct pl_ino *pi)
{
	struct lk_list *l, *n;

	lk_list_each (l, n, &pi->waiters) {
		struct pl_wait *w = LK_CONTAINER(l, struct pl_wait, link);
		struct lk_rec_plock *r = &w->rec;
		struct pl_owner *o;
		int ret = -ENOMEM;

		if (ino_conflict(pi, w->node, r->owner, r->type, r->start,
				 r->end, NULL) != NULL)
			continue;
		o = owner_get(pi, w->node, r->owner, 1);
		if (o != NULL)
			ret = owner_set(o, r->type, r->start, r->end, r->pid);
		lk_list_del(&w->link);
		lk_list_del(&w->all);
		srv_answer(ls, w->node, r, ret, PL_WAITED);
		free(w);
	}
}

static void srv_lock(struct lk_ls *ls, struct pl_ino *pi, uint32_t node,
		     const struct lk_rec_plock *r)
{
	struct pl_owner *o;
	struct pl_wait *w;
	int ret = -ENOMEM;

	if (ino_conflict(pi, node, r->owner, r->type, r->start, r->end, NULL) ==
	    NULL) {
		o = owner_get(pi, node, r->owner, 1);
		if (o != NULL)
			ret = owner_set(o, r->type, r->start, r->end, r->pid);
		srv_answer(ls, node, r, ret, 0);
		srv_retry(ls, pi); /* a downgrade may free others */
		return;
	}
	if (!(r->flags & LK_PL_WAIT)) {
		srv_answer(ls, node, r, -EAGAIN, 0);
		return;
	}
	if (pl_deadlock(ls->pl, pi, node, r)) {
		srv_answer(ls, node, r, -EDEADLK, 0);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (w == NULL) {
		srv_answer(ls, node, r, -ENOMEM, 0);
		return;
	}
	w->pi = pi;
	w->node = node;
	w->rec = *r;
	lk_list_add_tail(&pi->waiters, &w->link);
	lk_list_add_tail(&ls->pl->waiters, &w->all);
}

static void srv_unlock(struct lk_ls *ls, struct pl_ino *pi, uint32_t node,
		       const struct lk_rec_plock *r)
{
	struct pl_owner *o = owner_get(pi, node, r->owner, 0);
	int ret = 0;

	if (o != NULL && r->op == LK_PL_DROP)
		owner_free(o);
	else if (o != NULL)
		ret = owner_set(o, LK_PL_UN, r->start, r->end, 0);
	if (ret == 0 && o != NULL && r->op != LK_PL_DROP)
		owner_put(o);
	srv_answer(ls, node, r, ret, 0);
	srv_retry(ls, pi);
}

static void srv_cancel(struct lk_ls *ls, struct pl_ino *pi, uint32_t node,
		       const struct lk_rec_plock *r)
{
	struct lk_list *l, *n;

	lk_list_each (l, n, &pi->waiters) {
		struct pl_wait *w = LK_CONTAINER(l, struct pl_wait, link);

		if (w->node != node || w->rec.reqid != r->reqid)
			continue;
		lk_list_del(&w->link);
		lk_list_del(&w->all);
		srv_answer(ls, node, &w->rec, -EINTR, 0);
		free(w);
		return;
	}
	/* answered already: the grant crossed the cancel */
}

static int rec_valid(const struct lk_rec_plock *r)
{
	if (r->start > r->end)
		return 0;
	switch (r->op) {
	case LK_PL_LOCK:
	case LK_PL_GETLK:
		return r->type == LK_PL_RD || r->type == LK_PL_WR;
	case LK_PL_UNLOCK:
	case LK_PL_DROP:
	case PL_CANCEL:
		return 1;
	default:
		return 0;
	}
}

/* One request from @node (this node included). */
static void srv_rx(struct lk_ls *ls, uint32_t node,
		   const struct lk_rec_plock *r)
{
	struct pl_ino *pi;

	if (!rec_valid(r) || pl_server(ls) != ls->nodeid) {
		ls->stats.bad_frames++;
		lk_log(ls, 1, "PLOCK from %u: %s", node,
		       rec_valid(r) ? "this node is not the plock server"
				    : "bad op, type or range");
		return;
	}
	ls->stats.plock.served++;
	if (r->op == LK_PL_GETLK) {
		srv_getlk(ls, node, r);
		return;
	}
	pi = ino_get(&ls->pl->srv, r->ino, r->op == LK_PL_LOCK);
	if (pi == NULL) {
		/* nothing held there: unlock and cancel are no-ops */
		if (r->op != PL_CANCEL)
			srv_answer(ls, node, r,
				   r->op == LK_PL_LOCK ? -ENOMEM : 0, 0);
		return;
	}
	if (r->op == LK_PL_LOCK)
		srv_lock(ls, pi, node, r);
	else if (r->op == PL_CANCEL)
		srv_cancel(ls, pi, node, r);
	else
		srv_unlock(ls, pi, node, r);
	ino_put(&ls->pl->srv, pi);
}

/* ---- client ---- */

static void rec_from(struct lk_rec_plock *r, const struct lk_plock *pl,
		     uint8_t op)
{
	memset(r, 0, sizeof(*r));
	r->ino = pl->ino;
	r->owner = pl->owner;
	r->start = pl->start;
	r->end = pl->end;
	r->reqid = pl->reqid;
	r->pid = pl->pid;
	r->op = op;
	r->type = pl->type;
	r->flags = pl->flags & LK_PL_WAIT;
}

static void count_outcome(struct lk_ls *ls, const struct lk_plock *pl)
{
	struct lk_plock_stats *s = &ls->stats.plock;

	if (pl->status == -EINTR)
		s->cancels++;
	if (pl->op != LK_PL_LOCK)
		return;
	if (pl->status == 0)
		s->granted++;
	else if (pl->status == -EAGAIN)
		s->conflicts++;
	else if (pl->status == -EDEADLK)
		s->deadlocks++;
}

static void cli_complete(struct lk_ls *ls, struct lk_plock *pl, int status)
{
	lk_list_del(&pl->link);
	pl->status = status;
	pl->state = PL_DONE;
	count_outcome(ls, pl);
	if (pl->in_call)
		return;		/* lk_plock returns 0: no callback */
	if (pl->done == NULL) { /* lk_plock_wait */
		if (pl->rx_polled && !ls->rx_in_poller)
			ls->xp.wake_rx(ls->xp.ctx);
		else if (pl->wcv != NULL)
			pthread_cond_signal(pl->wcv);
		return;
	}
	if (lk_cb_push_plock(ls, pl) != 0)
		lk_log(ls, 0, "plock completion lost (no memory)");
}

static void cli_send(struct lk_ls *ls, struct lk_plock *pl, uint8_t op)
{
	uint32_t srv = pl_server(ls);
	struct lk_rec_plock r, *out;

	rec_from(&r, pl, op);
	if (op != PL_CANCEL)
		pl->state = PL_SENT;
	if (srv == ls->nodeid) {
		srv_rx(ls, srv, &r);
		return;
	}
	out = lk_out_add(ls, srv, LK_M_PLOCK);
	if (out != NULL)
		*out = r;
	else if (op != PL_CANCEL)
		cli_complete(ls, pl, -ENOMEM);
}

static struct lk_plock *cli_find(struct lk_pl *p, uint64_t reqid)
{
	struct lk_list *l, *n;

	lk_list_each (l, n, &p->pending) {
		struct lk_plock *pl = LK_CONTAINER(l, struct lk_plock, link);

		if (pl->reqid == reqid)
			return pl->state == PL_SENT ? pl : NULL;
	}
	return NULL;
}

/* Apply the server's answer to @pl to the client table. */
static int cli_apply(struct lk_pl *p, struct lk_ls *ls, struct lk_plock *pl)
{
	struct pl_ino *pi = ino_get(&p->cli, pl->ino, pl->op == LK_PL_LOCK);
	struct pl_owner *o;
	int ret = 0;

	if (pi == NULL)
		return pl->op == LK_PL_LOCK ? -ENOMEM : 0;
	o = owner_get(pi, ls->nodeid, pl->owner, pl->op == LK_PL_LOCK);
	if (o == NULL) {
		ret = pl->op == LK_PL_LOCK ? -ENOMEM : 0;
	} else if (pl->op == LK_PL_DROP) {
		owner_free(o);
	} else {
		o->tag = pl->tag;
		ret = owner_set(o, pl->op == LK_PL_LOCK ? pl->type : LK_PL_UN,
				pl->start, pl->end, pl->pid);
		owner_put(o);
	}
	ino_put(&p->cli, pi);
	return ret;
}

static void cli_rx_reply(struct lk_ls *ls, const struct lk_rec_plock *r)
{
	struct lk_plock *pl = cli_find(ls->pl, r->reqid);
	int status = r->status;

	if (pl == NULL)
		return; /* cancelled before it was sent, or the close */
	if (status == 0 && pl->op != LK_PL_GETLK)
		status = cli_apply(ls->pl, ls, pl);
	if (status != 0 && pl->op == LK_PL_LOCK && r->status == 0)
		lk_log(ls, 0, "plock: granted range lost (no memory)");
	if (pl->op == LK_PL_LOCK && status == 0 && (r->flags & PL_WAITED))
		ls->stats.plock.waits++;
	if (pl->op == LK_PL_GETLK) {
		pl->cf_type = r->type;
		pl->cf_start = r->start;
		pl->cf_end = r->end;
		pl->cf_pid = r->pid;
		pl->cf_node = r->node;
	}
	cli_complete(ls, pl, status);
}

/* Is an unlock of @pl a no-op: nothing held there, nothing pending? */
static int cli_nothing_to_release(struct lk_pl *p, uint32_t self,
				  const struct lk_plock *pl)
{
	struct pl_ino *pi = ino_get(&p->cli, pl->ino, 0);
	struct pl_owner *o = pi ? owner_get(pi, self, pl->owner, 0) : NULL;
	struct lk_list *l, *n;

	if (o != NULL && owner_holds(o, pl->start, pl->end))
		return 0;
	lk_list_each (l, n, &p->pending) {
		struct lk_plock *x = LK_CONTAINER(l, struct lk_plock, link);

		if (x->ino == pl->ino && x->owner == pl->owner)
			return 0;
	}
	return 1;
}

static int cli_submit(struct lk_ls *ls, struct lk_pl *p, struct lk_plock *pl)
{
	struct lk_plock_stats *s = &ls->stats.plock;

	pl->reqid = ++p->next_reqid;
	pl->status = 0;
	pl->wcv = NULL;
	pl->rx_polled = 0;
	pl->cf_type = LK_PL_UN;
	if (pl->op == LK_PL_LOCK)
		s->locks++;
	else if (pl->op == LK_PL_GETLK)
		s->getlks++;
	else
		s->unlocks++;
	if ((pl->op == LK_PL_UNLOCK || pl->op == LK_PL_DROP) &&
	    cli_nothing_to_release(p, ls->nodeid, pl)) {
		s->local_only++;
		pl->state = PL_DONE;
		return 0;
	}
	pl->state = PL_QUEUED;
	pl->in_call = 1;
	lk_list_add_tail(&p->pending, &pl->link);
	if (lk_traffic_ok(ls))
		cli_send(ls, pl, pl->op);
	pl->in_call = 0;
	return pl->state == PL_DONE ? 0 : 1;
}

static int plock_args_valid(const struct lk_plock *pl)
{
	if (pl->start > pl->end)
		return 0;
	switch (pl->op) {
	case LK_PL_LOCK:
	case LK_PL_GETLK:
		return pl->type == LK_PL_RD || pl->type == LK_PL_WR;
	case LK_PL_UNLOCK:
	case LK_PL_DROP:
		return 1;
	default:
		return 0;
	}
}

int lk_plock(struct lk_ls *ls, struct lk_plock *pl)
{
	struct lk_pl *p;
	int ret;

	if (!plock_args_valid(pl))
		return -EINVAL;
	if (pl->op == LK_PL_DROP) {
		pl->start = 0;
		pl->end = UINT64_MAX;
	}
	lk_api_lock(ls);
	if (ls->closing || ls->fenced) {
		ret = -ESHUTDOWN;
		goto out_unlock;
	}
	p = pl_get(ls);
	ret = p == NULL ? -ENOMEM : cli_submit(ls, p, pl);
	lk_out_flush(ls);
out_unlock:
	pthread_mutex_unlock(&ls->mu);
	return ret;
}

/* Read the server's link on this thread while @pl waits for its answer
 * (see rx_wait in lk_core.c). 0 if it waited, -EAGAIN if it cannot. */
static int plock_rx_wait(struct lk_ls *ls, struct lk_plock *pl)
{
	uint32_t srv = pl_server(ls);
	int ret;

	if (ls->xp.wait_rx == NULL || ls->rx_poller || pl->state != PL_SENT ||
	    srv == 0 || srv == ls->nodeid)
		return -EAGAIN;
	ls->rx_poller = 1;
	pl->rx_polled = 1;
	ret = ls->xp.wait_rx(ls->xp.ctx, srv, ls->spin_ns);
	pl->rx_polled = 0;
	ls->rx_poller = 0;
	return ret;
}

int lk_plock_wait(struct lk_ls *ls, struct lk_plock *pl)
{
	pthread_cond_t own;
	int st;

	lk_api_lock(ls);
	if (pl->state != PL_DONE) {
		pthread_cond_init(&own, NULL);
		pl->wcv = &own;
		while (pl->state != PL_DONE) {
			if (ls->fenced) { /* no answer will come */
				cli_complete(ls, pl, -ESHUTDOWN);
				break;
			}
			if (plock_rx_wait(ls, pl) == 0)
				continue;
			/* 100 ms at most: a fence is not signalled to it */
			cvw_wait_ms(&own, &ls->mu, 100);
		}
		pl->wcv = NULL;
		pthread_cond_destroy(&own);
	}
	st = pl->status;
	pthread_mutex_unlock(&ls->mu);
	return st;
}

int lk_plock_cancel(struct lk_ls *ls, struct lk_plock *pl)
{
	int ret = 0;

	lk_api_lock(ls);
	if (pl->state == PL_QUEUED || (pl->state == PL_SENT && ls->fenced))
		cli_complete(ls, pl, -EINTR); /* fenced: nobody will answer */
	else if (pl->state == PL_SENT && pl->op == LK_PL_LOCK)
		cli_send(ls, pl, PL_CANCEL);
	else
		ret = -EALREADY;
	lk_out_flush(ls);
	pthread_mutex_unlock(&ls->mu);
	return ret;
}

static void free_done(struct lk_plock *pl, void *arg)
{
	(void)arg;
	free(pl);
}

/* Send a DROP of @owner on @ino (lk_plock_drop_tag); ls->mu held. */
static int drop_owner(struct lk_ls *ls, uint64_t ino, uint64_t owner,
		      uint64_t tag)
{
	struct lk_plock *pl = calloc(1, sizeof(*pl));

	if (pl == NULL)
		return -ENOMEM;
	*pl = (struct lk_plock){.ino = ino,
				.owner = owner,
				.end = UINT64_MAX,
				.tag = tag,
				.op = LK_PL_DROP,
				.done = free_done};
	if (cli_submit(ls, ls->pl, pl) == 0)
		free(pl);
	return 0;
}

int lk_plock_drop_tag(struct lk_ls *ls, uint64_t ino, uint64_t tag)
{
	uint64_t owners[64];
	unsigned n = 0;
	struct lk_list *l, *nx;
	struct pl_ino *pi;
	int count = 0;

	lk_api_lock(ls);
	pi = ls->pl != NULL ? ino_get(&ls->pl->cli, ino, 0) : NULL;
	if (pi == NULL || ls->closing || ls->fenced)
		goto out_unlock;
	/* collect first: a DROP answered inline frees owners and @pi */
	lk_list_each (l, nx, &pi->owners) {
		struct pl_owner *o = LK_CONTAINER(l, struct pl_owner, link);

		if (o->tag == tag && n < sizeof(owners) / sizeof(owners[0]))
			owners[n++] = o->owner;
	}
	for (unsigned i = 0; i < n; i++)
		if (drop_owner(ls, ino, owners[i], tag) == 0)
			count++;
	lk_out_flush(ls);
out_unlock:
	pthread_mutex_unlock(&ls->mu);
	return count;
}

/* ---- receive and recovery ---- */

void lk_plock_rx(struct lk_ls *ls, uint32_t sender,
		 const struct lk_rec_plock *r, unsigned n)
{
	if (pl_get(ls) == NULL)
		return;
	for (unsigned i = 0; i < n; i++) {
		if (r[i].op == PL_REPLY)
			cli_rx_reply(ls, &r[i]);
		else
			srv_rx(ls, sender, &r[i]);
	}
}

void lk_plock_rx_rcom(struct lk_ls *ls, uint32_t sender,
		      const struct lk_rec_plock *r)
{
	struct pl_ino *pi;
	struct pl_owner *o;

	if (pl_get(ls) == NULL)
		return;
	/* only between the server's table drop (phase 1) and its use
	 * (phase 5): the senders' phase 4 */
	if (pl_server(ls) != ls->nodeid || ls->rphase < 3 || ls->rphase > 4 ||
	    r->start > r->end || (r->type != LK_PL_RD && r->type != LK_PL_WR)) {
		ls->stats.bad_frames++;
		lk_log(ls, 1, "PRCOM from %u refused", sender);
		return;
	}
	pi = ino_get(&ls->pl->srv, r->ino, 1);
	o = pi != NULL ? owner_get(pi, sender, r->owner, 1) : NULL;
	if (o == NULL || owner_set(o, r->type, r->start, r->end, r->pid) < 0)
		lk_log(ls, 0, "plock rebuild: range of %u lost (no memory)",
		       sender);
	ls->stats.plock.rebuilt++;
}

void lk_plock_recover_stop(struct lk_ls *ls)
{
	struct lk_list *l, *n;

	if (ls->pl == NULL)
		return;
	table_clear(&ls->pl->srv);
	lk_list_each (l, n, &ls->pl->pending) {
		struct lk_plock *pl = LK_CONTAINER(l, struct lk_plock, link);

		if (pl->state == PL_SENT)
			pl->state = PL_QUEUED;
	}
}

/* Recovery: send the ranges of @o on @pi to the new server @srv. */
static void send_owner(struct lk_ls *ls, uint32_t srv, const struct pl_ino *pi,
		       const struct pl_owner *o)
{
	for (unsigned i = 0; i < o->n; i++) {
		struct lk_rec_plock r = {.ino = pi->ino,
					 .owner = o->owner,
					 .start = o->r[i].start,
					 .end = o->r[i].end,
					 .pid = o->r[i].pid,
					 .type = o->r[i].type};
		struct lk_rec_plock *out;

		if (srv == ls->nodeid) {
			lk_plock_rx_rcom(ls, srv, &r);
			continue;
		}
		out = lk_out_add(ls, srv, LK_M_PRCOM);
		if (out != NULL)
			*out = r;
	}
}

void lk_plock_recover_send(struct lk_ls *ls)
{
	uint32_t srv = pl_server(ls);
	struct lk_list *l, *n;

	if (ls->pl == NULL)
		return;
	for (unsigned h = 0; h < PL_HASH; h++)
		for (struct pl_ino *pi = ls->pl->cli.hash[h]; pi != NULL;
		     pi = pi->hnext)
			lk_list_each (l, n, &pi->owners)
				send_owner(
				    ls, srv, pi,
				    LK_CONTAINER(l, struct pl_owner, link));
}

void lk_plock_recover_resume(struct lk_ls *ls)
{
	struct lk_list *l, *n;

	if (ls->pl == NULL)
		return;
	lk_list_each (l, n, &ls->pl->pending) {
		struct lk_plock *pl = LK_CONTAINER(l, struct lk_plock, link);

		if (pl->state == PL_QUEUED)
			cli_send(ls, pl, pl->op);
	}
}

void lk_plock_shutdown(struct lk_ls *ls)
{
	struct lk_list *l, *n;

	if (ls->pl == NULL)
		return;
	lk_list_each (l, n, &ls->pl->pending)
		cli_complete(ls, LK_CONTAINER(l, struct lk_plock, link),
			     -ESHUTDOWN);
}

void lk_plock_free(struct lk_ls *ls)
{
	if (ls->pl == NULL)
		return;
	table_clear(&ls->pl->cli);
	table_clear(&ls->pl->srv);
	free(ls->pl);
	ls->pl = NULL;
}
