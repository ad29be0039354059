/*
 * core_databench — file data writes the way an untar does them: for each
 * of N files, one handle that allocates 1..10 blocks (4-40 KiB) and writes
 * the data, then one sync at the end. Run three ways on the same image:
 * synchronous bd_write (the old path), write-behind (fs_data_write) with
 * data=ordered, and write-behind with data=writeback. Prints the time per
 * file and the total for each.
 *
 *   core_databench IMAGE [NFILES [SEED]]   (the image is reformatted)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fusefs/core/fs_internal.h"

enum { M_SYNC, M_ORDERED, M_WRITEBACK };

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int one_file(struct fs *fs, int mode, const void *data,
		    uint32_t nblk)
{
	struct fs_tx *tx;
	uint64_t start;
	uint32_t len;
	int ret;

	ret = fs_tx_begin(fs, FS_ALLOC_CREDITS(fs), &tx);
	if (ret < 0)
		return ret;
	ret = fs_alloc(tx, 0, 1, nblk, &start, &len);
	if (ret == 0 && mode == M_SYNC) {
		ret = bd_write(fs->bd, data, (size_t)len * FS_BLOCK_SIZE,
			       start * FS_BLOCK_SIZE, 0);
		fs_journal_data_written(fs);
	} else if (ret == 0) {
		ret = fs_data_write(fs, data, (size_t)len * FS_BLOCK_SIZE,
				    start * FS_BLOCK_SIZE);
	}
	fs_tx_end(tx);
	return ret;
}

static int run(struct bd_dev *bd, int mode, unsigned n, uint64_t seed)
{
	static const char *names[] = { "sync bd_write", "write-behind ordered",
				       "write-behind writeback" };
	struct fs_mkfs_params p;
	struct fs_core_opts o;
	struct fs_core_stats st;
	uint64_t s = seed ? seed : 1, bytes = 0;
	double t0, t1, t2;
	struct fs *fs;
	char why[256];
	void *data = bd_buf_alloc(10 * FS_BLOCK_SIZE);
	int ret = 0;

	fs_mkfs_defaults(&p);
	if (data == NULL || fs_mkfs(bd, &p, why, sizeof(why)) < 0) {
		fprintf(stderr, "mkfs: %s\n", why);
		return 1;
	}
	memset(data, 0x5a, 10 * FS_BLOCK_SIZE);
	fs_core_opts_init(&o);
	o.data_writeback = mode == M_WRITEBACK;
	if (fs_core_mount(bd, &o, &fs, why, sizeof(why)) < 0) {
		fprintf(stderr, "mount: %s\n", why);
		return 1;
	}
	t0 = now_s();
	for (unsigned i = 0; i < n && ret == 0; i++) {
		uint32_t nblk;

		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		nblk = 1 + (uint32_t)(s % 10);
		bytes += (uint64_t)nblk * FS_BLOCK_SIZE;
		ret = one_file(fs, mode, data, nblk);
	}
	t1 = now_s();
	if (ret == 0)
		ret = fs_journal_sync(fs);
	t2 = now_s();
	fs_core_stats_get(fs, &st);
	printf("%-24s %u files %.1f MiB: writes %.3f s (%.0f us/file), "
	       "+sync %.3f s, total %.3f s; throttled %llu, commits %llu\n",
	       names[mode], n, bytes / 1048576.0, t1 - t0,
	       (t1 - t0) / n * 1e6, t2 - t1, t2 - t0,
	       (unsigned long long)st.data_throttled,
	       (unsigned long long)st.commits);
	if (fs_core_unmount(fs) < 0 || ret < 0) {
		fprintf(stderr, "failed: %d\n", ret);
		ret = 1;
	}
	free(data);
	return ret != 0;
}

int main(int argc, char **argv)
{
	unsigned n = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 5000;
	uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 0) : 1;
	struct bd_dev *bd;
	int bad = 0;

	if (argc < 2 || n == 0) {
		fprintf(stderr, "usage: core_databench IMAGE [NFILES [SEED]]\n");
		return 2;
	}
	if (bd_file_open(argv[1], 0, &bd) < 0) {
		fprintf(stderr, "cannot open %s\n", argv[1]);
		return 1;
	}
	printf("seed %llu\n", (unsigned long long)seed);
	for (int mode = M_SYNC; mode <= M_WRITEBACK; mode++)
		bad |= run(bd, mode, n, seed);
	bd_close(bd);
	return bad;
}
