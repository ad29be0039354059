/*
 * fsck.ucfs — check a ucfs filesystem image, read-only.
 *
 * Usage: fsck.ucfs -n [-v] [-m N] DEVICE
 *   -n  read-only check (the only mode: repairs are not implemented, so
 *       -n is accepted for e2fsck compatibility and implied)
 *   -v  verbose notes          -m N  print at most N lines per kind
 *
 * Exit status (as e2fsck):
 *   0   no problems found
 *   4   problems found and left uncorrected
 *   8   operational error (cannot open or read the device, no memory)
 *   16  usage error
 * The library doing the work is fusefs/fs_fsck.c (fs_fsck.h lists every
 * check). A device with committed but unreplayed journal transactions is
 * checked as the replay would leave it (nothing is written).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockdev/bd.h"
#include "fusefs/fs_fsck.h"

enum { FSCK_OK = 0, FSCK_UNCORRECTED = 4, FSCK_ERROR = 8, FSCK_USAGE = 16 };

static int usage(void)
{
	fprintf(stderr, "usage: fsck.ucfs -n [-v] [-m max-lines] DEVICE\n"
		"exit: 0 clean, 4 errors left uncorrected, 8 operational "
		"error, 16 usage\n");
	return FSCK_USAGE;
}

static int open_dev(const char *path, struct bd_dev **bd)
{
	int ret = bd_file_open(path, BD_RDONLY, bd);

	if (ret == -EINVAL) /* no O_DIRECT here (tmpfs): buffered */
		ret = bd_file_open(path, BD_RDONLY | BD_BUFFERED, bd);
	return ret;
}

int main(int argc, char **argv)
{
	struct fs_fsck_opts o = { .out = stdout };
	struct fs_fsck_result r;
	struct bd_dev *bd;
	int c, ret;

	while ((c = getopt(argc, argv, "nvm:yp")) != -1) {
		switch (c) {
		case 'n':
			break;
		case 'v':
			o.verbose = 1;
			break;
		case 'm':
			o.max_report = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'y':
		case 'p':
			fprintf(stderr, "fsck.ucfs: repairs are not "
				"implemented; use -n\n");
			return FSCK_USAGE;
		default:
			return usage();
		}
	}
	if (optind + 1 != argc)
		return usage();
	ret = open_dev(argv[optind], &bd);
	if (ret < 0) {
		fprintf(stderr, "fsck.ucfs: %s: %s\n", argv[optind],
			strerror(-ret));
		return FSCK_ERROR;
	}
	ret = fs_fsck_run(bd, &o, &r);
	bd_close(bd);
	if (ret < 0) {
		fprintf(stderr, "fsck.ucfs: %s: check failed: %s\n",
			argv[optind], strerror(-ret));
		return FSCK_ERROR;
	}
	if (r.errors > 0) {
		printf("%s: %llu problem(s) found, left uncorrected\n",
		       argv[optind], (unsigned long long)r.errors);
		return FSCK_UNCORRECTED;
	}
	printf("%s: clean\n", argv[optind]);
	return FSCK_OK;
}
