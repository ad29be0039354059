/*
 * lk_local.h — a cluster of lockspaces in one test process, one per node,
 * node i on 127.0.0.i, over real TCP (for the unit tests that need the
 * transport: test_lk_batch_net, test_lk_quorum).
 *
 *	lkl_open(3, 3, "", 5000)  a configuration of 3 nodes (extra JSON
 *	                       fields may be given, e.g. "\"two_node\":true,";
 *	                       timeout_ms 5000), then the lockspaces of nodes
 *	                       1..3 (the second count: fewer may be opened;
 *	                       another port if one is taken); lkl_ls[i] is
 *	                       node i
 *	lkl_open_set(2, 0x4, ...)  the same, opening only the nodes of the
 *	                       bitmap (here node 2)
 *	lkl_full(3, 20000)     wait until every node sees all n as members
 *	lkl_close()            close what is still open, remove the files
 *
 * Functions return 0 or -errno.
 */
#ifndef UCFS_TEST_LK_LOCAL_H
#define UCFS_TEST_LK_LOCAL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lockmgr/lk.h"

#define LKL_MAX 8
static struct lk_ls *lkl_ls[LKL_MAX + 1];
static char lkl_dir[64];
static int lkl_n;

static inline void lkl_quiet(int level, const char *msg, void *arg)
{
	(void)arg;
	if (level <= 0)
		fprintf(stderr, "lk: %s\n", msg);
}

static inline int lkl_config(const char *path, int n, int port, const char *extra,
		      unsigned timeout_ms)
{
	FILE *f = fopen(path, "w");

	if (f == NULL)
		return -errno;
	fprintf(f,
		"{\"cluster\":\"lkl\",\"secret_file\":\"%s/secret\","
		"\"heartbeat_ms\":100,\"timeout_ms\":%u,%s\"nodes\":[",
		lkl_dir, timeout_ms, extra);
	for (int i = 1; i <= n; i++)
		fprintf(f, "%s{\"id\":%d,\"addr\":\"127.0.0.%d\",\"port\":%d}",
			i > 1 ? "," : "", i, i, port);
	fprintf(f, "]}\n");
	return fclose(f) == 0 ? 0 : -EIO;
}

/* Like lkl_open, opening the nodes whose bits are set in @which. */
static inline int lkl_open_set(int n, uint64_t which, const char *extra,
			       unsigned timeout_ms)
{
	char path[128];
	FILE *f;

	if (n < 1 || n > LKL_MAX || which == 0 || (which >> (n + 1)) != 0)
		return -EINVAL;
	lkl_n = n;
	snprintf(lkl_dir, sizeof(lkl_dir), "/tmp/ucfs-lkl.XXXXXX");
	if (mkdtemp(lkl_dir) == NULL)
		return -errno;
	snprintf(path, sizeof(path), "%s/secret", lkl_dir);
	f = fopen(path, "w");
	if (f == NULL)
		return -errno;
	fprintf(f, "lkl-secret-%d-0123456789abcdef0123\n", getpid());
	fclose(f);
	snprintf(path, sizeof(path), "%s/cluster.json", lkl_dir);
	for (int attempt = 0;; attempt++) {
		int port = 20000 + (getpid() * 31 + attempt * 7919) % 30000;
		int ret = lkl_config(path, n, port, extra, timeout_ms), i;

		for (i = 1; i <= n && ret == 0; i++) {
			struct lk_ls_config c = {path, (uint32_t)i, NULL,
						 lkl_quiet, NULL};

			if (which & (1ull << i))
				ret = lk_ls_open(&c, &lkl_ls[i]);
		}
		if (ret == 0)
			return 0;
		for (int j = i - 2; j >= 1; j--) {
			lk_ls_abandon(lkl_ls[j]);
			lkl_ls[j] = NULL;
		}
		if (ret != -EADDRINUSE || attempt == 5)
			return ret;
	}
}

static inline int lkl_open(int n, int nopen, const char *extra,
			   unsigned timeout_ms)
{
	if (nopen < 1 || nopen > n)
		return -EINVAL;
	return lkl_open_set(n, ((1ull << (nopen + 1)) - 1) & ~1ull, extra,
			    timeout_ms);
}

/* Node @i sees exactly @members (bitmap) as the quorate membership. */
static inline int lkl_sees(int i, uint64_t members)
{
	uint64_t gen, m;

	return lk_ls_members(lkl_ls[i], &gen, &m) && m == members;
}

static inline int lkl_full(int n, int timeout_ms)
{
	uint64_t all = ((1ull << (n + 1)) - 1) & ~1ull;

	for (int waited = 0; waited < timeout_ms; waited += 10) {
		int ok = 1;

		for (int i = 1; i <= n; i++)
			ok &= lkl_ls[i] == NULL || lkl_sees(i, all);
		if (ok)
			return 0;
		usleep(10000);
	}
	return -ETIMEDOUT;
}

static inline void lkl_close(void)
{
	char path[128];

	for (int i = lkl_n; i >= 1; i--) {
		lk_ls_close(lkl_ls[i]);
		lkl_ls[i] = NULL;
	}
	snprintf(path, sizeof(path), "%s/cluster.json", lkl_dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/secret", lkl_dir);
	unlink(path);
	rmdir(lkl_dir);
}

#endif /* UCFS_TEST_LK_LOCAL_H */
