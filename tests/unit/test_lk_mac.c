/*
 * test_lk_mac.c — frames are authenticated after the handshake
 * (lk_auth.h): the tag primitive (a flipped byte, another seq or another
 * connection key fail, and so does the other end's id), then two live
 * lockspaces over loopback TCP with a man in the middle on their link
 * (the connection node 2, the higher id, dials: it carries both
 * directions). The proxy alters a HEARTBEAT of node 2 after the
 * handshake, then replays one: node 1 drops each with a logged reason
 * and counts it, keeps the connection, and locks still go through the
 * proxy afterwards. Then a process that holds the secret
 * (as configured node 3, not running) sends correctly tagged random lock
 * and recovery frames: the tags pass, the core refuses the frames, the
 * node stays up (the fuzzing tests/progs/lk_fuzz.c did before frames had
 * tags).
 *
 * Node 2's configuration puts node 1 at the proxy's address; node 1's
 * own configuration has its real address (same cluster name and secret).
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lockmgr/lk.h"
#include "lockmgr/lk_auth.h"
#include "lockmgr/lk_config.h"
#include "lockmgr/lk_wire.h"
#include "tests/unit/harness.h"

/* ---- the primitive ---- */

static void test_frame_tag_primitive(void)
{
	uint8_t key[32], na[32], nb[32], k1[32], k2[32], k3[32];
	uint8_t frame[32 + 48], tag[LK_FRAME_TAG];

	memset(key, 7, sizeof(key));
	memset(na, 1, sizeof(na));
	memset(nb, 2, sizeof(nb));
	for (size_t i = 0; i < sizeof(frame); i++)
		frame[i] = (uint8_t)(i * 13);
	/* both ends of one connection derive the same key; another
	 * connection (other nonces or ids) another one */
	lk_auth_frame_key(key, na, nb, 1, 2, k1);
	lk_auth_frame_key(key, na, nb, 1, 2, k2);
	CHECK(memcmp(k1, k2, 32) == 0);
	lk_auth_frame_key(key, nb, na, 1, 2, k3);
	CHECK(memcmp(k1, k3, 32) != 0);
	lk_auth_frame_tag(k1, 1, 5, frame, sizeof(frame), tag);
	CHECK_EQ(lk_auth_frame_verify(k1, 1, 5, frame, sizeof(frame), tag), 0);
	CHECK_EQ(lk_auth_frame_verify(k1, 1, 6, frame, sizeof(frame), tag),
		 -EBADMSG);
	CHECK_EQ(lk_auth_frame_verify(k3, 1, 5, frame, sizeof(frame), tag),
		 -EBADMSG);
	/* both ends send on the connection under one key: the same seq
	 * from the other end is another nonce (a frame reflected back to
	 * its sender fails) */
	CHECK_EQ(lk_auth_frame_verify(k1, 2, 5, frame, sizeof(frame), tag),
		 -EBADMSG);
	for (size_t i = 0; i < sizeof(frame); i += 7) {
		frame[i] ^= 0x40;
		CHECK_EQ(
		    lk_auth_frame_verify(k1, 1, 5, frame, sizeof(frame), tag),
		    -EBADMSG);
		frame[i] ^= 0x40;
	}
	tag[3] ^= 1;
	CHECK_EQ(lk_auth_frame_verify(k1, 1, 5, frame, sizeof(frame), tag),
		 -EBADMSG);
}

/* ---- a man in the middle ---- */

static char dir[64];
static int port1, port2, portp;
static atomic_int tamper_hb, replay_hb, tampered, replayed;
static atomic_int mac_logged; /* node 1's "bad frame MAC" lines */
static int lfd = -1;

static void log_cb(int level, const char *msg, void *arg)
{
	(void)level;
	if ((uintptr_t)arg == 1 && strstr(msg, "bad frame MAC") != NULL)
		atomic_fetch_add(&mac_logged, 1);
}

static int read_full(int fd, void *buf, size_t len)
{
	for (size_t got = 0; got < len;) {
		ssize_t n = read(fd, (char *)buf + got, len - got);

		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, (const char *)buf + off, len - off);

		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

struct pipe_fds {
	int from, to;
};

/* node 1 -> node 2 on this connection (the acceptor's side): copied. */
static void *copy_back(void *arg)
{
	struct pipe_fds *p = arg;
	char buf[4096];
	ssize_t n;

	while ((n = read(p->from, buf, sizeof(buf))) > 0)
		if (write_full(p->to, buf, (size_t)n) != 0)
			break;
	return NULL;
}

/* node 2 -> node 1: frame by frame (tags after node 2's AUTH), altering
 * or repeating a HEARTBEAT when asked. */
static void *forward(void *arg)
{
	struct pipe_fds *p = arg;
	static uint8_t buf[LK_FRAME_MAX + LK_FRAME_TAG];
	int tagged = 0;

	for (;;) {
		struct lk_hdr *h = (struct lk_hdr *)buf;
		size_t len;

		if (read_full(p->from, buf, sizeof(*h)) != 0 ||
		    h->length < sizeof(*h) || h->length > LK_FRAME_MAX)
			break;
		len = h->length + (tagged ? LK_FRAME_TAG : 0);
		if (read_full(p->from, buf + sizeof(*h), len - sizeof(*h)) != 0)
			break;
		if (tagged && h->type == LK_M_HEARTBEAT &&
		    atomic_exchange(&tamper_hb, 0)) {
			buf[h->length - 1] ^= 0x01; /* last byte of the body */
			atomic_store(&tampered, 1);
		}
		if (write_full(p->to, buf, len) != 0)
			break;
		if (tagged && h->type == LK_M_HEARTBEAT &&
		    atomic_exchange(&replay_hb, 0)) {
			if (write_full(p->to, buf, len) != 0)
				break;
			atomic_store(&replayed, 1);
		}
		if (h->type == LK_M_AUTH)
			tagged = 1;
	}
	shutdown(p->to, SHUT_RDWR);
	shutdown(p->from, SHUT_RDWR);
	return NULL;
}

static struct pipe_fds fwd_fds, back_fds;
static pthread_t fwd_th, back_th, acc_th;

static struct sockaddr_in addr_of(int last, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET};

	a.sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)last);
	a.sin_port = htons((uint16_t)port);
	return a;
}

/* Accept node 2's connection, dial node 1, start the two directions. */
static void *proxy_accept(void *arg)
{
	struct sockaddr_in a1 = addr_of(1, port1);
	int in, out;

	(void)arg;
	in = accept(lfd, NULL, NULL);
	if (in < 0)
		return NULL;
	out = socket(AF_INET, SOCK_STREAM, 0);
	for (int i = 0; i < 200; i++) {
		if (connect(out, (struct sockaddr *)&a1, sizeof(a1)) == 0)
			break;
		usleep(10000);
	}
	fwd_fds = (struct pipe_fds){in, out};
	back_fds = (struct pipe_fds){out, in};
	pthread_create(&fwd_th, NULL, forward, &fwd_fds);
	pthread_create(&back_th, NULL, copy_back, &back_fds);
	return NULL;
}

static int proxy_start(void)
{
	struct sockaddr_in ap = addr_of(3, portp);
	int one = 1;

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&ap, sizeof(ap)) != 0 ||
	    listen(lfd, 1) != 0)
		return -errno;
	return pthread_create(&acc_th, NULL, proxy_accept, NULL) == 0 ? 0
								      : -EIO;
}

static void proxy_stop(void)
{
	pthread_join(acc_th, NULL);
	if (fwd_fds.from > 0) {
		shutdown(fwd_fds.from, SHUT_RDWR);
		shutdown(fwd_fds.to, SHUT_RDWR);
		pthread_join(fwd_th, NULL);
		pthread_join(back_th, NULL);
		close(fwd_fds.from);
		close(fwd_fds.to);
	}
	close(lfd);
}

static void write_cfg(const char *name, int node1_last, int node1_port)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (f == NULL)
		return;
	fprintf(f,
		"{\"cluster\":\"mac\",\"secret_file\":\"%s/secret\","
		"\"heartbeat_ms\":50,\"timeout_ms\":3000,\"nodes\":["
		"{\"id\":1,\"addr\":\"127.0.0.%d\",\"port\":%d},"
		"{\"id\":2,\"addr\":\"127.0.0.2\",\"port\":%d}]}\n",
		dir, node1_last, node1_port, port2);
	fclose(f);
}

static int wait_flag(atomic_int *flag, int want_min)
{
	for (int i = 0; i < 400; i++) {
		if (atomic_load(flag) >= want_min)
			return 1;
		usleep(10000);
	}
	return 0;
}

/* A PR lock from node 1 on a resource node 2 masters, granted. */
static int remote_lock_works(struct lk_ls *n1, struct lk_ls *n2, uint64_t num)
{
	struct lk_name x;
	struct lk_lock *a, *b;
	int ret;

	lk_name_make(&x, 7, num, NULL);
	if (lk_lock(n2, &x, LK_EX, 0, NULL, NULL, &a) < 0 || lk_wait(a) != 0)
		return 0;
	lk_unlock(a, 0);
	ret = lk_lock(n1, &x, LK_PR, 0, NULL, NULL, &b);
	if (ret == 0)
		ret = lk_wait(b);
	if (ret < 0)
		return 0;
	lk_unlock(b, 0);
	return 1;
}

static void test_tampered_and_replayed_frames_dropped(void)
{
	struct lk_ls_config c1 = {NULL, 1, NULL, log_cb, (void *)1, NULL, 0};
	struct lk_ls_config c2 = {NULL, 2, NULL, log_cb, (void *)2, NULL, 0};
	char p1[128], p2[128], sp[128];
	struct lk_ls *n1 = NULL, *n2 = NULL;
	struct lk_stats st0, st1;
	FILE *f;

	snprintf(dir, sizeof(dir), "/tmp/ucfs-lkmac.XXXXXX");
	REQUIRE(mkdtemp(dir) != NULL);
	port1 = 20000 + (int)(getpid() % 20000);
	port2 = port1 + 1;
	portp = port1 + 2;
	snprintf(sp, sizeof(sp), "%s/secret", dir);
	f = fopen(sp, "w");
	REQUIRE(f != NULL);
	fprintf(f, "mac-test-secret-%d\n", (int)getpid());
	fclose(f);
	write_cfg("n1.json", 1, port1);
	write_cfg("n2.json", 3, portp); /* node 2 reaches node 1 via us */
	snprintf(p1, sizeof(p1), "%s/n1.json", dir);
	snprintf(p2, sizeof(p2), "%s/n2.json", dir);
	c1.cluster_file = p1;
	c2.cluster_file = p2;
	REQUIRE(proxy_start() == 0);
	CHECK_EQ(lk_ls_open(&c2, &n2), 0);
	CHECK_EQ(lk_ls_open(&c1, &n1), 0);
	if (n1 == NULL || n2 == NULL)
		goto out;
	CHECK_EQ(lk_ls_wait_quorum(n1, 10000), 0);
	CHECK_EQ(lk_ls_wait_quorum(n2, 10000), 0);
	CHECK(remote_lock_works(n1, n2, 1));
	lk_ls_stats(n1, &st0);

	atomic_store(&tamper_hb, 1);
	CHECK(wait_flag(&tampered, 1));
	CHECK(wait_flag(&mac_logged, 1));
	lk_ls_stats(n1, &st1);
	CHECK(st1.auth_failures - st0.auth_failures >= 1);
	CHECK(st1.peer[2].dropped - st0.peer[2].dropped >= 1);
	CHECK(remote_lock_works(n1, n2, 2)); /* the link is still up */

	atomic_store(&replay_hb, 1);
	CHECK(wait_flag(&replayed, 1));
	CHECK(wait_flag(&mac_logged, 2));
	CHECK(remote_lock_works(n1, n2, 3));
	printf("node 1 logged %d bad frame MACs\n", atomic_load(&mac_logged));
out:
	if (n1 != NULL)
		lk_ls_close(n1);
	if (n2 != NULL)
		lk_ls_close(n2);
	proxy_stop();
	unlink(sp);
	unlink(p1);
	unlink(p2);
	rmdir(dir);
}

/* ---- a key holder sending tagged garbage ---- */

static void hdr(uint8_t *buf, unsigned type, unsigned count, size_t rs,
		uint32_t sender)
{
	struct lk_hdr *h = (struct lk_hdr *)buf;

	memset(h, 0, sizeof(*h));
	h->magic = LK_MAGIC;
	h->version = LK_VERSION;
	h->type = (uint8_t)type;
	h->count = (uint16_t)count;
	h->length = (uint32_t)(sizeof(*h) + count * rs);
	h->sender = sender;
}

/* Read one untagged frame (the target's HELLO or AUTH). */
static int read_frame(int fd, uint8_t *buf, size_t cap)
{
	struct lk_hdr *h = (struct lk_hdr *)buf;

	if (read_full(fd, buf, sizeof(*h)) != 0 || h->length < sizeof(*h) ||
	    h->length > cap)
		return -1;
	return read_full(fd, buf + sizeof(*h), h->length - sizeof(*h));
}

/* Dial node @to as node @as from 127.0.0.@as, authenticate with the real
 * key; the frame key of the connection in @fkey. fd or -1. */
static int dial_as(const struct lk_config *cfg, uint32_t as, uint32_t to,
		   uint8_t fkey[32])
{
	struct sockaddr_in src = addr_of((int)as, 0);
	const struct lk_node_cfg *t = lk_config_node(cfg, to);
	uint8_t buf[256];
	struct lk_rec_hello hello = {0}, peer;
	struct lk_rec_auth a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&src, sizeof(src)) != 0 ||
	    connect(fd, (const struct sockaddr *)&t->addr, sizeof(t->addr)) !=
		0)
		goto out_close;
	hdr(buf, LK_M_HELLO, 1, sizeof(hello), as);
	hello.nodeid = as;
	hello.to = to;
	hello.cluster_hash = cfg->cluster_hash;
	lk_auth_nonce(hello.nonce);
	memcpy(buf + sizeof(struct lk_hdr), &hello, sizeof(hello));
	if (write_full(fd, buf, sizeof(struct lk_hdr) + sizeof(hello)) != 0 ||
	    read_frame(fd, buf, sizeof(buf)) != 0)
		goto out_close;
	memcpy(&peer, buf + sizeof(struct lk_hdr), sizeof(peer));
	lk_auth_mac(cfg->key, peer.nonce, as, to, a.mac);
	hdr(buf, LK_M_AUTH, 1, sizeof(a), as);
	memcpy(buf + sizeof(struct lk_hdr), &a, sizeof(a));
	if (write_full(fd, buf, sizeof(struct lk_hdr) + sizeof(a)) != 0 ||
	    read_frame(fd, buf, sizeof(buf)) != 0) /* its AUTH */
		goto out_close;
	lk_auth_frame_key(cfg->key, hello.nonce, peer.nonce, as, to, fkey);
	return fd;
out_close:
	if (fd >= 0)
		close(fd);
	return -1;
}

static const unsigned fuzz_types[] = {
    LK_M_LOOKUP,	LK_M_LOOKUP_REPLY, LK_M_REMOVE,	 LK_M_REQUEST,
    LK_M_CONVERT,	LK_M_UNLOCK,	   LK_M_CANCEL,	 LK_M_REPLY,
    LK_M_SREPLY,	LK_M_BAST,	   LK_M_DIR_ADD, LK_M_RLOOKUP,
    LK_M_RLOOKUP_REPLY, LK_M_RCOM,	   LK_M_HANDOFF, LK_M_NTYPES,
    LK_M_SREQUEST,	LK_M_GRANTS,	   LK_M_RUNREQ,	 LK_M_UNLOCKS,
};

/* A correctly tagged frame of a random lock or recovery type (never
 * START/DONE/LEAVE/HEARTBEAT: a real key holder may fence us with
 * those) with random records, sometimes a lying header. */
static int send_mutated(int fd, const uint8_t fkey[32], uint64_t seq)
{
	static uint8_t buf[32 + 8 * 96 + LK_FRAME_TAG];
	unsigned type =
	    fuzz_types[t_rnd() % (sizeof(fuzz_types) / sizeof(fuzz_types[0]))];
	size_t rs = lk_wire_recsize(type) ? lk_wire_recsize(type) : 40;
	unsigned count = (unsigned)(t_rnd() % 8);
	struct lk_hdr *h = (struct lk_hdr *)buf;
	size_t len;

	hdr(buf, type, count, rs, 3);
	len = sizeof(*h) + count * rs;
	for (size_t i = sizeof(*h); i < len; i++)
		buf[i] = (uint8_t)(t_rnd() % 4 == 0 ? t_rnd() : t_rnd() % 3);
	switch (t_rnd() % 5) {
	case 0: /* a count that does not match the length */
		h->count = (uint16_t)t_rnd();
		break;
	case 1: /* another sender than the authenticated one */
		h->sender = (uint32_t)(t_rnd() % 70);
		break;
	case 2: /* an old generation */
		h->gen = t_rnd() % 3;
		break;
	default:
		break;
	}
	h->seq = seq;
	lk_auth_frame_tag(fkey, 3, seq, buf, len, buf + len);
	return write_full(fd, buf, len + LK_FRAME_TAG);
}

/*
 * Node 3 is configured but not running; a process with the secret dials
 * node 2 as node 3 and sends tagged, seeded random lock and recovery
 * frames: they pass the tag check and reach the core's validation. Node
 * 2 drops them (counted), stays up and keeps granting node 1's locks.
 */
static void test_tagged_garbage_from_a_key_holder(void)
{
	struct lk_ls_config c1 = {NULL, 1, NULL, log_cb, (void *)1, NULL, 0};
	struct lk_ls_config c2 = {NULL, 2, NULL, log_cb, (void *)2, NULL, 0};
	static struct lk_config cfg;
	char path[128], sp[128];
	struct lk_ls *n1 = NULL, *n2 = NULL;
	struct lk_stats st0, st1;
	const char *why;
	uint64_t seq = 0, gen, members;
	int sent = 0, conns = 0;
	FILE *f;

	t_rnd_seed(t_seed());
	snprintf(dir, sizeof(dir), "/tmp/ucfs-lkmac.XXXXXX");
	REQUIRE(mkdtemp(dir) != NULL);
	port1 = 20000 + (int)((getpid() + 7) % 20000);
	snprintf(sp, sizeof(sp), "%s/secret", dir);
	f = fopen(sp, "w");
	REQUIRE(f != NULL);
	fprintf(f, "mac-fuzz-secret-%d\n", (int)getpid());
	fclose(f);
	snprintf(path, sizeof(path), "%s/c.json", dir);
	f = fopen(path, "w");
	REQUIRE(f != NULL);
	fprintf(f,
		"{\"cluster\":\"macfuzz\",\"secret_file\":\"%s\","
		"\"heartbeat_ms\":50,\"timeout_ms\":3000,\"nodes\":["
		"{\"id\":1,\"addr\":\"127.0.0.1\",\"port\":%d},"
		"{\"id\":2,\"addr\":\"127.0.0.2\",\"port\":%d},"
		"{\"id\":3,\"addr\":\"127.0.0.3\",\"port\":%d}]}\n",
		sp, port1, port1, port1);
	fclose(f);
	REQUIRE(lk_config_load(path, &cfg, &why) == 0);
	c1.cluster_file = c2.cluster_file = path;
	CHECK_EQ(lk_ls_open(&c2, &n2), 0);
	CHECK_EQ(lk_ls_open(&c1, &n1), 0);
	if (n1 == NULL || n2 == NULL)
		goto out;
	CHECK_EQ(lk_ls_wait_quorum(n1, 10000), 0);
	CHECK_EQ(lk_ls_wait_quorum(n2, 10000), 0);
	CHECK(remote_lock_works(n1, n2, 10));
	lk_ls_stats(n2, &st0);
	for (int round = 0; round < 20; round++) {
		uint8_t fkey[32];
		int fd = dial_as(&cfg, 3, 2, fkey);

		if (fd < 0)
			continue;
		conns++;
		for (int i = 0; i < 50; i++) {
			if (send_mutated(fd, fkey, ++seq) != 0)
				break;
			sent++;
		}
		close(fd);
		CHECK(remote_lock_works(n1, n2, 100 + (uint64_t)round));
	}
	usleep(100000);
	lk_ls_stats(n2, &st1);
	printf("%d tagged frames on %d connections; node 2: %llu more bad "
	       "frames, %llu more frame MAC failures\n",
	       sent, conns,
	       (unsigned long long)(st1.bad_frames - st0.bad_frames),
	       (unsigned long long)(st1.auth_failures - st0.auth_failures));
	CHECK(conns > 0 && sent > 0);
	CHECK(st1.bad_frames > st0.bad_frames);
	/* they were genuine as far as the tags go: the core refused them */
	CHECK_EQ(st1.auth_failures - st0.auth_failures, 0);
	CHECK(lk_ls_members(n2, &gen, &members));
	CHECK_EQ(members, 0x6);
	CHECK(remote_lock_works(n1, n2, 1000));
out:
	if (n1 != NULL)
		lk_ls_close(n1);
	if (n2 != NULL)
		lk_ls_close(n2);
	unlink(sp);
	unlink(path);
	rmdir(dir);
}

int main(int argc, char **argv)
{
	/* the proxy and the key holder write to sockets a node may close
	 * (at the end of a test, or on a frame it refuses): EPIPE, not a
	 * signal that kills the test */
	signal(SIGPIPE, SIG_IGN);
	t_init(argc, argv);
	T_RUN(test_frame_tag_primitive);
	T_RUN(test_tampered_and_replayed_frames_dropped);
	T_RUN(test_tagged_garbage_from_a_key_holder);
	return t_done();
}
