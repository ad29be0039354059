/*
 * fs_internal.h — the storage layer ("core") of ucfs as the namespace
 * layer sees it: the mount (struct fs), the block cache, transactions and
 * the journal, the allocator, the generic B+tree, mkfs.
 *
 * Ownership of this header: the CORE engineer. The namespace (NS) layer
 * keeps its own state in struct fs_ns, declared in fusefs/namespace/fs_ns.h
 * (NS's file) and reached through fs->ns; NS adds nothing to this file, so the
 * two can be merged without conflicts.
 *
 * Sections: lock order / mount options and struct fs / mount & mkfs /
 * buffer cache / transactions & journal / allocator / B+tree / stats.
 *
 * Locking (numbered order: take a lower number before a higher one, never
 * the reverse):
 *   1. the namespace's locks (fs_ilock.h: the rename lock and mutex,
 *      per-inode locks (dlm: each its glock first), the refcount locks,
 *      rgroup glocks waited for with no handle; the orphan lock inside a
 *      handle; the leaf ns->tbl_lock)
 *   2. transaction handle (fs_tx_begin .. fs_tx_end). Take it AFTER the
 *      inode locks; a thread holding a handle must never wait for an
 *      inode lock nor for a glock (only fs_glock_try: a commit waits
 *      for every handle to end, and a demote for a commit). Handles do
 *      not nest: one handle per thread at a time.
 *   3. the free log's lock, then the rgroup lock (fs_alloc.c, internal)
 *   4. journal lock (internal: running transaction lists, the per-owner
 *      table of transaction sequences not yet checkpointed)
 *   5. cache lock (internal: hash, owner hash, LRU, refcounts, flags,
 *      each buffer's owner)
 *   6. data write-behind lock (fs_data.c, internal; a leaf)
 * The journal's commit mutex is taken by fs_tx_begin, fs_journal_sync
 * and fs_journal_sync_owner only when no handle is held by the caller,
 * i.e. between 1 and 2.
 *
 * Buffer contents are protected by the lock of the object that owns the
 * block: an inode's block, its B+tree nodes and xattr block by that
 * inode's lock (fs_ilock.h; dlm: and its glock), a refcount tree by
 * ns->refc_lock (dlm: and the tree's glock), bitmaps and rgroup headers
 * by the rgroup lock (dlm: and the rgroup's glock held in EX), this
 * slot's slotinfo by the orphan lock (orphan list) and the free log's
 * lock (free log). A block is modified only inside a handle, after
 * fs_tx_write() on its buffer.
 */
#ifndef UCFS_FS_INTERNAL_H
#define UCFS_FS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "blockdev/bd.h"
#include "fusefs/fs_format.h"

struct fs_cache;
struct fs_journal;
struct fs_alloc;
struct fs_data;
struct fs_ns;
struct fs_tx;
struct fs_cluster;
struct fs_statfs;

/* ---- mount options and struct fs ------------------------------------- */

struct fs_core_opts {
	int ro;			/* never write the device; refuse if replay
				   is needed */
	int nolock;		/* 1: lockproto=nolock (exclusive), 0: dlm */
	int data_writeback;	/* 0: data=ordered, 1: data=writeback */
	unsigned commit_s;	/* commit interval in seconds (0: default 5) */
	unsigned cache_mb;	/* cache bound in MiB (0: default 256) */
	int slot;		/* dlm: slot to claim, -1 = first free;
				   nolock: -1 = slot 0 (tests may run two
				   nolock mounts on slots 0 and 1 of one
				   device as two nodes) */
	uint32_t node_id;	/* dlm: this node's id; 0 for nolock */
	int sb_backup;		/* 1: use the backup superblock (block 1)
				   even if block 0 is not ucfs at all */
	unsigned statfs_quantum_s; /* statfs records: our change folded
				      into the master this often (0: the
				      default, FS_STATFS_QUANTUM_S) */
	int statfs_slow;	   /* dlm: statfs counts the groups under
				      their locks (statfs_quantum=0) */
	unsigned statfs_percent;   /* ... and early once its free blocks
				      reach this percent of the master's
				      (0: never, GFS2's default) */
	unsigned busy_wait_ms;	/* fs_core_open: how long to wait for a
				   previous holder of the device (a daemon
				   still finishing after umount); 0: 10 s */
	struct fs_cluster *cl;	/* dlm: the open cluster membership
				   (fs_cluster.h); the mount owns it once
				   fs_core_mount succeeded */
};

/* Defaults: rw, nolock, data=ordered, commit=5, cache_mb=256, slot -1. */
void fs_core_opts_init(struct fs_core_opts *o);

/* Counters (cumulative since mount; read with fs_core_stats_get). */
enum fs_commit_reason {
	FS_CR_SYNC,		/* fsync / syncfs / sync handle */
	FS_CR_TIMER,		/* commit= interval */
	FS_CR_TXFULL,		/* running transaction reached its limit */
	FS_CR_JOURNAL,		/* journal space (then checkpoint) */
	FS_CR_CACHE,		/* cache pressure (then checkpoint) */
	FS_CR_UNMOUNT,
	FS_CR_LOCK,		/* fs glock demote (cluster) */
	FS_CR_NR
};

struct fs_core_stats {
	uint64_t commits, commit_blocks, commit_bytes;
	uint64_t commit_ns_total, commit_ns_max;
	uint64_t commit_reason[FS_CR_NR];
	uint64_t commit_waited;	/* commits a request made (and waited for)
				 * because the commit thread had not */
	uint64_t fsync_clean;	/* fsyncs of one inode that needed no
				 * commit (fs_journal_sync_ino) */
	uint64_t checkpoints, checkpoint_blocks;
	uint64_t ckpt_records;	/* checkpoints marked by a log record */
	uint64_t ckpt_headers;	/* ... by moving the header's tail (FUA) */
	uint64_t records_allowed; /* gauge: 1 while records are written */
	uint64_t records_off;	  /* dlm: times the cluster turned them off */
	uint64_t flushes;
	uint64_t cache_hits, cache_misses, cache_evictions, cache_readahead;
	uint64_t cache_bufs, cache_pinned;	/* current values */
	uint64_t alloc_calls, alloc_blocks, alloc_enospc, free_blocks;
	uint64_t alloc_resv_made;	/* reservations (file runs, inode
					 * chunks) set up */
	uint64_t alloc_stolen;	/* allocations that took reserved blocks */
	uint64_t alloc_rg_refused; /* dlm: rgroup tries another node refused */
	uint64_t alloc_starved;	   /* dlm: ENOSPC retries that took a group */
	uint64_t alloc_swept;	   /* dlm: groups taken by ENOSPC sweeps */
	uint64_t alloc_rg_waits;   /* dlm: rgroup glocks waited for */
	uint64_t flog_logged;	   /* dlm: blocks put in the free log */
	uint64_t flog_applied;	   /* dlm: ... freed from it */
	uint64_t flog_overflows;   /* dlm: entries kept in memory only */
	uint64_t flog_room_applies; /* dlm: applied early, nearly full */
	uint64_t flog_dead_applied; /* dlm: blocks of dead nodes' logs
				       freed by this survivor */
	uint64_t flog_dead_errors;  /* dlm: ... left for the next
				       recovery of the slot */
	uint64_t flog_dead_retries; /* dlm: passes over a dead log
				       tried again after an error */
	uint64_t flog_worker_runs;  /* dlm: the worker's applies */
	uint64_t flog_dead_slots;   /* dlm: dead slots' logs applied */
	uint64_t statfs_folds;	    /* our change folded into the master */
	uint64_t statfs_dead_folds; /* dlm: dead slots' changes folded */
	uint64_t statfs_fold_errors; /* the worker's folds that failed */
	uint64_t statfs_reads;	     /* dlm: statfs answered from the master */
	uint64_t statfs_slow_reads;  /* dlm: ... by counting the groups
					(statfs_quantum=0, or a record
					unreadable) */
	uint64_t statfs_percent_wakes; /* our change passed statfs_percent
					  of the master: early fold */
	uint64_t statfs_untracked;     /* changes not put in our change
					  record: it is unreadable */
	uint64_t replay_tx, replay_blocks;
	uint64_t replay_scanned;	/* log blocks the replays walked */
	uint64_t bad_blocks;			/* -EUCLEAN detections */
	uint64_t data_writes, data_bytes;	/* fs_data_write calls/bytes */
	uint64_t data_throttled;	/* writers that waited for the bound */
	uint64_t data_read_hits;	/* reads served from in-flight data */
	uint64_t data_errors;		/* failed data writes */
	uint64_t data_waits;		/* fs_data_wait calls */
	/* prefetch (fs_buf_prefetch / fs_buf_readahead); cache_readahead
	 * counts the blocks read ahead */
	uint64_t ra_ios;		/* device reads issued (merged runs) */
	uint64_t ra_gap_blocks;		/* blocks read only to merge runs */
	uint64_t ra_hits;		/* prefetched blocks a demand read used */
	uint64_t ra_waits;		/* ... while their read was in flight */
	uint64_t ra_wait_ns;		/* time those demand reads waited */
	uint64_t ra_wasted;		/* prefetched blocks dropped unused */
	uint64_t ra_skipped;		/* not prefetched: bound reached */
	uint64_t ra_errors;		/* prefetch reads that failed */
	uint64_t ra_bounce_maps;	/* bounce buffers mapped */
	uint64_t ra_discarded;		/* prefetched blocks a racing drop of
					   their owner made stale */
	uint64_t ra_drain_waits;	/* drops that waited for prefetches */
	uint64_t ra_drain_ns;		/* time those drops waited */
	uint64_t ra_unused;		/* current value: prefetched, unused */
	uint64_t data_runs;		/* combined runs closed */
	uint64_t data_absorbed;		/* writes absorbed by an open run */
	uint64_t data_rmw_dev;		/* RMW reads that hit the device */
};

/*
 * The mount. Fields are immutable after fs_core_mount() returns unless
 * stated otherwise.
 */
struct fs {
	struct bd_dev *bd;
	int own_bd;			/* fs_core_unmount closes bd */
	struct fs_sb sb;		/* verified copy of the superblock */
	struct fs_core_opts opts;
	unsigned slot;			/* the slot (journal) this mount owns */
	uint64_t slot_gen;		/* generation of our claim */
	int ro;
	int sb_backup;			/* 0: primary superblock used; 1: the
					   backup (block 1); 2: backup, and
					   block 0 rewritten from it */
	char notice[400];		/* "" or a message the daemon should
					   log after mounting (backup sb) */
	struct fs_cache *cache;		/* fs_cache.c */
	struct fs_journal *j;		/* fs_journal.c */
	struct fs_alloc *alloc;		/* fs_alloc.c */
	struct fs_flog *flog;		/* fs_flog.c (dlm free log) */
	struct fs_statfs *sfs;		/* fs_statfs.c, or NULL: no statfs
					   records (ro_compat STATFS) */
	struct fs_data *data;		/* fs_data.c */
	struct fs_ns *ns;		/* NS layer (fs_ns.h); core never
					   touches it */
	struct fs_cluster *cl;		/* dlm: cluster membership and the
					   fs glock (fs_cluster.h); NULL for
					   nolock. Owned: closed at unmount */
	int cl_held;			/* mount/unmount path: it holds the fs
					   glock in EX */
	struct fs_iopen *io;		/* dlm: the iopen worker (fs_iopen.c)
					   or NULL: its io_mu */
	uint64_t io_dead;		/* dlm: slots (bit s) node-down
					   recovery replayed before the
					   worker started: io_mu */
	int share_fd;			/* dlm on a path: fd holding a shared
					   flock on the device (a nolock
					   mount's BD_EXCL conflicts); -1 */
	struct fs_core_stats st;	/* updated with __atomic builtins */
};

#define FS_STAT_ADD(fs, field, n) \
	__atomic_fetch_add(&(fs)->st.field, (n), __ATOMIC_RELAXED)

/* Snapshot of the counters. */
void fs_core_stats_get(struct fs *fs, struct fs_core_stats *out);

/* ---- mount & mkfs (fs_super.c, fs_mkfs.c) ----------------------------- */

/*
 * Mount the storage layer on an open device (not owned: close it after
 * fs_core_unmount). Reads and verifies the superblock, claims a slot in
 * the slot map (nolock: slot 0 with FS_SLOT_NOLOCK, recovering every
 * slot's journal; the caller should hold BD_EXCL — fs_core_open does),
 * replays the journal, starts the commit thread. Returns a struct fs
 * ready for the NS layer (fs->ns == NULL).
 * Errors (with a one-line reason in @why if not NULL): -EINVAL not a
 * ucfs filesystem, -EUCLEAN bad superblock/slot map/journal header,
 * -EPROTONOSUPPORT newer version or unknown incompat feature, -EFBIG
 * device smaller than the filesystem (truncated), -EBUSY slot map claimed
 * by a nolock mount (for dlm) or no free slot, -EROFS ro mount needing
 * replay, -ENOMEM, -EIO. May block; call from one thread.
 */
int fs_core_mount(struct bd_dev *bd, const struct fs_core_opts *o,
		  struct fs **out, char *why, size_t whylen);

/* The same on a path: opens it (BD_EXCL for nolock; BD_RDONLY for ro) and
 * owns the device. While another process holds the device exclusively
 * (e.g. the daemon of a mount just unmounted, still writing back), it
 * retries every 50 ms for up to busy_wait_ms (default 10 s), then gives
 * -EBUSY "already mounted with lockproto=nolock ...". */
int fs_core_open(const char *path, const struct fs_core_opts *o,
		 struct fs **out, char *why, size_t whylen);

/*
 * Commit, checkpoint (everything written in place, journal clean), release
 * the slot, stop the thread, free everything (also on error, which is
 * returned: -EIO if something could not be written). The NS layer must
 * have detached (fs->ns freed and NULL, every buffer reference dropped,
 * no handle open) first. NULL is a no-op.
 * dlm: the caller holds the fs glock in EX (fs_cluster_lock); the slot
 * map is tidied (dead nodes' slots marked free), then the cluster
 * membership is closed (fs_cluster_close). A fenced node writes nothing
 * and leaves the cluster as if crashed.
 */
int fs_core_unmount(struct fs *fs);

/* Crash simulation for tests: stop the thread and free memory WITHOUT any
 * device I/O (what survives is what was already written). */
void fs_core_abandon(struct fs *fs);

#define FS_MKFS_DLM_RGRPS 8 /* auto rgroups per journal slot, dlm */

struct fs_mkfs_params {
	uint64_t total_blocks;	/* 0: the whole device */
	unsigned slots;		/* journals (default 1) */
	unsigned journal_mb;	/* per journal (default 32) */
	unsigned rgrp_mb;	/* rgroup size; 0 (default): 256, smaller
				 * for a small dlm device (fs_mkfs.c) */
	char lockproto[FS_LOCKPROTO_MAX];	/* "nolock" (default) | "dlm" */
	char locktable[FS_LOCKTABLE_MAX];	/* "" or "cluster:fsname" */
	char label[FS_LABEL_MAX];
	uint8_t uuid[16];	/* all zero: random */
	int64_t now;		/* 0: time(NULL) */
	int no_statfs;		/* mkfs.ucfs -O ^statfs: no statfs records
				 * (ro_compat STATFS), as images made
				 * before them */
};
void fs_mkfs_defaults(struct fs_mkfs_params *p);
/* Format @bd. Writes superblock + backup, slot map, heartbeat/slotinfo
 * blocks, journal headers, rgroup headers and bitmaps, the root inode;
 * flushes. -ENOSPC device too small (reason in @why), -EINVAL bad
 * parameter, -EIO. Does not check for existing signatures (the tool
 * does). */
int fs_mkfs(struct bd_dev *bd, const struct fs_mkfs_params *p, char *why,
	    size_t whylen);

/* ---- buffer cache (fs_cache.c) ---------------------------------------- */
/*
 * A struct fs_buf is one cached metadata block. The cache is bounded by
 * cache_mb: clean unreferenced buffers are evicted LRU; buffers that are
 * part of a transaction or wait for checkpoint are pinned (never evicted)
 * and a transaction start throttles (commit + checkpoint) when pinned
 * buffers use too much of the bound. File data never goes through the
 * cache (NS writes it with fs_data_write / fs_data_read, below).
 */
struct fs_buf {
	uint64_t blkno;		/* immutable */
	void *data;		/* FS_BLOCK_SIZE bytes, BD_ALIGN-aligned;
				   content protected by the owner's lock */
	/* the rest is private to fs_cache.c / fs_journal.c */
	struct fs *fs;
	unsigned flags;		/* FS_BUF_*: cache lock */
	unsigned ref;		/* cache lock */
	uint64_t tx_seq;	/* running tx it joined (0 none): journal lock */
	void *ckpt;		/* committed copy awaiting checkpoint: journal
				   lock + commit mutex */
	uint64_t ckpt_seq;	/* tx that produced ckpt */
	struct fs_buf *hnext;	/* hash chain: cache lock */
	struct fs_buf *lru_prev, *lru_next;	/* cache lock */
	struct fs_buf *tx_next;	/* running tx list: journal lock */
	struct fs_buf *ck_next;	/* checkpoint list: journal lock */
};

/*
 * Read block @blkno (from the cache or the device) and verify it is a
 * metadata block of @type (0: any type) with that block number and a good
 * crc. Returns a referenced buffer in *out (drop with fs_buf_put).
 * -EUCLEAN bad block (counted, never cached as valid), -EINVAL blkno past
 * the filesystem, -EIO, -ENOMEM. May block (I/O); any context.
 */
int fs_buf_read(struct fs *fs, uint64_t blkno, unsigned type,
		struct fs_buf **out);

/*
 * A new metadata block (just allocated by the caller in @tx): zeroed,
 * header filled in (magic, @type, blkno), joined to @tx (no read from the
 * device). -ENOMEM, -EIO. Call inside a handle.
 */
int fs_buf_new(struct fs_tx *tx, uint64_t blkno, unsigned type,
	       struct fs_buf **out);

/* Extra reference / drop one. fs_buf_put(NULL) is a no-op. */
void fs_buf_hold(struct fs_buf *b);
void fs_buf_put(struct fs_buf *b);

/*
 * Prefetch: start reading the blocks among @blknos (any order, duplicates
 * allowed) that are not cached, and return without waiting. Blocks close
 * together on the device are read by one larger I/O (runs merged across
 * gaps of at most a few blocks; the gap blocks are discarded). A demand
 * read (fs_buf_read) of a block in flight waits for that one I/O only.
 * Bounded: at most a quarter of the cache may hold prefetched blocks no
 * demand read has used yet, and prefetch never grows the cache past its
 * bound (it evicts only clean, unreferenced buffers, like any read; dirty
 * and pinned buffers are never touched). Blocks past the bound are
 * skipped (counted). Data is verified later by fs_buf_read. Returns the
 * number of blocks submitted (0..n); never fails (errors are counted and
 * the block is simply read again on demand). Any context; does not block
 * on I/O.
 */
unsigned fs_buf_prefetch(struct fs *fs, const uint64_t *blknos, unsigned n);

/* fs_buf_prefetch, then wait until those reads completed. Best effort:
 * 0, or -EIO if one of them failed (nothing is lost on error). */
int fs_buf_readahead(struct fs *fs, const uint64_t *blknos, unsigned n);

/* fs_buf_read without I/O and without waiting: -EAGAIN if @blkno is not
 * cached and uptodate (or a read of it is in flight). Otherwise as
 * fs_buf_read. */
int fs_buf_read_cached(struct fs *fs, uint64_t blkno, unsigned type,
		       struct fs_buf **out);

/* ---- transactions & journal (fs_journal.c) ---------------------------- */
/*
 * Redo journal of metadata, one per slot. Handles join the running
 * transaction; a commit (group commit: one commit covers every handle
 * ended before it) snapshots the transaction's buffers, writes descriptor
 * + images + checksummed commit record to the journal and flushes; the
 * images are written in place later (checkpoint) and then the journal
 * tail advances.
 *
 * File data and commits (see fs_data_write below):
 *  - data=ordered: after the snapshot, a commit waits for every data write
 *    issued so far (fs_data_wait), then flushes the device (if data was
 *    written since the last flush), then writes its descriptors, images
 *    and commit record. So data written before a handle that ended before
 *    the commit is durable once the commit is (fsync covers data too).
 *  - data=writeback: the commit record does not wait for data; the commit
 *    still waits for the data writes issued before it AFTER writing its
 *    record and before the blocks it freed become allocatable, so a freed
 *    data block is never reused (e.g. as metadata) under an in-flight
 *    write.
 *  - A data write error never aborts the journal; it is kept and returned
 *    (-EIO) by the next fs_journal_sync() / sync handle end, whichever
 *    commit consumed it (errors are not lost between a timer commit and a
 *    later fsync).
 */

/*
 * Start a handle. @credits: upper bound of distinct metadata blocks the
 * handle will dirty (fs_tx_write) — use the FS_*_CREDITS helpers. May
 * block: commits (and checkpoints) first when the running transaction,
 * the journal or the cache is too full. Never call with a handle held.
 * -EROFS (ro mount), -EIO (journal aborted after a write error),
 * -EINVAL (credits above fs_tx_max_credits), -ENOMEM.
 */
int fs_tx_begin(struct fs *fs, unsigned credits, struct fs_tx **out);

/* Largest credits one handle may ask for. */
unsigned fs_tx_max_credits(struct fs *fs);

/*
 * Get write access to @b: it joins the running transaction (idempotent).
 * Call before modifying b->data. The handle keeps no reference: the
 * caller still owns its own. 0 or -EIO (journal aborted). On a block
 * already freed with fs_free/fs_free_inode it does nothing (changes to a
 * dead block are discarded, never journaled).
 */
int fs_tx_write(struct fs_tx *tx, struct fs_buf *b);

/* Make fs_tx_end() commit and wait until durable (O_SYNC, dirsync). */
void fs_tx_set_sync(struct fs_tx *tx);
/* The transaction publishes data written under it (an unwritten
 * extent converted by a write): commit it as data=ordered even with
 * data=writeback, so a crash never shows the blocks' stale contents. */
void fs_tx_set_ordered(struct fs_tx *tx);

/* Sequence of the transaction the handle belongs to. */
uint64_t fs_tx_seq(const struct fs_tx *tx);
struct fs *fs_tx_fs(const struct fs_tx *tx);

/* End the handle (frees it). Returns 0, or the commit error of a sync
 * handle / -EIO if the journal aborted. */
int fs_tx_end(struct fs_tx *tx);

/*
 * fsync/syncfs: commit the running transaction (if any) and wait until
 * it is durable; with nothing to commit, flush the device if file data
 * was written since the last flush. Group commit: concurrent callers
 * share commits. Never call with a handle held. 0 or -EIO.
 */
int fs_journal_sync(struct fs *fs);
/*
 * fsync of one inode: commit only if a transaction not yet durable holds
 * a block of inode @ino (its inode block, B+tree, xattr block: owner
 * (FS_OWNER_INODE, @ino)), then as fs_journal_sync (file data issued so
 * far durable, the kept data write error). Other inodes' changes in the
 * running transaction do not make it commit (they go with it when it
 * must). Never call with a handle held. 0 or -EIO.
 */
int fs_journal_sync_ino(struct fs *fs, uint64_t ino);

/* Note that file data was written to the device behind fs_data's back
 * (data=ordered: the next commit flushes before its commit record).
 * fs_data_write() calls it itself. Cheap; any context. */
void fs_journal_data_written(struct fs *fs);

/* Commit and checkpoint: every committed block written in place, the
 * journal empty (unmount, lock demote). Never call with a handle held. */
int fs_journal_checkpoint(struct fs *fs, enum fs_commit_reason why);

/* Cluster demote: fs_journal_checkpoint (commit + every block in place,
 * journal empty), then every file data write issued so far completed
 * and the device flushed. A data write error is kept for the next fsync,
 * not returned. 0 or -EIO (journal). Never call with a handle held. */
int fs_journal_writeback(struct fs *fs);

/* Fencing: abort the journal at once; no commit or checkpoint writes
 * anything after this returns (handles get -EIO). Any thread. */
void fs_journal_abort(struct fs *fs);

/* Ask the commit thread to commit soon (no wait). */
void fs_journal_kick(struct fs *fs);

/*
 * Checkpoint records (FORMAT.md "Journal"): a record's durability rests
 * on the flush of whichever node writes a block of it home next, so a
 * dlm mount writes them only while the cluster agrees that every writer's
 * flush covers every writer's writes (fusefs/cluster/fs_jrec.c); a
 * nolock mount from the start. @on 1: allowed from now on (still only
 * with the JCKPT feature and a device whose flush covers all); 0: no
 * record from now on, then the device flushed, so that every record
 * written before is durable when this returns. 0, or -EIO (the flush
 * failed: records written before may be lost; the caller must not let
 * another writer rely on them). Any thread but the commit thread, no
 * handle held; may block (a commit in progress, the flush).
 */
int fs_journal_set_records(struct fs *fs, int on);

/* ---- file data write-behind (fs_data.c) ------------------------------- */
/*
 * File data goes to the device through these two calls, shaped like
 * bd_write/bd_read (byte offsets and lengths multiples of BD_ALIGN; @buf
 * needs no alignment). Any thread, with or without inode locks or a
 * transaction handle held: they may block for I/O but never for a commit.
 *
 * fs_data_write copies @buf (into the open run, or a new run: see
 * fs_data_flush below) and returns 0; the device write is asynchronous
 * (-EINVAL misaligned / past the device, -EROFS, -ENOMEM; a device error
 * is reported later by fs_data_wait / fsync). A write
 * overlapping older in-flight writes is issued only after they complete,
 * so writes to one block land in call order (also across a free and
 * reallocation of the block). Copies in flight are bounded by a share of
 * cache_mb (fs_data_limit); the writer waits while the bound is full.
 * The caller may map the blocks (extent insert, size update) in the same
 * handle right after the call: data=ordered makes the commit wait for
 * the write (above).
 *
 * fs_data_read is coherent with unwritten data: it returns the newest
 * data (from the open run or an in-flight copy, or from the device after
 * the overlapping writes completed). 0 or -errno of bd_read.
 */
int fs_data_write(struct fs *fs, const void *buf, size_t len, uint64_t off);
int fs_data_read(struct fs *fs, void *buf, size_t len, uint64_t off);
/* fs_data_read of a partial block about to be rewritten (counts
 * data_rmw_dev when the device has to be read). */
int fs_data_read_rmw(struct fs *fs, void *buf, size_t len, uint64_t off);

/* Writes are combined: the newest run stays open (unsubmitted) and
 * absorbs writes inside it or contiguous after it, up to
 * fs_data_run_max bytes. It is submitted when full or not fitting the
 * next write, when a read needs more than it has, by fs_data_wait (every
 * commit, fsync, unmount) and by fs_data_flush: a write that no commit
 * follows (no transaction on the inode) must call fs_data_flush. */
void fs_data_flush(struct fs *fs);
size_t fs_data_run_max(struct fs *fs);

/* Wait for every data write issued so far; return the first write error
 * since the previous fs_data_wait (then cleared), else 0. Does not flush
 * the device (fs_journal_sync does). Any thread. */
int fs_data_wait(struct fs *fs);

/* Runs not complete (open, waiting, in flight) and the buffer bytes they
 * hold now; the bytes bound. For tests/stats. */
void fs_data_inflight(struct fs *fs, uint64_t *writes, uint64_t *bytes);
uint64_t fs_data_limit(struct fs *fs);

/* ---- allocator (fs_alloc.c) ------------------------------------------- */
/*
 * Resource groups with bitmaps. Blocks freed in a transaction are not
 * handed out again until that transaction has committed. Counts are kept
 * in the rgroup headers (journaled) and mirrored in memory for statfs.
 * Reservations (data streams of large files, inode chunks) are free runs
 * kept in memory for one owner; the bitmap never sees them (fs_alloc.c).
 */

/*
 * Allocate one contiguous run of at least @min and at most @max blocks,
 * as close after @goal as possible (0: anywhere). *start, *len = the run.
 * -ENOSPC: no run of @min blocks free (nothing changed; if blocks are
 * pending free, fs_journal_sync() and a retry may succeed: see
 * fs_alloc_pending()), -EUCLEAN bad bitmap/rgroup block, -EIO. Inside a
 * handle with FS_ALLOC_CREDITS(fs) credits per call.
 */
int fs_alloc(struct fs_tx *tx, uint64_t goal, uint32_t min, uint32_t max,
	     uint64_t *start, uint32_t *len);

/*
 * fs_alloc for the data of file @owner (its inode number, not 0), which
 * has @fblocks blocks now. A file past 256 KiB gets a reservation: a
 * free run near @goal sized like the file (1 to 128 MiB), kept in memory
 * for it; its next calls take their blocks from the front of that run
 * (when @goal is in the run's rgroup: pass the end of the file's
 * previous extent), so files written at once do not interleave. Other
 * allocations avoid reserved runs unless nothing else is free (then they
 * take them): reservations never cause -ENOSPC. Errors, credits and
 * context as fs_alloc; -EINVAL for owner 0.
 */
int fs_alloc_data(struct fs_tx *tx, uint64_t owner, uint64_t fblocks,
		  uint64_t goal, uint32_t min, uint32_t max, uint64_t *start,
		  uint32_t *len);

/* Forget @owner's reservations (last close, truncate, destroy). Any
 * thread; no handle needed. */
void fs_alloc_resv_drop(struct fs *fs, uint64_t owner);

/*
 * Free [start, start + len) (must lie in one rgroup and be allocated:
 * else -EUCLEAN and nothing changes). Blocks cached as metadata are
 * revoked from the journal and dropped from the cache (the caller must
 * not hold references to them past this call). Inside a handle with
 * FS_ALLOC_CREDITS(fs) credits per call.
 */
int fs_free(struct fs_tx *tx, uint64_t start, uint32_t len);

/* An inode block near @goal (the parent directory) with a fresh
 * generation, taken from the inode chunk of the goal's rgroup (a run
 * reserved in memory for inode blocks, so the inodes of a directory sit
 * together); counts it in the rgroup's dinodes. The caller then creates
 * it with fs_buf_new(). */
int fs_alloc_inode(struct fs_tx *tx, uint64_t goal, uint64_t *ino,
		   uint64_t *generation);
/* Free inode block @ino (after its tree/data/xattr blocks were freed). */
int fs_free_inode(struct fs_tx *tx, uint64_t ino);

/* Blocks one fs_alloc/fs_free/fs_alloc_inode call may dirty. */
unsigned fs_alloc_credits(struct fs *fs);
#define FS_ALLOC_CREDITS(fs) fs_alloc_credits(fs)

struct fs_space {
	uint64_t total_blocks;	/* whole filesystem */
	uint64_t data_blocks;	/* blocks in rgroups (minus headers/bitmaps) */
	uint64_t free_blocks;	/* free now (incl. pending frees) */
	uint64_t inodes;	/* inodes allocated */
};
void fs_space_get(struct fs *fs, struct fs_space *out);
/* The same, exact on a dlm mount too (GFS2's statfs_slow; statfs with
 * statfs_quantum=0 or a damaged statfs record): each group's
 * glock taken in PR (waited for: no lock or handle held) while its
 * counts are read, so that other nodes write back and this node reloads
 * what changed. 0 or -EIO (fenced). */
int fs_space_count(struct fs *fs, struct fs_space *out);
/* statfs(2)'s counts (fs_statfs.c): nolock (or no statfs records) as
 * fs_space_get; dlm: free blocks and inodes from the statfs master
 * (under its glock in PR: may wait; no handle held) plus this slot's
 * change, so other nodes' allocations show within their statfs
 * quantum. A record that cannot be read (a damaged master) is not an
 * error: the groups are counted instead (fs_space_count; stats
 * alloc.statfs_slow_reads, logged once) until fsck.ucfs -y repairs it;
 * so is a damaged change record of ours (fs_statfs_change then leaves
 * it alone: alloc.statfs_untracked).
 * 0 or -EIO (fenced). */
int fs_statfs_space(struct fs *fs, struct fs_space *out);
/* Blocks freed by uncommitted transactions (not allocatable yet). */
uint64_t fs_alloc_pending(struct fs *fs);

/*
 * Cluster (dlm) mounts: each rgroup has a glock (FS_LK_RGRP/g). A node
 * owns the rgroups whose glock it holds in EX (kept between requests,
 * given up when another node asks); allocations inside a handle take
 * only from owned groups, or from groups fs_glock_try gets without
 * waiting. Frees into a group another node owns go to this slot's free
 * log (slotinfo, FORMAT.md), applied later under the group's glock. A
 * nolock mount owns every group.
 */
/* Before an operation that may write, holding no lock: make sure this
 * node owns a group with some free space (waiting for its glock if
 * not). 0, -ENOSPC (none seems to have space), -EIO fenced. */
int fs_alloc_reserve(struct fs *fs);
/* After -ENOSPC, no handle held: did this thread's last allocation find
 * space only in groups other nodes hold? Then one of them is taken here
 * (waiting) and 1 returned: retry. Did it find none at all? Then this
 * node's counts of the groups it does not own may be stale (others
 * freed there since it last held them): unless frees are pending in
 * the journal (the caller commits those first), all of those are
 * taken, waiting, and 1 returned if one has room (retry); at most one
 * such sweep a second per mount (stats alloc.swept). 0: no retry. */
int fs_alloc_starved(struct fs *fs);
/* Glock inval of rgroup @g (another node changed it): its cached blocks
 * dropped, its counts re-read, its reservations forgotten. 0 or -errno. */
int fs_alloc_rgrp_inval(struct fs *fs, uint32_t g);
/* For the free log (fs_flog.c): the group of block @blk (UINT32_MAX:
 * none); hold group @g's glock in EX, waiting (no handle held: 0, -EIO
 * fenced) and release it; free [start, start + len) in @tx, a group
 * held (every bit must be set: -EUCLEAN and nothing changes). */
uint32_t fs_alloc_group_of(struct fs *fs, uint64_t blk);
int fs_alloc_group_hold(struct fs *fs, uint32_t g);
void fs_alloc_group_release(struct fs *fs, uint32_t g);
int fs_alloc_free_held(struct fs_tx *tx, uint64_t start, uint32_t len,
		       int inode);

/* ---- free log (fs_flog.c; dlm, FORMAT.md "Free log") ------------------ */

/* Set up (this slot's log read into memory, long due) and tear down;
 * from fs_alloc_init and fs_alloc_destroy. */
int fs_flog_init(struct fs *fs);
void fs_flog_destroy(struct fs *fs);
/* The free log's worker (rw dlm mounts; fs_flog.c): applies our log
 * once due also on an idle node. Started when the mount is complete,
 * stopped before the unmount applies the rest (no-ops otherwise).
 * 0 or -errno. */
int fs_flog_start(struct fs *fs);
void fs_flog_stop(struct fs *fs);
/* Log the free of [start, start + len) in @tx (another node owns its
 * group; the caller revokes and counts it). 0 or -errno. */
int fs_flog_add(struct fs_tx *tx, uint64_t start, uint32_t len, int inode);
/* Apply the free log: every entry (@all), else until it is at most a
 * quarter full. Takes the groups' glocks, waiting; no handle or lock may
 * be held. 0 or -errno. */
int fs_alloc_flog_apply(struct fs *fs, int all);
/* End of a writing operation (no lock held): apply the free log if it
 * is due (half full, or its oldest entry is a second old). */
void fs_alloc_flog_kick(struct fs *fs);
/* Between the transactions of a long free (no handle held; inode locks
 * may be): apply the free log if fewer than FLOG_ROOM entries are left,
 * so that no transaction finds it full. Waits for group glocks. 0 or
 * -errno. */
int fs_alloc_flog_room(struct fs *fs);
/* Apply dead slot @s's whole log (its journal replayed, its slot lock
 * held by the caller, no handle; the recovery worker, fs_iopen.c),
 * group by group under their glocks, each group in one transaction
 * that frees the blocks and removes the entries from its slotinfo. The
 * caller writes the journal back before it lets the slot lock go. A
 * failed pass is tried again, FS_FLOG_DEAD_TRIES passes in all with a
 * doubling pause (25 ms first; stats flog_dead_retries), unless the log
 * is damaged or the node fenced. 0 or -errno (what is left stays in the
 * log: stats flog_dead_errors). */
#define FS_FLOG_DEAD_TRIES 5u
int fs_flog_dead_apply(struct fs *fs, unsigned s);
/* Entries in the free log now (stats, tests). */
unsigned fs_alloc_flog_len(struct fs *fs);
/* dlm recovery (fs_iopen.c): dead slot @slot's statfs change (its
 * journal replayed, its slot lock held) folded into the master, under
 * the statfs glock in EX (waited for). No handle held. The caller
 * writes the journal back before it lets the slot lock go. 0 or
 * -errno (the change stays: consistent, for the slot's next recovery
 * or mount). */
int fs_statfs_fold_slot(struct fs *fs, unsigned slot);

/* dlm node-down recovery (fs_super.c), from the lock manager's callback
 * while it grants no other lock: replay the journal of every slot the
 * slot map shows mounted by @node once its disk beat stopped (device
 * I/O only; the slot stays mounted in the map until the next mount or
 * unmount frees it under the fs lock). 0 or -errno. */
int fs_core_recover_node(struct fs *fs, uint32_t node);
/* dlm: in *@slots (bit s), the slots free in the slot map (replayed:
 * their node unmounted or was recovered) whose slotinfo still holds
 * orphans or free log entries, or whose statfs change is not zero (a
 * crash, or a clean unmount while
 * another node used one of its orphans), for the recovery worker to
 * take over under their slot locks. Device reads only. 0 or -errno. */
int fs_core_slots_leftover(struct fs *fs, uint64_t *slots);
/* Forget the cached copy of slot @slot's slotinfo block (a dead node's,
 * after fs_iopen.c adopted its orphans and fs_flog.c applied its free
 * log: read from the disk the next time). Clean (the
 * journal written back) or never written by this node. */
void fs_core_slotinfo_forget(struct fs *fs, unsigned slot);
/* A ro cluster node: 1 (slot in *@slot) if a slot left mounted by a
 * node that is not in @members (bit n: node n) or is @dead needs its
 * journal replayed (read only: it holds committed transactions not
 * written home yet; an empty journal needs none) and no member with a
 * mounted slot (a read-write node, which replays it) is left to do it;
 * 0 if not; -errno. */
int fs_core_ro_unrecovered(struct fs *fs, uint64_t members, uint32_t dead,
			   unsigned *slot);

/* ---- B+tree (fs_btree.c) ---------------------------------------------- */
/*
 * A B+tree of u64 keys -> values of 0..FS_BTREE_VAL_MAX bytes, whose root
 * node lives in a caller's buffer (an inode's inline area) and whose
 * other nodes are FS_BT_BTREE blocks allocated near the owner. Keys are
 * unique. Readers need the owner's lock shared, writers exclusive; all
 * modifications go through @tx. A struct fs_btree is a cheap descriptor
 * the caller fills with fs_btree_init() each time (no allocation).
 */
struct fs_btree {
	struct fs *fs;
	struct fs_buf *root_buf;	/* holds the root (caller's ref) */
	uint32_t root_off;		/* root node offset in root_buf */
	uint32_t root_size;		/* root node size in bytes */
	uint64_t owner;			/* inode number stamped in nodes */
};

void fs_btree_init(struct fs_btree *bt, struct fs *fs, struct fs_buf *buf,
		   uint32_t off, uint32_t size, uint64_t owner);

/* Format an empty root (level 0, no keys). Joins root_buf to @tx. */
int fs_btree_create(struct fs_tx *tx, struct fs_btree *bt);

/* Exact lookup. Copies min(len, cap) bytes into @val (may be NULL) and
 * sets *vlen (may be NULL) to the value's length. -ENOENT, -EUCLEAN,
 * -EIO. */
int fs_btree_lookup(struct fs_btree *bt, uint64_t key, void *val,
		    size_t cap, size_t *vlen);

/* The entry with the largest key <= @key (extent lookup) / the smallest
 * key >= @key (iteration). *found = its key. -ENOENT if none. */
int fs_btree_lookup_le(struct fs_btree *bt, uint64_t key, uint64_t *found,
		       void *val, size_t cap, size_t *vlen);
int fs_btree_next(struct fs_btree *bt, uint64_t key, uint64_t *found,
		  void *val, size_t cap, size_t *vlen);

/* Call @cb for each entry with key >= @start in key order until it
 * returns non-zero (returned; 0 at the end). @cb must not modify the
 * tree; @val points into a node and is NOT aligned (memcpy it). Errors:
 * -EUCLEAN, -EIO. */
typedef int (*fs_btree_cb)(void *arg, uint64_t key, const void *val,
			   size_t len);
int fs_btree_iterate(struct fs_btree *bt, uint64_t start, fs_btree_cb cb,
		     void *arg);

/* Insert a new key (-EEXIST if present; -E2BIG value too long;
 * -ENOSPC no block for a split: tree unchanged). */
int fs_btree_insert(struct fs_tx *tx, struct fs_btree *bt, uint64_t key,
		    const void *val, size_t len);
/* Replace the value of an existing key (-ENOENT; -E2BIG; -ENOSPC). */
int fs_btree_update(struct fs_tx *tx, struct fs_btree *bt, uint64_t key,
		    const void *val, size_t len);
/* Remove a key (-ENOENT). Empty non-root nodes are freed. */
int fs_btree_delete(struct fs_tx *tx, struct fs_btree *bt, uint64_t key);

/* Free every node except the root and reset the root to empty, in ONE
 * handle: only for trees whose node count fits the handle's credits (an
 * emptied extent tree). Large trees: fs_btree_destroy_step. */
int fs_btree_destroy(struct fs_tx *tx, struct fs_btree *bt);

/*
 * Restartable destroy of a tree of any size, in bounded transactions.
 * Each call drops entries in key order from the first leaf on — calling
 * @drop (may be NULL) for each, so the caller releases what the value
 * refers to (extent: fs_free its blocks and lower the inode's block
 * count) in the same handle, with at most @drop_credits credits per
 * entry — frees the leaves and inner nodes that become empty and removes
 * their pointers, until about @credits credits are used. Returns 1 when
 * the tree is empty (root reset to an empty leaf), 0 when entries remain
 * (end the handle and call again in a new one), -EINVAL if @credits is
 * too small to make progress, or -errno (-EUCLEAN, -EIO, or @drop's).
 * Between calls the tree is a valid, smaller tree (the dropped entries are
 * gone), so each handle can commit on its own.
 *
 * Use (NS), holding the owner's inode lock exclusive throughout:
 *	do {
 *		cr = fs_btree_destroy_credits(&bt, dc);
 *		fs_tx_begin(fs, cr + own, &tx); fs_tx_write(tx, ib);
 *		ret = fs_btree_destroy_step(tx, &bt, cr, drop, dc, arg);
 *		fs_tx_end(tx);
 *	} while (ret == 0);
 * Crash safety is the caller's: before the first step the inode must be
 * unreachable and on the slot's orphan list (nlink 0, committed in the
 * same or an earlier transaction), and the inode block freed only in the
 * last transaction, after the tree is empty. A crash between steps leaves
 * a consistent, partly destroyed tree on an orphan; mount's orphan
 * reclaim destroys it again from where it stopped (so @drop must only
 * act on the entries it is given: those are removed in the same handle).
 */
typedef int (*fs_btree_drop_fn)(void *arg, struct fs_tx *tx, uint64_t key,
				const void *val, size_t len);
int fs_btree_destroy_step(struct fs_tx *tx, struct fs_btree *bt,
			  unsigned credits, fs_btree_drop_fn drop,
			  unsigned drop_credits, void *arg);
/* Credits to give one step: half a handle's maximum, or the minimum that
 * makes progress on this tree if larger. */
unsigned fs_btree_destroy_credits(struct fs_btree *bt,
				  unsigned drop_credits);

/* Credits for one insert/update/delete on @bt (depth-based bound). */
unsigned fs_btree_credits(struct fs_btree *bt);

/* Depth (1 = root only) and entry count, for tests/fsck; -errno. */
int fs_btree_stat(struct fs_btree *bt, unsigned *depth, uint64_t *entries,
		  uint64_t *nodes);

#endif /* UCFS_FS_INTERNAL_H */
