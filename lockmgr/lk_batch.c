/*
 * lk_batch.c — lk_lock_batch: many locks in one call, one lockspace
 * lock and one frame per master. Pass 0 finds each name's resource and
 * writes the requests whose master is known and remote before their
 * lkbs exist (the early send: the master grants while this thread
 * builds them); then the names whose master must be looked up, then
 * every other lkb (lk_core.c lk_lock_new / lk_lock_one, as lk_lock).
 * Under ls->mu (lk_internal.h); PROTOCOL.md §7, Batching.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lockmgr/lk_internal.h"

/* Start loading the bucket of name hash @hash (near = 0) or, once that
 * is cached, the first resource in it (near = 1). */
static void res_prefetch(struct lk_ls *ls, uint64_t hash, int near)
{
	struct lk_res **b = &ls->res_hash[hash & LK_HASH_MASK];

	if (!near)
		__builtin_prefetch(b);
	else if (*b != NULL)
		for (size_t off = 0; off < LK_RES_HOT; off += 64)
			__builtin_prefetch((const char *)*b + off);
}

/* Prefetch distances of the lookup pass: it does little per name. */
enum { LK_PF_BATCH_NEAR = 16, LK_PF_BATCH_FAR = 32 };

/* Per name of a batch: its hash, its resource if known (pass 0), and
 * whether pass 0 handled it (master unknown, directory elsewhere). */
struct batch_name {
	uint64_t hash;
	struct lk_res *res;
	uint64_t sent_lkid; /* request already sent (early_send) */
	uint8_t look;
};

/* The run the previous early request of a batch went to. */
struct open_run {
	uint32_t node;
	uint16_t type;
	uint32_t place;
	size_t off; /* of its header in ls->out[node].buf, 0 none */
};

/* The usual case of lk_out_run_request in a batch: the request goes to the
 * same master as the one before it, whose lkid was the one before (the
 * early requests number their lkids in order) and whose mode and flags
 * are the batch's: the run goes on with one slot. 0 if it cannot. */
static inline int run_append(struct lk_ls *ls, const struct open_run *run,
			     const struct lk_res *res)
{
	struct lk_outbuf *ob = &ls->out[run->node];

	if (run->off == 0 || res->master != run->node ||
	    res->name.type != run->type || res->name.place != run->place ||
	    !ob->open || ob->type != LK_M_RUNREQ || ob->run_off != run->off ||
	    ob->count >= UINT16_MAX || ob->len + 8 > ob->cap ||
	    ob->len - ob->hdr_off + 8 > LK_FRAME_MAX)
		return 0;
	memcpy(ob->buf + ob->len, &res->name.num, 8);
	ob->len += 8;
	ob->count++;
	((struct lk_run_hdr *)(ob->buf + ob->run_off))->count++;
	return 1;
}

/*
 * Early send: the requests of the batch's names whose master is known,
 * remote and whose lkb would be new (no cached lock covers them) go out
 * before any of their lkbs exist, so the master grants while this thread
 * builds the lkbs, instead of after. They are written while the
 * resources are found (one pass), their lkids reserved (bn->sent_lkid)
 * and the lkb pool reserved so that creating the lkbs cannot fail: a
 * request the master saw must have its lkb here. The masters' links are
 * then held (xp.rx_hold) until the call ends, so their replies wait in
 * the socket for this thread rather than for the network thread, which
 * would block on ls->mu.
 */
static int early_ok(struct lk_ls *ls, size_t n)
{
	return ls->xp.rx_hold != NULL && !ls->closing && !ls->fenced &&
	       lk_traffic_ok(ls) && lk_pool_reserve(&ls->lkb_pool, n) == 0;
}

static int early_eligible(const struct lk_ls *ls, const struct lk_lock_args *a,
			  const struct lk_res *res)
{
	return res != NULL && res->master != 0 && res->master != ls->nodeid &&
	       lk_name_numeric(&res->name) &&
	       (lk_list_empty(&res->locks) ||
		lk_cache_find((struct lk_res *)res, a->mode, a->flags) == NULL);
}

/* Reserve @b's lkid and write its request, on the run of the one before
 * when it can. */
static void early_write(struct lk_ls *ls, const struct lk_lock_args *a,
			struct open_run *run, struct batch_name *b,
			uint64_t *masters)
{
	struct lk_res *res = b->res;

	b->sent_lkid = ls->next_lkid++;
	if (!run_append(ls, run, res))
		lk_out_run_request(ls, res, b->sent_lkid, a->mode, a->flags);
	run->node = res->master;
	run->type = res->name.type;
	run->place = res->name.place;
	run->off = ls->out[run->node].run_off;
	*masters |= 1ull << res->master;
}

/* Send what early_write wrote and hold the masters' links; sets *@held
 * to the bitmap of held links. */
static void early_send(struct lk_ls *ls, uint64_t masters, uint64_t *held)
{
	lk_out_flush(ls);
	LK_TL(LK_TL_SENT);
	/* after the send, off its path: no master answers a batch within
	 * a system call, and if one did the reply would only take the slow
	 * way (the network thread, woken once the call ends) */
	for (uint64_t m = masters; m != 0; m &= m - 1) {
		uint32_t node = (uint32_t)__builtin_ctzll(m);

		if (ls->xp.rx_hold(ls->xp.ctx, node))
			*held |= 1ull << node;
	}
}

/* A NOQUEUE request this node refused at once (it masters the name):
 * no handle, out[i] stays NULL; not a failure of the batch. */
static int refused_now(const struct lk_lock_args *a, int r)
{
	return r == -EAGAIN && (a->flags & LK_NOQUEUE);
}

/*
 * Under ls->mu. Pass 0 finds each resource and writes the early
 * requests; then the names whose master must be looked up are locked
 * (LOOKUPs to their directory nodes), then every other lkb is built.
 * Pass 0's resources stay valid: nothing in between frees a resource
 * (only the toss timer and recovery do, and neither runs while ls->mu
 * is held here).
 */
/* The arguments of name @i: @a with its own callback argument (@args
 * NULL: all share a->arg). */
static const struct lk_lock_args *args_of(const struct lk_lock_args *a,
					  void *const *args, size_t i,
					  struct lk_lock_args *buf)
{
	if (args == NULL)
		return a;
	*buf = *a;
	buf->arg = args[i];
	return buf;
}

/* Name @i's request ended with @r: queued (0) or not (its completion
 * callback follows only then). */
static void note_now(uint8_t *now, size_t i, int r)
{
	if (now != NULL)
		now[i] = r != 0;
}

static int batch_locked(struct lk_ls *ls, const struct lk_name *names, size_t n,
			struct batch_name *bn, const struct lk_lock_args *a,
			void *const *args, struct lk_lock **out, uint8_t *now,
			int *granted, uint64_t *held)
{
	struct open_run run = {0, 0, 0, 0};
	int early = early_ok(ls, n), ret = 0;
	uint64_t masters = 0;
	struct lk_lock_args ai;

	*held = 0;
	for (size_t i = 0; i < n; i++) {
		struct lk_res *res;

		if (i + LK_PF_BATCH_FAR < n)
			res_prefetch(ls, bn[i + LK_PF_BATCH_FAR].hash, 0);
		if (i + LK_PF_BATCH_NEAR < n)
			res_prefetch(ls, bn[i + LK_PF_BATCH_NEAR].hash, 1);
		res = lk_res_find(ls, &names[i], bn[i].hash);
		bn[i].res = res;
		bn[i].sent_lkid = 0;
		bn[i].look =
		    (res == NULL || res->master == 0) &&
		    lk_dir_node(ls, &names[i], bn[i].hash) != ls->nodeid;
		if (early && !bn[i].look && early_eligible(ls, a, res))
			early_write(ls, a, &run, &bn[i], &masters);
	}
	LK_TL(LK_TL_PLANNED);
	if (masters != 0)
		early_send(ls, masters, held);
	for (size_t i = 0; i < n && ret == 0; i++) {
		int r;

		if (!bn[i].look)
			continue;
		r = lk_lock_one(ls, args_of(a, args, i, &ai), &names[i],
				bn[i].hash, bn[i].res, &out[i]);
		note_now(now, i, r);
		if (refused_now(a, r))
			continue;
		if (r < 0)
			ret = r;
		else
			*granted += r == LK_GRANTED_NOW;
	}
	for (size_t i = 0; i < n; i++) {
		int r;

		if (bn[i].look)
			continue;
		if (bn[i].sent_lkid != 0) {
			/* its request is at the master: its lkb must exist
			 * (cannot fail: the pool was reserved), even after
			 * another name failed */
			lk_res_untoss(ls, bn[i].res);
			r = lk_lock_new(ls, args_of(a, args, i, &ai), bn[i].res,
					bn[i].sent_lkid, &out[i]);
		} else if (ret < 0) {
			continue; /* after a failure: only what was sent */
		} else {
			r = lk_lock_one(ls, args_of(a, args, i, &ai), &names[i],
					bn[i].hash, bn[i].res, &out[i]);
		}
		note_now(now, i, r);
		if (refused_now(a, r))
			continue;
		if (r < 0) {
			ret = ret < 0 ? ret : r;
			continue;
		}
		*granted += r == LK_GRANTED_NOW;
	}
	return ret;
}

/* lk_lock_batch, each name's callback argument args[i] (NULL: a->arg)
 * and whether its request ended inside the call in now[i] (may be
 * NULL). */
static int lock_batch(struct lk_ls *ls, const struct lk_name *names, size_t n,
		      const struct lk_lock_args *a, void *const *args,
		      struct lk_lock **out, uint8_t *now)
{
	int ret = lk_check_args(a->mode, a->flags, NULL);
	struct batch_name *bn;
	uint64_t held;
	int granted = 0;

	if (ret < 0)
		return ret;
	for (size_t i = 0; i < n; i++) {
		if (lk_wire_check_name(&names[i]) != 0)
			return -EINVAL;
		out[i] = NULL;
		if (now != NULL)
			now[i] = 1;
	}
	if (n == 0)
		return 0;
	bn = malloc(n * sizeof(*bn));
	if (bn == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) /* hashed before taking ls->mu */
		bn[i].hash = lk_name_hash(&names[i]);
	LK_TL(LK_TL_CALL);
	lk_api_lock(ls);
	ls->now_fresh = 0; /* one clock read per batch (lk_lock_new) */
	ret =
	    batch_locked(ls, names, n, bn, a, args, out, now, &granted, &held);
	lk_stats_requests_end(&ls->req_stats);
	LK_TL(LK_TL_BUILT);
	lk_out_flush(ls);
	/* the early requests' replies that came meanwhile, if any */
	for (uint64_t m = held; m != 0; m &= m - 1)
		ls->xp.rx_release(ls->xp.ctx, (uint32_t)__builtin_ctzll(m));
	lk_out_flush(ls);
	LK_TL(LK_TL_RETURN);
	pthread_mutex_unlock(&ls->mu);
	free(bn);
	/* on a failure part-way, the locks already created stay queued */
	return ret < 0 && granted == 0 ? ret : granted;
}

int lk_lock_batch(struct lk_ls *ls, const struct lk_name *names, size_t n,
		  int mode, unsigned flags, const struct lk_lock_ops *ops,
		  void *arg, struct lk_lock **out)
{
	struct lk_lock_args a = {mode, flags, ops, arg, 0};

	return lock_batch(ls, names, n, &a, NULL, out, NULL);
}

int lk_lock_batch_args(struct lk_ls *ls, const struct lk_name *names, size_t n,
		       int mode, unsigned flags, const struct lk_lock_ops *ops,
		       void *const *args, struct lk_lock **out, uint8_t *now)
{
	struct lk_lock_args a = {mode, flags, ops, NULL, 0};

	return lock_batch(ls, names, n, &a, args, out, now);
}
