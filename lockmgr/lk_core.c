/*
 * lk_core.c — the lockspace core on the requesting side: resources and
 * lkbs (lock handles), the public lock API (lk_lock_batch: lk_batch.c),
 * master lookup, the hold cache, the toss list, and the input that
 * answers this node's requests (its output: lk_out.c). Runs under ls->mu
 * (lk_internal.h); knows nothing about sockets or threads.
 *
 * An lkb goes NEW (master unknown: a LOOKUP is out) -> WAITING (request at
 * the master) -> GRANTED <-> CONVERTING, and DEAD once unlocked or after a
 * failed new request. When the master is this node the request runs
 * through the grant engine inside the API call, so an uncontended lock
 * costs no message, and a grant completed inside the call is returned as
 * LK_GRANTED_NOW instead of a callback (ls->sync_lkb marks that call).
 *
 * While recovery runs (lk_traffic_ok() false) operations only change the
 * lkb and are put on ls->deferred; recovery conveys the lkb states to the
 * masters and replays what is still owed (lk_core_kick_deferred).
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lockmgr/lk_internal.h"
#include "lockmgr/lk_net.h"
#ifdef LK_TIMELINE
uint64_t lk_tl[LK_TL_N];
#endif

#define LK_TOSS_NS_DEFAULT (10ull * 1000 * 1000 * 1000)
/*
 * How long a thread waiting for a remote master's reply polls for it
 * without sleeping (xp.wait_rx; stats rx_spins, rx_spin_hits): ls->spin_ns
 * (3/10 of the configuration's poll_us: 30 µs, about two loopback round
 * trips here), and for a batch what the master takes per lock on top,
 * within a bound. On this VM a sleeping thread's halted vCPU takes
 * longer to wake than a round trip; the poll yields the CPU at every
 * turn, so it holds up no other runnable thread.
 */
#define LK_SPIN_NS_DEFAULT (30ull * 1000)
#define LK_SPIN_PER_LOCK_NS 100ull
/* A resource mastered here that a peer used this recently is contended:
 * a local request on it reads pending input first (xp.poll_rx). */
#define LK_CONTENDED_NS (1000ull * 1000)
/* lk_unlock of such a resource yields the CPU once this many unlocks here
 * followed without a peer's lock record in between. */
#define LK_STREAK_YIELD 4
/* The shortest time an unused resource stays on the toss list, whatever
 * toss_ms says: with a shorter one, a lock taken and released in a loop
 * would wake the network thread to free its resource at every release
 * (lk_res_maybe_toss). */
#define LK_TOSS_MIN_NS (100ull * 1000 * 1000)
/* Output queued for a node past which an idle unlock sends at once
 * (unlock_may_wait): about a thousand UNLOCKS records. */
#define LK_UNLOCK_WAIT_MAX (16u << 10)

void lk_log(struct lk_ls *ls, int level, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ls->log != NULL)
		ls->log(level, msg, ls->uarg);
	else if (level <= 1)
		fprintf(stderr, "lk[%u]: %s\n", ls->nodeid, msg);
}

int lk_core_create(uint32_t nodeid, const struct lk_xport *xp,
		   struct lk_ls **out)
{
	size_t tb = LK_HASH_SIZE * sizeof(void *);
	struct lk_ls *ls;
	char *t;

	if (nodeid == 0 || nodeid >= LK_MAX_NODES)
		return -EINVAL;
	ls = calloc(1, sizeof(*ls));
	if (ls == NULL)
		return -ENOMEM;
	t = lk_tables_alloc(4 * tb);
	if (t == NULL) {
		free(ls);
		return -ENOMEM;
	}
	ls->tables = t;
	ls->res_hash = (struct lk_res **)t;
	ls->lkb_hash = (struct lk_lock **)(t + tb);
	ls->mst_hash = (struct lk_mst **)(t + 2 * tb);
	ls->dir_hash = (struct lk_dirent **)(t + 3 * tb);
	lk_pool_init(&ls->lkb_pool, sizeof(struct lk_lock));
	lk_pool_init(&ls->mst_pool, sizeof(struct lk_mst));
	lk_pool_init(&ls->res_pool, sizeof(struct lk_res));
	lk_pool_init(&ls->dir_pool, sizeof(struct lk_dirent));
	pthread_mutex_init(&ls->mu, NULL);
	pthread_cond_init(&ls->cv, NULL);
	pthread_cond_init(&ls->cbcv, NULL);
	ls->nodeid = nodeid;
	ls->xp = *xp;
	lk_list_init(&ls->toss);
	lk_list_init(&ls->deferred);
	ls->toss_ns = LK_TOSS_NS_DEFAULT;
	ls->spin_ns = LK_SPIN_NS_DEFAULT;
	ls->next_lkid = 1;
	*out = ls;
	return 0;
}

/* Free everything; no thread may use @ls any more. lkbs, master copies
 * and resources live in the pools' slabs: freed with them. */
void lk_core_destroy(struct lk_ls *ls)
{
	if (ls == NULL)
		return;
	lk_dir_clear(ls);
	lk_recover_free(ls);
	lk_plock_free(ls);
	lk_pool_destroy(&ls->lkb_pool);
	lk_pool_destroy(&ls->mst_pool);
	lk_pool_destroy(&ls->res_pool);
	lk_pool_destroy(&ls->dir_pool);
	for (int i = 0; i < LK_MAX_NODES; i++)
		free(ls->out[i].buf);
	free(ls->cbq);
	free(ls->tables);
	pthread_mutex_destroy(&ls->mu);
	pthread_cond_destroy(&ls->cv);
	pthread_cond_destroy(&ls->cbcv);
	free(ls);
}

/* ---- resources ---- */

struct lk_res *lk_res_find(struct lk_ls *ls, const struct lk_name *n,
			   uint64_t hash)
{
	struct lk_res *r = ls->res_hash[hash & LK_HASH_MASK];

	for (; r != NULL; r = r->hnext)
		if (lk_name_eq(&r->name, n))
			return r;
	return NULL;
}

void lk_res_untoss(struct lk_ls *ls, struct lk_res *res)
{
	if (res->on_toss) {
		lk_list_del(&res->toss);
		res->on_toss = 0;
		ls->stats.tossed--;
	}
}

/* Find or create; never NULL but on -ENOMEM. Takes it off the toss list. */
static struct lk_res *res_get_hashed(struct lk_ls *ls, const struct lk_name *n,
				     uint64_t hash)
{
	struct lk_res *r = lk_res_find(ls, n, hash);

	if (r != NULL) {
		lk_res_untoss(ls, r);
		return r;
	}
	r = lk_pool_get(&ls->res_pool);
	if (r == NULL)
		return NULL;
	r->name = *n;
	lk_rsq_init(&r->q);
	lk_list_init(&r->locks);
	lk_list_init(&r->toss);
	r->hnext = ls->res_hash[hash & LK_HASH_MASK];
	ls->res_hash[hash & LK_HASH_MASK] = r;
	ls->nres++;
	ls->stats.resources = ls->nres;
	return r;
}

struct lk_res *lk_res_get(struct lk_ls *ls, const struct lk_name *n)
{
	return res_get_hashed(ls, n, lk_name_hash(n));
}

void lk_res_free(struct lk_ls *ls, struct lk_res *res)
{
	struct lk_res **pp = &ls->res_hash[lk_res_hash(res) & LK_HASH_MASK];

	while (*pp != res)
		pp = &(*pp)->hnext;
	*pp = res->hnext;
	lk_res_untoss(ls, res);
	lk_res_rc_free(res);
	ls->nres--;
	ls->stats.resources = ls->nres;
	lk_pool_put(&ls->res_pool, res);
}

/* Put @res on the toss list if nothing on this node uses it. */
/* When tossed @res has been unused long enough to go (lk_core_tick). */
static uint64_t toss_expiry(const struct lk_ls *ls, const struct lk_res *res)
{
	return res->toss_time +
	       (ls->toss_ns > LK_TOSS_MIN_NS ? ls->toss_ns : LK_TOSS_MIN_NS);
}

void lk_res_maybe_toss(struct lk_ls *ls, struct lk_res *res)
{
	if (res->on_toss || !lk_list_empty(&res->locks) || res->q.nlocks != 0 ||
	    res->lookup_sent)
		return;
	res->on_toss = 1;
	res->toss_time = ls->now;
	lk_list_add_tail(&ls->toss, &res->toss);
	ls->stats.tossed++;
	/* past the bound by an eighth (and 16): the network thread's turn
	 * trims the list back to it (one wake-up per toss_max / 8 + 16
	 * tosses) */
	if (ls->toss_max != 0 &&
	    ls->stats.tossed > ls->toss_max + ls->toss_max / 8 + 16)
		lk_net_wake_by(ls, ls->now);
	else if (ls->toss.next == &res->toss) /* the oldest */
		lk_net_wake_by(ls, toss_expiry(ls, res));
}

/* Drop a tossed resource; as its master, tell the directory. */
static void toss_free(struct lk_ls *ls, struct lk_res *res)
{
	if (res->master == ls->nodeid) {
		uint64_t h = lk_res_hash(res);
		uint32_t dir = lk_dir_node(ls, &res->name, h);

		if (dir == ls->nodeid) {
			lk_dir_remove(ls, &res->name, h, ls->nodeid);
		} else {
			struct lk_rec_name *r =
			    lk_out_add(ls, dir, LK_M_REMOVE);

			if (r != NULL) {
				r->name = res->name;
				r->master = ls->nodeid;
			}
		}
	}
	ls->stats.toss_freed++;
	lk_res_free(ls, res);
}

static void fail_all_pending(struct lk_ls *ls);

/* The toss list: a resource unused for toss_ns goes, and the oldest
 * go while more than toss_max are kept. Returns when it must run next
 * (ns; CVW_NEVER: nothing timed): the oldest tossed resource's expiry.
 * Another thread that tosses a resource wakes the network thread when
 * that makes a turn due sooner (lk_res_maybe_toss). */
uint64_t lk_core_tick(struct lk_ls *ls, uint64_t now)
{
	ls->now = now;
	if (ls->fenced && !ls->fence_failed) {
		fail_all_pending(ls);
		return CVW_NEVER;
	}
	if (!lk_traffic_ok(ls) || ls->rphase != 0)
		return CVW_NEVER; /* lk_member_tick ticks meanwhile */
	while (!lk_list_empty(&ls->toss)) {
		struct lk_res *res =
		    LK_CONTAINER(ls->toss.next, struct lk_res, toss);

		if (now < toss_expiry(ls, res) &&
		    (ls->toss_max == 0 || ls->stats.tossed <= ls->toss_max))
			return toss_expiry(ls, res);
		toss_free(ls, res);
	}
	return CVW_NEVER;
}

/* ---- membership helpers ---- */

uint32_t lk_dir_node(const struct lk_ls *ls, const struct lk_name *n,
		     uint64_t hash)
{
	if (ls->nmemb == 0)
		return ls->nodeid;
	if (n->place != 0)
		return ls->memv[(n->place - 1) % ls->nmemb];
	return ls->memv[(hash >> 16) % ls->nmemb];
}

uint32_t lk_place_node(struct lk_ls *ls, uint32_t place)
{
	uint64_t m = __atomic_load_n(&ls->members, __ATOMIC_RELAXED) & ~1ull;
	unsigned n = (unsigned)__builtin_popcountll(m), k;

	if (n == 0 || place == 0)
		return 0;
	for (k = (place - 1) % n; k > 0; k--)
		m &= m - 1; /* drop the lowest member */
	return (uint32_t)__builtin_ctzll(m);
}

int lk_traffic_ok(const struct lk_ls *ls)
{
	return ls->quorate && !ls->fenced &&
	       (ls->rphase == 0 || ls->rphase == LK_RS_NPHASES - 1);
}

/* ---- lkbs ---- */

struct lk_lock *lk_lkb_find(struct lk_ls *ls, uint64_t lkid)
{
	struct lk_lock *lk = ls->lkb_hash[lkid & LK_HASH_MASK];

	while (lk != NULL && lk->lkid != lkid)
		lk = lk->hnext;
	return lk;
}

/* A new lkb on @res with id @lkid (ls->next_lkid++, or one an early
 * batch request reserved). */
static struct lk_lock *lkb_new(struct lk_ls *ls, struct lk_res *res,
			       uint64_t lkid)
{
	struct lk_lock *lk = lk_pool_get_raw(&ls->lkb_pool);

	if (lk == NULL)
		return NULL;
	/* every field: the rest zero (the pool does not zero lkbs) */
	*lk = (struct lk_lock){.ls = ls,
			       .res = res,
			       .lkid = lkid,
			       .grmode = -1,
			       .rqmode = -1,
			       .bast_mode = -1,
			       .refs = 1};
	lk_list_init(&lk->dlink);
	lk_rq_init(&lk->rq, ls->nodeid, lk->lkid, lk);
	lk->hnext = ls->lkb_hash[lk->lkid & LK_HASH_MASK];
	ls->lkb_hash[lk->lkid & LK_HASH_MASK] = lk;
	lk_list_add_tail(&res->locks, &lk->res_link);
	return lk;
}

void lk_lkb_put(struct lk_lock *lk)
{
	if (--lk->refs == 0)
		lk_pool_put(&lk->ls->lkb_pool, lk);
}

static void lkb_undefer(struct lk_lock *lk)
{
	if (lk->deferred_op != 0) {
		lk->deferred_op = 0;
		lk_list_del(&lk->dlink);
	}
}

/* Unlink a finished lkb and drop the user's reference. */
/* Unhash @lk and take it off its resource: it is dead. */
static void lkb_unlink(struct lk_ls *ls, struct lk_lock *lk)
{
	struct lk_lock **pp = &ls->lkb_hash[lk->lkid & LK_HASH_MASK];

	while (*pp != lk)
		pp = &(*pp)->hnext;
	*pp = lk->hnext;
	lkb_undefer(lk);
	lk->state = LK_S_DEAD;
	lk_list_del(&lk->res_link);
	lk_res_maybe_toss(ls, lk->res);
}

/* ... and drop the user's reference. */
static void lkb_kill(struct lk_ls *ls, struct lk_lock *lk)
{
	lkb_unlink(ls, lk);
	lk_lkb_put(lk);
}

/* The user's reference to a zombie (see complete) goes with the call
 * that tells the user its request failed: lk_wait, or lk_unlock. 1 if
 * it went (the handle is no more). */
static int zombie_release(struct lk_lock *lk)
{
	if (!lk->zombie)
		return 0;
	lk->zombie = 0;
	lk_lkb_put(lk);
	return 1;
}

static void lkb_defer(struct lk_ls *ls, struct lk_lock *lk, int op)
{
	if (lk->deferred_op == 0)
		lk_list_add_tail(&ls->deferred, &lk->dlink);
	lk->deferred_op = (uint8_t)op;
}

/* A lock record of @type for @lk's master; @with_lvb only for the types
 * whose record is a full struct lk_rec_lock (not REQUEST). */
static void fill_lock_rec(struct lk_ls *ls, struct lk_lock *lk, unsigned type,
			  int mode, int with_lvb)
{
	struct lk_rec_req *r = lk_out_add(ls, lk->res->master, type);

	if (r == NULL)
		return;
	r->name = lk->res->name;
	r->lkid = lk->lkid;
	r->flags = lk->flags;
	r->mode = (int8_t)mode;
	if (with_lvb && type != LK_M_REQUEST) {
		struct lk_rec_lock *l = (struct lk_rec_lock *)r;

		l->has_lvb = 1;
		memcpy(l->lvb, lk->lvb, LK_LVB_LEN);
		lk->lvb_dirty = 0;
	}
}

/* The request of NEW @lk to its (remote) master. */
static void send_request(struct lk_ls *ls, struct lk_lock *lk)
{
	if (!lk_name_numeric(&lk->res->name))
		fill_lock_rec(ls, lk, LK_M_REQUEST, lk->rqmode, 0);
	else
		lk_out_run_request(ls, lk->res, lk->lkid, lk->rqmode,
				   lk->flags);
}

static void start_lookup(struct lk_ls *ls, struct lk_res *res)
{
	uint64_t h = lk_res_hash(res);
	uint32_t dir = lk_dir_node(ls, &res->name, h);
	struct lk_rec_name *r;

	if (dir == ls->nodeid) {
		res->master = lk_dir_lookup(ls, &res->name, h, ls->nodeid);
		lk_stats_type(ls, res->name.type)->c.lookups_local++;
		lk_res_master_known(ls, res);
		return;
	}
	r = lk_out_add(ls, dir, LK_M_LOOKUP);
	if (r == NULL)
		return;
	r->name = res->name;
	res->lookup_sent = 1;
	ls->stats.lookups++;
	lk_stats_type(ls, res->name.type)->c.lookups++;
}

/* Send a NEW lkb's request to its master (looking it up first). */
void lk_lkb_submit(struct lk_ls *ls, struct lk_lock *lk)
{
	struct lk_res *res = lk->res;

	if (!lk_traffic_ok(ls)) {
		/* recovery conveys it (lk_recover.c phase 4) or, if its
		 * master is still unknown then, replays it afterwards */
		lk->state = LK_S_NEW;
		lkb_defer(ls, lk, LK_M_REQUEST);
		return;
	}
	if (res->master == 0) {
		lk->state = LK_S_NEW;
		if (!res->lookup_sent)
			start_lookup(ls, res);
		return;
	}
	lk->state = LK_S_WAITING;
	if (res->master == ls->nodeid)
		lk_master_local_op(ls, lk, LK_M_REQUEST);
	else
		send_request(ls, lk);
}

/* The master of @res became known: submit its NEW lkbs. */
void lk_res_master_known(struct lk_ls *ls, struct lk_res *res)
{
	struct lk_list *l, *n;

	res->lookup_sent = 0;
	lk_list_each (l, n, &res->locks) {
		struct lk_lock *lk = LK_CONTAINER(l, struct lk_lock, res_link);

		if (lk->state == LK_S_NEW && lk->deferred_op == 0)
			lk_lkb_submit(ls, lk);
	}
	lk_res_maybe_toss(ls, res);
}

/* lk_lkb_complete; a grant's type figures gathered in @gs if not NULL
 * (rx_grants: the caller ends them). */
static void complete(struct lk_ls *ls, struct lk_lock *lk, int status, int mode,
		     const struct lk_rec_reply *r, struct lk_grant_stats *gs)
{
	struct lk_grant_stats one = {0};
	int failed_new = 0;

	if (status == 0) {
		lk->bast_mode = -1;
		lk->grmode = (int8_t)mode;
		lk->state = LK_S_GRANTED;
		/* a value this holder set under PW/EX is newer than the
		 * resource's: keep it across an up-conversion */
		if (r != NULL && (r->lvbf & LK_RF_LVB) &&
		    (lk->flags & LK_VALBLK) && !lk->lvb_dirty) {
			memcpy(lk->lvb, r->lvb, LK_LVB_LEN);
			lk->lvb_valid = (r->lvbf & LK_RF_LVB_VALID) != 0;
			lk->lvb_seq = r->lvb_seq;
		}
		lk_stats_grant_add(ls, gs != NULL ? gs : &one, lk,
				   lk->res->master != ls->nodeid,
				   r != NULL && (r->lvbf & LK_RF_QUEUED), ls->now);
		lk_stats_grants_end(&one); /* a grant alone: added now */
	} else if (lk->state == LK_S_CONVERTING) {
		lk->state = LK_S_GRANTED;
	} else {
		failed_new = 1;
	}
	lk->rqmode = -1;
	lk->status = status;
	lk->cancel_pending = 0;
	if (lk->rx_polled && !ls->rx_in_poller)
		ls->xp.wake_rx(ls->xp.ctx); /* its waiter polls a socket */
	else if (lk->wcv != NULL)
		pthread_cond_signal(lk->wcv); /* wake just that thread */
	if (lk->waiters > (lk->wcv != NULL))
		pthread_cond_broadcast(&ls->cv);
	if (lk == ls->sync_lkb)
		lk->sync_done = 1;
	else if (lk->ops != NULL && lk->ops->completion != NULL)
		lk_cb_push(ls, LK_CB_COMP, lk, status);
	if (!failed_new)
		return;
	if (lk != ls->sync_lkb &&
	    (lk->ops == NULL || lk->ops->completion == NULL)) {
		/* nobody was told yet: the handle stays valid (a zombie)
		 * until lk_wait or lk_unlock says it failed */
		lkb_unlink(ls, lk);
		lk->zombie = 1;
	} else {
		lkb_kill(ls, lk);
	}
}

void lk_lkb_complete(struct lk_ls *ls, struct lk_lock *lk, int status, int mode,
		     const struct lk_rec_reply *r)
{
	complete(ls, lk, status, mode, r, NULL);
}

/* A down-conversion or unlock of PW/EX: counted per type (the stats
 * export). */
static void count_demote(struct lk_ls *ls, struct lk_lock *lk)
{
	lk_stats_type(ls, lk->res->name.type)->c.demotes++;
}

/* The UNLOCK of @lk, which writes no value block back: one lkid more in
 * the last UNLOCKS record for its master when it follows on, else a new
 * record. */
static void send_unlocks(struct lk_ls *ls, struct lk_lock *lk, uint32_t flags)
{
	uint32_t node = lk->res->master;
	struct lk_rec_unlocks *u =
	    lk_out_last(ls, node, LK_M_UNLOCKS, sizeof(*u));

	if (u != NULL && u->lkid + u->count == lk->lkid && u->flags == flags &&
	    u->count < LK_UNLOCKS_MAX) {
		u->count++;
		return;
	}
	u = lk_out_add(ls, node, LK_M_UNLOCKS);
	if (u == NULL)
		return;
	u->lkid = lk->lkid;
	u->count = 1;
	u->flags = flags;
}

static void do_unlock(struct lk_ls *ls, struct lk_lock *lk, unsigned flags)
{
	int wb = (lk->flags & LK_VALBLK) && lk->grmode >= LK_PW;

	if (lk->grmode >= LK_PW)
		count_demote(ls, lk);
	lk->unlock_ivlvb = (flags & LK_UNLOCK_IVLVB) != 0;
	if (!lk_traffic_ok(ls)) {
		lkb_defer(ls, lk, LK_M_UNLOCK);
		return;
	}
	lkb_undefer(lk);
	if (lk->res->master == ls->nodeid) {
		lk_master_local_op(ls, lk, LK_M_UNLOCK);
	} else if (!wb) {
		send_unlocks(ls, lk, flags & LK_UNLOCK_IVLVB);
	} else {
		uint32_t keep = lk->flags;

		lk->flags = flags & LK_UNLOCK_IVLVB;
		fill_lock_rec(ls, lk, LK_M_UNLOCK, -1, wb);
		lk->flags = keep;
	}
	lkb_kill(ls, lk);
}

void lk_lkb_bast(struct lk_ls *ls, struct lk_lock *lk, int mode, uint32_t from)
{
	struct lk_counts *c = &lk_stats_type(ls, lk->res->name.type)->c;

	c->basts_recv++;
	lk_res_count(&lk->res->stats.basts_recv);
	if (from >= LK_MAX_NODES)
		from = 0;
	ls->stats.peer[from].basts_for++;
	if (mode > lk->bast_mode)
		lk->bast_mode = (int8_t)mode;
	if (lk->cached) {
		/* an idle cached lock gives way by itself, once the grant
		 * engine that called us has returned (lk_out_flush) */
		if (lk->state == LK_S_GRANTED && lk->deferred_op == 0) {
			lk->cached = 0;
			lk->unlock_ivlvb = 0;
			lkb_defer(ls, lk, LK_M_UNLOCK);
		}
		return;
	}
	if (lk->ops != NULL && lk->ops->blocking != NULL &&
	    lk_cb_push(ls, LK_CB_BAST, lk, mode) == 0)
		lk_cb_last(ls)->node = from;
}

/* Replay operations deferred during recovery (traffic is allowed). */
void lk_core_kick_deferred(struct lk_ls *ls)
{
	while (!lk_list_empty(&ls->deferred)) {
		struct lk_lock *lk =
		    LK_CONTAINER(ls->deferred.next, struct lk_lock, dlink);
		int op = lk->deferred_op;

		lkb_undefer(lk);
		switch (op) {
		case LK_M_REQUEST:
			lk_lkb_submit(ls, lk);
			break;
		case LK_M_CONVERT:
			if (lk->res->master == ls->nodeid)
				lk_master_local_op(ls, lk, LK_M_CONVERT);
			else
				fill_lock_rec(ls, lk, LK_M_CONVERT, lk->rqmode,
					      lk->flags & LK_VALBLK);
			break;
		case LK_M_UNLOCK:
			do_unlock(ls, lk,
				  lk->unlock_ivlvb ? LK_UNLOCK_IVLVB : 0);
			break;
		case LK_M_CANCEL:
			if (lk->res->master == ls->nodeid)
				lk_master_local_op(ls, lk, LK_M_CANCEL);
			else
				fill_lock_rec(ls, lk, LK_M_CANCEL, -1, 0);
			break;
		}
	}
}

/* ---- input ---- */

static void rx_reply(struct lk_ls *ls, const struct lk_rec_reply *r)
{
	struct lk_lock *lk = lk_lkb_find(ls, r->lkid);

	if (lk == NULL ||
	    (lk->state != LK_S_WAITING && lk->state != LK_S_CONVERTING)) {
		ls->stats.bad_frames++;
		lk_log(ls, 1, "reply for lock %llu in no pending state",
		       (unsigned long long)r->lkid);
		return;
	}
	if (r->status == LK_ST_NOTMASTER && lk->state == LK_S_WAITING) {
		/* stale master: look it up again */
		lk->res->master = 0;
		lk_lkb_submit(ls, lk);
		return;
	}
	if (r->mode < -1 || r->mode >= LK_NMODES) {
		ls->stats.bad_frames++;
		return;
	}
	lk_lkb_complete(ls, lk, r->status, r->mode, r);
}

/* A short reply is a REPLY without the LVB. */
static void rx_sreply(struct lk_ls *ls, const struct lk_rec_sreply *s)
{
	struct lk_rec_reply r;

	memset(&r, 0, sizeof(r));
	r.lkid = s->lkid;
	r.status = s->status;
	r.mode = s->mode;
	r.lvbf = s->lvbf & LK_RF_QUEUED;
	rx_reply(ls, &r);
}

/* GRANTS: each lkid of the range granted (status 0, no LVB). Locks in
 * no pending state are counted, and logged once per record. */
static void rx_grants(struct lk_ls *ls, const struct lk_rec_grants *g)
{
	struct lk_grant_stats gs = {0};
	struct lk_rec_reply r;
	uint32_t bad = 0;

	if (g->count == 0 || g->count > LK_GRANTS_MAX ||
	    g->lkid + g->count < g->lkid || g->mode < 0 ||
	    g->mode >= LK_NMODES) {
		ls->stats.bad_frames++;
		lk_log(ls, 1, "GRANTS record with a bad count or mode dropped");
		return;
	}
	memset(&r, 0, sizeof(r));
	r.mode = g->mode;
	r.lvbf = g->lvbf & LK_RF_QUEUED;
	for (uint32_t i = 0; i < g->count; i++) {
		struct lk_lock *lk = lk_lkb_find(ls, g->lkid + i);

		if (lk == NULL || (lk->state != LK_S_WAITING &&
				   lk->state != LK_S_CONVERTING)) {
			bad++;
			continue;
		}
		r.lkid = lk->lkid;
		complete(ls, lk, 0, g->mode, &r, &gs);
	}
	lk_stats_grants_end(&gs);
	if (bad != 0) {
		ls->stats.bad_frames += bad;
		lk_log(ls, 1,
		       "GRANTS for %u locks in no pending state (from "
		       "lock %llu)",
		       bad, (unsigned long long)g->lkid);
	}
}

static void rx_bast(struct lk_ls *ls, const struct lk_rec_bast *r)
{
	struct lk_lock *lk = lk_lkb_find(ls, r->lkid);

	/* a blocking callback may cross an unlock: not an error */
	if (lk == NULL || r->mode < 0 || r->mode >= LK_NMODES)
		return;
	lk_lkb_bast(ls, lk, r->mode, r->node);
}

void lk_core_rx_record(struct lk_ls *ls, uint32_t sender, unsigned type,
		       const void *rec)
{
	switch (type) {
	case LK_M_REQUEST:
	case LK_M_CONVERT:
	case LK_M_UNLOCK:
	case LK_M_CANCEL:
		lk_master_rx_locks(ls, sender, type, rec, 1);
		break;
	case LK_M_REPLY:
		rx_reply(ls, rec);
		break;
	case LK_M_SREPLY:
		rx_sreply(ls, rec);
		break;
	case LK_M_GRANTS:
		rx_grants(ls, rec);
		break;
	case LK_M_BAST:
		rx_bast(ls, rec);
		break;
	case LK_M_LOOKUP:
	case LK_M_LOOKUP_REPLY:
	case LK_M_REMOVE:
		lk_dir_rx(ls, sender, type, rec, 1);
		break;
	default:
		lk_recover_rx(ls, sender, type, rec);
		break;
	}
}

static int lock_traffic(unsigned type)
{
	return (type >= LK_M_LOOKUP && type <= LK_M_BAST) ||
	       type == LK_M_SREPLY || type == LK_M_RUNREQ ||
	       type == LK_M_GRANTS || type == LK_M_UNLOCKS ||
	       type == LK_M_PLOCK;
}

/* Recovery records that are only valid in the generation that sent them
 * (DONE and START carry their generation in the record). */
static int rebuild_traffic(unsigned type)
{
	return type == LK_M_DIR_ADD || type == LK_M_RLOOKUP ||
	       type == LK_M_RLOOKUP_REPLY || type == LK_M_RCOM ||
	       type == LK_M_PRCOM;
}

void lk_core_rx(struct lk_ls *ls, uint32_t sender, const void *frame,
		size_t len)
{
	const struct lk_hdr *h = frame;
	const uint8_t *p = (const uint8_t *)frame + sizeof(*h);
	size_t rs = lk_wire_recsize(h->type);

	ls->now = lk_now_ns(); /* one clock read per frame */
	lk_stats_peer_rx(ls, sender, len, h->count);
	if (lock_traffic(h->type)) {
		if (!(ls->members & (1ull << sender))) {
			ls->stats.bad_frames++;
			lk_log(ls, 1, "%s from non-member %u dropped",
			       lk_wire_name(h->type), sender);
			return;
		}
		if (lk_recover_filter(ls, sender, frame, len))
			return;
	}
	if (rebuild_traffic(h->type) && h->gen != ls->rgen) {
		/* from a generation that was abandoned: its state is void */
		lk_log(ls, 2, "%s of generation %llu ignored (now %llu)",
		       lk_wire_name(h->type), (unsigned long long)h->gen,
		       (unsigned long long)ls->rgen);
		return;
	}
	if (h->type >= LK_M_REQUEST && h->type <= LK_M_CANCEL) {
		lk_master_rx_locks(ls, sender, h->type, p, h->count);
		return;
	}
	if (h->type == LK_M_RUNREQ) {
		lk_master_rx_runs(ls, sender, (const void *)p, h->count);
		return;
	}
	if (h->type == LK_M_UNLOCKS) {
		for (unsigned i = 0; i < h->count; i++, p += rs)
			lk_master_rx_unlocks(ls, sender, (const void *)p);
		return;
	}
	/* POSIX record locks (lk_plock.c) */
	if (h->type == LK_M_PLOCK) {
		lk_plock_rx(ls, sender, (const void *)p, h->count);
		return;
	}
	if (h->type == LK_M_PRCOM) {
		for (unsigned i = 0; i < h->count; i++, p += rs)
			lk_plock_rx_rcom(ls, sender, (const void *)p);
		return;
	}
	if (h->type >= LK_M_LOOKUP && h->type <= LK_M_REMOVE) {
		lk_dir_rx(ls, sender, h->type, (const void *)p, h->count);
		return;
	}
	for (unsigned i = 0; i < h->count; i++, p += rs)
		lk_core_rx_record(ls, sender, h->type, p);
}

/* ---- public API ---- */

/*
 * Take ls->mu for an API call: the one place for a fairness policy.
 *
 * glibc mutexes are unfair: a thread taking and releasing a locally
 * mastered lock in a loop re-takes ls->mu long before the network thread
 * it woke gets to run, so the remote request that thread carries waits
 * (the ping-pong fell to ~1,000 transfers/s; one node got millions of
 * grants in a row). So the network thread, when it finds ls->mu taken,
 * raises ls->net_wants (lk_net_lock) and API calls let it in first:
 * they spin briefly, then sleep on that word (futex) until it has the
 * mutex. Nothing is paid when the mutex is free: the network thread's
 * first attempt is a trylock, and an API call reads one word.
 */
enum { LK_GATE_SPIN = 200 }; /* pause loops before sleeping (~2 us) */

static void futex_op(int *word, int op, int val)
{
	syscall(SYS_futex, word, op, val, NULL, NULL, 0);
}

void lk_api_lock(struct lk_ls *ls)
{
	int w, spins = 0;

	while ((w = __atomic_load_n(&ls->net_wants, __ATOMIC_ACQUIRE)) != 0) {
		if (spins++ < LK_GATE_SPIN) {
			__builtin_ia32_pause();
			continue;
		}
		/* 2 = someone sleeps here: lk_net_lock must wake us */
		if (w == 1 && !__atomic_compare_exchange_n(
				  &ls->net_wants, &w, 2, 0, __ATOMIC_ACQ_REL,
				  __ATOMIC_ACQUIRE))
			continue;
		futex_op(&ls->net_wants, FUTEX_WAIT_PRIVATE, 2);
	}
	pthread_mutex_lock(&ls->mu);
}

void lk_net_lock(struct lk_ls *ls)
{
	if (pthread_mutex_trylock(&ls->mu) == 0)
		return;
	__atomic_store_n(&ls->net_wants, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&ls->mu);
	if (__atomic_exchange_n(&ls->net_wants, 0, __ATOMIC_ACQ_REL) == 2)
		futex_op(&ls->net_wants, FUTEX_WAKE_PRIVATE, INT_MAX);
}

int lk_check_args(int mode, unsigned flags, const struct lk_name *n)
{
	if (mode < 0 || mode >= LK_NMODES)
		return -EINVAL;
	if (flags & ~(unsigned)(LK_NOQUEUE | LK_NOQUEUEBAST | LK_VALBLK |
				LK_NOEXP | LK_QUECVT))
		return -EINVAL;
	if (n != NULL && lk_wire_check_name(n) != 0)
		return -EINVAL;
	return 0;
}

/* (lk_internal.h) */
int lk_lock_new(struct lk_ls *ls, const struct lk_lock_args *a,
		struct lk_res *res, uint64_t sent_lkid, struct lk_lock **out)
{
	struct lk_lock *lk =
	    lkb_new(ls, res, sent_lkid != 0 ? sent_lkid : ls->next_lkid++);
	int ret = 0;

	if (lk == NULL) {
		lk_res_maybe_toss(ls, res);
		return -ENOMEM;
	}
	lk->ops = a->ops;
	lk->arg = a->arg;
	lk->flags = a->flags;
	lk->rqmode = (int8_t)a->mode;
	if (!ls->now_fresh) {
		/* not on the cache-hit path: it stays clock-free */
		ls->now = lk_now_ns();
		ls->now_fresh = 1;
	}
	lk->t_req = ls->now;
	if (a->may_poll && res->master == ls->nodeid &&
	    ls->xp.poll_rx != NULL &&
	    ls->now - res->remote_ns < LK_CONTENDED_NS)
		/* peers used it lately: their next request may be sitting
		 * in a socket, unread; read it before granting locally */
		ls->xp.poll_rx(ls->xp.ctx);
	lk_stats_request_add(ls, &ls->req_stats, res, lk->t_req);
	lk->refs++; /* ours, for the duration of the call */
	if (sent_lkid != 0) {
		lk->state = LK_S_WAITING;
	} else if (!lk_traffic_ok(ls)) {
		lkb_defer(ls, lk, LK_M_REQUEST);
	} else {
		ls->sync_lkb = lk;
		lk_lkb_submit(ls, lk);
		ls->sync_lkb = NULL;
	}
	if (lk->sync_done) {
		lk->sync_done = 0;
		ret = lk->status == 0 ? LK_GRANTED_NOW : lk->status;
	}
	if (ret >= 0)
		*out = lk;
	lk_lkb_put(lk);
	return ret;
}

/* (lk_internal.h) */
int lk_lock_one(struct lk_ls *ls, const struct lk_lock_args *a,
		const struct lk_name *name, uint64_t hash, struct lk_res *res,
		struct lk_lock **out)
{
	struct lk_lock *lk;

	if (ls->closing || ls->fenced)
		return -ESHUTDOWN;
	if (res != NULL)
		lk_res_untoss(ls, res);
	else
		res = res_get_hashed(ls, name, hash);
	if (res == NULL)
		return -ENOMEM;
	lk = lk_cache_find(res, a->mode, a->flags);
	if (lk == NULL)
		return lk_lock_new(ls, a, res, 0, out);
	lk->cached = 0;
	lk->ops = a->ops;
	lk->arg = a->arg;
	lk_stats_type(ls, name->type)->c.cache_hits++;
	*out = lk;
	return LK_GRANTED_NOW;
}

int lk_lock(struct lk_ls *ls, const struct lk_name *name, int mode,
	    unsigned flags, const struct lk_lock_ops *ops, void *arg,
	    struct lk_lock **out)
{
	struct lk_lock_args a = {mode, flags, ops, arg, 1};
	int ret = lk_check_args(mode, flags, name);

	if (ret < 0)
		return ret;
	lk_api_lock(ls);
	ls->now_fresh = 0;
	ret = lk_lock_one(ls, &a, name, lk_name_hash(name), NULL, out);
	lk_stats_requests_end(&ls->req_stats);
	lk_out_flush(ls);
	pthread_mutex_unlock(&ls->mu);
	return ret;
}

int lk_convert(struct lk_lock *lk, int mode, unsigned flags)
{
	struct lk_ls *ls = lk->ls;
	int ret = lk_check_args(mode, flags, NULL);

	if (ret < 0)
		return ret;
	lk_api_lock(ls);
	if (lk->state == LK_S_DEAD || lk->cached) {
		ret = -ENOENT;
		goto out_unlock;
	}
	if (lk->state != LK_S_GRANTED || lk->deferred_op != 0) {
		ret = -EBUSY;
		goto out_unlock;
	}
	if (ls->fenced) { /* it would wait for ever */
		ret = -ESHUTDOWN;
		goto out_unlock;
	}
	lk_stats_type(ls, lk->res->name.type)->c.conversions++;
	if (lk->grmode >= LK_PW && !lk_mode_covers(mode, lk->grmode))
		count_demote(ls, lk);
	lk->flags = (lk->flags & LK_VALBLK) | flags;
	lk->rqmode = (int8_t)mode;
	lk->state = LK_S_CONVERTING;
	lk->t_req = ls->now = lk_now_ns();
	if (!lk_traffic_ok(ls)) {
		lkb_defer(ls, lk, LK_M_CONVERT);
	} else if (lk->res->master == ls->nodeid) {
		ls->sync_lkb = lk;
		lk_master_local_op(ls, lk, LK_M_CONVERT);
		ls->sync_lkb = NULL;
		if (lk->sync_done) {
			lk->sync_done = 0;
			ret = lk->status == 0 ? LK_GRANTED_NOW : lk->status;
		}
	} else {
		fill_lock_rec(ls, lk, LK_M_CONVERT, mode,
			      (lk->flags & LK_VALBLK) &&
				  lk_lvb_op(lk->grmode, mode) == LK_LVB_WRITE);
	}
	lk_out_flush(ls);
out_unlock:
	pthread_mutex_unlock(&ls->mu);
	return ret;
}

/*
 * Whether the unlock of @lk may leave its UNLOCKS record in the master's
 * output buffer for the next frame to that node (the next API call that
 * sends, or the network thread's next turn: within LK_TICK_BUSY_NS)
 * instead of sending a frame of its own now. Only an idle release: the
 * master is another node, no value block is written back, no blocking
 * callback asked for it (a peer that waits gets it at once; one whose
 * blocking callback is still on the way gets it when that frame comes in
 * and its reader flushes), it was not asked for within the last 1 ms (a
 * lock taken and released in a loop that a peer takes turns with: that
 * peer's next request would find it still held), traffic flows, and
 * little is queued already.
 * A node giving up the locks of a tree another node removes paid a
 * system call and a wake-up of the master's network thread per lock.
 */
static int unlock_may_wait(const struct lk_ls *ls, const struct lk_lock *lk)
{
	uint32_t m = lk->res->master;

	return ls->xp.flushes && m != ls->nodeid && m != 0 &&
	       m < LK_MAX_NODES && lk->bast_mode < 0 &&
	       ls->now - lk->t_req >= LK_CONTENDED_NS &&
	       !((lk->flags & LK_VALBLK) && lk->grmode >= LK_PW) &&
	       lk_traffic_ok(ls) && ls->out[m].len < LK_UNLOCK_WAIT_MAX;
}

int lk_unlock(struct lk_lock *lk, unsigned flags)
{
	struct lk_ls *ls = lk->ls;
	int ret = 0, yield = 0, later;

	lk_api_lock(ls);
	ls->now = lk_now_ns();
	if (lk->state == LK_S_DEAD || lk->cached) {
		ret = -ENOENT;
		(void)zombie_release(lk); /* a failed request's handle */
	} else if (lk->state != LK_S_GRANTED || lk->deferred_op != 0) {
		ret = -EBUSY;
	} else if ((flags & LK_UNLOCK_CACHE) &&
		   (lk->bast_mode < 0 ||
		    lk_mode_compat(lk->bast_mode, lk->grmode))) {
		/* nobody is waiting for it: keep it */
		lk->cached = 1;
		lk->ops = NULL;
	} else {
		struct lk_res *res = lk->res;

		yield = res->master == ls->nodeid &&
			ls->now - res->remote_ns < LK_CONTENDED_NS &&
			++res->streak >= LK_STREAK_YIELD;
		if (yield)
			res->streak = 0;
		later = unlock_may_wait(ls, lk);
		do_unlock(ls, lk, flags);
		if (later) {
			ls->stats.unlocks_waited++;
			/* it then turns every LK_TICK_BUSY_NS while
			 * records wait */
			lk_net_wake_by(ls, ls->now + LK_TICK_BUSY_NS);
		} else
			lk_out_flush(ls);
	}
	pthread_mutex_unlock(&ls->mu);
	if (yield)
		/* a peer may want it: let its request be read (on a busy
		 * machine the network thread may share our CPU) */
		sched_yield();
	return ret;
}

int lk_unlock_batch(struct lk_lock **locks, size_t n, unsigned flags)
{
	struct lk_ls *ls = NULL;
	int done = 0;

	for (size_t i = 0; i < n && ls == NULL; i++)
		if (locks[i] != NULL)
			ls = locks[i]->ls;
	if (ls == NULL)
		return 0;
	lk_api_lock(ls);
	ls->now = lk_now_ns();
	for (size_t i = 0; i < n; i++) {
		struct lk_lock *lk = locks[i];

		if (lk == NULL || lk->ls != ls || lk->state != LK_S_GRANTED ||
		    lk->cached || lk->deferred_op != 0)
			continue;
		do_unlock(ls, lk, flags & ~(unsigned)LK_UNLOCK_CACHE);
		done++;
	}
	lk_out_flush(ls);
	pthread_mutex_unlock(&ls->mu);
	return done;
}

int lk_cancel(struct lk_lock *lk)
{
	struct lk_ls *ls = lk->ls;
	int ret = 0;

	lk_api_lock(ls);
	ls->now = lk_now_ns();
	if (lk->state != LK_S_NEW && lk->state != LK_S_WAITING &&
	    lk->state != LK_S_CONVERTING) {
		ret = -EALREADY;
	} else if (lk->cancel_pending) {
		ret = 0;
	} else if (lk->state == LK_S_NEW || lk->deferred_op == LK_M_REQUEST ||
		   lk->deferred_op == LK_M_CONVERT) {
		/* the master has not seen it yet */
		lkb_undefer(lk);
		lk_lkb_complete(ls, lk, -ECANCELED, lk->grmode, NULL);
	} else if (!lk_traffic_ok(ls)) {
		lk->cancel_pending = 1;
		lkb_defer(ls, lk, LK_M_CANCEL);
	} else {
		lk->cancel_pending = 1;
		if (lk->res->master == ls->nodeid)
			lk_master_local_op(ls, lk, LK_M_CANCEL);
		else
			fill_lock_rec(ls, lk, LK_M_CANCEL, -1, 0);
		lk_out_flush(ls);
	}
	pthread_mutex_unlock(&ls->mu);
	return ret;
}

static int pending(const struct lk_lock *lk)
{
	return lk->state == LK_S_NEW || lk->state == LK_S_WAITING ||
	       lk->state == LK_S_CONVERTING;
}

/*
 * A fenced node's lockspace answers nothing more (its links are dropped,
 * the others recovered its locks): @lk's pending request or conversion
 * fails with -ESHUTDOWN, as lk.h promises. A conversion keeps the mode it
 * holds; a new request's handle goes as for any failure (zombie_release),
 * and its queue entry if this node masters it. ls->mu held.
 */
static void fail_shutdown(struct lk_ls *ls, struct lk_lock *lk)
{
	if (lk->state != LK_S_CONVERTING && lk->res->master == ls->nodeid &&
	    lk->rq.queue != LK_Q_NONE)
		lk_grant_purge(&lk->res->q, &lk->rq, NULL);
	lkb_undefer(lk);
	lk_lkb_complete(ls, lk, -ESHUTDOWN, lk->grmode, NULL);
}

/* Once fenced (from the network thread's tick, within one turn of the
 * fence): every pending request fails, so that completion callbacks and
 * lk_wait report -ESHUTDOWN instead of waiting for ever. ls->mu held. */
static void fail_all_pending(struct lk_ls *ls)
{
	ls->fence_failed = 1;
	for (size_t i = 0; i < LK_HASH_SIZE; i++) {
		struct lk_lock *lk = ls->lkb_hash[i], *next;

		for (; lk != NULL; lk = next) {
			next = lk->hnext;
			if (pending(lk))
				fail_shutdown(ls, lk);
		}
	}
}

/*
 * Wait for @lk's reply by reading its master's connection in this thread
 * (xp.wait_rx): one thread wake-up fewer than the network thread reading
 * it and signalling us. A lock whose master is being looked up waits
 * for the directory node's answer that way first (and sends the request
 * itself on processing it). One such waiter per lockspace; the others
 * sleep on a condvar. 0 if it waited.
 */
static int rx_wait(struct lk_ls *ls, struct lk_lock *lk, uint64_t spin_ns)
{
	struct lk_res *res = lk->res;
	uint32_t m = res->master;
	int ret;

	if (lk->state == LK_S_NEW) /* its LOOKUP_REPLY comes first */
		m = res->lookup_sent
			? lk_dir_node(ls, &res->name, lk_res_hash(res))
			: 0;
	if (ls->xp.wait_rx == NULL || ls->rx_poller || m == 0 ||
	    m == ls->nodeid)
		return -EAGAIN;
	ls->rx_poller = 1;
	lk->rx_polled = 1;
	ret = ls->xp.wait_rx(ls->xp.ctx, m, spin_ns);
	lk->rx_polled = 0;
	ls->rx_poller = 0;
	return ret;
}

/* lk_wait with ls->mu held (dropped while sleeping); a remote reply is
 * polled for without sleeping for up to @spin_ns first (rx_wait). */
/* lk_wait under ls->mu; *@released: the handle of a failed new request
 * was released (see zombie_release). */
static int wait_locked(struct lk_ls *ls, struct lk_lock *lk, uint64_t spin_ns,
		       int *released)
{
	pthread_cond_t own;
	int mine = 0, st;

	if (!pending(lk)) {
		st = lk->status;
		*released = zombie_release(lk);
		return st;
	}
	lk->refs++;
	if (lk->wcv == NULL) {
		/* the first waiter sleeps on its own condvar, so that a
		 * completion wakes it and nobody else */
		pthread_cond_init(&own, NULL);
		lk->wcv = &own;
		mine = 1;
	}
	lk->waiters++;
	while (pending(lk)) {
		if (ls->fenced) { /* no answer will come */
			fail_shutdown(ls, lk);
			break;
		}
		if (mine && rx_wait(ls, lk, spin_ns) == 0)
			continue;
		pthread_cond_wait(mine ? &own : &ls->cv, &ls->mu);
	}
	lk->waiters--;
	if (mine) {
		lk->wcv = NULL;
		pthread_cond_destroy(&own);
	}
	st = lk->status;
	*released = zombie_release(lk); /* the failure is told */
	lk_lkb_put(lk);
	return st;
}

int lk_wait(struct lk_lock *lk)
{
	struct lk_ls *ls = lk->ls;
	int st, released;

	lk_api_lock(ls);
	st = wait_locked(ls, lk, ls->spin_ns, &released);
	pthread_mutex_unlock(&ls->mu);
	return st;
}

/* What lk_wait_batch polls for @n locks of @ls. */
static uint64_t batch_spin(const struct lk_ls *ls, size_t n)
{
	uint64_t spin = ls->spin_ns + n * LK_SPIN_PER_LOCK_NS;
	uint64_t max = ls->spin_ns * 25 / 3;

	if (ls->spin_ns == 0)
		return 0;
	return spin < max ? spin : max;
}

int lk_wait_batch(struct lk_lock **locks, size_t n)
{
	struct lk_ls *ls = NULL;
	uint64_t spin = 0;
	int ret = 0;

	for (size_t i = 0; i < n; i++) {
		int st, released;

		if (locks[i] == NULL)
			continue;
		if (locks[i]->ls != ls) {
			if (ls != NULL)
				pthread_mutex_unlock(&ls->mu);
			ls = locks[i]->ls;
			lk_api_lock(ls);
			spin = batch_spin(ls, n);
		}
		st = wait_locked(ls, locks[i], spin, &released);
		if (released)
			locks[i] = NULL; /* a failed request: no handle */
		if (ret == 0)
			ret = st;
	}
	if (ls != NULL)
		pthread_mutex_unlock(&ls->mu);
	LK_TL(LK_TL_WAITED);
	return ret;
}

int lk_lock_mode(const struct lk_lock *lk)
{
	int m;

	lk_api_lock(lk->ls);
	m = lk->grmode;
	pthread_mutex_unlock(&lk->ls->mu);
	return m;
}

const struct lk_name *lk_lock_name(const struct lk_lock *lk)
{
	return &lk->res->name;
}

int lk_lock_granted(const struct lk_lock *lk)
{
	int g;

	lk_api_lock(lk->ls);
	g = lk->state == LK_S_GRANTED;
	pthread_mutex_unlock(&lk->ls->mu);
	return g;
}

int lk_lvb_get(const struct lk_lock *lk, void *buf)
{
	int ret = 0;

	lk_api_lock(lk->ls);
	if (!(lk->flags & LK_VALBLK) || lk->grmode < 0) {
		ret = -EINVAL;
	} else if (!lk->lvb_valid) {
		memset(buf, 0, LK_LVB_LEN);
		ret = -ENODATA;
	} else {
		memcpy(buf, lk->lvb, LK_LVB_LEN);
	}
	pthread_mutex_unlock(&lk->ls->mu);
	return ret;
}

int lk_lvb_set(struct lk_lock *lk, const void *buf)
{
	int ret = 0;

	lk_api_lock(lk->ls);
	if (!(lk->flags & LK_VALBLK) || lk->grmode < LK_PW ||
	    lk->state == LK_S_DEAD) {
		ret = -EPERM;
	} else {
		memcpy(lk->lvb, buf, LK_LVB_LEN);
		lk->lvb_valid = 1;
		lk->lvb_dirty = 1;
	}
	pthread_mutex_unlock(&lk->ls->mu);
	return ret;
}

uint32_t lk_ls_nodeid(const struct lk_ls *ls)
{
	return ls->nodeid;
}

/* Closing: release @lk, or fail its pending request with -ESHUTDOWN. */
void lk_core_drop_lock(struct lk_ls *ls, struct lk_lock *lk)
{
	int local = lk->res->master == ls->nodeid;

	if (lk->state == LK_S_DEAD)
		return;
	lk->cached = 0;
	if (lk->state == LK_S_GRANTED && lk_traffic_ok(ls)) {
		lkb_undefer(lk);
		do_unlock(ls, lk, 0);
		return;
	}
	if (local && lk->rq.queue != LK_Q_NONE)
		lk_grant_purge(&lk->res->q, &lk->rq, NULL);
	lkb_undefer(lk);
	if (lk->state != LK_S_GRANTED)
		lk_lkb_complete(ls, lk, -ESHUTDOWN, lk->grmode, NULL);
	if (lk->state != LK_S_DEAD)
		lkb_kill(ls, lk);
}
