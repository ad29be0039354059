/*
 * fs_copy.c — copy_file_range(2) inside one ucfs filesystem.
 *
 * Block-aligned ranges are shared, not copied (fs_clone_range: the
 * destination maps the source's blocks, copy on write later), when the
 * filesystem has the reflink feature and the two files can share. Else
 * the data is copied without passing through the kernel: the daemon
 * reads the source blocks into a buffer of its own and writes them to
 * the destination (device to device), COPY_CHUNK bytes at a time,
 * through the same calls as reads and writes (fs_read, fs_write: their
 * locks, their write path, unwritten conversion included). Holes stay
 * holes: the source is walked
 * with SEEK_DATA / SEEK_HOLE (fs_lseek); a hole of the source becomes
 * ZERO_RANGE of the destination where the destination has bytes (no data
 * I/O for its whole blocks), and nothing past the destination's end of
 * file (the final size covers it).
 *
 * Not atomic (neither is Linux's): each chunk takes the inodes' locks on
 * its own, so a concurrent writer may interleave (dlm: and its inodes'
 * glocks; fs_op_begin around the copy only reserves an rgroup). An
 * error ends the copy and is returned; what was copied before it stays.
 */
#include "fusefs/namespace/fs_ns.h"
#include "lockmgr/lk.h"

#include <errno.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <unistd.h>

#define COPY_CHUNK (1u << 20)

struct copy {
	struct fs *fs;
	const struct fs_cred *cred;
	uint64_t in, out;
	uint64_t out_size; /* the destination's size at the start */
	char *buf;
};

static int attr_of(struct fs *fs, uint64_t ino, struct fs_attr *a)
{
	int ret = fs_getattr(fs, ino, a);

	if (ret == 0 && S_ISDIR(a->mode))
		return -EISDIR;
	return ret == 0 && !S_ISREG(a->mode) ? -EINVAL : ret;
}

/* Copy the data [pos, end) of the source to @dst. */
static int copy_data(struct copy *c, uint64_t pos, uint64_t end, uint64_t dst)
{
	while (pos < end) {
		size_t n =
		    end - pos < COPY_CHUNK ? (size_t)(end - pos) : COPY_CHUNK;
		ssize_t r = fs_read(c->fs, c->in, c->buf, n, pos);

		if (r <= 0)
			return r < 0 ? (int)r : -EIO; /* shrunk meanwhile */
		n = (size_t)r;
		r = fs_write(c->fs, c->cred, c->out, c->buf, n, dst);
		if (r < 0)
			return (int)r;
		pos += n;
		dst += n;
	}
	return 0;
}

/* The source's hole [pos, end) at destination offset @dst: zeros where
 * the destination has bytes, nothing past its end. */
static int copy_hole(struct copy *c, uint64_t pos, uint64_t end, uint64_t dst)
{
	uint64_t len = end - pos;

	if (dst >= c->out_size)
		return 0;
	if (len > c->out_size - dst)
		len = c->out_size - dst;
	return fs_fallocate(c->fs, c->cred, c->out,
			    FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, dst,
			    len);
}

/* Share what can be shared: the block-aligned part of the range (all of
 * it if it ends at the source's EOF and reaches the destination's).
 * Returns the bytes shared (0: none, copy them all), or -errno. */
static int64_t clone_part(struct copy *c, uint64_t off, uint64_t dst,
			  uint64_t len, uint64_t in_size)
{
	uint64_t n = len / FS_BLOCK_SIZE * FS_BLOCK_SIZE;
	int ret;

	if (off % FS_BLOCK_SIZE != 0 || dst % FS_BLOCK_SIZE != 0)
		return 0;
	if (off + len == in_size && dst + len >= c->out_size)
		n = len;
	if (n == 0)
		return 0;
	ret = fs_clone_range(c->fs, c->cred, c->in, off, c->out, dst, n);
	if (ret == -EOPNOTSUPP || ret == -EINVAL)
		return 0; /* not shareable: copy the data */
	if (ret == 0 && dst + n > c->out_size)
		c->out_size = dst + n;
	return ret < 0 ? ret : (int64_t)n;
}

/* Copy [off, off + len) of the source to @dst, region by region. */
static int copy_regions(struct copy *c, uint64_t off, uint64_t len,
			uint64_t dst)
{
	uint64_t pos = off, end = off + len, data, hole;
	int ret = 0;

	while (ret == 0 && pos < end) {
		ret = fs_lseek(c->fs, c->in, pos, SEEK_DATA, &data);
		if (ret == -ENXIO) {
			data = end;
			ret = 0;
		}
		if (ret < 0)
			break;
		if (data > end)
			data = end;
		if (data > pos)
			ret = copy_hole(c, pos, data, dst + (pos - off));
		if (ret < 0 || data == end)
			break;
		ret = fs_lseek(c->fs, c->in, data, SEEK_HOLE, &hole);
		if (ret == -ENXIO) { /* truncated meanwhile */
			hole = end;
			ret = 0;
		}
		if (hole > end)
			hole = end;
		if (ret == 0)
			ret = copy_data(c, data, hole, dst + (data - off));
		pos = hole;
	}
	return ret;
}

static ssize_t copy_range(struct fs *fs, const struct fs_cred *cred,
			  uint64_t ino_in, uint64_t off_in, uint64_t ino_out,
			  uint64_t off_out, size_t len, unsigned flags)
{
	struct copy c = {.fs = fs, .cred = cred, .in = ino_in, .out = ino_out};
	struct fs_attr ai, ao;
	int64_t shared;
	int ret;

	if (flags != 0)
		return -EINVAL;
	ret = attr_of(fs, ino_in, &ai);
	if (ret == 0)
		ret = attr_of(fs, ino_out, &ao);
	if (ret < 0)
		return ret;
	if (off_in >= ai.size || len == 0)
		return 0;
	if (len > ai.size - off_in)
		len = (size_t)(ai.size - off_in);
	if (off_out >= FS_FILE_MAX || len > FS_FILE_MAX - off_out)
		return -EFBIG;
	if (ino_in == ino_out && off_in < off_out + len &&
	    off_out < off_in + len)
		return -EINVAL; /* overlapping ranges of one file */
	c.out_size = ao.size;
	shared = clone_part(&c, off_in, off_out, len, ai.size);
	if (shared < 0)
		return (ssize_t)shared;
	if ((uint64_t)shared == len) {
		FS_NS_STAT_ADD(fs, copy_bytes, len);
		return (ssize_t)len;
	}
	c.buf = malloc(COPY_CHUNK);
	if (c.buf == NULL)
		return -ENOMEM;
	ret = copy_regions(&c, off_in + shared, len - shared, off_out + shared);
	if (ret == 0 && off_out + len > ao.size) {
		/* a hole at the end of the source: the size covers it */
		struct fs_attr sz = {.size = off_out + len}, out;

		if (fs_getattr(fs, ino_out, &out) == 0 && out.size < sz.size)
			ret = fs_setattr(fs, cred, ino_out, &sz, FS_SET_SIZE,
					 &out);
	}
	free(c.buf);
	if (ret < 0)
		return ret;
	FS_NS_STAT_ADD(fs, copy_bytes, len);
	return (ssize_t)len;
}

ssize_t fs_copy_file_range(struct fs *fs, const struct fs_cred *cred,
			   uint64_t ino_in, uint64_t off_in, uint64_t ino_out,
			   uint64_t off_out, size_t len, unsigned flags)
{
	struct fs_ilock il;
	ssize_t n;

	if (fs_op_begin(&il, fs, LK_EX) < 0)
		return -EIO;
	n = copy_range(fs, cred, ino_in, off_in, ino_out, off_out, len, flags);
	fs_op_end(&il);
	return n;
}
