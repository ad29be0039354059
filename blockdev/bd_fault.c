/*
 * bd_fault.c — a fault-injecting wrapper around another device, for crash
 * and error-path tests.
 *
 * Model of a disk with a volatile write cache: a write lands in an overlay
 * (a log of unflushed writes, in issue order, plus an index from block
 * number to the newest unflushed copy of that block, which reads consult
 * after reading @lower). bd_flush() applies the log to @lower in order and
 * flushes @lower. A BD_IO_FUA write goes straight to @lower (with FUA); if
 * older unflushed writes exist it is also logged as "durable", so that
 * applying the log in order can never let an older write win over it.
 *
 * Injection (all counted from the call that arms them, per I/O, batches
 * count each of their I/Os):
 *  - fail the n-th read or write with -EIO, once or from then on; a failed
 *    write changes nothing;
 *  - crash when the n-th write is issued (that write is lost; the
 *    unflushed ones before it dropped, or decided by a seed as below);
 *  - tear the n-th write: the unflushed writes before it are lost, and only
 *    its first keep bytes (rounded down to 512) reach @lower, as a write
 *    that was cut by the power loss;
 *  - crash now: unflushed writes are dropped, or with a seed, each one is
 *    independently kept, dropped or replaced by garbage (splitmix64 PRNG,
 *    so the outcome depends only on the seed and the writes).
 * After a crash every I/O and flush returns -EIO; @lower holds exactly what
 * survived and can be reopened through a new wrapper by the test.
 *
 * Locking: f->lock (a mutex) protects everything below it in struct
 * bd_fault and is held across the calls into @lower, which serializes the
 * wrapper (fine for tests). writes and crashed are also atomics so that the
 * const getters need no lock. Lock order: f->lock -> @lower's locks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockdev/bd_internal.h"

struct fault_write {
	uint64_t off;
	size_t len;
	int durable;         /* FUA: already in lower; replayed in order */
	unsigned char *data; /* len bytes, BD_ALIGN-aligned, owned */
};

/* Open addressing: key = block number + 1 (0 = empty), no deletion. */
struct fault_index {
	uint64_t *keys;
	unsigned char **vals; /* newest unflushed copy of the block */
	size_t cap;           /* a power of two, or 0 */
	size_t used;
};

struct bd_fault {
	struct bd_dev dev;       /* first: container of the common header */
	struct bd_dev *lower;    /* immutable; owned */
	struct bd_worker worker; /* its own locking */
	pthread_mutex_t lock;
	struct fault_write *log; /* f->lock: unflushed writes, oldest first */
	size_t nlog, caplog;     /* f->lock */
	struct fault_index idx;  /* f->lock */
	uint64_t reads;          /* f->lock: reads issued */
	_Atomic uint64_t writes; /* written under f->lock: writes issued */
	uint64_t fail_at[2];     /* f->lock: by enum bd_op; 0 = off */
	int fail_persist[2];     /* f->lock */
	uint64_t tear_at;        /* f->lock: 0 = off */
	size_t tear_keep;        /* f->lock */
	uint64_t crash_at;       /* f->lock: 0 = off */
	uint64_t crash_seed;     /* f->lock: garble seed of crash_at */
	_Atomic int crashed;     /* written under f->lock */
};

static struct bd_fault *to_fault(struct bd_dev *dev)
{
	return (struct bd_fault *)dev;
}

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* --- the block index ---------------------------------------------------- */

static size_t idx_slot(const struct fault_index *x, uint64_t key)
{
	size_t i = (size_t)(key * 0x9e3779b97f4a7c15ull) & (x->cap - 1);

	while (x->keys[i] != 0 && x->keys[i] != key)
		i = (i + 1) & (x->cap - 1);
	return i;
}

static int idx_grow(struct fault_index *x)
{
	struct fault_index n = { .cap = x->cap ? x->cap * 2 : 256 };

	n.keys = calloc(n.cap, sizeof(*n.keys));
	n.vals = calloc(n.cap, sizeof(*n.vals));
	if (n.keys == NULL || n.vals == NULL) {
		free(n.keys);
		free(n.vals);
		return -ENOMEM;
	}
	for (size_t i = 0; i < x->cap; i++) {
		if (x->keys[i] != 0) {
			size_t j = idx_slot(&n, x->keys[i]);

			n.keys[j] = x->keys[i];
			n.vals[j] = x->vals[i];
			n.used++;
		}
	}
	free(x->keys);
	free(x->vals);
	*x = n;
	return 0;
}

static int idx_put(struct fault_index *x, uint64_t block, unsigned char *p)
{
	size_t i;
	int ret;

	if ((x->used + 1) * 2 > x->cap) {
		ret = idx_grow(x);
		if (ret != 0)
			return ret;
	}
	i = idx_slot(x, block + 1);
	if (x->keys[i] == 0)
		x->used++;
	x->keys[i] = block + 1;
	x->vals[i] = p;
	return 0;
}

static unsigned char *idx_get(const struct fault_index *x, uint64_t block)
{
	size_t i;

	if (x->cap == 0)
		return NULL;
	i = idx_slot(x, block + 1);
	return x->keys[i] != 0 ? x->vals[i] : NULL;
}

static void idx_clear(struct fault_index *x)
{
	free(x->keys);
	free(x->vals);
	memset(x, 0, sizeof(*x));
}

/* --- the overlay log ---------------------------------------------------- */

static void log_clear(struct bd_fault *f)
{
	for (size_t i = 0; i < f->nlog; i++)
		free(f->log[i].data);
	free(f->log);
	f->log = NULL;
	f->nlog = 0;
	f->caplog = 0;
	idx_clear(&f->idx);
}

/* Append a copy of a write and index its blocks. 0, or -ENOMEM with the
 * overlay unchanged (the index is grown before anything is put in it). */
static int log_append(struct bd_fault *f, const void *buf, size_t len,
		      uint64_t off, int durable)
{
	struct fault_write *w;
	unsigned char *data;

	if (f->nlog == f->caplog) {
		size_t cap = f->caplog ? f->caplog * 2 : 64;

		w = realloc(f->log, cap * sizeof(*w));
		if (w == NULL)
			return -ENOMEM;
		f->log = w;
		f->caplog = cap;
	}
	data = bd_buf_alloc(len);
	if (data == NULL)
		return -ENOMEM;
	memcpy(data, buf, len);
	/* Grow the index first so the puts below cannot fail half way. */
	while ((f->idx.used + len / BD_ALIGN) * 2 > f->idx.cap) {
		if (idx_grow(&f->idx) != 0) {
			free(data);
			return -ENOMEM;
		}
	}
	for (size_t k = 0; k < len / BD_ALIGN; k++)
		idx_put(&f->idx, off / BD_ALIGN + k, data + k * BD_ALIGN);
	w = &f->log[f->nlog++];
	w->off = off;
	w->len = len;
	w->durable = durable;
	w->data = data;
	return 0;
}

/* Write the log to lower in order; with @seed, decide per non-durable
 * write (crash), else write everything (flush). */
static int log_apply(struct bd_fault *f, int crash, uint64_t seed)
{
	uint64_t st = seed;
	int ret;

	for (size_t i = 0; i < f->nlog; i++) {
		struct fault_write *w = &f->log[i];

		if (crash && !w->durable) {
			uint64_t pick = seed ? splitmix64(&st) % 3 : 1;

			if (pick == 1)
				continue; /* dropped */
			if (pick == 2)
				for (size_t k = 0; k < w->len; k += 8) {
					uint64_t r = splitmix64(&st);

					memcpy(w->data + k, &r, 8);
				}
		}
		ret = bd_write(f->lower, w->data, w->len, w->off, 0);
		if (ret != 0)
			return ret;
	}
	return 0;
}

/* Power loss: decide the fate of the overlay, then refuse all I/O. */
static void crash_locked(struct bd_fault *f, uint64_t seed)
{
	if (f->crashed)
		return;
	log_apply(f, 1, seed); /* a failing lower loses the rest: also fine */
	bd_flush(f->lower);
	log_clear(f);
	f->crashed = 1;
}

/* The torn write: its first @keep bytes (a multiple of 512) reach lower
 * after the crash dropped the overlay. Read-modify-write of whole blocks,
 * since lower only takes aligned I/O. */
static void tear_locked(struct bd_fault *f, const void *buf, uint64_t off,
			size_t keep)
{
	size_t span = (keep + BD_ALIGN - 1) / BD_ALIGN * BD_ALIGN;
	unsigned char *tmp;

	crash_locked(f, 0);
	if (keep == 0)
		return;
	tmp = bd_buf_alloc(span);
	if (tmp == NULL)
		return;
	if (bd_read(f->lower, tmp, span, off) == 0) {
		memcpy(tmp, buf, keep);
		if (bd_write(f->lower, tmp, span, off, 0) == 0)
			bd_flush(f->lower);
	}
	free(tmp);
}

/* --- I/O ---------------------------------------------------------------- */

static int should_fail(struct bd_fault *f, enum bd_op op, uint64_t nth)
{
	uint64_t at = f->fail_at[op];

	return at != 0 && (nth == at || (f->fail_persist[op] && nth > at));
}

static int fault_read(struct bd_dev *dev, void *buf, size_t len,
		      uint64_t off)
{
	struct bd_fault *f = to_fault(dev);
	unsigned char *p;
	int ret = -EIO;

	pthread_mutex_lock(&f->lock);
	if (f->crashed || should_fail(f, BD_READ, ++f->reads))
		goto out_unlock;
	ret = bd_read(f->lower, buf, len, off);
	if (ret != 0 || f->nlog == 0)
		goto out_unlock;
	for (size_t k = 0; k < len / BD_ALIGN; k++) {
		p = idx_get(&f->idx, off / BD_ALIGN + k);
		if (p != NULL)
			memcpy((char *)buf + k * BD_ALIGN, p, BD_ALIGN);
	}
out_unlock:
	pthread_mutex_unlock(&f->lock);
	return ret;
}

static int fault_write(struct bd_dev *dev, const void *buf, size_t len,
		       uint64_t off, unsigned io_flags)
{
	struct bd_fault *f = to_fault(dev);
	uint64_t nth;
	int ret = -EIO;

	pthread_mutex_lock(&f->lock);
	if (f->crashed)
		goto out_unlock;
	nth = ++f->writes;
	if (should_fail(f, BD_WRITE, nth))
		goto out_unlock;
	if (f->crash_at == nth) {
		crash_locked(f, f->crash_seed);
		goto out_unlock;
	}
	if (f->tear_at == nth) {
		tear_locked(f, buf, off, f->tear_keep < len ?
			    f->tear_keep / 512 * 512 : len);
		goto out_unlock;
	}
	if (io_flags & BD_IO_FUA) {
		ret = bd_write(f->lower, buf, len, off, BD_IO_FUA);
		if (ret == 0 && f->nlog > 0)
			ret = log_append(f, buf, len, off, 1);
	} else {
		ret = log_append(f, buf, len, off, 0);
	}
out_unlock:
	pthread_mutex_unlock(&f->lock);
	return ret;
}

static int fault_submit(struct bd_dev *dev, struct bd_io *ios, unsigned n)
{
	int first = 0;

	for (unsigned i = 0; i < n; i++) {
		if (ios[i].op == BD_READ)
			ios[i].ret = fault_read(dev, ios[i].buf, ios[i].len,
						ios[i].off);
		else
			ios[i].ret = fault_write(dev, ios[i].buf, ios[i].len,
						 ios[i].off, ios[i].flags);
		if (ios[i].ret != 0 && first == 0)
			first = ios[i].ret;
	}
	return first;
}

static int fault_submit_async(struct bd_dev *dev, struct bd_io *ios,
			      unsigned n, bd_done_fn done, void *arg)
{
	return bd_worker_submit(&to_fault(dev)->worker, ios, n, done, arg);
}

static int fault_flush(struct bd_dev *dev)
{
	struct bd_fault *f = to_fault(dev);
	int ret = -EIO;

	pthread_mutex_lock(&f->lock);
	if (f->crashed)
		goto out_unlock;
	ret = log_apply(f, 0, 0);
	if (ret == 0)
		ret = bd_flush(f->lower);
	if (ret == 0)
		log_clear(f); /* on error keep it: nothing is lost */
out_unlock:
	pthread_mutex_unlock(&f->lock);
	return ret;
}

static void fault_close(struct bd_dev *dev)
{
	struct bd_fault *f = to_fault(dev);

	bd_worker_fini(&f->worker);
	log_clear(f);
	pthread_mutex_destroy(&f->lock);
	bd_close(f->lower);
	bd_dev_fini(dev);
	free(f);
}

static const struct bd_ops fault_ops = {
	.read = fault_read,
	.write = fault_write,
	.submit = fault_submit,
	.submit_async = fault_submit_async,
	.flush = fault_flush,
	.close = fault_close,
};

int bd_fault_open(struct bd_dev *lower, struct bd_dev **out,
		  struct bd_fault **fault)
{
	struct bd_fault *f;
	char name[256];
	int ret;

	if (lower == NULL || out == NULL || fault == NULL)
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -ENOMEM;
	snprintf(name, sizeof(name), "fault(%s)", bd_name(lower));
	ret = bd_dev_init(&f->dev, &fault_ops, name, bd_size(lower),
			  lower->flags & BD_RDONLY);
	if (ret != 0)
		goto out_free;
	f->dev.flush_local = lower->flush_local;
	ret = -pthread_mutex_init(&f->lock, NULL);
	if (ret != 0)
		goto out_fini;
	ret = bd_worker_init(&f->worker, &f->dev, fault_submit);
	if (ret != 0)
		goto out_mutex;
	f->lower = lower;
	*out = &f->dev;
	*fault = f;
	return 0;

out_mutex:
	pthread_mutex_destroy(&f->lock);
out_fini:
	bd_dev_fini(&f->dev);
out_free:
	free(f);
	return ret;
}

/* --- control ------------------------------------------------------------ */

void bd_fault_fail_nth(struct bd_fault *f, enum bd_op op, uint64_t n,
		       int persistent)
{
	if (op != BD_READ && op != BD_WRITE)
		return;
	pthread_mutex_lock(&f->lock);
	f->fail_at[op] = n ? (op == BD_READ ? f->reads : f->writes) + n : 0;
	f->fail_persist[op] = persistent;
	pthread_mutex_unlock(&f->lock);
}

void bd_fault_tear_nth(struct bd_fault *f, uint64_t n, size_t keep)
{
	pthread_mutex_lock(&f->lock);
	f->tear_at = n ? f->writes + n : 0;
	f->tear_keep = keep;
	pthread_mutex_unlock(&f->lock);
}

void bd_fault_crash_nth(struct bd_fault *f, uint64_t n)
{
	bd_fault_crash_nth_garble(f, n, 0);
}

void bd_fault_crash_nth_garble(struct bd_fault *f, uint64_t n,
			       uint64_t garble_seed)
{
	pthread_mutex_lock(&f->lock);
	f->crash_at = n ? f->writes + n : 0;
	f->crash_seed = garble_seed;
	pthread_mutex_unlock(&f->lock);
}

void bd_fault_crash(struct bd_fault *f, uint64_t garble_seed)
{
	pthread_mutex_lock(&f->lock);
	crash_locked(f, garble_seed);
	pthread_mutex_unlock(&f->lock);
}

uint64_t bd_fault_writes(const struct bd_fault *f)
{
	return f->writes;
}

int bd_fault_crashed(const struct bd_fault *f)
{
	return f->crashed;
}
