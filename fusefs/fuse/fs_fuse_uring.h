/*
 * fs_fuse_uring.h — FUSE over io_uring, one queue per CPU
 * (fs_fuse_uring.c), under libfuse's request processing.
 */
#ifndef UCFS_FS_FUSE_URING_H
#define UCFS_FS_FUSE_URING_H

#include <fuse_lowlevel.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct fs_uring;

/* Set up everything for serving @se's requests from one ring per
 * possible CPU on /dev/fuse @fd (payloads of @max_write bytes): rings,
 * buffers, worker and pinned queue threads, all waiting. Call before
 * the INIT reply; ask for FUSE_OVER_IO_URING only if this returned 0. */
int fs_fuse_uring_prepare(struct fuse_session *se, int fd, size_t max_write,
			  struct fs_uring **out);

/* The INIT reply is out: register the entries and start serving. */
void fs_fuse_uring_go(struct fs_uring *u);

/* Wake and join the threads, free everything (after the session ended,
 * or instead of go; NULL is a no-op). */
void fs_fuse_uring_stop(struct fs_uring *u);

/* For fs_fuse_io.c's writev: if @iov is the reply to the ring request
 * this thread is serving, queue it to the ring, set *res to its length
 * and return 1; otherwise 0 (it goes to /dev/fuse). */
int fs_fuse_uring_reply(struct fs_uring *u, const struct iovec *iov,
			int count, ssize_t *res);

/* In a handler serving a ring request: the entry's page-aligned payload
 * buffer, where a reply of up to @size bytes can be built without a
 * copy (its bytes are the reply only if passed to fuse_reply_buf as is);
 * NULL otherwise. */
void *fs_fuse_uring_reply_buf(size_t size);
/* 1 if this thread is running a request that came through a ring (its
 * reply must be made before the handler returns, on this thread). */
int fs_fuse_uring_in_request(void);

/* 1 once every queue thread is submitting its registrations. */
int fs_fuse_uring_active(const struct fs_uring *u);
/* Requests served through the rings so far. */
uint64_t fs_fuse_uring_requests(const struct fs_uring *u);

#endif
