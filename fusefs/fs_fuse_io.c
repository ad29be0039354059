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
 * Locking: init_unique and killpriv_v2 are written once by the thread
 * that reads/answers INIT, before any other request can arrive, and read
 * afterwards (atomics); `cur` is per thread.
 */
#include "fusefs/fs_fuse_io.h"

#include <errno.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static _Atomic uint64_t init_unique;	/* 0: INIT not seen yet */
static atomic_int init_offers_v2;	/* kernel offered KILLPRIV_V2 */
static atomic_int killpriv_v2;		/* negotiated */

static _Thread_local struct {
	uint32_t opcode;
	uint32_t write_kill;	/* FUSE_WRITE_KILL_SUIDGID was set */
} cur;

static void note_request(const void *buf, size_t len)
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
		atomic_store(&init_offers_v2,
			     !!(flags & FUSE_HANDLE_KILLPRIV_V2));
		atomic_store(&init_unique, h->unique);
	}
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n;

	(void)userdata;
	n = read(fd, buf, len);
	if (n > 0)
		note_request(buf, (size_t)n);
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count,
			 void *userdata)
{
	const struct fuse_out_header *h;
	struct fuse_init_out out;
	uint64_t u = atomic_load(&init_unique);

	(void)userdata;
	/* libfuse sends a reply as {header, argument}: the INIT reply is
	 * the only one patched, on a copy of its argument */
	if (u == 0 || count != 2 || iov[0].iov_len != sizeof(*h))
		return writev(fd, iov, count);
	h = iov[0].iov_base;
	if (h->unique != u || h->error != 0 ||
	    iov[1].iov_len < offsetof(struct fuse_init_out, flags2) ||
	    iov[1].iov_len > sizeof(out))
		return writev(fd, iov, count);
	atomic_store(&init_unique, 0);
	memcpy(&out, iov[1].iov_base, iov[1].iov_len);
	if (atomic_load(&init_offers_v2)) {
		out.flags |= FUSE_HANDLE_KILLPRIV_V2;
		atomic_store(&killpriv_v2, 1);
	}
	iov[1].iov_base = &out;
	return writev(fd, iov, count);
}

static const struct fuse_custom_io io = {
	.read = io_read,
	.writev = io_writev,
};

int fs_fuse_io_attach(struct fuse_session *se)
{
	return fuse_session_custom_io(se, &io, fuse_session_fd(se)) == 0 ?
	       0 : -EIO;
}

int fs_fuse_io_killpriv_v2(void)
{
	return atomic_load(&killpriv_v2);
}

int fs_fuse_io_write_kill(void)
{
	return cur.opcode == FUSE_WRITE && cur.write_kill;
}
