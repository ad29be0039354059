/*
 * fs_btree.c — the generic B+tree: u64 keys, values up to
 * FS_BTREE_VAL_MAX bytes, root node inside a caller's buffer (an inode's
 * inline area), other nodes in FS_BT_BTREE blocks (format: FORMAT.md).
 *
 * Operations walk a path from the root to a leaf (struct bpath holds a
 * reference on every non-root node of it). Insert: if the leaf has no
 * room, the number of nodes to split is known from the path (the leaf and
 * every full ancestor above it, plus one if the root itself is full and
 * must grow), so all new blocks are allocated BEFORE anything changes:
 * -ENOSPC leaves the tree untouched. A full root grows in place: its
 * content moves to a new block and it becomes an internal node with one
 * child, one level higher. Delete frees a node that becomes empty and
 * removes its pointer from the parent; a root with one child whose content
 * fits in the root pulls the child back in (small trees return to the
 * inode). No merging of half-empty nodes.
 *
 * Internal node pointers: child i holds keys >= key i; key 0 is treated as
 * minus infinity, so a new smallest key never needs a parent update.
 *
 * Locking: none here; the caller holds the owner's lock (exclusive for
 * changes), see fs_internal.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fusefs/core/fs_core_priv.h"

#define NHDR 16u
#define ENT 16u

struct lvl {
	struct fs_buf *b;	/* root: bt->root_buf (no ref taken) */
	uint8_t *n;
	uint32_t size;
	int idx;
};

struct bpath {
	int depth;		/* levels in lv[] (1 = root only) */
	struct lvl lv[FS_BTREE_MAX_DEPTH + 1];
};

struct ent {
	uint64_t key;
	const void *val;	/* leaf: value; internal: NULL */
	uint64_t child;		/* internal */
	uint16_t len;
};

static struct fs_btree_nhdr *nh(uint8_t *n)
{
	return (struct fs_btree_nhdr *)n;
}

static struct fs_btree_leaf_slot *lslot(uint8_t *n)
{
	return (struct fs_btree_leaf_slot *)(n + NHDR);
}

static struct fs_btree_ptr *iptr(uint8_t *n)
{
	return (struct fs_btree_ptr *)(n + NHDR);
}

static uint32_t icap(uint32_t size)
{
	return (size - NHDR) / ENT;
}

static uint32_t lfree(uint8_t *n)
{
	return nh(n)->free_end - NHDR - (uint32_t)nh(n)->nkeys * ENT;
}

static void node_init(uint8_t *n, uint32_t size, uint16_t level)
{
	memset(n, 0, NHDR);
	nh(n)->level = level;
	nh(n)->free_end = (uint16_t)size;
	nh(n)->magic = FS_BTREE_NMAGIC;
}

static int node_ok(uint8_t *n, uint32_t size)
{
	const struct fs_btree_nhdr *h = nh(n);

	if (h->magic != FS_BTREE_NMAGIC || h->level >= FS_BTREE_MAX_DEPTH)
		return 0;
	if (h->level > 0)
		return h->nkeys <= icap(size);
	return h->free_end <= size &&
	       NHDR + (uint32_t)h->nkeys * ENT <= h->free_end;
}

void fs_btree_init(struct fs_btree *bt, struct fs *fs, struct fs_buf *buf,
		   uint32_t off, uint32_t size, uint64_t owner)
{
	bt->fs = fs;
	bt->root_buf = buf;
	bt->root_off = off;
	bt->root_size = size;
	bt->owner = owner;
}

static uint8_t *root_node(struct fs_btree *bt)
{
	return (uint8_t *)bt->root_buf->data + bt->root_off;
}

int fs_btree_create(struct fs_tx *tx, struct fs_btree *bt)
{
	int ret = fs_tx_write(tx, bt->root_buf);

	if (ret == 0)
		node_init(root_node(bt), bt->root_size, 0);
	return ret;
}

/* ---- paths ------------------------------------------------------------ */

static void path_release(struct bpath *p, int from)
{
	for (int d = from; d < p->depth; d++) {
		if (d > 0)
			fs_buf_put(p->lv[d].b);
		p->lv[d].b = NULL;
	}
	if (from < p->depth)
		p->depth = from;
}

static int read_node(struct fs_btree *bt, uint64_t blk, unsigned level,
		     struct lvl *out)
{
	const struct fs_btree_blk *hb;
	struct fs_buf *b;
	int ret;

	ret = fs_buf_read(bt->fs, blk, FS_BT_BTREE, &b);
	if (ret == -EINVAL)
		ret = -EUCLEAN;
	if (ret < 0)
		return ret;
	hb = b->data;
	out->b = b;
	out->n = (uint8_t *)b->data + FS_BTREE_NODE_OFF;
	out->size = FS_BTREE_NODE_SIZE;
	out->idx = 0;
	if (hb->owner != bt->owner || !node_ok(out->n, out->size) ||
	    nh(out->n)->level != level) {
		FS_STAT_ADD(bt->fs, bad_blocks, 1);
		fs_buf_put(b);
		return -EUCLEAN;
	}
	return 0;
}

/* First leaf slot with key >= @key. */
static int lfind(uint8_t *n, uint64_t key)
{
	int lo = 0, hi = nh(n)->nkeys;

	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (lslot(n)[mid].key < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Child index for @key: last i with key_i <= key, or 0. */
static int ifind(uint8_t *n, uint64_t key)
{
	int lo = 1, hi = nh(n)->nkeys;

	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (iptr(n)[mid].key <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo - 1;
}

/* From level @d (already in the path), descend by @key (or leftmost /
 * rightmost when @edge is -1 / +1) down to a leaf. */
static int descend_from(struct fs_btree *bt, struct bpath *p, int d,
			uint64_t key, int edge)
{
	for (;;) {
		struct lvl *l = &p->lv[d];
		unsigned level = nh(l->n)->level;
		int ret;

		if (level == 0) {
			l->idx = edge < 0 ? 0 :
				 edge > 0 ? nh(l->n)->nkeys : lfind(l->n, key);
			return 0;
		}
		if (nh(l->n)->nkeys == 0 || d + 1 > (int)FS_BTREE_MAX_DEPTH)
			return -EUCLEAN;
		l->idx = edge < 0 ? 0 :
			 edge > 0 ? nh(l->n)->nkeys - 1 : ifind(l->n, key);
		ret = read_node(bt, iptr(l->n)[l->idx].child, level - 1,
				&p->lv[d + 1]);
		if (ret < 0)
			return ret;
		p->depth = d + 2;
		d++;
	}
}

static int descend(struct fs_btree *bt, struct bpath *p, uint64_t key)
{
	struct lvl *r = &p->lv[0];
	int ret;

	r->b = bt->root_buf;
	r->n = root_node(bt);
	r->size = bt->root_size;
	r->idx = 0;
	p->depth = 1;
	if (!node_ok(r->n, r->size)) {
		FS_STAT_ADD(bt->fs, bad_blocks, 1);
		return -EUCLEAN;
	}
	ret = descend_from(bt, p, 0, key, 0);
	if (ret < 0)
		path_release(p, 1);
	return ret;
}

/* Move to the next (dir > 0) or previous leaf. 0, -ENOENT at the end. */
static int path_step(struct fs_btree *bt, struct bpath *p, int dir)
{
	for (int d = p->depth - 2; d >= 0; d--) {
		struct lvl *l = &p->lv[d];
		int next = l->idx + dir;

		if (next < 0 || next >= nh(l->n)->nkeys)
			continue;
		path_release(p, d + 1);
		l->idx = next;
		p->depth = d + 2;
		if (read_node(bt, iptr(l->n)[next].child,
			      nh(l->n)->level - 1, &p->lv[d + 1]) < 0) {
			p->depth = d + 1;
			return -EUCLEAN;
		}
		return descend_from(bt, p, d + 1, 0, dir > 0 ? -1 : 1);
	}
	return -ENOENT;
}

static struct lvl *leaf(struct bpath *p)
{
	return &p->lv[p->depth - 1];
}

static int copy_val(struct lvl *l, int i, uint64_t *found, void *val,
		    size_t cap, size_t *vlen)
{
	const struct fs_btree_leaf_slot *s = &lslot(l->n)[i];

	if (s->off < nh(l->n)->free_end || s->off + s->len > l->size ||
	    s->len > FS_BTREE_VAL_MAX)
		return -EUCLEAN;
	if (found != NULL)
		*found = s->key;
	if (val != NULL)
		memcpy(val, l->n + s->off, cap < s->len ? cap : s->len);
	if (vlen != NULL)
		*vlen = s->len;
	return 0;
}

/* ---- lookups ---------------------------------------------------------- */

int fs_btree_lookup(struct fs_btree *bt, uint64_t key, void *val,
		    size_t cap, size_t *vlen)
{
	struct bpath p;
	struct lvl *l;
	int ret = descend(bt, &p, key);

	if (ret < 0)
		return ret;
	l = leaf(&p);
	if (l->idx < nh(l->n)->nkeys && lslot(l->n)[l->idx].key == key)
		ret = copy_val(l, l->idx, NULL, val, cap, vlen);
	else
		ret = -ENOENT;
	path_release(&p, 1);
	return ret;
}

int fs_btree_next(struct fs_btree *bt, uint64_t key, uint64_t *found,
		  void *val, size_t cap, size_t *vlen)
{
	struct bpath p;
	int ret = descend(bt, &p, key);

	while (ret == 0 && leaf(&p)->idx >= nh(leaf(&p)->n)->nkeys)
		ret = path_step(bt, &p, 1);
	if (ret == 0)
		ret = copy_val(leaf(&p), leaf(&p)->idx, found, val, cap, vlen);
	path_release(&p, 1);
	return ret;
}

int fs_btree_lookup_le(struct fs_btree *bt, uint64_t key, uint64_t *found,
		       void *val, size_t cap, size_t *vlen)
{
	struct bpath p;
	struct lvl *l;
	int ret = descend(bt, &p, key);

	if (ret < 0)
		return ret;
	l = leaf(&p);
	if (l->idx < nh(l->n)->nkeys && lslot(l->n)[l->idx].key == key) {
		ret = copy_val(l, l->idx, found, val, cap, vlen);
		goto out;
	}
	while (ret == 0 && leaf(&p)->idx == 0)
		ret = path_step(bt, &p, -1);
	if (ret == 0) {
		l = leaf(&p);
		ret = copy_val(l, l->idx - 1, found, val, cap, vlen);
	}
out:
	path_release(&p, 1);
	return ret;
}

int fs_btree_iterate(struct fs_btree *bt, uint64_t start, fs_btree_cb cb,
		     void *arg)
{
	struct bpath p;
	int ret = descend(bt, &p, start);

	while (ret == 0) {
		struct lvl *l = leaf(&p);

		if (l->idx >= nh(l->n)->nkeys) {
			ret = path_step(bt, &p, 1);
			continue;
		}
		{
			const struct fs_btree_leaf_slot *s =
				&lslot(l->n)[l->idx];

			if (s->off < nh(l->n)->free_end ||
			    s->off + s->len > l->size) {
				ret = -EUCLEAN;
				break;
			}
			ret = cb(arg, s->key, l->n + s->off, s->len);
		}
		l->idx++;
	}
	path_release(&p, 1);
	return ret == -ENOENT ? 0 : ret;
}

/* ---- node editing ----------------------------------------------------- */

static void leaf_insert(uint8_t *n, int idx, uint64_t key, const void *val,
			uint16_t len)
{
	struct fs_btree_nhdr *h = nh(n);
	struct fs_btree_leaf_slot *s = lslot(n);

	memmove(&s[idx + 1], &s[idx], (size_t)(h->nkeys - idx) * ENT);
	h->free_end -= len;
	memcpy(n + h->free_end, val, len);
	s[idx] = (struct fs_btree_leaf_slot){ .key = key,
		.off = h->free_end, .len = len };
	h->nkeys++;
}

static void leaf_remove(uint8_t *n, int idx)
{
	struct fs_btree_nhdr *h = nh(n);
	struct fs_btree_leaf_slot *s = lslot(n);
	uint16_t off = s[idx].off, len = s[idx].len;

	memmove(n + h->free_end + len, n + h->free_end, off - h->free_end);
	/* values below the removed one move up; so do empty values sitting
	 * at its start (they must stay >= free_end) */
	for (int i = 0; i < h->nkeys; i++)
		if (i != idx && s[i].off <= off)
			s[i].off += len;
	h->free_end += len;
	memmove(&s[idx], &s[idx + 1], (size_t)(h->nkeys - idx - 1) * ENT);
	h->nkeys--;
}

static void int_insert(uint8_t *n, int idx, uint64_t key, uint64_t child)
{
	struct fs_btree_ptr *q = iptr(n);

	memmove(&q[idx + 1], &q[idx], (size_t)(nh(n)->nkeys - idx) * ENT);
	q[idx] = (struct fs_btree_ptr){ key, child };
	nh(n)->nkeys++;
}

static void int_remove(uint8_t *n, int idx)
{
	struct fs_btree_ptr *q = iptr(n);

	memmove(&q[idx], &q[idx + 1], (size_t)(nh(n)->nkeys - idx - 1) * ENT);
	nh(n)->nkeys--;
}

/* Rebuild node @n (size @size, level @level) from entries [a, b). */
static void node_fill(uint8_t *n, uint32_t size, uint16_t level,
		      const struct ent *e, int a, int b)
{
	node_init(n, size, level);
	for (int i = a; i < b; i++) {
		if (level == 0)
			leaf_insert(n, i - a, e[i].key, e[i].val, e[i].len);
		else
			int_insert(n, i - a, e[i].key, e[i].child);
	}
}

/* Entries of node @n (copied to @tmp first, values point into it). */
static int node_entries(uint8_t *n, uint32_t size, uint8_t *tmp,
			struct ent *e)
{
	int k = nh(n)->nkeys;

	memcpy(tmp, n, size);
	for (int i = 0; i < k; i++) {
		if (nh(tmp)->level == 0) {
			const struct fs_btree_leaf_slot *s = &lslot(tmp)[i];

			e[i] = (struct ent){ .key = s->key, .val = tmp + s->off,
					     .len = s->len };
		} else {
			e[i] = (struct ent){ .key = iptr(tmp)[i].key,
					     .child = iptr(tmp)[i].child };
		}
	}
	return k;
}

static uint32_t ent_bytes(const struct ent *e, uint16_t level)
{
	return ENT + (level == 0 ? e->len : 0);
}

static int node_fits(const struct ent *e, int a, int b, uint32_t size,
		     uint16_t level)
{
	uint32_t sum = NHDR;

	for (int i = a; i < b; i++)
		sum += ent_bytes(&e[i], level);
	return sum <= size;
}

/* ---- insert ----------------------------------------------------------- */

#define POOL_MAX (FS_BTREE_MAX_DEPTH + 2)

struct pool {
	uint64_t blk[POOL_MAX];
	int n, used;
};

static int pool_fill(struct fs_tx *tx, struct fs_btree *bt, struct pool *pl,
		     int need)
{
	pl->n = pl->used = 0;
	while (pl->n < need) {
		uint64_t s;
		uint32_t len;
		int ret = fs_alloc(tx, bt->owner, 1, (uint32_t)(need - pl->n),
				   &s, &len);

		if (ret < 0) {
			for (int i = 0; i < pl->n; i++)
				fs_free(tx, pl->blk[i], 1);
			pl->n = 0;
			return ret;
		}
		for (uint32_t i = 0; i < len; i++)
			pl->blk[pl->n++] = s + i;
	}
	return 0;
}

static void pool_drain(struct fs_tx *tx, struct pool *pl)
{
	for (int i = pl->used; i < pl->n; i++)
		fs_free(tx, pl->blk[i], 1);
}

/* A fresh node block from the pool, as a path level. */
static int new_node(struct fs_tx *tx, struct fs_btree *bt, struct pool *pl,
		    uint16_t level, struct lvl *out)
{
	struct fs_btree_blk *hb;
	struct fs_buf *b;
	int ret;

	if (pl->used >= pl->n)
		return -EIO;	/* miscounted: cannot happen */
	ret = fs_buf_new(tx, pl->blk[pl->used++], FS_BT_BTREE, &b);
	if (ret < 0)
		return ret;
	hb = b->data;
	hb->owner = bt->owner;
	out->b = b;
	out->n = (uint8_t *)b->data + FS_BTREE_NODE_OFF;
	out->size = FS_BTREE_NODE_SIZE;
	out->idx = 0;
	node_init(out->n, out->size, level);
	return 0;
}

/* Move the root's content into a new block; the root points at it. */
static int grow_root(struct fs_tx *tx, struct fs_btree *bt,
		     struct bpath *p, struct pool *pl)
{
	static _Thread_local uint8_t tmp[FS_BLOCK_SIZE];
	static _Thread_local struct ent e[FS_BLOCK_SIZE / ENT];
	struct lvl *r = &p->lv[0], c;
	uint16_t level = nh(r->n)->level;
	int k, ret;

	if (p->depth >= (int)FS_BTREE_MAX_DEPTH)
		return -ENOSPC;
	ret = new_node(tx, bt, pl, level, &c);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, r->b);
	if (ret < 0) {
		fs_buf_put(c.b);
		return ret;
	}
	k = node_entries(r->n, r->size, tmp, e);
	node_fill(c.n, c.size, level, e, 0, k);
	c.idx = r->idx;
	node_init(r->n, r->size, (uint16_t)(level + 1));
	int_insert(r->n, 0, k > 0 ? e[0].key : 0, c.b->blkno);
	r->idx = 0;
	memmove(&p->lv[2], &p->lv[1], (size_t)(p->depth - 1) * sizeof(c));
	p->lv[1] = c;
	p->depth++;
	return 0;
}

/*
 * Split node at level @d of the path whose entries (with the new one
 * already merged in) are e[0..k): left half stays, right half goes to a
 * new node. *sep and *right = what the parent must insert after it.
 */
static int split_node(struct fs_tx *tx, struct fs_btree *bt, struct lvl *l,
		      struct pool *pl, const struct ent *e, int k,
		      uint64_t *sep, uint64_t *right)
{
	uint16_t level = nh(l->n)->level;
	uint32_t total = 0, cum = 0;
	struct lvl r;
	int s, ret;

	for (int i = 0; i < k; i++)
		total += ent_bytes(&e[i], level);
	for (s = 0; s < k - 1; s++) {
		cum += ent_bytes(&e[s], level);
		if (cum >= total / 2)
			break;
	}
	s++;	/* left gets [0, s), right [s, k) */
	if (s >= k)
		s = k - 1;
	if (!node_fits(e, 0, s, l->size, level) ||
	    !node_fits(e, s, k, FS_BTREE_NODE_SIZE, level))
		return -EIO;
	ret = new_node(tx, bt, pl, level, &r);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, l->b);
	if (ret == 0) {
		node_fill(l->n, l->size, level, e, 0, s);
		node_fill(r.n, r.size, level, e, s, k);
		*sep = e[s].key;
		*right = r.b->blkno;
	}
	fs_buf_put(r.b);
	return ret;
}

/* Does level @d of the path need a split to take its new entry? */
static int needs_split(struct bpath *p, int d, uint32_t leaf_need)
{
	struct lvl *l = &p->lv[d];

	if (nh(l->n)->level == 0)
		return lfree(l->n) < leaf_need;
	return nh(l->n)->nkeys >= icap(l->size);
}

/* Put (key, val) into the leaf of @p (replacing slot @rep if >= 0),
 * splitting upwards as needed. */
static int put(struct fs_tx *tx, struct fs_btree *bt, struct bpath *p,
	       uint64_t key, const void *val, uint16_t len, int rep)
{
	static _Thread_local uint8_t tmp[FS_BLOCK_SIZE];
	static _Thread_local struct ent e[FS_BLOCK_SIZE / ENT + 1];
	uint32_t leaf_need = ENT + len;
	struct pool pl;
	uint64_t sep, right;
	int need = 0, d, k, ret;
	struct lvl *l = leaf(p);

	if (rep >= 0)
		leaf_need = leaf_need > ENT + lslot(l->n)[rep].len ?
			leaf_need - ENT - lslot(l->n)[rep].len : 0;
	if (!needs_split(p, p->depth - 1, leaf_need)) {
		ret = fs_tx_write(tx, l->b);
		if (ret < 0)
			return ret;
		if (rep >= 0)
			leaf_remove(l->n, rep);
		leaf_insert(l->n, l->idx, key, val, len);
		return 0;
	}
	for (d = p->depth - 1; d >= 0 && needs_split(p, d, leaf_need); d--)
		need++;
	if (d < 0)
		need++;		/* the root grows */
	ret = pool_fill(tx, bt, &pl, need);
	if (ret < 0)
		return ret;
	if (d < 0) {
		ret = grow_root(tx, bt, p, &pl);
		if (ret < 0)
			goto out_drain;
	}
	/* the leaf: merge the new entry, split */
	l = leaf(p);
	k = node_entries(l->n, l->size, tmp, e);
	if (rep >= 0) {
		memmove(&e[rep], &e[rep + 1],
			(size_t)(k - rep - 1) * sizeof(*e));
		k--;
	}
	memmove(&e[l->idx + 1], &e[l->idx], (size_t)(k - l->idx) * sizeof(*e));
	e[l->idx] = (struct ent){ .key = key, .val = val, .len = len };
	k++;
	ret = split_node(tx, bt, l, &pl, e, k, &sep, &right);
	for (d = p->depth - 2; ret == 0 && d >= 0; d--) {
		struct lvl *u = &p->lv[d];

		if (nh(u->n)->nkeys < icap(u->size)) {
			ret = fs_tx_write(tx, u->b);
			if (ret == 0)
				int_insert(u->n, u->idx + 1, sep, right);
			goto out_drain;
		}
		if (d == 0) {
			ret = -EIO;	/* root was grown: cannot be full */
			break;
		}
		k = node_entries(u->n, u->size, tmp, e);
		memmove(&e[u->idx + 2], &e[u->idx + 1],
			(size_t)(k - u->idx - 1) * sizeof(*e));
		e[u->idx + 1] = (struct ent){ .key = sep, .child = right };
		k++;
		ret = split_node(tx, bt, u, &pl, e, k, &sep, &right);
	}
out_drain:
	pool_drain(tx, &pl);
	return ret;
}

int fs_btree_insert(struct fs_tx *tx, struct fs_btree *bt, uint64_t key,
		    const void *val, size_t len)
{
	struct bpath p;
	struct lvl *l;
	int ret;

	if (len > FS_BTREE_VAL_MAX)
		return -E2BIG;
	ret = descend(bt, &p, key);
	if (ret < 0)
		return ret;
	l = leaf(&p);
	if (l->idx < nh(l->n)->nkeys && lslot(l->n)[l->idx].key == key)
		ret = -EEXIST;
	else
		ret = put(tx, bt, &p, key, val, (uint16_t)len, -1);
	path_release(&p, 1);
	return ret;
}

int fs_btree_update(struct fs_tx *tx, struct fs_btree *bt, uint64_t key,
		    const void *val, size_t len)
{
	static _Thread_local uint8_t copy[FS_BTREE_VAL_MAX];
	struct bpath p;
	struct lvl *l;
	int ret, rep;

	if (len > FS_BTREE_VAL_MAX)
		return -E2BIG;
	ret = descend(bt, &p, key);
	if (ret < 0)
		return ret;
	l = leaf(&p);
	if (l->idx >= nh(l->n)->nkeys || lslot(l->n)[l->idx].key != key) {
		ret = -ENOENT;
		goto out;
	}
	rep = l->idx;
	memcpy(copy, val, len);	/* @val may point into the node */
	/* after removing slot rep, the new entry goes at the same index */
	ret = put(tx, bt, &p, key, copy, (uint16_t)len, rep);
out:
	path_release(&p, 1);
	return ret;
}

/* ---- delete ----------------------------------------------------------- */

/* Pull a single child back into the root while it fits. */
static int shrink_root(struct fs_tx *tx, struct fs_btree *bt)
{
	static _Thread_local uint8_t tmp[FS_BLOCK_SIZE];
	static _Thread_local struct ent e[FS_BLOCK_SIZE / ENT];
	uint8_t *r = root_node(bt);

	while (nh(r)->level > 0 && nh(r)->nkeys == 1) {
		struct lvl c;
		uint16_t level = (uint16_t)(nh(r)->level - 1);
		uint64_t blk = iptr(r)[0].child;
		int k, ret;

		ret = read_node(bt, blk, level, &c);
		if (ret < 0)
			return ret;
		k = node_entries(c.n, c.size, tmp, e);
		fs_buf_put(c.b);
		if (!node_fits(e, 0, k, bt->root_size, level))
			return 0;
		ret = fs_tx_write(tx, bt->root_buf);
		if (ret < 0)
			return ret;
		node_fill(r, bt->root_size, level, e, 0, k);
		ret = fs_free(tx, blk, 1);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int fs_btree_delete(struct fs_tx *tx, struct fs_btree *bt, uint64_t key)
{
	struct bpath p;
	struct lvl *l;
	int ret, d;

	ret = descend(bt, &p, key);
	if (ret < 0)
		return ret;
	l = leaf(&p);
	if (l->idx >= nh(l->n)->nkeys || lslot(l->n)[l->idx].key != key) {
		ret = -ENOENT;
		goto out;
	}
	ret = fs_tx_write(tx, l->b);
	if (ret < 0)
		goto out;
	leaf_remove(l->n, l->idx);
	/* free empty non-root nodes bottom-up */
	for (d = p.depth - 1; d > 0 && nh(p.lv[d].n)->nkeys == 0; d--) {
		struct lvl *u = &p.lv[d - 1];
		uint64_t blk = p.lv[d].b->blkno;

		ret = fs_tx_write(tx, u->b);
		if (ret < 0)
			goto out;
		int_remove(u->n, u->idx);
		path_release(&p, d);
		ret = fs_free(tx, blk, 1);
		if (ret < 0)
			goto out;
	}
	if (d == 0 && nh(p.lv[0].n)->level > 0 && nh(p.lv[0].n)->nkeys == 0) {
		ret = fs_tx_write(tx, bt->root_buf);
		if (ret == 0)
			node_init(root_node(bt), bt->root_size, 0);
	}
	path_release(&p, 1);
	if (ret == 0)
		ret = shrink_root(tx, bt);
	return ret;
out:
	path_release(&p, 1);
	return ret;
}

/* ---- whole-tree operations -------------------------------------------- */

static int free_subtree(struct fs_tx *tx, struct fs_btree *bt, uint64_t blk,
			unsigned level)
{
	struct lvl l;
	int ret;

	if (level > 0) {
		ret = read_node(bt, blk, level, &l);
		if (ret < 0)
			return ret;
		for (int i = 0; i < nh(l.n)->nkeys && ret == 0; i++)
			ret = free_subtree(tx, bt, iptr(l.n)[i].child,
					   level - 1);
		fs_buf_put(l.b);
		if (ret < 0)
			return ret;
	}
	return fs_free(tx, blk, 1);
}

int fs_btree_destroy(struct fs_tx *tx, struct fs_btree *bt)
{
	uint8_t *r = root_node(bt);
	int ret = 0;

	if (!node_ok(r, bt->root_size))
		return -EUCLEAN;
	for (int i = 0; nh(r)->level > 0 && i < nh(r)->nkeys && ret == 0; i++)
		ret = free_subtree(tx, bt, iptr(r)[i].child,
				   nh(r)->level - 1u);
	if (ret == 0)
		ret = fs_btree_create(tx, bt);
	return ret;
}

/* ---- restartable destroy ---------------------------------------------- */

/* Leftmost path (root to the first leaf). */
static int descend_first(struct fs_btree *bt, struct bpath *p)
{
	int ret = descend(bt, p, 0);

	if (ret == 0 && p->depth > 1) {
		path_release(p, 1);
		ret = descend_from(bt, p, 0, 0, -1);
		if (ret < 0)
			path_release(p, 1);
	}
	return ret;
}

/* Hand the first @k entries of leaf @n to @drop, in key order. */
static int drop_entries(struct fs_tx *tx, uint8_t *n, int k,
			fs_btree_drop_fn drop, void *arg)
{
	static _Thread_local uint8_t v[FS_BTREE_VAL_MAX];

	for (int i = 0; drop != NULL && i < k; i++) {
		const struct fs_btree_leaf_slot *sl = &lslot(n)[i];
		int ret;

		memcpy(v, n + sl->off, sl->len);
		ret = drop(arg, tx, sl->key, v, sl->len);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Remove the first @k entries of leaf @n. */
static void leaf_remove_first(uint8_t *n, uint32_t size, int k)
{
	if (k >= nh(n)->nkeys) {
		node_init(n, size, 0);
		return;
	}
	while (k-- > 0)
		leaf_remove(n, 0);
}

/* The first leaf (not the root) is empty now: free it and every ancestor
 * that becomes empty, removing their pointers; adds the credits used to
 * *used. The root becomes an empty leaf when its last child goes. */
static int free_first_leaf(struct fs_tx *tx, struct fs_btree *bt,
			   struct bpath *p, unsigned *used)
{
	int ret = 0;

	for (int d = p->depth - 1; d > 0 && ret == 0; d--) {
		struct lvl *u = &p->lv[d - 1];
		uint64_t blk = p->lv[d].b->blkno;

		if (nh(p->lv[d].n)->nkeys > 0)
			break;
		ret = fs_tx_write(tx, u->b);
		if (ret < 0)
			break;
		int_remove(u->n, 0);
		path_release(p, d);
		ret = fs_free(tx, blk, 1);
		*used += 1 + fs_alloc_credits(bt->fs);
	}
	if (ret == 0 && nh(root_node(bt))->nkeys == 0)
		node_init(root_node(bt), bt->root_size, 0);
	return ret;
}

unsigned fs_btree_destroy_credits(struct fs_btree *bt, unsigned drop_credits)
{
	uint8_t *r = root_node(bt);
	unsigned depth = 1 + (node_ok(r, bt->root_size) ? nh(r)->level : 0);
	unsigned min = 2 + depth * (1 + fs_alloc_credits(bt->fs)) +
		       4 * drop_credits;
	unsigned want = fs_tx_max_credits(bt->fs) / 2;

	return want > min ? want : min;
}

int fs_btree_destroy_step(struct fs_tx *tx, struct fs_btree *bt,
			  unsigned credits, fs_btree_drop_fn drop,
			  unsigned drop_credits, void *arg)
{
	unsigned fc = fs_alloc_credits(bt->fs), used = 1, cascade;
	struct bpath p;
	int ret, progress = 0;

	ret = fs_tx_write(tx, bt->root_buf);
	while (ret == 0) {
		struct lvl *l;
		int n, k;

		ret = descend_first(bt, &p);
		if (ret < 0)
			break;
		l = leaf(&p);
		n = nh(l->n)->nkeys;
		/* the leaf's write, then freeing it and its empty ancestors */
		cascade = p.depth > 1 ? 1 + (unsigned)(p.depth - 1) * (1 + fc)
				      : 0;
		if (used + cascade + (uint64_t)n * drop_credits <= credits) {
			k = n;		/* the whole leaf */
		} else if (drop_credits > 0 && n > 1 &&
			   used + 1 + drop_credits <= credits) {
			k = (int)((credits - used - 1) / drop_credits);
			if (k > n - 1)
				k = n - 1;
		} else {		/* budget spent */
			path_release(&p, 1);
			ret = progress ? 0 : -EINVAL;
			break;
		}
		ret = drop_entries(tx, l->n, k, drop, arg);
		if (ret == 0)
			ret = fs_tx_write(tx, l->b);
		if (ret == 0)
			leaf_remove_first(l->n, l->size, k);
		used += 1 + k * drop_credits;
		progress = 1;
		if (ret == 0 && k < n) {	/* leaf partly dropped */
			path_release(&p, 1);
			break;
		}
		if (ret == 0 && p.depth > 1)
			ret = free_first_leaf(tx, bt, &p, &used);
		path_release(&p, 1);
		if (ret == 0 && nh(root_node(bt))->nkeys == 0)
			return 1;
	}
	return ret;
}

unsigned fs_btree_credits(struct fs_btree *bt)
{
	uint8_t *r = root_node(bt);
	unsigned depth = 1 + (node_ok(r, bt->root_size) ? nh(r)->level : 0);

	/* every level may split (old + new node) plus a root growth, and
	 * the allocator's header and bitmaps */
	return 2 * (depth + 1) + 1 + fs_alloc_credits(bt->fs);
}

static int stat_subtree(struct fs_btree *bt, uint64_t blk, unsigned level,
			uint64_t *entries, uint64_t *nodes)
{
	struct lvl l;
	int ret = read_node(bt, blk, level, &l);

	if (ret < 0)
		return ret;
	(*nodes)++;
	if (level == 0)
		*entries += nh(l.n)->nkeys;
	for (int i = 0; level > 0 && i < nh(l.n)->nkeys && ret == 0; i++)
		ret = stat_subtree(bt, iptr(l.n)[i].child, level - 1, entries,
				   nodes);
	fs_buf_put(l.b);
	return ret;
}

int fs_btree_stat(struct fs_btree *bt, unsigned *depth, uint64_t *entries,
		  uint64_t *nodes)
{
	uint8_t *r = root_node(bt);
	int ret = 0;

	*entries = 0;
	*nodes = 0;
	if (!node_ok(r, bt->root_size))
		return -EUCLEAN;
	*depth = 1u + nh(r)->level;
	if (nh(r)->level == 0)
		*entries = nh(r)->nkeys;
	for (int i = 0; nh(r)->level > 0 && i < nh(r)->nkeys && ret == 0; i++)
		ret = stat_subtree(bt, iptr(r)[i].child, nh(r)->level - 1u,
				   entries, nodes);
	return ret;
}
