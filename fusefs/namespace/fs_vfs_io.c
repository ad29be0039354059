/*
 * fs_vfs_io.c — fs.h's operations on a file's data: open and release,
 * read (with relatime's atime update), write (dropping set-id bits and
 * file capabilities as the VFS does), fsync, fallocate, clone_range
 * (reflink) and lseek (SEEK_DATA/SEEK_HOLE). Locking as fs_vfs.c's head
 * comment says: the inode's lock shared to read, exclusive to change.
 */
#include "fusefs/cluster/fs_iopen.h"
#include "fusefs/namespace/fs_vfs.h"
#include "lockmgr/lk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RELATIME_SECS (24 * 3600)

/* ---- files ---- */

int fs_open(struct fs *fs, const struct fs_cred *cred, uint64_t ino,
	    int flags)
{
	struct fs_ilock il;
	struct fs_buf *b;
	int ret;

	(void)cred;
	OP_BEGIN(&il, fs, LK_PR);
	ret = fs_vfs_lock_read(&il, fs, ino, FS_IL_SH, &b);
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
	n = fs_vfs_lock_read(&il, fs, ino, FS_IL_EX, &b);
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
	ret = fs_vfs_lock_read(&il, fs, ino, FS_IL_EX, &b);
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
	ret = fs_vfs_lock_read(&il, fs, ino, FS_IL_SH, &b);
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
