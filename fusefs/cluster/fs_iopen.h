/*
 * fs_iopen.h — iopen locks (lockproto=dlm): which node frees an unlinked
 * inode, and when (fs_iopen.c; FORMAT.md "Cluster locks", "Orphans").
 *
 * FS_LK_IOPEN/ino: every node that holds inode @ino in core (a kernel
 * lookup reference or an open) holds it PR; the node that made @ino
 * takes its PR only when @ino's inode lock, held EX since before @ino
 * existed, first goes to NL or is given up (fs_ino_iopen_late, from the
 * inode type's drop): no other node can unlink @ino before that, and
 * most new files never need a hold. The node whose slot's orphan
 * list holds an unlinked inode (its "owner": the node that unlinked it,
 * or one that adopted a dead node's list) frees it only once it gets the
 * lock EX: when its last local reference goes it tries EX (NOQUEUE); if
 * another node still has the inode in use it gives its PR up and queues
 * an EX request, whose grant (every other node let go: closed, or died)
 * makes this module's worker free the inode. A node that is not the
 * owner just gives its PR up at its last reference.
 *
 * A node-down recovery (fs_core_recover_node) hands the dead node's slot
 * to the worker: once the slot's journal is replayed, the worker takes
 * the slot's lock (NOQUEUE: one survivor does it), moves every inode of
 * that slot's orphan list onto its own list (adoption) and treats each
 * like one of its own: freed now if no node uses it, else when the last
 * one lets go; under the same slot lock it applies the slot's free log
 * (fs_flog_dead_apply). When it starts, the worker takes over the same
 * way every slot free in the slot map that still holds orphans or a
 * free log (fs_core_slots_leftover: the slots this mount recovered, the
 * first mount after a whole-cluster crash included), and again whenever
 * a node left the lockspace (it looks every IOPEN_MEMBERS_MS): an owner
 * that unmounted cleanly while another node used one of its orphans
 * left it on its free slot's list, and a node still mounted adopts it,
 * so that the last node to let it go frees it.
 *
 * nolock mounts have none of this (fs->cl == NULL: every call is a
 * no-op, the orphan code works as before).
 */
#ifndef UCFS_FS_IOPEN_H
#define UCFS_FS_IOPEN_H

#include <stddef.h>
#include <stdint.h>

struct fs;
struct fs_inode;
struct lk_lock;

/* Mount (dlm, read-write), before the orphan list is reclaimed: start
 * the worker. 0 or -errno. A no-op for nolock. */
int fs_iopen_start(struct fs *fs);
/* Unmount / abandon: stop the worker, cancel the EX requests still
 * queued (their inodes stay on the orphan list). Idempotent. */
void fs_iopen_stop(struct fs *fs);

/* The kernel's first reference to @ino on this node: its iopen lock in
 * PR, waited for (never for long: only an owner that is freeing an
 * unreachable inode holds EX). NULL without one (nolock, ENOMEM, or
 * fenced). Called with the inode's or its directory's lock held, so that
 * no unlink of it can finish meanwhile. */
struct lk_lock *fs_iopen_hold(struct fs *fs, uint64_t ino);
/* Statahead (fs_statahead.c): ask ahead, in one lk_lock_batch with
 * LK_NOQUEUE (waiting for nobody), for the PR holds of inodes @inos the
 * kernel is about to reference (@want; those this node holds or asked
 * for already are left out: a second PR hold of one node would refuse
 * its own owner's EX try); fs_iopen_hold then adopts a prefetched
 * hold instead of asking (waiting at most for its master's answer). At
 * most 1,024 are kept (the oldest let go first); one another node wants
 * EX (an owner waits to free it) is let go by the worker, the rest at
 * unmount. A no-op for nolock. */
void fs_iopen_prefetch(struct fs *fs, const uint64_t *want, size_t n);
/* Give a PR (or EX) hold back. NULL is a no-op. */
void fs_iopen_put(struct lk_lock *lk);
/* @on 1: this thread's fs_iopen_put calls from now on are collected;
 * @on 0: they are given back, in one lockspace call (lk_unlock_batch:
 * one message per master; also every 128). For a FUSE batch forget
 * (fs_forget_batch), whose inodes' PR holds would cost a message each.
 * Every hold collected must be of one lockspace. */
void fs_iopen_put_batch(int on);

/* Owner: orphan @n has no local reference left (its inode lock
 * exclusive, or no operation running). 1: this node holds the iopen
 * lock EX, no node uses the inode: free it now (fs_iopen_done after);
 * 0: another node uses it (with @queue, an EX request is queued and the
 * worker frees it at the grant; without, nothing is left pending);
 * -errno. Always 1 for nolock. */
int fs_iopen_claim(struct fs *fs, struct fs_inode *n, int queue);
/* @n was freed: its iopen lock goes. */
void fs_iopen_done(struct fs *fs, struct fs_inode *n);

/* fs_release: the last open of @ino went; if it is unlinked (an owner
 * waits for it, or we are the owner), ask the kernel to forget it: a
 * name it cached before the unlink on another node keeps its lookup
 * reference, and with it our PR, until memory pressure. */
void fs_iopen_closed(struct fs *fs, uint64_t ino);

/* Node-down recovery replayed slot @slot's journal: its orphan list and
 * free log are the worker's to take over. From the lock manager's
 * callback thread: only queues. Before the worker runs (this node is
 * mounting) the slot is kept for it (fs->io_dead) and taken over as
 * soon as it starts; after it stopped (unmounting), the next read-write
 * mount's worker finds the slot (freed by this unmount) in its first
 * scan. */
void fs_iopen_slot_dead(struct fs *fs, unsigned slot);

#endif /* UCFS_FS_IOPEN_H */
