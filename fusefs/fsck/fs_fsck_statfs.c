/*
 * fs_fsck_statfs.c — the statfs records (ro_compat STATFS; FORMAT.md
 * "Statfs records"): each is checked (type, slot) and counted in use, and
 * the master's counts plus every slot's change must equal the free
 * blocks the bitmaps show and the inodes the walk found. fsck -y
 * rewrites them from the repaired group headers: the master gets the
 * totals, every change zero.
 *
 * fs_fsck_add_statfs (fsck.ucfs -O statfs) gives an image made before
 * the records (no ro_compat STATFS) its records and the bit, offline.
 */
#include "fusefs/fsck/fs_fsck_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ULL(x) ((unsigned long long)(x))

static int have_records(const struct fsck *ck)
{
	return (ck->sb.feature_ro_compat & FS_FEATURE_RO_COMPAT_STATFS) != 0;
}

/* Record @i (0 the master, 1 + s slot s's change), block @b, sealed into
 * @buf: the master with @nfree and @inodes, a change zero. */
static void rec_fill(void *buf, unsigned i, uint64_t b, int64_t nfree,
		     int64_t inodes)
{
	struct fs_statfs_rec *r = buf;

	memset(r, 0, FS_BLOCK_SIZE);
	r->slot = i == 0 ? FS_STATFS_MASTER : i - 1;
	if (i == 0) {
		r->free = nfree;
		r->dinodes = inodes;
	}
	fs_blk_seal(r, FS_BT_STATFS, b, 0);
}

/* Record @i (0 the master, 1 + s slot s's change) into ck->buf: 0, or
 * -1 if it is bad. */
static int rec_get(struct fsck *ck, unsigned i)
{
	const struct fs_statfs_rec *r = ck->buf;
	uint64_t b = ck->sb.statfs_blk + i;
	uint32_t slot = i == 0 ? FS_STATFS_MASTER : i - 1;

	if (fsck_read(ck, b, ck->buf) < 0 ||
	    fs_blk_verify(r, FS_BT_STATFS, b) < 0 || r->slot != slot)
		return -1;
	return 0;
}

void fsck_statfs_mark(struct fsck *ck)
{
	const struct fs_statfs_rec *r = ck->buf;

	ck->sf_free = 0;
	ck->sf_inodes = 0;
	ck->sf_bad = 0;
	if (!have_records(ck))
		return;
	for (unsigned i = 0; i <= ck->sb.slot_count; i++) {
		uint64_t b = ck->sb.statfs_blk + i;

		fsck_mark_meta(ck, b, "statfs record");
		if (rec_get(ck, i) < 0) {
			ck->sf_bad++;
			fsck_err(ck, K_STATFS,
				 "statfs record %u (block %llu) "
				 "is bad",
				 i, ULL(b));
			continue;
		}
		ck->sf_free += r->free;
		ck->sf_inodes += r->dinodes;
	}
}

void fsck_statfs_check(struct fsck *ck)
{
	int64_t inodes = 0;

	if (!have_records(ck) || ck->sf_bad)
		return;
	for (uint32_t g = 0; g < ck->sb.rgrp_count; g++)
		inodes += ck->ginodes[g];
	if (ck->sf_free != (int64_t)ck->res->blocks_free)
		fsck_err(ck, K_STATFS,
			 "statfs records: %lld free blocks "
			 "(master and changes), the bitmaps have %llu",
			 (long long)ck->sf_free, ULL(ck->res->blocks_free));
	if (ck->sf_inodes != inodes)
		fsck_err(ck, K_STATFS,
			 "statfs records: %lld inodes (master "
			 "and changes), found %lld",
			 (long long)ck->sf_inodes, (long long)inodes);
}

/* Sums of the group headers as they are now (repaired). */
static int header_sums(struct fsck *ck, int64_t *nfree, int64_t *inodes)
{
	const struct fs_rgrp_hdr *rh = ck->buf;

	*nfree = 0;
	*inodes = 0;
	for (uint32_t g = 0; g < ck->sb.rgrp_count; g++) {
		uint64_t start = fs_rgrp_blk(&ck->sb, g);

		if (fsck_read(ck, start, ck->buf) < 0 ||
		    fs_blk_verify(rh, FS_BT_RGRP, start) < 0)
			return -EIO;
		*nfree += rh->free;
		*inodes += rh->dinodes;
	}
	return 0;
}

int fsck_statfs_fix(struct fsck *ck)
{
	struct fs_statfs_rec *r = ck->buf;
	int64_t nfree, inodes, mfree = 0, minodes = 0;
	int ret;

	if (!have_records(ck))
		return 0;
	ret = header_sums(ck, &nfree, &inodes);
	if (ret < 0)
		return ret;
	if (!ck->sf_bad && rec_get(ck, 0) == 0) {
		mfree = r->free;
		minodes = r->dinodes;
	}
	if (!ck->sf_bad && ck->sf_free == nfree && ck->sf_inodes == inodes)
		return 0;
	fsck_note(ck,
		  "fixed: statfs records: master %lld -> %lld free "
		  "blocks, %lld -> %lld inodes, every change zero",
		  (long long)mfree, (long long)nfree, (long long)minodes,
		  (long long)inodes);
	for (unsigned i = 0; i <= ck->sb.slot_count && ret == 0; i++) {
		uint64_t b = ck->sb.statfs_blk + i;

		rec_fill(r, i, b, nfree, inodes);
		ret = fsck_write(ck, b, r);
	}
	return ret;
}

/* ---- fsck.ucfs -O statfs: an old image gets the records ---------------- */

struct upg {
	struct bd_dev *bd;
	struct fs_sb *sb; /* the primary superblock */
	uint8_t *blk;	  /* one block of scratch */
	uint8_t *bm;	  /* group 0's bitmap blocks */
	uint32_t nbm;	  /* ... how many */
	char *why;
	size_t whylen;
};

static int upg_fail(struct upg *u, int err, const char *msg)
{
	if (u->why != NULL && u->whylen > 0)
		snprintf(u->why, u->whylen, "%s", msg);
	return err;
}

static int blk_rw(struct upg *u, uint64_t b, void *buf, int write)
{
	if (write)
		return bd_write(u->bd, buf, FS_BLOCK_SIZE, b * FS_BLOCK_SIZE,
				0);
	return bd_read(u->bd, buf, FS_BLOCK_SIZE, b * FS_BLOCK_SIZE);
}

/* Every slot free in the slot map: no node has it mounted, none crashed
 * with it (its journal replayed by the next mount of the slot). */
static int upg_slots_free(struct upg *u)
{
	const struct fs_slotmap *sm = (const void *)u->blk;
	char msg[200];

	if (blk_rw(u, FS_SLOTMAP_BLK, u->blk, 0) < 0)
		return upg_fail(u, -EIO, "cannot read the slot map");
	if (fs_blk_verify(sm, FS_BT_SLOTMAP, FS_SLOTMAP_BLK) < 0)
		return upg_fail(u, -EUCLEAN, "the slot map is bad");
	for (unsigned s = 0; s < u->sb->slot_count; s++) {
		if (sm->slots[s].state == FS_SLOT_FREE)
			continue;
		snprintf(msg, sizeof(msg),
			 "slot %u is claimed by node %u: mounted there, or "
			 "that node stopped without unmounting (mount and "
			 "unmount it once to recover the slot)",
			 s, sm->slots[s].node_id);
		return upg_fail(u, -EBUSY, msg);
	}
	return 0;
}

static int bm_bit(const struct upg *u, uint32_t i)
{
	const uint8_t *bits = u->bm +
			      (size_t)(i / FS_BITMAP_BITS) * FS_BLOCK_SIZE +
			      sizeof(struct fs_blk_hdr);
	uint32_t j = i % FS_BITMAP_BITS;

	return (bits[j / 8] >> (j % 8)) & 1;
}

static void bm_set(struct upg *u, uint32_t i)
{
	uint8_t *bits = u->bm + (size_t)(i / FS_BITMAP_BITS) * FS_BLOCK_SIZE +
			sizeof(struct fs_blk_hdr);
	uint32_t j = i % FS_BITMAP_BITS;

	bits[j / 8] |= (uint8_t)(1u << (j % 8));
}

/* Group 0's bitmaps into u->bm; the first run of @n free blocks of its
 * data area into *@first (a group bit). */
static int upg_find_room(struct upg *u, uint32_t n, uint32_t *first)
{
	uint64_t g0 = fs_rgrp_blk(u->sb, 0);
	uint32_t len = fs_rgrp_len(u->sb, 0), run = 0;

	u->nbm = fs_rgrp_nbitmaps(len);
	u->bm = bd_buf_alloc((size_t)u->nbm * FS_BLOCK_SIZE);
	if (u->bm == NULL)
		return upg_fail(u, -ENOMEM, "out of memory");
	for (uint32_t k = 0; k < u->nbm; k++) {
		uint8_t *p = u->bm + (size_t)k * FS_BLOCK_SIZE;

		if (blk_rw(u, g0 + 1 + k, p, 0) < 0)
			return upg_fail(u, -EIO, "cannot read a bitmap");
		if (fs_blk_verify(p, FS_BT_BITMAP, g0 + 1 + k) < 0)
			return upg_fail(u, -EUCLEAN,
					"a bitmap of group 0 is "
					"bad (run fsck.ucfs -y)");
	}
	for (uint32_t i = 1 + u->nbm; i < len; i++) {
		run = bm_bit(u, i) ? 0 : run + 1;
		if (run == n) {
			*first = i + 1 - n;
			return 0;
		}
	}
	return upg_fail(u, -ENOSPC,
			"resource group 0 has no run of free "
			"blocks for the records (1 + one per slot): free "
			"some space written early on and try again");
}

/* The primary superblock into u->sb, checked: 0, 1 if it has the
 * records already, or -errno. */
static int upg_load_sb(struct upg *u)
{
	char msg[200] = "";
	int ret;

	if (blk_rw(u, FS_SB_BLK, u->sb, 0) < 0)
		return upg_fail(u, -EIO, "cannot read the superblock");
	if (fs_blk_verify(u->sb, FS_BT_SB, FS_SB_BLK) < 0)
		return upg_fail(u, -EUCLEAN,
				"the superblock is bad (block "
				"0: run fsck.ucfs -y first)");
	ret = fs_sb_check(u->sb, bd_size(u->bd) / FS_BLOCK_SIZE, 1, msg,
			  sizeof(msg));
	if (ret < 0)
		return upg_fail(u, ret, msg);
	return (u->sb->feature_ro_compat & FS_FEATURE_RO_COMPAT_STATFS) != 0;
}

/* The sums of every group header's free blocks and inodes. */
static int upg_sums(struct upg *u, int64_t *nfree, int64_t *inodes)
{
	const struct fs_rgrp_hdr *rh = (const void *)u->blk;

	*nfree = 0;
	*inodes = 0;
	for (uint32_t g = 0; g < u->sb->rgrp_count; g++) {
		uint64_t b = fs_rgrp_blk(u->sb, g);

		if (blk_rw(u, b, u->blk, 0) < 0 ||
		    fs_blk_verify(rh, FS_BT_RGRP, b) < 0)
			return upg_fail(u, -EUCLEAN,
					"a resource group header "
					"is bad (run fsck.ucfs -y)");
		*nfree += rh->free;
		*inodes += rh->dinodes;
	}
	return 0;
}

/* Group 0's bits [@first, @first + @n) set, then its header's free
 * count less @n. */
static int upg_mark(struct upg *u, uint32_t first, uint32_t n)
{
	struct fs_rgrp_hdr *rh = (void *)u->blk;
	uint64_t g0 = fs_rgrp_blk(u->sb, 0);
	int ret = 0;

	for (uint32_t i = first; i < first + n; i++)
		bm_set(u, i);
	for (uint32_t k = first / FS_BITMAP_BITS;
	     k <= (first + n - 1) / FS_BITMAP_BITS && ret == 0; k++) {
		struct fs_bitmap_blk *p =
		    (void *)(u->bm + (size_t)k * FS_BLOCK_SIZE);

		fs_blk_seal(p, FS_BT_BITMAP, g0 + 1 + k, p->hdr.seq);
		ret = blk_rw(u, g0 + 1 + k, p, 1);
	}
	if (ret == 0)
		ret = blk_rw(u, g0, rh, 0);
	if (ret == 0 && fs_blk_verify(rh, FS_BT_RGRP, g0) < 0)
		ret = -EUCLEAN;
	if (ret == 0) {
		rh->free -= n;
		fs_blk_seal(rh, FS_BT_RGRP, g0, rh->hdr.seq);
		ret = blk_rw(u, g0, rh, 1);
	}
	return ret;
}

/* The superblock with the bit and @at, the primary then the backup. */
static int upg_sb(struct upg *u, uint64_t at)
{
	int ret;

	u->sb->feature_ro_compat |= FS_FEATURE_RO_COMPAT_STATFS;
	u->sb->statfs_blk = at;
	fs_blk_seal(u->sb, FS_BT_SB, FS_SB_BLK, u->sb->hdr.seq);
	ret = bd_write(u->bd, u->sb, FS_BLOCK_SIZE, FS_SB_BLK * FS_BLOCK_SIZE,
		       BD_IO_FUA);
	if (ret < 0)
		return ret;
	memcpy(u->blk, u->sb, FS_BLOCK_SIZE);
	fs_blk_seal(u->blk, FS_BT_SB, FS_SB_BACKUP_BLK, u->sb->hdr.seq);
	return bd_write(u->bd, u->blk, FS_BLOCK_SIZE,
			FS_SB_BACKUP_BLK * FS_BLOCK_SIZE, BD_IO_FUA);
}

/* The records written at group 0's bit @first (n = 1 + slots), each step
 * on the disk before the next (fs_fsck.h says why in this order). */
static int upg_write(struct upg *u, uint32_t first, uint32_t n, int64_t nfree,
		     int64_t inodes)
{
	uint64_t at = fs_rgrp_blk(u->sb, 0) + first;
	int ret = 0;

	for (uint32_t i = 0; i < n && ret == 0; i++) {
		rec_fill(u->blk, i, at + i, nfree, inodes);
		ret = blk_rw(u, at + i, u->blk, 1);
	}
	if (ret == 0)
		ret = bd_flush(u->bd);
	if (ret == 0)
		ret = upg_mark(u, first, n);
	if (ret == 0)
		ret = bd_flush(u->bd);
	if (ret == 0)
		ret = upg_sb(u, at);
	if (ret < 0)
		return upg_fail(u, ret == -EUCLEAN ? ret : -EIO,
				"write error while adding the records");
	return 0;
}

int fs_fsck_add_statfs(struct bd_dev *bd, char *why, size_t whylen)
{
	struct upg u = {.bd = bd, .why = why, .whylen = whylen};
	int64_t nfree = 0, inodes = 0;
	uint32_t n = 0, first = 0;
	int ret;

	u.sb = bd_buf_alloc(FS_BLOCK_SIZE);
	u.blk = bd_buf_alloc(FS_BLOCK_SIZE);
	ret = u.sb == NULL || u.blk == NULL
		  ? upg_fail(&u, -ENOMEM, "out of memory")
		  : upg_load_sb(&u);
	if (ret == 0)
		ret = upg_slots_free(&u);
	if (ret == 0) {
		n = 1 + u.sb->slot_count;
		ret = upg_find_room(&u, n, &first);
	}
	if (ret == 0)
		ret = upg_sums(&u, &nfree, &inodes);
	if (ret == 0)
		ret = upg_write(&u, first, n, nfree - n, inodes);
	free(u.bm);
	free(u.blk);
	free(u.sb);
	return ret;
}
