/*
 * fs_mkimg.c — test helper: format an image file with fs_mkfs() (the
 * library mkfs.ucfs uses), for integration tests that must not depend on
 * the mkfs tool's command line.
 *
 *	fs_mkimg IMAGE [JOURNAL_MB]
 */
#include "blockdev/bd.h"
#include "fusefs/core/fs_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	struct fs_mkfs_params p;
	struct bd_dev *bd;
	char why[256] = "";
	int ret;

	if (argc < 2) {
		fprintf(stderr, "usage: fs_mkimg IMAGE [JOURNAL_MB]\n");
		return 2;
	}
	ret = bd_file_open(argv[1], BD_BUFFERED, &bd);
	if (ret < 0) {
		fprintf(stderr, "fs_mkimg: %s: %s\n", argv[1], strerror(-ret));
		return 1;
	}
	fs_mkfs_defaults(&p);
	if (argc > 2)
		p.journal_mb = (unsigned)atoi(argv[2]);
	ret = fs_mkfs(bd, &p, why, sizeof(why));
	bd_close(bd);
	if (ret < 0) {
		fprintf(stderr, "fs_mkimg: %s (%s)\n", why, strerror(-ret));
		return 1;
	}
	return 0;
}
