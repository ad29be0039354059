/*
 * crash_harness.h — power loss at chosen device writes of a two-node
 * workload: what the crash tests (test_crash_survivor.c,
 * test_crash_handover.c) do the same way. The test gives its workload
 * and its checks (struct ch_test); the harness sets up the devices,
 * runs the dry run, picks the crash points and runs each one.
 *
 * A run: a fresh copy of the test's template image under a fault device
 * (blockdev/bd_fault.c: one volatile write cache, so a flush by either
 * node makes both nodes' completed writes durable; split: a wrapper per
 * node, bd_fault_open_peer, a flush covers only its node's writes, one
 * power supply). Then the test's start (mount the nodes), its workload,
 * the nodes die (the test's stop: nothing more written), power fails if
 * it has not yet (unflushed writes dropped, or garbled for a garbled
 * point), and the test checks a copy of what survived.
 *
 * The dry run (no crash) counts the workload's device writes W and notes
 * the steps that matter (ch_dry_step). A crash point is a write index
 * (1 = the first) counted from the workload's start (ch_begin) or from
 * the start of one of its steps (ch_step). A step's first write moves
 * between runs of one seed (by up to 21 writes in test_crash_survivor:
 * the commit thread's early commits land at varying times), so a point
 * counted from the workload's start may miss the step; one counted from
 * the step's start does not.
 *
 * ch_points: every crash point of each noted step, then N spread over
 * 1..W+1 of the workload; each a clean cut (unflushed writes dropped), a
 * seeded keep/drop/garble of every unflushed write, or a torn write, by
 * the point's index (with UCFS_CRASH_POINTS set: each kind at each point
 * of the steps). Stops after opts.maxbad failed points. Environment
 * (unless opts.fixed):
 *   UCFS_CRASH_POINTS=N  N spread points (0: every write index);
 *   UCFS_CRASH_AT=P      only write P of the workload, each kind;
 *   UCFS_CRASH_AT=ID:P   only write P of step ID, each kind.
 *
 * For the tests' own parts, the shapes they share: two core mounts on
 * the run's devices (ch_mount_pair), the files of their models (a
 * metadata block naming a data block: ch_file_new, ch_file_ok), fsck -n
 * of what survived (ch_fsck_ok).
 */
#ifndef UCFS_TEST_CRASH_HARNESS_H
#define UCFS_TEST_CRASH_HARNESS_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockdev/bd.h"
#include "core_fixture.h"
#include "fusefs/fsck/fs_fsck.h"
#include "harness.h"

#define CH_STEPS_MAX 64
#define CH_WORKLOAD (-1)  /* a target counted from the workload's start */
#define CH_ALL UINT64_MAX /* ch_opts.spread: every write index */

enum { CH_CUT, CH_GARBLE, CH_TEAR, CH_HOWS };

/* Where power fails: at the @point-th write counted from the start of
 * the workload (@step CH_WORKLOAD) or of the test's step @step; @how
 * CH_CUT, CH_GARBLE or CH_TEAR. @point 0: the dry run. */
struct ch_target {
	int step;
	uint64_t point;
	int how;
};

/* A step of the dry run that crash points are counted from. */
struct ch_step {
	int id;		   /* the test's, as given to ch_step */
	char name[64];	   /* printed */
	uint64_t from, to; /* its writes in the dry run (to < from: none) */
	uint64_t npoints;  /* crash points 1..npoints from its start */
};

/* What the dry run found. */
struct ch_dry {
	uint64_t writes; /* W: the workload's */
	unsigned nsteps;
	struct ch_step step[CH_STEPS_MAX];
};

struct ch_test;

/* One run; the test's run state embeds it first (ch_test.run_size). */
struct ch_run {
	const struct ch_test *test;
	uint64_t seed;
	struct ch_target t;
	struct bd_fault *f;   /* node 0's fault wrapper (counts the group) */
	struct bd_fault *f1;  /* node 1's (== f unless split) */
	struct bd_dev *bd[2]; /* the nodes' devices (one unless split) */
	uint64_t w0;	      /* device writes before the workload */
	struct ch_dry *dry;   /* the dry run only */
};

struct ch_test {
	struct bd_dev *tmpl; /* every run starts from a copy of it */
	int split;	     /* a fault wrapper per node */
	size_t run_size;     /* of the test's run (struct ch_run first) */
	/* Mount the nodes on cr->bd[]: 0, or -errno with nothing mounted. */
	int (*start)(struct ch_run *cr);
	/* The workload: ch_begin at its start, ch_step at each step's. 0
	 * if it completed (a crash makes it fail: that is fine). */
	int (*work)(struct ch_run *cr);
	/* The dry run, after its workload: 1 if it did what the test
	 * needs; notes the steps (ch_dry_step). */
	int (*dry)(struct ch_run *cr);
	/* The nodes die: nothing more is written through them. */
	void (*stop)(struct ch_run *cr);
	/* 1 if @img (a copy of what survived the crash) passes. */
	int (*check)(struct ch_run *cr, struct bd_dev *img);
	/* Optional: free what start allocated (also after a failed start). */
	void (*fini)(struct ch_run *cr);
	const char *note; /* optional: printed after a failed point */
};

struct ch_opts {
	uint64_t spread; /* points spread over 1..W+1 (CH_ALL: every one) */
	unsigned maxbad; /* stop after this many failed points */
	int fixed;	 /* the environment does not apply */
};

static inline uint64_t ch_writes(const struct ch_run *cr)
{
	return bd_fault_writes(cr->f) - cr->w0;
}

static inline uint64_t ch_garble_seed(const struct ch_run *cr)
{
	return cr->seed ^ cr->t.point ^ ((uint64_t)(cr->t.step + 1) << 40);
}

/* Arm the power failure cr->t: at its point-th write from now. */
static inline void ch_arm(struct ch_run *cr)
{
	uint64_t n = cr->t.point, gs = ch_garble_seed(cr);

	if (cr->t.how == CH_CUT)
		bd_fault_crash_nth(cr->f, n);
	else if (cr->t.how == CH_GARBLE)
		bd_fault_crash_nth_garble(cr->f, n, gs);
	else
		bd_fault_tear_nth(cr->f, n, (size_t)(gs % 8) * 512);
}

/* The workload starts now: its writes count from here. */
static inline void ch_begin(struct ch_run *cr)
{
	cr->w0 = bd_fault_writes(cr->f);
	if (cr->t.point != 0 && cr->t.step == CH_WORKLOAD)
		ch_arm(cr);
}

/* The test's step @id starts now. Returns the index of its first write
 * (of the workload's, 1 = the first). */
static inline uint64_t ch_step(struct ch_run *cr, int id)
{
	if (cr->t.point != 0 && cr->t.step == id)
		ch_arm(cr);
	return ch_writes(cr) + 1;
}

/* Dry run: crash points 1..@npoints counted from the start of step @id,
 * whose writes were @from..@to of the workload. */
static inline void ch_dry_step(struct ch_run *cr, int id, const char *name,
			       uint64_t from, uint64_t to, uint64_t npoints)
{
	struct ch_dry *d = cr->dry;
	struct ch_step *s;

	if (d == NULL || d->nsteps == CH_STEPS_MAX)
		return;
	s = &d->step[d->nsteps++];
	s->id = id;
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->from = from;
	s->to = to;
	s->npoints = npoints;
}

/* The devices of a run over @lower (owned from now on): one fault
 * wrapper for both nodes, or (@split) one per node in one power group.
 * 0, or -errno with everything closed. */
static inline int ch_open_devs(struct ch_run *cr, struct bd_dev *lower,
			       int split)
{
	int ret = bd_fault_open(lower, &cr->bd[0], &cr->f);

	if (ret < 0) {
		bd_close(lower);
		return ret;
	}
	cr->bd[1] = cr->bd[0];
	cr->f1 = cr->f;
	if (!split)
		return 0;
	ret = bd_fault_open_peer(cr->f, &cr->bd[1], &cr->f1);
	if (ret < 0)
		bd_close(cr->bd[0]);
	return ret;
}

static inline void ch_close_devs(struct ch_run *cr)
{
	if (cr->bd[1] != cr->bd[0])
		bd_close(cr->bd[1]);
	bd_close(cr->bd[0]);
}

static inline const char *ch_how_name(int how)
{
	return how == CH_CUT ? "cut" : how == CH_GARBLE ? "garbled" : "torn";
}

/* The name of what point @t counts from (@d: the dry run's steps). */
static inline const char *ch_from_name(const struct ch_dry *d,
				       struct ch_target t)
{
	for (unsigned i = 0; d != NULL && i < d->nsteps; i++)
		if (d->step[i].id == t.step)
			return d->step[i].name;
	return t.step == CH_WORKLOAD ? "the workload" : "a step";
}

/* The run after the workload: the nodes die, the power fails if it has
 * not yet, and (a crash run) the test checks what survived. */
static inline int ch_finish(struct ch_run *cr, struct bd_dev *lower, int ret)
{
	const struct ch_test *t = cr->test;
	int early = cr->t.point != 0 && ret < 0 && !bd_fault_crashed(cr->f);
	struct bd_dev *after;
	int ok = 0;

	if (early)
		fprintf(stderr, "  the workload failed before the crash: %d\n",
			ret);
	if (cr->t.point == 0) {
		cr->dry->writes = ch_writes(cr);
		if (ret < 0)
			fprintf(stderr, "  the dry run's workload failed: %d\n",
				ret);
		ok = ret == 0 && t->dry(cr);
	}
	t->stop(cr);
	if (!bd_fault_crashed(cr->f))
		bd_fault_crash(cr->f,
			       cr->t.how == CH_GARBLE ? ch_garble_seed(cr) : 0);
	if (cr->t.point == 0)
		return ok;
	after = early ? NULL : cf_ram_copy(lower);
	ok = after != NULL && t->check(cr, after);
	if (after != NULL)
		bd_close(after);
	return ok;
}

/* One run at @tg (point 0: the dry run, into @d). 1 if it passed. */
static inline int ch_one(const struct ch_test *t, uint64_t seed,
			 struct ch_target tg, struct ch_dry *d)
{
	struct bd_dev *lower = cf_ram_copy(t->tmpl);
	struct ch_run *cr = calloc(1, t->run_size);
	int ok = 0, ret;

	if (cr == NULL || lower == NULL) {
		if (lower != NULL)
			bd_close(lower);
		free(cr);
		return 0;
	}
	if (ch_open_devs(cr, lower, t->split) < 0) { /* closed @lower */
		free(cr);
		return 0;
	}
	cr->test = t;
	cr->seed = seed;
	cr->t = tg;
	cr->dry = tg.point == 0 ? d : NULL;
	ret = t->start(cr);
	if (ret < 0)
		fprintf(stderr, "  start failed: %d\n", ret);
	else
		ok = ch_finish(cr, lower, t->work(cr));
	if (t->fini != NULL)
		t->fini(cr);
	ch_close_devs(cr);
	free(cr);
	return ok;
}

/* The points' walk: counts of a ch_points call. */
struct ch_walk {
	const struct ch_test *t;
	const struct ch_dry *d;
	uint64_t seed;
	unsigned n, bad, maxbad;
};

static inline void ch_crash_at(struct ch_walk *wk, struct ch_target tg)
{
	if (wk->bad >= wk->maxbad)
		return;
	wk->n++;
	if (ch_one(wk->t, wk->seed, tg, NULL))
		return;
	wk->bad++;
	fprintf(stderr,
		"  FAILED at crash point %llu of %s (%s) of seed %llu%s\n",
		(unsigned long long)tg.point, ch_from_name(wk->d, tg),
		ch_how_name(tg.how), (unsigned long long)wk->seed,
		wk->t->note ? wk->t->note : "");
}

/* UCFS_CRASH_AT=P or ID:P: that point, each kind. */
static inline void ch_points_at(struct ch_walk *wk, const char *at)
{
	char *end;
	struct ch_target tg = {CH_WORKLOAD, strtoull(at, &end, 0), 0};

	if (*end == ':') {
		tg.step = (int)tg.point;
		tg.point = strtoull(end + 1, NULL, 0);
	}
	for (; tg.how < CH_HOWS; tg.how++)
		ch_crash_at(wk, tg);
}

/* Every point of each step of the dry run (@all: each kind at each). */
static inline void ch_points_steps(struct ch_walk *wk, int all)
{
	for (unsigned i = 0; i < wk->d->nsteps; i++) {
		const struct ch_step *s = &wk->d->step[i];

		printf("  %s: the workload's writes %llu..%llu, %llu crash "
		       "points from its start\n",
		       s->name, (unsigned long long)s->from,
		       (unsigned long long)s->to,
		       (unsigned long long)s->npoints);
		for (uint64_t p = 1; p <= s->npoints; p++)
			for (int how = 0; how < CH_HOWS; how++)
				if (all || how == (int)(p % CH_HOWS))
					ch_crash_at(wk, (struct ch_target){
							    s->id, p, how});
	}
}

/* The dry run, then the crash points (above). Returns the failed
 * points, ~0u if the dry run failed. */
static inline unsigned ch_points(const struct ch_test *t,
				 const struct ch_opts *o)
{
	const char *env = o->fixed ? NULL : getenv("UCFS_CRASH_POINTS");
	const char *at = o->fixed ? NULL : getenv("UCFS_CRASH_AT");
	struct ch_dry *d = calloc(1, sizeof(*d));
	struct ch_walk wk = {
	    .t = t, .d = d, .seed = t_seed(), .maxbad = o->maxbad};
	uint64_t w, spread = o->spread;

	if (d == NULL ||
	    !ch_one(t, wk.seed, (struct ch_target){CH_WORKLOAD, 0, 0}, d) ||
	    d->writes == 0) {
		fprintf(stderr, "  dry run failed\n");
		free(d);
		return ~0u;
	}
	w = d->writes;
	if (env != NULL)
		spread =
		    strtoull(env, NULL, 0) ? strtoull(env, NULL, 0) : CH_ALL;
	if (spread > w + 1)
		spread = w + 1;
	if (at != NULL) {
		ch_points_at(&wk, at);
		spread = 0;
	} else {
		ch_points_steps(&wk, env != NULL);
	}
	for (uint64_t i = 0; i < spread; i++)
		ch_crash_at(&wk, (struct ch_target){
				     CH_WORKLOAD,
				     spread > 1 ? 1 + i * w / (spread - 1) : 1,
				     (int)(i % CH_HOWS)});
	printf("  %u crash points of %llu writes, %u failed\n", wk.n,
	       (unsigned long long)w, wk.bad);
	free(d);
	return wk.bad;
}

/* --- the tests' two nodes and their files ------------------------------- */

/* The superblock of @bd into @out. 0 or -errno. */
static inline int ch_read_sb(struct bd_dev *bd, struct fs_sb *out)
{
	struct fs_sb *sb = bd_buf_alloc(FS_BLOCK_SIZE);
	int ret = sb ? bd_read(bd, sb, FS_BLOCK_SIZE, 0) : -ENOMEM;

	if (ret == 0)
		*out = *sb;
	free(sb);
	return ret;
}

/* Journal slot @slot of @bd as a nolock core mount whose journal commits
 * only when told (commit= an hour), with @cache_mb MiB of metadata cache
 * (0: 8) and statfs_quantum= @statfs_q_s (0: the default). 0 or -errno
 * (why on stderr). */
static inline int ch_mount_slot(struct bd_dev *bd, int slot, unsigned cache_mb,
				unsigned statfs_q_s, struct fs **out)
{
	struct fs_core_opts o;
	char why[200] = "";
	int ret;

	fs_core_opts_init(&o);
	o.slot = slot;
	o.commit_s = 3600;
	o.cache_mb = cache_mb ? cache_mb : 8;
	if (statfs_q_s != 0)
		o.statfs_quantum_s = statfs_q_s;
	ret = fs_core_mount(bd, &o, out, why, sizeof(why));
	if (ret < 0)
		fprintf(stderr, "  mount: %d %s\n", ret, why);
	return ret;
}

/* Node B (slot 1) on cr->bd[1] into fs[1], then node A (slot 0) on
 * cr->bd[0] into fs[0] with the slot map showing slot 1 free: a nolock
 * mount replays every other slot in use, and a replay of B's live
 * journal would move its header under B's feet. B's mount is flushed
 * first (split caches: else its slot map write could land after A's).
 * Options as ch_mount_slot. 0, or -EIO with nothing mounted. */
static inline int ch_mount_pair(struct ch_run *cr, unsigned cache_mb,
				unsigned statfs_q_s, struct fs **fs)
{
	if (ch_mount_slot(cr->bd[1], 1, cache_mb, statfs_q_s, &fs[1]) < 0)
		return -EIO;
	if (bd_flush(cr->bd[1]) < 0 ||
	    cf_slot_states(cr->bd[0], FS_SLOT_FREE, FS_SLOT_FREE) < 0 ||
	    bd_flush(cr->bd[0]) < 0 ||
	    ch_mount_slot(cr->bd[0], 0, cache_mb, statfs_q_s, &fs[0]) < 0) {
		fs_core_abandon(fs[1]);
		fs[1] = NULL;
		return -EIO;
	}
	return 0;
}

/* A model's file, made in @tx of mount @fs: metadata block @m (an xattr
 * block, its own owner, its count the version @ver, naming block @d) and
 * data block @d written in place with version @ver (cf_data_write, as
 * fs_data writes file data). 0 or -errno. */
static inline int ch_file_new(struct fs_tx *tx, struct fs *fs, uint64_t m,
			      uint64_t d, uint32_t ver)
{
	struct fs_xattr_blk *x;
	struct fs_buf *b;
	int ret = cf_data_write(fs->bd, d, ver);

	if (ret == 0)
		ret = fs_buf_new(tx, m, FS_BT_XATTR, &b);
	if (ret < 0)
		return ret;
	x = b->data;
	x->owner = m;
	x->count = ver;
	memcpy(x->data, &d, sizeof(d));
	fs_buf_put(b);
	return 0;
}

/* Block @b of a device of @nblk blocks in use by @what: 0 (printed) if
 * out of range or marked in @used already, else marked. */
static inline int ch_mark(uint8_t *used, uint64_t nblk, uint64_t b,
			  const char *what)
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

/* 1 if the file ch_file_new made (@m, @d, the metadata's version @ver,
 * the data's @dver) is intact on mount @fs over @bd, its blocks marked in
 * @used (none used twice). */
static inline int ch_file_ok(struct fs *fs, struct bd_dev *bd, uint8_t *used,
			     uint64_t nblk, uint64_t m, uint64_t d,
			     uint32_t ver, uint32_t dver)
{
	struct fs_xattr_blk *x;
	struct fs_buf *b;
	uint64_t got = 0;
	int ok = fs_buf_read(fs, m, FS_BT_XATTR, &b) == 0;

	if (ok) {
		x = b->data;
		memcpy(&got, x->data, sizeof(got));
		ok = x->owner == m && x->count == ver && got == d;
		fs_buf_put(b);
	}
	return ok && ch_mark(used, nblk, m, "file") &&
	       ch_mark(used, nblk, d, "file data") && cf_data_ok(bd, d, dver);
}

#define CH_LEAKED "nothing refers to it (leaked)" /* fsck's words */

/* fsck -n of @bd (@when: for the messages): 1 if it ran and reported no
 * ERROR line that counts: with @only, those containing it (e.g. "ERROR:
 * journal"); else every one but a leaked block's (the tests' files are
 * blocks no inode names). The first 10 that count are printed. */
static inline int ch_fsck_ok(struct bd_dev *bd, const char *when,
			     const char *only)
{
	struct fs_fsck_opts o = {.max_report = 100000};
	struct fs_fsck_result res;
	char *out = NULL, *line;
	size_t len;
	int ok, bad = 0;

	o.out = open_memstream(&out, &len);
	if (o.out == NULL)
		return 0;
	ok = fs_fsck_run(bd, &o, &res) >= 0;
	fclose(o.out); /* sets out */
	ok = ok && out != NULL;
	if (!ok)
		fprintf(stderr, "  fsck %s did not run\n", when);
	for (line = out; ok && line != NULL && *line != '\0';) {
		char *nl = strchr(line, '\n');
		int n = nl ? (int)(nl - line) : (int)strlen(line);

		if (strncmp(line, "ERROR: ", 7) == 0 &&
		    (only ? memmem(line, (size_t)n, only, strlen(only)) != NULL
			  : memmem(line, (size_t)n, CH_LEAKED,
				   strlen(CH_LEAKED)) == NULL) &&
		    bad++ < 10)
			fprintf(stderr, "  fsck %s: %.*s\n", when, n, line);
		line = nl ? nl + 1 : NULL;
	}
	free(out);
	return ok && bad == 0;
}

#endif
