/*
 * fs_cluster.c — a lockproto=dlm mount in the cluster (fs_cluster.h):
 * lockspace, journal slot lock, the fs-wide glock and what it protects,
 * recovery of dead nodes, self-fencing.
 *
 * The fs glock (fs_glock.c) protects everything this node caches from
 * the device: metadata blocks (fs_cache.c), allocator state (fs_alloc.c:
 * free counts, reservations, inode chunks, hints; statfs reads them).
 * Nothing else mirrors shared disk state: in-memory inodes (fs_inode.c)
 * hold only this node's kernel references, opens and its own slot's
 * orphan list; directory readahead (fs_statahead.c) only prefetches into
 * the block cache; file data is read from the device (fs_data.c keeps
 * only unwritten runs, flushed before a demote); the superblock never
 * changes; this node's journal is its own. So:
 *  - sync (leaving EX): fs_journal_writeback: commit, checkpoint (every
 *    block in place, journal empty), data written, device flushed;
 *  - inval (a grant with a new generation): fs_cache_drop_all, then
 *    fs_alloc_reload. Nothing is dirty then (we did not hold EX).
 *
 * Recovery (GFS2's "first to get the lock recovers"): a demote from EX
 * writes everything in place and empties the journal, so only a node
 * that died holding the fs glock in EX (or PW) can leave committed
 * transactions unwritten in place, and the DLM then marks the glock's
 * LVB invalid. Every grant that finds the LVB invalid therefore recovers
 * before any holder runs (fs_glock.c: a PR grant steps down to NL and
 * queues for EX first): under EX it takes the lock of every other slot
 * it can get (EX, NOQUEUE, NOEXP: a live owner holds its slot's lock for
 * its whole mount, so a granted lock means a dead owner), replays that
 * slot's journal if the slot map says mounted, marks the slot free, and
 * lets the lock go (fs_core_recover_slots); then it writes a fresh
 * generation, so every node drops its caches at its next grant. The
 * node-down callback itself only counts (it runs on the DLM's callback
 * thread, which must not block: our lock requests complete through it).
 *
 * Self-fencing: a DLM call failing with -ESHUTDOWN (the cluster declared
 * us dead), a demote that could not write back, or quorum lost for longer
 * than the cluster's timeout_ms (checked every 100 ms by the thread)
 * fences the node: the journal is aborted (no commit or checkpoint writes
 * any more) and every request fails with EIO. Unmount then leaves the
 * lockspace as if crashed so that a survivor replays our journal.
 *
 * Locking: cl->mu protects fs, the job fields, fenced and the counters;
 * it is never held across a DLM call, and never taken by the glock
 * callbacks while fs code runs under it. Order: cl->mu is a leaf.
 */
#include "fusefs/fs_cluster.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fusefs/fs_core_priv.h"
#include "fusefs/fs_glock.h"
#include "fusefs/fs_stats.h"
#include "lockmgr/lk.h"
#include "lockmgr/lk_config.h"

struct fs_cluster {
	struct lk_ls *ls;	  /* immutable after open */
	char name[64];		  /* immutable */
	uint32_t node;		  /* immutable */
	unsigned minhold_ms;	  /* immutable */
	unsigned timeout_ms;	  /* immutable: quorum loss -> fence */
	struct fs_glock *gl;	  /* immutable after attach */
	struct lk_lock *slot_lk;  /* mount thread: own slot's lock */
	int slot;		  /* immutable after claim; -1 */
	struct lk_lock **try_lk;  /* per slot: recovery locks (thread
				     that took them) */
	unsigned nslots;	  /* immutable after attach */
	struct fs_stats_lk *stlk; /* stats "locks" section */

	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct fs *fs;		      /* mu */
	uint64_t deaths;	      /* mu: node-down callbacks */
	int stop;		      /* mu */
	int fenced;		      /* mu */
	uint64_t recoveries;	      /* mu: slots replayed here */
	uint64_t recovered_tx;	      /* mu */
	uint64_t drops, dropped_bufs; /* mu: cache drops */
	uint64_t sync_errors;	      /* mu */
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void log_msg(int level, const char *msg, void *arg)
{
	(void)arg;
	if (level <= 1)
		fprintf(stderr, "ucfs: lock manager: %s\n", msg);
}

/* ---- glock ops (run by fs_glock.c, without its lock) ----------------- */

static int fs_gl_sync(struct fs_glock *gl, int from, int to, void *arg)
{
	struct fs_cluster *cl = arg;
	struct fs *fs;
	int ret;

	(void)gl;
	(void)from;
	(void)to;
	pthread_mutex_lock(&cl->mu);
	fs = cl->fs;
	pthread_mutex_unlock(&cl->mu);
	if (fs == NULL || fs->j == NULL)
		return 0;
	ret = fs_journal_writeback(fs);
	if (ret < 0) {
		pthread_mutex_lock(&cl->mu);
		cl->sync_errors++;
		pthread_mutex_unlock(&cl->mu);
		fs_cluster_fence(cl, "cannot write back before a demote");
	}
	return ret;
}

static void fs_gl_inval(struct fs_glock *gl, void *arg)
{
	struct fs_cluster *cl = arg;
	unsigned n = 0, busy = 0;
	struct fs *fs;
	int ret = 0;

	(void)gl;
	pthread_mutex_lock(&cl->mu);
	fs = cl->fs;
	pthread_mutex_unlock(&cl->mu);
	if (fs == NULL || fs->cache == NULL)
		return; /* mounting: nothing cached yet */
	n = fs_cache_drop_all(fs, &busy);
	if (fs->alloc != NULL)
		ret = fs_alloc_reload(fs);
	pthread_mutex_lock(&cl->mu);
	cl->drops++;
	cl->dropped_bufs += n;
	pthread_mutex_unlock(&cl->mu);
	if (busy > 0 || ret < 0)
		fs_cluster_fence(cl, busy > 0
					 ? "dirty blocks at a cache drop"
					 : "cannot reload the resource groups");
}

/* The LVB is invalid: a node died holding EX (or nobody set it yet).
 * In EX: replay and free every slot whose owner is gone. */
static int fs_gl_recover(struct fs_glock *gl, void *arg)
{
	struct fs_cluster *cl = arg;
	struct fs *fs;
	int ret;

	(void)gl;
	pthread_mutex_lock(&cl->mu);
	fs = cl->fs;
	pthread_mutex_unlock(&cl->mu);
	if (fs == NULL || cl->slot < 0)
		return 0;
	ret = fs_core_recover_slots(fs, 1);
	if (ret < 0)
		fs_cluster_fence(cl, "cannot replay a dead node's journal");
	return ret;
}

static const struct fs_glock_ops fs_gl_ops = {
    .sync = fs_gl_sync,
    .inval = fs_gl_inval,
    .recover = fs_gl_recover,
};

/* ---- watchdog thread and node-down callback --------------------------- */

static void check_quorum(struct fs_cluster *cl, uint64_t *lost_since)
{
	uint64_t gen, members;

	if (lk_ls_members(cl->ls, &gen, &members)) {
		*lost_since = 0;
		return;
	}
	if (*lost_since == 0)
		*lost_since = now_ms();
	else if (now_ms() - *lost_since > cl->timeout_ms)
		fs_cluster_fence(cl, "quorum lost");
}

static void *cl_thread(void *arg)
{
	struct fs_cluster *cl = arg;
	uint64_t lost_since = 0;

	pthread_mutex_lock(&cl->mu);
	while (!cl->stop) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&cl->cv, &cl->mu, &ts);
		if (cl->fs != NULL && !cl->fenced && !cl->stop) {
			pthread_mutex_unlock(&cl->mu);
			check_quorum(cl, &lost_since);
			pthread_mutex_lock(&cl->mu);
		}
	}
	pthread_mutex_unlock(&cl->mu);
	return NULL;
}

/* Node @nodeid died. Nothing to do here (fs_cluster.c header: the next
 * grant of the fs glock finds its LVB invalid if the dead node could
 * have left anything unwritten, and recovers in EX first); counted. */
static void cl_recover(struct lk_ls *ls, uint32_t nodeid, void *arg)
{
	struct fs_cluster *cl = arg;

	(void)ls;
	(void)nodeid;
	pthread_mutex_lock(&cl->mu);
	cl->deaths++;
	pthread_mutex_unlock(&cl->mu);
}

/* ---- open / close ----------------------------------------------------- */

static int load_config(struct fs_cluster *cl, const struct fs_cluster_opts *o,
		       char *why, size_t whylen)
{
	struct lk_config *cfg = calloc(1, sizeof(*cfg));
	const char *reason = NULL;
	char msg[300];
	int ret;

	if (cfg == NULL)
		return -ENOMEM;
	ret = lk_config_load(o->cluster_file, cfg, &reason);
	if (ret < 0) {
		snprintf(msg, sizeof(msg), "cluster=%s: %s", o->cluster_file,
			 reason != NULL ? reason : strerror(-ret));
		fs_why(why, whylen, ret, msg);
	} else if (lk_config_node(cfg, o->node_id) == NULL) {
		snprintf(msg, sizeof(msg), "node=%u is not a node of %s",
			 o->node_id, o->cluster_file);
		ret = fs_why(why, whylen, -EINVAL, msg);
	} else {
		snprintf(cl->name, sizeof(cl->name), "%s", cfg->cluster);
		cl->timeout_ms = cfg->timeout_ms;
	}
	free(cfg);
	return ret;
}

int fs_cluster_open(const struct fs_cluster_opts *o, struct fs_cluster **out,
		    char *why, size_t whylen)
{
	struct fs_cluster *cl = calloc(1, sizeof(*cl));
	struct lk_ls_config lc = {0};
	char msg[300];
	int ret;

	if (cl == NULL)
		return -ENOMEM;
	cl->node = o->node_id;
	cl->minhold_ms = o->minhold_ms;
	cl->slot = -1;
	pthread_mutex_init(&cl->mu, NULL);
	pthread_cond_init(&cl->cv, NULL);
	ret = load_config(cl, o, why, whylen);
	if (ret < 0)
		goto out_free;
	lc.cluster_file = o->cluster_file;
	lc.nodeid = o->node_id;
	lc.recover = cl_recover;
	lc.log = log_msg;
	lc.arg = cl;
	ret = lk_ls_open(&lc, &cl->ls);
	if (ret < 0) {
		snprintf(msg, sizeof(msg),
			 "cannot join cluster %s as node %u: "
			 "%s",
			 cl->name, o->node_id, strerror(-ret));
		fs_why(why, whylen, ret, msg);
		goto out_free;
	}
	ret = -pthread_create(&cl->thread, NULL, cl_thread, cl);
	if (ret < 0)
		goto out_close;
	ret = lk_ls_wait_quorum(cl->ls, o->quorum_ms ? (int)o->quorum_ms
						     : FS_CLUSTER_QUORUM_MS);
	if (ret < 0) {
		snprintf(msg, sizeof(msg),
			 "cluster %s: no quorum after %u ms "
			 "(are enough nodes up?)",
			 cl->name,
			 o->quorum_ms ? o->quorum_ms : FS_CLUSTER_QUORUM_MS);
		fs_why(why, whylen, ret, msg);
		goto out_thread;
	}
	*out = cl;
	return 0;

out_thread:
	pthread_mutex_lock(&cl->mu);
	cl->stop = 1;
	pthread_cond_broadcast(&cl->cv);
	pthread_mutex_unlock(&cl->mu);
	pthread_join(cl->thread, NULL);
out_close:
	lk_ls_close(cl->ls);
out_free:
	pthread_cond_destroy(&cl->cv);
	pthread_mutex_destroy(&cl->mu);
	free(cl);
	return ret;
}

const char *fs_cluster_name(const struct fs_cluster *cl)
{
	return cl->name;
}

uint32_t fs_cluster_node(const struct fs_cluster *cl)
{
	return cl->node;
}

struct lk_ls *fs_cluster_ls(struct fs_cluster *cl)
{
	return cl->ls;
}

int fs_cluster_attach(struct fs_cluster *cl, struct fs *fs)
{
	struct lk_name n;
	int ret;

	cl->nslots = fs->sb.slot_count;
	cl->try_lk = calloc(cl->nslots, sizeof(*cl->try_lk));
	if (cl->try_lk == NULL)
		return -ENOMEM;
	lk_name_make(&n, FS_LK_FS, 0, NULL);
	ret = fs_glock_new(cl->ls, &n, cl->minhold_ms, &fs_gl_ops, cl, &cl->gl);
	if (ret < 0)
		return ret;
	pthread_mutex_lock(&cl->mu);
	cl->fs = fs;
	pthread_mutex_unlock(&cl->mu);
	return 0;
}

void fs_cluster_detach(struct fs_cluster *cl, int held)
{
	if (held)
		fs_glock_release(cl->gl, LK_EX);
	pthread_mutex_lock(&cl->mu);
	cl->fs = NULL;
	pthread_mutex_unlock(&cl->mu);
}

/* A slot lock request's outcome, from its completion callback (a NOQUEUE
 * request refused by a remote master releases its handle once the
 * callback returned: lk_wait on it could touch a freed handle). */
struct slot_wait {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done, status;
};

static void slot_done(struct lk_lock *lk, int status, void *arg)
{
	struct slot_wait *w = arg;

	(void)lk;
	pthread_mutex_lock(&w->mu);
	w->done = 1;
	w->status = status;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

static const struct lk_lock_ops slot_ops = {.completion = slot_done};

/* EX on slot @s's lock. 1 granted (*out), 0 refused, -errno. Not from a
 * DLM callback. */
static int slot_lock(struct fs_cluster *cl, unsigned s, unsigned flags,
		     struct lk_lock **out)
{
	struct slot_wait w = {.done = 0};
	struct lk_name n;
	struct lk_lock *lk = NULL;
	int ret;

	pthread_mutex_init(&w.mu, NULL);
	pthread_cond_init(&w.cv, NULL);
	lk_name_make(&n, FS_LK_SLOT, s, NULL);
	ret =
	    lk_lock(cl->ls, &n, LK_EX, LK_NOQUEUE | flags, &slot_ops, &w, &lk);
	if (ret == 0) {
		pthread_mutex_lock(&w.mu);
		while (!w.done)
			pthread_cond_wait(&w.cv, &w.mu);
		ret = w.status;
		pthread_mutex_unlock(&w.mu);
	} else if (ret == LK_GRANTED_NOW) {
		ret = 0;
	}
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
	if (ret == -EAGAIN)
		return 0;
	if (ret < 0)
		return ret;
	*out = lk;
	return 1;
}

int fs_cluster_slot_claim(struct fs_cluster *cl, unsigned count, unsigned *slot,
			  char *why, size_t whylen)
{
	char msg[120];

	for (unsigned s = 0; s < count; s++) {
		int r = slot_lock(cl, s, 0, &cl->slot_lk);

		if (r < 0)
			return fs_why(why, whylen, r,
				      "slot lock request "
				      "failed");
		if (r == 1) {
			cl->slot = (int)s;
			*slot = s;
			return 0;
		}
	}
	snprintf(msg, sizeof(msg),
		 "all %u journal slots are in use (mkfs.ucfs "
		 "-j sets how many nodes may mount)",
		 count);
	return fs_why(why, whylen, -EBUSY, msg);
}

int fs_cluster_slot_try(struct fs_cluster *cl, unsigned slot)
{
	if (slot >= cl->nslots || (int)slot == cl->slot)
		return 0;
	return slot_lock(cl, slot, LK_NOEXP, &cl->try_lk[slot]);
}

void fs_cluster_slot_drop(struct fs_cluster *cl, unsigned slot)
{
	if (slot < cl->nslots && cl->try_lk[slot] != NULL) {
		lk_unlock(cl->try_lk[slot], 0);
		cl->try_lk[slot] = NULL;
	}
}

void fs_cluster_note_recovery(struct fs_cluster *cl, unsigned slot,
			      unsigned ntx)
{
	char msg[120];

	pthread_mutex_lock(&cl->mu);
	cl->recoveries++;
	cl->recovered_tx += ntx;
	pthread_mutex_unlock(&cl->mu);
	snprintf(msg, sizeof(msg),
		 "recovered journal slot %u (%u "
		 "transactions replayed)",
		 slot, ntx);
	log_msg(1, msg, NULL);
}

/* ---- holders ---------------------------------------------------------- */

/* Self-fencing, part 1: no request runs (even under a cached grant)
 * while this node is not in a quorate membership; after timeout_ms of
 * that the watchdog fences us and this returns -EIO. */
static int wait_quorum(struct fs_cluster *cl)
{
	struct timespec nap = {0, 10 * 1000 * 1000};
	uint64_t gen, members;

	while (!lk_ls_members(cl->ls, &gen, &members)) {
		if (fs_cluster_fenced(cl))
			return -EIO;
		nanosleep(&nap, NULL);
	}
	return 0;
}

int fs_cluster_lock(struct fs_cluster *cl, int mode)
{
	int ret = wait_quorum(cl);

	if (ret == 0)
		ret = fs_glock_acquire(cl->gl, mode);

	if (ret < 0)
		fs_cluster_fence(cl, "lock manager refused the fs lock");
	return ret < 0 ? -EIO : 0;
}

void fs_cluster_unlock(struct fs_cluster *cl, int mode)
{
	fs_glock_release(cl->gl, mode);
}

void fs_cluster_fence(struct fs_cluster *cl, const char *why)
{
	struct fs *fs;
	int first;
	char msg[200];

	pthread_mutex_lock(&cl->mu);
	first = !cl->fenced;
	cl->fenced = 1;
	fs = cl->fs;
	pthread_mutex_unlock(&cl->mu);
	if (!first)
		return;
	if (fs != NULL)
		fs_journal_abort(fs);
	if (cl->gl != NULL)
		fs_glock_fence(cl->gl);
	snprintf(msg, sizeof(msg),
		 "node %u fenced itself (%s): no more "
		 "device writes, every request fails with EIO; unmount it",
		 cl->node, why);
	log_msg(0, msg, NULL);
}

int fs_cluster_fenced(struct fs_cluster *cl)
{
	int f;

	pthread_mutex_lock(&cl->mu);
	f = cl->fenced;
	pthread_mutex_unlock(&cl->mu);
	return f;
}

/* ---- stats ------------------------------------------------------------ */

static void cluster_section(struct fs_json *o, void *arg)
{
	struct fs_cluster *cl = arg;
	struct fs_glock_stats g;

	fs_glock_stats_get(cl->gl, &g);
	fs_json_str(o, "cluster", cl->name);
	fs_json_u64(o, "node_id", cl->node);
	fs_json_i64(o, "slot", cl->slot);
	fs_json_str(o, "glock_mode",
		    g.mode < 0 ? "none" : lk_mode_name(g.mode));
	fs_json_u64(o, "glock_holders", g.holders);
	fs_json_u64(o, "glock_acquires", g.acquires);
	fs_json_u64(o, "glock_hits", g.hits);
	fs_json_u64(o, "glock_requests", g.requests);
	fs_json_u64(o, "glock_retries", g.retries);
	fs_json_u64(o, "glock_wait_ns", g.wait_ns);
	fs_json_u64(o, "demotes_to_pr", g.demote_pr);
	fs_json_u64(o, "demotes_to_nl", g.demote_nl);
	fs_json_u64(o, "demote_ns", g.demote_ns);
	fs_json_u64(o, "lvb_generation", g.generation);
	fs_json_u64(o, "lvb_invalid_recoveries", g.recovers);
	pthread_mutex_lock(&cl->mu);
	fs_json_u64(o, "cache_drops", cl->drops);
	fs_json_u64(o, "cache_dropped_blocks", cl->dropped_bufs);
	fs_json_u64(o, "node_deaths", cl->deaths);
	fs_json_u64(o, "recoveries", cl->recoveries);
	fs_json_u64(o, "recovered_tx", cl->recovered_tx);
	fs_json_u64(o, "sync_errors", cl->sync_errors);
	fs_json_bool(o, "fenced", cl->fenced);
	pthread_mutex_unlock(&cl->mu);
}

static const char *type_name(unsigned type)
{
	return type == FS_LK_FS ? "fs" : type == FS_LK_SLOT ? "slot" : NULL;
}

int fs_cluster_stats_add(struct fs_cluster *cl, struct fs_stats *st)
{
	int ret = fs_stats_add_section(st, "cluster", cluster_section, cl);

	if (ret == 0)
		ret = fs_stats_add_locks(st, cl->ls, type_name, &cl->stlk);
	if (ret < 0)
		fs_stats_remove_section(st, "cluster");
	return ret;
}

void fs_cluster_stats_remove(struct fs_cluster *cl, struct fs_stats *st)
{
	if (cl->stlk != NULL)
		fs_stats_remove_locks(st, cl->stlk);
	cl->stlk = NULL;
	fs_stats_remove_section(st, "cluster");
}

/* ---- close ------------------------------------------------------------ */

static void stop_thread(struct fs_cluster *cl)
{
	pthread_mutex_lock(&cl->mu);
	cl->stop = 1;
	cl->fs = NULL;
	pthread_cond_broadcast(&cl->cv);
	pthread_mutex_unlock(&cl->mu);
	pthread_join(cl->thread, NULL);
}

static void cl_free(struct fs_cluster *cl)
{
	free(cl->try_lk);
	pthread_cond_destroy(&cl->cv);
	pthread_mutex_destroy(&cl->mu);
	free(cl);
}

void fs_cluster_close(struct fs_cluster *cl)
{
	if (cl == NULL)
		return;
	if (fs_cluster_fenced(cl)) {
		fs_cluster_abandon(cl);
		return;
	}
	stop_thread(cl);
	fs_glock_free(cl->gl);
	if (cl->slot_lk != NULL)
		lk_unlock(cl->slot_lk, 0);
	for (unsigned s = 0; s < cl->nslots; s++)
		fs_cluster_slot_drop(cl, s);
	lk_ls_close(cl->ls);
	cl_free(cl);
}

void fs_cluster_abandon(struct fs_cluster *cl)
{
	if (cl == NULL)
		return;
	stop_thread(cl);
	if (cl->gl != NULL)
		fs_glock_fence(cl->gl);
	fs_glock_free(cl->gl);
	lk_ls_abandon(cl->ls);
	cl_free(cl);
}
