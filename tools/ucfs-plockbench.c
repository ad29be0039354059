/*
 * ucfs-plockbench — file lock rates through a mounted filesystem
 * (tools/BENCH.md "File locks").
 *
 *   ucfs-plockbench [-t SECONDS] [-k posix|flock] uncontended FILE
 *   ucfs-plockbench [-t SECONDS] [-k posix|flock] handover FILE_A FILE_B
 *
 * uncontended: one process takes and releases a write lock on byte 0 of
 * FILE (fcntl F_SETLK) or an exclusive flock, in a loop: prints lock +
 * unlock pairs per second. On a cluster mount, FILE on the plock server
 * (the lowest node id) costs no message; on another node each call is a
 * round trip to it.
 *
 * handover: two processes, one on FILE_A and one on FILE_B (the same file
 * through two nodes' mounts), each taking the lock with F_SETLKW (or a
 * blocking flock), bumping a shared counter, and releasing it, in a loop:
 * prints the acquisitions per second and how many of them changed hands
 * (the other process had it last).
 *
 * Both run for SECONDS (default 3) and print one line of figures.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct shared {
	volatile int stop;
	volatile int last; /* process that took the lock last: 1 or 2 */
	uint64_t taken[3];
	uint64_t handovers;
};

static int use_flock;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int lock_file(int fd, int wait, int type)
{
	struct flock fl = {.l_type = (short)type,
			   .l_whence = SEEK_SET,
			   .l_start = 0,
			   .l_len = 1};

	if (use_flock)
		return flock(fd, type == F_UNLCK ? LOCK_UN : LOCK_EX);
	return fcntl(fd, wait ? F_SETLKW : F_SETLK, &fl);
}

static int uncontended(const char *path, double secs)
{
	int fd = open(path, O_RDWR | O_CREAT, 0644);
	uint64_t n = 0;
	double t0, t;

	if (fd < 0) {
		perror(path);
		return 1;
	}
	t0 = now_s();
	do {
		for (int i = 0; i < 64; i++) {
			if (lock_file(fd, 0, F_WRLCK) != 0 ||
			    lock_file(fd, 0, F_UNLCK) != 0) {
				perror("lock");
				return 1;
			}
		}
		n += 64;
		t = now_s();
	} while (t - t0 < secs);
	printf("uncontended %s: %llu lock+unlock in %.2f s: %.0f/s "
	       "(%.1f us each)\n",
	       use_flock ? "flock" : "posix", (unsigned long long)n, t - t0,
	       n / (t - t0), (t - t0) * 1e6 / n);
	close(fd);
	return 0;
}

static void pinger(struct shared *sh, const char *path, int me)
{
	int fd = open(path, O_RDWR);

	if (fd < 0)
		_exit(1);
	while (!sh->stop) {
		if (lock_file(fd, 1, F_WRLCK) != 0)
			_exit(1);
		sh->taken[me]++;
		if (sh->last != me)
			sh->handovers++;
		sh->last = me;
		if (lock_file(fd, 0, F_UNLCK) != 0)
			_exit(1);
	}
	_exit(0);
}

static int handover(const char *a, const char *b, double secs)
{
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t p[2];
	double t0, t;
	int st, bad = 0;

	if (sh == MAP_FAILED)
		return 1;
	memset(sh, 0, sizeof(*sh));
	t0 = now_s();
	for (int i = 0; i < 2; i++) {
		p[i] = fork();
		if (p[i] == 0)
			pinger(sh, i == 0 ? a : b, i + 1);
	}
	usleep((useconds_t)(secs * 1e6));
	sh->stop = 1;
	for (int i = 0; i < 2; i++) {
		waitpid(p[i], &st, 0);
		bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	}
	t = now_s();
	printf("handover %s: %llu + %llu acquisitions in %.2f s: %.0f/s, "
	       "%llu changed hands (%.0f/s)\n",
	       use_flock ? "flock" : "posix", (unsigned long long)sh->taken[1],
	       (unsigned long long)sh->taken[2], t - t0,
	       (sh->taken[1] + sh->taken[2]) / (t - t0),
	       (unsigned long long)sh->handovers, sh->handovers / (t - t0));
	return bad;
}

int main(int argc, char **argv)
{
	double secs = 3;
	int c;

	while ((c = getopt(argc, argv, "t:k:")) != -1) {
		if (c == 't')
			secs = atof(optarg);
		else if (c == 'k' && strcmp(optarg, "flock") == 0)
			use_flock = 1;
		else if (c != 'k' || strcmp(optarg, "posix") != 0)
			goto usage;
	}
	if (optind + 2 == argc && strcmp(argv[optind], "uncontended") == 0)
		return uncontended(argv[optind + 1], secs);
	if (optind + 3 == argc && strcmp(argv[optind], "handover") == 0)
		return handover(argv[optind + 1], argv[optind + 2], secs);
usage:
	fprintf(stderr, "usage: ucfs-plockbench [-t SECONDS] [-k posix|flock] "
			"uncontended FILE | handover FILE_A FILE_B\n");
	return 2;
}
