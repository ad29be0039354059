/*
 * fs_dir.c — directories on the generic B+tree.
 *
 * Key of an entry: h = fs_dirkey_hash(name) (fs_format.c: low 4 bits clear,
 * at least 16), plus a probe 0..15: an insert takes the first free key in
 * [h, h + 15], a lookup scans that range (one tree descent) comparing
 * names. Value: struct fs_dirent_val {ino, type, namelen, name}.
 *
 * Readdir cookies: 0 = start (".""), 1 = "..", 2.. = resume at the first
 * key >= cookie; each entry's cookie is its key + 1. Keys never move, so a
 * cookie stays valid while other entries come and go, and keys stay below
 * 2^62 so key + 1 fits a signed off_t.
 *
 * The directory inode's size field counts its entries (rmdir's emptiness
 * test), its parent field names the parent directory ("..").
 * Small directories are simply a root-only tree inside the inode block.
 *
 * Locking: callers hold the directory's inode lock (fs_ilock.h), shared
 * to read, exclusive to modify (asserted in debug builds).
 */
#include "fusefs/namespace/fs_ns.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>

struct dirent_buf {
	struct fs_dirent_val v;
	char name[FS_NAME_MAX];
};

void fs_dir_tree(struct fs *fs, struct fs_buf *dir, struct fs_btree *bt)
{
	fs_btree_init(bt, fs, dir, FS_INODE_INLINE_OFF, FS_INODE_INLINE_SIZE,
		      dir->blkno);
}

unsigned fs_dir_credits(struct fs *fs, struct fs_buf *dir)
{
	struct fs_btree bt;

	fs_dir_tree(fs, dir, &bt);
	return fs_btree_credits(&bt);
}

struct probe {
	uint64_t h;
	const char *name;
	size_t len;
	uint64_t found_key;	/* matching entry */
	uint64_t ino;
	unsigned type;
	int found;
	uint16_t used;		/* bitmap of probes in use */
};

/* Values sit unaligned in the B+tree's heap: copy the header out. */
static int val_header(const void *val, size_t len, struct fs_dirent_val *v)
{
	if (len < sizeof(*v))
		return -EUCLEAN;
	memcpy(v, val, sizeof(*v));
	if (v->namelen == 0 || v->namelen + sizeof(*v) > len)
		return -EUCLEAN;
	return 0;
}

static int probe_cb(void *arg, uint64_t key, const void *val, size_t len)
{
	struct probe *p = arg;
	struct fs_dirent_val v;

	if (key >= p->h + FS_DIR_HASH_PROBES)
		return 1;
	p->used |= (uint16_t)(1u << (key - p->h));
	if (val_header(val, len, &v) < 0)
		return -EUCLEAN;
	if (v.namelen == p->len &&
	    memcmp((const char *)val + sizeof(v), p->name, p->len) == 0) {
		p->found = 1;
		p->found_key = key;
		p->ino = v.ino;
		p->type = v.type;
		return 1;
	}
	return 0;
}

static int probe_range(struct fs *fs, struct fs_buf *dir, struct probe *p)
{
	struct fs_btree bt;
	int ret;

	fs_dir_tree(fs, dir, &bt);
	ret = fs_btree_iterate(&bt, p->h, probe_cb, p);
	return ret < 0 ? ret : 0;
}

int fs_dir_lookup(struct fs *fs, struct fs_buf *dir, const char *name,
		  size_t len, uint64_t *ino, unsigned *type, uint64_t *key)
{
	struct probe p = { .h = fs_dirkey_hash(name, len), .name = name,
			   .len = len };
	int ret;

	FS_ASSERT_HELD(fs, dir->blkno, FS_IL_SH);
	ret = probe_range(fs, dir, &p);
	if (ret < 0)
		return ret;
	if (!p.found)
		return -ENOENT;
	if (ino != NULL)
		*ino = p.ino;
	if (type != NULL)
		*type = p.type;
	if (key != NULL)
		*key = p.found_key;
	return 0;
}

static size_t fill_val(struct dirent_buf *d, const char *name, size_t len,
		       uint64_t ino, unsigned type)
{
	memset(&d->v, 0, sizeof(d->v));
	d->v.ino = ino;
	d->v.type = (uint8_t)type;
	d->v.namelen = (uint8_t)len;
	memcpy(d->name, name, len);
	return sizeof(d->v) + len;
}

int fs_dir_add(struct fs_tx *tx, struct fs_buf *dir, const char *name,
	       size_t len, uint64_t ino, unsigned type)
{
	struct fs *fs = fs_tx_fs(tx);
	struct probe p = { .h = fs_dirkey_hash(name, len), .name = name,
			   .len = len };
	struct dirent_buf d;
	struct fs_btree bt;
	unsigned i;
	int ret;

	FS_ASSERT_HELD(fs_tx_fs(tx), dir->blkno, FS_IL_EX);
	ret = probe_range(fs, dir, &p);
	if (ret < 0)
		return ret;
	if (p.found)
		return -EEXIST;
	for (i = 0; i < FS_DIR_HASH_PROBES; i++)
		if (!(p.used & (1u << i)))
			break;
	if (i == FS_DIR_HASH_PROBES)
		return -ENOSPC;
	fs_dir_tree(fs, dir, &bt);
	ret = fs_btree_insert(tx, &bt, p.h + i, &d,
			      fill_val(&d, name, len, ino, type));
	if (ret < 0)
		return ret;
	fs_di(dir)->size++;
	return 0;
}

int fs_dir_remove(struct fs_tx *tx, struct fs_buf *dir, uint64_t key)
{
	struct fs_btree bt;
	int ret;

	FS_ASSERT_HELD(fs_tx_fs(tx), dir->blkno, FS_IL_EX);
	fs_dir_tree(fs_tx_fs(tx), dir, &bt);
	ret = fs_btree_delete(tx, &bt, key);
	if (ret == 0 && fs_di(dir)->size > 0)
		fs_di(dir)->size--;
	return ret;
}

int fs_dir_set(struct fs_tx *tx, struct fs_buf *dir, uint64_t key,
	       const char *name, size_t len, uint64_t ino, unsigned type)
{
	struct dirent_buf d;
	struct fs_btree bt;

	FS_ASSERT_HELD(fs_tx_fs(tx), dir->blkno, FS_IL_EX);
	fs_dir_tree(fs_tx_fs(tx), dir, &bt);
	return fs_btree_update(tx, &bt, key, &d,
			       fill_val(&d, name, len, ino, type));
}

struct iter {
	int (*cb)(void *arg, const struct fs_dirent *de);
	void *arg;
};

static int iter_cb(void *arg, uint64_t key, const void *val, size_t len)
{
	struct fs_dirent_val v;
	struct iter *it = arg;
	struct fs_dirent de;

	if (val_header(val, len, &v) < 0)
		return -EUCLEAN;
	de.ino = v.ino;
	de.next = key + 1;
	de.type = v.type;
	de.namelen = v.namelen;
	de.name = (const char *)val + sizeof(v);
	return it->cb(it->arg, &de) ? 1 : 0;
}

int fs_dir_iterate(struct fs *fs, struct fs_buf *dir, uint64_t cookie,
		   int (*cb)(void *arg, const struct fs_dirent *de),
		   void *arg)
{
	struct iter it = { .cb = cb, .arg = arg };
	struct fs_dirent de;
	struct fs_btree bt;
	int ret;

	FS_ASSERT_HELD(fs, dir->blkno, FS_IL_SH);
	if (cookie == 0) {
		de = (struct fs_dirent){ .ino = dir->blkno, .next = 1,
					 .type = DT_DIR, .namelen = 1,
					 .name = "." };
		if (cb(arg, &de))
			return 0;
		cookie = 1;
	}
	if (cookie == 1) {
		uint64_t parent = fs_di(dir)->parent;

		de = (struct fs_dirent){ .ino = parent ? parent : dir->blkno,
					 .next = 2, .type = DT_DIR,
					 .namelen = 2, .name = ".." };
		if (cb(arg, &de))
			return 0;
		cookie = 2;
	}
	fs_dir_tree(fs, dir, &bt);
	ret = fs_btree_iterate(&bt, cookie, iter_cb, &it);
	return ret < 0 ? ret : 0;
}
