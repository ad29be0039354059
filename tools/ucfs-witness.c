/*
 * ucfs-witness — a quorum witness: a lockspace-only member of a ucfs
 * cluster (MOUNT.md "Cluster mounts"). It mounts nothing and holds no
 * lock; it only adds its vote, so that an even number of filesystem
 * nodes keeps a majority when one of them is gone, and the last node of
 * a cluster still has a quorum when it unmounts.
 *
 *   ucfs-witness [-v] CONFIG ID
 *
 * CONFIG is the cluster's JSON configuration (the same file the nodes
 * mount with), ID this witness's node id in it. Runs until SIGTERM or
 * SIGINT, then leaves the cluster cleanly (exit 0). Logs the membership
 * whenever it changes; -v also the lock manager's informational
 * messages. Exit 1 on a bad configuration or when the address is in use
 * ("node N is already running").
 *
 * A witness never reads the shared disk, so it must never be the
 * coordinator whose view decides that a filesystem node is dead (the
 * coordinator is the lowest id up; the disk rules of PROTOCOL.md §9 run
 * there): it refuses to run with the lowest id of the configuration.
 * Give witnesses the highest ids (MOUNT.md "Cluster mounts").
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lockmgr/lk.h"
#include "lockmgr/lk_config.h"

static int verbose;

static void logcb(int level, const char *msg, void *arg)
{
	(void)arg;
	if (level <= (verbose ? 2 : 1))
		fprintf(stderr, "ucfs-witness: %s\n", msg);
}

static void usage(void)
{
	fprintf(stderr, "usage: ucfs-witness [-v] CONFIG ID\n");
	exit(2);
}

/* Log the membership when it changes. */
static void report(struct lk_ls *ls, uint64_t *last_gen, int *last_q)
{
	uint64_t gen, members;
	int q = lk_ls_members(ls, &gen, &members);

	if (gen == *last_gen && q == *last_q)
		return;
	fprintf(stderr, "ucfs-witness: generation %llu, members %#llx, %s\n",
		(unsigned long long)gen, (unsigned long long)members,
		q ? "quorate" : "NOT quorate");
	*last_gen = gen;
	*last_q = q;
}

/* 0 if @id may be a witness in @path's cluster, else 1 (said why). */
static int check_id(const char *path, unsigned long id)
{
	struct lk_config *cfg = calloc(1, sizeof(*cfg));
	const char *why = NULL;
	unsigned lowest;
	int ret;

	if (cfg == NULL)
		return 1;
	ret = lk_config_load(path, cfg, &why);
	if (ret < 0) {
		fprintf(stderr, "ucfs-witness: %s: %s\n", path,
			why != NULL ? why : strerror(-ret));
		free(cfg);
		return 1;
	}
	lowest = (unsigned)__builtin_ctzll(cfg->configured);
	ret = id == lowest && cfg->nnodes > 1;
	if (ret)
		fprintf(stderr,
			"ucfs-witness: node %lu has the lowest id of cluster "
			"%s: a witness never reads the disk, so it must not "
			"be the coordinator that declares filesystem nodes "
			"dead; give the witness an id above every "
			"filesystem node's\n",
			id, cfg->cluster);
	free(cfg);
	return ret;
}

int main(int argc, char **argv)
{
	struct lk_ls_config c = {0};
	struct timespec tick = {1, 0};
	struct lk_ls *ls;
	uint64_t last_gen = 0;
	int last_q = -1, opt, sig = 0, ret;
	unsigned long id;
	char *end;
	sigset_t set;

	while ((opt = getopt(argc, argv, "v")) != -1) {
		if (opt != 'v')
			usage();
		verbose = 1;
	}
	if (argc - optind != 2)
		usage();
	id = strtoul(argv[optind + 1], &end, 10);
	if (*end != '\0' || id == 0 || id > 63)
		usage();
	if (check_id(argv[optind], id))
		return 1;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL); /* before the threads start */
	c.cluster_file = argv[optind];
	c.nodeid = (uint32_t)id;
	c.log = logcb;
	ret = lk_ls_open(&c, &ls);
	if (ret == -EADDRINUSE) {
		fprintf(stderr,
			"ucfs-witness: node %lu is already running (its "
			"address is in use)\n",
			id);
		return 1;
	}
	if (ret < 0) {
		fprintf(stderr, "ucfs-witness: %s as node %lu: %s\n",
			argv[optind], id, strerror(-ret));
		return 1;
	}
	fprintf(stderr, "ucfs-witness: node %lu running\n", id);
	while (sig <= 0 && !lk_ls_fenced(ls)) {
		report(ls, &last_gen, &last_q);
		sig = sigtimedwait(&set, NULL, &tick);
	}
	if (lk_ls_fenced(ls)) {
		fprintf(stderr, "ucfs-witness: fenced by the cluster\n");
		lk_ls_abandon(ls);
		return 1;
	}
	lk_ls_close(ls);
	fprintf(stderr, "ucfs-witness: node %lu left the cluster\n", id);
	return 0;
}
