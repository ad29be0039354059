/*
 * cv_worker.h — a background thread that sleeps on its owner's condition
 * variable and is stopped by its owner: the start/stop shape of the
 * tree's worker threads (the journal's commits, the statfs fold, the
 * free log, the inode prune, the disk heartbeat, the lock manager's
 * callbacks), written once.
 *
 * The owner keeps the lock @mu and the condition variable @cv (others
 * may signal @cv for new work, before the start and after the stop as
 * well); the worker runs its loop under @mu and sleeps with cv_wait.h:
 *
 *	pthread_mutex_lock(mu);
 *	while (!cvw_worker_stopping(w)) {
 *		if (nothing is due) {
 *			cvw_wait_until(cv, mu, next_deadline_or_CVW_NEVER);
 *			continue;
 *		}
 *		pthread_mutex_unlock(mu);
 *		... the work ...
 *		pthread_mutex_lock(mu);
 *	}
 *	pthread_mutex_unlock(mu);
 *
 * No lost wake-up: cvw_worker_stop() sets the stop flag under @mu and
 * then broadcasts @cv, and the worker tests the flag and goes to sleep
 * without letting go of @mu in between, so it either sees the flag or is
 * asleep when the broadcast comes. Then the stop joins the thread.
 *
 * Locking: start and stop are called by one owner thread (a mount, a
 * lockspace open and close), never both at once; stop takes @mu, so it
 * is called without it. w->stop is read and written under @mu.
 */
#ifndef UCFS_CV_WORKER_H
#define UCFS_CV_WORKER_H

#include <pthread.h>

struct cvw_worker {
	pthread_mutex_t *mu; /* the owner's: immutable while running */
	pthread_cond_t *cv;  /* the owner's, waited on with *mu: ditto */
	pthread_t thr;	     /* immutable while running */
	int running;	     /* the owner thread's: thr was started */
	int stop;	     /* *mu: the worker is to leave its loop */
};

/*
 * Start @fn(@arg) as @w's thread, named @name (at most 15 characters,
 * for top and perf; NULL: unnamed). Nothing if it already runs.
 * 0 or -errno of pthread_create (-EAGAIN: no thread; @w not running).
 */
static inline int cvw_worker_start(struct cvw_worker *w, pthread_mutex_t *mu,
				   pthread_cond_t *cv, void *(*fn)(void *),
				   void *arg, const char *name)
{
	int ret;

	if (w->running)
		return 0;
	w->mu = mu;
	w->cv = cv;
	w->stop = 0; /* no thread reads it yet */
	ret = pthread_create(&w->thr, NULL, fn, arg);
	if (ret != 0)
		return -ret;
	if (name != NULL)
		pthread_setname_np(w->thr, name);
	w->running = 1;
	return 0;
}

/* Has the owner asked the worker to stop? Call with *mu held. */
static inline int cvw_worker_stopping(const struct cvw_worker *w)
{
	return w->stop;
}

/*
 * Ask the worker to stop, wake it and wait for it to end. Nothing if it
 * does not run. Call without *mu; may block for as long as the worker's
 * current piece of work takes.
 */
static inline void cvw_worker_stop(struct cvw_worker *w)
{
	if (!w->running)
		return;
	pthread_mutex_lock(w->mu);
	w->stop = 1;
	pthread_cond_broadcast(w->cv);
	pthread_mutex_unlock(w->mu);
	pthread_join(w->thr, NULL);
	w->running = 0;
}

#endif
