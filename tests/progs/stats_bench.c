/*
 * stats_bench.c — cost of the always-on op accounting, in ns per op:
 * fs_stats_op_begin + fs_stats_op_end against a bare pair of clock reads
 * (what any latency measurement needs anyway) and an empty loop.
 *
 *   stats_bench [--threads N] [--iters N]
 *
 * Prints one line per variant: "name threads ns_per_op".
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusefs/stats/fs_stats.h"

struct job {
	struct fs_stats *st;
	long iters;
	int variant; /* 0 empty, 1 clock pair, 2 stats */
	volatile uint64_t sink;
};

static void *run(void *arg)
{
	struct job *j = arg;
	uint64_t s = 0;

	for (long i = 0; i < j->iters; i++) {
		if (j->variant == 1) {
			uint64_t t0 = fs_stats_now();

			s += fs_stats_now() - t0;
		} else if (j->variant == 2) {
			fs_stats_op_end(j->st, (enum fs_op)(i & 7),
					fs_stats_op_begin(), 0);
		} else {
			s += (uint64_t)i;
		}
	}
	j->sink = s;
	return NULL;
}

static double measure(struct fs_stats *st, int variant, int threads, long iters)
{
	pthread_t th[64];
	struct job jobs[64];
	uint64_t t0 = fs_stats_now();

	for (int i = 0; i < threads; i++) {
		jobs[i] = (struct job){st, iters, variant, 0};
		pthread_create(&th[i], NULL, run, &jobs[i]);
	}
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	/* wall ns per op per thread */
	return (double)(fs_stats_now() - t0) / (double)iters;
}

int main(int argc, char **argv)
{
	static const char *const names[] = {"empty", "clock_pair", "stats_op"};
	struct fs_stats *st;
	int threads = 1;
	long iters = 5000000;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--threads") == 0)
			threads = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--iters") == 0)
			iters = atol(argv[i + 1]);
	}
	if (threads < 1 || threads > 64 || iters < 1) {
		fprintf(stderr, "usage: stats_bench [--threads 1..64] "
				"[--iters N]\n");
		return 2;
	}
	if (fs_stats_new(&st) != 0)
		return 1;
	for (int v = 0; v < 3; v++)
		printf("%s %d %.1f\n", names[v], threads,
		       measure(st, v, threads, iters));
	fs_stats_free(st);
	return 0;
}
