/*
 * fs_format.h — the ucfs on-disk format: every structure, constant and
 * the encode/verify helpers. FORMAT.md beside this file is the prose
 * description; the two must agree.
 *
 * Conventions: 4096-byte blocks, block numbers u64, all integers
 * little-endian (the host must be little-endian: the structs are used in
 * place). Structs are laid out with natural alignment and explicit
 * padding so no compiler padding exists; static_asserts pin every size
 * and the offsets other tools rely on.
 *
 * Every metadata block starts with struct fs_blk_hdr (magic, type, own
 * block number, sequence, crc32c of the whole block computed with the crc
 * field zero). fs_blk_verify() checks all of it and returns -EUCLEAN for
 * a bad block; a bad block is never trusted.
 *
 * Sections: constants / block header / superblock / slot map, heartbeat,
 * slotinfo / journal / resource groups / inode / B+tree node / xattr /
 * helpers (fs_format.c).
 */
#ifndef UCFS_FS_FORMAT_H
#define UCFS_FS_FORMAT_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ucfs uses its on-disk structs in place: little-endian hosts only"
#endif

/* ---- constants -------------------------------------------------------- */

#define FS_BLOCK_SIZE 4096u
#define FS_BLOCK_SHIFT 12
#define FS_MAGIC 0x53464355u /* "UCFS" as bytes on disk */
#define FS_FORMAT_VERSION 1u

/* Feature masks. A mount refuses any unknown incompat bit; a rw mount
 * refuses unknown ro_compat bits; unknown compat bits are ignored. */
/* incompat: files may share blocks (refcount trees); mkfs sets it */
#define FS_FEATURE_INCOMPAT_REFLINK 0x1ull
/* incompat: journals may hold checkpoint records (FS_BT_JCKPT); mkfs
 * sets it. Without it a journal moves its header instead. */
#define FS_FEATURE_INCOMPAT_JCKPT 0x2ull
/* ro_compat: statfs records (FS_BT_STATFS: a master record and one
 * change record per slot, from sb.statfs_blk on); every allocation and
 * free moves its slot's change in the same transaction. mkfs sets it.
 * A ucfs without it would change the groups without the records, hence
 * read-only there. */
#define FS_FEATURE_RO_COMPAT_STATFS 0x1ull
#define FS_FEATURE_COMPAT_SUPP 0ull
#define FS_FEATURE_RO_COMPAT_SUPP FS_FEATURE_RO_COMPAT_STATFS
#define FS_FEATURE_INCOMPAT_SUPP \
	(FS_FEATURE_INCOMPAT_REFLINK | FS_FEATURE_INCOMPAT_JCKPT)

/* Fixed layout: blocks 0..2, then 2 blocks per slot, then journals, then
 * resource groups. */
#define FS_SB_BLK 0ull
#define FS_SB_BACKUP_BLK 1ull
#define FS_SLOTMAP_BLK 2ull
#define FS_SLOTAREA_BLK 3ull /* slot s: heartbeat 3+2s, slotinfo 4+2s */
#define FS_MAX_SLOTS 64u

/* Block types (fs_blk_hdr.type). 0 is never valid on disk. */
enum fs_blk_type {
	FS_BT_SB = 1,
	FS_BT_SLOTMAP = 2,
	FS_BT_HEARTBEAT = 3,
	FS_BT_SLOTINFO = 4,
	FS_BT_JHDR = 5,		/* journal header: tail position + sequence */
	FS_BT_JDESC = 6,	/* journal descriptor: home block numbers */
	FS_BT_JCOMMIT = 7,	/* journal commit record */
	FS_BT_RGRP = 8,		/* resource group header */
	FS_BT_BITMAP = 9,	/* resource group bitmap block */
	FS_BT_INODE = 10,
	FS_BT_BTREE = 11,	/* B+tree node (not the inline root) */
	FS_BT_XATTR = 12,	/* external xattr block of an inode */
	FS_BT_REFCOUNT = 13,	/* root of a refcount tree */
	FS_BT_JCKPT = 14,	/* journal checkpoint record */
	FS_BT_STATFS = 15,	/* statfs master or change record */
	FS_BT_MAX = 16
};

/* ---- block header ----------------------------------------------------- */

struct fs_blk_hdr {
	uint32_t magic;		/* FS_MAGIC */
	uint16_t type;		/* enum fs_blk_type */
	uint16_t hflags;	/* 0; reserved */
	uint32_t crc;		/* crc32c of the block with crc = 0 */
	uint32_t reserved;
	uint64_t blkno;		/* this block's own number (home location) */
	uint64_t seq;		/* journal: tx sequence; others: the sequence
				   of the transaction that last wrote it */
};
static_assert(sizeof(struct fs_blk_hdr) == 32, "hdr size");
static_assert(offsetof(struct fs_blk_hdr, crc) == 8, "hdr crc");
static_assert(offsetof(struct fs_blk_hdr, blkno) == 16, "hdr blkno");

/* ---- superblock (block 0, backup in block 1) -------------------------- */

#define FS_LABEL_MAX 64
#define FS_LOCKPROTO_MAX 16
#define FS_LOCKTABLE_MAX 64

struct fs_sb {
	struct fs_blk_hdr hdr;
	uint32_t version;		/* FS_FORMAT_VERSION */
	uint32_t block_size;		/* FS_BLOCK_SIZE */
	uint64_t feature_compat;
	uint64_t feature_ro_compat;
	uint64_t feature_incompat;
	uint64_t total_blocks;		/* device must hold at least this */
	uint32_t slot_count;		/* journals / slots, 1..FS_MAX_SLOTS */
	uint32_t journal_blocks;	/* blocks per journal */
	uint64_t journal_start;		/* first block of journal 0 */
	uint64_t rgrp_start;		/* first block of rgroup 0 */
	uint32_t rgrp_blocks;		/* blocks per rgroup (last: shorter) */
	uint32_t rgrp_count;
	uint32_t rgrp_bitmaps;		/* bitmap blocks per full rgroup */
	uint32_t pad0;
	uint64_t root_ino;		/* root directory inode block */
	int64_t ctime;			/* mkfs time, seconds since epoch */
	uint8_t uuid[16];
	char label[FS_LABEL_MAX];	/* NUL-padded */
	char lockproto[FS_LOCKPROTO_MAX];	/* "dlm" or "nolock" */
	char locktable[FS_LOCKTABLE_MAX];	/* "cluster:fsname" */
	uint64_t statfs_blk;		/* ro_compat STATFS: the master record,
					   then slot s's change at + 1 + s;
					   0 without the feature */
	uint8_t reserved[FS_BLOCK_SIZE - 296];
};
static_assert(sizeof(struct fs_sb) == FS_BLOCK_SIZE, "sb size");
static_assert(offsetof(struct fs_sb, version) == 32, "sb version");
static_assert(offsetof(struct fs_sb, uuid) == 128, "sb uuid");
static_assert(offsetof(struct fs_sb, statfs_blk) == 288, "sb statfs");

/* ---- slot map (block 2), heartbeat and slotinfo blocks ---------------- */

enum fs_slot_state {
	FS_SLOT_FREE = 0,	/* clean: journal checkpointed, nobody */
	FS_SLOT_MOUNTED = 1,	/* claimed by node_id (or crashed there) */
};

#define FS_SLOT_NOLOCK 0x1u	/* claimed by a lockproto=nolock mount */

struct fs_slot_ent {
	uint32_t state;		/* enum fs_slot_state */
	uint32_t flags;		/* FS_SLOT_* */
	uint32_t node_id;	/* cluster node id; 0 for nolock */
	uint32_t pad;
	uint64_t generation;	/* bumped on every claim */
	int64_t mount_time;	/* seconds since epoch of the claim */
};
static_assert(sizeof(struct fs_slot_ent) == 32, "slot ent");

struct fs_slotmap {
	struct fs_blk_hdr hdr;
	uint32_t slot_count;
	uint32_t pad;
	struct fs_slot_ent slots[FS_MAX_SLOTS];
	uint8_t reserved[FS_BLOCK_SIZE - 40 - 32 * FS_MAX_SLOTS];
};
static_assert(sizeof(struct fs_slotmap) == FS_BLOCK_SIZE, "slotmap");

enum fs_hb_block_state {
	FS_HB_STOPPED = 0, /* never beat, or unmounted cleanly */
	FS_HB_LIVE = 1,	   /* node_id beats here (or crashed here) */
	FS_HB_FENCED = 2,  /* node_id fenced itself: its last write */
};

struct fs_heartbeat {
	struct fs_blk_hdr hdr;
	uint32_t node_id;
	uint32_t slot;
	uint64_t counter;	/* incremented on every beat */
	int64_t time;		/* seconds since epoch of the last beat */
	uint64_t generation;	/* random, chosen at each mount */
	uint32_t state;		/* enum fs_hb_block_state */
	uint32_t interval_ms;	/* the writer's hb_interval */
	uint32_t timeout_ms;	/* the writer's hb_timeout */
	uint32_t addr;		/* the writer's IPv4 address (network order) */
	uint16_t port;		/* ... and lock manager port */
	uint16_t pad;
	uint8_t reserved[FS_BLOCK_SIZE - 84];
};
static_assert(offsetof(struct fs_heartbeat, generation) == 56, "hb gen");
static_assert(sizeof(struct fs_heartbeat) == FS_BLOCK_SIZE, "hb");

/* Per-slot state that is journaled (written through transactions). */
/* A free log entry (dlm): blocks [start, start + len) of one rgroup to
 * be freed in its bitmap; FS_FLOG_INODE: they are inode blocks. */
struct fs_flog_ent {
	uint64_t start;
	uint32_t len;
	uint32_t flags;
};
#define FS_FLOG_INODE 0x1u
#define FS_FLOG_MAX 251u

struct fs_slotinfo {
	struct fs_blk_hdr hdr;
	uint32_t slot;
	uint32_t pad;
	uint64_t orphan_head;	/* first inode of the orphan list, 0 none */
	uint64_t la_start;	/* local-alloc window (later issue), 0 none */
	uint64_t la_len;
	uint32_t flog_count; /* free log entries (dlm), 0 none */
	uint32_t flog_pad;
	struct fs_flog_ent flog[FS_FLOG_MAX];
	uint8_t reserved[FS_BLOCK_SIZE - 72 - 16 * FS_FLOG_MAX];
};
static_assert(sizeof(struct fs_slotinfo) == FS_BLOCK_SIZE, "slotinfo");

/* ---- statfs records (ro_compat STATFS) ------------------------------- */
/*
 * The master record holds the filesystem's free blocks and inodes as of
 * the last fold; slot s's change record what slot s allocated (-) and
 * freed (+) since its last fold. Invariant after every transaction: the
 * master's counts plus every slot's change equal the sums of the rgroup
 * headers' free and dinodes.
 */
#define FS_STATFS_MASTER UINT32_MAX	/* fs_statfs_rec.slot of the master */

struct fs_statfs_rec {
	struct fs_blk_hdr hdr;
	uint32_t slot;		/* the change's slot, or FS_STATFS_MASTER */
	uint32_t pad;
	int64_t free;		/* master: free blocks; change: delta */
	int64_t dinodes;	/* master: inodes; change: delta */
	uint8_t reserved[FS_BLOCK_SIZE - 56];
};
static_assert(sizeof(struct fs_statfs_rec) == FS_BLOCK_SIZE, "statfs");

/* ---- journal ---------------------------------------------------------- */
/*
 * Journal of slot s: blocks [journal_start + s * journal_blocks, +J).
 * Block 0 is the journal header (FS_BT_JHDR); blocks 1..J-1 form a
 * circular log. A transaction with sequence S is, at consecutive log
 * positions (wrapping): one or more descriptors (JDESC, hdr.seq = S)
 * each followed by the images of its non-revoke entries, then one commit
 * record (JCOMMIT, hdr.seq = S) whose crc covers every block of the
 * transaction before it. Images are stored verbatim (they carry their own
 * home header). Between two transactions (incompat JCKPT) there may be
 * checkpoint records (JCKPT, hdr.seq = the next transaction's sequence):
 * every transaction before one is written home, so a replay drops what it
 * collected before it. See FORMAT.md for replay rules.
 */

struct fs_jhdr {
	struct fs_blk_hdr hdr;
	uint32_t slot;
	uint32_t log_blocks;	/* J - 1 */
	uint64_t tail_pos;	/* log index (0..J-2) of the oldest live tx */
	uint64_t tail_seq;	/* its sequence (the next one if clean) */
	uint32_t clean;		/* 1: nothing to replay past tail */
	uint32_t pad;
	uint8_t reserved[FS_BLOCK_SIZE - 64];
};
static_assert(sizeof(struct fs_jhdr) == FS_BLOCK_SIZE, "jhdr");

#define FS_JDESC_REVOKE 0x1u	/* no image follows: older images of this
				   block must not be replayed */
struct fs_jdesc_ent {
	uint64_t blkno;		/* home block number */
	uint32_t flags;		/* FS_JDESC_* */
	uint32_t pad;
};
static_assert(sizeof(struct fs_jdesc_ent) == 16, "jdesc ent");

#define FS_JDESC_MAX ((FS_BLOCK_SIZE - 40) / 16)	/* 253 */
struct fs_jdesc {
	struct fs_blk_hdr hdr;
	uint32_t count;		/* entries used */
	uint32_t pad;
	struct fs_jdesc_ent ent[FS_JDESC_MAX];
	uint8_t reserved[FS_BLOCK_SIZE - 40 - 16 * FS_JDESC_MAX];
};
static_assert(sizeof(struct fs_jdesc) == FS_BLOCK_SIZE, "jdesc");

struct fs_jcommit {
	struct fs_blk_hdr hdr;
	uint32_t nblocks;	/* blocks of the tx before this record */
	uint32_t tx_crc;	/* crc32c chained over those blocks */
	int64_t time_sec;
	uint32_t time_nsec;
	uint32_t pad;
	uint8_t reserved[FS_BLOCK_SIZE - 56];
};
static_assert(sizeof(struct fs_jcommit) == FS_BLOCK_SIZE, "jcommit");

struct fs_jckpt {
	struct fs_blk_hdr hdr;	/* seq: the next transaction's */
	uint64_t home_seq;	/* newest transaction written home (seq - 1) */
	int64_t time_sec;
	uint32_t time_nsec;
	uint32_t pad;
	uint8_t reserved[FS_BLOCK_SIZE - 56];
};
static_assert(sizeof(struct fs_jckpt) == FS_BLOCK_SIZE, "jckpt");

/* ---- resource groups -------------------------------------------------- */
/*
 * Rgroup g covers blocks [rgrp_start + g * rgrp_blocks, + length). Its
 * first block is the header, the next `bitmaps` blocks the bitmap; one bit
 * per block of the group (including header and bitmaps, marked used),
 * bit set = in use. Bit i of the group is bit (i % FS_BITMAP_BITS) of
 * bitmap block i / FS_BITMAP_BITS, byte (bit / 8), mask 1 << (bit % 8).
 */
#define FS_BITMAP_BYTES (FS_BLOCK_SIZE - sizeof(struct fs_blk_hdr))
#define FS_BITMAP_BITS (FS_BITMAP_BYTES * 8)	/* 32512 */
#define FS_RGRP_MIN_BLOCKS 64u

struct fs_rgrp_hdr {
	struct fs_blk_hdr hdr;
	uint32_t index;		/* g */
	uint32_t flags;		/* 0; reserved */
	uint64_t start;		/* = hdr.blkno */
	uint32_t length;	/* blocks in this group */
	uint32_t bitmaps;	/* bitmap blocks after the header */
	uint32_t free;		/* free blocks (bits clear) */
	uint32_t dinodes;	/* inodes allocated in this group */
	uint64_t inode_gen;	/* next inode generation handed out */
	uint8_t reserved[FS_BLOCK_SIZE - 72];
};
static_assert(sizeof(struct fs_rgrp_hdr) == FS_BLOCK_SIZE, "rgrp");

struct fs_bitmap_blk {
	struct fs_blk_hdr hdr;
	uint8_t bits[FS_BITMAP_BYTES];
};
static_assert(sizeof(struct fs_bitmap_blk) == FS_BLOCK_SIZE, "bitmap");

/* ---- inode (one block; ino = its block number) ------------------------ */

/* di_fmt: how the inline area is used */
enum fs_data_fmt {
	FS_FMT_INLINE = 1,	/* file data / symlink target inline */
	FS_FMT_EXTENTS = 2,	/* file: B+tree of extents, root inline */
	FS_FMT_DIR_BTREE = 3,	/* directory: B+tree of entries, root inline */
	FS_FMT_NONE = 4,	/* devices, fifos, sockets */
};

#define FS_INODE_INLINE_OFF 256u
#define FS_INODE_INLINE_SIZE (FS_BLOCK_SIZE - FS_INODE_INLINE_OFF) /* 3840 */

struct fs_dinode {
	struct fs_blk_hdr hdr;
	uint32_t mode;
	uint32_t uid;
	uint32_t gid;
	uint32_t nlink;
	uint64_t size;
	uint64_t blocks;	/* 4 KiB blocks allocated beyond the inode */
	int64_t atime;
	int64_t mtime;
	int64_t ctime;
	int64_t btime;
	uint32_t atime_nsec;
	uint32_t mtime_nsec;
	uint32_t ctime_nsec;
	uint32_t btime_nsec;
	uint64_t generation;	/* from the rgroup's inode_gen */
	uint64_t rdev;
	uint64_t orphan_next;	/* next inode on the slot's orphan list */
	uint64_t xattr_blk;	/* external xattr block (FS_BT_XATTR) or 0 */
	uint32_t flags;		/* reserved for inode flags */
	uint16_t fmt;		/* enum fs_data_fmt */
	uint16_t pad0;
	uint64_t parent;	/* hint only (fsck); 0 if unknown */
	uint64_t refcount_blk;	/* refcount tree (FS_BT_REFCOUNT) of its
				   shared extents, or 0 */
	uint8_t reserved[FS_INODE_INLINE_OFF - 168];
	uint8_t inline_area[FS_INODE_INLINE_SIZE];
};
static_assert(sizeof(struct fs_dinode) == FS_BLOCK_SIZE, "dinode");
static_assert(offsetof(struct fs_dinode, generation) == 112, "di gen");
static_assert(offsetof(struct fs_dinode, fmt) == 148, "di fmt");
static_assert(offsetof(struct fs_dinode, inline_area) ==
	      FS_INODE_INLINE_OFF, "di inline");

/* ---- B+tree node ------------------------------------------------------ */
/*
 * One node format, used both for the root (inside an inode's inline area,
 * size FS_INODE_INLINE_SIZE) and for full nodes (FS_BT_BTREE blocks,
 * whose node area is FS_BTREE_NODE_SIZE bytes after struct fs_btree_blk).
 * Offsets inside a node are relative to the node's start.
 *
 * Leaf (level 0): after the node header, an array of nkeys slots sorted by
 * key {key, off, len}; values live in a heap at the end of the node
 * growing down; free_end is the lowest heap offset in use (node size when
 * empty). Deleting compacts the heap.
 * Internal (level > 0): after the header an array of nkeys {key, child}
 * sorted by key from key 1 on; child i holds keys >= key i (key 0 is
 * -infinity: its stored value is no bound and may exceed key 1).
 */
struct fs_btree_nhdr {
	uint16_t level;		/* 0 = leaf */
	uint16_t nkeys;
	uint16_t free_end;	/* leaf: start of the value heap */
	uint16_t magic;		/* FS_BTREE_NMAGIC: sanity of inline roots */
	uint32_t pad;
	uint32_t reserved;
};
static_assert(sizeof(struct fs_btree_nhdr) == 16, "bt nhdr");
#define FS_BTREE_NMAGIC 0xB7EEu

struct fs_btree_leaf_slot {
	uint64_t key;
	uint16_t off;
	uint16_t len;
	uint32_t pad;
};
static_assert(sizeof(struct fs_btree_leaf_slot) == 16, "bt slot");

struct fs_btree_ptr {
	uint64_t key;
	uint64_t child;
};
static_assert(sizeof(struct fs_btree_ptr) == 16, "bt ptr");

#define FS_BTREE_VAL_MAX 320u	/* largest value a tree accepts */
#define FS_BTREE_MAX_DEPTH 8u

struct fs_btree_blk {
	struct fs_blk_hdr hdr;
	uint64_t owner;		/* inode that owns the tree */
	uint64_t pad;
	/* node follows: FS_BTREE_NODE_SIZE bytes */
};
static_assert(sizeof(struct fs_btree_blk) == 48, "bt blk");
#define FS_BTREE_NODE_OFF 48u
#define FS_BTREE_NODE_SIZE (FS_BLOCK_SIZE - FS_BTREE_NODE_OFF)	/* 4048 */

/* The root block of a refcount tree, shared by every inode whose
 * refcount_blk names it: a B+tree keyed by physical block. */
struct fs_refcount_blk {
	struct fs_blk_hdr hdr;
	uint64_t users;		/* inodes naming this block */
	uint64_t pad;
	/* root node follows: FS_BTREE_NODE_SIZE bytes */
};
static_assert(sizeof(struct fs_refcount_blk) == FS_BTREE_NODE_OFF, "rc");

/* Refcount tree value: blocks [key, key + len) are each mapped by
 * `count` extents (>= 2); a shared extent's block without a record is
 * mapped once. */
struct fs_refcount_val {
	uint32_t len;
	uint32_t count;
};
static_assert(sizeof(struct fs_refcount_val) == 8, "refcount val");

/* B+tree value formats used by the namespace layer. */
#define FS_EXT_UNWRITTEN 0x1u
#define FS_EXT_SHARED 0x2u	/* counted in the inode's refcount tree */
struct fs_extent_val {
	uint64_t phys;		/* first physical block */
	uint32_t len;		/* blocks */
	uint32_t flags;		/* FS_EXT_* */
};
static_assert(sizeof(struct fs_extent_val) == 16, "extent");

struct fs_dirent_val {
	uint64_t ino;
	uint8_t type;		/* DT_* */
	uint8_t namelen;
	uint8_t pad[6];
	char name[];		/* namelen bytes, not NUL-terminated */
};
static_assert(offsetof(struct fs_dirent_val, name) == 16, "dirent hdr");
#define FS_DIR_HASH_PROBES 16u

/* ---- external xattr block --------------------------------------------- */
/*
 * Entries packed from FS_XATTR_DATA_OFF: {u8 ns, u8 namelen, u16 vlen,
 * name, value}, each padded to 4 bytes; used = bytes in use. The namespace
 * layer owns the entry format (FORMAT.md).
 */
struct fs_xattr_blk {
	struct fs_blk_hdr hdr;
	uint64_t owner;
	uint32_t used;
	uint32_t count;
	uint8_t data[FS_BLOCK_SIZE - 48];
};
static_assert(sizeof(struct fs_xattr_blk) == FS_BLOCK_SIZE, "xattr");

/* ---- helpers (fs_format.c) -------------------------------------------- */

/* crc32c (Castagnoli) of @len bytes, continuing from @crc (start with 0). */
uint32_t fs_crc32c(uint32_t crc, const void *buf, size_t len);

/*
 * The B+tree key of a directory entry named @name (@len bytes): FNV-1a
 * with a 64-bit finalizer, masked to FS_DIRKEY_HASH_MASK (low 4 bits are
 * the probe 0..15) and at least FS_DIRKEY_MIN (keys below it are left for
 * "." and ".." cookies). An entry's key lies in [hash, hash + 15]. Part of
 * the on-disk format: changing it breaks every existing directory.
 */
#define FS_DIRKEY_HASH_MASK 0x3FFFFFFFFFFFFFF0ull
#define FS_DIRKEY_MIN 16u
uint64_t fs_dirkey_hash(const char *name, size_t len);

/* Fill in the header of block @blk (FS_BLOCK_SIZE bytes): magic, type,
 * blkno, seq; then compute and store the crc. Call after every change,
 * right before the block is written (the journal does it for journaled
 * blocks). */
void fs_blk_seal(void *blk, unsigned type, uint64_t blkno, uint64_t seq);
/* Recompute the crc only (header already filled in). */
void fs_blk_update_crc(void *blk);

/* Verify magic, type (0 = any valid type), blkno and crc of @blk.
 * 0 or -EUCLEAN. Never modifies @blk. */
int fs_blk_verify(const void *blk, unsigned type, uint64_t blkno);

/* Human-readable name of a block type ("inode", ...; "?" if unknown). */
const char *fs_blk_type_name(unsigned type);

/* Superblock semantic checks beyond fs_blk_verify (version, features,
 * geometry consistency). @dev_blocks: device size in blocks (0: skip the
 * truncation check). @rw: also refuse unknown ro_compat features.
 * 0, -EPROTONOSUPPORT (newer version / unknown feature), -EUCLEAN
 * (inconsistent geometry), -EFBIG (device smaller than total_blocks:
 * truncated image). On error a one-line reason goes to @why (may be
 * NULL). */
int fs_sb_check(const struct fs_sb *sb, uint64_t dev_blocks, int rw,
		char *why, size_t whylen);

/* Geometry helpers derived from a verified superblock. */
static inline uint64_t fs_journal_blk(const struct fs_sb *sb, unsigned slot)
{
	return sb->journal_start + (uint64_t)slot * sb->journal_blocks;
}
static inline uint64_t fs_heartbeat_blk(unsigned slot)
{
	return FS_SLOTAREA_BLK + 2ull * slot;
}
static inline uint64_t fs_slotinfo_blk(unsigned slot)
{
	return FS_SLOTAREA_BLK + 2ull * slot + 1;
}
/* The statfs records (ro_compat STATFS; 0 without it). */
static inline uint64_t fs_statfs_master_blk(const struct fs_sb *sb)
{
	return sb->statfs_blk;
}
static inline uint64_t fs_statfs_change_blk(const struct fs_sb *sb,
					    unsigned slot)
{
	return sb->statfs_blk == 0 ? 0 : sb->statfs_blk + 1 + slot;
}
static inline uint64_t fs_rgrp_blk(const struct fs_sb *sb, uint32_t g)
{
	return sb->rgrp_start + (uint64_t)g * sb->rgrp_blocks;
}
/* The rgroup of block @blk in the geometry of groups of @blocks blocks
 * from block @start, @count of them: UINT32_MAX outside every group. */
static inline uint32_t fs_rgrp_index(uint64_t start, uint32_t blocks,
				     uint32_t count, uint64_t blk)
{
	uint64_t g;

	if (blk < start || blocks == 0)
		return UINT32_MAX;
	g = (blk - start) / blocks;
	return g < count ? (uint32_t)g : UINT32_MAX;
}
/* The rgroup holding block @blk, UINT32_MAX outside (the superblock
 * area, the journals, past the end). */
static inline uint32_t fs_rgrp_of(const struct fs_sb *sb, uint64_t blk)
{
	if (blk >= sb->total_blocks)
		return UINT32_MAX;
	return fs_rgrp_index(sb->rgrp_start, sb->rgrp_blocks, sb->rgrp_count,
			     blk);
}
/* Blocks in rgroup g (the last one may be shorter). */
static inline uint32_t fs_rgrp_len(const struct fs_sb *sb, uint32_t g)
{
	uint64_t s = fs_rgrp_blk(sb, g);
	uint64_t e = s + sb->rgrp_blocks;

	if (e > sb->total_blocks)
		e = sb->total_blocks;
	return (uint32_t)(e - s);
}
static inline uint32_t fs_rgrp_nbitmaps(uint32_t len)
{
	return (len + FS_BITMAP_BITS - 1) / FS_BITMAP_BITS;
}

#endif /* UCFS_FS_FORMAT_H */
