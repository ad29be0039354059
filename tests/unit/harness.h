/*
 * harness.h — the unit-test harness shared by tests/unit/test_*.c.
 *
 * A test file defines static void functions and runs them from main():
 *
 *	static void test_roundtrip(void) { CHECK(x == 1); CHECK_EQ(a, b); }
 *	int main(int argc, char **argv)
 *	{
 *		t_init(argc, argv);
 *		T_RUN(test_roundtrip);
 *		return t_done();
 *	}
 *
 * Each case prints "PASS name" or "FAIL name" (tests/run.sh counts these).
 * A failed CHECK prints file:line and the expression and fails the case but
 * keeps going; REQUIRE returns from the case. Randomized tests take their
 * seed from t_seed(): "--seed N" on the command line, else $UCFS_SEED, else
 * a fixed default, and print it so a failure can be replayed. Never seeded
 * from the clock.
 */
#ifndef UCFS_TEST_HARNESS_H
#define UCFS_TEST_HARNESS_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_case_failed;
static int t_total_failed;
static uint64_t t_seed_value = 0x5eed;

#define CHECK(cond)                                                        \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n",       \
				__FILE__, __LINE__, #cond);                \
			t_case_failed = 1;                                 \
		}                                                          \
	} while (0)

#define CHECK_EQ(a, b)                                                     \
	do {                                                               \
		long long t_a_ = (long long)(a), t_b_ = (long long)(b);    \
		if (t_a_ != t_b_) {                                        \
			fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", \
				__FILE__, __LINE__, #a, #b, t_a_, t_b_);   \
			t_case_failed = 1;                                 \
		}                                                          \
	} while (0)

#define REQUIRE(cond)                                                      \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: REQUIRE(%s) failed\n",     \
				__FILE__, __LINE__, #cond);                \
			t_case_failed = 1;                                 \
			return;                                            \
		}                                                          \
	} while (0)

#define T_RUN(fn) t_run(#fn, fn)

static inline void t_run(const char *name, void (*fn)(void))
{
	t_case_failed = 0;
	fn();
	printf("%s %s\n", t_case_failed ? "FAIL" : "PASS", name);
	fflush(stdout);
	t_total_failed += t_case_failed;
}

static inline void t_init(int argc, char **argv)
{
	const char *env = getenv("UCFS_SEED");

	if (env != NULL)
		t_seed_value = strtoull(env, NULL, 0);
	for (int i = 1; i + 1 < argc; i++)
		if (strcmp(argv[i], "--seed") == 0)
			t_seed_value = strtoull(argv[i + 1], NULL, 0);
	setvbuf(stdout, NULL, _IOLBF, 0);
}

/* A xorshift64 stream for randomized cases: t_rnd_seed(t_seed()) once,
 * then t_rnd(). */
static uint64_t t_rng_state = 1;

static inline void t_rnd_seed(uint64_t seed)
{
	t_rng_state = seed | 1;
}

static inline uint64_t t_rnd(void)
{
	t_rng_state ^= t_rng_state << 13;
	t_rng_state ^= t_rng_state >> 7;
	t_rng_state ^= t_rng_state << 17;
	return t_rng_state;
}

/* splitmix64: the next number of a stream a test keeps in *@state
 * (several independent, reproducible streams, e.g. one per run) */
static inline uint64_t t_splitmix(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The seed for randomized cases; printed once so failures replay. */
static inline uint64_t t_seed(void)
{
	printf("seed %" PRIu64 " (replay with --seed %" PRIu64 ")\n",
	       t_seed_value, t_seed_value);
	return t_seed_value;
}

static inline int t_done(void)
{
	return t_total_failed != 0;
}

#endif /* UCFS_TEST_HARNESS_H */
