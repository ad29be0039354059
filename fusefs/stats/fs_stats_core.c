/*
 * fs_stats_core.c — the sections of a mounted filesystem's core: the
 * "blockdev" (through fs_stats_bd.c), "journal", "cache" and "alloc"
 * sections, rendered from fs_core_stats_get() (fusefs/core/fs_internal.h).
 * Schema in fusefs/STATS.md. The core keeps its counters with relaxed
 * atomics; the snapshot is taken on the stats thread.
 */
#include "fusefs/core/fs_internal.h"
#include "fusefs/stats/fs_stats.h"

static void fs_stats_journal(struct fs_json *o, void *arg)
{
	struct fs_core_stats s;
	struct fs_json *lat, *fl;
	const uint64_t *r;

	fs_core_stats_get(arg, &s);
	r = s.commit_reason;
	fs_json_u64(o, "commits", s.commits);
	fs_json_u64(o, "blocks", s.commit_blocks);
	fs_json_u64(o, "bytes", s.commit_bytes);
	lat = fs_json_obj(o, "lat");
	fs_json_u64(lat, "count", s.commits);
	fs_json_u64(lat, "total_ns", s.commit_ns_total);
	fs_json_u64(lat, "mean_ns",
		    s.commits != 0 ? s.commit_ns_total / s.commits : 0);
	fs_json_u64(lat, "max_ns", s.commit_ns_max);
	fl = fs_json_obj(o, "flush");
	fs_json_u64(fl, "fsync", r[FS_CR_SYNC]);
	fs_json_u64(fl, "timer", r[FS_CR_TIMER]);
	fs_json_u64(fl, "demote", r[FS_CR_LOCK]);
	fs_json_u64(fl, "full",
		    r[FS_CR_TXFULL] + r[FS_CR_JOURNAL] + r[FS_CR_CACHE]);
	fs_json_u64(fl, "full_tx", r[FS_CR_TXFULL]);
	fs_json_u64(fl, "full_journal", r[FS_CR_JOURNAL]);
	fs_json_u64(fl, "full_cache", r[FS_CR_CACHE]);
	fs_json_u64(fl, "unmount", r[FS_CR_UNMOUNT]);
	fs_json_u64(o, "commits_waited", s.commit_waited);
	fs_json_u64(o, "fsync_clean", s.fsync_clean);
	fs_json_u64(o, "checkpoints", s.checkpoints);
	fs_json_u64(o, "checkpoint_blocks", s.checkpoint_blocks);
	fs_json_u64(o, "checkpoint_records", s.ckpt_records);
	fs_json_u64(o, "header_writes", s.ckpt_headers);
	fs_json_u64(o, "records_allowed", s.records_allowed);
	fs_json_u64(o, "records_off", s.records_off);
	fs_json_u64(o, "device_flushes", s.flushes);
	fs_json_u64(o, "replay_tx", s.replay_tx);
	fs_json_u64(o, "replay_blocks", s.replay_blocks);
	fs_json_u64(o, "replay_scanned", s.replay_scanned);
}

static void fs_stats_cache(struct fs_json *o, void *arg)
{
	struct fs_core_stats s;

	fs_core_stats_get(arg, &s);
	fs_json_u64(o, "hits", s.cache_hits);
	fs_json_u64(o, "misses", s.cache_misses);
	fs_json_u64(o, "evictions", s.cache_evictions);
	fs_json_u64(o, "readahead", s.cache_readahead);
	fs_json_u64(o, "bufs_now", s.cache_bufs);
	fs_json_u64(o, "pinned_now", s.cache_pinned);
	fs_json_u64(o, "bad_blocks", s.bad_blocks);
	fs_json_u64(o, "ra_ios", s.ra_ios);
	fs_json_u64(o, "ra_gap_blocks", s.ra_gap_blocks);
	fs_json_u64(o, "ra_hits", s.ra_hits);
	fs_json_u64(o, "ra_waits", s.ra_waits);
	fs_json_u64(o, "ra_wait_ns", s.ra_wait_ns);
	fs_json_u64(o, "ra_wasted", s.ra_wasted);
	fs_json_u64(o, "ra_skipped", s.ra_skipped);
	fs_json_u64(o, "ra_errors", s.ra_errors);
	fs_json_u64(o, "ra_bounce_maps", s.ra_bounce_maps);
	fs_json_u64(o, "ra_discarded", s.ra_discarded);
	fs_json_u64(o, "ra_drain_waits", s.ra_drain_waits);
	fs_json_u64(o, "ra_drain_ns", s.ra_drain_ns);
	fs_json_u64(o, "ra_unused_now", s.ra_unused);
}

static void fs_stats_alloc(struct fs_json *o, void *arg)
{
	struct fs_core_stats s;

	fs_core_stats_get(arg, &s);
	fs_json_u64(o, "calls", s.alloc_calls);
	fs_json_u64(o, "blocks", s.alloc_blocks);
	fs_json_u64(o, "enospc", s.alloc_enospc);
	fs_json_u64(o, "freed_blocks", s.free_blocks);
	fs_json_u64(o, "reservations", s.alloc_resv_made);
	fs_json_u64(o, "stolen", s.alloc_stolen);
	fs_json_u64(o, "rgrp_refused", s.alloc_rg_refused);
	fs_json_u64(o, "rgrp_waits", s.alloc_rg_waits);
	fs_json_u64(o, "starved", s.alloc_starved);
	fs_json_u64(o, "swept", s.alloc_swept);
	fs_json_u64(o, "flog_logged", s.flog_logged);
	fs_json_u64(o, "flog_applied", s.flog_applied);
	fs_json_u64(o, "flog_overflows", s.flog_overflows);
	fs_json_u64(o, "flog_room_applies", s.flog_room_applies);
	fs_json_u64(o, "flog_dead_applied", s.flog_dead_applied);
	fs_json_u64(o, "flog_dead_errors", s.flog_dead_errors);
	fs_json_u64(o, "flog_dead_retries", s.flog_dead_retries);
	fs_json_u64(o, "flog_worker_runs", s.flog_worker_runs);
	fs_json_u64(o, "flog_dead_slots", s.flog_dead_slots);
	fs_json_u64(o, "statfs_folds", s.statfs_folds);
	fs_json_u64(o, "statfs_dead_folds", s.statfs_dead_folds);
	fs_json_u64(o, "statfs_fold_errors", s.statfs_fold_errors);
	fs_json_u64(o, "statfs_reads", s.statfs_reads);
	fs_json_u64(o, "statfs_slow_reads", s.statfs_slow_reads);
	fs_json_u64(o, "statfs_percent_wakes", s.statfs_percent_wakes);
	fs_json_u64(o, "statfs_untracked", s.statfs_untracked);
}

/* The data write-behind (fs_data.c). */
static void fs_stats_data(struct fs_json *o, void *arg)
{
	struct fs_core_stats s;

	fs_core_stats_get(arg, &s);
	fs_json_u64(o, "writes", s.data_writes);
	fs_json_u64(o, "bytes", s.data_bytes);
	fs_json_u64(o, "runs", s.data_runs);
	fs_json_u64(o, "absorbed", s.data_absorbed);
	fs_json_u64(o, "throttled", s.data_throttled);
	fs_json_u64(o, "read_hits", s.data_read_hits);
	fs_json_u64(o, "rmw_dev_reads", s.data_rmw_dev);
	fs_json_u64(o, "errors", s.data_errors);
	fs_json_u64(o, "waits", s.data_waits);
}

static const struct {
	const char *name;
	fs_stats_section_fn fn;
} fs_core_sections[] = {
    {"journal", fs_stats_journal},
    {"cache", fs_stats_cache},
    {"alloc", fs_stats_alloc},
    {"data", fs_stats_data},
};

#define FS_NCORE (sizeof(fs_core_sections) / sizeof(fs_core_sections[0]))

int fs_stats_add_fs(struct fs_stats *st, struct fs *fs)
{
	int ret = fs_stats_add_blockdev(st, fs->bd);

	for (size_t i = 0; ret == 0 && i < FS_NCORE; i++) {
		ret = fs_stats_add_section(st, fs_core_sections[i].name,
					   fs_core_sections[i].fn, fs);
		if (ret != 0) {
			while (i-- > 0)
				fs_stats_remove_section(
				    st, fs_core_sections[i].name);
			fs_stats_remove_section(st, "blockdev");
		}
	}
	return ret;
}

void fs_stats_remove_fs(struct fs_stats *st)
{
	fs_stats_remove_section(st, "blockdev");
	for (size_t i = 0; i < FS_NCORE; i++)
		fs_stats_remove_section(st, fs_core_sections[i].name);
}
