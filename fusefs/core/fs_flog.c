/*
 * fs_flog.c — the free log (OCFS2's truncate log; FORMAT.md "Free log"):
 * cluster (dlm) frees into resource groups another node holds.
 *
 * A free into a group this node cannot get without waiting (fs_alloc.c
 * free_common) is logged instead: an entry {start, len, inode} in this
 * slot's slotinfo block, journaled in the freeing transaction. The log
 * is applied later by fs_alloc_flog_apply() (end of writing operations
 * when due, unmount) in transactions of its own under each group's
 * glock. The log never outgrows slotinfo (FS_FLOG_MAX entries, adjacent
 * extents merged): between the transactions of a long free (a file's
 * extents, a few per transaction: fs_file_unmap) and at the end of
 * writing operations, fs_alloc_flog_room() applies it, no handle held,
 * once fewer than FLOG_ROOM entries are left (OCFS2 flushes its
 * truncate log the same way). Should a transaction still find it full,
 * the entry is kept in memory only (counted: flog_overflows; a crash
 * then leaks those blocks until fsck).
 *
 * A dead node's log: a crash leaves the log on disk. The node that
 * recovers the dead slot (fs_iopen.c's recovery worker, after a
 * node-down recovery replayed its journal, or after a mount found the
 * slot free with something left in it: the first mount after a
 * whole-cluster crash) applies it under the slot's lock with
 * fs_flog_dead_apply(), together with adopting its orphans, and writes
 * both back in place before it lets the slot lock go. If the slot was
 * mounted again first, that mount applies its own log. A pass that
 * fails (a read error, no memory, the journal full) is tried again
 * while the caller still holds the slot lock: FS_FLOG_DEAD_TRIES passes
 * in all, FLOG_DEAD_PAUSE_MS between the first two, doubled each time,
 * with apply_mu let go meanwhile (our own log's appliers are writers
 * and must not wait that long). Entries already applied are gone from
 * the log, so a pass resumes where the last one stopped. A damaged log
 * (-EUCLEAN) or a fenced node is not tried again; what is left after
 * the last pass waits for the slot's next recovery or mount (counted).
 *
 * Our own log is also applied by a worker thread of the mount once it
 * is due (fs_flog_start; flog_worker), so that a node that stops
 * writing does not keep the blocks it logged from the others.
 *
 * One applier for both logs (apply_group): the entries of one group are
 * freed in one transaction and removed from the log they came from, our
 * memory mirror (then stored into our slotinfo) or a dead slot's
 * slotinfo in place.
 *
 * Locking: fl->mu (the memory mirror) is taken inside a handle, before
 * the allocator's rg->lock; fl->apply_mu serializes appliers (no handle
 * held), a dead slot's log included (its slot lock is taken before, by a
 * try; group glocks are taken under it).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fusefs/cluster/fs_cluster.h"
#include "fusefs/core/fs_core_priv.h"
#include "lockmgr/cv_wait.h"
#include "lockmgr/cv_worker.h"
#include "lockmgr/lk.h"

#define FLOG_AGE_MS 1000u      /* a free log entry is applied after this */
#define FLOG_ROOM 64u	       /* entries kept free for one transaction */
#define FLOG_DEAD_PAUSE_MS 25u /* before the 2nd pass over a dead log */

/* The free log's memory mirror (the first FS_FLOG_MAX entries are in
 * slotinfo). */
struct fs_flog {
	pthread_mutex_t mu;
	pthread_mutex_t apply_mu;
	struct fs_flog_ent *e; /* mu */
	unsigned n, cap;       /* mu; n also read relaxed */
	uint64_t first_ms;     /* mu: when the log became non-empty */
	pthread_cond_t cv;     /* mu: the worker's (a new log, stop) */
	struct cvw_worker w;   /* the worker (fs_flog_start), mu */
};

/* Our slot's log into memory (rw mounts with a slot); long due. */
static int flog_load(struct fs *fs, struct fs_flog *fl)
{
	const struct fs_slotinfo *si;
	struct fs_buf *b;
	int ret;

	if (fs->ro || fs->slot >= fs->sb.slot_count)
		return 0;
	ret = fs_buf_read(fs, fs_slotinfo_blk(fs->slot), FS_BT_SLOTINFO, &b);
	if (ret < 0)
		return ret;
	si = b->data;
	if (si->flog_count > FS_FLOG_MAX) {
		ret = -EUCLEAN;
	} else if (si->flog_count > 0) {
		fl->e = malloc(FS_FLOG_MAX * sizeof(*fl->e));
		if (fl->e == NULL) {
			ret = -ENOMEM;
		} else {
			memcpy(fl->e, si->flog,
			       si->flog_count * sizeof(*fl->e));
			fl->n = si->flog_count;
			fl->cap = FS_FLOG_MAX;
			fl->first_ms = 1; /* long due */
		}
	}
	fs_buf_put(b);
	return ret;
}

int fs_flog_init(struct fs *fs)
{
	struct fs_flog *fl = calloc(1, sizeof(*fl));
	int ret;

	if (fl == NULL)
		return -ENOMEM;
	pthread_mutex_init(&fl->mu, NULL);
	pthread_mutex_init(&fl->apply_mu, NULL);
	pthread_cond_init(&fl->cv, NULL);
	fs->flog = fl;
	ret = flog_load(fs, fl);
	if (ret < 0)
		fs_flog_destroy(fs);
	return ret;
}

void fs_flog_destroy(struct fs *fs)
{
	struct fs_flog *fl = fs->flog;

	if (fl == NULL)
		return;
	fs_flog_stop(fs);
	pthread_cond_destroy(&fl->cv);
	pthread_mutex_destroy(&fl->mu);
	pthread_mutex_destroy(&fl->apply_mu);
	free(fl->e);
	free(fl);
	fs->flog = NULL;
}

/* Slot @s's slotinfo block, to change in @tx. */
static int flog_si(struct fs_tx *tx, unsigned s, struct fs_slotinfo **si,
		   struct fs_buf **b)
{
	struct fs *fs = fs_tx_fs(tx);
	int ret = fs_buf_read(fs, fs_slotinfo_blk(s), FS_BT_SLOTINFO, b);

	if (ret == 0)
		ret = fs_tx_write(tx, *b);
	if (ret < 0) {
		fs_buf_put(*b);
		*b = NULL;
		return ret;
	}
	*si = (*b)->data;
	return 0;
}

/* The first FS_FLOG_MAX entries of the memory log into slotinfo (fl->mu
 * held, the block written in the handle). */
static void flog_store(struct fs_flog *fl, struct fs_slotinfo *si)
{
	unsigned n = fl->n < FS_FLOG_MAX ? fl->n : FS_FLOG_MAX;

	memcpy(si->flog, fl->e, n * sizeof(*fl->e));
	memset(si->flog + n, 0, (FS_FLOG_MAX - n) * sizeof(*fl->e));
	si->flog_count = n;
}

/* Join the last entry if adjacent (same group, same kind). fl->mu. */
static int flog_merge(struct fs *fs, struct fs_flog *fl, uint64_t start,
		      uint32_t len, uint32_t flags)
{
	struct fs_flog_ent *l;

	if (fl->n == 0)
		return 0;
	l = &fl->e[fl->n - 1];
	if (l->flags != flags ||
	    fs_alloc_group_of(fs, l->start) != fs_alloc_group_of(fs, start) ||
	    (uint64_t)l->len + len > UINT32_MAX)
		return 0;
	if (l->start + l->len == start) {
		l->len += len;
		return 1;
	}
	if (start + len == l->start) {
		l->start = start;
		l->len += len;
		return 1;
	}
	return 0;
}

static int flog_append(struct fs_flog *fl, uint64_t start, uint32_t len,
		       uint32_t flags)
{
	if (fl->n == fl->cap) {
		unsigned nc = fl->cap ? fl->cap * 2 : FS_FLOG_MAX;
		struct fs_flog_ent *n = realloc(fl->e, nc * sizeof(*n));

		if (n == NULL)
			return -ENOMEM;
		fl->e = n;
		fl->cap = nc;
	}
	fl->e[fl->n++] = (struct fs_flog_ent){start, len, flags};
	return 0;
}

int fs_flog_add(struct fs_tx *tx, uint64_t start, uint32_t len, int inode)
{
	struct fs *fs = fs_tx_fs(tx);
	struct fs_flog *fl = fs->flog;
	uint32_t flags = inode ? FS_FLOG_INODE : 0;
	struct fs_slotinfo *si;
	struct fs_buf *b;
	int ret;

	pthread_mutex_lock(&fl->mu);
	ret = flog_si(tx, fs->slot, &si, &b);
	if (ret == 0 && !flog_merge(fs, fl, start, len, flags)) {
		ret = flog_append(fl, start, len, flags);
		if (ret == 0 && fl->n > FS_FLOG_MAX)
			FS_STAT_ADD(fs, flog_overflows, 1);
	}
	if (ret == 0) {
		if (fl->first_ms == 0) {
			fl->first_ms = cvw_now_ms();
			pthread_cond_signal(&fl->cv); /* the worker: due soon */
		}
		flog_store(fl, si);
		FS_STAT_ADD(fs, flog_logged, len);
	}
	pthread_mutex_unlock(&fl->mu);
	fs_buf_put(b);
	return ret;
}

unsigned fs_alloc_flog_len(struct fs *fs)
{
	if (fs->flog == NULL)
		return 0;
	return __atomic_load_n(&fs->flog->n, __ATOMIC_RELAXED);
}

/*
 * Free the entries of group @g (its glock held) among @e[0 .. *@n) in
 * @tx, and keep the others, in order, at the front: *@n becomes their
 * count. The first failure stops the freeing (that entry and the rest
 * stay). Each block freed is counted in *@freed. 0 or -errno.
 */
static int apply_entries(struct fs_tx *tx, uint32_t g, struct fs_flog_ent *e,
			 unsigned *n, uint64_t *freed)
{
	struct fs *fs = fs_tx_fs(tx);
	unsigned k = 0;
	int ret = 0;

	for (unsigned i = 0; i < *n; i++) {
		struct fs_flog_ent x = e[i];

		if (ret == 0 && fs_alloc_group_of(fs, x.start) == g) {
			ret = fs_alloc_free_held(tx, x.start, x.len,
						 x.flags & FS_FLOG_INODE);
			if (ret == 0) {
				*freed += x.len;
				continue;
			}
		}
		e[k++] = x;
	}
	*n = k;
	return ret;
}

/*
 * Apply group @g's entries of slot @s's log in one transaction (the
 * group's glock held, no handle before): our own (the memory mirror,
 * then stored into our slotinfo) or a dead slot's (its slotinfo in
 * place, its slot lock held). 0 or -errno.
 */
static int apply_group(struct fs *fs, unsigned s, uint32_t g)
{
	struct fs_flog *fl = fs->flog;
	int own = s == fs->slot;
	struct fs_slotinfo *si = NULL;
	struct fs_buf *b = NULL;
	uint64_t freed = 0;
	struct fs_tx *tx;
	int ret;

	ret = fs_tx_begin(fs, 2 + fs_alloc_credits(fs), &tx);
	if (ret < 0)
		return ret;
	if (own)
		pthread_mutex_lock(&fl->mu);
	ret = flog_si(tx, s, &si, &b);
	if (ret == 0 && own) {
		ret = apply_entries(tx, g, fl->e, &fl->n, &freed);
		if (fl->n == 0)
			fl->first_ms = 0;
		flog_store(fl, si);
	} else if (ret == 0) {
		unsigned n = si->flog_count;

		ret = apply_entries(tx, g, si->flog, &si->flog_count, &freed);
		memset(si->flog + si->flog_count, 0,
		       (n - si->flog_count) * sizeof(*si->flog));
	}
	if (own)
		pthread_mutex_unlock(&fl->mu);
	if (own)
		FS_STAT_ADD(fs, flog_applied, freed);
	else
		FS_STAT_ADD(fs, flog_dead_applied, freed);
	if (b != NULL)
		fs_buf_put(b);
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	return ret;
}

/* The group of the next entry to apply of our log: all of it (@all), or
 * while more than a quarter is used; UINT32_MAX when done. */
static uint32_t own_next(struct fs *fs, int all)
{
	struct fs_flog *fl = fs->flog;
	uint32_t g = UINT32_MAX;

	pthread_mutex_lock(&fl->mu);
	if (fl->n > (all ? 0u : FS_FLOG_MAX / 4))
		g = fs_alloc_group_of(fs, fl->e[0].start);
	pthread_mutex_unlock(&fl->mu);
	return g;
}

/* The group of the first entry of dead slot @s's log (read from the
 * disk: its slotinfo as the log's transactions left it): 0 and *@g, 1
 * when the log is empty, -errno. */
static int dead_next(struct fs *fs, unsigned s, uint32_t *g)
{
	const struct fs_slotinfo *si;
	struct fs_buf *b;
	int ret = fs_buf_read(fs, fs_slotinfo_blk(s), FS_BT_SLOTINFO, &b);

	if (ret < 0)
		return ret;
	si = b->data;
	if (si->flog_count > FS_FLOG_MAX)
		ret = -EUCLEAN;
	else if (si->flog_count == 0)
		ret = 1;
	else
		*g = fs_alloc_group_of(fs, si->flog[0].start);
	if (ret == 0 && *g == UINT32_MAX)
		ret = -EUCLEAN;
	fs_buf_put(b);
	return ret;
}

/* One group of slot @s's log, under the group's glock (waiting). */
static int apply_held(struct fs *fs, unsigned s, uint32_t g)
{
	int ret = fs_alloc_group_hold(fs, g);

	if (ret < 0)
		return ret;
	ret = apply_group(fs, s, g);
	fs_alloc_group_release(fs, g);
	return ret;
}

int fs_alloc_flog_apply(struct fs *fs, int all)
{
	struct fs_flog *fl = fs->flog;
	int ret = 0;
	uint32_t g;

	pthread_mutex_lock(&fl->apply_mu);
	while (ret == 0 && (g = own_next(fs, all)) != UINT32_MAX)
		ret = apply_held(fs, fs->slot, g);
	pthread_mutex_unlock(&fl->apply_mu);
	return ret;
}

/* One pass over dead slot @s's log, group by group: 0 when it is empty,
 * -errno (the entries applied so far are out of the log). */
static int dead_pass(struct fs *fs, unsigned s)
{
	struct fs_flog *fl = fs->flog;
	uint32_t g;
	int ret;

	pthread_mutex_lock(&fl->apply_mu);
	while ((ret = dead_next(fs, s, &g)) == 0) {
		ret = apply_held(fs, s, g);
		if (ret < 0)
			break;
	}
	pthread_mutex_unlock(&fl->apply_mu);
	return ret == 1 ? 0 : ret;
}

/* Whether a pass that failed with @err may succeed if tried again. */
static int dead_retryable(struct fs *fs, int err)
{
	if (err == -EUCLEAN) /* a damaged log: the same next time */
		return 0;
	return fs->cl == NULL || !fs_cluster_fenced(fs->cl);
}

int fs_flog_dead_apply(struct fs *fs, unsigned s)
{
	unsigned pause_ms = FLOG_DEAD_PAUSE_MS;
	struct timespec ts;
	int ret;

	if (fs->flog == NULL || s == fs->slot)
		return 0;
	for (unsigned pass = 1;; pass++) {
		ret = dead_pass(fs, s);
		if (ret == 0 || pass == FS_FLOG_DEAD_TRIES ||
		    !dead_retryable(fs, ret))
			break;
		FS_STAT_ADD(fs, flog_dead_retries, 1);
		ts.tv_sec = pause_ms / 1000;
		ts.tv_nsec = (long)(pause_ms % 1000) * 1000000L;
		nanosleep(&ts, NULL);
		pause_ms *= 2;
	}
	if (ret < 0) /* what is left waits for the next recovery of it */
		FS_STAT_ADD(fs, flog_dead_errors, 1);
	else
		FS_STAT_ADD(fs, flog_dead_slots, 1);
	return ret;
}

/*
 * The worker: applies our log once it is due (FLOG_AGE_MS after it
 * became non-empty) also when no writing operation ends here to kick it
 * (an idle node after an rm -rf): the blocks it logged are free for the
 * other nodes only once applied (OCFS2's truncate log worker flushes on
 * a timer the same way). A pass that left the log non-empty (another
 * applier, an error) is tried again a quarter of FLOG_AGE_MS later.
 */
static void *flog_worker(void *arg)
{
	struct fs *fs = arg;
	struct fs_flog *fl = fs->flog;

	pthread_mutex_lock(&fl->mu);
	while (!cvw_worker_stopping(&fl->w)) {
		uint64_t due = fl->first_ms + FLOG_AGE_MS;

		if (fl->n == 0) {
			cvw_wait_until(&fl->cv, &fl->mu, CVW_NEVER);
			continue;
		}
		if (cvw_now_ms() < due) {
			cvw_wait_until(&fl->cv, &fl->mu, due * 1000000ull);
			continue;
		}
		pthread_mutex_unlock(&fl->mu);
		FS_STAT_ADD(fs, flog_worker_runs, 1);
		fs_alloc_flog_kick(fs);
		pthread_mutex_lock(&fl->mu);
		if (fl->n != 0 && !cvw_worker_stopping(&fl->w))
			cvw_wait_ms(&fl->cv, &fl->mu, FLOG_AGE_MS / 4);
	}
	pthread_mutex_unlock(&fl->mu);
	return NULL;
}

int fs_flog_start(struct fs *fs)
{
	struct fs_flog *fl = fs->flog;

	if (fl == NULL || fs->cl == NULL || fs->ro)
		return 0;
	return cvw_worker_start(&fl->w, &fl->mu, &fl->cv, flog_worker, fs,
				"ucfs-flog");
}

void fs_flog_stop(struct fs *fs)
{
	struct fs_flog *fl = fs->flog;

	if (fl != NULL)
		cvw_worker_stop(&fl->w);
}

int fs_alloc_flog_room(struct fs *fs)
{
	if (fs->cl == NULL || fs->flog == NULL || fs->ro ||
	    fs_alloc_flog_len(fs) + FLOG_ROOM <= FS_FLOG_MAX)
		return 0;
	FS_STAT_ADD(fs, flog_room_applies, 1);
	return fs_alloc_flog_apply(fs, 0);
}

void fs_alloc_flog_kick(struct fs *fs)
{
	struct fs_flog *fl = fs->flog;
	uint64_t first;
	unsigned n;

	if (fl == NULL || fs->ro)
		return;
	n = __atomic_load_n(&fl->n, __ATOMIC_RELAXED);
	if (n == 0)
		return;
	if (n + FLOG_ROOM > FS_FLOG_MAX) {
		/* nearly full: wait for the applier rather than skip */
		fs_alloc_flog_room(fs);
		return;
	}
	pthread_mutex_lock(&fl->mu);
	first = fl->first_ms;
	pthread_mutex_unlock(&fl->mu);
	if (n < FS_FLOG_MAX / 2 && first + FLOG_AGE_MS > cvw_now_ms())
		return;
	if (pthread_mutex_trylock(&fl->apply_mu) != 0)
		return; /* another thread applies it */
	pthread_mutex_unlock(&fl->apply_mu);
	fs_alloc_flog_apply(fs, n < FS_FLOG_MAX / 2);
}
