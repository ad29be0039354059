/*
 * test_cvwait.c — lockmgr/cv_wait.h, the one "wait on a condition
 * variable until a deadline" of the tree: a wait with nobody to wake it
 * ends with -ETIMEDOUT no earlier than its deadline (on a condition
 * variable initialized with no attribute, i.e. the realtime clock, and
 * on one initialized for CLOCK_MONOTONIC); a deadline already passed
 * returns at once; a waiter woken before its deadline gets 0 (a far
 * deadline, and CVW_NEVER); deadlines that do not fit saturate to
 * CVW_NEVER. Only lower bounds on elapsed time are checked (a wait can
 * end late on a busy machine, never early).
 *
 * And lockmgr/cv_worker.h, the one start/stop of a worker thread: the
 * stop wakes a worker asleep with no deadline and joins it; a stop right
 * after the start, before the worker first looked at its flag, is not
 * lost; a second start or stop does nothing; a stopped worker starts
 * again. A lost wake-up hangs the test (run.sh's timeout fails it).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include "lockmgr/cv_wait.h"
#include "lockmgr/cv_worker.h"
#include "harness.h"

struct waker {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int flag; /* mu */
};

static void *wake(void *arg)
{
	struct waker *w = arg;
	struct timespec ts = {0, 20 * 1000 * 1000};

	nanosleep(&ts, NULL);
	pthread_mutex_lock(&w->mu);
	w->flag = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static void times_out(pthread_cond_t *cv)
{
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	uint64_t t0 = cvw_now_ns();
	int ret;

	pthread_mutex_lock(&mu);
	while ((ret = cvw_wait_ms(cv, &mu, 30)) == 0)
		; /* spurious: the next wait starts a new 30 ms */
	pthread_mutex_unlock(&mu);
	CHECK_EQ(ret, -ETIMEDOUT);
	CHECK(cvw_now_ns() - t0 >= 30ull * 1000000ull);
}

static void test_timeout_default_cond(void)
{
	pthread_cond_t cv;

	pthread_cond_init(&cv, NULL);
	times_out(&cv);
	pthread_cond_destroy(&cv);
}

static void test_timeout_monotonic_cond(void)
{
	pthread_condattr_t ca;
	pthread_cond_t cv;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cv, &ca);
	pthread_condattr_destroy(&ca);
	times_out(&cv);
	pthread_cond_destroy(&cv);
}

static void test_deadline_passed(void)
{
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

	pthread_mutex_lock(&mu);
	CHECK_EQ(cvw_wait_until(&cv, &mu, 0), -ETIMEDOUT);
	CHECK_EQ(cvw_wait_until(&cv, &mu, cvw_now_ns()), -ETIMEDOUT);
	CHECK_EQ(cvw_wait_ms(&cv, &mu, 0), -ETIMEDOUT);
	pthread_mutex_unlock(&mu);
}

/* A waiter woken by another thread before @deadline (cvw_deadline_ms of
 * @ms, or CVW_NEVER) sees the flag and a 0 from its last wait. */
static void woken(uint64_t ms)
{
	struct waker w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
			  0};
	uint64_t end = ms == CVW_NEVER ? CVW_NEVER : cvw_deadline_ms(ms);
	pthread_t th;
	int ret = 0;

	REQUIRE(pthread_create(&th, NULL, wake, &w) == 0);
	pthread_mutex_lock(&w.mu);
	while (!w.flag && ret == 0)
		ret = cvw_wait_until(&w.cv, &w.mu, end);
	CHECK_EQ(w.flag, 1);
	CHECK_EQ(ret, 0);
	pthread_mutex_unlock(&w.mu);
	pthread_join(th, NULL);
}

static void test_woken_before_deadline(void)
{
	woken(600000); /* 10 minutes: the waker comes long before */
}

static void test_woken_never(void)
{
	woken(CVW_NEVER);
}

static void test_deadline_saturates(void)
{
	uint64_t now = cvw_now_ns();

	CHECK_EQ(cvw_deadline_ms(UINT64_MAX), CVW_NEVER);
	CHECK_EQ(cvw_deadline_ms(UINT64_MAX / 1000), CVW_NEVER);
	CHECK(cvw_deadline_ms(0) >= now);
	CHECK(cvw_deadline_ms(1000) >= now + 1000000000ull);
	CHECK(cvw_deadline_ms(1000) != CVW_NEVER);
	CHECK(cvw_now_ms() >= now / 1000000ull);
}

struct owner {
	pthread_mutex_t mu;
	pthread_cond_t cv;   /* the worker's, with mu */
	pthread_cond_t seen; /* the test's, with mu */
	struct cvw_worker w;
	unsigned runs, sleeps; /* mu: worker starts, sleeps begun */
	unsigned left;	       /* mu: worker loops ended */
};

static void *sleeper(void *arg)
{
	struct owner *o = arg;

	pthread_mutex_lock(&o->mu);
	o->runs++;
	while (!cvw_worker_stopping(&o->w)) {
		o->sleeps++;
		pthread_cond_broadcast(&o->seen);
		cvw_wait_until(&o->cv, &o->mu, CVW_NEVER);
	}
	o->left++;
	pthread_mutex_unlock(&o->mu);
	return NULL;
}

static void owner_init(struct owner *o)
{
	*o = (struct owner){.runs = 0};
	pthread_mutex_init(&o->mu, NULL);
	pthread_cond_init(&o->cv, NULL);
	pthread_cond_init(&o->seen, NULL);
}

static void owner_destroy(struct owner *o)
{
	pthread_cond_destroy(&o->seen);
	pthread_cond_destroy(&o->cv);
	pthread_mutex_destroy(&o->mu);
}

/* until the worker has begun @n sleeps in all */
static void wait_sleeps(struct owner *o, unsigned n)
{
	pthread_mutex_lock(&o->mu);
	while (o->sleeps < n)
		pthread_cond_wait(&o->seen, &o->mu);
	pthread_mutex_unlock(&o->mu);
}

static void test_worker_stop_wakes(void)
{
	struct owner o;

	owner_init(&o);
	REQUIRE(cvw_worker_start(&o.w, &o.mu, &o.cv, sleeper, &o, "t-cvw") ==
		0);
	wait_sleeps(&o, 1);
	pthread_mutex_lock(&o.mu); /* a wake-up for nothing: it sleeps on */
	pthread_cond_signal(&o.cv);
	pthread_mutex_unlock(&o.mu);
	wait_sleeps(&o, 2);
	cvw_worker_stop(&o.w);
	CHECK_EQ(o.left, 1);
	CHECK_EQ(o.w.running, 0);
	owner_destroy(&o);
}

static void test_worker_stop_at_once(void)
{
	struct owner o;

	owner_init(&o);
	for (int i = 0; i < 200; i++) {
		REQUIRE(cvw_worker_start(&o.w, &o.mu, &o.cv, sleeper, &o,
					 NULL) == 0);
		cvw_worker_stop(&o.w);
	}
	CHECK_EQ(o.runs, 200);
	CHECK_EQ(o.left, 200);
	owner_destroy(&o);
}

static void test_worker_twice(void)
{
	struct owner o;

	owner_init(&o);
	cvw_worker_stop(&o.w); /* never started */
	REQUIRE(cvw_worker_start(&o.w, &o.mu, &o.cv, sleeper, &o, NULL) == 0);
	CHECK_EQ(cvw_worker_start(&o.w, &o.mu, &o.cv, sleeper, &o, NULL), 0);
	wait_sleeps(&o, 1);
	cvw_worker_stop(&o.w);
	cvw_worker_stop(&o.w);
	CHECK_EQ(o.runs, 1);
	REQUIRE(cvw_worker_start(&o.w, &o.mu, &o.cv, sleeper, &o, NULL) == 0);
	wait_sleeps(&o, 2);
	cvw_worker_stop(&o.w);
	CHECK_EQ(o.runs, 2);
	CHECK_EQ(o.left, 2);
	owner_destroy(&o);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_timeout_default_cond);
	T_RUN(test_timeout_monotonic_cond);
	T_RUN(test_deadline_passed);
	T_RUN(test_woken_before_deadline);
	T_RUN(test_woken_never);
	T_RUN(test_deadline_saturates);
	T_RUN(test_worker_stop_wakes);
	T_RUN(test_worker_stop_at_once);
	T_RUN(test_worker_twice);
	return t_done();
}
