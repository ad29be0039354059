/*
 * test_stats_lk.c — the "locks" and "net" sections render a struct
 * lk_stats with the GFS2/OCFS2 key names and exact values.
 */
#include <errno.h>
#include <jansson.h>

#include "fusefs/stats/fs_stats.h"
#include "lockmgr/lk.h"
#include "tests/unit/harness.h"

static struct lk_stats snap;

static const char *tname(unsigned type)
{
	return type == 1 ? "inode" : type == 2 ? "rgrp" : NULL;
}

static void locks_cb(struct fs_json *o, void *arg)
{
	(void)arg;
	fs_stats_lk_render(o, &snap, tname);
}

static void net_cb(struct fs_json *o, void *arg)
{
	(void)arg;
	fs_stats_net_render(o, &snap);
}

static long long geti(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_integer(v)) {
		fprintf(stderr, "missing %s\n", k);
		return -4242;
	}
	return json_integer_value(v);
}

static void fill(void)
{
	struct lk_type_stats *t = &snap.type[1];

	memset(&snap, 0, sizeof(snap));
	t->c.requests = 100;
	t->c.cache_hits = 60;
	t->c.grants_local = 30;
	t->c.grants_remote = 10;
	t->c.waits = 7;
	t->c.conversions = 5;
	t->c.demotes = 4;
	t->c.basts_sent = 3;
	t->c.basts_recv = 2;
	t->c.srtt = 50000;
	t->c.srttvar = 1000;
	t->c.srttb = 900000;
	t->c.srttvarb = 20000;
	t->c.sirt = 123;
	t->c.sirtvar = 45;
	t->mode_count[LK_PR] = 30;
	t->mode_total_ns[LK_PR] = 3000000;
	t->mode_max_ns[LK_PR] = 400000;
	t->mode_count[LK_EX] = 10;
	t->mode_total_ns[LK_EX] = 9000000;
	t->mode_max_ns[LK_EX] = 2000000;
	t->wait_hist[3] = 33;	       /* [8,16) us */
	t->wait_hist[10] = 7;	       /* [1024,2048) us */
	snap.type[9].c.basts_recv = 1; /* unnamed type */
	snap.peer[2].frames_tx = 11;
	snap.peer[2].bytes_rx = 999;
	snap.resources = 17;
	snap.recoveries = 1;
	snap.net_wakeups = 6;
	snap.net_spins = 5;
	snap.net_spin_hits = 3;
	snap.poll_backoffs = 2;
	snap.runs_answered_first = 4;
}

static void test_locks_render(void)
{
	struct fs_stats *st;
	json_t *j, *l, *t, *lat, *peers;
	char *doc;

	fill();
	REQUIRE(fs_stats_new(&st) == 0);
	REQUIRE(fs_stats_add_section(st, "locks", locks_cb, NULL) == 0);
	REQUIRE(fs_stats_add_section(st, "net", net_cb, NULL) == 0);
	REQUIRE(fs_stats_render(st, 0, &doc) == 0);
	j = json_loads(doc, 0, NULL);
	free(doc);
	REQUIRE(j != NULL);
	l = json_object_get(j, "locks");
	t = json_object_get(json_object_get(l, "types"), "inode");
	REQUIRE(t != NULL);
	CHECK(json_object_get(json_object_get(l, "types"), "rgrp") == NULL);
	CHECK(json_object_get(json_object_get(l, "types"), "type9") != NULL);
	CHECK_EQ(geti(t, "requests"), 100);
	CHECK_EQ(geti(t, "grants_local"), 30);
	CHECK_EQ(geti(t, "grants_remote"), 10);
	CHECK_EQ(geti(t, "waits"), 7);
	CHECK_EQ(geti(t, "conversions"), 5);
	CHECK_EQ(geti(t, "demotes"), 4);
	CHECK_EQ(geti(t, "bast_sent"), 3);
	CHECK_EQ(geti(t, "bast_recv"), 2);
	CHECK_EQ(geti(t, "srtt"), 50000);
	CHECK_EQ(geti(t, "srttvar"), 1000);
	CHECK_EQ(geti(t, "srttb"), 900000);
	CHECK_EQ(geti(t, "srttvarb"), 20000);
	CHECK_EQ(geti(t, "sirt"), 123);
	CHECK_EQ(geti(t, "sirtvar"), 45);
	CHECK_EQ(geti(t, "dcnt"), 40);
	CHECK_EQ(geti(t, "qcnt"), 100);
	CHECK_EQ(geti(t, "num_prmode"), 30);
	CHECK_EQ(geti(t, "num_exmode"), 10);
	CHECK_EQ(geti(t, "total_prmode"), 3000000);
	CHECK_EQ(geti(t, "total_exmode"), 9000000);
	CHECK_EQ(geti(t, "max_prmode"), 400000);
	CHECK_EQ(geti(t, "max_exmode"), 2000000);
	CHECK_EQ(geti(t, "num_nlmode"), 0);
	CHECK_EQ(geti(t, "wait_ns"), 12000000);
	lat = json_object_get(t, "grant_lat");
	CHECK_EQ(geti(lat, "count"), 40);
	CHECK_EQ(geti(lat, "max_ns"), 2000000);
	CHECK_EQ(geti(lat, "p50_ns"), 16000);	/* [8,16) us upper bound */
	CHECK_EQ(geti(lat, "p99_ns"), 2000000); /* capped by max */
	CHECK_EQ(geti(l, "resources_now"), 17);
	CHECK_EQ(geti(l, "recoveries"), 1);
	CHECK_EQ(geti(l, "net_wakeups"), 6);
	CHECK_EQ(geti(l, "net_spins"), 5);
	CHECK_EQ(geti(l, "net_spin_hits"), 3);
	CHECK_EQ(geti(l, "poll_backoffs"), 2);
	CHECK_EQ(geti(l, "runs_answered_first"), 4);
	CHECK_EQ(geti(l, "rx_spins"), 0);
	peers = json_object_get(json_object_get(j, "net"), "peers");
	CHECK_EQ(json_array_size(peers), 1);
	CHECK_EQ(geti(json_array_get(peers, 0), "node"), 2);
	CHECK_EQ(geti(json_array_get(peers, 0), "frames_tx"), 11);
	CHECK_EQ(geti(json_array_get(peers, 0), "bytes_rx"), 999);
	json_decref(j);
	fs_stats_free(st);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_locks_render);
	return t_done();
}
