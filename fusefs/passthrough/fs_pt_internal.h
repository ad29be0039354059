/*
 * fs_pt_internal.h — struct bodies of the pass-through backend (fs_pt.c:
 * the request handlers; fs_pt_inode.c: inodes, file handles and the
 * descriptor cache; fs_pt_cred.c: the caller's credentials). Nothing
 * else includes this.
 *
 * Inodes. The kernel's nodeid of a lower object is a number given once
 * (a counter, never reused; the root is FUSE_ROOT_ID). The object itself
 * is held by its file handle (name_to_handle_at) and the mount it was
 * found on, not by a descriptor, so a tree of millions of files costs
 * memory, not descriptors. An operation turns the handle into an O_PATH
 * descriptor (open_by_handle_at), which stays in a bounded cache of
 * recently used descriptors (PT_FD_CACHE) so that a directory being
 * filled or a file being stat'ed again pays nothing. A filesystem that
 * has no lasting file handles (FUSE, /proc) gets the old scheme
 * for its objects: an O_PATH descriptor held for the inode's life
 * ("pinned"), counted in the stats.
 *
 * Two lower objects are the same inode when their handles (and mounts)
 * are equal, so hard links share a nodeid and an inode number reused by
 * the lower filesystem is a new inode (its handle's generation differs).
 *
 * Locking (in this order):
 *   1. pt->tbl_lock: both hash tables, every inode's nlookup and hash
 *      links, pt->ninodes, pt->next_nodeid.
 *   2. pt->fd_lock: every inode's fd, fd_users, fd_ref and ring links;
 *      pt->ring, pt->nfds.
 *   3. pt->mnt_lock: pt->mnts, pt->nmnts.
 *   fs_pt_cred.c's groups cache has its own lock, taken alone.
 * An inode is freed by forget when nlookup reaches 0, under tbl_lock
 * and then fd_lock; the kernel sends no request on a nodeid it forgot,
 * so no handler holds the inode then.
 */
#ifndef UCFS_FS_PT_INTERNAL_H
#define UCFS_FS_PT_INTERNAL_H

#include "fusefs/passthrough/fs_pt.h"
#include "fusefs/stats/fs_stats.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>

#define PT_HANDLE_MAX 128 /* MAX_HANDLE_SZ */
#define PT_FD_CACHE 4096  /* O_PATH descriptors kept open */
#define PT_MOUNTS_MAX 64  /* lower mounts with their own mount fd */
#define PT_HASH_MIN 1024
#define PT_FUSE_MAGIC 0x65735546 /* FUSE_SUPER_MAGIC: handles not kept */

struct pt_inode {
	uint64_t nodeid;	 /* immutable */
	uint64_t key;		 /* immutable: hash of the handle */
	dev_t dev;		 /* immutable: lower st_dev */
	ino_t ino;		 /* immutable: lower st_ino */
	int mnt;		 /* immutable: index into pt->mnts, -1 pinned */
	int pinned_fd;		 /* immutable: O_PATH fd held for life, or -1 */
	uint64_t nlookup;	 /* tbl_lock */
	struct pt_inode *by_id;	 /* tbl_lock: nodeid hash chain */
	struct pt_inode *by_key; /* tbl_lock: handle hash chain */
	int fd;			 /* fd_lock: cached O_PATH fd or -1 */
	unsigned fd_users;	 /* fd_lock: handlers using fd now */
	unsigned char fd_ref;	 /* fd_lock: used since the clock passed */
	struct pt_inode *ring_next, *ring_prev; /* fd_lock */
	unsigned hbytes;			/* immutable: handle size */
	int htype;				/* immutable: handle type */
	unsigned char handle[];			/* immutable */
};

struct pt_mount {
	int id; /* mount id from name_to_handle_at */
	int fd; /* a directory on it, O_RDONLY (open_by_handle_at's); -1:
		   its handles are not kept (a FUSE filesystem forgets the
		   inodes behind them unless it exports them): pin */
};

/* Per-op figures of the "passthrough" stats section. */
struct pt_op_acct {
	_Atomic uint64_t calls;	     /* system calls to the lower fs */
	_Atomic uint64_t lower_ns;   /* time inside them */
	_Atomic uint64_t resolve_ns; /* time turning handles into fds */
	_Atomic uint64_t reply_ns;   /* time sending the reply */
};

struct fs_pt {
	char dir[4096];	       /* immutable: the lower directory */
	double timeout;	       /* immutable: entry/attr cache seconds */
	int writeback;	       /* immutable: writeback_cache asked */
	int kernel_perms;      /* immutable: allow_other: the kernel checks
				  permissions and ACLs too (default_permissions) */
	struct pt_inode *root; /* immutable: nodeid FUSE_ROOT_ID */
	struct fs_stats *st;   /* set before the loop, then immutable */

	pthread_mutex_t tbl_lock;
	struct pt_inode **by_id;  /* tbl_lock: [nbuckets] */
	struct pt_inode **by_key; /* tbl_lock: [nbuckets] */
	size_t nbuckets;	  /* tbl_lock */
	uint64_t ninodes;	  /* tbl_lock */
	uint64_t next_nodeid;	  /* tbl_lock */

	pthread_mutex_t fd_lock;
	struct pt_inode *ring; /* fd_lock: clock hand, inodes with an fd */
	unsigned nfds;	       /* fd_lock */
	unsigned max_fds;      /* immutable */

	pthread_mutex_t mnt_lock;
	struct pt_mount mnts[PT_MOUNTS_MAX]; /* mnt_lock (fds immutable) */
	int nmnts;			     /* mnt_lock */

	struct pt_op_acct acct[FS_OP__COUNT];
	_Atomic uint64_t fd_hits;	/* O_PATH fd found in the cache */
	_Atomic uint64_t fd_opens;	/* open_by_handle_at calls */
	_Atomic uint64_t fd_evictions;	/* cached fds closed for room */
	_Atomic uint64_t stale;		/* handles the lower fs refused */
	_Atomic uint64_t pinned;	/* inodes held by an fd (no handles) */
	_Atomic uint64_t cred_switches; /* thread credential changes */
	_Atomic uint64_t group_reads; /* /proc reads of supplementary groups */
};

/* One request being served: the timing of its lower calls. */
struct pt_req {
	struct fs_pt *pt;
	fuse_req_t req;
	enum fs_op op;
	uint64_t t0;
	uint64_t lower_ns;
	uint64_t resolve_ns;
	uint64_t t_reply; /* when the reply started (replying()) */
	unsigned calls;
};

/* Time a lower call: t = pt_now(); ret = call(...); ret = pt_done(r, t,
 * ret): adds the time, turns -1 into -errno. */
static inline uint64_t pt_now(void)
{
	return fs_stats_now();
}

static inline long pt_done(struct pt_req *r, uint64_t t, long ret)
{
	int e = ret < 0 ? errno : 0;

	r->lower_ns += pt_now() - t;
	r->calls++;
	return ret < 0 ? -e : ret;
}

/* @lhs = @call, the call timed as lower time of @r (-1 becomes -errno):
 *	PT_CALL(r, ret, unlinkat(dfd, name, 0)); */
#define PT_CALL(r, lhs, call)                                                  \
	do {                                                                   \
		uint64_t t_ = pt_now();                                        \
		lhs = pt_done((r), t_, (call));                                \
	} while (0)

/* ---- fs_pt_inode.c ---- */

int pt_table_init(struct fs_pt *pt, int root_fd, char *err, size_t errlen);
void pt_table_free(struct fs_pt *pt);

/* The inode of @nodeid (FUSE_ROOT_ID: the root) or NULL. */
struct pt_inode *pt_inode_get(struct fs_pt *pt, fuse_ino_t nodeid);

/* Look @name up in @dir (an O_PATH fd): fill @st and return the inode
 * with one more lookup reference in *@out. Runs as the caller. -errno. */
int pt_inode_lookup(struct pt_req *r, int dir, const char *name,
		    struct stat *st, struct pt_inode **out);

/* Drop @n lookup references; frees the inode at 0 (not the root). */
void pt_inode_forget(struct pt_req *r, struct pt_inode *pi, uint64_t n);

/* An O_PATH fd of @pi, for one request: release it with pt_fd_put.
 * Opened from the handle (as root) if not cached. -errno (-ESTALE: the
 * lower object is gone). */
int pt_fd_get(struct pt_req *r, struct pt_inode *pi);
void pt_fd_put(struct fs_pt *pt, struct pt_inode *pi, int fd);

/* "/proc/self/fd/N" of @fd into @buf (32 bytes): the path that reopens
 * an O_PATH fd with a real mode or reaches its xattrs. */
void pt_fd_path(int fd, char *buf, size_t len);

/* ---- fs_pt_cred.c ---- */

/* Run this thread's next lower calls as the request's caller: fsuid,
 * fsgid, supplementary groups, and umask (@create). 0 or -errno. */
int pt_cred_caller(struct pt_req *r, int create);
/* As root (fsuid 0: what open_by_handle_at needs). */
int pt_cred_root(struct fs_pt *pt);

#endif /* UCFS_FS_PT_INTERNAL_H */
