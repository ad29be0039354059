/*
 * fs_jscan.c — parse a slot's journal and select what a replay writes
 * (fs_jscan.h; rules in FORMAT.md "Journal" and "Replay").
 *
 * Two passes over the log. The scan (scan_tx per transaction) reads the
 * log in order through a window of JS_WIN blocks, checks each
 * transaction's structure and chained crc, and records every image
 * {home, log position, seq} and every revoke {home, seq}; an incomplete
 * transaction leaves no record. A checkpoint record between two
 * transactions (scan_ckpt) says that everything before it is written
 * home: the records so far are dropped, so a replay never writes an image
 * older than the record over a block another node changed since. The
 * selection (select_imgs) marks the last image of each home block, unless
 * a revoke with a higher sequence exists; the apply pass (apply_imgs)
 * rereads the marked images in log order and hands on those inside the
 * filesystem that verify (and, for a caller that wants problems
 * reported, checks the older unrevoked images too).
 *
 * Invariants: the scan never reads more than log_blocks positions per
 * transaction nor the whole log more than once; an image handed to
 * ops->apply has passed fs_blk_verify() against its home block number.
 */
#include "fusefs/core/fs_jscan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blockdev/bd.h"
#include "fusefs/fs_format.h"

#define JS_WIN 256u	/* log blocks read at once */

struct js_img {
	uint64_t home, pos, seq;
};

struct js_rev {
	uint64_t home, seq;
};

struct jscan {
	struct bd_dev *bd;
	uint64_t jstart;	/* journal header block */
	uint64_t total;		/* filesystem blocks */
	uint32_t log_blocks;
	struct js_img *img;
	size_t nimg, capimg;
	struct js_rev *rev;
	size_t nrev, caprev;
	uint8_t *win;		/* log blocks wpos .. wpos + wn - 1 */
	uint64_t wpos;
	unsigned wn;
	void *desc;		/* the descriptor being parsed */
};

int fs_jhdr_check(const struct fs_jhdr *h, const struct fs_sb *sb,
		  unsigned slot)
{
	uint64_t blk = fs_journal_blk(sb, slot);

	if (fs_blk_verify(h, FS_BT_JHDR, blk) < 0)
		return -EUCLEAN;
	if (h->slot != slot || h->log_blocks != sb->journal_blocks - 1 ||
	    h->tail_pos >= h->log_blocks)
		return -EINVAL;
	return 0;
}

int fs_jhdr_write(struct bd_dev *bd, const struct fs_sb *sb, unsigned slot,
		  void *buf, uint64_t tail_pos, uint64_t tail_seq, int clean)
{
	struct fs_jhdr *h = buf;
	uint64_t blk = fs_journal_blk(sb, slot);

	memset(h, 0, FS_BLOCK_SIZE);
	h->slot = slot;
	h->log_blocks = sb->journal_blocks - 1;
	h->tail_pos = tail_pos;
	h->tail_seq = tail_seq;
	h->clean = clean;
	fs_blk_seal(h, FS_BT_JHDR, blk, 0);
	return bd_write(bd, h, FS_BLOCK_SIZE, blk << FS_BLOCK_SHIFT,
			BD_IO_FUA) < 0 ? -EIO : 0;
}

/* Log block @pos, a pointer into the window valid until the next call.
 * 0 or -EIO. */
static int log_block(struct jscan *js, uint64_t pos, const uint8_t **out)
{
	if (pos < js->wpos || pos >= js->wpos + js->wn) {
		unsigned n = js->log_blocks - pos < JS_WIN ?
			(unsigned)(js->log_blocks - pos) : JS_WIN;

		js->wn = 0;
		if (bd_read(js->bd, js->win, (size_t)n * FS_BLOCK_SIZE,
			    (js->jstart + 1 + pos) << FS_BLOCK_SHIFT) < 0)
			return -EIO;
		js->wpos = pos;
		js->wn = n;
	}
	*out = js->win + (pos - js->wpos) * FS_BLOCK_SIZE;
	return 0;
}

static uint64_t log_next(const struct jscan *js, uint64_t pos)
{
	return pos + 1 == js->log_blocks ? 0 : pos + 1;
}

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

static int add_img(struct jscan *js, uint64_t home, uint64_t pos,
		   uint64_t seq)
{
	if (grow((void **)&js->img, &js->capimg, js->nimg + 1,
		 sizeof(*js->img)) < 0)
		return -ENOMEM;
	js->img[js->nimg++] = (struct js_img){ home, pos, seq };
	return 0;
}

static int add_rev(struct jscan *js, uint64_t home, uint64_t seq)
{
	if (grow((void **)&js->rev, &js->caprev, js->nrev + 1,
		 sizeof(*js->rev)) < 0)
		return -ENOMEM;
	js->rev[js->nrev++] = (struct js_rev){ home, seq };
	return 0;
}

/* Kind of log block @pos for sequence @seq: 1 descriptor (copied to
 * js->desc), 2 commit record (*out points to it), 3 checkpoint record,
 * 0 none of them, -EIO. */
static int log_kind(struct jscan *js, uint64_t pos, uint64_t seq,
		    const uint8_t **out)
{
	const struct fs_jdesc *d;
	int ret = log_block(js, pos, out);

	if (ret < 0)
		return ret;
	d = (const void *)*out;
	if (fs_blk_verify(d, 0, js->jstart + 1 + pos) < 0 ||
	    d->hdr.seq != seq)
		return 0;
	if (d->hdr.type == FS_BT_JDESC && d->count <= FS_JDESC_MAX) {
		memcpy(js->desc, d, FS_BLOCK_SIZE);
		return 1;
	}
	if (d->hdr.type == FS_BT_JCKPT)
		return 3;
	return d->hdr.type == FS_BT_JCOMMIT ? 2 : 0;
}

/* The entries of the descriptor in js->desc, whose images start at *p:
 * record them, chain the images into *crc. 1 fits, 0 runs past the log,
 * -errno. */
static int scan_desc(struct jscan *js, uint64_t seq, uint64_t *p,
		     uint64_t *nblocks, uint32_t *crc)
{
	const struct fs_jdesc *d = js->desc;
	const uint8_t *blk;
	int ret;

	for (uint32_t i = 0; i < d->count; i++) {
		const struct fs_jdesc_ent *e = &d->ent[i];

		if (e->flags & FS_JDESC_REVOKE) {
			ret = add_rev(js, e->blkno, seq);
			if (ret < 0)
				return ret;
			continue;
		}
		if (*nblocks + 1 >= js->log_blocks)
			return 0;
		ret = log_block(js, *p, &blk);
		if (ret == 0)
			ret = add_img(js, e->blkno, *p, seq);
		if (ret < 0)
			return ret;
		*crc = fs_crc32c(*crc, blk, FS_BLOCK_SIZE);
		(*nblocks)++;
		*p = log_next(js, *p);
	}
	return 1;
}

/* One transaction of sequence @seq at *pos: 1 complete (its records are
 * kept, *pos moves past it), 0 not (nothing kept), -errno. */
static int scan_tx(struct jscan *js, uint64_t *pos, uint64_t seq)
{
	size_t img0 = js->nimg, rev0 = js->nrev;
	const struct fs_jcommit *c;
	const uint8_t *blk;
	uint64_t p = *pos, nblocks = 0;
	uint32_t crc = 0;
	int k, first = 1;

	for (;;) {
		if (nblocks + 1 >= js->log_blocks)
			goto out_bad;
		k = log_kind(js, p, seq, &blk);
		if (k < 0)
			return k;
		if (k == 0 || k == 3 || (k == 2 && first))
			goto out_bad;
		if (k == 2)
			break;
		first = 0;
		crc = fs_crc32c(crc, js->desc, FS_BLOCK_SIZE);
		nblocks++;
		p = log_next(js, p);
		k = scan_desc(js, seq, &p, &nblocks, &crc);
		if (k < 0)
			return k;
		if (k == 0)
			goto out_bad;
	}
	c = (const void *)blk;
	if (c->nblocks != nblocks || c->tx_crc != crc)
		goto out_bad;
	*pos = log_next(js, p);
	return 1;
out_bad:
	js->nimg = img0;
	js->nrev = rev0;
	return 0;
}

/* A checkpoint record for @seq at *pos: every transaction before it is
 * written home, so what the scan recorded so far is dropped. 1 (*pos
 * moves past it), 0 not one, -EIO. */
static int scan_ckpt(struct jscan *js, uint64_t *pos, uint64_t seq,
		     struct fs_jscan_res *res)
{
	const uint8_t *blk;
	int k = log_kind(js, *pos, seq, &blk);

	if (k != 3)
		return k < 0 ? k : 0;
	js->nimg = 0;
	js->nrev = 0;
	res->ntx = 0;
	res->nckpt++;
	*pos = log_next(js, *pos);
	return 1;
}

static int rev_cmp(const void *a, const void *b)
{
	const struct js_rev *x = a, *y = b;

	if (x->home != y->home)
		return x->home < y->home ? -1 : 1;
	return x->seq < y->seq ? 1 : x->seq > y->seq ? -1 : 0;
}

/* Highest sequence revoking @home (rev sorted by rev_cmp), or 0. */
static uint64_t revoked_seq(const struct jscan *js, uint64_t home)
{
	size_t lo = 0, hi = js->nrev;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (js->rev[mid].home < home)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < js->nrev && js->rev[lo].home == home)
		return js->rev[lo].seq;
	return 0;
}

struct js_last {
	uint64_t home;
	size_t idx;
};

static int last_cmp(const void *a, const void *b)
{
	const struct js_last *x = a, *y = b;

	if (x->home != y->home)
		return x->home < y->home ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* What becomes of each image (select_imgs). */
enum { IMG_REVOKED, IMG_OLDER, IMG_LAST };

/* Fill @st: IMG_LAST for the last image of each home block, IMG_OLDER
 * for the earlier ones, IMG_REVOKED for those a later transaction
 * revoked. */
static int select_imgs(struct jscan *js, uint8_t *st)
{
	struct js_last *l = malloc((js->nimg + 1) * sizeof(*l));

	if (l == NULL)
		return -ENOMEM;
	if (js->nrev > 0)
		qsort(js->rev, js->nrev, sizeof(*js->rev), rev_cmp);
	for (size_t i = 0; i < js->nimg; i++)
		l[i] = (struct js_last){ js->img[i].home, i };
	qsort(l, js->nimg, sizeof(*l), last_cmp);
	for (size_t i = 0; i < js->nimg; i++) {
		const struct js_img *m = &js->img[l[i].idx];

		if (revoked_seq(js, m->home) > m->seq)
			st[l[i].idx] = IMG_REVOKED;
		else if (i + 1 < js->nimg && l[i + 1].home == l[i].home)
			st[l[i].idx] = IMG_OLDER;
		else
			st[l[i].idx] = IMG_LAST;
	}
	free(l);
	return 0;
}

/* In log order: hand each unrevoked last image on; with ops->skip, also
 * check the older unrevoked ones, so that every bad committed image is
 * reported, applied or not. */
static int apply_imgs(struct jscan *js, const struct fs_jscan_ops *ops,
		      void *ctx)
{
	uint8_t *st = calloc(js->nimg + 1, 1);
	const uint8_t *blk;
	int ret;

	if (st == NULL)
		return -ENOMEM;
	ret = select_imgs(js, st);
	for (size_t i = 0; i < js->nimg && ret == 0; i++) {
		const struct js_img *m = &js->img[i];
		enum fs_jscan_skip why = FS_JSCAN_OUTSIDE;

		if (st[i] == IMG_REVOKED ||
		    (st[i] == IMG_OLDER && ops->skip == NULL))
			continue;
		if (m->home >= FS_SLOTAREA_BLK && m->home < js->total) {
			ret = log_block(js, m->pos, &blk);
			if (ret < 0)
				break;
			why = FS_JSCAN_BADIMG;
			if (fs_blk_verify(blk, 0, m->home) == 0) {
				if (st[i] == IMG_LAST)
					ret = ops->apply(ctx, m->home, blk);
				continue;
			}
		}
		if (ops->skip != NULL)
			ops->skip(ctx, m->home, m->pos, why);
	}
	free(st);
	return ret;
}

int fs_jscan(struct bd_dev *bd, const struct fs_sb *sb, unsigned slot,
	     uint64_t tail_pos, uint64_t tail_seq,
	     const struct fs_jscan_ops *ops, void *ctx,
	     struct fs_jscan_res *res)
{
	struct jscan js = {
		.bd = bd, .jstart = fs_journal_blk(sb, slot),
		.total = sb->total_blocks, .log_blocks = sb->journal_blocks - 1,
	};
	uint64_t pos = tail_pos, seq = tail_seq, scanned = 0;
	int ret = -ENOMEM;

	memset(res, 0, sizeof(*res));
	js.win = bd_buf_alloc((size_t)JS_WIN * FS_BLOCK_SIZE);
	js.desc = malloc(FS_BLOCK_SIZE);
	if (js.win == NULL || js.desc == NULL)
		goto out_free;
	ret = -EINVAL;
	if (js.log_blocks < 2 || tail_pos >= js.log_blocks)
		goto out_free;
	while (scanned < js.log_blocks) {
		uint64_t before = pos;

		ret = scan_ckpt(&js, &pos, seq, res);
		if (ret < 0)
			goto out_free;
		if (ret == 1) {
			scanned++;
			continue;
		}
		ret = scan_tx(&js, &pos, seq);
		if (ret < 0)
			goto out_free;
		if (ret == 0)
			break;
		scanned += (pos + js.log_blocks - before) % js.log_blocks;
		res->ntx++;
		seq++;
	}
	res->end_pos = pos;
	res->next_seq = seq;
	res->scanned = scanned;
	ret = 0;
	if (ops != NULL && res->ntx > 0)
		ret = apply_imgs(&js, ops, ctx);
out_free:
	free(js.img);
	free(js.rev);
	free(js.win);
	free(js.desc);
	return ret;
}
