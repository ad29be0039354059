/*
 * test_format.c — on-disk format: crc32c, block seal/verify round trips
 * and corruption detection, superblock checks, mkfs + mount on a RAM
 * device (refusals: not ucfs, bad crc, newer version, unknown incompat
 * feature, truncated device).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fusefs/core/fs_internal.h"
#include "harness.h"

static void test_crc32c(void)
{
	static const char v[] = "123456789";
	uint8_t big[10000];
	uint32_t a, b;

	CHECK_EQ(fs_crc32c(0, v, 9), 0xe3069283u);
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7 + 3);
	/* chaining equals one pass */
	a = fs_crc32c(0, big, sizeof(big));
	b = fs_crc32c(fs_crc32c(0, big, 1234), big + 1234,
		      sizeof(big) - 1234);
	CHECK_EQ(a, b);
}

static void test_seal_verify(void)
{
	uint8_t *blk = calloc(1, FS_BLOCK_SIZE);
	uint64_t seed = t_seed();

	REQUIRE(blk != NULL);
	for (int i = 100; i < 4096; i++)
		blk[i] = (uint8_t)(i ^ seed);
	fs_blk_seal(blk, FS_BT_INODE, 1234, 7);
	CHECK_EQ(fs_blk_verify(blk, FS_BT_INODE, 1234), 0);
	CHECK_EQ(fs_blk_verify(blk, 0, 1234), 0);
	CHECK_EQ(fs_blk_verify(blk, FS_BT_BTREE, 1234), -EUCLEAN);
	CHECK_EQ(fs_blk_verify(blk, FS_BT_INODE, 1235), -EUCLEAN);
	/* flip each of a sample of bytes: always detected */
	for (unsigned i = 0; i < FS_BLOCK_SIZE; i += 97) {
		blk[i] ^= 0x10;
		CHECK_EQ(fs_blk_verify(blk, FS_BT_INODE, 1234), -EUCLEAN);
		blk[i] ^= 0x10;
	}
	CHECK_EQ(fs_blk_verify(blk, FS_BT_INODE, 1234), 0);
	CHECK(strcmp(fs_blk_type_name(FS_BT_INODE), "inode") == 0);
	CHECK(strcmp(fs_blk_type_name(99), "?") == 0);
	free(blk);
}

static struct bd_dev *ram_fs(uint64_t mb, struct fs_mkfs_params *p)
{
	struct fs_mkfs_params def;
	struct bd_dev *bd;
	char why[200];

	if (p == NULL) {
		fs_mkfs_defaults(&def);
		def.journal_mb = 4;
		def.rgrp_mb = 16;
		p = &def;
	}
	if (bd_ram_open(mb << 20, &bd) < 0)
		return NULL;
	if (fs_mkfs(bd, p, why, sizeof(why)) < 0) {
		fprintf(stderr, "mkfs: %s\n", why);
		bd_close(bd);
		return NULL;
	}
	return bd;
}

static void test_mkfs_layout(void)
{
	struct bd_dev *bd = ram_fs(100, NULL);
	struct fs_core_opts o;
	struct fs_space sp;
	struct fs_buf *b;
	struct fs *fs;
	const struct fs_dinode *di;
	char why[200];

	REQUIRE(bd != NULL);
	fs_core_opts_init(&o);
	REQUIRE(fs_core_mount(bd, &o, &fs, why, sizeof(why)) == 0);
	CHECK_EQ(fs->sb.block_size, 4096);
	CHECK_EQ(fs->sb.total_blocks, 100 * 256);
	CHECK_EQ(fs->sb.rgrp_blocks, 16 * 256);
	CHECK_EQ(fs->sb.journal_start, 5);
	CHECK(strcmp(fs->sb.lockproto, "nolock") == 0);
	REQUIRE(fs_buf_read(fs, fs->sb.root_ino, FS_BT_INODE, &b) == 0);
	di = b->data;
	CHECK_EQ(di->mode, S_IFDIR | 0755);
	CHECK_EQ(di->nlink, 2);
	CHECK_EQ(di->uid, 0);
	CHECK_EQ(di->fmt, FS_FMT_DIR_BTREE);
	fs_buf_put(b);
	for (unsigned s = 0; s < fs->sb.slot_count; s++) {
		CHECK(fs_buf_read(fs, fs_heartbeat_blk(s), FS_BT_HEARTBEAT,
				  &b) == 0);
		fs_buf_put(b);
		CHECK(fs_buf_read(fs, fs_slotinfo_blk(s), FS_BT_SLOTINFO,
				  &b) == 0);
		fs_buf_put(b);
	}
	fs_space_get(fs, &sp);
	CHECK_EQ(sp.inodes, 1);
	/* the root and the statfs records (master, a change per slot) */
	CHECK_EQ(fs->sb.feature_ro_compat, FS_FEATURE_RO_COMPAT_STATFS);
	CHECK_EQ(fs->sb.statfs_blk, fs->sb.root_ino + 1);
	CHECK(sp.free_blocks > 0 &&
	      sp.free_blocks + 2 + fs->sb.slot_count == sp.data_blocks);
	CHECK_EQ(fs_core_unmount(fs), 0);
	/* mounts again after a clean unmount */
	CHECK_EQ(fs_core_mount(bd, &o, &fs, why, sizeof(why)), 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* Rewrite the superblock after @edit and try to mount. */
static int mount_with(struct bd_dev *bd, void (*edit)(struct fs_sb *),
		      char *why, size_t whylen)
{
	struct fs_sb *sb = bd_buf_alloc(FS_BLOCK_SIZE);
	struct fs_core_opts o;
	struct fs *fs;
	int ret;

	bd_read(bd, sb, FS_BLOCK_SIZE, 0);
	edit(sb);
	bd_write(bd, sb, FS_BLOCK_SIZE, 0, 0);
	free(sb);
	fs_core_opts_init(&o);
	ret = fs_core_mount(bd, &o, &fs, why, whylen);
	if (ret == 0)
		fs_core_unmount(fs);
	return ret;
}

static void ed_none(struct fs_sb *sb)
{
	fs_blk_update_crc(sb);
}
static void ed_version(struct fs_sb *sb)
{
	sb->version = FS_FORMAT_VERSION + 1;
	fs_blk_update_crc(sb);
}
static void ed_incompat(struct fs_sb *sb)
{
	sb->feature_incompat |= 1ull << 40;
	fs_blk_update_crc(sb);
}
static void ed_flip(struct fs_sb *sb)
{
	sb->label[3] ^= 1;	/* crc not updated */
}
static void ed_magic(struct fs_sb *sb)
{
	memset(sb, 0, 64);
}
static void ed_geometry(struct fs_sb *sb)
{
	sb->rgrp_count += 5;
	fs_blk_update_crc(sb);
}

static void test_refusals(void)
{
	struct bd_dev *bd;
	struct fs_sb *orig = bd_buf_alloc(FS_BLOCK_SIZE);
	char why[200];
	static void (*const edits[])(struct fs_sb *) = {
		ed_version, ed_incompat, ed_flip, ed_magic, ed_geometry };
	/* a damaged primary (flip, geometry) mounts with the backup
	 * superblock (test_super.c); the others are refused */
	static const int want[] = { -EPROTONOSUPPORT, -EPROTONOSUPPORT,
				    0, -EINVAL, 0 };

	REQUIRE(orig != NULL);
	bd = ram_fs(64, NULL);
	REQUIRE(bd != NULL);
	bd_read(bd, orig, FS_BLOCK_SIZE, 0);
	CHECK_EQ(mount_with(bd, ed_none, why, sizeof(why)), 0);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		why[0] = '\0';
		CHECK_EQ(mount_with(bd, edits[i], why, sizeof(why)), want[i]);
		CHECK(want[i] == 0 || why[0] != '\0');
		printf("  refusal %zu: %s\n", i, why);
		bd_write(bd, orig, FS_BLOCK_SIZE, 0, 0);
	}
	free(orig);
	bd_close(bd);
}

static void test_truncated(void)
{
	struct bd_dev *big = ram_fs(64, NULL), *small;
	struct fs_core_opts o;
	struct fs *fs;
	uint8_t *buf = bd_buf_alloc(1 << 20);
	char why[200];

	REQUIRE(big != NULL && buf != NULL);
	REQUIRE(bd_ram_open(48 << 20, &small) == 0);
	for (uint64_t off = 0; off < (48u << 20); off += 1 << 20) {
		bd_read(big, buf, 1 << 20, off);
		bd_write(small, buf, 1 << 20, off, 0);
	}
	fs_core_opts_init(&o);
	CHECK_EQ(fs_core_mount(small, &o, &fs, why, sizeof(why)), -EFBIG);
	CHECK(strstr(why, "truncated") != NULL);
	bd_close(small);
	bd_close(big);
	free(buf);
}

static void test_mkfs_params(void)
{
	struct fs_mkfs_params p;
	struct bd_dev *bd;
	char why[200];

	REQUIRE(bd_ram_open(8 << 20, &bd) == 0);
	fs_mkfs_defaults(&p);
	/* 32 MiB journal does not fit in 8 MiB */
	CHECK_EQ(fs_mkfs(bd, &p, why, sizeof(why)), -ENOSPC);
	CHECK(strstr(why, "too small") != NULL);
	p.journal_mb = 1;
	p.rgrp_mb = 2;
	p.slots = 3;
	CHECK_EQ(fs_mkfs(bd, &p, why, sizeof(why)), 0);
	p.slots = 0;
	CHECK_EQ(fs_mkfs(bd, &p, why, sizeof(why)), -EINVAL);
	p.slots = 1;
	strcpy(p.lockproto, "foo");
	CHECK_EQ(fs_mkfs(bd, &p, why, sizeof(why)), -EINVAL);
	bd_close(bd);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_crc32c);
	T_RUN(test_seal_verify);
	T_RUN(test_mkfs_layout);
	T_RUN(test_refusals);
	T_RUN(test_truncated);
	T_RUN(test_mkfs_params);
	return t_done();
}
