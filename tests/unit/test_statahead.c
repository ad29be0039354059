/*
 * test_statahead.c — directory readahead (fs_statahead.c) through fs.h on
 * a RAM device, with a cold cache after a remount: readdirplus finds its
 * entries' inodes prefetched (no demand misses) and the same entries and
 * attributes as with statahead=0; the window slides through a directory
 * much larger than it; the subdirectories a readdirplus returned are
 * prefetched for the next level; statahead=0 prefetches nothing; a
 * directory whose entries are removed and re-created (reusing the inode
 * blocks) between and right after prefetching readdirs reads back right;
 * and in the FUSE adapter's order (fs_sa_defer_begin, readdirplus, reply,
 * fs_sa_defer_end) the descend waits for fs_sa_defer_end.
 */
#include "tests/unit/fs_testutil.h"
#include "tests/unit/harness.h"
#include "fusefs/namespace/fs_ns.h"
#include "fusefs/namespace/fs_statahead.h"

#include <dirent.h>
#include <sys/stat.h>

#define MAXE 4000

struct ent {
	char name[32];
	uint64_t ino;
	uint32_t mode;
	uint64_t size;
};

struct list {
	struct ent e[MAXE];
	unsigned n, limit, plus_missing;
	uint64_t last;
};

static int list_cb(void *arg, const struct fs_dirent *de,
		   const struct fs_attr *a)
{
	struct list *l = arg;
	struct ent *e;

	if (de->namelen <= 2 && de->name[0] == '.' &&
	    (de->namelen == 1 || de->name[1] == '.'))
		return 0;
	if (l->n == MAXE || (l->limit > 0 && l->n >= l->limit))
		return 1;
	e = &l->e[l->n++];
	memset(e, 0, sizeof(*e));
	memcpy(e->name, de->name, de->namelen < 31 ? de->namelen : 31);
	e->ino = de->ino;
	if (a != NULL) {
		e->mode = a->mode;
		e->size = a->size;
	} else {
		l->plus_missing++;
	}
	l->last = de->next;
	return 0;
}

/* Whole directory in one call into *l (cleared); readdirplus if @plus. */
static int list_dir(struct tfs *t, uint64_t dir, int plus, struct list *l)
{
	memset(l, 0, sizeof(*l));
	return fs_readdir(t->fs, dir, 0, plus ? FS_READDIR_PLUS : 0,
			  list_cb, l);
}

static struct fs_core_stats st(struct tfs *t)
{
	struct fs_core_stats s;

	fs_core_stats_get(t->fs, &s);
	return s;
}

static int remount_sa(struct tfs *t, unsigned statahead)
{
	struct fs_opts o;

	if (t->fs != NULL && fs_unmount(t->fs) < 0)
		return -EIO;
	t->fs = NULL;
	fs_opts_init(&o);
	o.cache_mb = 8;
	o.statahead = statahead;
	return tfs_mount_opts(t, &o);
}

/* File i of a test has mode 0400 | (i & 0177) | (gen << 9 & S_ISVTX)
 * and a name that says i. */
static mode_t fmode(unsigned i)
{
	return 0400 | (i & 0177);
}

/* root/dN (N < nd), each with nf files "fK" and one subdirectory "sub"
 * holding nf files. */
static int make_tree(struct tfs *t, unsigned nd, unsigned nf)
{
	char name[32];

	for (unsigned d = 0; d < nd; d++) {
		int64_t dino, sub;

		snprintf(name, sizeof(name), "d%u", d);
		dino = tfs_mkdir(t, t->root, name);
		if (dino < 0)
			return (int)dino;
		sub = tfs_mkdir(t, (uint64_t)dino, "sub");
		if (sub < 0)
			return (int)sub;
		for (unsigned i = 0; i < nf; i++) {
			snprintf(name, sizeof(name), "f%u", i);
			if (tfs_creat(t, (uint64_t)dino, name, fmode(i)) < 0 ||
			    tfs_creat(t, (uint64_t)sub, name, fmode(i)) < 0)
				return -EIO;
		}
	}
	return 0;
}

static int same_list(const struct list *a, const struct list *b)
{
	if (a->n != b->n)
		return 0;
	for (unsigned i = 0; i < a->n; i++)
		if (strcmp(a->e[i].name, b->e[i].name) != 0 ||
		    a->e[i].ino != b->e[i].ino ||
		    a->e[i].mode != b->e[i].mode ||
		    a->e[i].size != b->e[i].size)
			return 0;
	return 1;
}

/* Modes match the names (fK has fmode(K)). */
static unsigned bad_modes(const struct list *l)
{
	unsigned bad = 0, k;

	for (unsigned i = 0; i < l->n; i++)
		if (sscanf(l->e[i].name, "f%u", &k) == 1 &&
		    l->e[i].mode != (S_IFREG | fmode(k)))
			bad++;
	return bad;
}

/* Walk root and every dN and dN/sub with readdirplus, as du does;
 * *misses = demand misses during the walk. */
static void walk(struct tfs *t, unsigned nd, struct list *out,
		 uint64_t *misses)
{
	struct fs_core_stats a = st(t);
	static struct list l;
	unsigned pos = 0;

	list_dir(t, t->root, 1, &l);
	for (unsigned d = 0; d < nd && d < l.n; d++) {
		static struct list m;
		uint64_t dir = l.e[d].ino;

		list_dir(t, dir, 1, &m);
		for (unsigned i = 0; i < m.n && pos < MAXE; i++) {
			out->e[pos++] = m.e[i];
			if (strcmp(m.e[i].name, "sub") == 0) {
				static struct list s;

				list_dir(t, m.e[i].ino, 1, &s);
				for (unsigned k = 0; k < s.n && pos < MAXE;
				     k++)
					out->e[pos++] = s.e[k];
			}
		}
	}
	out->n = pos;
	*misses = st(t).cache_misses - a.cache_misses;
}

static void test_du_walk(void)
{
	static struct list on, off;
	struct fs_core_stats a, b;
	uint64_t miss_on, miss_off;
	struct tfs t;

	REQUIRE(tfs_open(&t, 128) == 0);
	REQUIRE(make_tree(&t, 8, 60) == 0);
	REQUIRE(remount_sa(&t, 0) == 0);
	a = st(&t);
	walk(&t, 8, &off, &miss_off);
	b = st(&t);
	CHECK_EQ(b.cache_readahead, a.cache_readahead);	/* off: none */
	REQUIRE(remount_sa(&t, 512) == 0);
	a = st(&t);
	walk(&t, 8, &on, &miss_on);
	b = st(&t);
	printf("  %u entries: %llu misses with statahead=0, %llu with 512 "
	       "(%llu prefetched, %llu hits, %llu device reads)\n", on.n,
	       (unsigned long long)miss_off, (unsigned long long)miss_on,
	       (unsigned long long)(b.cache_readahead - a.cache_readahead),
	       (unsigned long long)(b.ra_hits - a.ra_hits),
	       (unsigned long long)(b.ra_ios - a.ra_ios));
	CHECK_EQ(on.n, 8 * (2 * 60 + 1));
	CHECK(same_list(&on, &off));
	CHECK_EQ(bad_modes(&on), 0);
	CHECK_EQ(on.plus_missing, 0);
	CHECK(miss_off >= on.n);
	CHECK(miss_on <= 2);	/* the root's inode itself, at most */
	CHECK(b.ra_hits - a.ra_hits >= on.n);
	CHECK(b.ra_ios - a.ra_ios < on.n / 4);
	tfs_close(&t);
}

/* One directory much larger than the window. */
static void test_window_slides(void)
{
	static struct list l, l0;
	struct fs_core_stats a, b;
	char name[32];
	struct tfs t;
	int64_t d;

	REQUIRE(tfs_open(&t, 128) == 0);
	d = tfs_mkdir(&t, t.root, "big");
	REQUIRE(d > 0);
	for (unsigned i = 0; i < 3000; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		REQUIRE(tfs_creat(&t, (uint64_t)d, name, fmode(i)) > 0);
	}
	REQUIRE(remount_sa(&t, 0) == 0);
	CHECK_EQ(list_dir(&t, (uint64_t)d, 1, &l0), 0);
	REQUIRE(remount_sa(&t, 64) == 0);
	a = st(&t);
	CHECK_EQ(list_dir(&t, (uint64_t)d, 1, &l), 0);
	b = st(&t);
	printf("  3000 entries, window 64: %llu misses, %llu hits, "
	       "%llu unused\n",
	       (unsigned long long)(b.cache_misses - a.cache_misses),
	       (unsigned long long)(b.ra_hits - a.ra_hits),
	       (unsigned long long)b.ra_unused);
	CHECK_EQ(l.n, 3000);
	CHECK(same_list(&l, &l0));
	CHECK_EQ(bad_modes(&l), 0);
	CHECK(b.ra_hits - a.ra_hits >= 3000);
	CHECK(b.cache_misses - a.cache_misses < 3000 / 20);
	CHECK(b.ra_unused <= 64);
	tfs_close(&t);
}

/* Entries removed and re-created (the freed inode blocks are reused)
 * right after a plain readdir prefetched them, and between the calls of
 * a readdir in small pieces: every attribute read back is the new one. */
static void test_changes_meanwhile(void)
{
	static struct list l, part;
	uint64_t cookie = 0;
	char name[32];
	struct tfs t;
	unsigned bad = 0;
	int64_t d;

	REQUIRE(tfs_open(&t, 64) == 0);
	d = tfs_mkdir(&t, t.root, "d");
	REQUIRE(d > 0);
	for (unsigned i = 0; i < 400; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		REQUIRE(tfs_creat(&t, (uint64_t)d, name, fmode(i)) > 0);
	}
	REQUIRE(remount_sa(&t, 128) == 0);
	CHECK_EQ(list_dir(&t, (uint64_t)d, 0, &l), 0);	/* prefetches */
	for (unsigned i = 0; i < 400; i++) {		/* at once */
		snprintf(name, sizeof(name), "f%u", i);
		if (fs_unlink(t.fs, tfs_cred(&t), (uint64_t)d, name) < 0 ||
		    tfs_creat(&t, (uint64_t)d, name, fmode(i + 1)) < 0)
			bad++;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(list_dir(&t, (uint64_t)d, 1, &l), 0);
	CHECK_EQ(l.n, 400);
	for (unsigned i = 0, k; i < l.n; i++)
		if (sscanf(l.e[i].name, "f%u", &k) != 1 ||
		    l.e[i].mode != (S_IFREG | fmode(k + 1)))
			bad++;
	CHECK_EQ(bad, 0);
	/* in pieces of 30, replacing the next entries between calls */
	memset(&l, 0, sizeof(l));
	for (unsigned round = 0; round < 40; round++) {
		memset(&part, 0, sizeof(part));
		part.limit = 30;
		CHECK_EQ(fs_readdir(t.fs, (uint64_t)d, cookie,
				    FS_READDIR_PLUS, list_cb, &part), 0);
		if (part.n == 0)
			break;
		for (unsigned i = 0; i < part.n; i++)
			l.e[l.n++] = part.e[i];
		cookie = part.last;
		for (unsigned i = 0; i < 400; i += 7) {
			snprintf(name, sizeof(name), "f%u", i);
			fs_unlink(t.fs, tfs_cred(&t), (uint64_t)d, name);
			tfs_creat(&t, (uint64_t)d, name, fmode(i + round));
		}
	}
	CHECK(l.n >= 400 - 400 / 7 - 1);
	for (unsigned i = 0; i < l.n; i++) {
		struct fs_attr a;

		if (fs_getattr(t.fs, l.e[i].ino, &a) == 0 &&
		    a.mode != l.e[i].mode)
			bad++;	/* what readdirplus said was current */
	}
	CHECK_EQ(bad, 0);
	tfs_close(&t);
}

static uint64_t descends(struct tfs *t, int after_reply)
{
	return after_reply ? t->fs->ns->st.statahead_after_reply
			   : t->fs->ns->st.statahead_descends;
}

/* readdirplus of @dir (whose first subdirectory holds @first entries,
 * the others @rest in all), then fs_sa_defer_end(): the first
 * subdirectory's entries are asked for before the end (with this
 * directory's own, fewer than @first), the others at the end only. */
static void defer_one(struct tfs *t, uint64_t dir, unsigned first,
		      unsigned rest)
{
	static struct list l;
	uint64_t d0 = descends(t, 0), r0 = descends(t, 1);
	uint64_t a = st(t).cache_readahead, b;

	fs_sa_defer_begin();
	CHECK_EQ(list_dir(t, dir, 1, &l), 0);
	b = st(t).cache_readahead;
	CHECK_EQ(descends(t, 0), d0 + 1);
	CHECK(b - a >= first);
	CHECK(b - a < 2 * first + (rest > 0 ? 0 : first));
	fs_sa_defer_end();
	CHECK_EQ(descends(t, 1), r0 + (rest > 0));
	CHECK(st(t).cache_readahead - b >= rest);
	fs_sa_defer_end(); /* nothing left: nothing done */
	CHECK_EQ(descends(t, 0), d0 + 1);
	CHECK_EQ(descends(t, 1), r0 + (rest > 0));
}

static void test_descend_after_reply(void)
{
	static struct list l, m;
	uint64_t d0, r0, miss;
	struct tfs t;

	REQUIRE(tfs_open(&t, 128) == 0);
	REQUIRE(make_tree(&t, 4, 60) == 0);
	REQUIRE(remount_sa(&t, 512) == 0);
	/* root: d0..d3, each holding 60 files and "sub" */
	defer_one(&t, t.root, 61, 3 * 61);
	REQUIRE(list_dir(&t, t.root, 0, &l) == 0 && l.n == 4);
	/* the next level was read ahead: no demand miss */
	miss = st(&t).cache_misses;
	defer_one(&t, l.e[0].ino, 60, 0); /* d0: only sub, 60 files */
	CHECK_EQ(st(&t).cache_misses, miss);
	/* two readdirplus calls in one window: the second descends at
	 * once, the first's later subdirectories at the end */
	d0 = descends(&t, 0);
	r0 = descends(&t, 1);
	fs_sa_defer_begin();
	CHECK_EQ(list_dir(&t, t.root, 1, &m), 0);
	CHECK_EQ(list_dir(&t, t.root, 1, &m), 0);
	CHECK_EQ(descends(&t, 0), d0 + 2);
	CHECK_EQ(descends(&t, 1), r0);
	fs_sa_defer_end();
	CHECK_EQ(descends(&t, 0), d0 + 2);
	CHECK_EQ(descends(&t, 1), r0 + 1);
	/* no window open: at once, as for every fs.h caller */
	CHECK_EQ(list_dir(&t, l.e[3].ino, 1, &m), 0);
	CHECK_EQ(descends(&t, 0), d0 + 3);
	CHECK_EQ(descends(&t, 1), r0 + 1);
	CHECK_EQ(m.n, 61);
	CHECK_EQ(bad_modes(&m), 0);
	tfs_close(&t);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_du_walk);
	T_RUN(test_window_slides);
	T_RUN(test_changes_meanwhile);
	T_RUN(test_descend_after_reply);
	return t_done();
}
