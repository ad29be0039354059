/*
 * fs_pt_ops.c — the pass-through request handlers: each forwards one FUSE
 * request to the lower directory with the caller's credentials and
 * replies with what the lower filesystem said (its errno included).
 *
 * Every handler is bracketed by req_begin()/req_end(): the per-op
 * counters and latency of fs_stats.h, as for ucfs, plus the time spent
 * inside the lower filesystem's system calls and in turning file handles
 * into descriptors (fs_pt_internal.h's pt_done), which the "passthrough"
 * stats section reports per op (fs_pt.c).
 *
 * A request on an inode first gets the inode's O_PATH descriptor
 * (pt_fd_get: as root, open_by_handle_at needs it), then switches to the
 * caller (pt_cred_caller) and makes its calls. What needs a real open
 * (I/O, xattrs, truncate without a file handle) goes through
 * /proc/self/fd/N, as the caller: the lower filesystem checks the
 * caller's permissions on that open.
 *
 * Open files and directories are lower descriptors held in fi->fh for
 * the life of the open (a directory's with its getdents buffer).
 *
 * Sections: request bracket and replies; init; namespace; files;
 * directories; xattrs; the ops table.
 */
#include "fusefs/fuse/fs_fuse.h"
#include "fusefs/fuse/fs_fuse_io.h"
#include "fusefs/fuse/fs_fuse_uring.h"
#include "fusefs/passthrough/fs_pt_internal.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#define PT_MAX_WRITE (1u << 20)
#define PT_DIRBUF (32 * 1024)

/* ---- request bracket and replies ---- */

static void req_begin(struct pt_req *r, fuse_req_t req, enum fs_op op)
{
	r->pt = fuse_req_userdata(req);
	r->req = req;
	r->op = op;
	r->t0 = fs_stats_op_begin();
	r->lower_ns = 0;
	r->resolve_ns = 0;
	r->calls = 0;
	r->t_reply = 0;
}

static void req_end(struct pt_req *r, int err)
{
	struct pt_op_acct *a = &r->pt->acct[r->op];

	if (r->calls > 0) {
		atomic_fetch_add_explicit(&a->calls, r->calls,
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&a->lower_ns, r->lower_ns,
					  memory_order_relaxed);
	}
	if (r->resolve_ns > 0)
		atomic_fetch_add_explicit(&a->resolve_ns, r->resolve_ns,
					  memory_order_relaxed);
	if (r->t_reply != 0)
		atomic_fetch_add_explicit(&a->reply_ns, pt_now() - r->t_reply,
					  memory_order_relaxed);
	fs_stats_op_end(r->pt->st, r->op, r->t0, err);
}

/* Every reply goes out through this: from here on the time is the reply's
 * (libfuse and the write to /dev/fuse that wakes the caller). */
static fuse_req_t replying(struct pt_req *r)
{
	r->t_reply = pt_now();
	return r->req;
}

static void reply_err(fuse_req_t req, int ret)
{
	fuse_reply_err(req, ret < 0 ? -ret : ret);
}

/* The inode of @nodeid and its O_PATH fd (put it with inode_put). */
static int inode_fd(struct pt_req *r, fuse_ino_t nodeid, struct pt_inode **pi)
{
	*pi = pt_inode_get(r->pt, nodeid);
	if (*pi == NULL)
		return -ESTALE;
	return pt_fd_get(r, *pi);
}

static void inode_put(struct pt_req *r, struct pt_inode *pi, int fd)
{
	if (pi != NULL && fd >= 0)
		pt_fd_put(r->pt, pi, fd);
}

/* inode_fd(), then the caller's identity for the calls that follow
 * (@create: and its umask). */
static int inode_fd_as_caller(struct pt_req *r, fuse_ino_t nodeid,
			      struct pt_inode **pi, int create)
{
	int fd = inode_fd(r, nodeid, pi), ret;

	if (fd < 0)
		return fd;
	ret = pt_cred_caller(r, create);
	if (ret < 0) {
		inode_put(r, *pi, fd);
		return ret;
	}
	return fd;
}

static void fill_entry(const struct fs_pt *pt, const struct pt_inode *pi,
		       const struct stat *st, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = pi->nodeid;
	e->generation = 0; /* nodeids are never reused */
	e->attr = *st;
	e->attr_timeout = pt->timeout;
	e->entry_timeout = pt->timeout;
}

/* Reply to an op that found or made @pi (ret 0: one lookup reference). */
static void reply_entry(struct pt_req *r, int ret, struct pt_inode *pi,
			const struct stat *st)
{
	struct fuse_entry_param e;

	if (ret < 0) {
		reply_err(replying(r), ret);
		return;
	}
	fill_entry(r->pt, pi, st, &e);
	if (fuse_reply_entry(replying(r), &e) == -ENOENT)
		pt_inode_forget(r, pi, 1);
}

/* Look @name up in the directory open as @dfd and reply with it. */
static int lookup_reply(struct pt_req *r, int dfd, const char *name)
{
	struct pt_inode *pi = NULL;
	struct stat st;
	int ret;

	ret = pt_inode_lookup(r, dfd, name, &st, &pi);
	reply_entry(r, ret, pi, &st);
	return ret;
}

/* ---- init ---- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	static const unsigned want[] = {
	    FUSE_CAP_ASYNC_READ,       FUSE_CAP_READDIRPLUS,
	    FUSE_CAP_READDIRPLUS_AUTO, FUSE_CAP_PARALLEL_DIROPS,
	    FUSE_CAP_DONT_MASK,	       FUSE_CAP_ASYNC_DIO,
	    FUSE_CAP_AUTO_INVAL_DATA,  FUSE_CAP_ATOMIC_O_TRUNC,
	};
	struct fs_pt *pt = userdata;

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (conn->capable & want[i])
			conn->want |= want[i];
	/* the kernel's ACL checks come with its permission checks (the
	 * kernel turns default_permissions on with them); without them
	 * ACLs are plain xattrs to the kernel, which the lower filesystem
	 * applies */
	conn->want &= ~FUSE_CAP_POSIX_ACL;
	if (pt->kernel_perms && (conn->capable & FUSE_CAP_POSIX_ACL))
		conn->want |= FUSE_CAP_POSIX_ACL;
	if (pt->writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	/* every request passes through fs_fuse_io.c's read */
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
			FUSE_CAP_SPLICE_MOVE);
	conn->max_write = PT_MAX_WRITE;
	conn->max_readahead = PT_MAX_WRITE;
	/* read replies spliced from the lower file (fs_fuse_io_pread),
	 * write payloads spliced into it (fs_fuse_io_pwrite) */
	fs_fuse_io_splice_reads(conn);
	fs_fuse_io_splice_writes(conn, 1);
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	conn->time_gran = 1;
}

/* ---- namespace ---- */

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct pt_req r;
	struct pt_inode *dir;
	int dfd, ret;

	req_begin(&r, req, FS_OP_LOOKUP);
	ret = dfd = inode_fd(&r, parent, &dir);
	if (ret >= 0) {
		ret = lookup_reply(&r, dfd, name);
		inode_put(&r, dir, dfd);
	} else {
		reply_err(replying(&r), ret);
	}
	req_end(&r, ret);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct pt_req r;
	struct pt_inode *pi;

	req_begin(&r, req, FS_OP_FORGET);
	pi = pt_inode_get(r.pt, ino);
	if (pi != NULL)
		pt_inode_forget(&r, pi, nlookup);
	fuse_reply_none(req);
	req_end(&r, 0);
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct pt_req r;

	req_begin(&r, req, FS_OP_FORGET_MULTI);
	for (size_t i = 0; i < count; i++) {
		struct pt_inode *pi = pt_inode_get(r.pt, forgets[i].ino);

		if (pi != NULL)
			pt_inode_forget(&r, pi, forgets[i].nlookup);
	}
	fuse_reply_none(req);
	req_end(&r, 0);
}

/* fstat of @fd into @st, timed. */
static int do_fstat(struct pt_req *r, int fd, struct stat *st)
{
	int ret;

	PT_CALL(r, ret, fstat(fd, st));
	return ret;
}

static void reply_attr(struct pt_req *r, int ret, const struct stat *st)
{
	if (ret < 0)
		reply_err(replying(r), ret);
	else
		fuse_reply_attr(replying(r), st, r->pt->timeout);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct pt_req r;
	struct pt_inode *pi = NULL;
	struct stat st;
	int fd, ret;

	req_begin(&r, req, FS_OP_GETATTR);
	if (fi != NULL) {
		ret = do_fstat(&r, (int)fi->fh, &st);
	} else {
		ret = fd = inode_fd(&r, ino, &pi);
		if (fd >= 0)
			ret = do_fstat(&r, fd, &st);
		inode_put(&r, pi, fd);
	}
	reply_attr(&r, ret, &st);
	req_end(&r, ret);
}

static struct timespec set_time(int to_set, int bit, int now_bit,
				const struct timespec *ts)
{
	if (to_set & now_bit)
		return (struct timespec){.tv_nsec = UTIME_NOW};
	if (to_set & bit)
		return *ts;
	return (struct timespec){.tv_nsec = UTIME_OMIT};
}

/* The calls of one setattr, in the VFS's order; 0 or -errno. */
static int do_setattr(struct pt_req *r, int fd, const struct stat *a,
		      int to_set, struct fuse_file_info *fi)
{
	char path[32];
	uint64_t t = pt_now();
	int ret = 0;

	pt_fd_path(fd, path, sizeof(path));
	if (to_set & FUSE_SET_ATTR_MODE)
		ret = fi != NULL ? fchmod((int)fi->fh, a->st_mode)
				 : chmod(path, a->st_mode);
	if (ret == 0 && (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
		ret = fchownat(
		    fd, "",
		    (to_set & FUSE_SET_ATTR_UID) ? a->st_uid : (uid_t)-1,
		    (to_set & FUSE_SET_ATTR_GID) ? a->st_gid : (gid_t)-1,
		    AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
	if (ret == 0 && (to_set & FUSE_SET_ATTR_SIZE))
		ret = fi != NULL ? ftruncate((int)fi->fh, a->st_size)
				 : truncate(path, a->st_size);
	if (ret == 0 &&
	    (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))) {
		struct timespec ts[2] = {
		    set_time(to_set, FUSE_SET_ATTR_ATIME,
			     FUSE_SET_ATTR_ATIME_NOW, &a->st_atim),
		    set_time(to_set, FUSE_SET_ATTR_MTIME,
			     FUSE_SET_ATTR_MTIME_NOW, &a->st_mtim),
		};

		ret = fi != NULL ? futimens((int)fi->fh, ts)
				 : utimensat(fd, "", ts, AT_EMPTY_PATH);
	}
	return (int)pt_done(r, t, ret);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct pt_req r;
	struct pt_inode *pi;
	struct stat st;
	int fd, ret;

	req_begin(&r, req, FS_OP_SETATTR);
	ret = fd = inode_fd_as_caller(&r, ino, &pi, 0);
	if (ret >= 0)
		ret = do_setattr(&r, fd, attr, to_set, fi);
	if (ret >= 0)
		ret = do_fstat(&r, fd, &st);
	inode_put(&r, pi, fd);
	reply_attr(&r, ret, &st);
	req_end(&r, ret);
}

/* access(2), chdir: sent only without default_permissions (a mount only
 * root reaches): the lower filesystem answers for the caller. */
static void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct pt_req r;
	struct pt_inode *pi;
	int fd, ret;

	req_begin(&r, req, FS_OP_ACCESS);
	ret = fd = inode_fd_as_caller(&r, ino, &pi, 0);
	if (ret >= 0) {
		PT_CALL(&r, ret,
			faccessat(fd, "", mask, AT_EMPTY_PATH | AT_EACCESS));
	}
	inode_put(&r, pi, fd);
	reply_err(replying(&r), ret);
	req_end(&r, ret);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct pt_req r;
	struct pt_inode *pi;
	char buf[PATH_MAX + 1];
	long n;
	int fd;

	req_begin(&r, req, FS_OP_READLINK);
	n = fd = inode_fd(&r, ino, &pi);
	if (fd >= 0) {
		PT_CALL(&r, n, readlinkat(fd, "", buf, sizeof(buf) - 1));
		inode_put(&r, pi, fd);
	}
	if (n >= 0) {
		buf[n] = '\0';
		fuse_reply_readlink(replying(&r), buf);
	} else {
		reply_err(replying(&r), (int)n);
	}
	req_end(&r, n < 0 ? (int)n : 0);
}

enum mk_kind { MK_NOD, MK_DIR, MK_SYMLINK };

static int make_one(int dfd, const char *name, enum mk_kind kind, mode_t mode,
		    dev_t rdev, const char *target)
{
	if (kind == MK_DIR)
		return mkdirat(dfd, name, mode);
	if (kind == MK_SYMLINK)
		return symlinkat(target, dfd, name);
	return mknodat(dfd, name, mode, rdev);
}

/* mknod, mkdir, symlink: make @name in @parent as the caller, then look
 * it up for the entry reply. */
static void do_make(fuse_req_t req, enum fs_op op, fuse_ino_t parent,
		    const char *name, enum mk_kind kind, mode_t mode,
		    dev_t rdev, const char *target)
{
	struct pt_req r;
	struct pt_inode *dir;
	int dfd, ret;

	req_begin(&r, req, op);
	ret = dfd = inode_fd_as_caller(&r, parent, &dir, 1);
	if (ret >= 0)
		PT_CALL(&r, ret, make_one(dfd, name, kind, mode, rdev, target));
	if (ret >= 0)
		ret = lookup_reply(&r, dfd, name);
	else
		reply_err(replying(&r), ret);
	inode_put(&r, dir, dfd);
	req_end(&r, ret);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	do_make(req, FS_OP_MKNOD, parent, name, MK_NOD, mode, rdev, NULL);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	do_make(req, FS_OP_MKDIR, parent, name, MK_DIR, mode, 0, NULL);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	do_make(req, FS_OP_SYMLINK, parent, name, MK_SYMLINK, 0, 0, link);
}

static void do_remove(fuse_req_t req, enum fs_op op, fuse_ino_t parent,
		      const char *name, int flags)
{
	struct pt_req r;
	struct pt_inode *dir;
	int dfd, ret;

	req_begin(&r, req, op);
	ret = dfd = inode_fd_as_caller(&r, parent, &dir, 0);
	if (ret >= 0) {
		PT_CALL(&r, ret, unlinkat(dfd, name, flags));
	}
	inode_put(&r, dir, dfd);
	reply_err(replying(&r), ret);
	req_end(&r, ret);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	do_remove(req, FS_OP_UNLINK, parent, name, 0);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	do_remove(req, FS_OP_RMDIR, parent, name, AT_REMOVEDIR);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct pt_req r;
	struct pt_inode *dir, *ndir = NULL;
	int dfd, nfd = -1, ret;

	req_begin(&r, req, FS_OP_RENAME);
	ret = dfd = inode_fd(&r, parent, &dir);
	if (ret >= 0)
		ret = nfd = inode_fd_as_caller(&r, newparent, &ndir, 0);
	if (ret >= 0) {
		PT_CALL(&r, ret, renameat2(dfd, name, nfd, newname, flags));
	}
	inode_put(&r, ndir, nfd);
	inode_put(&r, dir, dfd);
	reply_err(replying(&r), ret);
	req_end(&r, ret);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct pt_req r;
	struct pt_inode *pi, *ndir = NULL;
	char path[32];
	int fd, nfd = -1, ret;

	req_begin(&r, req, FS_OP_LINK);
	ret = fd = inode_fd(&r, ino, &pi);
	if (ret >= 0)
		ret = nfd = inode_fd_as_caller(&r, newparent, &ndir, 0);
	if (ret >= 0) {
		/* linkat(AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH: follow
		 * the fd's magic link instead */
		pt_fd_path(fd, path, sizeof(path));
		PT_CALL(
		    &r, ret,
		    linkat(AT_FDCWD, path, nfd, newname, AT_SYMLINK_FOLLOW));
	}
	if (ret >= 0)
		ret = lookup_reply(&r, nfd, newname);
	else
		reply_err(replying(&r), ret);
	inode_put(&r, ndir, nfd);
	inode_put(&r, pi, fd);
	req_end(&r, ret);
}

/* ---- files ---- */

/* Open flags for the lower file. With the writeback cache the kernel
 * reads pages of write-only files and does O_APPEND itself, and it
 * writes any file's cached pages back through any open of it, a partial
 * page at the end of the file too: no O_DIRECT below (EINVAL). */
static int lower_flags(const struct fs_pt *pt, int flags)
{
	flags &= ~(O_CREAT | O_EXCL | O_NOCTTY | O_NOFOLLOW);
	if (pt->writeback) {
		if ((flags & O_ACCMODE) == O_WRONLY)
			flags = (flags & ~O_ACCMODE) | O_RDWR;
		flags &= ~(O_APPEND | O_DIRECT);
	}
	return flags | O_CLOEXEC;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pt_req r;
	struct pt_inode *pi;
	char path[32];
	int fd, ret;

	req_begin(&r, req, FS_OP_OPEN);
	ret = fd = inode_fd_as_caller(&r, ino, &pi, 0);
	if (ret >= 0) {
		pt_fd_path(fd, path, sizeof(path));
		PT_CALL(&r, ret, open(path, lower_flags(r.pt, fi->flags)));
	}
	inode_put(&r, pi, fd);
	if (ret >= 0) {
		fi->fh = (uint64_t)ret;
		if (fuse_reply_open(replying(&r), fi) == -ENOENT)
			close(ret);
		ret = 0;
	} else {
		reply_err(replying(&r), ret);
	}
	req_end(&r, ret);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct pt_req r;
	struct pt_inode *dir, *pi = NULL;
	struct fuse_entry_param e;
	struct stat st;
	int dfd, fd = -1, ret;

	req_begin(&r, req, FS_OP_CREATE);
	ret = dfd = inode_fd_as_caller(&r, parent, &dir, 1);
	if (ret >= 0) {
		PT_CALL(&r, fd,
			openat(dfd, name,
			       lower_flags(r.pt, fi->flags) | O_CREAT |
				   (fi->flags & O_EXCL),
			       mode));
		ret = fd;
	}
	if (ret >= 0)
		ret = pt_inode_lookup(&r, dfd, name, &st, &pi);
	inode_put(&r, dir, dfd);
	if (ret >= 0) {
		fi->fh = (uint64_t)fd;
		fill_entry(r.pt, pi, &st, &e);
		if (fuse_reply_create(replying(&r), &e, fi) == -ENOENT) {
			close(fd);
			pt_inode_forget(&r, pi, 1);
		}
	} else {
		if (fd >= 0)
			close(fd);
		reply_err(replying(&r), ret);
	}
	req_end(&r, ret);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct pt_req r;
	char *buf;
	long n = -ENOMEM;

	req_begin(&r, req, FS_OP_READ);
	(void)ino;
	buf = fs_fuse_uring_reply_buf(size);
	if (buf == NULL)
		buf = fs_fuse_rbuf(size > 0 ? size : 1);
	if (buf != NULL) {
		PT_CALL(&r, n, fs_fuse_io_pread((int)fi->fh, buf, size, off));
	}
	if (n < 0)
		reply_err(replying(&r), (int)n);
	else
		fs_fuse_io_reply_read(replying(&r), buf, (size_t)n);
	req_end(&r, n < 0 ? (int)n : 0);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct pt_req r;
	long n;

	req_begin(&r, req, FS_OP_WRITE);
	(void)ino;
	/* as the caller: a write by a non-root user clears setuid bits in
	 * the lower filesystem (KILLPRIV_V2 leaves that to us) */
	n = pt_cred_caller(&r, 0);
	if (n == 0 && (fi->flags & O_DIRECT) &&
	    (fs_fuse_io_write_held() || ((uintptr_t)buf & 4095) != 0)) {
		/* O_DIRECT wants an aligned buffer: libfuse's is not, and
		 * a payload spliced from a direct write is not either */
		char *b = fs_fuse_rbuf(size > 0 ? size : 1);

		n = b == NULL ? -ENOMEM : fs_fuse_io_write_copy(buf, b, size);
		buf = b;
	}
	/* the payload may still be in /dev/fuse's pipe: spliced in */
	if (n == 0) {
		PT_CALL(&r, n, fs_fuse_io_pwrite((int)fi->fh, buf, size, off));
	}
	if (n < 0)
		reply_err(replying(&r), (int)n);
	else
		fuse_reply_write(replying(&r), (size_t)n);
	req_end(&r, n < 0 ? (int)n : 0);
}

/* close(2) of one of the caller's descriptors: a lower close of a
 * duplicate, so that a filesystem reporting errors at close (NFS) does. */
static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pt_req r;
	int ret, fd;

	req_begin(&r, req, FS_OP_FLUSH);
	(void)ino;
	PT_CALL(&r, fd, dup((int)fi->fh));
	ret = fd;
	if (fd >= 0) {
		PT_CALL(&r, ret, close(fd));
	}
	reply_err(replying(&r), ret);
	req_end(&r, ret);
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct pt_req r;
	int ret;

	req_begin(&r, req, FS_OP_RELEASE);
	(void)ino;
	/* an error of close is not the caller's: it closed already */
	PT_CALL(&r, ret, close((int)fi->fh));
	(void)ret;
	reply_err(replying(&r), 0);
	req_end(&r, 0);
}

static int do_sync(struct pt_req *r, int fd, int datasync)
{
	int ret;

	PT_CALL(r, ret, datasync ? fdatasync(fd) : fsync(fd));
	return ret;
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	struct pt_req r;
	int ret;

	req_begin(&r, req, FS_OP_FSYNC);
	(void)ino;
	ret = do_sync(&r, (int)fi->fh, datasync);
	reply_err(replying(&r), ret);
	req_end(&r, ret);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
			 off_t len, struct fuse_file_info *fi)
{
	struct pt_req r;
	int ret;

	req_begin(&r, req, FS_OP_FALLOCATE);
	(void)ino;
	ret = pt_cred_caller(&r, 0);
	if (ret == 0) {
		PT_CALL(&r, ret, fallocate((int)fi->fh, mode, off, len));
	}
	reply_err(replying(&r), ret);
	req_end(&r, ret);
}

static void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			       struct fuse_file_info *fi_in, fuse_ino_t ino_out,
			       off_t off_out, struct fuse_file_info *fi_out,
			       size_t len, int flags)
{
	struct pt_req r;
	long n;

	req_begin(&r, req, FS_OP_COPY_FILE_RANGE);
	(void)ino_in;
	(void)ino_out;
	n = pt_cred_caller(&r, 0);
	if (n == 0) {
		PT_CALL(&r, n,
			copy_file_range((int)fi_in->fh, &off_in,
					(int)fi_out->fh, &off_out, len,
					(unsigned)flags));
	}
	if (n < 0)
		reply_err(replying(&r), (int)n);
	else
		fuse_reply_write(replying(&r), (size_t)n);
	req_end(&r, n < 0 ? (int)n : 0);
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct pt_req r;
	long n;

	req_begin(&r, req, FS_OP_LSEEK);
	(void)ino;
	/* with the writeback cache the kernel may hold data the lower file
	 * has not got yet, and its FUSE sends SEEK_DATA/SEEK_HOLE without
	 * writing it back: ENOSYS makes it answer from the size itself (all
	 * data, a hole at the end), as for a filesystem without lseek */
	if (r.pt->writeback)
		n = -ENOSYS;
	else
		PT_CALL(&r, n, lseek((int)fi->fh, off, whence));
	if (n < 0)
		reply_err(replying(&r), (int)n);
	else
		fuse_reply_lseek(replying(&r), n);
	req_end(&r, n < 0 ? (int)n : 0);
}

/* ---- directories ---- */

/* An open directory: the lower fd and what getdents64 returned and the
 * kernel has not taken yet. Protected by lock (the kernel serializes
 * readdir on one open directory, but not against releasedir races). */
struct pt_dir {
	pthread_mutex_t lock;
	int fd;
	off_t pos;   /* offset of the next entry to return */
	size_t len;  /* bytes in buf */
	size_t used; /* of them, consumed */
	char buf[PT_DIRBUF];
};

static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct pt_req r;
	struct pt_inode *pi;
	struct pt_dir *d = NULL;
	char path[32];
	int fd, ret;

	req_begin(&r, req, FS_OP_OPENDIR);
	ret = fd = inode_fd_as_caller(&r, ino, &pi, 0);
	if (ret >= 0) {
		d = calloc(1, sizeof(*d));
		ret = d != NULL ? 0 : -ENOMEM;
	}
	if (ret >= 0) {
		pt_fd_path(fd, path, sizeof(path));
		PT_CALL(&r, d->fd,
			open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
		ret = d->fd;
	}
	inode_put(&r, pi, fd);
	if (ret >= 0) {
		pthread_mutex_init(&d->lock, NULL);
		fi->fh = (uintptr_t)d;
		if (fuse_reply_open(replying(&r), fi) == -ENOENT) {
			close(d->fd);
			free(d);
		}
		ret = 0;
	} else {
		free(d);
		reply_err(replying(&r), ret);
	}
	req_end(&r, ret);
}

/* The next lower entry of @d from its position (NULL at the end or on
 * error, in *@err). */
static struct dirent64 *dir_next(struct pt_req *r, struct pt_dir *d, int *err)
{
	long n;

	*err = 0;
	if (d->used >= d->len) {
		PT_CALL(r, n, getdents64(d->fd, d->buf, sizeof(d->buf)));
		if (n <= 0) {
			*err = (int)(n < 0 ? n : 0);
			return NULL;
		}
		d->len = (size_t)n;
		d->used = 0;
	}
	return (struct dirent64 *)(d->buf + d->used);
}

static int is_dot(const char *n)
{
	return n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0'));
}

/* Add @de to @out at @used; with @plus, look it up (the entry then holds
 * a reference). Returns bytes added, 0 if it did not fit, -errno. */
static long dir_add(struct pt_req *r, struct pt_dir *d, struct dirent64 *de,
		    char *out, size_t room, int plus)
{
	struct fuse_entry_param e;
	struct pt_inode *pi = NULL;
	struct stat st;
	size_t need;
	int ret;

	memset(&e, 0, sizeof(e));
	e.attr.st_ino = de->d_ino;
	e.attr.st_mode = DTTOIF(de->d_type);
	if (!plus)
		return (long)fuse_add_direntry(r->req, out, room, de->d_name,
					       &e.attr, de->d_off);
	if (!is_dot(de->d_name)) {
		ret = pt_inode_lookup(r, d->fd, de->d_name, &st, &pi);
		if (ret < 0)
			return ret;
		fill_entry(r->pt, pi, &st, &e);
	}
	need = fuse_add_direntry_plus(r->req, out, room, de->d_name, &e,
				      de->d_off);
	if (need > room && pi != NULL)
		pt_inode_forget(r, pi, 1);
	return (long)need;
}

/* Fill @out with entries from @off; returns the bytes filled or -errno. */
static long dir_fill(struct pt_req *r, struct pt_dir *d, off_t off, char *out,
		     size_t size, int plus)
{
	size_t filled = 0;
	int err = 0;

	if (off != d->pos) {
		if (lseek(d->fd, off, SEEK_SET) < 0)
			return -errno;
		d->pos = off;
		d->len = d->used = 0;
	}
	for (;;) {
		struct dirent64 *de = dir_next(r, d, &err);
		long n;

		if (de == NULL)
			break;
		n = dir_add(r, d, de, out + filled, size - filled, plus);
		if (n == -ENOENT)
			n = 0; /* gone since getdents: skip it */
		else if (n < 0 && filled == 0)
			return n;
		else if (n < 0 || (size_t)n > size - filled)
			break;
		filled += (size_t)n;
		d->used += de->d_reclen;
		d->pos = de->d_off;
	}
	return err < 0 && filled == 0 ? err : (long)filled;
}

static void do_readdir(fuse_req_t req, size_t size, off_t off,
		       struct fuse_file_info *fi, int plus)
{
	struct pt_dir *d = (struct pt_dir *)(uintptr_t)fi->fh;
	struct pt_req r;
	char *buf;
	long n = -ENOMEM;

	req_begin(&r, req, plus ? FS_OP_READDIRPLUS : FS_OP_READDIR);
	buf = malloc(size > 0 ? size : 1);
	if (buf != NULL && (n = pt_cred_caller(&r, 0)) == 0) {
		pthread_mutex_lock(&d->lock);
		n = dir_fill(&r, d, off, buf, size, plus);
		pthread_mutex_unlock(&d->lock);
	}
	if (n < 0)
		reply_err(replying(&r), (int)n);
	else
		fuse_reply_buf(replying(&r), buf, (size_t)n);
	free(buf);
	req_end(&r, n < 0 ? (int)n : 0);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)ino;
	do_readdir(req, size, off, fi, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	do_readdir(req, size, off, fi, 1);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct pt_dir *d = (struct pt_dir *)(uintptr_t)fi->fh;
	struct pt_req r;
	int ret;

	req_begin(&r, req, FS_OP_RELEASEDIR);
	(void)ino;
	PT_CALL(&r, ret, close(d->fd));
	(void)ret;
	pthread_mutex_destroy(&d->lock);
	free(d);
	reply_err(replying(&r), 0);
	req_end(&r, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	struct pt_dir *d = (struct pt_dir *)(uintptr_t)fi->fh;
	struct pt_req r;
	int ret;

	req_begin(&r, req, FS_OP_FSYNCDIR);
	(void)ino;
	ret = do_sync(&r, d->fd, datasync);
	reply_err(replying(&r), ret);
	req_end(&r, ret);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct pt_req r;
	struct pt_inode *pi;
	struct statvfs sv;
	int fd, ret;

	req_begin(&r, req, FS_OP_STATFS);
	ret = fd = inode_fd(&r, ino, &pi);
	if (fd >= 0) {
		PT_CALL(&r, ret, fstatvfs(fd, &sv));
		inode_put(&r, pi, fd);
	}
	if (ret < 0)
		reply_err(replying(&r), ret);
	else
		fuse_reply_statfs(replying(&r), &sv);
	req_end(&r, ret);
}

/* ---- xattrs (through /proc/self/fd/N: O_PATH fds have none) ---- */

enum xa_kind { XA_GET, XA_LIST, XA_SET, XA_REMOVE };

struct xa_args {
	enum xa_kind kind;
	const char *name;
	const char *value; /* set */
	size_t size;	   /* set: value size; get/list: buffer size */
	int flags;	   /* set */
};

static long xa_call(const char *path, const struct xa_args *a, char *buf)
{
	switch (a->kind) {
	case XA_GET:
		return getxattr(path, a->name, buf, a->size);
	case XA_LIST:
		return listxattr(path, buf, a->size);
	case XA_SET:
		return setxattr(path, a->name, a->value, a->size, a->flags);
	default:
		return removexattr(path, a->name);
	}
}

static void do_xattr(fuse_req_t req, enum fs_op op, fuse_ino_t ino,
		     const struct xa_args *a)
{
	struct pt_req r;
	struct pt_inode *pi;
	char path[32], *buf = NULL;
	long n;
	int fd;

	req_begin(&r, req, op);
	n = fd = inode_fd_as_caller(&r, ino, &pi, 0);
	if (n >= 0 && (a->kind == XA_GET || a->kind == XA_LIST) &&
	    a->size > 0 && (buf = malloc(a->size)) == NULL)
		n = -ENOMEM;
	if (n >= 0) {
		pt_fd_path(fd, path, sizeof(path));
		PT_CALL(&r, n, xa_call(path, a, buf));
	}
	inode_put(&r, pi, fd);
	if (n < 0)
		reply_err(replying(&r), (int)n);
	else if (a->kind == XA_SET || a->kind == XA_REMOVE)
		reply_err(replying(&r), 0);
	else if (a->size == 0)
		fuse_reply_xattr(replying(&r), (size_t)n);
	else
		fuse_reply_buf(replying(&r), buf, (size_t)n);
	free(buf);
	req_end(&r, n < 0 ? (int)n : 0);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct xa_args a = {XA_SET, name, value, size, flags};

	do_xattr(req, FS_OP_SETXATTR, ino, &a);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct xa_args a = {XA_GET, name, NULL, size, 0};

	do_xattr(req, FS_OP_GETXATTR, ino, &a);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct xa_args a = {XA_LIST, NULL, NULL, size, 0};

	do_xattr(req, FS_OP_LISTXATTR, ino, &a);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct xa_args a = {XA_REMOVE, name, NULL, 0, 0};

	do_xattr(req, FS_OP_REMOVEXATTR, ino, &a);
}

static const struct fuse_lowlevel_ops pt_ops = {
    .init = op_init,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .setattr = op_setattr,
    .readlink = op_readlink,
    .access = op_access,
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
    .copy_file_range = op_copy_file_range,
    .lseek = op_lseek,
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
};

const struct fuse_lowlevel_ops *fs_pt_ops(size_t *size)
{
	*size = sizeof(pt_ops);
	return &pt_ops;
}
