/*
 * test_stats.c — fs_stats: counters, sections, rendering, the socket
 * server (including the refusal of non-root peers) and the trace writer.
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fusefs/stats/fs_stats.h"
#include "tests/unit/harness.h"

static char tmpdir[64];

static json_t *render_json(struct fs_stats *st)
{
	char *s = NULL;
	json_error_t e;
	json_t *j;

	if (fs_stats_render(st, 0, &s) != 0)
		return NULL;
	j = json_loads(s, 0, &e);
	if (j == NULL)
		fprintf(stderr, "bad json: %s at %d: %.200s\n", e.text,
			e.position, s);
	free(s);
	return j;
}

static long long jint(json_t *root, const char *path)
{
	char buf[256], *tok, *save = NULL;
	json_t *j = root;

	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, ".", &save); tok != NULL && j != NULL;
	     tok = strtok_r(NULL, ".", &save))
		j = json_object_get(j, tok);
	if (j == NULL || !json_is_integer(j)) {
		fprintf(stderr, "missing integer %s\n", path);
		return -424242;
	}
	return json_integer_value(j);
}

static void test_hist_bucket(void)
{
	CHECK_EQ(fs_hist_bucket(0), 0);
	CHECK_EQ(fs_hist_bucket(1), 0);
	CHECK_EQ(fs_hist_bucket(2), 1);
	CHECK_EQ(fs_hist_bucket(3), 1);
	CHECK_EQ(fs_hist_bucket(1024), 10);
	CHECK_EQ(fs_hist_bucket(2047), 10);
	CHECK_EQ(fs_hist_bucket(UINT64_MAX), FS_HIST_BUCKETS - 1);
	CHECK(strcmp(fs_op_name(FS_OP_CREATE), "create") == 0);
	CHECK(strcmp(fs_op_name(FS_OP_COPY_FILE_RANGE), "copy_file_range") ==
	      0);
	CHECK(strcmp(fs_op_name(FS_OP__COUNT), "?") == 0);
	CHECK(strcmp(fs_lk_mode_name(FS_LK_PR), "PR") == 0);
	CHECK(strcmp(fs_lk_mode_name(-1), "IV") == 0);
}

static void test_counts_exact(void)
{
	struct fs_stats *st;
	struct fs_op_counts c;
	uint64_t hsum = 0;

	REQUIRE(fs_stats_new(&st) == 0);
	for (int i = 0; i < 100; i++)
		fs_stats_op_end(st, FS_OP_CREATE, fs_stats_op_begin(),
				i < 7 ? -EEXIST : 0);
	/* an op that took 1 ms (t0 one ms in the past) */
	fs_stats_op_end(st, FS_OP_FSYNC, fs_stats_now() - 1000000, 0);
	fs_stats_op_end(st, FS_OP__COUNT, 0, 0); /* ignored */
	fs_stats_op_end(NULL, FS_OP_CREATE, 0, 0);

	fs_stats_op_get(st, FS_OP_CREATE, &c);
	CHECK_EQ(c.count, 100);
	CHECK_EQ(c.errors, 7);
	for (int b = 0; b < FS_HIST_BUCKETS; b++)
		hsum += c.hist[b];
	CHECK_EQ(hsum, 100);
	fs_stats_op_get(st, FS_OP_FSYNC, &c);
	CHECK_EQ(c.count, 1);
	CHECK(c.max_ns >= 1000000 && c.max_ns < 1000000000);
	CHECK_EQ(c.hist[fs_hist_bucket(c.max_ns)], 1);
	fs_stats_op_get(st, FS_OP_LOOKUP, &c);
	CHECK_EQ(c.count, 0);
	fs_stats_free(st);
}

#define NTHREADS 6
#define PER_THREAD 20000

static void *bump(void *arg)
{
	struct fs_stats *st = arg;

	for (int i = 0; i < PER_THREAD; i++)
		fs_stats_op_end(st, (i & 1) ? FS_OP_READ : FS_OP_WRITE,
				fs_stats_op_begin(), (i % 10) == 0 ? -EIO : 0);
	return NULL;
}

static void test_counts_threads(void)
{
	struct fs_stats *st;
	struct fs_op_counts r, w;
	pthread_t th[NTHREADS];

	REQUIRE(fs_stats_new(&st) == 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, bump, st);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	fs_stats_op_get(st, FS_OP_READ, &r);
	fs_stats_op_get(st, FS_OP_WRITE, &w);
	CHECK_EQ(r.count, NTHREADS * PER_THREAD / 2);
	CHECK_EQ(w.count, NTHREADS * PER_THREAD / 2);
	CHECK_EQ(r.errors + w.errors, NTHREADS * PER_THREAD / 10);
	fs_stats_free(st);
}

struct sec_arg {
	int calls;
	uint64_t hist[4];
};

static void sec_fill(struct fs_json *o, void *arg)
{
	struct sec_arg *a = arg;
	struct fs_json *arr, *sub;

	a->calls++;
	fs_json_u64(o, "commits", 42);
	fs_json_i64(o, "neg", -3);
	fs_json_dbl(o, "ratio", 0.5);
	fs_json_str(o, "name", "a\"b");
	fs_json_bool(o, "on", 1);
	sub = fs_json_obj(o, "flush");
	fs_json_u64(sub, "fsync", 3);
	arr = fs_json_arr(o, "list");
	fs_json_u64(arr, NULL, 1);
	fs_json_str(arr, NULL, "two");
	fs_json_u64(fs_json_obj(NULL, "x"), "y", 1); /* NULL is harmless */
	fs_json_latency(o, "lat", 10, 10 * 3000, 9000, a->hist, 4, 1000);
}

static void test_sections(void)
{
	struct fs_stats *st;
	struct sec_arg a = {0, {0, 9, 0, 1}}; /* 9 in [2,4)us, 1 in
						 [8,16)us */
	json_t *j, *lat, *h;

	REQUIRE(fs_stats_new(&st) == 0);
	CHECK_EQ(fs_stats_add_section(st, "journal", sec_fill, &a), 0);
	CHECK_EQ(fs_stats_add_section(st, "journal", sec_fill, &a), -EEXIST);
	CHECK_EQ(fs_stats_add_section(st, "fuse", sec_fill, &a), -EEXIST);
	CHECK_EQ(fs_stats_add_section(st, "", sec_fill, &a), -EINVAL);
	CHECK_EQ(fs_stats_add_section(st, "x", NULL, &a), -EINVAL);
	fs_stats_set_node(st, 3, 1);
	CHECK_EQ(fs_stats_set_mount(st, "/dev/x", "/mnt/a",
				    "rw,localalloc=8,lockproto=nolock"),
		 0);
	j = render_json(st);
	REQUIRE(j != NULL);
	CHECK_EQ(a.calls, 1);
	CHECK_EQ(jint(j, "version"), 1);
	CHECK_EQ(jint(j, "node.id"), 3);
	CHECK_EQ(jint(j, "node.slot"), 1);
	CHECK(json_is_true(json_object_get(
	    json_object_get(json_object_get(j, "node"), "options"), "rw")));
	CHECK(strcmp(json_string_value(json_object_get(
			 json_object_get(json_object_get(j, "node"), "options"),
			 "localalloc")),
		     "8") == 0);
	CHECK_EQ(jint(j, "journal.commits"), 42);
	CHECK_EQ(jint(j, "journal.neg"), -3);
	CHECK_EQ(jint(j, "journal.flush.fsync"), 3);
	CHECK_EQ(json_array_size(
		     json_object_get(json_object_get(j, "journal"), "list")),
		 2);
	CHECK(strcmp(json_string_value(json_object_get(
			 json_object_get(j, "journal"), "name")),
		     "a\"b") == 0);
	lat = json_object_get(json_object_get(j, "journal"), "lat");
	CHECK_EQ(jint(lat, "mean_ns"), 3000);
	CHECK_EQ(jint(lat, "p50_ns"), 4000); /* upper bound of [2,4) us */
	CHECK_EQ(jint(lat, "p99_ns"), 9000); /* [8,16) us capped by max */
	h = json_object_get(lat, "hist");
	CHECK_EQ(json_array_size(h), 2);
	CHECK_EQ(json_integer_value(json_array_get(json_array_get(h, 0), 0)),
		 2000);
	CHECK_EQ(json_integer_value(json_array_get(json_array_get(h, 0), 1)),
		 9);
	CHECK(json_object_get(j, "incomplete") == NULL);
	json_decref(j);

	CHECK_EQ(fs_stats_remove_section(st, "journal"), 0);
	CHECK_EQ(fs_stats_remove_section(st, "journal"), -ENOENT);
	j = render_json(st);
	REQUIRE(j != NULL);
	CHECK(json_object_get(j, "journal") == NULL);
	CHECK_EQ(a.calls, 1);
	json_decref(j);
	fs_stats_free(st);
}

static void test_document_keys(void)
{
	struct fs_stats *st;
	json_t *j, *ops;

	REQUIRE(fs_stats_new(&st) == 0);
	for (int i = 0; i < 5; i++)
		fs_stats_op_end(st, FS_OP_MKDIR, fs_stats_op_begin(), 0);
	j = render_json(st);
	REQUIRE(j != NULL);
	ops = json_object_get(json_object_get(j, "fuse"), "ops");
	CHECK_EQ(json_object_size(ops), FS_OP__COUNT);
	for (unsigned op = 0; op < FS_OP__COUNT; op++) {
		json_t *o = json_object_get(ops, fs_op_name(op));
		json_t *l = json_object_get(o, "lat");

		CHECK(json_is_integer(json_object_get(o, "count")));
		CHECK(json_is_integer(json_object_get(o, "errors")));
		CHECK(json_is_integer(json_object_get(l, "p50_ns")));
		CHECK(json_is_integer(json_object_get(l, "p99_ns")));
		CHECK(json_is_integer(json_object_get(l, "max_ns")));
		CHECK(json_is_array(json_object_get(l, "hist")));
	}
	CHECK_EQ(jint(j, "fuse.ops.mkdir.count"), 5);
	CHECK_EQ(jint(j, "fuse.count"), 5);
	CHECK(json_is_real(json_object_get(j, "time")));
	CHECK(json_is_real(
	    json_object_get(json_object_get(j, "node"), "uptime_s")));
	CHECK(json_is_integer(
	    json_object_get(json_object_get(j, "server"), "served")));
	json_decref(j);
	fs_stats_free(st);
}

static void test_sock_path(void)
{
	char buf[128], small[10], longp[400];

	CHECK_EQ(fs_stats_sock_path("/mnt/a b/x-y", buf, sizeof(buf)), 0);
	CHECK(strcmp(buf, "/run/ucfs/mnt-a%20b-x%2Dy.sock") == 0);
	CHECK_EQ(fs_stats_sock_path("/", buf, sizeof(buf)), 0);
	CHECK(strcmp(buf, "/run/ucfs/-.sock") == 0);
	CHECK_EQ(fs_stats_sock_path("/mnt/a/", buf, sizeof(buf)), 0);
	CHECK(strcmp(buf, "/run/ucfs/mnt-a.sock") == 0);
	CHECK_EQ(fs_stats_sock_path("mnt", buf, sizeof(buf)), -EINVAL);
	CHECK_EQ(fs_stats_sock_path("/mnt/a", small, sizeof(small)),
		 -ENAMETOOLONG);
	memset(longp, 'a', sizeof(longp));
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	CHECK_EQ(fs_stats_sock_path(longp, buf, sizeof(buf)), 0);
	CHECK(strlen(buf) < 108 && strchr(buf, '~') != NULL);
	longp[300] = 'b'; /* differs past the cut: a different name */
	{
		char buf2[128];

		CHECK_EQ(fs_stats_sock_path(longp, buf2, sizeof(buf2)), 0);
		CHECK(strcmp(buf, buf2) != 0);
	}
}

static void test_server(void)
{
	struct fs_stats *st, *st2;
	char path[100], *doc = NULL;
	json_t *j;
	json_error_t e;

	snprintf(path, sizeof(path), "%s/run/s.sock", tmpdir);
	REQUIRE(fs_stats_new(&st) == 0);
	REQUIRE(fs_stats_new(&st2) == 0);
	CHECK_EQ(fs_stats_serve(st, NULL), -EINVAL); /* no mountpoint */
	REQUIRE(fs_stats_serve(st, path) == 0);
	CHECK_EQ(fs_stats_serve(st, path), -EALREADY);
	CHECK(strcmp(fs_stats_sock(st), path) == 0);
	CHECK_EQ(fs_stats_serve(st2, path), -EADDRINUSE);
	{
		struct stat sb;

		CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);
	}
	for (int i = 0; i < 3; i++)
		fs_stats_op_end(st, FS_OP_UNLINK, fs_stats_op_begin(), 0);
	/* st2's in-use probe above was one more client: served before our
	 * fetches (one client at a time, in order), it counts as served or
	 * as an error depending on whether it had hung up by then */
	for (int i = 0, base = 0; i < 2; i++) {
		REQUIRE(fs_stats_fetch(path, 2000, &doc) == 0);
		j = json_loads(doc, 0, &e);
		free(doc);
		REQUIRE(j != NULL);
		CHECK_EQ(jint(j, "fuse.ops.unlink.count"), 3);
		if (i == 0)
			base = (int)jint(j, "server.served");
		CHECK(base == 0 || base == 1);
		CHECK_EQ(jint(j, "server.served"), base + i);
		CHECK_EQ(jint(j, "server.served") + jint(j, "server.errors"),
			 1 + i);
		json_decref(j);
	}
	fs_stats_stop(st);
	CHECK(access(path, F_OK) != 0);
	CHECK_EQ(fs_stats_fetch(path, 500, &doc), -ENOENT);
	/* a stale socket file (nobody listening) is replaced */
	REQUIRE(fs_stats_serve(st, path) == 0);
	fs_stats_free(st); /* stops */
	{
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);
		struct sockaddr_un sa = {.sun_family = AF_UNIX};

		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
		CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
		close(fd);
	}
	CHECK_EQ(fs_stats_serve(st2, path), 0);
	CHECK_EQ(fs_stats_fetch(path, 2000, &doc), 0);
	free(doc);
	fs_stats_free(st2);
}

/* Fork a child that drops to uid/gid 65534 and fetches @path; returns
 * its fetch result (negative errno) or 1 if it got a document. */
static int fetch_as_nobody(const char *path)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		char *doc;
		int ret;

		if (setresgid(65534, 65534, 65534) != 0 ||
		    setresuid(65534, 65534, 65534) != 0)
			_exit(99);
		ret = fs_stats_fetch(path, 2000, &doc);
		_exit(ret == 0 ? 1 : -ret);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -9999;
	return WEXITSTATUS(status) == 1 ? 1 : -WEXITSTATUS(status);
}

static void test_refuses_non_root(void)
{
	struct fs_stats *st;
	char path[128], dir[96], *doc;
	json_t *j;

	if (geteuid() != 0) {
		printf("SKIP test_refuses_non_root: needs root\n");
		return;
	}
	snprintf(dir, sizeof(dir), "%s/priv", tmpdir);
	snprintf(path, sizeof(path), "%s/s.sock", dir);
	REQUIRE(fs_stats_new(&st) == 0);
	REQUIRE(fs_stats_serve(st, path) == 0);
	chmod(tmpdir, 0755);
	chmod(dir, 0755); /* directory open: the socket's 0600 must hold */
	CHECK_EQ(fetch_as_nobody(path), -EACCES);
	chmod(path, 0666); /* socket open too: SO_PEERCRED must refuse */
	CHECK_EQ(fetch_as_nobody(path), -EPROTO);
	REQUIRE(fs_stats_fetch(path, 2000, &doc) == 0); /* root still can */
	j = json_loads(doc, 0, NULL);
	free(doc);
	REQUIRE(j != NULL);
	CHECK_EQ(jint(j, "server.refused"), 1);
	json_decref(j);
	fs_stats_free(st);
	chmod(tmpdir, 0700);
}

static void test_trace(void)
{
	struct fs_stats *st;
	struct fs_trace *tr;
	char path[128], line[1024];
	struct fs_trace_lock ev = {
	    .ev = FS_TR_GRANT,
	    .type = "inode",
	    .res = "inode:12\"3",
	    .mode = FS_LK_EX,
	    .from = FS_LK_NL,
	    .peer = 2,
	    .remote = 1,
	    .wait_ns = 1500,
	};
	int n = 0, grants = 0, ops = 0, releases = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/trace.jsonl", tmpdir);
	REQUIRE(fs_stats_new(&st) == 0);
	REQUIRE(fs_trace_open(path, 7, FS_TRACE_OPS, &tr) == 0);
	CHECK_EQ(fs_trace_open("/nonexistent/dir/x", 7, 0, &tr), -ENOENT);
	fs_stats_set_trace(st, tr);
	CHECK(fs_stats_trace(st) == tr);
	fs_trace_lock(tr, &ev);
	ev.ev = FS_TR_RELEASE;
	ev.wait_ns = 2000000;
	fs_trace_lock(tr, &ev);
	fs_trace_lock(NULL, &ev); /* harmless */
	for (int i = 0; i < 10; i++)
		fs_stats_op_end(st, FS_OP_CREATE, fs_stats_op_begin(), 0);
	fs_stats_set_trace(st, NULL);
	fs_stats_op_end(st, FS_OP_CREATE, fs_stats_op_begin(), 0);
	CHECK_EQ(fs_trace_dropped(tr), 0);
	fs_trace_close(tr);
	fs_stats_free(st);

	f = fopen(path, "r");
	REQUIRE(f != NULL);
	while (fgets(line, sizeof(line), f) != NULL) {
		json_t *j = json_loads(line, 0, NULL);
		const char *evn;

		n++;
		CHECK(j != NULL);
		if (j == NULL)
			continue;
		CHECK_EQ(jint(j, "node"), 7);
		CHECK(json_is_real(json_object_get(j, "t")));
		evn = json_string_value(json_object_get(j, "ev"));
		if (evn != NULL && strcmp(evn, "grant") == 0) {
			grants++;
			CHECK(
			    strcmp(json_string_value(json_object_get(j, "res")),
				   "inode:12\"3") == 0);
			CHECK(strcmp(
				  json_string_value(json_object_get(j, "mode")),
				  "EX") == 0);
			CHECK(json_real_value(json_object_get(j, "wait_us")) ==
			      1.5);
		} else if (evn != NULL && strcmp(evn, "release") == 0) {
			releases++;
			CHECK(json_real_value(json_object_get(j, "held_us")) ==
			      2000.0);
		} else if (evn != NULL && strcmp(evn, "op") == 0) {
			ops++;
		}
		json_decref(j);
	}
	fclose(f);
	CHECK_EQ(n, 12);
	CHECK_EQ(grants, 1);
	CHECK_EQ(releases, 1);
	CHECK_EQ(ops, 10);
}

static void test_opts_take(void)
{
	struct fs_stats_opts so;
	char o1[] = "rw,stats=/x/y.sock,commit=5,trace=/t,trace_ops,nostats";
	char o2[] = "stats=", o3[] = "", o4[] = "stats=/a", o5[] = ",,ro,";
	char err[128] = "";

	fs_stats_opts_init(&so);
	CHECK_EQ(fs_stats_opts_take(o1, &so, err, sizeof(err)), 0);
	CHECK(strcmp(o1, "rw,commit=5") == 0);
	CHECK(so.sock != NULL && strcmp(so.sock, "/x/y.sock") == 0);
	CHECK(so.trace != NULL && strcmp(so.trace, "/t") == 0);
	CHECK_EQ(so.trace_flags, FS_TRACE_OPS);
	CHECK_EQ(so.nostats, 1);
	fs_stats_opts_free(&so);
	CHECK_EQ(fs_stats_opts_take(o2, &so, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "'stats'") != NULL);
	CHECK_EQ(fs_stats_opts_take(o3, &so, err, sizeof(err)), 0);
	CHECK(strcmp(o3, "") == 0);
	CHECK_EQ(fs_stats_opts_take(o4, &so, err, sizeof(err)), 0);
	CHECK(strcmp(o4, "") == 0);
	CHECK_EQ(fs_stats_opts_take(o5, &so, err, sizeof(err)), 0);
	CHECK(strcmp(o5, "ro") == 0);
	CHECK_EQ(fs_stats_opts_take(NULL, &so, err, sizeof(err)), 0);
	fs_stats_opts_free(&so);
}

static void test_mount_start(void)
{
	struct fs_stats *st;
	struct fs_stats_opts so;
	char sock[100], trace[100], err[256] = "", *doc;

	snprintf(sock, sizeof(sock), "%s/m.sock", tmpdir);
	snprintf(trace, sizeof(trace), "%s/m.trace", tmpdir);
	REQUIRE(fs_stats_new(&st) == 0);
	fs_stats_opts_init(&so);
	so.sock = strdup(sock);
	so.trace = strdup("/nonexistent/dir/trace");
	CHECK_EQ(fs_stats_mount_start(st, &so, 1, err, sizeof(err)), -ENOENT);
	CHECK(strstr(err, "trace=") != NULL);
	CHECK(fs_stats_sock(st) == NULL && fs_stats_trace(st) == NULL);
	free(so.trace);
	so.trace = strdup(trace);
	so.trace_flags = FS_TRACE_OPS;
	REQUIRE(fs_stats_mount_start(st, &so, 1, err, sizeof(err)) == 0);
	CHECK(fs_stats_trace(st) != NULL);
	fs_stats_op_end(st, FS_OP_GETATTR, fs_stats_op_begin(), 0);
	CHECK_EQ(fs_stats_fetch(sock, 2000, &doc), 0);
	CHECK(strstr(doc, "\"tracing\":true") != NULL);
	free(doc);
	fs_stats_mount_stop(st);
	CHECK(fs_stats_sock(st) == NULL && fs_stats_trace(st) == NULL);
	CHECK(access(sock, F_OK) != 0);
	{
		FILE *f = fopen(trace, "r");
		char line[512] = "";

		REQUIRE(f != NULL);
		CHECK(fgets(line, sizeof(line), f) != NULL);
		CHECK(strstr(line, "\"op\":\"getattr\"") != NULL);
		fclose(f);
	}
	fs_stats_opts_free(&so);
	fs_stats_free(st);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	signal(SIGPIPE, SIG_IGN);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/ucfs-tstats.XXXXXX");
	if (mkdtemp(tmpdir) == NULL) {
		printf("FAIL mkdtemp\n");
		return 1;
	}
	T_RUN(test_hist_bucket);
	T_RUN(test_counts_exact);
	T_RUN(test_counts_threads);
	T_RUN(test_sections);
	T_RUN(test_document_keys);
	T_RUN(test_sock_path);
	T_RUN(test_server);
	T_RUN(test_refuses_non_root);
	T_RUN(test_trace);
	T_RUN(test_opts_take);
	T_RUN(test_mount_start);
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", tmpdir);
	}
	return t_done();
}
