/*
 * bd_nbd.c — the device backend for a network block device export, reached
 * through libnbd (nbdkit, nbd-server or any NBD server). This is the only
 * file that uses libnbd.
 *
 * Connection: one NBD connection per device, opened from a libnbd URI
 * (nbd://host[:port]/export, nbd+unix:///export?socket=PATH, ...). One
 * extra query parameter is ours and is removed before libnbd sees the URI:
 * io_timeout=SECONDS (default NBD_TIMEOUT_S), the longest a command (or
 * the connection handshake) may take. The size is the export's; it must be
 * a non-zero multiple of BD_ALIGN and the server's minimum block size must
 * divide BD_ALIGN (else -EINVAL). A read-only export opened without
 * BD_RDONLY is -EROFS, as a read-only block device is for bd_file.
 *
 * Commands: every I/O, synchronous or not, becomes asynchronous libnbd
 * commands (nbd_aio_pread/pwrite/flush), split into chunks of at most the
 * server's maximum request size (32 MiB if it says nothing), all in flight
 * at once; a batch completes when its last chunk has. A synchronous caller
 * then waits on a condition variable. BD_IO_FUA is NBD's FUA flag, or, if
 * the server has no FUA, the batch's writes followed by one NBD flush
 * before the batch completes. bd_flush is an NBD flush; a server that
 * cannot flush (it does not advertise it) gets none and bd_flush returns
 * 0: durability is then whatever that server gives.
 *
 * The poll thread drives the connection: it polls the libnbd socket in the
 * direction libnbd asks for, plus an eventfd that submitters write after
 * queuing a command (so that the direction is recomputed), calls
 * nbd_aio_notify_read/write, and runs the callbacks of finished async
 * batches. libnbd runs our callbacks (cmd_done, cmd_free) with its handle
 * lock held, where no libnbd call is allowed, so they only record the
 * result; all follow-up work (async callbacks, FUA fallback flushes) is
 * done by the poll thread outside libnbd. A synchronous batch submitted
 * from an async callback (on the poll thread) drives the connection itself
 * until that batch is done, since waiting would deadlock; other batches'
 * callbacks are left for the outer loop.
 *
 * The write gate (bd.h) is checked by bd_submit when a batch is queued,
 * and again by the poll thread at every round while writes are in flight:
 * libnbd may hold a command unsent (the socket full) when the node is
 * frozen; if the gate closed meanwhile (the disk lease ran out), the
 * connection is killed before libnbd may send it, as bd_file re-checks
 * before io_submit. Bytes already in the kernel's socket buffer when the
 * node froze cannot be called back (MOUNT.md "Disk lease").
 *
 * Timeouts and failures: NBD cannot cancel one command, so when the oldest
 * command in flight is older than the timeout, the connection is declared
 * dead: the poll thread shuts its socket down, libnbd then fails every
 * command in flight, and every later I/O fails at once. A server that goes
 * away (EOF, reset) ends the same way. Such I/Os return -ENOTCONN (a
 * write may or may not have reached the server); errors the server
 * reports are passed on as -errno (-EIO, -ENOSPC, ...). Nothing
 * reconnects: a device whose connection died stays dead until reopened.
 *
 * BD_EXCL: the NBD protocol has no lock, so BD_EXCL is what flock gives
 * bd_file on a shared disk: exclusion between processes of this host. It
 * takes flock(LOCK_EX | LOCK_NB) on a lock file named after the URI
 * (without io_timeout) in NBD_LOCK_DIR (/tmp if that is missing; removed
 * by its holder on close, so none accumulate): -EBUSY if another process
 * of this host holds it, so a second lockproto=nolock mount, a mkfs or
 * fsck -y of a mounted export, and a mount racing the write-back of the
 * previous daemon are refused or wait as they do on a file. The same
 * export spelled differently (another host name, another socket path) is
 * not recognised. Clients on other hosts are not excluded (nor are they on
 * a SAN disk with bd_file): for lockproto=nolock over the network, the
 * server must admit one client at a time (nbdkit --filter=limit limit=1,
 * nbd-server maxconnections = 1). DLM mounts share the export on purpose
 * and do not use BD_EXCL; they need a server whose connections see each
 * other's completed writes (NBD multi-conn consistency; nbdkit's file
 * plugin and nbd-server on a file give it). A flush that makes the other
 * connections' completed writes durable too is what the server's
 * multi-conn flag promises: without it, bd_flush_covers_all() is 0 and
 * the journal writes no checkpoint records. BD_BUFFERED means nothing
 * here and is accepted.
 *
 * Locking: d->lock protects the in-flight command list, dead, stop,
 * outstanding and every batch's remaining/finished/post_flush fields and
 * its place on the finished list. A sync batch's b->cond is signalled when
 * it finishes (only its submitter waits on it); d->cond is broadcast when
 * outstanding drops to 0 (bd_close waits for that). libnbd's handle lock
 * is taken inside libnbd calls; cmd_done runs under it and takes d->lock,
 * so the order is: libnbd handle lock -> d->lock. Never call libnbd with
 * d->lock held.
 */
#include <errno.h>
#include <fcntl.h>
#include <libnbd.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blockdev/bd_internal.h"

#define NBD_TIMEOUT_S 30u          /* default io_timeout */
#define NBD_CHUNK_MAX (32u << 20)  /* largest request if no server limit */
#define NBD_IDLE_MS 1000           /* poll wait with nothing in flight */
#define NBD_LOCK_DIR "/run/lock"    /* BD_EXCL lock files */

struct nbd_batch;
struct bd_nbd;

enum nbd_kind { NBD_K_READ, NBD_K_WRITE, NBD_K_FLUSH };

/* One NBD command: a chunk of an I/O, or a flush. The request fields are
 * set before it is issued and read only by its issuer. */
struct nbd_cmd {
	struct nbd_cmd *prev, *next; /* in-flight list; d->lock */
	struct nbd_batch *b;         /* immutable */
	int *ret;                    /* where an error goes; d->lock */
	enum nbd_kind kind;          /* request */
	void *buf;                   /* request */
	size_t len;                  /* request */
	uint64_t off;                /* request */
	uint32_t nflags;             /* request: LIBNBD_CMD_FLAG_* */
	uint64_t start_ns;           /* d->lock */
	int err;                     /* libnbd's error (completion cb) */
	int called;                  /* the completion callback ran */
};

struct nbd_batch {
	struct bd_nbd *d;           /* immutable */
	struct nbd_batch *fin_next; /* finished async list; d->lock */
	struct bd_io *ios;          /* immutable */
	unsigned n;                 /* immutable */
	unsigned ncmd;              /* immutable: chunk commands */
	unsigned remaining;         /* d->lock: commands not complete */
	int finished;               /* d->lock: sync batch done */
	pthread_cond_t cond;        /* sync batch: signalled when finished */
	int post_flush;             /* d->lock: FUA fallback flush owed */
	int flush_ret;              /* d->lock: result of a flush command */
	bd_done_fn done;            /* immutable; NULL for a sync batch */
	void *arg;                  /* immutable */
	struct nbd_cmd cmds[];      /* ncmd + 1 (the last: a flush) */
};

struct bd_nbd {
	struct bd_dev dev;        /* first: container of the common header */
	struct nbd_handle *h;     /* immutable after open; own locking */
	int fd;                   /* immutable: libnbd's socket */
	int efd;                  /* immutable: eventfd, wakes the thread */
	int lock_fd;              /* immutable: BD_EXCL lock file, or -1 */
	char lock_path[64];       /* immutable: its path */
	uint64_t timeout_ns;      /* immutable */
	size_t chunk;             /* immutable: largest request */
	int can_fua;              /* immutable */
	int can_flush;            /* immutable */
	pthread_t thread;         /* the poll thread */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct nbd_cmd *oldest;   /* d->lock: in-flight list head */
	struct nbd_cmd *newest;   /* d->lock: in-flight list tail */
	struct nbd_batch *fin_head; /* d->lock: finished async batches */
	unsigned outstanding;     /* d->lock: batches not finished */
	unsigned writes;          /* d->lock: write commands in flight */
	int dead;                 /* d->lock: connection lost */
	int stop;                 /* d->lock: poll thread exits */
};

static struct bd_nbd *to_nbd(struct bd_dev *dev)
{
	return (struct bd_nbd *)dev;
}

static void wake_thread(struct bd_nbd *d)
{
	uint64_t one = 1;

	while (write(d->efd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

static void inflight_del_locked(struct bd_nbd *d, struct nbd_cmd *c)
{
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		d->oldest = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	else
		d->newest = c->prev;
	c->prev = c->next = NULL;
	d->writes -= c->kind == NBD_K_WRITE;
}

static void inflight_add_locked(struct bd_nbd *d, struct nbd_cmd *c)
{
	c->start_ns = bd_now_ns();
	c->next = NULL;
	c->prev = d->newest;
	if (d->newest != NULL)
		d->newest->next = c;
	else
		d->oldest = c;
	d->newest = c;
	d->writes += c->kind == NBD_K_WRITE;
}

/* A batch's last command completed. d->lock held. */
static void batch_complete_locked(struct bd_nbd *d, struct nbd_batch *b)
{
	if (b->done != NULL) {
		b->fin_next = d->fin_head;
		d->fin_head = b;
		wake_thread(d);
	} else {
		b->finished = 1;
		pthread_cond_signal(&b->cond);
	}
}

/* One batch less outstanding. d->lock held. */
static void outstanding_dec_locked(struct bd_nbd *d)
{
	if (--d->outstanding == 0)
		pthread_cond_broadcast(&d->cond);
}

/* Record the result of @c (0 or an errno); @c may be freed with its
 * batch as soon as d->lock is dropped. d->lock held. */
static void cmd_result_locked(struct bd_nbd *d, struct nbd_cmd *c, int err)
{
	inflight_del_locked(d, c);
	if (err != 0 && *c->ret == 0)
		*c->ret = -err;
	if (--c->b->remaining == 0)
		batch_complete_locked(d, c->b);
}

/*
 * libnbd's callbacks run with its handle lock held, so they only record.
 * The completion callback (reached once if the command was sent) keeps
 * the error; the free callback (reached once in every case, also when
 * nbd_aio_* fails and returns -1) delivers the result. A command libnbd
 * refused is one it could not send: in practice, its connection died
 * (the requests themselves are checked before), hence ENOTCONN.
 */
static int cmd_done(void *user_data, int *error)
{
	struct nbd_cmd *c = user_data;

	c->err = *error;
	c->called = 1;
	return 1; /* retire the command */
}

static void cmd_free(void *user_data)
{
	struct nbd_cmd *c = user_data;
	struct bd_nbd *d = c->b->d;

	pthread_mutex_lock(&d->lock);
	cmd_result_locked(d, c, c->called ? c->err : ENOTCONN);
	pthread_mutex_unlock(&d->lock);
}

/* Start command @c; its result always arrives through cmd_result_locked.
 * Once libnbd has it, @c (and its batch) may be gone: not touched after. */
static void cmd_issue(struct bd_nbd *d, struct nbd_cmd *c)
{
	nbd_completion_callback cb = { .callback = cmd_done,
				       .user_data = c, .free = cmd_free };

	pthread_mutex_lock(&d->lock);
	inflight_add_locked(d, c);
	if (d->dead) {
		cmd_result_locked(d, c, ENOTCONN);
		pthread_mutex_unlock(&d->lock);
		return;
	}
	pthread_mutex_unlock(&d->lock);
	if (c->kind == NBD_K_READ)
		nbd_aio_pread(d->h, c->buf, c->len, c->off, cb, 0);
	else if (c->kind == NBD_K_WRITE)
		nbd_aio_pwrite(d->h, c->buf, c->len, c->off, cb, c->nflags);
	else
		nbd_aio_flush(d->h, cb, 0);
}

/* Commands needed for @len bytes. */
static unsigned chunks_of(const struct bd_nbd *d, size_t len)
{
	return (unsigned)((len + d->chunk - 1) / d->chunk);
}

/* The commands of @io, from b->cmds[*k] on. */
static void batch_chunk(struct bd_nbd *d, struct nbd_batch *b,
			struct bd_io *io, unsigned *k)
{
	int fua = io->op == BD_WRITE && (io->flags & BD_IO_FUA);

	for (size_t done = 0; done < io->len; done += d->chunk) {
		struct nbd_cmd *c = &b->cmds[(*k)++];

		c->b = b;
		c->ret = &io->ret;
		c->kind = io->op == BD_READ ? NBD_K_READ : NBD_K_WRITE;
		c->buf = (char *)io->buf + done;
		c->len = io->len - done < d->chunk ? io->len - done : d->chunk;
		c->off = io->off + done;
		c->nflags = fua && d->can_fua ? LIBNBD_CMD_FLAG_FUA : 0;
	}
	if (fua && !d->can_fua && d->can_flush)
		b->post_flush = 1;
}

static struct nbd_batch *batch_new(struct bd_nbd *d, struct bd_io *ios,
				   unsigned n, bd_done_fn done, void *arg)
{
	struct nbd_batch *b;
	unsigned ncmd = 0, k = 0;

	for (unsigned i = 0; i < n; i++)
		ncmd += chunks_of(d, ios[i].len);
	b = calloc(1, sizeof(*b) + (ncmd + 1) * sizeof(struct nbd_cmd));
	if (b == NULL)
		return NULL;
	b->d = d;
	b->ios = ios;
	b->n = n;
	b->ncmd = ncmd;
	b->remaining = ncmd;
	b->done = done;
	b->arg = arg;
	if (done == NULL && pthread_cond_init(&b->cond, NULL) != 0) {
		free(b);
		return NULL;
	}
	for (unsigned i = 0; i < n; i++) {
		ios[i].ret = 0;
		batch_chunk(d, b, &ios[i], &k);
	}
	b->cmds[ncmd].b = b;
	b->cmds[ncmd].ret = &b->flush_ret;
	b->cmds[ncmd].kind = NBD_K_FLUSH;
	return b;
}

/* Issue every chunk of @b. An async @b may complete and be freed as soon
 * as its last command is issued: nothing of it is read after that. */
static void batch_issue(struct bd_nbd *d, struct nbd_batch *b)
{
	struct nbd_cmd *cmds = b->cmds;
	unsigned ncmd = b->ncmd;

	for (unsigned k = 0; k < ncmd; k++)
		cmd_issue(d, &cmds[k]);
	/* The poll thread waits for the directions libnbd wanted when it
	 * last looked; if a request is still unsent, it must look again. */
	if (nbd_aio_get_direction(d->h) & LIBNBD_AIO_DIRECTION_WRITE)
		wake_thread(d);
}

/* Re-arm a completed @b with its owed FUA fallback flush and issue it.
 * Returns 1 if it did (the batch is in flight again), 0 if none owed. */
static int batch_post_flush(struct bd_nbd *d, struct nbd_batch *b)
{
	struct nbd_cmd *c = &b->cmds[b->ncmd];

	pthread_mutex_lock(&d->lock);
	if (!b->post_flush) {
		pthread_mutex_unlock(&d->lock);
		return 0;
	}
	b->post_flush = 0;
	b->finished = 0;
	b->remaining = 1;
	pthread_mutex_unlock(&d->lock);
	cmd_issue(d, c);
	if (nbd_aio_get_direction(d->h) & LIBNBD_AIO_DIRECTION_WRITE)
		wake_thread(d);
	return 1;
}

/* A failed fallback flush fails the FUA writes of @b. d->lock held. */
static void batch_apply_flush_locked(struct nbd_batch *b)
{
	if (b->flush_ret == 0)
		return;
	for (unsigned i = 0; i < b->n; i++)
		if (b->ios[i].op == BD_WRITE &&
		    (b->ios[i].flags & BD_IO_FUA) && b->ios[i].ret == 0)
			b->ios[i].ret = b->flush_ret;
}

static int batch_first_error(const struct nbd_batch *b)
{
	for (unsigned i = 0; i < b->n; i++)
		if (b->ios[i].ret != 0)
			return b->ios[i].ret;
	return 0;
}

/* Declare the connection dead: shut the socket down so that libnbd sees
 * EOF and fails every command in flight. */
static void conn_kill(struct bd_nbd *d)
{
	pthread_mutex_lock(&d->lock);
	d->dead = 1;
	pthread_mutex_unlock(&d->lock);
	shutdown(d->fd, SHUT_RDWR);
}

/* Milliseconds to wait in poll: until the oldest command's deadline, or
 * NBD_IDLE_MS. Kills the connection if that deadline has passed. */
static int deadline_check(struct bd_nbd *d)
{
	uint64_t now, age, left;
	int kill = 0, ms = NBD_IDLE_MS;

	pthread_mutex_lock(&d->lock);
	/* read the clock under the lock: a command added since would
	 * otherwise be younger than "now" and look ages old */
	now = bd_now_ns();
	if (d->oldest != NULL && !d->dead) {
		age = now - d->oldest->start_ns;
		if (age >= d->timeout_ns) {
			kill = 1;
		} else {
			left = (d->timeout_ns - age) / 1000000 + 1;
			if (left < (uint64_t)ms)
				ms = (int)left;
		}
	}
	pthread_mutex_unlock(&d->lock);
	if (kill)
		conn_kill(d);
	return kill ? 0 : ms;
}

/* Writes are in flight (maybe still in libnbd's queue, unsent) but the
 * write gate is closed: the node was held up past its disk lease while
 * they waited (a frozen process resumes here first), so they must not
 * go out now (bd_file re-checks the gate before io_submit the same way).
 * Poll thread, no lock held. */
static int writes_gated(struct bd_nbd *d)
{
	unsigned w;

	pthread_mutex_lock(&d->lock);
	w = d->dead ? 0 : d->writes;
	pthread_mutex_unlock(&d->lock);
	return w > 0 && bd_gate_check(&d->dev) != 0;
}

/*
 * One round of the poll loop: wait for the socket (in libnbd's direction)
 * or the eventfd, at most until the oldest deadline, and let libnbd make
 * progress. Results land through cmd_done.
 */
static void conn_step(struct bd_nbd *d)
{
	struct pollfd pfd[2];
	unsigned dir;
	uint64_t v;
	int ms;

	ms = deadline_check(d);
	dir = nbd_aio_get_direction(d->h);
	pfd[0].fd = d->efd;
	pfd[0].events = POLLIN;
	pfd[1].fd = d->fd;
	pfd[1].events = 0;
	if (dir & LIBNBD_AIO_DIRECTION_READ)
		pfd[1].events |= POLLIN;
	if (dir & LIBNBD_AIO_DIRECTION_WRITE)
		pfd[1].events |= POLLOUT;
	if (nbd_aio_is_dead(d->h) || nbd_aio_is_closed(d->h))
		pfd[1].fd = -1;
	if (poll(pfd, 2, ms) <= 0)
		return;
	if (pfd[0].revents & POLLIN)
		while (read(d->efd, &v, sizeof(v)) < 0 && errno == EINTR)
			;
	if (writes_gated(d)) {
		conn_kill(d); /* every command in flight fails */
		return;
	}
	if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR))
		nbd_aio_notify_read(d->h);
	else if (pfd[1].revents & POLLOUT)
		nbd_aio_notify_write(d->h);
	if (nbd_aio_is_dead(d->h) || nbd_aio_is_closed(d->h)) {
		pthread_mutex_lock(&d->lock);
		d->dead = 1;
		pthread_mutex_unlock(&d->lock);
	}
}

/* Call the callbacks of finished async batches (or issue their owed
 * flush). Poll thread only, no lock held. */
static void finish_async(struct bd_nbd *d)
{
	struct nbd_batch *b, *next;

	pthread_mutex_lock(&d->lock);
	b = d->fin_head;
	d->fin_head = NULL;
	pthread_mutex_unlock(&d->lock);
	for (; b != NULL; b = next) {
		next = b->fin_next;
		if (batch_post_flush(d, b))
			continue;
		pthread_mutex_lock(&d->lock);
		batch_apply_flush_locked(b);
		pthread_mutex_unlock(&d->lock);
		b->done(b->ios, b->n, b->arg);
		free(b);
		pthread_mutex_lock(&d->lock);
		outstanding_dec_locked(d);
		pthread_mutex_unlock(&d->lock);
	}
}

static void *poll_main(void *arg)
{
	struct bd_nbd *d = arg;
	int stop;

	do {
		conn_step(d);
		finish_async(d);
		pthread_mutex_lock(&d->lock);
		stop = d->stop && d->outstanding == 0;
		pthread_mutex_unlock(&d->lock);
	} while (!stop);
	return NULL;
}

/* Wait for sync batch @b; on the poll thread, drive the connection. */
static void batch_wait(struct bd_nbd *d, struct nbd_batch *b)
{
	int on_thread = pthread_equal(pthread_self(), d->thread);

	pthread_mutex_lock(&d->lock);
	while (!b->finished) {
		if (on_thread) {
			pthread_mutex_unlock(&d->lock);
			conn_step(d);
			pthread_mutex_lock(&d->lock);
		} else {
			pthread_cond_wait(&b->cond, &d->lock);
		}
	}
	pthread_mutex_unlock(&d->lock);
}

/* The end of sync batch @b: its results are final; frees it. Returns the
 * first error of its I/Os. */
static int sync_batch_end(struct bd_nbd *d, struct nbd_batch *b)
{
	int ret;

	pthread_mutex_lock(&d->lock);
	batch_apply_flush_locked(b);
	outstanding_dec_locked(d);
	pthread_mutex_unlock(&d->lock);
	ret = b->n > 0 ? batch_first_error(b) : b->flush_ret;
	pthread_cond_destroy(&b->cond);
	free(b);
	return ret;
}

/* A new batch of @ios, counted outstanding and issued; NULL on -ENOMEM. */
static struct nbd_batch *batch_start(struct bd_nbd *d, struct bd_io *ios,
				     unsigned n, bd_done_fn done, void *arg)
{
	struct nbd_batch *b = batch_new(d, ios, n, done, arg);

	if (b == NULL)
		return NULL;
	pthread_mutex_lock(&d->lock);
	d->outstanding++;
	pthread_mutex_unlock(&d->lock);
	batch_issue(d, b);
	return b;
}

static int bdn_submit(struct bd_dev *dev, struct bd_io *ios, unsigned n)
{
	struct bd_nbd *d = to_nbd(dev);
	struct nbd_batch *b = batch_start(d, ios, n, NULL, NULL);

	if (b == NULL)
		return -ENOMEM;
	batch_wait(d, b);
	if (batch_post_flush(d, b))
		batch_wait(d, b);
	return sync_batch_end(d, b);
}

static int bdn_submit_async(struct bd_dev *dev, struct bd_io *ios,
			    unsigned n, bd_done_fn done, void *arg)
{
	struct nbd_batch *b = batch_start(to_nbd(dev), ios, n, done, arg);

	return b != NULL ? 0 : -ENOMEM;
}

static int bdn_read(struct bd_dev *dev, void *buf, size_t len, uint64_t off)
{
	struct bd_io io = { .op = BD_READ, .buf = buf, .len = len,
			    .off = off };

	return bdn_submit(dev, &io, 1);
}

static int bdn_write(struct bd_dev *dev, const void *buf, size_t len,
		     uint64_t off, unsigned io_flags)
{
	struct bd_io io = { .op = BD_WRITE, .flags = io_flags,
			    .buf = (void *)buf, .len = len, .off = off };

	return bdn_submit(dev, &io, 1);
}

static int bdn_flush(struct bd_dev *dev)
{
	struct bd_nbd *d = to_nbd(dev);
	struct nbd_batch *b;
	int ret;

	if (!d->can_flush) {
		pthread_mutex_lock(&d->lock);
		ret = d->dead ? -ENOTCONN : 0;
		pthread_mutex_unlock(&d->lock);
		return ret;
	}
	b = batch_new(d, NULL, 0, NULL, NULL);
	if (b == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&d->lock);
	d->outstanding++;
	b->post_flush = 1;
	pthread_mutex_unlock(&d->lock);
	batch_post_flush(d, b);
	batch_wait(d, b);
	return sync_batch_end(d, b);
}

/* 1 if @fd is still the file at @path (not unlinked by its last
 * holder after we opened it). */
static int lock_current(int fd, const char *path)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && stat(path, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/*
 * BD_EXCL: flock on NBD_LOCK_DIR/ucfs-nbd-HASH.lock (or /tmp), HASH the
 * FNV-1a of @key (the URI without io_timeout); the path goes to d->lock.
 * The holder removes the file before it lets go (excl_unlock), so a
 * locker that got a removed file tries again. Sets d->lock_fd; 0, -EBUSY
 * if held, or -errno.
 */
static int excl_lock(struct bd_nbd *d, const char *key)
{
	static const char *const dirs[] = { NBD_LOCK_DIR, "/tmp" };
	uint64_t h = 0xcbf29ce484222325ull;
	int fd = -ENOENT, ret;

	for (const char *p = key; *p != '\0'; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	for (unsigned i = 0; i < 2 && fd == -ENOENT; i++) {
		snprintf(d->lock_path, sizeof(d->lock_path),
			 "%s/ucfs-nbd-%016llx.lock", dirs[i],
			 (unsigned long long)h);
		for (unsigned tries = 0; tries < 100; tries++) {
			fd = open(d->lock_path, O_RDWR | O_CREAT | O_CLOEXEC,
				  0600);
			if (fd < 0) {
				fd = -errno;
				break;
			}
			if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
				ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
				close(fd);
				return ret;
			}
			if (lock_current(fd, d->lock_path))
				break;
			close(fd); /* its holder removed it: again */
			fd = -EAGAIN;
		}
	}
	if (fd < 0)
		return fd;
	d->lock_fd = fd;
	return 0;
}

/* Release the BD_EXCL lock: remove the file while still holding it. */
static void excl_unlock(struct bd_nbd *d)
{
	if (d->lock_fd < 0)
		return;
	unlink(d->lock_path);
	close(d->lock_fd);
	d->lock_fd = -1;
}

static void bdn_close(struct bd_dev *dev)
{
	struct bd_nbd *d = to_nbd(dev);

	pthread_mutex_lock(&d->lock);
	while (d->outstanding > 0)
		pthread_cond_wait(&d->cond, &d->lock);
	d->stop = 1;
	pthread_mutex_unlock(&d->lock);
	wake_thread(d);
	pthread_join(d->thread, NULL);
	if (!nbd_aio_is_dead(d->h) && !nbd_aio_is_closed(d->h))
		nbd_aio_disconnect(d->h, 0); /* polite; sent if it can be */
	nbd_close(d->h);
	close(d->efd);
	excl_unlock(d);
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	bd_dev_fini(dev);
	free(d);
}

static const struct bd_ops bdn_ops = {
	.read = bdn_read,
	.write = bdn_write,
	.submit = bdn_submit,
	.submit_async = bdn_submit_async,
	.flush = bdn_flush,
	.close = bdn_close,
};

/*
 * Copy @uri to *@clean without our io_timeout=SECONDS query parameter,
 * whose value goes to *@timeout_s. -EINVAL (bad value), -ENOMEM.
 */
static int uri_split(const char *uri, char **clean, unsigned *timeout_s)
{
	const char *q = strchr(uri, '?'), *p, *end;
	char *out, *w, *num_end;
	unsigned long v;
	int kept = 0;

	out = malloc(strlen(uri) + 1);
	if (out == NULL)
		return -ENOMEM;
	if (q == NULL) {
		strcpy(out, uri);
		*clean = out;
		return 0;
	}
	memcpy(out, uri, (size_t)(q - uri));
	w = out + (q - uri);
	for (p = q + 1; *p != '\0'; p = *end == '&' ? end + 1 : end) {
		end = strchrnul(p, '&');
		if (strncmp(p, "io_timeout=", 11) == 0) {
			errno = 0;
			v = strtoul(p + 11, &num_end, 10);
			if (num_end != end || num_end == p + 11 || v == 0 ||
			    v > 3600 || errno != 0) {
				free(out);
				return -EINVAL;
			}
			*timeout_s = (unsigned)v;
			continue;
		}
		*w++ = kept++ ? '&' : '?';
		memcpy(w, p, (size_t)(end - p));
		w += end - p;
	}
	*w = '\0';
	*clean = out;
	return 0;
}

/* libnbd's errno for the last failure, never 0. */
static int bdn_err(void)
{
	int e = nbd_get_errno();

	return e != 0 ? -e : -EIO;
}

/* Connect @h to @uri, waiting at most @timeout_ns for the handshake. */
static int conn_open(struct nbd_handle *h, const char *uri,
		     uint64_t timeout_ns)
{
	uint64_t deadline = bd_now_ns() + timeout_ns, now;
	struct pollfd pfd;
	unsigned dir;
	int r;

	if (nbd_aio_connect_uri(h, uri) == -1)
		return bdn_err();
	while (nbd_aio_is_connecting(h)) {
		now = bd_now_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		dir = nbd_aio_get_direction(h);
		pfd.fd = nbd_aio_get_fd(h);
		pfd.events = ((dir & LIBNBD_AIO_DIRECTION_READ) ? POLLIN : 0) |
			     ((dir & LIBNBD_AIO_DIRECTION_WRITE) ? POLLOUT : 0);
		r = poll(&pfd, 1, (int)((deadline - now) / 1000000 + 1));
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0)
			continue;
		if (pfd.revents & (POLLIN | POLLHUP | POLLERR))
			r = nbd_aio_notify_read(h);
		else
			r = nbd_aio_notify_write(h);
		if (r == -1)
			return bdn_err();
	}
	return nbd_aio_is_ready(h) ? 0 : -ENOTCONN;
}

/* Size, read-only, flush/FUA and request sizes of the export. */
static int conn_probe(struct bd_nbd *d, unsigned flags, uint64_t *size)
{
	int64_t sz, min, max;
	int ro;

	sz = nbd_get_size(d->h);
	if (sz < 0)
		return bdn_err();
	if (sz == 0 || (uint64_t)sz % BD_ALIGN != 0)
		return -EINVAL;
	*size = (uint64_t)sz;
	ro = nbd_is_read_only(d->h);
	if (ro < 0)
		return bdn_err();
	if (ro && !(flags & BD_RDONLY))
		return -EROFS;
	d->can_flush = nbd_can_flush(d->h) == 1;
	d->can_fua = nbd_can_fua(d->h) == 1;
	min = nbd_get_block_size(d->h, LIBNBD_SIZE_MINIMUM);
	max = nbd_get_block_size(d->h, LIBNBD_SIZE_MAXIMUM);
	if (min > 0 && BD_ALIGN % (uint64_t)min != 0)
		return -EINVAL;
	d->chunk = NBD_CHUNK_MAX;
	if (max > 0 && (uint64_t)max < d->chunk)
		d->chunk = (size_t)max / BD_ALIGN * BD_ALIGN;
	if (d->chunk == 0)
		return -EINVAL;
	return 0;
}

/* The eventfd, lock and poll thread of @d. */
static int thread_init(struct bd_nbd *d)
{
	int ret;

	d->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->efd < 0)
		return -errno;
	ret = -pthread_mutex_init(&d->lock, NULL);
	if (ret != 0)
		goto out_efd;
	ret = -pthread_cond_init(&d->cond, NULL);
	if (ret != 0)
		goto out_mutex;
	ret = -pthread_create(&d->thread, NULL, poll_main, d);
	if (ret != 0)
		goto out_cond;
	return 0;

out_cond:
	pthread_cond_destroy(&d->cond);
out_mutex:
	pthread_mutex_destroy(&d->lock);
out_efd:
	close(d->efd);
	return ret;
}

int bd_nbd_open(const char *uri, unsigned flags, struct bd_dev **out)
{
	unsigned timeout_s = NBD_TIMEOUT_S;
	struct bd_nbd *d;
	uint64_t size;
	char *clean;
	int ret;

	if (uri == NULL || (flags & ~(unsigned)(BD_RDONLY | BD_BUFFERED |
						BD_EXCL)))
		return -EINVAL;
	ret = uri_split(uri, &clean, &timeout_s);
	if (ret != 0)
		return ret;
	d = calloc(1, sizeof(*d));
	if (d == NULL) {
		ret = -ENOMEM;
		goto out_uri;
	}
	d->timeout_ns = (uint64_t)timeout_s * 1000000000u;
	d->lock_fd = -1;
	if (flags & BD_EXCL) {
		ret = excl_lock(d, clean);
		if (ret != 0)
			goto out_free;
	}
	d->h = nbd_create();
	if (d->h == NULL) {
		ret = bdn_err();
		goto out_unlock;
	}
	nbd_set_pread_initialize(d->h, false); /* failures are reported */
	ret = conn_open(d->h, clean, d->timeout_ns);
	if (ret != 0)
		goto out_close;
	d->fd = nbd_aio_get_fd(d->h);
	ret = conn_probe(d, flags, &size);
	if (ret != 0)
		goto out_close;
	ret = bd_dev_init(&d->dev, &bdn_ops, uri, size, flags);
	if (ret != 0)
		goto out_close;
	d->dev.flush_local = nbd_can_multi_conn(d->h) != 1;
	ret = thread_init(d);
	if (ret != 0)
		goto out_fini;
	free(clean);
	*out = &d->dev;
	return 0;

out_fini:
	bd_dev_fini(&d->dev);
out_close:
	nbd_close(d->h);
out_unlock:
	excl_unlock(d);
out_free:
	free(d);
out_uri:
	free(clean);
	return ret;
}
