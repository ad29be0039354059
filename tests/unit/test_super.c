/*
 * test_super.c — mount-time superblock policy and device claim: a damaged
 * primary superblock is replaced by the backup (restored on rw mounts,
 * untouched on ro mounts); a primary that is not ucfs at all is refused
 * with a hint unless sb_backup is asked for; both bad is refused naming
 * both; fs_core_open waits for a previous exclusive holder of the device
 * (bounded) and then says "already mounted".
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fusefs/core/fs_internal.h"
#include "core_fixture.h"
#include "harness.h"

/* 32 MiB formatted with 4 MiB journals and 8 MiB rgroups. */
static struct bd_dev *ram_fs(void)
{
	return cf_ram_fs(32, 4, 8);
}

static int mount_opts(struct bd_dev *bd, int ro, int backup, struct fs **fs,
		      char *why, size_t whylen)
{
	struct fs_core_opts o;

	fs_core_opts_init(&o);
	o.cache_mb = 8;
	o.ro = ro;
	o.sb_backup = backup;
	why[0] = '\0';
	return fs_core_mount(bd, &o, fs, why, whylen);
}

/* Change block @blk at byte @off (xor), or zero the block (@off < 0). */
static void damage(struct bd_dev *bd, uint64_t blk, int off)
{
	uint8_t *b = bd_buf_alloc(FS_BLOCK_SIZE);

	if (b == NULL)
		return;
	if (bd_read(bd, b, FS_BLOCK_SIZE, blk * FS_BLOCK_SIZE) == 0) {
		if (off < 0)
			memset(b, 0, FS_BLOCK_SIZE);
		else
			b[off] ^= 0x5a;
		bd_write(bd, b, FS_BLOCK_SIZE, blk * FS_BLOCK_SIZE, 0);
	}
	free(b);
}

static int block_verifies(struct bd_dev *bd, uint64_t blk)
{
	uint8_t *b = bd_buf_alloc(FS_BLOCK_SIZE);
	int ok;

	ok = b != NULL && bd_read(bd, b, FS_BLOCK_SIZE,
				  blk * FS_BLOCK_SIZE) == 0 &&
	     fs_blk_verify(b, FS_BT_SB, blk) == 0;
	free(b);
	return ok;
}

static void test_primary_crc_bad(void)
{
	struct bd_dev *bd = ram_fs();
	struct fs *fs;
	char why[300];

	REQUIRE(bd != NULL);
	damage(bd, 0, 700);		/* in the label/uuid area */
	CHECK(!block_verifies(bd, 0));

	/* ro: uses the backup, writes nothing */
	REQUIRE(mount_opts(bd, 1, 0, &fs, why, sizeof(why)) == 0);
	CHECK_EQ(fs->sb_backup, 1);
	CHECK(strstr(fs->notice, "checksum mismatch") != NULL);
	CHECK(strstr(fs->notice, "backup superblock (block 1)") != NULL);
	CHECK_EQ(fs_core_unmount(fs), 0);
	CHECK(!block_verifies(bd, 0));

	/* rw: uses the backup and restores block 0 */
	REQUIRE(mount_opts(bd, 0, 0, &fs, why, sizeof(why)) == 0);
	CHECK_EQ(fs->sb_backup, 2);
	CHECK(strstr(fs->notice, "rewritten") != NULL);
	CHECK_EQ(fs_core_unmount(fs), 0);
	CHECK(block_verifies(bd, 0));

	REQUIRE(mount_opts(bd, 0, 0, &fs, why, sizeof(why)) == 0);
	CHECK_EQ(fs->sb_backup, 0);
	CHECK_EQ(fs->notice[0], '\0');
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

static void test_primary_not_ucfs(void)
{
	struct bd_dev *bd = ram_fs();
	struct fs *fs;
	char why[300];

	REQUIRE(bd != NULL);
	damage(bd, 0, -1);
	CHECK_EQ(mount_opts(bd, 0, 0, &fs, why, sizeof(why)), -EINVAL);
	CHECK(strstr(why, "not a ucfs filesystem") != NULL);
	CHECK(strstr(why, "sb=backup") != NULL);
	/* asked for explicitly */
	REQUIRE(mount_opts(bd, 0, 1, &fs, why, sizeof(why)) == 0);
	CHECK_EQ(fs->sb_backup, 2);
	CHECK_EQ(fs_core_unmount(fs), 0);
	CHECK(block_verifies(bd, 0));
	REQUIRE(mount_opts(bd, 0, 0, &fs, why, sizeof(why)) == 0);
	CHECK_EQ(fs_core_unmount(fs), 0);

	/* not ucfs anywhere */
	damage(bd, 0, -1);
	damage(bd, 1, -1);
	CHECK_EQ(mount_opts(bd, 0, 0, &fs, why, sizeof(why)), -EINVAL);
	CHECK(strcmp(why, "not a ucfs filesystem") == 0);
	bd_close(bd);
}

static void test_both_bad(void)
{
	struct bd_dev *bd = ram_fs();
	struct fs *fs;
	char why[300];

	REQUIRE(bd != NULL);
	damage(bd, 0, 900);
	damage(bd, 1, 900);
	CHECK_EQ(mount_opts(bd, 0, 0, &fs, why, sizeof(why)), -EUCLEAN);
	CHECK(strstr(why, "superblock (block 0): checksum mismatch") != NULL);
	CHECK(strstr(why, "backup superblock (block 1): checksum") != NULL);
	CHECK_EQ(mount_opts(bd, 0, 1, &fs, why, sizeof(why)), -EUCLEAN);
	bd_close(bd);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct holder {
	struct bd_dev *bd;
	unsigned ms;
};

static void *release_later(void *p)
{
	struct holder *h = p;

	usleep(h->ms * 1000);
	bd_close(h->bd);
	return NULL;
}

static void test_open_waits(void)
{
	char path[] = "/tmp/ucfs-test-super-XXXXXX";
	struct fs_mkfs_params p;
	struct fs_core_opts o;
	struct holder h;
	struct bd_dev *bd;
	struct fs *fs;
	char why[300];
	pthread_t th;
	double t0;
	int fd;

	fd = mkstemp(path);
	REQUIRE(fd >= 0);
	REQUIRE(ftruncate(fd, 32 << 20) == 0);
	close(fd);
	REQUIRE(bd_file_open(path, BD_BUFFERED, &bd) == 0);
	fs_mkfs_defaults(&p);
	p.journal_mb = 4;
	p.rgrp_mb = 8;
	REQUIRE(fs_mkfs(bd, &p, why, sizeof(why)) == 0);
	bd_close(bd);

	fs_core_opts_init(&o);
	o.cache_mb = 8;
	/* held for good: refused after the bounded wait */
	REQUIRE(bd_file_open(path, BD_BUFFERED | BD_EXCL, &h.bd) == 0);
	o.busy_wait_ms = 300;
	t0 = now_s();
	CHECK_EQ(fs_core_open(path, &o, &fs, why, sizeof(why)), -EBUSY);
	CHECK(now_s() - t0 >= 0.29);
	CHECK(strstr(why, "already mounted with lockproto=nolock") != NULL);
	CHECK(strstr(why, "300 ms") != NULL);

	/* released while waiting: the mount goes through */
	h.ms = 300;
	o.busy_wait_ms = 0;	/* default 10 s */
	REQUIRE(pthread_create(&th, NULL, release_later, &h) == 0);
	t0 = now_s();
	CHECK_EQ(fs_core_open(path, &o, &fs, why, sizeof(why)), 0);
	CHECK(now_s() - t0 >= 0.25);
	CHECK(now_s() - t0 < 5);
	pthread_join(th, NULL);
	CHECK_EQ(fs_core_unmount(fs), 0);
	unlink(path);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_primary_crc_bad);
	T_RUN(test_primary_not_ucfs);
	T_RUN(test_both_bad);
	T_RUN(test_open_waits);
	return t_done();
}
