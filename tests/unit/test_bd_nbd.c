/*
 * test_bd_nbd.c — unit tests of the NBD backend (bd_nbd_open) against real
 * nbdkit servers on unix sockets in a private directory under /tmp: the
 * conformance checks every backend passes (tests/unit/bd_conform.h), then
 * what is NBD's own: requests split to the server's maximum size, FUA
 * (native, and write + flush on a server without FUA, both seen in the
 * server's log), a server without flush, server errors (ENOSPC),
 * read-only exports, open errors, BD_EXCL (host-local lock), commands
 * libnbd refuses, a killed server and a hung one (errors within
 * io_timeout, never a hang), nbd-server as the server
 * (interoperability), bd_open_any.
 *
 * Each server is started by PID with --exit-with-parent and stopped by
 * PID; nbdkit missing is a SKIP (make deps installs it).
 *
 * Not tests: "test_bd_nbd --tput DEVICE [MiB]" writes then reads MiB
 * (default 256) of 1 MiB sequential I/Os through bd_open_any (a path or an
 * NBD URI), one at a time and 8 at once, and prints MB/s; "test_bd_nbd
 * --lat DEVICE" does 20000 random 4 KiB sync reads, then writes, from 1
 * and from 8 threads, and prints IOPS and the mean latency.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libnbd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "blockdev/bd.h"
#include "tests/unit/harness.h"
#include "tests/unit/bd_conform.h"

static char tmpdir[64];
static unsigned srv_seq;

/* One nbdkit server on a unix socket. */
struct srv {
	pid_t pid;
	char sock[128];
	char log[128];
	char uri[320];
};

/*
 * nbd_aio_pwrite interposed (this definition wins over libnbd's for
 * libbd.a in this binary): when refuse_every is set, every refuse_every-th
 * call is refused the way libnbd refuses a command (the free callback
 * runs, the completion callback does not, -1 is returned).
 */
static _Atomic unsigned refuse_every;
static _Atomic unsigned refuse_calls;
static _Atomic unsigned refused;

typedef int64_t (*pwrite_fn)(struct nbd_handle *, const void *, size_t,
			     uint64_t, nbd_completion_callback, uint32_t);
static pwrite_fn real_pwrite; /* libnbd's, set by main() */

int64_t nbd_aio_pwrite(struct nbd_handle *h, const void *buf, size_t count,
		       uint64_t offset, nbd_completion_callback cb,
		       uint32_t flags)
{
	unsigned every = refuse_every;

	if (every != 0 && ++refuse_calls % every == 0) {
		refused++;
		if (cb.free != NULL)
			cb.free(cb.user_data);
		return -1;
	}
	return real_pwrite(h, buf, count, offset, cb, flags);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * Start "nbdkit -f -U SOCK --exit-with-parent ARGS..." (ARGS: filters,
 * plugin and parameters; "LOG" is replaced by logfile=PATH). @query is
 * appended to the URI ("" or "&io_timeout=1"). 0, or -1 if nbdkit did not
 * come up within 5 s.
 */
static int srv_start(struct srv *s, const char *query,
		     const char *const args[])
{
	const char *argv[32];
	char logarg[160];
	unsigned n = 0;
	struct stat st;
	double t0;

	srv_seq++;
	snprintf(s->sock, sizeof(s->sock), "%s/s%u.sock", tmpdir, srv_seq);
	snprintf(s->log, sizeof(s->log), "%s/s%u.log", tmpdir, srv_seq);
	snprintf(logarg, sizeof(logarg), "logfile=%s", s->log);
	snprintf(s->uri, sizeof(s->uri), "nbd+unix:///?socket=%s%s", s->sock,
		 query);
	argv[n++] = "nbdkit";
	argv[n++] = "-f";
	argv[n++] = "-U";
	argv[n++] = s->sock;
	argv[n++] = "--exit-with-parent";
	for (unsigned i = 0; args[i] != NULL && n < 31; i++)
		argv[n++] = strcmp(args[i], "LOG") == 0 ? logarg : args[i];
	argv[n] = NULL;
	s->pid = fork();
	if (s->pid < 0)
		return -1;
	if (s->pid == 0) {
		/* nbdkit's own complaints (a client vanished, ...) are
		 * expected here; keep them out of the test's output. */
		int fd = open("/dev/null", O_WRONLY);

		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		execvp("nbdkit", (char *const *)argv);
		_exit(127);
	}
	t0 = now_s();
	while (stat(s->sock, &st) != 0) {
		if (waitpid(s->pid, NULL, WNOHANG) == s->pid ||
		    now_s() - t0 > 5) {
			s->pid = 0;
			return -1;
		}
		usleep(10000);
	}
	return 0;
}

static void srv_stop(struct srv *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGCONT);
		kill(s->pid, SIGTERM);
		waitpid(s->pid, NULL, 0);
	}
	s->pid = 0;
	unlink(s->sock);
	unlink(s->log);
}

/* Lines of @s's log containing both @a and @b (b may be NULL). */
static unsigned log_count(const struct srv *s, const char *a, const char *b)
{
	char line[512];
	unsigned n = 0;
	FILE *f = fopen(s->log, "r");

	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, a) != NULL &&
		    (b == NULL || strstr(line, b) != NULL))
			n++;
	if (f != NULL)
		fclose(f);
	return n;
}

#define MEM64 ((const char *const[]){ "memory", "size=64M", NULL })

/* Start a 64 MiB memory server and open it; REQUIRE-style on failure. */
static int mem_open(struct srv *s, struct bd_dev **dev)
{
	if (srv_start(s, "", MEM64) != 0)
		return -1;
	if (bd_nbd_open(s->uri, 0, dev) != 0) {
		srv_stop(s);
		return -1;
	}
	return 0;
}

static void test_nbd_roundtrip(void)
{
	struct bd_dev *dev;
	struct srv s;

	REQUIRE(mem_open(&s, &dev) == 0);
	CHECK_EQ(bd_size(dev), 64 * MiB);
	CHECK(strcmp(bd_name(dev), s.uri) == 0);
	CHECK_EQ(bd_readonly(dev), 0);
	roundtrip(dev);
	bad_args(dev);
	bd_close(dev);
	/* The data is on the server: a second connection reads it. */
	REQUIRE(bd_nbd_open(s.uri, BD_RDONLY, &dev) == 0);
	{
		char *rd = bd_buf_alloc(8 * BLK);

		CHECK_EQ(bd_read(dev, rd, 8 * BLK, 0), 0);
		CHECK(check_fill(rd, 8 * BLK, 1));
		free(rd);
	}
	bd_close(dev);
	srv_stop(&s);
}

static void test_nbd_batch(void)
{
	struct bd_dev *dev;
	struct srv s;

	REQUIRE(mem_open(&s, &dev) == 0);
	batch_roundtrip(dev, 1000); /* fresh device: counts its batches */
	bd_close(dev);
	srv_stop(&s);
}

static void test_nbd_async(void)
{
	struct bd_dev *dev;
	struct srv s;

	REQUIRE(mem_open(&s, &dev) == 0);
	async_roundtrip(dev); /* fresh device */
	many_small_async(dev);
	bd_close(dev);
	srv_stop(&s);
}

/* A callback may do synchronous I/O on its device (no self-deadlock),
 * and bd_close() waits for async batches still in flight. */
static void test_nbd_sync_in_callback(void)
{
	struct async_state as = { .caller = pthread_self() };
	char *buf = bd_buf_alloc(66 * BLK);
	struct bd_io ios[66];
	struct bd_dev *dev;
	struct srv s;

	REQUIRE(buf != NULL);
	REQUIRE(mem_open(&s, &dev) == 0);
	pthread_mutex_init(&as.lock, NULL);
	pthread_cond_init(&as.cond, NULL);
	as.dev = dev;
	fill(buf, BLK, 5);
	memset(buf + BLK, 0, BLK);
	ios[0] = (struct bd_io){ .op = BD_WRITE, .len = BLK, .buf = buf,
				 .off = 3 * BLK };
	ios[1] = (struct bd_io){ .op = BD_READ, .len = BLK, .buf = buf + BLK,
				 .off = 3 * BLK };
	as.chain = &ios[1];
	CHECK_EQ(bd_submit_async(dev, ios, 1, sync_in_done, &as), 0);
	async_wait(&as, 1);
	CHECK_EQ(as.bad, 0);
	CHECK(check_fill(buf + BLK, BLK, 5));
	for (unsigned i = 2; i < 66; i++)
		ios[i] = (struct bd_io){ .op = BD_WRITE, .len = BLK,
					 .buf = buf + i * BLK,
					 .off = i * BLK * 7 };
	CHECK_EQ(bd_submit_async(dev, ios + 2, 64, async_done, &as), 0);
	bd_close(dev);
	CHECK_EQ(as.calls, 2);
	CHECK_EQ(as.ios, 65);
	CHECK_EQ(as.bad, 0);
	pthread_cond_destroy(&as.cond);
	pthread_mutex_destroy(&as.lock);
	srv_stop(&s);
	free(buf);
}

static void test_nbd_counters(void)
{
	struct bd_dev *dev;
	struct srv s;

	REQUIRE(mem_open(&s, &dev) == 0);
	counters(dev); /* fresh device */
	bd_close(dev);
	srv_stop(&s);
}

static void test_nbd_threads(void)
{
	struct hammer h[4];
	pthread_t th[4];
	struct bd_stats st;
	struct bd_dev *dev;
	struct srv s;

	REQUIRE(mem_open(&s, &dev) == 0);
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
	srv_stop(&s);
}

struct small_io {
	struct bd_dev *dev;
	unsigned id;
	int errors;
};

/* Single-block reads and writes back to back, each a new command. */
static void *small_io_main(void *arg)
{
	struct small_io *x = arg;
	char *buf = bd_buf_alloc(BLK);

	if (buf == NULL) {
		x->errors++;
		return NULL;
	}
	for (unsigned i = 0; i < 3000; i++) {
		uint64_t off = ((uint64_t)x->id * 64 + i % 64) * BLK;

		if ((i & 1) ? bd_read(x->dev, buf, BLK, off) != 0
			    : bd_write(x->dev, buf, BLK, off, 0) != 0)
			x->errors++;
	}
	free(buf);
	return NULL;
}

/* Many short commands from several threads while the poll thread checks
 * deadlines: none may be taken for timed out (a command issued while the
 * deadline was computed once looked billions of years old). */
static void test_nbd_no_false_timeout(void)
{
	struct small_io x[4];
	pthread_t th[4];
	struct bd_dev *dev;
	struct srv s;

	REQUIRE(srv_start(&s, "&io_timeout=1", MEM64) == 0);
	REQUIRE(bd_nbd_open(s.uri, 0, &dev) == 0);
	for (unsigned i = 0; i < 4; i++) {
		x[i] = (struct small_io){ .dev = dev, .id = i };
		REQUIRE(pthread_create(&th[i], NULL, small_io_main, &x[i]) ==
			0);
	}
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(x[i].errors, 0);
	}
	bd_close(dev);
	srv_stop(&s);
}

/* A command libnbd refuses fails alone (-ENOTCONN), sync or async, the
 * rest of its batch completes, and nothing waits forever. */
static void test_nbd_refused(void)
{
	struct async_state as = { .caller = pthread_self() };
	char *buf = bd_buf_alloc(16 * BLK);
	struct bd_io ios[16];
	struct bd_dev *dev;
	struct bd_stats st;
	struct srv s;

	REQUIRE(buf != NULL);
	REQUIRE(mem_open(&s, &dev) == 0);
	pthread_mutex_init(&as.lock, NULL);
	pthread_cond_init(&as.cond, NULL);
	as.dev = dev;
	for (unsigned i = 0; i < 16; i++)
		ios[i] = (struct bd_io){ .op = BD_WRITE, .len = BLK,
					 .buf = buf + i * BLK,
					 .off = i * BLK };
	refuse_calls = 0;
	refused = 0;
	refuse_every = 4;
	CHECK_EQ(bd_submit(dev, ios, 16), -ENOTCONN);
	for (unsigned i = 0; i < 16; i++)
		CHECK_EQ(ios[i].ret, i % 4 == 3 ? -ENOTCONN : 0);
	CHECK_EQ(bd_submit_async(dev, ios, 16, async_done, &as), 0);
	async_wait(&as, 1);
	CHECK_EQ(as.bad, 4);
	CHECK_EQ(bd_write(dev, buf, BLK, 0, 0), 0);
	CHECK_EQ(bd_write(dev, buf, BLK, 0, 0), 0);
	CHECK_EQ(bd_write(dev, buf, BLK, 0, 0), 0);
	CHECK_EQ(bd_write(dev, buf, BLK, 0, 0), -ENOTCONN);
	refuse_every = 0;
	CHECK_EQ(refused, 9);
	/* the connection itself is fine */
	CHECK_EQ(bd_submit(dev, ios, 16), 0);
	bd_stats_get(dev, &st);
	CHECK_EQ(st.write.errors, 9);
	CHECK_EQ(st.inflight, 0);
	bd_close(dev);
	srv_stop(&s);
	pthread_cond_destroy(&as.cond);
	pthread_mutex_destroy(&as.lock);
	free(buf);
}

/* I/Os larger than the server's advertised maximum are split: the
 * server errors out on anything bigger, yet 1 MiB and 3 MiB + 4 KiB I/Os
 * go through and read back; each request the server saw is <= 64 KiB. */
static void test_nbd_split(void)
{
	static const char *const args[] = {
		"--filter=blocksize-policy", "--filter=log", "memory",
		"size=16M", "blocksize-maximum=64K",
		"blocksize-error-policy=error", "LOG", NULL
	};
	size_t big = 3 * MiB + BLK;
	char *buf = bd_buf_alloc(big), *rd = bd_buf_alloc(big);
	struct bd_io ios[2];
	struct bd_dev *dev;
	struct srv s;

	REQUIRE(buf != NULL && rd != NULL);
	REQUIRE(srv_start(&s, "", args) == 0);
	REQUIRE(bd_nbd_open(s.uri, 0, &dev) == 0);
	fill(buf, big, 42);
	CHECK_EQ(bd_write(dev, buf, MiB, 0, BD_IO_FUA), 0);
	ios[0] = (struct bd_io){ .op = BD_WRITE, .buf = buf, .len = big,
				 .off = 4 * MiB };
	ios[1] = (struct bd_io){ .op = BD_READ, .buf = rd, .len = MiB,
				 .off = 0 };
	CHECK_EQ(bd_submit(dev, ios, 2), 0);
	CHECK(check_fill(rd, MiB, 42));
	CHECK_EQ(bd_read(dev, rd, big, 4 * MiB), 0);
	CHECK(check_fill(rd, big, 42));
	bd_close(dev);
	/* 16 + 48 requests of 64 KiB and one of 4 KiB, nothing else */
	CHECK_EQ(log_count(&s, " Write id=", "count=0x10000 "), 64);
	CHECK_EQ(log_count(&s, " Write id=", "count=0x1000 "), 1);
	CHECK_EQ(log_count(&s, " Write id=", NULL), 65);
	CHECK_EQ(log_count(&s, "EINVAL", NULL), 0);
	srv_stop(&s);
	free(buf);
	free(rd);
}

/* BD_IO_FUA is NBD FUA when the server has it; without it, the batch's
 * writes are followed by a flush before the batch completes. */
static void test_nbd_fua(void)
{
	static const char *const native[] = {
		"--filter=log", "memory", "size=16M", "LOG", NULL
	};
	static const char *const nofua[] = {
		"--filter=log", "--filter=fua", "memory", "size=16M",
		"LOG", NULL /* the fua filter's default: no FUA */
	};
	char *buf = bd_buf_alloc(4 * BLK);
	struct bd_io ios[3];
	struct bd_dev *dev;
	struct srv s;

	REQUIRE(buf != NULL);
	for (int mode = 0; mode < 2; mode++) {
		REQUIRE(srv_start(&s, "", mode == 0 ? native : nofua) == 0);
		REQUIRE(bd_nbd_open(s.uri, 0, &dev) == 0);
		CHECK_EQ(bd_write(dev, buf, BLK, 0, 0), 0);
		CHECK_EQ(bd_write(dev, buf, BLK, BLK, BD_IO_FUA), 0);
		for (unsigned i = 0; i < 3; i++)
			ios[i] = (struct bd_io){ .op = BD_WRITE,
						 .buf = buf + i * BLK,
						 .len = BLK,
						 .off = (4 + i) * BLK };
		ios[2].flags = BD_IO_FUA;
		CHECK_EQ(bd_submit(dev, ios, 3), 0);
		CHECK_EQ(bd_flush(dev), 0);
		bd_close(dev);
		/* log lines of requests: " Write id=N ... fua=F ..." */
		if (mode == 0) {
			CHECK_EQ(log_count(&s, " Connect ", " fua=2 "), 1);
			CHECK_EQ(log_count(&s, " Write id=", " fua=1 "), 2);
			CHECK_EQ(log_count(&s, " Flush id=", NULL), 1);
		} else {
			CHECK_EQ(log_count(&s, " Connect ", " fua=0 "), 1);
			CHECK_EQ(log_count(&s, " Write id=", " fua=1 "), 0);
			/* one per FUA write or batch, one for bd_flush */
			CHECK_EQ(log_count(&s, " Flush id=", NULL), 3);
		}
		CHECK_EQ(log_count(&s, " Write id=", NULL), 5);
		srv_stop(&s);
	}
	free(buf);
}

/* Whether a flush covers other clients' writes (the journal's checkpoint
 * records rely on it: bd_flush_covers_all) follows the server's multi-conn
 * flag: nbdkit's multi-conn filter advertises it (emulate: a flush on one
 * connection flushes them all) or withholds it (disable). */
static void test_nbd_flush_covers_all(void)
{
	static const char *const multi[] = {
		"--filter=multi-conn", "memory", "size=16M",
		"multi-conn-mode=emulate", NULL
	};
	static const char *const single[] = {
		"--filter=multi-conn", "memory", "size=16M",
		"multi-conn-mode=disable", NULL
	};
	struct bd_dev *dev, *fault;
	struct bd_fault *f;
	struct srv s;

	for (int mode = 0; mode < 2; mode++) {
		REQUIRE(srv_start(&s, "", mode == 0 ? multi : single) == 0);
		REQUIRE(bd_nbd_open(s.uri, 0, &dev) == 0);
		CHECK_EQ(bd_flush_covers_all(dev), mode == 0);
		/* a fault wrapper models the device under it */
		REQUIRE(bd_fault_open(dev, &fault, &f) == 0);
		CHECK_EQ(bd_flush_covers_all(fault), mode == 0);
		bd_close(fault);
		srv_stop(&s);
	}
	REQUIRE(bd_ram_open(1 << 20, &dev) == 0);
	CHECK_EQ(bd_flush_covers_all(dev), 1);
	bd_close(dev);
}

/* A server that cannot flush (nor FUA) gets neither: BD_IO_FUA writes
 * are plain writes, bd_flush sends nothing and returns 0. Errors the
 * server reports come back as they are: the "full" plugin fails every
 * write with ENOSPC. */
static void test_nbd_no_flush_and_errors(void)
{
	static const char *const noflush[] = {
		"--filter=log", "eval", "get_size=echo 1048576",
		"pread=dd if=/dev/zero count=$3 iflag=count_bytes 2>/dev/null",
		"pwrite=cat >/dev/null", "LOG", NULL
	};
	static const char *const full[] = { "full", "1M", NULL };
	char *buf = bd_buf_alloc(2 * BLK);
	struct bd_io ios[2];
	struct bd_dev *dev;
	struct srv s;

	REQUIRE(buf != NULL);
	REQUIRE(srv_start(&s, "", noflush) == 0);
	REQUIRE(bd_nbd_open(s.uri, 0, &dev) == 0);
	CHECK_EQ(bd_write(dev, buf, BLK, 0, BD_IO_FUA), 0);
	ios[0] = (struct bd_io){ .op = BD_WRITE, .flags = BD_IO_FUA,
				 .buf = buf, .len = BLK, .off = BLK };
	ios[1] = (struct bd_io){ .op = BD_READ, .buf = buf + BLK,
				 .len = BLK, .off = 0 };
	CHECK_EQ(bd_submit(dev, ios, 2), 0);
	CHECK_EQ(bd_flush(dev), 0);
	bd_close(dev);
	CHECK_EQ(log_count(&s, " Connect ", " flush=0 "), 1);
	CHECK_EQ(log_count(&s, " Write id=", " fua=0 "), 2);
	CHECK_EQ(log_count(&s, " Flush id=", NULL), 0);
	srv_stop(&s);

	REQUIRE(srv_start(&s, "", full) == 0);
	REQUIRE(bd_nbd_open(s.uri, 0, &dev) == 0);
	CHECK_EQ(bd_write(dev, buf, BLK, 0, 0), -ENOSPC);
	CHECK_EQ(bd_submit(dev, ios, 2), -ENOSPC);
	CHECK_EQ(ios[0].ret, -ENOSPC);
	CHECK_EQ(ios[1].ret, 0);
	CHECK_EQ(bd_read(dev, buf, BLK, 0), 0); /* still connected */
	bd_close(dev);
	srv_stop(&s);
	free(buf);
}

/* A read-only export: a writable open is -EROFS; a read-only open reads
 * and refuses writes with -EROFS, as bd_file does. */
static void test_nbd_rdonly(void)
{
	static const char *const args[] = { "-r", "memory", "size=1M", NULL };
	char *buf = bd_buf_alloc(BLK);
	struct bd_dev *dev = NULL;
	struct srv s;

	REQUIRE(buf != NULL);
	REQUIRE(srv_start(&s, "", args) == 0);
	CHECK_EQ(bd_nbd_open(s.uri, 0, &dev), -EROFS);
	REQUIRE(bd_nbd_open(s.uri, BD_RDONLY, &dev) == 0);
	CHECK_EQ(bd_readonly(dev), 1);
	CHECK_EQ(bd_read(dev, buf, BLK, 0), 0);
	CHECK_EQ(bd_write(dev, buf, BLK, 0, 0), -EROFS);
	CHECK_EQ(bd_flush(dev), 0);
	bd_close(dev);
	srv_stop(&s);
	free(buf);
}

static void test_nbd_open_errors(void)
{
	static const char *const odd[] = { "memory", "size=5000", NULL };
	struct bd_dev *dev = NULL;
	char uri[400];
	struct srv s;

	snprintf(uri, sizeof(uri), "nbd+unix:///?socket=%s/none.sock",
		 tmpdir);
	CHECK(bd_nbd_open(uri, 0, &dev) < 0);
	CHECK_EQ(bd_nbd_open(NULL, 0, &dev), -EINVAL);
	CHECK(bd_nbd_open("nbd+unix:///", 0, &dev) < 0); /* no socket= */
	CHECK(bd_nbd_open("http://x/", 0, &dev) < 0);
	REQUIRE(srv_start(&s, "", odd) == 0);
	CHECK_EQ(bd_nbd_open(s.uri, 0, &dev), -EINVAL); /* 5000 bytes */
	srv_stop(&s);
	REQUIRE(srv_start(&s, "", MEM64) == 0);
	CHECK_EQ(bd_nbd_open(s.uri, 0x100, &dev), -EINVAL);
	for (const char *const *q = (const char *const[]){
		     "&io_timeout=0", "&io_timeout=x", "&io_timeout=",
		     "&io_timeout=99999", "&io_timeout=5s", NULL };
	     *q != NULL; q++) {
		snprintf(uri, sizeof(uri), "%s%s", s.uri, *q);
		CHECK_EQ(bd_nbd_open(uri, 0, &dev), -EINVAL);
	}
	/* io_timeout is taken out wherever it is in the query. */
	snprintf(uri, sizeof(uri), "nbd+unix:///?io_timeout=7&socket=%s",
		 s.sock);
	CHECK_EQ(bd_nbd_open(uri, 0, &dev), 0);
	bd_close(dev);
	srv_stop(&s);
}

/* BD_EXCL over NBD: exclusive between the processes of this host (the
 * same URI, whatever its io_timeout), like flock on a file; across hosts
 * only a server admitting one client excludes, and refuses the second. */
static void test_nbd_excl(void)
{
	static const char *const one[] = {
		"--filter=limit", "memory", "size=1M", "limit=1", NULL
	};
	struct bd_dev *a, *b = NULL;
	char uri[400];
	struct srv s;
	int ret = -1;

	REQUIRE(srv_start(&s, "&io_timeout=5", MEM64) == 0);
	REQUIRE(bd_nbd_open(s.uri, BD_EXCL, &a) == 0);
	CHECK_EQ(bd_nbd_open(s.uri, BD_EXCL, &b), -EBUSY);
	CHECK_EQ(bd_nbd_open(s.uri, BD_EXCL | BD_RDONLY, &b), -EBUSY);
	snprintf(uri, sizeof(uri), "nbd+unix:///?socket=%s&io_timeout=9",
		 s.sock);
	CHECK_EQ(bd_open_any(uri, BD_EXCL | BD_BUFFERED, &b), -EBUSY);
	/* Without BD_EXCL, sharing is allowed (a cluster shares devices). */
	CHECK_EQ(bd_nbd_open(s.uri, 0, &b), 0);
	bd_close(b);
	bd_close(a);
	CHECK_EQ(bd_nbd_open(s.uri, BD_EXCL, &b), 0);
	bd_close(b);
	srv_stop(&s);
	REQUIRE(srv_start(&s, "&io_timeout=5", one) == 0);
	REQUIRE(bd_nbd_open(s.uri, 0, &a) == 0);
	CHECK(bd_nbd_open(s.uri, 0, &b) < 0);
	bd_close(a);
	/* The server notices the first client leave soon after. */
	for (int i = 0; i < 100 && ret != 0; i++) {
		ret = bd_nbd_open(s.uri, 0, &b);
		if (ret != 0)
			usleep(20000);
	}
	CHECK_EQ(ret, 0);
	if (ret == 0)
		bd_close(b);
	srv_stop(&s);
}

/* The server is killed: every I/O fails (-ENOTCONN), nothing hangs or
 * crashes, and the device still closes. The failure comes from the
 * closed socket, not from io_timeout (an hour here): a device that
 * waited for the timeout instead would hang until run.sh's timeout. */
static void test_nbd_server_killed(void)
{
	char *buf = bd_buf_alloc(4 * BLK);
	struct bd_dev *dev;
	struct bd_stats st;
	struct srv s;

	REQUIRE(buf != NULL);
	REQUIRE(srv_start(&s, "&io_timeout=3600", MEM64) == 0);
	REQUIRE(bd_nbd_open(s.uri, 0, &dev) == 0);
	CHECK_EQ(bd_write(dev, buf, BLK, 0, 0), 0);
	kill(s.pid, SIGKILL);
	waitpid(s.pid, NULL, 0);
	s.pid = 0;
	CHECK_EQ(bd_read(dev, buf, BLK, 0), -ENOTCONN);
	CHECK_EQ(bd_write(dev, buf, 4 * BLK, 0, BD_IO_FUA), -ENOTCONN);
	CHECK_EQ(bd_flush(dev), -ENOTCONN);
	bd_stats_get(dev, &st);
	CHECK_EQ(st.read.errors, 1);
	CHECK_EQ(st.write.errors, 1);
	CHECK_EQ(st.flush.errors, 1);
	bd_close(dev);
	srv_stop(&s);
	free(buf);
}

/* A device on a fresh server (URI query @query), its server stopped
 * (SIGSTOP, until every thread is), and 4 writes of a block each
 * (x->buf's blocks 4..7, tag 9, to blocks 8..11) ready in x->ios. */
struct stopped {
	struct async_state as;
	char *buf; /* 8 blocks */
	struct bd_io ios[4];
	struct bd_dev *dev;
	struct srv s;
};

static void stopped_open(struct stopped *x, const char *query)
{
	x->as = (struct async_state){.caller = pthread_self()};
	x->buf = bd_buf_alloc(8 * BLK);
	REQUIRE(x->buf != NULL);
	pthread_mutex_init(&x->as.lock, NULL);
	pthread_cond_init(&x->as.cond, NULL);
	REQUIRE(srv_start(&x->s, query, MEM64) == 0);
	REQUIRE(bd_nbd_open(x->s.uri, 0, &x->dev) == 0);
	x->as.dev = x->dev;
	CHECK_EQ(bd_write(x->dev, x->buf, BLK, 0, 0), 0);
	fill(x->buf + 4 * BLK, 4 * BLK, 9);
	kill(x->s.pid, SIGSTOP);
	waitpid(x->s.pid, NULL, WUNTRACED); /* until it has really stopped */
	for (unsigned i = 0; i < 4; i++)
		x->ios[i] = (struct bd_io){.op = BD_WRITE,
					   .len = BLK,
					   .buf = x->buf + (4 + i) * BLK,
					   .off = (8 + i) * BLK};
}

static void stopped_close(struct stopped *x)
{
	bd_close(x->dev);
	pthread_cond_destroy(&x->as.cond);
	pthread_mutex_destroy(&x->as.lock);
	srv_stop(&x->s);
	free(x->buf);
}

/* The server hangs (SIGSTOP): I/O in flight, sync and async, fails once
 * io_timeout (1 s) has passed, not before (a lower bound: load only adds
 * to it; a device that never times out hangs until run.sh's timeout);
 * the connection stays dead, also once the server runs again; close does
 * not hang. */
static void test_nbd_server_hung(void)
{
	struct stopped x;
	double t0;

	stopped_open(&x, "&io_timeout=1");
	t0 = now_s();
	CHECK_EQ(bd_submit_async(x.dev, x.ios, 4, async_done, &x.as), 0);
	CHECK_EQ(bd_read(x.dev, x.buf, 4 * BLK, 0), -ENOTCONN);
	CHECK(now_s() - t0 >= 0.9);
	async_wait(&x.as, 1);
	CHECK_EQ(x.as.bad, 4);
	CHECK_EQ(x.ios[0].ret, -ENOTCONN);
	/* no reconnection: what follows never reaches the server */
	kill(x.s.pid, SIGCONT);
	CHECK_EQ(bd_write(x.dev, x.buf, BLK, 0, 0), -ENOTCONN);
	CHECK_EQ(bd_flush(x.dev), -ENOTCONN);
	CHECK_EQ(bd_read(x.dev, x.buf, BLK, 0), -ENOTCONN);
	stopped_close(&x);
}

/* The server pauses (SIGSTOP) for less than io_timeout: the I/O sent to
 * it waits and completes once it runs again, none is failed for a dead
 * connection, and the device goes on working. */
static void test_nbd_server_paused(void)
{
	struct stopped x;

	stopped_open(&x, "&io_timeout=60");
	CHECK_EQ(bd_submit_async(x.dev, x.ios, 4, async_done, &x.as), 0);
	usleep(300000); /* (not a check: the writes wait at the server) */
	kill(x.s.pid, SIGCONT);
	async_wait(&x.as, 1);
	CHECK_EQ(x.as.bad, 0);
	CHECK_EQ(bd_read(x.dev, x.buf, 4 * BLK, 8 * BLK), 0);
	CHECK(check_fill(x.buf, 4 * BLK, 9));
	CHECK_EQ(bd_flush(x.dev), 0);
	stopped_close(&x);
}

/* The write gate (bd_set_gate) closes while writes wait unsent in libnbd
 * (the server stopped, the socket full), as when a node frozen past its
 * disk lease resumes: the poll thread kills the connection before libnbd
 * sends them, so those writes fail and the server never gets them; what
 * was in the socket already may land (it cannot be called back). */
static _Atomic int gate_closed;

static int gate_fn(void *arg)
{
	(void)arg;
	return gate_closed ? -EIO : 0;
}

static void test_nbd_gate_unsent(void)
{
	static const char *const mem[] = {"--filter=log", "memory", "size=64M",
					  "LOG", NULL};
	enum { NW = 16, WLEN = 2 * MiB };
	struct async_state as = {.caller = pthread_self()};
	char *buf = bd_buf_alloc((size_t)NW * WLEN);
	struct bd_io ios[NW];
	struct bd_dev *dev;
	struct srv s;
	unsigned got;

	REQUIRE(buf != NULL);
	pthread_mutex_init(&as.lock, NULL);
	pthread_cond_init(&as.cond, NULL);
	REQUIRE(srv_start(&s, "&io_timeout=60", mem) == 0);
	REQUIRE(bd_nbd_open(s.uri, 0, &dev) == 0);
	bd_set_gate(dev, gate_fn, NULL);
	gate_closed = 0;
	fill(buf, (size_t)NW * WLEN, 17);
	kill(s.pid, SIGSTOP);
	waitpid(s.pid, NULL, WUNTRACED);
	for (unsigned i = 0; i < NW; i++)
		ios[i] = (struct bd_io){.op = BD_WRITE,
					.len = WLEN,
					.buf = buf + (size_t)i * WLEN,
					.off = (uint64_t)i * WLEN};
	CHECK_EQ(bd_submit_async(dev, ios, NW, async_done, &as), 0);
	usleep(300000);	 /* (not a check: the socket fills meanwhile) */
	gate_closed = 1; /* the lease ran out while the writes waited */
	kill(s.pid, SIGCONT);
	async_wait(&as, 1);
	CHECK(as.bad > 0);
	CHECK_EQ(ios[NW - 1].ret, -ENOTCONN);
	bd_close(dev);
	got = log_count(&s, " Write id=", NULL);
	CHECK(got < NW);
	printf("  gate closed with %u writes of 2 MiB unsent at a stopped "
	       "server: the server got %u\n",
	       (unsigned)NW, got);
	srv_stop(&s);
	pthread_cond_destroy(&as.cond);
	pthread_mutex_destroy(&as.lock);
	free(buf);
}

/* Start "nbd-server -C @conf -d" (foreground, one client) and wait for
 * @sock. Its PID, or -1. */
static pid_t ns_start(const char *conf, const char *sock)
{
	struct stat st;
	double t0;
	pid_t pid;
	int fd;

	unlink(sock);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		fd = open("/dev/null", O_WRONLY);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		execlp("nbd-server", "nbd-server", "-C", conf, "-d",
		       (char *)NULL);
		_exit(127);
	}
	t0 = now_s();
	while (stat(sock, &st) != 0) {
		if (now_s() - t0 > 5 || waitpid(pid, NULL, WNOHANG) == pid) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			return -1;
		}
		usleep(10000);
	}
	return pid;
}

/* nbd-server creates its socket before it listens: a connect in between
 * is refused. Open @uri, retrying a refusal for up to 5 s. */
static int ns_open(const char *uri, struct bd_dev **dev)
{
	double t0 = now_s();
	int ret;

	while ((ret = bd_nbd_open(uri, 0, dev)) == -ECONNREFUSED &&
	       now_s() - t0 < 5)
		usleep(10000);
	return ret;
}

/* SIGTERM, and SIGKILL after 5 s: a -d server still waiting for its
 * one client (an open that failed) does not leave on SIGTERM. */
static void ns_stop(pid_t pid)
{
	double t0 = now_s();

	kill(pid, SIGTERM);
	while (waitpid(pid, NULL, WNOHANG) != pid) {
		if (now_s() - t0 > 5) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			return;
		}
		usleep(10000);
	}
}

/* nbd-server (the other server DESIGN.md names) on a unix socket, one
 * client per server run (-d): the conformance round trip, argument
 * errors, batches with FUA. */
static void test_nbd_server_interop(void)
{
	char conf[128], img[128], sock[128], uri[400];
	struct bd_dev *dev;
	FILE *f;
	pid_t pid;
	int fd;

	if (system("command -v nbd-server >/dev/null 2>&1") != 0) {
		printf("SKIP test_nbd_server_interop: no nbd-server "
		       "(make deps)\n");
		return;
	}
	snprintf(conf, sizeof(conf), "%s/ns.conf", tmpdir);
	snprintf(img, sizeof(img), "%s/ns.img", tmpdir);
	snprintf(sock, sizeof(sock), "%s/ns.sock", tmpdir);
	snprintf(uri, sizeof(uri), "nbd+unix:///exp?socket=%s&io_timeout=10",
		 sock);
	fd = open(img, O_CREAT | O_RDWR | O_TRUNC, 0600);
	REQUIRE(fd >= 0 && ftruncate(fd, 16 * (off_t)MiB) == 0);
	close(fd);
	f = fopen(conf, "w");
	REQUIRE(f != NULL);
	fprintf(f, "[generic]\n\tunixsock = %s\n[exp]\n\texportname = %s\n"
		"\tflush = true\n\tfua = true\n", sock, img);
	fclose(f);
	pid = ns_start(conf, sock);
	REQUIRE(pid > 0);
	CHECK_EQ(ns_open(uri, &dev), 0);
	if (t_case_failed == 0) {
		CHECK_EQ(bd_size(dev), 16 * MiB);
		roundtrip(dev);
		bad_args(dev);
		bd_close(dev);
	}
	ns_stop(pid);
	pid = ns_start(conf, sock); /* a fresh device: counted batches */
	REQUIRE(pid > 0);
	CHECK_EQ(ns_open(uri, &dev), 0);
	if (t_case_failed == 0) {
		batch_roundtrip(dev, 300);
		bd_close(dev);
	}
	ns_stop(pid);
	unlink(sock);
	unlink(conf);
	unlink(img);
}

/* bd_open_any: NBD URIs to bd_nbd_open, everything else to bd_file_open. */
static void test_open_any(void)
{
	char path[128];
	struct bd_dev *dev;
	struct srv s;
	int fd;

	CHECK(bd_spec_is_nbd("nbd://host/x"));
	CHECK(bd_spec_is_nbd("nbd+unix:///?socket=/s"));
	CHECK(bd_spec_is_nbd("nbds://h"));
	CHECK(!bd_spec_is_nbd("/dev/sda"));
	CHECK(!bd_spec_is_nbd("nbd.img"));
	CHECK(!bd_spec_is_nbd("./nbd://x"));
	CHECK_EQ(bd_open_any(NULL, 0, &dev), -EINVAL);
	snprintf(path, sizeof(path), "%s/any.img", tmpdir);
	fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
	REQUIRE(fd >= 0 && ftruncate(fd, (off_t)MiB) == 0);
	close(fd);
	REQUIRE(bd_open_any(path, 0, &dev) == 0);
	CHECK_EQ(bd_size(dev), MiB);
	bd_close(dev);
	unlink(path);
	REQUIRE(srv_start(&s, "", MEM64) == 0);
	REQUIRE(bd_open_any(s.uri, BD_RDONLY, &dev) == 0);
	CHECK_EQ(bd_size(dev), 64 * MiB);
	CHECK_EQ(bd_readonly(dev), 1);
	bd_close(dev);
	srv_stop(&s);
}

struct lat_job {
	struct bd_dev *dev;
	enum bd_op op;
	unsigned n;
	uint64_t seed;
	int ret;
};

/* @n 4 KiB I/Os of @op at random aligned offsets, one at a time. */
static void *lat_main(void *arg)
{
	struct lat_job *j = arg;
	char *buf = bd_buf_alloc(BLK);
	uint64_t blocks = bd_size(j->dev) / BLK, x = j->seed | 1;

	j->ret = buf == NULL ? -ENOMEM : 0;
	for (unsigned i = 0; i < j->n && j->ret == 0; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		j->ret = j->op == BD_READ
				 ? bd_read(j->dev, buf, BLK, x % blocks * BLK)
				 : bd_write(j->dev, buf, BLK, x % blocks * BLK,
					    0);
	}
	free(buf);
	return NULL;
}

/* By hand: IOPS and mean latency of 4 KiB random sync I/O, from 1 and 8
 * threads. */
static int latency(const char *spec)
{
	static const unsigned nthr[] = { 1, 8 };
	struct lat_job j[8];
	pthread_t th[8];
	struct bd_dev *dev;
	int ret;

	ret = bd_open_any(spec, 0, &dev);
	if (ret != 0) {
		fprintf(stderr, "%s: %s\n", spec, strerror(-ret));
		return 1;
	}
	for (int op = 0; op < 2; op++)
		for (unsigned k = 0; k < 2; k++) {
			unsigned t = nthr[k], per = 20000 / t;
			double t0 = now_s(), s;

			for (unsigned i = 0; i < t; i++) {
				j[i] = (struct lat_job){
					.dev = dev, .n = per, .seed = i + 1,
					.op = op ? BD_WRITE : BD_READ };
				pthread_create(&th[i], NULL, lat_main, &j[i]);
			}
			for (unsigned i = 0; i < t; i++) {
				pthread_join(th[i], NULL);
				ret = ret ? ret : j[i].ret;
			}
			s = now_s() - t0;
			printf("4k rand %-5s %u thr: %8.0f IOPS, %6.1f us "
			       "mean, ret %d\n", op ? "write" : "read", t,
			       per * t / s, s * 1e6 / per, ret);
		}
	bd_close(dev);
	return ret != 0;
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
	rmdir(tmpdir);
}

static int have_nbdkit(void)
{
	return system("nbdkit --version >/dev/null 2>&1") == 0;
}

int main(int argc, char **argv)
{
	real_pwrite = (pwrite_fn)dlsym(RTLD_NEXT, "nbd_aio_pwrite");
	if (real_pwrite == NULL) {
		fprintf(stderr, "no nbd_aio_pwrite in libnbd\n");
		return 2;
	}
	if (argc >= 3 && strcmp(argv[1], "--tput") == 0)
		return throughput(argv[2], argc > 3 ? (unsigned)atoi(argv[3])
						    : 256);
	if (argc >= 3 && strcmp(argv[1], "--lat") == 0)
		return latency(argv[2]);
	t_init(argc, argv);
	if (!have_nbdkit()) {
		printf("SKIP test_bd_nbd: nbdkit not installed (make deps)\n");
		return 0;
	}
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_bd_nbd.XXXXXX");
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 2;
	}
	T_RUN(test_nbd_roundtrip);
	T_RUN(test_nbd_batch);
	T_RUN(test_nbd_async);
	T_RUN(test_nbd_sync_in_callback);
	T_RUN(test_nbd_counters);
	T_RUN(test_nbd_threads);
	T_RUN(test_nbd_no_false_timeout);
	T_RUN(test_nbd_refused);
	T_RUN(test_nbd_split);
	T_RUN(test_nbd_fua);
	T_RUN(test_nbd_flush_covers_all);
	T_RUN(test_nbd_no_flush_and_errors);
	T_RUN(test_nbd_rdonly);
	T_RUN(test_nbd_open_errors);
	T_RUN(test_nbd_excl);
	T_RUN(test_nbd_server_killed);
	T_RUN(test_nbd_server_hung);
	T_RUN(test_nbd_server_paused);
	T_RUN(test_nbd_gate_unsent);
	T_RUN(test_nbd_server_interop);
	T_RUN(test_open_any);
	rm_scratch();
	return t_done();
}
