/*
 * replay.c — runs a harness over its corpora without fuzzing: the main()
 * that `make test` links with each tests/fuzz/fuzz_NAME.c into
 * build/tests/test_fuzz_NAME.
 *
 *   test_fuzz_NAME [FILE|DIR...]
 *
 * Without arguments it replays $UCFS_TOP/tests/fuzz/NAME/seeds and
 * .../regress (UCFS_TOP defaults to "."). Each input runs in a child
 * process (a crash or an abort is that input's failure, not the run's)
 * with a 120 s alarm (the harness's own setup too: threads do not
 * survive a fork), and prints "PASS fuzz_NAME/DIR/FILE" or "FAIL ...".
 */
#include "tests/fuzz/fz_common.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define REPLAY_ALARM_S 120

static const char *harness;
static int failed, ran;

static int read_input(const char *path, uint8_t **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	long n;

	if (f == NULL)
		return -errno;
	if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) != 0) {
		fclose(f);
		return -EIO;
	}
	*len = (size_t)n;
	*buf = malloc(*len + 1);
	if (*buf == NULL || fread(*buf, 1, *len, f) != *len) {
		fclose(f);
		free(*buf);
		return -EIO;
	}
	fclose(f);
	return 0;
}

static void replay_file(const char *path, const char *label)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	pid_t pid;
	int st = 0;

	ran++;
	if (read_input(path, &buf, &len) < 0) {
		printf("FAIL fuzz_%s/%s: cannot read\n", harness, label);
		failed++;
		return;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		alarm(REPLAY_ALARM_S);
		LLVMFuzzerTestOneInput(buf, len);
		_exit(0);
	}
	free(buf);
	if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0) {
		printf("FAIL fuzz_%s/%s: %s %d\n", harness, label,
		       WIFSIGNALED(st) ? "signal" : "status",
		       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		failed++;
	} else {
		printf("PASS fuzz_%s/%s\n", harness, label);
	}
	fflush(stdout);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of @dir, in name order (stable output). */
static void replay_dir(const char *dir, const char *label)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL, path[4096], lab[512];
	size_t n = 0;

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		char **nn;

		if (de->d_name[0] == '.' ||
		    (nn = realloc(names, (n + 1) * sizeof(*nn))) == NULL)
			continue;
		names = nn;
		names[n++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; i < n; i++) {
		struct stat sb;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		snprintf(lab, sizeof(lab), "%s/%s", label, names[i]);
		if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
			replay_file(path, lab);
		free(names[i]);
	}
	free(names);
}

static void replay_arg(const char *path)
{
	char name[4096];
	struct stat sb;
	const char *base;
	size_t n;

	snprintf(name, sizeof(name), "%s", path);
	n = strlen(name);
	while (n > 1 && name[n - 1] == '/')
		name[--n] = '\0';
	base = strrchr(name, '/');
	base = base != NULL ? base + 1 : name;
	if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
		replay_dir(path, base);
	else
		replay_file(path, base);
}

int main(int argc, char **argv)
{
	const char *top = getenv("UCFS_TOP");
	char dir[4096];

	harness = strrchr(argv[0], '/');
	harness = harness != NULL ? harness + 1 : argv[0];
	if (strncmp(harness, "test_fuzz_", 10) == 0)
		harness += 10;
	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			replay_arg(argv[i]);
	} else {
		static const char *const sub[] = {"seeds", "regress"};

		for (size_t i = 0; i < 2; i++) {
			snprintf(dir, sizeof(dir), "%s/tests/fuzz/%s/%s",
				 top != NULL ? top : ".", harness, sub[i]);
			replay_dir(dir, sub[i]);
		}
	}
	if (ran == 0) {
		printf("FAIL fuzz_%s: no input found\n", harness);
		return 1;
	}
	return failed != 0;
}
