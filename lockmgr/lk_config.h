/*
 * lk_config.h — the cluster configuration (JSON, read with jansson in
 * lk_config.c only). Example:
 *
 *   { "cluster": "demo", "secret_file": "/etc/ucfs/secret",
 *     "heartbeat_ms": 200, "timeout_ms": 2000, "two_node": false,
 *     "toss_ms": 10000, "poll_us": 100,
 *     "nodes": [ { "id": 1, "addr": "127.0.0.1", "port": 7001 },
 *                { "id": 2, "addr": "127.0.0.2", "port": 7001 } ] }
 *
 * Node ids are 1..63. addr is a numeric IPv4 address. The secret file
 * holds at least 16 bytes; the HMAC key is SHA-256 of its contents.
 */
#ifndef UCFS_LK_CONFIG_H
#define UCFS_LK_CONFIG_H

#include <netinet/in.h>
#include <stdint.h>

#include "lockmgr/lk.h"

struct lk_node_cfg {
	uint32_t id;
	struct sockaddr_in addr;
};

struct lk_config {
	char cluster[64];
	uint64_t cluster_hash; /* of the name: peers must agree */
	uint8_t key[32];       /* HMAC key */
	unsigned heartbeat_ms, timeout_ms;
	unsigned toss_ms; /* keep unused resources this long (10000) */
	unsigned poll_us; /* network thread polls this long after a lock
			     frame before it sleeps (100; 0: never polls);
			     a waiter polls 3/10 of it (PROTOCOL.md §7) */
	int two_node;
	unsigned nnodes;
	struct lk_node_cfg node[LK_MAX_NODES]; /* indexed by position */
	uint64_t configured;		       /* bitmap of ids */
	char why[200]; /* a syntax error's message (*why points here) */
};

/* Parse @path. 0, or -ENOENT/-EACCES (files), -EINVAL with *why set. */
int lk_config_load(const char *path, struct lk_config *cfg, const char **why);
const struct lk_node_cfg *lk_config_node(const struct lk_config *cfg,
					 uint32_t id);
/* Members needed for quorum at start: strict majority, or 1 in two-node
 * mode (lk_member.c: the higher id of two waits for its peer first). */
unsigned lk_config_quorum(const struct lk_config *cfg);

#endif /* UCFS_LK_CONFIG_H */
