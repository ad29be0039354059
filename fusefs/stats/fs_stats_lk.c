/*
 * fs_stats_lk.c — the "locks" and "net" sections, rendered from
 * lk_ls_stats() (lockmgr/lk.h) with the key names of GFS2 glstats
 * (srtt, srttvar, srttb, srttvarb, sirt, sirtvar, dcnt, qcnt) and OCFS2
 * locking_state (num_prmode, num_exmode, total_*, max_*). Schema and the
 * exact mapping in fusefs/STATS.md. lk copies its counters out under its
 * own lock; this file only formats the copy, on the stats thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusefs/stats/fs_stats.h"
#include "lockmgr/lk.h"

/* The contention tracker: the resources this node waited on longest.
 * A fixed table; when full, a new resource replaces the one with the
 * least total wait (so a hot resource is never pushed out by a one-off).
 * Fed only on waits, which are slow anyway. */
#define FS_LK_TOP_SLOTS 64
#define FS_LK_TOP_SHOW 10

struct fs_lk_top {
	struct lk_name name;
	int used;
	int mode; /* last mode waited for */
	uint64_t waits, wait_ns, max_wait_ns;
};

struct fs_stats_lk {
	struct lk_ls *ls;	      /* immutable */
	fs_lk_type_name_fn type_name; /* immutable */
	pthread_mutex_t top_lock;
	struct fs_lk_top top[FS_LK_TOP_SLOTS]; /* protected by top_lock */
};

void fs_stats_lk_mode_keys(struct fs_json *o, int mode, uint64_t num,
			   uint64_t total_ns, uint64_t max_ns,
			   const uint64_t *failed)
{
	static const char *const lc[LK_NMODES] = {
	    "nl", "cr", "cw", "pr", "pw", "ex",
	};
	char key[32];

	if (mode < 0 || mode >= LK_NMODES)
		return;
	snprintf(key, sizeof(key), "num_%smode", lc[mode]);
	fs_json_u64(o, key, num);
	snprintf(key, sizeof(key), "total_%smode", lc[mode]);
	fs_json_u64(o, key, total_ns);
	snprintf(key, sizeof(key), "max_%smode", lc[mode]);
	fs_json_u64(o, key, max_ns);
	if (failed == NULL)
		return;
	snprintf(key, sizeof(key), "num_%smode_failed", lc[mode]);
	fs_json_u64(o, key, *failed);
}

static void fs_stats_lk_type(struct fs_json *o, const struct lk_type_stats *t)
{
	const struct lk_counts *c = &t->c;
	uint64_t total = 0, max = 0, n = 0;

	fs_json_u64(o, "requests", c->requests);
	fs_json_u64(o, "grants_local", c->grants_local);
	fs_json_u64(o, "grants_remote", c->grants_remote);
	fs_json_u64(o, "lookups", c->lookups);
	fs_json_u64(o, "lookups_local", c->lookups_local);
	fs_json_u64(o, "cache_hits", c->cache_hits);
	fs_json_u64(o, "waits", c->waits);
	fs_json_u64(o, "conversions", c->conversions);
	fs_json_u64(o, "demotes", c->demotes);
	fs_json_u64(o, "bast_sent", c->basts_sent);
	fs_json_u64(o, "bast_recv", c->basts_recv);
	fs_json_i64(o, "srtt", c->srtt);
	fs_json_i64(o, "srttvar", c->srttvar);
	fs_json_i64(o, "srttb", c->srttb);
	fs_json_i64(o, "srttvarb", c->srttvarb);
	fs_json_i64(o, "sirt", c->sirt);
	fs_json_i64(o, "sirtvar", c->sirtvar);
	/* GFS2: dcnt = requests sent to the DLM, qcnt = holder requests */
	fs_json_u64(o, "dcnt",
		    c->requests >= c->cache_hits ? c->requests - c->cache_hits
						 : 0);
	fs_json_u64(o, "qcnt", c->requests);
	for (int m = 0; m < LK_NMODES; m++) /* OCFS2 names, every mode */
		fs_stats_lk_mode_keys(o, m, t->mode_count[m],
				      t->mode_total_ns[m], t->mode_max_ns[m],
				      NULL);
	for (int m = 0; m < LK_NMODES; m++) {
		total += t->mode_total_ns[m];
		if (t->mode_max_ns[m] > max)
			max = t->mode_max_ns[m];
	}
	for (int b = 0; b < LK_HIST_BUCKETS; b++)
		n += t->wait_hist[b];
	fs_json_u64(o, "wait_ns", total);
	/* request-to-grant of every grant; lk's buckets are microseconds */
	fs_json_latency(o, "grant_lat", n, total, max, t->wait_hist,
			LK_HIST_BUCKETS, 1000);
}

static int fs_lk_type_used(const struct lk_type_stats *t)
{
	return t->c.requests != 0 || t->c.basts_recv != 0 ||
	       t->c.basts_sent != 0 || t->c.grants_local != 0 ||
	       t->c.grants_remote != 0;
}

void fs_stats_lk_render(struct fs_json *o, const struct lk_stats *s,
			fs_lk_type_name_fn type_name)
{
	struct fs_json *types = fs_json_obj(o, "types");
	uint64_t rtt = 0;
	char buf[32];

	for (unsigned i = 0; i < LK_STAT_TYPES; i++) {
		const char *name = type_name != NULL ? type_name(i) : NULL;

		/* a remote lookup or grant is a round trip waited for */
		rtt += s->type[i].c.lookups + s->type[i].c.grants_remote;
		if (!fs_lk_type_used(&s->type[i]))
			continue;
		if (name == NULL) {
			snprintf(buf, sizeof(buf),
				 i == LK_STAT_TYPES - 1 ? "type%u+" : "type%u",
				 i);
			name = buf;
		}
		fs_stats_lk_type(fs_json_obj(types, name), &s->type[i]);
	}
	fs_json_u64(o, "resources_now", s->resources);
	fs_json_u64(o, "tossed_now", s->tossed);
	fs_json_u64(o, "toss_freed", s->toss_freed);
	fs_json_u64(o, "toss_max", s->toss_max);
	fs_json_u64(o, "bytes_now", s->bytes);
	fs_json_u64(o, "placed_mastered", s->placed_mastered);
	fs_json_u64(o, "lookups", s->lookups);
	fs_json_u64(o, "remote_round_trips", rtt);
	fs_json_u64(o, "dir_entries_now", s->dir_entries);
	fs_json_u64(o, "recoveries", s->recoveries);
	fs_json_u64(o, "bad_frames", s->bad_frames);
	fs_json_u64(o, "auth_failures", s->auth_failures);
	fs_json_u64(o, "rx_spins", s->rx_spins);
	fs_json_u64(o, "rx_spin_hits", s->rx_spin_hits);
	fs_json_u64(o, "net_wakeups", s->net_wakeups);
	fs_json_u64(o, "net_spins", s->net_spins);
	fs_json_u64(o, "net_spin_hits", s->net_spin_hits);
	fs_json_u64(o, "net_spin_skips", s->net_spin_skips);
	fs_json_u64(o, "poll_backoffs", s->poll_backoffs);
	fs_json_u64(o, "runs_answered_first", s->runs_answered_first);
	fs_json_u64(o, "unlocks_waited", s->unlocks_waited);
}

void fs_stats_net_render(struct fs_json *o, const struct lk_stats *s)
{
	struct fs_json *peers = fs_json_arr(o, "peers");

	for (unsigned i = 1; i < LK_MAX_NODES; i++) {
		const struct lk_peer_stats *p = &s->peer[i];
		struct fs_json *e;

		if (p->frames_tx == 0 && p->frames_rx == 0 && p->dropped == 0 &&
		    p->basts_for == 0)
			continue;
		e = fs_json_obj(peers, NULL);
		fs_json_u64(e, "node", i);
		fs_json_u64(e, "frames_tx", p->frames_tx);
		fs_json_u64(e, "frames_rx", p->frames_rx);
		fs_json_u64(e, "bytes_tx", p->bytes_tx);
		fs_json_u64(e, "bytes_rx", p->bytes_rx);
		fs_json_u64(e, "records_tx", p->records_tx);
		fs_json_u64(e, "records_rx", p->records_rx);
		fs_json_u64(e, "dropped", p->dropped);
		fs_json_u64(e, "basts_for", p->basts_for);
	}
}

void fs_stats_lk_note_wait(struct fs_stats_lk *l, const struct lk_name *name,
			   int mode, uint64_t wait_ns)
{
	struct fs_lk_top *e = NULL, *least = NULL;

	if (l == NULL)
		return;
	pthread_mutex_lock(&l->top_lock);
	for (unsigned i = 0; i < FS_LK_TOP_SLOTS && e == NULL; i++) {
		struct fs_lk_top *t = &l->top[i];

		if (t->used && memcmp(&t->name, name, sizeof(*name)) == 0)
			e = t;
		else if (least == NULL || !t->used ||
			 (least->used && t->wait_ns < least->wait_ns))
			least = t;
	}
	if (e == NULL) {
		e = least;
		memset(e, 0, sizeof(*e));
		e->name = *name;
		e->used = 1;
	}
	e->mode = mode;
	e->waits++;
	e->wait_ns += wait_ns;
	if (wait_ns > e->max_wait_ns)
		e->max_wait_ns = wait_ns;
	pthread_mutex_unlock(&l->top_lock);
}

static int fs_lk_top_cmp(const void *a, const void *b)
{
	const struct fs_lk_top *x = a, *y = b;

	if (x->used != y->used)
		return y->used - x->used;
	return (x->wait_ns < y->wait_ns) - (x->wait_ns > y->wait_ns);
}

static void fs_stats_lk_top_one(struct fs_stats_lk *l, struct fs_json *r,
				const struct fs_lk_top *t)
{
	const char *tn =
	    l->type_name != NULL ? l->type_name(t->name.type) : NULL;
	struct lk_counts c;
	char res[96], raw[64];

	lk_name_fmt(&t->name, raw, sizeof(raw));
	if (tn != NULL) /* "inode:4242" rather than "1:4242" */
		snprintf(res, sizeof(res), "%s%s", tn, strchr(raw, ':'));
	else
		snprintf(res, sizeof(res), "%s", raw);
	fs_json_str(r, "res", res);
	fs_json_str(r, "type", tn != NULL ? tn : "?");
	fs_json_str(r, "mode", fs_lk_mode_name(t->mode));
	fs_json_u64(r, "waits", t->waits);
	fs_json_u64(r, "wait_ns", t->wait_ns);
	fs_json_u64(r, "max_wait_ns", t->max_wait_ns);
	if (lk_res_stats(l->ls, &t->name, &c) != 0)
		return; /* no longer in memory on this node */
	fs_json_u64(r, "requests", c.requests);
	fs_json_u64(r, "grants_remote", c.grants_remote);
	fs_json_u64(r, "bast_sent", c.basts_sent);
	fs_json_u64(r, "bast_recv", c.basts_recv);
	fs_json_i64(r, "srttb", c.srttb);
}

static void fs_stats_lk_top(struct fs_stats_lk *l, struct fs_json *o)
{
	struct fs_lk_top *top = malloc(sizeof(l->top));
	struct fs_json *arr = fs_json_arr(o, "top");

	if (top == NULL)
		return;
	pthread_mutex_lock(&l->top_lock);
	memcpy(top, l->top, sizeof(l->top));
	pthread_mutex_unlock(&l->top_lock);
	qsort(top, FS_LK_TOP_SLOTS, sizeof(*top), fs_lk_top_cmp);
	for (unsigned i = 0; i < FS_LK_TOP_SHOW && top[i].used; i++)
		fs_stats_lk_top_one(l, fs_json_obj(arr, NULL), &top[i]);
	free(top);
}

static void fs_stats_locks_section(struct fs_json *o, void *arg)
{
	struct fs_stats_lk *l = arg;
	struct lk_stats *s = malloc(sizeof(*s)); /* ~20 KiB: not on stack */

	if (s == NULL) {
		fs_json_bool(o, "unavailable", 1);
		return;
	}
	lk_ls_stats(l->ls, s);
	fs_json_u64(o, "node", lk_ls_nodeid(l->ls));
	fs_stats_lk_render(o, s, l->type_name);
	free(s);
	fs_stats_lk_top(l, o);
}

static void fs_stats_net_section(struct fs_json *o, void *arg)
{
	struct fs_stats_lk *l = arg;
	struct lk_stats *s = malloc(sizeof(*s));

	if (s == NULL) {
		fs_json_bool(o, "unavailable", 1);
		return;
	}
	lk_ls_stats(l->ls, s);
	fs_stats_net_render(o, s);
	free(s);
}

int fs_stats_add_locks(struct fs_stats *st, struct lk_ls *ls,
		       fs_lk_type_name_fn type_name, struct fs_stats_lk **out)
{
	struct fs_stats_lk *l = calloc(1, sizeof(*l));
	int ret;

	if (l == NULL)
		return -ENOMEM;
	l->ls = ls;
	l->type_name = type_name;
	pthread_mutex_init(&l->top_lock, NULL);
	ret = fs_stats_add_section(st, "locks", fs_stats_locks_section, l);
	if (ret == 0) {
		ret = fs_stats_add_section(st, "net", fs_stats_net_section, l);
		if (ret != 0)
			fs_stats_remove_section(st, "locks");
	}
	if (ret != 0) {
		pthread_mutex_destroy(&l->top_lock);
		free(l);
		return ret;
	}
	*out = l;
	return 0;
}

void fs_stats_remove_locks(struct fs_stats *st, struct fs_stats_lk *l)
{
	if (l == NULL)
		return;
	fs_stats_remove_section(st, "locks");
	fs_stats_remove_section(st, "net");
	pthread_mutex_destroy(&l->top_lock);
	free(l);
}
