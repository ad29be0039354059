/*
 * fs_fuse_io.h — ucfs's /dev/fuse transport under libfuse (fs_fuse_io.c):
 * negotiates FUSE_HANDLE_KILLPRIV_V2, exposes a write's kill flag, and
 * splices read replies from files and write payloads into them.
 */
#ifndef UCFS_FS_FUSE_IO_H
#define UCFS_FS_FUSE_IO_H

#include <fuse_lowlevel.h>
#include <stdint.h>
#include <sys/types.h>

/* Route the mounted session's requests and replies through ucfs's
 * read/writev. Call after fuse_session_mount(), before the loop. @mode
 * is the uring= option (FS_URING_*): unless off, requests move to
 * per-CPU io_uring queues (fs_fuse_uring.c) when the kernel offers it;
 * payloads of @max_write bytes. One session per process. */
int fs_fuse_io_attach(struct fuse_session *se, int mode, size_t max_write);

/* After the session loop ended: stop the io_uring threads. */
void fs_fuse_io_detach(void);

/* "io_uring" once every CPU's queue is set up, else "dev"; requests
 * served through the rings so far into *ring_requests. */
const char *fs_fuse_io_transport(uint64_t *ring_requests);

/* The largest write request and its pages as the INIT reply told the
 * kernel (0 before INIT). */
void fs_fuse_io_limits(uint32_t *max_write, uint32_t *max_pages);

/* 1 once the kernel accepted FUSE_HANDLE_KILLPRIV_V2: it no longer drops
 * privileges on write/truncate/chown itself; ucfs must. */
int fs_fuse_io_killpriv_v2(void);

/* Record the request @buf (read(2) layout) this thread is about to have
 * libfuse process: its opcode and a write's kill flag (fs_fuse_uring.c
 * calls it for the requests that do not come through read). */
void fs_fuse_io_note(const void *buf, size_t len);

/* In a write handler: 1 if the kernel asked for S_ISUID/S_ISGID to be
 * cleared (the writer lacks CAP_FSETID). */
int fs_fuse_io_write_kill(void);

/* Before the session is made: the max_read= mount option to add (0:
 * none). @given: the max_read= the user gave (0: none); then nothing is
 * added, but init must tell libfuse the same (fs_fuse_io_conn_max_read).
 * Otherwise, for a filesystem that will splice read replies (@splices),
 * the largest reply a pipe of this process holds with its header, when
 * that is under @max_write (pipe-max-size, 1 MiB, binds a daemon
 * without CAP_SYS_RESOURCE). Remembered for the init handler. */
size_t fs_fuse_io_max_read(size_t max_write, size_t given, int splices);

/* In the init handler: conn->max_read = the mount's max_read= (libfuse
 * 3.14 refuses INIT with EPROTO unless they agree), if it has one. */
void fs_fuse_io_conn_max_read(struct fuse_conn_info *conn);

/* In the init handler: let fs_fuse_io_pread() splice read replies (the
 * kernel's FUSE_SPLICE_WRITE), and fs_fuse_io_conn_max_read(). Returns
 * the largest reply it can splice (0: none); larger reads copy. */
size_t fs_fuse_io_splice_reads(struct fuse_conn_info *conn);

/* pread(2) of @size bytes of @fd at @off for a read reply: after
 * fs_fuse_io_splice_reads(), for a request that came through /dev/fuse,
 * the bytes may stay in this thread's pipe (spliced from @fd's page
 * cache, not copied) instead of landing in @buf; then
 * fs_fuse_io_reply_read() must be the next reply this thread makes. */
ssize_t fs_fuse_io_pread(int fd, void *buf, size_t size, off_t off);

/* Reply to a read with the @n bytes fs_fuse_io_pread() just returned
 * (from its pipe by splice, or from @buf): fuse_reply_buf()'s result. */
int fs_fuse_io_reply_read(fuse_req_t req, const void *buf, size_t n);

/* Read replies sent to /dev/fuse by splice so far. */
uint64_t fs_fuse_io_spliced_reads(void);

/* In the init handler: receive large writes by splice (the kernel's
 * splice read of /dev/fuse), so that fs_fuse_io_pwrite() can splice a
 * payload into a file from the writer's page-cache pages instead of
 * copying it through this process. Lowers conn->max_write to what one
 * pipe of this process holds (a request that does not fit is failed by
 * the kernel). With @unless_ring set, does nothing when the io_uring
 * transport is to be used (its requests are not spliced, and max_write
 * stays). Returns the max_write. Then a write handler must take its
 * payload only through fs_fuse_io_pwrite() or fs_fuse_io_write_copy(). */
size_t fs_fuse_io_splice_writes(struct fuse_conn_info *conn, int unless_ring);

/* In a write handler: 1 if the payload stayed in this thread's pipe
 * (libfuse's buffer then does not hold it). */
int fs_fuse_io_write_held(void);

/* In a write handler: the @size bytes of the payload (at @buf as libfuse
 * passed it, or held in the pipe) into @dst. 0 or -errno. */
int fs_fuse_io_write_copy(const void *buf, void *dst, size_t size);

/* In a write handler: pwrite(2) of the request's payload to @fd at @off,
 * spliced from the pipe when held there, else from @buf. pwrite's
 * result (a short count when the file took part of it). */
ssize_t fs_fuse_io_pwrite(int fd, const void *buf, size_t size, off_t off);

/* Write payloads spliced into a file so far. */
uint64_t fs_fuse_io_spliced_writes(void);

#endif
