/*
 * mapop — shared-mapping reads and writes for shell tests of mmap
 * coherence between cluster nodes (tests/integration/clu_kcache.sh).
 *
 * Usage:
 *   mapop write PATH OFF STRING    map PATH shared, copy STRING to byte
 *       OFF through the mapping, msync(MS_SYNC), unmap: prints "OK"
 *   mapop watch PATH OFF STRING SECONDS    map PATH shared (read only),
 *       print "mapped", then look at byte OFF through the same mapping
 *       every 10 ms until it holds STRING ("seen", exit 0) or SECONDS
 *       passed ("stale: " and what it holds, exit 1)
 *   mapop hold PATH OFF STRING GOFILE    map PATH shared (read and
 *       write), copy STRING to byte OFF through the mapping (no msync),
 *       print "stored", keep the mapping until GOFILE exists (at most
 *       120 s: then exit 1), unmap
 *   mapop read PATH OFF LEN    map PATH shared (read only), print the LEN
 *       bytes at OFF as seen through the mapping
 * Exit status: 0 done/seen, 1 a call failed or stale, 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static int usage(void)
{
	fprintf(stderr, "usage: mapop write PATH OFF STRING\n"
			"       mapop watch PATH OFF STRING SECONDS\n"
			"       mapop hold PATH OFF STRING GOFILE\n"
			"       mapop read PATH OFF LEN\n");
	return 2;
}

/* Map [0, off + len) of @path shared; *fd open. NULL on failure. */
static char *map(const char *path, int rw, size_t end, int *fd)
{
	char *p;

	*fd = open(path, rw ? O_RDWR : O_RDONLY);
	if (*fd < 0) {
		fprintf(stderr, "open %s: %s\n", path, strerror(errno));
		return NULL;
	}
	p = mmap(NULL, end, rw ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED,
		 *fd, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "mmap %s: %s\n", path, strerror(errno));
		close(*fd);
		return NULL;
	}
	return p;
}

static int do_write(const char *path, size_t off, const char *s)
{
	size_t len = strlen(s), end = off + len;
	int fd, ret = 0;
	char *p = map(path, 1, end, &fd);

	if (p == NULL)
		return 1;
	memcpy(p + off, s, len);
	if (msync(p, end, MS_SYNC) != 0) {
		fprintf(stderr, "msync: %s\n", strerror(errno));
		ret = 1;
	}
	munmap(p, end);
	close(fd);
	if (ret == 0)
		printf("OK\n");
	return ret;
}

static int do_watch(const char *path, size_t off, const char *s, long secs)
{
	size_t len = strlen(s), end = off + len;
	struct timespec nap = {0, 10 * 1000 * 1000};
	long tries = secs * 100;
	int fd, same;
	char *p = map(path, 0, end, &fd);

	if (p == NULL)
		return 1;
	printf("mapped\n");
	fflush(stdout);
	while ((same = memcmp(p + off, s, len) == 0) == 0 && tries-- > 0)
		nanosleep(&nap, NULL);
	if (same)
		printf("seen\n");
	else
		printf("stale: %.*s\n", (int)len, p + off);
	munmap(p, end);
	close(fd);
	return same ? 0 : 1;
}

static int do_hold(const char *path, size_t off, const char *s, const char *go)
{
	size_t len = strlen(s), end = off + len;
	struct timespec nap = {0, 10 * 1000 * 1000};
	long tries = 120 * 100;
	int fd;
	char *p = map(path, 1, end, &fd);

	if (p == NULL)
		return 1;
	memcpy(p + off, s, len);
	printf("stored\n");
	fflush(stdout);
	while (access(go, F_OK) != 0 && tries-- > 0)
		nanosleep(&nap, NULL);
	munmap(p, end);
	close(fd);
	return tries > 0 ? 0 : 1;
}

static int do_read(const char *path, size_t off, size_t len)
{
	size_t end = off + len;
	int fd;
	char *p = map(path, 0, end, &fd);

	if (p == NULL)
		return 1;
	fwrite(p + off, 1, len, stdout);
	munmap(p, end);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 6 && strcmp(argv[1], "hold") == 0)
		return do_hold(argv[2], strtoul(argv[3], NULL, 0), argv[4],
			       argv[5]);
	if (argc == 5 && strcmp(argv[1], "read") == 0)
		return do_read(argv[2], strtoul(argv[3], NULL, 0),
			       strtoul(argv[4], NULL, 0));
	if (argc == 5 && strcmp(argv[1], "write") == 0)
		return do_write(argv[2], strtoul(argv[3], NULL, 0), argv[4]);
	if (argc == 6 && strcmp(argv[1], "watch") == 0)
		return do_watch(argv[2], strtoul(argv[3], NULL, 0), argv[4],
				strtol(argv[5], NULL, 0));
	return usage();
}
