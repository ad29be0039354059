/*
 * cv_wait.h — wait on a condition variable until a deadline, one way for
 * the whole tree (the lock manager, the filesystem and their tests).
 *
 * One clock: CLOCK_MONOTONIC, so that a wall-clock step (NTP, date -s)
 * neither ends a wait early nor stretches it. One unit: a deadline is
 * nanoseconds of that clock (cvw_now_ns() + a delay), CVW_NEVER for none;
 * cvw_wait_ms() is the "at most this long" form.
 *
 * The wait is pthread_cond_clockwait (glibc 2.30+), which names its clock
 * per call: it works on any condition variable, however it was
 * initialized (PTHREAD_COND_INITIALIZER, a NULL attribute, or a
 * CLOCK_MONOTONIC condattr), so no initializer has to change with it.
 *
 * Both waits may return early (a signal, a spurious wake-up): callers
 * loop on their predicate, as with any condition variable, and use the
 * result only to stop: 0 when woken before the deadline, -ETIMEDOUT once
 * it has passed (also when it had passed on entry, without sleeping).
 * The caller holds @mu, as pthread_cond_wait requires.
 */
#ifndef UCFS_CV_WAIT_H
#define UCFS_CV_WAIT_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define CVW_NEVER UINT64_MAX /* a deadline that never comes */

/* Now on CLOCK_MONOTONIC, in ns (and ms). */
static inline uint64_t cvw_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t cvw_now_ms(void)
{
	return cvw_now_ns() / 1000000ull;
}

/* The deadline @ms from now (CVW_NEVER if that does not fit). */
static inline uint64_t cvw_deadline_ms(uint64_t ms)
{
	uint64_t now = cvw_now_ns();

	if (ms > (CVW_NEVER - now) / 1000000ull)
		return CVW_NEVER;
	return now + ms * 1000000ull;
}

/* Sleep on @cv (@mu held) until woken or @deadline_ns (cvw_now_ns()
 * clock; CVW_NEVER: until woken). 0 or -ETIMEDOUT. */
static inline int cvw_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu,
				 uint64_t deadline_ns)
{
	struct timespec ts;

	if (deadline_ns == CVW_NEVER)
		return -pthread_cond_wait(cv, mu);
	if (cvw_now_ns() >= deadline_ns)
		return -ETIMEDOUT;
	ts.tv_sec = (time_t)(deadline_ns / 1000000000ull);
	ts.tv_nsec = (long)(deadline_ns % 1000000000ull);
	return -pthread_cond_clockwait(cv, mu, CLOCK_MONOTONIC, &ts);
}

/* Sleep on @cv (@mu held) until woken or for @ms at most. 0 or
 * -ETIMEDOUT. */
static inline int cvw_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu,
			      uint64_t ms)
{
	return cvw_wait_until(cv, mu, cvw_deadline_ms(ms));
}

#endif
