/*
 * test_crash_handover.c — power loss at every point of a 2-node lock
 * ping-pong, against the journal's checkpoint records (FORMAT.md
 * "Journal": a lock leaving a node ends its checkpoint with a JCKPT
 * record written without a flush).
 *
 * Two core mounts A and B (journal slots 0 and 1) share ONE fault device
 * (blockdev/bd_fault.c: one volatile write cache, so a flush by B also
 * makes A's completed writes durable, as on one disk or one image file).
 * Records depend on that. The split cases give each node its own fault
 * wrapper over the same RAM device (bd_fault_open_peer: a volatile cache
 * per node, a flush covers only its node's writes, as an NBD export
 * without multi-conn; one power supply, so a crash point counts the
 * writes of both and drops both caches): bd_flush_covers_all() is 0 there,
 * the journal must move the header instead and lose nothing
 * (test_crash_handover_split). When the same wrappers claim that a flush
 * covers all, the records come back and the checks must catch a lost
 * frozen state at some crash point (test_crash_handover_split_lie_caught
 * runs every write index until the first failure; it fails if none).
 * The mixed cases give node A a flush that covers both caches
 * (bd_fault_set_flush_all: the image file beside an NBD export without
 * multi-conn) and B its own only: A's journal would write records that
 * B's flushes do not make durable. A works alone (with records) until
 * JOIN_OP, then B joins as a dlm node would: with the records agreement
 * (fusefs/cluster/fs_jrec.c, over two in-process lockspaces, lk_local.h)
 * B's CW is granted only after A turned its records off and flushed, and
 * nothing is lost (test_crash_handover_mixed); without it a frozen state
 * must be lost at some crash point (_mixed_unagreed_caught).
 * The core refuses a dlm mount without a cluster, so both are nolock
 * mounts that pick their slot (fs_core_opts.slot): B first, then A
 * with the slot map showing slot 1 free (else A's mount would replay
 * B's live journal). Nothing else is shared: each mount has its own cache and
 * allocator state, kept coherent by the test's lock, below.
 *
 * One token stands for the locks of a shared file (its metadata block SH,
 * owner SHARED_INO) and of every resource group. Only its holder works;
 * a hand-over runs the glock ops: the giver's sync
 * (fs_journal_sync_owner of SH's owner and of each group: commit,
 * checkpoint, JCKPT record), the taker's inval (fs_cache_drop_owner of
 * SH, fs_alloc_rgrp_inval of each group). The seeded workload, for the
 * holder: append to / rewrite / drop from the shared file (each entry a
 * raw "file data" block written in place, never journaled, plus its
 * entry in SH), create / rewrite / unlink private files (a metadata
 * block naming a data block), fsync (fs_journal_sync). Allocations aim
 * at blocks freed lately by either node, so a block one node's journal
 * holds an image of is soon the other node's data or metadata (a stale
 * replay would overwrite live data).
 * Frozen (must survive): a private file live when its node's fsync
 * returned; the shared file's state when a hand-over or an fsync
 * returned (the next holder built on it).
 *
 * The devices, the dry run, the crash points and each run are
 * crash_harness.h's. A dry run counts the device writes W (about 700).
 * Then at 150 crash points (60 without JCKPT; UCFS_CRASH_POINTS=N, 0 =
 * all) spread over 1..W+1 the workload runs on a fresh copy and the
 * device dies at that write: unflushed writes dropped, or each kept / dropped /
 * garbled by seed, or the write torn (one in three each). Then, on what
 * survived: fsck -n BEFORE any mount finds no journal error; recovery as
 * the first mount after a whole-cluster crash does it (the slot map
 * says both slots are mounted: every journal, in slot order, before
 * anything else is read); the shared file is one
 * of its states from the last frozen one on, with every entry's data intact;
 * every frozen private file is intact; no block is used twice; fsck
 * finds no journal error after a clean unmount. fsck's other complaints
 * (these blocks belong to no inode) are not this test's business.
 *
 * The dry run starts with the token on slot 0; odd crash points start
 * it on slot 1 (the same workload, the nodes' roles swapped), so that
 * the slot-order replay also runs in the other order of the roles (a
 * dlm mount replays the dead slots, then its own).
 *
 * Run on an image with JCKPT (records) and on one without (the header
 * move with FUA: main's behaviour before JCKPT), split as above (60
 * points), and with a 1 MiB cache (test_crash_handover_cache: fewer
 * hand-overs, so that handles find the cache half pinned and the node
 * commits and checkpoints for cache pressure, FS_CR_CACHE, ending with a
 * record while it keeps its locks; the dry run notes the write span of
 * each such operation and the crash points then take every write index
 * of the first and 2 * SPAN_PAD after it, counted from the operation's
 * start: each operation is a step of the harness, so the commit
 * thread's early commits before it do not move them). UCFS_CRASH_AT=P,
 * or OP:P for write P of operation OP (NOPS: B's join), replays one
 * point. UCFS_SEED / --seed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_fixture.h"
#include "crash_harness.h"
#include "fusefs/cluster/fs_jrec.h"
#include "fusefs/core/fs_core_priv.h"
#include "fusefs/core/fs_internal.h"
#include "fusefs/fsck/fs_fsck.h"
#include "harness.h"
#include "lk_local.h"

#define IMG_MB 16
#define JOURNAL_MB 1
#define RGRP_MB 4
#define NOPS 560
#define SH_MAX 64
#define MAXF 1024
#define NFREED 8
#define SHARED_INO 0x5ead0001ull
#define JOIN_OP 140  /* mixed: node B joins before this operation */
#define JOIN_SPAN 64 /* mixed: every write index this far past the join */
/* mixed: the join's step (crash_harness.h); an operation's step is its
 * index */
#define JOIN_STEP NOPS
#define JREC_RETRY_MS 10

/* --- the model ---------------------------------------------------------- */

struct ent {
	uint64_t blk; /* data block */
	uint32_t ver;
};

struct shstate {
	unsigned n;
	struct ent e[SH_MAX];
};

struct pfile {
	int node, live, frozen;
	uint64_t m, d; /* metadata block (its own owner), data block */
	uint32_t ver;  /* of m; d holds the version it was made with */
	uint32_t dver;
};

/* How a run's nodes reach the device, and the workload's knobs. */
struct mode {
	int jckpt; /* the image has JCKPT */
	int split; /* a fault wrapper (volatile cache) per node */
	int lie;   /* split, but the wrappers claim a flush covers all */
	int mixed; /* split, but A's flush covers every member's writes
		      (bd_fault_set_flush_all); B joins at JOIN_OP */
	int agree; /* mixed: the records agreement runs (fs_jrec.c) */
	unsigned cache_mb; /* the workload's cache_mb (0: 8) */
	unsigned ho_skip;  /* 1 in ho_skip hand-overs drawn happens, the
			      others create files (0: all happen) */
	int keep;	   /* no unlinks: creates instead */
	unsigned burst;	   /* files a create op makes (0: 1) */
	unsigned nspans;   /* crash points at the first nspans operations
			      that made a cache pressure commit */
};

/* Operation @op's write indices from..to (1 = the workload's first). */
struct opspan {
	unsigned op;
	uint64_t from, to;
};

struct run {
	struct ch_run cr; /* the harness's: devices, target, workload start */
	uint64_t rng;
	struct fs *fs[2];
	int holder;
	struct fs_sb sb;
	uint64_t sh;		/* the shared file's block */
	struct shstate *hist;	/* the shared file's states */
	unsigned nhist, frozen; /* frozen: index in hist */
	struct pfile pf[MAXF];
	unsigned npf;
	uint64_t freed[NFREED]; /* allocation goals */
	uint32_t ver;
	unsigned handovers, fsyncs;
	const struct mode *m;
	struct opspan *ops_cr; /* NOPS, the dry run only: the operations
				  that made a cache pressure commit */
	unsigned nops_cr;
	/* mixed: the agreement of nodes A, B (lockspaces 1, 2) */
	struct fs_jrec *jr[2];
	int joined;	    /* B joined: hand-overs go to it */
	uint64_t join_from; /* write index (from 1) of join()'s start, */
	uint64_t join_w;    /* ... of B's join after A's hand-over */
	uint64_t join_to;   /* ... of join()'s last write */
};

static uint64_t rnd(struct run *r)
{
	return t_splitmix(&r->rng);
}

static uint64_t goal(struct run *r)
{
	return rnd(r) % 4 ? r->freed[rnd(r) % NFREED] : 0;
}

static void freed(struct run *r, uint64_t blk)
{
	r->freed[rnd(r) % NFREED] = blk;
}

static int alloc1(struct run *r, struct fs_tx *tx, uint64_t *blk)
{
	uint32_t len;

	return fs_alloc(tx, goal(r), 1, 1, blk, &len);
}

static struct shstate *cur(struct run *r)
{
	return &r->hist[r->nhist - 1];
}

static void sh_store(struct fs_xattr_blk *x, const struct shstate *s)
{
	x->owner = SHARED_INO;
	x->count = s->n;
	memcpy(x->data, s->e, s->n * sizeof(s->e[0]));
}

/* One change of the shared file: @how 0 append, 1 rewrite, 2 drop. */
static int op_shared(struct run *r, int how)
{
	struct fs *fs = r->fs[r->holder];
	struct shstate next = *cur(r);
	uint64_t old = 0, nb = 0;
	struct fs_tx *tx;
	struct fs_buf *b;
	unsigned k = next.n ? (unsigned)(rnd(r) % next.n) : 0;
	int ret;

	if (next.n == 0 || (how == 0 && next.n == SH_MAX))
		how = next.n == 0 ? 0 : 2;
	ret = fs_tx_begin(fs, 4 + 4 * fs_alloc_credits(fs), &tx);
	if (ret < 0)
		return ret;
	if (how != 2)
		ret = alloc1(r, tx, &nb);
	if (ret == 0 && how != 2)
		ret = cf_data_write(r->fs[r->holder]->bd, nb, ++r->ver);
	if (ret == 0 && how != 0) {
		old = next.e[k].blk;
		ret = fs_free(tx, old, 1);
	}
	if (ret == 0)
		ret = fs_buf_read(fs, r->sh, FS_BT_XATTR, &b);
	if (ret == 0) {
		ret = fs_tx_write(tx, b);
		if (how == 0)
			next.e[next.n++] = (struct ent){nb, r->ver};
		else if (how == 1)
			next.e[k] = (struct ent){nb, r->ver};
		else
			next.e[k] = next.e[--next.n];
		if (ret == 0)
			sh_store(b->data, &next);
		fs_buf_put(b);
	}
	fs_tx_end(tx);
	if (ret == 0) {
		r->hist[r->nhist++] = next;
		if (old != 0)
			freed(r, old);
	}
	return ret;
}

static int op_create(struct run *r)
{
	struct fs *fs = r->fs[r->holder];
	struct pfile p = {.node = r->holder, .live = 1};
	struct fs_tx *tx;
	int ret;

	if (r->npf == MAXF)
		return 0;
	ret = fs_tx_begin(fs, 4 + 4 * fs_alloc_credits(fs), &tx);
	if (ret < 0)
		return ret;
	ret = alloc1(r, tx, &p.m);
	if (ret == 0)
		ret = alloc1(r, tx, &p.d);
	p.dver = p.ver = ++r->ver;
	if (ret == 0)
		ret = ch_file_new(tx, fs, p.m, p.d, p.ver);
	fs_tx_end(tx);
	if (ret == 0)
		r->pf[r->npf++] = p;
	return ret;
}

/* A live, not frozen private file of the holder, or NULL. */
static struct pfile *pick_mine(struct run *r)
{
	unsigned start = r->npf ? (unsigned)(rnd(r) % r->npf) : 0;

	for (unsigned i = 0; i < r->npf; i++) {
		struct pfile *p = &r->pf[(start + i) % r->npf];

		if (p->live && !p->frozen && p->node == r->holder)
			return p;
	}
	return NULL;
}

/* Rewrite (@unlink 0) or unlink a private file. */
static int op_private(struct run *r, int unlink)
{
	struct fs *fs = r->fs[r->holder];
	struct pfile *p = pick_mine(r);
	struct fs_tx *tx;
	struct fs_buf *b;
	int ret;

	if (p == NULL)
		return op_create(r);
	ret = fs_tx_begin(fs, 4 + 4 * fs_alloc_credits(fs), &tx);
	if (ret < 0)
		return ret;
	if (unlink) {
		ret = fs_free(tx, p->m, 1);
		if (ret == 0)
			ret = fs_free(tx, p->d, 1);
	} else {
		ret = fs_buf_read(fs, p->m, FS_BT_XATTR, &b);
		if (ret == 0) {
			ret = fs_tx_write(tx, b);
			if (ret == 0)
				((struct fs_xattr_blk *)b->data)->count =
				    ++r->ver;
			fs_buf_put(b);
		}
	}
	fs_tx_end(tx);
	if (ret == 0 && unlink) {
		p->live = 0;
		freed(r, p->m);
		freed(r, p->d);
	} else if (ret == 0) {
		p->ver = r->ver;
	}
	return ret;
}

static int op_fsync(struct run *r)
{
	int ret = fs_journal_sync(r->fs[r->holder]);

	if (ret < 0)
		return ret;
	for (unsigned i = 0; i < r->npf; i++)
		if (r->pf[i].live && r->pf[i].node == r->holder)
			r->pf[i].frozen = 1;
	r->frozen = r->nhist - 1;
	r->fsyncs++;
	return 0;
}

/* The giver's glock sync, then the taker's inval, of every lock. */
static int handover(struct run *r)
{
	struct fs *g = r->fs[r->holder], *t = r->fs[!r->holder];
	struct fs_owner sh = {FS_OWNER_INODE, SHARED_INO};
	int ret = fs_journal_sync_owner(g, sh);

	for (uint32_t i = 0; i < r->sb.rgrp_count && ret == 0; i++)
		ret = fs_journal_sync_owner(
		    g, (struct fs_owner){FS_OWNER_RGRP, i});
	if (ret < 0)
		return ret;
	r->frozen = r->nhist - 1;
	if (r->m->mixed && !r->joined) {
		r->handovers++; /* nobody to take it: the sync alone */
		return 0;
	}
	fs_cache_drop_owner(t, sh, NULL);
	for (uint32_t i = 0; i < r->sb.rgrp_count && ret == 0; i++)
		ret = fs_alloc_rgrp_inval(t, i);
	r->holder = !r->holder;
	r->handovers++;
	return ret;
}

/* A create op: m->burst files, a transaction each. */
static int op_creates(struct run *r)
{
	int ret = op_create(r);

	for (unsigned i = 1; i < r->m->burst && ret == 0; i++)
		ret = op_create(r);
	return ret;
}

static int one_op(struct run *r)
{
	unsigned c = (unsigned)(rnd(r) % 100);

	if (c < 14 && r->m->ho_skip && rnd(r) % r->m->ho_skip)
		return op_creates(r);
	if (c < 14)
		return handover(r);
	if (c < 34)
		return op_shared(r, 0);
	if (c < 44)
		return op_shared(r, 1);
	if (c < 52)
		return op_shared(r, 2);
	if (c < 68)
		return op_creates(r);
	if (c < 78)
		return op_private(r, 0);
	if (c < 92)
		return r->m->keep ? op_creates(r) : op_private(r, 1);
	return op_fsync(r);
}

/* Mixed: B joins. A's last sync ended with a record (unflushed); with
 * the agreement B's CW is granted once A's drop turned its records off
 * and flushed. Then the token goes to B at once (A has nothing left to
 * write), so B's first writes may land while A's record is not durable
 * but for that flush. */
static int join(struct run *r)
{
	int ret;

	r->join_from = ch_step(&r->cr, JOIN_STEP);
	ret = handover(r);
	r->join_w = ch_writes(&r->cr) + 1;
	if (ret == 0 && r->m->agree)
		ret = fs_jrec_join(r->jr[1]);
	r->joined = 1;
	if (ret == 0)
		ret = handover(r);
	r->join_to = ch_writes(&r->cr);
	return ret;
}

/* Cache pressure commits of both nodes so far. */
static uint64_t cache_commits(struct run *r)
{
	struct fs_core_stats st;
	uint64_t n = 0;

	for (int i = 0; i < 2; i++) {
		fs_core_stats_get(r->fs[i], &st);
		n += st.commit_reason[FS_CR_CACHE];
	}
	return n;
}

/* The workload, each operation a step of its own (crash_harness.h);
 * with r->ops_cr (the dry run), note the write span of each operation
 * that made a cache pressure commit. */
static int workload(struct run *r)
{
	uint64_t cr = 0, w;
	int ret = 0;

	ch_begin(&r->cr);
	for (unsigned op = 0; op < NOPS && ret == 0; op++) {
		if (r->m->mixed && op == JOIN_OP)
			ret = join(r);
		if (ret < 0)
			break;
		w = ch_step(&r->cr, (int)op);
		if (r->ops_cr != NULL)
			cr = cache_commits(r);
		ret = one_op(r);
		if (r->ops_cr != NULL && r->nops_cr < NOPS &&
		    cache_commits(r) > cr)
			r->ops_cr[r->nops_cr++] =
			    (struct opspan){op, w, ch_writes(&r->cr)};
	}
	return ret;
}

/* --- setup and checks --------------------------------------------------- */

/* The template: 2 slots, SH allocated and home; @jckpt 0 clears the
 * feature (an image made before checkpoint records). */
static struct bd_dev *make_template(int jckpt, uint64_t *sh)
{
	struct bd_dev *bd = cf_ram_fs_slots(IMG_MB, JOURNAL_MB, RGRP_MB, 2);
	struct fs_sb *sb = bd_buf_alloc(FS_BLOCK_SIZE);
	struct shstate empty = {0};
	struct fs_tx *tx;
	struct fs_buf *b;
	struct fs *fs;
	uint32_t len;
	int ret = -ENOMEM;

	for (uint64_t i = 0; bd != NULL && sb != NULL && !jckpt && i < 2; i++) {
		if (bd_read(bd, sb, FS_BLOCK_SIZE, i * FS_BLOCK_SIZE) < 0)
			break;
		sb->feature_incompat &= ~FS_FEATURE_INCOMPAT_JCKPT;
		fs_blk_update_crc(sb);
		bd_write(bd, sb, FS_BLOCK_SIZE, i * FS_BLOCK_SIZE, 0);
	}
	free(sb);
	if (bd == NULL || ch_mount_slot(bd, 0, 0, 0, &fs) < 0)
		goto out_close;
	ret = fs_tx_begin(fs, 4 + 4 * fs_alloc_credits(fs), &tx);
	if (ret == 0) {
		ret = fs_alloc(tx, 0, 1, 1, sh, &len);
		if (ret == 0)
			ret = fs_buf_new(tx, *sh, FS_BT_XATTR, &b);
		if (ret == 0) {
			sh_store(b->data, &empty);
			fs_buf_put(b);
		}
		fs_tx_end(tx);
	}
	if (fs_core_unmount(fs) < 0 || ret < 0)
		goto out_close;
	return bd;
out_close:
	if (bd != NULL)
		bd_close(bd);
	return NULL;
}

/* The shared file is a state at or after the frozen one, its data
 * intact. */
static int check_shared(struct run *r, struct fs *fs, struct bd_dev *bd,
			uint8_t *used, uint64_t nblk)
{
	struct shstate got = {0};
	struct fs_buf *b;
	int ok = 0;

	if (fs_buf_read(fs, r->sh, FS_BT_XATTR, &b) < 0) {
		fprintf(stderr, "  shared block unreadable\n");
		return 0;
	}
	got.n = ((struct fs_xattr_blk *)b->data)->count;
	if (got.n <= SH_MAX)
		memcpy(got.e, ((struct fs_xattr_blk *)b->data)->data,
		       got.n * sizeof(got.e[0]));
	fs_buf_put(b);
	for (unsigned i = r->frozen; i < r->nhist && !ok; i++)
		ok = got.n == r->hist[i].n &&
		     memcmp(got.e, r->hist[i].e, got.n * sizeof(got.e[0])) == 0;
	if (!ok) {
		fprintf(stderr,
			"  shared file: %u entries, no state from "
			"the frozen one (%u of %u)\n",
			got.n, r->frozen, r->nhist);
		return 0;
	}
	for (unsigned i = 0; i < got.n && ok; i++) {
		ok = ch_mark(used, nblk, got.e[i].blk, "shared data") &&
		     cf_data_ok(bd, got.e[i].blk, got.e[i].ver);
		if (!ok)
			fprintf(stderr,
				"  shared entry %u: block %llu lost "
				"version %u\n",
				i, (unsigned long long)got.e[i].blk,
				got.e[i].ver);
	}
	return ok;
}

static int check_private(struct run *r, struct fs *fs, struct bd_dev *bd,
			 uint8_t *used, uint64_t nblk)
{
	for (unsigned i = 0; i < r->npf; i++) {
		struct pfile *p = &r->pf[i];

		if (!p->frozen || !p->live)
			continue;
		if (!ch_file_ok(fs, bd, used, nblk, p->m, p->d, p->ver,
				p->dver)) {
			fprintf(stderr,
				"  frozen file of node %d (blocks "
				"%llu, %llu, version %u) lost\n",
				p->node, (unsigned long long)p->m,
				(unsigned long long)p->d, p->ver);
			return 0;
		}
	}
	return 1;
}

/* Recover @img (the crashed device's content) as the first mount after
 * a whole-cluster crash does (every journal the slot map says is in use,
 * in slot order) and check it. */
static int recover_check(struct run *r, struct bd_dev *img)
{
	uint64_t nblk = bd_size(img) >> FS_BLOCK_SHIFT;
	uint8_t *used = calloc(nblk, 1);
	struct fs *fs = NULL;
	int ok = used != NULL;

	ok = ok && cf_slot_states(img, FS_SLOT_MOUNTED, FS_SLOT_MOUNTED) == 0;
	ok = ok && ch_fsck_ok(img, "before mount", "ERROR: journal");
	ok = ok && ch_mount_slot(img, 0, 0, 0, &fs) == 0;
	if (ok) {
		used[r->sh] = 1;
		ok = check_shared(r, fs, img, used, nblk) &&
		     check_private(r, fs, img, used, nblk);
	}
	if (fs != NULL && fs_core_unmount(fs) < 0)
		ok = 0;
	ok = ok && ch_fsck_ok(img, "after unmount", "ERROR: journal");
	free(used);
	return ok;
}

/* The hand-overs marked their checkpoints with records (JCKPT, where a
 * flush covers every node's writes) or header moves only. */
static int marks_ok(struct run *r, const struct mode *m)
{
	struct fs_core_stats st[2];

	uint64_t cr;

	fs_core_stats_get(r->fs[0], &st[0]);
	fs_core_stats_get(r->fs[1], &st[1]);
	cr =
	    st[0].commit_reason[FS_CR_CACHE] + st[1].commit_reason[FS_CR_CACHE];
	printf("  checkpoint records %llu + %llu, header moves %llu + %llu, "
	       "log blocks %llu + %llu (a log holds %llu), cache pressure "
	       "commits %llu\n",
	       (unsigned long long)st[0].ckpt_records,
	       (unsigned long long)st[1].ckpt_records,
	       (unsigned long long)st[0].ckpt_headers,
	       (unsigned long long)st[1].ckpt_headers,
	       (unsigned long long)(st[0].commit_blocks + st[0].ckpt_records),
	       (unsigned long long)(st[1].commit_blocks + st[1].ckpt_records),
	       (unsigned long long)(r->sb.journal_blocks - 1),
	       (unsigned long long)cr);
	if (m->cache_mb && cr == 0)
		return 0;
	if (m->mixed) {
		printf("  A: records off %llu times, allowed at the end %llu\n",
		       (unsigned long long)st[0].records_off,
		       (unsigned long long)st[0].records_allowed);
		return st[0].ckpt_records > 0 && st[1].ckpt_records == 0 &&
		       st[0].records_off == (uint64_t)m->agree &&
		       st[0].records_allowed == (uint64_t)!m->agree;
	}
	if (m->jckpt && (!m->split || m->lie))
		return st[0].ckpt_records > 0 && st[1].ckpt_records > 0;
	return st[0].ckpt_records + st[1].ckpt_records == 0;
}

/* The split devices' flush modes: the wrappers must not claim that a
 * flush covers all, unless told to lie (m->lie); A's covers all in the
 * mixed cases. 0 or -EINVAL. */
static int split_modes(struct run *r, const struct mode *m)
{
	if (!m->split)
		return 0;
	if (bd_flush_covers_all(r->cr.bd[0]) ||
	    bd_flush_covers_all(r->cr.bd[1])) {
		fprintf(stderr, "  split wrappers say a flush covers all\n");
		return -EINVAL;
	}
	if (m->lie) {
		bd_fault_set_flush_local(r->cr.f, 0);
		bd_fault_set_flush_local(r->cr.f1, 0);
	}
	if (m->mixed)
		bd_fault_set_flush_all(r->cr.f);
	return 0;
}

/* --- the records agreement (mixed) -------------------------------------- */

static unsigned jrec_failures; /* flushes before a drop that failed */

static int jrec_set(void *arg, int on)
{
	return fs_journal_set_records(arg, on);
}

static void jrec_fail(void *arg, const char *why)
{
	(void)arg;
	(void)why;
	__atomic_fetch_add(&jrec_failures, 1, __ATOMIC_RELAXED);
}

/* An fs_jrec per node over lockspaces 1 (A) and 2 (B); A
 * (its flush covers all) asks PR and writes records once granted (a
 * grant may wait for the previous run's unlocks). 0 or -errno. */
static int agree_start(struct run *r, struct bd_dev **bd)
{
	struct fs_jrec_stats js = {0};
	int ret = 0;

	for (int i = 0; i < 2 && ret == 0; i++) {
		struct fs_jrec_conf c = {
		    .ls = lkl_ls[i + 1],
		    .covers = bd_flush_covers_all(bd[i]),
		    .retry_ms = JREC_RETRY_MS,
		    .set = jrec_set,
		    .fail = jrec_fail,
		    .arg = r->fs[i],
		};

		ret = fs_jrec_new(&c, &r->jr[i]);
	}
	if (ret == 0)
		ret = fs_jrec_start(r->jr[0]);
	for (int w = 0; ret == 0 && w < 2000; w++) {
		fs_jrec_stats(r->jr[0], &js);
		if (strcmp(js.mode, "on") == 0)
			return 0;
		usleep(10000);
	}
	fprintf(stderr, "  A never got the records: %d %s\n", ret,
		js.mode ? js.mode : "");
	return ret < 0 ? ret : -ETIMEDOUT;
}

/* Give the locks back (the next run starts afresh): before the mounts
 * go, since a give-up writes through them. */
static void agree_stop(struct run *r)
{
	for (int i = 0; i < 2; i++) {
		fs_jrec_stop(r->jr[i], 1);
		fs_jrec_free(r->jr[i]);
		r->jr[i] = NULL;
	}
}

/* --- the harness's hooks (crash_harness.h) ------------------------------ */

struct hand_test {
	struct ch_test ch;
	struct mode m;
	uint64_t sh; /* the shared file's block in the template */
};

/* The token starts on slot 0 in the dry run, on slot 1 at odd crash
 * points (the file's comment). */
static int hand_start(struct ch_run *cr)
{
	const struct hand_test *t = (const struct hand_test *)cr->test;
	struct run *r = (struct run *)cr;
	int ret;

	r->m = &t->m;
	r->sh = t->sh;
	r->rng = cr->seed;
	r->holder = r->m->mixed ? 0 : (int)(cr->t.point & 1);
	r->nhist = 1;
	r->hist = calloc(NOPS + 1, sizeof(*r->hist));
	if (cr->dry != NULL)
		r->ops_cr = calloc(NOPS, sizeof(*r->ops_cr));
	if (r->hist == NULL || (cr->dry != NULL && r->ops_cr == NULL))
		return -ENOMEM;
	ret = split_modes(r, r->m);
	if (ret == 0)
		ret = ch_read_sb(cr->bd[0], &r->sb);
	if (ret == 0)
		ret = ch_mount_pair(cr, r->m->cache_mb, 0, r->fs);
	if (ret == 0 && r->m->agree && (ret = agree_start(r, cr->bd)) < 0) {
		agree_stop(r);
		fs_core_abandon(r->fs[1]);
		fs_core_abandon(r->fs[0]);
	}
	return ret;
}

static int hand_work(struct ch_run *cr)
{
	return workload((struct run *)cr);
}

/* The dry run's checks; crash points at every write of its first
 * m->nspans operations that made a cache pressure commit and the
 * 2 * SPAN_PAD after each, and (mixed) from join()'s start to JOIN_SPAN
 * + SPAN_PAD past B's join (with the agreement), or to the end (without:
 * nothing can go wrong before B). */
#define SPAN_PAD 4
static int hand_dry(struct ch_run *cr)
{
	struct run *r = (struct run *)cr;
	const struct mode *m = r->m;
	int ok = marks_ok(r, m);
	char name[64];

	printf("  dry run: %llu writes, %u hand-overs, %u fsyncs\n",
	       (unsigned long long)cr->dry->writes, r->handovers, r->fsyncs);
	for (unsigned k = 0; k < r->nops_cr && k < m->nspans; k++) {
		const struct opspan *o = &r->ops_cr[k];

		snprintf(name, sizeof(name),
			 "cache pressure commit (operation %u)", o->op);
		ch_dry_step(cr, (int)o->op, name, o->from, o->to,
			    o->to + 1 - o->from + 2 * SPAN_PAD);
	}
	if (!m->mixed)
		return ok;
	printf("  B joins at write %llu\n", (unsigned long long)r->join_w);
	ch_dry_step(cr, JOIN_STEP, "B's join", r->join_from, r->join_to,
		    m->agree
			? r->join_w - r->join_from + JOIN_SPAN + SPAN_PAD + 1
			: cr->dry->writes + 2 - r->join_from);
	return ok;
}

static void hand_stop(struct ch_run *cr)
{
	struct run *r = (struct run *)cr;

	if (r->m->agree)
		agree_stop(r);
	fs_core_abandon(r->fs[1]);
	fs_core_abandon(r->fs[0]);
}

static int hand_check(struct ch_run *cr, struct bd_dev *img)
{
	return recover_check((struct run *)cr, img);
}

static void hand_fini(struct ch_run *cr)
{
	struct run *r = (struct run *)cr;

	free(r->hist);
	free(r->ops_cr);
}

/* Crash points (crash_harness.h): the dry run's steps (hand_dry), then
 * @spread spread over the W + 1 write indices (CH_ALL: every one;
 * UCFS_CRASH_POINTS=N overrides, not for a lying device or without the
 * agreement). Stops after @maxbad failed points. Returns the failed
 * points, ~0u if the dry run failed. */
static unsigned crash_points(const struct mode *m, uint64_t spread,
			     unsigned maxbad)
{
	struct hand_test t = {
	    .ch = {.split = m->split,
		   .run_size = sizeof(struct run),
		   .start = hand_start,
		   .work = hand_work,
		   .dry = hand_dry,
		   .stop = hand_stop,
		   .check = hand_check,
		   .fini = hand_fini,
		   .note = m->lie ? " (expected: the device lied)"
			   : m->mixed && !m->agree
			       ? " (expected: no records agreement)"
			       : NULL},
	    .m = *m,
	};
	struct ch_opts o = {.spread = spread,
			    .maxbad = maxbad,
			    .fixed = m->lie || (m->mixed && !m->agree)};
	unsigned bad;

	t.ch.tmpl = make_template(m->jckpt, &t.sh);
	if (t.ch.tmpl == NULL)
		return ~0u;
	bad = ch_points(&t.ch, &o);
	bd_close(t.ch.tmpl);
	return bad;
}

static void test_crash_handover_jckpt(void)
{
	struct mode m = {.jckpt = 1};

	CHECK_EQ(crash_points(&m, 150, 3), 0);
}

static void test_crash_handover_no_jckpt(void)
{
	struct mode m = {0};

	CHECK_EQ(crash_points(&m, 60, 3), 0);
}

/* A small cache (1 MiB of metadata, 256 blocks) and fewer hand-overs
 * (1 in 4 drawn), create ops of 4 files and no unlinks: handles find
 * more than half of the cache pinned and commit and checkpoint at once
 * (FS_CR_CACHE: a checkpoint record, since the node keeps its locks)
 * between the hand-overs, 3-6 times per run; both logs wrap. 30 points
 * spread, then every write of the first such operation
 * (UCFS_CRASH_SPANS=N: of the first N, 0 all). */
static void test_crash_handover_cache(void)
{
	struct mode m = {
	    .jckpt = 1, .cache_mb = 1, .ho_skip = 4, .keep = 1, .burst = 4};
	const char *env = getenv("UCFS_CRASH_SPANS");

	m.nspans = env ? (unsigned)strtoul(env, NULL, 0) : 1;
	if (m.nspans == 0)
		m.nspans = ~0u;
	CHECK_EQ(crash_points(&m, 30, 3), 0);
}

/* A volatile cache per node (an NBD export without multi-conn): the
 * journal sees bd_flush_covers_all() == 0, moves the header instead of
 * writing records, and loses nothing. */
static void test_crash_handover_split(void)
{
	struct mode m = {.jckpt = 1, .split = 1};

	CHECK_EQ(crash_points(&m, 60, 3), 0);
}

/* The same devices claiming that a flush covers all: the journal writes
 * records whose durability no other node's flush gives, and the checks
 * above must catch a lost frozen state (this proves the split model
 * differs from one cache, and that the checks see the difference). */
static void test_crash_handover_split_lie_caught(void)
{
	struct mode m = {.jckpt = 1, .split = 1, .lie = 1};
	unsigned bad = crash_points(&m, CH_ALL, 1);

	CHECK(bad != ~0u && bad > 0);
}

/* Nodes reach the storage by different paths: A's flush covers every
 * node's writes (bd_fault_set_flush_all), B's only its own. A works
 * alone first with checkpoint records (its own device says a flush
 * covers all), then B joins and the ping-pong begins. With the records
 * agreement B's join turns A's records off (A's glock drop: records off,
 * flush) before B writes anything: nothing is lost at any crash point
 * (every write index from join()'s start, A's hand-over among them, to
 * JOIN_SPAN + SPAN_PAD past B's join, counted from join()'s start, then
 * 30 spread; UCFS_CRASH_POINTS=0: every write index). */
static void test_crash_handover_mixed(void)
{
	struct mode m = {.jckpt = 1, .split = 1, .mixed = 1, .agree = 1};

	REQUIRE(lkl_start(2, "", 5000) == 0);
	jrec_failures = 0;
	CHECK_EQ(crash_points(&m, 30, 3), 0);
	printf("  flushes before a drop that failed (after the crash): %u\n",
	       jrec_failures);
	lkl_close();
}

/* The same without the agreement (each node asks only its own device,
 * as before it): A keeps writing records that B's flushes do not make
 * durable, and the checks must catch a lost frozen state at some write
 * index (every one from the join on is tried until the first failure). */
static void test_crash_handover_mixed_unagreed_caught(void)
{
	struct mode m = {.jckpt = 1, .split = 1, .mixed = 1};
	unsigned bad = crash_points(&m, 0, 1);

	CHECK(bad != ~0u && bad > 0);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_crash_handover_jckpt);
	T_RUN(test_crash_handover_no_jckpt);
	T_RUN(test_crash_handover_cache);
	T_RUN(test_crash_handover_split);
	T_RUN(test_crash_handover_split_lie_caught);
	T_RUN(test_crash_handover_mixed);
	T_RUN(test_crash_handover_mixed_unagreed_caught);
	return t_done();
}
