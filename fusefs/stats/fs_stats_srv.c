/*
 * fs_stats_srv.c — the stats socket: its path, the server thread, and the
 * client fetch the tools use.
 *
 * Protocol: connect, read until EOF. The server writes one JSON document
 * (fs_stats_render, compact, ending in '\n') and closes. A peer whose uid
 * is neither 0 nor the daemon's euid gets the connection closed with no
 * data (the client sees -EPROTO); the socket itself is 0600 in a 0700
 * directory, so such a peer normally cannot even connect.
 *
 * The thread polls the listening socket and a stop pipe with a one-second
 * timeout; each timeout flushes the trace, if any. One client is served at
 * a time; a client that stops reading is dropped after FS_SRV_SEND_MS.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fusefs/stats/fs_stats_internal.h"

#define FS_SRV_SEND_MS 2000
#define FS_SRV_TICK_MS 1000

static int fs_escape_byte(unsigned char c)
{
	return !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		 (c >= '0' && c <= '9') || c == '_' || c == '.');
}

int fs_stats_sock_path(const char *mountpoint, char *buf, size_t len)
{
	char name[256];
	size_t n = 0;
	uint64_t h = 1469598103934665603ull; /* FNV-1a of the whole path */
	const char *p;
	int ret;

	if (mountpoint == NULL || mountpoint[0] != '/')
		return -EINVAL;
	for (p = mountpoint; *p != '\0'; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	p = mountpoint;
	while (*p == '/')
		p++;
	if (*p == '\0')
		name[n++] = '-';
	for (; *p != '\0' && n < 64; p++) {
		unsigned char c = (unsigned char)*p;

		if (c == '/') {
			if (p[1] == '\0' || p[1] == '/')
				continue; /* trailing or doubled slash */
			name[n++] = '-';
		} else if (fs_escape_byte(c)) {
			n += (size_t)snprintf(name + n, 4, "%%%02X", c);
		} else {
			name[n++] = (char)c;
		}
	}
	if (*p != '\0') /* cut: keep it unique */
		n += (size_t)snprintf(name + n, 18, "~%016llx",
				      (unsigned long long)h);
	name[n] = '\0';
	ret = snprintf(buf, len, "%s/%s.sock", FS_STATS_RUNDIR, name);
	if (ret < 0 || (size_t)ret >= len)
		return -ENAMETOOLONG;
	return 0;
}

static int fs_sockaddr(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	strcpy(sa->sun_path, path);
	return 0;
}

/* mkdir the parent of @path (one level) with mode 0700 if missing. */
static int fs_mkdir_parent(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash == NULL || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Remove a stale socket at @path; -EADDRINUSE if a server answers. */
static int fs_clear_stale(const char *path, const struct sockaddr_un *sa)
{
	struct stat sb;
	int fd, ret;

	if (lstat(path, &sb) != 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(sb.st_mode))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	ret = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	close(fd);
	if (ret == 0)
		return -EADDRINUSE;
	if (unlink(path) != 0 && errno != ENOENT)
		return -errno;
	return 0;
}

static int fs_peer_allowed(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
		return 0;
	return cr.uid == 0 || cr.uid == geteuid();
}

static int fs_write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static void fs_srv_answer(struct fs_stats *st, int fd)
{
	struct timeval tv = {FS_SRV_SEND_MS / 1000,
			     (FS_SRV_SEND_MS % 1000) * 1000};
	char *doc;

	if (!fs_peer_allowed(fd)) {
		atomic_fetch_add(&st->srv_refused, 1);
		return;
	}
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (fs_stats_render(st, 0, &doc) != 0) {
		atomic_fetch_add(&st->srv_errors, 1);
		return;
	}
	if (fs_write_all(fd, doc, strlen(doc)) == 0 &&
	    fs_write_all(fd, "\n", 1) == 0)
		atomic_fetch_add(&st->srv_served, 1);
	else
		atomic_fetch_add(&st->srv_errors, 1);
	free(doc);
}

static void *fs_srv_main(void *arg)
{
	struct fs_stats *st = arg;

	for (;;) {
		struct pollfd pfd[2] = {
		    {.fd = st->srv_fd, .events = POLLIN},
		    {.fd = st->srv_stop[0], .events = POLLIN},
		};
		int n = poll(pfd, 2, FS_SRV_TICK_MS), fd;

		if (n < 0 && errno != EINTR)
			break;
		if (pfd[1].revents != 0)
			break;
		if (n <= 0) {
			fs_trace_flush(fs_stats_trace(st));
			continue;
		}
		fd = accept4(st->srv_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		fs_srv_answer(st, fd);
		close(fd);
	}
	return NULL;
}

static int fs_srv_listen(const char *path)
{
	struct sockaddr_un sa;
	int fd, ret;

	ret = fs_sockaddr(path, &sa);
	if (ret != 0)
		return ret;
	ret = fs_mkdir_parent(path);
	if (ret != 0)
		return ret;
	ret = fs_clear_stale(path, &sa);
	if (ret != 0)
		return ret;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		goto out_errno;
	/* the window before chmod is covered by the SO_PEERCRED check */
	if (chmod(path, 0600) != 0 || listen(fd, 16) != 0) {
		ret = -errno;
		unlink(path);
		goto out_close;
	}
	return fd;
out_errno:
	ret = -errno;
out_close:
	close(fd);
	return ret;
}

int fs_stats_serve(struct fs_stats *st, const char *path)
{
	char buf[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int ret;

	if (st->srv_running)
		return -EALREADY;
	if (path == NULL) {
		pthread_mutex_lock(&st->info_lock);
		ret =
		    st->mountpoint == NULL
			? -EINVAL
			: fs_stats_sock_path(st->mountpoint, buf, sizeof(buf));
		pthread_mutex_unlock(&st->info_lock);
		if (ret != 0)
			return ret;
		path = buf;
	}
	st->srv_path = strdup(path);
	if (st->srv_path == NULL)
		return -ENOMEM;
	if (pipe2(st->srv_stop, O_CLOEXEC) != 0) {
		ret = -errno;
		goto out_path;
	}
	st->srv_fd = fs_srv_listen(st->srv_path);
	if (st->srv_fd < 0) {
		ret = st->srv_fd;
		goto out_pipe;
	}
	ret = -pthread_create(&st->srv_thread, NULL, fs_srv_main, st);
	if (ret != 0)
		goto out_listen;
	st->srv_running = 1;
	return 0;
out_listen:
	close(st->srv_fd);
	unlink(st->srv_path);
out_pipe:
	close(st->srv_stop[0]);
	close(st->srv_stop[1]);
out_path:
	free(st->srv_path);
	st->srv_path = NULL;
	st->srv_fd = st->srv_stop[0] = st->srv_stop[1] = -1;
	return ret;
}

void fs_stats_stop(struct fs_stats *st)
{
	if (st == NULL || !st->srv_running)
		return;
	while (write(st->srv_stop[1], "x", 1) < 0 && errno == EINTR)
		;
	pthread_join(st->srv_thread, NULL);
	close(st->srv_fd);
	unlink(st->srv_path);
	close(st->srv_stop[0]);
	close(st->srv_stop[1]);
	free(st->srv_path);
	st->srv_path = NULL;
	st->srv_fd = st->srv_stop[0] = st->srv_stop[1] = -1;
	st->srv_running = 0;
}

const char *fs_stats_sock(const struct fs_stats *st)
{
	return st->srv_running ? st->srv_path : NULL;
}

/* Append what @fd sends until EOF to a growing buffer. */
static int fs_read_all(int fd, int timeout_ms, char **out)
{
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap), *nb;

	if (buf == NULL)
		return -ENOMEM;
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t n;
		int pr = poll(&pfd, 1, timeout_ms);

		if (pr == 0) {
			free(buf);
			return -ETIMEDOUT;
		}
		if (pr < 0 && errno == EINTR)
			continue;
		n = pr < 0 ? -1 : read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int ret = -errno;

			free(buf);
			return ret;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (cap - len < 4096) {
			nb = realloc(buf, cap * 2);
			if (nb == NULL) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap *= 2;
		}
	}
	buf[len] = '\0';
	if (len == 0) {
		free(buf);
		return -EPROTO;
	}
	*out = buf;
	return 0;
}

int fs_stats_fetch(const char *path, int timeout_ms, char **out)
{
	struct sockaddr_un sa;
	int fd, ret;

	ret = fs_sockaddr(path, &sa);
	if (ret != 0)
		return ret;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		ret = -errno;
		goto out_close;
	}
	ret = fs_read_all(fd, timeout_ms, out);
out_close:
	close(fd);
	return ret;
}

int fs_stats_resolve(const char *target, char *buf, size_t len)
{
	struct stat sb;
	char *real;
	int ret;

	if (target == NULL || target[0] == '\0')
		return -EINVAL;
	if (stat(target, &sb) == 0 && S_ISSOCK(sb.st_mode)) {
		if (strlen(target) >= len)
			return -ENAMETOOLONG;
		strcpy(buf, target);
		return 0;
	}
	real = realpath(target, NULL);
	if (real == NULL)
		return -errno;
	ret = fs_stats_sock_path(real, buf, len);
	free(real);
	return ret;
}
