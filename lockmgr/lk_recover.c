/*
 * lk_recover.c — the recovery state machine, run at every membership
 * change (join, clean leave, death). PROTOCOL.md, "Recovery", has the
 * prose; in short, a generation's coordinator sends START(gen, members,
 * dead) and every member then walks the same phases, each ended by a
 * DONE(gen, phase) broadcast to all members (a barrier: TCP keeps each
 * link in order, so a DONE(p) from X proves every earlier frame of X has
 * arrived):
 *
 *   1 stop:     lock traffic stops; masters drop every master copy (the
 *               state is rebuilt from the holders), invalidating the LVB
 *               where a dead node held PW/EX; resources whose master left
 *               lose their master; the directory is emptied.
 *   2 dir:      every master re-registers its resources with the
 *               directory node of the new membership (DIR_ADD).
 *   3 remaster: for resources with no master, holders ask the directory
 *               (RLOOKUP); the first asker becomes the new master.
 *               RLOOKUPs are answered only once the directory node is in
 *               phase 3 itself (all DIR_ADDs in).
 *   4 rebuild:  every node sends each of its locks to the master (RCOM);
 *               pending cancels are settled locally first.
 *   5 user:     masters pick the LVB of re-mastered resources (from a
 *               PW/EX holder, else a PR holder, else invalid), then grant
 *               only LK_NOEXP requests while the user's node-down
 *               callbacks run; lock traffic resumes, frames of the new
 *               generation that arrived early are replayed, deferred
 *               operations are sent.
 *   6 running:  everything is granted again.
 *
 * A START for a newer generation restarts at phase 1 from any phase.
 * Lock frames of an older generation that arrive during recovery only
 * update the holder side (REPLY, BAST) or carry an LVB write-back; lock
 * frames of the new generation that arrive before phase 5 are kept and
 * replayed. All under ls->mu.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lockmgr/lk_internal.h"

static uint64_t bit(uint32_t n)
{
	return 1ull << n;
}

static void set_members(struct lk_ls *ls, uint64_t members)
{
	/* read without ls->mu by lk_place_node */
	__atomic_store_n(&ls->members, members, __ATOMIC_RELAXED);
	ls->nmemb = 0;
	for (uint32_t n = 1; n < LK_MAX_NODES; n++)
		if (members & bit(n))
			ls->memv[ls->nmemb++] = n;
	ls->quorate = ls->quorum_need == 0 || ls->nmemb >= ls->quorum_need;
}

static void bcast_done(struct lk_ls *ls, int phase)
{
	for (uint32_t n = 1; n < LK_MAX_NODES; n++) {
		struct lk_rec_ctl *c;

		if (!(ls->rmembers & bit(n)) || n == ls->nodeid)
			continue;
		c = lk_out_add(ls, n, LK_M_DONE);
		if (c == NULL)
			continue;
		c->gen = ls->rgen;
		c->phase = (uint32_t)phase;
		c->nodeid = ls->nodeid;
		c->members = ls->rmembers;
		c->dead = ls->rdead; /* so every member knows every death */
		c->prev = ls->done_members;
		c->prev_gen = ls->done_gen;
	}
	ls->rdone[phase] |= bit(ls->nodeid);
}

#define EACH_RES(ls, r, nx)                                                    \
	for (size_t i_ = 0; i_ < LK_HASH_SIZE; i_++)                           \
		for ((r) = (ls)->res_hash[i_];                                 \
		     (r) != NULL && ((nx) = (r)->hnext, 1); (r) = (nx))

static void purge_queue(struct lk_ls *ls, struct lk_res *res, struct lk_list *q,
			uint64_t dead)
{
	struct lk_list *l, *n;

	lk_list_each (l, n, q) {
		struct lk_rq *rq = LK_CONTAINER(l, struct lk_rq, link);

		if ((dead & bit(rq->nodeid)) && rq->grmode >= LK_PW)
			res->q.lvb_valid = 0;
		lk_grant_purge(&res->q, rq, NULL);
		if (rq->nodeid != ls->nodeid)
			lk_mst_free(ls, rq->owner);
	}
}

static void free_saved(struct lk_ls *ls)
{
	while (ls->saved != NULL) {
		struct lk_saved *s = ls->saved;

		ls->saved = s->next;
		free(s);
	}
	ls->rl_n = 0;
}

struct lk_res_rc *lk_res_rc(struct lk_res *r)
{
	if (r->rc == NULL) {
		r->rc = calloc(1, sizeof(*r->rc));
		if (r->rc != NULL)
			r->rc->rc_mode = -1;
	}
	return r->rc;
}

void lk_res_rc_free(struct lk_res *r)
{
	free(r->rc);
	r->rc = NULL;
}

static void phase1(struct lk_ls *ls, uint64_t dead)
{
	struct lk_res *r, *nx;

	EACH_RES (ls, r, nx) {
		r->lookup_sent = 0;
		if (r->rc != NULL) { /* a handoff (ho) stays */
			r->rc->rc_mode = -1;
			r->rc->rc_seq = 0;
		}
		if (r->master == ls->nodeid) {
			purge_queue(ls, r, &r->q.grantq, dead);
			purge_queue(ls, r, &r->q.convertq, dead);
			purge_queue(ls, r, &r->q.waitq, dead);
		} else if (r->master != 0 &&
			   (!(ls->rmembers & bit(r->master)) ||
			    (ls->left & bit(r->master)))) {
			/* gone, or left and back as a new incarnation */
			r->master = 0;
			r->remaster = 1;
		}
		/* a master keeps its unused resources (and their LVBs) */
		if (lk_list_empty(&r->locks) && r->master != ls->nodeid)
			lk_res_free(ls, r);
	}
	lk_dir_clear(ls);
	free_saved(ls);
	lk_plock_recover_stop(ls); /* POSIX locks: rebuilt in phase 4 */
}

static void phase2(struct lk_ls *ls)
{
	struct lk_res *r, *nx;

	EACH_RES (ls, r, nx) {
		uint64_t h;
		uint32_t dir;
		struct lk_rec_name *d;

		if (r->master != ls->nodeid)
			continue;
		h = lk_res_hash(r);
		dir = lk_dir_node(ls, &r->name, h);
		if (dir == ls->nodeid) {
			lk_dir_set(ls, &r->name, h, ls->nodeid);
			continue;
		}
		d = lk_out_add(ls, dir, LK_M_DIR_ADD);
		if (d != NULL) {
			d->name = r->name;
			d->master = ls->nodeid;
		}
	}
	bcast_done(ls, 2);
}

static void answer_rlookup(struct lk_ls *ls, uint32_t from,
			   const struct lk_rec_name *q)
{
	uint64_t h = lk_name_hash(&q->name);
	struct lk_rec_name *rep = lk_out_add(ls, from, LK_M_RLOOKUP_REPLY);

	if (rep == NULL)
		return;
	rep->name = q->name;
	rep->master = lk_dir_lookup(ls, &q->name, h, from);
}

static void phase3(struct lk_ls *ls)
{
	struct lk_res *r, *nx;

	for (size_t i = 0; i < ls->rl_n; i++)
		answer_rlookup(ls, ls->rl_from[i], &ls->rl_saved[i]);
	ls->rl_n = 0;
	ls->rlookups = 0;
	EACH_RES (ls, r, nx) {
		uint64_t h;
		uint32_t dir;
		struct lk_rec_name *q;

		if (r->master != 0 || lk_list_empty(&r->locks))
			continue;
		h = lk_res_hash(r);
		dir = lk_dir_node(ls, &r->name, h);
		if (dir == ls->nodeid) {
			r->master = lk_dir_lookup(ls, &r->name, h, ls->nodeid);
			continue;
		}
		q = lk_out_add(ls, dir, LK_M_RLOOKUP);
		if (q != NULL) {
			q->name = r->name;
			ls->rlookups++;
		}
	}
	if (ls->rlookups == 0)
		bcast_done(ls, 3);
}

/* Remember the best LVB offered for a re-mastered resource. */
static void rc_offer(struct lk_res *r, int grmode, int rqmode, uint32_t flags,
		     uint8_t lvbf, uint64_t seq, const uint8_t *lvb)
{
	struct lk_res_rc *rc;
	int rank;

	if ((lvbf & LK_RF_LVB_WB) && !r->remaster) {
		/* the master survived: apply the write-back now */
		memcpy(r->q.lvb, lvb, LK_LVB_LEN);
		r->q.lvb_seq++;
		r->q.lvb_valid = 1;
		return;
	}
	if (!r->remaster || !(flags & LK_VALBLK) || !(lvbf & LK_RF_LVB))
		return;
	rc = lk_res_rc(r);
	if (rc == NULL)
		return; /* no memory: the value block is lost (invalid) */
	if (lvbf & LK_RF_LVB_WB) {
		rank = 4; /* newest of all: written back, or handed on */
		rc->rc_valid = (lvbf & LK_RF_LVB_VALID) != 0;
		goto take;
	}
	/* a converting lock is only sure to hold the meet of its modes */
	if (grmode >= 0 && rqmode >= 0)
		grmode = lk_mode_meet(grmode, rqmode);
	if (grmode >= LK_PW)
		rank = 3;
	else if (grmode == LK_PR)
		rank = 2;
	else if (grmode >= 0)
		rank = 1;
	else
		return;
	if (!(lvbf & LK_RF_LVB_VALID))
		rank = 1;
	if (rank < rc->rc_mode || (rank == rc->rc_mode && seq <= rc->rc_seq))
		return;
take:
	rc->rc_mode = (int8_t)rank;
	rc->rc_seq = seq;
	memcpy(rc->rc_lvb, lvb, LK_LVB_LEN);
}

/* Settle a cancel that never reached the master, and a pending
 * down-conversion (always grantable; the old master may already have
 * applied it); 1 if @lk died. */
static int settle_cancel(struct lk_ls *ls, struct lk_lock *lk)
{
	int was_new;

	if (lk->state == LK_S_CONVERTING && !lk->cancel_pending &&
	    lk_mode_covers(lk->grmode, lk->rqmode)) {
		lk_lkb_complete(ls, lk, 0, lk->rqmode, NULL);
		return 0;
	}
	if (!lk->cancel_pending)
		return 0;
	was_new = lk->state != LK_S_CONVERTING;
	lk_lkb_complete(ls, lk, -ECANCELED, lk->grmode, NULL);
	return was_new;
}

static void send_lock(struct lk_ls *ls, struct lk_res *r, struct lk_lock *lk)
{
	uint8_t lvbf = LK_RF_LVB | (lk->lvb_valid ? LK_RF_LVB_VALID : 0);
	struct lk_rec_rcom *c;

	/* a value set under PW/EX whose down-conversion was settled locally
	 * (settle_cancel) has not reached any master yet */
	if (lk->lvb_dirty && lk->grmode < LK_PW && (lk->flags & LK_VALBLK)) {
		lvbf |= LK_RF_LVB_WB;
		lk->lvb_dirty = 0;
	}

	if (lk->state == LK_S_NEW)
		lk->state = LK_S_WAITING;
	if (r->master == ls->nodeid) {
		lk->rq.waited = 0;
		lk_grant_restore(&r->q, &lk->rq, lk->grmode, lk->rqmode,
				 lk->flags);
		rc_offer(r, lk->grmode, lk->rqmode, lk->flags, lvbf,
			 lk->lvb_seq, lk->lvb);
		return;
	}
	c = lk_out_add(ls, r->master, LK_M_RCOM);
	if (c == NULL)
		return;
	c->name = r->name;
	c->lkid = lk->lkid;
	c->flags = lk->flags;
	c->grmode = lk->grmode;
	c->rqmode = lk->rqmode;
	c->lvbf = lvbf;
	c->lvb_seq = lk->lvb_seq;
	memcpy(c->lvb, lk->lvb, LK_LVB_LEN);
}

/* Phase 4: a LVB a leaving master handed us goes to the new master. */
static void pass_handoff(struct lk_ls *ls, struct lk_res *r)
{
	struct lk_res_rc *rc = r->rc;
	uint8_t lvbf =
	    LK_RF_LVB | LK_RF_LVB_WB | (rc->ho_valid ? LK_RF_LVB_VALID : 0);
	struct lk_rec_rcom *c;

	rc->ho = 0;
	if (r->master == ls->nodeid) {
		rc_offer(r, LK_EX, -1, LK_VALBLK, lvbf, rc->ho_seq, rc->ho_lvb);
		return;
	}
	c = lk_out_add(ls, r->master, LK_M_HANDOFF);
	if (c == NULL)
		return;
	c->name = r->name;
	c->flags = LK_VALBLK;
	c->lvbf = lvbf;
	c->lvb_seq = rc->ho_seq;
	memcpy(c->lvb, rc->ho_lvb, LK_LVB_LEN);
}

static void phase4(struct lk_ls *ls)
{
	struct lk_res *r, *nx;
	struct lk_list *l, *n;

	EACH_RES (ls, r, nx) {
		if (r->rc != NULL && r->rc->ho && r->master != 0)
			pass_handoff(ls, r);
		lk_list_each (l, n, &r->locks) {
			struct lk_lock *lk =
			    LK_CONTAINER(l, struct lk_lock, res_link);

			if (r->master == 0) {
				/* created after our RLOOKUPs went out: it
				 * stays deferred and looks its master up
				 * when traffic resumes */
				continue;
			}
			if (lk->deferred_op == LK_M_CANCEL ||
			    lk->deferred_op == LK_M_REQUEST ||
			    lk->deferred_op == LK_M_CONVERT) {
				lk->deferred_op = 0;
				lk_list_del(&lk->dlink);
			}
			if (settle_cancel(ls, lk))
				continue;
			send_lock(ls, r, lk);
		}
	}
	lk_plock_recover_send(ls); /* POSIX locks: ours to the server */
	bcast_done(ls, 4);
}

static void rx_rcom(struct lk_ls *ls, uint32_t sender,
		    const struct lk_rec_rcom *c)
{
	struct lk_res *r;
	struct lk_mst *m;

	r = lk_res_find(ls, &c->name, lk_name_hash(&c->name));
	if (r == NULL || r->master != ls->nodeid || c->grmode < -1 ||
	    c->grmode >= LK_NMODES || c->rqmode < -1 ||
	    c->rqmode >= LK_NMODES || (c->grmode < 0 && c->rqmode < 0) ||
	    lk_mst_find(ls, sender, c->lkid) != NULL) {
		ls->stats.bad_frames++;
		lk_log(ls, 1, "RCOM from %u for a lock we cannot master",
		       sender);
		return;
	}
	m = lk_mst_new(ls, r, sender, c->lkid);
	if (m == NULL)
		return;
	lk_grant_restore(&r->q, &m->rq, c->grmode, c->rqmode, c->flags);
	rc_offer(r, c->grmode, c->rqmode, c->flags, c->lvbf, c->lvb_seq,
		 c->lvb);
}

/*
 * HANDOFF: from a leaving master (keep the value until recovery re-masters
 * the resource), or, during phase 4, passed on to us as the new master.
 */
static int rx_handoff(struct lk_ls *ls, uint32_t sender,
		      const struct lk_rec_rcom *c)
{
	struct lk_res_rc *rc;
	struct lk_res *r;

	if (lk_wire_check_name(&c->name) != 0)
		return -EPROTO;
	r = lk_res_find(ls, &c->name, lk_name_hash(&c->name));
	if (r == NULL)
		return -ENOENT;
	if (r->master == ls->nodeid && r->remaster && ls->rphase >= 3 &&
	    ls->rphase <= 4) {
		rc_offer(r, LK_EX, -1, LK_VALBLK, c->lvbf | LK_RF_LVB_WB,
			 c->lvb_seq, c->lvb);
		return 0;
	}
	if (r->master != sender && r->master != 0)
		return -EPROTO;
	rc = lk_res_rc(r);
	if (rc == NULL)
		return -ENOMEM; /* the value block is lost (invalid) */
	rc->ho = 1;
	rc->ho_valid = (c->lvbf & LK_RF_LVB_VALID) != 0;
	rc->ho_seq = c->lvb_seq;
	memcpy(rc->ho_lvb, c->lvb, LK_LVB_LEN);
	return 0;
}

static void replay_saved(struct lk_ls *ls)
{
	struct lk_saved *s = ls->saved;

	ls->saved = NULL;
	while (s != NULL) {
		struct lk_saved *next = s->next;

		lk_core_rx(ls, s->sender, s->frame, s->len);
		free(s);
		s = next;
	}
}

static void phase5(struct lk_ls *ls)
{
	struct lk_grant_out o = lk_master_out_ops;
	struct lk_res *r, *nx;
	int pushed = 0;

	o.ctx = ls;
	EACH_RES (ls, r, nx) {
		if (r->master == ls->nodeid && r->remaster) {
			const struct lk_res_rc *rc = r->rc;
			int m = rc != NULL ? rc->rc_mode : -1;

			r->q.lvb_valid = m == 4 ? rc->rc_valid : m >= 2;
			r->q.lvb_seq = rc != NULL ? rc->rc_seq : 0;
			if (m >= 2)
				memcpy(r->q.lvb, rc->rc_lvb, LK_LVB_LEN);
		}
		lk_res_rc_free(r); /* and a handoff with it */
		r->remaster = 0;
		if (r->master != ls->nodeid)
			continue;
		r->q.hold = ls->rdead != 0;
		lk_grant_pending(&r->q, &o);
	}
	/* the rebuilt state takes effect now */
	ls->done_gen = ls->rgen;
	ls->done_members = ls->rmembers;
	replay_saved(ls);
	lk_core_kick_deferred(ls);
	lk_plock_recover_resume(ls); /* POSIX locks: requests again */
	ls->ruser_pending = 0;
	for (uint32_t n = 1; n < LK_MAX_NODES; n++) {
		if (!(ls->rdead & bit(n)))
			continue;
		if (lk_cb_push(ls, LK_CB_RECOVER, NULL, (int)n) == 0) {
			ls->ruser_pending++;
			pushed = 1;
		}
	}
	if (!pushed) {
		ls->rdead = 0;
		bcast_done(ls, 5);
	}
}

static void finish(struct lk_ls *ls)
{
	struct lk_grant_out o = lk_master_out_ops;
	struct lk_res *r, *nx;

	o.ctx = ls;
	ls->rphase = 0;
	EACH_RES (ls, r, nx) {
		if (r->master == ls->nodeid) {
			r->q.hold = 0;
			lk_grant_pending(&r->q, &o);
		}
		lk_res_maybe_toss(ls, r);
	}
	ls->stats.recoveries++;
	lk_log(ls, 2, "recovery to generation %llu done",
	       (unsigned long long)ls->rgen);
	pthread_cond_broadcast(&ls->cv);
}

static void advance(struct lk_ls *ls)
{
	while (ls->rphase >= 1 && ls->rphase < LK_RS_NPHASES &&
	       (ls->rdone[ls->rphase] & ls->rmembers) == ls->rmembers) {
		int p = ++ls->rphase;

		switch (p) {
		case 2:
			phase2(ls);
			break;
		case 3:
			phase3(ls);
			break;
		case 4:
			phase4(ls);
			break;
		case 5:
			phase5(ls);
			break;
		default:
			finish(ls);
			return;
		}
	}
}

int lk_recover_start(struct lk_ls *ls, uint64_t gen, uint64_t members,
		     uint64_t dead)
{
	if (gen <= ls->rgen)
		return -ESTALE;
	if (!(members & bit(ls->nodeid))) {
		ls->fenced = 1;
		lk_log(ls, 0, "excluded from generation %llu: fenced",
		       (unsigned long long)gen);
		pthread_cond_broadcast(&ls->cv);
		return 0;
	}
	lk_log(ls, 2, "recovery to generation %llu starts",
	       (unsigned long long)gen);
	ls->rgen = gen;
	ls->gen = gen;
	lk_out_seal(ls); /* what follows is stamped with the new gen */
	ls->rmembers = members;
	/* the coordinator may be new and not know who died: add what we
	 * know; DONE(1) spreads the union before anyone needs it */
	ls->rdead |= (dead | (ls->members & ~ls->left)) & ~members;
	memset(ls->rdone, 0, sizeof(ls->rdone));
	if (ls->fut_gen == gen) {
		memcpy(ls->rdone, ls->fut_done, sizeof(ls->rdone));
		ls->rdead |= ls->fut_dead & ~members;
	}
	ls->rphase = 1;
	ls->rstart_ns = ls->now = lk_now_ns();
	set_members(ls, members);
	phase1(ls, ls->rdead);
	/* phase 1 voided what they mastered before they left; from now on
	 * they are members like any other (a death counts). One whose new
	 * incarnation we have not seen yet is expected: not a restart. */
	ls->admitted |= members & ls->left & ~ls->rejoined;
	ls->left &= ~members;
	ls->rejoined &= ~members;
	bcast_done(ls, 1);
	advance(ls);
	return 0;
}

void lk_recover_user_done(struct lk_ls *ls, uint64_t gen)
{
	if (gen != ls->rgen || ls->rphase != 5 || ls->ruser_pending == 0)
		return;
	if (--ls->ruser_pending == 0) {
		ls->rdead = 0;
		bcast_done(ls, 5);
		advance(ls);
	}
}

static void rx_done(struct lk_ls *ls, uint32_t sender,
		    const struct lk_rec_ctl *c)
{
	if (c->phase < 1 || c->phase >= LK_RS_NPHASES ||
	    !(c->members & bit(sender)))
		return;
	if (c->gen > ls->rgen) {
		/* its START reached the sender first */
		if (ls->fut_gen != c->gen) {
			memset(ls->fut_done, 0, sizeof(ls->fut_done));
			ls->fut_dead = 0;
		}
		ls->fut_gen = c->gen;
		ls->fut_done[c->phase] |= bit(sender);
		ls->fut_dead |= c->dead;
		return;
	}
	if (c->gen != ls->rgen || ls->rphase == 0 ||
	    !(ls->rmembers & bit(sender)))
		return;
	ls->rdone[c->phase] |= bit(sender);
	if (c->phase == 1)
		ls->rdead |= c->dead & ~ls->rmembers;
	advance(ls);
}

static void save_rlookup(struct lk_ls *ls, uint32_t sender,
			 const struct lk_rec_name *q)
{
	if (ls->rl_n == ls->rl_cap) {
		size_t cap = ls->rl_cap ? ls->rl_cap * 2 : 64;
		struct lk_rec_name *a = realloc(ls->rl_saved, cap * sizeof(*a));
		uint32_t *f;

		if (a == NULL)
			return;
		ls->rl_saved = a;
		f = realloc(ls->rl_from, cap * sizeof(*f));
		if (f == NULL)
			return;
		ls->rl_from = f;
		ls->rl_cap = cap;
	}
	ls->rl_saved[ls->rl_n] = *q;
	ls->rl_from[ls->rl_n++] = sender;
}

static void rx_rlookup_reply(struct lk_ls *ls, const struct lk_rec_name *q)
{
	struct lk_res *r = lk_res_find(ls, &q->name, lk_name_hash(&q->name));

	if (r == NULL || r->master != 0 || ls->rphase != 3 ||
	    !(ls->rmembers & bit(q->master)) || ls->rlookups == 0) {
		ls->stats.bad_frames++;
		return;
	}
	r->master = q->master;
	if (--ls->rlookups == 0)
		bcast_done(ls, 3);
}

void lk_recover_rx(struct lk_ls *ls, uint32_t sender, unsigned type,
		   const void *rec)
{
	const struct lk_rec_ctl *c = rec;
	const struct lk_rec_name *q = rec;

	if (type != LK_M_START && type != LK_M_DONE && type != LK_M_HEARTBEAT &&
	    type != LK_M_LEAVE && type != LK_M_HANDOFF &&
	    !(ls->rmembers & bit(sender))) {
		ls->stats.bad_frames++;
		return;
	}
	switch (type) {
	case LK_M_START:
		if (c->nodeid != sender || !(c->members & bit(sender)))
			break;
		if (lk_recover_check_stale(ls, sender, c->prev_gen, c->prev))
			return;
		lk_recover_start(ls, c->gen, c->members, c->dead);
		return;
	case LK_M_DONE:
		if (lk_recover_check_stale(ls, sender, c->prev_gen, c->prev))
			return;
		rx_done(ls, sender, c);
		return;
	case LK_M_DIR_ADD:
		if (ls->rphase >= 1 && ls->rphase <= 2 && q->master == sender &&
		    lk_wire_check_name(&q->name) == 0) {
			lk_dir_set(ls, &q->name, lk_name_hash(&q->name),
				   sender);
			return;
		}
		break;
	case LK_M_RLOOKUP:
		if (ls->rphase < 2 || lk_wire_check_name(&q->name) != 0)
			break;
		if (ls->rphase == 2)
			save_rlookup(ls, sender, q);
		else
			answer_rlookup(ls, sender, q);
		return;
	case LK_M_RLOOKUP_REPLY:
		rx_rlookup_reply(ls, q);
		return;
	case LK_M_RCOM:
		if (ls->rphase >= 3 && ls->rphase <= 4) {
			rx_rcom(ls, sender, rec);
			return;
		}
		break;
	case LK_M_HANDOFF:
		if (rx_handoff(ls, sender, rec) == 0)
			return;
		break;
	default:
		/* HEARTBEAT, LEAVE, HELLO, AUTH belong to other layers */
		return;
	}
	ls->stats.bad_frames++;
	lk_log(ls, 1, "%s from %u in recovery phase %d dropped",
	       lk_wire_name(type), sender, ls->rphase);
}

/* An old-generation lock record during recovery. */
static void old_record(struct lk_ls *ls, uint32_t sender, unsigned type,
		       const void *rec)
{
	const struct lk_rec_lock *l = rec;
	struct lk_res *r;

	switch (type) {
	case LK_M_REPLY:
	case LK_M_SREPLY:
	case LK_M_GRANTS:
	case LK_M_BAST:
		lk_core_rx_record(ls, sender, type, rec);
		break;
	case LK_M_CONVERT:
	case LK_M_UNLOCK:
		if (!l->has_lvb || lk_wire_check_name(&l->name) != 0)
			break;
		r = lk_res_find(ls, &l->name, lk_name_hash(&l->name));
		if (r != NULL && r->master == ls->nodeid) {
			memcpy(r->q.lvb, l->lvb, LK_LVB_LEN);
			r->q.lvb_seq++;
			r->q.lvb_valid = 1;
		}
		break;
	default:
		break; /* the rebuild conveys the rest */
	}
}

int lk_recover_filter(struct lk_ls *ls, uint32_t sender, const void *frame,
		      size_t len)
{
	const struct lk_hdr *h = frame;
	const uint8_t *p = (const uint8_t *)frame + sizeof(*h);
	size_t rs = lk_wire_recsize(h->type);
	struct lk_saved *s, **pp;

	if (ls->rphase == 0 || (h->gen == ls->rgen && ls->rphase >= 5))
		return 0;
	if (h->gen == ls->rgen) {
		s = malloc(sizeof(*s) + len);
		if (s == NULL)
			return 1;
		s->next = NULL;
		s->sender = sender;
		s->len = len;
		memcpy(s->frame, frame, len);
		for (pp = &ls->saved; *pp != NULL; pp = &(*pp)->next)
			;
		*pp = s;
		return 1;
	}
	if (h->gen < ls->rgen)
		for (unsigned i = 0; i < h->count; i++, p += rs)
			old_record(ls, sender, h->type, p);
	return 1;
}

void lk_recover_free(struct lk_ls *ls)
{
	struct lk_res *r, *nx;

	EACH_RES (ls, r, nx)
		lk_res_rc_free(r);
	free_saved(ls);
	free(ls->rl_saved);
	free(ls->rl_from);
}

int lk_recover_check_stale(struct lk_ls *ls, uint32_t sender, uint64_t prev_gen,
			   uint64_t prev)
{
	if (ls->fenced)
		return 1;
	if (ls->done_gen == 0 || prev_gen <= ls->done_gen ||
	    (prev & bit(ls->nodeid)))
		return 0;
	/* the others went on without us: our locks are void */
	ls->fenced = 1;
	lk_log(ls, 0,
	       "node %u is in generation %llu that excluded us: "
	       "fenced, reopen the lockspace",
	       sender, (unsigned long long)prev_gen);
	pthread_cond_broadcast(&ls->cv);
	return 1;
}

/* Coordinator: send START to the other members, then start here. */
int lk_recover_begin(struct lk_ls *ls, uint64_t gen, uint64_t members,
		     uint64_t dead)
{
	if (gen <= ls->rgen || !(members & bit(ls->nodeid)))
		return -ESTALE;
	for (uint32_t n = 1; n < LK_MAX_NODES; n++) {
		struct lk_rec_ctl *c;

		if (!(members & bit(n)) || n == ls->nodeid)
			continue;
		c = lk_out_add(ls, n, LK_M_START);
		if (c == NULL)
			continue;
		c->gen = gen;
		c->members = members;
		c->dead = dead;
		c->prev = ls->done_members;
		c->prev_gen = ls->done_gen;
		c->nodeid = ls->nodeid;
	}
	return lk_recover_start(ls, gen, members, dead);
}

/* A holder to hand @r's LVB to (not us), or 0. */
static uint32_t some_holder(struct lk_ls *ls, struct lk_res *r)
{
	struct lk_list *heads[3] = {&r->q.grantq, &r->q.convertq, &r->q.waitq};

	for (int i = 0; i < 3; i++)
		for (struct lk_list *l = heads[i]->next; l != heads[i];
		     l = l->next) {
			struct lk_rq *rq = LK_CONTAINER(l, struct lk_rq, link);

			if (rq->nodeid != ls->nodeid)
				return rq->nodeid;
		}
	return 0;
}

void lk_recover_handoff(struct lk_ls *ls)
{
	struct lk_res *r, *nx;

	EACH_RES (ls, r, nx) {
		struct lk_rec_rcom *c;
		uint32_t to;

		if (r->master != ls->nodeid)
			continue;
		to = some_holder(ls, r);
		if (to == 0)
			continue;
		c = lk_out_add(ls, to, LK_M_HANDOFF);
		if (c == NULL)
			continue;
		c->name = r->name;
		c->flags = LK_VALBLK;
		c->lvbf = LK_RF_LVB | (r->q.lvb_valid ? LK_RF_LVB_VALID : 0);
		c->lvb_seq = r->q.lvb_seq;
		memcpy(c->lvb, r->q.lvb, LK_LVB_LEN);
	}
}
