/*
 * fs_fsck_statfs.c — the statfs records (ro_compat STATFS; FORMAT.md
 * "Statfs records"): each is checked (type, slot) and counted in use, and
 * the master's counts plus every slot's change must equal the free
 * blocks the bitmaps show and the inodes the walk found. fsck -y
 * rewrites them from the repaired group headers: the master gets the
 * totals, every change zero.
 */
#include "fusefs/fsck/fs_fsck_internal.h"

#include <errno.h>
#include <string.h>

#define ULL(x) ((unsigned long long)(x))

static int have_records(const struct fsck *ck)
{
	return (ck->sb.feature_ro_compat & FS_FEATURE_RO_COMPAT_STATFS) != 0;
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

		memset(r, 0, FS_BLOCK_SIZE);
		r->slot = i == 0 ? FS_STATFS_MASTER : i - 1;
		if (i == 0) {
			r->free = nfree;
			r->dinodes = inodes;
		}
		fs_blk_seal(r, FS_BT_STATFS, b, 0);
		ret = fsck_write(ck, b, r);
	}
	return ret;
}
