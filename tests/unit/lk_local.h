/*
 * lk_local.h — a cluster of lockspaces in one test process, one per node,
 * node i on 127.0.0.i, over real TCP (for the unit tests that need the
 * transport: test_lk_batch_net, test_lk_batch_rand, test_lk_quorum,
 * test_lk_rejoin, test_glock; and tests/progs/glock_bench).
 *
 *	lkl_open(3, 3, "", 5000)  a configuration of 3 nodes (extra JSON
 *	                       fields may be given, e.g. "\"two_node\":true,";
 *	                       timeout_ms 5000), then the lockspaces of nodes
 *	                       1..3 (the second count: fewer may be opened;
 *	                       another port if one is taken or reserved);
 *	                       lkl_ls[i] is node i. The port is reserved as
 *	                       tests/clulib.sh reserves its own (a directory
 *	                       in /tmp/ucfs-clu-ports, removed at lkl_close
 *	                       or exit): a clu_ test's daemon and these nodes
 *	                       would otherwise take each other's port, also
 *	                       between a node's close and its reopening
 *	lkl_open_set(2, 0x4, ...)  the same, opening only the nodes of the
 *	                       bitmap (here node 2)
 *	lkl_open_with(n, which, extra, ms, open)  the same, node i opened by
 *	                       open(i) (its own callbacks; the configuration
 *	                       is at lkl_cfg)
 *	lkl_start(3, "", 5000) lkl_open of all 3 then lkl_full; prints
 *	                       "FAIL start_cluster" on failure
 *	lkl_lock_soon(i, &name, tries)  EX on node i granted within tries
 *	                       x 10 ms, then released: 0, or -ETIMEDOUT
 *	lkl_full(3, 20000)     wait until every node sees all n as members
 *	lkl_close()            close what is still open, remove the files
 *	LKL_RUN(test_fn)       harness.h's T_RUN, then lkl_close if the case
 *	                       left a cluster open (a failed REQUIRE returns
 *	                       before the case's own lkl_close: its nodes
 *	                       would run on beside the next case's, their
 *	                       files and port left behind)
 *
 * Functions return 0 or -errno.
 */
#ifndef UCFS_TEST_LK_LOCAL_H
#define UCFS_TEST_LK_LOCAL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lockmgr/lk.h"

#define LKL_MAX 8
static struct lk_ls *lkl_ls[LKL_MAX + 1];
static char lkl_dir[64];
static int lkl_n;
static int lkl_port; /* of the cluster open now (reserved) */
static int lkl_open_now; /* a cluster is open: lkl_close not called yet */

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

static char lkl_cfg[128]; /* the configuration file */

#define LKL_PORTS_DIR "/tmp/ucfs-clu-ports"
static int lkl_ports[16]; /* reserved by this process (0: free slot) */

static inline void lkl_port_release(int port)
{
	char path[64];

	for (int i = 0; i < 16; i++) {
		if (lkl_ports[i] != port || port == 0)
			continue;
		snprintf(path, sizeof(path), LKL_PORTS_DIR "/%d", port);
		rmdir(path);
		lkl_ports[i] = 0;
	}
}

static inline void lkl_ports_release_all(void)
{
	for (int i = 0; i < 16; i++)
		lkl_port_release(lkl_ports[i]);
}

/* Reserve @port: 0, or -EADDRINUSE if another test holds it. Without a
 * free slot or the directory, the port is used unreserved. */
static inline int lkl_port_reserve(int port)
{
	static int registered;
	char path[64];
	int i;

	for (i = 0; i < 16 && lkl_ports[i] != 0; i++)
		;
	if (i == 16)
		return 0;
	mkdir(LKL_PORTS_DIR, 0755);
	snprintf(path, sizeof(path), LKL_PORTS_DIR "/%d", port);
	if (mkdir(path, 0755) != 0)
		return errno == EEXIST ? -EADDRINUSE : 0;
	lkl_ports[i] = port;
	if (!registered)
		registered = atexit(lkl_ports_release_all) == 0;
	return 0;
}

static inline int lkl_open_quiet(int i)
{
	struct lk_ls_config c = {lkl_cfg, (uint32_t)i, NULL, lkl_quiet, NULL,
				 NULL, 0};

	return lk_ls_open(&c, &lkl_ls[i]);
}

/* Like lkl_open, opening the nodes whose bits are set in @which, each
 * by @open_node (NULL: with no callbacks but the quiet log). */
static inline int lkl_open_with(int n, uint64_t which, const char *extra,
				unsigned timeout_ms, int (*open_node)(int i))
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
	snprintf(lkl_cfg, sizeof(lkl_cfg), "%s/cluster.json", lkl_dir);
	if (open_node == NULL)
		open_node = lkl_open_quiet;
	for (int attempt = 0;; attempt++) {
		/* 20000-31999: below the ephemeral ports (clulib.sh) */
		int port = 20000 + (getpid() * 31 + attempt * 7919) % 12000;
		int ret = lkl_port_reserve(port), held = ret == 0, i = 1;

		if (ret == 0)
			ret = lkl_config(lkl_cfg, n, port, extra, timeout_ms);
		for (; i <= n && ret == 0; i++)
			if (which & (1ull << i))
				ret = open_node(i);
		if (ret == 0) {
			lkl_port = port;
			lkl_open_now = 1;
			return 0;
		}
		for (int j = i - 2; j >= 1; j--) {
			lk_ls_abandon(lkl_ls[j]);
			lkl_ls[j] = NULL;
		}
		if (held)
			lkl_port_release(port);
		if (ret != -EADDRINUSE || attempt == 5)
			return ret;
	}
}

static inline int lkl_open_set(int n, uint64_t which, const char *extra,
			       unsigned timeout_ms)
{
	return lkl_open_with(n, which, extra, timeout_ms, NULL);
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

/* All @n nodes open and each seeing all as members; else prints why and
 * the FAIL line of the whole program. */
static inline int lkl_start(int n, const char *extra, unsigned timeout_ms)
{
	int ret = lkl_open(n, n, extra, timeout_ms);

	if (ret == 0)
		ret = lkl_full(n, 20000);
	if (ret != 0) {
		fprintf(stderr, "cluster: %s\n", strerror(-ret));
		printf("FAIL start_cluster\n");
	}
	return ret;
}

/* EX on @name from node @i, granted within @tries x 10 ms, released:
 * 0, -ETIMEDOUT (the request cancelled), or lk_lock's error. */
static inline int lkl_lock_soon(int i, const struct lk_name *name, int tries)
{
	struct lk_lock *lk = NULL;
	int ret = lk_lock(lkl_ls[i], name, LK_EX, 0, NULL, NULL, &lk);

	if (ret < 0)
		return ret;
	for (int t = 0; ret == 0 && t < tries; t++) {
		if (lk_lock_granted(lk))
			ret = LK_GRANTED_NOW;
		else
			usleep(10000);
	}
	if (ret != LK_GRANTED_NOW) {
		lk_cancel(lk);
		/* releases the handle; a cancel that crossed the grant
		 * leaves the lock granted */
		if (lk_wait(lk) == 0)
			lk_unlock(lk, 0);
		return -ETIMEDOUT;
	}
	return lk_unlock(lk, 0);
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
	lkl_port_release(lkl_port);
	lkl_port = 0;
	lkl_open_now = 0;
}

#ifdef UCFS_TEST_HARNESS_H
#define LKL_RUN(fn) lkl_run(#fn, fn)

static inline void lkl_run(const char *name, void (*fn)(void))
{
	t_run(name, fn);
	if (!lkl_open_now)
		return;
	fprintf(stderr, "# %s left its lockspaces open: closing them\n", name);
	lkl_close();
}
#endif

#endif /* UCFS_TEST_LK_LOCAL_H */
