/*
 * fs_vfs.c — the namespace API of fs.h: mount glue, lookup, attributes,
 * readdir, statfs and xattrs. fs_vfs_names.c holds the operations that
 * change names (create, remove, link, rename), fs_vfs_io.c those on an
 * open file's data (open, read, write, fsync, fallocate, clone, lseek),
 * fs_vfs.h what the three share. Every operation is locking + checks +
 * one transaction over the inode, directory, file and xattr modules.
 *
 * Each operation takes its own locks through a holder (fs_ilock.h): the
 * locks of the inodes it touches (dlm: each its cluster glock first),
 * shared to read, exclusive to change; parent before child, others by
 * number; all before any transaction. It reads the inode
 * blocks it needs from the core cache, checks everything that can fail
 * before it starts a transaction where possible, and puts the buffers
 * back. Inodes whose last link goes
 * are put on the orphan list in the same transaction and destroyed once
 * unreferenced (fs_inode.c).
 *
 * ENOSPC: blocks freed by a transaction become allocatable only after it
 * commits, so an operation that hits ENOSPC while frees are pending
 * commits the journal and tries again; dlm: an allocation that found
 * space only in rgroups other nodes hold makes the operation take one
 * (waiting) and try again (need_nospc_retry; safe: the operation holds
 * inode locks but no handle, and no thread that holds a handle waits
 * for an inode lock or a glock).
 */
#include "fusefs/cluster/fs_cluster.h"
#include "fusefs/cluster/fs_iopen.h"
#include "fusefs/namespace/fs_statahead.h"
#include "fusefs/namespace/fs_vfs.h"
#include "lockmgr/cv_wait.h"
#include "lockmgr/lk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int is_dot_ent(const struct fs_dirent *de)
{
	return de->namelen <= 2 && de->name[0] == '.' &&
	       (de->namelen == 1 || de->name[1] == '.');
}

/* Read directory @ino; -ENOTDIR, -ENOENT if it was removed. */
int fs_vfs_dir_read(struct fs *fs, uint64_t ino, struct fs_buf **out)
{
	struct fs_buf *b;
	int ret;

	ret = fs_ino_read(fs, ino, &b);
	if (ret < 0)
		return ret;
	if (!S_ISDIR(fs_di(b)->mode)) {
		fs_buf_put(b);
		return -ENOTDIR;
	}
	if (fs_di(b)->nlink == 0) {
		fs_buf_put(b);
		return -ENOENT;
	}
	*out = b;
	return 0;
}

/* Orphans whose last reference went in a holder that may not wait for
 * a lock (statahead) are freed here, by the next request (fs_op_end). */
void fs_reap_orphans(struct fs *fs)
{
	struct fs_ilock il;
	uint64_t *ino;
	size_t n = 0, cap = 0;

	if (fs->ro || !__atomic_exchange_n(&fs->ns->reap_pending, 0,
					  __ATOMIC_ACQ_REL))
		return;
	if (fs_op_begin(&il, fs, LK_EX) < 0)
		return;
	pthread_mutex_lock(&fs->ns->orphan_lock);
	for (struct fs_inode *o = fs->ns->orphans; o != NULL; o = o->onext)
		cap++;
	/* a destroy unlinks from the list: collect first */
	ino = malloc((cap + 1) * sizeof(*ino));
	for (struct fs_inode *o = fs->ns->orphans; ino != NULL && o != NULL;
	     o = o->onext)
		ino[n++] = o->ino;
	pthread_mutex_unlock(&fs->ns->orphan_lock);
	if (ino == NULL)
		__atomic_store_n(&fs->ns->reap_pending, 1, __ATOMIC_RELEASE);
	for (size_t i = 0; i < n; i++) {
		if (fs_ilock_one(&il, ino[i], FS_IL_EX) < 0)
			continue;
		fs_ino_maybe_destroy(fs, ino[i]);
		fs_iunlock_one(&il, ino[i]);
	}
	free(ino);
	fs_op_end(&il);
}

/* ---- mount ---- */

static void core_opts(const struct fs_opts *o, struct fs_core_opts *co)
{
	fs_core_opts_init(co);
	co->ro = o->ro;
	co->nolock = o->lockproto == FS_LOCK_NOLOCK;
	co->data_writeback = o->data == FS_DATA_WRITEBACK;
	co->commit_s = o->commit_s;
	co->statfs_quantum_s = o->statfs_quantum_s;
	co->statfs_percent = o->statfs_percent;
	co->statfs_slow = o->statfs_slow;
	co->cache_mb = o->cache_mb;
	if (co->nolock && o->nolock_slot != 0)
		co->slot = (int)o->nolock_slot;
}

static int ns_attach(struct fs *fs, const struct fs_opts *o, char *err,
		     size_t errlen)
{
	struct fs_buf *b;
	int ret;

	ret = fs_ns_init(fs, o);
	if (ret < 0)
		return ret;
	ret = fs_vfs_dir_read(fs, fs->ns->root, &b);
	if (ret < 0) {
		snprintf(err, errlen, "root directory inode %llu is bad (%s)",
			 (unsigned long long)fs->ns->root, strerror(-ret));
		goto out_free;
	}
	fs_buf_put(b);
	if (!o->ro) {
		ret = fs_iopen_start(fs);
		if (ret < 0) {
			snprintf(err, errlen, "cannot start the iopen worker "
				 "(%s)", strerror(-ret));
			goto out_free;
		}
		ret = fs_ino_reclaim_orphans(fs);
		if (ret < 0) {
			snprintf(err, errlen, "orphan list reclaim failed (%s)",
				 strerror(-ret));
			goto out_free;
		}
		ret = fs_flog_start(fs);
		if (ret < 0) {
			snprintf(err, errlen, "cannot start the free log "
				 "worker (%s)", strerror(-ret));
			goto out_free;
		}
	}
	return 0;

out_free:
	fs_flog_stop(fs);
	fs_iopen_stop(fs);
	fs_ns_free(fs);
	return ret < 0 ? ret : -EUCLEAN;
}

static int mount_common(struct fs *fs, const struct fs_opts *o,
			struct fs **out, char *err, size_t errlen)
{
	int ret = ns_attach(fs, o, err, errlen);

	if (ret < 0) {
		fs_core_unmount(fs);	/* dlm: we still hold EX */
		return ret;
	}
	if (fs->cl != NULL && fs->cl_held) {
		/* mounted: the mount lock goes (requests never take it) */
		fs->cl_held = 0;
		fs_cluster_unlock(fs->cl, LK_EX);
	}
	*out = fs;
	return 0;
}

/* The options of lockproto=dlm, or their absence for nolock. */
static int check_proto(const struct fs_opts *o, char *err, size_t errlen)
{
	if (o->lockproto == FS_LOCK_NOLOCK) {
		if (o->cluster[0] == '\0' && o->node_id == 0 &&
		    o->hb_interval_ms == 0 && o->hb_timeout_ms == 0)
			return 0;
		snprintf(err, errlen, "cluster=, node=, hb_interval= and "
			 "hb_timeout= need lockproto=dlm");
		return -EINVAL;
	}
	if (o->cluster[0] == '\0' || o->node_id == 0) {
		snprintf(err, errlen, "lockproto=dlm needs cluster=FILE (the "
			 "cluster configuration) and node=ID");
		return -EINVAL;
	}
	if (o->writeback_cache) {
		snprintf(err, errlen, "lockproto=dlm does not allow "
			 "writeback_cache (the kernel must not cache data)");
		return -EINVAL;
	}
	return 0;
}

static int cluster_open(const struct fs_opts *o, const char *path,
			struct bd_dev *bd, struct fs_core_opts *co, char *err,
			size_t errlen)
{
	struct fs_cluster_opts cop = {
	    .cluster_file = o->cluster,
	    .node_id = o->node_id,
	    .minhold_ms = o->minhold_ms < 0 ? FS_DEFAULT_MINHOLD_MS
					    : (unsigned)o->minhold_ms,
	    .glock_max = o->glock_max < 0 ? 0 : (unsigned)o->glock_max,
	    .device = path,
	    .bd = bd,
	    .hb_interval_ms = o->hb_interval_ms,
	    .hb_timeout_ms = o->hb_timeout_ms,
	    .records_timeout_s = o->records_timeout_s,
	    .ro = o->ro,
	};

	return fs_cluster_open(&cop, &co->cl, err, errlen);
}

/* Mount the image at @path (opened and owned here) or, with @path NULL,
 * the caller's open device @bd. */
static int mount_any(const char *path, struct bd_dev *bd,
		     const struct fs_opts *o, struct fs **out, char *err,
		     size_t errlen)
{
	struct fs_core_opts co;
	char dummy[8];
	struct fs *fs;
	int ret;

	if (err == NULL) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	ret = check_proto(o, err, errlen);
	if (ret < 0)
		return ret;
	core_opts(o, &co);
	if (o->lockproto == FS_LOCK_DLM) {
		co.node_id = o->node_id;
		ret = cluster_open(o, path, bd, &co, err, errlen);
		if (ret < 0)
			return ret;
	}
	if (path != NULL)
		ret = fs_core_open(path, &co, &fs, err, errlen);
	else
		ret = fs_core_mount(bd, &co, &fs, err, errlen);
	if (ret < 0) {
		fs_cluster_close(co.cl);	/* not the mount's yet */
		return ret;
	}
	return mount_common(fs, o, out, err, errlen);
}

int fs_mount(const char *path, const struct fs_opts *o, struct fs **out,
	     char *err, size_t errlen)
{
	return mount_any(path, NULL, o, out, err, errlen);
}

int fs_mount_bd(struct bd_dev *bd, const struct fs_opts *o, struct fs **out,
		char *err, size_t errlen)
{
	return mount_any(NULL, bd, o, out, err, errlen);
}

int fs_unmount(struct fs *fs)
{
	int ret = 0, r2;

	if (fs == NULL)
		return 0;
	/* no queued iopen request or adoption from here on, and no apply
	 * of the free log but the one below */
	fs_iopen_stop(fs);
	fs_flog_stop(fs);
	/* dlm: EX until fs_core_unmount closed the cluster membership;
	 * fenced: fails, and fs_core_unmount then writes nothing */
	if (fs->cl != NULL)
		ret = fs_cluster_lock(fs->cl, LK_EX);
	/* no operation runs any more: no inode locks */
	if (!fs->ro && ret == 0)
		ret = fs_ino_release_all(fs);
	/* dlm: frees logged for rgroups other nodes owned, applied */
	if (!fs->ro && ret == 0 && fs->cl != NULL)
		ret = fs_alloc_flog_apply(fs, 1);
	fs_ns_free(fs);
	r2 = fs_core_unmount(fs);
	return ret < 0 ? ret : r2;
}

void fs_abandon(struct fs *fs)
{
	if (fs == NULL)
		return;
	fs_iopen_stop(fs);
	fs_flog_stop(fs);
	fs_ns_free(fs);
	fs_core_abandon(fs);
}

uint64_t fs_root(const struct fs *fs)
{
	return fs->sb.root_ino;
}

/* ---- lookup, getattr, setattr ---- */

/* In held directory @d: the inode @name names. */
static int lookup_in(struct fs *fs, struct fs_buf *d, const char *name,
		     uint64_t *ino)
{
	if (strcmp(name, ".") == 0) {
		*ino = d->blkno;
		return 0;
	}
	if (strcmp(name, "..") == 0) {
		*ino = fs_di(d)->parent ? fs_di(d)->parent : d->blkno;
		return 0;
	}
	return fs_dir_lookup(fs, d, name, strlen(name), ino, NULL, NULL);
}

int fs_lookup(struct fs *fs, uint64_t parent, const char *name,
	      struct fs_attr *out)
{
	struct fs_ilock il;
	struct fs_buf *d, *b;
	uint64_t ino;
	int ret;

	ret = check_name(name);
	if (ret < 0)
		return ret;
	OP_BEGIN(&il, fs, LK_PR);
	ret = fs_ilock_one(&il, parent, FS_IL_SH);
	if (ret == 0)
		ret = fs_vfs_dir_read(fs, parent, &d);
	if (ret < 0)
		goto out;
	ret = lookup_in(fs, d, name, &ino);
	fs_buf_put(d);
	/* "..": never a child's lock before its parent's */
	if (ret == 0 && ino != parent && strcmp(name, "..") == 0)
		fs_iunlock_one(&il, parent);
	if (ret == 0)
		ret = fs_vfs_lock_read(&il, fs, ino, FS_IL_SH, &b);
	if (ret < 0)
		goto out;
	fs_ino_attr(fs_di(b), out);
	fs_buf_put(b);
	fs_ino_get_lookup(fs, ino);
out:
	fs_op_end(&il);
	return ret;
}

void fs_forget(struct fs *fs, uint64_t ino, uint64_t n)
{
	struct fs_ilock il;

	if (fs_op_begin(&il, fs, LK_PR) < 0)
		return;
	if (fs_ino_put(fs, ino, n, 0))
		fs_ilock_reap(&il, ino);
	fs_op_end(&il);
}

void fs_forget_batch(struct fs *fs, int on)
{
	(void)fs; /* one mount per request thread: fs_iopen_put_batch */
	fs_iopen_put_batch(on);
}

int fs_getattr(struct fs *fs, uint64_t ino, struct fs_attr *out)
{
	struct fs_ilock il;
	struct fs_buf *b;
	int ret;

	OP_BEGIN(&il, fs, LK_PR);
	ret = fs_vfs_lock_read(&il, fs, ino, FS_IL_SH, &b);
	if (ret == 0) {
		fs_ino_attr(fs_di(b), out);
		fs_buf_put(b);
	}
	fs_op_end(&il);
	return ret;
}

static void set_time(int64_t *sec, uint32_t *nsec, const struct timespec *t)
{
	*sec = t->tv_sec;
	*nsec = (uint32_t)t->tv_nsec;
}

/* Everything but the size, in one transaction. */
static int setattr_tx(struct fs *fs, const struct fs_cred *cred,
		      struct fs_buf *b, const struct fs_attr *a,
		      unsigned valid)
{
	struct fs_dinode *di = fs_di(b);
	struct timespec now;
	struct fs_tx *tx;
	int ret;

	ret = fs_tx_begin(fs, 1, &tx);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, b);
	if (ret < 0)
		goto out;
	fs_now(&now);
	if (valid & FS_SET_MODE)
		di->mode = (di->mode & S_IFMT) | (a->mode & 07777);
	if (valid & FS_SET_UID)
		di->uid = a->uid;
	if (valid & FS_SET_GID)
		di->gid = a->gid;
	if ((valid & (FS_SET_UID | FS_SET_GID)) && !(valid & FS_SET_MODE) &&
	    !S_ISDIR(di->mode))
		kill_priv(di);	/* chown(2) clears them, as on Linux */
	if (valid & FS_SET_KILL_PRIV)
		kill_priv(di);
	if (valid & FS_SET_ATIME)
		set_time(&di->atime, &di->atime_nsec, &a->atime);
	if (valid & FS_SET_ATIME_NOW)
		set_time(&di->atime, &di->atime_nsec, &now);
	if (valid & FS_SET_MTIME)
		set_time(&di->mtime, &di->mtime_nsec, &a->mtime);
	if (valid & FS_SET_MTIME_NOW)
		set_time(&di->mtime, &di->mtime_nsec, &now);
	if (valid & FS_SET_CTIME)
		set_time(&di->ctime, &di->ctime_nsec, &a->ctime);
	else
		set_time(&di->ctime, &di->ctime_nsec, &now);
	(void)cred;
out:
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	return ret;
}

/* Truncate regular file @b to @size (its lock exclusive). */
static int setattr_size(struct fs *fs, struct fs_inode *n, struct fs_buf *b,
			uint64_t size)
{
	struct fs_irefc rh;
	int ret, g;

	if (S_ISDIR(fs_di(b)->mode))
		return -EISDIR;
	if (!S_ISREG(fs_di(b)->mode))
		return -EINVAL;
	g = refc_guard(fs, b, &rh);
	if (g < 0)
		return g;
	ret = fs_file_truncate(fs, n, b, size);
	for (int t = 0; t < NOSPC_TRIES && need_nospc_retry(fs, ret); t++)
		ret = fs_file_truncate(fs, n, b, size);
	refc_unguard(fs, g, &rh);
	return ret;
}

int fs_setattr(struct fs *fs, const struct fs_cred *cred, uint64_t ino,
	       const struct fs_attr *attr, unsigned valid,
	       struct fs_attr *out)
{
	struct fs_ilock il;
	struct fs_buf *b;
	int ret;

	OP_BEGIN(&il, fs, LK_EX);
	ret = fs_vfs_lock_read(&il, fs, ino, FS_IL_EX, &b);
	if (ret < 0)
		goto out;
	if (valid & FS_SET_SIZE)
		ret = setattr_size(fs, fs_ilock_rec(&il, ino), b, attr->size);
	if (ret == 0 && (valid & ~(unsigned)FS_SET_SIZE))
		ret = setattr_tx(fs, cred, b, attr, valid);
	if (ret == 0 && (valid & (FS_SET_SIZE | FS_SET_UID | FS_SET_GID)))
		ret = drop_caps(fs, b);
	if (ret == 0 && (valid & FS_SET_MODE))
		ret = fs_xattr_acl_chmod(fs, b);
	if (ret == 0)
		fs_ino_attr(fs_di(b), out);
	fs_buf_put(b);
out:
	fs_op_end(&il);
	return ret;
}

/* ---- readdir ---- */

struct rd {
	struct fs *fs;
	struct fs_ilock *il;
	uint64_t dir;
	unsigned flags;
	uint64_t now_ms; /* FS_READDIR_PLUS: cvw_now_ms at the start */
	fs_filldir_fn fill;
	void *arg;
	struct fs_sa *sa;
	int err;
};

/* readdirplus: the attributes of one child, under its lock (shared, a
 * child after its parent), held on success (readdir_cb releases it
 * before the next). */
static int child_attr(struct rd *r, uint64_t ino, struct fs_attr *a)
{
	struct fs_buf *b;
	int ret;

	if (ino == r->dir) /* a damaged entry naming the directory */
		return -EUCLEAN;
	ret = fs_ilock_one(r->il, ino, FS_IL_SH);
	if (ret == 0)
		ret = fs_ino_read(r->fs, ino, &b);
	if (ret == 0) {
		fs_ino_attr(fs_di(b), a);
		fs_buf_put(b);
	} else {
		fs_iunlock_one(r->il, ino);
	}
	return ret;
}

/*
 * FS_READDIR_BARE: the entry goes without attributes (FUSE nodeid 0) when
 * the kernel holds its inode and a readdirplus entry gave it the
 * attributes less than FS_LISTED_FRESH_MS ago: rm -rf reads every
 * directory twice in a row (coreutils' is_empty_dir reads one getdents,
 * then fts reads it all), and the kernel completes its listing cache
 * only at the end, so the second open's READDIRPLUS from offset 0 comes
 * here again for entries the first one just handed out.
 *
 * The kernel does nothing for a nodeid 0 entry (fuse_direntplus_link,
 * Linux 6.1 and later) but hand its name, ino and type to getdents: no
 * dentry lookup, attribute update or lookup count. That is safe, since
 * readdirplus is not what keeps the kernel's copies true: on a cluster
 * mount the inode's lock is (its attributes and, for a directory, the
 * names it holds are dropped before the lock leaves this node:
 * fs_kinval.c, fs_inval.c), on a nolock mount every change passes
 * through this kernel. A dentry the kernel lacks (pruned, a second hard
 * link, one a lost lock dropped) costs one LOOKUP when it is used, and
 * attributes the kernel dropped since (a write, another node's change)
 * one GETATTR: the bound keeps that to entries handed out in the last
 * second, so a directory read again after writes (untar, then du: a
 * write drops the file's size and blocks in the kernel) still
 * refreshes the attributes.
 */
static int readdir_bare(struct rd *r, const struct fs_dirent *de)
{
	return (r->flags & FS_READDIR_BARE) &&
	       fs_ino_listed_fresh(r->fs, de->ino, r->now_ms);
}

static int bare_fill(struct rd *r, const struct fs_dirent *de)
{
	if (r->fill(r->arg, de, NULL))
		return 1;
	FS_NS_STAT_ADD(r->fs, readdir_bare, 1);
	return 0;
}

static int readdir_cb(void *arg, const struct fs_dirent *de)
{
	struct rd *r = arg;
	struct fs_attr a;
	int full;

	fs_sa_pass(r->sa, de);
	if (!(r->flags & FS_READDIR_PLUS) || is_dot_ent(de))
		return r->fill(r->arg, de, NULL);
	if (readdir_bare(r, de))
		return bare_fill(r, de);
	r->err = child_attr(r, de->ino, &a);
	if (r->err < 0)
		return 1;
	/* the kernel's reference (and the glock's pin, fs_glock_pin) is
	 * taken under the child's lock: its glock cannot be dropped for
	 * the bound in between, under the entry handed out */
	full = r->fill(r->arg, de, &a);
	if (!full)
		fs_ino_get_listed(r->fs, de->ino, r->now_ms);
	fs_iunlock_one(r->il, de->ino);
	return full;
}

/*
 * Statahead (fs_statahead.c) reads the inode blocks of the entries ahead
 * of this loop in batches, so that readdirplus here, or the stats that
 * follow a plain readdir, find them cached or in flight.
 */
int fs_readdir(struct fs *fs, uint64_t dir, uint64_t cookie, unsigned flags,
	       fs_filldir_fn fill, void *arg)
{
	struct fs_sa sa;
	struct fs_ilock il;
	struct rd r = {.fs = fs,
		       .il = &il,
		       .dir = dir,
		       .flags = flags,
		       .now_ms = flags & FS_READDIR_PLUS ? cvw_now_ms() : 0,
		       .fill = fill,
		       .arg = arg,
		       .sa = &sa};
	struct fs_buf *d;
	int ret;

	OP_BEGIN(&il, fs, LK_PR);
	ret = fs_vfs_lock_read(&il, fs, dir, FS_IL_SH, &d);
	if (ret == 0) {
		if (!S_ISDIR(fs_di(d)->mode)) {
			ret = -ENOTDIR;
		} else {
			fs_sa_begin(&sa, fs, d, cookie,
				    !!(flags & FS_READDIR_PLUS));
			ret = fs_dir_iterate(fs, d, cookie, readdir_cb, &r);
			fs_sa_end(&sa);
		}
		fs_buf_put(d);
	}
	fs_op_end(&il);
	return ret < 0 ? ret : r.err;
}

/* ---- filesystem ---- */

int fs_statfs(struct fs *fs, struct statvfs *out)
{
	struct fs_space sp;
	struct fs_ilock il;
	int ret;

	OP_BEGIN(&il, fs, LK_PR);
	fs_op_end(&il);
	/* no lock of ours held: the statfs glock may be waited for */
	ret = fs_statfs_space(fs, &sp);
	if (ret < 0)
		return ret;
	memset(out, 0, sizeof(*out));
	out->f_bsize = FS_BLOCK_SIZE;
	out->f_frsize = FS_BLOCK_SIZE;
	out->f_blocks = sp.data_blocks;
	out->f_bfree = sp.free_blocks;
	out->f_bavail = sp.free_blocks;
	out->f_files = sp.inodes + sp.free_blocks;
	out->f_ffree = sp.free_blocks;
	out->f_favail = sp.free_blocks;
	out->f_namemax = FS_NAME_MAX;
	return 0;
}

int fs_sync(struct fs *fs)
{
	return fs_fsync(fs, 0, 0);
}

/* ---- xattrs ---- */

int fs_setxattr(struct fs *fs, const struct fs_cred *cred, uint64_t ino,
		const char *name, const void *value, size_t size, int flags)
{
	struct fs_ilock il;
	struct fs_buf *b;
	int ret;

	(void)cred;
	OP_BEGIN(&il, fs, LK_EX);
	ret = fs_vfs_lock_read(&il, fs, ino, FS_IL_EX, &b);
	if (ret == 0) {
		ret = fs_xattr_set(fs, b, name, value, size, flags);
		for (int t = 0; t < NOSPC_TRIES && need_nospc_retry(fs, ret);
		     t++)
			ret = fs_xattr_set(fs, b, name, value, size, flags);
		fs_buf_put(b);
	}
	fs_op_end(&il);
	return ret;
}

ssize_t fs_getxattr(struct fs *fs, uint64_t ino, const char *name,
		    void *buf, size_t size)
{
	struct fs_ilock il;
	struct fs_buf *b;
	ssize_t n;

	OP_BEGIN(&il, fs, LK_PR);
	n = fs_vfs_lock_read(&il, fs, ino, FS_IL_SH, &b);
	if (n == 0) {
		n = fs_xattr_get(fs, b, name, buf, size);
		fs_buf_put(b);
	}
	fs_op_end(&il);
	return n;
}

ssize_t fs_listxattr(struct fs *fs, uint64_t ino, char *buf, size_t size)
{
	struct fs_ilock il;
	struct fs_buf *b;
	ssize_t n;

	OP_BEGIN(&il, fs, LK_PR);
	n = fs_vfs_lock_read(&il, fs, ino, FS_IL_SH, &b);
	if (n == 0) {
		n = fs_xattr_list(fs, b, buf, size);
		fs_buf_put(b);
	}
	fs_op_end(&il);
	return n;
}

int fs_removexattr(struct fs *fs, const struct fs_cred *cred, uint64_t ino,
		   const char *name)
{
	struct fs_ilock il;
	struct fs_buf *b;
	int ret;

	(void)cred;
	OP_BEGIN(&il, fs, LK_EX);
	ret = fs_vfs_lock_read(&il, fs, ino, FS_IL_EX, &b);
	if (ret == 0) {
		ret = fs_xattr_remove(fs, b, name);
		fs_buf_put(b);
	}
	fs_op_end(&il);
	return ret;
}
