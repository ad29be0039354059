/*
 * fs_jrec.h — the cluster's agreement on checkpoint records (FORMAT.md
 * "Journal" and "Cluster locks": FS_LK_JREC/0).
 *
 * A checkpoint record is a plain write with no flush. Whose flush makes
 * it durable: that of the next node that writes home a block the
 * record's log holds an image of (it got the block's lock after the
 * record, and writes it home only after a commit, whose flush must cover
 * the record too). So node A's records are safe only if EVERY other node
 * that can write the device has a flush covering A's completed writes;
 * each node can only ask its own device (bd_flush_covers_all). The lock
 * makes the answers cluster-wide:
 *  - a node whose flush covers all (a "covering" node) holds the lock in
 *    PR while its journal writes records (fs_journal_set_records 1 once
 *    granted);
 *  - a node whose flush does not cover all holds it in CW for its whole
 *    mount, taken before the mount writes anything (fs_jrec_join). CW and
 *    PR conflict, CW and CW do not: any number of such nodes mount side
 *    by side, and none while a PR holder may still write records;
 *  - a PR holder gets the CW request's blocking callback; its thread
 *    turns its records off and flushes its device before it gives the PR
 *    up (fs_journal_set_records 0), so every record it wrote is durable
 *    before the CW is granted and the joiner writes anything. A failed
 *    flush calls conf.fail (fence: the PR then never leaves the node,
 *    the cluster recovers it);
 *  - the CW request waits at most conf.timeout_s (records_timeout=,
 *    MOUNT.md): a PR holder whose flush does not return would otherwise
 *    hold the mount for ever (a dead one is recovered, one whose device
 *    hangs loses its disk lease and fences itself: those end). Past it
 *    the request is cancelled and the mount fails with -ETIMEDOUT before
 *    writing anything; the holder, once its flush returns, gives the PR
 *    up and takes it again (no joiner waits then). Progress goes to the
 *    log (stderr) after 1 s and then every FS_JREC_LOG_MS;
 *  - a covering node asks PR as a new request with NOQUEUE only (a
 *    queued PR request would hold every later CW request back behind it,
 *    FIFO; a new request is refused while a CW is held or waiting): once
 *    when its journal starts (fs_jrec_start), then, while its records are
 *    off, from its own thread when woken, right after giving the PR up,
 *    and every conf.retry_ms (30 s) as a fallback;
 *  - the wake: while its records are off a covering node holds
 *    FS_LK_JREC/1 in PR (a fresh handle taken before each request for
 *    the PR: so a CW holder that leaves after it was granted wakes it,
 *    and one that left before was gone for the request). A CW holder
 *    that leaves cleanly (fs_jrec_stop) asks FS_LK_JREC/0 in NL with
 *    NOQUEUE (answered only after the master handled its unlock there),
 *    then FS_LK_JREC/1 in EX with NOQUEUE | NOQUEUEBAST: refused at once,
 *    its blocking callbacks wake the covering nodes, which ask for the
 *    PR again. A CW holder that dies wakes nobody: the cluster recovers
 *    it, and the fallback brings the records back within retry_ms.
 * Nothing is on disk and the lock has no value block: the lock manager's
 * grant state is the agreement, so it is recomputed by the nodes
 * themselves after any crash. A node that dies holds its mode until the
 * lock manager recovered it (after its journal was replayed). A ro node
 * writes nothing and takes no part (no fs_jrec at all).
 *
 * Threads: a covering node's thread asks for the PR (NOQUEUE: it waits
 * at most for the master's answer), holds the wake lock and gives the
 * PR up; the blocking callbacks only wake it. A leaving CW holder's
 * wake runs in fs_jrec_stop. No function here is called with a journal
 * handle or glock held.
 * Locking: r->mu protects the mode and counters; a leaf, but for the
 * join's lk_cancel of its CW request, made under it (r->mu -> ls->mu,
 * README row 2c: the completion must not release the handle between).
 */
#ifndef UCFS_FS_JREC_H
#define UCFS_FS_JREC_H

#include <stdint.h>

struct lk_ls;
struct fs_jrec;
struct fs_json;

/* Records off and not woken: the PR is asked again after (fallback). */
#define FS_JREC_RETRY_MS 30000u
#define FS_JREC_LOG_MS 5000u   /* a waiting join logs this often */

/*
 * Test hooks, read from the environment by fs_jrec_new (documented in
 * MOUNT.md "Mixing device paths"; no product use): while the file named
 * by UCFS_JREC_HOLD exists, giving the PR up waits after the records-off
 * flush returned, as a flush that does not return; while the file named
 * by UCFS_JREC_FAIL exists, that flush is taken as failed (-EIO).
 */
#define FS_JREC_ENV_HOLD "UCFS_JREC_HOLD"
#define FS_JREC_ENV_FAIL "UCFS_JREC_FAIL"

struct fs_jrec_conf {
	struct lk_ls *ls;   /* the lockspace */
	int covers;	    /* bd_flush_covers_all(this node's device) */
	unsigned retry_ms;  /* 0: FS_JREC_RETRY_MS */
	unsigned timeout_s; /* the CW join waits at most this long (0: no
			       bound) */
	uint32_t node;	    /* this node's id (log messages) */
	/* Records on (1) or off (0) in this node's journal: 0 must return
	 * only once every record written before is durable (or fail). */
	int (*set)(void *arg, int on);
	/* The flush before giving the PR up failed: fence the node. */
	void (*fail)(void *arg, const char *why);
	void *arg;
};

/* What fs_jrec_stats reports. */
struct fs_jrec_stats {
	const char *mode; /* "on" (PR held: records written), "off"
			     (covering, PR not granted: a node whose flush
			     does not cover all is mounted), "cw" (this
			     node's flush does not cover all: records off
			     for everyone), "none" (not started) */
	uint64_t tries;	  /* PR requests (NOQUEUE) */
	uint64_t refused; /* ... refused: a CW held or waiting */
	uint64_t offs;	  /* PR given up: records turned off */
	uint64_t wakes;	  /* a leaving CW holder woke this node */
	uint64_t join_ms; /* the CW join waited this long (0: none) */
};

/* 0 or -ENOMEM. Nothing asked yet. */
int fs_jrec_new(const struct fs_jrec_conf *conf, struct fs_jrec **out);
/* Not covering: request CW and wait for it (every PR holder turned its
 * records off first), at most conf.timeout_s. Covering: nothing. Before
 * the mount's first write. 0, -ETIMEDOUT (cancelled: a holder's flush
 * did not return in time; nothing held), -ESHUTDOWN (fenced), -errno.
 * May block. */
int fs_jrec_join(struct fs_jrec *r);
/* Covering: the journal is up: ask PR now (records on if granted) and
 * start the retry thread. Not covering: nothing. 0 or -errno
 * (pthread_create). */
int fs_jrec_start(struct fs_jrec *r);
/* Unmount or crash: stop the thread and (@clean: the journal is written
 * back, its header moved) give the PR or CW up; else leave them to the
 * lockspace (abandoned: the others recover this node). Then free. */
void fs_jrec_stop(struct fs_jrec *r, int clean);
void fs_jrec_free(struct fs_jrec *r);
void fs_jrec_stats(struct fs_jrec *r, struct fs_jrec_stats *out);

#endif /* UCFS_FS_JREC_H */
