/*
 * test_falloc.c — unwritten extents and the fallocate modes, lseek
 * SEEK_DATA/SEEK_HOLE, copy_file_range and reflink through fs.h on a RAM
 * device: preallocation writes no data and reads zeros without device
 * reads even over blocks full of stale bytes, writes convert (and merge)
 * what they cover, every mode against ext4's errnos, a seeded random
 * sequence of all of them against an in-memory model, fsck clean after
 * it; clones share blocks (space, copy on write from either side, unlink
 * gives every block back), fsck counts and checks the refcounts and
 * catches wrong ones, seeded random clones/copies/writes/unlinks over
 * several files with fsck all along, and a filesystem without the
 * reflink feature copies instead.
 */
#include "tests/unit/fs_testutil.h"
#include "tests/unit/harness.h"

#include "fusefs/fs_format.h"
#include "fusefs/fsck/fs_fsck.h"
#include "fusefs/namespace/fs_ns.h"

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

static void fs_statvfs_or_zero(struct tfs *t, struct statvfs *sv)
{
	if (fs_statfs(t->fs, sv) < 0)
		memset(sv, 0, sizeof(*sv));
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

static int64_t falloc(struct tfs *t, int64_t f, int mode, uint64_t off,
		      uint64_t len)
{
	return fs_fallocate(t->fs, tfs_cred(t), (uint64_t)f, mode, off, len);
}

static int same(struct tfs *t, int64_t f, const char *want, size_t len)
{
	static char got[4 * MB];

	return fs_read(t->fs, (uint64_t)f, got, sizeof(got), 0) ==
		   (ssize_t)len &&
	       memcmp(got, want, len) == 0;
}

/* ZERO_RANGE, COLLAPSE_RANGE and INSERT_RANGE with ext4's errnos */
static void test_modes(void)
{
	static char m[2 * MB];
	const int keep = FALLOC_FL_KEEP_SIZE, zero = FALLOC_FL_ZERO_RANGE;
	const int col = FALLOC_FL_COLLAPSE_RANGE, ins = FALLOC_FL_INSERT_RANGE;
	uint64_t w0, size = MB;
	struct fs_ext e;
	struct tfs t;
	int64_t f, g;

	REQUIRE(tfs_open(&t, 64) == 0);
	f = tfs_creat(&t, t.root, "m", 0644);
	REQUIRE(f > 0);
	for (size_t i = 0; i < MB; i++)
		m[i] = (char)(i % 253 + 1);
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)f, m, MB, 0), MB);
	/* zero: partial edges written, block 1 unwritten, no data I/O for
	 * it, still allocated */
	w0 = t.fs->st.data_bytes;
	CHECK_EQ(falloc(&t, f, zero | keep, 100, 10000), 0);
	memset(m + 100, 0, 10000);
	CHECK(same(&t, f, m, MB));
	CHECK_EQ(t.fs->st.data_bytes - w0, 8192); /* blocks 0 and 2 */
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).blocks, MB / 512);
	REQUIRE(nth_extent(&t, (uint64_t)f, 1, &e) == 0);
	CHECK(e.lb == 1 && e.len == 1 && e.flags == FS_EXT_UNWRITTEN);
	/* zero past EOF: extends; its whole blocks allocated (a partial
	 * edge block in a hole stays a hole) */
	CHECK_EQ(falloc(&t, f, zero, MB - 10, 3 * 4096), 0);
	size = MB - 10 + 3 * 4096;
	memset(m + MB - 10, 0, size - (MB - 10));
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).size, size);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).blocks, (MB + 2 * 4096) / 512);
	CHECK(same(&t, f, m, size));
	/* collapse errnos */
	CHECK_EQ(falloc(&t, f, col, 100, 4096), -EINVAL);
	CHECK_EQ(falloc(&t, f, col, 4096, 100), -EINVAL);
	CHECK_EQ(falloc(&t, f, col, 4096, size - 4096), -EINVAL);
	CHECK_EQ(falloc(&t, f, col, 0, 2 * MB), -EINVAL);
	CHECK_EQ(falloc(&t, f, col | keep, 0, 4096), -EINVAL);
	/* collapse blocks 1..2 */
	CHECK_EQ(falloc(&t, f, col, 4096, 8192), 0);
	memmove(m + 4096, m + 12288, size - 12288);
	size -= 8192;
	memset(m + size, 0, 8192);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).size, size);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).blocks, MB / 512);
	CHECK(same(&t, f, m, size));
	/* insert errnos */
	CHECK_EQ(falloc(&t, f, ins, 100, 4096), -EINVAL);
	CHECK_EQ(falloc(&t, f, ins, 4096, 4095), -EINVAL);
	CHECK_EQ(falloc(&t, f, ins, size / 4096 * 4096 + 4096, 4096), -EINVAL);
	CHECK_EQ(falloc(&t, f, ins, 0, FS_FILE_MAX), -EFBIG);
	CHECK_EQ(falloc(&t, f, ins | keep, 0, 4096), -EINVAL);
	/* insert two blocks at block 2: a hole */
	CHECK_EQ(falloc(&t, f, ins, 8192, 8192), 0);
	memmove(m + 16384, m + 8192, size - 8192);
	memset(m + 8192, 0, 8192);
	size += 8192;
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).size, size);
	CHECK(same(&t, f, m, size));
	REQUIRE(fsck_remount(&t) == 0);
	CHECK(same(&t, f, m, size));
	/* insert at 0 of an inline file */
	g = tfs_creat(&t, t.root, "inl", 0644);
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)g, "abc", 3, 0), 3);
	CHECK_EQ(falloc(&t, g, ins, 0, 4096), 0);
	memset(m, 0, 4096);
	memcpy(m + 4096, "abc", 3);
	CHECK(same(&t, g, m, 4099));
	CHECK_EQ(falloc(&t, g, col, 0, 4096), 0);
	CHECK(same(&t, g, "abc", 3));
	CHECK_EQ(falloc(&t, g, zero, 1, 1), 0);
	CHECK(same(&t, g, "a\0c", 3));
	tfs_close(&t);
}

static ssize_t copy(struct tfs *t, int64_t in, uint64_t oi, int64_t out,
		    uint64_t oo, size_t len)
{
	return fs_copy_file_range(t->fs, tfs_cred(t), (uint64_t)in, oi,
				  (uint64_t)out, oo, len, 0);
}

/* copy_file_range: data device to device, holes kept, errnos */
static void test_copy(void)
{
	static char m[3 * MB], d[3 * MB];
	uint64_t r0, sz = 2 * MB + 300;
	struct fs_attr in = {.size = sz}, o;
	struct tfs t;
	int64_t s, c, x, g;

	REQUIRE(tfs_open(&t, 64) == 0);
	s = tfs_creat(&t, t.root, "src", 0644);
	c = tfs_creat(&t, t.root, "dst", 0644);
	x = tfs_creat(&t, t.root, "old", 0644);
	REQUIRE(s > 0 && c > 0 && x > 0);
	for (size_t i = 0; i < sizeof(m); i++)
		m[i] = (char)(i % 241 + 1);
	memset(m + 100000, 0, 2 * MB - 100000);
	memset(m + sz, 0, sizeof(m) - sz);
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)s, m, 100000, 0),
		 100000);
	CHECK_EQ(falloc(&t, s, 0, 512 * 1024, 512 * 1024), 0);
	CHECK_EQ(
	    fs_write(t.fs, tfs_cred(&t), (uint64_t)s, m + 2 * MB, 300, 2 * MB),
	    300);
	CHECK_EQ(
	    fs_setattr(t.fs, tfs_cred(&t), (uint64_t)s, &in, FS_SET_SIZE, &o),
	    0);
	CHECK(fs_sync(t.fs) == 0);
	/* aligned: shared, not read */
	r0 = dev_read_bytes(&t);
	CHECK_EQ(copy(&t, s, 0, c, 0, 3 * MB), (ssize_t)sz); /* cut at EOF */
	/* metadata only */
	CHECK(dev_read_bytes(&t) - r0 <= 64 * 1024);
	CHECK(same(&t, c, m, sz));
	CHECK_EQ(tfs_stat(&t, (uint64_t)c).blocks,
		 tfs_stat(&t, (uint64_t)s).blocks);
	CHECK_EQ(t.fs->ns->st.copy_bytes, sz);
	CHECK_EQ(t.fs->ns->st.clone_bytes, sz);
	/* unaligned: the data, device to device, holes kept */
	r0 = dev_read_bytes(&t);
	g = tfs_creat(&t, t.root, "dst2", 0644);
	REQUIRE(g > 0);
	CHECK_EQ(copy(&t, s, 0, g, 512, 3 * MB), (ssize_t)sz);
	memmove(m + 512, m, sz);
	memset(m, 0, 512);
	CHECK(same(&t, g, m, sz + 512));
	CHECK(dev_read_bytes(&t) - r0 <= 200 * 1024); /* the data only */
	/* source blocks 0..24 land on 0..25, the last one on block 512 */
	CHECK_EQ(tfs_stat(&t, (uint64_t)g).blocks, (26 + 1) * 8);
	CHECK_EQ(t.fs->ns->st.clone_bytes, sz);
	memmove(m, m + 512, sz);
	memset(m + sz, 0, 512);
	/* over existing data: the source's holes become zeros */
	memset(d, 'o', sizeof(d));
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)x, d, 3 * MB, 0),
		 3 * MB);
	CHECK_EQ(copy(&t, s, 50000, x, 7, MB), MB);
	memcpy(d + 7, m + 50000, MB);
	CHECK(same(&t, x, d, 3 * MB));
	/* within one file, not overlapping; errnos */
	CHECK_EQ(copy(&t, x, 0, x, 2 * MB, 4096), 4096);
	memcpy(d + 2 * MB, d, 4096);
	CHECK(same(&t, x, d, 3 * MB));
	CHECK_EQ(copy(&t, x, 0, x, 4095, 4096), -EINVAL);
	CHECK_EQ(copy(&t, s, sz, c, 0, 10), 0);
	CHECK_EQ(fs_copy_file_range(t.fs, tfs_cred(&t), (uint64_t)s, 0,
				    (uint64_t)c, 0, 10, 1),
		 -EINVAL);
	CHECK_EQ(copy(&t, (int64_t)t.root, 0, c, 0, 10), -EISDIR);
	CHECK_EQ(copy(&t, s, 0, c, FS_FILE_MAX - 5, 10), -EFBIG);
	REQUIRE(fsck_remount(&t) == 0);
	CHECK(same(&t, c, m, sz));
	CHECK(same(&t, x, d, 3 * MB));
	tfs_close(&t);
}

/* ---- reflink ---- */

static int do_clone(struct tfs *t, int64_t in, uint64_t oi, int64_t out,
		    uint64_t oo, uint64_t len)
{
	return fs_clone_range(t->fs, tfs_cred(t), (uint64_t)in, oi,
			      (uint64_t)out, oo, len);
}

static uint64_t free_blocks(struct tfs *t)
{
	struct statvfs sv;

	fs_sync(t->fs); /* frees become free at commit */
	fs_statvfs_or_zero(t, &sv);
	return sv.f_bfree;
}

static uint64_t fsck_shared(struct tfs *t, uint64_t *errors)
{
	struct fs_fsck_opts o = {.out = NULL};
	struct fs_fsck_result r;

	fs_unmount(t->fs);
	t->fs = NULL;
	*errors = fs_fsck_run(t->bd, &o, &r) < 0 ? 1 : r.errors;
	if (*errors != 0) {
		o.out = stderr;
		fs_fsck_run(t->bd, &o, &r);
	}
	if (tfs_mount(t) < 0)
		*errors += 1;
	return r.shared_blocks;
}

/* clone, copy on write from either side, truncate into a shared block,
 * unlink both: every block comes back, fsck counts the sharing */
static void test_clone(void)
{
	static char a[MB], b[MB];
	uint64_t free0, free1, errs;
	struct fs_attr in = {.size = MB - 1000}, o;
	struct tfs t;
	int64_t s, d;

	REQUIRE(tfs_open(&t, 64) == 0);
	free0 = free_blocks(&t);
	s = tfs_creat(&t, t.root, "s", 0644);
	d = tfs_creat(&t, t.root, "d", 0644);
	REQUIRE(s > 0 && d > 0);
	free1 = free_blocks(&t);
	for (size_t i = 0; i < MB; i++)
		a[i] = (char)(i % 239 + 1);
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)s, a, MB, 0), MB);
	CHECK_EQ(do_clone(&t, s, 0, d, 0, 0), 0); /* 0: to EOF */
	CHECK(same(&t, d, a, MB));
	CHECK_EQ(tfs_stat(&t, (uint64_t)d).blocks, MB / 512);
	/* 256 data blocks once, the refcount root */
	CHECK_EQ(free1 - free_blocks(&t), 256 + 1);
	CHECK_EQ(fsck_shared(&t, &errs), 256);
	CHECK_EQ(errs, 0);
	/* write into the clone: copied on write, the source unchanged */
	memcpy(b, a, MB);
	memset(b + 5000, 'w', 10000);
	CHECK_EQ(
	    fs_write(t.fs, tfs_cred(&t), (uint64_t)d, b + 5000, 10000, 5000),
	    10000);
	CHECK_EQ(t.fs->ns->st.cow_blocks, 3); /* blocks 1..3 */
	CHECK(same(&t, s, a, MB) && same(&t, d, b, MB));
	/* write into the source */
	memset(a + MB - 4096, 's', 4096);
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)s, a + MB - 4096, 4096,
			  MB - 4096),
		 4096);
	CHECK(same(&t, s, a, MB) && same(&t, d, b, MB));
	/* the old blocks stay in shared extents of the other file */
	CHECK_EQ(fsck_shared(&t, &errs), 256);
	CHECK_EQ(errs, 0);
	/* truncate the clone inside a shared block: the source keeps it */
	CHECK_EQ(
	    fs_setattr(t.fs, tfs_cred(&t), (uint64_t)d, &in, FS_SET_SIZE, &o),
	    0);
	memset(b + MB - 1000, 0, 1000);
	CHECK(same(&t, s, a, MB) && same(&t, d, b, MB - 1000));
	/* errnos */
	CHECK_EQ(do_clone(&t, s, 100, d, 0, 4096), -EINVAL);
	CHECK_EQ(do_clone(&t, s, 0, d, 4096, 100), -EINVAL);
	CHECK_EQ(do_clone(&t, s, 0, s, 4096, 8192), -EINVAL); /* overlap */
	CHECK_EQ(do_clone(&t, s, MB - 4096, d, 0, 8192),
		 -EINVAL); /* past EOF */
	CHECK_EQ(do_clone(&t, (int64_t)t.root, 0, d, 0, 4096), -EISDIR);
	{
		int64_t i1 = tfs_creat(&t, t.root, "inl", 0644);
		int64_t g1 = tfs_creat(&t, t.root, "g1", 0644);
		int64_t g2 = tfs_creat(&t, t.root, "g2", 0644);

		CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)i1, "x", 1, 0),
			 1);
		CHECK_EQ(do_clone(&t, i1, 0, g2, 0, 0), -EOPNOTSUPP);
		CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)g1, a, 8192, 0),
			 8192);
		CHECK_EQ(do_clone(&t, g1, 0, g2, 0, 0), 0); /* own group */
		CHECK_EQ(do_clone(&t, g1, 0, d, 0, 4096), -EOPNOTSUPP);
		/* copy_file_range then copies the data */
		CHECK_EQ(copy(&t, g1, 0, d, 0, 4096), 4096);
		memcpy(b, a, 4096);
		CHECK(same(&t, d, b, MB - 1000));
		CHECK_EQ(fs_unlink(t.fs, tfs_cred(&t), t.root, "inl"), 0);
		CHECK_EQ(fs_unlink(t.fs, tfs_cred(&t), t.root, "g1"), 0);
		CHECK_EQ(fs_unlink(t.fs, tfs_cred(&t), t.root, "g2"), 0);
	}
	/* unlink the source: the clone keeps every byte */
	CHECK_EQ(fs_unlink(t.fs, tfs_cred(&t), t.root, "s"), 0);
	fs_forget(t.fs, (uint64_t)s, 1);
	CHECK(same(&t, d, b, MB - 1000));
	CHECK_EQ(fsck_shared(&t, &errs) > 0, 1);
	CHECK_EQ(errs, 0);
	CHECK(same(&t, d, b, MB - 1000));
	CHECK_EQ(fs_unlink(t.fs, tfs_cred(&t), t.root, "d"), 0);
	CHECK_EQ(free_blocks(&t), free0); /* the tree root too */
	CHECK_EQ(fsck_shared(&t, &errs), 0);
	CHECK_EQ(errs, 0);
	tfs_close(&t);
}

/* fsck catches a wrong count, a missing record and a wrong user count
 * in a refcount tree (blocks resealed: the semantics are checked) */
static void set_refcount(struct bd_dev *bd, uint64_t ino, int64_t dcount,
			 int64_t dusers)
{
	struct fs_dinode *di = bd_buf_alloc(FS_BLOCK_SIZE);
	struct fs_refcount_blk *rb = bd_buf_alloc(FS_BLOCK_SIZE);
	const struct fs_btree_nhdr *nh;
	const struct fs_btree_leaf_slot *sl;
	struct fs_refcount_val v;
	uint8_t *node;

	REQUIRE(di != NULL && rb != NULL);
	REQUIRE(bd_read(bd, di, FS_BLOCK_SIZE, ino * FS_BLOCK_SIZE) == 0);
	REQUIRE(di->refcount_blk != 0);
	REQUIRE(bd_read(bd, rb, FS_BLOCK_SIZE,
			di->refcount_blk * FS_BLOCK_SIZE) == 0);
	node = (uint8_t *)rb + FS_BTREE_NODE_OFF;
	nh = (const void *)node;
	sl = (const void *)(nh + 1);
	REQUIRE(nh->level == 0 && nh->nkeys > 0);
	memcpy(&v, node + sl[0].off, sizeof(v));
	v.count = (uint32_t)((int64_t)v.count + dcount);
	memcpy(node + sl[0].off, &v, sizeof(v));
	rb->users = (uint64_t)((int64_t)rb->users + dusers);
	fs_blk_seal(rb, FS_BT_REFCOUNT, di->refcount_blk, rb->hdr.seq);
	CHECK(bd_write(bd, rb, FS_BLOCK_SIZE, di->refcount_blk * FS_BLOCK_SIZE,
		       0) == 0);
	free(di);
	free(rb);
}

static void test_fsck_refcount(void)
{
	static char a[65536];
	uint64_t unw;
	struct tfs t;
	int64_t s, d;

	REQUIRE(tfs_open(&t, 64) == 0);
	s = tfs_creat(&t, t.root, "s", 0644);
	d = tfs_creat(&t, t.root, "d", 0644);
	memset(a, 'a', sizeof(a));
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)s, a, sizeof(a), 0),
		 (ssize_t)sizeof(a));
	CHECK_EQ(do_clone(&t, s, 0, d, 0, 0), 0);
	REQUIRE(fs_unmount(t.fs) == 0);
	t.fs = NULL;
	CHECK_EQ(fsck_count(t.bd, &unw), 0);
	set_refcount(t.bd, (uint64_t)s, 1, 0); /* count 3, 2 maps */
	CHECK(fsck_count(t.bd, &unw) >= 16);
	set_refcount(t.bd, (uint64_t)s, -1, 1); /* 3 users, 2 files */
	CHECK_EQ(fsck_count(t.bd, &unw), 1);
	set_refcount(t.bd, (uint64_t)s, 0, -1);
	CHECK_EQ(fsck_count(t.bd, &unw), 0); /* restored */
	tfs_close(&t);
}

/* A filesystem made without the REFLINK feature (older mkfs): clones are
 * refused, copy_file_range copies the data. */
static void test_no_reflink_feature(void)
{
	struct fs_sb *sb = bd_buf_alloc(FS_BLOCK_SIZE);
	static char a[16384], b[16384];
	struct tfs t;
	int64_t s, d;

	REQUIRE(sb != NULL);
	REQUIRE(tfs_format(&t, 64) == 0);
	for (uint64_t blk = 0; blk < 2; blk++) { /* and the backup */
		REQUIRE(bd_read(t.bd, sb, FS_BLOCK_SIZE, blk * FS_BLOCK_SIZE) ==
			0);
		sb->feature_incompat &= ~FS_FEATURE_INCOMPAT_REFLINK;
		fs_blk_update_crc(sb);
		REQUIRE(bd_write(t.bd, sb, FS_BLOCK_SIZE, blk * FS_BLOCK_SIZE,
				 0) == 0);
	}
	free(sb);
	REQUIRE(tfs_mount(&t) == 0);
	s = tfs_creat(&t, t.root, "s", 0644);
	d = tfs_creat(&t, t.root, "d", 0644);
	memset(a, 'a', sizeof(a));
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)s, a, sizeof(a), 0),
		 (ssize_t)sizeof(a));
	CHECK_EQ(do_clone(&t, s, 0, d, 0, 0), -EOPNOTSUPP);
	CHECK_EQ(copy(&t, s, 0, d, 0, sizeof(a)), (ssize_t)sizeof(a));
	CHECK_EQ(t.fs->ns->st.clone_bytes, 0);
	CHECK(fs_read(t.fs, (uint64_t)d, b, sizeof(b), 0) ==
		  (ssize_t)sizeof(b) &&
	      memcmp(a, b, sizeof(a)) == 0);
	tfs_close(&t);
}

/* Seeded random clones, copies, writes, punches, truncates and unlinks
 * over a few files, each against its model; fsck (refcounts included)
 * at every remount; everything deleted at the end gives every block
 * back. */
#define RF_FILES 4
#define RF_WIN (512u * 1024)

struct rfile {
	int64_t ino;
	uint64_t size;
	char *m;
};

static void rf_create(struct tfs *t, struct rfile *f, int i)
{
	char name[16];

	snprintf(name, sizeof(name), "r%d", i);
	f->ino = tfs_creat(t, t->root, name, 0644);
	f->size = 0;
	memset(f->m, 0, RF_WIN);
}

static unsigned rf_clones; /* clones made */

static int rf_op(struct tfs *t, struct rfile *fl, uint64_t *rng, char *buf)
{
	unsigned op = (unsigned)(trand(rng) % 8), k = trand(rng) % RF_FILES;
	struct rfile *f = &fl[k], *g = &fl[trand(rng) % RF_FILES];
	uint64_t off = trand(rng) % RF_WIN, len = 1 + trand(rng) % 100000;
	uint64_t dst = trand(rng) % RF_WIN;
	int ret = 0;

	if (op < 3) { /* clone whole blocks, or copy */
		if (op < 2) {
			off &= ~4095ull;
			dst &= ~4095ull;
			len = (len + 4095) & ~4095ull;
		}
		if (off >= g->size)
			return 0;
		if (len > g->size - off)
			len = g->size - off;
		if (dst + len > RF_WIN)
			return 0;
		if (g == f && off < dst + len && dst < off + len)
			return 0;
		if (op < 2)
			ret = do_clone(t, g->ino, off, f->ino, dst, len);
		else
			ret = copy(t, g->ino, off, f->ino, dst, len) ==
				      (ssize_t)len
				  ? 0
				  : -EIO;
		if (ret == -EINVAL || ret == -EOPNOTSUPP)
			return 0; /* unaligned EOF / other group */
		rf_clones += op < 2 && ret == 0;
		memmove(f->m + dst, g->m + off, len);
		if (dst + len > f->size)
			f->size = dst + len;
		return ret;
	}
	if (off + len > RF_WIN)
		len = RF_WIN - off;
	if (op < 5) {
		for (uint64_t i = 0; i < len; i++)
			buf[i] = (char)(trand(rng) % 255 + 1);
		if (fs_write(t->fs, tfs_cred(t), (uint64_t)f->ino, buf, len,
			     off) != (ssize_t)len)
			return -EIO;
		memcpy(f->m + off, buf, len);
		if (off + len > f->size)
			f->size = off + len;
	} else if (op == 5) {
		ret = falloc(t, f->ino,
			     FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off,
			     len);
		memset(f->m + off, 0, len);
		memset(f->m + f->size, 0, RF_WIN - f->size);
	} else if (op == 6) {
		struct fs_attr in = {.size = off}, o;

		ret = fs_setattr(t->fs, tfs_cred(t), (uint64_t)f->ino, &in,
				 FS_SET_SIZE, &o);
		if (off < f->size)
			memset(f->m + off, 0, f->size - off);
		f->size = off;
	} else {
		char name[16];

		snprintf(name, sizeof(name), "r%u", k);
		ret = fs_unlink(t->fs, tfs_cred(t), t->root, name);
		fs_release(t->fs, (uint64_t)f->ino);
		fs_forget(t->fs, (uint64_t)f->ino, 1);
		rf_create(t, f, (int)k);
	}
	return ret;
}

static void test_clone_random(void)
{
	static char buf[100000];
	struct rfile fl[RF_FILES];
	uint64_t rng = t_seed() | 1, free0, errs, shared = 0;
	struct tfs t;
	int ret = 0, i;

	REQUIRE(tfs_open(&t, 96) == 0);
	free0 = free_blocks(&t);
	for (int k = 0; k < RF_FILES; k++) {
		fl[k].m = calloc(1, RF_WIN);
		REQUIRE(fl[k].m != NULL);
		rf_create(&t, &fl[k], k);
	}
	for (i = 0; i < 1200 && ret == 0; i++) {
		ret = rf_op(&t, fl, &rng, buf);
		if (ret == 0 && i % 100 == 99) {
			shared += fsck_shared(&t, &errs);
			ret = errs == 0 ? 0 : -EUCLEAN;
		}
		for (int k = 0; ret == 0 && k < RF_FILES && i % 50 == 49; k++)
			if (tfs_stat(&t, (uint64_t)fl[k].ino).size !=
				fl[k].size ||
			    !same(&t, fl[k].ino, fl[k].m, fl[k].size))
				ret = -EPROTO;
	}
	if (ret != 0)
		fprintf(stderr, "  op %d failed: %d (seed %llu)\n", i - 1, ret,
			(unsigned long long)t_seed());
	CHECK_EQ(ret, 0);
	CHECK(rf_clones > 0); /* the test shared something */
	for (int k = 0; k < RF_FILES; k++) {
		char name[16];

		snprintf(name, sizeof(name), "r%d", k);
		CHECK(same(&t, fl[k].ino, fl[k].m, fl[k].size));
		CHECK_EQ(fs_unlink(t.fs, tfs_cred(&t), t.root, name), 0);
		fs_release(t.fs, (uint64_t)fl[k].ino);
		fs_forget(t.fs, (uint64_t)fl[k].ino, 1);
		free(fl[k].m);
	}
	CHECK_EQ(free_blocks(&t), free0);
	CHECK_EQ(fsck_shared(&t, &errs), 0);
	CHECK_EQ(errs, 0);
	printf("  %u clones, %llu shared blocks seen by fsck over the run\n",
	       rf_clones, (unsigned long long)shared);
	tfs_close(&t);
}

/* ---- seeded random sequences against a model ---- */

#define WIN (2u * MB) /* the model's window: the file stays in it */

struct model {
	struct tfs *t;
	uint64_t rng;
	int64_t f;
	uint64_t size;
	char *m; /* the file's bytes; zero from size on */
	char *buf;
	unsigned counts[11];
};

static void mdl_range(struct model *d, uint64_t *off, uint64_t *len,
		      int aligned)
{
	*off = trand(&d->rng) % WIN;
	*len = 1 + trand(&d->rng) % (trand(&d->rng) % 4 ? 40000 : 400000);
	if (aligned || trand(&d->rng) % 3 == 0) {
		*off &= ~4095ull;
		*len = (*len + 4095) & ~4095ull;
	}
	if (*off + *len > WIN)
		*len = WIN - *off;
}

static int mdl_write(struct model *d, uint64_t off, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		d->buf[i] = (char)(trand(&d->rng) % 255 + 1);
	if (fs_write(d->t->fs, tfs_cred(d->t), (uint64_t)d->f, d->buf, len,
		     off) != (ssize_t)len)
		return -EIO;
	memcpy(d->m + off, d->buf, len);
	if (off + len > d->size)
		d->size = off + len;
	return 0;
}

/* fallocate @mode on the file and the model; 0, or the failed call's
 * errno (an expected refusal is 0 and changes nothing) */
static int mdl_falloc(struct model *d, int mode, uint64_t off, uint64_t len)
{
	int want = 0, ret;

	if (mode & (FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE)) {
		if (off % 4096 || len % 4096)
			want = -EINVAL;
		else if (mode & FALLOC_FL_COLLAPSE_RANGE)
			want = off + len >= d->size ? -EINVAL : 0;
		else if (off >= d->size)
			want = -EINVAL;
		else if (d->size + len > WIN)
			return 0; /* would leave the window */
	}
	ret = falloc(d->t, d->f, mode, off, len);
	if (ret != want)
		return ret == 0 ? -EPROTO : ret;
	if (ret < 0)
		return 0;
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
		memset(d->m + off, 0, len);
	if (mode & FALLOC_FL_COLLAPSE_RANGE) {
		memmove(d->m + off, d->m + off + len, d->size - off - len);
		memset(d->m + d->size - len, 0, len);
		d->size -= len;
	} else if (mode & FALLOC_FL_INSERT_RANGE) {
		memmove(d->m + off + len, d->m + off, d->size - off);
		memset(d->m + off, 0, len);
		d->size += len;
	} else if (!(mode & FALLOC_FL_KEEP_SIZE) && off + len > d->size) {
		d->size = off + len;
	}
	memset(d->m + d->size, 0, WIN - d->size);
	return 0;
}

/* lseek's answers must agree with the bytes: SEEK_DATA skips only
 * zeros, SEEK_HOLE stops in a zero block (or at the end). */
static int mdl_seek(struct model *d, uint64_t off)
{
	int64_t dp = seek(d->t, d->f, off, SEEK_DATA);
	int64_t hp = seek(d->t, d->f, off, SEEK_HOLE);
	uint64_t bend;

	if (off >= d->size)
		return dp == -ENXIO && hp == -ENXIO ? 0 : -EPROTO;
	if (dp == -ENXIO)
		dp = (int64_t)d->size;
	if (dp < (int64_t)off || hp < (int64_t)off || dp > (int64_t)d->size ||
	    hp > (int64_t)d->size || !is_zero(d->m + off, (size_t)dp - off))
		return -EPROTO;
	bend = ((uint64_t)hp / 4096 + 1) * 4096;
	if (bend > d->size)
		bend = d->size;
	return is_zero(d->m + hp, bend - (uint64_t)hp) ? 0 : -EPROTO;
}

static int mdl_truncate(struct model *d, uint64_t size)
{
	struct fs_attr in = {.size = size}, o;
	int ret = fs_setattr(d->t->fs, tfs_cred(d->t), (uint64_t)d->f, &in,
			     FS_SET_SIZE, &o);

	if (ret == 0 && size < d->size)
		memset(d->m + size, 0, d->size - size);
	if (ret == 0)
		d->size = size;
	return ret;
}

/* copy_file_range within the file (-EINVAL when the ranges overlap) */
static int mdl_copy(struct model *d, uint64_t off, uint64_t len)
{
	uint64_t dst = trand(&d->rng) % WIN;
	ssize_t want, n;

	if (dst + len > WIN)
		len = WIN - dst;
	want = off >= d->size
		   ? 0
		   : (ssize_t)(len < d->size - off ? len : d->size - off);
	if (want > 0 && off < dst + (uint64_t)want &&
	    dst < off + (uint64_t)want)
		want = -EINVAL;
	n = copy(d->t, d->f, off, d->f, dst, len);
	if (n != want)
		return -EPROTO;
	if (n > 0) {
		memcpy(d->m + dst, d->m + off, (size_t)n);
		if (dst + (uint64_t)n > d->size)
			d->size = dst + (uint64_t)n;
	}
	return 0;
}

static int mdl_op(struct model *d)
{
	static const int modes[] = {
	    0,
	    FALLOC_FL_KEEP_SIZE,
	    FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	    FALLOC_FL_ZERO_RANGE,
	    FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
	    FALLOC_FL_COLLAPSE_RANGE,
	    FALLOC_FL_INSERT_RANGE,
	};
	unsigned op = (unsigned)(trand(&d->rng) % 11);
	uint64_t off, len;

	mdl_range(d, &off, &len, op >= 5 && op <= 6);
	d->counts[op]++;
	if (op < 2)
		return mdl_write(d, off, len);
	if (op < 7)
		return mdl_falloc(d, modes[trand(&d->rng) % 7], off, len);
	if (op == 7)
		return mdl_truncate(d, off);
	if (op == 10)
		return mdl_copy(d, off, len);
	return mdl_seek(d, off);
}

static int mdl_verify(struct model *d)
{
	CHECK_EQ(tfs_stat(d->t, (uint64_t)d->f).size, d->size);
	return same(d->t, d->f, d->m, d->size) ? 0 : -EPROTO;
}

static void test_random_model(void)
{
	struct tfs t;
	struct model d = {.t = &t, .rng = t_seed() | 1};
	int ret = 0, i;

	d.m = calloc(1, WIN);
	d.buf = malloc(WIN);
	REQUIRE(d.m != NULL && d.buf != NULL);
	REQUIRE(tfs_open(&t, 96) == 0);
	d.f = tfs_creat(&t, t.root, "model", 0644);
	REQUIRE(d.f > 0);
	for (i = 0; i < 1500 && ret == 0; i++) {
		ret = mdl_op(&d);
		if (ret == 0 && i % 100 == 99)
			ret = mdl_verify(&d);
		if (ret == 0 && i % 500 == 499)
			ret = fsck_remount(&t);
	}
	if (ret != 0)
		fprintf(stderr, "  op %d failed: %d (seed %llu)\n", i - 1, ret,
			(unsigned long long)t_seed());
	CHECK_EQ(ret, 0);
	CHECK_EQ(mdl_verify(&d), 0);
	CHECK_EQ(fsck_remount(&t), 0);
	printf("  writes %u, falloc %u, truncates %u, seeks %u, copies %u\n",
	       d.counts[0] + d.counts[1],
	       d.counts[2] + d.counts[3] + d.counts[4] + d.counts[5] +
		   d.counts[6],
	       d.counts[7], d.counts[8] + d.counts[9], d.counts[10]);
	tfs_close(&t);
	free(d.m);
	free(d.buf);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_unwritten);
	T_RUN(test_unwritten_keep_size);
	T_RUN(test_fsck_flags);
	T_RUN(test_seek);
	T_RUN(test_modes);
	T_RUN(test_copy);
	T_RUN(test_random_model);
	T_RUN(test_clone);
	T_RUN(test_fsck_refcount);
	T_RUN(test_no_reflink_feature);
	T_RUN(test_clone_random);
	return t_done();
}
