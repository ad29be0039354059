/*
 * fs_data.c — write-behind of file data, with write combining.
 *
 * fs_data_write() copies the caller's data into a private buffer and
 * returns; the device write happens later, asynchronously
 * (bd_submit_async), and completes on a bd thread. Each private buffer
 * is a "run": a contiguous device range [off, off + len).
 *
 * Combining: up to OPEN_MAX of the newest runs stay OPEN (not submitted)
 * and absorb later writes that land inside one of them or extend it
 * contiguously at its end, up to d->run_max bytes (1 MiB, at most a
 * quarter of the bound below); the bytes are copied in issue order, so
 * the newest bytes win. Tar-like workloads (10 KiB writes at unaligned
 * offsets, consecutive files allocated back to back) then become one
 * device write per run instead of one per request, and the
 * read-modify-write of a partial block that the previous request just
 * wrote is served from the open run, not the device. Several open runs
 * keep several streams combined: two files written at once into their
 * own regions of the device (fs_alloc.c reservations) each keep their
 * open run, instead of closing each other's at every request (4 KiB
 * device writes). A write is absorbed by an open run only if no run
 * younger than it overlaps the written bytes (else the older run could
 * land after the younger one). An open run is closed (and submitted
 * unless it waits for an older overlapping run) when:
 *  - it is full (len == run_max), right after the write that filled it;
 *  - a write contiguous at its end does not fit it (the write starts
 *    the stream's next open run);
 *  - a new run needs a slot and OPEN_MAX runs are open: the least
 *    recently written one is closed;
 *  - a read needs bytes of it but is not fully covered by it;
 *  - fs_data_wait(): every journal commit (data=ordered before its
 *    commit record, data=writeback after it, both before the commit's
 *    frees become allocatable), fsync/syncfs (fs_journal_sync), and
 *    unmount (fs_data_destroy); every file write path (fs_file.c) calls
 *    fs_data_write inside or before a transaction on the inode, so the
 *    commit timer (commit=) bounds how long a run stays open; writes not
 *    followed by a transaction (truncate's zeroing) call fs_data_flush;
 *  - fs_data_flush(), and when a writer waits for the memory bound
 *    (both close every open run).
 * Closing is the only transition out of OPEN; completions never touch
 * an open run (their ndeps is counted when they close).
 *
 * Ordering: a run overlapping older runs still on the list is not
 * submitted until they have all completed (ndeps counts them, computed
 * when the run is closed; each completion decrements the younger
 * overlapping closed runs and submits those that reach zero). Two writes
 * to the same block therefore land in issue order, including a block
 * freed and reallocated to another file. (Reuse of a freed data block as
 * metadata is ordered by the journal: frees become allocatable only after
 * a commit, and every commit waits for the data writes issued before it —
 * fs_journal.c.)
 *
 * Readers (fs_data_read) see unwritten data: a read fully covered by the
 * newest overlapping run (open or in flight) is served from its copy;
 * otherwise it closes the open run if it overlaps, waits for every
 * overlapping run to complete and reads the device.
 *
 * Memory: the buffers held by runs are bounded by d->limit bytes (a
 * share of cache_mb, taken from the cache's own bound in fs_super.c). A
 * run's buffer is SMALL_BUF bytes while the run fits there, then
 * d->run_max (a bigger single write gets a buffer of its size). A writer
 * waits while a new buffer would exceed the bound (a single write larger
 * than the bound is let through alone). Freed buffers of both sizes are
 * kept for reuse (no page faults per write), up to half the bound per
 * size and as long as held + kept buffers stay within the bound; an
 * fs_data_wait that finds nothing in flight keeps only POOL_IDLE of each
 * (a commit every commit= seconds returns the memory of a past burst).
 *
 * Errors: the first write error since the last fs_data_wait() is kept and
 * returned by the next fs_data_wait() (then cleared); the journal keeps it
 * for the next fsync (fs_journal.c), so an error is never lost.
 *
 * Invariants: the run list is in issue order (ids increasing), so its
 * head is the oldest run not complete; a run is on the list from its
 * creation until its completion callback has run; the runs of d->open[]
 * (d->nopen of them) are on the list, have open set, ndeps == 0 and
 * submitted == 0; no run younger than an open run overlaps the bytes
 * it absorbed after that younger run was appended.
 *
 * Locking: d->lock protects every field of struct fs_data and the list
 * links, ndeps, submitted, open and used of every run; an open run's len
 * and buffer contents change only under d->lock; a closed run's buffer,
 * off and len are immutable. d->lock is a leaf below the journal and cache locks
 * (order 6 in fs_internal.h); bd_submit_async() is called without it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fusefs/core/fs_core_priv.h"

#define RUN_MAX (1u << 20)	/* largest combined run, bytes */
#define SMALL_BUF (64u << 10)	/* first buffer of a run that fits it */
#define POOL_IDLE 2u		/* spare buffers per size kept when idle */
#define OPEN_MAX 8u		/* open runs (streams combined at once) */

struct dw {
	struct dw *prev, *next;	/* run list, issue order */
	uint64_t id;
	uint64_t off, len;
	size_t cap;		/* buffer bytes */
	unsigned ndeps;		/* older overlapping runs not complete */
	int submitted;
	int open;		/* in d->open[] */
	uint64_t used;		/* d->tick of its last write (LRU) */
	void *buf;
	struct fs_data *d;
	struct bd_io io;
};

/* Spare buffers of one size. */
struct pool {
	void **bufs;
	unsigned n, max;
	size_t size;		/* immutable */
};

struct fs_data {
	struct fs *fs;
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* a run completed */
	struct dw head;		/* list sentinel */
	struct dw *open[OPEN_MAX];	/* the open runs, any order */
	unsigned nopen;
	uint64_t tick;		/* writes so far (LRU clock) */
	uint64_t next_id;
	uint64_t bytes;		/* buffer bytes held by runs */
	uint64_t kept;		/* buffer bytes in the pools */
	uint64_t limit;		/* immutable */
	size_t run_max;		/* immutable */
	uint64_t nwrites;	/* runs on the list */
	struct pool small, big;
	int err;		/* first error since the last wait */
	int held;		/* tests: do not submit (fs_data_hold) */
};

static int overlaps(const struct dw *w, uint64_t off, uint64_t len)
{
	return w->off < off + len && off < w->off + w->len;
}

uint64_t fs_data_share(unsigned cache_mb)
{
	uint64_t mb = (cache_mb == 0 ? 256 : cache_mb) / 8;

	if (mb < 2)
		mb = 2;
	if (mb > 64)
		mb = 64;
	return mb << 20;
}

static int pool_init(struct pool *p, size_t size, uint64_t limit)
{
	p->size = size;
	p->max = (unsigned)(limit / 2 / size);
	if (p->max == 0)
		p->max = 1;
	p->bufs = calloc(p->max, sizeof(*p->bufs));
	return p->bufs == NULL ? -ENOMEM : 0;
}

static void pool_fini(struct pool *p)
{
	while (p->n > 0)
		free(p->bufs[--p->n]);
	free(p->bufs);
}

int fs_data_init(struct fs *fs, unsigned cache_mb)
{
	struct fs_data *d = calloc(1, sizeof(*d));

	if (d == NULL)
		return -ENOMEM;
	d->fs = fs;
	d->head.next = d->head.prev = &d->head;
	d->next_id = 1;
	d->limit = fs_data_share(cache_mb);
	d->run_max = d->limit / 4 < RUN_MAX ? d->limit / 4 : RUN_MAX;
	if (pool_init(&d->small, SMALL_BUF, d->limit) < 0 ||
	    pool_init(&d->big, d->run_max, d->limit) < 0) {
		free(d->small.bufs);
		free(d);
		return -ENOMEM;
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	fs->data = d;
	return 0;
}

/* ---- buffers (d->lock held) ---- */

static struct pool *pool_of(struct fs_data *d, size_t cap)
{
	if (cap == d->small.size)
		return &d->small;
	if (cap == d->big.size)
		return &d->big;
	return NULL;
}

/* Give the pools' buffers back until @need more bytes fit the bound. */
static void trim_kept(struct fs_data *d, uint64_t need)
{
	struct pool *p;

	while (d->kept > 0 && d->bytes + d->kept + need > d->limit) {
		p = d->big.n > 0 ? &d->big : &d->small;
		free(p->bufs[--p->n]);
		d->kept -= p->size;
	}
}

/* A buffer of @cap bytes, from a pool or allocated; NULL: -ENOMEM. The
 * caller has added @cap to d->bytes. */
static void *buf_get(struct fs_data *d, size_t cap)
{
	struct pool *p = pool_of(d, cap);
	void *b;

	if (p != NULL && p->n > 0) {
		d->kept -= cap;
		return p->bufs[--p->n];
	}
	trim_kept(d, 0);
	if (posix_memalign(&b, BD_ALIGN, cap) != 0)
		return NULL;
	return b;
}

/* Idle: keep at most POOL_IDLE buffers of each size. */
static void trim_idle(struct fs_data *d)
{
	struct pool *p[2] = { &d->small, &d->big };

	for (unsigned i = 0; i < 2; i++) {
		while (p[i]->n > POOL_IDLE) {
			free(p[i]->bufs[--p[i]->n]);
			d->kept -= p[i]->size;
		}
	}
}

/* Free or keep a buffer of @cap bytes no longer counted in d->bytes. */
static void buf_put(struct fs_data *d, void *b, size_t cap)
{
	struct pool *p = pool_of(d, cap);

	if (p != NULL && p->n < p->max &&
	    d->bytes + d->kept + cap <= d->limit) {
		p->bufs[p->n++] = b;
		d->kept += cap;
		return;
	}
	free(b);
}

void fs_data_destroy(struct fs *fs)
{
	struct fs_data *d = fs->data;

	if (d == NULL)
		return;
	fs_data_flush(fs);
	pthread_mutex_lock(&d->lock);
	while (d->head.next != &d->head)
		pthread_cond_wait(&d->cond, &d->lock);
	pthread_mutex_unlock(&d->lock);
	pool_fini(&d->small);
	pool_fini(&d->big);
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	free(d);
	fs->data = NULL;
}

/* ---- submission and completion ---- */

static void submit(struct dw *w);

/* Submit a chain (linked through io.priv, newest first) oldest first.
 * The runs of one chain never overlap each other (a younger one would
 * still wait for the older). */
static void submit_chain(struct dw *ready)
{
	struct dw *rev = NULL, *x;

	while (ready != NULL) {
		x = ready;
		ready = x->io.priv;
		x->io.priv = rev;
		rev = x;
	}
	while (rev != NULL) {
		x = rev;
		rev = x->io.priv;
		submit(x);
	}
}

/* Completion of @w: leave the list, release its younger dependents (the
 * open run has none: its dependencies are counted when it closes). */
static void complete(struct dw *w, int ret)
{
	struct fs_data *d = w->d;
	struct dw *ready = NULL, *x;

	pthread_mutex_lock(&d->lock);
	if (ret < 0 && d->err == 0)
		d->err = ret;
	if (ret < 0)
		FS_STAT_ADD(d->fs, data_errors, 1);
	for (x = w->next; x != &d->head; x = x->next) {
		if (x->ndeps > 0 && overlaps(x, w->off, w->len) &&
		    --x->ndeps == 0 && !d->held) {
			x->submitted = 1;
			x->io.priv = ready;	/* chain, submitted below */
			ready = x;
		}
	}
	w->prev->next = w->next;
	w->next->prev = w->prev;
	d->bytes -= w->cap;
	d->nwrites--;
	buf_put(d, w->buf, w->cap);
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	free(w);
	submit_chain(ready);
}

static void write_done(struct bd_io *ios, unsigned n, void *arg)
{
	(void)n;
	complete(arg, ios[0].ret);
}

/* Issue @w (no lock held). If the device refuses the async batch, write
 * synchronously so that the data is not lost. */
static void submit(struct dw *w)
{
	struct fs *fs = w->d->fs;
	int ret;

	w->io = (struct bd_io){ .op = BD_WRITE, .buf = w->buf, .len = w->len,
				.off = w->off };
	ret = bd_submit_async(fs->bd, &w->io, 1, write_done, w);
	if (ret < 0)
		complete(w, bd_write(fs->bd, w->buf, w->len, w->off, 0));
}

/* Push @x (may be NULL) on a chain for submit_chain (newest first). */
static void chain_push(struct dw **ready, struct dw *x)
{
	if (x != NULL) {
		x->io.priv = *ready;
		*ready = x;
	}
}

/* Close the open run @w: count the older overlapping runs it waits for.
 * Returns it if the caller must submit it (after unlocking), else NULL.
 * d->lock held. */
static struct dw *close_run(struct fs_data *d, struct dw *w)
{
	struct dw *x;
	unsigned i;

	for (i = 0; d->open[i] != w; i++)
		;
	d->open[i] = d->open[--d->nopen];
	d->open[d->nopen] = NULL;
	w->open = 0;
	for (x = d->head.next; x != w; x = x->next)
		if (overlaps(x, w->off, w->len))
			w->ndeps++;
	FS_STAT_ADD(d->fs, data_runs, 1);
	if (w->ndeps > 0 || d->held)
		return NULL;
	w->submitted = 1;
	return w;
}

/* Close every open run, youngest last; returns the chain of those to
 * submit (oldest submitted first). d->lock held. */
static struct dw *close_all(struct fs_data *d)
{
	struct dw *ready = NULL, *young;

	while (d->nopen > 0) {
		young = d->open[0];
		for (unsigned i = 1; i < d->nopen; i++)
			if (d->open[i]->id > young->id)
				young = d->open[i];
		/* closed youngest first: the chain ends oldest first */
		chain_push(&ready, close_run(d, young));
	}
	return ready;
}

void fs_data_flush(struct fs *fs)
{
	struct fs_data *d = fs->data;
	struct dw *ready;

	pthread_mutex_lock(&d->lock);
	ready = close_all(d);
	pthread_mutex_unlock(&d->lock);
	submit_chain(ready);
}

/* ---- write ---- */

/* 1 if no run younger than @w overlaps [off, off + len). d->lock held. */
static int younger_clear(struct fs_data *d, const struct dw *w, uint64_t off,
			 uint64_t len)
{
	for (const struct dw *x = d->head.prev; x != w; x = x->prev)
		if (overlaps(x, off, len))
			return 0;
	return 1;
}

/* Copy [off, off + len) into the open run @w if it lands inside it or
 * extends it contiguously within d->run_max, growing its buffer from
 * SMALL_BUF if needed, and no younger run overlaps it. 1 absorbed, 0 not.
 * d->lock held. */
static int absorb_into(struct fs_data *d, struct dw *w, const void *buf,
		       uint64_t len, uint64_t off)
{
	uint64_t end;
	void *nb;

	if (off < w->off || off > w->off + w->len)
		return 0;
	end = off + len - w->off;	/* new length if it grows */
	if (end > d->run_max || !younger_clear(d, w, off, len))
		return 0;
	if (end > w->cap) {
		if (w->cap != SMALL_BUF ||
		    d->bytes + d->run_max - w->cap > d->limit)
			return 0;
		d->bytes += d->run_max - w->cap;
		nb = buf_get(d, d->run_max);
		if (nb == NULL) {
			d->bytes -= d->run_max - w->cap;
			return 0;
		}
		memcpy(nb, w->buf, w->len);
		buf_put(d, w->buf, SMALL_BUF);
		w->buf = nb;
		w->cap = d->run_max;
	}
	memcpy((char *)w->buf + (off - w->off), buf, len);
	if (end > w->len)
		w->len = end;
	w->used = d->tick;
	return 1;
}

/* The open run that absorbs the write, or NULL; *ended = an open run
 * the write starts right after but does not fit (its stream moved on:
 * the caller closes it), else NULL. d->lock held. */
static struct dw *absorb(struct fs_data *d, const void *buf, uint64_t len,
			 uint64_t off, struct dw **ended)
{
	*ended = NULL;
	for (unsigned i = 0; i < d->nopen; i++) {
		struct dw *w = d->open[i];

		if (absorb_into(d, w, buf, len, off))
			return w;
		if (off == w->off + w->len)
			*ended = w;
	}
	return NULL;
}

/* 1 if a submitted run is in flight (its completion frees memory).
 * d->lock held. */
static int any_submitted(struct fs_data *d)
{
	for (const struct dw *x = d->head.next; x != &d->head; x = x->next)
		if (x->submitted)
			return 1;
	return 0;
}

/* Wait until @cap more buffer bytes fit the bound (or nothing is held),
 * then count them. While no submitted run can free memory, closes the
 * open runs so that they can complete. d->lock held; may drop it. */
static void reserve(struct fs_data *d, size_t cap)
{
	struct dw *ready;

	if (d->bytes > 0 && d->bytes + cap > d->limit)
		FS_STAT_ADD(d->fs, data_throttled, 1);
	while (d->bytes > 0 && d->bytes + cap > d->limit) {
		if (!any_submitted(d) && (ready = close_all(d)) != NULL) {
			pthread_mutex_unlock(&d->lock);
			submit_chain(ready);
			pthread_mutex_lock(&d->lock);
			continue;
		}
		pthread_cond_wait(&d->cond, &d->lock);
	}
	d->bytes += cap;
}

/* Append the new run @w (buffer filled) as an open run, closing the
 * least recently written one if OPEN_MAX are open; a full run is closed
 * at once. Pushes the runs to submit after unlocking on *ready. d->lock
 * held. */
static void append_run(struct fs_data *d, struct dw *w, struct dw **ready)
{
	struct dw *lru;

	if (d->nopen == OPEN_MAX) {
		lru = d->open[0];
		for (unsigned i = 1; i < d->nopen; i++)
			if (d->open[i]->used < lru->used)
				lru = d->open[i];
		chain_push(ready, close_run(d, lru));
	}
	w->id = d->next_id++;
	w->prev = d->head.prev;
	w->next = &d->head;
	d->head.prev->next = w;
	d->head.prev = w;
	d->nwrites++;
	w->open = 1;
	w->used = d->tick;
	d->open[d->nopen++] = w;
	pthread_cond_broadcast(&d->cond);	/* a waiter in reserve() may
						   close it */
	if (w->len >= d->run_max)
		chain_push(ready, close_run(d, w));
}

/* A new run for [off, off + len): reserve its buffer, copy (without the
 * lock), append. d->lock held on entry and return; *ready must be empty
 * on entry (reserve() may wait for memory). */
static int new_run(struct fs_data *d, const void *buf, size_t len,
		   uint64_t off, struct dw **ready)
{
	size_t cap = len <= SMALL_BUF ? SMALL_BUF :
		     len <= d->run_max ? d->run_max : len;
	struct dw *w = calloc(1, sizeof(*w));

	if (w == NULL)
		return -ENOMEM;
	reserve(d, cap);
	w->buf = buf_get(d, cap);
	if (w->buf == NULL) {
		d->bytes -= cap;
		pthread_cond_broadcast(&d->cond);
		free(w);
		return -ENOMEM;
	}
	pthread_mutex_unlock(&d->lock);
	memcpy(w->buf, buf, len);
	w->off = off;
	w->len = len;
	w->cap = cap;
	w->d = d;
	pthread_mutex_lock(&d->lock);
	append_run(d, w, ready);
	return 0;
}

int fs_data_write(struct fs *fs, const void *buf, size_t len, uint64_t off)
{
	struct fs_data *d = fs->data;
	struct dw *ready = NULL, *w, *ended;
	int ret = 0;

	if (fs->ro)
		return -EROFS;
	if (len == 0)
		return 0;
	if (len % BD_ALIGN != 0 || off % BD_ALIGN != 0 ||
	    off + len > bd_size(fs->bd) || off + len < off)
		return -EINVAL;
	pthread_mutex_lock(&d->lock);
	d->tick++;
	w = absorb(d, buf, len, off, &ended);
	if (w != NULL) {
		FS_STAT_ADD(fs, data_absorbed, 1);
		if (w->len >= d->run_max)
			ready = close_run(d, w);
		if (ready != NULL)
			ready->io.priv = NULL;
	} else {
		if (ended != NULL && (w = close_run(d, ended)) != NULL) {
			pthread_mutex_unlock(&d->lock);
			submit(w);
			pthread_mutex_lock(&d->lock);
		}
		ret = new_run(d, buf, len, off, &ready);
	}
	pthread_mutex_unlock(&d->lock);
	if (ret < 0)
		return ret;
	FS_STAT_ADD(fs, data_writes, 1);
	FS_STAT_ADD(fs, data_bytes, len);
	fs_journal_data_written(fs);
	submit_chain(ready);
	return 0;
}

/* ---- read ---- */

/* bd_read into a buffer of any alignment. */
static int read_dev(struct fs *fs, void *buf, size_t len, uint64_t off)
{
	void *bounce;
	int ret;

	if ((uintptr_t)buf % BD_ALIGN == 0)
		return bd_read(fs->bd, buf, len, off);
	if (posix_memalign(&bounce, BD_ALIGN, len) != 0)
		return -ENOMEM;
	ret = bd_read(fs->bd, bounce, len, off);
	if (ret == 0)
		memcpy(buf, bounce, len);
	free(bounce);
	return ret;
}

/* fs_data_read; 1 if served from a run, 0 from the device. */
static int data_read(struct fs *fs, void *buf, size_t len, uint64_t off)
{
	struct fs_data *d = fs->data;
	struct dw *x, *ready;
	int ret;

	if (len == 0)
		return 1;
	pthread_mutex_lock(&d->lock);
	for (;;) {
		/* newest overlapping run first */
		for (x = d->head.prev; x != &d->head; x = x->prev)
			if (overlaps(x, off, len))
				break;
		if (x == &d->head)
			break;
		if (x->off <= off && off + len <= x->off + x->len) {
			memcpy(buf, (char *)x->buf + (off - x->off), len);
			pthread_mutex_unlock(&d->lock);
			FS_STAT_ADD(fs, data_read_hits, 1);
			return 1;
		}
		/* x must complete first: submit it if open; if it waits
		 * for older runs, one of them may be open (older open runs
		 * can overlap it): close them all */
		ready = NULL;
		if (x->open)
			chain_push(&ready, close_run(d, x));
		if (ready == NULL && x->ndeps > 0 && d->nopen > 0)
			ready = close_all(d);
		if (ready != NULL) {
			pthread_mutex_unlock(&d->lock);
			submit_chain(ready);
			pthread_mutex_lock(&d->lock);
			continue;
		}
		pthread_cond_wait(&d->cond, &d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	ret = read_dev(fs, buf, len, off);
	return ret < 0 ? ret : 0;
}

int fs_data_read(struct fs *fs, void *buf, size_t len, uint64_t off)
{
	int ret = data_read(fs, buf, len, off);

	return ret < 0 ? ret : 0;
}

int fs_data_read_rmw(struct fs *fs, void *buf, size_t len, uint64_t off)
{
	int ret = data_read(fs, buf, len, off);

	if (ret == 0)
		FS_STAT_ADD(fs, data_rmw_dev, 1);
	return ret < 0 ? ret : 0;
}

/* ---- waiting, tests, stats ---- */

int fs_data_wait(struct fs *fs)
{
	struct fs_data *d = fs->data;
	struct dw *ready;
	uint64_t last;
	int ret;

	if (d == NULL)
		return 0;
	FS_STAT_ADD(fs, data_waits, 1);
	/* close the open runs and take @last under one hold of the lock:
	 * a run opened in between would have an id <= last and stay open
	 * (nothing else may close it), so the wait would never end */
	pthread_mutex_lock(&d->lock);
	ready = close_all(d);
	last = d->next_id - 1;
	pthread_mutex_unlock(&d->lock);
	submit_chain(ready);
	pthread_mutex_lock(&d->lock);
	while (d->head.next != &d->head && d->head.next->id <= last)
		pthread_cond_wait(&d->cond, &d->lock);
	if (d->head.next == &d->head)
		trim_idle(d);
	ret = d->err;
	d->err = 0;
	pthread_mutex_unlock(&d->lock);
	return ret;
}

void fs_data_hold(struct fs *fs, int hold)
{
	struct fs_data *d = fs->data;
	struct dw *ready = NULL, *x;

	pthread_mutex_lock(&d->lock);
	d->held = hold;
	if (!hold) {
		for (x = d->head.next; x != &d->head; x = x->next) {
			if (x->ndeps == 0 && !x->submitted && !x->open) {
				x->submitted = 1;
				x->io.priv = ready;
				ready = x;
			}
		}
	}
	pthread_mutex_unlock(&d->lock);
	submit_chain(ready);
}

void fs_data_inflight(struct fs *fs, uint64_t *writes, uint64_t *bytes)
{
	struct fs_data *d = fs->data;

	pthread_mutex_lock(&d->lock);
	*writes = d->nwrites;
	*bytes = d->bytes;
	pthread_mutex_unlock(&d->lock);
}

uint64_t fs_data_limit(struct fs *fs)
{
	return fs->data->limit;
}

size_t fs_data_run_max(struct fs *fs)
{
	return fs->data->run_max;
}
