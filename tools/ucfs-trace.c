/*
 * ucfs-trace — merge the -o trace=FILE traces of several nodes and
 * explain them.
 *
 *   ucfs-trace [--top N] [--plot PREFIX] [--json] FILE...
 *
 * Reads JSON lines (format: fusefs/STATS.md, "Trace format"), merges them
 * by time and prints:
 *   - the events per node (request, grant, bast_sent, bast_recv, demote,
 *     release, op);
 *   - the top N lock waits (grants with the longest wait) and the
 *     resources with the most total wait;
 *   - ping-pong: resources whose grants move between nodes with an
 *     exclusive mode (EX or PW) on one side, with the node pairs, the
 *     number of transfers and transfers per second;
 *   - who takes locks from whom: per pair (asking node, node that gave
 *     way), the blocking callbacks and demotes the trace's "peer" names,
 *     the time those demotes took, and the demote-aheads (releases that
 *     name a peer: idle neighbours given up with a blocking callback);
 *   - a per-second timeline: grants, lock wait ms, blocking callbacks,
 *     demotes, FUSE ops and their mean latency, for each second that saw
 *     events (entries carry their "sec").
 * --plot PREFIX writes PREFIX.dat and PREFIX.gp and runs gnuplot to draw
 * PREFIX.svg and PREFIX.png: lock wait (ms per second) and FUSE ops per
 * second, one line per node, over time. --json prints the summary as one
 * JSON object instead of text.
 *
 * Lines that are not valid trace events (including a "t" outside 0 ..
 * 1e11 s) are counted and skipped. Exit
 * status: 0, 1 if a file could not be read or gnuplot failed, 2 on bad
 * usage.
 */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#define MAX_NODES 64
#define T_MAX 1e11 /* seconds (year 5138): a later "t" is a garbled line */
#define MAX_FILES 256

enum kind {
	K_REQUEST,
	K_GRANT,
	K_BAST_SENT,
	K_BAST_RECV,
	K_DEMOTE,
	K_RELEASE,
	K_OP,
	K__COUNT
};

static const char *const kind_names[K__COUNT] = {
    "request", "grant", "bast_sent", "bast_recv", "demote", "release", "op",
};

struct ev {
	double t;
	int node; /* index into nodes[] */
	enum kind k;
	int res; /* index into the resource table, -1 for ops */
	char mode[4];
	double wait_us; /* grant: wait; op: latency; demote: its time */
	int peer;	/* bast_recv, demote, a demote-ahead's release: the
			   node that asked, -1 none */
	size_t seq;	/* input order, for a stable sort */
};

struct res {
	char *name;
	double total_wait_us, max_wait_us;
	unsigned long grants, transfers;
	int last_node; /* node of the last exclusive-relevant grant */
	int last_excl; /* that grant was EX/PW */
	double first_t, last_t;
	unsigned long pair[4][3]; /* top node pairs: a, b, count */
	int npairs;
};

struct trace {
	struct ev *ev;
	size_t n, cap;
	struct res *res;
	size_t nres, capres;
	json_t *res_index; /* name -> index */
	int node_ids[MAX_NODES];
	int nnodes;
	unsigned long bad_lines;
	unsigned long count[MAX_NODES][K__COUNT];
	/* by node id: [asker][node that gave way] */
	struct took {
		unsigned long basts, demotes, aheads; /* aheads: releases */
		double demote_us;
	} took[MAX_NODES][MAX_NODES];
	unsigned long no_peer[2]; /* bast_recv, demote without "peer" */
	int top;
	/* what demotes [0] and releases [1] wrote back and invalidated */
	struct wb_sum {
		unsigned long n, attrs, pages, names;
		double us, log_blocks, home_blocks, data_bytes, flushes;
	} wb[2];
};

static int node_index(struct trace *tr, int id)
{
	for (int i = 0; i < tr->nnodes; i++)
		if (tr->node_ids[i] == id)
			return i;
	if (tr->nnodes == MAX_NODES)
		return -1;
	tr->node_ids[tr->nnodes] = id;
	return tr->nnodes++;
}

static int res_index(struct trace *tr, const char *name)
{
	json_t *v = json_object_get(tr->res_index, name);
	struct res *r;

	if (v != NULL)
		return (int)json_integer_value(v);
	if (tr->nres == tr->capres) {
		size_t cap = tr->capres ? tr->capres * 2 : 256;
		struct res *nr = realloc(tr->res, cap * sizeof(*nr));

		if (nr == NULL)
			return -1;
		tr->res = nr;
		tr->capres = cap;
	}
	r = &tr->res[tr->nres];
	memset(r, 0, sizeof(*r));
	r->name = strdup(name);
	r->last_node = -1;
	if (r->name == NULL)
		return -1;
	json_object_set_new(tr->res_index, name,
			    json_integer((json_int_t)tr->nres));
	return (int)tr->nres++;
}

static int kind_of(const char *s)
{
	for (int k = 0; k < K__COUNT; k++)
		if (s != NULL && strcmp(s, kind_names[k]) == 0)
			return k;
	return -1;
}

/* Parse one line into tr->ev[tr->n]; 0 or -1 (bad line). */
static double num_of(json_t *j, const char *key)
{
	json_t *v = json_object_get(j, key);

	return json_is_number(v) ? json_number_value(v) : 0;
}

/* A demote's or release's write-back and invalidation (STATS.md). */
static void add_wb(struct trace *tr, json_t *j, enum kind k)
{
	struct wb_sum *w = &tr->wb[k == K_RELEASE];
	const char *kinval = json_string_value(json_object_get(j, "kinval"));

	if (kinval == NULL)
		return; /* a trace from before these keys */
	w->n++;
	if (k == K_DEMOTE) /* a release's held_us is not its cost */
		w->us += num_of(j, "demote_us");
	w->log_blocks += num_of(j, "log_blocks");
	w->home_blocks += num_of(j, "home_blocks");
	w->data_bytes += num_of(j, "data_bytes");
	w->flushes += num_of(j, "flushes");
	w->attrs += strstr(kinval, "attrs") != NULL;
	w->pages += strstr(kinval, "pages") != NULL;
	w->names += strstr(kinval, "names") != NULL;
}

static int parse_line(struct trace *tr, const char *line, struct ev *e)
{
	json_t *j = json_loads(line, 0, NULL), *t, *node, *w;
	const char *res, *mode;
	int k, ret = -1;

	if (j == NULL)
		return -1;
	t = json_object_get(j, "t");
	node = json_object_get(j, "node");
	k = kind_of(json_string_value(json_object_get(j, "ev")));
	if (!json_is_number(t) || !json_is_integer(node) || k < 0)
		goto out;
	memset(e, 0, sizeof(*e));
	e->t = json_number_value(t);
	if (!(e->t >= 0 && e->t < T_MAX))
		goto out;
	e->node = node_index(tr, (int)json_integer_value(node));
	e->k = (enum kind)k;
	e->res = -1;
	if (e->node < 0)
		goto out;
	if (k == K_OP) {
		w = json_object_get(j, "lat_us");
		e->wait_us = json_is_number(w) ? json_number_value(w) : 0;
		ret = 0;
		goto out;
	}
	res = json_string_value(json_object_get(j, "res"));
	mode = json_string_value(json_object_get(j, "mode"));
	if (res == NULL)
		goto out;
	e->res = res_index(tr, res);
	snprintf(e->mode, sizeof(e->mode), "%s", mode != NULL ? mode : "IV");
	w = json_object_get(j, k == K_DEMOTE ? "demote_us" : "wait_us");
	e->wait_us = json_is_number(w) ? json_number_value(w) : 0;
	w = json_object_get(j, "peer");
	e->peer = json_is_integer(w) && json_integer_value(w) > 0 &&
			  json_integer_value(w) < MAX_NODES
		      ? (int)json_integer_value(w)
		      : -1;
	ret = e->res < 0 ? -1 : 0;
	if (ret == 0 && (k == K_DEMOTE || k == K_RELEASE))
		add_wb(tr, j, (enum kind)k);
out:
	json_decref(j);
	return ret;
}

static int read_file(struct trace *tr, const char *path)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t len = 0;

	if (f == NULL) {
		fprintf(stderr, "ucfs-trace: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (getline(&line, &len, f) > 0) {
		if (tr->n == tr->cap) {
			size_t cap = tr->cap ? tr->cap * 2 : 4096;
			struct ev *ne = realloc(tr->ev, cap * sizeof(*ne));

			if (ne == NULL)
				break;
			tr->ev = ne;
			tr->cap = cap;
		}
		if (parse_line(tr, line, &tr->ev[tr->n]) != 0) {
			tr->bad_lines++;
			continue;
		}
		tr->ev[tr->n].seq = tr->n;
		tr->n++;
	}
	free(line);
	fclose(f);
	return 0;
}

static int ev_cmp(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

static int is_excl(const char *mode)
{
	return strcmp(mode, "EX") == 0 || strcmp(mode, "PW") == 0;
}

static void count_pair(struct res *r, int a, int b)
{
	int lo = a < b ? a : b, hi = a < b ? b : a;

	for (int i = 0; i < r->npairs; i++) {
		if ((int)r->pair[i][0] == lo && (int)r->pair[i][1] == hi) {
			r->pair[i][2]++;
			return;
		}
	}
	if (r->npairs < 4) {
		r->pair[r->npairs][0] = (unsigned long)lo;
		r->pair[r->npairs][1] = (unsigned long)hi;
		r->pair[r->npairs][2] = 1;
		r->npairs++;
	}
}

/* A blocking callback, demote or demote-ahead (a release with a peer)
 * of node e->node for node e->peer. */
static void count_took(struct trace *tr, const struct ev *e)
{
	int id = tr->node_ids[e->node];
	struct took *t;

	if (e->k == K_RELEASE) {
		if (e->peer > 0 && id > 0 && id < MAX_NODES)
			tr->took[e->peer][id].aheads++;
		return;
	}
	if (e->peer < 0 || id <= 0 || id >= MAX_NODES) {
		tr->no_peer[e->k == K_DEMOTE]++;
		return;
	}
	t = &tr->took[e->peer][id];
	if (e->k == K_BAST_RECV) {
		t->basts++;
	} else {
		t->demotes++;
		t->demote_us += e->wait_us;
	}
}

/* One pass over the merged events: per-node counts, per-resource waits
 * and transfers. A transfer is a grant on a node other than the previous
 * grant's, with EX/PW on either side (compatible shared grants do not
 * move the lock). */
static void analyse(struct trace *tr)
{
	for (size_t i = 0; i < tr->n; i++) {
		struct ev *e = &tr->ev[i];
		struct res *r;

		tr->count[e->node][e->k]++;
		if (e->k == K_BAST_RECV || e->k == K_DEMOTE ||
		    e->k == K_RELEASE)
			count_took(tr, e);
		if (e->k != K_GRANT)
			continue;
		r = &tr->res[e->res];
		if (r->grants == 0)
			r->first_t = e->t;
		r->last_t = e->t;
		r->grants++;
		r->total_wait_us += e->wait_us;
		if (e->wait_us > r->max_wait_us)
			r->max_wait_us = e->wait_us;
		if (r->last_node >= 0 && r->last_node != e->node &&
		    (r->last_excl || is_excl(e->mode))) {
			r->transfers++;
			count_pair(r, tr->node_ids[r->last_node],
				   tr->node_ids[e->node]);
		}
		r->last_node = e->node;
		r->last_excl = is_excl(e->mode);
	}
}

static int wait_cmp(const void *a, const void *b)
{
	const struct ev *x = *(const struct ev *const *)a;
	const struct ev *y = *(const struct ev *const *)b;

	return (x->wait_us < y->wait_us) - (x->wait_us > y->wait_us);
}

static json_t *summary_top_waits(struct trace *tr, double t0)
{
	struct ev **g = malloc(sizeof(*g) * (tr->n + 1));
	json_t *arr = json_array();
	size_t n = 0;

	if (g == NULL)
		return arr;
	for (size_t i = 0; i < tr->n; i++)
		if (tr->ev[i].k == K_GRANT && tr->ev[i].wait_us > 0)
			g[n++] = &tr->ev[i];
	qsort(g, n, sizeof(*g), wait_cmp);
	for (size_t i = 0; i < n && i < (size_t)tr->top; i++)
		json_array_append_new(
		    arr, json_pack("{s:f,s:i,s:s,s:s,s:f}", "t", g[i]->t - t0,
				   "node", tr->node_ids[g[i]->node], "res",
				   tr->res[g[i]->res].name, "mode", g[i]->mode,
				   "wait_us", g[i]->wait_us));
	free(g);
	return arr;
}

static int res_wait_cmp(const void *a, const void *b)
{
	const struct res *x = *(const struct res *const *)a;
	const struct res *y = *(const struct res *const *)b;

	return (x->total_wait_us < y->total_wait_us) -
	       (x->total_wait_us > y->total_wait_us);
}

static int res_xfer_cmp(const void *a, const void *b)
{
	const struct res *x = *(const struct res *const *)a;
	const struct res *y = *(const struct res *const *)b;

	return (x->transfers < y->transfers) - (x->transfers > y->transfers);
}

static json_t *summary_resources(struct trace *tr, int pingpong)
{
	struct res **r = malloc(sizeof(*r) * (tr->nres + 1));
	json_t *arr = json_array();

	if (r == NULL)
		return arr;
	for (size_t i = 0; i < tr->nres; i++)
		r[i] = &tr->res[i];
	qsort(r, tr->nres, sizeof(*r), pingpong ? res_xfer_cmp : res_wait_cmp);
	for (size_t i = 0, shown = 0; i < tr->nres && shown < (size_t)tr->top;
	     i++) {
		struct res *x = r[i];
		double span = x->last_t - x->first_t;
		json_t *pairs;

		if (pingpong ? x->transfers < 2 : x->grants == 0)
			continue;
		shown++;
		if (!pingpong) {
			json_array_append_new(
			    arr,
			    json_pack("{s:s,s:I,s:f,s:f,s:f}", "res", x->name,
				      "grants", (json_int_t)x->grants,
				      "total_wait_us", x->total_wait_us,
				      "max_wait_us", x->max_wait_us,
				      "mean_wait_us",
				      x->total_wait_us / (double)x->grants));
			continue;
		}
		pairs = json_array();
		for (int p = 0; p < x->npairs; p++)
			json_array_append_new(
			    pairs,
			    json_pack("[I,I,I]", (json_int_t)x->pair[p][0],
				      (json_int_t)x->pair[p][1],
				      (json_int_t)x->pair[p][2]));
		json_array_append_new(
		    arr, json_pack("{s:s,s:I,s:f,s:f,s:o}", "res", x->name,
				   "transfers", (json_int_t)x->transfers,
				   "span_s", span, "per_s",
				   span > 0 ? (double)x->transfers / span : 0.0,
				   "pairs", pairs));
	}
	free(r);
	return arr;
}

/* Per-second figures; per node too (for the plot). */
struct sec {
	uint64_t sec; /* since the first event */
	unsigned long grants, basts, demotes, ops;
	double wait_ms, op_lat_us;
	double node_wait_ms[MAX_NODES];
	unsigned long node_ops[MAX_NODES];
};

/* The seconds that saw events, in order (events are sorted by time): a
 * stray timestamp costs one entry, not the whole span up to it. */
static struct sec *timeline(struct trace *tr, double t0, size_t *nsec)
{
	struct sec *s;
	size_t n = 0;

	for (size_t i = 0; i < tr->n; i++)
		n += i == 0 || (uint64_t)(tr->ev[i].t - t0) !=
				   (uint64_t)(tr->ev[i - 1].t - t0);
	*nsec = 0;
	s = calloc(n + 1, sizeof(*s));
	if (s == NULL)
		return NULL;
	for (size_t i = 0; i < tr->n; i++) {
		struct ev *e = &tr->ev[i];
		uint64_t b = (uint64_t)(e->t - t0);
		struct sec *x;

		if (*nsec == 0 || s[*nsec - 1].sec != b)
			s[(*nsec)++].sec = b;
		x = &s[*nsec - 1];
		if (e->k == K_GRANT) {
			x->grants++;
			x->wait_ms += e->wait_us / 1e3;
			x->node_wait_ms[e->node] += e->wait_us / 1e3;
		} else if (e->k == K_BAST_RECV) {
			x->basts++;
		} else if (e->k == K_DEMOTE) {
			x->demotes++;
		} else if (e->k == K_OP) {
			x->ops++;
			x->op_lat_us += e->wait_us;
			x->node_ops[e->node]++;
		}
	}
	return s;
}

static json_t *summary_timeline(struct sec *s, size_t nsec)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < nsec; i++)
		json_array_append_new(
		    arr,
		    json_pack("{s:I,s:I,s:f,s:I,s:I,s:I,s:f}", "sec",
			      (json_int_t)s[i].sec, "grants",
			      (json_int_t)s[i].grants, "wait_ms", s[i].wait_ms,
			      "basts", (json_int_t)s[i].basts, "demotes",
			      (json_int_t)s[i].demotes, "ops",
			      (json_int_t)s[i].ops, "op_mean_us",
			      s[i].ops ? s[i].op_lat_us / (double)s[i].ops
				       : 0.0));
	return arr;
}

static json_t *summary_nodes(struct trace *tr)
{
	json_t *arr = json_array();

	for (int i = 0; i < tr->nnodes; i++) {
		json_t *o = json_pack("{s:i}", "node", tr->node_ids[i]);

		for (int k = 0; k < K__COUNT; k++)
			json_object_set_new(
			    o, kind_names[k],
			    json_integer((json_int_t)tr->count[i][k]));
		json_array_append_new(arr, o);
	}
	return arr;
}

/* "who takes locks from whom": one entry per (asker, node) pair, the
 * most demotes first. */
static json_t *summary_peers(struct trace *tr)
{
	json_t *arr = json_array(), *o;
	int n = 0, idx[MAX_NODES * MAX_NODES];

	for (int a = 1; a < MAX_NODES; a++)
		for (int b = 1; b < MAX_NODES; b++)
			if (tr->took[a][b].basts || tr->took[a][b].demotes ||
			    tr->took[a][b].aheads)
				idx[n++] = a * MAX_NODES + b;
	for (int i = 1; i < n; i++) { /* insertion sort: few pairs */
		int x = idx[i], j = i;
		unsigned long d =
		    tr->took[x / MAX_NODES][x % MAX_NODES].demotes;

		for (; j > 0 &&
		       tr->took[idx[j - 1] / MAX_NODES][idx[j - 1] % MAX_NODES]
			       .demotes < d;
		     j--)
			idx[j] = idx[j - 1];
		idx[j] = x;
	}
	for (int i = 0; i < n; i++) {
		int a = idx[i] / MAX_NODES, b = idx[i] % MAX_NODES;
		const struct took *t = &tr->took[a][b];

		json_array_append_new(
		    arr, json_pack("{s:i,s:i,s:I,s:I,s:f,s:I}", "asker", a,
				   "node", b, "basts", (json_int_t)t->basts,
				   "demotes", (json_int_t)t->demotes,
				   "demote_ms", t->demote_us / 1e3, "aheads",
				   (json_int_t)t->aheads));
	}
	o = json_pack("{s:o,s:I,s:I}", "pairs", arr, "basts_no_peer",
		      (json_int_t)tr->no_peer[0], "demotes_no_peer",
		      (json_int_t)tr->no_peer[1]);
	return o;
}

static void print_peers(json_t *s)
{
	json_t *p = json_object_get(s, "peers"), *v;
	size_t i;

	printf("\nWho takes locks from whom (blocking callbacks, demotes "
	       "and demote-aheads by the node that asked)\n"
	       "%6s %6s %10s %10s %12s %10s\n",
	       "asker", "node", "basts", "demotes", "demote_ms", "aheads");
	json_array_foreach(json_object_get(p, "pairs"), i, v)
	    printf("%6lld %6lld %10lld %10lld %12.3f %10lld\n",
		   (long long)json_integer_value(json_object_get(v, "asker")),
		   (long long)json_integer_value(json_object_get(v, "node")),
		   (long long)json_integer_value(json_object_get(v, "basts")),
		   (long long)json_integer_value(json_object_get(v, "demotes")),
		   json_number_value(json_object_get(v, "demote_ms")),
		   (long long)json_integer_value(json_object_get(v, "aheads")));
	if (json_array_size(json_object_get(p, "pairs")) == 0)
		printf("  (none)\n");
	printf(
	    "no peer named: %lld blocking callbacks, %lld demotes\n",
	    (long long)json_integer_value(json_object_get(p, "basts_no_peer")),
	    (long long)json_integer_value(
		json_object_get(p, "demotes_no_peer")));
}

static json_t *summary_wb(struct trace *tr)
{
	json_t *o = json_object();

	for (int i = 0; i < 2; i++) {
		const struct wb_sum *w = &tr->wb[i];

		json_object_set_new(
		    o, i ? "release" : "demote",
		    json_pack("{s:I,s:f,s:f,s:f,s:f,s:f,s:I,s:I,s:I}", "count",
			      (json_int_t)w->n, "mean_us",
			      w->n ? w->us / (double)w->n : 0.0, "log_blocks",
			      w->log_blocks, "home_blocks", w->home_blocks,
			      "data_bytes", w->data_bytes, "flushes",
			      w->flushes, "kinval_attrs", (json_int_t)w->attrs,
			      "kinval_pages", (json_int_t)w->pages,
			      "kinval_names", (json_int_t)w->names));
	}
	return o;
}

static void print_wb(json_t *s)
{
	const char *const kinds[] = {"demote", "release"};

	printf("\nWrite-back and invalidation at demotes and releases\n"
	       "%-8s %8s %10s %10s %10s %12s %8s %7s %7s %7s\n",
	       "event", "count", "mean_us", "log_blks", "home_blks",
	       "data_bytes", "flushes", "attrs", "pages", "names");
	for (int i = 0; i < 2; i++) {
		json_t *v =
		    json_object_get(json_object_get(s, "writeback"), kinds[i]);

		printf(
		    "%-8s %8lld %10.1f %10.0f %10.0f %12.0f %8.0f %7lld "
		    "%7lld %7lld\n",
		    kinds[i],
		    (long long)json_integer_value(json_object_get(v, "count")),
		    json_number_value(json_object_get(v, "mean_us")),
		    json_number_value(json_object_get(v, "log_blocks")),
		    json_number_value(json_object_get(v, "home_blocks")),
		    json_number_value(json_object_get(v, "data_bytes")),
		    json_number_value(json_object_get(v, "flushes")),
		    (long long)json_integer_value(
			json_object_get(v, "kinval_attrs")),
		    (long long)json_integer_value(
			json_object_get(v, "kinval_pages")),
		    (long long)json_integer_value(
			json_object_get(v, "kinval_names")));
	}
}

static void print_text(json_t *s)
{
	json_t *v, *x;
	size_t i;

	printf("%lld events from %lld node(s) over %.3f s",
	       (long long)json_integer_value(json_object_get(s, "events")),
	       (long long)json_array_size(json_object_get(s, "nodes")),
	       json_number_value(json_object_get(s, "span_s")));
	if (json_integer_value(json_object_get(s, "bad_lines")) > 0)
		printf(" (%lld bad lines skipped)",
		       (long long)json_integer_value(
			   json_object_get(s, "bad_lines")));
	printf("\n\nEvents per node\n%-6s", "node");
	for (int k = 0; k < K__COUNT; k++)
		printf(" %10s", kind_names[k]);
	printf("\n");
	json_array_foreach(json_object_get(s, "nodes"), i, v)
	{
		printf("%-6lld", (long long)json_integer_value(
				     json_object_get(v, "node")));
		for (int k = 0; k < K__COUNT; k++)
			printf(" %10lld",
			       (long long)json_integer_value(
				   json_object_get(v, kind_names[k])));
		printf("\n");
	}
	printf("\nTop lock waits\n%10s %6s %-28s %-4s %12s\n", "t_s", "node",
	       "resource", "mode", "wait_ms");
	json_array_foreach(json_object_get(s, "top_waits"), i, v)
	    printf("%10.3f %6lld %-28s %-4s %12.3f\n",
		   json_number_value(json_object_get(v, "t")),
		   (long long)json_integer_value(json_object_get(v, "node")),
		   json_string_value(json_object_get(v, "res")),
		   json_string_value(json_object_get(v, "mode")),
		   json_number_value(json_object_get(v, "wait_us")) / 1e3);
	printf("\nResources by total wait\n%-28s %8s %12s %12s %12s\n",
	       "resource", "grants", "total_ms", "mean_ms", "max_ms");
	json_array_foreach(json_object_get(s, "resources"), i, v)
	    printf("%-28s %8lld %12.3f %12.3f %12.3f\n",
		   json_string_value(json_object_get(v, "res")),
		   (long long)json_integer_value(json_object_get(v, "grants")),
		   json_number_value(json_object_get(v, "total_wait_us")) / 1e3,
		   json_number_value(json_object_get(v, "mean_wait_us")) / 1e3,
		   json_number_value(json_object_get(v, "max_wait_us")) / 1e3);
	printf("\nPing-pong (grants moving between nodes, EX/PW involved)\n"
	       "%-28s %10s %10s  %s\n",
	       "resource", "transfers", "per_s", "node pairs (a-b: transfers)");
	json_array_foreach(json_object_get(s, "pingpong"), i, v)
	{
		size_t p;

		printf("%-28s %10lld %10.1f ",
		       json_string_value(json_object_get(v, "res")),
		       (long long)json_integer_value(
			   json_object_get(v, "transfers")),
		       json_number_value(json_object_get(v, "per_s")));
		json_array_foreach(json_object_get(v, "pairs"), p, x)
		    printf(" %lld-%lld: %lld",
			   (long long)json_integer_value(json_array_get(x, 0)),
			   (long long)json_integer_value(json_array_get(x, 1)),
			   (long long)json_integer_value(json_array_get(x, 2)));
		printf("\n");
	}
	if (json_array_size(json_object_get(s, "pingpong")) == 0)
		printf("  (none)\n");
	print_wb(s);
	print_peers(s);
	printf("\nTimeline (per second)\n%6s %8s %10s %8s %8s %8s %10s\n",
	       "sec", "grants", "wait_ms", "basts", "demotes", "ops",
	       "op_mean_us");
	json_array_foreach(json_object_get(s, "timeline"), i, v)
	{
		if (i == 120) {
			printf("  ... (%zu more seconds: see --json or the "
			       "plot)\n",
			       json_array_size(json_object_get(s, "timeline")) -
				   120);
			break;
		}
		printf(
		    "%6lld %8lld %10.3f %8lld %8lld %8lld %10.1f\n",
		    (long long)json_integer_value(json_object_get(v, "sec")),
		    (long long)json_integer_value(json_object_get(v, "grants")),
		    json_number_value(json_object_get(v, "wait_ms")),
		    (long long)json_integer_value(json_object_get(v, "basts")),
		    (long long)json_integer_value(
			json_object_get(v, "demotes")),
		    (long long)json_integer_value(json_object_get(v, "ops")),
		    json_number_value(json_object_get(v, "op_mean_us")));
	}
}

static int write_dat(struct trace *tr, const char *path, struct sec *s,
		     size_t nsec)
{
	FILE *f = fopen(path, "w");

	if (f == NULL)
		return -errno;
	fprintf(f, "# sec");
	for (int n = 0; n < tr->nnodes; n++)
		fprintf(f, " wait_ms_n%d ops_n%d", tr->node_ids[n],
			tr->node_ids[n]);
	fprintf(f, "\n");
	for (size_t i = 0; i < nsec; i++) {
		fprintf(f, "%llu", (unsigned long long)s[i].sec);
		for (int n = 0; n < tr->nnodes; n++)
			fprintf(f, " %.3f %lu", s[i].node_wait_ms[n],
				s[i].node_ops[n]);
		fprintf(f, "\n");
		/* a quiet second after a busy one plots as zero */
		if (i + 1 < nsec && s[i + 1].sec > s[i].sec + 1) {
			fprintf(f, "%llu", (unsigned long long)s[i].sec + 1);
			for (int n = 0; n < tr->nnodes; n++)
				fprintf(f, " 0 0");
			fprintf(f, "\n");
		}
	}
	return fclose(f) == 0 ? 0 : -errno;
}

/* gnuplot's data/series part of one picture (two panels). */
static void gp_panels(FILE *f, struct trace *tr, const char *dat)
{
	fprintf(f,
		"set multiplot layout 2,1 title 'ucfs trace: %d node(s)'\n"
		"set grid\nset key outside right\nset yrange [0:*]\n"
		"set ylabel 'lock wait (ms per s)'\nunset xlabel\nplot ",
		tr->nnodes);
	for (int n = 0; n < tr->nnodes; n++)
		fprintf(f, "%s'%s' using 1:%d with linespoints title 'node %d'",
			n ? ", " : "", dat, 2 + 2 * n, tr->node_ids[n]);
	fprintf(f, "\nset ylabel 'FUSE ops per s'\nset xlabel 'time (s)'\n"
		   "plot ");
	for (int n = 0; n < tr->nnodes; n++)
		fprintf(f, "%s'%s' using 1:%d with linespoints title 'node %d'",
			n ? ", " : "", dat, 3 + 2 * n, tr->node_ids[n]);
	fprintf(f, "\nunset multiplot\n");
}

static int run_gnuplot(const char *arg1, const char *arg2)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR);

		if (fd >= 0) {
			dup2(fd, STDIN_FILENO);
			if (arg2 == NULL) /* a probe: keep it quiet */
				dup2(fd, STDERR_FILENO);
		}
		execlp("gnuplot", "gnuplot", arg1, arg2, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int plot(struct trace *tr, const char *prefix, struct sec *s,
		size_t nsec)
{
	char dat[4096], gp[4096];
	const char *png;
	FILE *f;
	int ret;

	snprintf(dat, sizeof(dat), "%s.dat", prefix);
	snprintf(gp, sizeof(gp), "%s.gp", prefix);
	if (strchr(prefix, '\'') != NULL || write_dat(tr, dat, s, nsec) != 0) {
		fprintf(stderr, "ucfs-trace: cannot write %s\n", dat);
		return -1;
	}
	/* pngcairo draws nicer PNGs; plain (libgd) png is the fallback */
	png = run_gnuplot("-e", "set terminal pngcairo") == 0 ? "pngcairo"
							      : "png";
	f = fopen(gp, "w");
	if (f == NULL)
		return -1;
	fprintf(f,
		"set terminal svg size 1000,700 dynamic background "
		"rgb 'white'\nset output '%s.svg'\n",
		prefix);
	gp_panels(f, tr, dat);
	fprintf(f, "set terminal %s size 1000,700\nset output '%s.png'\n", png,
		prefix);
	gp_panels(f, tr, dat);
	fprintf(f, "set output\n");
	if (fclose(f) != 0)
		return -1;
	ret = run_gnuplot(gp, NULL);
	if (ret != 0)
		fprintf(stderr, "ucfs-trace: gnuplot %s failed (%d)\n", gp,
			ret);
	return ret == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	static struct trace tr = {.top = 10}; /* large: not on the stack */
	const char *prefix = NULL, *files[MAX_FILES];
	int json = 0, i, bad = 0, nfiles = 0, usage_err = 0;
	struct sec *secs;
	size_t nsec;
	double t0;
	json_t *s;

	/* options may come before or after the files */
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--top") == 0 && i + 1 < argc)
			tr.top = atoi(argv[++i]);
		else if (strcmp(argv[i], "--plot") == 0 && i + 1 < argc)
			prefix = argv[++i];
		else if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else if ((argv[i][0] == '-' && argv[i][1] != '\0') ||
			 nfiles == MAX_FILES)
			usage_err = 1; /* unknown option, too many files */
		else
			files[nfiles++] = argv[i];
	}
	if (usage_err || nfiles == 0 || tr.top <= 0) {
		fprintf(stderr,
			"usage: ucfs-trace [--top N] [--plot PREFIX] "
			"[--json] FILE... (at most %d files)\n",
			MAX_FILES);
		return 2;
	}
	tr.res_index = json_object();
	for (i = 0; i < nfiles; i++)
		bad |= read_file(&tr, files[i]) != 0;
	if (tr.n > 0) /* tr.ev is NULL for an empty trace */
		qsort(tr.ev, tr.n, sizeof(*tr.ev), ev_cmp);
	analyse(&tr);
	t0 = tr.n > 0 ? tr.ev[0].t : 0;
	secs = timeline(&tr, t0, &nsec);
	s = json_pack(
	    "{s:I,s:I,s:f,s:f,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "events",
	    (json_int_t)tr.n, "bad_lines", (json_int_t)tr.bad_lines, "start",
	    t0, "span_s", tr.n > 0 ? tr.ev[tr.n - 1].t - t0 : 0.0, "nodes",
	    summary_nodes(&tr), "top_waits", summary_top_waits(&tr, t0),
	    "resources", summary_resources(&tr, 0), "pingpong",
	    summary_resources(&tr, 1), "timeline", summary_timeline(secs, nsec),
	    "writeback", summary_wb(&tr), "peers", summary_peers(&tr));
	if (json) {
		json_dumpf(s, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
		printf("\n");
	} else {
		print_text(s);
	}
	if (prefix != NULL && plot(&tr, prefix, secs, nsec) != 0)
		bad = 1;
	json_decref(s);
	free(secs);
	for (size_t r = 0; r < tr.nres; r++)
		free(tr.res[r].name);
	free(tr.res);
	free(tr.ev);
	json_decref(tr.res_index);
	return bad;
}
