/*
 * fs_glocks.c — the glock engine: the table of glocks, their references,
 * the LRU of idle glocks and its bound, the demote workers, stats
 * (fs_glock.h explains the model; fs_glock.c one glock's state machine).
 *
 * Table: a hash of chains under e->mu, keyed by (type, num), doubled when
 * it holds twice as many glocks as chains. A plain mutex rather than an
 * RCU hash (liburcu's cds_lfht): a cached hit takes e->mu twice (get,
 * put) and gl->mu twice (acquire, release), ~25 ns each uncontended, and
 * a caller that keeps its reference (an in-core inode) takes e->mu not
 * at all (tools/BENCH.md has the figures of tests/progs/glock_bench).
 *
 * References and the LRU: fs_glock_get takes a reference, fs_glock_put
 * gives it back; holders and queued jobs hold one too. A glock whose
 * count falls to 0 goes to the tail of e->lru (idle: it keeps its mode).
 * While the table holds more than conf.max glocks not yet picked, the
 * head of the LRU is picked (evict = 1) and queued for a worker, which
 * drops it if nobody took a reference meanwhile (fs_glock_unlock: sync,
 * drop, unlock) and puts its struct on the free list. A glock with
 * holders or references is never on the LRU, so never picked.
 *
 * Pins (fs_glock_pin: an inode the kernel holds): a pin is a reference
 * too; a glock only its pin keeps waits on e->plru (least recently
 * used first) instead, idle for demote-ahead but never picked while
 * the pins' owner bounds them (fs_glocks_set_pruned: on dlm mounts the
 * namespace's one prune, fs_iprune.c, asks the kernel to forget inodes
 * for both bounds; the unpins at their FORGETs put the glocks on
 * e->lru). Otherwise evict_some takes the head of e->plru once e->lru
 * is empty, pin and all.
 *
 * Lock-ahead (fs_glocks_prefetch): the names are looked up, created and
 * claimed (fs_glock_ahead_claim: busy, so nobody starts another request
 * on them) under e->mu, each with a reference; the batch is sent and
 * answered with no engine lock held (fs_glock_ahead_run), then the
 * references go back and the granted glocks idle on the LRU. At most a
 * quarter of conf.max are claimed per call.
 *
 * Jobs: one queue entry per glock at most (queued), holding a reference:
 * e->ready runs now (FIFO), e->delayed is a min-heap by due time (a
 * demote waiting for its minimum hold time), e->later holds demote-ahead
 * jobs (fs_glocks_ahead), run only when nothing else is due; a glock
 * queued there that gets a job of its own (a blocking callback, a
 * holder waiting) moves to e->ready. conf.workers threads take jobs:
 * fs_glock_job (demote), then the drop of a picked glock; demote-ahead
 * jobs up to GL_AHEAD_BATCH at a time, unlocked in one lockspace call
 * (run_aheads).
 *
 * Locking: fs_glock_internal.h (e->mu before gl->mu; e->mu is never held
 * across a DLM call, an op, or a wait for a glock).
 */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fusefs/cluster/fs_glock.h"
#include "fusefs/cluster/fs_glock_internal.h"
#include "fusefs/stats/fs_stats.h"
#include "lockmgr/cv_wait.h"

/* fs_glocks_stop waits this long for a DLM call in progress, then fences
 * (so that unmount never hangs on a lockspace that stopped answering). */
#define GL_STOP_NS 10000000000ull
#define GL_NBUCKET_MIN 1024
/* Demote-ahead jobs a worker takes at once: their drop ops run one after
 * another, then one lockspace call unlocks them all (one message per
 * master, lk_unlock_batch), where one unlock each cost a frame each way
 * (a reader giving up the tree another node removes: ~2 frames per
 * removed entry). A holder arriving meanwhile waits for the batch's ops
 * (drops of idle PR locks: no write-back). */
#define GL_AHEAD_BATCH 32u
/* Demote-ahead answers sustained demand, not one request: a blocking
 * callback from a node that did not ask within GL_AHEAD_STREAK_NS
 * before gives up only the lock asked for and starts a streak (one
 * chmod on another node must not cost this node its kernel's names of
 * everything idle nearby: the directories among them take their
 * subtrees' dentries along); the next one from the same node within
 * GL_AHEAD_STREAK_NS of the previous sweeps the idle inodes of
 * ahead_span numbers around it (an rm -rf of a tree read here: a
 * blocking callback every few ms, where files' data lies between
 * inodes), and each further one doubles the span, up to
 * << GL_AHEAD_GROW_MAX. Each of the last GL_AHEAD_PEERS nodes to ask
 * has a streak of its own (two nodes removing trees read here at once).
 * The scan lets e->mu go every GL_AHEAD_SCAN_CHUNK numbers. */
#define GL_AHEAD_STREAK_NS 200000000ull
/* A streak that swept lasts while its node asks again within this: its
 * sweeps space the node's next callbacks out (a loaded machine too),
 * and each new streak costs its first callback and the ones the remover
 * sends while the first sweep is queued (2-node rm -rf of the bench
 * tree under load, streaks ending at GL_AHEAD_STREAK_NS: up to 20
 * streaks and 120 callbacks per node, where 30-60 before). */
#define GL_AHEAD_KEEP_NS 1000000000ull
#define GL_AHEAD_GROW_MAX 6u
#define GL_AHEAD_SCAN_CHUNK 256u

static const struct fs_glock_ops no_ops;

/* Wait on @cv (CLOCK_MONOTONIC) under e->mu until @deadline (0: none). */
static void e_wait(struct fs_glocks *e, pthread_cond_t *cv, uint64_t deadline)
{
	cvw_wait_until(cv, &e->mu, deadline == 0 ? CVW_NEVER : deadline);
}

/* ---- table ------------------------------------------------------------ */

static size_t hash_of(size_t nbucket, uint16_t type, uint64_t num)
{
	uint64_t h = (num ^ ((uint64_t)type << 56)) * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 32) & (nbucket - 1);
}

static struct fs_glock *lookup(struct fs_glocks *e, uint16_t type, uint64_t num)
{
	struct fs_glock *gl = e->bucket[hash_of(e->nbucket, type, num)];

	while (gl != NULL && (gl->name.type != type || gl->name.num != num))
		gl = gl->hnext;
	return gl;
}

static void hash_add(struct fs_glock **bucket, size_t nbucket,
		     struct fs_glock *gl)
{
	size_t h = hash_of(nbucket, gl->name.type, gl->name.num);

	gl->hnext = bucket[h];
	bucket[h] = gl;
}

static void hash_del(struct fs_glocks *e, struct fs_glock *gl)
{
	struct fs_glock **p =
	    &e->bucket[hash_of(e->nbucket, gl->name.type, gl->name.num)];

	while (*p != gl)
		p = &(*p)->hnext;
	*p = gl->hnext;
}

/* Double the chains when they average two glocks (no failure: a table
 * that cannot grow only gets slower). e->mu held. */
static void maybe_grow(struct fs_glocks *e)
{
	size_t n = e->nbucket * 2;
	struct fs_glock **nb;

	if (e->count <= e->nbucket * 2)
		return;
	nb = calloc(n, sizeof(*nb));
	if (nb == NULL)
		return;
	for (size_t b = 0; b < e->nbucket; b++) {
		while (e->bucket[b] != NULL) {
			struct fs_glock *gl = e->bucket[b];

			e->bucket[b] = gl->hnext;
			hash_add(nb, n, gl);
		}
	}
	free(e->bucket);
	e->bucket = nb;
	e->nbucket = n;
}

/* A struct from the free list, or a new one. e->mu held. */
static struct fs_glock *gl_alloc(struct fs_glocks *e)
{
	struct fs_glock *gl = e->free;

	if (gl != NULL) {
		e->free = gl->hnext;
		return gl;
	}
	gl = calloc(1, sizeof(*gl));
	if (gl == NULL)
		return NULL;
	e->nalloc++;
	gl->e = e;
	pthread_mutex_init(&gl->mu, NULL);
	pthread_cond_init(&gl->cv, NULL); /* gl_wait: cv_wait.h's clock */
	return gl;
}

static void gl_destroy(struct fs_glock *gl)
{
	pthread_cond_destroy(&gl->cv);
	pthread_mutex_destroy(&gl->mu);
	free(gl);
}

_Static_assert(offsetof(struct fs_glock_stats, generation) % 8 == 0,
	       "fs_glock_stats: counters are u64 up to generation");

/* Add the counters of @s into @t. */
static void stats_add(struct fs_glock_stats *t, const struct fs_glock_stats *s)
{
	const uint64_t *src = (const uint64_t *)s;
	uint64_t *dst = (uint64_t *)t;
	size_t n = offsetof(struct fs_glock_stats, generation) / 8;

	/* every counter up to generation is a u64 sum but the maxima */
	for (size_t i = 0; i < n; i++)
		dst[i] += src[i];
	t->max_wait_ns -= s->max_wait_ns;
	if (s->max_wait_ns > t->max_wait_ns)
		t->max_wait_ns = s->max_wait_ns;
	for (int m = 0; m < LK_NMODES; m++) {
		t->mode_max_ns[m] -= s->mode_max_ns[m];
		if (s->mode_max_ns[m] > t->mode_max_ns[m])
			t->mode_max_ns[m] = s->mode_max_ns[m];
	}
}

/* Out of the table, its counters kept, onto the free list. Unreferenced,
 * unlocked. e->mu held. */
static void gl_retire(struct fs_glocks *e, struct fs_glock *gl)
{
	struct fs_glock_stats s;

	fs_glock_stats_get(gl, &s);
	stats_add(&e->gone[gl->name.type], &s);
	hash_del(e, gl);
	gl->live = 0;
	gl->pinned = 0; /* unreferenced: never pinned here */
	e->count--;
	gl->hnext = e->free;
	e->free = gl;
}

/* ---- LRU and jobs ----------------------------------------------------- */

/* Off e->lru or e->plru. e->mu held. */
static void lru_del(struct fs_glocks *e, struct fs_glock *gl)
{
	if (!gl->on_lru)
		return;
	lk_list_del(&gl->lru);
	if (gl->on_lru == GL_IDLE)
		e->nidle--;
	else
		e->npidle--;
	gl->on_lru = 0;
}

/* At the tail of e->lru (@where GL_IDLE) or e->plru (GL_PIDLE). */
static void lru_add(struct fs_glocks *e, struct fs_glock *gl, int where)
{
	lk_list_add_tail(where == GL_IDLE ? &e->lru : &e->plru, &gl->lru);
	gl->on_lru = (uint8_t)where;
	if (where == GL_IDLE)
		e->nidle++;
	else
		e->npidle++;
	gl->idle_ns = fs_glock_now();
}

/* The pin of @gl goes (its reference stays with the caller to put).
 * e->mu held. */
static void unpin_locked(struct fs_glocks *e, struct fs_glock *gl)
{
	if (gl->on_lru == GL_PIDLE)
		lru_del(e, gl);
	gl->pinned = 0;
	e->npinned--;
}

static void heap_swap(struct fs_glocks_job *h, size_t a, size_t b)
{
	struct fs_glocks_job t = h[a];

	h[a] = h[b];
	h[b] = t;
}

/* Push a delayed job; -ENOMEM. e->mu held. */
static int heap_push(struct fs_glocks *e, struct fs_glock *gl, uint64_t due)
{
	struct fs_glocks_job *h = e->delayed;
	size_t i = e->ndelayed;

	if (i == e->delayed_cap) {
		size_t cap = e->delayed_cap ? e->delayed_cap * 2 : 64;

		h = realloc(e->delayed, cap * sizeof(*h));
		if (h == NULL)
			return -ENOMEM;
		e->delayed = h;
		e->delayed_cap = cap;
	}
	h[i] = (struct fs_glocks_job){.due = due, .gl = gl};
	e->ndelayed++;
	gl->delayed = 1;
	for (; i > 0 && h[(i - 1) / 2].due > h[i].due; i = (i - 1) / 2)
		heap_swap(h, i, (i - 1) / 2);
	return 0;
}

static struct fs_glock *heap_pop(struct fs_glocks *e)
{
	struct fs_glocks_job *h = e->delayed;
	struct fs_glock *gl = h[0].gl;
	size_t i = 0, n = --e->ndelayed;

	gl->delayed = 0;
	h[0] = h[n];
	for (;;) {
		size_t l = 2 * i + 1, m = i;

		if (l < n && h[l].due < h[m].due)
			m = l;
		if (l + 1 < n && h[l + 1].due < h[m].due)
			m = l + 1;
		if (m == i)
			break;
		heap_swap(h, i, m);
		i = m;
	}
	return gl;
}

/* The job queues (e->ready, e->later); e->mu held. */
static void fifo_init(struct gl_fifo *q)
{
	q->head = NULL;
	q->tail = &q->head;
	q->n = 0;
}

static void fifo_push(struct gl_fifo *q, struct fs_glock *gl)
{
	gl->qnext = NULL;
	*q->tail = gl;
	q->tail = &gl->qnext;
	q->n++;
}

/* The first glock of @q, taken off, or NULL. */
static struct fs_glock *fifo_pop(struct gl_fifo *q)
{
	struct fs_glock *gl = q->head;

	if (gl == NULL)
		return NULL;
	q->head = gl->qnext;
	if (q->head == NULL)
		q->tail = &q->head;
	q->n--;
	return gl;
}

/* Take @gl, which is on @q, off it (it keeps the job's reference). */
static void fifo_del(struct gl_fifo *q, struct fs_glock *gl)
{
	struct fs_glock **p = &q->head;

	while (*p != gl)
		p = &(*p)->qnext;
	*p = gl->qnext;
	if (q->tail == &gl->qnext)
		q->tail = p;
	q->n--;
}

/* Take @gl's job out of the delayed heap; 1 if it was there (its
 * reference goes with it to the caller). e->mu held. */
static int heap_take(struct fs_glocks *e, struct fs_glock *gl)
{
	struct fs_glocks_job *h = e->delayed;
	size_t i = 0;

	if (!gl->delayed)
		return 0;
	while (i < e->ndelayed && h[i].gl != gl)
		i++;
	if (i == e->ndelayed)
		return 0;
	h[i].due = 0; /* due before any other: up to the root, popped */
	for (; i > 0; i = (i - 1) / 2)
		heap_swap(h, i, (i - 1) / 2);
	heap_pop(e);
	return 1;
}

/* Queue a job for @gl, to run at @due (0: now). A job delayed already
 * and now wanted at once (the local holders a minimum hold deferred a
 * demote for are gone: fs_glock.c) moves to the ready queue. e->mu
 * held. */
static void enqueue(struct fs_glocks *e, struct fs_glock *gl, uint64_t due)
{
	if (!gl->live || e->stopping)
		return;
	if (gl->queued == GQ_NOW) {
		if (due == 0 && heap_take(e, gl)) {
			fifo_push(&e->ready, gl);
			pthread_cond_signal(&e->wcv);
		}
		return;
	}
	if (gl->queued == GQ_LATER) {
		fifo_del(&e->later, gl); /* due now: ahead of the other
					    ahead jobs */
	} else {
		gl->ref++;
		lru_del(e, gl);
	}
	gl->queued = GQ_NOW;
	if (due == 0 || heap_push(e, gl, due) < 0)
		fifo_push(&e->ready, gl);
	pthread_cond_signal(&e->wcv);
}

/* Queue a demote-ahead job for idle @gl. e->mu held. */
static void enqueue_later(struct fs_glocks *e, struct fs_glock *gl)
{
	gl->queued = GQ_LATER;
	gl->ref++;
	lru_del(e, gl);
	fifo_push(&e->later, gl);
	pthread_cond_signal(&e->wcv);
}

/* @peer's streak, or the slot of the node that asked least lately.
 * e->mu held. */
static struct gl_streak *ahead_slot(struct fs_glocks *e, int peer)
{
	struct gl_streak *st = &e->ahead[0];

	for (unsigned i = 0; i < GL_AHEAD_PEERS; i++) {
		struct gl_streak *x = &e->ahead[i];

		if (x->last_ns != 0 && x->peer == peer)
			return x;
		if (x->last_ns < st->last_ns)
			st = x;
	}
	return st;
}

/* The span of a demote-ahead pass for @peer now: 0 for the first
 * callback of its streak (GL_AHEAD_STREAK_NS, then GL_AHEAD_KEEP_NS),
 * then @span doubled per further callback. e->mu held. */
static uint64_t ahead_streak(struct fs_glocks *e, unsigned span, int peer,
			     uint64_t now)
{
	struct gl_streak *st = ahead_slot(e, peer);
	unsigned grow;

	if (st->last_ns != 0 && st->peer == peer &&
	    now < st->last_ns +
		      (st->n > 0 ? GL_AHEAD_KEEP_NS : GL_AHEAD_STREAK_NS)) {
		if (st->n <= GL_AHEAD_GROW_MAX)
			st->n++;
	} else {
		st->peer = peer;
		st->n = 0;
	}
	st->last_ns = now;
	if (st->n == 0) {
		e->ahead_unswept++;
		return 0;
	}
	grow = st->n - 1;
	e->ahead_widened += grow > 0;
	return (uint64_t)span << grow;
}

void fs_glocks_ahead(struct fs_glocks *e, uint16_t type, uint64_t num,
		     unsigned span, int peer)
{
	uint64_t now = fs_glock_now();
	uint64_t idle = FS_GLOCK_AHEAD_IDLE_MS * 1000000ull;
	uint64_t n, w;

	pthread_mutex_lock(&e->mu);
	w = ahead_streak(e, span, peer, now);
	if (w == 0)
		goto out;
	n = num > w ? num - w : 0;
	for (; n <= num + w && !e->stopping && !e->fenced; n++) {
		struct fs_glock *gl = n == num ? NULL : lookup(e, type, n);

		if ((n & (GL_AHEAD_SCAN_CHUNK - 1)) == 0) {
			/* a long scan: let requests in */
			pthread_mutex_unlock(&e->mu);
			pthread_mutex_lock(&e->mu);
		}

		/* idle (no reference: on the LRU), used long enough ago */
		if (gl == NULL || !gl->on_lru || gl->queued || gl->evict ||
		    now < gl->idle_ns + idle)
			continue;
		if (fs_glock_ahead_one(gl, now, peer))
			enqueue_later(e, gl);
	}
out:
	pthread_mutex_unlock(&e->mu);
}

void fs_glocks_kick(struct fs_glock *gl)
{
	struct fs_glocks *e = gl->e;

	pthread_mutex_lock(&e->mu);
	enqueue(e, gl, 0);
	pthread_mutex_unlock(&e->mu);
}

/* The glock evict_some drops next: the oldest idle one; with no prune,
 * the oldest one only a pin keeps, its pin dropped (the kernel's entry
 * goes with the lock: ops->drop). NULL: none. e->mu held. */
static struct fs_glock *evict_next(struct fs_glocks *e)
{
	struct fs_glock *gl;

	if (!lk_list_empty(&e->lru))
		return LK_CONTAINER(e->lru.next, struct fs_glock, lru);
	if (!e->prune_off || lk_list_empty(&e->plru))
		return NULL;
	gl = LK_CONTAINER(e->plru.next, struct fs_glock, lru);
	unpin_locked(e, gl);
	gl->ref--; /* the pin's: 0 now */
	e->pin_drops++;
	return gl;
}

/* Pick idle glocks from the LRU head while the table holds more than
 * conf.max not yet picked. e->mu held. */
static void evict_some(struct fs_glocks *e)
{
	struct fs_glock *gl;

	if (e->conf.max == 0 || e->fenced || e->stopping)
		return;
	while (e->count - e->nevict > e->conf.max &&
	       (gl = evict_next(e)) != NULL) {
		lru_del(e, gl);
		gl->evict = 1;
		e->nevict++;
		enqueue(e, gl, 0);
	}
}

/* Drop a reference. e->mu held. */
static void put_locked(struct fs_glocks *e, struct fs_glock *gl)
{
	if (--gl->ref == 0)
		lru_add(e, gl, GL_IDLE);
	else if (gl->ref == 1 && gl->pinned)
		lru_add(e, gl, GL_PIDLE); /* a job holds a reference: queued
					     ones never get here */
	else
		return;
	evict_some(e);
}

/* The next job, or NULL and in *@until when the next delayed one is due
 * (0: none); *@ahead = 1 for a demote-ahead job. e->mu held. */
static struct fs_glock *next_job(struct fs_glocks *e, uint64_t *until,
				 int *ahead)
{
	struct fs_glock *gl = fifo_pop(&e->ready);

	*until = 0;
	*ahead = 0;
	if (gl == NULL && e->ndelayed > 0) {
		if (e->delayed[0].due > fs_glock_now()) {
			*until = e->delayed[0].due;
			return NULL;
		}
		gl = heap_pop(e);
	} else if (gl == NULL) {
		gl = fifo_pop(&e->later);
		*ahead = gl != NULL;
	}
	if (gl != NULL)
		gl->queued = 0; /* the job's reference is the worker's now */
	return gl;
}

/* No DLM lock and nothing in progress. e->mu held (then gl->mu). */
static int gl_unlocked(struct fs_glock *gl)
{
	int r;

	pthread_mutex_lock(&gl->mu);
	r = gl->lk == NULL && !gl->busy && gl->nholders == 0;
	pthread_mutex_unlock(&gl->mu);
	return r;
}

/* Drop a picked glock unless somebody took a reference meanwhile (then
 * it stays). Consumes the worker's reference. */
static void drop_picked(struct fs_glocks *e, struct fs_glock *gl, int *fence)
{
	int go, ok = 0;

	pthread_mutex_lock(&e->mu);
	go = gl->ref == 1 && !e->fenced && !e->stopping;
	pthread_mutex_unlock(&e->mu);
	if (go) /* -EBUSY if a get + acquire came in between */
		ok = fs_glock_unlock(gl, fence) == 0;
	pthread_mutex_lock(&e->mu);
	gl->evict = 0;
	e->nevict--;
	/* Only ours again, and still unlocked: a get + acquire + release +
	 * put may have come and gone since the unlock (e->mu keeps new
	 * references out while we look) */
	if (ok && gl->ref == 1 && gl_unlocked(gl)) {
		e->gone[gl->name.type].evictions++;
		gl->ref = 0;
		gl_retire(e, gl);
	} else {
		put_locked(e, gl);
	}
	pthread_mutex_unlock(&e->mu);
}

/* After a job on @gl: its next demote queued (@due), its reference
 * given back or, picked, its drop. No lock held. */
static void job_done(struct fs_glocks *e, struct fs_glock *gl, uint64_t due,
		     int *fence)
{
	int evict;

	pthread_mutex_lock(&e->mu);
	evict = gl->evict;
	if (due != 0)
		enqueue(e, gl, due);
	if (!evict)
		put_locked(e, gl);
	pthread_mutex_unlock(&e->mu);
	if (evict)
		drop_picked(e, gl, fence);
}

/* One job: a demote due (fs_glock_job), then the drop of a picked glock
 * (picked only while unreferenced, so before it was queued). */
static void run_job(struct fs_glocks *e, struct fs_glock *gl)
{
	uint64_t due = 0;
	int fence = 0;

	fs_glock_job(gl, &due, &fence);
	job_done(e, gl, due, &fence);
	if (fence)
		fs_glocks_fence(e);
}

/* Demote-ahead jobs @v[0..@n) give their locks up altogether: an unlock
 * is sent and not answered, where a conversion to NL waits for its
 * master's reply (a round trip per lock when the master is the node
 * about to change the inodes); all of them in one lockspace call
 * (GL_AHEAD_BATCH), after their drops (ops->drops around them: one wait
 * for the kernel). One with a holder by now demotes instead, after. */
static void run_aheads(struct fs_glocks *e, struct fs_glock **v, size_t n)
{
	const struct fs_glock_ops *ops = v[0]->ops; /* one type: ahead_span */
	struct lk_lock *lks[GL_AHEAD_BATCH];
	uint64_t due[GL_AHEAD_BATCH] = {0};
	int fence = 0, busy[GL_AHEAD_BATCH];

	if (ops->drops != NULL)
		ops->drops(1, v[0]->arg);
	for (size_t i = 0; i < n; i++) {
		lks[i] = fs_glock_unlock_begin(v[i], &busy[i], &fence);
		busy[i] = busy[i] == -EBUSY;
	}
	if (ops->drops != NULL)
		ops->drops(0, v[0]->arg);
	lk_unlock_batch(lks, n, 0);
	for (size_t i = 0; i < n; i++) {
		if (lks[i] != NULL)
			fs_glock_unlock_end(v[i]);
		if (busy[i])
			fs_glock_job(v[i], &due[i], &fence);
		job_done(e, v[i], due[i], &fence);
	}
	if (fence)
		fs_glocks_fence(e);
}

static void *worker_main(void *arg)
{
	struct fs_glocks *e = arg;

	pthread_mutex_lock(&e->mu);
	while (!e->stopping) {
		uint64_t until;
		int ahead;
		struct fs_glock *gl, *v[GL_AHEAD_BATCH];
		size_t n = 1;

		gl = next_job(e, &until, &ahead);
		if (gl == NULL) {
			e_wait(e, &e->wcv, until);
			continue;
		}
		e->jobs++;
		v[0] = gl;
		while (ahead && n < GL_AHEAD_BATCH &&
		       (gl = fifo_pop(&e->later)) != NULL) {
			gl->queued = 0; /* its reference is the worker's */
			v[n++] = gl;
			e->jobs++;
		}
		e->ahead_unlock_calls += ahead;
		pthread_mutex_unlock(&e->mu);
		if (ahead)
			run_aheads(e, v, n);
		else
			run_job(e, v[0]);
		pthread_mutex_lock(&e->mu);
	}
	e->alive--;
	pthread_cond_broadcast(&e->idle_cv);
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

/* ---- the engine ------------------------------------------------------- */

static void e_destroy(struct fs_glocks *e)
{
	pthread_cond_destroy(&e->wcv);
	pthread_cond_destroy(&e->idle_cv);
	pthread_mutex_destroy(&e->mu);
	free(e->workers);
	free(e->delayed);
	free(e->bucket);
	free(e);
}

static int start_workers(struct fs_glocks *e)
{
	char name[16];
	int ret;

	e->workers = calloc(e->conf.workers, sizeof(*e->workers));
	if (e->workers == NULL)
		return -ENOMEM;
	for (unsigned i = 0; i < e->conf.workers; i++) {
		pthread_mutex_lock(&e->mu);
		e->alive++;
		pthread_mutex_unlock(&e->mu);
		ret = -pthread_create(&e->workers[i], NULL, worker_main, e);
		if (ret < 0) {
			pthread_mutex_lock(&e->mu);
			e->alive--;
			pthread_mutex_unlock(&e->mu);
			return ret;
		}
		e->nworkers++;
		snprintf(name, sizeof(name), "glock-w%u", i % 1000);
		pthread_setname_np(e->workers[i], name);
	}
	return 0;
}

int fs_glocks_new(struct lk_ls *ls, const struct fs_glocks_conf *c,
		  struct fs_glocks **out)
{
	struct fs_glocks *e = calloc(1, sizeof(*e));
	int ret;

	if (e == NULL)
		return -ENOMEM;
	e->ls = ls;
	if (c != NULL)
		e->conf = *c;
	if (e->conf.workers == 0)
		e->conf.workers = 2;
	e->base_ns = (uint64_t)e->conf.minhold_ms * 1000000ull;
	e->gen_seed = fs_glock_seed();
	e->nbucket = GL_NBUCKET_MIN;
	while (e->nbucket < e->conf.max)
		e->nbucket *= 2;
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->wcv, NULL); /* e_wait: cv_wait.h's clock */
	pthread_cond_init(&e->idle_cv, NULL);
	lk_list_init(&e->lru);
	lk_list_init(&e->plru);
	e->prune_off = 1; /* until fs_glocks_set_pruned */
	fifo_init(&e->ready);
	fifo_init(&e->later);
	e->bucket = calloc(e->nbucket, sizeof(*e->bucket));
	if (e->bucket == NULL)
		e->nbucket = 0;
	ret = e->bucket == NULL ? -ENOMEM : start_workers(e);
	if (ret < 0) {
		fs_glocks_free(e);
		return ret;
	}
	*out = e;
	return 0;
}

void fs_glocks_set_ops(struct fs_glocks *e, uint16_t type,
		       const struct fs_glock_ops *ops, void *arg)
{
	if (type >= FS_GLOCK_TYPES)
		return;
	pthread_mutex_lock(&e->mu);
	e->type[type].ops = ops;
	e->type[type].arg = arg;
	pthread_mutex_unlock(&e->mu);
}

void fs_glocks_set_trace(struct fs_glocks *e, struct fs_trace *tr,
			 const char *(*type_name)(unsigned type),
			 struct fs_stats_lk *lk)
{
	pthread_mutex_lock(&e->mu);
	e->tr = tr;
	e->type_name = type_name;
	e->lkst = lk;
	pthread_mutex_unlock(&e->mu);
}

/* A new glock for (@type, @num) in the table. e->mu held. */
static struct fs_glock *create(struct fs_glocks *e, uint16_t type, uint64_t num)
{
	const struct fs_glock_ops *ops =
	    e->type[type].ops != NULL ? e->type[type].ops : &no_ops;
	struct fs_glock *gl = gl_alloc(e);
	struct lk_name n;

	if (gl == NULL)
		return NULL;
	lk_name_make(&n, type, num, NULL);
	if (ops->place != NULL)
		n.place = ops->place(num, e->type[type].arg);
	fs_glock_init(gl, &n, ops, e->type[type].arg);
	gl->live = 1;
	hash_add(e->bucket, e->nbucket, gl);
	e->count++;
	maybe_grow(e);
	return gl;
}

/* The glock of (@type, @num) into *@out, made if there is none: 1 if
 * made, 0 if found, -EIO (fenced, stopping) or -ENOMEM. e->mu held. */
static int find_or_create(struct fs_glocks *e, uint16_t type, uint64_t num,
			  struct fs_glock **out)
{
	if (e->fenced || e->stopping)
		return -EIO;
	*out = lookup(e, type, num);
	if (*out != NULL)
		return 0;
	*out = create(e, type, num);
	return *out != NULL ? 1 : -ENOMEM;
}

int fs_glock_get(struct fs_glocks *e, uint16_t type, uint64_t num,
		 struct fs_glock **out)
{
	struct fs_glock *gl = NULL;
	int ret;

	if (type >= FS_GLOCK_TYPES)
		return -EINVAL;
	pthread_mutex_lock(&e->mu);
	ret = find_or_create(e, type, num, &gl);
	if (ret < 0)
		goto out;
	if (ret == 1)
		evict_some(e);
	ret = 0;
	gl->ref++;
	lru_del(e, gl);
	*out = gl;
out:
	pthread_mutex_unlock(&e->mu);
	return ret;
}

/* ---- pins ------------------------------------------------------------- */

unsigned fs_glocks_max(const struct fs_glocks *e)
{
	return e->conf.max;
}

void fs_glocks_set_pruned(struct fs_glocks *e, int on)
{
	pthread_mutex_lock(&e->mu);
	e->prune_off = !on;
	evict_some(e);
	pthread_mutex_unlock(&e->mu);
}

int fs_glock_pin(struct fs_glocks *e, uint16_t type, uint64_t num)
{
	struct fs_glock *gl;
	int ret;

	if (type >= FS_GLOCK_TYPES)
		return -EINVAL;
	pthread_mutex_lock(&e->mu);
	ret = find_or_create(e, type, num, &gl);
	if (ret < 0)
		goto out;
	ret = 0;
	if (gl->pinned)
		goto out;
	gl->pinned = 1;
	e->npinned++;
	if (gl->ref++ == 0) { /* idle, or new: only the pin keeps it now */
		lru_del(e, gl);
		lru_add(e, gl, GL_PIDLE);
	}
	evict_some(e);
out:
	pthread_mutex_unlock(&e->mu);
	return ret;
}

void fs_glock_unpin(struct fs_glocks *e, uint16_t type, uint64_t num)
{
	struct fs_glock *gl;

	if (type >= FS_GLOCK_TYPES)
		return;
	pthread_mutex_lock(&e->mu);
	gl = lookup(e, type, num);
	if (gl != NULL && gl->pinned) {
		unpin_locked(e, gl);
		put_locked(e, gl);
	}
	pthread_mutex_unlock(&e->mu);
}

/* ---- lock-ahead ------------------------------------------------------- */

/* The largest batch: a quarter of the LRU bound (a batch never pushes
 * the glocks it asked for out of the table before anyone used them),
 * and FS_GLOCK_AHEAD_MAX. */
static size_t ahead_cap(const struct fs_glocks *e)
{
	size_t cap = FS_GLOCK_AHEAD_MAX;

	if (e->conf.max != 0 && e->conf.max / 4 < cap)
		cap = e->conf.max / 4;
	return cap;
}

/* Claim the glocks of @nums that need a request, each with a reference,
 * into @gls (their indexes into @idx); held[i] = 1 for those held
 * already. The number claimed, or -EIO (fenced, stopping). */
static long ahead_claim(struct fs_glocks *e, uint16_t type,
			const uint64_t *nums, size_t n, int mode, uint8_t *held,
			struct fs_glock **gls, size_t *idx)
{
	size_t k = 0, cap = ahead_cap(e);

	pthread_mutex_lock(&e->mu);
	if (e->fenced || e->stopping) {
		pthread_mutex_unlock(&e->mu);
		return -EIO;
	}
	for (size_t i = 0; i < n; i++) {
		struct fs_glock *gl = lookup(e, type, nums[i]);
		int r;

		if (gl == NULL && k < cap)
			gl = create(e, type, nums[i]);
		if (gl == NULL)
			continue;
		r = fs_glock_ahead_claim(gl, mode, k < cap);
		held[i] = r == 0;
		if (r == 1) {
			gl->ref++;
			lru_del(e, gl);
			gls[k] = gl;
			idx[k++] = i;
		} else if (gl->ref == 0 && !gl->on_lru && !gl->queued) {
			/* created above but not claimable: idle */
			lru_add(e, gl, GL_IDLE);
		}
	}
	if (k > 0)
		e->ahead_batches[type]++;
	evict_some(e);
	pthread_mutex_unlock(&e->mu);
	return (long)k;
}

int fs_glocks_prefetch(struct fs_glocks *e, uint16_t type, const uint64_t *nums,
		       size_t n, int mode, uint8_t *held)
{
	struct fs_glock **gls;
	size_t *idx;
	uint8_t *got;
	uint64_t t0;
	long k;
	int ret = 0;

	if (type >= FS_GLOCK_TYPES || (mode != LK_PR && mode != LK_EX))
		return -EINVAL;
	memset(held, 0, n);
	gls = malloc(n * sizeof(*gls));
	idx = malloc(n * sizeof(*idx));
	got = malloc(n);
	if (gls == NULL || idx == NULL || got == NULL) {
		ret = -ENOMEM;
		goto out_free;
	}
	k = ahead_claim(e, type, nums, n, mode, held, gls, idx);
	if (k <= 0) {
		ret = (int)k;
		goto out_free;
	}
	t0 = fs_glock_now();
	ret = fs_glock_ahead_run(e, gls, (size_t)k, mode, got);
	pthread_mutex_lock(&e->mu);
	e->ahead_ns[type] += fs_glock_now() - t0;
	for (long j = 0; j < k; j++) {
		held[idx[j]] = got[j];
		put_locked(e, gls[j]);
	}
	pthread_mutex_unlock(&e->mu);
out_free:
	free(gls);
	free(idx);
	free(got);
	return ret;
}

void fs_glock_put(struct fs_glock *gl)
{
	if (gl == NULL)
		return;
	pthread_mutex_lock(&gl->e->mu);
	put_locked(gl->e, gl);
	pthread_mutex_unlock(&gl->e->mu);
}

void fs_glocks_fence(struct fs_glocks *e)
{
	pthread_mutex_lock(&e->mu);
	e->fenced = 1;
	for (size_t b = 0; b < e->nbucket; b++)
		for (struct fs_glock *gl = e->bucket[b]; gl != NULL;
		     gl = gl->hnext)
			fs_glock_fence_one(gl);
	pthread_mutex_unlock(&e->mu);
}

int fs_glocks_fenced(struct fs_glocks *e)
{
	int f;

	pthread_mutex_lock(&e->mu);
	f = e->fenced;
	pthread_mutex_unlock(&e->mu);
	return f;
}

/* Every glock in the table, each with a reference (off the LRU), in a
 * malloc'ed array; NULL (*@n 0 too) when there are none or no memory. */
static struct fs_glock **grab_all(struct fs_glocks *e, size_t *n)
{
	struct fs_glock **v;
	size_t i = 0;

	pthread_mutex_lock(&e->mu);
	v = malloc((e->count + 1) * sizeof(*v));
	for (size_t b = 0; v != NULL && b < e->nbucket; b++) {
		for (struct fs_glock *gl = e->bucket[b]; gl != NULL;
		     gl = gl->hnext) {
			gl->ref++;
			lru_del(e, gl);
			v[i++] = gl;
		}
	}
	pthread_mutex_unlock(&e->mu);
	*n = i;
	return v;
}

static void put_all(struct fs_glocks *e, struct fs_glock **v, size_t n)
{
	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < n; i++)
		put_locked(e, v[i]);
	pthread_mutex_unlock(&e->mu);
	free(v);
}

int fs_glocks_drop_all(struct fs_glocks *e)
{
	size_t n;
	struct fs_glock **v = grab_all(e, &n);
	struct lk_lock **lks;
	int ret = 0, fence = 0;

	if (v == NULL)
		return -ENOMEM;
	lks = calloc(n, sizeof(*lks));
	for (size_t i = 0; i < n; i++) {
		int r;

		if (lks == NULL) { /* one at a time */
			r = fs_glock_unlock(v[i], &fence);
		} else {
			lks[i] = fs_glock_unlock_begin(v[i], &r, &fence);
		}
		if (r < 0 && ret == 0)
			ret = r;
	}
	if (lks != NULL) {
		/* one lockspace call, one message per master; a lock it
		 * cannot give back (recovery running) stays granted in the
		 * DLM until the lockspace is left or abandoned */
		lk_unlock_batch(lks, n, 0);
		for (size_t i = 0; i < n; i++)
			if (lks[i] != NULL)
				fs_glock_unlock_end(v[i]);
		free(lks);
	}
	put_all(e, v, n);
	if (fence)
		fs_glocks_fence(e);
	return ret;
}

/* Give back the references of queued jobs. e->mu held, stopping. */
static void drain_jobs(struct fs_glocks *e)
{
	struct gl_fifo *queues[] = {&e->ready, &e->later};
	struct fs_glock *gl;

	for (size_t i = 0; i < 2; i++) {
		while ((gl = fifo_pop(queues[i])) != NULL) {
			gl->queued = 0;
			put_locked(e, gl);
		}
	}
	while (e->ndelayed > 0) {
		gl = heap_pop(e);
		gl->queued = 0;
		put_locked(e, gl);
	}
}

/* Stop the workers (fencing after @deadline). */
static void stop_workers(struct fs_glocks *e, uint64_t deadline)
{
	pthread_mutex_lock(&e->mu);
	e->stopping = 1;
	pthread_cond_broadcast(&e->wcv);
	while (e->alive > 0) {
		if (fs_glock_now() > deadline && !e->fenced) {
			pthread_mutex_unlock(&e->mu);
			fs_glocks_fence(e); /* the DLM stopped answering */
			pthread_mutex_lock(&e->mu);
		}
		e_wait(e, &e->idle_cv, fs_glock_now() + 100000000ull);
	}
	drain_jobs(e);
	pthread_mutex_unlock(&e->mu);
	for (unsigned i = 0; i < e->nworkers; i++)
		pthread_join(e->workers[i], NULL);
	e->nworkers = 0;
}

void fs_glocks_stop(struct fs_glocks *e)
{
	uint64_t deadline = fs_glock_now() + GL_STOP_NS;
	struct fs_glock **v;
	size_t n;

	if (e == NULL)
		return;
	stop_workers(e, deadline);
	v = grab_all(e, &n);
	for (size_t i = 0; v != NULL && i < n; i++)
		fs_glock_stop_one(v[i], deadline);
	if (v != NULL)
		put_all(e, v, n);
	if (fs_glock_now() > deadline)
		fs_glocks_fence(e);
}

void fs_glocks_free(struct fs_glocks *e)
{
	if (e == NULL)
		return;
	fs_glocks_stop(e);
	for (size_t b = 0; b < e->nbucket; b++) {
		while (e->bucket[b] != NULL) {
			struct fs_glock *gl = e->bucket[b];

			e->bucket[b] = gl->hnext;
			if (gl->lk != NULL && !gl->fenced) {
				fs_glock_free_lvb(gl);
				lk_unlock(gl->lk, 0);
			}
			gl_destroy(gl);
		}
	}
	while (e->free != NULL) {
		struct fs_glock *gl = e->free;

		e->free = gl->hnext;
		gl_destroy(gl);
	}
	e_destroy(e);
}

/* ---- stats ------------------------------------------------------------ */

void fs_glocks_stats(struct fs_glocks *e, struct fs_glocks_stats *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&e->mu);
	memcpy(out->type, e->gone, sizeof(out->type));
	for (size_t b = 0; b < e->nbucket; b++) {
		for (struct fs_glock *gl = e->bucket[b]; gl != NULL;
		     gl = gl->hnext) {
			struct fs_glock_stats s;

			fs_glock_stats_get(gl, &s);
			stats_add(&out->type[gl->name.type], &s);
			out->held_now += s.mode > LK_NL;
		}
	}
	out->glocks_now = e->count;
	out->bytes_now = e->nalloc * sizeof(struct fs_glock) +
			 e->nbucket * sizeof(*e->bucket) +
			 e->delayed_cap * sizeof(*e->delayed);
	out->idle_now = e->nidle;
	out->pinned_now = e->npinned;
	out->pinned_idle_now = e->npidle;
	out->prune = !e->prune_off;
	out->pin_drops = e->pin_drops;
	out->max = e->conf.max;
	out->queued_now = e->ready.n + e->ndelayed + e->later.n;
	out->workers = e->conf.workers;
	out->jobs = e->jobs;
	out->ahead_unlock_calls = e->ahead_unlock_calls;
	out->ahead_widened = e->ahead_widened;
	out->ahead_unswept = e->ahead_unswept;
	for (int t = 0; t < FS_GLOCK_TYPES; t++) {
		out->type[t].ahead_batches += e->ahead_batches[t];
		out->type[t].ahead_ns += e->ahead_ns[t];
	}
	pthread_mutex_unlock(&e->mu);
	for (int t = 0; t < FS_GLOCK_TYPES; t++)
		stats_add(&out->total, &out->type[t]);
}

/* Insert @c into @top (@n used of @cap), most wait first. */
static unsigned top_insert(struct fs_glock_top *top, unsigned n, unsigned cap,
			   const struct fs_glock_top *c)
{
	unsigned i;

	if (n == cap) {
		if (top[cap - 1].wait_ns >= c->wait_ns)
			return n;
		i = cap - 1;
	} else {
		i = n++;
	}
	for (; i > 0 && top[i - 1].wait_ns < c->wait_ns; i--)
		top[i] = top[i - 1];
	top[i] = *c;
	return n;
}

unsigned fs_glocks_top(struct fs_glocks *e, struct fs_glock_top *top,
		       unsigned n)
{
	unsigned used = 0;

	if (n == 0)
		return 0;
	pthread_mutex_lock(&e->mu);
	for (size_t b = 0; b < e->nbucket; b++) {
		for (struct fs_glock *gl = e->bucket[b]; gl != NULL;
		     gl = gl->hnext) {
			struct fs_glock_stats s;
			struct fs_glock_top c;

			fs_glock_stats_get(gl, &s);
			if (s.waits == 0 && s.bounces == 0)
				continue;
			c = (struct fs_glock_top){
			    .type = gl->name.type,
			    .num = gl->name.num,
			    .mode = s.mode,
			    .holders = s.holders,
			    .waits = s.waits,
			    .wait_ns = s.wait_ns,
			    .bounces = s.bounces,
			    .minhold_ms = s.minhold_ms,
			};
			used = top_insert(top, used, n, &c);
		}
	}
	pthread_mutex_unlock(&e->mu);
	return used;
}

/* OCFS2 locking_state names for the two modes holders use */
static void render_modes(struct fs_json *o, const struct fs_glock_stats *s)
{
	static const int modes[] = {LK_PR, LK_EX};

	for (int i = 0; i < 2; i++) {
		int m = modes[i];

		fs_stats_lk_mode_keys(o, m, s->mode_acquires[m],
				      s->mode_wait_ns[m], s->mode_max_ns[m],
				      &s->mode_failed[m]);
	}
}

static void render_type(struct fs_json *o, const struct fs_glock_stats *s)
{
	/* GFS2 glstats: dcnt = DLM requests, qcnt = holder requests */
	fs_json_u64(o, "dcnt", s->requests + s->ahead_requests);
	fs_json_u64(o, "qcnt", s->acquires + s->try_fails);
	fs_json_u64(o, "acquires", s->acquires);
	fs_json_u64(o, "hits", s->hits);
	fs_json_u64(o, "waits", s->waits);
	fs_json_u64(o, "wait_ns", s->wait_ns);
	fs_json_u64(o, "max_wait_ns", s->max_wait_ns);
	fs_json_u64(o, "try_fails", s->try_fails);
	fs_json_u64(o, "retries", s->retries);
	fs_json_u64(o, "demotes_to_pr", s->demote_pr);
	fs_json_u64(o, "demotes_to_nl", s->demote_nl);
	fs_json_u64(o, "demote_ns", s->demote_ns);
	fs_json_u64(o, "syncs", s->syncs);
	fs_json_u64(o, "drops", s->drops);
	fs_json_u64(o, "invals", s->invals);
	fs_json_u64(o, "recovers", s->recovers);
	fs_json_u64(o, "bounces", s->bounces);
	fs_json_u64(o, "hold_refusals", s->hold_refusals);
	fs_json_u64(o, "minhold_grows", s->minhold_grows);
	fs_json_u64(o, "minhold_shrinks", s->minhold_shrinks);
	fs_json_u64(o, "evictions", s->evictions);
	fs_json_u64(o, "evict_unlocks", s->evict_syncs);
	fs_json_u64(o, "bad_releases", s->bad_releases);
	fs_json_u64(o, "flushes", s->flushes);
	fs_json_u64(o, "demotes_ahead", s->aheads);
	fs_json_u64(o, "gen_kept", s->gen_kept);
	fs_json_u64(o, "ahead_batches", s->ahead_batches);
	fs_json_u64(o, "ahead_ns", s->ahead_ns);
	fs_json_u64(o, "ahead_requests", s->ahead_requests);
	fs_json_u64(o, "ahead_grants", s->ahead_grants);
	fs_json_u64(o, "ahead_hits", s->ahead_hits);
	fs_json_u64(o, "ahead_unused", s->ahead_unused);
	render_modes(o, s);
}

static const char *name_of(const char *(*type_name)(unsigned), unsigned t,
			   char *buf, size_t len)
{
	const char *n = type_name != NULL ? type_name(t) : NULL;

	if (n == NULL) {
		snprintf(buf, len, "type%u", t);
		n = buf;
	}
	return n;
}

static void render_top(struct fs_glocks *e, struct fs_json *arr,
		       const char *(*type_name)(unsigned), unsigned ntop)
{
	struct fs_glock_top *top = calloc(ntop ? ntop : 1, sizeof(*top));
	unsigned n = top != NULL ? fs_glocks_top(e, top, ntop) : 0;
	char buf[24], res[64];

	for (unsigned i = 0; i < n; i++) {
		struct fs_json *r = fs_json_obj(arr, NULL);
		const char *tn =
		    name_of(type_name, top[i].type, buf, sizeof(buf));

		snprintf(res, sizeof(res), "%s:%llu", tn,
			 (unsigned long long)top[i].num);
		fs_json_str(r, "res", res);
		fs_json_str(r, "type", tn);
		fs_json_str(r, "mode", fs_lk_mode_name(top[i].mode));
		fs_json_u64(r, "holders", top[i].holders);
		fs_json_u64(r, "waits", top[i].waits);
		fs_json_u64(r, "wait_ns", top[i].wait_ns);
		fs_json_u64(r, "bounces", top[i].bounces);
		fs_json_u64(r, "minhold_ms", top[i].minhold_ms);
	}
	free(top);
}

void fs_glocks_stats_render(struct fs_glocks *e, struct fs_json *o,
			    const char *(*type_name)(unsigned type),
			    unsigned ntop)
{
	struct fs_glocks_stats *s = malloc(sizeof(*s));
	struct fs_json *types;
	char buf[24];

	if (s == NULL) {
		fs_json_bool(o, "unavailable", 1);
		return;
	}
	fs_glocks_stats(e, s);
	fs_json_u64(o, "glocks_now", s->glocks_now);
	fs_json_u64(o, "idle_now", s->idle_now);
	fs_json_u64(o, "pinned_now", s->pinned_now);
	fs_json_u64(o, "pinned_idle_now", s->pinned_idle_now);
	fs_json_bool(o, "prune", s->prune);
	fs_json_u64(o, "pin_drops", s->pin_drops);
	fs_json_u64(o, "held_now", s->held_now);
	fs_json_u64(o, "bytes_now", s->bytes_now);
	fs_json_u64(o, "glock_max", s->max);
	fs_json_u64(o, "workers", s->workers);
	fs_json_u64(o, "queued_now", s->queued_now);
	fs_json_u64(o, "jobs", s->jobs);
	fs_json_u64(o, "ahead_unlock_calls", s->ahead_unlock_calls);
	fs_json_u64(o, "ahead_widened", s->ahead_widened);
	fs_json_u64(o, "ahead_unswept", s->ahead_unswept);
	types = fs_json_obj(o, "types");
	for (unsigned t = 0; t < FS_GLOCK_TYPES; t++)
		if (s->type[t].acquires + s->type[t].try_fails +
			s->type[t].requests + s->type[t].ahead_requests >
		    0)
			render_type(
			    fs_json_obj(
				types, name_of(type_name, t, buf, sizeof(buf))),
			    &s->type[t]);
	render_top(e, fs_json_arr(o, "top"), type_name, ntop);
	free(s);
}

/* ---- one glock on its own ---------------------------------------------- */

int fs_glock_new(struct lk_ls *ls, const struct lk_name *name,
		 unsigned minhold_ms, const struct fs_glock_ops *ops, void *arg,
		 struct fs_glock **out)
{
	struct fs_glocks_conf c = {
	    .max = 0, .workers = 1, .minhold_ms = minhold_ms};
	struct fs_glocks *e;
	int ret;

	if (name->type >= FS_GLOCK_TYPES || name->slen != 0)
		return -EINVAL;
	ret = fs_glocks_new(ls, &c, &e);
	if (ret < 0)
		return ret;
	fs_glocks_set_ops(e, name->type, ops, arg);
	ret = fs_glock_get(e, name->type, name->num, out);
	if (ret < 0)
		fs_glocks_free(e);
	return ret;
}

void fs_glock_fence(struct fs_glock *gl)
{
	fs_glocks_fence(gl->e);
}

int fs_glock_fenced(struct fs_glock *gl)
{
	return fs_glocks_fenced(gl->e);
}

void fs_glock_stop(struct fs_glock *gl)
{
	if (gl != NULL)
		fs_glocks_stop(gl->e);
}

void fs_glock_free(struct fs_glock *gl)
{
	struct fs_glocks *e;

	if (gl == NULL)
		return;
	e = gl->e;
	fs_glock_put(gl);
	fs_glocks_free(e);
}
