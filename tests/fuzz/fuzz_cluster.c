/*
 * fuzz_cluster.c — the cluster file (lockmgr/lk_config.c): any bytes as
 * the JSON a node loads at mount (cluster=FILE).
 *
 * Input: the file. Its secret_file may name any path; the harness keeps a
 * 32-byte secret open on fd 100 ("/proc/self/fd/100", as the seeds use)
 * and stdin on /dev/null, so that no path blocks. Checks: a load that
 * fails says why; one that succeeds gives what lk_config.h promises (a
 * cluster name of 1..63 bytes, 1..63 nodes with distinct ids 1..63
 * matching the configured bitmap, nonzero ports, heartbeat_ms > 0,
 * timeout_ms >= 2 * heartbeat_ms, a quorum of 1..nnodes).
 */
#include <fcntl.h>
#include <string.h>

#include "lockmgr/lk_config.h"
#include "tests/fuzz/fz_common.h"
#include "tests/fuzz/fz_memfd.h"

#define FZ_SECRET_FD 100

static void setup(void)
{
	static const uint8_t secret[32] = "a fuzzing secret, 32 bytes long";
	char path[64];
	int fd = fz_memfd("secret", secret, sizeof(secret), path, sizeof(path));
	int null = open("/dev/null", O_RDONLY);

	if (fd < 0 || dup2(fd, FZ_SECRET_FD) < 0 || null < 0 ||
	    dup2(null, 0) < 0)
		fz_fail("cannot set up the secret");
	close(fd);
	close(null);
}

static void check(const struct lk_config *c)
{
	uint64_t ids = 0;

	if (c->cluster[0] == '\0' ||
	    memchr(c->cluster, 0, sizeof(c->cluster)) == NULL)
		fz_fail("cluster name empty or unterminated");
	if (c->nnodes < 1 || c->nnodes >= LK_MAX_NODES)
		fz_fail("%u nodes", c->nnodes);
	for (unsigned i = 0; i < c->nnodes; i++) {
		uint32_t id = c->node[i].id;

		if (id < 1 || id >= LK_MAX_NODES || (ids & 1ull << id) ||
		    c->node[i].addr.sin_port == 0 ||
		    lk_config_node(c, id) != &c->node[i])
			fz_fail("node %u: bad or duplicate id, or port 0", i);
		ids |= 1ull << id;
	}
	if (ids != c->configured)
		fz_fail("configured bitmap disagrees with the nodes");
	if (c->heartbeat_ms == 0 || c->timeout_ms < 2 * c->heartbeat_ms)
		fz_fail("heartbeat %u timeout %u", c->heartbeat_ms,
			c->timeout_ms);
	if (lk_config_quorum(c) < 1 || lk_config_quorum(c) > c->nnodes)
		fz_fail("quorum %u of %u", lk_config_quorum(c), c->nnodes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	static struct lk_config cfg;
	const char *why = NULL;
	char path[64];
	int fd, ret;

	if (!ready) {
		setup();
		ready = 1;
	}
	fd = fz_memfd("cluster", data, size, path, sizeof(path));
	if (fd < 0)
		return 0;
	ret = lk_config_load(path, &cfg, &why);
	close(fd);
	if (ret < 0 && why == NULL)
		fz_fail("load failed (%d) without a reason", ret);
	if (ret == 0)
		check(&cfg);
	return 0;
}
