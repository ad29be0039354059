/*
 * lk_list.h — intrusive circular doubly linked list used across lockmgr.
 *
 * An empty list is a head pointing at itself. Nodes know nothing about
 * what protects them: each user documents that at the field.
 */
#ifndef UCFS_LK_LIST_H
#define UCFS_LK_LIST_H

#include <stddef.h>

struct lk_list {
	struct lk_list *next, *prev;
};

#define LK_CONTAINER(ptr, type, member)                                        \
	((type *)((char *)(ptr)-offsetof(type, member)))

static inline void lk_list_init(struct lk_list *h)
{
	h->next = h;
	h->prev = h;
}

static inline int lk_list_empty(const struct lk_list *h)
{
	return h->next == h;
}

static inline void lk_list_add_tail(struct lk_list *h, struct lk_list *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}

static inline void lk_list_del(struct lk_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n;
	n->prev = n;
}

/* Iterate; safe against deletion of the current node. */
#define lk_list_each(pos, nxt, head)                                           \
	for ((pos) = (head)->next, (nxt) = (pos)->next; (pos) != (head);       \
	     (pos) = (nxt), (nxt) = (pos)->next)

#endif /* UCFS_LK_LIST_H */
