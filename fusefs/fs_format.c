/*
 * fs_format.c — crc32c and the block header / superblock checks of the
 * on-disk format (fs_format.h, FORMAT.md).
 *
 * crc32c: the SSE4.2 crc32 instruction when the CPU has it (checked once),
 * else a slicing-by-8 table. Both give the standard Castagnoli crc
 * (init ~0, final xor ~0); fs_crc32c(0, "123456789", 9) == 0xe3069283.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "fusefs/fs_format.h"

static uint32_t crc_table[8][256];
static int crc_hw;
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^
				crc_table[0][crc_table[t - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_sw(uint32_t c, const uint8_t *p, size_t len)
{
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		v ^= c;
		c = crc_table[7][v & 0xff] ^ crc_table[6][(v >> 8) & 0xff] ^
		    crc_table[5][(v >> 16) & 0xff] ^
		    crc_table[4][(v >> 24) & 0xff] ^
		    crc_table[3][(v >> 32) & 0xff] ^
		    crc_table[2][(v >> 40) & 0xff] ^
		    crc_table[1][(v >> 48) & 0xff] ^ crc_table[0][v >> 56];
		p += 8;
		len -= 8;
	}
	while (len-- > 0)
		c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
	return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t crc_hw_run(uint32_t c, const uint8_t *p, size_t len)
{
	uint64_t c64 = c;

	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c64 = __builtin_ia32_crc32di(c64, v);
		p += 8;
		len -= 8;
	}
	c = (uint32_t)c64;
	while (len-- > 0)
		c = __builtin_ia32_crc32qi(c, *p++);
	return c;
}
#endif

uint32_t fs_crc32c(uint32_t crc, const void *buf, size_t len)
{
	uint32_t c = ~crc;

	pthread_once(&crc_once, crc_init);
#if defined(__x86_64__)
	if (crc_hw)
		return ~crc_hw_run(c, buf, len);
#endif
	return ~crc_sw(c, buf, len);
}

static uint32_t blk_crc(const void *blk)
{
	static const uint32_t zero;
	const uint8_t *p = blk;
	uint32_t c;
	size_t off = offsetof(struct fs_blk_hdr, crc);

	c = fs_crc32c(0, p, off);
	c = fs_crc32c(c, &zero, sizeof(zero));
	return fs_crc32c(c, p + off + 4, FS_BLOCK_SIZE - off - 4);
}

void fs_blk_update_crc(void *blk)
{
	struct fs_blk_hdr *h = blk;

	h->crc = blk_crc(blk);
}

void fs_blk_seal(void *blk, unsigned type, uint64_t blkno, uint64_t seq)
{
	struct fs_blk_hdr *h = blk;

	h->magic = FS_MAGIC;
	h->type = (uint16_t)type;
	h->hflags = 0;
	h->reserved = 0;
	h->blkno = blkno;
	h->seq = seq;
	fs_blk_update_crc(blk);
}

int fs_blk_verify(const void *blk, unsigned type, uint64_t blkno)
{
	const struct fs_blk_hdr *h = blk;

	if (h->magic != FS_MAGIC || h->type == 0 || h->type >= FS_BT_MAX)
		return -EUCLEAN;
	if (type != 0 && h->type != type)
		return -EUCLEAN;
	if (h->blkno != blkno)
		return -EUCLEAN;
	if (h->crc != blk_crc(blk))
		return -EUCLEAN;
	return 0;
}

const char *fs_blk_type_name(unsigned type)
{
	static const char *const names[FS_BT_MAX] = {
		[FS_BT_SB] = "superblock",
		[FS_BT_SLOTMAP] = "slot map",
		[FS_BT_HEARTBEAT] = "heartbeat",
		[FS_BT_SLOTINFO] = "slotinfo",
		[FS_BT_JHDR] = "journal header",
		[FS_BT_JDESC] = "journal descriptor",
		[FS_BT_JCOMMIT] = "journal commit",
		[FS_BT_JCKPT] = "journal checkpoint",
		[FS_BT_STATFS] = "statfs record",
		[FS_BT_RGRP] = "rgroup header",
		[FS_BT_BITMAP] = "bitmap",
		[FS_BT_INODE] = "inode",
		[FS_BT_BTREE] = "btree node",
		[FS_BT_XATTR] = "xattr block",
		[FS_BT_REFCOUNT] = "refcount block",
	};

	if (type >= FS_BT_MAX || names[type] == NULL)
		return "?";
	return names[type];
}

static int sb_fail(char *why, size_t whylen, int err, const char *msg)
{
	if (why != NULL && whylen > 0)
		snprintf(why, whylen, "%s", msg);
	return err;
}

/* The statfs records (ro_compat STATFS) lie in rgroup 0's data area,
 * after its header and bitmaps; none without the feature. */
static int statfs_geometry_ok(const struct fs_sb *sb)
{
	uint64_t first =
	    fs_rgrp_blk(sb, 0) + 1 + fs_rgrp_nbitmaps(fs_rgrp_len(sb, 0));

	if (!(sb->feature_ro_compat & FS_FEATURE_RO_COMPAT_STATFS))
		return sb->statfs_blk == 0;
	return sb->statfs_blk >= first &&
	       sb->statfs_blk + 1 + sb->slot_count <=
		       fs_rgrp_blk(sb, 0) + fs_rgrp_len(sb, 0);
}

static int sb_geometry_ok(const struct fs_sb *sb)
{
	uint64_t jend, rgend;

	if (sb->block_size != FS_BLOCK_SIZE)
		return 0;
	if (sb->slot_count < 1 || sb->slot_count > FS_MAX_SLOTS)
		return 0;
	if (sb->journal_blocks < 64)
		return 0;
	if (sb->journal_start != FS_SLOTAREA_BLK + 2ull * sb->slot_count)
		return 0;
	jend = sb->journal_start +
	       (uint64_t)sb->slot_count * sb->journal_blocks;
	if (sb->rgrp_start != jend)
		return 0;
	if (sb->rgrp_blocks < FS_RGRP_MIN_BLOCKS || sb->rgrp_count < 1)
		return 0;
	if (sb->rgrp_bitmaps != fs_rgrp_nbitmaps(sb->rgrp_blocks))
		return 0;
	rgend = sb->rgrp_start +
		(uint64_t)(sb->rgrp_count - 1) * sb->rgrp_blocks;
	if (rgend >= sb->total_blocks)
		return 0;
	if (sb->total_blocks - rgend > sb->rgrp_blocks)
		return 0;
	if (sb->total_blocks - rgend < FS_RGRP_MIN_BLOCKS / 2)
		return 0;
	if (sb->root_ino < sb->rgrp_start || sb->root_ino >= sb->total_blocks)
		return 0;
	return statfs_geometry_ok(sb);
}

int fs_sb_check(const struct fs_sb *sb, uint64_t dev_blocks, int rw,
		char *why, size_t whylen)
{
	char msg[160];

	if (sb->version > FS_FORMAT_VERSION) {
		snprintf(msg, sizeof(msg),
			 "format version %u is newer than this ucfs "
			 "supports (%u)", sb->version, FS_FORMAT_VERSION);
		return sb_fail(why, whylen, -EPROTONOSUPPORT, msg);
	}
	if (sb->feature_incompat & ~FS_FEATURE_INCOMPAT_SUPP) {
		snprintf(msg, sizeof(msg),
			 "unknown incompatible features 0x%llx",
			 (unsigned long long)(sb->feature_incompat &
					      ~FS_FEATURE_INCOMPAT_SUPP));
		return sb_fail(why, whylen, -EPROTONOSUPPORT, msg);
	}
	if (rw && (sb->feature_ro_compat & ~FS_FEATURE_RO_COMPAT_SUPP)) {
		snprintf(msg, sizeof(msg),
			 "unknown ro_compat features 0x%llx: mount read-only",
			 (unsigned long long)(sb->feature_ro_compat &
					      ~FS_FEATURE_RO_COMPAT_SUPP));
		return sb_fail(why, whylen, -EPROTONOSUPPORT, msg);
	}
	if (!sb_geometry_ok(sb))
		return sb_fail(why, whylen, -EUCLEAN,
			       "superblock geometry is inconsistent");
	if (dev_blocks != 0 && dev_blocks < sb->total_blocks) {
		snprintf(msg, sizeof(msg),
			 "device has %llu blocks but the filesystem has %llu: "
			 "truncated image",
			 (unsigned long long)dev_blocks,
			 (unsigned long long)sb->total_blocks);
		return sb_fail(why, whylen, -EFBIG, msg);
	}
	return 0;
}

uint64_t fs_dirkey_hash(const char *name, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= 0x100000001b3ull;
	}
	/* finalizer: spread the low bits (FNV's are weak) */
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h &= FS_DIRKEY_HASH_MASK;
	return h < FS_DIRKEY_MIN ? FS_DIRKEY_MIN : h;
}
