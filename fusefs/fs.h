/*
 * fs.h — the ucfs namespace API: the filesystem as a C library.
 *
 * Everything the FUSE adapter (fs_fuse.c) does goes through these
 * functions, so crash tests, fsck-style tools and benchmarks can drive a
 * mounted filesystem on any struct bd_dev (file, RAM, fault injector)
 * without FUSE. The calls mirror the FUSE low-level operations:
 *
 *  - Inodes are named by their on-disk number (u64, the inode's block
 *    number). fs_root() gives the root's; the FUSE adapter maps the
 *    kernel's nodeid 1 to it and back, nowhere else.
 *  - Every call that hands an inode to the caller (fs_lookup, fs_mknod,
 *    fs_mkdir, fs_symlink, fs_link, fs_create, and fs_readdir with
 *    FS_READDIR_PLUS for entries other than "." and "..") takes one
 *    "lookup" reference on it, exactly like a FUSE entry reply; fs_forget()
 *    drops them. An unlinked inode is freed only when it has no name, no
 *    lookup reference and no open (fs_open/fs_create) left; until then it
 *    sits on the on-disk orphan list, which the next mount reclaims after a
 *    crash. dlm: on no node (fs_iopen.h: every node holding references
 *    holds the inode's iopen lock; the unlinking node frees it when it
 *    gets that lock EX, and a survivor adopts a dead node's orphans).
 *    Library callers that never forget are fine: unmount drops all
 *    references.
 *  - Permission checks are the kernel's job (the daemon always mounts with
 *    default_permissions). The library only applies the rules the kernel
 *    leaves to the filesystem: new objects get cred's uid, and cred's gid
 *    unless the parent is setgid (then the parent's gid, and a new
 *    directory inherits S_ISGID); a write or chown by a non-root cred
 *    clears S_ISUID/S_ISGID; ctime moves on every change.
 *  - Names are 1..FS_NAME_MAX bytes, any byte but '/' and NUL
 *    (-ENAMETOOLONG, -EINVAL). Names are passed NUL-terminated.
 *
 * Errors: every int function returns 0 or -errno, ssize_t ones a count or
 * -errno. Beyond the usual POSIX ones: -EUCLEAN (bad metadata block
 * detected: checksum, type or block number mismatch; the operation did
 * nothing), -EROFS (read-only mount), -ENOSPC (nothing was changed),
 * -EIO (device error).
 *
 * Threads: every function may be called from any thread concurrently once
 * fs_mount() returned, except fs_unmount(), which must be the last call.
 * All functions may block (device I/O, journal commit, locks). Each takes
 * its own locks (fs_ilock.h): with lockproto=dlm the cluster lock first,
 * then the locks of the inodes it touches, so calls on different inodes
 * run in parallel and every caller gets the same coherence; a fenced
 * node's calls fail with -EIO.
 */
#ifndef UCFS_FS_H
#define UCFS_FS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>

struct fs;
struct bd_dev;

#define FS_NAME_MAX 255
#define FS_PATH_MAX 4096
#define FS_XATTR_NAME_MAX 255
#define FS_XATTR_SIZE_MAX 65536

/* ---- mount options (parsed by fs_opts.c) ------------------------------ */

enum fs_lockproto { FS_LOCK_NOLOCK = 0, FS_LOCK_DLM = 1 };
enum fs_data_mode { FS_DATA_ORDERED = 0, FS_DATA_WRITEBACK = 1 };
enum fs_uring_mode { FS_URING_AUTO = 0, FS_URING_OFF = 1, FS_URING_ON = 2 };
enum fs_atime_mode { FS_ATIME_RELATIME = 0, FS_ATIME_NOATIME = 1,
		     FS_ATIME_STRICT = 2 };

#define FS_OPTS_FUSE_MAX 1024

struct fs_opts {
	int ro;				/* ro: no device write at all */
	enum fs_lockproto lockproto;	/* lockproto=nolock|dlm */
	enum fs_data_mode data;		/* data=ordered|writeback */
	unsigned commit_s;		/* commit=SECONDS, journal interval */
	unsigned statfs_quantum_s;	/* statfs_quantum=SECONDS: this node's
					   statfs change folded into the
					   master this often (MOUNT.md; 0:
					   the default, 30) */
	int statfs_slow;		/* statfs_quantum=0 (GFS2's): statfs
					   counts the groups under their
					   locks, exact; folds at the
					   default quantum */
	unsigned statfs_percent;	/* statfs_percent=PERCENT: ... and
					   early once it reaches this
					   percent of the master's free
					   blocks (0..100; 0: never) */
	enum fs_atime_mode atime;	/* noatime|relatime|strictatime */
	unsigned cache_mb;		/* cache_mb=N, buffer cache bound */
	unsigned readahead_kb;		/* readahead=KB, kernel file readahead
					   (0: off) */
	unsigned statahead;		/* statahead=N, directory entries whose
					   inode blocks are read ahead of a
					   readdir (0: off) */
	int writeback_cache;		/* writeback_cache: the kernel caches
					   writes (faster small writes, but a
					   full fs reports ENOSPC only at
					   fsync/close: off by default) */
	enum fs_uring_mode uring;	/* uring=auto|on|off: FUSE requests
					   over per-CPU io_uring queues */
	char cluster[FS_PATH_MAX];	/* cluster=FILE (dlm): lk JSON
					   configuration; "" none */
	unsigned node_id;		/* node=ID (dlm), 1..63; 0 none */
	int minhold_ms;			/* minhold=MS (dlm): glock minimum
					   hold time; -1 default */
	int glock_max;			/* glock_max=N (dlm): cluster locks
					   kept cached, the idle ones beyond
					   dropped (LRU); -1 default */
	int inode_max;			/* inode_max=N: in-core inode records
					   kept; past 7/8 of it the kernel is
					   asked to forget the least recently
					   used (fs_iprune.c); -1 default */
	int passthrough;		/* passthrough: DEVICE is a directory
					   to forward to (fs_pt.h) */
	unsigned hb_interval_ms;	/* hb_interval=MS (dlm): disk
					   heartbeat period; 0 default */
	unsigned hb_timeout_ms;		/* hb_timeout=MS (dlm): a node
					   silent on the disk this long is
					   dead; 0 default */
	int localflocks;		/* localflocks (dlm): flock and fcntl
					   locks left to this machine's
					   kernel, as on a nolock mount (no
					   cluster-wide file locks, no FLUSH
					   per close; GFS2's option) */
	unsigned records_timeout_s;	/* records_timeout=SECONDS (dlm): a
					   mount whose device's flush does not
					   cover every writer's waits at most
					   this long for the nodes writing
					   checkpoint records to stop (0: no
					   bound) */
	unsigned nolock_slot;		/* tests only, no mount option: the
					   journal slot a nolock mount claims
					   (fs_core_opts.slot; 0: slot 0), so
					   that two library mounts on slots 0
					   and 1 of one device stand for two
					   nodes */
	int allow_other;		/* allow_other (FUSE) */
	int debug;			/* debug / -d (FUSE) */
	/* Options handed to libfuse as one "-o" string (kernel mount flags
	 * such as nosuid/nodev/noexec, fsname=, subtype=...). */
	char fuse[FS_OPTS_FUSE_MAX];
};

#define FS_DEFAULT_COMMIT_S 5
#define FS_DEFAULT_CACHE_MB 256
#define FS_DEFAULT_INODE_MAX 65536
#define FS_DEFAULT_READAHEAD_KB 1024
#define FS_DEFAULT_STATAHEAD 512
#define FS_DEFAULT_RECORDS_TIMEOUT_S 60
#define FS_MAX_STATAHEAD 65536

/* Defaults: rw, nolock, data=ordered, commit=5, relatime, cache_mb=256,
 * readahead=1024, statahead=512, records_timeout=60. */
void fs_opts_init(struct fs_opts *o);

/*
 * Parse one comma-separated option string (as given to -o; may be called
 * several times, later values win) into @o. Options for the kernel mount
 * or libfuse are appended to o->fuse; fstab/mount-helper noise (defaults,
 * _netdev, auto, noauto, user, users, nouser, nofail, x-*, comment=) is
 * accepted and dropped. An unknown or malformed option returns -EINVAL
 * and writes "ucfs: unknown mount option 'foo'" (or "bad value") into
 * @err (@errlen bytes, may be NULL).
 */
int fs_opts_parse(struct fs_opts *o, const char *s, char *err,
		  size_t errlen);

/* ---- mount ------------------------------------------------------------ */

/*
 * Mount the filesystem on device/image @path. Verifies the superblock,
 * claims a slot (nolock: exclusively, BD_EXCL + slot-map flag), replays
 * the journal, reclaims orphans. On failure writes a one-line reason
 * (e.g. "not a ucfs filesystem", "already mounted with lockproto=nolock")
 * into @err if not NULL. -EINVAL bad superblock / not ucfs, -EUCLEAN bad
 * checksum, -EPROTONOSUPPORT newer format or unknown feature, -EBUSY
 * already mounted, -EROFS writable mount of a read-only device,
 * -EOPNOTSUPP lockproto=dlm, -ENOMEM, -EIO.
 */
int fs_mount(const char *path, const struct fs_opts *o, struct fs **out,
	     char *err, size_t errlen);

/* The same on an open device (RAM, fault wrapper). The filesystem does
 * not own @bd: close it after fs_unmount(). */
int fs_mount_bd(struct bd_dev *bd, const struct fs_opts *o, struct fs **out,
		char *err, size_t errlen);

/* Commit, write everything back, release the slot, free @fs (also on
 * error, which is returned: -EIO if something could not be written).
 * NULL is a no-op. */
int fs_unmount(struct fs *fs);

/* Crash simulation for tests: wait for writes already submitted to the
 * device (they complete or fail), then free everything WITHOUT writing
 * anything more (no commit, no checkpoint, slot left claimed). Pair with
 * bd_fault_crash() to model a power loss; the next mount replays. */
void fs_abandon(struct fs *fs);

/* The root directory's inode number. */
uint64_t fs_root(const struct fs *fs);

/* ---- credentials and attributes --------------------------------------- */

struct fs_cred {
	uid_t uid;
	gid_t gid;
	mode_t umask;	/* applied to create modes (0 from FUSE: the kernel
			   already applied it, or ACLs are in charge) */
	unsigned flags;	/* FS_CRED_* */
};

/* The caller holds CAP_FSETID: a write or truncate leaves S_ISUID and
 * S_ISGID alone (without it they are cleared, as by the VFS). */
#define FS_CRED_FSETID (1u << 0)
/* fs_write: the file was opened with O_APPEND. A cluster mount then
 * writes at the end of the file as this node sees it under the cluster
 * lock, whatever offset the kernel computed from its (possibly stale)
 * size; a nolock mount trusts the kernel (the only writer). */
#define FS_CRED_APPEND (1u << 1)

struct fs_attr {
	uint64_t ino;
	uint64_t generation;	/* unique per allocation of this ino */
	uint64_t size;
	uint64_t blocks;	/* 512-byte units allocated */
	uint32_t mode;
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint64_t rdev;
	uint32_t blksize;	/* preferred I/O size */
	struct timespec atime, mtime, ctime, btime;
};

/* fs_setattr() @valid bits */
enum {
	FS_SET_MODE = 1 << 0,
	FS_SET_UID = 1 << 1,
	FS_SET_GID = 1 << 2,
	FS_SET_SIZE = 1 << 3,
	FS_SET_ATIME = 1 << 4,		/* to attr->atime */
	FS_SET_MTIME = 1 << 5,		/* to attr->mtime */
	FS_SET_ATIME_NOW = 1 << 6,
	FS_SET_MTIME_NOW = 1 << 7,
	FS_SET_CTIME = 1 << 8,		/* to attr->ctime */
	FS_SET_KILL_PRIV = 1 << 9,	/* clear S_ISUID, S_ISGID if g+x */
};

/* ---- namespace operations --------------------------------------------- */

/* Find @name in directory @parent; fill @out and take a lookup reference.
 * -ENOENT, -ENOTDIR, -ENAMETOOLONG. */
int fs_lookup(struct fs *fs, uint64_t parent, const char *name,
	      struct fs_attr *out);

/* Drop @n lookup references (FUSE forget). Frees an unlinked, closed
 * inode whose references reach 0 (dlm: once no other node uses it, by
 * this node's iopen worker; statahead's: fs_reap_orphans). Never fails. */
void fs_forget(struct fs *fs, uint64_t ino, uint64_t n);
/* Around the fs_forget calls of one FUSE batch forget (@on 1 before, 0
 * after, on the calling thread): the locks they give back (dlm: each
 * inode's iopen PR hold) go in one lockspace call at the end, one
 * message per master, instead of one message each (a node whose kernel
 * forgets a tree another node removed). */
void fs_forget_batch(struct fs *fs, int on);
/* 1 while the kernel holds lookup references to @ino (lookups not yet
 * forgotten), else 0. Any thread; a snapshot. */
int fs_ino_held(struct fs *fs, uint64_t ino);

int fs_getattr(struct fs *fs, uint64_t ino, struct fs_attr *out);

/* Change the attributes selected by @valid (FS_SET_*) to @attr's values;
 * FS_SET_SIZE truncates or extends (zeros). Fills @out. ctime moves. */
int fs_setattr(struct fs *fs, const struct fs_cred *cred, uint64_t ino,
	       const struct fs_attr *attr, unsigned valid,
	       struct fs_attr *out);

/* Create a regular file, FIFO, socket or device node (mode's S_IFMT).
 * -EEXIST, -ENOSPC, -EINVAL (bad type). */
int fs_mknod(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	     const char *name, mode_t mode, dev_t rdev, struct fs_attr *out);
int fs_mkdir(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	     const char *name, mode_t mode, struct fs_attr *out);
/* fs_mknod(S_IFREG) + fs_open() in one step. */
int fs_create(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	      const char *name, mode_t mode, int flags, struct fs_attr *out);
int fs_symlink(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	       const char *name, const char *target, struct fs_attr *out);
/* Copy the target (not NUL-terminated) into @buf; returns its length
 * (truncated to @size). -EINVAL if not a symlink. */
ssize_t fs_readlink(struct fs *fs, uint64_t ino, char *buf, size_t size);

/* -ENOENT, -EISDIR (unlink of a dir), -ENOTDIR, -ENOTEMPTY (rmdir). */
int fs_unlink(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	      const char *name);
int fs_rmdir(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	     const char *name);

/* fs_rename() @flags, the RENAME_* values of renameat2(2) */
#define FS_RENAME_NOREPLACE (1 << 0)
#define FS_RENAME_EXCHANGE (1 << 1)

/* rename(2)/renameat2(2): replaces an existing target (file over file,
 * dir over empty dir), -EEXIST with NOREPLACE, swaps with EXCHANGE,
 * -EINVAL for moving a directory under itself or unknown flags,
 * -ENOTEMPTY, -EISDIR, -ENOTDIR. */
int fs_rename(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	      const char *name, uint64_t newparent, const char *newname,
	      unsigned flags);

/* New name @newname in @newparent for @ino (not a directory: -EPERM).
 * -EMLINK past the link limit. */
int fs_link(struct fs *fs, const struct fs_cred *cred, uint64_t ino,
	    uint64_t newparent, const char *newname, struct fs_attr *out);

/* ---- files ------------------------------------------------------------ */

/* Count an open of @ino (-EISDIR for O_WRONLY/O_RDWR on a directory).
 * O_TRUNC is not applied here (FUSE sends a setattr). */
int fs_open(struct fs *fs, const struct fs_cred *cred, uint64_t ino,
	    int flags);
/* Drop an open; frees the inode if it was the last use of an unlinked
 * file (dlm: on every node; a node that did not unlink it asks the
 * kernel to forget it, so that the unlinking node may free it). */
void fs_release(struct fs *fs, uint64_t ino);

/* Orphans whose last reference went in a holder that may not wait for
 * a lock (directory readahead) stay on the orphan list; this frees them.
 * Every fs.h call runs it as it ends; cheap when nothing is pending. */
void fs_reap_orphans(struct fs *fs);

/* Read up to @len bytes at @off; short at EOF, holes read as zeros.
 * Returns the count. -EISDIR. */
ssize_t fs_read(struct fs *fs, uint64_t ino, void *buf, size_t len,
		uint64_t off);
/* fs_read with the inode's cluster lock in EX (a dlm mount; else the
 * same as fs_read): the read fills kernel pages that a shared writable
 * mapping may dirty without telling ucfs, which only a node holding EX
 * may do (the lock's demote writes them back: fs_inval_ops flush). */
ssize_t fs_read_ex(struct fs *fs, uint64_t ino, void *buf, size_t len,
		   uint64_t off);
/* Write @len bytes at @off, extending the file. Data goes straight to the
 * device (data=ordered: before the metadata that points at it commits).
 * Returns @len or -ENOSPC/-EFBIG/-EIO (then nothing was changed). */
ssize_t fs_write(struct fs *fs, const struct fs_cred *cred, uint64_t ino,
		 const void *buf, size_t len, uint64_t off);

/* Make @ino's data and metadata durable: a journal commit if a change of
 * @ino is not durable yet (other inodes' changes go with it), then the
 * file data issued so far and a device flush if needed. @ino 0: every
 * change (syncfs). */
int fs_fsync(struct fs *fs, uint64_t ino, int datasync);

/* fallocate(2), as ext4 (fs_falloc.c): mode 0 and FALLOC_FL_KEEP_SIZE
 * allocate unwritten extents (no data written; they read as zeros);
 * FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE frees; FALLOC_FL_ZERO_RANGE
 * [| KEEP_SIZE] zeroes (whole blocks become unwritten, no data I/O);
 * FALLOC_FL_COLLAPSE_RANGE / FALLOC_FL_INSERT_RANGE remove / open a
 * block-aligned range, shifting the rest of the file (-EINVAL if
 * misaligned, or for collapse reaching EOF, or insert at or past EOF;
 * -EFBIG past the maximum size). -EINVAL for len 0 and for collapse or
 * insert combined with another flag; -EOPNOTSUPP for other modes
 * (UNSHARE_RANGE, PUNCH_HOLE without KEEP_SIZE or with ZERO_RANGE).
 * -ENODEV for a non-regular file, -EISDIR. */
int fs_fallocate(struct fs *fs, const struct fs_cred *cred, uint64_t ino,
		 int mode, uint64_t off, uint64_t len);

/* copy_file_range(2) from @ino_in to @ino_out (both in this
 * filesystem) inside the daemon: block-aligned ranges share the source's
 * blocks (fs_clone_range), the rest goes device to device, holes of the
 * source stay holes (fs_copy.c). @len is cut at the source's end
 * of file. Returns the count copied (0 at or past the source's EOF).
 * -EINVAL (@flags != 0, a non-regular file, overlapping ranges of one
 * file), -EISDIR, -EFBIG, -ENOSPC, -EIO. */
ssize_t fs_copy_file_range(struct fs *fs, const struct fs_cred *cred,
			   uint64_t ino_in, uint64_t off_in, uint64_t ino_out,
			   uint64_t off_out, size_t len, unsigned flags);

/* FICLONERANGE (reflink): make [off_in, off_in + len) of @ino_out's
 * bytes at @off_out share @ino_in's blocks (copy on write later;
 * fs_refcount.c); @len 0: to @ino_in's EOF. Linux's rules: offsets
 * block-aligned, @len too unless it reaches @ino_in's EOF (and then the
 * range must reach or pass @ino_out's EOF), inside @ino_in, no overlap
 * within one file (-EINVAL). -EOPNOTSUPP: no reflink feature (older
 * mkfs), inline (tiny) source, or the two files already share blocks
 * with different groups of files. -EISDIR, -ENOSPC, -EFBIG. Linux's
 * FUSE does not forward FICLONE/FICLONERANGE to a daemon: mounted, it
 * is reached through copy_file_range (fs_copy_file_range). */
int fs_clone_range(struct fs *fs, const struct fs_cred *cred, uint64_t ino_in,
		   uint64_t off_in, uint64_t ino_out, uint64_t off_out,
		   uint64_t len);

/* lseek(2) SEEK_DATA / SEEK_HOLE (@whence; others -EINVAL) from byte
 * @off of regular file @ino: *out = where the next data / hole starts,
 * from the extent map (unwritten extents are holes, as on ext4; the end
 * of the file is a hole). -ENXIO if @off >= size or (SEEK_DATA) no data
 * follows; -EISDIR. */
int fs_lseek(struct fs *fs, uint64_t ino, uint64_t off, int whence,
	     uint64_t *out);

/* ---- directories ------------------------------------------------------ */

struct fs_dirent {
	uint64_t ino;
	uint64_t next;		/* cookie to resume after this entry */
	unsigned type;		/* DT_* */
	unsigned namelen;
	const char *name;	/* not NUL-terminated */
};

/* Callback for fs_readdir(): return 0 to continue, 1 when full (this
 * entry was NOT consumed; iteration stops). @attr is NULL unless
 * FS_READDIR_PLUS, and then for "." and ".." and the entries
 * FS_READDIR_BARE leaves bare. Runs with directory locks held: must not
 * call back into the filesystem. */
typedef int (*fs_filldir_fn)(void *arg, const struct fs_dirent *de,
			     const struct fs_attr *attr);

#define FS_READDIR_PLUS 1
/* With FS_READDIR_PLUS: an entry whose inode the caller (the kernel)
 * holds by a lookup and got the attributes of in a readdirplus entry
 * less than a second ago comes without attributes and takes no
 * reference (FUSE: nodeid 0, which the kernel skips). For a directory
 * read twice in a row (rm -rf: one getdents to see whether it is empty,
 * then all of it), so the second read costs no lock, inode read or
 * kernel dentry update per entry. */
#define FS_READDIR_BARE 2

/* Enumerate @dir from cookie @cookie (0 = start: ".", "..", then entries
 * in stable cookie order). Cookies stay valid while other entries are
 * added or removed. With FS_READDIR_PLUS each consumed entry handed with
 * attributes takes a lookup reference. -ENOTDIR. */
int fs_readdir(struct fs *fs, uint64_t dir, uint64_t cookie, unsigned flags,
	       fs_filldir_fn fill, void *arg);

/* ---- filesystem ------------------------------------------------------- */

int fs_statfs(struct fs *fs, struct statvfs *out);
/* Commit the journal and flush the device (sync(2), syncfs). */
int fs_sync(struct fs *fs);

/* ---- extended attributes ---------------------------------------------- */

/* Namespaces user., trusted., security., system.posix_acl_access and
 * system.posix_acl_default (others -EOPNOTSUPP). @flags XATTR_CREATE /
 * XATTR_REPLACE (-EEXIST / -ENODATA). Setting system.posix_acl_access
 * also updates the mode bits it mirrors. -ENOSPC, -E2BIG, -ERANGE. */
int fs_setxattr(struct fs *fs, const struct fs_cred *cred, uint64_t ino,
		const char *name, const void *value, size_t size, int flags);
/* @size 0: return the value's size. -ENODATA, -ERANGE. */
ssize_t fs_getxattr(struct fs *fs, uint64_t ino, const char *name,
		    void *buf, size_t size);
/* NUL-separated names; @size 0: return the needed size. -ERANGE. */
ssize_t fs_listxattr(struct fs *fs, uint64_t ino, char *buf, size_t size);
int fs_removexattr(struct fs *fs, const struct fs_cred *cred, uint64_t ino,
		   const char *name);

/* ---- kernel cache sink ------------------------------------------------ */

/*
 * The filesystem tells the kernel (or any cache in front of it) what a
 * lost cluster lock covered, so that nothing cached under the lock is
 * served after another node may have changed it (fs_kinval.c; the FUSE
 * side is fs_inval.c). Calls are queued and made by a notification
 * thread that holds nothing a request handler needs
 * (research/fuse-coherence.md: the deadlock rules): a sink's ops only
 * queue and never block on a request in flight.
 */
struct fs_inval_ops {
	/* @ino's attributes, and with @len != 0 its cached pages from
	 * @off (@len -1: to the end) */
	void (*inode)(void *arg, uint64_t ino, int64_t off, int64_t len);
	/* the name @name (@namelen bytes) in directory @parent */
	void (*entry)(void *arg, uint64_t parent, const char *name,
		      size_t namelen);
	/* every name (dentry) the kernel cached, positive or negative,
	 * and the attributes of every inode it may reach without looking a
	 * name up again other than the open files (directories: a working
	 * directory; the sink tracks them from its replies); a regular
	 * file's are refreshed by the lookup its next path walk makes */
	void (*all)(void *arg);
	/* every name (dentry) the kernel cached, positive or negative, and
	 * nothing else (a directory's lock: its own attributes and pages
	 * come through inode) */
	void (*names)(void *arg);
	/* the names (dentries, positive or negative) the kernel may hold
	 * in directory @dir and nothing else: one by one when the sink
	 * tracked what it handed out there (it waits for them a bounded
	 * time), else every name (as names; sync waits for it).
	 * @busy(@busy_arg) (may be NULL) says 1 while requests of this
	 * node wait for the directory's lock: the kernel then likely holds
	 * the directory for them, and each name would wait for them, so
	 * every name goes at once instead (also if that becomes true
	 * while the names are being dropped). May be NULL: names is
	 * used. */
	void (*dir)(void *arg, uint64_t dir, int (*busy)(void *),
		    void *busy_arg);
	/* @n inodes the kernel may forget now if nothing uses them (their
	 * names, attributes and pages go; no promise: a hint). The kernel
	 * then sends FORGETs, i.e. fs_forget calls, which take the cluster
	 * lock: fs_kinval_* do not use it (it would pull the lock back
	 * right after it left). 0 (queued), or -EOPNOTSUPP: the kernel
	 * cannot prune (never will on this mount) */
	int (*forget)(void *arg, const uint64_t *inos, size_t n);
	/* wait until what was queued so far and can never wait on a
	 * request in flight (attributes, every name at once) was told to
	 * the kernel; pages and single names may follow later (a page
	 * locked by a read in flight, a directory locked by a lookup in
	 * flight wait for their request) */
	void (*sync)(void *arg);
	/* Before @ino's lock leaves EX, while requests on @ino still run:
	 * the kernel writes back the pages of @ino dirtied through a shared
	 * writable mapping (they come as WRITE requests, which need the
	 * lock) and drops its pages. 1: started, @done(@done_arg) is called
	 * once when it is over (from the sink's thread, or at once); 0:
	 * the kernel cannot hold such pages (@ino is not open for reading
	 * and writing here). May be NULL. */
	int (*flush)(void *arg, uint64_t ino, void (*done)(void *),
		     void *done_arg);
};

/* Set (or with @ops NULL remove) @fs's sink. Removing waits for the
 * fs_kinval_* calls in progress: after it returns @arg is unused. */
void fs_set_inval(struct fs *fs, const struct fs_inval_ops *ops, void *arg);

/* The calls a lock's ops make (no-ops without a sink). Each returns once
 * the kernel dropped the names and attributes (the ops' sync); pages of
 * files follow from the sink's thread. */
/* A demote from EX of @ino's lock, before it: the sink's flush (0 if
 * there is no sink or nothing to write back, 1 if @done will be
 * called). */
int fs_kinval_flush(struct fs *fs, uint64_t ino, void (*done)(void *),
		    void *done_arg);
/* A demote to NL of @ino's lock: its attributes and pages. */
void fs_kinval_inode(struct fs *fs, uint64_t ino);
/* @on 1: this thread's fs_kinval_inode calls queue without waiting for
 * the kernel; @on 0: one wait for all of them (a glock worker around a
 * demote-ahead batch's drops, before any of their locks leaves). */
void fs_kinval_defer(int on);
/* Every name under directory @dir, and @dir's attributes and pages
 * (readdir cache); @busy(@busy_arg): requests of this node wait for its
 * lock (the sink's dir op; may be NULL). */
void fs_kinval_dir(struct fs *fs, uint64_t dir, int (*busy)(void *),
		   void *busy_arg);
/* Everything: every name, the attributes of every inode the kernel may
 * use without a lookup (the sink's all), of the root and of the open
 * files, and the open files' pages. */
void fs_kinval_all(struct fs *fs);
/* A hint that the kernel may forget @n inodes if nothing uses them
 * (dlm: an unlinked inode another node waits to free, fs_iopen.c; the
 * glock bound, fs_glock_pin). 0, or -EOPNOTSUPP: no sink, or the kernel
 * cannot prune. */
int fs_kinval_forget(struct fs *fs, const uint64_t *inos, size_t n);

#endif /* UCFS_FS_H */
