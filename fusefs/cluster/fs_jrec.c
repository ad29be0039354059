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
 */
#include "fusefs/cluster/fs_jrec.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "fusefs/cluster/fs_cluster.h"
#include "lockmgr/cv_wait.h"
#include "lockmgr/lk.h"

struct fs_jrec {
	struct fs_jrec_conf c; /* immutable */
	struct lk_name name;   /* immutable: FS_LK_JREC/0 */
	struct lk_lock *cw;    /* not covering: the CW hold (join, stop) */
	pthread_t thread;      /* covering: the PR thread */
	int started;	       /* thread started (mount thread) */

	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct lk_lock *pr;	 /* mu: the PR hold (written by the thread,
				    or by start and stop without it) */
	int stop;		 /* mu */
	int on;			 /* mu: PR held and records on */
	int bast;		 /* mu: another node wants CW */
	int failed;		 /* mu: the flush failed: PR kept, fenced */
	int joined;		 /* mu: the CW is held */
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
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	*out = r;
	return 0;
}

int fs_jrec_join(struct fs_jrec *r)
{
	int ret;

	if (r->c.covers)
		return 0;
	ret = lk_lock(r->c.ls, &r->name, LK_CW, 0, NULL, NULL, &r->cw);
	if (ret == 0)
		ret = lk_wait(r->cw); /* every PR holder gave it up */
	if (ret < 0) {
		r->cw = NULL; /* a failed request releases its handle */
		return ret;
	}
	pthread_mutex_lock(&r->mu);
	r->joined = 1;
	pthread_mutex_unlock(&r->mu);
	return 0;
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

/* Another node wants CW: no record from now on and every one written
 * before durable (the flush), then the PR goes. A failed flush keeps
 * it (fenced: the cluster recovers this node first). */
static void jrec_give_up(struct fs_jrec *r)
{
	int ret = r->c.set(r->c.arg, 0);
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

/* Holding PR: give it up when asked. Not: ask again every retry_ms. */
static void *jrec_thread(void *arg)
{
	struct fs_jrec *r = arg;
	uint64_t deadline;

	pthread_mutex_lock(&r->mu);
	while (!r->stop) {
		if (r->pr != NULL && r->bast && !r->failed) {
			pthread_mutex_unlock(&r->mu);
			jrec_give_up(r);
			pthread_mutex_lock(&r->mu);
			continue;
		}
		if (r->pr != NULL || r->failed) {
			pthread_cond_wait(&r->cv, &r->mu);
			continue;
		}
		deadline = cvw_deadline_ms(r->c.retry_ms);
		while (!r->stop &&
		       cvw_wait_until(&r->cv, &r->mu, deadline) == 0)
			;
		if (r->stop)
			break;
		pthread_mutex_unlock(&r->mu);
		jrec_try(r);
		pthread_mutex_lock(&r->mu);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

int fs_jrec_start(struct fs_jrec *r)
{
	int ret;

	if (!r->c.covers || r->started)
		return 0;
	jrec_try(r);
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
	if (r->cw != NULL && clean)
		lk_unlock(r->cw, 0);
	r->pr = NULL;
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
