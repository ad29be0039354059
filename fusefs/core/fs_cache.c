/*
 * fs_cache.c — the metadata block cache.
 *
 * A hash table of struct fs_buf by block number plus an LRU list of the
 * evictable ones. A buffer is evictable when nobody holds a reference and
 * the journal has not pinned it (pins: member of the running transaction,
 * committed copy awaiting checkpoint). The bound is cache_mb worth of
 * buffers; when it is reached the least recently used evictable buffer is
 * reused. The journal's committed copies (awaiting checkpoint) count
 * against the bound too (fs_cache_page_get). If everything is pinned the
 * cache grows past the bound for a moment and fs_tx_begin() throttles
 * (commit + checkpoint unpin).
 *
 * Invariants (cache lock):
 *  - a buffer is on the LRU iff HASHED && ref == 0 && pins == 0;
 *  - a buffer is freed iff !HASHED && ref == 0 && pins == 0;
 *  - READING: exactly one thread (or one prefetch I/O) does the I/O;
 *    others wait on io_cond;
 *  - PREFETCHED: read (or being read) by a prefetch and not yet used by a
 *    demand read; nprefetch counts them and stays <= ra_max.
 *
 * Prefetch (fs_buf_prefetch): the requested blocks that are not cached
 * are sorted and inserted as READING | PREFETCHED buffers, each holding a
 * reference for its I/O; runs of nearby blocks share one device read into
 * a bounce buffer (struct ra_run), and the runs of one call go to the
 * device as asynchronous batches of at most RA_BATCH reads (struct
 * ra_batch). The completion (a bd thread) copies the blocks out, sets
 * UPTODATE and drops the references. A prefetch never replaces a cached buffer,
 * so a dirty or newer copy always wins over the device's; a prefetched block
 * freed meanwhile is unhashed as usual and its buffer freed when the I/O
 * ends. fs_cache_destroy waits for runs in flight; fs_cache_drop_all
 * waits for the batches issued before it (a list in issue order, so a
 * stream of new prefetches cannot starve a drop).
 *
 * Drops racing prefetches (fs_cache_drop_owner): a buffer still READING
 * for a prefetch has no owner yet (derived from its content when its
 * read completes), so a drop cannot tell whether it is the dropped
 * owner's; its read, issued before the drop, may return the content
 * from before the grant. Every batch gets an id in issue order
 * (ra_next_id, under the lock, before its reads are submitted). A drop
 * records (owner, ra_next_id) in a ring of RA_DROPS entries; a
 * completion whose batch id is below the drop's and whose block's owner
 * (from the content read) is the dropped one discards the block
 * (ra_discard: not UPTODATE; unhashed and freed, or, if a demand reader
 * holds it, left for that reader to read from the device). This is the
 * set a full wait would have dropped: batches completed before the
 * drop are on the owner chain, and batches issued after it read the
 * device after the grant. A ring entry is needed while a batch issued
 * before it is in flight (its id > the oldest in-flight batch's id): a
 * drop that would overwrite such an entry waits for the batches issued
 * before it instead (the old rule, stat ra_drain_waits).
 *
 * Owners (cluster glocks): every buffer records the owner of its block
 * (fs_core_priv.h "struct fs_owner"), derived from its content when it
 * is verified after a read, when a prefetch read completes, or by
 * fs_buf_new from the type (a new BTREE/XATTR block is PENDING until the
 * journal reads its owner field, before its transaction commits and
 * before any owner query answers: fs_journal.c). Hashed buffers with an
 * owner are also chained in a second hash table keyed by owner (ohash,
 * as many buckets as the block hash), so fs_cache_drop_owner walks one
 * bucket: O(the owner's buffers), not O(cache).
 *
 * Invariants (cache lock):
 *  - a buffer is on its owner's chain iff HASHED && owner.type is
 *    neither NONE nor PENDING.
 *
 * Locking: cache->lock (order 5, innermost) protects the hash, the owner
 * hash, the LRU, flags, owner, ref and pins of every buffer, and the
 * prefetch counters. Buffer data is not protected here (while READING
 * only the reader writes it).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "fusefs/core/fs_core_priv.h"
#include "lockmgr/cv_wait.h"

/* Idle prefetch bounce buffers kept for reuse (bounce_get, below). */
#define RA_BOUNCE_KEEP 32u

/* Drops recorded for the prefetches in flight (head comment). A cold du
 * of 1,000 directories on a dlm mount filled 32 while its first batch
 * was in flight (the lock-ahead of a directory's subdirectories). */
#define RA_DROPS FS_CACHE_RA_DROPS

/* A drop of @owner when batch @id was the next to be issued. */
struct ra_drop {
	struct fs_owner owner;
	uint64_t id;
};

/* A cached buffer with the fields only this file uses. */
struct cbuf {
	struct fs_buf b;	      /* first: fs_buf pointers are cbufs */
	struct fs_owner owner;	      /* lock */
	struct cbuf *onext, **opprev; /* owner hash chain: lock */
};

static inline struct cbuf *CB(struct fs_buf *b)
{
	return (struct cbuf *)b;
}

struct fs_cache {
	pthread_mutex_t lock;
	pthread_cond_t io_cond;
	struct fs_buf **hash;		/* lock */
	struct cbuf **ohash;		/* lock: buffers by owner */
	size_t hmask;			/* immutable: both tables */
	struct fs_buf lru;		/* sentinel; lock */
	uint64_t nbufs;			/* lock */
	uint64_t nextra;		/* lock: journal copies (pages) */
	uint64_t npinned;		/* lock */
	uint64_t max_bufs;		/* immutable */
	struct fs_buf *spare;		/* lock: freed buffers (with their
					   data page) kept for reuse, chained
					   by hnext */
	uint64_t nspare;		/* lock */
	uint64_t nprefetch;		/* lock: PREFETCHED buffers */
	uint64_t ra_max;		/* immutable: bound of nprefetch */
	uint64_t ra_batches;		/* lock: prefetch batches in flight */
	struct ra_batch *ra_first;	/* lock: those batches, oldest first
					   (ra_prev/ra_next) */
	struct ra_batch *ra_last;	/* lock */
	uint64_t ra_next_id;		/* lock: id of the next batch */
	struct ra_drop drops[RA_DROPS]; /* lock: recent drops, a ring */
	uint64_t ndrops;		/* lock: drops recorded (next slot:
					   ndrops % RA_DROPS) */
	void **chunks;			/* lock: data page chunks (mapped) */
	size_t nchunks, capchunks;	/* lock */
	char *carve;			/* lock: next unused page of the last
					   chunk */
	unsigned carve_left;		/* lock: pages left there */
	void *free_pages;		/* lock: pages of freed buffers beyond
					   the spares, chained by their first
					   word */
	void *bounce[RA_BOUNCE_KEEP];	/* lock: idle prefetch bounce
					   buffers (RA_SPAN blocks each) */
	unsigned nbounce;		/* lock */
};

/* pins live in fs_buf.ref's upper half: keeps struct fs_buf small */
#define PIN_SHIFT 16
#define REF_MASK ((1u << PIN_SHIFT) - 1)
#define PINS(b) ((b)->ref >> PIN_SHIFT)
#define REFS(b) ((b)->ref & REF_MASK)

static size_t hslot(const struct fs_cache *c, uint64_t blkno)
{
	return (size_t)((blkno * 0x9e3779b97f4a7c15ull) >> 20) & c->hmask;
}

static size_t oslot(const struct fs_cache *c, struct fs_owner o)
{
	uint64_t k = o.num * 0x9e3779b97f4a7c15ull + o.type;

	return (size_t)((k * 0xff51afd7ed558ccdull) >> 20) & c->hmask;
}

/* Lock held. */
static void owner_unlink(struct cbuf *cb)
{
	if (cb->opprev == NULL)
		return;
	*cb->opprev = cb->onext;
	if (cb->onext != NULL)
		cb->onext->opprev = cb->opprev;
	cb->onext = NULL;
	cb->opprev = NULL;
}

/* Record @o as the owner of @cb and chain it if hashed. Lock held. */
static void owner_set(struct fs_cache *c, struct cbuf *cb, struct fs_owner o)
{
	struct cbuf **head;

	if (cb->opprev != NULL && fs_owner_eq(cb->owner, o))
		return;
	owner_unlink(cb);
	cb->owner = o;
	if (o.type == FS_OWNER_NONE || o.type == FS_OWNER_PENDING ||
	    !(cb->b.flags & FS_BUF_HASHED))
		return;
	head = &c->ohash[oslot(c, o)];
	cb->onext = *head;
	if (*head != NULL)
		(*head)->opprev = &cb->onext;
	*head = cb;
	cb->opprev = head;
}

static void lru_del(struct fs_buf *b)
{
	b->lru_prev->lru_next = b->lru_next;
	b->lru_next->lru_prev = b->lru_prev;
	b->lru_prev = b->lru_next = NULL;
}

static void lru_add_tail(struct fs_cache *c, struct fs_buf *b)
{
	b->lru_prev = c->lru.lru_prev;
	b->lru_next = &c->lru;
	c->lru.lru_prev->lru_next = b;
	c->lru.lru_prev = b;
}

static void hash_del(struct fs_cache *c, struct fs_buf *b)
{
	struct fs_buf **pp = &c->hash[hslot(c, b->blkno)];

	while (*pp != b)
		pp = &(*pp)->hnext;
	*pp = b->hnext;
	b->hnext = NULL;
	b->flags &= ~FS_BUF_HASHED;
	owner_unlink(CB(b));
}

/*
 * Data pages come from chunks of PAGE_CHUNK pages mapped and populated by
 * one mmap: a cold tree walk fills the cache with thousands of new
 * buffers, and one page fault each (a VM exit on a virtual machine) cost
 * more than the reads themselves (measured: 21k faults in a cold du of
 * 15k files). Pages go back to a free list, never to the system, until
 * the cache is destroyed; with the spare list below that keeps the
 * daemon's pages at the high-water mark of live buffers.
 */
#define PAGE_CHUNK 64u

/* A page from the free list or the current chunk, or NULL. Lock held. */
static void *page_take(struct fs_cache *c)
{
	void *p = c->free_pages;

	if (p != NULL) {
		c->free_pages = *(void **)p;
		return p;
	}
	if (c->carve_left == 0)
		return NULL;
	p = c->carve;
	c->carve += FS_BLOCK_SIZE;
	c->carve_left--;
	return p;
}

/* Lock held. */
static void page_free(struct fs_cache *c, void *p)
{
	*(void **)p = c->free_pages;
	c->free_pages = p;
}

/* Make @chunk the carving chunk (what is left of the old one goes to the
 * free list). 0 or -ENOMEM. Lock held. */
static int chunk_add(struct fs_cache *c, void *chunk)
{
	if (c->nchunks == c->capchunks) {
		size_t cap = c->capchunks ? 2 * c->capchunks : 64;
		void **v = realloc(c->chunks, cap * sizeof(*v));

		if (v == NULL)
			return -ENOMEM;
		c->chunks = v;
		c->capchunks = cap;
	}
	c->chunks[c->nchunks++] = chunk;
	for (; c->carve_left > 0; c->carve_left--) {
		page_free(c, c->carve);
		c->carve += FS_BLOCK_SIZE;
	}
	c->carve = chunk;
	c->carve_left = PAGE_CHUNK;
	return 0;
}

/* A data page (zero-filled if @zero), or NULL. Takes the lock. */
static void *page_alloc(struct fs_cache *c, int zero)
{
	size_t len = (size_t)PAGE_CHUNK << FS_BLOCK_SHIFT;
	void *p, *chunk;

	pthread_mutex_lock(&c->lock);
	p = page_take(c);
	pthread_mutex_unlock(&c->lock);
	if (p != NULL) {
		if (zero)
			memset(p, 0, FS_BLOCK_SIZE);
		return p;
	}
	chunk = mmap(NULL, len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (chunk == MAP_FAILED)
		return NULL;
	pthread_mutex_lock(&c->lock);
	if (chunk_add(c, chunk) < 0) {
		pthread_mutex_unlock(&c->lock);
		munmap(chunk, len);
		return NULL;
	}
	p = page_take(c);	/* fresh pages are zero */
	pthread_mutex_unlock(&c->lock);
	return p;
}

static void bounce_unmap(void *p); /* prefetch, below */

/*
 * Freed buffers go to a spare list instead of back to malloc: under
 * eviction churn, 4 KiB aligned pages freed to the heap between the
 * namespace's small long-lived allocations fragmented it until the daemon
 * held several times cache_mb (measured: 126 MB RSS with cache_mb=32 after
 * 47k files). With the spares, the pages ever allocated never exceed the
 * high-water mark of live buffers (at most max_bufs spares are kept).
 * Lock held.
 */
static void spare_put(struct fs_cache *c, struct fs_buf *b)
{
	void *data = b->data;

	if (c->nspare >= c->max_bufs) {
		page_free(c, data);
		free(b);
		return;
	}
	memset(CB(b), 0, sizeof(struct cbuf));
	b->data = data;
	b->hnext = c->spare;
	c->spare = b;
	c->nspare++;
}

/* A buffer (data page zeroed if @zero): a spare, else a new one. */
static struct fs_buf *buf_alloc(struct fs_cache *c, int zero)
{
	struct fs_buf *b;

	pthread_mutex_lock(&c->lock);
	b = c->spare;
	if (b != NULL) {
		c->spare = b->hnext;
		c->nspare--;
		b->hnext = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	if (b != NULL) {
		if (zero)
			memset(b->data, 0, FS_BLOCK_SIZE);
		return b;
	}
	b = calloc(1, sizeof(struct cbuf));
	if (b == NULL)
		return NULL;
	b->data = page_alloc(c, zero);
	if (b->data == NULL) {
		free(b);
		return NULL;
	}
	return b;
}

/* A PREFETCHED buffer is used, reused or dropped: it no longer counts
 * against ra_max. Lock held. */
static void prefetch_clear(struct fs_cache *c, struct fs_buf *b)
{
	b->flags &= ~FS_BUF_PREFETCHED;
	c->nprefetch--;
}

static void buf_free(struct fs *fs, struct fs_cache *c, struct fs_buf *b)
{
	if (b->flags & FS_BUF_PREFETCHED) {
		prefetch_clear(c, b);
		FS_STAT_ADD(fs, ra_wasted, 1);
	}
	c->nbufs--;
	spare_put(c, b);
}

/* Called with the lock held after ref/pins/HASHED changed. */
static void buf_settle(struct fs_cache *c, struct fs_buf *b)
{
	int idle = b->ref == 0;

	if (idle && !(b->flags & FS_BUF_HASHED)) {
		if (b->lru_next != NULL)
			lru_del(b);
		buf_free(b->fs, c, b);
		return;
	}
	if (idle && b->lru_next == NULL)
		lru_add_tail(c, b);
	else if (!idle && b->lru_next != NULL)
		lru_del(b);
}

int fs_cache_init(struct fs *fs, unsigned cache_mb)
{
	struct fs_cache *c = calloc(1, sizeof(*c));
	size_t hsize = 1024;

	if (c == NULL)
		return -ENOMEM;
	if (cache_mb == 0)
		cache_mb = 256;
	c->max_bufs = (uint64_t)cache_mb * (1024 * 1024 / FS_BLOCK_SIZE);
	if (c->max_bufs < 256)
		c->max_bufs = 256;
	c->ra_max = c->max_bufs / 4;
	while (hsize < c->max_bufs && hsize < (1u << 22))
		hsize <<= 1;
	c->hash = calloc(hsize, sizeof(*c->hash));
	c->ohash = calloc(hsize, sizeof(*c->ohash));
	if (c->hash == NULL || c->ohash == NULL) {
		free(c->hash);
		free(c->ohash);
		free(c);
		return -ENOMEM;
	}
	c->hmask = hsize - 1;
	c->lru.lru_next = c->lru.lru_prev = &c->lru;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->io_cond, NULL);
	fs->cache = c;
	return 0;
}

void fs_cache_destroy(struct fs *fs)
{
	struct fs_cache *c = fs->cache;

	if (c == NULL)
		return;
	pthread_mutex_lock(&c->lock);
	while (c->ra_batches > 0)
		pthread_cond_wait(&c->io_cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
	for (size_t i = 0; i <= c->hmask; i++) {
		struct fs_buf *b = c->hash[i], *n;

		for (; b != NULL; b = n) {
			n = b->hnext;
			free(b);
		}
	}
	while (c->spare != NULL) {
		struct fs_buf *b = c->spare;

		c->spare = b->hnext;
		free(b);
	}
	for (size_t i = 0; i < c->nchunks; i++)
		munmap(c->chunks[i], (size_t)PAGE_CHUNK << FS_BLOCK_SHIFT);
	free(c->chunks);
	while (c->nbounce > 0)
		bounce_unmap(c->bounce[--c->nbounce]);
	free(c->hash);
	free(c->ohash);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->io_cond);
	free(c);
	fs->cache = NULL;
}

/* ---- owners ----------------------------------------------------------- */

/* The owner of a block of @type at @blkno whose owner field (BTREE,
 * XATTR) is @field. */
static struct fs_owner owner_by_type(const struct fs *fs, uint64_t blkno,
				     unsigned type, uint64_t field)
{
	const struct fs_sb *sb = &fs->sb;
	struct fs_owner o = {FS_OWNER_NONE, 0};
	uint32_t g;

	switch (type) {
	case FS_BT_INODE:
	case FS_BT_REFCOUNT:
		o = (struct fs_owner){FS_OWNER_INODE, blkno};
		break;
	case FS_BT_BTREE:
	case FS_BT_XATTR:
		if (field != 0)
			o = (struct fs_owner){FS_OWNER_INODE, field};
		break;
	case FS_BT_RGRP:
	case FS_BT_BITMAP:
		g = fs_rgrp_of(sb, blkno);
		if (g != UINT32_MAX)
			o = (struct fs_owner){FS_OWNER_RGRP, g};
		break;
	case FS_BT_STATFS:
		/* the master (its lock); the slots' changes: none */
		if (blkno == fs_statfs_master_blk(sb))
			o = (struct fs_owner){FS_OWNER_STATFS, 0};
		break;
	}
	return o;
}

struct fs_owner fs_owner_of(const struct fs *fs, uint64_t blkno,
			    const void *data)
{
	const struct fs_blk_hdr *h = data;
	uint64_t field = 0;

	if (h->magic != FS_MAGIC || h->blkno != blkno)
		return (struct fs_owner){FS_OWNER_NONE, 0};
	/* the field may be written by the block's creator right now (the
	 * journal resolves PENDING owners while handles run): one load */
	if (h->type == FS_BT_BTREE)
		field =
		    __atomic_load_n(&((const struct fs_btree_blk *)data)->owner,
				    __ATOMIC_RELAXED);
	else if (h->type == FS_BT_XATTR)
		field =
		    __atomic_load_n(&((const struct fs_xattr_blk *)data)->owner,
				    __ATOMIC_RELAXED);
	return owner_by_type(fs, blkno, h->type, field);
}

struct fs_owner fs_cache_owner(struct fs_buf *b)
{
	struct fs_cache *c = b->fs->cache;
	struct fs_owner o;

	pthread_mutex_lock(&c->lock);
	o = CB(b)->owner;
	pthread_mutex_unlock(&c->lock);
	return o;
}

void fs_cache_set_owner(struct fs_buf *b, struct fs_owner o)
{
	struct fs_cache *c = b->fs->cache;

	pthread_mutex_lock(&c->lock);
	owner_set(c, CB(b), o);
	pthread_mutex_unlock(&c->lock);
}

unsigned fs_cache_owner_count(struct fs *fs, struct fs_owner o)
{
	struct fs_cache *c = fs->cache;
	unsigned n = 0;

	pthread_mutex_lock(&c->lock);
	for (struct cbuf *cb = c->ohash[oslot(c, o)]; cb != NULL;
	     cb = cb->onext)
		n += fs_owner_eq(cb->owner, o);
	pthread_mutex_unlock(&c->lock);
	return n;
}

/* ---- dropping (cluster) ----------------------------------------------- */

static void ra_drain(struct fs *fs, struct fs_cache *c);
static int ra_drop_record(struct fs_cache *c, struct fs_owner o);

/* Forget @b: 1, or 0 if pinned or reading (journal state the caller
 * should have written back). A referenced buffer lives on, unhashed,
 * until put. Lock held; @b may be freed. */
static int drop_one(struct fs *fs, struct fs_cache *c, struct fs_buf *b)
{
	if (PINS(b) > 0 || (b->flags & FS_BUF_READING))
		return 0;
	hash_del(c, b);
	if (b->lru_next != NULL)
		lru_del(b);
	if (b->ref == 0)
		buf_free(fs, c, b);
	return 1;
}

unsigned fs_cache_drop_all(struct fs *fs, unsigned *busy)
{
	struct fs_cache *c = fs->cache;
	unsigned dropped = 0, kept = 0;

	pthread_mutex_lock(&c->lock);
	ra_drain(fs, c);
	for (size_t i = 0; i <= c->hmask; i++) {
		struct fs_buf *b = c->hash[i], *n;

		for (; b != NULL; b = n) {
			n = b->hnext;
			if (drop_one(fs, c, b))
				dropped++;
			else
				kept++;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (busy != NULL)
		*busy = kept;
	return dropped;
}

unsigned fs_cache_drop_owner(struct fs *fs, struct fs_owner o, unsigned *busy)
{
	struct fs_cache *c = fs->cache;
	unsigned dropped = 0, kept = 0;
	struct cbuf *cb, *n;

	pthread_mutex_lock(&c->lock);
	if (ra_drop_record(c, o) < 0)
		ra_drain(fs, c);
	for (cb = c->ohash[oslot(c, o)]; cb != NULL; cb = n) {
		n = cb->onext;
		if (!fs_owner_eq(cb->owner, o))
			continue;
		if (drop_one(fs, c, &cb->b))
			dropped++;
		else
			kept++;
	}
	pthread_mutex_unlock(&c->lock);
	if (busy != NULL)
		*busy = kept;
	return dropped;
}

static struct fs_buf *hash_find(struct fs_cache *c, uint64_t blkno)
{
	struct fs_buf *b = c->hash[hslot(c, blkno)];

	while (b != NULL && b->blkno != blkno)
		b = b->hnext;
	return b;
}

/* Evict LRU buffers until below the bound. Lock held. */
static void evict(struct fs *fs, struct fs_cache *c)
{
	while (c->nbufs + c->nextra >= c->max_bufs &&
	       c->lru.lru_next != &c->lru) {
		struct fs_buf *b = c->lru.lru_next;

		lru_del(b);
		hash_del(c, b);
		buf_free(b->fs, c, b);
		FS_STAT_ADD(fs, cache_evictions, 1);
	}
}

struct fs_buf *fs_cache_lookup(struct fs *fs, uint64_t blkno)
{
	struct fs_cache *c = fs->cache;
	struct fs_buf *b;

	pthread_mutex_lock(&c->lock);
	b = hash_find(c, blkno);
	if (b != NULL) {
		b->ref++;
		buf_settle(c, b);
	}
	pthread_mutex_unlock(&c->lock);
	return b;
}

int fs_cache_get(struct fs *fs, uint64_t blkno, struct fs_buf **out)
{
	struct fs_cache *c = fs->cache;
	struct fs_buf *b, *nb;

	b = fs_cache_lookup(fs, blkno);
	if (b != NULL)
		goto out_found;
	nb = buf_alloc(c, 1);
	if (nb == NULL)
		return -ENOMEM;
	nb->blkno = blkno;
	nb->fs = fs;
	pthread_mutex_lock(&c->lock);
	b = hash_find(c, blkno);
	if (b != NULL) {	/* lost a race */
		b->ref++;
		buf_settle(c, b);
		spare_put(c, nb);
		pthread_mutex_unlock(&c->lock);
		goto out_found;
	}
	evict(fs, c);
	nb->ref = 1;
	nb->flags = FS_BUF_HASHED;
	nb->hnext = c->hash[hslot(c, blkno)];
	c->hash[hslot(c, blkno)] = nb;
	c->nbufs++;
	pthread_mutex_unlock(&c->lock);
	*out = nb;
	return 0;
out_found:
	*out = b;
	return 0;
}

void fs_buf_hold(struct fs_buf *b)
{
	struct fs_cache *c = b->fs->cache;

	pthread_mutex_lock(&c->lock);
	b->ref++;
	pthread_mutex_unlock(&c->lock);
}

void fs_buf_put(struct fs_buf *b)
{
	struct fs_cache *c;

	if (b == NULL)
		return;
	c = b->fs->cache;
	pthread_mutex_lock(&c->lock);
	b->ref--;
	buf_settle(c, b);
	pthread_mutex_unlock(&c->lock);
}

void fs_cache_pin(struct fs_buf *b)
{
	struct fs_cache *c = b->fs->cache;

	pthread_mutex_lock(&c->lock);
	if (PINS(b) == 0)
		c->npinned++;
	b->ref += 1u << PIN_SHIFT;
	buf_settle(c, b);
	pthread_mutex_unlock(&c->lock);
}

void fs_cache_unpin(struct fs_buf *b)
{
	struct fs_cache *c = b->fs->cache;

	pthread_mutex_lock(&c->lock);
	b->ref -= 1u << PIN_SHIFT;
	if (PINS(b) == 0)
		c->npinned--;
	buf_settle(c, b);
	pthread_mutex_unlock(&c->lock);
}

void fs_cache_unhash(struct fs_buf *b)
{
	struct fs_cache *c = b->fs->cache;

	pthread_mutex_lock(&c->lock);
	if (b->flags & FS_BUF_HASHED) {
		hash_del(c, b);
		/* a later get must not find it; it is freed at ref 0 */
		if (b->ref == 0) {
			if (b->lru_next != NULL)
				lru_del(b);
			buf_free(b->fs, c, b);
		}
	}
	pthread_mutex_unlock(&c->lock);
}

void fs_cache_set_flags(struct fs_buf *b, unsigned set, unsigned clear)
{
	struct fs_cache *c = b->fs->cache;

	pthread_mutex_lock(&c->lock);
	b->flags = (b->flags & ~clear) | set;
	pthread_mutex_unlock(&c->lock);
}

unsigned fs_cache_flags(struct fs_buf *b)
{
	struct fs_cache *c = b->fs->cache;
	unsigned f;

	pthread_mutex_lock(&c->lock);
	f = b->flags;
	pthread_mutex_unlock(&c->lock);
	return f;
}

void *fs_cache_page_get(struct fs *fs)
{
	struct fs_cache *c = fs->cache;
	void *p = page_alloc(c, 0);

	if (p == NULL)
		return NULL;
	pthread_mutex_lock(&c->lock);
	c->nextra++;
	pthread_mutex_unlock(&c->lock);
	return p;
}

void fs_cache_page_put(struct fs *fs, void *page)
{
	struct fs_cache *c = fs->cache;

	pthread_mutex_lock(&c->lock);
	page_free(c, page);
	c->nextra--;
	pthread_mutex_unlock(&c->lock);
}

uint64_t fs_cache_capacity(struct fs *fs)
{
	return fs->cache->max_bufs;
}

uint64_t fs_cache_pinned(struct fs *fs)
{
	struct fs_cache *c = fs->cache;
	uint64_t n;

	pthread_mutex_lock(&c->lock);
	n = c->npinned + c->nextra;
	pthread_mutex_unlock(&c->lock);
	return n;
}

/*
 * Make @b uptodate: the first thread to get here reads, the others wait.
 * Returns 1 if this call read the device, 0 if the copy was there (or
 * read by another thread or a prefetch) with UPTODATE set, or the read
 * error (then nothing is set).
 */
static int buf_fill(struct fs *fs, struct fs_buf *b)
{
	struct fs_cache *c = fs->cache;
	uint64_t t0 = 0;
	int ret, ra = 0;

	pthread_mutex_lock(&c->lock);
	if (b->flags & FS_BUF_PREFETCHED) {
		prefetch_clear(c, b);
		ra = 1;
		if (b->flags & FS_BUF_READING)
			t0 = cvw_now_ns();
	}
	while (b->flags & FS_BUF_READING)
		pthread_cond_wait(&c->io_cond, &c->lock);
	if (b->flags & FS_BUF_UPTODATE) {
		pthread_mutex_unlock(&c->lock);
		FS_STAT_ADD(fs, cache_hits, 1);
		if (ra)
			FS_STAT_ADD(fs, ra_hits, 1);
		if (t0 != 0) {
			FS_STAT_ADD(fs, ra_waits, 1);
			FS_STAT_ADD(fs, ra_wait_ns, cvw_now_ns() - t0);
		}
		return 0;
	}
	b->flags |= FS_BUF_READING;
	pthread_mutex_unlock(&c->lock);

	FS_STAT_ADD(fs, cache_misses, 1);
	ret = bd_read(fs->bd, b->data, FS_BLOCK_SIZE,
		      b->blkno << FS_BLOCK_SHIFT);
	pthread_mutex_lock(&c->lock);
	b->flags &= ~FS_BUF_READING;
	if (ret == 0)
		b->flags |= FS_BUF_UPTODATE;
	pthread_cond_broadcast(&c->io_cond);
	pthread_mutex_unlock(&c->lock);
	return ret < 0 ? ret : 1;
}

/* Verify @b (uptodate) once as a block of @type; on failure drop the
 * reference and forget the bad copy. With @quiet, a copy that fails its
 * first check is not counted and -EAGAIN is returned: the caller reads
 * it again. */
static int buf_check(struct fs *fs, struct fs_buf *b, unsigned type, int quiet)
{
	unsigned f = fs_cache_flags(b);
	int ret;

	if (!(f & FS_BUF_VERIFIED)) {
		ret = fs_blk_verify(b->data, type, b->blkno);
		if (ret < 0) {
			if (quiet)
				ret = -EAGAIN;
			else
				FS_STAT_ADD(fs, bad_blocks, 1);
			/* drop the bad copy so a later read retries */
			fs_cache_set_flags(b, 0, FS_BUF_UPTODATE);
			goto out_put;
		}
		pthread_mutex_lock(&fs->cache->lock);
		b->flags |= FS_BUF_VERIFIED;
		owner_set(fs->cache, CB(b), fs_owner_of(fs, b->blkno, b->data));
		pthread_mutex_unlock(&fs->cache->lock);
	} else if (type != 0 &&
		   ((struct fs_blk_hdr *)b->data)->type != type) {
		ret = -EUCLEAN;
		FS_STAT_ADD(fs, bad_blocks, 1);
		goto out_put;
	}
	return 0;
out_put:
	fs_buf_put(b);
	return ret;
}

int fs_buf_read(struct fs *fs, uint64_t blkno, unsigned type,
		struct fs_buf **out)
{
	struct fs_buf *b;
	int ret, again = 1;

	if (blkno >= fs->sb.total_blocks)
		return -EINVAL;
	do {
		ret = fs_cache_get(fs, blkno, &b);
		if (ret < 0)
			return ret;
		ret = buf_fill(fs, b);
		if (ret < 0) {
			fs_buf_put(b);
			return ret;
		}
		/* a copy we did not read (a prefetch's, perhaps of a block
		 * another node has written since, in a cluster) that fails
		 * its check is read once more before it counts as bad */
		ret = buf_check(fs, b, type, again && ret == 0);
	} while (ret == -EAGAIN && again--);
	if (ret == 0)
		*out = b;
	return ret;
}

int fs_buf_new(struct fs_tx *tx, uint64_t blkno, unsigned type,
	       struct fs_buf **out)
{
	struct fs *fs = fs_tx_fs(tx);
	struct fs_cache *c = fs->cache;
	struct fs_buf *b;
	struct fs_blk_hdr *h;
	int ret;

	if (blkno >= fs->sb.total_blocks)
		return -EINVAL;
	ret = fs_cache_get(fs, blkno, &b);
	if (ret < 0)
		return ret;
	pthread_mutex_lock(&c->lock);
	while (b->flags & FS_BUF_READING)
		pthread_cond_wait(&c->io_cond, &c->lock);
	if (b->flags & FS_BUF_PREFETCHED) {	/* read for nothing */
		prefetch_clear(c, b);
		FS_STAT_ADD(fs, ra_wasted, 1);
	}
	b->flags |= FS_BUF_UPTODATE | FS_BUF_VERIFIED;
	/* BTREE/XATTR: the caller fills the owner field after this returns
	 * and the journal reads it (fs_journal.c) */
	if (type == FS_BT_BTREE || type == FS_BT_XATTR)
		owner_set(c, CB(b), (struct fs_owner){FS_OWNER_PENDING, 0});
	else
		owner_set(c, CB(b), owner_by_type(fs, blkno, type, 0));
	pthread_mutex_unlock(&c->lock);
	/* the header before the journal sees the block: it may read a
	 * pending owner from it at once */
	memset(b->data, 0, FS_BLOCK_SIZE);
	h = b->data;
	h->magic = FS_MAGIC;
	h->type = (uint16_t)type;
	h->blkno = blkno;
	ret = fs_tx_write(tx, b);
	if (ret < 0) {
		/* not journaled: a later read must not trust this copy */
		fs_cache_set_flags(b, 0, FS_BUF_UPTODATE | FS_BUF_VERIFIED);
		fs_buf_put(b);
		return ret;
	}
	*out = b;
	return 0;
}

/* ---- prefetch ---------------------------------------------------------- */

/*
 * Two blocks share one device read when at most RA_GAP blocks lie between
 * them (reading a few unwanted blocks costs less than one more I/O); one
 * read covers at most RA_SPAN blocks (128 KiB). The reads of one
 * fs_buf_prefetch call go to the device as batches of at most RA_BATCH
 * (one io_submit, one completion): the caller asks for blocks it needs
 * together (a directory's entries), so a demand reader waits for one
 * batch of reads issued in parallel, about as long as its own read.
 */
#define RA_GAP 4u
#define RA_SPAN 32u
#define RA_BATCH 32u
#define RA_CHUNK 1024u		/* blocks sorted per pass */

/* One device read: blocks bufs[0..n) (ascending) inside [first, first +
 * span), read into @bounce unless n == span == 1 (then straight into the
 * buffer). */
struct ra_run {
	void *bounce;
	uint64_t first;
	unsigned n;
	struct fs_buf *bufs[RA_SPAN];
};

/* One bd_submit_async batch; freed by its completion. */
struct ra_batch {
	struct fs *fs;
	unsigned *wait;		/* fs_buf_readahead's counters, or NULL */
	unsigned n;		/* runs */
	uint64_t id;		/* lock: issue order */
	struct ra_batch *ra_prev, *ra_next; /* lock: in-flight list */
	struct bd_io ios[RA_BATCH];
	struct ra_run runs[RA_BATCH];
};

/* Prefetches in flight may be reading blocks about to be dropped (and
 * changed by another node afterwards): wait for those issued before this
 * call (later ones cannot starve it). Lock held. */
static void ra_drain(struct fs *fs, struct fs_cache *c)
{
	uint64_t last = c->ra_next_id, t0;

	if (c->ra_first == NULL || c->ra_first->id >= last)
		return;
	FS_STAT_ADD(fs, ra_drain_waits, 1);
	t0 = cvw_now_ns();
	while (c->ra_first != NULL && c->ra_first->id < last)
		pthread_cond_wait(&c->io_cond, &c->lock);
	FS_STAT_ADD(fs, ra_drain_ns, cvw_now_ns() - t0);
}

/* Record a drop of @o for the batches in flight: 0, or -EBUSY if the
 * ring's oldest entry is still needed (the caller drains). Lock held. */
static int ra_drop_record(struct fs_cache *c, struct fs_owner o)
{
	struct ra_drop *d = &c->drops[c->ndrops % RA_DROPS];

	if (c->ra_first == NULL) /* nothing issued before is left */
		return 0;
	if (c->ndrops >= RA_DROPS && d->id > c->ra_first->id)
		return -EBUSY;
	d->owner = o;
	d->id = c->ra_next_id;
	c->ndrops++;
	return 0;
}

/* Was owner @o dropped after batch @id was issued? Lock held. */
static int ra_dropped(const struct fs_cache *c, struct fs_owner o, uint64_t id)
{
	uint64_t k = c->ndrops, end = k > RA_DROPS ? k - RA_DROPS : 0;

	/* newest first: only the drops after @id count */
	while (k > end && c->drops[--k % RA_DROPS].id > id)
		if (fs_owner_eq(c->drops[k % RA_DROPS].owner, o))
			return 1;
	return 0;
}

/* @rb is in flight / done. Lock held. */
static void ra_link(struct fs_cache *c, struct ra_batch *rb)
{
	rb->id = c->ra_next_id++;
	rb->ra_next = NULL;
	rb->ra_prev = c->ra_last;
	if (c->ra_last != NULL)
		c->ra_last->ra_next = rb;
	else
		c->ra_first = rb;
	c->ra_last = rb;
	c->ra_batches++;
}

static void ra_unlink(struct fs_cache *c, struct ra_batch *rb)
{
	if (rb->ra_prev != NULL)
		rb->ra_prev->ra_next = rb->ra_next;
	else
		c->ra_first = rb->ra_next;
	if (rb->ra_next != NULL)
		rb->ra_next->ra_prev = rb->ra_prev;
	else
		c->ra_last = rb->ra_prev;
	c->ra_batches--;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * A new buffer for @blkno, hashed, READING | PREFETCHED, holding one
 * reference for its I/O; NULL if @blkno is cached (*full = 0) or the
 * prefetch bound or the cache bound is reached (*full = 1).
 */
static struct fs_buf *ra_take(struct fs *fs, uint64_t blkno, int *full)
{
	struct fs_cache *c = fs->cache;
	struct fs_buf *nb;

	*full = 0;
	pthread_mutex_lock(&c->lock);
	if (hash_find(c, blkno) != NULL)
		goto out_unlock;
	if (c->nprefetch >= c->ra_max)
		goto out_full;
	pthread_mutex_unlock(&c->lock);
	nb = buf_alloc(c, 0);
	if (nb == NULL) {
		*full = 1;
		return NULL;
	}
	nb->blkno = blkno;
	nb->fs = fs;
	pthread_mutex_lock(&c->lock);
	if (hash_find(c, blkno) != NULL) {	/* lost a race */
		spare_put(c, nb);
		goto out_unlock;
	}
	evict(fs, c);
	/* all pinned/used, or other prefetchers took the bound while the
	 * lock was dropped */
	if (c->nbufs + c->nextra >= c->max_bufs || c->nprefetch >= c->ra_max) {
		spare_put(c, nb);
		goto out_full;
	}
	nb->ref = 1;
	nb->flags = FS_BUF_HASHED | FS_BUF_READING | FS_BUF_PREFETCHED;
	nb->hnext = c->hash[hslot(c, blkno)];
	c->hash[hslot(c, blkno)] = nb;
	c->nbufs++;
	c->nprefetch++;
	pthread_mutex_unlock(&c->lock);
	return nb;
out_full:
	*full = 1;
out_unlock:
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* End the I/O of @b (lock held): uptodate if @ok, else as never read
 * (a demand read reads it again). Drops the I/O's reference. */
static void ra_end_buf(struct fs_cache *c, struct fs_buf *b, int ok)
{
	b->flags &= ~FS_BUF_READING;
	if (ok) {
		b->flags |= FS_BUF_UPTODATE;
		/* unverified yet, but a drop of its owner must find it */
		owner_set(c, CB(b), fs_owner_of(b->fs, b->blkno, b->data));
	} else if (b->flags & FS_BUF_PREFETCHED)
		prefetch_clear(c, b);
	b->ref--;
	buf_settle(c, b);
}

/* End the I/O of @b (lock held) with content its owner's drop made stale
 * (head comment): never UPTODATE; forgotten unless a demand reader holds
 * it (that reader, waiting in buf_fill, reads the device itself). Drops
 * the I/O's reference. */
static void ra_discard(struct fs *fs, struct fs_cache *c, struct fs_buf *b)
{
	FS_STAT_ADD(fs, ra_discarded, 1);
	b->flags &= ~FS_BUF_READING;
	if (REFS(b) > 1) { /* held: kept, for its holder to read */
		if (b->flags & FS_BUF_PREFETCHED)
			prefetch_clear(c, b);
	} else if (PINS(b) == 0 && (b->flags & FS_BUF_HASHED)) {
		hash_del(c, b); /* buf_settle frees it (ra_wasted) */
	}
	b->ref--;
	buf_settle(c, b);
}

/* End the I/O of every block of @rb's run @i. Lock held. */
static void ra_end_run(struct fs_cache *c, struct ra_batch *rb, unsigned i)
{
	struct ra_run *r = &rb->runs[i];
	int ok = rb->ios[i].ret == 0;

	for (unsigned k = 0; k < r->n; k++) {
		struct fs_buf *b = r->bufs[k];

		if (ok && ra_dropped(c, fs_owner_of(rb->fs, b->blkno, b->data),
				     rb->id))
			ra_discard(rb->fs, c, b);
		else
			ra_end_buf(c, b, ok);
	}
}

/* Copy a merged read out of its bounce buffer. */
static void ra_copy(struct ra_run *r)
{
	for (unsigned i = 0; i < r->n; i++) {
		uint64_t k = r->bufs[i]->blkno - r->first;

		memcpy(r->bufs[i]->data,
		       (char *)r->bounce + (k << FS_BLOCK_SHIFT),
		       FS_BLOCK_SIZE);
	}
}

/*
 * Bounce buffers for merged reads, RA_SPAN blocks each. Up to
 * RA_BOUNCE_KEEP idle ones are kept (a batch's worth, at most 4 MiB): a
 * cold tree walk issues thousands of merged reads, and a fresh mapping
 * costs an mmap, a page fault per block read into it and an munmap
 * (which interrupts every CPU running a thread of the daemon). With 8
 * kept, a 2-node rm -rf of a cold 15,613-entry tree mapped 771 for 2,362
 * reads, 278 with 32 (stat ra_bounce_maps). They are mapped, not
 * malloc'ed: glibc raises its mmap threshold after the first 128 KiB
 * block it frees, so later ones came from the threads' malloc arenas,
 * whose pages a walk's churn left resident for good (find over 200,000
 * files, nolock, cache_mb=256: peak RSS 443-473 MB, 277 MB mapped).
 */
static void bounce_unmap(void *p)
{
	munmap(p, (size_t)RA_SPAN << FS_BLOCK_SHIFT);
}

static void *bounce_get(struct fs *fs)
{
	struct fs_cache *c = fs->cache;
	void *p = NULL;

	pthread_mutex_lock(&c->lock);
	if (c->nbounce > 0)
		p = c->bounce[--c->nbounce];
	pthread_mutex_unlock(&c->lock);
	if (p == NULL) {
		p = mmap(NULL, (size_t)RA_SPAN << FS_BLOCK_SHIFT,
			 PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
		if (p == MAP_FAILED)
			p = NULL;
		else
			FS_STAT_ADD(fs, ra_bounce_maps, 1);
	}
	return p;
}

/* Lock held. */
static void bounce_put(struct fs_cache *c, void *p)
{
	if (p == NULL)
		return;
	if (c->nbounce < sizeof(c->bounce) / sizeof(c->bounce[0]))
		c->bounce[c->nbounce++] = p;
	else
		bounce_unmap(p);
}

/* Completion of a batch (a bd thread, or the submitter on failure). */
static void ra_done(struct bd_io *ios, unsigned nios, void *arg)
{
	struct ra_batch *rb = arg;
	struct fs *fs = rb->fs;
	struct fs_cache *c = fs->cache;
	int failed = 0;

	for (unsigned i = 0; i < nios; i++) {
		if (ios[i].ret != 0)
			failed++;
		else if (rb->runs[i].bounce != NULL)
			ra_copy(&rb->runs[i]);
	}
	if (failed > 0)
		FS_STAT_ADD(fs, ra_errors, failed);
	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < nios; i++)
		ra_end_run(c, rb, i);
	if (rb->wait != NULL) {
		rb->wait[0]--;
		if (failed > 0)
			rb->wait[1] = 1;
	}
	for (unsigned i = 0; i < nios; i++)
		bounce_put(c, rb->runs[i].bounce);
	ra_unlink(c, rb);
	pthread_cond_broadcast(&c->io_cond);
	pthread_mutex_unlock(&c->lock);
	free(rb);
}

/* Fill in the read of run @i of @rb. */
static void ra_prep(struct ra_batch *rb, unsigned i)
{
	struct ra_run *r = &rb->runs[i];
	struct bd_io *io = &rb->ios[i];
	unsigned span = (unsigned)(r->bufs[r->n - 1]->blkno - r->first) + 1;

	io->op = BD_READ;
	io->len = (size_t)span << FS_BLOCK_SHIFT;
	io->off = r->first << FS_BLOCK_SHIFT;
	io->ret = 0;
	io->buf = r->bufs[0]->data;
	if (span > 1) {
		r->bounce = bounce_get(rb->fs);
		io->buf = r->bounce;
	}
	FS_STAT_ADD(rb->fs, cache_readahead, r->n);
	FS_STAT_ADD(rb->fs, ra_gap_blocks, span - r->n);
}

/* Issue batch @rb (its completion frees it). */
static void ra_submit(struct ra_batch *rb)
{
	struct fs_cache *c = rb->fs->cache;
	int ret = 0;

	for (unsigned i = 0; i < rb->n; i++) {
		ra_prep(rb, i);
		if (rb->ios[i].buf == NULL)
			ret = -ENOMEM;
	}
	pthread_mutex_lock(&c->lock);
	ra_link(c, rb);
	if (rb->wait != NULL)
		rb->wait[0]++;
	pthread_mutex_unlock(&c->lock);
	FS_STAT_ADD(rb->fs, ra_ios, rb->n);
	if (ret == 0)
		ret = bd_submit_async(rb->fs->bd, rb->ios, rb->n, ra_done, rb);
	if (ret < 0) {
		for (unsigned i = 0; i < rb->n; i++)
			rb->ios[i].ret = ret;
		ra_done(rb->ios, rb->n, rb);
	}
}

/* Join @b to the open run of *@rbp, or open a new one (submitting a full
 * batch). 0, or -ENOMEM (then @b is ended as failed). */
static int ra_add(struct fs *fs, struct ra_batch **rbp, unsigned *wait,
		  struct fs_buf *b)
{
	struct ra_batch *rb = *rbp;
	struct ra_run *r = rb != NULL ? &rb->runs[rb->n - 1] : NULL;

	if (r != NULL && r->n < RA_SPAN && b->blkno - r->first < RA_SPAN &&
	    b->blkno - r->bufs[r->n - 1]->blkno <= RA_GAP + 1) {
		r->bufs[r->n++] = b;
		return 0;
	}
	if (rb != NULL && rb->n == RA_BATCH) {
		ra_submit(rb);
		*rbp = rb = NULL;
	}
	if (rb == NULL) {
		rb = calloc(1, sizeof(*rb));
		if (rb == NULL) {
			pthread_mutex_lock(&fs->cache->lock);
			ra_end_buf(fs->cache, b, 0);
			pthread_cond_broadcast(&fs->cache->io_cond);
			pthread_mutex_unlock(&fs->cache->lock);
			return -ENOMEM;
		}
		rb->fs = fs;
		rb->wait = wait;
		*rbp = rb;
	}
	r = &rb->runs[rb->n++];
	r->first = b->blkno;
	r->bufs[r->n++] = b;
	return 0;
}

/* Prefetch the sorted, distinct blocks @v[0..n); @wait as in ra_start.
 * Returns the number of blocks submitted; *skipped counts those left out
 * because a bound was reached (then *full is set). */
static unsigned ra_sorted(struct fs *fs, const uint64_t *v, unsigned n,
			  unsigned *wait, int *full, unsigned *skipped)
{
	struct ra_batch *rb = NULL;
	unsigned done = 0, i;

	for (i = 0; i < n && !*full; i++) {
		struct fs_buf *b;

		if (v[i] >= fs->sb.total_blocks)
			break;
		b = ra_take(fs, v[i], full);
		if (b == NULL)
			continue;
		if (ra_add(fs, &rb, wait, b) < 0) {
			*full = 1;
			i++;
			break;
		}
		done++;
	}
	if (rb != NULL)
		ra_submit(rb);
	if (*full)	/* v[i - 1] was refused too */
		*skipped += n - i + 1;
	return done;
}

/* fs_buf_prefetch, counting batches in flight in wait[0] (and any
 * failure in wait[1]) when @wait is not NULL. */
static unsigned ra_start(struct fs *fs, const uint64_t *blknos, unsigned n,
			 unsigned *wait)
{
	uint64_t v[RA_CHUNK];
	unsigned done = 0, skipped = 0, i;
	int full = 0;

	for (i = 0; i < n && !full; i += RA_CHUNK) {
		unsigned m = n - i < RA_CHUNK ? n - i : RA_CHUNK, k = 0;

		memcpy(v, blknos + i, m * sizeof(*v));
		qsort(v, m, sizeof(*v), cmp_u64);
		for (unsigned j = 0; j < m; j++)
			if (k == 0 || v[j] != v[k - 1])
				v[k++] = v[j];
		done += ra_sorted(fs, v, k, wait, &full, &skipped);
	}
	if (i < n)
		skipped += n - i;
	if (skipped > 0)
		FS_STAT_ADD(fs, ra_skipped, skipped);
	return done;
}

unsigned fs_buf_prefetch(struct fs *fs, const uint64_t *blknos, unsigned n)
{
	return ra_start(fs, blknos, n, NULL);
}

int fs_buf_readahead(struct fs *fs, const uint64_t *blknos, unsigned n)
{
	struct fs_cache *c = fs->cache;
	unsigned wait[2] = { 0, 0 };

	ra_start(fs, blknos, n, wait);
	pthread_mutex_lock(&c->lock);
	while (wait[0] > 0)
		pthread_cond_wait(&c->io_cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
	return wait[1] ? -EIO : 0;
}

int fs_buf_read_cached(struct fs *fs, uint64_t blkno, unsigned type,
		       struct fs_buf **out)
{
	struct fs_cache *c = fs->cache;
	struct fs_buf *b;
	int ra = 0, ret;

	pthread_mutex_lock(&c->lock);
	b = hash_find(c, blkno);
	if (b == NULL || (b->flags & (FS_BUF_UPTODATE | FS_BUF_READING)) !=
			 FS_BUF_UPTODATE) {
		pthread_mutex_unlock(&c->lock);
		return -EAGAIN;
	}
	b->ref++;
	buf_settle(c, b);
	if (b->flags & FS_BUF_PREFETCHED) {
		prefetch_clear(c, b);
		ra = 1;
	}
	pthread_mutex_unlock(&c->lock);
	FS_STAT_ADD(fs, cache_hits, 1);
	if (ra)
		FS_STAT_ADD(fs, ra_hits, 1);
	ret = buf_check(fs, b, type, 0);
	if (ret == 0)
		*out = b;
	return ret;
}

void fs_core_stats_get(struct fs *fs, struct fs_core_stats *out)
{
	uint64_t *d = (uint64_t *)out;
	const uint64_t *s = (const uint64_t *)&fs->st;

	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		d[i] = __atomic_load_n(&s[i], __ATOMIC_RELAXED);
	if (fs->cache != NULL) {
		pthread_mutex_lock(&fs->cache->lock);
		out->cache_bufs = fs->cache->nbufs;
		out->cache_pinned = fs->cache->npinned;
		out->ra_unused = fs->cache->nprefetch;
		pthread_mutex_unlock(&fs->cache->lock);
	}
}
