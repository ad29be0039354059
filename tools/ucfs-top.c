/*
 * ucfs-top — a live view of one or several ucfs nodes (glocktop and
 * iostat in one screen).
 *
 *   ucfs-top [--interval S] [--iterations N] [--batch] [--paths N]
 *            TARGET...
 *
 * TARGET is a mountpoint or a stats socket (as for ucfs-stat). Every S
 * seconds (default 1) it fetches each node and redraws: per node the op
 * rate, errors, block device I/O, journal commits and lock traffic, and
 * the node that takes its locks most (net.peers[].basts_for); then
 * the FUSE ops by rate with their mean latency over the interval, one
 * column pair per node; then the most contended lock resources with their
 * holders, waiters and modes (the lock manager's view, "locks.top"); then
 * the most contended inodes of the glock engine ("glocks.top") with their
 * paths. The first frame, having no previous sample, shows averages since
 * mount.
 *
 * Paths: ucfs-top finds an inode's path itself, by walking the node's
 * mount (node.mountpoint; its root is namespace.root_ino) breadth first
 * with readdir's inode numbers, at most --paths N entries per frame
 * (default 20,000; 0: no paths), and remembers what it found (an inode
 * not met within the bound shows "?"). The walk reads directories
 * through the mount, like ls: on a cluster mount it takes their locks
 * in PR, so it is bounded and done only for inodes not yet known.
 *
 * Keys: q (or Ctrl-C) quits; any other key redraws now. The screen is
 * drawn with plain VT100 sequences (cursor home, clear to end of line),
 * so it works in tmux, screen and over ssh without curses; it never
 * prints more lines or columns than the terminal has. --batch (implied
 * when stdout is not a terminal) prints frames one after another with no
 * escape sequences. --iterations N quits after N frames.
 */
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "fusefs/stats/fs_stats_cli.h"

#define MAX_NODES 8
#define MAX_LINES 256
#define LINE_LEN 512
#define PATH_CACHE 64	  /* inode paths remembered per node */
#define PATH_BUDGET 20000 /* default --paths */

struct ino_path {
	uint64_t ino;
	char *path;
};

struct top {
	double interval;
	long iterations;
	int batch;
	int nnodes;
	char **targets;
	json_t *cur[MAX_NODES];
	json_t *prev[MAX_NODES];
	double dt[MAX_NODES]; /* seconds between prev and cur, per node */
	char err[MAX_NODES][256];
	char lines[MAX_LINES][LINE_LEN];
	int nlines;
	int rows, cols;
	struct termios saved;
	int tty_in;
	long path_budget; /* --paths */
	struct ino_path paths[MAX_NODES][PATH_CACHE];
	unsigned npaths[MAX_NODES]; /* entries used (a ring when full) */
};

static volatile sig_atomic_t quit_sig;
static volatile sig_atomic_t winch;

static void on_quit(int sig)
{
	(void)sig;
	quit_sig = 1;
}

static void on_winch(int sig)
{
	(void)sig;
	winch = 1;
}

__attribute__((format(printf, 2, 3))) static void emit(struct top *t,
						       const char *fmt, ...)
{
	va_list ap;

	if (t->nlines >= MAX_LINES)
		return;
	va_start(ap, fmt);
	vsnprintf(t->lines[t->nlines++], LINE_LEN, fmt, ap);
	va_end(ap);
}

/* Append to the last line. */
__attribute__((format(printf, 2, 3))) static void more(struct top *t,
						       const char *fmt, ...)
{
	char *l = t->lines[t->nlines - 1];
	size_t n = strlen(l);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(l + n, LINE_LEN - n, fmt, ap);
	va_end(ap);
}

typedef double (*doc_get)(json_t *doc, const char *key);

/* Per second, for node @i over its interval (since mount on the first
 * frame), of the counter @get(doc, @key) reads. */
static double per_s(struct top *t, int i, doc_get get, const char *key)
{
	double now = get(t->cur[i], key);

	if (t->prev[i] == NULL) {
		double up = fs_cli_get(t->cur[i], "node.uptime_s");

		return up > 0 ? now / up : 0;
	}
	return t->dt[i] > 0 ? (now - get(t->prev[i], key)) / t->dt[i] : 0;
}

/* Rate of a counter at dotted @path for node @i. */
static double rate(struct top *t, int i, const char *path)
{
	return per_s(t, i, fs_cli_get, path);
}

/* Sum of @field over every lock type of a document. */
static double lk_sum(json_t *doc, const char *field)
{
	json_t *types = json_object_get(json_object_get(doc, "locks"), "types"),
	       *v;
	const char *k;
	double s = 0;

	json_object_foreach(types, k, v)
	{
		json_t *f = json_object_get(v, field);

		s += json_is_number(f) ? json_number_value(f) : 0;
	}
	return s;
}

/* The per-node rows: a counter's rate (its dotted path), the rate of a
 * lock counter summed over the lock types, or a gauge; times @scale. */
enum { FIG_RATE, FIG_LK_RATE, FIG_GAUGE };
static const struct {
	const char *label;
	int kind;
	const char *key;
	double scale;
} node_rows[] = {
    {"FUSE ops/s", FIG_RATE, "fuse.count", 1},
    {"FUSE errors/s", FIG_RATE, "fuse.errors", 1},
    {"disk reads/s", FIG_RATE, "blockdev.read.count", 1},
    {"disk writes/s", FIG_RATE, "blockdev.write.count", 1},
    {"disk read MB/s", FIG_RATE, "blockdev.read.bytes", 1 / 1048576.0},
    {"disk write MB/s", FIG_RATE, "blockdev.write.bytes", 1 / 1048576.0},
    {"disk queue depth", FIG_GAUGE, "blockdev.inflight", 1},
    {"journal commits/s", FIG_RATE, "journal.commits", 1},
    {"lock requests/s", FIG_LK_RATE, "requests", 1},
    {"lock remote grants/s", FIG_LK_RATE, "grants_remote", 1},
    {"lock waits/s", FIG_LK_RATE, "waits", 1},
    /* ms of lock wait per second of wall time */
    {"lock wait ms/s", FIG_LK_RATE, "wait_ns", 1e-6},
    {"callbacks sent/s", FIG_LK_RATE, "bast_sent", 1},
    {"callbacks recv/s", FIG_LK_RATE, "bast_recv", 1},
    {"demotes/s", FIG_LK_RATE, "demotes", 1},
};

static double node_fig(struct top *t, int i, size_t row)
{
	const char *key = node_rows[row].key;
	double v;

	switch (node_rows[row].kind) {
	case FIG_RATE:
		v = rate(t, i, key);
		break;
	case FIG_LK_RATE:
		v = per_s(t, i, lk_sum, key);
		break;
	default:
		v = fs_cli_get(t->cur[i], key);
		break;
	}
	return v * node_rows[row].scale;
}

/* net.peers[].basts_for of the node whose id is the decimal @peer in
 * @doc (0 if absent): a doc_get, for per_s. */
static double peer_basts(json_t *doc, const char *peer)
{
	json_t *peers = json_object_get(json_object_get(doc, "net"), "peers"),
	       *e;
	size_t k;

	json_array_foreach(peers, k, e)
	{
		if (fs_cli_get(e, "node") == atof(peer))
			return fs_cli_get(e, "basts_for");
	}
	return 0;
}

/* "nN R/s": the node whose requests sent node @i the most blocking
 * callbacks per second (who takes its locks), "-" if none. */
static void top_asker(struct top *t, int i, char *buf, size_t len)
{
	json_t *peers =
		   json_object_get(json_object_get(t->cur[i], "net"), "peers"),
	       *e;
	double best = 0, r;
	char id[24], who_[24] = "";
	size_t k;

	json_array_foreach(peers, k, e)
	{
		snprintf(id, sizeof(id), "%.0f", fs_cli_get(e, "node"));
		r = per_s(t, i, peer_basts, id);
		if (r > best) {
			best = r;
			snprintf(who_, sizeof(who_), "%s", id);
		}
	}
	if (best > 0)
		snprintf(buf, len, "n%s %.1f/s", who_, best);
	else
		snprintf(buf, len, "-");
}

static void draw_nodes(struct top *t)
{
	char tm[32];
	time_t now = time(NULL);

	strftime(tm, sizeof(tm), "%H:%M:%S", localtime(&now));
	emit(t, "ucfs-top  %s  every %.1fs%s  q: quit", tm, t->interval,
	     t->prev[0] == NULL ? "  (first frame: averages since mount)" : "");
	emit(t, "%-22s", "node");
	for (int i = 0; i < t->nnodes; i++) {
		char h[64];

		if (t->cur[i] != NULL)
			snprintf(h, sizeof(h), "n%.0f/s%.0f",
				 fs_cli_get(t->cur[i], "node.id"),
				 fs_cli_get(t->cur[i], "node.slot"));
		else
			snprintf(h, sizeof(h), "DOWN");
		more(t, " %16s", h);
	}
	emit(t, "%-22s", "target");
	for (int i = 0; i < t->nnodes; i++) {
		size_t n = strlen(t->targets[i]);

		more(t, " %16s",
		     n > 16 ? t->targets[i] + n - 16 : t->targets[i]);
	}
	for (size_t r = 0; r < sizeof(node_rows) / sizeof(node_rows[0]); r++) {
		emit(t, "%-22s", node_rows[r].label);
		for (int i = 0; i < t->nnodes; i++) {
			if (t->cur[i] == NULL)
				more(t, " %16s", "-");
			else
				more(t, " %16.1f", node_fig(t, i, r));
		}
	}
	emit(t, "%-22s", "callbacks from (top)");
	for (int i = 0; i < t->nnodes; i++) {
		char a[32] = "-";

		if (t->cur[i] != NULL)
			top_asker(t, i, a, sizeof(a));
		more(t, " %16s", a);
	}
	for (int i = 0; i < t->nnodes; i++)
		if (t->cur[i] == NULL)
			emit(t, "! %s", t->err[i]);
}

struct op_row {
	const char *name;
	double total;
	double rate[MAX_NODES];
	double mean_us[MAX_NODES];
};

static int op_row_cmp(const void *a, const void *b)
{
	const struct op_row *x = a, *y = b;

	return (x->total < y->total) - (x->total > y->total);
}

static void op_figures(struct top *t, int i, const char *op, struct op_row *r)
{
	char ck[160], tk[160];
	double c, tot;

	snprintf(ck, sizeof(ck), "fuse.ops.%s.count", op);
	snprintf(tk, sizeof(tk), "fuse.ops.%s.lat.total_ns", op);
	c = fs_cli_get(t->cur[i], ck);
	tot = fs_cli_get(t->cur[i], tk);
	if (t->prev[i] != NULL) {
		c -= fs_cli_get(t->prev[i], ck);
		tot -= fs_cli_get(t->prev[i], tk);
	}
	r->rate[i] = rate(t, i, ck);
	r->mean_us[i] = c > 0 ? tot / c / 1e3 : 0;
	r->total += r->rate[i];
}

static void draw_ops(struct top *t, int max_rows)
{
	struct op_row rows[64];
	json_t *ops = NULL, *v;
	const char *name;
	int n = 0;

	for (int i = 0; i < t->nnodes && ops == NULL; i++)
		ops =
		    json_object_get(json_object_get(t->cur[i], "fuse"), "ops");
	json_object_foreach(ops, name, v)
	{
		if (n == 64)
			break;
		memset(&rows[n], 0, sizeof(rows[n]));
		rows[n].name = name;
		for (int i = 0; i < t->nnodes; i++)
			if (t->cur[i] != NULL)
				op_figures(t, i, name, &rows[n]);
		if (rows[n].total > 0)
			n++;
	}
	qsort(rows, (size_t)n, sizeof(rows[0]), op_row_cmp);
	emit(t, "%s", "");
	emit(t, "%-22s", "FUSE op");
	for (int i = 0; i < t->nnodes; i++)
		more(t, " %7s %8s", "ops/s", "mean_us");
	for (int r = 0; r < n && r < max_rows; r++) {
		emit(t, "%-22s", rows[r].name);
		for (int i = 0; i < t->nnodes; i++)
			more(t, " %7.1f %8.1f", rows[r].rate[i],
			     rows[r].mean_us[i]);
	}
	if (n == 0)
		emit(t, "  (no FUSE ops in this interval)");
}

struct res_row {
	int node; /* index into t->cur */
	json_t *r;
	double wait_ns;
};

#define TOP_ROWS 128

/* The string @key of @e, "?" if absent. */
static const char *str_of(json_t *e, const char *key)
{
	const char *v = json_string_value(json_object_get(e, key));

	return v != NULL ? v : "?";
}

static int res_row_cmp(const void *a, const void *b)
{
	const struct res_row *x = a, *y = b;

	return (x->wait_ns < y->wait_ns) - (x->wait_ns > y->wait_ns);
}

/* The entries of section @sec's "top" of every node (those @keep
 * accepts, if given), most total wait first, into @rows (TOP_ROWS).
 * Returns how many. */
static int top_rows(struct top *t, const char *sec, int (*keep)(json_t *r),
		    struct res_row *rows)
{
	int n = 0;

	for (int i = 0; i < t->nnodes; i++) {
		json_t *top = json_object_get(json_object_get(t->cur[i], sec),
					      "top"),
		       *r;
		size_t k;

		json_array_foreach(top, k, r)
		{
			if (n == TOP_ROWS || (keep != NULL && !keep(r)))
				continue;
			rows[n].node = i;
			rows[n].r = r;
			rows[n].wait_ns = fs_cli_get(r, "wait_ns");
			n++;
		}
	}
	qsort(rows, (size_t)n, sizeof(rows[0]), res_row_cmp);
	return n;
}

/* "1:EX,2:PR" from an array of {"node":N,"mode":M}. */
static void who(char *buf, size_t len, json_t *arr)
{
	size_t i, n = 0;
	json_t *e;

	buf[0] = '\0';
	json_array_foreach(arr, i, e)
	{
		const char *m = json_string_value(json_object_get(e, "mode"));
		int w = snprintf(
		    buf + n, len - n, "%s%lld:%s", i ? "," : "",
		    (long long)json_integer_value(json_object_get(e, "node")),
		    m != NULL ? m : "?");

		if (w < 0 || (size_t)w >= len - n)
			break;
		n += (size_t)w;
	}
	if (buf[0] == '\0')
		snprintf(buf, len, "-");
}

static void draw_resources(struct top *t, int max_rows)
{
	struct res_row rows[TOP_ROWS];
	int n = top_rows(t, "locks", NULL, rows);

	emit(t, "%s", "");
	emit(t, "%-4s %-24s %-4s %-14s %-14s %8s %10s", "node",
	     "most contended", "mode", "holders", "waiters", "waits",
	     "wait_ms");
	for (int r = 0; r < n && r < max_rows; r++) {
		json_t *e = rows[r].r;
		char h[64], w[64];

		who(h, sizeof(h), json_object_get(e, "holders"));
		who(w, sizeof(w), json_object_get(e, "waiters"));
		emit(t, "%-4.0f %-24.24s %-4s %-14.14s %-14.14s %8.0f %10.1f",
		     fs_cli_get(t->cur[rows[r].node], "node.id"),
		     str_of(e, "res"), str_of(e, "mode"), h, w,
		     fs_cli_get(e, "waits"), rows[r].wait_ns / 1e6);
	}
	if (n == 0)
		emit(t, "  (no lock section or no contended resource)");
}

/* The remembered path of inode @ino of node @i, or NULL. */
static const char *path_of(struct top *t, int i, uint64_t ino)
{
	unsigned n = t->npaths[i] < PATH_CACHE ? t->npaths[i] : PATH_CACHE;

	for (unsigned k = 0; k < n; k++)
		if (t->paths[i][k].ino == ino)
			return t->paths[i][k].path;
	return NULL;
}

static void path_keep(struct top *t, int i, uint64_t ino, char *path)
{
	struct ino_path *p = &t->paths[i][t->npaths[i]++ % PATH_CACHE];

	free(p->path);
	p->ino = ino;
	p->path = path;
}

/* The inode number of a "inode:N" resource, or 0. */
static uint64_t res_ino(json_t *r)
{
	const char *res = json_string_value(json_object_get(r, "res"));

	if (res == NULL || strncmp(res, "inode:", 6) != 0)
		return 0;
	return strtoull(res + 6, NULL, 10);
}

/* Find the paths of node @i's contended inodes not known yet (bounded:
 * fs_cli_ino_paths). */
static void resolve_paths(struct top *t, int i, json_t *top)
{
	const char *mnt = json_string_value(
	    json_object_get(json_object_get(t->cur[i], "node"), "mountpoint"));
	uint64_t inos[16], root;
	char *found[16] = {NULL};
	size_t n = 0, k;
	json_t *r;

	if (mnt == NULL || t->path_budget <= 0)
		return;
	json_array_foreach(top, k, r)
	{
		uint64_t ino = res_ino(r);

		if (ino != 0 && n < 16 && path_of(t, i, ino) == NULL)
			inos[n++] = ino;
	}
	root = (uint64_t)fs_cli_get(t->cur[i], "namespace.root_ino");
	if (n == 0 || fs_cli_ino_paths(mnt, root, inos, found, n,
				       (size_t)t->path_budget) <= 0)
		return;
	for (k = 0; k < n; k++)
		if (found[k] != NULL)
			path_keep(t, i, inos[k], found[k]);
}

static int is_inode(json_t *r)
{
	return res_ino(r) != 0;
}

/* glocks.top of every node: the most contended inodes, with paths. */
static void draw_inodes(struct top *t, int max_rows)
{
	struct res_row rows[TOP_ROWS];
	int n;

	for (int i = 0; i < t->nnodes; i++)
		resolve_paths(t, i,
			      json_object_get(
				  json_object_get(t->cur[i], "glocks"), "top"));
	n = top_rows(t, "glocks", is_inode, rows);
	emit(t, "%s", "");
	emit(t, "%-4s %-20s %-28s %-4s %8s %10s %8s", "node",
	     "most contended inodes", "path", "mode", "waits", "wait_ms",
	     "bounces");
	for (int r = 0; r < n && r < max_rows; r++) {
		json_t *e = rows[r].r;
		const char *path = path_of(t, rows[r].node, res_ino(e));

		emit(t, "%-4.0f %-20.20s %-28.28s %-4s %8.0f %10.1f %8.0f",
		     fs_cli_get(t->cur[rows[r].node], "node.id"),
		     str_of(e, "res"), path != NULL ? path : "?",
		     str_of(e, "mode"), fs_cli_get(e, "waits"),
		     rows[r].wait_ns / 1e6, fs_cli_get(e, "bounces"));
	}
	if (n == 0)
		emit(t, "  (no glocks section or no contended inode)");
}

static void term_size(struct top *t)
{
	struct winsize ws;

	t->rows = 24;
	t->cols = 80;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 &&
	    ws.ws_col > 0) {
		t->rows = ws.ws_row;
		t->cols = ws.ws_col;
	}
	if (t->batch) {
		t->rows = MAX_LINES;
		t->cols = LINE_LEN - 1;
	}
}

static void output(struct top *t)
{
	int n = t->nlines < t->rows ? t->nlines : t->rows;

	if (!t->batch)
		fputs("\033[H", stdout);
	for (int i = 0; i < n; i++) {
		t->lines[i][t->cols < LINE_LEN ? t->cols : LINE_LEN - 1] = '\0';
		fputs(t->lines[i], stdout);
		/* no newline after the last row: it would scroll */
		if (!t->batch)
			fputs(i + 1 < n ? "\033[K\r\n" : "\033[K", stdout);
		else
			fputs("\n", stdout);
	}
	fputs(t->batch ? "\n" : "\033[J", stdout);
	fflush(stdout);
}

static void draw(struct top *t)
{
	int left;

	term_size(t);
	t->nlines = 0;
	draw_nodes(t);
	left = t->rows - t->nlines - 4; /* blank + header, twice */
	draw_ops(t, left > 12 ? left / 2 : (left > 2 ? left - 2 : 1));
	left = t->rows - t->nlines - 4;
	draw_resources(t, left > 2 ? left / 2 : 1);
	left = t->rows - t->nlines - 2;
	draw_inodes(t, left > 1 ? left : 1);
	output(t);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sample(struct top *t)
{
	for (int i = 0; i < t->nnodes; i++) {
		json_t *j = fs_cli_fetch(t->targets[i], 2000, t->err[i],
					 sizeof(t->err[i]));

		if (t->cur[i] != NULL && j != NULL) {
			json_decref(t->prev[i]);
			t->prev[i] = t->cur[i];
			t->dt[i] = fs_cli_get(j, "node.uptime_s") -
				   fs_cli_get(t->prev[i], "node.uptime_s");
		} else {
			json_decref(t->cur[i]);
			json_decref(t->prev[i]);
			t->prev[i] = NULL;
		}
		t->cur[i] = j;
	}
}

static void term_enter(struct top *t)
{
	struct termios raw;

	if (t->batch)
		return;
	t->tty_in =
	    isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &t->saved) == 0;
	if (t->tty_in) {
		raw = t->saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	}
	/* alternate screen, hide cursor, clear */
	fputs("\033[?1049h\033[?25l\033[H\033[2J", stdout);
}

static void term_leave(struct top *t)
{
	if (t->batch)
		return;
	fputs("\033[?25h\033[?1049l", stdout);
	fflush(stdout);
	if (t->tty_in)
		tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
}

/* Wait until @deadline (monotonic s) or a key; 1 if q was pressed. */
static int wait_key(struct top *t, double deadline)
{
	for (;;) {
		struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
		double left = deadline - mono_s();
		char c;

		if (quit_sig)
			return 1;
		if (left <= 0 || winch)
			return 0;
		if (poll(&p, t->tty_in ? 1 : 0, (int)(left * 1000) + 1) <= 0)
			continue;
		if (read(STDIN_FILENO, &c, 1) != 1) {
			t->tty_in = 0; /* EOF: stop watching stdin */
			continue;
		}
		if (c == 'q' || c == 'Q')
			return 1;
		return 0;
	}
}

static int parse_args(int argc, char **argv, struct top *t)
{
	int i;

	t->interval = 1.0;
	t->path_budget = PATH_BUDGET;
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if ((strcmp(argv[i], "--interval") == 0 ||
		     strcmp(argv[i], "-i") == 0) &&
		    i + 1 < argc) {
			t->interval = atof(argv[++i]);
			if (!(t->interval > 0))
				return -1;
		} else if ((strcmp(argv[i], "--iterations") == 0 ||
			    strcmp(argv[i], "-n") == 0) &&
			   i + 1 < argc) {
			t->iterations = atol(argv[++i]);
		} else if (strcmp(argv[i], "--paths") == 0 && i + 1 < argc) {
			t->path_budget = atol(argv[++i]);
			if (t->path_budget < 0)
				return -1;
		} else if (strcmp(argv[i], "--batch") == 0 ||
			   strcmp(argv[i], "-b") == 0) {
			t->batch = 1;
		} else {
			return -1;
		}
	}
	t->targets = argv + i;
	t->nnodes = argc - i;
	return t->nnodes > 0 && t->nnodes <= MAX_NODES ? 0 : -1;
}

int main(int argc, char **argv)
{
	static struct top t;
	double next;

	if (parse_args(argc, argv, &t) != 0) {
		fprintf(stderr,
			"usage: ucfs-top [--interval S] "
			"[--iterations N] [--batch] [--paths N] "
			"MOUNTPOINT|SOCKET... (at most %d)\n",
			MAX_NODES);
		return 2;
	}
	if (!isatty(STDOUT_FILENO))
		t.batch = 1;
	signal(SIGINT, on_quit);
	signal(SIGTERM, on_quit);
	signal(SIGWINCH, on_winch);
	term_enter(&t);
	next = mono_s();
	for (long n = 0; !quit_sig; n++) {
		sample(&t);
		draw(&t);
		if (t.iterations > 0 && n + 1 >= t.iterations)
			break;
		next += t.interval;
		if (wait_key(&t, next))
			break;
		if (winch) { /* redraw at once, keep the sampling rhythm */
			winch = 0;
			draw(&t);
			if (wait_key(&t, next))
				break;
		}
	}
	term_leave(&t);
	for (int i = 0; i < t.nnodes; i++) {
		json_decref(t.cur[i]);
		json_decref(t.prev[i]);
		for (unsigned k = 0; k < PATH_CACHE; k++)
			free(t.paths[i][k].path);
	}
	return 0;
}
