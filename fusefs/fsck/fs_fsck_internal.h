/*
 * fs_fsck_internal.h — state shared by the fsck files: fs_fsck.c (the
 * checks), fs_fsck_journal.c (the journal overlay) and fs_fsck_repair.c
 * (the fixes of fsck -y).
 *
 * Locking: none. One struct fsck belongs to one fs_fsck_run() call on one
 * thread.
 */
#ifndef UCFS_FS_FSCK_INTERNAL_H
#define UCFS_FS_FSCK_INTERNAL_H

#include <stdint.h>

#include "blockdev/bd.h"
#include "fusefs/fs_format.h"
#include "fusefs/fsck/fs_fsck.h"

/* Problem kinds: repeated messages of a kind are capped; repair runs
 * only if every problem found is of a kind up to K_LAST_FIXABLE. */
enum fsck_kind {
	K_LINK, K_LEAK, K_FREE, K_COUNT, K_DSIZE, K_PARENT, K_BITMAP,
	K_SBBACKUP, K_STATFS, K_LAST_FIXABLE = K_STATFS,
	K_SB, K_META, K_RGRP, K_TREE, K_INODE, K_DIR, K_ORPHAN, K_DUP,
	K_JOURNAL, K_LOST, K_REFCOUNT, K_NKINDS
};

/* One block image in the overlay, by home block number: replayed from a
 * journal, or (repair) fixed and not yet written. */
struct fsck_ovl_ent {
	uint64_t blkno;		/* 0: empty slot (block 0 is never replayed) */
	void *data;
	int dirty;		/* repair: to be written home */
};

/* Per-inode record of the walk. */
struct fsck_ino {
	uint64_t ino;		/* 0: empty slot */
	uint64_t parent;	/* dirs: the directory that names it */
	uint32_t nlink;		/* on disk */
	uint32_t names;		/* directory entries naming it */
	uint32_t subdirs;	/* dirs: child directories */
	uint32_t mode;
	uint8_t checked;	/* inode block read and checked */
	uint8_t bad;		/* block unreadable/invalid */
	uint8_t orphan;		/* found on an orphan list */
	uint8_t size_bad;	/* dirs: size field != entries */
	uint8_t parent_bad;	/* dirs: parent field != naming dir */
	uint8_t shares;		/* files: uses a refcount tree */
	uint64_t entries;	/* dirs: entries found */
};

/* A device block mapped by shared extents (FS_EXT_SHARED). */
struct fsck_shared {
	uint64_t blk;
	uint32_t refs;	  /* shared extents mapping it */
	uint32_t counted; /* the refcount tree's count for it */
};

/* A refcount tree named by inodes. */
struct fsck_rtree {
	uint64_t blk;
	uint64_t users; /* inodes whose refcount_blk names it */
};

/* fs_fsck_tab.c: records of @esize bytes keyed by their first field, a
 * nonzero uint64_t. Zero-initialize with .esize set; free with
 * fsck_tab_free. */
struct fsck_tab {
	uint8_t *ent;		/* cap records; key 0: empty slot */
	size_t esize, cap, n;
};

/* The record of @key, or NULL. */
void *fsck_tab_find(const struct fsck_tab *t, uint64_t key);
/* The record of @key, added (zeroed but for the key) if absent; NULL if
 * out of memory. Moves records: earlier pointers become invalid. */
void *fsck_tab_get(struct fsck_tab *t, uint64_t key);
/* The record in slot @i (< cap), or NULL if the slot is empty. */
void *fsck_tab_at(const struct fsck_tab *t, size_t i);
void fsck_tab_free(struct fsck_tab *t);

struct fsck {
	struct bd_dev *bd;
	const struct fs_fsck_opts *o;
	struct fs_fsck_result *res;
	struct fs_sb sb;	/* the superblock in use */
	uint64_t dev_blocks;
	uint64_t nblocks;	/* sb.total_blocks once validated */
	void *buf;		/* scratch blocks, BD_ALIGN-aligned */
	void *buf2;
	void *buf3;
	struct fsck_tab ovl;	/* journal overlay: fsck_ovl_ent */
	/* walk state */
	uint8_t *reach;		/* bit per block: reachable */
	uint8_t *dup;		/* bit per block: reached more than once */
	uint8_t *live;		/* repair: reach without the orphans */
	struct fsck_tab inos;	/* fsck_ino by inode number */
	struct fsck_tab shared; /* fsck_shared by device block */
	struct fsck_tab rtrees; /* fsck_rtree by root block */
	uint64_t *queue;	/* directories to walk */
	size_t q_head, q_tail, q_cap;
	uint32_t *ginodes;	/* per rgroup: inodes found in it */
	int64_t sf_free;	/* statfs records: master + changes */
	int64_t sf_inodes;
	unsigned sf_bad;		/* statfs records unusable */
	uint64_t reported[K_NKINDS];	/* problems per kind */
};

static inline int fsck_bit_get(const uint8_t *map, uint64_t b)
{
	return (map[b >> 3] >> (b & 7)) & 1;
}

static inline void fsck_bit_set(uint8_t *map, uint64_t b)
{
	map[b >> 3] |= (uint8_t)(1u << (b & 7));
}

/* Print one problem and count it. @kind groups repeated messages so that
 * only max_report of each kind are printed (all are counted). */
void fsck_err(struct fsck *ck, unsigned kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void fsck_note(struct fsck *ck, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Read block @blkno through the overlay. 0, -EINVAL (out of range),
 * -EIO. */
int fsck_read(struct fsck *ck, uint64_t blkno, void *buf);

/* Scan every slot's journal (read-only) and put the images of its
 * committed transactions in the overlay, as replay would write them.
 * Problems with journal headers are reported. 0 or -ENOMEM/-EIO. */
int fsck_journal_overlay(struct fsck *ck);
void fsck_overlay_free(struct fsck *ck);

/* Repair: put @buf as the new content of @blkno in the overlay (later
 * reads see it), to be written by fsck_write_dirty. 0 or -ENOMEM. */
int fsck_write(struct fsck *ck, uint64_t blkno, const void *buf);
/* Repair: write every block fsck_write put, flush. 0 or -EIO. */
int fsck_write_dirty(struct fsck *ck);

/* Mark metadata block @b reachable (@what for messages). */
void fsck_mark_meta(struct fsck *ck, uint64_t b, const char *what);

/* fs_fsck_statfs.c (ro_compat STATFS): mark and read the records (before
 * the bitmaps are checked); compare them with the bitmaps' free blocks
 * and the inodes found (after); repair: rewrite them from the repaired
 * group headers (after fix_rgroups). */
void fsck_statfs_mark(struct fsck *ck);
void fsck_statfs_check(struct fsck *ck);
int fsck_statfs_fix(struct fsck *ck);

/* fs_fsck_repair.c: after the check, fix what it found if every problem
 * is fixable (fs_fsck.h). 0 or -ENOMEM / -EIO. */
int fsck_repair(struct fsck *ck);

#endif /* UCFS_FS_FSCK_INTERNAL_H */
