/*
 * fs_vfs_names.c — fs.h's operations that change names: mknod, mkdir,
 * create and symlink (a new inode and its entry), readlink, unlink and
 * rmdir (an entry goes; an inode whose last link goes becomes an
 * orphan), link, and rename (within a directory, or between two under
 * the rename lock, with its ancestor check). Locking, checks before the
 * transaction and the ENOSPC retry as fs_vfs.c's head comment says.
 */
#include "fusefs/cluster/fs_cluster.h"
#include "fusefs/cluster/fs_iopen.h"
#include "fusefs/namespace/fs_statahead.h"
#include "fusefs/namespace/fs_vfs.h"
#include "lockmgr/lk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LINK_MAX_COUNT 65000u

static int is_dot(const char *name)
{
	return strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
}

static unsigned dtype_of(mode_t mode)
{
	return IFTODT(mode);
}

/* The sticky bit: only the owner of the entry or of the directory (or
 * root) may remove or rename it. */
static int sticky_ok(const struct fs_cred *cred, struct fs_buf *dir,
		     struct fs_buf *victim)
{
	if (!(fs_di(dir)->mode & S_ISVTX) || cred->uid == 0)
		return 1;
	return cred->uid == fs_di(dir)->uid || cred->uid == fs_di(victim)->uid;
}

/* ---- creating ---- */

struct newnode {
	const char *name;
	mode_t mode;
	uint64_t rdev;
	const char *target;	/* symlink */
};

/* Checks done before any transaction; -EEXIST etc. */
static int create_check(struct fs *fs, struct fs_buf *d, const char *name)
{
	int ret;

	ret = check_name(name);
	if (ret < 0)
		return ret;
	if (is_dot(name))
		return -EEXIST;
	ret = fs_dir_lookup(fs, d, name, strlen(name), NULL, NULL, NULL);
	if (ret == 0)
		return -EEXIST;
	return ret == -ENOENT ? 0 : ret;
}

/* The new inode's buffer in *@out and (dlm) its glock, held EX, in
 * *@gl (fs_ino_alloc; @gl NULL: not locked yet). */
static int create_tx(struct fs *fs, const struct fs_cred *cred,
		     struct fs_buf *d, const struct newnode *nn, gid_t gid,
		     struct fs_buf **out, struct fs_glock **gl)
{
	size_t tlen = nn->target != NULL ? strlen(nn->target) : 0;
	struct fs_tx *tx;
	struct fs_buf *b;
	int ret;

	ret = fs_tx_begin(fs, 2 + fs_dir_credits(fs, d) +
			  fs_ino_alloc_credits(fs), &tx);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, d);
	if (ret < 0)
		goto out_end;
	ret = fs_ino_alloc(tx, d->blkno, nn->mode, cred->uid, gid, nn->rdev, &b,
			   gl);
	if (ret < 0)
		goto out_end;
	ret = fs_dir_add(tx, d, nn->name, strlen(nn->name), b->blkno,
			 dtype_of(nn->mode));
	if (ret < 0) {
		uint64_t ino = b->blkno;

		fs_buf_put(b);
		fs_free_inode(tx, ino);
		goto out_end;
	}
	if (S_ISDIR(nn->mode)) {
		fs_di(d)->nlink++;
		fs_di(b)->parent = d->blkno;
	}
	if (tlen > 0 && tlen <= FS_INODE_INLINE_SIZE) {
		memcpy(fs_di(b)->inline_area, nn->target, tlen);
		fs_di(b)->size = tlen;
	}
	fs_ino_touch(fs_di(d), FS_T_MTIME | FS_T_CTIME);
	*out = b;
out_end:
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	if (ret < 0 && gl != NULL && *gl != NULL) {
		fs_cluster_gunlock(*gl, LK_EX);
		*gl = NULL;
	}
	return ret;
}

/* create_tx failed: a retry is worth it (after waiting, no handle held,
 * for a group with space or a refused inode number's lock) */
static int create_retry(struct fs *fs, int ret)
{
	if (ret == -EAGAIN)
		return fs_ino_alloc_refused(fs);
	return need_nospc_retry(fs, ret);
}

static int create_node(struct fs *fs, const struct fs_cred *cred,
		       uint64_t parent, struct newnode *nn,
		       struct fs_attr *out)
{
	struct fs_acl_inherit *acl;
	struct fs_buf *d, *b = NULL;
	struct fs_glock *gl = NULL;
	struct fs_ilock il;
	uint64_t ino;
	size_t tlen;
	gid_t gid;
	int ret;

	acl = malloc(sizeof(*acl));
	if (acl == NULL)
		return -ENOMEM;
	if (fs_op_begin(&il, fs, LK_EX) < 0) {
		free(acl);
		return -EIO;
	}
	ret = fs_ilock_one(&il, parent, FS_IL_EX);
	if (ret == 0)
		ret = fs_vfs_dir_read(fs, parent, &d);
	if (ret < 0)
		goto out;
	ret = create_check(fs, d, nn->name);
	gid = cred->gid;
	if (fs_di(d)->mode & S_ISGID) {
		gid = fs_di(d)->gid;
		if (S_ISDIR(nn->mode))
			nn->mode |= S_ISGID;
	}
	if (ret == 0)
		ret = fs_xattr_inherit_prepare(fs, d, &nn->mode, cred->umask,
					       acl);
	if (ret == 0) {
		ret = create_tx(fs, cred, d, nn, gid, &b, &gl);
		/* the last retry after refused new-inode locks takes the
		 * lock after the transaction, as before they were tried */
		for (int t = 0; t < NOSPC_TRIES && create_retry(fs, ret); t++)
			ret = create_tx(fs, cred, d, nn, gid, &b,
					ret == -EAGAIN && t == NOSPC_TRIES - 1
					    ? NULL
					    : &gl);
	}
	fs_buf_put(d);
	if (ret < 0)
		goto out;
	/* a child after its parent; new, so nobody waits for it (dlm: its
	 * glock is held EX since before its block joined the transaction,
	 * fs_ino_alloc: this takes it again with no message) */
	ino = b->blkno;
	fs_buf_put(b);
	b = NULL;
	ret = fs_ilock_one(&il, ino, FS_IL_EX);
	if (gl != NULL)
		fs_cluster_gunlock(gl, LK_EX);
	if (ret == 0)
		ret = fs_ino_read(fs, ino, &b);
	if (ret < 0)
		goto out;
	tlen = nn->target != NULL ? strlen(nn->target) : 0;
	if (ret == 0 && tlen > FS_INODE_INLINE_SIZE) {
		ssize_t n = fs_file_write(fs, NULL, b, nn->target, tlen, 0);

		ret = n < 0 ? (int)n : 0;
	}
	if (ret == 0)
		ret = fs_xattr_inherit_apply(fs, b, acl);
	/* the node exists now: a failure above leaves it as it is */
	fs_ino_attr(fs_di(b), out);
	fs_ino_get_made(fs, b->blkno);
	fs_buf_put(b);
out:
	fs_op_end(&il);
	free(acl);
	return ret;
}

int fs_mknod(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	     const char *name, mode_t mode, dev_t rdev, struct fs_attr *out)
{
	struct newnode nn = { .name = name, .mode = mode, .rdev = rdev };

	if ((mode & S_IFMT) == 0)
		nn.mode |= S_IFREG;
	if (!S_ISREG(nn.mode) && !S_ISFIFO(nn.mode) && !S_ISSOCK(nn.mode) &&
	    !S_ISCHR(nn.mode) && !S_ISBLK(nn.mode))
		return -EINVAL;
	if (!S_ISCHR(nn.mode) && !S_ISBLK(nn.mode))
		nn.rdev = 0;
	return create_node(fs, cred, parent, &nn, out);
}

int fs_mkdir(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	     const char *name, mode_t mode, struct fs_attr *out)
{
	struct newnode nn = { .name = name,
			      .mode = S_IFDIR | (mode & 07777) };

	return create_node(fs, cred, parent, &nn, out);
}

int fs_create(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	      const char *name, mode_t mode, int flags, struct fs_attr *out)
{
	struct newnode nn = { .name = name,
			      .mode = S_IFREG | (mode & 07777) };
	int ret;

	(void)flags;
	/* the open reference after the lookup one create_node counted
	 * (fs_ino_get_made): a record that put its iopen PR off keeps it
	 * off, one that could not be made then takes it now */
	ret = create_node(fs, cred, parent, &nn, out);
	if (ret == 0)
		fs_ino_get_open(fs, out->ino);
	return ret;
}

int fs_symlink(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	       const char *name, const char *target, struct fs_attr *out)
{
	struct newnode nn = { .name = name, .mode = S_IFLNK | 0777,
			      .target = target };
	size_t tlen = strlen(target);

	if (tlen == 0)
		return -ENOENT;
	if (tlen >= FS_PATH_MAX)
		return -ENAMETOOLONG;
	return create_node(fs, cred, parent, &nn, out);
}

ssize_t fs_readlink(struct fs *fs, uint64_t ino, char *buf, size_t size)
{
	struct fs_ilock il;
	struct fs_buf *b;
	ssize_t n;

	OP_BEGIN(&il, fs, LK_PR);
	n = fs_vfs_lock_read(&il, fs, ino, FS_IL_SH, &b);
	if (n == 0) {
		if (!S_ISLNK(fs_di(b)->mode))
			n = -EINVAL;
		else
			n = fs_file_read(fs, NULL, b, buf, size, 0);
		fs_buf_put(b);
	}
	fs_op_end(&il);
	return n;
}

/* ---- removing ---- */

/* Drop one link of @b (the entry @key in @d is removed) in one
 * transaction; orphan it at nlink 0. */
static int unlink_tx(struct fs *fs, struct fs_buf *d, uint64_t key,
		     struct fs_buf *b)
{
	struct fs_dinode *di = fs_di(b);
	struct fs_tx *tx;
	int ret;

	ret = fs_tx_begin(fs, 3 + fs_dir_credits(fs, d) +
			  fs_ino_orphan_credits(), &tx);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, d);
	if (ret == 0)
		ret = fs_tx_write(tx, b);
	if (ret == 0)
		ret = fs_dir_remove(tx, d, key);
	if (ret < 0)
		goto out;
	if (S_ISDIR(di->mode)) {
		di->nlink = 0;
		fs_di(d)->nlink--;
	} else {
		di->nlink--;
	}
	fs_ino_touch(di, FS_T_CTIME);
	fs_ino_touch(fs_di(d), FS_T_MTIME | FS_T_CTIME);
	if (di->nlink == 0)
		ret = fs_ino_orphan_add(tx, b);
out:
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	return ret;
}

static int remove_entry(struct fs *fs, const struct fs_cred *cred,
			uint64_t parent, const char *name, int dir)
{
	struct fs_ilock il;
	struct fs_buf *d, *b;
	uint64_t ino, key;
	int ret;

	ret = check_name(name);
	if (ret < 0)
		return ret;
	if (is_dot(name))
		return strcmp(name, ".") == 0 ? -EINVAL : -ENOTEMPTY;
	OP_BEGIN(&il, fs, LK_EX);
	ret = fs_ilock_one(&il, parent, FS_IL_EX);
	if (ret == 0)
		ret = fs_vfs_dir_read(fs, parent, &d);
	if (ret < 0)
		goto out;
	ret = fs_dir_lookup(fs, d, name, strlen(name), &ino, NULL, &key);
	if (ret == 0)
		ret = fs_vfs_lock_read(&il, fs, ino, FS_IL_EX, &b);
	if (ret < 0)
		goto out_dir;
	if (dir && !S_ISDIR(fs_di(b)->mode))
		ret = -ENOTDIR;
	else if (!dir && S_ISDIR(fs_di(b)->mode))
		ret = -EISDIR;
	else if (dir && fs_di(b)->size != 0)
		ret = -ENOTEMPTY;
	else if (!sticky_ok(cred, d, b))
		ret = -EPERM;
	if (ret == 0)
		ret = unlink_tx(fs, d, key, b);
	fs_buf_put(b);
out_dir:
	fs_buf_put(d);
out:
	/* an unreferenced orphan now is destroyed as its lock goes */
	fs_op_end(&il);
	return ret;
}

int fs_unlink(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	      const char *name)
{
	return remove_entry(fs, cred, parent, name, 0);
}

int fs_rmdir(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	     const char *name)
{
	return remove_entry(fs, cred, parent, name, 1);
}

/* ---- link ---- */

static int link_not_dir(struct fs_ilock *il, uint64_t ino)
{
	struct fs_buf *b;
	int ret;

	ret = fs_ilock_one(il, ino, FS_IL_SH);
	if (ret == 0)
		ret = fs_ino_read(il->fs, ino, &b);
	if (ret == 0) {
		if (S_ISDIR(fs_di(b)->mode))
			ret = -EPERM;
		fs_buf_put(b);
	}
	fs_iunlock_one(il, ino);
	return ret;
}

int fs_link(struct fs *fs, const struct fs_cred *cred, uint64_t ino,
	    uint64_t newparent, const char *newname, struct fs_attr *out)
{
	struct fs_ilock il;
	struct fs_buf *d, *b;
	struct fs_tx *tx;
	int ret;

	(void)cred;
	OP_BEGIN(&il, fs, LK_EX);
	/* a directory is refused before its lock could follow a
	 * descendant's (newparent); others are leaves */
	ret = link_not_dir(&il, ino);
	if (ret == 0)
		ret = fs_ilock_pair(&il, newparent, FS_IL_EX, ino, FS_IL_EX);
	if (ret == 0)
		ret = fs_ino_read(fs, ino, &b);
	if (ret < 0)
		goto out;
	if (S_ISDIR(fs_di(b)->mode))
		ret = -EPERM;
	else if (fs_di(b)->nlink == 0)
		ret = -ENOENT;
	else if (fs_di(b)->nlink >= LINK_MAX_COUNT)
		ret = -EMLINK;
	if (ret < 0)
		goto out_b;
	ret = fs_vfs_dir_read(fs, newparent, &d);
	if (ret < 0)
		goto out_b;
	ret = create_check(fs, d, newname);
	if (ret < 0)
		goto out_d;
	ret = fs_tx_begin(fs, 3 + fs_dir_credits(fs, d), &tx);
	if (ret < 0)
		goto out_d;
	ret = fs_tx_write(tx, d);
	if (ret == 0)
		ret = fs_tx_write(tx, b);
	if (ret == 0)
		ret = fs_dir_add(tx, d, newname, strlen(newname), ino,
				 dtype_of(fs_di(b)->mode));
	if (ret == 0) {
		fs_di(b)->nlink++;
		fs_ino_touch(fs_di(b), FS_T_CTIME);
		fs_ino_touch(fs_di(d), FS_T_MTIME | FS_T_CTIME);
	}
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	if (ret == 0) {
		fs_ino_attr(fs_di(b), out);
		fs_ino_get_lookup(fs, ino);
	}
out_d:
	fs_buf_put(d);
out_b:
	fs_buf_put(b);
out:
	fs_op_end(&il);
	return ret;
}

/* ---- rename ---- */

struct rn {
	struct fs_buf *sd, *dd;		/* source and target directories */
	struct fs_buf *s, *t;		/* source and target (t may be NULL) */
	uint64_t skey, tkey;
	const char *name, *newname;
	unsigned flags;
};

/* Is directory @anc an ancestor of (or equal to) directory @ino? Reads
 * directories' parent fields without their inode locks: those change
 * only under ns->rename_mu (a rename between directories), which the
 * caller holds. */
/* Is directory @anc an ancestor of @ino (or @ino itself)? With @peek,
 * each directory is read under its glock (fs_ipeek_begin: the rename
 * walk, nothing else held); else from the cache, as that walk left it
 * (the rename locks keep every directory's parent from changing). */
static int ancestor_walk(struct fs *fs, uint64_t anc, uint64_t ino, int peek)
{
	uint64_t root = fs->ns->root;
	struct fs_glock *gl = NULL;
	struct fs_buf *b;
	unsigned depth = 0;

	while (depth++ < 4096) {
		uint64_t parent = 0;
		int ret;

		if (ino == anc)
			return 1;
		if (ino == root)
			return 0;
		ret = peek ? fs_ipeek_begin(fs, ino, &gl) : 0;
		if (ret == 0)
			ret = fs_ino_read(fs, ino, &b);
		if (ret == 0) {
			parent = fs_di(b)->parent;
			fs_buf_put(b);
		}
		fs_ipeek_end(gl);
		gl = NULL;
		if (ret < 0)
			return 1; /* unsure: refuse */
		if (parent == 0 || parent == ino)
			return 0;
		ino = parent;
	}
	return 1;
}

static int is_ancestor(struct fs *fs, uint64_t anc, uint64_t ino)
{
	return ancestor_walk(fs, anc, ino, 0);
}

static int is_ancestor_peek(struct fs *fs, uint64_t anc, uint64_t ino)
{
	return ancestor_walk(fs, anc, ino, 1);
}

static int rename_check(struct fs *fs, const struct fs_cred *cred,
			struct rn *r)
{
	int sdir = S_ISDIR(fs_di(r->s)->mode);

	if (!sticky_ok(cred, r->sd, r->s))
		return -EPERM;
	if (r->t == NULL)
		return (r->flags & FS_RENAME_EXCHANGE) ? -ENOENT : 0;
	if (r->flags & FS_RENAME_NOREPLACE)
		return -EEXIST;
	if (!sticky_ok(cred, r->dd, r->t))
		return -EPERM;
	if (r->flags & FS_RENAME_EXCHANGE) {
		if (S_ISDIR(fs_di(r->t)->mode) &&
		    r->sd->blkno != r->dd->blkno &&
		    is_ancestor(fs, r->t->blkno, r->sd->blkno))
			return -EINVAL;
		return 0;
	}
	if (sdir && !S_ISDIR(fs_di(r->t)->mode))
		return -ENOTDIR;
	if (!sdir && S_ISDIR(fs_di(r->t)->mode))
		return -EISDIR;
	if (sdir && fs_di(r->t)->size != 0)
		return -ENOTEMPTY;
	return 0;
}

/* Move directory @b from parent @from to parent @to (link counts). */
static void move_dir(struct fs_buf *b, struct fs_buf *from,
		     struct fs_buf *to)
{
	if (!S_ISDIR(fs_di(b)->mode) || from->blkno == to->blkno)
		return;
	fs_di(from)->nlink--;
	fs_di(to)->nlink++;
	fs_di(b)->parent = to->blkno;
}

static int rename_apply(struct fs_tx *tx, struct rn *r)
{
	struct fs_dinode *s = fs_di(r->s);
	size_t nl = strlen(r->newname);
	int ret;

	if (r->flags & FS_RENAME_EXCHANGE) {
		struct fs_dinode *t = fs_di(r->t);

		ret = fs_dir_set(tx, r->sd, r->skey, r->name, strlen(r->name),
				 r->t->blkno, IFTODT(t->mode));
		if (ret == 0)
			ret = fs_dir_set(tx, r->dd, r->tkey, r->newname, nl,
					 r->s->blkno, IFTODT(s->mode));
		if (ret == 0) {
			move_dir(r->s, r->sd, r->dd);
			move_dir(r->t, r->dd, r->sd);
			fs_ino_touch(t, FS_T_CTIME);
		}
		return ret;
	}
	if (r->t != NULL) {
		struct fs_dinode *t = fs_di(r->t);

		ret = fs_dir_set(tx, r->dd, r->tkey, r->newname, nl,
				 r->s->blkno, IFTODT(s->mode));
		if (ret < 0)
			return ret;
		if (S_ISDIR(t->mode)) {
			t->nlink = 0;
			fs_di(r->dd)->nlink--;
		} else {
			t->nlink--;
		}
		fs_ino_touch(t, FS_T_CTIME);
		if (t->nlink == 0 && (ret = fs_ino_orphan_add(tx, r->t)) < 0)
			return ret;
	} else {
		ret = fs_dir_add(tx, r->dd, r->newname, nl, r->s->blkno,
				 IFTODT(s->mode));
		if (ret < 0)
			return ret;
	}
	ret = fs_dir_remove(tx, r->sd, r->skey);
	if (ret == 0)
		move_dir(r->s, r->sd, r->dd);
	return ret;
}

static int rename_tx(struct fs *fs, struct rn *r)
{
	struct fs_tx *tx;
	int ret;

	ret = fs_tx_begin(fs, 6 + fs_dir_credits(fs, r->sd) +
			  fs_dir_credits(fs, r->dd) + fs_ino_orphan_credits(),
			  &tx);
	if (ret < 0)
		return ret;
	ret = fs_tx_write(tx, r->sd);
	if (ret == 0)
		ret = fs_tx_write(tx, r->dd);
	if (ret == 0)
		ret = fs_tx_write(tx, r->s);
	if (ret == 0 && r->t != NULL)
		ret = fs_tx_write(tx, r->t);
	if (ret == 0)
		ret = rename_apply(tx, r);
	if (ret == 0) {
		fs_ino_touch(fs_di(r->s), FS_T_CTIME);
		fs_ino_touch(fs_di(r->sd), FS_T_MTIME | FS_T_CTIME);
		fs_ino_touch(fs_di(r->dd), FS_T_MTIME | FS_T_CTIME);
	}
	if (fs_tx_end(tx) < 0 && ret == 0)
		ret = -EIO;
	return ret;
}

/*
 * Look up source and target in the locked directories, refuse the traps
 * (a directory moved under itself, a target directory containing the
 * source's: the walk under the rename mutex, before their locks, as
 * Linux's lock_rename does), then lock and load both inodes.
 */
static int rename_load(struct fs_ilock *il, uint64_t parent, uint64_t newparent,
		       struct rn *r)
{
	struct fs *fs = il->fs;
	uint64_t sino, tino = 0;
	unsigned stype, ttype = 0;
	int ret;

	ret = fs_vfs_dir_read(fs, parent, &r->sd);
	if (ret == 0)
		ret = fs_vfs_dir_read(fs, newparent, &r->dd);
	if (ret == 0)
		ret = fs_dir_lookup(fs, r->sd, r->name, strlen(r->name), &sino,
				    &stype, &r->skey);
	if (ret < 0)
		return ret;
	ret = fs_dir_lookup(fs, r->dd, r->newname, strlen(r->newname), &tino,
			    &ttype, &r->tkey);
	if (ret == -ENOENT)
		tino = 0;
	else if (ret < 0)
		return ret;
	if (parent != newparent && stype == DT_DIR &&
	    is_ancestor(fs, sino, newparent))
		return -EINVAL;
	if (parent != newparent && tino != 0 && ttype == DT_DIR &&
	    is_ancestor(fs, tino, parent))
		return (r->flags & FS_RENAME_EXCHANGE) ? -EINVAL : -ENOTEMPTY;
	ret = fs_ilock_peers(il, sino, tino, FS_IL_EX);
	if (ret == 0)
		ret = fs_ino_read(fs, sino, &r->s);
	if (ret == 0 && tino != 0)
		ret = fs_ino_read(fs, tino, &r->t);
	return ret;
}

int fs_rename(struct fs *fs, const struct fs_cred *cred, uint64_t parent,
	      const char *name, uint64_t newparent, const char *newname,
	      unsigned flags)
{
	struct rn r = { .name = name, .newname = newname, .flags = flags };
	struct fs_ilock il;
	int ret;

	if ((flags & ~(unsigned)(FS_RENAME_NOREPLACE | FS_RENAME_EXCHANGE)) ||
	    flags == (FS_RENAME_NOREPLACE | FS_RENAME_EXCHANGE))
		return -EINVAL;
	ret = check_name(name);
	if (ret == 0)
		ret = check_name(newname);
	if (ret < 0)
		return ret;
	if (is_dot(name) || is_dot(newname))
		return -EINVAL;
	OP_BEGIN(&il, fs, LK_EX);
	ret = fs_ilock_rename(&il, parent, newparent, is_ancestor_peek);
	if (ret == 0)
		ret = rename_load(&il, parent, newparent, &r);
	if (ret < 0)
		goto out;
	if (r.t != NULL && r.t->blkno == r.s->blkno)
		goto out;	/* same inode: nothing to do */
	if (S_ISDIR(fs_di(r.s)->mode) && parent != newparent &&
	    is_ancestor(fs, r.s->blkno, newparent)) {
		ret = -EINVAL;
		goto out;
	}
	ret = rename_check(fs, cred, &r);
	if (ret == 0)
		ret = rename_tx(fs, &r);
out:
	fs_buf_put(r.t);
	fs_buf_put(r.s);
	fs_buf_put(r.dd);
	fs_buf_put(r.sd);
	/* a replaced target now unreferenced goes as its lock does */
	fs_op_end(&il);
	return ret;
}
