/*
 * fs_vfs.c — the namespace API of fs.h: mount glue, and every operation
 * as locking + checks + one transaction over the inode, directory, file
 * and xattr modules.
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
#include "fusefs/namespace/fs_ns.h"
#include "fusefs/namespace/fs_statahead.h"
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

#define LINK_MAX_COUNT 65000u
#define RELATIME_SECS (24 * 3600)
#define NOSPC_TRIES 8 /* retries of an operation that hit ENOSPC */

/* Start an operation with the glock in @mode; -EIO once fenced. */
#define OP_BEGIN(il, fs, mode)                                                 \
	do {                                                                   \
		if (fs_op_begin((il), (fs), (mode)) < 0)                       \
			return -EIO;                                           \
	} while (0)

/* A file sharing extents (reflink) changes a refcount tree that other
 * inodes use: the tree's lock around the change (fs_ilock.h 1c). 1 held,
 * 0 not shared, -EIO. */
static int refc_guard(struct fs *fs, struct fs_buf *b, struct fs_irefc *h)
{
	if (fs_di(b)->refcount_blk == 0)
		return 0;
	return fs_irefc_lock(fs, fs_di(b)->refcount_blk, 0, h) < 0 ? -EIO : 1;
}

static void refc_unguard(struct fs *fs, int held, struct fs_irefc *h)
{
	if (held > 0)
		fs_irefc_unlock(fs, h);
}

static int check_name(const char *name)
{
	size_t len = strlen(name);

	if (len == 0)
		return -ENOENT;
	if (len > FS_NAME_MAX)
		return -ENAMETOOLONG;
	if (memchr(name, '/', len) != NULL)
		return -EINVAL;
	return 0;
}

static int is_dot(const char *name)
{
	return strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
}

static int is_dot_ent(const struct fs_dirent *de)
{
	return de->namelen <= 2 && de->name[0] == '.' &&
	       (de->namelen == 1 || de->name[1] == '.');
}

static unsigned dtype_of(mode_t mode)
{
	return IFTODT(mode);
}

/* Read directory @ino; -ENOTDIR, -ENOENT if it was removed. */
static int dir_read(struct fs *fs, uint64_t ino, struct fs_buf **out)
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

/* The sticky bit: only the owner of the entry or of the directory (or
 * root) may remove or rename it. */
static int sticky_ok(const struct fs_cred *cred, struct fs_buf *dir,
		     struct fs_buf *victim)
{
	if (!(fs_di(dir)->mode & S_ISVTX) || cred->uid == 0)
		return 1;
	return cred->uid == fs_di(dir)->uid || cred->uid == fs_di(victim)->uid;
}

static void kill_priv(struct fs_dinode *di)
{
	di->mode &= ~(unsigned)S_ISUID;
	if (di->mode & S_IXGRP)
		di->mode &= ~(unsigned)S_ISGID;
}

/* Write, truncate and chown drop file capabilities, as the VFS does
 * (the kernel leaves it to us: FUSE_HANDLE_KILLPRIV_V2, fs_fuse_io.c). */
static int drop_caps(struct fs *fs, struct fs_buf *b)
{
	int ret;

	if (fs_di(b)->xattr_blk == 0 || !S_ISREG(fs_di(b)->mode))
		return 0;
	ret = fs_xattr_remove(fs, b, "security.capability");
	return ret == -ENODATA ? 0 : ret;
}

/*
 * After -ENOSPC (the operation ended its handle): 1 if a retry may
 * succeed. dlm: the allocator found space only in rgroups other nodes
 * own (fs_alloc_starved); take one, waiting, now that no handle is
 * held. Else blocks freed by uncommitted transactions: commit.
 */
static int need_nospc_retry(struct fs *fs, int ret)
{
	if (ret != -ENOSPC)
		return 0;
	if (fs_alloc_starved(fs))
		return 1;
	if (fs_alloc_pending(fs) == 0)
		return 0;
	return fs_journal_sync(fs) == 0;
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
	ret = dir_read(fs, fs->ns->root, &b);
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
		ret = dir_read(fs, parent, &d);
	if (ret < 0)
		goto out;
	ret = lookup_in(fs, d, name, &ino);
	fs_buf_put(d);
	/* "..": never a child's lock before its parent's */
	if (ret == 0 && ino != parent && strcmp(name, "..") == 0)
		fs_iunlock_one(&il, parent);
	if (ret == 0)
		ret = fs_ilock_one(&il, ino, FS_IL_SH);
	if (ret == 0)
		ret = fs_ino_read(fs, ino, &b);
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
	ret = fs_ilock_one(&il, ino, FS_IL_SH);
	if (ret == 0)
		ret = fs_ino_read(fs, ino, &b);
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
	ret = fs_ilock_one(&il, ino, FS_IL_EX);
	if (ret == 0)
		ret = fs_ino_read(fs, ino, &b);
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

/* ---- creating ---- */

struct newnode {
	const char *name;
	mode_t mode;
	uint64_t rdev;
	const char *target;	/* symlink */
};

/* Checks done before any transaction; -EEXIST etc. */
static int create_check(struct fs *fs, struct fs_buf *d, const char *name)
{
	int ret;

	ret = check_name(name);
	if (ret < 0)
		return ret;
	if (is_dot(name))
		return -EEXIST;
	ret = fs_dir_lookup(fs, d, name, strlen(name), NULL, NULL, NULL);
	if (ret == 0)
		return -EEXIST;
	return ret == -ENOENT ? 0 : ret;
}

/* The new inode's buffer in *@out and (dlm) its glock, held EX, in
 * *@gl (fs_ino_alloc; @gl NULL: not locked yet). */
static int create_tx(struct fs *fs, const struct fs_cred *cred,
		     struct fs_buf *d, const struct newnode *nn, gid_t gid,
		     struct fs_buf **out, struct fs_glock **gl)
{
	size_t tlen = nn->target != NULL ? strlen(nn->target) : 0;
	struct fs_tx *tx;
	struct fs_buf *b;
	int ret;

	ret = fs_tx_begin(fs, 2 + fs_dir_credits(fs, d) +
			  fs_ino_alloc_credits(fs), &tx);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, d);
	if (ret < 0)
		goto out_end;
	ret = fs_ino_alloc(tx, d->blkno, nn->mode, cred->uid, gid, nn->rdev, &b,
			   gl);
	if (ret < 0)
		goto out_end;
	ret = fs_dir_add(tx, d, nn->name, strlen(nn->name), b->blkno,
			 dtype_of(nn->mode));
	if (ret < 0) {
		uint64_t ino = b->blkno;

		fs_buf_put(b);
		fs_free_inode(tx, ino);
		goto out_end;
	}
	if (S_ISDIR(nn->mode)) {
		fs_di(d)->nlink++;
		fs_di(b)->parent = d->blkno;
	}
	if (tlen > 0 && tlen <= FS_INODE_INLINE_SIZE) {
		memcpy(fs_di(b)->inline_area, nn->target, tlen);
		fs_di(b)->size = tlen;
	}
	fs_ino_touch(fs_di(d), FS_T_MTIME | FS_T_CTIME);
	*out = b;
out_end:
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	if (ret < 0 && gl != NULL && *gl != NULL) {
		fs_cluster_gunlock(*gl, LK_EX);
		*gl = NULL;
	}
	return ret;
}

/* create_tx failed: a retry is worth it (after waiting, no handle held,
 * for a group with space or a refused inode number's lock) */
static int create_retry(struct fs *fs, int ret)
{
	if (ret == -EAGAIN)
		return fs_ino_alloc_refused(fs);
	return need_nospc_retry(fs, ret);
}

static int create_node(struct fs *fs, const struct fs_cred *cred,
		       uint64_t parent, struct newnode *nn,
		       struct fs_attr *out)
{
	struct fs_acl_inherit *acl;
	struct fs_buf *d, *b = NULL;
	struct fs_glock *gl = NULL;
	struct fs_ilock il;
	uint64_t ino;
	size_t tlen;
	gid_t gid;
	int ret;

	acl = malloc(sizeof(*acl));
	if (acl == NULL)
		return -ENOMEM;
	if (fs_op_begin(&il, fs, LK_EX) < 0) {
		free(acl);
		return -EIO;
	}
	ret = fs_ilock_one(&il, parent, FS_IL_EX);
	if (ret == 0)
		ret = dir_read(fs, parent, &d);
	if (ret < 0)
		goto out;
	ret = create_check(fs, d, nn->name);
	gid = cred->gid;
	if (fs_di(d)->mode & S_ISGID) {
		gid = fs_di(d)->gid;
		if (S_ISDIR(nn->mode))
			nn->mode |= S_ISGID;
	}
	if (ret == 0)
		ret = fs_xattr_inherit_prepare(fs, d, &nn->mode, cred->umask,
					       acl);
	if (ret == 0) {
		ret = create_tx(fs, cred, d, nn, gid, &b, &gl);
		/* the last retry after refused new-inode locks takes the
		 * lock after the transaction, as before they were tried */
		for (int t = 0; t < NOSPC_TRIES && create_retry(fs, ret); t++)
			ret = create_tx(fs, cred, d, nn, gid, &b,
					ret == -EAGAIN && t == NOSPC_TRIES - 1
					    ? NULL
					    : &gl);
	}
	fs_buf_put(d);
	if (ret < 0)
		goto out;
	/* a child after its parent; new, so nobody waits for it (dlm: its
	 * glock is held EX since before its block joined the transaction,
	 * fs_ino_alloc: this takes it again with no message) */
	ino = b->blkno;
	fs_buf_put(b);
	b = NULL;
	ret = fs_ilock_one(&il, ino, FS_IL_EX);
	if (gl != NULL)
		fs_cluster_gunlock(gl, LK_EX);
	if (ret == 0)
		ret = fs_ino_read(fs, ino, &b);
	if (ret < 0)
		goto out;
	tlen = nn->target != NULL ? strlen(nn->target) : 0;
	if (ret == 0 && tlen > FS_INODE_INLINE_SIZE) {
		ssize_t n = fs_file_write(fs, NULL, b, nn->target, tlen, 0);

		ret = n < 0 ? (int)n : 0;
	}
	if (ret == 0)
		ret = fs_xattr_inherit_apply(fs, b, acl);
	/* the node exists now: a failure above leaves it as it is */
	fs_ino_attr(fs_di(b), out);
	fs_ino_get_made(fs, b->blkno);
	fs_buf_put(b);
out:
	fs_op_end(&il);
	free(acl);
	return ret;
}

int fs_mknod(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	     const char *name, mode_t mode, dev_t rdev, struct fs_attr *out)
{
	struct newnode nn = { .name = name, .mode = mode, .rdev = rdev };

	if ((mode & S_IFMT) == 0)
		nn.mode |= S_IFREG;
	if (!S_ISREG(nn.mode) && !S_ISFIFO(nn.mode) && !S_ISSOCK(nn.mode) &&
	    !S_ISCHR(nn.mode) && !S_ISBLK(nn.mode))
		return -EINVAL;
	if (!S_ISCHR(nn.mode) && !S_ISBLK(nn.mode))
		nn.rdev = 0;
	return create_node(fs, cred, parent, &nn, out);
}

int fs_mkdir(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	     const char *name, mode_t mode, struct fs_attr *out)
{
	struct newnode nn = { .name = name,
			      .mode = S_IFDIR | (mode & 07777) };

	return create_node(fs, cred, parent, &nn, out);
}

int fs_create(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	      const char *name, mode_t mode, int flags, struct fs_attr *out)
{
	struct newnode nn = { .name = name,
			      .mode = S_IFREG | (mode & 07777) };
	int ret;

	(void)flags;
	/* the open reference after the lookup one create_node counted
	 * (fs_ino_get_made): a record that put its iopen PR off keeps it
	 * off, one that could not be made then takes it now */
	ret = create_node(fs, cred, parent, &nn, out);
	if (ret == 0)
		fs_ino_get_open(fs, out->ino);
	return ret;
}

int fs_symlink(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	       const char *name, const char *target, struct fs_attr *out)
{
	struct newnode nn = { .name = name, .mode = S_IFLNK | 0777,
			      .target = target };
	size_t tlen = strlen(target);

	if (tlen == 0)
		return -ENOENT;
	if (tlen >= FS_PATH_MAX)
		return -ENAMETOOLONG;
	return create_node(fs, cred, parent, &nn, out);
}

ssize_t fs_readlink(struct fs *fs, uint64_t ino, char *buf, size_t size)
{
	struct fs_ilock il;
	struct fs_buf *b;
	ssize_t n;

	OP_BEGIN(&il, fs, LK_PR);
	n = fs_ilock_one(&il, ino, FS_IL_SH);
	if (n == 0)
		n = fs_ino_read(fs, ino, &b);
	if (n == 0) {
		if (!S_ISLNK(fs_di(b)->mode))
			n = -EINVAL;
		else
			n = fs_file_read(fs, NULL, b, buf, size, 0);
		fs_buf_put(b);
	}
	fs_op_end(&il);
	return n;
}

/* ---- removing ---- */

/* Drop one link of @b (the entry @key in @d is removed) in one
 * transaction; orphan it at nlink 0. */
static int unlink_tx(struct fs *fs, struct fs_buf *d, uint64_t key,
		     struct fs_buf *b)
{
	struct fs_dinode *di = fs_di(b);
	struct fs_tx *tx;
	int ret;

	ret = fs_tx_begin(fs, 3 + fs_dir_credits(fs, d) +
			  fs_ino_orphan_credits(), &tx);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, d);
	if (ret == 0)
		ret = fs_tx_write(tx, b);
	if (ret == 0)
		ret = fs_dir_remove(tx, d, key);
	if (ret < 0)
		goto out;
	if (S_ISDIR(di->mode)) {
		di->nlink = 0;
		fs_di(d)->nlink--;
	} else {
		di->nlink--;
	}
	fs_ino_touch(di, FS_T_CTIME);
	fs_ino_touch(fs_di(d), FS_T_MTIME | FS_T_CTIME);
	if (di->nlink == 0)
		ret = fs_ino_orphan_add(tx, b);
out:
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	return ret;
}

static int remove_entry(struct fs *fs, const struct fs_cred *cred,
			uint64_t parent, const char *name, int dir)
{
	struct fs_ilock il;
	struct fs_buf *d, *b;
	uint64_t ino, key;
	int ret;

	ret = check_name(name);
	if (ret < 0)
		return ret;
	if (is_dot(name))
		return strcmp(name, ".") == 0 ? -EINVAL : -ENOTEMPTY;
	OP_BEGIN(&il, fs, LK_EX);
	ret = fs_ilock_one(&il, parent, FS_IL_EX);
	if (ret == 0)
		ret = dir_read(fs, parent, &d);
	if (ret < 0)
		goto out;
	ret = fs_dir_lookup(fs, d, name, strlen(name), &ino, NULL, &key);
	if (ret == 0)
		ret = fs_ilock_one(&il, ino, FS_IL_EX);
	if (ret == 0)
		ret = fs_ino_read(fs, ino, &b);
	if (ret < 0)
		goto out_dir;
	if (dir && !S_ISDIR(fs_di(b)->mode))
		ret = -ENOTDIR;
	else if (!dir && S_ISDIR(fs_di(b)->mode))
		ret = -EISDIR;
	else if (dir && fs_di(b)->size != 0)
		ret = -ENOTEMPTY;
	else if (!sticky_ok(cred, d, b))
		ret = -EPERM;
	if (ret == 0)
		ret = unlink_tx(fs, d, key, b);
	fs_buf_put(b);
out_dir:
	fs_buf_put(d);
out:
	/* an unreferenced orphan now is destroyed as its lock goes */
	fs_op_end(&il);
	return ret;
}

int fs_unlink(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	      const char *name)
{
	return remove_entry(fs, cred, parent, name, 0);
}

int fs_rmdir(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	     const char *name)
{
	return remove_entry(fs, cred, parent, name, 1);
}

/* ---- link ---- */

static int link_not_dir(struct fs_ilock *il, uint64_t ino)
{
	struct fs_buf *b;
	int ret;

	ret = fs_ilock_one(il, ino, FS_IL_SH);
	if (ret == 0)
		ret = fs_ino_read(il->fs, ino, &b);
	if (ret == 0) {
		if (S_ISDIR(fs_di(b)->mode))
			ret = -EPERM;
		fs_buf_put(b);
	}
	fs_iunlock_one(il, ino);
	return ret;
}

int fs_link(struct fs *fs, const struct fs_cred *cred, uint64_t ino,
	    uint64_t newparent, const char *newname, struct fs_attr *out)
{
	struct fs_ilock il;
	struct fs_buf *d, *b;
	struct fs_tx *tx;
	int ret;

	(void)cred;
	OP_BEGIN(&il, fs, LK_EX);
	/* a directory is refused before its lock could follow a
	 * descendant's (newparent); others are leaves */
	ret = link_not_dir(&il, ino);
	if (ret == 0)
		ret = fs_ilock_pair(&il, newparent, FS_IL_EX, ino, FS_IL_EX);
	if (ret == 0)
		ret = fs_ino_read(fs, ino, &b);
	if (ret < 0)
		goto out;
	if (S_ISDIR(fs_di(b)->mode))
		ret = -EPERM;
	else if (fs_di(b)->nlink == 0)
		ret = -ENOENT;
	else if (fs_di(b)->nlink >= LINK_MAX_COUNT)
		ret = -EMLINK;
	if (ret < 0)
		goto out_b;
	ret = dir_read(fs, newparent, &d);
	if (ret < 0)
		goto out_b;
	ret = create_check(fs, d, newname);
	if (ret < 0)
		goto out_d;
	ret = fs_tx_begin(fs, 3 + fs_dir_credits(fs, d), &tx);
	if (ret < 0)
		goto out_d;
	ret = fs_tx_write(tx, d);
	if (ret == 0)
		ret = fs_tx_write(tx, b);
	if (ret == 0)
		ret = fs_dir_add(tx, d, newname, strlen(newname), ino,
				 dtype_of(fs_di(b)->mode));
	if (ret == 0) {
		fs_di(b)->nlink++;
		fs_ino_touch(fs_di(b), FS_T_CTIME);
		fs_ino_touch(fs_di(d), FS_T_MTIME | FS_T_CTIME);
	}
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	if (ret == 0) {
		fs_ino_attr(fs_di(b), out);
		fs_ino_get_lookup(fs, ino);
	}
out_d:
	fs_buf_put(d);
out_b:
	fs_buf_put(b);
out:
	fs_op_end(&il);
	return ret;
}

/* ---- rename ---- */

struct rn {
	struct fs_buf *sd, *dd;		/* source and target directories */
	struct fs_buf *s, *t;		/* source and target (t may be NULL) */
	uint64_t skey, tkey;
	const char *name, *newname;
	unsigned flags;
};

/* Is directory @anc an ancestor of (or equal to) directory @ino? Reads
 * directories' parent fields without their inode locks: those change
 * only under ns->rename_mu (a rename between directories), which the
 * caller holds. */
/* Is directory @anc an ancestor of @ino (or @ino itself)? With @peek,
 * each directory is read under its glock (fs_ipeek_begin: the rename
 * walk, nothing else held); else from the cache, as that walk left it
 * (the rename locks keep every directory's parent from changing). */
static int ancestor_walk(struct fs *fs, uint64_t anc, uint64_t ino, int peek)
{
	uint64_t root = fs->ns->root;
	struct fs_glock *gl = NULL;
	struct fs_buf *b;
	unsigned depth = 0;

	while (depth++ < 4096) {
		uint64_t parent = 0;
		int ret;

		if (ino == anc)
			return 1;
		if (ino == root)
			return 0;
		ret = peek ? fs_ipeek_begin(fs, ino, &gl) : 0;
		if (ret == 0)
			ret = fs_ino_read(fs, ino, &b);
		if (ret == 0) {
			parent = fs_di(b)->parent;
			fs_buf_put(b);
		}
		fs_ipeek_end(gl);
		gl = NULL;
		if (ret < 0)
			return 1; /* unsure: refuse */
		if (parent == 0 || parent == ino)
			return 0;
		ino = parent;
	}
	return 1;
}

static int is_ancestor(struct fs *fs, uint64_t anc, uint64_t ino)
{
	return ancestor_walk(fs, anc, ino, 0);
}

static int is_ancestor_peek(struct fs *fs, uint64_t anc, uint64_t ino)
{
	return ancestor_walk(fs, anc, ino, 1);
}

static int rename_check(struct fs *fs, const struct fs_cred *cred,
			struct rn *r)
{
	int sdir = S_ISDIR(fs_di(r->s)->mode);

	if (!sticky_ok(cred, r->sd, r->s))
		return -EPERM;
	if (r->t == NULL)
		return (r->flags & FS_RENAME_EXCHANGE) ? -ENOENT : 0;
	if (r->flags & FS_RENAME_NOREPLACE)
		return -EEXIST;
	if (!sticky_ok(cred, r->dd, r->t))
		return -EPERM;
	if (r->flags & FS_RENAME_EXCHANGE) {
		if (S_ISDIR(fs_di(r->t)->mode) &&
		    r->sd->blkno != r->dd->blkno &&
		    is_ancestor(fs, r->t->blkno, r->sd->blkno))
			return -EINVAL;
		return 0;
	}
	if (sdir && !S_ISDIR(fs_di(r->t)->mode))
		return -ENOTDIR;
	if (!sdir && S_ISDIR(fs_di(r->t)->mode))
		return -EISDIR;
	if (sdir && fs_di(r->t)->size != 0)
		return -ENOTEMPTY;
	return 0;
}

/* Move directory @b from parent @from to parent @to (link counts). */
static void move_dir(struct fs_buf *b, struct fs_buf *from,
		     struct fs_buf *to)
{
	if (!S_ISDIR(fs_di(b)->mode) || from->blkno == to->blkno)
		return;
	fs_di(from)->nlink--;
	fs_di(to)->nlink++;
	fs_di(b)->parent = to->blkno;
}

static int rename_apply(struct fs_tx *tx, struct rn *r)
{
	struct fs_dinode *s = fs_di(r->s);
	size_t nl = strlen(r->newname);
	int ret;

	if (r->flags & FS_RENAME_EXCHANGE) {
		struct fs_dinode *t = fs_di(r->t);

		ret = fs_dir_set(tx, r->sd, r->skey, r->name, strlen(r->name),
				 r->t->blkno, IFTODT(t->mode));
		if (ret == 0)
			ret = fs_dir_set(tx, r->dd, r->tkey, r->newname, nl,
					 r->s->blkno, IFTODT(s->mode));
		if (ret == 0) {
			move_dir(r->s, r->sd, r->dd);
			move_dir(r->t, r->dd, r->sd);
			fs_ino_touch(t, FS_T_CTIME);
		}
		return ret;
	}
	if (r->t != NULL) {
		struct fs_dinode *t = fs_di(r->t);

		ret = fs_dir_set(tx, r->dd, r->tkey, r->newname, nl,
				 r->s->blkno, IFTODT(s->mode));
		if (ret < 0)
			return ret;
		if (S_ISDIR(t->mode)) {
			t->nlink = 0;
			fs_di(r->dd)->nlink--;
		} else {
			t->nlink--;
		}
		fs_ino_touch(t, FS_T_CTIME);
		if (t->nlink == 0 && (ret = fs_ino_orphan_add(tx, r->t)) < 0)
			return ret;
	} else {
		ret = fs_dir_add(tx, r->dd, r->newname, nl, r->s->blkno,
				 IFTODT(s->mode));
		if (ret < 0)
			return ret;
	}
	ret = fs_dir_remove(tx, r->sd, r->skey);
	if (ret == 0)
		move_dir(r->s, r->sd, r->dd);
	return ret;
}

static int rename_tx(struct fs *fs, struct rn *r)
{
	struct fs_tx *tx;
	int ret;

	ret = fs_tx_begin(fs, 6 + fs_dir_credits(fs, r->sd) +
			  fs_dir_credits(fs, r->dd) + fs_ino_orphan_credits(),
			  &tx);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, r->sd);
	if (ret == 0)
		ret = fs_tx_write(tx, r->dd);
	if (ret == 0)
		ret = fs_tx_write(tx, r->s);
	if (ret == 0 && r->t != NULL)
		ret = fs_tx_write(tx, r->t);
	if (ret == 0)
		ret = rename_apply(tx, r);
	if (ret == 0) {
		fs_ino_touch(fs_di(r->s), FS_T_CTIME);
		fs_ino_touch(fs_di(r->sd), FS_T_MTIME | FS_T_CTIME);
		fs_ino_touch(fs_di(r->dd), FS_T_MTIME | FS_T_CTIME);
	}
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	return ret;
}

/*
 * Look up source and target in the locked directories, refuse the traps
 * (a directory moved under itself, a target directory containing the
 * source's: the walk under the rename mutex, before their locks, as
 * Linux's lock_rename does), then lock and load both inodes.
 */
static int rename_load(struct fs_ilock *il, uint64_t parent, uint64_t newparent,
		       struct rn *r)
{
	struct fs *fs = il->fs;
	uint64_t sino, tino = 0;
	unsigned stype, ttype = 0;
	int ret;

	ret = dir_read(fs, parent, &r->sd);
	if (ret == 0)
		ret = dir_read(fs, newparent, &r->dd);
	if (ret == 0)
		ret = fs_dir_lookup(fs, r->sd, r->name, strlen(r->name), &sino,
				    &stype, &r->skey);
	if (ret < 0)
		return ret;
	ret = fs_dir_lookup(fs, r->dd, r->newname, strlen(r->newname), &tino,
			    &ttype, &r->tkey);
	if (ret == -ENOENT)
		tino = 0;
	else if (ret < 0)
		return ret;
	if (parent != newparent && stype == DT_DIR &&
	    is_ancestor(fs, sino, newparent))
		return -EINVAL;
	if (parent != newparent && tino != 0 && ttype == DT_DIR &&
	    is_ancestor(fs, tino, parent))
		return (r->flags & FS_RENAME_EXCHANGE) ? -EINVAL : -ENOTEMPTY;
	ret = fs_ilock_peers(il, sino, tino, FS_IL_EX);
	if (ret == 0)
		ret = fs_ino_read(fs, sino, &r->s);
	if (ret == 0 && tino != 0)
		ret = fs_ino_read(fs, tino, &r->t);
	return ret;
}

int fs_rename(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	      const char *name, uint64_t newparent, const char *newname,
	      unsigned flags)
{
	struct rn r = { .name = name, .newname = newname, .flags = flags };
	struct fs_ilock il;
	int ret;

	if ((flags & ~(unsigned)(FS_RENAME_NOREPLACE | FS_RENAME_EXCHANGE)) ||
	    flags == (FS_RENAME_NOREPLACE | FS_RENAME_EXCHANGE))
		return -EINVAL;
	ret = check_name(name);
	if (ret == 0)
		ret = check_name(newname);
	if (ret < 0)
		return ret;
	if (is_dot(name) || is_dot(newname))
		return -EINVAL;
	OP_BEGIN(&il, fs, LK_EX);
	ret = fs_ilock_rename(&il, parent, newparent, is_ancestor_peek);
	if (ret == 0)
		ret = rename_load(&il, parent, newparent, &r);
	if (ret < 0)
		goto out;
	if (r.t != NULL && r.t->blkno == r.s->blkno)
		goto out;	/* same inode: nothing to do */
	if (S_ISDIR(fs_di(r.s)->mode) && parent != newparent &&
	    is_ancestor(fs, r.s->blkno, newparent)) {
		ret = -EINVAL;
		goto out;
	}
	ret = rename_check(fs, cred, &r);
	if (ret == 0)
		ret = rename_tx(fs, &r);
out:
	fs_buf_put(r.t);
	fs_buf_put(r.s);
	fs_buf_put(r.dd);
	fs_buf_put(r.sd);
	/* a replaced target now unreferenced goes as its lock does */
	fs_op_end(&il);
	return ret;
}

/* ---- files ---- */

int fs_open(struct fs *fs, const struct fs_cred *cred, uint64_t ino,
	    int flags)
{
	struct fs_ilock il;
	struct fs_buf *b;
	int ret;

	(void)cred;
	OP_BEGIN(&il, fs, LK_PR);
	ret = fs_ilock_one(&il, ino, FS_IL_SH);
	if (ret == 0)
		ret = fs_ino_read(fs, ino, &b);
	if (ret == 0) {
		if (S_ISDIR(fs_di(b)->mode) &&
		    (flags & O_ACCMODE) != O_RDONLY)
			ret = -EISDIR;
		fs_buf_put(b);
	}
	if (ret == 0)
		fs_ino_get_open(fs, ino);
	fs_op_end(&il);
	return ret;
}

void fs_release(struct fs *fs, uint64_t ino)
{
	struct fs_ilock il;

	if (fs_op_begin(&il, fs, LK_PR) < 0)
		return;
	/* a stream that goes on (another open) simply reserves again */
	fs_alloc_resv_drop(fs, ino);
	if (fs_ino_put(fs, ino, 0, 1))
		fs_ilock_reap(&il, ino);
	else
		fs_iopen_closed(fs, ino);
	fs_op_end(&il);
}

/* a <= b, seconds then nanoseconds */
static int time_le(int64_t a, uint32_t ans, int64_t b, uint32_t bns)
{
	return a < b || (a == b && ans <= bns);
}

/* relatime: update when atime <= mtime/ctime (to the nanosecond, as
 * Linux's relatime_need_update) or older than a day. */
static int atime_due(struct fs *fs, const struct fs_dinode *di)
{
	struct timespec now;

	if (fs->ro || fs->ns->opts.atime == FS_ATIME_NOATIME)
		return 0;
	if (fs->ns->opts.atime == FS_ATIME_STRICT)
		return 1;
	if (time_le(di->atime, di->atime_nsec, di->mtime, di->mtime_nsec) ||
	    time_le(di->atime, di->atime_nsec, di->ctime, di->ctime_nsec))
		return 1;
	fs_now(&now);
	return now.tv_sec - di->atime >= RELATIME_SECS;
}

/* The read's shared lock becomes exclusive for the atime update, only
 * when atime_due says so (a dlm mount: one EX after the inode changed or
 * once a day, as GFS2 and OCFS2 do; a read needs only PR otherwise). */
static void atime_update(struct fs_ilock *il, uint64_t ino)
{
	struct fs *fs = il->fs;
	struct fs_buf *b;
	struct fs_tx *tx;

	fs_iunlock_one(il, ino);
	if (fs_ilock_one(il, ino, FS_IL_EX) < 0)
		return;
	if (fs_ino_read(fs, ino, &b) == 0) {
		if (atime_due(fs, fs_di(b)) && fs_tx_begin(fs, 1, &tx) == 0) {
			if (fs_tx_write(tx, b) == 0)
				fs_ino_touch(fs_di(b), FS_T_ATIME);
			fs_tx_end(tx);
		}
		fs_buf_put(b);
	}
}

/* fs_read and fs_read_ex: the inode's lock in @mode (FS_IL_SH, _EX). */
static ssize_t read_locked(struct fs *fs, uint64_t ino, void *buf, size_t len,
			   uint64_t off, int mode)
{
	struct fs_ilock il;
	struct fs_buf *b;
	ssize_t n;
	int due = 0;

	OP_BEGIN(&il, fs, LK_PR); /* no allocation: no reserve */
	n = fs_ilock_one(&il, ino, mode);
	if (n == 0)
		n = fs_ino_read(fs, ino, &b);
	if (n == 0) {
		if (S_ISDIR(fs_di(b)->mode))
			n = -EISDIR;
		else if (!S_ISREG(fs_di(b)->mode))
			n = -EINVAL;
		else
			n = fs_file_read(fs, fs_ilock_rec(&il, ino), b, buf,
					 len, off);
		due = n >= 0 && atime_due(fs, fs_di(b));
		fs_buf_put(b);
	}
	if (due)
		atime_update(&il, ino);
	fs_op_end(&il);
	return n;
}

ssize_t fs_read(struct fs *fs, uint64_t ino, void *buf, size_t len,
		uint64_t off)
{
	return read_locked(fs, ino, buf, len, off, FS_IL_SH);
}

ssize_t fs_read_ex(struct fs *fs, uint64_t ino, void *buf, size_t len,
		   uint64_t off)
{
	return read_locked(fs, ino, buf, len, off,
			   fs->cl != NULL ? FS_IL_EX : FS_IL_SH);
}

static int kill_priv_tx(struct fs *fs, struct fs_buf *b)
{
	struct fs_tx *tx;
	int ret;

	ret = fs_tx_begin(fs, 1, &tx);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, b);
	if (ret == 0)
		kill_priv(fs_di(b));
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	return ret;
}

/* The data part of a write (its lock exclusive). */
static ssize_t write_data(struct fs *fs, struct fs_inode *n, struct fs_buf *b,
			  const void *buf, size_t len, uint64_t off)
{
	struct fs_irefc rh;
	int g = refc_guard(fs, b, &rh);
	ssize_t ret;

	if (g < 0)
		return g;
	ret = fs_file_write(fs, n, b, buf, len, off);
	for (int t = 0; t < NOSPC_TRIES && need_nospc_retry(fs, (int)ret); t++)
		ret = fs_file_write(fs, n, b, buf, len, off);
	refc_unguard(fs, g, &rh);
	return ret;
}

ssize_t fs_write(struct fs *fs, const struct fs_cred *cred, uint64_t ino,
		 const void *buf, size_t len, uint64_t off)
{
	struct fs_ilock il;
	struct fs_buf *b;
	ssize_t n;

	OP_BEGIN(&il, fs, LK_EX);
	n = fs_ilock_one(&il, ino, FS_IL_EX);
	if (n == 0)
		n = fs_ino_read(fs, ino, &b);
	if (n < 0)
		goto out;
	if (S_ISDIR(fs_di(b)->mode))
		n = -EISDIR;
	else if (!S_ISREG(fs_di(b)->mode))
		n = -EINVAL;
	else if (!(cred->flags & FS_CRED_FSETID) &&
		 (fs_di(b)->mode & (S_ISUID | S_ISGID)))
		n = kill_priv_tx(fs, b);
	if (n == 0)
		n = drop_caps(fs, b);
	if (n == 0 && (cred->flags & FS_CRED_APPEND) && fs->cl != NULL)
		off = fs_di(b)->size; /* other nodes may have appended */
	if (n == 0)
		n = write_data(fs, fs_ilock_rec(&il, ino), b, buf, len, off);
	fs_buf_put(b);
out:
	fs_op_end(&il);
	return n;
}

int fs_fsync(struct fs *fs, uint64_t ino, int datasync)
{
	struct fs_ilock il;
	int ret;

	(void)datasync;
	OP_BEGIN(&il, fs, LK_PR);
	/* waits for the data writes behind too; a failed one: -EIO. One
	 * inode commits only if it has changes not yet durable; 0: all */
	ret = ino != 0 ? fs_journal_sync_ino(fs, ino) : fs_journal_sync(fs);
	fs_op_end(&il);
	return ret;
}

int fs_fallocate(struct fs *fs, const struct fs_cred *cred, uint64_t ino,
		 int mode, uint64_t off, uint64_t len)
{
	struct fs_inode *n;
	struct fs_irefc rh;
	struct fs_ilock il;
	struct fs_buf *b;
	int ret, g;

	(void)cred;
	OP_BEGIN(&il, fs, LK_EX);
	ret = fs_ilock_one(&il, ino, FS_IL_EX);
	if (ret == 0)
		ret = fs_ino_read(fs, ino, &b);
	if (ret == 0) {
		n = fs_ilock_rec(&il, ino);
		g = refc_guard(fs, b, &rh);
		if (g < 0)
			ret = g;
		else if (S_ISDIR(fs_di(b)->mode))
			ret = -EISDIR;
		else if (!S_ISREG(fs_di(b)->mode))
			ret = -ENODEV;
		else
			ret = fs_file_fallocate(fs, n, b, mode, off, len);
		for (int t = 0;
		     g >= 0 && t < NOSPC_TRIES && need_nospc_retry(fs, ret);
		     t++)
			ret = fs_file_fallocate(fs, n, b, mode, off, len);
		refc_unguard(fs, g, &rh);
		fs_buf_put(b);
	}
	fs_op_end(&il);
	return ret;
}

/* Both inodes of a clone, checked: regular files (-EISDIR, -EINVAL). */
static int clone_inodes(struct fs *fs, uint64_t in, uint64_t out,
			struct fs_buf **bi, struct fs_buf **bo)
{
	int ret = fs_ino_read(fs, in, bi);

	if (ret < 0)
		return ret;
	ret = fs_ino_read(fs, out, bo);
	if (ret < 0) {
		fs_buf_put(*bi);
		return ret;
	}
	if (S_ISDIR(fs_di(*bi)->mode) || S_ISDIR(fs_di(*bo)->mode))
		ret = -EISDIR;
	else if (!S_ISREG(fs_di(*bi)->mode) || !S_ISREG(fs_di(*bo)->mode))
		ret = -EINVAL;
	if (ret < 0) {
		fs_buf_put(*bi);
		fs_buf_put(*bo);
	}
	return ret;
}

/* Both files exclusive; a clone may join or change sharing groups, so
 * it always holds their trees' locks and ns->refc_lock. */
static int clone_locked(struct fs *fs, const struct fs_cred *cred,
			struct fs_buf *bi, struct fs_buf *bo, uint64_t off_in,
			uint64_t off_out, uint64_t len)
{
	struct fs_irefc rh;
	int ret;

	ret = fs_irefc_lock(fs, fs_di(bi)->refcount_blk,
			    fs_di(bo)->refcount_blk, &rh);
	if (ret < 0)
		return ret;
	if (!(cred->flags & FS_CRED_FSETID) &&
	    (fs_di(bo)->mode & (S_ISUID | S_ISGID)))
		ret = kill_priv_tx(fs, bo);
	if (ret == 0)
		ret = fs_file_clone(fs, bi, bo, off_in, off_out, len);
	for (int t = 0; t < NOSPC_TRIES && need_nospc_retry(fs, ret); t++)
		ret = fs_file_clone(fs, bi, bo, off_in, off_out, len);
	/* a tree the clone made: another node may cache its block */
	fs_irefc_new(fs, &rh, fs_di(bi)->refcount_blk);
	fs_irefc_unlock(fs, &rh);
	return ret;
}

int fs_clone_range(struct fs *fs, const struct fs_cred *cred, uint64_t ino_in,
		   uint64_t off_in, uint64_t ino_out, uint64_t off_out,
		   uint64_t len)
{
	struct fs_ilock il;
	struct fs_buf *bi, *bo;
	int ret;

	OP_BEGIN(&il, fs, LK_EX);
	ret = fs_ilock_peers(&il, ino_in, ino_out, FS_IL_EX);
	if (ret == 0)
		ret = clone_inodes(fs, ino_in, ino_out, &bi, &bo);
	if (ret == 0) {
		ret = clone_locked(fs, cred, bi, bo, off_in, off_out, len);
		fs_buf_put(bi);
		fs_buf_put(bo);
	}
	fs_op_end(&il);
	return ret;
}

int fs_lseek(struct fs *fs, uint64_t ino, uint64_t off, int whence,
	     uint64_t *out)
{
	struct fs_ilock il;
	struct fs_buf *b;
	int ret;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	OP_BEGIN(&il, fs, LK_PR);
	ret = fs_ilock_one(&il, ino, FS_IL_SH);
	if (ret == 0)
		ret = fs_ino_read(fs, ino, &b);
	if (ret == 0) {
		if (S_ISREG(fs_di(b)->mode))
			ret =
			    fs_file_seek(fs, b, off, whence == SEEK_DATA, out);
		else
			ret = S_ISDIR(fs_di(b)->mode) ? -EISDIR : -EINVAL;
		fs_buf_put(b);
	}
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
	ret = fs_ilock_one(&il, dir, FS_IL_SH);
	if (ret == 0)
		ret = fs_ino_read(fs, dir, &d);
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
	ret = fs_ilock_one(&il, ino, FS_IL_EX);
	if (ret == 0)
		ret = fs_ino_read(fs, ino, &b);
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
	n = fs_ilock_one(&il, ino, FS_IL_SH);
	if (n == 0)
		n = fs_ino_read(fs, ino, &b);
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
	n = fs_ilock_one(&il, ino, FS_IL_SH);
	if (n == 0)
		n = fs_ino_read(fs, ino, &b);
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
	ret = fs_ilock_one(&il, ino, FS_IL_EX);
	if (ret == 0)
		ret = fs_ino_read(fs, ino, &b);
	if (ret == 0) {
		ret = fs_xattr_remove(fs, b, name);
		fs_buf_put(b);
	}
	fs_op_end(&il);
	return ret;
}
