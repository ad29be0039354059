/*
 * lk_wire.c — frame sizes and validation. Every frame that reaches the
 * core has passed lk_wire_check(): known type, right version and magic,
 * length equal to header + count * record size, count >= 1.
 */
#include <errno.h>
#include <stddef.h>

#include "lockmgr/lk_wire.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "lk wire format is mapped on little-endian hosts only");
_Static_assert(sizeof(struct lk_name) == 32, "lk_name");
_Static_assert(sizeof(struct lk_hdr) == 32, "lk_hdr");
_Static_assert(sizeof(struct lk_rec_lock) == 80, "rec_lock");
_Static_assert(sizeof(struct lk_rec_req) == 48, "rec_req");
_Static_assert(sizeof(struct lk_rec_plock) == 56, "rec_plock");
_Static_assert(offsetof(struct lk_rec_req, mode) ==
		       offsetof(struct lk_rec_lock, mode) &&
		   offsetof(struct lk_rec_req, has_lvb) ==
		       offsetof(struct lk_rec_lock, has_lvb),
	       "a request is the head of a lock record");
_Static_assert(sizeof(struct lk_rec_sreply) == 16, "rec_sreply");
_Static_assert(sizeof(struct lk_run_hdr) == 24, "run_hdr");
_Static_assert(sizeof(struct lk_rec_slot) == 8, "rec_slot");
_Static_assert(sizeof(struct lk_rec_grants) == 16, "rec_grants");
_Static_assert(sizeof(struct lk_rec_unlocks) == 16, "rec_unlocks");
_Static_assert(offsetof(struct lk_rec_sreply, lvbf) ==
		   offsetof(struct lk_rec_reply, lvbf),
	       "a short reply is the head of a reply");
_Static_assert(sizeof(struct lk_rec_reply) == 56, "rec_reply");
_Static_assert(sizeof(struct lk_rec_bast) == 16, "rec_bast");
_Static_assert(sizeof(struct lk_rec_name) == 40, "rec_name");
_Static_assert(sizeof(struct lk_rec_rcom) == 88, "rec_rcom");
_Static_assert(sizeof(struct lk_rec_ctl) == 48, "rec_ctl");
_Static_assert(sizeof(struct lk_rec_hello) == 56, "rec_hello");
/* all sizes are multiples of 8: frames stay 8-byte aligned in a stream */
_Static_assert(sizeof(struct lk_rec_auth) % 8 == 0, "rec_auth");

static const struct {
	const char *name;
	size_t size;
} types[LK_M_NTYPES] = {
    [LK_M_HELLO] = {"HELLO", sizeof(struct lk_rec_hello)},
    [LK_M_AUTH] = {"AUTH", sizeof(struct lk_rec_auth)},
    [LK_M_HEARTBEAT] = {"HEARTBEAT", sizeof(struct lk_rec_ctl)},
    [LK_M_LOOKUP] = {"LOOKUP", sizeof(struct lk_rec_name)},
    [LK_M_LOOKUP_REPLY] = {"LOOKUP_REPLY", sizeof(struct lk_rec_name)},
    [LK_M_REMOVE] = {"REMOVE", sizeof(struct lk_rec_name)},
    [LK_M_REQUEST] = {"REQUEST", sizeof(struct lk_rec_req)},
    [LK_M_CONVERT] = {"CONVERT", sizeof(struct lk_rec_lock)},
    [LK_M_UNLOCK] = {"UNLOCK", sizeof(struct lk_rec_lock)},
    [LK_M_CANCEL] = {"CANCEL", sizeof(struct lk_rec_lock)},
    [LK_M_REPLY] = {"REPLY", sizeof(struct lk_rec_reply)},
    [LK_M_BAST] = {"BAST", sizeof(struct lk_rec_bast)},
    [LK_M_START] = {"START", sizeof(struct lk_rec_ctl)},
    [LK_M_DONE] = {"DONE", sizeof(struct lk_rec_ctl)},
    [LK_M_DIR_ADD] = {"DIR_ADD", sizeof(struct lk_rec_name)},
    [LK_M_RLOOKUP] = {"RLOOKUP", sizeof(struct lk_rec_name)},
    [LK_M_RLOOKUP_REPLY] = {"RLOOKUP_REPLY", sizeof(struct lk_rec_name)},
    [LK_M_RCOM] = {"RCOM", sizeof(struct lk_rec_rcom)},
    [LK_M_LEAVE] = {"LEAVE", sizeof(struct lk_rec_ctl)},
    [LK_M_HANDOFF] = {"HANDOFF", sizeof(struct lk_rec_rcom)},
    [LK_M_SREPLY] = {"SREPLY", sizeof(struct lk_rec_sreply)},
    [LK_M_GRANTS] = {"GRANTS", sizeof(struct lk_rec_grants)},
    [LK_M_RUNREQ] = {"RUNREQ", sizeof(struct lk_rec_slot)},
    [LK_M_UNLOCKS] = {"UNLOCKS", sizeof(struct lk_rec_unlocks)},
    [LK_M_PLOCK] = {"PLOCK", sizeof(struct lk_rec_plock)},
    [LK_M_PRCOM] = {"PRCOM", sizeof(struct lk_rec_plock)},
};

size_t lk_wire_recsize(unsigned type)
{
	return type < LK_M_NTYPES ? types[type].size : 0;
}

const char *lk_wire_name(unsigned type)
{
	if (type < LK_M_NTYPES && types[type].name != NULL)
		return types[type].name;
	return "UNKNOWN";
}

int lk_wire_check_name(const struct lk_name *n)
{
	return n->slen <= LK_NAME_STR ? 0 : -EPROTO;
}

int lk_wire_check(const void *frame, size_t len, const char **why)
{
	const struct lk_hdr *h = frame;
	size_t rs;

	*why = NULL;
	if (len < sizeof(*h))
		*why = "short frame";
	else if (h->magic != LK_MAGIC)
		*why = "bad magic";
	else if (h->version != LK_VERSION)
		*why = "unsupported version";
	else if ((rs = lk_wire_recsize(h->type)) == 0)
		*why = "unknown message type";
	else if (h->length != len || len > LK_FRAME_MAX)
		*why = "length mismatch";
	else if (h->count == 0 || sizeof(*h) + rs * h->count != len)
		*why = "frame of the wrong size for its type";
	return *why != NULL ? -EPROTO : 0;
}
