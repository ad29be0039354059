/*
 * fs_file.c — file data: inline data, extents, read/write, truncate
 * (fallocate and lseek: fs_falloc.c, the extent map: fs_extent.c).
 *
 * Formats (dinode.fmt):
 *  - INLINE: the first `size` bytes of the inode's inline area (3840
 *    bytes); the rest of the area is zero. A write past the area converts
 *    the file to EXTENTS (the data moves to a block).
 *  - EXTENTS: a B+tree in the inline area, key = logical block, value
 *    struct fs_extent_val {phys, len, flags}. Unmapped ranges are holes
 *    and read as zeros. Appending writes extend the previous extent when
 *    the allocator returns the blocks right after it, so a sequentially
 *    written file has few extents. Data blocks come from fs_alloc_data
 *    with the end of the previous extent as goal: a file past 256 KiB
 *    allocates from its own reservation (fs_alloc.c), so files written
 *    at once do not interleave; truncate drops the reservation.
 *
 * Data never goes through the metadata cache: reads and writes go to the
 * device through the data write-behind (fs_data_read / fs_data_write,
 * fs_data.c: asynchronous, combined into runs, coherent reads, ordered
 * overlapping writes); partial blocks are read, modified and written
 * (RMW: the block a previous write just covered is read back from the
 * open run, not the device), new blocks are written in full (zeros
 * around the data). A write that no transaction follows (truncate's
 * zeroing) submits the open run itself (fs_data_flush). A write maps
 * (allocates) its blocks in a transaction and ends the handle as soon as
 * fs_data_write returned: with data=ordered the commit that makes the
 * new extents visible waits for the data writes first (fs_journal.c),
 * and a failed data write is reported by the next fsync (-EIO). The device I/O
 * itself runs under the inode's lock, with a per-inode I/O range
 * (fs_ns.h) recorded.
 *
 * Invariant: bytes of the file's last block beyond `size` are zero on
 * disk (truncate zeroes them), so growing a file exposes zeros.
 *
 * Unwritten extents (fs_extent.c): fallocate maps holes to unwritten
 * extents without writing data; reads treat them as holes (zeros, no
 * device I/O); a write converts the blocks it covers in the transaction
 * that maps it (convert_seg), writing whole zero-filled edge blocks
 * around its data.
 *
 * Locking: callers hold the inode's lock (fs_ilock.h), shared for
 * fs_file_read, exclusive for everything else (asserted in debug
 * builds), and ns->refc_lock when the file shares extents; no
 * transaction handle is held on entry.
 */
#include "fusefs/namespace/fs_ns.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>

#define BS ((uint64_t)FS_BLOCK_SIZE)
#define CHUNK_BLOCKS 256u /* 1 MiB per device I/O */
#define UNMAP_BATCH 8u

/* One CHUNK_BLOCKS bounce buffer per thread, allocated on first use and
 * freed when the thread exits (FUSE workers come and go). */
static pthread_key_t bounce_key;
static pthread_once_t bounce_once = PTHREAD_ONCE_INIT;

static void bounce_key_init(void)
{
	pthread_key_create(&bounce_key, free);
}

static char *bounce_get(void)
{
	char *b;

	pthread_once(&bounce_once, bounce_key_init);
	b = pthread_getspecific(bounce_key);
	if (b == NULL) {
		b = bd_buf_alloc(CHUNK_BLOCKS * BS);
		if (b != NULL && pthread_setspecific(bounce_key, b) != 0) {
			free(b);
			b = NULL;
		}
	}
	return b;
}

/* ---- read ---- */

static ssize_t read_inline(struct fs_dinode *di, void *buf, size_t len,
			   uint64_t off)
{
	if (off >= di->size)
		return 0;
	if (len > di->size - off)
		len = (size_t)(di->size - off);
	if (off + len > FS_INODE_INLINE_SIZE)
		return -EUCLEAN;
	memcpy(buf, di->inline_area + off, len);
	return (ssize_t)len;
}

/*
 * A planned piece of a read or write: file blocks [lb, lb + nblk) at
 * physical block phys (hole: no block; fresh: just allocated, so partial
 * edge blocks are zero-filled instead of read; src: copied on write, so
 * partial edge blocks are read from the old blocks at src).
 */
struct seg {
	uint64_t lb, nblk, phys;
	uint64_t src; /* copy on write: partial edges come from here */
	int hole, fresh;
};

#define SEG_MAX 16u

/* Map up to SEG_MAX pieces of [pos, end) for reading; *stop = where the
 * plan ends. The inode's lock held. */
static int plan_read(struct fs *fs, struct fs_buf *ib, uint64_t pos,
		     uint64_t end, struct seg *sg, unsigned *ns,
		     uint64_t *stop)
{
	uint64_t lb, nblk, hole_end, last = (end + BS - 1) / BS;
	struct fs_btree bt;
	struct fs_ext e;
	int ret;

	fs_ext_tree(fs, ib, &bt);
	*ns = 0;
	while (pos < end && *ns < SEG_MAX) {
		lb = pos / BS;
		ret = fs_ext_map(&bt, lb, &e, &hole_end);
		if (ret < 0 && ret != -ENOENT)
			return ret;
		nblk = ret == 0 ? e.lb + e.len - lb : hole_end - lb;
		if (nblk > last - lb)
			nblk = last - lb;
		if (nblk > CHUNK_BLOCKS)
			nblk = CHUNK_BLOCKS;
		sg[*ns] = (struct seg){ .lb = lb, .nblk = nblk };
		if (ret == -ENOENT || (e.flags & FS_EXT_UNWRITTEN))
			sg[*ns].hole = 1;
		else
			sg[*ns].phys = e.phys + (lb - e.lb);
		(*ns)++;
		pos = (lb + nblk) * BS < end ? (lb + nblk) * BS : end;
	}
	*stop = pos;
	return 0;
}

/* Copy the planned pieces covering [pos, stop) into @dst (which holds
 * the file from @pos on). No lock needed. */
static int read_io(struct fs *fs, const struct seg *sg, unsigned ns,
		   uint64_t pos, uint64_t stop, char *dst)
{
	char *bounce = NULL;
	uint64_t from = pos;

	for (unsigned i = 0; i < ns; i++) {
		uint64_t s = sg[i].lb * BS, e = (sg[i].lb + sg[i].nblk) * BS;
		uint64_t a = s > from ? s : from, z = e < stop ? e : stop;
		int ret;

		if (a >= z)
			continue;
		if (sg[i].hole) {
			memset(dst + (a - pos), 0, z - a);
			continue;
		}
		/* whole blocks straight into the destination */
		if (a == s && z - a >= BS) {
			uint64_t whole = (z - a) / BS * BS;

			ret = fs_data_read(fs, dst + (a - pos), whole,
					   sg[i].phys * BS);
			if (ret < 0)
				return ret;
			a += whole;
			if (a == z)
				continue;
		}
		if (bounce == NULL && (bounce = bounce_get()) == NULL)
			return -ENOMEM;
		ret = fs_data_read(fs, bounce,
				   (z - s + BS - 1) / BS * BS - (a - s) / BS * BS,
				   (sg[i].phys + (a - s) / BS) * BS);
		if (ret < 0)
			return ret;
		memcpy(dst + (a - pos), bounce + (a - s) % BS, z - a);
	}
	return 0;
}

ssize_t fs_file_read(struct fs *fs, struct fs_inode *n, struct fs_buf *ib,
		     void *buf, size_t len, uint64_t off)
{
	struct fs_dinode *di = fs_di(ib);
	struct seg sg[SEG_MAX];
	uint64_t end, pos, stop;
	unsigned ns;
	int ret = 0;

	FS_ASSERT_HELD(fs, ib->blkno, FS_IL_SH);
	if (di->fmt == FS_FMT_INLINE)
		return read_inline(di, buf, len, off);
	if (di->fmt != FS_FMT_EXTENTS)
		return -EUCLEAN;
	if (off >= di->size || len == 0)
		return 0;
	end = off + len < di->size ? off + len : di->size;
	for (pos = off; pos < end && ret == 0; pos = stop) {
		struct fs_range r = { .start = pos, .end = end };

		ret = plan_read(fs, ib, pos, end, sg, &ns, &stop);
		if (ret < 0)
			break;
		if (n == NULL) {
			ret = read_io(fs, sg, ns, pos, stop,
				      (char *)buf + (pos - off));
			continue;
		}
		r.end = stop;
		fs_range_add(fs, n, &r);
		ret = read_io(fs, sg, ns, pos, stop, (char *)buf + (pos - off));
		fs_range_del(fs, n, &r);
	}
	if (ret < 0 && pos == off)
		return ret;
	FS_NS_STAT_ADD(fs, data_read_bytes, pos - off);
	return (ssize_t)(pos - off);
}

/* ---- write ---- */

/*
 * Write the data [pos, pos + dlen) that falls in the piece @sg. Partial
 * edge blocks are read first (from sg->src when copied on write) unless
 * fresh (newly allocated: zero-filled). Whole blocks go straight from
 * @data (fs_data_write copies them).
 */
static int write_seg(struct fs *fs, char *bounce, const struct seg *sg,
		     uint64_t pos, const char *data, size_t dlen)
{
	uint64_t lb = sg->lb, nblk = sg->nblk, phys = sg->phys;
	uint64_t rphys = sg->src != 0 ? sg->src : phys;
	uint64_t start = lb * BS, stop = (lb + nblk) * BS;
	int ret, fresh = sg->fresh;

	if (pos == start && dlen == stop - start)	/* whole blocks */
		return fs_data_write(fs, data, dlen, phys * BS);
	if (pos > start) {
		if (fresh)
			memset(bounce, 0, BS);
		else if ((ret = fs_data_read_rmw(fs, bounce, BS, rphys * BS)) <
			 0)
			return ret;
		FS_NS_STAT_ADD(fs, rmw_blocks, !fresh);
	}
	if (pos + dlen < stop && (nblk > 1 || pos == start)) {
		char *last = bounce + (nblk - 1) * BS;

		if (fresh)
			memset(last, 0, BS);
		else if ((ret = fs_data_read_rmw(fs, last, BS,
						 (rphys + nblk - 1) * BS)) < 0)
			return ret;
		FS_NS_STAT_ADD(fs, rmw_blocks, !fresh);
	}
	if (bounce + (pos - start) != data)
		memcpy(bounce + (pos - start), data, dlen);
	return fs_data_write(fs, bounce, nblk * BS, phys * BS);
}

/* One piece of a write: an allocation mapped with up to two tree
 * operations, the conversion of an unwritten extent (three), or a copy
 * on write (an allocation, three, and a refcount change). */
unsigned fs_file_map_credits(struct fs *fs, struct fs_btree *bt)
{
	return 2 + fs_ext_convert_credits(bt) + FS_ALLOC_CREDITS(fs) +
	       fs_refc_credits(fs, bt->root_buf);
}

int fs_file_to_extents(struct fs *fs, struct fs_buf *ib)
{
	struct fs_dinode *di = fs_di(ib);
	struct fs_btree bt;
	struct fs_tx *tx;
	uint64_t start = 0;
	uint32_t len = 0;
	char *blk = NULL;
	struct fs_ext e;
	int ret;

	if (di->size > 0 && (blk = calloc(1, BS)) == NULL)
		return -ENOMEM;
	fs_ext_tree(fs, ib, &bt);
	ret = fs_tx_begin(fs, fs_file_map_credits(fs, &bt) + 2, &tx);
	if (ret < 0)
		goto out_buf;
	ret = fs_tx_write(tx, ib);
	if (ret == 0 && di->size > 0) {
		ret = fs_alloc(tx, ib->blkno, 1, 1, &start, &len);
		if (ret == 0) {
			memcpy(blk, di->inline_area, di->size);
			ret = fs_data_write(fs, blk, BS, start * BS);
			if (ret < 0)
				fs_free(tx, start, len);
		}
	}
	if (ret < 0)
		goto out_end;
	memset(di->inline_area, 0, FS_INODE_INLINE_SIZE);
	di->fmt = FS_FMT_EXTENTS;
	ret = fs_btree_create(tx, &bt);
	if (ret == 0 && len > 0) {
		e = (struct fs_ext){0, start, 1, 0};
		ret = fs_ext_put(tx, &bt, &e, 1);
		di->blocks += 1;
	}
	if (ret == 0)
		FS_NS_STAT_ADD(fs, inline_to_extents, 1);
	/* a failure here leaves the tx to abort the journal: the inode was
	 * modified in place and cannot be rolled back */
out_end:
	fs_tx_end(tx);
out_buf:
	free(blk);
	return ret;
}

int fs_file_inline_write(struct fs *fs, struct fs_buf *ib, const void *buf,
			 uint64_t off, uint64_t len, int grow)
{
	struct fs_dinode *di = fs_di(ib);
	uint64_t end = off + len;
	struct fs_tx *tx;
	int ret;

	ret = fs_tx_begin(fs, 1, &tx);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, ib);
	if (ret == 0) {
		if (buf != NULL)
			memcpy(di->inline_area + off, buf, len);
		else if (off < di->size)
			memset(di->inline_area + off, 0,
			       (end < di->size ? end : di->size) - off);
		if (grow && end > di->size)
			di->size = end;
		fs_ino_touch(di, FS_T_MTIME | FS_T_CTIME);
	}
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	return ret;
}

/* Blocks a write round may allocate into, each a transaction credit
 * bill of fs_file_map_credits(). */
static unsigned write_segmax(struct fs *fs, struct fs_btree *bt)
{
	unsigned per = fs_file_map_credits(fs, bt), max = fs_tx_max_credits(fs);
	unsigned n = max > 2 ? (max - 2) / per : 1;

	return n == 0 ? 1 : n > SEG_MAX ? SEG_MAX : n;
}

/* Allocate the hole at @lb (at most @nblk blocks) in @tx and map it. */
static int alloc_hole(struct fs_tx *tx, struct fs_buf *ib, uint64_t lb,
		      uint64_t nblk, struct seg *sg)
{
	struct fs *fs = fs_tx_fs(tx);
	struct fs_ext prev = { 0 }, e;
	uint64_t goal = ib->blkno, start, hole_end;
	struct fs_btree bt;
	uint32_t len;
	int ret;

	fs_ext_tree(fs, ib, &bt);
	if (lb > 0 && fs_ext_map(&bt, lb - 1, &prev, &hole_end) == 0)
		goal = prev.phys + prev.len;
	ret = fs_alloc_data(tx, ib->blkno, fs_di(ib)->blocks, goal, 1,
			    (uint32_t)nblk, &start, &len);
	if (ret < 0)
		return ret;
	if (prev.len > 0 && prev.lb + prev.len == lb &&
	    prev.phys + prev.len == start &&
	    !(prev.flags & FS_EXT_UNWRITTEN) &&
	    (uint64_t)prev.len + len < (1u << 31)) {
		prev.len += len;
		ret = fs_ext_put(tx, &bt, &prev, 0);
	} else {
		e = (struct fs_ext){lb, start, len, 0};
		ret = fs_ext_put(tx, &bt, &e, 1);
	}
	if (ret < 0) {
		fs_free(tx, start, len);
		return ret;
	}
	fs_di(ib)->blocks += len;
	*sg = (struct seg){ .lb = lb, .nblk = len, .phys = start, .fresh = 1 };
	return 0;
}

/* Blocks [lb, lb + nblk) of unwritten extent @e are about to be written:
 * mark them written in @tx, the write's transaction, which commits after
 * the data even with data=writeback (fs_tx_set_ordered): a crash shows
 * zeros or the new data, never the blocks' stale contents. The piece is
 * fresh: the bytes around the data in its edge blocks are zeros, not
 * read. */
static int convert_seg(struct fs_tx *tx, struct fs_btree *bt,
		       const struct fs_ext *e, uint64_t lb, uint64_t nblk,
		       struct seg *sg)
{
	int ret = fs_ext_set_flags(tx, bt, e, lb, lb + nblk,
				   e->flags & ~FS_EXT_UNWRITTEN);

	if (ret < 0)
		return ret;
	fs_tx_set_ordered(tx);
	FS_NS_STAT_ADD(fs_tx_fs(tx), unwritten_converted, nblk);
	*sg = (struct seg){
	    .lb = lb, .nblk = nblk, .phys = e->phys + (lb - e->lb), .fresh = 1};
	return 0;
}

/*
 * Blocks from @lb (at most @nblk) of shared extent @e are about to be
 * written: the first run of one count (fs_refcount.c). Count 1: the file
 * is their only user, it writes them in place (the extent loses
 * FS_EXT_SHARED there; an unwritten one is converted). Else copy on
 * write: new blocks take the piece (edges read from the old ones, or
 * zeros if unwritten), the old blocks' count goes down by one. The
 * transaction commits as data=ordered (the old data stays until the new
 * is on disk).
 */
static int cow_seg(struct fs_tx *tx, struct fs_buf *ib, const struct fs_ext *e,
		   uint64_t lb, uint64_t nblk, struct seg *sg)
{
	struct fs *fs = fs_tx_fs(tx);
	uint64_t old = e->phys + (lb - e->lb), start;
	uint32_t flags = e->flags & ~(FS_EXT_SHARED | FS_EXT_UNWRITTEN);
	int fresh = (e->flags & FS_EXT_UNWRITTEN) != 0;
	uint32_t count, run, len;
	struct fs_btree bt;
	struct fs_buf *rb;
	int ret;

	ret = fs_refc_root(fs, ib, &rb);
	if (ret < 0)
		return ret;
	ret = fs_refc_count(fs, rb, old, (uint32_t)nblk, &count, &run);
	fs_ext_tree(fs, ib, &bt);
	fs_tx_set_ordered(tx);
	if (ret == 0 && count == 1) {
		ret = fs_ext_set_flags(tx, &bt, e, lb, lb + run, flags);
		*sg = (struct seg){
		    .lb = lb, .nblk = run, .phys = old, .fresh = fresh};
		goto out_put;
	}
	if (ret == 0)
		ret = fs_alloc_data(tx, ib->blkno, fs_di(ib)->blocks, old, 1,
				    run, &start, &len);
	if (ret < 0)
		goto out_put;
	ret = fs_ext_remap(tx, &bt, e, lb, lb + len, start, flags);
	if (ret == 0)
		ret = fs_refc_dec(tx, rb, old, len, count);
	if (ret < 0) {
		fs_free(tx, start, len);
		goto out_put;
	}
	FS_NS_STAT_ADD(fs, cow_blocks, len);
	*sg = (struct seg){.lb = lb,
			   .nblk = len,
			   .phys = start,
			   .src = fresh ? 0 : old,
			   .fresh = fresh};
out_put:
	fs_buf_put(rb);
	return ret;
}

/* Map (allocating holes) up to @max pieces of [pos, end) in @tx;
 * *stop = where the plan ends. An allocation failure after the first
 * piece just ends the plan early. */
static int plan_write(struct fs_tx *tx, struct fs_buf *ib, uint64_t pos,
		      uint64_t end, unsigned max, struct seg *sg,
		      unsigned *ns, uint64_t *stop)
{
	struct fs *fs = fs_tx_fs(tx);
	uint64_t lb, nblk, hole_end, last = (end + BS - 1) / BS;
	struct fs_btree bt;
	struct fs_ext e;
	int ret = 0;

	*ns = 0;
	while (pos < end && *ns < max) {
		lb = pos / BS;
		fs_ext_tree(fs, ib, &bt);
		ret = fs_ext_map(&bt, lb, &e, &hole_end);
		if (ret < 0 && ret != -ENOENT)
			break;
		nblk = ret == 0 ? e.lb + e.len - lb : hole_end - lb;
		if (nblk > last - lb)
			nblk = last - lb;
		if (nblk > CHUNK_BLOCKS)
			nblk = CHUNK_BLOCKS;
		if (ret == 0 && (e.flags & FS_EXT_SHARED)) {
			ret = cow_seg(tx, ib, &e, lb, nblk, &sg[*ns]);
			if (ret < 0)
				break;
		} else if (ret == 0 && (e.flags & FS_EXT_UNWRITTEN)) {
			ret = convert_seg(tx, &bt, &e, lb, nblk, &sg[*ns]);
			if (ret < 0)
				break;
		} else if (ret == 0) {
			sg[*ns] = (struct seg){ .lb = lb, .nblk = nblk,
				.phys = e.phys + (lb - e.lb) };
		} else {
			ret = alloc_hole(tx, ib, lb, nblk, &sg[*ns]);
			if (ret < 0)
				break;
		}
		nblk = sg[*ns].nblk;
		(*ns)++;
		pos = (lb + nblk) * BS < end ? (lb + nblk) * BS : end;
	}
	*stop = pos;
	return *ns > 0 ? 0 : ret;
}

/* Write the planned pieces covering [pos, stop) from @src (the data of
 * the file from @pos on). No lock needed. */
static int write_io(struct fs *fs, const struct seg *sg, unsigned ns,
		    uint64_t pos, uint64_t stop, const char *src)
{
	char *bounce = bounce_get();

	if (bounce == NULL)
		return -ENOMEM;
	for (unsigned i = 0; i < ns; i++) {
		uint64_t s = sg[i].lb * BS, e = (sg[i].lb + sg[i].nblk) * BS;
		uint64_t a = s > pos ? s : pos, z = e < stop ? e : stop;
		int ret;

		ret = write_seg(fs, bounce, &sg[i], a, src + (a - pos),
				(size_t)(z - a));
		if (ret < 0)
			return ret;
	}
	return 0;
}

/*
 * One round of an extents write: plan (allocate) under the inode's lock
 * in a transaction that also sets size and times, hand the data to
 * fs_data_write (the handle still open, so the commit publishing the new
 * extents waits for it), end the handle.
 */
static int write_round(struct fs *fs, struct fs_inode *n, struct fs_buf *ib,
		       const char *src, uint64_t pos, uint64_t end,
		       uint64_t *stop)
{
	/* whole blocks: two writes into one block would each read-modify-
	 * write it */
	struct fs_range r = { .start = pos / BS * BS,
			      .end = (end + BS - 1) / BS * BS, .write = 1 };
	struct seg sg[SEG_MAX];
	struct fs_btree bt;
	struct fs_tx *tx;
	unsigned ns, max;
	int ret;

	fs_ext_tree(fs, ib, &bt);
	max = write_segmax(fs, &bt);
	/* a piece is at least a block: a small write reserves for what it
	 * spans, so that concurrent writers share a transaction */
	if ((r.end - r.start) / BS < max)
		max = (unsigned)((r.end - r.start) / BS);
	if (n != NULL)
		fs_range_add(fs, n, &r);
	ret = fs_tx_begin(fs, 2 + max * fs_file_map_credits(fs, &bt), &tx);
	if (ret < 0)
		goto out_range;
	ret = fs_tx_write(tx, ib);
	if (ret == 0)
		ret = plan_write(tx, ib, pos, end, max, sg, &ns, stop);
	if (ret < 0) {
		fs_tx_end(tx);
		goto out_range;
	}
	if (*stop > fs_di(ib)->size)
		fs_di(ib)->size = *stop;
	fs_ino_touch(fs_di(ib), FS_T_MTIME | FS_T_CTIME);
	ret = write_io(fs, sg, ns, pos, *stop, src);
	fs_tx_end(tx);
out_range:
	if (n != NULL)
		fs_range_del(fs, n, &r);
	return ret;
}

ssize_t fs_file_write(struct fs *fs, struct fs_inode *n, struct fs_buf *ib,
		      const void *buf, size_t len, uint64_t off)
{
	struct fs_dinode *di = fs_di(ib);
	uint64_t pos, stop, end = off + len;
	int ret = 0;

	FS_ASSERT_HELD(fs, ib->blkno, FS_IL_EX);
	if (len == 0)
		return 0;
	if (off >= FS_FILE_MAX || len > FS_FILE_MAX - off)
		return -EFBIG;
	if (di->fmt == FS_FMT_INLINE) {
		if (off + len <= FS_INODE_INLINE_SIZE) {
			ret = fs_file_inline_write(fs, ib, buf, off, len, 1);
			if (ret == 0)
				FS_NS_STAT_ADD(fs, data_write_bytes, len);
			return ret < 0 ? ret : (ssize_t)len;
		}
		ret = fs_file_to_extents(fs, ib);
		if (ret < 0)
			return ret;
	}
	if (di->fmt != FS_FMT_EXTENTS)
		return -EUCLEAN;
	for (pos = off; pos < end; pos = stop) {
		ret = write_round(fs, n, ib, (const char *)buf + (pos - off),
				  pos, end, &stop);
		if (ret < 0)
			break;
	}
	if (pos == off)
		return ret;
	FS_NS_STAT_ADD(fs, data_write_bytes, pos - off);
	return (ssize_t)(pos - off);
}

/* ---- unmapping (truncate, punch, destroy) ---- */

/* File blocks [a, *b) at device block @phys of a shared extent are
 * unmapped: the first run's count goes down (its blocks are freed if the
 * file was their last user); *b = the run's end. */
static int drop_shared(struct fs_tx *tx, struct fs_buf *ib, uint64_t phys,
		       uint64_t *b, uint64_t a)
{
	uint32_t count, run;
	struct fs_buf *rb;
	int ret;

	ret = fs_refc_root(fs_tx_fs(tx), ib, &rb);
	if (ret < 0)
		return ret;
	ret = fs_refc_count(fs_tx_fs(tx), rb, phys, (uint32_t)(*b - a), &count,
			    &run);
	if (ret == 0)
		ret = fs_refc_dec(tx, rb, phys, run, count);
	if (ret == 0)
		*b = a + run;
	fs_buf_put(rb);
	return ret;
}

/* Unmap one extent's intersection with [lb0, lb1) in @tx: 1 if done
 * (no extent left in the range), 0 if one was handled. */
static int unmap_one(struct fs_tx *tx, struct fs_buf *ib, uint64_t lb0,
		     uint64_t lb1)
{
	struct fs *fs = fs_tx_fs(tx);
	struct fs_extent_val v;
	struct fs_btree bt;
	struct fs_ext e, tail;
	uint64_t key, a, b, eend;
	size_t vlen;
	int ret;

	fs_ext_tree(fs, ib, &bt);
	ret = fs_btree_lookup_le(&bt, lb1 - 1, &key, &v, sizeof(v), &vlen);
	if (ret == -ENOENT)
		return 1;
	if (ret < 0)
		return ret;
	if (vlen != sizeof(v) || v.len == 0)
		return -EUCLEAN;
	e = (struct fs_ext){key, v.phys, v.len, v.flags};
	eend = e.lb + e.len;
	if (eend <= lb0)
		return 1;
	a = e.lb > lb0 ? e.lb : lb0;
	b = eend < lb1 ? eend : lb1;
	if (e.flags & FS_EXT_SHARED) /* one run: b moves down to its end */
		ret = drop_shared(tx, ib, e.phys + (a - e.lb), &b, a);
	else
		ret = fs_free(tx, e.phys + (a - e.lb), (uint32_t)(b - a));
	if (ret < 0)
		return ret;
	if (a == e.lb) {
		ret = fs_btree_delete(tx, &bt, e.lb);
	} else {
		e.len = (uint32_t)(a - e.lb);
		ret = fs_ext_put(tx, &bt, &e, 0);
	}
	if (ret == 0 && b < eend) {
		tail = (struct fs_ext){b, v.phys + (b - key),
				       (uint32_t)(eend - b), v.flags};
		ret = fs_ext_put(tx, &bt, &tail, 1);
	}
	if (ret == 0) {
		uint64_t n = b - a;

		fs_di(ib)->blocks -= n < fs_di(ib)->blocks ? n :
				     fs_di(ib)->blocks;
	}
	return ret;
}

/* Free every block mapped in [lb0, lb1), a few extents per transaction. */
int fs_file_unmap(struct fs *fs, struct fs_buf *ib, uint64_t lb0, uint64_t lb1)
{
	struct fs_btree bt;
	struct fs_tx *tx;
	unsigned per, i, batch;
	int ret = 0, done = 0;

	if (lb0 >= lb1)
		return 0;
	while (!done) {
		fs_ext_tree(fs, ib, &bt);
		per = 2 * fs_btree_credits(&bt) + FS_ALLOC_CREDITS(fs) +
		      fs_refc_credits(fs, ib);
		batch = (fs_tx_max_credits(fs) - 1) / per;
		if (batch > UNMAP_BATCH)
			batch = UNMAP_BATCH;
		if (batch == 0)
			batch = 1;
		ret = fs_tx_begin(fs, 1 + batch * per, &tx);
		if (ret < 0)
			return ret;
		ret = fs_tx_write(tx, ib);
		for (i = 0; ret == 0 && i < batch; i++) {
			ret = unmap_one(tx, ib, lb0, lb1);
			if (ret == 1) {
				done = 1;
				ret = 0;
				break;
			}
		}
		if (fs_tx_end(tx) < 0 && ret == 0)
			ret = -EIO;
		/* dlm: room in the free log for the next transaction */
		if (ret == 0 && !done)
			ret = fs_alloc_flog_room(fs);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Zero bytes [from, to) of the file's block containing them (one block),
 * if it is mapped. */
/* Block @lb of shared extent @e becomes the file's own (copied unless
 * it is its only user), to be modified in place. */
static int unshare_block(struct fs *fs, struct fs_buf *ib,
			 const struct fs_ext *e, uint64_t lb)
{
	char *blk = bd_buf_alloc(BS);
	struct fs_btree bt;
	struct fs_tx *tx;
	struct seg sg;
	int ret;

	if (blk == NULL)
		return -ENOMEM;
	fs_ext_tree(fs, ib, &bt);
	ret = fs_tx_begin(fs, 1 + fs_file_map_credits(fs, &bt), &tx);
	if (ret < 0)
		goto out_free;
	ret = fs_tx_write(tx, ib);
	if (ret == 0)
		ret = cow_seg(tx, ib, e, lb, 1, &sg);
	if (ret == 0 && sg.src != 0) /* copied: the old content */
		ret = fs_data_read(fs, blk, BS, sg.src * BS);
	if (ret == 0 && sg.src != 0)
		ret = fs_data_write(fs, blk, BS, sg.phys * BS);
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
out_free:
	free(blk);
	return ret;
}

int fs_file_zero_partial(struct fs *fs, struct fs_buf *ib, uint64_t from,
			 uint64_t to)
{
	struct fs_btree bt;
	uint64_t lb = from / BS, hole_end, phys;
	struct fs_ext e;
	char *blk;
	int ret;

	if (from >= to)
		return 0;
	fs_ext_tree(fs, ib, &bt);
	ret = fs_ext_map(&bt, lb, &e, &hole_end);
	if (ret == -ENOENT)
		return 0;
	if (ret < 0 || (e.flags & FS_EXT_UNWRITTEN))
		return ret;
	if ((e.flags & FS_EXT_SHARED) &&
	    ((ret = unshare_block(fs, ib, &e, lb)) < 0 ||
	     (ret = fs_ext_map(&bt, lb, &e, &hole_end)) < 0))
		return ret;
	blk = malloc(BS);
	if (blk == NULL)
		return -ENOMEM;
	phys = e.phys + (lb - e.lb);
	ret = fs_data_read_rmw(fs, blk, BS, phys * BS);
	if (ret == 0) {
		memset(blk + from % BS, 0, to - from);
		ret = fs_data_write(fs, blk, BS, phys * BS);
	}
	/* no transaction follows this write: do not leave it open */
	fs_data_flush(fs);
	free(blk);
	return ret;
}

int fs_file_free_all(struct fs *fs, struct fs_buf *ib)
{
	struct fs_btree bt;
	struct fs_tx *tx;
	int ret;

	if (fs_di(ib)->fmt != FS_FMT_EXTENTS)
		return 0;
	ret = fs_file_unmap(fs, ib, 0, FS_LB_END);
	if (ret < 0)
		return ret;
	fs_ext_tree(fs, ib, &bt);
	ret = fs_tx_begin(
	    fs, 2 + 4 * fs_btree_credits(&bt) + fs_refc_detach_credits(fs),
	    &tx);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, ib);
	if (ret == 0)
		ret = fs_refc_detach(tx, ib);
	if (ret == 0)
		ret = fs_btree_destroy(tx, &bt);
	if (ret == 0) {
		memset(fs_di(ib)->inline_area, 0, FS_INODE_INLINE_SIZE);
		fs_di(ib)->fmt = FS_FMT_INLINE;
		fs_di(ib)->blocks = 0;
		fs_di(ib)->size = 0;
	}
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	return ret;
}

static int truncate_inline(struct fs *fs, struct fs_buf *ib, uint64_t size)
{
	struct fs_dinode *di = fs_di(ib);
	struct fs_tx *tx;
	int ret;

	ret = fs_tx_begin(fs, 1, &tx);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, ib);
	if (ret == 0) {
		if (size < di->size && size < FS_INODE_INLINE_SIZE)
			memset(di->inline_area + size, 0,
			       (di->size < FS_INODE_INLINE_SIZE ? di->size :
				FS_INODE_INLINE_SIZE) - size);
		di->size = size;
		fs_ino_touch(di, FS_T_MTIME | FS_T_CTIME);
	}
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	return ret;
}

int fs_file_set_size(struct fs *fs, struct fs_buf *ib, uint64_t size)
{
	struct fs_tx *tx;
	int ret;

	ret = fs_tx_begin(fs, 1, &tx);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, ib);
	if (ret == 0) {
		fs_di(ib)->size = size;
		fs_ino_touch(fs_di(ib), FS_T_MTIME | FS_T_CTIME);
	}
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	return ret;
}

int fs_file_truncate(struct fs *fs, struct fs_inode *n, struct fs_buf *ib,
		     uint64_t size)
{
	struct fs_dinode *di = fs_di(ib);
	int ret;

	FS_ASSERT_HELD(fs, ib->blkno, FS_IL_EX);
	fs_range_wait_all(fs, n);

	if (size > FS_FILE_MAX)
		return -EFBIG;
	fs_alloc_resv_drop(fs, ib->blkno);
	if (di->fmt == FS_FMT_INLINE) {
		if (size <= FS_INODE_INLINE_SIZE)
			return truncate_inline(fs, ib, size);
		ret = fs_file_to_extents(fs, ib);
		if (ret < 0)
			return ret;
	}
	if (di->fmt != FS_FMT_EXTENTS)
		return -EUCLEAN;
	if (size == 0) {
		ret = fs_file_free_all(fs, ib);
		return ret < 0 ? ret : truncate_inline(fs, ib, 0);
	}
	if (size < di->size) {
		/* the size first: a crash then leaves blocks past EOF, never
		 * a size pointing at freed blocks */
		ret = fs_file_set_size(fs, ib, size);
		if (ret == 0)
			ret = fs_file_unmap(fs, ib, (size + BS - 1) / BS,
					    FS_LB_END);
		if (ret == 0 && size % BS != 0)
			ret = fs_file_zero_partial(fs, ib, size,
						   (size / BS + 1) * BS);
		return ret;
	}
	return fs_file_set_size(fs, ib, size);
}
