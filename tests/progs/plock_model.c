/*
 * plock_model — POSIX record locks of a cluster mount against the kernel
 * of one machine (tests/integration/clu_locks.sh).
 *
 *   plock_model SEED OPS LOCAL_FILE FILE_A [FILE_B]
 *
 * Runs one seeded random sequence of OPS fcntl operations twice: first
 * with every owner (a child process) on LOCAL_FILE (ext4, tmpfs: the
 * kernel's own locks, the model), then with owners 0 and 2 on FILE_A and
 * 1 and 3 on FILE_B (the same file seen from two cluster nodes). The
 * operations are F_SETLK read and write locks and unlocks of random
 * ranges (overlapping, splitting, merging, upgrading and downgrading the
 * owner's own ranges; some to the end of the file), F_GETLK of single
 * bytes, and close-and-reopen (which drops the owner's locks); every 16
 * operations, and at the end, an observer that holds nothing maps every
 * byte with F_GETLK. Each outcome goes to a transcript; the two must be
 * identical. Prints the first difference, or a summary; exits 1 on a
 * difference or if the sequence tested nothing (no refusal or no grant).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define OWNERS 4
#define SPAN 64 /* lock offsets in [0, SPAN) */

enum { OP_SET, OP_GET, OP_CLOSE, OP_QUIT };

struct cmd {
	int op;
	struct flock fl;
};

struct ans {
	int err;
	struct flock fl;
};

struct child {
	pid_t pid;
	int to, from;
};

static void child_loop(const char *path, int in, int out)
{
	int fd = open(path, O_RDWR);
	struct cmd c;
	struct ans a;

	while (read(in, &c, sizeof(c)) == (ssize_t)sizeof(c)) {
		memset(&a, 0, sizeof(a));
		if (c.op == OP_QUIT)
			break;
		if (c.op == OP_CLOSE) {
			close(fd);
			fd = open(path, O_RDWR);
		} else if (fcntl(fd, c.op == OP_GET ? F_GETLK : F_SETLK,
				 &c.fl) != 0) {
			a.err = errno == EACCES ? EAGAIN : errno;
		}
		if (fd < 0)
			a.err = EBADF;
		a.fl = c.fl;
		if (write(out, &a, sizeof(a)) != (ssize_t)sizeof(a))
			break;
	}
	_exit(0);
}

static int spawn(struct child *ch, const char *path)
{
	int p1[2], p2[2];

	if (pipe(p1) != 0 || pipe(p2) != 0)
		return -1;
	ch->pid = fork();
	if (ch->pid < 0)
		return -1;
	if (ch->pid == 0) {
		close(p1[1]);
		close(p2[0]);
		child_loop(path, p1[0], p2[1]);
	}
	close(p1[0]);
	close(p2[1]);
	ch->to = p1[1];
	ch->from = p2[0];
	return 0;
}

static int ask(struct child *ch, struct cmd *c, struct ans *a)
{
	if (write(ch->to, c, sizeof(*c)) != (ssize_t)sizeof(*c) ||
	    read(ch->from, a, sizeof(*a)) != (ssize_t)sizeof(*a))
		return -1;
	return 0;
}

struct run {
	struct child ch[OWNERS + 1]; /* the last one observes */
	char *out;		     /* transcript */
	size_t len, cap;
	unsigned granted, refused, conflicts_seen;
};

static void emit(struct run *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void emit(struct run *r, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (r->cap - r->len < 256) {
		r->cap = r->cap ? r->cap * 2 : 65536;
		r->out = realloc(r->out, r->cap);
		if (r->out == NULL)
			exit(2);
	}
	va_start(ap, fmt);
	n = vsnprintf(r->out + r->len, r->cap - r->len, fmt, ap);
	va_end(ap);
	r->len += (size_t)n;
}

static int owner_of(const struct run *r, pid_t pid)
{
	for (int i = 0; i < OWNERS + 1; i++)
		if (r->ch[i].pid == pid)
			return i;
	return -1;
}

/* F_GETLK of byte @off as @type by child @who; one transcript item. A
 * read lock may have several holders: only its type is compared. */
static void getlk(struct run *r, int who, int off, short type)
{
	struct cmd c = {.op = OP_GET};
	struct ans a;

	c.fl.l_type = type;
	c.fl.l_whence = SEEK_SET;
	c.fl.l_start = off;
	c.fl.l_len = 1;
	if (ask(&r->ch[who], &c, &a) != 0) {
		emit(r, "ipc failed\n");
		return;
	}
	if (a.err != 0)
		emit(r, " err%d", a.err);
	else if (a.fl.l_type == F_UNLCK)
		emit(r, " -");
	else if (a.fl.l_type == F_RDLCK)
		emit(r, " r");
	else {
		emit(r, " w%d:%lld+%lld", owner_of(r, a.fl.l_pid),
		     (long long)a.fl.l_start, (long long)a.fl.l_len);
		r->conflicts_seen++;
	}
}

static void observe(struct run *r)
{
	emit(r, "map");
	for (int off = 0; off < SPAN + 16; off++)
		getlk(r, OWNERS, off, F_WRLCK);
	emit(r, "\n");
}

static void one_op(struct run *r, unsigned *seed)
{
	int who = rand_r(seed) % OWNERS, pick = rand_r(seed) % 100;
	struct cmd c = {.op = OP_SET};
	struct ans a;

	if (pick < 5) {
		c.op = OP_CLOSE;
		emit(r, "%d close", who);
		if (ask(&r->ch[who], &c, &a) != 0 || a.err != 0)
			emit(r, " failed");
		emit(r, "\n");
		return;
	}
	if (pick < 25) {
		emit(r, "%d get", who);
		getlk(r, who, rand_r(seed) % (SPAN + 16),
		      rand_r(seed) % 2 ? F_WRLCK : F_RDLCK);
		emit(r, "\n");
		return;
	}
	c.fl.l_type = pick < 50 ? F_UNLCK : pick < 75 ? F_RDLCK : F_WRLCK;
	c.fl.l_whence = SEEK_SET;
	c.fl.l_start = rand_r(seed) % SPAN;
	c.fl.l_len = rand_r(seed) % 10 == 0 ? 0 : 1 + rand_r(seed) % 16;
	if (ask(&r->ch[who], &c, &a) != 0)
		a.err = -1;
	emit(r, "%d %c %lld+%lld %s\n", who, "rwu"[c.fl.l_type],
	     (long long)c.fl.l_start, (long long)c.fl.l_len,
	     a.err == 0	       ? "ok"
	     : a.err == EAGAIN ? "EAGAIN"
			       : "error");
	if (c.fl.l_type != F_UNLCK && a.err == 0)
		r->granted++;
	else if (a.err == EAGAIN)
		r->refused++;
}

static int run(struct run *r, unsigned seed, int ops, const char *a,
	       const char *b)
{
	struct cmd quit = {.op = OP_QUIT};

	memset(r, 0, sizeof(*r));
	for (int i = 0; i < OWNERS + 1; i++)
		if (spawn(&r->ch[i], i % 2 == 0 ? a : b) != 0)
			return -1;
	for (int n = 1; n <= ops; n++) {
		one_op(r, &seed);
		if (n % 16 == 0)
			observe(r);
	}
	observe(r);
	for (int i = 0; i < OWNERS + 1; i++) {
		if (write(r->ch[i].to, &quit, sizeof(quit)) < 0)
			kill(r->ch[i].pid, SIGKILL);
		waitpid(r->ch[i].pid, NULL, 0);
		close(r->ch[i].to);
		close(r->ch[i].from);
	}
	return 0;
}

/* Owner numbers stand for pids: compare the transcripts line by line. */
static int compare(const struct run *m, const struct run *c)
{
	const char *p = m->out, *q = c->out;
	int line = 1;

	while (*p != '\0' || *q != '\0') {
		size_t lp = strcspn(p, "\n"), lq = strcspn(q, "\n");

		if (lp != lq || memcmp(p, q, lp) != 0) {
			printf("difference at line %d:\n  model:   %.*s\n"
			       "  cluster: %.*s\n",
			       line, (int)lp, p, (int)lq, q);
			return 1;
		}
		p += lp + (p[lp] != '\0');
		q += lq + (q[lq] != '\0');
		line++;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct run model, clu;
	unsigned seed;
	int ops, ret;

	if (argc < 5) {
		fprintf(stderr,
			"usage: plock_model SEED OPS LOCAL FILE_A [FILE_B]\n");
		return 2;
	}
	seed = (unsigned)strtoul(argv[1], NULL, 0);
	ops = atoi(argv[2]);
	if (run(&model, seed, ops, argv[3], argv[3]) != 0 ||
	    run(&clu, seed, ops, argv[4], argc > 5 ? argv[5] : argv[4]) != 0) {
		perror("plock_model");
		return 2;
	}
	ret = compare(&model, &clu);
	printf("seed %u: %d ops, %u granted, %u refused, %u write locks seen "
	       "by F_GETLK: %s\n",
	       seed, ops, model.granted, model.refused, model.conflicts_seen,
	       ret == 0 ? "same as the model" : "DIFFERENT");
	if (model.granted == 0 || model.refused == 0)
		ret = 1;
	free(model.out);
	free(clu.out);
	return ret;
}
