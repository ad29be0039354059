/*
 * fs_trace.c — the -o trace=FILE writer: one JSON object per line.
 *
 * Lines (keys documented in fusefs/STATS.md, "Trace format"):
 *   {"t":1700000000.123456,"node":1,"ev":"grant","type":"inode",
 *    "res":"inode:1234","mode":"EX","from":"NL","peer":2,"remote":1,
 *    "wait_us":123.456}
 *   {"t":...,"node":1,"ev":"op","op":"create","lat_us":12.345,"err":0}
 * "t" is wall-clock seconds (CLOCK_REALTIME) so traces of several nodes
 * merge by time.
 *
 * Each line is formatted on the caller's stack, then appended to one
 * buffer under tr->lock; a full buffer is written out by the thread that
 * filled it, and the stats server flushes every second. A failed write
 * drops those lines and counts them; tracing never fails an op.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fusefs/stats/fs_stats_internal.h"

#define FS_TRACE_BUF (256 * 1024)
#define FS_TRACE_LINE 512

struct fs_trace {
	pthread_mutex_t lock;
	int fd;		  /* immutable after open */
	int node;	  /* immutable after open */
	unsigned flags;	  /* immutable after open */
	char *buf;	  /* protected by lock */
	size_t len;	  /* protected by lock */
	unsigned pending; /* lines in buf; protected by lock */
	_Atomic uint64_t lines;
	_Atomic uint64_t dropped;
};

static const char *const fs_trace_ev_names[FS_TR__COUNT] = {
    [FS_TR_REQUEST] = "request",     [FS_TR_GRANT] = "grant",
    [FS_TR_BAST_SENT] = "bast_sent", [FS_TR_BAST_RECV] = "bast_recv",
    [FS_TR_DEMOTE] = "demote",	     [FS_TR_RELEASE] = "release",
};

static const char *const fs_lk_mode_names[] = {
    "NL", "CR", "CW", "PR", "PW", "EX",
};

const char *fs_lk_mode_name(int mode)
{
	if (mode < 0 || mode > FS_LK_EX)
		return "IV";
	return fs_lk_mode_names[mode];
}

int fs_trace_open(const char *path, int node, unsigned flags,
		  struct fs_trace **out)
{
	struct fs_trace *tr = calloc(1, sizeof(*tr));
	int ret;

	if (tr == NULL)
		return -ENOMEM;
	tr->buf = malloc(FS_TRACE_BUF);
	if (tr->buf == NULL) {
		ret = -ENOMEM;
		goto out_free;
	}
	tr->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (tr->fd < 0) {
		ret = -errno;
		goto out_buf;
	}
	pthread_mutex_init(&tr->lock, NULL);
	tr->node = node;
	tr->flags = flags;
	*out = tr;
	return 0;
out_buf:
	free(tr->buf);
out_free:
	free(tr);
	return ret;
}

/* Write the buffer out; call with tr->lock held. */
static void fs_trace_drain(struct fs_trace *tr)
{
	size_t off = 0;

	while (off < tr->len) {
		ssize_t n = write(tr->fd, tr->buf + off, tr->len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* lines are whole only at the end of the buffer;
			 * count the ones lost as all pending */
			atomic_fetch_add(&tr->dropped, tr->pending);
			break;
		}
		off += (size_t)n;
	}
	tr->len = 0;
	tr->pending = 0;
}

void fs_trace_flush(struct fs_trace *tr)
{
	if (tr == NULL)
		return;
	pthread_mutex_lock(&tr->lock);
	fs_trace_drain(tr);
	pthread_mutex_unlock(&tr->lock);
}

void fs_trace_close(struct fs_trace *tr)
{
	if (tr == NULL)
		return;
	fs_trace_flush(tr);
	close(tr->fd);
	pthread_mutex_destroy(&tr->lock);
	free(tr->buf);
	free(tr);
}

uint64_t fs_trace_dropped(const struct fs_trace *tr)
{
	if (tr == NULL)
		return 0;
	return atomic_load(&((struct fs_trace *)tr)->dropped);
}

int fs_trace_wants_ops(const struct fs_trace *tr)
{
	return tr != NULL && (tr->flags & FS_TRACE_OPS) != 0;
}

static void fs_trace_append(struct fs_trace *tr, const char *line, int n)
{
	if (n <= 0 || n >= FS_TRACE_LINE) {
		atomic_fetch_add(&tr->dropped, 1);
		return;
	}
	pthread_mutex_lock(&tr->lock);
	if (tr->len + (size_t)n > FS_TRACE_BUF)
		fs_trace_drain(tr);
	memcpy(tr->buf + tr->len, line, (size_t)n);
	tr->len += (size_t)n;
	tr->pending++;
	pthread_mutex_unlock(&tr->lock);
	atomic_fetch_add_explicit(&tr->lines, 1, memory_order_relaxed);
}

/* Common prefix: {"t":...,"node":N,"ev":"...". Returns its length. */
static int fs_trace_head(struct fs_trace *tr, char *buf, size_t len,
			 const char *ev)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return snprintf(buf, len, "{\"t\":%lld.%06ld,\"node\":%d,\"ev\":\"%s\"",
			(long long)ts.tv_sec, ts.tv_nsec / 1000, tr->node, ev);
}

/* Copy @s as JSON string content (without quotes); bytes outside
 * printable ASCII become \u00XX. Returns bytes written (truncates). */
static size_t fs_trace_escape(char *dst, size_t len, const char *s)
{
	size_t n = 0;

	for (; s != NULL && *s != '\0' && n + 7 < len; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			dst[n++] = '\\';
			dst[n++] = (char)c;
		} else if (c < 0x20 || c >= 0x7f) {
			n += (size_t)snprintf(dst + n, len - n, "\\u%04x", c);
		} else {
			dst[n++] = (char)c;
		}
	}
	dst[n] = '\0';
	return n;
}

/* ",\"peer\":N" when the peer is known. Returns its length. */
static int fs_trace_peer(char *buf, size_t len, int peer)
{
	return peer < 0 ? 0 : snprintf(buf, len, ",\"peer\":%d", peer);
}

/* The write-back and invalidation of a demote or release. */
static int fs_trace_wb(char *buf, size_t len, const struct fs_trace_wb *wb)
{
	static const char *const k[] = {"attrs", "pages", "names"};
	char kinval[32] = "";
	size_t n = 0;

	if (wb == NULL)
		return 0;
	for (unsigned i = 0; i < 3; i++)
		if (wb->kinval & (1u << i))
			n += (size_t)snprintf(kinval + n, sizeof(kinval) - n,
					      "%s%s", n ? "+" : "", k[i]);
	return snprintf(buf, len,
			",\"log_blocks\":%llu,\"home_blocks\":%llu,"
			"\"data_bytes\":%llu,\"flushes\":%u,\"kinval\":\"%s\"",
			(unsigned long long)wb->log_blocks,
			(unsigned long long)wb->home_blocks,
			(unsigned long long)wb->data_bytes, wb->flushes,
			n ? kinval : "none");
}

static const char *fs_trace_ns_key(enum fs_trace_ev ev)
{
	if (ev == FS_TR_RELEASE)
		return "held_us";
	return ev == FS_TR_DEMOTE ? "demote_us" : "wait_us";
}

void fs_trace_lock(struct fs_trace *tr, const struct fs_trace_lock *ev)
{
	char line[FS_TRACE_LINE], type[64], res[160];
	int n;

	if (tr == NULL || ev == NULL || (unsigned)ev->ev >= FS_TR__COUNT)
		return;
	fs_trace_escape(type, sizeof(type), ev->type);
	fs_trace_escape(res, sizeof(res), ev->res);
	n = fs_trace_head(tr, line, sizeof(line), fs_trace_ev_names[ev->ev]);
	n += snprintf(line + n, sizeof(line) - (size_t)n,
		      ",\"type\":\"%s\",\"res\":\"%s\",\"mode\":\"%s\","
		      "\"from\":\"%s\"",
		      type, res, fs_lk_mode_name(ev->mode),
		      fs_lk_mode_name(ev->from));
	n += fs_trace_peer(line + n, sizeof(line) - (size_t)n, ev->peer);
	n += snprintf(line + n, sizeof(line) - (size_t)n,
		      ",\"remote\":%d,\"%s\":%.3f", ev->remote ? 1 : 0,
		      fs_trace_ns_key(ev->ev), (double)ev->wait_ns / 1e3);
	n += fs_trace_wb(line + n, sizeof(line) - (size_t)n, ev->wb);
	n += snprintf(line + n, sizeof(line) - (size_t)n, "}\n");
	fs_trace_append(tr, line, n);
}

void fs_trace_op(struct fs_trace *tr, enum fs_op op, uint64_t lat_ns, int err)
{
	char line[FS_TRACE_LINE];
	int n;

	n = fs_trace_head(tr, line, sizeof(line), "op");
	n += snprintf(line + n, sizeof(line) - (size_t)n,
		      ",\"op\":\"%s\",\"lat_us\":%.3f,\"err\":%d}\n",
		      fs_op_name(op), (double)lat_ns / 1e3, err);
	fs_trace_append(tr, line, n);
}
