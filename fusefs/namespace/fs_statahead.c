/*
 * fs_statahead.c — directory readahead ("statahead"); what and why in
 * fs_statahead.h.
 *
 * Sections: collecting entries (a fs_dir_iterate callback), the tree
 * nodes under a directory's inline root, the sliding window of one
 * readdir call, the descend into the subdirectories it returned.
 *
 * Invariants: only block numbers inside the filesystem's resource groups
 * are handed to fs_buf_prefetch, and on a cluster mount only those of
 * inodes whose glock this node holds (lock_ahead) or tree nodes of a
 * directory whose glock it holds; the window never has more than
 * statahead=N entries ahead of the reader; the descend reads no block
 * that is not cached (fs_buf_read_cached) and prefetches at most N
 * blocks per call.
 *
 * Locking: the directory's inode lock held by the caller throughout
 * (fs_statahead.h); the descend takes each subdirectory's lock shared
 * (a child after its parent) while it reads it; the reads it leaves for
 * after the reply (fs_sa_defer_end) are queued with nothing held. What
 * is left is the thread's own (TLS).
 */
#include "fusefs/namespace/fs_statahead.h"
#include "fusefs/cluster/fs_iopen.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- collecting entries ---- */

struct coll {
	struct fs *fs;
	uint64_t *v;		/* block numbers to prefetch */
	unsigned n;		/* in v */
	unsigned cnt, max;	/* entries seen / wanted */
	uint64_t next;		/* cookie after the last entry seen */
	int full;		/* stopped at max (more may follow) */
};

static int is_dot(const struct fs_dirent *de)
{
	return de->namelen <= 2 && de->name[0] == '.' &&
	       (de->namelen == 1 || de->name[1] == '.');
}

static void coll_add(struct coll *c, uint64_t blkno)
{
	const struct fs_sb *sb = &c->fs->sb;

	if (blkno >= sb->rgrp_start && blkno < sb->total_blocks)
		c->v[c->n++] = blkno;
}

static int coll_cb(void *arg, const struct fs_dirent *de)
{
	struct coll *c = arg;

	if (is_dot(de))
		return 0;
	if (c->cnt == c->max) {
		c->full = 1;
		return 1;
	}
	coll_add(c, de->ino);
	c->cnt++;
	c->next = de->next;
	return 0;
}

/* ---- tree nodes under an inline root ---- */

/* Add the children of @dir's inline B+tree root if it is an internal
 * node (a large directory); at most c->max blocks in c. */
static void coll_root_children(struct coll *c, struct fs_buf *dir)
{
	const uint8_t *node = (const uint8_t *)dir->data +
			      FS_INODE_INLINE_OFF;
	struct fs_btree_nhdr h;
	unsigned cap = (FS_INODE_INLINE_SIZE - sizeof(h)) /
		       sizeof(struct fs_btree_ptr);

	memcpy(&h, node, sizeof(h));
	if (h.magic != FS_BTREE_NMAGIC || h.level == 0)
		return;
	for (unsigned i = 0; i < h.nkeys && i < cap && c->n < c->max; i++) {
		struct fs_btree_ptr p;

		memcpy(&p, node + sizeof(h) + i * sizeof(p), sizeof(p));
		coll_add(c, p.child);
	}
}

static int is_live_dir(struct fs_buf *b)
{
	const struct fs_dinode *di = fs_di(b);

	return S_ISDIR(di->mode) && di->nlink > 0 &&
	       di->fmt == FS_FMT_DIR_BTREE;
}

/* ---- locks ahead ---- */

/*
 * dlm: the PR locks of the inodes among v[0..n) (those marked in
 * @isino; NULL: all), in one batch that waits for no other node; then
 * keep[i] = 1 for the blocks that may be read ahead: a tree node (its
 * directory's lock is held) or an inode whose lock is held now (a block
 * read under no lock would be dropped by the grant that follows).
 * nolock: all. Returns 0, or -ENOMEM (keep all 0: nothing is read).
 */
static int lock_ahead(struct fs *fs, const uint64_t *v, unsigned n,
		      const uint8_t *isino, uint8_t *keep)
{
	uint64_t *inos;
	unsigned ni = 0;
	int ret = -ENOMEM;

	memset(keep, fs->cl == NULL, n);
	if (fs->cl == NULL || n == 0)
		return 0;
	inos = malloc(n * sizeof(*inos));
	if (inos == NULL)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++)
		if (isino == NULL || isino[i])
			inos[ni++] = v[i];
	/* held flags land in keep[0..ni), spread below */
	ret = fs_ilock_ahead(fs, inos, ni, keep);
	if (ret == 0) {
		/* their iopen holds too, taken at the kernel's first
		 * reference (fs_iopen.h): one batch, not a round trip each */
		unsigned k = 0;

		for (unsigned i = 0; i < ni; i++)
			if (keep[i])
				inos[k++] = inos[i];
		fs_iopen_prefetch(fs, inos, k);
	}
	free(inos);
	if (ret < 0) {
		memset(keep, 0, n);
		return ret;
	}
	for (unsigned i = n; i-- > 0;) /* from the end: ni <= i + 1 */
		keep[i] = isino != NULL && !isino[i] ? 1 : keep[--ni];
	return 0;
}

/* Drop from v[0..n) the blocks not kept; returns how many are left. */
static unsigned compact(uint64_t *v, unsigned n, const uint8_t *keep)
{
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++)
		if (keep[i])
			v[k++] = v[i];
	return k;
}

/* ---- the window ---- */

/* Prefetch the inode blocks of the next @count entries from sa->next. */
static void sa_fill(struct fs_sa *sa, unsigned count)
{
	struct coll c = { .fs = sa->fs, .max = count };
	uint8_t *keep = malloc(count);

	c.v = malloc(count * sizeof(*c.v));
	if (c.v == NULL || keep == NULL) {
		sa->window = 0;		/* best effort: stop for this call */
		free(c.v);
		free(keep);
		return;
	}
	c.next = sa->next;
	if (fs_dir_iterate(sa->fs, sa->dir, sa->next, coll_cb, &c) < 0)
		c.full = 0;
	if (lock_ahead(sa->fs, c.v, c.n, NULL, keep) == 0)
		fs_buf_prefetch(sa->fs, c.v, compact(c.v, c.n, keep));
	free(c.v);
	free(keep);
	sa->ahead += c.cnt;
	sa->next = c.next;
	sa->at_end = !c.full;
}

void fs_sa_begin(struct fs_sa *sa, struct fs *fs, struct fs_buf *dir,
		 uint64_t cookie, int plus)
{
	memset(sa, 0, sizeof(*sa));
	sa->fs = fs;
	sa->dir = dir;
	sa->plus = plus;
	sa->window = fs->ns->opts.statahead;
	sa->next = cookie;
	if (sa->window == 0)
		return;
	if (cookie <= 2) {
		uint64_t v[FS_INODE_INLINE_SIZE / sizeof(struct fs_btree_ptr)];
		struct coll c = { .fs = fs, .v = v,
				  .max = sizeof(v) / sizeof(v[0]) };

		coll_root_children(&c, dir);
		fs_buf_prefetch(fs, v, c.n);
	}
	sa_fill(sa, sa->window);
}

/* Remember subdirectory @ino for the descend (at most window of them). */
static void sa_note_subdir(struct fs_sa *sa, uint64_t ino)
{
	if (sa->nsub == sa->capsub) {
		unsigned cap = sa->capsub ? 2 * sa->capsub : 16;
		uint64_t *v;

		if (sa->nsub >= sa->window)
			return;
		v = realloc(sa->sub, cap * sizeof(*v));
		if (v == NULL)
			return;
		sa->sub = v;
		sa->capsub = cap;
	}
	sa->sub[sa->nsub++] = ino;
}

void fs_sa_pass(struct fs_sa *sa, const struct fs_dirent *de)
{
	if (sa->window == 0 || is_dot(de))
		return;
	if (sa->ahead > 0)
		sa->ahead--;
	if (sa->plus && de->type == DT_DIR)
		sa_note_subdir(sa, de->ino);
	if (!sa->at_end && sa->ahead <= sa->window / 2)
		sa_fill(sa, sa->window - sa->ahead);
}

/* ---- descend ---- */

/* Add what a readdir of cached directory @ino will need first: its
 * entries' inode blocks (small directory: entries in the inode; returns
 * 1) or its tree nodes (large one; 0). No I/O. */
static int descend_one(struct coll *c, uint64_t ino)
{
	struct fs_ilock il;
	struct fs_buf *b;
	int entries = 0;

	fs_op_begin(&il, c->fs, 0);
	if (fs_ilock_one(&il, ino, FS_IL_SH) < 0 ||
	    fs_buf_read_cached(c->fs, ino, FS_BT_INODE, &b) < 0) {
		fs_op_end(&il);
		return 0;
	}
	if (is_live_dir(b)) {
		struct fs_btree_nhdr h;

		memcpy(&h, (uint8_t *)b->data + FS_INODE_INLINE_OFF,
		       sizeof(h));
		entries = h.magic == FS_BTREE_NMAGIC && h.level == 0;
		if (entries)
			fs_dir_iterate(c->fs, b, 2, coll_cb, c);
		else
			coll_root_children(c, b);
	}
	fs_buf_put(b);
	fs_op_end(&il);
	return entries;
}

/* The reads of the subdirectories after the first that a readdirplus of
 * this thread left for after its reply: blocks v[0..end[nend - 1]),
 * subdirectory i's ending at end[i], their locks asked for already. */
static __thread struct {
	int on;	       /* between fs_sa_defer_begin and _end */
	struct fs *fs; /* NULL: nothing left yet */
	uint64_t *v;
	unsigned *end, nend;
} deferred;

/* One prefetch per subdirectory [i0, i1) of @v (ending at end[i]), in
 * the reader's order: a tree walk enters them in that order, so the
 * first one's reads are queued first. */
static void descend_read(struct fs *fs, uint64_t *v, const unsigned *end,
			 unsigned i0, unsigned i1)
{
	for (unsigned i = i0, from = i0 > 0 ? end[i0 - 1] : 0; i < i1; i++) {
		fs_buf_prefetch(fs, v + from, end[i] - from);
		from = end[i];
	}
}

/* Drop from each subdirectory's run of c->v the blocks not kept; the
 * runs stay in order, end[] follows. */
static void descend_compact(struct coll *c, const uint8_t *keep, unsigned *end,
			    unsigned nend)
{
	unsigned from = 0, to = 0;

	for (unsigned i = 0; i < nend; i++) {
		for (unsigned k = from; k < end[i]; k++)
			if (keep[k])
				c->v[to++] = c->v[k];
		from = end[i];
		end[i] = to;
	}
}

/*
 * The subdirectories sa->sub[0..nsub): what each one's readdir needs
 * first (descend_one), their locks in one batch (dlm), then their reads.
 * Between fs_sa_defer_begin and _end (the FUSE adapter), the reads of
 * the subdirectories after the first are left for after the reply (the
 * first one's are queued now: the reader enters it next). The locks are
 * all asked for now: a lock-ahead that gets a new grant may wait for the
 * prefetches in flight (the grant's cache drop, fs_cache_drop_owner, does
 * when its ring of recent drops is full: fs_cache.c), so after the reply
 * it could wait for the first subdirectory's reads.
 */
static void sa_descend(struct fs_sa *sa, int defer)
{
	struct coll c = {.fs = sa->fs, .max = sa->window};
	/* zeroed: some compilers cannot see that only what the loop
	 * below filled is read */
	uint8_t *isino = calloc(sa->window, 1);
	uint8_t *keep = malloc(sa->window);
	unsigned *end = malloc(sa->nsub * sizeof(*end));
	unsigned nend = 0, from = 0;

	c.v = calloc(sa->window, sizeof(*c.v));
	if (c.v == NULL || isino == NULL || keep == NULL || end == NULL)
		goto out_free;
	for (unsigned i = 0; i < sa->nsub && c.n < c.max && !c.full; i++) {
		int ent;

		c.cnt = c.n; /* coll_cb's bound counts blocks here */
		from = c.n;
		ent = descend_one(&c, sa->sub[i]);
		memset(isino + from, ent, c.n - from);
		end[nend++] = c.n;
	}
	if (nend == 0 || lock_ahead(sa->fs, c.v, c.n, isino, keep) < 0)
		goto out_free;
	descend_compact(&c, keep, end, nend);
	descend_read(sa->fs, c.v, end, 0, 1);
	if (!defer || nend == 1) {
		descend_read(sa->fs, c.v, end, 1, nend);
		goto out_free;
	}
	deferred.fs = sa->fs;
	deferred.v = c.v;
	deferred.end = end;
	deferred.nend = nend;
	c.v = NULL;
	end = NULL;
out_free:
	free(c.v);
	free(isino);
	free(keep);
	free(end);
}

void fs_sa_end(struct fs_sa *sa)
{
	if (sa->window > 0 && sa->plus && sa->nsub > 0) {
		FS_NS_STAT_ADD(sa->fs, statahead_descends, 1);
		sa_descend(sa, deferred.on && deferred.fs == NULL);
	}
	free(sa->sub);
	sa->sub = NULL;
	sa->nsub = sa->capsub = 0;
}

void fs_sa_defer_begin(void)
{
	deferred.on = 1;
}

void fs_sa_defer_end(void)
{
	struct fs *fs = deferred.fs;
	uint64_t *v = deferred.v;
	unsigned *end = deferred.end, nend = deferred.nend;

	memset(&deferred, 0, sizeof(deferred));
	if (fs == NULL)
		return;
	FS_NS_STAT_ADD(fs, statahead_after_reply, 1);
	descend_read(fs, v, end, 1, nend);
	free(v);
	free(end);
}
