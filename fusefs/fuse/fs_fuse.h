/*
 * fs_fuse.h — the FUSE low-level adapter: serves a mounted struct fs at a
 * mountpoint. Used by the `ucfs` daemon (fusefs/main.c).
 */
#ifndef UCFS_FS_FUSE_H
#define UCFS_FS_FUSE_H

#include <stddef.h>

struct fs;
struct fs_opts;
struct fs_fuse;
struct fs_pt;
struct fs_stats_opts;

/*
 * Create the FUSE session for @fs and mount it on @mountpoint (the kernel
 * mount happens here). @device is shown as the fsname. Options: o->fuse
 * plus default_permissions (not for a pass-through mount without
 * allow_other: fs_pt.h), subtype=ucfs and what o asks for (ro,
 * noatime, allow_other, debug). Also starts the stats socket and trace
 * as @so says (fs_stats.h; @optstr = the options as given, shown in the
 * stats). On failure writes a reason into @err. 0, -EINVAL (libfuse
 * refused an option), -EIO (mount failed), -ENOMEM, or the stats
 * server's -errno (stats=PATH in use...).
 */
int fs_fuse_new(struct fs *fs, const struct fs_opts *o,
		const struct fs_stats_opts *so, const char *optstr,
		const char *device, const char *mountpoint,
		struct fs_fuse **out, char *err, size_t errlen);

/*
 * The same for a pass-through mount (-o passthrough, fs_pt.h): serves
 * @pt, a view of the lower directory @dir (shown as the fsname), with
 * fs_pt.c's handlers instead of ucfs's. As fs_fuse_new.
 */
int fs_fuse_new_pt(struct fs_pt *pt, const struct fs_opts *o,
		   const struct fs_stats_opts *so, const char *optstr,
		   const char *dir, const char *mountpoint,
		   struct fs_fuse **out, char *err, size_t errlen);

/* This worker thread's reply buffer of at least @size bytes, 4 KiB
 * aligned (kept between requests); NULL if out of memory. */
char *fs_fuse_rbuf(size_t size);

/* Serve requests until unmounted or signalled (SIGINT/SIGTERM/SIGHUP).
 * @single_thread: one thread (debugging). 0 or -errno. */
int fs_fuse_loop(struct fs_fuse *ff, int single_thread);

/* Unmount (if still mounted) and free the session; the caller then
 * unmounts the fs. NULL is a no-op. */
void fs_fuse_free(struct fs_fuse *ff);

#endif /* UCFS_FS_FUSE_H */
