/*
 * test_lk_config.c — the JSON cluster configuration: a good file, every
 * kind of bad field (each refused with a reason naming it), quorum sizes
 * (strict majority; 1 in two-node mode), and the auth MAC round trip.
 */
#include <errno.h>
#include <unistd.h>

#include "lockmgr/lk_auth.h"
#include "lockmgr/lk_config.h"
#include "tests/unit/harness.h"

static char dir[64];

static void write_file(const char *name, const char *text)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (f != NULL) {
		fputs(text, f);
		fclose(f);
	}
}

/* Load a config whose body is @nodes_and_more after the common head. */
static int load(const char *extra, struct lk_config *cfg, const char **why)
{
	char text[1024], path[128];

	snprintf(text, sizeof(text),
		 "{\"cluster\": \"t\", \"secret_file\": \"%s/secret\"%s}", dir,
		 extra);
	write_file("c.json", text);
	snprintf(path, sizeof(path), "%s/c.json", dir);
	return lk_config_load(path, cfg, why);
}

#define NODES3                                                                 \
	", \"nodes\": [{\"id\": 1, \"addr\": \"127.0.0.1\", \"port\": 7001},"  \
	"{\"id\": 2, \"addr\": \"127.0.0.2\", \"port\": 7001},"                \
	"{\"id\": 3, \"addr\": \"127.0.0.3\", \"port\": 7001}]"

static void test_good_config(void)
{
	struct lk_config cfg;
	const char *why;

	REQUIRE(load(NODES3 ", \"heartbeat_ms\": 50, \"timeout_ms\": 500", &cfg,
		     &why) == 0);
	CHECK_EQ(cfg.nnodes, 3);
	CHECK_EQ(cfg.heartbeat_ms, 50);
	CHECK_EQ(cfg.timeout_ms, 500);
	CHECK_EQ(cfg.toss_ms, 10000);
	CHECK_EQ(cfg.poll_us, 100);
	CHECK_EQ(lk_config_quorum(&cfg), 2);
	CHECK(lk_config_node(&cfg, 2) != NULL);
	CHECK(lk_config_node(&cfg, 4) == NULL);
	CHECK_EQ(cfg.configured, 0xe);
}

static void test_two_node_quorum(void)
{
	struct lk_config cfg;
	const char *why;

	REQUIRE(load(", \"two_node\": true, \"nodes\": ["
		     "{\"id\": 1, \"addr\": \"127.0.0.1\", \"port\": 1},"
		     "{\"id\": 2, \"addr\": \"127.0.0.2\", \"port\": 1}]",
		     &cfg, &why) == 0);
	CHECK_EQ(lk_config_quorum(&cfg), 1);
	CHECK_EQ(load(", \"two_node\": true" NODES3, &cfg, &why), -EINVAL);
	CHECK(strstr(why, "two_node") != NULL);
}

static void test_bad_fields(void)
{
	static const struct {
		const char *extra, *word;
	} cases[] = {
	    {"", "nodes"},
	    {", \"nodes\": []", "nodes"},
	    {", \"nodes\": [{\"id\": 0, \"addr\": \"127.0.0.1\", "
	     "\"port\": 1}]",
	     "id"},
	    {", \"nodes\": [{\"id\": 64, \"addr\": \"127.0.0.1\", "
	     "\"port\": 1}]",
	     "id"},
	    {", \"nodes\": [{\"id\": 1, \"addr\": \"localhost\", "
	     "\"port\": 1}]",
	     "addr"},
	    {", \"nodes\": [{\"id\": 1, \"addr\": \"127.0.0.1\", "
	     "\"port\": 70000}]",
	     "port"},
	    {", \"nodes\": [{\"id\": 1, \"addr\": \"127.0.0.1\", "
	     "\"port\": 1}, {\"id\": 1, \"addr\": \"127.0.0.2\", "
	     "\"port\": 1}]",
	     "duplicate"},
	    {NODES3 ", \"heartbeat_ms\": 500, \"timeout_ms\": 600",
	     "timeout_ms"},
	    {NODES3 ", \"two_node\": 3", "two_node"},
	    {NODES3 ", \"toss_ms\": -1", "toss_ms"},
	    {NODES3 ", \"poll_us\": 20000", "poll_us"},
	};
	struct lk_config cfg;
	const char *why;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		why = NULL;
		CHECK_EQ(load(cases[i].extra, &cfg, &why), -EINVAL);
		if (why == NULL || strstr(why, cases[i].word) == NULL) {
			printf("case %zu: reason \"%s\" lacks \"%s\"\n", i,
			       why ? why : "(none)", cases[i].word);
			t_case_failed = 1;
		}
	}
}

static void test_bad_files(void)
{
	struct lk_config cfg;
	const char *why;
	char path[128];

	snprintf(path, sizeof(path), "%s/none.json", dir);
	CHECK_EQ(lk_config_load(path, &cfg, &why), -ENOENT);
	write_file("bad.json", "{ \"cluster\": \"x\",\n  \"nodes\": [ }\n");
	snprintf(path, sizeof(path), "%s/bad.json", dir);
	CHECK_EQ(lk_config_load(path, &cfg, &why), -EINVAL);
	/* a syntax error names its line and column (jansson's) */
	CHECK(strstr(why, "line 2, column 14") != NULL);
	write_file("secret", "short\n");
	CHECK_EQ(load(NODES3, &cfg, &why), -EINVAL);
	CHECK(strstr(why, "16 bytes") != NULL);
	write_file("secret", "a-long-enough-shared-secret\n");
}

static void test_auth_mac(void)
{
	struct lk_config cfg;
	const char *why;
	uint8_t nonce[32], mac[32];

	REQUIRE(load(NODES3, &cfg, &why) == 0);
	lk_auth_nonce(nonce);
	lk_auth_mac(cfg.key, nonce, 2, 1, mac); /* node 2 answers node 1 */
	CHECK_EQ(lk_auth_verify(cfg.key, nonce, 1, 2, mac), 0);
	CHECK_EQ(lk_auth_verify(cfg.key, nonce, 1, 3, mac), -EACCES);
	mac[5] ^= 1;
	CHECK_EQ(lk_auth_verify(cfg.key, nonce, 1, 2, mac), -EACCES);
}

int main(int argc, char **argv)
{
	char cmd[96];

	t_init(argc, argv);
	snprintf(dir, sizeof(dir), "/tmp/test_lk_config.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return 1;
	write_file("secret", "a-long-enough-shared-secret\n");
	T_RUN(test_good_config);
	T_RUN(test_two_node_quorum);
	T_RUN(test_bad_fields);
	T_RUN(test_bad_files);
	T_RUN(test_auth_mac);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	return t_done();
}
