/*
 * ucfs-stat — print the statistics of one or several mounted ucfs nodes.
 *
 *   ucfs-stat [--json] [--all] [--interval S [--count N]] TARGET...
 *
 * TARGET is a mountpoint (its socket is derived: fusefs/STATS.md) or the
 * socket itself (-o stats=PATH). Several targets are shown side by side,
 * one column per node, in the order given.
 *
 * Without --interval: the cumulative figures once. With --interval S:
 * every S seconds the rates over the interval (counters per second; gauges
 * as their current value; per-op latency as the mean over the interval).
 * --json: one target prints its document, several print an array of
 * documents; with --interval each interval is one JSON line
 * {"time":T,"interval_s":S,"nodes":[{"target":..,"rates":{key: value}}]}.
 * --all also prints rows that are zero everywhere.
 *
 * Exit status: 0, 1 if a node could not be read (the others are still
 * printed), 2 on bad usage.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fusefs/stats/fs_stats_cli.h"

#define LABEL_W 36
#define COL_W 14
#define MAX_TARGETS 64

struct opts {
	int json;
	int all;
	double interval;
	long count;
	int ntargets;
	char **targets;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: ucfs-stat [--json] [--all] [--interval S "
		   "[--count N]] MOUNTPOINT|SOCKET...\n");
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	int i;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--json") == 0) {
			o->json = 1;
		} else if (strcmp(a, "--all") == 0) {
			o->all = 1;
		} else if ((strcmp(a, "--interval") == 0 ||
			    strcmp(a, "-i") == 0) &&
			   i + 1 < argc) {
			o->interval = atof(argv[++i]);
			if (!(o->interval > 0))
				return -1;
		} else if ((strcmp(a, "--count") == 0 ||
			    strcmp(a, "-c") == 0) &&
			   i + 1 < argc) {
			o->count = atol(argv[++i]);
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			exit(0);
		} else {
			return -1;
		}
	}
	o->targets = argv + i;
	o->ntargets = argc - i;
	return o->ntargets > 0 && o->ntargets <= MAX_TARGETS ? 0 : -1;
}

/* Fetch every target; a failure leaves NULL and sets *bad. */
static void fetch_all(const struct opts *o, json_t **docs, int *bad)
{
	char err[512];

	for (int i = 0; i < o->ntargets; i++) {
		docs[i] = fs_cli_fetch(o->targets[i], 3000, err, sizeof(err));
		if (docs[i] == NULL) {
			fprintf(stderr, "ucfs-stat: %s\n", err);
			*bad = 1;
		}
	}
}

static void fmt_value(char *buf, size_t len, json_t *v)
{
	if (v == NULL)
		snprintf(buf, len, "-");
	else if (json_is_integer(v))
		snprintf(buf, len, "%lld", (long long)json_integer_value(v));
	else if (json_is_real(v))
		snprintf(buf, len, "%.2f", json_real_value(v));
	else if (json_is_string(v))
		snprintf(buf, len, "%s", json_string_value(v));
	else if (json_is_boolean(v))
		snprintf(buf, len, "%s", json_is_true(v) ? "true" : "false");
	else
		snprintf(buf, len, "?");
}

static void fmt_num(char *buf, size_t len, double v)
{
	if (v == floor(v) && fabs(v) < 1e15)
		snprintf(buf, len, "%.0f", v);
	else
		snprintf(buf, len, "%.2f", v);
}

/* One column per node: "n<id> <target>", cut to the column width. */
static void print_header(const struct opts *o, json_t **docs, int lw, int w)
{
	printf("%-*s", lw, "");
	for (int i = 0; i < o->ntargets; i++) {
		char h[256];
		size_t n;

		snprintf(h, sizeof(h), "n%.0f:%s",
			 fs_cli_get(docs[i], "node.id"), o->targets[i]);
		n = strlen(h);
		printf(" %*s", w, n > (size_t)w ? h + n - (size_t)w : h);
	}
	printf("\n");
}

static double opnum(json_t *doc, const char *op, const char *field)
{
	char key[160];

	if (doc == NULL)
		return 0;
	snprintf(key, sizeof(key), "fuse.ops.%s.%s", op, field);
	return fs_cli_get(doc, key);
}

/* One node's cells of the op table; returns 1 if the op moved. */
static int op_cells(char *cell, size_t len, const char *op, json_t *doc,
		    json_t *prev, double dt)
{
	double c = opnum(doc, op, "count"), e = opnum(doc, op, "errors");
	double tot = opnum(doc, op, "lat.total_ns");

	if (dt <= 0) {
		snprintf(cell, len, " %10.0f %7.0f %9.1f %9.1f", c, e,
			 c > 0 ? tot / c / 1e3 : 0.0,
			 opnum(doc, op, "lat.p99_ns") / 1e3);
		return c > 0;
	}
	c -= opnum(prev, op, "count");
	e -= opnum(prev, op, "errors");
	tot -= opnum(prev, op, "lat.total_ns");
	snprintf(cell, len, " %10.1f %7.1f %9.1f %9.1f", c / dt, e / dt,
		 c > 0 ? tot / c / 1e3 : 0.0,
		 opnum(doc, op, "lat.p99_ns") / 1e3);
	return c > 0;
}

/* The fuse op table, cumulative (dt == 0) or per interval: per node
 * count (or ops/s), errors (or errors/s), mean latency (over the
 * interval) and p99 (cumulative). */
static void print_ops(const struct opts *o, json_t **docs, json_t **prev,
		      double dt)
{
	json_t *ops = NULL, *v;
	const char *name;

	for (int i = 0; i < o->ntargets && ops == NULL; i++)
		ops = json_object_get(json_object_get(docs[i], "fuse"), "ops");
	printf("%-16s", "FUSE op");
	for (int i = 0; i < o->ntargets; i++)
		printf(" %10s %7s %9s %9s", dt <= 0 ? "count" : "ops/s",
		       dt <= 0 ? "errors" : "err/s", "mean_us", "p99_us");
	printf("\n");
	json_object_foreach(ops, name, v)
	{
		char line[2048], cell[96];
		int any = o->all, n;

		n = snprintf(line, sizeof(line), "%-16s", name);
		for (int i = 0; i < o->ntargets; i++) {
			any |= op_cells(cell, sizeof(cell), name, docs[i],
					prev != NULL ? prev[i] : NULL, dt);
			n += snprintf(line + n, sizeof(line) - (size_t)n, "%s",
				      cell);
		}
		if (any)
			printf("%s\n", line);
	}
}

static int skip_key(const char *k)
{
	return strncmp(k, "fuse.", 5) == 0 || strcmp(k, "time") == 0 ||
	       strcmp(k, "version") == 0 || strncmp(k, "server.", 7) == 0;
}

/* Every other scalar, one row per flattened key (union over nodes). */
static void print_rows(const struct opts *o, json_t **flat, json_t **pflat,
		       double dt)
{
	json_t *keys = json_object();
	const char *k;
	json_t *v;

	for (int i = 0; i < o->ntargets; i++)
		json_object_foreach(flat[i], k,
				    v) if (!skip_key(k) &&
					   json_object_get(keys, k) == NULL)
		    json_object_set_new(keys, k, json_null());
	json_object_foreach(keys, k, v)
	{
		char line[1024], cell[64];
		int any =
			o->all || !json_is_number(json_object_get(flat[0], k)),
		    gauge = fs_cli_is_gauge(k), n;

		n = snprintf(line, sizeof(line), "%-*s", LABEL_W, k);
		for (int i = 0; i < o->ntargets; i++) {
			json_t *cur = json_object_get(flat[i], k);

			if (pflat == NULL || gauge || !json_is_number(cur)) {
				fmt_value(cell, sizeof(cell), cur);
				if (json_is_number(cur) &&
				    json_number_value(cur) != 0)
					any = 1;
			} else {
				double r = (json_number_value(cur) -
					    fs_cli_num(pflat[i], k)) /
					   dt;

				fmt_num(cell, sizeof(cell), r);
				if (r != 0)
					any = 1;
			}
			n += snprintf(line + n, sizeof(line) - (size_t)n,
				      " %*s", COL_W, cell);
		}
		if (any || strncmp(k, "node.", 5) == 0)
			printf("%s\n", line);
	}
	json_decref(keys);
}

static void print_human(const struct opts *o, json_t **docs, json_t **prev,
			double dt)
{
	json_t *flat[MAX_TARGETS], *pflat[MAX_TARGETS];

	for (int i = 0; i < o->ntargets; i++) {
		flat[i] =
		    docs[i] != NULL ? fs_cli_flatten(docs[i]) : json_object();
		pflat[i] = prev != NULL && prev[i] != NULL
			       ? fs_cli_flatten(prev[i])
			       : json_object();
	}
	print_header(o, docs, 16, 38);
	print_ops(o, docs, prev, dt);
	printf("\n");
	print_header(o, docs, LABEL_W, COL_W);
	print_rows(o, flat, prev != NULL ? pflat : NULL, dt);
	for (int i = 0; i < o->ntargets; i++) {
		json_decref(flat[i]);
		json_decref(pflat[i]);
	}
	fflush(stdout);
}

static void print_json_docs(const struct opts *o, json_t **docs)
{
	json_t *out;

	if (o->ntargets == 1) {
		out = json_incref(docs[0]);
	} else {
		out = json_array();
		for (int i = 0; i < o->ntargets; i++)
			json_array_append(out, docs[i] != NULL ? docs[i]
							       : json_null());
	}
	json_dumpf(out, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
	printf("\n");
	json_decref(out);
}

/* {"target":T,"rates":{key: rate or gauge value}} of one node. */
static json_t *json_rates(const char *target, json_t *doc, json_t *prev,
			  double dt)
{
	json_t *flat = fs_cli_flatten(doc), *pflat = fs_cli_flatten(prev);
	json_t *rates = json_object(), *v;
	const char *k;

	json_object_foreach(flat, k, v)
	{
		if (!json_is_number(v))
			continue;
		if (fs_cli_is_gauge(k))
			json_object_set(rates, k, v);
		else
			json_object_set_new(rates, k,
					    json_real((json_number_value(v) -
						       fs_cli_num(pflat, k)) /
						      dt));
	}
	json_decref(flat);
	json_decref(pflat);
	return json_pack("{s:s,s:o}", "target", target, "rates", rates);
}

static void print_json_rates(const struct opts *o, json_t **docs, json_t **prev,
			     double dt)
{
	json_t *nodes = json_array(), *out;

	for (int i = 0; i < o->ntargets; i++)
		json_array_append_new(
		    nodes, docs[i] != NULL && prev[i] != NULL
			       ? json_rates(o->targets[i], docs[i], prev[i], dt)
			       : json_null());
	out = json_pack("{s:f,s:f,s:o}", "time", (double)time(NULL),
			"interval_s", dt, "nodes", nodes);
	json_dumpf(out, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
	printf("\n");
	fflush(stdout);
	json_decref(out);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void free_docs(json_t **docs, int n)
{
	for (int i = 0; i < n; i++) {
		json_decref(docs[i]);
		docs[i] = NULL;
	}
}

static int run_interval(const struct opts *o, json_t **prev)
{
	json_t *docs[MAX_TARGETS] = {NULL};
	double start = mono_s(), t0 = start, t1;
	int bad = 0;

	for (long n = 0; o->count <= 0 || n < o->count; n++) {
		double next = start + o->interval * (double)(n + 1);
		double wait = next - mono_s();

		if (wait > 0)
			usleep((useconds_t)(wait * 1e6));
		fetch_all(o, docs, &bad);
		t1 = mono_s();
		if (o->json) {
			print_json_rates(o, docs, prev, t1 - t0);
		} else {
			printf("--- %.1fs interval\n", t1 - t0);
			print_human(o, docs, prev, t1 - t0);
		}
		free_docs(prev, o->ntargets);
		memcpy(prev, docs, sizeof(json_t *) * (size_t)o->ntargets);
		memset(docs, 0, sizeof(docs));
		t0 = t1;
	}
	free_docs(prev, o->ntargets);
	return bad;
}

int main(int argc, char **argv)
{
	struct opts o = {0};
	json_t *docs[MAX_TARGETS] = {NULL};
	int bad = 0;

	if (parse_args(argc, argv, &o) != 0) {
		usage(stderr);
		return 2;
	}
	fetch_all(&o, docs, &bad);
	if (o.interval > 0)
		return run_interval(&o, docs) || bad ? 1 : 0;
	if (o.json)
		print_json_docs(&o, docs);
	else
		print_human(&o, docs, NULL, 0);
	free_docs(docs, o.ntargets);
	return bad ? 1 : 0;
}
