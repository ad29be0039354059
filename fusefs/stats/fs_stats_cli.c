/*
 * fs_stats_cli.c — client-side helpers of the stats tools (see
 * fs_stats_cli.h). No state; every function is reentrant.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "fusefs/stats/fs_stats.h"
#include "fusefs/stats/fs_stats_cli.h"

json_t *fs_cli_fetch(const char *target, int timeout_ms, char *err,
		     size_t errlen)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)], *doc;
	json_error_t je;
	json_t *j;
	int ret;

	ret = fs_stats_resolve(target, path, sizeof(path));
	if (ret != 0) {
		snprintf(err, errlen, "%s: %s", target, strerror(-ret));
		return NULL;
	}
	ret = fs_stats_fetch(path, timeout_ms, &doc);
	if (ret != 0) {
		snprintf(err, errlen, "%s: %s: %s", target, path,
			 ret == -EPROTO ? "refused (not root?)"
					: strerror(-ret));
		return NULL;
	}
	j = json_loads(doc, 0, &je);
	free(doc);
	if (j == NULL || !json_is_object(j)) {
		snprintf(err, errlen, "%s: bad JSON: %s", target,
			 j == NULL ? je.text : "not an object");
		json_decref(j);
		return NULL;
	}
	return j;
}

static int fs_cli_flat_into(json_t *out, const char *prefix, json_t *v)
{
	char key[512];
	const char *k;
	json_t *c;
	size_t i;

	if (json_is_object(v)) {
		json_object_foreach(v, k, c)
		{
			snprintf(key, sizeof(key), "%s%s%s", prefix,
				 prefix[0] != '\0' ? "." : "", k);
			if (json_is_array(c) && strcmp(k, "hist") == 0)
				continue;
			if (fs_cli_flat_into(out, key, c) != 0)
				return -ENOMEM;
		}
		return 0;
	}
	if (json_is_array(v)) {
		json_array_foreach(v, i, c)
		{
			snprintf(key, sizeof(key), "%s[%zu]", prefix, i);
			if (fs_cli_flat_into(out, key, c) != 0)
				return -ENOMEM;
		}
		return 0;
	}
	if (json_is_null(v))
		return 0;
	return json_object_set(out, prefix, v) == 0 ? 0 : -ENOMEM;
}

json_t *fs_cli_flatten(json_t *doc)
{
	json_t *out = json_object();

	if (out != NULL && fs_cli_flat_into(out, "", doc) != 0) {
		json_decref(out);
		return NULL;
	}
	return out;
}

/* Leaf names that are current values, not cumulative counts. */
/* clang-format off */
static const char *const fs_cli_gauges[] = {
	"id", "slot", "pid", "uptime_s", "start_time", "time", "version",
	"inflight", "dirty", "cached", "entries", "mean_ns", "p50_ns",
	"p99_ns", "max_ns", "srtt", "srttvar", "srttb", "srttvarb", "sirt",
	"sirtvar", "mode", "holders", "waiters", "free", "size", "capacity",
	"queue_depth", "node", "window",
};
/* clang-format on */

int fs_cli_is_gauge(const char *key)
{
	const char *leaf = strrchr(key, '.');

	leaf = leaf == NULL ? key : leaf + 1;
	if (strchr(key, '[') != NULL) /* lists (top-N) are snapshots */
		return 1;
	if (strncmp(leaf, "max", 3) == 0 || strncmp(leaf, "min", 3) == 0 ||
	    strncmp(leaf, "cur", 3) == 0)
		return 1;
	if (strlen(leaf) > 4 && strcmp(leaf + strlen(leaf) - 4, "_now") == 0)
		return 1;
	for (size_t i = 0; i < sizeof(fs_cli_gauges) / sizeof(*fs_cli_gauges);
	     i++)
		if (strcmp(leaf, fs_cli_gauges[i]) == 0)
			return 1;
	return 0;
}

double fs_cli_num(json_t *flat, const char *key)
{
	json_t *v = json_object_get(flat, key);

	return json_is_number(v) ? json_number_value(v) : 0.0;
}

double fs_cli_get(json_t *doc, const char *path)
{
	char buf[512], *tok, *save = NULL;
	json_t *j = doc;

	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, ".", &save); tok != NULL && j != NULL;
	     tok = strtok_r(NULL, ".", &save))
		j = json_object_get(j, tok);
	return json_is_number(j) ? json_number_value(j) : 0.0;
}

/* ---- inode numbers to paths (ucfs-top) -------------------------------- */

struct ino_walk {
	const uint64_t *inos;
	char **paths;
	size_t n, left; /* paths still NULL */
	size_t budget;	/* entries still to read */
	char **queue;	/* directories to read, relative ("" = root) */
	size_t head, tail, cap;
};

static int walk_push(struct ino_walk *w, char *rel)
{
	if (w->tail == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		char **q = realloc(w->queue, cap * sizeof(*q));

		if (q == NULL) {
			free(rel);
			return -ENOMEM;
		}
		w->queue = q;
		w->cap = cap;
	}
	w->queue[w->tail++] = rel;
	return 0;
}

/* An entry @name of directory @rel with inode @ino. */
static void walk_entry(struct ino_walk *w, const char *rel, const char *name,
		       uint64_t ino, int dir)
{
	char *p;

	if (asprintf(&p, "%s/%s", rel, name) < 0)
		return;
	for (size_t i = 0; i < w->n; i++) {
		if (w->paths[i] == NULL && w->inos[i] == ino) {
			w->paths[i] = strdup(p);
			w->left -= w->paths[i] != NULL;
		}
	}
	if (dir)
		walk_push(w, p);
	else
		free(p);
}

static void walk_dir(struct ino_walk *w, const char *mnt, const char *rel)
{
	char path[4096];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "%s%s", mnt, rel);
	dir = opendir(path);
	if (dir == NULL)
		return;
	while (w->left > 0 && w->budget > 0 && (d = readdir(dir)) != NULL) {
		if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
			continue;
		w->budget--;
		walk_entry(w, rel, d->d_name, (uint64_t)d->d_ino,
			   d->d_type == DT_DIR);
	}
	closedir(dir);
}

int fs_cli_ino_paths(const char *mnt, uint64_t root, const uint64_t *inos,
		     char **paths, size_t n, size_t budget)
{
	struct ino_walk w = {
	    .inos = inos, .paths = paths, .n = n, .budget = budget};
	size_t found = 0;
	DIR *top = opendir(mnt);
	char *start;

	if (top == NULL)
		return -errno;
	closedir(top);
	for (size_t i = 0; i < n; i++) {
		if (paths[i] == NULL && inos[i] == root)
			paths[i] = strdup("/");
		w.left += paths[i] == NULL;
	}
	start = w.left > 0 ? strdup("") : NULL;
	if (start != NULL && walk_push(&w, start) == 0)
		while (w.head < w.tail && w.left > 0 && w.budget > 0) {
			walk_dir(&w, mnt, w.queue[w.head]);
			free(w.queue[w.head++]);
		}
	while (w.head < w.tail)
		free(w.queue[w.head++]);
	free(w.queue);
	for (size_t i = 0; i < n; i++)
		found += paths[i] != NULL;
	return (int)found;
}
