/*
 * fs_statfs.c — statfs counts that agree across cluster nodes (GFS2's
 * statfs design; FORMAT.md "Statfs records", MOUNT.md statfs_quantum=).
 *
 * A filesystem with ro_compat STATFS has a master record (the free
 * blocks and inodes as of the last fold) and one change record per slot
 * (what that slot allocated and freed since). Every change of an rgroup
 * header's free or dinodes count moves this slot's change record in the
 * same transaction (fs_statfs_change, from fs_alloc.c under the group's
 * lock), so the master plus every slot's change always equals the sum
 * of the group headers, whatever a crash cuts.
 *
 * A fold moves our change into the master: under the statfs glock
 * (FS_LK_STATFS/0) in EX, one transaction adds the change to the master
 * and zeroes the change. A worker folds every statfs_quantum seconds
 * (when the change is not zero), and the unmount folds last. statfs on
 * a dlm mount reads the master under the glock in PR (cached until
 * another node folds: its EX grant takes ours away, and a grant with a
 * new generation drops our cached master) plus our own change: the
 * other nodes' allocations show within one quantum. With
 * statfs_percent=P (GFS2's), a change whose free blocks reach P% of the
 * master's (as this node last read it) wakes the worker for an early
 * fold. With statfs_quantum=0 (GFS2's statfs_slow), statfs counts the
 * groups under their locks instead, and folds go on every default
 * quantum. A nolock mount keeps the records the same way but answers
 * statfs from the group counts it holds in memory (exact: nobody else
 * writes). A record that cannot be read (a damaged master) does not
 * fail statfs: the groups are counted under their locks instead
 * (GFS2's statfs_slow), logged once, until fsck.ucfs -y rewrites it.
 *
 * A dead node's change record, after its journal was replayed, holds
 * exactly the part of its change that was committed: the survivor that
 * recovers its slot (fs_iopen.c adopt, under the slot's lock) folds it
 * with fs_statfs_fold_slot. A slot left free with a change not zero
 * (the first mount after a whole-cluster crash replayed it) is taken
 * over the same way (fs_core_slots_leftover).
 *
 * Locking: sf->mu protects our change record's content (taken inside a
 * handle, under the allocator's rg->lock, before the journal and cache
 * locks); sf->fold_mu serializes folds (no handle held; the statfs
 * glock is taken under it, and a dead slot's lock before it).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "fusefs/cluster/fs_cluster.h"
#include "fusefs/cluster/fs_glock.h"
#include "fusefs/core/fs_core_priv.h"
#include "lockmgr/cv_wait.h"
#include "lockmgr/cv_worker.h"
#include "lockmgr/lk.h"

struct fs_statfs {
	pthread_mutex_t mu;	 /* our change record's content */
	pthread_mutex_t fold_mu; /* one fold at a time */
	struct fs_glock *gl;	 /* immutable: dlm, FS_LK_STATFS/0 */
	int rw;			 /* immutable: records kept (rw, a slot) */
	unsigned quantum_ms;	 /* immutable: worker's period */
	unsigned percent;	 /* immutable: statfs_percent= (0: off) */
	int slow;		 /* immutable: statfs_quantum=0: statfs
				    counts the groups (GFS2's) */
	int64_t master_free;	 /* mu: the master's free blocks as last
				    read here (at mount: the groups') */
	int over;		 /* mu: our change passed percent since
				    the last fold (counted once) */
	int kick;		 /* mu: fold now, do not wait (percent) */
	int slow_logged;	 /* atomic: the fallback was logged */
	int untracked;		 /* atomic: our change record is bad:
				    changes no longer go to it */
	pthread_cond_t cv;	 /* mu: the worker's (stop) */
	struct cvw_worker w;	 /* the worker (fs_statfs_start), mu */
	uint64_t folds;		 /* mu: folds of our change (read_counts) */
};

static int have_records(const struct fs *fs)
{
	return (fs->sb.feature_ro_compat & FS_FEATURE_RO_COMPAT_STATFS) != 0;
}

int fs_statfs_init(struct fs *fs, unsigned quantum_s)
{
	struct fs_statfs *sf;
	int ret = 0;

	if (!have_records(fs))
		return 0;
	sf = calloc(1, sizeof(*sf));
	if (sf == NULL)
		return -ENOMEM;
	pthread_mutex_init(&sf->mu, NULL);
	pthread_mutex_init(&sf->fold_mu, NULL);
	pthread_cond_init(&sf->cv, NULL);
	sf->rw = !fs->ro && fs->slot < fs->sb.slot_count;
	sf->quantum_ms = (quantum_s ? quantum_s : FS_STATFS_QUANTUM_S) * 1000u;
	sf->percent = fs->opts.statfs_percent;
	sf->slow = fs->opts.statfs_slow;
	fs->sfs = sf;
	if (sf->percent != 0) {
		struct fs_space sp;

		fs_space_get(fs, &sp); /* until the master is read */
		sf->master_free = (int64_t)sp.free_blocks;
	}
	if (fs->cl != NULL)
		ret = fs_glock_get(fs_cluster_glocks(fs->cl), FS_LK_STATFS, 0,
				   &sf->gl);
	if (ret < 0)
		fs_statfs_destroy(fs);
	return ret;
}

void fs_statfs_destroy(struct fs *fs)
{
	struct fs_statfs *sf = fs->sfs;

	if (sf == NULL)
		return;
	fs_statfs_stop(fs);
	fs_glock_put(sf->gl);
	pthread_cond_destroy(&sf->cv);
	pthread_mutex_destroy(&sf->mu);
	pthread_mutex_destroy(&sf->fold_mu);
	free(sf);
	fs->sfs = NULL;
}

unsigned fs_statfs_credits(const struct fs *fs)
{
	return fs->sfs != NULL && fs->sfs->rw ? 1 : 0;
}

/* Read statfs record @blk, checking it is the one of @slot. */
static int rec_read(struct fs *fs, uint64_t blk, uint32_t slot,
		    struct fs_buf **out)
{
	const struct fs_statfs_rec *r;
	int ret = fs_buf_read(fs, blk, FS_BT_STATFS, out);

	if (ret < 0)
		return ret;
	r = (*out)->data;
	if (r->slot != slot) {
		fs_buf_put(*out);
		*out = NULL;
		return -EUCLEAN;
	}
	return 0;
}

/* Once per mount and @flag (0 before): @what and error @err, to syslog
 * and the daemon's stderr. */
static void say_once(int *flag, int err, const char *what)
{
	if (__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED))
		return;
	syslog(LOG_WARNING, "ucfs: %s (%s); fsck.ucfs -y repairs it", what,
	       strerror(-err));
	fprintf(stderr, "ucfs: %s (%s); fsck.ucfs -y repairs it\n", what,
		strerror(-err));
}

/* GFS2's test (gfs2_statfs_change): |100 * change| >= master * percent.
 * Called with sf->mu held; wakes the worker (sf->kick: also one that was
 * not asleep yet), again at every change until it folded. */
static void percent_check(struct fs *fs, const struct fs_statfs_rec *r)
{
	struct fs_statfs *sf = fs->sfs;
	int64_t x = r->free < 0 ? -r->free : r->free;

	if (sf->percent == 0 ||
	    100 * x < sf->master_free * (int64_t)sf->percent)
		return;
	if (!sf->over)
		FS_STAT_ADD(fs, statfs_percent_wakes, 1);
	sf->over = 1;
	sf->kick = 1;
	pthread_cond_signal(&sf->cv);
}

int fs_statfs_change(struct fs_tx *tx, int64_t dfree, int64_t dinodes)
{
	struct fs *fs = fs_tx_fs(tx);
	struct fs_statfs *sf = fs->sfs;
	struct fs_statfs_rec *r;
	struct fs_buf *b;
	int ret;

	if (sf == NULL || !sf->rw)
		return 0;
	ret = __atomic_load_n(&sf->untracked, __ATOMIC_RELAXED)
		  ? -EUCLEAN
		  : rec_read(fs, fs_statfs_change_blk(&fs->sb, fs->slot),
			     fs->slot, &b);
	if (ret == -EUCLEAN) {
		/* derived data: the allocation goes on without it */
		say_once(&sf->untracked, ret,
			 "this node's statfs change record is unreadable: "
			 "allocations and frees are no longer counted in it "
			 "and statfs counts the resource groups");
		FS_STAT_ADD(fs, statfs_untracked, 1);
		return 0;
	}
	if (ret < 0)
		return ret;
	pthread_mutex_lock(&sf->mu);
	ret = fs_tx_write(tx, b);
	if (ret == 0) {
		r = b->data;
		r->free += dfree;
		r->dinodes += dinodes;
		percent_check(fs, r);
	}
	pthread_mutex_unlock(&sf->mu);
	fs_buf_put(b);
	return ret;
}

/* The master @m as read or folded now: the statfs_percent test's base. */
static void master_seen(struct fs_statfs *sf, const struct fs_statfs_rec *m)
{
	pthread_mutex_lock(&sf->mu);
	sf->master_free = m->free;
	pthread_mutex_unlock(&sf->mu);
}

/* In @tx: change record @bc added to master @bm and zeroed; *@moved 1
 * if it was not zero. */
static int fold_into(struct fs_tx *tx, struct fs_buf *bm, struct fs_buf *bc,
		     int *moved)
{
	struct fs_statfs_rec *m = bm->data, *c = bc->data;
	int ret;

	if (c->free == 0 && c->dinodes == 0)
		return 0;
	ret = fs_tx_write(tx, bm);
	if (ret == 0)
		ret = fs_tx_write(tx, bc);
	if (ret < 0)
		return ret;
	m->free += c->free;
	m->dinodes += c->dinodes;
	c->free = 0;
	c->dinodes = 0;
	*moved = 1;
	return 0;
}

/*
 * One transaction: slot @slot's change added to the master and zeroed.
 * @mu: our own change's lock (NULL for a dead slot's, whose slot lock
 * the caller holds). *moved: 1 if the change was not zero. Under the
 * statfs glock in EX (dlm).
 */
static int fold_tx(struct fs *fs, unsigned slot, pthread_mutex_t *mu,
		   int *moved)
{
	struct fs_buf *bm = NULL, *bc = NULL;
	struct fs_tx *tx;
	int ret, r2;

	*moved = 0;
	ret = fs_tx_begin(fs, 2, &tx);
	if (ret < 0)
		return ret;
	ret =
	    rec_read(fs, fs_statfs_master_blk(&fs->sb), FS_STATFS_MASTER, &bm);
	if (ret == 0)
		ret = rec_read(fs, fs_statfs_change_blk(&fs->sb, slot), slot,
			       &bc);
	if (ret == 0 && mu != NULL) {
		pthread_mutex_lock(mu);
		ret = fold_into(tx, bm, bc, moved);
		fs->sfs->folds += *moved;
		if (*moved) /* the statfs_percent test starts again */
			fs->sfs->over = 0;
		pthread_mutex_unlock(mu);
	} else if (ret == 0) {
		ret = fold_into(tx, bm, bc, moved);
	}
	if (ret == 0)
		master_seen(fs->sfs, bm->data);
	fs_buf_put(bm);
	fs_buf_put(bc);
	r2 = fs_tx_end(tx);
	return ret < 0 ? ret : r2;
}

/* 1 if slot @slot's change record is not zero (also if unreadable: the
 * fold reports that); @mu: our own change's lock, or NULL. */
static int change_pending(struct fs *fs, unsigned slot, pthread_mutex_t *mu)
{
	const struct fs_statfs_rec *c;
	struct fs_buf *b;
	int ret;

	if (rec_read(fs, fs_statfs_change_blk(&fs->sb, slot), slot, &b) < 0)
		return 1;
	c = b->data;
	if (mu != NULL)
		pthread_mutex_lock(mu);
	ret = c->free != 0 || c->dinodes != 0;
	if (mu != NULL)
		pthread_mutex_unlock(mu);
	fs_buf_put(b);
	return ret;
}

/* Fold slot @slot's change under the glock in EX (dlm). */
static int fold_locked(struct fs *fs, unsigned slot, pthread_mutex_t *mu,
		       int *moved)
{
	struct fs_statfs *sf = fs->sfs;
	int ret;

	if (sf->gl != NULL && fs_glock_acquire(sf->gl, LK_EX) < 0)
		return -EIO;
	ret = fold_tx(fs, slot, mu, moved);
	if (sf->gl != NULL)
		fs_glock_release(sf->gl, LK_EX);
	return ret;
}

int fs_statfs_fold(struct fs *fs)
{
	struct fs_statfs *sf = fs->sfs;
	int ret = 0, moved = 0;

	if (sf == NULL || !sf->rw)
		return 0;
	if (__atomic_load_n(&sf->untracked, __ATOMIC_RELAXED))
		return -EUCLEAN; /* nothing right to fold */
	pthread_mutex_lock(&sf->fold_mu);
	if (change_pending(fs, fs->slot, &sf->mu))
		ret = fold_locked(fs, fs->slot, &sf->mu, &moved);
	pthread_mutex_unlock(&sf->fold_mu);
	if (moved)
		FS_STAT_ADD(fs, statfs_folds, 1);
	return ret;
}

int fs_statfs_fold_slot(struct fs *fs, unsigned slot)
{
	struct fs_statfs *sf = fs->sfs;
	int ret = 0, moved = 0;

	if (sf == NULL || !sf->rw || slot >= fs->sb.slot_count ||
	    slot == fs->slot)
		return 0;
	pthread_mutex_lock(&sf->fold_mu);
	fs_statfs_forget(fs, slot); /* the disk's copy, replayed */
	if (change_pending(fs, slot, NULL))
		ret = fold_locked(fs, slot, NULL, &moved);
	pthread_mutex_unlock(&sf->fold_mu);
	if (moved)
		FS_STAT_ADD(fs, statfs_dead_folds, 1);
	return ret;
}

int fs_statfs_slot_pending(struct fs *fs, unsigned slot)
{
	int ret;

	if (fs->sfs == NULL || slot >= fs->sb.slot_count)
		return 0;
	fs_statfs_forget(fs, slot);
	ret = change_pending(fs, slot, NULL);
	fs_statfs_forget(fs, slot); /* read again under its lock */
	return ret;
}

void fs_statfs_forget(struct fs *fs, unsigned slot)
{
	struct fs_buf *b;

	if (fs->sfs == NULL || slot >= fs->sb.slot_count)
		return;
	b = fs_cache_lookup(fs, fs_statfs_change_blk(&fs->sb, slot));
	if (b == NULL)
		return;
	fs_cache_unhash(b);
	fs_buf_put(b);
}

/* The master's counts (dlm: under the glock in PR) into *@nfree,
 * *@inodes. */
static int read_master(struct fs *fs, int64_t *nfree, int64_t *inodes)
{
	struct fs_statfs *sf = fs->sfs;
	const struct fs_statfs_rec *r;
	struct fs_buf *b;
	int ret;

	if (sf->gl != NULL && fs_glock_acquire(sf->gl, LK_PR) < 0)
		return -EIO;
	ret = rec_read(fs, fs_statfs_master_blk(&fs->sb), FS_STATFS_MASTER, &b);
	if (ret == 0) {
		r = b->data;
		*nfree = r->free;
		*inodes = r->dinodes;
		master_seen(sf, r);
		fs_buf_put(b);
	}
	if (sf->gl != NULL)
		fs_glock_release(sf->gl, LK_PR);
	return ret;
}

/* The master plus our own change, taken between the same two folds of
 * ours (a fold in between moves the change into the master: read
 * again). */
static int read_counts(struct fs *fs, int64_t *nfree, int64_t *inodes)
{
	struct fs_statfs *sf = fs->sfs;
	const struct fs_statfs_rec *r;
	uint64_t seen;
	struct fs_buf *b;
	int ret, again;

	do {
		pthread_mutex_lock(&sf->mu);
		seen = sf->folds;
		pthread_mutex_unlock(&sf->mu);
		ret = read_master(fs, nfree, inodes);
		if (ret < 0 || !sf->rw)
			return ret;
		ret = rec_read(fs, fs_statfs_change_blk(&fs->sb, fs->slot),
			       fs->slot, &b);
		if (ret < 0)
			return ret;
		pthread_mutex_lock(&sf->mu);
		r = b->data;
		*nfree += r->free;
		*inodes += r->dinodes;
		again = sf->folds != seen;
		pthread_mutex_unlock(&sf->mu);
		fs_buf_put(b);
	} while (again);
	return 0;
}

/* A record could not be read (@err): the groups counted instead, each
 * under its glock (exact, at a lock request per group this node does
 * not hold), said once per mount. fsck.ucfs finds and repairs it. */
static int count_groups(struct fs *fs, struct fs_space *out, int err)
{
	struct fs_statfs *sf = fs->sfs;

	say_once(&sf->slow_logged, err,
		 "statfs records unreadable: statfs counts the resource "
		 "groups");
	FS_STAT_ADD(fs, statfs_slow_reads, 1);
	return fs_space_count(fs, out);
}

int fs_statfs_space(struct fs *fs, struct fs_space *out)
{
	int64_t nfree = 0, inodes = 0;
	int ret;

	fs_space_get(fs, out);
	if (fs->sfs == NULL || fs->cl == NULL)
		return 0; /* nolock: the group counts are exact */
	if (fs->sfs->slow) {
		FS_STAT_ADD(fs, statfs_slow_reads, 1);
		return fs_space_count(fs, out);
	}
	ret = __atomic_load_n(&fs->sfs->untracked, __ATOMIC_RELAXED)
		  ? -EUCLEAN
		  : read_counts(fs, &nfree, &inodes);
	if (ret < 0 && fs_cluster_fenced(fs->cl))
		return -EIO;
	if (ret < 0)
		return count_groups(fs, out, ret);
	FS_STAT_ADD(fs, statfs_reads, 1);
	if (nfree < 0)
		nfree = 0;
	if ((uint64_t)nfree > out->data_blocks)
		nfree = (int64_t)out->data_blocks;
	out->free_blocks = (uint64_t)nfree;
	out->inodes = inodes < 0 ? 0 : (uint64_t)inodes;
	return 0;
}

/* ---- the worker: a fold every quantum ---------------------------------- */

/* Until the next fold is due (@sf->mu held): a quantum, or at once if
 * statfs_percent kicked (sf->kick, set under mu: never missed). */
static void worker_sleep(struct fs_statfs *sf)
{
	if (!sf->kick)
		cvw_wait_ms(&sf->cv, &sf->mu, sf->quantum_ms);
	sf->kick = 0;
}

static void *fold_worker(void *arg)
{
	struct fs *fs = arg;
	struct fs_statfs *sf = fs->sfs;

	pthread_mutex_lock(&sf->mu);
	while (!cvw_worker_stopping(&sf->w)) {
		worker_sleep(sf);
		if (cvw_worker_stopping(&sf->w))
			break;
		pthread_mutex_unlock(&sf->mu);
		/* an error (fenced, journal aborted) leaves the change
		 * where it is: the next fold, or recovery, takes it */
		if (fs_statfs_fold(fs) < 0)
			FS_STAT_ADD(fs, statfs_fold_errors, 1);
		pthread_mutex_lock(&sf->mu);
	}
	pthread_mutex_unlock(&sf->mu);
	return NULL;
}

int fs_statfs_start(struct fs *fs)
{
	struct fs_statfs *sf = fs->sfs;

	if (sf == NULL || !sf->rw)
		return 0;
	return cvw_worker_start(&sf->w, &sf->mu, &sf->cv, fold_worker, fs,
				"ucfs-statfs");
}

void fs_statfs_stop(struct fs *fs)
{
	struct fs_statfs *sf = fs->sfs;

	if (sf != NULL)
		cvw_worker_stop(&sf->w);
}
