/*
 * plockctl — fcntl record locks from the shell, as a user would script
 * them (tests/integration/clu_locks.sh).
 *
 *   plockctl [-o] FILE STEP...
 *
 * Opens FILE read-write and runs each STEP in order, printing one line
 * per step ("STEP RESULT"). -o uses open file description locks
 * (F_OFD_*) instead of process-associated ones. Steps:
 *
 *   r:START:LEN  w:START:LEN   F_SETLK read / write lock: "ok", "EAGAIN"
 *   R:START:LEN  W:START:LEN   F_SETLKW: "ok", "EDEADLK", "EINTR"
 *   u:START:LEN                unlock: "ok"
 *   g:r:START:LEN g:w:...      F_GETLK: "unlocked" or "r|w START LEN PID"
 *   touch:PATH                 create PATH (tell another process)
 *   wait:PATH                  wait until PATH exists (at most 60 s)
 *   sleep:MS                   sleep MS milliseconds
 *   close                      close and reopen FILE (drops POSIX locks)
 *   hold                       sleep until killed
 *
 * LEN 0 means "to the end of the file". Exit status 0 unless a step could
 * not run (bad step, open failed, unexpected errno: printed).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int use_ofd;
static const char *path;

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int parse_range(const char *s, struct flock *fl)
{
	long long start, len;

	if (sscanf(s, "%lld:%lld", &start, &len) != 2 || start < 0 || len < 0)
		return -1;
	fl->l_whence = SEEK_SET;
	fl->l_start = start;
	fl->l_len = len;
	return 0;
}

static const char *err_name(int e)
{
	switch (e) {
	case EAGAIN:
		return "EAGAIN";
	case EACCES:
		return "EAGAIN"; /* POSIX allows either for F_SETLK */
	case EDEADLK:
		return "EDEADLK";
	case EINTR:
		return "EINTR";
	default:
		return NULL;
	}
}

/* F_SETLK/F_SETLKW/F_GETLK step; returns 0 or -1 (printed). */
static int lock_step(int fd, const char *step)
{
	struct flock fl;
	char kind = step[0];
	const char *what;
	int cmd;

	memset(&fl, 0, sizeof(fl));
	if (kind == 'g') {
		fl.l_type = step[2] == 'w' ? F_WRLCK : F_RDLCK;
		if (parse_range(step + 4, &fl) < 0)
			return -1;
		cmd = use_ofd ? F_OFD_GETLK : F_GETLK;
		if (fcntl(fd, cmd, &fl) < 0)
			return -1;
		if (fl.l_type == F_UNLCK)
			printf("%s unlocked\n", step);
		else
			printf("%s %c %lld %lld %d\n", step,
			       fl.l_type == F_WRLCK ? 'w' : 'r',
			       (long long)fl.l_start, (long long)fl.l_len,
			       (int)fl.l_pid);
		return 0;
	}
	fl.l_type = (kind == 'r' || kind == 'R')   ? F_RDLCK
		    : (kind == 'w' || kind == 'W') ? F_WRLCK
						   : F_UNLCK;
	if (parse_range(step + 2, &fl) < 0)
		return -1;
	if (kind == 'R' || kind == 'W')
		cmd = use_ofd ? F_OFD_SETLKW : F_SETLKW;
	else
		cmd = use_ofd ? F_OFD_SETLK : F_SETLK;
	if (fcntl(fd, cmd, &fl) == 0) {
		printf("%s ok\n", step);
		return 0;
	}
	what = err_name(errno);
	if (what == NULL)
		return -1;
	printf("%s %s\n", step, what);
	return 0;
}

static int run_step(int *fd, const char *step)
{
	if (strncmp(step, "touch:", 6) == 0) {
		int t = open(step + 6, O_CREAT | O_WRONLY, 0644);

		if (t < 0)
			return -1;
		close(t);
		printf("%s ok\n", step);
		return 0;
	}
	if (strncmp(step, "wait:", 5) == 0) {
		struct stat st;

		for (int i = 0; stat(step + 5, &st) != 0; i++) {
			if (i > 6000)
				return -1;
			sleep_ms(10);
		}
		return 0;
	}
	if (strncmp(step, "sleep:", 6) == 0) {
		sleep_ms(atol(step + 6));
		return 0;
	}
	if (strcmp(step, "close") == 0) {
		close(*fd);
		*fd = open(path, O_RDWR);
		printf("%s %s\n", step, *fd < 0 ? "failed" : "ok");
		return *fd < 0 ? -1 : 0;
	}
	if (strcmp(step, "hold") == 0) {
		for (;;)
			pause();
	}
	if (strchr("rwRWug", step[0]) != NULL && step[1] == ':')
		return lock_step(*fd, step);
	errno = EINVAL;
	return -1;
}

static void on_signal(int sig)
{
	(void)sig; /* interrupts F_SETLKW (no SA_RESTART) */
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	int i = 1, fd;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGUSR1, &sa, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && strcmp(argv[1], "-o") == 0) {
		use_ofd = 1;
		i++;
	}
	if (argc - i < 1) {
		fprintf(stderr, "usage: plockctl [-o] FILE STEP...\n");
		return 2;
	}
	path = argv[i++];
	fd = open(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	for (; i < argc; i++) {
		if (run_step(&fd, argv[i]) < 0) {
			fprintf(stderr, "plockctl: %s: %s\n", argv[i],
				strerror(errno));
			return 1;
		}
	}
	close(fd);
	return 0;
}
