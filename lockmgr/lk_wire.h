/*
 * lk_wire.h — the frames peers exchange (PROTOCOL.md is the reference).
 *
 * A frame is a struct lk_hdr followed by @count records of one fixed size
 * given by the frame type. Integers are little-endian; this implementation
 * runs on little-endian hosts only and maps records as C structs (their
 * layout has no implicit padding; static asserts check the sizes). Batching
 * falls out of the format: the sender appends records of the same type for
 * the same peer to one frame until it flushes.
 */
#ifndef UCFS_LK_WIRE_H
#define UCFS_LK_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "lockmgr/lk.h"

#define LK_MAGIC 0x53464355u /* "UCFS" */
#define LK_VERSION 8
#define LK_FRAME_MAX (1u << 20) /* bytes, header included */

enum lk_msg {
	LK_M_HELLO = 1,	   /* auth: node id, cluster hash, nonce */
	LK_M_AUTH,	   /* auth: HMAC over the peer's nonce */
	LK_M_HEARTBEAT,	   /* ctl: I am alive; my view */
	LK_M_LOOKUP,	   /* name: who masters this? (to dir node) */
	LK_M_LOOKUP_REPLY, /* name: the master (from dir node) */
	LK_M_REMOVE,	   /* name: master dropped an unused resource */
	LK_M_REQUEST,	   /* lock: new request (to master) */
	LK_M_CONVERT,	   /* lock: conversion (to master) */
	LK_M_UNLOCK,	   /* lock: unlock (to master) */
	LK_M_CANCEL,	   /* lock: cancel (to master) */
	LK_M_REPLY,	   /* reply: outcome of request/convert/cancel */
	LK_M_BAST,	   /* bast: blocking callback (to holder) */
	LK_M_START,	   /* ctl: coordinator starts recovery gen */
	LK_M_DONE,	   /* ctl: I finished recovery phase N of gen */
	LK_M_DIR_ADD,	   /* name: recovery, I master this */
	LK_M_RLOOKUP,	   /* name: recovery lookup */
	LK_M_RLOOKUP_REPLY,
	LK_M_RCOM,     /* rcom: recovery, one of my locks */
	LK_M_LEAVE,    /* ctl: I am leaving */
	LK_M_HANDOFF,  /* rcom: a leaving master's LVB for a holder */
	LK_M_SREPLY,   /* sreply: a REPLY that carries no LVB */
	LK_M_SREQUEST, /* v3 only (replaced by RUNREQ): not accepted */
	LK_M_GRANTS,   /* grants: consecutive lkids granted (to holder) */
	LK_M_RUNREQ,   /* slot: runs of REQUESTs on names with no string */
	LK_M_UNLOCKS,  /* unlocks: consecutive lkids released (to master) */
	/* POSIX record locks (lk_plock.c, PROTOCOL.md §14) */
	LK_M_PLOCK, /* plock: request (to the plock server) or its reply */
	LK_M_PRCOM, /* plock: recovery, one of my granted ranges */
	LK_M_NTYPES
};

struct lk_hdr {
	uint32_t magic;
	uint8_t version;
	uint8_t type;	 /* enum lk_msg */
	uint16_t count;	 /* records that follow */
	uint32_t length; /* whole frame, header included */
	uint32_t sender; /* node id */
	uint64_t seq;	 /* per link, starts at 1 */
	uint64_t gen;	 /* sender's membership generation */
};

/* REQUEST: a lock record without the LVB, which a new request never
 * carries (its fields are the first 48 bytes of struct lk_rec_lock) */
struct lk_rec_req {
	struct lk_name name;
	uint64_t lkid;
	uint32_t flags; /* LK_* request flags */
	int8_t mode;
	uint8_t has_lvb; /* 0 */
	uint8_t pad[2];
};

/*
 * RUNREQ: REQUESTs on names with no string part (slen 0, str zero, as
 * most names are: an inode number and a type). The records are 8-byte
 * slots holding runs: a run header (LK_RUN_HDR_SLOTS slots) followed by
 * @count name numbers, the requests of lkids lkid .. lkid + count - 1 on
 * names (type, num[i]) in one mode with one set of flags. A batch numbers
 * its lkids consecutively, so 1,000 requests are one run: 8 bytes a lock.
 */
struct lk_rec_slot {
	uint64_t v;
};

struct lk_run_hdr {
	uint64_t lkid;	/* of the first request of the run */
	uint32_t count; /* name numbers that follow: 1 .. the slots left */
	uint32_t flags; /* LK_* request flags */
	uint16_t type;	/* name.type */
	int8_t mode;
	uint8_t pad;
	uint32_t place; /* name.place */
};
#define LK_RUN_HDR_SLOTS (sizeof(struct lk_run_hdr) / sizeof(uint64_t))

/* CONVERT, UNLOCK, CANCEL */
struct lk_rec_lock {
	struct lk_name name;
	uint64_t lkid;
	uint32_t flags; /* LK_* request flags or LK_UNLOCK_* */
	int8_t mode;
	uint8_t has_lvb;
	uint8_t pad[2];
	uint8_t lvb[LK_LVB_LEN];
};

/* REPLY lvbf bits */
enum {
	LK_RF_LVB = 1,	     /* a value is carried */
	LK_RF_LVB_VALID = 2, /* ... and it is valid */
	LK_RF_QUEUED = 4,    /* REPLY: the request had to wait */
	LK_RF_LVB_WB = 8,    /* RCOM: write it back (a down-conversion
				settled during recovery) */
};
#define LK_ST_NOTMASTER (-EREMCHG) /* REPLY status: look the master up */

struct lk_rec_reply {
	uint64_t lkid;
	int32_t status;
	int8_t mode; /* granted mode after the operation */
	uint8_t lvbf;
	uint8_t pad[2];
	uint64_t lvb_seq;
	uint8_t lvb[LK_LVB_LEN];
};

/* SREPLY: the first 16 bytes of a REPLY (lvbf: LK_RF_QUEUED only) */
struct lk_rec_sreply {
	uint64_t lkid;
	int32_t status;
	int8_t mode;
	uint8_t lvbf;
	uint8_t pad[2];
};

/* GRANTS: the requests of lkids lkid .. lkid + count - 1 were granted
 * in @mode with no LVB returned (status 0; lvbf: LK_RF_QUEUED only). A
 * batch's lkids are consecutive, so a batch granted at once is answered
 * by one record. */
struct lk_rec_grants {
	uint64_t lkid;
	uint32_t count; /* 1 .. LK_GRANTS_MAX */
	int8_t mode;
	uint8_t lvbf;
	uint8_t pad[2];
};
#define LK_GRANTS_MAX 65536u /* what a 1 MiB frame of SREPLYs covers */

/* UNLOCKS: the holder released its locks lkid .. lkid + count - 1 (all
 * mastered by the receiver), none of them writing a value block back
 * (those go as UNLOCK records). An unlock batch of a lock batch is one
 * record, as its GRANTS was. */
struct lk_rec_unlocks {
	uint64_t lkid;
	uint32_t count; /* 1 .. LK_UNLOCKS_MAX */
	uint32_t flags; /* 0 or LK_UNLOCK_IVLVB */
};
#define LK_UNLOCKS_MAX 65536u

/* BAST: @node is the node whose request wants @mode (version 8; 7 had
 * padding there). 0 is never a node id: "not known". */
struct lk_rec_bast {
	uint64_t lkid;
	int8_t mode;
	uint8_t pad[3];
	uint32_t node;
};

/* LOOKUP, LOOKUP_REPLY, REMOVE, DIR_ADD, RLOOKUP, RLOOKUP_REPLY */
struct lk_rec_name {
	struct lk_name name;
	uint32_t master;
	uint32_t pad;
};

struct lk_rec_rcom {
	struct lk_name name;
	uint64_t lkid;
	uint32_t flags;
	int8_t grmode;
	int8_t rqmode;
	uint8_t lvbf; /* LK_RF_LVB_VALID; LK_RF_LVB: carries a value */
	uint8_t pad;
	uint64_t lvb_seq;
	uint8_t lvb[LK_LVB_LEN];
};

/* HEARTBEAT, START, DONE, LEAVE */
struct lk_rec_ctl {
	uint64_t gen;
	uint64_t members;  /* bitmap */
	uint64_t dead;	   /* START: nodes that died (not left) */
	uint64_t prev;	   /* sender's last generation in force: members */
	uint64_t prev_gen; /* and number (0: none yet) */
	uint32_t phase;
	uint32_t nodeid;
};

/* PLOCK, PRCOM: one POSIX record-lock operation, reply or granted range
 * (lk_plock.c). Ranges are inclusive: [start, end]. */
struct lk_rec_plock {
	uint64_t ino;
	uint64_t owner; /* the lock owner on the sender's node */
	uint64_t start;
	uint64_t end;
	uint64_t reqid; /* the requester's id of the request */
	uint32_t pid;	/* the owner's process (GETLK reply: holder's) */
	int32_t status; /* reply: 0 or -errno */
	uint32_t node;	/* GETLK reply: the holder's node */
	uint8_t op;	/* enum lk_plock_op, or LK_PL_CANCEL / LK_PL_REPLY */
	uint8_t type;	/* LK_PL_RD, LK_PL_WR, LK_PL_UN */
	uint8_t flags;	/* LK_PL_WAIT */
	uint8_t pad;
};

struct lk_rec_hello {
	uint32_t nodeid;
	uint32_t to;
	uint64_t cluster_hash;
	uint64_t incarnation; /* random per lk_ls_open: spots a restart */
	uint8_t nonce[32];
};

struct lk_rec_auth {
	uint8_t mac[32];
};

/* Record size of @type, 0 if unknown. */
size_t lk_wire_recsize(unsigned type);
const char *lk_wire_name(unsigned type);
/* Validate a complete frame of @len bytes whose header claims @len.
 * 0, or -EPROTO with *why set to a static reason. Does not check the
 * sender (the transport knows who authenticated). */
int lk_wire_check(const void *frame, size_t len, const char **why);
/* Validate one name (slen; any placement key). 0 or -EPROTO. */
int lk_wire_check_name(const struct lk_name *n);

#endif /* UCFS_LK_WIRE_H */
