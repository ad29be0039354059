/*
 * test_fsck.c — fsck finds what is wrong and never crashes.
 *
 * A small filesystem on a RAM device is populated through fs.h (files,
 * an extents file, directories, hard links, a symlink, an xattr), then:
 *  - the clean image checks clean;
 *  - each targeted corruption (a flipped inode byte, a bitmap bit cleared
 *    or set, a wrong link count, an extent pointing at another file's
 *    block, a bad primary superblock, a truncated device, a directory
 *    entry pointing to a non-inode) is found — and only ever reported,
 *    the check completes;
 *  - repair (fsck -y) on a copy: each fixable corruption (link counts,
 *    directory size and '..', bitmap bits both ways, an unreadable
 *    bitmap block, rgroup counts, the backup superblock) is fixed: the
 *    check is clean afterwards, no file data block changed and the files
 *    read back; the others (bad inode, bad entry, doubly used block, bad
 *    primary superblock, a lost file) are refused with nothing written;
 *    an orphan left by a crash is released with its space; and the same
 *    seeded corruptions as the fuzz are each fixed or left untouched;
 *  - a directory whose internal node's key 0 (minus infinity) is above
 *    the keys of its first child checks clean (a grown root's stale low
 *    key); keys out of order after key 0 are still found;
 *  - seeded random byte flips in metadata blocks (--seed) never crash it
 *    (run under `make check` for ASan/UBSan).
 * Corruptions that keep a block's checksum valid reseal it with
 * fs_blk_seal, so fsck must catch the semantic error, not the crc.
 */
#include "tests/unit/harness.h"
#include "tests/unit/fs_testutil.h"

#include "fusefs/fs_format.h"
#include "fusefs/fsck/fs_fsck.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#define IMG_MB 64

static struct bd_dev *img;	/* the populated, unmounted image */
static uint64_t f_small, f_big, d_sub, big_phys;
static void *blk;

static int fsck_errors(struct bd_dev *bd, int quiet)
{
	struct fs_fsck_opts o = { .out = quiet ? NULL : stdout,
				  .max_report = 5 };
	struct fs_fsck_result r;
	int ret = fs_fsck_run(bd, &o, &r);

	if (ret < 0)
		return ret;
	return r.errors > 1000000 ? 1000000 : (int)r.errors;
}

static int rd(uint64_t b)
{
	return bd_read(img, blk, FS_BLOCK_SIZE, b << FS_BLOCK_SHIFT);
}

static int wr(uint64_t b)
{
	return bd_write(img, blk, FS_BLOCK_SIZE, b << FS_BLOCK_SHIFT, 0);
}

/* Save block @b, run @fn on the buffer, write, check, restore. */
static int with_corruption(uint64_t b, void (*fn)(void *blk, uint64_t b))
{
	void *save = bd_buf_alloc(FS_BLOCK_SIZE);
	int errs;

	if (save == NULL || rd(b) < 0)
		return -EIO;
	memcpy(save, blk, FS_BLOCK_SIZE);
	fn(blk, b);
	wr(b);
	errs = fsck_errors(img, 0);
	memcpy(blk, save, FS_BLOCK_SIZE);
	wr(b);
	free(save);
	return errs;
}

static int populate(void)
{
	struct tfs t;
	struct fs_attr a;
	char data[65536];
	int ret;

	ret = tfs_open(&t, IMG_MB);
	if (ret < 0)
		return ret;
	memset(data, 'x', sizeof(data));
	ret = fs_create(t.fs, &t.root_cred, t.root, "small", 0644, O_RDWR,
			&a);
	if (ret < 0)
		return ret;
	f_small = a.ino;
	fs_write(t.fs, &t.root_cred, f_small, "hello", 5, 0);
	fs_release(t.fs, f_small);
	ret = fs_mkdir(t.fs, &t.root_cred, t.root, "sub", 0755, &a);
	if (ret < 0)
		return ret;
	d_sub = a.ino;
	ret = fs_create(t.fs, &t.root_cred, d_sub, "big", 0644, O_RDWR, &a);
	if (ret < 0)
		return ret;
	f_big = a.ino;
	for (int i = 0; i < 4; i++)
		fs_write(t.fs, &t.root_cred, f_big, data, sizeof(data),
			 (uint64_t)i * sizeof(data));
	fs_release(t.fs, f_big);
	fs_link(t.fs, &t.root_cred, f_big, t.root, "biglink", &a);
	fs_symlink(t.fs, &t.root_cred, d_sub, "sl", "../small", &a);
	fs_mkdir(t.fs, &t.root_cred, d_sub, "deeper", 0700, &a);
	fs_setxattr(t.fs, &t.root_cred, f_small, "user.k", "v", 1, 0);
	ret = fs_unmount(t.fs);
	img = t.bd;
	return ret;
}

static void test_clean(void)
{
	const struct fs_dinode *di = blk;
	struct fs_extent_val e;

	REQUIRE(populate() == 0);
	CHECK_EQ(fsck_errors(img, 0), 0);
	/* the big file's first data block, from its inline extent root */
	REQUIRE(rd(f_big) == 0);
	REQUIRE(di->fmt == FS_FMT_EXTENTS);
	{
		const struct fs_btree_nhdr *nh = (const void *)di->inline_area;
		const struct fs_btree_leaf_slot *sl = (const void *)(nh + 1);

		REQUIRE(nh->level == 0 && nh->nkeys >= 1);
		memcpy(&e, di->inline_area + sl[0].off, sizeof(e));
		big_phys = e.phys;
	}
	CHECK(big_phys != 0);
}

static void flip_byte(void *b, uint64_t n)
{
	(void)n;
	((uint8_t *)b)[200] ^= 0x40;
}

static void bad_nlink(void *b, uint64_t n)
{
	struct fs_dinode *di = b;

	di->nlink += 1;
	fs_blk_seal(b, FS_BT_INODE, n, di->hdr.seq);
}

static void test_inode_corruptions(void)
{
	REQUIRE(img != NULL);
	CHECK(with_corruption(f_small, flip_byte) > 0);
	CHECK(with_corruption(f_small, bad_nlink) > 0);
	CHECK(with_corruption(d_sub, bad_nlink) > 0);
	CHECK_EQ(fsck_errors(img, 1), 0);	/* restored */
}

/* Toggle the bitmap bit of block big_phys (+1 set a free one). */
static uint64_t bm_target;
static void toggle_bit(void *b, uint64_t n)
{
	struct fs_bitmap_blk *bm = b;
	uint64_t i = bm_target;

	bm->bits[(i % FS_BITMAP_BITS) / 8] ^= (uint8_t)(1u << (i % 8));
	fs_blk_seal(b, FS_BT_BITMAP, n, bm->hdr.seq);
}

/* The superblock and the group holding big_phys: its number and first
 * block. 0, or -1 before test_clean found big_phys. */
static int big_group(struct fs_sb *sb, uint64_t *g, uint64_t *start)
{
	if (img == NULL || big_phys == 0 || rd(0) < 0)
		return -1;
	memcpy(sb, blk, sizeof(*sb));
	*g = (big_phys - sb->rgrp_start) / sb->rgrp_blocks;
	*start = sb->rgrp_start + *g * sb->rgrp_blocks;
	return 0;
}

static void test_bitmap_corruptions(void)
{
	struct fs_sb sb;
	uint64_t g, start, idx;

	REQUIRE(big_group(&sb, &g, &start) == 0);
	idx = big_phys - start;
	bm_target = idx;	/* used block -> marked free */
	CHECK(with_corruption(start + 1 + idx / FS_BITMAP_BITS,
			      toggle_bit) > 0);
	/* the last block of the group is free on this small image */
	idx = fs_rgrp_len(&sb, (uint32_t)g) - 1;
	bm_target = idx;	/* free block -> marked used: leaked */
	CHECK(with_corruption(start + 1 + idx / FS_BITMAP_BITS,
			      toggle_bit) > 0);
	CHECK_EQ(fsck_errors(img, 1), 0);
}

/* Redirect the root directory's entry for "small" to a data block. */
static void entry_to_data(void *b, uint64_t n)
{
	struct fs_dinode *di = b;
	const struct fs_btree_nhdr *nh = (const void *)di->inline_area;
	const struct fs_btree_leaf_slot *sl = (const void *)(nh + 1);

	for (unsigned i = 0; i < nh->nkeys; i++) {
		struct fs_dirent_val v;
		uint8_t *p = di->inline_area + sl[i].off;

		memcpy(&v, p, sizeof(v));
		if (v.ino == f_small) {
			v.ino = big_phys;
			memcpy(p, &v, sizeof(v));
		}
	}
	fs_blk_seal(b, FS_BT_INODE, n, di->hdr.seq);
}

static void extent_dup(void *b, uint64_t n)
{
	struct fs_dinode *di = b;
	const struct fs_btree_nhdr *nh = (const void *)di->inline_area;
	const struct fs_btree_leaf_slot *sl = (const void *)(nh + 1);
	struct fs_extent_val e;

	memcpy(&e, di->inline_area + sl[0].off, sizeof(e));
	e.phys += 1; /* first block leaked, one past the end claimed */
	memcpy(di->inline_area + sl[0].off, &e, sizeof(e));
	fs_blk_seal(b, FS_BT_INODE, n, di->hdr.seq);
}

static void test_namespace_corruptions(void)
{
	struct fs_sb sb;

	REQUIRE(img != NULL && big_phys != 0);
	REQUIRE(rd(0) == 0);
	memcpy(&sb, blk, sizeof(sb));
	CHECK(with_corruption(sb.root_ino, entry_to_data) > 0);
	CHECK(with_corruption(f_big, extent_dup) > 0);
	CHECK_EQ(fsck_errors(img, 1), 0);
}

static void sb_garbage(void *b, uint64_t n)
{
	(void)n;
	memset((uint8_t *)b + 40, 0xa5, 64);
}

static void test_superblock(void)
{
	struct bd_dev *small;
	void *b = bd_buf_alloc(FS_BLOCK_SIZE);

	REQUIRE(img != NULL && b != NULL);
	/* bad primary: reported, the backup takes over, walk completes */
	CHECK_EQ(with_corruption(0, sb_garbage), 1);
	CHECK(with_corruption(1, sb_garbage) >= 1);
	/* a truncated device: reported, no crash */
	REQUIRE(bd_ram_open(8u << 20, &small) == 0);
	for (uint64_t i = 0; i < 2048; i++) {
		bd_read(img, b, FS_BLOCK_SIZE, i << FS_BLOCK_SHIFT);
		bd_write(small, b, FS_BLOCK_SIZE, i << FS_BLOCK_SHIFT, 0);
	}
	CHECK(fsck_errors(small, 0) > 0);
	bd_close(small);
	free(b);
}

static uint64_t rng;
static uint64_t rnd(void)
{
	return t_splitmix(&rng);
}

/* The blocks the fuzz corrupts; returns how many. */
static unsigned fuzz_targets(uint64_t *meta)
{
	struct fs_sb sb;
	unsigned n = 0;

	if (rd(0) < 0)
		return 0;
	memcpy(&sb, blk, sizeof(sb));
	meta[n++] = 0;
	meta[n++] = 1;
	meta[n++] = 2;
	meta[n++] = sb.root_ino;
	meta[n++] = f_small;
	meta[n++] = f_big;
	meta[n++] = d_sub;
	meta[n++] = sb.rgrp_start;
	meta[n++] = sb.rgrp_start + 1;
	meta[n++] = sb.journal_start;
	return n;
}

/* One fuzz corruption of @b (1-8 bit flips, a fresh crc half of the
 * time), drawn from rng: the same seed gives the same sequence. */
static void fuzz_flips(void *b, uint64_t n)
{
	int nflip = 1 + (int)(rnd() % 8);

	(void)n;
	for (int k = 0; k < nflip; k++)
		((uint8_t *)b)[32 + rnd() % (FS_BLOCK_SIZE - 32)] ^=
			(uint8_t)(1u << (rnd() % 8));
	if (rnd() % 2)
		fs_blk_update_crc(b);
}

#define NFUZZ 300

/* Random flips in random metadata blocks (and sometimes a reseal so the
 * damage passes the crc): fsck must run to the end every time. */
static void test_fuzz(void)
{
	uint64_t meta[16], found = 0;
	unsigned nmeta = fuzz_targets(meta);
	void *save = bd_buf_alloc(FS_BLOCK_SIZE);

	REQUIRE(img != NULL && save != NULL && nmeta > 0);
	rng = t_seed();
	for (int it = 0; it < NFUZZ; it++) {
		uint64_t b = meta[rnd() % nmeta];
		int errs;

		REQUIRE(rd(b) == 0);
		memcpy(save, blk, FS_BLOCK_SIZE);
		fuzz_flips(blk, b);
		wr(b);
		errs = fsck_errors(img, 1);
		CHECK(errs >= 0);
		found += errs > 0;
		memcpy(blk, save, FS_BLOCK_SIZE);
		wr(b);
	}
	printf("fuzz: %d corrupted images, %llu reported problems\n", NFUZZ,
	       (unsigned long long)found);
	CHECK(found > 100);
	CHECK_EQ(fsck_errors(img, 1), 0);
	free(save);
}

/* ---- repair (fsck -y) ------------------------------------------------- */

static struct bd_dev *work, *snap;	/* scratch devices for repairs */

/* The scratch devices, opened once. 0 or -errno. */
static int scratch_open(void)
{
	if (work == NULL && bd_ram_open(bd_size(img), &work) < 0)
		return -ENOMEM;
	if (snap == NULL && bd_ram_open(bd_size(img), &snap) < 0)
		return -ENOMEM;
	return 0;
}

/* Copy device @src onto @dst (same size). */
static void copy_dev(struct bd_dev *dst, struct bd_dev *src)
{
	static uint8_t *buf;

	if (buf == NULL)
		buf = bd_buf_alloc(1 << 20);
	for (uint64_t off = 0; buf != NULL && off < bd_size(src);
	     off += 1 << 20) {
		bd_read(src, buf, 1 << 20, off);
		bd_write(dst, buf, 1 << 20, off, 0);
	}
}

static int fsck_with(struct bd_dev *bd, int repair, int quiet,
		     struct fs_fsck_result *r)
{
	struct fs_fsck_opts o = { .out = quiet ? NULL : stdout,
				  .max_report = 5, .repair = repair };

	return fs_fsck_run(bd, &o, r);
}

/* 1 if no block of @bd but @except differs from @orig, unless it was a
 * metadata block there (valid header): file data is never rewritten. */
static int data_untouched(struct bd_dev *bd, struct bd_dev *orig,
			  uint64_t except)
{
	uint8_t *a = bd_buf_alloc(FS_BLOCK_SIZE);
	uint8_t *b = bd_buf_alloc(FS_BLOCK_SIZE);
	int ok = a != NULL && b != NULL;

	for (uint64_t n = 0; ok && n < bd_size(bd) / FS_BLOCK_SIZE; n++) {
		bd_read(bd, a, FS_BLOCK_SIZE, n << FS_BLOCK_SHIFT);
		bd_read(orig, b, FS_BLOCK_SIZE, n << FS_BLOCK_SHIFT);
		if (n != except && memcmp(a, b, FS_BLOCK_SIZE) != 0 &&
		    fs_blk_verify(b, 0, n) != 0) {
			fprintf(stderr, "data block %llu changed\n",
				(unsigned long long)n);
			ok = 0;
		}
	}
	free(a);
	free(b);
	return ok;
}

/* 1 if "small", "sub/big" and "biglink" read back as written. */
static int files_intact(struct bd_dev *bd)
{
	static uint8_t buf[4 * 65536];
	struct fs_attr a, s, l;
	struct fs_opts o;
	struct fs *fs;
	char err[200];
	int ok;

	fs_opts_init(&o);
	o.cache_mb = 8;
	if (fs_mount_bd(bd, &o, &fs, err, sizeof(err)) < 0) {
		fprintf(stderr, "mount after repair: %s\n", err);
		return 0;
	}
	ok = fs_lookup(fs, fs_root(fs), "small", &a) == 0 &&
	     fs_read(fs, a.ino, buf, 16, 0) == 5 &&
	     memcmp(buf, "hello", 5) == 0;
	ok = ok && fs_lookup(fs, fs_root(fs), "sub", &s) == 0 &&
	     fs_lookup(fs, s.ino, "big", &a) == 0 &&
	     fs_lookup(fs, fs_root(fs), "biglink", &l) == 0 &&
	     l.ino == a.ino && a.nlink == 2 &&
	     fs_read(fs, a.ino, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf);
	for (size_t i = 0; ok && i < sizeof(buf); i++)
		ok = buf[i] == 'x';
	return fs_unmount(fs) == 0 && ok;
}

/*
 * On a copy of the image: corrupt block @b with @fn, repair. Returns 1
 * if the repair fixed it (then a check is clean, no file data changed
 * and the files read back), 0 if it refused (then nothing was written),
 * 2 if fsck saw no problem (and wrote nothing), -1 on any failure.
 */
static int repair_case(uint64_t b, void (*fn)(void *blk, uint64_t b))
{
	struct fs_fsck_result r;

	if (scratch_open() < 0)
		return -1;
	copy_dev(work, img);
	bd_read(work, blk, FS_BLOCK_SIZE, b << FS_BLOCK_SHIFT);
	fn(blk, b);
	bd_write(work, blk, FS_BLOCK_SIZE, b << FS_BLOCK_SHIFT, 0);
	copy_dev(snap, work);
	if (fsck_with(work, 1, 1, &r) < 0)
		return -1;
	if (r.errors == 0)	/* the damage is invisible to fsck */
		return r.blocks_written == 0 ? 2 : -1;
	if (r.fixed == 0)
		return r.blocks_written == 0 &&
		       data_untouched(work, snap, ~0ull) ? 0 : -1;
	if (fsck_with(work, 0, 0, &r) == 0 && r.errors == 0 &&
	    data_untouched(work, img, b) && files_intact(work))
		return 1;
	return -1;
}

static void dir_size(void *b, uint64_t n)
{
	struct fs_dinode *di = b;

	di->size += 3;
	fs_blk_seal(b, FS_BT_INODE, n, di->hdr.seq);
}

static void dir_parent(void *b, uint64_t n)
{
	struct fs_dinode *di = b;

	di->parent = f_small;
	fs_blk_seal(b, FS_BT_INODE, n, di->hdr.seq);
}

static void rgrp_counts(void *b, uint64_t n)
{
	struct fs_rgrp_hdr *rh = b;

	rh->free -= 7;
	rh->dinodes += 2;
	fs_blk_seal(b, FS_BT_RGRP, n, rh->hdr.seq);
}

static void test_repair_fixable(void)
{
	struct fs_sb sb;
	uint64_t g, start, idx;

	REQUIRE(big_group(&sb, &g, &start) == 0);
	CHECK_EQ(repair_case(f_small, bad_nlink), 1);
	CHECK_EQ(repair_case(f_big, bad_nlink), 1);
	CHECK_EQ(repair_case(d_sub, bad_nlink), 1);
	CHECK_EQ(repair_case(d_sub, dir_size), 1);
	CHECK_EQ(repair_case(d_sub, dir_parent), 1);
	CHECK_EQ(repair_case(1, sb_garbage), 1);
	CHECK_EQ(repair_case(start, rgrp_counts), 1);
	idx = big_phys - start;
	bm_target = idx;	/* used block marked free */
	CHECK_EQ(repair_case(start + 1 + idx / FS_BITMAP_BITS, toggle_bit),
		 1);
	idx = fs_rgrp_len(&sb, (uint32_t)g) - 1;
	bm_target = idx;	/* leaked block */
	CHECK_EQ(repair_case(start + 1 + idx / FS_BITMAP_BITS, toggle_bit),
		 1);
	/* an unreadable bitmap block is rebuilt */
	CHECK_EQ(repair_case(start + 1, flip_byte), 1);
}

static void test_repair_refuses(void)
{
	struct fs_sb sb;

	REQUIRE(img != NULL && big_phys != 0);
	REQUIRE(rd(0) == 0);
	memcpy(&sb, blk, sizeof(sb));
	CHECK_EQ(repair_case(f_small, flip_byte), 0);	/* bad inode */
	CHECK_EQ(repair_case(sb.root_ino, entry_to_data), 0);
	CHECK_EQ(repair_case(f_big, extent_dup), 0);
	CHECK_EQ(repair_case(0, sb_garbage), 0);	/* bad superblock */
}

/* A valid inode with links in a block marked used that nothing names (a
 * lost file): fsck says so, and -y refuses to free it. */
static void test_repair_lost_file(void)
{
	struct fs_fsck_result r;
	struct fs_dinode *di = blk;
	struct fs_sb sb;
	uint64_t g, start, idx, lost, bmb;
	char *out = NULL;
	size_t outlen;
	struct fs_fsck_opts o = { .max_report = 5 };

	REQUIRE(big_group(&sb, &g, &start) == 0 && scratch_open() == 0);
	idx = fs_rgrp_len(&sb, (uint32_t)g) - 1;	/* free on this image */
	lost = start + idx;
	bmb = start + 1 + idx / FS_BITMAP_BITS;
	copy_dev(work, img);
	REQUIRE(bd_read(work, blk, FS_BLOCK_SIZE, f_small << FS_BLOCK_SHIFT)
		== 0);
	fs_blk_seal(di, FS_BT_INODE, lost, di->hdr.seq);
	bd_write(work, blk, FS_BLOCK_SIZE, lost << FS_BLOCK_SHIFT, 0);
	bd_read(work, blk, FS_BLOCK_SIZE, bmb << FS_BLOCK_SHIFT);
	bm_target = idx;
	toggle_bit(blk, bmb);
	bd_write(work, blk, FS_BLOCK_SIZE, bmb << FS_BLOCK_SHIFT, 0);
	o.out = open_memstream(&out, &outlen);
	REQUIRE(o.out != NULL);
	REQUIRE(fs_fsck_run(work, &o, &r) == 0);
	fclose(o.out);
	CHECK(r.errors > 0);
	CHECK(strstr(out, "a lost file") != NULL);
	free(out);
	REQUIRE(fsck_with(work, 1, 1, &r) == 0);
	CHECK_EQ(r.fixed, 0);
	CHECK_EQ(r.blocks_written, 0);
	REQUIRE(fsck_with(work, 0, 1, &r) == 0);
	CHECK(r.errors > 0);	/* still there */
}

/* A file unlinked while open, then a crash: fsck -y replays the journal,
 * releases the orphan (its blocks free again) and leaves a clean image
 * with all the space back. */
static void test_repair_orphans(void)
{
	static char data[4 * 65536];
	struct fs_fsck_result r;
	struct statvfs st0, st1;
	struct fs_attr a;
	struct tfs t;

	REQUIRE(tfs_open(&t, 32) == 0);
	REQUIRE(fs_statfs(t.fs, &st0) == 0);
	REQUIRE(fs_create(t.fs, &t.root_cred, t.root, "o", 0644, O_RDWR,
			  &a) == 0);
	memset(data, 'o', sizeof(data));
	CHECK_EQ(fs_write(t.fs, &t.root_cred, a.ino, data, sizeof(data), 0),
		 sizeof(data));
	REQUIRE(fs_unlink(t.fs, &t.root_cred, t.root, "o") == 0);
	REQUIRE(fs_sync(t.fs) == 0);
	fs_abandon(t.fs);	/* crash with "o" still open */
	t.fs = NULL;
	REQUIRE(fsck_with(t.bd, 0, 1, &r) == 0);
	CHECK_EQ(r.errors, 0);
	CHECK_EQ(r.orphans, 1);
	REQUIRE(fsck_with(t.bd, 1, 0, &r) == 0);
	CHECK_EQ(r.errors, 0);
	CHECK_EQ(r.orphans_freed, 1);
	CHECK(r.replayed_tx > 0);
	REQUIRE(fsck_with(t.bd, 0, 0, &r) == 0);
	CHECK_EQ(r.errors, 0);
	CHECK_EQ(r.orphans, 0);
	CHECK_EQ(r.journal_tx, 0);
	REQUIRE(tfs_mount(&t) == 0);
	REQUIRE(fs_statfs(t.fs, &st1) == 0);
	CHECK_EQ(st1.f_bfree, st0.f_bfree);
	CHECK_EQ(st1.f_ffree, st0.f_ffree);
	CHECK(tfs_lookup(&t, t.root, "o") == -ENOENT);
	tfs_close(&t);
}

/* The fuzz corruptions again (the same seed, the same NFUZZ images),
 * repaired: each one is fixed (check clean afterwards, no file data
 * changed, files read back), or left exactly as it was. */
static void test_repair_fuzz(void)
{
	uint64_t meta[16], n[4] = { 0 }, bad = 0;
	unsigned nmeta = fuzz_targets(meta);

	REQUIRE(img != NULL && nmeta > 0);
	rng = t_seed();
	for (int it = 0; it < NFUZZ; it++) {
		uint64_t b = meta[rnd() % nmeta];
		int ret = repair_case(b, fuzz_flips);

		if (ret < 0) {
			fprintf(stderr, "repair fuzz: image %d (block %llu) "
				"failed\n", it, (unsigned long long)b);
			bad++;
		} else {
			n[ret]++;
		}
	}
	printf("repair fuzz: %d corrupted images: %llu fixed, %llu refused "
	       "(left unchanged), %llu not seen by fsck, %llu failed\n",
	       NFUZZ, (unsigned long long)n[1], (unsigned long long)n[0],
	       (unsigned long long)n[2], (unsigned long long)bad);
	CHECK_EQ(bad, 0);
	CHECK(n[1] > 0);
}

/* ---- a stale low key ---------------------------------------------------
 * Key 0 of an internal node is minus infinity (FORMAT.md): a root grown
 * over a leaf keeps that leaf's first key there, and a smaller key that
 * arrives later lands in child 0, so child 0 splits at a separator below
 * key 0. That tree is well formed; fsck must check it clean (it reported
 * "internal keys out of order" and every entry a lost file).
 */

#define LOWKEY_SPLIT (1ull << 61) /* dirkey hashes are below 2^62 */

/* Make @n names of directory @dir whose key is >= LOWKEY_SPLIT (@high) or
 * below it; *seq numbers the candidate names. */
static int lowkey_names(struct tfs *t, uint64_t dir, int high, int n,
			unsigned *seq)
{
	struct fs_attr a;
	char name[32];

	while (n > 0) {
		int len = snprintf(name, sizeof(name), "name-%06u", (*seq)++);
		uint64_t h = fs_dirkey_hash(name, (size_t)len);
		int ret;

		if ((h >= LOWKEY_SPLIT) != high)
			continue;
		ret = fs_mknod(t->fs, &t->root_cred, dir, name, S_IFREG | 0644,
			       0, &a);
		if (ret < 0)
			return ret;
		n--;
	}
	return 0;
}

/* Keys 0 and 1 of @dir's inline root, from the device. */
static int lowkey_root(struct bd_dev *bd, uint64_t dir, uint64_t *k0,
		       uint64_t *k1, unsigned *level)
{
	const struct fs_dinode *di = blk;
	const struct fs_btree_nhdr *nh = (const void *)di->inline_area;
	const struct fs_btree_ptr *p = (const void *)(nh + 1);

	if (bd_read(bd, blk, FS_BLOCK_SIZE, dir << FS_BLOCK_SHIFT) < 0)
		return -EIO;
	*level = nh->level;
	if (nh->level == 0 || nh->nkeys < 2)
		return -ENOENT;
	*k0 = p[0].key;
	*k1 = p[1].key;
	return 0;
}

static void test_stale_low_key(void)
{
	unsigned seq = 0, level = 0;
	uint64_t dir, k0 = 0, k1 = 0;
	struct fs_attr a;
	struct tfs t;

	REQUIRE(tfs_open(&t, IMG_MB) == 0);
	REQUIRE(fs_mkdir(t.fs, &t.root_cred, t.root, "d", 0755, &a) == 0);
	dir = a.ino;
	/* high keys first: the root grows, key 0 >= LOWKEY_SPLIT ... */
	REQUIRE(lowkey_names(&t, dir, 1, 300, &seq) == 0);
	/* ... then low keys: child 0 splits below key 0 */
	REQUIRE(lowkey_names(&t, dir, 0, 600, &seq) == 0);
	REQUIRE(fs_unmount(t.fs) == 0);
	REQUIRE(lowkey_root(t.bd, dir, &k0, &k1, &level) == 0);
	CHECK(level >= 1);
	CHECK(k1 < k0); /* the case this test is about */
	CHECK_EQ(fsck_errors(t.bd, 0), 0);
	/* a real disorder (keys 1 and 2 swapped) is still found */
	{
		struct fs_dinode *di = blk;
		struct fs_btree_nhdr *nh = (void *)di->inline_area;
		struct fs_btree_ptr *p = (void *)(nh + 1), x;

		REQUIRE(nh->nkeys >= 3);
		x = p[1];
		p[1] = p[2];
		p[2] = x;
		fs_blk_seal(blk, FS_BT_INODE, dir, di->hdr.seq);
		REQUIRE(bd_write(t.bd, blk, FS_BLOCK_SIZE,
				 dir << FS_BLOCK_SHIFT, 0) == 0);
		CHECK(fsck_errors(t.bd, 1) > 0);
	}
	bd_close(t.bd);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	blk = bd_buf_alloc(FS_BLOCK_SIZE);
	T_RUN(test_clean);
	T_RUN(test_inode_corruptions);
	T_RUN(test_bitmap_corruptions);
	T_RUN(test_namespace_corruptions);
	T_RUN(test_superblock);
	T_RUN(test_fuzz);
	T_RUN(test_repair_fixable);
	T_RUN(test_repair_refuses);
	T_RUN(test_repair_lost_file);
	T_RUN(test_repair_orphans);
	T_RUN(test_repair_fuzz);
	T_RUN(test_stale_low_key);
	bd_close(img);
	if (work != NULL)
		bd_close(work);
	if (snap != NULL)
		bd_close(snap);
	free(blk);
	return t_done();
}
