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
 * Reservations (data streams): a file that grows past RS_THRESH blocks
 * gets its data from a reservation, a free run of the bitmap kept in
 * memory for it (struct resv, at most RS_PER_RG per rgroup, least
 * recently used dropped first), sized like the file so far (doubling,
 * RS_MIN_RUN .. RS_MAX blocks). Its next allocations are taken from the
 * front of the run, so two files written at once each get long extents
 * in their own region instead of interleaving request by request (two
 * 1 MiB streams made 1 MiB extents, alternating). Other allocations
 * skip reserved runs like pending frees; only when nothing else is free
 * do they take reserved blocks (steal: the reservation is trimmed), so a
 * reservation never causes ENOSPC. Reservations are memory only: the
 * bitmap never sees them, a crash or a remount forgets them, and
 * fs_alloc_resv_drop() releases a file's (last close, truncate, destroy).
 *
 * Inode chunks: inode blocks come from a reservation of the goal's
 * rgroup owned by RS_INODES (INODE_CHUNK blocks found near the goal, the
 * parent directory), so the inodes of a directory's files sit together
 * instead of each right before its own data: a cold `ls -l` or `du`
 * reads them in a few large I/Os (statahead) without the data between
 * them. Data and other metadata skip the chunk like any reservation.
 *
 * ENOSPC is detected before anything is modified. The bitmap scan works on
 * 64-bit words (FS_BITMAP_BITS is a multiple of 64, so a word never
 * straddles two bitmap blocks).
 *
 * Cluster mounts (dlm): each group has a glock (FS_LK_RGRP/g), and its
 * blocks, counts and reservations may be used only while this node is a
 * holder of it in EX (between requests the mode stays cached: the node
 * "owns" the group until another node asks). A thread inside a handle
 * must never wait for a glock (a demote waits for a commit, which waits
 * for every handle), so allocation inside a handle runs in passes: the
 * groups this node owns first (fs_glock_try: no message), then others
 * with fs_glock_try (a NOQUEUE request: another node's group refuses at
 * once and is not asked again for REFUSE_MS). When only refused groups
 * could have served it, the allocation fails with -ENOSPC and marks the
 * thread starved; the operation ends its handle and fs_alloc_starved()
 * takes such a group, waiting, before the retry (fs_vfs.h). When no
 * group at all seemed to have room, the counts of groups this node does
 * not own may be stale (another node freed there since this node last
 * held them): fs_alloc_starved() then takes all of those, waiting
 * (sweep_others; at most one sweep per SWEEP_MS), so a node does not
 * report ENOSPC for space another node freed. Writing
 * operations call fs_alloc_reserve() first, holding nothing, so that
 * the node owns a group with space (the slot's share of the groups
 * first: nodes start in different groups) and retries stay rare. The
 * holder is released right after the bitmap change, still in the
 * handle: a demote then syncs, i.e. commits, which waits for that
 * handle, so the change reaches the disk before another node reads it.
 *
 * Frees into a group this node cannot get without waiting go to the
 * free log (fs_flog.c), applied later under the group's glock
 * (fs_alloc_group_hold, fs_alloc_free_held).
 *
 * Locking: rg->lock (order 3) protects the rgroup's header and bitmap
 * buffers' content, free/dinodes/hint, the pending list and the
 * reservations. Taken inside a handle (fs_alloc_resv_drop: any context,
 * no handle needed); takes the journal and cache locks below it.
 * The free log's mutex (fs_flog.c) is taken inside a handle before
 * rg->lock.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fusefs/cluster/fs_cluster.h"
#include "fusefs/core/fs_core_priv.h"
#include "fusefs/cluster/fs_glock.h"
#include "lockmgr/cv_wait.h"
#include "lockmgr/lk.h"

#include <time.h>

struct pend {
	uint32_t start;		/* bit index in the group */
	uint32_t len;
	uint64_t seq;		/* freeing transaction */
};

#define RS_PER_RG 16u		/* reservations kept per rgroup */
#define RS_THRESH 64u		/* files reserve from 256 KiB on */
#define RS_MIN_RUN 256u		/* a new reservation: a free run of 1 MiB */
#define RS_MAX 32768u		/* ... up to 128 MiB */
#define RS_SCAN 8u		/* rgroups searched for a new reservation */
#define RS_INODES UINT64_MAX	/* owner of the inode chunks */
#define INODE_CHUNK 64u		/* blocks of a new inode chunk ... */
#define INODE_CHUNK_MIN 8u	/* ... or at least that many */
#define REFUSE_MS 200u		/* a group refused by try is left alone */
#define RESERVE_MIN 64u		/* fs_alloc_reserve: free blocks wanted */
#define SWEEP_MS 1000u		/* ENOSPC sweeps of others' groups: apart */

/* Free bits [start, start + len) of the group kept for @owner. */
struct resv {
	uint64_t owner;		/* inode number */
	uint32_t start, len;
	uint64_t used;		/* a->tick at the last use (LRU) */
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
	struct resv rs[RS_PER_RG];	/* lock; rs[0 .. nrs) in use */
	unsigned nrs;		/* lock */
	struct fs_glock *gl;	/* immutable: dlm, its glock; NULL */
	struct fs *gl_fs;	/* immutable: dlm, the mount (stats) */
	uint64_t refused_ms;	/* atomic: try refused until then */
};

struct fs_alloc {
	uint32_t count;
	struct fs_rgrp *rg;
	uint32_t last;		/* atomic: rgroup of the last alloc */
	uint64_t pending;	/* atomic: blocks pending free */
	uint64_t tick;		/* atomic: reservation LRU clock */
	uint32_t nrs;		/* atomic: reservations in all rgroups */
	uint32_t mine;		/* atomic: dlm, the group reserve chose */
	pthread_mutex_t sweep_mu; /* dlm: one ENOSPC sweep at a time */
	uint64_t swept_ms;	/* sweep_mu: when the last sweep ended */
	uint64_t sweeps;	/* sweep_mu (reads: atomic): sweeps ended */
	int swept_room;		/* sweep_mu: the last sweep found room */
};

/* dlm: the group a refused try left for fs_alloc_starved (per thread) */
static __thread uint32_t starved_g = UINT32_MAX;

/*
 * One allocation request. With rmax > 0 (a data stream's new
 * reservation) the run searched is rmin..rmax blocks; its first
 * min..max blocks are allocated, the rest reserved for @owner.
 */
struct areq {
	uint32_t min, max;
	uint32_t rmin, rmax;
	uint64_t owner;		/* 0: none (never matches a reservation) */
	int steal;		/* may take other owners' reserved blocks */
	int inode;
	uint64_t start;		/* results */
	uint32_t len;
	uint64_t gen;
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

/* dlm: a reference to every group's glock, kept until unmount. */
static int glocks_get(struct fs *fs, struct fs_alloc *a)
{
	struct fs_glocks *e = fs_cluster_glocks(fs->cl);

	a->mine = (uint32_t)((uint64_t)fs->slot * a->count / fs->sb.slot_count);
	for (uint32_t g = 0; g < a->count; g++) {
		int ret = fs_glock_get(e, FS_LK_RGRP, g, &a->rg[g].gl);

		a->rg[g].gl_fs = fs;
		if (ret < 0)
			return ret;
	}
	return 0;
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
	pthread_mutex_init(&a->sweep_mu, NULL);
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
	if (ret == 0 && fs->cl != NULL)
		ret = glocks_get(fs, a);
	if (ret == 0)
		ret = fs_flog_init(fs);
	if (ret < 0)
		fs_alloc_destroy(fs);
	return ret;
}

int fs_alloc_reload(struct fs *fs)
{
	struct fs_alloc *a = fs->alloc;
	int ret = 0;

	for (uint32_t g = 0; g < a->count; g++) {
		struct fs_rgrp *rg = &a->rg[g];
		const struct fs_rgrp_hdr *h;
		struct fs_buf *b;
		int r;

		if (g % 256 == 0)
			prefetch_headers(fs, g, a->count);
		pthread_mutex_lock(&rg->lock);
		/* reservations and chunks may now hold another node's
		 * blocks; pending frees (none after a checkpoint) stay */
		__atomic_fetch_sub(&a->nrs, rg->nrs, __ATOMIC_RELAXED);
		rg->nrs = 0;
		rg->hint = 1 + rg->nbm;
		r = fs_buf_read(fs, rg->start, FS_BT_RGRP, &b);
		if (r == 0) {
			h = b->data;
			if (h->free > rg->len)
				r = -EUCLEAN;
			else
				__atomic_store_n(&rg->free, h->free,
						 __ATOMIC_RELAXED);
			__atomic_store_n(&rg->dinodes, h->dinodes,
					 __ATOMIC_RELAXED);
			fs_buf_put(b);
		}
		pthread_mutex_unlock(&rg->lock);
		if (r < 0 && ret == 0)
			ret = r;
	}
	return ret;
}

void fs_alloc_destroy(struct fs *fs)
{
	struct fs_alloc *a = fs->alloc;

	if (a == NULL)
		return;
	fs_flog_destroy(fs);
	for (uint32_t g = 0; g < a->count; g++) {
		pthread_mutex_destroy(&a->rg[g].lock);
		free(a->rg[g].pend);
		fs_glock_put(a->rg[g].gl);
	}
	free(a->rg);
	pthread_mutex_destroy(&a->sweep_mu);
	free(a);
	fs->alloc = NULL;
}

unsigned fs_alloc_credits(struct fs *fs)
{
	return 1 + fs->sb.rgrp_bitmaps + fs_statfs_credits(fs);
}

/* ---- bitmap access ---------------------------------------------------- */

struct bmap {
	struct fs *fs;
	struct fs_rgrp *rg;
	const struct areq *req;	/* NULL: free */
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

/* ---- reservations (rg->lock held) ------------------------------------ */

static struct resv *resv_find(struct fs_rgrp *rg, uint64_t owner)
{
	for (unsigned i = 0; i < rg->nrs; i++)
		if (rg->rs[i].owner == owner)
			return &rg->rs[i];
	return NULL;
}

static void resv_del(struct fs_alloc *a, struct fs_rgrp *rg, struct resv *r)
{
	*r = rg->rs[--rg->nrs];
	__atomic_fetch_sub(&a->nrs, 1, __ATOMIC_RELAXED);
}

/* Keep [start, start + len) for @owner, replacing its reservation in
 * @rg or the least recently used one if all slots are taken. */
static void resv_add(struct fs_alloc *a, struct fs_rgrp *rg, uint64_t owner,
		     uint32_t start, uint32_t len)
{
	struct resv *r = resv_find(rg, owner);

	if (r == NULL && rg->nrs == RS_PER_RG) {
		r = &rg->rs[0];
		for (unsigned i = 1; i < rg->nrs; i++)
			if (rg->rs[i].used < r->used)
				r = &rg->rs[i];
	} else if (r == NULL) {
		r = &rg->rs[rg->nrs++];
		__atomic_fetch_add(&a->nrs, 1, __ATOMIC_RELAXED);
	}
	*r = (struct resv){ owner, start, len,
			    __atomic_add_fetch(&a->tick, 1, __ATOMIC_RELAXED) };
}

/* Blocks [s, s + n) were just allocated: no reservation keeps them (an
 * owner's allocation takes its run's front; a steal may cut one, which
 * then keeps its part after the cut, or before it if none). */
static void resv_trim(struct fs_alloc *a, struct fs_rgrp *rg, uint32_t s,
		      uint32_t n)
{
	for (unsigned i = 0; i < rg->nrs;) {
		struct resv *r = &rg->rs[i];
		uint32_t re = r->start + r->len;

		if (r->start >= s + n || s >= re) {
			i++;
			continue;
		}
		if (s + n < re) {
			r->len = re - (s + n);
			r->start = s + n;
		} else if (s > r->start) {
			r->len = s - r->start;
		} else {
			resv_del(a, rg, r);	/* slot i refilled: recheck */
			continue;
		}
		i++;
	}
}

/*
 * The lowest-starting extent overlapping [s, e) that a search must skip:
 * a pending free, or a run reserved for another owner (unless the
 * request steals). 1 found (*bs, *bl), 0 none.
 */
static int blocker(const struct bmap *m, uint32_t s, uint32_t e,
		   uint32_t *bs, uint32_t *bl)
{
	const struct fs_rgrp *rg = m->rg;
	const struct pend *p = pend_overlap(rg, s, e);
	int found = 0;

	if (p != NULL) {
		*bs = p->start;
		*bl = p->len;
		found = 1;
	}
	if (m->req == NULL || m->req->steal)
		return found;
	for (unsigned i = 0; i < rg->nrs; i++) {
		const struct resv *r = &rg->rs[i];

		if (r->owner == m->req->owner || r->start >= e ||
		    s >= r->start + r->len)
			continue;
		if (!found || r->start < *bs) {
			*bs = r->start;
			*bl = r->len;
			found = 1;
		}
	}
	return found;
}

/* ---- allocation ------------------------------------------------------- */

/*
 * Find a free run in [from, rg->len) of at least @min bits, at most @max,
 * not overlapping pending frees nor (see blocker) others' reservations.
 * *s = start, *n = length (0: none).
 */
static int find_run(struct bmap *m, uint32_t from, uint32_t min,
		    uint32_t max, uint32_t *s, uint32_t *n)
{
	const struct fs_rgrp *rg = m->rg;
	uint32_t a = from, e, bs = 0, bl = 0;
	int ret;

	*n = 0;
	while (a < rg->len) {
		ret = bmap_find(m, a, 0, &a);
		if (ret < 0 || a >= rg->len)
			return ret;
		ret = bmap_find(m, a, 1, &e);
		if (ret < 0)
			return ret;
		if (e - a > max)
			e = a + max;
		while (blocker(m, a, e, &bs, &bl)) {
			if (bs > a) {
				e = bs;
				break;
			}
			a = bs + bl;
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

/* Set bits [s, s + n) in the bitmap and the header's counts for @r.
 * m->hdr is read here. */
static int take_bits(struct fs_tx *tx, struct bmap *m, uint32_t s,
		     uint32_t n, struct areq *r)
{
	struct fs_rgrp *rg = m->rg;
	struct fs_rgrp_hdr *h;
	int ret;

	ret = bmap_hdr(tx, m, &h);
	if (ret < 0)
		return ret;
	if (h->free < n)
		return -EUCLEAN;
	ret = fs_statfs_change(tx, -(int64_t)n, r->inode ? 1 : 0);
	if (ret == 0)
		ret = bmap_set(tx, m, s, n, 1);
	if (ret < 0)
		return ret;
	h->free -= n;
	rg->free = h->free;
	if (r->inode) {
		r->gen = h->inode_gen++;
		h->dinodes++;
		rg->dinodes = h->dinodes;
	}
	return 0;
}

/* Allocate @r in @rg; rg->lock held. 1 found, 0 none, -errno. */
static int alloc_in_rg(struct fs_tx *tx, struct fs_rgrp *rg, uint32_t from,
		       struct areq *r)
{
	struct fs *fs = fs_tx_fs(tx);
	uint32_t min = r->rmax > 0 ? r->rmin : r->min;
	uint32_t max = r->rmax > 0 ? r->rmax : r->max;
	uint32_t s = 0, n = 0, run, first = 1 + rg->nbm;
	struct bmap *m;
	int ret;

	if (rg->free < rg->pend_blocks + min)
		return 0;
	m = bmap_open(fs, rg);
	if (m == NULL)
		return -ENOMEM;
	m->req = r;
	if (max > rg->len)
		max = rg->len;
	if (from < first || from >= rg->len)
		from = first;
	ret = find_run(m, from, min, max, &s, &n);
	if (ret == 0 && n == 0 && from > first)
		ret = find_run(m, first, min, max, &s, &n);
	if (ret < 0 || n == 0)
		goto out_close;
	run = n;
	if (n > r->max)
		n = r->max;
	ret = take_bits(tx, m, s, n, r);
	if (ret < 0)
		goto out_close;
	resv_trim(fs->alloc, rg, s, n);
	if (run > n) {
		resv_add(fs->alloc, rg, r->owner, s + n, run - n);
		FS_STAT_ADD(fs, alloc_resv_made, 1);
	}
	rg->hint = s + n;
	r->start = rg->start + s;
	r->len = n;
	ret = 1;
out_close:
	bmap_close(m);
	return ret;
}

static uint32_t rg_of(struct fs *fs, uint64_t blk)
{
	return fs_rgrp_of(&fs->sb, blk);
}

/* ---- ownership (dlm) --------------------------------------------------- */

enum { P_OWNED, P_TRY }; /* allocation passes (nolock: P_OWNED only) */

static int rg_owned(const struct fs_rgrp *rg)
{
	return rg->gl == NULL || fs_glock_mode(rg->gl) == LK_EX;
}

/* dlm: @rg's inode and rgroup locks have their directory here (lock
 * placement, fs_cluster.c): new inodes there cost no lock message. */
static int rg_local(const struct fs_rgrp *rg)
{
	return rg->gl == NULL ||
	       fs_cluster_rgrp_local(rg->gl_fs->cl, rg->index);
}

/*
 * Become a holder of @rg's glock in EX without waiting (inside a
 * handle): P_OWNED only a group this node owns (no message), P_TRY only
 * one it does not (a NOQUEUE request; a refusal is remembered for
 * REFUSE_MS and, with @note, left for fs_alloc_starved). 1 held, 0 not,
 * -EIO fenced. rg_leave gives it back.
 */
static int rg_enter(struct fs_rgrp *rg, int pass, int note)
{
	int ret;

	if (rg->gl == NULL)
		return 1;
	if ((pass == P_OWNED) != rg_owned(rg))
		return 0;
	if (pass == P_TRY &&
	    __atomic_load_n(&rg->refused_ms, __ATOMIC_RELAXED) > cvw_now_ms()) {
		ret = -EAGAIN; /* refused lately: not asked again */
	} else {
		ret = fs_glock_try(rg->gl, LK_EX);
		if (ret == 0)
			return 1;
		if (ret == -EIO)
			return -EIO;
		if (pass == P_TRY) {
			FS_STAT_ADD(rg->gl_fs, alloc_rg_refused, 1);
			__atomic_store_n(&rg->refused_ms, cvw_now_ms() + REFUSE_MS,
					 __ATOMIC_RELAXED);
		}
	}
	/* the first group refused (nearest the goal) is taken by
	 * fs_alloc_starved; a try also fails on a group nobody used yet
	 * (its value block is not set: only an acquire may recover it) */
	if (pass == P_TRY && note && starved_g == UINT32_MAX)
		starved_g = rg->index;
	return 0;
}

static void rg_leave(struct fs_rgrp *rg)
{
	if (rg->gl != NULL)
		fs_glock_release(rg->gl, LK_EX);
}

/* Try @r in up to @nrg rgroups from the goal's on (P_OWNED: from the
 * group fs_alloc_reserve chose when the goal's is not ours). 1, 0 none,
 * -errno. */
static int alloc_pass(struct fs_tx *tx, uint64_t goal, uint32_t nrg,
		      struct areq *r, int pass)
{
	struct fs *fs = fs_tx_fs(tx);
	struct fs_alloc *a = fs->alloc;
	uint32_t g0 = rg_of(fs, goal), from;
	int ret;

	if (g0 == UINT32_MAX)
		g0 = __atomic_load_n(&a->last, __ATOMIC_RELAXED);
	/* an inode goes where its locks are placed here (fs_alloc_reserve
	 * chose such a group), not next to a parent placed elsewhere */
	if (pass == P_OWNED &&
	    (!rg_owned(&a->rg[g0]) || (r->inode && !rg_local(&a->rg[g0]))))
		g0 = __atomic_load_n(&a->mine, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < a->count && i < nrg; i++) {
		struct fs_rgrp *rg = &a->rg[(g0 + i) % a->count];
		uint32_t need = r->rmax > 0 ? r->rmin : r->min;

		/* a group we do not own: its counts are a hint */
		if (pass == P_TRY && rg->free < rg->pend_blocks + need)
			continue;
		ret = rg_enter(rg, pass, 1);
		if (ret < 0)
			return ret;
		if (ret == 0)
			continue;
		pthread_mutex_lock(&rg->lock);
		from = (goal > rg->start && rg_of(fs, goal) == rg->index)
			   ? (uint32_t)(goal - rg->start)
			   : rg->hint;
		ret = alloc_in_rg(tx, rg, from, r);
		pthread_mutex_unlock(&rg->lock);
		rg_leave(rg);
		if (ret != 0)
			return ret;
	}
	return 0;
}

/* One pass: a new reservation (if r->rmax), else plain: skipping
 * others' reservations, then stealing from them. */
static int alloc_seq(struct fs_tx *tx, uint64_t goal, struct areq *r, int pass)
{
	struct fs *fs = fs_tx_fs(tx);
	int ret = 0;

	if (r->rmax > 0) {
		ret = alloc_pass(tx, goal, RS_SCAN, r, pass);
		r->rmin = r->rmax = 0;
	}
	if (ret == 0)
		ret = alloc_pass(tx, goal, UINT32_MAX, r, pass);
	if (ret == 0 &&
	    __atomic_load_n(&fs->alloc->nrs, __ATOMIC_RELAXED) > 0) {
		r->steal = 1;
		ret = alloc_pass(tx, goal, UINT32_MAX, r, pass);
		if (ret > 0)
			FS_STAT_ADD(fs, alloc_stolen, 1);
	}
	return ret;
}

static int alloc_common(struct fs_tx *tx, uint64_t goal, struct areq *r)
{
	struct fs *fs = fs_tx_fs(tx);
	struct areq first = *r;
	int ret;

	if (r->min == 0 || r->max < r->min)
		return -EINVAL;
	FS_STAT_ADD(fs, alloc_calls, 1);
	starved_g = UINT32_MAX;
	ret = alloc_seq(tx, goal, r, P_OWNED);
	if (ret == 0 && fs->cl != NULL) {
		*r = first;
		ret = alloc_seq(tx, goal, r, P_TRY);
	}
	if (ret < 0)
		return ret;
	if (ret == 0) {
		FS_STAT_ADD(fs, alloc_enospc, 1);
		return -ENOSPC;
	}
	starved_g = UINT32_MAX;
	FS_STAT_ADD(fs, alloc_blocks, r->len);
	return 0;
}

int fs_alloc(struct fs_tx *tx, uint64_t goal, uint32_t min, uint32_t max,
	     uint64_t *start, uint32_t *len)
{
	struct areq r = { .min = min, .max = max };
	int ret = alloc_common(tx, goal, &r);

	if (ret == 0) {
		*start = r.start;
		*len = r.len;
	}
	return ret;
}

/* From @owner's reservation in the goal's rgroup, if any: 1, 0, -errno. */
static int alloc_reserved(struct fs_tx *tx, uint64_t goal, struct areq *r)
{
	struct fs *fs = fs_tx_fs(tx);
	struct fs_alloc *a = fs->alloc;
	uint32_t g = rg_of(fs, goal);
	struct fs_rgrp *rg;
	struct resv *rs;
	int ret = 0;

	if (g == UINT32_MAX || __atomic_load_n(&a->nrs, __ATOMIC_RELAXED) == 0)
		return 0;
	rg = &a->rg[g];
	ret = rg_enter(rg, P_OWNED, 0);
	if (ret <= 0)
		return ret;
	ret = 0;
	pthread_mutex_lock(&rg->lock);
	rs = resv_find(rg, r->owner);
	if (rs != NULL && rs->len >= r->min) {
		struct areq q = *r;

		if (q.max > rs->len)
			q.max = rs->len;
		rs->used = __atomic_add_fetch(&a->tick, 1, __ATOMIC_RELAXED);
		ret = alloc_in_rg(tx, rg, rs->start, &q);
		if (ret == 1) {
			r->start = q.start;
			r->len = q.len;
			r->gen = q.gen;
		}
	}
	pthread_mutex_unlock(&rg->lock);
	rg_leave(rg);
	return ret;
}

int fs_alloc_data(struct fs_tx *tx, uint64_t owner, uint64_t fblocks,
		  uint64_t goal, uint32_t min, uint32_t max, uint64_t *start,
		  uint32_t *len)
{
	struct fs *fs = fs_tx_fs(tx);
	struct areq r = { .min = min, .max = max, .owner = owner };
	uint64_t want = fblocks + max;
	int ret;

	if (owner == 0 || min == 0 || max < min)
		return -EINVAL;
	ret = alloc_reserved(tx, goal, &r);
	if (ret == 1) {
		FS_STAT_ADD(fs, alloc_calls, 1);
		FS_STAT_ADD(fs, alloc_blocks, r.len);
	} else if (ret == 0) {
		if (want >= RS_THRESH) {
			r.rmax = want < RS_MAX ? (uint32_t)want : RS_MAX;
			if (r.rmax > fs->sb.rgrp_blocks / 4)
				r.rmax = (uint32_t)(fs->sb.rgrp_blocks / 4);
			r.rmin = r.rmax < RS_MIN_RUN ? r.rmax : RS_MIN_RUN;
			if (r.rmin < max)
				r.rmin = max;
			if (r.rmax < r.rmin)
				r.rmax = r.rmin;
		}
		ret = alloc_common(tx, goal, &r);
	}
	if (ret < 0)
		return ret;
	*start = r.start;
	*len = r.len;
	return 0;
}

void fs_alloc_resv_drop(struct fs *fs, uint64_t owner)
{
	struct fs_alloc *a = fs->alloc;

	if (a == NULL || __atomic_load_n(&a->nrs, __ATOMIC_RELAXED) == 0)
		return;
	for (uint32_t g = 0; g < a->count; g++) {
		struct fs_rgrp *rg = &a->rg[g];
		struct resv *r;

		pthread_mutex_lock(&rg->lock);
		while ((r = resv_find(rg, owner)) != NULL)
			resv_del(a, rg, r);
		pthread_mutex_unlock(&rg->lock);
	}
}

int fs_alloc_inode(struct fs_tx *tx, uint64_t goal, uint64_t *ino,
		   uint64_t *generation)
{
	struct fs *fs = fs_tx_fs(tx);
	struct areq r = { .min = 1, .max = 1, .inode = 1,
			  .owner = RS_INODES };
	uint32_t g = rg_of(fs, goal);
	int ret = 0;

	/* the chunk next to the parent only where the locks are placed
	 * here (rg_local) */
	if (g != UINT32_MAX && rg_local(&fs->alloc->rg[g]))
		ret = alloc_reserved(tx, goal, &r);

	if (ret == 1) {
		FS_STAT_ADD(fs, alloc_calls, 1);
		FS_STAT_ADD(fs, alloc_blocks, 1);
	} else if (ret == 0) {
		r.rmin = INODE_CHUNK_MIN;
		r.rmax = INODE_CHUNK;
		ret = alloc_common(tx, goal, &r);
	}
	if (ret < 0)
		return ret;
	*ino = r.start;
	*generation = r.gen;
	return 0;
}

/* ---- free ------------------------------------------------------------- */

/* Clear bits [s, s + len) of @rg (a holder of its glock, dlm) in @tx:
 * every bit must be set, else -EUCLEAN and nothing changes. */
static int free_bits(struct fs_tx *tx, struct fs_rgrp *rg, uint32_t s,
		     uint32_t len, int inode)
{
	struct fs *fs = fs_tx_fs(tx);
	struct fs_rgrp_hdr *h;
	struct bmap *m;
	uint32_t e;
	int ret;

	m = bmap_open(fs, rg);
	if (m == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&rg->lock);
	ret = bmap_find(m, s, 0, &e);	/* every bit must be set */
	if (ret == 0 && e < s + len)
		ret = -EUCLEAN;
	if (ret == 0)
		ret = bmap_hdr(tx, m, &h);
	if (ret == 0 &&
	    (h->free + len > rg->len || (inode && h->dinodes < len)))
		ret = -EUCLEAN;
	if (ret == 0)
		ret = pend_add(fs, rg, s, len, fs_tx_seq(tx));
	if (ret == 0)
		ret = fs_statfs_change(tx, len, inode ? -(int64_t)len : 0);
	if (ret == 0)
		ret = bmap_set(tx, m, s, len, 0);
	if (ret == 0) {
		h->free += len;
		rg->free = h->free;
		if (inode) {
			h->dinodes -= len;
			rg->dinodes = h->dinodes;
		}
	}
	pthread_mutex_unlock(&rg->lock);
	bmap_close(m);
	return ret;
}

/* The group of extent [start, start + len) in *@rg and its first bit in
 * *@s: 0, or -EUCLEAN unless it lies in one group's data area. */
static int extent_group(struct fs *fs, uint64_t start, uint32_t len,
			struct fs_rgrp **rg, uint32_t *s)
{
	uint32_t g = rg_of(fs, start);

	if (g == UINT32_MAX || len == 0)
		return -EUCLEAN;
	*rg = &fs->alloc->rg[g];
	*s = (uint32_t)(start - (*rg)->start);
	if (*s < 1 + (*rg)->nbm || (uint64_t)*s + len > (*rg)->len)
		return -EUCLEAN;
	return 0;
}

static int free_common(struct fs_tx *tx, uint64_t start, uint32_t len,
		       int inode)
{
	struct fs *fs = fs_tx_fs(tx);
	struct fs_rgrp *rg;
	uint32_t s;
	int ret;

	ret = extent_group(fs, start, len, &rg, &s);
	if (ret < 0)
		return ret;
	ret = rg_enter(rg, P_OWNED, 0);
	if (ret == 0)
		ret = rg_enter(rg, P_TRY, 0);
	if (ret < 0)
		return ret;
	if (ret == 0) {
		ret = fs_flog_add(tx, start, len, inode);
	} else {
		ret = free_bits(tx, rg, s, len, inode);
		rg_leave(rg);
	}
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

static void space_add(struct fs_space *out, struct fs_rgrp *rg)
{
	out->data_blocks += rg->len - 1 - rg->nbm;
	out->free_blocks += __atomic_load_n(&rg->free, __ATOMIC_RELAXED);
	out->inodes += __atomic_load_n(&rg->dinodes, __ATOMIC_RELAXED);
}

void fs_space_get(struct fs *fs, struct fs_space *out)
{
	struct fs_alloc *a = fs->alloc;

	memset(out, 0, sizeof(*out));
	out->total_blocks = fs->sb.total_blocks;
	for (uint32_t g = 0; g < a->count; g++)
		space_add(out, &a->rg[g]);
}

int fs_space_count(struct fs *fs, struct fs_space *out)
{
	struct fs_alloc *a = fs->alloc;

	memset(out, 0, sizeof(*out));
	out->total_blocks = fs->sb.total_blocks;
	for (uint32_t g = 0; g < a->count; g++) {
		struct fs_rgrp *rg = &a->rg[g];

		/* a grant after another node's EX reloads the counts
		 * (fs_alloc_rgrp_inval) */
		if (rg->gl != NULL && fs_glock_acquire(rg->gl, LK_PR) < 0)
			return -EIO;
		space_add(out, rg);
		if (rg->gl != NULL)
			fs_glock_release(rg->gl, LK_PR);
	}
	return 0;
}

/* ---- cluster: owning groups, the free log ------------------------------- */

/* Wait for @rg's glock in EX (no handle held), and leave it cached: the
 * node owns the group until another node asks. 0 or -EIO. */
static int rg_take(struct fs *fs, struct fs_rgrp *rg)
{
	if (rg->gl == NULL)
		return 0;
	FS_STAT_ADD(fs, alloc_rg_waits, 1);
	if (fs_glock_acquire(rg->gl, LK_EX) < 0)
		return -EIO;
	fs_glock_release(rg->gl, LK_EX);
	return 0;
}

static int rg_has_room(const struct fs_rgrp *rg)
{
	uint32_t free = __atomic_load_n(&rg->free, __ATOMIC_RELAXED);

	return free >= rg->pend_blocks + RESERVE_MIN;
}

/*
 * How much fs_alloc_reserve wants @rg (which has room), 0..7: owned with
 * its locks placed here (lock placement: new inodes cost no lock
 * message) best, then placed here, then owned, then any; one refused
 * lately is worth less within its class.
 */
static int rg_rank(const struct fs_rgrp *rg, uint64_t now)
{
	int owned = rg_owned(rg), local = rg_local(rg);

	if (owned)
		return local ? 7 : 3;
	if (__atomic_load_n(&rg->refused_ms, __ATOMIC_RELAXED) >= now)
		return local ? 4 : 0;
	return local ? 5 : 1;
}

int fs_alloc_reserve(struct fs *fs)
{
	struct fs_alloc *a = fs->alloc;
	uint32_t g0, pick = 0;
	uint64_t now = cvw_now_ms();
	int best = -1;

	if (fs->cl == NULL || a == NULL)
		return 0;
	g0 = __atomic_load_n(&a->mine, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < a->count && best < 7; i++) {
		struct fs_rgrp *rg = &a->rg[(g0 + i) % a->count];
		int rank;

		if (!rg_has_room(rg))
			continue;
		rank = rg_rank(rg, now);
		if (rank > best) {
			best = rank;
			pick = rg->index;
		}
	}
	if (best < 0)
		return -ENOSPC;
	if (!rg_owned(&a->rg[pick]) && rg_take(fs, &a->rg[pick]) < 0)
		return -EIO;
	__atomic_store_n(&a->mine, pick, __ATOMIC_RELAXED);
	return 0;
}

/* Some group has room as this node counts it (exact for the groups it
 * owns, a hint for the others). */
static int any_room(struct fs_alloc *a)
{
	for (uint32_t g = 0; g < a->count; g++)
		if (__atomic_load_n(&a->rg[g].free, __ATOMIC_RELAXED) >
		    a->rg[g].pend_blocks)
			return 1;
	return 0;
}

/*
 * dlm, an allocation failed with no group refused: every group is full
 * as this node counts it, but its counts of the groups it does not own
 * are as it last held them, and others may have freed there since (a
 * node that removed its files). Take each such group (waiting: its
 * holder writes it back, and the grant reloads the counts when the group
 * changed), all of them: the node then owns every group, with exact
 * counts, for the retries that follow. 1 (some group has room: retry;
 * also without a sweep when the counts show room, which another node
 * took meanwhile or this one swept lately: the caller's retries are
 * bounded), 0 (none; no sweep less than SWEEP_MS after the last, so
 * that a writer hammering a full disk does not pull every group from
 * the others at each write). A thread that waited for another's sweep
 * takes that sweep's answer. Frees pending in the journal go first:
 * the caller commits them (need_nospc_retry) before a sweep.
 */
static int sweep_others(struct fs *fs)
{
	struct fs_alloc *a = fs->alloc;
	uint64_t seen = __atomic_load_n(&a->sweeps, __ATOMIC_ACQUIRE);
	int ret = 0;

	if (fs_alloc_pending(fs) > 0)
		return 0; /* committing those may do */
	pthread_mutex_lock(&a->sweep_mu);
	if (a->sweeps != seen) {
		ret = a->swept_room; /* one ended while we waited */
		goto out;
	}
	if (any_room(a)) {
		ret = 1;
		goto out;
	}
	if (a->swept_ms != 0 && cvw_now_ms() < a->swept_ms + SWEEP_MS)
		goto out;
	for (uint32_t g = 0; g < a->count; g++) {
		struct fs_rgrp *rg = &a->rg[g];

		if (rg_owned(rg))
			continue;
		FS_STAT_ADD(fs, alloc_swept, 1);
		if (rg_take(fs, rg) < 0)
			break;
		if (ret == 0 && rg->free > rg->pend_blocks) {
			__atomic_store_n(&a->mine, g, __ATOMIC_RELAXED);
			ret = 1;
		}
	}
	a->swept_ms = cvw_now_ms();
	a->swept_room = ret;
	__atomic_store_n(&a->sweeps, a->sweeps + 1, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&a->sweep_mu);
	return ret;
}

int fs_alloc_starved(struct fs *fs)
{
	uint32_t g = starved_g;

	starved_g = UINT32_MAX;
	if (fs->cl != NULL && g == UINT32_MAX && !fs->ro)
		return sweep_others(fs);
	if (fs->cl == NULL || g == UINT32_MAX || g >= fs->alloc->count)
		return 0;
	FS_STAT_ADD(fs, alloc_starved, 1);
	if (rg_take(fs, &fs->alloc->rg[g]) < 0)
		return 0;
	__atomic_store_n(&fs->alloc->rg[g].refused_ms, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&fs->alloc->mine, g, __ATOMIC_RELAXED);
	return 1;
}

int fs_alloc_rgrp_inval(struct fs *fs, uint32_t g)
{
	struct fs_alloc *a = fs->alloc;
	const struct fs_rgrp_hdr *h;
	struct fs_rgrp *rg;
	struct fs_buf *b;
	int ret;

	if (g >= a->count)
		return -EINVAL;
	rg = &a->rg[g];
	pthread_mutex_lock(&rg->lock);
	fs_cache_drop_owner(fs, (struct fs_owner){FS_OWNER_RGRP, g}, NULL);
	/* reservations may now hold another node's blocks; pending frees
	 * (none after our last demote's checkpoint) stay */
	__atomic_fetch_sub(&a->nrs, rg->nrs, __ATOMIC_RELAXED);
	rg->nrs = 0;
	rg->hint = 1 + rg->nbm;
	ret = fs_buf_read(fs, rg->start, FS_BT_RGRP, &b);
	if (ret == 0) {
		h = b->data;
		if (h->free > rg->len)
			ret = -EUCLEAN;
		else
			__atomic_store_n(&rg->free, h->free, __ATOMIC_RELAXED);
		__atomic_store_n(&rg->dinodes, h->dinodes, __ATOMIC_RELAXED);
		fs_buf_put(b);
	}
	pthread_mutex_unlock(&rg->lock);
	return ret;
}

/* ---- for the free log (fs_flog.c) ------------------------------------ */

uint32_t fs_alloc_group_of(struct fs *fs, uint64_t blk)
{
	return rg_of(fs, blk);
}

int fs_alloc_group_hold(struct fs *fs, uint32_t g)
{
	struct fs_rgrp *rg = &fs->alloc->rg[g];

	if (rg->gl != NULL && fs_glock_acquire(rg->gl, LK_EX) < 0)
		return -EIO;
	return 0;
}

void fs_alloc_group_release(struct fs *fs, uint32_t g)
{
	rg_leave(&fs->alloc->rg[g]);
}

int fs_alloc_free_held(struct fs_tx *tx, uint64_t start, uint32_t len,
		       int inode)
{
	struct fs_rgrp *rg;
	uint32_t s;
	int ret = extent_group(fs_tx_fs(tx), start, len, &rg, &s);

	return ret < 0 ? ret : free_bits(tx, rg, s, len, inode);
}
