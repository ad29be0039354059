/*
 * fs_refcount.c — shared extents (reflink): refcount trees and the clone
 * operation, after OCFS2's refcount trees.
 *
 * A refcount tree is a B+tree rooted in an FS_BT_REFCOUNT block, keyed by
 * physical block, whose records {len, count} say that each block of
 * [key, key + len) is mapped by `count` (>= 2) extents. Every inode that
 * shares blocks names the tree in its refcount_blk; the root counts its
 * users. A file's extent that may share its blocks carries FS_EXT_SHARED:
 * for its blocks the tree is authoritative (no record: the extent is the
 * block's only user). Blocks of extents without the flag are never in a
 * tree. Two files can share blocks only if they use the same tree
 * (fs_refc_attach joins a file without a tree to the other's; two files
 * with different trees cannot be cloned into each other: -EOPNOTSUPP,
 * copy_file_range then copies the data).
 *
 * Every change works on a "run": blocks of one extent with one count
 * (fs_refc_count finds the run at a block), so one change is at most
 * three tree operations (fs_refc_credits):
 *  - clone (fs_refc_clone): per run of the source, in one transaction:
 *    the source's piece gets FS_EXT_SHARED, the run's count goes up by
 *    one (a block without a record gets a record of 2), the destination
 *    maps the same blocks with FS_EXT_SHARED;
 *  - a file dropping a run (truncate, punch, unlink: fs_file_unmap)
 *    takes the count down by one and frees the blocks whose count was 1;
 *  - a write into a run with count >= 2 copies it first (copy on write,
 *    fs_file.c): new blocks, the old ones' count down by one.
 * Flags other than SHARED are per file: a clone copies UNWRITTEN, and
 * ZERO_RANGE may turn one file's shared extent unwritten without
 * touching the other's view.
 *
 * Locking: a tree is shared by every file of its sharing group, so
 * ns->refc_lock (fs_ilock.h 1c) protects every tree's blocks: held with
 * the files' inode locks exclusive for every change, from before the
 * transaction (a count read and the change made from it stay atomic).
 */
#include "fusefs/namespace/fs_ns.h"

#include <errno.h>
#include <string.h>

#define BS ((uint64_t)FS_BLOCK_SIZE)

static struct fs_refcount_blk *rc_blk(struct fs_buf *rb)
{
	return (struct fs_refcount_blk *)rb->data;
}

static void rc_tree(struct fs *fs, struct fs_buf *rb, struct fs_btree *bt)
{
	fs_btree_init(bt, fs, rb, FS_BTREE_NODE_OFF, FS_BTREE_NODE_SIZE,
		      rb->blkno);
}

int fs_refc_enabled(struct fs *fs)
{
	return (fs->sb.feature_incompat & FS_FEATURE_INCOMPAT_REFLINK) != 0;
}

int fs_refc_root(struct fs *fs, struct fs_buf *ib, struct fs_buf **rb)
{
	uint64_t blk = fs_di(ib)->refcount_blk;

	if (blk == 0)
		return -EUCLEAN; /* a shared extent without a tree */
	return fs_buf_read(fs, blk, FS_BT_REFCOUNT, rb);
}

unsigned fs_refc_credits(struct fs *fs, struct fs_buf *ib)
{
	struct fs_btree bt;
	struct fs_buf *rb;
	unsigned c;

	if (fs_di(ib)->refcount_blk == 0 || fs_refc_root(fs, ib, &rb) < 0)
		return 0;
	rc_tree(fs, rb, &bt);
	c = 1 + 3 * fs_btree_credits(&bt) + FS_ALLOC_CREDITS(fs);
	fs_buf_put(rb);
	return c;
}

int fs_refc_count(struct fs *fs, struct fs_buf *rb, uint64_t phys, uint32_t max,
		  uint32_t *count, uint32_t *run)
{
	struct fs_refcount_val v;
	struct fs_btree bt;
	uint64_t key, end;
	size_t vlen;
	int ret;

	rc_tree(fs, rb, &bt);
	ret = fs_btree_lookup_le(&bt, phys, &key, &v, sizeof(v), &vlen);
	if (ret == 0 && (vlen != sizeof(v) || v.len == 0 || v.count < 2))
		return -EUCLEAN;
	if (ret == 0 && key + v.len > phys) {
		*count = v.count;
		end = key + v.len;
	} else if (ret == 0 || ret == -ENOENT) {
		*count = 1;
		ret = fs_btree_next(&bt, phys, &end, NULL, 0, NULL);
		if (ret == -ENOENT)
			end = UINT64_MAX;
		else if (ret < 0)
			return ret;
	} else {
		return ret;
	}
	*run = end - phys < max ? (uint32_t)(end - phys) : max;
	return 0;
}

static int rc_put(struct fs_tx *tx, struct fs_btree *bt, uint64_t key,
		  uint64_t len, uint32_t count, int insert)
{
	struct fs_refcount_val v = {.len = (uint32_t)len, .count = count};

	if (insert)
		return fs_btree_insert(tx, bt, key, &v, sizeof(v));
	return fs_btree_update(tx, bt, key, &v, sizeof(v));
}

/*
 * Give the run [phys, phys + len) (inside one record, or a gap: count
 * @count as fs_refc_count said) the count @count + @delta: the record is
 * split around it; a count of 1 has no record.
 */
static int rc_change(struct fs_tx *tx, struct fs_buf *rb, uint64_t phys,
		     uint32_t len, uint32_t count, int delta)
{
	struct fs_refcount_val v;
	struct fs_btree bt;
	uint64_t key, end;
	uint32_t now = count + (uint32_t)delta;
	int ret;

	rc_tree(fs_tx_fs(tx), rb, &bt);
	ret = fs_tx_write(tx, rb);
	if (ret < 0)
		return ret;
	if (count == 1) /* a gap: a new record (delta > 0) */
		return rc_put(tx, &bt, phys, len, now, 1);
	ret = fs_btree_lookup_le(&bt, phys, &key, &v, sizeof(v), NULL);
	if (ret < 0)
		return ret;
	end = key + v.len;
	if (phys < key || phys + len > end || v.count != count)
		return -EUCLEAN;
	if (phys > key) /* the head keeps the old count */
		ret = rc_put(tx, &bt, key, phys - key, count, 0);
	else
		ret = fs_btree_delete(tx, &bt, key);
	if (ret == 0 && now >= 2)
		ret = rc_put(tx, &bt, phys, len, now, 1);
	if (ret == 0 && phys + len < end)
		ret = rc_put(tx, &bt, phys + len, end - phys - len, count, 1);
	return ret;
}

int fs_refc_dec(struct fs_tx *tx, struct fs_buf *rb, uint64_t phys,
		uint32_t len, uint32_t count)
{
	if (count == 1) /* its last user: the blocks are free */
		return fs_free(tx, phys, len);
	return rc_change(tx, rb, phys, len, count, -1);
}

/* ---- attaching inodes to a tree ---- */

unsigned fs_refc_attach_credits(struct fs *fs)
{
	/* a new root block, its tree, two inodes */
	return 4 + FS_ALLOC_CREDITS(fs);
}

static int rc_new(struct fs_tx *tx, struct fs_buf *near, uint64_t *blk)
{
	struct fs_btree bt;
	struct fs_buf *rb;
	uint32_t len;
	int ret;

	ret = fs_alloc(tx, near->blkno, 1, 1, blk, &len);
	if (ret < 0)
		return ret;
	ret = fs_buf_new(tx, *blk, FS_BT_REFCOUNT, &rb);
	if (ret < 0) {
		fs_free(tx, *blk, 1);
		return ret;
	}
	rc_blk(rb)->users = 0;
	rc_tree(fs_tx_fs(tx), rb, &bt);
	ret = fs_btree_create(tx, &bt);
	fs_buf_put(rb);
	return ret;
}

/* @ib starts using tree @blk. */
static int rc_join(struct fs_tx *tx, struct fs_buf *ib, uint64_t blk)
{
	struct fs_buf *rb;
	int ret;

	if (fs_di(ib)->refcount_blk == blk)
		return 0;
	ret = fs_buf_read(fs_tx_fs(tx), blk, FS_BT_REFCOUNT, &rb);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, rb);
	if (ret == 0)
		ret = fs_tx_write(tx, ib);
	if (ret == 0) {
		rc_blk(rb)->users++;
		fs_di(ib)->refcount_blk = blk;
	}
	fs_buf_put(rb);
	return ret;
}

int fs_refc_attach(struct fs_tx *tx, struct fs_buf *a, struct fs_buf *b)
{
	uint64_t ta = fs_di(a)->refcount_blk, tb = fs_di(b)->refcount_blk;
	uint64_t t = ta != 0 ? ta : tb;
	int ret = 0;

	if (ta != 0 && tb != 0 && ta != tb)
		return -EOPNOTSUPP; /* two sharing groups */
	if (t == 0)
		ret = rc_new(tx, a, &t);
	if (ret == 0)
		ret = rc_join(tx, a, t);
	if (ret == 0)
		ret = rc_join(tx, b, t);
	return ret;
}

int fs_refc_detach(struct fs_tx *tx, struct fs_buf *ib)
{
	struct fs_btree bt;
	struct fs_buf *rb;
	uint64_t blk = fs_di(ib)->refcount_blk;
	int ret;

	if (blk == 0)
		return 0;
	ret = fs_refc_root(fs_tx_fs(tx), ib, &rb);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, rb);
	if (ret == 0)
		ret = fs_tx_write(tx, ib);
	if (ret == 0 && rc_blk(rb)->users == 0)
		ret = -EUCLEAN;
	if (ret == 0) {
		fs_di(ib)->refcount_blk = 0;
		rc_blk(rb)->users--;
	}
	if (ret == 0 && rc_blk(rb)->users == 0) {
		/* its last user has no shared extent left: empty */
		rc_tree(fs_tx_fs(tx), rb, &bt);
		ret = fs_btree_destroy(tx, &bt);
		fs_buf_put(rb);
		return ret < 0 ? ret : fs_free(tx, blk, 1);
	}
	fs_buf_put(rb);
	return ret;
}

unsigned fs_refc_detach_credits(struct fs *fs)
{
	/* the root, the inode; freeing the (empty: a bare root) tree */
	return 3 + 2 * FS_ALLOC_CREDITS(fs);
}

/* ---- clone ---- */

/* Credits of one clone step: both inodes, the source piece's flags,
 * the run's count, the destination's new extent. */
static unsigned clone_credits(struct fs *fs, struct fs_buf *in,
			      struct fs_buf *out)
{
	struct fs_btree a, b;

	fs_ext_tree(fs, in, &a);
	fs_ext_tree(fs, out, &b);
	return 2 + fs_ext_convert_credits(&a) + fs_refc_credits(fs, in) +
	       fs_btree_credits(&b);
}

/* Share the first run of source block @lb (mapped by @e) with the
 * destination at @dlb: *got = blocks shared. */
static int clone_run(struct fs_tx *tx, struct fs_buf *in, struct fs_buf *out,
		     const struct fs_ext *e, uint64_t lb, uint64_t end,
		     uint64_t dlb, uint64_t *got)
{
	struct fs *fs = fs_tx_fs(tx);
	uint64_t phys = e->phys + (lb - e->lb), stop = e->lb + e->len;
	struct fs_btree src, dst;
	struct fs_ext d;
	struct fs_buf *rb;
	uint32_t count, run;
	int ret;

	ret = fs_refc_root(fs, in, &rb);
	if (ret < 0)
		return ret;
	if (stop > end)
		stop = end;
	ret = fs_refc_count(fs, rb, phys, (uint32_t)(stop - lb), &count, &run);
	fs_ext_tree(fs, in, &src);
	fs_ext_tree(fs, out, &dst);
	if (ret == 0 && !(e->flags & FS_EXT_SHARED))
		ret = fs_ext_set_flags(tx, &src, e, lb, lb + run,
				       e->flags | FS_EXT_SHARED);
	if (ret == 0)
		ret = rc_change(tx, rb, phys, run, count, 1);
	d = (struct fs_ext){dlb, phys, run, e->flags | FS_EXT_SHARED};
	if (ret == 0)
		ret = fs_ext_put(tx, &dst, &d, 1);
	if (ret == 0) {
		fs_di(out)->blocks += run;
		*got = run;
	}
	fs_buf_put(rb);
	return ret;
}

/* Share source blocks [lb, end) with the destination from @dlb (whose
 * range is unmapped), one run per transaction. */
static int clone_blocks(struct fs *fs, struct fs_buf *in, struct fs_buf *out,
			uint64_t lb, uint64_t end, uint64_t dlb)
{
	uint64_t hole_end, got = 0;
	struct fs_btree bt;
	struct fs_tx *tx;
	struct fs_ext e;
	int ret = 0;

	while (ret == 0 && lb < end) {
		fs_ext_tree(fs, in, &bt);
		ret = fs_ext_map(&bt, lb, &e, &hole_end);
		if (ret == -ENOENT) { /* holes stay holes */
			dlb += (hole_end < end ? hole_end : end) - lb;
			lb = hole_end;
			ret = 0;
			continue;
		}
		if (ret < 0)
			break;
		ret = fs_tx_begin(fs, clone_credits(fs, in, out), &tx);
		if (ret < 0)
			break;
		ret = fs_tx_write(tx, in);
		if (ret == 0)
			ret = fs_tx_write(tx, out);
		if (ret == 0)
			ret = clone_run(tx, in, out, &e, lb, end, dlb, &got);
		if (fs_tx_end(tx) < 0 && ret == 0)
			ret = -EIO;
		lb += got;
		dlb += got;
	}
	return ret;
}

/* Both files in one sharing group (their own transaction). */
static int clone_attach(struct fs *fs, struct fs_buf *in, struct fs_buf *out)
{
	struct fs_tx *tx;
	int ret;

	if (fs_di(in)->refcount_blk != 0 &&
	    fs_di(in)->refcount_blk == fs_di(out)->refcount_blk)
		return 0;
	ret = fs_tx_begin(fs, fs_refc_attach_credits(fs), &tx);
	if (ret < 0)
		return ret;
	ret = fs_refc_attach(tx, in, out);
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	return ret;
}

/*
 * The checks of Linux's generic_remap_checks: block-aligned offsets, a
 * length that is block-aligned or reaches the source's EOF (then the
 * destination range must reach its EOF too), inside the source, no
 * overlap within one file. *len 0 means "to the source's EOF".
 */
static int clone_check(const struct fs_dinode *si, const struct fs_dinode *di,
		       int same, uint64_t off_in, uint64_t off_out,
		       uint64_t *len)
{
	if (*len == 0)
		*len = off_in < si->size ? si->size - off_in : 0;
	if (off_in % BS != 0 || off_out % BS != 0 || off_in > si->size ||
	    *len > si->size - off_in)
		return -EINVAL;
	if (off_out >= FS_FILE_MAX || *len > FS_FILE_MAX - off_out)
		return -EFBIG;
	if (*len % BS != 0 &&
	    (off_in + *len != si->size || off_out + *len < di->size))
		return -EINVAL;
	if (same && off_in < off_out + *len && off_out < off_in + *len)
		return -EINVAL;
	return 0;
}

int fs_file_clone(struct fs *fs, struct fs_buf *in, struct fs_buf *out,
		  uint64_t off_in, uint64_t off_out, uint64_t len)
{
	uint64_t lb = off_in / BS, n;
	int ret;

	FS_ASSERT_HELD(fs, in->blkno, FS_IL_EX);
	FS_ASSERT_HELD(fs, out->blkno, FS_IL_EX);
	if (!fs_refc_enabled(fs))
		return -EOPNOTSUPP;
	ret = clone_check(fs_di(in), fs_di(out), in == out, off_in, off_out,
			  &len);
	if (ret < 0 || len == 0)
		return ret;
	if (fs_di(in)->fmt != FS_FMT_EXTENTS)
		return -EOPNOTSUPP; /* inline data has no block */
	if (fs_di(out)->fmt == FS_FMT_INLINE &&
	    (ret = fs_file_to_extents(fs, out)) < 0)
		return ret;
	if (fs_di(out)->fmt != FS_FMT_EXTENTS)
		return -EUCLEAN;
	n = (len + BS - 1) / BS;
	ret = clone_attach(fs, in, out);
	if (ret == 0)
		ret = fs_file_unmap(fs, out, off_out / BS, off_out / BS + n);
	if (ret == 0)
		ret = clone_blocks(fs, in, out, lb, lb + n, off_out / BS);
	if (ret == 0)
		ret = fs_file_set_size(fs, out,
				       off_out + len > fs_di(out)->size
					   ? off_out + len
					   : fs_di(out)->size);
	if (ret == 0)
		FS_NS_STAT_ADD(fs, clone_bytes, len);
	return ret;
}
