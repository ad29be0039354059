/*
 * fs_pt.h — the pass-through backend ("-o passthrough", fusefs/MOUNT.md):
 * a FUSE view of an existing directory on any filesystem, every request
 * forwarded to it, with the same instrumentation as ucfs itself.
 *
 * The FUSE adapter (fs_fuse.c) owns the session, the transport and the
 * stats; this backend supplies the fuse_lowlevel_ops table and its
 * userdata (struct fs_pt), and the "passthrough" stats section.
 */
#ifndef UCFS_FS_PT_H
#define UCFS_FS_PT_H

#include <stddef.h>

struct fs_opts;
struct fs_pt;
struct fs_stats;
struct fuse_lowlevel_ops;

/*
 * Open @dir (the lower directory) for a pass-through mount with the
 * options in @o (writeback_cache, ro). Checks that @dir exists, is a
 * directory and can be read and searched, that this process may open
 * file handles (CAP_DAC_READ_SEARCH), and raises the descriptor limit.
 * On failure writes a one-line reason into @err. 0, -ENOENT, -ENOTDIR,
 * -EACCES, -EPERM, -ENOMEM.
 */
int fs_pt_open(const char *dir, const struct fs_opts *o, struct fs_pt **out,
	       char *err, size_t errlen);

/* Free everything (the session must be gone). NULL is a no-op. */
void fs_pt_close(struct fs_pt *pt);

/* The request handlers; their userdata is the struct fs_pt. */
const struct fuse_lowlevel_ops *fs_pt_ops(size_t *size);

/* Count the ops in @st (NULL: stop counting) and serve the "passthrough"
 * section there. Call before the session loop starts; remove with
 * fs_pt_stats_remove before freeing @st. 0 or as fs_stats_add_section. */
int fs_pt_stats_add(struct fs_pt *pt, struct fs_stats *st);
void fs_pt_stats_remove(struct fs_pt *pt, struct fs_stats *st);

#endif /* UCFS_FS_PT_H */
