/*
 * test_stats_fs.c — the "journal", "cache", "alloc", "data" and "blockdev"
 * sections of a real mounted filesystem (RAM device, fs.h calls).
 */
#include <errno.h>
#include <jansson.h>

#include "blockdev/bd.h"
#include "fusefs/fs.h"
#include "fusefs/core/fs_internal.h"
#include "fusefs/stats/fs_stats.h"
#include "tests/unit/harness.h"

static double num(json_t *j, const char *a, const char *b, const char *c)
{
	json_t *v = json_object_get(json_object_get(j, a), b);

	if (c != NULL)
		v = json_object_get(v, c);
	return json_is_number(v) ? json_number_value(v) : -1;
}

static json_t *doc(struct fs_stats *st)
{
	char *s;
	json_t *j;

	if (fs_stats_render(st, 0, &s) != 0)
		return NULL;
	j = json_loads(s, 0, NULL);
	free(s);
	return j;
}

static void test_fs_sections(void)
{
	struct fs_mkfs_params p;
	struct fs_opts o;
	struct fs_cred cred = { .uid = 0, .flags = FS_CRED_FSETID };
	struct fs_stats *st;
	struct bd_dev *bd;
	struct fs *fs;
	char why[256] = "";
	json_t *j0, *j1;

	REQUIRE(bd_ram_open(256u << 20, &bd) == 0);
	fs_mkfs_defaults(&p);
	p.journal_mb = 8;
	p.rgrp_mb = 64;
	REQUIRE(fs_mkfs(bd, &p, why, sizeof(why)) == 0);
	fs_opts_init(&o);
	REQUIRE(fs_mount_bd(bd, &o, &fs, why, sizeof(why)) == 0);
	REQUIRE(fs_stats_new(&st) == 0);
	REQUIRE(fs_stats_add_fs(st, fs) == 0);
	CHECK_EQ(fs_stats_add_fs(st, fs), -EEXIST); /* nothing doubled */
	j0 = doc(st);
	REQUIRE(j0 != NULL);
	for (int i = 0; i < 20; i++) {
		struct fs_attr a;
		char name[32];

		snprintf(name, sizeof(name), "f%d", i);
		CHECK_EQ(fs_create(fs, &cred, fs_root(fs), name, 0644, 0, &a),
			 0);
		/* 3 appends of 10 KiB: past the inline area, then combined */
		for (int k = 0; k < 3; k++) {
			static char buf[10240];

			CHECK_EQ(fs_write(fs, &cred, a.ino, buf, sizeof(buf),
					  (uint64_t)k * sizeof(buf)),
				 (ssize_t)sizeof(buf));
		}
		fs_release(fs, a.ino);
	}
	CHECK_EQ(fs_sync(fs), 0);
	j1 = doc(st);
	REQUIRE(j1 != NULL);
	CHECK(num(j1, "journal", "commits", NULL) >
	      num(j0, "journal", "commits", NULL));
	CHECK(num(j1, "journal", "blocks", NULL) > 0);
	CHECK(num(j1, "journal", "flush", "fsync") >= 1);
	CHECK(num(j1, "journal", "flush", "timer") >= 0);
	CHECK(num(j1, "journal", "flush", "demote") == 0);
	CHECK(num(j1, "journal", "flush", "full") >= 0);
	CHECK(num(j1, "journal", "lat", "max_ns") > 0);
	CHECK(num(j1, "cache", "hits", NULL) +
		  num(j1, "cache", "misses", NULL) >
	      0);
	CHECK(num(j1, "cache", "bufs_now", NULL) > 0);
	CHECK(num(j1, "alloc", "calls", NULL) > 0);
	CHECK(num(j1, "data", "writes", NULL) >= 40);
	CHECK(num(j1, "data", "absorbed", NULL) > 0);
	CHECK(num(j1, "data", "runs", NULL) > 0);
	CHECK(num(j1, "data", "runs", NULL) +
		  num(j1, "data", "absorbed", NULL) ==
	      num(j1, "data", "writes", NULL));
	CHECK(num(j1, "data", "waits", NULL) >= 1);
	CHECK_EQ(num(j1, "data", "errors", NULL), 0);
	CHECK(num(j1, "blockdev", "write", "count") >
	      num(j0, "blockdev", "write", "count"));
	json_decref(j0);
	json_decref(j1);
	fs_stats_remove_fs(st);
	j1 = doc(st);
	CHECK(j1 != NULL && json_object_get(j1, "journal") == NULL &&
	      json_object_get(j1, "blockdev") == NULL);
	json_decref(j1);
	fs_stats_free(st);
	CHECK_EQ(fs_unmount(fs), 0);
	bd_close(bd);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_fs_sections);
	return t_done();
}
