/*
 * fs_iprune.c — the bound on the in-core inode table (inode_max=).
 *
 * The kernel keeps every inode it looked up referenced until memory
 * pressure makes it forget them, and the namespace keeps a record
 * (struct fs_inode) for each: a find over millions of files grows the
 * daemon by a record per file. Records that only the kernel's lookups
 * keep (no open file, no request using them, not the root) wait on
 * ns->lru, least recently looked up or used first. Past 7/8 of
 * inode_max records, a worker thread asks the kernel to forget the head
 * of the LRU, down to 3/4 (fs_kinval_forget: NOTIFY_PRUNE, Linux 6.18+,
 * in batches of at most IP_BATCH a round, a round at most every
 * IP_GAP_NS); the kernel drops the unused ones and sends FORGETs, which
 * free the records (fs_ino_put). An inode the kernel keeps (in use, a
 * working directory) was moved to the tail: it is asked again once the
 * others were. After two rounds in a row with no record leaving the LRU
 * (the kernel keeps them all) the next waits IP_SLOW_NS instead; a round
 * the kernel cannot prune (no FUSE session, an older kernel) is counted
 * (iprune_refused) and tried again after IP_SLOW_NS: the records then
 * stay, as before the bound.
 *
 * Only this worker talks to the kernel, never a request handler: the
 * kernel's FORGETs come back as requests (research/fuse-coherence.md).
 *
 * On dlm mounts this is the one prune for both bounds: each inode the
 * kernel holds keeps two cluster locks, its glock (pinned: fs_glock_pin)
 * and its iopen lock (PR), as GFS2's in-core inodes hold their inode
 * and iopen glocks; so the records are bounded by the smaller of
 * inode_max and glock_max / 2 (ns->bound: the pinned glocks and the
 * iopen holds together within glock_max, the other half of the table
 * for glocks nobody pins), and the glock engine leaves the pins to this
 * worker (fs_glocks_set_pruned) instead of running a prune of its own
 * over a second LRU of the same inodes.
 * If the kernel cannot prune (-EOPNOTSUPP), the engine is told so and
 * drops the oldest pins itself for the glock bound, as without pins.
 *
 * Locking: ns->tbl_lock protects the LRU, nlru, lru_forgot and the
 * worker's want/stop (its condition variable waits with tbl_lock);
 * the worker drops it around fs_kinval_forget.
 */
#include "fusefs/namespace/fs_ns.h"
#include "fusefs/cluster/fs_cluster.h"
#include "fusefs/cluster/fs_glock.h"
#include "lockmgr/cv_wait.h"
#include "lockmgr/cv_worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define IP_BATCH 4096u
#define IP_GAP_NS 5000000ull
#define IP_SLOW_NS 1000000000ull

struct fs_iprune {
	struct fs *fs;		/* immutable */
	struct cvw_worker w;	/* the worker, tbl_lock */
	pthread_cond_t cv;	/* want or stop set (with tbl_lock) */
	int want;		/* tbl_lock: the table passed the bound */
	uint64_t next;		/* worker only: no round before (ns) */
	uint64_t forgot;	/* worker only: lru_forgot at the last round */
	int idle;		/* worker only: rounds in a row nothing left */
	int pruned;		/* worker only: the glock engine was told
				   the pins are pruned here (dlm) */
	struct fs_glocks *e;	/* immutable: dlm: the glock engine */
	uint64_t ids[IP_BATCH]; /* worker only */
};

static size_t ip_hi(const struct fs_ns *ns)
{
	return ns->bound - ns->bound / 8;
}

static size_t ip_lo(const struct fs_ns *ns)
{
	return ns->bound - ns->bound / 4;
}

/* tbl_lock held */
static void lru_del(struct fs_ns *ns, struct fs_inode *n)
{
	if (!n->on_lru)
		return;
	if (n->lprev != NULL)
		n->lprev->lnext = n->lnext;
	else
		ns->lru_head = n->lnext;
	if (n->lnext != NULL)
		n->lnext->lprev = n->lprev;
	else
		ns->lru_tail = n->lprev;
	n->lprev = n->lnext = NULL;
	n->on_lru = 0;
	ns->nlru--;
}

/* tbl_lock held */
static void lru_add_tail(struct fs_ns *ns, struct fs_inode *n)
{
	n->lnext = NULL;
	n->lprev = ns->lru_tail;
	if (ns->lru_tail != NULL)
		ns->lru_tail->lnext = n;
	else
		ns->lru_head = n;
	ns->lru_tail = n;
	n->on_lru = 1;
	ns->nlru++;
}

void fs_iprune_note(struct fs_ns *ns, struct fs_inode *n)
{
	struct fs_iprune *ip = ns->iprune;
	int kernel_only = n->nlookup > 0 && n->nopen == 0 && n->pins == 0 &&
			  n->ranges == NULL && n->ino != ns->root;

	if (n->on_lru && n->nlookup == 0)
		ns->lru_forgot++;
	lru_del(ns, n);
	if (!kernel_only)
		return;
	lru_add_tail(ns, n);
	if (ip != NULL && !ip->want && ns->count > ip_hi(ns)) {
		ip->want = 1;
		pthread_cond_signal(&ip->cv);
	}
}

/* tbl_lock held: the head of the LRU to ask, each moved to the tail */
static size_t ip_pick(struct fs_ns *ns, struct fs_iprune *ip)
{
	size_t want = ns->count > ip_lo(ns) ? ns->count - ip_lo(ns) : 0;
	size_t k = 0;
	struct fs_inode *n;

	if (want > ns->nlru)
		want = ns->nlru;
	if (want > IP_BATCH)
		want = IP_BATCH;
	while (k < want) {
		n = ns->lru_head;
		lru_del(ns, n);
		lru_add_tail(ns, n);
		ip->ids[k++] = n->ino;
	}
	return k;
}

/* dlm: the kernel's answer says whether the pins are pruned here. */
static void ip_tell_engine(struct fs_iprune *ip, int ret)
{
	int on = ret != -EOPNOTSUPP;

	if (ip->e == NULL || (ret < 0 && on) || on == ip->pruned)
		return;
	ip->pruned = on;
	fs_glocks_set_pruned(ip->e, on);
}

/* A round (tbl_lock held; dropped around the kernel call). */
static void ip_round(struct fs_ns *ns, struct fs_iprune *ip)
{
	size_t k = ip_pick(ns, ip);
	int slow, ret;

	ip->idle = ns->lru_forgot == ip->forgot ? ip->idle + 1 : 0;
	slow = ip->idle >= 2;
	ip->forgot = ns->lru_forgot;
	ip->want = 0;
	if (k == 0)
		return;
	pthread_mutex_unlock(&ns->tbl_lock);
	ret = fs_kinval_forget(ip->fs, ip->ids, k);
	if (ret < 0)
		FS_NS_STAT_ADD(ip->fs, iprune_refused, 1);
	else {
		FS_NS_STAT_ADD(ip->fs, iprune_rounds, 1);
		FS_NS_STAT_ADD(ip->fs, iprune_asked, k);
	}
	ip_tell_engine(ip, ret);
	pthread_mutex_lock(&ns->tbl_lock);
	/* refused, or nothing forgotten since the last round: the kernel
	 * keeps those inodes in use; ask again later */
	ip->next = cvw_now_ns() + (ret < 0 || slow ? IP_SLOW_NS : IP_GAP_NS);
}

/* tbl_lock held: wait for want, or until @until (CLOCK_MONOTONIC ns) */
static void ip_wait(struct fs_ns *ns, struct fs_iprune *ip, uint64_t until)
{
	cvw_wait_until(&ip->cv, &ns->tbl_lock, until == 0 ? CVW_NEVER : until);
}

static void *ip_thread(void *arg)
{
	struct fs_iprune *ip = arg;
	struct fs_ns *ns = ip->fs->ns;
	uint64_t now;

	pthread_mutex_lock(&ns->tbl_lock);
	while (!cvw_worker_stopping(&ip->w)) {
		if (ns->count <= ip_hi(ns) || ns->nlru == 0) {
			ip->want = 0;
			ip_wait(ns, ip, 0);
			continue;
		}
		now = cvw_now_ns();
		if (now < ip->next) {
			ip_wait(ns, ip, ip->next);
			continue;
		}
		ip_round(ns, ip);
	}
	pthread_mutex_unlock(&ns->tbl_lock);
	return NULL;
}

int fs_iprune_start(struct fs *fs)
{
	struct fs_iprune *ip = calloc(1, sizeof(*ip));
	int ret;

	if (ip == NULL)
		return -ENOMEM;
	ip->fs = fs;
	fs->ns->bound = fs->ns->inode_max;
	if (fs->cl != NULL)
		ip->e = fs_cluster_glocks(fs->cl);
	if (ip->e != NULL && fs_glocks_max(ip->e) != 0 &&
	    fs_glocks_max(ip->e) / 2 < fs->ns->bound)
		fs->ns->bound = fs_glocks_max(ip->e) / 2; /* two locks each */
	pthread_cond_init(&ip->cv, NULL); /* cv_wait.h names the clock */
	ret = cvw_worker_start(&ip->w, &fs->ns->tbl_lock, &ip->cv, ip_thread,
			       ip, "ucfs-iprune");
	if (ret < 0) {
		pthread_cond_destroy(&ip->cv);
		free(ip);
		return ret;
	}
	fs->ns->iprune = ip;
	if (ip->e != NULL) { /* until the kernel refuses */
		ip->pruned = 1;
		fs_glocks_set_pruned(ip->e, 1);
	}
	return 0;
}

void fs_iprune_stop(struct fs *fs)
{
	struct fs_ns *ns = fs->ns;
	struct fs_iprune *ip = ns->iprune;

	if (ip == NULL)
		return;
	cvw_worker_stop(&ip->w);
	pthread_cond_destroy(&ip->cv);
	ns->iprune = NULL;
	free(ip);
}
