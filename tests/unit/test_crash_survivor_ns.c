/*
 * test_crash_survivor_ns.c — power loss at every write of a live
 * survivor's adoption of a dead node's orphans, with namespace mounts
 * (fs.h; fs_opts.nolock_slot picks the slot), for what the core cases
 * of test_crash_survivor.c cannot have: orphans (FORMAT.md "Orphans").
 *
 * B (slot 1) creates, writes, unlinks and syncs files in /b and unlinks
 * NS_ORPHANS files it keeps open (its orphan list), syncs and dies
 * after a few more changes (fs_abandon). A (slot 0) mounts with slot 1
 * shown free, replays B's journal (as the node-down callback does),
 * drops what it read before (its locks would have waited), then adopts
 * B's orphans one at a time (fs_ino_orphan_adopt, as fs_iopen.c adopt
 * does: each freed as its record goes, nobody uses it), folds B's
 * statfs change and writes back, with its own work in /a (a create,
 * write, unlink or sync) between every two steps. Power fails at points
 * spread over that stretch (60, all of them if fewer;
 * UCFS_CRASH_POINTS=N, 0 = every write; UCFS_CRASH_AT=P: only write P),
 * a clean cut, a seeded keep/drop/garble of every unflushed write, or a
 * torn write (the runs and points are crash_harness.h's).
 *
 * After it: fsck -n finds nothing at all; the first mount (both slots
 * replayed, A's own orphans reclaimed) adopts what B's list still holds
 * and folds B's change, as the dlm recovery worker does for leftovers;
 * every file synced by A or B reads back whole; after the unmount fsck
 * finds nothing and no orphan. UCFS_SEED / --seed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_fixture.h"
#include "crash_harness.h"
#include "fusefs/core/fs_core_priv.h"
#include "fusefs/core/fs_internal.h"
#include "fusefs/fs.h"
#include "fusefs/fsck/fs_fsck.h"
#include "fusefs/namespace/fs_ns.h"
#include "harness.h"

#define IMG_MB 12
#define JOURNAL_MB 2
#define RGRP_MB 2
#define NSEG 25 /* A's operations after the orphans */
#define NSF 96
#define NS_ORPHANS 5

enum { A = 0, B = 1 };

struct nsfile {
	int node, live, frozen;
	char name[16];
	uint64_t ino;
	uint64_t seed; /* of its content */
	size_t len;
};

struct nsrun {
	struct ch_run cr; /* the harness's: device, target, phase 2's start */
	uint64_t rng;
	struct fs *fs[2];
	struct fs_cred cred;
	uint64_t dir[2]; /* /a, /b */
	struct nsfile nf[NSF];
	unsigned nnf, nadopted, nsync[2];
	unsigned replayed; /* B's transactions A replayed */
};

static void ns_fill(uint8_t *buf, uint64_t seed, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(t_splitmix(&seed) >> 17);
}

/* A file of node @n written (@open: kept open and unlinked, an orphan
 * that node holds). */
static int ns_create(struct nsrun *r, int n, int orphan)
{
	struct nsfile *f = &r->nf[r->nnf];
	struct fs *fs = r->fs[n];
	uint8_t buf[3 * FS_BLOCK_SIZE + 100];
	struct fs_attr a;
	int ret;

	if (r->nnf == NSF)
		return 0;
	*f = (struct nsfile){
	    .node = n, .live = !orphan, .seed = t_splitmix(&r->rng)};
	f->len = (size_t)(f->seed % sizeof(buf));
	snprintf(f->name, sizeof(f->name), "f%u", r->nnf);
	ret = fs_create(fs, &r->cred, r->dir[n], f->name, 0644, O_RDWR, &a);
	if (ret < 0)
		return ret;
	f->ino = a.ino;
	ns_fill(buf, f->seed, f->len);
	if (fs_write(fs, &r->cred, a.ino, buf, f->len, 0) != (ssize_t)f->len)
		ret = -EIO;
	if (ret == 0 && orphan)
		ret = fs_unlink(fs, &r->cred, r->dir[n], f->name);
	if (!orphan)
		fs_release(fs, a.ino);
	r->nnf++;
	return ret;
}

/* Unlink a live file of node @n (its lookup reference dropped too: it
 * is freed at once). */
static int ns_unlink(struct nsrun *r, int n)
{
	unsigned start = r->nnf ? (unsigned)(t_splitmix(&r->rng) % r->nnf) : 0;

	for (unsigned i = 0; i < r->nnf; i++) {
		struct nsfile *f = &r->nf[(start + i) % r->nnf];
		int ret;

		if (!f->live || f->node != n)
			continue;
		ret = fs_unlink(r->fs[n], &r->cred, r->dir[n], f->name);
		if (ret == 0) {
			fs_forget(r->fs[n], f->ino, 1);
			f->live = 0;
		}
		return ret;
	}
	return ns_create(r, n, 0);
}

/* syncfs: every live file of node @n is frozen. */
static int ns_sync(struct nsrun *r, int n)
{
	int ret = fs_fsync(r->fs[n], 0, 0);

	for (unsigned i = 0; i < r->nnf && ret == 0; i++)
		if (r->nf[i].live && r->nf[i].node == n)
			r->nf[i].frozen = 1;
	r->nsync[n] += ret == 0;
	return ret;
}

static int ns_op(struct nsrun *r, int n)
{
	unsigned c = (unsigned)(t_splitmix(&r->rng) % 100);

	if (c < 55)
		return ns_create(r, n, 0);
	if (c < 80)
		return ns_unlink(r, n);
	return ns_sync(r, n);
}

/* B's life: files, orphans, a sync, a few more changes. */
static int ns_phase1(struct nsrun *r)
{
	int ret = 0;

	for (unsigned i = 0; i < 30 && ret == 0; i++)
		ret = i % 6 == 5 && i / 6 < NS_ORPHANS ? ns_create(r, B, 1)
						       : ns_op(r, B);
	if (ret == 0)
		ret = ns_sync(r, B);
	for (unsigned i = 0; i < 4 && ret == 0; i++)
		ret = ns_op(r, B);
	return ret;
}

/* Adopt one orphan of B's list (*@left 0: the list is empty). */
static int ns_adopt(struct nsrun *r, struct fs *fs, int *left)
{
	uint64_t ino = 0;
	int ret = fs_ino_orphan_adopt(fs, B, &ino);

	*left = ret == 0 && ino != 0;
	r->nadopted += *left;
	return ret;
}

/* B's statfs change folded, everything written back, as adopt ends. */
static int ns_fold(struct fs *fs)
{
	int ret = fs_statfs_fold_slot(fs, B);

	if (ret == 0)
		ret = fs_journal_writeback(fs);
	fs_core_slotinfo_forget(fs, B);
	return ret;
}

/* Phase 2: A recovers B's slot, working in /a between the steps. */
static int ns_phase2(struct nsrun *r)
{
	char why[160];
	int ret =
	    fs_journal_replay(r->fs[A], B, 0, &r->replayed, why, sizeof(why));
	int left = 1;

	if (ret == 0) { /* what A read before the replay */
		fs_cache_drop_all(r->fs[A], NULL);
		ret = fs_alloc_reload(r->fs[A]);
	}
	fs_core_slotinfo_forget(r->fs[A], B);
	while (ret == 0 && left) {
		ret = ns_op(r, A);
		if (ret == 0)
			ret = ns_adopt(r, r->fs[A], &left);
	}
	for (unsigned i = 0; i < NSEG && ret == 0; i++) {
		ret = ns_op(r, A);
		if (ret == 0 && i == NSEG / 2)
			ret = ns_fold(r->fs[A]);
	}
	return ret;
}

/* fsck -n on @bd finds nothing (@orphans: nor any orphan). */
static int ns_fsck_ok(struct bd_dev *bd, const char *when, int orphans)
{
	struct fs_fsck_opts o = {.out = NULL};
	struct fs_fsck_result res;

	if (fs_fsck_run(bd, &o, &res) < 0)
		return 0;
	if (res.errors == 0 && (!orphans || res.orphans == 0))
		return 1;
	fprintf(stderr, "  fsck %s: %llu errors, %llu orphans\n", when,
		(unsigned long long)res.errors,
		(unsigned long long)res.orphans);
	o.out = stderr;
	o.max_report = 8;
	fs_fsck_run(bd, &o, &res);
	return 0;
}

static int ns_file_ok(struct nsrun *r, struct fs *fs, const struct nsfile *f)
{
	uint8_t got[3 * FS_BLOCK_SIZE + 200], want[3 * FS_BLOCK_SIZE + 100];
	struct fs_attr a;
	ssize_t n = -1;

	if (fs_lookup(fs, r->dir[f->node], f->name, &a) == 0) {
		n = fs_read(fs, a.ino, got, sizeof(got), 0);
		fs_forget(fs, a.ino, 1);
	}
	ns_fill(want, f->seed, f->len);
	if (n == (ssize_t)f->len && memcmp(got, want, f->len) == 0)
		return 1;
	fprintf(stderr, "  synced file %c/%s lost or damaged (%zd of %zu)\n",
		"ab"[f->node], f -> name, n, f -> len);
	return 0;
}

/* The first mount after the crash, B's leftovers, the checks. */
static int ns_check(struct nsrun *r, struct bd_dev *img)
{
	struct fs *fs = NULL;
	int ok = cf_slot_states(img, FS_SLOT_MOUNTED, FS_SLOT_MOUNTED) == 0;
	int left = 1;

	ok = ok && ns_fsck_ok(img, "before mount", 0);
	ok = ok && (fs = cf_ns_mount(img, A)) != NULL;
	if (ok)
		fs_core_slotinfo_forget(fs, B);
	while (ok && left)
		ok = ns_adopt(r, fs, &left) == 0;
	ok = ok && ns_fold(fs) == 0;
	for (unsigned i = 0; i < r->nnf && ok; i++)
		if (r->nf[i].frozen && r->nf[i].live)
			ok = ns_file_ok(r, fs, &r->nf[i]);
	if (fs != NULL && fs_unmount(fs) < 0)
		ok = 0;
	return ok && ns_fsck_ok(img, "after unmount", 1);
}

/* The template: /a and /b (their inode numbers into @dir). */
static struct bd_dev *ns_template(uint64_t *dir)
{
	struct bd_dev *bd = cf_ram_fs_slots(IMG_MB, JOURNAL_MB, RGRP_MB, 2);
	struct fs_cred cred = {.flags = FS_CRED_FSETID};
	struct fs *fs = bd ? cf_ns_mount(bd, A) : NULL;
	struct fs_attr a;
	int ret = fs ? 0 : -EIO;

	for (int n = 0; n < 2 && ret == 0; n++) {
		ret = fs_mkdir(fs, &cred, fs->sb.root_ino, n ? "b" : "a", 0755,
			       &a);
		dir[n] = a.ino;
	}
	if (fs != NULL && fs_unmount(fs) < 0)
		ret = -EIO;
	if (ret < 0 && bd != NULL) {
		bd_close(bd);
		bd = NULL;
	}
	return bd;
}

/* --- the harness's hooks (crash_harness.h) ------------------------------ */

struct ns_test {
	struct ch_test ch;
	uint64_t dir[2]; /* the template's /a and /b */
};

static int ns_start(struct ch_run *cr)
{
	struct nsrun *r = (struct nsrun *)cr;

	r->rng = cr->seed;
	r->cred.flags = FS_CRED_FSETID;
	memcpy(r->dir, ((const struct ns_test *)cr->test)->dir, sizeof(r->dir));
	r->fs[B] = cf_ns_mount(cr->bd[0], B);
	return r->fs[B] != NULL ? 0 : -EIO;
}

/* B works and dies, A mounts, then phase 2 (crash points count from its
 * start). */
static int ns_work(struct ch_run *cr)
{
	struct nsrun *r = (struct nsrun *)cr;
	int ret = ns_phase1(r);

	if (ret < 0) {
		fprintf(stderr, "  phase 1 failed\n");
		return ret;
	}
	fs_abandon(r->fs[B]); /* B dies */
	r->fs[B] = NULL;
	if (cf_slot_states(cr->bd[0], FS_SLOT_FREE, FS_SLOT_FREE) < 0 ||
	    (r->fs[A] = cf_ns_mount(cr->bd[0], A)) == NULL)
		return -EIO;
	ch_begin(cr);
	return ns_phase2(r);
}

static int ns_dry(struct ch_run *cr)
{
	struct nsrun *r = (struct nsrun *)cr;

	printf("  dry run: %u files, synced A %u B %u times, B's "
	       "transactions replayed %u, %u of B's orphans adopted\n",
	       r->nnf, r->nsync[A], r->nsync[B], r->replayed, r->nadopted);
	return r->nadopted == NS_ORPHANS && r->replayed > 0;
}

static void ns_stop(struct ch_run *cr)
{
	struct nsrun *r = (struct nsrun *)cr;

	for (int n = 0; n < 2; n++)
		if (r->fs[n] != NULL)
			fs_abandon(r->fs[n]);
}

static int ns_check_hook(struct ch_run *cr, struct bd_dev *img)
{
	return ns_check((struct nsrun *)cr, img);
}

static void test_crash_survivor_orphans(void)
{
	struct ns_test t = {
	    .ch = {.run_size = sizeof(struct nsrun),
		   .start = ns_start,
		   .work = ns_work,
		   .dry = ns_dry,
		   .stop = ns_stop,
		   .check = ns_check_hook},
	};
	struct ch_opts o = {.spread = 60, .maxbad = 3};

	t.ch.tmpl = ns_template(t.dir);
	REQUIRE(t.ch.tmpl != NULL);
	CHECK_EQ(ch_points(&t.ch, &o), 0);
	bd_close(t.ch.tmpl);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_crash_survivor_orphans);
	return t_done();
}
