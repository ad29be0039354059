/*
 * fs_ns.h — the namespace layer's internals (inodes, directories, file
 * data, xattrs), shared by fs_inode.c, fs_dir.c, fs_file.c, fs_xattr.c
 * and fs_vfs*.c. Not a public API: fs.h is.
 *
 * State: struct fs_ns hangs off struct fs (fs->ns). Inode contents live
 * in the inode's block in the core buffer cache (bounded by cache_mb);
 * the namespace layer keeps in memory only a small record (struct
 * fs_inode, about 200 bytes with its lock) per inode the kernel (or a
 * library caller) holds a reference to — lookup count, open count,
 * orphan links, the inode lock — so memory is cache_mb plus a record per
 * referenced inode, however many files exist; and past inode_max the
 * kernel is asked to forget the least recently used (fs_iprune.c).
 *
 * Locking: the holders and the full order are in fs_ilock.h (every
 * fs.h operation takes its locks there). In short:
 *   - the rename lock (dlm) and ns->rename_mu (a rename between two
 *     directories), then inode locks (dlm: each its glock first, then)
 *     the rwlock in each
 *     referenced inode's record (struct fs_inode.lock), shared to read
 *     that inode's block, directory entries, extent tree, file data and
 *     xattr block, exclusive to change any of them. The buffers of those
 *     blocks (inode, B+tree, xattr: the "owner's lock" of fs_internal.h)
 *     are protected by their inode's lock. Parent before child; others
 *     by inode number.
 *   - ns->refc_lock: a reflink sharing group's refcount tree (shared by
 *     several inodes), after the inode locks, before the handle.
 *   - inode locks are taken before any transaction handle, never while
 *     holding one.
 *   - ns->orphan_lock: the orphan list (ns->orphans, the records'
 *     orphan/oprev/onext, slotinfo.orphan_head, dinode.orphan_next),
 *     taken inside a handle.
 *   - ns->tbl_lock, a mutex over the reference table (hash, nlookup,
 *     nopen, pins, I/O ranges). A leaf but for the glock engine's
 *     e->mu (dlm: an inode's first kernel reference pins its glock, its
 *     last unpins it: fs_glock_pin), which takes nothing of ours;
 *     waiting on range_cond releases it. It also protects the LRU of
 *     kernel-held records (fs_iprune.c); the prune worker drops it
 *     around fs_kinval_forget.
 * File data I/O runs under the inode's lock (shared for reads, exclusive
 * for writes); a write hands its data to fs_data_write with its
 * transaction handle open, so with data=ordered the commit that makes
 * new extents visible waits for the data. The per-inode byte ranges
 * (fs_range_*) remain as the record of I/O in flight that a destroy
 * waits for.
 */
#ifndef UCFS_FS_NS_H
#define UCFS_FS_NS_H

#include <pthread.h>
#include <stdint.h>

#include "fusefs/fs.h"
#include "fusefs/namespace/fs_ilock.h"
#include "fusefs/core/fs_internal.h"

struct fs_sink;
struct fs_iopen_wait;
struct fs_iprune;

/*
 * A byte range of a file with data I/O in flight (see fs_file.c). Lives on the
 * I/O issuer's stack while linked.
 */
struct fs_range {
	uint64_t start, end;		/* [start, end) bytes */
	int write;
	struct fs_range *next;		/* tbl_lock */
};

struct fs_inode {
	uint64_t ino;			/* immutable */
	pthread_rwlock_t lock;		/* the inode lock (fs_ilock.h); the
					   record is pinned while it is held
					   or waited for */
	uint64_t nlookup;		/* tbl_lock */
	uint32_t nopen;			/* tbl_lock */
	uint32_t pins;			/* ops using the record: tbl_lock */
	struct fs_range *ranges;	/* I/O in flight: tbl_lock */
	struct fs_inode *hnext;		/* tbl_lock */
	struct fs_inode *oprev, *onext; /* orphan list mirror:
					   orphan_lock */
	/* dlm (fs_iopen.h): this node's iopen lock, PR while the kernel
	 * holds the inode (nlookup or nopen > 0), EX once the owner may
	 * free it; its queued EX request; a thread taking the PR. tbl_lock
	 * (the lock calls run outside it) */
	struct lk_lock *iopen;
	struct fs_iopen_wait *iopen_wait;
	/* the LRU of records only the kernel's lookups keep (fs_iprune.c):
	 * tbl_lock */
	struct fs_inode *lprev, *lnext;
	uint32_t listed_ms;   /* when a readdirplus entry last handed
				 the kernel its attributes (cvw_now_ms,
				 truncated; 0: never): tbl_lock */
	/* bytes last: no holes (a record per kernel-held inode) */
	uint8_t orphan;	      /* on the orphan list: written under
				 orphan_lock and tbl_lock, read under
				 either */
	uint8_t iopen_ex;     /* held EX: 1 at a try, 2 at a queued grant */
	uint8_t iopen_busy;   /* a thread is taking the PR */
	uint8_t iopen_wanted; /* a blocking callback came on our PR: the
				 owner waits to free it */
	uint8_t iopen_left;   /* an owner's claim found it in use
				 elsewhere: no longer "unreferenced" (the
				 worker frees it at the grant) */
	uint8_t on_lru;	      /* on ns->lru: tbl_lock */
	uint8_t iopen_late;   /* made here, its PR put off until its
				 inode lock leaves (fs_ino_iopen_late):
				 tbl_lock */
};

struct fs_glock;

struct fs_ns_stats {
	uint64_t inodes_created, inodes_freed, orphans_added;
	uint64_t new_inode_refused;	/* dlm: a new inode's EX try refused
					   (another node locks that number):
					   another number taken */
	uint64_t new_inode_waits;	/* ... refused every time: waited for
					   the lock with no handle, retried */
	uint64_t new_inode_unlocked;	/* ... still refused at the last
					   retry: made with its lock taken
					   after the transaction */
	uint64_t orphans_reclaimed;	/* at mount */
	uint64_t iopen_frees_now;	/* dlm: freed at the owner's last
					   reference (no node used it) */
	uint64_t iopen_frees_later;	/* dlm: freed when another node let
					   go (queued EX granted) */
	uint64_t iopen_in_use;		/* dlm: an owner's EX try refused:
					   in use on another node */
	uint64_t iopen_late;		/* dlm: new inodes whose PR was put
					   off (fs_ino_get_made) */
	uint64_t iopen_late_taken;	/* ... and taken when their inode
					   lock left this node */
	uint64_t readdir_bare;		/* readdirplus entries sent without
					   attributes: the kernel had them
					   (fs_ino_listed_fresh) */
	uint64_t statahead_descends;	/* fs_statahead.c: descends into
					   the subdirectories a readdirplus
					   returned */
	uint64_t statahead_after_reply; /* ... of them whose reads for the
					   subdirectories after the first
					   were queued after the reply
					   (fs_sa_defer_end) */
	uint64_t orphans_adopted;	/* dlm: taken from a dead node's
					   slot by this node's recovery */
	uint64_t leftover_slots;	/* dlm: free slots found holding
					   orphans or a free log, taken
					   over by the recovery worker */
	uint64_t data_read_bytes, data_write_bytes, rmw_blocks;
	uint64_t inline_to_extents;
	uint64_t unwritten_allocated; /* blocks fallocated unwritten */
	uint64_t unwritten_converted; /* unwritten blocks a write filled */
	uint64_t copy_bytes;	      /* copied by fs_copy_file_range */
	uint64_t clone_bytes;	      /* shared by fs_clone_range */
	uint64_t cow_blocks;	      /* shared blocks copied on write */
	uint64_t iprune_rounds;	      /* fs_iprune.c: rounds that asked the
					 kernel to forget inodes */
	uint64_t iprune_asked;	      /* ... inodes asked in them */
	uint64_t iprune_refused;      /* ... rounds the kernel could not
					 prune (no FUSE session, or Linux
					 before 6.18): records stay */
};

#define FS_NS_STAT_ADD(fs, field, n) \
	__atomic_fetch_add(&(fs)->ns->st.field, (n), __ATOMIC_RELAXED)

struct fs_ns {
	struct fs_opts opts;		/* immutable */
	uint64_t root;			/* immutable */
	pthread_rwlockattr_t rwattr;	/* immutable: inode locks' kind */
	pthread_mutex_t rename_mu;	/* fs_ilock.h 1a */
	pthread_mutex_t refc_lock;	/* fs_ilock.h 1c */
	pthread_mutex_t orphan_lock;	/* fs_ilock.h 2a */
	pthread_mutex_t tbl_lock;	/* a leaf */
	pthread_cond_t range_cond;	/* a range ended (with tbl_lock) */
	struct fs_inode **hash;		/* tbl_lock */
	size_t nbuckets;		/* tbl_lock */
	size_t count;			/* tbl_lock */
	struct fs_inode *orphans;	/* list head, mirrors the slot's
					   orphan_head: orphan_lock */
	struct fs_sink *sink;		/* the kernel cache sink or NULL:
					   fs_kinval.c's sink_mu */
	int reap_pending;		/* atomic: dlm: an orphan became
					   unreferenced in a request that may
					   not write (fs_reap_orphans) */
	int untracked;			/* atomic: an inode the kernel got
					   could not be tracked (ENOMEM):
					   fs_ino_kernel_held says 1 */
	/* fs_iprune.c: the records only the kernel's lookups keep, least
	 * recently used first (tbl_lock), and the worker that asks the
	 * kernel to forget them past 7/8 of bound */
	struct fs_inode *lru_head, *lru_tail; /* tbl_lock */
	size_t nlru;			/* tbl_lock */
	uint64_t lru_forgot;		/* tbl_lock: records that left the
					   LRU at their last lookup */
	size_t inode_max;		/* immutable: inode_max= */
	size_t bound;			/* immutable after fs_iprune_start:
					   inode_max, or on dlm mounts the
					   smaller of it and glock_max / 2
					   (each kernel-held inode holds two
					   cluster locks: its pinned glock,
					   its iopen lock) */
	struct fs_iprune *iprune;	/* immutable after fs_ns_init */
	struct fs_ns_stats st;		/* atomics */
};

static inline struct fs_dinode *fs_di(struct fs_buf *b)
{
	return (struct fs_dinode *)b->data;
}

/* ---- fs_inode.c ---- */

int fs_ns_init(struct fs *fs, const struct fs_opts *o);

/* ---- fs_iprune.c: the in-core inode bound ---- */

/* Start, stop the worker (fs_ns_init, fs_ns_free; stop before the table
 * goes). */
int fs_iprune_start(struct fs *fs);
void fs_iprune_stop(struct fs *fs);
/* @n's counts changed (tbl_lock held): on the LRU's tail if only the
 * kernel's lookups keep it (so the most recently looked up or used go
 * last), off it otherwise; wakes the worker past the bound. */
void fs_iprune_note(struct fs_ns *ns, struct fs_inode *n);
/* Frees the in-memory state (not the on-disk orphans). No operation may
 * be running. */
void fs_ns_free(struct fs *fs);

/* The inode block of @ino (referenced; fs_buf_put it). -ESTALE if it is
 * not a live inode. Its lock held (either mode), or nothing but the
 * `parent` field read (rename_mu held: fs_vfs_names.c is_ancestor). */
int fs_ino_read(struct fs *fs, uint64_t ino, struct fs_buf **out);
void fs_ino_attr(const struct fs_dinode *di, struct fs_attr *a);

enum { FS_T_ATIME = 1, FS_T_MTIME = 2, FS_T_CTIME = 4 };
void fs_ino_touch(struct fs_dinode *di, unsigned what);
void fs_now(struct timespec *ts);

/* Allocate and initialise a new inode near @goal; nlink = 1 (2 for a
 * directory, whose empty tree is created). The buffer joins @tx. dlm:
 * the inode's glock is taken EX (a try: never a wait inside the handle)
 * before its block joins @tx, and held in *@gl (NULL without dlm) until
 * the caller gives it back (fs_cluster_gunlock, after it locked the
 * inode itself). A number another node still locks is given back and
 * another one taken; -EAGAIN if every try was refused: end the handle
 * and call fs_ino_alloc_refused. @gl NULL (dlm: the last retry): no
 * lock taken, the caller locks the inode after the transaction. */
int fs_ino_alloc(struct fs_tx *tx, uint64_t goal, mode_t mode, uid_t uid,
		 gid_t gid, uint64_t rdev, struct fs_buf **out,
		 struct fs_glock **gl);
/* After fs_ino_alloc's -EAGAIN, holding no handle: wait for the lock of
 * the number refused last (the other node gives it up) and return 1 to
 * retry; 0 if this thread had no refusal. */
int fs_ino_alloc_refused(struct fs *fs);
unsigned fs_ino_alloc_credits(struct fs *fs);

/* Reference table. */
void fs_ino_get_lookup(struct fs *fs, uint64_t ino);
/* A readdirplus entry hands the kernel @ino's attributes and a lookup
 * reference at @now_ms (cvw_now_ms): as fs_ino_get_lookup, and the time
 * is kept for fs_ino_listed_fresh. */
void fs_ino_get_listed(struct fs *fs, uint64_t ino, uint64_t now_ms);
/* How long after a readdirplus entry the kernel's copy of its inode
 * counts as fresh (fs_ino_listed_fresh). */
#define FS_LISTED_FRESH_MS 1000
/* 1 if the kernel holds @ino by a lookup and a readdirplus entry handed
 * it @ino's attributes less than FS_LISTED_FRESH_MS before @now_ms: a
 * readdirplus may then send the entry bare (fs_readdir's
 * FS_READDIR_BARE). Takes tbl_lock (a leaf). */
int fs_ino_listed_fresh(struct fs *fs, uint64_t ino, uint64_t now_ms);
void fs_ino_get_open(struct fs *fs, uint64_t ino);
/* The kernel's lookup reference to an inode this node just made, its
 * inode lock held EX since fs_ino_alloc: on dlm mounts its iopen PR is
 * put off until that lock leaves the node (fs_ino_iopen_late; a later
 * fs_ino_get_* keeps it off). */
void fs_ino_get_made(struct fs *fs, uint64_t ino);
/* dlm: @ino's inode lock is about to go to NL or be given up (the inode
 * type's drop, before the lock manager hears of it): an inode made here
 * whose PR was put off takes it now if the kernel still holds it, so a
 * node that unlinks it next finds it in use here (fs_iopen.h); from then
 * on it is held as for any other inode. */
void fs_ino_iopen_late(struct fs *fs, uint64_t ino);
/* Drop references; returns 1 if the inode is now unreferenced. */
int fs_ino_put(struct fs *fs, uint64_t ino, uint64_t nlookup,
	       uint32_t nopen);
/* Pin the record of @ino for the duration of an operation (NULL on
 * ENOMEM). Unpin returns 1 if the inode is now an unreferenced orphan
 * (the caller then destroys it under its lock, exclusive). */
struct fs_inode *fs_ino_pin(struct fs *fs, uint64_t ino);
int fs_ino_unpin(struct fs *fs, struct fs_inode *n);
/* I/O ranges of a pinned record. add: wait until no conflicting range
 * (a write conflicts with any overlap, a read with overlapping writes),
 * then link @r. wait_all: until no range at all. */
void fs_range_add(struct fs *fs, struct fs_inode *n, struct fs_range *r);
void fs_range_del(struct fs *fs, struct fs_inode *n, struct fs_range *r);
void fs_range_wait_all(struct fs *fs, struct fs_inode *n);

/* Put @b's inode (nlink just reached 0) on the orphan list, in @tx. */
int fs_ino_orphan_add(struct fs_tx *tx, struct fs_buf *b);
unsigned fs_ino_orphan_credits(void);
/* Free every block of orphan @ino and the inode itself, removing it from
 * the orphan list. Own transactions; its lock exclusive, or no other
 * operation running (mount, unmount). */
int fs_ino_destroy(struct fs *fs, uint64_t ino);
/* If @ino has nlink 0 and no reference but the caller's lock (held
 * exclusive): destroy it. */
int fs_ino_maybe_destroy(struct fs *fs, uint64_t ino);
/* Mount: free every inode on the slot's orphan list. */
int fs_ino_reclaim_orphans(struct fs *fs);
/* Unmount: destroy in-memory orphans (references are gone; dlm: those
 * no other node uses, the others stay on the list). */
int fs_ino_release_all(struct fs *fs);
/* dlm, dead slot @slot's lock held, its journal replayed: move the first
 * inode of its orphan list to ours, in one transaction under its inode
 * lock, and destroy it if no node uses it; *ino (0: the list is empty).
 * -EUCLEAN (a bad list), -errno. */
int fs_ino_orphan_adopt(struct fs *fs, unsigned slot, uint64_t *ino);
/* dlm: 1 if @ino is looked up but not open, and unlinked: its iopen
 * owner waits for it, or this node is its owner (fs_iopen.c). */
int fs_ino_iopen_wanted(struct fs *fs, uint64_t ino);
/* dlm: keep among inos[0..n) those whose record holds no iopen lock and
 * takes none now (a prefetched PR for one that has a hold would be a
 * second hold of this node, which its own owner's EX try then waits
 * for); returns how many are kept. */
size_t fs_ino_iopen_unheld(struct fs *fs, uint64_t *inos, size_t n);
/* dlm: another node wants the PR holds @lks[0..n) given up (an owner
 * waits to free those inodes): the records holding them are marked
 * (iopen_wanted), each found by its number (the lock's name); the
 * numbers of those no file keeps open go to @inos (room for @n), their
 * count returned. */
size_t fs_ino_iopen_mark_wanted(struct fs *fs, struct lk_lock *const *lks,
				size_t n, uint64_t *inos);
/* 1 if the kernel may hold @ino (a lookup reference or an open file,
 * the root, or any inode since one could not be tracked): only then can
 * it have cached the inode's attributes, pages or names. Exact when no
 * request that hands the inode to the kernel runs meanwhile: every one
 * counts its reference (fs_ino_get_lookup/open) under the inode's lock,
 * or (readdirplus) before its reply. */
int fs_ino_kernel_held(struct fs *fs, uint64_t ino);

/* ---- fs_dir.c ---- */

void fs_dir_tree(struct fs *fs, struct fs_buf *dir, struct fs_btree *bt);
/* Find @name; *ino, *type and *key (the entry's key) may be NULL.
 * -ENOENT. */
int fs_dir_lookup(struct fs *fs, struct fs_buf *dir, const char *name,
		  size_t len, uint64_t *ino, unsigned *type, uint64_t *key);
/* Add an entry (caller checked it is absent). -ENOSPC (probe range full
 * or no block), -EIO. */
int fs_dir_add(struct fs_tx *tx, struct fs_buf *dir, const char *name,
	       size_t len, uint64_t ino, unsigned type);
int fs_dir_remove(struct fs_tx *tx, struct fs_buf *dir, uint64_t key);
/* Point an existing entry (@key, named @name) at another inode. */
int fs_dir_set(struct fs_tx *tx, struct fs_buf *dir, uint64_t key,
	       const char *name, size_t len, uint64_t ino, unsigned type);
unsigned fs_dir_credits(struct fs *fs, struct fs_buf *dir);
/* readdir from @cookie: "." (0), ".." (1), then entries by key. */
int fs_dir_iterate(struct fs *fs, struct fs_buf *dir, uint64_t cookie,
		   int (*cb)(void *arg, const struct fs_dirent *de),
		   void *arg);

/* ---- fs_extent.c ---- */

#define FS_FILE_MAX (1ull << 52)		/* bytes */
#define FS_LB_END (FS_FILE_MAX / FS_BLOCK_SIZE) /* first block past it */
/* blocks in one extent */
#define FS_EXT_LEN_MAX ((1u << 31) - 1)

/* One extent in memory: file blocks [lb, lb + len) at device blocks
 * [phys, phys + len), flags FS_EXT_*. */
struct fs_ext {
	uint64_t lb;
	uint64_t phys;
	uint32_t len;
	uint32_t flags;
};

/* The extent tree of regular file @ib (EXTENTS format). */
void fs_ext_tree(struct fs *fs, struct fs_buf *ib, struct fs_btree *bt);
/* The extent containing block @lb (0), or -ENOENT with *hole_end = the
 * next extent's start (FS_LB_END if none); -EUCLEAN, -EIO. */
int fs_ext_map(struct fs_btree *bt, uint64_t lb, struct fs_ext *e,
	       uint64_t *hole_end);
/* Insert @e (new key) or update the extent with key e->lb. */
int fs_ext_put(struct fs_tx *tx, struct fs_btree *bt, const struct fs_ext *e,
	       int insert);
/* Give blocks [a, b) of extent @e (as mapped now) the flags @flags,
 * splitting @e and merging with a neighbour; fs_ext_convert_credits()
 * credits. -EINVAL if [a, b) is not inside @e. */
int fs_ext_set_flags(struct fs_tx *tx, struct fs_btree *bt,
		     const struct fs_ext *e, uint64_t a, uint64_t b,
		     uint32_t flags);
unsigned fs_ext_convert_credits(struct fs_btree *bt);
/* Split the extent containing @lb (if any, and not starting there) so
 * that an extent starts at @lb: 2 * fs_btree_credits(). */
int fs_ext_split(struct fs_tx *tx, struct fs_btree *bt, uint64_t lb);
/* Re-key extent @e (as mapped now) to start at file block @lb; the
 * caller makes sure no extent overlaps the new place: 2 *
 * fs_btree_credits(). */
int fs_ext_move(struct fs_tx *tx, struct fs_btree *bt, const struct fs_ext *e,
		uint64_t lb);
/* SEEK_DATA (@data) / SEEK_HOLE from block @lb: *out = the first block
 * >= @lb in a written extent / not in one (unwritten extents are holes).
 * -ENXIO: no data at or after @lb. */
int fs_ext_seek(struct fs_btree *bt, uint64_t lb, int data, uint64_t *out);

/* Blocks [a, b) of extent @e (as mapped now) move to device blocks from
 * @phys with flags @flags (copy on write): up to three extents, no
 * merge; fs_ext_convert_credits(). */
int fs_ext_remap(struct fs_tx *tx, struct fs_btree *bt, const struct fs_ext *e,
		 uint64_t a, uint64_t b, uint64_t phys, uint32_t flags);

/* ---- fs_refcount.c ---- */

/* The filesystem has the reflink feature (mkfs default). */
int fs_refc_enabled(struct fs *fs);
/* The refcount tree root of @ib (referenced; fs_buf_put it). -EUCLEAN if
 * it has none. */
int fs_refc_root(struct fs *fs, struct fs_buf *ib, struct fs_buf **rb);
/* The count of device block @phys (1: no record) and the run of blocks
 * from it with the same count, at most @max. */
int fs_refc_count(struct fs *fs, struct fs_buf *rb, uint64_t phys, uint32_t max,
		  uint32_t *count, uint32_t *run);
/* A file drops the run [phys, phys + len) of count @count: -1, the
 * blocks are freed when @count is 1. fs_refc_credits(). */
int fs_refc_dec(struct fs_tx *tx, struct fs_buf *rb, uint64_t phys,
		uint32_t len, uint32_t count);
/* Credits of one fs_refc_dec on @ib's tree (0 if it has none). */
unsigned fs_refc_credits(struct fs *fs, struct fs_buf *ib);
/* Make @a and @b use one tree (created if neither has one): -EOPNOTSUPP
 * if they use different ones. fs_refc_attach_credits(). */
int fs_refc_attach(struct fs_tx *tx, struct fs_buf *a, struct fs_buf *b);
unsigned fs_refc_attach_credits(struct fs *fs);
/* @ib (no shared extent left) stops using its tree; the last user frees
 * it. fs_refc_detach_credits(). */
int fs_refc_detach(struct fs_tx *tx, struct fs_buf *ib);
unsigned fs_refc_detach_credits(struct fs *fs);
/* FICLONERANGE: share [off_in, off_in + len) of @in with @out at
 * @off_out (len 0: to the source's EOF), replacing what @out mapped
 * there; Linux's checks and errnos (-EINVAL misaligned or overlapping,
 * -EOPNOTSUPP no reflink feature, an inline source, or the files in two
 * sharing groups). Both inodes exclusive and ns->refc_lock. */
int fs_file_clone(struct fs *fs, struct fs_buf *in, struct fs_buf *out,
		  uint64_t off_in, uint64_t off_out, uint64_t len);

/* ---- fs_file.c ---- */

/* Read; the inode's lock shared (held through the device I/O). @n (may
 * be NULL) records the range in flight. */
ssize_t fs_file_read(struct fs *fs, struct fs_inode *n, struct fs_buf *ib,
		     void *buf, size_t len, uint64_t off);
/* Write, allocating as needed; updates size and times. The inode's lock
 * exclusive (held through the I/O), ns->refc_lock if it shares extents; @ib
 * referenced by the caller; no handle held. */
ssize_t fs_file_write(struct fs *fs, struct fs_inode *n, struct fs_buf *ib,
		      const void *buf, size_t len, uint64_t off);
/* The inode's lock exclusive (and ns->refc_lock if it shares extents);
 * wait for @n's I/O first (@n may be NULL). */
int fs_file_truncate(struct fs *fs, struct fs_inode *n, struct fs_buf *ib,
		     uint64_t size);
/* Free all data blocks (destroy). */
int fs_file_free_all(struct fs *fs, struct fs_buf *ib);
/* Helpers fs_falloc.c shares; the inode's lock exclusive, no handle. */
/* Credits of one write piece: an allocation mapped, or a conversion. */
unsigned fs_file_map_credits(struct fs *fs, struct fs_btree *bt);
/* INLINE -> EXTENTS (the data moves to a block). */
int fs_file_to_extents(struct fs *fs, struct fs_buf *ib);
/* Free every block mapped in [lb0, lb1) (own transactions). */
int fs_file_unmap(struct fs *fs, struct fs_buf *ib, uint64_t lb0, uint64_t lb1);
/* Inline data, in one transaction: copy @len bytes of @buf to @off of the
 * inline area, or with @buf NULL zero those of them below the size (the
 * area past the size is zero already); with @grow the size becomes at
 * least @off + @len, which must then fit the area. mtime and ctime.
 * Call with the inode exclusive. 0 or -errno (-EIO: the commit failed). */
int fs_file_inline_write(struct fs *fs, struct fs_buf *ib, const void *buf,
			 uint64_t off, uint64_t len, int grow);
/* Zero bytes [from, to) of one written block, if mapped. */
int fs_file_zero_partial(struct fs *fs, struct fs_buf *ib, uint64_t from,
			 uint64_t to);
/* Set the size (no unmapping) and mtime/ctime in one transaction. */
int fs_file_set_size(struct fs *fs, struct fs_buf *ib, uint64_t size);

/* ---- fs_falloc.c ---- */

/* fallocate(2) (fs.h fs_fallocate); the inode's lock exclusive (and
 * ns->refc_lock if it shares extents); waits for @n's I/O
 * first (@n may be NULL). */
int fs_file_fallocate(struct fs *fs, struct fs_inode *n, struct fs_buf *ib,
		      int mode, uint64_t off, uint64_t len);
/* SEEK_DATA (@data) / SEEK_HOLE from byte @off: *out = the offset of
 * the next data (written extent, or inline data) / hole (a hole, an
 * unwritten extent, or the end of the file). -ENXIO if @off >= size or
 * no data follows. The inode's lock shared. */
int fs_file_seek(struct fs *fs, struct fs_buf *ib, uint64_t off, int data,
		 uint64_t *out);

/* ---- fs_xattr.c ---- */

int fs_xattr_set(struct fs *fs, struct fs_buf *ib, const char *name,
		 const void *value, size_t size, int flags);
ssize_t fs_xattr_get(struct fs *fs, struct fs_buf *ib, const char *name,
		     void *buf, size_t size);
ssize_t fs_xattr_list(struct fs *fs, struct fs_buf *ib, char *buf,
		      size_t size);
int fs_xattr_remove(struct fs *fs, struct fs_buf *ib, const char *name);
/* Free the xattr block (in @tx). */
int fs_xattr_free(struct fs_tx *tx, struct fs_buf *ib);
/* New inode @child in @parent: apply the parent's default ACL (or
 * @umask when there is none) to *mode and copy the ACLs to the child.
 * Call before the child is created: returns the ACL values to store with
 * fs_xattr_inherit_apply(). */
struct fs_acl_inherit {
	int has_default;
	size_t access_len, default_len;
	uint8_t access[512];
	uint8_t deflt[512];
};
int fs_xattr_inherit_prepare(struct fs *fs, struct fs_buf *parent,
			     mode_t *mode, mode_t umask,
			     struct fs_acl_inherit *out);
int fs_xattr_inherit_apply(struct fs *fs, struct fs_buf *child,
			   const struct fs_acl_inherit *in);
/* chmod: bring an access ACL in line with the new mode. */
int fs_xattr_acl_chmod(struct fs *fs, struct fs_buf *ib);

#endif /* UCFS_FS_NS_H */
