/*
 * fs_fsck.h — consistency check of a ucfs image, and its conservative
 * repair (the library behind tools/fsck.ucfs, also called by crash tests
 * on a surviving device).
 *
 * The check never writes. If a slot's journal holds committed
 * transactions that were not checkpointed (a crash), their block images
 * are applied to an in-memory overlay first, so the check sees what a
 * mount would see after replay (and says so).
 *
 * What is checked (every problem is printed on one line with the block
 * numbers involved and counted as an error):
 *  - superblock: header/crc, version, features and geometry
 *    (fs_sb_check); the backup superblock agrees with it;
 *  - slot map, heartbeat and slotinfo blocks, journal headers;
 *  - every resource group header and bitmap block (crc, type, own block
 *    number, index/start/length), the free and inode counts;
 *  - from the root: every reachable inode, B+tree node and xattr block
 *    (crc, type, block number, owner, node structure, key order and
 *    bounds), file extents (inside the data area, no overlaps in the file,
 *    blocks count), directory entries (name, hash key range, target inode
 *    valid and of the type the entry says, size = entry count, '..' =
 *    the parent, no directory reached twice: no hard links to
 *    directories, no cycles), link counts (files: names; dirs: 2 +
 *    subdirectories), orphan lists (chain, nlink 0, not linked);
 *  - bitmaps against reachable blocks: blocks in use but not reachable
 *    (leaked; one holding an inode that still has links is a lost file),
 *    reachable but marked free, reachable twice (doubly used);
 *  - the statfs records (ro_compat STATFS: fs_fsck_statfs.c): each
 *    readable, and the master plus every slot's change equal to the
 *    bitmaps' free blocks and the inodes found.
 *
 * It must not crash on any input: every on-disk value is bounds-checked
 * before use.
 *
 * Repair (opts.repair; the device must be writable and mounted nowhere):
 * conservative and deterministic, e2fsck -y style, never when the
 * primary superblock is bad.
 *  1. Each slot's committed journal is replayed for real, as a mount
 *     would (images home, flush, header tail moved), unless that journal
 *     has errors.
 *  2. Then, only if every problem found is of a kind it can fix, it
 *     fixes them all: the backup superblock (rewritten from the
 *     primary), inode link counts, directory sizes and '..' fields,
 *     bitmaps rebuilt from the reachable blocks (leaked blocks freed,
 *     used blocks marked, unreadable bitmap blocks rewritten), rgroup
 *     free and inode counts, the statfs records (the master from the
 *     group headers, every change zero); and it releases the orphans
 *     (inodes unlinked while open when their node stopped: orphan lists
 *     emptied, their blocks freed), as a mount's orphan reclaim would.
 * Any other problem (a bad inode, tree node or directory entry, a block
 * used twice, a leaked block that holds a lost file, ...) stops step 2:
 * nothing but the journal replay is written, so a later fsck sees the
 * same damage.
 */
#ifndef UCFS_FS_FSCK_H
#define UCFS_FS_FSCK_H

#include <stdint.h>
#include <stdio.h>

struct bd_dev;

struct fs_fsck_opts {
	FILE *out;		/* problem lines and summary (NULL: none) */
	int verbose;		/* also print progress notes */
	unsigned max_report;	/* per-kind cap on repeated lines (0: 20) */
	int repair;		/* replay journals, fix what is safe */
};

struct fs_fsck_result {
	uint64_t errors;	/* problems found */
	uint64_t inodes, dirs, files, symlinks, others;
	uint64_t blocks_used;	/* reachable blocks incl. fixed metadata */
	uint64_t blocks_free;	/* per the bitmaps */
	uint64_t unwritten_blocks; /* in unwritten extents (FORMAT.md) */
	uint64_t shared_blocks;		/* in shared extents (reflink) */
	uint64_t leaked, doubly_used, used_but_free;
	uint64_t orphans;
	uint64_t flog_blocks;	/* dlm: in slots' free logs (freed,
				   not applied yet: in use) */
	unsigned journal_tx;	/* committed transactions in the overlay */
	unsigned replayed_tx;	/* repair: of those, written home */
	uint64_t fixed;		/* repair: problems fixed */
	uint64_t blocks_written;	/* repair: blocks rewritten in place */
	uint64_t orphans_freed;	/* repair: orphan inodes released */
};

/*
 * Check the filesystem on @bd (never written unless o->repair).
 * Returns 0 when the check ran (then res->errors says whether it is
 * clean: with repair, the problems found before fixing, res->fixed of
 * them fixed), or -ENOMEM / -EIO when it could not run (device
 * unreadable, or a repair write failed).
 * A filesystem too damaged to walk (no valid superblock) is a run with
 * errors, not a failure to run.
 */
int fs_fsck_run(struct bd_dev *bd, const struct fs_fsck_opts *o,
		struct fs_fsck_result *res);

/*
 * Give an image made before the statfs records (no ro_compat STATFS;
 * FORMAT.md "Statfs records") its records, offline (fsck.ucfs -O
 * statfs). The caller holds @bd exclusively and found the image clean
 * (fs_fsck_run: no error, no journal transaction left to replay). Every
 * slot must be free in the slot map: a node that has the filesystem
 * mounted, or stopped without unmounting, holds its slot (-EBUSY).
 * The records take the first 1 + slot_count free blocks in a row of
 * group 0's data area (-ENOSPC if there are none); the master gets the
 * group headers' sums, every change zero. Written in this order, each
 * step flushed before the next, so that an interruption leaves an image
 * that mounts as before: (1) the records, into blocks still free;
 * (2) their bits in group 0's bitmap, then its header's free count (cut
 * here: blocks marked in use that nothing refers to, or a count off by
 * them; fsck.ucfs -y frees or recounts them); (3) the superblock with
 * the bit and statfs_blk, then its backup (cut between them: fsck.ucfs
 * -y rewrites the backup from the primary). Returns 0 (added), 1 (the
 * image has them already: nothing written), or -EBUSY, -ENOSPC,
 * -EUCLEAN (bad metadata), -EPROTONOSUPPORT (an unknown feature), -EIO,
 * -ENOMEM; @why (may be NULL) says why in one line.
 */
int fs_fsck_add_statfs(struct bd_dev *bd, char *why, size_t whylen);

#endif /* UCFS_FS_FSCK_H */
