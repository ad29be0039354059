/*
 * prog.h — what the one-call programs of tests/progs (fsop, fileop)
 * share: the errno names they print and their main().
 */
#ifndef UCFS_TEST_PROG_H
#define UCFS_TEST_PROG_H

#include <stdio.h>
#include <string.h>

/* "OK" for 0, else the errno's name ("ENOENT"), else "E<n>". */
static const char *errname(int e)
{
	static char buf[32];
	const char *n;

	if (e == 0)
		return "OK";
	n = strerrorname_np(e);
	if (n != NULL)
		return n;
	snprintf(buf, sizeof(buf), "E%d", e);
	return buf;
}

/* The main() of program @name: run(argc, argv) makes the call and returns
 * its errno (>= 0: printed as errname), -1 for a usage error, or < -1 when
 * it printed the result itself. Exit status 0 if the call was made, 2 on
 * a usage error. */
static int prog_main(int argc, char **argv, const char *name,
		     int (*run)(int argc, char **argv))
{
	int e;

	if (argc < 3)
		goto usage;
	e = run(argc, argv);
	if (e == -1)
		goto usage;
	if (e >= 0)
		printf("%s\n", errname(e));
	return 0;
usage:
	fprintf(stderr, "usage: %s OP ARGS... (see tests/progs/%s.c)\n", name,
		name);
	return 2;
}

#endif /* UCFS_TEST_PROG_H */
