/*
 * fs_fuse_io.c — the /dev/fuse transport under libfuse: lets ucfs
 * negotiate FUSE_HANDLE_KILLPRIV_V2 and see the kill flags of a request.
 *
 * Why: without HANDLE_KILLPRIV_V2 the kernel must assume the filesystem
 * cannot drop privileges itself, so it clears SB_NOSEC and, before every
 * write(2), asks the daemon for security.capability (one GETXATTR round
 * trip per write: 47,905 of them in a 14,806-file untar), and before every
 * chown a GETATTR. With V2 (Linux 5.11+) the filesystem drops
 * S_ISUID/S_ISGID/security.capability itself and the kernel asks once per
 * inode. libfuse 3.15 names the flag; Debian 12's libfuse 3.14 does not,
 * and it does not pass the write's kill flag to the handler. So ucfs
 * hands libfuse its own read/writev (fuse_session_custom_io(), public
 * libfuse 3.14 API) on the same /dev/fuse descriptor:
 *  - io_read() reads a request exactly as libfuse would and records, in
 *    this worker thread, the opcode and FUSE_WRITE_KILL_SUIDGID of the
 *    request being processed (a libfuse worker reads a request and runs
 *    its handler in the same thread, before reading the next);
 *  - io_writev() adds FUSE_HANDLE_KILLPRIV_V2 to the INIT reply when the
 *    kernel offered it. Nothing else is changed.
 * Splice is not used (ucfs does not ask for FUSE_CAP_SPLICE_*), so every
 * request passes through io_read().
 *
 * The contract ucfs then keeps (fs_vfs.c): a write whose request carries
 * FUSE_WRITE_KILL_SUIDGID clears S_ISUID, and S_ISGID if group-executable;
 * a truncate with FATTR_KILL_SUIDGID (libfuse's FUSE_SET_ATTR_KILL_SUID,
 * the same bit) does the same; chown of a non-directory always does; every
 * write, truncate and chown removes security.capability. One difference
 * from the VFS since Linux 6.2 remains: a setgid file WITHOUT group
 * execute (the old mandatory-locking marker) keeps S_ISGID when written
 * by someone outside its group (the V2 contract; the VFS now drops it).
 *
 * With uring= not off and a kernel offering FUSE_OVER_IO_URING, the INIT
 * reply also asks for it and, once sent, fs_fuse_uring.c takes over the
 * requests; its replies come back through io_writev too.
 *
 * Locking: session, uring_mode and uring_max_write are set by attach
 * before the loop starts; init_unique, init_flags, killpriv_v2 and uring
 * are written once, by the thread that reads/answers INIT, before any
 * other request can arrive, and read afterwards (atomics); `cur` is per
 * thread.
 */
#include "fusefs/fs_fuse_io.h"

#include "fusefs/fs.h"
#include "fusefs/fs_fuse_uring.h"

#include <errno.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* FUSE_OVER_IO_URING (uapi 7.42), newer than Debian 12's headers */
#define UCFS_FUSE_OVER_IO_URING (1ULL << 41)

static struct fuse_session *session;	/* set by attach */
static int uring_mode;			/* FS_URING_*, set by attach */
static size_t uring_max_write;		/* set by attach */
static _Atomic uint64_t init_unique;	/* 0: INIT not seen yet */
static _Atomic uint64_t init_flags;	/* what the kernel offered */
static atomic_int killpriv_v2;		/* negotiated */
static struct fs_uring *_Atomic uring;	/* started after INIT */

static _Thread_local struct {
	uint32_t opcode;
	uint32_t write_kill;	/* FUSE_WRITE_KILL_SUIDGID was set */
} cur;

void fs_fuse_io_note(const void *buf, size_t len)
{
	const struct fuse_in_header *h = buf;
	uint64_t flags;

	cur.opcode = 0;
	cur.write_kill = 0;
	if (len < sizeof(*h))
		return;
	cur.opcode = h->opcode;
	if (h->opcode == FUSE_WRITE &&
	    len >= sizeof(*h) + sizeof(struct fuse_write_in)) {
		const struct fuse_write_in *w = (const void *)(h + 1);

		cur.write_kill = !!(w->write_flags & FUSE_WRITE_KILL_SUIDGID);
	} else if (h->opcode == FUSE_INIT &&
		   len >= sizeof(*h) + offsetof(struct fuse_init_in, flags2)) {
		const struct fuse_init_in *in = (const void *)(h + 1);

		flags = in->flags;
		if ((flags & FUSE_INIT_EXT) &&
		    len >= sizeof(*h) + offsetof(struct fuse_init_in, unused))
			flags |= (uint64_t)in->flags2 << 32;
		atomic_store(&init_flags, flags);
		atomic_store(&init_unique, h->unique);
	}
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n;

	(void)userdata;
	n = read(fd, buf, len);
	if (n > 0)
		fs_fuse_io_note(buf, (size_t)n);
	return n;
}

/* The INIT reply: ask for what libfuse 3.14 cannot name. Sets *u to the
 * prepared io_uring transport if the reply asks for it. */
static void patch_init(struct fuse_init_out *out, size_t len, int fd,
		       struct fs_uring **u)
{
	uint64_t offered = atomic_load(&init_flags);

	*u = NULL;
	if (offered & FUSE_HANDLE_KILLPRIV_V2) {
		out->flags |= FUSE_HANDLE_KILLPRIV_V2;
		atomic_store(&killpriv_v2, 1);
	}
	if (uring_mode == FS_URING_OFF ||
	    !(offered & UCFS_FUSE_OVER_IO_URING) ||
	    !(offered & FUSE_INIT_EXT) ||
	    len < offsetof(struct fuse_init_out, flags2) +
		  sizeof(out->flags2))
		return;
	if (fs_fuse_uring_prepare(session, fd, uring_max_write, u) < 0)
		return;		/* stay on /dev/fuse */
	out->flags |= FUSE_INIT_EXT;
	out->flags2 |= (uint32_t)(UCFS_FUSE_OVER_IO_URING >> 32);
}

static ssize_t io_writev(int fd, struct iovec *iov, int count,
			 void *userdata)
{
	const struct fuse_out_header *h;
	struct fuse_init_out out;
	struct fs_uring *u = atomic_load(&uring);
	uint64_t init = atomic_load(&init_unique);
	ssize_t n;

	(void)userdata;
	if (u != NULL && fs_fuse_uring_reply(u, iov, count, &n))
		return n;
	/* libfuse sends a reply as {header, argument}: the INIT reply is
	 * the only one patched, on a copy of its argument */
	if (init == 0 || count != 2 || iov[0].iov_len != sizeof(*h))
		return writev(fd, iov, count);
	h = iov[0].iov_base;
	if (h->unique != init || h->error != 0 ||
	    iov[1].iov_len < offsetof(struct fuse_init_out, flags2) ||
	    iov[1].iov_len > sizeof(out))
		return writev(fd, iov, count);
	atomic_store(&init_unique, 0);
	memcpy(&out, iov[1].iov_base, iov[1].iov_len);
	patch_init(&out, iov[1].iov_len, fd, &u);
	iov[1].iov_base = &out;
	n = writev(fd, iov, count);
	if (u != NULL && n > 0) {
		atomic_store(&uring, u);
		fs_fuse_uring_go(u);
	} else {
		fs_fuse_uring_stop(u);
	}
	return n;
}

static const struct fuse_custom_io io = {
	.read = io_read,
	.writev = io_writev,
};

int fs_fuse_io_attach(struct fuse_session *se, int mode, size_t max_write)
{
	session = se;
	uring_mode = mode;
	uring_max_write = max_write;
	return fuse_session_custom_io(se, &io, fuse_session_fd(se)) == 0 ?
	       0 : -EIO;
}

void fs_fuse_io_detach(void)
{
	fs_fuse_uring_stop(atomic_exchange(&uring, NULL));
}

const char *fs_fuse_io_transport(uint64_t *ring_requests)
{
	struct fs_uring *u = atomic_load(&uring);

	*ring_requests = fs_fuse_uring_requests(u);
	return fs_fuse_uring_active(u) ? "io_uring" : "dev";
}

int fs_fuse_io_killpriv_v2(void)
{
	return atomic_load(&killpriv_v2);
}

int fs_fuse_io_write_kill(void)
{
	return cur.opcode == FUSE_WRITE && cur.write_kill;
}
