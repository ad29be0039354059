/*
 * test_dir.c — directories through fs.h on a RAM device: many entries
 * (multi-level trees), lookup of each, readdir returning every entry
 * exactly once, readdir cookies that stay valid while entries are added
 * and removed, readdirplus lookup references (and none for the entries
 * FS_READDIR_BARE sends bare), and persistence.
 */
#include "tests/unit/fs_testutil.h"
#include "tests/unit/harness.h"

#include <dirent.h>

#define NFILES 5000

struct collect {
	unsigned char *seen;	/* per index: times seen */
	unsigned n, dots, limit, other;
	uint64_t last;
};

static int collect_cb(void *arg, const struct fs_dirent *de,
		      const struct fs_attr *attr)
{
	struct collect *c = arg;
	char name[FS_NAME_MAX + 1];
	unsigned idx;

	(void)attr;
	if (c->limit > 0 && c->n >= c->limit)
		return 1;
	c->n++;
	c->last = de->next;
	memcpy(name, de->name, de->namelen);
	name[de->namelen] = '\0';
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		c->dots++;
		return 0;
	}
	if (sscanf(name, "file-%u", &idx) == 1 && idx < NFILES)
		c->seen[idx]++;
	else
		c->other++;
	return 0;
}

static void test_many_entries(void)
{
	struct tfs t;
	struct collect c;
	char name[64];
	int64_t d;
	unsigned bad = 0;

	REQUIRE(tfs_open(&t, 128) == 0);
	d = tfs_mkdir(&t, t.root, "big");
	REQUIRE(d > 0);
	for (unsigned i = 0; i < NFILES; i++) {
		snprintf(name, sizeof(name), "file-%u", i);
		if (tfs_creat(&t, (uint64_t)d, name, 0644) <= 0)
			bad++;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(tfs_stat(&t, (uint64_t)d).size, NFILES);
	REQUIRE(tfs_remount(&t) == 0);
	for (unsigned i = 0; i < NFILES; i++) {
		snprintf(name, sizeof(name), "file-%u", i);
		if (tfs_lookup(&t, (uint64_t)d, name) <= 0)
			bad++;
	}
	CHECK_EQ(bad, 0);
	memset(&c, 0, sizeof(c));
	c.seen = calloc(NFILES, 1);
	REQUIRE(c.seen != NULL);
	CHECK_EQ(fs_readdir(t.fs, (uint64_t)d, 0, 0, collect_cb, &c), 0);
	CHECK_EQ(c.dots, 2);
	CHECK_EQ(c.other, 0);
	for (unsigned i = 0; i < NFILES; i++)
		bad += c.seen[i] != 1;
	CHECK_EQ(bad, 0);
	/* remove half, the rest stays findable */
	for (unsigned i = 0; i < NFILES; i += 2) {
		snprintf(name, sizeof(name), "file-%u", i);
		if (fs_unlink(t.fs, tfs_cred(&t), (uint64_t)d, name) != 0)
			bad++;
	}
	CHECK_EQ(bad, 0);
	for (unsigned i = 1; i < NFILES; i += 2) {
		snprintf(name, sizeof(name), "file-%u", i);
		if (tfs_lookup(&t, (uint64_t)d, name) <= 0)
			bad++;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(tfs_stat(&t, (uint64_t)d).size, NFILES / 2);
	free(c.seen);
	tfs_close(&t);
}

/* Read a directory in small batches while entries come and go: every
 * entry present throughout is returned exactly once. */
static void test_stable_cookies(void)
{
	struct tfs t;
	struct collect c;
	char name[64];
	uint64_t cookie = 0, seed = t_seed(), s = seed | 1;
	int64_t d;
	unsigned bad = 0, rounds = 0;

	REQUIRE(tfs_open(&t, 64) == 0);
	d = tfs_mkdir(&t, t.root, "d");
	REQUIRE(d > 0);
	for (unsigned i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "file-%u", i);
		tfs_creat(&t, (uint64_t)d, name, 0644);
	}
	memset(&c, 0, sizeof(c));
	c.seen = calloc(NFILES, 1);
	REQUIRE(c.seen != NULL);
	for (;;) {
		unsigned before = c.n;

		c.limit = c.n + 37;
		CHECK_EQ(fs_readdir(t.fs, (uint64_t)d, cookie, 0, collect_cb,
				    &c), 0);
		if (c.n == before)
			break;
		cookie = c.last;
		/* churn: add entries >= 1000, remove them again */
		for (unsigned k = 0; k < 5; k++) {
			unsigned idx = 1000 + (unsigned)(trand(&s) % 3000);

			snprintf(name, sizeof(name), "file-%u", idx);
			if (trand(&s) & 1)
				tfs_creat(&t, (uint64_t)d, name, 0644);
			else
				fs_unlink(t.fs, tfs_cred(&t), (uint64_t)d,
					  name);
		}
		rounds++;
	}
	CHECK(rounds > 20);
	for (unsigned i = 0; i < 1000; i++)
		bad += c.seen[i] != 1;
	CHECK_EQ(bad, 0);
	for (unsigned i = 1000; i < NFILES; i++)
		bad += c.seen[i] > 1;
	CHECK_EQ(bad, 0);
	free(c.seen);
	tfs_close(&t);
}

struct plus {
	unsigned entries, with_attr;
	uint64_t ino;
};

static int plus_cb(void *arg, const struct fs_dirent *de,
		   const struct fs_attr *attr)
{
	struct plus *p = arg;

	p->entries++;
	if (attr != NULL) {
		p->with_attr++;
		p->ino = attr->ino;
		if (attr->ino != de->ino)
			p->with_attr += 100;
	}
	return 0;
}

static void test_readdirplus(void)
{
	struct tfs t;
	struct plus p = { 0 };
	int64_t f;

	REQUIRE(tfs_open(&t, 64) == 0);
	f = tfs_creat(&t, t.root, "only", 0644);
	REQUIRE(f > 0);
	CHECK_EQ(fs_readdir(t.fs, t.root, 0, FS_READDIR_PLUS, plus_cb, &p), 0);
	CHECK_EQ(p.entries, 3);
	CHECK_EQ(p.with_attr, 1);
	CHECK_EQ(p.ino, (uint64_t)f);
	CHECK_EQ(fs_readdir(t.fs, (uint64_t)f, 0, 0, plus_cb, &p), -ENOTDIR);
	tfs_close(&t);
}

/* FS_READDIR_BARE: an entry a readdirplus just handed out comes bare the
 * second time (within FS_LISTED_FRESH_MS: up to 3 tries, should the
 * machine stall between them) and takes no reference; a file only
 * created (never listed) and a plain FS_READDIR_PLUS come with
 * attributes. */
struct bare {
	uint64_t ino;	     /* the file watched */
	unsigned with, bare; /* its entries with / without attributes */
};

static int bare_cb(void *arg, const struct fs_dirent *de,
		   const struct fs_attr *attr)
{
	struct bare *w = arg;

	if (de->ino == w->ino && attr != NULL)
		w->with++;
	else if (de->ino == w->ino)
		w->bare++;
	return 0;
}

static void test_readdir_bare(void)
{
	const unsigned f = FS_READDIR_PLUS | FS_READDIR_BARE;
	struct bare w = {0};
	struct tfs t;
	int64_t a;

	REQUIRE(tfs_open(&t, 64) == 0);
	a = tfs_creat(&t, t.root, "a", 0644);
	REQUIRE(a > 0);
	w.ino = (uint64_t)a;
	CHECK_EQ(fs_readdir(t.fs, t.root, 0, f, bare_cb, &w), 0);
	CHECK_EQ(w.with, 1); /* created, never listed: attributes */
	for (int i = 0; i < 3 && w.bare == 0; i++) {
		CHECK_EQ(fs_readdir(t.fs, t.root, 0, f, bare_cb, &w), 0);
		if (w.bare == 0) /* stalled past the bound: list again */
			CHECK_EQ(fs_readdir(t.fs, t.root, 0, f, bare_cb, &w),
				 0);
	}
	CHECK_EQ(w.bare, 1);
	CHECK_EQ(fs_readdir(t.fs, t.root, 0, FS_READDIR_PLUS, bare_cb, &w), 0);
	/* references: the create's and one per entry with attributes,
	 * none for a bare one */
	fs_forget(t.fs, w.ino, w.with);
	CHECK(fs_ino_held(t.fs, w.ino));
	fs_forget(t.fs, w.ino, 1);
	CHECK(!fs_ino_held(t.fs, w.ino));
	/* forgotten: the next listing hands it out again */
	w.with = w.bare = 0;
	CHECK_EQ(fs_readdir(t.fs, t.root, 0, f, bare_cb, &w), 0);
	CHECK_EQ(w.with, 1);
	tfs_close(&t);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_many_entries);
	T_RUN(test_stable_cookies);
	T_RUN(test_readdirplus);
	T_RUN(test_readdir_bare);
	return t_done();
}
