/*
 * fs_ilock.h — the namespace's lock holders. Every fs.h operation takes
 * its locks here, on a holder (struct fs_ilock) on its stack, so every
 * caller (the FUSE adapter, tests, tools) runs under the same rules:
 *
 *   fs_op_begin(&il, fs, LK_PR or LK_EX)   the cluster lock (dlm)
 *   fs_ilock_one / _pair / _peers / _rename the inodes it touches
 *   ... look up, check, transactions ...
 *   fs_op_end(&il)                          everything, in reverse
 *
 * The cluster lock is still v1's one filesystem-wide glock (FS_LK_FS/0),
 * taken first in the mode the operation needs (PR: it only reads, or only
 * drops in-memory references; EX: it may write) and held until
 * fs_op_end. A thread that already holds it (fs_copy_file_range around
 * its reads and writes) does not take it again. Later steps turn it into
 * per-inode glocks taken by the same calls: the holder knows which
 * inodes an operation touches and in which mode.
 *
 * Inode locks: an rwlock in the in-core record of each inode
 * (struct fs_inode, fs_ns.h), pinned while it is held: shared to read
 * the inode (its block, its directory entries, its extent tree and file
 * data, its xattrs), exclusive to change any of them. Requests on
 * different inodes run in parallel.
 *
 * Lock order (README "Lock order"; never take a lock above one held):
 *   0a  the cluster glock (dlm), fs_op_begin
 *   1a  ns->rename_mu: a rename between two different directories; the
 *       is_ancestor walk (directory parents) runs under it
 *   1b  inode locks: a parent before its child; two inodes of which
 *       neither is the other's parent (the two directories of a rename,
 *       the source and target of a rename, the files of a clone) by
 *       inode number, lower first, except that a directory containing
 *       the other one of a rename goes first. A ".." lookup drops the
 *       directory's lock before it locks the parent.
 *   1c  ns->refc_lock: reflink sharing groups (fs_refcount.c), after
 *       the inode locks of the files, before the transaction handle
 *   2   the transaction handle: inode locks are taken BEFORE
 *       fs_tx_begin, never while holding a handle (a commit waits for
 *       every handle; a thread that holds an inode lock may wait for a
 *       commit: the ENOSPC retry, fsync, the journal being full)
 *   2a  ns->orphan_lock, inside a handle: the orphan list
 *   then the core's locks (fs_internal.h) and ns->tbl_lock (a leaf).
 */
#ifndef UCFS_FS_ILOCK_H
#define UCFS_FS_ILOCK_H

#include <stdint.h>

struct fs;
struct fs_inode;

enum { FS_IL_SH = 1, FS_IL_EX = 2 };

#define FS_ILOCK_MAX 4 /* inodes one operation holds (rename) */

struct fs_ilock {
	struct fs *fs;
	int cl_mode; /* glock mode this holder took; 0: none */
	int cl_eff;  /* mode in force (its own or an outer one's) */
	int rename;  /* holds ns->rename_mu */
	unsigned n;
	struct {
		struct fs_inode *rec; /* pinned */
		int mode;
	} h[FS_ILOCK_MAX];
	struct fs_ilock *outer; /* this thread's enclosing holder */
};

/* Start an operation: take the cluster glock (dlm) in @cl_mode (LK_PR,
 * LK_EX; 0: none). -EIO once fenced (nothing is held then). */
int fs_op_begin(struct fs_ilock *il, struct fs *fs, int cl_mode);
/* Release every inode lock (destroying an unlinked inode whose last
 * reference went), the rename mutex, then the glock. */
void fs_op_end(struct fs_ilock *il);

/* Lock @ino in @mode (FS_IL_SH / FS_IL_EX): its record is pinned until
 * released. Already held by @il: nothing (the mode must not grow).
 * -ENOMEM. */
int fs_ilock_one(struct fs_ilock *il, uint64_t ino, int mode);
/* Release @ino early (readdirplus's children, atime's upgrade). */
void fs_iunlock_one(struct fs_ilock *il, uint64_t ino);
/* Directory @parent, then @child (either may be 0: skipped). */
int fs_ilock_pair(struct fs_ilock *il, uint64_t parent, int pmode,
		  uint64_t child, int cmode);
/* Two inodes of one level (neither is the other's parent), by number;
 * 0 is skipped, equal numbers lock once. */
int fs_ilock_peers(struct fs_ilock *il, uint64_t a, uint64_t b, int mode);
/* rename: the rename mutex when @sd != @dd, then both directories
 * exclusive (the one containing the other first, else by number).
 * @is_anc(fs, a, b): is directory a an ancestor of b (run under the
 * mutex). */
int fs_ilock_rename(struct fs_ilock *il, uint64_t sd, uint64_t dd,
		    int (*is_anc)(struct fs *fs, uint64_t a, uint64_t b));
/* The last reference to unlinked @ino went (fs_ino_put, fs_ino_unpin
 * said so): destroy it under its lock, exclusive, or (dlm, glock in PR:
 * this request may not write) leave it to fs_reap_orphans. */
void fs_ilock_reap(struct fs_ilock *il, uint64_t ino);
/* The pinned record of a held inode (NULL if not held). */
struct fs_inode *fs_ilock_rec(const struct fs_ilock *il, uint64_t ino);

/* Does this thread hold @ino in @mode (or stronger)? For assertions. */
int fs_ilock_held(struct fs *fs, uint64_t ino, int mode);
void fs_ilock_assert_fail(const char *file, int line, uint64_t ino, int mode);

/* Debug builds (UCFS_DEBUG, set by `make check`): abort unless this
 * thread holds @ino's lock in @mode. */
#ifdef UCFS_DEBUG
#define FS_ASSERT_HELD(fs, ino, mode)                                          \
	do {                                                                   \
		if (!fs_ilock_held((fs), (ino), (mode)))                       \
			fs_ilock_assert_fail(__FILE__, __LINE__, (ino),        \
					     (mode));                          \
	} while (0)
#else
#define FS_ASSERT_HELD(fs, ino, mode) ((void)0)
#endif

#endif /* UCFS_FS_ILOCK_H */
