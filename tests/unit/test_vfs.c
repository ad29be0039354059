/*
 * test_vfs.c — the namespace API (fs.h) on a RAM device: create, link,
 * unlink (also while open, and orphan reclaim after a crash), rename in
 * all its forms, symlinks, special files, attributes and the POSIX rules
 * the library applies (setgid dirs, sticky bit, suid clearing, ctime),
 * xattrs and ACL mode mirroring, ENOSPC, remount persistence.
 */
#include "fusefs/core/fs_internal.h"
#include "tests/unit/fs_testutil.h"
#include "tests/unit/harness.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

static void test_create_lookup_remount(void)
{
	struct tfs t;
	struct fs_attr a;
	char buf[64];
	int64_t ino, d;

	REQUIRE(tfs_open(&t, 64) == 0);
	a = tfs_stat(&t, t.root);
	CHECK(S_ISDIR(a.mode));
	CHECK_EQ(a.nlink, 2);
	ino = tfs_creat(&t, t.root, "hello", 0644);
	REQUIRE(ino > 0);
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)ino, "world", 5, 0),
		 5);
	d = tfs_mkdir(&t, t.root, "sub");
	REQUIRE(d > 0);
	CHECK_EQ(tfs_stat(&t, t.root).nlink, 3);
	CHECK_EQ(tfs_creat(&t, t.root, "hello", 0644), -EEXIST);
	CHECK_EQ(tfs_lookup(&t, t.root, "nope"), -ENOENT);
	CHECK_EQ(tfs_lookup(&t, t.root, "."), (int64_t)t.root);
	CHECK_EQ(tfs_lookup(&t, (uint64_t)d, ".."), (int64_t)t.root);
	REQUIRE(tfs_remount(&t) == 0);
	CHECK_EQ(tfs_lookup(&t, t.root, "hello"), ino);
	CHECK_EQ(tfs_lookup(&t, t.root, "sub"), d);
	memset(buf, 0, sizeof(buf));
	CHECK_EQ(fs_read(t.fs, (uint64_t)ino, buf, sizeof(buf), 0), 5);
	CHECK(memcmp(buf, "world", 5) == 0);
	a = tfs_stat(&t, (uint64_t)ino);
	CHECK_EQ(a.size, 5);
	CHECK_EQ(a.mode, S_IFREG | 0644);
	CHECK_EQ(a.nlink, 1);
	tfs_close(&t);
}

static void test_names(void)
{
	struct tfs t;
	char name[300];

	REQUIRE(tfs_open(&t, 64) == 0);
	memset(name, 'x', sizeof(name));
	name[255] = '\0';
	CHECK(tfs_creat(&t, t.root, name, 0600) > 0);
	CHECK(tfs_lookup(&t, t.root, name) > 0);
	name[255] = 'y';
	name[256] = '\0';
	CHECK_EQ(tfs_creat(&t, t.root, name, 0600), -ENAMETOOLONG);
	CHECK_EQ(tfs_lookup(&t, t.root, name), -ENAMETOOLONG);
	/* any byte but '/' and NUL */
	for (int i = 1; i < 256; i++)
		name[i - 1] = (char)(i == '/' ? 1 : i);
	name[255] = '\0';
	CHECK(tfs_creat(&t, t.root, name, 0600) > 0);
	CHECK(tfs_lookup(&t, t.root, name) > 0);
	CHECK_EQ(tfs_creat(&t, t.root, "a/b", 0600), -EINVAL);
	CHECK_EQ(tfs_creat(&t, t.root, ".", 0600), -EEXIST);
	tfs_close(&t);
}

static void test_unlink_rmdir(void)
{
	struct tfs t;
	struct statvfs before, after;
	int64_t d, f;

	REQUIRE(tfs_open(&t, 64) == 0);
	fs_statfs(t.fs, &before);
	d = tfs_mkdir(&t, t.root, "d");
	REQUIRE(d > 0);
	f = tfs_creat(&t, (uint64_t)d, "f", 0644);
	REQUIRE(f > 0);
	CHECK_EQ(fs_rmdir(t.fs, tfs_cred(&t), t.root, "d"), -ENOTEMPTY);
	CHECK_EQ(fs_unlink(t.fs, tfs_cred(&t), t.root, "d"), -EISDIR);
	CHECK_EQ(fs_rmdir(t.fs, tfs_cred(&t), (uint64_t)d, "f"), -ENOTDIR);
	CHECK_EQ(fs_unlink(t.fs, tfs_cred(&t), (uint64_t)d, "f"), 0);
	CHECK_EQ(fs_unlink(t.fs, tfs_cred(&t), (uint64_t)d, "f"), -ENOENT);
	CHECK_EQ(fs_rmdir(t.fs, tfs_cred(&t), t.root, "d"), 0);
	CHECK_EQ(tfs_stat(&t, t.root).nlink, 2);
	CHECK_EQ(tfs_lookup(&t, t.root, "d"), -ENOENT);
	/* creating in a removed directory fails */
	CHECK_EQ(tfs_creat(&t, (uint64_t)d, "g", 0644) < 0, 1);
	fs_forget(t.fs, (uint64_t)d, 1);
	fs_forget(t.fs, (uint64_t)f, 1);
	fs_sync(t.fs);
	fs_statfs(t.fs, &after);
	CHECK_EQ(after.f_bfree, before.f_bfree);
	tfs_close(&t);
}

static void test_unlink_open_file(void)
{
	struct tfs t;
	struct fs_attr a;
	struct statvfs s0, s1, s2;
	static char big[1 << 20];
	char buf[16];
	uint64_t ino;

	REQUIRE(tfs_open(&t, 64) == 0);
	fs_sync(t.fs);
	fs_statfs(t.fs, &s0);
	REQUIRE(fs_create(t.fs, tfs_cred(&t), t.root, "f", 0644, O_RDWR,
			  &a) == 0);
	ino = a.ino;
	memset(big, 'q', sizeof(big));
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), ino, big, sizeof(big), 0),
		 sizeof(big));
	CHECK_EQ(fs_unlink(t.fs, tfs_cred(&t), t.root, "f"), 0);
	/* still readable through the open */
	CHECK_EQ(fs_read(t.fs, ino, buf, 4, 1000), 4);
	CHECK(memcmp(buf, "qqqq", 4) == 0);
	CHECK_EQ(tfs_stat(&t, ino).nlink, 0);
	fs_sync(t.fs);
	fs_statfs(t.fs, &s1);
	CHECK(s1.f_bfree + 256 <= s0.f_bfree);
	fs_release(t.fs, ino);
	fs_forget(t.fs, ino, 1);	/* the create's lookup reference */
	fs_sync(t.fs);
	fs_statfs(t.fs, &s2);
	CHECK_EQ(s2.f_bfree, s0.f_bfree);
	CHECK(fs_getattr(t.fs, ino, &a) < 0);
	tfs_close(&t);
}

/* Unlinked while open, then a crash: the next mount frees it. */
static void test_orphan_reclaim_after_crash(void)
{
	struct tfs t;
	struct fs_attr a;
	struct statvfs s0, s1;
	static char big[256 << 10];
	uint64_t ino;

	REQUIRE(tfs_open(&t, 64) == 0);
	fs_sync(t.fs);
	fs_statfs(t.fs, &s0);
	REQUIRE(fs_create(t.fs, tfs_cred(&t), t.root, "f", 0644, O_RDWR,
			  &a) == 0);
	ino = a.ino;
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), ino, big, sizeof(big), 0),
		 sizeof(big));
	CHECK_EQ(fs_unlink(t.fs, tfs_cred(&t), t.root, "f"), 0);
	CHECK_EQ(fs_sync(t.fs), 0);
	/* crash: no unmount, nothing more written */
	fs_abandon(t.fs);
	t.fs = NULL;
	REQUIRE(tfs_mount(&t) == 0);
	fs_sync(t.fs);
	fs_statfs(t.fs, &s1);
	CHECK_EQ(s1.f_bfree, s0.f_bfree);
	CHECK(fs_getattr(t.fs, ino, &a) < 0);
	tfs_close(&t);
}

static void test_link(void)
{
	struct tfs t;
	struct fs_attr a;
	int64_t f, d;

	REQUIRE(tfs_open(&t, 64) == 0);
	f = tfs_creat(&t, t.root, "f", 0644);
	d = tfs_mkdir(&t, t.root, "d");
	REQUIRE(f > 0 && d > 0);
	CHECK_EQ(fs_link(t.fs, tfs_cred(&t), (uint64_t)f, (uint64_t)d, "g",
			 &a), 0);
	CHECK_EQ(a.nlink, 2);
	CHECK_EQ(tfs_lookup(&t, (uint64_t)d, "g"), f);
	CHECK_EQ(fs_link(t.fs, tfs_cred(&t), (uint64_t)f, (uint64_t)d, "g",
			 &a), -EEXIST);
	CHECK_EQ(fs_link(t.fs, tfs_cred(&t), (uint64_t)d, t.root, "dd", &a),
		 -EPERM);
	CHECK_EQ(fs_unlink(t.fs, tfs_cred(&t), t.root, "f"), 0);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).nlink, 1);
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)f, "abc", 3, 0), 3);
	REQUIRE(tfs_remount(&t) == 0);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).size, 3);
	tfs_close(&t);
}

static void test_rename(void)
{
	struct tfs t;
	const struct fs_cred *c;
	int64_t a, b, d1, d2, sub;

	REQUIRE(tfs_open(&t, 64) == 0);
	c = tfs_cred(&t);
	a = tfs_creat(&t, t.root, "a", 0644);
	b = tfs_creat(&t, t.root, "b", 0644);
	d1 = tfs_mkdir(&t, t.root, "d1");
	d2 = tfs_mkdir(&t, t.root, "d2");
	sub = tfs_mkdir(&t, (uint64_t)d1, "sub");
	REQUIRE(a > 0 && b > 0 && d1 > 0 && d2 > 0 && sub > 0);
	/* simple, across directories */
	CHECK_EQ(fs_rename(t.fs, c, t.root, "a", (uint64_t)d2, "a2", 0), 0);
	CHECK_EQ(tfs_lookup(&t, t.root, "a"), -ENOENT);
	CHECK_EQ(tfs_lookup(&t, (uint64_t)d2, "a2"), a);
	/* over an existing file: b's inode loses its link */
	CHECK_EQ(fs_rename(t.fs, c, (uint64_t)d2, "a2", t.root, "b", 0), 0);
	CHECK_EQ(tfs_lookup(&t, t.root, "b"), a);
	CHECK_EQ(tfs_stat(&t, (uint64_t)b).nlink, 0);
	/* NOREPLACE */
	CHECK(tfs_creat(&t, t.root, "c", 0644) > 0);
	CHECK_EQ(fs_rename(t.fs, c, t.root, "b", t.root, "c",
			   FS_RENAME_NOREPLACE), -EEXIST);
	CHECK_EQ(fs_rename(t.fs, c, t.root, "b", t.root, "e",
			   FS_RENAME_NOREPLACE), 0);
	/* EXCHANGE a file and a directory across parents */
	CHECK_EQ(fs_rename(t.fs, c, t.root, "e", (uint64_t)d1, "sub",
			   FS_RENAME_EXCHANGE), 0);
	CHECK_EQ(tfs_lookup(&t, t.root, "e"), sub);
	CHECK_EQ(tfs_lookup(&t, (uint64_t)d1, "sub"), a);
	CHECK_EQ(tfs_stat(&t, (uint64_t)d1).nlink, 2);
	CHECK_EQ(tfs_stat(&t, t.root).nlink, 5);
	CHECK_EQ(tfs_lookup(&t, (uint64_t)sub, ".."), (int64_t)t.root);
	CHECK_EQ(fs_rename(t.fs, c, t.root, "zz", t.root, "e",
			   FS_RENAME_EXCHANGE), -ENOENT);
	/* directory rules */
	CHECK_EQ(fs_rename(t.fs, c, t.root, "d1", (uint64_t)d1, "x", 0),
		 -EINVAL);
	CHECK(tfs_mkdir(&t, (uint64_t)d2, "in") > 0);
	CHECK_EQ(fs_rename(t.fs, c, t.root, "e", t.root, "d2", 0),
		 -ENOTEMPTY);
	CHECK_EQ(fs_rename(t.fs, c, t.root, "e", t.root, "c", 0), -ENOTDIR);
	CHECK_EQ(fs_rename(t.fs, c, t.root, "c", t.root, "e", 0), -EISDIR);
	/* dir over empty dir, across parents */
	CHECK_EQ(fs_rename(t.fs, c, t.root, "e", (uint64_t)d2, "in", 0), 0);
	CHECK_EQ(tfs_stat(&t, t.root).nlink, 4);
	CHECK_EQ(tfs_stat(&t, (uint64_t)d2).nlink, 3);
	CHECK_EQ(tfs_lookup(&t, (uint64_t)sub, ".."), d2);
	/* same inode: no-op */
	CHECK_EQ(fs_link(t.fs, c, (uint64_t)a, t.root, "a_link",
			 &(struct fs_attr){ 0 }), 0);
	CHECK_EQ(fs_rename(t.fs, c, t.root, "a_link", (uint64_t)d1, "sub", 0),
		 0);
	CHECK_EQ(tfs_lookup(&t, t.root, "a_link"), a);
	CHECK_EQ(fs_rename(t.fs, c, t.root, "c", t.root, "c", 3), -EINVAL);
	REQUIRE(tfs_remount(&t) == 0);
	CHECK_EQ(tfs_lookup(&t, (uint64_t)d2, "in"), sub);
	CHECK_EQ(tfs_stat(&t, (uint64_t)d2).nlink, 3);
	tfs_close(&t);
}

static void test_symlink_special(void)
{
	struct tfs t;
	struct fs_attr a;
	char target[4000], buf[4096];

	REQUIRE(tfs_open(&t, 64) == 0);
	CHECK_EQ(fs_symlink(t.fs, tfs_cred(&t), t.root, "s", "/etc/passwd",
			    &a), 0);
	CHECK(S_ISLNK(a.mode));
	CHECK_EQ(a.size, 11);
	CHECK_EQ(fs_readlink(t.fs, a.ino, buf, sizeof(buf)), 11);
	CHECK(memcmp(buf, "/etc/passwd", 11) == 0);
	memset(target, 'L', sizeof(target) - 1);
	target[sizeof(target) - 1] = '\0';
	CHECK_EQ(fs_symlink(t.fs, tfs_cred(&t), t.root, "long", target, &a),
		 0);
	CHECK_EQ(fs_readlink(t.fs, a.ino, buf, sizeof(buf)),
		 (long long)strlen(target));
	CHECK(memcmp(buf, target, strlen(target)) == 0);
	CHECK_EQ(fs_mknod(t.fs, tfs_cred(&t), t.root, "fifo", S_IFIFO | 0600,
			  0, &a), 0);
	CHECK(S_ISFIFO(a.mode));
	CHECK_EQ(fs_mknod(t.fs, tfs_cred(&t), t.root, "sock", S_IFSOCK | 0600,
			  0, &a), 0);
	CHECK(S_ISSOCK(a.mode));
	CHECK_EQ(fs_mknod(t.fs, tfs_cred(&t), t.root, "null", S_IFCHR | 0600,
			  makedev(1, 3), &a), 0);
	CHECK_EQ(a.rdev, makedev(1, 3));
	CHECK_EQ(fs_readlink(t.fs, a.ino, buf, sizeof(buf)), -EINVAL);
	REQUIRE(tfs_remount(&t) == 0);
	CHECK_EQ(fs_readlink(t.fs, (uint64_t)tfs_lookup(&t, t.root, "long"),
			     buf, sizeof(buf)), (long long)strlen(target));
	CHECK(S_ISFIFO(tfs_stat(&t, (uint64_t)tfs_lookup(&t, t.root,
							 "fifo")).mode));
	tfs_close(&t);
}

static void test_attrs_and_posix_rules(void)
{
	struct tfs t;
	struct fs_cred user = { .uid = 1000, .gid = 1000, .umask = 022 };
	struct fs_attr in, out, a;
	int64_t d, f;

	REQUIRE(tfs_open(&t, 64) == 0);
	/* creator's uid/gid, umask */
	CHECK_EQ(fs_mkdir(t.fs, &user, t.root, "u", 0777, &a), 0);
	CHECK_EQ(a.uid, 1000);
	CHECK_EQ(a.gid, 1000);
	CHECK_EQ(a.mode & 07777, 0755);
	/* setgid directory: group and (for dirs) the bit are inherited */
	d = tfs_mkdir(&t, t.root, "sg");
	memset(&in, 0, sizeof(in));
	in.mode = 02775;
	in.gid = 50;
	CHECK_EQ(fs_setattr(t.fs, tfs_cred(&t), (uint64_t)d, &in,
			    FS_SET_MODE | FS_SET_GID, &out), 0);
	CHECK_EQ(fs_create(t.fs, &user, (uint64_t)d, "f", 0644, 0, &a), 0);
	CHECK_EQ(a.gid, 50);
	CHECK_EQ(a.mode & S_ISGID, 0);
	fs_release(t.fs, a.ino);
	CHECK_EQ(fs_mkdir(t.fs, &user, (uint64_t)d, "sd", 0755, &a), 0);
	CHECK_EQ(a.gid, 50);
	CHECK(a.mode & S_ISGID);
	/* chmod/chown move ctime; utimens with nanoseconds */
	f = tfs_creat(&t, t.root, "f", 04755);
	a = tfs_stat(&t, (uint64_t)f);
	CHECK(a.mode & S_ISUID);
	in.atime = (struct timespec){ 1000, 123456789 };
	in.mtime = (struct timespec){ 2000, 987654321 };
	CHECK_EQ(fs_setattr(t.fs, tfs_cred(&t), (uint64_t)f, &in,
			    FS_SET_ATIME | FS_SET_MTIME, &out), 0);
	CHECK_EQ(out.atime.tv_sec, 1000);
	CHECK_EQ(out.atime.tv_nsec, 123456789);
	CHECK_EQ(out.mtime.tv_nsec, 987654321);
	CHECK(out.ctime.tv_sec > 2000);
	/* chown clears suid; non-root write clears suid */
	in.uid = 7;
	CHECK_EQ(fs_setattr(t.fs, tfs_cred(&t), (uint64_t)f, &in, FS_SET_UID,
			    &out), 0);
	CHECK_EQ(out.uid, 7);
	CHECK_EQ(out.mode & S_ISUID, 0);
	in.mode = 06755;
	CHECK_EQ(fs_setattr(t.fs, tfs_cred(&t), (uint64_t)f, &in, FS_SET_MODE,
			    &out), 0);
	CHECK_EQ(out.mode & 07777, 06755);
	CHECK_EQ(fs_write(t.fs, &user, (uint64_t)f, "x", 1, 0), 1);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).mode & 07777, 0755);
	/* truncate via setattr */
	in.size = 100000;
	CHECK_EQ(fs_setattr(t.fs, tfs_cred(&t), (uint64_t)f, &in, FS_SET_SIZE,
			    &out), 0);
	CHECK_EQ(out.size, 100000);
	in.size = 1;
	CHECK_EQ(fs_setattr(t.fs, tfs_cred(&t), (uint64_t)d, &in, FS_SET_SIZE,
			    &out), -EISDIR);
	tfs_close(&t);
}

static void test_sticky(void)
{
	struct tfs t;
	struct fs_cred u1 = { .uid = 1001, .gid = 100 };
	struct fs_cred u2 = { .uid = 1002, .gid = 100 };
	struct fs_attr in, out, a;
	int64_t d;

	REQUIRE(tfs_open(&t, 64) == 0);
	d = tfs_mkdir(&t, t.root, "tmp");
	memset(&in, 0, sizeof(in));
	in.mode = 01777;
	CHECK_EQ(fs_setattr(t.fs, tfs_cred(&t), (uint64_t)d, &in, FS_SET_MODE,
			    &out), 0);
	CHECK_EQ(fs_create(t.fs, &u1, (uint64_t)d, "mine", 0644, 0, &a), 0);
	fs_release(t.fs, a.ino);
	CHECK_EQ(fs_unlink(t.fs, &u2, (uint64_t)d, "mine"), -EPERM);
	CHECK_EQ(fs_rename(t.fs, &u2, (uint64_t)d, "mine", (uint64_t)d, "x",
			   0), -EPERM);
	CHECK_EQ(fs_unlink(t.fs, &u1, (uint64_t)d, "mine"), 0);
	tfs_close(&t);
}

static void test_xattr_acl(void)
{
	struct tfs t;
	char buf[256];
	int64_t f;
	/* user::rw- user:1000:r-- group::r-- mask::r-- other::--- */
	struct {
		uint32_t ver;
		struct { uint16_t tag, perm; uint32_t id; } e[5];
	} acl = { 2, { { 0x01, 6, 0 }, { 0x02, 4, 1000 }, { 0x04, 4, 0 },
		       { 0x10, 4, 0 }, { 0x20, 0, 0 } } };
	struct {
		uint32_t ver;
		struct { uint16_t tag, perm; uint32_t id; } e[3];
	} plain = { 2, { { 0x01, 7, 0 }, { 0x04, 5, 0 }, { 0x20, 1, 0 } } };

	REQUIRE(tfs_open(&t, 64) == 0);
	f = tfs_creat(&t, t.root, "f", 0666);
	REQUIRE(f > 0);
	CHECK_EQ(fs_setxattr(t.fs, tfs_cred(&t), (uint64_t)f, "user.a", "1", 1,
			     0), 0);
	CHECK_EQ(fs_setxattr(t.fs, tfs_cred(&t), (uint64_t)f, "user.a", "22",
			     2, XATTR_CREATE), -EEXIST);
	CHECK_EQ(fs_setxattr(t.fs, tfs_cred(&t), (uint64_t)f, "user.b", "22",
			     2, XATTR_REPLACE), -ENODATA);
	CHECK_EQ(fs_setxattr(t.fs, tfs_cred(&t), (uint64_t)f, "trusted.t",
			     "tt", 2, 0), 0);
	CHECK_EQ(fs_setxattr(t.fs, tfs_cred(&t), (uint64_t)f, "security.s",
			     "", 0, 0), 0);
	CHECK_EQ(fs_setxattr(t.fs, tfs_cred(&t), (uint64_t)f, "bogus.x", "1",
			     1, 0), -EOPNOTSUPP);
	CHECK_EQ(fs_getxattr(t.fs, (uint64_t)f, "user.a", NULL, 0), 1);
	CHECK_EQ(fs_getxattr(t.fs, (uint64_t)f, "user.a", buf, sizeof(buf)),
		 1);
	CHECK_EQ(buf[0], '1');
	CHECK_EQ(fs_getxattr(t.fs, (uint64_t)f, "user.zz", buf, sizeof(buf)),
		 -ENODATA);
	CHECK_EQ(fs_getxattr(t.fs, (uint64_t)f, "trusted.t", buf, 1), -ERANGE);
	CHECK_EQ(fs_listxattr(t.fs, (uint64_t)f, NULL, 0),
		 (long long)sizeof("user.a\0trusted.t\0security.s"));
	CHECK_EQ(fs_listxattr(t.fs, (uint64_t)f, buf, sizeof(buf)),
		 (long long)sizeof("user.a\0trusted.t\0security.s"));
	CHECK(memcmp(buf, "user.a\0trusted.t\0security.s",
		     sizeof("user.a\0trusted.t\0security.s")) == 0);
	CHECK_EQ(fs_removexattr(t.fs, tfs_cred(&t), (uint64_t)f, "user.a"), 0);
	CHECK_EQ(fs_removexattr(t.fs, tfs_cred(&t), (uint64_t)f, "user.a"),
		 -ENODATA);
	/* access ACL: stored, mode mirrors owner/mask/other */
	CHECK_EQ(fs_setxattr(t.fs, tfs_cred(&t), (uint64_t)f,
			     "system.posix_acl_access", &acl, sizeof(acl), 0),
		 0);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).mode & 0777, 0640);
	CHECK_EQ(fs_getxattr(t.fs, (uint64_t)f, "system.posix_acl_access", buf,
			     sizeof(buf)), (long long)sizeof(acl));
	/* an ACL equivalent to a mode is not stored, only the mode */
	CHECK_EQ(fs_setxattr(t.fs, tfs_cred(&t), (uint64_t)f,
			     "system.posix_acl_access", &plain, sizeof(plain),
			     0), 0);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).mode & 0777, 0751);
	CHECK_EQ(fs_getxattr(t.fs, (uint64_t)f, "system.posix_acl_access", buf,
			     sizeof(buf)), -ENODATA);
	/* default ACL only on directories; inherited by new files */
	CHECK_EQ(fs_setxattr(t.fs, tfs_cred(&t), (uint64_t)f,
			     "system.posix_acl_default", &acl, sizeof(acl), 0),
		 -EACCES);
	CHECK_EQ(fs_setxattr(t.fs, tfs_cred(&t), t.root,
			     "system.posix_acl_default", &acl, sizeof(acl), 0),
		 0);
	{
		struct fs_cred u = { .uid = 5, .gid = 5, .umask = 077 };
		struct fs_attr a;

		CHECK_EQ(fs_create(t.fs, &u, t.root, "inh", 0666, 0, &a), 0);
		fs_release(t.fs, a.ino);
		/* umask ignored, mode = 0666 masked by the ACL: 0640 */
		CHECK_EQ(a.mode & 0777, 0640);
		CHECK_EQ(fs_getxattr(t.fs, a.ino, "system.posix_acl_access",
				     buf, sizeof(buf)), (long long)sizeof(acl));
	}
	REQUIRE(tfs_remount(&t) == 0);
	CHECK_EQ(fs_getxattr(t.fs, (uint64_t)f, "trusted.t", buf, sizeof(buf)),
		 2);
	tfs_close(&t);
}

static void test_enospc(void)
{
	struct tfs t;
	static char chunk[1 << 20];
	int64_t f;
	ssize_t n = 0;
	uint64_t off = 0;
	int i;

	REQUIRE(tfs_open(&t, 48) == 0);
	f = tfs_creat(&t, t.root, "fill", 0644);
	REQUIRE(f > 0);
	memset(chunk, 'z', sizeof(chunk));
	for (i = 0; i < 100; i++) {
		n = fs_write(t.fs, tfs_cred(&t), (uint64_t)f, chunk,
			     sizeof(chunk), off);
		if (n < (ssize_t)sizeof(chunk))
			break;
		off += (uint64_t)n;
	}
	CHECK(i < 100);
	if (n > 0)
		off += (uint64_t)n;
	n = fs_write(t.fs, tfs_cred(&t), (uint64_t)f, chunk, sizeof(chunk),
		     off);
	CHECK_EQ(n, -ENOSPC);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).size, off);
	/* fill the inodes too, then recover by deleting */
	for (i = 0; i < 100000; i++) {
		char name[32];

		snprintf(name, sizeof(name), "n%d", i);
		if (tfs_creat(&t, t.root, name, 0644) < 0)
			break;
	}
	CHECK(i < 100000);
	CHECK_EQ(fs_unlink(t.fs, tfs_cred(&t), t.root, "fill"), 0);
	fs_forget(t.fs, (uint64_t)f, 1);
	f = tfs_creat(&t, t.root, "again", 0644);
	CHECK(f > 0);
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)f, chunk,
			  sizeof(chunk), 0), sizeof(chunk));
	REQUIRE(tfs_remount(&t) == 0);
	CHECK_EQ(tfs_stat(&t, (uint64_t)f).size, sizeof(chunk));
	tfs_close(&t);
}

/* fsync is durable: after a power loss (unflushed writes dropped by the
 * fault device) the fsync'ed file is there with its data. */
/* Power loss on @fault (the device under t->fs), then mount @lower
 * again. */
static int crash_remount(struct tfs *t, struct bd_dev *lower,
			 struct bd_fault *fault)
{
	bd_fault_crash(fault, 0);
	fs_abandon(t->fs);
	t->fs = NULL;
	t->bd = lower;
	return tfs_mount(t);
}

/* 1 if the root's file @name holds exactly @want. */
static int file_is(struct tfs *t, const char *name, const char *want)
{
	char buf[64] = "";
	int64_t ino = tfs_lookup(t, t->root, name);
	ssize_t n;

	if (ino <= 0)
		return 0;
	n = fs_read(t->fs, (uint64_t)ino, buf, sizeof(buf), 0);
	return n == (ssize_t)strlen(want) && memcmp(buf, want, (size_t)n) == 0;
}

static void test_fsync_durable(void)
{
	struct tfs t;
	struct bd_dev *lower, *fdev;
	struct bd_fault *fault;
	struct fs_attr a;

	REQUIRE(tfs_format(&t, 64) == 0);
	lower = t.bd;
	REQUIRE(bd_fault_open(lower, &fdev, &fault) == 0);
	t.bd = fdev;
	REQUIRE(tfs_mount(&t) == 0);
	REQUIRE(fs_create(t.fs, tfs_cred(&t), t.root, "durable", 0644, 0,
			  &a) == 0);
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), a.ino, "synced", 6, 0), 6);
	CHECK_EQ(fs_fsync(t.fs, a.ino, 0), 0);
	fs_release(t.fs, a.ino);
	REQUIRE(crash_remount(&t, lower, fault) == 0);
	CHECK(file_is(&t, "durable", "synced"));
	fs_unmount(t.fs);
	bd_close(fdev);	/* closes lower too */
}

static uint64_t fsync_commits(struct fs *fs, uint64_t *clean)
{
	struct fs_core_stats st;

	fs_core_stats_get(fs, &st);
	*clean = st.fsync_clean;
	return st.commit_reason[FS_CR_SYNC];
}

/* An fsync of one file commits only when a change of that file is not
 * durable yet: another file's change in the running transaction does
 * not make it commit (counted: fsync_clean); the fsync'ed data survives
 * a power loss. */
static void test_fsync_one_inode(void)
{
	struct tfs t;
	struct bd_dev *lower, *fdev;
	struct bd_fault *fault;
	struct fs_attr a, b;
	uint64_t c0, c1, k0, k1;

	REQUIRE(tfs_format(&t, 64) == 0);
	lower = t.bd;
	REQUIRE(bd_fault_open(lower, &fdev, &fault) == 0);
	t.bd = fdev;
	REQUIRE(tfs_mount(&t) == 0);
	REQUIRE(fs_create(t.fs, tfs_cred(&t), t.root, "a", 0644, 0, &a) == 0);
	REQUIRE(fs_create(t.fs, tfs_cred(&t), t.root, "b", 0644, 0, &b) == 0);
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), a.ino, "first", 5, 0), 5);
	c0 = fsync_commits(t.fs, &k0);
	CHECK_EQ(fs_fsync(t.fs, a.ino, 0), 0);
	c1 = fsync_commits(t.fs, &k1);
	CHECK_EQ(c1, c0 + 1);
	CHECK_EQ(k1, k0);
	/* only b changes now: a's fsync has nothing to commit */
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), b.ino, "other", 5, 0), 5);
	CHECK_EQ(fs_fsync(t.fs, a.ino, 0), 0);
	c0 = fsync_commits(t.fs, &k0);
	CHECK_EQ(c0, c1);
	CHECK_EQ(k0, k1 + 1);
	/* a changes again: its fsync commits (b's change goes with it) */
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), a.ino, "again", 5, 5), 5);
	CHECK_EQ(fs_fsync(t.fs, a.ino, 0), 0);
	c1 = fsync_commits(t.fs, &k1);
	CHECK_EQ(c1, c0 + 1);
	CHECK_EQ(k1, k0);
	CHECK_EQ(fs_fsync(t.fs, b.ino, 0), 0);
	CHECK_EQ(fsync_commits(t.fs, &k0), c1); /* b went with a's */
	CHECK_EQ(k0, k1 + 1);
	fs_release(t.fs, a.ino);
	fs_release(t.fs, b.ino);
	REQUIRE(crash_remount(&t, lower, fault) == 0);
	CHECK(file_is(&t, "a", "firstagain"));
	CHECK(file_is(&t, "b", "other"));
	fs_unmount(t.fs);
	bd_close(fdev);
}

/* A data write that fails after fs_write returned (the write behind)
 * is reported by the next fsync (-EIO), once; small and large writes. */
static void test_fsync_write_error(void)
{
	static char buf[3 << 20], out[3 << 20];
	static const size_t lens[] = { 8192, sizeof(buf) };
	struct tfs t;
	struct bd_dev *lower, *fdev;
	struct bd_fault *fault;

	REQUIRE(tfs_format(&t, 64) == 0);
	lower = t.bd;
	REQUIRE(bd_fault_open(lower, &fdev, &fault) == 0);
	t.bd = fdev;
	(void)lower;
	REQUIRE(tfs_mount(&t) == 0);
	for (unsigned i = 0; i < 2; i++) {
		struct fs_attr a;
		char name[16];

		snprintf(name, sizeof(name), "bad%u", i);
		memset(buf, 'a' + (int)i, lens[i]);
		REQUIRE(fs_create(t.fs, tfs_cred(&t), t.root, name, 0644, 0,
				  &a) == 0);
		/* the next device write is this file's first data write */
		bd_fault_fail_nth(fault, BD_WRITE, 1, 0);
		CHECK_EQ(fs_write(t.fs, tfs_cred(&t), a.ino, buf, lens[i], 0),
			 (ssize_t)lens[i]);
		CHECK_EQ(fs_fsync(t.fs, a.ino, 0), -EIO);
		CHECK_EQ(fs_fsync(t.fs, a.ino, 0), 0);
		/* rewritten: good again */
		CHECK_EQ(fs_write(t.fs, tfs_cred(&t), a.ino, buf, lens[i], 0),
			 (ssize_t)lens[i]);
		CHECK_EQ(fs_fsync(t.fs, a.ino, 0), 0);
		CHECK_EQ(fs_read(t.fs, a.ino, out, lens[i], 0),
			 (ssize_t)lens[i]);
		CHECK(memcmp(buf, out, lens[i]) == 0);
		fs_release(t.fs, a.ino);
	}
	fs_unmount(t.fs);
	bd_close(fdev);
}

/* data=ordered across a power loss with writes behind in flight and
 * unflushed writes garbled: every file that survives with a size shows
 * exactly its data, never garbage; everything fsync'ed survives. */
static void test_crash_ordered(void)
{
	struct tfs t;
	struct bd_dev *lower, *fdev;
	struct bd_fault *fault;
	uint64_t seed = t_seed();
	char buf[8192], out[8192], name[32];
	unsigned bad = 0, survived = 0;

	REQUIRE(tfs_format(&t, 64) == 0);
	lower = t.bd;
	REQUIRE(bd_fault_open(lower, &fdev, &fault) == 0);
	t.bd = fdev;
	REQUIRE(tfs_mount(&t) == 0);
	for (unsigned i = 0; i < 200; i++) {
		struct fs_attr a;

		snprintf(name, sizeof(name), "f%u", i);
		memset(buf, (int)(i + 1), sizeof(buf));
		if (fs_create(t.fs, tfs_cred(&t), t.root, name, 0644, 0,
			      &a) != 0 ||
		    fs_write(t.fs, tfs_cred(&t), a.ino, buf, sizeof(buf), 0) !=
		    (ssize_t)sizeof(buf))
			bad++;
		fs_release(t.fs, a.ino);
		if (i == 99)
			CHECK_EQ(fs_sync(t.fs), 0);
	}
	CHECK_EQ(bad, 0);
	bd_fault_crash(fault, seed | 1);
	fs_abandon(t.fs);
	t.fs = NULL;
	t.bd = lower;
	REQUIRE(tfs_mount(&t) == 0);
	for (unsigned i = 0; i < 200; i++) {
		int64_t ino;
		struct fs_attr a;
		ssize_t n;

		snprintf(name, sizeof(name), "f%u", i);
		ino = tfs_lookup(&t, t.root, name);
		if (ino < 0) {
			bad += i < 100;
			continue;
		}
		a = tfs_stat(&t, (uint64_t)ino);
		n = fs_read(t.fs, (uint64_t)ino, out, sizeof(out), 0);
		if (n != (ssize_t)a.size || (a.size != 0 &&
					     a.size != sizeof(out))) {
			bad++;
			continue;
		}
		memset(buf, (int)(i + 1), sizeof(buf));
		if (n > 0 && memcmp(buf, out, (size_t)n) != 0)
			bad++;
		survived += n > 0;
	}
	CHECK_EQ(bad, 0);
	CHECK(survived >= 100);
	fs_unmount(t.fs);
	bd_close(fdev);
}

static int64_t atime_after_read(struct tfs *t, uint64_t ino)
{
	char c;

	fs_read(t->fs, ino, &c, 1, 0);
	return tfs_stat(t, ino).atime.tv_sec;
}

static void test_atime_modes(void)
{
	struct tfs t;
	struct fs_opts o;
	struct fs_attr in, out;
	int64_t f;

	REQUIRE(tfs_open(&t, 64) == 0);
	f = tfs_creat(&t, t.root, "f", 0644);
	CHECK_EQ(fs_write(t.fs, tfs_cred(&t), (uint64_t)f, "x", 1, 0), 1);
	memset(&in, 0, sizeof(in));
	in.atime.tv_sec = 1000;
	in.mtime.tv_sec = 2000;
	CHECK_EQ(fs_setattr(t.fs, tfs_cred(&t), (uint64_t)f, &in,
			    FS_SET_ATIME | FS_SET_MTIME, &out), 0);
	/* relatime (default): atime older than mtime -> updated once */
	CHECK(atime_after_read(&t, (uint64_t)f) > 2000);
	in.atime.tv_sec = 3000;	/* newer than mtime, but old: > 1 day */
	fs_setattr(t.fs, tfs_cred(&t), (uint64_t)f, &in, FS_SET_ATIME, &out);
	CHECK(atime_after_read(&t, (uint64_t)f) > 3000);
	fs_unmount(t.fs);
	t.fs = NULL;
	fs_opts_init(&o);
	o.atime = FS_ATIME_NOATIME;
	REQUIRE(tfs_mount_opts(&t, &o) == 0);
	fs_setattr(t.fs, tfs_cred(&t), (uint64_t)f, &in, FS_SET_ATIME, &out);
	CHECK_EQ(atime_after_read(&t, (uint64_t)f), 3000);
	tfs_close(&t);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_create_lookup_remount);
	T_RUN(test_names);
	T_RUN(test_unlink_rmdir);
	T_RUN(test_unlink_open_file);
	T_RUN(test_orphan_reclaim_after_crash);
	T_RUN(test_link);
	T_RUN(test_rename);
	T_RUN(test_symlink_special);
	T_RUN(test_attrs_and_posix_rules);
	T_RUN(test_sticky);
	T_RUN(test_xattr_acl);
	T_RUN(test_enospc);
	T_RUN(test_fsync_durable);
	T_RUN(test_fsync_one_inode);
	T_RUN(test_fsync_write_error);
	T_RUN(test_crash_ordered);
	T_RUN(test_atime_modes);
	return t_done();
}
