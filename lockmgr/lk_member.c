/*
 * lk_member.c — membership: heartbeats, liveness, quorum, and starting a
 * recovery generation when the set of live nodes changes.
 *
 * A peer is up when both TCP connections with it are authenticated, it
 * has not said LEAVE, and some frame arrived from it within timeout_ms
 * (heartbeats every heartbeat_ms keep an idle link alive). A broken
 * connection makes it down at once; silence makes it down after the
 * timeout.
 *
 * Agreement: the coordinator is the lowest node id among the nodes up in
 * its own view. When that set has been stable for one heartbeat interval,
 * differs from the membership being formed, and is a quorum (a strict
 * majority of the configured nodes; in two-node mode one node, once the
 * peer has been seen: update_quorum), and leaves out no node that
 * answers while its link is not up both ways yet (half_up), the
 * coordinator sends START(gen + 1, up set, dead set) and every member
 * runs lk_recover.c. A START also carries the sender's previous
 * membership: a node that still holds state but was left out of it is
 * fenced (it was declared dead while alive and must not rejoin with stale
 * locks). A node that loses quorum stops granting (lk_traffic_ok) until a
 * quorate membership takes it back. A recovery that does not finish in
 * four timeouts is restarted by its coordinator with a new generation.
 *
 * Disk liveness (lk_ls_config.disk, set by a filesystem that has a disk
 * heartbeat): the network alone cannot tell a dead node from one cut off
 * that still writes to the shared disk. With the hook, (1) no generation
 * is started without a configured node that is still present on the
 * disk (ALIVE, or NONE and heard from within the disk timeout): it waits
 * until the node stopped beating, i.e. fenced itself or died; (2) a node
 * that cannot reach a LOWER id whose disk beat went on changing after
 * the network lost it (it is alive on the other side of a cut) fences
 * itself: at once (after timeout_ms) in two-node mode, where each side
 * would be quorate alone; otherwise only after 2 * (timeout_ms + disk
 * timeout), so that a minority fences itself for lack of quorum first
 * and only a cut that left two quorate views (a witness that sees both
 * sides) is broken by the id. So one side of any cut keeps running, the
 * lowest id's, and it recovers the other's journal only after the other
 * stopped writing. Two nodes started at once behind a cut see each other
 * absent from the disk (a node beats only once it holds a slot) and may
 * both be quorate alone in two-node mode; the same journal slot they
 * then claim is arbitrated on its heartbeat block (fusefs/cluster/fs_hb.c).
 *
 * Incarnations (HELLO): a member back as a new process without having
 * said LEAVE restarted: it stays out of the up set until a generation
 * without it purged the old one as dead. After a LEAVE it held nothing:
 * the new one joins at once (ls->rejoined), and the old one's mastered
 * resources stay void (ls->left) until a generation with it starts.
 *
 * All under ls->mu.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "lockmgr/lk_config.h"
#include "lockmgr/lk_internal.h"
#include "lockmgr/lk_net.h"

struct lk_member {
	const struct lk_config *cfg;
	uint64_t last_rx[LK_MAX_NODES]; /* ns */
	uint64_t left;			/* said LEAVE */
	uint64_t up_prev, up_since;
	uint64_t last_hb;
	uint64_t max_gen;		    /* highest generation heard of */
	uint64_t incarnation[LK_MAX_NODES]; /* last seen per node */
	uint64_t restarted; /* new incarnations of members: kept out of the
			       up set until a generation dropped the old */
	int overtaken;	    /* restarted a generation a higher one
			       overtook (again only after a recovery
			       finished) */
	int warned_quorum;
	int seen_all; /* every configured node was up at once, once */
	int alone_ok; /* two-node: the peer did not show up in time */
	uint64_t start_ns;
	lk_disk_fn disk;       /* NULL: network only */
	uint64_t disk_timeout; /* ns */
	uint64_t waiting;      /* nodes logged as waited for (disk) */
	uint64_t watch;	       /* nodes whose disk answer a rule waits on
				  in this tick (lk_member_tick publishes it
				  as ls->disk_watch) */
};

static uint64_t ms(unsigned v)
{
	return (uint64_t)v * 1000000ull;
}

/* Lower *@next to @t: a rule's outcome may change by time alone at @t. */
static void soon(uint64_t *next, uint64_t t)
{
	if (t < *next)
		*next = t;
}

/*
 * Members needed for quorum (ls->quorum_need): a strict majority of the
 * configured nodes; in two-node mode one node. Two nodes started at the
 * same moment, each quorate alone at once, would each form a membership
 * of one before their connection is up and grant the same locks (split
 * brain). So in two-node mode the higher id is not quorate alone before
 * both have been up together once since this process started, or
 * timeout_ms has passed without the peer (it is down); the lower id may
 * start alone, and the higher then joins its membership.
 */
static void update_quorum(struct lk_ls *ls)
{
	struct lk_member *m = ls->memb;
	int lowest = ls->nodeid == (uint32_t)__builtin_ctzll(m->cfg->configured);

	if (m->cfg->two_node)
		ls->quorum_need = lowest || m->seen_all || m->alone_ok ? 1 : 2;
	else
		ls->quorum_need = lk_config_quorum(m->cfg);
}

int lk_member_create(struct lk_ls *ls, const struct lk_config *cfg)
{
	struct lk_member *m = calloc(1, sizeof(*m));

	if (m == NULL)
		return -ENOMEM;
	m->cfg = cfg;
	m->start_ns = lk_now_ns();
	ls->memb = m;
	update_quorum(ls);
	return 0;
}

void lk_member_set_disk(struct lk_ls *ls, lk_disk_fn fn, unsigned timeout_ms)
{
	ls->memb->disk = fn;
	ls->memb->disk_timeout = ms(timeout_ms);
}

void lk_member_destroy(struct lk_ls *ls)
{
	free(ls->memb);
	ls->memb = NULL;
}

void lk_member_peer_seen(struct lk_ls *ls, uint32_t node)
{
	if (ls->memb != NULL && node < LK_MAX_NODES)
		ls->memb->last_rx[node] = lk_now_ns();
}

void lk_member_peer_authed(struct lk_ls *ls, uint32_t node,
			   uint64_t incarnation)
{
	struct lk_member *m = ls->memb;
	uint64_t b = 1ull << node;

	if (m == NULL || node >= LK_MAX_NODES)
		return;
	if (m->incarnation[node] != 0 && m->incarnation[node] != incarnation &&
	    (ls->left & b)) {
		/* it left cleanly, so it held nothing: a join; what it
		 * mastered is void until a generation with it starts */
		ls->rejoined |= b;
		lk_log(ls, 2, "node %u is back after leaving", node);
	} else if (ls->admitted & b) {
		/* the new incarnation a generation already took in */
		ls->admitted &= ~b;
	} else if (m->incarnation[node] != 0 &&
		   m->incarnation[node] != incarnation &&
		   ((ls->members | ls->rmembers) & b)) {
		/* it restarted: its old locks must go before it comes back */
		m->restarted |= b;
		lk_log(ls, 1,
		       "node %u restarted: recovering its old state "
		       "first",
		       node);
	}
	m->incarnation[node] = incarnation;
	m->left &= ~b;
	m->last_rx[node] = lk_now_ns();
}

void lk_member_peer_lost(struct lk_ls *ls, uint32_t node)
{
	if (ls->members & (1ull << node))
		lk_log(ls, 1, "lost the connection with member %u", node);
}

void lk_member_rx(struct lk_ls *ls, uint32_t sender, unsigned type,
		  const struct lk_rec_ctl *c)
{
	struct lk_member *m = ls->memb;

	if (m == NULL)
		return;
	if (type == LK_M_HEARTBEAT) {
		if (c->gen > m->max_gen)
			m->max_gen = c->gen;
		lk_recover_check_stale(ls, sender, c->prev_gen, c->prev);
		return;
	}
	if (type == LK_M_LEAVE) {
		m->left |= 1ull << sender;
		ls->left |= 1ull << sender;
		ls->rejoined &= ~(1ull << sender);
		ls->admitted &= ~(1ull << sender);
		lk_log(ls, 2, "node %u leaves", sender);
	}
}

/* The nodes up now; *@next: when the first of them falls silent. */
static uint64_t up_set(struct lk_ls *ls, uint64_t now, uint64_t *next)
{
	struct lk_member *m = ls->memb;
	uint64_t up = 1ull << ls->nodeid;

	for (unsigned i = 0; i < m->cfg->nnodes; i++) {
		uint32_t n = m->cfg->node[i].id;

		if ((m->restarted & (1ull << n)) &&
		    !((ls->members | ls->rmembers) & (1ull << n)))
			m->restarted &= ~(1ull << n); /* old one is gone */
		if ((m->restarted & (1ull << n)) || n == ls->nodeid ||
		    (m->left & (1ull << n)) || !lk_net_peer_ok(ls->net, n) ||
		    now - m->last_rx[n] > ms(m->cfg->timeout_ms))
			continue;
		up |= 1ull << n;
		soon(next, m->last_rx[n] + ms(m->cfg->timeout_ms) + 1);
	}
	return up;
}

/* When the network lost node @n (its last frame, or our start). */
static uint64_t lost_at(const struct lk_member *m, uint32_t n)
{
	return m->last_rx[n] > m->start_ns ? m->last_rx[n] : m->start_ns;
}

/* How often a rule that reads the disk hook asks it again while the
 * hook says ALIVE without a beat within the disk timeout: its reader is
 * behind or has not read yet, and nothing but its next read (which the
 * user may not announce) ends that. */
static uint64_t disk_poll(const struct lk_member *m)
{
	return ms(m->cfg->heartbeat_ms);
}

/*
 * Is node @n (not up) possibly still running and writing to the disk?
 * Always 0 without the disk hook. *@next: when the answer may turn by
 * time alone (an ALIVE beat, or a NONE node heard from, a disk timeout
 * old); every other change comes with lk_ls_disk_changed for @n, which
 * m->watch asks for.
 */
static int present(struct lk_ls *ls, uint32_t n, uint64_t now, uint64_t *next)
{
	struct lk_member *m = ls->memb;
	uint64_t changed;
	int st;

	if (m->disk == NULL)
		return 0;
	m->watch |= 1ull << n;
	st = m->disk(n, &changed, ls->uarg);
	if (st == LK_DISK_ALIVE) {
		/* (a read may have seen a beat since @now) */
		if (changed != 0 && now <= changed + m->disk_timeout)
			soon(next, changed + m->disk_timeout + 1);
		else
			soon(next, now + disk_poll(m));
		return 1;
	}
	if (st != LK_DISK_NONE || m->last_rx[n] == 0 ||
	    now - m->last_rx[n] >= m->disk_timeout)
		return 0;
	soon(next, m->last_rx[n] + m->disk_timeout);
	return 1;
}

/* Configured nodes outside @up that are still present (above); logs the
 * first time each is waited for. *@next: as present's. */
static uint64_t waited_for(struct lk_ls *ls, uint64_t up, uint64_t now,
			   uint64_t *next)
{
	struct lk_member *m = ls->memb;
	uint64_t w = 0;

	for (unsigned i = 0; i < m->cfg->nnodes; i++) {
		uint32_t n = m->cfg->node[i].id;

		if ((up & (1ull << n)) || (m->left & (1ull << n)) ||
		    !present(ls, n, now, next))
			continue; /* (one that left holds nothing) */
		w |= 1ull << n;
		if (!(m->waiting & (1ull << n)))
			lk_log(ls, 1,
			       "node %u is unreachable but alive on the disk: "
			       "waiting for it to stop before going on "
			       "without it",
			       n);
	}
	m->waiting = w;
	return w;
}

/*
 * The disk tie-break (header): fence ourselves if a lower id that we
 * cannot reach beats on the disk after we lost it. Once its grace is
 * over, the rule waits for lk_ls_disk_changed on that node (m->watch):
 * only a new beat read from the disk changes its outcome, unless the
 * hook says a beat that came after we lost the node is no longer ALIVE
 * (it may say ALIVE again by time alone: its reader fell behind), which
 * is asked again every heartbeat_ms.
 */
static void tie_break(struct lk_ls *ls, uint64_t up, uint64_t now,
		      uint64_t *next)
{
	struct lk_member *m = ls->memb;
	uint64_t grace = ms(m->cfg->timeout_ms);

	if (m->disk == NULL)
		return;
	if (!m->cfg->two_node)
		grace = 2 * (grace + m->disk_timeout);
	for (uint32_t n = 1; n < ls->nodeid; n++) {
		uint64_t changed, lost = lost_at(m, n);
		int st;

		if (!(m->cfg->configured & (1ull << n)) ||
		    ((up | m->left) & (1ull << n)))
			continue;
		if (now - lost <= grace) {
			soon(next, lost + grace + 1);
			continue;
		}
		m->watch |= 1ull << n;
		st = m->disk(n, &changed, ls->uarg);
		if (changed <= lost + ms(m->cfg->timeout_ms) / 2)
			continue;
		if (st != LK_DISK_ALIVE) {
			soon(next, now + disk_poll(m));
			continue;
		}
		lk_log(ls, 0,
		       "node %u is alive on the disk but %s: the lower id "
		       "goes on, node %u fences itself",
		       n,
		       m->last_rx[n] == 0 ? "cannot be reached or "
					    "authenticated (different secret?)"
					  : "unreachable (link cut?)",
		       ls->nodeid);
		ls->fenced = 1;
		pthread_cond_broadcast(&ls->cv);
		return;
	}
}

/*
 * Configured nodes outside @up that answer on the network (a connection
 * with them authenticated, or our dial answered: lk_net_peer_answers)
 * and were heard from, or we started, within timeout_ms: alive, their
 * link not yet up both ways. A membership formed without such a node
 * would stand beside the one it is in or about to form (PROTOCOL.md §9
 * "Half-up links"). Not one that said LEAVE or restarted: those wait
 * for a generation without them.
 */
static uint64_t half_up(struct lk_ls *ls, uint64_t up, uint64_t now,
			uint64_t *next)
{
	struct lk_member *m = ls->memb;
	uint64_t h = 0;

	for (unsigned i = 0; i < m->cfg->nnodes; i++) {
		uint32_t n = m->cfg->node[i].id;
		uint64_t b = 1ull << n;

		if (((up | m->left | m->restarted) & b) ||
		    !lk_net_peer_answers(ls->net, n) ||
		    now - lost_at(m, n) > ms(m->cfg->timeout_ms))
			continue;
		h |= b;
		soon(next, lost_at(m, n) + ms(m->cfg->timeout_ms) + 1);
	}
	return h;
}

/* Heartbeats to the peers whose link is up; *@next: the next one (none
 * without such a peer: one coming up is an event, and a turn of its own
 * sends what is due). */
static void heartbeat(struct lk_ls *ls, uint64_t now, uint64_t *next)
{
	struct lk_member *m = ls->memb;
	int any = 0;

	for (unsigned i = 0; i < m->cfg->nnodes && !any; i++)
		any = m->cfg->node[i].id != ls->nodeid &&
		      lk_net_peer_ok(ls->net, m->cfg->node[i].id);
	if (!any)
		return;
	if (now - m->last_hb < ms(m->cfg->heartbeat_ms)) {
		soon(next, m->last_hb + ms(m->cfg->heartbeat_ms));
		return;
	}
	m->last_hb = now;
	soon(next, now + ms(m->cfg->heartbeat_ms));
	for (unsigned i = 0; i < m->cfg->nnodes; i++) {
		uint32_t n = m->cfg->node[i].id;
		struct lk_rec_ctl *c;

		if (n == ls->nodeid || !lk_net_peer_ok(ls->net, n))
			continue;
		c = lk_out_add(ls, n, LK_M_HEARTBEAT);
		if (c == NULL)
			continue;
		c->gen = ls->gen;
		c->members = ls->members;
		c->prev = ls->done_members;
		c->prev_gen = ls->done_gen;
		c->nodeid = ls->nodeid;
	}
}

/* Start a generation when the live set calls for one; *@next: when a
 * timed rule that holds it back may let it go. */
static void coordinate(struct lk_ls *ls, uint64_t up, uint64_t now,
		       uint64_t *next)
{
	struct lk_member *m = ls->memb;
	uint64_t target = ls->rphase != 0 || ls->gen != 0 ? ls->rmembers : 0;
	uint64_t gen, dead;
	int stuck =
	    ls->rphase != 0 && now - ls->rstart_ns > 4 * ms(m->cfg->timeout_ms);
	int over;

	/* our generation lost to a higher one (its number was picked before
	 * we heard of that one, e.g. by a node that just came back): the
	 * members that took the higher refused our START. Once per
	 * recovery: where views differ for longer (a link down between two
	 * others) two coordinators must not overtake each other at every
	 * heartbeat */
	over = ls->rphase != 0 && (ls->rgen & 0xff) == ls->nodeid &&
	       m->max_gen > ls->rgen && !m->overtaken;
	if (ls->rphase == 0)
		m->overtaken = 0;
	if ((unsigned)__builtin_ctzll(up) != ls->nodeid)
		return; /* not the coordinator */
	if (ls->rphase != 0 && !stuck)
		soon(next, ls->rstart_ns + 4 * ms(m->cfg->timeout_ms) + 1);
	if (up == target && !stuck && !over && !(ls->rejoined & up))
		return;
	if (now - m->up_since < ms(m->cfg->heartbeat_ms)) {
		soon(next, m->up_since + ms(m->cfg->heartbeat_ms));
		return;
	}
	if ((unsigned)__builtin_popcountll(up) < ls->quorum_need)
		return;
	if (half_up(ls, up, now, next) != 0)
		return; /* not beside a peer whose link is coming up */
	if (m->disk != NULL && waited_for(ls, up, now, next) != 0)
		return; /* not without a node still writing to the disk */
	/* unique per coordinator: two coordinators with different views
	 * never issue the same number, and the higher one wins */
	gen = (ls->rgen > m->max_gen ? ls->rgen : m->max_gen);
	gen = (((gen >> 8) + 1) << 8) | ls->nodeid;
	/* a node back after leaving held nothing even if it went again */
	dead = (ls->rmembers | ls->members) & ~up & ~m->left & ~ls->left;
	m->overtaken |= over;
	lk_log(ls, 2, "coordinator: generation %llu, members %#llx, dead %#llx",
	       (unsigned long long)gen, (unsigned long long)up,
	       (unsigned long long)dead);
	lk_recover_begin(ls, gen, up, dead);
}

/* Two-node mode: going on alone once the peer did not come up within
 * timeout_ms of our start (update_quorum). */
static void alone_check(struct lk_ls *ls, uint64_t now, uint64_t *next)
{
	struct lk_member *m = ls->memb;

	if (!m->cfg->two_node || m->seen_all || m->alone_ok)
		return;
	if (now - m->start_ns < ms(m->cfg->timeout_ms)) {
		soon(next, m->start_ns + ms(m->cfg->timeout_ms));
		return;
	}
	m->alone_ok = 1;
	update_quorum(ls);
	lk_log(ls, 1,
	       "two-node mode: the peer did not come up within "
	       "timeout_ms: going on alone");
}

/* The rules of lk_member_tick (below). */
static uint64_t tick_rules(struct lk_ls *ls, uint64_t now)
{
	struct lk_member *m = ls->memb;
	uint64_t up, next = CVW_NEVER;

	heartbeat(ls, now, &next);
	up = up_set(ls, now, &next);
	tie_break(ls, up, now, &next);
	if (ls->fenced)
		return CVW_NEVER;
	if (!m->seen_all && (up & m->cfg->configured) == m->cfg->configured) {
		m->seen_all = 1;
		update_quorum(ls);
	}
	alone_check(ls, now, &next);
	if (up != m->up_prev) {
		lk_log(ls, 2, "live nodes now %#llx", (unsigned long long)up);
		m->up_prev = up;
		m->up_since = now;
	}
	if ((unsigned)__builtin_popcountll(up) < ls->quorum_need) {
		if (ls->quorate && !m->warned_quorum)
			lk_log(ls, 1, "quorum lost: no grants until back");
		m->warned_quorum = 1;
		ls->quorate = 0;
		return next;
	}
	if (m->warned_quorum && (up & ls->members) == ls->members &&
	    ls->nmemb >= ls->quorum_need) {
		lk_log(ls, 1, "quorum back with the same members");
		ls->quorate = 1;
	}
	m->warned_quorum = 0;
	coordinate(ls, up, now, &next);
	return next;
}

/*
 * Heartbeats, liveness, quorum, coordination. Returns when it must run
 * next (ns; CVW_NEVER: not before something else happens): the soonest
 * moment at which one of its rules may decide otherwise by time alone
 * (the next heartbeat, a peer's silence reaching timeout_ms, the stable
 * interval before a generation, a half-up link's bound, two-node's lone
 * start, the disk tie-break's grace, a disk beat or a NONE node's last
 * frame a disk timeout old, a recovery's four timeouts). Everything
 * else that changes an outcome comes as an event the network thread
 * turns on: a frame or a connection event (lk_net.c net_kick when
 * another thread read it), the end of a user's recovery callback
 * (lk_cb.c), or lk_ls_disk_changed for a node in ls->disk_watch, the
 * nodes whose disk answer a rule waits on (while the tick reads the
 * hook, every node: a change read meanwhile is not lost).
 */
uint64_t lk_member_tick(struct lk_ls *ls, uint64_t now)
{
	struct lk_member *m = ls->memb;
	uint64_t next;

	if (m == NULL || ls->fenced || ls->closing) {
		__atomic_store_n(&ls->disk_watch, 0, __ATOMIC_SEQ_CST);
		return CVW_NEVER;
	}
	m->watch = 0;
	if (m->disk != NULL)
		__atomic_store_n(&ls->disk_watch, ~0ull, __ATOMIC_SEQ_CST);
	next = tick_rules(ls, now);
	__atomic_store_n(&ls->disk_watch, m->watch, __ATOMIC_SEQ_CST);
	return next;
}

void lk_ls_disk_changed(struct lk_ls *ls, uint64_t nodes)
{
	if (ls != NULL && ls->net != NULL &&
	    (__atomic_load_n(&ls->disk_watch, __ATOMIC_SEQ_CST) & nodes))
		lk_net_kick(ls->net);
}

void lk_member_leave(struct lk_ls *ls)
{
	struct lk_member *m = ls->memb;

	if (m == NULL)
		return;
	for (unsigned i = 0; i < m->cfg->nnodes; i++) {
		uint32_t n = m->cfg->node[i].id;
		struct lk_rec_ctl *c;

		if (n == ls->nodeid || !lk_net_peer_ok(ls->net, n))
			continue;
		c = lk_out_add(ls, n, LK_M_LEAVE);
		if (c != NULL)
			c->nodeid = ls->nodeid;
	}
}

void lk_ls_fence(struct lk_ls *ls, const char *why)
{
	lk_api_lock(ls);
	if (!ls->fenced)
		lk_log(ls, 0, "fenced: %s", why);
	ls->fenced = 1;
	__atomic_store_n(&ls->usable, 0, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&ls->cv);
	if (ls->net != NULL)
		lk_net_kick(ls->net); /* fail what waits, drop the links */
	pthread_mutex_unlock(&ls->mu);
}

int lk_ls_fenced(struct lk_ls *ls)
{
	int f;

	lk_api_lock(ls);
	f = ls->fenced;
	pthread_mutex_unlock(&ls->mu);
	return f;
}

int lk_ls_peer(struct lk_ls *ls, uint32_t node, uint64_t *rx_age_ms)
{
	struct lk_member *m;
	int up = 0;

	*rx_age_ms = UINT64_MAX;
	if (node == 0 || node >= LK_MAX_NODES)
		return 0;
	lk_api_lock(ls);
	m = ls->memb;
	if (m != NULL && m->last_rx[node] != 0)
		*rx_age_ms = (lk_now_ns() - m->last_rx[node]) / 1000000ull;
	up = lk_net_peer_ok(ls->net, node);
	pthread_mutex_unlock(&ls->mu);
	return up;
}
