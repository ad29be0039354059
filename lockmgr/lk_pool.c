/*
 * lk_pool.c — fixed-size object pools (lkbs, master copies, resources)
 * carved out of large slabs.
 *
 * A batch creates thousands of these objects in one go and then walks
 * them in the same order three times (submit, grant, reply). Carved from
 * one slab, consecutive objects are consecutive in memory, so those walks
 * are sequential and the hardware prefetcher hides most of their cache
 * misses; from malloc they were scattered over the heap (and freed back
 * one by one). Freed objects go on a LIFO list (a reused object is still
 * warm) and are never returned to the system before lk_pool_destroy: a
 * pool keeps its peak size. Objects are 16-byte aligned and packed (a
 * cache line per object would waste a third of the lines a walk loads).
 *
 * Not thread-safe: each pool belongs to one lockspace, under ls->mu.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "lockmgr/lk_internal.h"

#define LK_SLAB_BYTES (256u << 10)
#define LK_LINE 64
#define LK_ALIGN 16 /* objects packed densely: a walk touches fewer lines */

struct lk_slab {
	struct lk_slab *next;
};

void lk_pool_init(struct lk_pool *p, size_t size)
{
	memset(p, 0, sizeof(*p));
	p->size = (size + LK_ALIGN - 1) & ~(size_t)(LK_ALIGN - 1);
}

/* A new slab; its objects are handed out in address order from p->next
 * (not threaded on the free list up front, which would touch every page
 * of the slab at once). */
int lk_pool_grow(struct lk_pool *p)
{
	struct lk_slab *s = aligned_alloc(LK_LINE, LK_SLAB_BYTES);

	if (s == NULL)
		return -1;
	s->next = p->slabs;
	p->slabs = s;
	p->nslabs++;
	p->next = (char *)s + LK_LINE;
	p->end = (char *)s + LK_SLAB_BYTES;
	return 0;
}

void *lk_pool_get(struct lk_pool *p)
{
	void *obj = lk_pool_get_raw(p);

	if (obj != NULL)
		memset(obj, 0, p->size);
	return obj;
}

/* Objects lk_pool_get can hand out without growing. */
static size_t pool_ready(const struct lk_pool *p)
{
	return p->n + (p->next != NULL ? (size_t)(p->end - p->next) / p->size
				       : 0);
}

int lk_pool_reserve(struct lk_pool *p, size_t n)
{
	while (pool_ready(p) < n) {
		/* what is left of the newest slab goes on the free list
		 * first, so that growing loses nothing */
		while (p->next != NULL &&
		       (size_t)(p->end - p->next) >= p->size) {
			lk_pool_put(p, p->next);
			p->next += p->size;
		}
		if (lk_pool_grow(p) != 0)
			return -ENOMEM;
	}
	return 0;
}

void lk_pool_destroy(struct lk_pool *p)
{
	while (p->slabs != NULL) {
		struct lk_slab *s = p->slabs;

		p->slabs = s->next;
		free(s);
	}
	p->head = NULL;
	p->next = p->end = NULL;
	p->n = 0;
	p->nslabs = 0;
}

size_t lk_pool_bytes(const struct lk_pool *p)
{
	return p->nslabs * LK_SLAB_BYTES;
}

/*
 * The four hash tables of a lockspace in one block, asked for as a
 * transparent huge page where the system offers them: a batch hits one
 * random bucket per name, and with 4 KiB pages that was also one TLB miss
 * per name. Zeroed. NULL on -ENOMEM.
 */
void *lk_tables_alloc(size_t bytes)
{
	size_t align = 2u << 20;
	size_t len = (bytes + align - 1) & ~(align - 1);
	void *t = aligned_alloc(align, len);

	if (t == NULL)
		return NULL;
	(void)madvise(t, len, MADV_HUGEPAGE); /* a hint; may be refused */
	memset(t, 0, bytes);
	return t;
}
