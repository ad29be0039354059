/*
 * test_bd_fault.c — unit tests of the fault-injecting wrapper: the
 * volatile overlay, flush, FUA, fail-nth, crash, crash-nth, tear, garble,
 * peers (a cache per member, one power supply).
 *
 * Most cases wrap a ram device and look at it directly after a crash (the
 * ram device is the "media"); one wraps a file and reopens it. The garble
 * case is randomized by t_seed() (--seed N).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "blockdev/bd.h"
#include "tests/unit/harness.h"

#define BLK 4096u
#define MiB (1024u * 1024u)
#define NBLK 64u

/* The ram "media", the wrapper on it and a block buffer. */
struct rig {
	struct bd_dev *ram;
	struct bd_dev *dev;
	struct bd_fault *f;
	unsigned char *buf;
};

static int rig_open(struct rig *r)
{
	memset(r, 0, sizeof(*r));
	if (bd_ram_open(NBLK * BLK, &r->ram) != 0)
		return -1;
	if (bd_fault_open(r->ram, &r->dev, &r->f) != 0) {
		bd_close(r->ram);
		return -1;
	}
	r->buf = bd_buf_alloc(4 * BLK);
	return r->buf != NULL ? 0 : -1;
}

static void rig_close(struct rig *r)
{
	bd_close(r->dev); /* closes ram too */
	free(r->buf);
}

/* Write block @blk filled with byte @v through @dev. */
static int put(struct rig *r, struct bd_dev *dev, unsigned blk, int v,
	       unsigned flags)
{
	memset(r->buf, v, BLK);
	return bd_write(dev, r->buf, BLK, (uint64_t)blk * BLK, flags);
}

/* The byte value filling block @blk of @dev, or -1 if mixed, -2 error. */
static int get(struct rig *r, struct bd_dev *dev, unsigned blk)
{
	if (bd_read(dev, r->buf, BLK, (uint64_t)blk * BLK) != 0)
		return -2;
	for (unsigned i = 1; i < BLK; i++)
		if (r->buf[i] != r->buf[0])
			return -1;
	return r->buf[0];
}

static void test_overlay_flush(void)
{
	struct rig r;

	REQUIRE(rig_open(&r) == 0);
	CHECK(strcmp(bd_name(r.dev), "fault(ram)") == 0);
	CHECK_EQ(bd_size(r.dev), NBLK * BLK);
	CHECK_EQ(put(&r, r.dev, 3, 0x33, 0), 0);
	CHECK_EQ(put(&r, r.dev, 3, 0x34, 0), 0);
	CHECK_EQ(get(&r, r.dev, 3), 0x34);  /* reads see the overlay */
	CHECK_EQ(get(&r, r.ram, 3), 0);     /* media: not yet */
	CHECK_EQ(bd_flush(r.dev), 0);
	CHECK_EQ(get(&r, r.ram, 3), 0x34);
	CHECK_EQ(get(&r, r.dev, 3), 0x34);
	CHECK_EQ(bd_fault_writes(r.f), 2);
	CHECK_EQ(bd_fault_crashed(r.f), 0);
	/* A multi-block read mixes overlay and media per block. */
	CHECK_EQ(put(&r, r.dev, 5, 0x55, 0), 0);
	CHECK_EQ(bd_read(r.dev, r.buf, 3 * BLK, 3 * BLK), 0);
	CHECK(r.buf[0] == 0x34 && r.buf[BLK] == 0 && r.buf[2 * BLK] == 0x55);
	rig_close(&r);
}

static void test_fail_nth(void)
{
	struct rig r;
	struct bd_stats st;

	REQUIRE(rig_open(&r) == 0);
	bd_fault_fail_nth(r.f, BD_WRITE, 3, 0);
	CHECK_EQ(put(&r, r.dev, 0, 1, 0), 0);
	CHECK_EQ(put(&r, r.dev, 1, 1, 0), 0);
	CHECK_EQ(put(&r, r.dev, 2, 1, 0), -EIO);
	CHECK_EQ(put(&r, r.dev, 3, 1, 0), 0);
	CHECK_EQ(get(&r, r.dev, 2), 0); /* the failed write did nothing */
	CHECK_EQ(get(&r, r.dev, 3), 1);
	bd_fault_fail_nth(r.f, BD_WRITE, 2, 1);
	CHECK_EQ(put(&r, r.dev, 4, 1, 0), 0);
	for (unsigned i = 5; i < 10; i++)
		CHECK_EQ(put(&r, r.dev, i, 1, 0), -EIO);
	bd_fault_fail_nth(r.f, BD_WRITE, 0, 0); /* off */
	CHECK_EQ(put(&r, r.dev, 5, 1, 0), 0);
	bd_fault_fail_nth(r.f, BD_READ, 1, 0);
	CHECK_EQ(get(&r, r.dev, 0), -2);
	CHECK_EQ(get(&r, r.dev, 0), 1);
	bd_stats_get(r.dev, &st);
	CHECK_EQ(st.write.errors, 6);
	CHECK_EQ(st.read.errors, 1);
	CHECK_EQ(bd_fault_crashed(r.f), 0);
	rig_close(&r);
}

/* Batches count each I/O; the failing one gets -EIO, the others run. */
static void test_fail_batch(void)
{
	struct bd_io ios[4];
	struct rig r;

	REQUIRE(rig_open(&r) == 0);
	memset(r.buf, 7, 4 * BLK);
	for (unsigned i = 0; i < 4; i++)
		ios[i] = (struct bd_io){ .op = BD_WRITE, .len = BLK,
					 .buf = r.buf + i * BLK,
					 .off = i * BLK };
	bd_fault_fail_nth(r.f, BD_WRITE, 2, 0);
	CHECK_EQ(bd_submit(r.dev, ios, 4), -EIO);
	CHECK_EQ(ios[0].ret, 0);
	CHECK_EQ(ios[1].ret, -EIO);
	CHECK_EQ(ios[2].ret, 0);
	CHECK_EQ(ios[3].ret, 0);
	CHECK_EQ(get(&r, r.dev, 1), 0);
	CHECK_EQ(get(&r, r.dev, 2), 7);
	rig_close(&r);
}

static void test_crash_drops_unflushed(void)
{
	struct rig r;

	REQUIRE(rig_open(&r) == 0);
	CHECK_EQ(put(&r, r.dev, 1, 0x11, 0), 0);
	CHECK_EQ(put(&r, r.dev, 2, 0x22, 0), 0);
	CHECK_EQ(bd_flush(r.dev), 0);
	CHECK_EQ(put(&r, r.dev, 2, 0x23, 0), 0); /* unflushed overwrite */
	CHECK_EQ(put(&r, r.dev, 3, 0x33, 0), 0);
	bd_fault_crash(r.f, 0);
	CHECK_EQ(bd_fault_crashed(r.f), 1);
	CHECK_EQ(get(&r, r.ram, 1), 0x11);
	CHECK_EQ(get(&r, r.ram, 2), 0x22);
	CHECK_EQ(get(&r, r.ram, 3), 0);
	/* After the crash, everything fails. */
	CHECK_EQ(get(&r, r.dev, 1), -2);
	CHECK_EQ(put(&r, r.dev, 4, 1, 0), -EIO);
	CHECK_EQ(bd_flush(r.dev), -EIO);
	bd_fault_crash(r.f, 0); /* twice is harmless */
	rig_close(&r);
}

static void test_fua_survives(void)
{
	struct rig r;

	REQUIRE(rig_open(&r) == 0);
	CHECK_EQ(put(&r, r.dev, 1, 0x11, 0), 0);
	CHECK_EQ(put(&r, r.dev, 2, 0x21, 0), 0);
	CHECK_EQ(put(&r, r.dev, 2, 0x22, BD_IO_FUA), 0); /* commit record */
	CHECK_EQ(put(&r, r.dev, 3, 0x33, BD_IO_FUA), 0);
	CHECK_EQ(get(&r, r.ram, 3), 0x33); /* on the media at once */
	bd_fault_crash(r.f, 0);
	CHECK_EQ(get(&r, r.ram, 1), 0);
	CHECK_EQ(get(&r, r.ram, 2), 0x22);
	CHECK_EQ(get(&r, r.ram, 3), 0x33);
	rig_close(&r);
}

/* Even when the crash keeps older unflushed writes, a FUA write to the
 * same block stays the newest (the log is replayed in order). */
static void test_fua_order_with_garble(void)
{
	int kept_old = 0;

	for (uint64_t seed = 1; seed <= 40; seed++) {
		struct rig r;

		REQUIRE(rig_open(&r) == 0);
		CHECK_EQ(put(&r, r.dev, 2, 0x21, 0), 0);
		CHECK_EQ(put(&r, r.dev, 2, 0x22, BD_IO_FUA), 0);
		CHECK_EQ(put(&r, r.dev, 4, 0x41, 0), 0);
		bd_fault_crash(r.f, seed);
		CHECK_EQ(get(&r, r.ram, 2), 0x22);
		kept_old += get(&r, r.ram, 4) == 0x41;
		rig_close(&r);
	}
	CHECK(kept_old > 0 && kept_old < 40); /* both fates happened */
}

static void test_crash_nth(void)
{
	struct rig r;

	REQUIRE(rig_open(&r) == 0);
	CHECK_EQ(put(&r, r.dev, 0, 0x10, 0), 0);
	CHECK_EQ(bd_flush(r.dev), 0);
	bd_fault_crash_nth(r.f, 3);
	CHECK_EQ(put(&r, r.dev, 1, 0x11, 0), 0);
	CHECK_EQ(put(&r, r.dev, 2, 0x12, BD_IO_FUA), 0);
	CHECK_EQ(bd_fault_crashed(r.f), 0);
	CHECK_EQ(put(&r, r.dev, 3, 0x13, 0), -EIO);
	CHECK_EQ(bd_fault_crashed(r.f), 1);
	CHECK_EQ(bd_fault_writes(r.f), 4);
	CHECK_EQ(get(&r, r.ram, 0), 0x10);
	CHECK_EQ(get(&r, r.ram, 1), 0);
	CHECK_EQ(get(&r, r.ram, 2), 0x12);
	CHECK_EQ(get(&r, r.ram, 3), 0);
	rig_close(&r);
}

static void test_tear(void)
{
	unsigned char *w = bd_buf_alloc(3 * BLK);
	unsigned char *m = bd_buf_alloc(3 * BLK);
	const size_t keep = BLK + 1000, kept = BLK + 512;
	struct rig r;

	REQUIRE(w != NULL && m != NULL);
	REQUIRE(rig_open(&r) == 0);
	memset(w, 0xaa, 3 * BLK);
	CHECK_EQ(bd_write(r.dev, w, 3 * BLK, 8 * BLK, 0), 0);
	CHECK_EQ(bd_flush(r.dev), 0);
	CHECK_EQ(put(&r, r.dev, 20, 0x20, 0), 0); /* unflushed: lost */
	bd_fault_tear_nth(r.f, 1, keep);
	memset(w, 0xbb, 3 * BLK);
	CHECK_EQ(bd_write(r.dev, w, 3 * BLK, 8 * BLK, 0), -EIO);
	CHECK_EQ(bd_fault_crashed(r.f), 1);
	CHECK_EQ(bd_read(r.ram, m, 3 * BLK, 8 * BLK), 0);
	for (size_t i = 0; i < 3 * BLK; i++)
		if (m[i] != (i < kept ? 0xbb : 0xaa)) {
			fprintf(stderr, "byte %zu is %#x\n", i, m[i]);
			CHECK(!"torn write content");
			break;
		}
	CHECK_EQ(get(&r, r.ram, 20), 0);
	rig_close(&r);
	free(w);
	free(m);
}

/* Run a fixed workload then crash with @seed; copy the media to @out. */
static void garble_run(uint64_t seed, unsigned char *out, unsigned fate[3])
{
	struct rig r;

	REQUIRE(rig_open(&r) == 0);
	for (unsigned i = 0; i < 30; i++)
		CHECK_EQ(put(&r, r.dev, i, 0x40 + i, 0), 0);
	bd_fault_crash(r.f, seed);
	CHECK_EQ(bd_read(r.ram, out, 30 * BLK, 0), 0);
	for (unsigned i = 0; i < 30; i++) {
		int v = get(&r, r.ram, i);

		fate[v == 0x40 + (int)i ? 0 : v == 0 ? 1 : 2]++;
	}
	rig_close(&r);
}

static void test_garble_deterministic(void)
{
	uint64_t seed = t_seed() | 1; /* 0 means "drop all" */
	unsigned char *a = bd_buf_alloc(30 * BLK), *b = bd_buf_alloc(30 * BLK);
	unsigned fa[3] = { 0 }, fb[3] = { 0 };

	REQUIRE(a != NULL && b != NULL);
	garble_run(seed, a, fa);
	garble_run(seed, b, fb);
	CHECK(memcmp(a, b, 30 * BLK) == 0);
	CHECK_EQ(fa[0] + fa[1] + fa[2], 30);
	/* kept, dropped and garbled all occur in 30 picks (p ~ 1e-5 not). */
	CHECK(fa[0] > 0 && fa[1] > 0 && fa[2] > 0);
	garble_run(seed + 2, b, fb);
	CHECK(memcmp(a, b, 30 * BLK) != 0);
	free(a);
	free(b);
}

/* Async batches through the wrapper land in the overlay like sync ones. */
struct done_state {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done;
	int bad;
};

static void on_done(struct bd_io *ios, unsigned n, void *arg)
{
	struct done_state *d = arg;

	pthread_mutex_lock(&d->lock);
	for (unsigned i = 0; i < n; i++)
		d->bad += ios[i].ret != 0;
	d->done = 1;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

static void test_async_overlay(void)
{
	struct done_state d = { .done = 0 };
	struct bd_io ios[4];
	struct rig r;

	REQUIRE(rig_open(&r) == 0);
	pthread_mutex_init(&d.lock, NULL);
	pthread_cond_init(&d.cond, NULL);
	memset(r.buf, 0x5a, 4 * BLK);
	for (unsigned i = 0; i < 4; i++)
		ios[i] = (struct bd_io){ .op = BD_WRITE, .len = BLK,
					 .buf = r.buf + i * BLK,
					 .off = (10 + i) * BLK };
	CHECK_EQ(bd_submit_async(r.dev, ios, 4, on_done, &d), 0);
	pthread_mutex_lock(&d.lock);
	while (!d.done)
		pthread_cond_wait(&d.cond, &d.lock);
	pthread_mutex_unlock(&d.lock);
	CHECK_EQ(d.bad, 0);
	CHECK_EQ(bd_fault_writes(r.f), 4);
	CHECK_EQ(get(&r, r.dev, 12), 0x5a);
	CHECK_EQ(get(&r, r.ram, 12), 0);
	bd_fault_crash(r.f, 0);
	CHECK_EQ(get(&r, r.ram, 12), 0);
	pthread_cond_destroy(&d.cond);
	pthread_mutex_destroy(&d.lock);
	rig_close(&r);
}

static uint64_t rnd(uint64_t *st)
{
	return t_splitmix(st);
}

/* Random writes (plain, FUA, multi-block, failing), reads and flushes
 * against a model of the media and of what reads see; then a crash must
 * leave exactly the model's media. */
static void model_round(uint64_t *st)
{
	int media[NBLK] = { 0 }, latest[NBLK] = { 0 };
	struct rig r;
	int v = 1;

	REQUIRE(rig_open(&r) == 0);
	for (unsigned op = 0; op < 400; op++) {
		unsigned k = (unsigned)(rnd(st) % 100);
		unsigned blk = (unsigned)(rnd(st) % (NBLK - 4));
		unsigned len = k < 10 ? 1 + (unsigned)(rnd(st) % 4) : 1;
		unsigned fua = (k >= 10 && k < 20) ? BD_IO_FUA : 0;
		int fail = k >= 20 && k < 25;

		v = v % 250 + 1;
		if (k >= 25 && k < 30) {
			CHECK_EQ(bd_flush(r.dev), 0);
			memcpy(media, latest, sizeof(media));
			continue;
		}
		if (k >= 30 && k < 60) {
			CHECK_EQ(get(&r, r.dev, blk), latest[blk]);
			continue;
		}
		if (fail)
			bd_fault_fail_nth(r.f, BD_WRITE, 1, 0);
		memset(r.buf, v, len * BLK);
		CHECK_EQ(bd_write(r.dev, r.buf, len * BLK, (uint64_t)blk * BLK,
				  fua), fail ? -EIO : 0);
		for (unsigned i = 0; i < len && !fail; i++) {
			latest[blk + i] = v;
			if (fua)
				media[blk + i] = v;
		}
	}
	bd_fault_crash(r.f, 0);
	for (unsigned b = 0; b < NBLK; b++)
		CHECK_EQ(get(&r, r.ram, b), media[b]);
	rig_close(&r);
}

static void test_random_model(void)
{
	uint64_t st = t_seed();

	for (unsigned round = 0; round < 20; round++)
		model_round(&st);
}

/* The wrapper over a real file: what survived is in the file. */
static void test_file_lower(void)
{
	char path[64];
	struct bd_dev *file;
	struct rig r;
	int fd;

	snprintf(path, sizeof(path), "/tmp/test_bd_fault.%d", (int)getpid());
	fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
	REQUIRE(fd >= 0);
	CHECK_EQ(ftruncate(fd, 1 * MiB), 0);
	close(fd);
	memset(&r, 0, sizeof(r));
	r.buf = bd_buf_alloc(BLK);
	REQUIRE(r.buf != NULL);
	REQUIRE(bd_file_open(path, BD_EXCL, &file) == 0);
	REQUIRE(bd_fault_open(file, &r.dev, &r.f) == 0);
	CHECK_EQ(put(&r, r.dev, 1, 0x61, 0), 0);
	CHECK_EQ(bd_flush(r.dev), 0);
	CHECK_EQ(put(&r, r.dev, 2, 0x62, 0), 0);
	bd_fault_crash(r.f, 0);
	bd_close(r.dev); /* closes the file and drops its lock */
	REQUIRE(bd_file_open(path, BD_EXCL | BD_RDONLY, &file) == 0);
	CHECK_EQ(bd_readonly(file), 1);
	CHECK_EQ(get(&r, file, 1), 0x61);
	CHECK_EQ(get(&r, file, 2), 0);
	bd_close(file);
	free(r.buf);
	unlink(path);
}

static void test_open_errors(void)
{
	struct bd_dev *dev;
	struct bd_fault *f;

	CHECK_EQ(bd_fault_open(NULL, &dev, &f), -EINVAL);
}

/* Peers: a cache per member, one power supply. */
static void test_peers(void)
{
	struct bd_dev *dev2, *dev3;
	struct bd_fault *f2, *f3;
	struct rig r;

	REQUIRE(rig_open(&r) == 0);
	CHECK_EQ(bd_flush_covers_all(r.dev), 1);
	REQUIRE(bd_fault_open_peer(r.f, &dev2, &f2) == 0);
	CHECK_EQ(bd_flush_covers_all(r.dev), 0);
	CHECK_EQ(bd_flush_covers_all(dev2), 0);
	CHECK_EQ(put(&r, r.dev, 1, 0x11, 0), 0);
	CHECK_EQ(put(&r, dev2, 2, 0x22, 0), 0);
	CHECK_EQ(get(&r, dev2, 1), 0); /* the other cache: not seen */
	CHECK_EQ(get(&r, r.dev, 1), 0x11);
	CHECK_EQ(bd_fault_writes(f2), 2); /* counted over the group */
	CHECK_EQ(bd_flush(dev2), 0);	  /* covers only dev2's write */
	CHECK_EQ(get(&r, r.ram, 2), 0x22);
	CHECK_EQ(get(&r, r.ram, 1), 0);
	CHECK_EQ(get(&r, r.dev, 2), 0x22);
	bd_fault_set_flush_local(f2, 0);
	CHECK_EQ(bd_flush_covers_all(dev2), 1);
	/* a crash point armed on one member counts the other's writes */
	CHECK_EQ(put(&r, dev2, 3, 0x33, 0), 0);
	bd_fault_crash_nth(r.f, 2);
	CHECK_EQ(put(&r, dev2, 4, 0x44, 0), 0);
	CHECK_EQ(put(&r, dev2, 5, 0x55, 0), -EIO);
	CHECK(bd_fault_crashed(f2) && bd_fault_crashed(r.f));
	CHECK_EQ(get(&r, r.ram, 1), 0); /* both caches lost */
	CHECK_EQ(get(&r, r.ram, 3), 0);
	CHECK_EQ(get(&r, r.ram, 4), 0);
	CHECK_EQ(get(&r, r.ram, 2), 0x22);
	CHECK_EQ(bd_flush(r.dev), -EIO);
	CHECK_EQ(bd_fault_open_peer(r.f, &dev3, &f3), -EIO);
	bd_close(r.dev); /* ram stays open for dev2 */
	CHECK_EQ(get(&r, r.ram, 2), 0x22);
	bd_close(dev2); /* the last member closes ram */
	free(r.buf);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_overlay_flush);
	T_RUN(test_fail_nth);
	T_RUN(test_fail_batch);
	T_RUN(test_crash_drops_unflushed);
	T_RUN(test_fua_survives);
	T_RUN(test_fua_order_with_garble);
	T_RUN(test_crash_nth);
	T_RUN(test_tear);
	T_RUN(test_garble_deterministic);
	T_RUN(test_random_model);
	T_RUN(test_async_overlay);
	T_RUN(test_file_lower);
	T_RUN(test_open_errors);
	T_RUN(test_peers);
	return t_done();
}
