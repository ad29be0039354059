/*
 * bd.c — the block-device front end: argument checks, dispatch through
 * struct bd_ops, per-op counters, and bd_buf_alloc().
 *
 * Every public I/O call is checked here (alignment, bounds, read-only,
 * flags) so that backends only ever see valid requests. A batch is
 * checked as a whole before anything is started: if one I/O is invalid,
 * it gets its -errno, every other one -ECANCELED, and nothing is done.
 *
 * bd_open_any() is here too: the one place where a DEVICE string becomes a
 * backend (an NBD URI or a path).
 *
 * Counters: an I/O is counted once, when it completes, with the latency
 * seen by the caller (for a batch: from submit to the batch's completion).
 * Failed I/Os count in count and errors but not in bytes. Counters are
 * relaxed atomics; the histogram bucket of an I/O of t us is floor(log2 t)
 * (0 for t < 2 us), the last bucket takes everything longer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blockdev/bd_internal.h"

uint64_t bd_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int bd_dev_init(struct bd_dev *dev, const struct bd_ops *ops,
		const char *name, uint64_t size, unsigned flags)
{
	memset(dev, 0, sizeof(*dev));
	dev->name = strdup(name);
	if (dev->name == NULL)
		return -ENOMEM;
	dev->ops = ops;
	dev->size = size;
	dev->flags = flags;
	return 0;
}

void bd_dev_fini(struct bd_dev *dev)
{
	free(dev->name);
	dev->name = NULL;
}

static unsigned hist_bucket(uint64_t ns)
{
	uint64_t us = ns / 1000;
	unsigned b = 0;

	while (us > 1 && b < BD_HIST_BUCKETS - 1) {
		us >>= 1;
		b++;
	}
	return b;
}

static void count_op(struct bd_op_counters *c, size_t len, int ret,
		     uint64_t ns)
{
	uint64_t max = atomic_load_explicit(&c->max_ns, memory_order_relaxed);

	atomic_fetch_add_explicit(&c->count, 1, memory_order_relaxed);
	if (ret == 0)
		atomic_fetch_add_explicit(&c->bytes, len, memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&c->errors, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->total_ns, ns, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->hist[hist_bucket(ns)], 1,
				  memory_order_relaxed);
	while (ns > max &&
	       !atomic_compare_exchange_weak_explicit(&c->max_ns, &max, ns,
						      memory_order_relaxed,
						      memory_order_relaxed))
		;
}

static struct bd_op_counters *op_counters(struct bd_dev *dev, enum bd_op op)
{
	return op == BD_READ ? &dev->stats.read : &dev->stats.write;
}

/* Sequentially consistent: bd_fence's caller reads inflight after it set
 * the fence flag, a writer reads the flag after it counted itself here
 * (check_gate), so no write slips past a fencer that saw none in flight. */
static void inflight_add(struct bd_dev *dev, unsigned n)
{
	struct bd_counters *s = &dev->stats;
	uint64_t now = atomic_fetch_add_explicit(&s->inflight, n,
						 memory_order_seq_cst) + n;
	uint64_t max = atomic_load_explicit(&s->max_inflight,
					    memory_order_relaxed);

	while (now > max &&
	       !atomic_compare_exchange_weak_explicit(&s->max_inflight, &max,
						      now, memory_order_relaxed,
						      memory_order_relaxed))
		;
}

static void inflight_sub(struct bd_dev *dev, unsigned n)
{
	atomic_fetch_sub_explicit(&dev->stats.inflight, n,
				  memory_order_relaxed);
}

/* The write gate and the fence flag (bd.h): 0 or -errno. */
static int check_gate(struct bd_dev *dev)
{
	bd_gate_fn fn = __atomic_load_n(&dev->gate, __ATOMIC_ACQUIRE);
	int ret = 0;

	if (__atomic_load_n(&dev->fenced, __ATOMIC_SEQ_CST))
		ret = -EIO;
	else if (fn != NULL)
		ret = fn(__atomic_load_n(&dev->gate_arg, __ATOMIC_ACQUIRE));
	if (ret != 0)
		atomic_fetch_add_explicit(&dev->stats.gate_refused, 1,
					  memory_order_relaxed);
	return ret;
}

int bd_gate_check(struct bd_dev *dev)
{
	return check_gate(dev);
}

void bd_set_gate(struct bd_dev *dev, bd_gate_fn fn, void *arg)
{
	if (fn == NULL) {
		__atomic_store_n(&dev->gate, NULL, __ATOMIC_RELEASE);
		return;
	}
	__atomic_store_n(&dev->gate_arg, arg, __ATOMIC_RELEASE);
	__atomic_store_n(&dev->gate, fn, __ATOMIC_RELEASE);
}

void bd_fence(struct bd_dev *dev)
{
	__atomic_store_n(&dev->fenced, 1, __ATOMIC_SEQ_CST);
}

int bd_fenced(const struct bd_dev *dev)
{
	return __atomic_load_n(&dev->fenced, __ATOMIC_ACQUIRE);
}

/* 0 or -errno for one request on @dev. */
static int check_io(struct bd_dev *dev, enum bd_op op, const void *buf,
		    size_t len, uint64_t off, unsigned io_flags)
{
	if (op != BD_READ && op != BD_WRITE)
		return -EINVAL;
	if (buf == NULL || (uintptr_t)buf % BD_ALIGN != 0)
		return -EINVAL;
	if (len == 0 || len % BD_ALIGN != 0 || off % BD_ALIGN != 0)
		return -EINVAL;
	if (off > dev->size || len > dev->size - off)
		return -EINVAL;
	if (io_flags & ~(unsigned)BD_IO_FUA)
		return -EINVAL;
	if (op == BD_WRITE && (dev->flags & BD_RDONLY))
		return -EROFS;
	if (op == BD_WRITE)
		return check_gate(dev);
	return 0;
}

/* Check a whole batch; on error mark it (see the header) and return it. */
static int check_batch(struct bd_dev *dev, struct bd_io *ios, unsigned n)
{
	int first = 0;

	if (ios == NULL)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		ios[i].ret = check_io(dev, ios[i].op, ios[i].buf, ios[i].len,
				      ios[i].off, ios[i].flags);
		if (ios[i].ret != 0 && first == 0)
			first = ios[i].ret;
	}
	if (first == 0)
		return 0;
	for (unsigned i = 0; i < n; i++)
		if (ios[i].ret == 0)
			ios[i].ret = -ECANCELED;
	return first;
}

static void count_batch(struct bd_dev *dev, struct bd_io *ios, unsigned n,
			uint64_t start)
{
	uint64_t ns = bd_now_ns() - start;

	for (unsigned i = 0; i < n; i++) {
		count_op(op_counters(dev, ios[i].op), ios[i].len, ios[i].ret,
			 ns);
		if (ios[i].op == BD_WRITE && (ios[i].flags & BD_IO_FUA) &&
		    ios[i].ret == 0)
			atomic_fetch_add_explicit(&dev->stats.fua_writes, 1,
						  memory_order_relaxed);
	}
}

int bd_read(struct bd_dev *dev, void *buf, size_t len, uint64_t off)
{
	uint64_t start;
	int ret;

	ret = check_io(dev, BD_READ, buf, len, off, 0);
	if (ret != 0)
		return ret;
	start = bd_now_ns();
	inflight_add(dev, 1);
	ret = dev->ops->read(dev, buf, len, off);
	inflight_sub(dev, 1);
	count_op(&dev->stats.read, len, ret, bd_now_ns() - start);
	return ret;
}

int bd_write(struct bd_dev *dev, const void *buf, size_t len, uint64_t off,
	     unsigned io_flags)
{
	uint64_t start;
	int ret;

	inflight_add(dev, 1); /* before the gate: see inflight_add */
	ret = check_io(dev, BD_WRITE, buf, len, off, io_flags);
	if (ret != 0) {
		inflight_sub(dev, 1);
		return ret;
	}
	start = bd_now_ns();
	ret = dev->ops->write(dev, buf, len, off, io_flags);
	inflight_sub(dev, 1);
	count_op(&dev->stats.write, len, ret, bd_now_ns() - start);
	if ((io_flags & BD_IO_FUA) && ret == 0)
		atomic_fetch_add_explicit(&dev->stats.fua_writes, 1,
					  memory_order_relaxed);
	return ret;
}

int bd_submit(struct bd_dev *dev, struct bd_io *ios, unsigned n)
{
	uint64_t start;
	int ret;

	if (n == 0)
		return 0;
	inflight_add(dev, n); /* before the gate: see inflight_add */
	ret = check_batch(dev, ios, n);
	if (ret != 0) {
		inflight_sub(dev, n);
		return ret;
	}
	atomic_fetch_add_explicit(&dev->stats.batches, 1,
				  memory_order_relaxed);
	start = bd_now_ns();
	ret = dev->ops->submit(dev, ios, n);
	inflight_sub(dev, n);
	count_batch(dev, ios, n, start);
	return ret;
}

/* What bd_submit_async() needs to count a batch when it completes. */
struct async_ctx {
	struct bd_dev *dev;
	bd_done_fn done;
	void *arg;
	uint64_t start;
};

static void async_done(struct bd_io *ios, unsigned n, void *arg)
{
	struct async_ctx *ctx = arg;

	inflight_sub(ctx->dev, n);
	count_batch(ctx->dev, ios, n, ctx->start);
	ctx->done(ios, n, ctx->arg);
	free(ctx);
}

int bd_submit_async(struct bd_dev *dev, struct bd_io *ios, unsigned n,
		    bd_done_fn done, void *arg)
{
	struct async_ctx *ctx;
	int ret;

	if (n == 0 || done == NULL)
		return -EINVAL;
	inflight_add(dev, n); /* before the gate: see inflight_add */
	ret = check_batch(dev, ios, n);
	if (ret == 0) {
		ctx = malloc(sizeof(*ctx));
		ret = ctx == NULL ? -ENOMEM : 0;
	}
	if (ret != 0) {
		inflight_sub(dev, n);
		return ret;
	}
	ctx->dev = dev;
	ctx->done = done;
	ctx->arg = arg;
	ctx->start = bd_now_ns();
	atomic_fetch_add_explicit(&dev->stats.batches, 1,
				  memory_order_relaxed);
	ret = dev->ops->submit_async(dev, ios, n, async_done, ctx);
	if (ret != 0) {
		inflight_sub(dev, n);
		atomic_fetch_sub_explicit(&dev->stats.batches, 1,
					  memory_order_relaxed);
		free(ctx);
	}
	return ret;
}

int bd_flush(struct bd_dev *dev)
{
	uint64_t start = bd_now_ns();
	int ret;

	ret = dev->ops->flush(dev);
	count_op(&dev->stats.flush, 0, ret, bd_now_ns() - start);
	return ret;
}

static void load_op(const struct bd_op_counters *c, struct bd_op_stats *o)
{
	o->count = atomic_load_explicit(&c->count, memory_order_relaxed);
	o->bytes = atomic_load_explicit(&c->bytes, memory_order_relaxed);
	o->errors = atomic_load_explicit(&c->errors, memory_order_relaxed);
	o->total_ns = atomic_load_explicit(&c->total_ns, memory_order_relaxed);
	o->max_ns = atomic_load_explicit(&c->max_ns, memory_order_relaxed);
	for (unsigned i = 0; i < BD_HIST_BUCKETS; i++)
		o->hist[i] = atomic_load_explicit(&c->hist[i],
						  memory_order_relaxed);
}

void bd_stats_get(struct bd_dev *dev, struct bd_stats *out)
{
	const struct bd_counters *s = &dev->stats;

	load_op(&s->read, &out->read);
	load_op(&s->write, &out->write);
	load_op(&s->flush, &out->flush);
	out->fua_writes = atomic_load_explicit(&s->fua_writes,
					      memory_order_relaxed);
	out->batches = atomic_load_explicit(&s->batches, memory_order_relaxed);
	out->inflight = atomic_load_explicit(&s->inflight,
					     memory_order_relaxed);
	out->max_inflight = atomic_load_explicit(&s->max_inflight,
						 memory_order_relaxed);
	out->gate_refused =
	    atomic_load_explicit(&s->gate_refused, memory_order_relaxed);
}

uint64_t bd_size(const struct bd_dev *dev)
{
	return dev->size;
}

const char *bd_name(const struct bd_dev *dev)
{
	return dev->name;
}

int bd_flush_covers_all(const struct bd_dev *dev)
{
	return !dev->flush_local;
}

int bd_readonly(const struct bd_dev *dev)
{
	return (dev->flags & BD_RDONLY) != 0;
}

void bd_close(struct bd_dev *dev)
{
	if (dev != NULL)
		dev->ops->close(dev);
}

int bd_spec_is_nbd(const char *spec)
{
	static const char *const schemes[] = { "nbd://", "nbds://", "nbd+",
					       "nbds+" };

	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
		if (strncmp(spec, schemes[i], strlen(schemes[i])) == 0)
			return 1;
	return 0;
}

int bd_open_any(const char *spec, unsigned flags, struct bd_dev **out)
{
	if (spec == NULL)
		return -EINVAL;
	if (bd_spec_is_nbd(spec))
		return bd_nbd_open(spec, flags, out);
	return bd_file_open(spec, flags, out);
}

void *bd_buf_alloc(size_t len)
{
	void *p;

	if (len == 0)
		len = BD_ALIGN;
	if (posix_memalign(&p, BD_ALIGN, len) != 0)
		return NULL;
	memset(p, 0, len);
	return p;
}
