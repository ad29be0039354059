/*
 * fs_stats_cli.h — helpers the stats tools (ucfs-stat, ucfs-top,
 * ucfs-trace) share: fetch and parse a node's document, flatten it to
 * "a.b.c" keys, tell counters from gauges. The tools are part of the
 * stats code, so this header does expose jansson; the filesystem modules
 * never include it.
 */
#ifndef UCFS_FS_STATS_CLI_H
#define UCFS_FS_STATS_CLI_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Fetch and parse the document of @target (mountpoint or socket).
 * Returns a new reference, or NULL with a message in @err. */
json_t *fs_cli_fetch(const char *target, int timeout_ms, char *err,
		     size_t errlen);

/* A new object mapping "path.to.key" -> scalar (integer/real/string/
 * bool) for every scalar of @doc, in document order. Arrays become
 * "key[i]"; arrays under a key named "hist" are left out. NULL on
 * ENOMEM. */
json_t *fs_cli_flatten(json_t *doc);

/* 1 if the flattened key names a gauge (a current value: latency
 * figures, maxima, queue depths, identity), 0 if it is a cumulative
 * counter whose rate makes sense. The rule is in fusefs/STATS.md. */
int fs_cli_is_gauge(const char *key);

/* The number at flattened @key of @flat (0 if missing or not a number). */
double fs_cli_num(json_t *flat, const char *key);
/* The number at a dotted path of an unflattened @doc ("fuse.count"). */
double fs_cli_get(json_t *doc, const char *path);

/*
 * Paths of inodes by number, found by walking the mount at @mnt (whose
 * root directory is inode @root) breadth first with readdir's d_ino (no
 * stat): for each i with paths[i] NULL, paths[i] becomes a malloc'ed
 * path relative to the mount ("/a/b", "/" for @root) if the walk meets
 * inos[i] within @budget directory entries, else stays NULL. The cost is
 * bounded by @budget (directories deeper than the walk gets are not
 * searched). Returns how many it found; -errno if @mnt cannot be read.
 */
int fs_cli_ino_paths(const char *mnt, uint64_t root, const uint64_t *inos,
		     char **paths, size_t n, size_t budget);

#endif /* UCFS_FS_STATS_CLI_H */
