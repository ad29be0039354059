/*
 * fsck.ucfs — check a ucfs filesystem image; with -y (or -p), repair what
 * can be repaired safely.
 *
 * Usage: fsck.ucfs [-n | -y | -p] [-O statfs] [-v] [-m N] DEVICE
 *   -n  check only, never write (the default)
 *   -y  repair: replay committed journal transactions (as a mount does),
 *       then, if every problem found is one it can fix, fix them all:
 *       backup superblock, link counts, directory sizes and '..',
 *       bitmaps rebuilt from the reachable blocks (leaked blocks freed,
 *       used blocks marked), rgroup free/inode counts; and it releases
 *       orphans (files unlinked while open when a node stopped), as a
 *       mount would. Any other problem
 *       (bad inode, tree node or directory entry, doubly used block, bad
 *       primary superblock, ...) leaves the image as it is (journal
 *       replay aside). The filesystem must not be mounted on any node
 *       (the device is opened with an exclusive lock, which a nolock
 *       mount on this machine holds). After fixing, the image is checked
 *       again.
 *   -p  the same as -y (for fsck -p at boot)
 *   -O statfs  give an image made before the statfs records (ro_compat
 *       STATFS, FORMAT.md "Statfs records") its records, so that df
 *       agrees across cluster nodes: after the check (and with -y the
 *       repair) found it clean, with every slot free in the slot map
 *       (no node has it mounted or stopped without unmounting), the
 *       records go into free blocks of group 0 and the superblock gets
 *       the bit (fs_fsck.h fs_fsck_add_statfs: the order keeps an
 *       interrupted upgrade mountable as before); then it is checked
 *       again. Nothing to do if it has them.
 *   -v  verbose notes          -m N  print at most N lines per kind
 *
 * Exit status (as e2fsck):
 *   0   no problems found (-O statfs: the records added, or there)
 *   1   problems fixed (or the journal replayed, or orphans released):
 *       the image is now clean
 *   4   problems found and left uncorrected
 *   8   operational error (cannot open, read or write the device, no
 *       memory, device busy; -O statfs: a slot claimed, no room)
 *   16  usage error
 * The library doing the work is fusefs/fsck/fs_fsck.c (fs_fsck.h lists every
 * check and every fix). With -n, a device with committed but unreplayed
 * journal transactions is checked as the replay would leave it (nothing
 * is written).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockdev/bd.h"
#include "fusefs/fsck/fs_fsck.h"

enum {
	FSCK_OK = 0, FSCK_FIXED = 1, FSCK_UNCORRECTED = 4, FSCK_ERROR = 8,
	FSCK_USAGE = 16
};

static int usage(void)
{
	fprintf(stderr,
		"usage: fsck.ucfs [-n | -y | -p] [-O statfs] [-v] "
		"[-m max-lines] DEVICE\n"
		"  -n check only (default)   -y/-p repair what is safe\n"
		"  -O statfs  add the statfs records to an image made "
		"without them\n"
		"exit: 0 clean, 1 fixed, 4 errors left uncorrected, 8 "
		"operational error, 16 usage\n");
	return FSCK_USAGE;
}

static int open_dev(const char *path, int rw, struct bd_dev **bd)
{
	unsigned fl = rw ? BD_EXCL : BD_RDONLY;
	int ret = bd_open_any(path, fl, bd);

	if (ret == -EINVAL) /* no O_DIRECT here (tmpfs): buffered */
		ret = bd_open_any(path, fl | BD_BUFFERED, bd);
	return ret;
}

/* -O statfs, after a check that left @r: the records added to @bd (then
 * o->repair cleared and *@r the check of the result), 0 (nothing to do),
 * or an exit status (refused). */
static int add_statfs(const char *path, struct bd_dev *bd,
		      struct fs_fsck_opts *o, struct fs_fsck_result *r)
{
	char why[240] = "";
	int ret;

	fflush(stdout); /* the check's lines before ours on stderr */
	if (r->errors > 0 || (!o->repair && r->journal_tx > 0)) {
		fprintf(stderr,
			"fsck.ucfs: %s: statfs records not added: "
			"%s (fsck.ucfs -y first)\n",
			path,
			r->errors > 0 ? "problems left"
				      : "journal transactions to replay");
		return FSCK_UNCORRECTED;
	}
	ret = fs_fsck_add_statfs(bd, why, sizeof(why));
	if (ret == 1) {
		printf("%s: has the statfs records already\n", path);
		return 0;
	}
	if (ret < 0) {
		fprintf(stderr,
			"fsck.ucfs: %s: statfs records not added: "
			"%s\n",
			path, why);
		return FSCK_ERROR;
	}
	printf("%s: statfs records added; checking again\n", path);
	o->repair = 0;
	ret = fs_fsck_run(bd, o, r);
	return ret < 0 ? FSCK_ERROR : 0;
}

/* Check (and with o->repair, fix) @path; with @upgrade, add the statfs
 * records. An exit status. */
static int run(const char *path, struct fs_fsck_opts *o, int upgrade)
{
	struct fs_fsck_result r;
	struct bd_dev *bd;
	int ret, modified;

	ret = open_dev(path, o->repair || upgrade, &bd);
	if (ret < 0) {
		fprintf(stderr, "fsck.ucfs: %s: %s\n", path, strerror(-ret));
		return FSCK_ERROR;
	}
	ret = fs_fsck_run(bd, o, &r);
	modified = o->repair && (r.fixed > 0 || r.replayed_tx > 0 ||
				 r.orphans_freed > 0);
	if (ret == 0 && modified) {
		/* the check of the result decides the exit status */
		o->repair = 0;
		printf("%s: %llu problem(s) fixed, %u journal transaction(s) "
		       "replayed, %llu orphan(s) released, %llu block(s) "
		       "written; checking again\n", path,
		       (unsigned long long)r.fixed, r.replayed_tx,
		       (unsigned long long)r.orphans_freed,
		       (unsigned long long)r.blocks_written);
		ret = fs_fsck_run(bd, o, &r);
	}
	if (ret == 0 && upgrade) {
		int st = add_statfs(path, bd, o, &r);

		if (st != 0) {
			bd_close(bd);
			return st;
		}
	}
	bd_close(bd);
	if (ret < 0) {
		fprintf(stderr, "fsck.ucfs: %s: %s failed: %s\n", path,
			o->repair ? "repair" : "check", strerror(-ret));
		return FSCK_ERROR;
	}
	if (r.errors > 0) {
		printf("%s: %llu problem(s) found, left uncorrected\n", path,
		       (unsigned long long)r.errors);
		return FSCK_UNCORRECTED;
	}
	printf("%s: clean\n", path);
	return modified ? FSCK_FIXED : FSCK_OK;
}

int main(int argc, char **argv)
{
	struct fs_fsck_opts o = { .out = stdout };
	int c, check_only = 0, upgrade = 0;

	while ((c = getopt(argc, argv, "nvm:ypO:")) != -1) {
		switch (c) {
		case 'n':
			check_only = 1;
			break;
		case 'v':
			o.verbose = 1;
			break;
		case 'm':
			o.max_report = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'y':
		case 'p':
			o.repair = 1;
			break;
		case 'O':
			if (strcmp(optarg, "statfs") != 0) {
				fprintf(stderr,
					"fsck.ucfs: -O %s: the only "
					"feature it adds is statfs\n",
					optarg);
				return usage();
			}
			upgrade = 1;
			break;
		default:
			return usage();
		}
	}
	if (optind + 1 != argc || (check_only && (o.repair || upgrade)))
		return usage();
	return run(argv[optind], &o, upgrade);
}
