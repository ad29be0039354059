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
 * Peers (bd_fault_open_peer): more wrappers over the same @lower, each
 * with its own overlay, as clients of one storage whose flush covers only
 * their own writes (an NBD export without multi-conn): they report
 * bd_flush_covers_all() == 0; a member set with bd_fault_set_flush_all
 * flushes every member's writes (in issue order) and reports 1 (the
 * host's page cache under an image file, beside them). They share one
 * power supply (struct
 * fault_power): writes are counted, and crash and tear points armed,
 * over the whole group, and a crash loses the unflushed writes of every
 * member. A lone wrapper is a group of one.
 *
 * Locking: pw->lock (one mutex per group) protects everything in struct
 * fault_power and the overlay and counters of every member, and is held
 * across the calls into @lower, which serializes the group (fine for
 * tests). writes and crashed are also atomics so that the const getters
 * need no lock. Lock order: pw->lock -> @lower's locks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockdev/bd_internal.h"

struct fault_write {
	uint64_t nth; /* the group's write count at its issue */
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

#define FAULT_PEERS_MAX 8

/* What the wrappers over one @lower share: the power. */
struct fault_power {
	pthread_mutex_t lock;
	struct bd_dev *lower; /* immutable; owned, closed with the last */
	/* lock: the members by their index; NULL: closed */
	struct bd_fault *member[FAULT_PEERS_MAX];
	unsigned refs;		 /* lock: open members */
	_Atomic uint64_t writes; /* written under lock: writes issued */
	uint64_t tear_at;	 /* lock: 0 = off */
	size_t tear_keep;	 /* lock */
	uint64_t crash_at;	 /* lock: 0 = off */
	uint64_t crash_seed;	 /* lock: garble seed of crash_at */
	_Atomic int crashed;	 /* written under lock */
};

struct bd_fault {
	struct bd_dev dev;	 /* first: container of the common header */
	struct bd_dev *lower;	 /* immutable: pw->lower */
	struct fault_power *pw;	 /* immutable; shared with the peers */
	struct bd_worker worker; /* its own locking */
	struct fault_write *log; /* pw->lock: unflushed writes, oldest first */
	size_t nlog, caplog;	 /* pw->lock */
	struct fault_index idx;	 /* pw->lock */
	uint64_t reads;		 /* pw->lock: reads issued */
	uint64_t fail_at[2];	 /* pw->lock: by enum bd_op, counted in
				    this wrapper's reads / the group's
				    writes; 0 = off */
	int fail_persist[2];	 /* pw->lock */
	int flush_all;		 /* pw->lock: a flush applies every
				    member's log (bd_fault_set_flush_all) */
	int hold;		 /* pw->lock: async batches wait before
				    their completion (bd_fault_hold_async) */
	unsigned held;		 /* pw->lock: batches waiting there */
	pthread_cond_t hold_cond; /* with pw->lock: hold or held changed */
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
		      uint64_t off, int durable, uint64_t nth)
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
	w->nth = nth;
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

/* Power loss: decide the fate of every member's overlay (member i > 0
 * with its own seed), then refuse all I/O. pw->lock. */
static void crash_locked(struct fault_power *pw, uint64_t seed)
{
	if (pw->crashed)
		return;
	for (unsigned i = 0; i < FAULT_PEERS_MAX; i++) {
		struct bd_fault *m = pw->member[i];

		if (m == NULL)
			continue;
		/* a failing lower loses the rest: also fine */
		log_apply(m, 1, seed ? seed ^ (i * 0x9e3779b97f4a7c15ull) : 0);
		log_clear(m);
	}
	bd_flush(pw->lower);
	pw->crashed = 1;
}

/* The torn write: its first @keep bytes (a multiple of 512) reach lower
 * after the crash dropped the overlay. Read-modify-write of whole blocks,
 * since lower only takes aligned I/O. */
static void tear_locked(struct bd_fault *f, const void *buf, uint64_t off,
			size_t keep)
{
	size_t span = (keep + BD_ALIGN - 1) / BD_ALIGN * BD_ALIGN;
	unsigned char *tmp;

	crash_locked(f->pw, 0);
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

	pthread_mutex_lock(&f->pw->lock);
	if (f->pw->crashed || should_fail(f, BD_READ, ++f->reads))
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
	pthread_mutex_unlock(&f->pw->lock);
	return ret;
}

static int fault_write(struct bd_dev *dev, const void *buf, size_t len,
		       uint64_t off, unsigned io_flags)
{
	struct bd_fault *f = to_fault(dev);
	struct fault_power *pw = f->pw;
	uint64_t nth;
	int ret = -EIO;

	pthread_mutex_lock(&pw->lock);
	if (pw->crashed)
		goto out_unlock;
	nth = ++pw->writes;
	if (should_fail(f, BD_WRITE, nth))
		goto out_unlock;
	if (pw->crash_at == nth) {
		crash_locked(pw, pw->crash_seed);
		goto out_unlock;
	}
	if (pw->tear_at == nth) {
		tear_locked(f, buf, off,
			    pw->tear_keep < len ? pw->tear_keep / 512 * 512
						: len);
		goto out_unlock;
	}
	if (io_flags & BD_IO_FUA) {
		ret = bd_write(f->lower, buf, len, off, BD_IO_FUA);
		if (ret == 0 && f->nlog > 0)
			ret = log_append(f, buf, len, off, 1, nth);
	} else {
		ret = log_append(f, buf, len, off, 0, nth);
	}
out_unlock:
	pthread_mutex_unlock(&f->pw->lock);
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

/* The worker's submit: the I/O, then, while held, a wait before the
 * completion runs. */
static int fault_submit_held(struct bd_dev *dev, struct bd_io *ios, unsigned n)
{
	struct bd_fault *f = to_fault(dev);
	int ret = fault_submit(dev, ios, n);

	pthread_mutex_lock(&f->pw->lock);
	if (f->hold) {
		f->held++;
		pthread_cond_broadcast(&f->hold_cond);
		while (f->hold)
			pthread_cond_wait(&f->hold_cond, &f->pw->lock);
		f->held--;
	}
	pthread_mutex_unlock(&f->pw->lock);
	return ret;
}

static int fault_submit_async(struct bd_dev *dev, struct bd_io *ios,
			      unsigned n, bd_done_fn done, void *arg)
{
	return bd_worker_submit(&to_fault(dev)->worker, ios, n, done, arg);
}

/* A flush that covers the whole group: every member's unflushed writes
 * reach lower in the order they were issued, then lower is flushed.
 * pw->lock. */
static int flush_all_locked(struct fault_power *pw)
{
	size_t at[FAULT_PEERS_MAX] = {0};
	int ret;

	for (;;) {
		struct bd_fault *next = NULL;
		unsigned k = 0;

		for (unsigned i = 0; i < FAULT_PEERS_MAX; i++) {
			struct bd_fault *m = pw->member[i];

			if (m != NULL && at[i] < m->nlog &&
			    (next == NULL ||
			     m->log[at[i]].nth < next->log[at[k]].nth)) {
				next = m;
				k = i;
			}
		}
		if (next == NULL)
			break;
		ret = bd_write(pw->lower, next->log[at[k]].data,
			       next->log[at[k]].len, next->log[at[k]].off, 0);
		if (ret != 0)
			return ret; /* logs kept: nothing is lost */
		at[k]++;
	}
	ret = bd_flush(pw->lower);
	for (unsigned i = 0; i < FAULT_PEERS_MAX && ret == 0; i++)
		if (pw->member[i] != NULL)
			log_clear(pw->member[i]);
	return ret;
}

static int fault_flush(struct bd_dev *dev)
{
	struct bd_fault *f = to_fault(dev);
	int ret = -EIO;

	pthread_mutex_lock(&f->pw->lock);
	if (f->pw->crashed)
		goto out_unlock;
	if (f->flush_all) {
		ret = flush_all_locked(f->pw);
		goto out_unlock;
	}
	ret = log_apply(f, 0, 0);
	if (ret == 0)
		ret = bd_flush(f->lower);
	if (ret == 0)
		log_clear(f); /* on error keep it: nothing is lost */
out_unlock:
	pthread_mutex_unlock(&f->pw->lock);
	return ret;
}

static void fault_close(struct bd_dev *dev)
{
	struct bd_fault *f = to_fault(dev);
	struct fault_power *pw = f->pw;
	unsigned left;

	bd_fault_hold_async(f, 0);
	bd_worker_fini(&f->worker);
	pthread_cond_destroy(&f->hold_cond);
	pthread_mutex_lock(&pw->lock);
	log_clear(f);
	for (unsigned i = 0; i < FAULT_PEERS_MAX; i++)
		if (pw->member[i] == f)
			pw->member[i] = NULL;
	left = --pw->refs;
	pthread_mutex_unlock(&pw->lock);
	bd_dev_fini(dev);
	free(f);
	if (left > 0)
		return;
	pthread_mutex_destroy(&pw->lock);
	bd_close(pw->lower);
	free(pw);
}

static const struct bd_ops fault_ops = {
	.read = fault_read,
	.write = fault_write,
	.submit = fault_submit,
	.submit_async = fault_submit_async,
	.flush = fault_flush,
	.close = fault_close,
};

/* A new member of @pw (its lock held unless the group is new): 0, -ENOSPC
 * (the group is full) or -errno. */
static int member_open(struct fault_power *pw, struct bd_dev **out,
		       struct bd_fault **fault)
{
	struct bd_fault *f;
	char name[256];
	unsigned i = 0;
	int ret;

	while (i < FAULT_PEERS_MAX && pw->member[i] != NULL)
		i++;
	if (i == FAULT_PEERS_MAX)
		return -ENOSPC;
	f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -ENOMEM;
	snprintf(name, sizeof(name), "fault(%s)", bd_name(pw->lower));
	ret = bd_dev_init(&f->dev, &fault_ops, name, bd_size(pw->lower),
			  pw->lower->flags & BD_RDONLY);
	if (ret != 0)
		goto out_free;
	f->dev.flush_local = pw->lower->flush_local || pw->refs > 0;
	ret = -pthread_cond_init(&f->hold_cond, NULL);
	if (ret != 0)
		goto out_fini;
	ret = bd_worker_init(&f->worker, &f->dev, fault_submit_held);
	if (ret != 0) {
		pthread_cond_destroy(&f->hold_cond);
		goto out_fini;
	}
	f->lower = pw->lower;
	f->pw = pw;
	pw->member[i] = f;
	pw->refs++;
	/* a second client: no member's flush covers the others' writes */
	for (unsigned k = 0; k < FAULT_PEERS_MAX && pw->refs > 1; k++)
		if (pw->member[k] != NULL)
			pw->member[k]->dev.flush_local = 1;
	*out = &f->dev;
	*fault = f;
	return 0;

out_fini:
	bd_dev_fini(&f->dev);
out_free:
	free(f);
	return ret;
}

int bd_fault_open(struct bd_dev *lower, struct bd_dev **out,
		  struct bd_fault **fault)
{
	struct fault_power *pw;
	int ret;

	if (lower == NULL || out == NULL || fault == NULL)
		return -EINVAL;
	pw = calloc(1, sizeof(*pw));
	if (pw == NULL)
		return -ENOMEM;
	ret = -pthread_mutex_init(&pw->lock, NULL);
	if (ret != 0)
		goto out_free;
	pw->lower = lower;
	ret = member_open(pw, out, fault);
	if (ret == 0)
		return 0;
	pthread_mutex_destroy(&pw->lock);
out_free:
	free(pw);
	return ret;
}

int bd_fault_open_peer(struct bd_fault *first, struct bd_dev **out,
		       struct bd_fault **fault)
{
	struct fault_power *pw;
	int ret;

	if (first == NULL || out == NULL || fault == NULL)
		return -EINVAL;
	pw = first->pw;
	pthread_mutex_lock(&pw->lock);
	ret = pw->crashed ? -EIO : member_open(pw, out, fault);
	pthread_mutex_unlock(&pw->lock);
	return ret;
}

/* --- control ------------------------------------------------------------ */

void bd_fault_fail_nth(struct bd_fault *f, enum bd_op op, uint64_t n,
		       int persistent)
{
	if (op != BD_READ && op != BD_WRITE)
		return;
	pthread_mutex_lock(&f->pw->lock);
	f->fail_at[op] = n ? (op == BD_READ ? f->reads : f->pw->writes) + n : 0;
	f->fail_persist[op] = persistent;
	pthread_mutex_unlock(&f->pw->lock);
}

void bd_fault_tear_nth(struct bd_fault *f, uint64_t n, size_t keep)
{
	pthread_mutex_lock(&f->pw->lock);
	f->pw->tear_at = n ? f->pw->writes + n : 0;
	f->pw->tear_keep = keep;
	pthread_mutex_unlock(&f->pw->lock);
}

void bd_fault_crash_nth(struct bd_fault *f, uint64_t n)
{
	bd_fault_crash_nth_garble(f, n, 0);
}

void bd_fault_crash_nth_garble(struct bd_fault *f, uint64_t n,
			       uint64_t garble_seed)
{
	pthread_mutex_lock(&f->pw->lock);
	f->pw->crash_at = n ? f->pw->writes + n : 0;
	f->pw->crash_seed = garble_seed;
	pthread_mutex_unlock(&f->pw->lock);
}

void bd_fault_crash(struct bd_fault *f, uint64_t garble_seed)
{
	pthread_mutex_lock(&f->pw->lock);
	crash_locked(f->pw, garble_seed);
	pthread_mutex_unlock(&f->pw->lock);
}

uint64_t bd_fault_writes(const struct bd_fault *f)
{
	return f->pw->writes;
}

int bd_fault_crashed(const struct bd_fault *f)
{
	return f->pw->crashed;
}

void bd_fault_set_flush_all(struct bd_fault *f)
{
	pthread_mutex_lock(&f->pw->lock);
	f->flush_all = 1;
	f->dev.flush_local = 0;
	pthread_mutex_unlock(&f->pw->lock);
}

void bd_fault_set_flush_local(struct bd_fault *f, int local)
{
	pthread_mutex_lock(&f->pw->lock);
	f->dev.flush_local = local;
	pthread_mutex_unlock(&f->pw->lock);
}

void bd_fault_hold_async(struct bd_fault *f, int hold)
{
	pthread_mutex_lock(&f->pw->lock);
	f->hold = hold;
	pthread_cond_broadcast(&f->hold_cond);
	pthread_mutex_unlock(&f->pw->lock);
}

void bd_fault_wait_held(struct bd_fault *f, unsigned n)
{
	pthread_mutex_lock(&f->pw->lock);
	while (f->held < n)
		pthread_cond_wait(&f->hold_cond, &f->pw->lock);
	pthread_mutex_unlock(&f->pw->lock);
}
