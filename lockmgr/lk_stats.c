/*
 * lk_stats.c — counters and smoothed figures (struct lk_stats in lk.h).
 * Smoothing as GFS2 does it: srtt += (x - srtt) / 8 and
 * srttvar += (|x - srtt| - srttvar) / 4. All under ls->mu.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lockmgr/lk_internal.h"
#include "lockmgr/lk_net.h"

struct lk_type_stats *lk_stats_type(struct lk_ls *ls, uint16_t type)
{
	return &ls->stats.type[type < LK_STAT_TYPES ? type : LK_STAT_TYPES - 1];
}

static void smooth(int64_t *avg, int64_t *var, int64_t x)
{
	int64_t d = x - *avg;

	if (*avg == 0 && *var == 0) {
		*avg = x;
		*var = x / 2;
		return;
	}
	*avg += d / 8;
	*var += ((d < 0 ? -d : d) - *var) / 4;
}

/*
 * A request's figures: the resource's at once; the type's gathered in
 * @g while the requests that follow are of its type (one lk_lock_batch
 * call) and added by lk_stats_requests_end, their inter-request times
 * as one sample: their mean.
 */
void lk_stats_request_add(struct lk_ls *ls, struct lk_req_stats *g,
			  struct lk_res *res, uint64_t now)
{
	struct lk_type_stats *t = lk_stats_type(ls, res->name.type);

	if (g->n != 0 && g->t != t)
		lk_stats_requests_end(g);
	g->t = t;
	g->n++;
	lk_res_count(&res->stats.requests);
	if (res->last_req != 0) {
		int64_t d = (int64_t)(now - res->last_req);

		g->irt_sum += d;
		g->irt_n++;
	}
	res->last_req = now;
}

void lk_stats_requests_end(struct lk_req_stats *g)
{
	if (g->n == 0)
		return;
	g->t->c.requests += g->n;
	if (g->irt_n != 0)
		smooth(&g->t->c.sirt, &g->t->c.sirtvar,
		       g->irt_sum / (int64_t)g->irt_n);
	*g = (struct lk_req_stats){0};
}

/* floor(log2(us)), 0 below 2 us, at most the last bucket */
static unsigned bucket(uint64_t ns)
{
	uint64_t us = ns / 1000;
	unsigned b = us > 1 ? 63 - (unsigned)__builtin_clzll(us) : 0;

	return b < LK_HIST_BUCKETS - 1 ? b : LK_HIST_BUCKETS - 1;
}

/*
 * A grant's figures. The resource's are added at once; the type's are
 * gathered in @g while the grants that follow share its type, mode,
 * remote/queued and wait time (the locks of one GRANTS record: one
 * round trip), and added by lk_stats_grants_end. So a batch's 1,000
 * grants are one sample of the type's smoothed round trip, as they are
 * one round trip; the counts, histogram and per-mode figures count each.
 */
void lk_stats_grant_add(struct lk_ls *ls, struct lk_grant_stats *g,
			struct lk_lock *lk, int remote, int queued,
			uint64_t now)
{
	struct lk_res_counts *rc = &lk->res->stats;
	uint64_t d = now > lk->t_req ? now - lk->t_req : 0;
	uint32_t key = (uint32_t)lk->res->name.type << 16 |
		       (uint32_t)(uint8_t)lk->grmode << 8 |
		       (uint32_t)(remote != 0) << 1 | (uint32_t)(queued != 0);

	if (remote) {
		lk_res_count(&rc->grants_remote);
		if (queued)
			smooth(&rc->srttb, &rc->srttvarb, (int64_t)d);
	}
	if (g->n != 0 && g->key == key && g->d == d) {
		g->n++;
		return;
	}
	lk_stats_grants_end(g);
	*g = (struct lk_grant_stats){lk_stats_type(ls, lk->res->name.type), d,
				     1, key};
}

void lk_stats_grants_end(struct lk_grant_stats *g)
{
	struct lk_type_stats *t = g->t;
	int m = (int8_t)(g->key >> 8), queued = g->key & 1;

	if (g->n == 0)
		return;
	if (g->key & 2) { /* remote */
		t->c.grants_remote += g->n;
		if (queued)
			smooth(&t->c.srttb, &t->c.srttvarb, (int64_t)g->d);
		else
			smooth(&t->c.srtt, &t->c.srttvar, (int64_t)g->d);
	} else {
		t->c.grants_local += g->n;
	}
	if (queued)
		t->c.waits += g->n;
	t->wait_hist[bucket(g->d)] += g->n;
	if (m >= 0 && m < LK_NMODES) {
		t->mode_count[m] += g->n;
		t->mode_total_ns[m] += g->d * g->n;
		if (g->d > t->mode_max_ns[m])
			t->mode_max_ns[m] = g->d;
	}
	g->n = 0;
}

void lk_stats_peer_tx(struct lk_ls *ls, uint32_t node, size_t bytes,
		      unsigned records)
{
	struct lk_peer_stats *p = &ls->stats.peer[node % LK_MAX_NODES];

	p->frames_tx++;
	p->bytes_tx += bytes;
	p->records_tx += records;
}

void lk_stats_peer_rx(struct lk_ls *ls, uint32_t node, size_t bytes,
		      unsigned records)
{
	struct lk_peer_stats *p = &ls->stats.peer[node % LK_MAX_NODES];

	p->frames_rx++;
	p->bytes_rx += bytes;
	p->records_rx += records;
}

void lk_ls_stats(struct lk_ls *ls, struct lk_stats *out)
{
	lk_api_lock(ls);
	*out = ls->stats;
	out->toss_max = ls->toss_max;
	out->bytes =
	    lk_pool_bytes(&ls->lkb_pool) + lk_pool_bytes(&ls->mst_pool) +
	    lk_pool_bytes(&ls->res_pool) + lk_pool_bytes(&ls->dir_pool) +
	    4 * LK_HASH_SIZE * sizeof(void *);
	pthread_mutex_unlock(&ls->mu);
}

void lk_ls_set_toss_max(struct lk_ls *ls, uint64_t n)
{
	lk_api_lock(ls);
	ls->toss_max = n;
	if (n != 0 && ls->stats.tossed > n)
		lk_net_wake_by(ls, lk_now_ns());
	pthread_mutex_unlock(&ls->mu);
}

int lk_res_stats(struct lk_ls *ls, const struct lk_name *name,
		 struct lk_counts *out)
{
	struct lk_res *res;
	int ret = -ENOENT;

	lk_api_lock(ls);
	res = lk_res_find(ls, name, lk_name_hash(name));
	if (res != NULL) {
		*out = (struct lk_counts){
		    .requests = res->stats.requests,
		    .grants_remote = res->stats.grants_remote,
		    .basts_sent = res->stats.basts_sent,
		    .basts_recv = res->stats.basts_recv,
		    .srttb = res->stats.srttb,
		    .srttvarb = res->stats.srttvarb,
		};
		ret = 0;
	}
	pthread_mutex_unlock(&ls->mu);
	return ret;
}
