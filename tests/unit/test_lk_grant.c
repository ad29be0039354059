/*
 * test_lk_grant.c — the pure grant engine driven directly: every mode
 * pair, conversions up and down, queue order, NOQUEUE (+BAST), cancel,
 * conversion deadlock, LVB rules, recovery hold. No threads, no sockets.
 */
#include <errno.h>

#include "lockmgr/lk_grant.h"
#include "tests/unit/harness.h"

#define MAXEV 64
struct ev {
	char kind; /* 'g' grant outcome, 'b' blocking callback */
	struct lk_rq *rq;
	int val;
	uint32_t from; /* 'b': the node that wants the mode */
};
static struct ev evs[MAXEV];
static int nev;

static void on_grant(void *ctx, struct lk_rsq *q, struct lk_rq *rq, int st)
{
	(void)ctx;
	(void)q;
	if (nev < MAXEV)
		evs[nev++] = (struct ev){'g', rq, st, 0};
}

static void on_bast(void *ctx, struct lk_rsq *q, struct lk_rq *rq, int mode,
		    uint32_t from)
{
	(void)ctx;
	(void)q;
	if (nev < MAXEV)
		evs[nev++] = (struct ev){'b', rq, mode, from};
}

static const struct lk_grant_out out = {on_grant, on_bast, NULL};

/* Was there an event kind/rq/val? Consumes nothing. */
static int has(char kind, struct lk_rq *rq, int val)
{
	for (int i = 0; i < nev; i++)
		if (evs[i].kind == kind && evs[i].rq == rq && evs[i].val == val)
			return 1;
	return 0;
}

/* The node named by the last blocking callback to @rq, 0 if none. */
static uint32_t bast_from(struct lk_rq *rq)
{
	uint32_t from = 0;

	for (int i = 0; i < nev; i++)
		if (evs[i].kind == 'b' && evs[i].rq == rq)
			from = evs[i].from;
	return from;
}

static struct lk_rsq q;
static struct lk_rq r[8];

static void reset(void)
{
	lk_rsq_init(&q);
	for (int i = 0; i < 8; i++)
		lk_rq_init(&r[i], (uint32_t)i + 1, (uint64_t)i + 100, NULL);
	nev = 0;
}

/* Written out independently of lk_mode.c on purpose. */
static const char *const expect_compat[6] = {
    /* NL CR CW PR PW EX  (held) */
    "111111", /* NL wanted */
    "111110", /* CR */
    "111000", /* CW */
    "110100", /* PR */
    "110000", /* PW */
    "100000", /* EX */
};

static void test_every_mode_pair(void)
{
	for (int held = 0; held < LK_NMODES; held++) {
		for (int want = 0; want < LK_NMODES; want++) {
			reset();
			lk_grant_request(&q, &r[0], held, 0, &out);
			REQUIRE(has('g', &r[0], 0));
			nev = 0;
			lk_grant_request(&q, &r[1], want, LK_NOQUEUE, &out);
			int ok = expect_compat[want][held] == '1';
			CHECK_EQ(has('g', &r[1], 0), ok);
			CHECK_EQ(has('g', &r[1], -EAGAIN), !ok);
			CHECK_EQ(lk_mode_compat(want, held), ok);
			CHECK_EQ(nev, 1); /* no bast without NOQUEUEBAST */
			CHECK(lk_grant_check(&q) == 0);
		}
	}
}

static void test_queued_then_granted_on_unlock(void)
{
	reset();
	lk_grant_request(&q, &r[0], LK_EX, 0, &out);
	nev = 0;
	lk_grant_request(&q, &r[1], LK_PR, 0, &out);
	CHECK_EQ(r[1].queue, LK_Q_WAIT);
	CHECK(has('b', &r[0], LK_PR));
	CHECK_EQ(nev, 1);
	nev = 0;
	CHECK_EQ(lk_grant_unlock(&q, &r[0], NULL, 0, &out), 0);
	CHECK(has('g', &r[1], 0));
	CHECK_EQ(r[1].grmode, LK_PR);
	CHECK(lk_grant_check(&q) == 0);
}

static void test_fifo_no_starvation(void)
{
	reset();
	lk_grant_request(&q, &r[0], LK_PR, 0, &out);
	lk_grant_request(&q, &r[1], LK_EX, 0, &out); /* waits */
	nev = 0;
	/* compatible with the holder, but must queue behind the EX */
	lk_grant_request(&q, &r[2], LK_PR, 0, &out);
	CHECK_EQ(r[2].queue, LK_Q_WAIT);
	CHECK_EQ(nev, 0);
	lk_grant_unlock(&q, &r[0], NULL, 0, &out);
	CHECK(has('g', &r[1], 0));
	CHECK(!has('g', &r[2], 0));
	CHECK(has('b', &r[1], LK_PR));
	nev = 0;
	lk_grant_unlock(&q, &r[1], NULL, 0, &out);
	CHECK(has('g', &r[2], 0));
	CHECK(lk_grant_check(&q) == 0);
}

static void test_convert_queue_first(void)
{
	reset();
	lk_grant_request(&q, &r[0], LK_PR, 0, &out);
	lk_grant_request(&q, &r[1], LK_PR, 0, &out);
	lk_grant_request(&q, &r[2], LK_EX, 0, &out); /* waits */
	nev = 0;
	CHECK_EQ(lk_grant_convert(&q, &r[0], LK_EX, 0, NULL, &out), 0);
	CHECK_EQ(r[0].queue, LK_Q_CONVERT);
	/* r[1] already got a blocking callback for EX from the waiter */
	CHECK_EQ(r[1].bastmode, LK_EX);
	nev = 0;
	lk_grant_unlock(&q, &r[1], NULL, 0, &out);
	CHECK(has('g', &r[0], 0));
	CHECK(!has('g', &r[2], 0));
	CHECK_EQ(r[0].grmode, LK_EX);
	/* down-conversion: immediate, and lets the waiter in */
	nev = 0;
	lk_grant_convert(&q, &r[0], LK_NL, 0, NULL, &out);
	CHECK(has('g', &r[0], 0));
	CHECK(has('g', &r[2], 0));
	CHECK(lk_grant_check(&q) == 0);
	/* convert of something not granted */
	CHECK_EQ(lk_grant_convert(&q, &r[5], LK_EX, 0, NULL, &out), -EBUSY);
}

static void test_convert_up_immediate(void)
{
	reset();
	lk_grant_request(&q, &r[0], LK_CR, 0, &out);
	lk_grant_request(&q, &r[1], LK_CR, 0, &out);
	nev = 0;
	lk_grant_convert(&q, &r[0], LK_PW, 0, NULL, &out);
	CHECK(has('g', &r[0], 0));
	CHECK_EQ(r[0].grmode, LK_PW);
	nev = 0;
	lk_grant_convert(&q, &r[1], LK_EX, LK_NOQUEUE, NULL, &out);
	CHECK(has('g', &r[1], -EAGAIN));
	CHECK_EQ(r[1].grmode, LK_CR);
	CHECK_EQ(r[1].queue, LK_Q_GRANT);
	CHECK(lk_grant_check(&q) == 0);
}

static void test_noqueue_bast(void)
{
	reset();
	lk_grant_request(&q, &r[0], LK_PR, 0, &out);
	lk_grant_request(&q, &r[1], LK_PR, 0, &out);
	nev = 0;
	lk_grant_request(&q, &r[2], LK_EX, LK_NOQUEUE | LK_NOQUEUEBAST, &out);
	CHECK(has('g', &r[2], -EAGAIN));
	CHECK(has('b', &r[0], LK_EX));
	CHECK(has('b', &r[1], LK_EX));
	CHECK_EQ(nev, 3);
	/* the same mode again: no repeated blocking callback */
	nev = 0;
	lk_grant_request(&q, &r[3], LK_EX, LK_NOQUEUE | LK_NOQUEUEBAST, &out);
	CHECK_EQ(nev, 1);
	CHECK_EQ(r[2].queue, LK_Q_NONE);
	CHECK(lk_grant_check(&q) == 0);
}

static void test_cancel(void)
{
	reset();
	lk_grant_request(&q, &r[0], LK_EX, 0, &out);
	lk_grant_request(&q, &r[1], LK_EX, 0, &out);
	lk_grant_request(&q, &r[2], LK_CR, 0, &out);
	nev = 0;
	CHECK_EQ(lk_grant_cancel(&q, &r[1], &out), 0);
	CHECK(has('g', &r[1], -ECANCELED));
	CHECK_EQ(r[1].queue, LK_Q_NONE);
	CHECK_EQ(r[2].queue, LK_Q_WAIT); /* still blocked by the EX */
	CHECK_EQ(lk_grant_cancel(&q, &r[1], &out), -EALREADY);
	CHECK_EQ(lk_grant_cancel(&q, &r[0], &out), -EALREADY);
	/* cancel a conversion: back to its grmode */
	lk_grant_unlock(&q, &r[0], NULL, 0, &out);
	CHECK_EQ(r[2].grmode, LK_CR);
	lk_grant_request(&q, &r[3], LK_CR, 0, &out);
	lk_grant_convert(&q, &r[3], LK_EX, 0, NULL, &out);
	CHECK_EQ(r[3].queue, LK_Q_CONVERT);
	nev = 0;
	CHECK_EQ(lk_grant_cancel(&q, &r[3], &out), 0);
	CHECK(has('g', &r[3], -ECANCELED));
	CHECK_EQ(r[3].grmode, LK_CR);
	CHECK_EQ(r[3].queue, LK_Q_GRANT);
	CHECK(lk_grant_check(&q) == 0);
}

static void test_conversion_deadlock(void)
{
	reset();
	lk_grant_request(&q, &r[0], LK_PR, 0, &out);
	lk_grant_request(&q, &r[1], LK_PR, 0, &out);
	nev = 0;
	lk_grant_convert(&q, &r[0], LK_EX, 0, NULL, &out);
	CHECK_EQ(r[0].queue, LK_Q_CONVERT);
	lk_grant_convert(&q, &r[1], LK_EX, 0, NULL, &out);
	/* the later converter is the victim and keeps PR */
	CHECK(has('g', &r[1], -EDEADLK));
	CHECK(!has('g', &r[0], -EDEADLK));
	CHECK_EQ(r[1].grmode, LK_PR);
	CHECK_EQ(r[0].queue, LK_Q_CONVERT);
	nev = 0;
	lk_grant_unlock(&q, &r[1], NULL, 0, &out);
	CHECK(has('g', &r[0], 0));
	CHECK_EQ(r[0].grmode, LK_EX);
	CHECK(lk_grant_check(&q) == 0);
}

static void test_no_false_deadlock(void)
{
	/* several converters blocked without a cycle: nobody is a victim */
	reset();
	lk_grant_request(&q, &r[0], LK_CR, 0, &out);
	lk_grant_request(&q, &r[1], LK_CR, 0, &out);
	lk_grant_request(&q, &r[2], LK_CR, 0, &out);
	lk_grant_convert(&q, &r[0], LK_CW, 0, NULL, &out); /* granted */
	lk_grant_convert(&q, &r[1], LK_PR, 0, NULL, &out); /* blocked by CW */
	CHECK_EQ(r[1].queue, LK_Q_CONVERT);
	nev = 0;
	/* 2 wants EX: blocked by 0 and 1; 1 is not waiting for 2 */
	lk_grant_convert(&q, &r[2], LK_EX, 0, NULL, &out);
	CHECK_EQ(nev, 2); /* blocking callbacks for EX to 0 and 1 */
	CHECK(!has('g', &r[2], -EDEADLK));
	CHECK(!has('g', &r[1], -EDEADLK));
	nev = 0;
	lk_grant_convert(&q, &r[0], LK_EX, LK_NOQUEUE, NULL, &out);
	CHECK(has('g', &r[0], -EAGAIN));
	CHECK(lk_grant_check(&q) == 0);
}

static void test_lvb_rules(void)
{
	uint8_t v[LK_LVB_LEN];

	reset();
	memset(v, 0xab, sizeof(v));
	lk_grant_request(&q, &r[0], LK_EX, 0, &out);
	CHECK_EQ(r[0].lvbret, 1);
	/* EX -> PR writes back */
	lk_grant_convert(&q, &r[0], LK_PR, 0, v, &out);
	CHECK_EQ(q.lvb[0], 0xab);
	CHECK_EQ(q.lvb_seq, 1);
	/* PR -> NL does not write */
	memset(v, 0xcd, sizeof(v));
	lk_grant_convert(&q, &r[0], LK_NL, 0, v, &out);
	CHECK_EQ(q.lvb[0], 0xab);
	CHECK_EQ(r[0].lvbret, 0);
	/* a new PR is granted with the value returned */
	lk_grant_request(&q, &r[1], LK_PR, 0, &out);
	CHECK_EQ(r[1].lvbret, 1);
	/* unlock from PR does not write, from PW does */
	lk_grant_unlock(&q, &r[1], v, 0, &out);
	CHECK_EQ(q.lvb[0], 0xab);
	lk_grant_request(&q, &r[2], LK_PW, 0, &out);
	lk_grant_unlock(&q, &r[2], v, 0, &out);
	CHECK_EQ(q.lvb[0], 0xcd);
	CHECK_EQ(q.lvb_seq, 2);
	CHECK_EQ(q.lvb_valid, 1);
	lk_grant_request(&q, &r[3], LK_EX, 0, &out);
	lk_grant_unlock(&q, &r[3], NULL, 1, &out);
	CHECK_EQ(q.lvb_valid, 0);
	/* table spot checks */
	CHECK_EQ(lk_lvb_op(LK_PW, LK_EX), LK_LVB_RETURN);
	CHECK_EQ(lk_lvb_op(LK_EX, LK_PW), LK_LVB_WRITE);
	CHECK_EQ(lk_lvb_op(LK_CR, LK_NL), LK_LVB_NONE);
	CHECK_EQ(lk_lvb_op(-1, LK_NL), LK_LVB_RETURN);
}

static void test_recovery_hold(void)
{
	reset();
	q.hold = 1;
	lk_grant_request(&q, &r[0], LK_PR, 0, &out);
	CHECK_EQ(r[0].queue, LK_Q_WAIT);
	lk_grant_request(&q, &r[1], LK_EX, LK_NOEXP, &out);
	CHECK_EQ(r[1].queue, LK_Q_GRANT);
	q.hold = 0;
	lk_grant_pending(&q, &out);
	CHECK_EQ(r[0].queue, LK_Q_WAIT); /* EX still held */
	lk_grant_unlock(&q, &r[1], NULL, 0, &out);
	CHECK_EQ(r[0].queue, LK_Q_GRANT);
	CHECK(lk_grant_check(&q) == 0);
}

/* A NOQUEUE request in flight when recovery began is rebuilt into the
 * new master's queues (lk_grant_restore): once the master grants again
 * it must be answered "now or never", not left waiting behind a holder
 * that may never let go (two unmounting nodes hung on a slot lock). */
static void test_restored_noqueue_refused(void)
{
	reset();
	q.hold = 1;
	/* a holder; a request in flight; a conversion in flight; a
	 * request that may wait */
	lk_grant_restore(&q, &r[0], LK_EX, -1, 0);
	lk_grant_restore(&q, &r[1], -1, LK_EX, LK_NOQUEUE);
	lk_grant_restore(&q, &r[2], LK_NL, LK_EX, LK_NOQUEUE | LK_NOEXP);
	lk_grant_restore(&q, &r[3], -1, LK_PR, 0);
	q.hold = 0;
	lk_grant_pending(&q, &out);
	CHECK(has('g', &r[1], -EAGAIN));
	CHECK_EQ(r[1].queue, LK_Q_NONE);
	CHECK(has('g', &r[2], -EAGAIN));
	CHECK_EQ(r[2].queue, LK_Q_GRANT); /* keeps its NL */
	CHECK_EQ(r[2].grmode, LK_NL);
	CHECK_EQ(r[3].queue, LK_Q_WAIT);
	CHECK(!has('g', &r[3], -EAGAIN));
	CHECK(lk_grant_check(&q) == 0);
	/* grantable once the holder leaves: a restored NOQUEUE request
	 * that can be granted is granted */
	reset();
	q.hold = 1;
	lk_grant_restore(&q, &r[1], -1, LK_EX, LK_NOQUEUE);
	q.hold = 0;
	lk_grant_pending(&q, &out);
	CHECK(has('g', &r[1], 0));
	CHECK_EQ(r[1].queue, LK_Q_GRANT);
	CHECK(lk_grant_check(&q) == 0);
}

static void test_covers_and_names(void)
{
	CHECK(lk_mode_covers(LK_EX, LK_PR));
	CHECK(lk_mode_covers(LK_PW, LK_CW));
	CHECK(!lk_mode_covers(LK_PR, LK_CW));
	CHECK(!lk_mode_covers(LK_NL, LK_CR));
	CHECK(strcmp(lk_mode_name(LK_PW), "PW") == 0);
	CHECK(!lk_mode_compat(7, 0));
}

/* Every blocking callback names the node whose request wants the mode:
 * a waiter's, a converter's, a NOQUEUEBAST request's (r[i] is node i+1). */
static void test_bast_names_requester(void)
{
	reset();
	lk_grant_request(&q, &r[0], LK_EX, 0, &out);
	nev = 0;
	lk_grant_request(&q, &r[1], LK_PR, 0, &out); /* waits */
	CHECK(has('b', &r[0], LK_PR));
	CHECK_EQ(bast_from(&r[0]), 2);
	/* the waiter behind the head is not the cause */
	nev = 0;
	lk_grant_request(&q, &r[4], LK_EX, 0, &out);
	CHECK_EQ(nev, 0);
	lk_grant_unlock(&q, &r[0], NULL, 0, &out);
	CHECK(has('g', &r[1], 0));
	CHECK(has('b', &r[1], LK_EX));
	CHECK_EQ(bast_from(&r[1]), 5);
	lk_grant_unlock(&q, &r[1], NULL, 0, &out);
	lk_grant_unlock(&q, &r[4], NULL, 0, &out);
	CHECK(lk_grant_check(&q) == 0);

	/* a converter: r[2] PR -> EX blocked by r[3] PR */
	reset();
	lk_grant_request(&q, &r[2], LK_PR, 0, &out);
	lk_grant_request(&q, &r[3], LK_PR, 0, &out);
	nev = 0;
	lk_grant_convert(&q, &r[2], LK_EX, 0, NULL, &out);
	CHECK_EQ(r[2].queue, LK_Q_CONVERT);
	CHECK(has('b', &r[3], LK_EX));
	CHECK_EQ(bast_from(&r[3]), 3);
	CHECK(!has('b', &r[2], LK_EX));

	/* NOQUEUE with a blocking callback: still names the asker */
	reset();
	lk_grant_request(&q, &r[0], LK_PR, 0, &out);
	nev = 0;
	lk_grant_request(&q, &r[6], LK_EX, LK_NOQUEUE | LK_NOQUEUEBAST, &out);
	CHECK(has('g', &r[6], -EAGAIN));
	CHECK_EQ(bast_from(&r[0]), 7);
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	T_RUN(test_every_mode_pair);
	T_RUN(test_queued_then_granted_on_unlock);
	T_RUN(test_fifo_no_starvation);
	T_RUN(test_convert_queue_first);
	T_RUN(test_convert_up_immediate);
	T_RUN(test_noqueue_bast);
	T_RUN(test_bast_names_requester);
	T_RUN(test_cancel);
	T_RUN(test_conversion_deadlock);
	T_RUN(test_no_false_deadlock);
	T_RUN(test_lvb_rules);
	T_RUN(test_recovery_hold);
	T_RUN(test_restored_noqueue_refused);
	T_RUN(test_covers_and_names);
	return t_done();
}
