/*
 * fs_fuse_io.h — ucfs's /dev/fuse transport under libfuse (fs_fuse_io.c):
 * negotiates FUSE_HANDLE_KILLPRIV_V2 and exposes a write's kill flag.
 */
#ifndef UCFS_FS_FUSE_IO_H
#define UCFS_FS_FUSE_IO_H

#include <fuse_lowlevel.h>
#include <stdint.h>

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

/* Before the session is made, for a filesystem that will splice read
 * replies: the max_read= mount option to add (0: none), when a pipe of
 * this process cannot hold a reply of @max_write bytes and its header
 * (pipe-max-size, 1 MiB, binds a daemon without CAP_SYS_RESOURCE).
 * @given: the max_read= the user gave (0: none; then nothing is added).
 * Remembered for fs_fuse_io_splice_reads(). */
size_t fs_fuse_io_max_read(size_t max_write, size_t given);

/* In the init handler: let fs_fuse_io_pread() splice read replies (the
 * kernel's FUSE_SPLICE_WRITE), and set conn->max_read to the mount's
 * (fs_fuse_io_max_read(): libfuse refuses INIT unless they agree).
 * Returns the largest reply it can splice (0: none); larger reads copy. */
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

#endif
