/*
 * fsx — a seeded random-operation checker for one file (after the classic
 * fsx of BSD/xfstests).
 *
 * Usage: fsx [--seed N] [--ops N] [--maxlen BYTES] [--base BYTES]
 *            [--maxop BYTES] [--no-falloc] [--no-punch] [--no-zero]
 *            [--no-shift] [--no-copy] [--no-dwrite] [--direct-every N]
 *            [--other PATH] [--quiet] FILE
 *
 * It performs --ops random operations on FILE (created, truncated to 0):
 * write, read, truncate (up and down), fallocate (plain, KEEP_SIZE,
 * punch hole, zero range with and without KEEP_SIZE, collapse range,
 * insert range), lseek SEEK_DATA/SEEK_HOLE, copy_file_range and
 * FICLONERANGE between two ranges of the file, fsync/fdatasync,
 * close+reopen, reads through a second, independent descriptor, and
 * block-aligned writes through an O_DIRECT descriptor (mixed with
 * buffered I/O; disabled where O_DIRECT opens fail with EINVAL, e.g.
 * tmpfs). Collapse/insert/clone ranges are block-aligned (4096) and
 * their EINVAL cases (past EOF) are expected, not failures. Every result is
 * compared with an in-memory model of the file: every read's bytes, every
 * fstat's size, and the whole file every few hundred operations and at the end.
 * On the first mismatch it prints where, what was expected and what was read,
 * the last operations of the log (all of them with --log-all) and exits 1.
 *
 * --other PATH opens the second descriptor on PATH, the same file seen
 * through another mount (another node of a cluster): every read and size
 * check through it then says whether what the first node wrote, cut,
 * punched, cloned or shifted is seen on the other (clu_random).
 *
 * Model: the file is size bytes; a byte at p < base is always zero (no op
 * writes there, --base puts every op at a large offset to exercise big
 * files); bytes at p >= base live in mbuf[p - base] over a window of
 * maxlen bytes. Invariant: mbuf is zero at and beyond size.
 *
 * Written bytes are never zero (a function of the op number and the
 * position), so a zero where data is expected points at a lost write or a
 * wrong hole, and a non-zero byte names the op that wrote it.
 *
 * lseek answers are checked against the model's bytes: SEEK_DATA may
 * skip only zeros, SEEK_HOLE must land on zeros (a hole may be reported
 * late, never early).
 *
 * An fallocate mode, copy_file_range or clone that returns EOPNOTSUPP
 * (clone also EXDEV, EINVAL or ENOTTY where the fs cannot clone) is
 * disabled for the rest of the run (reported once): that is the allowed
 * answer for unsupported operations. Any other error fails the run.
 *
 * Exit: 0 all operations matched, 1 mismatch or unexpected error,
 * 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

enum op_kind {
	OP_WRITE,
	OP_READ,
	OP_TRUNC,
	OP_FALLOC,
	OP_FALLOC_KEEP,
	OP_PUNCH,
	OP_ZERO,
	OP_FSYNC,
	OP_REOPEN,
	OP_READ2,
	OP_DWRITE,
	OP_ZERO_KEEP,
	OP_COLLAPSE,
	OP_INSERT,
	OP_SEEK,
	OP_COPY,
	OP_CLONE,
	OP_NKINDS
};

static const char *const op_names[OP_NKINDS] = {
    "write",	  "read",	"truncate", "falloc", "falloc_keep",
    "punch",	  "zero_range", "fsync",    "reopen", "read2",
    "dwrite",	  "zero_keep",	"collapse", "insert", "seek",
    "copy_range", "clone",
};

/* One logged operation. */
struct op_rec {
	enum op_kind kind;
	uint64_t off;
	uint64_t len;
	uint64_t size_after; /* model size after the op */
	int ret;	     /* 0, or -errno the op returned */
};

struct fsx {
	const char *path;
	const char *path2; /* the second descriptor's path (--other) */
	int fd;
	int fd2;	   /* second descriptor, opened separately */
	int fdd;	   /* O_DIRECT descriptor (-1: not supported) */
	unsigned char *abuf; /* 4096-aligned buffer for O_DIRECT */
	uint64_t base;	   /* every op lands at >= base */
	uint64_t maxlen;   /* window length */
	uint64_t maxop;	   /* longest single read/write */
	uint64_t size;	   /* model file size */
	unsigned char *mbuf;
	unsigned char *rbuf;
	uint64_t rng;
	uint64_t nops;
	uint64_t opno;
	struct op_rec *log;
	int disabled[OP_NKINDS];
	int direct_every;  /* verify with O_DIRECT reads every N ops */
	int log_all;
	int quiet;
	uint64_t counts[OP_NKINDS];
};

static uint64_t rnd(struct fsx *f)
{
	/* splitmix64: tiny, good enough, fully determined by the seed */
	uint64_t z = (f->rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rnd_below(struct fsx *f, uint64_t n)
{
	return n == 0 ? 0 : rnd(f) % n;
}

static unsigned char pattern(uint64_t opno, uint64_t pos)
{
	return (unsigned char)(((pos % 251) + opno) % 255 + 1);
}

static void dump_log(const struct fsx *f)
{
	uint64_t first = 0;

	if (!f->log_all && f->opno > 60)
		first = f->opno - 60;
	fprintf(stderr, "op log (ops %" PRIu64 "..%" PRIu64 "):\n", first,
		f->opno);
	for (uint64_t i = first; i <= f->opno && i < f->nops; i++) {
		const struct op_rec *r = &f->log[i];

		fprintf(stderr,
			"  %6" PRIu64 " %-11s off %#" PRIx64 " len %#" PRIx64
			" -> size %#" PRIx64 " ret %d\n",
			i, op_names[r->kind], r->off, r->len, r->size_after,
			r->ret);
	}
}

static void fail_at(struct fsx *f, const char *via, const char *what)
{
	fprintf(stderr, "fsx: MISMATCH at op %" PRIu64 " (%s): %s: %s\n",
		f->opno, op_names[f->log[f->opno].kind], via, what);
	dump_log(f);
	exit(1);
}

static unsigned char model_byte(const struct fsx *f, uint64_t p)
{
	if (p >= f->size || p < f->base)
		return 0;
	return f->mbuf[p - f->base];
}

/* Compare @got (len bytes read at off) with the model; die on mismatch. */
static void compare(struct fsx *f, const unsigned char *got, uint64_t off,
		    uint64_t len, const char *via)
{
	for (uint64_t i = 0; i < len; i++) {
		unsigned char want = model_byte(f, off + i);
		uint64_t p = off + i;

		if (got[i] == want)
			continue;
		fprintf(stderr,
			"fsx: %s: byte at %#" PRIx64 " is %#x, expected %#x\n",
			via, p, got[i], want);
		fprintf(stderr, "  expected:");
		for (uint64_t j = i; j < len && j < i + 16; j++)
			fprintf(stderr, " %02x", model_byte(f, off + j));
		fprintf(stderr, "\n  got:     ");
		for (uint64_t j = i; j < len && j < i + 16; j++)
			fprintf(stderr, " %02x", got[j]);
		fprintf(stderr, "\n");
		if (got[i] != 0) {
			/* which op could have written this byte? */
			unsigned k = (got[i] + 255 * 2 - 1 - p % 251) % 255;

			fprintf(stderr,
				"  (the byte read matches the pattern of ops"
				" = %u mod 255)\n", k);
		}
		fail_at(f, via, "wrong data");
	}
}

static void die_errno(struct fsx *f, const char *what, int err)
{
	fprintf(stderr, "fsx: op %" PRIu64 ": %s failed: %s\n", f->opno, what,
		strerror(err));
	dump_log(f);
	exit(1);
}

static void check_size(struct fsx *f, int fd, const char *via)
{
	struct stat st;

	if (fstat(fd, &st) != 0)
		die_errno(f, "fstat", errno);
	if ((uint64_t)st.st_size != f->size) {
		fprintf(stderr,
			"fsx: %s: size %" PRIu64 ", expected %" PRIu64 "\n",
			via, (uint64_t)st.st_size, f->size);
		fail_at(f, via, "wrong size");
	}
}

/* pread exactly len bytes or up to EOF; returns the count read. */
static uint64_t read_full(struct fsx *f, int fd, unsigned char *buf,
			  uint64_t off, uint64_t len)
{
	uint64_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, buf + done, len - done, off + done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			die_errno(f, "pread", errno);
		}
		if (n == 0)
			break;
		done += (uint64_t)n;
	}
	return done;
}

static void do_read_fd(struct fsx *f, int fd, uint64_t off, uint64_t len,
		       const char *via)
{
	uint64_t want = 0, got;

	if (off < f->size)
		want = f->size - off < len ? f->size - off : len;
	got = read_full(f, fd, f->rbuf, off, len);
	if (got != want) {
		fprintf(stderr,
			"fsx: %s at %#" PRIx64 " len %#" PRIx64
			": got %" PRIu64 " bytes, expected %" PRIu64 "\n",
			via, off, len, got, want);
		fail_at(f, via, "short or long read");
	}
	compare(f, f->rbuf, off, got, via);
}

static void verify_all(struct fsx *f, const char *via)
{
	uint64_t off = f->base;

	check_size(f, f->fd, via);
	check_size(f, f->fd2, via);
	/* the region below base must read as zeros: sample its end */
	if (f->base > 0) {
		uint64_t probe = f->base > 65536 ? 65536 : f->base;

		do_read_fd(f, f->fd, f->base - probe, probe, via);
	}
	while (off < f->size) {
		uint64_t len = f->size - off;

		if (len > f->maxop)
			len = f->maxop;
		do_read_fd(f, f->fd2, off, len, via);
		off += len;
	}
}

static void do_write(struct fsx *f, uint64_t off, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		f->rbuf[i] = pattern(f->opno, off + i);
	for (uint64_t done = 0; done < len;) {
		ssize_t n = pwrite(f->fd, f->rbuf + done, len - done,
				   off + done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			die_errno(f, "pwrite", errno);
		}
		done += (uint64_t)n;
	}
	memcpy(f->mbuf + (off - f->base), f->rbuf, len);
	if (off + len > f->size)
		f->size = off + len;
}

/* Block-aligned write through the O_DIRECT descriptor (the kernel must
 * keep the page cache of the other descriptors coherent). */
static void do_dwrite(struct fsx *f, uint64_t off, uint64_t len)
{
	uint64_t lo = (off + 4095) & ~4095ull, hi;

	hi = (off + len) & ~4095ull;
	if (hi > f->base + f->maxlen)
		hi = (f->base + f->maxlen) & ~4095ull;
	if (lo < f->base || hi <= lo) {
		f->log[f->opno].len = 0;
		return;
	}
	f->log[f->opno].off = lo;
	f->log[f->opno].len = hi - lo;
	for (uint64_t i = 0; i < hi - lo; i++)
		f->abuf[i] = pattern(f->opno, lo + i);
	for (uint64_t done = 0; done < hi - lo;) {
		ssize_t n = pwrite(f->fdd, f->abuf + done, hi - lo - done,
				   lo + done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			die_errno(f, "pwrite O_DIRECT", errno);
		}
		done += (uint64_t)n;
	}
	memcpy(f->mbuf + (lo - f->base), f->abuf, hi - lo);
	if (hi > f->size)
		f->size = hi;
}

static void model_zero(struct fsx *f, uint64_t from, uint64_t to)
{
	if (from < f->base)
		from = f->base;
	if (to > f->base + f->maxlen)
		to = f->base + f->maxlen;
	if (from < to)
		memset(f->mbuf + (from - f->base), 0, to - from);
}

static void do_trunc(struct fsx *f, uint64_t newsize)
{
	if (ftruncate(f->fd, (off_t)newsize) != 0)
		die_errno(f, "ftruncate", errno);
	if (newsize < f->size)
		model_zero(f, newsize, f->size);
	f->size = newsize;
}

/* Returns 0, or -EOPNOTSUPP (the mode is then disabled). */
static int do_falloc(struct fsx *f, enum op_kind k, uint64_t off,
		     uint64_t len)
{
	int mode = 0;

	if (k == OP_FALLOC_KEEP)
		mode = FALLOC_FL_KEEP_SIZE;
	else if (k == OP_PUNCH)
		mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
	else if (k == OP_ZERO)
		mode = FALLOC_FL_ZERO_RANGE;
	else if (k == OP_ZERO_KEEP)
		mode = FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
	if (fallocate(f->fd, mode, (off_t)off, (off_t)len) != 0) {
		int err = errno;

		if (err == EOPNOTSUPP) {
			if (!f->quiet)
				printf("fsx: %s returns EOPNOTSUPP: disabled\n",
				       op_names[k]);
			f->disabled[k] = 1;
			return -err;
		}
		die_errno(f, op_names[k], err);
	}
	if (k == OP_PUNCH) {
		model_zero(f, off, off + len < f->size ? off + len : f->size);
	} else if (k == OP_ZERO || k == OP_ZERO_KEEP) {
		model_zero(f, off, off + len);
	}
	if ((k == OP_FALLOC || k == OP_ZERO) && off + len > f->size)
		f->size = off + len;
	return 0;
}

/* An operation the fs may not support answered @err: disable it (0) or
 * fail the run. */
static int unsupported(struct fsx *f, enum op_kind k, int err, int clone)
{
	if (err != EOPNOTSUPP &&
	    !(clone && (err == EXDEV || err == EINVAL || err == ENOTTY)))
		die_errno(f, op_names[k], err);
	if (!f->quiet)
		printf("fsx: %s returns %s: disabled\n", op_names[k],
		       strerror(err));
	f->disabled[k] = 1;
	return -err;
}

/* Block-aligned collapse / insert; EINVAL where the kernel must give it
 * (collapse reaching EOF, insert at or past EOF). */
static int do_shift(struct fsx *f, enum op_kind k, uint64_t off, uint64_t len)
{
	int mode = k == OP_COLLAPSE ? FALLOC_FL_COLLAPSE_RANGE
				    : FALLOC_FL_INSERT_RANGE;
	uint64_t lo = (off + 4095) & ~4095ull, n = len & ~4095ull;
	int bad, err = 0;

	if (n == 0 || lo < f->base ||
	    (k == OP_INSERT && f->size + n > f->base + f->maxlen))
		return 0;
	f->log[f->opno].off = lo;
	f->log[f->opno].len = n;
	bad = k == OP_COLLAPSE ? lo + n >= f->size : lo >= f->size;
	if (fallocate(f->fd, mode, (off_t)lo, (off_t)n) != 0)
		err = errno;
	if (err != 0 && err != EINVAL)
		return unsupported(f, k, err, 0);
	if ((err == EINVAL) != bad) {
		fprintf(stderr,
			"fsx: %s at %#" PRIx64 " len %#" PRIx64
			" size %#" PRIx64 ": %s\n",
			op_names[k], lo, n, f->size,
			err ? "EINVAL" : "succeeded");
		fail_at(f, op_names[k], "wrong result");
	}
	if (err != 0)
		return -err;
	if (k == OP_COLLAPSE) {
		memmove(f->mbuf + (lo - f->base), f->mbuf + (lo + n - f->base),
			f->size - lo - n);
		model_zero(f, f->size - n, f->size);
		f->size -= n;
	} else {
		memmove(f->mbuf + (lo + n - f->base), f->mbuf + (lo - f->base),
			f->size - lo);
		model_zero(f, lo, lo + n);
		f->size += n;
	}
	return 0;
}

/* SEEK_DATA may skip only zeros; SEEK_HOLE must land on zeros (up to
 * the end of its block). */
static void do_seek(struct fsx *f, uint64_t off)
{
	off_t d = lseek(f->fd, (off_t)off, SEEK_DATA);
	int derr = errno;
	off_t h = lseek(f->fd, (off_t)off, SEEK_HOLE);
	int herr = errno;
	uint64_t end;

	if (off >= f->size) {
		if (d >= 0 || h >= 0 || derr != ENXIO || herr != ENXIO)
			fail_at(f, "lseek", "no ENXIO at/past EOF");
		return;
	}
	if (h < 0)
		die_errno(f, "SEEK_HOLE", herr);
	if (d < 0 && derr != ENXIO)
		die_errno(f, "SEEK_DATA", derr);
	end = d < 0 ? f->size : (uint64_t)d;
	if (end < off || end > f->size || (uint64_t)h < off ||
	    (uint64_t)h > f->size)
		fail_at(f, "lseek", "offset out of range");
	for (uint64_t p = off; p < end; p++)
		if (model_byte(f, p) != 0)
			fail_at(f, "SEEK_DATA", "skipped data");
	end = ((uint64_t)h / 4096 + 1) * 4096;
	for (uint64_t p = (uint64_t)h; p < end && p < f->size; p++)
		if (model_byte(f, p) != 0)
			fail_at(f, "SEEK_HOLE", "hole on data");
}

/* copy_file_range or FICLONERANGE from [off, off + len) to another
 * place in the window (clone: block-aligned); overlapping ranges of one
 * file are EINVAL for both. */
static int do_copy(struct fsx *f, enum op_kind k, uint64_t off, uint64_t len)
{
	uint64_t dst = f->base + rnd_below(f, f->maxlen), n = 0, want;
	int err = 0;

	if (k == OP_CLONE) {
		off = (off + 4095) & ~4095ull;
		dst &= ~4095ull;
		len &= ~4095ull;
	}
	if (off < f->base || dst < f->base || len == 0)
		return 0;
	if (dst + len > f->base + f->maxlen)
		len = (f->base + f->maxlen - dst) &
		      (k == OP_CLONE ? ~4095ull : ~0ull);
	want = off >= f->size ? 0 : f->size - off < len ? f->size - off : len;
	if (want == 0 || (off < dst + want && dst < off + want))
		return 0; /* nothing to copy, or overlapping */
	if (k == OP_CLONE && want != len)
		return 0; /* clone to EOF only when EOF is aligned */
	f->log[f->opno].off = off;
	f->log[f->opno].len = want;
	if (k == OP_CLONE) {
		struct file_clone_range cr = {.src_fd = f->fd,
					      .src_offset = off,
					      .src_length = want,
					      .dest_offset = dst};

		if (ioctl(f->fd, FICLONERANGE, &cr) != 0)
			err = errno;
		n = err == 0 ? want : 0;
	}
	while (k == OP_COPY && n < want) {
		loff_t oi = (loff_t)(off + n), oo = (loff_t)(dst + n);
		ssize_t r =
		    copy_file_range(f->fd, &oi, f->fd, &oo, want - n, 0);

		if (r <= 0) {
			err = r < 0 ? errno : EIO;
			break;
		}
		n += (uint64_t)r;
	}
	if (err != 0)
		return unsupported(f, k, err, k == OP_CLONE);
	memmove(f->mbuf + (dst - f->base), f->mbuf + (off - f->base), want);
	if (dst + want > f->size)
		f->size = dst + want;
	return 0;
}

static void do_reopen(struct fsx *f)
{
	if (close(f->fd) != 0)
		die_errno(f, "close", errno);
	f->fd = open(f->path, O_RDWR);
	if (f->fd < 0)
		die_errno(f, "reopen", errno);
}

/* O_DIRECT read of the whole window, if the fs allows O_DIRECT. */
static void direct_verify(struct fsx *f)
{
	int fd = open(f->path, O_RDONLY | O_DIRECT);
	unsigned char *buf;
	uint64_t off, end;

	if (fd < 0) {
		if (errno == EINVAL) /* fs without O_DIRECT */
			return;
		die_errno(f, "open O_DIRECT", errno);
	}
	if (posix_memalign((void **)&buf, 4096, 1 << 20) != 0)
		die_errno(f, "posix_memalign", ENOMEM);
	off = f->base & ~4095ull;
	end = f->size;
	while (off < end) {
		uint64_t len = end - off, got;

		if (len > (1 << 20))
			len = 1 << 20;
		len = (len + 4095) & ~4095ull;
		got = read_full(f, fd, buf, off, len);
		if (got != (end - off < len ? end - off : len)) {
			fprintf(stderr, "fsx: O_DIRECT read at %#" PRIx64
				" got %" PRIu64 "\n", off, got);
			fail_at(f, "O_DIRECT", "short read");
		}
		compare(f, buf, off, got, "O_DIRECT read");
		off += len;
	}
	free(buf);
	close(fd);
}

static enum op_kind pick_kind(struct fsx *f)
{
	/* weights: reads and writes dominate, like fsx */
	static const unsigned weight[OP_NKINDS] = {
	    30, 20, 8, 4, 4, 6, 4, 4, 3, 6, 5, 3, 3, 3, 6, 5, 3,
	};
	unsigned total = 0, r;

	for (int k = 0; k < OP_NKINDS; k++)
		total += f->disabled[k] ? 0 : weight[k];
	r = (unsigned)rnd_below(f, total);
	for (int k = 0; k < OP_NKINDS; k++) {
		if (f->disabled[k])
			continue;
		if (r < weight[k])
			return (enum op_kind)k;
		r -= weight[k];
	}
	return OP_READ;
}

/* A random [off, off+len) inside the window; biased to block edges. */
static void pick_range(struct fsx *f, uint64_t *off, uint64_t *len)
{
	uint64_t o = rnd_below(f, f->maxlen);
	uint64_t l = 1 + rnd_below(f, f->maxop);

	switch (rnd_below(f, 4)) {
	case 0:
		o &= ~4095ull;
		l = (l + 4095) & ~4095ull;
		break;
	case 1: /* near the current end of file */
		if (f->size > f->base)
			o = f->size - f->base - rnd_below(f, 8192) %
				(f->size - f->base + 1);
		break;
	default:
		break;
	}
	if (o >= f->maxlen)
		o = f->maxlen - 1;
	if (o + l > f->maxlen)
		l = f->maxlen - o;
	*off = f->base + o;
	*len = l;
}

static void run_op(struct fsx *f)
{
	enum op_kind k = pick_kind(f);
	struct op_rec *r = &f->log[f->opno];
	uint64_t off, len;

	pick_range(f, &off, &len);
	r->kind = k;
	r->off = off;
	r->len = len;
	r->ret = 0;
	switch (k) {
	case OP_WRITE:
		do_write(f, off, len);
		break;
	case OP_READ:
	case OP_READ2:
		if (rnd_below(f, 8) == 0) /* read across EOF */
			off = f->size > 100 ? f->size - 100 : 0;
		r->off = off;
		do_read_fd(f, k == OP_READ ? f->fd : f->fd2, off, len,
			   op_names[k]);
		break;
	case OP_TRUNC:
		off = rnd_below(f, 3) == 0 ? f->base + rnd_below(f, 8192)
					   : off;
		if (off > f->base + f->maxlen)
			off = f->base + f->maxlen;
		r->off = off;
		r->len = 0;
		do_trunc(f, off);
		break;
	case OP_FALLOC:
	case OP_FALLOC_KEEP:
	case OP_PUNCH:
	case OP_ZERO:
	case OP_ZERO_KEEP:
		r->ret = do_falloc(f, k, off, len);
		break;
	case OP_COLLAPSE:
	case OP_INSERT:
		r->ret = do_shift(f, k, off, len);
		break;
	case OP_SEEK:
		do_seek(f, off);
		break;
	case OP_COPY:
	case OP_CLONE:
		r->ret = do_copy(f, k, off, len);
		break;
	case OP_DWRITE:
		do_dwrite(f, off, len);
		break;
	case OP_FSYNC:
		if ((rnd(f) & 1 ? fsync(f->fd) : fdatasync(f->fd)) != 0)
			die_errno(f, "fsync", errno);
		break;
	case OP_REOPEN:
		do_reopen(f);
		break;
	case OP_NKINDS:
		break;
	}
	r->size_after = f->size;
	f->counts[k]++;
	check_size(f, f->fd, op_names[k]);
}

static int usage(void)
{
	fprintf(stderr,
		"usage: fsx [--seed N] [--ops N] [--maxlen B] [--base B]"
		" [--maxop B]\n"
		"           [--no-falloc] [--no-punch] [--no-zero] [--no-shift]"
		" [--no-copy]\n"
		"           [--no-dwrite] [--direct-every N]\n"
		"           [--other PATH] [--log-all] [--quiet] FILE\n");
	return 2;
}

static int parse_args(struct fsx *f, int argc, char **argv, uint64_t *seed)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int has = i + 1 < argc;

		if (strcmp(a, "--seed") == 0 && has)
			*seed = strtoull(argv[++i], NULL, 0);
		else if (strcmp(a, "--ops") == 0 && has)
			f->nops = strtoull(argv[++i], NULL, 0);
		else if (strcmp(a, "--maxlen") == 0 && has)
			f->maxlen = strtoull(argv[++i], NULL, 0);
		else if (strcmp(a, "--base") == 0 && has)
			f->base = strtoull(argv[++i], NULL, 0);
		else if (strcmp(a, "--maxop") == 0 && has)
			f->maxop = strtoull(argv[++i], NULL, 0);
		else if (strcmp(a, "--direct-every") == 0 && has)
			f->direct_every = atoi(argv[++i]);
		else if (strcmp(a, "--no-falloc") == 0)
			f->disabled[OP_FALLOC] = f->disabled[OP_FALLOC_KEEP] =
				1;
		else if (strcmp(a, "--no-punch") == 0)
			f->disabled[OP_PUNCH] = 1;
		else if (strcmp(a, "--no-zero") == 0)
			f->disabled[OP_ZERO] = f->disabled[OP_ZERO_KEEP] = 1;
		else if (strcmp(a, "--no-shift") == 0)
			f->disabled[OP_COLLAPSE] = f->disabled[OP_INSERT] = 1;
		else if (strcmp(a, "--no-copy") == 0)
			f->disabled[OP_COPY] = f->disabled[OP_CLONE] = 1;
		else if (strcmp(a, "--no-dwrite") == 0)
			f->disabled[OP_DWRITE] = 1;
		else if (strcmp(a, "--other") == 0 && has)
			f->path2 = argv[++i];
		else if (strcmp(a, "--log-all") == 0)
			f->log_all = 1;
		else if (strcmp(a, "--quiet") == 0)
			f->quiet = 1;
		else if (a[0] != '-' && f->path == NULL)
			f->path = a;
		else
			return -EINVAL;
	}
	if (f->path == NULL || f->maxlen == 0 || f->maxop == 0 ||
	    f->nops == 0)
		return -EINVAL;
	if (f->maxop > f->maxlen)
		f->maxop = f->maxlen;
	if (f->path2 == NULL)
		f->path2 = f->path;
	return 0;
}

int main(int argc, char **argv)
{
	struct fsx f = {
		.maxlen = 256 * 1024,
		.maxop = 64 * 1024,
		.nops = 10000,
		.direct_every = 0,
	};
	uint64_t seed = 1;
	const char *env = getenv("UCFS_SEED");

	if (env != NULL)
		seed = strtoull(env, NULL, 0);
	if (parse_args(&f, argc, argv, &seed) != 0)
		return usage();
	f.rng = seed;
	f.mbuf = calloc(1, f.maxlen);
	f.rbuf = malloc(f.maxlen > f.maxop ? f.maxlen : f.maxop);
	f.log = calloc(f.nops, sizeof(*f.log));
	if (f.mbuf == NULL || f.rbuf == NULL || f.log == NULL) {
		fprintf(stderr, "fsx: out of memory\n");
		return 1;
	}
	printf("fsx: seed %" PRIu64 " ops %" PRIu64 " maxlen %" PRIu64
	       " base %" PRIu64 " (replay with --seed %" PRIu64 ")\n",
	       seed, f.nops, f.maxlen, f.base, seed);
	fflush(stdout);
	f.fd = open(f.path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (f.fd < 0)
		die_errno(&f, f.path, errno);
	f.fd2 = open(f.path2, O_RDONLY);
	if (f.fd2 < 0)
		die_errno(&f, f.path2, errno);
	f.fdd = f.disabled[OP_DWRITE] ? -1 : open(f.path, O_WRONLY | O_DIRECT);
	if (f.fdd < 0 && !f.disabled[OP_DWRITE]) {
		if (errno != EINVAL)
			die_errno(&f, "open O_DIRECT", errno);
		if (!f.quiet)
			printf("fsx: no O_DIRECT here: dwrite disabled\n");
	}
	if (f.fdd < 0)
		f.disabled[OP_DWRITE] = 1;
	if (posix_memalign((void **)&f.abuf, 4096, f.maxlen + 4096) != 0)
		die_errno(&f, "posix_memalign", ENOMEM);
	if (f.base > 0)
		do_trunc(&f, f.base);
	for (f.opno = 0; f.opno < f.nops; f.opno++) {
		run_op(&f);
		if (f.opno % 500 == 499)
			verify_all(&f, "periodic verify");
		if (f.direct_every > 0 &&
		    f.opno % (uint64_t)f.direct_every == 0)
			direct_verify(&f);
	}
	f.opno = f.nops - 1;
	if (fsync(f.fd) != 0)
		die_errno(&f, "final fsync", errno);
	do_reopen(&f);
	verify_all(&f, "final verify");
	printf("fsx: %" PRIu64 " ops OK, final size %" PRIu64 " (", f.nops,
	       f.size);
	for (int k = 0; k < OP_NKINDS; k++)
		printf("%s%s %" PRIu64, k ? ", " : "", op_names[k],
		       f.counts[k]);
	printf(")\n");
	close(f.fd);
	close(f.fd2);
	if (f.fdd >= 0)
		close(f.fdd);
	free(f.abuf);
	free(f.mbuf);
	free(f.rbuf);
	free(f.log);
	return 0;
}
