/*
 * test_lk_pool.c — the object pools of lockmgr (lk_pool.c): objects come
 * zeroed, aligned and in memory order from a fresh slab, a freed object
 * is the next one handed out, a pool grows past one slab, and destroying
 * it frees everything (checked under ASan by `make check`).
 */
#include <stdint.h>

#include "lockmgr/lk_internal.h"
#include "tests/unit/harness.h"

static void test_fresh_objects_in_order(void)
{
	struct lk_pool p;
	char *a, *b;

	lk_pool_init(&p, 200);
	CHECK_EQ(p.size % 16, 0);
	CHECK(p.size >= 200);
	a = lk_pool_get(&p);
	b = lk_pool_get(&p);
	REQUIRE(a != NULL && b != NULL);
	CHECK_EQ((uintptr_t)a % 16, 0);
	CHECK_EQ(b - a, (long long)p.size);
	for (size_t i = 0; i < p.size; i++)
		CHECK_EQ(a[i] | b[i], 0);
	lk_pool_destroy(&p);
}

static void test_reuse_is_lifo_and_zeroed(void)
{
	struct lk_pool p;
	char *a, *b, *c;

	lk_pool_init(&p, 80);
	a = lk_pool_get(&p);
	b = lk_pool_get(&p);
	REQUIRE(a != NULL && b != NULL);
	memset(a, 0x5a, 80);
	memset(b, 0x5a, 80);
	lk_pool_put(&p, a);
	lk_pool_put(&p, b);
	c = lk_pool_get(&p);
	CHECK(c == b);
	for (int i = 0; i < 80; i++)
		CHECK_EQ(c[i], 0);
	CHECK(lk_pool_get(&p) == a);
	lk_pool_destroy(&p);
}

static void test_grows_past_a_slab(void)
{
	enum { N = 5000 }; /* 5000 x 416 bytes: several slabs */
	static void *o[N];
	struct lk_pool p;
	int distinct = 1;

	lk_pool_init(&p, 416);
	for (int i = 0; i < N; i++) {
		o[i] = lk_pool_get(&p);
		REQUIRE(o[i] != NULL);
		memset(o[i], i & 0xff, 416);
	}
	for (int i = 1; i < N; i++)
		distinct &= o[i] != o[i - 1];
	CHECK(distinct);
	for (int i = 0; i < N; i++)
		lk_pool_put(&p, o[i]);
	CHECK(p.n >= N);
	lk_pool_destroy(&p);
	CHECK_EQ(p.n, 0);
}

static void test_tables_zeroed(void)
{
	size_t bytes = 4 * LK_HASH_SIZE * sizeof(void *);
	uint64_t *t = lk_tables_alloc(bytes);
	int zero = 1;

	REQUIRE(t != NULL);
	for (size_t i = 0; i < bytes / sizeof(*t); i++)
		zero &= t[i] == 0;
	CHECK(zero);
	free(t);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_fresh_objects_in_order);
	T_RUN(test_reuse_is_lifo_and_zeroed);
	T_RUN(test_grows_past_a_slab);
	T_RUN(test_tables_zeroed);
	return t_done();
}
