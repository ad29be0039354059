/*
 * fs_xattr.c — extended attributes and POSIX ACLs.
 *
 * Storage: one external XATTR block per inode (dinode.xattr_blk, 0 if
 * none). Entries are packed from data[0]: {u8 ns, u8 namelen, u16 vlen,
 * name, value}, each padded to 4 bytes; `used` bytes, `count` entries.
 * Namespaces: 1 "user.", 2 "trusted.", 3 "security.",
 * 4 "system.posix_acl_access", 5 "system.posix_acl_default" (4 and 5 have
 * an empty name). Anything else is -EOPNOTSUPP. The block is freed when
 * its last entry goes.
 *
 * ACLs (the daemon asks for FUSE_CAP_POSIX_ACL, so the kernel enforces
 * them and leaves to us what the VFS does in posix_acl_update_mode,
 * posix_acl_chmod and posix_acl_create):
 *  - setting an access ACL sets the mode's permission bits from it (group
 *    bits from the mask entry if any); an ACL equivalent to the mode is
 *    not stored;
 *  - chmod rewrites the stored access ACL's owner/mask/other entries;
 *  - a new inode in a directory with a default ACL inherits it (access
 *    ACL masked by the create mode; directories also get the default);
 *    without one, the caller's umask applies.
 *
 * Locking: the inode's lock (fs_ilock.h) exclusive for changes, shared
 * for reads (asserted in debug builds); each change is one transaction
 * of its own.
 */
#include "fusefs/namespace/fs_ns.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

enum { NS_USER = 1, NS_TRUSTED, NS_SECURITY, NS_ACL_ACCESS, NS_ACL_DEFAULT };

static const struct {
	const char *prefix;
	unsigned ns;
	int exact;
} prefixes[] = {
	{ "user.", NS_USER, 0 },
	{ "trusted.", NS_TRUSTED, 0 },
	{ "security.", NS_SECURITY, 0 },
	{ "system.posix_acl_access", NS_ACL_ACCESS, 1 },
	{ "system.posix_acl_default", NS_ACL_DEFAULT, 1 },
};

#define XDATA_MAX (FS_BLOCK_SIZE - 48u)

struct xname {
	unsigned ns;
	const char *name;
	size_t len;
};

static int parse_name(const char *full, struct xname *x)
{
	size_t flen = strlen(full);

	if (flen > FS_XATTR_NAME_MAX)
		return -ERANGE;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t pl = strlen(prefixes[i].prefix);

		if (strncmp(full, prefixes[i].prefix, pl) != 0)
			continue;
		if (prefixes[i].exact ? flen != pl : flen == pl)
			return prefixes[i].exact ? -EOPNOTSUPP : -EINVAL;
		x->ns = prefixes[i].ns;
		x->name = full + pl;
		x->len = flen - pl;
		return 0;
	}
	return -EOPNOTSUPP;
}

static size_t ent_size(size_t namelen, size_t vlen)
{
	return (4 + namelen + vlen + 3) & ~(size_t)3;
}

/* Walk the entries of @xb; *off of the match or -ENODATA. */
static int xfind(const struct fs_xattr_blk *xb, const struct xname *x,
		 size_t *off)
{
	size_t o = 0;

	while (o + 4 <= xb->used && xb->used <= XDATA_MAX) {
		const uint8_t *e = xb->data + o;
		uint16_t vlen;

		memcpy(&vlen, e + 2, 2);
		if (o + ent_size(e[1], vlen) > xb->used)
			return -EUCLEAN;
		if (e[0] == x->ns && e[1] == x->len &&
		    memcmp(e + 4, x->name, x->len) == 0) {
			*off = o;
			return 0;
		}
		o += ent_size(e[1], vlen);
	}
	return -ENODATA;
}

static int xblk_read(struct fs *fs, struct fs_buf *ib, struct fs_buf **out)
{
	uint64_t blk = fs_di(ib)->xattr_blk;

	if (blk == 0)
		return -ENODATA;
	return fs_buf_read(fs, blk, FS_BT_XATTR, out);
}

/* ---- get / list ---- */

static ssize_t get_raw(struct fs *fs, struct fs_buf *ib,
		       const struct xname *x, void *buf, size_t size)
{
	struct fs_xattr_blk *xb;
	struct fs_buf *b;
	uint16_t vlen;
	size_t off;
	ssize_t ret;

	ret = xblk_read(fs, ib, &b);
	if (ret < 0)
		return ret;
	xb = (struct fs_xattr_blk *)b->data;
	ret = xfind(xb, x, &off);
	if (ret == 0) {
		memcpy(&vlen, xb->data + off + 2, 2);
		ret = vlen;
		if (size > 0 && size < vlen)
			ret = -ERANGE;
		else if (size > 0)
			memcpy(buf, xb->data + off + 4 + x->len, vlen);
	}
	fs_buf_put(b);
	return ret;
}

ssize_t fs_xattr_get(struct fs *fs, struct fs_buf *ib, const char *name,
		     void *buf, size_t size)
{
	struct xname x;
	int ret;

	FS_ASSERT_HELD(fs, ib->blkno, FS_IL_SH);
	ret = parse_name(name, &x);
	if (ret < 0)
		return ret == -EINVAL ? -ENODATA : ret;
	return get_raw(fs, ib, &x, buf, size);
}

ssize_t fs_xattr_list(struct fs *fs, struct fs_buf *ib, char *buf,
		      size_t size)
{
	struct fs_xattr_blk *xb;
	struct fs_buf *b;
	size_t o = 0, total = 0;
	int ret;

	FS_ASSERT_HELD(fs, ib->blkno, FS_IL_SH);
	ret = xblk_read(fs, ib, &b);
	if (ret == -ENODATA)
		return 0;
	if (ret < 0)
		return ret;
	xb = (struct fs_xattr_blk *)b->data;
	while (o + 4 <= xb->used && xb->used <= XDATA_MAX) {
		const uint8_t *e = xb->data + o;
		const char *pre = "?";
		size_t n;
		uint16_t vlen;

		memcpy(&vlen, e + 2, 2);
		for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]);
		     i++)
			if (prefixes[i].ns == e[0])
				pre = prefixes[i].prefix;
		n = strlen(pre) + e[1] + 1;
		if (size > 0 && total + n > size) {
			fs_buf_put(b);
			return -ERANGE;
		}
		if (size > 0) {
			memcpy(buf + total, pre, strlen(pre));
			memcpy(buf + total + strlen(pre), e + 4, e[1]);
			buf[total + n - 1] = '\0';
		}
		total += n;
		o += ent_size(e[1], vlen);
	}
	fs_buf_put(b);
	return (ssize_t)total;
}

/* ---- set / remove ---- */

/*
 * Replace, add (@value != NULL) or delete (@value == NULL) entry @x in
 * one transaction, allocating or freeing the block as needed. Also moves
 * ctime and, with @mode >= 0, sets the permission bits to @mode.
 */
static int set_raw(struct fs *fs, struct fs_buf *ib, const struct xname *x,
		   const void *value, size_t vlen, int flags, int mode)
{
	struct fs_dinode *di = fs_di(ib);
	struct fs_xattr_blk *xb = NULL;
	struct fs_buf *b = NULL;
	struct fs_tx *tx;
	size_t off = 0, esz = 0, add;
	uint64_t blk;
	uint32_t got;
	int ret, found = 0;

	if (value != NULL && vlen > XDATA_MAX)
		return -E2BIG;
	ret = xblk_read(fs, ib, &b);
	if (ret < 0 && ret != -ENODATA)
		return ret;
	if (b != NULL) {
		xb = (struct fs_xattr_blk *)b->data;
		ret = xfind(xb, x, &off);
		if (ret < 0 && ret != -ENODATA)
			goto out_put;
		found = ret == 0;
		if (found) {
			uint16_t ol;

			memcpy(&ol, xb->data + off + 2, 2);
			esz = ent_size(x->len, ol);
		}
	}
	ret = 0;
	if ((flags & XATTR_CREATE) && found)
		ret = -EEXIST;
	else if (((flags & XATTR_REPLACE) || value == NULL) && !found)
		ret = -ENODATA;
	add = value != NULL ? ent_size(x->len, vlen) : 0;
	if (ret == 0 && (xb != NULL ? xb->used : 0) - esz + add > XDATA_MAX)
		ret = -ENOSPC;
	if (ret < 0)
		goto out_put;

	ret = fs_tx_begin(fs, 3 + 2 * FS_ALLOC_CREDITS(fs), &tx);
	if (ret < 0)
		goto out_put;
	ret = fs_tx_write(tx, ib);
	if (ret == 0 && b == NULL) {
		ret = fs_alloc(tx, ib->blkno, 1, 1, &blk, &got);
		if (ret == 0)
			ret = fs_buf_new(tx, blk, FS_BT_XATTR, &b);
		if (ret == 0) {
			xb = (struct fs_xattr_blk *)b->data;
			xb->owner = ib->blkno;
			di->xattr_blk = blk;
		}
	} else if (ret == 0) {
		ret = fs_tx_write(tx, b);
	}
	if (ret < 0)
		goto out_end;
	if (found) {
		memmove(xb->data + off, xb->data + off + esz,
			xb->used - off - esz);
		xb->used -= (uint32_t)esz;
		xb->count--;
		memset(xb->data + xb->used, 0, esz);
	}
	if (value != NULL) {
		uint8_t *e = xb->data + xb->used;
		uint16_t v16 = (uint16_t)vlen;

		memset(e, 0, add);
		e[0] = (uint8_t)x->ns;
		e[1] = (uint8_t)x->len;
		memcpy(e + 2, &v16, 2);
		memcpy(e + 4, x->name, x->len);
		memcpy(e + 4 + x->len, value, vlen);
		xb->used += (uint32_t)add;
		xb->count++;
	}
	if (mode >= 0)
		di->mode = (di->mode & ~07777u) | ((unsigned)mode & 07777u);
	fs_ino_touch(di, FS_T_CTIME);
	if (xb->count == 0) {
		blk = di->xattr_blk;
		di->xattr_blk = 0;
		fs_buf_put(b);
		b = NULL;
		ret = fs_free(tx, blk, 1);
	}
out_end:
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
out_put:
	fs_buf_put(b);
	return ret;
}

int fs_xattr_free(struct fs_tx *tx, struct fs_buf *ib)
{
	uint64_t blk = fs_di(ib)->xattr_blk;

	if (blk == 0)
		return 0;
	fs_di(ib)->xattr_blk = 0;
	return fs_free(tx, blk, 1);
}

/* ---- POSIX ACL values (struct posix_acl_xattr_header + entries) ---- */

#define ACL_VERSION 2u
enum {
	ACL_USER_OBJ = 0x01, ACL_USER = 0x02, ACL_GROUP_OBJ = 0x04,
	ACL_GROUP = 0x08, ACL_MASK = 0x10, ACL_OTHER = 0x20,
};

struct acl_ent {
	uint16_t tag;
	uint16_t perm;
	uint32_t id;
};

/* Number of entries, or -EINVAL for a malformed value. */
static int acl_count(const void *value, size_t size)
{
	uint32_t ver;

	if (size < 4 || (size - 4) % sizeof(struct acl_ent) != 0)
		return -EINVAL;
	memcpy(&ver, value, 4);
	if (ver != ACL_VERSION)
		return -EINVAL;
	return (int)((size - 4) / sizeof(struct acl_ent));
}

static struct acl_ent *acl_ents(void *value)
{
	return (struct acl_ent *)((char *)value + 4);
}

/*
 * Apply @mode to an ACL (posix_acl_create_masq when @create, else
 * posix_acl_chmod) and compute the resulting mode bits into *out.
 * Returns 1 if the ACL has entries the mode cannot express, 0 if it is
 * equivalent to the mode, -EINVAL if malformed.
 */
static int acl_apply_mode(void *value, size_t size, unsigned mode,
			  int create, unsigned *out)
{
	int n = acl_count(value, size), ext = 0;
	struct acl_ent *e, *mask = NULL, *group = NULL;
	unsigned res = mode & ~0777u;

	if (n < 0)
		return n;
	e = acl_ents(value);
	for (int i = 0; i < n; i++) {
		unsigned p = e[i].perm & 7;

		switch (e[i].tag) {
		case ACL_USER_OBJ:
			p = create ? p & ((mode >> 6) & 7) : (mode >> 6) & 7;
			e[i].perm = (uint16_t)p;
			res |= p << 6;
			break;
		case ACL_GROUP_OBJ:
			group = &e[i];
			break;
		case ACL_MASK:
			mask = &e[i];
			ext = 1;
			break;
		case ACL_OTHER:
			p = create ? p & (mode & 7) : mode & 7;
			e[i].perm = (uint16_t)p;
			res |= p;
			break;
		case ACL_USER:
		case ACL_GROUP:
			ext = 1;
			break;
		default:
			return -EINVAL;
		}
	}
	if (mask == NULL)
		mask = group;
	if (mask == NULL)
		return -EINVAL;
	mask->perm = (uint16_t)(create ? (mask->perm & 7) & ((mode >> 3) & 7)
				       : (mode >> 3) & 7);
	res |= (unsigned)(mask->perm & 7) << 3;
	*out = res;
	return ext;
}

/* Mode bits an access ACL stands for (posix_acl_equiv_mode). */
static int acl_mode(const void *value, size_t size, unsigned cur,
		    unsigned *out)
{
	char tmp[FS_BLOCK_SIZE];
	struct acl_ent *e;
	unsigned u = 0, g = 0, o = 0, m = 0;
	int n = acl_count(value, size), has_mask = 0, ext = 0;

	if (n < 0 || size > sizeof(tmp))
		return -EINVAL;
	memcpy(tmp, value, size);
	e = acl_ents(tmp);
	for (int i = 0; i < n; i++) {
		switch (e[i].tag) {
		case ACL_USER_OBJ: u = e[i].perm & 7; break;
		case ACL_GROUP_OBJ: g = e[i].perm & 7; break;
		case ACL_OTHER: o = e[i].perm & 7; break;
		case ACL_MASK: m = e[i].perm & 7; has_mask = 1; break;
		case ACL_USER: case ACL_GROUP: ext = 1; break;
		default: return -EINVAL;
		}
	}
	*out = (cur & ~0777u) | u << 6 | (has_mask ? m : g) << 3 | o;
	return ext || has_mask;
}

int fs_xattr_set(struct fs *fs, struct fs_buf *ib, const char *name,
		 const void *value, size_t size, int flags)
{
	struct xname x;
	unsigned mode;
	int ret;

	FS_ASSERT_HELD(fs, ib->blkno, FS_IL_EX);
	ret = parse_name(name, &x);
	if (ret < 0)
		return ret;
	if (x.ns == NS_ACL_DEFAULT && !S_ISDIR(fs_di(ib)->mode))
		return -EACCES;
	if (x.ns != NS_ACL_ACCESS)
		return set_raw(fs, ib, &x, value, size, flags, -1);
	ret = acl_mode(value, size, fs_di(ib)->mode, &mode);
	if (ret < 0)
		return ret;
	if (ret == 1)
		return set_raw(fs, ib, &x, value, size, flags, (int)mode);
	/* equivalent to the mode: store the mode only */
	ret = set_raw(fs, ib, &x, NULL, 0, 0, (int)mode);
	if (ret == -ENODATA) {
		struct fs_tx *tx;

		ret = fs_tx_begin(fs, 1, &tx);
		if (ret < 0)
			return ret;
		ret = fs_tx_write(tx, ib);
		if (ret == 0) {
			fs_di(ib)->mode = mode;
			fs_ino_touch(fs_di(ib), FS_T_CTIME);
		}
		if (fs_tx_end(tx) < 0 && ret == 0)
			ret = -EIO;
	}
	return ret;
}

int fs_xattr_remove(struct fs *fs, struct fs_buf *ib, const char *name)
{
	struct xname x;
	int ret;

	FS_ASSERT_HELD(fs, ib->blkno, FS_IL_EX);
	ret = parse_name(name, &x);
	if (ret < 0)
		return ret == -EINVAL ? -ENODATA : ret;
	return set_raw(fs, ib, &x, NULL, 0, 0, -1);
}

int fs_xattr_acl_chmod(struct fs *fs, struct fs_buf *ib)
{
	struct xname x = { NS_ACL_ACCESS, "", 0 };
	char val[FS_BLOCK_SIZE];
	unsigned mode;
	ssize_t n;
	int ret;

	n = get_raw(fs, ib, &x, val, sizeof(val));
	if (n == -ENODATA)
		return 0;
	if (n < 0)
		return (int)n;
	ret = acl_apply_mode(val, (size_t)n, fs_di(ib)->mode, 0, &mode);
	if (ret < 0)
		return ret;
	return set_raw(fs, ib, &x, val, (size_t)n, 0, -1);
}

int fs_xattr_inherit_prepare(struct fs *fs, struct fs_buf *parent,
			     mode_t *mode, mode_t umask,
			     struct fs_acl_inherit *out)
{
	struct xname x = { NS_ACL_DEFAULT, "", 0 };
	unsigned m;
	ssize_t n;
	int ret;

	memset(out, 0, offsetof(struct fs_acl_inherit, access));
	n = get_raw(fs, parent, &x, out->deflt, sizeof(out->deflt));
	if (n == -ENODATA || n == -ERANGE || S_ISLNK(*mode)) {
		/* no default ACL (or one too large to inherit: umask) */
		if (!S_ISLNK(*mode))
			*mode &= ~umask;
		return 0;
	}
	if (n < 0)
		return (int)n;
	out->has_default = 1;
	out->default_len = (size_t)n;
	memcpy(out->access, out->deflt, (size_t)n);
	ret = acl_apply_mode(out->access, (size_t)n, *mode, 1, &m);
	if (ret < 0)
		return ret;
	*mode = (*mode & ~07777u) | (m & 0777u) | (*mode & 07000u);
	out->access_len = ret == 1 ? (size_t)n : 0;
	if (!S_ISDIR(*mode))
		out->default_len = 0;
	return 0;
}

int fs_xattr_inherit_apply(struct fs *fs, struct fs_buf *child,
			   const struct fs_acl_inherit *in)
{
	struct xname acc = { NS_ACL_ACCESS, "", 0 };
	struct xname def = { NS_ACL_DEFAULT, "", 0 };
	int ret = 0;

	if (!in->has_default)
		return 0;
	if (in->access_len > 0)
		ret = set_raw(fs, child, &acc, in->access, in->access_len, 0,
			      -1);
	if (ret == 0 && in->default_len > 0)
		ret = set_raw(fs, child, &def, in->deflt, in->default_len, 0,
			      -1);
	return ret;
}
