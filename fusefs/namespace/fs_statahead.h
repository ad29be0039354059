/*
 * fs_statahead.h — directory readahead ("statahead") for fs_readdir.
 *
 * A readdir that returns entries is usually followed by a stat of each
 * (readdirplus does it itself; `ls -l` and `du` stat right after), and
 * each stat of a cold inode is one 4 KiB read. Statahead reads those
 * inode blocks in batches through fs_buf_prefetch (asynchronous, nearby
 * blocks merged into larger reads, bounded by the cache):
 *
 *  - window: at the start of a readdir call, the inode blocks of the next
 *    N entries (mount option statahead=N) are prefetched, and again N/2
 *    more each time the reader has consumed half of what is ahead, so the
 *    reader's own fs_ino_read finds its block read or in flight. The
 *    directory's own B+tree nodes under the root are prefetched when a
 *    readdir starts at the beginning.
 *  - descend (readdirplus only): when the call ends, the subdirectories it
 *    returned are in the cache (readdirplus read them); their entries'
 *    inode blocks, or the tree nodes of large ones, are prefetched as well
 *    (at most N blocks), so that a tree walk (du, ls -lR, find) finds the
 *    next level read or in flight when it descends. This step reads only
 *    cached blocks and never waits for I/O.
 *  - after the reply: a readdirplus between fs_sa_defer_begin() and
 *    fs_sa_defer_end() on its thread (the FUSE adapter) asks for the
 *    locks of the whole descend and queues the reads of its first
 *    subdirectory (the reader enters it next), and leaves the reads of
 *    the others to fs_sa_defer_end, which the adapter calls once its
 *    reply went out: the reader (du, rm) does not wait for their
 *    submission (in a cold du of the bench tree the descend was a
 *    quarter of the readdirplus time, its reads' submission half of
 *    that). Those reads need no lock of ours held: a block read after
 *    its lock left is dropped by the grant that follows, as any
 *    statahead read.
 *
 * Cluster mounts (lockproto=dlm): before the inode blocks of a window or
 * a descend are read, their inodes' PR glocks are asked for ahead in one
 * batch (fs_ilock_ahead: NOQUEUE, waiting for no other node; one round
 * trip per lock master, not per inode), so the stats that follow are
 * cached lock hits; only the blocks of inodes whose lock this node then
 * holds are read (one read under no lock would be dropped by the grant
 * that follows: fs_cluster.c, inode inval). Stats: `glocks.types.inode`
 * `ahead_*` (STATS.md).
 *
 * Nothing here changes the filesystem: blocks are only read into the
 * cache, whose rules keep a cached (possibly dirty) copy over the
 * device's. Entries are taken from the directory while the caller holds
 * its lock, so they are exactly what the reader sees in the same call.
 *
 * Locking: every function is called with the directory's inode lock held
 * (shared or exclusive) by the thread running the readdir; the descend
 * takes each subdirectory's lock shared while it reads it; struct fs_sa
 * is that thread's (on its stack).
 */
#ifndef UCFS_FS_STATAHEAD_H
#define UCFS_FS_STATAHEAD_H

#include "fusefs/namespace/fs_ns.h"

struct fs_sa {
	struct fs *fs;
	struct fs_buf *dir;	/* caller's reference */
	unsigned window;	/* statahead=N; 0: everything is a no-op */
	int plus;		/* readdirplus: descend at the end */
	unsigned ahead;		/* prefetched entries not yet passed */
	uint64_t next;		/* cookie where the next window starts */
	int at_end;		/* the window reached the directory's end */
	uint64_t *sub;		/* subdirectories passed (plus) */
	unsigned nsub, capsub;
};

/* Start a readdir of @dir from @cookie: prefetch the first window. */
void fs_sa_begin(struct fs_sa *sa, struct fs *fs, struct fs_buf *dir,
		 uint64_t cookie, int plus);
/* The reader returned @de: slide the window when half of it is used. */
void fs_sa_pass(struct fs_sa *sa, const struct fs_dirent *de);
/* The readdir call ends: descend (plus; between fs_sa_defer_begin and
 * _end, the first call's reads beyond its first subdirectory are left
 * to fs_sa_defer_end), free what begin allocated. */
void fs_sa_end(struct fs_sa *sa);
/* The next readdirplus of this thread leaves its descend's reads beyond
 * the first subdirectory to fs_sa_defer_end (later ones read at once). */
void fs_sa_defer_begin(void);
/* Queue the reads left by this thread's readdirplus since
 * fs_sa_defer_begin, if any (no lock held: the caller's request is
 * answered); the calls that follow read at once again. */
void fs_sa_defer_end(void);

#endif /* UCFS_FS_STATAHEAD_H */
