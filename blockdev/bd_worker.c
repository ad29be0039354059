/*
 * bd_worker.c — asynchronous batches for backends that only have
 * synchronous I/O (ram, fault): a FIFO of jobs run by one thread per
 * device through the backend's synchronous submit, then its callback.
 *
 * The thread is started by the first submit (most ram devices in tests
 * never do async I/O). A callback may queue more jobs (the queue never
 * blocks), but must not wait for them: they run after it returns.
 * bd_worker_fini() waits until the queue is empty and nothing runs.
 */
#include <errno.h>
#include <stdlib.h>

#include "blockdev/bd_internal.h"

struct bd_worker_job {
	struct bd_worker_job *next;
	struct bd_io *ios;
	unsigned n;
	bd_done_fn done;
	void *arg;
};

int bd_worker_init(struct bd_worker *wk, struct bd_dev *dev,
		   bd_sync_submit_fn submit)
{
	int ret;

	ret = -pthread_mutex_init(&wk->lock, NULL);
	if (ret != 0)
		return ret;
	ret = -pthread_cond_init(&wk->cond, NULL);
	if (ret != 0) {
		pthread_mutex_destroy(&wk->lock);
		return ret;
	}
	wk->head = NULL;
	wk->tail = NULL;
	wk->busy = 0;
	wk->started = 0;
	wk->stop = 0;
	wk->dev = dev;
	wk->submit = submit;
	return 0;
}

static void *worker_main(void *arg)
{
	struct bd_worker *wk = arg;
	struct bd_worker_job *job;

	pthread_mutex_lock(&wk->lock);
	for (;;) {
		while (wk->head == NULL && !wk->stop)
			pthread_cond_wait(&wk->cond, &wk->lock);
		if (wk->head == NULL)
			break;
		job = wk->head;
		wk->head = job->next;
		if (wk->head == NULL)
			wk->tail = NULL;
		pthread_mutex_unlock(&wk->lock);

		wk->submit(wk->dev, job->ios, job->n);
		job->done(job->ios, job->n, job->arg);
		free(job);

		pthread_mutex_lock(&wk->lock);
		if (--wk->busy == 0)
			pthread_cond_broadcast(&wk->cond);
	}
	pthread_mutex_unlock(&wk->lock);
	return NULL;
}

int bd_worker_submit(struct bd_worker *wk, struct bd_io *ios, unsigned n,
		     bd_done_fn done, void *arg)
{
	struct bd_worker_job *job;
	int ret = 0;

	job = malloc(sizeof(*job));
	if (job == NULL)
		return -ENOMEM;
	job->next = NULL;
	job->ios = ios;
	job->n = n;
	job->done = done;
	job->arg = arg;

	pthread_mutex_lock(&wk->lock);
	if (!wk->started) {
		ret = -pthread_create(&wk->thread, NULL, worker_main, wk);
		if (ret != 0)
			goto out_unlock;
		wk->started = 1;
	}
	if (wk->tail != NULL)
		wk->tail->next = job;
	else
		wk->head = job;
	wk->tail = job;
	wk->busy++;
	pthread_cond_broadcast(&wk->cond);
out_unlock:
	pthread_mutex_unlock(&wk->lock);
	if (ret != 0)
		free(job);
	return ret;
}

void bd_worker_fini(struct bd_worker *wk)
{
	pthread_mutex_lock(&wk->lock);
	while (wk->busy != 0)
		pthread_cond_wait(&wk->cond, &wk->lock);
	wk->stop = 1;
	pthread_cond_broadcast(&wk->cond);
	pthread_mutex_unlock(&wk->lock);
	if (wk->started)
		pthread_join(wk->thread, NULL);
	pthread_cond_destroy(&wk->cond);
	pthread_mutex_destroy(&wk->lock);
}
