/*
 * fs_fsck_repair.c — the fixes of fsck -y (fs_fsck.h says which).
 *
 * Runs after a complete check, with what it found: the per-inode records
 * (names, subdirectories, the directory that names each directory, entry
 * counts), the reachability map and the inodes per rgroup. The policy is
 * all or nothing: if any problem is of a kind past K_LAST_FIXABLE, the
 * walk may have missed blocks and names (an unreadable directory hides
 * its files), so rebuilding bitmaps or link counts from it could free
 * live blocks; nothing is fixed. Otherwise every fix is a pure function
 * of the walk, so running fsck -y twice gives the same image.
 *
 * Orphans (inodes unlinked while open when their node stopped) are not
 * problems, but nobody can use them any more: the repair releases them as
 * a mount would, by emptying the orphan lists and rebuilding the bitmaps
 * without their blocks.
 *
 * Sections: policy / superblock / inodes / orphans / bitmaps and counts /
 * entry.
 *
 * Fixed blocks go to the overlay with fsck_write (later reads see them)
 * and are written home together at the end, then flushed.
 */
#include "fusefs/fsck/fs_fsck_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ULL(x) ((unsigned long long)(x))

/* ---- policy ------------------------------------------------------------ */

static uint64_t unfixable(const struct fsck *ck)
{
	uint64_t n = 0;

	for (unsigned k = K_LAST_FIXABLE + 1; k < K_NKINDS; k++)
		n += ck->reported[k];
	return n;
}

static uint64_t fixable(const struct fsck *ck)
{
	uint64_t n = 0;

	for (unsigned k = 0; k <= K_LAST_FIXABLE; k++)
		n += ck->reported[k];
	return n;
}

/* ---- superblock -------------------------------------------------------- */

/* The backup superblock becomes a copy of the primary. */
static int fix_backup_sb(struct fsck *ck)
{
	struct fs_sb *bk = ck->buf;

	if (ck->reported[K_SBBACKUP] == 0)
		return 0;
	if (fsck_read(ck, FS_SB_BLK, bk) < 0)
		return -EIO;
	fs_blk_seal(bk, FS_BT_SB, FS_SB_BACKUP_BLK, bk->hdr.seq);
	fsck_note(ck, "fixed: backup superblock rewritten from the primary");
	return fsck_write(ck, FS_SB_BACKUP_BLK, bk);
}

/* ---- inodes ------------------------------------------------------------ */

static uint32_t want_nlink(const struct fsck_ino *r)
{
	return (r->mode & S_IFMT) == S_IFDIR ? 2 + r->subdirs : r->names;
}

/* Link count, directory size and parent of one inode, if wrong. */
static int fix_inode(struct fsck *ck, const struct fsck_ino *r)
{
	struct fs_dinode *di = ck->buf;
	int dirty = 0;

	if (fsck_read(ck, r->ino, di) < 0 ||
	    fs_blk_verify(di, FS_BT_INODE, r->ino) < 0)
		return -EIO;	/* checked good a moment ago */
	if (di->nlink != want_nlink(r)) {
		fsck_note(ck, "fixed: inode %llu: link count %u -> %u",
			  ULL(r->ino), di->nlink, want_nlink(r));
		di->nlink = want_nlink(r);
		dirty = 1;
	}
	if (r->size_bad && di->size != r->entries) {
		fsck_note(ck, "fixed: directory %llu: size %llu -> %llu",
			  ULL(r->ino), ULL(di->size), ULL(r->entries));
		di->size = r->entries;
		dirty = 1;
	}
	if (r->parent_bad && di->parent != r->parent) {
		fsck_note(ck, "fixed: directory %llu: '..' %llu -> %llu",
			  ULL(r->ino), ULL(di->parent), ULL(r->parent));
		di->parent = r->parent;
		dirty = 1;
	}
	if (!dirty)
		return 0;
	fs_blk_update_crc(di);
	return fsck_write(ck, r->ino, di);
}

static int fix_inodes(struct fsck *ck)
{
	if (ck->reported[K_LINK] + ck->reported[K_DSIZE] +
	    ck->reported[K_PARENT] == 0)
		return 0;
	for (size_t i = 0; i < ck->inos.cap; i++) {
		const struct fsck_ino *r = fsck_tab_at(&ck->inos, i);
		int ret;

		if (r == NULL || r->bad || !r->checked || r->orphan ||
		    (r->nlink == want_nlink(r) && !r->size_bad &&
		     !r->parent_bad))
			continue;
		ret = fix_inode(ck, r);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* ---- orphans ------------------------------------------------------------ */

/* Does an orphan use a refcount tree? Releasing it here would not lower
 * the counts of the blocks it shares. */
static int orphans_share(const struct fsck *ck)
{
	for (size_t i = 0; i < ck->inos.cap; i++) {
		const struct fsck_ino *r = fsck_tab_at(&ck->inos, i);

		if (r != NULL && r->orphan && r->shares)
			return 1;
	}
	return 0;
}

/* Empty every slot's orphan list: the inodes on it (and their blocks)
 * become unreachable, so the bitmaps are rebuilt from ck->live, and the
 * groups lose their inodes. */
static int free_orphans(struct fsck *ck)
{
	const struct fsck_ino *r;
	struct fs_slotinfo *si = ck->buf;

	for (unsigned s = 0; s < ck->sb.slot_count; s++) {
		uint64_t sib = fs_slotinfo_blk(s);
		int ret;

		if (fsck_read(ck, sib, si) < 0 ||
		    fs_blk_verify(si, FS_BT_SLOTINFO, sib) < 0)
			return -EIO;	/* checked good a moment ago */
		if (si->orphan_head == 0)
			continue;
		si->orphan_head = 0;
		fs_blk_update_crc(si);
		ret = fsck_write(ck, sib, si);
		if (ret < 0)
			return ret;
	}
	for (size_t i = 0; i < ck->inos.cap; i++) {
		r = fsck_tab_at(&ck->inos, i);
		if (r == NULL || !r->orphan || !r->checked || r->bad)
			continue;
		ck->ginodes[(r->ino - ck->sb.rgrp_start) /
			    ck->sb.rgrp_blocks]--;
		ck->res->orphans_freed++;
	}
	memcpy(ck->reach, ck->live, (size_t)((ck->nblocks + 7) / 8));
	fsck_note(ck, "fixed: %llu orphan inode(s) released",
		  ULL(ck->res->orphans_freed));
	return 0;
}

/* ---- bitmaps and counts ------------------------------------------------ */

/* Bitmap block @k of group @g from the reachability map (bits past the
 * group's end set, as mkfs leaves them). *clear += its free blocks. */
static int fix_bitmap_blk(struct fsck *ck, uint32_t g, uint32_t k,
			  uint32_t *clear)
{
	uint64_t start = fs_rgrp_blk(&ck->sb, g), blk = start + 1 + k;
	uint32_t len = fs_rgrp_len(&ck->sb, g);
	struct fs_bitmap_blk *bm = ck->buf2;
	uint8_t bits[sizeof(bm->bits)];
	int ok;

	ok = fsck_read(ck, blk, bm) == 0 &&
	     fs_blk_verify(bm, FS_BT_BITMAP, blk) == 0;
	memset(bits, 0, sizeof(bits));
	for (uint64_t i = 0; i < FS_BITMAP_BITS; i++) {
		uint64_t gi = (uint64_t)k * FS_BITMAP_BITS + i;
		int used = gi >= len || fsck_bit_get(ck->reach, start + gi);

		if (used)
			bits[i / 8] |= (uint8_t)(1u << (i % 8));
		else
			(*clear)++;
	}
	if (ok && memcmp(bm->bits, bits, sizeof(bits)) == 0)
		return 0;
	if (!ok) {
		memset(bm, 0, FS_BLOCK_SIZE);
		fs_blk_seal(bm, FS_BT_BITMAP, blk, 0);
	}
	memcpy(bm->bits, bits, sizeof(bits));
	fs_blk_update_crc(bm);
	fsck_note(ck, "fixed: rgroup %u: bitmap block %llu %s from the "
		  "reachable blocks", g, ULL(blk), ok ? "updated" : "rebuilt");
	return fsck_write(ck, blk, bm);
}

static int fix_rgroup(struct fsck *ck, uint32_t g)
{
	uint64_t start = fs_rgrp_blk(&ck->sb, g);
	uint32_t nbm = fs_rgrp_nbitmaps(fs_rgrp_len(&ck->sb, g));
	struct fs_rgrp_hdr *rh = ck->buf;
	uint32_t clear = 0;
	int ret;

	for (uint32_t k = 0; k < nbm; k++) {
		ret = fix_bitmap_blk(ck, g, k, &clear);
		if (ret < 0)
			return ret;
	}
	if (fsck_read(ck, start, rh) < 0 ||
	    fs_blk_verify(rh, FS_BT_RGRP, start) < 0)
		return -EIO;	/* a bad header is not fixable */
	if (rh->free == clear && rh->dinodes == ck->ginodes[g])
		return 0;
	fsck_note(ck, "fixed: rgroup %u: free %u -> %u, inodes %u -> %u", g,
		  rh->free, clear, rh->dinodes, ck->ginodes[g]);
	rh->free = clear;
	rh->dinodes = ck->ginodes[g];
	fs_blk_update_crc(rh);
	return fsck_write(ck, start, rh);
}

static int fix_rgroups(struct fsck *ck)
{
	if (ck->reported[K_LEAK] + ck->reported[K_FREE] +
	    ck->reported[K_COUNT] + ck->reported[K_BITMAP] == 0 &&
	    ck->res->orphans_freed == 0)
		return 0;
	for (uint32_t g = 0; g < ck->sb.rgrp_count; g++) {
		int ret = fix_rgroup(ck, g);

		if (ret < 0)
			return ret;
	}
	return 0;
}

/* ---- entry ------------------------------------------------------------- */

int fsck_repair(struct fsck *ck)
{
	uint64_t bad = unfixable(ck), n = fixable(ck);
	int ret;

	if (ck->reported[K_SB] > 0) {
		fsck_note(ck, "the primary superblock is bad: no repair made");
		return 0;
	}
	if (bad > 0) {
		fsck_note(ck, "%llu problem(s) cannot be fixed safely: no "
			  "repair made%s", ULL(bad), ck->res->replayed_tx ?
			  " (beyond the journal replay)" : "");
		return 0;
	}
	if (n == 0 && ck->res->orphans == 0)
		return 0;
	ret = fix_backup_sb(ck);
	if (ret == 0)
		ret = fix_inodes(ck);
	if (ret == 0 && ck->res->orphans > 0 && orphans_share(ck))
		fsck_note(ck, "orphans sharing blocks (reflink) are left to "
			      "the next mount, which lowers their counts");
	else if (ret == 0 && ck->res->orphans > 0)
		ret = free_orphans(ck);
	if (ret == 0)
		ret = fix_rgroups(ck);
	if (ret == 0)
		ret = fsck_statfs_fix(ck);
	if (ret == 0)
		ret = fsck_write_dirty(ck);
	if (ret == 0)
		ck->res->fixed = n;
	return ret;
}
