/*
 * fs_core_priv.h — glue between the storage layer's own files (cache,
 * journal, allocator, super). Not for the namespace layer: it uses
 * fs_internal.h only.
 */
#ifndef UCFS_FS_CORE_PRIV_H
#define UCFS_FS_CORE_PRIV_H

#include "fusefs/core/fs_internal.h"

/* fs_buf.flags (cache lock) */
enum {
	FS_BUF_UPTODATE = 1 << 0,	/* data holds the block */
	FS_BUF_READING = 1 << 1,	/* a thread is reading it */
	FS_BUF_VERIFIED = 1 << 2,	/* header/crc checked */
	FS_BUF_HASHED = 1 << 3,		/* in the hash table */
	FS_BUF_ON_CKPT = 1 << 4,	/* on the journal's checkpoint list */
	FS_BUF_REVOKED = 1 << 5,	/* freed: ckpt must not be written */
	FS_BUF_PREFETCHED = 1 << 6,	/* read ahead, no demand read yet */
};

/*
 * What a cached metadata block belongs to: the cluster lock that covers
 * it (FORMAT.md "Cluster locks"), derived from the block's own content
 * (fs_owner_of), so no caller passes it:
 *   INODE, REFCOUNT  -> (FS_OWNER_INODE, its block number)
 *   BTREE, XATTR     -> (FS_OWNER_INODE, the block's owner field; a
 *                       refcount tree's nodes name its REFCOUNT root)
 *   RGRP, BITMAP     -> (FS_OWNER_RGRP, group index from the block number)
 *   STATFS master    -> (FS_OWNER_STATFS, 0)
 *   anything else    -> (FS_OWNER_NONE, 0): never dropped by owner.
 * The type numbers are the lock types (lk_name.type) of those locks.
 */
enum {
	FS_OWNER_NONE = 0,
	FS_OWNER_INODE = 3,  /* = FS_LK_INODE */
	FS_OWNER_RGRP = 4,   /* = FS_LK_RGRP */
	FS_OWNER_STATFS = 8, /* = FS_LK_STATFS */
};
struct fs_owner {
	uint16_t type; /* FS_OWNER_* */
	uint64_t num;  /* inode/refcount root block, or group */
};

static inline int fs_owner_eq(struct fs_owner a, struct fs_owner b)
{
	return a.type == b.type && a.num == b.num;
}

/* The owner of metadata block @blkno holding @data (FS_OWNER_NONE for a
 * block that does not carry its header, or a BTREE/XATTR block whose
 * owner field is still 0). Pure; any context. */
struct fs_owner fs_owner_of(const struct fs *fs, uint64_t blkno,
			    const void *data);

/* ---- fs_cache.c ---- */
int fs_cache_init(struct fs *fs, unsigned cache_mb);
void fs_cache_destroy(struct fs *fs);
/* Referenced buffer for @blkno if cached (no I/O), else NULL. */
struct fs_buf *fs_cache_lookup(struct fs *fs, uint64_t blkno);
/* Referenced buffer for @blkno, created (not uptodate) if absent. */
int fs_cache_get(struct fs *fs, uint64_t blkno, struct fs_buf **out);
/* Cluster: forget every cached block (another node may have changed
 * them). Waits for prefetches in flight; a referenced buffer is unhashed
 * (its holder keeps its copy; the next read gets a fresh one). Pinned or
 * reading buffers are kept and counted in *busy (may be NULL): the
 * caller must have written everything back first. Returns the number
 * dropped. Any thread; no other cache user may expect its blocks to stay
 * cached. */
unsigned fs_cache_drop_all(struct fs *fs, unsigned *busy);
/* Cluster: forget every cached block of @o (its glock goes to NL: another
 * node may change them), as fs_cache_drop_all does for all; a prefetch
 * in flight that turns out to be @o's is not cached (fs_cache.c "Drops
 * racing prefetches": no wait, unless the last FS_CACHE_RA_DROPS drops
 * all came while one old prefetch was still in flight); a referenced
 * buffer is unhashed; dirty (pinned) or reading buffers are kept and
 * counted in *busy (may be NULL): the caller synced @o first
 * (fs_journal_sync_owner). Returns the number dropped. Costs O(buffers
 * of @o), not O(cache). Any thread, no cache or journal lock held. */
unsigned fs_cache_drop_owner(struct fs *fs, struct fs_owner o, unsigned *busy);
/* Drops remembered for the prefetches in flight (fs_cache_drop_owner). */
#define FS_CACHE_RA_DROPS 256u
/* The owner the cache recorded for @b: FS_OWNER_NONE until known; a new
 * BTREE/XATTR block (fs_buf_new) is FS_OWNER_PENDING until the journal
 * reads its owner field (fs_cache_set_owner). Takes the cache lock. */
#define FS_OWNER_PENDING 0xffffu
struct fs_owner fs_cache_owner(struct fs_buf *b);
void fs_cache_set_owner(struct fs_buf *b, struct fs_owner o);
/* Tests: cached buffers whose recorded owner is @o (walks the owner's
 * chain only). */
unsigned fs_cache_owner_count(struct fs *fs, struct fs_owner o);
/* Cluster: re-read every rgroup header (free, dinodes), forget
 * reservations, inode chunks, pending frees and search hints. No handle
 * may be open. 0 or -errno (-EUCLEAN bad header). */
int fs_alloc_reload(struct fs *fs);
/* ---- fs_statfs.c (statfs records: FORMAT.md "Statfs records") ---- */
#define FS_STATFS_QUANTUM_S 30u /* statfs_quantum= default (GFS2's) */
/* At mount, after fs_alloc_init (dlm: the statfs glock); nothing
 * without ro_compat STATFS. 0 or -ENOMEM. */
int fs_statfs_init(struct fs *fs, unsigned quantum_s);
void fs_statfs_destroy(struct fs *fs);
/* The fold worker (rw mounts): a fold every quantum. */
int fs_statfs_start(struct fs *fs);
void fs_statfs_stop(struct fs *fs);
/* Credits a handle that allocates or frees adds for our change record. */
unsigned fs_statfs_credits(const struct fs *fs);
/* Inside @tx (fs_alloc.c, the group's rg->lock held): the group headers
 * gained @dfree free blocks and @dinodes inodes (either negative). Past
 * statfs_percent= of the master, wakes the worker for an early fold. An
 * unreadable change record is left alone from then on (0: the change
 * goes on untracked; fsck -y repairs). 0 or -errno (-EIO). */
int fs_statfs_change(struct fs_tx *tx, int64_t dfree, int64_t dinodes);
/* Our change into the master (dlm: the statfs glock in EX, waited
 * for). No handle held. 0 or -errno (-EUCLEAN: our change record is
 * unreadable). */
int fs_statfs_fold(struct fs *fs);
/* 1 if slot @slot's change record on disk is not zero (another slot's:
 * read from the disk, as fs_statfs_forget). */
int fs_statfs_slot_pending(struct fs *fs, unsigned slot);
/* Forget the cached copy of another slot's change record (a dead one's:
 * read from the disk the next time). Clean (the journal written back
 * since this node last folded it) or never written by this node, as
 * fs_core_slotinfo_forget. */
void fs_statfs_forget(struct fs *fs, unsigned slot);

/* Pin (not evictable) / unpin: the journal's tx and checkpoint states. */
void fs_cache_pin(struct fs_buf *b);
void fs_cache_unpin(struct fs_buf *b);
/* Remove from the hash (freed block); memory goes with the last ref. */
void fs_cache_unhash(struct fs_buf *b);
void fs_cache_set_flags(struct fs_buf *b, unsigned set, unsigned clear);
unsigned fs_cache_flags(struct fs_buf *b);
/* A page for a cached block's extra copy (the journal's committed copy),
 * counted against the bound until fs_cache_page_put(); NULL if out of
 * memory. The page comes from the cache's own pool, not malloc. */
void *fs_cache_page_get(struct fs *fs);
void fs_cache_page_put(struct fs *fs, void *page);
/* Buffers allowed / pinned now incl. extra pages (throttling). */
uint64_t fs_cache_capacity(struct fs *fs);
uint64_t fs_cache_pinned(struct fs *fs);

/* ---- fs_journal.c ---- */
/* Replay the journal of @slot (bd I/O only, before the cache is used).
 * ro: do not write; -EROFS if a transaction would be replayed.
 * *replayed = transactions applied. */
int fs_journal_replay(struct fs *fs, unsigned slot, int ro,
		      unsigned *replayed, char *why, size_t whylen);
int fs_journal_init(struct fs *fs);
/* Stop the thread; with @clean, checkpoint and mark the header clean. */
int fs_journal_shutdown(struct fs *fs, int clean);
/* Record that @blkno was freed in @tx (revoke if it is cached). */
void fs_journal_revoke(struct fs_tx *tx, uint64_t blkno);
/*
 * Per-owner write-back (cluster glocks). The journal remembers, for each
 * owner with a block in a transaction since the last checkpoint, the
 * newest such transaction (a table bounded by the owners touched since
 * the last checkpoint: each checkpoint forgets the rest).
 *
 * fs_journal_owner_dirty: 1 if a block of @o joined a transaction that
 * is not yet checkpointed (running, or committed and not written home),
 * else 0. Takes j->lock.
 *
 * fs_journal_sync_owner: make everything of @o durable in place and
 * replay-safe before its glock leaves this node: 0 at once (no journal
 * I/O) when @o is clean; else commit + checkpoint of the whole journal
 * (after it no journal block of ours carries an image of @o: V2-PLAN
 * "why a full checkpoint") and the device flushed. For an INODE owner
 * also the file's data, written and flushed: data runs carry no inode,
 * so every data write in flight is waited for (none in flight and none
 * unflushed: no wait, no flush). A data write error stays for the next
 * fsync. 0, -EIO (journal aborted or flush failed). No handle held by
 * the caller; may block (I/O).
 */
int fs_journal_owner_dirty(struct fs *fs, struct fs_owner o);
/* Change tracking for a cluster lock (fs_glock_ops.stamp/changed): a
 * stamp of the journal now (the running transaction's sequence); and
 * whether a block of @o may have joined a transaction since @stamp: 1
 * if it did, or if that cannot be told any more (a checkpoint since
 * then forgot the owners it wrote, the owner table lacked memory, a new
 * block's owner is not known yet, the journal aborted), else 0. */
uint64_t fs_journal_stamp(struct fs *fs);
int fs_journal_owner_since(struct fs *fs, struct fs_owner o, uint64_t stamp);
int fs_journal_sync_owner(struct fs *fs, struct fs_owner o);
/* What one fs_journal_sync_owner_done wrote (the demote trace event's
 * figures, fusefs/STATS.md): blocks committed to the log and written
 * home by its commit and checkpoint (both run under the commit mutex, so
 * these are its own), data bytes in flight it waited for, device
 * flushes it issued. */
struct fs_sync_done {
	uint64_t log_blocks, home_blocks, data_bytes;
	uint32_t flushes;
};
/* fs_journal_sync_owner that also fills @done (zeroed first). */
int fs_journal_sync_owner_done(struct fs *fs, struct fs_owner o,
			       struct fs_sync_done *done);
/* Tests: owners in the table (bounded: see above). */
size_t fs_journal_owner_count(struct fs *fs);

/* ---- fs_data.c ---- */
/* Bytes of cache_mb given to in-flight data copies (the cache gets the
 * rest). */
uint64_t fs_data_share(unsigned cache_mb);
int fs_data_init(struct fs *fs, unsigned cache_mb);
/* Waits for every in-flight write, then frees. NULL fs->data: no-op. */
void fs_data_destroy(struct fs *fs);
/* Tests: @hold 1 keeps new writes queued (in flight, not submitted);
 * 0 submits those that wait for nothing else. */
void fs_data_hold(struct fs *fs, int hold);

/* ---- fs_alloc.c ---- */
int fs_alloc_init(struct fs *fs);
void fs_alloc_destroy(struct fs *fs);
/* Transactions up to @seq are durable: their frees become allocatable. */
void fs_alloc_committed(struct fs *fs, uint64_t seq);

/* ---- fs_super.c (cluster) ---- */
/* For every other slot whose lock this node can take (its owner is
 * gone: fs_cluster_slot_try): replay its journal if the slot map says
 * mounted, and with @mark_free (fs glock held in EX) mark it free. Bd
 * I/O only. 0 or -errno. */
int fs_core_recover_slots(struct fs *fs, int mark_free);

/* ---- helpers ---- */
static inline int fs_why(char *why, size_t whylen, int err, const char *msg)
{
	if (why != NULL && whylen > 0) {
		size_t n = 0;

		while (msg[n] != '\0' && n + 1 < whylen) {
			why[n] = msg[n];
			n++;
		}
		why[n] = '\0';
	}
	return err;
}

#endif /* UCFS_FS_CORE_PRIV_H */
