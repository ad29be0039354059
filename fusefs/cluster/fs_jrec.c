/*
 * fs_jrec.c — the cluster's agreement on checkpoint records (fs_jrec.h
 * explains the lock's modes and why): two plain lock-manager locks on
 * FS_LK_JREC/0, the CW of a node whose flush does not cover all (held
 * for its whole mount), and the PR of a covering node, asked for, given
 * up when another node wants CW and asked for again by its own thread.
 * Not through the glock engine: a glock keeps NL between grants, and a
 * NOQUEUE up-conversion NL -> PR is granted past a CW request waiting in
 * the wait queue (conversions go first), so covering nodes could take
 * turns holding PR while a joiner waits; a new request never passes it.
 *
 * Why a wake on a second lock (FS_LK_JREC/1, fs_jrec.h) rather than a
 * queued request, with lockmgr/lk_grant.c as it is:
 *  - a queued PR request: new requests are granted strictly in order
 *    (lk_grant_now only with empty convert and wait queues; grant_waiters
 *    stops at the first head it cannot grant), so a PR waiting behind a
 *    held CW holds every later CW request back although CW is compatible
 *    with CW: a second non-covering node's mount would wait for the first
 *    one's unmount (and fail past records_timeout=);
 *  - a queued conversion NL -> PR: a pending conversion blocks every new
 *    request too (lk_grant_now), and conversions are granted ahead of
 *    waiting new requests (lk_grant_pending), so when the last CW goes
 *    the PR would pass a CW joiner already waiting (the no-pass rule).
 * The wake lock is never queued on but for an instant (a leaver's EX
 * granted when nobody watches): watchers' PR requests are granted at
 * once, a leaver's EX is NOQUEUE. Its NL request on FS_LK_JREC/0 first
 * orders the wake after its unlock at that lock's master (another master
 * and link than the wake lock's; lk_unlock may leave an idle unlock's
 * record for the network thread's next turn), so a woken node does not
 * ask too early. A dead CW holder wakes nobody, nor does a wake lost in
 * a membership change: the poll every retry_ms stays as the fallback.
 * The PR requests stay new NOQUEUE requests: a waiting joiner is never
 * passed.
 */
#include "fusefs/cluster/fs_jrec.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fusefs/cluster/fs_cluster.h"
#include "lockmgr/cv_wait.h"
#include "lockmgr/lk.h"

struct fs_jrec {
	struct fs_jrec_conf c; /* immutable */
	struct lk_name name;   /* immutable: FS_LK_JREC/0 */
	struct lk_name wname;  /* immutable: FS_LK_JREC/1, the wake */
	struct lk_lock *cw;    /* not covering: the CW hold (join, stop) */
	pthread_t thread;      /* covering: the PR thread */
	int started;	       /* thread started (mount thread) */
	const char *hold_file; /* immutable: UCFS_JREC_HOLD test hook */
	const char *fail_file; /* immutable: UCFS_JREC_FAIL test hook */

	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct lk_lock *pr;	 /* mu: the PR hold (written by the thread,
				    or by start and stop without it) */
	struct lk_lock *watch;	 /* mu: records off: PR on the wake lock
				    (as pr) */
	int wake;		 /* mu: a leaving CW holder woke us */
	int stop;		 /* mu */
	int on;			 /* mu: PR held and records on */
	int bast;		 /* mu: another node wants CW */
	int failed;		 /* mu: the flush failed: PR kept, fenced */
	int joined;		 /* mu: the CW is held */
	int cw_done;		 /* mu: the CW request completed ... */
	int cw_status;		 /* mu: ... with this status */
	struct fs_jrec_stats st; /* mu (mode filled by fs_jrec_stats) */
};

/* The PR's blocking callback (the lock manager's callback thread): the
 * thread gives it up. A late one for a PR given up already only makes
 * the next one go at once (harmless). */
static void jrec_bast(struct lk_lock *lk, int mode, void *arg)
{
	struct fs_jrec *r = arg;

	(void)lk;
	(void)mode;
	pthread_mutex_lock(&r->mu);
	r->bast = 1;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

static const struct lk_lock_ops pr_ops = {.blocking = jrec_bast};

int fs_jrec_new(const struct fs_jrec_conf *conf, struct fs_jrec **out)
{
	struct fs_jrec *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return -ENOMEM;
	r->c = *conf;
	if (r->c.retry_ms == 0)
		r->c.retry_ms = FS_JREC_RETRY_MS;
	lk_name_make(&r->name, FS_LK_JREC, 0, NULL);
	lk_name_make(&r->wname, FS_LK_JREC, 1, NULL);
	r->hold_file = getenv(FS_JREC_ENV_HOLD);
	r->fail_file = getenv(FS_JREC_ENV_FAIL);
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	*out = r;
	return 0;
}

/* The CW request's completion (the callback thread). */
static void jrec_cw_done(struct lk_lock *lk, int status, void *arg)
{
	struct fs_jrec *r = arg;

	(void)lk;
	pthread_mutex_lock(&r->mu);
	r->cw_status = status;
	r->cw_done = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

static const struct lk_lock_ops cw_ops = {.completion = jrec_cw_done};

static void jrec_log_wait(struct fs_jrec *r, uint64_t t0)
{
	uint64_t s = (cvw_now_ns() - t0) / 1000000000ull;

	if (r->c.timeout_s != 0)
		fprintf(stderr,
			"ucfs: node %u: waiting %llu s for the nodes writing "
			"checkpoint records to turn them off and flush "
			"(records_timeout=%u)\n",
			r->c.node, (unsigned long long)s, r->c.timeout_s);
	else
		fprintf(stderr,
			"ucfs: node %u: waiting %llu s for the nodes writing "
			"checkpoint records to turn them off and flush (no "
			"bound: records_timeout=0)\n",
			r->c.node, (unsigned long long)s);
}

/* Cancel the CW request once: its completion comes (-ECANCELED, or the
 * grant if that won the race). Under r->mu, so the completion has not
 * returned yet and the handle is still valid (lk.h "Handles"); the
 * callback takes r->mu only after the library let its locks go. */
static void jrec_cw_cancel(struct fs_jrec *r, uint64_t t0)
{
	fprintf(stderr,
		"ucfs: node %u: the nodes writing checkpoint records did not "
		"turn them off within %llu s (records_timeout=%u): giving "
		"up, nothing written\n",
		r->c.node,
		(unsigned long long)((cvw_now_ns() - t0) / 1000000000ull),
		r->c.timeout_s);
	lk_cancel(r->cw);
}

/* Wait for the queued CW request, logging progress, and cancel it past
 * conf.timeout_s. Its status, -ETIMEDOUT once cancelled. */
static int jrec_cw_wait(struct fs_jrec *r, uint64_t t0)
{
	uint64_t end = r->c.timeout_s != 0 ? t0 + r->c.timeout_s * 1000000000ull
					   : CVW_NEVER;
	uint64_t next = t0 + 1000000000ull; /* first progress line */
	int cancelled = 0, ret;

	pthread_mutex_lock(&r->mu);
	while (!r->cw_done) {
		uint64_t now = cvw_now_ns();

		if (!cancelled && now >= end) {
			jrec_cw_cancel(r, t0);
			cancelled = 1;
		} else if (!cancelled && now >= next) {
			jrec_log_wait(r, t0);
			next = now + FS_JREC_LOG_MS * 1000000ull;
		} else {
			cvw_wait_until(&r->cv, &r->mu,
				       cancelled    ? CVW_NEVER
				       : next < end ? next
						    : end);
		}
	}
	ret = r->cw_status;
	pthread_mutex_unlock(&r->mu);
	return cancelled && ret == -ECANCELED ? -ETIMEDOUT : ret;
}

int fs_jrec_join(struct fs_jrec *r)
{
	uint64_t t0 = cvw_now_ns();
	int ret;

	if (r->c.covers)
		return 0;
	pthread_mutex_lock(&r->mu);
	r->cw_done = 0; /* a new request (after one that timed out) */
	pthread_mutex_unlock(&r->mu);
	ret = lk_lock(r->c.ls, &r->name, LK_CW, 0, &cw_ops, r, &r->cw);
	if (ret == 0)
		ret = jrec_cw_wait(r, t0); /* every PR holder gave it up */
	if (ret < 0) {
		r->cw = NULL; /* a failed request releases its handle */
		return ret;
	}
	pthread_mutex_lock(&r->mu);
	r->joined = 1;
	r->st.join_ms = (cvw_now_ns() - t0) / 1000000ull;
	pthread_mutex_unlock(&r->mu);
	return 0;
}

/* The wake lock's blocking callback: a node that held CW left (its
 * NOQUEUEBAST EX request there): the thread asks again. */
static void jrec_woken(struct lk_lock *lk, int mode, void *arg)
{
	struct fs_jrec *r = arg;

	(void)lk;
	(void)mode;
	pthread_mutex_lock(&r->mu);
	r->wake = 1;
	r->st.wakes++;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

static const struct lk_lock_ops watch_ops = {.blocking = jrec_woken};

/* Records off: hold FS_LK_JREC/1 in PR with a fresh handle (a handle
 * gets one blocking callback per mode), taken before each try: a CW
 * holder that leaves after it was granted wakes us, and one that left
 * before was already gone for the try (fs_jrec.h). On failure the poll
 * is left. */
static void jrec_watch(struct fs_jrec *r)
{
	struct lk_lock *lk = NULL, *old;
	int ret = lk_lock(r->c.ls, &r->wname, LK_PR, 0, &watch_ops, r, &lk);

	if (ret == 0)
		ret = lk_wait(lk); /* a leaver's EX lasts an instant */
	pthread_mutex_lock(&r->mu);
	old = r->watch;
	r->watch = ret >= 0 ? lk : NULL;
	r->wake = 0;
	pthread_mutex_unlock(&r->mu);
	if (old != NULL)
		lk_unlock(old, 0);
}

static void jrec_unwatch(struct fs_jrec *r)
{
	struct lk_lock *lk;

	pthread_mutex_lock(&r->mu);
	lk = r->watch;
	r->watch = NULL;
	r->wake = 0;
	pthread_mutex_unlock(&r->mu);
	if (lk != NULL)
		lk_unlock(lk, 0);
}

/* A new request on @name in @mode with NOQUEUE (| @flags), let go at
 * once if granted: its answer comes after the master handled every
 * earlier request of ours on it. */
static void jrec_touch(struct fs_jrec *r, const struct lk_name *name, int mode,
		       unsigned flags)
{
	struct lk_lock *lk = NULL;
	int ret =
	    lk_lock(r->c.ls, name, mode, LK_NOQUEUE | flags, NULL, NULL, &lk);

	if (ret == 0)
		ret = lk_wait(lk); /* a refusal releases the handle */
	if (ret >= 0)
		lk_unlock(lk, 0);
}

/* A CW holder leaves (clean): its unlock handled by the master first
 * (an NL request's answer), then a blocking callback to every covering
 * node watching FS_LK_JREC/1 (EX, NOQUEUE: refused at once). */
static void jrec_wake_others(struct fs_jrec *r)
{
	jrec_touch(r, &r->name, LK_NL, 0);
	jrec_touch(r, &r->wname, LK_EX, LK_NOQUEUEBAST);
}

/* Ask PR as a new request with NOQUEUE: refused while a CW is held or
 * waiting (a new request never passes the wait queue). Granted:
 * records on. */
static void jrec_try(struct fs_jrec *r)
{
	struct lk_lock *lk = NULL;
	int ret;

	pthread_mutex_lock(&r->mu);
	r->bast = 0;
	pthread_mutex_unlock(&r->mu);
	ret = lk_lock(r->c.ls, &r->name, LK_PR, LK_NOQUEUE, &pr_ops, r, &lk);
	if (ret == 0)
		ret = lk_wait(lk); /* a refusal releases the handle */
	pthread_mutex_lock(&r->mu);
	r->st.tries++;
	r->st.refused += ret == -EAGAIN;
	if (ret >= 0)
		r->pr = lk;
	pthread_mutex_unlock(&r->mu);
	if (ret < 0)
		return;
	ret = r->c.set(r->c.arg, 1);
	pthread_mutex_lock(&r->mu);
	r->on = ret == 0;
	pthread_mutex_unlock(&r->mu);
}

/* Records off: watch, then ask (jrec_try); on: no more watching. */
static void jrec_watch_try(struct fs_jrec *r)
{
	int on;

	jrec_watch(r);
	jrec_try(r);
	pthread_mutex_lock(&r->mu);
	on = r->pr != NULL;
	pthread_mutex_unlock(&r->mu);
	if (on)
		jrec_unwatch(r);
}

static int jrec_stopping(struct fs_jrec *r)
{
	int stop;

	pthread_mutex_lock(&r->mu);
	stop = r->stop;
	pthread_mutex_unlock(&r->mu);
	return stop;
}

/* The test hooks (fs_jrec.h) on the records-off flush's result. */
static int jrec_hooks(struct fs_jrec *r, int ret)
{
	while (r->hold_file != NULL && access(r->hold_file, F_OK) == 0 &&
	       !jrec_stopping(r))
		usleep(10000);
	if (r->fail_file != NULL && access(r->fail_file, F_OK) == 0)
		return -EIO;
	return ret;
}

/* Another node wants CW: no record from now on and every one written
 * before durable (the flush), then the PR goes. A failed flush keeps
 * it (fenced: the cluster recovers this node first). */
static void jrec_give_up(struct fs_jrec *r)
{
	int ret = jrec_hooks(r, r->c.set(r->c.arg, 0));
	struct lk_lock *lk;

	pthread_mutex_lock(&r->mu);
	r->on = 0;
	r->st.offs++;
	r->failed = ret < 0;
	lk = ret < 0 ? NULL : r->pr;
	if (lk != NULL)
		r->pr = NULL;
	pthread_mutex_unlock(&r->mu);
	if (ret < 0)
		r->c.fail(r->c.arg, "cannot flush the checkpoint records "
				    "before another node relies on them");
	else
		lk_unlock(lk, 0);
}

/* Holding PR: give it up when asked. Not: ask again when woken (a CW
 * holder left), right after giving it up, and every retry_ms. */
static void *jrec_thread(void *arg)
{
	struct fs_jrec *r = arg;
	uint64_t deadline = cvw_deadline_ms(r->c.retry_ms);

	pthread_mutex_lock(&r->mu);
	while (!r->stop) {
		if (r->pr != NULL && r->bast && !r->failed) {
			pthread_mutex_unlock(&r->mu);
			jrec_give_up(r);
			pthread_mutex_lock(&r->mu);
			deadline = 0; /* watch at once */
			continue;
		}
		if (r->pr != NULL || r->failed) {
			pthread_cond_wait(&r->cv, &r->mu);
			continue;
		}
		if (!r->wake && cvw_now_ns() < deadline) {
			cvw_wait_until(&r->cv, &r->mu, deadline);
			continue;
		}
		pthread_mutex_unlock(&r->mu);
		jrec_watch_try(r);
		pthread_mutex_lock(&r->mu);
		deadline = cvw_deadline_ms(r->c.retry_ms);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

int fs_jrec_start(struct fs_jrec *r)
{
	int ret;

	if (!r->c.covers || r->started)
		return 0;
	jrec_watch_try(r);
	ret = -pthread_create(&r->thread, NULL, jrec_thread, r);
	r->started = ret == 0;
	return ret;
}

void fs_jrec_stop(struct fs_jrec *r, int clean)
{
	if (r == NULL)
		return;
	pthread_mutex_lock(&r->mu);
	r->stop = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	if (r->started)
		pthread_join(r->thread, NULL);
	r->started = 0;
	if (r->pr != NULL && clean)
		lk_unlock(r->pr, 0);
	if (r->watch != NULL && clean)
		lk_unlock(r->watch, 0);
	if (r->cw != NULL && clean) {
		lk_unlock(r->cw, 0);
		jrec_wake_others(r);
	}
	r->pr = NULL;
	r->watch = NULL;
	r->cw = NULL;
	r->on = 0;
}

void fs_jrec_free(struct fs_jrec *r)
{
	if (r == NULL)
		return;
	fs_jrec_stop(r, 0);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

void fs_jrec_stats(struct fs_jrec *r, struct fs_jrec_stats *out)
{
	pthread_mutex_lock(&r->mu);
	*out = r->st;
	out->mode = r->joined	 ? "cw"
		    : r->on	 ? "on"
		    : r->started ? "off"
				 : "none";
	pthread_mutex_unlock(&r->mu);
}
