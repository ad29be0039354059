/*
 * fs_fsck_journal.c — fsck's view of the journals: the block overlay.
 *
 * A crash leaves committed transactions in a slot's journal that were not
 * written in place yet; a mount replays them. fsck must judge the image a
 * mount would see, without writing, so it parses each journal with the
 * parser replay uses (fs_jscan.c: the same structure and crc checks, the
 * same selection of the last unrevoked image of each block) and keeps
 * the selected images in an in-memory overlay keyed by home block number.
 * fsck_read() reads through it. A checkpoint record drops what the scan
 * found before it (written home already); a torn tail ends the scan
 * (normal after a crash); an image of the committed range that fails its
 * own checksum or lies outside the filesystem is reported and not
 * applied.
 *
 * Repair (fsck -y) uses the overlay twice more: a slot whose scan found
 * no problem is then replayed for real (replay_slot: the same scan again,
 * images written home, flush, header tail moved, as a mount does), and
 * the fixes of fs_fsck_repair.c are put in it as dirty blocks
 * (fsck_write) and written home together (fsck_write_dirty).
 *
 * Invariant: an overlay image is a verified metadata block whose header
 * names its home block.
 */
#include "fusefs/fsck/fs_fsck_internal.h"
#include "fusefs/core/fs_jscan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Store a copy of @data as the image of @blkno (replacing an older
 * one). Its entry, or NULL: out of memory. */
static struct fsck_ovl_ent *ovl_put(struct fsck *ck, uint64_t blkno,
				    const void *data)
{
	struct fsck_ovl_ent *e = fsck_tab_get(&ck->ovl, blkno);

	if (e == NULL)
		return NULL;
	if (e->data == NULL)
		e->data = bd_buf_alloc(FS_BLOCK_SIZE);
	if (e->data == NULL)
		return NULL;
	memcpy(e->data, data, FS_BLOCK_SIZE);
	return e;
}

int fsck_write(struct fsck *ck, uint64_t blkno, const void *buf)
{
	struct fsck_ovl_ent *e = ovl_put(ck, blkno, buf);

	if (e == NULL)
		return -ENOMEM;
	e->dirty = 1;
	return 0;
}

int fsck_write_dirty(struct fsck *ck)
{
	for (size_t i = 0; i < ck->ovl.cap; i++) {
		struct fsck_ovl_ent *e = fsck_tab_at(&ck->ovl, i);

		if (e == NULL || !e->dirty)
			continue;
		if (bd_write(ck->bd, e->data, FS_BLOCK_SIZE,
			     e->blkno << FS_BLOCK_SHIFT, 0) < 0)
			return -EIO;
		e->dirty = 0;
		ck->res->blocks_written++;
	}
	return bd_flush(ck->bd) < 0 ? -EIO : 0;
}

void fsck_overlay_free(struct fsck *ck)
{
	for (size_t i = 0; i < ck->ovl.cap; i++) {
		struct fsck_ovl_ent *e = fsck_tab_at(&ck->ovl, i);

		if (e != NULL)
			free(e->data);
	}
	fsck_tab_free(&ck->ovl);
}

int fsck_read(struct fsck *ck, uint64_t blkno, void *buf)
{
	struct fsck_ovl_ent *e;
	uint64_t limit = ck->nblocks ? ck->nblocks : ck->dev_blocks;

	if (blkno >= limit)
		return -EINVAL;
	e = fsck_tab_find(&ck->ovl, blkno);
	if (e != NULL && e->data != NULL) {
		memcpy(buf, e->data, FS_BLOCK_SIZE);
		return 0;
	}
	return bd_read(ck->bd, buf, FS_BLOCK_SIZE, blkno << FS_BLOCK_SHIFT) <
			       0
		       ? -EIO
		       : 0;
}

static int ovl_apply(void *ctx, uint64_t home, const void *blk)
{
	return ovl_put(ctx, home, blk) != NULL ? 0 : -ENOMEM;
}

static void ovl_skip(void *ctx, uint64_t home, uint64_t pos,
		     enum fs_jscan_skip why)
{
	struct fsck *ck = ctx;

	if (why == FS_JSCAN_OUTSIDE)
		fsck_err(ck, K_JOURNAL, "journal: image for block %llu "
			 "outside the filesystem", (unsigned long long)home);
	else
		fsck_err(ck, K_JOURNAL, "journal: committed image of block "
			 "%llu (log position %llu) fails its checksum",
			 (unsigned long long)home, (unsigned long long)pos);
}

static const struct fs_jscan_ops ovl_ops = {
	.apply = ovl_apply, .skip = ovl_skip,
};

/* Repair: the images the overlay got from this slot, written home. */
static int home_apply(void *ctx, uint64_t home, const void *blk)
{
	struct fsck *ck = ctx;

	memcpy(ck->buf2, blk, FS_BLOCK_SIZE);
	if (bd_write(ck->bd, ck->buf2, FS_BLOCK_SIZE, home << FS_BLOCK_SHIFT,
		     0) < 0)
		return -EIO;
	ck->res->blocks_written++;
	return 0;
}

static const struct fs_jscan_ops home_ops = { .apply = home_apply };

/*
 * Repair: replay @slot's journal for real, as a mount does (the same
 * scan, so the same images): write them home, flush, then move the
 * header's tail past them, skipping one sequence. 0 or -errno.
 */
static int replay_slot(struct fsck *ck, unsigned slot,
		       const struct fs_jhdr *h, void *buf)
{
	struct fs_jscan_res res;
	int ret;

	ret = fs_jscan(ck->bd, &ck->sb, slot, h->tail_pos, h->tail_seq,
		       &home_ops, ck, &res);
	if (ret == 0)
		ret = bd_flush(ck->bd) < 0 ? -EIO : 0;
	if (ret == 0)
		ret = fs_jhdr_write(ck->bd, &ck->sb, slot, buf, res.end_pos,
				    res.next_seq + 1, 0);
	if (ret < 0)
		return ret;
	ck->res->replayed_tx += res.ntx;
	fsck_note(ck, "journal %u: %u transaction(s) replayed", slot,
		  res.ntx);
	return 0;
}

static int scan_slot(struct fsck *ck, unsigned slot, void *buf)
{
	const struct fs_jhdr *h = buf;
	uint64_t jstart = fs_journal_blk(&ck->sb, slot);
	struct fs_jscan_res res;
	uint64_t errors;
	int ret;

	if (fsck_read(ck, jstart, buf) < 0)
		ret = -EUCLEAN;
	else
		ret = fs_jhdr_check(h, &ck->sb, slot);
	if (ret == -EUCLEAN) {
		fsck_err(ck, K_JOURNAL, "journal %u: header block %llu is bad "
			 "(checksum, type or block number)", slot,
			 (unsigned long long)jstart);
		return 0;
	}
	if (ret < 0) {
		fsck_err(ck, K_JOURNAL, "journal %u: header block %llu: slot "
			 "%u, log_blocks %u, tail_pos %llu inconsistent", slot,
			 (unsigned long long)jstart, h->slot, h->log_blocks,
			 (unsigned long long)h->tail_pos);
		return 0;
	}
	errors = ck->res->errors;
	ret = fs_jscan(ck->bd, &ck->sb, slot, h->tail_pos, h->tail_seq,
		       &ovl_ops, ck, &res);
	if (ret == 0 && res.nckpt > 0)
		fsck_note(ck, "journal %u: %u checkpoint record(s): what "
			  "precedes the last one is written home", slot,
			  res.nckpt);
	if (ret < 0 || res.ntx == 0)
		return ret;
	fsck_note(ck, "journal %u: %u committed transaction(s) not yet "
		  "replayed: checking the image as replay would leave it",
		  slot, res.ntx);
	ck->res->journal_tx += res.ntx;
	if (!ck->o->repair || ck->reported[K_SB] > 0)
		return 0;
	if (ck->res->errors != errors) {
		fsck_note(ck, "journal %u: not replayed (errors in its "
			  "committed transactions)", slot);
		return 0;
	}
	return replay_slot(ck, slot, h, buf);
}

int fsck_journal_overlay(struct fsck *ck)
{
	void *buf = bd_buf_alloc(FS_BLOCK_SIZE);
	int ret = 0;

	if (buf == NULL)
		return -ENOMEM;
	for (unsigned s = 0; s < ck->sb.slot_count && ret == 0; s++)
		ret = scan_slot(ck, s, buf);
	free(buf);
	return ret;
}
