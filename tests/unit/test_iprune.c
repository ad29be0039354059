/*
 * test_iprune.c — the in-core inode bound (fs_iprune.c) on a RAM device
 * with a recording sink that plays the kernel: inode_max=16, 40 files
 * looked up (created) one by one, the first kept open, the second looked
 * up again before the bound is reached. The worker asks the sink to
 * forget the least recently used (the third file first, the second
 * after the tenth), never the open one; the test forgets what it was
 * asked (the kernel's FORGETs) until the table is within the bound.
 * Without a sink nothing is asked and the rounds are counted refused.
 * Waits are bounded (10 s per ask) but assert no time.
 */
#include "fusefs/namespace/fs_ns.h"
#include "lockmgr/cv_wait.h"
#include "tests/unit/fs_testutil.h"
#include "tests/unit/harness.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#define NFILES 40
#define MAX 16

struct sink {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t asked[4096];
	unsigned n;
};

static int s_forget(void *arg, const uint64_t *inos, size_t n)
{
	struct sink *s = arg;

	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < n && s->n < 4096; i++)
		s->asked[s->n++] = inos[i];
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static const struct fs_inval_ops sink_ops = {
    .forget = s_forget,
};

/* Wait (at most 10 s) for more than @have asks; the count now. */
static unsigned wait_asked(struct sink *s, unsigned have)
{
	uint64_t dl = cvw_deadline_ms(10000);
	unsigned n;

	pthread_mutex_lock(&s->mu);
	while (s->n <= have && cvw_wait_until(&s->cv, &s->mu, dl) == 0)
		;
	n = s->n;
	pthread_mutex_unlock(&s->mu);
	return n;
}

/* The prune thread counts a round's asks (iprune_asked) after the sink
 * took them: wait (at most 10 s) until the count reaches @n. */
static uint64_t asked_stat(struct tfs *t, uint64_t n)
{
	const uint64_t *v = &t->fs->ns->st.iprune_asked;
	uint64_t dl = cvw_deadline_ms(10000);

	while (__atomic_load_n(v, __ATOMIC_RELAXED) < n && cvw_now_ns() < dl)
		usleep(1000);
	return __atomic_load_n(v, __ATOMIC_RELAXED);
}

static int index_of(struct sink *s, uint64_t ino)
{
	int ret = -1;

	pthread_mutex_lock(&s->mu);
	for (unsigned i = 0; i < s->n && ret < 0; i++)
		if (s->asked[i] == ino)
			ret = (int)i;
	pthread_mutex_unlock(&s->mu);
	return ret;
}

static size_t records(struct tfs *t)
{
	size_t n;

	pthread_mutex_lock(&t->fs->ns->tbl_lock);
	n = t->fs->ns->count;
	pthread_mutex_unlock(&t->fs->ns->tbl_lock);
	return n;
}

static int mount_bounded(struct tfs *t)
{
	struct fs_opts o;

	fs_opts_init(&o);
	o.cache_mb = 8;
	o.inode_max = MAX;
	if (tfs_format(t, 64) < 0)
		return -1;
	return tfs_mount_opts(t, &o);
}

static void test_prune(void)
{
	struct tfs t;
	struct sink s = {.n = 0};
	int64_t f[NFILES];
	char name[16];
	unsigned n = 0, done = 0;

	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cv, NULL);
	REQUIRE(mount_bounded(&t) == 0);
	fs_set_inval(t.fs, &sink_ops, &s);
	for (int i = 0; i < NFILES; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		f[i] = tfs_creat(&t, t.root, name, 0644);
		REQUIRE(f[i] > 0);
		if (i == 0)
			REQUIRE(fs_open(t.fs, tfs_cred(&t), (uint64_t)f[0],
					O_RDONLY) == 0);
		if (i == 9) /* f1 used again: after f9 in the LRU */
			REQUIRE(tfs_lookup(&t, t.root, "f1") == f[1]);
	}
	/* play the kernel: forget what was asked until within the bound */
	while (records(&t) > MAX) {
		n = wait_asked(&s, n);
		if (n == done)
			break; /* not asked in 10 s: fails below */
		for (; done < n; done++)
			fs_forget(t.fs, s.asked[done], 1);
	}
	CHECK(records(&t) <= MAX);
	CHECK(n > 0);
	CHECK(n > 0 && s.asked[0] == (uint64_t)f[2]);
	CHECK_EQ(index_of(&s, (uint64_t)f[0]), -1); /* open: never */
	CHECK(index_of(&s, (uint64_t)f[1]) < 0 ||
	      index_of(&s, (uint64_t)f[1]) > index_of(&s, (uint64_t)f[9]));
	CHECK(asked_stat(&t, n) >= n);
	/* the open file still works */
	CHECK_EQ(tfs_stat(&t, (uint64_t)f[0]).ino, (uint64_t)f[0]);
	fs_release(t.fs, (uint64_t)f[0]);
	fs_set_inval(t.fs, NULL, NULL);
	tfs_close(&t);
}

/* No sink (no FUSE session): the rounds are refused and counted, the
 * records stay. */
static void test_refused(void)
{
	struct tfs t;
	char name[16];
	int i;

	REQUIRE(mount_bounded(&t) == 0);
	for (i = 0; i < NFILES; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		REQUIRE(tfs_creat(&t, t.root, name, 0644) > 0);
	}
	for (i = 0; i < 1000 && __atomic_load_n(&t.fs->ns->st.iprune_refused,
						__ATOMIC_RELAXED) == 0;
	     i++)
		usleep(10000);
	CHECK(t.fs->ns->st.iprune_refused > 0);
	CHECK_EQ(t.fs->ns->st.iprune_asked, 0u);
	CHECK_EQ(records(&t), (size_t)NFILES);
	tfs_close(&t);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_prune);
	T_RUN(test_refused);
	return t_done();
}
