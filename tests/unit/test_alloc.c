/*
 * test_alloc.c — the allocator: contiguous runs and the search hint, goal
 * placement, no reuse before the freeing transaction commits, ENOSPC that
 * changes nothing and a filesystem that keeps working after it, bad frees
 * (-EUCLEAN), inode generations, inode chunks (consecutive inode
 * blocks though data is allocated between them), statfs counts across
 * remounts, and a
 * seeded random alloc/free run checked against a model bitmap.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fusefs/core/fs_internal.h"
#include "core_fixture.h"
#include "harness.h"

/* @mb MiB with a 4 MiB journal and @rgmb MiB groups */
static struct bd_dev *ram_fs(unsigned mb, unsigned rgmb)
{
	return cf_ram_fs(mb, 4, rgmb);
}

static struct fs *mnt(struct bd_dev *bd)
{
	struct fs_core_opts o;
	struct fs *fs;
	char why[200];

	fs_core_opts_init(&o);
	o.commit_s = 3600;
	if (fs_core_mount(bd, &o, &fs, why, sizeof(why)) < 0)
		return NULL;
	return fs;
}

static struct fs_tx *begin(struct fs *fs, unsigned calls)
{
	struct fs_tx *tx;

	if (fs_tx_begin(fs, calls * fs_alloc_credits(fs), &tx) < 0)
		return NULL;
	return tx;
}

static uint64_t free_now(struct fs *fs)
{
	struct fs_space sp;

	fs_space_get(fs, &sp);
	return sp.free_blocks;
}

static void test_contiguous(void)
{
	struct bd_dev *bd = ram_fs(64, 16);
	uint64_t s1, s2, s3, f0;
	uint32_t l1, l2, l3;
	struct fs_tx *tx;
	struct fs *fs;

	REQUIRE(bd != NULL && (fs = mnt(bd)) != NULL);
	f0 = free_now(fs);
	REQUIRE((tx = begin(fs, 4)) != NULL);
	CHECK_EQ(fs_alloc(tx, 0, 1, 100, &s1, &l1), 0);
	CHECK_EQ(l1, 100);
	CHECK_EQ(fs_alloc(tx, 0, 1, 50, &s2, &l2), 0);
	CHECK_EQ(s2, s1 + 100);		/* the hint continues the run */
	CHECK_EQ(l2, 50);
	/* goal in another rgroup */
	CHECK_EQ(fs_alloc(tx, fs->sb.rgrp_start + 2 * fs->sb.rgrp_blocks + 500,
			  10, 10, &s3, &l3), 0);
	CHECK_EQ(s3, fs->sb.rgrp_start + 2 * fs->sb.rgrp_blocks + 500);
	CHECK_EQ(fs_alloc(tx, 0, 0, 10, &s3, &l3), -EINVAL);
	CHECK_EQ(fs_alloc(tx, 0, 10, 5, &s3, &l3), -EINVAL);
	CHECK_EQ(fs_tx_end(tx), 0);
	CHECK_EQ(free_now(fs), f0 - 160);
	CHECK_EQ(fs_core_unmount(fs), 0);
	REQUIRE((fs = mnt(bd)) != NULL);
	CHECK_EQ(free_now(fs), f0 - 160);	/* persisted */
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

static void test_no_reuse_before_commit(void)
{
	struct bd_dev *bd = ram_fs(64, 16);
	uint64_t s, t;
	uint32_t l, m;
	struct fs_tx *tx;
	struct fs *fs;

	REQUIRE(bd != NULL && (fs = mnt(bd)) != NULL);
	REQUIRE((tx = begin(fs, 2)) != NULL);
	CHECK_EQ(fs_alloc(tx, 0, 8, 8, &s, &l), 0);
	CHECK_EQ(fs_tx_end(tx), 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	REQUIRE((tx = begin(fs, 3)) != NULL);
	CHECK_EQ(fs_free(tx, s, 8), 0);
	CHECK_EQ(fs_alloc_pending(fs), 8);
	CHECK_EQ(fs_alloc(tx, s, 1, 8, &t, &m), 0);
	CHECK(t + m <= s || t >= s + 8);	/* not the freed run */
	CHECK_EQ(fs_tx_end(tx), 0);
	/* another transaction before the commit: still not reused */
	REQUIRE((tx = begin(fs, 1)) != NULL);
	CHECK_EQ(fs_alloc(tx, s, 1, 8, &t, &m), 0);
	CHECK(t + m <= s || t >= s + 8);
	CHECK_EQ(fs_tx_end(tx), 0);
	CHECK_EQ(fs_journal_sync(fs), 0);
	CHECK_EQ(fs_alloc_pending(fs), 0);
	REQUIRE((tx = begin(fs, 1)) != NULL);
	CHECK_EQ(fs_alloc(tx, s, 1, 8, &t, &m), 0);
	CHECK_EQ(t, s);				/* now it is */
	CHECK_EQ(m, 8);
	CHECK_EQ(fs_tx_end(tx), 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

static void test_bad_free(void)
{
	struct bd_dev *bd = ram_fs(64, 16);
	uint64_t s, f0;
	uint32_t l;
	struct fs_tx *tx;
	struct fs *fs;

	REQUIRE(bd != NULL && (fs = mnt(bd)) != NULL);
	REQUIRE((tx = begin(fs, 8)) != NULL);
	CHECK_EQ(fs_alloc(tx, 0, 4, 4, &s, &l), 0);
	f0 = free_now(fs);
	CHECK_EQ(fs_free(tx, s, 5), -EUCLEAN);	/* one not allocated */
	CHECK_EQ(fs_free(tx, 1, 1), -EUCLEAN);	/* not in an rgroup */
	CHECK_EQ(fs_free(tx, fs->sb.rgrp_start, 1), -EUCLEAN); /* header */
	CHECK_EQ(fs_free(tx, fs->sb.total_blocks, 1), -EUCLEAN);
	CHECK_EQ(free_now(fs), f0);		/* nothing changed */
	CHECK_EQ(fs_free(tx, s, 4), 0);
	CHECK_EQ(fs_free(tx, s, 4), -EUCLEAN);	/* double free */
	CHECK_EQ(fs_tx_end(tx), 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

static void test_inodes(void)
{
	struct bd_dev *bd = ram_fs(64, 16);
	uint64_t ino[3], gen[3], g;
	struct fs_space sp;
	struct fs_tx *tx;
	struct fs *fs;

	REQUIRE(bd != NULL && (fs = mnt(bd)) != NULL);
	REQUIRE((tx = begin(fs, 4)) != NULL);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(fs_alloc_inode(tx, fs->sb.root_ino, &ino[i], &gen[i]),
			 0);
	CHECK(gen[0] != gen[1] && gen[1] != gen[2] && gen[0] != gen[2]);
	/* next to the goal, after the statfs records */
	CHECK_EQ(ino[0], fs_statfs_change_blk(&fs->sb, fs->sb.slot_count));
	CHECK_EQ(fs_free_inode(tx, ino[1]), 0);
	CHECK_EQ(fs_tx_end(tx), 0);
	fs_space_get(fs, &sp);
	CHECK_EQ(sp.inodes, 3);			/* root + 2 */
	CHECK_EQ(fs_journal_sync(fs), 0);
	REQUIRE((tx = begin(fs, 1)) != NULL);
	CHECK_EQ(fs_alloc_inode(tx, ino[0], &ino[1], &g), 0);
	CHECK(g != gen[1]);		/* reused block, new generation */
	CHECK_EQ(fs_tx_end(tx), 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	REQUIRE((fs = mnt(bd)) != NULL);
	fs_space_get(fs, &sp);
	CHECK_EQ(sp.inodes, 4);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

/* Fill the filesystem: ENOSPC is clean, counts are exact, and after
 * freeing (and the commit) allocation works again. */
/* Inodes come from a chunk reserved near the goal: files created one
 * after the other, each with its data allocated right after its inode
 * (goal = the inode), still get consecutive inode blocks, and their
 * data is not placed inside the chunk. */
static void test_inode_chunk(void)
{
	struct bd_dev *bd = ram_fs(64, 16);
	uint64_t ino[32], g, d, first;
	uint32_t len;
	struct fs_tx *tx;
	struct fs *fs;

	REQUIRE(bd != NULL && (fs = mnt(bd)) != NULL);
	for (unsigned i = 0; i < 32; i++) {
		REQUIRE((tx = begin(fs, 2)) != NULL);
		CHECK_EQ(fs_alloc_inode(tx, fs->sb.root_ino, &ino[i], &g), 0);
		CHECK_EQ(fs_alloc(tx, ino[i], 3, 3, &d, &len), 0);
		CHECK(d > ino[0] + 32 || d + len <= ino[0]);
		CHECK_EQ(fs_tx_end(tx), 0);
	}
	first = ino[0];
	for (unsigned i = 1; i < 32; i++)
		CHECK_EQ(ino[i], first + i);
	CHECK_EQ(fs_core_unmount(fs), 0);
	bd_close(bd);
}

static void test_enospc(void)
{
	struct bd_dev *bd = ram_fs(32, 4);
	uint64_t *runs = calloc(100000, sizeof(uint64_t)), s, f;
	uint32_t *lens = calloc(100000, sizeof(uint32_t)), l;
	unsigned n = 0;
	struct fs_tx *tx;
	struct fs *fs;
	int ret = 0;

	REQUIRE(runs != NULL && lens != NULL);
	REQUIRE(bd != NULL && (fs = mnt(bd)) != NULL);
	while (ret == 0 && n < 100000) {
		REQUIRE((tx = begin(fs, 1)) != NULL);
		ret = fs_alloc(tx, 0, 1, 37, &runs[n], &lens[n]);
		if (ret == 0)
			n++;
		fs_tx_end(tx);
	}
	CHECK_EQ(ret, -ENOSPC);
	CHECK_EQ(free_now(fs), 0);
	REQUIRE((tx = begin(fs, 2)) != NULL);
	CHECK_EQ(fs_alloc(tx, 0, 1, 1, &s, &l), -ENOSPC);
	/* free one run: pending until commit, so still ENOSPC */
	CHECK_EQ(fs_free(tx, runs[n / 2], lens[n / 2]), 0);
	CHECK_EQ(fs_alloc(tx, 0, 1, 1, &s, &l), -ENOSPC);
	CHECK_EQ(fs_tx_end(tx), 0);
	CHECK_EQ(free_now(fs), lens[n / 2]);
	CHECK_EQ(fs_journal_sync(fs), 0);
	REQUIRE((tx = begin(fs, 2)) != NULL);
	/* more than what is free: ENOSPC, nothing changes */
	f = free_now(fs);
	CHECK_EQ(fs_alloc(tx, 0, lens[n / 2] + 1, 1000, &s, &l), -ENOSPC);
	CHECK_EQ(free_now(fs), f);
	CHECK_EQ(fs_alloc(tx, 0, 1, 1000, &s, &l), 0);
	CHECK_EQ(s, runs[n / 2]);
	CHECK_EQ(l, lens[n / 2]);
	CHECK_EQ(fs_tx_end(tx), 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	REQUIRE((fs = mnt(bd)) != NULL);
	CHECK_EQ(free_now(fs), 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	free(runs);
	free(lens);
	bd_close(bd);
}

/* Random allocs and frees against a model of every block. */
static void test_random_model(void)
{
	struct bd_dev *bd = ram_fs(64, 8);
	struct fs *fs;
	uint8_t *used;
	uint64_t *rs, nfree_model, total;
	uint32_t *rl;
	unsigned nr = 0, bad = 0;

	t_rnd_seed(t_seed());
	REQUIRE(bd != NULL && (fs = mnt(bd)) != NULL);
	total = fs->sb.total_blocks;
	used = calloc(total, 1);
	rs = calloc(20000, sizeof(*rs));
	rl = calloc(20000, sizeof(*rl));
	REQUIRE(used != NULL && rs != NULL && rl != NULL);
	nfree_model = free_now(fs);
	for (unsigned op = 0; op < 20000 && !bad; op++) {
		struct fs_tx *tx = begin(fs, 2);
		int ret;

		REQUIRE(tx != NULL);
		if (nr > 0 && (t_rnd() % 100 < 45 || nr == 20000)) {
			unsigned k = (unsigned)(t_rnd() % nr);

			ret = fs_free(tx, rs[k], rl[k]);
			if (ret != 0)
				bad++;
			for (uint32_t i = 0; i < rl[k]; i++)
				used[rs[k] + i] = 0;
			nfree_model += rl[k];
			rs[k] = rs[nr - 1];
			rl[k] = rl[--nr];
		} else {
			uint32_t mx = 1 + (uint32_t)(t_rnd() % 64), l;
			uint64_t s, goal = t_rnd() % 2 ? t_rnd() % total : 0;

			ret = fs_alloc(tx, goal, 1, mx, &s, &l);
			if (ret == 0) {
				for (uint32_t i = 0; i < l; i++) {
					if (used[s + i])
						bad++;	/* double alloc */
					used[s + i] = 1;
				}
				if (s < fs->sb.rgrp_start || l > mx)
					bad++;
				rs[nr] = s;
				rl[nr++] = l;
				nfree_model -= l;
			} else if (ret != -ENOSPC) {
				bad++;
			}
		}
		fs_tx_end(tx);
		if (t_rnd() % 50 == 0)
			fs_journal_sync(fs);
		if (free_now(fs) != nfree_model)
			bad++;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(fs_core_unmount(fs), 0);
	REQUIRE((fs = mnt(bd)) != NULL);
	CHECK_EQ(free_now(fs), nfree_model);
	CHECK_EQ(fs_core_unmount(fs), 0);
	free(used);
	free(rs);
	free(rl);
	bd_close(bd);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_contiguous);
	T_RUN(test_no_reuse_before_commit);
	T_RUN(test_bad_free);
	T_RUN(test_inodes);
	T_RUN(test_inode_chunk);
	T_RUN(test_enospc);
	T_RUN(test_random_model);
	return t_done();
}
