/*
 * fs_inval.h — the FUSE side of the kernel cache sink (fs.h "kernel
 * cache sink"): tells the kernel of a cluster mount what to drop when a
 * lock leaves this node (fs_inval.c; MOUNT.md "Kernel caches in cluster
 * mounts").
 *
 * Three threads of its own make the notifications, never a request
 * handler: the "attr" thread makes those that can never wait on a
 * request in flight (an inode's attributes, the dentry epoch, prune)
 * and is what ops->sync waits for; the "page" thread makes those that
 * may (a file's pages: the kernel waits for a page a READ or WRITE in
 * flight holds locked; one name: the kernel takes the directory's lock,
 * which a LOOKUP in flight holds); the "flush" thread writes back a
 * file's mapped pages before its lock leaves EX (fs_inval.c). None
 * holds anything a handler needs while it writes to the kernel.
 *
 * Locking: struct fs_inval's queues are under its own mutex, a leaf
 * (never held while writing to the kernel).
 */
#ifndef UCFS_FS_INVAL_H
#define UCFS_FS_INVAL_H

#include <fuse_lowlevel.h>
#include <stdint.h>

#include "fusefs/fs.h"

struct fs_inval;
struct fs_json;

/* Start the threads for session @se whose root directory is inode
 * @root (the kernel's nodeid 1). 0, -ENOMEM, -EAGAIN. */
int fs_inval_new(struct fuse_session *se, uint64_t root, struct fs_inval **out);
/* The sink's ops (fs_set_inval(fs, fs_inval_ops(), iv)). */
const struct fs_inval_ops *fs_inval_ops(void);
/* From the INIT handler: the kernel's FUSE protocol minor. Decides
 * whether names can be invalidated all at once (NOTIFY_INC_EPOCH, 7.44)
 * and inodes pruned (NOTIFY_PRUNE, 7.45); both are tried once and
 * dropped if the kernel refuses them. */
void fs_inval_init(struct fs_inval *iv, unsigned proto_minor);
/* An entry reply hands inode @ino of @mode to the kernel: "all" drops
 * the attributes of the non-regular ones (a directory may be used
 * without a name being looked up again: a working directory). Any
 * thread; takes the set's own lock (a leaf). */
void fs_inval_note(struct fs_inval *iv, uint64_t ino, unsigned mode);
/* A request is about to hand the kernel the name @name in directory
 * @parent (a lookup, positive or negative; a create, mknod, mkdir,
 * symlink, link, a rename's new name; a readdirplus entry): recorded
 * before the reply, so that the drop of @parent's lock drops it. The
 * kernel holds @parent's lock (i_rwsem) from sending such a request
 * until it cached the reply, and dropping a name takes that lock, so a
 * drop that comes after the record never misses the name, even when
 * the reply reaches the kernel after the drop began (a revalidation
 * LOOKUP holds no such lock: its dentry is unhashed by the drop, so its
 * late reply is used by that walk only). Any thread; takes
 * the names' lock (a leaf). */
void fs_inval_name(struct fs_inval *iv, uint64_t parent, const char *name);
/* The kernel may have forgotten @ino (a FORGET dropped references):
 * if it is a directory the sink tracks, its records go (the names
 * handed out in it, which the kernel cannot hold without the directory:
 * every dentry pins its parent; and its place in the set "all" drops),
 * unless @held(@held_arg) says the kernel holds @ino (looked up again
 * before this FORGET came): then they stay. @held is asked only when
 * there is something to drop, under the sink's names lock or set lock
 * (so that no lookup slips in between): it may take leaf locks only
 * (fs_ino_held: ns->tbl_lock). Any thread. */
void fs_inval_forgot(struct fs_inval *iv, uint64_t ino, int (*held)(void *),
		     void *held_arg);
/* An open (@d 1) or release (@d -1) of @ino for reading and writing
 * (O_RDWR: the only mode a shared writable mapping can be made from).
 * Any thread; takes the set's lock (a leaf). */
void fs_inval_open(struct fs_inval *iv, uint64_t ino, int d);
/* 1 while @ino is open O_RDWR here: its pages may be dirtied through a
 * mapping without a request, so a READ takes its lock in EX
 * (fs_read_ex) and the lock's demote flushes them (ops->flush). */
int fs_inval_writable(struct fs_inval *iv, uint64_t ino);
/* 1 when the kernel may cache names (the epoch works), else 0: entry
 * replies must then carry a timeout of 0. */
int fs_inval_names(const struct fs_inval *iv);
/* The "kcache" stats section (STATS.md). */
void fs_inval_stats(struct fs_json *o, void *arg);
/* Stop the threads (what is still queued is dropped) and free. The
 * sink must be removed first (fs_set_inval(fs, NULL, NULL)). NULL is a
 * no-op. */
void fs_inval_free(struct fs_inval *iv);

#endif /* UCFS_FS_INVAL_H */
