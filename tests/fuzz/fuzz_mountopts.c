/*
 * fuzz_mountopts.c — mount option strings (fusefs/fs_opts.c), as -o or
 * fstab hands them over.
 *
 * Input: one or more option strings separated by NUL bytes, parsed in
 * turn into one struct fs_opts (later values win, as for several -o).
 * Checks: a refusal says why in a terminated message that names the
 * option; whatever is accepted stays in range (lockproto, data, uring and
 * atime enums, node 0..63, statahead <= FS_MAX_STATAHEAD, the cluster path
 * and the libfuse string terminated inside their arrays).
 */
#include <string.h>

#include "fusefs/fs.h"
#include "tests/fuzz/fz_common.h"

static void check(const struct fs_opts *o)
{
	if ((unsigned)o->lockproto > FS_LOCK_DLM ||
	    (unsigned)o->data > FS_DATA_WRITEBACK ||
	    (unsigned)o->uring > FS_URING_ON ||
	    (unsigned)o->atime > FS_ATIME_STRICT)
		fz_fail("an enum out of range");
	if (o->node_id > 63 || o->statahead > FS_MAX_STATAHEAD)
		fz_fail("node %u statahead %u", o->node_id, o->statahead);
	if (memchr(o->cluster, 0, sizeof(o->cluster)) == NULL ||
	    memchr(o->fuse, 0, sizeof(o->fuse)) == NULL)
		fz_fail("cluster= or libfuse options unterminated");
	if (o->minhold_ms < -1)
		fz_fail("minhold %d", o->minhold_ms);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fs_opts o;
	char *s = malloc(size + 1), err[256];
	size_t off = 0;

	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	fs_opts_init(&o);
	while (off <= size) {
		size_t n = strlen(s + off);

		memset(err, 0x55, sizeof(err));
		if (fs_opts_parse(&o, s + off, err, sizeof(err)) < 0) {
			if (memchr(err, 0, sizeof(err)) == NULL ||
			    strstr(err, "ucfs:") == NULL)
				fz_fail("refused without a message");
			break;
		}
		check(&o);
		off += n + 1;
	}
	free(s);
	return 0;
}
