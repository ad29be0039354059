/*
 * fs_cluster.c — a lockproto=dlm mount in the cluster (fs_cluster.h):
 * lockspace, the glock engine and the ops of each lock type, the
 * watchdog, self-fencing, stats. The journal slot locks and recovery of
 * dead nodes: fs_recover.c (fs_cluster_internal.h: what both share).
 *
 * What each glock protects (FORMAT.md "Cluster locks"): an inode's lock
 * its blocks (inode, B+tree, xattr: the storage layer's "owner" of those
 * cached blocks, fs_core_priv.h) and its file data; a refcount tree's
 * lock (the same type, numbered by its root block) that tree; an
 * rgroup's lock its header, bitmaps and the allocator's memory of it
 * (counts, reservations, hints; fs_alloc.c); the mount lock (FS_LK_FS/0)
 * the slot map; the statfs lock (FS_LK_STATFS/0) the statfs master
 * record (fs_statfs.c); the records lock (FS_LK_JREC/0, fs_jrec.c: a
 * plain lock-manager lock, not a glock) no data, only the right to
 * write checkpoint records (given up, they are turned off and flushed
 * first). Nothing else mirrors shared disk state:
 * in-memory inodes (fs_inode.c) hold only this node's kernel
 * references, opens and its own slot's orphan list; directory
 * readahead (fs_statahead.c) only prefetches into the block cache, the
 * blocks of inodes whose glock it asked for ahead and holds (a later
 * grant with a new generation drops what it fetched); file data is read
 * from the device (fs_data.c keeps only unwritten runs, written before
 * a demote); the superblock never changes; this node's journal and
 * slotinfo (and statfs change record) are its own. So, per
 * lock (ops run on a demote worker or a holder's thread, never on the
 * DLM's callback thread):
 *  - sync (leaving EX): fs_journal_sync_owner: nothing if the owner was
 *    not written since the last checkpoint, else commit + checkpoint
 *    (the whole journal, ending with a checkpoint record: afterwards no
 *    journal block of ours that a replay would write carries an image of
 *    it) and, for an inode, its file data written and flushed;
 *    the mount lock: fs_journal_writeback;
 *  - inval (a grant with a new generation): fs_cache_drop_owner of that
 *    owner (an rgroup: also its counts reloaded, fs_alloc_rgrp_inval);
 *    the mount lock: everything (v1's fs_cache_drop_all + reload).
 *  - flush (an inode's lock about to leave EX, holders still admitted):
 *    the kernel writes back pages dirtied through a shared mapping
 *    (fs_kinval_flush);
 *  - drop (an inode's lock going to NL): the kernel drops what it
 *    cached of that inode (fs_kinval_inode: attributes, pages; a
 *    directory: fs_kinval_dir, the names handed out in it too, or every
 *    name while local requests wait for its lock; MOUNT.md "Kernel
 *    caches in cluster mounts");
 *
 * A ro node (fs_cluster_opts.ro) takes no slot, beats on no heartbeat
 * block, asks for every lock in PR (fs_cluster_glock refuses EX with
 * -EROFS; the mount lock is taken in PR whatever the caller asks) and
 * replays nothing: the fs lock has no recover op there, a mount that
 * finds a journal to replay is refused (fs_super.c), and a node-down
 * with no read-write survivor fences it (ro_recover).
 *
 * Recovery of dead nodes (node-down callback, journal slot locks,
 * the mount lock's recover op): fs_recover.c.
 *
 * Disk heartbeat (fs_hb.c): started before the lockspace, so that the
 * lock manager's disk hook (cl_disk) knows from the first tick which
 * nodes beat on the disk; this node beats from its slot claim on, and
 * the device's write gate (bd_set_gate: fs_hb_gate) lets a write through
 * only under a fresh disk lease. A slot whose owner still beats is
 * never recovered (fs_cluster_slot_try waits for its beat to stop). A
 * slot just claimed is watched before the mount writes to it
 * (fs_hb_start; a full hb_timeout when our membership is no majority,
 * watch_ms): another node granted the same slot by its own lockspace
 * behind a cut link refuses or fences one of the two.
 *
 * Self-fencing: a DLM call failing with -ESHUTDOWN (the cluster declared
 * us dead), the lock manager fencing us (disk tie-break, lk_ls_fenced),
 * the disk lease running out (fs_hb_fenced), a demote that could not
 * write back, or quorum lost (majority_up) for longer than the
 * cluster's timeout_ms (all checked every 100 ms by the thread) fences
 * the node: the device refuses every write from then on (bd_fence), the
 * journal is aborted, the disk heartbeat stops, the lockspace drops its
 * connections (the others see us dead once our beat is old), every
 * request fails with EIO, and the watchdog thread then drops the
 * kernel's caches (fenced_drop_kernel). Fencing is final: no rejoin in
 * place (MOUNT.md "Cluster mounts" says why); a remount is the way back.
 * No wait on the unmount path is unbounded then (fs_glock.c): unmount
 * leaves the lockspace as if crashed so that a survivor replays our
 * journal, and the daemon exits.
 *
 * Locking: cl->mu protects fs, the job fields, fenced and the counters;
 * it is never held across a DLM call, and never taken by the glock
 * callbacks while fs code runs under it. Order: cl->mu is a leaf.
 */
#include "fusefs/cluster/fs_cluster.h"
#include "fusefs/cluster/fs_cluster_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "blockdev/bd.h"
#include "fusefs/fs.h"
#include "fusefs/core/fs_core_priv.h"
#include "fusefs/cluster/fs_glock.h"
#include "fusefs/cluster/fs_hb.h"
#include "fusefs/cluster/fs_jrec.h"
#include "fusefs/namespace/fs_ns.h"
#include "fusefs/stats/fs_stats.h"
#include "lockmgr/cv_wait.h"
#include "lockmgr/lk.h"
#include "lockmgr/lk_config.h"

void fs_cl_log(int level, const char *msg, void *arg)
{
	(void)arg;
	if (level <= 1)
		fprintf(stderr, "ucfs: lock manager: %s\n", msg);
}

/* ---- glock ops (run by fs_glock.c, without its lock) ----------------- */

struct fs *fs_cl_fs(struct fs_cluster *cl)
{
	struct fs *fs;

	pthread_mutex_lock(&cl->mu);
	fs = cl->fs;
	if (fs != NULL)
		cl->ops_busy++;
	pthread_mutex_unlock(&cl->mu);
	return fs;
}

void fs_cl_fs_put(struct fs_cluster *cl, struct fs *fs)
{
	if (fs == NULL)
		return;
	pthread_mutex_lock(&cl->mu);
	/* only fs_cluster_quiesce (cl->fs NULL) waits for this: a wake-up
	 * at every op would also wake the watchdog thread (cl->cv), which
	 * then checks quorum and the heartbeat at every create */
	if (--cl->ops_busy == 0 && cl->fs == NULL)
		pthread_cond_broadcast(&cl->cv);
	pthread_mutex_unlock(&cl->mu);
}

void fs_cluster_quiesce(struct fs_cluster *cl)
{
	pthread_mutex_lock(&cl->mu);
	cl->fs = NULL;
	while (cl->ops_busy > 0)
		pthread_cond_wait(&cl->cv, &cl->mu);
	pthread_mutex_unlock(&cl->mu);
}

/* The storage layer's owner of what glock @gl covers (fs_core_priv.h:
 * the lock type and number are the owner's). */
static struct fs_owner owner_of(struct fs_glock *gl)
{
	struct fs_owner o = {fs_glock_type(gl), fs_glock_num(gl)};

	return o;
}

/*
 * What glock @gl covers, made durable in place before it leaves EX
 * (V2-PLAN "Owners"): nothing when it wrote nothing since the last
 * checkpoint, else commit + checkpoint (after it no journal block of
 * ours carries an image of it: recovery never replays over another
 * node's newer block) and its file data written. The fs lock (mount,
 * unmount): everything.
 */
static int owner_sync(struct fs *fs, struct fs_glock *gl)
{
	struct fs_trace_wb *wb = fs_glock_report(gl);
	struct fs_sync_done d;
	int ret;

	if (fs_glock_type(gl) == FS_LK_FS)
		return fs_journal_writeback(fs);
	ret = fs_journal_sync_owner_done(fs, owner_of(gl), &d);
	wb->log_blocks += d.log_blocks;
	wb->home_blocks += d.home_blocks;
	wb->data_bytes += d.data_bytes;
	wb->flushes += d.flushes;
	return ret;
}

/* Forget the cached blocks @gl covers (another node changed them). */
static unsigned owner_drop(struct fs *fs, struct fs_glock *gl)
{
	unsigned busy = 0;

	return fs_cache_drop_owner(fs, owner_of(gl), &busy);
}

static void count_drop(struct fs_cluster *cl, unsigned n)
{
	pthread_mutex_lock(&cl->mu);
	cl->drops++;
	cl->dropped_bufs += n;
	pthread_mutex_unlock(&cl->mu);
}

/* Leaving EX (any lock type that covers metadata). */
static int gl_sync(struct fs_glock *gl, int from, int to, void *arg)
{
	struct fs_cluster *cl = arg;
	struct fs *fs = fs_cl_fs(cl);
	int ret;

	(void)from;
	(void)to;
	if (fs == NULL || fs->j == NULL) {
		fs_cl_fs_put(cl, fs);
		return 0; /* mounting, or unmounting: written back already */
	}
	ret = owner_sync(fs, gl);
	fs_cl_fs_put(cl, fs);
	if (ret < 0) {
		pthread_mutex_lock(&cl->mu);
		cl->sync_errors++;
		pthread_mutex_unlock(&cl->mu);
		fs_cluster_fence(cl, "cannot write back before a demote");
	}
	return ret;
}

/* The fs lock (mount, unmount): v1's whole-cache drop. Nothing else runs
 * under it that could hold a block. */
static void fs_gl_inval(struct fs_glock *gl, void *arg)
{
	struct fs_cluster *cl = arg;
	struct fs *fs = fs_cl_fs(cl);
	unsigned n, busy = 0;
	int ret = 0;

	(void)gl;
	if (fs == NULL || fs->cache == NULL) {
		fs_cl_fs_put(cl, fs);
		return; /* mounting: nothing cached yet */
	}
	n = fs_cache_drop_all(fs, &busy);
	if (fs->alloc != NULL)
		ret = fs_alloc_reload(fs);
	fs_cl_fs_put(cl, fs);
	count_drop(cl, n);
	if (ret < 0)
		fs_cluster_fence(cl, "cannot reload the resource groups");
}

static const struct fs_glock_ops fs_gl_ops = {
    .sync = gl_sync,
    .inval = fs_gl_inval,
    .recover = fs_cl_gl_recover,
};

/* A ro node cannot recover (that takes EX): a mount that finds a slot to
 * replay is refused instead (fs_core_ro_unrecovered). */
static const struct fs_glock_ops fs_gl_ro_ops = {
    .inval = fs_gl_inval,
};

/* An inode's lock came back after another node changed the inode. */
static void inode_inval(struct fs_glock *gl, void *arg)
{
	struct fs_cluster *cl = arg;
	struct fs *fs = fs_cl_fs(cl);

	if (fs != NULL && fs->cache != NULL)
		count_drop(cl, owner_drop(fs, gl));
	fs_cl_fs_put(cl, fs);
}

/* Local requests wait for the lock (a directory's: the kernel likely
 * holds that directory for them). */
static int gl_waited(void *gl)
{
	return fs_glock_waiters(gl) > 0;
}

/*
 * An inode's lock goes to NL (another node will change the inode): the
 * kernel must not serve what it cached under it (fs_kinval.c). Must not
 * read the disk: whether it is a directory (whose names the kernel may
 * hold) comes from the cached block; unknown counts as one.
 */
static void inode_drop(struct fs_glock *gl, int from, void *arg)
{
	struct fs_cluster *cl = arg;
	struct fs *fs = fs_cl_fs(cl);
	uint64_t ino = fs_glock_num(gl);
	struct fs_buf *b;
	int dir = 1;

	(void)from;
	if (fs == NULL || fs->cache == NULL) {
		fs_cl_fs_put(cl, fs);
		return;
	}
	/* an inode made here whose iopen PR was put off: taken now, before
	 * the lock leaves (fs_ino_iopen_late) */
	fs_ino_iopen_late(fs, ino);
	/* no reference of the kernel (it forgot the inode: a name dropped
	 * with its directory's lock, an unlink): nothing cached to drop
	 * (a directory's names went with it), and no wait for the sink
	 * (most of a 2-node rm -rf's demotes) */
	if (!fs_ino_kernel_held(fs, ino)) {
		__atomic_add_fetch(&cl->kinval_skips, 1, __ATOMIC_RELAXED);
		fs_cl_fs_put(cl, fs);
		return;
	}
	b = fs_cache_lookup(fs, ino);
	if (b != NULL && (fs_cache_flags(b) & FS_BUF_UPTODATE)) {
		const struct fs_blk_hdr *h = b->data;
		const struct fs_dinode *di = b->data;

		if (h->type == FS_BT_INODE)
			dir = S_ISDIR(di->mode);
		else if (h->type == FS_BT_REFCOUNT)
			dir = 0;
	}
	fs_buf_put(b);
	if (dir)
		fs_kinval_dir(fs, ino, gl_waited, gl);
	else
		fs_kinval_inode(fs, ino);
	fs_glock_report(gl)->kinval |=
	    FS_TRACE_K_ATTRS | FS_TRACE_K_PAGES | (dir ? FS_TRACE_K_NAMES : 0);
	fs_cl_fs_put(cl, fs);
}

/* A demote-ahead batch's drops (fs_glock.h ops->drops): their
 * attributes' kernel wait is one for the batch (fs_kinval_defer). */
static void inode_drops(int on, void *arg)
{
	(void)arg;
	fs_kinval_defer(on);
}

/*
 * Placement (PROTOCOL.md §5, FORMAT.md "Cluster locks"): the inode and
 * rgroup locks of resource group g carry the key g + 1, so their
 * directory node is the same member for the whole group, and the
 * allocator prefers the groups whose directory is this node
 * (fs_cluster_rgrp_local): the first lock request on a new inode then
 * finds its directory here and masters it with no message. Blocks
 * outside the groups (the superblock area) are placed by hash.
 */
/* The key of group @g's locks (the rule: g + 1), 0 for none. */
static uint32_t group_key(const struct fs_cluster *cl, uint64_t g)
{
	return g < cl->rg_count ? (uint32_t)g + 1 : 0;
}

static uint32_t rgrp_place(uint64_t g, void *arg)
{
	return group_key(arg, g);
}

uint32_t fs_cluster_ino_place(const struct fs_cluster *cl, uint64_t ino)
{
	return group_key(
	    cl, fs_rgrp_index(cl->rg_start, cl->rg_blocks, cl->rg_count, ino));
}

static uint32_t inode_place(uint64_t ino, void *arg)
{
	return fs_cluster_ino_place(arg, ino);
}

int fs_cluster_rgrp_local(struct fs_cluster *cl, uint32_t g)
{
	return lk_place_node(cl->ls, rgrp_place(g, cl)) == cl->node;
}

static void inode_flushed(void *gl)
{
	fs_glock_flushed(gl);
}

/* Before an inode's lock leaves EX: the kernel's pages dirtied through a
 * shared mapping come back as WRITEs while holders are still admitted
 * (fs_kinval.c). */
static int inode_flush(struct fs_glock *gl, void *arg)
{
	struct fs_cluster *cl = arg;
	struct fs *fs = fs_cl_fs(cl);
	int ret = 0;

	if (fs != NULL)
		ret = fs_kinval_flush(fs, fs_glock_num(gl), inode_flushed, gl);
	fs_cl_fs_put(cl, fs);
	return ret;
}
/* Change tracking (fs_glock_ops.stamp, changed): the value block's
 * generation moves on only when a holder of this EX grant changed the
 * inode's blocks (a transaction since the grant holds one, as the
 * journal's owner table tells; in doubt: changed), so that another
 * node's next grant keeps the blocks it cached when nothing changed. */
static uint64_t inode_stamp(struct fs_glock *gl, void *arg)
{
	struct fs_cluster *cl = arg;
	struct fs *fs = fs_cl_fs(cl);
	uint64_t s = 0;

	(void)gl;
	if (fs != NULL && fs->j != NULL)
		s = fs_journal_stamp(fs);
	fs_cl_fs_put(cl, fs);
	return s;
}

static int inode_changed(struct fs_glock *gl, uint64_t mark, void *arg)
{
	struct fs_cluster *cl = arg;
	struct fs *fs = fs_cl_fs(cl);
	int changed = 1;

	if (fs != NULL && fs->j != NULL && mark != 0)
		changed = fs_journal_owner_since(fs, owner_of(gl), mark);
	fs_cl_fs_put(cl, fs);
	return changed;
}

/* Demote-ahead (fs_glock.h): a node asking for an inode this node only
 * reads idle will likely ask for its neighbours next (rm -rf of a tree
 * read here: a directory's inodes come from one chunk of INODE_CHUNK
 * blocks, fs_alloc.c), so once it keeps asking (fs_glocks.c
 * GL_AHEAD_STREAK_NS) those go to NL in the same pass. */
#define INODE_AHEAD_SPAN 64u

/* No recover op for inodes and rgroups: the dead node's journal was
 * replayed before any grant (cl_recover), so an invalid LVB only means
 * that what we cached is stale (inval), and a PR grant or a try need not
 * go through EX. */
static const struct fs_glock_ops inode_ops = {
    .sync = gl_sync,
    .inval = inode_inval,
    .drop = inode_drop,
    .drops = inode_drops,
    .place = inode_place,
    .flush = inode_flush,
    .stamp = inode_stamp,
    .changed = inode_changed,
    .ahead_span = INODE_AHEAD_SPAN,
};

/* A resource group came back: its header and bitmaps are re-read, its
 * reservations forgotten (fs_alloc.c). */
static void rgrp_inval(struct fs_glock *gl, void *arg)
{
	struct fs_cluster *cl = arg;
	struct fs *fs = fs_cl_fs(cl);

	int ret = 0;

	if (fs != NULL && fs->alloc != NULL)
		ret = fs_alloc_rgrp_inval(fs, (uint32_t)fs_glock_num(gl));
	fs_cl_fs_put(cl, fs);
	if (ret < 0)
		fs_cluster_fence(cl, "cannot reload a resource group");
	count_drop(cl, 0);
}

static const struct fs_glock_ops rgrp_ops = {
    .sync = gl_sync,
    .inval = rgrp_inval,
    .place = rgrp_place,
};

/* The statfs master came back changed (another node folded into it):
 * its cached block goes (fs_statfs.c reads it again). */
static void statfs_inval(struct fs_glock *gl, void *arg)
{
	struct fs_cluster *cl = arg;
	struct fs *fs = fs_cl_fs(cl);
	unsigned n = 0;

	if (fs != NULL && fs->cache != NULL)
		n = owner_drop(fs, gl);
	fs_cl_fs_put(cl, fs);
	count_drop(cl, n);
}

/* No recover op: a node that died folding left its master and change
 * records consistent in its journal, replayed before any grant. */
static const struct fs_glock_ops statfs_ops = {
    .sync = gl_sync,
    .inval = statfs_inval,
};

/* ---- watchdog thread and node-down callback --------------------------- */

/*
 * A strict majority of the configured nodes (us included) reachable over
 * the network. lk_ls_members says "not quorate" also while the lock
 * manager recovers a dead node with a majority up (until every
 * survivor's callback returned; a survivor that dies meanwhile adds a
 * wait for its disk death, hb_timeout): that is no quorum loss, and
 * fencing every survivor because a recovery took longer than timeout_ms
 * would stop the cluster (clu_recover: node 1 killed while it replays
 * node 3's journal fenced node 2 "quorum lost"). Requests wait for the
 * recovery meanwhile (fs_cluster_wait_quorum).
 */
static int majority_up(struct fs_cluster *cl)
{
	unsigned up = 1, n = (unsigned)__builtin_popcountll(cl->configured);

	for (uint32_t id = 1; id < 64; id++) {
		uint64_t age;

		if ((cl->configured & (1ull << id)) && id != cl->node &&
		    lk_ls_peer(cl->ls, id, &age))
			up++;
	}
	return up > n / 2;
}

static void check_quorum(struct fs_cluster *cl, uint64_t *lost_since)
{
	uint64_t gen, members;

	if (lk_ls_members(cl->ls, &gen, &members) || majority_up(cl)) {
		*lost_since = 0;
		return;
	}
	if (*lost_since == 0)
		*lost_since = cvw_now_ms();
	else if (cvw_now_ms() - *lost_since > cl->timeout_ms)
		fs_cluster_fence(cl, "quorum lost");
}

/* Fenced: what the kernel cached under our locks is no longer ours to
 * serve (the others recover our locks and change what they covered), and
 * the kernel answers from it without asking (names and attributes for a
 * day, the pages of open files): drop all of it (every name, the root's
 * and every open file's attributes and pages), so that each next use
 * asks ucfs and fails with EIO. Done here, on the watchdog thread, not
 * in fs_cluster_fence: the fence may come from a demote worker or a
 * request, and the kernel may hold a directory for a request of ours
 * while it drops that directory's names. Called with cl->mu held. */
static void fenced_drop_kernel(struct fs_cluster *cl)
{
	struct fs *fs;

	cl->kernel_dropped = 1;
	fs = cl->fs;
	if (fs == NULL)
		return;
	cl->ops_busy++;
	pthread_mutex_unlock(&cl->mu);
	fs_kinval_all(fs);
	fs_cl_fs_put(cl, fs);
	pthread_mutex_lock(&cl->mu);
}

static void *cl_thread(void *arg)
{
	struct fs_cluster *cl = arg;
	uint64_t lost_since = 0;

	pthread_mutex_lock(&cl->mu);
	while (!cl->stop) {
		cvw_wait_ms(&cl->cv, &cl->mu, 100);
		if (cl->fenced && !cl->kernel_dropped && !cl->stop)
			fenced_drop_kernel(cl);
		if (cl->fs != NULL && !cl->fenced && !cl->stop) {
			pthread_mutex_unlock(&cl->mu);
			check_quorum(cl, &lost_since);
			if (fs_hb_thief(cl->hb) != 0)
				fs_cluster_fence(cl, "another node that this "
						     "node cannot reach "
						     "wrote our heartbeat "
						     "slot");
			else if (fs_hb_fenced(cl->hb))
				fs_cluster_fence(cl, fs_hb_fence_why(cl->hb));
			else if (lk_ls_fenced(cl->ls))
				fs_cluster_fence(cl, "the lock manager fenced "
						     "us");
			pthread_mutex_lock(&cl->mu);
		}
	}
	pthread_mutex_unlock(&cl->mu);
	return NULL;
}

/* The lock manager's disk hook (lk_disk_fn): under its lock, so only
 * fs_hb_node (its own leaf lock). */
static int cl_disk(uint32_t node, uint64_t *changed_ns, void *arg)
{
	struct fs_cluster *cl = arg;

	switch (fs_hb_node(cl->hb, node, changed_ns)) {
	case FS_HB_ALIVE:
		return LK_DISK_ALIVE;
	case FS_HB_DEAD:
		return LK_DISK_DEAD;
	default:
		return LK_DISK_NONE;
	}
}

/* fs_hb_set_notify: a read of the disk changed cl_disk's answers for
 * @nodes; under the heartbeat's lock (lk_ls_disk_changed takes none). */
static void cl_disk_changed(void *arg, uint64_t nodes)
{
	struct fs_cluster *cl = arg;

	lk_ls_disk_changed(cl->ls, nodes);
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
		const struct lk_node_cfg *nc = lk_config_node(cfg, o->node_id);

		snprintf(cl->name, sizeof(cl->name), "%s", cfg->cluster);
		cl->timeout_ms = cfg->timeout_ms;
		cl->configured = cfg->configured;
		cl->node_addr = nc->addr.sin_addr.s_addr;
		cl->node_port = ntohs(nc->addr.sin_port);
	}
	free(cfg);
	return ret;
}

/* Start the disk heartbeat's reader on the device (fs_hb_open). */
static int hb_open(struct fs_cluster *cl, const struct fs_cluster_opts *o,
		   char *why, size_t whylen)
{
	struct fs_hb_opts ho = {
	    .node = o->node_id,
	    .addr = cl->node_addr,
	    .port = cl->node_port,
	    .timeout_ms = o->hb_timeout_ms ? o->hb_timeout_ms : cl->timeout_ms,
	};
	struct bd_dev *bd = o->bd;
	char msg[300];
	int ret;

	ho.interval_ms =
	    o->hb_interval_ms ? o->hb_interval_ms : ho.timeout_ms / 8;
	if (ho.interval_ms == 0 || ho.interval_ms > ho.timeout_ms / 4)
		return fs_why(why, whylen, -EINVAL,
			      "hb_interval must be at most hb_timeout / 4");
	if (bd == NULL) {
		/* a ro node only reads the others' beats */
		unsigned fl = o->ro ? BD_RDONLY : 0;

		ret = bd_open_any(o->device, fl, &cl->hb_bd);
		if (ret == -EINVAL) /* O_DIRECT refused (tmpfs) */
			ret = bd_open_any(o->device, fl | BD_BUFFERED,
					  &cl->hb_bd);
		if (ret < 0) {
			snprintf(msg, sizeof(msg),
				 "cannot open %s for the disk heartbeat: %s",
				 o->device, strerror(-ret));
			return fs_why(why, whylen, ret, msg);
		}
		bd = cl->hb_bd;
	}
	ret = fs_hb_open(bd, &ho, &cl->hb, why, whylen);
	if (ret < 0) {
		bd_close(cl->hb_bd);
		cl->hb_bd = NULL;
	}
	return ret;
}

/* A configured node alive on the disk that the network cannot reach,
 * or 0. */
static uint32_t alive_unreachable(struct fs_cluster *cl)
{
	for (uint32_t n = 1; n < 64; n++) {
		uint64_t age;

		if (!(cl->configured & (1ull << n)) || n == cl->node)
			continue;
		if (fs_hb_node(cl->hb, n, NULL) == FS_HB_ALIVE &&
		    !lk_ls_peer(cl->ls, n, &age))
			return n;
	}
	return 0;
}

/* Joining failed while node @n beats on the disk: say why. */
static int refuse_join(struct fs_cluster *cl, uint32_t n, char *why,
		       size_t whylen)
{
	struct lk_stats *st = calloc(1, sizeof(*st));
	char msg[300];
	int auth = 0;

	if (st != NULL) {
		lk_ls_stats(cl->ls, st);
		auth = st->auth_failures > 0;
		free(st);
	}
	snprintf(msg, sizeof(msg),
		 "node %u is alive on the disk but cannot be %s: not "
		 "joining cluster %s as node %u (no split brain)",
		 n,
		 auth ? "authenticated: different secret?"
		      : "reached over the network (address, port, firewall?)",
		 cl->name, cl->node);
	return fs_why(why, whylen, -ECONNREFUSED, msg);
}

/* Wait for quorum; refuse at once when the lock manager fenced us (the
 * disk tie-break) or, after timeout_ms plus hb_timeout, when a node that
 * beats on the disk is still unreachable. */
static int join(struct fs_cluster *cl, unsigned quorum_ms, char *why,
		size_t whylen)
{
	uint64_t t0 = cvw_now_ms();
	uint64_t check = t0 + cl->timeout_ms + fs_hb_timeout_ms(cl->hb);
	char msg[300];

	for (;;) {
		int ret = lk_ls_wait_quorum(cl->ls, 200);
		uint32_t n;

		if (ret == 0)
			return 0;
		n = ret == -ESHUTDOWN || cvw_now_ms() >= check
			? alive_unreachable(cl)
			: 0;
		if (n != 0)
			return refuse_join(cl, n, why, whylen);
		if (ret == -ESHUTDOWN)
			return fs_why(why, whylen, -EIO,
				      "the lock manager fenced this node "
				      "while it joined");
		if (cvw_now_ms() - t0 >= quorum_ms) {
			snprintf(msg, sizeof(msg),
				 "cluster %s: no quorum after %u ms "
				 "(are enough nodes up?)",
				 cl->name, quorum_ms);
			return fs_why(why, whylen, -ETIMEDOUT, msg);
		}
	}
}

static int ls_open(struct fs_cluster *cl, const struct fs_cluster_opts *o,
		   char *why, size_t whylen)
{
	struct lk_ls_config lc = {0};
	char msg[300];
	int ret;

	lc.cluster_file = o->cluster_file;
	lc.nodeid = o->node_id;
	lc.recover = fs_cl_node_down;
	lc.log = fs_cl_log;
	lc.arg = cl;
	lc.disk = cl_disk;
	lc.disk_timeout_ms = fs_hb_timeout_ms(cl->hb);
	ret = lk_ls_open(&lc, &cl->ls);
	if (ret == -EADDRINUSE)
		snprintf(msg, sizeof(msg),
			 "node %u is already mounted on cluster %s (its "
			 "address is in use on this machine)",
			 o->node_id, cl->name);
	else if (ret < 0)
		snprintf(msg, sizeof(msg),
			 "cannot join cluster %s as node %u: %s", cl->name,
			 o->node_id, strerror(-ret));
	if (ret < 0) {
		fs_why(why, whylen, ret, msg);
		return ret;
	}
	fs_hb_set_notify(cl->hb, cl_disk_changed, cl);
	lk_ls_disk_changed(cl->ls, ~0ull); /* what was read meanwhile */
	return 0;
}

int fs_cluster_open(const struct fs_cluster_opts *o, struct fs_cluster **out,
		    char *why, size_t whylen)
{
	struct fs_cluster *cl = calloc(1, sizeof(*cl));
	int ret;

	if (cl == NULL)
		return -ENOMEM;
	cl->node = o->node_id;
	cl->minhold_ms = o->minhold_ms;
	cl->ro = o->ro;
	cl->records_timeout_s = o->records_timeout_s;
	cl->glock_max = o->glock_max ? o->glock_max : FS_GLOCK_MAX_DEFAULT;
	cl->slot = -1;
	pthread_mutex_init(&cl->mu, NULL);
	pthread_cond_init(&cl->cv, NULL);
	ret = load_config(cl, o, why, whylen);
	if (ret < 0)
		goto out_free;
	ret = hb_open(cl, o, why, whylen);
	if (ret < 0)
		goto out_free;
	ret = ls_open(cl, o, why, whylen);
	if (ret < 0)
		goto out_hb;
	ret = -pthread_create(&cl->thread, NULL, cl_thread, cl);
	if (ret < 0)
		goto out_close;
	ret = join(cl, o->quorum_ms ? o->quorum_ms : FS_CLUSTER_QUORUM_MS, why,
		   whylen);
	if (ret < 0)
		goto out_thread;
	*out = cl;
	return 0;

out_thread:
	pthread_mutex_lock(&cl->mu);
	cl->stop = 1;
	pthread_cond_broadcast(&cl->cv);
	pthread_mutex_unlock(&cl->mu);
	pthread_join(cl->thread, NULL);
out_close:
	fs_hb_set_notify(cl->hb, NULL, NULL);
	lk_ls_close(cl->ls);
out_hb:
	fs_hb_close(cl->hb, 0);
	bd_close(cl->hb_bd);
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

/* The records agreement's side of the journal (fs_jrec_conf.set). */
static int jrec_set(void *arg, int on)
{
	struct fs_cluster *cl = arg;
	struct fs *fs = fs_cl_fs(cl);
	int ret = 0;

	if (fs != NULL && fs->j != NULL) /* else unmounted: written back */
		ret = fs_journal_set_records(fs, on);
	fs_cl_fs_put(cl, fs);
	return ret;
}

static void jrec_fail(void *arg, const char *why)
{
	fs_cluster_fence(arg, why);
}

/* Records are possible on this image (JCKPT) and node (rw). */
static int jrec_new(struct fs_cluster *cl, struct fs *fs)
{
	struct fs_jrec_conf c = {
	    .ls = cl->ls,
	    .covers = bd_flush_covers_all(fs->bd),
	    .timeout_s = cl->records_timeout_s,
	    .node = cl->node,
	    .set = jrec_set,
	    .fail = jrec_fail,
	    .arg = cl,
	};

	if (cl->ro || !(fs->sb.feature_incompat & FS_FEATURE_INCOMPAT_JCKPT))
		return 0;
	return fs_jrec_new(&c, &cl->jrec);
}

int fs_cluster_records_join(struct fs_cluster *cl)
{
	return cl->jrec != NULL ? fs_jrec_join(cl->jrec) : 0;
}

int fs_cluster_records_start(struct fs_cluster *cl)
{
	return cl->jrec != NULL ? fs_jrec_start(cl->jrec) : 0;
}

/* The lock manager keeps at most one unused resource (toss list) per
 * this many glocks of the bound. */
#define FS_TOSS_PER_GLOCKS 8

/* The engine, its ops per lock type, and the fs lock. */
static int engine_start(struct fs_cluster *cl)
{
	struct fs_glocks_conf conf = {
	    .max = cl->glock_max,
	    .workers = 0,
	    .minhold_ms = cl->minhold_ms,
	};
	int ret = fs_glocks_new(cl->ls, &conf, &cl->e);

	if (ret < 0)
		return ret;
	fs_glocks_set_ops(cl->e, FS_LK_FS, cl->ro ? &fs_gl_ro_ops : &fs_gl_ops,
			  cl);
	fs_glocks_set_ops(cl->e, FS_LK_INODE, &inode_ops, cl);
	fs_glocks_set_ops(cl->e, FS_LK_RGRP, &rgrp_ops, cl);
	fs_glocks_set_ops(cl->e, FS_LK_STATFS, &statfs_ops, cl);
	/* the pins (inodes the kernel holds) are bounded by the namespace's
	 * prune (fs_iprune.c), which tells the engine when it runs */
	/* the lock manager's unused resources within the bound too */
	lk_ls_set_toss_max(cl->ls, cl->glock_max / FS_TOSS_PER_GLOCKS);
	/* FS_LK_RENAME protects nothing cached: no ops */
	ret = fs_glock_get(cl->e, FS_LK_FS, 0, &cl->gl);
	if (ret < 0) {
		fs_glocks_free(cl->e);
		cl->e = NULL;
	}
	return ret;
}

int fs_cluster_attach(struct fs_cluster *cl, struct fs *fs)
{
	int ret;

	cl->nslots = fs->sb.slot_count;
	cl->rg_start = fs->sb.rgrp_start;
	cl->rg_blocks = fs->sb.rgrp_blocks;
	cl->rg_count = fs->sb.rgrp_count;
	cl->try_lk = calloc(cl->nslots, sizeof(*cl->try_lk));
	if (cl->try_lk == NULL)
		return -ENOMEM;
	ret = engine_start(cl);
	if (ret == 0)
		ret = jrec_new(cl, fs);
	if (ret < 0)
		return ret;
	pthread_mutex_lock(&cl->mu);
	cl->fs = fs;
	pthread_mutex_unlock(&cl->mu);
	cl->gate_bd = fs->bd;
	bd_set_gate(fs->bd, fs_hb_gate, cl->hb);
	return 0;
}

struct fs_glocks *fs_cluster_glocks(struct fs_cluster *cl)
{
	return cl->e;
}

void fs_cluster_detach(struct fs_cluster *cl, int held)
{
	if (cl->gate_bd != NULL)
		bd_set_gate(cl->gate_bd, NULL, NULL); /* it is closed next */
	cl->gate_bd = NULL;
	if (held)
		fs_glock_release(cl->gl, LK_EX);
	fs_cluster_quiesce(cl);
}

/* ---- holders ---------------------------------------------------------- */

/* Self-fencing, part 1: no request runs (even under a cached grant)
 * while this node is not in a quorate membership; after timeout_ms of
 * that the watchdog fences us and this returns -EIO. */
int fs_cluster_wait_quorum(struct fs_cluster *cl)
{
	struct timespec nap = {0, 10 * 1000 * 1000};
	uint64_t gen, members;

	if (lk_ls_usable(cl->ls)) /* no lock taken: asked per operation */
		return 0;
	while (!lk_ls_members(cl->ls, &gen, &members)) {
		if (fs_cluster_fenced(cl))
			return -EIO;
		nanosleep(&nap, NULL);
	}
	return 0;
}

int fs_cluster_lock(struct fs_cluster *cl, int mode)
{
	int ret = fs_cluster_wait_quorum(cl);

	if (ret == 0)
		ret = fs_glock_acquire(cl->gl, cl->ro ? LK_PR : mode);

	if (ret < 0)
		fs_cluster_fence(cl, "lock manager refused the fs lock");
	return ret < 0 ? -EIO : 0;
}

void fs_cluster_unlock(struct fs_cluster *cl, int mode)
{
	fs_glock_release(cl->gl, cl->ro ? LK_PR : mode);
}

int fs_cluster_members(struct fs_cluster *cl, uint64_t *members)
{
	uint64_t gen;

	return lk_ls_members(cl->ls, &gen, members);
}

int fs_cluster_glock(struct fs_cluster *cl, uint16_t type, uint64_t num,
		     int mode, int wait, struct fs_glock **out)
{
	struct fs_glock *gl;
	int ret;

	if (cl->ro && mode == LK_EX)
		return -EROFS; /* a ro node changes nothing */
	ret = fs_glock_get(cl->e, type, num, &gl);
	if (ret < 0)
		return ret;
	ret = wait ? fs_glock_acquire(gl, mode) : fs_glock_try(gl, mode);
	if (ret == 0) {
		*out = gl;
		return 0;
	}
	fs_glock_put(gl);
	if (ret == -EAGAIN || ret == -ENOMEM)
		return ret;
	fs_cluster_fence(cl, "lock manager refused a lock");
	return -EIO;
}

void fs_cluster_gunlock(struct fs_glock *gl, int mode)
{
	fs_glock_release(gl, mode);
	fs_glock_put(gl);
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
	if (first) {
		cl->fence_ms = cvw_now_ms();
		snprintf(cl->fence_why, sizeof(cl->fence_why), "%s", why);
	}
	pthread_cond_broadcast(&cl->cv); /* cl_thread: the kernel's caches */
	pthread_mutex_unlock(&cl->mu);
	if (!first)
		return;
	/* the device first: nothing written from here on */
	fs_hb_fence_mark(cl->hb, cl->gate_bd);
	lk_ls_fence(cl->ls, why);
	if (fs != NULL)
		fs_journal_abort(fs);
	if (cl->e != NULL)
		fs_glocks_fence(cl->e);
	snprintf(msg, sizeof(msg),
		 "node %u fenced itself (%s): no more "
		 "device writes, every request fails with EIO; unmount it",
		 cl->node, why);
	fs_cl_log(0, msg, NULL);
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

/* Per configured node but us: what the network and the disk say. */
static void peers_section(struct fs_cluster *cl, struct fs_json *arr)
{
	static const char *const disk[] = {"none", "dead", "alive"};
	uint64_t now = cvw_now_ms() * 1000000ull;

	for (uint32_t n = 1; n < 64; n++) {
		struct fs_json *p;
		uint64_t age, changed;
		int up, st;

		if (!(cl->configured & (1ull << n)) || n == cl->node)
			continue;
		up = lk_ls_peer(cl->ls, n, &age);
		st = fs_hb_node(cl->hb, n, &changed);
		p = fs_json_obj(arr, NULL);
		fs_json_u64(p, "node", n);
		fs_json_bool(p, "net_up", up);
		fs_json_i64(p, "net_beat_age_ms",
			    age == UINT64_MAX ? -1 : (int64_t)age);
		fs_json_str(p, "disk", disk[st]);
		fs_json_i64(p, "disk_beat_age_ms",
			    changed == 0
				? -1
				: (int64_t)((now - changed) / 1000000ull));
	}
}

/* The checkpoint records agreement (fs_jrec.h). */
static void records_stats(struct fs_cluster *cl, struct fs_json *o)
{
	struct fs_jrec_stats js = {.mode = "none"};

	if (cl->jrec != NULL)
		fs_jrec_stats(cl->jrec, &js);
	fs_json_str(o, "records", js.mode);
	fs_json_u64(o, "records_tries", js.tries);
	fs_json_u64(o, "records_refused", js.refused);
	fs_json_u64(o, "records_given_up", js.offs);
	fs_json_u64(o, "records_join_ms", js.join_ms);
	fs_json_u64(o, "records_wakes", js.wakes);
}

static void cluster_section(struct fs_json *o, void *arg)
{
	struct fs_cluster *cl = arg;
	struct fs_glocks_stats *es = malloc(sizeof(*es));
	struct fs_glock_stats g, t = {0};

	fs_glock_stats_get(cl->gl, &g);
	if (es != NULL) {
		fs_glocks_stats(cl->e, es);
		t = es->total;
		free(es);
	}
	fs_json_str(o, "cluster", cl->name);
	fs_json_u64(o, "node_id", cl->node);
	fs_json_i64(o, "slot", cl->slot);
	fs_json_str(o, "glock_mode",
		    g.mode < 0 ? "none" : lk_mode_name(g.mode));
	fs_json_u64(o, "glock_holders", g.holders);
	/* every glock of the engine (per type: the "glocks" section) */
	fs_json_u64(o, "glock_acquires", t.acquires);
	fs_json_u64(o, "glock_hits", t.hits);
	fs_json_u64(o, "glock_requests", t.requests);
	fs_json_u64(o, "glock_retries", t.retries);
	fs_json_u64(o, "glock_wait_ns", t.wait_ns);
	fs_json_u64(o, "demotes_to_pr", t.demote_pr);
	fs_json_u64(o, "demotes_to_nl", t.demote_nl);
	fs_json_u64(o, "demote_ns", t.demote_ns);
	fs_json_u64(o, "lvb_generation", g.generation);
	fs_json_u64(o, "lvb_invalid_recoveries", g.recovers);
	pthread_mutex_lock(&cl->mu);
	fs_json_u64(o, "cache_drops", cl->drops);
	fs_json_u64(o, "cache_dropped_blocks", cl->dropped_bufs);
	fs_json_u64(o, "kinval_skips",
		    __atomic_load_n(&cl->kinval_skips, __ATOMIC_RELAXED));
	fs_json_u64(o, "node_deaths", cl->deaths);
	fs_json_u64(o, "recoveries", cl->recoveries);
	fs_json_u64(o, "recovered_tx", cl->recovered_tx);
	fs_json_u64(o, "sync_errors", cl->sync_errors);
	fs_json_bool(o, "fenced", cl->fenced);
	fs_json_i64(o, "fenced_ms_ago",
		    cl->fence_ms ? (int64_t)(cvw_now_ms() - cl->fence_ms) : -1);
	fs_json_str(o, "fence_reason", cl->fence_why);
	fs_json_bool(o, "fence_kernel_dropped", cl->kernel_dropped);
	pthread_mutex_unlock(&cl->mu);
	records_stats(cl, o);
	fs_hb_stats(cl->hb, o);
	peers_section(cl, fs_json_arr(o, "peers"));
}

static const char *type_name(unsigned type)
{
	static const char *const names[] = {
	    [FS_LK_FS] = "fs",	       [FS_LK_SLOT] = "slot",
	    [FS_LK_INODE] = "inode",   [FS_LK_RGRP] = "rgrp",
	    [FS_LK_RENAME] = "rename", [FS_LK_IOPEN] = "iopen",
	    [FS_LK_STATFS] = "statfs", [FS_LK_JREC] = "jrec",
	    [FS_LK_FLMODE] = "flmode",
	};

	return type < sizeof(names) / sizeof(names[0]) ? names[type] : NULL;
}

static void glocks_section(struct fs_json *o, void *arg)
{
	struct fs_cluster *cl = arg;

	fs_glocks_stats_render(cl->e, o, type_name, 10);
}

int fs_cluster_stats_add(struct fs_cluster *cl, struct fs_stats *st)
{
	int ret = fs_stats_add_section(st, "cluster", cluster_section, cl);

	if (ret == 0)
		ret = fs_stats_add_locks(st, cl->ls, type_name, &cl->stlk);
	if (ret == 0 && cl->e != NULL) {
		ret = fs_stats_add_section(st, "glocks", glocks_section, cl);
		if (ret == 0)
			fs_glocks_set_trace(cl->e, fs_stats_trace(st),
					    type_name, cl->stlk);
	}
	if (ret < 0) {
		if (cl->stlk != NULL)
			fs_stats_remove_locks(st, cl->stlk);
		cl->stlk = NULL;
		fs_stats_remove_section(st, "cluster");
	}
	return ret;
}

void fs_cluster_stats_remove(struct fs_cluster *cl, struct fs_stats *st)
{
	if (cl->e != NULL)
		fs_glocks_set_trace(cl->e, NULL, type_name, NULL);
	fs_stats_remove_section(st, "glocks");
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

/* Ungate the device and stop the heartbeat (@clean: mark our block
 * stopped, nobody has to wait for it). */
static void hb_close(struct fs_cluster *cl, int clean)
{
	if (cl->gate_bd != NULL)
		bd_set_gate(cl->gate_bd, NULL, NULL);
	fs_hb_close(cl->hb, clean);
	bd_close(cl->hb_bd);
}

static void cl_free(struct fs_cluster *cl)
{
	free(cl->try_lk);
	pthread_cond_destroy(&cl->cv);
	pthread_mutex_destroy(&cl->mu);
	free(cl);
}

/* Give every glock up (@clean: the storage layer wrote everything back:
 * cl->fs is NULL, so no sync writes anything more) and free the
 * engine. */
static void engine_free(struct fs_cluster *cl, int clean)
{
	if (cl->e == NULL)
		return;
	fs_glock_put(cl->gl);
	cl->gl = NULL;
	if (clean && fs_glocks_drop_all(cl->e) < 0)
		fs_glocks_fence(cl->e);
	fs_glocks_free(cl->e);
	cl->e = NULL;
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
	fs_jrec_stop(cl->jrec, 1);
	fs_jrec_free(cl->jrec);
	engine_free(cl, 1);
	if (cl->slot_lk != NULL)
		lk_unlock(cl->slot_lk, 0);
	for (unsigned s = 0; s < cl->nslots; s++)
		fs_cluster_slot_drop(cl, s);
	fs_hb_set_notify(cl->hb, NULL, NULL);
	lk_ls_close(cl->ls);
	hb_close(cl, 1);
	cl_free(cl);
}

void fs_cluster_abandon(struct fs_cluster *cl)
{
	if (cl == NULL)
		return;
	stop_thread(cl);
	fs_jrec_free(cl->jrec); /* its locks go with the lockspace */
	if (cl->e != NULL) {
		fs_glocks_fence(cl->e);
		fs_glocks_stop(cl->e); /* no DLM call after this */
	}
	fs_hb_set_notify(cl->hb, NULL, NULL);
	lk_ls_abandon(cl->ls); /* no callback after this */
	engine_free(cl, 0);
	hb_close(cl, 0);
	cl_free(cl);
}
