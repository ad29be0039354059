/*
 * fs_fsck_journal.c — fsck's read-only view of the journals.
 *
 * A crash leaves committed transactions in a slot's journal that were not
 * written in place yet; a mount replays them. fsck must judge the image a
 * mount would see, without writing, so it parses each journal exactly as
 * FORMAT.md describes replay (from the header's tail: descriptor(s),
 * images, a commit record with the same sequence and a matching chained
 * crc; stop at the first block that does not fit) and keeps the images in
 * an in-memory overlay keyed by home block number. fsck_read() reads
 * through it. An image older than a revoke of the same block (a later
 * transaction freed the block) is not applied.
 *
 * Invariant: an overlay image is a verified metadata block whose header
 * names its home block.
 */
#include "fusefs/fs_fsck_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct jimg {
	uint64_t home, pos, seq;
};

struct jrev {
	uint64_t home, seq;
};

struct jscan {
	struct fsck *ck;
	uint64_t jstart;
	uint64_t log_blocks;
	struct jimg *img;
	size_t nimg, capimg;
	struct jrev *rev;
	size_t nrev, caprev;
};

static int grow(void **arr, size_t *cap, size_t need, size_t elt)
{
	size_t c = *cap ? *cap : 64;
	void *n;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	n = realloc(*arr, c * elt);
	if (n == NULL)
		return -ENOMEM;
	*arr = n;
	*cap = c;
	return 0;
}

static size_t ovl_slot(const struct fsck *ck, uint64_t blkno)
{
	return (size_t)((blkno * 0x9e3779b97f4a7c15ull) >> 20) &
	       (ck->ovl_cap - 1);
}

static struct fsck_ovl_ent *ovl_find(struct fsck *ck, uint64_t blkno)
{
	size_t i;

	if (ck->ovl_cap == 0)
		return NULL;
	for (i = ovl_slot(ck, blkno); ck->ovl[i].blkno != 0;
	     i = (i + 1) & (ck->ovl_cap - 1))
		if (ck->ovl[i].blkno == blkno)
			return &ck->ovl[i];
	return NULL;
}

static int ovl_grow(struct fsck *ck)
{
	struct fsck_ovl_ent *old = ck->ovl;
	size_t oldcap = ck->ovl_cap;

	ck->ovl_cap = oldcap ? oldcap * 2 : 1024;
	ck->ovl = calloc(ck->ovl_cap, sizeof(*ck->ovl));
	if (ck->ovl == NULL) {
		ck->ovl = old;
		ck->ovl_cap = oldcap;
		return -ENOMEM;
	}
	for (size_t i = 0; i < oldcap; i++) {
		size_t j;

		if (old[i].blkno == 0)
			continue;
		for (j = ovl_slot(ck, old[i].blkno); ck->ovl[j].blkno != 0;
		     j = (j + 1) & (ck->ovl_cap - 1))
			;
		ck->ovl[j] = old[i];
	}
	free(old);
	return 0;
}

/* Store a copy of @data as the image of @blkno (replacing an older one). */
static int ovl_put(struct fsck *ck, uint64_t blkno, const void *data)
{
	struct fsck_ovl_ent *e = ovl_find(ck, blkno);
	size_t i;

	if (e == NULL) {
		if ((ck->ovl_n + 1) * 2 > ck->ovl_cap && ovl_grow(ck) < 0)
			return -ENOMEM;
		for (i = ovl_slot(ck, blkno); ck->ovl[i].blkno != 0;
		     i = (i + 1) & (ck->ovl_cap - 1))
			;
		e = &ck->ovl[i];
		e->data = malloc(FS_BLOCK_SIZE);
		if (e->data == NULL)
			return -ENOMEM;
		e->blkno = blkno;
		ck->ovl_n++;
	}
	memcpy(e->data, data, FS_BLOCK_SIZE);
	return 0;
}

void fsck_overlay_free(struct fsck *ck)
{
	for (size_t i = 0; i < ck->ovl_cap; i++)
		free(ck->ovl[i].data);
	free(ck->ovl);
	ck->ovl = NULL;
	ck->ovl_cap = ck->ovl_n = 0;
}

int fsck_read(struct fsck *ck, uint64_t blkno, void *buf)
{
	struct fsck_ovl_ent *e;
	uint64_t limit = ck->nblocks ? ck->nblocks : ck->dev_blocks;

	if (blkno >= limit)
		return -EINVAL;
	e = ovl_find(ck, blkno);
	if (e != NULL) {
		memcpy(buf, e->data, FS_BLOCK_SIZE);
		return 0;
	}
	return bd_read(ck->bd, buf, FS_BLOCK_SIZE, blkno << FS_BLOCK_SHIFT) <
			       0
		       ? -EIO
		       : 0;
}

/* The journal log block at @pos, as on disk (the overlay never holds
 * journal blocks). 0 or -EIO. */
static int log_read(struct jscan *js, uint64_t pos, void *buf)
{
	return bd_read(js->ck->bd, buf, FS_BLOCK_SIZE,
		       (js->jstart + 1 + pos) << FS_BLOCK_SHIFT) < 0
		       ? -EIO
		       : 0;
}

/* 1 descriptor, 2 commit, 0 neither (for sequence @seq), -EIO. */
static int log_kind(struct jscan *js, uint64_t pos, uint64_t seq, void *buf)
{
	const struct fs_jdesc *d = buf;

	if (log_read(js, pos, buf) < 0)
		return -EIO;
	if (fs_blk_verify(buf, 0, js->jstart + 1 + pos) < 0 ||
	    d->hdr.seq != seq)
		return 0;
	if (d->hdr.type == FS_BT_JDESC && d->count <= FS_JDESC_MAX)
		return 1;
	return d->hdr.type == FS_BT_JCOMMIT ? 2 : 0;
}

static int add_entry(struct jscan *js, const struct fs_jdesc_ent *e,
		     uint64_t pos, uint64_t seq)
{
	if (e->flags & FS_JDESC_REVOKE) {
		if (grow((void **)&js->rev, &js->caprev, js->nrev + 1,
			 sizeof(*js->rev)) < 0)
			return -ENOMEM;
		js->rev[js->nrev++] = (struct jrev){ e->blkno, seq };
		return 0;
	}
	if (grow((void **)&js->img, &js->capimg, js->nimg + 1,
		 sizeof(*js->img)) < 0)
		return -ENOMEM;
	js->img[js->nimg++] = (struct jimg){ e->blkno, pos, seq };
	return 0;
}

/* One transaction at *pos: 1 complete (advances *pos), 0 not, -errno. */
static int scan_tx(struct jscan *js, uint64_t *pos, uint64_t seq,
		   void *buf, void *dbuf)
{
	const struct fs_jcommit *c = buf;
	size_t img0 = js->nimg, rev0 = js->nrev;
	uint64_t p = *pos, nblocks = 0;
	uint32_t crc = 0;
	int k, first = 1, ret;

	for (;;) {
		const struct fs_jdesc *d = buf;

		if (nblocks + 1 >= js->log_blocks)
			goto out_bad;
		k = log_kind(js, p, seq, buf);
		if (k < 0)
			return k;
		if (k == 0 || (k == 2 && first))
			goto out_bad;
		if (k == 2)
			break;
		first = 0;
		crc = fs_crc32c(crc, buf, FS_BLOCK_SIZE);
		nblocks++;
		p = (p + 1) % js->log_blocks;
		for (uint32_t i = 0; i < d->count; i++) {
			int is_img = !(d->ent[i].flags & FS_JDESC_REVOKE);

			ret = add_entry(js, &d->ent[i], p, seq);
			if (ret < 0)
				return ret;
			if (!is_img)
				continue;
			if (nblocks + 1 >= js->log_blocks)
				goto out_bad;
			if (log_read(js, p, dbuf) < 0)
				return -EIO;
			crc = fs_crc32c(crc, dbuf, FS_BLOCK_SIZE);
			nblocks++;
			p = (p + 1) % js->log_blocks;
		}
	}
	if (c->nblocks != nblocks || c->tx_crc != crc)
		goto out_bad;
	*pos = (p + 1) % js->log_blocks;
	return 1;
out_bad:
	js->nimg = img0;
	js->nrev = rev0;
	return 0;
}

static uint64_t revoked_after(const struct jscan *js, uint64_t home)
{
	uint64_t best = 0;

	for (size_t i = 0; i < js->nrev; i++)
		if (js->rev[i].home == home && js->rev[i].seq > best)
			best = js->rev[i].seq;
	return best;
}

static int apply(struct jscan *js, void *dbuf)
{
	struct fsck *ck = js->ck;

	for (size_t i = 0; i < js->nimg; i++) {
		const struct jimg *m = &js->img[i];

		if (revoked_after(js, m->home) > m->seq)
			continue;
		if (m->home >= ck->nblocks || m->home < FS_SLOTAREA_BLK) {
			fsck_err(ck, 0, "journal: image for block %llu "
				 "outside the filesystem",
				 (unsigned long long)m->home);
			continue;
		}
		if (log_read(js, m->pos, dbuf) < 0)
			return -EIO;
		if (fs_blk_verify(dbuf, 0, m->home) < 0) {
			fsck_err(ck, 0, "journal: committed image of block "
				 "%llu (log position %llu) fails its checksum",
				 (unsigned long long)m->home,
				 (unsigned long long)m->pos);
			continue;
		}
		if (ovl_put(ck, m->home, dbuf) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int scan_slot(struct fsck *ck, unsigned slot, void *buf, void *dbuf)
{
	struct jscan js = { .ck = ck };
	const struct fs_jhdr *h = buf;
	uint64_t pos, seq, scanned = 0;
	unsigned ntx = 0;
	int ret;

	js.jstart = fs_journal_blk(&ck->sb, slot);
	js.log_blocks = ck->sb.journal_blocks - 1;
	if (fsck_read(ck, js.jstart, buf) < 0 ||
	    fs_blk_verify(buf, FS_BT_JHDR, js.jstart) < 0) {
		fsck_err(ck, 0, "journal %u: header block %llu is bad "
			 "(checksum, type or block number)", slot,
			 (unsigned long long)js.jstart);
		return 0;
	}
	if (h->slot != slot || h->log_blocks != js.log_blocks ||
	    h->tail_pos >= js.log_blocks) {
		fsck_err(ck, 0, "journal %u: header block %llu: slot %u, "
			 "log_blocks %u, tail_pos %llu inconsistent", slot,
			 (unsigned long long)js.jstart, h->slot,
			 h->log_blocks, (unsigned long long)h->tail_pos);
		return 0;
	}
	pos = h->tail_pos;
	seq = h->tail_seq;
	while (scanned < js.log_blocks) {
		uint64_t before = pos;

		ret = scan_tx(&js, &pos, seq, buf, dbuf);
		if (ret < 0)
			goto out;
		if (ret == 0)
			break;
		scanned += (pos + js.log_blocks - before) % js.log_blocks;
		ntx++;
		seq++;
	}
	ret = apply(&js, dbuf);
	if (ret == 0 && ntx > 0) {
		fsck_note(ck, "journal %u: %u committed transaction(s) not "
			  "yet replayed: checking the image as replay "
			  "would leave it", slot, ntx);
		ck->res->journal_tx += ntx;
	}
out:
	free(js.img);
	free(js.rev);
	return ret;
}

int fsck_journal_overlay(struct fsck *ck)
{
	void *buf = bd_buf_alloc(FS_BLOCK_SIZE);
	void *dbuf = bd_buf_alloc(FS_BLOCK_SIZE);
	int ret = -ENOMEM;

	if (buf == NULL || dbuf == NULL)
		goto out;
	ret = 0;
	for (unsigned s = 0; s < ck->sb.slot_count && ret == 0; s++)
		ret = scan_slot(ck, s, buf, dbuf);
out:
	free(buf);
	free(dbuf);
	return ret;
}
