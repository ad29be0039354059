/*
 * test_kinval.c — the kernel cache sink's core side (fs_kinval.c) on a
 * RAM device with a recording sink: fs_kinval_all asks for every name
 * (all), names the root and the open files (pages too), not the others,
 * syncs last and prunes nothing; fs_kinval_inode
 * and fs_kinval_dir (names, or the sink's dir op with busy passed on);
 * fs_kinval_flush (the sink's flush, its done called); fs_kinval_defer
 * (one sync for several inodes); no sink, no calls;
 * removing the sink waits for a call in progress.
 */
#include "tests/unit/fs_testutil.h"
#include "tests/unit/harness.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#define MAXREC 64

struct rec {
	char kind; /* 'i' inode, 'a' all, 'f' forget, 's' sync */
	uint64_t ino;
	int64_t off, len;
};

struct sink {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rec r[MAXREC];
	unsigned n;
	int hold_sync; /* sync waits until cleared */
	int in_sync;
};

static void add(struct sink *s, char kind, uint64_t ino, int64_t off,
		int64_t len)
{
	pthread_mutex_lock(&s->mu);
	if (s->n < MAXREC)
		s->r[s->n++] = (struct rec){kind, ino, off, len};
	pthread_mutex_unlock(&s->mu);
}

static void s_inode(void *arg, uint64_t ino, int64_t off, int64_t len)
{
	add(arg, 'i', ino, off, len);
}

static void s_entry(void *arg, uint64_t parent, const char *name,
		    size_t namelen)
{
	(void)name;
	add(arg, 'e', parent, 0, (int64_t)namelen);
}

static void s_all(void *arg)
{
	add(arg, 'a', 0, 0, 0);
}

static void s_names(void *arg)
{
	add(arg, 'n', 0, 0, 0);
}

static int s_forget(void *arg, const uint64_t *inos, size_t n)
{
	for (size_t i = 0; i < n; i++)
		add(arg, 'f', inos[i], 0, 0);
	return 0;
}

static void s_sync(void *arg)
{
	struct sink *s = arg;

	add(s, 's', 0, 0, 0);
	pthread_mutex_lock(&s->mu);
	s->in_sync = 1;
	pthread_cond_broadcast(&s->cv);
	while (s->hold_sync)
		pthread_cond_wait(&s->cv, &s->mu);
	s->in_sync = 0;
	pthread_mutex_unlock(&s->mu);
}

static const struct fs_inval_ops sink_ops = {
    .inode = s_inode,
    .entry = s_entry,
    .all = s_all,
    .names = s_names,
    .forget = s_forget,
    .sync = s_sync,
};

static void s_dir(void *arg, uint64_t dir, int (*busy)(void *), void *busy_arg)
{
	add(arg, 'd', dir, busy != NULL && busy(busy_arg), 0);
}

static int busy_yes(void *arg)
{
	(void)arg;
	return 1;
}

static int s_flush(void *arg, uint64_t ino, void (*done)(void *),
		   void *done_arg)
{
	add(arg, 'F', ino, 0, 0);
	done(done_arg);
	return 1;
}

/* A sink that tracks names per directory (dir) and flushes. */
static const struct fs_inval_ops dir_ops = {
    .inode = s_inode,
    .entry = s_entry,
    .all = s_all,
    .names = s_names,
    .forget = s_forget,
    .sync = s_sync,
    .flush = s_flush,
    .dir = s_dir,
};

static void sink_init(struct sink *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
}

/* The record of @kind about @ino: its index, or -1. */
static int find(const struct sink *s, char kind, uint64_t ino)
{
	for (unsigned i = 0; i < s->n; i++)
		if (s->r[i].kind == kind && s->r[i].ino == ino)
			return (int)i;
	return -1;
}

static void test_all(void)
{
	struct tfs t;
	struct sink s;
	int64_t f1, f2, d;
	int i;

	REQUIRE(tfs_open(&t, 64) == 0);
	sink_init(&s);
	f1 = tfs_creat(&t, t.root, "f1", 0644); /* a reference, not open */
	f2 = tfs_creat(&t, t.root, "f2", 0644);
	d = tfs_mkdir(&t, t.root, "d");
	REQUIRE(f1 > 0 && f2 > 0 && d > 0);
	REQUIRE(fs_open(t.fs, tfs_cred(&t), (uint64_t)f2, O_RDONLY) == 0);

	fs_kinval_all(t.fs); /* no sink: nothing, no crash */
	fs_set_inval(t.fs, &sink_ops, &s);
	fs_kinval_all(t.fs);
	CHECK(find(&s, 'a', 0) >= 0);
	CHECK((i = find(&s, 'i', t.root)) >= 0 && s.r[i].len == 0);
	/* not open: a path walk's lookup refreshes them (and the sink's
	 * all() drops the directories') */
	CHECK(find(&s, 'i', (uint64_t)f1) < 0);
	CHECK(find(&s, 'i', (uint64_t)d) < 0);
	/* the open file: its pages too (to the end) */
	CHECK((i = find(&s, 'i', (uint64_t)f2)) >= 0 && s.r[i].len == -1 &&
	      s.r[i].off == 0);
	CHECK(find(&s, 'f', (uint64_t)f1) < 0); /* no prune (fs_kinval.c) */
	CHECK(s.n > 0 && s.r[s.n - 1].kind == 's');
	CHECK_EQ(find(&s, 's', 0), (int)s.n - 1); /* one sync, last */

	/* closed: no longer named */
	fs_release(t.fs, (uint64_t)f2);
	s.n = 0;
	fs_kinval_all(t.fs);
	CHECK(find(&s, 'i', (uint64_t)f2) < 0);
	CHECK(find(&s, 'a', 0) >= 0);

	fs_set_inval(t.fs, NULL, NULL);
	s.n = 0;
	fs_kinval_all(t.fs);
	fs_kinval_inode(t.fs, (uint64_t)f2);
	CHECK_EQ(s.n, 0u);
	tfs_close(&t);
}

/* fs_kinval_defer: the inodes' attributes are queued at once, the wait
 * (sync) comes once, when the defer ends. */
static void test_inode_defer(void)
{
	struct tfs t;
	struct sink s;

	REQUIRE(tfs_open(&t, 64) == 0);
	sink_init(&s);
	fs_set_inval(t.fs, &sink_ops, &s);
	fs_kinval_defer(1);
	fs_kinval_inode(t.fs, 4242);
	fs_kinval_inode(t.fs, 4243);
	fs_kinval_inode(t.fs, 4244);
	REQUIRE(s.n == 3);
	CHECK(s.r[0].kind == 'i' && s.r[2].kind == 'i' && s.r[2].ino == 4244);
	fs_kinval_defer(0);
	REQUIRE(s.n == 4);
	CHECK(s.r[3].kind == 's');
	fs_kinval_defer(0);	     /* nothing owed: no sync */
	fs_kinval_inode(t.fs, 4245); /* not deferred: its own sync */
	REQUIRE(s.n == 6);
	CHECK(s.r[4].kind == 'i' && s.r[5].kind == 's');
	fs_set_inval(t.fs, NULL, NULL); /* no user left behind: returns */
	tfs_close(&t);
}

static void flushed(void *arg)
{
	add(arg, 'D', 0, 0, 0);
}

static void test_inode_dir(void)
{
	struct tfs t;
	struct sink s;
	int64_t d;

	REQUIRE(tfs_open(&t, 64) == 0);
	sink_init(&s);
	d = tfs_mkdir(&t, t.root, "d");
	REQUIRE(d > 0);
	fs_set_inval(t.fs, &sink_ops, &s);
	fs_kinval_inode(t.fs, 4242);
	REQUIRE(s.n == 2);
	CHECK(s.r[0].kind == 'i' && s.r[0].ino == 4242 && s.r[0].len == -1);
	CHECK(s.r[1].kind == 's');
	s.n = 0;
	fs_kinval_dir(t.fs, (uint64_t)d, NULL, NULL);
	REQUIRE(s.n == 3);
	CHECK(s.r[0].kind == 'i' && s.r[0].ino == (uint64_t)d &&
	      s.r[0].len == -1);
	CHECK(s.r[1].kind == 'n'); /* names, not every directory's attrs */
	CHECK(s.r[2].kind == 's');
	/* no flush op: nothing to wait for */
	CHECK_EQ(fs_kinval_flush(t.fs, (uint64_t)d, flushed, &s), 0);
	/* a sink with a dir op: that directory's names, busy passed on */
	fs_set_inval(t.fs, &dir_ops, &s);
	s.n = 0;
	fs_kinval_dir(t.fs, (uint64_t)d, busy_yes, NULL);
	REQUIRE(s.n == 3);
	CHECK(s.r[1].kind == 'd' && s.r[1].ino == (uint64_t)d &&
	      s.r[1].off == 1);
	CHECK(s.r[2].kind == 's');
	s.n = 0;
	CHECK_EQ(fs_kinval_flush(t.fs, 77, flushed, &s), 1);
	CHECK(s.n == 2 && s.r[0].kind == 'F' && s.r[0].ino == 77 &&
	      s.r[1].kind == 'D');
	fs_set_inval(t.fs, NULL, NULL);
	CHECK_EQ(fs_kinval_flush(t.fs, 77, flushed, &s), 0); /* no sink */
	tfs_close(&t);
}

struct call {
	struct tfs *t;
	int done;
};

static void *do_kinval(void *arg)
{
	struct call *c = arg;

	fs_kinval_inode(c->t->fs, 7);
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *do_remove(void *arg)
{
	struct call *c = arg;

	fs_set_inval(c->t->fs, NULL, NULL);
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* fs_set_inval(NULL) returns only after the calls inside the sink did */
static void test_remove_waits(void)
{
	struct tfs t;
	struct sink s;
	struct call k = {&t, 0}, r = {&t, 0};
	pthread_t tk, tr;

	REQUIRE(tfs_open(&t, 64) == 0);
	sink_init(&s);
	s.hold_sync = 1;
	fs_set_inval(t.fs, &sink_ops, &s);
	REQUIRE(pthread_create(&tk, NULL, do_kinval, &k) == 0);
	pthread_mutex_lock(&s.mu);
	while (!s.in_sync)
		pthread_cond_wait(&s.cv, &s.mu);
	pthread_mutex_unlock(&s.mu);
	REQUIRE(pthread_create(&tr, NULL, do_remove, &r) == 0);
	usleep(50000);
	CHECK_EQ(__atomic_load_n(&r.done, __ATOMIC_ACQUIRE), 0);
	pthread_mutex_lock(&s.mu);
	s.hold_sync = 0;
	pthread_cond_broadcast(&s.cv);
	pthread_mutex_unlock(&s.mu);
	pthread_join(tk, NULL);
	pthread_join(tr, NULL);
	CHECK_EQ(k.done, 1);
	CHECK_EQ(r.done, 1);
	tfs_close(&t);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_all);
	T_RUN(test_inode_dir);
	T_RUN(test_inode_defer);
	T_RUN(test_remove_waits);
	return t_done();
}
