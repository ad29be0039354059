/*
 * fuzz_lkframe.c — lock manager frames from a peer that lies: mutated
 * frames fed to node 1's receive path, after the handshake, in a cluster
 * of three lockspace cores simulated in one thread (as test_lk_sim.c: no
 * threads, no sockets; every frame goes through one FIFO here).
 *
 * Setup (the same for every input): nodes 1..3 form generation 1; then
 * locks that leave state everywhere: node 1 masters names 1..4 (node 2
 * holds PR on two of them, node 3 waits for EX on one, node 1 holds EX
 * with a value block on another), node 2 masters names 5..8 on which
 * node 1 holds and waits, and node 1 has a batch of eight requests on
 * names 9..16 queued at node 3's master. The frames nodes 2 and 3 sent
 * node 1 during the setup are the harness's seed (FZ_WRITE_SEED).
 *
 * Input: records {u8 ctl, u16 len (little-endian), len bytes of frame}.
 * ctl bit 0: the frame comes from node 3 (else node 2); bit 1: the
 * network settles after it (every queued frame delivered, callbacks
 * run); bit 2: the header is left as given (else magic, version,
 * length and sender are set right and count from the length, so that
 * mutations reach the record handlers); bits 3-5: what node 1's user does
 * first (act(): lock, unlock, convert, cancel, a clock tick a minute
 * later) on the lock or name that bits 6-7 pick. Each frame then takes the path
 * lk_net.c gives an authenticated peer's frame: lk_wire_check, HEARTBEAT
 * and LEAVE to the membership code, the rest to lk_core_rx. After every
 * frame, every resource queue of every node must pass lk_grant_check
 * (counts, queue states, no incompatible grants); at the end the harness
 * releases its locks, the network settles, and every lockspace is
 * destroyed (leaks are the sanitizer's to find).
 */
#include <errno.h>

#include "lockmgr/lk_internal.h"
#include "lockmgr/lk_net.h"
#include "lockmgr/lk_wire.h"
#include "tests/fuzz/fz_common.h"

#define NN 3		 /* node ids 1..NN; node 1 is the target */
#define QMAX 8192	 /* frames in flight */
#define MAX_FRAMES 64	 /* input frames handled */
#define SETTLE_MAX 20000 /* deliveries per settle (a ping-pong stops) */
#define NLOCKS 32

struct fz_frame {
	uint32_t from, to;
	size_t len;
	uint8_t *buf;
};

static struct lk_ls *node[NN + 1];
static struct fz_frame q[QMAX];
static size_t qhead, qtail;
static struct lk_lock *held[NLOCKS]; /* the harness's handles */
static unsigned nheld;
static uint8_t *seed; /* frames to node 1 during setup, as an input */
static size_t seed_len, seed_cap;
static int recording;

static void seed_add(uint32_t from, const void *f, size_t len)
{
	uint8_t *n;

	if (seed_len + 3 + len > seed_cap) {
		seed_cap = (seed_len + 3 + len) * 2;
		n = realloc(seed, seed_cap);
		if (n == NULL)
			return;
		seed = n;
	}
	seed[seed_len++] = (uint8_t)((from == 3 ? 1 : 0) | 2);
	seed[seed_len++] = (uint8_t)len;
	seed[seed_len++] = (uint8_t)(len >> 8);
	memcpy(seed + seed_len, f, len);
	seed_len += len;
}

static int sim_xmit(void *ctx, uint32_t to, const void *data, size_t len)
{
	uint32_t from = (uint32_t)(uintptr_t)ctx;
	const uint8_t *p = data;

	while (len >= sizeof(struct lk_hdr)) {
		const struct lk_hdr *h = (const void *)p;
		struct fz_frame *f;

		if (to < 1 || to > NN || qtail - qhead >= QMAX ||
		    h->length < sizeof(*h) || h->length > len)
			return -EPIPE;
		f = &q[qtail++ % QMAX];
		*f = (struct fz_frame){from, to, h->length, malloc(h->length)};
		if (f->buf == NULL)
			return -ENOMEM;
		memcpy(f->buf, p, h->length);
		if (recording && to == 1 && h->length < 65536)
			seed_add(from, p, h->length);
		p += h->length;
		len -= h->length;
	}
	return 0;
}

/* What lk_net.c's rx_frame does with an authenticated peer's frame. */
static void rx(uint32_t to, uint32_t from, const uint8_t *f, size_t len)
{
	struct lk_ls *ls = node[to];
	const struct lk_hdr *h = (const void *)f;
	const char *why;

	pthread_mutex_lock(&ls->mu);
	if (lk_wire_check(f, len, &why) == 0 && h->sender == from &&
	    h->type != LK_M_HELLO && h->type != LK_M_AUTH) {
		lk_member_peer_seen(ls, from);
		if (h->type == LK_M_HEARTBEAT || h->type == LK_M_LEAVE) {
			const struct lk_rec_ctl *c = (const void *)(h + 1);

			for (unsigned i = 0; i < h->count; i++)
				lk_member_rx(ls, from, h->type, c + i);
		} else {
			lk_core_rx(ls, from, f, len);
		}
	}
	lk_out_flush(ls);
	pthread_mutex_unlock(&ls->mu);
}

static int run_cbs(void)
{
	int n = 0;

	for (int i = 1; i <= NN; i++) {
		pthread_mutex_lock(&node[i]->mu);
		n += lk_cb_run(node[i]);
		pthread_mutex_unlock(&node[i]->mu);
	}
	return n;
}

static void settle(void)
{
	unsigned n = 0;

	do {
		while (qhead != qtail && n++ < SETTLE_MAX) {
			struct fz_frame f = q[qhead++ % QMAX];

			rx(f.to, f.from, f.buf, f.len);
			free(f.buf);
		}
	} while (run_cbs() > 0 && n < SETTLE_MAX);
}

/* The harness's own scans are no coverage to guide by, and tracing their
 * 65536 comparisons per table would be most of the run time. */
#if defined(__clang__)
#define FZ_NO_COVERAGE __attribute__((no_sanitize("coverage", "address")))
#else
#define FZ_NO_COVERAGE
#endif

/* Every queue of every resource obeys the grant engine's rules. */
FZ_NO_COVERAGE static void check_all(void)
{
	for (int i = 1; i <= NN; i++) {
		struct lk_ls *ls = node[i];

		pthread_mutex_lock(&ls->mu);
		for (size_t b = 0; b < LK_HASH_SIZE; b++)
			for (struct lk_res *r = ls->res_hash[b]; r != NULL;
			     r = r->hnext)
				if (lk_grant_check(&r->q) != 0)
					fz_fail(
					    "node %d: grant queues of a "
					    "resource (type %u num %llu) "
					    "broken",
					    i, (unsigned)r->name.type,
					    (unsigned long long)r->name.num);
		pthread_mutex_unlock(&ls->mu);
	}
}

static struct lk_name nm(uint64_t num)
{
	struct lk_name x;

	lk_name_make(&x, 2, num, NULL);
	return x;
}

static struct lk_lock *take(int on, uint64_t num, int mode, unsigned flags)
{
	struct lk_name x = nm(num);

	if (nheld < NLOCKS &&
	    lk_lock(node[on], &x, mode, flags, NULL, NULL, &held[nheld]) >= 0)
		return held[nheld++];
	return NULL;
}

/* Make node @on master of names [from, to): it locks and unlocks them. */
static void master(int on, uint64_t from, uint64_t to)
{
	for (uint64_t n = from; n < to; n++) {
		struct lk_name x = nm(n);
		struct lk_lock *lk;

		if (lk_lock(node[on], &x, LK_EX, 0, NULL, NULL, &lk) >= 0) {
			settle();
			lk_unlock(lk, 0);
		}
	}
	settle();
}

/* Forget @lk, released: the last handle takes its place. */
static void drop(struct lk_lock *lk)
{
	for (unsigned i = 0; i < nheld; i++)
		if (held[i] == lk)
			held[i] = held[--nheld];
}

static void setup(void)
{
	static struct lk_name batch[8];
	struct lk_lock *a, *b, *c;

	for (int i = 1; i <= NN; i++) {
		struct lk_xport xp = {.xmit = sim_xmit,
				      .ctx = (void *)(uintptr_t)i};

		if (lk_core_create((uint32_t)i, &xp, &node[i]) != 0)
			fz_fail("lk_core_create");
	}
	pthread_mutex_lock(&node[1]->mu);
	lk_recover_begin(node[1], 1, 0xe, 0);
	lk_out_flush(node[1]);
	pthread_mutex_unlock(&node[1]->mu);
	settle();
	master(1, 1, 5);
	master(2, 5, 9);
	master(3, 9, 17);
	a = take(2, 1, LK_PR, 0);
	b = take(2, 2, LK_PR, 0);
	take(1, 3, LK_EX, LK_VALBLK);
	settle();
	c = take(3, 3, LK_EX, 0);
	take(1, 5, LK_PR, LK_VALBLK);
	take(3, 6, LK_EX, 0);
	settle();
	take(1, 6, LK_PR, 0);
	take(2, 9, LK_EX, 0);
	settle();
	for (int i = 0; i < 8; i++)
		batch[i] = nm(9 + (uint64_t)i);
	if (nheld + 8 <= NLOCKS && lk_lock_batch(node[1], batch, 8, LK_PR, 0,
						 NULL, NULL, held + nheld) >= 0)
		nheld += 8;
	settle();
	/* CONVERT, UNLOCK, CANCEL to node 1; a BAST from node 2 */
	if (a != NULL)
		lk_convert(a, LK_EX, 0);
	if (b != NULL && lk_unlock(b, 0) == 0)
		drop(b);
	if (c != NULL)
		lk_cancel(c);
	take(3, 5, LK_EX, 0);
	settle();
	/* a second generation led by node 2: the rebuild traffic */
	pthread_mutex_lock(&node[2]->mu);
	lk_recover_begin(node[2], 2, 0xe, 0);
	lk_out_flush(node[2]);
	pthread_mutex_unlock(&node[2]->mu);
	settle();
}

/* Node 1's user between two frames: @what 1..7, @k picks the target. */
static void act(unsigned what, unsigned k, unsigned n)
{
	struct lk_lock *lk = nheld > 0 ? held[(k + 4 * n) % nheld] : NULL;
	int ret;

	switch (what) {
	case 1:
	case 2:
		take(1, 1 + (k * 4 + n) % 16, what == 1 ? LK_PR : LK_EX,
		     what == 2 ? LK_VALBLK : 0);
		return;
	case 3:
		if (lk == NULL)
			return;
		ret = lk_unlock(lk, 0);
		if (ret == 0 || ret == -ENOENT)
			drop(lk); /* the handle is gone */
		return;
	case 4:
	case 5:
		if (lk != NULL)
			lk_convert(lk, what == 4 ? LK_EX : LK_NL, 0);
		return;
	case 6:
		if (lk != NULL)
			lk_cancel(lk);
		return;
	case 7:
		pthread_mutex_lock(&node[1]->mu);
		lk_core_tick(node[1], lk_now_ns() + 60000000000ull);
		lk_out_flush(node[1]);
		pthread_mutex_unlock(&node[1]->mu);
		return;
	}
}

static void teardown(void)
{
	for (unsigned i = nheld; i-- > 0;) {
		if (lk_unlock(held[i], 0) == -EBUSY &&
		    lk_cancel(held[i]) == 0) {
			settle();
			lk_unlock(held[i], 0);
		}
	}
	nheld = 0;
	settle();
	while (qhead != qtail)
		free(q[qhead++ % QMAX].buf);
	qhead = qtail = 0;
	for (int i = 1; i <= NN; i++) {
		lk_core_destroy(node[i]);
		node[i] = NULL;
	}
}

/* Header fields an honest sender would have right. */
static void fix_header(uint8_t *f, size_t len, uint32_t from)
{
	struct lk_hdr *h = (void *)f;
	size_t rs = lk_wire_recsize(h->type);

	h->magic = LK_MAGIC;
	h->version = LK_VERSION;
	h->length = (uint32_t)len;
	h->sender = from;
	if (rs != 0)
		h->count = (uint16_t)((len - sizeof(*h)) / rs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *f;
	size_t off = 0;

	if (f == NULL && (f = malloc(65536 + sizeof(struct lk_hdr))) == NULL)
		return 0;
	recording = seed == NULL;
	setup();
	if (recording) {
		recording = 0;
		fz_write_seed(seed, seed_len);
	}
	check_all();
	for (int n = 0; n < MAX_FRAMES && off + 3 <= size; n++) {
		unsigned ctl = data[off];
		size_t len = data[off + 1] | (size_t)data[off + 2] << 8;
		uint32_t from = ctl & 1 ? 3 : 2;

		off += 3;
		if (len > size - off)
			len = size - off;
		memcpy(f, data + off, len);
		off += len;
		if (len < sizeof(struct lk_hdr))
			continue;
		if (!(ctl & 4))
			fix_header(f, len, from);
		act(ctl >> 3 & 7, ctl >> 6, (unsigned)n);
		rx(1, from, f, len);
		if (ctl & 2)
			settle();
		check_all();
	}
	settle();
	check_all();
	teardown();
	return 0;
}
