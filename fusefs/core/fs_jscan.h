/*
 * fs_jscan.h — the one parser of a slot's redo journal (FORMAT.md
 * "Journal" and "Replay"), shared by every reader of committed
 * transactions: mount-time replay (fs_journal.c writes the images home),
 * fsck's check (fs_fsck_journal.c keeps them in an in-memory overlay) and
 * fsck's repair (which writes that overlay home).
 *
 * The scan only reads the device. It walks the log from the header's
 * tail: descriptor(s) of the expected sequence, the images they announce,
 * a commit record of the same sequence whose nblocks and chained crc
 * match; then the next sequence; between two transactions, checkpoint
 * records of the next sequence (everything before one is written home:
 * what was found so far is dropped); it stops at the first block that
 * does not fit (a torn or stale tail is the normal end of a log, not an
 * error). Of the committed images it selects, per home block, the last
 * one, unless a later transaction revoked the block; those are handed to
 * the caller, in log order.
 *
 * Locking: none; a scan is one call on one thread.
 */
#ifndef UCFS_FS_JSCAN_H
#define UCFS_FS_JSCAN_H

#include <stdint.h>

struct bd_dev;
struct fs_sb;
struct fs_jhdr;

/* Why a selected committed image is not applied. */
enum fs_jscan_skip {
	FS_JSCAN_OUTSIDE,	/* home outside [FS_SLOTAREA_BLK, total) */
	FS_JSCAN_BADIMG,	/* fails its own checksum / names another
				   home block */
};

struct fs_jscan_ops {
	/* Put @blk (a verified image whose header names @home) at @home.
	 * @blk is valid only during the call. Called at most once per home
	 * block, in log order. 0, or -errno to stop the scan. */
	int (*apply)(void *ctx, uint64_t home, const void *blk);
	/* A committed, unrevoked image that is outside the filesystem or
	 * bad (@why), at log position @pos: not applied if it was the last
	 * of its home block; older ones are checked and reported too when
	 * this is set. May be NULL. */
	void (*skip)(void *ctx, uint64_t home, uint64_t pos,
		     enum fs_jscan_skip why);
};

struct fs_jscan_res {
	unsigned ntx;		/* committed transactions found after the
				   last checkpoint record (those replayed) */
	unsigned nckpt;		/* checkpoint records found */
	uint64_t end_pos;	/* log position after the last of them */
	uint64_t scanned;	/* log blocks of the records and complete
				   transactions walked, from the tail */
	uint64_t next_seq;	/* sequence a next transaction would carry */
};

/*
 * Check a journal header block of @slot read into @h: checksum, type,
 * block number, slot, log size (the superblock's) and tail position.
 * Returns 0, -EUCLEAN when the block itself is bad (checksum, type or
 * block number) or -EINVAL when its fields disagree with @sb.
 */
int fs_jhdr_check(const struct fs_jhdr *h, const struct fs_sb *sb,
		  unsigned slot);

/*
 * Write the header of @slot's journal (in @buf, a BD_ALIGN-aligned
 * block): tail at @tail_pos / @tail_seq, @clean. FUA. 0 or -EIO.
 */
int fs_jhdr_write(struct bd_dev *bd, const struct fs_sb *sb, unsigned slot,
		  void *buf, uint64_t tail_pos, uint64_t tail_seq, int clean);

/*
 * Scan the journal of @slot from @tail_pos / @tail_seq (the fields of its
 * header, checked by fs_jhdr_check) and fill @res. With @ops != NULL,
 * then hand every image a replay writes to ops->apply (see above).
 * @sb is the superblock in use (journal geometry, total_blocks).
 * Returns 0, -ENOMEM, -EIO (a log block could not be read) or what
 * ops->apply returned.
 */
int fs_jscan(struct bd_dev *bd, const struct fs_sb *sb, unsigned slot,
	     uint64_t tail_pos, uint64_t tail_seq,
	     const struct fs_jscan_ops *ops, void *ctx,
	     struct fs_jscan_res *res);

#endif /* UCFS_FS_JSCAN_H */
