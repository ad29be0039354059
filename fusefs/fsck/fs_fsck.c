/*
 * fs_fsck.c — the consistency check of a ucfs image (fs_fsck.h lists
 * what is checked). It records what a repair needs (per-inode names and
 * subdirectories, directory entry counts, the reachable blocks with and
 * without the orphans) and, with opts.repair, ends in fsck_repair()
 * (fs_fsck_repair.c); the journal overlay is fs_fsck_journal.c.
 *
 * Sections: reporting / block and inode maps / superblock and fixed
 * metadata / resource groups / B+tree walk / inodes (files, symlinks,
 * xattr blocks) / directories / link counts and orphans / bitmaps against
 * reachability / entry point.
 *
 * The walk is breadth-first over directories with an explicit queue (no
 * recursion over the namespace; B+tree recursion is bounded by
 * FS_BTREE_MAX_DEPTH). Every block reached is marked in `reach`; a block
 * reached a second time is marked in `dup` and reported, so a block
 * claimed by two owners (two files, a file and a tree node, ...) is found
 * whatever the order.
 *
 * fsck checks that each directory entry's key lies in [hash, hash + 15]
 * (fs_dirkey_hash() in fs_format.c, shared with fs_dir.c), the range
 * lookups search.
 */
#include "fusefs/fsck/fs_fsck_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_REPORT_DEFAULT 20


/* ---- reporting -------------------------------------------------------- */

static void vreport(struct fsck *ck, const char *prefix, const char *fmt,
		    va_list ap)
{
	fputs(prefix, ck->o->out);
	vfprintf(ck->o->out, fmt, ap);
	fputc('\n', ck->o->out);
}

void fsck_err(struct fsck *ck, unsigned kind, const char *fmt, ...)
{
	unsigned cap = ck->o->max_report ? ck->o->max_report
					 : MAX_REPORT_DEFAULT;
	va_list ap;

	ck->res->errors++;
	if (kind >= K_NKINDS)
		kind = K_META;
	if (++ck->reported[kind] > cap || ck->o->out == NULL)
		return;
	va_start(ap, fmt);
	vreport(ck, "ERROR: ", fmt, ap);
	va_end(ap);
}

void fsck_note(struct fsck *ck, const char *fmt, ...)
{
	va_list ap;

	if (ck->o->out == NULL)
		return;
	va_start(ap, fmt);
	vreport(ck, "note: ", fmt, ap);
	va_end(ap);
}

#define ULL(x) ((unsigned long long)(x))

/* ---- block and inode maps --------------------------------------------- */

/* Mark @b reachable, owned by @what (for messages). Returns 0, or -1 if
 * out of range or already reachable (both reported). */
static int mark(struct fsck *ck, uint64_t b, const char *what, uint64_t owner)
{
	if (b >= ck->nblocks) {
		fsck_err(ck, K_META, "%s of inode %llu: block %llu is past "
			 "the end of the filesystem (%llu blocks)", what,
			 ULL(owner), ULL(b), ULL(ck->nblocks));
		return -1;
	}
	if (fsck_bit_get(ck->reach, b)) {
		if (!fsck_bit_get(ck->dup, b)) {
			fsck_bit_set(ck->dup, b);
			ck->res->doubly_used++;
		}
		fsck_err(ck, K_DUP, "block %llu is used twice (again as %s "
			 "of inode %llu)", ULL(b), what, ULL(owner));
		return -1;
	}
	fsck_bit_set(ck->reach, b);
	ck->res->blocks_used++;
	return 0;
}

void fsck_mark_meta(struct fsck *ck, uint64_t b, const char *what)
{
	mark(ck, b, what, 0);
}

/* 1 if @b is a data block of some rgroup (not a header or bitmap). */
static int in_data_area(const struct fsck *ck, uint64_t b)
{
	uint64_t g, off;

	if (b < ck->sb.rgrp_start || b >= ck->nblocks)
		return 0;
	g = (b - ck->sb.rgrp_start) / ck->sb.rgrp_blocks;
	if (g >= ck->sb.rgrp_count)
		return 0;
	off = b - fs_rgrp_blk(&ck->sb, (uint32_t)g);
	return off >= 1 + fs_rgrp_nbitmaps(fs_rgrp_len(&ck->sb,
							(uint32_t)g));
}

/* The record of @ino, created if absent (NULL: out of memory). */
static struct fsck_ino *ino_get(struct fsck *ck, uint64_t ino)
{
	return fsck_tab_get(&ck->inos, ino);
}

static int queue_push(struct fsck *ck, uint64_t ino)
{
	if (ck->q_tail == ck->q_cap) {
		size_t cap = ck->q_cap ? ck->q_cap * 2 : 1024;
		uint64_t *q = realloc(ck->queue, cap * sizeof(*q));

		if (q == NULL)
			return -ENOMEM;
		ck->queue = q;
		ck->q_cap = cap;
	}
	ck->queue[ck->q_tail++] = ino;
	return 0;
}

/* ---- superblock and fixed metadata ------------------------------------ */

/* 1 if @sb, read from @blkno, is a usable superblock; 0 (reported). */
static int sb_usable(struct fsck *ck, const struct fs_sb *sb,
		     uint64_t blkno, const char *name)
{
	char why[200] = "";

	if (fs_blk_verify(sb, FS_BT_SB, blkno) == 0 &&
	    fs_sb_check(sb, ck->dev_blocks, 0, why, sizeof(why)) == 0)
		return 1;
	fsck_err(ck, blkno == FS_SB_BLK ? K_SB : K_SBBACKUP,
		 "%s (block %llu) is bad: %s", name, ULL(blkno),
		 why[0] ? why : "checksum, magic, type or block number "
				"mismatch");
	return 0;
}

static int check_sb(struct fsck *ck)
{
	struct fs_sb *sb = ck->buf, *bk = ck->buf2;
	int pri_ok, bk_ok;

	if (fsck_read(ck, FS_SB_BLK, sb) < 0 ||
	    fsck_read(ck, FS_SB_BACKUP_BLK, bk) < 0)
		return -EIO;
	pri_ok = sb_usable(ck, sb, FS_SB_BLK, "superblock");
	bk_ok = sb_usable(ck, bk, FS_SB_BACKUP_BLK, "backup superblock");
	if (pri_ok && bk_ok &&
	    memcmp((char *)sb + sizeof(sb->hdr), (char *)bk + sizeof(bk->hdr),
		   FS_BLOCK_SIZE - sizeof(sb->hdr)) != 0)
		fsck_err(ck, K_SBBACKUP, "backup superblock (block 1) differs "
			 "from the superblock (block 0)");
	if (!pri_ok && !bk_ok)
		return -EUCLEAN;
	if (!pri_ok)
		fsck_note(ck, "checking with the backup superblock");
	memcpy(&ck->sb, pri_ok ? (void *)sb : (void *)bk, sizeof(ck->sb));
	ck->nblocks = ck->sb.total_blocks;
	return 0;
}

static void check_fixed(struct fsck *ck)
{
	const struct fs_slotmap *sm = ck->buf;

	for (uint64_t b = 0; b < ck->sb.rgrp_start; b++)
		mark(ck, b, "fixed metadata", 0);
	if (fsck_read(ck, FS_SLOTMAP_BLK, ck->buf) < 0 ||
	    fs_blk_verify(sm, FS_BT_SLOTMAP, FS_SLOTMAP_BLK) < 0)
		fsck_err(ck, K_META, "slot map (block 2) is bad");
	else if (sm->slot_count != ck->sb.slot_count)
		fsck_err(ck, K_META, "slot map (block 2): slot_count %u, "
			 "superblock says %u", sm->slot_count,
			 ck->sb.slot_count);
	for (unsigned s = 0; s < ck->sb.slot_count; s++) {
		uint64_t hb = fs_heartbeat_blk(s), si = fs_slotinfo_blk(s);

		if (fsck_read(ck, hb, ck->buf) < 0 ||
		    fs_blk_verify(ck->buf, FS_BT_HEARTBEAT, hb) < 0)
			fsck_err(ck, K_META, "slot %u: heartbeat block %llu "
				 "is bad", s, ULL(hb));
		if (fsck_read(ck, si, ck->buf) < 0 ||
		    fs_blk_verify(ck->buf, FS_BT_SLOTINFO, si) < 0)
			fsck_err(ck, K_META, "slot %u: slotinfo block %llu "
				 "is bad", s, ULL(si));
	}
}

/* ---- resource groups -------------------------------------------------- */

/* Header + bitmap blocks of group @g: check and mark them. */
static void check_rgrp_meta(struct fsck *ck, uint32_t g)
{
	const struct fs_rgrp_hdr *rh = ck->buf;
	uint64_t start = fs_rgrp_blk(&ck->sb, g);
	uint32_t len = fs_rgrp_len(&ck->sb, g);
	uint32_t nbm = fs_rgrp_nbitmaps(len);

	for (uint32_t i = 0; i <= nbm; i++)
		mark(ck, start + i, "rgroup metadata", 0);
	if (fsck_read(ck, start, ck->buf) < 0 ||
	    fs_blk_verify(rh, FS_BT_RGRP, start) < 0) {
		fsck_err(ck, K_RGRP, "rgroup %u: header block %llu is bad", g,
			 ULL(start));
		return;
	}
	if (rh->index != g || rh->start != start || rh->length != len ||
	    rh->bitmaps != nbm)
		fsck_err(ck, K_RGRP, "rgroup %u: header block %llu says "
			 "index %u start %llu length %u bitmaps %u, expected "
			 "%u %llu %u %u", g, ULL(start), rh->index,
			 ULL(rh->start), rh->length, rh->bitmaps, g,
			 ULL(start), len, nbm);
	for (uint32_t i = 1; i <= nbm; i++)
		if (fsck_read(ck, start + i, ck->buf2) < 0 ||
		    fs_blk_verify(ck->buf2, FS_BT_BITMAP, start + i) < 0)
			fsck_err(ck, K_BITMAP, "rgroup %u: bitmap block %llu "
				 "is bad", g, ULL(start + i));
}

/* ---- B+tree walk ------------------------------------------------------ */

typedef int (*leaf_cb)(struct fsck *ck, void *arg, uint64_t key,
		       const uint8_t *val, size_t len);

struct tree_ctx {
	struct fsck *ck;
	uint64_t owner;
	const char *what;	/* "extent tree", "directory" */
	leaf_cb cb;
	void *arg;
	int bad;		/* structure error found */
};

static int walk_node(struct tree_ctx *t, const uint8_t *node, size_t size,
		     int want_level, uint64_t lo, uint64_t hi, int has_hi,
		     uint64_t where);

/* Check node header and key order; returns 0 or -1 (reported). */
static int node_sane(struct tree_ctx *t, const struct fs_btree_nhdr *nh,
		     size_t size, int want_level, uint64_t where)
{
	size_t need = sizeof(*nh) + (size_t)nh->nkeys * 16;

	if (nh->magic != FS_BTREE_NMAGIC || nh->level >= FS_BTREE_MAX_DEPTH ||
	    (want_level >= 0 && nh->level != want_level) || need > size ||
	    (nh->level == 0 && (nh->free_end < need || nh->free_end > size)) ||
	    (nh->level > 0 && nh->nkeys == 0)) {
		fsck_err(t->ck, K_TREE, "%s of inode %llu: bad node in block "
			 "%llu (magic %#x level %u nkeys %u free_end %u)",
			 t->what, ULL(t->owner), ULL(where), nh->magic,
			 nh->level, nh->nkeys, nh->free_end);
		t->bad = 1;
		return -1;
	}
	return 0;
}

static int walk_leaf(struct tree_ctx *t, const uint8_t *node, size_t size,
		     uint64_t lo, uint64_t hi, int has_hi, uint64_t where)
{
	const struct fs_btree_nhdr *nh = (const void *)node;
	const struct fs_btree_leaf_slot *sl = (const void *)(nh + 1);
	uint64_t prev = 0;

	for (unsigned i = 0; i < nh->nkeys; i++) {
		uint64_t k = sl[i].key;
		size_t off = sl[i].off, len = sl[i].len;
		int ret;

		if ((i > 0 && k <= prev) || k < lo || (has_hi && k >= hi) ||
		    off < nh->free_end || off + len > size ||
		    len > FS_BTREE_VAL_MAX) {
			fsck_err(t->ck, K_TREE, "%s of inode %llu: block %llu "
				 "slot %u: key %llu (bounds %llu..%llu) value "
				 "at %zu len %zu out of order or range",
				 t->what, ULL(t->owner), ULL(where), i, ULL(k),
				 ULL(lo), ULL(hi), off, len);
			t->bad = 1;
			return 0; /* reported: not an operational error */
		}
		prev = k;
		ret = t->cb(t->ck, t->arg, k, node + off, len);
		if (ret < 0)
			return ret;
	}
	return 0;
}

static int walk_child(struct tree_ctx *t, uint64_t child, int level,
		      uint64_t lo, uint64_t hi, int has_hi)
{
	struct fsck *ck = t->ck;
	const struct fs_btree_blk *bb;
	uint8_t *blk;
	int ret;

	if (mark(ck, child, "B+tree node", t->owner) < 0 ||
	    !in_data_area(ck, child)) {
		fsck_err(ck, K_TREE, "%s of inode %llu: child block %llu "
			 "invalid", t->what, ULL(t->owner), ULL(child));
		t->bad = 1;
		return 0;
	}
	blk = bd_buf_alloc(FS_BLOCK_SIZE);
	if (blk == NULL)
		return -ENOMEM;
	bb = (const void *)blk;
	if (fsck_read(ck, child, blk) < 0 ||
	    fs_blk_verify(blk, FS_BT_BTREE, child) < 0) {
		fsck_err(ck, K_TREE, "%s of inode %llu: node block %llu is "
			 "bad (checksum, type or block number)", t->what,
			 ULL(t->owner), ULL(child));
		t->bad = 1;
		ret = 0;
	} else if (bb->owner != t->owner) {
		fsck_err(ck, K_TREE, "%s of inode %llu: node block %llu "
			 "belongs to inode %llu", t->what, ULL(t->owner),
			 ULL(child), ULL(bb->owner));
		t->bad = 1;
		ret = 0;
	} else {
		ret = walk_node(t, blk + FS_BTREE_NODE_OFF, FS_BTREE_NODE_SIZE,
				level, lo, hi, has_hi, child);
	}
	free(blk);
	return ret;
}

static int walk_node(struct tree_ctx *t, const uint8_t *node, size_t size,
		     int want_level, uint64_t lo, uint64_t hi, int has_hi,
		     uint64_t where)
{
	const struct fs_btree_nhdr *nh = (const void *)node;
	const struct fs_btree_ptr *p = (const void *)(nh + 1);

	if (node_sane(t, nh, size, want_level, where) < 0)
		return 0;
	if (nh->level == 0)
		return walk_leaf(t, node, size, lo, hi, has_hi, where);
	for (unsigned i = 0; i < nh->nkeys; i++) {
		uint64_t klo = i == 0 ? lo : p[i].key;
		uint64_t khi = i + 1 < nh->nkeys ? p[i + 1].key : hi;
		int khas = i + 1 < nh->nkeys ? 1 : has_hi;
		int ret;

		/* key 0 is minus infinity (FORMAT.md): its stored value is
		 * no bound and may exceed keys in child 0 and key 1 */
		if ((i > 1 && p[i].key <= p[i - 1].key) ||
		    (i > 0 && (p[i].key < lo || (has_hi && p[i].key >= hi)))) {
			fsck_err(t->ck, K_TREE, "%s of inode %llu: block "
				 "%llu: internal keys out of order", t->what,
				 ULL(t->owner), ULL(where));
			t->bad = 1;
			return 0;
		}
		ret = walk_child(t, p[i].child, nh->level - 1, klo, khi,
				 khas);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Walk the tree rooted in @di's inline area. 0 or -ENOMEM/-EIO. */
static int walk_tree(struct fsck *ck, const struct fs_dinode *di,
		     const char *what, leaf_cb cb, void *arg, int *bad)
{
	struct tree_ctx t = {
		.ck = ck, .owner = di->hdr.blkno, .what = what, .cb = cb,
		.arg = arg,
	};
	int ret = walk_node(&t, di->inline_area, FS_INODE_INLINE_SIZE, -1, 0,
			    0, 0, di->hdr.blkno);

	*bad = t.bad;
	return ret;
}

/* ---- inodes ----------------------------------------------------------- */

/* One more shared extent maps block @b: the first one marks it used. */
static void shared_ref(struct fsck *ck, uint64_t b, uint64_t ino)
{
	struct fsck_shared *r = fsck_tab_get(&ck->shared, b);

	if (r == NULL) {
		fsck_err(ck, K_REFCOUNT,
			 "out of memory counting shared "
			 "blocks");
		return;
	}
	if (r->refs++ == 0)
		mark(ck, b, "shared file data", ino);
}

struct ext_ctx {
	uint64_t ino;
	int reg;		/* a regular file (else a symlink) */
	int tree;		/* it names a refcount tree */
	uint64_t blocks;	/* sum of extent lengths */
	uint64_t next_lblk;	/* end of the previous extent */
};

static int ext_cb(struct fsck *ck, void *arg, uint64_t key,
		  const uint8_t *val, size_t len)
{
	struct ext_ctx *x = arg;
	struct fs_extent_val e;

	if (len != sizeof(e)) {
		fsck_err(ck, K_INODE, "inode %llu: extent at block %llu has a "
			 "%zu-byte value", ULL(x->ino), ULL(key), len);
		return 0;
	}
	memcpy(&e, val, sizeof(e));
	if (e.len == 0 || key < x->next_lblk || key + e.len < key ||
	    e.flags & ~(FS_EXT_UNWRITTEN | FS_EXT_SHARED)) {
		fsck_err(ck, K_INODE, "inode %llu: extent at file block %llu "
			 "(len %u, flags %#x) is empty, overlaps the previous"
			 " one or has unknown flags", ULL(x->ino), ULL(key),
			 e.len, e.flags);
		return 0;
	}
	/* only fallocate makes them, and only on regular files: a
	 * symlink's target must be written (its blocks are still its own) */
	if ((e.flags & FS_EXT_SHARED) && !x->tree)
		fsck_err(ck, K_REFCOUNT,
			 "inode %llu: shared extent at file "
			 "block %llu but no refcount tree",
			 ULL(x->ino), ULL(key));
	if ((e.flags & FS_EXT_UNWRITTEN) && !x->reg)
		fsck_err(ck, K_INODE,
			 "inode %llu: unwritten extent at file "
			 "block %llu in a symlink",
			 ULL(x->ino), ULL(key));
	else if (e.flags & FS_EXT_UNWRITTEN)
		ck->res->unwritten_blocks += e.len;
	x->next_lblk = key + e.len;
	x->blocks += e.len;
	for (uint32_t i = 0; i < e.len; i++) {
		if (!in_data_area(ck, e.phys + i)) {
			fsck_err(ck, K_INODE, "inode %llu: extent at file "
				 "block %llu maps block %llu outside the data "
				 "area", ULL(x->ino), ULL(key),
				 ULL(e.phys + i));
			return 0;
		}
		if (e.flags & FS_EXT_SHARED)
			shared_ref(ck, e.phys + i, x->ino);
		else
			mark(ck, e.phys + i, "file data", x->ino);
	}
	return 0;
}

static void check_extents(struct fsck *ck, const struct fs_dinode *di)
{
	struct ext_ctx x = {.ino = di->hdr.blkno,
			    .reg = S_ISREG(di->mode),
			    .tree = di->refcount_blk != 0};
	struct fsck_rtree *t;
	struct fsck_ino *r;

	if (di->refcount_blk != 0) {
		t = fsck_tab_get(&ck->rtrees, di->refcount_blk);
		if (t != NULL)
			t->users++;
		r = ino_get(ck, di->hdr.blkno);
		if (r != NULL)
			r->shares = 1;
	}
	int bad;

	if (walk_tree(ck, di, "extent tree", ext_cb, &x, &bad) < 0)
		return;
	if (!bad && x.blocks != di->blocks)
		fsck_err(ck, K_INODE, "inode %llu: blocks %llu, but its "
			 "extents map %llu", ULL(di->hdr.blkno),
			 ULL(di->blocks), ULL(x.blocks));
}

static void check_xattr_blk(struct fsck *ck, const struct fs_dinode *di)
{
	const struct fs_xattr_blk *xb = ck->buf2;
	uint64_t ino = di->hdr.blkno, xbn = di->xattr_blk;
	uint32_t off = 0, n = 0;

	if (!in_data_area(ck, xbn) || mark(ck, xbn, "xattr block", ino) < 0) {
		fsck_err(ck, K_INODE, "inode %llu: xattr block %llu invalid",
			 ULL(ino), ULL(xbn));
		return;
	}
	if (fsck_read(ck, xbn, ck->buf2) < 0 ||
	    fs_blk_verify(xb, FS_BT_XATTR, xbn) < 0 || xb->owner != ino ||
	    xb->used > sizeof(xb->data)) {
		fsck_err(ck, K_INODE, "inode %llu: xattr block %llu is bad "
			 "(checksum, type, block number, owner or size)",
			 ULL(ino), ULL(xbn));
		return;
	}
	while (off + 4 <= xb->used) {
		const uint8_t *e = xb->data + off;
		uint32_t elen = 4u + e[1] + (uint32_t)(e[2] | e[3] << 8);

		/* ns 1 user, 2 trusted, 3 security: a name; 4, 5 the
		 * access/default ACL: no name (fs_xattr.c) */
		if (e[0] < 1 || e[0] > 5 || (e[1] == 0) != (e[0] >= 4) ||
		    off + elen > xb->used)
			break;
		off += (elen + 3) & ~3u;
		n++;
	}
	if (off != xb->used || n != xb->count)
		fsck_err(ck, K_INODE, "inode %llu: xattr block %llu: entries "
			 "do not parse (%u of %u, %u of %u bytes)", ULL(ino),
			 ULL(xbn), n, xb->count, off, xb->used);
}

/*
 * Read and check inode @ino (its own block, its data map, its xattr
 * block). Fills @r (mode, nlink). Directory trees are walked later by
 * walk_dir. Returns 0, or -1 if the inode is unusable (reported).
 */
static int check_inode(struct fsck *ck, uint64_t ino, struct fsck_ino *r,
		       struct fs_dinode *di)
{
	uint32_t type;

	r->checked = 1;
	if (!in_data_area(ck, ino) || fsck_read(ck, ino, di) < 0 ||
	    fs_blk_verify(di, FS_BT_INODE, ino) < 0) {
		fsck_err(ck, K_INODE, "inode %llu: block is not a valid inode "
			 "(range, checksum, type or block number)", ULL(ino));
		r->bad = 1;
		return -1;
	}
	if (mark(ck, ino, "inode block", ino) < 0) {
		r->bad = 1;
		return -1;
	}
	r->mode = di->mode;
	r->nlink = di->nlink;
	ck->res->inodes++;
	type = di->mode & S_IFMT;
	if (type == S_IFREG) {
		ck->res->files++;
		if (di->fmt == FS_FMT_INLINE) {
			if (di->size > FS_INODE_INLINE_SIZE)
				fsck_err(ck, K_INODE, "inode %llu: inline file"
					 " of size %llu", ULL(ino),
					 ULL(di->size));
		} else if (di->fmt == FS_FMT_EXTENTS) {
			check_extents(ck, di);
		} else {
			fsck_err(ck, K_INODE, "inode %llu: regular file with "
				 "data format %u", ULL(ino), di->fmt);
		}
	} else if (type == S_IFLNK) {
		ck->res->symlinks++;
		if (di->fmt == FS_FMT_EXTENTS)
			check_extents(ck, di);
		else if (di->fmt != FS_FMT_INLINE || di->size == 0 ||
			 di->size > FS_INODE_INLINE_SIZE)
			fsck_err(ck, K_INODE, "inode %llu: symlink with format"
				 " %u size %llu", ULL(ino), di->fmt,
				 ULL(di->size));
	} else if (type == S_IFDIR) {
		ck->res->dirs++;
		if (di->fmt != FS_FMT_DIR_BTREE)
			fsck_err(ck, K_INODE, "inode %llu: directory with data"
				 " format %u", ULL(ino), di->fmt);
	} else if (type == S_IFCHR || type == S_IFBLK || type == S_IFIFO ||
		   type == S_IFSOCK) {
		ck->res->others++;
		if (di->fmt != FS_FMT_NONE)
			fsck_err(ck, K_INODE, "inode %llu: special file with "
				 "data format %u", ULL(ino), di->fmt);
	} else {
		fsck_err(ck, K_INODE, "inode %llu: invalid mode %#o", ULL(ino),
			 di->mode);
		r->bad = 1;
		return -1;
	}
	if (di->xattr_blk != 0)
		check_xattr_blk(ck, di);
	return 0;
}

/* ---- directories ------------------------------------------------------ */

static unsigned dtype_of(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return DT_REG;
	case S_IFDIR: return DT_DIR;
	case S_IFLNK: return DT_LNK;
	case S_IFCHR: return DT_CHR;
	case S_IFBLK: return DT_BLK;
	case S_IFIFO: return DT_FIFO;
	case S_IFSOCK: return DT_SOCK;
	default: return DT_UNKNOWN;
	}
}

struct dir_ctx {
	uint64_t dir;
	uint64_t entries;
	struct fs_dinode *di;	/* scratch for child inodes */
};

/* Account one name of @child found in @dir. */
static int link_child(struct fsck *ck, struct dir_ctx *d, uint64_t child,
		      unsigned type, const char *name, size_t nlen)
{
	struct fsck_ino *r = ino_get(ck, child);
	struct fsck_ino *pr;

	if (r == NULL)
		return -ENOMEM;
	r->names++;
	if (!r->checked)
		check_inode(ck, child, r, d->di);
	if (r->bad)
		return 0;
	if (type != dtype_of(r->mode))
		fsck_err(ck, K_DIR, "directory %llu: entry '%.*s' has type "
			 "%u but inode %llu has mode %#o", ULL(d->dir),
			 (int)nlen, name, type, ULL(child), r->mode);
	if ((r->mode & S_IFMT) != S_IFDIR)
		return 0;
	if (r->names > 1) {
		fsck_err(ck, K_DIR, "directory %llu: entry '%.*s' names "
			 "directory %llu, already named in directory %llu "
			 "(hard link to a directory, or a cycle)",
			 ULL(d->dir), (int)nlen, name, ULL(child),
			 ULL(r->parent));
		return 0;
	}
	r->parent = d->dir;
	pr = ino_get(ck, d->dir);
	if (pr == NULL)
		return -ENOMEM;
	pr->subdirs++;
	return queue_push(ck, child);
}

static int dirent_cb(struct fsck *ck, void *arg, uint64_t key,
		     const uint8_t *val, size_t len)
{
	struct dir_ctx *d = arg;
	struct fs_dirent_val v;
	const char *name = (const char *)val + sizeof(v);
	uint64_t h;

	d->entries++;
	memcpy(&v, val, len < sizeof(v) ? len : sizeof(v));
	if (len < sizeof(v) || v.namelen == 0 ||
	    len != sizeof(v) + v.namelen ||
	    memchr(name, '/', v.namelen) != NULL ||
	    memchr(name, '\0', v.namelen) != NULL) {
		fsck_err(ck, K_DIR, "directory %llu: entry with key %#llx is "
			 "malformed (value %zu bytes)", ULL(d->dir),
			 ULL(key), len);
		return 0;
	}
	h = fs_dirkey_hash(name, v.namelen);
	if (key < h || key > h + 15)
		fsck_err(ck, K_DIR, "directory %llu: entry '%.*s' has key "
			 "%#llx outside its hash range %#llx..+15",
			 ULL(d->dir), (int)v.namelen, name, ULL(key),
			 ULL(h));
	if (v.ino == d->dir || !in_data_area(ck, v.ino)) {
		fsck_err(ck, K_DIR, "directory %llu: entry '%.*s' points to "
			 "invalid inode %llu", ULL(d->dir), (int)v.namelen,
			 name, ULL(v.ino));
		return 0;
	}
	return link_child(ck, d, v.ino, v.type, name, v.namelen);
}

/* Walk directory @dir's tree: its entries become names of children. */
static int walk_dir(struct fsck *ck, uint64_t dir)
{
	struct fs_dinode *di = bd_buf_alloc(FS_BLOCK_SIZE);
	struct dir_ctx d = { .dir = dir };
	struct fsck_ino *r;
	uint64_t size, parent;
	int bad, ret = -ENOMEM;

	d.di = bd_buf_alloc(FS_BLOCK_SIZE);
	if (di == NULL || d.di == NULL)
		goto out;
	ret = 0;
	if (fsck_read(ck, dir, di) < 0 || di->fmt != FS_FMT_DIR_BTREE)
		goto out;
	size = di->size;
	parent = di->parent;
	ret = walk_tree(ck, di, "directory", dirent_cb, &d, &bad);
	if (ret < 0 || bad)
		goto out;
	r = ino_get(ck, dir);
	if (r == NULL) {
		ret = -ENOMEM;
		goto out;
	}
	r->entries = d.entries;
	if (size != d.entries) {
		r->size_bad = 1;
		fsck_err(ck, K_DSIZE, "directory %llu: size %llu but %llu "
			 "entries", ULL(dir), ULL(size), ULL(d.entries));
	}
	if (r->orphan)
		goto out;
	r->parent_bad = parent != r->parent;
	if (r->parent_bad)
		fsck_err(ck, K_PARENT, "directory %llu: '..' (parent field) is "
			 "%llu but it is named in directory %llu", ULL(dir),
			 ULL(parent), ULL(r->parent));
out:
	free(di);
	free(d.di);
	return ret;
}

/* ---- link counts and orphans ------------------------------------------ */

static void check_links(struct fsck *ck)
{
	for (size_t i = 0; i < ck->inos.cap; i++) {
		struct fsck_ino *r = fsck_tab_at(&ck->inos, i);
		uint32_t want;

		if (r == NULL || r->bad || !r->checked || r->orphan)
			continue;
		want = (r->mode & S_IFMT) == S_IFDIR ? 2 + r->subdirs
						     : r->names;
		if (r->nlink != want)
			fsck_err(ck, K_LINK, "inode %llu: link count %u, "
				 "should be %u (%u names, %u subdirectories)",
				 ULL(r->ino), r->nlink, want, r->names,
				 r->subdirs);
	}
}

static int check_orphans(struct fsck *ck)
{
	const struct fs_slotinfo *si = ck->buf;
	struct fs_dinode *di = ck->buf2;

	for (unsigned s = 0; s < ck->sb.slot_count; s++) {
		uint64_t sib = fs_slotinfo_blk(s), ino, steps = 0;

		if (fsck_read(ck, sib, ck->buf) < 0 ||
		    fs_blk_verify(si, FS_BT_SLOTINFO, sib) < 0)
			continue;	/* reported by check_fixed */
		ino = si->orphan_head;
		while (ino != 0) {
			struct fsck_ino *r = ino_get(ck, ino);

			if (r == NULL)
				return -ENOMEM;
			if (r->orphan || r->names > 0 || ++steps > ck->nblocks) {
				fsck_err(ck, K_ORPHAN, "slot %u: orphan list "
					 "meets inode %llu again or a linked "
					 "inode (loop or corruption)", s,
					 ULL(ino));
				break;
			}
			r->orphan = 1;
			ck->res->orphans++;
			if (check_inode(ck, ino, r, di) < 0)
				break;
			if (di->nlink != 0)
				fsck_err(ck, K_ORPHAN, "slot %u: orphan inode "
					 "%llu has link count %u", s,
					 ULL(ino), di->nlink);
			ino = di->orphan_next;
			if ((r->mode & S_IFMT) == S_IFDIR &&
			    walk_dir(ck, r->ino) < 0)
				return -ENOMEM;
		}
	}
	return 0;
}

/* ---- refcount trees --------------------------------------------------- */

static int rc_cb(struct fsck *ck, void *arg, uint64_t key, const uint8_t *val,
		 size_t len)
{
	uint64_t tree = *(const uint64_t *)arg;
	struct fs_refcount_val v;

	if (len != sizeof(v)) {
		fsck_err(ck, K_REFCOUNT,
			 "refcount tree %llu: record at block "
			 "%llu has a %zu-byte value",
			 ULL(tree), ULL(key), len);
		return 0;
	}
	memcpy(&v, val, sizeof(v));
	if (v.len == 0 || v.count < 2 || key + v.len < key) {
		fsck_err(ck, K_REFCOUNT,
			 "refcount tree %llu: record at block "
			 "%llu (len %u, count %u) is invalid",
			 ULL(tree), ULL(key), v.len, v.count);
		return 0;
	}
	for (uint32_t i = 0; i < v.len; i++) {
		struct fsck_shared *r = fsck_tab_find(&ck->shared, key + i);

		if (r == NULL || r->counted != 0) {
			fsck_err(ck, K_REFCOUNT,
				 "refcount tree %llu: block "
				 "%llu has count %u but %s",
				 ULL(tree), ULL(key + i), v.count,
				 r == NULL ? "no shared extent maps it"
					   : "another record counts it too");
			continue;
		}
		r->counted = v.count;
	}
	return 0;
}

/* The root block of refcount tree @t and its records. */
static void check_rtree(struct fsck *ck, const struct fsck_rtree *t)
{
	const struct fs_refcount_blk *rb = ck->buf3;
	uint64_t blk = t->blk;
	struct tree_ctx c = {.ck = ck,
			     .owner = blk,
			     .what = "refcount tree",
			     .cb = rc_cb,
			     .arg = &blk};

	if (!in_data_area(ck, blk) || mark(ck, blk, "refcount tree", blk) < 0 ||
	    fsck_read(ck, blk, ck->buf3) < 0 ||
	    fs_blk_verify(rb, FS_BT_REFCOUNT, blk) < 0) {
		fsck_err(ck, K_REFCOUNT,
			 "refcount tree %llu is bad (place, "
			 "checksum, type or block number)",
			 ULL(blk));
		return;
	}
	if (rb->users != t->users)
		fsck_err(ck, K_REFCOUNT,
			 "refcount tree %llu: %llu users, but "
			 "%llu inodes name it",
			 ULL(blk), ULL(rb->users), ULL(t->users));
	if (walk_node(&c, (const uint8_t *)ck->buf3 + FS_BTREE_NODE_OFF,
		      FS_BTREE_NODE_SIZE, -1, 0, 0, 0, blk) < 0)
		fsck_err(ck, K_REFCOUNT, "refcount tree %llu: walk failed",
			 ULL(blk));
}

/* Every refcount tree, then every shared block: mapped by as many shared
 * extents as its count says (1 without a record). */
static void check_refcounts(struct fsck *ck)
{
	for (size_t i = 0; i < ck->rtrees.cap; i++) {
		const struct fsck_rtree *t = fsck_tab_at(&ck->rtrees, i);

		if (t != NULL)
			check_rtree(ck, t);
	}
	for (size_t i = 0; i < ck->shared.cap; i++) {
		const struct fsck_shared *r = fsck_tab_at(&ck->shared, i);
		uint32_t want;

		if (r == NULL)
			continue;
		want = r->counted != 0 ? r->counted : 1;
		if (r->refs != want)
			fsck_err(ck, K_REFCOUNT,
				 "block %llu is mapped by %u "
				 "shared extents, its refcount says %u",
				 ULL(r->blk), r->refs, want);
		ck->res->shared_blocks++;
	}
}

/* ---- bitmaps against reachability ------------------------------------- */

/* Block @b of group @g is marked in use but unreachable: leaked, or, if
 * it holds an inode that still has links, a lost file (which a repair
 * must not free). */
static void report_leak(struct fsck *ck, uint32_t g, uint64_t b)
{
	const struct fs_dinode *di = ck->buf3;

	ck->res->leaked++;
	if (in_data_area(ck, b) && fsck_read(ck, b, ck->buf3) == 0 &&
	    fs_blk_verify(di, FS_BT_INODE, b) == 0 && di->nlink > 0) {
		fsck_err(ck, K_LOST, "block %llu (rgroup %u) is marked in use "
			 "but nothing refers to it (leaked): it holds inode "
			 "%llu with %u link(s), a lost file", ULL(b), g,
			 ULL(b), di->nlink);
		return;
	}
	fsck_err(ck, K_LEAK, "block %llu (rgroup %u) is marked in use but "
		 "nothing refers to it (leaked)", ULL(b), g);
}

static void check_bitmaps(struct fsck *ck, uint32_t g, uint32_t inodes)
{
	uint64_t start = fs_rgrp_blk(&ck->sb, g);
	uint32_t len = fs_rgrp_len(&ck->sb, g);
	const struct fs_bitmap_blk *bm = ck->buf2;
	const struct fs_rgrp_hdr *rh = ck->buf;
	uint32_t clear = 0, cur = UINT32_MAX;
	int hdr_ok, bm_ok = 0;

	hdr_ok = fsck_read(ck, start, ck->buf) == 0 &&
		 fs_blk_verify(rh, FS_BT_RGRP, start) == 0;
	for (uint32_t i = 0; i < len; i++) {
		uint64_t b = start + i;
		int used, reach;

		if (i / FS_BITMAP_BITS != cur) {
			cur = i / FS_BITMAP_BITS;
			bm_ok = fsck_read(ck, start + 1 + cur, ck->buf2) == 0 &&
				fs_blk_verify(bm, FS_BT_BITMAP,
					      start + 1 + cur) == 0;
		}
		if (!bm_ok)
			continue;	/* reported in check_rgrp_meta */
		used = (bm->bits[(i % FS_BITMAP_BITS) / 8] >> (i % 8)) & 1;
		reach = fsck_bit_get(ck->reach, b);
		clear += !used;
		if (used && !reach) {
			report_leak(ck, g, b);
		} else if (!used && reach) {
			ck->res->used_but_free++;
			fsck_err(ck, K_FREE, "block %llu (rgroup %u) is in use"
				 " but marked free in the bitmap", ULL(b), g);
		}
	}
	ck->res->blocks_free += clear;
	if (!hdr_ok)
		return;
	if (rh->free != clear)
		fsck_err(ck, K_COUNT, "rgroup %u (block %llu): free count %u,"
			 " bitmap has %u free blocks", g, ULL(start), rh->free,
			 clear);
	if (rh->dinodes != inodes)
		fsck_err(ck, K_COUNT, "rgroup %u (block %llu): inode count "
			 "%u, found %u inodes", g, ULL(start), rh->dinodes,
			 inodes);
}

/* ---- entry point ------------------------------------------------------ */

static int walk_namespace(struct fsck *ck)
{
	struct fs_dinode *di = bd_buf_alloc(FS_BLOCK_SIZE);
	struct fsck_ino *root;
	int ret = -ENOMEM;

	if (di == NULL)
		return -ENOMEM;
	root = ino_get(ck, ck->sb.root_ino);
	if (root == NULL)
		goto out;
	ret = 0;
	if (check_inode(ck, ck->sb.root_ino, root, di) < 0) {
		fsck_err(ck, K_DIR, "root inode %llu is unusable: the "
			 "namespace cannot be checked",
			 ULL(ck->sb.root_ino));
		goto out;
	}
	if ((root->mode & S_IFMT) != S_IFDIR) {
		fsck_err(ck, K_DIR, "root inode %llu is not a directory",
			 ULL(ck->sb.root_ino));
		goto out;
	}
	root->parent = ck->sb.root_ino;
	root->names = 1;
	ret = queue_push(ck, ck->sb.root_ino);
	while (ret == 0 && ck->q_head < ck->q_tail)
		ret = walk_dir(ck, ck->queue[ck->q_head++]);
out:
	free(di);
	return ret;
}

/* ck->ginodes: the usable inodes found, per rgroup. 0 or -ENOMEM. */
static int count_inodes(struct fsck *ck)
{
	ck->ginodes = calloc(ck->sb.rgrp_count, sizeof(*ck->ginodes));
	if (ck->ginodes == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < ck->inos.cap; i++) {
		const struct fsck_ino *r = fsck_tab_at(&ck->inos, i);

		if (r != NULL && r->checked && !r->bad)
			ck->ginodes[(r->ino - ck->sb.rgrp_start) /
				    ck->sb.rgrp_blocks]++;
	}
	return 0;
}

/* Blocks in a slot's free log (dlm, FORMAT.md "Free log"): freed from
 * their file, still set in the bitmap until the log is applied: in use,
 * owned by the log (inode blocks still counted in dinodes). */
static void check_flogs(struct fsck *ck)
{
	const struct fs_slotinfo *si = ck->buf;

	for (unsigned s = 0; s < ck->sb.slot_count; s++) {
		uint64_t sib = fs_slotinfo_blk(s);

		if (fsck_read(ck, sib, ck->buf) < 0 ||
		    fs_blk_verify(si, FS_BT_SLOTINFO, sib) < 0)
			continue; /* reported by check_fixed */
		if (si->flog_count > FS_FLOG_MAX) {
			fsck_err(ck, K_META,
				 "slot %u: free log of %u entries "
				 "(at most %u)",
				 s, si->flog_count, FS_FLOG_MAX);
			continue;
		}
		for (unsigned i = 0; i < si->flog_count; i++) {
			const struct fs_flog_ent *e = &si->flog[i];

			for (uint32_t k = 0; k < e->len; k++) {
				uint64_t b = e->start + k;

				if (!in_data_area(ck, b) ||
				    mark(ck, b, "free log entry", s) < 0)
					continue;
				ck->res->flog_blocks++;
				if (ck->live != NULL)
					fsck_bit_set(ck->live, b);
				if (e->flags & FS_FLOG_INODE)
					ck->ginodes[(b - ck->sb.rgrp_start) /
						    ck->sb.rgrp_blocks]++;
			}
		}
	}
}

static int run(struct fsck *ck)
{
	size_t mapbytes;
	int ret;

	ret = check_sb(ck);
	if (ret == -EUCLEAN) {
		/* nothing more can be checked, nor repaired */
		if (ck->o->repair)
			fsck_note(ck, "no usable superblock: no repair made");
		return 0;
	}
	if (ret < 0)
		return ret;
	ret = fsck_journal_overlay(ck);
	if (ret < 0)
		return ret;
	mapbytes = (size_t)((ck->nblocks + 7) / 8);
	ck->reach = calloc(1, mapbytes);
	ck->dup = calloc(1, mapbytes);
	if (ck->reach == NULL || ck->dup == NULL)
		return -ENOMEM;
	check_fixed(ck);
	for (uint32_t g = 0; g < ck->sb.rgrp_count; g++)
		check_rgrp_meta(ck, g);
	fsck_statfs_mark(ck);
	ret = walk_namespace(ck);
	if (ret == 0 && ck->o->repair) {
		/* what stays reachable once the orphans are freed */
		ck->live = malloc(mapbytes);
		if (ck->live == NULL)
			return -ENOMEM;
		memcpy(ck->live, ck->reach, mapbytes);
	}
	if (ret == 0)
		ret = check_orphans(ck);
	if (ret < 0)
		return ret;
	check_links(ck);
	check_refcounts(ck);
	if (count_inodes(ck) < 0)
		return -ENOMEM;
	check_flogs(ck);
	for (uint32_t g = 0; g < ck->sb.rgrp_count; g++)
		check_bitmaps(ck, g, ck->ginodes[g]);
	fsck_statfs_check(ck);
	return ck->o->repair ? fsck_repair(ck) : 0;
}

static void summary(struct fsck *ck)
{
	const struct fs_fsck_result *r = ck->res;

	if (ck->o->out == NULL)
		return;
	fprintf(ck->o->out,
		"%llu inodes (%llu dirs, %llu files, %llu "
		"symlinks, %llu other), %llu orphans; %llu blocks reachable, "
		"%llu free of %llu (%llu unwritten, %llu shared)\n",
		ULL(r->inodes), ULL(r->dirs), ULL(r->files), ULL(r->symlinks),
		ULL(r->others), ULL(r->orphans), ULL(r->blocks_used),
		ULL(r->blocks_free), ULL(ck->nblocks), ULL(r->unwritten_blocks),
		ULL(r->shared_blocks));
	if (r->flog_blocks)
		fprintf(ck->o->out,
			"%llu blocks in free logs (freed, to be "
			"applied by a cluster node)\n",
			ULL(r->flog_blocks));
	if (r->leaked || r->doubly_used || r->used_but_free)
		fprintf(ck->o->out, "%llu leaked, %llu doubly used, %llu used "
			"but free blocks\n", ULL(r->leaked),
			ULL(r->doubly_used), ULL(r->used_but_free));
}

int fs_fsck_run(struct bd_dev *bd, const struct fs_fsck_opts *o,
		struct fs_fsck_result *res)
{
	struct fsck ck = { .bd = bd, .o = o, .res = res,
		.ovl.esize = sizeof(struct fsck_ovl_ent),
		.inos.esize = sizeof(struct fsck_ino),
		.shared.esize = sizeof(struct fsck_shared),
		.rtrees.esize = sizeof(struct fsck_rtree) };
	int ret = -ENOMEM;

	memset(res, 0, sizeof(*res));
	ck.dev_blocks = bd_size(bd) / FS_BLOCK_SIZE;
	ck.buf = bd_buf_alloc(FS_BLOCK_SIZE);
	ck.buf2 = bd_buf_alloc(FS_BLOCK_SIZE);
	ck.buf3 = bd_buf_alloc(FS_BLOCK_SIZE);
	if (ck.buf != NULL && ck.buf2 != NULL && ck.buf3 != NULL)
		ret = run(&ck);
	if (ret == 0)
		summary(&ck);
	fsck_overlay_free(&ck);
	free(ck.reach);
	free(ck.live);
	free(ck.dup);
	free(ck.ginodes);
	fsck_tab_free(&ck.inos);
	fsck_tab_free(&ck.shared);
	fsck_tab_free(&ck.rtrees);
	free(ck.queue);
	free(ck.buf);
	free(ck.buf2);
	free(ck.buf3);
	return ret;
}
