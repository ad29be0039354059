/*
 * test_bd.c — unit tests of the block device API on the ram and file
 * backends: round trips, argument errors, open errors, read-only and
 * exclusive opens, batches, async callbacks, counters, concurrency.
 *
 * File images live in a private directory under /tmp (ext4 here, so
 * O_DIRECT is really used) and /dev/shm (tmpfs) for the buffered case.
 *
 * Not a test: "test_bd --tput FILE [MiB]" writes then reads MiB (default
 * 256) of 1 MiB sequential I/Os through bd_file with O_DIRECT and prints
 * MB/s, for comparison with dd oflag=direct by hand.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <limits.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "blockdev/bd.h"
#include "tests/unit/harness.h"
#include "tests/unit/bd_conform.h"

static char tmpdir[64];

/*
 * io_submit interposed (this definition wins over libaio's for libbd.a in
 * this binary) so that tests can make the kernel "refuse" submissions:
 * every @submit_fail_every-th call fails with -@submit_fail_errno.
 */
static _Atomic unsigned submit_fail_every;
static _Atomic int submit_fail_errno;
static _Atomic unsigned submit_calls;
static _Atomic unsigned submit_failed;
/* io_submit calls made by the thread submit_watch (when set) */
static pthread_t submit_watch;
static _Atomic int submit_watching;
static _Atomic unsigned submit_by_watched;

/* test_gate_queued: the write gate (bd_set_gate) shuts right after the
 * next io_submit, as a heartbeat lease runs out while a batch waits. */
static _Atomic int gate_shut;
static _Atomic int gate_shut_after_submit;

int io_submit(io_context_t ctx, long nr, struct iocb *ios[])
{
	unsigned every = submit_fail_every;
	long r;

	if (submit_watching && pthread_equal(pthread_self(), submit_watch))
		submit_by_watched++;

	if (every != 0 && ++submit_calls % every == 0) {
		submit_failed++;
		return -submit_fail_errno;
	}
	r = syscall(SYS_io_submit, ctx, nr, ios);
	if (gate_shut_after_submit) { /* the node "froze" past its lease */
		gate_shut_after_submit = 0;
		gate_shut = 1;
	}
	return r < 0 ? -errno : (int)r;
}

/* Create @name in the scratch dir with @size bytes; returns the path. */
static const char *mkimage(const char *name, off_t size)
{
	static char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
	if (fd < 0 || ftruncate(fd, size) != 0) {
		perror(path);
		exit(2);
	}
	close(fd);
	return path;
}

static void test_ram_roundtrip(void)
{
	struct bd_dev *dev;

	REQUIRE(bd_ram_open(4 * MiB, &dev) == 0);
	CHECK_EQ(bd_size(dev), 4 * MiB);
	CHECK(strcmp(bd_name(dev), "ram") == 0);
	CHECK_EQ(bd_readonly(dev), 0);
	roundtrip(dev);
	bd_close(dev);
	CHECK_EQ(bd_ram_open(0, &dev), -EINVAL);
	CHECK_EQ(bd_ram_open(BLK + 512, &dev), -EINVAL);
}

static void test_file_roundtrip(void)
{
	const char *path = mkimage("rt.img", 16 * MiB);
	char *rd = bd_buf_alloc(8 * BLK);
	struct bd_dev *dev;

	REQUIRE(rd != NULL);
	REQUIRE(bd_file_open(path, 0, &dev) == 0);
	CHECK_EQ(bd_size(dev), 16 * MiB);
	CHECK(strcmp(bd_name(dev), path) == 0);
	roundtrip(dev);
	bd_close(dev);
	/* The data is in the file: reopen buffered and read it back. */
	REQUIRE(bd_file_open(path, BD_BUFFERED | BD_RDONLY, &dev) == 0);
	CHECK_EQ(bd_read(dev, rd, 8 * BLK, 0), 0);
	CHECK(check_fill(rd, 8 * BLK, 1));
	bd_close(dev);
	free(rd);
	unlink(path);
}

/* The open flags (octal, from /proc/self/fdinfo) of the descriptor this
 * process has open on @path, or -1. */
static long fd_flags_of(const char *path)
{
	char link[PATH_MAX], p[300], line[128];
	struct dirent *de;
	long flags = -1;
	DIR *d;
	FILE *fi;
	ssize_t n;

	d = opendir("/proc/self/fd");
	if (d == NULL)
		return -1;
	while (flags < 0 && (de = readdir(d)) != NULL) {
		snprintf(p, sizeof(p), "/proc/self/fd/%s", de->d_name);
		n = readlink(p, link, sizeof(link) - 1);
		if (n < 0)
			continue;
		link[n] = 0;
		if (strcmp(link, path) != 0)
			continue;
		snprintf(p, sizeof(p), "/proc/self/fdinfo/%s", de->d_name);
		fi = fopen(p, "r");
		while (fi != NULL && fgets(line, sizeof(line), fi) != NULL)
			if (strncmp(line, "flags:", 6) == 0)
				flags = strtol(line + 6, NULL, 8);
		if (fi != NULL)
			fclose(fi);
	}
	closedir(d);
	return flags;
}

/* On /tmp's disk file system O_DIRECT is really used; BD_BUFFERED not. */
static void test_file_direct(void)
{
	const char *path = mkimage("direct.img", 1 * MiB);
	struct bd_dev *dev;
	long fl;

	REQUIRE(bd_file_open(path, 0, &dev) == 0);
	fl = fd_flags_of(path);
	CHECK(fl >= 0);
	CHECK((fl & O_DIRECT) != 0);
	CHECK((fl & O_ACCMODE) == O_RDWR);
	bd_close(dev);
	CHECK_EQ(fd_flags_of(path), -1); /* closed */
	REQUIRE(bd_file_open(path, BD_BUFFERED | BD_RDONLY, &dev) == 0);
	fl = fd_flags_of(path);
	CHECK(fl >= 0 && (fl & O_DIRECT) == 0);
	CHECK((fl & O_ACCMODE) == O_RDONLY);
	bd_close(dev);
	unlink(path);
}

/* Attach @img to a free loop device; its path in @dev, or -1. */
static int loop_attach(const char *img, char *dev, size_t len)
{
	char cmd[256];
	FILE *p;
	int ok;

	snprintf(cmd, sizeof(cmd), "losetup -f --show '%s' 2>/dev/null", img);
	p = popen(cmd, "r");
	if (p == NULL)
		return -1;
	ok = fgets(dev, (int)len, p) != NULL;
	if (pclose(p) != 0 || !ok || strncmp(dev, "/dev/loop", 9) != 0)
		return -1;
	dev[strcspn(dev, "\n")] = 0;
	return 0;
}

static void loop_detach(const char *dev)
{
	char cmd[128];
	int fd, ro = 0;

	/* The read-only flag outlives the attachment: clear it first. */
	fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ioctl(fd, BLKROSET, &ro);
		close(fd);
	}
	snprintf(cmd, sizeof(cmd), "losetup -d '%s'", dev);
	if (system(cmd) != 0)
		fprintf(stderr, "could not detach %s\n", dev);
}

static void loopdev_checks(const char *loop)
{
	struct bd_dev *dev, *d2;
	int fd, ro = 1;

	REQUIRE(bd_file_open(loop, BD_EXCL, &dev) == 0);
	CHECK_EQ(bd_size(dev), 8 * MiB); /* BLKGETSIZE64 */
	CHECK_EQ(fd_flags_of(loop) & O_DIRECT, O_DIRECT);
	CHECK_EQ(bd_file_open(loop, BD_EXCL, &d2), -EBUSY);
	roundtrip(dev);
	bd_close(dev);
	REQUIRE(bd_file_open(loop, 0, &dev) == 0);
	batch_roundtrip(dev, 200);
	bd_close(dev);
	fd = open(loop, O_RDONLY | O_CLOEXEC);
	REQUIRE(fd >= 0);
	CHECK_EQ(ioctl(fd, BLKROSET, &ro), 0);
	close(fd);
	CHECK_EQ(bd_file_open(loop, 0, &dev), -EROFS);
	REQUIRE(bd_file_open(loop, BD_RDONLY, &dev) == 0);
	CHECK_EQ(bd_readonly(dev), 1);
	bd_close(dev);
}

/* A loop device: sized by ioctl, read-only flag honoured. Needs root and
 * a free loop device, else SKIP. */
static void test_loopdev(void)
{
	const char *img = mkimage("loop.img", 8 * MiB);
	char loop[64];

	if (geteuid() != 0 || loop_attach(img, loop, sizeof(loop)) != 0) {
		printf("SKIP test_loopdev: no root or no free loop device\n");
		unlink(img);
		return;
	}
	loopdev_checks(loop);
	loop_detach(loop);
	unlink(img);
}

/* tmpfs: O_DIRECT is either supported (Linux >= 6.6) or refused, in which
 * case the open falls back to buffered I/O; both must work. */
static void test_tmpfs_open(void)
{
	char path[64];
	struct bd_dev *dev = NULL;
	int fd;

	snprintf(path, sizeof(path), "/dev/shm/test_bd.%d", (int)getpid());
	fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
	REQUIRE(fd >= 0);
	CHECK_EQ(ftruncate(fd, 1 * MiB), 0);
	close(fd);
	CHECK_EQ(bd_file_open(path, 0, &dev), 0);
	if (dev != NULL) {
		roundtrip(dev);
		bd_close(dev);
		dev = NULL;
	}
	CHECK_EQ(bd_file_open(path, BD_BUFFERED, &dev), 0);
	if (dev != NULL) {
		roundtrip(dev);
		bd_close(dev);
	}
	unlink(path);
}

static void test_bad_args(void)
{
	const char *path = mkimage("args.img", 1 * MiB);
	struct bd_dev *dev;

	REQUIRE(bd_ram_open(1 * MiB, &dev) == 0);
	bad_args(dev);
	bd_close(dev);
	REQUIRE(bd_file_open(path, 0, &dev) == 0);
	bad_args(dev);
	bd_close(dev);
	unlink(path);
}

static void test_open_errors(void)
{
	char path[128];
	struct bd_dev *dev = NULL;

	snprintf(path, sizeof(path), "%s/missing.img", tmpdir);
	CHECK_EQ(bd_file_open(path, 0, &dev), -ENOENT);
	CHECK_EQ(bd_file_open(mkimage("empty.img", 0), 0, &dev), -EINVAL);
	CHECK_EQ(bd_file_open(mkimage("odd.img", BLK + 512), 0, &dev),
		 -EINVAL);
	CHECK_EQ(bd_file_open(tmpdir, BD_RDONLY, &dev), -ENODEV);
	CHECK(bd_file_open(tmpdir, 0, &dev) < 0); /* EISDIR from open */
	CHECK_EQ(bd_file_open(mkimage("flags.img", BLK), 0x100, &dev),
		 -EINVAL);
	CHECK_EQ(bd_file_open(NULL, 0, &dev), -EINVAL);
	bd_close(NULL);
	for (const char *const *n = (const char *const[]){
		     "empty.img", "odd.img", "flags.img", NULL };
	     *n != NULL; n++) {
		snprintf(path, sizeof(path), "%s/%s", tmpdir, *n);
		unlink(path);
	}
}

static void test_rdonly(void)
{
	const char *path = mkimage("ro.img", 1 * MiB);
	char *buf = bd_buf_alloc(BLK);
	struct bd_io io = { .op = BD_WRITE, .buf = buf, .len = BLK };
	struct bd_stats st;
	struct bd_dev *dev;

	REQUIRE(buf != NULL);
	REQUIRE(bd_file_open(path, BD_RDONLY, &dev) == 0);
	CHECK_EQ(bd_readonly(dev), 1);
	CHECK_EQ(bd_write(dev, buf, BLK, 0, 0), -EROFS);
	CHECK_EQ(bd_submit(dev, &io, 1), -EROFS);
	CHECK_EQ(io.ret, -EROFS);
	CHECK_EQ(bd_read(dev, buf, BLK, 0), 0);
	bd_stats_get(dev, &st);
	CHECK_EQ(st.write.count, 0); /* refused before reaching the device */
	bd_close(dev);
	/* A writable open of a file the caller may not write: -EACCES, or
	 * success when running as root (which ignores the mode). */
	chmod(path, 0400);
	if (geteuid() != 0)
		CHECK_EQ(bd_file_open(path, 0, &dev), -EACCES);
	free(buf);
	unlink(path);
}

static void test_excl(void)
{
	const char *path = mkimage("excl.img", 1 * MiB);
	struct bd_dev *a, *b;

	REQUIRE(bd_file_open(path, BD_EXCL, &a) == 0);
	CHECK_EQ(bd_file_open(path, BD_EXCL, &b), -EBUSY);
	CHECK_EQ(bd_file_open(path, BD_EXCL | BD_RDONLY, &b), -EBUSY);
	/* Without BD_EXCL, sharing is allowed (a cluster shares devices). */
	CHECK_EQ(bd_file_open(path, 0, &b), 0);
	bd_close(b);
	bd_close(a);
	CHECK_EQ(bd_file_open(path, BD_EXCL, &b), 0);
	bd_close(b);
	unlink(path);
}

static void test_batch(void)
{
	const char *path = mkimage("batch.img", 8 * MiB);
	struct bd_dev *dev;

	REQUIRE(bd_ram_open(8 * MiB, &dev) == 0);
	batch_roundtrip(dev, 1000);
	bd_close(dev);
	REQUIRE(bd_file_open(path, 0, &dev) == 0);
	batch_roundtrip(dev, 1000); /* > the aio depth: issued in waves */
	bd_close(dev);
	REQUIRE(bd_file_open(path, BD_BUFFERED, &dev) == 0);
	batch_roundtrip(dev, 300);
	bd_close(dev);
	unlink(path);
}

/* An invalid I/O rejects the whole batch before anything is done. */
static void test_batch_invalid(void)
{
	char *buf = bd_buf_alloc(3 * BLK), *rd = bd_buf_alloc(BLK);
	struct bd_io ios[3];
	struct bd_stats st;
	struct bd_dev *dev;

	REQUIRE(buf != NULL && rd != NULL);
	REQUIRE(bd_ram_open(1 * MiB, &dev) == 0);
	memset(buf, 0xab, 3 * BLK);
	for (unsigned i = 0; i < 3; i++)
		ios[i] = (struct bd_io){ .op = BD_WRITE, .len = BLK,
					 .buf = buf + i * BLK,
					 .off = i * BLK };
	ios[1].off = 1 * MiB; /* past the end */
	CHECK_EQ(bd_submit(dev, ios, 3), -EINVAL);
	CHECK_EQ(ios[0].ret, -ECANCELED);
	CHECK_EQ(ios[1].ret, -EINVAL);
	CHECK_EQ(ios[2].ret, -ECANCELED);
	CHECK_EQ(bd_read(dev, rd, BLK, 0), 0);
	CHECK_EQ(rd[0], 0);
	ios[1].off = BLK;
	ios[1].op = (enum bd_op)7;
	CHECK_EQ(bd_submit(dev, ios, 3), -EINVAL);
	CHECK_EQ(bd_submit(dev, NULL, 3), -EINVAL);
	bd_stats_get(dev, &st);
	CHECK_EQ(st.write.count, 0);
	CHECK_EQ(st.batches, 0);
	bd_close(dev);
	free(buf);
	free(rd);
}

static void test_async(void)
{
	const char *path = mkimage("async.img", 4 * MiB);
	struct bd_dev *dev;

	REQUIRE(bd_ram_open(4 * MiB, &dev) == 0);
	async_roundtrip(dev);
	bd_close(dev);
	REQUIRE(bd_file_open(path, 0, &dev) == 0);
	async_roundtrip(dev);
	bd_close(dev);
	unlink(path);
}

/* A callback may do synchronous I/O on its device (no self-deadlock). */
static void test_sync_in_callback(void)
{
	const char *path = mkimage("syncb.img", 1 * MiB);
	struct async_state as = { .caller = pthread_self() };
	char *buf = bd_buf_alloc(2 * BLK);
	struct bd_io ios[2];
	struct bd_dev *dev;

	REQUIRE(buf != NULL);
	pthread_mutex_init(&as.lock, NULL);
	pthread_cond_init(&as.cond, NULL);
	for (int backend = 0; backend < 2; backend++) {
		if (backend == 0)
			REQUIRE(bd_ram_open(1 * MiB, &dev) == 0);
		else
			REQUIRE(bd_file_open(path, 0, &dev) == 0);
		as.dev = dev;
		as.calls = 0;
		fill(buf, BLK, 5);
		memset(buf + BLK, 0, BLK);
		ios[0] = (struct bd_io){ .op = BD_WRITE, .len = BLK,
					 .buf = buf, .off = 3 * BLK };
		ios[1] = (struct bd_io){ .op = BD_READ, .len = BLK,
					 .buf = buf + BLK, .off = 3 * BLK };
		as.chain = &ios[1];
		CHECK_EQ(bd_submit_async(dev, ios, 1, sync_in_done, &as), 0);
		async_wait(&as, 1);
		CHECK_EQ(as.bad, 0);
		CHECK(check_fill(buf + BLK, BLK, 5));
		bd_close(dev);
	}
	pthread_cond_destroy(&as.cond);
	pthread_mutex_destroy(&as.lock);
	free(buf);
	unlink(path);
}

/* The file shrinks behind the device's back: a read that comes back short
 * (aio returns part, pread then hits EOF) is -EIO, not garbage. */
static void test_file_shrunk(void)
{
	const char *path = mkimage("shrunk.img", 1 * MiB);
	char *buf = bd_buf_alloc(2 * BLK);
	struct bd_io io;
	struct bd_dev *dev;

	REQUIRE(buf != NULL);
	REQUIRE(bd_file_open(path, 0, &dev) == 0);
	CHECK_EQ(truncate(path, 2 * BLK), 0);
	io = (struct bd_io){ .op = BD_READ, .buf = buf, .len = 2 * BLK,
			     .off = 0 };
	CHECK_EQ(bd_submit(dev, &io, 1), 0);
	io.off = BLK; /* half inside the file, half past its end */
	CHECK_EQ(bd_submit(dev, &io, 1), -EIO);
	CHECK_EQ(io.ret, -EIO);
	CHECK_EQ(bd_read(dev, buf, 2 * BLK, BLK), -EIO);
	CHECK_EQ(bd_read(dev, buf, BLK, BLK), 0);
	bd_close(dev);
	free(buf);
	unlink(path);
}

/* When io_submit refuses I/O (EINVAL: done synchronously instead; EAGAIN:
 * retried after completions, or synchronously if nothing is in flight),
 * every I/O still completes correctly, sync and async. */
static void test_submit_refused(void)
{
	static const struct { unsigned every; int err; } mode[] = {
		{ 1, EINVAL }, { 3, EINVAL }, { 1, EAGAIN }, { 2, EAGAIN },
	};
	const char *path = mkimage("refused.img", 4 * MiB);
	struct bd_dev *dev;

	for (unsigned m = 0; m < sizeof(mode) / sizeof(mode[0]); m++) {
		REQUIRE(bd_file_open(path, 0, &dev) == 0);
		submit_calls = 0;
		submit_failed = 0;
		submit_fail_errno = mode[m].err;
		submit_fail_every = mode[m].every;
		batch_roundtrip(dev, 300);
		bd_close(dev);
		REQUIRE(bd_file_open(path, 0, &dev) == 0);
		async_roundtrip(dev);
		many_small_async(dev);
		submit_fail_every = 0;
		bd_close(dev);
		CHECK(submit_failed > 0);
	}
	unlink(path);
}

/* An async batch is issued by the completion thread, not by its
 * submitter (io_submit of O_DIRECT writes must not delay it); a sync
 * batch is issued by its own caller. */
static void test_async_issuer(void)
{
	const char *path = mkimage("issuer.img", 4 * MiB);
	struct async_state as = { .caller = pthread_self() };
	char *bufs = bd_buf_alloc(32 * BLK);
	struct bd_io ios[32];
	struct bd_dev *dev;

	REQUIRE(bufs != NULL);
	pthread_mutex_init(&as.lock, NULL);
	pthread_cond_init(&as.cond, NULL);
	REQUIRE(bd_file_open(path, 0, &dev) == 0);
	for (unsigned i = 0; i < 32; i++) {
		ios[i] = (struct bd_io){ .op = BD_WRITE, .len = BLK,
					 .buf = bufs + i * BLK,
					 .off = i * BLK * 3 };
		fill(ios[i].buf, BLK, 500 + i);
	}
	submit_watch = pthread_self();
	submit_by_watched = 0;
	submit_watching = 1;
	for (unsigned i = 0; i < 32; i++)
		CHECK_EQ(bd_submit_async(dev, &ios[i], 1, async_done, &as), 0);
	async_wait(&as, 32);
	CHECK_EQ(submit_by_watched, 0);
	CHECK_EQ(as.bad, 0);
	for (unsigned i = 0; i < 32; i++)
		ios[i].op = BD_READ;
	memset(bufs, 0, 32 * BLK);
	CHECK_EQ(bd_submit(dev, ios, 32), 0);
	CHECK(submit_by_watched >= 1);
	submit_watching = 0;
	for (unsigned i = 0; i < 32; i++)
		CHECK(check_fill(ios[i].buf, BLK, 500 + i));
	bd_close(dev);
	pthread_cond_destroy(&as.cond);
	pthread_mutex_destroy(&as.lock);
	free(bufs);
	unlink(path);
}

static int test_gate_fn(void *arg)
{
	(void)arg;
	return gate_shut ? -EIO : 0;
}

/*
 * A batch larger than one io_submit (64 iocbs) passes the write gate when
 * it is submitted; the gate shuts right after the first io_submit (a node
 * frozen past its disk lease, resumed): the writes still waiting must
 * fail with the gate's error, not be issued (before: written, all 256).
 */
static void test_gate_queued(void)
{
	const char *path = mkimage("gate.img", 4 * MiB);
	char *bufs = bd_buf_alloc(256 * BLK);
	struct bd_io ios[256];
	struct bd_dev *dev;
	unsigned ok = 0, refused = 0;

	REQUIRE(bufs != NULL);
	REQUIRE(bd_file_open(path, 0, &dev) == 0);
	bd_set_gate(dev, test_gate_fn, NULL);
	for (unsigned i = 0; i < 256; i++) {
		ios[i] = (struct bd_io){ .op = BD_WRITE, .len = BLK,
					 .buf = bufs + i * BLK, .off = i * BLK };
		fill(ios[i].buf, BLK, 700 + i);
	}
	gate_shut = 0;
	gate_shut_after_submit = 1;
	CHECK(bd_submit(dev, ios, 256) != 0);
	for (unsigned i = 0; i < 256; i++) {
		ok += ios[i].ret == 0;
		refused += ios[i].ret == -EIO;
	}
	printf("# gate shut after the first io_submit: %u written, %u "
	       "refused\n", ok, refused);
	CHECK(ok >= 1 && ok <= 64);
	CHECK_EQ(ok + refused, 256);
	bd_set_gate(dev, NULL, NULL);
	gate_shut = 0;
	for (unsigned i = 0; i < 256; i++)
		ios[i].op = BD_READ;
	memset(bufs, 0, 256 * BLK);
	CHECK_EQ(bd_submit(dev, ios, 256), 0);
	for (unsigned i = ok; i < 256; i++) /* nothing written there */
		CHECK(check_fill(ios[i].buf, BLK, 700 + i) == 0);
	for (unsigned i = 0; i < ok; i++)
		CHECK(check_fill(ios[i].buf, BLK, 700 + i));
	bd_close(dev);
	free(bufs);
	unlink(path);
}

/* bd_close() waits for async I/O still in flight. */
static void test_async_close(void)
{
	const char *path = mkimage("aclose.img", 4 * MiB);
	struct async_state as = { .caller = pthread_self() };
	struct bd_io ios[64];
	char *bufs = bd_buf_alloc(64 * BLK);
	struct bd_dev *dev;

	REQUIRE(bufs != NULL);
	pthread_mutex_init(&as.lock, NULL);
	pthread_cond_init(&as.cond, NULL);
	REQUIRE(bd_file_open(path, 0, &dev) == 0);
	for (unsigned i = 0; i < 64; i++)
		ios[i] = (struct bd_io){ .op = BD_WRITE, .len = BLK,
					 .buf = bufs + i * BLK,
					 .off = i * BLK * 7 };
	CHECK_EQ(bd_submit_async(dev, ios, 64, async_done, &as), 0);
	bd_close(dev);
	CHECK_EQ(as.calls, 1);
	CHECK_EQ(as.ios, 64);
	pthread_cond_destroy(&as.cond);
	pthread_mutex_destroy(&as.lock);
	free(bufs);
	unlink(path);
}

static void test_counters(void)
{
	const char *path = mkimage("cnt.img", 1 * MiB);
	struct bd_dev *dev;

	REQUIRE(bd_ram_open(1 * MiB, &dev) == 0);
	counters(dev);
	bd_close(dev);
	REQUIRE(bd_file_open(path, 0, &dev) == 0);
	counters(dev);
	bd_close(dev);
	unlink(path);
}

/* Histogram buckets: a slow op lands in the bucket of its microseconds. */
static void test_hist_bucket(void)
{
	const char *path = mkimage("hist.img", 1 * MiB);
	struct bd_stats st;
	struct bd_dev *dev;
	unsigned top = 0;
	uint64_t us;

	REQUIRE(bd_file_open(path, 0, &dev) == 0);
	CHECK_EQ(bd_flush(dev), 0);
	bd_stats_get(dev, &st);
	for (unsigned i = 0; i < BD_HIST_BUCKETS; i++)
		if (st.flush.hist[i] != 0)
			top = i;
	us = st.flush.max_ns / 1000;
	CHECK_EQ(st.flush.hist[top], 1);
	if (top == 0)
		CHECK(us < 2);
	else
		CHECK(us >= (1ull << top) && us < (2ull << top));
	bd_close(dev);
	unlink(path);
}

static void test_threads(void)
{
	const char *path = mkimage("thr.img", 4 * MiB);
	struct hammer h[4];
	pthread_t th[4];
	struct bd_stats st;
	struct bd_dev *dev;

	REQUIRE(bd_file_open(path, 0, &dev) == 0);
	for (unsigned i = 0; i < 4; i++) {
		h[i] = (struct hammer){ .dev = dev, .id = i };
		REQUIRE(pthread_create(&th[i], NULL, hammer_main, &h[i]) == 0);
	}
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(h[i].errors, 0);
	}
	bd_stats_get(dev, &st);
	CHECK_EQ(st.write.count, 4 * 40 * 8);
	CHECK_EQ(st.read.count, 4 * 40);
	CHECK_EQ(st.inflight, 0);
	bd_close(dev);
	unlink(path);
}

/* Remove the scratch dir and what failed cases left in it. */
static void rm_scratch(void)
{
	struct dirent *de;
	char p[sizeof(tmpdir) + sizeof(de->d_name) + 1];
	DIR *d;

	d = opendir(tmpdir);
	while (d != NULL && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", tmpdir, de->d_name);
		unlink(p);
	}
	if (d != NULL)
		closedir(d);
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "--tput") == 0)
		return throughput(argv[2], argc > 3 ? (unsigned)atoi(argv[3])
						    : 256);
	t_init(argc, argv);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_bd.XXXXXX");
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 2;
	}
	T_RUN(test_ram_roundtrip);
	T_RUN(test_file_roundtrip);
	T_RUN(test_file_direct);
	T_RUN(test_tmpfs_open);
	T_RUN(test_loopdev);
	T_RUN(test_bad_args);
	T_RUN(test_open_errors);
	T_RUN(test_rdonly);
	T_RUN(test_excl);
	T_RUN(test_batch);
	T_RUN(test_batch_invalid);
	T_RUN(test_async);
	T_RUN(test_sync_in_callback);
	T_RUN(test_file_shrunk);
	T_RUN(test_submit_refused);
	T_RUN(test_async_close);
	T_RUN(test_async_issuer);
	T_RUN(test_gate_queued);
	T_RUN(test_counters);
	T_RUN(test_hist_bucket);
	T_RUN(test_threads);
	rm_scratch();
	rmdir(tmpdir);
	return t_done();
}
