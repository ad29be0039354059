/*
 * main.c — the `ucfs` mount daemon.
 *
 *	ucfs [-f] [-d] [-s] [-o opts] DEVICE MOUNTPOINT
 *	ucfs [-f] [-d] [-s] -o passthrough[,opts] DIR MOUNTPOINT
 *
 * The second form mounts a view of the directory DIR of any filesystem,
 * instrumented like ucfs itself (fs_pt.h).
 *
 * Also what fuse3's mount helper runs for `mount -t fuse.ucfs DEVICE MNT
 * -o opts` and fstab entries (it calls "ucfs DEVICE MNT -o opts"; options
 * may follow the operands). Mount options: fusefs/MOUNT.md.
 *
 * Order matters: without -f the daemon forks FIRST (libaio contexts and
 * threads do not survive fork), the child mounts the filesystem and the
 * FUSE session and reports success or failure through a pipe; the parent
 * exits with that status, so `mount` sees a failed mount fail and the
 * error message reaches the terminal.
 */
#include "fusefs/fs.h"
#include "fusefs/fuse/fs_fuse.h"
#include "fusefs/passthrough/fs_pt.h"
#include "fusefs/stats/fs_stats.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

struct args {
	int foreground;
	int single_thread;
	const char *device;
	char mountpoint[PATH_MAX];
	struct fs_opts opts;
	struct fs_stats_opts so;	/* stats=, nostats, trace=, trace_ops */
	char optstr[FS_OPTS_FUSE_MAX];	/* as given, for the stats */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ucfs [-f] [-d] [-s] [-o opt[,opt...]] DEVICE "
		"MOUNTPOINT\n"
		"       ucfs [-f] [-d] [-s] -o passthrough[,opt...] DIR "
		"MOUNTPOINT\n"
		"  -f  stay in the foreground   -d  FUSE debug (implies -f)\n"
		"  -s  single-threaded          -o  mount options "
		"(see MOUNT.md):\n"
		"      lockproto=nolock data=ordered|writeback commit=SECONDS\n"
		"      noatime|relatime|strictatime cache_mb=N ro|rw "
		"allow_other\n"
		"      and the usual mount/FUSE ones (nosuid, nodev, "
		"noexec, fsname=...)\n");
}

static void note_opts(struct args *a, const char *s)
{
	size_t n = strlen(a->optstr);

	snprintf(a->optstr + n, sizeof(a->optstr) - n, "%s%s",
		 n > 0 ? "," : "", s);
}

/* One -o string: the stats options first, the rest is ours. */
static int parse_o(struct args *a, const char *arg)
{
	char err[256];
	char *copy = strdup(arg);
	int ret;

	if (copy == NULL)
		return 1;
	note_opts(a, arg);
	ret = fs_stats_opts_take(copy, &a->so, err, sizeof(err));
	if (ret == 0)
		ret = fs_opts_parse(&a->opts, copy, err, sizeof(err));
	if (ret < 0)
		fprintf(stderr, "%s\n", err);
	free(copy);
	return ret < 0 ? 1 : 0;
}

/* 0, or prints why and returns 2 (usage) / 1 (bad option). */
static int parse_args(int argc, char **argv, struct args *a)
{
	int c;

	memset(a, 0, sizeof(*a));
	fs_opts_init(&a->opts);
	fs_stats_opts_init(&a->so);
	while ((c = getopt(argc, argv, "fdso:hV")) != -1) {
		switch (c) {
		case 'f':
			a->foreground = 1;
			break;
		case 'd':
			a->foreground = 1;
			a->opts.debug = 1;
			break;
		case 's':
			a->single_thread = 1;
			break;
		case 'o':
			if (parse_o(a, optarg) != 0)
				return 1;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("ucfs 0.1\n");
			exit(0);
		default:
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	if (a->opts.debug)
		a->foreground = 1;
	a->device = argv[optind];
	if (realpath(argv[optind + 1], a->mountpoint) == NULL) {
		fprintf(stderr, "ucfs: mountpoint '%s': %s\n", argv[optind + 1],
			strerror(errno));
		return 1;
	}
	return 0;
}

/* Tell the waiting parent how the mount went (no-op with -f). */
static void report(int fd, char status)
{
	if (fd < 0)
		return;
	if (write(fd, &status, 1) != 1)
		perror("ucfs: write status");
	close(fd);
}

static void detach_stdio(void)
{
	int fd = open("/dev/null", O_RDWR);

	if (fd < 0)
		return;
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
}

/* Fork; the parent waits for the child's status byte and exits with it.
 * Returns the write end of the pipe in the child. */
static int background(void)
{
	int p[2];
	char status = 1;
	pid_t pid;

	if (pipe(p) != 0) {
		perror("ucfs: pipe");
		exit(1);
	}
	pid = fork();
	if (pid < 0) {
		perror("ucfs: fork");
		exit(1);
	}
	if (pid > 0) {
		close(p[1]);
		if (read(p[0], &status, 1) != 1)
			status = 1;
		_exit(status);
	}
	close(p[0]);
	setsid();
	return p[1];
}

/* Mounted: tell the parent, serve until unmounted, free the session.
 * Returns the loop's result. */
static int serve(struct args *a, struct fs_fuse *ff, int status_fd)
{
	int ret;

	report(status_fd, 0);
	if (!a->foreground)
		detach_stdio();
	if (chdir("/") != 0)
		perror("ucfs: chdir /");
	ret = fs_fuse_loop(ff, a->single_thread);
	fs_fuse_free(ff);
	return ret;
}

/* Options that only mean something for a ucfs device; 0 or prints why. */
static int pt_check(const struct args *a)
{
	const struct fs_opts *o = &a->opts;
	char dir[PATH_MAX];
	size_t n;

	if (o->lockproto != FS_LOCK_NOLOCK || o->cluster[0] != '\0' ||
	    o->node_id != 0 || o->minhold_ms >= 0 || o->glock_max >= 0) {
		fprintf(stderr, "ucfs: passthrough: lockproto=, cluster=, "
				"node=, minhold= and glock_max= are for ucfs "
				"devices\n");
		return -EINVAL;
	}
	/* a mountpoint below DIR would make the lens look at itself (and
	 * deadlock on its own requests); DIR itself is fine: the view is
	 * taken before the mount covers it */
	if (realpath(a->device, dir) == NULL)
		return 0; /* fs_pt_open says why */
	n = strlen(dir);
	if (strcmp(dir, "/") == 0 ? strcmp(a->mountpoint, "/") != 0
				  : strncmp(a->mountpoint, dir, n) == 0 &&
					a->mountpoint[n] == '/') {
		fprintf(stderr,
			"ucfs: passthrough: mountpoint '%s' is inside "
			"'%s'\n",
			a->mountpoint, dir);
		return -EINVAL;
	}
	return 0;
}

static int run_pt(struct args *a, int status_fd)
{
	struct fs_fuse *ff = NULL;
	struct fs_pt *pt = NULL;
	char err[512] = "";
	int ret;

	ret = pt_check(a);
	if (ret == 0) {
		ret = fs_pt_open(a->device, &a->opts, &pt, err, sizeof(err));
		if (ret < 0)
			fprintf(stderr, "%s\n", err);
	}
	if (ret == 0) {
		ret = fs_fuse_new_pt(pt, &a->opts, &a->so, a->optstr, a->device,
				     a->mountpoint, &ff, err, sizeof(err));
		if (ret < 0)
			fprintf(stderr, "%s\n", err);
	}
	if (ret < 0) {
		fs_pt_close(pt);
		report(status_fd, 1);
		return 1;
	}
	ret = serve(a, ff, status_fd);
	fs_pt_close(pt);
	return ret < 0 ? 1 : 0;
}

static int run(struct args *a, int status_fd)
{
	struct fs_fuse *ff = NULL;
	struct fs *fs = NULL;
	char err[512] = "";
	int ret;

	/* fs_core_open waits (bounded) for a daemon that is still writing
	 * back after umount(8) returned; a real second mount fails. */
	ret = fs_mount(a->device, &a->opts, &fs, err, sizeof(err));
	if (ret < 0) {
		fprintf(stderr, "ucfs: cannot mount %s: %s\n", a->device,
			err[0] ? err : strerror(-ret));
		report(status_fd, 1);
		return 1;
	}
	ret = fs_fuse_new(fs, &a->opts, &a->so, a->optstr, a->device,
			  a->mountpoint, &ff, err, sizeof(err));
	if (ret < 0) {
		fprintf(stderr, "%s\n", err);
		fs_unmount(fs);
		report(status_fd, 1);
		return 1;
	}
	ret = serve(a, ff, status_fd);
	if (fs_unmount(fs) < 0 && ret == 0)
		ret = -EIO;
	return ret < 0 ? 1 : 0;
}

/*
 * malloc arenas: glibc gives threads up to 8 per CPU, each keeping its
 * own free chunks and top. The daemon's many threads (FUSE workers,
 * glock workers, the lock manager's, the notification threads) then
 * hold the free space of several arenas resident: on one dlm node a
 * find over 200,000 files peaked 4 MB higher with the default than with
 * one arena (tools/BENCH.md), at the same speed: the bulk of the
 * daemon's memory comes from its own pools and mapped cache chunks, and
 * glibc's per-thread caches take most small allocations without the
 * arena lock. MALLOC_ARENA_MAX in the environment still rules.
 */
#define UCFS_MALLOC_ARENAS 2

int main(int argc, char **argv)
{
	struct args *a;
	int ret, status_fd = -1;

	if (getenv("MALLOC_ARENA_MAX") == NULL)
		mallopt(M_ARENA_MAX, UCFS_MALLOC_ARENAS);
	a = calloc(1, sizeof(*a));
	if (a == NULL)
		return 1;
	ret = parse_args(argc, argv, a);
	if (ret == 0) {
		if (!a->foreground)
			status_fd = background();
		if (a->opts.passthrough)
			ret = run_pt(a, status_fd);
		else
			ret = run(a, status_fd);
	}
	fs_stats_opts_free(&a->so);
	free(a);
	return ret;
}
