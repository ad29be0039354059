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
 * A dry run counts the device writes W (about 700). Then at 150 crash
 * points (60 without JCKPT; UCFS_CRASH_POINTS=N, 0 = all) spread over
 * 1..W+1 the workload runs on a fresh copy and the device
 * dies at that write: unflushed writes dropped, or each kept / dropped /
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
 * of the first). UCFS_SEED / --seed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_fixture.h"
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
};

/* Write indices from..to (1 = the workload's first write). */
struct span {
	uint64_t from, to;
};

struct run {
	uint64_t rng;
	struct bd_fault *f;
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
	struct span *ops_cr; /* NOPS, the dry run only: the operations that
				made a cache pressure commit */
	unsigned nops_cr;
	/* mixed: the agreement of nodes A, B (lockspaces 1, 2) */
	struct fs_jrec *jr[2];
	int joined;	 /* B joined: hand-overs go to it */
	uint64_t join_w; /* write index (from 1) of the join */
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
	struct fs_xattr_blk *x;
	struct fs_tx *tx;
	struct fs_buf *b;
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
		ret = cf_data_write(r->fs[r->holder]->bd, p.d, p.dver);
	if (ret == 0)
		ret = fs_buf_new(tx, p.m, FS_BT_XATTR, &b);
	if (ret == 0) {
		x = b->data;
		x->owner = p.m;
		x->count = p.ver;
		memcpy(x->data, &p.d, sizeof(p.d));
		fs_buf_put(b);
	}
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
static int join(struct run *r, uint64_t w0)
{
	int ret = handover(r);

	r->join_w = bd_fault_writes(r->f) - w0 + 1;
	if (ret == 0 && r->m->agree)
		ret = fs_jrec_join(r->jr[1]);
	r->joined = 1;
	return ret < 0 ? ret : handover(r);
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

/* The workload; with r->ops_cr (the dry run), note the write span of
 * each operation that made a cache pressure commit. */
static int workload(struct run *r)
{
	uint64_t w0 = bd_fault_writes(r->f), cr = 0, w;
	int ret = 0;

	for (unsigned op = 0; op < NOPS && ret == 0; op++) {
		if (r->m->mixed && op == JOIN_OP)
			ret = join(r, w0);
		if (ret < 0)
			break;
		w = bd_fault_writes(r->f);
		if (r->ops_cr != NULL)
			cr = cache_commits(r);
		ret = one_op(r);
		if (r->ops_cr != NULL && r->nops_cr < NOPS &&
		    cache_commits(r) > cr)
			r->ops_cr[r->nops_cr++] = (struct span){
			    w - w0 + 1, bd_fault_writes(r->f) - w0};
	}
	return ret;
}

/* --- setup and checks --------------------------------------------------- */

/* Mount @slot with a metadata cache of @cache_mb (0: 8). */
static int mount_slot(struct bd_dev *bd, int slot, unsigned cache_mb,
		      struct fs **out)
{
	struct fs_core_opts o;
	char why[200] = "";
	int ret;

	fs_core_opts_init(&o);
	o.slot = slot;
	o.commit_s = 3600;
	o.cache_mb = cache_mb ? cache_mb : 8;
	ret = fs_core_mount(bd, &o, out, why, sizeof(why));
	if (ret < 0)
		fprintf(stderr, "  mount: %d %s\n", ret, why);
	return ret;
}

static struct bd_dev *dev_copy(struct bd_dev *src)
{
	uint8_t *buf = bd_buf_alloc(1 << 20);
	struct bd_dev *d = NULL;

	if (buf != NULL && bd_ram_open(bd_size(src), &d) == 0)
		for (uint64_t off = 0; off < bd_size(src); off += 1 << 20)
			if (bd_read(src, buf, 1 << 20, off) < 0 ||
			    bd_write(d, buf, 1 << 20, off, 0) < 0) {
				bd_close(d);
				d = NULL;
				break;
			}
	free(buf);
	return d;
}

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
	if (bd == NULL || mount_slot(bd, 0, 0, &fs) < 0)
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

static int read_sb(struct bd_dev *bd, struct fs_sb *out)
{
	struct fs_sb *sb = bd_buf_alloc(FS_BLOCK_SIZE);
	int ret = sb ? bd_read(bd, sb, FS_BLOCK_SIZE, 0) : -ENOMEM;

	if (ret == 0)
		*out = *sb;
	free(sb);
	return ret;
}

/* Mount B (slot 1) on @bd1, then A (slot 0) on @bd0, slot 1 shown free
 * to A: a nolock mount replays every other slot in use, and a replay of
 * B's live journal would move its header under B's feet. B's mount is
 * flushed first (split caches: else its slot map write could land after
 * A's). 0 or -errno. */
static int mount_pair(struct run *r, struct bd_dev *bd0, struct bd_dev *bd1)
{
	if (mount_slot(bd1, 1, r->m->cache_mb, &r->fs[1]) < 0)
		return -EIO;
	if (bd_flush(bd1) < 0 ||
	    cf_slot_states(bd0, FS_SLOT_FREE, FS_SLOT_FREE) < 0 ||
	    bd_flush(bd0) < 0 ||
	    mount_slot(bd0, 0, r->m->cache_mb, &r->fs[0]) < 0) {
		fs_core_unmount(r->fs[1]);
		return -EIO;
	}
	return 0;
}

/* fsck -n finds no journal error on @bd. */
static int fsck_journal_ok(struct bd_dev *bd, const char *when)
{
	struct fs_fsck_opts o = {.max_report = 1000};
	struct fs_fsck_result res;
	char *out = NULL;
	size_t len;
	int ok;

	o.out = open_memstream(&out, &len);
	if (o.out == NULL)
		return 0;
	ok = fs_fsck_run(bd, &o, &res) >= 0;
	fclose(o.out);
	ok = ok && out != NULL && strstr(out, "ERROR: journal") == NULL;
	if (!ok)
		fprintf(stderr, "  fsck %s:\n%s", when, out ? out : "(none)\n");
	free(out);
	return ok;
}

static int mark(uint8_t *used, uint64_t nblk, uint64_t b, const char *what)
{
	if (b >= nblk || used[b]) {
		fprintf(stderr,
			"  block %llu (%s) used twice or out of range\n",
			(unsigned long long)b, what);
		return 0;
	}
	used[b] = 1;
	return 1;
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
		ok = mark(used, nblk, got.e[i].blk, "shared data") &&
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
		struct fs_xattr_blk *x;
		struct fs_buf *b;
		uint64_t d = 0;
		int ok;

		if (!p->frozen || !p->live)
			continue;
		ok = fs_buf_read(fs, p->m, FS_BT_XATTR, &b) == 0;
		if (ok) {
			x = b->data;
			memcpy(&d, x->data, sizeof(d));
			ok =
			    x->owner == p->m && x->count == p->ver && d == p->d;
			fs_buf_put(b);
		}
		ok = ok && mark(used, nblk, p->m, "file") &&
		     mark(used, nblk, p->d, "file data") &&
		     cf_data_ok(bd, p->d, p->dver);
		if (!ok) {
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
	ok = ok && fsck_journal_ok(img, "before mount");
	ok = ok && mount_slot(img, 0, 0, &fs) == 0;
	if (ok) {
		used[r->sh] = 1;
		ok = check_shared(r, fs, img, used, nblk) &&
		     check_private(r, fs, img, used, nblk);
	}
	if (fs != NULL && fs_core_unmount(fs) < 0)
		ok = 0;
	ok = ok && fsck_journal_ok(img, "after unmount");
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

/* The devices of a run over @lower (owned from now on): one fault
 * wrapper for both nodes, or (m->split) one per node in one power group.
 * 0, or -errno with everything closed. */
static int open_devs(struct run *r, struct bd_dev *lower, const struct mode *m,
		     struct bd_dev **bd)
{
	struct bd_fault *f1;
	int ret = bd_fault_open(lower, &bd[0], &r->f);

	if (ret < 0) {
		bd_close(lower);
		return ret;
	}
	bd[1] = bd[0];
	if (!m->split)
		return 0;
	ret = bd_fault_open_peer(r->f, &bd[1], &f1);
	if (ret == 0 &&
	    (bd_flush_covers_all(bd[0]) || bd_flush_covers_all(bd[1]))) {
		fprintf(stderr, "  split wrappers say a flush covers all\n");
		bd_close(bd[1]);
		ret = -EINVAL;
	}
	if (ret < 0) {
		bd_close(bd[0]);
		return ret;
	}
	if (m->lie) {
		bd_fault_set_flush_local(r->f, 0);
		bd_fault_set_flush_local(f1, 0);
	}
	if (m->mixed)
		bd_fault_set_flush_all(r->f);
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

static void close_devs(struct bd_dev **bd)
{
	if (bd[1] != bd[0])
		bd_close(bd[1]);
	bd_close(bd[0]);
}

/* What the dry run found. */
struct dry {
	uint64_t writes;      /* W */
	uint64_t join_w;      /* mixed: write index of B's join */
	struct span cr[NOPS]; /* operations with a cache pressure commit */
	unsigned ncr;
};

/* The dry run: the workload without a crash. */
static int dry_run(struct run *r, const struct mode *m, struct dry *d)
{
	uint64_t w0 = bd_fault_writes(r->f);
	int ok;

	r->ops_cr = d->cr;
	ok = workload(r) == 0;
	d->writes = bd_fault_writes(r->f) - w0;
	d->ncr = r->nops_cr;
	d->join_w = r->join_w;
	ok = ok && marks_ok(r, m);
	printf("  dry run: %llu writes, %u hand-overs, %u fsyncs\n",
	       (unsigned long long)d->writes, r->handovers, r->fsyncs);
	return ok;
}

/* Power fails at write @point (@how: 0 cut, 1 garbled, 2 torn). */
static void crash_run(struct run *r, uint64_t seed, uint64_t point, int how)
{
	if (how == 0)
		bd_fault_crash_nth(r->f, point);
	else if (how == 1)
		bd_fault_crash_nth_garble(r->f, point, seed ^ point);
	else
		bd_fault_tear_nth(r->f, point,
				  (size_t)((seed ^ point) % 8) * 512);
	workload(r);
	bd_fault_crash(r->f, how == 1 ? seed ^ point : 0);
}

/* One run from the template; @point 0: the dry run (fills @d). */
static int one_run(struct bd_dev *tmpl, uint64_t seed, uint64_t sh,
		   const struct mode *m, uint64_t point, int how, struct dry *d)
{
	struct bd_dev *lower = dev_copy(tmpl), *bd[2], *after;
	struct run *r = calloc(1, sizeof(*r));
	int ok = 0;

	if (r == NULL || lower == NULL) {
		bd_close(lower);
		free(r);
		return 0;
	}
	if (open_devs(r, lower, m, bd) < 0) {
		free(r);
		return 0;
	}
	r->hist = calloc(NOPS + 1, sizeof(*r->hist));
	r->rng = seed;
	r->sh = sh;
	r->holder = m->mixed ? 0 : (int)(point & 1); /* the file's comment */
	r->nhist = 1;
	r->m = m;
	if (r->hist == NULL || read_sb(bd[0], &r->sb) < 0 ||
	    mount_pair(r, bd[0], bd[1]) < 0)
		goto out_free;
	if (m->agree && agree_start(r, bd) < 0) {
		agree_stop(r);
		fs_core_abandon(r->fs[1]);
		fs_core_abandon(r->fs[0]);
		goto out_free;
	}
	if (point == 0)
		ok = dry_run(r, m, d);
	else
		crash_run(r, seed, point, how);
	if (m->agree)
		agree_stop(r);
	fs_core_abandon(r->fs[1]);
	fs_core_abandon(r->fs[0]);
	after = point ? dev_copy(lower) : NULL;
	if (after != NULL) {
		ok = recover_check(r, after);
		if (!ok)
			fprintf(stderr,
				"  FAILED at crash point %llu (%s) of "
				"seed %llu%s\n",
				(unsigned long long)point,
				how == 0   ? "cut"
				: how == 1 ? "garbled"
					   : "torn",
				(unsigned long long)seed,
				m->lie ? " (expected: the device lied)"
				: m->mixed && !m->agree
				    ? " (expected: no records agreement)"
				    : "");
		bd_close(after);
	}
out_free:
	close_devs(bd);
	free(r->hist);
	free(r);
	return ok;
}

/* Crash at @point (@how as crash_run); counts into @n, @bad. */
static void crash_at(struct bd_dev *tmpl, uint64_t seed, uint64_t sh,
		     const struct mode *m, uint64_t point, int how, unsigned *n,
		     unsigned *bad)
{
	*bad += !one_run(tmpl, seed, sh, m, point, how, NULL);
	(*n)++;
}

/* Every write index from..to (within 1..@w + 1): counts into @n, @bad;
 * stops after @maxbad failed points. */
struct points {
	struct bd_dev *tmpl;
	uint64_t seed, sh, w;
	const struct mode *m;
	unsigned n, bad, maxbad;
};

static void every(struct points *pt, uint64_t from, uint64_t to)
{
	for (uint64_t p = from ? from : 1;
	     p <= to && p <= pt->w + 1 && pt->bad < pt->maxbad; p++)
		crash_at(pt->tmpl, pt->seed, pt->sh, pt->m, p, (int)(p % 3),
			 &pt->n, &pt->bad);
}

/* Crash points: @npoints spread over the W + 1 write indices, or every
 * one (UCFS_CRASH_POINTS=N overrides, 0: every write; not for a lying
 * device), then every write index of the dry run's first @nspans
 * operations that made a cache pressure commit, from SPAN_PAD writes
 * before to SPAN_PAD after (the commit thread's early commits may shift
 * a run's writes a little), and (mixed) of B's join, SPAN_PAD before to
 * JOIN_SPAN after; without the agreement, only every index from the
 * join on (nothing can go wrong before B). Stops after @maxbad failed
 * points. Returns the failed points, ~0u if the dry run failed. */
#define SPAN_PAD 4
static unsigned crash_points(const struct mode *m, uint64_t npoints,
			     unsigned nspans, unsigned maxbad)
{
	struct points pt = {.seed = t_seed(), .m = m, .maxbad = maxbad};
	const char *env = getenv("UCFS_CRASH_POINTS");
	struct dry *d = calloc(1, sizeof(*d));
	uint64_t w;

	pt.tmpl = make_template(m->jckpt, &pt.sh);
	if (pt.tmpl == NULL || d == NULL ||
	    !one_run(pt.tmpl, pt.seed, pt.sh, m, 0, 0, d) || d->writes == 0) {
		pt.bad = ~0u;
		goto out;
	}
	w = pt.w = d->writes;
	if (env != NULL && !m->lie && (!m->mixed || m->agree))
		npoints = strtoull(env, NULL, 0);
	if (npoints == 0 || npoints > w + 1)
		npoints = w + 1;
	if (m->mixed)
		printf("  B joins at write %llu\n",
		       (unsigned long long)d->join_w);
	if (m->mixed && !m->agree) {
		every(&pt, d->join_w, w + 1);
		npoints = 0;
	}
	for (uint64_t i = 0; i < npoints && pt.bad < maxbad; i++)
		crash_at(pt.tmpl, pt.seed, pt.sh, m,
			 npoints > 1 ? 1 + i * w / (npoints - 1) : 1,
			 (int)(i % 3), &pt.n, &pt.bad);
	for (unsigned k = 0; k < d->ncr && k < nspans; k++) {
		struct span sp = d->cr[k];

		printf("  cache pressure commit in writes %llu..%llu\n",
		       (unsigned long long)sp.from, (unsigned long long)sp.to);
		every(&pt, sp.from > SPAN_PAD ? sp.from - SPAN_PAD : 1,
		      sp.to + SPAN_PAD);
	}
	if (m->mixed && m->agree)
		every(&pt, d->join_w > SPAN_PAD ? d->join_w - SPAN_PAD : 1,
		      d->join_w + JOIN_SPAN);
	printf("  %u crash points of %llu writes, %u failed\n", pt.n,
	       (unsigned long long)w, pt.bad);
out:
	free(d);
	if (pt.tmpl != NULL)
		bd_close(pt.tmpl);
	return pt.bad;
}

static void test_crash_handover_jckpt(void)
{
	struct mode m = {.jckpt = 1};

	CHECK_EQ(crash_points(&m, 150, 0, 3), 0);
}

static void test_crash_handover_no_jckpt(void)
{
	struct mode m = {0};

	CHECK_EQ(crash_points(&m, 60, 0, 3), 0);
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
	unsigned nspans = env ? (unsigned)strtoul(env, NULL, 0) : 1;

	CHECK_EQ(crash_points(&m, 30, nspans ? nspans : ~0u, 3), 0);
}

/* A volatile cache per node (an NBD export without multi-conn): the
 * journal sees bd_flush_covers_all() == 0, moves the header instead of
 * writing records, and loses nothing. */
static void test_crash_handover_split(void)
{
	struct mode m = {.jckpt = 1, .split = 1};

	CHECK_EQ(crash_points(&m, 60, 0, 3), 0);
}

/* The same devices claiming that a flush covers all: the journal writes
 * records whose durability no other node's flush gives, and the checks
 * above must catch a lost frozen state (this proves the split model
 * differs from one cache, and that the checks see the difference). */
static void test_crash_handover_split_lie_caught(void)
{
	struct mode m = {.jckpt = 1, .split = 1, .lie = 1};
	unsigned bad = crash_points(&m, 0, 0, 1);

	CHECK(bad != ~0u && bad > 0);
}

/* Nodes reach the storage by different paths: A's flush covers every
 * node's writes (bd_fault_set_flush_all), B's only its own. A works
 * alone first with checkpoint records (its own device says a flush
 * covers all), then B joins and the ping-pong begins. With the records
 * agreement B's join turns A's records off (A's glock drop: records off,
 * flush) before B writes anything: nothing is lost at any crash point
 * (30 spread, then every write index from SPAN_PAD before the join to
 * JOIN_SPAN past it; UCFS_CRASH_POINTS=0: every write index). */
static void test_crash_handover_mixed(void)
{
	struct mode m = {.jckpt = 1, .split = 1, .mixed = 1, .agree = 1};

	REQUIRE(lkl_start(2, "", 5000) == 0);
	jrec_failures = 0;
	CHECK_EQ(crash_points(&m, 30, 0, 3), 0);
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
	unsigned bad = crash_points(&m, 0, 0, 1);

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
