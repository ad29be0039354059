/*
 * ucfs-age — ages a mounted filesystem through ordinary POSIX calls, so
 * that a benchmark can compare a fresh filesystem with one that has been
 * churned (DESIGN.md: "the same write on an aged fs (churned to 80% full)
 * >= 80% of the fresh fs"; seeds/004: OCFS2 1.4 at ~10%).
 *
 * Usage: ucfs-age [--fill PCT] [--churn N] [--seed S]
 *                 [--sizes small|mixed|large] [--json] DIR
 *
 * Phases:
 *   fill    files of a size distribution (many small, some large) in a
 *           tree DIR/age-SEED/XX/YY/ until the filesystem is PCT full
 *   churn   N rounds: delete a random share (10-40%) of the files, then
 *           create files of other sizes (odd rounds 4x larger, even
 *           rounds 4x smaller) until PCT full again
 *   settle  syncfs, then compare the real fill (statvfs) with the target
 *           and create or delete files to close the gap (at most 3 passes)
 *
 * New files are written in batches of BATCH at once, appending CHUNK
 * bytes to each in turn, so their allocations interleave and the free
 * space the deletions leave is fragmented.
 *
 * Invariants: every decision of fill and churn comes from the seed and
 * the accounted usage (st_blocks after close plus one block per file), not
 * from timing, so the same seed on the same fresh filesystem makes the
 * same files; only settle reads statvfs again. ENOSPC is expected near
 * full: the batch is removed, the target lowered by 2% of the filesystem,
 * files are deleted down to it, and the run continues (at most MAX_ENOSPC
 * times). Every loop is bounded. Nothing outside DIR/age-SEED is touched.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define BATCH 4		  /* files written at once */
#define CHUNK (64 * 1024) /* bytes appended per turn */
#define BUF_SIZE CHUNK
#define NDIR1 16 /* tree: NDIR1 x NDIR2 leaf dirs */
#define NDIR2 16
#define MAX_ENOSPC 64
#define MAX_FILES (4u << 20) /* a bound on any run */
#define SETTLE_PASSES 3

enum age_sizes { SIZES_SMALL, SIZES_MIXED, SIZES_LARGE };
static const char *const sizes_name[] = {"small", "mixed", "large"};

/* One size band: weight (percent) and a log-uniform range of bytes. */
struct band {
	int weight;
	double lo, hi;
};

static const struct band bands[3][4] = {
    [SIZES_SMALL] = {{70, 64, 4096},
		     {25, 4096, 65536},
		     {5, 65536, 1 << 20},
		     {0, 0, 0}},
    [SIZES_MIXED] = {{50, 256, 8192},
		     {30, 8192, 262144},
		     {15, 262144, 4 << 20},
		     {5, 4 << 20, 64 << 20}},
    [SIZES_LARGE] = {{20, 4096, 1 << 20},
		     {50, 1 << 20, 32 << 20},
		     {30, 32 << 20, 256 << 20},
		     {0, 0, 0}},
};

struct age_file {
	uint32_t id;	 /* name: f<id>, unique in a run */
	uint16_t dir;	 /* leaf directory index */
	uint64_t blocks; /* accounted blocks (data + 1 for the inode) */
};

struct age_opts {
	int fill;   /* target percent of statvfs blocks in use */
	long churn; /* rounds */
	uint64_t seed;
	enum age_sizes sizes;
	bool json;
	const char *dir;
};

struct age {
	struct age_opts o;
	char root[PATH_MAX]; /* DIR/age-SEED */
	uint64_t rng;
	uint64_t bsize, total; /* statvfs: f_frsize, f_blocks */
	double fill_start;     /* percent */
	uint64_t budget;       /* blocks our files may use */
	uint64_t used;	       /* blocks accounted to live files */
	struct age_file *files;
	size_t nfiles, cap;
	uint32_t next_id;
	int size_scale; /* churn: log2 of the size factor */
	unsigned char buf[BUF_SIZE];
	/* report */
	uint64_t created, deleted, bytes, enospc, settle_created,
	    settle_deleted;
	double t_fill, t_churn, t_total;
	bool gave_up;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* splitmix64: small, good enough, and the same on every machine */
static uint64_t rnd(struct age *a)
{
	uint64_t z = (a->rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double rnd01(struct age *a)
{
	return (double)(rnd(a) >> 11) / (double)(1ull << 53);
}

/* A file size from the distribution, scaled by the churn round. */
static uint64_t draw_size(struct age *a)
{
	const struct band *b = bands[a->o.sizes];
	int w = (int)(rnd(a) % 100), i = 0;
	double s;

	while (i < 3 && (w >= b[i].weight || b[i].weight == 0)) {
		w -= b[i].weight;
		i++;
	}
	s = b[i].lo * exp(rnd01(a) * log(b[i].hi / b[i].lo));
	if (a->size_scale > 0)
		s *= (double)(1 << a->size_scale);
	else if (a->size_scale < 0)
		s /= (double)(1 << -a->size_scale);
	return s < 1 ? 1 : (uint64_t)s;
}

static int fs_info(struct age *a, uint64_t *used)
{
	struct statvfs sv;

	if (statvfs(a->o.dir, &sv) < 0)
		return -errno;
	a->bsize = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
	a->total = sv.f_blocks;
	*used = sv.f_blocks - sv.f_bfree;
	return 0;
}

static void file_path(const struct age *a, const struct age_file *f, char *p,
		      size_t n)
{
	snprintf(p, n, "%s/%02x/%02x/f%07" PRIu32, a->root, f->dir / NDIR2,
		 f->dir % NDIR2, f->id);
}

static int mkdir_ok(const char *p)
{
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int make_tree(struct age *a)
{
	char p[PATH_MAX + 16];
	int i, j, ret;

	if (mkdir(a->root, 0755) < 0) {
		ret = -errno;
		if (ret == -EEXIST)
			fprintf(stderr,
				"ucfs-age: %s exists: this seed already "
				"aged it (remove it or use another --seed)\n",
				a->root);
		else
			fprintf(stderr, "ucfs-age: mkdir %s: %s\n", a->root,
				strerror(-ret));
		return ret;
	}
	for (i = 0; i < NDIR1; i++) {
		snprintf(p, sizeof(p), "%s/%02x", a->root, i);
		ret = mkdir_ok(p);
		for (j = 0; ret == 0 && j < NDIR2; j++) {
			snprintf(p, sizeof(p), "%s/%02x/%02x", a->root, i, j);
			ret = mkdir_ok(p);
		}
		if (ret < 0) {
			fprintf(stderr, "ucfs-age: mkdir %s: %s\n", p,
				strerror(-ret));
			return ret;
		}
	}
	return 0;
}

static int files_push(struct age *a, const struct age_file *f)
{
	struct age_file *n;

	if (a->nfiles == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 1024;
		n = realloc(a->files, a->cap * sizeof(*n));
		if (n == NULL)
			return -ENOMEM;
		a->files = n;
	}
	a->files[a->nfiles++] = *f;
	a->used += f->blocks;
	return 0;
}

/* Unlink file i and drop it from the list (the last one takes its place). */
static int file_delete(struct age *a, size_t i)
{
	char p[PATH_MAX + 32];

	file_path(a, &a->files[i], p, sizeof(p));
	if (unlink(p) < 0) {
		fprintf(stderr, "ucfs-age: unlink %s: %s\n", p,
			strerror(errno));
		return -errno;
	}
	a->used -= a->files[i].blocks;
	a->files[i] = a->files[--a->nfiles];
	a->deleted++;
	return 0;
}

/* Delete random files until the accounted usage is at most @target. */
static int delete_down_to(struct age *a, uint64_t target)
{
	int ret;

	while (a->used > target && a->nfiles > 0) {
		ret = file_delete(a, (size_t)(rnd(a) % a->nfiles));
		if (ret < 0)
			return ret;
	}
	return 0;
}

struct batch {
	int n;
	int fd[BATCH];
	uint64_t size[BATCH], done[BATCH];
	struct age_file f[BATCH];
};

static void batch_abort(struct age *a, struct batch *b)
{
	char p[PATH_MAX + 32];
	int i;

	for (i = 0; i < b->n; i++) {
		if (b->fd[i] >= 0)
			close(b->fd[i]);
		file_path(a, &b->f[i], p, sizeof(p));
		unlink(p);
	}
}

/* Write the batch: CHUNK bytes to each unfinished file in turn. */
static int batch_write(struct age *a, struct batch *b)
{
	bool more = true;
	uint64_t off, len;
	ssize_t w;
	int i;

	while (more) {
		more = false;
		for (i = 0; i < b->n; i++) {
			if (b->done[i] == b->size[i])
				continue;
			len = b->size[i] - b->done[i];
			if (len > CHUNK)
				len = CHUNK;
			off = b->done[i] % BUF_SIZE;
			if (len > BUF_SIZE - off)
				len = BUF_SIZE - off;
			w = write(b->fd[i], a->buf + off, len);
			if (w < 0)
				return -errno;
			if (w == 0)
				return -EIO;
			b->done[i] += (uint64_t)w;
			a->bytes += (uint64_t)w;
			more |= b->done[i] < b->size[i];
		}
	}
	return 0;
}

/* Close the batch's files and account them (st_blocks + 1 block). */
static int batch_finish(struct age *a, struct batch *b)
{
	struct stat st;
	int i, ret;

	for (i = 0; i < b->n; i++) {
		if (fstat(b->fd[i], &st) < 0)
			return -errno;
		if (close(b->fd[i]) < 0) {
			b->fd[i] = -1;
			return -errno;
		}
		b->fd[i] = -1;
		b->f[i].blocks =
		    ((uint64_t)st.st_blocks * 512 + a->bsize - 1) / a->bsize +
		    1;
		ret = files_push(a, &b->f[i]);
		if (ret < 0)
			return ret;
		a->created++;
	}
	return 0;
}

/*
 * Create up to BATCH new files whose estimated cost fits in @room blocks
 * (the last one is cut to fit). Returns 0, -ENOSPC after undoing the
 * batch, or another -errno (reported).
 */
static int batch_create(struct age *a, uint64_t room)
{
	char p[PATH_MAX + 32];
	struct batch b = {.n = 0};
	uint64_t cost, sz;
	int i, ret;

	for (i = 0; i < BATCH && room > 1; i++) {
		sz = draw_size(a);
		cost = (sz + a->bsize - 1) / a->bsize + 1;
		if (cost > room) {
			sz = (room - 1) * a->bsize;
			cost = room;
		}
		room -= cost;
		b.f[i] = (struct age_file){
		    .id = a->next_id++,
		    .dir = (uint16_t)(rnd(a) % (NDIR1 * NDIR2))};
		b.size[i] = sz;
		b.done[i] = 0;
		b.fd[i] = -1;
		b.n = i + 1;
		file_path(a, &b.f[i], p, sizeof(p));
		b.fd[i] = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (b.fd[i] < 0) {
			ret = -errno;
			goto out_abort;
		}
	}
	ret = batch_write(a, &b);
	if (ret == 0)
		ret = batch_finish(a, &b);
	if (ret == 0)
		return 0;
out_abort:
	batch_abort(a, &b);
	if (ret != -ENOSPC && ret != -EDQUOT)
		fprintf(stderr, "ucfs-age: writing %s/...: %s\n", a->root,
			strerror(-ret));
	return ret == -EDQUOT ? -ENOSPC : ret;
}

/* ENOSPC: lower the budget by 2% of the filesystem and delete down to it. */
static int back_off(struct age *a)
{
	uint64_t step = a->total / 50 ? a->total / 50 : 1;

	a->enospc++;
	if (a->enospc > MAX_ENOSPC) {
		fprintf(stderr,
			"ucfs-age: ENOSPC %d times; stopping at the "
			"fill reached\n",
			MAX_ENOSPC);
		a->gave_up = true;
		return -ENOSPC;
	}
	a->budget = a->budget > step ? a->budget - step : 0;
	return delete_down_to(a, a->budget);
}

/* Create files until the accounted usage reaches the budget. */
static int fill_to_budget(struct age *a)
{
	int ret;

	while (a->used + 1 < a->budget) {
		if (a->next_id >= MAX_FILES) {
			fprintf(stderr, "ucfs-age: %u files made; stopping\n",
				MAX_FILES);
			a->gave_up = true;
			return 0;
		}
		ret = batch_create(a, a->budget - a->used);
		if (ret == -ENOSPC)
			ret = back_off(a);
		if (ret == -ENOSPC && a->gave_up)
			return 0;
		if (ret < 0)
			return ret;
	}
	return 0;
}

static int churn(struct age *a)
{
	uint64_t before;
	double share;
	long r;
	size_t i;
	int ret;

	for (r = 1; r <= a->o.churn && !a->gave_up; r++) {
		share = 0.10 + 0.30 * rnd01(a);
		before = a->deleted;
		for (i = 0; i < a->nfiles;) {
			if (rnd01(a) < share) {
				ret = file_delete(a, i);
				if (ret < 0)
					return ret;
			} else {
				i++;
			}
		}
		/* a few large files: still one deleted every round */
		if (a->deleted == before && a->nfiles > 0) {
			ret = file_delete(a, (size_t)(rnd(a) % a->nfiles));
			if (ret < 0)
				return ret;
		}
		a->size_scale = (r % 2) ? 2 : -2;
		ret = fill_to_budget(a);
		if (ret < 0)
			return ret;
	}
	a->size_scale = 0;
	return 0;
}

/* Real usage after syncfs, once two reads 100 ms apart agree (or 2 s). */
static int settled_used(struct age *a, uint64_t *used)
{
	uint64_t prev = UINT64_MAX;
	int fd, i, ret;

	fd = open(a->root, O_RDONLY | O_DIRECTORY);
	if (fd >= 0) {
		syncfs(fd);
		close(fd);
	}
	for (i = 0; i < 20; i++) {
		ret = fs_info(a, used);
		if (ret < 0 || *used == prev)
			return ret;
		prev = *used;
		usleep(100000);
	}
	return 0;
}

/* Close the gap between the real fill and the target (metadata costs). */
static int settle(struct age *a)
{
	uint64_t used, target = a->total * (uint64_t)a->o.fill / 100;
	uint64_t tol = a->total / 200 + 1, before;
	int pass, ret;

	for (pass = 0; pass < SETTLE_PASSES && !a->gave_up; pass++) {
		ret = settled_used(a, &used);
		if (ret < 0)
			return ret;
		if (used + tol < target) {
			before = a->created;
			a->budget = a->used + (target - used);
			ret = fill_to_budget(a);
			a->settle_created += a->created - before;
		} else if (used > target + tol && a->enospc == 0) {
			before = a->deleted;
			a->budget = a->used > used - target
					? a->used - (used - target)
					: 0;
			ret = delete_down_to(a, a->budget);
			a->settle_deleted += a->deleted - before;
		} else {
			return 0;
		}
		if (ret < 0)
			return ret;
	}
	return 0;
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

static void report(struct age *a, double fill_final)
{
	double mib = (double)a->total * (double)a->bsize / 1048576.0;

	if (a->o.json) {
		printf("{\"tool\": \"ucfs-age\", \"dir\": ");
		json_str(a->root);
		printf(", \"seed\": %" PRIu64 ", \"fill_target\": %d, "
		       "\"churn\": %ld, \"sizes\": \"%s\", "
		       "\"block_size\": %" PRIu64 ", \"fs_mib\": %.1f, "
		       "\"fill_start\": %.2f, \"fill_final\": %.2f, "
		       "\"files_created\": %" PRIu64 ", "
		       "\"files_deleted\": %" PRIu64 ", \"files_live\": %zu, "
		       "\"bytes_written\": %" PRIu64 ", \"enospc\": %" PRIu64
		       ", \"settle_created\": %" PRIu64 ", "
		       "\"settle_deleted\": %" PRIu64 ", \"gave_up\": %s, "
		       "\"fill_seconds\": %.3f, \"churn_seconds\": %.3f, "
		       "\"seconds\": %.3f}\n",
		       a->o.seed, a->o.fill, a->o.churn, sizes_name[a->o.sizes],
		       a->bsize, mib, a->fill_start, fill_final, a->created,
		       a->deleted, a->nfiles, a->bytes, a->enospc,
		       a->settle_created, a->settle_deleted,
		       a->gave_up ? "true" : "false", a->t_fill, a->t_churn,
		       a->t_total);
		return;
	}
	printf("ucfs-age: seed %" PRIu64 ", fill %d%%, churn %ld, sizes %s, "
	       "in %s\n",
	       a->o.seed, a->o.fill, a->o.churn, sizes_name[a->o.sizes],
	       a->root);
	printf("filesystem: %.1f MiB, %" PRIu64 "-byte blocks, %.1f%% used "
	       "at start\n",
	       mib, a->bsize, a->fill_start);
	printf("files: %" PRIu64 " created, %" PRIu64 " deleted, %zu live; "
	       "%.1f MiB written; %" PRIu64 " ENOSPC\n",
	       a->created, a->deleted, a->nfiles, (double)a->bytes / 1048576.0,
	       a->enospc);
	printf("settle: %" PRIu64 " created, %" PRIu64 " deleted\n",
	       a->settle_created, a->settle_deleted);
	printf("final: %.1f%% full (target %d%%)%s; fill %.1f s, churn "
	       "%.1f s, total %.1f s\n",
	       fill_final, a->o.fill, a->gave_up ? ", stopped early" : "",
	       a->t_fill, a->t_churn, a->t_total);
}

static int run(struct age *a)
{
	uint64_t used, target;
	double t0 = now_s(), t;
	size_t i;
	int ret;

	ret = fs_info(a, &used);
	if (ret < 0 || a->total == 0) {
		fprintf(stderr, "ucfs-age: statvfs %s: %s\n", a->o.dir,
			ret < 0 ? strerror(-ret) : "no blocks");
		return ret < 0 ? ret : -EINVAL;
	}
	a->fill_start = 100.0 * (double)used / (double)a->total;
	target = a->total * (uint64_t)a->o.fill / 100;
	a->budget = target > used ? target - used : 0;
	ret = make_tree(a);
	if (ret < 0)
		return ret;
	for (i = 0; i < BUF_SIZE; i++)
		a->buf[i] = (unsigned char)rnd(a);
	ret = fill_to_budget(a);
	t = now_s();
	a->t_fill = t - t0;
	if (ret == 0)
		ret = churn(a);
	a->t_churn = now_s() - t;
	if (ret == 0)
		ret = settle(a);
	a->t_total = now_s() - t0;
	if (fs_info(a, &used) == 0)
		report(a, 100.0 * (double)used / (double)a->total);
	return ret;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: ucfs-age [--fill PCT] [--churn N] [--seed S] "
		   "[--sizes small|mixed|large] [--json] DIR\n"
		   "  ages the filesystem holding DIR: fills it to PCT%% "
		   "(default 80) with\n  files in DIR/age-SEED, then N rounds "
		   "(default 10) of deleting and\n  creating files; seed "
		   "default 1\n");
}

static int parse_num(const char *opt, const char *s, long long lo, long long hi,
		     long long *out)
{
	char *end;

	errno = 0;
	*out = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || *out < lo || *out > hi) {
		fprintf(stderr,
			"ucfs-age: %s wants a number from %lld to "
			"%lld, not '%s'\n",
			opt, lo, hi, s);
		return -EINVAL;
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct age_opts *o)
{
	static const struct option lo[] = {
	    {"fill", required_argument, NULL, 'f'},
	    {"churn", required_argument, NULL, 'c'},
	    {"seed", required_argument, NULL, 's'},
	    {"sizes", required_argument, NULL, 'z'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	long long v;
	int c, i;

	*o = (struct age_opts){
	    .fill = 80, .churn = 10, .seed = 1, .sizes = SIZES_MIXED};
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (parse_num("--fill", optarg, 1, 99, &v) < 0)
				return -EINVAL;
			o->fill = (int)v;
			break;
		case 'c':
			if (parse_num("--churn", optarg, 0, 1000000, &v) < 0)
				return -EINVAL;
			o->churn = (long)v;
			break;
		case 's':
			if (parse_num("--seed", optarg, 0, LLONG_MAX, &v) < 0)
				return -EINVAL;
			o->seed = (uint64_t)v;
			break;
		case 'z':
			for (i = 0; i < 3; i++)
				if (strcmp(optarg, sizes_name[i]) == 0)
					break;
			if (i == 3) {
				fprintf(stderr,
					"ucfs-age: --sizes is small, "
					"mixed or large, not '%s'\n",
					optarg);
				return -EINVAL;
			}
			o->sizes = (enum age_sizes)i;
			break;
		case 'j':
			o->json = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "ucfs-age: %s\n",
			optind >= argc ? "missing DIR" : "one DIR only");
		usage(stderr);
		return -EINVAL;
	}
	o->dir = argv[optind];
	return 0;
}

int main(int argc, char **argv)
{
	struct stat st;
	struct age *a;
	int ret;

	a = calloc(1, sizeof(*a));
	if (a == NULL)
		return 1;
	ret = parse_args(argc, argv, &a->o);
	if (ret < 0)
		goto out_free;
	if (stat(a->o.dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		ret = stat(a->o.dir, &st) < 0 ? -errno : -ENOTDIR;
		fprintf(stderr, "ucfs-age: %s: %s\n", a->o.dir, strerror(-ret));
		goto out_free;
	}
	if ((size_t)snprintf(a->root, sizeof(a->root), "%s/age-%" PRIu64,
			     a->o.dir, a->o.seed) >= sizeof(a->root)) {
		fprintf(stderr, "ucfs-age: %s: path too long\n", a->o.dir);
		ret = -ENAMETOOLONG;
		goto out_free;
	}
	a->rng = a->o.seed;
	if (!a->o.json)
		printf("ucfs-age: seed %" PRIu64 "\n", a->o.seed);
	fflush(stdout);
	ret = run(a);
out_free:
	free(a->files);
	free(a);
	return ret < 0 ? 1 : 0;
}
