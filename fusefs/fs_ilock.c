/*
 * fs_ilock.c — the namespace's lock holders (what and the lock order:
 * fs_ilock.h).
 *
 * Each thread keeps a chain of the holders it has open (fs_op_begin
 * pushes, fs_op_end pops): an inner operation (fs_copy_file_range's
 * reads and writes) finds the glock already held by an outer one, and
 * the debug assertions find which inodes the thread holds.
 */
#include "fusefs/fs_ilock.h"

#include "fusefs/fs_cluster.h"
#include "fusefs/fs_ns.h"
#include "lockmgr/lk.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static __thread struct fs_ilock *cur; /* innermost open holder */

/* The glock mode an outer holder of this thread has on @fs (0: none). */
static int outer_mode(struct fs *fs)
{
	for (struct fs_ilock *o = cur; o != NULL; o = o->outer)
		if (o->fs == fs && o->cl_eff != 0)
			return o->cl_eff;
	return 0;
}

int fs_op_begin(struct fs_ilock *il, struct fs *fs, int cl_mode)
{
	int held;

	il->fs = fs;
	il->cl_mode = il->cl_eff = il->rename = 0;
	il->n = 0;
	if (fs->cl != NULL && cl_mode != 0) {
		held = outer_mode(fs);
		if (held == 0) {
			if (fs_cluster_lock(fs->cl, cl_mode) < 0)
				return -EIO;
			il->cl_mode = cl_mode;
			held = cl_mode;
		} else if (held != LK_EX && cl_mode == LK_EX) {
			/* PR cannot grow to EX in place: a caller bug */
			fs_ilock_assert_fail(__FILE__, __LINE__, 0, cl_mode);
		}
		il->cl_eff = held;
	}
	il->outer = cur;
	cur = il;
	return 0;
}

static int find(const struct fs_ilock *il, uint64_t ino)
{
	for (unsigned i = 0; i < il->n; i++)
		if (il->h[i].rec->ino == ino)
			return (int)i;
	return -1;
}

struct fs_inode *fs_ilock_rec(const struct fs_ilock *il, uint64_t ino)
{
	int i = find(il, ino);

	return i < 0 ? NULL : il->h[i].rec;
}

static void rw_take(struct fs_inode *n, int mode)
{
	if (mode == FS_IL_EX)
		pthread_rwlock_wrlock(&n->lock);
	else
		pthread_rwlock_rdlock(&n->lock);
}

int fs_ilock_one(struct fs_ilock *il, uint64_t ino, int mode)
{
	struct fs_inode *n;
	int i = find(il, ino);

	if (i >= 0) {
		if (il->h[i].mode < mode)
			fs_ilock_assert_fail(__FILE__, __LINE__, ino, mode);
		return 0;
	}
	if (il->n == FS_ILOCK_MAX)
		fs_ilock_assert_fail(__FILE__, __LINE__, ino, mode);
	n = fs_ino_pin(il->fs, ino);
	if (n == NULL)
		return -ENOMEM;
	rw_take(n, mode);
	il->h[il->n].rec = n;
	il->h[il->n].mode = mode;
	il->n++;
	return 0;
}

/* Unlock and unpin @n; 1 if it is now an unreferenced orphan. */
static int release(struct fs *fs, struct fs_inode *n)
{
	pthread_rwlock_unlock(&n->lock);
	return fs_ino_unpin(fs, n);
}

void fs_ilock_reap(struct fs_ilock *il, uint64_t ino)
{
	struct fs_ilock sub;

	if (il->cl_eff == LK_PR) {
		__atomic_store_n(&il->fs->ns->reap_pending, 1,
				 __ATOMIC_RELEASE);
		return;
	}
	fs_op_begin(&sub, il->fs, 0); /* the glock, if any, is il's */
	if (fs_ilock_one(&sub, ino, FS_IL_EX) == 0) {
		fs_ino_maybe_destroy(il->fs, ino);
		/* one try: a failed destroy stays on the orphan list */
		release(il->fs, sub.h[0].rec);
		sub.n = 0;
	}
	fs_op_end(&sub);
}

void fs_iunlock_one(struct fs_ilock *il, uint64_t ino)
{
	int i = find(il, ino);
	struct fs_inode *n;

	if (i < 0)
		return;
	n = il->h[i].rec;
	il->h[i] = il->h[--il->n];
	if (release(il->fs, n))
		fs_ilock_reap(il, ino);
}

int fs_ilock_pair(struct fs_ilock *il, uint64_t parent, int pmode,
		  uint64_t child, int cmode)
{
	int ret = 0;

	if (parent != 0)
		ret = fs_ilock_one(il, parent, pmode);
	if (ret == 0 && child != 0)
		ret = fs_ilock_one(il, child, cmode);
	return ret;
}

int fs_ilock_peers(struct fs_ilock *il, uint64_t a, uint64_t b, int mode)
{
	if (a > b) {
		uint64_t t = a;

		a = b;
		b = t;
	}
	return fs_ilock_pair(il, a, mode, b == a ? 0 : b, mode);
}

int fs_ilock_rename(struct fs_ilock *il, uint64_t sd, uint64_t dd,
		    int (*is_anc)(struct fs *fs, uint64_t a, uint64_t b))
{
	if (sd == dd)
		return fs_ilock_one(il, sd, FS_IL_EX);
	pthread_mutex_lock(&il->fs->ns->rename_mu);
	il->rename = 1;
	if (is_anc(il->fs, sd, dd))
		return fs_ilock_pair(il, sd, FS_IL_EX, dd, FS_IL_EX);
	if (is_anc(il->fs, dd, sd))
		return fs_ilock_pair(il, dd, FS_IL_EX, sd, FS_IL_EX);
	return fs_ilock_peers(il, sd, dd, FS_IL_EX);
}

void fs_op_end(struct fs_ilock *il)
{
	uint64_t unref[FS_ILOCK_MAX];
	unsigned nu = 0;

	/* reverse order of taking */
	while (il->n > 0) {
		struct fs_inode *n = il->h[--il->n].rec;
		uint64_t ino = n->ino;

		if (release(il->fs, n))
			unref[nu++] = ino;
	}
	if (il->rename)
		pthread_mutex_unlock(&il->fs->ns->rename_mu);
	il->rename = 0;
	for (unsigned i = 0; i < nu; i++)
		fs_ilock_reap(il, unref[i]);
	/* dlm: orphans left by PR requests go with the next EX one */
	if (il->cl_mode == LK_EX)
		fs_reap_orphans(il->fs);
	cur = il->outer;
	if (il->cl_mode != 0)
		fs_cluster_unlock(il->fs->cl, il->cl_mode);
}

int fs_ilock_held(struct fs *fs, uint64_t ino, int mode)
{
	for (struct fs_ilock *o = cur; o != NULL; o = o->outer) {
		int i;

		if (o->fs != fs)
			continue;
		i = find(o, ino);
		if (i >= 0 && o->h[i].mode >= mode)
			return 1;
	}
	return 0;
}

void fs_ilock_assert_fail(const char *file, int line, uint64_t ino, int mode)
{
	fprintf(stderr, "%s:%d: lock rule broken: inode %llu not held %s\n",
		file, line, (unsigned long long)ino,
		mode == FS_IL_EX ? "exclusive" : "shared");
	abort();
}
