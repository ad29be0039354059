/*
 * bd_conform.h — device-level checks every block-device backend must pass,
 * shared by the backend tests (test_bd.c: ram and file; test_bd_nbd.c:
 * NBD). Each check takes an open device and uses only bd.h, so a backend
 * is held to exactly the same behaviour as the others: round trips,
 * argument errors, batches, async callbacks (chained, and synchronous I/O
 * from a callback), counters, concurrent threads.
 *
 * Some checks read the counters and expect a freshly opened device
 * (batch_roundtrip, async_roundtrip, counters): say so where they are
 * used. Include after harness.h; everything here is static.
 */
#ifndef UCFS_TEST_BD_CONFORM_H
#define UCFS_TEST_BD_CONFORM_H

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blockdev/bd.h"
#include "tests/unit/harness.h"

#define BLK 4096u
#define MiB (1024u * 1024u)

static inline void fill(void *buf, size_t len, uint64_t tag)
{
	uint64_t *p = buf;

	for (size_t i = 0; i < len / 8; i++)
		p[i] = tag * 0x100000001b3ull + i;
}

static inline int check_fill(const void *buf, size_t len, uint64_t tag)
{
	const uint64_t *p = buf;

	for (size_t i = 0; i < len / 8; i++)
		if (p[i] != tag * 0x100000001b3ull + i)
			return 0;
	return 1;
}

static inline void roundtrip(struct bd_dev *dev)
{
	char *buf = bd_buf_alloc(8 * BLK), *rd = bd_buf_alloc(8 * BLK);
	uint64_t last = bd_size(dev) - 8 * BLK;

	REQUIRE(buf != NULL && rd != NULL);
	fill(buf, 8 * BLK, 1);
	CHECK_EQ(bd_write(dev, buf, 8 * BLK, 0, 0), 0);
	fill(buf, 8 * BLK, 2);
	CHECK_EQ(bd_write(dev, buf, 8 * BLK, last, BD_IO_FUA), 0);
	CHECK_EQ(bd_read(dev, rd, 8 * BLK, 0), 0);
	CHECK(check_fill(rd, 8 * BLK, 1));
	CHECK_EQ(bd_read(dev, rd, 8 * BLK, last), 0);
	CHECK(check_fill(rd, 8 * BLK, 2));
	CHECK_EQ(bd_read(dev, rd, BLK, 64 * BLK), 0); /* never written */
	for (unsigned i = 0; i < BLK; i++)
		if (rd[i] != 0) {
			CHECK(rd[i] == 0);
			break;
		}
	CHECK_EQ(bd_flush(dev), 0);
	free(buf);
	free(rd);
}

static inline void bad_args(struct bd_dev *dev)
{
	char *buf = bd_buf_alloc(2 * BLK);
	uint64_t size = bd_size(dev);

	REQUIRE(buf != NULL);
	CHECK_EQ(bd_read(dev, buf + 512, BLK, 0), -EINVAL);
	CHECK_EQ(bd_write(dev, buf + 512, BLK, 0, 0), -EINVAL);
	CHECK_EQ(bd_read(dev, buf, BLK - 512, 0), -EINVAL);
	CHECK_EQ(bd_read(dev, buf, BLK, 512), -EINVAL);
	CHECK_EQ(bd_read(dev, buf, 0, 0), -EINVAL);
	CHECK_EQ(bd_read(dev, NULL, BLK, 0), -EINVAL);
	CHECK_EQ(bd_write(dev, buf, BLK, 0, 0x80), -EINVAL);
	CHECK_EQ(bd_read(dev, buf, BLK, size), -EINVAL);
	CHECK_EQ(bd_read(dev, buf, 2 * BLK, size - BLK), -EINVAL);
	CHECK_EQ(bd_write(dev, buf, BLK, size, 0), -EINVAL);
	CHECK_EQ(bd_read(dev, buf, BLK, UINT64_MAX - BLK + 1), -EINVAL);
	CHECK_EQ(bd_read(dev, buf, BLK, size - BLK), 0);
	free(buf);
}

/* @n single-block writes in one batch, then @n reads, checked. */
static inline void batch_roundtrip(struct bd_dev *dev, unsigned n)
{
	struct bd_io *ios = calloc(n, sizeof(*ios));
	char *bufs = bd_buf_alloc((size_t)n * BLK);
	struct bd_stats st;

	REQUIRE(ios != NULL && bufs != NULL);
	for (unsigned i = 0; i < n; i++) {
		/* Reverse, spread order: exercises more than a stream. */
		ios[i].op = BD_WRITE;
		ios[i].buf = bufs + (size_t)i * BLK;
		ios[i].len = BLK;
		ios[i].off = (uint64_t)(n - 1 - i) * BLK;
		ios[i].flags = (i % 100 == 7) ? BD_IO_FUA : 0;
		ios[i].ret = 12345;
		ios[i].priv = &ios[i];
		fill(ios[i].buf, BLK, 1000 + i);
	}
	CHECK_EQ(bd_submit(dev, ios, n), 0);
	for (unsigned i = 0; i < n; i++) {
		CHECK_EQ(ios[i].ret, 0);
		CHECK(ios[i].priv == &ios[i]);
		ios[i].op = BD_READ;
		memset(ios[i].buf, 0, BLK);
	}
	CHECK_EQ(bd_submit(dev, ios, n), 0);
	for (unsigned i = 0; i < n; i++) {
		CHECK_EQ(ios[i].ret, 0);
		if (!check_fill(ios[i].buf, BLK, 1000 + i)) {
			CHECK(!"batch data mismatch");
			break;
		}
	}
	CHECK_EQ(bd_submit(dev, ios, 0), 0);
	bd_stats_get(dev, &st);
	CHECK_EQ(st.batches, 2);
	CHECK_EQ(st.write.count, n);
	CHECK_EQ(st.read.count, n);
	CHECK_EQ(st.inflight, 0);
	CHECK_EQ(st.max_inflight, n);
	free(ios);
	free(bufs);
}

/* Async completion bookkeeping shared with the callbacks. */
struct async_state {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned calls;
	unsigned ios;
	int bad;
	int on_caller_thread;
	pthread_t caller;
	struct bd_dev *dev;
	struct bd_io *chain; /* submitted from the first callback */
};

static inline void async_done(struct bd_io *ios, unsigned n, void *arg)
{
	struct async_state *as = arg;

	pthread_mutex_lock(&as->lock);
	for (unsigned i = 0; i < n; i++)
		if (ios[i].ret != 0)
			as->bad++;
	if (pthread_equal(pthread_self(), as->caller))
		as->on_caller_thread = 1;
	as->calls++;
	as->ios += n;
	pthread_cond_broadcast(&as->cond);
	pthread_mutex_unlock(&as->lock);
}

/* Callback that submits one more batch from the bd thread. */
static inline void async_chain_done(struct bd_io *ios, unsigned n, void *arg)
{
	struct async_state *as = arg;

	if (bd_submit_async(as->dev, as->chain, 1, async_done, as) != 0) {
		pthread_mutex_lock(&as->lock);
		as->bad++;
		pthread_mutex_unlock(&as->lock);
	}
	async_done(ios, n, arg);
}

/* Callback that does a synchronous batch on the same device. */
static inline void sync_in_done(struct bd_io *ios, unsigned n, void *arg)
{
	struct async_state *as = arg;
	int bad = bd_submit(as->dev, as->chain, 1) != 0;

	pthread_mutex_lock(&as->lock);
	as->bad += bad;
	pthread_mutex_unlock(&as->lock);
	async_done(ios, n, arg);
}

static inline void async_wait(struct async_state *as, unsigned calls)
{
	pthread_mutex_lock(&as->lock);
	while (as->calls < calls)
		pthread_cond_wait(&as->cond, &as->lock);
	pthread_mutex_unlock(&as->lock);
}

static inline void async_roundtrip(struct bd_dev *dev)
{
	enum { NB = 8, PER = 40 };
	struct async_state as = { .caller = pthread_self(), .dev = dev };
	struct bd_io *ios = calloc(NB * PER + 1, sizeof(*ios));
	char *bufs = bd_buf_alloc((NB * PER + 1) * (size_t)BLK);
	struct bd_stats st;

	REQUIRE(ios != NULL && bufs != NULL);
	pthread_mutex_init(&as.lock, NULL);
	pthread_cond_init(&as.cond, NULL);
	for (unsigned i = 0; i < NB * PER + 1; i++) {
		ios[i] = (struct bd_io){ .op = BD_WRITE, .len = BLK,
					 .buf = bufs + (size_t)i * BLK,
					 .off = (uint64_t)i * BLK };
		fill(ios[i].buf, BLK, 77 + i);
	}
	as.chain = &ios[NB * PER];
	for (unsigned b = 0; b < NB; b++)
		CHECK_EQ(bd_submit_async(dev, ios + b * PER, PER,
					 b == 0 ? async_chain_done : async_done,
					 &as), 0);
	async_wait(&as, NB + 1);
	CHECK_EQ(as.ios, NB * PER + 1);
	CHECK_EQ(as.bad, 0);
	CHECK_EQ(as.on_caller_thread, 0);
	CHECK_EQ(bd_submit_async(dev, ios, 0, async_done, &as), -EINVAL);
	CHECK_EQ(bd_submit_async(dev, ios, 1, NULL, &as), -EINVAL);
	memset(bufs, 0, (NB * PER + 1) * (size_t)BLK);
	for (unsigned i = 0; i < NB * PER + 1; i++)
		ios[i].op = BD_READ;
	CHECK_EQ(bd_submit(dev, ios, NB * PER + 1), 0);
	for (unsigned i = 0; i < NB * PER + 1; i++)
		if (!check_fill(ios[i].buf, BLK, 77 + i)) {
			CHECK(!"async data mismatch");
			break;
		}
	bd_stats_get(dev, &st);
	CHECK_EQ(st.batches, NB + 2);
	CHECK_EQ(st.write.count, NB * PER + 1);
	CHECK_EQ(st.inflight, 0);
	pthread_cond_destroy(&as.cond);
	pthread_mutex_destroy(&as.lock);
	free(ios);
	free(bufs);
}

/* Many one-I/O async batches: more than the aio depth, so batches queue
 * up behind each other while some are refused and done synchronously. */
static inline void many_small_async(struct bd_dev *dev)
{
	enum { N = 400 };
	struct async_state as = { .caller = pthread_self(), .dev = dev };
	struct bd_io *ios = calloc(N, sizeof(*ios));
	char *bufs = bd_buf_alloc((size_t)N * BLK);

	REQUIRE(ios != NULL && bufs != NULL);
	pthread_mutex_init(&as.lock, NULL);
	pthread_cond_init(&as.cond, NULL);
	for (unsigned i = 0; i < N; i++) {
		ios[i] = (struct bd_io){ .op = BD_WRITE, .len = BLK,
					 .buf = bufs + (size_t)i * BLK,
					 .off = (uint64_t)i * BLK };
		fill(ios[i].buf, BLK, 500 + i);
		CHECK_EQ(bd_submit_async(dev, &ios[i], 1, async_done, &as), 0);
	}
	async_wait(&as, N);
	CHECK_EQ(as.bad, 0);
	memset(bufs, 0, (size_t)N * BLK);
	CHECK_EQ(bd_read(dev, bufs, (size_t)N * BLK, 0), 0);
	for (unsigned i = 0; i < N; i++)
		if (!check_fill(bufs + (size_t)i * BLK, BLK, 500 + i)) {
			CHECK(!"small async data mismatch");
			break;
		}
	pthread_cond_destroy(&as.cond);
	pthread_mutex_destroy(&as.lock);
	free(ios);
	free(bufs);
}

static inline void counters(struct bd_dev *dev)
{
	enum { N = 37 };
	char *buf = bd_buf_alloc(4 * BLK);
	struct bd_io ios[3];
	struct bd_stats st;
	uint64_t hsum = 0;

	REQUIRE(buf != NULL);
	for (unsigned i = 0; i < N; i++)
		CHECK_EQ(bd_write(dev, buf, 2 * BLK, i * 2 * BLK, 0), 0);
	for (unsigned i = 0; i < 5; i++)
		CHECK_EQ(bd_read(dev, buf, 4 * BLK, 0), 0);
	CHECK_EQ(bd_read(dev, buf + 1, BLK, 0), -EINVAL); /* not counted */
	for (unsigned i = 0; i < 3; i++)
		ios[i] = (struct bd_io){ .op = BD_READ, .len = BLK,
					 .buf = buf + i * BLK };
	CHECK_EQ(bd_submit(dev, ios, 3), 0);
	CHECK_EQ(bd_flush(dev), 0);
	CHECK_EQ(bd_flush(dev), 0);
	bd_stats_get(dev, &st);
	CHECK_EQ(st.write.count, N);
	CHECK_EQ(st.write.bytes, N * 2 * BLK);
	CHECK_EQ(st.write.errors, 0);
	CHECK_EQ(st.read.count, 8);
	CHECK_EQ(st.read.bytes, 5 * 4 * BLK + 3 * BLK);
	CHECK_EQ(st.flush.count, 2);
	CHECK_EQ(st.flush.bytes, 0);
	CHECK_EQ(st.batches, 1);
	CHECK_EQ(st.inflight, 0);
	CHECK(st.max_inflight >= 1 && st.max_inflight <= 3);
	for (unsigned i = 0; i < BD_HIST_BUCKETS; i++)
		hsum += st.write.hist[i];
	CHECK_EQ(hsum, N);
	CHECK(st.write.max_ns <= st.write.total_ns);
	CHECK(st.write.total_ns > 0);
	free(buf);
}

struct hammer {
	struct bd_dev *dev;
	unsigned id;
	int errors;
};

/* Each thread owns a region: batches, single writes and reads mixed. */
static inline void *hammer_main(void *arg)
{
	struct hammer *h = arg;
	char *buf = bd_buf_alloc(8 * BLK);
	uint64_t base = (uint64_t)h->id * 64 * BLK;
	struct bd_io ios[8];

	if (buf == NULL) {
		h->errors++;
		return NULL;
	}
	for (unsigned round = 0; round < 40; round++) {
		for (unsigned i = 0; i < 8; i++) {
			ios[i] = (struct bd_io){ .op = BD_WRITE, .len = BLK,
						 .buf = buf + i * BLK,
						 .off = base + (round % 8) * 8 *
							BLK + i * BLK };
			fill(ios[i].buf, BLK, h->id * 1000 + round + i);
		}
		if (bd_submit(h->dev, ios, 8) != 0)
			h->errors++;
		memset(buf, 0, 8 * BLK);
		if (bd_read(h->dev, buf, 8 * BLK, ios[0].off) != 0)
			h->errors++;
		for (unsigned i = 0; i < 8; i++)
			if (!check_fill(buf + i * BLK, BLK,
					h->id * 1000 + round + i))
				h->errors++;
	}
	free(buf);
	return NULL;
}

/* ---- throughput by hand ---- */

static inline double secs_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) +
	       (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static inline void tput_line(const char *what, unsigned mib, double s, int ret)
{
	printf("%-13s %u MiB: %7.1f MB/s (%.3f s) ret %d\n", what, mib,
	       mib * 1.048576 / s, s, ret);
}

/* Sequential 1 MiB I/Os of @op, @qd at a time (qd 1: bd_read/bd_write). */
static inline int tput_pass(struct bd_dev *dev, enum bd_op op, unsigned qd,
		     unsigned mib, char *bufs)
{
	struct bd_io ios[16];
	struct timespec t0;
	char what[32];
	int ret = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned i = 0; i < mib && ret == 0; i += qd) {
		unsigned n = mib - i < qd ? mib - i : qd;

		if (qd == 1 && op == BD_WRITE)
			ret = bd_write(dev, bufs, MiB, (uint64_t)i * MiB, 0);
		else if (qd == 1)
			ret = bd_read(dev, bufs, MiB, (uint64_t)i * MiB);
		if (qd == 1)
			continue;
		for (unsigned k = 0; k < n; k++) {
			uint64_t off = (uint64_t)(i + k) * MiB;

			ios[k] = (struct bd_io){ .op = op, .len = MiB,
						 .buf = bufs + (size_t)k * MiB,
						 .off = off };
		}
		ret = bd_submit(dev, ios, n);
	}
	if (ret == 0 && op == BD_WRITE)
		ret = bd_flush(dev);
	snprintf(what, sizeof(what), "%s qd%u", op == BD_WRITE ? "write" :
		 "read", qd);
	tput_line(what, mib, secs_since(&t0), ret);
	return ret;
}

/* By hand (test_bd and test_bd_nbd --tput DEVICE [MiB]): MB/s of 1 MiB
 * sequential writes and reads through bd_open_any (a path: O_DIRECT; an
 * NBD URI), one at a time and in batches of 8. */
static inline int throughput(const char *spec, unsigned mib)
{
	char *bufs = bd_buf_alloc(8 * (size_t)MiB);
	struct bd_dev *dev;
	int ret;

	ret = bd_open_any(spec, 0, &dev);
	if (ret != 0 || bufs == NULL) {
		fprintf(stderr, "%s: %s\n", spec, strerror(-ret));
		return 1;
	}
	if (bd_size(dev) < (uint64_t)mib * MiB)
		mib = (unsigned)(bd_size(dev) / MiB);
	fill(bufs, 8 * (size_t)MiB, 9);
	ret = tput_pass(dev, BD_WRITE, 1, mib, bufs);
	ret = ret ? ret : tput_pass(dev, BD_READ, 1, mib, bufs);
	ret = ret ? ret : tput_pass(dev, BD_WRITE, 8, mib, bufs);
	ret = ret ? ret : tput_pass(dev, BD_READ, 8, mib, bufs);
	bd_close(dev);
	free(bufs);
	return ret != 0;
}

#endif /* UCFS_TEST_BD_CONFORM_H */
