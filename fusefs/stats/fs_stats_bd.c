/*
 * fs_stats_bd.c — the "blockdev" section: renders bd_stats_get() of the
 * mounted device (schema in fusefs/STATS.md). The device keeps its own
 * atomic counters; this file only reads them on the stats thread.
 */
#include "blockdev/bd.h"
#include "fusefs/stats/fs_stats.h"

static void fs_stats_bd_op(struct fs_json *o, const char *key,
			   const struct bd_op_stats *s)
{
	struct fs_json *op = fs_json_obj(o, key);

	fs_json_u64(op, "count", s->count);
	fs_json_u64(op, "bytes", s->bytes);
	fs_json_u64(op, "errors", s->errors);
	/* the device's histogram is in microsecond buckets */
	fs_json_latency(op, "lat", s->count, s->total_ns, s->max_ns, s->hist,
			BD_HIST_BUCKETS, 1000);
}

void fs_stats_bd_render(struct fs_json *o, const struct bd_stats *s)
{
	fs_stats_bd_op(o, "read", &s->read);
	fs_stats_bd_op(o, "write", &s->write);
	fs_stats_bd_op(o, "flush", &s->flush);
	fs_json_u64(o, "fua_writes", s->fua_writes);
	fs_json_u64(o, "batches", s->batches);
	fs_json_u64(o, "inflight", s->inflight);
	fs_json_u64(o, "max_inflight", s->max_inflight);
	fs_json_u64(o, "gate_refused", s->gate_refused);
}

static void fs_stats_bd_section(struct fs_json *o, void *arg)
{
	struct bd_stats s;

	bd_stats_get(arg, &s);
	fs_json_str(o, "device", bd_name(arg));
	fs_json_u64(o, "size", bd_size(arg));
	fs_stats_bd_render(o, &s);
}

int fs_stats_add_blockdev(struct fs_stats *st, struct bd_dev *dev)
{
	return fs_stats_add_section(st, "blockdev", fs_stats_bd_section, dev);
}
