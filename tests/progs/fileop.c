/*
 * fileop — run one file-data system call and print its outcome, for
 * shell tests that must check results and errnos exactly.
 *
 * Usage: fileop OP ARGS...   prints the result or the errno name
 *   seek_data PATH OFF | seek_hole PATH OFF     the offset lseek returns
 *   fallocate PATH MODE OFF LEN                  "OK"; MODE is a
 *       '+'-joined list of keep, punch, zero, collapse, insert, unshare
 *       (or "0")
 *   copy_range SRC OFF_IN DST OFF_OUT LEN        bytes copy_file_range
 *       copied, looping until LEN or a short count of 0
 *   clone SRC DST                                "OK" (ioctl FICLONE)
 *   clone_range SRC OFF_IN DST OFF_OUT LEN       "OK" (FICLONERANGE)
 * Exit status: 0 if the call was made (whatever its result), 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "tests/progs/prog.h"

static int parse_mode(const char *s)
{
	static const struct {
		const char *n;
		int m;
	} t[] = {
	    {"keep", FALLOC_FL_KEEP_SIZE},
	    {"punch", FALLOC_FL_PUNCH_HOLE},
	    {"zero", FALLOC_FL_ZERO_RANGE},
	    {"collapse", FALLOC_FL_COLLAPSE_RANGE},
	    {"insert", FALLOC_FL_INSERT_RANGE},
	    {"unshare", FALLOC_FL_UNSHARE_RANGE},
	};
	int mode = 0;

	while (*s != '\0' && strcmp(s, "0") != 0) {
		size_t n = strcspn(s, "+");
		size_t i;

		for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
			if (strlen(t[i].n) == n && strncmp(t[i].n, s, n) == 0)
				break;
		if (i == sizeof(t) / sizeof(t[0]))
			return -1;
		mode |= t[i].m;
		s += n + (s[n] == '+');
	}
	return mode;
}

static int do_seek(const char *path, const char *off, int whence)
{
	int fd = open(path, O_RDONLY);
	off_t r;

	if (fd < 0)
		return errno;
	r = lseek(fd, strtoll(off, NULL, 0), whence);
	if (r < 0) {
		close(fd);
		return errno;
	}
	printf("%lld\n", (long long)r);
	close(fd);
	return -2; /* printed */
}

static int do_fallocate(char **a)
{
	int mode = parse_mode(a[3]), fd, r;

	if (mode < 0)
		return -1;
	fd = open(a[2], O_RDWR);
	if (fd < 0)
		return errno;
	r = fallocate(fd, mode, strtoll(a[4], NULL, 0),
		      strtoll(a[5], NULL, 0)) == 0
		? 0
		: errno;
	close(fd);
	return r;
}

static int do_copy(char **a)
{
	int in = open(a[2], O_RDONLY),
	    out = open(a[4], O_WRONLY | O_CREAT, 0644);
	loff_t oi = strtoll(a[3], NULL, 0), oo = strtoll(a[5], NULL, 0);
	long long len = strtoll(a[6], NULL, 0), done = 0;
	int r = 0;

	if (in < 0 || out < 0) {
		r = errno;
		goto out;
	}
	while (done < len) {
		ssize_t n =
		    copy_file_range(in, &oi, out, &oo, (size_t)(len - done), 0);

		if (n < 0) {
			r = errno;
			goto out;
		}
		if (n == 0)
			break;
		done += n;
	}
	printf("%lld\n", done);
	r = -2;
out:
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return r;
}

static int do_clone(int argc, char **a)
{
	int in = open(a[2], O_RDONLY), r = 0, out;

	out = open(argc == 4 ? a[3] : a[4], O_WRONLY | O_CREAT, 0644);
	if (in < 0 || out < 0) {
		r = errno;
	} else if (argc == 4) {
		r = ioctl(out, FICLONE, in) == 0 ? 0 : errno;
	} else {
		struct file_clone_range cr = {
		    .src_fd = in,
		    .src_offset = (uint64_t)strtoll(a[3], NULL, 0),
		    .src_length = (uint64_t)strtoll(a[6], NULL, 0),
		    .dest_offset = (uint64_t)strtoll(a[5], NULL, 0),
		};

		r = ioctl(out, FICLONERANGE, &cr) == 0 ? 0 : errno;
	}
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return r;
}

static int run(int argc, char **argv)
{
	const char *op = argv[1];

	if (argc == 4 && strcmp(op, "seek_data") == 0)
		return do_seek(argv[2], argv[3], SEEK_DATA);
	if (argc == 4 && strcmp(op, "seek_hole") == 0)
		return do_seek(argv[2], argv[3], SEEK_HOLE);
	if (argc == 6 && strcmp(op, "fallocate") == 0)
		return do_fallocate(argv);
	if (argc == 7 && strcmp(op, "copy_range") == 0)
		return do_copy(argv);
	if ((argc == 4 && strcmp(op, "clone") == 0) ||
	    (argc == 7 && strcmp(op, "clone_range") == 0))
		return do_clone(argc, argv);
	return -1;
}

int main(int argc, char **argv)
{
	return prog_main(argc, argv, "fileop", run);
}
