/*
 * lk_dir.c — the resource directory. The directory node of a name is
 * memv[(hash >> 16) % nmemb], or memv[(place - 1) % nmemb] for a name with
 * a placement key (lk_dir_node): every member computes the same node
 * from the same name and membership, so no lock server is needed. The directory
 * node records which node masters the name; the first node that looks a
 * name up becomes its master, but a placed name is mastered by its
 * directory node itself (lookup_remote). Entries go away when the master drops
 * the resource from its toss list (REMOVE) and are rebuilt from the masters at
 * each membership change (lk_recover.c). A name this node both directs and
 * masters has no entry of its own: its resource (master = this node) is the
 * entry, as the Linux DLM's rsb table is its directory; this saves an entry
 * per lock of a node working alone or on its own placed names (the 1M-file
 * find: 130,000 of 56 bytes). All under ls->mu.
 */
#include <stdlib.h>
#include <string.h>

#include "lockmgr/lk_internal.h"

static struct lk_dirent **slot(struct lk_ls *ls, const struct lk_name *n,
			       uint64_t hash)
{
	struct lk_dirent **pp = &ls->dir_hash[hash & LK_HASH_MASK];

	while (*pp != NULL &&
	       ((*pp)->hash != hash || !lk_name_eq(&(*pp)->name, n)))
		pp = &(*pp)->hnext;
	return pp;
}

/* This node masters @n and has its resource: the resource is the entry. */
static int res_is_entry(struct lk_ls *ls, const struct lk_name *n,
			uint64_t hash)
{
	struct lk_res *res = lk_res_find(ls, n, hash);

	return res != NULL && res->master == ls->nodeid;
}

/* The master the directory knows for @n, 0 if none. */
static uint32_t dir_master(struct lk_ls *ls, const struct lk_name *n,
			   uint64_t hash)
{
	struct lk_dirent *d = *slot(ls, n, hash);

	if (d != NULL)
		return d->master;
	return res_is_entry(ls, n, hash) ? ls->nodeid : 0;
}

static void dirent_del(struct lk_ls *ls, struct lk_dirent **pp)
{
	struct lk_dirent *d = *pp;

	*pp = d->hnext;
	lk_pool_put(&ls->dir_pool, d);
	ls->ndir--;
	ls->stats.dir_entries = ls->ndir;
}

void lk_dir_set(struct lk_ls *ls, const struct lk_name *n, uint64_t hash,
		uint32_t master)
{
	struct lk_dirent **pp = slot(ls, n, hash);
	struct lk_dirent *d = *pp;

	if (master == ls->nodeid && res_is_entry(ls, n, hash)) {
		if (d != NULL)
			dirent_del(ls, pp);
		return;
	}
	if (d == NULL) {
		d = lk_pool_get(&ls->dir_pool);
		if (d == NULL)
			return;
		d->name = *n;
		d->hash = hash;
		*pp = d;
		ls->ndir++;
		ls->stats.dir_entries = ls->ndir;
	}
	d->master = master;
}

/* The master of @n; makes @requester the master if there is none. This
 * node's own lookups (requester = this node) come with the resource,
 * whose master the caller sets to the answer: no entry is made. */
uint32_t lk_dir_lookup(struct lk_ls *ls, const struct lk_name *n, uint64_t hash,
		       uint32_t requester)
{
	uint32_t m = dir_master(ls, n, hash);

	if (m != 0)
		return m;
	if (requester != ls->nodeid || lk_res_find(ls, n, hash) == NULL)
		lk_dir_set(ls, n, hash, requester);
	return requester;
}

/*
 * A LOOKUP from @requester: a placed name nobody masters yet is mastered
 * here, by its directory node (the node whose allocator made the object:
 * PROTOCOL.md §5), not by the first node that asks. Otherwise a node
 * that only read another node's objects first (a du of its tree after a
 * fresh mount) would master them, and each of their owner's later
 * requests (an rm of its own tree: PR, then EX, on the inode and iopen
 * locks of every entry) would be a round trip to the reader. The
 * resource is made here, idle on the toss list, until the requester's
 * request comes. Falls back to the requester if it cannot be made, or
 * if this node has locks on it waiting for a master (not expected: a
 * directory node's own lookups are answered at once).
 */
static uint32_t lookup_remote(struct lk_ls *ls, const struct lk_name *n,
			      uint64_t hash, uint32_t requester)
{
	struct lk_res *res;

	if (n->place == 0 || dir_master(ls, n, hash) != 0)
		return lk_dir_lookup(ls, n, hash, requester);
	res = lk_res_get(ls, n);
	if (res == NULL)
		return lk_dir_lookup(ls, n, hash, requester);
	if (!lk_list_empty(&res->locks) || res->q.nlocks != 0) {
		lk_res_maybe_toss(ls, res);
		return lk_dir_lookup(ls, n, hash, requester);
	}
	res->master = ls->nodeid; /* the resource is the entry */
	res->lookup_sent = 0;
	lk_res_maybe_toss(ls, res);
	ls->stats.placed_mastered++;
	return ls->nodeid;
}

void lk_dir_remove(struct lk_ls *ls, const struct lk_name *n, uint64_t hash,
		   uint32_t master)
{
	struct lk_dirent **pp = slot(ls, n, hash);

	if (*pp != NULL && (*pp)->master == master)
		dirent_del(ls, pp);
}

void lk_dir_clear(struct lk_ls *ls)
{
	for (size_t i = 0; i < LK_HASH_SIZE; i++) {
		while (ls->dir_hash[i] != NULL) {
			struct lk_dirent *d = ls->dir_hash[i];

			ls->dir_hash[i] = d->hnext;
			lk_pool_put(&ls->dir_pool, d);
		}
	}
	ls->ndir = 0;
	ls->stats.dir_entries = 0;
}

static int is_member(const struct lk_ls *ls, uint32_t node)
{
	return node > 0 && node < LK_MAX_NODES &&
	       (ls->members & (1ull << node));
}

static void rx_name(struct lk_ls *ls, uint32_t sender, unsigned type,
		    const struct lk_rec_name *r, uint64_t hash)
{
	struct lk_rec_name *rep;
	struct lk_res *res;

	if (lk_wire_check_name(&r->name) != 0) {
		ls->stats.bad_frames++;
		return;
	}
	switch (type) {
	case LK_M_LOOKUP:
		if (lk_dir_node(ls, &r->name, hash) != ls->nodeid) {
			ls->stats.bad_frames++;
			lk_log(ls, 1, "LOOKUP from %u for a name not ours",
			       sender);
			return;
		}
		rep = lk_out_add(ls, sender, LK_M_LOOKUP_REPLY);
		if (rep == NULL)
			return;
		rep->name = r->name;
		rep->master = lookup_remote(ls, &r->name, hash, sender);
		break;
	case LK_M_LOOKUP_REPLY:
		res = lk_res_find(ls, &r->name, hash);
		if (res == NULL || !res->lookup_sent ||
		    !is_member(ls, r->master)) {
			ls->stats.bad_frames++;
			return;
		}
		res->master = r->master;
		lk_res_master_known(ls, res);
		break;
	case LK_M_REMOVE:
		if (r->master == sender)
			lk_dir_remove(ls, &r->name, hash, sender);
		break;
	}
}

enum { LK_DIR_CHUNK = 256 };

/* Like the master's lock records (lk_master_rx_locks): hash a chunk of
 * names and start loading their buckets, then handle them. */
void lk_dir_rx(struct lk_ls *ls, uint32_t sender, unsigned type,
	       const struct lk_rec_name *r, unsigned n)
{
	void **table = type == LK_M_LOOKUP_REPLY ? (void **)ls->res_hash
						 : (void **)ls->dir_hash;
	uint64_t hv[LK_DIR_CHUNK];

	for (unsigned base = 0; base < n; base += LK_DIR_CHUNK) {
		unsigned c = n - base < LK_DIR_CHUNK ? n - base : LK_DIR_CHUNK;

		for (unsigned j = 0; j < c; j++) {
			hv[j] = lk_name_hash(&r[base + j].name);
			__builtin_prefetch(&table[hv[j] & LK_HASH_MASK]);
		}
		for (unsigned j = 0; j < c; j++)
			rx_name(ls, sender, type, &r[base + j], hv[j]);
	}
}
