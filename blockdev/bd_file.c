/*
 * bd_file.c — the device backend for a regular image file, a loop device
 * or any block device: O_DIRECT, libaio batches, fdatasync. This is the
 * only file that uses libaio.
 *
 * Open: O_DIRECT unless BD_BUFFERED; if the file system refuses O_DIRECT
 * (EINVAL at open, or at a first aligned read), the device is reopened
 * buffered and BD_BUFFERED is set in its flags. BD_EXCL takes
 * flock(LOCK_EX | LOCK_NB) on the open file (-EBUSY if held elsewhere,
 * including by another open in this process). Block devices are sized with
 * BLKGETSIZE64, regular files with fstat; a read-only block device
 * (BLKROGET) opened writable is -EROFS.
 *
 * Single synchronous I/O (bd_read/bd_write) is pread/pwrite, retried on
 * EINTR and short transfers; a BD_IO_FUA write uses RWF_DSYNC (or, if the
 * kernel refuses it, pwrite + fdatasync).
 *
 * Batches (bd_submit, bd_submit_async) go through one libaio context of
 * AIO_DEPTH slots. A batch is queued FIFO and issued as slots allow; a
 * single completion thread reaps the events (woken through an eventfd that
 * the kernel signals on every completion) and finishes batches: it wakes a
 * synchronous submitter or calls the async callback. An I/O that
 * io_submit refuses is done synchronously instead, and a short completion
 * is finished synchronously, so every I/O gets a real result. A
 * synchronous batch submitted from an async callback (on the completion
 * thread) is done with pread/pwrite, since waiting would deadlock.
 *
 * Issuing: a synchronous submitter issues its batch itself (it waits
 * anyway); an asynchronous one only queues it and wakes the completion
 * thread, which issues it: io_submit of an O_DIRECT write (pinning its
 * pages, allocating in the host file system) can take a few hundred
 * microseconds, which then do not delay the caller (a FUSE request).
 * A write waiting in the queue passes the device's write gate again
 * right before io_submit (bd_gate_check): a node that froze past its
 * disk lease while the write waited fails it instead of writing when it
 * resumes (clu_pause).
 * One thread issues at a time (f->issuing), so the FIFO order holds with
 * f->lock dropped around io_submit. Iocbs are counted as issued before
 * the call: those the kernel did not take cannot complete, so their
 * batch stays alive for the issuer to take them back.
 *
 * Locking: f->lock protects slots, the pending and finished lists,
 * outstanding, stop, issuing and every batch's issued/remaining/finished
 * fields. io_submit and callbacks are called without it. f->done_cond is
 * broadcast when a batch is finished and when outstanding drops.
 */
#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "blockdev/bd_internal.h"

#define AIO_DEPTH 128u  /* slots of the aio context */
#define REAP_MAX 64     /* events reaped per io_getevents */
#define SUBMIT_MAX 64u  /* iocbs per io_submit */

struct file_batch {
	struct file_batch *pend_next; /* pending list; f->lock */
	struct file_batch *fin_next;  /* finished list; f->lock */
	struct bd_io *ios;       /* immutable */
	struct iocb *iocbs;      /* n of them; immutable after setup */
	unsigned n;              /* immutable */
	unsigned issued;         /* f->lock: iocbs handed to the kernel */
	unsigned remaining;      /* f->lock: I/Os not yet complete */
	int finished;            /* f->lock: sync batch done */
	bd_done_fn done;         /* immutable; NULL for a sync batch */
	void *arg;               /* immutable */
};

struct bd_file {
	struct bd_dev dev;    /* first: container of the common header */
	int fd;               /* immutable after open */
	int efd;              /* immutable: eventfd, aio completions */
	io_context_t ctx;     /* immutable after open */
	pthread_t thread;     /* the completion thread */
	pthread_mutex_t lock;
	pthread_cond_t done_cond;
	unsigned slots;                /* f->lock: free aio slots */
	struct file_batch *pend_head;  /* f->lock: not fully issued, FIFO */
	struct file_batch *pend_tail;  /* f->lock */
	struct file_batch *fin_head;   /* f->lock: complete, to finish */
	unsigned outstanding;          /* f->lock: batches not finished */
	int stop;                      /* f->lock: completion thread exits */
	int issuing;                   /* f->lock: a thread is in issue */
};

static struct bd_file *to_file(struct bd_dev *dev)
{
	return (struct bd_file *)dev;
}

static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	char *p = buf;
	ssize_t r;

	while (len > 0) {
		r = pread(fd, p, len, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO; /* the file shrank under us */
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

/* pwritev2 with @rwf (0 or RWF_DSYNC) until all is written. */
static int pwrite_full(int fd, const void *buf, size_t len, uint64_t off,
		       int rwf)
{
	struct iovec iov;
	ssize_t r;

	while (len > 0) {
		iov.iov_base = (void *)buf;
		iov.iov_len = len;
		r = pwritev2(fd, &iov, 1, (off_t)off, rwf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO;
		buf = (const char *)buf + r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

static int fdatasync_retry(int fd)
{
	while (fdatasync(fd) != 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

static int write_sync(int fd, const void *buf, size_t len, uint64_t off,
		      unsigned io_flags)
{
	int ret;

	if (!(io_flags & BD_IO_FUA))
		return pwrite_full(fd, buf, len, off, 0);
	ret = pwrite_full(fd, buf, len, off, RWF_DSYNC);
	if (ret != -EOPNOTSUPP && ret != -EINVAL)
		return ret;
	ret = pwrite_full(fd, buf, len, off, 0);
	return ret != 0 ? ret : fdatasync_retry(fd);
}

static int file_read(struct bd_dev *dev, void *buf, size_t len, uint64_t off)
{
	return pread_full(to_file(dev)->fd, buf, len, off);
}

static int file_write(struct bd_dev *dev, const void *buf, size_t len,
		      uint64_t off, unsigned io_flags)
{
	return write_sync(to_file(dev)->fd, buf, len, off, io_flags);
}

/* Do (the rest of) ios[i] synchronously, from byte @done on. */
static int io_finish_sync(struct bd_file *f, struct bd_io *io, size_t done)
{
	char *buf = (char *)io->buf + done;

	if (io->op == BD_READ)
		return pread_full(f->fd, buf, io->len - done, io->off + done);
	return write_sync(f->fd, buf, io->len - done, io->off + done,
			  io->flags);
}

/* One I/O of @b completed; call with f->lock held. */
static void batch_io_done_locked(struct bd_file *f, struct file_batch *b)
{
	if (--b->remaining == 0) {
		b->fin_next = f->fin_head;
		f->fin_head = b;
	}
}

static void wake_thread(struct bd_file *f)
{
	uint64_t one = 1;

	while (write(f->efd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

/* io_submit refused ios[b->issued]: do it synchronously instead. */
static void issue_refused_locked(struct bd_file *f, struct file_batch *b)
{
	struct bd_io *io = &b->ios[b->issued];

	io->ret = io_finish_sync(f, io, 0);
	b->issued++;
	batch_io_done_locked(f, b);
	if (b->remaining == 0)
		wake_thread(f);
}

/* ios[b->issued] is a write the device's gate now refuses (the node
 * froze past its disk lease while it waited here): failed with @err, not
 * issued. f->lock held. */
static void issue_gated_locked(struct bd_file *f, struct file_batch *b, int err)
{
	b->ios[b->issued].ret = err;
	b->issued++;
	batch_io_done_locked(f, b);
	if (b->remaining == 0)
		wake_thread(f);
}

/* How many of the next *@m I/Os of @b may be issued: all while the gate
 * is open or they are reads; else the reads before the first write, or,
 * when that write comes first, none (returns the gate's error). */
static int gate_next(struct bd_file *f, const struct file_batch *b, unsigned *m)
{
	unsigned reads = 0;
	int ret;

	while (reads < *m && b->ios[b->issued + reads].op != BD_WRITE)
		reads++;
	if (reads == *m)
		return 0;
	ret = bd_gate_check(&f->dev);
	if (ret == 0 || reads == 0)
		return ret;
	*m = reads;
	return 0;
}

static void pend_pop_locked(struct bd_file *f)
{
	f->pend_head = f->pend_head->pend_next;
	if (f->pend_head == NULL)
		f->pend_tail = NULL;
}

/* Put @b back at the head of the pending list. f->lock held. */
static void pend_push_front_locked(struct bd_file *f, struct file_batch *b)
{
	b->pend_next = f->pend_head;
	f->pend_head = b;
	if (f->pend_tail == NULL)
		f->pend_tail = b;
}

/* Hand pending iocbs to the kernel while slots are free. f->lock held;
 * dropped around io_submit. A thread finding another one issuing leaves
 * the work to it (it loops until nothing is pending or slots run out). */
static void issue_locked(struct bd_file *f)
{
	struct iocb *ptrs[SUBMIT_MAX];
	struct file_batch *b;
	unsigned m, taken, popped;
	int r;

	if (f->issuing)
		return;
	f->issuing = 1;
	while ((b = f->pend_head) != NULL && f->slots > 0) {
		m = b->n - b->issued;
		if (m > f->slots)
			m = f->slots;
		if (m > SUBMIT_MAX)
			m = SUBMIT_MAX;
		r = gate_next(f, b, &m);
		if (r != 0) {
			issue_gated_locked(f, b, r);
			if (b->issued == b->n)
				pend_pop_locked(f);
			continue;
		}
		for (unsigned i = 0; i < m; i++)
			ptrs[i] = &b->iocbs[b->issued + i];
		b->issued += m;
		f->slots -= m;
		popped = b->issued == b->n;
		if (popped)
			pend_pop_locked(f);
		pthread_mutex_unlock(&f->lock);
		r = io_submit(f->ctx, (long)m, ptrs);
		pthread_mutex_lock(&f->lock);
		if (r == (int)m)
			continue;
		/* b is alive: the iocbs not taken cannot complete */
		taken = r > 0 ? (unsigned)r : 0;
		b->issued -= m - taken;
		f->slots += m - taken;
		if (popped)
			pend_push_front_locked(f, b);
		if (taken > 0 || r == -EINTR)
			continue;
		if ((r == 0 || r == -EAGAIN) && f->slots < AIO_DEPTH)
			break; /* retried when a completion frees a slot */
		issue_refused_locked(f, b);
		if (b->issued == b->n)
			pend_pop_locked(f);
	}
	f->issuing = 0;
}

/* Record one event's result; f->lock held (a short completion is
 * finished synchronously, which is rare). */
static void handle_event_locked(struct bd_file *f, struct io_event *ev)
{
	struct iocb *cb = ev->obj;
	struct file_batch *b = cb->data;
	struct bd_io *io = &b->ios[cb - b->iocbs];
	long res = (long)ev->res;

	if (res < 0)
		io->ret = (int)res;
	else if ((size_t)res >= io->len)
		io->ret = 0;
	else
		io->ret = io_finish_sync(f, io, (size_t)res);
	f->slots++;
	batch_io_done_locked(f, b);
}

static void reap_events(struct bd_file *f)
{
	struct io_event ev[REAP_MAX];
	struct timespec zero = { 0, 0 };
	int r;

	do {
		r = io_getevents(f->ctx, 0, REAP_MAX, ev, &zero);
		if (r == -EINTR)
			continue;
		if (r <= 0)
			break;
		pthread_mutex_lock(&f->lock);
		for (int i = 0; i < r; i++)
			handle_event_locked(f, &ev[i]);
		pthread_mutex_unlock(&f->lock);
	} while (r == -EINTR || r == REAP_MAX);
}

/* Wake the sync waiter or call the callback of each finished batch. */
static void finish_batches(struct bd_file *f, struct file_batch *list)
{
	struct file_batch *b, *next;

	for (b = list; b != NULL; b = next) {
		next = b->fin_next;
		if (b->done != NULL) {
			b->done(b->ios, b->n, b->arg);
			free(b);
			pthread_mutex_lock(&f->lock);
		} else {
			pthread_mutex_lock(&f->lock);
			b->finished = 1; /* the waiter frees b */
		}
		f->outstanding--;
		pthread_cond_broadcast(&f->done_cond);
		pthread_mutex_unlock(&f->lock);
	}
}

static void *completion_main(void *arg)
{
	struct bd_file *f = arg;
	struct file_batch *list;
	uint64_t v;
	int stop;

	do {
		if (read(f->efd, &v, sizeof(v)) < 0 && errno != EINTR &&
		    errno != EAGAIN)
			break; /* cannot happen on a valid eventfd */
		reap_events(f);
		pthread_mutex_lock(&f->lock);
		issue_locked(f);
		list = f->fin_head;
		f->fin_head = NULL;
		stop = f->stop;
		pthread_mutex_unlock(&f->lock);
		finish_batches(f, list);
	} while (!stop);
	return NULL;
}

static struct file_batch *batch_new(struct bd_file *f, struct bd_io *ios,
				    unsigned n, bd_done_fn done, void *arg)
{
	struct file_batch *b;

	b = malloc(sizeof(*b) + n * sizeof(struct iocb));
	if (b == NULL)
		return NULL;
	b->pend_next = NULL;
	b->fin_next = NULL;
	b->ios = ios;
	b->iocbs = (struct iocb *)(b + 1);
	b->n = n;
	b->issued = 0;
	b->remaining = n;
	b->finished = 0;
	b->done = done;
	b->arg = arg;
	for (unsigned i = 0; i < n; i++) {
		struct iocb *cb = &b->iocbs[i];

		if (ios[i].op == BD_READ) {
			io_prep_pread(cb, f->fd, ios[i].buf, ios[i].len,
				      (long long)ios[i].off);
		} else {
			io_prep_pwrite(cb, f->fd, ios[i].buf, ios[i].len,
				       (long long)ios[i].off);
			if (ios[i].flags & BD_IO_FUA)
				cb->aio_rw_flags = RWF_DSYNC;
		}
		io_set_eventfd(cb, f->efd);
		cb->data = b;
		ios[i].ret = 0;
	}
	return b;
}

/* Queue @b; issue it here (@now) or let the completion thread do it. */
static void batch_enqueue(struct bd_file *f, struct file_batch *b, int now)
{
	pthread_mutex_lock(&f->lock);
	f->outstanding++;
	if (f->pend_tail != NULL)
		f->pend_tail->pend_next = b;
	else
		f->pend_head = b;
	f->pend_tail = b;
	if (now)
		issue_locked(f);
	pthread_mutex_unlock(&f->lock);
	if (!now)
		wake_thread(f);
}

static int file_submit(struct bd_dev *dev, struct bd_io *ios, unsigned n)
{
	struct bd_file *f = to_file(dev);
	struct file_batch *b;
	int first = 0;

	if (pthread_equal(pthread_self(), f->thread)) {
		/* From an async callback: waiting for the completion thread
		 * would wait for ourselves, so do the batch right here. */
		for (unsigned i = 0; i < n; i++) {
			ios[i].ret = io_finish_sync(f, &ios[i], 0);
			if (ios[i].ret != 0 && first == 0)
				first = ios[i].ret;
		}
		return first;
	}
	b = batch_new(f, ios, n, NULL, NULL);
	if (b == NULL)
		return -ENOMEM;
	batch_enqueue(f, b, 1);
	pthread_mutex_lock(&f->lock);
	while (!b->finished)
		pthread_cond_wait(&f->done_cond, &f->lock);
	pthread_mutex_unlock(&f->lock);
	free(b);
	for (unsigned i = 0; i < n; i++)
		if (ios[i].ret != 0 && first == 0)
			first = ios[i].ret;
	return first;
}

static int file_submit_async(struct bd_dev *dev, struct bd_io *ios,
			     unsigned n, bd_done_fn done, void *arg)
{
	struct bd_file *f = to_file(dev);
	struct file_batch *b;

	b = batch_new(f, ios, n, done, arg);
	if (b == NULL)
		return -ENOMEM;
	batch_enqueue(f, b, 0);
	return 0;
}

static int file_flush(struct bd_dev *dev)
{
	return fdatasync_retry(to_file(dev)->fd);
}

static void file_close(struct bd_dev *dev)
{
	struct bd_file *f = to_file(dev);

	pthread_mutex_lock(&f->lock);
	while (f->outstanding > 0)
		pthread_cond_wait(&f->done_cond, &f->lock);
	f->stop = 1;
	pthread_mutex_unlock(&f->lock);
	wake_thread(f);
	pthread_join(f->thread, NULL);
	io_destroy(f->ctx);
	close(f->efd);
	close(f->fd); /* drops the flock */
	pthread_cond_destroy(&f->done_cond);
	pthread_mutex_destroy(&f->lock);
	bd_dev_fini(dev);
	free(f);
}

static const struct bd_ops file_ops = {
	.read = file_read,
	.write = file_write,
	.submit = file_submit,
	.submit_async = file_submit_async,
	.flush = file_flush,
	.close = file_close,
};

/* 1 unless the file system refuses an aligned O_DIRECT read (some accept
 * the open and fail the I/O with EINVAL); -ENOMEM. Other errors are left
 * for the real I/O to report. */
static int direct_probe(int fd)
{
	void *buf = bd_buf_alloc(BD_ALIGN);
	ssize_t r;

	if (buf == NULL)
		return -ENOMEM;
	do
		r = pread(fd, buf, BD_ALIGN, 0);
	while (r < 0 && errno == EINTR);
	free(buf);
	return (r < 0 && errno == EINVAL) ? 0 : 1;
}

/* Open @path, O_DIRECT if allowed and accepted; updates *flags. */
static int open_fd(const char *path, unsigned *flags)
{
	int oflags = O_CLOEXEC | ((*flags & BD_RDONLY) ? O_RDONLY : O_RDWR);
	int fd, ret;

	if (!(*flags & BD_BUFFERED)) {
		fd = open(path, oflags | O_DIRECT);
		if (fd < 0 && errno != EINVAL)
			return -errno;
		if (fd >= 0) {
			ret = direct_probe(fd);
			if (ret == 1)
				return fd;
			close(fd);
			if (ret < 0)
				return ret;
		}
		*flags |= BD_BUFFERED;
	}
	fd = open(path, oflags);
	return fd < 0 ? -errno : fd;
}

/* Size of the device; -EROFS for a writable open of a read-only block
 * device (Linux lets the open succeed and fails each write with EPERM). */
static int device_size(int fd, unsigned flags, uint64_t *size)
{
	struct stat st;
	int ro = 0;

	if (fstat(fd, &st) != 0)
		return -errno;
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, size) != 0)
			return -errno;
		if (ioctl(fd, BLKROGET, &ro) != 0)
			return -errno;
		if (ro && !(flags & BD_RDONLY))
			return -EROFS;
	} else if (S_ISREG(st.st_mode)) {
		*size = (uint64_t)st.st_size;
	} else {
		return -ENODEV;
	}
	if (*size == 0 || *size % BD_ALIGN != 0)
		return -EINVAL;
	return 0;
}

/* The aio context, eventfd, lock and completion thread of @f. */
static int file_aio_init(struct bd_file *f)
{
	int ret;

	f->efd = eventfd(0, EFD_CLOEXEC);
	if (f->efd < 0)
		return -errno;
	ret = io_setup(AIO_DEPTH, &f->ctx);
	if (ret != 0)
		goto out_efd;
	f->slots = AIO_DEPTH;
	ret = -pthread_mutex_init(&f->lock, NULL);
	if (ret != 0)
		goto out_ctx;
	ret = -pthread_cond_init(&f->done_cond, NULL);
	if (ret != 0)
		goto out_mutex;
	ret = -pthread_create(&f->thread, NULL, completion_main, f);
	if (ret != 0)
		goto out_cond;
	return 0;

out_cond:
	pthread_cond_destroy(&f->done_cond);
out_mutex:
	pthread_mutex_destroy(&f->lock);
out_ctx:
	io_destroy(f->ctx);
out_efd:
	close(f->efd);
	return ret;
}

int bd_file_open(const char *path, unsigned flags, struct bd_dev **out)
{
	struct bd_file *f;
	uint64_t size;
	int ret;

	if (path == NULL || (flags & ~(unsigned)(BD_RDONLY | BD_BUFFERED |
						 BD_EXCL)))
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -ENOMEM;
	f->fd = open_fd(path, &flags);
	if (f->fd < 0) {
		ret = f->fd;
		goto out_free;
	}
	if ((flags & BD_EXCL) && flock(f->fd, LOCK_EX | LOCK_NB) != 0) {
		ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
		goto out_close;
	}
	ret = device_size(f->fd, flags, &size);
	if (ret != 0)
		goto out_close;
	ret = bd_dev_init(&f->dev, &file_ops, path, size, flags);
	if (ret != 0)
		goto out_close;
	ret = file_aio_init(f);
	if (ret != 0)
		goto out_fini;
	*out = &f->dev;
	return 0;

out_fini:
	bd_dev_fini(&f->dev);
out_close:
	close(f->fd);
out_free:
	free(f);
	return ret;
}
