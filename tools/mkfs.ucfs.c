/*
 * mkfs.ucfs — create a ucfs filesystem on a device or image file.
 *
 *   mkfs.ucfs [-b 4096] [-j slots] [-J journal-MB] [-r rgroup-MB]
 *             [-p dlm|nolock] [-t cluster:fsname] [-L label]
 *             [-O ^statfs] [-f] [-q] DEVICE
 *
 * -O ^statfs makes a filesystem without the statfs records (ro_compat
 * STATFS), as mkfs.ucfs made them before: a ucfs older than the records
 * mounts it read-write; cluster nodes then show a stale df (MOUNT.md).
 * fsck.ucfs -O statfs adds them later.
 *
 * Refuses a device that already holds ucfs or another known filesystem /
 * signature unless -f. The formatting itself is fs_mkfs() (fusefs/core/
 * fs_mkfs.c): metadata only, in large batches, data blocks untouched.
 * Exit status: 0 ok, 1 operational error, 2 usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fusefs/core/fs_internal.h"

static const char *prog = "mkfs.ucfs";

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [-b 4096] [-j slots] [-J journal-MB] "
		"[-r rgroup-MB]\n"
		"          [-p dlm|nolock] [-t cluster:fsname] [-L label] "
		"[-O ^statfs] [-f] [-q] DEVICE\n"
		"  -b  block size (only 4096)      -j  journals/slots "
		"(default 1)\n"
		"  -J  journal size in MiB (32)    -r  resource group size "
		"in MiB\n"
		"      (256; dlm: smaller on a small device, >= 8 per "
		"journal)\n"
		"  -p  lock protocol (nolock)      -t  lock table "
		"cluster:fsname\n"
		"  -L  label                       -f  overwrite an existing "
		"filesystem\n"
		"  -O ^statfs  no statfs records (as before them; "
		"fsck.ucfs -O statfs adds them)\n"
		"  -q  quiet\n",
		prog);
}

static int parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi ||
	    s[0] == '-')
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* Known signatures: name, byte offset, bytes. */
struct sig {
	const char *name;
	uint64_t off;
	const char *magic;
	size_t len;
};

static const struct sig sigs[] = {
	{ "ext2/3/4", 1080, "\x53\xef", 2 },
	{ "xfs", 0, "XFSB", 4 },
	{ "btrfs", 65536 + 64, "_BHRfS_M", 8 },
	{ "gfs2", 65536, "\x01\x16\x19\x70", 4 },
	{ "ocfs2", 1024, "OCFSV2", 6 },
	{ "ocfs2", 2048, "OCFSV2", 6 },
	{ "ocfs2", 4096, "OCFSV2", 6 },
	{ "ocfs2", 8192, "OCFSV2", 6 },
	{ "swap", 4096 - 10, "SWAPSPACE2", 10 },
	{ "swap", 4096 - 10, "SWAP-SPACE", 10 },
	{ "LUKS", 0, "LUKS\xba\xbe", 6 },
	{ "GPT partition table", 512, "EFI PART", 8 },
	{ "squashfs", 0, "hsqs", 4 },
	{ "iso9660", 32769, "CD001", 5 },
};

/* Name of the signature found in the first 128 KiB, or NULL. */
static const char *find_signature(struct bd_dev *bd)
{
	size_t len = 128 * 1024;
	uint8_t *buf;
	const char *found = NULL;

	if (bd_size(bd) < len)
		len = (size_t)bd_size(bd);
	buf = bd_buf_alloc(len);
	if (buf == NULL || bd_read(bd, buf, len, 0) < 0) {
		free(buf);
		return NULL;
	}
	if (((struct fs_blk_hdr *)buf)->magic == FS_MAGIC &&
	    ((struct fs_blk_hdr *)buf)->type == FS_BT_SB)
		found = "ucfs";
	for (size_t i = 0; found == NULL && i < sizeof(sigs) / sizeof(sigs[0]);
	     i++)
		if (sigs[i].off + sigs[i].len <= len &&
		    memcmp(buf + sigs[i].off, sigs[i].magic, sigs[i].len) == 0)
			found = sigs[i].name;
	/* an MBR boot signature with a partition entry */
	if (found == NULL && len >= 512 && buf[510] == 0x55 &&
	    buf[511] == 0xaa && buf[446 + 4] != 0)
		found = "DOS partition table";
	free(buf);
	return found;
}

static int parse_args(int argc, char **argv, struct fs_mkfs_params *p,
		      int *force, int *quiet, const char **dev)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned v;
	int c;

	while ((c = getopt_long(argc, argv, "b:j:J:r:p:t:L:O:fqh", longopts,
				NULL)) != -1) {
		switch (c) {
		case 'b':
			if (parse_uint(optarg, 1, 1u << 30, &v) < 0 ||
			    v != FS_BLOCK_SIZE) {
				fprintf(stderr, "%s: block size must be 4096\n",
					prog);
				return -1;
			}
			break;
		case 'j':
			if (parse_uint(optarg, 1, FS_MAX_SLOTS,
				       &p->slots) < 0) {
				fprintf(stderr, "%s: -j: journals must be "
					"1..%u\n", prog, FS_MAX_SLOTS);
				return -1;
			}
			break;
		case 'J':
			if (parse_uint(optarg, 1, 4096, &p->journal_mb) < 0) {
				fprintf(stderr, "%s: -J: journal size must be "
					"1..4096 MiB\n", prog);
				return -1;
			}
			break;
		case 'r':
			if (parse_uint(optarg, 1, 16384, &p->rgrp_mb) < 0) {
				fprintf(stderr, "%s: -r: rgroup size must be "
					"1..16384 MiB\n", prog);
				return -1;
			}
			break;
		case 'p':
			if (strcmp(optarg, "dlm") != 0 &&
			    strcmp(optarg, "nolock") != 0) {
				fprintf(stderr, "%s: -p: lock protocol must be "
					"dlm or nolock\n", prog);
				return -1;
			}
			strcpy(p->lockproto, optarg);
			break;
		case 't':
			if (strlen(optarg) >= FS_LOCKTABLE_MAX ||
			    strchr(optarg, ':') == NULL ||
			    optarg[0] == ':' ||
			    optarg[strlen(optarg) - 1] == ':') {
				fprintf(stderr, "%s: -t: lock table must be "
					"cluster:fsname (< %u bytes)\n", prog,
					FS_LOCKTABLE_MAX);
				return -1;
			}
			strcpy(p->locktable, optarg);
			break;
		case 'L':
			if (strlen(optarg) >= FS_LABEL_MAX) {
				fprintf(stderr, "%s: -L: label longer than %u "
					"bytes\n", prog, FS_LABEL_MAX - 1);
				return -1;
			}
			strcpy(p->label, optarg);
			break;
		case 'O':
			if (strcmp(optarg, "^statfs") != 0) {
				fprintf(stderr,
					"%s: -O: the only feature it "
					"takes is ^statfs (none)\n",
					prog);
				return -1;
			}
			p->no_statfs = 1;
			break;
		case 'f':
			*force = 1;
			break;
		case 'q':
			*quiet = 1;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -1;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "%s: %s\n", prog, optind >= argc ?
			"missing DEVICE" : "too many arguments");
		return -1;
	}
	*dev = argv[optind];
	return 0;
}

static int open_dev(const char *path, struct bd_dev **bd)
{
	int ret = bd_open_any(path, BD_EXCL, bd);

	if (ret == -EINVAL)	/* no O_DIRECT (tmpfs) */
		ret = bd_open_any(path, BD_EXCL | BD_BUFFERED, bd);
	if (ret == -EBUSY)
		fprintf(stderr, "%s: %s is in use (mounted?)\n", prog, path);
	else if (ret == -EINVAL)
		fprintf(stderr, "%s: %s: size is zero or not a multiple of "
			"4096 bytes\n", prog, path);
	else if (ret < 0)
		fprintf(stderr, "%s: cannot open %s: %s\n", prog, path,
			strerror(-ret));
	return ret;
}

int main(int argc, char **argv)
{
	struct fs_mkfs_params p;
	struct bd_dev *bd;
	struct timespec t0, t1;
	const char *dev = NULL, *sig;
	int force = 0, quiet = 0, ret;
	char why[256];

	fs_mkfs_defaults(&p);
	if (parse_args(argc, argv, &p, &force, &quiet, &dev) < 0) {
		usage(stderr);
		return 2;
	}
	if (open_dev(dev, &bd) < 0)
		return 1;
	sig = find_signature(bd);
	if (sig != NULL && !force) {
		fprintf(stderr, "%s: %s already contains a %s signature; use "
			"-f to overwrite it\n", prog, dev, sig);
		bd_close(bd);
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = fs_mkfs(bd, &p, why, sizeof(why));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (ret < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, dev, why);
		bd_close(bd);
		return 1;
	}
	if (!quiet) {
		struct fs_sb *sb = bd_buf_alloc(FS_BLOCK_SIZE);

		if (sb != NULL && bd_read(bd, sb, FS_BLOCK_SIZE, 0) == 0)
			printf("%s: %s: %llu blocks of 4096 (%llu MiB), %u "
			       "journal(s) of %u MiB, %u rgroups of %u MiB, "
			       "lockproto %s%s%s, %.3f s\n", prog, dev,
			       (unsigned long long)sb->total_blocks,
			       (unsigned long long)(sb->total_blocks >> 8),
			       sb->slot_count, sb->journal_blocks >> 8,
			       sb->rgrp_count, sb->rgrp_blocks >> 8,
			       sb->lockproto, sb->locktable[0] ? ", table " :
			       "", sb->locktable,
			       (t1.tv_sec - t0.tv_sec) +
				       (t1.tv_nsec - t0.tv_nsec) / 1e9);
		free(sb);
	}
	bd_close(bd);
	return 0;
}
