/*
 * fs_opts.c — mount option parsing (see fusefs/MOUNT.md).
 *
 * One comma-separated string at a time is split into three kinds:
 *  - ucfs options, stored in struct fs_opts (lockproto=, cluster=,
 *    node=, minhold=, glock_max=, inode_max=, hb_interval=, hb_timeout=,
 *    records_timeout=,
 *    data=, commit=, statfs_quantum=, statfs_percent=, cache_mb=,
 *    readahead=, statahead=,
 *    noatime/relatime/strictatime, ro/rw,
 *    writeback_cache/nowriteback_cache, uring=, localflocks,
 *    allow_other, debug, passthrough);
 *  - options for libfuse or the kernel mount, appended to o->fuse and
 *    handed to libfuse as one -o string (nosuid, nodev, fsname=, ...);
 *  - fstab and mount-helper noise that means nothing to a FUSE mount
 *    (defaults, _netdev, auto, nofail, x-*, ...), accepted and dropped.
 * Anything else is refused with a message naming it, so a typo never
 * silently mounts with defaults.
 *
 * Pure functions, no global state: safe from any thread.
 */
#include "fusefs/fs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fs_opts_init(struct fs_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->lockproto = FS_LOCK_NOLOCK;
	o->data = FS_DATA_ORDERED;
	o->commit_s = FS_DEFAULT_COMMIT_S;
	o->atime = FS_ATIME_RELATIME;
	o->cache_mb = FS_DEFAULT_CACHE_MB;
	o->readahead_kb = FS_DEFAULT_READAHEAD_KB;
	o->statahead = FS_DEFAULT_STATAHEAD;
	o->records_timeout_s = FS_DEFAULT_RECORDS_TIMEOUT_S;
	o->minhold_ms = -1;
	o->glock_max = -1;
	o->inode_max = -1;
}

/* Flags passed to libfuse unchanged (its mount-flag and option tables). */
static const char *const fuse_flags[] = {
	"suid", "nosuid", "dev", "nodev", "exec", "noexec", "async", "sync",
	"dirsync", "auto_unmount", "blkdev", NULL,
};

/* Options with a value passed to libfuse unchanged. */
static const char *const fuse_valued[] = {
	"fsname", "subtype", "max_read", "context", "fscontext",
	"defcontext", "rootcontext", NULL,
};

/* Accepted and ignored: fstab and mount(8) options a FUSE mount has no
 * use for (default_permissions is always on). */
static const char *const ignored[] = {
	"defaults", "_netdev", "auto", "noauto", "user", "users", "nouser",
	"owner", "nofail", "default_permissions", "diratime", "nodiratime",
	"lazytime", "nolazytime", "norelatime", "loop", NULL,
};

static int in_list(const char *const *list, const char *s)
{
	for (; *list != NULL; list++)
		if (strcmp(*list, s) == 0)
			return 1;
	return 0;
}

static int opt_error(char *err, size_t errlen, const char *what,
		     const char *opt)
{
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "ucfs: %s mount option '%s'", what, opt);
	return -EINVAL;
}

/* Decimal unsigned in [lo, hi]; 0 or -EINVAL. */
static int parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	unsigned long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < lo || v > hi)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

static int fuse_append(struct fs_opts *o, const char *opt)
{
	size_t used = strlen(o->fuse), n = strlen(opt);

	if (used + n + 2 > sizeof(o->fuse))
		return -E2BIG;
	if (used > 0)
		o->fuse[used++] = ',';
	memcpy(o->fuse + used, opt, n + 1);
	return 0;
}

/* A "key=value" ucfs option; 1 if known (result in *ret), 0 if not. */
static int parse_valued(struct fs_opts *o, const char *key, const char *val,
			int *ret)
{
	*ret = 0;
	if (strcmp(key, "lockproto") == 0) {
		if (strcmp(val, "nolock") == 0)
			o->lockproto = FS_LOCK_NOLOCK;
		else if (strcmp(val, "dlm") == 0)
			o->lockproto = FS_LOCK_DLM;
		else
			*ret = -EINVAL;
	} else if (strcmp(key, "data") == 0) {
		if (strcmp(val, "ordered") == 0)
			o->data = FS_DATA_ORDERED;
		else if (strcmp(val, "writeback") == 0)
			o->data = FS_DATA_WRITEBACK;
		else
			*ret = -EINVAL;
	} else if (strcmp(key, "commit") == 0) {
		*ret = parse_uint(val, 1, 3600, &o->commit_s);
	} else if (strcmp(key, "statfs_quantum") == 0) {
		/* GFS2's: 0 is statfs_slow (the groups counted at every
		 * statfs), folding at the default quantum */
		*ret = parse_uint(val, 0, 3600, &o->statfs_quantum_s);
		o->statfs_slow = *ret == 0 && o->statfs_quantum_s == 0;
	} else if (strcmp(key, "statfs_percent") == 0) {
		*ret = parse_uint(val, 0, 100, &o->statfs_percent);
	} else if (strcmp(key, "cache_mb") == 0) {
		*ret = parse_uint(val, 4, 1u << 20, &o->cache_mb);
	} else if (strcmp(key, "uring") == 0) {
		if (strcmp(val, "auto") == 0)
			o->uring = FS_URING_AUTO;
		else if (strcmp(val, "on") == 0)
			o->uring = FS_URING_ON;
		else if (strcmp(val, "off") == 0)
			o->uring = FS_URING_OFF;
		else
			*ret = -EINVAL;
	} else if (strcmp(key, "cluster") == 0) {
		if (val[0] == '\0' || strlen(val) >= sizeof(o->cluster))
			*ret = -EINVAL;
		else
			snprintf(o->cluster, sizeof(o->cluster), "%s", val);
	} else if (strcmp(key, "node") == 0) {
		*ret = parse_uint(val, 1, 63, &o->node_id);
	} else if (strcmp(key, "minhold") == 0) {
		unsigned ms;

		*ret = parse_uint(val, 0, 10000, &ms);
		if (*ret == 0)
			o->minhold_ms = (int)ms;
	} else if (strcmp(key, "glock_max") == 0) {
		unsigned n;

		*ret = parse_uint(val, 16, 1u << 24, &n);
		if (*ret == 0)
			o->glock_max = (int)n;
	} else if (strcmp(key, "inode_max") == 0) {
		unsigned n;

		*ret = parse_uint(val, 16, 1u << 24, &n);
		if (*ret == 0)
			o->inode_max = (int)n;
	} else if (strcmp(key, "hb_interval") == 0) {
		*ret = parse_uint(val, 10, 60000, &o->hb_interval_ms);
	} else if (strcmp(key, "hb_timeout") == 0) {
		*ret = parse_uint(val, 100, 600000, &o->hb_timeout_ms);
	} else if (strcmp(key, "records_timeout") == 0) {
		*ret = parse_uint(val, 0, 86400, &o->records_timeout_s);
	} else if (strcmp(key, "readahead") == 0) {
		*ret = parse_uint(val, 0, 1u << 16, &o->readahead_kb);
	} else if (strcmp(key, "statahead") == 0) {
		*ret = parse_uint(val, 0, FS_MAX_STATAHEAD, &o->statahead);
	} else {
		return 0;
	}
	return 1;
}

/* A flag (no '='); 1 if ucfs handled it (result in *ret), 0 if not. */
static int parse_flag(struct fs_opts *o, const char *opt, int *ret)
{
	*ret = 0;
	if (strcmp(opt, "ro") == 0) {
		o->ro = 1;
	} else if (strcmp(opt, "writeback_cache") == 0) {
		o->writeback_cache = 1;
	} else if (strcmp(opt, "nowriteback_cache") == 0) {
		o->writeback_cache = 0;
	} else if (strcmp(opt, "rw") == 0) {
		o->ro = 0;
	} else if (strcmp(opt, "noatime") == 0) {
		o->atime = FS_ATIME_NOATIME;
	} else if (strcmp(opt, "relatime") == 0 || strcmp(opt, "atime") == 0) {
		o->atime = FS_ATIME_RELATIME;
	} else if (strcmp(opt, "strictatime") == 0) {
		o->atime = FS_ATIME_STRICT;
	} else if (strcmp(opt, "localflocks") == 0) {
		o->localflocks = 1;
	} else if (strcmp(opt, "allow_other") == 0) {
		o->allow_other = 1;
	} else if (strcmp(opt, "debug") == 0) {
		o->debug = 1;
	} else if (strcmp(opt, "passthrough") == 0) {
		o->passthrough = 1;
	} else {
		return 0;
	}
	return 1;
}

static int parse_one(struct fs_opts *o, char *opt, char *err, size_t errlen)
{
	char *eq = strchr(opt, '=');
	int ret;

	if (*opt == '\0')
		return 0;	/* "a,,b" and trailing commas */
	if (strncmp(opt, "x-", 2) == 0 || strncmp(opt, "comment=", 8) == 0)
		return 0;
	if (eq == NULL) {
		if (parse_flag(o, opt, &ret))
			return ret;
		if (in_list(ignored, opt))
			return 0;
		if (in_list(fuse_flags, opt))
			return fuse_append(o, opt) == 0 ? 0 :
			       opt_error(err, errlen, "too long", opt);
		return opt_error(err, errlen, "unknown", opt);
	}
	*eq = '\0';
	if (parse_valued(o, opt, eq + 1, &ret)) {
		*eq = '=';
		return ret == 0 ? 0 : opt_error(err, errlen, "bad value in",
						opt);
	}
	if (in_list(fuse_valued, opt)) {
		*eq = '=';
		if (eq[1] == '\0')
			return opt_error(err, errlen, "bad value in", opt);
		return fuse_append(o, opt) == 0 ? 0 :
		       opt_error(err, errlen, "too long", opt);
	}
	*eq = '=';
	if (in_list(fuse_flags, opt) || in_list(ignored, opt) ||
	    strncmp(opt, "ro=", 3) == 0 || strncmp(opt, "rw=", 3) == 0)
		return opt_error(err, errlen, "bad value in", opt);
	return opt_error(err, errlen, "unknown", opt);
}

int fs_opts_parse(struct fs_opts *o, const char *s, char *err,
		  size_t errlen)
{
	char *copy, *p, *next;
	int ret = 0;

	copy = strdup(s);
	if (copy == NULL)
		return -ENOMEM;
	for (p = copy; p != NULL && ret == 0; p = next) {
		next = strchr(p, ',');
		if (next != NULL)
			*next++ = '\0';
		ret = parse_one(o, p, err, errlen);
	}
	free(copy);
	return ret;
}
