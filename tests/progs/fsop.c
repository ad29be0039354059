/*
 * fsop — run one namespace system call and print its outcome, for shell
 * tests that must check errnos exactly.
 *
 * Usage: fsop OP ARGS...   prints "OK" or the errno name (ENOENT, ...)
 *   rename OLD NEW | rename_noreplace OLD NEW | rename_exchange OLD NEW
 *   link OLD NEW | symlink TARGET NEW | unlink PATH | rmdir PATH
 *   mkdir PATH | create PATH (O_CREAT|O_EXCL) | open PATH (O_RDONLY)
 *   truncate PATH SIZE | setxattr PATH NAME VALUE create|replace
 *   fsync PATH (file or directory: open O_RDONLY, fsync)
 * Exit status: 0 if the call was made (whatever its result), 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "tests/progs/prog.h"

static int rc(int r)
{
	return r == 0 ? 0 : errno;
}

static int run(int argc, char **argv)
{
	const char *op = argv[1];
	int fd;

	if (argc == 4 && strcmp(op, "rename") == 0)
		return rc(rename(argv[2], argv[3]));
	if (argc == 4 && strcmp(op, "rename_noreplace") == 0)
		return rc(renameat2(AT_FDCWD, argv[2], AT_FDCWD, argv[3],
				    RENAME_NOREPLACE));
	if (argc == 4 && strcmp(op, "rename_exchange") == 0)
		return rc(renameat2(AT_FDCWD, argv[2], AT_FDCWD, argv[3],
				    RENAME_EXCHANGE));
	if (argc == 4 && strcmp(op, "link") == 0)
		return rc(link(argv[2], argv[3]));
	if (argc == 4 && strcmp(op, "symlink") == 0)
		return rc(symlink(argv[2], argv[3]));
	if (argc == 3 && strcmp(op, "unlink") == 0)
		return rc(unlink(argv[2]));
	if (argc == 3 && strcmp(op, "rmdir") == 0)
		return rc(rmdir(argv[2]));
	if (argc == 3 && strcmp(op, "mkdir") == 0)
		return rc(mkdir(argv[2], 0755));
	if (argc == 4 && strcmp(op, "truncate") == 0)
		return rc(truncate(argv[2], strtoll(argv[3], NULL, 0)));
	if (argc == 3 && (strcmp(op, "create") == 0 ||
			  strcmp(op, "open") == 0)) {
		fd = strcmp(op, "create") == 0
			     ? open(argv[2], O_CREAT | O_EXCL | O_WRONLY, 0644)
			     : open(argv[2], O_RDONLY);
		if (fd < 0)
			return errno;
		close(fd);
		return 0;
	}
	if (argc == 3 && strcmp(op, "fsync") == 0) {
		int r;

		fd = open(argv[2], O_RDONLY);
		if (fd < 0)
			return errno;
		r = fsync(fd) == 0 ? 0 : errno;
		close(fd);
		return r;
	}
	if (argc == 6 && strcmp(op, "setxattr") == 0)
		return rc(setxattr(argv[2], argv[3], argv[4], strlen(argv[4]),
				   strcmp(argv[5], "create") == 0
					   ? XATTR_CREATE
					   : XATTR_REPLACE));
	return -1;
}

int main(int argc, char **argv)
{
	return prog_main(argc, argv, "fsop", run);
}
