/*
 * fs_cluster.h — a lockproto=dlm mount's membership of the cluster
 * (fs_cluster.c): the lockspace, the glock engine and the ops of each
 * lock type, self-fencing; the journal slot locks and recovery of dead
 * nodes' journals (fs_recover.c).
 *
 * Lock names (FORMAT.md "Cluster locks"): FS_LK_FS/0 the mount lock
 * (slot map, first-mount recovery; LVB: generation), FS_LK_SLOT/s the
 * lock of journal slot s (held EX by its node for its whole mount),
 * FS_LK_INODE/ino an inode (fs_ilock.c: PR to read, EX to change),
 * FS_LK_RGRP/g a resource group (fs_alloc.c: EX to allocate or free),
 * FS_LK_RENAME/0 a rename that changes parents, FS_LK_IOPEN/ino an inode
 * in use (fs_iopen.h: lock-manager locks, PR while in core, EX to free),
 * FS_LK_STATFS/0 the statfs master, FS_LK_JREC/0 the agreement on
 * checkpoint records (fs_jrec.h: PR while this node writes them, CW
 * for the whole mount of a node whose flush does not cover all).
 *
 * Life cycle (fs_vfs.c, fs_super.c):
 *   fs_cluster_open   lockspace opened, quorum reached
 *   fs_cluster_attach the struct fs being mounted (sb read): glock
 *                     engine made, node-down recovery enabled
 *   fs_cluster_records_join (a node whose device's flush does not
 *                     cover all: records off everywhere first)
 *   fs_cluster_slot_claim, fs_cluster_lock(EX) ... mount ...
 *   fs_cluster_records_start (the journal is up: records if agreed)
 *   fs_cluster_unlock  mount done: requests may run
 *   ... requests take inode, rgroup and rename glocks (fs_cluster_glock)
 *   fs_cluster_lock(EX) at unmount, then fs_cluster_close after the
 *   storage layer wrote everything back (or fs_cluster_abandon).
 */
#ifndef UCFS_FS_CLUSTER_H
#define UCFS_FS_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

struct fs;
struct fs_cluster;
struct lk_ls;
struct fs_stats;
struct fs_glock;
struct fs_glocks;

/* lk_name.type (lockmgr uses 7 for file locks) */
enum {
	FS_LK_FS = 1,
	FS_LK_SLOT = 2,
	FS_LK_INODE = 3,
	FS_LK_RGRP = 4,
	FS_LK_RENAME = 5,
	FS_LK_IOPEN = 6,
	FS_LK_STATFS = 8, /* 7: the lock manager's file locks */
	FS_LK_JREC = 9,	  /* checkpoint records agreement (fs_jrec.h) */
	FS_LK_FLMODE = 10, /* localflocks agreement (fs_plock.h) */
};

#define FS_DEFAULT_MINHOLD_MS 5
#define FS_GLOCK_MAX_DEFAULT 65536u /* glocks kept cached (LRU beyond) */
#define FS_CLUSTER_QUORUM_MS 30000

struct bd_dev;

struct fs_cluster_opts {
	const char *cluster_file; /* lk JSON configuration */
	uint32_t node_id;	  /* 1..63 */
	unsigned minhold_ms;	  /* glock minimum hold time */
	unsigned glock_max;	  /* glocks kept cached (0: the default,
				     FS_GLOCK_MAX_DEFAULT) */
	unsigned quorum_ms;	  /* wait for quorum at most (0: 30 s) */
	const char *device;	  /* the device: the disk heartbeat opens
				     it a second time (or NULL and: */
	struct bd_dev *bd;	  /* ... the caller's, shared) */
	unsigned hb_interval_ms;  /* 0: hb_timeout / 8 */
	unsigned hb_timeout_ms;	  /* 0: the configuration's timeout_ms */
	unsigned records_timeout_s; /* records_timeout=: a mount whose flush
				       does not cover all waits at most
				       this long for the records to go off
				       (fs_jrec.h; 0: no bound) */
	int ro;			  /* a ro mount: no journal slot, no disk
				     heartbeat of its own, the device read
				     only, locks in PR only (EX: -EROFS) */
};

/* Load the configuration, start the disk heartbeat's reader (fs_hb.h),
 * open the lockspace and wait for quorum. -EINVAL (configuration, node
 * id, not a ucfs device; reason in @why), -ENOENT/-EACCES, -EADDRINUSE
 * ("node N is already mounted"), -ETIMEDOUT (no quorum), -ECONNREFUSED
 * (a node alive on the disk cannot be reached or authenticated: "node 1
 * is alive on the disk but cannot be authenticated: different
 * secret?"), -ENOMEM. May block. */
int fs_cluster_open(const struct fs_cluster_opts *o, struct fs_cluster **out,
		    char *why, size_t whylen);
/* The configuration's cluster name. */
const char *fs_cluster_name(const struct fs_cluster *cl);
uint32_t fs_cluster_node(const struct fs_cluster *cl);
/* The mount's lockspace (file locks, fs_plock.h use it too). */
struct lk_ls *fs_cluster_ls(struct fs_cluster *cl);
/* 1 if resource group @g's inode and rgroup locks have their directory
 * on this node in the membership in force (lock placement: a new inode
 * there is mastered here with no message). A hint, lock-free; after
 * attach. */
int fs_cluster_rgrp_local(struct fs_cluster *cl, uint32_t g);
/* The placement key (lk_name.place) of every lock named by inode @ino
 * (FORMAT.md "Cluster locks": its resource group + 1; 0 outside the
 * groups): a lock per inode made outside the glock engine sets it too,
 * so that its directory is the inode's group's. After attach. */
uint32_t fs_cluster_ino_place(const struct fs_cluster *cl, uint64_t ino);

/* The membership now (bit n: node n): 1 if quorate. */
int fs_cluster_members(struct fs_cluster *cl, uint64_t *members);
/* Bind @fs (superblock read) and create the fs glock. 0 or -errno. */
int fs_cluster_attach(struct fs_cluster *cl, struct fs *fs);
/* Checkpoint records (fs_jrec.h; nothing for a ro node or an image
 * without JCKPT). join: before the mount's first write: a device whose
 * flush does not cover every writer's writes holds the agreement's lock
 * in CW (waits until every node writing records stopped and flushed,
 * at most records_timeout=); 0, -ETIMEDOUT, -ESHUTDOWN, -errno. start:
 * after fs_journal_init: a covering device asks PR (records on once
 * granted, asked again while refused when a CW holder leaves, or every
 * FS_JREC_RETRY_MS); 0 or -errno. */
int fs_cluster_records_join(struct fs_cluster *cl);
int fs_cluster_records_start(struct fs_cluster *cl);
/* The mount failed after attach: drop its EX hold (@held) and forget
 * @fs. The caller then closes @cl. */
void fs_cluster_detach(struct fs_cluster *cl, int held);
/* Take the first free journal slot of @count by its lock (EX, NOQUEUE):
 * kept until close. -EBUSY "all N journal slots are in use". */
int fs_cluster_slot_claim(struct fs_cluster *cl, unsigned count, unsigned *slot,
			  char *why, size_t whylen);
/* Try another slot's lock (EX, NOQUEUE, NOEXP): 1 taken (release with
 * fs_cluster_slot_drop), 0 held by a live node, -errno. May block. */
int fs_cluster_slot_try(struct fs_cluster *cl, unsigned slot);
/* The same without NOEXP, for what a dead slot left beside its journal
 * (orphans, free log, statfs change: fs_iopen.c adopt): granted only
 * after every node-down recovery in progress, so after the replay of a
 * survivor that died holding it (fs_recover.c says why). */
int fs_cluster_slot_take(struct fs_cluster *cl, unsigned slot);
void fs_cluster_slot_drop(struct fs_cluster *cl, unsigned slot);
/* Slot @slot's owner beats on the disk now (no wait): a node mounted it
 * again. A dead slot whose lock a try found held while this is 0 is
 * held by another thread of recovery (here or on another survivor):
 * try again later. */
int fs_cluster_slot_alive(struct fs_cluster *cl, unsigned slot);

/* Become a holder of the fs glock in LK_PR / LK_EX (lk.h modes; a ro
 * node always in LK_PR): 0, or -EIO once fenced (the journal is then
 * aborted). May block. */
int fs_cluster_lock(struct fs_cluster *cl, int mode);
void fs_cluster_unlock(struct fs_cluster *cl, int mode);
/* No request runs while this node is not in a quorate membership: waits
 * for it; -EIO once fenced. */
int fs_cluster_wait_quorum(struct fs_cluster *cl);
/* The glock engine (after attach). */
struct fs_glocks *fs_cluster_glocks(struct fs_cluster *cl);
/* A reference to glock (@type, @num) held in @mode (LK_PR, LK_EX): with
 * @wait, waiting for it as long as it takes; without, only if that needs
 * no other node's demote (fs_glock_try: -EAGAIN). 0, -EAGAIN, -ENOMEM,
 * -EROFS (EX on a ro node), -EIO (fenced: the node is fenced).
 * fs_cluster_gunlock gives it back. */
int fs_cluster_glock(struct fs_cluster *cl, uint16_t type, uint64_t num,
		     int mode, int wait, struct fs_glock **out);
void fs_cluster_gunlock(struct fs_glock *gl, int mode);
/* Node-down recovery (fs_super.c asks while it replays a dead node's
 * slot from the lock manager's callback): wait (at most 2 x hb_timeout)
 * until slot @slot's owner stopped beating on the disk. 1 dead, 0 still
 * beating. */
int fs_cluster_slot_dead(struct fs_cluster *cl, unsigned slot);
/* Unmount, once everything is written back in place and no transaction
 * can start any more: the glock ops stop using the mount (a demote from
 * now on has nothing to write back); waits for ops in progress. */
void fs_cluster_quiesce(struct fs_cluster *cl);
/* Fence this node: no more device writes, every request -EIO, the
 * kernel's caches dropped right after (the watchdog thread); final until
 * unmounted (stats cluster.fenced, fence_reason, fence_kernel_dropped).
 * @why is logged and kept for the stats. */
void fs_cluster_fence(struct fs_cluster *cl, const char *why);
int fs_cluster_fenced(struct fs_cluster *cl);
/* Count a slot recovered (replayed) by this node. */
void fs_cluster_note_recovery(struct fs_cluster *cl, unsigned slot,
			      unsigned ntx);

/*
 * Test-only fault hook (MOUNT.md "Cluster mounts", like the lock
 * manager's UCFS_LK_CUT): with UCFS_RECOVER_HOLD=DIR in the daemon's
 * environment, recovery step @step ("node_down": the node-down callback,
 * before the replay; "replay": a dead node's journal with one image
 * written home; "adopt": a dead slot's first orphan adopted; "adopt_try":
 * before a survivor takes a dead slot's lock to adopt what it left)
 * waits while the file DIR/@step exists, after writing its pid to
 * DIR/@step.held, so that a test kills or resumes the node right there.
 * 1 if it waited, 0 (at once) without the variable or the file.
 */
int fs_cluster_recover_hold(const char *step);

/* Register / remove the "cluster" and "locks" stats sections. */
int fs_cluster_stats_add(struct fs_cluster *cl, struct fs_stats *st);
void fs_cluster_stats_remove(struct fs_cluster *cl, struct fs_stats *st);

/* Unmount: release the glock (no holder left; everything written
 * back), the slot lock, leave the lockspace, free. Fenced: like
 * fs_cluster_abandon. NULL is a no-op. */
void fs_cluster_close(struct fs_cluster *cl);
/* Leave as if crashed (the others recover our journal), free. */
void fs_cluster_abandon(struct fs_cluster *cl);

#endif /* UCFS_FS_CLUSTER_H */
