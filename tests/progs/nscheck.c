/*
 * nscheck — a seeded random namespace checker.
 *
 * Usage: nscheck [--seed N] [--ops N] [--verify-every N] [--names N]
 *                [--no-exchange] [--no-noreplace] [--quiet]
 *                [--view DIR2]... [--chaos] DIR
 *
 * Under DIR (which must exist; nscheck works in DIR/nscheck.root, created
 * fresh) it performs random create, mkdir, unlink, rmdir, link, symlink,
 * rename (plain, over an existing entry, RENAME_NOREPLACE,
 * RENAME_EXCHANGE), append and stat/read operations on paths drawn from a
 * small pool of names, so that most operations collide with something.
 * An in-memory model predicts each result, errno included, following the
 * Linux VFS order of checks (parent walk, existence, type, the rename
 * "trap" of an ancestor, then the filesystem's own ENOTEMPTY). Every
 * --verify-every operations and at the end it walks the whole model and
 * compares readdir (names and d_type), lstat (type, nlink, and inode
 * identity: hard links share st_ino, distinct live objects never do), file
 * contents and symlink targets. On the first difference it prints it and
 * the last operations and exits 1.
 *
 * --view DIR2 (up to 3 times): DIR2 shows the same directory through
 * another mount (another node of a cluster): each operation runs through
 * one of the views, drawn at random, and every check walks each view, so
 * a change made through one must be seen at once through the others (no
 * stale name, attribute or content; the same st_ino everywhere).
 *
 * --chaos: for several writers at once on one tree (another nscheck
 * --chaos in the same DIR, on another node): the operations are drawn
 * the same way, but their results are not checked (the model does not
 * know the other writer's changes; only EIO and EUCLEAN fail it) and
 * DIR/nscheck.root is kept if it exists. Compare the views afterwards
 * (tests/integration/clu_random.sh).
 *
 * Symlink targets are absolute paths under a directory that does not
 * exist, so a symlink met in the middle of a path always resolves to
 * ENOENT and the model never has to follow one.
 *
 * Exit: 0 everything matched, 1 mismatch, 2 usage or setup error.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAXNODES 4096
#define MAXDEPTH 4
#define CONTENT_MAX 2048
#define NAMEPOOL_MAX 12
#define LOGKEEP 80
#define MAXVIEWS 4

enum ntype { N_FREE, N_FILE, N_DIR, N_LINK };

struct dent {
	char *name;
	int ino;
};

struct node {
	enum ntype type;
	int nlink;
	int parent;	   /* dirs: model ino of the parent */
	struct dent *ents; /* dirs */
	int nent, cap;
	char *content;	   /* files */
	size_t clen;
	char target[128];   /* symlinks */
	ino_t st_ino;	   /* observed inode number, if have_ino */
	int have_ino;
};

enum op_kind {
	K_CREATE, K_MKDIR, K_UNLINK, K_RMDIR, K_LINK, K_SYMLINK,
	K_RENAME, K_RENAME_NOREPLACE, K_RENAME_EXCHANGE, K_APPEND, K_STAT,
	K_NKINDS
};

static const char *const op_names[K_NKINDS] = {
	"create", "mkdir", "unlink", "rmdir", "link", "symlink",
	"rename", "rename_noreplace", "rename_exchange", "append", "stat",
};

struct ns {
	char root[MAXVIEWS][4096]; /* the tree, through each view */
	int nviews;
	int view;  /* the view of the operation or check running */
	int chaos; /* results not checked (--chaos) */
	struct node nodes[MAXNODES];
	uint64_t rng;
	uint64_t opno, nops;
	int verify_every;
	int npool;
	int disabled[K_NKINDS];
	int quiet;
	char log[LOGKEEP][512];
	uint64_t counts[K_NKINDS];
	uint64_t errs[K_NKINDS];
};

static const char *const pool[NAMEPOOL_MAX] = {
	"a", "b", "c", "d", "e", "f", "with space", "dot.ext", "UPPER",
	"\xc3\xa9t\xc3\xa9", "-dash", NULL /* the 255-byte name */
};
static char longname[256];

static uint64_t rnd(struct ns *s)
{
	uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static unsigned rnd_below(struct ns *s, unsigned n)
{
	return n == 0 ? 0 : (unsigned)(rnd(s) % n);
}

static const char *pool_name(int i)
{
	return pool[i] != NULL ? pool[i] : longname;
}

static void logf_op(struct ns *s, const char *line)
{
	if (snprintf(s->log[s->opno % LOGKEEP], sizeof(s->log[0]),
		     "%6" PRIu64 " %s", s->opno, line) < 0)
		s->log[s->opno % LOGKEEP][0] = '\0';
}

static void dump_log(struct ns *s)
{
	uint64_t first = s->opno >= LOGKEEP ? s->opno - LOGKEEP + 1 : 0;

	fprintf(stderr, "op log (last ops):\n");
	for (uint64_t i = first; i <= s->opno; i++)
		fprintf(stderr, "  %s\n", s->log[i % LOGKEEP]);
}

static void mismatch(struct ns *s, const char *what)
{
	fprintf(stderr, "nscheck: MISMATCH at op %" PRIu64 ": %s\n", s->opno,
		what);
	dump_log(s);
	exit(1);
}

/* ---- model ---- */

static int node_alloc(struct ns *s, enum ntype t)
{
	for (int i = 1; i < MAXNODES; i++) {
		struct node *n = &s->nodes[i];

		if (n->type != N_FREE)
			continue;
		memset(n, 0, sizeof(*n));
		n->type = t;
		return i;
	}
	return -1;
}

static void node_free(struct ns *s, int ino)
{
	struct node *n = &s->nodes[ino];

	free(n->ents);
	free(n->content);
	memset(n, 0, sizeof(*n));
}

static int dir_find(struct ns *s, int dir, const char *name)
{
	struct node *d = &s->nodes[dir];

	for (int i = 0; i < d->nent; i++)
		if (strcmp(d->ents[i].name, name) == 0)
			return i;
	return -1;
}

static int dir_lookup(struct ns *s, int dir, const char *name)
{
	int i = dir_find(s, dir, name);

	return i < 0 ? -1 : s->nodes[dir].ents[i].ino;
}

static void dir_add(struct ns *s, int dir, const char *name, int ino)
{
	struct node *d = &s->nodes[dir];

	if (d->nent == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 8;
		d->ents = realloc(d->ents, d->cap * sizeof(*d->ents));
		if (d->ents == NULL)
			abort();
	}
	d->ents[d->nent].name = strdup(name);
	d->ents[d->nent].ino = ino;
	d->nent++;
}

static void dir_del(struct ns *s, int dir, const char *name)
{
	struct node *d = &s->nodes[dir];
	int i = dir_find(s, dir, name);

	free(d->ents[i].name);
	d->ents[i] = d->ents[--d->nent];
}

/* Drop one name of @ino (already removed from its directory). */
static void node_unref(struct ns *s, int ino)
{
	struct node *n = &s->nodes[ino];

	if (n->type == N_DIR) {
		s->nodes[n->parent].nlink--;
		node_free(s, ino);
		return;
	}
	if (--n->nlink == 0)
		node_free(s, ino);
}

/* 1 if dir @a is @b or an ancestor of @b. */
static int is_ancestor(struct ns *s, int a, int b)
{
	for (;;) {
		if (a == b)
			return 1;
		if (b == 0)
			return 0;
		b = s->nodes[b].parent;
	}
}

/* The child of @anc on the way down to @d (anc a proper ancestor). */
static int child_toward(struct ns *s, int anc, int d)
{
	while (s->nodes[d].parent != anc)
		d = s->nodes[d].parent;
	return d;
}

/* lock_rename()'s trap: -1 if none. */
static int rename_trap(struct ns *s, int p1, int p2)
{
	if (p1 == p2)
		return -1;
	if (is_ancestor(s, p2, p1))
		return child_toward(s, p2, p1);
	if (is_ancestor(s, p1, p2))
		return child_toward(s, p1, p2);
	return -1;
}

/* ---- paths ---- */

struct path {
	int n;
	const char *comp[MAXDEPTH]; /* point into names[] */
	char names[MAXDEPTH][256];  /* copies: model entries may be freed */
	char str[4096]; /* relative to root */
};

/* Random path, mostly along existing entries. */
static void gen_path(struct ns *s, struct path *p)
{
	int dir = 0, depth = 1 + rnd_below(s, MAXDEPTH);

	p->n = 0;
	p->str[0] = '\0';
	for (int i = 0; i < depth; i++) {
		struct node *d = dir >= 0 ? &s->nodes[dir] : NULL;
		const char *name;
		int ino;

		if (d != NULL && d->nent > 0 && rnd_below(s, 10) < 7)
			name = d->ents[rnd_below(s, d->nent)].name;
		else
			name = pool_name(rnd_below(s, s->npool));
		snprintf(p->names[p->n], sizeof(p->names[0]), "%s", name);
		p->comp[p->n] = p->names[p->n];
		p->n++;
		ino = dir >= 0 ? dir_lookup(s, dir, name) : -1;
		dir = ino >= 0 && s->nodes[ino].type == N_DIR ? ino : -1;
		/* stop early at a non-directory most of the time */
		if (dir < 0 && rnd_below(s, 4) != 0)
			break;
	}
	for (int i = 0; i < p->n; i++) {
		strcat(p->str, i ? "/" : "");
		strcat(p->str, p->comp[i]);
	}
}

/* Walk all but the last component: 0 and *parent, or -errno. */
static int walk_parent(struct ns *s, const struct path *p, int *parent)
{
	int dir = 0;

	for (int i = 0; i + 1 < p->n; i++) {
		int ino = dir_lookup(s, dir, p->comp[i]);

		if (ino < 0)
			return -ENOENT;
		if (s->nodes[ino].type == N_LINK)
			return -ENOENT; /* dangling target */
		if (s->nodes[ino].type != N_DIR)
			return -ENOTDIR;
		dir = ino;
	}
	*parent = dir;
	return 0;
}

static const char *last(const struct path *p)
{
	return p->comp[p->n - 1];
}

static void abspath(struct ns *s, const char *rel, char *out, size_t sz)
{
	if (snprintf(out, sz, "%s/%s", s->root[s->view], rel) >= (int)sz)
		out[0] = '\0'; /* too long: the op fails with ENOENT */
}

/* ---- model predictions + effects; each returns the expected result ---- */

static int m_create(struct ns *s, const struct path *p, enum ntype t,
		    int *newino)
{
	int dir, err = walk_parent(s, p, &dir), ino;

	if (err)
		return err;
	if (dir_lookup(s, dir, last(p)) >= 0)
		return -EEXIST;
	ino = node_alloc(s, t);
	if (ino < 0)
		return -ENOSPC; /* model full: caller avoids this */
	s->nodes[ino].nlink = t == N_DIR ? 2 : 1;
	s->nodes[ino].parent = dir;
	if (t == N_DIR)
		s->nodes[dir].nlink++;
	dir_add(s, dir, last(p), ino);
	*newino = ino;
	return 0;
}

static int m_unlink(struct ns *s, const struct path *p, int rmdir)
{
	int dir, err = walk_parent(s, p, &dir), ino;

	if (err)
		return err;
	ino = dir_lookup(s, dir, last(p));
	if (ino < 0)
		return -ENOENT;
	if (!rmdir && s->nodes[ino].type == N_DIR)
		return -EISDIR;
	if (rmdir && s->nodes[ino].type != N_DIR)
		return -ENOTDIR;
	if (rmdir && s->nodes[ino].nent > 0)
		return -ENOTEMPTY;
	dir_del(s, dir, last(p));
	node_unref(s, ino);
	return 0;
}

static int m_link(struct ns *s, const struct path *o, const struct path *n)
{
	int odir, ndir, err, ino;

	err = walk_parent(s, o, &odir);
	if (err)
		return err;
	ino = dir_lookup(s, odir, last(o));
	if (ino < 0)
		return -ENOENT;
	err = walk_parent(s, n, &ndir);
	if (err)
		return err;
	if (dir_lookup(s, ndir, last(n)) >= 0)
		return -EEXIST;
	if (s->nodes[ino].type == N_DIR)
		return -EPERM;
	s->nodes[ino].nlink++;
	dir_add(s, ndir, last(n), ino);
	return 0;
}

static void m_move_dir(struct ns *s, int ino, int from, int to)
{
	if (s->nodes[ino].type != N_DIR)
		return;
	s->nodes[from].nlink--;
	s->nodes[to].nlink++;
	s->nodes[ino].parent = to;
}

static int m_rename(struct ns *s, const struct path *o, const struct path *n,
		    unsigned flags)
{
	int odir, ndir, err, oino, nino, trap, odir_t, ndir_t;

	err = walk_parent(s, o, &odir);
	if (err)
		return err;
	err = walk_parent(s, n, &ndir);
	if (err)
		return err;
	oino = dir_lookup(s, odir, last(o));
	if (oino < 0)
		return -ENOENT;
	nino = dir_lookup(s, ndir, last(n));
	if ((flags & RENAME_NOREPLACE) && nino >= 0)
		return -EEXIST;
	if ((flags & RENAME_EXCHANGE) && nino < 0)
		return -ENOENT;
	trap = rename_trap(s, odir, ndir);
	if (trap >= 0 && oino == trap)
		return -EINVAL;
	if (trap >= 0 && nino == trap)
		return (flags & RENAME_EXCHANGE) ? -EINVAL : -ENOTEMPTY;
	if (oino == nino)
		return 0;
	odir_t = s->nodes[oino].type == N_DIR;
	ndir_t = nino >= 0 && s->nodes[nino].type == N_DIR;
	if (flags & RENAME_EXCHANGE) {
		dir_del(s, odir, last(o));
		dir_del(s, ndir, last(n));
		dir_add(s, odir, last(o), nino);
		dir_add(s, ndir, last(n), oino);
		if (odir != ndir) {
			m_move_dir(s, oino, odir, ndir);
			m_move_dir(s, nino, ndir, odir);
		}
		return 0;
	}
	if (nino >= 0) {
		if (odir_t && !ndir_t)
			return -ENOTDIR;
		if (!odir_t && ndir_t)
			return -EISDIR;
		if (ndir_t && s->nodes[nino].nent > 0)
			return -ENOTEMPTY;
		dir_del(s, ndir, last(n));
		node_unref(s, nino);
	}
	dir_del(s, odir, last(o));
	dir_add(s, ndir, last(n), oino);
	m_move_dir(s, oino, odir, ndir);
	return 0;
}

/* ---- real operations: 0 or -errno ---- */

static int r_create(struct ns *s, const struct path *p, const char *text)
{
	char ap[4200];
	int fd, ret = 0;

	abspath(s, p->str, ap, sizeof(ap));
	fd = open(ap, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		ret = -EIO;
	if (close(fd) != 0)
		ret = -errno;
	return ret;
}

static int r_sys(int rc)
{
	return rc == 0 ? 0 : -errno;
}

static const char *errname(int e)
{
	static char buf[32];

	switch (-e) {
	case 0: return "OK";
	case ENOENT: return "ENOENT";
	case ENOTDIR: return "ENOTDIR";
	case EISDIR: return "EISDIR";
	case EEXIST: return "EEXIST";
	case ENOTEMPTY: return "ENOTEMPTY";
	case EINVAL: return "EINVAL";
	case EPERM: return "EPERM";
	case EXDEV: return "EXDEV";
	case ENOSPC: return "ENOSPC";
	case EIO: return "EIO";
	default:
		snprintf(buf, sizeof(buf), "errno %d", -e);
		return buf;
	}
}

/* ---- verification ---- */

static void check_ino(struct ns *s, int ino, ino_t st_ino, const char *path)
{
	struct node *n = &s->nodes[ino];
	char msg[4400];

	if (n->have_ino && n->st_ino != st_ino) {
		snprintf(msg, sizeof(msg),
			 "%s: st_ino %ju, but this object had st_ino %ju",
			 path, (uintmax_t)st_ino, (uintmax_t)n->st_ino);
		mismatch(s, msg);
	}
	for (int i = 0; i < MAXNODES && !n->have_ino; i++) {
		if (i == ino || s->nodes[i].type == N_FREE ||
		    !s->nodes[i].have_ino || s->nodes[i].st_ino != st_ino)
			continue;
		snprintf(msg, sizeof(msg),
			 "%s: st_ino %ju is also that of another live object",
			 path, (uintmax_t)st_ino);
		mismatch(s, msg);
	}
	n->st_ino = st_ino;
	n->have_ino = 1;
}

static void verify_node(struct ns *s, int ino, const char *path);

static unsigned char dtype_of(enum ntype t)
{
	return t == N_DIR ? DT_DIR : t == N_FILE ? DT_REG : DT_LNK;
}

static void verify_dir(struct ns *s, int dir, const char *path)
{
	struct node *d = &s->nodes[dir];
	char msg[4400], child[4400];
	int seen = 0;
	struct dirent *de;
	DIR *dh = opendir(path);

	if (dh == NULL) {
		snprintf(msg, sizeof(msg), "opendir %s: %s", path,
			 strerror(errno));
		mismatch(s, msg);
	}
	while ((de = readdir(dh)) != NULL) {
		int i;

		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		i = dir_find(s, dir, de->d_name);
		if (i < 0) {
			snprintf(msg, sizeof(msg), "readdir %s: unexpected "
				 "entry '%s'", path, de->d_name);
			mismatch(s, msg);
		}
		if (de->d_type != DT_UNKNOWN &&
		    de->d_type != dtype_of(s->nodes[d->ents[i].ino].type)) {
			snprintf(msg, sizeof(msg), "readdir %s: '%s' d_type "
				 "%d", path, de->d_name, de->d_type);
			mismatch(s, msg);
		}
		seen++;
	}
	closedir(dh);
	if (seen != d->nent) {
		snprintf(msg, sizeof(msg), "readdir %s: %d entries, model "
			 "has %d (duplicates or missing names)", path, seen,
			 d->nent);
		mismatch(s, msg);
	}
	for (int i = 0; i < d->nent; i++) {
		snprintf(child, sizeof(child), "%s/%s", path, d->ents[i].name);
		verify_node(s, d->ents[i].ino, child);
	}
}

static void verify_content(struct ns *s, int ino, const char *path)
{
	struct node *n = &s->nodes[ino];
	char buf[CONTENT_MAX + 16], msg[4400];
	ssize_t got;
	int fd = open(path, O_RDONLY);

	if (fd < 0) {
		snprintf(msg, sizeof(msg), "open %s: %s", path,
			 strerror(errno));
		mismatch(s, msg);
	}
	got = read(fd, buf, sizeof(buf));
	close(fd);
	if (got != (ssize_t)n->clen || memcmp(buf, n->content, n->clen)) {
		snprintf(msg, sizeof(msg), "%s: content differs (%zd bytes"
			 " read, %zu expected)", path, got, n->clen);
		mismatch(s, msg);
	}
}

static void verify_node(struct ns *s, int ino, const char *path)
{
	struct node *n = &s->nodes[ino];
	char msg[4400], buf[200];
	struct stat st;
	mode_t want;
	ssize_t len;

	if (lstat(path, &st) != 0) {
		snprintf(msg, sizeof(msg), "lstat %s: %s", path,
			 strerror(errno));
		mismatch(s, msg);
	}
	want = n->type == N_DIR ? S_IFDIR : n->type == N_FILE ? S_IFREG
							      : S_IFLNK;
	if ((st.st_mode & S_IFMT) != want) {
		snprintf(msg, sizeof(msg), "%s: mode %o", path, st.st_mode);
		mismatch(s, msg);
	}
	if (st.st_nlink != (nlink_t)n->nlink) {
		snprintf(msg, sizeof(msg), "%s: nlink %ju, expected %d", path,
			 (uintmax_t)st.st_nlink, n->nlink);
		mismatch(s, msg);
	}
	check_ino(s, ino, st.st_ino, path);
	if (n->type == N_DIR) {
		verify_dir(s, ino, path);
	} else if (n->type == N_FILE) {
		verify_content(s, ino, path);
	} else {
		len = readlink(path, buf, sizeof(buf) - 1);
		if (len < 0 || (size_t)len != strlen(n->target) ||
		    memcmp(buf, n->target, len) != 0) {
			snprintf(msg, sizeof(msg), "readlink %s differs",
				 path);
			mismatch(s, msg);
		}
	}
}

static void verify_all(struct ns *s)
{
	for (s->view = 0; s->view < s->nviews; s->view++)
		verify_node(s, 0, s->root[s->view]);
	s->view = 0;
}

/* ---- one random op ---- */

static void content_set(struct node *n, const char *text)
{
	size_t l = strlen(text);

	if (n->clen + l > CONTENT_MAX)
		return;
	n->content = realloc(n->content, n->clen + l + 1);
	if (n->content == NULL)
		abort();
	memcpy(n->content + n->clen, text, l + 1);
	n->clen += l;
}

static int nodes_in_use(struct ns *s)
{
	int c = 0;

	for (int i = 0; i < MAXNODES; i++)
		c += s->nodes[i].type != N_FREE;
	return c;
}

static enum op_kind pick(struct ns *s)
{
	static const unsigned w[K_NKINDS] = {
		12, 10, 8, 8, 6, 5, 12, 5, 5, 5, 6,
	};
	unsigned total = 0, r;

	for (int k = 0; k < K_NKINDS; k++)
		total += s->disabled[k] ? 0 : w[k];
	r = rnd_below(s, total);
	for (int k = 0; k < K_NKINDS; k++) {
		if (s->disabled[k])
			continue;
		if (r < w[k])
			return (enum op_kind)k;
		r -= w[k];
	}
	return K_STAT;
}

/* Stat and (file) read one path; compare with the model. */
static int op_stat(struct ns *s, const struct path *p, int *want)
{
	char ap[4200];
	struct stat st;
	int dir, ino, got;

	*want = walk_parent(s, p, &dir);
	ino = *want ? -1 : dir_lookup(s, dir, last(p));
	if (*want == 0 && ino < 0)
		*want = -ENOENT;
	abspath(s, p->str, ap, sizeof(ap));
	got = r_sys(lstat(ap, &st));
	if (got == 0 && ino >= 0 && !s->chaos)
		verify_node(s, ino, ap);
	return got;
}

static int op_append(struct ns *s, const struct path *p, int *want)
{
	char ap[4200], text[64];
	int dir, ino, fd, got = 0;

	*want = walk_parent(s, p, &dir);
	ino = *want ? -1 : dir_lookup(s, dir, last(p));
	if (*want == 0 && ino < 0)
		*want = -ENOENT;
	else if (ino >= 0 && s->nodes[ino].type == N_DIR)
		*want = -EISDIR;
	else if (ino >= 0 && s->nodes[ino].type == N_LINK)
		*want = -ENOENT; /* O_WRONLY follows: dangling */
	if (ino >= 0 && *want == 0 &&
	    s->nodes[ino].clen + 32 > CONTENT_MAX)
		return *want = 0; /* full: skip */
	snprintf(text, sizeof(text), "append op %" PRIu64 "\n", s->opno);
	abspath(s, p->str, ap, sizeof(ap));
	fd = open(ap, O_WRONLY | O_APPEND);
	if (fd < 0)
		return -errno;
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		got = -EIO;
	if (close(fd) != 0)
		got = -errno;
	if (*want == 0)
		content_set(&s->nodes[ino], text);
	return got;
}

static void run_op(struct ns *s)
{
	enum op_kind k = pick(s);
	struct path a, b;
	char aa[4200], ab[4200], text[128], line[512];
	int want = 0, got = 0, ino = -1;

	if (s->nviews > 1)
		s->view = (int)rnd_below(s, (unsigned)s->nviews);
	gen_path(s, &a);
	gen_path(s, &b);
	abspath(s, a.str, aa, sizeof(aa));
	abspath(s, b.str, ab, sizeof(ab));
	if (nodes_in_use(s) > MAXNODES - 8 &&
	    (k == K_CREATE || k == K_MKDIR || k == K_SYMLINK))
		k = K_UNLINK;
	snprintf(line, sizeof(line), "v%d %-16s %.180s%s%.180s", s->view,
		 op_names[k], a.str, k == K_LINK || k >= K_RENAME ? " -> " : "",
		 k == K_LINK || (k >= K_RENAME && k <= K_RENAME_EXCHANGE)
		     ? b.str
		     : "");
	logf_op(s, line);
	switch (k) {
	case K_CREATE:
		snprintf(text, sizeof(text), "file created by op %" PRIu64
			 "\n", s->opno);
		want = m_create(s, &a, N_FILE, &ino);
		if (want == 0)
			content_set(&s->nodes[ino], text);
		got = r_create(s, &a, text);
		break;
	case K_MKDIR:
		want = m_create(s, &a, N_DIR, &ino);
		got = r_sys(mkdir(aa, 0755));
		break;
	case K_UNLINK:
		want = m_unlink(s, &a, 0);
		got = r_sys(unlink(aa));
		break;
	case K_RMDIR:
		want = m_unlink(s, &a, 1);
		got = r_sys(rmdir(aa));
		break;
	case K_LINK:
		want = m_link(s, &a, &b);
		got = r_sys(link(aa, ab));
		break;
	case K_SYMLINK:
		snprintf(text, sizeof(text),
			 "/nonexistent-nscheck/target-%" PRIu64, s->opno);
		want = m_create(s, &b, N_LINK, &ino);
		if (want == 0)
			snprintf(s->nodes[ino].target,
				 sizeof(s->nodes[ino].target), "%s", text);
		got = r_sys(symlink(text, ab));
		snprintf(line, sizeof(line), "v%d %-16s %.180s", s->view,
			 op_names[k], b.str);
		logf_op(s, line);
		break;
	case K_RENAME:
		want = m_rename(s, &a, &b, 0);
		got = r_sys(rename(aa, ab));
		break;
	case K_RENAME_NOREPLACE:
		want = m_rename(s, &a, &b, RENAME_NOREPLACE);
		got = r_sys(renameat2(AT_FDCWD, aa, AT_FDCWD, ab,
				      RENAME_NOREPLACE));
		break;
	case K_RENAME_EXCHANGE:
		want = m_rename(s, &a, &b, RENAME_EXCHANGE);
		got = r_sys(renameat2(AT_FDCWD, aa, AT_FDCWD, ab,
				      RENAME_EXCHANGE));
		break;
	case K_APPEND:
		got = op_append(s, &a, &want);
		break;
	case K_STAT:
		got = op_stat(s, &a, &want);
		break;
	case K_NKINDS:
		break;
	}
	s->counts[k]++;
	if (want != 0)
		s->errs[k]++;
	snprintf(line + strlen(line), sizeof(line) - strlen(line),
		 " = %s", errname(got));
	logf_op(s, line);
	if (s->chaos && (got == -EIO || got == -EUCLEAN)) {
		mismatch(s, "an I/O or corruption error with another writer");
	} else if (got != want && !s->chaos) {
		char msg[600];

		snprintf(msg, sizeof(msg), "%s returned %s, model expects %s",
			 op_names[k], errname(got), errname(want));
		mismatch(s, msg);
	}
}

static int setup_root(struct ns *s)
{
	char cmd[4400];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->root[0]);
	if (!s->chaos && access(s->root[0], F_OK) == 0 && system(cmd) != 0)
		return -EIO;
	if (mkdir(s->root[0], 0755) != 0 && !(s->chaos && errno == EEXIST))
		return -errno;
	for (int v = 1; v < s->nviews; v++)
		if (access(s->root[v], F_OK) != 0)
			return -errno; /* the other view does not see it */
	s->nodes[0].type = N_DIR;
	s->nodes[0].nlink = 2;
	s->nodes[0].parent = 0;
	return 0;
}

static int add_view(struct ns *s, const char *dir)
{
	if (s->nviews == MAXVIEWS ||
	    snprintf(s->root[s->nviews], sizeof(s->root[0]), "%s/nscheck.root",
		     dir) >= (int)sizeof(s->root[0]))
		return -EINVAL;
	s->nviews++;
	return 0;
}

static int parse(struct ns *s, int argc, char **argv, uint64_t *seed)
{
	const char *dir = NULL, *views[MAXVIEWS];
	int nv = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int has = i + 1 < argc;

		if (strcmp(a, "--seed") == 0 && has)
			*seed = strtoull(argv[++i], NULL, 0);
		else if (strcmp(a, "--ops") == 0 && has)
			s->nops = strtoull(argv[++i], NULL, 0);
		else if (strcmp(a, "--verify-every") == 0 && has)
			s->verify_every = atoi(argv[++i]);
		else if (strcmp(a, "--names") == 0 && has)
			s->npool = atoi(argv[++i]);
		else if (strcmp(a, "--no-exchange") == 0)
			s->disabled[K_RENAME_EXCHANGE] = 1;
		else if (strcmp(a, "--no-noreplace") == 0)
			s->disabled[K_RENAME_NOREPLACE] = 1;
		else if (strcmp(a, "--quiet") == 0)
			s->quiet = 1;
		else if (strcmp(a, "--chaos") == 0)
			s->chaos = 1;
		else if (strcmp(a, "--view") == 0 && has && nv < MAXVIEWS - 1)
			views[nv++] = argv[++i];
		else if (a[0] != '-' && dir == NULL)
			dir = a;
		else
			return -EINVAL;
	}
	if (dir == NULL || s->npool < 1 || s->npool > NAMEPOOL_MAX ||
	    s->verify_every < 1 || add_view(s, dir) != 0)
		return -EINVAL;
	for (int v = 0; v < nv; v++)
		if (add_view(s, views[v]) != 0)
			return -EINVAL;
	return 0;
}

int main(int argc, char **argv)
{
	static struct ns s = {
		.nops = 5000, .verify_every = 100, .npool = 6,
	};
	const char *env = getenv("UCFS_SEED");
	uint64_t seed = 1;
	int ret;

	memset(longname, 'L', 255);
	if (env != NULL)
		seed = strtoull(env, NULL, 0);
	if (parse(&s, argc, argv, &seed) != 0) {
		fprintf(stderr,
			"usage: nscheck [--seed N] [--ops N] "
			"[--verify-every N] [--names 1-12] [--no-exchange]"
			" [--no-noreplace] [--quiet] [--view DIR2]... "
			"[--chaos] DIR\n");
		return 2;
	}
	s.rng = seed;
	printf("nscheck: seed %" PRIu64 " ops %" PRIu64 " names %d (replay "
	       "with --seed %" PRIu64 ")\n", seed, s.nops, s.npool, seed);
	fflush(stdout);
	ret = setup_root(&s);
	if (ret != 0) {
		fprintf(stderr,
			"nscheck: cannot create %s (or see it through "
			"every view): %s\n",
			s.root[0], strerror(-ret));
		return 2;
	}
	for (s.opno = 0; s.opno < s.nops; s.opno++) {
		run_op(&s);
		if (!s.chaos &&
		    s.opno % s.verify_every == (uint64_t)s.verify_every - 1)
			verify_all(&s);
	}
	s.opno = s.nops - 1;
	if (s.chaos) {
		printf("nscheck: chaos: %" PRIu64 " ops done, unchecked\n",
		       s.nops);
		return 0;
	}
	verify_all(&s);
	printf("nscheck: %" PRIu64 " ops OK, %d objects at the end\n",
	       s.nops, nodes_in_use(&s));
	for (int k = 0; k < K_NKINDS && !s.quiet; k++)
		printf("  %-16s %6" PRIu64 " (%" PRIu64 " expected errors)\n",
		       op_names[k], s.counts[k], s.errs[k]);
	return 0;
}
