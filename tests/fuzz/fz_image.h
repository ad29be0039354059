/*
 * fz_image.h — the image the image and journal harnesses mutate, and what
 * they do with it (fuzz_image.c, fuzz_journal.c).
 *
 * The base image is built once per process: mkfs of a 6 MiB RAM device
 * (2 slots of 1 MiB journals, two rgroups), populated through fs.h with a
 * little of everything (files, a sparse file whose extents leave the
 * inode, a directory whose entries leave the inode, a symlink, a hard
 * link, a FIFO, inline and block xattrs). A harness picks the blocks its
 * input covers (fz_map_*), and for each input:
 *
 *   fz_load:     base image -> work device, input bytes over the chosen
 *                blocks (input byte 0 is flags, FZ_F_*); unless
 *                FZ_F_RAW, headers that still say "ucfs" get their crc
 *                recomputed and journal commits their tx_crc, so that
 *                mutations reach the checks behind the checksums;
 *   fz_exercise: mount through fs.h, walk every directory (bounded: a
 *                corrupted tree may have cycles), read every file, link
 *                and xattr, a few namespace operations, unmount;
 *   fz_fsck:     reload the same bytes; fsck -n, fsck -y, fsck -n again:
 *                the last must be clean unless fsck -y said it made no
 *                repair (and why);
 *   fz_run:      all of it, and an image fsck found clean must still be
 *                clean after fz_exercise;
 *   fz_image_input: a harness's whole LLVMFuzzerTestOneInput but for its
 *                choice of base image and blocks.
 * Nothing here may crash, hang or leak; fz_fsck returns -1 when the repair
 * invariant fails (the harness aborts so the fuzzer keeps the input).
 */
#ifndef UCFS_FZ_IMAGE_H
#define UCFS_FZ_IMAGE_H

#include "blockdev/bd.h"
#include "fusefs/fs.h"
#include "fusefs/fs_format.h"
#include "fusefs/fsck/fs_fsck.h"
#include "fusefs/core/fs_internal.h"
#include "tests/fuzz/fz_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_DEV_BYTES (6u << 20)
#define FZ_DEV_BLOCKS (FZ_DEV_BYTES / FS_BLOCK_SIZE)
#define FZ_MAP_MAX 256

/* input byte 0 */
#define FZ_F_RAW 0x01	/* leave checksums as the input has them */
#define FZ_F_RO 0x02	/* mount read-only */
#define FZ_F_NOOPS 0x04 /* no namespace operations after the walk */
#define FZ_F_PLUS 0x08	/* readdir with FS_READDIR_PLUS */

struct fz_img {
	uint8_t *base;		  /* FZ_DEV_BYTES: the image before input */
	struct bd_dev *bd;	  /* work device */
	uint64_t map[FZ_MAP_MAX]; /* blocks the input covers, in order */
	unsigned nmap;
	uint64_t jstart, jend; /* journal region [jstart, jend) */
	uint32_t jblocks;      /* blocks per journal */
};

static const struct fs_cred fz_cred = {.flags = FS_CRED_FSETID};

static int fz_mkfs(struct bd_dev *bd)
{
	struct fs_mkfs_params p;
	char why[256] = "";

	fs_mkfs_defaults(&p);
	p.slots = 2;
	p.journal_mb = 1;
	p.rgrp_mb = 2;
	p.now = 1700000000;
	memset(p.uuid, 0x5a, sizeof(p.uuid));
	return fs_mkfs(bd, &p, why, sizeof(why));
}

static int fz_mount(struct bd_dev *bd, int ro, struct fs **fs)
{
	struct fs_opts o;
	char err[256] = "";
	int ret;

	fs_opts_init(&o);
	o.cache_mb = 4;
	o.ro = ro;
	o.commit_s = 3600; /* commits only when asked: deterministic */
	ret = fs_mount_bd(bd, &o, fs, err, sizeof(err));
	if (ret < 0 && getenv("FZ_VERBOSE") != NULL)
		fprintf(stderr, "--- mount: %d %s\n", ret, err);
	return ret;
}

/* The files every image holds. */
static int fz_populate(struct fs *fs)
{
	uint64_t root = fs_root(fs);
	struct fs_attr a, d, f;
	char buf[4096], name[32];
	int ret;

	memset(buf, 'u', sizeof(buf));
	ret = fs_mkdir(fs, &fz_cred, root, "dir", 0755, &d);
	if (ret == 0)
		ret = fs_create(fs, &fz_cred, d.ino, "small", 0644, O_RDWR, &f);
	if (ret < 0)
		return ret;
	fs_write(fs, &fz_cred, f.ino, "hello, fuzz\n", 12, 0);
	fs_setxattr(fs, &fz_cred, f.ino, "user.tiny", "v", 1, 0);
	fs_setxattr(fs, &fz_cred, f.ino, "user.big", buf, 1500, 0);
	fs_release(fs, f.ino);
	fs_link(fs, &fz_cred, f.ino, root, "hardlink", &a);
	ret = fs_create(fs, &fz_cred, root, "sparse", 0600, O_RDWR, &f);
	if (ret < 0)
		return ret;
	/* every other block: one extent each, more than the inode holds */
	for (int i = 0; i < 40; i++)
		fs_write(fs, &fz_cred, f.ino, buf, sizeof(buf),
			 (uint64_t)i * 2 * sizeof(buf));
	fs_release(fs, f.ino);
	for (int i = 0; i < 48; i++) {
		snprintf(name, sizeof(name), "entry-%02d-with-a-longer-name",
			 i);
		ret =
		    fs_mknod(fs, &fz_cred, d.ino, name, S_IFREG | 0644, 0, &a);
		if (ret < 0)
			return ret;
	}
	fs_symlink(fs, &fz_cred, d.ino, "link", "../sparse", &a);
	fs_mknod(fs, &fz_cred, root, "fifo", S_IFIFO | 0600, 0, &a);
	fs_mkdir(fs, &fz_cred, d.ino, "sub", 0700, &a);
	return 0;
}

/* Blocks [from, to) that hold a valid metadata block, in order. */
static inline void fz_map_meta(struct fz_img *im, uint64_t from, uint64_t to)
{
	for (uint64_t b = from; b < to && im->nmap < FZ_MAP_MAX; b++) {
		const uint8_t *blk = im->base + b * FS_BLOCK_SIZE;

		if (fs_blk_verify(blk, 0, b) == 0)
			im->map[im->nmap++] = b;
	}
}

/* Blocks [from, to) that are not all zero, in order. */
static inline void fz_map_nonzero(struct fz_img *im, uint64_t from, uint64_t to)
{
	for (uint64_t b = from; b < to && im->nmap < FZ_MAP_MAX; b++) {
		const uint8_t *blk = im->base + b * FS_BLOCK_SIZE;
		size_t i = 0;

		while (i < FS_BLOCK_SIZE && blk[i] == 0)
			i++;
		if (i < FS_BLOCK_SIZE)
			im->map[im->nmap++] = b;
	}
}

/* Build the base image; @crash: leave the last transactions committed
 * in slot 0's journal but not written home (a node that died). */
static int fz_build(struct fz_img *im, int crash)
{
	const struct fs_sb *sb;
	struct fs *fs;
	int ret;

	memset(im, 0, sizeof(*im));
	im->base = bd_buf_alloc(FZ_DEV_BYTES);
	if (im->base == NULL || bd_ram_open(FZ_DEV_BYTES, &im->bd) < 0)
		return -ENOMEM;
	ret = fz_mkfs(im->bd);
	if (ret == 0)
		ret = fz_mount(im->bd, 0, &fs);
	if (ret == 0)
		ret = fz_populate(fs);
	if (ret < 0)
		return ret;
	if (crash) {
		struct fs_attr a;
		uint64_t root = fs_root(fs);

		/* written home, then a last batch only in the journal */
		fs_sync(fs);
		fs_rename(fs, &fz_cred, root, "sparse", root, "moved", 0);
		fs_unlink(fs, &fz_cred, root, "fifo");
		fs_mkdir(fs, &fz_cred, root, "late", 0755, &a);
		fs_setxattr(fs, &fz_cred, a.ino, "user.late", "x", 1, 0);
		fs_sync(fs);
		fs_abandon(fs);
	} else {
		ret = fs_unmount(fs);
	}
	if (ret == 0)
		ret = bd_read(im->bd, im->base, FZ_DEV_BYTES, 0);
	sb = (const void *)im->base;
	im->jstart = sb->journal_start;
	im->jblocks = sb->journal_blocks;
	im->jend = sb->journal_start + (uint64_t)sb->slot_count * im->jblocks;
	return ret;
}

/* FZ_WRITE_SEED (fz_common.h): flags 0 and every mapped block as built. */
static void fz_seed_map(const struct fz_img *im)
{
	size_t len = 1 + (size_t)im->nmap * FS_BLOCK_SIZE;
	uint8_t *seed = calloc(1, len);

	if (seed == NULL)
		return;
	for (unsigned i = 0; i < im->nmap; i++)
		memcpy(seed + 1 + (size_t)i * FS_BLOCK_SIZE,
		       im->base + im->map[i] * FS_BLOCK_SIZE, FS_BLOCK_SIZE);
	fz_write_seed(seed, len);
	free(seed);
}

/* Recompute crcs: every block with our magic, then every commit's
 * tx_crc over the blocks before it in its journal's log. */
static void fz_reseal(struct fz_img *im, uint8_t *dev)
{
	for (unsigned i = 0; i < im->nmap; i++) {
		struct fs_blk_hdr *h =
		    (void *)(dev + im->map[i] * FS_BLOCK_SIZE);

		if (h->magic == FS_MAGIC)
			fs_blk_update_crc(h);
	}
	for (unsigned i = 0; i < im->nmap; i++) {
		uint64_t b = im->map[i], j0, logn, pos;
		struct fs_jcommit *c = (void *)(dev + b * FS_BLOCK_SIZE);
		uint32_t crc = 0;

		if (b <= im->jstart || b >= im->jend ||
		    c->hdr.magic != FS_MAGIC || c->hdr.type != FS_BT_JCOMMIT)
			continue;
		j0 = im->jstart + (b - im->jstart) / im->jblocks * im->jblocks;
		logn = im->jblocks - 1;
		if (b == j0 || c->nblocks >= logn)
			continue;
		pos = b - j0 - 1; /* log index of the commit */
		for (uint64_t k = c->nblocks; k > 0; k--) {
			uint64_t p = (pos + logn - k) % logn;

			crc = fs_crc32c(crc, dev + (j0 + 1 + p) * FS_BLOCK_SIZE,
					FS_BLOCK_SIZE);
		}
		c->tx_crc = crc;
		fs_blk_update_crc(c);
	}
}

/* Work device = base image with @data[1..] over the mapped blocks. */
static int fz_load(struct fz_img *im, uint8_t *dev, const uint8_t *data,
		   size_t size)
{
	size_t off = 1;

	memcpy(dev, im->base, FZ_DEV_BYTES);
	for (unsigned i = 0; i < im->nmap && off < size; i++) {
		size_t n =
		    size - off < FS_BLOCK_SIZE ? size - off : FS_BLOCK_SIZE;

		memcpy(dev + im->map[i] * FS_BLOCK_SIZE, data + off, n);
		off += n;
	}
	if (size > 0 && !(data[0] & FZ_F_RAW))
		fz_reseal(im, dev);
	return bd_write(im->bd, dev, FZ_DEV_BYTES, 0, 0);
}

/* ---- the walk ----------------------------------------------------------- */

#define FZ_WALK_MAX 512 /* inodes visited at most */

struct fz_walk {
	struct fs *fs;
	unsigned flags;
	uint64_t seen[FZ_WALK_MAX];
	unsigned nseen;
	uint64_t queue[FZ_WALK_MAX];
	unsigned qhead, qtail;
	uint64_t ents[16]; /* of the directory being read */
	uint8_t eplus[16]; /* ... took a lookup reference */
	unsigned nents;
	uint64_t cookie; /* after the last entry taken */
};

static int fz_fill(void *arg, const struct fs_dirent *de,
		   const struct fs_attr *attr)
{
	struct fz_walk *w = arg;
	int dots =
	    (de->namelen == 1 && de->name[0] == '.') ||
	    (de->namelen == 2 && de->name[0] == '.' && de->name[1] == '.');

	if (w->nents == sizeof(w->ents) / sizeof(w->ents[0]))
		return 1;
	w->cookie = de->next;
	if (!dots) {
		/* with FS_READDIR_PLUS it took a lookup reference */
		w->eplus[w->nents] = attr != NULL;
		w->ents[w->nents++] = de->ino;
	}
	return 0;
}

static int fz_seen(struct fz_walk *w, uint64_t ino)
{
	for (unsigned i = 0; i < w->nseen; i++)
		if (w->seen[i] == ino)
			return 1;
	if (w->nseen == FZ_WALK_MAX)
		return 1;
	w->seen[w->nseen++] = ino;
	return 0;
}

static void fz_read_inode(struct fz_walk *w, uint64_t ino,
			  const struct fs_attr *a)
{
	static char buf[16384];
	char names[1024];
	ssize_t n;

	if (S_ISREG(a->mode)) {
		fs_read(w->fs, ino, buf, sizeof(buf), 0);
		if (a->size > sizeof(buf))
			fs_read(w->fs, ino, buf, sizeof(buf),
				a->size - sizeof(buf));
		fs_read(w->fs, ino, buf, 100, a->size + 4096);
	} else if (S_ISLNK(a->mode)) {
		fs_readlink(w->fs, ino, buf, sizeof(buf));
	} else if (S_ISDIR(a->mode) && w->qtail < FZ_WALK_MAX) {
		w->queue[w->qtail++] = ino;
	}
	n = fs_listxattr(w->fs, ino, names, sizeof(names));
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1)
		fs_getxattr(w->fs, ino, names + i, buf, sizeof(buf));
}

/* Read one directory in chunks (bounded: a damaged directory may hand
 * out cookies that never end); visit what it names. */
static void fz_walk_dir(struct fz_walk *w, uint64_t dir)
{
	unsigned plus = w->flags & FZ_F_PLUS ? FS_READDIR_PLUS : 0;
	uint64_t cookie = 0;

	for (int round = 0; round < 16; round++) {
		struct fs_attr a;

		w->nents = 0;
		w->cookie = cookie;
		if (fs_readdir(w->fs, dir, cookie, plus, fz_fill, w) < 0)
			return;
		for (unsigned i = 0; i < w->nents; i++) {
			uint64_t ino = w->ents[i];

			if (w->eplus[i])
				fs_forget(w->fs, ino, 1);
			if (fz_seen(w, ino) || fs_getattr(w->fs, ino, &a) < 0)
				continue;
			fz_read_inode(w, ino, &a);
		}
		if (w->nents < sizeof(w->ents) / sizeof(w->ents[0]) ||
		    w->cookie == cookie)
			return;
		cookie = w->cookie;
	}
}

static void fz_walk(struct fs *fs, unsigned flags)
{
	static struct fz_walk w;
	struct fs_attr a;

	memset(&w, 0, sizeof(w));
	w.fs = fs;
	w.flags = flags;
	fz_seen(&w, fs_root(fs));
	if (fs_getattr(fs, fs_root(fs), &a) == 0)
		fz_read_inode(&w, fs_root(fs), &a);
	while (w.qhead < w.qtail)
		fz_walk_dir(&w, w.queue[w.qhead++]);
}

/* A few namespace operations; their results do not matter. */
static void fz_ops(struct fs *fs)
{
	uint64_t root = fs_root(fs);
	struct fs_attr a, d;
	struct statvfs sv;

	fs_statfs(fs, &sv);
	if (fs_create(fs, &fz_cred, root, "new", 0644, O_RDWR, &a) == 0) {
		fs_write(fs, &fz_cred, a.ino, "data", 4, 8192);
		fs_setxattr(fs, &fz_cred, a.ino, "user.n", "1", 1, 0);
		fs_release(fs, a.ino);
	}
	if (fs_mkdir(fs, &fz_cred, root, "newdir", 0755, &d) == 0)
		fs_rename(fs, &fz_cred, root, "new", d.ino, "renamed", 0);
	fs_unlink(fs, &fz_cred, root, "hardlink");
	fs_rmdir(fs, &fz_cred, root, "dir");
	fs_rename(fs, &fz_cred, root, "sparse", root, "dir", 0);
	fs_unlink(fs, &fz_cred, root, "dir");
	if (fs_lookup(fs, root, "moved", &a) == 0) {
		struct fs_attr t = {.size = 5000};

		fs_setattr(fs, &fz_cred, a.ino, &t, FS_SET_SIZE, &d);
		fs_forget(fs, a.ino, 1);
	}
	fs_sync(fs);
}

static void fz_exercise(struct fz_img *im, unsigned flags)
{
	struct fs *fs;

	if (fz_mount(im->bd, !!(flags & FZ_F_RO), &fs) < 0)
		return;
	fz_walk(fs, flags);
	if (!(flags & (FZ_F_RO | FZ_F_NOOPS)))
		fz_ops(fs);
	fs_unmount(fs);
}

/* ---- fsck --------------------------------------------------------------- */

static int fz_fsck1(struct bd_dev *bd, int repair, struct fs_fsck_result *r,
		    int *refused)
{
	struct fs_fsck_opts o = {.max_report = 2, .repair = repair};
	char *text = NULL;
	size_t len = 0;
	int ret;

	o.out = open_memstream(&text, &len);
	ret = fs_fsck_run(bd, &o, r);
	if (o.out != NULL)
		fclose(o.out);
	if (refused != NULL)
		*refused = text != NULL && strstr(text, "no repair made");
	if (getenv("FZ_VERBOSE") != NULL && text != NULL)
		fprintf(stderr, "--- fsck %s:\n%s", repair ? "-y" : "-n", text);
	free(text);
	return ret;
}

/* fsck -n, -y, -n on the bytes fz_load wrote; -1 if the last check finds
 * problems that the repair neither fixed nor refused. */
static int fz_fsck(struct fz_img *im)
{
	struct fs_fsck_result r1, r2, r3;
	int refused = 0;

	if (fz_fsck1(im->bd, 0, &r1, NULL) < 0)
		return 0;
	if (fz_fsck1(im->bd, 1, &r2, &refused) < 0 || refused)
		return 0;
	if (fz_fsck1(im->bd, 0, &r3, NULL) < 0)
		return 0;
	if (r3.errors != 0) {
		fprintf(stderr,
			"fsck -y left %llu problem(s) (found %llu, "
			"fixed %llu) without saying why\n",
			(unsigned long long)r3.errors,
			(unsigned long long)r2.errors,
			(unsigned long long)r2.fixed);
		return -1;
	}
	return 0;
}

/* One input, start to end. An image fsck finds clean must still be clean
 * after the mount, the walk and the namespace operations. */
static void fz_run(struct fz_img *im, uint8_t *dev, const uint8_t *data,
		   size_t size)
{
	unsigned flags = size > 0 ? data[0] : 0;
	struct fs_fsck_result r;
	int clean;

	if (fz_load(im, dev, data, size) < 0)
		fz_fail("cannot load the image");
	clean = fz_fsck1(im->bd, 0, &r, NULL) == 0 && r.errors == 0;
	fz_exercise(im, flags);
	if (clean && (fz_fsck1(im->bd, 0, &r, NULL) < 0 || r.errors != 0))
		fz_fail("a clean image has %llu problem(s) after use",
			(unsigned long long)r.errors);
	if (fz_load(im, dev, data, size) < 0)
		fz_fail("cannot reload the image");
	if (fz_fsck(im) < 0)
		fz_fail("fsck -y then fsck -n is not clean");
}

/* ---- a harness ---------------------------------------------------------- */

static struct fz_img fz_im; /* built at the harness's first input */
static uint8_t *fz_dev;	    /* the work device's bytes */

/* The body of LLVMFuzzerTestOneInput of an image harness: at the first
 * input build the base image (@crash as fz_build), let @map pick the
 * blocks the input covers and write the seed (FZ_WRITE_SEED); then
 * fz_run every input. */
static int fz_image_input(const uint8_t *data, size_t size, int crash,
			  void (*map)(struct fz_img *im))
{
	if (fz_dev == NULL) {
		if (fz_build(&fz_im, crash) < 0 ||
		    (fz_dev = bd_buf_alloc(FZ_DEV_BYTES)) == NULL)
			fz_fail("cannot build the base image");
		map(&fz_im);
		fz_seed_map(&fz_im);
	}
	fz_run(&fz_im, fz_dev, data, size);
	return 0;
}

#endif /* UCFS_FZ_IMAGE_H */
