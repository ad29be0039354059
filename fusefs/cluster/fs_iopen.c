/*
 * fs_iopen.c — iopen locks (fs_iopen.h has the model): the PR holds of
 * in-core inodes, an owner's EX try and its queued EX request, and the
 * worker thread that frees what a queued request won and adopts the
 * orphan lists of dead nodes.
 *
 * The locks are lock manager locks (lockmgr/lk.h), not glocks: an iopen
 * lock covers no cached data, and it must never stay cached on a node
 * that stopped using the inode (a cached PR would keep the owner's EX
 * try from ever succeeding), so each hold is one lk_lock/lk_unlock.
 *
 * A non-owner learns that the owner waits for it from the blocking
 * callback on its PR: the worker then asks the kernel to forget the
 * inode (fs_kinval_forget: a name cached after the unlink on another
 * node would otherwise keep the lookup reference, and the PR, until
 * memory pressure), now if no file is open, else at the last close
 * (fs_iopen_closed).
 *
 * No thread sleeps in lk_wait: holds and tries wait for their
 * completion callback with a fence check (a fenced node's lockspace may
 * never answer; clu_split hung in lk_wait before), so every wait here
 * ends with -EIO once the node is fenced.
 *
 * Prefetched holds (fs_iopen_prefetch) live in io->pf under io->mu; a
 * thread that waits for one's answer takes cb_mu before it lets io->mu
 * go (order: io_mu, io->mu, cb_mu), so the answer (pf_done: io->mu,
 * then cb_mu's broadcast) cannot slip in between.
 *
 * Threads and locks: io_mu (a leaf above io->mu) guards fs->io, so that
 * the lock manager's callbacks and the node-down recovery never see a
 * freed worker; io->mu guards its lists and counters; the records'
 * iopen fields are under ns->tbl_lock, and no lock call is made while
 * it is held. A queued request's completion only queues for the worker.
 */
#include "fusefs/cluster/fs_iopen.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fusefs/cluster/fs_cluster.h"
#include "fusefs/namespace/fs_ns.h"
#include "lockmgr/lk.h"
#include "lockmgr/cv_wait.h"

#define IOPEN_STOP_WAIT_S 10 /* unmount: cancelled requests' answers */
#define IOPEN_MEMBERS_MS 500 /* the worker looks for a node that left */

/* Prefetched PR holds kept at most (the oldest granted ones go first). */
#define IOPEN_PF_MAX 1024

/* A PR hold asked for ahead (fs_iopen_prefetch): @lk, pending (state 0:
 * its answer comes through pf_done) or granted (1); in io->early, an
 * answer that came before its batch call returned (@state: status). */
struct iopen_pf {
	uint64_t ino;
	struct lk_lock *lk;
	int state;
};

/* An owner's queued EX request. */
struct fs_iopen_wait {
	uint64_t ino;
	struct lk_lock *lk;
	int status; /* its completion's */
	struct fs_iopen *io;
	struct fs_iopen_wait *next; /* io->pending or io->ready: io->mu */
};

struct fs_iopen {
	struct fs *fs;
	pthread_mutex_t mu;
	pthread_cond_t cv;	       /* work for the worker; a pending
					  request answered (stop) */
	struct fs_iopen_wait *pending; /* queued requests: mu */
	struct fs_iopen_wait *ready;   /* answered ones: mu */
	uint64_t dead;		       /* slots to adopt (bit s): mu */
	struct lk_lock **basts;	       /* PR holds another node wants
					  given up: mu */
	size_t nbasts, capbasts;       /* mu */
	int stop;		       /* mu */
	uint64_t members;	       /* the worker's: the lockspace's
					  members when it last looked */
	uint64_t members_ms;	       /* the worker's: when */
	pthread_t thr;
	/* lock-ahead: PR holds asked for before the kernel's first
	 * reference, oldest first (mu) */
	struct iopen_pf pf[IOPEN_PF_MAX];
	size_t npf;
	struct iopen_pf early[IOPEN_PF_MAX]; /* mu */
	size_t nearly;			     /* mu */
	int pf_closed;			     /* mu: no more prefetch */
	pthread_mutex_t pf_call;	     /* one prefetch batch at a time */
};

static pthread_mutex_t io_mu = PTHREAD_MUTEX_INITIALIZER; /* fs->io */

/* Placed as the inode's own lock (fs_cluster_ino_place): the iopen lock
 * of an inode this node made has its directory, and so its master, here,
 * and the PR hold a create takes costs no message. */
static struct lk_name iopen_name(struct fs *fs, uint64_t ino)
{
	struct lk_name n;

	lk_name_make(&n, FS_LK_IOPEN, ino, NULL);
	n.place = fs_cluster_ino_place(fs->cl, ino);
	return n;
}

/* ---- lock manager callbacks (its callback thread: only queue) ------- */

/* Another node wants EX on an inode we hold PR: its owner waits to free
 * it. The worker finds which record and asks the kernel to let go. */
static void hold_blocking(struct lk_lock *lk, int mode, void *arg)
{
	struct fs *fs = arg;
	struct fs_iopen *io;

	(void)mode;
	pthread_mutex_lock(&io_mu);
	io = fs->io;
	if (io != NULL) {
		pthread_mutex_lock(&io->mu);
		if (io->nbasts == io->capbasts) {
			size_t cap = io->capbasts ? io->capbasts * 2 : 16;
			struct lk_lock **v =
			    realloc(io->basts, cap * sizeof(*v));

			if (v != NULL) {
				io->basts = v;
				io->capbasts = cap;
			}
		}
		if (io->nbasts < io->capbasts) /* else: a hint lost */
			io->basts[io->nbasts++] = lk;
		pthread_cond_broadcast(&io->cv);
		pthread_mutex_unlock(&io->mu);
	}
	pthread_mutex_unlock(&io_mu);
}

/* Completions of holds and tries wake their waiters (wait_granted,
 * wait_try), which never sleep in lk_wait: a fenced node's lockspace may
 * never answer, and a request thread must then get -EIO, not hang. */
static pthread_mutex_t cb_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cb_cv = PTHREAD_COND_INITIALIZER;

static void hold_done(struct lk_lock *lk, int status, void *arg)
{
	(void)lk;
	(void)status;
	(void)arg;
	pthread_mutex_lock(&cb_mu);
	pthread_cond_broadcast(&cb_cv);
	pthread_mutex_unlock(&cb_mu);
}

static const struct lk_lock_ops hold_ops = {.completion = hold_done,
					    .blocking = hold_blocking};

/* Remove entry @i of the prefetched holds. io->mu held. */
static void pf_del(struct fs_iopen *io, size_t i)
{
	memmove(&io->pf[i], &io->pf[i + 1],
		(io->npf - i - 1) * sizeof(io->pf[0]));
	io->npf--;
}

static long pf_find_lk(struct fs_iopen *io, const struct lk_lock *lk)
{
	for (size_t i = 0; i < io->npf; i++)
		if (io->pf[i].lk == lk)
			return (long)i;
	return -1;
}

/* The answer to a prefetched hold, or to a later conversion of one a
 * record adopted (then it only wakes wait_granted). A refused request's
 * handle is released once this returns: its entry goes. */
static void pf_done(struct lk_lock *lk, int status, void *arg)
{
	struct fs *fs = arg;
	struct fs_iopen *io;

	pthread_mutex_lock(&io_mu);
	io = fs->io;
	if (io != NULL) {
		long i;

		pthread_mutex_lock(&io->mu);
		i = pf_find_lk(io, lk);
		if (i >= 0 && io->pf[i].state == 0 && status == 0)
			io->pf[i].state = 1;
		else if (i >= 0 && io->pf[i].state == 0)
			pf_del(io, (size_t)i);
		else if (i < 0 && io->nearly < IOPEN_PF_MAX)
			io->early[io->nearly++] =
			    (struct iopen_pf){0, lk, status};
		pthread_mutex_unlock(&io->mu);
	}
	pthread_mutex_unlock(&io_mu);
	hold_done(lk, status, arg);
}

static const struct lk_lock_ops pf_ops = {.completion = pf_done,
					  .blocking = hold_blocking};

/* A NOQUEUE EX try of a new lock: its answer. */
struct iopen_try {
	int done, status; /* cb_mu */
};

static void try_done(struct lk_lock *lk, int status, void *arg)
{
	struct iopen_try *t = arg;

	(void)lk;
	pthread_mutex_lock(&cb_mu);
	t->status = status;
	t->done = 1;
	pthread_cond_broadcast(&cb_cv);
	pthread_mutex_unlock(&cb_mu);
}

static const struct lk_lock_ops try_ops = {.completion = try_done};

static void cb_wait(void)
{
	cvw_wait_ms(&cb_cv, &cb_mu, 50);
}

/* Until @lk (a hold: a new PR request, or a conversion) is granted with
 * nothing pending: 0, or -EIO once fenced (the request is left). A new
 * PR request fails only when the lockspace closes or fences. */
static int wait_granted(struct fs *fs, struct lk_lock *lk)
{
	int ret = 0;

	pthread_mutex_lock(&cb_mu);
	while (!lk_lock_granted(lk)) {
		if (fs_cluster_fenced(fs->cl)) {
			ret = -EIO;
			break;
		}
		cb_wait();
	}
	pthread_mutex_unlock(&cb_mu);
	return ret;
}

/* The answer to try @t: its status, or -EIO once fenced (then @t must
 * be leaked: the answer may still come). */
static int wait_try(struct fs *fs, struct iopen_try *t)
{
	int ret;

	pthread_mutex_lock(&cb_mu);
	while (!t->done && !fs_cluster_fenced(fs->cl))
		cb_wait();
	ret = t->done ? t->status : -EIO;
	pthread_mutex_unlock(&cb_mu);
	return ret;
}

static void wait_done(struct lk_lock *lk, int status, void *arg)
{
	struct fs_iopen_wait *w = arg, **pp;
	struct fs_iopen *io = w->io;

	(void)lk;
	pthread_mutex_lock(&io->mu);
	for (pp = &io->pending; *pp != NULL; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	w->status = status;
	w->next = io->ready;
	io->ready = w;
	pthread_cond_broadcast(&io->cv);
	pthread_mutex_unlock(&io->mu);
}

static const struct lk_lock_ops wait_ops = {.completion = wait_done};

/* ---- holds ------------------------------------------------------------ */

/* Register the answers of a prefetch batch (@n handles @out of inodes
 * @inos; now[i]: answered inside the call) and those that came while it
 * ran. io->mu held. */
static void pf_register(struct fs_iopen *io, const uint64_t *inos,
			struct lk_lock **out, const uint8_t *now, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int state = now[i] ? 1 : 0;

		if (out[i] == NULL)
			continue; /* refused at once */
		for (size_t j = 0; !now[i] && j < io->nearly; j++) {
			if (io->early[j].lk != out[i])
				continue;
			state = io->early[j].state == 0 ? 1 : -1;
			io->early[j] = io->early[--io->nearly];
			break;
		}
		if (state >= 0) /* a refused handle is not ours any more */
			io->pf[io->npf++] =
			    (struct iopen_pf){inos[i], out[i], state};
	}
}

/* Make room for @n more: the oldest granted holds go, into @drop
 * (*@nd of them). io->mu held. */
static void pf_room(struct fs_iopen *io, size_t n, struct lk_lock **drop,
		    size_t *nd)
{
	size_t i = 0;

	while (i < io->npf && io->npf + n > IOPEN_PF_MAX) {
		if (io->pf[i].state == 1) {
			drop[(*nd)++] = io->pf[i].lk;
			pf_del(io, i);
		} else {
			i++;
		}
	}
}

/* Keep among inos[0..n) those not prefetched already; how many are
 * left. io->mu held. */
static size_t pf_unasked(struct fs_iopen *io, uint64_t *inos, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		size_t j = 0;

		while (j < io->npf && io->pf[j].ino != inos[i])
			j++;
		if (j == io->npf)
			inos[k++] = inos[i];
	}
	return k;
}

void fs_iopen_prefetch(struct fs *fs, const uint64_t *want, size_t n)
{
	struct lk_name *names;
	struct lk_lock **out, **drop;
	struct fs_iopen *io;
	uint64_t *inos;
	void **args;
	uint8_t *now;
	size_t nd = 0;

	if (fs->cl == NULL || n == 0)
		return;
	if (n > IOPEN_PF_MAX / 2)
		n = IOPEN_PF_MAX / 2;
	inos = malloc(n * sizeof(*inos));
	names = malloc(n * sizeof(*names));
	out = calloc(n, sizeof(*out));
	now = calloc(n, 1);
	drop = malloc(IOPEN_PF_MAX * sizeof(*drop));
	args = malloc(n * sizeof(*args));
	/* a second PR hold of this node would refuse its own EX try (a
	 * du, then an rm of the same tree: each unlinked file waited for
	 * the worker): the inodes whose records hold none */
	if (inos != NULL) {
		memcpy(inos, want, n * sizeof(*inos));
		n = fs_ino_iopen_unheld(fs, inos, n);
	}
	pthread_mutex_lock(&io_mu);
	io = fs->io;
	if (io == NULL || inos == NULL || names == NULL || out == NULL ||
	    now == NULL || drop == NULL || args == NULL) {
		pthread_mutex_unlock(&io_mu);
		goto out_free;
	}
	/* one batch at a time: the early answers are this batch's */
	pthread_mutex_lock(&io->pf_call);
	pthread_mutex_lock(&io->mu);
	pthread_mutex_unlock(&io_mu);
	/* only inodes with no hold here, asked once */
	n = pf_unasked(io, inos, n);
	io->nearly = 0;
	pf_room(io, n, drop, &nd);
	if (io->pf_closed || io->npf + n > IOPEN_PF_MAX) {
		pthread_mutex_unlock(&io->mu);
		pthread_mutex_unlock(&io->pf_call);
		goto out_free;
	}
	pthread_mutex_unlock(&io->mu);
	for (size_t i = 0; i < n; i++) {
		names[i] = iopen_name(fs, inos[i]);
		args[i] = fs; /* as hold_ops': outlives every callback */
	}
	if (lk_lock_batch_args(fs_cluster_ls(fs->cl), names, n, LK_PR,
			       LK_NOQUEUE, &pf_ops, args, out, now) < 0)
		memset(out, 0, n * sizeof(*out)); /* nothing was asked */
	pthread_mutex_lock(&io->mu);
	pf_register(io, inos, out, now, n);
	pthread_mutex_unlock(&io->mu);
	pthread_mutex_unlock(&io->pf_call);
out_free:
	for (size_t i = 0; i < nd; i++)
		lk_unlock(drop[i], 0);
	free(inos);
	free(names);
	free(out);
	free(now);
	free(drop);
	free(args);
}

/* A prefetched hold of @ino, waited for if its master's answer is still
 * to come, or NULL. */
static struct lk_lock *pf_take(struct fs *fs, uint64_t ino)
{
	struct lk_lock *lk = NULL;
	struct fs_iopen *io;
	int wait;

	do {
		wait = 0;
		pthread_mutex_lock(&io_mu);
		io = fs->io;
		if (io != NULL) {
			pthread_mutex_lock(&io->mu);
			for (size_t i = 0; i < io->npf; i++) {
				if (io->pf[i].ino != ino)
					continue;
				wait = io->pf[i].state == 0;
				if (!wait) {
					lk = io->pf[i].lk;
					pf_del(io, i);
				}
				break;
			}
			/* the answer's broadcast comes after io->mu */
			if (wait)
				pthread_mutex_lock(&cb_mu);
			pthread_mutex_unlock(&io->mu);
		}
		pthread_mutex_unlock(&io_mu);
		if (wait) {
			cb_wait();
			pthread_mutex_unlock(&cb_mu);
			if (fs_cluster_fenced(fs->cl))
				return NULL;
		}
	} while (wait);
	return lk;
}

struct lk_lock *fs_iopen_hold(struct fs *fs, uint64_t ino)
{
	struct lk_name name = iopen_name(fs, ino);
	struct lk_lock *lk;
	int ret;

	if (fs->cl == NULL)
		return NULL;
	lk = pf_take(fs, ino);
	if (lk != NULL)
		return lk; /* asked for ahead: no round trip now */
	ret =
	    lk_lock(fs_cluster_ls(fs->cl), &name, LK_PR, 0, &hold_ops, fs, &lk);
	if (ret == 0)
		ret = wait_granted(fs, lk);
	return ret >= 0 ? lk : NULL;
}

/* A FUSE batch forget's PR holds (fs_iopen_put_batch): per thread, as
 * a request thread serves one mount (one lockspace). */
#define IOPEN_PUT_BATCH 128u
static __thread struct {
	int on;
	size_t n;
	struct lk_lock *v[IOPEN_PUT_BATCH];
} put_batch;

static void put_flush(void)
{
	if (put_batch.n > 0)
		lk_unlock_batch(put_batch.v, put_batch.n, 0);
	put_batch.n = 0;
}

void fs_iopen_put(struct lk_lock *lk)
{
	if (lk == NULL)
		return;
	if (!put_batch.on) {
		lk_unlock(lk, 0);
		return;
	}
	put_batch.v[put_batch.n++] = lk;
	if (put_batch.n == IOPEN_PUT_BATCH)
		put_flush();
}

void fs_iopen_put_batch(int on)
{
	if (!on)
		put_flush();
	put_batch.on = on;
}

/* EX without waiting for another node: convert the PR hold *@lk, or a
 * new lock if *@lk is NULL. 0 held (in *@lk), -EAGAIN (in use elsewhere;
 * a PR hold is kept), -errno. */
static int try_ex(struct fs *fs, uint64_t ino, struct lk_lock **lk)
{
	struct lk_name name = iopen_name(fs, ino);
	struct iopen_try *t;
	int ret;

	if (*lk != NULL) {
		ret = lk_convert(*lk, LK_EX, LK_NOQUEUE);
		if (ret == 0)
			ret = wait_granted(fs, *lk);
		if (ret == 0)
			ret = lk_lock_mode(*lk) == LK_EX ? 0 : -EAGAIN;
		if (ret == -EIO)
			*lk = NULL; /* fenced: left to the lockspace */
	} else {
		t = calloc(1, sizeof(*t));
		if (t == NULL)
			return -ENOMEM;
		ret = lk_lock(fs_cluster_ls(fs->cl), &name, LK_EX, LK_NOQUEUE,
			      &try_ops, t, lk);
		if (ret == 0)
			ret = wait_try(fs, t);
		if (ret < 0)
			*lk = NULL; /* released by the lock manager */
		if (ret != -EIO)
			free(t); /* answered: never used again */
	}
	if (ret == LK_GRANTED_NOW)
		ret = 0;
	return ret == -EDEADLK ? -EAGAIN : ret;
}

static void set_ex(struct fs_ns *ns, struct fs_inode *n, struct lk_lock *lk,
		   int how)
{
	pthread_mutex_lock(&ns->tbl_lock);
	n->iopen = lk;
	n->iopen_ex = (uint8_t)how;
	pthread_mutex_unlock(&ns->tbl_lock);
}

/* Queue EX for orphan @n (no hold of ours left): 1 granted at once, 0
 * queued (the worker frees it at the grant), -errno. */
static int queue_ex(struct fs *fs, struct fs_inode *n)
{
	struct lk_name name = iopen_name(fs, n->ino);
	struct fs_ns *ns = fs->ns;
	struct fs_iopen_wait *w;
	struct fs_iopen *io;
	int ret;

	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&io_mu);
	io = fs->io;
	if (io == NULL) { /* not started or stopping: stays an orphan */
		pthread_mutex_unlock(&io_mu);
		free(w);
		return 0;
	}
	pthread_mutex_lock(&io->mu); /* the completion waits for it */
	pthread_mutex_unlock(&io_mu);
	w->ino = n->ino;
	w->io = io;
	pthread_mutex_lock(&ns->tbl_lock);
	n->iopen_wait = w;
	pthread_mutex_unlock(&ns->tbl_lock);
	ret = lk_lock(fs_cluster_ls(fs->cl), &name, LK_EX, 0, &wait_ops, w,
		      &w->lk);
	if (ret == 0) {
		w->next = io->pending;
		io->pending = w;
	}
	pthread_mutex_unlock(&io->mu);
	if (ret == 0)
		return 0;
	pthread_mutex_lock(&ns->tbl_lock);
	n->iopen_wait = NULL;
	pthread_mutex_unlock(&ns->tbl_lock);
	if (ret == LK_GRANTED_NOW)
		set_ex(ns, n, w->lk, 1);
	free(w);
	return ret == LK_GRANTED_NOW ? 1 : ret;
}

int fs_iopen_claim(struct fs *fs, struct fs_inode *n, int queue)
{
	struct fs_ns *ns = fs->ns;
	struct lk_lock *lk;
	int ret;

	if (fs->cl == NULL)
		return 1;
	pthread_mutex_lock(&ns->tbl_lock);
	if (n->iopen_ex || n->iopen_wait != NULL || n->iopen_left) {
		ret = n->iopen_ex ? 1 : 0;
		pthread_mutex_unlock(&ns->tbl_lock);
		return ret;
	}
	lk = n->iopen;
	n->iopen = NULL;
	pthread_mutex_unlock(&ns->tbl_lock);
	/* a hold prefetched after ours would refuse our own try */
	fs_iopen_put(pf_take(fs, n->ino));
	ret = try_ex(fs, n->ino, &lk);
	if (ret == 0) {
		set_ex(ns, n, lk, 1);
		return 1;
	}
	fs_iopen_put(lk); /* our PR, if any: the others' turn */
	if (ret != -EAGAIN)
		return ret;
	FS_NS_STAT_ADD(fs, iopen_in_use, 1);
	ret = queue ? queue_ex(fs, n) : 0;
	if (ret == 0) { /* not again at every unpin: at the grant */
		pthread_mutex_lock(&ns->tbl_lock);
		n->iopen_left = 1;
		pthread_mutex_unlock(&ns->tbl_lock);
	}
	return ret;
}

void fs_iopen_done(struct fs *fs, struct fs_inode *n)
{
	struct fs_ns *ns = fs->ns;
	struct lk_lock *lk;
	int how;

	pthread_mutex_lock(&ns->tbl_lock);
	lk = n->iopen;
	how = n->iopen_ex;
	n->iopen = NULL;
	n->iopen_ex = 0;
	pthread_mutex_unlock(&ns->tbl_lock);
	if (how == 1)
		FS_NS_STAT_ADD(fs, iopen_frees_now, 1);
	else if (how == 2)
		FS_NS_STAT_ADD(fs, iopen_frees_later, 1);
	fs_iopen_put(lk);
}

/* ---- the worker ------------------------------------------------------- */

/* Destroy orphan @ino if nothing local uses it (its lock exclusive). */
static void reap(struct fs *fs, uint64_t ino)
{
	struct fs_ilock il;

	if (fs_op_begin(&il, fs, LK_PR) < 0)
		return;
	fs_ilock_reap(&il, ino);
	fs_op_end(&il);
	/* frees logged for other nodes' rgroups: statfs shows them once
	 * applied */
	fs_alloc_flog_kick(fs);
}

/* A queued EX request was answered: granted, free the inode. */
static void answered(struct fs *fs, struct fs_iopen_wait *w)
{
	struct fs_ns *ns = fs->ns;
	struct fs_inode *n = fs_ino_pin(fs, w->ino);
	int mine = 0;

	if (n != NULL) {
		pthread_mutex_lock(&ns->tbl_lock);
		if (n->iopen_wait == w) {
			n->iopen_wait = NULL;
			mine = 1;
			if (w->status == 0) {
				n->iopen = w->lk;
				n->iopen_ex = 2;
			} else {
				n->iopen_left = 0; /* cancelled: try again */
			}
		}
		pthread_mutex_unlock(&ns->tbl_lock);
		fs_ino_unpin(fs, n);
	}
	if (w->status == 0 && !mine)
		fs_iopen_put(w->lk); /* no record (ENOMEM): stays an orphan */
	else if (w->status == 0 &&
		 !__atomic_load_n(&w->io->stop, __ATOMIC_ACQUIRE))
		reap(fs, w->ino);
	free(w);
}

/* Prefetched holds another node wants (@lks: an owner waits to free the
 * inode): those no record adopted yet go. */
static void pf_wanted(struct fs_iopen *io, struct lk_lock **lks, size_t nl)
{
	struct lk_lock *drop[64];
	size_t nd = 0;

	pthread_mutex_lock(&io->mu);
	for (size_t j = 0; j < nl && nd < 64; j++) {
		long i = pf_find_lk(io, lks[j]);

		if (i >= 0 && io->pf[i].state == 1) {
			drop[nd++] = lks[j];
			pf_del(io, (size_t)i);
		}
	}
	pthread_mutex_unlock(&io->mu);
	for (size_t i = 0; i < nd; i++)
		lk_unlock(drop[i], 0);
}

/* Records whose PR hold another node wants given up (@lks): the kernel
 * may forget those no file keeps open; the others at their last close.
 * Each record is found by its inode number, the lock's name (it was a
 * walk of the whole table per batch of callbacks). */
static void wanted(struct fs *fs, struct lk_lock **lks, size_t nl)
{
	uint64_t *inos = malloc(nl * sizeof(*inos));
	size_t k;

	if (inos == NULL)
		return;
	k = fs_ino_iopen_mark_wanted(fs, lks, nl, inos);
	if (k > 0)
		fs_kinval_forget(fs, inos, k);
	free(inos);
}

/*
 * Recover dead slot @s (its journal replayed), if no other node holds
 * the slot's lock: adopt its orphan list, apply its free log
 * (fs_flog_dead_apply) and fold its statfs change (fs_statfs_fold_slot),
 * all written back in place before the lock goes. 0 done (or not ours:
 * a new mount of the slot, an error), -EAGAIN the slot's lock is held
 * by recovery (another survivor) while nobody mounted it again: try
 * again later.
 */
static int adopt(struct fs *fs, unsigned s)
{
	uint64_t ino;
	int ret, n = 0;

	fs_cluster_recover_hold("adopt_try"); /* a test hook: fs_cluster.h */
	ret = fs_cluster_slot_take(fs->cl, s);

	if (ret == 0 && !fs_cluster_slot_alive(fs->cl, s))
		return -EAGAIN;
	if (ret <= 0)
		return 0; /* a new mount of it: its own mount reclaims */
	fs_core_slotinfo_forget(fs, s);
	/* each one reaped as its lock goes (fs_op_end) */
	do {
		ret = fs_ino_orphan_adopt(fs, s, &ino);
		if (ret == 0 && ino != 0 && n++ == 0)
			fs_cluster_recover_hold("adopt");
	} while (ret == 0 && ino != 0);
	/* an error leaves the rest of the log to the slot's next recovery
	 * (counted: alloc.flog_dead_errors) */
	if (ret == 0)
		fs_flog_dead_apply(fs, s);
	/* its statfs change into the master (an error leaves it for the
	 * slot's next recovery or mount: consistent either way) */
	if (ret == 0)
		fs_statfs_fold_slot(fs, s);
	/* that slot's list, log and statfs change in place before anybody
	 * else may take it */
	if (ret < 0 || fs_journal_writeback(fs) < 0)
		fs_cluster_fence(fs->cl, "cannot recover a dead node's slot");
	fs_core_slotinfo_forget(fs, s);
	fs_cluster_slot_drop(fs->cl, s);
	fs_alloc_flog_kick(fs); /* what adopted orphans freed */
	return 0;
}

/* Slots that were left with orphans, a free log or a statfs change while
 * free in the slot map (a mount recovered them, the first after a
 * whole-cluster crash included, or their node unmounted while another
 * node used one of its orphans): the worker's to recover too. */
static uint64_t leftovers(struct fs *fs)
{
	uint64_t m = 0;

	if (fs_core_slots_leftover(fs, &m) < 0)
		return 0;
	if (m != 0)
		FS_NS_STAT_ADD(fs, leftover_slots,
			       (uint64_t)__builtin_popcountll(m));
	return m;
}

/*
 * Every IOPEN_MEMBERS_MS: the slots to take over because a node left the
 * lockspace since the last look. An owner that unmounted cleanly while
 * another node still used one of its orphans left it on its slot's list
 * (its slot now free in the slot map): a node still in the cluster
 * adopts it here (leftovers), so that the last node to let it go frees
 * it, with no remount. A node that died is found too (harmless: its
 * slot is not free until recovered, and node-down recovery hands it
 * over itself). The worker's only.
 */
static uint64_t left_nodes(struct fs_iopen *io)
{
	uint64_t m = 0, now = cvw_now_ms(), left;

	if (now < io->members_ms + IOPEN_MEMBERS_MS)
		return 0;
	io->members_ms = now;
	fs_cluster_members(io->fs->cl, &m);
	left = io->members & ~m;
	io->members = m;
	return left != 0 ? leftovers(io->fs) : 0;
}

/* Sleep on io->cv for at most IOPEN_MEMBERS_MS (io->mu held). */
static void wait_work(struct fs_iopen *io)
{
	cvw_wait_ms(&io->cv, &io->mu, IOPEN_MEMBERS_MS);
}

static void *worker(void *arg)
{
	struct fs_iopen *io = arg;
	struct fs_iopen_wait *w, *next;
	struct lk_lock **lks;
	uint64_t dead;
	size_t nl;

	/* the mount's first: before any wait */
	fs_cluster_members(io->fs->cl, &io->members);
	io->members_ms = cvw_now_ms();
	dead = leftovers(io->fs);
	pthread_mutex_lock(&io->mu);
	io->dead |= dead;
	for (;;) {
		if (!io->stop && io->ready == NULL && io->dead == 0 &&
		    io->nbasts == 0)
			wait_work(io); /* or a timeout: left_nodes below */
		if (io->stop)
			break;
		w = io->ready;
		io->ready = NULL;
		dead = io->dead;
		io->dead = 0;
		lks = io->basts;
		nl = io->nbasts;
		io->basts = NULL;
		io->nbasts = io->capbasts = 0;
		pthread_mutex_unlock(&io->mu);
		for (; w != NULL; w = next) {
			next = w->next;
			answered(io->fs, w);
		}
		if (nl > 0)
			pf_wanted(io, lks, nl);
		if (nl > 0)
			wanted(io->fs, lks, nl);
		free(lks);
		dead |= left_nodes(io);
		for (unsigned s = 0; s < FS_MAX_SLOTS; s++)
			if ((dead & (1ull << s)) && adopt(io->fs, s) == 0)
				dead &= ~(1ull << s);
		if (dead != 0) /* slot locks busy: again in a moment */
			nanosleep(&(struct timespec){0, 20 * 1000 * 1000},
				  NULL);
		pthread_mutex_lock(&io->mu);
		io->dead |= dead;
	}
	pthread_mutex_unlock(&io->mu);
	return NULL;
}

int fs_iopen_start(struct fs *fs)
{
	struct fs_iopen *io;
	int ret;

	if (fs->cl == NULL || fs->ro)
		return 0;
	io = calloc(1, sizeof(*io));
	if (io == NULL)
		return -ENOMEM;
	io->fs = fs;
	pthread_mutex_init(&io->mu, NULL);
	pthread_mutex_init(&io->pf_call, NULL);
	pthread_cond_init(&io->cv, NULL);
	ret = -pthread_create(&io->thr, NULL, worker, io);
	if (ret < 0) {
		pthread_mutex_destroy(&io->mu);
		pthread_cond_destroy(&io->cv);
		free(io);
		return ret;
	}
	pthread_mutex_lock(&io_mu);
	fs->io = io;
	/* slots a node-down recovery replayed while this mount was on its
	 * way (fs_iopen_slot_dead: no worker yet) */
	pthread_mutex_lock(&io->mu);
	io->dead |= fs->io_dead;
	fs->io_dead = 0;
	pthread_cond_broadcast(&io->cv);
	pthread_mutex_unlock(&io->mu);
	pthread_mutex_unlock(&io_mu);
	return 0;
}

/* Stop: cancel what is queued and take the answers (a grant that won
 * the race leaves the record holding EX: the unmount frees it). 0, or
 * -ETIMEDOUT: answers missing (a fenced lockspace): @io must leak, a
 * callback may still come. io->mu held. */
static int drain(struct fs_iopen *io)
{
	uint64_t end = cvw_deadline_ms(IOPEN_STOP_WAIT_S * 1000ull);
	struct fs_iopen_wait *w, *next;
	int ret = 0;

	for (w = io->pending; w != NULL; w = w->next)
		lk_cancel(w->lk);
	while (io->pending != NULL && ret == 0 &&
	       !fs_cluster_fenced(io->fs->cl))
		ret = cvw_wait_until(&io->cv, &io->mu, end);
	w = io->ready;
	io->ready = NULL;
	pthread_mutex_unlock(&io->mu);
	for (; w != NULL; w = next) {
		next = w->next;
		answered(io->fs, w); /* stop set: no reap */
	}
	pthread_mutex_lock(&io->mu);
	return io->pending != NULL ? -ETIMEDOUT : 0;
}

/* No prefetch from now on; the answers still to come are waited for
 * (at most IOPEN_STOP_WAIT_S; not once fenced: then left to the
 * lockspace), and every prefetched hold no record adopted goes. */
static void pf_close(struct fs *fs, struct fs_iopen *io)
{
	struct lk_lock **drop = malloc(IOPEN_PF_MAX * sizeof(*drop));
	size_t nd = 0;
	int pending = 1;

	pthread_mutex_lock(&io->pf_call); /* no batch in its call */
	pthread_mutex_lock(&io->mu);
	io->pf_closed = 1;
	pthread_mutex_unlock(&io->mu);
	pthread_mutex_unlock(&io->pf_call);
	for (int t = 0; pending && t < IOPEN_STOP_WAIT_S * 20; t++) {
		if (fs_cluster_fenced(fs->cl))
			break;
		pthread_mutex_lock(&io->mu);
		pending = 0;
		for (size_t i = 0; i < io->npf; i++)
			pending |= io->pf[i].state == 0;
		if (!pending) {
			pthread_mutex_unlock(&io->mu);
			break;
		}
		/* io->mu before cb_mu, as pf_take: the answer's broadcast
		 * comes after io->mu */
		pthread_mutex_lock(&cb_mu);
		pthread_mutex_unlock(&io->mu);
		cb_wait();
		pthread_mutex_unlock(&cb_mu);
	}
	pthread_mutex_lock(&io->mu);
	for (size_t i = 0; drop != NULL && i < io->npf; i++)
		if (io->pf[i].state == 1)
			drop[nd++] = io->pf[i].lk;
	io->npf = 0;
	pthread_mutex_unlock(&io->mu);
	for (size_t i = 0; i < nd && !fs_cluster_fenced(fs->cl); i++)
		lk_unlock(drop[i], 0);
	free(drop);
}

void fs_iopen_stop(struct fs *fs)
{
	struct fs_iopen *io;
	int ret;

	pthread_mutex_lock(&io_mu);
	io = fs->io;
	pthread_mutex_unlock(&io_mu);
	if (io == NULL)
		return;
	pf_close(fs, io); /* its answers need fs->io */
	pthread_mutex_lock(&io_mu);
	fs->io = NULL;
	pthread_mutex_unlock(&io_mu);
	pthread_mutex_lock(&io->mu);
	__atomic_store_n(&io->stop, 1, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&io->cv);
	pthread_mutex_unlock(&io->mu);
	pthread_join(io->thr, NULL);
	pthread_mutex_lock(&io->mu);
	ret = drain(io);
	pthread_mutex_unlock(&io->mu);
	if (ret < 0)
		return; /* leaked on purpose */
	free(io->basts);
	pthread_mutex_destroy(&io->mu);
	pthread_mutex_destroy(&io->pf_call);
	pthread_cond_destroy(&io->cv);
	free(io);
}

void fs_iopen_slot_dead(struct fs *fs, unsigned slot)
{
	struct fs_iopen *io;

	if (slot >= FS_MAX_SLOTS)
		return;
	pthread_mutex_lock(&io_mu);
	io = fs->io;
	if (io != NULL) {
		pthread_mutex_lock(&io->mu);
		io->dead |= 1ull << slot;
		pthread_cond_broadcast(&io->cv);
		pthread_mutex_unlock(&io->mu);
	} else if (!fs->ro) { /* mounting: the worker takes it at start */
		fs->io_dead |= 1ull << slot;
	}
	pthread_mutex_unlock(&io_mu);
}

void fs_iopen_closed(struct fs *fs, uint64_t ino)
{
	if (fs->cl != NULL && fs_ino_iopen_wanted(fs, ino))
		fs_kinval_forget(fs, &ino, 1);
}
