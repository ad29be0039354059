/*
 * test_ilock.c — per-inode locks (fusefs/namespace/fs_ilock.c) through fs.h.
 *
 *  - holders: what fs_ilock_held reports, the order of peers, the glock
 *    nesting of an inner holder;
 *  - overlap: writes to four files of one mount on a device whose reads
 *    of the files' data wait for each other (a rendezvous, not a timer):
 *    the counter of reads waiting at once shows the four requests held
 *    their locks at the same time; two writes to ONE file never overlap;
 *  - random: threads run seeded random creates, mkdirs, unlinks, rmdirs,
 *    renames between their own directory and a shared one (directories
 *    too: the rename mutex), writes and reads on one mount at once, each
 *    against its own model; then every directory is compared with the
 *    models and fsck must find the image clean.
 */
#include "blockdev/bd_internal.h"
#include "fusefs/fsck/fs_fsck.h"
#include "fusefs/namespace/fs_ns.h"
#include "lockmgr/cv_wait.h"
#include "harness.h"
#include "fs_testutil.h"

#include <dirent.h>
#include <pthread.h>

/* ---- holders ---- */

static void test_holders(void)
{
	struct fs_ilock il, inner;
	struct tfs t;
	int64_t a, b;

	REQUIRE(tfs_open(&t, 64) == 0);
	a = tfs_creat(&t, t.root, "a", 0644);
	b = tfs_creat(&t, t.root, "b", 0644);
	REQUIRE(a > 0 && b > 0);
	CHECK(fs_op_begin(&il, t.fs, 0) == 0);
	CHECK(!fs_ilock_held(t.fs, t.root, FS_IL_SH));
	CHECK(fs_ilock_one(&il, t.root, FS_IL_SH) == 0);
	CHECK(fs_ilock_held(t.fs, t.root, FS_IL_SH));
	CHECK(!fs_ilock_held(t.fs, t.root, FS_IL_EX));
	/* peers by number, whatever the argument order */
	CHECK(fs_ilock_peers(&il, (uint64_t)b, (uint64_t)a, FS_IL_EX) == 0);
	CHECK_EQ(il.n, 3);
	CHECK_EQ(il.h[1].rec->ino, a < b ? a : b);
	CHECK(fs_ilock_held(t.fs, (uint64_t)a, FS_IL_EX));
	/* an inner holder sees the outer one's locks; its own go at end */
	CHECK(fs_op_begin(&inner, t.fs, 0) == 0);
	CHECK(fs_ilock_held(t.fs, (uint64_t)b, FS_IL_EX));
	fs_op_end(&inner);
	fs_iunlock_one(&il, (uint64_t)a);
	CHECK(!fs_ilock_held(t.fs, (uint64_t)a, FS_IL_SH));
	fs_op_end(&il);
	CHECK(!fs_ilock_held(t.fs, t.root, FS_IL_SH));
	CHECK(!fs_ilock_held(t.fs, (uint64_t)b, FS_IL_SH));
	tfs_close(&t);
}

/* ---- overlap: a device whose marked reads meet ---- */

#define MARK "GATEGATE"
#define NFILES 4

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int on;
	unsigned want; /* release all once this many arrived */
	unsigned arrived, inside, max_inside;
	unsigned timeout_ms; /* safety only: a serialized fs waits it */
} G = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

struct gate_dev {
	struct bd_dev dev; /* first */
	struct bd_dev *lower;
};

static void rendezvous(void)
{
	uint64_t dl = cvw_deadline_ms(G.timeout_ms);

	pthread_mutex_lock(&G.mu);
	G.arrived++;
	G.inside++;
	if (G.inside > G.max_inside)
		G.max_inside = G.inside;
	pthread_cond_broadcast(&G.cv);
	while (G.arrived < G.want && cvw_wait_until(&G.cv, &G.mu, dl) == 0)
		;
	G.inside--;
	pthread_mutex_unlock(&G.mu);
}

static int marked(const char *buf, size_t len)
{
	for (size_t o = 0; o < len; o += BD_ALIGN)
		if (memcmp(buf + o, MARK, 8) == 0)
			return 1;
	return 0;
}

static int gate_read(struct bd_dev *d, void *buf, size_t len, uint64_t off)
{
	struct gate_dev *g = (struct gate_dev *)d;
	int ret = bd_read(g->lower, buf, len, off);

	if (ret == 0 && __atomic_load_n(&G.on, __ATOMIC_ACQUIRE) &&
	    marked(buf, len))
		rendezvous();
	return ret;
}

static int gate_write(struct bd_dev *d, const void *buf, size_t len,
		      uint64_t off, unsigned fl)
{
	return bd_write(((struct gate_dev *)d)->lower, buf, len, off, fl);
}

static int gate_submit(struct bd_dev *d, struct bd_io *ios, unsigned n)
{
	return bd_submit(((struct gate_dev *)d)->lower, ios, n);
}

static int gate_submit_async(struct bd_dev *d, struct bd_io *ios, unsigned n,
			     bd_done_fn done, void *arg)
{
	return bd_submit_async(((struct gate_dev *)d)->lower, ios, n, done,
			       arg);
}

static int gate_flush(struct bd_dev *d)
{
	return bd_flush(((struct gate_dev *)d)->lower);
}

static void gate_close(struct bd_dev *d)
{
	bd_dev_fini(d);
	free(d);
}

static const struct bd_ops gate_ops = {
    .read = gate_read,
    .write = gate_write,
    .submit = gate_submit,
    .submit_async = gate_submit_async,
    .flush = gate_flush,
    .close = gate_close,
};

static struct bd_dev *gate_open(struct bd_dev *lower)
{
	struct gate_dev *g = calloc(1, sizeof(*g));

	if (g == NULL ||
	    bd_dev_init(&g->dev, &gate_ops, "gate", bd_size(lower), 0) < 0) {
		free(g);
		return NULL;
	}
	g->lower = lower;
	return &g->dev;
}

struct wr {
	struct tfs *t;
	uint64_t ino;
	int ret;
};

/* One byte into the middle of a marked block: the write reads the
 * block first (read-modify-write) under the file's lock. */
static void *writer(void *arg)
{
	struct wr *w = arg;
	ssize_t n = fs_write(w->t->fs, tfs_cred(w->t), w->ino, "x", 1,
			     (256u << 10) + 100);

	w->ret = n == 1 ? 0 : (int)n;
	return NULL;
}

/* @n threads write to @inos at once; the most reads that waited at the
 * rendezvous together. */
static unsigned overlap(struct tfs *t, const uint64_t *inos, unsigned n,
			unsigned want, unsigned timeout_ms)
{
	pthread_t th[NFILES];
	struct wr w[NFILES];

	pthread_mutex_lock(&G.mu);
	G.want = want;
	G.arrived = G.inside = G.max_inside = 0;
	G.timeout_ms = timeout_ms;
	pthread_mutex_unlock(&G.mu);
	__atomic_store_n(&G.on, 1, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < n; i++) {
		w[i] = (struct wr){.t = t, .ino = inos[i]};
		pthread_create(&th[i], NULL, writer, &w[i]);
	}
	for (unsigned i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(w[i].ret, 0);
	}
	__atomic_store_n(&G.on, 0, __ATOMIC_RELEASE);
	return G.max_inside;
}

/* Four 1 MiB files of marked blocks, in four directories. */
static int make_files(struct tfs *t, uint64_t *inos)
{
	size_t len = 1u << 20;
	char *buf = malloc(len), name[8];

	if (buf == NULL)
		return -ENOMEM;
	for (size_t o = 0; o < len; o += BD_ALIGN) {
		memset(buf + o, 'd', BD_ALIGN);
		memcpy(buf + o, MARK, 8);
	}
	for (unsigned i = 0; i < NFILES; i++) {
		int64_t d, f;

		snprintf(name, sizeof(name), "d%u", i);
		d = tfs_mkdir(t, t->root, name);
		f = d > 0 ? tfs_creat(t, (uint64_t)d, "f", 0644) : d;
		if (f < 0 || fs_write(t->fs, tfs_cred(t), (uint64_t)f, buf, len,
				      0) != (ssize_t)len) {
			free(buf);
			return -EIO;
		}
		inos[i] = (uint64_t)f;
	}
	free(buf);
	return 0;
}

/* A journal whose running transaction holds the four writers' credits
 * (~100 each) at once: else the third would wait for a commit, which
 * waits for the first two's handles. */
static int format_bigjournal(struct tfs *t)
{
	struct fs_mkfs_params p;
	char why[256] = "";
	int ret;

	memset(t, 0, sizeof(*t));
	t->root_cred.flags = FS_CRED_FSETID;
	ret = bd_ram_open(128u << 20, &t->bd);
	if (ret < 0)
		return ret;
	fs_mkfs_defaults(&p);
	p.journal_mb = 16;
	p.rgrp_mb = 16;
	ret = fs_mkfs(t->bd, &p, why, sizeof(why));
	if (ret < 0)
		fprintf(stderr, "mkfs: %d %s\n", ret, why);
	return ret;
}

static int remount_nocommit(struct tfs *t)
{
	struct fs_opts o;
	int ret = fs_unmount(t->fs);

	t->fs = NULL;
	if (ret < 0)
		return ret;
	fs_opts_init(&o);
	o.cache_mb = 16;
	o.commit_s = 3600;
	return tfs_mount_opts(t, &o);
}

static void test_overlap(void)
{
	uint64_t inos[NFILES], same[2];
	struct bd_dev *ram;
	struct tfs t;
	unsigned m;

	REQUIRE(format_bigjournal(&t) == 0);
	ram = t.bd;
	t.bd = gate_open(ram);
	REQUIRE(t.bd != NULL);
	REQUIRE(tfs_mount(&t) == 0);
	REQUIRE(make_files(&t, inos) == 0);
	/* cold: the remount's cache holds none of the data blocks; no timed
	 * commit may block a late writer's handle while the others wait */
	REQUIRE(remount_nocommit(&t) == 0);
	m = overlap(&t, inos, NFILES, NFILES, 20000);
	printf("different files: %u of %u writes inside at once\n", m, NFILES);
	CHECK_EQ(m, NFILES);
	/* one file: its lock is exclusive, the second waits for the first
	 * (which gives up waiting for it after the safety timeout) */
	REQUIRE(remount_nocommit(&t) == 0);
	same[0] = same[1] = inos[0];
	m = overlap(&t, same, 2, 2, 500);
	printf("one file: %u of 2 writes inside at once\n", m);
	CHECK_EQ(m, 1);
	tfs_close(&t);
	bd_close(ram);
}

/* ---- random: threads on one mount, each with its model ---- */

#define NTHREADS 4
#define NNAMES 8

enum { L_NONE, L_OWN, L_SHARED };

struct obj {
	int loc;	    /* L_* */
	int dir;	    /* else a file */
	unsigned len;	    /* file: bytes of ... */
	unsigned char fill; /* ... this value */
};

struct rt {
	struct tfs *t;
	unsigned id;
	uint64_t own, shared;
	uint64_t rng;
	unsigned ops;
	struct obj o[NNAMES];
	int bad;
	char why[200];
};

static uint64_t rt_rnd(struct rt *r)
{
	r->rng ^= r->rng << 13;
	r->rng ^= r->rng >> 7;
	r->rng ^= r->rng << 17;
	return r->rng;
}

static void nm(const struct rt *r, unsigned i, char *buf)
{
	snprintf(buf, 16, "t%u_%u", r->id, i);
}

static uint64_t dir_of(const struct rt *r, int loc)
{
	return loc == L_OWN ? r->own : r->shared;
}

#define EXPECT(r, got, want, what)                                             \
	do {                                                                   \
		if ((got) != (want) && !(r)->bad) {                            \
			(r)->bad = 1;                                          \
			snprintf((r)->why, sizeof((r)->why),                   \
				 "thread %u op %u: %s %d, expected %d",        \
				 (r)->id, (r)->ops, (what), (int)(got),        \
				 (int)(want));                                 \
		}                                                              \
	} while (0)

static void r_create(struct rt *r, unsigned i, int loc, int dir)
{
	struct obj *o = &r->o[i];
	struct fs_attr a;
	char n[16];
	int ret, want = o->loc == loc ? -EEXIST : 0;

	nm(r, i, n);
	if (o->loc != L_NONE && o->loc != loc)
		return; /* one place per name: the model stays simple */
	if (dir)
		ret = fs_mkdir(r->t->fs, tfs_cred(r->t), dir_of(r, loc), n,
			       0755, &a);
	else
		ret = fs_create(r->t->fs, tfs_cred(r->t), dir_of(r, loc), n,
				0644, 0, &a);
	EXPECT(r, ret, want, dir ? "mkdir" : "create");
	if (ret == 0 && !dir)
		fs_release(r->t->fs, a.ino);
	if (ret == 0)
		fs_forget(r->t->fs, a.ino, 1);
	if (ret == 0)
		*o = (struct obj){.loc = loc, .dir = dir};
}

static void r_remove(struct rt *r, unsigned i, int loc, int dir)
{
	struct obj *o = &r->o[i];
	char n[16];
	int ret, want;

	nm(r, i, n);
	if (o->loc != loc)
		want = -ENOENT;
	else if (o->dir != dir)
		want = dir ? -ENOTDIR : -EISDIR;
	else
		want = 0;
	if (dir)
		ret = fs_rmdir(r->t->fs, tfs_cred(r->t), dir_of(r, loc), n);
	else
		ret = fs_unlink(r->t->fs, tfs_cred(r->t), dir_of(r, loc), n);
	EXPECT(r, ret, want, dir ? "rmdir" : "unlink");
	if (ret == 0)
		o->loc = L_NONE;
}

/* Rename name i (wherever it is) to name j in the other directory. */
static void r_rename(struct rt *r, unsigned i, unsigned j)
{
	struct obj *s = &r->o[i], *d = &r->o[j];
	int to, want, ret;
	char a[16], b[16];

	if (s->loc == L_NONE || i == j)
		return;
	to = s->loc == L_OWN ? L_SHARED : L_OWN;
	if (d->loc != L_NONE && d->loc != to)
		return;
	nm(r, i, a);
	nm(r, j, b);
	if (d->loc == L_NONE)
		want = 0;
	else if (s->dir && !d->dir)
		want = -ENOTDIR;
	else if (!s->dir && d->dir)
		want = -EISDIR;
	else
		want = 0; /* over a file, or an empty directory */
	ret = fs_rename(r->t->fs, tfs_cred(r->t), dir_of(r, s->loc), a,
			dir_of(r, to), b, 0);
	EXPECT(r, ret, want, "rename");
	if (ret == 0) {
		*d = *s;
		d->loc = to;
		s->loc = L_NONE;
	}
}

static int lookup_ino(struct rt *r, unsigned i, uint64_t *ino)
{
	struct fs_attr a;
	char n[16];
	int ret;

	nm(r, i, n);
	ret = fs_lookup(r->t->fs, dir_of(r, r->o[i].loc), n, &a);
	if (ret == 0) {
		*ino = a.ino;
		fs_forget(r->t->fs, a.ino, 1);
	}
	return ret;
}

static void r_write(struct rt *r, unsigned i)
{
	struct obj *o = &r->o[i];
	unsigned char buf[6000];
	struct fs_attr sz = {.size = 0}, out;
	unsigned len = (unsigned)(rt_rnd(r) % sizeof(buf));
	unsigned char fill = (unsigned char)rt_rnd(r);
	uint64_t ino;
	int ret;

	if (o->loc == L_NONE || o->dir)
		return;
	ret = lookup_ino(r, i, &ino);
	EXPECT(r, ret, 0, "lookup");
	if (ret < 0)
		return;
	ret = fs_setattr(r->t->fs, tfs_cred(r->t), ino, &sz, FS_SET_SIZE, &out);
	EXPECT(r, ret, 0, "truncate");
	memset(buf, fill, len);
	ret = (int)fs_write(r->t->fs, tfs_cred(r->t), ino, buf, len, 0);
	EXPECT(r, ret, (int)len, "write");
	o->len = len;
	o->fill = fill;
}

static void r_read(struct rt *r, unsigned i)
{
	struct obj *o = &r->o[i];
	unsigned char buf[8192];
	uint64_t ino;
	int ret;

	if (o->loc == L_NONE || o->dir)
		return;
	ret = lookup_ino(r, i, &ino);
	EXPECT(r, ret, 0, "lookup");
	if (ret < 0)
		return;
	ret = (int)fs_read(r->t->fs, ino, buf, sizeof(buf), 0);
	EXPECT(r, ret, (int)o->len, "read");
	for (int k = 0; k < ret && k < (int)o->len; k++)
		if (buf[k] != o->fill) {
			EXPECT(r, buf[k], o->fill, "content");
			break;
		}
}

static void rt_step(struct rt *r)
{
	unsigned i = (unsigned)(rt_rnd(r) % NNAMES);
	unsigned j = (unsigned)(rt_rnd(r) % NNAMES);
	int loc = rt_rnd(r) % 2 ? L_OWN : L_SHARED;

	switch (rt_rnd(r) % 8) {
	case 0:
		r_create(r, i, loc, 0);
		break;
	case 1:
		r_create(r, i, loc, 1);
		break;
	case 2:
		r_remove(r, i, loc, 0);
		break;
	case 3:
		r_remove(r, i, loc, 1);
		break;
	case 4:
	case 5:
		r_rename(r, i, j);
		break;
	case 6:
		r_write(r, i);
		break;
	default:
		r_read(r, i);
		break;
	}
}

static void *rt_main(void *arg)
{
	struct rt *r = arg;

	for (r->ops = 0; r->ops < 3000 && !r->bad; r->ops++)
		rt_step(r);
	return NULL;
}

struct seen {
	const struct rt *r;
	int loc;
	unsigned found;
	int bad;
};

static int seen_cb(void *arg, const struct fs_dirent *de,
		   const struct fs_attr *a)
{
	struct seen *s = arg;
	char n[16];

	(void)a;
	for (unsigned i = 0; i < NNAMES; i++) {
		nm(s->r, i, n);
		if (de->namelen != strlen(n) ||
		    memcmp(de->name, n, de->namelen) != 0)
			continue;
		if (s->r->o[i].loc != s->loc ||
		    (de->type == DT_DIR) != s->r->o[i].dir)
			s->bad = 1;
		s->found++;
	}
	return 0;
}

/* The directory holds exactly the model's names of this thread there. */
static int check_dir(struct rt *r, int loc)
{
	struct seen s = {.r = r, .loc = loc};
	unsigned want = 0;
	int ret;

	for (unsigned i = 0; i < NNAMES; i++)
		want += r->o[i].loc == loc;
	ret = fs_readdir(r->t->fs, dir_of(r, loc), 0, 0, seen_cb, &s);
	return ret == 0 && !s.bad && s.found == want ? 0 : -1;
}

static void test_random(void)
{
	struct fs_fsck_opts fo = {.out = NULL};
	struct fs_fsck_result res;
	pthread_t th[NTHREADS];
	struct rt *r;
	uint64_t seed = t_seed();
	int64_t shared;
	struct tfs t;

	r = calloc(NTHREADS, sizeof(*r));
	REQUIRE(r != NULL);
	REQUIRE(tfs_open(&t, 128) == 0);
	shared = tfs_mkdir(&t, t.root, "shared");
	REQUIRE(shared > 0);
	for (unsigned k = 0; k < NTHREADS; k++) {
		char n[16];
		int64_t own;

		snprintf(n, sizeof(n), "own%u", k);
		own = tfs_mkdir(&t, t.root, n);
		REQUIRE(own > 0);
		r[k] =
		    (struct rt){.t = &t,
				.id = k,
				.own = (uint64_t)own,
				.shared = (uint64_t)shared,
				.rng = (seed + k * 0x9E3779B97F4A7C15ull) | 1};
	}
	for (unsigned k = 0; k < NTHREADS; k++)
		pthread_create(&th[k], NULL, rt_main, &r[k]);
	for (unsigned k = 0; k < NTHREADS; k++)
		pthread_join(th[k], NULL);
	for (unsigned k = 0; k < NTHREADS; k++) {
		if (r[k].bad)
			fprintf(stderr, "%s\n", r[k].why);
		CHECK(!r[k].bad);
		CHECK(check_dir(&r[k], L_OWN) == 0);
		CHECK(check_dir(&r[k], L_SHARED) == 0);
	}
	CHECK(fs_unmount(t.fs) == 0);
	t.fs = NULL;
	CHECK(fs_fsck_run(t.bd, &fo, &res) == 0);
	CHECK_EQ(res.errors, 0);
	if (res.errors != 0) {
		fo.out = stderr;
		fs_fsck_run(t.bd, &fo, &res);
	}
	tfs_close(&t);
	free(r);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_holders);
	T_RUN(test_overlap);
	T_RUN(test_random);
	return t_done();
}
