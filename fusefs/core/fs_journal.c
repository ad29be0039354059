/*
 * fs_journal.c — transactions, group commit, checkpoint and replay of the
 * per-slot redo journal (format: FORMAT.md "Journal").
 *
 * States of a metadata buffer, as seen from here:
 *   clean -> (fs_tx_write) in the running tx [tx pin]
 *   -> (commit snapshot) committed copy b->ckpt awaiting checkpoint
 *      [ckpt pin, on the checkpoint list with a reference]
 *   -> (checkpoint: ckpt written in place, flushed, then the header's
 *      tail advanced or a checkpoint record appended) clean.
 * A buffer may be in the running tx and hold an older committed copy at
 * the same time; the checkpoint writes the copy, never the live data, so
 * nothing uncommitted reaches its home location (write-ahead rule).
 *
 * Commit (under commit_mutex): block new handles, wait for open ones to
 * end, snapshot every buffer of the transaction into its ckpt copy (sealed
 * with the tx sequence and a fresh crc), unblock; then (data=ordered:
 * wait for the file data writes issued so far (fs_data.c) and, if data
 * was written, flush) write descriptors + images + commit record in one
 * batch and flush (data=writeback waits for the data writes only after
 * that, before the transaction's frees become allocatable, unless a
 * handle of the transaction called fs_tx_set_ordered: then it commits as
 * data=ordered). The commit
 * record's crc covers the whole transaction.
 * If the log lacks room, a checkpoint runs first (while handles are still
 * blocked, before the snapshot, so only committed copies are written).
 *
 * Checkpoint marks (ckpt_mark): after the home writes and their flush, a
 * replay must no longer write what the log holds, since another node may
 * change those blocks next. The header's tail moves to the head (FUA
 * write), or, for a lock leaving this node, a checkpoint record is
 * appended to the log (JCKPT, a plain write: FORMAT.md "Journal" says why
 * no flush is needed; a dlm mount only while the cluster agrees that
 * every writer's flush covers all, fs_journal_set_records, which flushes
 * when it turns them off); records stop RECORD_SPAN blocks from the tail
 * (a bound on what a replay walks through in vain) or at half the log,
 * where the commit thread moves the header and frees the space.
 *
 * Who commits: the commit thread, on the commit= timer, when kicked
 * (fsync), and early, once a handle finds the running transaction past
 * EARLY_PCT of its limit, so that under a steady stream of operations
 * the transaction is closed and written behind them and no request waits
 * for journal I/O. A handle that finds the transaction full (or the cache
 * too pinned) still commits itself, after any commit in progress.
 *
 * Freed metadata: fs_journal_revoke() drops the block from the running tx
 * and records a revoke; after the commit its committed copy is discarded
 * and the buffer leaves the cache, so neither a checkpoint nor a replay
 * can later overwrite the block (which may by then hold file data).
 *
 * Replay (mount, recovery of another slot): fs_jscan.c parses the log
 * and selects the images (the parser fsck uses too); this file writes
 * them home in batches, flushes, and moves the header's tail past them.
 *
 * Owners (cluster glocks, fs_journal_sync_owner): when a buffer joins
 * the running transaction its owner (fs_cache_owner) is recorded in a
 * table owner -> newest transaction sequence (open addressing, struct
 * oseq); an owner is dirty while that sequence is above ckpt_seq, the
 * newest transaction written home. Every checkpoint forgets the entries
 * at or below it, so the table holds only owners touched since the last
 * checkpoint (bounded by the log and cache bounds that force one). A new
 * BTREE/XATTR block's owner is PENDING (its creator fills the owner field
 * after fs_buf_new): it waits in pend[] and is read from the block before
 * an owner query answers and, at the latest, at the snapshot (handles
 * drained). If the table cannot grow (no memory), every owner counts as
 * dirty up to that sequence (all_dirty_seq): slower, never wrong.
 *
 * Locking: commit_mutex (taken without a handle held) serializes commit
 * and checkpoint and protects the log position fields and every ckpt
 * copy; j->lock (order 4) protects the running transaction (list, count,
 * revokes, handles, blocked), the checkpoint list, the owner table,
 * pend[], ckpt_seq and all_dirty_seq. Cache lock (5) may be taken under
 * j->lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fusefs/cluster/fs_cluster.h"
#include "fusefs/core/fs_core_priv.h"
#include "fusefs/core/fs_jscan.h"
#include "lockmgr/cv_wait.h"
#include "lockmgr/cv_worker.h"

/* the commit thread is asked to commit once the running transaction
 * holds this share (percent) of its limit */
#define EARLY_PCT 60u

/* Checkpoint records are written only while the log from the header's
 * tail to the head is shorter than this (blocks, and half the log):
 * what a replay walks through before the last record, transactions
 * written home already, stays within one read window of fs_jscan.c (1
 * MiB); past it a lock leaving the node moves the header (FUA) instead,
 * one more device wait per RECORD_SPAN blocks of log. */
#define RECORD_SPAN 256u

struct fs_tx {
	struct fs *fs;
	uint64_t seq;
	unsigned credits;
	int sync;
};

/* Owner table entry; type FS_OWNER_NONE: empty slot. */
struct oseq {
	uint64_t num;
	uint64_t seq; /* newest transaction with a block of it */
	uint16_t type;
};

struct fs_journal {
	uint64_t jstart;	/* journal header block; immutable */
	uint32_t log_blocks;	/* immutable */
	uint32_t tx_limit;	/* immutable: max blocks per transaction */

	pthread_mutex_t commit_mutex;
	uint64_t head_pos;	/* commit_mutex: next log position */
	uint64_t tail_pos;	/* commit_mutex */
	uint64_t used;		/* commit_mutex: log blocks tail..head */
	uint64_t committed_seq;	/* commit_mutex (read under lock too) */
	int log_dirty;		/* commit_mutex: a transaction was written
				   since the last tail move or checkpoint
				   record */
	int jckpt;		/* immutable: checkpoint records possible
				   (incompat JCKPT, a device whose flush
				   covers every writer's writes) */
	int records;		/* commit_mutex: ... and allowed now (a
				   nolock mount: always; dlm: while the
				   cluster agrees, fs_journal_set_records) */
	void *hdrbuf;		/* commit_mutex: journal header and
				   checkpoint record I/O */

	pthread_mutex_t lock;
	pthread_cond_t cond;	/* handles drained / commit unblocked */
	pthread_cond_t thread_cond;	/* wakes the commit thread */
	uint64_t run_seq;
	struct fs_buf *run_list;
	unsigned run_count;
	uint64_t *revokes;
	unsigned nrev, caprev;
	unsigned handles;
	unsigned reserved;
	int blocked;
	struct fs_buf *ck_list;
	int aborted;		/* lock: -EIO after a failed write */
	int data_dirty;		/* atomic */
	int data_err;		/* atomic: data write error for next sync */
	int run_ordered;	/* lock: the running tx converted unwritten
				   extents: data=writeback commits it as
				   data=ordered (fs_tx_set_ordered) */

	struct cvw_worker w;	/* the commit thread; its stop flag: lock */
	int kicked;		/* lock */
	int early;		/* lock: running tx past EARLY_PCT of its limit */
	int want_ckpt;		/* lock */
	uint64_t timer_ns;	/* immutable */

	/* owners (lock) */
	struct oseq *otab; /* ocap slots, a power of 2 (or NULL) */
	size_t ocap, ocount;
	struct fs_buf **pend; /* running tx members, owner PENDING */
	unsigned npend, cappend;
	int pend_lost;		/* pend[] lacked memory: resolve from the
				   running list at the snapshot */
	uint64_t ckpt_seq;	/* transactions <= it are written home */
	uint64_t all_dirty_seq; /* every owner dirty up to it (ENOMEM) */
};

static uint64_t log_blk(const struct fs_journal *j, uint64_t pos)
{
	return j->jstart + 1 + pos;
}

static uint64_t log_next(const struct fs_journal *j, uint64_t pos)
{
	return pos + 1 == j->log_blocks ? 0 : pos + 1;
}

static unsigned desc_count(unsigned entries)
{
	return entries == 0 ? 1 : (entries + FS_JDESC_MAX - 1) / FS_JDESC_MAX;
}

/* ---- journal header --------------------------------------------------- */

static int jhdr_write(struct fs *fs, unsigned slot, void *buf,
		      uint64_t tail_pos, uint64_t tail_seq, int clean)
{
	return fs_jhdr_write(fs->bd, &fs->sb, slot, buf, tail_pos, tail_seq,
			     clean);
}

static int jhdr_read(struct fs *fs, unsigned slot, void *buf)
{
	uint64_t blk = fs_journal_blk(&fs->sb, slot);
	int ret;

	ret = bd_read(fs->bd, buf, FS_BLOCK_SIZE, blk << FS_BLOCK_SHIFT);
	if (ret < 0)
		return ret;
	return fs_jhdr_check(buf, &fs->sb, slot) < 0 ? -EUCLEAN : 0;
}

/* ---- replay ----------------------------------------------------------- */

/* Replay writes the images fs_jscan selects home in batches of RP_BATCH,
 * staged in one buffer. */
#define RP_BATCH 256u

struct rp_state {
	struct fs *fs;
	uint8_t *stage;		/* RP_BATCH blocks */
	struct bd_io ios[RP_BATCH];
	unsigned n;
	int first; /* no image written home yet */
};

static int rp_put(void *ctx, uint64_t home, const void *blk)
{
	struct rp_state *rp = ctx;
	uint8_t *d = rp->stage + (size_t)rp->n * FS_BLOCK_SIZE;
	int ret = 0;

	memcpy(d, blk, FS_BLOCK_SIZE);
	rp->ios[rp->n++] = (struct bd_io){ .op = BD_WRITE, .buf = d,
		.len = FS_BLOCK_SIZE, .off = home << FS_BLOCK_SHIFT };
	FS_STAT_ADD(rp->fs, replay_blocks, 1);
	/* the test hook (fs_cluster.h) waits with one image written home */
	if (rp->n == RP_BATCH ||
	    (rp->first && rp->n == 1 && getenv("UCFS_RECOVER_HOLD") != NULL)) {
		ret = bd_submit(rp->fs->bd, rp->ios, rp->n);
		rp->n = 0;
		if (rp->first && ret == 0)
			fs_cluster_recover_hold("replay");
		rp->first = 0;
	}
	return ret;
}

/* Scan @slot's journal; unless @ro, write its committed images home and
 * flush. */
static int rp_run(struct fs *fs, unsigned slot, const struct fs_jhdr *h,
		  int ro, struct fs_jscan_res *res)
{
	static const struct fs_jscan_ops ops = { .apply = rp_put };
	struct rp_state *rp = NULL;
	int ret;

	if (!ro) {
		rp = calloc(1, sizeof(*rp));
		if (rp != NULL)
			rp->stage = bd_buf_alloc((size_t)RP_BATCH *
						 FS_BLOCK_SIZE);
		if (rp == NULL || rp->stage == NULL) {
			free(rp);
			return -ENOMEM;
		}
		rp->fs = fs;
		rp->first = 1;
	}
	ret = fs_jscan(fs->bd, &fs->sb, slot, h->tail_pos, h->tail_seq,
		       ro ? NULL : &ops, rp, res);
	if (ret == 0 && rp != NULL && rp->n > 0)
		ret = bd_submit(fs->bd, rp->ios, rp->n);
	if (ret == 0 && rp != NULL && res->ntx > 0)
		ret = bd_flush(fs->bd);
	if (rp != NULL)
		free(rp->stage);
	free(rp);
	return ret;
}

int fs_journal_replay(struct fs *fs, unsigned slot, int ro,
		      unsigned *replayed, char *why, size_t whylen)
{
	void *buf = bd_buf_alloc(FS_BLOCK_SIZE);
	struct fs_jscan_res res;
	int ret = -ENOMEM;

	if (buf == NULL)
		return -ENOMEM;
	ret = jhdr_read(fs, slot, buf);
	if (ret < 0) {
		fs_why(why, whylen, ret, "bad journal header");
		goto out_free;
	}
	ret = rp_run(fs, slot, buf, ro, &res);
	if (ret < 0)
		goto out_free;
	if (replayed != NULL)
		*replayed = res.ntx;
	if (res.ntx > 0 && ro) {
		ret = fs_why(why, whylen, -EROFS,
			     "journal needs replay: mount read-write once");
		goto out_free;
	}
	if (ro)
		goto out_free;
	FS_STAT_ADD(fs, replay_tx, res.ntx);
	FS_STAT_ADD(fs, replay_scanned, res.scanned);
	/* skip one sequence: no stale log block can carry tail_seq */
	ret = jhdr_write(fs, slot, buf, res.end_pos, res.next_seq + 1, 0);
out_free:
	free(buf);
	return ret;
}

/* ---- owners ----------------------------------------------------------- */

#define OTAB_MIN 64u /* slots of the smallest owner table */

static size_t otab_slot(struct fs_owner o, size_t cap)
{
	uint64_t k = (o.num ^ ((uint64_t)o.type << 56)) * 0x9e3779b97f4a7c15ull;

	return (size_t)(k >> 29) & (cap - 1);
}

/* The entry of @o in @tab (@cap slots, one empty at least), or the
 * empty slot where it belongs. */
static struct oseq *otab_find(struct oseq *tab, size_t cap, struct fs_owner o)
{
	size_t i = otab_slot(o, cap);

	while (tab[i].type != FS_OWNER_NONE &&
	       (tab[i].type != o.type || tab[i].num != o.num))
		i = (i + 1) & (cap - 1);
	return &tab[i];
}

/* Move the entries newer than @keep into a table of @cap slots. 0, or
 * -ENOMEM (the old table stays). j->lock held. */
static int otab_rebuild(struct fs_journal *j, size_t cap, uint64_t keep)
{
	struct oseq *tab = calloc(cap, sizeof(*tab));
	size_t n = 0;

	if (tab == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < j->ocap; i++) {
		struct oseq *e = &j->otab[i];

		if (e->type == FS_OWNER_NONE || e->seq <= keep)
			continue;
		*otab_find(tab, cap, (struct fs_owner){e->type, e->num}) = *e;
		n++;
	}
	free(j->otab);
	j->otab = tab;
	j->ocap = cap;
	j->ocount = n;
	return 0;
}

/* A block of @o joined transaction @seq. j->lock held. */
static void owner_note(struct fs_journal *j, struct fs_owner o, uint64_t seq)
{
	struct oseq *e;

	if (o.type == FS_OWNER_NONE)
		return;
	if ((j->ocount + 1) * 4 > j->ocap * 3 &&
	    otab_rebuild(j, j->ocap ? j->ocap * 2 : OTAB_MIN, j->ckpt_seq) &&
	    j->ocount + 1 >= j->ocap) {
		/* no memory and no room: every owner dirty up to @seq */
		if (seq > j->all_dirty_seq)
			j->all_dirty_seq = seq;
		return;
	}
	e = otab_find(j->otab, j->ocap, o);
	if (e->type == FS_OWNER_NONE) {
		e->type = o.type;
		e->num = o.num;
		j->ocount++;
	}
	if (seq > e->seq)
		e->seq = seq;
}

/* After a checkpoint: forget the owners written home, shrink. j->lock
 * held. */
static void otab_sweep(struct fs_journal *j)
{
	size_t live = 0, cap = OTAB_MIN;

	if (j->ocap <= OTAB_MIN && j->ocount == 0)
		return;
	for (size_t i = 0; i < j->ocap; i++)
		live += j->otab[i].type != FS_OWNER_NONE &&
			j->otab[i].seq > j->ckpt_seq;
	while (cap < live * 2)
		cap <<= 1;
	/* no memory: the old entries stay, and read as clean */
	otab_rebuild(j, cap, j->ckpt_seq);
}

/* A running-transaction member whose owner is PENDING. j->lock held. */
static void pend_add(struct fs_journal *j, struct fs_buf *b)
{
	if (j->npend == j->cappend) {
		unsigned nc = j->cappend ? j->cappend * 2 : 16;
		struct fs_buf **n = realloc(j->pend, nc * sizeof(*n));

		if (n == NULL) {
			/* every owner dirty; the snapshot finds it */
			j->pend_lost = 1;
			j->all_dirty_seq = j->run_seq;
			return;
		}
		j->pend = n;
		j->cappend = nc;
	}
	j->pend[j->npend++] = b;
}

/* Forget @b (revoked) if it is pending. j->lock held. */
static void pend_del(struct fs_journal *j, struct fs_buf *b)
{
	for (unsigned i = 0; i < j->npend; i++) {
		if (j->pend[i] == b) {
			j->pend[i] = j->pend[--j->npend];
			return;
		}
	}
}

/* Read the owner of the pending blocks from their owner field. @final
 * (the snapshot: handles drained): a field still 0 means no owner; else
 * such a block stays pending (its creator has not filled it yet: it is
 * no owner whose glock is being given up). j->lock held. */
static void pend_resolve(struct fs *fs, int final)
{
	struct fs_journal *j = fs->j;
	unsigned k = 0;

	for (unsigned i = 0; i < j->npend; i++) {
		struct fs_buf *b = j->pend[i];
		struct fs_owner o = fs_owner_of(fs, b->blkno, b->data);

		if (o.type == FS_OWNER_NONE && !final) {
			j->pend[k++] = b;
			continue;
		}
		fs_cache_set_owner(b, o);
		owner_note(j, o, b->tx_seq);
	}
	j->npend = k;
	if (final && j->pend_lost) {
		for (struct fs_buf *b = j->run_list; b != NULL; b = b->tx_next)
			if (fs_cache_owner(b).type == FS_OWNER_PENDING)
				fs_cache_set_owner(
				    b, fs_owner_of(fs, b->blkno, b->data));
		j->pend_lost = 0;
	}
}

/* j->lock held. */
static int owner_dirty_locked(struct fs *fs, struct fs_owner o)
{
	struct fs_journal *j = fs->j;
	struct oseq *e;

	if (j->npend > 0)
		pend_resolve(fs, 0);
	if (j->all_dirty_seq > j->ckpt_seq)
		return 1;
	if (j->ocap == 0 || o.type == FS_OWNER_NONE)
		return 0;
	e = otab_find(j->otab, j->ocap, o);
	return e->type != FS_OWNER_NONE && e->seq > j->ckpt_seq;
}

/* ---- checkpoint ------------------------------------------------------- */

static int ck_cmp(const void *a, const void *b)
{
	const struct bd_io *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

static int submit_chunks(struct fs *fs, struct bd_io *ios, size_t n)
{
	for (size_t i = 0; i < n; i += 256) {
		unsigned k = (unsigned)(n - i < 256 ? n - i : 256);
		int ret = bd_submit(fs->bd, ios + i, k);

		if (ret < 0)
			return ret;
	}
	return 0;
}

/*
 * Write @n single-block writes (journal: consecutive log positions;
 * checkpoint: sorted by block number) as few large writes: copy them into
 * a staging buffer of at most STAGE_BLOCKS (2 MiB) and submit each
 * window's contiguous runs in one batch (a single run as one write). The
 * buffer is only as large as the writes: a lock's demote writes a few
 * blocks, and zeroing 2 MiB (bd_buf_alloc) took longer than their I/O.
 */
#define STAGE_BLOCKS 512u
static int write_staged(struct fs *fs, const struct bd_io *ios, unsigned n)
{
	unsigned cap = n < STAGE_BLOCKS ? (n > 0 ? n : 1) : STAGE_BLOCKS;
	uint8_t *stage = bd_buf_alloc((size_t)cap * FS_BLOCK_SIZE);
	struct bd_io *out = calloc(cap, sizeof(*out));
	int ret = 0;

	if (stage == NULL || out == NULL) {
		free(stage);
		free(out);
		return submit_chunks(fs, (struct bd_io *)ios, n);
	}
	for (unsigned w = 0; w < n && ret == 0; w += STAGE_BLOCKS) {
		unsigned m = n - w < STAGE_BLOCKS ? n - w : STAGE_BLOCKS;
		unsigned nout = 0;

		for (unsigned i = 0; i < m; i++) {
			const struct bd_io *io = &ios[w + i];
			uint8_t *dst = stage + (size_t)i * FS_BLOCK_SIZE;

			memcpy(dst, io->buf, FS_BLOCK_SIZE);
			if (nout > 0 && out[nout - 1].off +
			    out[nout - 1].len == io->off) {
				out[nout - 1].len += FS_BLOCK_SIZE;
				continue;
			}
			out[nout++] = (struct bd_io){ .op = BD_WRITE,
				.buf = dst, .len = FS_BLOCK_SIZE,
				.off = io->off };
		}
		/* one run (a commit that does not wrap): written by this
		 * thread, no hand-off to the device's completion thread */
		ret = nout == 1 ? bd_write(fs->bd, out[0].buf, out[0].len,
					   out[0].off, 0)
				: bd_submit(fs->bd, out, nout);
	}
	free(stage);
	free(out);
	return ret;
}

static void abort_journal(struct fs_journal *j)
{
	pthread_mutex_lock(&j->lock);
	j->aborted = -EIO;
	pthread_cond_broadcast(&j->cond);
	pthread_mutex_unlock(&j->lock);
}

/* Free @b's committed copy, if any, with its pin and page. Under
 * commit_mutex (after_commit: and j->lock), or at shutdown. */
static void drop_ckpt(struct fs *fs, struct fs_buf *b)
{
	if (b->ckpt == NULL)
		return;
	fs_cache_page_put(fs, b->ckpt);
	b->ckpt = NULL;
	fs_cache_unpin(b);
}

/*
 * Append a checkpoint record at the head: every transaction before it is
 * written home (and flushed). No flush: until one (ours or another
 * node's, which covers every completed write of the device) makes it
 * durable, nobody has written home a newer copy of what our log holds,
 * so a replay that still finds the transactions before it (the record
 * lost or torn) writes home what is there already. commit_mutex.
 */
static int ckpt_record(struct fs *fs)
{
	struct fs_journal *j = fs->j;
	struct fs_jckpt *c = j->hdrbuf;
	uint64_t blk = log_blk(j, j->head_pos);
	struct timespec ts;

	memset(c, 0, FS_BLOCK_SIZE);
	clock_gettime(CLOCK_REALTIME, &ts);
	c->home_seq = j->committed_seq;
	c->time_sec = ts.tv_sec;
	c->time_nsec = (uint32_t)ts.tv_nsec;
	/* sequence of the next transaction: the scan expects it there */
	fs_blk_seal(c, FS_BT_JCKPT, blk, j->committed_seq + 1);
	if (bd_write(fs->bd, c, FS_BLOCK_SIZE, blk << FS_BLOCK_SHIFT, 0) < 0)
		return -EIO;
	j->head_pos = log_next(j, j->head_pos);
	j->used++;
	FS_STAT_ADD(fs, ckpt_records, 1);
	return 0;
}

/*
 * After a checkpoint wrote everything home and flushed: tell a future
 * replay that nothing before the head is needed. With @rec (a lock
 * leaving this node) and room in the log (the filesystem has the JCKPT
 * feature), a checkpoint record: one block, no flush. Else the header's
 * tail moves to the head (FUA), which also frees the log; the commit
 * thread does that once the log is half full, and a record past
 * RECORD_SPAN blocks from the tail becomes a header move, which bounds
 * the replay's walk before the last record. commit_mutex.
 */
static int ckpt_mark(struct fs *fs, int rec)
{
	struct fs_journal *j = fs->j;

	if (rec ? !j->log_dirty : j->used == 0)
		return 0;
	j->log_dirty = 0;
	if (rec && j->jckpt && j->records && j->used + 1 < j->log_blocks / 2 &&
	    j->used + 1 < RECORD_SPAN)
		return ckpt_record(fs);
	j->tail_pos = j->head_pos;
	j->used = 0;
	FS_STAT_ADD(fs, ckpt_headers, 1);
	return jhdr_write(fs, fs->slot, j->hdrbuf, j->tail_pos,
			  j->committed_seq + 1, 0);
}

/* Write every committed copy home, flush, then mark the log written home
 * (ckpt_mark: with @rec, a record may do). commit_mutex. */
static int checkpoint_locked(struct fs *fs, int rec)
{
	struct fs_journal *j = fs->j;
	struct fs_buf *list, *b, *next;
	struct bd_io *ios;
	size_t n = 0;
	int ret = 0;

	pthread_mutex_lock(&j->lock);
	if (j->aborted) {
		/* fenced or failed: nothing more reaches the device */
		pthread_mutex_unlock(&j->lock);
		return j->aborted;
	}
	list = j->ck_list;
	j->ck_list = NULL;
	pthread_mutex_unlock(&j->lock);
	for (b = list; b != NULL; b = b->ck_next)
		n += b->ckpt != NULL;
	ios = malloc((n + 1) * sizeof(*ios));
	if (ios == NULL)
		ret = -ENOMEM;
	n = 0;
	for (b = list; b != NULL && ret == 0; b = b->ck_next)
		if (b->ckpt != NULL)
			ios[n++] = (struct bd_io){ .op = BD_WRITE,
				.buf = b->ckpt, .len = FS_BLOCK_SIZE,
				.off = b->blkno << FS_BLOCK_SHIFT };
	if (ret == 0) {
		if (n > 0)
			qsort(ios, n, sizeof(*ios), ck_cmp);
		ret = write_staged(fs, ios, (unsigned)n);
	}
	if (ret == 0)
		ret = bd_flush(fs->bd);
	free(ios);
	if (ret < 0) {
		/* put the list back: nothing was lost, the journal holds it */
		pthread_mutex_lock(&j->lock);
		for (b = list; b != NULL; b = next) {
			next = b->ck_next;
			b->ck_next = j->ck_list;
			j->ck_list = b;
		}
		pthread_mutex_unlock(&j->lock);
		abort_journal(j);
		return -EIO;
	}
	for (b = list; b != NULL; b = next) {
		next = b->ck_next;
		b->ck_next = NULL;
		drop_ckpt(fs, b);
		fs_cache_set_flags(b, 0, FS_BUF_ON_CKPT);
		fs_buf_put(b);
	}
	FS_STAT_ADD(fs, checkpoints, 1);
	FS_STAT_ADD(fs, checkpoint_blocks, n);
	FS_STAT_ADD(fs, flushes, 1);
	if (ckpt_mark(fs, rec) < 0) {
		abort_journal(j);
		return -EIO;
	}
	/* a replay now writes nothing: every owner so far is clean */
	pthread_mutex_lock(&j->lock);
	j->ckpt_seq = j->committed_seq;
	otab_sweep(j);
	pthread_mutex_unlock(&j->lock);
	return 0;
}

/* ---- commit ----------------------------------------------------------- */

struct commit_set {
	struct fs_buf **bufs;
	unsigned n;
	uint64_t *rev;
	unsigned nrev;
	uint64_t seq;
};

/* Snapshot the running transaction (handles drained). j->lock held. */
static int snapshot(struct fs *fs, struct commit_set *cs)
{
	struct fs_journal *j = fs->j;
	struct fs_buf *b, *next;
	unsigned i = 0;

	pend_resolve(fs, 1); /* owner fields are final now */
	cs->bufs = malloc((j->run_count + 1) * sizeof(*cs->bufs));
	if (cs->bufs == NULL)
		return -ENOMEM;
	for (b = j->run_list; b != NULL; b = b->tx_next) {
		if (b->ckpt == NULL) {
			b->ckpt = fs_cache_page_get(fs);
			if (b->ckpt == NULL)
				return -ENOMEM;	/* nothing changed yet */
			fs_cache_pin(b);
		}
	}
	cs->seq = j->run_seq;
	for (b = j->run_list; b != NULL; b = next) {
		struct fs_blk_hdr *h = b->ckpt;

		next = b->tx_next;
		memcpy(b->ckpt, b->data, FS_BLOCK_SIZE);
		h->seq = cs->seq;
		fs_blk_update_crc(b->ckpt);
		b->ckpt_seq = cs->seq;
		b->tx_seq = 0;
		b->tx_next = NULL;
		if (!(fs_cache_flags(b) & FS_BUF_ON_CKPT)) {
			fs_cache_set_flags(b, FS_BUF_ON_CKPT, 0);
			fs_buf_hold(b);
			b->ck_next = j->ck_list;
			j->ck_list = b;
		}
		fs_cache_unpin(b);	/* tx pin; ckpt pin remains */
		cs->bufs[i++] = b;
	}
	cs->n = i;
	cs->rev = j->revokes;
	cs->nrev = j->nrev;
	j->revokes = NULL;
	j->nrev = j->caprev = 0;
	j->run_list = NULL;
	j->run_count = 0;
	j->run_seq++;
	return 0;
}

/* Build and write descriptors + images + commit record; flush. */
static int write_tx(struct fs *fs, struct commit_set *cs)
{
	struct fs_journal *j = fs->j;
	unsigned nent = cs->n + cs->nrev, ndesc = desc_count(nent);
	unsigned total = ndesc + cs->n + 1, k = 0, e = 0, img = 0;
	uint8_t *meta = bd_buf_alloc((size_t)(ndesc + 1) * FS_BLOCK_SIZE);
	struct bd_io *ios = calloc(total, sizeof(*ios));
	struct fs_jcommit *c;
	struct timespec ts;
	uint64_t pos = j->head_pos;
	uint32_t crc = 0;
	int ret = -ENOMEM;

	if (meta == NULL || ios == NULL)
		goto out_free;
	for (unsigned d = 0; d < ndesc; d++) {
		struct fs_jdesc *desc = (void *)(meta + d * FS_BLOCK_SIZE);
		unsigned first_img = img;

		for (; e < nent && desc->count < FS_JDESC_MAX; e++) {
			struct fs_jdesc_ent *ent = &desc->ent[desc->count++];

			if (e < cs->nrev) {
				ent->blkno = cs->rev[e];
				ent->flags = FS_JDESC_REVOKE;
			} else {
				ent->blkno = cs->bufs[img++]->blkno;
			}
		}
		fs_blk_seal(desc, FS_BT_JDESC, log_blk(j, pos), cs->seq);
		crc = fs_crc32c(crc, desc, FS_BLOCK_SIZE);
		ios[k++] = (struct bd_io){ .op = BD_WRITE, .buf = desc,
			.len = FS_BLOCK_SIZE,
			.off = log_blk(j, pos) << FS_BLOCK_SHIFT };
		pos = log_next(j, pos);
		for (unsigned i = first_img; i < img; i++) {
			crc = fs_crc32c(crc, cs->bufs[i]->ckpt, FS_BLOCK_SIZE);
			ios[k++] = (struct bd_io){ .op = BD_WRITE,
				.buf = cs->bufs[i]->ckpt, .len = FS_BLOCK_SIZE,
				.off = log_blk(j, pos) << FS_BLOCK_SHIFT };
			pos = log_next(j, pos);
		}
	}
	c = (void *)(meta + ndesc * FS_BLOCK_SIZE);
	clock_gettime(CLOCK_REALTIME, &ts);
	c->nblocks = total - 1;
	c->tx_crc = crc;
	c->time_sec = ts.tv_sec;
	c->time_nsec = (uint32_t)ts.tv_nsec;
	fs_blk_seal(c, FS_BT_JCOMMIT, log_blk(j, pos), cs->seq);
	ios[k++] = (struct bd_io){ .op = BD_WRITE, .buf = c,
		.len = FS_BLOCK_SIZE,
		.off = log_blk(j, pos) << FS_BLOCK_SHIFT };
	pos = log_next(j, pos);
	ret = write_staged(fs, ios, k);
	if (ret == 0)
		ret = bd_flush(fs->bd);
	if (ret == 0) {
		j->head_pos = pos;
		j->used += total;
		j->log_dirty = 1;
		FS_STAT_ADD(fs, commit_blocks, total);
		FS_STAT_ADD(fs, commit_bytes, (uint64_t)total * FS_BLOCK_SIZE);
		FS_STAT_ADD(fs, flushes, 1);
	}
out_free:
	free(meta);
	free(ios);
	return ret;
}

/* After a durable commit: drop revoked copies, release pending frees. */
static void after_commit(struct fs *fs, struct commit_set *cs)
{
	struct fs_journal *j = fs->j;

	for (unsigned i = 0; i < cs->nrev; i++) {
		struct fs_buf *b = fs_cache_lookup(fs, cs->rev[i]);

		if (b == NULL)
			continue;
		if (fs_cache_flags(b) & FS_BUF_REVOKED) {
			pthread_mutex_lock(&j->lock);
			drop_ckpt(fs, b);
			pthread_mutex_unlock(&j->lock);
			fs_cache_unhash(b);
		}
		fs_buf_put(b);
	}
	fs_alloc_committed(fs, cs->seq);
}

/* Log half full or cache pressure: write back. commit_mutex held. */
static int need_checkpoint(struct fs *fs)
{
	struct fs_journal *j = fs->j;

	return j->used > j->log_blocks / 2 ||
	       fs_cache_pinned(fs) > fs_cache_capacity(fs) / 2;
}

/* Wait for the data writes issued so far; keep an error for the next
 * fs_journal_sync (the first one wins). */
static void data_wait(struct fs *fs)
{
	int ret = fs_data_wait(fs), zero = 0;

	if (ret < 0)
		__atomic_compare_exchange_n(&fs->j->data_err, &zero, ret, 0,
					    __ATOMIC_ACQ_REL,
					    __ATOMIC_RELAXED);
}

/* The data write error kept since the last call, or 0. */
static int take_data_err(struct fs *fs)
{
	return __atomic_exchange_n(&fs->j->data_err, 0, __ATOMIC_ACQ_REL);
}

/* fsync tail: data issued so far durable (after a data=ordered commit,
 * usually nothing left to do), and the kept data write error. */
static int sync_data(struct fs *fs)
{
	int ret = 0;

	data_wait(fs);
	if (__atomic_exchange_n(&fs->j->data_dirty, 0, __ATOMIC_ACQ_REL)) {
		FS_STAT_ADD(fs, flushes, 1);
		ret = bd_flush(fs->bd);
	}
	return ret < 0 ? ret : take_data_err(fs);
}

/* Commit the running transaction. commit_mutex held, no handle held. */
static int commit_locked(struct fs *fs, enum fs_commit_reason why)
{
	struct fs_journal *j = fs->j;
	struct commit_set cs = { 0 };
	uint64_t t0 = cvw_now_ns(), dt;
	unsigned need;
	int ret = 0, ordered;

	pthread_mutex_lock(&j->lock);
	if (j->aborted) {
		pthread_mutex_unlock(&j->lock);
		return j->aborted;
	}
	if (j->run_count == 0 && j->nrev == 0) {
		pthread_mutex_unlock(&j->lock);
		return 0;
	}
	j->blocked = 1;
	while (j->handles > 0)
		pthread_cond_wait(&j->cond, &j->lock);
	need = desc_count(j->run_count + j->nrev) + j->run_count + 1;
	if (j->used + need > j->log_blocks) {
		pthread_mutex_unlock(&j->lock);
		ret = checkpoint_locked(fs, 0);
		pthread_mutex_lock(&j->lock);
		if (ret == 0 && j->used + need > j->log_blocks)
			ret = -EIO;	/* tx bigger than the log */
		if (ret == 0)
			FS_STAT_ADD(fs, commit_reason[FS_CR_JOURNAL], 1);
	}
	if (ret == 0)
		ret = snapshot(fs, &cs);
	ordered = !fs->opts.data_writeback || j->run_ordered;
	j->run_ordered = 0;
	j->blocked = 0;
	pthread_cond_broadcast(&j->cond);
	pthread_mutex_unlock(&j->lock);
	if (ret < 0)
		goto out_abort;

	if (ordered) {
		/* data=ordered: data issued so far reaches the device first */
		data_wait(fs);
		if (__atomic_exchange_n(&j->data_dirty, 0, __ATOMIC_ACQ_REL)) {
			ret = bd_flush(fs->bd);
			FS_STAT_ADD(fs, flushes, 1);
			if (ret < 0)
				goto out_abort;
		}
	}
	ret = write_tx(fs, &cs);
	if (ret < 0)
		goto out_abort;
	if (!ordered)
		data_wait(fs);	/* before our frees become allocatable */
	pthread_mutex_lock(&j->lock);
	j->committed_seq = cs.seq;
	pthread_mutex_unlock(&j->lock);
	after_commit(fs, &cs);
	dt = cvw_now_ns() - t0;
	FS_STAT_ADD(fs, commits, 1);
	FS_STAT_ADD(fs, commit_reason[why], 1);
	FS_STAT_ADD(fs, commit_ns_total, dt);
	if (dt > __atomic_load_n(&fs->st.commit_ns_max, __ATOMIC_RELAXED))
		__atomic_store_n(&fs->st.commit_ns_max, dt, __ATOMIC_RELAXED);
	free(cs.bufs);
	free(cs.rev);
	if (need_checkpoint(fs)) {
		/* let the thread write back before the log fills */
		pthread_mutex_lock(&j->lock);
		j->want_ckpt = 1;
		pthread_cond_signal(&j->thread_cond);
		pthread_mutex_unlock(&j->lock);
	}
	return 0;
out_abort:
	free(cs.bufs);
	free(cs.rev);
	abort_journal(j);
	return -EIO;
}

/* ---- handles ---------------------------------------------------------- */

unsigned fs_tx_max_credits(struct fs *fs)
{
	return fs->j->tx_limit / 2;
}

static int must_commit(struct fs *fs, unsigned credits,
		       enum fs_commit_reason *why)
{
	struct fs_journal *j = fs->j;

	if (j->run_count + j->reserved + credits > j->tx_limit &&
	    j->run_count > 0) {
		*why = FS_CR_TXFULL;
		return 1;
	}
	if (j->run_count > 0 &&
	    fs_cache_pinned(fs) > fs_cache_capacity(fs) / 2) {
		*why = FS_CR_CACHE;
		return 1;
	}
	return 0;
}

int fs_tx_begin(struct fs *fs, unsigned credits, struct fs_tx **out)
{
	struct fs_journal *j = fs->j;
	enum fs_commit_reason why;
	struct fs_tx *tx;
	int ret;

	if (fs->ro)
		return -EROFS;
	if (credits > fs_tx_max_credits(fs))
		return -EINVAL;
	tx = calloc(1, sizeof(*tx));
	if (tx == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&j->lock);
	for (;;) {
		while (j->blocked && !j->aborted)
			pthread_cond_wait(&j->cond, &j->lock);
		if (j->aborted) {
			ret = j->aborted;
			goto out_unlock;
		}
		if (!must_commit(fs, credits, &why))
			break;
		pthread_mutex_unlock(&j->lock);
		pthread_mutex_lock(&j->commit_mutex);
		/* another thread may have committed while we waited */
		pthread_mutex_lock(&j->lock);
		ret = must_commit(fs, credits, &why);
		pthread_mutex_unlock(&j->lock);
		if (ret) {
			FS_STAT_ADD(fs, commit_waited, 1);
			ret = commit_locked(fs, why);
		}
		if (ret == 0 && why == FS_CR_CACHE)
			ret = checkpoint_locked(fs, 1);
		pthread_mutex_unlock(&j->commit_mutex);
		pthread_mutex_lock(&j->lock);
		if (ret < 0)
			goto out_unlock;
	}
	if (!j->early && !j->kicked &&
	    (uint64_t)(j->run_count + j->reserved + credits) * 100 >
		    (uint64_t)j->tx_limit * EARLY_PCT) {
		/* the commit thread closes and writes this transaction
		 * before it is full, so no handle has to wait for the I/O */
		j->early = 1;
		pthread_cond_signal(&j->thread_cond);
	}
	j->handles++;
	j->reserved += credits;
	tx->fs = fs;
	tx->seq = j->run_seq;
	tx->credits = credits;
	pthread_mutex_unlock(&j->lock);
	*out = tx;
	return 0;
out_unlock:
	pthread_mutex_unlock(&j->lock);
	free(tx);
	return ret;
}

int fs_tx_write(struct fs_tx *tx, struct fs_buf *b)
{
	struct fs_journal *j = tx->fs->j;
	int pin = 0;

	/* a freed block is dead: changes to it must never be journaled
	 * (its image could overwrite the data the block holds later) */
	if (fs_cache_flags(b) & FS_BUF_REVOKED)
		return 0;

	pthread_mutex_lock(&j->lock);
	if (j->aborted) {
		pthread_mutex_unlock(&j->lock);
		return -EIO;
	}
	if (b->tx_seq != j->run_seq) {
		struct fs_owner o = fs_cache_owner(b);

		b->tx_seq = j->run_seq;
		b->tx_next = j->run_list;
		j->run_list = b;
		j->run_count++;
		pin = 1;
		if (o.type == FS_OWNER_PENDING)
			pend_add(j, b);
		else
			owner_note(j, o, j->run_seq);
	}
	pthread_mutex_unlock(&j->lock);
	if (pin)
		fs_cache_pin(b);
	return 0;
}

void fs_tx_set_sync(struct fs_tx *tx)
{
	tx->sync = 1;
}

void fs_tx_set_ordered(struct fs_tx *tx)
{
	struct fs_journal *j = tx->fs->j;

	pthread_mutex_lock(&j->lock);
	j->run_ordered = 1;
	pthread_mutex_unlock(&j->lock);
}

uint64_t fs_tx_seq(const struct fs_tx *tx)
{
	return tx->seq;
}

struct fs *fs_tx_fs(const struct fs_tx *tx)
{
	return tx->fs;
}

static int sync_seq(struct fs *fs, uint64_t seq)
{
	struct fs_journal *j = fs->j;
	int ret = 0;

	pthread_mutex_lock(&j->commit_mutex);
	if (j->committed_seq < seq)
		ret = commit_locked(fs, FS_CR_SYNC);
	pthread_mutex_unlock(&j->commit_mutex);
	return ret;
}

int fs_tx_end(struct fs_tx *tx)
{
	struct fs *fs = tx->fs;
	struct fs_journal *j = fs->j;
	uint64_t seq = tx->seq;
	int sync = tx->sync, ret;

	pthread_mutex_lock(&j->lock);
	j->handles--;
	j->reserved -= tx->credits;
	if (j->handles == 0 && j->blocked)	/* a commit waits */
		pthread_cond_broadcast(&j->cond);
	ret = j->aborted;
	pthread_mutex_unlock(&j->lock);
	free(tx);
	if (ret == 0 && sync) {
		ret = sync_seq(fs, seq);
		if (ret == 0)
			ret = sync_data(fs);
	}
	return ret;
}

void fs_journal_revoke(struct fs_tx *tx, uint64_t blkno)
{
	struct fs *fs = tx->fs;
	struct fs_journal *j = fs->j;
	struct fs_buf *b = fs_cache_lookup(fs, blkno), **pp;
	int unpin = 0;

	if (b == NULL)
		return;
	pthread_mutex_lock(&j->lock);
	if (b->tx_seq == j->run_seq) {
		for (pp = &j->run_list; *pp != b; pp = &(*pp)->tx_next)
			;
		*pp = b->tx_next;
		b->tx_next = NULL;
		b->tx_seq = 0;
		j->run_count--;
		unpin = 1;
		if (j->npend > 0 && fs_cache_owner(b).type == FS_OWNER_PENDING)
			pend_del(j, b);
	}
	if (j->nrev == j->caprev) {
		unsigned nc = j->caprev ? j->caprev * 2 : 64;
		uint64_t *n = realloc(j->revokes, nc * sizeof(*n));

		if (n == NULL) {
			j->aborted = -EIO;	/* cannot record: stop */
			goto out_unlock;
		}
		j->revokes = n;
		j->caprev = nc;
	}
	j->revokes[j->nrev++] = blkno;
	fs_cache_set_flags(b, FS_BUF_REVOKED, 0);
out_unlock:
	pthread_mutex_unlock(&j->lock);
	if (unpin)
		fs_cache_unpin(b);
	fs_buf_put(b);
}

/* ---- sync, checkpoint, thread ----------------------------------------- */

int fs_journal_sync(struct fs *fs)
{
	struct fs_journal *j = fs->j;
	uint64_t seq;
	int empty, ret;

	if (fs->ro)
		return 0;
	pthread_mutex_lock(&j->lock);
	seq = j->run_seq;
	empty = j->run_count == 0 && j->nrev == 0;
	/* an empty running transaction may follow one whose commit is
	 * still being written (snapshot taken, not yet durable): wait for
	 * that one */
	if (empty)
		seq--;
	empty = j->committed_seq >= seq;
	ret = j->aborted;
	pthread_mutex_unlock(&j->lock);
	if (ret < 0)
		return ret;
	if (!empty) {
		ret = sync_seq(fs, seq);
		if (ret < 0)
			return ret;
	}
	return sync_data(fs);
}

/* The newest transaction that holds a block of @o and is not yet
 * written home (0: none); every transaction up to all_dirty_seq counts
 * (the owner table lacked memory). j->lock held. */
static uint64_t owner_seq_locked(struct fs *fs, struct fs_owner o)
{
	struct fs_journal *j = fs->j;
	uint64_t seq = j->all_dirty_seq;
	struct oseq *e;

	if (j->npend > 0)
		pend_resolve(fs, 0);
	if (j->ocap == 0)
		return seq;
	e = otab_find(j->otab, j->ocap, o);
	return e->type != FS_OWNER_NONE && e->seq > seq ? e->seq : seq;
}

int fs_journal_sync_ino(struct fs *fs, uint64_t ino)
{
	struct fs_journal *j = fs->j;
	struct fs_owner o = {FS_OWNER_INODE, ino};
	uint64_t seq, done;
	int ret;

	if (fs->ro)
		return 0;
	pthread_mutex_lock(&j->lock);
	seq = owner_seq_locked(fs, o);
	done = j->committed_seq;
	ret = j->aborted;
	pthread_mutex_unlock(&j->lock);
	if (ret == 0 && seq > done)
		ret = sync_seq(fs, seq);
	else if (ret == 0)
		FS_STAT_ADD(fs, fsync_clean, 1);
	return ret < 0 ? ret : sync_data(fs);
}

int fs_journal_set_records(struct fs *fs, int on)
{
	struct fs_journal *j = fs->j;
	int was;

	pthread_mutex_lock(&j->commit_mutex); /* no record being written */
	was = j->records;
	j->records = on;
	__atomic_store_n(&fs->st.records_allowed, (uint64_t)(j->jckpt && on),
			 __ATOMIC_RELAXED);
	pthread_mutex_unlock(&j->commit_mutex);
	if (on || !was || !j->jckpt)
		return 0; /* no record since the last flush of this call */
	FS_STAT_ADD(fs, records_off, 1);
	/* every record written so far: durable before another writer whose
	 * flush may not cover ours relies on it */
	FS_STAT_ADD(fs, flushes, 1);
	return bd_flush(fs->bd) < 0 ? -EIO : 0;
}

uint64_t fs_journal_stamp(struct fs *fs)
{
	struct fs_journal *j = fs->j;
	uint64_t seq;

	pthread_mutex_lock(&j->lock);
	seq = j->run_seq;
	pthread_mutex_unlock(&j->lock);
	return seq;
}

int fs_journal_owner_since(struct fs *fs, struct fs_owner o, uint64_t stamp)
{
	struct fs_journal *j = fs->j;
	int since;

	pthread_mutex_lock(&j->lock);
	since = owner_seq_locked(fs, o) >= stamp || j->ckpt_seq >= stamp ||
		j->npend > 0 || j->aborted;
	pthread_mutex_unlock(&j->lock);
	return since;
}

/* fs_journal_owner_dirty; *err = the journal's abort error. */
static int owner_dirty(struct fs *fs, struct fs_owner o, int *err)
{
	struct fs_journal *j = fs->j;
	int dirty;

	pthread_mutex_lock(&j->lock);
	*err = j->aborted;
	dirty = owner_dirty_locked(fs, o);
	pthread_mutex_unlock(&j->lock);
	return dirty;
}

int fs_journal_owner_dirty(struct fs *fs, struct fs_owner o)
{
	int err;

	return fs->ro ? 0 : owner_dirty(fs, o, &err);
}

/*
 * The data half of an INODE owner's sync: its data writes complete and
 * flushed. Data runs carry no inode, so this waits for every run in
 * flight and flushes if data was written since the last flush; with no
 * run in flight and nothing unflushed it costs one d->lock round trip.
 * Most writes are covered by the checkpoint already (a file write issues
 * its data inside the handle that writes its inode, and commits wait for
 * the data issued before them), but truncate's zeroing of the last block
 * comes after the inode's transactions. data_dirty is cleared before the
 * wait, so a write issued meanwhile stays flagged for the next flusher.
 * A write error stays for the next fsync (data_wait).
 */
static int owner_data_sync(struct fs *fs, struct fs_sync_done *done)
{
	int dirty =
	    __atomic_exchange_n(&fs->j->data_dirty, 0, __ATOMIC_ACQ_REL);
	uint64_t runs, bytes;

	fs_data_inflight(fs, &runs, &bytes);
	if (runs > 0)
		data_wait(fs);
	done->data_bytes += bytes;
	if (!dirty)
		return 0;
	FS_STAT_ADD(fs, flushes, 1);
	done->flushes++;
	return bd_flush(fs->bd);
}

static uint64_t stat_get(const uint64_t *v)
{
	return __atomic_load_n(v, __ATOMIC_RELAXED);
}

/* Commit and checkpoint for an owner's sync; commit_mutex held. */
static int owner_commit_locked(struct fs *fs, struct fs_sync_done *done)
{
	uint64_t log = stat_get(&fs->st.commit_blocks);
	uint64_t home = stat_get(&fs->st.checkpoint_blocks);
	uint64_t fl = stat_get(&fs->st.flushes);
	int ret = commit_locked(fs, FS_CR_LOCK);

	if (ret == 0)
		ret = checkpoint_locked(fs, 1);
	done->log_blocks += stat_get(&fs->st.commit_blocks) - log;
	done->home_blocks += stat_get(&fs->st.checkpoint_blocks) - home;
	done->flushes += (uint32_t)(stat_get(&fs->st.flushes) - fl);
	return ret;
}

int fs_journal_sync_owner_done(struct fs *fs, struct fs_owner o,
			       struct fs_sync_done *done)
{
	struct fs_journal *j = fs->j;
	int ret = 0, err;

	memset(done, 0, sizeof(*done));
	if (fs->ro)
		return 0;
	if (owner_dirty(fs, o, &err)) {
		pthread_mutex_lock(&j->commit_mutex);
		/* a checkpoint may have written it home while we waited */
		if (owner_dirty(fs, o, &err))
			ret = owner_commit_locked(fs, done);
		pthread_mutex_unlock(&j->commit_mutex);
	}
	if (ret == 0)
		ret = err;
	if (ret == 0 && o.type == FS_OWNER_INODE)
		ret = owner_data_sync(fs, done);
	return ret;
}

int fs_journal_sync_owner(struct fs *fs, struct fs_owner o)
{
	struct fs_sync_done done;

	return fs_journal_sync_owner_done(fs, o, &done);
}

size_t fs_journal_owner_count(struct fs *fs)
{
	struct fs_journal *j = fs->j;
	size_t n;

	pthread_mutex_lock(&j->lock);
	n = j->ocount + j->npend;
	pthread_mutex_unlock(&j->lock);
	return n;
}

void fs_journal_data_written(struct fs *fs)
{
	__atomic_store_n(&fs->j->data_dirty, 1, __ATOMIC_RELEASE);
}

int fs_journal_checkpoint(struct fs *fs, enum fs_commit_reason why)
{
	struct fs_journal *j = fs->j;
	int ret;

	if (fs->ro)
		return 0;
	pthread_mutex_lock(&j->commit_mutex);
	ret = commit_locked(fs, why);
	if (ret == 0)
		ret = checkpoint_locked(fs, 0);
	pthread_mutex_unlock(&j->commit_mutex);
	return ret;
}

int fs_journal_writeback(struct fs *fs)
{
	int ret;

	if (fs->ro)
		return 0;
	ret = fs_journal_checkpoint(fs, FS_CR_LOCK);
	if (ret < 0)
		return ret;
	fs_data_flush(fs);
	data_wait(fs);		/* an error stays for the next fsync */
	__atomic_store_n(&fs->j->data_dirty, 0, __ATOMIC_RELEASE);
	FS_STAT_ADD(fs, flushes, 1);
	return bd_flush(fs->bd);
}

void fs_journal_abort(struct fs *fs)
{
	if (fs->j != NULL)
		abort_journal(fs->j);
}

void fs_journal_kick(struct fs *fs)
{
	struct fs_journal *j = fs->j;

	pthread_mutex_lock(&j->lock);
	j->kicked = 1;
	pthread_cond_signal(&j->thread_cond);
	pthread_mutex_unlock(&j->lock);
}

static void *commit_thread(void *arg)
{
	struct fs *fs = arg;
	struct fs_journal *j = fs->j;
	uint64_t deadline = cvw_now_ns() + j->timer_ns;

	pthread_mutex_lock(&j->lock);
	while (!cvw_worker_stopping(&j->w)) {
		int timer, kicked, early, ckpt;

		if (!j->kicked && !j->early && !j->want_ckpt)
			cvw_wait_ms(&j->thread_cond, &j->lock, 1000);
		if (cvw_worker_stopping(&j->w))
			break;
		timer = cvw_now_ns() >= deadline;
		kicked = j->kicked;
		early = j->early;
		ckpt = j->want_ckpt;
		if (!timer && !kicked && !early && !ckpt)
			continue;
		j->kicked = 0;
		j->want_ckpt = 0;
		pthread_mutex_unlock(&j->lock);
		pthread_mutex_lock(&j->commit_mutex);
		if (timer || kicked || early) {
			commit_locked(fs, kicked ? FS_CR_SYNC :
					  early ? FS_CR_TXFULL : FS_CR_TIMER);
			deadline = cvw_now_ns() + j->timer_ns;
		}
		if (early) {
			/* cleared after the commit: until then a growing
			 * transaction must not kick again */
			pthread_mutex_lock(&j->lock);
			j->early = 0;
			pthread_mutex_unlock(&j->lock);
		}
		if (need_checkpoint(fs))
			checkpoint_locked(fs, 0);
		pthread_mutex_unlock(&j->commit_mutex);
		pthread_mutex_lock(&j->lock);
	}
	pthread_mutex_unlock(&j->lock);
	return NULL;
}

int fs_journal_init(struct fs *fs)
{
	struct fs_journal *j = calloc(1, sizeof(*j));
	const struct fs_jhdr *h;
	uint64_t lim;
	unsigned js;
	int ret;

	if (j == NULL)
		return -ENOMEM;
	j->hdrbuf = bd_buf_alloc(FS_BLOCK_SIZE);
	if (j->hdrbuf == NULL) {
		free(j);
		return -ENOMEM;
	}
	/* a ro cluster node has no slot: slot 0's header, never written */
	js = fs->slot < fs->sb.slot_count ? fs->slot : 0;
	ret = jhdr_read(fs, js, j->hdrbuf);
	if (ret < 0) {
		free(j->hdrbuf);
		free(j);
		return ret;
	}
	h = j->hdrbuf;
	j->jstart = fs_journal_blk(&fs->sb, js);
	j->log_blocks = fs->sb.journal_blocks - 1;
	j->head_pos = j->tail_pos = h->tail_pos;
	j->run_seq = h->tail_seq;
	j->committed_seq = h->tail_seq - 1;
	j->ckpt_seq = j->committed_seq; /* replayed at mount */
	/* a record's durability rests on the next holder's flush (FORMAT.md
	 * "Journal"): only where that flush covers our writes too */
	j->jckpt = (fs->sb.feature_incompat & FS_FEATURE_INCOMPAT_JCKPT) != 0 &&
		   bd_flush_covers_all(fs->bd);
	/* dlm: every other writer's flush must cover ours too: off until
	 * the cluster agrees (fs_jrec.c) */
	j->records = fs->opts.nolock;
	__atomic_store_n(&fs->st.records_allowed,
			 (uint64_t)(j->jckpt && j->records), __ATOMIC_RELAXED);
	lim = j->log_blocks / 4;
	lim -= desc_count((unsigned)lim) + 1;
	if (lim > fs_cache_capacity(fs) / 4)
		lim = fs_cache_capacity(fs) / 4;	/* pinned + copies */
	j->tx_limit = (uint32_t)lim;
	j->timer_ns = (uint64_t)(fs->opts.commit_s ? fs->opts.commit_s : 5) *
		      1000000000ull;
	pthread_mutex_init(&j->commit_mutex, NULL);
	pthread_mutex_init(&j->lock, NULL);
	pthread_cond_init(&j->cond, NULL);
	pthread_cond_init(&j->thread_cond, NULL);
	fs->j = j;
	if (!fs->ro) {
		ret = cvw_worker_start(&j->w, &j->lock, &j->thread_cond,
				       commit_thread, fs, "ucfs-commit");
		if (ret < 0) {
			fs->j = NULL;
			free(j->hdrbuf);
			free(j);
			return ret;
		}
	}
	return 0;
}

int fs_journal_shutdown(struct fs *fs, int clean)
{
	struct fs_journal *j = fs->j;
	int ret = 0;

	if (j == NULL)
		return 0;
	cvw_worker_stop(&j->w);
	if (clean && !fs->ro) {
		data_wait(fs);	/* fs_core_unmount took the data error */
		ret = fs_journal_checkpoint(fs, FS_CR_UNMOUNT);
		if (ret == 0)
			ret = jhdr_write(fs, fs->slot, j->hdrbuf, j->tail_pos,
					 j->committed_seq + 1, 1);
	}
	/* drop what is left (after an error or for abandon) */
	for (struct fs_buf *b = j->ck_list, *n; b != NULL; b = n) {
		n = b->ck_next;
		b->ck_next = NULL;
		drop_ckpt(fs, b);
		fs_buf_put(b);
	}
	for (struct fs_buf *b = j->run_list, *n; b != NULL; b = n) {
		n = b->tx_next;
		b->tx_next = NULL;
		b->tx_seq = 0;
		fs_cache_unpin(b);
	}
	free(j->revokes);
	free(j->otab);
	free(j->pend);
	free(j->hdrbuf);
	pthread_mutex_destroy(&j->commit_mutex);
	pthread_mutex_destroy(&j->lock);
	pthread_cond_destroy(&j->cond);
	pthread_cond_destroy(&j->thread_cond);
	free(j);
	fs->j = NULL;
	return ret;
}
