/*
 * fz_common.h — what every harness in tests/fuzz/ shares.
 *
 * A harness is one file tests/fuzz/fuzz_NAME.c defining
 * LLVMFuzzerTestOneInput(); the Makefile links it with libFuzzer (make
 * fuzz), with AFL++'s driver (FUZZING.md), or with replay.c into
 * build/tests/test_fuzz_NAME, which `make test` runs over the corpora in
 * tests/fuzz/NAME/. fz_fail() is how a harness reports a broken invariant:
 * it prints why and aborts, which every driver records as a crash with
 * the input that caused it.
 */
#ifndef UCFS_FZ_COMMON_H
#define UCFS_FZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fz_fail(...)                                                           \
	do {                                                                   \
		fprintf(stderr, "fuzz invariant broken: " __VA_ARGS__);        \
		fputc('\n', stderr);                                           \
		abort();                                                       \
	} while (0)

/* $FZ_WRITE_SEED names a file: write @len bytes of @seed to it (a harness
 * whose best seed is built at run time, such as a whole image, uses it;
 * make fuzz runs each harness once that way). */
static inline void fz_write_seed(const void *seed, size_t len)
{
	const char *path = getenv("FZ_WRITE_SEED");
	FILE *f;

	if (path == NULL || (f = fopen(path, "wb")) == NULL)
		return;
	fwrite(seed, 1, len, f);
	fclose(f);
}

#endif /* UCFS_FZ_COMMON_H */
