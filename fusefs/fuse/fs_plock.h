/*
 * fs_plock.h — cluster-wide flock(2) and POSIX record locks for the FUSE
 * adapter of a cluster mount (fs_plock.c; MOUNT.md "File locks").
 *
 * flock: one lock manager resource per inode (lk_name type FS_LK_FLOCK,
 * number = inode), one DLM lock per open file description on it: PR for
 * LOCK_SH, EX for LOCK_EX, LK_NOQUEUE for LOCK_NB. POSIX (fcntl) and OFD
 * locks: the lock manager's range locks (lk_plock, lockmgr/lk.h).
 *
 * Each handler answers its FUSE request itself, now or, for a lock that
 * waits (F_SETLKW, flock without LOCK_NB), later from the lock manager's
 * callback thread, so a waiting lock holds no FUSE worker; a signal to
 * the waiting process (FUSE INTERRUPT) cancels the wait (EINTR). A
 * request that came through an io_uring queue must be answered by the
 * thread running it, so there the handler waits itself (fs_fuse_uring.c
 * runs SETLKW on its worker threads, not on the queue's).
 *
 * Locking: struct fs_plock's table of flock locks is under its own mutex
 * (taken after nothing else of fusefs; never held across a lock manager
 * call that may block). Handlers may run concurrently.
 */
#ifndef UCFS_FS_PLOCK_H
#define UCFS_FS_PLOCK_H

#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdint.h>

struct fs_plock;
struct fs_stats;
struct lk_lock;
struct lk_ls;

#define FS_LK_FLOCK 7 /* lk_name.type of flock resources */

/*
 * The cluster's agreement on where file locks live, held for a whole
 * mount: FS_LK_FLMODE/0 (fs_cluster.h) in PR with localflocks (@local), CW without. The
 * two modes conflict and each is asked with NOQUEUE, so a node whose
 * setting differs from the mounted nodes' is refused (-EAGAIN) before it
 * serves anything, instead of its locks silently excluding nothing on
 * the others. 0 and *@out the hold (fs_plock_agree_end), or -errno.
 */
int fs_plock_agree(struct lk_ls *ls, int local, struct lk_lock **out);
void fs_plock_agree_end(struct lk_lock *lk);

/* Start serving file locks over @ls. 0, -ENOMEM. */
int fs_plock_new(struct lk_ls *ls, struct fs_plock **out);
/* Release every flock lock still held; before the lockspace closes. */
void fs_plock_free(struct fs_plock *fp);
/* Add the "file_locks" stats section (STATS.md). 0 or -errno. */
int fs_plock_stats_add(struct fs_plock *fp, struct fs_stats *st);
void fs_plock_stats_remove(struct fs_plock *fp, struct fs_stats *st);

/* The FUSE lock ops; each answers @req. @ino is the inode number. */
void fs_plock_getlk(struct fs_plock *fp, fuse_req_t req, uint64_t ino,
		    struct fuse_file_info *fi, struct flock *lock);
void fs_plock_setlk(struct fs_plock *fp, fuse_req_t req, uint64_t ino,
		    struct fuse_file_info *fi, struct flock *lock, int sleep);
void fs_plock_flock(struct fs_plock *fp, fuse_req_t req, uint64_t ino,
		    struct fuse_file_info *fi, int op);
/*
 * close(2) of a descriptor: release the POSIX locks of the closing
 * process (@owner) on @ino, as Linux does at every close. May block for a
 * round trip to the plock server. Nothing at all (no lockspace call)
 * until a POSIX lock was first asked for through this mount. 0 or
 * -errno.
 */
int fs_plock_flush(struct fs_plock *fp, uint64_t ino, uint64_t owner);
/*
 * Last close of an open file description: its flock lock (if
 * fi->flock_release) and its OFD locks (the owners whose latest lock
 * request came through fi->fh). Does not wait.
 */
void fs_plock_release(struct fs_plock *fp, uint64_t ino,
		      const struct fuse_file_info *fi);

#endif /* UCFS_FS_PLOCK_H */
