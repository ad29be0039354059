/*
 * fs_jrec.c — the cluster's agreement on checkpoint records (fs_jrec.h
 * explains the lock's modes and why): the PR side through the glock
 * engine (its drop op turns the records off), the CW side as a plain
 * lock-manager lock held for the whole mount, and the retry thread.
 */
#include "fusefs/cluster/fs_jrec.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "fusefs/cluster/fs_cluster.h"
#include "fusefs/cluster/fs_glock.h"
#include "lockmgr/cv_wait.h"
#include "lockmgr/lk.h"

struct fs_jrec {
	struct fs_jrec_conf c; /* immutable */
	struct fs_glock *gl;   /* covering: FS_LK_JREC/0 (a reference
				  until fs_jrec_stop) */
	struct lk_lock *cw;    /* not covering: the CW hold (join, stop) */
	pthread_t thread;      /* covering: the retry thread */
	int started;	       /* thread started (mount thread) */

	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;		 /* mu */
	int on;			 /* mu: PR held and records on */
	int joined;		 /* mu: the CW is held */
	struct fs_jrec_stats st; /* mu (mode filled by fs_jrec_stats) */
};

/* The PR goes (another node wants CW, or unmount): no record from now
 * on, every one written before durable, then the lock may go. */
static void jrec_drop(struct fs_glock *gl, int from, void *arg)
{
	struct fs_jrec *r = arg;
	int on;

	(void)gl;
	(void)from;
	pthread_mutex_lock(&r->mu);
	on = r->on;
	r->on = 0;
	r->st.offs += on;
	pthread_cond_signal(&r->cv); /* the retry timer starts now */
	pthread_mutex_unlock(&r->mu);
	if (on && r->c.set(r->c.arg, 0) < 0)
		r->c.fail(r->c.arg, "cannot flush the checkpoint records "
				    "before another node relies on them");
}

static const struct fs_glock_ops jrec_ops = {
    .drop = jrec_drop,
};

int fs_jrec_new(const struct fs_jrec_conf *conf, struct fs_jrec **out)
{
	struct fs_jrec *r = calloc(1, sizeof(*r));
	int ret = 0;

	if (r == NULL)
		return -ENOMEM;
	r->c = *conf;
	if (r->c.retry_ms == 0)
		r->c.retry_ms = FS_JREC_RETRY_MS;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	if (r->c.covers) {
		fs_glocks_set_ops(r->c.e, FS_LK_JREC, &jrec_ops, r);
		ret = fs_glock_get(r->c.e, FS_LK_JREC, 0, &r->gl);
	}
	if (ret < 0) {
		fs_jrec_free(r);
		return ret;
	}
	*out = r;
	return 0;
}

int fs_jrec_join(struct fs_jrec *r)
{
	struct lk_name n;
	int ret;

	if (r->c.covers)
		return 0;
	lk_name_make(&n, FS_LK_JREC, 0, NULL);
	ret = lk_lock(r->c.ls, &n, LK_CW, 0, NULL, NULL, &r->cw);
	if (ret == 0)
		ret = lk_wait(r->cw); /* every PR holder's drop ran */
	if (ret < 0) {
		r->cw = NULL; /* a failed request releases its handle */
		return ret;
	}
	pthread_mutex_lock(&r->mu);
	r->joined = 1;
	pthread_mutex_unlock(&r->mu);
	return 0;
}

/* Ask PR without queueing; granted: records on, then the hold goes
 * (the glock keeps PR cached; a demote cannot run before the release,
 * so it always finds them on). */
static void jrec_try(struct fs_jrec *r)
{
	int ret = fs_glock_try(r->gl, LK_PR);

	pthread_mutex_lock(&r->mu);
	r->st.tries++;
	r->st.refused += ret == -EAGAIN;
	pthread_mutex_unlock(&r->mu);
	if (ret < 0)
		return;
	ret = r->c.set(r->c.arg, 1);
	pthread_mutex_lock(&r->mu);
	r->on = ret == 0;
	pthread_mutex_unlock(&r->mu);
	fs_glock_release(r->gl, LK_PR);
}

/* Records off: ask again every retry_ms (on: sleep until a drop). */
static void *jrec_thread(void *arg)
{
	struct fs_jrec *r = arg;
	uint64_t deadline;

	pthread_mutex_lock(&r->mu);
	while (!r->stop) {
		if (r->on) {
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
	fs_glock_put(r->gl);
	r->gl = NULL;
	if (r->cw != NULL && clean)
		lk_unlock(r->cw, 0);
	r->cw = NULL;
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
