/*
 * lk_name.c — resource names: building, hashing (the same on every node,
 * so the directory node of a name is agreed without messages) and
 * printing.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lockmgr/lk.h"

int lk_name_make(struct lk_name *n, uint16_t type, uint64_t num,
		 const char *str)
{
	size_t len = str != NULL ? strlen(str) : 0;

	if (len > LK_NAME_STR)
		return -EINVAL;
	memset(n, 0, sizeof(*n));
	n->type = type;
	n->num = num;
	n->slen = (uint16_t)len;
	if (len > 0)
		memcpy(n->str, str, len);
	return 0;
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

uint64_t lk_name_hash(const struct lk_name *n)
{
	uint64_t h = mix64(n->num ^ ((uint64_t)n->type << 48));
	uint64_t w;

	for (unsigned i = 0; i < n->slen && i < LK_NAME_STR; i += 8) {
		w = 0;
		memcpy(&w, n->str + i, 8);
		h = mix64(h ^ w);
	}
	return h;
}

const char *lk_name_fmt(const struct lk_name *n, char *buf, size_t len)
{
	int slen = n->slen <= LK_NAME_STR ? n->slen : LK_NAME_STR;

	if (slen > 0)
		snprintf(buf, len, "%u:%" PRIu64 ":%.*s", n->type, n->num, slen,
			 n->str);
	else
		snprintf(buf, len, "%u:%" PRIu64, n->type, n->num);
	return buf;
}
