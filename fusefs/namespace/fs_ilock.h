/*
 * fs_ilock.h — the namespace's lock holders. Every fs.h operation takes
 * its locks here, on a holder (struct fs_ilock) on its stack, so every
 * caller (the FUSE adapter, tests, tools) runs under the same rules:
 *
 *   fs_op_begin(&il, fs, LK_PR or LK_EX)   quorum (dlm), an rgroup (EX)
 *   fs_ilock_one / _pair / _peers / _rename the inodes it touches
 *   ... look up, check, transactions ...
 *   fs_op_end(&il)                          everything, in reverse
 *
 * fs_op_begin's mode says whether the operation may write (LK_EX) or
 * only reads (LK_PR); 0 (statahead) takes only the cluster locks that
 * need no other node's demote. Statahead asks ahead (fs_ilock_ahead),
 * under its directory's lock, for the PR glocks of the inodes it reads
 * ahead, in batches that wait for no other node (NOQUEUE: a lock another
 * node holds in a conflicting mode is refused, and that node is not
 * disturbed) and hold nothing afterwards: the glocks stay cached, and
 * the holders that follow (readdirplus, lookup, getattr) find them
 * granted. It reads ahead only the blocks of inodes whose glock is
 * held: a block read under no lock would be dropped by the grant. An operation that may write first makes
 * sure this node owns a resource group to allocate from (dlm,
 * fs_alloc_reserve), holding nothing yet.
 *
 * Inode locks: dlm, the inode's glock (FS_LK_INODE/ino, FORMAT.md
 * "Cluster locks": PR for FS_IL_SH, EX for FS_IL_EX), then an rwlock in
 * the in-core record of the inode (struct fs_inode, fs_ns.h), pinned
 * while it is held: shared to read the inode (its block, its directory
 * entries, its extent tree and file data, its xattrs), exclusive to
 * change any of them. Requests on different inodes run in parallel, on
 * one node and across nodes.
 *
 * Lock order (README "Lock order"; never take a lock above one held):
 *   0a  FS_LK_FS/0: mount and unmount only
 *   0b  FS_LK_RENAME/0 (dlm, EX): a rename between two different
 *       directories, before anything else of the rename
 *   1a  ns->rename_mu: the same, locally; the is_ancestor walk
 *       (directory parents) runs under both, taking each directory's
 *       glock in PR for the time of its read (nothing else is held)
 *   1b  inodes, each its glock then its rwlock: a parent before its
 *       child; two inodes of which neither is the other's parent (the
 *       two directories of a rename, the source and target of a rename,
 *       the files of a clone) by inode number, lower first, except that
 *       a directory containing the other one of a rename goes first. A
 *       ".." lookup drops the directory's lock before it locks the
 *       parent. A new inode's glock is taken EX inside the transaction
 *       that makes it, before its block joins it, by a try only
 *       (fs_ino_alloc: its number comes from a group whose locks are
 *       placed on this node, so normally no message; a refusal takes
 *       another number, and after NEW_INO_TRIES the operation ends its
 *       handle and waits for the refused lock, fs_ino_alloc_refused);
 *       its rwlock after the transaction (nobody can reach it before
 *       the parent is released).
 *   1b' FS_LK_IOPEN/ino (dlm, fs_iopen.h): PR at the kernel's first
 *       reference (inode or directory lock held, waited for); the
 *       owner's EX try, NOQUEUE, with the inode exclusive, no handle
 *   1c  ns->refc_lock: reflink sharing groups (fs_refcount.c), after
 *       the inode locks of the files, before the transaction handle
 *   1d  rgroup glocks (FS_LK_RGRP/g, EX), after the inodes, by index:
 *       waited for only without a handle (fs_alloc_reserve, the ENOSPC
 *       retry, the free log); inside a handle only fs_glock_try
 *   2   the transaction handle: inode locks are taken BEFORE
 *       fs_tx_begin, never while holding a handle (a commit waits for
 *       every handle; a demote of any glock waits for a commit; a
 *       thread that holds an inode lock may wait for a commit: the
 *       ENOSPC retry, fsync, the journal being full). NEVER a blocking
 *       glock wait while holding a handle.
 *   2a  ns->orphan_lock, inside a handle: the orphan list
 *   then the core's locks (fs_internal.h) and ns->tbl_lock (a leaf but
 *   for the glock engine's e->mu: fs_glock_pin/unpin of an inode's
 *   first and last kernel reference).
 */
#ifndef UCFS_FS_ILOCK_H
#define UCFS_FS_ILOCK_H

#include <stdint.h>

struct fs;
struct fs_inode;
struct fs_glock;

enum { FS_IL_SH = 1, FS_IL_EX = 2 };

#define FS_ILOCK_MAX 4 /* inodes one operation holds (rename) */

struct fs_ilock {
	struct fs *fs;
	int write;		    /* begun with LK_EX: may write */
	int wait;		    /* begun with a mode: may wait for glocks */
	int rename;		    /* holds ns->rename_mu */
	struct fs_glock *rename_gl; /* dlm: FS_LK_RENAME held EX */
	unsigned n;
	struct {
		struct fs_inode *rec; /* pinned */
		struct fs_glock *gl;  /* dlm: its glock, held */
		int mode;
	} h[FS_ILOCK_MAX];
	struct fs_ilock *outer; /* this thread's enclosing holder */
};

/* Start an operation that may write (@cl_mode LK_EX) or only reads
 * (LK_PR; 0: waits for no other node's lock, statahead). -EIO once
 * fenced (nothing is held then). */
int fs_op_begin(struct fs_ilock *il, struct fs *fs, int cl_mode);
/* Release every inode lock (destroying an unlinked inode whose last
 * reference went), the rename locks. */
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
/* rename: the rename lock and mutex when @sd != @dd, then both
 * directories exclusive (the one containing the other first, else by
 * number). @is_anc(fs, a, b): is directory a an ancestor of b (run
 * under the mutex; reads each directory under fs_ipeek_begin). */
int fs_ilock_rename(struct fs_ilock *il, uint64_t sd, uint64_t dd,
		    int (*is_anc)(struct fs *fs, uint64_t a, uint64_t b));
/* The last reference to unlinked @ino went (fs_ino_put, fs_ino_unpin
 * said so): destroy it under its lock, exclusive, or (a holder begun
 * with mode 0, which waits for no lock) leave it to fs_reap_orphans. */
void fs_ilock_reap(struct fs_ilock *il, uint64_t ino);
/* Statahead (fs_statahead.c), dlm: ask ahead, in one batch, for the PR
 * glocks of inodes @inos this node does not hold yet, waiting for no
 * other node (fs_glocks_prefetch: the masters' answers only). held[i]
 * = 1 when inode i's glock is held by this node now (granted, or held
 * before): only those blocks may be read ahead (a block read under no
 * lock is dropped at the grant that follows). nolock: all 1. 0, or
 * -EIO (fenced), -ENOMEM (held all 0). Holds no lock on return. */
int fs_ilock_ahead(struct fs *fs, const uint64_t *inos, unsigned n,
		   uint8_t *held);
/* Read-only look at inode @ino without a local lock (the rename walk:
 * the rename locks keep what it reads, directory parents, from
 * changing): its glock in PR (dlm; *gl NULL without), waited for. 0 or
 * -EIO. fs_ipeek_end gives it back. */
int fs_ipeek_begin(struct fs *fs, uint64_t ino, struct fs_glock **gl);
void fs_ipeek_end(struct fs_glock *gl);
/* Reflink sharing groups (1c): dlm, the glocks of refcount trees @r1
 * and @r2 (their root blocks' FS_LK_INODE locks, EX; 0 skipped, lower
 * first), then ns->refc_lock. 0 or -EIO (nothing held). */
struct fs_irefc {
	struct fs_glock *gl[2];
};
int fs_irefc_lock(struct fs *fs, uint64_t r1, uint64_t r2, struct fs_irefc *h);
/* The change made a new tree @r (dlm, not held): take its glock once,
 * so that a node still caching an older block of that number drops it. */
void fs_irefc_new(struct fs *fs, const struct fs_irefc *h, uint64_t r);
void fs_irefc_unlock(struct fs *fs, struct fs_irefc *h);

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
