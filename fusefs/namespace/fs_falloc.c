/*
 * fs_falloc.c — fallocate(2) in every mode ucfs supports, and lseek(2)
 * SEEK_DATA / SEEK_HOLE, over a regular file's extent map (fs_extent.c).
 *
 * Modes (as ext4, errnos included):
 *  - 0 / KEEP_SIZE: map the holes of the range to unwritten extents
 *    (allocated, read as zeros, no data written: prealloc_hole), up to
 *    PREALLOC_MAX blocks per transaction; 0 also extends the size.
 *  - PUNCH_HOLE | KEEP_SIZE: zero the partial edge blocks, free the whole
 *    ones (fs_file_unmap).
 *  - ZERO_RANGE [| KEEP_SIZE]: zero the partial edge blocks, turn the
 *    written whole blocks into unwritten ones (no data I/O) and map the
 *    holes between them as unwritten: the range reads as zeros and stays
 *    allocated.
 *  - COLLAPSE_RANGE: remove [off, off + len) (block-aligned, ending
 *    before EOF, else -EINVAL): free its blocks and shift every later
 *    extent down by len; the size shrinks by len.
 *  - INSERT_RANGE: open a hole of len at off (block-aligned, off before
 *    EOF, else -EINVAL; -EFBIG past the maximum size): split the extent
 *    at off, shift every later extent up; the size grows by len.
 *  - anything else (UNSHARE_RANGE, unknown bits): -EOPNOTSUPP; the mode
 *    combinations the VFS refuses get the VFS's errno.
 * The shifts move extents one by one (a delete and an insert each), a
 * batch per transaction, the highest key first when shifting up: a crash
 * in the middle leaves a consistent file whose later part is moved only
 * partly, as ext4 can when its transaction restarts.
 * Linux's FUSE forwards only KEEP_SIZE, PUNCH_HOLE and (since 5.14, so
 * in 6.1) ZERO_RANGE to a daemon: fuse_file_fallocate refuses the other
 * modes with EOPNOTSUPP itself (seen on this machine's 6.18: no request
 * arrives). COLLAPSE_RANGE and INSERT_RANGE are reachable through fs.h
 * (library users, tests) only.
 *
 * Locking: callers hold the inode's lock (fs_ilock.h) exclusive
 * (fs_file_fallocate, with ns->refc_lock if the file shares extents) or
 * shared (fs_file_seek); no transaction handle is held on entry.
 */
#include "fusefs/namespace/fs_ns.h"

#include <errno.h>
#include <linux/falloc.h>
#include <string.h>

#define BS ((uint64_t)FS_BLOCK_SIZE)
#define SHIFT_BATCH 16u /* extents moved per transaction */

/* How many extent changes of @per credits one transaction can take
 * (1 credit for the inode besides): up to SHIFT_BATCH, at least 1. */
static unsigned batch_of(struct fs *fs, unsigned per, unsigned *credits)
{
	unsigned n = (fs_tx_max_credits(fs) - 1) / per;

	n = n > SHIFT_BATCH ? SHIFT_BATCH : n == 0 ? 1 : n;
	*credits = 1 + n * per;
	return n;
}

#define PREALLOC_MAX 32768u /* blocks per allocation: 128 MiB */

/* Allocate up to @nblk blocks for the hole at @lb as one unwritten
 * extent (merged into the previous one when it is unwritten and ends
 * where the new blocks start); no data is written. *got = blocks. */
static int prealloc_hole(struct fs *fs, struct fs_buf *ib, uint64_t lb,
			 uint64_t nblk, uint64_t *got)
{
	struct fs_ext prev = { 0 }, e;
	uint64_t goal = ib->blkno, start, hole_end;
	struct fs_btree bt;
	struct fs_tx *tx;
	uint32_t len;
	int ret;

	fs_ext_tree(fs, ib, &bt);
	if (lb > 0 && fs_ext_map(&bt, lb - 1, &prev, &hole_end) == 0)
		goal = prev.phys + prev.len;
	ret = fs_tx_begin(fs, fs_file_map_credits(fs, &bt), &tx);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, ib);
	if (ret == 0)
		ret = fs_alloc_data(tx, ib->blkno, fs_di(ib)->blocks, goal, 1,
				    (uint32_t)nblk, &start, &len);
	if (ret < 0)
		goto out_end;
	e = (struct fs_ext){lb, start, len, FS_EXT_UNWRITTEN};
	if (prev.len > 0 && prev.lb + prev.len == lb &&
	    prev.phys + prev.len == start && (prev.flags & FS_EXT_UNWRITTEN) &&
	    (uint64_t)prev.len + len <= FS_EXT_LEN_MAX) {
		prev.len += len;
		ret = fs_ext_put(tx, &bt, &prev, 0);
	} else {
		ret = fs_ext_put(tx, &bt, &e, 1);
	}
	if (ret < 0) {
		fs_free(tx, start, len);
		goto out_end;
	}
	fs_di(ib)->blocks += len;
	FS_NS_STAT_ADD(fs, unwritten_allocated, len);
	*got = len;
out_end:
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	return ret;
}

/* Map every hole in [lb0, lb1) to unwritten extents. */
static int alloc_range(struct fs *fs, struct fs_buf *ib, uint64_t lb0,
		       uint64_t lb1)
{
	uint64_t lb = lb0, hole_end, nblk, got;
	struct fs_btree bt;
	struct fs_ext e;
	int ret = 0;

	while (lb < lb1) {
		fs_ext_tree(fs, ib, &bt);
		ret = fs_ext_map(&bt, lb, &e, &hole_end);
		if (ret == 0) {
			lb = e.lb + e.len;
			continue;
		}
		if (ret != -ENOENT)
			break;
		nblk = (hole_end < lb1 ? hole_end : lb1) - lb;
		if (nblk > PREALLOC_MAX)
			nblk = PREALLOC_MAX;
		ret = prealloc_hole(fs, ib, lb, nblk, &got);
		if (ret < 0)
			break;
		lb += got;
	}
	return ret < 0 ? ret : 0;
}

/* ---- fallocate ---- */

/* Zero the partial blocks at the edges of [off, end) (all of it when it
 * lies inside one block); the whole blocks between are the caller's. */
static int zero_edges(struct fs *fs, struct fs_buf *ib, uint64_t off,
		      uint64_t end)
{
	uint64_t lb0 = (off + BS - 1) / BS, lb1 = end / BS;
	int ret;

	if (lb0 > lb1)
		return fs_file_zero_partial(fs, ib, off, end);
	ret = fs_file_zero_partial(fs, ib, off, lb0 * BS);
	if (ret == 0)
		ret = fs_file_zero_partial(fs, ib, lb1 * BS, end);
	return ret;
}

static int punch(struct fs *fs, struct fs_buf *ib, uint64_t off, uint64_t end)
{
	struct fs_dinode *di = fs_di(ib);
	uint64_t lb0 = (off + BS - 1) / BS, lb1 = end / BS;
	int ret;

	if (di->fmt == FS_FMT_INLINE)
		return fs_file_inline_write(fs, ib, NULL, off, end - off, 0);
	ret = zero_edges(fs, ib, off, end);
	if (ret == 0 && lb0 <= lb1)
		ret = fs_file_unmap(fs, ib, lb0, lb1);
	if (ret == 0)
		ret = fs_file_set_size(fs, ib, di->size);
	return ret;
}

/* The next written extent piece in [*lb, lb1) turned unwritten, in @tx:
 * 1 when none is left, 0 after one. */
static int unwrite_one(struct fs_tx *tx, struct fs_buf *ib, uint64_t *lb,
		       uint64_t lb1)
{
	struct fs_btree bt;
	uint64_t hole_end, b;
	struct fs_ext e;
	int ret;

	fs_ext_tree(fs_tx_fs(tx), ib, &bt);
	for (;;) {
		if (*lb >= lb1)
			return 1;
		ret = fs_ext_map(&bt, *lb, &e, &hole_end);
		if (ret == -ENOENT) {
			*lb = hole_end;
			continue;
		}
		if (ret < 0)
			return ret;
		b = e.lb + e.len < lb1 ? e.lb + e.len : lb1;
		if (!(e.flags & FS_EXT_UNWRITTEN))
			break;
		*lb = b;
	}
	ret = fs_ext_set_flags(tx, &bt, &e, *lb, b, e.flags | FS_EXT_UNWRITTEN);
	*lb = b;
	return ret;
}

/* Turn every written block of [lb0, lb1) into unwritten ones (their
 * data is dropped without I/O), a batch of extents per transaction. */
static int unwrite_range(struct fs *fs, struct fs_buf *ib, uint64_t lb0,
			 uint64_t lb1)
{
	struct fs_btree bt;
	struct fs_tx *tx;
	unsigned i, n, credits;
	int ret = 0;

	while (ret == 0) {
		fs_ext_tree(fs, ib, &bt);
		n = batch_of(fs, fs_ext_convert_credits(&bt), &credits);
		ret = fs_tx_begin(fs, credits, &tx);
		if (ret < 0)
			return ret;
		ret = fs_tx_write(tx, ib);
		for (i = 0; ret == 0 && i < n; i++)
			ret = unwrite_one(tx, ib, &lb0, lb1);
		if (fs_tx_end(tx) < 0 && ret >= 0)
			ret = -EIO;
	}
	return ret < 0 ? ret : 0;
}

static int zero_range(struct fs *fs, struct fs_buf *ib, uint64_t off,
		      uint64_t end, int keep)
{
	struct fs_dinode *di = fs_di(ib);
	uint64_t lb0 = (off + BS - 1) / BS, lb1 = end / BS;
	int ret;

	if (di->fmt == FS_FMT_INLINE && end <= FS_INODE_INLINE_SIZE)
		return fs_file_inline_write(fs, ib, NULL, off, end - off,
					    !keep);
	if (di->fmt == FS_FMT_INLINE && (ret = fs_file_to_extents(fs, ib)) < 0)
		return ret;
	if (di->fmt != FS_FMT_EXTENTS)
		return -EUCLEAN;
	ret = zero_edges(fs, ib, off, end);
	if (ret == 0 && lb0 <= lb1)
		ret = unwrite_range(fs, ib, lb0, lb1);
	if (ret == 0 && lb0 <= lb1)
		ret = alloc_range(fs, ib, lb0, lb1);
	if (ret == 0)
		ret = fs_file_set_size(
		    fs, ib, !keep && end > di->size ? end : di->size);
	return ret;
}

/*
 * Move every extent at or after file block @from by @n blocks: down
 * (@up == 0; the caller freed [from - n, from)) in increasing key order,
 * or up in decreasing order, so that a moved extent never meets one not
 * moved yet. SHIFT_BATCH extents per transaction.
 */
static int shift_extents(struct fs *fs, struct fs_buf *ib, uint64_t from,
			 uint64_t n, int up)
{
	uint64_t cur = up ? FS_LB_END - 1 : from, key, hole_end;
	struct fs_btree bt;
	struct fs_tx *tx;
	struct fs_ext e;
	unsigned batch, credits;
	int ret = 0, done = 0;

	while (!done) {
		fs_ext_tree(fs, ib, &bt);
		batch = batch_of(fs, 2 * fs_btree_credits(&bt), &credits);
		ret = fs_tx_begin(fs, credits, &tx);
		if (ret < 0)
			return ret;
		ret = fs_tx_write(tx, ib);
		for (unsigned i = 0; ret == 0 && !done && i < batch; i++) {
			ret = up ? fs_btree_lookup_le(&bt, cur, &key, NULL, 0,
						      NULL)
				 : fs_btree_next(&bt, cur, &key, NULL, 0, NULL);
			if (ret == -ENOENT || (ret == 0 && up && key < from)) {
				done = 1;
				ret = 0;
				break;
			}
			if (ret == 0)
				ret = fs_ext_map(&bt, key, &e, &hole_end);
			if (ret == 0)
				ret = fs_ext_move(tx, &bt, &e,
						  up ? key + n : key - n);
			done = up && key == from;
			cur = up ? key - 1 : key + 1;
		}
		if (fs_tx_end(tx) < 0 && ret == 0)
			ret = -EIO;
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* The end (file block) of the last extent, 0 if none. */
static int last_block(struct fs *fs, struct fs_buf *ib, uint64_t *end)
{
	struct fs_btree bt;
	uint64_t key, hole_end;
	struct fs_ext e;
	int ret;

	fs_ext_tree(fs, ib, &bt);
	ret = fs_btree_lookup_le(&bt, FS_LB_END - 1, &key, NULL, 0, NULL);
	if (ret == -ENOENT) {
		*end = 0;
		return 0;
	}
	if (ret == 0)
		ret = fs_ext_map(&bt, key, &e, &hole_end);
	if (ret == 0)
		*end = e.lb + e.len;
	return ret;
}

static int collapse(struct fs *fs, struct fs_buf *ib, uint64_t off,
		    uint64_t len)
{
	struct fs_dinode *di = fs_di(ib);
	uint64_t size = di->size;
	int ret;

	if (off % BS != 0 || len % BS != 0 || off + len >= size)
		return -EINVAL;
	if (di->fmt != FS_FMT_EXTENTS) /* inline: size < one block */
		return -EUCLEAN;
	fs_alloc_resv_drop(fs, ib->blkno);
	ret = fs_file_unmap(fs, ib, off / BS, (off + len) / BS);
	if (ret == 0)
		ret = shift_extents(fs, ib, (off + len) / BS, len / BS, 0);
	if (ret == 0)
		ret = fs_file_set_size(fs, ib, size - len);
	return ret;
}

static int insert(struct fs *fs, struct fs_buf *ib, uint64_t off, uint64_t len)
{
	struct fs_dinode *di = fs_di(ib);
	uint64_t size = di->size, end;
	struct fs_btree bt;
	struct fs_tx *tx;
	int ret;

	if (off % BS != 0 || len % BS != 0 || off >= size)
		return -EINVAL;
	if (len > FS_FILE_MAX - size)
		return -EFBIG;
	if (di->fmt == FS_FMT_INLINE && (ret = fs_file_to_extents(fs, ib)) < 0)
		return ret;
	if (di->fmt != FS_FMT_EXTENTS)
		return -EUCLEAN;
	ret = last_block(fs, ib, &end);
	if (ret == 0 && end + len / BS > FS_LB_END)
		ret = -EFBIG; /* preallocated blocks would move past it */
	if (ret < 0)
		return ret;
	fs_alloc_resv_drop(fs, ib->blkno);
	fs_ext_tree(fs, ib, &bt);
	ret = fs_tx_begin(fs, 1 + 2 * fs_btree_credits(&bt), &tx);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, ib);
	if (ret == 0)
		ret = fs_ext_split(tx, &bt, off / BS);
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	if (ret == 0)
		ret = shift_extents(fs, ib, off / BS, len / BS, 1);
	if (ret == 0)
		ret = fs_file_set_size(fs, ib, size + len);
	return ret;
}

/* mode 0 / KEEP_SIZE */
static int prealloc(struct fs *fs, struct fs_buf *ib, uint64_t off,
		    uint64_t end, int keep)
{
	struct fs_dinode *di = fs_di(ib);
	int ret;

	if (di->fmt == FS_FMT_INLINE && end <= FS_INODE_INLINE_SIZE) {
		/* the inline area is already reserved */
		if (!keep && end > di->size)
			return fs_file_set_size(fs, ib, end);
		return 0;
	}
	if (di->fmt == FS_FMT_INLINE && (ret = fs_file_to_extents(fs, ib)) < 0)
		return ret;
	if (di->fmt != FS_FMT_EXTENTS)
		return -EUCLEAN;
	ret = alloc_range(fs, ib, off / BS, (end + BS - 1) / BS);
	if (ret == 0 && !keep && end > di->size)
		ret = fs_file_set_size(fs, ib, end);
	return ret;
}

/* The errno of a mode no case of fs_file_fallocate took: the VFS's for
 * combinations it refuses, else "not supported". */
static int bad_mode(int mode)
{
	if ((mode & FALLOC_FL_PUNCH_HOLE) && (mode & FALLOC_FL_ZERO_RANGE))
		return -EOPNOTSUPP;
	if (mode & (FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE))
		return -EINVAL; /* combined with another flag */
	return -EOPNOTSUPP;
}

int fs_file_fallocate(struct fs *fs, struct fs_inode *n, struct fs_buf *ib,
		      int mode, uint64_t off, uint64_t len)
{
	const int keep = FALLOC_FL_KEEP_SIZE;
	uint64_t end;

	FS_ASSERT_HELD(fs, ib->blkno, FS_IL_EX);
	fs_range_wait_all(fs, n);

	if (len == 0)
		return -EINVAL;
	if (off >= FS_FILE_MAX || len > FS_FILE_MAX - off)
		return -EFBIG;
	end = off + len;
	switch (mode) {
	case 0:
	case FALLOC_FL_KEEP_SIZE:
		return prealloc(fs, ib, off, end, mode & keep);
	case FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE:
		return punch(fs, ib, off, end);
	case FALLOC_FL_ZERO_RANGE:
	case FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE:
		return zero_range(fs, ib, off, end, mode & keep);
	case FALLOC_FL_COLLAPSE_RANGE:
		return collapse(fs, ib, off, len);
	case FALLOC_FL_INSERT_RANGE:
		return insert(fs, ib, off, len);
	default:
		return bad_mode(mode);
	}
}
/* ---- lseek ---- */

int fs_file_seek(struct fs *fs, struct fs_buf *ib, uint64_t off, int data,
		 uint64_t *out)
{
	struct fs_dinode *di = fs_di(ib);
	struct fs_btree bt;
	uint64_t lb, pos;
	int ret;

	FS_ASSERT_HELD(fs, ib->blkno, FS_IL_SH);
	if (off >= di->size)
		return -ENXIO;
	if (di->fmt == FS_FMT_INLINE) {
		*out = data ? off : di->size;
		return 0;
	}
	if (di->fmt != FS_FMT_EXTENTS)
		return -EUCLEAN;
	fs_ext_tree(fs, ib, &bt);
	ret = fs_ext_seek(&bt, off / BS, data, &lb);
	if (ret < 0)
		return ret;
	pos = lb * BS > off ? lb * BS : off;
	if (data && pos >= di->size)
		return -ENXIO;
	*out = pos < di->size ? pos : di->size;
	return 0;
}
