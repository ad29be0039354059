/*
 * fs_vfs.h — what the files of fs.h's operations share (fs_vfs.c: mount,
 * lookup, attributes, readdir, statfs, xattrs; fs_vfs_names.c: create,
 * remove, link, rename; fs_vfs_io.c: open, read, write, fsync,
 * fallocate, clone, lseek): the operation's start, the name check and
 * the directory read, the one-inode lock and read (fs_vfs_lock_read),
 * the reflink refcount tree's guard, the privilege drops of a write,
 * truncate or chown, and the ENOSPC retry rule.
 * Included by those three files only; fs_vfs.c's head comment says how
 * an operation locks and when it retries.
 */
#ifndef UCFS_FS_VFS_H
#define UCFS_FS_VFS_H

#include "fusefs/namespace/fs_ns.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#define NOSPC_TRIES 8 /* retries of an operation that hit ENOSPC */

/* Start an operation with the glock in @mode; -EIO once fenced. */
#define OP_BEGIN(il, fs, mode)                                                 \
	do {                                                                   \
		if (fs_op_begin((il), (fs), (mode)) < 0)                       \
			return -EIO;                                           \
	} while (0)

/* The one inode an operation works on: its lock in @mode (FS_IL_SH or
 * FS_IL_EX), then its block in *@b (fs_buf_put it). 0 or -errno (nothing
 * to put); fs_op_end releases the lock either way. */
static inline int fs_vfs_lock_read(struct fs_ilock *il, struct fs *fs,
				   uint64_t ino, int mode, struct fs_buf **b)
{
	int ret = fs_ilock_one(il, ino, mode);

	return ret != 0 ? ret : fs_ino_read(fs, ino, b);
}

/* A file sharing extents (reflink) changes a refcount tree that other
 * inodes use: the tree's lock around the change (fs_ilock.h 1c). 1 held,
 * 0 not shared, -EIO. */
static inline int refc_guard(struct fs *fs, struct fs_buf *b,
			     struct fs_irefc *h)
{
	if (fs_di(b)->refcount_blk == 0)
		return 0;
	return fs_irefc_lock(fs, fs_di(b)->refcount_blk, 0, h) < 0 ? -EIO : 1;
}

static inline void refc_unguard(struct fs *fs, int held, struct fs_irefc *h)
{
	if (held > 0)
		fs_irefc_unlock(fs, h);
}

static inline int check_name(const char *name)
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

/* Read directory @ino; -ENOTDIR, -ENOENT if it was removed. */
int fs_vfs_dir_read(struct fs *fs, uint64_t ino, struct fs_buf **out);

static inline void kill_priv(struct fs_dinode *di)
{
	di->mode &= ~(unsigned)S_ISUID;
	if (di->mode & S_IXGRP)
		di->mode &= ~(unsigned)S_ISGID;
}

/* Write, truncate and chown drop file capabilities, as the VFS does
 * (the kernel leaves it to us: FUSE_HANDLE_KILLPRIV_V2, fs_fuse_io.c). */
static inline int drop_caps(struct fs *fs, struct fs_buf *b)
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
static inline int need_nospc_retry(struct fs *fs, int ret)
{
	if (ret != -ENOSPC)
		return 0;
	if (fs_alloc_starved(fs))
		return 1;
	if (fs_alloc_pending(fs) == 0)
		return 0;
	return fs_journal_sync(fs) == 0;
}

#endif
