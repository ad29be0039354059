/*
 * fs_kinval.c — what a lost cluster lock covered, told to the kernel
 * cache sink (fs.h "kernel cache sink"; the FUSE side is fs_inval.c).
 *
 * A node that loses a lock (a demote to NL: another node is about to
 * change what it covers) must make sure that nothing the kernel cached
 * under it is served afterwards: the kernel answers stat, path walks,
 * read(2) and mapped pages from its caches without asking ucfs. The
 * glocks' drop op calls fs_kinval_inode/dir/all before the lock leaves
 * this node (fs_cluster.c: the v1 fs glock loses everything at once); each
 * hands the sink what to drop and waits for the part that never waits
 * on a request in flight (attributes, every name: ops->sync; a
 * directory's own names: ops->dir, which waits a bounded time). Pages
 * follow from the sink's own thread: a page locked by a READ that waits
 * for this very lock could not be dropped before the lock is given up
 * (research/fuse-coherence.md 1.1); the kernel still drops them for a
 * read(2) at once, since the attributes it refetches show the new mtime
 * or size (fs_fuse.c keeps FUSE_AUTO_INVAL_DATA on cluster mounts).
 *
 * Shared writable mappings: the kernel dirties their pages without a
 * request, so a node holds an inode's lock in EX for every read while
 * the inode is open for reading and writing there (fs_fuse.c: the READ
 * that fills a page may be a mapping's fault), and the inode glock's
 * flush op (fs_kinval_flush) has the kernel write those pages back and
 * drop them before the lock leaves EX, while the WRITEs that causes
 * still get the lock (fs_glock.h ops->flush), as GFS2's inode_go_sync.
 *
 * What fs_kinval_all names: every name at once (ops->all: the kernel's
 * dentry epoch, so no name needs tracking) and with it the attributes
 * of what may be used without a lookup (the sink tracks directories
 * from its replies); the open files from the namespace layer's
 * reference table (fs_ns.h), whose attributes an fstat reads and whose
 * pages a mapping or a reader may hold. A regular file that is not open
 * is reached only by a path walk, whose lookup refreshes its attributes
 * (and, with a new mtime or size, drops its pages). With ~15,600 inodes
 * referenced, naming every one cost a lock 60-440 ms per demote here.
 *
 * Locking: sink_mu protects every fs_ns's sink pointer and the sinks'
 * user counts; it is taken with nothing else held except the caller's
 * glock state (a leaf), and never held across a sink op. ns->tbl_lock is
 * held only to copy the table, never across a sink op.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "fusefs/fs.h"
#include "fusefs/namespace/fs_ns.h"

struct fs_sink {
	const struct fs_inval_ops *ops; /* immutable */
	void *arg;			/* immutable */
	unsigned users;			/* sink_mu: fs_kinval_* calls inside */
};

static pthread_mutex_t sink_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sink_cv = PTHREAD_COND_INITIALIZER; /* users 0 */

void fs_set_inval(struct fs *fs, const struct fs_inval_ops *ops, void *arg)
{
	struct fs_sink *s = NULL, *old;

	if (ops != NULL) {
		s = calloc(1, sizeof(*s));
		if (s == NULL)
			return; /* no sink: the kernel is told nothing */
		s->ops = ops;
		s->arg = arg;
	}
	pthread_mutex_lock(&sink_mu);
	old = fs->ns->sink;
	fs->ns->sink = s;
	while (old != NULL && old->users > 0)
		pthread_cond_wait(&sink_cv, &sink_mu);
	pthread_mutex_unlock(&sink_mu);
	free(old);
}

static struct fs_sink *sink_get(struct fs *fs)
{
	struct fs_ns *ns = __atomic_load_n(&fs->ns, __ATOMIC_ACQUIRE);
	struct fs_sink *s;

	if (ns == NULL)
		return NULL; /* mounting or unmounting */
	pthread_mutex_lock(&sink_mu);
	s = ns->sink;
	if (s != NULL)
		s->users++;
	pthread_mutex_unlock(&sink_mu);
	return s;
}

static void sink_put(struct fs_sink *s)
{
	pthread_mutex_lock(&sink_mu);
	if (--s->users == 0)
		pthread_cond_broadcast(&sink_cv);
	pthread_mutex_unlock(&sink_mu);
}

/* fs_kinval_defer: this thread's owed sync (a sink with its user). */
static __thread struct {
	int on;
	struct fs_sink *owed;
} defer;

static void defer_flush(void)
{
	if (defer.owed == NULL)
		return;
	defer.owed->ops->sync(defer.owed->arg);
	sink_put(defer.owed);
	defer.owed = NULL;
}

void fs_kinval_defer(int on)
{
	if (!on)
		defer_flush();
	defer.on = on;
}

void fs_kinval_inode(struct fs *fs, uint64_t ino)
{
	struct fs_sink *s = sink_get(fs);

	if (s == NULL)
		return;
	s->ops->inode(s->arg, ino, 0, -1);
	if (defer.on && defer.owed == s) {
		sink_put(s); /* the owed sync covers it */
		return;
	}
	if (defer.on) {
		defer_flush();
		defer.owed = s; /* keeps its user until the sync */
		return;
	}
	s->ops->sync(s->arg);
	sink_put(s);
}

int fs_kinval_forget(struct fs *fs, const uint64_t *inos, size_t n)
{
	struct fs_sink *s = sink_get(fs);
	int ret = -EOPNOTSUPP;

	if (s == NULL)
		return ret;
	if (s->ops->forget != NULL)
		ret = s->ops->forget(s->arg, inos, n);
	sink_put(s);
	return ret;
}

int fs_kinval_flush(struct fs *fs, uint64_t ino, void (*done)(void *),
		    void *done_arg)
{
	struct fs_sink *s = sink_get(fs);
	int ret = 0;

	if (s == NULL)
		return 0;
	if (s->ops->flush != NULL)
		ret = s->ops->flush(s->arg, ino, done, done_arg);
	sink_put(s);
	return ret;
}

void fs_kinval_dir(struct fs *fs, uint64_t dir, int (*busy)(void *),
		   void *busy_arg)
{
	struct fs_sink *s = sink_get(fs);

	if (s == NULL)
		return;
	s->ops->inode(s->arg, dir, 0, -1); /* its readdir cache too */
	if (s->ops->dir != NULL)
		s->ops->dir(s->arg, dir, busy, busy_arg); /* its names only */
	else
		s->ops->names(s->arg);
	s->ops->sync(s->arg);
	sink_put(s);
}

/* The inodes open now (their pages may be in use, their attributes read
 * by fstat): *out (malloc'd), *n. -ENOMEM. */
static int open_inodes(struct fs_ns *ns, uint64_t **out, size_t *n)
{
	struct fs_inode *r;
	size_t cap, k = 0;
	uint64_t *v;

	pthread_mutex_lock(&ns->tbl_lock);
	cap = ns->count;
	v = malloc((cap > 0 ? cap : 1) * sizeof(*v));
	for (size_t i = 0; v != NULL && i < ns->nbuckets; i++)
		for (r = ns->hash[i]; r != NULL && k < cap; r = r->hnext)
			if (r->nopen > 0)
				v[k++] = r->ino;
	pthread_mutex_unlock(&ns->tbl_lock);
	if (v == NULL)
		return -ENOMEM;
	*out = v;
	*n = k;
	return 0;
}

void fs_kinval_all(struct fs *fs)
{
	struct fs_sink *s = sink_get(fs);
	uint64_t *v = NULL;
	size_t n = 0;

	if (s == NULL)
		return;
	/* names, and what may be used without one (working directories) */
	s->ops->all(s->arg);
	s->ops->inode(s->arg, fs->ns->root, 0, 0);
	/* No ops->forget (prune) of the unused inodes: the FORGETs it makes
	 * the kernel send take the fs glock (fs_forget), so they would pull
	 * the lock back from the node that now writes, right after it left
	 * (two nodes untarring at once were slower with it). */
	if (open_inodes(fs->ns, &v, &n) == 0)
		for (size_t i = 0; i < n; i++)
			s->ops->inode(s->arg, v[i], 0, -1);
	s->ops->sync(s->arg);
	sink_put(s);
	free(v);
}
