/*
 * fs_stats_mount.c — what the daemon needs to give a mount its stats:
 * the stats mount options and a start/stop pair.
 *
 * Options owned by the stats code (taken out of the -o string before the
 * filesystem's own parser sees it, so fs_opts.c need not know them):
 *   stats=PATH   serve the JSON on PATH instead of /run/ucfs/<mnt>.sock
 *   nostats      no socket (counters still count; cost is the same)
 *   trace=FILE   write the lock-event trace (JSON lines) to FILE
 *   trace_ops    also trace every FUSE op with its latency
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusefs/stats/fs_stats.h"

void fs_stats_opts_init(struct fs_stats_opts *so)
{
	memset(so, 0, sizeof(*so));
}

void fs_stats_opts_free(struct fs_stats_opts *so)
{
	free(so->sock);
	free(so->trace);
	fs_stats_opts_init(so);
}

/* 1 if @tok is ours (and stored in @so), 0 if not, -errno on error. */
static int fs_stats_opt_one(const char *tok, struct fs_stats_opts *so,
			    char *err, size_t errlen)
{
	char **dst = NULL;
	const char *val = NULL;

	if (strcmp(tok, "nostats") == 0) {
		so->nostats = 1;
		return 1;
	}
	if (strcmp(tok, "trace_ops") == 0) {
		so->trace_flags |= FS_TRACE_OPS;
		return 1;
	}
	if (strncmp(tok, "stats=", 6) == 0) {
		dst = &so->sock;
		val = tok + 6;
	} else if (strncmp(tok, "trace=", 6) == 0) {
		dst = &so->trace;
		val = tok + 6;
	} else {
		return 0;
	}
	if (val[0] == '\0') {
		if (err != NULL)
			snprintf(err, errlen,
				 "ucfs: mount option '%.*s' "
				 "needs a path",
				 (int)(val - tok - 1), tok);
		return -EINVAL;
	}
	free(*dst);
	*dst = strdup(val);
	return *dst == NULL ? -ENOMEM : 1;
}

int fs_stats_opts_take(char *opts, struct fs_stats_opts *so, char *err,
		       size_t errlen)
{
	char *rd = opts, *wr = opts;

	if (opts == NULL)
		return 0;
	while (*rd != '\0') {
		char *end = strchr(rd, ','), save;
		size_t len = end != NULL ? (size_t)(end - rd) : strlen(rd);
		int ret;

		save = rd[len];
		rd[len] = '\0';
		ret = fs_stats_opt_one(rd, so, err, errlen);
		rd[len] = save;
		if (ret < 0)
			return ret;
		if (ret == 0 && len > 0) { /* not ours: keep it */
			if (wr != opts)
				*wr++ = ',';
			memmove(wr, rd, len);
			wr += len;
		}
		rd += len;
		if (*rd == ',')
			rd++;
	}
	*wr = '\0';
	return 0;
}

int fs_stats_mount_start(struct fs_stats *st, const struct fs_stats_opts *so,
			 int node_id, char *err, size_t errlen)
{
	struct fs_trace *tr = NULL;
	int ret;

	if (so->trace != NULL) {
		ret = fs_trace_open(so->trace, node_id, so->trace_flags, &tr);
		if (ret != 0) {
			snprintf(err, errlen, "ucfs: trace=%s: %s", so->trace,
				 strerror(-ret));
			return ret;
		}
		fs_stats_set_trace(st, tr);
	}
	if (so->nostats)
		return 0;
	ret = fs_stats_serve(st, so->sock);
	if (ret != 0) {
		snprintf(err, errlen, "ucfs: stats socket %s: %s",
			 so->sock != NULL ? so->sock : "(from mountpoint)",
			 ret == -EADDRINUSE ? "another ucfs serves there"
					    : strerror(-ret));
		fs_stats_set_trace(st, NULL);
		fs_trace_close(tr);
	}
	return ret;
}

void fs_stats_mount_stop(struct fs_stats *st)
{
	struct fs_trace *tr;

	if (st == NULL)
		return;
	fs_stats_stop(st);
	tr = fs_stats_trace(st);
	fs_stats_set_trace(st, NULL);
	fs_trace_close(tr);
}
