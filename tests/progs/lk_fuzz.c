/*
 * lk_fuzz.c — throws bad input at a running DLM node's port
 * (tests/integration/lk_fuzz.sh). Usage:
 *
 *   lk_fuzz CONFIG TARGET_ID AS_ID SEED ROUNDS
 *
 * Round kinds, in turn: random bytes; a valid-looking frame before any
 * authentication; a handshake with a wrong MAC; and, authenticated as
 * node AS_ID (configured but not running), mutated valid frames: random
 * counts, lengths, types, names, modes, lock ids and statuses, carrying
 * the right frame tag and a growing seq (lk_auth.h) so that they get past
 * the transport's tag check and reach the core's own checks, except one
 * in eight with a broken tag or a stale seq. Prints the
 * seed and what it sent; exits 0 when done (the script then checks that
 * the target is alive and the cluster still works).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <signal.h>
#include <unistd.h>

#include "lockmgr/lk_auth.h"
#include "lockmgr/lk_config.h"
#include "lockmgr/lk_wire.h"

static uint64_t rng;
static struct lk_config cfg;
static uint32_t target, as;
static uint8_t fkey[32]; /* frame key of the authenticated connection */
static uint64_t fseq;	 /* last seq sent on it */

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int dial(void)
{
	const struct lk_node_cfg *t = lk_config_node(&cfg, target);
	const struct lk_node_cfg *me = lk_config_node(&cfg, as);
	struct sockaddr_in src = me->addr;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	src.sin_port = 0;
	bind(fd, (struct sockaddr *)&src, sizeof(src));
	if (connect(fd, (const struct sockaddr *)&t->addr, sizeof(t->addr)) <
	    0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Read one frame (HELLO or AUTH from the target), 2 s at most. */
static int read_frame(int fd, uint8_t *buf, size_t cap)
{
	size_t got = 0;
	struct lk_hdr *h = (struct lk_hdr *)buf;

	while (got < sizeof(*h) || got < h->length) {
		struct pollfd p = {fd, POLLIN, 0};
		ssize_t n;

		if (poll(&p, 1, 2000) <= 0)
			return -1;
		n = read(fd, buf + got, cap - got);
		if (n <= 0)
			return -1;
		got += (size_t)n;
		if (got >= sizeof(*h) && h->length > cap)
			return -1;
	}
	return 0;
}

static void put(int fd, const void *b, size_t n)
{
	if (write(fd, b, n) < 0) {
		/* the target may have closed on us: that is allowed */
	}
}

static void frame(uint8_t *buf, unsigned type, unsigned count, size_t rs)
{
	struct lk_hdr *h = (struct lk_hdr *)buf;

	memset(h, 0, sizeof(*h));
	h->magic = LK_MAGIC;
	h->version = LK_VERSION;
	h->type = (uint8_t)type;
	h->count = (uint16_t)count;
	h->length = (uint32_t)(sizeof(*h) + count * rs);
	h->sender = as;
}

/* Handshake as node @as; @good_mac 0 sends a wrong MAC. Sets the frame
 * key and restarts the seq. */
static int handshake(int fd, int good_mac)
{
	uint8_t buf[256];
	struct lk_rec_hello hello = {0}, *th;
	struct lk_rec_auth a;

	frame(buf, LK_M_HELLO, 1, sizeof(hello));
	hello.nodeid = as;
	hello.to = target;
	hello.cluster_hash = cfg.cluster_hash;
	lk_auth_nonce(hello.nonce);
	memcpy(buf + sizeof(struct lk_hdr), &hello, sizeof(hello));
	put(fd, buf, sizeof(struct lk_hdr) + sizeof(hello));
	if (read_frame(fd, buf, sizeof(buf)) < 0)
		return -1;
	th = (struct lk_rec_hello *)(buf + sizeof(struct lk_hdr));
	lk_auth_frame_key(cfg.key, hello.nonce, th->nonce, as, target, fkey);
	fseq = 0;
	lk_auth_mac(cfg.key, th->nonce, as, target, a.mac);
	if (!good_mac)
		a.mac[rnd() % 32] ^= 1;
	frame(buf, LK_M_AUTH, 1, sizeof(a));
	memcpy(buf + sizeof(struct lk_hdr), &a, sizeof(a));
	put(fd, buf, sizeof(struct lk_hdr) + sizeof(a));
	return 0;
}

static void random_bytes(int fd)
{
	uint8_t buf[4096];
	size_t n = 1 + rnd() % sizeof(buf);

	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)rnd();
	if (rnd() % 2) { /* sometimes a plausible header first */
		frame(buf, 1 + rnd() % (LK_M_NTYPES + 2), rnd() % 4, 40);
		((struct lk_hdr *)buf)->length = (uint32_t)rnd();
	}
	put(fd, buf, n);
}

static const unsigned lock_types[] = {
    LK_M_LOOKUP,  LK_M_LOOKUP_REPLY,  LK_M_REMOVE, LK_M_REQUEST, LK_M_CONVERT,
    LK_M_UNLOCK,  LK_M_CANCEL,	      LK_M_REPLY,  LK_M_BAST,	 LK_M_DIR_ADD,
    LK_M_RLOOKUP, LK_M_RLOOKUP_REPLY, LK_M_RCOM,   LK_M_NTYPES,	 0,
    200,	  LK_M_SREQUEST,      LK_M_SREPLY, LK_M_GRANTS,	 LK_M_RUNREQ,
    LK_M_UNLOCKS,
};

/* A mutated frame of a lock-traffic type (never START/DONE/LEAVE/
 * HEARTBEAT: an authenticated peer may legitimately fence us); @tagged:
 * followed by its frame tag, as after a good handshake. */
static void mutated(int fd, int tagged)
{
	static uint8_t buf[65536 + LK_FRAME_TAG];
	unsigned type =
	    lock_types[rnd() % (sizeof(lock_types) / sizeof(lock_types[0]))];
	size_t rs = lk_wire_recsize(type) ? lk_wire_recsize(type) : 40;
	unsigned count = (unsigned)(rnd() % 8);
	size_t len;

	frame(buf, type, count, rs);
	len = sizeof(struct lk_hdr) + count * rs;
	for (size_t i = sizeof(struct lk_hdr); i < len; i++)
		buf[i] = (uint8_t)(rnd() % 4 == 0 ? rnd() : rnd() % 3);
	switch (rnd() % 6) {
	case 0: /* wrong size for its type */
		((struct lk_hdr *)buf)->length += (uint32_t)(1 + rnd() % 30);
		len += 1 + rnd() % 30;
		break;
	case 1: /* wrong count */
		((struct lk_hdr *)buf)->count = (uint16_t)rnd();
		break;
	case 2: /* wrong sender */
		((struct lk_hdr *)buf)->sender = (uint32_t)rnd() % 70;
		break;
	default:
		break;
	}
	if (tagged) {
		struct lk_hdr *h = (struct lk_hdr *)buf;
		uint8_t tag[LK_FRAME_TAG];

		h->seq = rnd() % 16 == 0 ? fseq : ++fseq; /* sometimes stale */
		lk_auth_frame_tag(fkey, as, h->seq, buf, len, tag);
		if (rnd() % 16 == 0)
			tag[rnd() % LK_FRAME_TAG] ^= 1;
		memcpy(buf + len, tag, LK_FRAME_TAG);
		len += LK_FRAME_TAG;
	}
	put(fd, buf, len);
}

int main(int argc, char **argv)
{
	const char *why;
	int rounds;

	if (argc != 6) {
		fprintf(stderr,
			"usage: lk_fuzz CONFIG TARGET AS SEED ROUNDS\n");
		return 2;
	}
	if (lk_config_load(argv[1], &cfg, &why) != 0) {
		fprintf(stderr, "config: %s\n", why);
		return 2;
	}
	target = (uint32_t)atoi(argv[2]);
	as = (uint32_t)atoi(argv[3]);
	rng = strtoull(argv[4], NULL, 0) * 2654435761u + 1;
	rounds = atoi(argv[5]);
	signal(SIGPIPE, SIG_IGN); /* the target may close on us */
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("seed %s\n", argv[4]);
	for (int r = 0; r < rounds; r++) {
		int fd = dial();

		if (fd < 0) {
			printf("FAIL target refused a connection at round %d\n",
			       r);
			return 1;
		}
		switch (r % 4) {
		case 0:
			random_bytes(fd);
			break;
		case 1: /* traffic before authentication */
			mutated(fd, 0);
			break;
		case 2:
			handshake(fd, 0);
			mutated(fd, 1);
			break;
		default:
			if (handshake(fd, 1) == 0)
				for (int i = 0; i < 20; i++)
					mutated(fd, 1);
			break;
		}
		usleep(2000);
		close(fd);
	}
	printf("sent %d rounds\n", rounds);
	return 0;
}
