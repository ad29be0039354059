/*
 * test_falloc.c — unwritten extents and the fallocate modes, lseek
 * SEEK_DATA/SEEK_HOLE and copy_file_range through fs.h on a RAM device:
 * preallocation writes no data and reads zeros without device reads even
 * over blocks full of stale bytes, writes convert (and merge) what they
 * cover, every mode against ext4's errnos, and a seeded random sequence
 * of all of them against an in-memory model, fsck clean after it.
 */
#include "tests/unit/fs_testutil.h"
#include "tests/unit/harness.h"

#include "fusefs/fs_format.h"
#include "fusefs/fs_fsck.h"
#include "fusefs/fs_ns.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#define MB (1u << 20)
#define STALE 0xEE

static int is_zero(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0)
			return 0;
	return 1;
}

static uint64_t dev_read_bytes(struct tfs *t)
{
	struct bd_stats s;

	bd_stats_get(t->bd, &s);
	return s.read.bytes;
}

/* Unmount, fsck (0 errors), mount again. */
static int fsck_remount(struct tfs *t)
{
	struct fs_fsck_opts o = {.out = NULL};
	struct fs_fsck_result r;
	int ret = fs_unmount(t->fs);

	t->fs = NULL;
	if (ret < 0)
		return ret;
	ret = fs_fsck_run(t->bd, &o, &r);
	if (ret == 0 && r.errors != 0) {
		o.out = stderr;
		fs_fsck_run(t->bd, &o, &r);
		ret = -EUCLEAN;
	}
	return ret < 0 ? ret : tfs_mount(t);
}

/* Extent @i (in key order) of file @ino: 0, or -ENOENT past the last. */
static int nth_extent(struct tfs *t, uint64_t ino, unsigned i, struct fs_ext *e)
{
	struct fs_btree bt;
	struct fs_buf *ib;
	uint64_t lb = 0, hole_end;
	int ret = fs_ino_read(t->fs, ino, &ib);

	if (ret < 0)
		return ret;
	fs_ext_tree(t->fs, ib, &bt);
	for (;;) {
		ret = fs_ext_map(&bt, lb, e, &hole_end);
		if (ret == -ENOENT && hole_end < FS_LB_END) {
			lb = hole_end;
			continue;
		}
		if (ret < 0 || i-- == 0)
			break;
		lb = e->lb + e->len;
	}
	fs_buf_put(ib);
	return ret;
}

static unsigned count_extents(struct tfs *t, uint64_t ino)
{
	struct fs_ext e;
	unsigned n = 0;

	while (nth_extent(t, ino, n, &e) == 0)
		n++;
	return n;
}

/* Fill the free space with STALE bytes in a file, then delete
 * it: the blocks fallocate hands out next hold stale data. */
static void leave_stale(struct tfs *t)
{
	static char buf[MB];
	int64_t f = tfs_creat(t, t->root, "stale", 0644);
	ssize_t n = MB;

	REQUIRE(f > 0);
	memset(buf, STALE, sizeof(buf));
	for (uint64_t off = 0; n == MB; off += MB) /* until ENOSPC */
		n = fs_write(t->fs, tfs_cred(t), (uint64_t)f, buf, MB, off);
	REQUIRE(n == -ENOSPC || n >= 0);
	REQUIRE(fs_fsync(t->fs, (uint64_t)f, 0) == 0);
	fs_release(t->fs, (uint64_t)f);
	REQUIRE(fs_unlink(t->fs, tfs_cred(t), t->root, "stale") == 0);
	fs_forget(t->fs, (uint64_t)f, 1);
	REQUIRE(fs_sync(t->fs) == 0);
}

/* Stale device bytes under the unwritten extents of @ino (proves the
 * zeros read are not a coincidence). */
static uint64_t stale_blocks(struct tfs *t, uint64_t ino)
{
	char *blk = bd_buf_alloc(4096);
	struct fs_ext e;
	uint64_t n = 0;

	if (blk == NULL)
		return 0;
	for (unsigned i = 0; nth_extent(t, ino, i, &e) == 0; i++)
		for (uint32_t k = 0; k < e.len; k++)
			if ((e.flags & FS_EXT_UNWRITTEN) &&
			    bd_read(t->bd, blk, 4096, (e.phys + k) * 4096) ==
				0 &&
			    (unsigned char)blk[0] == STALE)
				n++;
	free(blk);
	return n;
}

static void test_unwritten(void)
{
	static char buf[4 * MB];
	struct fs_attr a;
	uint64_t r0, w0;
	struct fs_ext e;
	struct tfs t;
	int64_t f;

	REQUIRE(tfs_open(&t, 64) == 0);
	leave_stale(&t);
	f = tfs_creat(&t, t.root, "f", 0644);
	REQUIRE(f > 0);
	w0 = t.fs->st.data_bytes;
	CHECK_EQ(fs_fallocate(t.fs, tfs_cred(&t), (uint64_t)f, 0, 0, 4 * MB),
		 0);
	CHECK_EQ(t.fs->st.data_bytes, w0); /* no data written */
	a = tfs_stat(&t, (uint64_t)f);
	CHECK_EQ(a.size, 4 * MB);
	CHECK_EQ(a.blocks, 4 * MB / 512);
	CHECK(count_extents(&t, (uint64_t)f) <= 2);
	CHECK(stale_blocks(&t, (uint64_t)f) > 0);
	r0 = dev_read_bytes(&t);
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, buf, sizeof(buf), 0), 4 * MB);
	CHECK(is_zero(buf, sizeof(buf)));
	CHECK_EQ(dev_read_bytes(&t), r0); /* no device read */
	/* a small write converts its block only: zeros around the data */
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)f, "data", 4, 5000), 4);
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, buf, 12288, 0), 12288);
	CHECK(is_zero(buf, 5000) && memcmp(buf + 5000, "data", 4) == 0 &&
	      is_zero(buf + 5004, 12288 - 5004));
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).blocks, 4 * MB / 512);
	REQUIRE(nth_extent(&t, (uint64_t)f, 1, &e) == 0);
	CHECK(e.lb == 1 && e.len == 1 && e.flags == 0);
	REQUIRE(fsck_remount(&t) == 0);
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, buf, 12288, 0), 12288);
	CHECK(is_zero(buf, 5000) && memcmp(buf + 5000, "data", 4) == 0 &&
	      is_zero(buf + 5004, 12288 - 5004));
	/* writing it all front to back merges the conversions */
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i % 251 + 1);
	for (uint64_t off = 0; off < 4 * MB; off += 65536 + 17)
		CHECK(fs_write(t.fs, tfs_cred(&t), (uint64_t)f, buf + off,
			       4 * MB - off < 65553 ? 4 * MB - off : 65553,
			       off) > 0);
	CHECK(count_extents(&t, (uint64_t)f) <= 2);
	CHECK_EQ(stale_blocks(&t, (uint64_t)f), 0);
	REQUIRE(fsck_remount(&t) == 0);
	memset(buf, 0, sizeof(buf));
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, buf, sizeof(buf), 0), 4 * MB);
	for (size_t i = 0; i < sizeof(buf); i++)
		if (buf[i] != (char)(i % 251 + 1)) {
			CHECK(!"data back after conversion");
			break;
		}
	tfs_close(&t);
}

/* KEEP_SIZE past EOF, truncate into an unwritten extent, writes past
 * the old EOF. */
static void test_unwritten_keep_size(void)
{
	static char buf[65536];
	struct fs_attr in, o;
	struct tfs t;
	int64_t f;

	REQUIRE(tfs_open(&t, 64) == 0);
	leave_stale(&t);
	f = tfs_creat(&t, t.root, "k", 0644);
	REQUIRE(f > 0);
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)f, "abc", 3, 0), 3);
	CHECK_EQ(fs_fallocate(t.fs, tfs_cred(&t), (uint64_t)f,
			      FALLOC_FL_KEEP_SIZE, 0, 2 * MB),
		 0);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).size, 3);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).blocks, 2 * MB / 512);
	CHECK(stale_blocks(&t, (uint64_t)f) > 0);
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, buf, 10, 0), 3);
	/* extend into the preallocation: zeros up to the new data */
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)f, "xyz", 3, 100000),
		 3);
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, buf, sizeof(buf), 4), 65536);
	CHECK(is_zero(buf, sizeof(buf)));
	memset(&in, 0, sizeof(in));
	in.size = 3 * MB; /* up: the preallocation stays */
	CHECK_EQ(
	    fs_setattr(t.fs, tfs_cred(&t), (uint64_t)f, &in, FS_SET_SIZE, &o),
	    0);
	CHECK_EQ(o.blocks, 2 * MB / 512);
	in.size = 1 * MB + 100; /* down into the unwritten extent */
	CHECK_EQ(
	    fs_setattr(t.fs, tfs_cred(&t), (uint64_t)f, &in, FS_SET_SIZE, &o),
	    0);
	CHECK_EQ(o.blocks, (1 * MB + 4096) / 512);
	in.size = 2 * MB;
	CHECK_EQ(
	    fs_setattr(t.fs, tfs_cred(&t), (uint64_t)f, &in, FS_SET_SIZE, &o),
	    0);
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, buf, sizeof(buf), 1 * MB - 100),
		 65536);
	CHECK(is_zero(buf, sizeof(buf)));
	REQUIRE(fsck_remount(&t) == 0);
	CHECK_EQ(fs_read(t.fs, (uint64_t)f, buf, 3, 100000), 3);
	CHECK(memcmp(buf, "xyz", 3) == 0);
	tfs_close(&t);
}

/* Set the flags of the first extent of @ino (unmounted image, block
 * resealed): what fsck must catch is the flag, not a checksum. */
static void set_first_ext_flags(struct bd_dev *bd, uint64_t ino, uint32_t flags)
{
	struct fs_dinode *di = bd_buf_alloc(FS_BLOCK_SIZE);
	const struct fs_btree_nhdr *nh;
	const struct fs_btree_leaf_slot *sl;
	struct fs_extent_val v;

	REQUIRE(di != NULL);
	REQUIRE(bd_read(bd, di, FS_BLOCK_SIZE, ino * FS_BLOCK_SIZE) == 0);
	nh = (const void *)di->inline_area;
	sl = (const void *)(nh + 1);
	if (di->fmt == FS_FMT_EXTENTS && nh->level == 0 && nh->nkeys > 0) {
		memcpy(&v, di->inline_area + sl[0].off, sizeof(v));
		v.flags = flags;
		memcpy(di->inline_area + sl[0].off, &v, sizeof(v));
		fs_blk_seal(di, FS_BT_INODE, ino, di->hdr.seq);
		CHECK(bd_write(bd, di, FS_BLOCK_SIZE, ino * FS_BLOCK_SIZE, 0) ==
		      0);
	} else {
		CHECK(!"extent root in the inode");
	}
	free(di);
}

static uint64_t fsck_count(struct bd_dev *bd, uint64_t *unwritten)
{
	struct fs_fsck_opts o = {.out = NULL};
	struct fs_fsck_result r;

	if (fs_fsck_run(bd, &o, &r) < 0)
		return ~0ull;
	*unwritten = r.unwritten_blocks;
	return r.errors;
}

/* fsck counts unwritten blocks, and refuses them in a symlink and
 * unknown extent flags. */
static void test_fsck_flags(void)
{
	static char target[4000];
	struct fs_attr a;
	uint64_t unw = 0;
	struct tfs t;
	int64_t f;

	REQUIRE(tfs_open(&t, 64) == 0);
	f = tfs_creat(&t, t.root, "u", 0644);
	REQUIRE(f > 0);
	CHECK_EQ(fs_fallocate(t.fs, tfs_cred(&t), (uint64_t)f, 0, 0, 40960), 0);
	memset(target, 'x', sizeof(target) - 1);
	REQUIRE(fs_symlink(t.fs, tfs_cred(&t), t.root, "long", target, &a) ==
		0);
	REQUIRE(fs_unmount(t.fs) == 0);
	t.fs = NULL;
	CHECK_EQ(fsck_count(t.bd, &unw), 0);
	CHECK_EQ(unw, 10);
	set_first_ext_flags(t.bd, a.ino, FS_EXT_UNWRITTEN);
	CHECK_EQ(fsck_count(t.bd, &unw), 1);
	set_first_ext_flags(t.bd, a.ino, 0);
	set_first_ext_flags(t.bd, (uint64_t)f, FS_EXT_UNWRITTEN | 0x2);
	CHECK(fsck_count(t.bd, &unw) > 0); /* and its blocks leak */
	set_first_ext_flags(t.bd, (uint64_t)f, FS_EXT_UNWRITTEN);
	CHECK_EQ(fsck_count(t.bd, &unw), 0);
	tfs_close(&t);
}

static int64_t seek(struct tfs *t, int64_t f, uint64_t off, int whence)
{
	uint64_t pos = 0;
	int ret = fs_lseek(t->fs, (uint64_t)f, off, whence, &pos);

	return ret < 0 ? ret : (int64_t)pos;
}

/* data [0, 8K), hole to 1M, unwritten [1M, 2M), 5 bytes at 2M, hole to
 * the 3M end */
static void test_seek(void)
{
	struct fs_attr in = {.size = 3 * MB}, o;
	static char buf[8192];
	struct tfs t;
	int64_t f, g;

	REQUIRE(tfs_open(&t, 64) == 0);
	f = tfs_creat(&t, t.root, "s", 0644);
	REQUIRE(f > 0);
	memset(buf, 'd', sizeof(buf));
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)f, buf, 8192, 0), 8192);
	CHECK_EQ(fs_fallocate(t.fs, tfs_cred(&t), (uint64_t)f, 0, MB, MB), 0);
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)f, buf, 5, 2 * MB), 5);
	CHECK_EQ(
	    fs_setattr(t.fs, tfs_cred(&t), (uint64_t)f, &in, FS_SET_SIZE, &o),
	    0);
	CHECK_EQ(seek(&t, f, 0, SEEK_DATA), 0);
	CHECK_EQ(seek(&t, f, 100, SEEK_DATA), 100);
	CHECK_EQ(seek(&t, f, 0, SEEK_HOLE), 8192);
	CHECK_EQ(seek(&t, f, 8191, SEEK_HOLE), 8192);
	CHECK_EQ(seek(&t, f, 8192, SEEK_DATA), 2 * MB); /* skips unwritten */
	CHECK_EQ(seek(&t, f, MB + 5, SEEK_HOLE), MB + 5);
	CHECK_EQ(seek(&t, f, 2 * MB + 4, SEEK_DATA), 2 * MB + 4);
	CHECK_EQ(seek(&t, f, 2 * MB, SEEK_HOLE), 2 * MB + 4096);
	CHECK_EQ(seek(&t, f, 2 * MB + 4096, SEEK_DATA), -ENXIO);
	CHECK_EQ(seek(&t, f, 3 * MB - 1, SEEK_HOLE), 3 * MB - 1);
	CHECK_EQ(seek(&t, f, 3 * MB, SEEK_HOLE), -ENXIO);
	CHECK_EQ(seek(&t, f, 3 * MB, SEEK_DATA), -ENXIO);
	CHECK_EQ(seek(&t, f, 0, SEEK_SET), -EINVAL);
	CHECK_EQ(seek(&t, (int64_t)t.root, 0, SEEK_DATA), -EISDIR);
	/* a data block as the last one: its hole is the end of the file */
	in.size = 2 * MB + 100;
	CHECK_EQ(
	    fs_setattr(t.fs, tfs_cred(&t), (uint64_t)f, &in, FS_SET_SIZE, &o),
	    0);
	CHECK_EQ(seek(&t, f, 2 * MB, SEEK_HOLE), 2 * MB + 100);
	/* inline: all data, the hole at the end */
	g = tfs_creat(&t, t.root, "inl", 0644);
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)g, "abc", 3, 0), 3);
	CHECK_EQ(seek(&t, g, 1, SEEK_DATA), 1);
	CHECK_EQ(seek(&t, g, 1, SEEK_HOLE), 3);
	CHECK_EQ(seek(&t, g, 3, SEEK_DATA), -ENXIO);
	tfs_close(&t);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_unwritten);
	T_RUN(test_unwritten_keep_size);
	T_RUN(test_fsck_flags);
	T_RUN(test_seek);
	return t_done();
}
