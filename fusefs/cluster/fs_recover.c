/*
 * fs_recover.c — recovery of dead nodes in a lockproto=dlm mount
 * (fs_cluster.h): the journal slot locks (a node's own, held for its
 * whole mount; a dead node's, taken NOEXP to replay its journal or adopt
 * what its slot left), the lock manager's node-down callback and the
 * mount lock's recover op.
 *
 * Recovery: a demote from EX checkpoints what the lock covered, so what
 * a node's journal holds past its header's tail and last checkpoint
 * record are images of blocks whose locks it holds in EX;
 * when it dies, nobody else was granted those. The lock manager grants
 * no lock (but NOEXP ones) anywhere until every node's node-down
 * callback returned, and in that callback (fs_cl_node_down) each mounted
 * survivor replays the dead node's slot (fs_core_recover_node: device
 * I/O only; the callback runs on the DLM's callback thread, which also
 * delivers our lock completions, so it never waits for a lock). The dead
 * node's EX locks then come back with an invalid LVB: the next holder
 * drops its cached copies (no recover op: nothing more to do). The mount
 * lock keeps v1's "first to get it recovers" for the first mount after
 * a whole-cluster crash: under EX it takes the lock of every other slot
 * it can get (EX, NOQUEUE, NOEXP: a live owner holds its slot's lock for
 * its whole mount), replays that slot's journal if the slot map says
 * mounted, marks the slot free (fs_core_recover_slots; also at every
 * mount and unmount, which frees the slots the callback replayed).
 *
 * What a dead slot left besides its journal (orphans, free log, statfs
 * change) is taken over off the callback thread, under locks, by the
 * iopen worker (fs_iopen.h: fs_iopen_slot_dead), which takes the dead
 * slot's lock with fs_cluster_slot_take first (not NOEXP: after every
 * node-down callback returned): of several survivors only the one
 * holding it works on that slot, and a survivor that died holding it
 * had its journal replayed first.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "fusefs/cluster/fs_cluster_internal.h"
#include "fusefs/cluster/fs_hb.h"
#include "fusefs/core/fs_core_priv.h"
#include "lockmgr/cv_wait.h"
#include "lockmgr/lk.h"

/* ---- node-down recovery ------------------------------------------------ */

/* The LVB of the fs lock is invalid: a node died holding it in EX (while
 * it mounted or unmounted), or the whole cluster restarted. In EX:
 * replay and free every slot whose owner is gone. */
int fs_cl_gl_recover(struct fs_glock *gl, void *arg)
{
	struct fs_cluster *cl = arg;
	struct fs *fs = fs_cl_fs(cl);
	int ret;

	(void)gl;
	if (fs == NULL || cl->slot < 0) {
		fs_cl_fs_put(cl, fs);
		return 0;
	}
	ret = fs_core_recover_slots(fs, 1);
	fs_cl_fs_put(cl, fs);
	if (ret < 0)
		fs_cluster_fence(cl, "cannot replay a dead node's journal");
	return ret;
}
/* A ro node cannot replay the journal of dead node @nodeid: a read-write
 * survivor does it in its own callback (before any grant). With none
 * left and transactions in that journal (an empty one leaves nothing
 * half written: the node goes on), what this node would read may be
 * half written: it stops serving (fenced: every request fails with EIO)
 * until remounted after a read-write node recovered the journal. */
static void ro_recover(struct fs_cluster *cl, struct fs *fs, uint32_t nodeid)
{
	uint64_t members = 0;
	unsigned slot;

	fs_cluster_members(cl, &members);
	if (fs_core_ro_unrecovered(fs, members, nodeid, &slot) != 0)
		fs_cluster_fence(cl, "a dead node's journal needs replay and "
				     "no read-write node is left: a ro node "
				     "cannot replay it");
}

/*
 * Node @nodeid died (lockmgr/PROTOCOL.md "User recovery"): the lock
 * manager grants no other lock anywhere until every node's callback
 * returned, so the dead node's journal is replayed here, before anyone
 * can be granted a lock it held in EX. Every mounted survivor replays it
 * (they write the same images; idempotent when a newer recovery calls us
 * again). Runs on the DLM's callback thread: device I/O only, no lk_wait
 * (the slot map keeps the slot mounted: the next mount or unmount, under
 * the fs lock, frees it).
 */
void fs_cl_node_down(struct lk_ls *ls, uint32_t nodeid, void *arg)
{
	struct fs_cluster *cl = arg;
	struct fs *fs;
	int fenced;

	(void)ls;
	pthread_mutex_lock(&cl->mu);
	cl->deaths++;
	fenced = cl->fenced;
	pthread_mutex_unlock(&cl->mu);
	fs = fenced ? NULL : fs_cl_fs(cl);
	if (fs != NULL && cl->slot >= 0)
		fs_cluster_recover_hold("node_down"); /* test hook */
	/* mounting: the mount recovers under the fs lock */
	if (fs != NULL && cl->slot >= 0 && fs_core_recover_node(fs, nodeid) < 0)
		fs_cluster_fence(cl, "cannot replay a dead node's journal");
	if (fs != NULL && cl->ro)
		ro_recover(cl, fs, nodeid);
	fs_cl_fs_put(cl, fs);
}
/* ---- journal slot locks ------------------------------------------------ */

/* A slot lock request's outcome, from its completion callback (a NOQUEUE
 * request refused by a remote master releases its handle once the
 * callback returned: lk_wait on it could touch a freed handle). */
struct slot_wait {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done, status;
	int gone; /* the waiter left (fenced): the callback frees it */
};

static void slot_wait_free(struct slot_wait *w)
{
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}

static void slot_done(struct lk_lock *lk, int status, void *arg)
{
	struct slot_wait *w = arg;
	int gone;

	(void)lk;
	pthread_mutex_lock(&w->mu);
	w->done = 1;
	w->status = status;
	gone = w->gone;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	if (gone)
		slot_wait_free(w);
}

static const struct lk_lock_ops slot_ops = {.completion = slot_done};

/* Wait (w->mu held) for the answer to a NOQUEUE slot request: at most
 * SLOT_ANSWER_MS, then cancel it and wait as long again (a request that
 * got no answer must not hang a mount or an unmount: MOUNT.md). Returns
 * w->done. */
#define SLOT_ANSWER_MS 10000u /* a slot request unanswered: cancelled */

static int slot_wait_answer(struct fs_cluster *cl, struct slot_wait *w,
			    struct lk_lock *lk)
{
	uint64_t end = cvw_now_ms() + SLOT_ANSWER_MS;
	int cancelled = 0;

	while (!w->done && !fs_cluster_fenced(cl)) {
		if (cvw_now_ms() < end) {
			cvw_wait_ms(&w->cv, &w->mu, 100);
			continue;
		}
		if (cancelled)
			break;
		cancelled = 1;
		end = cvw_now_ms() + SLOT_ANSWER_MS;
		pthread_mutex_unlock(&w->mu);
		lk_cancel(lk);
		pthread_mutex_lock(&w->mu);
	}
	return w->done;
}

/* EX on slot @s's lock. 1 granted (*out), 0 refused (or no answer:
 * taken as held), -errno. Not from a DLM callback. */
static int slot_lock(struct fs_cluster *cl, unsigned s, unsigned flags,
		     struct lk_lock **out)
{
	struct slot_wait *w = calloc(1, sizeof(*w));
	struct lk_name n;
	struct lk_lock *lk = NULL;
	int ret, gone = 0;

	if (w == NULL)
		return -ENOMEM;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	lk_name_make(&n, FS_LK_SLOT, s, NULL);
	ret = lk_lock(cl->ls, &n, LK_EX, LK_NOQUEUE | flags, &slot_ops, w, &lk);
	if (ret == 0) {
		pthread_mutex_lock(&w->mu);
		slot_wait_answer(cl, w, lk);
		ret = w->done		      ? w->status
		      : fs_cluster_fenced(cl) ? -EIO
					      : -EAGAIN;
		gone = w->gone = !w->done; /* never answered */
		pthread_mutex_unlock(&w->mu);
		if (gone && ret == -EAGAIN)
			fs_cl_log(1,
				  "a journal slot lock request got no answer: "
				  "the slot is taken as held",
				  NULL);
	} else if (ret == LK_GRANTED_NOW) {
		ret = 0;
	}
	if (!gone)
		slot_wait_free(w);
	if (ret == -EAGAIN || ret == -ECANCELED)
		return 0;
	if (ret < 0)
		return ret;
	*out = lk;
	return 1;
}

/*
 * How long a node that just got slot @s watches it before it writes
 * anything but its beat (fs_hb_start): a full hb_timeout when our
 * membership is no majority of the configured nodes (two-node mode
 * alone: a node on the other side of a cut may hold the same slot in its
 * own lockspace; MOUNT.md "Cluster mounts"), else the minimum (two
 * majorities share a member, so the slot lock is never granted twice).
 */
static unsigned watch_ms(struct fs_cluster *cl)
{
	uint64_t gen, members = 0;
	unsigned n = (unsigned)__builtin_popcountll(cl->configured);

	lk_ls_members(cl->ls, &gen, &members);
	if ((unsigned)__builtin_popcountll(members & cl->configured) > n / 2)
		return 0;
	return fs_hb_timeout_ms(cl->hb);
}

/* fs_hb_start failed: say why. */
static int start_failed(struct fs_cluster *cl, unsigned s, int ret,
			uint32_t other, char *why, size_t whylen)
{
	char msg[300];

	if (ret == -EBUSY || (other != 0 && other != ~0u))
		snprintf(msg, sizeof(msg),
			 "journal slot %u %s node %u, which this node cannot "
			 "reach (link down, or started at the same time "
			 "without one?): not mounting as node %u (no split "
			 "brain)",
			 s,
			 ret == -EBUSY ? "is in use on the disk by"
				       : "was taken over on the disk by",
			 other, cl->node);
	else
		snprintf(msg, sizeof(msg),
			 "fenced before the first disk heartbeat was "
			 "written%s",
			 other == ~0u ? " (our heartbeat block became "
					"unreadable)"
				      : "");
	return fs_why(why, whylen, ret == -EBUSY ? -EBUSY : -EIO, msg);
}

int fs_cluster_slot_claim(struct fs_cluster *cl, unsigned count, unsigned *slot,
			  char *why, size_t whylen)
{
	char msg[120];

	for (unsigned s = 0; s < count; s++) {
		int r = slot_lock(cl, s, 0, &cl->slot_lk);
		uint32_t other;

		if (r < 0)
			return fs_why(why, whylen, r,
				      "slot lock request "
				      "failed");
		if (r == 1) {
			cl->slot = (int)s;
			*slot = s;
			r = fs_hb_start(cl->hb, s, watch_ms(cl), &other);
			if (r < 0)
				return start_failed(cl, s, r, other, why,
						    whylen);
			return 0;
		}
	}
	snprintf(msg, sizeof(msg),
		 "all %u journal slots are in use (mkfs.ucfs "
		 "-j sets how many nodes may mount)",
		 count);
	return fs_why(why, whylen, -EBUSY, msg);
}

/* Slot @slot's lock in EX (NOQUEUE, and @flags), kept only once its
 * owner stopped beating: 1, 0 (held, or still beating), -errno. */
static int slot_get(struct fs_cluster *cl, unsigned slot, unsigned flags)
{
	struct timespec nap = {0, 50 * 1000 * 1000};
	uint64_t end = cvw_now_ms() + 2ull * fs_hb_timeout_ms(cl->hb);
	int ret;

	if (slot >= cl->nslots || (int)slot == cl->slot)
		return 0;
	ret = slot_lock(cl, slot, flags, &cl->try_lk[slot]);
	/* its owner was declared dead: recover only once it stopped
	 * writing (the lock manager waited for that already, unless the
	 * coordinator had no disk: a witness) */
	while (ret == 1 && fs_hb_slot(cl->hb, slot) == FS_HB_ALIVE) {
		if (cvw_now_ms() > end || fs_cluster_fenced(cl)) {
			fs_cluster_slot_drop(cl, slot);
			return 0; /* still beating: not ours to recover */
		}
		nanosleep(&nap, NULL);
	}
	return ret;
}

int fs_cluster_slot_try(struct fs_cluster *cl, unsigned slot)
{
	return slot_get(cl, slot, LK_NOEXP);
}

/*
 * Not NOEXP: a survivor that died while it held a dead slot's lock (in
 * the middle of adopting its orphans) has that adoption in its own
 * journal, not yet home; a NOEXP grant comes as soon as the lock manager
 * dropped its locks, before the survivors replayed its journal, and the
 * slot read then is stale: an orphan adopted (and freed) twice
 * (clu_recover "adopt": a double free, EUCLEAN). Held back until every
 * node's node-down callback returned, the grant comes after those
 * replays.
 */
int fs_cluster_slot_take(struct fs_cluster *cl, unsigned slot)
{
	return slot_get(cl, slot, 0);
}

int fs_cluster_slot_alive(struct fs_cluster *cl, unsigned slot)
{
	return slot < cl->nslots && fs_hb_slot(cl->hb, slot) == FS_HB_ALIVE;
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
	fs_cl_log(1, msg, NULL);
}
int fs_cluster_slot_dead(struct fs_cluster *cl, unsigned slot)
{
	struct timespec nap = {0, 50 * 1000 * 1000};
	uint64_t end = cvw_now_ms() + 2ull * fs_hb_timeout_ms(cl->hb);

	while (fs_hb_slot(cl->hb, slot) == FS_HB_ALIVE) {
		if (cvw_now_ms() > end || fs_cluster_fenced(cl))
			return 0;
		nanosleep(&nap, NULL);
	}
	return 1;
}

/* ---- test hook ---------------------------------------------------------- */

int fs_cluster_recover_hold(const char *step)
{
	const char *dir = getenv("UCFS_RECOVER_HOLD");
	char path[512], held[520];
	struct timespec nap = {0, 20 * 1000 * 1000};
	FILE *f;

	if (dir == NULL || dir[0] == '\0')
		return 0;
	snprintf(path, sizeof(path), "%s/%s", dir, step);
	if (access(path, F_OK) != 0)
		return 0;
	snprintf(held, sizeof(held), "%s.held", path);
	f = fopen(held, "w");
	if (f != NULL) {
		fprintf(f, "%d\n", (int)getpid());
		fclose(f);
	}
	while (access(path, F_OK) == 0)
		nanosleep(&nap, NULL);
	return 1;
}
