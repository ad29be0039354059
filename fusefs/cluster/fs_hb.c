/*
 * fs_hb.c — the disk heartbeat (fs_hb.h): one thread per mount writes
 * this node's heartbeat block and reads every slot's, every interval.
 *
 * Reading. Each pass reads the slot area (the heartbeat and slotinfo
 * blocks of every slot) in one I/O. A slot whose block shows a new
 * (node, generation, counter) is "changed" at the END of that pass: a
 * beat that completed before the read is seen by it, so the end bounds
 * the beat's time from above. A node is dead on the disk when every live
 * block naming it has not changed for timeout_ms; a block met for the
 * first time counts as changed then (a crashed node's stale block must
 * be watched for timeout_ms before it is believed dead). When the last
 * pass is older than two intervals (the thread was held up) every node
 * is ALIVE: a beat may have come that nobody read.
 *
 * Writing and the lease. The writer's time base is the completion of
 * its own beats (CLOCK_MONOTONIC): a write of any kind is allowed while
 * the last beat completed less than lease = timeout - 2 * interval ago,
 * and a beat that completes more than the lease after the one before it
 * does not renew it (the node may have looked dead meanwhile): fenced.
 * Why that is enough: a reader declares us dead at T only if its pass
 * that started at S >= T - 2 * interval saw no change for timeout_ms, so
 * our last beat seen completed before T - timeout; a later beat would
 * have completed after S and within the lease of that one, i.e. before
 * T - timeout + lease + ... < S: a contradiction. So our writes end
 * before T - timeout + lease < T. The first beat has no predecessor: the
 * lease starts at fs_hb_start (the slot lock's grant), and fs_hb_start
 * watches at least two intervals after it, so that the readers saw it
 * before the mount writes anything. What no lease covers: writes already
 * in flight in the device or a hypervisor when the node froze (MOUNT.md).
 *
 * One slot, two writers. Two nodes that cannot reach each other may be
 * granted the same slot by their own lockspaces (two-node mode, both
 * started with the link cut). Each beat is therefore preceded, under
 * wmu, by a read pass that must still find our last beat (node,
 * generation, counter) in our block (check_own); a node that finds
 * another's is fenced and never beats again. Of two writers, the one
 * overwritten sees it before its next beat; the other wrote only after
 * a read that still showed its own beat, so the last writer keeps the
 * block. fs_hb_start reads just before the first beat (a live block of
 * another node refuses the slot) and then watches: a node alone watches
 * a full timeout, longer than the loser's lease after its last beat, so
 * the loser's writes have ended before the winner writes anything but
 * its beat.
 *
 * Fencing with a last word (fs_hb_fence_mark): the gate is shut, the
 * device's writes in flight are waited for, and if the lease still holds
 * (so nobody can have declared us dead and taken our slot) the block is
 * marked FENCED; a reader takes that for DEAD at once. bd.c counts a
 * write in flight before it checks the gate (sequentially consistent),
 * so none slips past a fencer that saw nothing in flight.
 *
 * Locking: hb->mu protects the slot table, the counters and stop; the
 * lease (lease_ns, fenced, beating) is atomic, the gate reads it on
 * every device write without a lock.
 */
#include "fusefs/cluster/fs_hb.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "blockdev/bd.h"
#include "fusefs/fs_format.h"
#include "fusefs/stats/fs_stats.h"
#include "lockmgr/cv_wait.h"
#include "lockmgr/cv_worker.h"

struct hb_slot {
	uint32_t node;	     /* block's node_id; 0 none */
	int live;	     /* state FS_HB_LIVE and verified */
	int fenced;	     /* state FS_HB_FENCED: node stopped writing */
	uint64_t gen, count; /* last seen */
	uint64_t changed_ns; /* end of the pass that saw them change */
};

struct fs_hb {
	struct bd_dev *bd;	   /* immutable, not owned */
	struct fs_hb_opts o;	   /* immutable */
	uint64_t interval_ns;	   /* immutable */
	uint64_t timeout_ns;	   /* immutable */
	uint64_t lease_ns;	   /* immutable: timeout - 2 intervals */
	unsigned nslots;	   /* immutable */
	uint64_t generation;	   /* immutable: ours */
	void *rbuf;		   /* thread: the slot area */
	struct fs_heartbeat *wbuf; /* thread (and start/close): our block */
	pthread_mutex_t wmu;	   /* serialises beats (wbuf) */

	/* atomics (__atomic) */
	int slot;	    /* ours, -1 before fs_hb_start */
	int fenced;	    /* the gate is shut for good */
	uint64_t last_beat; /* completion of our last beat (ns) */
	int write_failed;   /* our last beat's write failed (device) */
	uint32_t thief;	    /* a node found writing our slot's block (or
			       ~0u: unreadable); 0 none. Set once. */

	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct cvw_worker w;		/* the thread: mu, cv */
	uint64_t watch_ns;		/* mu: first pass started */
	uint64_t pass_start;		/* mu: of the last complete pass */
	struct hb_slot s[FS_MAX_SLOTS]; /* mu */
	uint64_t beats, beat_errors;	/* mu */
	uint64_t beat_max_ns;		/* mu: slowest beat write */
	uint64_t passes, read_errors;	/* mu */
	void (*notify)(void *arg, uint64_t nodes); /* mu (fs_hb_set_notify) */
	void *notify_arg;			   /* mu */
};

/* ---- the lease and the gate ------------------------------------------ */

static int hb_is_fenced(const struct fs_hb *hb)
{
	return __atomic_load_n(&hb->fenced, __ATOMIC_SEQ_CST);
}

static void fs_hb_fence(struct fs_hb *hb)
{
	__atomic_store_n(&hb->fenced, 1, __ATOMIC_RELEASE);
	bd_fence(hb->bd);
}

int fs_hb_fenced(struct fs_hb *hb)
{
	return hb_is_fenced(hb);
}

const char *fs_hb_fence_why(struct fs_hb *hb)
{
	if (__atomic_load_n(&hb->write_failed, __ATOMIC_ACQUIRE))
		return "disk lease ran out: the heartbeat could not be "
		       "written (the device failed the writes)";
	return "disk lease ran out (the node was held up past hb_timeout)";
}

/* The last word of a fenced node (fs_hb_fence_mark): its block says
 * FENCED. wmu held; writes past the gate (we shut it ourselves). */
static void mark_fenced(struct fs_hb *hb)
{
	struct fs_heartbeat *b = hb->wbuf;
	unsigned slot = (unsigned)__atomic_load_n(&hb->slot, __ATOMIC_ACQUIRE);

	b->counter++;
	b->time = (int64_t)time(NULL);
	b->state = FS_HB_FENCED;
	fs_blk_seal(b, FS_BT_HEARTBEAT, fs_heartbeat_blk(slot), b->counter);
	bd_write(hb->bd, b, FS_BLOCK_SIZE,
		 fs_heartbeat_blk(slot) * FS_BLOCK_SIZE, BD_IO_FUA);
}

void fs_hb_fence_mark(struct fs_hb *hb, struct bd_dev *dev)
{
	struct timespec nap = {0, 1000000};
	uint64_t last, end;
	int ok;

	pthread_mutex_lock(&hb->wmu); /* no beat now, none after */
	last = __atomic_load_n(&hb->last_beat, __ATOMIC_ACQUIRE);
	end = last + hb->lease_ns;
	ok = !hb_is_fenced(hb) &&
	     __atomic_load_n(&hb->slot, __ATOMIC_ACQUIRE) >= 0 &&
	     cvw_now_ns() < end;
	__atomic_store_n(&hb->fenced, 1, __ATOMIC_SEQ_CST);
	if (dev != NULL)
		bd_fence(dev);
	while (ok && dev != NULL) {
		struct bd_stats st;

		bd_stats_get(dev, &st);
		if (st.inflight == 0)
			break;
		ok = cvw_now_ns() < end;
		nanosleep(&nap, NULL);
	}
	if (ok && dev != hb->bd && cvw_now_ns() < end)
		mark_fenced(hb);
	bd_fence(hb->bd);
	pthread_mutex_unlock(&hb->wmu);
}

int fs_hb_gate(void *arg)
{
	struct fs_hb *hb = arg;
	uint64_t last = __atomic_load_n(&hb->last_beat, __ATOMIC_ACQUIRE);

	if (hb_is_fenced(hb))
		return -EIO;
	if (__atomic_load_n(&hb->slot, __ATOMIC_ACQUIRE) < 0)
		return -EIO; /* no lease before the first beat */
	if (cvw_now_ns() - last > hb->lease_ns) {
		fs_hb_fence(hb); /* frozen past our lease: maybe dead */
		return -EIO;
	}
	return 0;
}

/* Write one beat (state @state) and renew the lease. wmu held. */
static int beat_locked(struct fs_hb *hb, uint32_t state)
{
	struct fs_heartbeat *b = hb->wbuf;
	int slot = __atomic_load_n(&hb->slot, __ATOMIC_ACQUIRE);
	uint64_t t0 = cvw_now_ns(), t1, prev;
	int ret = fs_hb_gate(hb);

	if (ret < 0)
		return ret;
	b->counter++;
	b->slot = (uint32_t)slot;
	b->time = (int64_t)time(NULL);
	b->state = state;
	fs_blk_seal(b, FS_BT_HEARTBEAT, fs_heartbeat_blk((unsigned)slot),
		    b->counter);
	ret = bd_write(hb->bd, b, FS_BLOCK_SIZE,
		       fs_heartbeat_blk((unsigned)slot) * FS_BLOCK_SIZE,
		       BD_IO_FUA);
	t1 = cvw_now_ns();
	__atomic_store_n(&hb->write_failed, ret < 0, __ATOMIC_RELEASE);
	prev = __atomic_load_n(&hb->last_beat, __ATOMIC_ACQUIRE);
	if (ret == 0 && t1 - prev > hb->lease_ns)
		ret = -EIO; /* a gap past the lease: do not renew it */
	if (ret == 0)
		__atomic_store_n(&hb->last_beat, t1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&hb->mu);
	if (ret == 0)
		hb->beats++;
	else
		hb->beat_errors++;
	if (t1 - t0 > hb->beat_max_ns)
		hb->beat_max_ns = t1 - t0;
	pthread_mutex_unlock(&hb->mu);
	return ret;
}

static int beat(struct fs_hb *hb, uint32_t state)
{
	int ret;

	pthread_mutex_lock(&hb->wmu);
	ret = beat_locked(hb, state);
	pthread_mutex_unlock(&hb->wmu);
	return ret;
}

/* ---- reading --------------------------------------------------------- */

/* Bit @node of a node bitmap (0 for an id beyond it). */
static uint64_t node_bit(uint32_t node)
{
	return node < 64 ? 1ull << node : 0;
}

/* One slot's block from the pass that ended at @end. mu held. Returns
 * the nodes whose view it changed (fs_hb_set_notify). */
static uint64_t see_slot(struct fs_hb *hb, unsigned s, const void *blk,
			 uint64_t end)
{
	const struct fs_heartbeat *b = blk;
	struct hb_slot *x = &hb->s[s], was = *x;
	int ok = fs_blk_verify(b, FS_BT_HEARTBEAT, fs_heartbeat_blk(s)) == 0 &&
		 b->node_id != 0;

	x->fenced = ok && b->state == FS_HB_FENCED;
	if (!ok || b->state != FS_HB_LIVE) {
		x->live = 0;
		x->node = x->fenced ? b->node_id : 0;
	} else {
		if (!x->live || x->node != b->node_id ||
		    x->gen != b->generation || x->count != b->counter)
			x->changed_ns = end;
		x->live = 1;
		x->node = b->node_id;
		x->gen = b->generation;
		x->count = b->counter;
	}
	if (x->live == was.live && x->fenced == was.fenced &&
	    x->node == was.node && x->changed_ns == was.changed_ns)
		return 0;
	return node_bit(x->node) | node_bit(was.node);
}

/*
 * Is our slot's block, as the pass read it, still our last beat? Two
 * nodes that cannot reach each other may each be granted the same slot
 * by their own lockspace (two-node mode, started with the link down):
 * both then write the same block, and neither would see the other, as a
 * node skips its own slot. Every pass (which precedes each beat) checks
 * it: the node whose beat was overwritten stops (fenced, hb->thief),
 * without beating again. wmu held (no beat of ours is in flight).
 */
static void check_own(struct fs_hb *hb, const void *blk)
{
	const struct fs_heartbeat *b = blk;
	const struct fs_heartbeat *w = hb->wbuf;
	unsigned slot = (unsigned)__atomic_load_n(&hb->slot, __ATOMIC_ACQUIRE);
	uint32_t thief;

	if (w->counter == 0 || hb_is_fenced(hb))
		return; /* not beating yet, or stopped */
	if (fs_blk_verify(b, FS_BT_HEARTBEAT, fs_heartbeat_blk(slot)) == 0 &&
	    b->node_id == w->node_id && b->generation == w->generation &&
	    b->counter == w->counter)
		return;
	thief = fs_blk_verify(b, FS_BT_HEARTBEAT, fs_heartbeat_blk(slot)) == 0
		    ? b->node_id
		    : ~0u;
	__atomic_store_n(&hb->thief, thief, __ATOMIC_RELEASE);
	fs_hb_fence(hb);
}

static void read_pass(struct fs_hb *hb)
{
	uint64_t start = cvw_now_ns(), end;
	int slot = __atomic_load_n(&hb->slot, __ATOMIC_ACQUIRE);
	int ret = bd_read(hb->bd, hb->rbuf, 2ull * hb->nslots * FS_BLOCK_SIZE,
			  FS_SLOTAREA_BLK * FS_BLOCK_SIZE);

	end = cvw_now_ns();
	if (ret == 0 && slot >= 0)
		check_own(hb, (const char *)hb->rbuf +
				  2ull * (unsigned)slot * FS_BLOCK_SIZE);
	pthread_mutex_lock(&hb->mu);
	if (ret < 0) {
		hb->read_errors++;
	} else {
		uint64_t changed = 0;

		/* the first pass, or one after answers were ALIVE for want
		 * of passes (fs_hb_node): every answer may change */
		if (hb->watch_ns == 0 ||
		    end - hb->pass_start > 2 * hb->interval_ns)
			changed = ~0ull;

		for (unsigned s = 0; s < hb->nslots; s++)
			changed |= see_slot(hb, s,
					    (const char *)hb->rbuf +
						2ull * s * FS_BLOCK_SIZE,
					    end);
		if (hb->watch_ns == 0)
			hb->watch_ns = start;
		hb->pass_start = start;
		hb->passes++;
		if (changed != 0 && hb->notify != NULL)
			hb->notify(hb->notify_arg, changed);
	}
	pthread_mutex_unlock(&hb->mu);
}

int fs_hb_node(struct fs_hb *hb, uint32_t node, uint64_t *changed_ns)
{
	uint64_t now, changed = 0;
	int seen = 0, fenced = 0, state;

	pthread_mutex_lock(&hb->mu);
	/* after the lock: a pass that ended while we waited for it set
	 * changed_ns past a clock read before, and now - changed wrapped
	 * (a live node DEAD) */
	now = cvw_now_ns();
	for (unsigned s = 0; s < hb->nslots; s++) {
		if ((int)s == __atomic_load_n(&hb->slot, __ATOMIC_ACQUIRE) ||
		    hb->s[s].node != node)
			continue;
		fenced |= hb->s[s].fenced;
		if (!hb->s[s].live)
			continue;
		seen = 1;
		if (hb->s[s].changed_ns > changed)
			changed = hb->s[s].changed_ns;
	}
	if (hb->watch_ns == 0 || now - hb->pass_start > 2 * hb->interval_ns)
		state = FS_HB_ALIVE; /* not read lately: cannot tell */
	else if (!seen && fenced && node != hb->o.node)
		state = FS_HB_DEAD; /* it said it stopped writing */
	else if (!seen || node == hb->o.node)
		state = FS_HB_NONE;
	else
		state =
		    now - changed > hb->timeout_ns ? FS_HB_DEAD : FS_HB_ALIVE;
	pthread_mutex_unlock(&hb->mu);
	if (changed_ns != NULL)
		*changed_ns = changed;
	return state;
}

void fs_hb_set_notify(struct fs_hb *hb, void (*fn)(void *arg, uint64_t nodes),
		      void *arg)
{
	pthread_mutex_lock(&hb->mu);
	hb->notify = fn;
	hb->notify_arg = arg;
	pthread_mutex_unlock(&hb->mu);
}

int fs_hb_slot(struct fs_hb *hb, unsigned slot)
{
	uint64_t now;
	int state;

	if (slot >= hb->nslots)
		return FS_HB_NONE;
	pthread_mutex_lock(&hb->mu);
	now = cvw_now_ns(); /* after the lock: fs_hb_node says why */
	if (hb->watch_ns == 0 || now - hb->pass_start > 2 * hb->interval_ns)
		state = FS_HB_ALIVE;
	else if (hb->s[slot].fenced)
		state = FS_HB_DEAD;
	else if (!hb->s[slot].live)
		state = FS_HB_NONE;
	else
		state = now - hb->s[slot].changed_ns > hb->timeout_ns
			    ? FS_HB_DEAD
			    : FS_HB_ALIVE;
	pthread_mutex_unlock(&hb->mu);
	return state;
}

/* ---- thread ---------------------------------------------------------- */

static void *hb_thread(void *arg)
{
	struct fs_hb *hb = arg;
	uint64_t next = cvw_now_ns();

	pthread_mutex_lock(&hb->mu);
	while (!cvw_worker_stopping(&hb->w)) {
		if (cvw_now_ns() < next) {
			cvw_wait_until(&hb->cv, &hb->mu, next);
			continue;
		}
		next = cvw_now_ns() + hb->interval_ns;
		pthread_mutex_unlock(&hb->mu);
		/* read, then beat: never over a beat we could have seen */
		pthread_mutex_lock(&hb->wmu);
		read_pass(hb);
		if (__atomic_load_n(&hb->slot, __ATOMIC_ACQUIRE) >= 0 &&
		    !hb_is_fenced(hb) && beat_locked(hb, FS_HB_LIVE) < 0)
			fs_hb_fence(hb);
		pthread_mutex_unlock(&hb->wmu);
		pthread_mutex_lock(&hb->mu);
	}
	pthread_mutex_unlock(&hb->mu);
	return NULL;
}

/* ---- life cycle ------------------------------------------------------ */

static int read_slot_count(struct bd_dev *bd, unsigned *n, char *why,
			   size_t whylen)
{
	struct fs_sb *sb = bd_buf_alloc(FS_BLOCK_SIZE);
	int ret = -ENOMEM;

	if (sb == NULL)
		return ret;
	for (uint64_t blk = FS_SB_BLK; blk <= FS_SB_BACKUP_BLK; blk++) {
		ret = bd_read(bd, sb, FS_BLOCK_SIZE, blk * FS_BLOCK_SIZE);
		if (ret == 0 && fs_blk_verify(sb, FS_BT_SB, blk) == 0 &&
		    sb->slot_count > 0 && sb->slot_count <= FS_MAX_SLOTS) {
			*n = sb->slot_count;
			free(sb);
			return 0;
		}
	}
	free(sb);
	snprintf(why, whylen,
		 "not a ucfs filesystem (no good superblock "
		 "for the disk heartbeat)");
	return ret < 0 ? ret : -EINVAL;
}

static void init_block(struct fs_hb *hb)
{
	struct fs_heartbeat *b = hb->wbuf;

	memset(b, 0, FS_BLOCK_SIZE);
	b->node_id = hb->o.node;
	b->generation = hb->generation;
	b->interval_ms = hb->o.interval_ms;
	b->timeout_ms = hb->o.timeout_ms;
	b->addr = hb->o.addr;
	b->port = hb->o.port;
}

int fs_hb_open(struct bd_dev *bd, const struct fs_hb_opts *o,
	       struct fs_hb **out, char *why, size_t whylen)
{
	struct fs_hb *hb = calloc(1, sizeof(*hb));
	int ret;

	if (hb == NULL)
		return -ENOMEM;
	hb->bd = bd;
	hb->o = *o;
	hb->slot = -1;
	hb->interval_ns = (uint64_t)o->interval_ms * 1000000ull;
	hb->timeout_ns = (uint64_t)o->timeout_ms * 1000000ull;
	hb->lease_ns = hb->timeout_ns - 2 * hb->interval_ns;
	if (getrandom(&hb->generation, sizeof(hb->generation), 0) !=
	    (ssize_t)sizeof(hb->generation))
		hb->generation = cvw_now_ns() ^ ((uint64_t)o->node << 56);
	ret = read_slot_count(bd, &hb->nslots, why, whylen);
	if (ret < 0)
		goto out_free;
	ret = -ENOMEM;
	hb->rbuf = bd_buf_alloc(2ull * hb->nslots * FS_BLOCK_SIZE);
	hb->wbuf = bd_buf_alloc(FS_BLOCK_SIZE);
	if (hb->rbuf == NULL || hb->wbuf == NULL)
		goto out_free;
	init_block(hb);
	pthread_mutex_init(&hb->mu, NULL);
	pthread_mutex_init(&hb->wmu, NULL);
	pthread_cond_init(&hb->cv, NULL); /* waits: cv_wait.h (monotonic) */
	ret = cvw_worker_start(&hb->w, &hb->mu, &hb->cv, hb_thread, hb,
			       "ucfs-hb");
	if (ret < 0) {
		pthread_cond_destroy(&hb->cv);
		pthread_mutex_destroy(&hb->wmu);
		pthread_mutex_destroy(&hb->mu);
		goto out_free;
	}
	*out = hb;
	return 0;
out_free:
	free(hb->rbuf);
	free(hb->wbuf);
	free(hb);
	return ret;
}

/* Sleep until a read pass that started after @t has completed; -EIO
 * when fenced, or when none came by @t + timeout (reads failing). */
static int wait_pass(struct fs_hb *hb, uint64_t t)
{
	struct timespec nap = {0, 10 * 1000 * 1000};

	for (;;) {
		uint64_t seen;

		pthread_mutex_lock(&hb->mu);
		seen = hb->pass_start;
		pthread_mutex_unlock(&hb->mu);
		if (hb_is_fenced(hb) || cvw_now_ns() > t + hb->timeout_ns)
			return -EIO;
		if (seen > t)
			return 0;
		nanosleep(&nap, NULL);
	}
}

/* Before our first beat: slot @slot's block must not be another node's
 * live beat. A crashed owner's block is dead after timeout_ms; a block
 * still changing then belongs to a node that beats in our slot although
 * our lockspace granted it to us: one we cannot reach. 0, or -EBUSY
 * (its node in *@other). */
static int slot_free(struct fs_hb *hb, unsigned slot, uint32_t *other)
{
	struct timespec nap = {0, 20 * 1000 * 1000};
	uint64_t t0 = cvw_now_ns();
	int ret = wait_pass(hb, t0);

	while (ret == 0 && fs_hb_slot(hb, slot) == FS_HB_ALIVE) {
		if (cvw_now_ns() > t0 + hb->timeout_ns + 2 * hb->interval_ns) {
			pthread_mutex_lock(&hb->mu);
			*other = hb->s[slot].node;
			pthread_mutex_unlock(&hb->mu);
			return -EBUSY;
		}
		nanosleep(&nap, NULL);
	}
	return ret;
}

int fs_hb_start(struct fs_hb *hb, unsigned slot, unsigned watch_ms,
		uint32_t *other)
{
	uint64_t watch = (uint64_t)watch_ms * 1000000ull, first;
	int ret;

	*other = 0;
	if (slot >= hb->nslots)
		return -EINVAL;
	ret = slot_free(hb, slot, other);
	if (ret < 0)
		return ret;
	if (watch < 2 * hb->interval_ns)
		watch = 2 * hb->interval_ns;
	pthread_mutex_lock(&hb->wmu);
	read_pass(hb); /* the latest view, just before we write */
	if (fs_hb_slot(hb, slot) == FS_HB_ALIVE) { /* began meanwhile */
		pthread_mutex_lock(&hb->mu);
		*other = hb->s[slot].node;
		pthread_mutex_unlock(&hb->mu);
		pthread_mutex_unlock(&hb->wmu);
		return -EBUSY;
	}
	__atomic_store_n(&hb->last_beat, cvw_now_ns(), __ATOMIC_RELEASE);
	__atomic_store_n(&hb->slot, (int)slot, __ATOMIC_RELEASE);
	ret = beat_locked(hb, FS_HB_LIVE);
	first = __atomic_load_n(&hb->last_beat, __ATOMIC_ACQUIRE);
	pthread_mutex_unlock(&hb->wmu);
	if (ret < 0) {
		fs_hb_fence(hb);
		return -EIO;
	}
	/* the watch: every pass until one that started after it ended
	 * found our beat in place (check_own) */
	while (cvw_now_ns() < first + watch)
		if (wait_pass(hb, cvw_now_ns()) < 0)
			break;
	ret = hb_is_fenced(hb) ? -EIO : wait_pass(hb, first + watch);
	if (ret < 0)
		*other = __atomic_load_n(&hb->thief, __ATOMIC_ACQUIRE);
	return ret;
}

uint32_t fs_hb_thief(struct fs_hb *hb)
{
	return __atomic_load_n(&hb->thief, __ATOMIC_ACQUIRE);
}

uint64_t fs_hb_lease_ms(const struct fs_hb *hb)
{
	return hb->lease_ns / 1000000ull;
}

unsigned fs_hb_timeout_ms(const struct fs_hb *hb)
{
	return hb->o.timeout_ms;
}

void fs_hb_stats(struct fs_hb *hb, struct fs_json *o)
{
	uint64_t now = cvw_now_ns();
	uint64_t last = __atomic_load_n(&hb->last_beat, __ATOMIC_ACQUIRE);

	fs_json_u64(o, "hb_interval_ms", hb->o.interval_ms);
	fs_json_u64(o, "hb_timeout_ms", hb->o.timeout_ms);
	fs_json_u64(o, "hb_lease_ms", hb->lease_ns / 1000000ull);
	fs_json_i64(o, "hb_age_ms",
		    last == 0 ? -1 : (int64_t)((now - last) / 1000000ull));
	pthread_mutex_lock(&hb->mu);
	fs_json_u64(o, "hb_beats", hb->beats);
	fs_json_u64(o, "hb_beat_errors", hb->beat_errors);
	fs_json_u64(o, "hb_beat_max_ns", hb->beat_max_ns);
	fs_json_u64(o, "hb_reads", hb->passes);
	fs_json_u64(o, "hb_read_errors", hb->read_errors);
	pthread_mutex_unlock(&hb->mu);
}

void fs_hb_close(struct fs_hb *hb, int clean)
{
	if (hb == NULL)
		return;
	cvw_worker_stop(&hb->w);
	if (clean && __atomic_load_n(&hb->slot, __ATOMIC_ACQUIRE) >= 0 &&
	    !hb_is_fenced(hb))
		beat(hb, FS_HB_STOPPED);
	pthread_cond_destroy(&hb->cv);
	pthread_mutex_destroy(&hb->wmu);
	pthread_mutex_destroy(&hb->mu);
	free(hb->rbuf);
	free(hb->wbuf);
	free(hb);
}
