/*
 * fs_glock.c — one glock's state machine: holders, DLM requests, demotes,
 * cache validity (fs_glock.h explains the model; fs_glocks.c keeps the
 * table, the LRU and the workers that run the jobs queued here).
 *
 * States of a glock (fields under gl->mu, fs_glock_internal.h):
 *   mode      -1 (no lock), LK_NL, LK_PR or LK_EX: granted now
 *   busy      one thread is talking to the DLM for it (request, up- or
 *             down-conversion, unlock) or running an op; nobody else
 *             starts anything meanwhile and no holder is admitted
 *   demote_to -1, or the mode a blocking callback asked us to go down to
 * Transitions:
 *   acquire: mode covers the want and no due demote -> holder (hit);
 *            else (not busy, no demote pending) -> busy, lk_lock or
 *            lk_convert up, wait for the completion; LVB invalid and
 *            granted PR -> NL -> EX; LVB invalid -> ops->recover; check
 *            the generation (ops->lvb_read, then ops->inval if stale),
 *            both after the holders in flight left -> not busy; the
 *            holder that asked runs at once (even if a blocking callback
 *            came meanwhile)
 *   try:     as acquire, but a hit or one LK_NOQUEUE request made only
 *            when not busy, no demote pending and no holder; an invalid
 *            LVB (recovery needed) gives the grant back (NL), -EAGAIN
 *   blocking callback: demote_to = PR (we hold EX, they want PR/CR) or
 *            NL; queues a job for a worker (fs_glocks_kick)
 *   job (worker): demote_to set, not busy; before the minimum hold time
 *            since the grant has passed while a local holder uses the
 *            glock (in_use) -> queued again for then (the last holder's
 *            release runs it sooner: fs_glocks_kick); from
 *            EX with an ops->flush not run yet for this demote -> start
 *            it (flush 1: every holder the mode covers is still
 *            admitted, so the requests it causes can run) and wait for
 *            fs_glock_flushed (flush 2), which queues the job again; while
 *            holders of a mode the target does not cover run -> nothing
 *            (the last one's release queues it again); else busy,
 *            ops->sync and ops->lvb_write (from EX), ops->drop (to NL),
 *            lk_convert down -> mode = target, not busy
 *   unlock (dropped from the LRU, drop_all): no holder, not busy -> busy,
 *            ops->sync and ops->lvb_write (from EX), ops->drop (from
 *            PR/EX), lk_unlock -> mode -1, not busy
 * A holder is admitted while a demote is pending only if the target
 * covers its mode or the minimum hold time has not passed yet.
 *
 * Adaptive minimum hold (GFS2's gl_hold_time): a grant that finds the
 * glock "lost" (demoted for another node since its last grant here: a
 * bounce) while other local acquires wait doubles minhold_ns (at least
 * FS_GLOCK_MINHOLD_STEP_NS, at most FS_GLOCK_MINHOLD_MAX_MS); a demote
 * for another node of a grant no other local acquire waited for halves
 * it (never below the engine's base). The hold only keeps a lock for
 * local holders: a blocking callback finding no holder here, or the
 * last holder leaving, gives it up at once.
 *
 * Locking: fs_glock_internal.h. gl->mu is released around every DLM call
 * that may wait and around the ops (busy keeps the state stable
 * meanwhile); code holding gl->mu never takes e->mu: kick() runs after
 * gl->mu is let go.
 */
#include "fusefs/cluster/fs_glock.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "fusefs/cluster/fs_glock_internal.h"
#include "fusefs/stats/fs_stats.h"
#include "lockmgr/cv_wait.h"

/* Longest sleep of a wait that must notice a fence (a fence broadcasts,
 * so this only bounds a missed wake-up). */
#define GL_NAP_NS 100000000ull
/* Smallest adaptive minimum hold above the base. */
#define FS_GLOCK_MINHOLD_STEP_NS 1000000ull

uint64_t fs_glock_now(void)
{
	return cvw_now_ns();
}

/* Wait on gl->cv until @deadline (CLOCK_MONOTONIC ns; 0: no limit). */
static void gl_wait(struct fs_glock *gl, uint64_t deadline)
{
	cvw_wait_until(&gl->cv, &gl->mu, deadline == 0 ? CVW_NEVER : deadline);
}

static void kick(struct fs_glock *gl)
{
	fs_glocks_kick(gl);
}

static uint64_t lvb_gen(const uint8_t *lvb)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | lvb[i];
	return v;
}

/* Bytes 0..7 only: the type's bytes after them go on unchanged. */
static void lvb_put_gen(uint8_t *lvb, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		lvb[i] = (uint8_t)(v >> (8 * i));
}

uint64_t fs_glock_seed(void)
{
	uint64_t v = 0;

	if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
		v = fs_glock_now() * 0x9e3779b97f4a7c15ull;
	return v;
}

/* A fresh generation: splitmix64 over the engine's random seed (one
 * getrandom per engine, not one system call per new lock). */
static uint64_t random_gen(struct fs_glocks *e)
{
	uint64_t v = __atomic_add_fetch(&e->gen_seed, 0x9e3779b97f4a7c15ull,
					__ATOMIC_RELAXED);

	v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
	v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
	v ^= v >> 31;
	/* 48 bits: readable in JSON, and 2^-48 to meet an old value */
	return (v & 0xffffffffffffull) | 1;
}

/* ---- lock events ------------------------------------------------------ */

/* One event into the engine's trace, if any; @wb: a demote's or
 * release's write-back (or NULL). mu held (the trace's lock is a leaf). */
static void trace_ev(struct fs_glock *gl, int ev, int mode, int from,
		     int remote, uint64_t ns, const struct fs_trace_wb *wb)
{
	struct fs_glocks *e = gl->e;
	const char *tn;
	char type[24], res[64];
	struct fs_trace_lock t;
	int peer;

	if (!FS_TRACE_ON(e->tr))
		return;
	tn = e->type_name != NULL ? e->type_name(gl->name.type) : NULL;
	if (tn == NULL) {
		snprintf(type, sizeof(type), "type%u", gl->name.type);
		tn = type;
	}
	snprintf(res, sizeof(res), "%s:%llu", tn,
		 (unsigned long long)gl->name.num);
	/* peer: who asked (blocking callbacks, demotes for them); grants
	 * and releases leave it out */
	peer = ev == FS_TR_BAST_RECV || ev == FS_TR_DEMOTE ||
		       (ev == FS_TR_RELEASE && gl->ahead_peer)
		   ? gl->bast_peer
		   : -1;
	t = (struct fs_trace_lock){.ev = (enum fs_trace_ev)ev,
				   .type = tn,
				   .res = res,
				   .mode = mode,
				   .from = from,
				   .peer = peer,
				   .remote = remote,
				   .wait_ns = ns,
				   .wb = wb};
	fs_trace_lock(e->tr, &t);
}

void fs_glock_trace(struct fs_glock *gl, int ev, int mode, int from, int remote,
		    uint64_t ns)
{
	trace_ev(gl, ev, mode, from, remote, ns, NULL);
}

struct fs_trace_wb *fs_glock_report(struct fs_glock *gl)
{
	return &gl->rep;
}

/* ---- DLM callbacks (the DLM's callback thread: short) ---------------- */

static void gl_blocking(struct lk_lock *lk, int mode, void *arg)
{
	struct fs_glock *gl = arg;
	unsigned span;
	int to;

	pthread_mutex_lock(&gl->mu);
	/* a lock we unlocked already (fs_glock_internal.h, Memory); a new
	 * request's handle is stored only when lk_lock returns */
	if (gl->lk != lk && !(gl->lk == NULL && gl->busy)) {
		pthread_mutex_unlock(&gl->mu);
		return;
	}
	to = gl->mode == LK_EX && (mode == LK_PR || mode == LK_CR) ? LK_PR
								   : LK_NL;
	if (gl->demote_to < 0 && gl->flush == 2)
		gl->flush = 0; /* a new demote: flush again */
	if (gl->demote_to < 0 || to < gl->demote_to)
		gl->demote_to = to;
	gl->bast_peer = lk_bast_node(lk) > 0 ? (int)lk_bast_node(lk) : -1;
	/* another node will change what an idle PR glock covers: its
	 * neighbours too, likely, if it keeps asking (fs_glock_ops.
	 * ahead_span; fs_glocks_ahead counts the streak) */
	span = gl->mode == LK_PR && to == LK_NL && gl->nholders == 0
		   ? gl->ops->ahead_span
		   : 0;
	fs_glock_trace(gl, FS_TR_BAST_RECV, mode, gl->mode, 1, 0);
	pthread_cond_broadcast(&gl->cv);
	pthread_mutex_unlock(&gl->mu);
	kick(gl);
	if (span > 0)
		fs_glocks_ahead(gl->e, gl->name.type, gl->name.num, span,
				lk_bast_node(lk) > 0 ? (int)lk_bast_node(lk)
						     : -1);
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
		gl_wait(gl, fs_glock_now() + GL_NAP_NS);
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

/* ---- adaptive minimum hold ------------------------------------------- */

static void minhold_grow(struct fs_glock *gl)
{
	uint64_t max = (uint64_t)FS_GLOCK_MINHOLD_MAX_MS * 1000000ull;
	uint64_t v = gl->minhold_ns * 2;

	if (v < gl->e->base_ns + FS_GLOCK_MINHOLD_STEP_NS)
		v = gl->e->base_ns + FS_GLOCK_MINHOLD_STEP_NS;
	if (v > max)
		v = max > gl->e->base_ns ? max : gl->e->base_ns;
	if (v != gl->minhold_ns)
		gl->st.minhold_grows++;
	gl->minhold_ns = v;
}

static void minhold_shrink(struct fs_glock *gl)
{
	uint64_t v = gl->minhold_ns / 2;

	if (v < gl->e->base_ns + FS_GLOCK_MINHOLD_STEP_NS)
		v = gl->e->base_ns;
	if (v != gl->minhold_ns)
		gl->st.minhold_shrinks++;
	gl->minhold_ns = v;
}

/* Is a local holder using @gl? The minimum hold keeps a lock only for
 * them: one nobody here holds goes at once to the node that asks (GFS2
 * delays a demote only for a glock with holders). Waiters do not count:
 * one whose mode the lock covers is admitted at once during the hold,
 * one that needs another mode needs this demote first. mu held. */
static int in_use(const struct fs_glock *gl)
{
	return gl->nholders > 0;
}

/* ---- acquire ---------------------------------------------------------- */

/* May a new holder in @mode run now? mu held. */
static int admit(const struct fs_glock *gl, int mode, uint64_t now)
{
	if (gl->busy || gl->mode < 0 || !lk_mode_covers(gl->mode, mode))
		return 0;
	if (gl->demote_to < 0 || lk_mode_covers(gl->demote_to, mode))
		return 1;
	if (gl->flush == 1)
		return 1; /* ops->flush's requests come back as holders */
	return now < gl->grant_ns + gl->minhold_ns;
}

/* Become a holder in @mode; @t0: when it started waiting (0: a hit).
 * mu held. */
static void hold(struct fs_glock *gl, int mode, uint64_t t0)
{
	struct fs_glock_counts *s = &gl->st;
	int m = mode == LK_EX; /* per-mode index */
	uint64_t w;

	gl->holders[mode]++;
	gl->nholders++;
	s->acquires++;
	s->mode_acquires[m]++;
	if (gl->ahead) { /* the first holder of a lock-ahead grant */
		gl->ahead = 0;
		s->ahead_hits++;
	}
	if (t0 == 0) {
		s->hits++;
		return;
	}
	w = fs_glock_now() - t0;
	s->waits++;
	s->wait_ns += w;
	s->mode_wait_ns[m] += w;
	if (w > s->max_wait_ns)
		s->max_wait_ns = w;
	if (w > s->mode_max_ns[m])
		s->mode_max_ns[m] = w;
}

/* Run inval or recover with no holder in flight and mu released. mu
 * held, busy set. */
static int run_op(struct fs_glock *gl, int recover)
{
	int ret = 0;

	while (gl->nholders > 0 && !gl->fenced) /* nobody may look */
		gl_wait(gl, fs_glock_now() + GL_NAP_NS);
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

/* Hand the type's bytes of @lvb to ops->lvb_read. mu held, busy set;
 * released around the call. */
static void lvb_read(struct fs_glock *gl, const uint8_t *lvb, int valid)
{
	uint8_t val[FS_GLOCK_LVB_USER];

	if (gl->ops->lvb_read == NULL)
		return;
	memcpy(val, lvb + 8, sizeof(val));
	pthread_mutex_unlock(&gl->mu);
	gl->ops->lvb_read(gl, val, valid, gl->arg);
	pthread_mutex_lock(&gl->mu);
}

/* Does this type move the generation only when something changed
 * (fs_glock_ops.stamp, changed)? */
static int tracks(const struct fs_glock *gl)
{
	return gl->ops->stamp != NULL && gl->ops->changed != NULL;
}

/* Before leaving EX: may the holders have changed what the lock covers
 * since its grant (then the generation moves on: lvb_write)? 0 for a
 * grant that moved it already. mu held on entry and return (released
 * around the op), busy set. */
static int ex_changed(struct fs_glock *gl)
{
	uint64_t mark = gl->mark;
	int changed;

	if (!gl->tracked)
		return 0;
	pthread_mutex_unlock(&gl->mu);
	changed = gl->ops->changed(gl, mark, gl->arg);
	pthread_mutex_lock(&gl->mu);
	return changed;
}

/* Before leaving EX: move the generation on if @bump, and ops->lvb_write
 * fills the type's bytes the DLM writes back with the down-conversion or
 * unlock. The new generation, or 0 if it did not move. mu not held, busy
 * set. */
static uint64_t lvb_write(struct fs_glock *gl, int bump)
{
	uint8_t lvb[LK_LVB_LEN];
	uint64_t g = 0;

	if ((gl->ops->lvb_write == NULL && !bump) ||
	    lk_lvb_get(gl->lk, lvb) < 0)
		return 0;
	if (bump) {
		g = lvb_gen(lvb) + 1;
		lvb_put_gen(lvb, g);
	}
	if (gl->ops->lvb_write != NULL)
		gl->ops->lvb_write(gl, lvb + 8, gl->arg);
	lk_lvb_set(gl->lk, lvb);
	return g;
}

/* After lvb_write(@bump) returned @g: what this node saw last is what it
 * wrote. mu held. */
static void left_ex(struct fs_glock *gl, int bump, uint64_t g)
{
	if (bump && g != 0) {
		gl->gen = g;
		gl->st.generation = g;
	} else if (gl->tracked && !bump) {
		gl->st.gen_kept++;
	}
	gl->tracked = 0;
}

/* An EX grant on a valid LVB of a tracking type: the generation stays,
 * the holders' changes are looked for when EX is given up. mu held on
 * entry and return (released around the op), busy set. */
static void ex_track(struct fs_glock *gl)
{
	uint64_t mark;

	pthread_mutex_unlock(&gl->mu);
	mark = gl->ops->stamp(gl, gl->arg);
	pthread_mutex_lock(&gl->mu);
	gl->mark = mark;
	gl->tracked = 1;
}

/* After a grant in @mode, converted from @from (-1: a new lock): read the
 * generation; an invalid LVB means recover (in EX); move the generation
 * on for EX (a tracking type: stamp, and move it when EX is given up, if
 * anything changed); hand the type its bytes; drop the caches if the generation
 * is not the one we saw last. An up-conversion from PR held since its own
 * grant cannot have missed another node's EX (and that grant already ran
 * inval if needed): no inval then, even with an invalid LVB (a fresh
 * resource's, which a PR grant cannot set). mu held, busy set. 0 or
 * -errno (fence). */
static int check_gen(struct fs_glock *gl, int mode, int from)
{
	uint8_t lvb[LK_LVB_LEN];
	int valid = lk_lvb_get(gl->lk, lvb) == 0, was_valid = valid;
	uint64_t g = valid ? lvb_gen(lvb) : 0;
	int held = from >= LK_PR;
	int stale = !held && (!valid || !gl->seen || g != gl->gen);
	int ret = 0;

	if (!valid && gl->ops->recover != NULL)
		ret = run_op(gl, 1); /* mode is EX here (request) */
	if (ret < 0)
		return ret;
	if (mode == LK_EX && valid && tracks(gl)) {
		if (!gl->tracked)
			ex_track(gl); /* moves on when EX is given up */
	} else if (mode == LK_EX) {
		g = valid ? g + 1 : random_gen(gl->e);
		lvb_put_gen(lvb, g);
		lk_lvb_set(gl->lk, lvb);
		valid = 1;
		gl->tracked = 0;
	}
	lvb_read(gl, lvb, was_valid);
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

/* Counters, minimum hold and events of a grant in @mode after @ns that
 * needed the network (@queued) or not. mu held. */
static void granted(struct fs_glock *gl, int mode, int from, int queued,
		    uint64_t ns)
{
	if (gl->lost) {
		gl->st.bounces++;
		gl->lost = 0;
		if (gl->nwaiters > 1)
			minhold_grow(gl); /* others queued behind us */
	}
	gl->contended = gl->nwaiters > 1;
	fs_glock_trace(gl, FS_TR_GRANT, mode, from, queued, ns);
	if (queued && gl->e->lkst != NULL)
		fs_stats_lk_note_wait(gl->e->lkst, &gl->name, mode, ns);
}

/* One DLM request (first lock or up-conversion) for @mode with @flags
 * (0 or LK_NOQUEUE). mu held on entry and return; busy is set
 * meanwhile. */
static int request(struct fs_glock *gl, int mode, unsigned flags)
{
	struct lk_lock *lk = gl->lk;
	int from = gl->mode, ret, queued;
	uint64_t t0 = fs_glock_now();

	gl->busy = 1;
	gl->comp_done = 0;
	fs_glock_trace(gl, FS_TR_REQUEST, mode, from, 0, 0);
	pthread_mutex_unlock(&gl->mu);
	if (lk == NULL)
		ret = lk_lock(gl->e->ls, &gl->name, mode, LK_VALBLK | flags,
			      &gl_lk_ops, gl, &lk);
	else
		ret = lk_convert(lk, mode, flags);
	pthread_mutex_lock(&gl->mu);
	queued = ret == 0;
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
		gl->grant_ns = fs_glock_now();
		granted(gl, mode, from, queued, gl->grant_ns - t0);
		ret = check_gen(gl, mode, from);
		if (ret < 0)
			ret = -EIO; /* fenced below */
	}
	gl->busy = 0;
	pthread_cond_broadcast(&gl->cv);
	return ret;
}

/* A conversion deadlock victim (-EDEADLK): we keep our mode and the other
 * side waits for it: give it up (as if asked), then queue again from NL.
 * mu held; returns with mu held; may let it go meanwhile. */
static void deadlock_victim(struct fs_glock *gl)
{
	gl->st.retries++;
	if (gl->mode > LK_NL && (gl->demote_to < 0 || gl->demote_to > LK_NL)) {
		gl->demote_to = LK_NL;
		pthread_mutex_unlock(&gl->mu);
		kick(gl);
		pthread_mutex_lock(&gl->mu);
	} else { /* nothing to give up: let the other go first */
		gl_wait(gl, fs_glock_now() + 1000000ull);
	}
}

int fs_glock_acquire(struct fs_glock *gl, int mode)
{
	uint64_t t0 = 0;
	int ret, again, kicked = 0;

	if (mode != LK_PR && mode != LK_EX)
		return -EINVAL;
	pthread_mutex_lock(&gl->mu);
	for (;;) {
		if (gl->fenced) {
			ret = -EIO;
			break;
		}
		if (admit(gl, mode, fs_glock_now())) {
			hold(gl, mode, t0);
			ret = 0;
			break;
		}
		if (t0 == 0) {
			t0 = fs_glock_now();
			gl->nwaiters++;
		}
		if (!gl->busy && gl->demote_to >= 0 && !kicked) {
			/* a job skipped while the glock was busy: queue one
			 * (a no-op when one is queued), then look again */
			kicked = 1;
			pthread_mutex_unlock(&gl->mu);
			kick(gl);
			pthread_mutex_lock(&gl->mu);
			continue;
		}
		if (gl->busy || gl->demote_to >= 0) {
			gl_wait(gl, 0); /* let the demote (or request) end */
			kicked = 0;
			continue;
		}
		ret = gl->stop ? -EIO : request(gl, mode, 0);
		if (ret == 0) { /* the holder that asked runs at once */
			hold(gl, mode, t0);
			break;
		}
		if (ret == -EDEADLK || ret == -EAGAIN) {
			deadlock_victim(gl);
		} else {
			gl->fenced = 1; /* -ESHUTDOWN: fenced out */
			pthread_cond_broadcast(&gl->cv);
		}
	}
	if (t0 != 0)
		gl->nwaiters--;
	again = gl->demote_to >= 0; /* a blocking callback came meanwhile */
	pthread_mutex_unlock(&gl->mu);
	if (again)
		kick(gl);
	return ret;
}

int fs_glock_try(struct fs_glock *gl, int mode)
{
	int ret = -EAGAIN, again;

	if (mode != LK_PR && mode != LK_EX)
		return -EINVAL;
	pthread_mutex_lock(&gl->mu);
	if (gl->fenced) {
		ret = -EIO;
	} else if (admit(gl, mode, fs_glock_now())) {
		hold(gl, mode, 0);
		ret = 0;
	} else if (!gl->busy && !gl->stop && gl->demote_to < 0 &&
		   gl->nholders == 0) {
		ret = request(gl, mode, LK_NOQUEUE);
		if (ret == -EDEADLK)
			ret = -EAGAIN;
		if (ret < 0 && ret != -EAGAIN) {
			gl->fenced = 1; /* -ESHUTDOWN: fenced out */
			pthread_cond_broadcast(&gl->cv);
			ret = -EIO;
		}
		if (ret == 0)
			hold(gl, mode, 0);
	}
	if (ret == -EAGAIN) {
		gl->st.try_fails++;
		gl->st.mode_failed[mode == LK_EX]++;
	}
	again = gl->demote_to >= 0;
	pthread_mutex_unlock(&gl->mu);
	if (again)
		kick(gl);
	return ret;
}

/* ---- lock-ahead (fs_glocks_prefetch) ---------------------------------- */

int fs_glock_ahead_claim(struct fs_glock *gl, int mode, int claim)
{
	int r = -1;

	pthread_mutex_lock(&gl->mu);
	if (gl->fenced || gl->stop) {
		r = -1;
	} else if (!gl->busy && gl->mode >= 0 &&
		   lk_mode_covers(gl->mode, mode)) {
		r = 0;
	} else if (claim && !gl->busy && gl->lk == NULL && gl->demote_to < 0 &&
		   gl->nholders == 0) {
		/* one request per glock: nobody starts another meanwhile */
		gl->busy = 1;
		gl->comp_done = 0;
		fs_glock_trace(gl, FS_TR_REQUEST, mode, gl->mode, 0, 0);
		r = 1;
	}
	pthread_mutex_unlock(&gl->mu);
	return r;
}

/* The answer to a lock-ahead request: 0 granted, -EAGAIN refused, or
 * the error. mu held, busy set. */
static int ahead_answer(struct fs_glock *gl, struct lk_lock *lk, int now,
			int err)
{
	if (lk == NULL) /* refused at once, or no request made */
		return err < 0 ? err : -EAGAIN;
	if (now)
		return 0;
	/* queued at a remote master (or behind a recovery): its answer
	 * comes through gl_completion, as a try's does */
	while (!gl->comp_done && !gl->fenced)
		gl_wait(gl, fs_glock_now() + GL_NAP_NS);
	return gl->comp_done ? gl->comp_status : -EIO;
}

/* The lock-ahead request of claimed @gl ended (@lk its handle, NULL if
 * none was made: refused at once, or @err; @now: it ended inside the
 * batch call, else its completion brings the answer): finish the grant
 * as request() does, and leave the glock idle. 1 granted, 0 not, -EIO
 * fenced. */
static int ahead_end(struct fs_glock *gl, struct lk_lock *lk, int now, int err,
		     int mode, uint64_t t0)
{
	int ret, again;

	pthread_mutex_lock(&gl->mu);
	ret = ahead_answer(gl, lk, now, err);
	gl->st.ahead_requests++;
	if (ret == 0) {
		gl->lk = lk;
		gl->mode = mode;
		ret = try_needs_recovery(gl);
	}
	if (ret == 0) {
		gl->grant_ns = fs_glock_now();
		granted(gl, mode, -1, !now, gl->grant_ns - t0);
		ret = check_gen(gl, mode, -1) < 0 ? -EIO : 1;
		gl->ahead = ret == 1;
		gl->st.ahead_grants += ret == 1;
	} else if (ret == -EAGAIN || ret == -EDEADLK || ret == -ENOMEM ||
		   ret == -EINVAL) {
		ret = 0; /* refused, or not asked: nothing held */
	}
	if (ret < 0) {
		gl->fenced = 1; /* -ESHUTDOWN: fenced out */
		ret = -EIO;
	}
	gl->busy = 0;
	pthread_cond_broadcast(&gl->cv);
	again = gl->demote_to >= 0; /* a blocking callback came meanwhile */
	pthread_mutex_unlock(&gl->mu);
	if (again)
		kick(gl);
	return ret;
}

int fs_glock_ahead_run(struct fs_glocks *e, struct fs_glock **gls, size_t n,
		       int mode, uint8_t *got)
{
	struct lk_name *names = malloc(n * sizeof(*names));
	struct lk_lock **out = calloc(n, sizeof(*out));
	uint8_t *now = malloc(n);
	void **args = malloc(n * sizeof(*args));
	uint64_t t0 = fs_glock_now();
	int err = -ENOMEM, ngot = 0, fenced = 0;

	if (names != NULL && out != NULL && now != NULL && args != NULL) {
		for (size_t i = 0; i < n; i++) {
			names[i] = gls[i]->name; /* stable while claimed */
			args[i] = gls[i];
			now[i] = 1;
		}
		err = lk_lock_batch_args(e->ls, names, n, mode,
					 LK_NOQUEUE | LK_VALBLK, &gl_lk_ops,
					 args, out, now);
	}
	for (size_t i = 0; i < n; i++) {
		struct lk_lock *lk = out != NULL ? out[i] : NULL;
		int r =
		    ahead_end(gls[i], lk, lk == NULL || now[i], err, mode, t0);

		got[i] = r == 1;
		ngot += r == 1;
		fenced |= r < 0;
	}
	free(names);
	free(out);
	free(now);
	free(args);
	return fenced ? -EIO : ngot;
}

/* Holders the target mode does not cover. mu held. */
static unsigned blockers(const struct fs_glock *gl, int to)
{
	unsigned n = 0;

	for (int m = 0; m < LK_NMODES; m++)
		if (!lk_mode_covers(to, m))
			n += gl->holders[m];
	return n;
}

void fs_glock_release(struct fs_glock *gl, int mode)
{
	int go;

	pthread_mutex_lock(&gl->mu);
	if ((mode != LK_PR && mode != LK_EX) || gl->holders[mode] == 0) {
		gl->st.bad_releases++;
		pthread_mutex_unlock(&gl->mu);
#ifdef UCFS_DEBUG
		fs_glock_assert_failed(gl, mode, __FILE__, __LINE__);
#endif
		return;
	}
	gl->holders[mode]--;
	gl->nholders--;
	/* a pending demote waits for the last blocker to leave; a busy
	 * run_op for the last holder. Holds are per request, so waking
	 * anyone at every release would cost (fs_ilock.c). */
	go = gl->demote_to >= 0 && blockers(gl, gl->demote_to) == 0;
	if (gl->nholders == 0 && gl->busy)
		pthread_cond_broadcast(&gl->cv);
	pthread_mutex_unlock(&gl->mu);
	if (go)
		kick(gl);
}

/* A lock-ahead grant leaves before any holder used it. mu held. */
static void ahead_unused(struct fs_glock *gl)
{
	gl->st.ahead_unused += gl->ahead;
	gl->ahead = 0;
}

/* ---- demote (a worker's job) ------------------------------------------ */

/* Run one due demote. mu held on entry and return. Sets *@fence when a
 * failure must fence the engine. */
static void demote(struct fs_glock *gl, int *fence)
{
	int from = gl->mode, to = gl->demote_to, ret = 0, bump;
	uint64_t t0 = fs_glock_now(), g = 0;

	gl->busy = 1;
	memset(&gl->rep, 0, sizeof(gl->rep));
	bump = from == LK_EX && ex_changed(gl);
	pthread_mutex_unlock(&gl->mu);
	if (from == LK_EX && gl->ops->sync != NULL)
		ret = gl->ops->sync(gl, from, to, gl->arg);
	if (ret == 0 && from == LK_EX)
		g = lvb_write(gl, bump);
	if (ret == 0 && to == LK_NL && gl->ops->drop != NULL)
		gl->ops->drop(gl, from, gl->arg);
	pthread_mutex_lock(&gl->mu);
	if (ret == 0 && from == LK_EX)
		left_ex(gl, bump, g);
	gl->st.syncs += from == LK_EX && gl->ops->sync != NULL;
	gl->st.drops += ret == 0 && to == LK_NL && gl->ops->drop != NULL;
	if (ret == 0)
		ret = gl_convert(gl, to);
	if (ret == 0) {
		gl->mode = to;
		gl->st.demote_pr += to == LK_PR;
		gl->st.demote_nl += to == LK_NL;
		ahead_unused(gl);
		gl->lost = 1;
		if (!gl->contended)
			minhold_shrink(gl);
		gl->contended = 0;
		trace_ev(gl, FS_TR_DEMOTE, to, from, 0, fs_glock_now() - t0,
			 &gl->rep);
		gl->bast_peer = -1;
		gl->ahead_peer = 0;
	} else {
		/* never hand the lock on with unwritten state: fenced, the
		 * cluster recovers this node's journal once it is gone */
		gl->fenced = 1;
		*fence = 1;
	}
	gl->st.demote_ns += fs_glock_now() - t0;
	/* a blocking callback that came meanwhile may ask for less still */
	if (gl->demote_to >= to || gl->fenced)
		gl->demote_to = -1;
	gl->refused = 0;
	gl->flush = 0;
	gl->busy = 0;
	pthread_cond_broadcast(&gl->cv);
}

/* Start ops->flush before a demote from EX (fs_glock.h): holders are
 * admitted until fs_glock_flushed. mu held on entry and return; let go
 * meanwhile. */
static void flush_start(struct fs_glock *gl)
{
	struct fs_glock *ref = NULL;
	int started = 0;

	gl->flush = 1;
	pthread_cond_broadcast(&gl->cv); /* waiting holders may run now */
	pthread_mutex_unlock(&gl->mu);
	/* the reference fs_glock_flushed gives back */
	if (fs_glock_get(gl->e, gl->name.type, gl->name.num, &ref) == 0) {
		started = gl->ops->flush(gl, gl->arg);
		if (!started)
			fs_glock_put(ref);
	}
	pthread_mutex_lock(&gl->mu);
	if (started)
		gl->st.flushes++;
	else
		gl->flush = 2;
}

void fs_glock_flushed(struct fs_glock *gl)
{
	pthread_mutex_lock(&gl->mu);
	if (gl->flush == 1)
		gl->flush = 2;
	pthread_cond_broadcast(&gl->cv);
	pthread_mutex_unlock(&gl->mu);
	kick(gl);
	fs_glock_put(gl);
}

void fs_glock_job(struct fs_glock *gl, uint64_t *due, int *fence)
{
	uint64_t now = fs_glock_now(), t;

	*due = 0;
	pthread_mutex_lock(&gl->mu);
	if (gl->demote_to < 0 || gl->busy || gl->fenced || gl->stop)
		goto out; /* a busy glock's owner queues it again */
	if (gl->mode < 0 || !(gl->demote_to < gl->mode)) {
		gl->demote_to = -1; /* nothing to give up */
		gl->bast_peer = -1;
		gl->ahead_peer = 0;
		pthread_cond_broadcast(&gl->cv);
		goto out;
	}
	t = gl->grant_ns + gl->minhold_ns;
	if (now < t && in_use(gl)) {
		gl->st.hold_refusals += !gl->refused;
		gl->refused = 1;
		*due = t;
		goto out;
	}
	if (gl->mode == LK_EX && gl->ops->flush != NULL && gl->flush == 0)
		flush_start(gl);
	if (gl->flush == 1 || gl->demote_to < 0 || gl->busy || gl->fenced)
		goto out; /* fs_glock_flushed queues it again */
	if (blockers(gl, gl->demote_to) > 0)
		goto out; /* the last one's release queues it again */
	demote(gl, fence);
	if (gl->demote_to >= 0)
		*due = now;
out:
	pthread_mutex_unlock(&gl->mu);
}

int fs_glock_ahead_one(struct fs_glock *gl, uint64_t now, int peer)
{
	int ask;

	pthread_mutex_lock(&gl->mu);
	ask = gl->mode == LK_PR && gl->nholders == 0 && !gl->busy &&
	      gl->demote_to < 0 && !gl->fenced && !gl->stop &&
	      now >= gl->grant_ns + gl->minhold_ns;
	if (ask) {
		gl->demote_to = LK_NL;
		gl->bast_peer = peer; /* its release names who asked */
		gl->ahead_peer = 1;
		gl->st.aheads++;
	}
	pthread_mutex_unlock(&gl->mu);
	return ask;
}

/* ---- unlock, fence, stop ---------------------------------------------- */

void fs_glock_free_lvb(struct fs_glock *gl)
{
	uint8_t lvb[LK_LVB_LEN];

	if (!gl->tracked || gl->mode != LK_EX || gl->lk == NULL ||
	    lk_lvb_get(gl->lk, lvb) < 0)
		return;
	lvb_put_gen(lvb, lvb_gen(lvb) + 1);
	lk_lvb_set(gl->lk, lvb);
}

struct lk_lock *fs_glock_unlock_begin(struct fs_glock *gl, int *ret, int *fence)
{
	struct lk_lock *lk = NULL;
	int from, r = 0, bump;
	uint64_t g = 0;

	pthread_mutex_lock(&gl->mu);
	while (gl->busy && !gl->fenced)
		gl_wait(gl, fs_glock_now() + GL_NAP_NS);
	from = gl->mode;
	if (gl->fenced || gl->nholders > 0 || gl->lk == NULL) {
		*ret = gl->fenced ? -EIO : gl->nholders > 0 ? -EBUSY : 0;
		pthread_mutex_unlock(&gl->mu);
		return NULL;
	}
	gl->busy = 1;
	memset(&gl->rep, 0, sizeof(gl->rep));
	bump = from == LK_EX && ex_changed(gl);
	pthread_mutex_unlock(&gl->mu);
	if (from == LK_EX && gl->ops->sync != NULL)
		r = gl->ops->sync(gl, from, -1, gl->arg);
	if (r == 0 && from == LK_EX)
		g = lvb_write(gl, bump);
	if (r == 0 && from > LK_NL && gl->ops->drop != NULL)
		gl->ops->drop(gl, from, gl->arg);
	pthread_mutex_lock(&gl->mu);
	if (r == 0 && from == LK_EX)
		left_ex(gl, bump, g);
	gl->st.syncs += from == LK_EX && gl->ops->sync != NULL;
	gl->st.drops += r == 0 && from > LK_NL && gl->ops->drop != NULL;
	if (r == 0) {
		lk = gl->lk; /* busy: the caller unlocks it, then _end */
	} else {
		gl->fenced = 1;
		*fence = 1;
		gl->busy = 0;
		pthread_cond_broadcast(&gl->cv);
	}
	pthread_mutex_unlock(&gl->mu);
	*ret = r;
	return lk;
}

void fs_glock_unlock_end(struct fs_glock *gl)
{
	uint64_t held;
	int from;

	pthread_mutex_lock(&gl->mu);
	from = gl->mode;
	held = fs_glock_now() - gl->grant_ns;
	gl->lk = NULL;
	gl->mode = -1;
	gl->demote_to = -1;
	gl->st.evict_syncs += from > LK_NL;
	ahead_unused(gl);
	/* busy since _begin: rep is what its ops did; a demote-ahead's
	 * release names the node whose request set it off */
	trace_ev(gl, FS_TR_RELEASE, -1, from, 0, held, &gl->rep);
	gl->bast_peer = -1;
	gl->ahead_peer = 0;
	gl->busy = 0;
	pthread_cond_broadcast(&gl->cv);
	pthread_mutex_unlock(&gl->mu);
}

int fs_glock_unlock(struct fs_glock *gl, int *fence)
{
	int ret;
	struct lk_lock *lk = fs_glock_unlock_begin(gl, &ret, fence);

	if (lk != NULL) {
		lk_unlock(lk, 0);
		fs_glock_unlock_end(gl);
	}
	return ret;
}

void fs_glock_fence_one(struct fs_glock *gl)
{
	pthread_mutex_lock(&gl->mu);
	gl->fenced = 1;
	pthread_cond_broadcast(&gl->cv);
	pthread_mutex_unlock(&gl->mu);
}

void fs_glock_stop_one(struct fs_glock *gl, uint64_t deadline)
{
	pthread_mutex_lock(&gl->mu);
	gl->stop = 1;
	while (gl->busy) {
		if (fs_glock_now() > deadline && !gl->fenced) {
			gl->fenced = 1; /* the DLM stopped answering */
			pthread_cond_broadcast(&gl->cv);
		}
		gl_wait(gl, fs_glock_now() + GL_NAP_NS);
	}
	pthread_mutex_unlock(&gl->mu);
}

/* ---- init, accessors -------------------------------------------------- */

void fs_glock_init(struct fs_glock *gl, const struct lk_name *name,
		   const struct fs_glock_ops *ops, void *arg)
{
	pthread_mutex_lock(&gl->mu);
	gl->name = *name;
	gl->ops = ops;
	gl->arg = arg;
	gl->lk = NULL;
	gl->mode = -1;
	gl->busy = 0;
	gl->demote_to = -1;
	gl->bast_peer = -1;
	gl->ahead_peer = 0;
	memset(gl->holders, 0, sizeof(gl->holders));
	gl->nholders = 0;
	gl->nwaiters = 0;
	gl->grant_ns = 0;
	gl->minhold_ns = gl->e->base_ns;
	gl->seen = 0;
	gl->gen = 0;
	gl->lost = 0;
	gl->contended = 0;
	gl->refused = 0;
	gl->flush = 0;
	gl->fenced = 0;
	gl->stop = 0;
	gl->comp_done = 0;
	gl->comp_status = 0;
	gl->ahead = 0;
	gl->tracked = 0;
	gl->mark = 0;
	memset(&gl->st, 0, sizeof(gl->st));
	pthread_mutex_unlock(&gl->mu);
}

static unsigned gstat_holders(struct fs_glock *gl)
{
	unsigned n;

	pthread_mutex_lock(&gl->mu);
	n = gl->nholders;
	pthread_mutex_unlock(&gl->mu);
	return n;
}

int fs_glock_held(struct fs_glock *gl, int mode)
{
	int held;

	pthread_mutex_lock(&gl->mu);
	held =
	    gl->mode >= 0 && lk_mode_covers(gl->mode, mode) && gl->nholders > 0;
	pthread_mutex_unlock(&gl->mu);
	return held;
}

void fs_glock_assert_failed(struct fs_glock *gl, int mode, const char *file,
			    int line)
{
	fprintf(stderr,
		"%s:%d: glock %u:%llu not held in %s (mode %d, %u holders)\n",
		file, line, gl->name.type, (unsigned long long)gl->name.num,
		lk_mode_name(mode), fs_glock_mode(gl), gstat_holders(gl));
	abort();
}

uint16_t fs_glock_type(const struct fs_glock *gl)
{
	return gl->name.type;
}

uint64_t fs_glock_num(const struct fs_glock *gl)
{
	return gl->name.num;
}

unsigned fs_glock_waiters(struct fs_glock *gl)
{
	unsigned n;

	pthread_mutex_lock(&gl->mu);
	n = gl->nwaiters;
	pthread_mutex_unlock(&gl->mu);
	return n;
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
	static const int modes[2] = {LK_PR, LK_EX};
	const struct fs_glock_counts *c = &gl->st;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&gl->mu);
	out->acquires = c->acquires;
	out->hits = c->hits;
	out->requests = c->requests;
	out->retries = c->retries;
	out->try_fails = c->try_fails;
	out->waits = c->waits;
	out->demote_pr = c->demote_pr;
	out->demote_nl = c->demote_nl;
	out->demote_ns = c->demote_ns;
	out->wait_ns = c->wait_ns;
	out->max_wait_ns = c->max_wait_ns;
	out->invals = c->invals;
	out->recovers = c->recovers;
	out->drops = c->drops;
	out->syncs = c->syncs;
	out->bounces = c->bounces;
	out->hold_refusals = c->hold_refusals;
	out->minhold_grows = c->minhold_grows;
	out->minhold_shrinks = c->minhold_shrinks;
	out->evict_syncs = c->evict_syncs;
	out->bad_releases = c->bad_releases;
	out->flushes = c->flushes;
	out->aheads = c->aheads;
	out->gen_kept = c->gen_kept;
	out->ahead_requests = c->ahead_requests;
	out->ahead_grants = c->ahead_grants;
	out->ahead_hits = c->ahead_hits;
	out->ahead_unused = c->ahead_unused;
	out->generation = c->generation;
	for (int i = 0; i < 2; i++) {
		out->mode_acquires[modes[i]] = c->mode_acquires[i];
		out->mode_wait_ns[modes[i]] = c->mode_wait_ns[i];
		out->mode_max_ns[modes[i]] = c->mode_max_ns[i];
		out->mode_failed[modes[i]] = c->mode_failed[i];
	}
	out->mode = gl->mode;
	out->holders = gl->nholders;
	out->waiters = gl->nwaiters;
	out->fenced = gl->fenced;
	out->minhold_ms = gl->minhold_ns / 1000000ull;
	pthread_mutex_unlock(&gl->mu);
}
