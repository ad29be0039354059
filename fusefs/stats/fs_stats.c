/*
 * fs_stats.c — per-op counters, sections, the JSON builder and rendering.
 *
 * This file and fs_stats_srv.c are where jansson lives (with the config
 * code); other modules see only struct fs_json and its fs_json_* calls.
 *
 * Hot path: fs_stats_op_end() picks the calling thread's shard (an index
 * given once per thread) and does five relaxed atomic adds and, rarely, a
 * CAS for the maximum. Readers sum the shards; each field is exact, a
 * document is not a consistent snapshot across fields (counts may run a
 * few events ahead of histograms while ops are in flight).
 *
 * Sections: a singly linked list under sec_lock. Rendering holds sec_lock
 * while callbacks run, which is what lets fs_stats_remove_section promise
 * that the callback is not running when it returns.
 */
#include <errno.h>
#include <malloc.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fusefs/stats/fs_stats_internal.h"

#define FS_OP_NAME_(id, name) [FS_OP_##id] = name,
static const char *const fs_op_names[FS_OP__COUNT] = {FS_OPS(FS_OP_NAME_)};
#undef FS_OP_NAME_

static const char *const fs_reserved_keys[] = {
    "version", "node", "time", "fuse", "server", "incomplete", "trace",
};

const char *fs_op_name(enum fs_op op)
{
	if ((unsigned)op >= FS_OP__COUNT)
		return "?";
	return fs_op_names[op];
}

unsigned fs_hist_bucket(uint64_t ns)
{
	unsigned b;

	if (ns < 2)
		return 0;
	b = 63 - (unsigned)__builtin_clzll(ns);
	return b < FS_HIST_BUCKETS ? b : FS_HIST_BUCKETS - 1;
}

static double fs_real_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int fs_stats_new(struct fs_stats **out)
{
	struct fs_stats *st;
	size_t sz = sizeof(struct fs_stats_shard) * FS_STATS_SHARDS;

	st = calloc(1, sizeof(*st));
	if (st == NULL)
		return -ENOMEM;
	st->shards = aligned_alloc(64, sz);
	if (st->shards == NULL) {
		free(st);
		return -ENOMEM;
	}
	memset(st->shards, 0, sz);
	pthread_mutex_init(&st->sec_lock, NULL);
	pthread_mutex_init(&st->info_lock, NULL);
	st->node_id = 0;
	st->slot = -1;
	st->srv_fd = -1;
	st->srv_stop[0] = st->srv_stop[1] = -1;
	st->start_mono_ns = fs_stats_now();
	st->start_real = fs_real_now();
	*out = st;
	return 0;
}

void fs_stats_free(struct fs_stats *st)
{
	struct fs_stats_section *s, *next;

	if (st == NULL)
		return;
	fs_stats_stop(st);
	for (s = st->sections; s != NULL; s = next) {
		next = s->next;
		free(s->name);
		free(s);
	}
	pthread_mutex_destroy(&st->sec_lock);
	pthread_mutex_destroy(&st->info_lock);
	free(st->device);
	free(st->mountpoint);
	free(st->options);
	free(st->shards);
	free(st);
}

void fs_stats_set_node(struct fs_stats *st, int node_id, int slot)
{
	pthread_mutex_lock(&st->info_lock);
	st->node_id = node_id;
	st->slot = slot;
	pthread_mutex_unlock(&st->info_lock);
}

/* Replace *@dst by a copy of @src (NULL allowed). 0 or -ENOMEM. */
static int fs_str_replace(char **dst, const char *src)
{
	char *c = NULL;

	if (src != NULL) {
		c = strdup(src);
		if (c == NULL)
			return -ENOMEM;
	}
	free(*dst);
	*dst = c;
	return 0;
}

int fs_stats_set_mount(struct fs_stats *st, const char *device,
		       const char *mountpoint, const char *options)
{
	int ret;

	pthread_mutex_lock(&st->info_lock);
	ret = fs_str_replace(&st->device, device);
	if (ret == 0)
		ret = fs_str_replace(&st->mountpoint, mountpoint);
	if (ret == 0)
		ret = fs_str_replace(&st->options, options);
	pthread_mutex_unlock(&st->info_lock);
	return ret;
}

/* ---- hot path ---- */

static _Atomic unsigned fs_next_thread_idx;
static _Thread_local unsigned fs_thread_idx = UINT_MAX;

static inline unsigned fs_shard_of_thread(void)
{
	if (__builtin_expect(fs_thread_idx == UINT_MAX, 0))
		fs_thread_idx = atomic_fetch_add_explicit(
		    &fs_next_thread_idx, 1, memory_order_relaxed);
	return fs_thread_idx % FS_STATS_SHARDS;
}

static inline void fs_add(_Atomic uint64_t *p, uint64_t v)
{
	atomic_fetch_add_explicit(p, v, memory_order_relaxed);
}

static inline void fs_max(_Atomic uint64_t *p, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(p, memory_order_relaxed);

	while (v > cur &&
	       !atomic_compare_exchange_weak_explicit(
		   p, &cur, v, memory_order_relaxed, memory_order_relaxed))
		;
}

void fs_stats_op_end(struct fs_stats *st, enum fs_op op, uint64_t t0, int err)
{
	struct fs_op_shard *s;
	struct fs_trace *tr;
	uint64_t now, lat;

	if (st == NULL || (unsigned)op >= FS_OP__COUNT)
		return;
	now = fs_stats_now();
	lat = now > t0 ? now - t0 : 0;
	s = &st->shards[fs_shard_of_thread()].ops[op];
	fs_add(&s->count, 1);
	if (err < 0)
		fs_add(&s->errors, 1);
	fs_add(&s->total_ns, lat);
	fs_add(&s->hist[fs_hist_bucket(lat)], 1);
	fs_max(&s->max_ns, lat);
	tr = atomic_load_explicit(&st->trace_ops, memory_order_relaxed);
	if (FS_TRACE_ON(tr))
		fs_trace_op(tr, op, lat, err);
}

static uint64_t fs_ld(_Atomic uint64_t *p)
{
	return atomic_load_explicit(p, memory_order_relaxed);
}

void fs_stats_op_get(struct fs_stats *st, enum fs_op op,
		     struct fs_op_counts *out)
{
	memset(out, 0, sizeof(*out));
	if ((unsigned)op >= FS_OP__COUNT)
		return;
	for (unsigned i = 0; i < FS_STATS_SHARDS; i++) {
		struct fs_op_shard *s = &st->shards[i].ops[op];
		uint64_t m = fs_ld(&s->max_ns);

		out->count += fs_ld(&s->count);
		out->errors += fs_ld(&s->errors);
		out->total_ns += fs_ld(&s->total_ns);
		if (m > out->max_ns)
			out->max_ns = m;
		for (unsigned b = 0; b < FS_HIST_BUCKETS; b++)
			out->hist[b] += fs_ld(&s->hist[b]);
	}
}

void fs_stats_set_trace(struct fs_stats *st, struct fs_trace *tr)
{
	struct fs_trace *ops = NULL;

	if (tr != NULL && fs_trace_wants_ops(tr))
		ops = tr;
	atomic_store_explicit(&st->trace_ops, ops, memory_order_release);
	atomic_store_explicit(&st->trace, tr, memory_order_release);
}

struct fs_trace *fs_stats_trace(const struct fs_stats *st)
{
	return atomic_load_explicit(&((struct fs_stats *)st)->trace,
				    memory_order_acquire);
}

/* ---- sections ---- */

static int fs_name_reserved(const char *name)
{
	for (size_t i = 0;
	     i < sizeof(fs_reserved_keys) / sizeof(fs_reserved_keys[0]); i++)
		if (strcmp(name, fs_reserved_keys[i]) == 0)
			return 1;
	return 0;
}

int fs_stats_add_section(struct fs_stats *st, const char *name,
			 fs_stats_section_fn fn, void *arg)
{
	struct fs_stats_section *s, **pp;
	int ret = 0;

	if (st == NULL || name == NULL || name[0] == '\0' || fn == NULL)
		return -EINVAL;
	if (fs_name_reserved(name))
		return -EEXIST;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	s->name = strdup(name);
	if (s->name == NULL) {
		ret = -ENOMEM;
		goto out_free;
	}
	s->fn = fn;
	s->arg = arg;
	pthread_mutex_lock(&st->sec_lock);
	for (pp = &st->sections; *pp != NULL; pp = &(*pp)->next) {
		if (strcmp((*pp)->name, name) == 0) {
			ret = -EEXIST;
			break;
		}
	}
	if (ret == 0)
		*pp = s; /* appended: the document keeps registration order */
	pthread_mutex_unlock(&st->sec_lock);
	if (ret == 0)
		return 0;
	free(s->name);
out_free:
	free(s);
	return ret;
}

int fs_stats_remove_section(struct fs_stats *st, const char *name)
{
	struct fs_stats_section *s = NULL, **pp;

	pthread_mutex_lock(&st->sec_lock);
	for (pp = &st->sections; *pp != NULL; pp = &(*pp)->next) {
		if (strcmp((*pp)->name, name) == 0) {
			s = *pp;
			*pp = s->next;
			break;
		}
	}
	pthread_mutex_unlock(&st->sec_lock);
	if (s == NULL)
		return -ENOENT;
	free(s->name);
	free(s);
	return 0;
}

/* ---- the builder ----
 * A struct fs_json wraps one jansson value; wrappers of one render are
 * chained on its context and freed together at the end. */

struct fs_json_ctx {
	struct fs_json *all; /* every wrapper of this render */
	int incomplete;	     /* a value was dropped (ENOMEM) */
};

struct fs_json {
	json_t *j; /* borrowed: owned by the parent value */
	struct fs_json_ctx *ctx;
	struct fs_json *next;
};

static struct fs_json *fs_json_wrap(struct fs_json_ctx *ctx, json_t *j)
{
	struct fs_json *w = calloc(1, sizeof(*w));

	if (w == NULL) {
		ctx->incomplete = 1;
		return NULL;
	}
	w->j = j;
	w->ctx = ctx;
	w->next = ctx->all;
	ctx->all = w;
	return w;
}

static void fs_json_ctx_free(struct fs_json_ctx *ctx)
{
	struct fs_json *w, *next;

	for (w = ctx->all; w != NULL; w = next) {
		next = w->next;
		free(w);
	}
	ctx->all = NULL;
}

/* Add @v (a new reference, may be NULL after ENOMEM) under @key. */
static int fs_json_put(struct fs_json *o, const char *key, json_t *v)
{
	int ret;

	if (v == NULL) {
		o->ctx->incomplete = 1;
		return -1;
	}
	if (json_is_array(o->j))
		ret = json_array_append_new(o->j, v);
	else if (key != NULL)
		ret = json_object_set_new(o->j, key, v);
	else {
		json_decref(v);
		ret = -1;
	}
	if (ret != 0)
		o->ctx->incomplete = 1;
	return ret;
}

void fs_json_u64(struct fs_json *o, const char *key, uint64_t v)
{
	/* jansson integers are signed 64-bit; saturate rather than wrap */
	if (o != NULL)
		fs_json_put(
		    o, key,
		    json_integer(v > INT64_MAX ? INT64_MAX : (json_int_t)v));
}

void fs_json_i64(struct fs_json *o, const char *key, int64_t v)
{
	if (o != NULL)
		fs_json_put(o, key, json_integer(v));
}

void fs_json_dbl(struct fs_json *o, const char *key, double v)
{
	if (o != NULL)
		fs_json_put(o, key, json_real(v));
}

void fs_json_str(struct fs_json *o, const char *key, const char *s)
{
	if (o == NULL)
		return;
	if (s == NULL)
		fs_json_put(o, key, json_null());
	else
		fs_json_put(o, key, json_string(s));
}

void fs_json_bool(struct fs_json *o, const char *key, int v)
{
	if (o != NULL)
		fs_json_put(o, key, json_boolean(v));
}

static struct fs_json *fs_json_child(struct fs_json *o, const char *key,
				     json_t *v)
{
	if (o == NULL) {
		json_decref(v);
		return NULL;
	}
	if (fs_json_put(o, key, v) != 0)
		return NULL;
	return fs_json_wrap(o->ctx, v); /* v stays alive in its parent */
}

struct fs_json *fs_json_obj(struct fs_json *o, const char *key)
{
	return fs_json_child(o, key, json_object());
}

struct fs_json *fs_json_arr(struct fs_json *o, const char *key)
{
	return fs_json_child(o, key, json_array());
}

/* Upper bound of the bucket holding the @q quantile, capped at @max. */
static uint64_t fs_hist_quantile(const uint64_t *hist, unsigned n,
				 uint64_t unit_ns, uint64_t count, double q,
				 uint64_t max)
{
	uint64_t want = (uint64_t)(q * (double)count + 0.999999), seen = 0;

	if (count == 0)
		return 0;
	if (want == 0)
		want = 1;
	for (unsigned i = 0; i < n; i++) {
		seen += hist[i];
		if (seen >= want) {
			uint64_t hi =
			    i + 1 < 64 ? (2ull << i) * unit_ns : UINT64_MAX;
			return hi < max ? hi : max;
		}
	}
	return max;
}

void fs_json_latency(struct fs_json *o, const char *key, uint64_t count,
		     uint64_t total_ns, uint64_t max_ns, const uint64_t *hist,
		     unsigned n, uint64_t unit_ns)
{
	struct fs_json *l = fs_json_obj(o, key), *h;
	uint64_t hcount = 0;

	if (l == NULL)
		return;
	for (unsigned i = 0; i < n; i++)
		hcount += hist[i];
	fs_json_u64(l, "count", count);
	fs_json_u64(l, "total_ns", total_ns);
	fs_json_u64(l, "mean_ns", count != 0 ? total_ns / count : 0);
	fs_json_u64(l, "p50_ns",
		    fs_hist_quantile(hist, n, unit_ns, hcount, 0.50, max_ns));
	fs_json_u64(l, "p99_ns",
		    fs_hist_quantile(hist, n, unit_ns, hcount, 0.99, max_ns));
	fs_json_u64(l, "max_ns", max_ns);
	h = fs_json_arr(l, "hist");
	for (unsigned i = 0; i < n && h != NULL; i++) {
		struct fs_json *pair;

		if (hist[i] == 0)
			continue;
		pair = fs_json_arr(h, NULL);
		fs_json_u64(pair, NULL, i == 0 ? 0 : (1ull << i) * unit_ns);
		fs_json_u64(pair, NULL, hist[i]);
	}
}

/* ---- rendering ---- */

/* "a,b=c" -> {"a": true, "b": "c"}. */
static void fs_render_options(struct fs_json *node, const char *opts)
{
	struct fs_json *o = fs_json_obj(node, "options");
	char *copy, *tok, *save = NULL;

	if (o == NULL || opts == NULL)
		return;
	copy = strdup(opts);
	if (copy == NULL) {
		o->ctx->incomplete = 1;
		return;
	}
	for (tok = strtok_r(copy, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');

		if (eq == NULL) {
			fs_json_bool(o, tok, 1);
			continue;
		}
		*eq = '\0';
		fs_json_str(o, tok, eq + 1);
	}
	free(copy);
}

/* VmRSS and VmHWM of this process in KiB (0 if /proc says nothing). */
static void proc_rss(uint64_t *now_kb, uint64_t *peak_kb)
{
	char line[128];
	FILE *f = fopen("/proc/self/status", "re");

	*now_kb = *peak_kb = 0;
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned long long v;

		if (sscanf(line, "VmRSS: %llu kB", &v) == 1)
			*now_kb = v;
		else if (sscanf(line, "VmHWM: %llu kB", &v) == 1)
			*peak_kb = v;
	}
	fclose(f);
}

/* malloc's view (mallinfo2, every arena): what the heap holds in use,
 * what it keeps free (fragmentation and the arenas' tops), and its
 * mmap'ed blocks: the part of the RSS no section's bytes_now explains. */
static void render_heap(struct fs_json *n)
{
	struct mallinfo2 mi = mallinfo2();

	fs_json_u64(n, "heap_used_kb", (uint64_t)mi.uordblks / 1024);
	fs_json_u64(n, "heap_free_kb", (uint64_t)mi.fordblks / 1024);
	fs_json_u64(n, "heap_mmap_kb", (uint64_t)mi.hblkhd / 1024);
}

static void fs_render_node(struct fs_stats *st, struct fs_json *root)
{
	uint64_t rss_kb, peak_kb;
	struct fs_json *n = fs_json_obj(root, "node");
	char host[256] = "";

	gethostname(host, sizeof(host) - 1);
	pthread_mutex_lock(&st->info_lock);
	fs_json_i64(n, "id", st->node_id);
	fs_json_i64(n, "slot", st->slot);
	fs_json_str(n, "hostname", host);
	fs_json_i64(n, "pid", getpid());
	fs_json_str(n, "device", st->device);
	fs_json_str(n, "mountpoint", st->mountpoint);
	fs_json_str(n, "options_str", st->options);
	fs_render_options(n, st->options);
	pthread_mutex_unlock(&st->info_lock);
	fs_json_dbl(n, "start_time", st->start_real);
	fs_json_dbl(n, "uptime_s",
		    (double)(fs_stats_now() - st->start_mono_ns) / 1e9);
	proc_rss(&rss_kb, &peak_kb);
	fs_json_u64(n, "rss_kb_now", rss_kb);
	fs_json_u64(n, "max_rss_kb", peak_kb);
	render_heap(n);
}

static void fs_render_fuse(struct fs_stats *st, struct fs_json *root)
{
	struct fs_json *f = fs_json_obj(root, "fuse");
	struct fs_json *ops = fs_json_obj(f, "ops");
	uint64_t count = 0, errors = 0, total_ns = 0;

	for (unsigned op = 0; op < FS_OP__COUNT; op++) {
		struct fs_op_counts c;
		struct fs_json *o;

		fs_stats_op_get(st, op, &c);
		count += c.count;
		errors += c.errors;
		total_ns += c.total_ns;
		o = fs_json_obj(ops, fs_op_name(op));
		fs_json_u64(o, "count", c.count);
		fs_json_u64(o, "errors", c.errors);
		fs_json_latency(o, "lat", c.count, c.total_ns, c.max_ns, c.hist,
				FS_HIST_BUCKETS, 1);
	}
	fs_json_u64(f, "count", count);
	fs_json_u64(f, "errors", errors);
	fs_json_u64(f, "total_ns", total_ns);
}

static void fs_render_server(struct fs_stats *st, struct fs_json *root)
{
	struct fs_json *s = fs_json_obj(root, "server");
	struct fs_trace *tr = fs_stats_trace(st);

	fs_json_str(s, "socket", st->srv_path);
	fs_json_u64(s, "served", fs_ld(&st->srv_served));
	fs_json_u64(s, "refused", fs_ld(&st->srv_refused));
	fs_json_u64(s, "errors", fs_ld(&st->srv_errors));
	fs_json_bool(s, "tracing", tr != NULL);
	fs_json_u64(s, "trace_dropped", fs_trace_dropped(tr));
}

static void fs_render_sections(struct fs_stats *st, struct fs_json *root)
{
	struct fs_stats_section *s;

	pthread_mutex_lock(&st->sec_lock);
	for (s = st->sections; s != NULL; s = s->next) {
		struct fs_json *o = fs_json_obj(root, s->name);

		if (o != NULL)
			s->fn(o, s->arg);
	}
	pthread_mutex_unlock(&st->sec_lock);
}

int fs_stats_render(struct fs_stats *st, int pretty, char **out)
{
	struct fs_json_ctx ctx = {NULL, 0};
	struct fs_json *root;
	json_t *j = json_object();
	char *s;

	if (j == NULL)
		return -ENOMEM;
	root = fs_json_wrap(&ctx, j);
	if (root == NULL) {
		json_decref(j);
		return -ENOMEM;
	}
	fs_json_i64(root, "version", 1);
	fs_json_dbl(root, "time", fs_real_now());
	fs_render_node(st, root);
	fs_render_fuse(st, root);
	fs_render_server(st, root);
	fs_render_sections(st, root);
	if (ctx.incomplete)
		fs_json_bool(root, "incomplete", 1);
	fs_json_ctx_free(&ctx);
	s = json_dumps(j, (pretty ? JSON_INDENT(1) : JSON_COMPACT) |
			      JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
	json_decref(j);
	if (s == NULL)
		return -ENOMEM;
	*out = s;
	return 0;
}
