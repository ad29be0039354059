/*
 * bd.h — the shared block device, as every other module sees it.
 *
 * A struct bd_dev is an opaque handle on a device: a regular image file, a
 * loop device or any block device (bd_file_open), an export of a network
 * block device server such as nbdkit or nbd-server (bd_nbd_open, through
 * libnbd), memory (bd_ram_open, for unit tests), or a fault-injecting
 * wrapper around another device (bd_fault_open, for crash tests). All
 * backends share one vtable (struct bd_ops in bd_internal.h); callers only
 * use the functions below. Programs open the DEVICE their user names with
 * bd_open_any(), which picks the backend from the string.
 *
 * Units and alignment: offsets and lengths are in bytes and must be
 * multiples of BD_ALIGN; buffers must be BD_ALIGN-aligned (use
 * bd_buf_alloc). This is what O_DIRECT needs and what the filesystem uses
 * anyway (4 KiB blocks). Misaligned requests return -EINVAL.
 *
 * Durability: a write that returned 0 is on the device but possibly in its
 * volatile cache; bd_flush() makes every completed write durable
 * (fdatasync). BD_IO_FUA on a single I/O makes that write durable before
 * it completes (used for journal commit records).
 *
 * Threads: every function may be called from any thread concurrently,
 * except bd_close(), which must be the last call on the handle. All
 * functions may block.
 *
 * Errors: functions return 0 (or a count) on success and -errno on failure;
 * they never print.
 */
#ifndef UCFS_BD_H
#define UCFS_BD_H

#include <stddef.h>
#include <stdint.h>

#define BD_ALIGN 4096u

struct bd_dev;
struct bd_fault;

/* bd_file_open() / bd_nbd_open() / bd_open_any() flags */
enum {
	BD_RDONLY = 1 << 0,   /* open read-only; writes return -EROFS */
	BD_BUFFERED = 1 << 1, /* no O_DIRECT (tmpfs, or debugging) */
	BD_EXCL = 1 << 2,     /* take an exclusive advisory lock (flock) on
				 the device; -EBUSY if another holder
				 (NBD: host-local, see bd_nbd_open) */
};

enum bd_op { BD_READ, BD_WRITE };

enum {
	BD_IO_FUA = 1 << 0, /* write through: durable before completion */
};

/* One I/O of a batch. The caller fills op..flags; the device sets ret. */
struct bd_io {
	enum bd_op op;
	unsigned flags;
	void *buf;    /* BD_ALIGN-aligned */
	size_t len;   /* multiple of BD_ALIGN */
	uint64_t off; /* multiple of BD_ALIGN */
	int ret;      /* out: 0 or -errno */
	void *priv;   /* caller's, untouched */
};

/* Completion callback of bd_submit_async(); runs on a bd thread. It may
 * submit more I/O but must not wait for I/O of the same device. */
typedef void (*bd_done_fn)(struct bd_io *ios, unsigned n, void *arg);

/* Per-op counters, cumulative since open. Latencies in nanoseconds;
 * hist[i] counts I/Os that took [2^i, 2^(i+1)) microseconds (hist[0] also
 * takes < 1 us). */
#define BD_HIST_BUCKETS 32
struct bd_op_stats {
	uint64_t count;
	uint64_t bytes;
	uint64_t errors;
	uint64_t total_ns;
	uint64_t max_ns;
	uint64_t hist[BD_HIST_BUCKETS];
};

struct bd_stats {
	struct bd_op_stats read;
	struct bd_op_stats write;
	struct bd_op_stats flush;
	uint64_t fua_writes;   /* writes with BD_IO_FUA that succeeded (also
				  in write): each one a durability wait */
	uint64_t batches;      /* bd_submit / bd_submit_async calls */
	uint64_t inflight;     /* I/Os submitted and not yet complete */
	uint64_t max_inflight; /* high-water mark of inflight */
	uint64_t gate_refused; /* write gate or fence checks that refused:
				  a write at submission, a queued batch
				  before the kernel got it (bd_set_gate) */
};

/* Open a file or block device. flags: BD_*. Returns 0 and *out, or
 * -ENOENT, -EACCES, -EROFS (writable open of a read-only device), -EBUSY
 * (BD_EXCL and another holder), -EINVAL (size not a multiple of BD_ALIGN
 * or zero), -ENOMEM, or another -errno from open/fstat/io_setup. */
int bd_file_open(const char *path, unsigned flags, struct bd_dev **out);

/*
 * Open the export at libnbd URI @uri: nbd://HOST[:PORT][/EXPORT],
 * nbd+unix:///[EXPORT]?socket=PATH (and the other forms libnbd accepts).
 * One more query parameter is ucfs's own: io_timeout=SECONDS (1..3600,
 * default 30), the longest one NBD command or the handshake may take;
 * past it the connection is dropped and every I/O in flight or later fails
 * with -ENOTCONN, as it does when the server goes away (no reconnection:
 * reopen). Semantics are bd_file's: same alignment rules and errors,
 * BD_IO_FUA is NBD FUA (or write + NBD flush if the server has no FUA),
 * bd_flush is an NBD flush (a server that cannot flush gets none: then
 * durability is the server's). flags: BD_RDONLY; BD_BUFFERED is ignored;
 * BD_EXCL excludes the other processes of this host that open the same
 * URI with BD_EXCL (a lock file in /run/lock; -EBUSY), as flock does for
 * bd_file on a shared disk; NBD has no lock, so clients on other hosts are
 * not excluded: a lockproto=nolock export must be served to one client at
 * a time (nbdkit --filter=limit limit=1). Returns 0 and *out, or -EINVAL
 * (bad URI or io_timeout, size zero or not a multiple of BD_ALIGN, server
 * minimum block size not dividing BD_ALIGN), -EROFS (writable open of a
 * read-only export), -EBUSY (BD_EXCL held), -ETIMEDOUT, -ECONNREFUSED,
 * -ENOENT (no such socket), -ENOMEM, or another -errno from libnbd. May
 * block up to the timeout.
 */
int bd_nbd_open(const char *uri, unsigned flags, struct bd_dev **out);

/* 1 if @spec names an NBD export (nbd://, nbds://, nbd+unix://, ...). */
int bd_spec_is_nbd(const char *spec);

/*
 * Open the DEVICE string a user gave: an NBD URI (bd_spec_is_nbd) through
 * bd_nbd_open, anything else as a path through bd_file_open. Same flags
 * and errors as those. Every program that takes a DEVICE opens it here.
 */
int bd_open_any(const char *spec, unsigned flags, struct bd_dev **out);

/* A zero-filled device of @size bytes in memory. -EINVAL, -ENOMEM. */
int bd_ram_open(uint64_t size, struct bd_dev **out);

/*
 * Wrap @lower in a fault injector. The wrapper owns @lower (closing the
 * wrapper closes it). Writes go to a volatile overlay until bd_flush() or a
 * BD_IO_FUA write makes them durable in @lower, so that bd_fault_crash()
 * can drop (or tear) exactly what a real disk could lose. *@fault controls
 * the injection (below); it is freed with the device.
 */
int bd_fault_open(struct bd_dev *lower, struct bd_dev **out,
		  struct bd_fault **fault);

/*
 * Another client of the storage under @first (a peer): a wrapper over the
 * same @lower with its own volatile overlay, as a second connection to an
 * NBD export without multi-conn. A flush through one member makes only
 * its own writes durable, and reads see @lower plus the member's own
 * unflushed writes; every member then reports bd_flush_covers_all() == 0.
 * The members share one power supply: writes are counted, and crash and
 * tear points armed, over the whole group (bd_fault_writes, *_nth through
 * any member), and a crash through any member loses the unflushed writes
 * of all (bd_fault_crash_nth_garble's seed decides each member's). @lower
 * is closed with the last member. Up to 8 members. 0, -ENOSPC, -EIO (the
 * group crashed), -ENOMEM.
 */
int bd_fault_open_peer(struct bd_fault *first, struct bd_dev **out,
		       struct bd_fault **fault);
/* A flush through @f makes every member's completed writes durable (in
 * the order they were issued), and bd_flush_covers_all() reports 1 for
 * it: one node on the storage's own cache (an image file on the host
 * beside NBD clients without multi-conn), the others still split. Call
 * it before a user asks. */
void bd_fault_set_flush_all(struct bd_fault *f);
/* What bd_flush_covers_all() reports for @f's device from now on (call it
 * before a user asks): a test lets a split group claim 1 to show that its
 * checks catch the user trusting a flush it must not trust. */
void bd_fault_set_flush_local(struct bd_fault *f, int local);

/* Fail the @n-th I/O of @op counted from now (1 = the next), with -EIO;
 * a failed write changes nothing. @persistent: also fail every later one.
 * Each I/O of a batch counts. n = 0 disarms. */
void bd_fault_fail_nth(struct bd_fault *f, enum bd_op op, uint64_t n,
		       int persistent);
/* Tear the @n-th write from now: power fails while it is written. The
 * device crashes as bd_fault_crash(f, 0) (unflushed writes are dropped)
 * and only the write's first @keep bytes (rounded down to 512) reach
 * @lower; the write returns -EIO. n = 0 disarms. */
void bd_fault_tear_nth(struct bd_fault *f, uint64_t n, size_t keep);
/* With @hold, every asynchronous batch (bd_submit_async) does its I/O
 * (a read gets the content of that moment) and then waits, its
 * completion not called, until hold is turned off (also at close). */
void bd_fault_hold_async(struct bd_fault *f, int hold);
/* Wait until at least @n batches are held. */
void bd_fault_wait_held(struct bd_fault *f, unsigned n);
/* Crash as bd_fault_crash(f, 0) when the @n-th write from now is issued
 * (that write is lost and returns -EIO). n = 0 disarms. */
void bd_fault_crash_nth(struct bd_fault *f, uint64_t n);
/* The same, but the unflushed writes before it meet the fate
 * bd_fault_crash(f, @garble_seed) gives them. */
void bd_fault_crash_nth_garble(struct bd_fault *f, uint64_t n,
			       uint64_t garble_seed);
/* Power loss now. Unflushed writes are dropped; with @garble_seed != 0,
 * each unflushed write is instead kept, dropped or filled with garbage,
 * chosen by a PRNG seeded with @garble_seed. After a crash every I/O on
 * the wrapper returns -EIO; @lower holds what survived. */
void bd_fault_crash(struct bd_fault *f, uint64_t garble_seed);
/* Writes issued through the wrapper (its group) so far (to pick crash
 * points). */
uint64_t bd_fault_writes(const struct bd_fault *f);
/* 1 once the wrapper has crashed. */
int bd_fault_crashed(const struct bd_fault *f);

/* Size in bytes (a multiple of BD_ALIGN). */
uint64_t bd_size(const struct bd_dev *dev);
/* The path or a description ("ram", "fault(...)"); owned by dev. */
const char *bd_name(const struct bd_dev *dev);
/* 1 if opened read-only. */
int bd_readonly(const struct bd_dev *dev);

/* Synchronous single I/O. 0 or -errno (-EINVAL misaligned or past the end,
 * -EROFS, -EIO). */
int bd_read(struct bd_dev *dev, void *buf, size_t len, uint64_t off);
int bd_write(struct bd_dev *dev, const void *buf, size_t len, uint64_t off,
	     unsigned io_flags);

/* Submit @n I/Os at once (libaio on the file backend) and wait for all.
 * Sets each ios[i].ret; returns 0 if all succeeded, else the first -errno. */
int bd_submit(struct bd_dev *dev, struct bd_io *ios, unsigned n);

/* Submit @n I/Os and return at once; @done runs once when all completed.
 * @ios must stay valid until then. 0, or -errno if nothing was submitted
 * (then @done is not called). */
int bd_submit_async(struct bd_dev *dev, struct bd_io *ios, unsigned n,
		    bd_done_fn done, void *arg);

/*
 * Write gate (cluster fencing, fusefs/cluster/fs_hb.c): @fn is called before
 * every write is started (bd_write, and each write of a batch); a
 * non-zero -errno refuses the write with that error (a batch: that I/O,
 * the others -ECANCELED, nothing done). NULL removes the gate. @fn runs
 * on the writer's thread, must not block and must not do I/O on @dev.
 */
typedef int (*bd_gate_fn)(void *arg);
void bd_set_gate(struct bd_dev *dev, bd_gate_fn fn, void *arg);
/* From now on every write fails with -EIO (a fenced cluster node): for
 * good, whatever the gate says. Any thread. */
void bd_fence(struct bd_dev *dev);
int bd_fenced(const struct bd_dev *dev);

/* Make every completed write durable (fdatasync). 0 or -errno. */
int bd_flush(struct bd_dev *dev);
/* 1 if a flush through this device also makes the writes other clients
 * of the same storage completed before it durable: one file's page cache,
 * one disk's write cache, an NBD server that advertises multi-conn; 0 for
 * an NBD export without multi-conn, whose flush may cover only this
 * connection's writes. The journal's checkpoint records rely on it. */
int bd_flush_covers_all(const struct bd_dev *dev);

/* Snapshot of the counters (consistent per field, not across fields). */
void bd_stats_get(struct bd_dev *dev, struct bd_stats *out);

/* Wait for outstanding async I/O, release everything. NULL is a no-op. */
void bd_close(struct bd_dev *dev);

/* BD_ALIGN-aligned zeroed allocation of @len bytes; free with free().
 * NULL on failure. */
void *bd_buf_alloc(size_t len);

#endif /* UCFS_BD_H */
