/*
 * fsyncer — write files with fsync and record which ones are durable, then
 * verify them after a crash.
 *
 * Usage: fsyncer write [--seed N] [--max N] DIR LOG
 *        fsyncer verify [--seed N] DIR LOG
 *
 * write: creates DIR/f000000, f000001, ... (sizes 0..300 KiB from the
 * seeded PRNG; content a function of the seed and the file number), each
 * written, fsync'ed, and DIR fsync'ed; only then is the file's number
 * appended to LOG (a file outside the filesystem under test, itself
 * fsync'ed). Every fourth file instead replaces an older, already logged
 * file atomically (write a temporary, fsync, rename over, fsync DIR), and
 * the log line records the new version. It runs until --max files (default
 * unlimited) or the first error (the daemon was killed): exit 0 then.
 *
 * verify: every file in LOG must exist with exactly the content of its
 * last logged version; except that the replacement the kill interrupted
 * (the writer's next step after the last logged one, known from the
 * seed) may have renamed its new version into place durably before it
 * could be logged: that one file may hold either version. Prints each
 * problem; exit 1 if any, 0 if all good.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXSIZE (300 * 1024)

static uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Content of version @ver of file @id. */
static size_t gen(uint64_t seed, unsigned id, unsigned ver, uint8_t *buf)
{
	uint64_t s = mix(seed ^ mix(id) ^ mix((uint64_t)ver << 32));
	size_t len = (size_t)(s % MAXSIZE);

	if (s % 5 == 0)
		len %= 100; /* some tiny (inline) files */
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = mix(s + i);

		memcpy(buf + i, &v, len - i < 8 ? len - i : 8);
	}
	return len;
}

static int write_file(const char *path, const uint8_t *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644), ret = 0;

	if (fd < 0)
		return -errno;
	for (size_t done = 0; done < len && ret == 0;) {
		ssize_t n = write(fd, buf + done, len - done);

		if (n < 0)
			ret = -errno;
		else
			done += (size_t)n;
	}
	if (ret == 0 && fsync(fd) != 0)
		ret = -errno;
	if (close(fd) != 0 && ret == 0)
		ret = -errno;
	return ret;
}

static int fsync_path(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY), ret = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) != 0)
		ret = -errno;
	close(fd);
	return ret;
}

static int do_write(uint64_t seed, long max, const char *dir, const char *log)
{
	uint8_t *buf = malloc(MAXSIZE);
	unsigned *ver = calloc(max > 0 ? (size_t)max : 1000000, sizeof(*ver));
	char path[4096], tmp[4096];
	unsigned nfiles = 0;
	int lfd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

	if (buf == NULL || ver == NULL || lfd < 0)
		return 2;
	for (long i = 0; max <= 0 || i < max; i++) {
		unsigned id = nfiles, v = 0;
		char line[64];
		size_t len;

		if (i % 4 == 3 && nfiles > 0) { /* replace an older file */
			id = (unsigned)(mix(seed + (uint64_t)i) % nfiles);
			v = ++ver[id];
		}
		len = gen(seed, id, v, buf);
		snprintf(path, sizeof(path), "%s/f%06u", dir, id);
		snprintf(tmp, sizeof(tmp), "%s/tmp.%06u", dir, id);
		if (write_file(v ? tmp : path, buf, len) < 0)
			break;
		if (v && rename(tmp, path) != 0)
			break;
		if (fsync_path(dir) < 0)
			break;
		if (id == nfiles)
			nfiles++;
		if ((max <= 0 && nfiles >= 1000000))
			break;
		snprintf(line, sizeof(line), "%u %u\n", id, v);
		if (write(lfd, line, strlen(line)) < 0 || fsync(lfd) != 0)
			return 2;
	}
	printf("fsyncer: %u files durable\n", nfiles);
	close(lfd);
	free(buf);
	free(ver);
	return 0;
}

static int do_verify(uint64_t seed, const char *dir, const char *log)
{
	uint8_t *want = malloc(MAXSIZE), *got = malloc(MAXSIZE + 1);
	unsigned *ver = calloc(1000000, sizeof(*ver));
	unsigned id, v, n = 0, bad = 0, maxid = 0, nfiles = 0;
	unsigned alt_id = UINT32_MAX;
	FILE *lf = fopen(log, "r");
	char path[4096];

	if (want == NULL || got == NULL || ver == NULL || lf == NULL)
		return 2;
	while (fscanf(lf, "%u %u", &id, &v) == 2 && id < 1000000) {
		ver[id] = v;
		maxid = id + 1 > maxid ? id + 1 : maxid;
		nfiles += v == 0;
		n++;
	}
	fclose(lf);
	if (n % 4 == 3 && nfiles > 0)	/* do_write's step n: a replace */
		alt_id = (unsigned)(mix(seed + n) % nfiles);
	for (id = 0; id < maxid; id++) {
		size_t len = gen(seed, id, ver[id], want);
		ssize_t r;
		int fd;

		snprintf(path, sizeof(path), "%s/f%06u", dir, id);
		fd = open(path, O_RDONLY);
		if (fd < 0) {
			printf("fsyncer: %s (version %u): %s\n", path, ver[id],
			       strerror(errno));
			bad++;
			continue;
		}
		r = read(fd, got, MAXSIZE + 1);
		close(fd);
		if ((r != (ssize_t)len || memcmp(got, want, len) != 0) &&
		    id == alt_id) {
			len = gen(seed, id, ver[id] + 1, want);
			if (r == (ssize_t)len && memcmp(got, want, len) == 0)
				printf("fsyncer: %s holds version %u, renamed "
				       "in just before the kill\n", path,
				       ver[id] + 1);
			else
				len = gen(seed, id, ver[id], want);
		}
		if (r != (ssize_t)len || memcmp(got, want, len) != 0) {
			printf("fsyncer: %s (version %u): %zd bytes read, %zu "
			       "expected, or content differs\n", path, ver[id],
			       r, len);
			bad++;
		}
	}
	printf("fsyncer: %u log records, %u files checked, %u bad\n", n,
	       maxid, bad);
	free(want);
	free(got);
	free(ver);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	uint64_t seed = 1;
	long max = 0;
	int i = 2;

	if (argc < 4)
		goto usage;
	for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (strcmp(argv[i], "--seed") == 0)
			seed = strtoull(argv[i + 1], NULL, 0);
		else if (strcmp(argv[i], "--max") == 0)
			max = strtol(argv[i + 1], NULL, 0);
		else
			goto usage;
	}
	if (i + 2 != argc)
		goto usage;
	if (strcmp(argv[1], "write") == 0)
		return do_write(seed, max, argv[i], argv[i + 1]);
	if (strcmp(argv[1], "verify") == 0)
		return do_verify(seed, argv[i], argv[i + 1]);
usage:
	fprintf(stderr, "usage: fsyncer write|verify [--seed N] [--max N] "
		"DIR LOG\n");
	return 2;
}
