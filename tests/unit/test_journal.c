/*
 * test_journal.c — transactions and the journal on RAM and fault devices:
 * commit then crash then replay reproduces the blocks; a garbled commit
 * record or image is not replayed (nor anything after it); replay is
 * idempotent (crash during replay, replay again); journal wrap-around with
 * forced checkpoints; revoked blocks are not overwritten by replay; a
 * power loss on the fault device keeps every synced transaction; group
 * commit from several threads; fsync waits for a commit the commit thread
 * is still writing; ro mount refuses a dirty journal; fsck
 * reads a crashed journal as replay does (fs_jscan.c): a torn tail is no
 * error, a bad image or one outside the filesystem inside the committed
 * range is reported by fsck and skipped by replay; a lock leaving the
 * node (fs_journal_sync_owner) ends its checkpoint with a checkpoint
 * record, one durability wait fewer than a header move, after which a
 * replay never writes an older image over a block another node wrote
 * home, and a lost or garbled record (power loss before any flush) still
 * mounts and keeps what was synced; records stop 256 blocks from the
 * header's tail, so a replay walks at most 255 blocks before the last
 * one (journal.replay_scanned).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fusefs/fsck/fs_fsck.h"
#include "fusefs/core/fs_core_priv.h"
#include "fusefs/core/fs_internal.h"
#include "core_fixture.h"
#include "harness.h"


/* Block content for (blk, version): an xattr block full of a pattern. */
static void pattern(void *d, uint64_t blk, uint32_t ver)
{
	struct fs_xattr_blk *x = d;

	x->owner = blk;
	x->count = ver;
	for (size_t i = 0; i < sizeof(x->data); i++)
		x->data[i] = (uint8_t)(blk * 13 + ver * 7 + i);
}

/* 1 if home block @blk on the device holds version @ver. */
static int home_has(struct bd_dev *bd, uint64_t blk, uint32_t ver)
{
	uint8_t *d = bd_buf_alloc(FS_BLOCK_SIZE), *e = bd_buf_alloc(FS_BLOCK_SIZE);
	int ok = 0;

	if (d != NULL && e != NULL &&
	    bd_read(bd, d, FS_BLOCK_SIZE, blk * FS_BLOCK_SIZE) == 0 &&
	    fs_blk_verify(d, FS_BT_XATTR, blk) == 0) {
		memcpy(e, d, FS_BLOCK_SIZE);
		pattern(e, blk, ver);
		ok = memcmp(d + 32, e + 32, FS_BLOCK_SIZE - 32) == 0;
	}
	free(d);
	free(e);
	return ok;
}

/* In one transaction: allocate @n blocks (if *blks[0] == 0) or rewrite
 * them, with version @ver. */
static int write_blocks(struct fs *fs, uint64_t *blks, unsigned n,
			uint32_t ver)
{
	struct fs_tx *tx;
	int ret;

	ret = fs_tx_begin(fs, n + 3 * fs_alloc_credits(fs), &tx);
	if (ret < 0)
		return ret;
	for (unsigned i = 0; i < n && ret == 0; i++) {
		struct fs_buf *b;

		if (blks[i] == 0) {
			uint32_t len;

			ret = fs_alloc(tx, 0, 1, 1, &blks[i], &len);
			if (ret == 0)
				ret = fs_buf_new(tx, blks[i], FS_BT_XATTR, &b);
		} else {
			ret = fs_buf_read(fs, blks[i], FS_BT_XATTR, &b);
			if (ret == 0)
				ret = fs_tx_write(tx, b);
		}
		if (ret == 0) {
			pattern(b->data, blks[i], ver);
			fs_buf_put(b);
		}
	}
	fs_tx_end(tx);
	return ret;
}

static int cache_has(struct fs *fs, uint64_t blk, uint32_t ver)
{
	struct fs_buf *b;
	int ok;

	if (fs_buf_read(fs, blk, FS_BT_XATTR, &b) < 0)
		return 0;
	ok = ((struct fs_xattr_blk *)b->data)->count == ver;
	fs_buf_put(b);
	return ok;
}

static void test_commit_replay(void)
{
	struct bd_dev *bd = cf_ram_fs(64, 4, 8);
	uint64_t blks[20] = { 0 };
	struct fs_core_stats st;
	struct fs *fs;
	int ok = 1;

	REQUIRE(bd != NULL);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	REQUIRE(write_blocks(fs, blks, 20, 1) == 0);
	REQUIRE(write_blocks(fs, blks, 10, 2) == 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	fs_core_stats_get(fs, &st);
	CHECK(st.commits >= 1);
	fs_core_abandon(fs);	/* crash: nothing written in place */
	for (int i = 0; i < 20; i++)
		ok &= !home_has(bd, blks[i], i < 10 ? 2 : 1);
	CHECK(ok);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	fs_core_stats_get(fs, &st);
	CHECK(st.replay_tx >= 1);
	ok = 1;
	for (int i = 0; i < 20; i++)
		ok &= home_has(bd, blks[i], i < 10 ? 2 : 1);
	CHECK(ok);
	CHECK_EQ(fs_core_unmount(fs), 0);
	/* clean: nothing to replay */
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	fs_core_stats_get(fs, &st);
	CHECK_EQ(st.replay_tx, 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* Find the log position of the commit record with the highest seq. */
static int64_t last_commit(struct bd_dev *bd, struct fs_sb *sb)
{
	uint8_t *d = bd_buf_alloc(FS_BLOCK_SIZE);
	uint64_t j0 = sb->journal_start, best_seq = 0;
	int64_t best = -1;

	for (uint64_t p = 1; p < sb->journal_blocks; p++) {
		const struct fs_blk_hdr *h = (void *)d;

		bd_read(bd, d, FS_BLOCK_SIZE, (j0 + p) * FS_BLOCK_SIZE);
		if (fs_blk_verify(d, FS_BT_JCOMMIT, j0 + p) == 0 &&
		    h->seq >= best_seq) {
			best_seq = h->seq;
			best = (int64_t)(j0 + p);
		}
	}
	free(d);
	return best;
}

static void flip(struct bd_dev *bd, uint64_t blk, unsigned off)
{
	uint8_t *d = bd_buf_alloc(FS_BLOCK_SIZE);

	bd_read(bd, d, FS_BLOCK_SIZE, blk * FS_BLOCK_SIZE);
	d[off] ^= 0x5a;
	bd_write(bd, d, FS_BLOCK_SIZE, blk * FS_BLOCK_SIZE, 0);
	free(d);
}

/* @where: 0 garble the last commit record, 1 garble its last image */
static void garbled_case(int where)
{
	struct bd_dev *bd = cf_ram_fs(64, 4, 8);
	uint64_t a[4] = { 0 }, b[4] = { 0 };
	struct fs *fs;
	struct fs_sb sb;
	int64_t c;

	REQUIRE(bd != NULL);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	sb = fs->sb;
	REQUIRE(write_blocks(fs, a, 4, 1) == 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	REQUIRE(write_blocks(fs, b, 4, 1) == 0);
	REQUIRE(write_blocks(fs, a, 4, 2) == 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	fs_core_abandon(fs);
	c = last_commit(bd, &sb);
	REQUIRE(c > 0);
	flip(bd, (uint64_t)(where == 0 ? c : c - 1), 2000);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	for (int i = 0; i < 4; i++) {
		CHECK(home_has(bd, a[i], 1));	/* first tx replayed */
		CHECK(!home_has(bd, b[i], 1));	/* second one not */
	}
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

static void test_garbled_commit(void)
{
	garbled_case(0);
}

static void test_garbled_image(void)
{
	garbled_case(1);
}

/* ---- fsck and replay read the journal alike (fs_jscan.c) ------------- */

/* Recompute the chained crc of the transaction closed by commit record
 * @c (absolute block; the transaction does not wrap) and reseal it. */
static void reseal_tx(struct bd_dev *bd, uint64_t c)
{
	uint8_t *d = bd_buf_alloc(FS_BLOCK_SIZE);
	struct fs_jcommit *cr = bd_buf_alloc(FS_BLOCK_SIZE);
	uint32_t crc = 0;

	bd_read(bd, cr, FS_BLOCK_SIZE, c * FS_BLOCK_SIZE);
	for (uint64_t b = c - cr->nblocks; b < c; b++) {
		bd_read(bd, d, FS_BLOCK_SIZE, b * FS_BLOCK_SIZE);
		crc = fs_crc32c(crc, d, FS_BLOCK_SIZE);
	}
	cr->tx_crc = crc;
	fs_blk_seal(cr, FS_BT_JCOMMIT, c, cr->hdr.seq);
	bd_write(bd, cr, FS_BLOCK_SIZE, c * FS_BLOCK_SIZE, 0);
	free(d);
	free(cr);
}

/* fsck of @bd: its output in @out (caller frees), the result in @r. */
static int fsck_out(struct bd_dev *bd, struct fs_fsck_result *r, char **out)
{
	struct fs_fsck_opts o = { .max_report = 1000 };
	size_t len;
	int ret;

	o.out = open_memstream(out, &len);
	if (o.out == NULL)
		return -ENOMEM;
	ret = fs_fsck_run(bd, &o, r);
	fclose(o.out);
	return ret;
}

/* A crashed image: tx 1 writes a[] (v1); tx 2 writes b[] (v1) and a[]
 * (v2). Returns the device and the absolute block of tx 2's commit. */
static struct bd_dev *two_tx_crash(uint64_t *a, uint64_t *b, int64_t *c)
{
	struct bd_dev *bd = cf_ram_fs(64, 4, 8);
	struct fs *fs;
	struct fs_sb sb;

	if (bd == NULL || (fs = cf_mount(bd, 16)) == NULL)
		return NULL;
	sb = fs->sb;
	if (write_blocks(fs, a, 4, 1) < 0 || fs_journal_sync(fs) < 0 ||
	    write_blocks(fs, b, 4, 1) < 0 || write_blocks(fs, a, 4, 2) < 0 ||
	    fs_journal_sync(fs) < 0)
		return NULL;
	fs_core_abandon(fs);
	*c = last_commit(bd, &sb);
	return *c > 0 ? bd : NULL;
}

/* 1 if fsck of @bd sees both transactions of two_tx_crash and reports
 * a problem whose message contains @what. */
static int fsck_says(struct bd_dev *bd, const char *what)
{
	struct fs_fsck_result r;
	char *out = NULL;
	int ok;

	ok = fsck_out(bd, &r, &out) == 0 && r.journal_tx == 2 &&
	     r.errors > 0 && strstr(out, what) != NULL;
	if (!ok)
		fprintf(stderr, "fsck (%u transactions) did not say '%s':\n%s",
			r.journal_tx, what, out != NULL ? out : "");
	free(out);
	return ok;
}

static void test_fsck_reads_journal(void)
{
	uint64_t a[4] = { 0 }, b[4] = { 0 };
	struct fs_fsck_result r;
	struct bd_dev *bd;
	struct fs *fs;
	char *out = NULL;
	int64_t c;

	REQUIRE((bd = two_tx_crash(a, b, &c)) != NULL);
	REQUIRE(fsck_out(bd, &r, &out) == 0);
	CHECK_EQ(r.journal_tx, 2);
	CHECK(strstr(out, "2 committed transaction(s)") != NULL);
	CHECK(strstr(out, "ERROR: journal") == NULL);
	free(out);
	/* a torn tail (garbled commit record) is the end of the log */
	flip(bd, (uint64_t)c, 2000);
	REQUIRE(fsck_out(bd, &r, &out) == 0);
	CHECK_EQ(r.journal_tx, 1);
	CHECK(strstr(out, "ERROR: journal") == NULL);
	free(out);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	for (int i = 0; i < 4; i++)
		CHECK(home_has(bd, a[i], 1) && !home_has(bd, b[i], 1));
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* An image of the committed range that fails its own checksum (the tx
 * crc resealed over it): fsck reports it, replay skips it, and both
 * apply the rest. */
static void test_fsck_bad_committed_image(void)
{
	uint64_t a[4] = { 0 }, b[4] = { 0 }, home;
	uint8_t *d = bd_buf_alloc(FS_BLOCK_SIZE);
	struct bd_dev *bd;
	struct fs *fs;
	int64_t c;
	int ok = 1;

	REQUIRE(d != NULL);
	REQUIRE((bd = two_tx_crash(a, b, &c)) != NULL);
	bd_read(bd, d, FS_BLOCK_SIZE, (uint64_t)(c - 1) * FS_BLOCK_SIZE);
	home = ((const struct fs_blk_hdr *)(const void *)d)->blkno;
	flip(bd, (uint64_t)c - 1, 2000);
	reseal_tx(bd, (uint64_t)c);
	CHECK(fsck_says(bd, "fails its checksum"));
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	for (int i = 0; i < 4; i++) {
		ok &= a[i] == home || home_has(bd, a[i], 2);
		ok &= b[i] == home || home_has(bd, b[i], 1);
	}
	CHECK(ok);
	CHECK(!home_has(bd, home, 1) && !home_has(bd, home, 2));
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
	free(d);
}

/* A bad image in tx 1 whose block tx 2 logs again: replay never writes
 * it (the later image wins), but fsck still reports it. */
static void test_fsck_bad_older_image(void)
{
	uint64_t a[4] = { 0 }, b[4] = { 0 };
	struct fs_jcommit *cr = bd_buf_alloc(FS_BLOCK_SIZE);
	struct bd_dev *bd;
	struct fs *fs;
	uint64_t c1;
	int64_t c;
	int ok = 1;

	REQUIRE(cr != NULL);
	REQUIRE((bd = two_tx_crash(a, b, &c)) != NULL);
	bd_read(bd, cr, FS_BLOCK_SIZE, (uint64_t)c * FS_BLOCK_SIZE);
	c1 = (uint64_t)c - cr->nblocks - 1;	/* tx 1's commit record */
	bd_read(bd, cr, FS_BLOCK_SIZE, c1 * FS_BLOCK_SIZE);
	REQUIRE(cr->hdr.type == FS_BT_JCOMMIT && cr->nblocks >= 5);
	flip(bd, c1 - 1, 2000);	/* an image tx 2 logs again */
	reseal_tx(bd, c1);
	CHECK(fsck_says(bd, "fails its checksum"));
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	for (int i = 0; i < 4; i++)
		ok &= home_has(bd, a[i], 2) && home_has(bd, b[i], 1);
	CHECK(ok);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
	free(cr);
}

/* A committed descriptor entry naming a block past the end: reported by
 * fsck, never written by replay. */
static void test_fsck_image_outside(void)
{
	uint64_t a[4] = { 0 }, b[4] = { 0 };
	struct fs_jdesc *jd = bd_buf_alloc(FS_BLOCK_SIZE);
	struct fs_jcommit *cr = bd_buf_alloc(FS_BLOCK_SIZE);
	struct bd_dev *bd;
	struct fs *fs;
	uint64_t db;
	int64_t c;

	REQUIRE(jd != NULL && cr != NULL);
	REQUIRE((bd = two_tx_crash(a, b, &c)) != NULL);
	bd_read(bd, cr, FS_BLOCK_SIZE, (uint64_t)c * FS_BLOCK_SIZE);
	db = (uint64_t)c - cr->nblocks;		/* tx 2's descriptor */
	bd_read(bd, jd, FS_BLOCK_SIZE, db * FS_BLOCK_SIZE);
	REQUIRE(jd->hdr.type == FS_BT_JDESC && jd->count > 0);
	jd->ent[jd->count - 1].blkno = 1ull << 40;
	fs_blk_seal(jd, FS_BT_JDESC, db, jd->hdr.seq);
	bd_write(bd, jd, FS_BLOCK_SIZE, db * FS_BLOCK_SIZE, 0);
	reseal_tx(bd, (uint64_t)c);
	CHECK(fsck_says(bd, "outside the filesystem"));
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);	/* replays the rest */
	CHECK(home_has(bd, b[0], 1));
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
	free(jd);
	free(cr);
}

static void test_replay_idempotent(void)
{
	struct bd_dev *bd = cf_ram_fs(64, 4, 8);
	uint64_t blks[30] = { 0 }, jhdr;
	uint8_t *saved = bd_buf_alloc(FS_BLOCK_SIZE);
	struct fs_core_stats st;
	struct fs *fs;

	REQUIRE(bd != NULL && saved != NULL);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	jhdr = fs->sb.journal_start;
	for (uint32_t v = 1; v <= 5; v++) {
		REQUIRE(write_blocks(fs, blks, 30 - 5 * (v - 1), v) == 0);
		CHECK_EQ(fs_journal_sync(fs), 0);
	}
	fs_core_abandon(fs);
	bd_read(bd, saved, FS_BLOCK_SIZE, jhdr * FS_BLOCK_SIZE);
	for (int round = 0; round < 3; round++) {
		/* replay, then "crash" before the header moved: restore it */
		REQUIRE((fs = cf_mount(bd, 16)) != NULL);
		fs_core_stats_get(fs, &st);
		CHECK_EQ(st.replay_tx, 5);
		fs_core_abandon(fs);
		bd_write(bd, saved, FS_BLOCK_SIZE, jhdr * FS_BLOCK_SIZE, 0);
	}
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	for (int i = 0; i < 30; i++) {
		uint32_t want = 1;

		for (uint32_t v = 1; v <= 5; v++)
			if (i < 30 - 5 * (int)(v - 1))
				want = v;
		CHECK(home_has(bd, blks[i], want));
	}
	CHECK_EQ(fs_core_unmount(fs), 0);
	free(saved);
	bd_close(bd);
}

static void test_wraparound(void)
{
	struct bd_dev *bd = cf_ram_fs(64, 1, 8);	/* 255-block log */
	uint64_t blks[200] = { 0 };
	uint32_t ver[200] = { 0 };
	struct fs_core_stats st;
	struct fs *fs;
	int ok = 1;

	t_rnd_seed(t_seed());
	REQUIRE(bd != NULL);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	for (int i = 0; i < 200; i += 20)
		REQUIRE(write_blocks(fs, blks + i, 20, 1) == 0);
	for (int i = 0; i < 200; i++)
		ver[i] = 1;
	for (int round = 0; round < 300; round++) {
		uint64_t pick[8];
		unsigned n = 1 + (unsigned)(t_rnd() % 8);

		for (unsigned k = 0; k < n; k++) {
			unsigned i = (unsigned)(t_rnd() % 200);

			pick[k] = blks[i];
			ver[i] = (uint32_t)round + 2;
		}
		REQUIRE(write_blocks(fs, pick, n, (uint32_t)round + 2) == 0);
		if (t_rnd() % 3 == 0)
			CHECK_EQ(fs_journal_sync(fs), 0);
		else if (t_rnd() % 3 == 0) /* a lock leaves: a record */
			CHECK_EQ(fs_journal_sync_owner(fs, (struct fs_owner){
				FS_OWNER_INODE, pick[0]}), 0);
	}
	CHECK_EQ(fs_journal_sync(fs), 0);
	fs_core_stats_get(fs, &st);
	printf("  commits %llu checkpoints %llu (journal-full %llu, records "
	       "%llu, header moves %llu)\n",
	       (unsigned long long)st.commits,
	       (unsigned long long)st.checkpoints,
	       (unsigned long long)st.commit_reason[FS_CR_JOURNAL],
	       (unsigned long long)st.ckpt_records,
	       (unsigned long long)st.ckpt_headers);
	CHECK(st.checkpoints > 0);
	CHECK(st.ckpt_records > 0 && st.ckpt_headers > 0);
	fs_core_abandon(fs);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	for (int i = 0; i < 200; i++)
		ok &= cache_has(fs, blks[i], ver[i]);
	CHECK(ok);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* A metadata block freed and then used for file data: replay of the old
 * journal image must not overwrite the data. */
static void test_revoke(void)
{
	struct bd_dev *bd = cf_ram_fs(64, 4, 8);
	uint64_t blk[1] = { 0 }, got;
	uint8_t *data = bd_buf_alloc(FS_BLOCK_SIZE);
	struct fs_buf *b;
	struct fs_tx *tx;
	struct fs *fs;
	uint32_t len;

	REQUIRE(bd != NULL && data != NULL);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	REQUIRE(write_blocks(fs, blk, 1, 1) == 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	REQUIRE(fs_tx_begin(fs, 2 * fs_alloc_credits(fs) + 1, &tx) == 0);
	REQUIRE(fs_buf_read(fs, blk[0], FS_BT_XATTR, &b) == 0);
	CHECK_EQ(fs_free(tx, blk[0], 1), 0);
	/* a change to the dead block after the free is discarded */
	CHECK_EQ(fs_tx_write(tx, b), 0);
	pattern(b->data, blk[0], 9);
	fs_buf_put(b);
	/* not reusable before the commit */
	CHECK_EQ(fs_alloc(tx, blk[0], 1, 1, &got, &len), 0);
	CHECK(got != blk[0]);
	CHECK_EQ(fs_tx_end(tx), 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	REQUIRE(fs_tx_begin(fs, 2 * fs_alloc_credits(fs), &tx) == 0);
	CHECK_EQ(fs_alloc(tx, blk[0], 1, 1, &got, &len), 0);
	CHECK_EQ(got, blk[0]);	/* now it is */
	CHECK_EQ(fs_tx_end(tx), 0);
	memset(data, 0xd7, FS_BLOCK_SIZE);
	CHECK_EQ(bd_write(bd, data, FS_BLOCK_SIZE, got * FS_BLOCK_SIZE, 0), 0);
	fs_journal_data_written(fs);
	CHECK_EQ(fs_journal_sync(fs), 0);
	fs_core_abandon(fs);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);	/* replays all three */
	memset(data, 0, FS_BLOCK_SIZE);
	bd_read(bd, data, FS_BLOCK_SIZE, got * FS_BLOCK_SIZE);
	CHECK(data[0] == 0xd7 && data[4095] == 0xd7);
	CHECK_EQ(fs_core_unmount(fs), 0);
	free(data);
	bd_close(bd);
}

/* Power loss on the fault device: synced transactions survive, the
 * filesystem mounts, and unsynced ones are all-or-nothing. */
static void test_power_loss(void)
{
	uint64_t blks[40] = { 0 };
	struct bd_dev *lower = cf_ram_fs(64, 2, 8), *bd;
	struct bd_fault *f;
	struct fs *fs;

	t_rnd_seed(t_seed());
	REQUIRE(lower != NULL);
	for (int trial = 0; trial < 8; trial++) {
		uint32_t synced = 0;

		REQUIRE(bd_fault_open(lower, &bd, &f) == 0);
		REQUIRE((fs = cf_mount(bd, 16)) != NULL);
		if (trial == 0)
			REQUIRE(write_blocks(fs, blks, 40, 1) == 0);
		for (uint32_t v = 2; v < 2 + 30; v++) {
			unsigned n = 1 + (unsigned)(t_rnd() % 40);

			CHECK_EQ(write_blocks(fs, blks, n,
					      v + 100 * (uint32_t)trial), 0);
			if (t_rnd() % 4 == 0) {
				CHECK_EQ(fs_journal_sync(fs), 0);
				synced = v + 100 * (uint32_t)trial;
			}
		}
		bd_fault_crash(f, t_rnd() | 1);
		fs_core_abandon(fs);
		/* the wrapper owns lower: reopen lower's content */
		{
			struct bd_dev *copy;
			uint8_t *buf = bd_buf_alloc(1 << 20);

			REQUIRE(bd_ram_open(64 << 20, &copy) == 0);
			for (uint64_t off = 0; off < (64u << 20); off += 1 << 20) {
				bd_read(lower, buf, 1 << 20, off);
				bd_write(copy, buf, 1 << 20, off, 0);
			}
			free(buf);
			bd_close(bd);	/* closes lower */
			lower = copy;
		}
		REQUIRE((fs = cf_mount(lower, 16)) != NULL);
		if (synced != 0) {
			/* block 0 is rewritten by every round: at least the
			 * synced version */
			struct fs_buf *b;

			REQUIRE(fs_buf_read(fs, blks[0], FS_BT_XATTR, &b) == 0);
			CHECK(((struct fs_xattr_blk *)b->data)->count >= synced);
			fs_buf_put(b);
		}
		CHECK_EQ(fs_core_unmount(fs), 0);
	}
	bd_close(lower);
}

/* Durability waits of @bd so far: flushes and FUA writes. */
static uint64_t dur_waits(struct bd_dev *bd)
{
	struct bd_stats st;

	bd_stats_get(bd, &st);
	return st.flush.count + st.fua_writes;
}

/* The owner of a block written by pattern() or of an inode number. */
static struct fs_owner owner_of_blk(uint64_t blk)
{
	return (struct fs_owner){FS_OWNER_INODE, blk};
}

/* Write xattr block @blk home with version @ver and flush, as another
 * node's checkpoint does after its commit. */
static int other_node_writes(struct bd_dev *bd, uint64_t blk, uint32_t ver)
{
	uint8_t *d = bd_buf_alloc(FS_BLOCK_SIZE);
	int ret = -ENOMEM;

	if (d != NULL) {
		pattern(d, blk, ver);
		fs_blk_seal(d, FS_BT_XATTR, blk, 1);
		ret = bd_write(bd, d, FS_BLOCK_SIZE, blk * FS_BLOCK_SIZE, 0);
		if (ret == 0)
			ret = bd_flush(bd);
	}
	free(d);
	return ret;
}

/*
 * An owner whose transaction is durable (fsync) gives its lock up: the
 * checkpoint writes home, flushes once and appends a checkpoint record:
 * one durability wait (the header move also cost a FUA write). Another
 * node then writes a newer copy of block 0 home; after a crash of ours,
 * replay must not put our older image back over it, while a transaction
 * committed after the record (block 1) is replayed.
 */
static void test_ckpt_record(void)
{
	struct bd_dev *bd = cf_ram_fs(64, 2, 8);
	struct fs_core_stats st;
	uint64_t blk[2] = {0}, w0;
	struct fs *fs;

	REQUIRE(bd != NULL && (fs = cf_mount(bd, 16)) != NULL);
	REQUIRE(write_blocks(fs, blk, 2, 1) == 0);
	CHECK_EQ(fs_journal_checkpoint(fs, FS_CR_SYNC), 0);
	REQUIRE(write_blocks(fs, blk, 2, 2) == 0);
	CHECK_EQ(fs_journal_sync(fs), 0); /* the writer's fsync */
	w0 = dur_waits(bd);
	CHECK_EQ(fs_journal_sync_owner(fs, owner_of_blk(blk[0])), 0);
	CHECK_EQ(dur_waits(bd) - w0, 1);
	CHECK(home_has(bd, blk[0], 2) && home_has(bd, blk[1], 2));
	fs_core_stats_get(fs, &st);
	CHECK_EQ(st.ckpt_records, 1);
	/* nothing new: a second sync writes nothing at all */
	w0 = dur_waits(bd);
	CHECK_EQ(fs_journal_sync_owner(fs, owner_of_blk(blk[0])), 0);
	CHECK_EQ(dur_waits(bd), w0);
	CHECK_EQ(other_node_writes(bd, blk[0], 9), 0);
	REQUIRE(write_blocks(fs, blk + 1, 1, 3) == 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	fs_core_abandon(fs); /* crash */
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	fs_core_stats_get(fs, &st);
	CHECK_EQ(st.replay_tx, 1); /* only the one after the record */
	CHECK(home_has(bd, blk[0], 9));
	CHECK(home_has(bd, blk[1], 3));
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* A filesystem made before JCKPT (bit cleared in both superblocks): the
 * same lock hand-over moves the header (FUA), writes no record, and the
 * crash replays nothing of what it wrote home. */
static void test_ckpt_no_feature(void)
{
	struct bd_dev *bd = cf_ram_fs(64, 2, 8);
	struct fs_sb *sb = bd_buf_alloc(FS_BLOCK_SIZE);
	struct fs_core_stats st;
	uint64_t blk[1] = {0}, w0;
	struct fs *fs;

	REQUIRE(bd != NULL && sb != NULL);
	for (uint64_t b = 0; b < 2; b++) { /* and the backup */
		REQUIRE(bd_read(bd, sb, FS_BLOCK_SIZE, b * FS_BLOCK_SIZE) == 0);
		sb->feature_incompat &= ~FS_FEATURE_INCOMPAT_JCKPT;
		fs_blk_update_crc(sb);
		REQUIRE(bd_write(bd, sb, FS_BLOCK_SIZE, b * FS_BLOCK_SIZE, 0) ==
			0);
	}
	free(sb);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	REQUIRE(write_blocks(fs, blk, 1, 1) == 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	w0 = dur_waits(bd);
	CHECK_EQ(fs_journal_sync_owner(fs, owner_of_blk(blk[0])), 0);
	CHECK_EQ(dur_waits(bd) - w0, 2); /* flush + FUA header */
	fs_core_stats_get(fs, &st);
	CHECK_EQ(st.ckpt_records, 0);
	CHECK(st.ckpt_headers >= 1);
	CHECK_EQ(other_node_writes(bd, blk[0], 9), 0);
	fs_core_abandon(fs);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	CHECK(home_has(bd, blk[0], 9));
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* Copy of a whole RAM device of @mb MiB. */
static struct bd_dev *dev_copy(struct bd_dev *src, unsigned mb)
{
	uint8_t *buf = bd_buf_alloc(1 << 20);
	struct bd_dev *d = NULL;

	if (buf != NULL && bd_ram_open((uint64_t)mb << 20, &d) == 0)
		for (uint64_t off = 0; off < ((uint64_t)mb << 20);
		     off += 1 << 20) {
			bd_read(src, buf, 1 << 20, off);
			bd_write(d, buf, 1 << 20, off, 0);
		}
	free(buf);
	return d;
}

/* fsck reads @bd's journals without a complaint (the test's blocks
 * belong to no inode: other kinds of errors are expected). */
static int fsck_journal_clean(struct bd_dev *bd, struct fs_fsck_result *r)
{
	char *out = NULL;
	int ok = fsck_out(bd, r, &out) == 0 && out != NULL &&
		 strstr(out, "ERROR: journal") == NULL;

	if (!ok)
		fprintf(stderr, "%s", out != NULL ? out : "(no fsck output)\n");
	free(out);
	return ok;
}

/*
 * Power loss right after a lock left (its checkpoint record not flushed:
 * kept, dropped or garbled, by seed): the filesystem mounts, fsck is
 * reads the journal without a complaint before and after, and both
 * blocks hold the synced version (block 0 maybe a later one).
 */
static void test_ckpt_record_power_loss(void)
{
	struct bd_dev *tmpl = cf_ram_fs(64, 2, 8);
	uint64_t blk[2] = {0};
	struct fs *fs;
	int bad = 0;

	t_rnd_seed(t_seed());
	REQUIRE(tmpl != NULL && (fs = cf_mount(tmpl, 16)) != NULL);
	REQUIRE(write_blocks(fs, blk, 2, 1) == 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	for (int trial = 0; trial < 12; trial++) {
		struct bd_dev *lower = dev_copy(tmpl, 64), *bd, *after;
		struct fs_fsck_result r;
		struct bd_fault *f;

		REQUIRE(lower != NULL && bd_fault_open(lower, &bd, &f) == 0);
		REQUIRE((fs = cf_mount(bd, 16)) != NULL);
		REQUIRE(write_blocks(fs, blk, 2, 2) == 0);
		CHECK_EQ(fs_journal_sync(fs), 0);
		CHECK_EQ(fs_journal_sync_owner(fs, owner_of_blk(blk[0])), 0);
		if (trial % 2) /* a later transaction, not synced */
			REQUIRE(write_blocks(fs, blk, 1, 3) == 0);
		bd_fault_crash(f, trial == 0 ? 0 : t_rnd() | 1);
		fs_core_abandon(fs);
		after = dev_copy(lower, 64);
		bd_close(bd);
		REQUIRE(after != NULL);
		bad |= !fsck_journal_clean(after, &r);
		REQUIRE((fs = cf_mount(after, 16)) != NULL);
		bad |= !cache_has(fs, blk[0], 2) && !cache_has(fs, blk[0], 3);
		bad |= !cache_has(fs, blk[1], 2);
		CHECK_EQ(fs_core_unmount(fs), 0);
		bad |= !fsck_journal_clean(after, &r);
		if (bad)
			fprintf(stderr, "  trial %d failed\n", trial);
		bd_close(after);
		if (bad)
			break;
	}
	CHECK(!bad);
	bd_close(tmpl);
}

#define RS_MB 80 /* image of test_replay_scan, a 32 MiB journal */

/* The mount of @bd (a crashed image): its replay's walk, reads, time. */
static struct fs *rs_mount(struct bd_dev *bd, const char *what)
{
	struct fs_core_stats st;
	struct bd_stats b0, b1;
	struct timespec t0, t1;
	struct fs *fs;

	bd_stats_get(bd, &b0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fs = cf_mount(bd, 16);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (fs == NULL)
		return NULL;
	bd_stats_get(bd, &b1);
	fs_core_stats_get(fs, &st);
	printf("  %s: replay walked %llu log blocks, replayed %llu tx; the "
	       "mount read %llu KiB in %.2f ms\n",
	       what, (unsigned long long)st.replay_scanned,
	       (unsigned long long)st.replay_tx,
	       (unsigned long long)((b1.read.bytes - b0.read.bytes) >> 10),
	       (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
		   (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	return fs;
}

/* With UCFS_REPLAY_IMG=PATH, the crashed image is also copied to that
 * file and mounted from it (O_DIRECT): the walk timed on a real disk. */
static void rs_file(struct bd_dev *bd)
{
	const char *path = getenv("UCFS_REPLAY_IMG");
	uint8_t *buf = bd_buf_alloc(1 << 20);
	struct bd_dev *f = NULL;
	struct fs *fs;
	FILE *fp;

	fp = path != NULL ? fopen(path, "w") : NULL;
	if (fp == NULL || buf == NULL ||
	    ftruncate(fileno(fp), (off_t)RS_MB << 20) < 0 ||
	    bd_file_open(path, 0, &f) < 0)
		goto out;
	for (uint64_t off = 0; off < ((uint64_t)RS_MB << 20); off += 1 << 20)
		if (bd_read(bd, buf, 1 << 20, off) < 0 ||
		    bd_write(f, buf, 1 << 20, off, 0) < 0)
			goto out;
	if (bd_flush(f) == 0 && (fs = rs_mount(f, "file")) != NULL)
		fs_core_unmount(fs);
out:
	if (f != NULL)
		bd_close(f);
	if (fp != NULL)
		fclose(fp);
	free(buf);
}

/*
 * 500 lock hand-overs of a 4-block transaction on a 32 MiB journal (the
 * default; the commit thread moves the header at half, 4,095 blocks):
 * each ends with a checkpoint record, 7 log blocks per hand-over. A
 * record never ends 256 blocks or more from the header's tail (a header
 * move takes its place), so after a crash the replay walks at most 255
 * blocks before the last record, where it walked 3,500 before that
 * bound; the one transaction after it is replayed.
 */
static void test_replay_scan_bounded(void)
{
	struct bd_dev *bd = cf_ram_fs(RS_MB, 32, 8), *copy;
	uint64_t blk[4] = {0};
	struct fs_core_stats st;
	struct fs *fs;

	REQUIRE(bd != NULL && (fs = cf_mount(bd, 16)) != NULL);
	for (uint32_t i = 1; i <= 500; i++) {
		REQUIRE(write_blocks(fs, blk, 4, i) == 0);
		REQUIRE(fs_journal_sync(fs) == 0);
		REQUIRE(fs_journal_sync_owner(fs, owner_of_blk(blk[0])) == 0);
	}
	REQUIRE(write_blocks(fs, blk, 2, 1000) == 0);
	REQUIRE(fs_journal_sync(fs) == 0);
	fs_core_stats_get(fs, &st);
	printf("  %llu records, %llu header moves, %llu log blocks\n",
	       (unsigned long long)st.ckpt_records,
	       (unsigned long long)st.ckpt_headers,
	       (unsigned long long)(st.commit_blocks + st.ckpt_records));
	CHECK(st.ckpt_records > 0);
	fs_core_abandon(fs);
	copy = dev_copy(bd, RS_MB);
	REQUIRE((fs = rs_mount(bd, "ram")) != NULL);
	fs_core_stats_get(fs, &st);
	CHECK_EQ(st.replay_tx, 1);
	CHECK(st.replay_scanned >= 4 && st.replay_scanned < 256 + 4);
	CHECK(home_has(bd, blk[0], 1000) && home_has(bd, blk[1], 1000));
	CHECK(home_has(bd, blk[2], 500) && home_has(bd, blk[3], 500));
	CHECK_EQ(fs_core_unmount(fs), 0);
	if (copy != NULL)
		rs_file(copy);
	bd_close(copy);
	bd_close(bd);
}

/*
 * fsync while the commit thread is still writing the previous
 * transaction (its snapshot taken, so the running one is empty) must wait
 * for that commit. A write gate holds the commit thread's first write
 * (blocking in a gate is for this test only: product gates must not).
 */
struct hold_gate {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	int armed, held, open;
};

static int hold_gate_fn(void *arg)
{
	struct hold_gate *g = arg;

	pthread_mutex_lock(&g->mu);
	if (g->armed) {
		g->held = 1;
		pthread_cond_broadcast(&g->cond);
		while (!g->open)
			pthread_cond_wait(&g->cond, &g->mu);
	}
	pthread_mutex_unlock(&g->mu);
	return 0;
}

struct sync_arg {
	struct fs *fs;
	int ret;
	int done; /* atomic */
};

static void *sync_thread(void *p)
{
	struct sync_arg *a = p;

	a->ret = fs_journal_sync(a->fs);
	__atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void test_sync_waits_inflight_commit(void)
{
	struct bd_dev *bd = cf_ram_fs(64, 4, 8);
	struct hold_gate g = {PTHREAD_MUTEX_INITIALIZER,
			      PTHREAD_COND_INITIALIZER, 0, 0, 0};
	struct sync_arg a = {0};
	uint64_t blk = 0;
	pthread_t th;
	struct fs *fs;
	int early = 0;

	REQUIRE(bd != NULL && (fs = cf_mount(bd, 16)) != NULL);
	REQUIRE(write_blocks(fs, &blk, 1, 1) == 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	REQUIRE(write_blocks(fs, &blk, 1, 2) == 0);
	bd_set_gate(bd, hold_gate_fn, &g);
	pthread_mutex_lock(&g.mu);
	g.armed = 1;
	pthread_mutex_unlock(&g.mu);
	fs_journal_kick(fs); /* the commit thread takes tx 2 */
	pthread_mutex_lock(&g.mu);
	while (!g.held)
		pthread_cond_wait(&g.cond, &g.mu);
	pthread_mutex_unlock(&g.mu);

	a.fs = fs;
	REQUIRE(pthread_create(&th, NULL, sync_thread, &a) == 0);
	/* it must not return while tx 2 is held; give it time to (a slow
	 * machine can only hide the bug, never fail a correct journal) */
	for (int i = 0; i < 30 && !early; i++) {
		struct timespec ts = {0, 10 * 1000 * 1000};

		nanosleep(&ts, NULL);
		early = __atomic_load_n(&a.done, __ATOMIC_ACQUIRE);
	}
	CHECK(!early);
	pthread_mutex_lock(&g.mu);
	g.open = 1;
	g.armed = 0;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.mu);
	pthread_join(th, NULL);
	CHECK_EQ(a.ret, 0);
	bd_set_gate(bd, NULL, NULL);
	fs_core_abandon(fs); /* crash: tx 2 must be in the journal */
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	CHECK(cache_has(fs, blk, 2));
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

#define GC_THREADS 8
#define GC_ROUNDS 50

struct gc_arg {
	struct fs *fs;
	pthread_barrier_t *bar;
	uint64_t blk[1];
	int fails;
};

/* Each round: every thread ends a transaction, then all fsync at once:
 * one commit must cover them all. */
static void *gc_thread(void *p)
{
	struct gc_arg *a = p;

	for (uint32_t v = 1; v <= GC_ROUNDS; v++) {
		if (write_blocks(a->fs, a->blk, 1, v) < 0)
			a->fails++;
		pthread_barrier_wait(a->bar);
		if (fs_journal_sync(a->fs) < 0)
			a->fails++;
		pthread_barrier_wait(a->bar);
	}
	return NULL;
}

static void test_group_commit(void)
{
	struct bd_dev *bd = cf_ram_fs(64, 4, 8);
	struct gc_arg args[GC_THREADS];
	pthread_t th[GC_THREADS];
	pthread_barrier_t bar;
	struct fs_core_stats st;
	struct fs *fs;

	REQUIRE(bd != NULL);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	pthread_barrier_init(&bar, NULL, GC_THREADS);
	for (int i = 0; i < GC_THREADS; i++) {
		args[i] = (struct gc_arg){ .fs = fs, .bar = &bar };
		pthread_create(&th[i], NULL, gc_thread, &args[i]);
	}
	for (int i = 0; i < GC_THREADS; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(args[i].fails, 0);
	}
	pthread_barrier_destroy(&bar);
	fs_core_stats_get(fs, &st);
	printf("  %d fsyncs from %d threads: %llu commits, %.1f us/commit "
	       "avg, max %.1f us (RAM device)\n", GC_THREADS * GC_ROUNDS,
	       GC_THREADS, (unsigned long long)st.commits,
	       st.commits ? st.commit_ns_total / 1e3 / st.commits : 0.0,
	       st.commit_ns_max / 1e3);
	CHECK_EQ(st.commits, GC_ROUNDS);
	fs_core_abandon(fs);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	for (int i = 0; i < GC_THREADS; i++)
		CHECK(cache_has(fs, args[i].blk[0], GC_ROUNDS));
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

static void test_ro_dirty(void)
{
	struct bd_dev *bd = cf_ram_fs(64, 4, 8);
	uint64_t blks[3] = { 0 };
	struct fs_core_opts o;
	struct fs *fs;
	struct fs_tx *tx;
	char why[200];

	REQUIRE(bd != NULL);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	REQUIRE(write_blocks(fs, blks, 3, 1) == 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	fs_core_abandon(fs);
	fs_core_opts_init(&o);
	o.ro = 1;
	CHECK_EQ(fs_core_mount(bd, &o, &fs, why, sizeof(why)), -EROFS);
	CHECK(strstr(why, "replay") != NULL);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);	/* rw mount replays */
	CHECK_EQ(fs_core_unmount(fs), 0);
	CHECK_EQ(fs_core_mount(bd, &o, &fs, why, sizeof(why)), 0);
	CHECK(cache_has(fs, blks[2], 1));
	CHECK_EQ(fs_tx_begin(fs, 1, &tx), -EROFS);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}


/* ---- crash at every point of a B+tree workload ------------------------ */

#define CP_KEYS 3000
#define CP_MB 32

static void cp_val(uint8_t *v, uint64_t i)
{
	for (int k = 0; k < 100; k++)
		v[k] = (uint8_t)(i * 17 + (uint64_t)k);
}

/* Template: a filesystem with one inode holding an empty tree. */
static struct bd_dev *cp_template(uint64_t *ino)
{
	struct bd_dev *bd = cf_ram_fs(CP_MB, 2, 8);
	struct fs_btree bt;
	struct fs_buf *ib;
	struct fs_tx *tx;
	struct fs *fs;
	uint64_t gen;

	if (bd == NULL || (fs = cf_mount(bd, 16)) == NULL)
		return NULL;
	if (fs_tx_begin(fs, 8, &tx) < 0 ||
	    fs_alloc_inode(tx, 0, ino, &gen) < 0 ||
	    fs_buf_new(tx, *ino, FS_BT_INODE, &ib) < 0)
		return NULL;
	fs_btree_init(&bt, fs, ib, FS_INODE_INLINE_OFF, FS_INODE_INLINE_SIZE,
		      *ino);
	fs_btree_create(tx, &bt);
	fs_tx_end(tx);
	fs_buf_put(ib);
	fs_core_unmount(fs);
	return bd;
}

/* Inserts keys 0.. with a sync every 50 (fsync or, every other time,
 * the inode's lock leaving: fs_journal_sync_owner); returns keys known
 * durable. */
static uint64_t cp_workload(struct fs *fs, uint64_t ino)
{
	struct fs_btree bt;
	struct fs_buf *ib;
	uint64_t synced = 0;
	uint8_t v[100];

	if (fs_buf_read(fs, ino, FS_BT_INODE, &ib) < 0)
		return 0;
	fs_btree_init(&bt, fs, ib, FS_INODE_INLINE_OFF, FS_INODE_INLINE_SIZE,
		      ino);
	for (uint64_t i = 0; i < CP_KEYS; i++) {
		struct fs_tx *tx;
		int ret;

		if (fs_tx_begin(fs, fs_btree_credits(&bt), &tx) < 0)
			break;
		cp_val(v, i);
		ret = fs_btree_insert(tx, &bt, i, v, sizeof(v));
		if (fs_tx_end(tx) < 0 || ret < 0)
			break;
		if (i % 50 == 49) {
			/* every other one as a lock leaving the node: a
			 * checkpoint ending with a record, no header move */
			if ((i % 100 == 49 ? fs_journal_sync(fs) :
			     fs_journal_sync_owner(fs, owner_of_blk(ino))) < 0)
				break;
			synced = i + 1;
		}
	}
	fs_buf_put(ib);
	return synced;
}

struct cp_it {
	uint64_t next;
	int bad;
};

static int cp_cb(void *arg, uint64_t key, const void *val, size_t len)
{
	struct cp_it *s = arg;
	uint8_t v[100];

	cp_val(v, key);
	if (key != s->next || len != 100 || memcmp(v, val, 100) != 0) {
		s->bad = 1;
		return 1;
	}
	s->next++;
	return 0;
}

/* After recovery: keys are exactly 0..m-1 with m >= synced. */
static int cp_check(struct bd_dev *bd, uint64_t ino, uint64_t synced)
{
	struct cp_it it = { 0, 0 };
	struct fs_btree bt;
	struct fs_buf *ib;
	struct fs *fs = cf_mount(bd, 16);
	unsigned depth;
	uint64_t entries, nodes;
	int ok;

	if (fs == NULL)
		return 0;
	if (fs_buf_read(fs, ino, FS_BT_INODE, &ib) < 0) {
		fs_core_unmount(fs);
		return 0;
	}
	fs_btree_init(&bt, fs, ib, FS_INODE_INLINE_OFF, FS_INODE_INLINE_SIZE,
		      ino);
	ok = fs_btree_iterate(&bt, 0, cp_cb, &it) == 0 && !it.bad &&
	     it.next >= synced &&
	     fs_btree_stat(&bt, &depth, &entries, &nodes) == 0 &&
	     entries == it.next;
	if (!ok)
		fprintf(stderr, "  recovered %llu keys (bad %d), synced %llu\n",
			(unsigned long long)it.next, it.bad,
			(unsigned long long)synced);
	fs_buf_put(ib);
	ok &= fs_core_unmount(fs) == 0;
	return ok;
}

static void test_crash_points(void)
{
	struct bd_dev *tmpl, *lower, *bd, *after;
	struct bd_fault *f;
	struct fs *fs;
	uint64_t ino = 0, total, step;
	unsigned trials = 0, failures = 0;

	t_rnd_seed(t_seed());
	REQUIRE((tmpl = cp_template(&ino)) != NULL);
	/* dry run: how many writes does the workload issue? */
	REQUIRE((lower = cf_ram_copy(tmpl)) != NULL);
	REQUIRE(bd_fault_open(lower, &bd, &f) == 0);
	REQUIRE((fs = cf_mount(bd, 16)) != NULL);
	CHECK_EQ(cp_workload(fs, ino), CP_KEYS - CP_KEYS % 50);
	total = bd_fault_writes(f);
	fs_core_abandon(fs);
	bd_close(bd);
	step = total / 60 ? total / 60 : 1;
	for (uint64_t n = 1; n <= total + 1;
	     n += step + (total > 120 ? t_rnd() % 3 : 0)) {
		uint64_t synced;

		REQUIRE((lower = cf_ram_copy(tmpl)) != NULL);
		REQUIRE(bd_fault_open(lower, &bd, &f) == 0);
		REQUIRE((fs = cf_mount(bd, 16)) != NULL);
		if (trials % 2)
			bd_fault_tear_nth(f, n, (size_t)(t_rnd() % 8) * 512);
		else
			bd_fault_crash_nth(f, n);
		synced = cp_workload(fs, ino);
		if (!bd_fault_crashed(f))
			bd_fault_crash(f, t_rnd() | 1);
		fs_core_abandon(fs);
		after = cf_ram_copy(lower);
		bd_close(bd);
		REQUIRE(after != NULL);
		if (!cp_check(after, ino, synced)) {
			fprintf(stderr, "  crash at write %llu of %llu failed\n",
				(unsigned long long)n,
				(unsigned long long)total);
			failures++;
		}
		bd_close(after);
		trials++;
	}
	printf("  %u crash points over %llu writes\n", trials,
	       (unsigned long long)total);
	CHECK_EQ(failures, 0);
	bd_close(tmpl);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_commit_replay);
	T_RUN(test_garbled_commit);
	T_RUN(test_garbled_image);
	T_RUN(test_fsck_reads_journal);
	T_RUN(test_fsck_bad_committed_image);
	T_RUN(test_fsck_bad_older_image);
	T_RUN(test_fsck_image_outside);
	T_RUN(test_replay_idempotent);
	T_RUN(test_wraparound);
	T_RUN(test_revoke);
	T_RUN(test_power_loss);
	T_RUN(test_ckpt_record);
	T_RUN(test_ckpt_no_feature);
	T_RUN(test_ckpt_record_power_loss);
	T_RUN(test_replay_scan_bounded);
	T_RUN(test_sync_waits_inflight_commit);
	T_RUN(test_group_commit);
	T_RUN(test_ro_dirty);
	T_RUN(test_crash_points);
	return t_done();
}
