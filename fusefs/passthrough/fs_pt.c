/*
 * fs_pt.c — the pass-through backend's life cycle and its stats section.
 *
 * fs_pt_open() checks the lower directory and the privileges the scheme
 * needs (fs_pt_internal.h) before anything is mounted, so bad input gets
 * a one-line reason. The "passthrough" section (fusefs/STATS.md) splits
 * each op's handler time into the time inside the lower filesystem's
 * system calls (lower_ns), the time turning handles into descriptors
 * (resolve_ns), the time sending the reply (reply_ns: libfuse and the
 * write to /dev/fuse, FUSE transit) and the rest, the lens's own work
 * (lens_ns).
 */
#include "fusefs/passthrough/fs_pt_internal.h"

#include "fusefs/fs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/vfs.h>
#include <unistd.h>

/* The lower directory as the caller named it: exists, is a directory,
 * can be read. Returns an O_RDONLY fd of it or -errno (@err set). */
static int open_dir(const char *dir, char *err, size_t errlen)
{
	struct stat st;
	int fd;

	if (stat(dir, &st) != 0) {
		fd = -errno;
		snprintf(err, errlen, "ucfs: passthrough: '%s': %s", dir,
			 strerror(errno));
		return fd;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen,
			 "ucfs: passthrough: '%s' is not a directory", dir);
		return -ENOTDIR;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		fd = -errno;
		snprintf(err, errlen, "ucfs: passthrough: cannot read '%s': %s",
			 dir, strerror(errno));
	}
	return fd;
}

/*
 * Open the root's handle back: proves CAP_DAC_READ_SEARCH. A lower
 * filesystem without handles is fine (its inodes are pinned); a refusal
 * for lack of privilege is not.
 */
static int check_handles(int fd, int *mnt_id, char *err, size_t errlen)
{
	struct {
		struct file_handle fh;
		unsigned char bytes[PT_HANDLE_MAX];
	} h;
	int back;

	h.fh.handle_bytes = PT_HANDLE_MAX;
	*mnt_id = -1;
	if (name_to_handle_at(fd, "", &h.fh, mnt_id, AT_EMPTY_PATH) != 0)
		return 0;
	back = open_by_handle_at(fd, &h.fh, O_PATH | O_CLOEXEC);
	if (back >= 0) {
		close(back);
		return 0;
	}
	if (errno == EPERM) {
		snprintf(err, errlen,
			 "ucfs: passthrough needs CAP_DAC_READ_SEARCH (run "
			 "as root) to open file handles");
		return -EPERM;
	}
	*mnt_id = -1; /* handles that do not open: pin everything */
	return 0;
}

/* Room for the cached and open descriptors: the hard limit. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int fs_pt_open(const char *dir, const struct fs_opts *o, struct fs_pt **out,
	       char *err, size_t errlen)
{
	struct statfs sfs;
	struct fs_pt *pt;
	int fd, root, mnt_id, ret;

	fd = open_dir(dir, err, errlen);
	if (fd < 0)
		return fd;
	if (geteuid() != 0) {
		snprintf(err, errlen,
			 "ucfs: passthrough must run as root "
			 "(it acts as each caller and opens file handles)");
		ret = -EPERM;
		goto out_fd;
	}
	ret = check_handles(fd, &mnt_id, err, errlen);
	if (ret < 0)
		goto out_fd;
	ret = -ENOMEM;
	pt = calloc(1, sizeof(*pt));
	if (pt == NULL)
		goto out_fd;
	if (realpath(dir, pt->dir) == NULL)
		snprintf(pt->dir, sizeof(pt->dir), "%s", dir);
	pt->timeout = 1.0;
	pt->writeback = o->writeback_cache;
	pt->kernel_perms = o->allow_other;
	root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0) {
		ret = -errno;
		snprintf(err, errlen, "ucfs: passthrough: '%s': %s", dir,
			 strerror(errno));
		goto out_pt;
	}
	ret = pt_table_init(pt, root, err, errlen);
	if (ret < 0) {
		pt_table_free(pt);
		goto out_pt;
	}
	/* the root's mount: mount_index() registers a FUSE one as pinned */
	if (mnt_id >= 0 && fstatfs(fd, &sfs) == 0 &&
	    sfs.f_type != PT_FUSE_MAGIC) {
		pt->mnts[0].id = mnt_id;
		pt->mnts[0].fd = fd;
		pt->nmnts = 1;
		fd = -1;
	}
	raise_nofile();
	*out = pt;
	if (fd >= 0)
		close(fd);
	return 0;

out_pt:
	free(pt);
out_fd:
	close(fd);
	return ret;
}

void fs_pt_close(struct fs_pt *pt)
{
	if (pt == NULL)
		return;
	pt_table_free(pt);
	free(pt);
}

/* ---- the "passthrough" stats section ---- */

static uint64_t ld(_Atomic uint64_t *p)
{
	return atomic_load_explicit(p, memory_order_relaxed);
}

/* One op's split; adds its figures to @tot ([0] lower, [1] resolve,
 * [2] reply, [3] lens, [4] calls). */
static void op_split(struct fs_json *ops, struct fs_pt *pt, enum fs_op op,
		     uint64_t *tot)
{
	struct pt_op_acct *a = &pt->acct[op];
	uint64_t lower, resolve, reply, lens, known;
	struct fs_op_counts c;
	struct fs_json *o;

	fs_stats_op_get(pt->st, op, &c);
	if (c.count == 0)
		return;
	lower = ld(&a->lower_ns);
	resolve = ld(&a->resolve_ns);
	reply = ld(&a->reply_ns);
	/* read apart from the handler total: clamp ops in flight */
	known = lower + resolve + reply;
	lens = c.total_ns > known ? c.total_ns - known : 0;
	o = fs_json_obj(ops, fs_op_name(op));
	fs_json_u64(o, "count", c.count);
	fs_json_u64(o, "lower_calls", ld(&a->calls));
	fs_json_u64(o, "handler_ns", c.total_ns);
	fs_json_u64(o, "lower_ns", lower);
	fs_json_u64(o, "resolve_ns", resolve);
	fs_json_u64(o, "reply_ns", reply);
	fs_json_u64(o, "lens_ns", lens);
	tot[0] += lower;
	tot[1] += resolve;
	tot[2] += reply;
	tot[3] += lens;
	tot[4] += ld(&a->calls);
}

static void pt_section(struct fs_json *o, void *arg)
{
	struct fs_pt *pt = arg;
	struct fs_json *ops;
	uint64_t tot[5] = {0, 0, 0, 0, 0}, inodes;
	unsigned fds;

	pthread_mutex_lock(&pt->tbl_lock);
	inodes = pt->ninodes + 1;
	pthread_mutex_unlock(&pt->tbl_lock);
	pthread_mutex_lock(&pt->fd_lock);
	fds = pt->nfds;
	pthread_mutex_unlock(&pt->fd_lock);
	fs_json_str(o, "dir", pt->dir);
	fs_json_u64(o, "inodes_now", inodes);
	fs_json_u64(o, "fds_cached_now", fds);
	fs_json_u64(o, "max_fds_cached", pt->max_fds);
	fs_json_u64(o, "fd_hits", ld(&pt->fd_hits));
	fs_json_u64(o, "fd_opens", ld(&pt->fd_opens));
	fs_json_u64(o, "fd_evictions", ld(&pt->fd_evictions));
	fs_json_u64(o, "stale", ld(&pt->stale));
	fs_json_u64(o, "pinned", ld(&pt->pinned));
	fs_json_u64(o, "cred_switches", ld(&pt->cred_switches));
	fs_json_u64(o, "group_reads", ld(&pt->group_reads));
	ops = fs_json_obj(o, "ops");
	for (int op = 0; op < FS_OP__COUNT; op++)
		op_split(ops, pt, (enum fs_op)op, tot);
	fs_json_u64(o, "lower_ns", tot[0]);
	fs_json_u64(o, "resolve_ns", tot[1]);
	fs_json_u64(o, "reply_ns", tot[2]);
	fs_json_u64(o, "lens_ns", tot[3]);
	fs_json_u64(o, "lower_calls", tot[4]);
}

int fs_pt_stats_add(struct fs_pt *pt, struct fs_stats *st)
{
	int ret = fs_stats_add_section(st, "passthrough", pt_section, pt);

	if (ret == 0)
		pt->st = st;
	return ret;
}

void fs_pt_stats_remove(struct fs_pt *pt, struct fs_stats *st)
{
	fs_stats_remove_section(st, "passthrough");
	(void)pt;
}
