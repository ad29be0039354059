/*
 * test_data.c — file data write-behind (fs_data.c) on RAM, fault and
 * file (O_DIRECT, libaio) devices: reads see in-flight data; overlapping
 * writes land in call order; the in-flight bound holds under a flood; a
 * failed data write is reported by fs_data_wait and by the next fsync
 * (also after a timer commit consumed it); write combining (absorb,
 * extend, overlap with older runs, reads of the open run, fs_data_wait
 * and reads submit it, full runs, one error per run, two streams each
 * keeping an open run, no older open run absorbing bytes a younger run
 * overlaps); data=ordered:
 * data written before a synced transaction survives a power loss;
 * several threads writing and reading at once. Random cases print and
 * take --seed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fusefs/core/fs_core_priv.h"
#include "harness.h"

#define BS FS_BLOCK_SIZE

static uint64_t rnd_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int format(struct bd_dev *bd)
{
	struct fs_mkfs_params p;
	char why[200];

	fs_mkfs_defaults(&p);
	p.journal_mb = 4;
	p.rgrp_mb = 8;
	p.now = 1700000000;
	return fs_mkfs(bd, &p, why, sizeof(why));
}

static struct fs *mnt(struct bd_dev *bd, unsigned cache_mb, int writeback)
{
	struct fs_core_opts o;
	struct fs *fs;
	char why[200];

	fs_core_opts_init(&o);
	o.commit_s = 3600;
	o.cache_mb = cache_mb;
	o.data_writeback = writeback;
	if (fs_core_mount(bd, &o, &fs, why, sizeof(why)) < 0) {
		fprintf(stderr, "mount: %s\n", why);
		return NULL;
	}
	return fs;
}

static struct bd_dev *ram_fs(unsigned mb)
{
	struct bd_dev *bd;

	if (bd_ram_open((uint64_t)mb << 20, &bd) < 0)
		return NULL;
	if (format(bd) < 0) {
		bd_close(bd);
		return NULL;
	}
	return bd;
}

/* Allocate @n contiguous data blocks in a transaction; first block. */
static uint64_t alloc_run(struct fs *fs, uint32_t n)
{
	struct fs_tx *tx;
	uint64_t start = 0;
	uint32_t len = 0;

	if (fs_tx_begin(fs, FS_ALLOC_CREDITS(fs), &tx) < 0)
		return 0;
	if (fs_alloc(tx, 0, n, n, &start, &len) < 0)
		start = 0;
	fs_tx_end(tx);
	return start;
}

static void fill(uint8_t *p, size_t len, unsigned tag)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(tag * 31 + i / 7);
}

static int dev_equals(struct bd_dev *bd, const uint8_t *want, size_t len,
		      uint64_t off)
{
	uint8_t *got = bd_buf_alloc(len);
	int ok;

	ok = got != NULL && bd_read(bd, got, len, off) == 0 &&
	     memcmp(got, want, len) == 0;
	free(got);
	return ok;
}

/* Reads see held (in-flight, not submitted) data; the device does not
 * have it until the hold is released; overlapping writes land in order. */
static void test_coherence_order(void)
{
	struct bd_dev *bd = ram_fs(64);
	struct fs *fs;
	uint8_t *a = malloc(4 * BS), *b = malloc(2 * BS), *r = malloc(4 * BS);
	uint8_t *model = malloc(4 * BS), *old = bd_buf_alloc(4 * BS);
	uint64_t blk, off, nw, nb;

	REQUIRE(bd != NULL && a && b && r && model && old);
	fs = mnt(bd, 16, 0);
	REQUIRE(fs != NULL);
	blk = alloc_run(fs, 4);
	REQUIRE(blk != 0);
	off = blk * BS;
	CHECK_EQ(bd_read(bd, old, 4 * BS, off), 0);

	fs_data_hold(fs, 1);
	fill(a, 4 * BS, 1);
	fill(b, 2 * BS, 2);
	CHECK_EQ(fs_data_write(fs, a, 4 * BS, off), 0);
	fs_data_flush(fs);	/* closed: b cannot be combined with it */
	CHECK_EQ(fs_data_write(fs, b, 2 * BS, off + BS), 0);
	fs_data_inflight(fs, &nw, &nb);
	CHECK_EQ(nw, 2);
	CHECK(nb >= 6 * BS && nb <= fs_data_limit(fs));
	/* served from the newest covering copy */
	CHECK_EQ(fs_data_read(fs, r, BS, off + 2 * BS), 0);
	CHECK(memcmp(r, b + BS, BS) == 0);
	CHECK_EQ(fs_data_read(fs, r, BS, off + 3 * BS), 0);
	CHECK(memcmp(r, a + 3 * BS, BS) == 0);
	CHECK(dev_equals(bd, old, 4 * BS, off));	/* nothing written */

	fs_data_hold(fs, 0);
	CHECK_EQ(fs_data_wait(fs), 0);
	memcpy(model, a, 4 * BS);
	memcpy(model + BS, b, 2 * BS);
	CHECK(dev_equals(bd, model, 4 * BS, off));
	/* a read spanning both after completion */
	CHECK_EQ(fs_data_read(fs, r, 4 * BS, off), 0);
	CHECK(memcmp(r, model, 4 * BS) == 0);
	fs_data_inflight(fs, &nw, &nb);
	CHECK_EQ(nw, 0);
	CHECK_EQ(nb, 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
	free(a);
	free(b);
	free(r);
	free(model);
	free(old);
}

/* Random overlapping writes (and reads checked against a model) on a
 * file device, where libaio may run writes concurrently. */
static void test_random_overlap_file(void)
{
	char path[] = "/tmp/ucfs-test-data-XXXXXX";
	const unsigned nblk = 64, nops = 3000;
	uint64_t seed = t_seed(), s = seed ? seed : 1;
	struct bd_dev *bd = NULL;
	struct fs *fs = NULL;
	uint8_t *model = malloc(nblk * BS), *buf = malloc(10 * BS);
	uint64_t blk;
	int fd;

	printf("# seed %llu\n", (unsigned long long)seed);
	fd = mkstemp(path);
	REQUIRE(fd >= 0 && model && buf);
	REQUIRE(ftruncate(fd, 64 << 20) == 0);
	close(fd);
	if (bd_file_open(path, 0, &bd) < 0)
		REQUIRE(bd_file_open(path, BD_BUFFERED, &bd) == 0);
	REQUIRE(format(bd) == 0);
	fs = mnt(bd, 16, 0);
	REQUIRE(fs != NULL);
	blk = alloc_run(fs, nblk);
	REQUIRE(blk != 0);
	memset(model, 0, nblk * BS);
	CHECK_EQ(fs_data_write(fs, model, nblk * BS, blk * BS), 0);
	for (unsigned i = 0; i < nops; i++) {
		unsigned len = 1 + rnd_next(&s) % 10;
		unsigned at = rnd_next(&s) % (nblk - len + 1);

		if (rnd_next(&s) % 4 == 0) {
			CHECK_EQ(fs_data_read(fs, buf, len * BS,
					      (blk + at) * BS), 0);
			CHECK(memcmp(buf, model + at * BS, len * BS) == 0);
			continue;
		}
		fill(buf, len * BS, i);
		memcpy(model + at * BS, buf, len * BS);
		CHECK_EQ(fs_data_write(fs, buf, len * BS, (blk + at) * BS),
			 0);
	}
	CHECK_EQ(fs_journal_sync(fs), 0);
	CHECK(dev_equals(bd, model, nblk * BS, blk * BS));
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
	unlink(path);
	free(model);
	free(buf);
}

struct flood {
	struct fs *fs;
	uint64_t off;
	unsigned n;
	unsigned done;		/* atomic */
	int ret;
};

static void *flood_thread(void *p)
{
	struct flood *f = p;
	uint8_t *buf = malloc(64 * 1024);

	fill(buf, 64 * 1024, 9);
	for (unsigned i = 0; i < f->n; i++) {
		int r = fs_data_write(f->fs, buf, 64 * 1024,
				      f->off + (uint64_t)i * 64 * 1024);

		if (r < 0 && f->ret == 0)
			f->ret = r;
		__atomic_fetch_add(&f->done, 1, __ATOMIC_RELEASE);
	}
	free(buf);
	return NULL;
}

/* While submissions are held, a writer stops at the bound; releasing
 * the hold lets it finish. */
static void test_bound(void)
{
	struct bd_dev *bd = ram_fs(64);
	struct flood f = { 0 };
	uint64_t limit, nw, nb, blk;
	pthread_t th;
	unsigned seen;

	REQUIRE(bd != NULL);
	f.fs = mnt(bd, 8, 0);
	REQUIRE(f.fs != NULL);
	limit = fs_data_limit(f.fs);
	CHECK(limit >= 1 << 20 && limit <= 8 << 20);
	f.n = (unsigned)(limit / (64 * 1024)) * 3;
	blk = alloc_run(f.fs, f.n * 16);
	REQUIRE(blk != 0);
	f.off = blk * BS;
	fs_data_hold(f.fs, 1);
	REQUIRE(pthread_create(&th, NULL, flood_thread, &f) == 0);
	for (unsigned i = 0; i < 500; i++) {	/* up to 5 s: busy host */
		if (__atomic_load_n(&f.done, __ATOMIC_ACQUIRE) >=
		    limit / (64 * 1024))
			break;
		usleep(10 * 1000);
	}
	usleep(100 * 1000);	/* would it go past the bound? */
	seen = __atomic_load_n(&f.done, __ATOMIC_ACQUIRE);
	fs_data_inflight(f.fs, &nw, &nb);
	CHECK(nb <= limit);
	CHECK_EQ(seen, limit / (64 * 1024));	/* stopped at the bound */
	fs_data_hold(f.fs, 0);
	pthread_join(th, NULL);
	CHECK_EQ(f.ret, 0);
	CHECK_EQ(f.done, f.n);
	CHECK_EQ(fs_data_wait(f.fs), 0);
	fs_data_inflight(f.fs, &nw, &nb);
	CHECK_EQ(nb, 0);
	CHECK(f.fs->st.data_throttled >= 1);
	CHECK(f.fs->st.data_absorbed > 0);	/* 64 KiB pieces combined */
	CHECK_EQ(fs_core_unmount(f.fs), 0);
	bd_close(bd);
}

static struct bd_dev *fault_fs(struct bd_fault **fault, struct bd_dev **lower)
{
	struct bd_dev *bd;

	*lower = ram_fs(64);
	if (*lower == NULL || bd_fault_open(*lower, &bd, fault) < 0)
		return NULL;
	return bd;
}

/* A failed data write: fs_data_wait reports it once; a commit that
 * consumes it (checkpoint) leaves it for the next fsync. */
static void test_error(void)
{
	struct bd_fault *fault;
	struct bd_dev *lower, *bd = fault_fs(&fault, &lower);
	uint8_t *buf = malloc(2 * BS);
	struct fs_tx *tx;
	struct fs_buf *b;
	struct fs *fs;
	uint64_t blk;

	REQUIRE(bd != NULL && buf != NULL);
	fs = mnt(bd, 16, 0);
	REQUIRE(fs != NULL);
	blk = alloc_run(fs, 4);
	REQUIRE(blk != 0);
	fill(buf, 2 * BS, 3);

	bd_fault_fail_nth(fault, BD_WRITE, 1, 0);
	CHECK_EQ(fs_data_write(fs, buf, 2 * BS, blk * BS), 0);
	CHECK_EQ(fs_data_wait(fs), -EIO);
	CHECK_EQ(fs_data_wait(fs), 0);
	CHECK(fs->st.data_errors == 1);

	/* error consumed by a commit (not fsync): fsync still sees it */
	bd_fault_fail_nth(fault, BD_WRITE, 1, 0);
	CHECK_EQ(fs_data_write(fs, buf, 2 * BS, blk * BS), 0);
	REQUIRE(fs_tx_begin(fs, 2, &tx) == 0);
	REQUIRE(fs_buf_read(fs, 0 + fs->sb.root_ino, 0, &b) == 0);
	CHECK_EQ(fs_tx_write(tx, b), 0);
	CHECK_EQ(fs_tx_end(tx), 0);
	fs_buf_put(b);
	CHECK_EQ(fs_journal_checkpoint(fs, FS_CR_TIMER), 0);
	CHECK_EQ(fs_journal_sync(fs), -EIO);
	CHECK_EQ(fs_journal_sync(fs), 0);

	/* a good write after the errors */
	CHECK_EQ(fs_data_write(fs, buf, 2 * BS, blk * BS), 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	CHECK(dev_equals(bd, buf, 2 * BS, blk * BS));
	/* misaligned / out of range */
	CHECK_EQ(fs_data_write(fs, buf, 100, blk * BS), -EINVAL);
	CHECK_EQ(fs_data_write(fs, buf, BS, bd_size(bd)), -EINVAL);

	/* an error left at unmount is reported; the journal still ends
	 * clean (nothing to replay at the next mount) */
	bd_fault_fail_nth(fault, BD_WRITE, 1, 0);
	CHECK_EQ(fs_data_write(fs, buf, 2 * BS, blk * BS), 0);
	CHECK_EQ(fs_core_unmount(fs), -EIO);
	fs = mnt(bd, 16, 0);
	REQUIRE(fs != NULL);
	CHECK_EQ(fs->st.replay_tx, 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
	free(buf);
}

/* Combining: writes inside the open run and contiguous after it are
 * absorbed (newest bytes win), reads are served from it, nothing reaches
 * the device before fs_data_wait, which submits it as one run. */
static void test_absorb_extend(void)
{
	struct bd_dev *bd = ram_fs(64);
	uint8_t *a = malloc(8 * BS), *r = malloc(8 * BS);
	uint8_t *model = malloc(8 * BS), *old = bd_buf_alloc(8 * BS);
	uint64_t blk, off, nw, nb, runs, absorbed, hits;
	struct fs *fs;

	REQUIRE(bd != NULL && a && r && model && old);
	fs = mnt(bd, 16, 0);
	REQUIRE(fs != NULL);
	blk = alloc_run(fs, 8);
	REQUIRE(blk != 0);
	off = blk * BS;
	CHECK_EQ(bd_read(bd, old, 8 * BS, off), 0);
	runs = fs->st.data_runs;
	absorbed = fs->st.data_absorbed;
	hits = fs->st.data_read_hits;

	fill(a, 8 * BS, 5);
	memcpy(model, old, 8 * BS);
	CHECK_EQ(fs_data_write(fs, a, 3 * BS, off), 0);	/* opens */
	memcpy(model, a, 3 * BS);
	fill(a, 8 * BS, 6);
	CHECK_EQ(fs_data_write(fs, a, BS, off + BS), 0);	/* inside */
	memcpy(model + BS, a, BS);
	fill(a, 8 * BS, 7);
	CHECK_EQ(fs_data_write(fs, a, 2 * BS, off + 2 * BS), 0); /* extends */
	memcpy(model + 2 * BS, a, 2 * BS);
	CHECK_EQ(fs->st.data_absorbed - absorbed, 2);
	fs_data_inflight(fs, &nw, &nb);
	CHECK_EQ(nw, 1);
	CHECK(nb >= 4 * BS && nb <= fs_data_limit(fs));
	CHECK(dev_equals(bd, old, 8 * BS, off));	/* still open */
	CHECK_EQ(fs_data_read(fs, r, 3 * BS, off + BS), 0);
	CHECK(memcmp(r, model + BS, 3 * BS) == 0);
	CHECK_EQ(fs->st.data_read_hits - hits, 1);
	CHECK_EQ(fs->st.data_runs, runs);

	CHECK_EQ(fs_data_wait(fs), 0);
	CHECK_EQ(fs->st.data_runs - runs, 1);
	fs_data_inflight(fs, &nw, &nb);
	CHECK_EQ(nw, 0);
	CHECK_EQ(nb, 0);
	CHECK(dev_equals(bd, model, 8 * BS, off));
	/* a gap is not contiguous: a new run */
	CHECK_EQ(fs_data_write(fs, a, BS, off), 0);
	CHECK_EQ(fs_data_write(fs, a, BS, off + 2 * BS), 0);
	CHECK_EQ(fs->st.data_absorbed - absorbed, 2);
	CHECK_EQ(fs_data_wait(fs), 0);
	CHECK_EQ(fs->st.data_runs - runs, 3);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
	free(a);
	free(r);
	free(model);
	free(old);
}

/* A run overlapping an older run that is not complete waits for it (its
 * dependencies are counted when it closes), so the device ends with the
 * newest bytes; a read the open run does not cover submits it. */
static void test_overlap_inflight(void)
{
	struct bd_dev *bd = ram_fs(64);
	uint8_t *a = malloc(6 * BS), *r = malloc(6 * BS);
	uint8_t *model = malloc(6 * BS);
	uint64_t blk, off, nw, nb, runs;
	struct fs *fs;

	REQUIRE(bd != NULL && a && r && model);
	fs = mnt(bd, 16, 0);
	REQUIRE(fs != NULL);
	blk = alloc_run(fs, 6);
	REQUIRE(blk != 0);
	off = blk * BS;

	fs_data_hold(fs, 1);
	fill(a, 6 * BS, 11);
	CHECK_EQ(fs_data_write(fs, a, 4 * BS, off), 0);
	memcpy(model, a, 4 * BS);
	fs_data_flush(fs);		/* closed, held back */
	fill(a, 6 * BS, 12);
	CHECK_EQ(fs_data_write(fs, a, 2 * BS, off + 2 * BS), 0);
	memcpy(model + 2 * BS, a, 2 * BS);
	fill(a, 6 * BS, 13);
	CHECK_EQ(fs_data_write(fs, a, 2 * BS, off + 4 * BS), 0);
	memcpy(model + 4 * BS, a, 2 * BS);
	fs_data_inflight(fs, &nw, &nb);
	CHECK_EQ(nw, 2);
	/* covered by the open run, though it overlaps the older one */
	CHECK_EQ(fs_data_read(fs, r, 3 * BS, off + 3 * BS), 0);
	CHECK(memcmp(r, model + 3 * BS, 3 * BS) == 0);
	/* the older run completes first, then the open one goes */
	fs_data_hold(fs, 0);
	for (unsigned i = 0; i < 500; i++) {	/* up to 5 s: busy host */
		fs_data_inflight(fs, &nw, &nb);
		if (nw <= 1)
			break;
		usleep(10 * 1000);
	}
	CHECK_EQ(nw, 1);		/* the open run stayed open */
	runs = fs->st.data_runs;
	/* not covered by one run: closes the open run, waits, device */
	CHECK_EQ(fs_data_read(fs, r, 6 * BS, off), 0);
	CHECK(memcmp(r, model, 6 * BS) == 0);
	CHECK_EQ(fs->st.data_runs - runs, 1);
	CHECK_EQ(fs_data_wait(fs), 0);
	CHECK(dev_equals(bd, model, 6 * BS, off));
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
	free(a);
	free(r);
	free(model);
}

/* Two streams written in turns into two regions each keep their own open
 * run (one device write per stream, not one per request), and the
 * device ends with every byte. */
static void test_two_streams(void)
{
	struct bd_dev *bd = ram_fs(64);
	uint8_t *a = malloc(BS), *model = malloc(128 * BS);
	uint64_t blk, off[2], runs, absorbed, nw, nb;
	struct fs *fs;

	REQUIRE(bd != NULL && a != NULL && model != NULL);
	fs = mnt(bd, 16, 0);
	REQUIRE(fs != NULL);
	blk = alloc_run(fs, 192);	/* streams 64 blocks apart */
	REQUIRE(blk != 0);
	off[0] = blk * BS;
	off[1] = (blk + 128) * BS;
	runs = fs->st.data_runs;
	absorbed = fs->st.data_absorbed;
	for (unsigned i = 0; i < 64; i++) {
		for (unsigned s = 0; s < 2; s++) {
			fill(a, BS, i * 2 + s);
			memcpy(model + (s * 64 + i) * BS, a, BS);
			CHECK_EQ(fs_data_write(fs, a, BS, off[s] + i * BS), 0);
		}
	}
	fs_data_inflight(fs, &nw, &nb);
	CHECK_EQ(nw, 2);
	CHECK_EQ(fs->st.data_absorbed - absorbed, 126);
	CHECK_EQ(fs->st.data_runs, runs);
	CHECK_EQ(fs_data_wait(fs), 0);
	CHECK_EQ(fs->st.data_runs - runs, 2);
	CHECK(dev_equals(bd, model, 64 * BS, off[0]));
	CHECK(dev_equals(bd, model + 64 * BS, 64 * BS, off[1]));
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
	free(a);
	free(model);
}

/* An older open run never absorbs bytes a younger run overlaps (it
 * could land after it), and a read that must wait for a run depending
 * on older open runs gets them submitted (no hang). Blocks: O1 = [0,2),
 * O2 = [4,6), then [2,5) continues O1 but overlaps O2; then [1,5)
 * overlaps both; a read of [0,6) needs the device. */
static void test_open_order(void)
{
	static const unsigned w[][3] = {	/* start, blocks, tag */
		{ 0, 2, 21 }, { 4, 2, 22 }, { 2, 3, 23 }, { 1, 4, 24 },
	};
	struct bd_dev *bd = ram_fs(64);
	uint8_t *a = malloc(6 * BS), *r = malloc(6 * BS);
	uint8_t *model = bd_buf_alloc(6 * BS);
	uint64_t blk, off, nw, nb, absorbed;
	struct fs *fs;

	REQUIRE(bd != NULL && a != NULL && r != NULL && model != NULL);
	fs = mnt(bd, 16, 0);
	REQUIRE(fs != NULL);
	blk = alloc_run(fs, 6);
	REQUIRE(blk != 0);
	off = blk * BS;
	REQUIRE(bd_read(bd, model, 6 * BS, off) == 0);
	absorbed = fs->st.data_absorbed;
	for (unsigned i = 0; i < 4; i++) {
		fill(a, w[i][1] * BS, w[i][2]);
		memcpy(model + w[i][0] * BS, a, w[i][1] * BS);
		CHECK_EQ(fs_data_write(fs, a, w[i][1] * BS,
				       off + w[i][0] * BS), 0);
	}
	CHECK_EQ(fs->st.data_absorbed, absorbed);	/* 4 runs */
	CHECK_EQ(fs_data_read(fs, r, 6 * BS, off), 0);
	CHECK(memcmp(r, model, 6 * BS) == 0);
	CHECK_EQ(fs_data_wait(fs), 0);
	fs_data_inflight(fs, &nw, &nb);
	CHECK_EQ(nw, 0);
	CHECK(dev_equals(bd, model, 6 * BS, off));
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
	free(a);
	free(r);
	free(model);
}

/* A run is submitted as soon as it is full, the next write starts the
 * next run; buffers stay within the bound; unmount submits an open
 * run. */
static void test_full_runs(void)
{
	struct bd_dev *bd = ram_fs(64);
	const size_t piece = 100 * 1024;	/* grows a small buffer */
	uint8_t *a = malloc(piece), *model;
	uint64_t blk, off, nw, nb, runs, max, total;
	struct fs *fs;

	REQUIRE(bd != NULL && a != NULL);
	fs = mnt(bd, 8, 0);
	REQUIRE(fs != NULL);
	max = fs_data_run_max(fs);
	CHECK(max >= 64 * 1024 && max <= fs_data_limit(fs) / 4);
	total = 3 * max + 5 * BS;
	total -= total % BS;
	model = malloc(total + piece);
	REQUIRE(model != NULL);
	blk = alloc_run(fs, (uint32_t)((total + piece) / BS));
	REQUIRE(blk != 0);
	off = blk * BS;
	runs = fs->st.data_runs;
	for (uint64_t pos = 0; pos < total; pos += BS) {
		fill(a, BS, (unsigned)(pos / BS));
		memcpy(model + pos, a, BS);
		CHECK_EQ(fs_data_write(fs, a, BS, off + pos), 0);
		fs_data_inflight(fs, &nw, &nb);
		CHECK(nb <= fs_data_limit(fs));
	}
	/* 3 full runs closed, the rest open */
	CHECK_EQ(fs->st.data_runs - runs, 3);
	/* a bigger write overlapping the open run's end is absorbed
	 * (newest bytes win), growing its buffer */
	fill(a, piece, 99);
	CHECK_EQ(fs_data_write(fs, a, piece, off + total - BS), 0);
	memcpy(model + total - BS, a, piece);
	CHECK_EQ(fs->st.data_runs - runs, 3);	/* the open run grew */
	CHECK_EQ(fs_core_unmount(fs), 0);
	CHECK(dev_equals(bd, model, total - BS + piece, off));
	bd_close(bd);
	free(a);
	free(model);
}

/* A device error on a combined run is reported once (one run, one
 * error), by fs_data_wait, which submits the open run itself. */
static void test_error_combined(void)
{
	struct bd_fault *fault;
	struct bd_dev *lower, *bd = fault_fs(&fault, &lower);
	uint8_t *buf = malloc(4 * BS);
	uint64_t blk, errs;
	struct fs *fs;

	REQUIRE(bd != NULL && buf != NULL);
	fs = mnt(bd, 16, 0);
	REQUIRE(fs != NULL);
	blk = alloc_run(fs, 8);
	REQUIRE(blk != 0);
	fill(buf, 4 * BS, 21);
	errs = fs->st.data_errors;
	bd_fault_fail_nth(fault, BD_WRITE, 1, 0);
	for (unsigned i = 0; i < 4; i++)
		CHECK_EQ(fs_data_write(fs, buf + i * BS, BS, (blk + i) * BS),
			 0);
	CHECK_EQ(fs_data_wait(fs), -EIO);
	CHECK_EQ(fs->st.data_errors - errs, 1);
	CHECK_EQ(fs_data_wait(fs), 0);
	/* written again, it lands */
	for (unsigned i = 0; i < 4; i++)
		CHECK_EQ(fs_data_write(fs, buf + i * BS, BS, (blk + i) * BS),
			 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	CHECK(dev_equals(bd, buf, 4 * BS, blk * BS));
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
	free(buf);
}

/* data=ordered: data written before a synced transaction survives a
 * power loss (the fault device drops every unflushed write). */
static void test_ordered_crash(void)
{
	struct bd_fault *fault;
	struct bd_dev *lower, *bd = fault_fs(&fault, &lower);
	uint8_t *buf = malloc(8 * BS);
	struct fs_tx *tx;
	struct fs_buf *b;
	struct fs *fs;
	uint64_t blk;

	REQUIRE(bd != NULL && buf != NULL);
	fs = mnt(bd, 16, 0);
	REQUIRE(fs != NULL);
	blk = alloc_run(fs, 64);
	REQUIRE(blk != 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	for (unsigned i = 0; i < 8; i++) {
		fill(buf, 8 * BS, 40 + i);
		CHECK_EQ(fs_data_write(fs, buf, 8 * BS, (blk + i * 8) * BS),
			 0);
	}
	/* metadata change committed by a commit, not an fsync */
	REQUIRE(fs_tx_begin(fs, 2, &tx) == 0);
	REQUIRE(fs_buf_read(fs, fs->sb.root_ino, 0, &b) == 0);
	CHECK_EQ(fs_tx_write(tx, b), 0);
	CHECK_EQ(fs_tx_end(tx), 0);
	fs_buf_put(b);
	CHECK_EQ(fs_journal_checkpoint(fs, FS_CR_TIMER), 0);
	bd_fault_crash(fault, 0);
	fs_core_abandon(fs);
	for (unsigned i = 0; i < 8; i++) {
		fill(buf, 8 * BS, 40 + i);
		CHECK(dev_equals(lower, buf, 8 * BS, (blk + i * 8) * BS));
	}
	bd_close(bd);
	free(buf);
}

struct worker {
	struct fs *fs;
	uint64_t off;		/* own region of 256 blocks */
	uint64_t seed;
	int bad;
};

static void *worker_thread(void *p)
{
	struct worker *w = p;
	uint8_t *model = calloc(256, BS), *buf = malloc(10 * BS);
	uint64_t s = w->seed;

	if (fs_data_write(w->fs, model, 256 * BS, w->off) < 0)
		w->bad++;
	for (unsigned i = 0; i < 1500; i++) {
		unsigned len = 1 + rnd_next(&s) % 10;
		unsigned at = rnd_next(&s) % (256 - len + 1);
		unsigned op = rnd_next(&s) % 8;

		if (op < 2) {
			if (fs_data_read(w->fs, buf, len * BS,
					 w->off + at * BS) < 0 ||
			    memcmp(buf, model + at * BS, len * BS) != 0)
				w->bad++;
		} else if (op == 2 && i % 50 == 0) {
			if (fs_journal_sync(w->fs) < 0)
				w->bad++;
		} else {
			fill(buf, len * BS, (unsigned)(s & 0xffff));
			memcpy(model + at * BS, buf, len * BS);
			if (fs_data_write(w->fs, buf, len * BS,
					  w->off + at * BS) < 0)
				w->bad++;
		}
	}
	if (fs_data_wait(w->fs) < 0)
		w->bad++;
	if (fs_data_read(w->fs, buf, BS, w->off) < 0 ||
	    memcmp(buf, model, BS) != 0)
		w->bad++;
	if (!w->bad) {
		uint8_t *all = malloc(256 * BS);

		if (fs_data_read(w->fs, all, 256 * BS, w->off) < 0 ||
		    memcmp(all, model, 256 * BS) != 0)
			w->bad++;
		free(all);
	}
	free(model);
	free(buf);
	return NULL;
}

static void test_threads(void)
{
	struct bd_dev *bd = ram_fs(64);
	struct worker w[4];
	pthread_t th[4];
	uint64_t seed = t_seed(), blk;
	struct fs *fs;

	printf("# seed %llu\n", (unsigned long long)seed);
	REQUIRE(bd != NULL);
	fs = mnt(bd, 8, 0);
	REQUIRE(fs != NULL);
	blk = alloc_run(fs, 1024);
	REQUIRE(blk != 0);
	for (unsigned i = 0; i < 4; i++) {
		w[i] = (struct worker){ fs, (blk + i * 256) * BS,
					seed * 4 + i + 1, 0 };
		REQUIRE(pthread_create(&th[i], NULL, worker_thread,
				       &w[i]) == 0);
	}
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(w[i].bad, 0);
	}
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* data=writeback: fsync still makes data durable. */
static void test_writeback_fsync(void)
{
	struct bd_fault *fault;
	struct bd_dev *lower, *bd = fault_fs(&fault, &lower);
	uint8_t *buf = malloc(4 * BS);
	struct fs *fs;
	uint64_t blk;

	REQUIRE(bd != NULL && buf != NULL);
	fs = mnt(bd, 16, 1);
	REQUIRE(fs != NULL);
	blk = alloc_run(fs, 4);
	REQUIRE(blk != 0);
	fill(buf, 4 * BS, 77);
	CHECK_EQ(fs_data_write(fs, buf, 4 * BS, blk * BS), 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	bd_fault_crash(fault, 0);
	fs_core_abandon(fs);
	CHECK(dev_equals(lower, buf, 4 * BS, blk * BS));
	bd_close(bd);
	free(buf);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_coherence_order);
	T_RUN(test_random_overlap_file);
	T_RUN(test_bound);
	T_RUN(test_absorb_extend);
	T_RUN(test_overlap_inflight);
	T_RUN(test_two_streams);
	T_RUN(test_open_order);
	T_RUN(test_full_runs);
	T_RUN(test_error_combined);
	T_RUN(test_error);
	T_RUN(test_ordered_crash);
	T_RUN(test_threads);
	T_RUN(test_writeback_fsync);
	return t_done();
}
