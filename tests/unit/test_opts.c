/*
 * test_opts.c — mount option parsing (fusefs/fs_opts.c).
 */
#include "fusefs/fs.h"
#include "tests/unit/harness.h"

#include <errno.h>

static void test_defaults(void)
{
	struct fs_opts o;

	fs_opts_init(&o);
	CHECK_EQ(o.ro, 0);
	CHECK_EQ(o.lockproto, FS_LOCK_NOLOCK);
	CHECK_EQ(o.data, FS_DATA_ORDERED);
	CHECK_EQ(o.commit_s, FS_DEFAULT_COMMIT_S);
	CHECK_EQ(o.atime, FS_ATIME_RELATIME);
	CHECK_EQ(o.cache_mb, FS_DEFAULT_CACHE_MB);
	CHECK_EQ(o.readahead_kb, FS_DEFAULT_READAHEAD_KB);
	CHECK_EQ(o.statahead, FS_DEFAULT_STATAHEAD);
	CHECK_EQ(o.writeback_cache, 0);
	CHECK_EQ(o.uring, FS_URING_AUTO);
	CHECK_EQ(o.fuse[0], '\0');
}

static void test_ucfs_options(void)
{
	struct fs_opts o;
	char err[128] = "";

	fs_opts_init(&o);
	CHECK_EQ(fs_opts_parse(&o, "lockproto=nolock,data=writeback,"
			       "commit=17,cache_mb=64,noatime,ro,readahead=0,"
			       "writeback_cache,statahead=0,uring=off",
			       err, sizeof(err)), 0);
	CHECK_EQ(o.writeback_cache, 1);
	CHECK_EQ(o.uring, FS_URING_OFF);
	CHECK_EQ(o.lockproto, FS_LOCK_NOLOCK);
	CHECK_EQ(o.data, FS_DATA_WRITEBACK);
	CHECK_EQ(o.commit_s, 17);
	CHECK_EQ(o.cache_mb, 64);
	CHECK_EQ(o.atime, FS_ATIME_NOATIME);
	CHECK_EQ(o.ro, 1);
	CHECK_EQ(o.readahead_kb, 0);
	CHECK_EQ(o.statahead, 0);
	CHECK_EQ(fs_opts_parse(&o, "statahead=65536", err, sizeof(err)), 0);
	CHECK_EQ(o.statahead, 65536);
	CHECK_EQ(o.inode_max, -1);
	CHECK_EQ(fs_opts_parse(&o, "inode_max=16", err, sizeof(err)), 0);
	CHECK_EQ(o.inode_max, 16);
	CHECK_EQ(o.statfs_quantum_s, 0); /* the core's default, 30 s */
	CHECK_EQ(fs_opts_parse(&o, "statfs_quantum=7", err, sizeof(err)), 0);
	CHECK_EQ(o.statfs_quantum_s, 7);
	CHECK_EQ(o.statfs_slow, 0);
	CHECK_EQ(fs_opts_parse(&o, "statfs_quantum=0", err, sizeof(err)), 0);
	CHECK_EQ(o.statfs_slow, 1); /* GFS2's statfs_slow */
	CHECK_EQ(o.statfs_quantum_s, 0); /* folds: the default quantum */
	CHECK_EQ(fs_opts_parse(&o, "statfs_quantum=7", err, sizeof(err)), 0);
	CHECK_EQ(o.statfs_slow, 0); /* the later value wins */
	CHECK_EQ(o.statfs_percent, 0); /* GFS2's default: no early fold */
	CHECK_EQ(fs_opts_parse(&o, "statfs_percent=5", err, sizeof(err)), 0);
	CHECK_EQ(o.statfs_percent, 5);
	CHECK_EQ(fs_opts_parse(&o, "statfs_percent=0", err, sizeof(err)), 0);
	CHECK_EQ(o.statfs_percent, 0);
	/* dlm: a non-covering mount's wait for the records to go off */
	CHECK_EQ(o.records_timeout_s, FS_DEFAULT_RECORDS_TIMEOUT_S);
	CHECK_EQ(fs_opts_parse(&o, "records_timeout=5", err, sizeof(err)), 0);
	CHECK_EQ(o.records_timeout_s, 5);
	CHECK_EQ(fs_opts_parse(&o, "records_timeout=0", err, sizeof(err)), 0);
	CHECK_EQ(o.records_timeout_s, 0); /* no bound */
	/* later values win, second call adds */
	CHECK_EQ(fs_opts_parse(&o, "rw,relatime,data=ordered,allow_other,"
			       "nowriteback_cache,uring=on",
			       err, sizeof(err)), 0);
	CHECK_EQ(o.writeback_cache, 0);
	CHECK_EQ(o.uring, FS_URING_ON);
	CHECK_EQ(o.ro, 0);
	CHECK_EQ(o.atime, FS_ATIME_RELATIME);
	CHECK_EQ(o.data, FS_DATA_ORDERED);
	CHECK_EQ(o.allow_other, 1);
	CHECK_EQ(fs_opts_parse(&o, "strictatime,lockproto=dlm", err,
			       sizeof(err)), 0);
	CHECK_EQ(o.atime, FS_ATIME_STRICT);
	CHECK_EQ(o.lockproto, FS_LOCK_DLM);
	/* the pass-through lens: a flag, off by default */
	CHECK_EQ(o.passthrough, 0);
	CHECK_EQ(fs_opts_parse(&o, "passthrough", err, sizeof(err)), 0);
	CHECK_EQ(o.passthrough, 1);
	CHECK(fs_opts_parse(&o, "passthrough=1", err, sizeof(err)) < 0);
	/* localflocks (GFS2's): a flag, off by default */
	CHECK_EQ(o.localflocks, 0);
	CHECK_EQ(fs_opts_parse(&o, "localflocks", err, sizeof(err)), 0);
	CHECK_EQ(o.localflocks, 1);
	CHECK(fs_opts_parse(&o, "localflocks=1", err, sizeof(err)) < 0);
}

static void test_fstab_noise_and_fuse(void)
{
	struct fs_opts o;
	char err[128] = "";

	fs_opts_init(&o);
	CHECK_EQ(fs_opts_parse(&o, "rw,dev,suid,nodev,noexec,_netdev,"
			       "defaults,x-systemd.automount,nofail,,"
			       "default_permissions,fsname=/dev/x,"
			       "comment=foo", err, sizeof(err)), 0);
	CHECK(strcmp(o.fuse, "dev,suid,nodev,noexec,fsname=/dev/x") == 0);
}

static void test_rejects(void)
{
	static const struct {
		const char *in;
		const char *msg;
	} bad[] = {
		{ "foo", "ucfs: unknown mount option 'foo'" },
		{ "rw,bogus=1", "ucfs: unknown mount option 'bogus=1'" },
		{ "commit=abc", "ucfs: bad value in mount option 'commit=abc'" },
		{ "commit=", "ucfs: bad value in mount option 'commit='" },
		{ "commit=-1", "ucfs: bad value in mount option 'commit=-1'" },
		{ "commit=0", "ucfs: bad value in mount option 'commit=0'" },
		{ "statfs_quantum=x", "ucfs: bad value in mount option "
				      "'statfs_quantum=x'" },
		{ "statfs_quantum=3601", NULL },
		{ "statfs_percent=101", "ucfs: bad value in mount option "
					"'statfs_percent=101'" },
		{ "statfs_percent=-1", NULL },
		{ "statfs_percent=5%", NULL },
		{ "cache_mb=1x", NULL },
		{ "readahead=100000", NULL },
		{ "statahead=65537", NULL },
		{ "statahead=-1", NULL },
		{ "inode_max=15", "ucfs: bad value in mount option "
				  "'inode_max=15'" },
		{ "inode_max=16777217", NULL },
		{ "records_timeout=86401", "ucfs: bad value in mount option "
					   "'records_timeout=86401'" },
		{ "records_timeout=1m", NULL },
		{ "records_timeout=-1", NULL },
		{ "data=journal", NULL },
		{ "lockproto=gulm", NULL },
		{ "uring=yes", "ucfs: bad value in mount option 'uring=yes'" },
		{ "uring", "ucfs: unknown mount option 'uring'" },
		{ "ro=1", "ucfs: bad value in mount option 'ro=1'" },
		{ "nodev=1", NULL },
		{ "fsname=", NULL },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct fs_opts o;
		char err[128] = "";

		fs_opts_init(&o);
		CHECK_EQ(fs_opts_parse(&o, bad[i].in, err, sizeof(err)),
			 -EINVAL);
		if (bad[i].msg != NULL && strcmp(err, bad[i].msg) != 0) {
			fprintf(stderr, "for '%s' got '%s'\n", bad[i].in, err);
			CHECK(0);
		}
		CHECK(strstr(err, "ucfs: ") == err);
	}
}

static void test_fuse_overflow(void)
{
	struct fs_opts o;
	char err[128] = "", big[2048];

	fs_opts_init(&o);
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	memcpy(big, "fsname=", 7);
	CHECK_EQ(fs_opts_parse(&o, big, err, sizeof(err)), -EINVAL);
	/* NULL err is allowed */
	CHECK_EQ(fs_opts_parse(&o, "nope", NULL, 0), -EINVAL);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_defaults);
	T_RUN(test_ucfs_options);
	T_RUN(test_fstab_noise_and_fuse);
	T_RUN(test_rejects);
	T_RUN(test_fuse_overflow);
	return t_done();
}
