/*
 * test_crash.c — simulated power loss at many write indices.
 *
 * The filesystem is driven as a library (fs.h) on a fault device
 * (blockdev/bd.h: bd_fault_open over a RAM device). A seeded workload
 * (--seed) creates, writes, overwrites, truncates, renames and unlinks
 * files (half of them still open: orphans) in a tree of directories and
 * now and then fsyncs one; a file whose
 * fs_fsync() returned 0 is "frozen": the workload never touches it again
 * and its name and content must survive any later crash.
 *
 * A dry run counts the device writes W of the whole workload. Then for
 * crash points n = 1 .. W+1 (about 80 of them, evenly spread, every
 * other one a torn write instead of a clean cut) the same workload runs
 * on a fresh copy of the image with the device set to die at write n.
 * What survived must then:
 *  1. check clean with fsck BEFORE any mount (fsck applies the committed
 *     journal transactions in memory, as replay will);
 *  1b. at every other crash point, repair with fsck -y first: it replays
 *     the journal for real and releases the orphans (and finds nothing
 *     else to fix), after which fsck sees no transaction left and the
 *     image is clean;
 *  2. mount (journal replay, orphan reclaim) and show every frozen file
 *     with its exact content;
 *  3. unmount cleanly and check clean with fsck again.
 * Both data=ordered and data=writeback mounts are tested. Failures print
 * the crash point and the seed.
 *
 * Then (test_unwritten_*, test_cow_writeback) power loss at EVERY write
 * of a workload writing into a preallocated (unwritten) file, or into a
 * clone (copy on write), laid over blocks full of stale bytes: each byte
 * read back is the last fsync'ed one or a later write's, never stale,
 * and the clone's source never changes.
 */
#include "tests/unit/harness.h"
#include "tests/unit/fs_testutil.h"
#include "tests/unit/core_fixture.h"

#include "fusefs/fsck/fs_fsck.h"

#include <fcntl.h>

#define IMG_MB 48
#define NOPS 160
#define MAXFILES 256
#define MAXDIRS 24
#define FMAX 65536

struct mfile {
	int live, frozen;
	int dir;		/* index in dirs[] */
	char name[32];
	uint64_t ino;
	size_t size;
	uint8_t *data;
};

struct work {
	uint64_t rng;
	struct fs *fs;
	struct bd_fault *fault;	/* NULL: no crash checks */
	struct fs_cred cred;
	uint64_t dir_ino[MAXDIRS];
	char dir_path[MAXDIRS][64];
	int ndirs;
	struct mfile f[MAXFILES];
	int nf;
	int nfrozen;
};

static uint64_t rnd(struct work *w)
{
	return t_splitmix(&w->rng);
}

static int dead(struct work *w)
{
	return w->fault != NULL && bd_fault_crashed(w->fault);
}

static enum fs_data_mode data_mode;	/* of the mounts under test */

static int mount_on(struct bd_dev *bd, struct fs **out)
{
	struct fs_opts o;
	char err[256] = "";
	int ret;

	fs_opts_init(&o);
	o.cache_mb = 8;
	o.data = data_mode;
	ret = fs_mount_bd(bd, &o, out, err, sizeof(err));
	if (ret < 0)
		fprintf(stderr, "  mount: %d %s\n", ret, err);
	return ret;
}

static int fsck_clean(struct bd_dev *bd, const char *when)
{
	struct fs_fsck_opts o = { .out = NULL };
	struct fs_fsck_result r;

	if (fs_fsck_run(bd, &o, &r) < 0 || r.errors != 0) {
		fprintf(stderr, "  fsck %s: %llu errors:\n", when,
			(unsigned long long)r.errors);
		o.out = stderr;
		o.max_report = 8;
		fs_fsck_run(bd, &o, &r);
		return 0;
	}
	return 1;
}

/* fsck -y on a crashed image: replays the journal for real (nothing
 * else to fix), after which the check sees no transaction left. */
static unsigned fsck_y_runs, fsck_y_tx, fsck_y_orphans;	/* summary */

static int fsck_replays(struct bd_dev *bd)
{
	struct fs_fsck_opts o = { .out = NULL, .repair = 1 };
	struct fs_fsck_result r;
	unsigned ntx;

	if (fs_fsck_run(bd, &o, &r) < 0 || r.errors != 0 || r.fixed != 0 ||
	    r.replayed_tx != r.journal_tx) {
		fprintf(stderr, "  fsck -y: %llu errors, %llu fixed, %u of %u "
			"transactions replayed\n",
			(unsigned long long)r.errors,
			(unsigned long long)r.fixed, r.replayed_tx,
			r.journal_tx);
		return 0;
	}
	ntx = r.journal_tx;
	fsck_y_runs++;
	fsck_y_tx += ntx;
	fsck_y_orphans += (unsigned)r.orphans_freed;
	o.repair = 0;
	if (!fsck_clean(bd, "after fsck -y"))
		return 0;
	if (fs_fsck_run(bd, &o, &r) < 0 || r.journal_tx != 0) {
		fprintf(stderr, "  fsck -y left %u of %u transactions\n",
			r.journal_tx, ntx);
		return 0;
	}
	return 1;
}

/* ---- the workload ---- */

static void fill(struct work *w, uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(rnd(w) >> 32);
}

static int write_all(struct work *w, struct mfile *m, size_t off,
		     size_t len)
{
	for (size_t done = 0; done < len;) {
		size_t n = len - done > 16384 ? 16384 : len - done;
		ssize_t r = fs_write(w->fs, &w->cred, m->ino,
				     m->data + off + done, n, off + done);

		if (r != (ssize_t)n)
			return r < 0 ? (int)r : -EIO;
		done += n;
	}
	return 0;
}

/* A live, not frozen file, or NULL. */
static struct mfile *pick_file(struct work *w)
{
	int start = w->nf ? (int)(rnd(w) % w->nf) : 0;

	for (int i = 0; i < w->nf; i++) {
		struct mfile *m = &w->f[(start + i) % w->nf];

		if (m->live && !m->frozen)
			return m;
	}
	return NULL;
}

static int op_create(struct work *w, int i)
{
	struct mfile *m;
	struct fs_attr a;
	int ret;

	if (w->nf == MAXFILES)
		return 0;
	m = &w->f[w->nf++];
	m->dir = (int)(rnd(w) % w->ndirs);
	snprintf(m->name, sizeof(m->name), "f%d", i);
	m->size = (size_t)(rnd(w) % 4 ? rnd(w) % 6000 : rnd(w) % FMAX);
	m->data = calloc(1, FMAX);
	if (m->data == NULL)
		return -ENOMEM;
	fill(w, m->data, m->size);
	ret = fs_create(w->fs, &w->cred, w->dir_ino[m->dir], m->name, 0644,
			O_RDWR, &a);
	if (ret < 0)
		return ret;
	m->ino = a.ino;
	m->live = 1;
	ret = write_all(w, m, 0, m->size);
	fs_release(w->fs, m->ino);
	return ret;
}

static int op_overwrite(struct work *w, struct mfile *m)
{
	size_t off = (size_t)(rnd(w) % FMAX), len = (size_t)(rnd(w) % 9000);
	int ret;

	if (off + len > FMAX)
		len = FMAX - off;
	fill(w, m->data + off, len);
	if (off > m->size)
		memset(m->data + m->size, 0, off - m->size);
	ret = write_all(w, m, off, len);
	if (off + len > m->size)
		m->size = off + len;
	return ret;
}

static int op_truncate(struct work *w, struct mfile *m)
{
	struct fs_attr a = { .size = rnd(w) % FMAX }, out;

	if (a.size < m->size)
		memset(m->data + a.size, 0, m->size - a.size);
	m->size = a.size;
	return fs_setattr(w->fs, &w->cred, m->ino, &a, FS_SET_SIZE, &out);
}

static int op_rename(struct work *w, struct mfile *m, int i)
{
	int nd = (int)(rnd(w) % w->ndirs);
	char nn[32];
	int ret;

	snprintf(nn, sizeof(nn), "r%d", i);
	ret = fs_rename(w->fs, &w->cred, w->dir_ino[m->dir], m->name,
			w->dir_ino[nd], nn, 0);
	if (ret == 0) {
		m->dir = nd;
		snprintf(m->name, sizeof(m->name), "%s", nn);
	}
	return ret;
}

/* Half the time the file stays open past its unlink (never released):
 * an orphan that recovery must reclaim. */
static int op_unlink(struct work *w, struct mfile *m)
{
	int ret;

	m->live = 0;
	if (rnd(w) % 2) {
		ret = fs_open(w->fs, &w->cred, m->ino, O_RDONLY);
		if (ret < 0)
			return ret;
	}
	return fs_unlink(w->fs, &w->cred, w->dir_ino[m->dir], m->name);
}

static int op_fsync(struct work *w, struct mfile *m)
{
	int ret = fs_fsync(w->fs, m->ino, 0);

	if (ret == 0) {
		m->frozen = 1;
		w->nfrozen++;
	}
	return ret;
}

static int op_mkdir(struct work *w, int i)
{
	struct fs_attr a;
	int p = (int)(rnd(w) % w->ndirs), ret;
	char name[32], path[64];

	if (w->ndirs == MAXDIRS)
		return 0;
	snprintf(name, sizeof(name), "s%d", i);
	ret = fs_mkdir(w->fs, &w->cred, w->dir_ino[p], name, 0755, &a);
	if (ret < 0)
		return ret;
	w->dir_ino[w->ndirs] = a.ino;
	memcpy(path, w->dir_path[p], sizeof(path));
	snprintf(w->dir_path[w->ndirs], sizeof(w->dir_path[0]), "%.30s/%s",
		 path, name);
	w->ndirs++;
	return 0;
}

static int one_op(struct work *w, int i)
{
	unsigned r = (unsigned)(rnd(w) % 12);
	struct mfile *m = pick_file(w);

	if (r < 4 || m == NULL)
		return op_create(w, i);
	switch (r) {
	case 4: return op_overwrite(w, m);
	case 5: return op_truncate(w, m);
	case 6: return op_rename(w, m, i);
	case 7: return op_unlink(w, m);
	case 8:
	case 9: return op_fsync(w, m);
	case 10: return op_mkdir(w, i);
	default: return op_overwrite(w, m);
	}
}

/* Run the workload until done or the device dies. 0, or -errno of an
 * operation that failed while the device was alive. */
static int workload(struct work *w)
{
	w->ndirs = 1;
	w->dir_ino[0] = fs_root(w->fs);
	w->dir_path[0][0] = '\0';
	for (int i = 0; i < 3; i++) {
		int ret = op_mkdir(w, 1000 + i);

		if (ret < 0 && !dead(w)) {
			fprintf(stderr, "  mkdir failed: %d\n", ret);
			return ret;
		}
		if (ret < 0)
			return 0;
	}
	for (int i = 0; i < NOPS; i++) {
		int ret = one_op(w, i);

		if (dead(w))
			return 0;
		if (ret < 0) {
			fprintf(stderr, "  op %d failed: %d\n", i, ret);
			return ret;
		}
	}
	return 0;
}

static void work_free(struct work *w)
{
	for (int i = 0; i < w->nf; i++)
		free(w->f[i].data);
	memset(w, 0, sizeof(*w));
}

/* ---- checks after the crash ---- */

static int check_frozen(struct work *w, struct fs *fs)
{
	uint8_t *buf = malloc(FMAX + 1);
	int ok = 1;

	if (buf == NULL)
		return 0;
	for (int i = 0; i < w->nf; i++) {
		struct mfile *m = &w->f[i];
		struct fs_attr a;
		ssize_t n;

		if (!m->frozen)
			continue;
		/* directories are never renamed: the ino is stable */
		if (fs_lookup(fs, w->dir_ino[m->dir], m->name, &a) != 0) {
			fprintf(stderr, "  fsync'ed %s/%s is missing\n",
				w->dir_path[m->dir], m->name);
			ok = 0;
			continue;
		}
		n = fs_read(fs, a.ino, buf, FMAX + 1, 0);
		if (a.size != m->size || n != (ssize_t)m->size ||
		    memcmp(buf, m->data, m->size) != 0) {
			fprintf(stderr, "  fsync'ed %s/%s: size %llu read %zd,"
				" expected %zu, or content differs\n",
				w->dir_path[m->dir], m->name,
				(unsigned long long)a.size, n, m->size);
			ok = 0;
		}
		fs_forget(fs, a.ino, 1);
	}
	free(buf);
	return ok;
}

static struct bd_dev *make_template(void)
{
	struct fs_mkfs_params p;
	struct bd_dev *bd;
	char why[256] = "";

	if (bd_ram_open((uint64_t)IMG_MB << 20, &bd) < 0)
		return NULL;
	fs_mkfs_defaults(&p);
	p.journal_mb = 4;
	p.rgrp_mb = 16;
	p.now = 1700000000;
	if (fs_mkfs(bd, &p, why, sizeof(why)) < 0) {
		fprintf(stderr, "mkfs: %s\n", why);
		bd_close(bd);
		return NULL;
	}
	return bd;
}

/* One run with a crash at write @n (0: no crash, count writes). Returns
 * 1 if every check passed; *writes = writes issued (dry run). */
static int crash_run(struct bd_dev *tmpl, uint64_t seed, uint64_t n,
		     int tear, uint64_t *writes)
{
	static struct work w;
	struct bd_dev *lower, *bd, *after;
	struct fs *fs2;
	int ok = 1;

	memset(&w, 0, sizeof(w));
	w.rng = seed;
	lower = cf_ram_copy(tmpl);
	if (lower == NULL || bd_fault_open(lower, &bd, &w.fault) < 0)
		return 0;
	if (mount_on(bd, &w.fs) < 0) {
		bd_close(bd);
		return 0;
	}
	if (n > 0 && tear)
		bd_fault_tear_nth(w.fault, n, (size_t)(seed % 8) * 512);
	else if (n > 0)
		bd_fault_crash_nth(w.fault, n);
	if (workload(&w) < 0)
		ok = 0;
	if (writes != NULL)
		*writes = bd_fault_writes(w.fault);
	if (!bd_fault_crashed(w.fault))
		bd_fault_crash(w.fault, 0);
	/* waits for data writes still in flight (they fail on the dead
	 * device), frees everything, writes nothing */
	fs_abandon(w.fs);
	after = cf_ram_copy(lower);
	bd_close(bd);
	if (after == NULL) {
		work_free(&w);
		return 0;
	}
	ok &= fsck_clean(after, "before mount (journal overlay)");
	if (n % 2 == 1)
		ok &= fsck_replays(after);
	if (mount_on(after, &fs2) < 0) {
		ok = 0;
	} else {
		ok &= check_frozen(&w, fs2);
		if (fs_unmount(fs2) != 0) {
			fprintf(stderr, "  unmount after recovery failed\n");
			ok = 0;
		}
		ok &= fsck_clean(after, "after recovery");
	}
	bd_close(after);
	if (n == 0)
		printf("  dry run: %d fsync'ed files, %d files, %d dirs\n",
		       w.nfrozen, w.nf, w.ndirs);
	work_free(&w);
	return ok;
}

static void power_loss_points(void)
{
	struct bd_dev *tmpl = make_template();
	uint64_t seed = t_seed(), total = 0, step;
	unsigned trials = 0, failures = 0;

	fsck_y_runs = fsck_y_tx = fsck_y_orphans = 0;

	REQUIRE(tmpl != NULL);
	if (!crash_run(tmpl, seed, 0, 0, &total)) {
		CHECK(!"dry run failed");
		bd_close(tmpl);
		return;
	}
	CHECK(total > 10);
	step = total / 80 ? total / 80 : 1;
	for (uint64_t n = 1; n <= total + 1; n += step) {
		int tear = trials % 2;

		if (!crash_run(tmpl, seed, n, tear, NULL)) {
			fprintf(stderr, "  FAILED: %s at write %llu of %llu "
				"(seed %llu)\n", tear ? "torn write" : "crash",
				(unsigned long long)n,
				(unsigned long long)total,
				(unsigned long long)seed);
			failures++;
		}
		trials++;
	}
	printf("  %u crash points over %llu writes, %u failed; fsck -y "
	       "replayed %u transactions and released %u orphans at %u of "
	       "them\n", trials, (unsigned long long)total, failures,
	       fsck_y_tx, fsck_y_orphans, fsck_y_runs);
	CHECK(fsck_y_tx > 0);
	CHECK_EQ(failures, 0);
	bd_close(tmpl);
}

static void test_power_loss_ordered(void)
{
	data_mode = FS_DATA_ORDERED;
	power_loss_points();
}

/* fsync means durable in data=writeback too */
static void test_power_loss_writeback(void)
{
	data_mode = FS_DATA_WRITEBACK;
	power_loss_points();
}

/* ---- unwritten extent conversion ---- */

/*
 * A file preallocated (unwritten) over blocks full of stale bytes, then
 * written at random places, fsync'ed now and then; power fails at every
 * write index of that workload. After recovery each byte must be what
 * the last fsync left if nothing was written there since, else that or
 * a byte one of the later writes put there: never a stale byte, never a
 * zero where fsync'ed data was.
 */
#define UW_SIZE (1u << 20)
#define UW_OPS 24
#define UW_STALE 0xEE
#define UW_SRC 0xAA /* the cloned source's bytes (copy on write) */

struct uw {
	uint8_t synced[UW_SIZE]; /* content at the last fsync */
	uint32_t wrote[UW_SIZE]; /* ops that wrote here since */
};

/* Never 0, never UW_STALE. */
static uint8_t uw_byte(unsigned k, uint64_t pos)
{
	return (uint8_t)((pos % 199 + k) % 200 + 1);
}

/* "u" clones all of "src" (UW_SIZE bytes of UW_SRC): writes into it copy
 * on write, onto blocks full of stale bytes. *src = its inode. */
static int uw_clone(struct fs *fs, const struct fs_cred *cr, uint64_t ino,
		    uint64_t *src)
{
	static uint8_t buf[UW_SIZE];
	struct fs_attr a;
	int ret;

	memset(buf, UW_SRC, sizeof(buf));
	ret = fs_create(fs, cr, fs_root(fs), "src", 0644, O_RDWR, &a);
	if (ret == 0 && fs_write(fs, cr, a.ino, buf, UW_SIZE, 0) != UW_SIZE)
		ret = -EIO;
	if (ret == 0)
		ret = fs_clone_range(fs, cr, a.ino, 0, ino, 0, 0);
	if (ret == 0)
		ret = fs_sync(fs);
	*src = a.ino;
	return ret;
}

/* Fill the free space with stale bytes, free it, preallocate "u" (or,
 * with @src, make "u" a clone of "src"). */
static int uw_prepare(struct fs *fs, const struct fs_cred *cr, uint64_t *ino,
		      uint64_t *src)
{
	static uint8_t buf[1 << 20];
	struct fs_attr a;
	ssize_t n = sizeof(buf);
	int ret;

	memset(buf, UW_STALE, sizeof(buf));
	ret = fs_create(fs, cr, fs_root(fs), "stale", 0644, O_RDWR, &a);
	for (uint64_t off = 0; ret == 0 && n == sizeof(buf); off += n)
		n = fs_write(fs, cr, a.ino, buf, sizeof(buf), off);
	if (ret < 0 || (n < 0 && n != -ENOSPC))
		return ret < 0 ? ret : (int)n;
	fs_release(fs, a.ino);
	fs_forget(fs, a.ino, 1);
	ret = fs_unlink(fs, cr, fs_root(fs), "stale");
	if (ret == 0)
		ret = fs_sync(fs);
	if (ret == 0)
		ret = fs_create(fs, cr, fs_root(fs), "u", 0644, O_RDWR, &a);
	*ino = a.ino;
	if (ret == 0 && src != NULL)
		return uw_clone(fs, cr, a.ino, src);
	if (ret == 0)
		ret = fs_fallocate(fs, cr, a.ino, 0, 0, UW_SIZE);
	if (ret == 0)
		ret = fs_sync(fs);
	return ret;
}

/* Blocks of @ino's unwritten extents whose device bytes are stale. */
static uint64_t uw_stale_blocks(struct bd_dev *bd, uint64_t ino)
{
	struct fs_dinode *di = bd_buf_alloc(FS_BLOCK_SIZE);
	uint8_t *b = bd_buf_alloc(FS_BLOCK_SIZE);
	const struct fs_btree_nhdr *nh;
	const struct fs_btree_leaf_slot *sl;
	struct fs_extent_val v;
	uint64_t n = 0;

	if (di == NULL || b == NULL ||
	    bd_read(bd, di, FS_BLOCK_SIZE, ino * FS_BLOCK_SIZE) < 0)
		goto out;
	nh = (const void *)di->inline_area;
	sl = (const void *)(nh + 1);
	for (unsigned i = 0; nh->level == 0 && i < nh->nkeys; i++) {
		memcpy(&v, di->inline_area + sl[i].off, sizeof(v));
		for (uint32_t k = 0; (v.flags & FS_EXT_UNWRITTEN) && k < v.len;
		     k++)
			if (bd_read(bd, b, FS_BLOCK_SIZE,
				    (v.phys + k) * FS_BLOCK_SIZE) == 0 &&
			    b[0] == UW_STALE)
				n++;
	}
out:
	free(di);
	free(b);
	return n;
}

static int uw_workload(struct fs *fs, const struct fs_cred *cr, uint64_t ino,
		       uint64_t seed, struct uw *m, struct bd_fault *f,
		       uint8_t base)
{
	static uint8_t buf[40000];
	uint64_t rng = seed | 1;

	memset(m->synced, base, UW_SIZE);
	memset(m->wrote, 0, sizeof(m->wrote));
	for (unsigned k = 1; k <= UW_OPS && !bd_fault_crashed(f); k++) {
		uint64_t off = trand(&rng) % UW_SIZE;
		size_t len = 1 + trand(&rng) % sizeof(buf);
		ssize_t n;

		if (off + len > UW_SIZE)
			len = UW_SIZE - off;
		for (size_t i = 0; i < len; i++) {
			buf[i] = uw_byte(k, off + i);
			m->wrote[off + i] |= 1u << k;
		}
		n = fs_write(fs, cr, ino, buf, len, off);
		if (n != (ssize_t)len)
			return bd_fault_crashed(f) ? 0 : -EIO;
		if (k % 6 == 0 && fs_fsync(fs, ino, 0) == 0) {
			for (uint64_t p = 0; p < UW_SIZE; p++)
				if (m->wrote[p] != 0)
					m->synced[p] = uw_byte(
					    31 - (unsigned)__builtin_clz(
						     m->wrote[p]),
					    p);
			memset(m->wrote, 0, sizeof(m->wrote));
		}
	}
	return 0;
}

/* The clone's source is intact: every byte UW_SRC. */
static int uw_src_intact(struct fs *fs, uint64_t src)
{
	static uint8_t got[UW_SIZE];

	if (fs_read(fs, src, got, UW_SIZE, 0) != UW_SIZE)
		return 0;
	for (uint64_t p = 0; p < UW_SIZE; p++)
		if (got[p] != UW_SRC) {
			fprintf(stderr, "  source byte %llu is %#x\n",
				(unsigned long long)p, got[p]);
			return 0;
		}
	return 1;
}

/* Every byte: the fsync'ed one, or one a later write put there. */
static int uw_check(struct fs *fs, uint64_t ino, const struct uw *m)
{
	static uint8_t got[UW_SIZE];
	struct fs_attr a;

	if (fs_getattr(fs, ino, &a) < 0 || a.size != UW_SIZE ||
	    fs_read(fs, ino, got, UW_SIZE, 0) != UW_SIZE) {
		fprintf(stderr, "  preallocated file lost or short\n");
		return 0;
	}
	for (uint64_t p = 0; p < UW_SIZE; p++) {
		int ok = got[p] == m->synced[p];

		for (unsigned k = 1; !ok && k <= UW_OPS; k++)
			ok = (m->wrote[p] >> k & 1) && got[p] == uw_byte(k, p);
		if (!ok) {
			fprintf(stderr, "  byte %llu is %#x (fsync'ed %#x)%s\n",
				(unsigned long long)p, got[p], m->synced[p],
				got[p] == UW_STALE ? ": STALE" : "");
			return 0;
		}
	}
	return 1;
}

/* One run, crashing at write @n (0: none); *writes = writes issued.
 * @src: "u" is a clone of it (0: "u" was preallocated). */
static int uw_run(struct bd_dev *tmpl, uint64_t ino, uint64_t src,
		  uint64_t seed, uint64_t n, int tear, uint64_t *writes)
{
	static struct uw m;
	struct fs_cred cr = {.flags = FS_CRED_FSETID};
	struct bd_dev *lower, *bd, *after;
	struct bd_fault *f;
	struct fs *fs;
	int ok = 1;

	lower = cf_ram_copy(tmpl);
	if (lower == NULL || bd_fault_open(lower, &bd, &f) < 0)
		return 0;
	if (mount_on(bd, &fs) < 0) {
		bd_close(bd);
		return 0;
	}
	if (n > 0 && tear)
		bd_fault_tear_nth(f, n, (size_t)(n % 8) * 512);
	else if (n > 0)
		bd_fault_crash_nth(f, n);
	if (uw_workload(fs, &cr, ino, seed, &m, f, src ? UW_SRC : 0) < 0)
		ok = 0;
	if (writes != NULL)
		*writes = bd_fault_writes(f);
	if (!bd_fault_crashed(f))
		bd_fault_crash(f, 0);
	fs_abandon(fs);
	after = cf_ram_copy(lower);
	bd_close(bd);
	if (after == NULL)
		return 0;
	ok &= fsck_clean(after, "before mount");
	if (mount_on(after, &fs) < 0) {
		ok = 0;
	} else {
		ok &= uw_check(fs, ino, &m);
		ok &= src == 0 || uw_src_intact(fs, src);
		ok &= fs_unmount(fs) == 0;
		ok &= fsck_clean(after, "after recovery");
	}
	bd_close(after);
	return ok;
}

static void unwritten_points(int cow)
{
	struct fs_cred cr = {.flags = FS_CRED_FSETID};
	struct bd_dev *tmpl = make_template();
	uint64_t seed = t_seed(), total = 0, ino = 0, src = 0;
	unsigned failures = 0, trials = 0;
	struct fs *fs;

	REQUIRE(tmpl != NULL);
	REQUIRE(mount_on(tmpl, &fs) == 0);
	CHECK_EQ(uw_prepare(fs, &cr, &ino, cow ? &src : NULL), 0);
	CHECK_EQ(fs_unmount(fs), 0);
	/* the test means something only over stale blocks */
	CHECK(cow || uw_stale_blocks(tmpl, ino) > UW_SIZE / FS_BLOCK_SIZE / 2);
	if (!uw_run(tmpl, ino, src, seed, 0, 0, &total)) {
		CHECK(!"dry run failed");
		bd_close(tmpl);
		return;
	}
	for (uint64_t n = 1; n <= total + 1; n++, trials++) {
		if (uw_run(tmpl, ino, src, seed, n, (int)(n % 2), NULL))
			continue;
		fprintf(stderr,
			"  FAILED: %s at write %llu of %llu (seed "
			"%llu)\n",
			n % 2 ? "torn write" : "crash", (unsigned long long)n,
			(unsigned long long)total, (unsigned long long)seed);
		failures++;
	}
	printf("  %u crash points (every write of %llu), %u failed\n", trials,
	       (unsigned long long)total, failures);
	CHECK_EQ(failures, 0);
	bd_close(tmpl);
}

static void test_unwritten_ordered(void)
{
	data_mode = FS_DATA_ORDERED;
	unwritten_points(0);
}

/* conversions commit as data=ordered in data=writeback too */
static void test_unwritten_writeback(void)
{
	data_mode = FS_DATA_WRITEBACK;
	unwritten_points(0);
}

/* copy on write of a clone: the source never changes, the clone shows
 * its old bytes or new ones, never stale ones (data=writeback: COW
 * transactions commit as data=ordered too) */
static void test_cow_writeback(void)
{
	data_mode = FS_DATA_WRITEBACK;
	unwritten_points(1);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_power_loss_ordered);
	T_RUN(test_power_loss_writeback);
	T_RUN(test_unwritten_ordered);
	T_RUN(test_unwritten_writeback);
	T_RUN(test_cow_writeback);
	return t_done();
}
