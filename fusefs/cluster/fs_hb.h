/*
 * fs_hb.h — the disk heartbeat of a lockproto=dlm mount (fs_hb.c;
 * OCFS2's o2hb in spirit, MOUNT.md "Cluster mounts", FORMAT.md "Slot
 * map, heartbeat, slotinfo").
 *
 * Every mounted node rewrites its slot's heartbeat block every
 * interval_ms, written through (FUA), and one thread per node reads the
 * heartbeat blocks of every slot at the same pace. The lock manager asks
 * fs_hb_node() whether a node is alive on the disk before it declares it
 * dead or forms a membership without it.
 *
 * Lease: this node may write to the device only while its own last beat
 * completed less than lease_ms ago (timeout_ms - 2 * interval_ms) and
 * the beats before it came without a longer gap; fs_hb_gate() is the
 * device's write gate (bd_set_gate). A node that was frozen (SIGSTOP, a
 * stalled VM) past its lease finds the gate shut when it resumes: it is
 * fenced (bd_fence) before it can write, and stops beating, so the
 * others see it die on the disk exactly when it stopped writing.
 *
 * Locking: hb->mu (a leaf) protects the slot table and the counters;
 * the lease fields are atomics (read by the gate on every write).
 */
#ifndef UCFS_FS_HB_H
#define UCFS_FS_HB_H

#include <stddef.h>
#include <stdint.h>

struct bd_dev;
struct fs_hb;
struct fs_json;

struct fs_hb_opts {
	uint32_t node;	      /* this node's id */
	uint32_t addr;	      /* its IPv4 address (network order) */
	uint16_t port;	      /* its lock manager port */
	unsigned interval_ms; /* beat and read every ... */
	unsigned timeout_ms;  /* a node silent this long is dead */
};

/* A node's state on the disk (fs_hb_node). */
enum fs_hb_state {
	FS_HB_NONE = 0,	 /* no live heartbeat block names it (never
			    mounted, or unmounted cleanly) */
	FS_HB_DEAD = 1,	 /* its block stopped changing timeout_ms ago */
	FS_HB_ALIVE = 2, /* beating, or not watched long enough to tell */
};

/*
 * Read the superblock of @bd (not owned; shared with the caller) for the
 * slot count and start the thread, which reads every slot's heartbeat
 * block from now on (nothing is written until fs_hb_start). 0, or
 * -EINVAL (not a ucfs device; reason in @why), -ENOMEM, -errno.
 */
int fs_hb_open(struct bd_dev *bd, const struct fs_hb_opts *o,
	       struct fs_hb **out, char *why, size_t whylen);
/*
 * Start beating in slot @slot (this node's, just claimed). First the
 * slot's block must not be another node's live beat (a crashed owner's
 * is waited for until dead): -EBUSY with that node in *@other. Then,
 * right after a fresh read, the first beat (the lease runs from it), and
 * the watch: this returns only once a read pass that started
 * max(@watch_ms, 2 intervals) after the first beat found it still in
 * place, so that every reader has seen it and no other node writes the
 * slot, before the node writes anything else. -EIO when fenced
 * meanwhile; *@other then names the node that overwrote our beat
 * (~0u: an unreadable block), 0 if none did.
 */
int fs_hb_start(struct fs_hb *hb, unsigned slot, unsigned watch_ms,
		uint32_t *other);
/* The node found writing our slot's block (fencing us), ~0u if the block
 * was unreadable, 0 none. */
uint32_t fs_hb_thief(struct fs_hb *hb);
/* The device write gate (bd_gate_fn): 0, or -EIO once fenced or when
 * the lease ran out (which fences: fs_hb_fenced). Never blocks. */
int fs_hb_gate(void *hb);
/*
 * Fence: stop beating and shut the gate for good, with a last word:
 * also fence @dev (the mount's device, may
 * be NULL), wait until no I/O of it is in flight, and, if our lease
 * still holds then (nobody can have declared us dead), mark our block
 * FENCED: the others see us DEAD at their next read instead of
 * hb_timeout later. May block up to the lease. A device shared with the
 * heartbeat gets no mark (its gate is shut).
 */
void fs_hb_fence_mark(struct fs_hb *hb, struct bd_dev *dev);
int fs_hb_fenced(struct fs_hb *hb);
/* Why the lease ran out, for the fence's message: the last beat's write
 * failed (the device: a lost path), or the node was held up. */
const char *fs_hb_fence_why(struct fs_hb *hb);
/*
 * @node's state on the disk (enum fs_hb_state) as this node's reads
 * saw it, and in *@changed_ns (may be NULL) the CLOCK_MONOTONIC time
 * its beat was last seen to change (0: never). Our own node is NONE.
 * Never blocks.
 */
int fs_hb_node(struct fs_hb *hb, uint32_t node, uint64_t *changed_ns);
/*
 * After every read pass that changed what fs_hb_node answers for some
 * nodes other than by time (a new beat, a block that appears, goes or
 * says FENCED; every node after the first pass and after a pass that
 * ends a hold-up), call @fn(@arg, bitmap of those node ids); under the
 * heartbeat's own lock: @fn must take no lock and not block (the lock
 * manager's lk_ls_disk_changed). NULL: none. Once it returns, no call
 * of the previous @fn runs.
 */
void fs_hb_set_notify(struct fs_hb *hb, void (*fn)(void *arg, uint64_t nodes),
		      void *arg);
/* The state of slot @slot's heartbeat block (its owner's), as above. */
int fs_hb_slot(struct fs_hb *hb, unsigned slot);
uint64_t fs_hb_lease_ms(const struct fs_hb *hb);
unsigned fs_hb_timeout_ms(const struct fs_hb *hb);
/* The heartbeat part of the "cluster" stats section: own beats, and
 * per node seen on the disk its state and the age of its last beat. */
void fs_hb_stats(struct fs_hb *hb, struct fs_json *o);
/* Stop the thread; @clean (a clean unmount): mark our block stopped so
 * that nobody waits for it. The device is not closed. NULL: no-op. */
void fs_hb_close(struct fs_hb *hb, int clean);

#endif /* UCFS_FS_HB_H */
