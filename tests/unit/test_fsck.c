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
 *  - seeded random byte flips in metadata blocks (--seed) never crash it
 *    (run under `make check` for ASan/UBSan).
 * Corruptions that keep a block's checksum valid reseal it with
 * fs_blk_seal, so fsck must catch the semantic error, not the crc.
 */
#include "tests/unit/harness.h"
#include "tests/unit/fs_testutil.h"

#include "fusefs/fs_format.h"
#include "fusefs/fs_fsck.h"

#include <fcntl.h>

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

static void test_bitmap_corruptions(void)
{
	struct fs_sb sb;
	uint64_t g, start, idx;

	REQUIRE(img != NULL && big_phys != 0);
	REQUIRE(rd(0) == 0);
	memcpy(&sb, blk, sizeof(sb));
	g = (big_phys - sb.rgrp_start) / sb.rgrp_blocks;
	start = sb.rgrp_start + g * sb.rgrp_blocks;
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
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Random flips in random metadata blocks (and sometimes a reseal so the
 * damage passes the crc): fsck must run to the end every time. */
static void test_fuzz(void)
{
	uint64_t meta[16], nmeta = 0, found = 0;
	struct fs_sb sb;
	void *save = bd_buf_alloc(FS_BLOCK_SIZE);

	REQUIRE(img != NULL && save != NULL);
	rng = t_seed();
	REQUIRE(rd(0) == 0);
	memcpy(&sb, blk, sizeof(sb));
	meta[nmeta++] = 0;
	meta[nmeta++] = 1;
	meta[nmeta++] = 2;
	meta[nmeta++] = sb.root_ino;
	meta[nmeta++] = f_small;
	meta[nmeta++] = f_big;
	meta[nmeta++] = d_sub;
	meta[nmeta++] = sb.rgrp_start;
	meta[nmeta++] = sb.rgrp_start + 1;
	meta[nmeta++] = sb.journal_start;
	for (int it = 0; it < 300; it++) {
		uint64_t b = meta[rnd() % nmeta];
		int nflip = 1 + (int)(rnd() % 8), errs;

		REQUIRE(rd(b) == 0);
		memcpy(save, blk, FS_BLOCK_SIZE);
		for (int k = 0; k < nflip; k++)
			((uint8_t *)blk)[32 + rnd() % (FS_BLOCK_SIZE - 32)] ^=
				(uint8_t)(1u << (rnd() % 8));
		if (rnd() % 2)
			fs_blk_update_crc(blk);
		wr(b);
		errs = fsck_errors(img, 1);
		CHECK(errs >= 0);
		found += errs > 0;
		memcpy(blk, save, FS_BLOCK_SIZE);
		wr(b);
	}
	printf("fuzz: 300 corrupted images, %llu reported problems\n",
	       (unsigned long long)found);
	CHECK(found > 100);
	CHECK_EQ(fsck_errors(img, 1), 0);
	free(save);
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
	bd_close(img);
	free(blk);
	return t_done();
}
