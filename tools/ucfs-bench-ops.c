/*
 * ucfs-bench-ops — small timed workloads for ucfs-bench (tools/BENCH.md).
 *
 * Sub-commands, each printing one result line per measurement in the shape
 * of the field report it reproduces, so the same awk parser reads the
 * original posts and our runs:
 *
 *   time [-o FILE] CMD [ARG...]
 *	Run CMD, wait for it and print "real=S user=S sys=S status=N"
 *	(seconds, from wait4's rusage) to FILE or stderr. Exits with CMD's
 *	status (128+signal if it was killed), so failures are not hidden.
 *
 *   fileben -0|-1 [-p N] [-s KB] [-b KB] -f FILE
 *	The "fileben" of seeds/003: write (-0) or read (-1) a FILE of
 *	KB kibibytes (default 128) N times (default 10), in -b KB records
 *	(default the whole file), one line per pass and a total line:
 *	"total:128.000K Time:0.448 Rate:285714KB" (Time in ms, Rate in KB/s).
 *
 *   db [-n N] DIR
 *	The "db" of seeds/003: N (default 100) mkdir, rmdir, mkdir, rename
 *	of sub-directories of DIR, one line per phase:
 *	"total:100, rate:2410.7 dir/sec (mkdir)".
 *
 *   append -i NODE [-s BYTES] [-c N] [-t SECONDS] [-n] FILE
 *	Append records of BYTES (4096) to FILE, opened O_APPEND, each one
 *	write(2) followed by fsync (not with -n), until N records or
 *	SECONDS have passed; a record carries (NODE, its number) and a
 *	pattern of both in every byte. Prints "records=N seconds=S
 *	rate=R fsync=1". Several writers (on several nodes) on one file.
 *
 *   appendcheck [-s BYTES] FILE NODE[:COUNT]...
 *	Read FILE back: every record whole, of a listed writer, each
 *	writer's records numbered 0, 1, ... in file order (nothing lost,
 *	nothing twice, nothing overwritten) and COUNT of them when given.
 *	Prints "writer=NODE records=N" lines and "OK bytes=B", or the
 *	first problem and "BAD bytes=B" (exit 1).
 *
 * Invariants: nothing here caches or skips work: every pass does the system
 * calls it times; a failed system call stops the run with a message and a
 * non-zero exit, never a made-up figure.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double tv_s(const struct timeval *tv)
{
	return tv->tv_sec + tv->tv_usec / 1e6;
}

static void usage(void)
{
	fprintf(stderr, "usage: ucfs-bench-ops time [-o FILE] CMD [ARG...]\n"
			"       ucfs-bench-ops fileben -0|-1 [-p N] [-s KB] "
			"[-b KB] -f FILE\n"
			"       ucfs-bench-ops db [-n N] DIR\n"
			"       ucfs-bench-ops append -i NODE [-s BYTES] "
			"[-c N] [-t SECONDS] [-n] FILE\n"
			"       ucfs-bench-ops appendcheck [-s BYTES] FILE "
			"NODE[:COUNT]...\n");
}

/* Parse a positive decimal; 0 or -EINVAL. */
static int parse_pos(const char *s, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v <= 0)
		return -EINVAL;
	*out = v;
	return 0;
}

static int cmd_time(int argc, char **argv)
{
	struct rusage ru;
	FILE *out = stderr;
	double t0, real;
	int status, code;
	pid_t pid;

	if (argc >= 3 && strcmp(argv[1], "-o") == 0) {
		out = fopen(argv[2], "w");
		if (out == NULL) {
			perror(argv[2]);
			return 2;
		}
		argc -= 2;
		argv += 2;
	}
	if (argc < 2) {
		usage();
		return 2;
	}
	t0 = now_s();
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 2;
	}
	if (pid == 0) {
		execvp(argv[1], argv + 1);
		fprintf(stderr, "%s: %s\n", argv[1], strerror(errno));
		_exit(127);
	}
	if (wait4(pid, &status, 0, &ru) < 0) {
		perror("wait4");
		return 2;
	}
	real = now_s() - t0;
	code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	fprintf(out, "real=%.6f user=%.6f sys=%.6f status=%d\n", real,
		tv_s(&ru.ru_utime), tv_s(&ru.ru_stime), code);
	if (out != stderr)
		fclose(out);
	return code;
}

/* One fileben pass: write or read the whole file; 0 or -errno. */
static int fileben_pass(const char *path, int writing, char *buf, size_t size,
			size_t rec)
{
	size_t done = 0;
	int fd, ret = 0;

	fd = writing ? open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)
		     : open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	while (done < size) {
		size_t n = size - done < rec ? size - done : rec;
		ssize_t r = writing ? write(fd, buf, n) : read(fd, buf, n);

		if (r < 0) {
			ret = -errno;
			break;
		}
		if (r == 0) {
			ret = -ENODATA; /* file shorter than asked */
			break;
		}
		done += (size_t)r;
	}
	if (close(fd) < 0 && ret == 0)
		ret = -errno;
	return ret;
}

static void fileben_line(double kb, double secs)
{
	double ms = secs * 1e3;

	printf("total:%.3fK Time:%.3f Rate:%.0fKB\n", kb, ms,
	       secs > 0 ? kb / secs : 0.0);
}

static int cmd_fileben(int argc, char **argv)
{
	long passes = 10, kb = 128, reckb = 0;
	const char *path = NULL;
	int writing = -1, opt, ret, i;
	double total = 0;
	struct stat st;
	char *buf;

	while ((opt = getopt(argc, argv, "01ap:s:b:f:")) != -1) {
		switch (opt) {
		case '0':
			writing = 1;
			break;
		case '1':
			writing = 0;
			break;
		case 'a':
			break; /* accepted, as the original's */
		case 'p':
			if (parse_pos(optarg, &passes))
				goto bad;
			break;
		case 's':
			if (parse_pos(optarg, &kb))
				goto bad;
			break;
		case 'b':
			if (parse_pos(optarg, &reckb))
				goto bad;
			break;
		case 'f':
			path = optarg;
			break;
		default:
			goto bad;
		}
	}
	if (writing < 0 || path == NULL)
		goto bad;
	if (reckb == 0 || reckb > kb)
		reckb = kb;
	buf = malloc((size_t)reckb * 1024);
	if (buf == NULL)
		return 2;
	memset(buf, 'u', (size_t)reckb * 1024);
	if (writing && stat(path, &st) < 0)
		printf("create file %s of size %ldK successfully\n", path, kb);
	for (i = 0; i < passes; i++) {
		double t0 = now_s(), dt;

		ret = fileben_pass(path, writing, buf, (size_t)kb * 1024,
				   (size_t)reckb * 1024);
		if (ret < 0) {
			fprintf(stderr, "fileben: %s: %s\n", path,
				strerror(-ret));
			free(buf);
			return 1;
		}
		dt = now_s() - t0;
		total += dt;
		fileben_line((double)kb, dt);
	}
	fileben_line((double)kb * passes, total);
	free(buf);
	return 0;
bad:
	usage();
	return 2;
}

static void db_name(char *out, size_t len, const char *dir, const char *p,
		    long i)
{
	snprintf(out, len, "%s/%s%ld", dir, p, i);
}

/* One db phase over n entries; 0 or -errno with the failed path printed. */
static int db_phase(const char *dir, const char *op, long n)
{
	char a[4096], b[4096];
	double t0 = now_s(), dt;
	long i;
	int r;

	for (i = 0; i < n; i++) {
		if (strcmp(op, "mvdir") == 0) {
			db_name(a, sizeof(a), dir, "d", i);
			db_name(b, sizeof(b), dir, "m", i);
			r = rename(a, b);
		} else {
			db_name(a, sizeof(a), dir, "d", i);
			r = op[0] == 'm' ? mkdir(a, 0755) : rmdir(a);
		}
		if (r < 0) {
			r = -errno;
			fprintf(stderr, "db: %s %s: %s\n", op, a, strerror(-r));
			return r;
		}
	}
	dt = now_s() - t0;
	printf("total:%ld, rate:%.1f dir/sec (%s)\n", n, dt > 0 ? n / dt : 0.0,
	       op);
	return 0;
}

static int cmd_db(int argc, char **argv)
{
	static const char *const ops[] = {"mkdir", "rmdir", "mkdir", "mvdir"};
	char path[4096];
	long n = 100, i;
	unsigned int k;
	int opt;

	while ((opt = getopt(argc, argv, "n:")) != -1) {
		if (opt != 'n' || parse_pos(optarg, &n))
			goto bad;
	}
	if (optind != argc - 1)
		goto bad;
	for (k = 0; k < sizeof(ops) / sizeof(ops[0]); k++)
		if (db_phase(argv[optind], ops[k], n) < 0)
			return 1;
	for (i = 0; i < n; i++) { /* leave DIR as we found it */
		db_name(path, sizeof(path), argv[optind], "m", i);
		rmdir(path);
	}
	return 0;
bad:
	usage();
	return 2;
}

/* ---- append: O_APPEND records from several writers (nodes) ------------ */

#define APP_MAGIC "UCFSAPND"
#define APP_HDR 24 /* magic, node (u32), size (u32), seq (u64) */

/* The byte at @i (>= APP_HDR) of record @seq of @node: every byte of a
 * record depends on who wrote it and its number, so a record partly
 * overwritten by another, or torn, does not check. */
static unsigned char app_byte(unsigned node, uint64_t seq, size_t i)
{
	uint64_t x = (seq + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)node << 48;

	x ^= (uint64_t)i * 0xbf58476d1ce4e5b9ull;
	return (unsigned char)(x >> 56 ^ x >> 24 ^ x);
}

static void app_fill(char *rec, size_t size, unsigned node, uint64_t seq)
{
	uint32_t n32 = node, s32 = (uint32_t)size;

	memcpy(rec, APP_MAGIC, 8);
	memcpy(rec + 8, &n32, 4);
	memcpy(rec + 12, &s32, 4);
	memcpy(rec + 16, &seq, 8);
	for (size_t i = APP_HDR; i < size; i++)
		rec[i] = (char)app_byte(node, seq, i);
}

/* 0 and the record's node and number, or -1 if @rec is not one whole
 * record of @size bytes. */
static int app_parse(const char *rec, size_t size, unsigned *node,
		     uint64_t *seq)
{
	uint32_t n32, s32;

	if (memcmp(rec, APP_MAGIC, 8) != 0)
		return -1;
	memcpy(&n32, rec + 8, 4);
	memcpy(&s32, rec + 12, 4);
	memcpy(seq, rec + 16, 8);
	if (s32 != size)
		return -1;
	for (size_t i = APP_HDR; i < size; i++)
		if ((unsigned char)rec[i] != app_byte(n32, *seq, i))
			return -1;
	*node = n32;
	return 0;
}

/* write(2) of one whole record: a short write is an error here (the
 * record would be torn for every reader). */
static int app_write(int fd, const char *rec, size_t size)
{
	ssize_t r;

	do
		r = write(fd, rec, size);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	return (size_t)r == size ? 0 : -EIO;
}

static int app_parse_size(const char *s, long *size)
{
	if (parse_pos(s, size) || *size < APP_HDR + 8 || *size > 1 << 24)
		return -EINVAL;
	return 0;
}

/* Run until @count records (0: no limit) or @secs seconds (0: no limit)
 * are done; prints "records=N seconds=S rate=R". */
static int app_run(int fd, unsigned node, size_t size, long count, long secs,
		   int sync)
{
	char *rec = malloc(size);
	double t0 = now_s(), end = t0 + (double)secs, dt;
	uint64_t seq = 0;
	int ret = 0;

	if (rec == NULL)
		return -ENOMEM;
	while ((count == 0 || seq < (uint64_t)count) &&
	       (secs == 0 || now_s() < end)) {
		app_fill(rec, size, node, seq);
		ret = app_write(fd, rec, size);
		if (ret == 0 && sync && fsync(fd) < 0)
			ret = -errno;
		if (ret < 0)
			break;
		seq++;
	}
	dt = now_s() - t0;
	printf("records=%llu seconds=%.6f rate=%.1f fsync=%d\n",
	       (unsigned long long)seq, dt, dt > 0 ? (double)seq / dt : 0.0,
	       sync);
	free(rec);
	return ret;
}

static int cmd_append(int argc, char **argv)
{
	long size = 4096, count = 0, secs = 0, node = -1;
	int opt, sync = 1, fd, ret;

	while ((opt = getopt(argc, argv, "i:s:c:t:n")) != -1) {
		switch (opt) {
		case 'i':
			if (parse_pos(optarg, &node))
				goto bad;
			break;
		case 's':
			if (app_parse_size(optarg, &size))
				goto bad;
			break;
		case 'c':
			if (parse_pos(optarg, &count))
				goto bad;
			break;
		case 't':
			if (parse_pos(optarg, &secs))
				goto bad;
			break;
		case 'n':
			sync = 0;
			break;
		default:
			goto bad;
		}
	}
	if (node < 0 || optind != argc - 1 || (count == 0 && secs == 0))
		goto bad;
	fd = open(argv[optind], O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd < 0) {
		perror(argv[optind]);
		return 1;
	}
	ret = app_run(fd, (unsigned)node, (size_t)size, count, secs, sync);
	if (close(fd) < 0 && ret == 0)
		ret = -errno;
	if (ret < 0) {
		fprintf(stderr, "append: %s: %s\n", argv[optind],
			strerror(-ret));
		return 1;
	}
	return 0;
bad:
	usage();
	return 2;
}

#define APP_MAX_WRITERS 16

struct app_writer {
	unsigned node;
	long want;     /* records it wrote (-1: whatever is there) */
	uint64_t next; /* the number its next record must carry */
};

static struct app_writer *app_find(struct app_writer *w, int n, unsigned node)
{
	for (int i = 0; i < n; i++)
		if (w[i].node == node)
			return &w[i];
	return NULL;
}

/* One record at @off: a writer's next one, or a message. */
static int app_check_one(const char *rec, size_t size, off_t off,
			 struct app_writer *w, int nw)
{
	struct app_writer *x;
	unsigned node;
	uint64_t seq;

	if (app_parse(rec, size, &node, &seq) < 0) {
		printf("offset %lld: not one whole record (torn or "
		       "overwritten)\n",
		       (long long)off);
		return -1;
	}
	x = app_find(w, nw, node);
	if (x == NULL) {
		printf("offset %lld: record of unknown writer %u\n",
		       (long long)off, node);
		return -1;
	}
	if (seq != x->next) {
		printf("offset %lld: writer %u record %llu, expected %llu "
		       "(%s)\n",
		       (long long)off, node, (unsigned long long)seq,
		       (unsigned long long)x->next,
		       seq < x->next ? "twice" : "lost or out of order");
		return -1;
	}
	x->next++;
	return 0;
}

/* Read @fd to its end; 0 when every record checks and every writer's
 * count is complete, 1 with the first problem printed, -errno. */
static int app_check(int fd, size_t size, struct app_writer *w, int nw)
{
	char *rec = malloc(size);
	off_t off = 0;
	int bad = 0;

	if (rec == NULL)
		return -ENOMEM;
	for (;;) {
		ssize_t r = pread(fd, rec, size, off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(rec);
			return -errno;
		}
		if (r == 0)
			break;
		if ((size_t)r < size) {
			printf("offset %lld: %zd bytes at the end, not a "
			       "whole record\n",
			       (long long)off, r);
			bad = 1;
			break;
		}
		if (app_check_one(rec, size, off, w, nw) < 0) {
			bad = 1;
			break;
		}
		off += (off_t)size;
	}
	free(rec);
	for (int i = 0; i < nw && !bad; i++) {
		if (w[i].want >= 0 && w[i].next != (uint64_t)w[i].want) {
			printf("writer %u: %llu records, it wrote %ld\n",
			       w[i].node, (unsigned long long)w[i].next,
			       w[i].want);
			bad = 1;
		}
	}
	for (int i = 0; i < nw; i++)
		printf("writer=%u records=%llu\n", w[i].node,
		       (unsigned long long)w[i].next);
	printf("%s bytes=%lld\n", bad ? "BAD" : "OK", (long long)off);
	return bad;
}

/* NODE[:COUNT] */
static int app_parse_writer(const char *s, struct app_writer *w)
{
	char buf[64], *colon;
	long v;

	snprintf(buf, sizeof(buf), "%s", s);
	colon = strchr(buf, ':');
	w->want = -1;
	if (colon != NULL) {
		*colon = '\0';
		if (strcmp(colon + 1, "0") == 0)
			w->want = 0;
		else if (parse_pos(colon + 1, &w->want))
			return -EINVAL;
	}
	if (parse_pos(buf, &v) || v > 0xffffffffl)
		return -EINVAL;
	w->node = (unsigned)v;
	w->next = 0;
	return 0;
}

static int cmd_appendcheck(int argc, char **argv)
{
	struct app_writer w[APP_MAX_WRITERS];
	long size = 4096;
	int opt, nw = 0, fd, ret;

	while ((opt = getopt(argc, argv, "s:")) != -1) {
		if (opt != 's' || app_parse_size(optarg, &size))
			goto bad;
	}
	if (argc - optind < 2 || argc - optind - 1 > APP_MAX_WRITERS)
		goto bad;
	for (int i = optind + 1; i < argc; i++) {
		if (app_parse_writer(argv[i], &w[nw]) < 0 ||
		    app_find(w, nw, w[nw].node) != NULL)
			goto bad;
		nw++;
	}
	fd = open(argv[optind], O_RDONLY);
	if (fd < 0) {
		perror(argv[optind]);
		return 2;
	}
	ret = app_check(fd, (size_t)size, w, nw);
	close(fd);
	if (ret < 0) {
		fprintf(stderr, "appendcheck: %s: %s\n", argv[optind],
			strerror(-ret));
		return 2;
	}
	return ret;
bad:
	usage();
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage();
		return 2;
	}
	if (strcmp(argv[1], "time") == 0)
		return cmd_time(argc - 1, argv + 1);
	if (strcmp(argv[1], "fileben") == 0)
		return cmd_fileben(argc - 1, argv + 1);
	if (strcmp(argv[1], "db") == 0)
		return cmd_db(argc - 1, argv + 1);
	if (strcmp(argv[1], "append") == 0)
		return cmd_append(argc - 1, argv + 1);
	if (strcmp(argv[1], "appendcheck") == 0)
		return cmd_appendcheck(argc - 1, argv + 1);
	usage();
	return 2;
}
