/*
 * fs_pt_cred.c — pass-through requests run with the caller's identity.
 *
 * Linux keeps credentials per thread: setfsuid(2), setfsgid(2) and the
 * raw setgroups system call change only the calling thread (glibc's
 * setgroups() would change every thread of the process, so it is not
 * used). A worker thread serving a request of uid U switches its fsuid,
 * fsgid and supplementary groups to U's before calling the lower
 * filesystem, which then checks permissions and sets ownership itself
 * exactly as for U. Switching fsuid away from 0 also drops the fs
 * capabilities (CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, ...), so a
 * write by U clears setuid bits in the lower filesystem as U's own write
 * would; switching back to 0 restores them.
 *
 * The umask is per fs_struct, which threads share: each worker unshares
 * it (unshare(CLONE_FS)) once, then sets the caller's umask for requests
 * that create (the kernel sends it with them and leaves its application
 * to the filesystem, so that a default ACL in the lower directory wins
 * over the umask, as it does locally).
 *
 * A thread keeps the identity it last switched to and only changes what
 * differs, so a workload of one user pays for no switch at all. A thread
 * starts with its creator's credentials and shared fs_struct, so its
 * first use sets everything.
 *
 * Supplementary groups are not in the FUSE request: they are read from
 * /proc/PID/task/PID/status (fuse_req_getgroups) and cached per process
 * id for PT_GROUPS_TTL_NS; a process that changes its groups sees the
 * change in the lower filesystem's checks within that time (the kernel's
 * own checks, default_permissions, see it at once).
 *
 * Locking: the thread's state is thread-local; the groups cache is under
 * groups_lock.
 */
#include "fusefs/passthrough/fs_pt_internal.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PT_NGROUPS 256	    /* groups a caller may have (more: cut) */
#define PT_GROUPS_CACHED 32 /* groups a cache slot keeps */
#define PT_GROUPS_SLOTS 256
#define PT_GROUPS_TTL_NS 1000000000ull

struct pt_groups_slot {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	int n;
	uint64_t stamp_ns; /* 0: empty slot */
	gid_t groups[PT_GROUPS_CACHED];
};

static pthread_mutex_t groups_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pt_groups_slot groups_cache[PT_GROUPS_SLOTS]; /* groups_lock */

static _Thread_local struct {
	int ready; /* identity known and fs_struct unshared */
	uid_t uid;
	gid_t gid;
	int ngroups;
	mode_t umask;
	gid_t groups[PT_NGROUPS];
} cur;

/* The caller's supplementary groups into @out (PT_NGROUPS); their number
 * (0 if unknown: the process is gone, or /proc is missing). */
static int caller_groups(struct fs_pt *pt, fuse_req_t req,
			 const struct fuse_ctx *ctx, gid_t *out)
{
	struct pt_groups_slot *s = &groups_cache[ctx->pid % PT_GROUPS_SLOTS];
	uint64_t now = pt_now();
	int n;

	pthread_mutex_lock(&groups_lock);
	if (s->stamp_ns != 0 && s->pid == ctx->pid && s->uid == ctx->uid &&
	    s->gid == ctx->gid && now - s->stamp_ns < PT_GROUPS_TTL_NS) {
		n = s->n;
		memcpy(out, s->groups, (size_t)n * sizeof(gid_t));
		pthread_mutex_unlock(&groups_lock);
		return n;
	}
	pthread_mutex_unlock(&groups_lock);

	atomic_fetch_add_explicit(&pt->group_reads, 1, memory_order_relaxed);
	n = fuse_req_getgroups(req, PT_NGROUPS, out);
	if (n < 0)
		return 0;
	if (n > PT_NGROUPS)
		n = PT_NGROUPS;
	if (n <= PT_GROUPS_CACHED) {
		pthread_mutex_lock(&groups_lock);
		s->pid = ctx->pid;
		s->uid = ctx->uid;
		s->gid = ctx->gid;
		s->n = n;
		s->stamp_ns = now;
		memcpy(s->groups, out, (size_t)n * sizeof(gid_t));
		pthread_mutex_unlock(&groups_lock);
	}
	return n;
}

/* First use on this thread: a private fs_struct, and no assumption about
 * the identity inherited from the creating thread. */
static int thread_ready(void)
{
	if (cur.ready)
		return 0;
	if (unshare(CLONE_FS) != 0)
		return -errno;
	cur.umask = umask(0);
	umask(cur.umask);
	cur.uid = (uid_t)-1;
	cur.gid = (gid_t)-1;
	cur.ngroups = -1;
	cur.ready = 1;
	return 0;
}

static void set_ids(struct fs_pt *pt, uid_t uid, gid_t gid)
{
	if (cur.gid != gid) {
		setfsgid(gid);
		cur.gid = gid;
		atomic_fetch_add_explicit(&pt->cred_switches, 1,
					  memory_order_relaxed);
	}
	if (cur.uid != uid) {
		setfsuid(uid);
		cur.uid = uid;
		atomic_fetch_add_explicit(&pt->cred_switches, 1,
					  memory_order_relaxed);
	}
}

static int set_groups(struct fs_pt *pt, const gid_t *g, int n)
{
	if (cur.ngroups == n &&
	    memcmp(cur.groups, g, (size_t)n * sizeof(gid_t)) == 0)
		return 0;
	if (syscall(SYS_setgroups, (size_t)n, g) != 0)
		return -errno;
	memcpy(cur.groups, g, (size_t)n * sizeof(gid_t));
	cur.ngroups = n;
	atomic_fetch_add_explicit(&pt->cred_switches, 1, memory_order_relaxed);
	return 0;
}

int pt_cred_caller(struct pt_req *r, int create)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(r->req);
	gid_t groups[PT_NGROUPS];
	int n = 0, ret;

	ret = thread_ready();
	if (ret < 0)
		return ret;
	/* root's checks pass on capabilities: its groups do not matter */
	if (ctx->uid != 0 && ctx->pid != 0)
		n = caller_groups(r->pt, r->req, ctx, groups);
	if (ctx->uid != 0 || cur.ngroups < 0) {
		ret = set_groups(r->pt, groups, n);
		if (ret < 0)
			return ret;
	}
	set_ids(r->pt, ctx->uid, ctx->gid);
	if (create && cur.umask != ctx->umask) {
		umask(ctx->umask);
		cur.umask = ctx->umask;
	}
	return 0;
}

int pt_cred_root(struct fs_pt *pt)
{
	int ret = thread_ready();

	if (ret < 0)
		return ret;
	set_ids(pt, 0, 0);
	return 0;
}
