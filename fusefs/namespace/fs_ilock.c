/*
 * fs_ilock.c — the namespace's lock holders (what and the lock order:
 * fs_ilock.h).
 *
 * Each thread keeps a chain of the holders it has open (fs_op_begin
 * pushes, fs_op_end pops): the debug assertions find which inodes the
 * thread holds, and the work left for when no lock is held (orphans,
 * the free log) runs at the end of the outermost one.
 *
 * dlm: each held inode has its glock (FS_LK_INODE/ino) taken first, in
 * PR for a shared hold, EX for an exclusive one; it is released after
 * the local lock. The glock engine keeps the mode cached on this node
 * between holders, so a hold of an inode this node used last costs no
 * message.
 */
#include "fusefs/namespace/fs_ilock.h"

#include "fusefs/cluster/fs_cluster.h"
#include "fusefs/cluster/fs_glock.h"
#include "fusefs/namespace/fs_ns.h"
#include "lockmgr/lk.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static __thread struct fs_ilock *cur; /* innermost open holder */

static int lk_mode_of(int mode)
{
	return mode == FS_IL_EX ? LK_EX : LK_PR;
}

int fs_op_begin(struct fs_ilock *il, struct fs *fs, int cl_mode)
{
	il->fs = fs;
	il->write = cl_mode == LK_EX;
	il->wait = cl_mode != 0;
	il->rename = 0;
	il->rename_gl = NULL;
	il->n = 0;
	if (fs->cl != NULL && il->wait) {
		if (fs_cluster_wait_quorum(fs->cl) < 0)
			return -EIO;
		/* an rgroup of our own before any inode lock (fs_alloc.c) */
		if (il->write && !fs->ro && fs_alloc_reserve(fs) == -EIO)
			return -EIO;
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

/* The inode's glock (dlm) in the mode of @mode; *gl NULL without one.
 * A holder begun with mode 0 (statahead) waits for no other node:
 * -EAGAIN then. */
static int iglock(struct fs_ilock *il, uint64_t ino, int mode,
		  struct fs_glock **gl)
{
	*gl = NULL;
	if (il->fs->cl == NULL)
		return 0;
	return fs_cluster_glock(il->fs->cl, FS_LK_INODE, ino, lk_mode_of(mode),
				il->wait, gl);
}

static void iunglock(struct fs_glock *gl, int mode)
{
	if (gl != NULL)
		fs_cluster_gunlock(gl, lk_mode_of(mode));
}

int fs_ilock_one(struct fs_ilock *il, uint64_t ino, int mode)
{
	struct fs_glock *gl;
	struct fs_inode *n;
	int i = find(il, ino), ret;

	if (i >= 0) {
		if (il->h[i].mode < mode)
			fs_ilock_assert_fail(__FILE__, __LINE__, ino, mode);
		return 0;
	}
	if (il->n == FS_ILOCK_MAX)
		fs_ilock_assert_fail(__FILE__, __LINE__, ino, mode);
	/* the cluster lock before the local one (fs_ilock.h) */
	ret = iglock(il, ino, mode, &gl);
	if (ret < 0)
		return ret;
	n = fs_ino_pin(il->fs, ino);
	if (n == NULL) {
		iunglock(gl, mode);
		return -ENOMEM;
	}
	rw_take(n, mode);
	il->h[il->n].rec = n;
	il->h[il->n].gl = gl;
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

/* The inode this thread's fs_ilock_reap is destroying (0: none): the
 * sub-operation's end finds it an unreferenced orphan again when the
 * destroy failed, and must not try again (that recursed until the stack
 * ran out: clu_recover, a destroy failing with EUCLEAN). */
static __thread uint64_t reaping;

void fs_ilock_reap(struct fs_ilock *il, uint64_t ino)
{
	struct fs_ilock sub;

	if (!il->wait) {
		/* statahead waits for no other node: the next request */
		__atomic_store_n(&il->fs->ns->reap_pending, 1,
				 __ATOMIC_RELEASE);
		return;
	}
	if (reaping == ino || fs_op_begin(&sub, il->fs, LK_PR) < 0)
		return;
	reaping = ino;
	if (fs_ilock_one(&sub, ino, FS_IL_EX) == 0)
		/* one try: a failed destroy stays on the orphan list */
		fs_ino_maybe_destroy(il->fs, ino);
	fs_op_end(&sub);
	reaping = 0;
}

void fs_iunlock_one(struct fs_ilock *il, uint64_t ino)
{
	int i = find(il, ino);
	struct fs_inode *n;
	struct fs_glock *gl;
	int mode;

	if (i < 0)
		return;
	n = il->h[i].rec;
	gl = il->h[i].gl;
	mode = il->h[i].mode;
	il->h[i] = il->h[--il->n];
	if (release(il->fs, n)) {
		iunglock(gl, mode);
		fs_ilock_reap(il, ino);
		return;
	}
	iunglock(gl, mode);
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
	int sd_above, dd_above;

	if (sd == dd)
		return fs_ilock_one(il, sd, FS_IL_EX);
	if (il->fs->cl != NULL) {
		int ret = fs_cluster_glock(il->fs->cl, FS_LK_RENAME, 0, LK_EX,
					   1, &il->rename_gl);

		if (ret < 0)
			return ret;
	}
	pthread_mutex_lock(&il->fs->ns->rename_mu);
	il->rename = 1;
	/* both chains walked (under their glocks: fresh), so that the
	 * rename's later checks may read them from the cache */
	sd_above = is_anc(il->fs, sd, dd);
	dd_above = is_anc(il->fs, dd, sd);
	if (sd_above)
		return fs_ilock_pair(il, sd, FS_IL_EX, dd, FS_IL_EX);
	if (dd_above)
		return fs_ilock_pair(il, dd, FS_IL_EX, sd, FS_IL_EX);
	return fs_ilock_peers(il, sd, dd, FS_IL_EX);
}

int fs_ilock_ahead(struct fs *fs, const uint64_t *inos, unsigned n,
		   uint8_t *held)
{
	int ret;

	if (fs->cl == NULL) {
		memset(held, 1, n);
		return 0;
	}
	if (n == 0)
		return 0;
	ret = fs_glocks_prefetch(fs_cluster_glocks(fs->cl), FS_LK_INODE, inos,
				 n, LK_PR, held);
	if (ret == -EIO)
		fs_cluster_fence(fs->cl, "lock manager refused a lock");
	return ret < 0 ? ret : 0;
}

int fs_ipeek_begin(struct fs *fs, uint64_t ino, struct fs_glock **gl)
{
	*gl = NULL;
	if (fs->cl == NULL)
		return 0;
	return fs_cluster_glock(fs->cl, FS_LK_INODE, ino, LK_PR, 1, gl);
}

void fs_ipeek_end(struct fs_glock *gl)
{
	if (gl != NULL)
		fs_cluster_gunlock(gl, LK_PR);
}

/* The glocks of fs_irefc_lock, back. */
static void irefc_drop(struct fs_irefc *h)
{
	for (int i = 1; i >= 0; i--) {
		if (h->gl[i] != NULL)
			fs_cluster_gunlock(h->gl[i], LK_EX);
		h->gl[i] = NULL;
	}
}

int fs_irefc_lock(struct fs *fs, uint64_t r1, uint64_t r2, struct fs_irefc *h)
{
	uint64_t r[2] = {r1 < r2 ? r1 : r2, r1 < r2 ? r2 : r1};

	h->gl[0] = h->gl[1] = NULL;
	for (int i = 0; i < 2 && fs->cl != NULL; i++) {
		if (r[i] == 0 || (i == 1 && r[1] == r[0]))
			continue;
		if (fs_cluster_glock(fs->cl, FS_LK_INODE, r[i], LK_EX, 1,
				     &h->gl[i]) < 0) {
			irefc_drop(h);
			return -EIO;
		}
	}
	pthread_mutex_lock(&fs->ns->refc_lock);
	return 0;
}

void fs_irefc_new(struct fs *fs, const struct fs_irefc *h, uint64_t r)
{
	struct fs_glock *gl;

	if (fs->cl == NULL || r == 0)
		return;
	for (int i = 0; i < 2; i++)
		if (h->gl[i] != NULL && fs_glock_num(h->gl[i]) == r)
			return;
	if (fs_cluster_glock(fs->cl, FS_LK_INODE, r, LK_EX, 1, &gl) == 0)
		fs_cluster_gunlock(gl, LK_EX);
}

void fs_irefc_unlock(struct fs *fs, struct fs_irefc *h)
{
	pthread_mutex_unlock(&fs->ns->refc_lock);
	irefc_drop(h);
}

void fs_op_end(struct fs_ilock *il)
{
	uint64_t unref[FS_ILOCK_MAX];
	unsigned nu = 0;

	/* reverse order of taking; each local lock before its glock */
	while (il->n > 0) {
		unsigned i = --il->n;
		struct fs_inode *n = il->h[i].rec;
		uint64_t ino = n->ino;

		if (release(il->fs, n))
			unref[nu++] = ino;
		iunglock(il->h[i].gl, il->h[i].mode);
	}
	if (il->rename)
		pthread_mutex_unlock(&il->fs->ns->rename_mu);
	il->rename = 0;
	if (il->rename_gl != NULL)
		fs_cluster_gunlock(il->rename_gl, LK_EX);
	il->rename_gl = NULL;
	for (unsigned i = 0; i < nu; i++)
		fs_ilock_reap(il, unref[i]);
	cur = il->outer;
	if (il->wait && il->outer == NULL) {
		/* no lock is held any more: orphans statahead left, and
		 * frees logged for other nodes' rgroups (fs_alloc.c) */
		fs_reap_orphans(il->fs);
		if (il->write && il->fs->cl != NULL)
			fs_alloc_flog_kick(il->fs);
	}
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
