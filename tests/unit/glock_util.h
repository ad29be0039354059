/*
 * glock_util.h — what the glock engine's test and bench (test_glock,
 * tests/progs/glock_bench) both do to a glock.
 *
 *	T_INODE			the lock type they use (FS_LK_INODE's number)
 *	touch(e, num, mode)	get + acquire + release + put: the mode stays
 *				cached on the (then idle) glock; 0 or the
 *				error of get or acquire
 *	WAIT_FOR(cond)		poll (10 ms naps, at most ~20 s) until @cond
 *				holds: no timing is asserted, another thread
 *				only has to get there
 */
#ifndef UCFS_TEST_GLOCK_UTIL_H
#define UCFS_TEST_GLOCK_UTIL_H

#include <stdint.h>
#include <time.h>

#include "fusefs/cluster/fs_glock.h"

#define T_INODE 3

static inline int touch(struct fs_glocks *e, uint64_t num, int mode)
{
	struct fs_glock *gl;
	int ret = fs_glock_get(e, T_INODE, num, &gl);

	if (ret < 0)
		return ret;
	ret = fs_glock_acquire(gl, mode);
	if (ret == 0)
		fs_glock_release(gl, mode);
	fs_glock_put(gl);
	return ret;
}

#define WAIT_FOR(cond)                                                         \
	do {                                                                   \
		for (int w_ = 0; w_ < 2000 && !(cond); w_++) {                 \
			struct timespec ts_ = {0, 10000000};                   \
			nanosleep(&ts_, NULL);                                 \
		}                                                              \
	} while (0)

#endif /* UCFS_TEST_GLOCK_UTIL_H */
