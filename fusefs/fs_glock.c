/*
 * fs_glock.c — the glock engine: cluster locks cached on this node with
 * local holders (fs_glock.h explains the model).
 *
 * The engine: a hash table of glocks keyed by (type, num) under e->mu,
 * with reference counts. For now every glock still has its own demote
 * thread and idle glocks are never dropped (conf.max, conf.workers and
 * the lock events are not used yet).
 *
 * States of a glock (fields under gl->mu):
 *   mode      -1 (never granted), LK_NL, LK_PR or LK_EX: granted now
 *   busy      one thread is talking to the DLM for it (request, up- or
 *             down-conversion) or running ops->inval / ops->sync; nobody
 *             else starts anything meanwhile and no holder is admitted
 *   demote_to -1, or the mode a blocking callback asked us to go down to
 * Transitions:
 *   acquire: mode covers the want and no due demote -> holder (hit);
 *            else (not busy, no demote pending) -> busy, lk_lock or
 *            lk_convert up, wait for the completion; LVB invalid and
 *            granted PR -> NL -> EX; LVB invalid -> ops->recover; check
 *            the generation (ops->inval if stale), both after the
 *            holders in flight left -> not busy
 *   blocking callback: demote_to = PR (we hold EX, they want PR/CR) or
 *            NL; wakes the glock thread
 *   glock thread: demote_to set, minhold passed since the grant, no
 *            holder of a mode the target does not cover -> busy, ops->sync
 *            (from EX), ops->drop (to NL), lk_convert down, -> mode =
 *            target, not busy
 *   try:     as acquire, but a hit or one LK_NOQUEUE request made only
 *            when not busy, no demote pending and no holder; an invalid
 *            LVB (recovery needed) gives the grant back (NL), -EAGAIN
 * A holder is admitted while a demote is pending only if the target
 * covers its mode or the minimum hold time has not passed yet.
 *
 * Locking: e->mu protects the table, the reference counts and the
 * engine's flags; gl->mu protects the glock's state below. Order: e->mu
 * before gl->mu (fence, stop, drop_all, stats walk the table). gl->mu is
 * released around every DLM call that may wait and around the ops (busy
 * keeps the state stable meanwhile). Lock order: gl->mu before the DLM's own
 * lock (lk_lvb_get/lk_lvb_set are called with gl->mu held; the DLM never
 * calls back with its lock held).
 */
#include "fusefs/fs_glock.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

struct fs_glocks {
	struct lk_ls *ls;	    /* immutable */
	struct fs_glocks_conf conf; /* immutable */
	struct {
		const struct fs_glock_ops *ops;
		void *arg;
	} type[FS_GLOCK_TYPES]; /* set before the first get of the type */
	pthread_mutex_t mu;
	struct fs_glock **bucket; /* mu: hash chains */
	size_t nbucket;		  /* mu */
	size_t count;		  /* mu: glocks in the table */
	int fenced;		  /* mu */
	int stopped;		  /* mu */
};

struct fs_glock {
	struct fs_glocks *e;		/* immutable */
	struct lk_ls *ls;		/* immutable */
	struct lk_name name;		/* immutable */
	uint64_t minhold_ns;		/* immutable */
	const struct fs_glock_ops *ops; /* immutable */
	void *arg;			/* immutable */
	pthread_t thread;		/* immutable after new */
	struct fs_glock *hnext;		/* e->mu: hash chain */
	unsigned ref;			/* e->mu: references */

	pthread_mutex_t mu;
	pthread_cond_t cv;	     /* any state change (broadcast) */
	struct lk_lock *lk;	     /* mu: NULL until the first grant */
	int mode;		     /* mu */
	int busy;		     /* mu */
	int demote_to;		     /* mu */
	unsigned holders[LK_NMODES]; /* mu */
	unsigned nholders;	     /* mu */
	uint64_t grant_ns;	     /* mu: time of the last grant */
	int seen;		     /* mu: gen is meaningful */
	uint64_t gen;		     /* mu: last generation seen */
	int fenced;		     /* mu */
	int stop;		     /* mu */
	int joined;		     /* mu: fs_glock_stop joined the thread */
	int comp_done;		     /* mu: the pending DLM call ended */
	int comp_status;	     /* mu: ... with this status */
	struct fs_glock_stats st;    /* mu */
};

/* Longest sleep of a wait that must notice a fence (fs_glock_fence
 * broadcasts, so this only bounds a missed wake-up). */
#define GL_NAP_NS 100000000ull
/* fs_glock_stop waits this long for a DLM call in progress, then fences
 * the glock (so that unmount never hangs on a lockspace that stopped
 * answering). */
#define GL_STOP_NS 10000000000ull

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wait on gl->cv until @deadline (CLOCK_MONOTONIC ns; 0: no limit). */
static void gl_wait(struct fs_glock *gl, uint64_t deadline)
{
	struct timespec ts;

	if (deadline == 0) {
		pthread_cond_wait(&gl->cv, &gl->mu);
		return;
	}
	ts.tv_sec = (time_t)(deadline / 1000000000ull);
	ts.tv_nsec = (long)(deadline % 1000000000ull);
	pthread_cond_timedwait(&gl->cv, &gl->mu, &ts);
}

static uint64_t lvb_gen(const uint8_t *lvb)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | lvb[i];
	return v;
}

static void lvb_put_gen(uint8_t *lvb, uint64_t v)
{
	memset(lvb, 0, LK_LVB_LEN);
	for (int i = 0; i < 8; i++)
		lvb[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t random_gen(void)
{
	uint64_t v = 0;

	if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
		v = now_ns() * 0x9e3779b97f4a7c15ull;
	/* 48 bits: readable in JSON, and 2^-48 to meet an old value */
	return (v & 0xffffffffffffull) | 1;
}

/* ---- blocking callback (DLM callback thread: short) ------------------ */

static void gl_blocking(struct lk_lock *lk, int mode, void *arg)
{
	struct fs_glock *gl = arg;
	int to;

	(void)lk;
	pthread_mutex_lock(&gl->mu);
	to = gl->mode == LK_EX && (mode == LK_PR || mode == LK_CR) ? LK_PR
								   : LK_NL;
	if (gl->demote_to < 0 || to < gl->demote_to)
		gl->demote_to = to;
	pthread_cond_broadcast(&gl->cv);
	pthread_mutex_unlock(&gl->mu);
}

static void gl_completion(struct lk_lock *lk, int status, void *arg)
{
	struct fs_glock *gl = arg;

	(void)lk;
	pthread_mutex_lock(&gl->mu);
	gl->comp_done = 1;
	gl->comp_status = status;
	pthread_cond_broadcast(&gl->cv);
	pthread_mutex_unlock(&gl->mu);
}

static const struct lk_lock_ops gl_lk_ops = {
    .completion = gl_completion,
    .blocking = gl_blocking,
};

/* The result of lk_lock/lk_convert @ret: granted at once, failed at once,
 * or queued (wait for gl_completion). Fenced meanwhile: -EIO at once (a
 * fenced node's lockspace may never answer; the request stays pending
 * until the lockspace is abandoned, and gl outlives that). mu held; busy
 * set. */
static int gl_done(struct fs_glock *gl, int ret)
{
	if (ret == LK_GRANTED_NOW)
		return 0;
	if (ret < 0)
		return ret;
	while (!gl->comp_done && !gl->fenced)
		gl_wait(gl, now_ns() + GL_NAP_NS);
	return gl->comp_done ? gl->comp_status : -EIO;
}

/* lk_convert @gl->lk to @mode and wait. mu held on entry and return. */
static int gl_convert(struct fs_glock *gl, int mode)
{
	int ret;

	gl->comp_done = 0;
	pthread_mutex_unlock(&gl->mu);
	ret = lk_convert(gl->lk, mode, 0);
	pthread_mutex_lock(&gl->mu);
	return gl_done(gl, ret);
}

/* ---- acquire ---------------------------------------------------------- */

/* May a new holder in @mode run now? mu held. */
static int admit(const struct fs_glock *gl, int mode, uint64_t now)
{
	if (gl->busy || gl->mode < 0 || !lk_mode_covers(gl->mode, mode))
		return 0;
	if (gl->demote_to < 0 || lk_mode_covers(gl->demote_to, mode))
		return 1;
	return now < gl->grant_ns + gl->minhold_ns;
}

/* Run @fn (inval or recover) with no holder in flight and mu released.
 * mu held, busy set. */
static int run_op(struct fs_glock *gl, int recover)
{
	int ret = 0;

	while (gl->nholders > 0 && !gl->fenced) /* nobody may look */
		gl_wait(gl, now_ns() + GL_NAP_NS);
	if (gl->fenced)
		return -EIO;
	pthread_mutex_unlock(&gl->mu);
	if (recover)
		ret = gl->ops->recover(gl, gl->arg);
	else
		gl->ops->inval(gl, gl->arg);
	pthread_mutex_lock(&gl->mu);
	if (recover)
		gl->st.recovers++;
	else
		gl->st.invals++;
	return ret;
}

/* After a grant in @mode: read the generation; an invalid LVB means
 * recover (in EX); move the generation on for EX; drop the caches if it
 * is not the one we saw last. mu held, busy set. 0 or -errno (fence). */
static int check_gen(struct fs_glock *gl, int mode)
{
	uint8_t lvb[LK_LVB_LEN];
	int valid = lk_lvb_get(gl->lk, lvb) == 0;
	uint64_t g = valid ? lvb_gen(lvb) : 0;
	int stale = !valid || !gl->seen || g != gl->gen;
	int ret = 0;

	if (!valid && gl->ops->recover != NULL)
		ret = run_op(gl, 1); /* mode is EX here (request) */
	if (ret < 0)
		return ret;
	if (mode == LK_EX) {
		g = valid ? g + 1 : random_gen();
		lvb_put_gen(lvb, g);
		lk_lvb_set(gl->lk, lvb);
		valid = 1;
	}
	if (stale && gl->ops->inval != NULL)
		run_op(gl, 0);
	gl->seen = valid;
	gl->gen = g;
	gl->st.generation = g;
	return 0;
}

/* A PR grant found the LVB invalid and recovery needs EX: step down to
 * NL (always granted: no conversion deadlock with other PR holders doing
 * the same) and queue for EX. mu held, busy set. */
static int upgrade_for_recovery(struct fs_glock *gl, int *mode)
{
	uint8_t lvb[LK_LVB_LEN];
	int ret;

	if (*mode == LK_EX || gl->ops->recover == NULL ||
	    lk_lvb_get(gl->lk, lvb) == 0)
		return 0;
	ret = gl_convert(gl, LK_NL);
	gl->mode = LK_NL;
	if (ret == 0)
		ret = gl_convert(gl, LK_EX);
	if (ret == 0) {
		*mode = LK_EX;
		gl->mode = LK_EX;
	}
	return ret;
}

/* A NOQUEUE grant (fs_glock_try) found the LVB invalid and recovery
 * needs a blocking EX: give the mode back (NL: never waits). mu held,
 * busy set. */
static int try_needs_recovery(struct fs_glock *gl)
{
	uint8_t lvb[LK_LVB_LEN];

	if (gl->ops->recover == NULL || lk_lvb_get(gl->lk, lvb) == 0)
		return 0;
	if (gl_convert(gl, LK_NL) == 0)
		gl->mode = LK_NL;
	return -EAGAIN;
}

/* One DLM request (first lock or up-conversion) for @mode with @flags
 * (0 or LK_NOQUEUE). mu held on entry and return; busy is set
 * meanwhile. */
static int request(struct fs_glock *gl, int mode, unsigned flags)
{
	struct lk_lock *lk = gl->lk;
	int ret;

	gl->busy = 1;
	gl->comp_done = 0;
	pthread_mutex_unlock(&gl->mu);
	if (lk == NULL)
		ret = lk_lock(gl->ls, &gl->name, mode, LK_VALBLK | flags,
			      &gl_lk_ops, gl, &lk);
	else
		ret = lk_convert(lk, mode, flags);
	pthread_mutex_lock(&gl->mu);
	ret = gl_done(gl, ret);
	gl->st.requests++;
	if (ret == 0) {
		gl->lk = lk;
		gl->mode = mode;
		if (flags & LK_NOQUEUE)
			ret = try_needs_recovery(gl);
		else
			ret = upgrade_for_recovery(gl, &mode);
	}
	if (ret == 0) {
		gl->grant_ns = now_ns();
		ret = check_gen(gl, mode);
		if (ret < 0)
			ret = -EIO; /* fenced below */
	}
	gl->busy = 0;
	pthread_cond_broadcast(&gl->cv);
	return ret;
}

/* Become a holder in @mode. mu held. */
static void hold(struct fs_glock *gl, int mode)
{
	gl->holders[mode]++;
	gl->nholders++;
	gl->st.acquires++;
}

int fs_glock_acquire(struct fs_glock *gl, int mode)
{
	uint64_t t0 = 0;
	int ret;

	if (mode != LK_PR && mode != LK_EX)
		return -EINVAL;
	pthread_mutex_lock(&gl->mu);
	for (;;) {
		uint64_t now = now_ns();

		if (gl->fenced) {
			ret = -EIO;
			break;
		}
		if (admit(gl, mode, now)) {
			hold(gl, mode);
			if (t0 == 0) {
				gl->st.hits++;
			} else {
				gl->st.waits++;
				gl->st.wait_ns += now - t0;
				if (now - t0 > gl->st.max_wait_ns)
					gl->st.max_wait_ns = now - t0;
			}
			ret = 0;
			break;
		}
		if (t0 == 0)
			t0 = now;
		if (gl->busy || gl->demote_to >= 0) {
			gl_wait(gl, 0); /* let the demote (or request) end */
			continue;
		}
		ret = request(gl, mode, 0);
		if (ret == -EDEADLK || ret == -EAGAIN) {
			/* conversion deadlock victim: we keep our mode and
			 * the other side waits for it: give it up (as if
			 * asked), then queue again from NL */
			gl->st.retries++;
			if (gl->mode > LK_NL &&
			    (gl->demote_to < 0 || gl->demote_to > LK_NL))
				gl->demote_to = LK_NL;
			else /* nothing to give up: let the other go */
				gl_wait(gl, now_ns() + 1000000ull);
			pthread_cond_broadcast(&gl->cv);
		} else if (ret < 0) {
			gl->fenced = 1; /* -ESHUTDOWN: fenced out */
			pthread_cond_broadcast(&gl->cv);
		}
	}
	pthread_mutex_unlock(&gl->mu);
	return ret;
}

int fs_glock_try(struct fs_glock *gl, int mode)
{
	int ret = -EAGAIN;

	if (mode != LK_PR && mode != LK_EX)
		return -EINVAL;
	pthread_mutex_lock(&gl->mu);
	if (gl->fenced) {
		ret = -EIO;
	} else if (admit(gl, mode, now_ns())) {
		hold(gl, mode);
		gl->st.hits++;
		ret = 0;
	} else if (!gl->busy && gl->demote_to < 0 && gl->nholders == 0) {
		ret = request(gl, mode, LK_NOQUEUE);
		if (ret == -EDEADLK)
			ret = -EAGAIN;
		else if (ret < 0 && ret != -EAGAIN)
			gl->fenced = 1; /* -ESHUTDOWN: fenced out */
		if (ret == 0)
			hold(gl, mode);
	}
	if (ret == -EAGAIN)
		gl->st.try_fails++;
	pthread_mutex_unlock(&gl->mu);
	return ret;
}

void fs_glock_release(struct fs_glock *gl, int mode)
{
	pthread_mutex_lock(&gl->mu);
	gl->holders[mode]--;
	gl->nholders--;
	/*
	 * Only a pending demote (it waits for blockers) and a busy run_op
	 * (it waits for no holder) care. Holds are per request since the
	 * namespace layer took the locks over (fs_ilock.c), so the holder
	 * count reaches 0 at almost every request: waking the glock's
	 * thread each time made a 1-node dlm untar 1.8x slower.
	 */
	if (gl->demote_to >= 0 || (gl->nholders == 0 && gl->busy))
		pthread_cond_broadcast(&gl->cv);
	pthread_mutex_unlock(&gl->mu);
}

/* ---- demote (glock thread) -------------------------------------------- */

/* Holders the target mode does not cover. mu held. */
static unsigned blockers(const struct fs_glock *gl, int to)
{
	unsigned n = 0;

	for (int m = 0; m < LK_NMODES; m++)
		if (!lk_mode_covers(to, m))
			n += gl->holders[m];
	return n;
}

/* Run one due demote. mu held on entry and return. */
static void demote(struct fs_glock *gl)
{
	int from = gl->mode, to = gl->demote_to, ret = 0;
	uint64_t t0 = now_ns();

	gl->busy = 1;
	pthread_mutex_unlock(&gl->mu);
	if (from == LK_EX && gl->ops->sync != NULL)
		ret = gl->ops->sync(gl, from, to, gl->arg);
	if (ret == 0 && to == LK_NL && gl->ops->drop != NULL)
		gl->ops->drop(gl, from, gl->arg);
	pthread_mutex_lock(&gl->mu);
	if (from == LK_EX && gl->ops->sync != NULL)
		gl->st.syncs++;
	if (ret == 0 && to == LK_NL && gl->ops->drop != NULL)
		gl->st.drops++;
	if (ret == 0)
		ret = gl_convert(gl, to);
	if (ret == 0) {
		gl->mode = to;
		if (to == LK_PR)
			gl->st.demote_pr++;
		else
			gl->st.demote_nl++;
	} else {
		/* never hand the lock on with unwritten state: fenced, the
		 * cluster recovers this node's journal once it is gone */
		gl->fenced = 1;
	}
	gl->st.demote_ns += now_ns() - t0;
	/* a blocking callback that came meanwhile may ask for less still */
	if (gl->demote_to >= to || gl->fenced)
		gl->demote_to = -1;
	gl->busy = 0;
	pthread_cond_broadcast(&gl->cv);
}

static void *gl_thread(void *arg)
{
	struct fs_glock *gl = arg;

	pthread_mutex_lock(&gl->mu);
	while (!gl->stop) {
		uint64_t now = now_ns(), due;

		if (gl->demote_to < 0 || gl->busy || gl->fenced) {
			gl_wait(gl, 0);
			continue;
		}
		if (gl->mode < 0 || !(gl->demote_to < gl->mode)) {
			gl->demote_to = -1; /* nothing to give up */
			pthread_cond_broadcast(&gl->cv);
			continue;
		}
		due = gl->grant_ns + gl->minhold_ns;
		if (now < due) {
			gl_wait(gl, due);
			continue;
		}
		if (blockers(gl, gl->demote_to) > 0) {
			gl_wait(gl, 0);
			continue;
		}
		demote(gl);
	}
	pthread_mutex_unlock(&gl->mu);
	return NULL;
}

/* ---- one glock: life cycle --------------------------------------------- */

static const struct fs_glock_ops no_ops;

/* A new glock on @name (not in the table yet), its thread started. */
static int gl_new(struct fs_glocks *e, const struct lk_name *name,
		  struct fs_glock **out)
{
	struct fs_glock *gl = calloc(1, sizeof(*gl));
	pthread_condattr_t ca;
	int ret;

	if (gl == NULL)
		return -ENOMEM;
	gl->e = e;
	gl->ls = e->ls;
	gl->name = *name;
	gl->minhold_ns = (uint64_t)e->conf.minhold_ms * 1000000ull;
	gl->ops = e->type[name->type].ops;
	gl->arg = e->type[name->type].arg;
	if (gl->ops == NULL)
		gl->ops = &no_ops;
	gl->mode = -1;
	gl->demote_to = -1;
	pthread_mutex_init(&gl->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&gl->cv, &ca);
	pthread_condattr_destroy(&ca);
	ret = -pthread_create(&gl->thread, NULL, gl_thread, gl);
	if (ret < 0) {
		pthread_cond_destroy(&gl->cv);
		pthread_mutex_destroy(&gl->mu);
		free(gl);
		return ret;
	}
	*out = gl;
	return 0;
}

static void gl_fence(struct fs_glock *gl)
{
	pthread_mutex_lock(&gl->mu);
	gl->fenced = 1;
	pthread_cond_broadcast(&gl->cv);
	pthread_mutex_unlock(&gl->mu);
}

/* Stop the glock's thread (fs_glocks_stop). */
static void gl_stop(struct fs_glock *gl)
{
	uint64_t deadline = now_ns() + GL_STOP_NS;

	pthread_mutex_lock(&gl->mu);
	if (gl->joined) {
		pthread_mutex_unlock(&gl->mu);
		return;
	}
	gl->stop = 1;
	pthread_cond_broadcast(&gl->cv);
	while (gl->busy) {
		if (now_ns() > deadline && !gl->fenced) {
			gl->fenced = 1; /* the DLM stopped answering */
			pthread_cond_broadcast(&gl->cv);
		}
		gl_wait(gl, now_ns() + GL_NAP_NS);
	}
	gl->joined = 1;
	pthread_mutex_unlock(&gl->mu);
	pthread_join(gl->thread, NULL);
}

/* Unlock without sync and free (fs_glocks_free: stopped). */
static void gl_free(struct fs_glock *gl)
{
	if (gl->lk != NULL && !gl->fenced)
		lk_unlock(gl->lk, 0);
	pthread_cond_destroy(&gl->cv);
	pthread_mutex_destroy(&gl->mu);
	free(gl);
}

/* Sync (from EX), drop and unlock: no holder, not busy (drop_all). */
static int gl_unlock(struct fs_glock *gl)
{
	int from, ret = 0;

	pthread_mutex_lock(&gl->mu);
	while (gl->busy && !gl->fenced)
		gl_wait(gl, now_ns() + GL_NAP_NS);
	from = gl->mode;
	if (gl->fenced || gl->nholders > 0 || gl->lk == NULL) {
		ret = gl->fenced ? -EIO : gl->nholders > 0 ? -EBUSY : 0;
		pthread_mutex_unlock(&gl->mu);
		return ret;
	}
	gl->busy = 1;
	pthread_mutex_unlock(&gl->mu);
	if (from == LK_EX && gl->ops->sync != NULL)
		ret = gl->ops->sync(gl, from, -1, gl->arg);
	if (ret == 0 && from > LK_NL && gl->ops->drop != NULL)
		gl->ops->drop(gl, from, gl->arg);
	pthread_mutex_lock(&gl->mu);
	if (ret == 0) {
		lk_unlock(gl->lk, 0);
		gl->lk = NULL;
		gl->mode = -1;
		gl->demote_to = -1;
	} else {
		gl->fenced = 1;
	}
	gl->busy = 0;
	pthread_cond_broadcast(&gl->cv);
	pthread_mutex_unlock(&gl->mu);
	return ret;
}

uint16_t fs_glock_type(const struct fs_glock *gl)
{
	return gl->name.type;
}

uint64_t fs_glock_num(const struct fs_glock *gl)
{
	return gl->name.num;
}

int fs_glock_mode(struct fs_glock *gl)
{
	int m;

	pthread_mutex_lock(&gl->mu);
	m = gl->mode;
	pthread_mutex_unlock(&gl->mu);
	return m;
}

void fs_glock_stats_get(struct fs_glock *gl, struct fs_glock_stats *out)
{
	pthread_mutex_lock(&gl->mu);
	*out = gl->st;
	out->mode = gl->mode;
	out->holders = gl->nholders;
	out->fenced = gl->fenced;
	out->minhold_ms = gl->minhold_ns / 1000000ull;
	pthread_mutex_unlock(&gl->mu);
}

/* ---- the engine -------------------------------------------------------- */

#define GL_NBUCKET 4096

int fs_glocks_new(struct lk_ls *ls, const struct fs_glocks_conf *c,
		  struct fs_glocks **out)
{
	struct fs_glocks *e = calloc(1, sizeof(*e));

	if (e == NULL)
		return -ENOMEM;
	e->ls = ls;
	if (c != NULL)
		e->conf = *c;
	if (e->conf.workers == 0)
		e->conf.workers = 2;
	e->nbucket = GL_NBUCKET;
	e->bucket = calloc(e->nbucket, sizeof(*e->bucket));
	if (e->bucket == NULL) {
		free(e);
		return -ENOMEM;
	}
	pthread_mutex_init(&e->mu, NULL);
	*out = e;
	return 0;
}

void fs_glocks_set_ops(struct fs_glocks *e, uint16_t type,
		       const struct fs_glock_ops *ops, void *arg)
{
	if (type >= FS_GLOCK_TYPES)
		return;
	pthread_mutex_lock(&e->mu);
	e->type[type].ops = ops;
	e->type[type].arg = arg;
	pthread_mutex_unlock(&e->mu);
}

void fs_glocks_set_trace(struct fs_glocks *e, struct fs_trace *tr,
			 const char *(*type_name)(unsigned type),
			 struct fs_stats_lk *lk)
{
	/* lock events: the scaled engine (next step) */
	(void)e;
	(void)tr;
	(void)type_name;
	(void)lk;
}

static size_t hash_of(const struct fs_glocks *e, uint16_t type, uint64_t num)
{
	uint64_t h = (num ^ ((uint64_t)type << 56)) * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 32) % e->nbucket;
}

static struct fs_glock *lookup(struct fs_glocks *e, uint16_t type, uint64_t num)
{
	struct fs_glock *gl = e->bucket[hash_of(e, type, num)];

	while (gl != NULL && (gl->name.type != type || gl->name.num != num))
		gl = gl->hnext;
	return gl;
}

int fs_glock_get(struct fs_glocks *e, uint16_t type, uint64_t num,
		 struct fs_glock **out)
{
	struct fs_glock *gl;
	struct lk_name n;
	size_t h;
	int ret = 0;

	if (type >= FS_GLOCK_TYPES)
		return -EINVAL;
	lk_name_make(&n, type, num, NULL);
	pthread_mutex_lock(&e->mu);
	gl = lookup(e, type, num);
	if (e->fenced) {
		ret = -EIO;
	} else if (gl == NULL) {
		ret = gl_new(e, &n, &gl);
		if (ret == 0) {
			h = hash_of(e, type, num);
			gl->hnext = e->bucket[h];
			e->bucket[h] = gl;
			e->count++;
		}
	}
	if (ret == 0) {
		gl->ref++;
		*out = gl;
	}
	pthread_mutex_unlock(&e->mu);
	return ret;
}

void fs_glock_put(struct fs_glock *gl)
{
	if (gl == NULL)
		return;
	pthread_mutex_lock(&gl->e->mu);
	gl->ref--;
	pthread_mutex_unlock(&gl->e->mu);
}

/* Call @fn on every glock in the table (e->mu held). */
static void for_each(struct fs_glocks *e, void (*fn)(struct fs_glock *gl))
{
	for (size_t b = 0; b < e->nbucket; b++)
		for (struct fs_glock *gl = e->bucket[b]; gl != NULL;
		     gl = gl->hnext)
			fn(gl);
}

void fs_glocks_fence(struct fs_glocks *e)
{
	pthread_mutex_lock(&e->mu);
	e->fenced = 1;
	for_each(e, gl_fence);
	pthread_mutex_unlock(&e->mu);
}

int fs_glocks_fenced(struct fs_glocks *e)
{
	int f;

	pthread_mutex_lock(&e->mu);
	f = e->fenced;
	pthread_mutex_unlock(&e->mu);
	return f;
}

int fs_glocks_drop_all(struct fs_glocks *e)
{
	int ret = 0;

	pthread_mutex_lock(&e->mu);
	for (size_t b = 0; b < e->nbucket; b++) {
		for (struct fs_glock *gl = e->bucket[b]; gl != NULL;
		     gl = gl->hnext) {
			int r = gl_unlock(gl);

			if (r < 0 && ret == 0)
				ret = r;
		}
	}
	pthread_mutex_unlock(&e->mu);
	return ret;
}

void fs_glocks_stop(struct fs_glocks *e)
{
	if (e == NULL)
		return;
	pthread_mutex_lock(&e->mu);
	e->stopped = 1;
	for_each(e, gl_stop);
	pthread_mutex_unlock(&e->mu);
}

void fs_glocks_free(struct fs_glocks *e)
{
	if (e == NULL)
		return;
	fs_glocks_stop(e);
	for (size_t b = 0; b < e->nbucket; b++) {
		while (e->bucket[b] != NULL) {
			struct fs_glock *gl = e->bucket[b];

			e->bucket[b] = gl->hnext;
			gl_free(gl);
		}
	}
	pthread_mutex_destroy(&e->mu);
	free(e->bucket);
	free(e);
}

/* Add @s into @t (counters only). */
static void stats_add(struct fs_glock_stats *t, const struct fs_glock_stats *s)
{
	t->acquires += s->acquires;
	t->hits += s->hits;
	t->requests += s->requests;
	t->retries += s->retries;
	t->try_fails += s->try_fails;
	t->waits += s->waits;
	t->demote_pr += s->demote_pr;
	t->demote_nl += s->demote_nl;
	t->demote_ns += s->demote_ns;
	t->wait_ns += s->wait_ns;
	if (s->max_wait_ns > t->max_wait_ns)
		t->max_wait_ns = s->max_wait_ns;
	t->invals += s->invals;
	t->recovers += s->recovers;
	t->drops += s->drops;
	t->syncs += s->syncs;
	t->bounces += s->bounces;
	t->hold_refusals += s->hold_refusals;
	t->minhold_grows += s->minhold_grows;
	t->minhold_shrinks += s->minhold_shrinks;
	t->evictions += s->evictions;
	t->evict_syncs += s->evict_syncs;
}

void fs_glocks_stats(struct fs_glocks *e, struct fs_glocks_stats *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&e->mu);
	for (size_t b = 0; b < e->nbucket; b++) {
		for (struct fs_glock *gl = e->bucket[b]; gl != NULL;
		     gl = gl->hnext) {
			struct fs_glock_stats s;

			fs_glock_stats_get(gl, &s);
			stats_add(&out->type[gl->name.type], &s);
			stats_add(&out->total, &s);
			out->glocks_now++;
			out->idle_now += gl->ref == 0;
			out->held_now += s.mode > LK_NL;
		}
	}
	out->max = e->conf.max;
	out->workers = e->conf.workers;
	pthread_mutex_unlock(&e->mu);
}

unsigned fs_glocks_top(struct fs_glocks *e, struct fs_glock_top *top,
		       unsigned n)
{
	(void)e;
	(void)top;
	(void)n;
	return 0; /* the scaled engine (next step) */
}

void fs_glocks_stats_render(struct fs_glocks *e, struct fs_json *o,
			    const char *(*type_name)(unsigned type),
			    unsigned ntop)
{
	(void)e;
	(void)o;
	(void)type_name;
	(void)ntop; /* the scaled engine (next step) */
}

/* ---- one glock on its own ---------------------------------------------- */

int fs_glock_new(struct lk_ls *ls, const struct lk_name *name,
		 unsigned minhold_ms, const struct fs_glock_ops *ops, void *arg,
		 struct fs_glock **out)
{
	struct fs_glocks_conf c = {
	    .max = 0, .workers = 1, .minhold_ms = minhold_ms};
	struct fs_glocks *e;
	int ret;

	if (name->type >= FS_GLOCK_TYPES || name->slen != 0)
		return -EINVAL;
	ret = fs_glocks_new(ls, &c, &e);
	if (ret < 0)
		return ret;
	fs_glocks_set_ops(e, name->type, ops, arg);
	ret = fs_glock_get(e, name->type, name->num, out);
	if (ret < 0)
		fs_glocks_free(e);
	return ret;
}

void fs_glock_fence(struct fs_glock *gl)
{
	fs_glocks_fence(gl->e);
}

int fs_glock_fenced(struct fs_glock *gl)
{
	return fs_glocks_fenced(gl->e);
}

void fs_glock_stop(struct fs_glock *gl)
{
	if (gl != NULL)
		fs_glocks_stop(gl->e);
}

void fs_glock_free(struct fs_glock *gl)
{
	struct fs_glocks *e;

	if (gl == NULL)
		return;
	e = gl->e;
	fs_glock_put(gl);
	fs_glocks_free(e);
}
