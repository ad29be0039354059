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
 * Invariants: nothing here caches or skips work: every pass does the system
 * calls it times; a failed system call stops the run with a message and a
 * non-zero exit, never a made-up figure.
 */
#include <errno.h>
#include <fcntl.h>
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
			"       ucfs-bench-ops db [-n N] DIR\n");
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
	usage();
	return 2;
}
