/*
 * test_lk_sim.c — several lockspace cores in one thread over a simulated
 * network: per-link FIFO queues delivered in a random interleaving (the
 * "random delays"), callbacks run at random moments.
 *
 * Cases: a resource used by one node costs no message; the hold cache; a
 * 500-lock batch goes out as one frame per master; recovery after a node
 * dies (LVB invalidated, waiters granted only after the node-down
 * callback); and the seeded property test: random lock / convert /
 * unlock / cancel from several clients per node, asserting after every
 * step that no two locks held anywhere are incompatible, that LVB values
 * are never stale, and that every request completes.
 */
#include <errno.h>

#include "lockmgr/lk_internal.h"
#include "tests/unit/harness.h"

#define NN 4 /* node ids 1..NN */
#define MAXQ 4096

struct frame {
	size_t len;
	uint8_t *buf;
};

struct link {
	struct frame q[MAXQ];
	size_t head, tail;
};

static struct lk_ls *node[NN + 1];
static struct link links[NN + 1][NN + 1];
static int alive[NN + 1];
static uint64_t rng;
static unsigned long frames_sent;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int sim_xmit(void *ctx, uint32_t to, const void *data, size_t len)
{
	uint32_t from = (uint32_t)(uintptr_t)ctx;
	const uint8_t *p = data;

	while (len > 0) {
		const struct lk_hdr *h = (const void *)p;
		struct link *l = &links[from][to];
		struct frame *f;

		if (!alive[to] || l->tail - l->head >= MAXQ)
			return -EPIPE;
		f = &l->q[l->tail++ % MAXQ];
		f->len = h->length;
		f->buf = malloc(f->len);
		memcpy(f->buf, p, f->len);
		frames_sent++;
		p += h->length;
		len -= h->length;
	}
	return 0;
}

static void add_node(int i)
{
	struct lk_xport xp = {.xmit = sim_xmit, .ctx = (void *)(uintptr_t)i};

	alive[i] = 1;
	lk_core_create((uint32_t)i, &xp, &node[i]);
}

static void sim_fini(void);

static void sim_init(int n)
{
	sim_fini(); /* what a case that failed a REQUIRE left */
	memset(links, 0, sizeof(links));
	for (int i = 1; i <= NN; i++) {
		node[i] = NULL;
		alive[i] = 0;
		if (i <= n)
			add_node(i);
	}
}

static void drop_link(struct link *l)
{
	while (l->head != l->tail)
		free(l->q[l->head++ % MAXQ].buf);
}

static void sim_fini(void)
{
	for (int i = 1; i <= NN; i++) {
		for (int j = 1; j <= NN; j++)
			drop_link(&links[i][j]);
		if (node[i] != NULL) {
			/* a dead node's callbacks never run */
			if (alive[i]) {
				pthread_mutex_lock(&node[i]->mu);
				lk_cb_run(node[i]);
				pthread_mutex_unlock(&node[i]->mu);
			}
			lk_core_destroy(node[i]);
		}
		node[i] = NULL;
	}
}

/* Deliver the head frame of link a->b. */
static void deliver(int a, int b)
{
	struct link *l = &links[a][b];
	struct frame f = l->q[l->head++ % MAXQ];
	const char *why;

	if (alive[b]) {
		pthread_mutex_lock(&node[b]->mu);
		if (lk_wire_check(f.buf, f.len, &why) == 0)
			lk_core_rx(node[b], (uint32_t)a, f.buf, f.len);
		lk_out_flush(node[b]);
		pthread_mutex_unlock(&node[b]->mu);
	}
	free(f.buf);
}

static int pending_links(void)
{
	int n = 0;

	for (int a = 1; a <= NN; a++)
		for (int b = 1; b <= NN; b++)
			n += links[a][b].head != links[a][b].tail;
	return n;
}

/* Deliver one random frame; 0 if the network is empty. */
static int deliver_random(void)
{
	int n = pending_links(), k;

	if (n == 0)
		return 0;
	k = (int)(rnd() % (uint64_t)n);
	for (int a = 1; a <= NN; a++)
		for (int b = 1; b <= NN; b++)
			if (links[a][b].head != links[a][b].tail && k-- == 0) {
				deliver(a, b);
				return 1;
			}
	return 0;
}

static int run_cbs(int i)
{
	int n;

	if (!alive[i])
		return 0;
	pthread_mutex_lock(&node[i]->mu);
	n = lk_cb_run(node[i]);
	pthread_mutex_unlock(&node[i]->mu);
	return n;
}

/* Deliver and run callbacks until nothing moves. */
static void settle(void)
{
	int moved;

	do {
		moved = 0;
		while (deliver_random())
			moved = 1;
		for (int i = 1; i <= NN; i++)
			moved |= run_cbs(i) > 0;
	} while (moved);
}

static void begin_gen(int coord, uint64_t gen, uint64_t members, uint64_t dead)
{
	pthread_mutex_lock(&node[coord]->mu);
	lk_recover_begin(node[coord], gen, members, dead);
	lk_out_flush(node[coord]);
	pthread_mutex_unlock(&node[coord]->mu);
}

static uint64_t mask_of(int n)
{
	uint64_t m = 0;

	for (int i = 1; i <= n; i++)
		m |= 1ull << i;
	return m;
}

static void start_cluster(int n)
{
	sim_init(n);
	begin_gen(1, 1, mask_of(n), 0);
	settle();
}

static struct lk_name nm(uint64_t num)
{
	struct lk_name x;

	lk_name_make(&x, 2, num, NULL);
	return x;
}

/* Name @num with placement key @place (0: by hash). */
static struct lk_name pnm(uint64_t num, uint32_t place)
{
	struct lk_name x = nm(num);

	x.place = place;
	return x;
}

/* The random tests' resource @r: a quarter placed by hash, the rest by
 * the keys 1..3 (so a membership change moves their directory too). */
static struct lk_name rname(int r)
{
	return pnm((uint64_t)r, (uint32_t)r % 4);
}

/* A name whose directory node is @dir in a cluster of node[1]'s view. */
static struct lk_name name_with_dir(uint32_t dir, uint64_t start)
{
	for (uint64_t i = start;; i++) {
		struct lk_name x = nm(i);

		if (lk_dir_node(node[1], &x, lk_name_hash(&x)) == dir)
			return x;
	}
}

/* ---- deterministic cases ---- */

static void test_join_forms_membership(void)
{
	start_cluster(3);
	for (int i = 1; i <= 3; i++) {
		CHECK_EQ(node[i]->rphase, 0);
		CHECK_EQ(node[i]->gen, 1);
		CHECK_EQ(node[i]->nmemb, 3);
	}
	sim_fini();
}

static void test_local_resource_no_message(void)
{
	struct lk_name x;
	struct lk_lock *lk;
	unsigned long before;

	start_cluster(3);
	x = name_with_dir(2, 100);
	before = frames_sent;
	/* node 2 is directory and first user: master, no message */
	CHECK_EQ(lk_lock(node[2], &x, LK_EX, 0, NULL, NULL, &lk),
		 LK_GRANTED_NOW);
	CHECK_EQ(lk_unlock(lk, 0), 0);
	CHECK_EQ(lk_lock(node[2], &x, LK_PR, 0, NULL, NULL, &lk),
		 LK_GRANTED_NOW);
	CHECK_EQ(frames_sent, before);
	CHECK_EQ(lk_unlock(lk, 0), 0);
	/* a name mastered elsewhere: one lookup, then cached master */
	x = name_with_dir(3, 200);
	CHECK_EQ(lk_lock(node[2], &x, LK_EX, 0, NULL, NULL, &lk), 0);
	CHECK_EQ(frames_sent, before + 1);
	settle();
	CHECK(lk_lock_granted(lk));
	CHECK_EQ(lk_unlock(lk, 0), 0);
	/* node 2 became master: re-locking costs nothing */
	before = frames_sent;
	CHECK_EQ(lk_lock(node[2], &x, LK_EX, 0, NULL, NULL, &lk),
		 LK_GRANTED_NOW);
	CHECK_EQ(frames_sent, before);
	CHECK_EQ(lk_unlock(lk, 0), 0);
	sim_fini();
}

static int bast_seen;
static uint32_t bast_node; /* lk_bast_node in the last one */
static void count_bast(struct lk_lock *lk, int mode, void *arg)
{
	(void)mode;
	(void)arg;
	bast_seen++;
	bast_node = lk_bast_node(lk);
}
static const struct lk_lock_ops bast_ops = {NULL, count_bast};

/* A BAST frame (master 1, holder 2, asker 3) names the asker, and the
 * holder counts it per peer (net.peers[].basts_for). */
static void test_bast_frame_names_asker(const struct lk_name *x)
{
	struct lk_lock *a, *b;
	struct lk_stats st;

	bast_seen = 0;
	bast_node = 0;
	CHECK_EQ(lk_lock(node[2], x, LK_EX, 0, &bast_ops, NULL, &a), 0);
	settle();
	CHECK(lk_lock_granted(a));
	CHECK_EQ(lk_lock(node[3], x, LK_EX, 0, NULL, NULL, &b), 0);
	settle();
	CHECK_EQ(bast_seen, 1);
	CHECK_EQ(bast_node, 3);
	lk_ls_stats(node[2], &st);
	CHECK_EQ(st.peer[3].basts_for, 1);
	CHECK_EQ(st.peer[1].basts_for, 0);
	lk_unlock(a, 0);
	settle();
	CHECK(lk_lock_granted(b));
	lk_unlock(b, 0);
	settle();
}

static void test_remote_grant_and_bast(void)
{
	struct lk_name x;
	struct lk_lock *a, *b;

	start_cluster(3);
	x = name_with_dir(1, 300);
	bast_seen = 0;
	CHECK_EQ(lk_lock(node[1], &x, LK_EX, 0, &bast_ops, NULL, &a),
		 LK_GRANTED_NOW);
	CHECK_EQ(lk_lock(node[3], &x, LK_PR, 0, NULL, NULL, &b), 0);
	settle();
	CHECK_EQ(bast_seen, 1);
	/* the holder is the master: the callback names the asker */
	CHECK_EQ(bast_node, 3);
	CHECK(!lk_lock_granted(b));
	CHECK_EQ(lk_convert(a, LK_PR, 0), LK_GRANTED_NOW);
	settle();
	CHECK(lk_lock_granted(b));
	CHECK_EQ(lk_lock_mode(b), LK_PR);
	lk_unlock(a, 0);
	lk_unlock(b, 0);
	settle();
	test_bast_frame_names_asker(&x);
	sim_fini();
}

static void test_hold_cache(void)
{
	struct lk_name x;
	struct lk_lock *a, *b, *c;
	struct lk_stats st;

	start_cluster(2);
	x = name_with_dir(2, 400);
	CHECK_EQ(lk_lock(node[1], &x, LK_EX, 0, NULL, NULL, &a), 0);
	settle();
	CHECK(lk_lock_granted(a));
	CHECK_EQ(lk_unlock(a, LK_UNLOCK_CACHE), 0);
	/* covered mode from the cache: no message */
	unsigned long before = frames_sent;
	CHECK_EQ(lk_lock(node[1], &x, LK_PR, 0, NULL, NULL, &b),
		 LK_GRANTED_NOW);
	CHECK_EQ(frames_sent, before);
	CHECK_EQ(lk_lock_mode(b), LK_EX);
	CHECK_EQ(lk_unlock(b, LK_UNLOCK_CACHE), 0);
	lk_ls_stats(node[1], &st);
	CHECK_EQ(st.type[2].c.cache_hits, 1);
	/* another node wants it: the cached lock gives way by itself */
	CHECK_EQ(lk_lock(node[2], &x, LK_EX, 0, NULL, NULL, &c), 0);
	settle();
	CHECK(lk_lock_granted(c));
	lk_unlock(c, 0);
	settle();
	sim_fini();
}

/* Unused resources wait on the toss list, then go (counted); a master
 * that drops one tells the directory. */
static void test_toss_list(void)
{
	struct lk_name x = nm(900), y;
	struct lk_lock *a;
	struct lk_stats st;

	start_cluster(2);
	y = name_with_dir(2, 901);
	CHECK_EQ(lk_lock(node[1], &y, LK_EX, 0, NULL, NULL, &a), 0);
	settle();
	CHECK_EQ(lk_unlock(a, 0), 0);
	if (lk_lock(node[1], &x, LK_EX, 0, NULL, NULL, &a) == 0)
		settle();
	CHECK_EQ(lk_unlock(a, 0), 0);
	settle();
	lk_ls_stats(node[1], &st);
	CHECK_EQ(st.tossed, 2);
	CHECK_EQ(node[2]->ndir >= 1, 1);
	pthread_mutex_lock(&node[1]->mu);
	node[1]->toss_ns = 1; /* (kept at least 100 ms: LK_TOSS_MIN_NS) */
	lk_core_tick(node[1], lk_now_ns() + 200000000ull);
	lk_out_flush(node[1]);
	pthread_mutex_unlock(&node[1]->mu);
	settle();
	lk_ls_stats(node[1], &st);
	CHECK_EQ(st.tossed, 0);
	CHECK_EQ(st.toss_freed, 2);
	CHECK_EQ(st.resources, 0);
	/* node 1 mastered y: node 2's directory entry is gone */
	CHECK_EQ(lk_dir_node(node[2], &y, lk_name_hash(&y)), 2);
	lk_ls_stats(node[2], &st);
	CHECK_EQ(st.dir_entries, 0);
	sim_fini();
}

/* lk_ls_set_toss_max: beyond the bound the oldest unused resources go
 * at the next tick, however recent (toss_ms not passed); the newest
 * stay, and so does the memory gauge's floor. */
static void test_toss_bound(void)
{
	struct lk_lock *a;
	struct lk_stats st;

	start_cluster(2);
	lk_ls_set_toss_max(node[1], 3);
	for (uint64_t i = 0; i < 10; i++) {
		struct lk_name x = nm(950 + i);

		CHECK(lk_lock(node[1], &x, LK_PR, 0, NULL, NULL, &a) >= 0);
		settle();
		CHECK_EQ(lk_unlock(a, 0), 0);
		settle();
	}
	lk_ls_stats(node[1], &st);
	CHECK_EQ(st.tossed, 10); /* toss_ms (10 s) not passed */
	CHECK_EQ(st.toss_max, 3);
	CHECK(st.bytes > 0);
	pthread_mutex_lock(&node[1]->mu);
	lk_core_tick(node[1], lk_now_ns());
	lk_out_flush(node[1]);
	pthread_mutex_unlock(&node[1]->mu);
	settle();
	lk_ls_stats(node[1], &st);
	CHECK_EQ(st.tossed, 3);
	CHECK_EQ(st.toss_freed, 7);
	CHECK_EQ(st.resources, 3);
	/* the newest three stay: a lock on one finds its resource */
	{
		struct lk_name x = nm(959);

		CHECK(lk_lock(node[1], &x, LK_PR, 0, NULL, NULL, &a) >= 0);
		settle();
		lk_ls_stats(node[1], &st);
		CHECK_EQ(st.resources, 3);
		CHECK_EQ(lk_unlock(a, 0), 0);
		settle();
	}
	sim_fini();
}

static void test_batch_one_frame_per_master(void)
{
	enum { N = 500 };
	static struct lk_name names[N];
	static struct lk_lock *lks[N];
	unsigned long before;
	int granted = 0;

	start_cluster(2);
	for (int i = 0; i < N; i++)
		names[i] = nm(10000 + (uint64_t)i);
	/* node 2 masters all of them */
	CHECK_EQ(lk_lock_batch(node[2], names, N, LK_EX, 0, NULL, NULL, lks) +
			 0 >=
		     0,
		 1);
	settle();
	for (int i = 0; i < N; i++)
		CHECK_EQ(lk_unlock(lks[i], 0), 0);
	settle();
	/* node 1 asks for all 500: lookups batched, then requests */
	before = frames_sent;
	CHECK(lk_lock_batch(node[1], names, N, LK_PR, 0, NULL, NULL, lks) >= 0);
	settle();
	for (int i = 0; i < N; i++)
		granted += lk_lock_granted(lks[i]);
	CHECK_EQ(granted, N);
	/* LOOKUP -> LOOKUP_REPLY -> REQUEST -> REPLY for the half whose
	 * directory is node 2, REQUEST -> REPLY for the other half */
	CHECK(frames_sent - before <= 6);
	printf("batch of %d: %lu frames\n", N, frames_sent - before);
	sim_fini();
}

/* Lock and unlock @n names on @who: it becomes their master. */
static void make_master(int who, const struct lk_name *names, size_t n,
			struct lk_lock **lks)
{
	CHECK(lk_lock_batch(node[who], names, n, LK_EX, 0, NULL, NULL, lks) >=
	      0);
	settle();
	CHECK_EQ(lk_unlock_batch(lks, n, 0), (long long)n);
	settle();
}

/* Names with no string part are requested in a RUNREQ run (a 24-byte
 * header, then 8 bytes a lock: their lkids are consecutive), one with a
 * string with a 48-byte REQUEST: a batch of 100 of each (in that order)
 * to node 2 is two frames of those sizes, and all are granted, string
 * names included (the master rebuilds the numeric names). */
static void test_short_and_long_requests(void)
{
	enum { N = 200 };
	static struct lk_name names[N];
	static struct lk_lock *lks[N];
	struct lk_stats s0, s1;
	int granted = 0;

	start_cluster(2);
	for (int i = 0; i < N; i++) {
		char str[16];

		snprintf(str, sizeof(str), "s%d", i);
		lk_name_make(&names[i], 2, 500000 + (uint64_t)i,
			     i < N / 2 ? NULL : str);
	}
	make_master(2, names, N, lks);
	CHECK(lk_lock_batch(node[1], names, N, LK_PR, 0, NULL, NULL, lks) >=
	      0); /* looks the masters up */
	settle();
	CHECK_EQ(lk_unlock_batch(lks, N, 0), N);
	settle();
	lk_ls_stats(node[1], &s0);
	CHECK_EQ(lk_lock_batch(node[1], names, N, LK_PR, 0, NULL, NULL, lks),
		 0);
	lk_ls_stats(node[1], &s1);
	CHECK_EQ(s1.peer[2].frames_tx - s0.peer[2].frames_tx, 2);
	CHECK_EQ(s1.peer[2].bytes_tx - s0.peer[2].bytes_tx,
		 2 * sizeof(struct lk_hdr) + sizeof(struct lk_run_hdr) +
		     N / 2 * sizeof(struct lk_rec_slot) +
		     N / 2 * sizeof(struct lk_rec_req));
	settle();
	for (int i = 0; i < N; i++)
		granted += lk_lock_granted(lks[i]);
	CHECK_EQ(granted, N);
	CHECK_EQ(lk_wait_batch(lks, N), 0);
	CHECK_EQ(lk_unlock_batch(lks, N, 0), N);
	settle();
	sim_fini();
}

/* A frame of @type with @n records of @size at @recs from node 1 to node
 * 2, delivered at once; returns the bad frames node 2 counted. */
static uint64_t rx_on_2(unsigned type, const void *recs, unsigned n,
			size_t size)
{
	uint8_t buf[sizeof(struct lk_hdr) + 16 * sizeof(uint64_t)];
	struct lk_hdr *h = (struct lk_hdr *)buf;
	uint64_t before = node[2]->stats.bad_frames;

	if (n * size > sizeof(buf) - sizeof(*h))
		return UINT64_MAX;
	memset(h, 0, sizeof(*h));
	h->magic = LK_MAGIC;
	h->version = LK_VERSION;
	h->type = (uint8_t)type;
	h->count = (uint16_t)n;
	h->length = (uint32_t)(sizeof(*h) + n * size);
	h->sender = 1;
	h->gen = node[2]->gen;
	memcpy(buf + sizeof(*h), recs, n * size);
	pthread_mutex_lock(&node[2]->mu);
	lk_core_rx(node[2], 1, buf, h->length);
	lk_out_flush(node[2]);
	pthread_mutex_unlock(&node[2]->mu);
	return node[2]->stats.bad_frames - before;
}

/* A RUNREQ frame of @n slots from node 1 to node 2. */
static uint64_t rx_runreq(const uint64_t *slots, unsigned n)
{
	return rx_on_2(LK_M_RUNREQ, slots, n, sizeof(uint64_t));
}

/* An UNLOCKS record from node 1 to node 2, delivered at once; returns
 * the bad frames node 2 counted. */
static uint64_t rx_unlocks(uint64_t lkid, uint32_t count, uint32_t flags)
{
	struct lk_rec_unlocks u = {lkid, count, flags};

	return rx_on_2(LK_M_UNLOCKS, &u, 1, sizeof(u));
}

/* The unlock of a batch whose locks need no value block written back is
 * one 16-byte UNLOCKS record per master; node 2 then masters no lock of
 * node 1 any more, and an EX from node 2 is granted at once. */
static void test_unlock_batch_one_record(void)
{
	enum { N = 300 };
	static struct lk_name names[N];
	static struct lk_lock *lks[N];
	struct lk_stats s0, s1;
	struct lk_lock *ex;

	start_cluster(2);
	for (int i = 0; i < N; i++)
		names[i] = nm(600000 + (uint64_t)i);
	make_master(2, names, N, lks);
	/* the first batch looks the masters up, so its lkids are in the
	 * order the lookups went out; the second's follow the array */
	for (int run = 0; run < 2; run++) {
		CHECK(lk_lock_batch(node[1], names, N, LK_PR, 0, NULL, NULL,
				    lks) >= 0);
		settle();
		CHECK_EQ(lk_wait_batch(lks, N), 0);
		if (run == 0)
			CHECK_EQ(lk_unlock_batch(lks, N, 0), N);
		settle();
	}
	lk_ls_stats(node[1], &s0);
	CHECK_EQ(lk_unlock_batch(lks, N, 0), N);
	lk_ls_stats(node[1], &s1);
	CHECK_EQ(s1.peer[2].frames_tx - s0.peer[2].frames_tx, 1);
	CHECK_EQ(s1.peer[2].bytes_tx - s0.peer[2].bytes_tx,
		 sizeof(struct lk_hdr) + sizeof(struct lk_rec_unlocks));
	settle();
	CHECK_EQ(node[2]->stats.bad_frames, 0);
	for (int i = 0; i < N; i += 37) {
		CHECK_EQ(lk_lock(node[2], &names[i], LK_EX, 0, NULL, NULL, &ex),
			 LK_GRANTED_NOW);
		CHECK_EQ(lk_unlock(ex, 0), 0);
	}
	sim_fini();
}

/* Malformed UNLOCKS: a count of 0, past LK_UNLOCKS_MAX or wrapping the
 * lkid, unknown flags: dropped and counted once; lkids node 2 has no
 * lock of: counted each, the known ones in the range still released. */
static void test_unlocks_malformed(void)
{
	struct lk_name n[3];
	struct lk_lock *lk[3], *ex;
	uint64_t first;

	start_cluster(2);
	for (int i = 0; i < 3; i++)
		n[i] = nm(700000 + (uint64_t)i);
	make_master(2, n, 3, lk);
	CHECK_EQ(rx_unlocks(1, 0, 0), 1);
	CHECK_EQ(rx_unlocks(1, LK_UNLOCKS_MAX + 1, 0), 1);
	CHECK_EQ(rx_unlocks(UINT64_MAX - 1, 5, 0), 1);
	CHECK_EQ(rx_unlocks(1, 1, 0x40), 1);
	CHECK_EQ(rx_unlocks(1ull << 50, 3, 0), 3); /* no such locks */
	for (int run = 0; run < 2; run++) { /* the second: masters known */
		CHECK(lk_lock_batch(node[1], n, 3, LK_PR, 0, NULL, NULL, lk) >=
		      0);
		settle();
		CHECK_EQ(lk_wait_batch(lk, 3), 0);
		if (run == 0)
			CHECK_EQ(lk_unlock_batch(lk, 3, 0), 3);
		settle();
	}
	first = lk[0]->lkid;
	REQUIRE(lk[1]->lkid == first + 1 && lk[2]->lkid == first + 2);
	/* the three and two unknown lkids after them */
	CHECK_EQ(rx_unlocks(first, 5, 0), 2);
	CHECK_EQ(lk_lock(node[2], &n[1], LK_EX, 0, NULL, NULL, &ex),
		 LK_GRANTED_NOW);
	CHECK_EQ(lk_unlock(ex, 0), 0);
	sim_fini();
}

/* Malformed runs (a count of 0, one past the frame's end, a header cut
 * short) are dropped with the rest of their frame and counted; the runs
 * before them in the frame are handled; a run with a bad mode or flags
 * is dropped alone and counted (each request here is refused:
 * node 2 masters no such name, and says so). */
static void test_runreq_malformed(void)
{
	struct lk_run_hdr r = {
	    .lkid = 1ull << 40, .count = 2, .type = 2, .mode = LK_PR};
	uint64_t s[16];
	unsigned long before;

	start_cluster(2);
	memcpy(s, &r, sizeof(r));
	s[3] = 900001;
	s[4] = 900002;
	CHECK_EQ(rx_runreq(s, 5), 0); /* well formed */
	r.count = 0;
	memcpy(s, &r, sizeof(r));
	CHECK_EQ(rx_runreq(s, 5), 1); /* count 0 */
	r.count = 3;
	memcpy(s, &r, sizeof(r));
	CHECK_EQ(rx_runreq(s, 5), 1); /* one past the end */
	CHECK_EQ(rx_runreq(s, 3), 1); /* a header and no number */
	r.count = 2;
	memcpy(s, &r, sizeof(r));
	r.count = 0xffffffffu;
	memcpy(&s[5], &r, sizeof(r));
	s[8] = 900003;
	before = frames_sent;
	CHECK_EQ(rx_runreq(s, 9), 1);	   /* a good run, then a bad one */
	CHECK_EQ(frames_sent - before, 1); /* the good one answered */
	/* a bad mode or bad flags drop that run only (its count is good):
	 * the run after it is still handled */
	r.count = 2;
	r.mode = LK_NMODES;
	memcpy(s, &r, sizeof(r));
	r.mode = LK_PR;
	memcpy(&s[5], &r, sizeof(r));
	s[8] = 900003;
	s[9] = 900004;
	before = frames_sent;
	CHECK_EQ(rx_runreq(s, 10), 1);
	CHECK_EQ(frames_sent - before, 1);
	r.flags = 0x80000000u;
	memcpy(s, &r, sizeof(r));
	before = frames_sent;
	CHECK_EQ(rx_runreq(s, 10), 1);
	CHECK_EQ(frames_sent - before, 1);
	r.mode = -1;
	r.flags = 0;
	memcpy(s, &r, sizeof(r));
	CHECK_EQ(rx_runreq(s, 5), 1);
	drop_link(&links[2][1]);
	sim_fini();
}

/* A batch bigger than one frame holds (65,535 slots): split over two
 * RUNREQ frames, a run in each, every lock granted, every grant counted. */
static void test_batch_split_frames(void)
{
	enum { N = 70000 };
	static struct lk_name names[N];
	static struct lk_lock *lks[N];
	struct lk_stats s0, s1;
	int granted = 0;

	start_cluster(2);
	for (int i = 0; i < N; i++)
		names[i] = nm(200000 + (uint64_t)i);
	make_master(2, names, N, lks);
	/* first batch looks the masters up; the second knows them */
	CHECK_EQ(lk_lock_batch(node[1], names, N, LK_PR, 0, NULL, NULL, lks),
		 0);
	settle();
	CHECK_EQ(lk_unlock_batch(lks, N, 0), N);
	settle();
	lk_ls_stats(node[1], &s0);
	CHECK_EQ(lk_lock_batch(node[1], names, N, LK_PR, 0, NULL, NULL, lks),
		 0);
	lk_ls_stats(node[1], &s1);
	/* 70000 requests of 8 bytes (RUNREQ: the names have no string
	 * part): two frames of at most 65,535 slots, one run header each */
	CHECK_EQ(s1.peer[2].frames_tx - s0.peer[2].frames_tx, 2);
	CHECK_EQ(s1.peer[2].records_tx - s0.peer[2].records_tx,
		 N + 2 * LK_RUN_HDR_SLOTS);
	settle();
	for (int i = 0; i < N; i++)
		granted += lk_lock_granted(lks[i]);
	REQUIRE(granted == N); /* else lk_wait_batch would sleep for ever */
	CHECK_EQ(lk_wait_batch(lks, N), 0);
	lk_ls_stats(node[1], &s1);
	CHECK_EQ(s1.type[2].c.grants_remote - s0.type[2].c.grants_remote, N);
	CHECK_EQ(s1.type[2].c.requests - s0.type[2].c.requests, N);
	CHECK_EQ(lk_unlock_batch(lks, N, 0), N);
	settle();
	sim_fini();
}

/* Half the names mastered here (granted inside the call), half on node
 * 2 (one REQUEST frame, granted by its replies); the stats tell them
 * apart. */
static void test_batch_mixed_local_remote(void)
{
	enum { N = 200 };
	static struct lk_name names[N], mine[N / 2], theirs[N / 2];
	static struct lk_lock *lks[N];
	struct lk_stats s0, s1;

	start_cluster(2);
	for (int i = 0; i < N / 2; i++) {
		mine[i] = nm(300000 + (uint64_t)i);
		theirs[i] = nm(310000 + (uint64_t)i);
		names[2 * i] = mine[i];
		names[2 * i + 1] = theirs[i];
	}
	make_master(1, mine, N / 2, lks);
	make_master(2, theirs, N / 2, lks);
	/* node 1 learns their masters (lookups), then forgets the locks */
	CHECK_EQ(
	    lk_lock_batch(node[1], theirs, N / 2, LK_PR, 0, NULL, NULL, lks),
	    0);
	settle();
	CHECK_EQ(lk_unlock_batch(lks, N / 2, 0), N / 2);
	settle();
	lk_ls_stats(node[1], &s0);
	CHECK_EQ(lk_lock_batch(node[1], names, N, LK_PR, 0, NULL, NULL, lks),
		 N / 2);
	for (int i = 0; i < N; i++)
		CHECK_EQ(lk_lock_granted(lks[i]), i % 2 == 0);
	lk_ls_stats(node[1], &s1);
	CHECK_EQ(s1.peer[2].frames_tx - s0.peer[2].frames_tx, 1);
	settle();
	for (int i = 0; i < N; i++)
		REQUIRE(lk_lock_granted(lks[i]));
	CHECK_EQ(lk_wait_batch(lks, N), 0);
	lk_ls_stats(node[1], &s1);
	CHECK_EQ(s1.type[2].c.grants_local - s0.type[2].c.grants_local, N / 2);
	CHECK_EQ(s1.type[2].c.grants_remote - s0.type[2].c.grants_remote,
		 N / 2);
	CHECK_EQ(lk_unlock_batch(lks, N, 0), N);
	settle();
	sim_fini();
}

/* Replies that return a value block are full REPLYs (56 bytes a
 * record); the other grants of a batch one GRANTS record (16 bytes) for
 * the whole range of consecutive lkids. */
static void test_batch_lvb_replies(void)
{
	enum { N = 20 };
	static struct lk_name names[N];
	static struct lk_lock *lks[N];
	struct lk_stats s0, s1;
	uint8_t v[LK_LVB_LEN];

	start_cluster(2);
	for (int i = 0; i < N; i++)
		names[i] = nm(330000 + (uint64_t)i);
	make_master(2, names, N, lks);
	REQUIRE(lk_lock_batch(node[2], names, N, LK_EX, LK_VALBLK, NULL, NULL,
			      lks) == N);
	for (int i = 0; i < N; i++) {
		memset(v, 'a' + i, sizeof(v));
		CHECK_EQ(lk_lvb_set(lks[i], v), 0);
	}
	CHECK_EQ(lk_unlock_batch(lks, N, 0), N);
	settle();
	CHECK_EQ(
	    lk_lock_batch(node[1], names, N, LK_PR, LK_VALBLK, NULL, NULL, lks),
	    0);
	settle();
	for (int i = 0; i < N; i++) {
		CHECK_EQ(lk_lvb_get(lks[i], v), 0);
		CHECK_EQ(v[LK_LVB_LEN - 1], 'a' + i);
	}
	CHECK_EQ(lk_unlock_batch(lks, N, 0), N);
	settle();
	lk_ls_stats(node[2], &s0);
	CHECK_EQ(lk_lock_batch(node[1], names, N, LK_PR, 0, NULL, NULL, lks),
		 0);
	settle();
	lk_ls_stats(node[2], &s1);
	CHECK_EQ(s1.peer[1].bytes_tx - s0.peer[1].bytes_tx,
		 sizeof(struct lk_hdr) + sizeof(struct lk_rec_grants));
	CHECK_EQ(s1.peer[1].records_tx - s0.peer[1].records_tx, 1);
	for (int i = 0; i < N; i++) /* lk_wait would sleep for ever here */
		REQUIRE(lk_lock_granted(lks[i]));
	CHECK_EQ(lk_wait_batch(lks, N), 0);
	CHECK_EQ(lk_unlock_batch(lks, N, 0), N);
	settle();
	sim_fini();
}

static int comp_ok, comp_canceled, comp_other;
static void count_comp(struct lk_lock *lk, int status, void *arg)
{
	(void)lk;
	(void)arg;
	if (status == 0)
		comp_ok++;
	else if (status == -ECANCELED)
		comp_canceled++;
	else
		comp_other++;
}
static const struct lk_lock_ops comp_ops = {count_comp, NULL};

/* One lock of a batch is blocked by another node's EX and cancelled
 * while the rest are granted: one completion callback per lock, the
 * cancelled one with -ECANCELED; the holder got one blocking callback.
 * Then lk_wait_batch reports a cancelled conversion. */
static void test_batch_cancel_midway(void)
{
	enum { N = 50, X = 25 };
	static struct lk_name names[N];
	static struct lk_lock *lks[N];
	struct lk_lock *ex, *two[2];
	int granted = 0;

	start_cluster(2);
	for (int i = 0; i < N; i++)
		names[i] = nm(320000 + (uint64_t)i);
	make_master(2, names, N, lks);
	bast_seen = 0;
	CHECK_EQ(lk_lock(node[2], &names[X], LK_EX, 0, &bast_ops, NULL, &ex),
		 LK_GRANTED_NOW);
	comp_ok = comp_canceled = comp_other = 0;
	CHECK_EQ(
	    lk_lock_batch(node[1], names, N, LK_PR, 0, &comp_ops, NULL, lks),
	    0);
	settle();
	CHECK_EQ(comp_ok, N - 1);
	CHECK_EQ(bast_seen, 1);
	CHECK(!lk_lock_granted(lks[X]));
	CHECK_EQ(lk_cancel(lks[X]), 0);
	settle();
	CHECK_EQ(comp_canceled, 1);
	CHECK_EQ(comp_other, 0);
	for (int i = 0; i < N; i++)
		if (i != X)
			granted += lk_lock_granted(lks[i]);
	CHECK_EQ(granted, N - 1);
	/* a conversion cancelled: the handle stays, lk_wait_batch says so */
	CHECK_EQ(lk_convert(lks[0], LK_EX, 0), 0);
	/* node 2 (the master) gets PR before the conversion arrives */
	CHECK_EQ(lk_lock(node[2], &names[0], LK_PR, 0, NULL, NULL, &two[1]),
		 LK_GRANTED_NOW);
	settle();
	CHECK_EQ(lk_cancel(lks[0]), 0);
	settle();
	two[0] = lks[0];
	REQUIRE(lk_lock_granted(two[0]) && lk_lock_granted(two[1]));
	CHECK_EQ(lk_wait_batch(two, 2), -ECANCELED);
	CHECK_EQ(lk_lock_mode(lks[0]), LK_PR);
	lks[X] = NULL; /* released itself after its completion */
	for (int i = 0; i < N; i++)
		if (lks[i] != NULL)
			CHECK_EQ(lk_unlock(lks[i], 0), 0);
	settle();
	CHECK(lk_lock_granted(two[1]));
	lk_unlock(two[1], 0);
	lk_unlock(ex, 0);
	settle();
	sim_fini();
}

static int recovered[NN + 1];
static int granted_after_recovery;

static void rec_cb(struct lk_ls *ls, uint32_t nodeid, void *arg)
{
	(void)arg;
	recovered[ls->nodeid] |= 1 << nodeid;
}

static void comp_check_recovered(struct lk_lock *lk, int status, void *arg)
{
	(void)status;
	granted_after_recovery = recovered[lk->ls->nodeid] != 0;
	(void)arg;
}
static const struct lk_lock_ops rec_ops = {comp_check_recovered, NULL};

static void kill_node(int n)
{
	alive[n] = 0;
	for (int i = 1; i <= NN; i++) {
		drop_link(&links[n][i]);
		drop_link(&links[i][n]);
	}
}

static void test_recovery_after_death(void)
{
	struct lk_name x, y;
	struct lk_lock *ex, *w, *pr;
	uint8_t v[LK_LVB_LEN] = {7};

	start_cluster(3);
	memset(recovered, 0, sizeof(recovered));
	for (int i = 1; i <= 3; i++)
		node[i]->recover = rec_cb;
	/* x: mastered by 3, 3 holds EX+LVB; y: mastered by 1, 3 holds PR */
	x = name_with_dir(3, 500);
	y = name_with_dir(1, 600);
	CHECK_EQ(lk_lock(node[3], &x, LK_EX, LK_VALBLK, NULL, NULL, &ex),
		 LK_GRANTED_NOW);
	CHECK_EQ(lk_lvb_set(ex, v), 0);
	CHECK_EQ(lk_convert(ex, LK_EX, 0), LK_GRANTED_NOW);
	CHECK_EQ(lk_lock(node[1], &y, LK_PR, 0, NULL, NULL, &pr),
		 LK_GRANTED_NOW);
	CHECK_EQ(lk_lock(node[3], &y, LK_PR, 0, NULL, NULL, &ex), 0);
	settle();
	CHECK_EQ(lk_lock(node[3], &x, LK_PW, LK_NOQUEUE, NULL, NULL, &ex),
		 -EAGAIN);
	granted_after_recovery = -1;
	CHECK_EQ(lk_lock(node[2], &x, LK_EX, LK_VALBLK, &rec_ops, NULL, &w), 0);
	settle();
	CHECK(!lk_lock_granted(w));
	kill_node(3);
	begin_gen(1, 2, mask_of(2), 1ull << 3);
	settle();
	CHECK_EQ(node[1]->rphase, 0);
	CHECK_EQ(node[2]->rphase, 0);
	CHECK(lk_lock_granted(w));
	CHECK_EQ(granted_after_recovery, 1);
	CHECK_EQ(recovered[1], 1 << 3);
	CHECK_EQ(recovered[2], 1 << 3);
	/* 3 held PW/EX: the value block is marked invalid */
	CHECK_EQ(lk_lvb_get(w, v), -ENODATA);
	CHECK_EQ(lk_convert(pr, LK_EX, 0), LK_GRANTED_NOW);
	sim_fini();
}

/* A master leaves cleanly: the LVB of a resource others hold only in CR
 * survives (HANDOFF), where a death would have made it invalid. */
static void test_clean_leave_hands_lvb_on(void)
{
	struct lk_name x;
	struct lk_lock *ex, *cr, *pr;
	uint8_t v[LK_LVB_LEN] = {9}, got[LK_LVB_LEN];

	start_cluster(3);
	x = name_with_dir(3, 700);
	CHECK_EQ(lk_lock(node[3], &x, LK_EX, LK_VALBLK, NULL, NULL, &ex),
		 LK_GRANTED_NOW);
	CHECK_EQ(lk_lvb_set(ex, v), 0);
	CHECK_EQ(lk_convert(ex, LK_NL, 0), LK_GRANTED_NOW); /* writes 9 */
	CHECK_EQ(lk_lock(node[1], &x, LK_CR, LK_VALBLK, NULL, NULL, &cr), 0);
	settle();
	CHECK(lk_lock_granted(cr));
	CHECK_EQ(lk_unlock(ex, 0), 0);
	/* node 3 leaves: releases, hands on, says LEAVE */
	pthread_mutex_lock(&node[3]->mu);
	lk_recover_handoff(node[3]);
	lk_out_flush(node[3]);
	pthread_mutex_unlock(&node[3]->mu);
	settle();
	kill_node(3);
	node[1]->left |= 1ull << 3;
	node[2]->left |= 1ull << 3;
	begin_gen(1, 2, mask_of(2), 0);
	settle();
	CHECK_EQ(node[1]->rphase, 0);
	CHECK_EQ(node[1]->stats.recoveries, 2);
	CHECK_EQ(lk_lock(node[2], &x, LK_PR, LK_VALBLK, NULL, NULL, &pr), 0);
	settle();
	REQUIRE(lk_lock_granted(pr));
	CHECK_EQ(lk_lvb_get(pr, got), 0);
	CHECK_EQ(got[0], 9);
	sim_fini();
}

/* ---- randomized property test ---- */

#define NRES 5
#define NCLI 3
enum { C_IDLE, C_WAIT, C_HOLD, C_CONV };
struct client {
	int node, state, res;
	struct lk_lock *lk;
	int cancel_sent;
};
static struct client cli[NN + 1][NCLI];
static uint32_t lvb_last[NRES];
static uint32_t lvb_counter;
static int prop_fail;

static void check_lvb_on_grant(struct client *c)
{
	uint8_t v[LK_LVB_LEN];
	uint32_t got;
	int mode = lk_lock_mode(c->lk);

	if (mode < LK_PR)
		return;
	if (lk_lvb_get(c->lk, v) != 0)
		return; /* invalid is allowed only after a death: none here */
	memcpy(&got, v, sizeof(got));
	if (getenv("SIMDBG"))
		printf("G res %d node %d lkid %llu mode %d got %u\n", c->res,
		       c->node, (unsigned long long)c->lk->lkid, mode, got);
	if (got != lvb_last[c->res]) {
		printf("stale LVB on res %d: %u != %u\n", c->res, got,
		       lvb_last[c->res]);
		prop_fail = 1;
	}
}

static void p_comp(struct lk_lock *lk, int status, void *arg)
{
	struct client *c = arg;

	if (getenv("SIMDBG"))
		printf("C cli %p node %d lkid %llu st %d status %d\n",
		       (void *)c, c->node, (unsigned long long)lk->lkid,
		       c->state, status);
	if (c->state == C_WAIT)
		c->state = status == 0 ? C_HOLD : C_IDLE;
	else if (c->state == C_CONV)
		c->state = C_HOLD;
	if (status == 0)
		check_lvb_on_grant(c);
	if (c->state == C_IDLE)
		c->lk = NULL;
}
static const struct lk_lock_ops p_ops = {p_comp, NULL};

/* While a conversion is pending a lock protects only what both modes
 * protect (the meet in the lattice): the master may already have
 * granted or applied the new mode. */
static int eff_mode(const struct lk_lock *lk)
{
	if (lk->state != LK_S_CONVERTING)
		return lk->grmode;
	for (int m = LK_EX; m > LK_NL; m--)
		if (lk_mode_covers(lk->grmode, m) &&
		    lk_mode_covers(lk->rqmode, m))
			return m;
	return LK_NL;
}

/* Append the effective modes held by node @i's locks on @res. */
static void collect_modes(struct lk_res *res, int i, int r, int *modes, int *n)
{
	for (struct lk_list *l = res->locks.next; l != &res->locks;
	     l = l->next) {
		struct lk_lock *lk = LK_CONTAINER(l, struct lk_lock, res_link);

		if ((lk->state != LK_S_GRANTED &&
		     lk->state != LK_S_CONVERTING) ||
		    *n >= 64)
			continue;
		if (getenv("SIMDBG"))
			printf("  res %d node %d lkid %llu st %d gr %d rq %d "
			       "cached %d\n",
			       r, i, (unsigned long long)lk->lkid, lk->state,
			       lk->grmode, lk->rqmode, lk->cached);
		modes[(*n)++] = eff_mode(lk);
	}
}

/* No two locks held anywhere on a resource are incompatible. */
static int check_safety(void)
{
	for (int r = 0; r < NRES; r++) {
		struct lk_name x = rname(r);
		int modes[64], n = 0;

		for (int i = 1; i <= NN; i++) {
			struct lk_res *res;

			if (!alive[i])
				continue;
			res = lk_res_find(node[i], &x, lk_name_hash(&x));
			if (res != NULL)
				collect_modes(res, i, r, modes, &n);
		}
		for (int a = 0; a < n; a++)
			for (int b = a + 1; b < n; b++)
				if (!lk_mode_compat(modes[a], modes[b])) {
					printf("res %d: %s and %s held\n", r,
					       lk_mode_name(modes[a]),
					       lk_mode_name(modes[b]));
					return -1;
				}
	}
	return 0;
}

static void write_lvb(struct client *c)
{
	uint8_t v[LK_LVB_LEN] = {0};
	uint32_t val = ++lvb_counter;

	if (lk_lock_mode(c->lk) < LK_PW)
		return;
	memcpy(v, &val, sizeof(val));
	if (lk_lvb_set(c->lk, v) == 0)
		lvb_last[c->res] = val;
	if (getenv("SIMDBG"))
		printf("W res %d node %d lkid %llu mode %d val %u\n", c->res,
		       c->node, (unsigned long long)c->lk->lkid,
		       lk_lock_mode(c->lk), val);
}

static void client_hold_step(struct client *c, int draining)
{
	int r = (int)(rnd() % 8), ret;

	if (draining || r < 3) {
		write_lvb(c); /* written back by unlock from PW/EX */
		ret =
		    lk_unlock(c->lk, !draining && r == 0 ? LK_UNLOCK_CACHE : 0);
		if (getenv("SIMDBG"))
			printf("U cli %p node %d lkid %llu cache %d ret %d\n",
			       (void *)c, c->node,
			       (unsigned long long)c->lk->lkid, r == 0, ret);
		if (ret == 0) {
			c->state = C_IDLE;
			c->lk = NULL;
		}
		return;
	}
	if (r < 6) {
		int mode = (int)(rnd() % LK_NMODES);

		if (lk_lvb_op(lk_lock_mode(c->lk), mode) == LK_LVB_WRITE)
			write_lvb(c);
		c->state = C_CONV;
		ret = lk_convert(c->lk, mode, rnd() % 4 == 0 ? LK_NOQUEUE : 0);
		if (ret != 0)
			c->state = C_HOLD; /* granted now or failed now */
		if (ret == LK_GRANTED_NOW)
			check_lvb_on_grant(c);
	}
}

static void client_step(struct client *c, int draining)
{
	int ret;

	switch (c->state) {
	case C_IDLE:
		if (draining)
			return;
		c->res = (int)(rnd() % NRES);
		{
			struct lk_name x = rname(c->res);
			unsigned fl = LK_VALBLK;

			if (rnd() % 5 == 0)
				fl |= LK_NOQUEUE;
			if (rnd() % 7 == 0)
				fl |= LK_NOQUEUE | LK_NOQUEUEBAST;
			c->state = C_WAIT;
			ret =
			    lk_lock(node[c->node], &x, (int)(rnd() % LK_NMODES),
				    fl, &p_ops, c, &c->lk);
		}
		if (getenv("SIMDBG") && ret >= 0)
			printf("L cli %p node %d lkid %llu ret %d\n", (void *)c,
			       c->node, (unsigned long long)c->lk->lkid, ret);
		if (ret == LK_GRANTED_NOW) {
			c->state = C_HOLD;
			check_lvb_on_grant(c);
		} else if (ret < 0) {
			c->state = C_IDLE;
			c->lk = NULL;
		}
		break;
	case C_HOLD:
		client_hold_step(c, draining);
		break;
	default:
		if (!draining && rnd() % 16 == 0)
			lk_cancel(c->lk);
		break;
	}
}

/* @kill_at: step at which node NN dies; @join_at: step at which it joins
 * (it is not there before); -1: never. */
static void random_run(int kill_at, int join_at)
{
	uint64_t seed = t_seed();
	int steps = 30000, rounds;

	rng = seed * 2654435761u + 1;
	memset(lvb_last, 0, sizeof(lvb_last));
	lvb_counter = 0;
	prop_fail = 0;
	start_cluster(join_at >= 0 ? NN - 1 : NN);
	for (int i = 1; i <= NN; i++)
		for (int k = 0; k < NCLI; k++)
			cli[i][k] = (struct client){i, C_IDLE, 0, NULL, 0};
	for (int s = 0; s < steps && !prop_fail; s++) {
		int what = (int)(rnd() % 10);

		int who = 1 + (int)(rnd() % NN);

		if (s == join_at) {
			/* node NN joins a cluster busy with locks */
			add_node(NN);
			begin_gen(1, 2, mask_of(NN), 0);
		}
		if (s == kill_at) {
			if (getenv("SIMDBG"))
				printf("KILL node %d at step %d\n", NN, s);
			/* node NN dies; node 1 coordinates generation 2 */
			kill_node(NN);
			for (int k = 0; k < NCLI; k++)
				cli[NN][k].state = C_IDLE;
			begin_gen(1, 2, mask_of(NN - 1), 1ull << NN);
		}
		if (what < 5)
			deliver_random();
		else if (what < 7)
			run_cbs(who);
		else if (alive[who])
			client_step(&cli[who][rnd() % NCLI], 0);
		if (check_safety() != 0) {
			printf("safety violated at step %d\n", s);
			prop_fail = 1;
		}
	}
	CHECK(!prop_fail);
	/* every request completes: drain */
	for (rounds = 0; rounds < 1000; rounds++) {
		int busy = 0;

		settle();
		for (int i = 1; i <= NN; i++)
			for (int k = 0; k < NCLI && alive[i]; k++) {
				client_step(&cli[i][k], 1);
				busy |= cli[i][k].state != C_IDLE;
			}
		CHECK(check_safety() == 0);
		if (!busy && pending_links() == 0)
			break;
	}
	CHECK(rounds < 1000);
	for (int i = 1; i <= NN; i++)
		for (int k = 0; k < NCLI; k++)
			if (cli[i][k].state != C_IDLE) {
				struct lk_lock *lk = cli[i][k].lk;

				printf("client %d.%d stuck in state %d: lkid "
				       "%llu state %d gr %d rq %d master %u "
				       "deferred %d\n",
				       i, k, cli[i][k].state,
				       (unsigned long long)lk->lkid, lk->state,
				       lk->grmode, lk->rqmode, lk->res->master,
				       lk->deferred_op);
				if (lk->res->master != (uint32_t)i) {
					struct lk_mst *m =
					    lk_mst_find(node[lk->res->master],
							(uint32_t)i, lk->lkid);

					printf("  at master: %s queue %d\n",
					       m ? "copy" : "NO copy",
					       m ? m->rq.queue : -1);
				}
			}
	for (int i = 1; i <= NN && alive[i]; i++) {
		CHECK_EQ(node[i]->rphase, 0);
		CHECK_EQ(node[i]->stats.bad_frames, 0);
		const struct lk_counts *c = &node[i]->stats.type[2].c;

		printf("node %d: grants local %llu remote %llu waits %llu\n", i,
		       (unsigned long long)c->grants_local,
		       (unsigned long long)c->grants_remote,
		       (unsigned long long)c->waits);
	}
	sim_fini();
}

static void test_random_property(void)
{
	random_run(-1, -1);
}

/* The same, with node 4 dying half-way: recovery under load. */
static void test_random_property_with_death(void)
{
	random_run(15000, -1);
}

/* The same, with node 4 joining half-way. */
static void test_random_property_with_join(void)
{
	random_run(-1, 15000);
}

/* ---- placement (PROTOCOL.md §5) ---- */

static uint64_t type_lookups(int who, int local)
{
	struct lk_stats st;

	lk_ls_stats(node[who], &st);
	return local ? st.type[2].c.lookups_local : st.type[2].c.lookups;
}

/* The directory node of a placed name is memv[(place - 1) % nmemb] on
 * every node, whatever its number; lk_place_node agrees without the
 * lockspace lock; names placed on their own node are mastered there
 * with no message at all (the create path of ucfs). */
static void test_place_directory(void)
{
	enum { N = 200 };
	static struct lk_lock *lks[N];
	static struct lk_name names[N];
	unsigned long before;

	start_cluster(3);
	for (uint32_t p = 1; p <= 7; p++) {
		uint32_t want = node[1]->memv[(p - 1) % 3];

		for (int i = 1; i <= 3; i++) {
			CHECK_EQ(lk_place_node(node[i], p), want);
			for (uint64_t k = 0; k < 50; k++) {
				struct lk_name x = pnm(1000 * p + k, p);

				CHECK_EQ(
				    lk_dir_node(node[i], &x, lk_name_hash(&x)),
				    want);
			}
		}
	}
	CHECK_EQ(lk_place_node(node[1], 0), 0);
	/* key 1 is node 1's: 200 new names, one at a time, then a batch
	 * of 200 more, cost node 1 no frame */
	before = frames_sent;
	for (int i = 0; i < N; i++) {
		names[i] = pnm(40000 + (uint64_t)i, 1);
		CHECK_EQ(
		    lk_lock(node[1], &names[i], LK_EX, 0, NULL, NULL, &lks[i]),
		    LK_GRANTED_NOW);
	}
	for (int i = 0; i < N; i++)
		names[i] = pnm(50000 + (uint64_t)i, 4); /* (4-1) % 3: node 1 */
	CHECK(lk_lock_batch(node[1], names, N, LK_EX, 0, NULL, NULL, lks) >= 0);
	for (int i = 0; i < N; i++)
		CHECK(lk_lock_granted(lks[i]));
	CHECK_EQ(frames_sent, before);
	CHECK_EQ(type_lookups(1, 1), 2 * N);
	CHECK_EQ(type_lookups(1, 0), 0);
	/* the same numbers placed by key 2 are other names (node 2's
	 * directory): node 1 looks them up over the network */
	names[0] = pnm(40000, 2);
	CHECK_EQ(lk_lock(node[1], &names[0], LK_EX, 0, NULL, NULL, &lks[0]), 0);
	settle();
	CHECK(lk_lock_granted(lks[0]));
	CHECK_EQ(type_lookups(1, 0), 1);
	sim_fini();
}

/*
 * A node reading another's objects (placed names whose directory is
 * the owner, node 2) makes the owner master them; once the reader
 * gives them up, the owner's resources go on its toss list and obey
 * its bound like any other (PROTOCOL.md §5, toss list): 3 stay. The
 * reader, whose own resources still name node 2 as master, locks the
 * ten again: the seven node 2 freed are refused "not master", looked
 * up again and mastered again by the directory, so every one has one
 * master (node 2's NOQUEUE EX is refused beside the reader's PR).
 */
static void test_toss_placed_master(void)
{
	enum { N = 10 };
	static struct lk_lock *lks[N];
	struct lk_stats st;
	struct lk_lock *ex;

	start_cluster(2);
	lk_ls_set_toss_max(node[2], 3);
	for (int i = 0; i < N; i++) {
		struct lk_name x = pnm(60000 + (uint64_t)i, 2); /* node 2's */

		CHECK(lk_lock(node[1], &x, LK_PR, 0, NULL, NULL, &lks[i]) >= 0);
	}
	settle();
	lk_ls_stats(node[2], &st);
	CHECK_EQ(st.resources, N);
	CHECK_EQ(st.placed_mastered, N);
	for (int i = 0; i < N; i++)
		CHECK_EQ(lk_unlock(lks[i], 0), 0);
	settle();
	lk_ls_stats(node[2], &st);
	CHECK_EQ(st.tossed, N);
	pthread_mutex_lock(&node[2]->mu);
	lk_core_tick(node[2], lk_now_ns());
	lk_out_flush(node[2]);
	pthread_mutex_unlock(&node[2]->mu);
	settle();
	lk_ls_stats(node[2], &st);
	CHECK_EQ(st.resources, 3);
	CHECK_EQ(st.toss_freed, N - 3);
	for (int i = 0; i < N; i++) {
		struct lk_name x = pnm(60000 + (uint64_t)i, 2);

		CHECK(lk_lock(node[1], &x, LK_PR, 0, NULL, NULL, &lks[i]) >= 0);
	}
	settle();
	for (int i = 0; i < N; i++) {
		struct lk_name x = pnm(60000 + (uint64_t)i, 2);

		CHECK(lk_lock_granted(lks[i]));
		CHECK_EQ(
		    lk_lock(node[2], &x, LK_EX, LK_NOQUEUE, NULL, NULL, &ex),
		    -EAGAIN);
	}
	lk_ls_stats(node[2], &st);
	CHECK_EQ(st.resources, N);
	CHECK_EQ(st.placed_mastered, N + N - 3);
	for (int i = 0; i < N; i++)
		CHECK_EQ(lk_unlock(lks[i], 0), 0);
	settle();
	sim_fini();
}

/* Requests of placed names travel in RUNREQ runs that carry the key: the
 * master finds the very resources (node 1 holds them EX), so node 2's
 * NOQUEUE batch is refused, run by run (two keys: two runs). */
static void test_place_runs(void)
{
	enum { N = 100 };
	static struct lk_name names[2 * N];
	static struct lk_lock *held[2 * N], *lks[2 * N];
	int refused = 0;

	start_cluster(2);
	for (int i = 0; i < 2 * N; i++)
		names[i] = pnm(60000 + (uint64_t)(i % N), i < N ? 1 : 3);
	CHECK(lk_lock_batch(node[1], names, 2 * N, LK_EX, 0, NULL, NULL,
			    held) >= 0);
	settle();
	CHECK(lk_lock_batch(node[2], names, 2 * N, LK_PR, LK_NOQUEUE, NULL,
			    NULL, lks) >= 0);
	settle();
	for (int i = 0; i < 2 * N; i++)
		refused += lks[i] != NULL && !lk_lock_granted(lks[i]);
	CHECK_EQ(refused, 2 * N);
	CHECK_EQ(node[1]->nres, 2 * N);
	sim_fini();
}

/* A membership change moves a placed name's directory
 * (memv[(place - 1) % nmemb] of the new members) and recovery rebuilds
 * it there from the master: the next node to ask finds the master that
 * still holds the name EX, not a new one. Then a reused name (the
 * "inode number reused while another node caches its lock"): the old
 * user's cached lock refuses the new user's NOQUEUE try and is released
 * by the blocking callback, and the next try is granted. */
static void test_place_membership_and_reuse(void)
{
	struct lk_name x;
	struct lk_lock *ex, *t, *c;
	uint32_t p;

	start_cluster(3);
	/* a key whose directory is node 2 with 3 members */
	for (p = 1; lk_place_node(node[1], p) != 2; p++)
		;
	x = pnm(777, p);
	CHECK_EQ(lk_lock(node[3], &x, LK_EX, 0, NULL, NULL, &ex), 0);
	settle();
	CHECK(lk_lock_granted(ex));
	/* node 2 masters it (placed): its resource is the entry */
	CHECK_EQ(node[2]->ndir, 0);
	CHECK(lk_res_find(node[2], &x, lk_name_hash(&x)) != NULL &&
	      lk_res_find(node[2], &x, lk_name_hash(&x))->master == 2);
	kill_node(2);
	begin_gen(1, 2, (1ull << 1) | (1ull << 3), 1ull << 2);
	settle();
	CHECK_EQ(node[1]->rphase, 0);
	CHECK_EQ(lk_place_node(node[1], p), node[1]->memv[(p - 1) % 2]);
	CHECK_EQ(lk_place_node(node[3], p), lk_place_node(node[1], p));
	/* node 1 asks the rebuilt directory: node 3 masters, holds EX */
	CHECK_EQ(lk_lock(node[1], &x, LK_PR, LK_NOQUEUE, NULL, NULL, &t) ==
			 -EAGAIN ||
		     (settle(), !lk_lock_granted(t)),
		 1);
	/* reuse: node 3 keeps it cached (the number was freed), node 1
	 * tries EX with a blocking callback, as the create path does */
	CHECK_EQ(lk_unlock(ex, LK_UNLOCK_CACHE), 0);
	settle();
	t = NULL;
	if (lk_lock(node[1], &x, LK_EX, LK_NOQUEUE | LK_NOQUEUEBAST, NULL, NULL,
		    &t) == 0)
		settle();
	CHECK(t == NULL || !lk_lock_granted(t));
	settle();
	c = NULL;
	if (lk_lock(node[1], &x, LK_EX, LK_NOQUEUE, NULL, NULL, &c) == 0)
		settle();
	CHECK(c != NULL && lk_lock_granted(c));
	sim_fini();
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	rng = 88172645463325252ull;
	T_RUN(test_join_forms_membership);
	T_RUN(test_local_resource_no_message);
	T_RUN(test_remote_grant_and_bast);
	T_RUN(test_hold_cache);
	T_RUN(test_toss_list);
	T_RUN(test_toss_bound);
	T_RUN(test_batch_one_frame_per_master);
	T_RUN(test_short_and_long_requests);
	T_RUN(test_runreq_malformed);
	T_RUN(test_unlock_batch_one_record);
	T_RUN(test_unlocks_malformed);
	T_RUN(test_batch_split_frames);
	T_RUN(test_batch_mixed_local_remote);
	T_RUN(test_batch_cancel_midway);
	T_RUN(test_batch_lvb_replies);
	T_RUN(test_recovery_after_death);
	T_RUN(test_clean_leave_hands_lvb_on);
	T_RUN(test_place_directory);
	T_RUN(test_place_runs);
	T_RUN(test_toss_placed_master);
	T_RUN(test_place_membership_and_reuse);
	T_RUN(test_random_property);
	T_RUN(test_random_property_with_death);
	T_RUN(test_random_property_with_join);
	return t_done();
}
