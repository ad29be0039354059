/*
 * fs_stats.h — always-on statistics of one mounted ucfs, served as JSON.
 *
 * A struct fs_stats belongs to one mount. It holds:
 *   - per FUSE op counters (count, errors, log2 latency histogram), bumped
 *     by fs_stats_op_begin()/fs_stats_op_end() around every request. The
 *     hot path takes no lock: counters are sharded per thread and updated
 *     with relaxed atomics; a reader sums the shards.
 *   - node identity and mount options (fs_stats_set_node/_set_mount).
 *   - sections: other modules (block device, journal, cache, allocator,
 *     locks, readahead, network) register a callback that fills one JSON
 *     object of the document through the small builder API below
 *     (struct fs_json). Nobody outside the stats code sees jansson.
 *   - an optional trace writer (fs_trace_*): JSON lines of lock events and,
 *     if asked, FUSE ops. Off means a NULL pointer: one predictable branch.
 *   - a server thread on a unix socket (root only) that answers every
 *     connection with one JSON document and closes it.
 *
 * The document's schema is in fusefs/STATS.md; key names are stable.
 *
 * Threads: everything here may be called from any thread unless a comment
 * says otherwise. Section callbacks run on the server thread (or the
 * thread calling fs_stats_render), one at a time, never concurrently with
 * fs_stats_remove_section() of the same section.
 */
#ifndef UCFS_FS_STATS_H
#define UCFS_FS_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Every FUSE low-level op (names as in struct fuse_lowlevel_ops). */
/* clang-format off */
#define FS_OPS(X)                                                           \
	X(LOOKUP, "lookup") X(FORGET, "forget") X(GETATTR, "getattr")        \
	X(SETATTR, "setattr") X(READLINK, "readlink") X(MKNOD, "mknod")      \
	X(MKDIR, "mkdir") X(UNLINK, "unlink") X(RMDIR, "rmdir")              \
	X(SYMLINK, "symlink") X(RENAME, "rename") X(LINK, "link")            \
	X(OPEN, "open") X(READ, "read") X(WRITE, "write")                    \
	X(FLUSH, "flush") X(RELEASE, "release") X(FSYNC, "fsync")            \
	X(OPENDIR, "opendir") X(READDIR, "readdir")                          \
	X(READDIRPLUS, "readdirplus") X(RELEASEDIR, "releasedir")            \
	X(FSYNCDIR, "fsyncdir") X(STATFS, "statfs")                          \
	X(SETXATTR, "setxattr") X(GETXATTR, "getxattr")                      \
	X(LISTXATTR, "listxattr") X(REMOVEXATTR, "removexattr")              \
	X(ACCESS, "access") X(CREATE, "create") X(GETLK, "getlk")            \
	X(SETLK, "setlk") X(BMAP, "bmap") X(IOCTL, "ioctl") X(POLL, "poll")  \
	X(WRITE_BUF, "write_buf") X(FORGET_MULTI, "forget_multi")            \
	X(FLOCK, "flock") X(FALLOCATE, "fallocate")                          \
	X(COPY_FILE_RANGE, "copy_file_range") X(LSEEK, "lseek")              \
	X(INIT, "init") X(DESTROY, "destroy")
/* clang-format on */

#define FS_OP_ENUM_(id, name) FS_OP_##id,
enum fs_op { FS_OPS(FS_OP_ENUM_) FS_OP__COUNT };
#undef FS_OP_ENUM_

/* "lookup", ...; "?" for an out-of-range value. */
const char *fs_op_name(enum fs_op op);

/* Latency histograms: bucket i counts events that took [2^i, 2^(i+1)) ns;
 * bucket 0 also takes 0 ns, the last bucket takes everything longer. */
#define FS_HIST_BUCKETS 40

struct fs_stats;
struct fs_json;	 /* an object or array being built (see below) */
struct fs_trace; /* a trace file (see below) */

/* Create the stats of one mount (no server yet). 0 or -ENOMEM. */
int fs_stats_new(struct fs_stats **out);
/* Stop the server if running, free everything. Sections must be removed
 * or their owners still alive (their callbacks are not called from here).
 * The trace, if attached, is not closed (its owner closes it). NULL ok. */
void fs_stats_free(struct fs_stats *st);

/* Identity shown under "node": node id, journal slot (-1 if unknown). */
void fs_stats_set_node(struct fs_stats *st, int node_id, int slot);
/* Device, mountpoint and the mount option string ("a,b=c,..."); copied.
 * 0 or -ENOMEM. */
int fs_stats_set_mount(struct fs_stats *st, const char *device,
		       const char *mountpoint, const char *options);

/* ---- FUSE op accounting (hot path) ---- */

/* Monotonic time in ns; what fs_stats_op_end() expects as t0. */
static inline uint64_t fs_stats_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t fs_stats_op_begin(void)
{
	return fs_stats_now();
}

/* Count one finished op: @err is 0 or -errno (a negative value counts as
 * an error; -ENOENT of lookup counts too, under "errors" — see STATS.md).
 * Lock-free; never blocks; also writes a trace line if op tracing is on.
 * @st NULL is a no-op. */
void fs_stats_op_end(struct fs_stats *st, enum fs_op op, uint64_t t0, int err);

/* Totals of one op summed over shards (for tests and for tools). */
struct fs_op_counts {
	uint64_t count;
	uint64_t errors;
	uint64_t total_ns;
	uint64_t max_ns;
	uint64_t hist[FS_HIST_BUCKETS];
};
void fs_stats_op_get(struct fs_stats *st, enum fs_op op,
		     struct fs_op_counts *out);

/* Generic histogram helper others may use for their own latencies. */
unsigned fs_hist_bucket(uint64_t ns);

/* ---- sections ---- */

/* Fill @obj (an empty JSON object) with this section's keys. Runs on the
 * stats server thread; must not block for long (take your own lock, copy
 * counters, return). */
typedef void (*fs_stats_section_fn)(struct fs_json *obj, void *arg);

/* Register section @name (a top-level key such as "blockdev", "journal",
 * "cache", "locks", "alloc", "readahead", "net"); @name is copied.
 * 0, -EEXIST (name taken or reserved: "version", "node", "time", "fuse"),
 * -EINVAL, -ENOMEM. */
int fs_stats_add_section(struct fs_stats *st, const char *name,
			 fs_stats_section_fn fn, void *arg);
/* Unregister; when it returns the callback is not running and will not
 * run again. 0 or -ENOENT. */
int fs_stats_remove_section(struct fs_stats *st, const char *name);

/* ---- ready-made providers (fs_stats_bd.c, ...) ---- */

struct bd_dev;
struct bd_stats;
/* Section "blockdev" from bd_stats_get(@dev). @dev must outlive the
 * section: remove it ("blockdev") before bd_close. As add_section. */
int fs_stats_add_blockdev(struct fs_stats *st, struct bd_dev *dev);
/* The body of that section from a snapshot (for tests and tools). */
void fs_stats_bd_render(struct fs_json *o, const struct bd_stats *s);

struct fs;
/* Sections "blockdev", "journal", "cache" and "alloc" of a mount
 * (fs_stats_core.c; struct fs from fs.h). Remove them (fs_stats_remove_fs)
 * before unmounting. 0 or as add_section (nothing added on failure). */
int fs_stats_add_fs(struct fs_stats *st, struct fs *fs);
void fs_stats_remove_fs(struct fs_stats *st);

struct lk_ls;
struct lk_stats;
struct fs_stats_lk;
/* Name of a lock type number (the filesystem's "inode", "rgrp", ...);
 * NULL: printed as "type<N>". */
typedef const char *(*fs_lk_type_name_fn)(unsigned type);
/* Sections "locks" and "net" from lk_ls_stats(@ls) (fs_stats_lk.c).
 * @type_name may be NULL. *@out is the handle to remove them with,
 * before lk_ls_close. 0, -ENOMEM or as add_section. */
int fs_stats_add_locks(struct fs_stats *st, struct lk_ls *ls,
		       fs_lk_type_name_fn type_name, struct fs_stats_lk **out);
void fs_stats_remove_locks(struct fs_stats *st, struct fs_stats_lk *l);
struct lk_name;
/* Contention tracker behind "locks.top": the lock user (glock layer)
 * calls this when a request on @name in @mode was not granted at once
 * (lk_lock returned 0) and took @wait_ns to complete. Takes
 * a mutex; meant for the slow path only. @l NULL is a no-op. */
void fs_stats_lk_note_wait(struct fs_stats_lk *l, const struct lk_name *name,
			   int mode, uint64_t wait_ns);
/* The bodies of those sections from a snapshot (tests, tools). */
void fs_stats_lk_render(struct fs_json *o, const struct lk_stats *s,
			fs_lk_type_name_fn type_name);
void fs_stats_net_render(struct fs_json *o, const struct lk_stats *s);
/* OCFS2 locking_state's per-mode keys of DLM mode @mode (FS_LK_*) into
 * @o: num_<m>mode, total_<m>mode, max_<m>mode and, when @failed is not
 * NULL, num_<m>mode_failed (m: "pr", "ex", ...). The "locks" and
 * "glocks" sections both use it. */
void fs_stats_lk_mode_keys(struct fs_json *o, int mode, uint64_t num,
			   uint64_t total_ns, uint64_t max_ns,
			   const uint64_t *failed);

/* ---- the JSON builder handed to section callbacks ----
 * Keys are copied. In an array, @key is ignored (pass NULL) and values are
 * appended. On allocation failure a value is silently dropped and the
 * document gets "incomplete": true; nothing crashes. */
void fs_json_u64(struct fs_json *o, const char *key, uint64_t v);
void fs_json_i64(struct fs_json *o, const char *key, int64_t v);
void fs_json_dbl(struct fs_json *o, const char *key, double v);
void fs_json_str(struct fs_json *o, const char *key, const char *s);
void fs_json_bool(struct fs_json *o, const char *key, int v);
/* A nested object / array under @key; NULL on failure (the fs_json_*
 * functions accept NULL and do nothing, so callers need not check). */
struct fs_json *fs_json_obj(struct fs_json *o, const char *key);
struct fs_json *fs_json_arr(struct fs_json *o, const char *key);
/* A latency object: count, total_ns, mean_ns, p50_ns, p99_ns, max_ns and
 * "hist" (sparse [[bucket_low_ns, count], ...]). @hist has @n log2
 * buckets, bucket i covering [2^i, 2^(i+1)) * @unit_ns: 1 for fs_hist,
 * 1000 for bd_stats (microsecond buckets). */
void fs_json_latency(struct fs_json *o, const char *key, uint64_t count,
		     uint64_t total_ns, uint64_t max_ns, const uint64_t *hist,
		     unsigned n, uint64_t unit_ns);

/* ---- rendering and the server ---- */

/* The whole document as a NUL-terminated JSON string (malloc'ed; free()).
 * @pretty: indented. 0 or -ENOMEM. */
int fs_stats_render(struct fs_stats *st, int pretty, char **out);

/* The default socket path of a mountpoint: /run/ucfs/<escaped>.sock where
 * <escaped> is the absolute path with the leading '/' dropped, '/' -> '-'
 * and every byte outside [A-Za-z0-9_.] as "%XX" (a root mount is "-");
 * too long a name is cut and ends with a hash. 0, -EINVAL (relative
 * path), -ENAMETOOLONG (@len too small). */
#define FS_STATS_RUNDIR "/run/ucfs"
int fs_stats_sock_path(const char *mountpoint, char *buf, size_t len);

/* Start the server thread on @path (NULL: derived from the mountpoint set
 * with fs_stats_set_mount). Creates the parent directory 0700 if missing,
 * replaces a stale socket, makes the socket 0600, and refuses (closes
 * without answering) any peer whose uid is not 0 or our own euid.
 * 0, -EALREADY, -EINVAL (no path), -EADDRINUSE (a live server answers
 * there), -EEXIST (something that is not a socket is there),
 * -ENAMETOOLONG, or -errno from socket/bind/listen/pthread_create. */
int fs_stats_serve(struct fs_stats *st, const char *path);
/* Stop the server thread, unlink the socket. No-op if not serving. */
void fs_stats_stop(struct fs_stats *st);
/* The path being served, or NULL. */
const char *fs_stats_sock(const struct fs_stats *st);

/* Client side (tools): the socket of @target, which is either a socket
 * file itself (as given with -o stats=PATH) or a mountpoint (made
 * absolute and canonical with realpath, then fs_stats_sock_path).
 * 0, -ENOENT, -EINVAL, -ENAMETOOLONG. */
int fs_stats_resolve(const char *target, char *buf, size_t len);

/* Client side (tools): connect to @path, read the whole document into a
 * malloc'ed NUL-terminated string. 0, -ECONNREFUSED/-ENOENT/-EACCES (from
 * connect), -EPROTO (empty answer: refused), -ETIMEDOUT, -ENOMEM. */
int fs_stats_fetch(const char *path, int timeout_ms, char **out);

/* ---- tracing ---- */

/* DLM modes as the trace and the lock sections print them. */
enum fs_lk_mode {
	FS_LK_IV = -1, /* none / invalid */
	FS_LK_NL = 0,
	FS_LK_CR,
	FS_LK_CW,
	FS_LK_PR,
	FS_LK_PW,
	FS_LK_EX,
};
const char *fs_lk_mode_name(int mode); /* "NL".."EX", "IV" otherwise */

enum fs_trace_ev {
	FS_TR_REQUEST,	 /* a local holder asked for a mode */
	FS_TR_GRANT,	 /* granted (wait_ns = request -> grant) */
	FS_TR_BAST_SENT, /* we sent a blocking callback to @peer */
	FS_TR_BAST_RECV, /* we received one (someone wants @mode) */
	FS_TR_DEMOTE,	 /* we demoted from @from to @mode */
	FS_TR_RELEASE,	 /* released (unlocked / dropped from cache) */
	FS_TR__COUNT
};

/* What a demote (or a release) wrote back before the lock left, and what
 * it told the kernel to drop (the lock type's ops fill it while they run:
 * fs_glock_report in fs_glock.h). */
#define FS_TRACE_K_ATTRS 1u /* attributes */
#define FS_TRACE_K_PAGES 2u /* the file's pages (a directory: its listing) */
#define FS_TRACE_K_NAMES 4u /* every name (the dentry epoch) */
struct fs_trace_wb {
	uint64_t log_blocks;  /* blocks its commit wrote to the journal */
	uint64_t home_blocks; /* blocks its checkpoint wrote in place */
	uint64_t data_bytes;  /* file data in flight it waited for */
	uint32_t flushes;     /* device flushes while it synced */
	uint32_t kinval;      /* FS_TRACE_K_* */
};

/* One lock event. @res is the printable resource name ("inode:1234");
 * @type its type ("inode", "iopen", "rgrp", ...). -1 / 0 for unknown
 * numbers. */
struct fs_trace_lock {
	enum fs_trace_ev ev;
	const char *type;
	const char *res;
	int mode;	  /* requested / granted / new mode */
	int from;	  /* previous mode (FS_LK_IV if none) */
	int peer;	  /* other node involved, -1 if unknown (left out) */
	int remote;	  /* grant needed the network (1) or was local (0) */
	uint64_t wait_ns; /* grant: time waited; release: time held;
			     demote: time it took */
	const struct fs_trace_wb *wb; /* demote, release: or NULL */
};

/* Open (truncate) @path for writing a trace. @node is written on every
 * line. @ops: also trace every FUSE op. 0 or -errno from open. */
#define FS_TRACE_OPS 1u
int fs_trace_open(const char *path, int node, unsigned flags,
		  struct fs_trace **out);
/* Flush and close. NULL ok. Detach it from the stats first. */
void fs_trace_close(struct fs_trace *tr);
/* Write buffered lines out (the stats server does it every second). */
void fs_trace_flush(struct fs_trace *tr);
/* Lines dropped because of write errors (a full disk never blocks ops). */
uint64_t fs_trace_dropped(const struct fs_trace *tr);

/* Write one lock event. Callers guard it so that tracing off costs one
 * well-predicted branch and the event is not even built:
 *	if (FS_TRACE_ON(tr)) { struct fs_trace_lock ev = {...};
 *			       fs_trace_lock(tr, &ev); }
 * fs_trace_lock itself accepts tr == NULL. */
void fs_trace_lock(struct fs_trace *tr, const struct fs_trace_lock *ev);
#define FS_TRACE_ON(tr) __builtin_expect((tr) != NULL, 0)

/* Attach a trace to the stats so op tracing (FS_TRACE_OPS) and the
 * periodic flush happen; NULL detaches. Close a detached trace only when
 * no op can be in fs_stats_op_end (after the FUSE loop ended) and the
 * lock code no longer holds its pointer. */
void fs_stats_set_trace(struct fs_stats *st, struct fs_trace *tr);
struct fs_trace *fs_stats_trace(const struct fs_stats *st);

/* ---- for the daemon (fs_stats_mount.c) ----
 * Typical use in main():
 *	fs_stats_opts_take(optstr, &so, err, sizeof(err));  before parsing
 *	fs_stats_new(&st); fs_stats_set_mount(st, dev, mnt, optstr_as_given);
 *	fs_stats_set_node(st, node, slot);                 after the mount
 *	fs_stats_add_blockdev(st, bd);
 *	fs_stats_mount_start(st, &so, node, err, sizeof(err));
 *	... fs_stats_op_begin/end in every FUSE handler ...
 *	fs_stats_mount_stop(st); remove sections; fs_stats_free(st);
 */
struct fs_stats_opts {
	char *sock;	      /* stats=PATH, NULL: derived */
	char *trace;	      /* trace=FILE, NULL: no trace */
	unsigned trace_flags; /* trace_ops -> FS_TRACE_OPS */
	int nostats;	      /* nostats: no socket */
};
void fs_stats_opts_init(struct fs_stats_opts *so);
void fs_stats_opts_free(struct fs_stats_opts *so);
/* Take stats=, nostats, trace=, trace_ops out of the comma-separated
 * @opts (edited in place; other options keep their order) into @so.
 * 0, -EINVAL (empty value; message in @err), -ENOMEM. */
int fs_stats_opts_take(char *opts, struct fs_stats_opts *so, char *err,
		       size_t errlen);
/* Open the trace (if any) and start the server (unless nostats); set the
 * mountpoint first when no stats=PATH was given. On failure nothing is
 * left running and @err says why. 0 or -errno. */
int fs_stats_mount_start(struct fs_stats *st, const struct fs_stats_opts *so,
			 int node_id, char *err, size_t errlen);
/* Stop the server, detach and close the trace. NULL ok. */
void fs_stats_mount_stop(struct fs_stats *st);

#endif /* UCFS_FS_STATS_H */
