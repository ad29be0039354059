/*
 * fs_fuse_uring.c — FUSE over io_uring (Linux 6.14+): one request queue
 * per CPU, served by a ucfs thread pinned to that CPU.
 *
 * Why: over /dev/fuse every request wakes whichever daemon thread sleeps
 * in read(2), usually on another CPU, and the reply wakes the caller back
 * across CPUs. On a VM each of those wakeups is an inter-processor
 * interrupt; measured here, an untar with the daemon and tar pinned to
 * one CPU took 4.2-4.8 s against 6.0-8.7 s unpinned. With io_uring the
 * kernel puts a request on the queue of the CPU the caller runs on, and
 * that queue's thread runs on the same CPU: no cross-CPU wakeup.
 *
 * How it fits under libfuse 3.14 (which has no io_uring support): before
 * the INIT reply is sent, fs_fuse_uring_prepare() sets up one ring per
 * possible CPU (128-byte SQEs, /dev/fuse as fixed file 0), each with
 * its entries (a header buffer, struct ur_header, and a payload buffer
 * of the negotiated maximum write), the worker pool and one thread per
 * queue, pinned to its CPU; only if all of it succeeded does the reply
 * ask for FUSE_OVER_IO_URING (fs_fuse_io.c), because from then on the
 * kernel holds every request until all queues are registered. Once the
 * reply is out, fs_fuse_uring_go() lets the threads submit their
 * registrations. A completed entry holds one
 * request: the thread rebuilds it in the layout read(2) would have given
 * (in_header, the op's own struct, the payload; the first two are copied
 * into a slack area just before the payload, so the payload is not
 * copied) and hands it to fuse_session_process_buf(). The handler's reply
 * comes back through fs_fuse_io.c's writev, which calls
 * fs_fuse_uring_reply(): the reply is copied into the entry and a
 * COMMIT_AND_FETCH for it is queued, submitted with the next wait.
 * Replies are always made synchronously by the handler, on the thread
 * that processes the request (true of every ucfs handler).
 *
 * What stays on /dev/fuse: FUSE_INIT, everything before all queues are
 * registered, FORGET and INTERRUPT (the kernel sends them there), and
 * notifications. If a queue fails to register, the kernel never switches
 * over and everything keeps flowing through /dev/fuse.
 *
 * Requests that wait for the device (READ, FSYNC, FSYNCDIR, FALLOCATE,
 * COPY_FILE_RANGE) or for another holder of a file lock (SETLKW: the
 * handler waits, fs_plock.h) are handed to a small pool of worker
 * threads, so that they neither hold up the other requests of their CPU
 * nor run one at a time (the kernel's readahead sends several READs at
 * once). A worker
 * fills the entry's reply and puts the entry on its queue's done list;
 * the queue thread, woken through an eventfd it polls on its ring,
 * commits it. Everything else is answered inline, on the caller's CPU.
 *
 * Locking: a queue's ring and SQEs belong to its thread alone. An entry
 * belongs to the queue thread, except from its hand-off to a worker
 * until the queue thread takes it off the done list (q->done_lock). The
 * work list is under u->wlock. struct fs_uring is otherwise written by
 * fs_fuse_uring_start() before the threads start and by
 * fs_fuse_uring_stop() after they are joined; `stop` and the counters
 * are atomics.
 */
#include "fusefs/fuse/fs_fuse_uring.h"

#include "fusefs/fuse/fs_fuse_io.h"

#include <errno.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <syslog.h>
#include <unistd.h>

/* The kernel ABI (uapi <linux/fuse.h> 7.42, Linux 6.14), which Debian
 * 12's headers predate. */
enum { UR_CMD_REGISTER = 1, UR_CMD_COMMIT_AND_FETCH = 2 };

struct ur_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;	/* to quote in the commit */
	uint32_t payload_sz;	/* bytes used in the payload buffer */
	uint32_t padding;
	uint64_t reserved;
};

struct ur_header {
	char in_out[128];	/* fuse_in_header in, fuse_out_header out */
	char op_in[128];	/* the op's own struct (in_args[0]) */
	struct ur_ent_in_out ent;
};

struct ur_cmd {			/* the 80-byte command area of the SQE */
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

#define URING_DEPTH_TOTAL 16	/* entries over all queues (memory bound) */
#define URING_SLACK 4096	/* room before the payload for the headers */
#define EVFD_TAG ((uint64_t)1)	/* user_data of the stop poll */
#define DONE_TAG ((uint64_t)2)	/* user_data of the done-list poll */
#define URING_WORKERS_MIN 4

struct ur_ent {
	struct ur_queue *q;
	struct ur_header *hdr;	/* page-aligned, 4 KiB */
	char *area;		/* URING_SLACK + payload */
	char *payload;		/* area + URING_SLACK */
	uint64_t unique;	/* request being served, 0 if none */
	uint32_t last_cmd;	/* the command last queued for it */
	int replied;		/* the reply is in the buffers */
	struct fuse_buf fb;	/* the request, read(2) layout */
	struct ur_ent *next;	/* work list / done list */
	struct iovec iov[2];
};

struct ur_queue {
	struct fs_uring *u;
	unsigned qid;
	pthread_t tid;
	int started;
	int evfd;		/* stop */
	int done_evfd;		/* a worker finished an entry */
	struct io_uring ring;
	int ring_ok;
	struct ur_ent *ent;	/* u->depth entries */
	pthread_mutex_t done_lock;
	struct ur_ent *done;	/* answered by workers: done_lock */
};

struct fs_uring {
	struct fuse_session *se;
	int fd;			/* /dev/fuse */
	unsigned nq, depth;
	size_t payload_sz;
	struct ur_queue *q;
	atomic_int stop;
	atomic_int registered;	/* queue threads past the go gate */
	atomic_ullong requests;	/* served through the rings */
	pthread_mutex_t wlock;
	pthread_cond_t wcond;
	pthread_cond_t gocond;			/* go or nready changed */
	int go;					/* wlock */
	unsigned nready;	/* queue threads that enabled their ring: wlock */
	int ready_err;		/* first enabling error: wlock */
	struct ur_ent *work, *work_tail;	/* wlock */
	pthread_t *workers;
	unsigned nworkers;
};

static _Thread_local struct ur_ent *cur_ent;
static _Thread_local struct ur_queue *my_queue;	/* on a queue thread */

static void ur_log(const char *what, int err)
{
	syslog(LOG_WARNING, "ucfs: fuse io_uring: %s: %s", what,
	       strerror(err));
	fprintf(stderr, "ucfs: fuse io_uring: %s: %s\n", what, strerror(err));
}

/* The ring has a slot per entry plus the two polls and at most one SQE
 * per entry is queued, so a NULL here does not happen; if it did, make
 * room by submitting. */
static struct io_uring_sqe *get_sqe(struct ur_queue *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

	if (sqe == NULL) {
		io_uring_submit(&q->ring);
		sqe = io_uring_get_sqe(&q->ring);
		if (sqe == NULL)
			ur_log("no free SQE", EBUSY);
	}
	return sqe;
}

static void prep_cmd(struct ur_queue *q, struct ur_ent *e, uint32_t op,
		     uint64_t commit_id)
{
	struct io_uring_sqe *sqe = get_sqe(q);
	struct ur_cmd *cmd;

	if (sqe == NULL)
		return;
	memset(sqe, 0, 2 * sizeof(*sqe));	/* SQE128 */
	e->last_cmd = op;
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->flags = IOSQE_FIXED_FILE;
	sqe->fd = 0;
	sqe->cmd_op = op;
	io_uring_sqe_set_data(sqe, e);
	if (op == UR_CMD_REGISTER) {
		sqe->addr = (uint64_t)(uintptr_t)e->iov;
		sqe->len = 2;
	}
	cmd = (struct ur_cmd *)sqe->cmd;
	cmd->qid = (uint16_t)q->qid;
	cmd->commit_id = commit_id;
}

/* Put a reply header of @err (and @len payload bytes) into @e. */
static void set_reply(struct ur_ent *e, int err, size_t len)
{
	struct fuse_out_header out = {
		.len = (uint32_t)(sizeof(out) + len),
		.error = err,
		.unique = e->unique,
	};

	memcpy(e->hdr->in_out, &out, sizeof(out));
	e->hdr->ent.payload_sz = (uint32_t)len;
	e->replied = 1;
}

static void commit(struct ur_queue *q, struct ur_ent *e)
{
	prep_cmd(q, e, UR_CMD_COMMIT_AND_FETCH, e->unique);
}

/* Answer @e with @err and the @len payload bytes already in place. On
 * its queue thread the commit is queued at once; a worker's entry is
 * committed by its queue thread later (done list). */
static void answer(struct ur_ent *e, int err, size_t len)
{
	set_reply(e, err, len);
	if (my_queue == e->q)
		commit(e->q, e);
}

int fs_fuse_uring_reply(struct fs_uring *u, const struct iovec *iov,
			int count, ssize_t *res)
{
	struct ur_ent *e = cur_ent;
	const struct fuse_out_header *oh;
	size_t len = 0;
	int err;

	if (u == NULL || e == NULL || count < 1 ||
	    iov[0].iov_len != sizeof(*oh))
		return 0;
	oh = iov[0].iov_base;
	if (oh->unique != e->unique || e->replied)
		return 0;
	err = oh->error;
	for (int i = 1; i < count; i++) {
		if (len + iov[i].iov_len > u->payload_sz) {
			err = -EIO;	/* cannot happen: replies fit max_write */
			len = 0;
			break;
		}
		/* a read made straight into the payload needs no copy */
		if (iov[i].iov_base != e->payload + len)
			memcpy(e->payload + len, iov[i].iov_base,
			       iov[i].iov_len);
		len += iov[i].iov_len;
	}
	answer(e, err, len);
	*res = (ssize_t)(sizeof(struct fuse_out_header) + len);
	return 1;
}

void *fs_fuse_uring_reply_buf(size_t size)
{
	struct ur_ent *e = cur_ent;

	if (e == NULL || e->replied || size > e->q->u->payload_sz)
		return NULL;
	return e->payload;
}

int fs_fuse_uring_in_request(void)
{
	return cur_ent != NULL;
}

/* Run libfuse on the request in @e on this thread; make sure it has a
 * reply (every request through the ring has one; a handler that made
 * none must not lose the entry). */
static void process(struct fs_uring *u, struct ur_ent *e)
{
	fs_fuse_io_note(e->fb.mem, e->fb.size);
	cur_ent = e;
	fuse_session_process_buf(u->se, &e->fb);
	cur_ent = NULL;
	if (!e->replied)
		answer(e, -EIO, 0);
}

static int may_block(uint32_t opcode)
{
	switch (opcode) {
	case FUSE_READ:
	case FUSE_FSYNC:
	case FUSE_FSYNCDIR:
	case FUSE_FALLOCATE:
	case FUSE_COPY_FILE_RANGE:
	case FUSE_SETLKW: /* a file lock that may wait long (fs_plock.h) */
		return 1;
	default:
		return 0;
	}
}

static void *worker_thread(void *arg)
{
	struct fs_uring *u = arg;
	struct ur_ent *e;
	struct ur_queue *q;
	uint64_t one = 1;

	for (;;) {
		pthread_mutex_lock(&u->wlock);
		while (u->work == NULL && !atomic_load(&u->stop))
			pthread_cond_wait(&u->wcond, &u->wlock);
		e = u->work;
		if (e != NULL) {
			u->work = e->next;
			if (u->work == NULL)
				u->work_tail = NULL;
		}
		pthread_mutex_unlock(&u->wlock);
		if (e == NULL)
			return NULL;	/* stopping and nothing left */
		process(u, e);
		q = e->q;
		pthread_mutex_lock(&q->done_lock);
		e->next = q->done;
		q->done = e;
		pthread_mutex_unlock(&q->done_lock);
		if (write(q->done_evfd, &one, sizeof(one)) < 0)
			ur_log("done eventfd", errno);
	}
}

static void hand_off(struct fs_uring *u, struct ur_ent *e)
{
	e->next = NULL;
	pthread_mutex_lock(&u->wlock);
	if (u->work_tail != NULL)
		u->work_tail->next = e;
	else
		u->work = e;
	u->work_tail = e;
	pthread_cond_signal(&u->wcond);
	pthread_mutex_unlock(&u->wlock);
}

static void arm_done_poll(struct ur_queue *q)
{
	struct io_uring_sqe *sqe = get_sqe(q);

	if (sqe == NULL)
		return;
	io_uring_prep_poll_add(sqe, q->done_evfd, POLLIN);
	io_uring_sqe_set_data64(sqe, DONE_TAG);
}

/* Commit what the workers answered; re-arm the poll. */
static void commit_done(struct ur_queue *q)
{
	struct ur_ent *e, *next;
	uint64_t n;

	if (read(q->done_evfd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		ur_log("done eventfd", errno);
	pthread_mutex_lock(&q->done_lock);
	e = q->done;
	q->done = NULL;
	pthread_mutex_unlock(&q->done_lock);
	for (; e != NULL; e = next) {
		next = e->next;
		commit(q, e);
	}
	arm_done_poll(q);
}

/* Rebuild the read(2) layout of the request in @e and serve it. */
static void serve(struct ur_queue *q, struct ur_ent *e)
{
	struct fs_uring *u = q->u;
	struct fuse_in_header h;
	uint32_t plen = e->hdr->ent.payload_sz;
	size_t oplen;
	char *start;

	memcpy(&h, e->hdr->in_out, sizeof(h));
	e->unique = h.unique;
	e->replied = 0;
	if (h.len < sizeof(h) + plen || plen > u->payload_sz ||
	    (oplen = h.len - sizeof(h) - plen) > sizeof(e->hdr->op_in)) {
		/* not the layout we know: fail this request, keep going */
		answer(e, -EPROTO, 0);
		return;
	}
	start = e->payload - oplen - sizeof(h);
	memcpy(start, &h, sizeof(h));
	memcpy(start + sizeof(h), e->hdr->op_in, oplen);
	e->fb = (struct fuse_buf){ .size = h.len, .mem = start };
	atomic_fetch_add_explicit(&u->requests, 1, memory_order_relaxed);
	if (may_block(h.opcode) && u->nworkers > 0)
		hand_off(u, e);
	else
		process(u, e);
}

static int queue_setup(struct ur_queue *q)
{
	struct fs_uring *u = q->u;
	struct io_uring_params p = { 0 };
	struct io_uring_sqe *sqe;
	int ret;

	/* one issuer (the queue thread, which enables the ring) and its
	 * task work run only when it waits: a request arriving wakes the
	 * waiting thread directly instead of signalling it */
	p.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE |
		  IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
		  IORING_SETUP_R_DISABLED;
	p.cq_entries = 2 * (u->depth + 2);
	/* one SQE per entry, the stop poll, the done poll */
	ret = io_uring_queue_init_params(u->depth + 2, &q->ring, &p);
	if (ret < 0)
		return ret;
	q->ring_ok = 1;
	ret = io_uring_register_files(&q->ring, &u->fd, 1);
	if (ret < 0)
		return ret;
	q->ent = calloc(u->depth, sizeof(*q->ent));
	if (q->ent == NULL)
		return -ENOMEM;
	for (unsigned i = 0; i < u->depth; i++) {
		struct ur_ent *e = &q->ent[i];

		e->q = q;
		if (posix_memalign((void **)&e->hdr, 4096, 4096) != 0 ||
		    posix_memalign((void **)&e->area, 4096,
				   URING_SLACK + u->payload_sz) != 0)
			return -ENOMEM;
		memset(e->hdr, 0, 4096);
		e->payload = e->area + URING_SLACK;
		e->iov[0] = (struct iovec){ e->hdr, 4096 };
		e->iov[1] = (struct iovec){ e->payload, u->payload_sz };
		prep_cmd(q, e, UR_CMD_REGISTER, 0);
	}
	sqe = get_sqe(q);
	if (sqe == NULL)
		return -EBUSY;
	io_uring_prep_poll_add(sqe, q->evfd, POLLIN);
	io_uring_sqe_set_data64(sqe, EVFD_TAG);
	arm_done_poll(q);
	return 0;	/* the queue thread submits, once told to go */
}

/* 1 to go on, 0 to stop (told to, or unmounted) */
static int handle_cqes(struct ur_queue *q)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;
	int ret = 1;

	io_uring_for_each_cqe(&q->ring, head, cqe) {
		struct ur_ent *e = io_uring_cqe_get_data(cqe);

		n++;
		if (cqe->user_data == EVFD_TAG) {
			ret = 0;
			break;
		}
		if (cqe->user_data == DONE_TAG) {
			commit_done(q);
			continue;
		}
		if (cqe->res == -EAGAIN || cqe->res == -EINTR) {
			/* not taken: queue the same command again */
			prep_cmd(q, e, e->last_cmd,
				 e->last_cmd == UR_CMD_REGISTER ? 0 :
								  e->unique);
			continue;
		}
		if (cqe->res == -ENOTCONN || cqe->res == -ECONNABORTED ||
		    cqe->res == -ECANCELED || cqe->res == -ENODEV) {
			ret = 0;	/* unmounted */
			break;
		}
		if (cqe->res < 0) {
			/* this entry is gone (a registration the kernel
			 * refused falls back to /dev/fuse); serve the rest */
			ur_log("ring entry", -cqe->res);
			continue;
		}
		serve(q, e);
	}
	io_uring_cq_advance(&q->ring, n);
	return ret;
}

static void *queue_thread(void *arg)
{
	struct ur_queue *q = arg;
	struct fs_uring *u = q->u;
	cpu_set_t set;
	int ret;

	CPU_ZERO(&set);
	CPU_SET(q->qid, &set);
	/* an offline CPU cannot be pinned to; its queue still must exist */
	(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	my_queue = q;
	/* the ring was made disabled so that this thread, not the one that
	 * made it, becomes its single issuer (liburing 2.3 has no
	 * io_uring_enable_rings()) */
	ret = syscall(__NR_io_uring_register, q->ring.ring_fd,
		      IORING_REGISTER_ENABLE_RINGS, NULL, 0) < 0 ? -errno : 0;
	pthread_mutex_lock(&u->wlock);
	u->nready++;
	if (ret < 0 && u->ready_err == 0)
		u->ready_err = ret;
	pthread_cond_broadcast(&u->gocond);
	while (!u->go && !atomic_load(&u->stop))
		pthread_cond_wait(&u->gocond, &u->wlock);
	pthread_mutex_unlock(&u->wlock);
	atomic_fetch_add(&u->registered, 1);
	while (!atomic_load(&u->stop)) {
		/* this thread submits every command of its ring, so the
		 * kernel's task work for them runs here, on this CPU */
		ret = io_uring_submit_and_wait(&q->ring, 1);
		if (ret < 0 && ret != -EINTR) {
			/* the entries stay registered: giving up would hang
			 * this CPU's requests, so report and try again */
			ur_log("submit", -ret);
			usleep(1000);
			continue;
		}
		if (handle_cqes(q) <= 0)
			break;
	}
	return NULL;
}

int fs_fuse_uring_prepare(struct fuse_session *se, int fd, size_t max_write,
			  struct fs_uring **out)
{
	struct fs_uring *u;
	int ret = 0;

	u = calloc(1, sizeof(*u));
	if (u == NULL)
		return -ENOMEM;
	u->se = se;
	u->fd = fd;
	u->nq = (unsigned)get_nprocs_conf();
	u->depth = URING_DEPTH_TOTAL / u->nq;
	if (u->depth < 2)
		u->depth = 2;
	u->payload_sz = max_write + 4096;
	pthread_mutex_init(&u->wlock, NULL);
	pthread_cond_init(&u->wcond, NULL);
	pthread_cond_init(&u->gocond, NULL);
	u->q = calloc(u->nq, sizeof(*u->q));
	u->nworkers = 2 * u->nq < URING_WORKERS_MIN ? URING_WORKERS_MIN :
		      2 * u->nq;
	u->workers = calloc(u->nworkers, sizeof(*u->workers));
	if (u->q == NULL || u->workers == NULL) {
		u->nq = 0;
		u->nworkers = 0;
		ret = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < u->nq; i++) {
		u->q[i].u = u;
		u->q[i].qid = i;
		u->q[i].evfd = -1;
		u->q[i].done_evfd = -1;
		pthread_mutex_init(&u->q[i].done_lock, NULL);
	}
	/* everything that can fail happens before the kernel is told to
	 * use io_uring: once it is, a queue missing would hang requests */
	for (unsigned i = 0; i < u->nq && ret == 0; i++) {
		struct ur_queue *q = &u->q[i];

		q->evfd = eventfd(0, EFD_CLOEXEC);
		q->done_evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (q->evfd < 0 || q->done_evfd < 0)
			ret = -errno;
		else
			ret = queue_setup(q);
	}
	for (unsigned i = 0; i < u->nworkers && ret == 0; i++) {
		ret = -pthread_create(&u->workers[i], NULL, worker_thread, u);
		if (ret != 0)
			u->nworkers = i;
		else
			pthread_setname_np(u->workers[i], "ucfs-urw");
	}
	for (unsigned i = 0; i < u->nq && ret == 0; i++) {
		ret = -pthread_create(&u->q[i].tid, NULL, queue_thread,
				      &u->q[i]);
		u->q[i].started = ret == 0;
		if (ret == 0)
			pthread_setname_np(u->q[i].tid, "ucfs-urq");
	}
	if (ret == 0) {
		unsigned want = u->nq;

		pthread_mutex_lock(&u->wlock);
		while (u->nready < want)
			pthread_cond_wait(&u->gocond, &u->wlock);
		ret = u->ready_err;
		pthread_mutex_unlock(&u->wlock);
	}
out:
	if (ret < 0) {
		ur_log("setup (staying on /dev/fuse)", -ret);
		fs_fuse_uring_stop(u);
		return ret;
	}
	*out = u;
	return 0;
}

void fs_fuse_uring_go(struct fs_uring *u)
{
	pthread_mutex_lock(&u->wlock);
	u->go = 1;
	pthread_cond_broadcast(&u->gocond);
	pthread_mutex_unlock(&u->wlock);
}

void fs_fuse_uring_stop(struct fs_uring *u)
{
	uint64_t one = 1;

	if (u == NULL)
		return;
	atomic_store(&u->stop, 1);
	pthread_mutex_lock(&u->wlock);
	pthread_cond_broadcast(&u->gocond);
	pthread_mutex_unlock(&u->wlock);
	for (unsigned i = 0; i < u->nq; i++) {
		struct ur_queue *q = &u->q[i];

		if (!q->started)
			continue;
		if (q->evfd >= 0 && write(q->evfd, &one, sizeof(one)) < 0)
			ur_log("stop", errno);
		pthread_join(q->tid, NULL);
	}
	pthread_mutex_lock(&u->wlock);
	pthread_cond_broadcast(&u->wcond);
	pthread_mutex_unlock(&u->wlock);
	for (unsigned i = 0; i < u->nworkers; i++)
		pthread_join(u->workers[i], NULL);
	free(u->workers);
	for (unsigned i = 0; i < u->nq; i++) {
		struct ur_queue *q = &u->q[i];

		if (q->ring_ok)
			io_uring_queue_exit(&q->ring);
		for (unsigned j = 0; q->ent != NULL && j < u->depth; j++) {
			free(q->ent[j].hdr);
			free(q->ent[j].area);
		}
		free(q->ent);
		if (q->evfd >= 0)
			close(q->evfd);
		if (q->done_evfd >= 0)
			close(q->done_evfd);
		pthread_mutex_destroy(&q->done_lock);
	}
	pthread_mutex_destroy(&u->wlock);
	pthread_cond_destroy(&u->wcond);
	pthread_cond_destroy(&u->gocond);
	free(u->q);
	free(u);
}

int fs_fuse_uring_active(const struct fs_uring *u)
{
	return u != NULL && atomic_load(&((struct fs_uring *)u)->registered) ==
			    (int)u->nq;
}

uint64_t fs_fuse_uring_requests(const struct fs_uring *u)
{
	return u == NULL ? 0 :
	       atomic_load(&((struct fs_uring *)u)->requests);
}
