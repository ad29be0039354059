/*
 * fs_inode.c — inodes: the reference table, allocation, attributes, and
 * the orphan list.
 *
 * Reference table: one small struct fs_inode per inode that somebody
 * holds — the kernel's lookup count (nlookup), opens (nopen) — or that is
 * an orphan. Records of unreferenced, non-orphan inodes are freed at
 * once: the inode itself lives in its block in the core cache, so memory
 * stays within cache_mb plus one record per referenced inode; and those
 * records stay near inode_max: past it the kernel is asked to forget
 * the least recently used inodes only its lookups keep (fs_iprune.c).
 *
 * Orphans: when an inode's link count reaches 0 it is put on this slot's
 * on-disk orphan list (slotinfo.orphan_head -> dinode.orphan_next ...) in
 * the same transaction, and stays there until its last reference is gone
 * and fs_ino_destroy() has freed its blocks; the final transaction of the
 * destroy unlinks it from the list and frees the inode block. A crash at
 * any point leaves it on the list, and the next mount reclaims it
 * (fs_ino_reclaim_orphans). The list is mirrored in memory as a doubly
 * linked list (oprev/onext) so removal is O(1): the predecessor is known.
 *
 * Invariant: an inode with nlink 0 is on the orphan list, on disk and in
 * memory, until it is freed.
 *
 * dlm (fs_iopen.h): a record with kernel references holds the inode's
 * iopen lock in PR (taken at the first reference, given up at the last
 * unless the record is an orphan of ours); an orphan is freed only once
 * fs_iopen_claim says no other node uses it, else later by the iopen
 * worker; a dead node's list is adopted (fs_ino_orphan_adopt).
 */
#include "fusefs/cluster/fs_cluster.h"
#include "fusefs/cluster/fs_glock.h"
#include "fusefs/cluster/fs_iopen.h"
#include "fusefs/namespace/fs_ns.h"
#include "lockmgr/lk.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define TBL_MIN_BUCKETS 1024u

/* ---- reference table ---- */

static size_t tbl_hash(const struct fs_ns *ns, uint64_t ino)
{
	return (size_t)((ino * 0x9E3779B97F4A7C15ull) >> 20) &
	       (ns->nbuckets - 1);
}

/* tbl_lock held */
static struct fs_inode *tbl_find(struct fs_ns *ns, uint64_t ino)
{
	struct fs_inode *n;

	for (n = ns->hash[tbl_hash(ns, ino)]; n != NULL; n = n->hnext)
		if (n->ino == ino)
			return n;
	return NULL;
}

/* tbl_lock held. Doubling the table is best effort. */
static void tbl_grow(struct fs_ns *ns)
{
	size_t old = ns->nbuckets, i;
	struct fs_inode **oh = ns->hash, **nh, *n, *next;

	nh = calloc(old * 2, sizeof(*nh));
	if (nh == NULL)
		return;
	ns->hash = nh;
	ns->nbuckets = old * 2;
	for (i = 0; i < old; i++) {
		for (n = oh[i]; n != NULL; n = next) {
			size_t h = tbl_hash(ns, n->ino);

			next = n->hnext;
			n->hnext = nh[h];
			nh[h] = n;
		}
	}
	free(oh);
}

/* tbl_lock held; NULL on ENOMEM */
static struct fs_inode *tbl_get(struct fs_ns *ns, uint64_t ino)
{
	struct fs_inode *n = tbl_find(ns, ino);
	size_t h;

	if (n != NULL)
		return n;
	n = calloc(1, sizeof(*n));
	if (n == NULL)
		return NULL;
	n->ino = ino;
	pthread_rwlock_init(&n->lock, &ns->rwattr);
	h = tbl_hash(ns, ino);
	n->hnext = ns->hash[h];
	ns->hash[h] = n;
	if (++ns->count > ns->nbuckets * 2)
		tbl_grow(ns);
	return n;
}

/* tbl_lock held: free @n if nothing keeps it */
static void tbl_maybe_drop(struct fs_ns *ns, struct fs_inode *n)
{
	struct fs_inode **pp;

	fs_iprune_note(ns, n);
	if (n->nlookup > 0 || n->nopen > 0 || n->orphan || n->pins > 0 ||
	    n->ranges != NULL || n->iopen != NULL || n->iopen_wait != NULL ||
	    n->iopen_busy)
		return;
	for (pp = &ns->hash[tbl_hash(ns, n->ino)]; *pp != n;
	     pp = &(*pp)->hnext)
		;
	*pp = n->hnext;
	ns->count--;
	pthread_rwlock_destroy(&n->lock);
	free(n);
}

/* dlm: the kernel's first reference to @n (nlookup + nopen went from 0)
 * pins the inode's glock, its last unpins it (fs_glock_pin: the LRU
 * bound then asks the kernel to forget the inode instead of dropping
 * its lock under the kernel's cached copy). tbl_lock held (then the
 * engine's e->mu: README "Lock order" 2b, 2c). */
static void kref_pin(struct fs *fs, const struct fs_inode *n, int pin)
{
	struct fs_glocks *e;

	if (fs->cl == NULL || (e = fs_cluster_glocks(fs->cl)) == NULL)
		return;
	if (pin)
		fs_glock_pin(e, FS_LK_INODE, n->ino); /* -EIO: fenced */
	else
		fs_glock_unpin(e, FS_LK_INODE, n->ino);
}

/* dlm: take @n's iopen PR, iopen_busy set by the caller (which keeps
 * the record); kept if the kernel still holds the inode. tbl_lock not
 * held. */
static void iopen_take(struct fs *fs, struct fs_inode *n)
{
	struct fs_ns *ns = fs->ns;
	struct lk_lock *lk, *drop = NULL;

	lk = fs_iopen_hold(fs, n->ino);
	pthread_mutex_lock(&ns->tbl_lock);
	n->iopen_busy = 0;
	if (n->nlookup == 0 && n->nopen == 0)
		drop = lk; /* forgotten meanwhile */
	else
		n->iopen = lk;
	tbl_maybe_drop(ns, n);
	pthread_mutex_unlock(&ns->tbl_lock);
	fs_iopen_put(drop);
}

/* dlm: @n holds no iopen lock and no thread is taking one. tbl_lock. */
static int iopen_none(const struct fs_inode *n)
{
	return n->iopen == NULL && !n->iopen_busy && !n->iopen_ex &&
	       n->iopen_wait == NULL;
}

/*
 * Reference counting never fails the operation: on ENOMEM the inode is
 * simply not tracked (an unlink then frees it at once).
 *
 * dlm: the first kernel reference takes the iopen lock in PR, except for
 * an inode this node just made (@made, its lock held EX since before it
 * existed): no other node can unlink it before that lock leaves, so its
 * PR is put off (iopen_late) until then (fs_ino_iopen_late), and most
 * new files never need one.
 */
static void ino_get(struct fs *fs, uint64_t ino, int open, int made,
		    uint32_t listed)
{
	struct fs_ns *ns = fs->ns;
	struct fs_inode *n;
	int take;

	pthread_mutex_lock(&ns->tbl_lock);
	n = tbl_get(ns, ino);
	if (n == NULL)
		__atomic_store_n(&ns->untracked, 1, __ATOMIC_RELEASE);
	if (n != NULL && open)
		n->nopen++;
	else if (n != NULL)
		n->nlookup++;
	if (n != NULL && listed != 0)
		n->listed_ms = listed;
	if (n != NULL && n->nlookup + n->nopen == 1)
		kref_pin(fs, n, 1);
	if (n != NULL)
		fs_iprune_note(ns, n); /* used now: the LRU's tail */
	take = n != NULL && fs->cl != NULL && iopen_none(n) && !n->iopen_late;
	if (take && made) {
		n->iopen_late = 1;
		take = 0;
		FS_NS_STAT_ADD(fs, iopen_late, 1);
	}
	if (take)
		n->iopen_busy = 1;
	pthread_mutex_unlock(&ns->tbl_lock);
	if (take)
		iopen_take(fs, n);
}

void fs_ino_get_lookup(struct fs *fs, uint64_t ino)
{
	ino_get(fs, ino, 0, 0, 0);
}

/* cvw_now_ms in the record's 32 bits, never 0 ("never listed"); wraps
 * every 49 days: a stamp that old may look fresh once, which costs the
 * kernel one GETATTR, nothing else (fs_readdir) */
static uint32_t listed_stamp(uint64_t now_ms)
{
	return (uint32_t)now_ms != 0 ? (uint32_t)now_ms : 1;
}

void fs_ino_get_listed(struct fs *fs, uint64_t ino, uint64_t now_ms)
{
	ino_get(fs, ino, 0, 0, listed_stamp(now_ms));
}

void fs_ino_get_open(struct fs *fs, uint64_t ino)
{
	ino_get(fs, ino, 1, 0, 0);
}

void fs_ino_get_made(struct fs *fs, uint64_t ino)
{
	ino_get(fs, ino, 0, 1, 0);
}

void fs_ino_iopen_late(struct fs *fs, uint64_t ino)
{
	struct fs_ns *ns = fs->ns;
	struct fs_inode *n;
	int take;

	pthread_mutex_lock(&ns->tbl_lock);
	n = tbl_find(ns, ino);
	take = n != NULL && n->iopen_late && iopen_none(n) &&
	       (n->nlookup > 0 || n->nopen > 0);
	if (n != NULL)
		n->iopen_late = 0; /* the lock leaves: from now on, eager */
	if (take)
		n->iopen_busy = 1;
	pthread_mutex_unlock(&ns->tbl_lock);
	if (!take)
		return;
	FS_NS_STAT_ADD(fs, iopen_late_taken, 1);
	iopen_take(fs, n);
}

int fs_ino_put(struct fs *fs, uint64_t ino, uint64_t nlookup,
	       uint32_t nopen)
{
	struct fs_ns *ns = fs->ns;
	struct lk_lock *drop = NULL;
	struct fs_inode *n;
	int unref = 0;

	pthread_mutex_lock(&ns->tbl_lock);
	n = tbl_find(ns, ino);
	if (n != NULL) {
		int held = n->nlookup > 0 || n->nopen > 0;

		n->nlookup -= nlookup < n->nlookup ? nlookup : n->nlookup;
		n->nopen -= nopen < n->nopen ? nopen : n->nopen;
		if (held && n->nlookup == 0 && n->nopen == 0)
			kref_pin(fs, n, 0);
		if (n->nlookup == 0 && n->nopen == 0 && n->pins == 0)
			unref = n->orphan && !n->iopen_left;
		/* dlm: the kernel let go: our PR goes, but an owner's
		 * (orphan) becomes its EX try (fs_iopen_claim) */
		if (n->nlookup == 0 && n->nopen == 0 && !n->orphan &&
		    !n->iopen_ex) {
			drop = n->iopen;
			n->iopen = NULL;
			n->iopen_wanted = 0;
		}
		tbl_maybe_drop(ns, n);
	}
	pthread_mutex_unlock(&ns->tbl_lock);
	fs_iopen_put(drop);
	return unref;
}

/* @test(the record of @ino), under tbl_lock; 0 if it has none. */
static int ino_test(struct fs *fs, uint64_t ino,
		    int (*test)(const struct fs_inode *))
{
	struct fs_ns *ns = fs->ns;
	struct fs_inode *n;
	int ret;

	pthread_mutex_lock(&ns->tbl_lock);
	n = tbl_find(ns, ino);
	ret = n != NULL && test(n);
	pthread_mutex_unlock(&ns->tbl_lock);
	return ret;
}

static int looked_up(const struct fs_inode *n)
{
	return n->nlookup > 0;
}

int fs_ino_held(struct fs *fs, uint64_t ino)
{
	return ino_test(fs, ino, looked_up);
}

int fs_ino_listed_fresh(struct fs *fs, uint64_t ino, uint64_t now_ms)
{
	struct fs_ns *ns = fs->ns;
	struct fs_inode *n;
	int ret;

	pthread_mutex_lock(&ns->tbl_lock);
	n = tbl_find(ns, ino);
	ret = n != NULL && n->nlookup > 0 && n->listed_ms != 0 &&
	      (uint32_t)(listed_stamp(now_ms) - n->listed_ms) <
		  FS_LISTED_FRESH_MS;
	pthread_mutex_unlock(&ns->tbl_lock);
	return ret;
}

struct fs_inode *fs_ino_pin(struct fs *fs, uint64_t ino)
{
	struct fs_ns *ns = fs->ns;
	struct fs_inode *n;

	pthread_mutex_lock(&ns->tbl_lock);
	n = tbl_get(ns, ino);
	if (n != NULL) {
		n->pins++;
		fs_iprune_note(ns, n); /* in use: off the LRU */
	}
	pthread_mutex_unlock(&ns->tbl_lock);
	return n;
}

int fs_ino_unpin(struct fs *fs, struct fs_inode *n)
{
	struct fs_ns *ns = fs->ns;
	int unref;

	pthread_mutex_lock(&ns->tbl_lock);
	n->pins--;
	unref = n->pins == 0 && n->nlookup == 0 && n->nopen == 0 && n->orphan &&
		!n->iopen_left;
	tbl_maybe_drop(ns, n);
	pthread_mutex_unlock(&ns->tbl_lock);
	return unref;
}

static int range_conflict(const struct fs_inode *n, const struct fs_range *r)
{
	for (const struct fs_range *o = n->ranges; o != NULL; o = o->next)
		if ((r->write || o->write) && o->start < r->end &&
		    r->start < o->end)
			return 1;
	return 0;
}

void fs_range_add(struct fs *fs, struct fs_inode *n, struct fs_range *r)
{
	struct fs_ns *ns = fs->ns;

	pthread_mutex_lock(&ns->tbl_lock);
	while (range_conflict(n, r))
		pthread_cond_wait(&ns->range_cond, &ns->tbl_lock);
	r->next = n->ranges;
	n->ranges = r;
	fs_iprune_note(ns, n);
	pthread_mutex_unlock(&ns->tbl_lock);
}

void fs_range_del(struct fs *fs, struct fs_inode *n, struct fs_range *r)
{
	struct fs_ns *ns = fs->ns;
	struct fs_range **pp;

	pthread_mutex_lock(&ns->tbl_lock);
	for (pp = &n->ranges; *pp != NULL; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	pthread_cond_broadcast(&ns->range_cond);
	tbl_maybe_drop(ns, n);
	pthread_mutex_unlock(&ns->tbl_lock);
}

void fs_range_wait_all(struct fs *fs, struct fs_inode *n)
{
	struct fs_ns *ns = fs->ns;

	if (n == NULL)
		return;
	pthread_mutex_lock(&ns->tbl_lock);
	while (n->ranges != NULL)
		pthread_cond_wait(&ns->range_cond, &ns->tbl_lock);
	pthread_mutex_unlock(&ns->tbl_lock);
}

static int iopen_wanted(const struct fs_inode *n)
{
	return (n->iopen_wanted || n->orphan) && n->nopen == 0 &&
	       n->nlookup > 0;
}

int fs_ino_iopen_wanted(struct fs *fs, uint64_t ino)
{
	return ino_test(fs, ino, iopen_wanted);
}

static int kernel_held(const struct fs_inode *n)
{
	return n->nlookup > 0 || n->nopen > 0;
}

int fs_ino_kernel_held(struct fs *fs, uint64_t ino)
{
	struct fs_ns *ns = fs->ns;

	if (ino == ns->root ||
	    __atomic_load_n(&ns->untracked, __ATOMIC_ACQUIRE))
		return 1;
	return ino_test(fs, ino, kernel_held);
}

size_t fs_ino_iopen_unheld(struct fs *fs, uint64_t *inos, size_t n)
{
	struct fs_ns *ns = fs->ns;
	size_t k = 0;

	pthread_mutex_lock(&ns->tbl_lock);
	for (size_t i = 0; i < n; i++) {
		struct fs_inode *r = tbl_find(ns, inos[i]);

		if (r == NULL || (iopen_none(r) && !r->iopen_late))
			inos[k++] = inos[i];
	}
	pthread_mutex_unlock(&ns->tbl_lock);
	return k;
}

size_t fs_ino_iopen_mark_wanted(struct fs *fs, struct lk_lock *const *lks,
				size_t n, uint64_t *inos)
{
	struct fs_ns *ns = fs->ns;
	size_t k = 0;

	pthread_mutex_lock(&ns->tbl_lock);
	for (size_t i = 0; i < n; i++) {
		struct fs_inode *r = tbl_find(ns, lk_lock_name(lks[i])->num);

		if (r == NULL || r->iopen != lks[i])
			continue;
		r->iopen_wanted = 1;
		if (r->nopen == 0)
			inos[k++] = r->ino;
	}
	pthread_mutex_unlock(&ns->tbl_lock);
	return k;
}

static int tbl_known(struct fs_ns *ns, uint64_t ino)
{
	struct fs_inode *n;
	int ret;

	pthread_mutex_lock(&ns->tbl_lock);
	n = tbl_find(ns, ino);
	ret = n != NULL && (n->nlookup > 0 || n->nopen > 0 || n->orphan);
	pthread_mutex_unlock(&ns->tbl_lock);
	return ret;
}

/* ---- init ---- */

int fs_ns_init(struct fs *fs, const struct fs_opts *o)
{
	struct fs_ns *ns;

	ns = calloc(1, sizeof(*ns));
	if (ns == NULL)
		return -ENOMEM;
	ns->hash = calloc(TBL_MIN_BUCKETS, sizeof(*ns->hash));
	if (ns->hash == NULL) {
		free(ns);
		return -ENOMEM;
	}
	ns->nbuckets = TBL_MIN_BUCKETS;
	ns->opts = *o;
	ns->root = fs->sb.root_ino;
	pthread_rwlockattr_init(&ns->rwattr);
	/* writers of an inode must not starve behind a stream of reads */
	pthread_rwlockattr_setkind_np(
	    &ns->rwattr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_mutex_init(&ns->rename_mu, NULL);
	pthread_mutex_init(&ns->refc_lock, NULL);
	pthread_mutex_init(&ns->orphan_lock, NULL);
	pthread_mutex_init(&ns->tbl_lock, NULL);
	pthread_cond_init(&ns->range_cond, NULL);
	ns->inode_max = o->inode_max > 0 ? (size_t)o->inode_max
					 : FS_DEFAULT_INODE_MAX;
	fs->ns = ns;
	if (fs_iprune_start(fs) < 0) {
		fs_ns_free(fs);
		return -ENOMEM;
	}
	/* dlm: the kernel holds the root for the whole mount, with no
	 * lookup: its glock stays pinned (never dropped for the bound) */
	if (fs->cl != NULL && fs_cluster_glocks(fs->cl) != NULL)
		fs_glock_pin(fs_cluster_glocks(fs->cl), FS_LK_INODE, ns->root);
	return 0;
}

void fs_ns_free(struct fs *fs)
{
	struct fs_ns *ns = fs->ns;
	struct fs_inode *n, *next;

	if (ns == NULL)
		return;
	fs_iprune_stop(fs);
	for (size_t i = 0; i < ns->nbuckets; i++)
		for (n = ns->hash[i]; n != NULL; n = next) {
			next = n->hnext;
			pthread_rwlock_destroy(&n->lock);
			free(n);
		}
	free(ns->hash);
	pthread_rwlockattr_destroy(&ns->rwattr);
	pthread_mutex_destroy(&ns->rename_mu);
	pthread_mutex_destroy(&ns->refc_lock);
	pthread_mutex_destroy(&ns->orphan_lock);
	pthread_mutex_destroy(&ns->tbl_lock);
	pthread_cond_destroy(&ns->range_cond);
	free(ns);
	fs->ns = NULL;
}

/* ---- inode blocks and attributes ---- */

int fs_ino_read(struct fs *fs, uint64_t ino, struct fs_buf **out)
{
	struct fs_buf *b;
	int ret;

	if (ino < fs->sb.rgrp_start || ino >= fs->sb.total_blocks)
		return -ESTALE;
	ret = fs_buf_read(fs, ino, FS_BT_INODE, &b);
	if (ret == -EINVAL)
		return -ESTALE;
	if (ret < 0)
		return ret;
	/* an unlinked inode lives on only while somebody holds it (it is
	 * then in the table as an orphan); otherwise it is freed */
	if (fs_di(b)->nlink == 0 && !tbl_known(fs->ns, ino)) {
		fs_buf_put(b);
		return -ESTALE;
	}
	*out = b;
	return 0;
}

void fs_now(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
}

void fs_ino_touch(struct fs_dinode *di, unsigned what)
{
	struct timespec now;

	fs_now(&now);
	if (what & FS_T_ATIME) {
		di->atime = now.tv_sec;
		di->atime_nsec = (uint32_t)now.tv_nsec;
	}
	if (what & FS_T_MTIME) {
		di->mtime = now.tv_sec;
		di->mtime_nsec = (uint32_t)now.tv_nsec;
	}
	if (what & FS_T_CTIME) {
		di->ctime = now.tv_sec;
		di->ctime_nsec = (uint32_t)now.tv_nsec;
	}
}

void fs_ino_attr(const struct fs_dinode *di, struct fs_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->ino = di->hdr.blkno;
	a->generation = di->generation;
	a->size = di->size;
	a->blocks = di->blocks * (FS_BLOCK_SIZE / 512);
	a->mode = di->mode;
	a->nlink = di->nlink;
	a->uid = di->uid;
	a->gid = di->gid;
	a->rdev = di->rdev;
	a->blksize = 1u << 20;
	a->atime.tv_sec = di->atime;
	a->atime.tv_nsec = di->atime_nsec;
	a->mtime.tv_sec = di->mtime;
	a->mtime.tv_nsec = di->mtime_nsec;
	a->ctime.tv_sec = di->ctime;
	a->ctime.tv_nsec = di->ctime_nsec;
	a->btime.tv_sec = di->btime;
	a->btime.tv_nsec = di->btime_nsec;
}

unsigned fs_ino_alloc_credits(struct fs *fs)
{
	return FS_ALLOC_CREDITS(fs) + 1;
}

static unsigned fmt_of(mode_t mode)
{
	if (S_ISDIR(mode))
		return FS_FMT_DIR_BTREE;
	if (S_ISREG(mode) || S_ISLNK(mode))
		return FS_FMT_INLINE;
	return FS_FMT_NONE;
}

/* dlm: tries of new numbers before fs_ino_alloc gives up (-EAGAIN) */
#define NEW_INO_TRIES 4

/* dlm: the number whose lock refused this thread's last try */
static __thread uint64_t refused_ino;

/*
 * A free inode number near @goal, and (dlm) its glock held EX, taken
 * before the inode's block can join @tx: so this node's journal never
 * holds a block whose lock another node holds (FORMAT.md "Cluster
 * locks"), even if it crashes before the create ends. A try, never a
 * wait, inside the handle: the inode was allocated from a group placed
 * on this node (lockmgr/PROTOCOL.md §5), so its master is normally this
 * node and the grant costs no message. A refusal means another node
 * still holds a lock on that number (an inode it used, since freed):
 * the number goes back (freed in @tx, so not handed out again before
 * @tx commits) and the next one is tried.
 */
static int alloc_locked(struct fs_tx *tx, uint64_t goal, uint64_t *ino,
			uint64_t *gen, struct fs_glock **gl)
{
	struct fs *fs = fs_tx_fs(tx);
	int ret;

	refused_ino = 0;
	if (gl == NULL || fs->cl == NULL) {
		if (gl == NULL && fs->cl != NULL)
			FS_NS_STAT_ADD(fs, new_inode_unlocked, 1);
		return fs_alloc_inode(tx, goal, ino, gen);
	}
	*gl = NULL;
	for (int t = 0; t < NEW_INO_TRIES; t++) {
		ret = fs_alloc_inode(tx, goal, ino, gen);
		if (ret < 0)
			return ret;
		ret = fs_cluster_glock(fs->cl, FS_LK_INODE, *ino, LK_EX, 0, gl);
		if (ret != -EAGAIN) {
			refused_ino = 0;
			if (ret < 0)
				fs_free_inode(tx, *ino);
			return ret;
		}
		*gl = NULL;
		refused_ino = *ino;
		FS_NS_STAT_ADD(fs, new_inode_refused, 1);
		ret = fs_free_inode(tx, *ino);
		if (ret < 0)
			return ret;
	}
	return -EAGAIN;
}

int fs_ino_alloc_refused(struct fs *fs)
{
	uint64_t ino = refused_ino;
	struct fs_glock *gl;

	refused_ino = 0;
	if (ino == 0 || fs->cl == NULL)
		return 0;
	FS_NS_STAT_ADD(fs, new_inode_waits, 1);
	if (fs_cluster_glock(fs->cl, FS_LK_INODE, ino, LK_EX, 1, &gl) < 0)
		return 0;
	fs_cluster_gunlock(gl, LK_EX); /* stays cached: the number is ours */
	return 1;
}

int fs_ino_alloc(struct fs_tx *tx, uint64_t goal, mode_t mode, uid_t uid,
		 gid_t gid, uint64_t rdev, struct fs_buf **out,
		 struct fs_glock **gl)
{
	struct fs *fs = fs_tx_fs(tx);
	struct fs_dinode *di;
	struct fs_btree bt;
	uint64_t ino, gen;
	struct fs_buf *b;
	struct timespec now;
	int ret;

	ret = alloc_locked(tx, goal, &ino, &gen, gl);
	if (ret < 0)
		return ret;
	ret = fs_buf_new(tx, ino, FS_BT_INODE, &b);
	if (ret < 0)
		goto out_free;
	di = fs_di(b);
	fs_now(&now);
	di->mode = mode;
	di->uid = uid;
	di->gid = gid;
	di->nlink = S_ISDIR(mode) ? 2 : 1;
	di->generation = gen;
	di->rdev = rdev;
	di->fmt = (uint16_t)fmt_of(mode);
	di->atime = di->mtime = di->ctime = di->btime = now.tv_sec;
	di->atime_nsec = di->mtime_nsec = di->ctime_nsec = di->btime_nsec =
		(uint32_t)now.tv_nsec;
	di->parent = goal;
	if (S_ISDIR(mode)) {
		fs_btree_init(&bt, fs, b, FS_INODE_INLINE_OFF,
			      FS_INODE_INLINE_SIZE, ino);
		ret = fs_btree_create(tx, &bt);
		if (ret < 0)
			goto out_put;
	}
	FS_NS_STAT_ADD(fs, inodes_created, 1);
	*out = b;
	return 0;

out_put:
	fs_buf_put(b);
out_free:
	fs_free_inode(tx, ino);
	if (gl != NULL && *gl != NULL) {
		fs_cluster_gunlock(*gl, LK_EX);
		*gl = NULL;
	}
	return ret;
}

/* ---- orphan list ---- */

unsigned fs_ino_orphan_credits(void)
{
	return 3;	/* slotinfo or predecessor, the inode, margin */
}

static int slotinfo_read(struct fs *fs, struct fs_buf **out)
{
	return fs_buf_read(fs, fs_slotinfo_blk(fs->slot), FS_BT_SLOTINFO, out);
}

static void set_orphan(struct fs_ns *ns, struct fs_inode *n, uint8_t v)
{
	pthread_mutex_lock(&ns->tbl_lock);
	n->orphan = v;
	pthread_mutex_unlock(&ns->tbl_lock);
}

/* orphan_lock held: @n becomes the list's head */
static int orphan_push(struct fs_tx *tx, struct fs_inode *n, struct fs_buf *b)
{
	struct fs *fs = fs_tx_fs(tx);
	struct fs_ns *ns = fs->ns;
	struct fs_slotinfo *si;
	struct fs_buf *sb;
	int ret;

	ret = slotinfo_read(fs, &sb);
	if (ret < 0)
		goto out_drop;
	ret = fs_tx_write(tx, sb);
	if (ret == 0)
		ret = fs_tx_write(tx, b);
	if (ret < 0) {
		fs_buf_put(sb);
		goto out_drop;
	}
	si = (struct fs_slotinfo *)sb->data;
	fs_di(b)->orphan_next = si->orphan_head;
	si->orphan_head = b->blkno;
	fs_buf_put(sb);
	set_orphan(ns, n, 1);
	n->oprev = NULL;
	n->onext = ns->orphans;
	if (ns->orphans != NULL)
		ns->orphans->oprev = n;
	ns->orphans = n;
	return 0;

out_drop:
	pthread_mutex_lock(&ns->tbl_lock);
	tbl_maybe_drop(ns, n);
	pthread_mutex_unlock(&ns->tbl_lock);
	return ret;
}

/* @b's lock exclusive, in @tx with @b joined; takes orphan_lock */
int fs_ino_orphan_add(struct fs_tx *tx, struct fs_buf *b)
{
	struct fs *fs = fs_tx_fs(tx);
	struct fs_ns *ns = fs->ns;
	struct fs_inode *n;
	int ret;

	FS_ASSERT_HELD(fs, b->blkno, FS_IL_EX);
	pthread_mutex_lock(&ns->tbl_lock);
	n = tbl_get(ns, b->blkno);
	pthread_mutex_unlock(&ns->tbl_lock);
	if (n == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&ns->orphan_lock);
	ret = n->orphan ? 0 : orphan_push(tx, n, b);
	pthread_mutex_unlock(&ns->orphan_lock);
	if (ret == 0)
		FS_NS_STAT_ADD(fs, orphans_added, 1);
	return ret;
}

/* Unlink @n (inode block @b) from the list, on disk in @tx and in
 * memory. orphan_lock held. */
static int orphan_unlink(struct fs_tx *tx, struct fs_inode *n, struct fs_buf *b)
{
	struct fs *fs = fs_tx_fs(tx);
	struct fs_ns *ns = fs->ns;
	uint64_t next = fs_di(b)->orphan_next;
	struct fs_buf *pb;
	int ret;

	if (n->oprev == NULL) {
		ret = slotinfo_read(fs, &pb);
		if (ret < 0)
			return ret;
		ret = fs_tx_write(tx, pb);
		if (ret == 0)
			((struct fs_slotinfo *)pb->data)->orphan_head = next;
	} else {
		ret = fs_ino_read(fs, n->oprev->ino, &pb);
		if (ret < 0)
			return ret;
		ret = fs_tx_write(tx, pb);
		if (ret == 0)
			fs_di(pb)->orphan_next = next;
	}
	fs_buf_put(pb);
	if (ret < 0)
		return ret;
	if (n->oprev != NULL)
		n->oprev->onext = n->onext;
	else
		ns->orphans = n->onext;
	if (n->onext != NULL)
		n->onext->oprev = n->oprev;
	n->oprev = n->onext = NULL;
	set_orphan(ns, n, 0);
	return 0;
}

static int orphan_del(struct fs_tx *tx, struct fs_inode *n, struct fs_buf *b)
{
	struct fs_ns *ns = fs_tx_fs(tx)->ns;
	int ret;

	pthread_mutex_lock(&ns->orphan_lock);
	ret = orphan_unlink(tx, n, b);
	pthread_mutex_unlock(&ns->orphan_lock);
	return ret;
}

/* The final transaction of a destroy: off the list, xattrs and the inode
 * block freed. */
static int destroy_final(struct fs *fs, struct fs_inode *n, struct fs_buf *b)
{
	struct fs_tx *tx;
	uint64_t ino = b->blkno;
	int ret;

	ret = fs_tx_begin(fs, fs_ino_orphan_credits() +
			  3 * FS_ALLOC_CREDITS(fs) + 2, &tx);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, b);
	if (ret == 0)
		ret = orphan_del(tx, n, b);
	if (ret == 0)
		ret = fs_xattr_free(tx, b);
	if (ret == 0) {
		fs_di(b)->nlink = 0;
		fs_di(b)->mode = 0;
		ret = fs_free_inode(tx, ino);
	}
	fs_tx_end(tx);
	return ret;
}

int fs_ino_destroy(struct fs *fs, uint64_t ino)
{
	struct fs_ns *ns = fs->ns;
	struct fs_inode *n;
	struct fs_buf *b;
	int ret;

	pthread_mutex_lock(&ns->tbl_lock);
	n = tbl_find(ns, ino);
	pthread_mutex_unlock(&ns->tbl_lock);
	if (n == NULL || !n->orphan)
		return -EINVAL;
	fs_range_wait_all(fs, n);	/* no read or write in flight */
	fs_alloc_resv_drop(fs, ino);
	ret = fs_buf_read(fs, ino, FS_BT_INODE, &b);
	if (ret < 0)
		return ret;
	if (fs_di(b)->fmt == FS_FMT_EXTENTS) {
		uint64_t r = fs_di(b)->refcount_blk;
		struct fs_irefc rh;

		ret = r != 0 ? fs_irefc_lock(fs, r, 0, &rh) : 0;
		if (ret == 0) {
			ret = fs_file_free_all(fs, b);
			if (r != 0)
				fs_irefc_unlock(fs, &rh);
		}
	}
	if (ret == 0)
		ret = destroy_final(fs, n, b);
	fs_buf_put(b);
	if (ret < 0)
		return ret;
	FS_NS_STAT_ADD(fs, inodes_freed, 1);
	fs_iopen_done(fs, n);
	pthread_mutex_lock(&ns->tbl_lock);
	tbl_maybe_drop(ns, n);
	pthread_mutex_unlock(&ns->tbl_lock);
	return 0;
}

int fs_ino_maybe_destroy(struct fs *fs, uint64_t ino)
{
	struct fs_ns *ns = fs->ns;
	struct fs_inode *n;
	int doit;

	FS_ASSERT_HELD(fs, ino, FS_IL_EX);
	pthread_mutex_lock(&ns->tbl_lock);
	n = tbl_find(ns, ino);
	/* the one pin is the caller's lock */
	doit = n != NULL && n->orphan && n->nlookup == 0 && n->nopen == 0 &&
	       n->pins == 1;
	pthread_mutex_unlock(&ns->tbl_lock);
	if (!doit)
		return 0;
	/* dlm: only once no other node uses it (fs_iopen.h) */
	doit = fs_iopen_claim(fs, n, 1);
	return doit == 1 ? fs_ino_destroy(fs, ino) : doit;
}

/* Destroy orphan @ino outside any request (mount, unmount): dlm, under
 * its glock in EX (another node may have cached it), once its iopen
 * lock says no other node uses it (@queue: else the worker frees it when
 * the last one lets go; without, it stays on the list). 1 destroyed, 0
 * left, -errno. */
static int destroy_glocked(struct fs *fs, uint64_t ino, int queue)
{
	struct fs_glock *gl = NULL;
	struct fs_inode *n;
	int ret;

	if (fs->cl != NULL) {
		ret = fs_cluster_glock(fs->cl, FS_LK_INODE, ino, LK_EX, 1, &gl);
		if (ret < 0)
			return ret;
	}
	n = fs_ino_pin(fs, ino);
	ret = n == NULL ? -ENOMEM : fs_iopen_claim(fs, n, queue);
	if (n != NULL)
		fs_ino_unpin(fs, n);
	if (ret == 1) {
		ret = fs_ino_destroy(fs, ino);
		if (ret == 0)
			ret = 1;
	}
	if (gl != NULL)
		fs_cluster_gunlock(gl, LK_EX);
	return ret;
}

/* The orphans on the list now (they leave it as they are destroyed):
 * *out (malloc'd), *n. -ENOMEM. */
static int orphans_now(struct fs_ns *ns, uint64_t **out, size_t *n)
{
	size_t cap = 0, k = 0;
	uint64_t *v;

	pthread_mutex_lock(&ns->orphan_lock);
	for (struct fs_inode *o = ns->orphans; o != NULL; o = o->onext)
		cap++;
	v = malloc((cap + 1) * sizeof(*v));
	for (struct fs_inode *o = ns->orphans; v != NULL && o != NULL;
	     o = o->onext)
		v[k++] = o->ino;
	pthread_mutex_unlock(&ns->orphan_lock);
	*out = v;
	*n = k;
	return v == NULL ? -ENOMEM : 0;
}

/* Destroy every orphan no other node uses (@queue: the others when they
 * are let go). @count: add the ones destroyed to orphans_reclaimed. */
static int destroy_all(struct fs *fs, int queue, int count)
{
	uint64_t *v;
	size_t n;
	int ret;

	ret = orphans_now(fs->ns, &v, &n);
	for (size_t i = 0; i < n && ret >= 0; i++) {
		ret = destroy_glocked(fs, v[i], queue);
		if (ret == 1 && count)
			FS_NS_STAT_ADD(fs, orphans_reclaimed, 1);
	}
	free(v);
	return ret < 0 ? ret : 0;
}

/* Mirror the on-disk list in memory (in order), then destroy each. */
int fs_ino_reclaim_orphans(struct fs *fs)
{
	struct fs_ns *ns = fs->ns;
	struct fs_inode *n, *tail = NULL;
	uint64_t ino, limit = fs->sb.total_blocks;
	struct fs_buf *b;
	int ret;

	ret = slotinfo_read(fs, &b);
	if (ret < 0)
		return ret;
	ino = ((struct fs_slotinfo *)b->data)->orphan_head;
	fs_buf_put(b);
	for (; ino != 0; ino = fs_di(b)->orphan_next, fs_buf_put(b)) {
		if (limit-- == 0)
			return -EUCLEAN;	/* a cycle */
		ret = fs_buf_read(fs, ino, FS_BT_INODE, &b);
		if (ret < 0)
			return ret;
		pthread_mutex_lock(&ns->tbl_lock);
		n = tbl_get(ns, ino);
		pthread_mutex_unlock(&ns->tbl_lock);
		if (n == NULL || n->orphan) {
			fs_buf_put(b);
			return n == NULL ? -ENOMEM : -EUCLEAN;
		}
		set_orphan(ns, n, 1);
		n->oprev = tail;
		if (tail != NULL)
			tail->onext = n;
		else
			ns->orphans = n;
		tail = n;
	}
	return destroy_all(fs, 1, 1);
}

int fs_ino_release_all(struct fs *fs)
{
	/* dlm: one still used elsewhere stays on the list for the next
	 * mount of this slot (FORMAT.md "Orphans") */
	return destroy_all(fs, 0, 0);
}

/* ---- a dead node's orphans (dlm, fs_iopen.c) ---- */

/* One transaction: @b (inode @n, first on slot @s's list, whose
 * slotinfo is @sb) moves to the head of ours. orphan_lock held. */
static int adopt_tx(struct fs *fs, struct fs_inode *n, struct fs_buf *b,
		    struct fs_buf *sb)
{
	struct fs_tx *tx;
	int ret;

	ret = fs_tx_begin(fs, 2 * fs_ino_orphan_credits(), &tx);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, sb);
	if (ret == 0) {
		((struct fs_slotinfo *)sb->data)->orphan_head =
		    fs_di(b)->orphan_next;
		ret = orphan_push(tx, n, b);
	}
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	return ret;
}

int fs_ino_orphan_adopt(struct fs *fs, unsigned slot, uint64_t *ino)
{
	struct fs_ns *ns = fs->ns;
	struct fs_buf *sb, *b;
	struct fs_ilock il;
	struct fs_inode *n;
	uint64_t head;
	int ret;

	*ino = 0;
	ret = fs_buf_read(fs, fs_slotinfo_blk(slot), FS_BT_SLOTINFO, &sb);
	if (ret < 0)
		return ret;
	head = ((struct fs_slotinfo *)sb->data)->orphan_head;
	if (head == 0 || head < fs->sb.rgrp_start ||
	    head >= fs->sb.total_blocks) {
		fs_buf_put(sb);
		return head == 0 ? 0 : -EUCLEAN;
	}
	ret = fs_op_begin(&il, fs, LK_PR);
	if (ret < 0)
		goto out_sb;
	/* written below: another node may cache it under its glock */
	ret = fs_ilock_one(&il, head, FS_IL_EX);
	if (ret == 0)
		ret = fs_buf_read(fs, head, FS_BT_INODE, &b);
	if (ret < 0)
		goto out_op;
	n = fs_ilock_rec(&il, head);
	pthread_mutex_lock(&ns->orphan_lock);
	ret = n->orphan || fs_di(b)->nlink != 0 ? -EUCLEAN
						: adopt_tx(fs, n, b, sb);
	pthread_mutex_unlock(&ns->orphan_lock);
	fs_buf_put(b);
	if (ret == 0) {
		*ino = head;
		FS_NS_STAT_ADD(fs, orphans_adopted, 1);
	}
out_op:
	fs_op_end(&il); /* destroyed here if no node uses it */
out_sb:
	fs_buf_put(sb);
	return ret;
}
