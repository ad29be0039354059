/*
 * fs_data.c — write-behind of file data.
 *
 * fs_data_write() copies the caller's data into a private buffer, issues
 * it with bd_submit_async() and returns; the device write completes later
 * on a bd thread. Readers (fs_data_read) see in-flight data: a read fully
 * covered by the newest overlapping in-flight write is served from its
 * copy; otherwise it waits for every overlapping in-flight write to
 * complete and reads the device.
 *
 * Ordering: a write overlapping older in-flight writes is not submitted
 * until they have all completed (ndeps counts them; each completion
 * decrements the younger overlapping writes and submits those that reach
 * zero). Two writes to the same block therefore land in issue order,
 * including a block freed and reallocated to another file. (Reuse of a
 * freed data block as metadata is ordered by the journal: frees become
 * allocatable only after a commit, and every commit waits for the data
 * writes issued before it — fs_journal.c.)
 *
 * Memory: the copies of in-flight writes are bounded by d->limit bytes (a
 * share of cache_mb, taken from the cache's own bound in fs_super.c);
 * a writer waits while the bound would be exceeded (a single write larger
 * than the bound is let through alone).
 *
 * Errors: the first write error since the last fs_data_wait() is kept and
 * returned by the next fs_data_wait() (then cleared); the journal keeps it
 * for the next fsync (fs_journal.c), so an error is never lost.
 *
 * Invariants: the in-flight list is in issue order (ids increasing), so
 * its head is the oldest write not yet complete; a write is on the list
 * from fs_data_write() until its completion callback has run.
 *
 * Locking: d->lock protects every field of struct fs_data and the list
 * links and ndeps of every struct dw; a struct dw's buffer, offset and
 * length are immutable once it is on the list. d->lock is a leaf below the
 * journal and cache locks (order 6 in fs_internal.h); bd_submit_async() is
 * called without it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fusefs/fs_core_priv.h"

struct dw {
	struct dw *prev, *next;	/* in-flight list, issue order */
	uint64_t id;
	uint64_t off, len;
	unsigned ndeps;		/* older overlapping writes not complete */
	int submitted;
	void *buf;
	struct fs_data *d;
	struct bd_io io;
};

struct fs_data {
	struct fs *fs;
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* a write completed */
	struct dw head;		/* list sentinel */
	uint64_t next_id;
	uint64_t bytes;		/* copies held by in-flight writes */
	uint64_t limit;		/* immutable */
	uint64_t nwrites;	/* in flight */
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

int fs_data_init(struct fs *fs, unsigned cache_mb)
{
	struct fs_data *d = calloc(1, sizeof(*d));

	if (d == NULL)
		return -ENOMEM;
	d->fs = fs;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	d->head.next = d->head.prev = &d->head;
	d->next_id = 1;
	d->limit = fs_data_share(cache_mb);
	fs->data = d;
	return 0;
}

void fs_data_destroy(struct fs *fs)
{
	struct fs_data *d = fs->data;

	if (d == NULL)
		return;
	pthread_mutex_lock(&d->lock);
	while (d->head.next != &d->head)
		pthread_cond_wait(&d->cond, &d->lock);
	pthread_mutex_unlock(&d->lock);
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	free(d);
	fs->data = NULL;
}

static void submit(struct dw *w);

/* Submit a chain (linked through io.priv, newest first) oldest first.
 * The writes of one chain never overlap each other (a younger one would
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

/* Completion of @w: leave the list, release its younger dependents. */
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
	d->bytes -= w->len;
	d->nwrites--;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	free(w->buf);
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

int fs_data_write(struct fs *fs, const void *buf, size_t len, uint64_t off)
{
	struct fs_data *d = fs->data;
	struct dw *w, *x;
	int ret, now;

	if (fs->ro)
		return -EROFS;
	if (len == 0)
		return 0;
	if (len % BD_ALIGN != 0 || off % BD_ALIGN != 0 ||
	    off + len > bd_size(fs->bd) || off + len < off)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -ENOMEM;
	ret = posix_memalign(&w->buf, BD_ALIGN, len);
	if (ret != 0) {
		free(w);
		return -ENOMEM;
	}
	memcpy(w->buf, buf, len);
	w->off = off;
	w->len = len;
	w->d = d;

	pthread_mutex_lock(&d->lock);
	if (d->bytes > 0 && d->bytes + len > d->limit) {
		FS_STAT_ADD(fs, data_throttled, 1);
		while (d->bytes > 0 && d->bytes + len > d->limit)
			pthread_cond_wait(&d->cond, &d->lock);
	}
	for (x = d->head.next; x != &d->head; x = x->next)
		if (overlaps(x, off, len))
			w->ndeps++;
	w->id = d->next_id++;
	now = w->ndeps == 0 && !d->held;
	w->submitted = now;
	w->prev = d->head.prev;
	w->next = &d->head;
	d->head.prev->next = w;
	d->head.prev = w;
	d->bytes += len;
	d->nwrites++;
	pthread_mutex_unlock(&d->lock);

	FS_STAT_ADD(fs, data_writes, 1);
	FS_STAT_ADD(fs, data_bytes, len);
	fs_journal_data_written(fs);
	if (now)	/* not w->submitted: a completion may submit w */
		submit(w);
	return 0;
}

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

int fs_data_read(struct fs *fs, void *buf, size_t len, uint64_t off)
{
	struct fs_data *d = fs->data;
	struct dw *x;

	if (len == 0)
		return 0;
	pthread_mutex_lock(&d->lock);
	for (;;) {
		/* newest overlapping write first */
		for (x = d->head.prev; x != &d->head; x = x->prev)
			if (overlaps(x, off, len))
				break;
		if (x == &d->head)
			break;
		if (x->off <= off && off + len <= x->off + x->len) {
			memcpy(buf, (char *)x->buf + (off - x->off), len);
			pthread_mutex_unlock(&d->lock);
			FS_STAT_ADD(fs, data_read_hits, 1);
			return 0;
		}
		pthread_cond_wait(&d->cond, &d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	return read_dev(fs, buf, len, off);
}

int fs_data_wait(struct fs *fs)
{
	struct fs_data *d = fs->data;
	uint64_t last;
	int ret;

	if (d == NULL)
		return 0;
	FS_STAT_ADD(fs, data_waits, 1);
	pthread_mutex_lock(&d->lock);
	last = d->next_id - 1;
	while (d->head.next != &d->head && d->head.next->id <= last)
		pthread_cond_wait(&d->cond, &d->lock);
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
			if (x->ndeps == 0 && !x->submitted) {
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
