/*
 * fs_fsck_tab.c — the one hash table of fsck: fixed-size records keyed
 * by their first field, a nonzero uint64_t (an inode or block number),
 * in open addressing with linear probing over a power-of-two array that
 * doubles when half full. It holds the per-inode records of the walk and
 * the journal overlay (fs_fsck_internal.h).
 *
 * Invariants: a record whose key is 0 is an empty slot; at most half the
 * slots are used, so every probe ends; records never move except when
 * the table grows (pointers from fsck_tab_find/get are valid until the
 * next fsck_tab_get).
 */
#include "fusefs/fsck/fs_fsck_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t key_at(const struct fsck_tab *t, size_t i)
{
	uint64_t k;

	memcpy(&k, t->ent + i * t->esize, sizeof(k));
	return k;
}

static size_t home_slot(const struct fsck_tab *t, uint64_t key)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & (t->cap - 1);
}

/* The slot holding @key, or the empty slot where it would go. */
static size_t probe(const struct fsck_tab *t, uint64_t key)
{
	size_t i = home_slot(t, key);

	while (key_at(t, i) != 0 && key_at(t, i) != key)
		i = (i + 1) & (t->cap - 1);
	return i;
}

static int tab_grow(struct fsck_tab *t)
{
	struct fsck_tab old = *t;

	t->cap = old.cap ? old.cap * 2 : 1024;
	t->ent = calloc(t->cap, t->esize);
	if (t->ent == NULL) {
		*t = old;
		return -ENOMEM;
	}
	for (size_t i = 0; i < old.cap; i++) {
		uint64_t k = key_at(&old, i);

		if (k != 0)
			memcpy(t->ent + probe(t, k) * t->esize,
			       old.ent + i * old.esize, t->esize);
	}
	free(old.ent);
	return 0;
}

void *fsck_tab_find(const struct fsck_tab *t, uint64_t key)
{
	size_t i;

	if (t->cap == 0)
		return NULL;
	i = probe(t, key);
	return key_at(t, i) == key ? t->ent + i * t->esize : NULL;
}

void *fsck_tab_get(struct fsck_tab *t, uint64_t key)
{
	uint8_t *e;

	if ((t->n + 1) * 2 > t->cap && tab_grow(t) < 0)
		return NULL;
	e = t->ent + probe(t, key) * t->esize;
	if (key_at(t, (size_t)(e - t->ent) / t->esize) == 0) {
		memcpy(e, &key, sizeof(key));
		t->n++;
	}
	return e;
}

void *fsck_tab_at(const struct fsck_tab *t, size_t i)
{
	return key_at(t, i) != 0 ? t->ent + i * t->esize : NULL;
}

void fsck_tab_free(struct fsck_tab *t)
{
	free(t->ent);
	t->ent = NULL;
	t->cap = t->n = 0;
}
