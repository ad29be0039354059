/*
 * fs_pt_inode.c — pass-through inodes: nodeids, file handles, the lower
 * mounts and the bounded cache of O_PATH descriptors (the scheme and the
 * lock order are in fs_pt_internal.h).
 *
 * Sections: hashing and the two tables; the lower mounts; the descriptor
 * cache (a clock over the inodes that have one); lookup and forget.
 */
#include "fusefs/passthrough/fs_pt_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

/* ---- hashing and the tables ---- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++) {
		h ^= c[i];
		h *= 1099511628211ull;
	}
	return h;
}

static uint64_t key_of_handle(int mnt, int type, const void *h, unsigned n)
{
	uint64_t k = 14695981039346656037ull;

	k = fnv(k, &mnt, sizeof(mnt));
	k = fnv(k, &type, sizeof(type));
	return fnv(k, h, n);
}

static uint64_t key_of_ino(dev_t dev, ino_t ino)
{
	uint64_t k = 14695981039346656037ull;

	k = fnv(k, &dev, sizeof(dev));
	return fnv(k, &ino, sizeof(ino));
}

static size_t bucket(const struct fs_pt *pt, uint64_t k)
{
	return (size_t)(k ^ (k >> 29)) & (pt->nbuckets - 1);
}

/* Double both tables past two inodes a bucket; call with tbl_lock. A
 * failed allocation keeps the old size (longer chains, nothing lost). */
static void tables_grow(struct fs_pt *pt)
{
	size_t n = pt->nbuckets * 2, old = pt->nbuckets;
	struct pt_inode **id = calloc(n, sizeof(*id));
	struct pt_inode **key = calloc(n, sizeof(*key));

	if (id == NULL || key == NULL) {
		free(id);
		free(key);
		return;
	}
	pt->nbuckets = n;
	for (size_t b = 0; b < old; b++) {
		struct pt_inode *pi, *next;

		for (pi = pt->by_id[b]; pi != NULL; pi = next) {
			next = pi->by_id;
			pi->by_id = id[bucket(pt, pi->nodeid)];
			id[bucket(pt, pi->nodeid)] = pi;
		}
		for (pi = pt->by_key[b]; pi != NULL; pi = next) {
			next = pi->by_key;
			pi->by_key = key[bucket(pt, pi->key)];
			key[bucket(pt, pi->key)] = pi;
		}
	}
	free(pt->by_id);
	free(pt->by_key);
	pt->by_id = id;
	pt->by_key = key;
}

/* Give @pi a nodeid and enter it in both tables; call with tbl_lock. */
static void table_insert(struct fs_pt *pt, struct pt_inode *pi)
{
	size_t b;

	if (pt->ninodes >= 2 * pt->nbuckets)
		tables_grow(pt);
	pi->nodeid = pt->next_nodeid++;
	b = bucket(pt, pi->nodeid);
	pi->by_id = pt->by_id[b];
	pt->by_id[b] = pi;
	b = bucket(pt, pi->key);
	pi->by_key = pt->by_key[b];
	pt->by_key[b] = pi;
	pt->ninodes++;
}

static void table_remove(struct fs_pt *pt, struct pt_inode *pi)
{
	struct pt_inode **pp;

	for (pp = &pt->by_id[bucket(pt, pi->nodeid)]; *pp != pi;
	     pp = &(*pp)->by_id)
		;
	*pp = pi->by_id;
	for (pp = &pt->by_key[bucket(pt, pi->key)]; *pp != pi;
	     pp = &(*pp)->by_key)
		;
	*pp = pi->by_key;
	pt->ninodes--;
}

/* The inode equal to @want (same handle and mount, or for pinned ones
 * same device and inode number); call with tbl_lock. */
static struct pt_inode *table_find(struct fs_pt *pt,
				   const struct pt_inode *want)
{
	struct pt_inode *pi = pt->by_key[bucket(pt, want->key)];

	for (; pi != NULL; pi = pi->by_key) {
		if (pi->key != want->key || pi->mnt != want->mnt)
			continue;
		if (want->mnt < 0 ? pi->dev == want->dev && pi->ino == want->ino
				  : pi->htype == want->htype &&
					pi->hbytes == want->hbytes &&
					memcmp(pi->handle, want->handle,
					       want->hbytes) == 0)
			return pi;
	}
	return NULL;
}

struct pt_inode *pt_inode_get(struct fs_pt *pt, fuse_ino_t nodeid)
{
	struct pt_inode *pi;

	if (nodeid == FUSE_ROOT_ID)
		return pt->root;
	pthread_mutex_lock(&pt->tbl_lock);
	pi = pt->by_id[bucket(pt, nodeid)];
	while (pi != NULL && pi->nodeid != nodeid)
		pi = pi->by_id;
	pthread_mutex_unlock(&pt->tbl_lock);
	return pi;
}

/* ---- the lower mounts ---- */

void pt_fd_path(int fd, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/self/fd/%d", fd);
}

/*
 * The index of mount @id in pt->mnts, adding it with a directory fd
 * reopened from @fd (O_PATH, an object on that mount) if new; -1 if its
 * objects are pinned instead (not a directory, table full, a FUSE
 * filesystem: it decodes a handle only while the inode is in its cache,
 * unless it supports exports, which cannot be asked).
 */
static int mount_index(struct pt_req *r, int id, int fd)
{
	struct fs_pt *pt = r->pt;
	struct statfs sfs;
	char path[32];
	int i, mfd = -1;

	pthread_mutex_lock(&pt->mnt_lock);
	for (i = 0; i < pt->nmnts; i++)
		if (pt->mnts[i].id == id)
			goto out;
	i = -1;
	if (pt->nmnts == PT_MOUNTS_MAX || pt_cred_root(pt) < 0)
		goto out;
	if (fstatfs(fd, &sfs) != 0)
		goto out;
	if (sfs.f_type != PT_FUSE_MAGIC) {
		pt_fd_path(fd, path, sizeof(path));
		mfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (mfd < 0)
			goto out;
	}
	i = pt->nmnts++;
	pt->mnts[i].id = id;
	pt->mnts[i].fd = mfd;
out:
	if (i >= 0 && pt->mnts[i].fd < 0)
		i = -1;
	pthread_mutex_unlock(&pt->mnt_lock);
	return i;
}

static int mount_fd(struct fs_pt *pt, int i)
{
	int fd;

	pthread_mutex_lock(&pt->mnt_lock);
	fd = pt->mnts[i].fd;
	pthread_mutex_unlock(&pt->mnt_lock);
	return fd;
}

/* ---- the descriptor cache ---- */

static void ring_add(struct fs_pt *pt, struct pt_inode *pi)
{
	if (pt->ring == NULL) {
		pi->ring_next = pi->ring_prev = pi;
		pt->ring = pi;
	} else {
		pi->ring_next = pt->ring;
		pi->ring_prev = pt->ring->ring_prev;
		pi->ring_prev->ring_next = pi;
		pt->ring->ring_prev = pi;
	}
	pt->nfds++;
}

static void ring_del(struct fs_pt *pt, struct pt_inode *pi)
{
	if (pi->ring_next == pi) {
		pt->ring = NULL;
	} else {
		pi->ring_prev->ring_next = pi->ring_next;
		pi->ring_next->ring_prev = pi->ring_prev;
		if (pt->ring == pi)
			pt->ring = pi->ring_next;
	}
	pi->ring_next = pi->ring_prev = NULL;
	pt->nfds--;
}

/*
 * Close cached fds until the cache is within its bound: the clock hand
 * skips fds in use and gives recently used ones a second chance. Call
 * with fd_lock; the fds to close go to @out (at most @max), closed by the
 * caller after unlocking. Returns how many.
 */
static int cache_evict(struct fs_pt *pt, int *out, int max)
{
	unsigned steps = 2 * pt->nfds + 2;
	int n = 0;

	while (pt->nfds > pt->max_fds && n < max && steps-- > 0) {
		struct pt_inode *pi = pt->ring;

		pt->ring = pi->ring_next;
		if (pi->fd_users > 0)
			continue;
		if (pi->fd_ref) {
			pi->fd_ref = 0;
			continue;
		}
		out[n++] = pi->fd;
		pi->fd = -1;
		ring_del(pt, pi);
	}
	return n;
}

/* Close a descriptor of the lower filesystem: the last one of an unlinked
 * file frees it there, so it is lower time (@r NULL: at unmount). */
static void lower_close(struct pt_req *r, int fd)
{
	uint64_t t = pt_now();

	if (r == NULL)
		close(fd);
	else
		pt_done(r, t, close(fd));
}

static void close_all(struct pt_req *r, const int *fds, int n)
{
	struct fs_pt *pt = r->pt;

	for (int i = 0; i < n; i++)
		lower_close(r, fds[i]);
	if (n > 0)
		atomic_fetch_add_explicit(&pt->fd_evictions, (uint64_t)n,
					  memory_order_relaxed);
}

/* Keep @fd as @pi's cached fd (or close it if @pi has one); @use: the
 * caller uses it now (counted in fd_users). Returns the fd to use. */
static int cache_adopt(struct pt_req *r, struct pt_inode *pi, int fd, int use)
{
	struct fs_pt *pt = r->pt;
	int evict[8], n, mine = fd;

	pthread_mutex_lock(&pt->fd_lock);
	if (pi->fd >= 0) {
		fd = pi->fd;
	} else {
		pi->fd = fd;
		mine = -1;
		ring_add(pt, pi);
	}
	pi->fd_ref = 1;
	if (use)
		pi->fd_users++;
	n = cache_evict(pt, evict, 8);
	pthread_mutex_unlock(&pt->fd_lock);
	if (mine >= 0)
		lower_close(r, mine);
	close_all(r, evict, n);
	return fd;
}

int pt_fd_get(struct pt_req *r, struct pt_inode *pi)
{
	struct fs_pt *pt = r->pt;
	struct {
		struct file_handle fh;
		unsigned char bytes[PT_HANDLE_MAX];
	} h;
	uint64_t t;
	int fd;

	if (pi->pinned_fd >= 0)
		return pi->pinned_fd;
	pthread_mutex_lock(&pt->fd_lock);
	if (pi->fd >= 0) {
		pi->fd_users++;
		pi->fd_ref = 1;
		fd = pi->fd;
		pthread_mutex_unlock(&pt->fd_lock);
		atomic_fetch_add_explicit(&pt->fd_hits, 1,
					  memory_order_relaxed);
		return fd;
	}
	pthread_mutex_unlock(&pt->fd_lock);

	/* open_by_handle_at needs CAP_DAC_READ_SEARCH: fsuid 0 */
	fd = pt_cred_root(pt);
	if (fd < 0)
		return fd;
	h.fh.handle_bytes = pi->hbytes;
	h.fh.handle_type = pi->htype;
	memcpy(h.fh.f_handle, pi->handle, pi->hbytes);
	t = pt_now();
	fd = open_by_handle_at(mount_fd(pt, pi->mnt), &h.fh,
			       O_PATH | O_NOFOLLOW | O_CLOEXEC);
	fd = fd < 0 ? -errno : fd;
	r->resolve_ns += pt_now() - t;
	atomic_fetch_add_explicit(&pt->fd_opens, 1, memory_order_relaxed);
	if (fd < 0) {
		if (fd == -ESTALE || fd == -ENOENT) {
			atomic_fetch_add_explicit(&pt->stale, 1,
						  memory_order_relaxed);
			fd = -ESTALE;
		}
		return fd;
	}
	return cache_adopt(r, pi, fd, 1);
}

void pt_fd_put(struct fs_pt *pt, struct pt_inode *pi, int fd)
{
	(void)fd;
	if (pi->pinned_fd >= 0)
		return;
	pthread_mutex_lock(&pt->fd_lock);
	pi->fd_users--;
	pthread_mutex_unlock(&pt->fd_lock);
}

/* ---- lookup and forget ---- */

/* A new inode for the object open as @fd (O_PATH) with attributes @st;
 * takes @fd (pinned) or leaves it to the caller. NULL: no memory. */
static struct pt_inode *inode_new(struct pt_req *r, int fd,
				  const struct stat *st, int *fd_taken)
{
	struct {
		struct file_handle fh;
		unsigned char bytes[PT_HANDLE_MAX];
	} h;
	struct pt_inode *pi;
	uint64_t t;
	int mnt_id = 0, mnt = -1, ret;

	h.fh.handle_bytes = PT_HANDLE_MAX;
	t = pt_now();
	ret = name_to_handle_at(fd, "", &h.fh, &mnt_id, AT_EMPTY_PATH);
	ret = (int)pt_done(r, t, ret);
	if (ret == 0)
		mnt = mount_index(r, mnt_id, fd);
	pi = calloc(1, sizeof(*pi) + (mnt >= 0 ? h.fh.handle_bytes : 0));
	if (pi == NULL)
		return NULL;
	pi->dev = st->st_dev;
	pi->ino = st->st_ino;
	pi->fd = -1;
	pi->mnt = mnt;
	pi->pinned_fd = -1;
	*fd_taken = 0;
	if (mnt < 0) {
		/* no handles here: hold the object by its fd */
		pi->pinned_fd = fd;
		*fd_taken = 1;
		pi->key = key_of_ino(st->st_dev, st->st_ino);
		return pi;
	}
	pi->hbytes = h.fh.handle_bytes;
	pi->htype = h.fh.handle_type;
	memcpy(pi->handle, h.fh.f_handle, pi->hbytes);
	pi->key = key_of_handle(mnt, pi->htype, pi->handle, pi->hbytes);
	return pi;
}

/* Enter @pi or find its twin; returns the inode now referenced. */
static struct pt_inode *inode_enter(struct fs_pt *pt, struct pt_inode *pi)
{
	struct pt_inode *old;

	pthread_mutex_lock(&pt->tbl_lock);
	old = table_find(pt, pi);
	if (old != NULL) {
		old->nlookup++;
	} else {
		pi->nlookup = 1;
		table_insert(pt, pi);
	}
	pthread_mutex_unlock(&pt->tbl_lock);
	return old != NULL ? old : pi;
}

int pt_inode_lookup(struct pt_req *r, int dir, const char *name,
		    struct stat *st, struct pt_inode **out)
{
	struct pt_inode *pi, *found;
	uint64_t t;
	int fd, ret, taken = 0;

	ret = pt_cred_caller(r, 0);
	if (ret < 0)
		return ret;
	t = pt_now();
	fd = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	fd = (int)pt_done(r, t, fd);
	if (fd < 0)
		return fd;
	t = pt_now();
	ret = fstat(fd, st);
	ret = (int)pt_done(r, t, ret);
	if (ret < 0)
		goto out_close;
	ret = -ENOMEM;
	pi = inode_new(r, fd, st, &taken);
	if (pi == NULL)
		goto out_close;
	found = inode_enter(r->pt, pi);
	if (found != pi) {
		taken = 0; /* a pinned twin's fd is still @fd */
		free(pi);
	} else if (pi->pinned_fd >= 0) {
		atomic_fetch_add_explicit(&r->pt->pinned, 1,
					  memory_order_relaxed);
	}
	if (found->pinned_fd < 0) {
		cache_adopt(r, found, fd, 0);
		taken = 1;
	}
	*out = found;
	ret = 0;
out_close:
	if (!taken)
		close(fd);
	return ret;
}

/* @r: the forget that drops the last reference, NULL at unmount. */
static void inode_free(struct pt_req *r, struct fs_pt *pt, struct pt_inode *pi)
{
	int fd = pi->pinned_fd;

	pthread_mutex_lock(&pt->fd_lock);
	if (pi->fd >= 0) {
		ring_del(pt, pi);
		fd = pi->fd;
		pi->fd = -1;
	}
	pthread_mutex_unlock(&pt->fd_lock);
	if (fd >= 0)
		lower_close(r, fd);
	free(pi);
}

void pt_inode_forget(struct pt_req *r, struct pt_inode *pi, uint64_t n)
{
	struct fs_pt *pt = r->pt;
	int last = 0;

	if (pi == pt->root)
		return;
	pthread_mutex_lock(&pt->tbl_lock);
	pi->nlookup = n < pi->nlookup ? pi->nlookup - n : 0;
	if (pi->nlookup == 0) {
		table_remove(pt, pi);
		last = 1;
	}
	pthread_mutex_unlock(&pt->tbl_lock);
	if (last)
		inode_free(r, pt, pi);
}

/* ---- setup ---- */

int pt_table_init(struct fs_pt *pt, int root_fd, char *err, size_t errlen)
{
	struct pt_inode *root;

	pthread_mutex_init(&pt->tbl_lock, NULL);
	pthread_mutex_init(&pt->fd_lock, NULL);
	pthread_mutex_init(&pt->mnt_lock, NULL);
	pt->nbuckets = PT_HASH_MIN;
	pt->by_id = calloc(pt->nbuckets, sizeof(*pt->by_id));
	pt->by_key = calloc(pt->nbuckets, sizeof(*pt->by_key));
	root = calloc(1, sizeof(*root));
	if (pt->by_id == NULL || pt->by_key == NULL || root == NULL) {
		free(root);
		snprintf(err, errlen, "ucfs: out of memory");
		return -ENOMEM;
	}
	pt->max_fds = PT_FD_CACHE;
	pt->next_nodeid = FUSE_ROOT_ID + 1;
	/* the root is never forgotten: hold it by its fd */
	root->nodeid = FUSE_ROOT_ID;
	root->nlookup = 1;
	root->fd = -1;
	root->mnt = -1;
	root->pinned_fd = root_fd;
	pt->root = root;
	return 0;
}

void pt_table_free(struct fs_pt *pt)
{
	for (size_t b = 0; b < pt->nbuckets && pt->by_id != NULL; b++) {
		struct pt_inode *pi, *next;

		for (pi = pt->by_id[b]; pi != NULL; pi = next) {
			next = pi->by_id;
			inode_free(NULL, pt, pi);
		}
	}
	free(pt->by_id);
	free(pt->by_key);
	if (pt->root != NULL) {
		close(pt->root->pinned_fd);
		free(pt->root);
	}
	for (int i = 0; i < pt->nmnts; i++)
		if (pt->mnts[i].fd >= 0)
			close(pt->mnts[i].fd);
	pthread_mutex_destroy(&pt->tbl_lock);
	pthread_mutex_destroy(&pt->fd_lock);
	pthread_mutex_destroy(&pt->mnt_lock);
}
