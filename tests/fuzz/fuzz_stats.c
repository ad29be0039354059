/*
 * fuzz_stats.c — what a stats socket answers, as the stats tools read it
 * (fusefs/stats/fs_stats_cli.c: ucfs-stat, ucfs-top).
 *
 * The server side reads no request at all: a connection is the request
 * (fs_stats_srv.c answers every accepted connection with the document
 * and closes it), so the bytes ucfs does not control on that socket are
 * the answer, for a tool pointed at any socket or at a daemon of another
 * version. Input: such an answer. The harness parses it as the tools do
 * (json_loads), flattens it, classifies every key, and reads the values
 * ucfs-top shows; nothing may crash, and a flattened document holds only
 * scalars under non-empty keys.
 */
#include <jansson.h>
#include <string.h>

#include "fusefs/stats/fs_stats_cli.h"
#include "tests/fuzz/fz_common.h"

static const char *const paths[] = {
    "fuse.count",
    "fuse.ops.read.count",
    "lk.grants",
    "core.commits",
    "bd.read.bytes",
    "",
    ".",
    "a..b",
    "fuse.",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *doc = json_loadb((const char *)data, size, 0, NULL), *flat;
	const char *key;
	json_t *v;

	if (doc == NULL)
		return 0;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		fs_cli_get(doc, paths[i]);
	flat = fs_cli_flatten(doc);
	if (flat != NULL) {
		json_object_foreach(flat, key, v)
		{
			if (json_is_object(v) || json_is_array(v))
				fz_fail("flattened key %s is not a scalar",
					key);
			fs_cli_is_gauge(key);
			fs_cli_num(flat, key);
		}
		json_decref(flat);
	}
	json_decref(doc);
	return 0;
}
