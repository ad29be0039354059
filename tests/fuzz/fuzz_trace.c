/*
 * fuzz_trace.c — trace files fed to ucfs-trace (tools/ucfs-trace.c; the
 * format is in fusefs/STATS.md): the tool itself, built in with its main
 * renamed, run on the input as a file.
 *
 * Input: byte 0 selects the output (bit 0: --json, else the text report;
 * bit 1: --top 1), the rest is the trace file. The report goes to
 * /dev/null; nothing may crash or hang, and the exit status is 0 (a file
 * that was read, whatever its lines held).
 */
#include <fcntl.h>

#include "tests/fuzz/fz_common.h"
#include "tests/fuzz/fz_memfd.h"

#define main ucfs_trace_main
int ucfs_trace_main(int argc, char **argv);
#include "tools/ucfs-trace.c"
#undef main

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	char path[64], *argv[6];
	int argc = 0, fd, ret;

	if (!ready) {
		if (freopen("/dev/null", "w", stdout) == NULL)
			fz_fail("cannot silence stdout");
		ready = 1;
	}
	if (size == 0)
		return 0;
	fd = fz_memfd("trace", data + 1, size - 1, path, sizeof(path));
	if (fd < 0)
		return 0;
	argv[argc++] = (char *)"ucfs-trace";
	if (data[0] & 1)
		argv[argc++] = (char *)"--json";
	if (data[0] & 2) {
		argv[argc++] = (char *)"--top";
		argv[argc++] = (char *)"1";
	}
	argv[argc++] = path;
	argv[argc] = NULL;
	ret = ucfs_trace_main(argc, argv);
	close(fd);
	if (ret != 0)
		fz_fail("ucfs-trace exited %d on a readable file", ret);
	return 0;
}
