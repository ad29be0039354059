/*
 * lk_stats.c — counters and smoothed figures (struct lk_stats in lk.h).
 * Smoothing as GFS2 does it: srtt += (x - srtt) / 8 and
 * srttvar += (|x - srtt| - srttvar) / 4. All under ls->mu.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lockmgr/lk_internal.h"

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

void lk_stats_request(struct lk_ls *ls, struct lk_res *res, uint64_t now)
{
	struct lk_counts *c = &lk_stats_type(ls, res->name.type)->c;

	c->requests++;
	res->stats.requests++;
	if (res->last_req != 0) {
		int64_t d = (int64_t)(now - res->last_req);

		smooth(&res->stats.sirt, &res->stats.sirtvar, d);
		smooth(&c->sirt, &c->sirtvar, d);
	}
	res->last_req = now;
}

/* floor(log2(us)), 0 below 2 us, at most the last bucket */
static unsigned bucket(uint64_t ns)
{
	uint64_t us = ns / 1000;
	unsigned b = us > 1 ? 63 - (unsigned)__builtin_clzll(us) : 0;

	return b < LK_HIST_BUCKETS - 1 ? b : LK_HIST_BUCKETS - 1;
}

void lk_stats_grant(struct lk_ls *ls, struct lk_lock *lk, int remote,
		    int queued, uint64_t now)
{
	struct lk_type_stats *t = lk_stats_type(ls, lk->res->name.type);
	struct lk_counts *rc = &lk->res->stats;
	uint64_t d = now > lk->t_req ? now - lk->t_req : 0;
	int m = lk->grmode;

	if (remote) {
		t->c.grants_remote++;
		rc->grants_remote++;
		if (queued) {
			smooth(&t->c.srttb, &t->c.srttvarb, (int64_t)d);
			smooth(&rc->srttb, &rc->srttvarb, (int64_t)d);
		} else {
			smooth(&t->c.srtt, &t->c.srttvar, (int64_t)d);
			smooth(&rc->srtt, &rc->srttvar, (int64_t)d);
		}
	} else {
		t->c.grants_local++;
	}
	if (queued) {
		t->c.waits++;
		rc->waits++;
	}
	t->wait_hist[bucket(d)]++;
	if (m >= 0 && m < LK_NMODES) {
		t->mode_count[m]++;
		t->mode_total_ns[m] += d;
		if (d > t->mode_max_ns[m])
			t->mode_max_ns[m] = d;
	}
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
		*out = res->stats;
		ret = 0;
	}
	pthread_mutex_unlock(&ls->mu);
	return ret;
}
