/*
 * ns_posix.c — POSIX behaviour checks on a mounted directory, one
 * "PASS name" / "FAIL name: why" line per check (tests/integration/
 * fs_posix.sh runs it on a ucfs mount). Must run as root: some checks
 * fork and drop to uid/gid 1000 to see what the kernel and ucfs do for an
 * ordinary user (permissions, setgid directories, sticky bit, suid
 * clearing).
 *
 *	ns_posix DIR
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/falloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static const char *dir;
static int failed;

#define USER_ID 1000

static void result(const char *name, int ok, const char *why)
{
	if (ok) {
		printf("PASS %s\n", name);
	} else {
		printf("FAIL %s: %s (errno %s)\n", name, why, strerror(errno));
		failed = 1;
	}
	fflush(stdout);
}

#define EXPECT(name, cond) result(name, (cond), #cond)

static char *path(const char *rel)
{
	static char buf[8][4096];
	static int i;

	i = (i + 1) % 8;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, rel);
	return buf[i];
}

static void t_rw(void)
{
	struct stat st;
	char buf[64];
	int fd = open(path("rw"), O_CREAT | O_RDWR | O_TRUNC, 0644);

	EXPECT("open_creat", fd >= 0);
	EXPECT("pwrite", pwrite(fd, "abcdef", 6, 10) == 6);
	EXPECT("pread_hole", pread(fd, buf, 16, 0) == 16 &&
	       memcmp(buf, "\0\0\0\0\0\0\0\0\0\0abcdef", 16) == 0);
	close(fd);
	fd = open(path("rw"), O_WRONLY | O_APPEND);
	EXPECT("o_append", write(fd, "XY", 2) == 2);
	close(fd);
	fd = open(path("rw"), O_RDONLY);
	EXPECT("o_append_at_end", pread(fd, buf, 64, 0) == 18 &&
	       memcmp(buf + 16, "XY", 2) == 0);
	close(fd);
	fd = open(path("rw"), O_RDWR);
	EXPECT("ftruncate_shrink", ftruncate(fd, 12) == 0);
	EXPECT("ftruncate_grow", ftruncate(fd, 100000) == 0);
	EXPECT("truncate_zeros", pread(fd, buf, 8, 11) == 8 &&
	       buf[0] == 'b' && buf[1] == 0 && buf[7] == 0);
	EXPECT("fsync", fsync(fd) == 0);
	EXPECT("fdatasync", fdatasync(fd) == 0);
	close(fd);
	/* open(O_TRUNC) of a file with data (the shell's "> f") */
	fd = open(path("rw"), O_WRONLY | O_TRUNC);
	EXPECT("o_trunc_open", fd >= 0);
	EXPECT("o_trunc_empties", fstat(fd, &st) == 0 && st.st_size == 0);
	EXPECT("o_trunc_write", write(fd, "x", 1) == 1);
	close(fd);
	EXPECT("o_trunc_size", stat(path("rw"), &st) == 0 && st.st_size == 1);
}

static void t_sparse_big(void)
{
	int fd = open(path("big"), O_CREAT | O_RDWR | O_TRUNC, 0644);
	off_t off = (off_t)6 << 30;
	struct stat st;
	char buf[8];

	EXPECT("big_pwrite_6G", pwrite(fd, "end", 3, off) == 3);
	EXPECT("big_size", fstat(fd, &st) == 0 && st.st_size == off + 3);
	EXPECT("big_sparse", st.st_blocks <= 16);
	EXPECT("big_read_hole", pread(fd, buf, 4, (off_t)1 << 32) == 4 &&
	       memcmp(buf, "\0\0\0\0", 4) == 0);
	EXPECT("big_read_end", pread(fd, buf, 8, off) == 3 &&
	       memcmp(buf, "end", 3) == 0);
	close(fd);
	unlink(path("big"));
}

static void t_fallocate(void)
{
	int fd = open(path("fa"), O_CREAT | O_RDWR | O_TRUNC, 0644);
	char buf[16384];
	struct stat st;
	int ret;

	EXPECT("fallocate", fallocate(fd, 0, 0, 1 << 20) == 0 &&
	       fstat(fd, &st) == 0 && st.st_size == 1 << 20);
	EXPECT("fallocate_keep_size",
	       fallocate(fd, FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20) == 0 &&
	       fstat(fd, &st) == 0 && st.st_size == 1 << 20 &&
	       st.st_blocks >= (2 << 20) / 512);
	memset(buf, 'x', sizeof(buf));
	pwrite(fd, buf, sizeof(buf), 0);
	EXPECT("punch_hole", fallocate(fd, FALLOC_FL_PUNCH_HOLE |
				       FALLOC_FL_KEEP_SIZE, 4096, 8192) == 0);
	EXPECT("punch_hole_zeros", pread(fd, buf, sizeof(buf), 0) ==
	       (ssize_t)sizeof(buf) && buf[4095] == 'x' && buf[4096] == 0 &&
	       buf[12287] == 0 && buf[12288] == 'x');
	/* ucfs refuses it; a pass-through mount forwards it (ext4 zeroes) */
	errno = 0;
	ret = fallocate(fd, FALLOC_FL_ZERO_RANGE, 0, 4096);
	EXPECT("fallocate_zero_range",
	       ret < 0 ? errno == EOPNOTSUPP :
			 pread(fd, buf, 4096, 0) == 4096 && buf[0] == 0 &&
				 buf[4095] == 0);
	errno = 0;
	EXPECT("fallocate_collapse_eopnotsupp",
	       fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 0, 4096) < 0 &&
	       errno == EOPNOTSUPP);
	close(fd);
}

static void t_unlink_open(void)
{
	int fd = open(path("uo"), O_CREAT | O_RDWR | O_TRUNC, 0644);
	char buf[8];
	struct stat st;

	write(fd, "keep", 4);
	EXPECT("unlink_open", unlink(path("uo")) == 0);
	EXPECT("unlink_open_gone", access(path("uo"), F_OK) < 0);
	EXPECT("unlink_open_readable", pread(fd, buf, 4, 0) == 4 &&
	       memcmp(buf, "keep", 4) == 0);
	EXPECT("unlink_open_writable", pwrite(fd, "more", 4, 4) == 4);
	EXPECT("unlink_open_nlink0", fstat(fd, &st) == 0 && st.st_nlink == 0);
	close(fd);
}

static void t_odirect_mmap(void)
{
	void *buf = NULL;
	char *m;
	int fd;

	fd = open(path("direct"), O_CREAT | O_RDWR | O_TRUNC | O_DIRECT, 0644);
	EXPECT("o_direct_open", fd >= 0);
	if (posix_memalign(&buf, 4096, 65536) != 0)
		return;
	memset(buf, 'd', 65536);
	EXPECT("o_direct_write", pwrite(fd, buf, 65536, 4096) == 65536);
	memset(buf, 0, 65536);
	EXPECT("o_direct_read", pread(fd, buf, 65536, 4096) == 65536 &&
	       ((char *)buf)[65535] == 'd');
	close(fd);
	free(buf);

	fd = open(path("mmap"), O_CREAT | O_RDWR | O_TRUNC, 0644);
	ftruncate(fd, 8192);
	m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	EXPECT("mmap_shared", m != MAP_FAILED);
	if (m == MAP_FAILED)
		return;
	memcpy(m + 5000, "mapped", 6);
	EXPECT("msync", msync(m, 8192, MS_SYNC) == 0);
	munmap(m, 8192);
	close(fd);
	fd = open(path("mmap"), O_RDONLY | O_DIRECT);
	buf = NULL;
	if (posix_memalign(&buf, 4096, 8192) == 0) {
		EXPECT("mmap_data_on_disk", pread(fd, buf, 8192, 0) == 8192 &&
		       memcmp((char *)buf + 5000, "mapped", 6) == 0);
		free(buf);
	}
	close(fd);
}

static void t_names_links(void)
{
	char name[300];
	int fd;

	memset(name, 'n', 255);
	name[255] = '\0';
	fd = open(path(name), O_CREAT | O_WRONLY, 0644);
	EXPECT("name_255", fd >= 0);
	close(fd);
	name[255] = 'n';
	name[256] = '\0';
	errno = 0;
	EXPECT("name_256_enametoolong",
	       open(path(name), O_CREAT | O_WRONLY, 0644) < 0 &&
	       errno == ENAMETOOLONG);
	strcpy(name, "odd\001\377\n \\name");
	fd = open(path(name), O_CREAT | O_WRONLY, 0644);
	EXPECT("name_any_bytes", fd >= 0 && access(path(name), F_OK) == 0);
	close(fd);
	EXPECT("mkfifo", mkfifo(path("fifo"), 0600) == 0);
	EXPECT("mknod_socket", mknod(path("sock"), S_IFSOCK | 0600, 0) == 0);
	{
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		int s = socket(AF_UNIX, SOCK_STREAM, 0);

		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s",
			 path("bound.sock"));
		EXPECT("bind_unix_socket",
		       bind(s, (struct sockaddr *)&sa, sizeof(sa)) == 0);
		close(s);
	}
	EXPECT("symlink", symlink("rw", path("sl")) == 0);
	{
		char t[16] = "";

		EXPECT("readlink", readlink(path("sl"), t, sizeof(t)) == 2 &&
		       memcmp(t, "rw", 2) == 0);
	}
	EXPECT("link", link(path("rw"), path("rw.link")) == 0);
	mkdir(path("ra"), 0755);
	mkdir(path("rb"), 0755);
	fd = open(path("ra/x"), O_CREAT | O_WRONLY, 0644);
	close(fd);
	fd = open(path("rb/y"), O_CREAT | O_WRONLY, 0644);
	close(fd);
	EXPECT("rename_across_dirs", rename(path("ra/x"), path("rb/x")) == 0);
	EXPECT("rename_over_existing", rename(path("rb/x"), path("rb/y")) == 0);
	errno = 0;
	fd = open(path("rb/z"), O_CREAT | O_WRONLY, 0644);
	close(fd);
	EXPECT("rename_noreplace", renameat2(AT_FDCWD, path("rb/y"), AT_FDCWD,
					     path("rb/z"), RENAME_NOREPLACE) < 0 &&
	       errno == EEXIST);
	EXPECT("rename_exchange", renameat2(AT_FDCWD, path("rb/y"), AT_FDCWD,
					    path("ra"), RENAME_EXCHANGE) == 0);
	{
		struct stat st;

		EXPECT("rename_exchange_result",
		       stat(path("rb/y"), &st) == 0 && S_ISDIR(st.st_mode) &&
		       stat(path("ra"), &st) == 0 && S_ISREG(st.st_mode));
	}
	errno = 0;
	EXPECT("rmdir_notempty", mkdir(path("ne"), 0755) == 0 &&
	       mkdir(path("ne/sub"), 0755) == 0 && rmdir(path("ne")) < 0 &&
	       errno == ENOTEMPTY);
	EXPECT("rmdir", rmdir(path("ne/sub")) == 0 && rmdir(path("ne")) == 0);
}

static void t_times_attrs(void)
{
	struct timespec ts[2] = { { 1000, 111111111 }, { 2000, 222222222 } };
	struct stat a, b;
	int fd = open(path("tm"), O_CREAT | O_WRONLY, 0644);

	close(fd);
	EXPECT("utimens_ns", utimensat(AT_FDCWD, path("tm"), ts, 0) == 0 &&
	       stat(path("tm"), &a) == 0 && a.st_mtim.tv_sec == 2000 &&
	       a.st_mtim.tv_nsec == 222222222 && a.st_atim.tv_nsec ==
	       111111111);
	usleep(20000);
	EXPECT("chmod_ctime", chmod(path("tm"), 0600) == 0 &&
	       stat(path("tm"), &b) == 0 &&
	       (b.st_ctim.tv_sec > a.st_ctim.tv_sec ||
		b.st_ctim.tv_nsec > a.st_ctim.tv_nsec) &&
	       (b.st_mode & 07777) == 0600);
	usleep(20000);
	EXPECT("chown", chown(path("tm"), 123, 456) == 0 &&
	       stat(path("tm"), &a) == 0 && a.st_uid == 123 &&
	       a.st_gid == 456 && (a.st_ctim.tv_sec > b.st_ctim.tv_sec ||
				   a.st_ctim.tv_nsec > b.st_ctim.tv_nsec));
	usleep(20000);
	EXPECT("link_ctime", link(path("tm"), path("tm2")) == 0 &&
	       stat(path("tm"), &b) == 0 &&
	       (b.st_ctim.tv_sec > a.st_ctim.tv_sec ||
		b.st_ctim.tv_nsec > a.st_ctim.tv_nsec) && b.st_nlink == 2);
	usleep(20000);
	EXPECT("unlink_ctime", unlink(path("tm2")) == 0 &&
	       stat(path("tm"), &a) == 0 &&
	       (a.st_ctim.tv_sec > b.st_ctim.tv_sec ||
		a.st_ctim.tv_nsec > b.st_ctim.tv_nsec));
	usleep(20000);
	EXPECT("rename_ctime", rename(path("tm"), path("tm3")) == 0 &&
	       stat(path("tm3"), &b) == 0 &&
	       (b.st_ctim.tv_sec > a.st_ctim.tv_sec ||
		b.st_ctim.tv_nsec > a.st_ctim.tv_nsec));
}

static void t_xattr(void)
{
	char buf[64];
	int fd = open(path("xa"), O_CREAT | O_WRONLY, 0644);

	close(fd);
	EXPECT("xattr_user", setxattr(path("xa"), "user.a", "1", 1, 0) == 0 &&
	       getxattr(path("xa"), "user.a", buf, sizeof(buf)) == 1);
	EXPECT("xattr_trusted",
	       setxattr(path("xa"), "trusted.b", "22", 2, 0) == 0 &&
	       getxattr(path("xa"), "trusted.b", buf, sizeof(buf)) == 2);
	EXPECT("xattr_security",
	       setxattr(path("xa"), "security.c", "3", 1, 0) == 0);
	EXPECT("xattr_list", listxattr(path("xa"), buf, sizeof(buf)) ==
	       (ssize_t)sizeof("user.a\0trusted.b\0security.c"));
	errno = 0;
	EXPECT("xattr_create_eexist", setxattr(path("xa"), "user.a", "1", 1,
					       XATTR_CREATE) < 0 &&
	       errno == EEXIST);
	EXPECT("xattr_remove", removexattr(path("xa"), "user.a") == 0 &&
	       getxattr(path("xa"), "user.a", buf, sizeof(buf)) < 0 &&
	       errno == ENODATA);
}

/* Run @fn as uid/gid USER_ID in a child; its return is the result. */
static int as_user(int (*fn)(void))
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		gid_t g = USER_ID;

		if (setgroups(1, &g) != 0 || setgid(USER_ID) != 0 ||
		    setuid(USER_ID) != 0)
			_exit(99);
		_exit(fn() ? 0 : 1);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		return 0;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static int u_create_owned(void)
{
	struct stat st;
	int fd = open(path("pub/mine"), O_CREAT | O_WRONLY, 0644);

	close(fd);
	return fd >= 0 && stat(path("pub/mine"), &st) == 0 &&
	       st.st_uid == USER_ID && st.st_gid == USER_ID;
}

static int u_denied_private(void)
{
	errno = 0;
	return open(path("private/f"), O_RDONLY) < 0 && errno == EACCES &&
	       open(path("ro_file"), O_WRONLY) < 0 && errno == EACCES;
}

static int u_setgid_dir(void)
{
	struct stat st, sd;
	int fd = open(path("sgid/f"), O_CREAT | O_WRONLY, 0644);

	close(fd);
	return fd >= 0 && stat(path("sgid/f"), &st) == 0 && st.st_gid == 777 &&
	       mkdir(path("sgid/d"), 0755) == 0 &&
	       stat(path("sgid/d"), &sd) == 0 && sd.st_gid == 777 &&
	       (sd.st_mode & S_ISGID);
}

static int u_sticky(void)
{
	errno = 0;
	return unlink(path("sticky/roots")) < 0 && errno == EPERM &&
	       rename(path("sticky/roots"), path("sticky/x")) < 0 &&
	       errno == EPERM;
}

static int u_write_clears_suid(void)
{
	int fd = open(path("pub/suid"), O_WRONLY);
	struct stat st;

	if (fd < 0 || write(fd, "x", 1) != 1)
		return 0;
	close(fd);
	return stat(path("pub/suid"), &st) == 0 && !(st.st_mode & S_ISUID);
}

static void t_permissions(void)
{
	int fd;

	mkdir(path("pub"), 0777);
	chmod(path("pub"), 0777);
	mkdir(path("private"), 0700);
	fd = open(path("private/f"), O_CREAT | O_WRONLY, 0644);
	close(fd);
	fd = open(path("ro_file"), O_CREAT | O_WRONLY, 0644);
	close(fd);
	EXPECT("user_creates_with_own_ids", as_user(u_create_owned));
	EXPECT("user_denied_by_mode", as_user(u_denied_private));
	mkdir(path("sgid"), 0777);
	chown(path("sgid"), 0, 777);
	chmod(path("sgid"), 02777);
	EXPECT("setgid_dir_inherits", as_user(u_setgid_dir));
	mkdir(path("sticky"), 0777);
	chmod(path("sticky"), 01777);
	fd = open(path("sticky/roots"), O_CREAT | O_WRONLY, 0644);
	close(fd);
	EXPECT("sticky_restricts_unlink_rename", as_user(u_sticky));
	fd = open(path("pub/suid"), O_CREAT | O_WRONLY, 0644);
	close(fd);
	chown(path("pub/suid"), USER_ID, USER_ID);
	chmod(path("pub/suid"), 04777);
	EXPECT("write_by_user_clears_suid", as_user(u_write_clears_suid));
}

static int u_acl_denied(void)
{
	errno = 0;
	return open(path("acl_file"), O_RDONLY) < 0 && errno == EACCES;
}

static int u_acl_allowed(void)
{
	int fd = open(path("acl_file"), O_RDONLY);

	close(fd);
	return fd >= 0;
}

static void t_acl(void)
{
	/* user::rw- user:1000:--- group::r-- mask::r-- other::r-- */
	struct {
		uint32_t ver;
		struct { uint16_t tag, perm; uint32_t id; } e[5];
	} acl = { 2, { { 0x01, 6, 0 }, { 0x02, 0, USER_ID }, { 0x04, 4, 0 },
		       { 0x10, 4, 0 }, { 0x20, 4, 0 } } };
	int fd = open(path("acl_file"), O_CREAT | O_WRONLY, 0644);

	close(fd);
	EXPECT("acl_allowed_before", as_user(u_acl_allowed));
	EXPECT("acl_set", setxattr(path("acl_file"), "system.posix_acl_access",
				   &acl, sizeof(acl), 0) == 0);
	EXPECT("acl_enforced", as_user(u_acl_denied));
	EXPECT("acl_remove", removexattr(path("acl_file"),
					 "system.posix_acl_access") == 0);
	EXPECT("acl_allowed_after", as_user(u_acl_allowed));
}

static void t_readdir(void)
{
	DIR *d;
	struct dirent *e;
	int n = 0, fd;

	mkdir(path("rd"), 0755);
	for (int i = 0; i < 300; i++) {
		char name[32];

		snprintf(name, sizeof(name), "rd/e%03d", i);
		fd = open(path(name), O_CREAT | O_WRONLY, 0644);
		close(fd);
	}
	d = opendir(path("rd"));
	while (d != NULL && (e = readdir(d)) != NULL)
		n++;
	if (d != NULL)
		closedir(d);
	EXPECT("readdir_all", n == 302);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: ns_posix DIR\n");
		return 2;
	}
	dir = argv[1];
	umask(022);
	t_rw();
	t_sparse_big();
	t_fallocate();
	t_unlink_open();
	t_odirect_mmap();
	t_names_links();
	t_times_attrs();
	t_xattr();
	t_permissions();
	t_acl();
	t_readdir();
	return failed;
}
