/*
 * core_fixture.h — for the core unit tests (fs_core_* API, no namespace):
 * a RAM device formatted with small journal and resource groups, and a
 * core mount with the knobs these tests turn (and, for the tests that
 * need the namespace on top, one through fs.h). NULL on failure, with
 * the reason on stderr.
 */
#ifndef UCFS_TEST_CORE_FIXTURE_H
#define UCFS_TEST_CORE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockdev/bd.h"
#include "fusefs/core/fs_internal.h"
#include "fusefs/fs.h"

/* A RAM device of @mb MiB formatted with @p. */
static inline struct bd_dev *cf_ram_mkfs(unsigned mb,
					 const struct fs_mkfs_params *p)
{
	struct bd_dev *bd;
	char why[200];

	if (bd_ram_open((uint64_t)mb << 20, &bd) < 0)
		return NULL;
	if (fs_mkfs(bd, p, why, sizeof(why)) < 0) {
		fprintf(stderr, "mkfs: %s\n", why);
		bd_close(bd);
		return NULL;
	}
	return bd;
}

/* @slots journals (0: mkfs's default). */
static inline struct bd_dev *cf_ram_fs_slots(unsigned mb, unsigned journal_mb,
					     unsigned rgrp_mb, unsigned slots)
{
	struct fs_mkfs_params p;

	fs_mkfs_defaults(&p);
	p.journal_mb = journal_mb;
	p.rgrp_mb = rgrp_mb;
	if (slots != 0)
		p.slots = slots;
	return cf_ram_mkfs(mb, &p);
}

static inline struct bd_dev *cf_ram_fs(unsigned mb, unsigned journal_mb,
				       unsigned rgrp_mb)
{
	return cf_ram_fs_slots(mb, journal_mb, rgrp_mb, 0);
}

/* A RAM device holding a copy of every byte of @src (an image to crash
 * or replay without touching the original). */
static inline struct bd_dev *cf_ram_copy(struct bd_dev *src)
{
	size_t chunk = 1 << 20;
	void *buf = bd_buf_alloc(chunk);
	struct bd_dev *dst = NULL;

	if (buf == NULL || bd_ram_open(bd_size(src), &dst) < 0)
		goto out;
	for (uint64_t off = 0; off < bd_size(src); off += chunk)
		if (bd_read(src, buf, chunk, off) < 0 ||
		    bd_write(dst, buf, chunk, off, 0) < 0) {
			bd_close(dst);
			dst = NULL;
			break;
		}
out:
	free(buf);
	return dst;
}

/* A file data block's expected contents for version @ver of block @blk:
 * the crash tests' files are blocks written in place, as fs_data does,
 * each version telling itself apart. */
static inline void cf_fill_data(void *buf, uint64_t blk, uint32_t ver)
{
	uint64_t *p = buf;

	for (size_t i = 0; i < FS_BLOCK_SIZE / 8; i++)
		p[i] = blk * 0x100000001b3ull + ver * 0x9e3779b1ull + i;
}

/* 1 if block @blk on @bd holds version @ver (cf_fill_data). */
static inline int cf_data_ok(struct bd_dev *bd, uint64_t blk, uint32_t ver)
{
	uint8_t *a = bd_buf_alloc(FS_BLOCK_SIZE),
		*b = bd_buf_alloc(FS_BLOCK_SIZE);
	int ok = a != NULL && b != NULL &&
		 bd_read(bd, a, FS_BLOCK_SIZE, blk << FS_BLOCK_SHIFT) == 0;

	if (ok) {
		cf_fill_data(b, blk, ver);
		ok = memcmp(a, b, FS_BLOCK_SIZE) == 0;
	}
	free(a);
	free(b);
	return ok;
}

/* Version @ver of block @blk written in place through @bd, as fs_data
 * writes file data (not journaled). 0 or -errno. */
static inline int cf_data_write(struct bd_dev *bd, uint64_t blk, uint32_t ver)
{
	uint8_t *d = bd_buf_alloc(FS_BLOCK_SIZE);
	int ret = -ENOMEM;

	if (d != NULL) {
		cf_fill_data(d, blk, ver);
		ret = bd_write(bd, d, FS_BLOCK_SIZE, blk << FS_BLOCK_SHIFT, 0);
	}
	free(d);
	return ret;
}

/* Slot map states of slots 0 and 1 (FS_SLOT_*), written in place: a
 * crash image shows both mounted, or two library mounts standing for
 * two nodes see the other slot free. 0 or -errno. */
static inline int cf_slot_states(struct bd_dev *bd, int s0, int s1)
{
	struct fs_slotmap *sm = bd_buf_alloc(FS_BLOCK_SIZE);
	int ret = -ENOMEM;

	if (sm != NULL &&
	    (ret = bd_read(bd, sm, FS_BLOCK_SIZE,
			   FS_SLOTMAP_BLK << FS_BLOCK_SHIFT)) == 0) {
		sm->slots[0].state = s0;
		sm->slots[1].state = s1;
		fs_blk_update_crc(sm);
		ret = bd_write(bd, sm, FS_BLOCK_SIZE,
			       FS_SLOTMAP_BLK << FS_BLOCK_SHIFT, 0);
	}
	free(sm);
	return ret;
}

/* Mount with a journal that never commits on its own (commit=3600). */
static inline struct fs *cf_mount(struct bd_dev *bd, unsigned cache_mb)
{
	struct fs_core_opts o;
	struct fs *fs;
	char why[200];

	fs_core_opts_init(&o);
	o.commit_s = 3600;
	o.cache_mb = cache_mb;
	if (fs_core_mount(bd, &o, &fs, why, sizeof(why)) < 0) {
		fprintf(stderr, "mount: %s\n", why);
		return NULL;
	}
	return fs;
}

/* A mount through fs.h whose journal commits and whose statfs change
 * folds only when told (commit= and statfs_quantum= an hour), claiming
 * journal slot @slot as a nolock mount (two of them stand for two nodes). */
static inline struct fs *cf_ns_mount(struct bd_dev *bd, unsigned slot)
{
	struct fs_opts o;
	char err[256] = "";
	struct fs *fs;

	fs_opts_init(&o);
	o.cache_mb = 8;
	o.commit_s = 3600;
	o.statfs_quantum_s = 3600;
	o.nolock_slot = slot;
	if (fs_mount_bd(bd, &o, &fs, err, sizeof(err)) < 0) {
		fprintf(stderr, "  mount: %s\n", err);
		return NULL;
	}
	return fs;
}

static inline uint64_t cf_bufs(struct fs *fs)
{
	struct fs_core_stats st;

	fs_core_stats_get(fs, &st);
	return st.cache_bufs;
}

/* Put value @v into @n xattr blocks blks[] (allocating those still 0),
 * ten per transaction, then checkpoint them home. *maxbufs, if not
 * NULL, gets the highest number of cached buffers seen. */
static inline int cf_make_blocks(struct fs *fs, uint64_t *blks, unsigned n,
				 uint32_t v, uint64_t *maxbufs)
{
	for (unsigned i = 0; i < n; i += 10) {
		struct fs_tx *tx;
		int ret = fs_tx_begin(fs, 10 + 2 * fs_alloc_credits(fs), &tx);

		if (ret < 0)
			return ret;
		for (unsigned k = i; k < i + 10 && k < n && ret == 0; k++) {
			struct fs_buf *b;
			uint32_t len;

			if (blks[k] == 0) {
				ret = fs_alloc(tx, 0, 1, 1, &blks[k], &len);
				if (ret == 0)
					ret = fs_buf_new(tx, blks[k],
							 FS_BT_XATTR, &b);
			} else {
				ret = fs_buf_read(fs, blks[k], FS_BT_XATTR, &b);
				if (ret == 0)
					ret = fs_tx_write(tx, b);
			}
			if (ret == 0) {
				((struct fs_xattr_blk *)b->data)->count = v;
				fs_buf_put(b);
			}
		}
		fs_tx_end(tx);
		if (ret < 0)
			return ret;
		if (maxbufs != NULL && cf_bufs(fs) > *maxbufs)
			*maxbufs = cf_bufs(fs);
	}
	return fs_journal_checkpoint(fs, FS_CR_SYNC);
}

/* The value cf_make_blocks put into @blk. */
static inline int cf_read_val(struct fs *fs, uint64_t blk, uint32_t *v)
{
	struct fs_buf *b;
	int ret = fs_buf_read(fs, blk, FS_BT_XATTR, &b);

	*v = 0;
	if (ret == 0) {
		*v = ((struct fs_xattr_blk *)b->data)->count;
		fs_buf_put(b);
	}
	return ret;
}

#endif
