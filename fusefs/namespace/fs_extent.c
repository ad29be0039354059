/*
 * fs_extent.c — a regular file's extent map: the B+tree in the inode's
 * inline area whose key is the first logical block of an extent and
 * whose value is struct fs_extent_val {phys, len, flags} (FORMAT.md).
 *
 * Sections: lookup (fs_ext_map, the extent containing a block or the
 * hole around it), changes of one extent (fs_ext_put, fs_ext_set_flags
 * which splits an extent to give part of it other flags and merges the
 * result with its neighbours, fs_ext_split, fs_ext_move), and
 * fs_ext_seek (SEEK_DATA / SEEK_HOLE over the map).
 *
 * Extent flags: FS_EXT_UNWRITTEN marks blocks that are allocated to the
 * file but read as zeros (their device contents are stale: never read).
 * fallocate creates them; a write converts the blocks it covers with
 * fs_ext_set_flags in the transaction that maps the write (fs_file.c),
 * so the conversion commits together with — and, with data=ordered,
 * after — the data written there; ZERO_RANGE turns written blocks back
 * into unwritten ones.
 *
 * Invariants: extents never overlap; len > 0 and < 2^31; two neighbours
 * may be merge candidates (contiguous in the file and on the device,
 * same flags): fs_ext_set_flags merges what it creates, nothing else
 * relies on extents being merged.
 *
 * Locking: the file's inode lock (fs_ilock.h), shared for lookups and
 * fs_ext_seek, exclusive for changes (always inside a transaction handle
 * on the inode buffer).
 */
#include "fusefs/namespace/fs_ns.h"

#include <errno.h>

void fs_ext_tree(struct fs *fs, struct fs_buf *ib, struct fs_btree *bt)
{
	fs_btree_init(bt, fs, ib, FS_INODE_INLINE_OFF, FS_INODE_INLINE_SIZE,
		      ib->blkno);
}

int fs_ext_map(struct fs_btree *bt, uint64_t lb, struct fs_ext *e,
	       uint64_t *hole_end)
{
	struct fs_extent_val v;
	size_t vlen;
	uint64_t key;
	int ret;

	ret = fs_btree_lookup_le(bt, lb, &key, &v, sizeof(v), &vlen);
	if (ret < 0 && ret != -ENOENT)
		return ret;
	if (ret == 0) {
		if (vlen != sizeof(v) || v.len == 0)
			return -EUCLEAN;
		if (key + v.len > lb) {
			*e = (struct fs_ext){key, v.phys, v.len, v.flags};
			return 0;
		}
	}
	ret = fs_btree_next(bt, lb, &key, NULL, 0, NULL);
	if (ret < 0 && ret != -ENOENT)
		return ret;
	*hole_end = ret == 0 ? key : FS_LB_END;
	return -ENOENT;
}

int fs_ext_put(struct fs_tx *tx, struct fs_btree *bt, const struct fs_ext *e,
	       int insert)
{
	struct fs_extent_val v = {
	    .phys = e->phys, .len = e->len, .flags = e->flags};

	if (insert)
		return fs_btree_insert(tx, bt, e->lb, &v, sizeof(v));
	return fs_btree_update(tx, bt, e->lb, &v, sizeof(v));
}

/* Can @b follow @a as one extent? */
static int mergeable(const struct fs_ext *a, const struct fs_ext *b)
{
	return a->lb + a->len == b->lb && a->phys + a->len == b->phys &&
	       a->flags == b->flags &&
	       (uint64_t)a->len + b->len <= FS_EXT_LEN_MAX;
}

/* The extent ending right at @lb (prev) or starting at @lb (next), if
 * any: 1 found, 0 none, -errno. */
static int neighbour(struct fs_btree *bt, uint64_t lb, int next,
		     struct fs_ext *out)
{
	uint64_t hole_end;
	int ret;

	if (!next && lb == 0)
		return 0;
	ret = fs_ext_map(bt, next ? lb : lb - 1, out, &hole_end);
	if (ret == -ENOENT)
		return 0;
	if (ret < 0)
		return ret;
	return next ? out->lb == lb : out->lb + out->len == lb;
}

/* Write @e split at [a, b): its head (if @a is past its start) keeps
 * @e's key, then @mid, then @tail (if @b is before its end). */
static int put_split(struct fs_tx *tx, struct fs_btree *bt,
		     const struct fs_ext *e, uint64_t a, uint64_t b,
		     const struct fs_ext *mid, const struct fs_ext *tail)
{
	struct fs_ext head = *e;
	int ret;

	if (a > e->lb) {
		head.len = (uint32_t)(a - e->lb);
		ret = fs_ext_put(tx, bt, &head, 0);
		if (ret == 0)
			ret = fs_ext_put(tx, bt, mid, 1);
	} else {
		ret = fs_ext_put(tx, bt, mid, 0);
	}
	if (ret == 0 && b < e->lb + e->len)
		ret = fs_ext_put(tx, bt, tail, 1);
	return ret;
}

/*
 * Blocks [a, b) of extent @e take @flags: the extent is split in up to
 * three (head, middle, tail) and the middle merges with the previous
 * extent when it starts @e (or with the next one when it ends @e) if
 * they are mergeable. At most three tree operations
 * (fs_ext_convert_credits).
 */
int fs_ext_set_flags(struct fs_tx *tx, struct fs_btree *bt,
		     const struct fs_ext *e, uint64_t a, uint64_t b,
		     uint32_t flags)
{
	uint64_t end = e->lb + e->len;
	struct fs_ext mid = {a, e->phys + (a - e->lb), (uint32_t)(b - a),
			     flags};
	struct fs_ext tail = {b, e->phys + (b - e->lb), (uint32_t)(end - b),
			      e->flags};
	struct fs_ext nb;
	int ret;

	if (a < e->lb || b > end || a >= b)
		return -EINVAL;
	if (e->flags == flags)
		return 0;
	ret = a == e->lb ? neighbour(bt, a, 0, &nb) : 0;
	if (ret > 0 && mergeable(&nb, &mid)) {
		nb.len += mid.len;
		ret = fs_ext_put(tx, bt, &nb, 0);
		if (ret == 0)
			ret = fs_btree_delete(tx, bt, e->lb);
		if (ret == 0 && b < end)
			ret = fs_ext_put(tx, bt, &tail, 1);
		return ret;
	}
	if (ret < 0)
		return ret;
	ret = b == end ? neighbour(bt, b, 1, &nb) : 0;
	if (ret < 0)
		return ret;
	if (ret > 0 && mergeable(&mid, &nb)) {
		mid.len += nb.len;
		ret = fs_btree_delete(tx, bt, nb.lb);
		if (ret < 0)
			return ret;
	}
	return put_split(tx, bt, e, a, b, &mid, &tail);
}

int fs_ext_remap(struct fs_tx *tx, struct fs_btree *bt, const struct fs_ext *e,
		 uint64_t a, uint64_t b, uint64_t phys, uint32_t flags)
{
	uint64_t end = e->lb + e->len;
	struct fs_ext mid = {a, phys, (uint32_t)(b - a), flags};
	struct fs_ext tail = {b, e->phys + (b - e->lb), (uint32_t)(end - b),
			      e->flags};

	if (a < e->lb || b > end || a >= b)
		return -EINVAL;
	return put_split(tx, bt, e, a, b, &mid, &tail);
}

unsigned fs_ext_convert_credits(struct fs_btree *bt)
{
	return 3 * fs_btree_credits(bt);
}

int fs_ext_split(struct fs_tx *tx, struct fs_btree *bt, uint64_t lb)
{
	struct fs_ext e, tail;
	uint64_t hole_end;
	int ret;

	ret = fs_ext_map(bt, lb, &e, &hole_end);
	if (ret == -ENOENT || (ret == 0 && e.lb == lb))
		return 0;
	if (ret < 0)
		return ret;
	tail = (struct fs_ext){lb, e.phys + (lb - e.lb),
			       (uint32_t)(e.lb + e.len - lb), e.flags};
	e.len = (uint32_t)(lb - e.lb);
	ret = fs_ext_put(tx, bt, &e, 0);
	if (ret == 0)
		ret = fs_ext_put(tx, bt, &tail, 1);
	return ret;
}

int fs_ext_move(struct fs_tx *tx, struct fs_btree *bt, const struct fs_ext *e,
		uint64_t lb)
{
	struct fs_ext moved = *e;
	int ret;

	moved.lb = lb;
	ret = fs_btree_delete(tx, bt, e->lb);
	if (ret == 0)
		ret = fs_ext_put(tx, bt, &moved, 1);
	return ret;
}

int fs_ext_seek(struct fs_btree *bt, uint64_t lb, int data, uint64_t *out)
{
	uint64_t hole_end;
	struct fs_ext e;
	int ret;

	while (lb < FS_LB_END) {
		ret = fs_ext_map(bt, lb, &e, &hole_end);
		if (ret < 0 && ret != -ENOENT)
			return ret;
		if (ret == 0 && !(e.flags & FS_EXT_UNWRITTEN)) {
			if (data)
				break;
			lb = e.lb + e.len;
		} else if (!data) {
			break;
		} else {
			lb = ret == 0 ? e.lb + e.len : hole_end;
		}
	}
	if (data && lb >= FS_LB_END)
		return -ENXIO;
	*out = lb;
	return 0;
}
