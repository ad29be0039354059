/*
 * test_btree.c — the generic B+tree against a model: random inserts,
 * updates, deletes and lookups (seeded, --seed), values of 0..320 bytes,
 * trees growing past the inline root; next / lookup_le / iterate compared
 * with the model; persistence across unmount and across a crash after
 * fs_journal_sync(); deleting everything returns the root to the inode
 * and every node block to the allocator; a 20,000-entry tree destroyed
 * with fs_btree_destroy_step on a 1 MiB journal (many bounded handles,
 * entries' blocks freed by the drop callback), also with a power loss in
 * the middle (what is left is a valid suffix, nothing leaks).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fusefs/core/fs_internal.h"
#include "harness.h"

#define NKEYS (1u << 17)
#define KEY(i) ((uint64_t)(i) * 1000003ull + 17)
#define IDX(k) (((k) - 17) / 1000003ull)

static uint16_t *m_ver;	/* 0 = absent */
static uint16_t *m_len;
static uint64_t m_count;

static void fill_val(uint8_t *v, uint64_t i, unsigned ver, unsigned len)
{
	for (unsigned k = 0; k < len; k++)
		v[k] = (uint8_t)(i * 31 + ver * 7 + k);
}

struct env {
	struct bd_dev *bd;
	struct fs *fs;
	struct fs_buf *ib;
	uint64_t ino;
	struct fs_btree bt;
};

static int env_mount(struct env *e)
{
	struct fs_core_opts o;
	char why[200];
	int ret;

	fs_core_opts_init(&o);
	o.cache_mb = 64;
	ret = fs_core_mount(e->bd, &o, &e->fs, why, sizeof(why));
	if (ret < 0) {
		fprintf(stderr, "mount: %s\n", why);
		return ret;
	}
	if (e->ino == 0)
		return 0;
	ret = fs_buf_read(e->fs, e->ino, FS_BT_INODE, &e->ib);
	if (ret == 0)
		fs_btree_init(&e->bt, e->fs, e->ib, FS_INODE_INLINE_OFF,
			      FS_INODE_INLINE_SIZE, e->ino);
	return ret;
}

static int env_setup(struct env *e)
{
	struct fs_mkfs_params p;
	struct fs_tx *tx;
	uint64_t gen;
	char why[200];

	memset(e, 0, sizeof(*e));
	fs_mkfs_defaults(&p);
	p.journal_mb = 16;
	p.rgrp_mb = 32;
	if (bd_ram_open(256ull << 20, &e->bd) < 0 ||
	    fs_mkfs(e->bd, &p, why, sizeof(why)) < 0 || env_mount(e) < 0)
		return -1;
	if (fs_tx_begin(e->fs, 10, &tx) < 0)
		return -1;
	if (fs_alloc_inode(tx, 0, &e->ino, &gen) < 0 ||
	    fs_buf_new(tx, e->ino, FS_BT_INODE, &e->ib) < 0)
		return -1;
	fs_btree_init(&e->bt, e->fs, e->ib, FS_INODE_INLINE_OFF,
		      FS_INODE_INLINE_SIZE, e->ino);
	if (fs_btree_create(tx, &e->bt) < 0)
		return -1;
	return fs_tx_end(tx);
}

static void env_unmount(struct env *e, int crash)
{
	fs_buf_put(e->ib);
	e->ib = NULL;
	if (crash)
		fs_core_abandon(e->fs);
	else
		CHECK_EQ(fs_core_unmount(e->fs), 0);
	e->fs = NULL;
}

static int op(struct env *e, int kind, uint64_t i)
{
	uint8_t v[FS_BTREE_VAL_MAX], got[FS_BTREE_VAL_MAX];
	unsigned len = (unsigned)(t_rnd() % 301);
	struct fs_tx *tx;
	size_t gl;
	int ret, r2;

	if (t_rnd() % 50 == 0)
		len = FS_BTREE_VAL_MAX;
	if (kind == 3) {	/* lookup */
		ret = fs_btree_lookup(&e->bt, KEY(i), got, sizeof(got), &gl);
		if (m_ver[i] == 0)
			return ret == -ENOENT ? 0 : -1;
		fill_val(v, i, m_ver[i], m_len[i]);
		return ret == 0 && gl == m_len[i] &&
		       memcmp(v, got, gl) == 0 ? 0 : -1;
	}
	if (fs_tx_begin(e->fs, fs_btree_credits(&e->bt), &tx) < 0)
		return -1;
	if (kind == 0) {	/* insert */
		fill_val(v, i, m_ver[i] + 1u, len);
		ret = fs_btree_insert(tx, &e->bt, KEY(i), v, len);
		if (m_ver[i] != 0) {
			ret = ret == -EEXIST ? 0 : -1;
		} else if (ret == 0) {
			m_ver[i]++;
			m_len[i] = (uint16_t)len;
			m_count++;
		}
	} else if (kind == 1) {	/* update */
		fill_val(v, i, m_ver[i] + 1u, len);
		ret = fs_btree_update(tx, &e->bt, KEY(i), v, len);
		if (m_ver[i] == 0) {
			ret = ret == -ENOENT ? 0 : -1;
		} else if (ret == 0) {
			m_ver[i]++;
			m_len[i] = (uint16_t)len;
		}
	} else {		/* delete */
		ret = fs_btree_delete(tx, &e->bt, KEY(i));
		if (m_ver[i] == 0) {
			ret = ret == -ENOENT ? 0 : -1;
		} else if (ret == 0) {
			m_ver[i] = 0;
			m_count--;
		}
	}
	r2 = fs_tx_end(tx);
	return ret < 0 ? ret : r2;
}

static int check_ordered(struct env *e, uint64_t i)
{
	uint64_t found, j;
	int ret;

	/* next >= KEY(i) - 1 */
	ret = fs_btree_next(&e->bt, KEY(i) - 1, &found, NULL, 0, NULL);
	for (j = i; j < NKEYS && m_ver[j] == 0; j++)
		;
	if (j == NKEYS ? ret != -ENOENT : ret != 0 || found != KEY(j))
		return -1;
	/* le KEY(i) + 1 */
	ret = fs_btree_lookup_le(&e->bt, KEY(i) + 1, &found, NULL, 0, NULL);
	for (j = i + 1; j > 0 && m_ver[j - 1] == 0; j--)
		;
	if (j == 0 ? ret != -ENOENT : ret != 0 || found != KEY(j - 1))
		return -1;
	return 0;
}

struct itstate {
	uint64_t next;		/* model index expected next */
	uint64_t seen;
	int bad;
};

static int it_cb(void *arg, uint64_t key, const void *val, size_t len)
{
	struct itstate *s = arg;
	uint8_t v[FS_BTREE_VAL_MAX];
	uint64_t i = IDX(key);

	while (s->next < NKEYS && m_ver[s->next] == 0)
		s->next++;
	if (i != s->next || len != m_len[i]) {
		s->bad = 1;
		return 1;
	}
	fill_val(v, i, m_ver[i], m_len[i]);
	if (memcmp(v, val, len) != 0) {
		s->bad = 1;
		return 1;
	}
	s->next++;
	s->seen++;
	return 0;
}

static int check_all(struct env *e)
{
	struct itstate s = { 0 };
	unsigned depth;
	uint64_t entries, nodes;
	int ret = fs_btree_iterate(&e->bt, 0, it_cb, &s);

	if (ret != 0 || s.bad || s.seen != m_count) {
		fprintf(stderr, "iterate: ret %d bad %d seen %llu of %llu "
			"(at model index %llu)\n", ret, s.bad,
			(unsigned long long)s.seen,
			(unsigned long long)m_count,
			(unsigned long long)s.next);
		return -1;
	}
	if (fs_btree_stat(&e->bt, &depth, &entries, &nodes) < 0 ||
	    entries != m_count)
		return -1;
	printf("  %llu entries, depth %u, %llu node blocks\n",
	       (unsigned long long)entries, depth, (unsigned long long)nodes);
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_random_model(void)
{
	struct env e;
	struct fs_space before, after;
	unsigned nops = 100000, depth;
	uint64_t entries, nodes;
	double t0, dt;
	int bad = 0;

	t_rnd_seed(t_seed());
	m_ver = calloc(NKEYS, sizeof(*m_ver));
	m_len = calloc(NKEYS, sizeof(*m_len));
	m_count = 0;
	REQUIRE(m_ver != NULL && m_len != NULL);
	REQUIRE(env_setup(&e) == 0);
	fs_space_get(e.fs, &before);

	t0 = now_s();
	for (unsigned n = 0; n < nops && !bad; n++) {
		uint64_t r = t_rnd() % 100, i = t_rnd() % NKEYS;
		int kind = r < 60 ? 0 : r < 70 ? 1 : r < 85 ? 2 : 3;

		if (op(&e, kind, i) < 0) {
			fprintf(stderr, "op %u kind %d key %llu failed\n", n,
				kind, (unsigned long long)i);
			bad = 1;
		}
		if (n % 97 == 0 && check_ordered(&e, t_rnd() % NKEYS) < 0) {
			fprintf(stderr, "ordered check failed at op %u\n", n);
			bad = 1;
		}
	}
	dt = now_s() - t0;
	printf("  %u mixed ops in %.2f s: %.0f ops/s\n", nops, dt, nops / dt);
	CHECK(!bad);
	CHECK(check_all(&e) == 0);
	CHECK(fs_btree_stat(&e.bt, &depth, &entries, &nodes) == 0 &&
	      depth >= 3);

	/* persistence: clean unmount */
	env_unmount(&e, 0);
	REQUIRE(env_mount(&e) == 0);
	CHECK(check_all(&e) == 0);
	/* crash after sync: everything synced survives */
	for (unsigned n = 0; n < 3000; n++)
		op(&e, t_rnd() % 3, t_rnd() % NKEYS);
	CHECK_EQ(fs_journal_sync(e.fs), 0);
	CHECK(check_all(&e) == 0);
	env_unmount(&e, 1);
	REQUIRE(env_mount(&e) == 0);
	CHECK(check_all(&e) == 0);

	/* delete everything: back to an inline root, space returned */
	t0 = now_s();
	for (uint64_t i = 0; i < NKEYS && !bad; i++)
		if (m_ver[i] != 0 && op(&e, 2, i) < 0)
			bad = 1;
	printf("  delete all: %.2f s\n", now_s() - t0);
	CHECK(!bad);
	CHECK_EQ(m_count, 0);
	CHECK(fs_btree_stat(&e.bt, &depth, &entries, &nodes) == 0);
	CHECK_EQ(depth, 1);
	CHECK_EQ(nodes, 0);
	CHECK_EQ(fs_journal_sync(e.fs), 0);
	fs_space_get(e.fs, &after);
	CHECK_EQ(after.free_blocks, before.free_blocks);
	CHECK_EQ(fs_alloc_pending(e.fs), 0);
	env_unmount(&e, 0);
	bd_close(e.bd);
	free(m_ver);
	free(m_len);
}

static void test_limits(void)
{
	struct env e;
	struct fs_tx *tx;
	uint8_t v[FS_BTREE_VAL_MAX + 1] = { 0 };
	uint64_t found;
	size_t vl;

	REQUIRE(env_setup(&e) == 0);
	REQUIRE(fs_tx_begin(e.fs, fs_btree_credits(&e.bt), &tx) == 0);
	CHECK_EQ(fs_btree_insert(tx, &e.bt, 5, v, sizeof(v)), -E2BIG);
	CHECK_EQ(fs_btree_insert(tx, &e.bt, 5, v, 0), 0);
	CHECK_EQ(fs_btree_insert(tx, &e.bt, 5, v, 1), -EEXIST);
	CHECK_EQ(fs_btree_insert(tx, &e.bt, UINT64_MAX, v, 3), 0);
	CHECK_EQ(fs_btree_insert(tx, &e.bt, 0, v, 2), 0);
	CHECK_EQ(fs_btree_update(tx, &e.bt, 6, v, 1), -ENOENT);
	CHECK_EQ(fs_btree_delete(tx, &e.bt, 6), -ENOENT);
	CHECK_EQ(fs_tx_end(tx), 0);
	CHECK_EQ(fs_btree_lookup(&e.bt, 5, NULL, 0, &vl), 0);
	CHECK_EQ(vl, 0);
	CHECK_EQ(fs_btree_next(&e.bt, 6, &found, NULL, 0, &vl), 0);
	CHECK(found == UINT64_MAX && vl == 3);
	CHECK_EQ(fs_btree_lookup_le(&e.bt, 4, &found, NULL, 0, &vl), 0);
	CHECK(found == 0 && vl == 2);
	CHECK_EQ(fs_btree_lookup(&e.bt, 7, NULL, 0, NULL), -ENOENT);
	/* corrupt inline root -> EUCLEAN */
	((uint8_t *)e.ib->data)[FS_INODE_INLINE_OFF + 6] ^= 0xff;
	CHECK_EQ(fs_btree_lookup(&e.bt, 5, NULL, 0, NULL), -EUCLEAN);
	((uint8_t *)e.ib->data)[FS_INODE_INLINE_OFF + 6] ^= 0xff;
	env_unmount(&e, 0);
	bd_close(e.bd);
}


/* ---- several threads, one tree each, shared cache/journal/allocator --- */

#define MT_THREADS 4
#define MT_KEYS 4096

struct mt {
	struct fs *fs;
	uint64_t ino;
	uint64_t rng;
	uint16_t ver[MT_KEYS];
	uint16_t len[MT_KEYS];
	int bad;
};

static uint64_t mt_rnd(struct mt *m)
{
	m->rng ^= m->rng << 13;
	m->rng ^= m->rng >> 7;
	m->rng ^= m->rng << 17;
	return m->rng;
}

static void *mt_thread(void *arg)
{
	struct mt *m = arg;
	uint8_t v[FS_BTREE_VAL_MAX];
	struct fs_btree bt;
	struct fs_buf *ib;

	if (fs_buf_read(m->fs, m->ino, FS_BT_INODE, &ib) < 0) {
		m->bad = 1;
		return NULL;
	}
	fs_btree_init(&bt, m->fs, ib, FS_INODE_INLINE_OFF,
		      FS_INODE_INLINE_SIZE, m->ino);
	for (int n = 0; n < 15000 && !m->bad; n++) {
		uint64_t i = mt_rnd(m) % MT_KEYS;
		unsigned len = (unsigned)(mt_rnd(m) % 200);
		struct fs_tx *tx;
		int ret;

		if (fs_tx_begin(m->fs, fs_btree_credits(&bt), &tx) < 0) {
			m->bad = 1;
			break;
		}
		fill_val(v, i, m->ver[i] + 1u, len);
		if (m->ver[i] == 0 || mt_rnd(m) % 3 == 0) {
			ret = m->ver[i] ? fs_btree_update(tx, &bt, i, v, len) :
				fs_btree_insert(tx, &bt, i, v, len);
			if (ret == 0) {
				m->ver[i]++;
				m->len[i] = (uint16_t)len;
			}
		} else {
			ret = fs_btree_delete(tx, &bt, i);
			if (ret == 0)
				m->ver[i] = 0;
		}
		if (fs_tx_end(tx) < 0 || ret < 0)
			m->bad = 1;
		if (n % 1000 == 999 && fs_journal_sync(m->fs) < 0)
			m->bad = 1;
	}
	fs_buf_put(ib);
	return NULL;
}

static int mt_verify(struct fs *fs, struct mt *m)
{
	uint8_t v[FS_BTREE_VAL_MAX], got[FS_BTREE_VAL_MAX];
	struct fs_btree bt;
	struct fs_buf *ib;
	int bad = 0;

	if (fs_buf_read(fs, m->ino, FS_BT_INODE, &ib) < 0)
		return -1;
	fs_btree_init(&bt, fs, ib, FS_INODE_INLINE_OFF, FS_INODE_INLINE_SIZE,
		      m->ino);
	for (uint64_t i = 0; i < MT_KEYS; i++) {
		size_t gl;
		int ret = fs_btree_lookup(&bt, i, got, sizeof(got), &gl);

		if (m->ver[i] == 0) {
			bad += ret != -ENOENT;
			continue;
		}
		fill_val(v, i, m->ver[i], m->len[i]);
		bad += ret != 0 || gl != m->len[i] || memcmp(v, got, gl) != 0;
	}
	fs_buf_put(ib);
	return bad ? -1 : 0;
}

static void test_threads(void)
{
	static struct mt m[MT_THREADS];
	pthread_t th[MT_THREADS];
	struct fs_mkfs_params p;
	struct fs_core_opts o;
	struct bd_dev *bd;
	struct fs *fs;
	char why[200];
	uint64_t seed = t_seed();

	fs_mkfs_defaults(&p);
	p.journal_mb = 4;
	p.rgrp_mb = 16;
	REQUIRE(bd_ram_open(256ull << 20, &bd) == 0);
	REQUIRE(fs_mkfs(bd, &p, why, sizeof(why)) == 0);
	fs_core_opts_init(&o);
	o.commit_s = 1;
	o.cache_mb = 4;		/* small: eviction and throttling too */
	REQUIRE(fs_core_mount(bd, &o, &fs, why, sizeof(why)) == 0);
	for (int t = 0; t < MT_THREADS; t++) {
		struct fs_tx *tx;
		struct fs_buf *ib;
		struct fs_btree bt;
		uint64_t gen;

		memset(&m[t], 0, sizeof(m[t]));
		m[t].fs = fs;
		m[t].rng = (seed + (uint64_t)t * 7919) | 1;
		REQUIRE(fs_tx_begin(fs, 8, &tx) == 0);
		REQUIRE(fs_alloc_inode(tx, 0, &m[t].ino, &gen) == 0);
		REQUIRE(fs_buf_new(tx, m[t].ino, FS_BT_INODE, &ib) == 0);
		fs_btree_init(&bt, fs, ib, FS_INODE_INLINE_OFF,
			      FS_INODE_INLINE_SIZE, m[t].ino);
		CHECK_EQ(fs_btree_create(tx, &bt), 0);
		fs_buf_put(ib);
		CHECK_EQ(fs_tx_end(tx), 0);
	}
	for (int t = 0; t < MT_THREADS; t++)
		pthread_create(&th[t], NULL, mt_thread, &m[t]);
	for (int t = 0; t < MT_THREADS; t++) {
		pthread_join(th[t], NULL);
		CHECK_EQ(m[t].bad, 0);
		CHECK_EQ(mt_verify(fs, &m[t]), 0);
	}
	CHECK_EQ(fs_journal_sync(fs), 0);
	fs_core_abandon(fs);
	REQUIRE(fs_core_mount(bd, &o, &fs, why, sizeof(why)) == 0);
	for (int t = 0; t < MT_THREADS; t++)
		CHECK_EQ(mt_verify(fs, &m[t]), 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* ---- restartable destroy with a tiny journal ---- */

#define DS_N 20000u
#define DS_KEY(i) ((uint64_t)(i) * 7 + 3)

struct ds_val {
	uint64_t phys;
	uint32_t len;
	uint8_t pad[84];	/* bigger values: more leaves */
};

struct ds {
	uint64_t dropped;	/* entries handed to the callback */
	uint64_t next_key;	/* the next key expected */
	int bad;
};

static int ds_drop(void *arg, struct fs_tx *tx, uint64_t key,
		   const void *val, size_t len)
{
	struct ds *d = arg;
	struct ds_val v;

	if (len != sizeof(v) || key != d->next_key) {
		d->bad++;
		return -EUCLEAN;
	}
	memcpy(&v, val, sizeof(v));
	d->next_key = key + 7;
	d->dropped++;
	return fs_free(tx, v.phys, v.len);
}

static struct fs *ds_mount(struct bd_dev *bd, uint64_t ino,
			   struct fs_buf **ib, struct fs_btree *bt)
{
	struct fs_core_opts o;
	struct fs *fs;
	char why[200];

	fs_core_opts_init(&o);
	o.cache_mb = 64;
	o.commit_s = 3600;
	if (fs_core_mount(bd, &o, &fs, why, sizeof(why)) < 0) {
		fprintf(stderr, "mount: %s\n", why);
		return NULL;
	}
	if (ino != 0 && fs_buf_read(fs, ino, FS_BT_INODE, ib) < 0) {
		fs_core_abandon(fs);
		return NULL;
	}
	if (ino != 0)
		fs_btree_init(bt, fs, *ib, FS_INODE_INLINE_OFF,
			      FS_INODE_INLINE_SIZE, ino);
	return fs;
}

/* A tree of DS_N entries, each owning one allocated block. */
static int ds_build(struct fs *fs, uint64_t *ino, struct fs_buf **ib,
		    struct fs_btree *bt)
{
	struct ds_val v;
	struct fs_tx *tx;
	uint64_t gen;
	uint32_t got;

	if (fs_tx_begin(fs, 10, &tx) < 0)
		return -1;
	if (fs_alloc_inode(tx, 0, ino, &gen) < 0 ||
	    fs_buf_new(tx, *ino, FS_BT_INODE, ib) < 0)
		return -1;
	fs_btree_init(bt, fs, *ib, FS_INODE_INLINE_OFF, FS_INODE_INLINE_SIZE,
		      *ino);
	if (fs_btree_create(tx, bt) < 0 || fs_tx_end(tx) < 0)
		return -1;
	memset(&v, 0, sizeof(v));
	for (unsigned i = 0; i < DS_N; i++) {
		if (fs_tx_begin(fs, fs_btree_credits(bt) +
				FS_ALLOC_CREDITS(fs), &tx) < 0)
			return -1;
		if (fs_alloc(tx, 0, 1, 1, &v.phys, &got) < 0)
			return -1;
		v.len = got;
		memset(v.pad, (int)i, sizeof(v.pad));
		if (fs_btree_insert(tx, bt, DS_KEY(i), &v, sizeof(v)) < 0)
			return -1;
		if (fs_tx_end(tx) < 0)
			return -1;
	}
	return fs_journal_sync(fs);
}

/* Steps until done (@max_steps 0) or @max_steps; counts steps. */
static int ds_destroy(struct fs *fs, struct fs_buf *ib, struct fs_btree *bt,
		      struct ds *d, unsigned max_steps, unsigned *steps)
{
	unsigned dc = FS_ALLOC_CREDITS(fs);
	int ret = 0;

	while (ret == 0 && (max_steps == 0 || *steps < max_steps)) {
		unsigned cr = fs_btree_destroy_credits(bt, dc);
		struct fs_tx *tx;

		if (cr + 1 > fs_tx_max_credits(fs))
			return -E2BIG;
		ret = fs_tx_begin(fs, cr + 1, &tx);
		if (ret < 0)
			return ret;
		ret = fs_tx_write(tx, ib);
		if (ret == 0)
			ret = fs_btree_destroy_step(tx, bt, cr, ds_drop, dc, d);
		if (fs_tx_end(tx) < 0)
			ret = -EIO;
		(*steps)++;
	}
	return ret;
}

static struct bd_dev *ds_format(void)
{
	struct fs_mkfs_params p;
	struct bd_dev *bd;
	char why[200];

	fs_mkfs_defaults(&p);
	p.journal_mb = 1;	/* tiny: 255 log blocks */
	p.rgrp_mb = 32;
	if (bd_ram_open(192ull << 20, &bd) < 0)
		return NULL;
	if (fs_mkfs(bd, &p, why, sizeof(why)) < 0) {
		bd_close(bd);
		return NULL;
	}
	return bd;
}

static void test_destroy_steps(void)
{
	struct bd_dev *bd = ds_format();
	struct ds d = { 0, DS_KEY(0), 0 };
	struct fs_space before, after;
	uint64_t ino, entries, nodes;
	struct fs_btree bt;
	struct fs_buf *ib;
	unsigned steps = 0, depth;
	struct fs *fs;

	REQUIRE(bd != NULL);
	fs = ds_mount(bd, 0, NULL, NULL);
	REQUIRE(fs != NULL);
	fs_space_get(fs, &before);
	REQUIRE(ds_build(fs, &ino, &ib, &bt) == 0);
	REQUIRE(fs_btree_stat(&bt, &depth, &entries, &nodes) == 0);
	printf("  tree: depth %u, %llu entries, %llu nodes; max credits %u\n",
	       depth, (unsigned long long)entries,
	       (unsigned long long)nodes, fs_tx_max_credits(fs));
	CHECK_EQ(entries, DS_N);
	CHECK(nodes > 4 * fs_tx_max_credits(fs));	/* > one handle */
	CHECK_EQ(ds_destroy(fs, ib, &bt, &d, 0, &steps), 1);
	printf("  destroyed in %u steps\n", steps);
	CHECK(steps > 10);
	CHECK_EQ(d.bad, 0);
	CHECK_EQ(d.dropped, DS_N);
	REQUIRE(fs_btree_stat(&bt, &depth, &entries, &nodes) == 0);
	CHECK_EQ(depth, 1);
	CHECK_EQ(entries, 0);
	CHECK_EQ(nodes, 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	fs_space_get(fs, &after);
	CHECK_EQ(after.free_blocks + 1, before.free_blocks);	/* inode */
	fs_buf_put(ib);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

static int ds_first(void *arg, uint64_t key, const void *val, size_t len)
{
	(void)val;
	(void)len;
	*(uint64_t *)arg = key;
	return 1;
}

/* Crash in the middle: the tree left is the suffix of the keys, its
 * blocks still allocated, the dropped ones free; destroying the rest
 * gives back everything. */
static void test_destroy_crash(void)
{
	struct bd_dev *lower = ds_format(), *bd;
	struct ds d = { 0, DS_KEY(0), 0 };
	struct fs_space before, after;
	uint64_t ino, entries, nodes, first = 0, synced;
	struct bd_fault *fault;
	struct fs_btree bt;
	struct fs_buf *ib;
	unsigned steps = 0, depth;
	struct fs *fs;

	REQUIRE(lower != NULL);
	REQUIRE(bd_fault_open(lower, &bd, &fault) == 0);
	fs = ds_mount(bd, 0, NULL, NULL);
	REQUIRE(fs != NULL);
	fs_space_get(fs, &before);
	REQUIRE(ds_build(fs, &ino, &ib, &bt) == 0);
	CHECK_EQ(ds_destroy(fs, ib, &bt, &d, 40, &steps), 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	synced = d.dropped;
	CHECK_EQ(ds_destroy(fs, ib, &bt, &d, 45, &steps), 0);
	bd_fault_crash(fault, 0);
	fs_buf_put(ib);
	fs_core_abandon(fs);

	fs = ds_mount(lower, ino, &ib, &bt);
	REQUIRE(fs != NULL);
	REQUIRE(fs_btree_stat(&bt, &depth, &entries, &nodes) == 0);
	CHECK_EQ(fs_btree_iterate(&bt, 0, ds_first, &first), 1);
	printf("  after the crash: %llu entries left (first key %llu), "
	       "%llu dropped before it\n", (unsigned long long)entries,
	       (unsigned long long)first, (unsigned long long)d.dropped);
	CHECK(entries <= DS_N - synced);	/* synced steps survive */
	CHECK(entries >= DS_N - d.dropped);
	CHECK_EQ(first, DS_KEY(DS_N - entries));	/* exactly a suffix */
	d = (struct ds){ 0, first, 0 };
	steps = 0;
	CHECK_EQ(ds_destroy(fs, ib, &bt, &d, 0, &steps), 1);
	CHECK_EQ(d.bad, 0);
	CHECK_EQ(d.dropped, entries);
	CHECK_EQ(fs_journal_sync(fs), 0);
	fs_space_get(fs, &after);
	CHECK_EQ(after.free_blocks + 1, before.free_blocks);
	fs_buf_put(ib);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);	/* the fault wrapper closes @lower */
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_limits);
	T_RUN(test_random_model);
	T_RUN(test_threads);
	T_RUN(test_destroy_steps);
	T_RUN(test_destroy_crash);
	return t_done();
}
