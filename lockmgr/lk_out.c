/*
 * lk_out.c — framed output: the records every part of the core sends to a
 * peer are appended to that peer's open frame (ls->out[node]; a frame
 * goes on while its records are of one type) and go out at the next
 * flush (lk_out_flush: at the end of every API call that sends, and of
 * every network thread turn), so a burst of records to one node costs
 * one frame and one system call. Requests of numeric names travel as
 * RUNREQ runs (lk_out_run_request). Under ls->mu (lk_internal.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lockmgr/lk_internal.h"

/* The open frame's header gets its count and length only here: a batch
 * appends thousands of records and the header's cache line is long gone
 * by the end. */
static void close_frame(struct lk_ls *ls, uint32_t node)
{
	struct lk_outbuf *ob = &ls->out[node];
	struct lk_hdr *h;

	if (!ob->open)
		return;
	h = (struct lk_hdr *)(ob->buf + ob->hdr_off);
	h->count = ob->count;
	h->length = (uint32_t)(ob->len - ob->hdr_off);
	lk_stats_peer_tx(ls, node, h->length, h->count);
	ob->open = 0;
}

/* Close every open frame: records added from now on start new frames
 * (stamped with the current generation). */
void lk_out_seal(struct lk_ls *ls)
{
	for (uint64_t d = ls->out_dirty; d != 0; d &= d - 1)
		close_frame(ls, (uint32_t)__builtin_ctzll(d));
}

static int out_grow(struct lk_outbuf *ob, size_t need)
{
	size_t cap = ob->cap ? ob->cap * 2 : 4096;
	uint8_t *nb;

	while (cap < need)
		cap *= 2;
	nb = realloc(ob->buf, cap);
	if (nb == NULL)
		return -ENOMEM;
	ob->buf = nb;
	ob->cap = cap;
	return 0;
}

static void open_frame(struct lk_ls *ls, uint32_t node, unsigned type)
{
	struct lk_outbuf *ob = &ls->out[node];
	struct lk_hdr *h = (struct lk_hdr *)(ob->buf + ob->len);

	memset(h, 0, sizeof(*h));
	h->magic = LK_MAGIC;
	h->version = LK_VERSION;
	h->type = (uint8_t)type;
	h->sender = ls->nodeid;
	h->seq = ++ob->seq;
	h->gen = ls->gen;
	ob->hdr_off = ob->len;
	ob->len += sizeof(*h);
	ob->open = 1;
	ob->type = (uint8_t)type;
	ob->count = 0;
	ob->run_off = 0;
	ls->out_dirty |= 1ull << node;
}

void *lk_out_addn(struct lk_ls *ls, uint32_t node, unsigned type, unsigned n)
{
	size_t rs = lk_wire_recsize(type) * n;
	struct lk_outbuf *ob;
	void *rec;

	if (node == 0 || node >= LK_MAX_NODES || node == ls->nodeid)
		return NULL;
	ob = &ls->out[node];
	if (ob->open && (ob->type != type || ob->count > UINT16_MAX - n ||
			 ob->len - ob->hdr_off + rs > LK_FRAME_MAX))
		close_frame(ls, node);
	if (ob->len + sizeof(struct lk_hdr) + rs > ob->cap &&
	    out_grow(ob, ob->len + sizeof(struct lk_hdr) + rs) != 0)
		return NULL;
	if (!ob->open)
		open_frame(ls, node, type);
	rec = ob->buf + ob->len;
	memset(rec, 0, rs);
	ob->len += rs;
	ob->count += n;
	return rec;
}

void *lk_out_add(struct lk_ls *ls, uint32_t node, unsigned type)
{
	return lk_out_addn(ls, node, type, 1);
}

void lk_out_flush_node(struct lk_ls *ls, uint32_t node)
{
	struct lk_outbuf *ob = &ls->out[node];

	ls->out_dirty &= ~(1ull << node);
	close_frame(ls, node);
	if (ob->len > 0)
		ls->xp.xmit(ls->xp.ctx, node, ob->buf, ob->len);
	ob->len = 0;
}

void lk_out_flush(struct lk_ls *ls)
{
	if (!lk_list_empty(&ls->deferred) && lk_traffic_ok(ls))
		lk_core_kick_deferred(ls);
	while (ls->out_dirty != 0)
		lk_out_flush_node(ls, (uint32_t)__builtin_ctzll(ls->out_dirty));
}

/* The request of new lock @lkid in @mode with @flags on @res, a name with
 * no string part, to its remote master: one slot more in the open run
 * when it continues it (the next lkid, same type, mode and flags), else a
 * new run header and the slot. */
void lk_out_run_request(struct lk_ls *ls, const struct lk_res *res,
			uint64_t lkid, int mode, uint32_t flags)
{
	uint32_t node = res->master;
	struct lk_outbuf *ob = &ls->out[node];
	struct lk_run_hdr *h;
	uint64_t *slot;

	if (node == 0 || node >= LK_MAX_NODES || node == ls->nodeid)
		return;
	h = ob->run_off != 0 && ob->open && ob->type == LK_M_RUNREQ
		? (struct lk_run_hdr *)(ob->buf + ob->run_off)
		: NULL;
	if (h != NULL && h->lkid + h->count == lkid &&
	    h->type == res->name.type && h->place == res->name.place &&
	    h->mode == mode && h->flags == flags && ob->count < UINT16_MAX &&
	    ob->len - ob->hdr_off + sizeof(*slot) <= LK_FRAME_MAX &&
	    (ob->len + sizeof(*slot) <= ob->cap ||
	     out_grow(ob, ob->len + sizeof(*slot)) == 0)) {
		/* the run goes on in this frame: no new record header */
		h = (struct lk_run_hdr *)(ob->buf + ob->run_off);
		memcpy(ob->buf + ob->len, &res->name.num, sizeof(*slot));
		ob->len += sizeof(*slot);
		ob->count++;
		h->count++;
		return;
	}
	h = lk_out_addn(ls, node, LK_M_RUNREQ, LK_RUN_HDR_SLOTS + 1);
	if (h == NULL)
		return;
	ob->run_off = (size_t)((uint8_t *)h - ob->buf);
	h->lkid = lkid;
	h->count = 1;
	h->flags = flags;
	h->type = res->name.type;
	h->place = res->name.place;
	h->mode = (int8_t)mode;
	slot = (uint64_t *)(h + 1);
	*slot = res->name.num;
}
