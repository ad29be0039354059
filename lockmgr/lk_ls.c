/*
 * lk_ls.c — opening and closing a lockspace: configuration, transport,
 * membership and callback thread around the core (lk_internal.h lists the
 * pieces). Also the quorum wait and the membership snapshot.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "lockmgr/cv_wait.h"
#include "lockmgr/lk_config.h"
#include "lockmgr/lk_internal.h"
#include "lockmgr/lk_net.h"

static int open_parts(struct lk_ls *ls, const struct lk_ls_config *c)
{
	int ret = lk_member_create(ls, ls->cfg);

	if (ret < 0)
		return ret;
	lk_member_set_disk(ls, c->disk, c->disk_timeout_ms);
	ls->recover = c->recover;
	ls->log = c->log;
	ls->uarg = c->arg;
	ls->quorate = 0;
	ret = lk_cb_thread_start(ls);
	if (ret < 0)
		return ret;
	return lk_net_start(ls->net);
}

static void destroy(struct lk_ls *ls)
{
	struct lk_config *cfg = ls->cfg;

	lk_net_stop(ls->net);
	lk_cb_thread_stop(ls);
	lk_net_destroy(ls->net);
	lk_member_destroy(ls);
	lk_core_destroy(ls);
	free(cfg);
}

int lk_ls_open(const struct lk_ls_config *c, struct lk_ls **out)
{
	struct lk_config *cfg = calloc(1, sizeof(*cfg));
	struct lk_xport xp = {.xmit = NULL};
	struct lk_net *net = NULL;
	struct lk_ls *ls;
	const char *why;
	int ret;

	if (cfg == NULL)
		return -ENOMEM;
	ret = lk_config_load(c->cluster_file, cfg, &why);
	if (ret == 0 && lk_config_node(cfg, c->nodeid) == NULL) {
		why = "this node id is not in the configuration";
		ret = -EINVAL;
	}
	if (ret == 0)
		ret = lk_core_create(c->nodeid, &xp, &ls);
	if (ret < 0) {
		if (c->log != NULL && why != NULL)
			c->log(0, why, c->arg);
		free(cfg);
		return ret;
	}
	ls->cfg = cfg;
	ls->toss_ns = (uint64_t)cfg->toss_ms * 1000000ull;
	ls->spin_ns = (uint64_t)cfg->poll_us * 300ull; /* 3/10, in ns */
	ls->log = c->log;
	ls->uarg = c->arg;
	ret = lk_net_create(ls, cfg, &net, &ls->xp);
	if (ret < 0) {
		lk_log(ls, 0, "cannot listen on the configured address");
		lk_core_destroy(ls);
		free(cfg);
		return ret;
	}
	ls->net = net;
	ret = open_parts(ls, c);
	if (ret < 0) {
		destroy(ls);
		return ret;
	}
	*out = ls;
	return 0;
}

int lk_ls_wait_quorum(struct lk_ls *ls, int timeout_ms)
{
	uint64_t end =
	    cvw_deadline_ms(timeout_ms > 0 ? (uint64_t)timeout_ms : 0);
	int ret = 0;

	lk_api_lock(ls);
	while (!(ls->gen != 0 && ls->rphase == 0 && ls->quorate) &&
	       !ls->fenced && ret == 0)
		ret = cvw_wait_until(&ls->cv, &ls->mu, end);
	ret = ls->fenced ? -ESHUTDOWN : ret != 0 ? -ETIMEDOUT : 0;
	pthread_mutex_unlock(&ls->mu);
	return ret;
}

int lk_ls_members(struct lk_ls *ls, uint64_t *gen, uint64_t *members)
{
	int q;

	lk_api_lock(ls);
	*gen = ls->gen;
	*members = ls->members;
	q = ls->quorate && ls->rphase == 0 && !ls->fenced;
	pthread_mutex_unlock(&ls->mu);
	return q;
}

/* Release or cancel every lock of this node (closing). ls->mu held. */
static void release_all(struct lk_ls *ls)
{
	for (size_t i = 0; i < LK_HASH_SIZE; i++) {
		struct lk_lock *lk = ls->lkb_hash[i], *next;

		for (; lk != NULL; lk = next) {
			next = lk->hnext;
			lk_core_drop_lock(ls, lk);
		}
	}
}

void lk_ls_close(struct lk_ls *ls)
{
	uint64_t end = lk_now_ns() + 1000000000ull;

	if (ls == NULL)
		return;
	lk_api_lock(ls);
	ls->closing = 1;
	release_all(ls);
	lk_plock_shutdown(ls);
	lk_recover_handoff(ls); /* before LEAVE on every link */
	lk_out_flush(ls);
	lk_member_leave(ls);
	lk_out_flush(ls);
	lk_net_quiesce(ls->net);
	/* give the frames a moment to leave */
	for (;;) {
		size_t pending = 0;

		for (uint32_t n = 1; n < LK_MAX_NODES; n++)
			pending += lk_net_pending(ls->net, n);
		if (pending == 0 || lk_now_ns() > end)
			break;
		pthread_mutex_unlock(&ls->mu);
		nanosleep(&(struct timespec){0, 2000000}, NULL);
		lk_api_lock(ls);
	}
	pthread_mutex_unlock(&ls->mu);
	destroy(ls);
}

void lk_ls_abandon(struct lk_ls *ls)
{
	if (ls == NULL)
		return;
	lk_api_lock(ls);
	ls->closing = 1;
	pthread_mutex_unlock(&ls->mu);
	destroy(ls);
}
