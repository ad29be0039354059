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
 * libfuse never splices (no FUSE_CAP_SPLICE_READ), so every request
 * passes through io_read(). Read replies may be spliced, without libfuse's
 * splice (its pipe for a 1 MiB reply wants 2 MiB, past pipe-max-size
 * for a daemon without CAP_SYS_RESOURCE, and it then copies for good):
 * a filesystem that called fs_fuse_io_splice_reads() reads file data
 * with fs_fuse_io_pread(), which splices it into this thread's pipe
 * from the file's page cache (no copy); fs_fuse_io_reply_read() makes
 * the reply with libfuse as usual, and io_writev() sends the header and
 * that pipe to /dev/fuse by splice instead of the memory. A read reply
 * then costs one copy (in the kernel, pipe to the FUSE page) where
 * pread + writev cost two. Write payloads may be too, the other way
 * (fs_fuse_io_splice_writes(): io_read() splices a request from
 * /dev/fuse into a pipe and leaves a large write's payload there;
 * fs_fuse_io_pwrite() splices it into the file).
 *
 * The contract ucfs then keeps (fs_vfs_io.c, fs_vfs.c): a write whose
 * request carries FUSE_WRITE_KILL_SUIDGID clears S_ISUID, and S_ISGID if
 * group-executable;
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
 * before the loop starts; max_read_opt before the session is made;
 * init_unique, init_flags, killpriv_v2, init_max_write, init_max_pages,
 * splice_max and uring are written once, by the thread that reads or
 * answers INIT, before any other request can arrive, and read afterwards
 * (atomics);
 * wsplice_on is set by the init handler before any other request;
 * wsplice_next is a hint any reader sets (atomic, relaxed: a stale value
 * only costs a copy or a system call); spliced_reads and spliced_writes
 * are atomic counters; `cur`, `rpipe_sending`, `wpipe_held` and the
 * pipes are per thread.
 */
#include "fusefs/fuse/fs_fuse_io.h"

#include "fusefs/fs.h"
#include "fusefs/fuse/fs_fuse.h"
#include "fusefs/fuse/fs_fuse_uring.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
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
static _Atomic uint32_t init_max_write; /* as the INIT reply said */
static _Atomic uint32_t init_max_pages;
static _Atomic size_t splice_max;	/* fs_fuse_io_splice_reads() */
static _Atomic size_t max_read_opt;	/* fs_fuse_io_max_read() */
static _Atomic uint64_t spliced_reads;	/* read replies sent by splice */
static atomic_int wsplice_on;		/* fs_fuse_io_splice_writes() */
static atomic_int wsplice_next;		/* last request: a large write */
static _Atomic uint64_t spliced_writes; /* payloads spliced to a file */
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

static ssize_t wpipe_recv(int fd, void *buf, size_t len);
static void wpipe_note(const void *buf, size_t len);

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	static _Thread_local int named;
	ssize_t n;

	(void)userdata;
	if (!named) { /* a libfuse worker: "ucfs-fuse" in top and perf */
		named = 1;
		pthread_setname_np(pthread_self(), "ucfs-fuse");
	}
	if (atomic_load_explicit(&wsplice_next, memory_order_relaxed))
		n = wpipe_recv(fd, buf, len);
	else
		n = read(fd, buf, len);
	if (n > 0) {
		fs_fuse_io_note(buf, (size_t)n);
		wpipe_note(buf, (size_t)n);
	}
	return n;
}

/* The INIT reply: ask for what libfuse 3.14 cannot name. Sets *u to the
 * prepared io_uring transport if the reply asks for it. */
static void patch_init(struct fuse_init_out *out, size_t len, int fd,
		       struct fs_uring **u)
{
	uint64_t offered = atomic_load(&init_flags);

	*u = NULL;
	atomic_store(&init_max_write, out->max_write);
	atomic_store(&init_max_pages, out->max_pages);
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

static int rpipe_send(int fd, const struct iovec *iov, int count, ssize_t *res);

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
	if (rpipe_send(fd, iov, count, &n))
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

void fs_fuse_io_limits(uint32_t *max_write, uint32_t *max_pages)
{
	*max_write = atomic_load(&init_max_write);
	*max_pages = atomic_load(&init_max_pages);
}

int fs_fuse_io_killpriv_v2(void)
{
	return atomic_load(&killpriv_v2);
}

int fs_fuse_io_write_kill(void)
{
	return cur.opcode == FUSE_WRITE && cur.write_kill;
}

/* ---- read replies spliced from a file ---- */

/* This thread's pipes. For read replies: the data of one reply,
 * referring to the file's page-cache pages (not copied), and the message
 * (header, then that data) as it is spliced to /dev/fuse. For requests
 * (fs_fuse_io_splice_writes): a request spliced from /dev/fuse, a
 * write's payload left in it. Per thread (a key's value): only its
 * thread touches it, no lock. */
struct rpipe {
	int data[2];	/* -1: not open */
	int msg[2];
	size_t held;	/* bytes of a reply in data (0: none) */
	int req[2];	/* -1: not open */
	size_t wheld;	/* payload bytes of this thread's write in req */
};

static pthread_key_t rpipe_key;
static pthread_once_t rpipe_once = PTHREAD_ONCE_INIT;
static _Thread_local struct rpipe *rpipe_sending; /* reply_read -> writev */
static _Thread_local struct rpipe *wpipe_held;	  /* recv -> pwrite */

static void pipe_close(int fd[2])
{
	if (fd[0] >= 0) {
		close(fd[0]);
		close(fd[1]);
	}
	fd[0] = fd[1] = -1;
}

/* A pipe as large as this process may have one: a max_write reply and
 * its header; pipe-max-size (1 MiB) binds a daemon without
 * CAP_SYS_RESOURCE, like the lens. 0 or -errno. */
static int pipe_open(int fd[2], size_t max_write)
{
	if (pipe2(fd, O_CLOEXEC | O_NONBLOCK) < 0) {
		fd[0] = fd[1] = -1;
		return -errno;
	}
	if (fcntl(fd[1], F_SETPIPE_SZ, 2 * (int)max_write) < 0)
		(void)fcntl(fd[1], F_SETPIPE_SZ, (int)max_write);
	return 0;
}

static void rpipe_close(struct rpipe *p)
{
	pipe_close(p->data);
	pipe_close(p->msg);
	p->held = 0;
}

static void rpipe_free(void *arg)
{
	struct rpipe *p = arg;

	rpipe_close(p);
	pipe_close(p->req);
	free(p);
}

static void rpipe_key_init(void)
{
	pthread_key_create(&rpipe_key, rpipe_free);
}

/* This thread's pipes (none open at first); NULL. */
static struct rpipe *pipes_get(void)
{
	struct rpipe *p;

	pthread_once(&rpipe_once, rpipe_key_init);
	p = pthread_getspecific(rpipe_key);
	if (p != NULL)
		return p;
	p = malloc(sizeof(*p));
	if (p == NULL)
		return NULL;
	p->data[0] = p->data[1] = p->msg[0] = p->msg[1] = -1;
	p->req[0] = p->req[1] = -1;
	p->held = p->wheld = 0;
	if (pthread_setspecific(rpipe_key, p) != 0) {
		free(p);
		return NULL;
	}
	return p;
}

/* This thread's reply pipes, open and empty; NULL. */
static struct rpipe *rpipe_get(void)
{
	struct rpipe *p = pipes_get();

	if (p == NULL)
		return NULL;
	if (p->held != 0)	/* a read whose reply was never made */
		rpipe_close(p);
	if (p->data[0] < 0 && (pipe_open(p->data, uring_max_write) < 0 ||
			       pipe_open(p->msg, uring_max_write) < 0)) {
		rpipe_close(p);
		return NULL;
	}
	return p;
}

/* The largest read reply (header aside) a pipe of this process holds,
 * one page per slot; 0 if under 2 pages. */
static size_t pipe_reply_max(size_t max_write)
{
	int fd[2];
	long cap, page = sysconf(_SC_PAGESIZE);

	if (pipe_open(fd, max_write) < 0)
		return 0;
	cap = fcntl(fd[0], F_GETPIPE_SZ);
	pipe_close(fd);
	return cap < 3 * page ? 0 : (size_t)(cap - page);
}

size_t fs_fuse_io_max_read(size_t max_write, size_t given, int splices)
{
	size_t m = given;

	if (m == 0 && splices) {
		m = pipe_reply_max(max_write);
		m = m > 0 && m < max_write ? m : 0;
	}
	atomic_store(&max_read_opt, m);
	return given != 0 ? 0 : m;
}

void fs_fuse_io_conn_max_read(struct fuse_conn_info *conn)
{
	if (atomic_load(&max_read_opt) != 0)
		conn->max_read = (unsigned)atomic_load(&max_read_opt);
}

size_t fs_fuse_io_splice_reads(struct fuse_conn_info *conn)
{
	size_t m;

	fs_fuse_io_conn_max_read(conn);
	if (!(atomic_load(&init_flags) & FUSE_SPLICE_WRITE))
		return 0;
	m = pipe_reply_max(uring_max_write);
	if (conn->max_read != 0 && m > conn->max_read)
		m = conn->max_read;
	atomic_store(&splice_max, m);
	return m;
}

/* Splice up to @size bytes of @fd at @off into @p's data pipe: the
 * count (short at EOF, after an error, or with *full set when the pipe
 * is full), or -errno if nothing could be. */
static ssize_t rpipe_fill(struct rpipe *p, int fd, off_t off, size_t size,
			  int *full)
{
	size_t got = 0;
	ssize_t n;

	*full = 0;
	while (got < size) {
		n = splice(fd, &off, p->data[1], NULL, size - got,
			   SPLICE_F_NONBLOCK);
		if (n > 0) {
			got += (size_t)n;
		} else if (n == 0) {
			break;
		} else if (errno == EAGAIN && got > 0) {
			*full = 1;
			break;
		} else if (errno != EINTR) {
			if (got == 0)
				return -errno;
			break;
		}
	}
	return (ssize_t)got;
}

/* Read @n bytes (all there) from the pipe @fd into @buf. 0 or -errno. */
static int pipe_read_all(int fd, char *buf, size_t n)
{
	size_t done = 0;
	ssize_t r;

	while (done < n) {
		r = read(fd, buf + done, n - done);
		if (r > 0)
			done += (size_t)r;
		else if (r == 0 || errno != EINTR)
			return r < 0 ? -errno : -EIO;
	}
	return 0;
}

/* Read the @n bytes in @p's data pipe into @buf. 0 or -errno. */
static int rpipe_drain(struct rpipe *p, char *buf, size_t n)
{
	int err = pipe_read_all(p->data[0], buf, n);

	if (err < 0)
		rpipe_close(p);
	return err;
}

ssize_t fs_fuse_io_pread(int fd, void *buf, size_t size, off_t off)
{
	struct rpipe *p = NULL;
	ssize_t n, m;
	int full, err;

	if (size >= 2 * (size_t)sysconf(_SC_PAGESIZE) &&
	    size <= atomic_load(&splice_max) && !fs_fuse_uring_in_request())
		p = rpipe_get();
	if (p == NULL)
		return pread(fd, buf, size, off);
	n = rpipe_fill(p, fd, off, size, &full);
	if (n < 0)	/* a file splice cannot read, or an error: its own */
		return pread(fd, buf, size, off);
	if (!full) {
		p->held = (size_t)n;
		return n;
	}
	/* an unaligned read past the pipe: the reply goes from memory */
	err = rpipe_drain(p, buf, (size_t)n);
	if (err < 0) {
		errno = -err;
		return -1;
	}
	m = pread(fd, (char *)buf + n, size - (size_t)n, off + n);
	return m < 0 ? n : n + m;
}

int fs_fuse_io_reply_read(fuse_req_t req, const void *buf, size_t n)
{
	struct rpipe *p;
	int ret;

	pthread_once(&rpipe_once, rpipe_key_init);
	p = pthread_getspecific(rpipe_key);
	if (p == NULL || p->held == 0 || p->held != n)
		return fuse_reply_buf(req, buf, n);
	rpipe_sending = p;
	ret = fuse_reply_buf(req, buf, n);	/* @buf is not read */
	if (rpipe_sending != NULL || p->held != 0)
		rpipe_close(p);
	rpipe_sending = NULL;
	return ret;
}

/* io_writev() of the reply fs_fuse_io_reply_read() is making: header
 * into the message pipe, the data behind it, all of it to /dev/fuse.
 * 1 with *res set (writev's result), or 0: not such a reply. */
static int rpipe_send(int fd, const struct iovec *iov, int count, ssize_t *res)
{
	struct rpipe *p = rpipe_sending;
	size_t len, moved = 0;
	ssize_t n;

	if (p == NULL)
		return 0;
	rpipe_sending = NULL;
	*res = -1;
	if (count != 2 || iov[1].iov_len != p->held) {
		errno = EIO;	/* never the memory: it holds nothing */
		return 1;
	}
	len = iov[0].iov_len + p->held;
	if (write(p->msg[1], iov[0].iov_base, iov[0].iov_len) !=
	    (ssize_t)iov[0].iov_len)
		return 1;
	while (moved < p->held) {
		n = splice(p->data[0], NULL, p->msg[1], NULL,
			   p->held - moved, SPLICE_F_NONBLOCK);
		if (n <= 0)
			return 1;
		moved += (size_t)n;
	}
	n = splice(p->msg[0], NULL, fd, NULL, len, 0);
	if (n == (ssize_t)len) {
		p->held = 0;	/* sent: both pipes are empty */
		atomic_fetch_add(&spliced_reads, 1);
	}
	*res = n;
	return 1;
}

uint64_t fs_fuse_io_spliced_reads(void)
{
	return atomic_load(&spliced_reads);
}

/* ---- write payloads spliced to a file ---- */

/*
 * After a WRITE of at least WSPLICE_MIN bytes, the next request is
 * spliced from /dev/fuse into this thread's request pipe instead of read:
 * the kernel puts references to the writer's page-cache pages in the
 * pipe (no copy). wpipe_recv() reads the header and fuse_write_in out of
 * it and leaves a large write's payload there; fs_fuse_io_pwrite()
 * splices it into the file (one copy, into the file's page cache, where
 * read + pwrite make two). Any other request turns reading back to
 * read(2): splice + read are two system calls where read is one, which
 * a small request does not earn back.
 */
#define WSPLICE_MIN (64u << 10)

size_t fs_fuse_io_splice_writes(struct fuse_conn_info *conn, int unless_ring)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), m;

	if (!(atomic_load(&init_flags) & FUSE_SPLICE_READ) ||
	    (unless_ring && uring_mode != FS_URING_OFF &&
	     (atomic_load(&init_flags) & UCFS_FUSE_OVER_IO_URING)))
		return conn->max_write;
	/* the header takes a pipe slot and an unaligned payload one more
	 * page than its size: a request that does not fit is failed with
	 * EIO by the kernel */
	m = pipe_reply_max(uring_max_write);
	m = m > page ? m - page : 0;
	if (m < WSPLICE_MIN)
		return conn->max_write;
	if (conn->max_write > m)
		conn->max_write = (unsigned)m;
	atomic_store(&wsplice_on, 1);
	return conn->max_write;
}

/* Drop what is left of this thread's spliced payload (never written). */
static void wpipe_discard(void)
{
	struct rpipe *p = wpipe_held;

	wpipe_held = NULL;
	if (p != NULL && p->wheld != 0) {
		pipe_close(p->req);
		p->wheld = 0;
	}
}

/* io_read() by splice: the request into this thread's pipe, then all of
 * it into @buf but a large write's payload. read(2)'s result (a held
 * payload counts, as if read). */
static ssize_t wpipe_recv(int fd, void *buf, size_t len)
{
	const struct fuse_in_header *h = buf;
	size_t head = sizeof(*h) + sizeof(struct fuse_write_in);
	struct rpipe *p;
	ssize_t n;
	int err;

	wpipe_discard();
	p = pipes_get();
	if (p == NULL ||
	    (p->req[0] < 0 && pipe_open(p->req, uring_max_write) < 0))
		return read(fd, buf, len);
	n = splice(fd, NULL, p->req[1], NULL, len, 0);
	if (n <= 0)
		return n;
	head = head < (size_t)n ? head : (size_t)n;
	err = pipe_read_all(p->req[0], buf, head);
	if (err == 0 && h->opcode == FUSE_WRITE &&
	    (size_t)n - head >= WSPLICE_MIN) {
		p->wheld = (size_t)n - head;
		wpipe_held = p;
		return n;
	}
	if (err == 0)
		err = pipe_read_all(p->req[0], (char *)buf + head,
				    (size_t)n - head);
	if (err < 0) { /* the request is lost: as a device error */
		pipe_close(p->req);
		errno = -err;
		return -1;
	}
	return n;
}

/* After a request was read: whether the next one is spliced. */
static void wpipe_note(const void *buf, size_t len)
{
	const struct fuse_in_header *h = buf;
	int large;

	if (!atomic_load_explicit(&wsplice_on, memory_order_relaxed) ||
	    len < sizeof(*h))
		return;
	large =
	    h->opcode == FUSE_WRITE &&
	    h->len >= sizeof(*h) + sizeof(struct fuse_write_in) + WSPLICE_MIN;
	/* small writes leave it (a max_write split's tail) */
	if (large || h->opcode != FUSE_WRITE)
		atomic_store_explicit(&wsplice_next, large,
				      memory_order_relaxed);
}

int fs_fuse_io_write_held(void)
{
	return wpipe_held != NULL;
}

int fs_fuse_io_write_copy(const void *buf, void *dst, size_t size)
{
	struct rpipe *p = wpipe_held;
	int err;

	if (p == NULL) {
		memcpy(dst, buf, size);
		return 0;
	}
	err = p->wheld == size ? pipe_read_all(p->req[0], dst, size) : -EIO;
	if (err == 0)
		p->wheld = 0;
	wpipe_discard();
	return err;
}

/* The held payload into this thread's buffer, then pwrite(2). */
static ssize_t wpipe_pwrite_mem(struct rpipe *p, int fd, size_t size, off_t off)
{
	char *b = fs_fuse_rbuf(size);
	int err;

	err = b == NULL ? -ENOMEM : pipe_read_all(p->req[0], b, size);
	if (err == 0)
		p->wheld = 0;
	wpipe_discard();
	if (err < 0) {
		errno = -err;
		return -1;
	}
	return pwrite(fd, b, size, off);
}

ssize_t fs_fuse_io_pwrite(int fd, const void *buf, size_t size, off_t off)
{
	struct rpipe *p = wpipe_held;
	size_t done = 0;
	ssize_t n = 0;
	int err = 0;

	if (p == NULL)
		return pwrite(fd, buf, size, off);
	if (p->wheld != size) {
		wpipe_discard();
		errno = EIO;
		return -1;
	}
	while (done < size) {
		n = splice(p->req[0], NULL, fd, &off, size - done, 0);
		if (n > 0)
			done += (size_t)n;
		else if (n == 0 || errno != EINTR)
			break;
	}
	if (n < 0)
		err = errno;
	if (done == 0 && err == EINVAL) /* O_APPEND, O_DIRECT, no splice */
		return wpipe_pwrite_mem(p, fd, size, off);
	if (done == size) {
		p->wheld = 0;
		atomic_fetch_add(&spliced_writes, 1);
	}
	wpipe_discard(); /* a short write: the rest is not written */
	if (done > 0 || err == 0)
		return (ssize_t)done;
	errno = err;
	return -1;
}

uint64_t fs_fuse_io_spliced_writes(void)
{
	return atomic_load(&spliced_writes);
}
