/*
 * fs_plock.c — flock(2), fcntl record locks and OFD locks of a cluster
 * mount, enforced on every node (fs_plock.h; MOUNT.md "File locks").
 *
 * Sections: replies and waits (how a request that waits is answered),
 * POSIX locks (lk_plock), flock (one DLM lock per open file description),
 * close and release, the agreement on localflocks, stats.
 *
 * A flock entry (struct fp_flk) is the state of one open file
 * description's flock on one inode:
 *
 *   (none) --LOCK_SH/EX--> WAITING --granted--> GRANTED --LOCK_UN--> (none)
 *                             |                   |
 *                             +--refused/EINTR--> (none)
 *   GRANTED --other mode--> WAITING (the old lock is released first, as
 *   Linux does: a flock conversion is not atomic)
 *
 * Locking: fp->mu protects the flock table and every entry; it is taken
 * before the lock manager's lockspace lock (lk_lock, lk_unlock and
 * lk_cancel never block) and before libfuse's request lock
 * (fuse_req_interrupt_func), never after either.
 */
#include "fusefs/fuse/fs_plock.h"

#include "fusefs/cluster/fs_cluster.h"
#include "fusefs/fuse/fs_fuse_uring.h"
#include "fusefs/stats/fs_stats.h"
#include "lockmgr/lk.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

#define FLK_HASH 256u

struct fp_flk {
	struct fp_flk *next; /* fp->flk chain */
	struct fs_plock *fp; /* immutable */
	uint64_t ino;	     /* immutable */
	uint64_t owner;	     /* immutable: the open file description */
	struct lk_lock *lk;  /* the DLM lock, NULL before the request */
	int mode;	     /* LK_PR or LK_EX, asked or held */
	int granted;
	int waiting;	/* a request is pending */
	fuse_req_t req; /* the request to answer at completion (a
			   wait answered from the callback), or NULL */
};

struct fp_counts {
	uint64_t flock_locks;	/* LOCK_SH / LOCK_EX requests */
	uint64_t flock_unlocks; /* LOCK_UN, and releases at close */
	uint64_t flock_granted;
	uint64_t flock_conflicts;   /* LOCK_NB refused: EWOULDBLOCK */
	uint64_t flock_interrupted; /* waits ended by a signal */
	uint64_t ofd_released;	    /* owners dropped at a description's
				       release (OFD locks) */
};

struct fs_plock {
	struct lk_ls *ls;	      /* immutable */
	pthread_mutex_t mu;	      /* the flock table */
	struct fp_flk *flk[FLK_HASH]; /* under mu */
	struct fp_counts c;	      /* atomics */
	int posix_used;		      /* atomic: a POSIX lock was asked
					 for through this mount (before
					 that, a close has none to drop) */
};

#define COUNT(fp, f) __atomic_add_fetch(&(fp)->c.f, 1, __ATOMIC_RELAXED)

/* ---- replies and waits ---- */

/* A request that came through an io_uring queue must be answered on
 * its own thread before the handler returns: the handler waits. */
static int must_wait_inline(void)
{
	return fs_fuse_uring_in_request();
}

static int lk_errno(int status)
{
	switch (status) {
	case 0:
	case -EAGAIN:
	case -EDEADLK:
	case -EINTR:
	case -EINVAL:
		return status;
	case -ECANCELED:
		return -EINTR;
	case -ENOMEM:
		return -ENOLCK;
	default:
		return -EIO; /* -ESHUTDOWN: fenced or unmounting */
	}
}

static void reply_status(fuse_req_t req, int status)
{
	fuse_reply_err(req, -lk_errno(status));
}

/* ---- POSIX locks ---- */

/* A request run to completion on the calling thread. */
struct fp_sync {
	struct lk_plock pl;
	struct lk_ls *ls;
};

static void sync_intr(fuse_req_t req, void *arg)
{
	struct fp_sync *s = arg;

	(void)req;
	lk_plock_cancel(s->ls, &s->pl);
}

/* Run s->pl (set up but for done) until it completes; @req, if not NULL,
 * can cancel it by an INTERRUPT. Returns its status. */
static int sync_run(struct fs_plock *fp, struct fp_sync *s, fuse_req_t req)
{
	int ret;

	s->ls = fp->ls;
	s->pl.done = NULL; /* lk_plock_wait: this thread reads the answer */
	ret = lk_plock(fp->ls, &s->pl);
	if (ret == 0)
		return s->pl.status;
	if (ret < 0)
		return ret;
	if (req != NULL)
		fuse_req_interrupt_func(req, sync_intr, s);
	ret = lk_plock_wait(fp->ls, &s->pl);
	if (req != NULL) /* waits for a sync_intr still running */
		fuse_req_interrupt_func(req, NULL, NULL);
	return ret;
}

/* A F_SETLKW answered from the callback thread when it completes. */
struct fp_async {
	struct lk_plock pl;
	struct fs_plock *fp;
	fuse_req_t req;
	pthread_mutex_t mu; /* held by the handler until the interrupt
			       function is registered */
};

static void async_intr(fuse_req_t req, void *arg)
{
	struct fp_async *a = arg;

	(void)req;
	lk_plock_cancel(a->fp->ls, &a->pl);
}

static void async_done(struct lk_plock *pl, void *arg)
{
	struct fp_async *a = arg;

	pthread_mutex_lock(&a->mu); /* the handler is done with it */
	pthread_mutex_unlock(&a->mu);
	fuse_req_interrupt_func(a->req, NULL, NULL);
	reply_status(a->req, pl->status);
	pthread_mutex_destroy(&a->mu);
	free(a);
}

static void setlk_async(struct fs_plock *fp, fuse_req_t req,
			const struct lk_plock *in)
{
	struct fp_async *a = calloc(1, sizeof(*a));
	int ret;

	if (a == NULL) {
		fuse_reply_err(req, ENOLCK);
		return;
	}
	a->pl = *in;
	a->pl.done = async_done;
	a->pl.arg = a;
	a->fp = fp;
	a->req = req;
	pthread_mutex_init(&a->mu, NULL);
	pthread_mutex_lock(&a->mu);
	ret = lk_plock(fp->ls, &a->pl);
	if (ret == 1) {
		fuse_req_interrupt_func(req, async_intr, a);
		pthread_mutex_unlock(&a->mu);
		return; /* async_done answers */
	}
	pthread_mutex_unlock(&a->mu);
	reply_status(req, ret == 0 ? a->pl.status : ret);
	pthread_mutex_destroy(&a->mu);
	free(a);
}

static int type_from(short l_type)
{
	return l_type == F_RDLCK   ? LK_PL_RD
	       : l_type == F_WRLCK ? LK_PL_WR
				   : LK_PL_UN;
}

/* struct flock as libfuse gives it (l_start, l_len 0 = to the end). */
static int range_from(const struct flock *lock, struct lk_plock *pl)
{
	if (lock->l_start < 0 || lock->l_len < 0)
		return -EINVAL;
	pl->start = (uint64_t)lock->l_start;
	pl->end = lock->l_len == 0
		      ? UINT64_MAX
		      : (uint64_t)lock->l_start + (uint64_t)lock->l_len - 1;
	return pl->end < pl->start ? -EINVAL : 0;
}

void fs_plock_getlk(struct fs_plock *fp, fuse_req_t req, uint64_t ino,
		    struct fuse_file_info *fi, struct flock *lock)
{
	struct fp_sync s = {
	    .pl = {.ino = ino, .owner = fi->lock_owner, .op = LK_PL_GETLK}};
	int ret;

	s.pl.type = (uint8_t)type_from(lock->l_type);
	ret = range_from(lock, &s.pl);
	if (ret == 0)
		ret = sync_run(fp, &s, NULL);
	if (ret < 0) {
		reply_status(req, ret);
		return;
	}
	lock->l_whence = SEEK_SET;
	lock->l_type = F_UNLCK;
	if (s.pl.cf_type != LK_PL_UN) {
		lock->l_type = s.pl.cf_type == LK_PL_RD ? F_RDLCK : F_WRLCK;
		lock->l_start = (off_t)s.pl.cf_start;
		lock->l_len = s.pl.cf_end == UINT64_MAX
				  ? 0
				  : (off_t)(s.pl.cf_end - s.pl.cf_start + 1);
		lock->l_pid = (pid_t)s.pl.cf_pid;
	}
	fuse_reply_lock(req, lock);
}

void fs_plock_setlk(struct fs_plock *fp, fuse_req_t req, uint64_t ino,
		    struct fuse_file_info *fi, struct flock *lock, int sleep)
{
	struct fp_sync s = {.pl = {.ino = ino,
				   .owner = fi->lock_owner,
				   .tag = fi->fh,
				   .pid = (uint32_t)lock->l_pid,
				   .op = LK_PL_LOCK}};
	int ret;

	s.pl.type = (uint8_t)type_from(lock->l_type);
	if (s.pl.type == LK_PL_UN)
		s.pl.op = LK_PL_UNLOCK;
	else if (sleep)
		s.pl.flags = LK_PL_WAIT;
	ret = range_from(lock, &s.pl);
	if (ret < 0) {
		reply_status(req, ret);
		return;
	}
	if (s.pl.op == LK_PL_LOCK)
		__atomic_store_n(&fp->posix_used, 1, __ATOMIC_RELEASE);
	if (sleep && s.pl.op == LK_PL_LOCK && !must_wait_inline()) {
		setlk_async(fp, req, &s.pl);
		return;
	}
	reply_status(req, sync_run(fp, &s, sleep ? req : NULL));
}

int fs_plock_flush(struct fs_plock *fp, uint64_t ino, uint64_t owner)
{
	struct fp_sync s = {
	    .pl = {.ino = ino, .owner = owner, .op = LK_PL_DROP}};

	/* every close of a dlm mount flushes: no lockspace call (its
	 * mutex) while nobody ever took a POSIX lock here */
	if (!__atomic_load_n(&fp->posix_used, __ATOMIC_ACQUIRE))
		return 0;
	return lk_errno(sync_run(fp, &s, NULL));
}

/* ---- flock ---- */

static struct fp_flk **flk_slot(struct fs_plock *fp, uint64_t ino,
				uint64_t owner)
{
	uint64_t h = (ino ^ owner * 0x9e3779b97f4a7c15ull) >> 56;

	return &fp->flk[h % FLK_HASH];
}

/* The entry of (@ino, @owner); created if @create. fp->mu held. */
static struct fp_flk *flk_get(struct fs_plock *fp, uint64_t ino, uint64_t owner,
			      int create)
{
	struct fp_flk **pp = flk_slot(fp, ino, owner), *e;

	for (e = *pp; e != NULL; e = e->next)
		if (e->ino == ino && e->owner == owner)
			return e;
	if (!create)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return NULL;
	e->fp = fp;
	e->ino = ino;
	e->owner = owner;
	e->next = *pp;
	*pp = e;
	return e;
}

static void flk_free(struct fs_plock *fp, struct fp_flk *e)
{
	struct fp_flk **pp = flk_slot(fp, e->ino, e->owner);

	while (*pp != e)
		pp = &(*pp)->next;
	*pp = e->next;
	free(e);
}

/* The outcome of e's request; fp->mu held. Returns the errno to reply. */
static int flk_settle(struct fs_plock *fp, struct fp_flk *e, int status)
{
	e->waiting = 0;
	if (status == 0) {
		e->granted = 1;
		COUNT(fp, flock_granted);
		return 0;
	}
	if (status == -EAGAIN)
		COUNT(fp, flock_conflicts);
	else if (status == -ECANCELED)
		COUNT(fp, flock_interrupted);
	flk_free(fp, e); /* the library releases the failed handle */
	return status == -EAGAIN ? -EWOULDBLOCK : lk_errno(status);
}

/* Completion of a wait answered from the callback thread. */
static void flk_complete(struct lk_lock *lk, int status, void *arg)
{
	struct fp_flk *e = arg;
	struct fs_plock *fp = e->fp;
	fuse_req_t req;
	int ret;

	(void)lk;
	pthread_mutex_lock(&fp->mu);
	req = e->req;
	e->req = NULL;
	fuse_req_interrupt_func(req, NULL, NULL);
	ret = flk_settle(fp, e, status);
	pthread_mutex_unlock(&fp->mu);
	fuse_reply_err(req, -ret);
}

static const struct lk_lock_ops flk_async_ops = {.completion = flk_complete};
static const struct lk_lock_ops flk_sync_ops = {.completion = NULL};

static void flk_intr(fuse_req_t req, void *arg)
{
	struct fp_flk *e = arg;

	(void)req;
	lk_cancel(e->lk);
}

/* Wait on this thread for e's queued request. fp->mu held; dropped
 * while waiting. */
static int flk_wait_inline(struct fs_plock *fp, struct fp_flk *e,
			   fuse_req_t req, int interruptible)
{
	struct lk_lock *lk = e->lk;
	int status;

	if (interruptible)
		fuse_req_interrupt_func(req, flk_intr, e);
	pthread_mutex_unlock(&fp->mu);
	status = lk_wait(lk);
	if (interruptible)
		fuse_req_interrupt_func(req, NULL, NULL);
	pthread_mutex_lock(&fp->mu);
	return flk_settle(fp, e, status);
}

/* Request @mode for @e (fp->mu held). Returns 1 if the answer will come
 * from the callback thread, else the errno to reply now. */
static int flk_request(struct fs_plock *fp, struct fp_flk *e, fuse_req_t req,
		       int mode, int nb)
{
	int inline_wait = nb || must_wait_inline();
	struct lk_name name;
	struct lk_lock *lk;
	int ret;

	lk_name_make(&name, FS_LK_FLOCK, e->ino, NULL);
	e->mode = mode;
	e->waiting = 1;
	ret = lk_lock(fp->ls, &name, mode, nb ? LK_NOQUEUE : 0,
		      inline_wait ? &flk_sync_ops : &flk_async_ops, e, &lk);
	if (ret == LK_GRANTED_NOW) {
		e->lk = lk;
		return flk_settle(fp, e, 0);
	}
	if (ret < 0)
		return flk_settle(fp, e, ret);
	e->lk = lk;
	if (inline_wait)
		return flk_wait_inline(fp, e, req, !nb);
	e->req = req;
	fuse_req_interrupt_func(req, flk_intr, e);
	return 1;
}

/* Release e's lock (or cancel its request); fp->mu held. */
static void flk_unlock(struct fs_plock *fp, struct fp_flk *e)
{
	COUNT(fp, flock_unlocks);
	if (e->waiting) {
		lk_cancel(e->lk); /* its waiter answers EINTR and frees it */
		return;
	}
	if (e->granted)
		lk_unlock(e->lk, 0);
	flk_free(fp, e);
}

void fs_plock_flock(struct fs_plock *fp, fuse_req_t req, uint64_t ino,
		    struct fuse_file_info *fi, int op)
{
	int mode = (op & LOCK_EX) ? LK_EX : LK_PR;
	int nb = (op & LOCK_NB) != 0;
	struct fp_flk *e;
	int ret = 0;

	pthread_mutex_lock(&fp->mu);
	if (op & LOCK_UN) {
		e = flk_get(fp, ino, fi->lock_owner, 0);
		if (e != NULL)
			flk_unlock(fp, e);
		goto out_reply;
	}
	COUNT(fp, flock_locks);
	e = flk_get(fp, ino, fi->lock_owner, 1);
	if (e == NULL) {
		ret = -ENOLCK;
	} else if (e->waiting) {
		/* another thread waits on this description already */
		ret = nb ? -EWOULDBLOCK : -ENOLCK;
	} else if (e->granted && e->mode == mode) {
		ret = 0;
	} else {
		if (e->granted) { /* not atomic, as on Linux */
			lk_unlock(e->lk, 0);
			e->granted = 0;
			e->lk = NULL;
		}
		ret = flk_request(fp, e, req, mode, nb);
		if (ret == 1) {
			pthread_mutex_unlock(&fp->mu);
			return;
		}
	}
out_reply:
	pthread_mutex_unlock(&fp->mu);
	fuse_reply_err(req, -ret);
}

/* ---- close and release ---- */

void fs_plock_release(struct fs_plock *fp, uint64_t ino,
		      const struct fuse_file_info *fi)
{
	struct fp_flk *e;
	int n;

	if (fi->flock_release) {
		pthread_mutex_lock(&fp->mu);
		e = flk_get(fp, ino, fi->lock_owner, 0);
		if (e != NULL)
			flk_unlock(fp, e);
		pthread_mutex_unlock(&fp->mu);
	}
	n = lk_plock_drop_tag(fp->ls, ino, fi->fh);
	if (n > 0)
		__atomic_add_fetch(&fp->c.ofd_released, (uint64_t)n,
				   __ATOMIC_RELAXED);
}

int fs_plock_new(struct lk_ls *ls, struct fs_plock **out)
{
	struct fs_plock *fp = calloc(1, sizeof(*fp));

	if (fp == NULL)
		return -ENOMEM;
	fp->ls = ls;
	pthread_mutex_init(&fp->mu, NULL);
	*out = fp;
	return 0;
}

void fs_plock_free(struct fs_plock *fp)
{
	if (fp == NULL)
		return;
	pthread_mutex_lock(&fp->mu);
	for (unsigned h = 0; h < FLK_HASH; h++) {
		struct fp_flk *e = fp->flk[h], *next;

		for (; e != NULL; e = next) {
			next = e->next;
			/* a waiter (none once every file is closed) keeps
			 * its entry: its completion still comes */
			if (e->waiting)
				lk_cancel(e->lk);
			else
				flk_unlock(fp, e);
		}
	}
	pthread_mutex_unlock(&fp->mu);
	pthread_mutex_destroy(&fp->mu);
	free(fp);
}

/* ---- the agreement on localflocks ---- */

int fs_plock_agree(struct lk_ls *ls, int local, struct lk_lock **out)
{
	struct lk_name name;
	struct lk_lock *lk = NULL;
	int ret;

	lk_name_make(&name, FS_LK_FLMODE, 0, NULL);
	ret = lk_lock(ls, &name, local ? LK_PR : LK_CW, LK_NOQUEUE, NULL, NULL,
		      &lk);
	if (ret == 0)
		ret = lk_wait(lk); /* a refusal releases the handle */
	if (ret < 0)
		return ret;
	*out = lk;
	return 0;
}

void fs_plock_agree_end(struct lk_lock *lk)
{
	if (lk != NULL)
		lk_unlock(lk, 0);
}

/* ---- stats ---- */

static void section(struct fs_json *o, void *arg)
{
	struct fs_plock *fp = arg;
	struct lk_stats *st = malloc(sizeof(*st));
	const struct lk_plock_stats *p;

#define FP_U64(f)                                                              \
	fs_json_u64(o, #f, __atomic_load_n(&fp->c.f, __ATOMIC_RELAXED))
	FP_U64(flock_locks);
	FP_U64(flock_unlocks);
	FP_U64(flock_granted);
	FP_U64(flock_conflicts);
	FP_U64(flock_interrupted);
	FP_U64(ofd_released);
#undef FP_U64
	if (st == NULL)
		return;
	lk_ls_stats(fp->ls, st);
	/* the lock manager's count of FS_LK_FLOCK requests that queued */
	fs_json_u64(o, "flock_waits", st->type[FS_LK_FLOCK].c.waits);
	p = &st->plock;
	fs_json_u64(o, "posix_locks", p->locks);
	fs_json_u64(o, "posix_unlocks", p->unlocks);
	fs_json_u64(o, "posix_getlks", p->getlks);
	fs_json_u64(o, "posix_granted", p->granted);
	fs_json_u64(o, "posix_waits", p->waits);
	fs_json_u64(o, "posix_conflicts", p->conflicts);
	fs_json_u64(o, "posix_deadlocks", p->deadlocks);
	fs_json_u64(o, "posix_cancels", p->cancels);
	fs_json_u64(o, "posix_local_unlocks", p->local_only);
	fs_json_u64(o, "server_requests", p->served);
	fs_json_u64(o, "server_rebuilt_ranges", p->rebuilt);
	free(st);
}

int fs_plock_stats_add(struct fs_plock *fp, struct fs_stats *st)
{
	return fs_stats_add_section(st, "file_locks", section, fp);
}

void fs_plock_stats_remove(struct fs_plock *fp, struct fs_stats *st)
{
	(void)fp;
	fs_stats_remove_section(st, "file_locks");
}
