/*
 * test_crash_survivor.c — power loss at every write of a LIVE survivor's
 * recovery of a dead node's slot, while the survivor keeps working.
 *
 * Two core mounts A and B (journal slots 0 and 1) share one fault device
 * (blockdev/bd_fault.c: one volatile write cache; the split case gives B
 * its own wrapper, bd_fault_open_peer: a flush covers only its node's
 * writes). Both are nolock mounts that pick their slot, B first, then A
 * with slot 1 shown free (test_crash_handover.c says why). The test
 * stands for the cluster locks: every resource group belongs to one node
 * (A the even ones, B the odd ones) and only its owner allocates or frees
 * there; a file (a metadata block naming a data block, its own owner
 * FS_OWNER_INODE) belongs to the node holding its lock. A file is handed
 * over as the inode glock ops do it: the giver's fs_journal_sync_owner,
 * the taker's fs_cache_drop_owner.
 *
 * Phase 1, no crash: A and B create, rewrite, unlink and fsync files and
 * hand files to each other. B unlinking a file whose blocks lie in A's
 * groups logs the free (fs_flog_add and a revoke, as fs_alloc.c
 * free_common does for a group another node holds: FORMAT.md "Free
 * log"), so B dies with a free log. Its allocations move its statfs
 * change record; each node folds its change into the master now and
 * then under the statfs lock (emulated as the files' locks are; the
 * workers' quantum is 3600 s), and B dies holding that lock, with a
 * fold and (mostly) a change not folded since in its journal. B keeps
 * working after its last fsync (committed and uncommitted work), then
 * dies: its mount is abandoned (fs_core_abandon: no unmount, nothing
 * more written; what it wrote stays in the device's cache).
 *
 * Phase 2, where power fails: A recovers B's slot as a dlm survivor
 * does, with its own work (creates, rewrites, unlinks, fsyncs and folds
 * of its files and change; unlinks of B's fsync'ed files once it holds
 * them) between the steps: A works; B's journal is replayed
 * (fs_journal_replay, what fs_core_recover_node's recover_one runs in
 * the node-down callback); A takes B's groups, files and the statfs
 * lock (they come back with an invalid LVB: fs_alloc_rgrp_inval,
 * fs_cache_drop_owner); A works; B's free log is applied
 * (fs_flog_dead_apply); A works; B's statfs change is folded
 * (fs_statfs_fold_slot) and everything written back before the slot
 * lock would go (fs_journal_writeback), as fs_iopen.c adopt does; A
 * works. The threaded case runs A's work on a thread of its own, each
 * step while A does NSEG operations beside it, as A's requests run
 * beside the node-down callback and the recovery worker (the writes'
 * order then varies from run to run: a failed point may not replay).
 * The devices, the dry run, the crash points and each run are
 * crash_harness.h's. A dry run counts phase 2's device writes W and each
 * step's. Crash points: every write of each recovery step and the
 * SPAN_PAD writes after it, counted from the step's start (the commit
 * thread's early commits before it do not move them), then N spread
 * over 1..W+1 of phase 2 (40 one device, 20 split or threaded;
 * UCFS_CRASH_POINTS=N, 0 = every write, and then each kind of crash at
 * each write of the steps); each a clean cut, a seeded keep/drop/garble
 * of every unflushed write, or a torn write. UCFS_CRASH_AT=P or K:P
 * (step K: 0 replay, 1 free log, 2 fold) replays one point.
 *
 * After each crash, on what survived: fsck -n BEFORE any mount finds
 * nothing but leaks (the test's files are blocks no inode names); the
 * first mount after the whole-cluster crash replays both slots (the
 * slot map says mounted: slot 0, then slot 1 again, so a recovery cut
 * before B's journal header moved is replayed once more) and takes over
 * what B's slot still holds (its free log, its statfs change), as the
 * dlm recovery worker does for leftovers; then every file A or B had
 * fsync'ed is intact (its metadata version and data), no block is used
 * twice, every block of such a file is set in its bitmap, every block B
 * logged before its last fsync (and nobody allocated since) is free
 * again, B's log is empty, the statfs records agree with the group
 * counts; after a clean unmount fsck again finds nothing but leaks.
 * Orphans (the namespace layer's inodes) are not modelled here:
 * test_crash_survivor_ns.c does that with namespace mounts.
 * UCFS_SEED / --seed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_fixture.h"
#include "crash_harness.h"
#include "fusefs/core/fs_core_priv.h"
#include "fusefs/core/fs_internal.h"
#include "fusefs/fsck/fs_fsck.h"
#include "harness.h"

#define IMG_MB 12
#define JOURNAL_MB 2
#define RGRP_MB 2
#define NOPS1 300 /* phase 1 operations (either node) */
#define NSEG 25	  /* A's operations between two recovery steps */
#define MAXF 1024
#define MAXG 16
#define MAXL 512
#define NFREED 8

enum { A = 0, B = 1 };

struct pfile {
	int node;	  /* holder of its lock */
	int maker;	  /* the node that made it */
	int live, frozen; /* frozen: its node's fsync returned since */
	uint64_t m, d;	  /* metadata block (its own owner), data block */
	uint32_t ver;	  /* of m; d holds dver */
	uint32_t dver;
};

/* A free B logged; state 0 not fsync'ed yet, 1 fsync'ed (must be freed
 * by the recovery), 2 allocated again since (not checked). */
struct logged {
	uint64_t blk;
	int state;
};

struct mode {
	int split;    /* B on a wrapper of its own (its own volatile cache) */
	int threaded; /* A's work on a thread of its own (phase2_threaded) */
};

/* Phase 2's write indices from..to (1 = its first write). */
struct span {
	uint64_t from, to;
};

enum { ST_REPLAY, ST_FLOG, ST_FOLD, NSTEPS }; /* the recovery's steps */
static const char *const step_name[NSTEPS] = {"replay", "free log",
					      "statfs fold and write-back"};

struct run {
	struct ch_run cr; /* the harness's: devices, target, phase 2's start */
	uint64_t rng;
	struct fs *fs[2];
	struct fs_sb sb;
	int own[MAXG]; /* the node holding each group's lock */
	struct pfile pf[MAXF];
	unsigned npf;
	struct logged lg[MAXL];
	unsigned nlg;
	uint64_t freed[2][NFREED]; /* allocation goals per node */
	uint32_t ver;
	unsigned nfsync[2], ncreate, nunlink, nlend, nlogged, nfold[2];
	int statfs_holder;	  /* the node holding the statfs lock */
	unsigned replayed;	  /* B's transactions A replayed */
	struct span step[NSTEPS]; /* writes of each recovery step */
	const struct mode *m;
	/* threaded: the model above is the work thread's while it holds mu
	 * (the recovery steps touch only the fs, but take_over) */
	pthread_mutex_t mu;
	pthread_cond_t cv; /* mu: quota2 or stop2 changed, done2 set */
	unsigned ops2;	   /* mu: A's operations in phase 2 */
	unsigned quota2;   /* mu: ... it may do so far */
	int stop2;	   /* mu: the work thread stops */
	int done2;	   /* mu: ... stopped, with ret2 */
	int ret2;
};

static uint64_t rnd(struct run *r)
{
	return t_splitmix(&r->rng);
}

static uint32_t group_of(const struct run *r, uint64_t blk)
{
	return fs_rgrp_of(&r->sb, blk);
}

/* A goal in one of @n's groups: a block it freed lately, or a random
 * one. */
static uint64_t goal(struct run *r, int n)
{
	uint64_t g, b = r->freed[n][rnd(r) % NFREED];
	uint32_t len;

	if (b != 0 && rnd(r) % 4 && r->own[group_of(r, b)] == n)
		return b;
	do
		g = rnd(r) % r->sb.rgrp_count;
	while (r->own[g] != n);
	len = fs_rgrp_len(&r->sb, (uint32_t)g);
	return fs_rgrp_blk(&r->sb, (uint32_t)g) + rnd(r) % len;
}

/* Allocate one block for node @n, in its groups. */
static int alloc1(struct run *r, int n, struct fs_tx *tx, uint64_t *blk)
{
	uint32_t len;
	int ret = fs_alloc(tx, goal(r, n), 1, 1, blk, &len);

	if (ret == 0 && r->own[group_of(r, *blk)] != n) {
		fprintf(stderr,
			"  node %d got block %llu of group %u, not "
			"its own\n",
			n, (unsigned long long)*blk, group_of(r, *blk));
		return -EXDEV;
	}
	for (unsigned i = 0; ret == 0 && i < r->nlg; i++)
		if (r->lg[i].blk == *blk)
			r->lg[i].state = 2;
	return ret;
}

static int op_create(struct run *r, int n)
{
	struct fs *fs = r->fs[n];
	struct pfile p = {.node = n, .maker = n, .live = 1};
	struct fs_tx *tx;
	int ret;

	if (r->npf == MAXF)
		return 0;
	ret = fs_tx_begin(fs, 4 + 4 * fs_alloc_credits(fs), &tx);
	if (ret < 0)
		return ret;
	ret = alloc1(r, n, tx, &p.m);
	if (ret == 0)
		ret = alloc1(r, n, tx, &p.d);
	p.dver = p.ver = ++r->ver;
	if (ret == 0)
		ret = ch_file_new(tx, fs, p.m, p.d, p.ver);
	fs_tx_end(tx);
	if (ret == 0) {
		r->pf[r->npf++] = p;
		r->ncreate++;
	}
	return ret;
}

/* May node @n unlink @p? Its lock, and a group it holds (or, for B, a
 * free log) for each block. */
static int may_unlink(const struct run *r, const struct pfile *p, int n)
{
	return n == B || (r->own[group_of(r, p->m)] == n &&
			  r->own[group_of(r, p->d)] == n);
}

/* A live file of node @n: not frozen (@frozen 0), or any (1); one it
 * may unlink (@unlink). NULL if none. */
static struct pfile *pick(struct run *r, int n, int frozen, int unlink)
{
	unsigned start = r->npf ? (unsigned)(rnd(r) % r->npf) : 0;

	for (unsigned i = 0; i < r->npf; i++) {
		struct pfile *p = &r->pf[(start + i) % r->npf];

		if (p->live && p->node == n && (frozen || !p->frozen) &&
		    (!unlink || may_unlink(r, p, n)))
			return p;
	}
	return NULL;
}

/* Free @blk for node @n in @tx: in its own group at once, else (B) in
 * its free log, as free_common does when the group's lock is
 * another node's. */
static int free1(struct run *r, int n, struct fs_tx *tx, uint64_t blk)
{
	int ret;

	if (r->own[group_of(r, blk)] == n) {
		ret = fs_free(tx, blk, 1);
		if (ret == 0)
			r->freed[n][rnd(r) % NFREED] = blk;
		return ret;
	}
	ret = fs_flog_add(tx, blk, 1, 0);
	if (ret < 0)
		return ret;
	fs_journal_revoke(tx, blk);
	if (r->nlg < MAXL)
		r->lg[r->nlg++] = (struct logged){blk, 0};
	r->nlogged++;
	return 0;
}

static int unlink_file(struct run *r, int n, struct pfile *p)
{
	struct fs *fs = r->fs[n];
	struct fs_tx *tx;
	int ret;

	ret = fs_tx_begin(fs, 4 + 4 * fs_alloc_credits(fs), &tx);
	if (ret < 0)
		return ret;
	ret = free1(r, n, tx, p->m);
	if (ret == 0)
		ret = free1(r, n, tx, p->d);
	fs_tx_end(tx);
	if (ret == 0) {
		p->live = 0;
		r->nunlink++;
	}
	return ret;
}

static int op_unlink(struct run *r, int n, int frozen)
{
	struct pfile *p = pick(r, n, frozen, 1);

	return p == NULL ? op_create(r, n) : unlink_file(r, n, p);
}

static int op_rewrite(struct run *r, int n)
{
	struct fs *fs = r->fs[n];
	struct pfile *p = pick(r, n, 0, 0);
	struct fs_tx *tx;
	struct fs_buf *b;
	int ret;

	if (p == NULL)
		return op_create(r, n);
	ret = fs_tx_begin(fs, 4, &tx);
	if (ret < 0)
		return ret;
	ret = fs_buf_read(fs, p->m, FS_BT_XATTR, &b);
	if (ret == 0) {
		ret = fs_tx_write(tx, b);
		if (ret == 0)
			((struct fs_xattr_blk *)b->data)->count = ++r->ver;
		fs_buf_put(b);
	}
	fs_tx_end(tx);
	if (ret == 0)
		p->ver = r->ver;
	return ret;
}

static int op_fsync(struct run *r, int n)
{
	int ret = fs_journal_sync(r->fs[n]);

	if (ret < 0)
		return ret;
	for (unsigned i = 0; i < r->npf; i++)
		if (r->pf[i].live && r->pf[i].node == n)
			r->pf[i].frozen = 1;
	for (unsigned i = 0; n == B && i < r->nlg; i++)
		if (r->lg[i].state == 0)
			r->lg[i].state = 1;
	r->nfsync[n]++;
	return 0;
}

static struct fs_owner owner(const struct pfile *p)
{
	return (struct fs_owner){FS_OWNER_INODE, p->m};
}

/* Hand file @p of node @n to the other: the giver's glock sync, the
 * taker's inval. */
static int lend_file(struct run *r, int n, struct pfile *p)
{
	int ret = fs_journal_sync_owner(r->fs[n], owner(p));

	if (ret < 0)
		return ret;
	fs_cache_drop_owner(r->fs[!n], owner(p), NULL);
	p->node = !n;
	r->nlend++;
	return 0;
}

static int op_lend(struct run *r, int n)
{
	struct pfile *p = pick(r, n, rnd(r) % 2, 0);

	return p == NULL ? op_create(r, n) : lend_file(r, n, p);
}

/* The statfs lock (FS_LK_STATFS/0) to node @n: the holder's sync, then
 * @n's inval of the master. */
static int statfs_lock(struct run *r, int n)
{
	struct fs_owner o = {FS_OWNER_STATFS, 0};
	int ret = 0;

	if (r->statfs_holder == n)
		return 0;
	if (r->fs[!n] != NULL)
		ret = fs_journal_sync_owner(r->fs[!n], o);
	if (ret == 0)
		fs_cache_drop_owner(r->fs[n], o, NULL);
	r->statfs_holder = n;
	return ret;
}

/* Node @n folds its statfs change into the master (its worker's fold),
 * under the statfs lock; only if it holds the lock already unless
 * @move. */
static int op_fold(struct run *r, int n, int move)
{
	int ret;

	if (r->statfs_holder != n && (!move || r->fs[!n] == NULL))
		return 0; /* a dead node's lock: only after the recovery */
	ret = statfs_lock(r, n);
	if (ret == 0)
		ret = fs_statfs_fold(r->fs[n]);
	if (ret == 0)
		r->nfold[n]++;
	return ret;
}

/* A hands B up to 4 of its files and B unlinks 2 of them: B's free log
 * is never empty when it dies; B takes the statfs lock (it dies with it
 * and a fold in its journal: phase1). Then B checkpoints. */
static int b_logs(struct run *r)
{
	struct pfile *got[4];
	unsigned n = 0;
	int ret = 0;

	while (n < 4 && ret == 0 && (got[n] = pick(r, A, 1, 0)) != NULL)
		ret = lend_file(r, A, got[n++]);
	for (unsigned i = 0; i < n && i < 2 && ret == 0; i++)
		ret = unlink_file(r, B, got[i]);
	if (ret == 0)
		ret = statfs_lock(r, B);
	/* B's log from here on is far from half full (no write-back by the
	 * commit thread: B dies with its last transactions to replay) */
	return ret ? ret : fs_journal_checkpoint(r->fs[B], FS_CR_SYNC);
}

/* One operation of node @n; @lend: it may hand locks over. */
static int one_op(struct run *r, int n, int lend)
{
	unsigned c = (unsigned)(rnd(r) % 100);

	if (c < 30)
		return op_create(r, n);
	if (c < 45)
		return op_rewrite(r, n);
	if (c < 60)
		return op_unlink(r, n, 0);
	if (c < 66)
		return op_unlink(r, n, 1);
	if (c < 80 && lend)
		return op_lend(r, n);
	if (c < 88)
		return op_fsync(r, n);
	if (c < 91)
		return op_fold(r, n, lend);
	return op_create(r, n);
}

/* B's statfs change record (free blocks) as B has it: 0 also if
 * unreadable. */
static int64_t b_change(struct run *r)
{
	struct fs_buf *b;
	int64_t v = 0;

	if (fs_buf_read(r->fs[B], fs_statfs_change_blk(&r->sb, B), FS_BT_STATFS,
			&b) == 0) {
		v = ((const struct fs_statfs_rec *)b->data)->free;
		fs_buf_put(b);
	}
	return v;
}

/* B's last fsync, with a change not folded in it (a create while the
 * change nets to zero), so that the recovery has one to fold. */
static int b_last_fsync(struct run *r)
{
	int ret = 0;

	for (unsigned i = 0; i < 4 && ret == 0 && b_change(r) == 0; i++)
		ret = op_create(r, B);
	return ret ? ret : op_fsync(r, B);
}

/* Phase 1: both nodes work and hand files over; in the last third no
 * hand-over (each one checkpoints the giver's whole journal), so that
 * B's journal holds many transactions when it dies; it starts with
 * b_logs, and B folds its statfs change 10 operations later. B fsyncs
 * last (b_last_fsync) at a random point of the last eighth, then keeps
 * working a little. */
static int phase1(struct run *r)
{
	unsigned last = NOPS1 - 1 - (unsigned)(rnd(r) % (NOPS1 / 8));
	int ret = 0;

	for (unsigned op = 0; op < NOPS1 && ret == 0; op++) {
		if (op == last)
			ret = b_last_fsync(r);
		else if (op == NOPS1 * 2 / 3)
			ret = b_logs(r);
		else if (op == NOPS1 * 2 / 3 + 10)
			ret = op_fold(r, B, 0);
		else
			ret = one_op(r, (int)(rnd(r) % 2), op < NOPS1 * 2 / 3);
	}
	return ret;
}

/* A takes B's groups, files and statfs lock: they come back with an
 * invalid value block (the dead node held them EX), so A's copies go.
 * B's files not fsync'ed are not known to exist: left alone. */
static int take_over(struct run *r)
{
	int ret = 0;

	if (r->statfs_holder == B) /* no sync: B is dead */
		ret = statfs_lock(r, A);
	for (uint32_t g = 0; g < r->sb.rgrp_count && ret == 0; g++)
		if (r->own[g] == B) {
			ret = fs_alloc_rgrp_inval(r->fs[A], g);
			r->own[g] = A;
		}
	for (unsigned i = 0; i < r->npf; i++) {
		struct pfile *p = &r->pf[i];

		if (!p->live || p->node != B)
			continue;
		fs_cache_drop_owner(r->fs[A], owner(p), NULL);
		p->node = A;
		p->live = p->frozen;
	}
	return ret;
}

static int replay_b(struct run *r)
{
	char why[160] = "";
	int ret =
	    fs_journal_replay(r->fs[A], B, 0, &r->replayed, why, sizeof(why));

	if (ret < 0 && !bd_fault_crashed(r->cr.f))
		fprintf(stderr, "  replay: %d %s\n", ret, why);
	return ret;
}

/* B's free log, then its statfs change, as fs_iopen.c adopt does. */
static int dead_flog(struct fs *fs)
{
	fs_core_slotinfo_forget(fs, B);
	return fs_flog_dead_apply(fs, B);
}

static int dead_fold(struct fs *fs)
{
	int ret = fs_statfs_fold_slot(fs, B);

	if (ret == 0)
		ret = fs_journal_writeback(fs);
	fs_core_slotinfo_forget(fs, B);
	return ret;
}

static int a_works(struct run *r)
{
	int ret = 0;

	for (unsigned i = 0; i < NSEG && ret == 0; i++)
		ret = one_op(r, A, 0);
	return ret;
}

/* Recovery step @k, its writes noted in r->step[k]; crash points are
 * counted from its start. */
static int step(struct run *r, int k)
{
	uint64_t from = ch_step(&r->cr, k);
	int ret = k == ST_REPLAY ? replay_b(r)
		  : k == ST_FLOG ? dead_flog(r->fs[A])
				 : dead_fold(r->fs[A]);

	r->step[k] = (struct span){from, ch_writes(&r->cr)};
	return ret;
}

/* The threaded case's work thread: A's operations, as many as the
 * main thread allows (quota2), until told to stop or one fails (the
 * crash). */
static void *a_thread(void *arg)
{
	struct run *r = arg;
	int ret = 0;

	pthread_mutex_lock(&r->mu);
	while (!r->stop2 && ret == 0) {
		if (r->ops2 == r->quota2) {
			pthread_cond_wait(&r->cv, &r->mu);
			continue;
		}
		ret = one_op(r, A, 0);
		r->ops2++;
		pthread_cond_broadcast(&r->cv);
	}
	r->ret2 = ret;
	r->done2 = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* Let A do @n more operations (@wait: and wait for them). 0, or the
 * thread's error. */
static int more_ops(struct run *r, unsigned n, int wait)
{
	int ret = 0;

	pthread_mutex_lock(&r->mu);
	r->quota2 += n;
	pthread_cond_broadcast(&r->cv);
	while (wait && r->ops2 < r->quota2 && !r->done2)
		pthread_cond_wait(&r->cv, &r->mu);
	if (r->done2)
		ret = r->ret2 ? r->ret2 : -EIO;
	pthread_mutex_unlock(&r->mu);
	return ret;
}

/* Phase 2 with A's work on a thread of its own, as A's requests run
 * beside the node-down callback's replay and the recovery worker: A
 * works, then each step runs while A does NSEG more operations (all
 * but take_over, which changes the model). The writes' order varies
 * from run to run. */
static int phase2_threaded(struct run *r)
{
	pthread_t thr;
	int ret = -pthread_create(&thr, NULL, a_thread, r);

	if (ret < 0)
		return ret;
	ret = more_ops(r, NSEG, 1);
	for (int k = 0; k < NSTEPS && ret == 0; k++) {
		ret = more_ops(r, NSEG, 0);
		if (ret == 0)
			ret = step(r, k);
		if (ret == 0 && k == ST_REPLAY) {
			pthread_mutex_lock(&r->mu);
			ret = take_over(r);
			pthread_mutex_unlock(&r->mu);
		}
		if (ret == 0)
			ret = more_ops(r, 0, 1);
	}
	pthread_mutex_lock(&r->mu);
	r->stop2 = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	pthread_join(thr, NULL);
	return ret ? ret : r->ret2;
}

/* Phase 2: A recovers B's slot between stretches of its own work. */
static int phase2(struct run *r)
{
	if (r->m->threaded)
		return phase2_threaded(r);
	int ret = a_works(r);

	if (ret == 0)
		ret = step(r, ST_REPLAY);
	if (ret == 0)
		ret = take_over(r);
	if (ret == 0)
		ret = a_works(r);
	if (ret == 0)
		ret = step(r, ST_FLOG);
	if (ret == 0)
		ret = a_works(r);
	if (ret == 0)
		ret = step(r, ST_FOLD);
	if (ret == 0)
		ret = a_works(r);
	return ret;
}

/* --- setup and checks --------------------------------------------------- */

/* Block @blk's bit in its group's bitmap (as mount @fs has it): 1 set,
 * 0 clear, -1 unreadable. */
static int bit_of(struct fs *fs, uint64_t blk)
{
	uint32_t g = fs_rgrp_of(&fs->sb, blk);
	uint64_t i = blk - fs_rgrp_blk(&fs->sb, g);
	struct fs_buf *b;
	int bit;

	if (g == UINT32_MAX ||
	    fs_buf_read(fs, fs_rgrp_blk(&fs->sb, g) + 1 + i / FS_BITMAP_BITS,
			FS_BT_BITMAP, &b) < 0)
		return -1;
	i %= FS_BITMAP_BITS;
	bit = (((struct fs_bitmap_blk *)b->data)->bits[i / 8] >> (i % 8)) & 1;
	fs_buf_put(b);
	return bit;
}

/* Every fsync'ed file intact, its blocks set in the bitmap, none used
 * twice. */
static int check_files(struct run *r, struct fs *fs, struct bd_dev *bd)
{
	uint64_t nblk = bd_size(bd) >> FS_BLOCK_SHIFT;
	uint8_t *used = calloc(nblk, 1);
	int ok = used != NULL;

	for (unsigned i = 0; i < r->npf && ok; i++) {
		struct pfile *p = &r->pf[i];

		if (!p->frozen || !p->live)
			continue;
		ok = ch_file_ok(fs, bd, used, nblk, p->m, p->d, p->ver,
				p->dver) &&
		     bit_of(fs, p->m) == 1 && bit_of(fs, p->d) == 1;
		if (!ok)
			fprintf(stderr,
				"  fsync'ed file made by node %c (blocks "
				"%llu, %llu, version %u) lost or free\n",
				"AB"[p->maker], (unsigned long long)p -> m,
				(unsigned long long)p -> d, p -> ver);
	}
	free(used);
	return ok;
}

/* Every block B logged before its last fsync (not allocated since) is
 * free, and B's log is empty. */
static int check_flog(struct run *r, struct fs *fs)
{
	struct fs_buf *b;
	int ok = 1;

	for (unsigned i = 0; i < r->nlg && ok; i++)
		if (r->lg[i].state == 1 && bit_of(fs, r->lg[i].blk) != 0) {
			fprintf(stderr,
				"  block %llu of B's fsync'ed free log "
				"still in use\n",
				(unsigned long long)r->lg[i].blk);
			ok = 0;
		}
	fs_core_slotinfo_forget(fs, B);
	if (fs_buf_read(fs, fs_slotinfo_blk(B), FS_BT_SLOTINFO, &b) < 0)
		return 0;
	if (((struct fs_slotinfo *)b->data)->flog_count != 0) {
		fprintf(stderr, "  B's free log not empty\n");
		ok = 0;
	}
	fs_buf_put(b);
	return ok;
}

/* The statfs records (master + changes) agree with the group counts. */
static int check_statfs(struct fs *fs)
{
	int64_t nfree = 0, inodes = 0;
	struct fs_space sp;

	for (unsigned i = 0; i <= fs->sb.slot_count; i++) {
		const struct fs_statfs_rec *rec;
		struct fs_buf *b;

		if (fs_buf_read(fs, fs->sb.statfs_blk + i, FS_BT_STATFS, &b) <
		    0)
			return 0;
		rec = b->data;
		nfree += rec->free;
		inodes += rec->dinodes;
		fs_buf_put(b);
	}
	fs_space_get(fs, &sp);
	if (nfree == (int64_t)sp.free_blocks && inodes == (int64_t)sp.inodes)
		return 1;
	fprintf(stderr, "  statfs records %lld/%lld, groups %llu/%llu\n",
		(long long)nfree, (long long)inodes,
		(unsigned long long)sp.free_blocks,
		(unsigned long long)sp.inodes);
	return 0;
}

/* The first mount after the whole-cluster crash: both slots replayed,
 * then B's leftovers taken over; the checks; fsck after unmount. */
static int recover_check(struct run *r, struct bd_dev *img)
{
	struct fs *fs = NULL;
	int ok = cf_slot_states(img, FS_SLOT_MOUNTED, FS_SLOT_MOUNTED) == 0;

	ok = ok && ch_fsck_ok(img, "before mount", NULL);
	ok = ok && ch_mount_slot(img, A, 0, 3600, &fs) == 0;
	if (ok && (dead_flog(fs) < 0 || dead_fold(fs) < 0)) {
		fprintf(stderr, "  leftovers of slot 1 not taken over\n");
		ok = 0;
	}
	ok = ok && check_files(r, fs, img) && check_flog(r, fs) &&
	     check_statfs(fs);
	if (fs != NULL && fs_core_unmount(fs) < 0)
		ok = 0;
	return ok && ch_fsck_ok(img, "after unmount", NULL);
}

/* The template: two slots, a 2 MiB group each for A and B at least. */
static struct bd_dev *make_template(void)
{
	struct bd_dev *bd = cf_ram_fs_slots(IMG_MB, JOURNAL_MB, RGRP_MB, 2);
	struct fs *fs;

	if (bd == NULL || ch_mount_slot(bd, A, 0, 3600, &fs) < 0 ||
	    fs_core_unmount(fs) < 0) {
		if (bd != NULL)
			bd_close(bd);
		return NULL;
	}
	return bd;
}

static void counts(struct run *r, const char *what)
{
	struct fs_core_stats st;

	fs_core_stats_get(r->fs[A], &st);
	printf("  %s: %u creates, %u unlinks, %u hand-overs, fsyncs A %u B "
	       "%u, statfs folds A %u B %u, %u blocks in B's free log, B's "
	       "transactions replayed %u, dead log blocks applied %llu, dead "
	       "statfs folds %llu\n",
	       what, r->ncreate, r->nunlink, r->nlend, r->nfsync[A],
	       r->nfsync[B], r->nfold[A], r->nfold[B], r->nlogged, r->replayed,
	       (unsigned long long)st.flog_dead_applied,
	       (unsigned long long)st.statfs_dead_folds);
}

/* The dry run replayed transactions of B and applied its free log. Its
 * statfs change is folded only if not zero: B's last fsync commits one
 * (b_last_fsync), but B's journal may commit later work on its own, a
 * fold of B's among it (seed 12: one commit after the last fsync that
 * no operation made), so that fold is not required. */
static int dry_ok(struct run *r)
{
	struct fs_core_stats st;

	fs_core_stats_get(r->fs[A], &st);
	return r->replayed > 0 && r->nfsync[B] > 0 && r->nlogged > 0 &&
	       st.flog_dead_applied > 0 && st.statfs_dead_folds <= 1;
}

/* --- the harness's hooks (crash_harness.h) ------------------------------ */

struct surv_test {
	struct ch_test ch;
	struct mode m;
};

static int surv_start(struct ch_run *cr)
{
	struct run *r = (struct run *)cr;

	r->rng = cr->seed;
	r->m = &((const struct surv_test *)cr->test)->m;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	for (uint32_t g = 0; g < MAXG; g++)
		r->own[g] = (int)(g % 2);
	if (ch_read_sb(cr->bd[0], &r->sb) < 0 || r->sb.rgrp_count < 2 ||
	    r->sb.rgrp_count > MAXG)
		return -EIO;
	return ch_mount_pair(cr, 0, 3600, r->fs);
}

/* Phase 1, B dies, phase 2 (the workload crash points count from). */
static int surv_work(struct ch_run *cr)
{
	struct run *r = (struct run *)cr;
	int ret = phase1(r);

	if (ret < 0) {
		fprintf(stderr, "  phase 1 failed\n");
		return ret;
	}
	fs_core_abandon(r->fs[B]); /* B dies */
	r->fs[B] = NULL;
	ch_begin(cr);
	return phase2(r);
}

/* Every write of each recovery step and the SPAN_PAD writes after it
 * (A's own work goes on). */
#define SPAN_PAD 6
static int surv_dry(struct ch_run *cr)
{
	struct run *r = (struct run *)cr;

	for (int k = 0; k < NSTEPS; k++)
		ch_dry_step(cr, k, step_name[k], r->step[k].from, r->step[k].to,
			    r->step[k].to + 1 - r->step[k].from + SPAN_PAD);
	counts(r, "dry run");
	return dry_ok(r);
}

static void surv_stop(struct ch_run *cr)
{
	struct run *r = (struct run *)cr;

	for (int n = 0; n < 2; n++)
		if (r->fs[n] != NULL)
			fs_core_abandon(r->fs[n]);
}

static int surv_check(struct ch_run *cr, struct bd_dev *img)
{
	return recover_check((struct run *)cr, img);
}

static void surv_fini(struct ch_run *cr)
{
	struct run *r = (struct run *)cr;

	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
}

/* Crash points (crash_harness.h): every write of the recovery's steps
 * and SPAN_PAD after each, counted from the step's start (steps 0
 * replay, 1 free log, 2 fold for UCFS_CRASH_AT=K:P), then @npoints
 * spread over phase 2's W + 1 write indices. Returns the failed points
 * (stops after 3), ~0u if the dry run failed. */
static unsigned crash_points(const struct mode *m, uint64_t npoints)
{
	struct surv_test t = {
	    .ch = {.tmpl = make_template(),
		   .split = m->split,
		   .run_size = sizeof(struct run),
		   .start = surv_start,
		   .work = surv_work,
		   .dry = surv_dry,
		   .stop = surv_stop,
		   .check = surv_check,
		   .fini = surv_fini,
		   .note = m->threaded ? "\n  (threaded: the writes' order "
					 "varies, a replay may crash "
					 "elsewhere)"
				       : NULL},
	    .m = *m,
	};
	struct ch_opts o = {.spread = npoints, .maxbad = 3};
	unsigned bad;

	if (t.ch.tmpl == NULL)
		return ~0u;
	bad = ch_points(&t.ch, &o);
	bd_close(t.ch.tmpl);
	return bad;
}

static void test_crash_survivor(void)
{
	struct mode m = {0};

	CHECK_EQ(crash_points(&m, 40), 0);
}

/* B on a wrapper of its own: what it never flushed is not there for A
 * to replay, and is lost at the crash. */
static void test_crash_survivor_split(void)
{
	struct mode m = {.split = 1};

	CHECK_EQ(crash_points(&m, 20), 0);
}

/* A's work on a thread of its own, beside the recovery's steps. */
static void test_crash_survivor_threaded(void)
{
	struct mode m = {.threaded = 1};

	CHECK_EQ(crash_points(&m, 20), 0);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_crash_survivor);
	T_RUN(test_crash_survivor_split);
	T_RUN(test_crash_survivor_threaded);
	return t_done();
}
