/*
 * fs_fuse.c — FUSE low-level adapter: kernel requests -> fs.h calls.
 *
 * Each handler converts its arguments (nodeid <-> ino, fuse_req_ctx ->
 * struct fs_cred, struct stat <-> struct fs_attr), calls one fs.h
 * function, and replies. The error sign flips exactly once, in
 * reply_err(). Every handler is bracketed by op_begin()/op_end(), the
 * per-op stats hook (fs_stats.h).
 *
 * Nodeids: the kernel calls the root FUSE_ROOT_ID (1); every other nodeid
 * is the on-disk inode number (never 1: block 1 is the backup superblock).
 * to_ino()/to_nodeid() are the only places that know.
 *
 * Lookup references: an entry reply that the kernel did not receive
 * (fuse_reply_entry/create returning -ENOENT: the request was
 * interrupted) gives its reference back with fs_forget().
 *
 * Caching: entries, attributes, pages and symlinks are cached by the
 * kernel for long (CACHE_TIMEOUT), with large writes (MAX_WRITE). A
 * single nolock node owns the device, so nothing else invalidates them
 * (and writeback_cache may be asked for). A dlm node
 * (fs_cluster.h) keeps them under its cluster locks: when a lock leaves
 * the node, the kernel cache sink (fs_inval.h, set with fs_set_inval)
 * tells the kernel what to drop; data is revalidated by mtime and size
 * (FUSE_AUTO_INVAL_DATA) at the next read(2) after the attributes were
 * dropped; names are cached only on kernels that can drop them all at
 * once (fs_inval_names: else entry timeout 0); no writeback_cache. A
 * nolock node has the sink too, for one thing: asking the kernel to
 * forget inodes past inode_max (fs_iprune.c). Locks,
 * the cluster's glock included, are taken by the fs.h calls themselves
 * (fs_ilock.h).
 *
 * Transport: requests come from /dev/fuse through libfuse's loop, or,
 * with uring= (fs_fuse_uring.c), from per-CPU io_uring queues; either
 * way they reach these handlers through libfuse, and every handler
 * replies before it returns (the io_uring path relies on it), except a
 * file lock that waits over /dev/fuse: fs_plock.c answers it when the
 * lock is granted (over io_uring its handler waits, on one of the
 * transport's workers).
 *
 * Privileges: fs_fuse_io.c negotiates FUSE_HANDLE_KILLPRIV_V2, so the
 * kernel does not drop setuid/setgid/capabilities itself: get_cred()
 * turns the write's kill flag into FS_CRED_FSETID and fs_vfs_io.c drops them.
 *
 * Backends: a ucfs mount (struct fs, the handlers below) or a pass-through
 * view of a directory (fs_pt.h: its own handlers, fs_pt_ops.c); they
 * share the session, the transport and the stats (fs_fuse_new_pt).
 *
 * Locking: struct fs_fuse is immutable after fs_fuse_new() except ->se,
 * which only the main thread touches. Handlers run concurrently; struct fs
 * does its own locking.
 */
#include "fusefs/fuse/fs_fuse.h"

#include "fusefs/fs.h"
#include "fusefs/cluster/fs_cluster.h"
#include "fusefs/fuse/fs_fuse_io.h"
#include "fusefs/fuse/fs_fuse_uring.h"
#include "fusefs/fuse/fs_inval.h"
#include "fusefs/namespace/fs_ns.h"
#include "fusefs/namespace/fs_statahead.h"
#include "fusefs/passthrough/fs_pt.h"
#include "fusefs/fuse/fs_plock.h"
#include "fusefs/stats/fs_stats.h"
#include "lockmgr/lk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#define CACHE_TIMEOUT 86400.0
#define PATH_MAX_LEN 4096
#define MAX_WRITE (1u << 20)

struct fs_fuse {
	struct fs *fs;		/* immutable; NULL for a pass-through mount */
	struct fs_pt *pt;	/* immutable: the pass-through backend or NULL */
	struct fs_cluster *cl;	/* immutable: fs->cl (dlm) or NULL */
	double timeout;		/* immutable: entry/attr cache seconds */
	uint64_t root;		/* immutable: fs_root(fs) */
	struct fs_stats *st;	/* immutable; may be NULL */
	struct fs_plock *pk;	/* immutable: file locks (dlm) or NULL */
	struct lk_lock *flmode; /* immutable: the localflocks agreement's
				   hold (dlm) or NULL */
	struct fs_inval *iv;	/* immutable after fs_fuse_new: the kernel
				   cache sink (dlm) or NULL */
	struct fs_inval *sink;	/* immutable after fs_fuse_new: the sink
				   on every mount (ucfs, not pt): nolock
				   uses only its prune (fs_iprune.c);
				   dlm: iv */
	struct fuse_session *se; /* main thread only */
	int mounted;		/* main thread only */
};

static struct fs_fuse *ff_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static uint64_t to_ino(const struct fs_fuse *ff, fuse_ino_t n)
{
	return n == FUSE_ROOT_ID ? ff->root : (uint64_t)n;
}

static fuse_ino_t to_nodeid(const struct fs_fuse *ff, uint64_t ino)
{
	return ino == ff->root ? FUSE_ROOT_ID : (fuse_ino_t)ino;
}

/* How long the kernel may keep a name (positive or negative): a dlm
 * node only while the kernel can be told to drop them (fs_inval.h). */
static double entry_timeout(const struct fs_fuse *ff)
{
	if (ff->iv != NULL && !fs_inval_names(ff->iv))
		return 0.0;
	return ff->timeout;
}

static void get_cred(fuse_req_t req, struct fs_cred *c)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	c->uid = ctx->uid;
	c->gid = ctx->gid;
	c->umask = ctx->umask;
	/* with KILLPRIV_V2 the kernel says whether this write must drop
	 * S_ISUID/S_ISGID; otherwise root stands for CAP_FSETID */
	c->flags = 0;
	if (fs_fuse_io_killpriv_v2() ? !fs_fuse_io_write_kill() :
	    ctx->uid == 0)
		c->flags |= FS_CRED_FSETID;
}

/* ---- the stats hook ---- */

/* Every handler starts here. The locks, the cluster's included, are the
 * filesystem's business: every fs.h call takes its own (fs_ilock.h); a
 * fenced node's calls fail with -EIO. Always 0. */
static int op_begin(struct fs_fuse *ff, fuse_req_t req, enum fs_op op,
		    uint64_t *t0)
{
	(void)ff;
	(void)req;
	(void)op;
	*t0 = fs_stats_op_begin();
	return 0;
}

static void op_end(struct fs_fuse *ff, enum fs_op op, uint64_t t0, int err)
{
	fs_stats_op_end(ff->st, op, t0, err);
}

/* ---- replies ---- */

static void attr_to_stat(const struct fs_fuse *ff, const struct fs_attr *a,
			 struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = to_nodeid(ff, a->ino);
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_rdev = a->rdev;
	st->st_size = (off_t)a->size;
	st->st_blocks = (blkcnt_t)a->blocks;
	st->st_blksize = a->blksize;
	st->st_atim = a->atime;
	st->st_mtim = a->mtime;
	st->st_ctim = a->ctime;
}

static void fill_entry(const struct fs_fuse *ff, const struct fs_attr *a,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = to_nodeid(ff, a->ino);
	e->generation = a->generation;
	attr_to_stat(ff, a, &e->attr);
	e->attr_timeout = ff->timeout;
	e->entry_timeout = entry_timeout(ff);
	if (ff->iv != NULL)
		fs_inval_note(ff->iv, a->ino, a->mode);
}

struct held_arg {
	struct fs *fs;
	uint64_t ino;
};

static int ino_held(void *arg)
{
	struct held_arg *h = arg;

	return fs_ino_held(h->fs, h->ino);
}

/* The kernel gives back @n lookup references to @ino (an fs ino), or
 * never got them (its reply failed): the namespace's fs_forget, then,
 * dlm, the sink drops what it tracks of a directory the kernel no
 * longer holds (fs_inval_forgot). */
static void forget_ino(struct fs_fuse *ff, uint64_t ino, uint64_t n)
{
	struct held_arg h = {ff->fs, ino};

	fs_forget(ff->fs, ino, n);
	if (ff->iv != NULL)
		fs_inval_forgot(ff->iv, ino, ino_held, &h);
}

/* The one place the sign flips. */
static void reply_err(fuse_req_t req, int ret)
{
	fuse_reply_err(req, ret < 0 ? -ret : ret);
}

/* dlm: the kernel may cache the name @name in @parent (an fs ino) from
 * the reply that follows (fs_inval_name). */
static void note_name(struct fs_fuse *ff, uint64_t parent, const char *name)
{
	if (ff->iv != NULL)
		fs_inval_name(ff->iv, parent, name);
}

/* Reply to an op that created or found an inode (ret 0: @a is valid and
 * holds a lookup reference). */
static void reply_entry(fuse_req_t req, int ret, const struct fs_attr *a)
{
	struct fs_fuse *ff = ff_of(req);
	struct fuse_entry_param e;

	if (ret < 0) {
		reply_err(req, ret);
		return;
	}
	fill_entry(ff, a, &e);
	if (fuse_reply_entry(req, &e) == -ENOENT)
		forget_ino(ff, a->ino, 1);
}

static void reply_attr(fuse_req_t req, int ret, const struct fs_attr *a)
{
	struct stat st;

	if (ret < 0) {
		reply_err(req, ret);
		return;
	}
	attr_to_stat(ff_of(req), a, &st);
	fuse_reply_attr(req, &st, ff_of(req)->timeout);
}

/* ---- lifecycle ---- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	static const unsigned want[] = {
		FUSE_CAP_ASYNC_READ,
		FUSE_CAP_READDIRPLUS, FUSE_CAP_READDIRPLUS_AUTO,
		FUSE_CAP_PARALLEL_DIROPS, FUSE_CAP_POSIX_ACL,
		FUSE_CAP_DONT_MASK, FUSE_CAP_CACHE_SYMLINKS,
		FUSE_CAP_ASYNC_DIO,
	};

	struct fs_fuse *ff = userdata;

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (conn->capable & want[i])
			conn->want |= want[i];
	/* file locks: cluster-wide on a dlm mount (fs_plock.h); a nolock
	 * or localflocks mount leaves them to the kernel, local as on any
	 * filesystem */
	if (ff->pk != NULL)
		conn->want |= conn->capable &
			      (FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
	else
		conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
	if (ff->sink != NULL)
		fs_inval_init(ff->sink, conn->proto_minor);
	/* With the kernel's writeback cache a write(2) is acknowledged
	 * before ucfs sees it, so a full filesystem can only fail the later
	 * writeback (ENOSPC at fsync/close, the data lost): opt-in only. */
	if (ff->fs->ns->opts.writeback_cache &&
	    (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	/* nolock: nobody else changes the data, keep the page cache even
	 * when mtime moves. dlm: a lost lock drops the attributes, and
	 * the next read(2) drops the pages if mtime or size moved (the
	 * pages themselves are dropped later: fs_inval.h) */
	if (ff->iv == NULL)
		conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	else
		conn->want |= conn->capable & FUSE_CAP_AUTO_INVAL_DATA;
	/* libfuse asks for atomic O_TRUNC by default, which makes the kernel
	 * pass O_TRUNC to open instead of sending a setattr first; fs_open
	 * does not truncate, so keep the setattr (the shell's "> f") */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	/* every request must pass through fs_fuse_io.c's read */
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
			FUSE_CAP_SPLICE_MOVE);
	conn->max_write = MAX_WRITE;
	conn->max_readahead = MAX_WRITE;
	fs_fuse_io_conn_max_read(conn); /* a max_read= given */
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	conn->time_gran = 1;
}

/* ---- namespace ---- */

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	struct fuse_entry_param e;
	struct fs_attr a;
	int ret;

	if (op_begin(ff, req, FS_OP_LOOKUP, &t0) < 0)
		return;

	note_name(ff, to_ino(ff, parent), name);
	ret = fs_lookup(ff->fs, to_ino(ff, parent), name, &a);
	if (ret == -ENOENT) {
		/* a negative entry the kernel may cache: this node's own
		 * creates tell the kernel, another node's take the
		 * directory's lock from this one first (fs_kinval_dir) */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = entry_timeout(ff);
		fuse_reply_entry(req, &e);
	} else {
		reply_entry(req, ret, &a);
	}
	op_end(ff, FS_OP_LOOKUP, t0, ret);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;

	if (op_begin(ff, req, FS_OP_FORGET, &t0) < 0)
		return;

	forget_ino(ff, to_ino(ff, ino), nlookup);
	fuse_reply_none(req);
	op_end(ff, FS_OP_FORGET, t0, 0);
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;

	if (op_begin(ff, req, FS_OP_FORGET_MULTI, &t0) < 0)
		return;

	fs_forget_batch(ff->fs, 1); /* their lock releases: one message */
	for (size_t i = 0; i < count; i++)
		forget_ino(ff, to_ino(ff, forgets[i].ino), forgets[i].nlookup);
	fs_forget_batch(ff->fs, 0);
	fuse_reply_none(req);
	op_end(ff, FS_OP_FORGET_MULTI, t0, 0);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	struct fs_attr a;
	int ret;

	if (op_begin(ff, req, FS_OP_GETATTR, &t0) < 0)
		return;

	(void)fi;
	ret = fs_getattr(ff->fs, to_ino(ff, ino), &a);
	reply_attr(req, ret, &a);
	op_end(ff, FS_OP_GETATTR, t0, ret);
}

static unsigned setattr_valid(int to_set)
{
	static const struct {
		int fuse;
		unsigned fs;
	} map[] = {
		{ FUSE_SET_ATTR_MODE, FS_SET_MODE },
		{ FUSE_SET_ATTR_UID, FS_SET_UID },
		{ FUSE_SET_ATTR_GID, FS_SET_GID },
		{ FUSE_SET_ATTR_SIZE, FS_SET_SIZE },
		{ FUSE_SET_ATTR_ATIME, FS_SET_ATIME },
		{ FUSE_SET_ATTR_MTIME, FS_SET_MTIME },
		{ FUSE_SET_ATTR_ATIME_NOW, FS_SET_ATIME_NOW },
		{ FUSE_SET_ATTR_MTIME_NOW, FS_SET_MTIME_NOW },
		{ FUSE_SET_ATTR_CTIME, FS_SET_CTIME },
		{ FUSE_SET_ATTR_KILL_SUID, FS_SET_KILL_PRIV },
		{ FUSE_SET_ATTR_KILL_SGID, FS_SET_KILL_PRIV },
		{ FUSE_SET_ATTR_KILL_PRIV, FS_SET_KILL_PRIV },
	};
	unsigned valid = 0;

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (to_set & map[i].fuse)
			valid |= map[i].fs;
	/* ATIME_NOW comes with ATIME set; NOW wins */
	if (valid & FS_SET_ATIME_NOW)
		valid &= ~FS_SET_ATIME;
	if (valid & FS_SET_MTIME_NOW)
		valid &= ~FS_SET_MTIME;
	return valid;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	struct fs_attr in, out;
	struct fs_cred cred;
	int ret;

	if (op_begin(ff, req, FS_OP_SETATTR, &t0) < 0)
		return;

	(void)fi;
	get_cred(req, &cred);
	memset(&in, 0, sizeof(in));
	in.mode = attr->st_mode;
	in.uid = attr->st_uid;
	in.gid = attr->st_gid;
	in.size = (uint64_t)attr->st_size;
	in.atime = attr->st_atim;
	in.mtime = attr->st_mtim;
	in.ctime = attr->st_ctim;
	ret = fs_setattr(ff->fs, &cred, to_ino(ff, ino), &in,
			 setattr_valid(to_set), &out);
	reply_attr(req, ret, &out);
	op_end(ff, FS_OP_SETATTR, t0, ret);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	char buf[FS_PATH_MAX + 1];
	ssize_t n;

	if (op_begin(ff, req, FS_OP_READLINK, &t0) < 0)
		return;

	n = fs_readlink(ff->fs, to_ino(ff, ino), buf, FS_PATH_MAX);
	if (n < 0) {
		reply_err(req, (int)n);
	} else {
		buf[n] = '\0';
		fuse_reply_readlink(req, buf);
	}
	op_end(ff, FS_OP_READLINK, t0, n < 0 ? (int)n : 0);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	struct fs_cred cred;
	struct fs_attr a;
	int ret;

	if (op_begin(ff, req, FS_OP_MKNOD, &t0) < 0)
		return;

	get_cred(req, &cred);
	note_name(ff, to_ino(ff, parent), name);
	ret = fs_mknod(ff->fs, &cred, to_ino(ff, parent), name, mode, rdev,
		       &a);
	reply_entry(req, ret, &a);
	op_end(ff, FS_OP_MKNOD, t0, ret);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	struct fs_cred cred;
	struct fs_attr a;
	int ret;

	if (op_begin(ff, req, FS_OP_MKDIR, &t0) < 0)
		return;

	get_cred(req, &cred);
	note_name(ff, to_ino(ff, parent), name);
	ret = fs_mkdir(ff->fs, &cred, to_ino(ff, parent), name, mode, &a);
	reply_entry(req, ret, &a);
	op_end(ff, FS_OP_MKDIR, t0, ret);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	struct fs_cred cred;
	struct fs_attr a;
	int ret;

	if (op_begin(ff, req, FS_OP_SYMLINK, &t0) < 0)
		return;

	get_cred(req, &cred);
	note_name(ff, to_ino(ff, parent), name);
	ret = fs_symlink(ff->fs, &cred, to_ino(ff, parent), name, link, &a);
	reply_entry(req, ret, &a);
	op_end(ff, FS_OP_SYMLINK, t0, ret);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	struct fs_cred cred;
	int ret;

	if (op_begin(ff, req, FS_OP_UNLINK, &t0) < 0)
		return;

	get_cred(req, &cred);
	ret = fs_unlink(ff->fs, &cred, to_ino(ff, parent), name);
	reply_err(req, ret);
	op_end(ff, FS_OP_UNLINK, t0, ret);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	struct fs_cred cred;
	int ret;

	if (op_begin(ff, req, FS_OP_RMDIR, &t0) < 0)
		return;

	get_cred(req, &cred);
	ret = fs_rmdir(ff->fs, &cred, to_ino(ff, parent), name);
	reply_err(req, ret);
	op_end(ff, FS_OP_RMDIR, t0, ret);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	struct fs_cred cred;
	unsigned f = 0;
	int ret;

	if (op_begin(ff, req, FS_OP_RENAME, &t0) < 0)
		return;

	get_cred(req, &cred);
	if (flags & RENAME_NOREPLACE)
		f |= FS_RENAME_NOREPLACE;
	if (flags & RENAME_EXCHANGE)
		f |= FS_RENAME_EXCHANGE;
	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE))
		ret = -EINVAL;
	else {
		/* the kernel moves its dentry to the new name */
		note_name(ff, to_ino(ff, newparent), newname);
		ret = fs_rename(ff->fs, &cred, to_ino(ff, parent), name,
				to_ino(ff, newparent), newname, f);
	}
	reply_err(req, ret);
	op_end(ff, FS_OP_RENAME, t0, ret);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	struct fs_cred cred;
	struct fs_attr a;
	int ret;

	if (op_begin(ff, req, FS_OP_LINK, &t0) < 0)
		return;

	get_cred(req, &cred);
	note_name(ff, to_ino(ff, newparent), newname);
	ret = fs_link(ff->fs, &cred, to_ino(ff, ino), to_ino(ff, newparent),
		      newname, &a);
	reply_entry(req, ret, &a);
	op_end(ff, FS_OP_LINK, t0, ret);
}

/* ---- files ---- */

/* Open for reading and writing: the mode a shared writable mapping is
 * made from. */
static int rw_open(const struct fuse_file_info *fi)
{
	return (fi->flags & O_ACCMODE) == O_RDWR;
}

/* dlm: count opens for reading and writing (fs_inval_open), @d +1/-1. */
static void note_rw(struct fs_fuse *ff, uint64_t ino,
		    const struct fuse_file_info *fi, int d)
{
	if (ff->iv != NULL && rw_open(fi))
		fs_inval_open(ff->iv, ino, d);
}

/*
 * An open file keeps its pages between opens (nolock: nobody else
 * writes the device; dlm: what another node changed was dropped when
 * the lock left this node, fs_inval.h), and close(2) sends no FLUSH:
 * every write has reached ucfs before it returned, a nolock mount has
 * no POSIX-lock owners to drop (the kernel keeps its locks), and a
 * failed data write is reported by the next fsync (fs_data.c). With
 * writeback_cache the kernel still writes back and flushes at close. A
 * dlm mount needs the FLUSH: it releases the closing process's POSIX
 * locks (fs_plock.h), unless localflocks left them to the kernel.
 */
static void set_open_flags(const struct fs_fuse *ff,
			   struct fuse_file_info *fi)
{
	static uint64_t next_fh;

	fi->noflush = 1;
	fi->keep_cache = 1;
	if (ff->iv != NULL && rw_open(fi)) {
		/* a shared mapping of it may dirty pages with no request:
		 * only pages read under EX (fs_read_ex) may be there, so
		 * the ones read under PR before go now */
		fi->keep_cache = 0;
	}
	if (ff->pk != NULL) {
		/* file locks: a close must drop the closing process's POSIX
		 * locks (FLUSH), and fh names the open file description
		 * whose release drops its OFD locks (fs_plock.h) */
		fi->noflush = 0;
		fi->fh = __atomic_add_fetch(&next_fh, 1, __ATOMIC_RELAXED);
	}
}

static void op_open(fuse_req_t req, fuse_ino_t ino,
		    struct fuse_file_info *fi)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	struct fs_cred cred;
	int ret;

	if (op_begin(ff, req, FS_OP_OPEN, &t0) < 0)
		return;

	get_cred(req, &cred);
	ret = fs_open(ff->fs, &cred, to_ino(ff, ino), fi->flags);
	if (ret == 0) {
		set_open_flags(ff, fi);
		note_rw(ff, to_ino(ff, ino), fi, 1);
		if (fuse_reply_open(req, fi) == -ENOENT) {
			note_rw(ff, to_ino(ff, ino), fi, -1);
			fs_release(ff->fs, to_ino(ff, ino));
		}
	} else {
		reply_err(req, ret);
	}
	op_end(ff, FS_OP_OPEN, t0, ret);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	struct fuse_entry_param e;
	struct fs_cred cred;
	struct fs_attr a;
	int ret;

	if (op_begin(ff, req, FS_OP_CREATE, &t0) < 0)
		return;

	get_cred(req, &cred);
	note_name(ff, to_ino(ff, parent), name);
	ret = fs_create(ff->fs, &cred, to_ino(ff, parent), name, mode,
			fi->flags, &a);
	/*
	 * The kernel sends CREATE only after a LOOKUP found no such name;
	 * on a cluster mount another node may create it in between. An
	 * open(O_CREAT) without O_EXCL must then open that file: -ESTALE
	 * makes the VFS redo the whole open once with LOOKUP_REVAL (as for
	 * NFS), which finds the name, checks permissions, applies O_TRUNC.
	 */
	if (ret == -EEXIST && !(fi->flags & O_EXCL))
		ret = -ESTALE;
	if (ret == 0) {
		fill_entry(ff, &a, &e);
		set_open_flags(ff, fi);
		note_rw(ff, a.ino, fi, 1);
		if (fuse_reply_create(req, &e, fi) == -ENOENT) {
			note_rw(ff, a.ino, fi, -1);
			fs_release(ff->fs, a.ino);
			forget_ino(ff, a.ino, 1);
		}
	} else {
		reply_err(req, ret);
	}
	op_end(ff, FS_OP_CREATE, t0, ret);
}

/*
 * Read replies go through one buffer per worker thread, kept between
 * requests (a fresh 1 MiB malloc per read costs 256 page faults) and
 * 4 KiB-aligned so the file layer can read whole blocks straight into it.
 */
struct rbuf {
	char *p;
	size_t cap;
};

static pthread_key_t rbuf_key;
static pthread_once_t rbuf_once = PTHREAD_ONCE_INIT;

static void rbuf_free(void *arg)
{
	struct rbuf *rb = arg;

	free(rb->p);
	free(rb);
}

static void rbuf_key_init(void)
{
	pthread_key_create(&rbuf_key, rbuf_free);
}

char *fs_fuse_rbuf(size_t size)
{
	struct rbuf *rb;

	pthread_once(&rbuf_once, rbuf_key_init);
	rb = pthread_getspecific(rbuf_key);
	if (rb == NULL) {
		rb = calloc(1, sizeof(*rb));
		if (rb == NULL || pthread_setspecific(rbuf_key, rb) != 0) {
			free(rb);
			return NULL;
		}
	}
	if (rb->cap < size) {
		size_t cap = (size + 4095) & ~(size_t)4095;
		void *p = NULL;

		if (posix_memalign(&p, 4096, cap) != 0)
			return NULL;
		free(rb->p);
		rb->p = p;
		rb->cap = cap;
	}
	return rb->p;
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	ssize_t n = -ENOMEM;
	char *buf;

	if (op_begin(ff, req, FS_OP_READ, &t0) < 0)
		return;

	(void)fi;
	buf = fs_fuse_uring_reply_buf(size);
	if (buf == NULL)
		buf = fs_fuse_rbuf(size > 0 ? size : 1);
	/* dlm: a page this fills may be dirtied by a shared mapping */
	if (buf != NULL && ff->iv != NULL &&
	    fs_inval_writable(ff->iv, to_ino(ff, ino)))
		n = fs_read_ex(ff->fs, to_ino(ff, ino), buf, size,
			       (uint64_t)off);
	else if (buf != NULL)
		n = fs_read(ff->fs, to_ino(ff, ino), buf, size, (uint64_t)off);
	if (n < 0)
		reply_err(req, (int)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	op_end(ff, FS_OP_READ, t0, n < 0 ? (int)n : 0);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	struct fs_cred cred;
	ssize_t n;

	if (op_begin(ff, req, FS_OP_WRITE, &t0) < 0)
		return;

	get_cred(req, &cred);
	/* a page written back (mapping) goes where it was, append or not */
	if ((fi->flags & O_APPEND) && !fi->writepage)
		cred.flags |= FS_CRED_APPEND;
	n = fs_write(ff->fs, &cred, to_ino(ff, ino), buf, size,
		     (uint64_t)off);
	if (n < 0)
		reply_err(req, (int)n);
	else
		fuse_reply_write(req, (size_t)n);
	op_end(ff, FS_OP_WRITE, t0, n < 0 ? (int)n : 0);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino,
		     struct fuse_file_info *fi)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	int ret = 0;

	if (op_begin(ff, req, FS_OP_FLUSH, &t0) < 0)
		return;

	/* with writeback_cache the kernel wrote the dirty pages back before
	 * this, nothing is buffered here; with file locks (set_open_flags)
	 * the closing process's POSIX locks go */
	if (ff->pk != NULL)
		ret = fs_plock_flush(ff->pk, to_ino(ff, ino), fi->lock_owner);
	reply_err(req, ret);
	op_end(ff, FS_OP_FLUSH, t0, ret);
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;

	if (op_begin(ff, req, FS_OP_RELEASE, &t0) < 0)
		return;

	if (ff->pk != NULL)
		fs_plock_release(ff->pk, to_ino(ff, ino), fi);
	note_rw(ff, to_ino(ff, ino), fi, -1);
	fs_release(ff->fs, to_ino(ff, ino));
	reply_err(req, 0);
	op_end(ff, FS_OP_RELEASE, t0, 0);
}

/* ---- file locks (dlm mounts only: op_init asks for them there) ---- */

static void op_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		     struct flock *lock)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;

	if (op_begin(ff, req, FS_OP_GETLK, &t0) < 0)
		return;
	if (ff->pk != NULL)
		fs_plock_getlk(ff->pk, req, to_ino(ff, ino), fi, lock);
	else
		reply_err(req, -ENOSYS);
	op_end(ff, FS_OP_GETLK, t0, 0);
}

/* A lock that waits is answered later by fs_plock.c, from the lock
 * manager's callback thread: op_end counts the handler's own time. */
static void op_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		     struct flock *lock, int sleep)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;

	if (op_begin(ff, req, FS_OP_SETLK, &t0) < 0)
		return;
	if (ff->pk != NULL)
		fs_plock_setlk(ff->pk, req, to_ino(ff, ino), fi, lock, sleep);
	else
		reply_err(req, -ENOSYS);
	op_end(ff, FS_OP_SETLK, t0, 0);
}

static void op_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		     int op)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;

	if (op_begin(ff, req, FS_OP_FLOCK, &t0) < 0)
		return;
	if (ff->pk != NULL)
		fs_plock_flock(ff->pk, req, to_ino(ff, ino), fi, op);
	else
		reply_err(req, -ENOSYS);
	op_end(ff, FS_OP_FLOCK, t0, 0);
}

/* fsync and fsyncdir: both commit the journal (and with it every data
 * write issued before) and flush the device. */
static void do_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     enum fs_op op)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	int ret;

	if (op_begin(ff, req, op, &t0) < 0)
		return;

	ret = fs_fsync(ff->fs, to_ino(ff, ino), datasync);
	reply_err(req, ret);
	op_end(ff, op, t0, ret);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	(void)fi;
	do_fsync(req, ino, datasync, FS_OP_FSYNC);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode,
			 off_t off, off_t len, struct fuse_file_info *fi)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	struct fs_cred cred;
	int ret;

	if (op_begin(ff, req, FS_OP_FALLOCATE, &t0) < 0)
		return;

	(void)fi;
	get_cred(req, &cred);
	if (off < 0 || len <= 0)
		ret = -EINVAL;
	else
		ret = fs_fallocate(ff->fs, &cred, to_ino(ff, ino), mode,
				   (uint64_t)off, (uint64_t)len);
	reply_err(req, ret);
	op_end(ff, FS_OP_FALLOCATE, t0, ret);
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0, pos = 0;
	int ret;

	if (op_begin(ff, req, FS_OP_LSEEK, &t0) < 0)
		return;

	(void)fi;
	ret = off < 0 ? -ENXIO
		      : fs_lseek(ff->fs, to_ino(ff, ino), (uint64_t)off, whence,
				 &pos);
	if (ret == 0)
		fuse_reply_lseek(req, (off_t)pos);
	else
		reply_err(req, ret);
	op_end(ff, FS_OP_LSEEK, t0, ret);
}

/*
 * copy_file_range: block-aligned ranges are shared (reflink), the rest
 * copied device to device (fs_copy.c). This is the only way to reflink
 * through a mount: FICLONE/FICLONERANGE never reach a FUSE daemon (the
 * VFS handles them through ->remap_file_range, which FUSE does not
 * implement in 6.1 or 6.18, and fails with EOPNOTSUPP: `cp
 * --reflink=always` fails, plain `cp` shares through copy_file_range).
 */
static void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			       struct fuse_file_info *fi_in, fuse_ino_t ino_out,
			       off_t off_out, struct fuse_file_info *fi_out,
			       size_t len, int flags)
{
	struct fs_fuse *ff = ff_of(req);
	struct fs_cred cred;
	uint64_t t0;
	ssize_t n;

	if (op_begin(ff, req, FS_OP_COPY_FILE_RANGE, &t0) < 0)
		return;

	(void)fi_in;
	(void)fi_out;
	get_cred(req, &cred);
	if (off_in < 0 || off_out < 0 || flags < 0)
		n = -EINVAL;
	else
		n = fs_copy_file_range(ff->fs, &cred, to_ino(ff, ino_in),
				       (uint64_t)off_in, to_ino(ff, ino_out),
				       (uint64_t)off_out, len, (unsigned)flags);
	if (n >= 0)
		fuse_reply_write(req, (size_t)n);
	else
		reply_err(req, (int)n);
	op_end(ff, FS_OP_COPY_FILE_RANGE, t0, n < 0 ? (int)n : 0);
}

/* ---- directories ---- */

/*
 * opendir answers at once with keep_cache and cache_readdir: the kernel
 * then keeps the listing in the directory's page cache and a later
 * opendir reads it from there, until the directory changes on this node
 * or (dlm) its mtime moved once its attributes were dropped (fs_inval.h).
 * Without an opendir handler (FUSE_CAP_NO_OPENDIR_SUPPORT, which saves
 * the OPENDIR and RELEASEDIR round trips) Linux 6.18 did not reuse the
 * listing: every warm du -s of 15,613 files read all 791 directories
 * again (READDIRPLUS + READDIR each); with it a warm du makes 1,582
 * cheap requests instead and took 53 ms instead of 299 (nolock, median
 * of 5, load 8). Directory handles carry nothing: readdir works by inode.
 */

static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;

	if (op_begin(ff, req, FS_OP_OPENDIR, &t0) < 0)
		return;
	(void)ino;
	fi->keep_cache = 1;
	fi->cache_readdir = 1;
	fuse_reply_open(req, fi);
	op_end(ff, FS_OP_OPENDIR, t0, 0);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;

	if (op_begin(ff, req, FS_OP_RELEASEDIR, &t0) < 0)
		return;
	(void)ino;
	(void)fi;
	reply_err(req, 0);
	op_end(ff, FS_OP_RELEASEDIR, t0, 0);
}

struct dirbuf {
	struct fs_fuse *ff;
	uint64_t dir; /* fs ino */
	fuse_req_t req;
	char *buf;
	size_t size;
	size_t used;
	int plus;
};

static int fill_dir(void *arg, const struct fs_dirent *de,
		    const struct fs_attr *attr)
{
	struct dirbuf *d = arg;
	char name[FS_NAME_MAX + 1];
	struct fuse_entry_param e;
	size_t need;

	memcpy(name, de->name, de->namelen);
	name[de->namelen] = '\0';
	if (!d->plus) {
		struct stat st;

		memset(&st, 0, sizeof(st));
		st.st_ino = to_nodeid(d->ff, de->ino);
		st.st_mode = DTTOIF(de->type);
		need = fuse_add_direntry(d->req, d->buf + d->used,
					 d->size - d->used, name, &st,
					 (off_t)de->next);
	} else if (attr != NULL) {
		note_name(d->ff, d->dir, name);
		fill_entry(d->ff, attr, &e);
		need = fuse_add_direntry_plus(d->req, d->buf + d->used,
					      d->size - d->used, name, &e,
					      (off_t)de->next);
	} else {
		/* "." and "..", and entries the kernel already has
		 * (FS_READDIR_BARE): nodeid 0, no entry, no reference */
		memset(&e, 0, sizeof(e));
		e.attr.st_ino = to_nodeid(d->ff, de->ino);
		e.attr.st_mode = DTTOIF(de->type);
		need = fuse_add_direntry_plus(d->req, d->buf + d->used,
					      d->size - d->used, name, &e,
					      (off_t)de->next);
	}
	if (need > d->size - d->used)
		return 1;
	d->used += need;
	return 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, int plus)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	struct dirbuf d = {.ff = ff,
			   .req = req,
			   .size = size,
			   .plus = plus,
			   .dir = to_ino(ff, ino)};
	int ret = -ENOMEM;

	if (op_begin(ff, req, plus ? FS_OP_READDIRPLUS : FS_OP_READDIR,
		     &t0) < 0)
		return;

	d.buf = malloc(size > 0 ? size : 1);
	/* the next level's statahead waits for the reply (fs_statahead.h) */
	fs_sa_defer_begin();
	if (d.buf != NULL)
		ret = fs_readdir(ff->fs, to_ino(ff, ino), (uint64_t)off,
				 plus ? FS_READDIR_PLUS | FS_READDIR_BARE : 0,
				 fill_dir, &d);
	if (ret < 0)
		reply_err(req, ret);
	else
		fuse_reply_buf(req, d.buf, d.used);
	free(d.buf);
	op_end(ff, plus ? FS_OP_READDIRPLUS : FS_OP_READDIR, t0, ret);
	fs_sa_defer_end();
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, 1);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	(void)fi;
	do_fsync(req, ino, datasync, FS_OP_FSYNCDIR);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	struct statvfs sv;
	int ret;

	if (op_begin(ff, req, FS_OP_STATFS, &t0) < 0)
		return;

	(void)ino;
	ret = fs_statfs(ff->fs, &sv);
	if (ret < 0)
		reply_err(req, ret);
	else
		fuse_reply_statfs(req, &sv);
	op_end(ff, FS_OP_STATFS, t0, ret);
}

/* ---- xattrs ---- */

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	struct fs_cred cred;
	int ret;

	if (op_begin(ff, req, FS_OP_SETXATTR, &t0) < 0)
		return;

	get_cred(req, &cred);
	ret = fs_setxattr(ff->fs, &cred, to_ino(ff, ino), name, value, size,
			  flags);
	reply_err(req, ret);
	op_end(ff, FS_OP_SETXATTR, t0, ret);
}

/* getxattr/listxattr share the "size 0 asks for the size" protocol. */
static void reply_xattr(fuse_req_t req, ssize_t n, const void *buf,
			size_t size)
{
	if (n < 0)
		reply_err(req, (int)n);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	char *buf = NULL;
	ssize_t n = -ENOMEM;

	if (op_begin(ff, req, FS_OP_GETXATTR, &t0) < 0)
		return;

	if (size > FS_XATTR_SIZE_MAX)
		size = FS_XATTR_SIZE_MAX;
	if (size == 0 || (buf = malloc(size)) != NULL)
		n = fs_getxattr(ff->fs, to_ino(ff, ino), name, buf, size);
	reply_xattr(req, n, buf, size);
	free(buf);
	op_end(ff, FS_OP_GETXATTR, t0, n < 0 ? (int)n : 0);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	char *buf = NULL;
	ssize_t n = -ENOMEM;

	if (op_begin(ff, req, FS_OP_LISTXATTR, &t0) < 0)
		return;

	if (size > FS_XATTR_SIZE_MAX)
		size = FS_XATTR_SIZE_MAX;
	if (size == 0 || (buf = malloc(size)) != NULL)
		n = fs_listxattr(ff->fs, to_ino(ff, ino), buf, size);
	reply_xattr(req, n, buf, size);
	free(buf);
	op_end(ff, FS_OP_LISTXATTR, t0, n < 0 ? (int)n : 0);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct fs_fuse *ff = ff_of(req);
	uint64_t t0;
	struct fs_cred cred;
	int ret;

	if (op_begin(ff, req, FS_OP_REMOVEXATTR, &t0) < 0)
		return;

	get_cred(req, &cred);
	ret = fs_removexattr(ff->fs, &cred, to_ino(ff, ino), name);
	reply_err(req, ret);
	op_end(ff, FS_OP_REMOVEXATTR, t0, ret);
}

static const struct fuse_lowlevel_ops ucfs_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.create = op_create,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.fallocate = op_fallocate,
	.lseek = op_lseek,
	.copy_file_range = op_copy_file_range,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.getlk = op_getlk,
	.setlk = op_setlk,
	.flock = op_flock,
};

/* ---- session ---- */

/* Append "fsname=<device>" with libfuse's escapes for ',' and '\'. */
static int add_fsname(char *s, size_t len, const char *device)
{
	size_t n = strlen(s);

	n += (size_t)snprintf(s + n, len - n, "%sfsname=", n ? "," : "");
	for (; *device != '\0' && n + 3 < len; device++) {
		if (*device == ',' || *device == '\\')
			s[n++] = '\\';
		s[n++] = *device;
	}
	if (*device != '\0')
		return -E2BIG;
	s[n] = '\0';
	return 0;
}

/* The kernel checks permissions (default_permissions) on every mount
 * but a pass-through one that only its root owner can reach: there the
 * lower filesystem's own checks, made as the caller, are the only ones
 * (fs_pt.h), and the kernel does not refetch a directory's attributes
 * after each change in it to check them again. */
static int build_fuse_opts(const struct fs_opts *o, const char *device, char *s,
			   size_t len)
{
	const char *given;
	size_t m, k;
	int n;

	n = snprintf(
	    s, len, "%s%s%ssubtype=ucfs%s%s%s", o->fuse, o->fuse[0] ? "," : "",
	    o->passthrough && !o->allow_other ? "" : "default_permissions,",
	    o->ro ? ",ro" : "", o->atime == FS_ATIME_NOATIME ? ",noatime" : "",
	    o->allow_other ? ",allow_other" : "");
	if (n < 0 || (size_t)n >= len)
		return -E2BIG;
	/* the lens splices read replies: no larger than its pipes hold */
	given = strstr(o->fuse, "max_read=");
	m = fs_fuse_io_max_read(
	    MAX_WRITE, given == NULL ? 0 : strtoul(given + 9, NULL, 10),
	    o->passthrough);
	if (m > 0) {
		k = strlen(s);
		n = snprintf(s + k, len - k, ",max_read=%zu", m);
		if (n < 0 || (size_t)n >= len - k)
			return -E2BIG;
	}
	if (strstr(o->fuse, "fsname=") == NULL)
		return add_fsname(s, len, device);
	return 0;
}

/*
 * The kernel's readahead for this mount: FUSE caps it at 128 KiB whatever
 * max_readahead says, so write the bdi's read_ahead_kb. The bdi is named
 * after the mount's device number, found in /proc/self/mountinfo (a
 * stat() of the mountpoint would be a FUSE request the loop cannot serve
 * yet). Best effort.
 */
static void set_readahead(const char *mountpoint, unsigned kb)
{
	char line[4096], dev[64] = "", mnt[PATH_MAX_LEN], path[128];
	FILE *f = fopen("/proc/self/mountinfo", "r");

	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		char d[64];

		if (sscanf(line, "%*u %*u %63s %*s %4095s", d, mnt) == 2 &&
		    strcmp(mnt, mountpoint) == 0)
			snprintf(dev, sizeof(dev), "%s", d);	/* last wins */
	}
	fclose(f);
	if (dev[0] == '\0')
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	f = fopen(path, "w");
	if (f == NULL)
		return;
	fprintf(f, "%u\n", kb);
	fclose(f);
}

/* The "namespace" stats section: fs_ns.h counters and the size of the
 * reference table. Runs on the stats thread. */
static void ns_section(struct fs_json *o, void *arg)
{
	struct fs_ns *ns = ((struct fs *)arg)->ns;
	const struct fs_ns_stats *st = &ns->st;
	size_t refs, lru;

	pthread_mutex_lock(&ns->tbl_lock);
	refs = ns->count;
	lru = ns->nlru;
	pthread_mutex_unlock(&ns->tbl_lock);
	fs_json_u64(o, "inodes_referenced", refs);
	fs_json_u64(o, "inode_max", ns->inode_max);
	fs_json_u64(o, "inode_bound", ns->bound);
	fs_json_u64(o, "inodes_lru_now", lru);
	fs_json_u64(o, "root_ino", ns->root);
#define NS_U64(f) fs_json_u64(o, #f, __atomic_load_n(&st->f, __ATOMIC_RELAXED))
	NS_U64(inodes_created);
	NS_U64(new_inode_refused);
	NS_U64(new_inode_waits);
	NS_U64(new_inode_unlocked);
	NS_U64(inodes_freed);
	NS_U64(orphans_added);
	NS_U64(orphans_reclaimed);
	NS_U64(orphans_adopted);
	NS_U64(leftover_slots);
	NS_U64(iopen_frees_now);
	NS_U64(iopen_frees_later);
	NS_U64(iopen_in_use);
	NS_U64(iopen_late);
	NS_U64(iopen_late_taken);
	NS_U64(readdir_bare);
	NS_U64(statahead_descends);
	NS_U64(statahead_after_reply);
	NS_U64(data_read_bytes);
	NS_U64(data_write_bytes);
	NS_U64(rmw_blocks);
	NS_U64(inline_to_extents);
	NS_U64(unwritten_allocated);
	NS_U64(unwritten_converted);
	NS_U64(copy_bytes);
	NS_U64(clone_bytes);
	NS_U64(cow_blocks);
	NS_U64(iprune_rounds);
	NS_U64(iprune_asked);
	NS_U64(iprune_refused);
#undef NS_U64
}

/* How requests reach ucfs (fs_fuse_io.c, fs_fuse_uring.c). */
static void transport_section(struct fs_json *o, void *arg)
{
	uint64_t ring;
	uint32_t mw, mp;

	(void)arg;
	fs_fuse_io_limits(&mw, &mp);
	fs_json_str(o, "name", fs_fuse_io_transport(&ring));
	fs_json_u64(o, "max_write", mw);
	fs_json_u64(o, "max_pages", mp);
	fs_json_u64(o, "ring_requests", ring);
	fs_json_bool(o, "killpriv_v2", fs_fuse_io_killpriv_v2());
	fs_json_u64(o, "spliced_reads", fs_fuse_io_spliced_reads());
	fs_json_u64(o, "spliced_writes", fs_fuse_io_spliced_writes());
}

/* The backend's own sections: a ucfs mount's, or the pass-through's. */
static int add_sections(struct fs_fuse *ff)
{
	int ret;

	if (ff->pt != NULL)
		return fs_pt_stats_add(ff->pt, ff->st);
	ret = 0;
	if (ff->cl != NULL)
		ret = fs_cluster_stats_add(ff->cl, ff->st);
	if (ret == 0)
		ret = fs_stats_add_fs(ff->st, ff->fs);
	if (ret == 0)
		ret = fs_stats_add_section(ff->st, "namespace", ns_section,
					   ff->fs);
	return ret;
}

static void remove_sections(struct fs_fuse *ff)
{
	fs_stats_remove_section(ff->st, "transport");
	if (ff->pt != NULL) {
		fs_pt_stats_remove(ff->pt, ff->st);
		return;
	}
	if (ff->pk != NULL)
		fs_plock_stats_remove(ff->pk, ff->st);
	if (ff->sink != NULL)
		fs_stats_remove_section(ff->st, "kcache");
	fs_stats_remove_section(ff->st, "namespace");
	fs_stats_remove_fs(ff->st);
	if (ff->cl != NULL)
		fs_cluster_stats_remove(ff->cl, ff->st);
}

static void stop_stats(struct fs_fuse *ff)
{
	if (ff->st == NULL)
		return;
	remove_sections(ff); /* detaches the trace from the lock code */
	fs_stats_mount_stop(ff->st);
	fs_stats_free(ff->st);
	ff->st = NULL;
}

static int start_stats(struct fs_fuse *ff, const struct fs_stats_opts *so,
		       const char *device, const char *mountpoint,
		       const char *optstr, char *err, size_t errlen)
{
	int node = ff->cl != NULL ? (int)fs_cluster_node(ff->cl) : 0, ret;

	ret = fs_stats_new(&ff->st);
	if (ret < 0)
		return ret;
	fs_stats_set_node(ff->st, node, ff->cl != NULL ? (int)ff->fs->slot : 0);
	ret = fs_stats_set_mount(ff->st, device, mountpoint, optstr);
	/* the trace first: the sections' owners attach it (lock events) */
	if (ret == 0)
		ret = fs_stats_mount_start(ff->st, so, node, err, errlen);
	if (ret < 0) {
		fs_stats_free(ff->st);
		ff->st = NULL;
		return ret;
	}
	ret = add_sections(ff);
	if (ret == 0)
		ret = fs_stats_add_section(ff->st, "transport",
					   transport_section, NULL);
	if (ret == 0 && ff->pk != NULL)
		ret = fs_plock_stats_add(ff->pk, ff->st);
	if (ret < 0)
		stop_stats(ff);
	return ret;
}


/*
 * The kernel offers FUSE_OVER_IO_URING only while the fuse module's
 * enable_uring parameter is set (off by default). uring=on sets it (it
 * lets every FUSE daemon that asks for io_uring use it and changes
 * nothing for the others) and refuses to mount if it cannot; uring=auto
 * uses io_uring only if the administrator set it.
 */
static int enable_kernel_uring(enum fs_uring_mode mode, char *err,
			       size_t errlen)
{
	static const char param[] = "/sys/module/fuse/parameters/enable_uring";
	char c = 0;
	FILE *f;

	if (mode != FS_URING_ON)
		return 0;
	f = fopen(param, "r");
	if (f != NULL) {
		c = (char)fgetc(f);
		fclose(f);
	}
	if (c == 'Y')
		return 0;
	f = fopen(param, "w");
	if (f != NULL && fputs("Y\n", f) < 0) {
		fclose(f);
		f = NULL;
	}
	if (f != NULL && fclose(f) == 0)
		return 0;
	snprintf(err, errlen, "ucfs: uring=on: cannot enable FUSE over io_uring "
		 "(%s: %s; needs Linux 6.14+ with CONFIG_FUSE_IO_URING, and "
		 "root)", param, strerror(errno));
	return -EOPNOTSUPP;
}

/* Create the session of @ff (its backend set) with @ops and mount it. */
static int session_start(struct fs_fuse *ff,
			 const struct fuse_lowlevel_ops *ops, size_t ops_size,
			 void *userdata, const struct fs_opts *o,
			 const struct fs_stats_opts *so, const char *optstr,
			 const char *device, const char *mountpoint, char *err,
			 size_t errlen)
{
	char opts[FS_OPTS_FUSE_MAX + FS_PATH_MAX + 128];
	char *argv[5];
	struct fuse_args args;
	int argc = 0, ret;

	ret = build_fuse_opts(o, device, opts, sizeof(opts));
	if (ret < 0) {
		snprintf(err, errlen, "ucfs: mount options too long");
		return ret;
	}
	argv[argc++] = (char *)"ucfs";
	argv[argc++] = (char *)"-o";
	argv[argc++] = opts;
	if (o->debug)
		argv[argc++] = (char *)"-d";
	argv[argc] = NULL;
	args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
	ff->se = fuse_session_new(&args, ops, ops_size, userdata);
	/* libfuse's option parser leaves @args pointing at its own copy */
	fuse_opt_free_args(&args);
	if (ff->se == NULL) {
		snprintf(err, errlen, "ucfs: libfuse refused options '%s'",
			 opts);
		return -EINVAL;
	}
	ret = enable_kernel_uring(o->uring, err, errlen);
	if (ret < 0)
		goto out_session;
	if (fuse_session_mount(ff->se, mountpoint) != 0) {
		snprintf(err, errlen, "ucfs: cannot mount on '%s'", mountpoint);
		ret = -EIO;
		goto out_session;
	}
	ff->mounted = 1;
	ret = fs_fuse_io_attach(ff->se, o->uring, MAX_WRITE);
	if (ret < 0) {
		snprintf(err, errlen, "ucfs: cannot attach to /dev/fuse");
		goto out_unmount;
	}
	set_readahead(mountpoint, o->readahead_kb);
	ret = start_stats(ff, so, device, mountpoint, optstr, err, errlen);
	if (ret < 0)
		goto out_unmount;
	return 0;

out_unmount:
	fuse_session_unmount(ff->se);
out_session:
	fuse_session_destroy(ff->se);
	return ret;
}

/* The kernel cache sink (fs_inval.h), before the loop starts (INIT
 * reads ff->sink); dlm: ff->iv, the kernel's caches kept coherent. */
static int kcache_start(struct fs_fuse *ff)
{
	int ret;

	ret = fs_inval_new(ff->se, ff->root, &ff->sink);
	if (ret < 0)
		return ret;
	if (ff->cl != NULL)
		ff->iv = ff->sink;
	if (ff->st != NULL)
		ret = fs_stats_add_section(ff->st, "kcache", fs_inval_stats,
					   ff->sink);
	if (ret < 0)
		return ret;
	fs_set_inval(ff->fs, fs_inval_ops(), ff->sink);
	return 0;
}

int fs_fuse_new(struct fs *fs, const struct fs_opts *o,
		const struct fs_stats_opts *so, const char *optstr,
		const char *device, const char *mountpoint,
		struct fs_fuse **out, char *err, size_t errlen)
{
	struct fs_fuse *ff;
	int ret;

	ff = calloc(1, sizeof(*ff));
	if (ff == NULL)
		return -ENOMEM;
	ff->fs = fs;
	ff->cl = fs->cl;
	ff->timeout = CACHE_TIMEOUT;
	ff->root = fs_root(fs);
	/* cluster-wide file locks on a dlm mount unless localflocks leaves
	 * them to this machine's kernel (ff->pk NULL: as nolock); every
	 * node the same */
	if (fs->cl != NULL) {
		ret = fs_plock_agree(fs_cluster_ls(fs->cl), o->localflocks,
				     &ff->flmode);
		if (ret == -EAGAIN)
			snprintf(err, errlen,
				 "ucfs: the nodes mounted now use %s: "
				 "every node must mount %s localflocks",
				 o->localflocks ? "cluster-wide file locks"
						: "localflocks",
				 o->localflocks ? "without" : "with");
		else if (ret < 0)
			snprintf(err, errlen,
				 "ucfs: cannot take the localflocks "
				 "agreement's lock: %s",
				 strerror(-ret));
		if (ret < 0)
			goto out_free;
	}
	if (fs->cl != NULL && !o->localflocks) {
		ret = fs_plock_new(fs_cluster_ls(fs->cl), &ff->pk);
		if (ret < 0)
			goto out_free;
	}
	ret = session_start(ff, &ucfs_ops, sizeof(ucfs_ops), ff, o, so, optstr,
			    device, mountpoint, err, errlen);
	if (ret < 0)
		goto out_free;
	ret = kcache_start(ff);
	if (ret < 0) {
		snprintf(err, errlen,
			 "ucfs: cannot start the kernel cache notifications: %s",
			 strerror(-ret));
		fs_fuse_free(ff);
		return ret;
	}
	*out = ff;
	return 0;

out_free:
	fs_plock_free(ff->pk);
	fs_plock_agree_end(ff->flmode);
	free(ff);
	return ret;
}

int fs_fuse_new_pt(struct fs_pt *pt, const struct fs_opts *o,
		   const struct fs_stats_opts *so, const char *optstr,
		   const char *dir, const char *mountpoint,
		   struct fs_fuse **out, char *err, size_t errlen)
{
	const struct fuse_lowlevel_ops *ops;
	struct fs_fuse *ff;
	size_t size;
	int ret;

	ff = calloc(1, sizeof(*ff));
	if (ff == NULL)
		return -ENOMEM;
	ff->pt = pt;
	ops = fs_pt_ops(&size);
	ret = session_start(ff, ops, size, pt, o, so, optstr, dir, mountpoint,
			    err, errlen);
	if (ret < 0) {
		free(ff);
		return ret;
	}
	*out = ff;
	return 0;
}

int fs_fuse_loop(struct fs_fuse *ff, int single_thread)
{
	struct fuse_loop_config *cfg;
	int ret;

	if (fuse_set_signal_handlers(ff->se) != 0)
		return -EIO;
	if (single_thread) {
		ret = fuse_session_loop(ff->se);
	} else {
		cfg = fuse_loop_cfg_create();
		if (cfg == NULL) {
			ret = -ENOMEM;
			goto out_signals;
		}
		fuse_loop_cfg_set_clone_fd(cfg, 0);
		fuse_loop_cfg_set_idle_threads(cfg, 8);
		ret = fuse_session_loop_mt(ff->se, cfg);
		fuse_loop_cfg_destroy(cfg);
	}
	if (ret > 0)
		ret = 0;	/* terminated by a signal */
	fs_fuse_io_detach();
out_signals:
	fuse_remove_signal_handlers(ff->se);
	return ret;
}

/*
 * The sink goes first (no lock demote reaches the kernel any more), then
 * the mount: that fails every request still in flight, so a page
 * invalidation waiting for one ends, and the sink's threads can stop.
 */
void fs_fuse_free(struct fs_fuse *ff)
{
	if (ff == NULL)
		return;
	if (ff->sink != NULL)
		fs_set_inval(ff->fs, NULL, NULL);
	if (ff->mounted)
		fuse_session_unmount(ff->se);
	ff->mounted = 0;
	fs_fuse_io_detach();
	stop_stats(ff);
	fs_inval_free(ff->sink);
	fuse_session_destroy(ff->se);
	fs_plock_free(ff->pk);
	fs_plock_agree_end(ff->flmode);
	free(ff);
}
