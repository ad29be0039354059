/*
 * fs_cache.c — the metadata block cache.
 *
 * A hash table of struct fs_buf by block number plus an LRU list of the
 * evictable ones. A buffer is evictable when nobody holds a reference and
 * the journal has not pinned it (pins: member of the running transaction,
 * committed copy awaiting checkpoint). The bound is cache_mb worth of
 * buffers; when it is reached the least recently used evictable buffer is
 * reused. The journal's committed copies (awaiting checkpoint) count
 * against the bound too (fs_cache_account). If everything is pinned the
 * cache grows past the bound for a moment and fs_tx_begin() throttles
 * (commit + checkpoint unpin).
 *
 * Invariants (cache lock):
 *  - a buffer is on the LRU iff HASHED && ref == 0 && pins == 0;
 *  - a buffer is freed iff !HASHED && ref == 0 && pins == 0;
 *  - READING: exactly one thread does the I/O; others wait on io_cond.
 *
 * Locking: cache->lock (order 5, innermost) protects the hash, the LRU,
 * flags, ref and pins of every buffer. Buffer data is not protected here.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fusefs/fs_core_priv.h"

struct fs_cache {
	pthread_mutex_t lock;
	pthread_cond_t io_cond;
	struct fs_buf **hash;		/* lock */
	size_t hmask;
	struct fs_buf lru;		/* sentinel; lock */
	uint64_t nbufs;			/* lock */
	uint64_t nextra;		/* lock: journal copies (pages) */
	uint64_t npinned;		/* lock */
	uint64_t max_bufs;		/* immutable */
	struct fs_buf *spare;		/* lock: freed buffers (with their
					   data page) kept for reuse, chained
					   by hnext */
	uint64_t nspare;		/* lock */
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
}

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
		free(data);
		free(b);
		return;
	}
	memset(b, 0, sizeof(*b));
	b->data = data;
	b->hnext = c->spare;
	c->spare = b;
	c->nspare++;
}

/* A buffer with a zeroed data page: a spare, else a new one. */
static struct fs_buf *buf_alloc(struct fs_cache *c)
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
		memset(b->data, 0, FS_BLOCK_SIZE);
		return b;
	}
	b = calloc(1, sizeof(*b));
	if (b == NULL)
		return NULL;
	b->data = bd_buf_alloc(FS_BLOCK_SIZE);
	if (b->data == NULL) {
		free(b);
		return NULL;
	}
	return b;
}

static void buf_free(struct fs_cache *c, struct fs_buf *b)
{
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
		buf_free(c, b);
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
	while (hsize < c->max_bufs && hsize < (1u << 22))
		hsize <<= 1;
	c->hash = calloc(hsize, sizeof(*c->hash));
	if (c->hash == NULL) {
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
	for (size_t i = 0; i <= c->hmask; i++) {
		struct fs_buf *b = c->hash[i], *n;

		for (; b != NULL; b = n) {
			n = b->hnext;
			free(b->ckpt);
			free(b->data);
			free(b);
		}
	}
	while (c->spare != NULL) {
		struct fs_buf *b = c->spare;

		c->spare = b->hnext;
		free(b->data);
		free(b);
	}
	free(c->hash);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->io_cond);
	free(c);
	fs->cache = NULL;
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
		buf_free(c, b);
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
	nb = buf_alloc(c);
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
			buf_free(c, b);
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

void fs_cache_account(struct fs *fs, int64_t pages)
{
	struct fs_cache *c = fs->cache;

	pthread_mutex_lock(&c->lock);
	c->nextra += (uint64_t)pages;
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
 * Returns 0 with UPTODATE set, or the read error (then nothing is set).
 */
static int buf_fill(struct fs *fs, struct fs_buf *b)
{
	struct fs_cache *c = fs->cache;
	int ret;

	pthread_mutex_lock(&c->lock);
	while (b->flags & FS_BUF_READING)
		pthread_cond_wait(&c->io_cond, &c->lock);
	if (b->flags & FS_BUF_UPTODATE) {
		pthread_mutex_unlock(&c->lock);
		FS_STAT_ADD(fs, cache_hits, 1);
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
	return ret;
}

int fs_buf_read(struct fs *fs, uint64_t blkno, unsigned type,
		struct fs_buf **out)
{
	struct fs_buf *b;
	unsigned f;
	int ret;

	if (blkno >= fs->sb.total_blocks)
		return -EINVAL;
	ret = fs_cache_get(fs, blkno, &b);
	if (ret < 0)
		return ret;
	ret = buf_fill(fs, b);
	if (ret < 0)
		goto out_put;
	f = fs_cache_flags(b);
	if (!(f & FS_BUF_VERIFIED)) {
		ret = fs_blk_verify(b->data, type, blkno);
		if (ret < 0) {
			FS_STAT_ADD(fs, bad_blocks, 1);
			/* drop the bad copy so a later read retries */
			fs_cache_set_flags(b, 0, FS_BUF_UPTODATE);
			goto out_put;
		}
		fs_cache_set_flags(b, FS_BUF_VERIFIED, 0);
	} else if (type != 0 &&
		   ((struct fs_blk_hdr *)b->data)->type != type) {
		ret = -EUCLEAN;
		FS_STAT_ADD(fs, bad_blocks, 1);
		goto out_put;
	}
	*out = b;
	return 0;
out_put:
	fs_buf_put(b);
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
	b->flags |= FS_BUF_UPTODATE | FS_BUF_VERIFIED;
	pthread_mutex_unlock(&c->lock);
	ret = fs_tx_write(tx, b);
	if (ret < 0) {
		fs_buf_put(b);
		return ret;
	}
	memset(b->data, 0, FS_BLOCK_SIZE);
	h = b->data;
	h->magic = FS_MAGIC;
	h->type = (uint16_t)type;
	h->blkno = blkno;
	*out = b;
	return 0;
}

int fs_buf_readahead(struct fs *fs, const uint64_t *blknos, unsigned n)
{
	struct fs_buf **bufs;
	struct bd_io *ios;
	unsigned nio = 0;
	int ret = 0;

	bufs = calloc(n, sizeof(*bufs));
	ios = calloc(n, sizeof(*ios));
	if (bufs == NULL || ios == NULL) {
		ret = -ENOMEM;
		goto out_free;
	}
	for (unsigned i = 0; i < n; i++) {
		struct fs_cache *c = fs->cache;
		struct fs_buf *b;

		if (blknos[i] >= fs->sb.total_blocks ||
		    fs_cache_get(fs, blknos[i], &b) < 0)
			continue;
		pthread_mutex_lock(&c->lock);
		if (b->flags & (FS_BUF_READING | FS_BUF_UPTODATE)) {
			pthread_mutex_unlock(&c->lock);
			fs_buf_put(b);
			continue;
		}
		b->flags |= FS_BUF_READING;
		pthread_mutex_unlock(&c->lock);
		bufs[nio] = b;
		ios[nio].op = BD_READ;
		ios[nio].buf = b->data;
		ios[nio].len = FS_BLOCK_SIZE;
		ios[nio].off = b->blkno << FS_BLOCK_SHIFT;
		nio++;
	}
	if (nio > 0)
		ret = bd_submit(fs->bd, ios, nio);
	for (unsigned i = 0; i < nio; i++) {
		struct fs_cache *c = fs->cache;

		pthread_mutex_lock(&c->lock);
		bufs[i]->flags &= ~FS_BUF_READING;
		if (ios[i].ret == 0 && ret >= 0)
			bufs[i]->flags |= FS_BUF_UPTODATE;
		pthread_cond_broadcast(&c->io_cond);
		pthread_mutex_unlock(&c->lock);
		fs_buf_put(bufs[i]);
	}
	FS_STAT_ADD(fs, cache_readahead, nio);
out_free:
	free(bufs);
	free(ios);
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
		pthread_mutex_unlock(&fs->cache->lock);
	}
}
