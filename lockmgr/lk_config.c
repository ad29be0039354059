/*
 * lk_config.c — loads the JSON cluster configuration (lk_config.h). The
 * only user of jansson in lockmgr. Every field is checked; an error names
 * the offending field.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lockmgr/lk_config.h"

static int load_secret(const char *path, uint8_t key[32], const char **why)
{
	uint8_t buf[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int ret;

	if (fd < 0) {
		ret = -errno;
		*why = "secret_file cannot be opened";
		return ret;
	}
	n = read(fd, buf, sizeof(buf));
	ret = n < 0 ? -errno : 0;
	close(fd);
	if (ret < 0) {
		*why = "secret_file cannot be read";
		return ret;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if (n < 16) {
		*why = "secret_file holds fewer than 16 bytes";
		return -EINVAL;
	}
	crypto_hash_sha256(key, buf, (unsigned long long)n);
	sodium_memzero(buf, sizeof(buf));
	return 0;
}

static int get_uint(json_t *o, const char *k, unsigned dflt, unsigned max,
		    unsigned *out)
{
	json_t *v = json_object_get(o, k);

	if (v == NULL) {
		*out = dflt;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > (json_int_t)max)
		return -EINVAL;
	*out = (unsigned)json_integer_value(v);
	return 0;
}

static int load_node(json_t *n, struct lk_node_cfg *nc, const char **why)
{
	json_t *addr = json_object_get(n, "addr");
	unsigned id, port;

	*why = "nodes[]: id must be 1..63 and port 1..65535";
	if (!json_is_object(n) || get_uint(n, "id", 0, 63, &id) ||
	    get_uint(n, "port", 0, 65535, &port) || id == 0 || port == 0)
		return -EINVAL;
	*why = "nodes[]: addr must be a numeric IPv4 address";
	memset(nc, 0, sizeof(*nc));
	nc->addr.sin_family = AF_INET;
	nc->addr.sin_port = htons((uint16_t)port);
	if (!json_is_string(addr) || inet_pton(AF_INET, json_string_value(addr),
					       &nc->addr.sin_addr) != 1)
		return -EINVAL;
	nc->id = id;
	*why = NULL;
	return 0;
}

static int load_nodes(json_t *arr, struct lk_config *cfg, const char **why)
{
	size_t i;
	json_t *n;

	if (!json_is_array(arr) || json_array_size(arr) == 0 ||
	    json_array_size(arr) >= LK_MAX_NODES) {
		*why = "nodes must be a non-empty array of at most 63";
		return -EINVAL;
	}
	json_array_foreach(arr, i, n)
	{
		struct lk_node_cfg *nc = &cfg->node[cfg->nnodes];

		if (load_node(n, nc, why) != 0)
			return -EINVAL;
		if (cfg->configured & (1ull << nc->id)) {
			*why = "nodes[]: duplicate id";
			return -EINVAL;
		}
		cfg->configured |= 1ull << nc->id;
		cfg->nnodes++;
	}
	return 0;
}

static int load_root(json_t *root, struct lk_config *cfg, const char **why)
{
	json_t *name = json_object_get(root, "cluster");
	json_t *secret = json_object_get(root, "secret_file");
	json_t *two = json_object_get(root, "two_node");
	int ret;

	if (!json_is_string(name) || strlen(json_string_value(name)) == 0 ||
	    strlen(json_string_value(name)) >= sizeof(cfg->cluster)) {
		*why = "cluster must be a name of 1..63 characters";
		return -EINVAL;
	}
	strcpy(cfg->cluster, json_string_value(name));
	cfg->cluster_hash = 0;
	crypto_generichash((uint8_t *)&cfg->cluster_hash,
			   sizeof(cfg->cluster_hash), (uint8_t *)cfg->cluster,
			   strlen(cfg->cluster), NULL, 0);
	if (get_uint(root, "toss_ms", 10000, 3600000, &cfg->toss_ms)) {
		*why = "toss_ms must be 0..3600000";
		return -EINVAL;
	}
	if (get_uint(root, "poll_us", 100, 10000, &cfg->poll_us)) {
		*why = "poll_us must be 0..10000";
		return -EINVAL;
	}
	if (get_uint(root, "heartbeat_ms", 200, 60000, &cfg->heartbeat_ms) ||
	    get_uint(root, "timeout_ms", 2000, 600000, &cfg->timeout_ms) ||
	    cfg->heartbeat_ms == 0 || cfg->timeout_ms < 2 * cfg->heartbeat_ms) {
		*why = "heartbeat_ms > 0 and timeout_ms >= 2 * heartbeat_ms";
		return -EINVAL;
	}
	if (two != NULL && !json_is_boolean(two)) {
		*why = "two_node must be true or false";
		return -EINVAL;
	}
	cfg->two_node = two != NULL && json_is_true(two);
	ret = load_nodes(json_object_get(root, "nodes"), cfg, why);
	if (ret < 0)
		return ret;
	if (cfg->two_node && cfg->nnodes != 2) {
		*why = "two_node needs exactly two nodes";
		return -EINVAL;
	}
	if (!json_is_string(secret)) {
		*why = "secret_file must be a path";
		return -EINVAL;
	}
	return load_secret(json_string_value(secret), cfg->key, why);
}

int lk_config_load(const char *path, struct lk_config *cfg, const char **why)
{
	json_error_t err;
	json_t *root;
	int ret;

	memset(cfg, 0, sizeof(*cfg));
	*why = NULL;
	if (sodium_init() < 0) {
		*why = "libsodium failed to initialise";
		return -EINVAL;
	}
	root = json_load_file(path, 0, &err);
	if (root == NULL) {
		ret = access(path, R_OK) != 0 ? -errno : -EINVAL;
		if (ret == -EINVAL) {
			snprintf(cfg->why, sizeof(cfg->why),
				 "JSON syntax error at line %d, column %d: %s",
				 err.line, err.column, err.text);
			*why = cfg->why;
		} else {
			*why = "not a readable JSON file";
		}
		return ret;
	}
	if (!json_is_object(root)) {
		*why = "top level must be an object";
		ret = -EINVAL;
	} else {
		ret = load_root(root, cfg, why);
	}
	json_decref(root);
	return ret;
}

const struct lk_node_cfg *lk_config_node(const struct lk_config *cfg,
					 uint32_t id)
{
	for (unsigned i = 0; i < cfg->nnodes; i++)
		if (cfg->node[i].id == id)
			return &cfg->node[i];
	return NULL;
}

unsigned lk_config_quorum(const struct lk_config *cfg)
{
	return cfg->two_node ? 1 : cfg->nnodes / 2 + 1;
}
