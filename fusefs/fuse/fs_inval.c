/*
 * fs_inval.c — the kernel cache sink of a FUSE mount (fs_inval.h): a
 * queue of notifications and the four threads that send them.
 *
 * What each sink op becomes (research/fuse-coherence.md 1):
 *   inode, len 0   NOTIFY_INVAL_INODE(off -1): attributes only (the
 *                  kernel bumps the inode's attr_version, so a reply
 *                  computed before is not cached either) ... attr thread
 *   inode, len !=0 NOTIFY_INVAL_INODE(off, len): attributes, then the
 *                  pages (dirty mapped pages are written back first,
 *                  through WRITE requests) ...................... page thread
 *   entry          NOTIFY_INVAL_ENTRY ............................ page thread
 *   all            NOTIFY_INC_EPOCH (kernel 6.16+, protocol 7.44): every
 *                  dentry, positive or negative, made before it fails
 *                  its next revalidation; the kernel reads the epoch
 *                  before it sends a LOOKUP, so a reply that crosses it
 *                  is stale too; then the attributes of every
 *                  non-regular inode handed out (fs_inval_note: "dirs"),
 *                  which a working directory reaches without a
 *                  lookup ..................................... attr thread
 *   names          the epoch alone ............................ attr thread
 *   dir            NOTIFY_INVAL_ENTRY of each name
 *                  handed out in that directory (fs_inval_name: the
 *                  map "names_out"), waited for until a request waits
 *                  for the directory's cluster lock (the kernel takes
 *                  the directory's lock for each name, which such a
 *                  request may hold); then, or with too many or lost
 *                  names, the epoch ............................ name thread
 *   forget         NOTIFY_PRUNE (6.18+, 7.45), 256 nodeids a message:
 *                  unused dentries and inodes go (FORGET follows) ... attr
 *   flush          NOTIFY_INVAL_INODE(0, 0) of an inode open O_RDWR here
 *                  (fs_inval_open: "rw"), before its lock leaves EX:
 *                  the kernel writes back the pages a shared mapping
 *                  dirtied (WRITE requests, which the lock still
 *                  admits) and drops every page; then the caller's
 *                  done ........................................ flush
 * libfuse 3.14 has no call for the epoch and prune: they are written to the
 * session's /dev/fuse descriptor as libfuse writes the others (header
 * with unique 0 and error = the code, then the payload). A kernel that
 * does not know a code answers EINVAL; fs_inval_init tries the epoch once
 * (its first use is harmless) before names may be cached, and a refused
 * prune is not sent again. Without the epoch, names are not cached at
 * all (fs_inval_names: entry timeout 0), and "all" only drops the
 * attributes of "dirs".
 *
 * The page thread may block for as long as a request in flight waits
 * for a cluster lock, so nothing waits for it; the attr thread only ever
 * waits for the kernel's own spinlocks, and ops->sync waits for it. The
 * flush thread waits for the WRITEs and READs in flight on the inode
 * whose lock is being flushed, which run (fs_glock.h ops->flush); it has
 * a thread of its own so that no page invalidation waiting for another
 * lock delays a demote.
 *
 * Locking: iv->mu protects the queues, their counters, stop; set_mu the
 * set "dirs" (request handlers add to it, the attr thread copies it and
 * removes what the kernel forgot); rw_mu the map "rw" (open and release
 * handlers count, READ handlers and ops->flush look; nrw lets a READ
 * skip the lock while nothing is open O_RDWR); names_mu "names_out"
 * (handlers add, ops->dir takes a directory's out, an epoch clears
 * it, the directory's FORGET drops it: fs_inval_forgot); all leaves
 * but that fs_inval_forgot takes the namespace's ns->tbl_lock (a leaf,
 * through its held callback) under names_mu and set_mu; never held
 * while writing to the kernel. names and prune are atomics
 * (written by the attr thread and the INIT handler); st are atomics.
 */
#include "fusefs/fuse/fs_inval.h"

#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "fusefs/stats/fs_stats.h"
#include "lockmgr/cv_wait.h"

/* notification codes newer than Debian 12's <linux/fuse.h> (7.38) */
#define IV_NOTIFY_INC_EPOCH 8 /* 7.44 */
#define IV_NOTIFY_PRUNE 9     /* 7.45 */
#define IV_MINOR_EPOCH 44
#define IV_MINOR_PRUNE 45
#define IV_PRUNE_BATCH 256
/* Names kept per directory and in all (beyond: that directory's drop
 * moves the epoch). A directory's drop waits for its names to be
 * dropped (the kernel takes the directory's lock for each) until a
 * request of this node waits for that directory's cluster lock (it may
 * be what holds the directory in the kernel: waiting longer could
 * deadlock), looking every IV_NAMES_POLL_NS, at most IV_NAMES_WAIT_NS
 * (the kernel busy elsewhere); then it moves the epoch instead. */
#define IV_DIR_NAMES 4096
#define IV_NAMES_MAX (1u << 18)
#define IV_NAMES_POLL_NS 1000000ull
#define IV_NAMES_WAIT_NS 2000000000ull

enum iv_kind {
	IV_ATTR,
	IV_PAGES,
	IV_ENTRY,
	IV_EPOCH,
	IV_ALL,
	IV_PRUNE,
	IV_FLUSH,
	IV_NAMES
};
enum { Q_ATTR, Q_PAGE, Q_FLUSH, Q_NAME, Q_N };

struct iv_item {
	struct iv_item *next;
	enum iv_kind kind;
	uint64_t ino;	  /* nodeid: IV_ATTR, IV_PAGES, IV_ENTRY (parent),
			     IV_FLUSH */
	int64_t off, len; /* IV_PAGES */
	void (*done)(void *); /* IV_FLUSH: called once, made or dropped */
	void *done_arg;
	struct iv_names *names; /* IV_NAMES: owned */
	size_t n;	  /* IV_ENTRY: name bytes; IV_PRUNE: nodeids */
	uint64_t v[];	  /* IV_PRUNE: nodeids; IV_ENTRY: the name */
};

struct iv_queue {
	struct iv_item *head, *tail; /* mu */
	uint64_t queued, done;	     /* mu: items ever queued / made */
	pthread_t thread;	     /* immutable after new */
	int started;		     /* immutable after new */
};

/* The names of one directory handed to the kernel (fs_inval_name):
 * records of a length byte, the name's bytes and a NUL (libfuse sends
 * the name with the byte after it: the kernel wants it NUL). */
struct iv_names {
	uint64_t dir; /* nodeid */
	char *buf;
	size_t used, cap, last; /* last: the last record's offset */
	unsigned n;
	int overflow; /* more than IV_DIR_NAMES: the epoch instead */
};

/* Directories with names handed out (open addressing by nodeid, as
 * iv_map); names: their total. */
struct iv_dirs {
	struct iv_names **v;
	size_t cap, used, names;
	int lost; /* a name could not be recorded: the epoch instead */
};

/* Nodeids with a count (open addressing, 0 empty, never more than half
 * full; an entry leaves at count 0): the inodes open for reading and
 * writing here, with their opens ("rw"), and, as a set (counts of 1),
 * the non-regular inodes handed to the kernel ("dirs"). */
struct iv_map {
	uint64_t *k;
	uint32_t *n;
	size_t cap, used;
};

struct iv_stats {
	uint64_t attrs, pages, entries, epochs, flushes;
	uint64_t dirs, dir_skips, dir_fallbacks, dir_busy;
	uint64_t dirs_forgotten, names_forgotten, forgets_kept;
	uint64_t errors, syncs, sync_ns;
};

struct fs_inval {
	struct fuse_session *se; /* immutable */
	uint64_t root;		 /* immutable */
	pthread_mutex_t mu;
	pthread_cond_t cv;	/* an item queued or made; stop */
	struct iv_queue q[Q_N]; /* mu (but thread, started) */
	int stop;		/* mu */
	int minor;		/* atomic: kernel's protocol minor; 0 unknown */
	int names;		/* atomic: -1 unknown, 0 no epoch, 1 epoch */
	int prune;		/* atomic: 1 while PRUNE may be sent */
	pthread_mutex_t set_mu; /* a leaf: protects dirs */
	struct iv_map dirs;	/* set_mu: what "all" drops attributes of */
	pthread_mutex_t rw_mu;	/* a leaf: protects rw */
	struct iv_map rw;	/* rw_mu: open O_RDWR (may be mapped) */
	size_t nrw;		/* atomic: rw.used (READs look first) */
	pthread_mutex_t names_mu; /* a leaf: protects names_out */
	struct iv_dirs names_out; /* names_mu: names handed out, per dir */
	struct iv_stats st;	/* atomics */
};

#define IV_ADD(iv, f, n) __atomic_fetch_add(&(iv)->st.f, (n), __ATOMIC_RELAXED)

static uint64_t to_nodeid(const struct fs_inval *iv, uint64_t ino)
{
	return ino == iv->root ? FUSE_ROOT_ID : ino;
}

/* ---- the queues ---- */

static void names_free(struct iv_names *d)
{
	if (d != NULL)
		free(d->buf);
	free(d);
}

static void item_free(struct iv_item *it)
{
	names_free(it->names);
	free(it);
}

/* Free @it unmade (stopping): a flush's waiter is told all the same. */
static void item_drop(struct iv_item *it)
{
	if (it->kind == IV_FLUSH && it->done != NULL)
		it->done(it->done_arg);
	item_free(it);
}

static void enqueue(struct fs_inval *iv, int q, struct iv_item *it)
{
	struct iv_queue *qu = &iv->q[q];

	it->next = NULL;
	pthread_mutex_lock(&iv->mu);
	if (iv->stop) {
		pthread_mutex_unlock(&iv->mu);
		item_drop(it);
		return;
	}
	if (qu->tail != NULL)
		qu->tail->next = it;
	else
		qu->head = it;
	qu->tail = it;
	qu->queued++;
	pthread_cond_broadcast(&iv->cv);
	pthread_mutex_unlock(&iv->mu);
}

/* A new item, or NULL counted as an error (the kernel is not told). */
static struct iv_item *item_new(struct fs_inval *iv, enum iv_kind kind,
				uint64_t ino, size_t extra)
{
	struct iv_item *it = calloc(1, sizeof(*it) + extra);

	if (it == NULL) {
		IV_ADD(iv, errors, 1);
		return NULL;
	}
	it->kind = kind;
	it->ino = ino;
	return it;
}

/* ---- counted sets of nodeids (set_mu: dirs; rw_mu: rw) ---- */

static size_t map_slot(const struct iv_map *m, uint64_t id)
{
	size_t i = (size_t)((id * 0x9E3779B97F4A7C15ull) >> 17) & (m->cap - 1);

	while (m->k[i] != 0 && m->k[i] != id)
		i = (i + 1) & (m->cap - 1);
	return i;
}

static int map_grow(struct iv_map *m)
{
	struct iv_map g = {.cap = m->cap > 0 ? m->cap * 2 : 64};
	size_t j;

	g.k = calloc(g.cap, sizeof(*g.k));
	g.n = calloc(g.cap, sizeof(*g.n));
	if (g.k == NULL || g.n == NULL) {
		free(g.k);
		free(g.n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++)
		if (m->k[i] != 0) {
			j = map_slot(&g, m->k[i]);
			g.k[j] = m->k[i];
			g.n[j] = m->n[i];
			g.used++;
		}
	free(m->k);
	free(m->n);
	*m = g;
	return 0;
}

/* Take @id's entry at slot @i out (linear probing: the entries after
 * the hole move back into place). */
static void map_del_at(struct iv_map *m, size_t i)
{
	size_t j;
	uint64_t x;
	uint32_t c;

	m->k[i] = 0;
	m->n[i] = 0;
	m->used--;
	for (j = (i + 1) & (m->cap - 1); m->k[j] != 0;
	     j = (j + 1) & (m->cap - 1)) {
		x = m->k[j];
		c = m->n[j];
		m->k[j] = 0;
		m->n[j] = 0;
		i = map_slot(m, x);
		m->k[i] = x;
		m->n[i] = c;
	}
}

/* Add @d (+1 or -1) to @id's count; at 0 it leaves. @set: as a set, a
 * count never above 1. */
static int map_add(struct iv_map *m, uint64_t id, int d, int set)
{
	size_t i;

	if (d > 0 && (m->used + 1) * 2 > m->cap && map_grow(m) < 0)
		return -ENOMEM;
	if (m->cap == 0)
		return 0;
	i = map_slot(m, id);
	if (m->k[i] == 0) {
		if (d < 0)
			return 0;
		m->k[i] = id;
		m->used++;
	}
	if (d > 0)
		m->n[i] = set ? 1 : m->n[i] + 1;
	else if (m->n[i] > 1)
		m->n[i]--;
	else
		map_del_at(m, i);
	return 0;
}

static int map_has(const struct iv_map *m, uint64_t id)
{
	return m->cap > 0 && m->k[map_slot(m, id)] != 0;
}

/* The set "dirs": @id in, out. */
static int set_add(struct iv_map *st, uint64_t id)
{
	return map_add(st, id, 1, 1);
}

static void set_del(struct iv_map *st, uint64_t id)
{
	map_add(st, id, -1, 1);
}

void fs_inval_open(struct fs_inval *iv, uint64_t ino, int d)
{
	int ret;

	pthread_mutex_lock(&iv->rw_mu);
	ret = map_add(&iv->rw, to_nodeid(iv, ino), d, 0);
	__atomic_store_n(&iv->nrw, iv->rw.used, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&iv->rw_mu);
	if (ret < 0)
		IV_ADD(iv, errors, 1);
}

int fs_inval_writable(struct fs_inval *iv, uint64_t ino)
{
	int ret;

	if (__atomic_load_n(&iv->nrw, __ATOMIC_ACQUIRE) == 0)
		return 0; /* nothing open O_RDWR: the common case */
	pthread_mutex_lock(&iv->rw_mu);
	ret = map_has(&iv->rw, to_nodeid(iv, ino));
	pthread_mutex_unlock(&iv->rw_mu);
	return ret;
}

static size_t dirs_slot(const struct iv_dirs *t, uint64_t dir)
{
	size_t i = (size_t)((dir * 0x9E3779B97F4A7C15ull) >> 17) & (t->cap - 1);

	while (t->v[i] != NULL && t->v[i]->dir != dir)
		i = (i + 1) & (t->cap - 1);
	return i;
}

static int dirs_grow(struct iv_dirs *t)
{
	struct iv_dirs g = *t;

	g.cap = t->cap > 0 ? t->cap * 2 : 256;
	g.v = calloc(g.cap, sizeof(*g.v));
	if (g.v == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++)
		if (t->v[i] != NULL)
			g.v[dirs_slot(&g, t->v[i]->dir)] = t->v[i];
	free(t->v);
	*t = g;
	return 0;
}

/* @dir's names, created if @create; NULL if absent (or no memory). */
static struct iv_names *dirs_get(struct iv_dirs *t, uint64_t dir, int create)
{
	struct iv_names *d;
	size_t i;

	if (t->cap == 0 && !create)
		return NULL;
	if (create && (t->used + 1) * 2 > t->cap && dirs_grow(t) < 0)
		return NULL;
	i = dirs_slot(t, dir);
	if (t->v[i] != NULL || !create)
		return t->v[i];
	d = calloc(1, sizeof(*d));
	if (d != NULL) {
		d->dir = dir;
		t->v[i] = d;
		t->used++;
	}
	return d;
}

/* Take @dir's names out of the table (the caller owns them). */
static struct iv_names *dirs_take(struct iv_dirs *t, uint64_t dir)
{
	struct iv_names *d, *x;
	size_t i, j;

	if (t->cap == 0)
		return NULL;
	i = dirs_slot(t, dir);
	d = t->v[i];
	if (d == NULL)
		return NULL;
	t->v[i] = NULL;
	t->used--;
	t->names -= d->n;
	for (j = (i + 1) & (t->cap - 1); t->v[j] != NULL;
	     j = (j + 1) & (t->cap - 1)) {
		x = t->v[j];
		t->v[j] = NULL;
		t->v[dirs_slot(t, x->dir)] = x;
	}
	return d;
}

/* Every name forgotten (the epoch is about to drop them all). */
static void dirs_clear(struct iv_dirs *t)
{
	for (size_t i = 0; i < t->cap; i++)
		names_free(t->v[i]);
	free(t->v);
	*t = (struct iv_dirs){0};
}

/* Append @name to @d (the same name as the last one: nothing). */
static int names_add(struct iv_dirs *t, struct iv_names *d, const char *name,
		     size_t len)
{
	size_t need = d->used + 1 + len + 1;
	char *b;

	if (d->overflow)
		return 0;
	if (d->n > 0 && (unsigned char)d->buf[d->last] == len &&
	    memcmp(d->buf + d->last + 1, name, len) == 0)
		return 0; /* asked again (a revalidation) */
	if (d->n >= IV_DIR_NAMES || t->names >= IV_NAMES_MAX) {
		d->overflow = 1; /* its names go by the epoch */
		t->names -= d->n;
		d->n = 0;
		free(d->buf);
		d->buf = NULL;
		d->used = d->cap = 0;
		return 0;
	}
	if (need > d->cap) {
		b = realloc(d->buf, need * 2);
		if (b == NULL)
			return -ENOMEM;
		d->buf = b;
		d->cap = need * 2;
	}
	d->last = d->used;
	d->buf[d->used] = (char)len;
	memcpy(d->buf + d->used + 1, name, len);
	d->buf[d->used + 1 + len] = '\0';
	d->used = need;
	d->n++;
	t->names++;
	return 0;
}

void fs_inval_name(struct fs_inval *iv, uint64_t parent, const char *name)
{
	size_t len = strlen(name);
	struct iv_names *d;
	int ret = 0;

	if (len == 0 || len > 255)
		return;
	pthread_mutex_lock(&iv->names_mu);
	d = dirs_get(&iv->names_out, to_nodeid(iv, parent), 1);
	if (d == NULL)
		ret = -ENOMEM;
	else
		ret = names_add(&iv->names_out, d, name, len);
	if (ret < 0)
		iv->names_out.lost = 1;
	pthread_mutex_unlock(&iv->names_mu);
	if (ret < 0)
		IV_ADD(iv, errors, 1);
}

void fs_inval_note(struct fs_inval *iv, uint64_t ino, unsigned mode)
{
	int ret;

	if (S_ISREG(mode))
		return;
	pthread_mutex_lock(&iv->set_mu);
	ret = set_add(&iv->dirs, to_nodeid(iv, ino));
	pthread_mutex_unlock(&iv->set_mu);
	if (ret < 0)
		IV_ADD(iv, errors, 1);
}

/*
 * The kernel asks about names in a directory only while it holds the
 * directory, i.e. while fs_ino_held: so once @held says no, under
 * names_mu, no name of a live dentry is among the directory's records,
 * and every name recorded later (a new lookup of the directory first)
 * goes to a new entry. Asked under the lock, so that a lookup cannot
 * slip in between the question and the drop.
 */
void fs_inval_forgot(struct fs_inval *iv, uint64_t ino, int (*held)(void *),
		     void *held_arg)
{
	uint64_t id = to_nodeid(iv, ino);
	struct iv_names *d = NULL;
	int kept = 0;

	if (id == FUSE_ROOT_ID)
		return; /* never forgotten */
	pthread_mutex_lock(&iv->names_mu);
	if (dirs_get(&iv->names_out, id, 0) != NULL) {
		kept = held(held_arg);
		if (!kept)
			d = dirs_take(&iv->names_out, id);
	}
	pthread_mutex_unlock(&iv->names_mu);
	pthread_mutex_lock(&iv->set_mu);
	if (map_has(&iv->dirs, id)) {
		kept = kept || held(held_arg);
		if (!kept)
			set_del(&iv->dirs, id);
	}
	pthread_mutex_unlock(&iv->set_mu);
	if (kept) /* looked up again before its FORGET came */
		IV_ADD(iv, forgets_kept, 1);
	if (d != NULL) {
		IV_ADD(iv, dirs_forgotten, 1);
		IV_ADD(iv, names_forgotten, d->n);
		names_free(d);
	}
}

/* ---- talking to the kernel (the threads only) ---- */

/* A notification libfuse 3.14 cannot send: header + @len bytes. */
static int notify_raw(struct fs_inval *iv, int code, const void *arg,
		      size_t len)
{
	struct fuse_out_header h = {
	    .len = (uint32_t)(sizeof(h) + len),
	    .error = code,
	    .unique = 0,
	};
	struct iovec iov[2] = {
	    {.iov_base = &h, .iov_len = sizeof(h)},
	    {.iov_base = (void *)arg, .iov_len = len},
	};

	if (writev(fuse_session_fd(iv->se), iov, len > 0 ? 2 : 1) < 0)
		return -errno;
	return 0;
}

static int send_epoch(struct fs_inval *iv)
{
	int ret;

	/* every name recorded so far dies with it (a name recorded after
	 * this may be older: kept, which is only more work) */
	pthread_mutex_lock(&iv->names_mu);
	dirs_clear(&iv->names_out);
	pthread_mutex_unlock(&iv->names_mu);
	ret = notify_raw(iv, IV_NOTIFY_INC_EPOCH, NULL, 0);

	if (__atomic_load_n(&iv->names, __ATOMIC_ACQUIRE) < 0)
		__atomic_store_n(&iv->names, ret == 0, __ATOMIC_RELEASE);
	if (ret == 0)
		IV_ADD(iv, epochs, 1);
	return ret;
}

static int send_prune(struct fs_inval *iv, const uint64_t *ids, size_t n)
{
	struct {
		struct fuse_out_header h;
		uint32_t count, padding;
		uint64_t spare;
	} m = {.h = {.error = IV_NOTIFY_PRUNE}, .count = (uint32_t)n};
	struct iovec iov[2] = {
	    {.iov_base = &m, .iov_len = sizeof(m)},
	    {.iov_base = (void *)ids, .iov_len = n * sizeof(*ids)},
	};
	int ret = 0;

	if (!__atomic_load_n(&iv->prune, __ATOMIC_ACQUIRE))
		return 0;
	m.h.len = (uint32_t)(sizeof(m) + n * sizeof(*ids));
	if (writev(fuse_session_fd(iv->se), iov, 2) < 0)
		ret = -errno;
	if (ret == -EINVAL)
		__atomic_store_n(&iv->prune, 0, __ATOMIC_RELEASE);
	return ret;
}

/* Every name (the epoch), and the attributes of every non-regular inode
 * handed out: those may be used without a name being looked up again
 * (a working directory, an open directory, a device); the ones the
 * kernel forgot (ENOENT) leave the set. */
static int make_all(struct fs_inval *iv)
{
	uint64_t *ids;
	size_t n, k = 0;
	int ret = 0;

	if (__atomic_load_n(&iv->names, __ATOMIC_ACQUIRE) != 0)
		ret = send_epoch(iv);
	pthread_mutex_lock(&iv->set_mu);
	n = iv->dirs.used;
	ids = malloc((n > 0 ? n : 1) * sizeof(*ids));
	for (size_t i = 0; ids != NULL && i < iv->dirs.cap; i++)
		if (iv->dirs.k[i] != 0)
			ids[k++] = iv->dirs.k[i];
	pthread_mutex_unlock(&iv->set_mu);
	if (ids == NULL)
		return -ENOMEM;
	n = k;
	k = 0;
	for (size_t i = 0; i < n; i++) {
		IV_ADD(iv, attrs, 1);
		if (fuse_lowlevel_notify_inval_inode(iv->se, ids[i], -1, 0) ==
		    -ENOENT)
			ids[k++] = ids[i];
	}
	pthread_mutex_lock(&iv->set_mu);
	for (size_t i = 0; i < k; i++)
		set_del(&iv->dirs, ids[i]);
	pthread_mutex_unlock(&iv->set_mu);
	free(ids);
	return ret;
}

/* Expire every name of a directory: the next use of each one asks ucfs
 * (a LOOKUP) again, a negative one too. The kernel takes the
 * directory's lock for each (fuse_reverse_inval_entry). Invalidated
 * (unhashed), not merely expired (FUSE_EXPIRE_ONLY): a revalidation
 * LOOKUP of the name holds no directory lock, and its reply, computed
 * before the lock left, would make an expired dentry valid again for a
 * day; an unhashed one is found by no later path walk. */
static int make_names(struct fs_inval *iv, const struct iv_names *d)
{
	size_t len;
	int ret = 0, r;

	/* each record ends with its name's NUL: libfuse sends it too */
	for (size_t o = 0; o < d->used; o += 1 + len + 1) {
		len = (unsigned char)d->buf[o];
		r = fuse_lowlevel_notify_inval_entry(iv->se, d->dir,
						     d->buf + o + 1, len);
		IV_ADD(iv, entries, 1);
		if (r < 0 && r != -ENOENT && ret == 0)
			ret = r;
	}
	return ret;
}

static void make(struct fs_inval *iv, struct iv_item *it)
{
	int ret = 0;

	switch (it->kind) {
	case IV_ATTR:
		ret = fuse_lowlevel_notify_inval_inode(iv->se, it->ino, -1, 0);
		IV_ADD(iv, attrs, 1);
		break;
	case IV_PAGES:
		ret = fuse_lowlevel_notify_inval_inode(iv->se, it->ino, it->off,
						       it->len);
		IV_ADD(iv, pages, 1);
		break;
	case IV_ENTRY:
		ret = fuse_lowlevel_notify_inval_entry(
		    iv->se, it->ino, (const char *)it->v, it->n);
		IV_ADD(iv, entries, 1);
		break;
	case IV_EPOCH:
		ret = send_epoch(iv);
		break;
	case IV_ALL:
		ret = make_all(iv);
		break;
	case IV_PRUNE:
		ret = send_prune(iv, it->v, it->n);
		break;
	case IV_NAMES:
		ret = make_names(iv, it->names);
		break;
	case IV_FLUSH:
		/* dirty pages come back as WRITEs, which the lock admits */
		ret = fuse_lowlevel_notify_inval_inode(iv->se, it->ino, 0, 0);
		IV_ADD(iv, flushes, 1);
		it->done(it->done_arg);
		break;
	}
	/* -ENOENT: the kernel does not hold that inode or name (any more) */
	if (ret < 0 && ret != -ENOENT &&
	    !((it->kind == IV_EPOCH || it->kind == IV_ALL) && ret == -EINVAL))
		IV_ADD(iv, errors, 1);
}

struct iv_thread_arg {
	struct fs_inval *iv;
	int q;
};

static void *iv_thread(void *arg)
{
	struct iv_thread_arg *ta = arg;
	struct fs_inval *iv = ta->iv;
	struct iv_queue *qu = &iv->q[ta->q];
	struct iv_item *it;

	free(ta);
	pthread_mutex_lock(&iv->mu);
	while (!iv->stop) {
		it = qu->head;
		if (it == NULL) {
			pthread_cond_wait(&iv->cv, &iv->mu);
			continue;
		}
		qu->head = it->next;
		if (qu->head == NULL)
			qu->tail = NULL;
		pthread_mutex_unlock(&iv->mu);
		make(iv, it);
		item_free(it);
		pthread_mutex_lock(&iv->mu);
		qu->done++;
		pthread_cond_broadcast(&iv->cv);
	}
	pthread_mutex_unlock(&iv->mu);
	return NULL;
}

/* ---- the sink's ops (any thread; they only queue, but sync) ---- */

static void op_inode(void *arg, uint64_t ino, int64_t off, int64_t len)
{
	struct fs_inval *iv = arg;
	struct iv_item *it;

	it = item_new(iv, len == 0 ? IV_ATTR : IV_PAGES, to_nodeid(iv, ino), 0);
	if (it == NULL)
		return;
	it->off = off;
	it->len = len < 0 ? 0 : len; /* the kernel's "to the end" is 0 */
	if (len != 0) {
		/* the attributes at once, the pages when they can be had */
		struct iv_item *a = item_new(iv, IV_ATTR, it->ino, 0);

		if (a != NULL)
			enqueue(iv, Q_ATTR, a);
	}
	enqueue(iv, len == 0 ? Q_ATTR : Q_PAGE, it);
}

static void op_entry(void *arg, uint64_t parent, const char *name,
		     size_t namelen)
{
	struct fs_inval *iv = arg;
	struct iv_item *it;

	it = item_new(iv, IV_ENTRY, to_nodeid(iv, parent), namelen + 1);
	if (it == NULL)
		return;
	memcpy(it->v, name, namelen);
	it->n = namelen;
	enqueue(iv, Q_PAGE, it);
}

static void op_names(void *arg)
{
	struct fs_inval *iv = arg;
	struct iv_item *it;

	/* without the epoch the kernel caches no name (fs_inval_names) */
	if (__atomic_load_n(&iv->names, __ATOMIC_ACQUIRE) == 0)
		return;
	it = item_new(iv, IV_EPOCH, 0, 0);
	if (it != NULL)
		enqueue(iv, Q_ATTR, it);
}

/* Wait until queue @q made what was queued up to @target; give up when
 * @busy(@busy_arg) says so (looked at every IV_NAMES_POLL_NS) or after
 * IV_NAMES_WAIT_NS. 1 made. */
static int wait_made(struct fs_inval *iv, int q, uint64_t target,
		     int (*busy)(void *), void *busy_arg)
{
	uint64_t end = cvw_now_ns() + IV_NAMES_WAIT_NS;
	int made;

	pthread_mutex_lock(&iv->mu);
	while (!iv->stop && iv->q[q].done < target && cvw_now_ns() < end) {
		pthread_mutex_unlock(&iv->mu);
		if (busy != NULL && busy(busy_arg))
			return 0;
		pthread_mutex_lock(&iv->mu);
		if (iv->q[q].done >= target)
			break;
		cvw_wait_until(&iv->cv, &iv->mu,
			       cvw_now_ns() + IV_NAMES_POLL_NS);
	}
	made = iv->q[q].done >= target;
	pthread_mutex_unlock(&iv->mu);
	return made;
}

/* The names of directory @dir: each one it handed out, dropped by the
 * name thread, waited for a while; the epoch (every name) when they
 * were too many, one could not be recorded, or the kernel did not let
 * them go in time (a request in flight holds the directory). */
static void op_dir(void *arg, uint64_t dir, int (*busy)(void *), void *busy_arg)
{
	struct fs_inval *iv = arg;
	struct iv_names *d;
	struct iv_item *it;
	uint64_t target;
	int lost;

	if (__atomic_load_n(&iv->names, __ATOMIC_ACQUIRE) == 0)
		return; /* no name is cached (fs_inval_names) */
	pthread_mutex_lock(&iv->names_mu);
	d = dirs_take(&iv->names_out, to_nodeid(iv, dir));
	lost = iv->names_out.lost;
	pthread_mutex_unlock(&iv->names_mu);
	if (d == NULL && !lost) {
		IV_ADD(iv, dir_skips, 1); /* none handed out */
		return;
	}
	if (busy != NULL && busy(busy_arg)) {
		/* each name would wait for the requests that wait for
		 * this lock: every name at once, no wait */
		names_free(d);
		IV_ADD(iv, dir_busy, 1);
		op_names(iv);
		return;
	}
	it = lost || d->overflow ? NULL : item_new(iv, IV_NAMES, 0, 0);
	if (it != NULL) {
		it->names = d;
		pthread_mutex_lock(&iv->mu);
		target = iv->q[Q_NAME].queued + 1;
		pthread_mutex_unlock(&iv->mu);
		enqueue(iv, Q_NAME, it);
		IV_ADD(iv, dirs, 1);
		if (wait_made(iv, Q_NAME, target, busy, busy_arg))
			return;
	} else {
		names_free(d);
	}
	IV_ADD(iv, dir_fallbacks, 1);
	op_names(iv);
}

static void op_all(void *arg)
{
	struct fs_inval *iv = arg;
	struct iv_item *it;

	it = item_new(iv, IV_ALL, 0, 0);
	if (it != NULL)
		enqueue(iv, Q_ATTR, it);
}

static int op_forget(void *arg, const uint64_t *inos, size_t n)
{
	struct fs_inval *iv = arg;
	struct iv_item *it;
	size_t k;

	if (!__atomic_load_n(&iv->prune, __ATOMIC_ACQUIRE))
		return -EOPNOTSUPP;
	for (size_t i = 0; i < n; i += k) {
		k = n - i < IV_PRUNE_BATCH ? n - i : IV_PRUNE_BATCH;
		it = item_new(iv, IV_PRUNE, 0, k * sizeof(uint64_t));
		if (it == NULL)
			return 0; /* a hint: the next round asks again */
		for (size_t j = 0; j < k; j++)
			it->v[j] = to_nodeid(iv, inos[i + j]);
		it->n = k;
		enqueue(iv, Q_ATTR, it);
	}
	return 0;
}

static int op_flush(void *arg, uint64_t ino, void (*done)(void *),
		    void *done_arg)
{
	struct fs_inval *iv = arg;
	struct iv_item *it;

	if (!fs_inval_writable(iv, ino))
		return 0; /* no shared writable mapping can exist */
	it = item_new(iv, IV_FLUSH, to_nodeid(iv, ino), 0);
	if (it == NULL)
		return 0;
	it->done = done;
	it->done_arg = done_arg;
	enqueue(iv, Q_FLUSH, it);
	return 1;
}

static void op_sync(void *arg)
{
	struct fs_inval *iv = arg;
	struct iv_queue *qu = &iv->q[Q_ATTR];
	uint64_t t0 = cvw_now_ns(), target;

	pthread_mutex_lock(&iv->mu);
	target = qu->queued;
	while (!iv->stop && qu->done < target)
		pthread_cond_wait(&iv->cv, &iv->mu);
	pthread_mutex_unlock(&iv->mu);
	IV_ADD(iv, syncs, 1);
	IV_ADD(iv, sync_ns, cvw_now_ns() - t0);
}

static const struct fs_inval_ops iv_ops = {
    .inode = op_inode,
    .entry = op_entry,
    .all = op_all,
    .names = op_names,
    .forget = op_forget,
    .sync = op_sync,
    .flush = op_flush,
    .dir = op_dir,
};

const struct fs_inval_ops *fs_inval_ops(void)
{
	return &iv_ops;
}

/* ---- life cycle ---- */

void fs_inval_init(struct fs_inval *iv, unsigned proto_minor)
{
	struct iv_item *it;

	__atomic_store_n(&iv->minor, (int)proto_minor, __ATOMIC_RELEASE);
	__atomic_store_n(&iv->prune, proto_minor >= IV_MINOR_PRUNE,
			 __ATOMIC_RELEASE);
	if (proto_minor < IV_MINOR_EPOCH) {
		__atomic_store_n(&iv->names, 0, __ATOMIC_RELEASE);
		return;
	}
	/* the first epoch decides (send_epoch); names stay uncached until */
	it = item_new(iv, IV_EPOCH, 0, 0);
	if (it == NULL)
		__atomic_store_n(&iv->names, 0, __ATOMIC_RELEASE);
	else
		enqueue(iv, Q_ATTR, it);
}

int fs_inval_names(const struct fs_inval *iv)
{
	return __atomic_load_n(&iv->names, __ATOMIC_ACQUIRE) == 1;
}

void fs_inval_stats(struct fs_json *o, void *arg)
{
	struct fs_inval *iv = arg;
	uint64_t queued;

	pthread_mutex_lock(&iv->mu);
	queued = 0;
	for (int q = 0; q < Q_N; q++)
		queued += iv->q[q].queued - iv->q[q].done;
	pthread_mutex_unlock(&iv->mu);
	fs_json_u64(o, "proto_minor",
		    (uint64_t)__atomic_load_n(&iv->minor, __ATOMIC_RELAXED));
	fs_json_bool(o, "names_cached", fs_inval_names(iv));
	fs_json_bool(o, "prune", __atomic_load_n(&iv->prune, __ATOMIC_RELAXED));
	fs_json_u64(o, "queued", queued);
	pthread_mutex_lock(&iv->names_mu);
	fs_json_u64(o, "names_tracked", iv->names_out.names);
	fs_json_u64(o, "dirs_tracked", iv->names_out.used);
	pthread_mutex_unlock(&iv->names_mu);
#define IV_U64(f)                                                              \
	fs_json_u64(o, #f, __atomic_load_n(&iv->st.f, __ATOMIC_RELAXED))
	IV_U64(attrs);
	IV_U64(pages);
	IV_U64(entries);
	IV_U64(epochs);
	IV_U64(flushes);
	IV_U64(dirs);
	IV_U64(dir_skips);
	IV_U64(dir_fallbacks);
	IV_U64(dir_busy);
	IV_U64(dirs_forgotten);
	IV_U64(names_forgotten);
	IV_U64(forgets_kept);
	IV_U64(errors);
	IV_U64(syncs);
	IV_U64(sync_ns);
#undef IV_U64
}

static int start(struct fs_inval *iv, int q)
{
	struct iv_thread_arg *ta = malloc(sizeof(*ta));

	if (ta == NULL)
		return -ENOMEM;
	ta->iv = iv;
	ta->q = q;
	if (pthread_create(&iv->q[q].thread, NULL, iv_thread, ta) != 0) {
		free(ta);
		return -EAGAIN;
	}
	iv->q[q].started = 1;
	return 0;
}

int fs_inval_new(struct fuse_session *se, uint64_t root, struct fs_inval **out)
{
	struct fs_inval *iv;
	int ret = 0;

	iv = calloc(1, sizeof(*iv));
	if (iv == NULL)
		return -ENOMEM;
	iv->se = se;
	iv->root = root;
	iv->names = -1;
	pthread_mutex_init(&iv->mu, NULL);
	pthread_mutex_init(&iv->set_mu, NULL);
	pthread_mutex_init(&iv->rw_mu, NULL);
	pthread_mutex_init(&iv->names_mu, NULL);
	pthread_cond_init(&iv->cv, NULL);
	for (int q = 0; q < Q_N && ret == 0; q++)
		ret = start(iv, q);
	if (ret < 0) {
		fs_inval_free(iv);
		return ret;
	}
	*out = iv;
	return 0;
}

void fs_inval_free(struct fs_inval *iv)
{
	struct iv_item *it;

	if (iv == NULL)
		return;
	pthread_mutex_lock(&iv->mu);
	iv->stop = 1;
	pthread_cond_broadcast(&iv->cv);
	pthread_mutex_unlock(&iv->mu);
	for (int q = 0; q < Q_N; q++) {
		if (iv->q[q].started)
			pthread_join(iv->q[q].thread, NULL);
		while ((it = iv->q[q].head) != NULL) {
			iv->q[q].head = it->next;
			item_drop(it);
		}
	}
	pthread_cond_destroy(&iv->cv);
	pthread_mutex_destroy(&iv->mu);
	pthread_mutex_destroy(&iv->set_mu);
	pthread_mutex_destroy(&iv->rw_mu);
	pthread_mutex_destroy(&iv->names_mu);
	free(iv->dirs.k);
	free(iv->dirs.n);
	free(iv->rw.k);
	free(iv->rw.n);
	dirs_clear(&iv->names_out);
	free(iv);
}
