/*
 * core_mount — mount the storage layer of an image (no FUSE), print the
 * space counts, optionally check that a second nolock mount is refused,
 * then unmount cleanly. For tests/integration/mkfs.sh and friends.
 *
 *   core_mount IMAGE [excl]
 *
 * Exit 0 on success (and, with "excl", if the second mount got -EBUSY);
 * 1 on failure, with the reason on stderr.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fusefs/core/fs_internal.h"

int main(int argc, char **argv)
{
	struct fs_core_opts o;
	struct fs_space sp;
	struct fs *fs, *fs2;
	char why[256];
	int ret;

	if (argc < 2) {
		fprintf(stderr, "usage: core_mount IMAGE [excl]\n");
		return 2;
	}
	fs_core_opts_init(&o);
	ret = fs_core_open(argv[1], &o, &fs, why, sizeof(why));
	if (ret < 0) {
		fprintf(stderr, "core_mount: %s: %s (%s)\n", argv[1], why,
			strerror(-ret));
		return 1;
	}
	fs_space_get(fs, &sp);
	printf("total %llu data %llu free %llu inodes %llu root %llu\n",
	       (unsigned long long)sp.total_blocks,
	       (unsigned long long)sp.data_blocks,
	       (unsigned long long)sp.free_blocks,
	       (unsigned long long)sp.inodes,
	       (unsigned long long)fs->sb.root_ino);
	if (argc > 2 && strcmp(argv[2], "excl") == 0) {
		o.busy_wait_ms = 200;	/* not the default 10 s */
		ret = fs_core_open(argv[1], &o, &fs2, why, sizeof(why));
		if (ret != -EBUSY) {
			fprintf(stderr, "second nolock mount: %d, want -EBUSY\n",
				ret);
			if (ret == 0)
				fs_core_unmount(fs2);
			fs_core_unmount(fs);
			return 1;
		}
		printf("second mount refused: %s\n", why);
	}
	ret = fs_core_unmount(fs);
	if (ret < 0) {
		fprintf(stderr, "core_mount: unmount: %s\n", strerror(-ret));
		return 1;
	}
	return 0;
}
