/*
 * fs_fsck_internal.h — state shared by the fsck files: fs_fsck.c (the
 * checks) and fs_fsck_journal.c (the read-only journal overlay).
 *
 * Locking: none. One struct fsck belongs to one fs_fsck_run() call on one
 * thread.
 */
#ifndef UCFS_FS_FSCK_INTERNAL_H
#define UCFS_FS_FSCK_INTERNAL_H

#include <stdint.h>

#include "blockdev/bd.h"
#include "fusefs/fs_format.h"
#include "fusefs/fs_fsck.h"

/* One block image replayed from a journal, by home block number. */
struct fsck_ovl_ent {
	uint64_t blkno;		/* 0: empty slot (block 0 is never replayed) */
	void *data;
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
};

struct fsck {
	struct bd_dev *bd;
	const struct fs_fsck_opts *o;
	struct fs_fsck_result *res;
	struct fs_sb sb;	/* the superblock in use */
	uint64_t dev_blocks;
	uint64_t nblocks;	/* sb.total_blocks once validated */
	void *buf;		/* scratch blocks, BD_ALIGN-aligned */
	void *buf2;
	/* journal overlay: open addressing, power-of-two size */
	struct fsck_ovl_ent *ovl;
	size_t ovl_cap, ovl_n;
	/* walk state */
	uint8_t *reach;		/* bit per block: reachable */
	uint8_t *dup;		/* bit per block: reached more than once */
	struct fsck_ino *inos;	/* open addressing, power-of-two size */
	size_t inos_cap, inos_n;
	uint64_t *queue;	/* directories to walk */
	size_t q_head, q_tail, q_cap;
	unsigned reported[16];	/* per-kind counts (for max_report) */
};

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

#endif /* UCFS_FS_FSCK_INTERNAL_H */
