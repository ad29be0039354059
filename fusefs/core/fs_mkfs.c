/*
 * fs_mkfs.c — format a device (the library half of mkfs.ucfs; unit tests
 * format RAM devices with it).
 *
 * Writes, in order: a zeroed block 0 (so an interrupted mkfs leaves no
 * valid superblock), slot map + heartbeat/slotinfo blocks, journal headers
 * (plus a zeroed first log block), rgroup headers and bitmaps, the root
 * inode; flush; then the superblock and its backup; flush. Data blocks are
 * not touched, so formatting a large device costs a few MiB of writes.
 *
 * The root directory is inode root_ino = first data block of rgroup 0:
 * mode 040755, uid/gid 0, nlink 2, generation 1, an empty depth-0
 * directory B+tree in its inline area. The statfs records (ro_compat
 * STATFS) follow it: the master (the free blocks and inodes of the new
 * filesystem), then one change record per slot, all zero.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include "fusefs/core/fs_core_priv.h"

void fs_mkfs_defaults(struct fs_mkfs_params *p)
{
	memset(p, 0, sizeof(*p));
	p->slots = 1;
	p->journal_mb = 32;
	p->rgrp_mb = 0; /* auto: fs_mkfs_rgrp_mb */
	strcpy(p->lockproto, "nolock");
}

struct mk {
	struct bd_dev *bd;
	struct fs_sb sb;
	struct bd_io *ios;
	size_t nio, capio;
	void **bufs;		/* freed at the end */
	size_t nbuf;
	int ret;
};

static void *mk_blocks(struct mk *m, uint64_t blk, size_t n)
{
	void *p = bd_buf_alloc(n * FS_BLOCK_SIZE), **nb;
	struct bd_io *ni;

	if (p == NULL)
		goto out_nomem;
	nb = realloc(m->bufs, (m->nbuf + 1) * sizeof(*nb));
	if (nb == NULL)
		goto out_nomem;
	m->bufs = nb;
	m->bufs[m->nbuf++] = p;
	if (m->nio == m->capio) {
		m->capio = m->capio ? 2 * m->capio : 64;
		ni = realloc(m->ios, m->capio * sizeof(*ni));
		if (ni == NULL)
			goto out_nomem;
		m->ios = ni;
	}
	m->ios[m->nio++] = (struct bd_io){ .op = BD_WRITE, .buf = p,
		.len = n * FS_BLOCK_SIZE, .off = blk << FS_BLOCK_SHIFT };
	return p;
out_nomem:
	m->ret = -ENOMEM;
	return NULL;
}

static int mk_flush_ios(struct mk *m)
{
	for (size_t i = 0; i < m->nio && m->ret == 0; i += 64) {
		unsigned k = (unsigned)(m->nio - i < 64 ? m->nio - i : 64);

		m->ret = bd_submit(m->bd, m->ios + i, k);
	}
	for (size_t i = 0; i < m->nbuf; i++)
		free(m->bufs[i]);
	free(m->bufs);
	m->bufs = NULL;
	m->nbuf = 0;
	m->nio = 0;
	return m->ret;
}

/*
 * The rgroup size when none was asked for: 256 MiB; for lockproto=dlm
 * halved (down to 16 MiB) until there are at least FS_MKFS_DLM_RGRPS
 * groups per journal slot, so that every node can own groups of its
 * own (fs_alloc.c) even on a small device.
 */
static unsigned auto_rgrp_mb(const struct fs_mkfs_params *p, uint64_t total)
{
	uint64_t jblocks = (uint64_t)p->slots * p->journal_mb * 256;
	uint64_t data_mb = total > jblocks ? (total - jblocks) / 256 : 0;
	unsigned mb = 256;

	if (strcmp(p->lockproto, "dlm") != 0)
		return mb;
	while (mb > 16 && data_mb / mb < (uint64_t)FS_MKFS_DLM_RGRPS * p->slots)
		mb /= 2;
	return mb;
}

static int geometry(struct mk *m, const struct fs_mkfs_params *p0,
		    uint64_t dev_blocks, char *why, size_t whylen)
{
	struct fs_sb *sb = &m->sb;
	uint64_t total = p0->total_blocks ? p0->total_blocks : dev_blocks;
	struct fs_mkfs_params pp = *p0, *p = &pp;
	uint64_t data, last, need;
	char msg[160];

	if (p->rgrp_mb == 0)
		p->rgrp_mb = auto_rgrp_mb(p, total);

	if (p->slots < 1 || p->slots > FS_MAX_SLOTS)
		return fs_why(why, whylen, -EINVAL,
			      "journal count must be 1..64");
	if (p->journal_mb < 1 || p->journal_mb > 4096)
		return fs_why(why, whylen, -EINVAL,
			      "journal size must be 1..4096 MiB");
	if (p->rgrp_mb < 1 || p->rgrp_mb > 16384)
		return fs_why(why, whylen, -EINVAL,
			      "rgroup size must be 1..16384 MiB");
	if (total > dev_blocks)
		return fs_why(why, whylen, -EINVAL,
			      "requested size exceeds the device");
	sb->block_size = FS_BLOCK_SIZE;
	sb->slot_count = p->slots;
	sb->journal_blocks = p->journal_mb * (1024 * 1024 / FS_BLOCK_SIZE);
	sb->rgrp_blocks = p->rgrp_mb * (1024 * 1024 / FS_BLOCK_SIZE);
	sb->journal_start = FS_SLOTAREA_BLK + 2ull * p->slots;
	sb->rgrp_start = sb->journal_start +
			 (uint64_t)p->slots * sb->journal_blocks;
	sb->rgrp_bitmaps = fs_rgrp_nbitmaps(sb->rgrp_blocks);
	need = sb->rgrp_start + FS_RGRP_MIN_BLOCKS;
	if (total < need) {
		snprintf(msg, sizeof(msg),
			 "device too small: %llu KiB, need at least %llu KiB "
			 "with %u journal(s) of %u MiB",
			 (unsigned long long)total * 4,
			 (unsigned long long)need * 4, p->slots,
			 p->journal_mb);
		return fs_why(why, whylen, -ENOSPC, msg);
	}
	data = total - sb->rgrp_start;
	sb->rgrp_count = (uint32_t)((data + sb->rgrp_blocks - 1) /
				    sb->rgrp_blocks);
	last = data - (uint64_t)(sb->rgrp_count - 1) * sb->rgrp_blocks;
	if (last < FS_RGRP_MIN_BLOCKS / 2 && sb->rgrp_count > 1) {
		sb->rgrp_count--;	/* too small a tail: leave it unused */
		total -= last;
	}
	sb->total_blocks = total;
	return 0;
}

/* Set bits [a, b) of the group that fall in this block [first, end). */
static void set_bits(uint8_t *bits, uint64_t first, uint64_t end,
		     uint64_t a, uint64_t b)
{
	if (a < first)
		a = first;
	if (b > end)
		b = end;
	for (uint64_t i = a; i < b;) {
		uint64_t r = i - first;

		if (r % 8 == 0 && i + 8 <= b) {	/* whole bytes at once */
			uint64_t nbytes = (b - i) / 8;

			memset(bits + r / 8, 0xff, nbytes);
			i += nbytes * 8;
			continue;
		}
		bits[r / 8] |= (uint8_t)(1u << (r % 8));
		i++;
	}
}

/* Blocks of rgroup 0 after its bitmaps that mkfs uses: the root inode
 * and the statfs records. */
static uint32_t mk_group0_used(const struct fs_sb *sb)
{
	return 1 + (sb->statfs_blk != 0 ? 1 + sb->slot_count : 0);
}

static void mk_rgroups(struct mk *m, uint64_t *nfree)
{
	const struct fs_sb *sb = &m->sb;

	*nfree = 0;
	for (uint32_t g = 0; g < sb->rgrp_count && m->ret == 0; g++) {
		uint64_t start = fs_rgrp_blk(sb, g);
		uint32_t len = fs_rgrp_len(sb, g), nbm = fs_rgrp_nbitmaps(len);
		uint32_t used = 1 + nbm + (g == 0 ? mk_group0_used(sb) : 0);
		uint8_t *p = mk_blocks(m, start, 1 + nbm);
		struct fs_rgrp_hdr *h = (void *)p;

		if (p == NULL)
			return;
		h->index = g;
		h->start = start;
		h->length = len;
		h->bitmaps = nbm;
		h->free = len - used;
		*nfree += h->free;
		h->dinodes = g == 0;
		h->inode_gen = g == 0 ? 2 : 1;
		fs_blk_seal(h, FS_BT_RGRP, start, 0);
		for (uint32_t b = 0; b < nbm; b++) {
			struct fs_bitmap_blk *bm =
				(void *)(p + (1 + b) * FS_BLOCK_SIZE);
			uint64_t first = (uint64_t)b * FS_BITMAP_BITS;

			/* header, bitmaps (and the root) used; bits past
			 * the group's end permanently set */
			set_bits(bm->bits, first, first + FS_BITMAP_BITS,
				 0, used);
			set_bits(bm->bits, first, first + FS_BITMAP_BITS,
				 len, first + FS_BITMAP_BITS);
			fs_blk_seal(bm, FS_BT_BITMAP, start + 1 + b, 0);
		}
	}
}

static void mk_root(struct mk *m, int64_t now)
{
	uint64_t ino = m->sb.root_ino;
	struct fs_dinode *di = mk_blocks(m, ino, 1);
	struct fs_btree_nhdr *n;

	if (di == NULL)
		return;
	di->mode = S_IFDIR | 0755;
	di->nlink = 2;
	di->atime = di->mtime = di->ctime = di->btime = now;
	di->generation = 1;
	di->fmt = FS_FMT_DIR_BTREE;
	di->parent = ino;
	n = (struct fs_btree_nhdr *)di->inline_area;
	n->level = 0;
	n->nkeys = 0;
	n->free_end = FS_INODE_INLINE_SIZE;
	n->magic = FS_BTREE_NMAGIC;
	fs_blk_seal(di, FS_BT_INODE, ino, 0);
}

/* The statfs records: the master with the new filesystem's counts
 * (@free blocks, the root inode), the slots' changes zero. */
static void mk_statfs(struct mk *m, uint64_t nfree)
{
	const struct fs_sb *sb = &m->sb;
	uint8_t *p;

	if (sb->statfs_blk == 0)
		return;
	p = mk_blocks(m, sb->statfs_blk, 1 + sb->slot_count);
	if (p == NULL)
		return;
	for (unsigned i = 0; i <= sb->slot_count; i++) {
		struct fs_statfs_rec *r = (void *)(p + i * FS_BLOCK_SIZE);

		r->slot = i == 0 ? FS_STATFS_MASTER : i - 1;
		if (i == 0) {
			r->free = (int64_t)nfree;
			r->dinodes = 1;
		}
		fs_blk_seal(r, FS_BT_STATFS, sb->statfs_blk + i, 0);
	}
}

static void mk_slots(struct mk *m, int64_t now, uint64_t seq0)
{
	const struct fs_sb *sb = &m->sb;
	unsigned ns = sb->slot_count;
	uint8_t *p = mk_blocks(m, FS_SLOTMAP_BLK, 1 + 2 * ns);
	struct fs_slotmap *sm = (void *)p;

	if (p == NULL)
		return;
	sm->slot_count = ns;
	fs_blk_seal(sm, FS_BT_SLOTMAP, FS_SLOTMAP_BLK, 0);
	for (unsigned s = 0; s < ns; s++) {
		struct fs_heartbeat *hb =
			(void *)(p + (1 + 2 * s) * FS_BLOCK_SIZE);
		struct fs_slotinfo *si =
			(void *)(p + (2 + 2 * s) * FS_BLOCK_SIZE);
		struct fs_jhdr *jh;
		uint64_t jb = fs_journal_blk(sb, s);

		hb->slot = s;
		hb->time = now;
		fs_blk_seal(hb, FS_BT_HEARTBEAT, fs_heartbeat_blk(s), 0);
		si->slot = s;
		fs_blk_seal(si, FS_BT_SLOTINFO, fs_slotinfo_blk(s), 0);
		jh = mk_blocks(m, jb, 2);	/* header + zeroed log 0 */
		if (jh == NULL)
			return;
		jh->slot = s;
		jh->log_blocks = sb->journal_blocks - 1;
		jh->tail_pos = 0;
		jh->tail_seq = seq0;
		jh->clean = 1;
		fs_blk_seal(jh, FS_BT_JHDR, jb, 0);
	}
}

static void random_bytes(uint8_t *p, size_t n)
{
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	ssize_t r = -1;

	if (fd >= 0) {
		r = read(fd, p, n);
		close(fd);
	}
	if (r != (ssize_t)n) {
		struct timespec ts;
		uint64_t x;

		clock_gettime(CLOCK_REALTIME, &ts);
		x = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^
		    (uint64_t)getpid();
		for (size_t i = 0; i < n; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			p[i] = (uint8_t)x;
		}
	}
}

int fs_mkfs(struct bd_dev *bd, const struct fs_mkfs_params *p, char *why,
	    size_t whylen)
{
	struct mk m = { .bd = bd };
	struct fs_sb *sb = &m.sb;
	static const uint8_t zero_uuid[16];
	int64_t now = p->now ? p->now : time(NULL);
	uint64_t seq0, nfree = 0;
	void *blk;
	int ret;

	ret = geometry(&m, p, bd_size(bd) / FS_BLOCK_SIZE, why, whylen);
	if (ret < 0)
		return ret;
	if (strcmp(p->lockproto, "nolock") != 0 &&
	    strcmp(p->lockproto, "dlm") != 0)
		return fs_why(why, whylen, -EINVAL,
			      "lockproto must be dlm or nolock");
	sb->version = FS_FORMAT_VERSION;
	sb->feature_incompat =
	    FS_FEATURE_INCOMPAT_REFLINK | FS_FEATURE_INCOMPAT_JCKPT;
	sb->root_ino = sb->rgrp_start + 1 + fs_rgrp_nbitmaps(
				fs_rgrp_len(sb, 0));
	if (!p->no_statfs) {
		sb->feature_ro_compat = FS_FEATURE_RO_COMPAT_STATFS;
		sb->statfs_blk = sb->root_ino + 1;
		if (1 + sb->rgrp_bitmaps + mk_group0_used(sb) >=
		    fs_rgrp_len(sb, 0))
			return fs_why(why, whylen, -ENOSPC,
				      "rgroup 0 is too small");
	}
	sb->ctime = now;
	memcpy(sb->uuid, p->uuid, 16);
	if (memcmp(sb->uuid, zero_uuid, 16) == 0)
		random_bytes(sb->uuid, 16);
	memcpy(&seq0, sb->uuid, 8);
	seq0 = (seq0 >> 24) | 1;	/* random start: no stale log match */
	memcpy(sb->label, p->label, sizeof(sb->label) - 1);
	memcpy(sb->lockproto, p->lockproto, sizeof(sb->lockproto) - 1);
	memcpy(sb->locktable, p->locktable, sizeof(sb->locktable) - 1);

	mk_blocks(&m, FS_SB_BLK, 2);	/* zero sb + backup first */
	mk_slots(&m, now, seq0);
	mk_rgroups(&m, &nfree);
	mk_root(&m, now);
	mk_statfs(&m, nfree);
	if (mk_flush_ios(&m) == 0)
		m.ret = bd_flush(bd);
	blk = m.ret == 0 ? mk_blocks(&m, FS_SB_BLK, 2) : NULL;
	if (blk != NULL) {
		memcpy(blk, sb, FS_BLOCK_SIZE);
		fs_blk_seal(blk, FS_BT_SB, FS_SB_BLK, 0);
		memcpy((uint8_t *)blk + FS_BLOCK_SIZE, sb, FS_BLOCK_SIZE);
		fs_blk_seal((uint8_t *)blk + FS_BLOCK_SIZE, FS_BT_SB,
			    FS_SB_BACKUP_BLK, 0);
	}
	if (mk_flush_ios(&m) == 0)
		m.ret = bd_flush(bd);
	free(m.ios);
	if (m.ret < 0)
		fs_why(why, whylen, m.ret, "write error while formatting");
	return m.ret;
}
