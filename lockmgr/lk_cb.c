/*
 * lk_cb.c — the callback queue and the thread that drains it. Completion,
 * blocking and node-down callbacks are queued under ls->mu by the core
 * and run here one at a time with ls->mu released, so a callback may call
 * back into the library. Each queued event holds a reference on its lkb.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "lockmgr/lk_internal.h"
#include "lockmgr/lk_net.h"

int lk_cb_push(struct lk_ls *ls, int kind, struct lk_lock *lk, int val)
{
	struct lk_cbev *ev;

	if (ls->cbq_len == ls->cbq_cap) {
		size_t cap = ls->cbq_cap ? ls->cbq_cap * 2 : 256;
		struct lk_cbev *nq = malloc(cap * sizeof(*nq));

		if (nq == NULL)
			return -ENOMEM;
		for (size_t i = 0; i < ls->cbq_len; i++)
			nq[i] = ls->cbq[(ls->cbq_head + i) % ls->cbq_cap];
		free(ls->cbq);
		ls->cbq = nq;
		ls->cbq_cap = cap;
		ls->cbq_head = 0;
	}
	ev = &ls->cbq[(ls->cbq_head + ls->cbq_len) % ls->cbq_cap];
	ev->kind = (uint8_t)kind;
	ev->val = val;
	ev->node = 0;
	ev->gen = ls->rgen;
	ev->lk = lk;
	ev->pl = NULL;
	if (lk != NULL)
		lk->refs++;
	ls->cbq_len++;
	pthread_cond_signal(&ls->cbcv);
	return 0;
}

int lk_cb_push_plock(struct lk_ls *ls, struct lk_plock *pl)
{
	int ret = lk_cb_push(ls, LK_CB_PLOCK, NULL, 0);

	if (ret == 0)
		lk_cb_last(ls)->pl = pl;
	return ret;
}

static void run_one(struct lk_ls *ls, struct lk_cbev *ev)
{
	struct lk_lock *lk = ev->lk;
	const struct lk_lock_ops *ops = lk != NULL ? lk->ops : NULL;
	void *arg = lk != NULL ? lk->arg : NULL;
	int dead = lk != NULL && (lk->state == LK_S_DEAD || lk->cached);

	ls->cb_running = 1;
	if (ev->kind == LK_CB_BAST)
		lk->cb_node = ev->node;
	pthread_mutex_unlock(&ls->mu);
	switch (ev->kind) {
	case LK_CB_COMP:
		/* a failed new request is DEAD but still owed its completion */
		if (ops != NULL && ops->completion != NULL)
			ops->completion(lk, ev->val, arg);
		break;
	case LK_CB_BAST:
		if (!dead && ops != NULL && ops->blocking != NULL)
			ops->blocking(lk, ev->val, arg);
		break;
	case LK_CB_RECOVER:
		if (ls->recover != NULL)
			ls->recover(ls, (uint32_t)ev->val, ls->uarg);
		break;
	case LK_CB_PLOCK: /* the request may be freed by done() */
		ev->pl->done(ev->pl, ev->pl->arg);
		break;
	}
	pthread_mutex_lock(&ls->mu);
	ls->cb_running = 0;
	if (lk != NULL) {
		lk_lkb_put(lk);
	} else if (ev->kind == LK_CB_RECOVER) {
		lk_recover_user_done(ls, ev->gen);
		/* the recovery may have ended: the network thread's turn
		 * publishes it (lk_ls_usable) */
		lk_net_wake_by(ls, lk_now_ns());
	}
}

int lk_cb_run(struct lk_ls *ls)
{
	int n = 0;

	while (ls->cbq_len > 0) {
		struct lk_cbev ev = ls->cbq[ls->cbq_head];

		ls->cbq_head = (ls->cbq_head + 1) % ls->cbq_cap;
		ls->cbq_len--;
		run_one(ls, &ev);
		n++;
	}
	if (n > 0)
		lk_out_flush(ls);
	return n;
}

static void *cb_main(void *arg)
{
	struct lk_ls *ls = arg;

	pthread_mutex_lock(&ls->mu);
	while (!(cvw_worker_stopping(&ls->cb_worker) && ls->cbq_len == 0)) {
		if (ls->cbq_len == 0) {
			pthread_cond_wait(&ls->cbcv, &ls->mu);
			continue;
		}
		lk_cb_run(ls);
		pthread_cond_broadcast(&ls->cv);
	}
	pthread_mutex_unlock(&ls->mu);
	return NULL;
}

int lk_cb_thread_start(struct lk_ls *ls)
{
	char name[16];

	snprintf(name, sizeof(name), "lk-cb%u", ls->nodeid);
	return cvw_worker_start(&ls->cb_worker, &ls->mu, &ls->cbcv, cb_main, ls,
				name);
}

/* Drain what is queued and stop; ls->mu not held. */
void lk_cb_thread_stop(struct lk_ls *ls)
{
	cvw_worker_stop(&ls->cb_worker);
}

uint32_t lk_bast_node(const struct lk_lock *lk)
{
	return lk->cb_node;
}
