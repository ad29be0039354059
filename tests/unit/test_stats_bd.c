/*
 * test_stats_bd.c — the "blockdev" section follows the device's counters
 * exactly (a RAM device, a known number of I/Os).
 */
#include <errno.h>
#include <jansson.h>

#include "blockdev/bd.h"
#include "fusefs/stats/fs_stats.h"
#include "tests/unit/harness.h"

static long long geti(json_t *j, const char *a, const char *b, const char *c)
{
	json_t *v =
	    json_object_get(json_object_get(json_object_get(j, a), b), c);

	return json_is_integer(v) ? json_integer_value(v) : -1;
}

static void test_blockdev_section(void)
{
	struct fs_stats *st;
	struct bd_dev *dev;
	char *doc;
	void *buf;
	json_t *j, *lat;

	REQUIRE(bd_ram_open(1 << 20, &dev) == 0);
	REQUIRE(fs_stats_new(&st) == 0);
	buf = bd_buf_alloc(8192);
	REQUIRE(buf != NULL);
	CHECK_EQ(fs_stats_add_blockdev(st, dev), 0);
	CHECK_EQ(fs_stats_add_blockdev(st, dev), -EEXIST);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(bd_write(dev, buf, 4096, (uint64_t)i * 4096, 0), 0);
	CHECK_EQ(bd_read(dev, buf, 8192, 0), 0);
	CHECK_EQ(bd_read(dev, buf, 4096, 4096), 0);
	CHECK_EQ(bd_read(dev, buf, 4096, 1 << 20), -EINVAL); /* past end */
	CHECK_EQ(bd_flush(dev), 0);
	REQUIRE(fs_stats_render(st, 0, &doc) == 0);
	j = json_loads(doc, 0, NULL);
	free(doc);
	REQUIRE(j != NULL);
	CHECK_EQ(geti(j, "blockdev", "write", "count"), 3);
	CHECK_EQ(geti(j, "blockdev", "write", "bytes"), 3 * 4096);
	CHECK_EQ(geti(j, "blockdev", "read", "count"), 2);
	CHECK_EQ(geti(j, "blockdev", "read", "bytes"), 3 * 4096);
	CHECK_EQ(geti(j, "blockdev", "flush", "count"), 1);
	lat = json_object_get(
	    json_object_get(json_object_get(j, "blockdev"), "write"), "lat");
	CHECK_EQ(json_integer_value(json_object_get(lat, "count")), 3);
	CHECK(json_is_array(json_object_get(lat, "hist")));
	CHECK(json_integer_value(json_object_get(lat, "p99_ns")) <=
	      json_integer_value(json_object_get(lat, "max_ns")));
	CHECK_EQ(json_integer_value(json_object_get(
		     json_object_get(j, "blockdev"), "inflight")),
		 0);
	CHECK_EQ(json_integer_value(
		     json_object_get(json_object_get(j, "blockdev"), "size")),
		 1 << 20);
	json_decref(j);
	CHECK_EQ(fs_stats_remove_section(st, "blockdev"), 0);
	fs_stats_free(st);
	bd_close(dev);
	free(buf);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_blockdev_section);
	return t_done();
}
