/*
 * fs_testutil.h — helpers for the namespace unit tests (test_dir.c,
 * test_file.c, test_vfs.c): a freshly formatted filesystem on a RAM
 * device, mounted through fs.h, and small wrappers that keep tests short.
 */
#ifndef UCFS_FS_TESTUTIL_H
#define UCFS_FS_TESTUTIL_H

#include "blockdev/bd.h"
#include "fusefs/fs.h"
#include "fusefs/core/fs_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tfs {
	struct bd_dev *bd;
	struct fs *fs;
	uint64_t root;
	struct fs_cred root_cred;
};

/* Format a RAM device of @mb MiB (journal 4 MiB, rgroups 16 MiB). */
static inline int tfs_format(struct tfs *t, unsigned mb)
{
	struct fs_mkfs_params p;
	char why[256] = "";
	int ret;

	memset(t, 0, sizeof(*t));
	t->root_cred.flags = FS_CRED_FSETID;	/* root, as from FUSE */
	ret = bd_ram_open((uint64_t)mb << 20, &t->bd);
	if (ret < 0)
		return ret;
	fs_mkfs_defaults(&p);
	p.journal_mb = 4;
	p.rgrp_mb = 16;
	p.now = 1700000000;
	ret = fs_mkfs(t->bd, &p, why, sizeof(why));
	if (ret < 0)
		fprintf(stderr, "mkfs: %d %s\n", ret, why);
	return ret;
}

/* Mount with @o (NULL: defaults, cache_mb=8). */
static inline int tfs_mount_opts(struct tfs *t, const struct fs_opts *o)
{
	struct fs_opts def;
	char err[256] = "";
	int ret;

	if (o == NULL) {
		fs_opts_init(&def);
		def.cache_mb = 8;
		o = &def;
	}
	ret = fs_mount_bd(t->bd, o, &t->fs, err, sizeof(err));
	if (ret < 0) {
		fprintf(stderr, "mount: %d %s\n", ret, err);
		return ret;
	}
	t->root = fs_root(t->fs);
	return 0;
}

static inline int tfs_mount(struct tfs *t)
{
	return tfs_mount_opts(t, NULL);
}

/* Format + mount; 0 or -errno. */
static inline int tfs_open(struct tfs *t, unsigned mb)
{
	int ret = tfs_format(t, mb);

	return ret < 0 ? ret : tfs_mount(t);
}

static inline int tfs_remount(struct tfs *t)
{
	int ret = fs_unmount(t->fs);

	t->fs = NULL;
	if (ret < 0)
		return ret;
	return tfs_mount(t);
}

static inline void tfs_close(struct tfs *t)
{
	if (t->fs != NULL)
		fs_unmount(t->fs);
	bd_close(t->bd);
	t->fs = NULL;
	t->bd = NULL;
}

static inline const struct fs_cred *tfs_cred(struct tfs *t)
{
	return &t->root_cred;
}

/* Create a regular file; its ino or -errno. (Drops the open.) */
static inline int64_t tfs_creat(struct tfs *t, uint64_t dir,
				const char *name, mode_t mode)
{
	struct fs_attr a;
	int ret = fs_create(t->fs, &t->root_cred, dir, name, mode, 0, &a);

	if (ret < 0)
		return ret;
	fs_release(t->fs, a.ino);
	return (int64_t)a.ino;
}

static inline int64_t tfs_mkdir(struct tfs *t, uint64_t dir,
				const char *name)
{
	struct fs_attr a;
	int ret = fs_mkdir(t->fs, &t->root_cred, dir, name, 0755, &a);

	return ret < 0 ? ret : (int64_t)a.ino;
}

/* ino of @name in @dir or -errno */
static inline int64_t tfs_lookup(struct tfs *t, uint64_t dir,
				 const char *name)
{
	struct fs_attr a;
	int ret = fs_lookup(t->fs, dir, name, &a);

	return ret < 0 ? ret : (int64_t)a.ino;
}

static inline struct fs_attr tfs_stat(struct tfs *t, uint64_t ino)
{
	struct fs_attr a;

	memset(&a, 0, sizeof(a));
	if (fs_getattr(t->fs, ino, &a) < 0)
		a.mode = 0;
	return a;
}

/* xorshift64* for reproducible random tests */
static inline uint64_t trand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

#endif /* UCFS_FS_TESTUTIL_H */
