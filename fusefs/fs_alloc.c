/*
 * fs_alloc.c — the block allocator: resource groups and their bitmaps.
 *
 * Each rgroup has an in-memory struct fs_rgrp mirroring its header's free
 * and inode counts, a search hint (the bit after the last allocation, so
 * sequential allocations find the next run without rescanning) and a list
 * of extents freed by transactions that have not committed yet. Those
 * extents are already clear in the (journaled) bitmap but are skipped by
 * the search until fs_alloc_committed() releases them, so a block is never
 * reused before the transaction that freed it is durable.
 *
 * ENOSPC is detected before anything is modified. The bitmap scan works on
 * 64-bit words (FS_BITMAP_BITS is a multiple of 64, so a word never
 * straddles two bitmap blocks).
 *
 * Locking: rg->lock (order 3) protects the rgroup's header and bitmap
 * buffers' content, free/dinodes/hint and the pending list. Taken inside a
 * handle; takes the journal and cache locks below it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fusefs/fs_core_priv.h"

struct pend {
	uint32_t start;		/* bit index in the group */
	uint32_t len;
	uint64_t seq;		/* freeing transaction */
};

struct fs_rgrp {
	pthread_mutex_t lock;
	uint32_t index;		/* immutable */
	uint64_t start;		/* immutable: header block */
	uint32_t len;		/* immutable */
	uint32_t nbm;		/* immutable */
	uint32_t free;		/* lock (reads: relaxed atomics) */
	uint32_t dinodes;	/* lock */
	uint32_t hint;		/* lock */
	uint32_t pend_blocks;	/* lock */
	struct pend *pend;	/* lock */
	unsigned npend, cappend;
};

struct fs_alloc {
	uint32_t count;
	struct fs_rgrp *rg;
	uint32_t last;		/* atomic: rgroup of the last alloc */
	uint64_t pending;	/* atomic: blocks pending free */
};

#define WORDS_PER_BM (FS_BITMAP_BITS / 64)

/* Read the next 256 rgroup headers in one batch (many small rgroups). */
static void prefetch_headers(struct fs *fs, uint32_t g, uint32_t count)
{
	uint64_t blk[256];
	unsigned n = 0;

	for (; g < count && n < 256; g++)
		blk[n++] = fs_rgrp_blk(&fs->sb, g);
	fs_buf_readahead(fs, blk, n);
}

int fs_alloc_init(struct fs *fs)
{
	struct fs_alloc *a = calloc(1, sizeof(*a));
	int ret = 0;

	if (a == NULL)
		return -ENOMEM;
	a->count = fs->sb.rgrp_count;
	a->rg = calloc(a->count, sizeof(*a->rg));
	if (a->rg == NULL) {
		free(a);
		return -ENOMEM;
	}
	fs->alloc = a;
	for (uint32_t g = 0; g < a->count; g++) {
		struct fs_rgrp *rg = &a->rg[g];
		const struct fs_rgrp_hdr *h;
		struct fs_buf *b;

		if (g % 256 == 0)
			prefetch_headers(fs, g, a->count);

		pthread_mutex_init(&rg->lock, NULL);
		rg->index = g;
		rg->start = fs_rgrp_blk(&fs->sb, g);
		rg->len = fs_rgrp_len(&fs->sb, g);
		rg->nbm = fs_rgrp_nbitmaps(rg->len);
		if (ret < 0)
			continue;
		ret = fs_buf_read(fs, rg->start, FS_BT_RGRP, &b);
		if (ret < 0)
			continue;
		h = b->data;
		if (h->index != g || h->start != rg->start ||
		    h->length != rg->len || h->bitmaps != rg->nbm ||
		    h->free > rg->len)
			ret = -EUCLEAN;
		rg->free = h->free;
		rg->dinodes = h->dinodes;
		rg->hint = 1 + rg->nbm;
		fs_buf_put(b);
	}
	if (ret < 0)
		fs_alloc_destroy(fs);
	return ret;
}

void fs_alloc_destroy(struct fs *fs)
{
	struct fs_alloc *a = fs->alloc;

	if (a == NULL)
		return;
	for (uint32_t g = 0; g < a->count; g++) {
		pthread_mutex_destroy(&a->rg[g].lock);
		free(a->rg[g].pend);
	}
	free(a->rg);
	free(a);
	fs->alloc = NULL;
}

unsigned fs_alloc_credits(struct fs *fs)
{
	return 1 + fs->sb.rgrp_bitmaps;
}

/* ---- bitmap access ---------------------------------------------------- */

struct bmap {
	struct fs *fs;
	struct fs_rgrp *rg;
	struct fs_buf *hdr;
	struct fs_buf *bm[];	/* rg->nbm, read lazily */
};

static struct bmap *bmap_open(struct fs *fs, struct fs_rgrp *rg)
{
	struct bmap *m = calloc(1, sizeof(*m) + rg->nbm * sizeof(m->bm[0]));

	if (m != NULL) {
		m->fs = fs;
		m->rg = rg;
	}
	return m;
}

static void bmap_close(struct bmap *m)
{
	if (m == NULL)
		return;
	fs_buf_put(m->hdr);
	for (uint32_t i = 0; i < m->rg->nbm; i++)
		fs_buf_put(m->bm[i]);
	free(m);
}

static int bmap_blk(struct bmap *m, uint32_t i, struct fs_buf **out)
{
	if (m->bm[i] == NULL) {
		int ret = fs_buf_read(m->fs, m->rg->start + 1 + i,
				      FS_BT_BITMAP, &m->bm[i]);
		if (ret < 0)
			return ret;
	}
	*out = m->bm[i];
	return 0;
}

/* 64-bit word @w of the group bitmap. */
static int bmap_word(struct bmap *m, uint32_t w, uint64_t **out)
{
	struct fs_buf *b;
	int ret = bmap_blk(m, w / WORDS_PER_BM, &b);

	if (ret < 0)
		return ret;
	*out = (uint64_t *)((uint8_t *)b->data + sizeof(struct fs_blk_hdr)) +
	       (w % WORDS_PER_BM);
	return 0;
}

/*
 * First bit >= @from and < rg->len whose value is @val; rg->len if none.
 * Returns it in *out, or -errno.
 */
static int bmap_find(struct bmap *m, uint32_t from, int val, uint32_t *out)
{
	uint32_t len = m->rg->len;

	while (from < len) {
		uint64_t *wp, v;
		uint32_t w = from / 64, bit = from % 64;
		int ret = bmap_word(m, w, &wp);

		if (ret < 0)
			return ret;
		v = val ? *wp : ~*wp;
		v &= ~0ull << bit;
		if (v != 0) {
			uint32_t r = w * 64 + (uint32_t)__builtin_ctzll(v);

			*out = r < len ? r : len;
			return 0;
		}
		from = (w + 1) * 64;
	}
	*out = len;
	return 0;
}

static int bmap_set(struct fs_tx *tx, struct bmap *m, uint32_t start,
		    uint32_t len, int val)
{
	for (uint32_t i = start; i < start + len;) {
		uint32_t blk = i / FS_BITMAP_BITS;
		uint32_t end = (blk + 1) * FS_BITMAP_BITS;
		uint8_t *bits;
		struct fs_buf *b;
		int ret = bmap_blk(m, blk, &b);

		if (ret < 0)
			return ret;
		ret = fs_tx_write(tx, b);
		if (ret < 0)
			return ret;
		bits = (uint8_t *)b->data + sizeof(struct fs_blk_hdr);
		if (end > start + len)
			end = start + len;
		for (; i < end; i++) {
			uint32_t bit = i % FS_BITMAP_BITS;

			if (val)
				bits[bit / 8] |= (uint8_t)(1u << (bit % 8));
			else
				bits[bit / 8] &= (uint8_t)~(1u << (bit % 8));
		}
	}
	return 0;
}

static int bmap_hdr(struct fs_tx *tx, struct bmap *m,
		    struct fs_rgrp_hdr **out)
{
	int ret;

	if (m->hdr == NULL) {
		ret = fs_buf_read(m->fs, m->rg->start, FS_BT_RGRP, &m->hdr);
		if (ret < 0)
			return ret;
	}
	ret = fs_tx_write(tx, m->hdr);
	if (ret < 0)
		return ret;
	*out = m->hdr->data;
	return 0;
}

/* ---- pending frees ---------------------------------------------------- */

/* First pending extent overlapping [s, e), or NULL. rg->lock held. */
static const struct pend *pend_overlap(const struct fs_rgrp *rg, uint32_t s,
				       uint32_t e)
{
	const struct pend *best = NULL;

	for (unsigned i = 0; i < rg->npend; i++) {
		const struct pend *p = &rg->pend[i];

		if (p->start < e && s < p->start + p->len &&
		    (best == NULL || p->start < best->start))
			best = p;
	}
	return best;
}

static int pend_add(struct fs *fs, struct fs_rgrp *rg, uint32_t start,
		    uint32_t len, uint64_t seq)
{
	if (rg->npend == rg->cappend) {
		unsigned nc = rg->cappend ? rg->cappend * 2 : 16;
		struct pend *n = realloc(rg->pend, nc * sizeof(*n));

		if (n == NULL)
			return -ENOMEM;
		rg->pend = n;
		rg->cappend = nc;
	}
	rg->pend[rg->npend++] = (struct pend){ start, len, seq };
	rg->pend_blocks += len;
	__atomic_fetch_add(&fs->alloc->pending, len, __ATOMIC_RELAXED);
	return 0;
}

void fs_alloc_committed(struct fs *fs, uint64_t seq)
{
	struct fs_alloc *a = fs->alloc;

	if (a == NULL || __atomic_load_n(&a->pending, __ATOMIC_RELAXED) == 0)
		return;
	for (uint32_t g = 0; g < a->count; g++) {
		struct fs_rgrp *rg = &a->rg[g];
		unsigned k = 0;

		pthread_mutex_lock(&rg->lock);
		for (unsigned i = 0; i < rg->npend; i++) {
			if (rg->pend[i].seq <= seq) {
				rg->pend_blocks -= rg->pend[i].len;
				__atomic_fetch_sub(&a->pending,
						   rg->pend[i].len,
						   __ATOMIC_RELAXED);
				continue;
			}
			rg->pend[k++] = rg->pend[i];
		}
		rg->npend = k;
		pthread_mutex_unlock(&rg->lock);
	}
}

uint64_t fs_alloc_pending(struct fs *fs)
{
	return __atomic_load_n(&fs->alloc->pending, __ATOMIC_RELAXED);
}

/* ---- allocation ------------------------------------------------------- */

/*
 * Find a free run in [from, rg->len) of at least @min bits, at most @max,
 * not overlapping pending frees. *s = start, *n = length (0: none).
 */
static int find_run(struct bmap *m, uint32_t from, uint32_t min,
		    uint32_t max, uint32_t *s, uint32_t *n)
{
	const struct fs_rgrp *rg = m->rg;
	uint32_t a = from, e;
	int ret;

	*n = 0;
	while (a < rg->len) {
		const struct pend *p;

		ret = bmap_find(m, a, 0, &a);
		if (ret < 0 || a >= rg->len)
			return ret;
		ret = bmap_find(m, a, 1, &e);
		if (ret < 0)
			return ret;
		if (e - a > max)
			e = a + max;
		while ((p = pend_overlap(rg, a, e)) != NULL) {
			if (p->start > a) {
				e = p->start;
				break;
			}
			a = p->start + p->len;
			if (a >= e)
				break;
		}
		if (a < e && e - a >= min) {
			*s = a;
			*n = e - a;
			return 0;
		}
		if (a < e)
			a = e;
	}
	return 0;
}

/* Allocate in @rg; rg->lock held. 1 found, 0 none, -errno. */
static int alloc_in_rg(struct fs_tx *tx, struct fs_rgrp *rg, uint32_t from,
		       uint32_t min, uint32_t max, int inode,
		       uint64_t *start, uint32_t *len, uint64_t *gen)
{
	struct fs *fs = fs_tx_fs(tx);
	struct fs_rgrp_hdr *h;
	struct bmap *m;
	uint32_t s = 0, n = 0, first = 1 + rg->nbm;
	int ret;

	if (rg->free < rg->pend_blocks + min)
		return 0;
	m = bmap_open(fs, rg);
	if (m == NULL)
		return -ENOMEM;
	if (from < first || from >= rg->len)
		from = first;
	ret = find_run(m, from, min, max, &s, &n);
	if (ret == 0 && n == 0 && from > first)
		ret = find_run(m, first, min, max, &s, &n);
	if (ret < 0 || n == 0)
		goto out_close;
	ret = bmap_hdr(tx, m, &h);
	if (ret < 0)
		goto out_close;
	if (h->free < n) {
		ret = -EUCLEAN;
		goto out_close;
	}
	ret = bmap_set(tx, m, s, n, 1);
	if (ret < 0)
		goto out_close;
	h->free -= n;
	rg->free = h->free;
	if (inode) {
		*gen = h->inode_gen++;
		h->dinodes++;
		rg->dinodes = h->dinodes;
	}
	rg->hint = s + n;
	*start = rg->start + s;
	*len = n;
	ret = 1;
out_close:
	bmap_close(m);
	return ret;
}

static uint32_t rg_of(struct fs *fs, uint64_t blk)
{
	if (blk < fs->sb.rgrp_start || blk >= fs->sb.total_blocks)
		return UINT32_MAX;
	return (uint32_t)((blk - fs->sb.rgrp_start) / fs->sb.rgrp_blocks);
}

static int alloc_common(struct fs_tx *tx, uint64_t goal, uint32_t min,
			uint32_t max, int inode, uint64_t *start,
			uint32_t *len, uint64_t *gen)
{
	struct fs *fs = fs_tx_fs(tx);
	struct fs_alloc *a = fs->alloc;
	uint32_t g0 = rg_of(fs, goal), from;
	int ret = 0;

	if (min == 0 || max < min)
		return -EINVAL;
	FS_STAT_ADD(fs, alloc_calls, 1);
	if (g0 == UINT32_MAX)
		g0 = __atomic_load_n(&a->last, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < a->count; i++) {
		struct fs_rgrp *rg = &a->rg[(g0 + i) % a->count];

		pthread_mutex_lock(&rg->lock);
		from = (i == 0 && goal > rg->start) ?
			       (uint32_t)(goal - rg->start) : rg->hint;
		ret = alloc_in_rg(tx, rg, from, min, max > rg->len ?
				  rg->len : max, inode, start, len, gen);
		pthread_mutex_unlock(&rg->lock);
		if (ret < 0)
			return ret;
		if (ret == 1) {
			__atomic_store_n(&a->last, rg->index,
					 __ATOMIC_RELAXED);
			FS_STAT_ADD(fs, alloc_blocks, *len);
			return 0;
		}
	}
	FS_STAT_ADD(fs, alloc_enospc, 1);
	return -ENOSPC;
}

int fs_alloc(struct fs_tx *tx, uint64_t goal, uint32_t min, uint32_t max,
	     uint64_t *start, uint32_t *len)
{
	return alloc_common(tx, goal, min, max, 0, start, len, NULL);
}

int fs_alloc_inode(struct fs_tx *tx, uint64_t goal, uint64_t *ino,
		   uint64_t *generation)
{
	uint32_t len;

	return alloc_common(tx, goal, 1, 1, 1, ino, &len, generation);
}

/* ---- free ------------------------------------------------------------- */

static int free_common(struct fs_tx *tx, uint64_t start, uint32_t len,
		       int inode)
{
	struct fs *fs = fs_tx_fs(tx);
	uint32_t g = rg_of(fs, start), s, e;
	struct fs_rgrp_hdr *h;
	struct fs_rgrp *rg;
	struct bmap *m;
	int ret;

	if (g == UINT32_MAX || len == 0)
		return -EUCLEAN;
	rg = &fs->alloc->rg[g];
	s = (uint32_t)(start - rg->start);
	if (s < 1 + rg->nbm || (uint64_t)s + len > rg->len)
		return -EUCLEAN;
	m = bmap_open(fs, rg);
	if (m == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&rg->lock);
	ret = bmap_find(m, s, 0, &e);	/* every bit must be set */
	if (ret == 0 && e < s + len)
		ret = -EUCLEAN;
	if (ret == 0)
		ret = bmap_hdr(tx, m, &h);
	if (ret == 0 && (h->free + len > rg->len ||
			 (inode && h->dinodes == 0)))
		ret = -EUCLEAN;
	if (ret == 0)
		ret = pend_add(fs, rg, s, len, fs_tx_seq(tx));
	if (ret == 0)
		ret = bmap_set(tx, m, s, len, 0);
	if (ret == 0) {
		h->free += len;
		rg->free = h->free;
		if (inode) {
			h->dinodes--;
			rg->dinodes = h->dinodes;
		}
	}
	pthread_mutex_unlock(&rg->lock);
	bmap_close(m);
	if (ret < 0)
		return ret;
	for (uint32_t i = 0; i < len; i++)
		fs_journal_revoke(tx, start + i);
	FS_STAT_ADD(fs, free_blocks, len);
	return 0;
}

int fs_free(struct fs_tx *tx, uint64_t start, uint32_t len)
{
	return free_common(tx, start, len, 0);
}

int fs_free_inode(struct fs_tx *tx, uint64_t ino)
{
	return free_common(tx, ino, 1, 1);
}

void fs_space_get(struct fs *fs, struct fs_space *out)
{
	struct fs_alloc *a = fs->alloc;

	memset(out, 0, sizeof(*out));
	out->total_blocks = fs->sb.total_blocks;
	for (uint32_t g = 0; g < a->count; g++) {
		struct fs_rgrp *rg = &a->rg[g];

		out->data_blocks += rg->len - 1 - rg->nbm;
		out->free_blocks += __atomic_load_n(&rg->free,
						    __ATOMIC_RELAXED);
		out->inodes += __atomic_load_n(&rg->dinodes,
					       __ATOMIC_RELAXED);
	}
}
