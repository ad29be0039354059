/*
 * ucfs-mktree — make a large tree of empty files in a ucfs image quickly,
 * through the filesystem library on the image itself (no FUSE, no
 * kernel): for ucfs-bench's "find" scenario (tools/BENCH.md), which
 * measures a daemon's memory after `find` walks a million files.
 *
 *   ucfs-mktree IMAGE FILES [PER_DIR]
 *
 * Mounts IMAGE with lockproto=nolock (a lockproto=dlm image too, as
 * GFS2's lock_nolock: no other node may have it mounted), creates
 * directories d00000, d00001, ... under the root with PER_DIR (1,000)
 * empty regular files each (f00000, ...), FILES files in all, forgets
 * every inode as soon as it is made (nothing stays in core), and
 * unmounts. Prints "files=N dirs=D seconds=S rate=R". Exit 1 with a
 * message on any error (ENOSPC: the image is too small).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fusefs/fs.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int parse_count(const char *s, unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v == 0 || v > 1ul << 32)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Directory @d with @n files. 0 or -errno (@what names the failed call). */
static int make_dir(struct fs *fs, const struct fs_cred *cr, unsigned long d,
		    unsigned long n, const char **what)
{
	struct fs_attr dir, a;
	char name[32];
	int ret;

	snprintf(name, sizeof(name), "d%05lu", d);
	*what = "mkdir";
	ret = fs_mkdir(fs, cr, fs_root(fs), name, S_IFDIR | 0755, &dir);
	if (ret < 0)
		return ret;
	*what = "mknod";
	for (unsigned long i = 0; i < n && ret == 0; i++) {
		snprintf(name, sizeof(name), "f%05lu", i);
		ret = fs_mknod(fs, cr, dir.ino, name, S_IFREG | 0644, 0, &a);
		if (ret == 0)
			fs_forget(fs, a.ino, 1);
	}
	fs_forget(fs, dir.ino, 1);
	return ret;
}

int main(int argc, char **argv)
{
	struct fs_cred cr = {.uid = 0, .gid = 0, .umask = 0, .flags = 0};
	unsigned long files, per = 1000, d;
	const char *what = "mount";
	char err[256] = "";
	struct fs_opts o;
	struct fs *fs;
	double t0;
	int ret;

	if (argc < 3 || argc > 4 || parse_count(argv[2], &files) < 0 ||
	    (argc == 4 && parse_count(argv[3], &per) < 0)) {
		fprintf(stderr, "usage: ucfs-mktree IMAGE FILES [PER_DIR]\n");
		return 2;
	}
	fs_opts_init(&o);
	ret = fs_mount(argv[1], &o, &fs, err, sizeof(err));
	if (ret < 0) {
		fprintf(stderr, "ucfs-mktree: %s: %s (%s)\n", argv[1], err,
			strerror(-ret));
		return 1;
	}
	t0 = now_s();
	for (d = 0; ret == 0 && d * per < files; d++)
		ret = make_dir(fs, &cr, d,
			       files - d * per < per ? files - d * per : per,
			       &what);
	if (ret < 0) {
		fprintf(stderr, "ucfs-mktree: %s in directory %lu: %s\n", what,
			d - 1, strerror(-ret));
		fs_unmount(fs);
		return 1;
	}
	ret = fs_unmount(fs);
	if (ret < 0) {
		fprintf(stderr, "ucfs-mktree: unmount: %s\n", strerror(-ret));
		return 1;
	}
	printf("files=%lu dirs=%lu seconds=%.3f rate=%.0f\n", files, d,
	       now_s() - t0, (double)files / (now_s() - t0));
	return 0;
}
