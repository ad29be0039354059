/*
 * lk_net.c — the TCP transport: one epoll thread, framed messages,
 * authenticated connections.
 *
 * Each node dials every other configured node (dial_missing: at once,
 * then with a backoff while dials fail; at once again after a link loss
 * or when the peer's own connection authenticates: authed), and both
 * connections of a pair are authenticated (lk_auth.h) before anything
 * else is accepted on them, but the frames of both directions travel on
 * one of them, the "link": the connection the higher node id of the
 * pair dialed (link_conn). Each direction is thus one ordered TCP
 * stream, so frames from X to Y arrive in the order X sent them — the
 * recovery barriers rely on that — and a reply travels back on the
 * stream its request came on, carrying the TCP acknowledgement of the
 * request with it: a remote grant is two segments, not four (each
 * one-way stream had to send a pure ACK of its own). The other
 * connection only proves liveness.
 *
 * Input is checked in two steps: the header (magic, version, length
 * bound) before the body is awaited — a bad header closes the connection,
 * since the stream cannot be resynchronised — then lk_wire_check() on the
 * whole frame, which drops a frame of the wrong size or unknown type and
 * keeps the connection. Every drop is logged with its reason and counted.
 *
 * Sending happens in the caller's thread (xmit, under ls->mu): a write()
 * is tried at once and what does not fit waits for EPOLLOUT. All fields
 * are protected by ls->mu except the thread handle and the wake fds; the
 * thread holds ls->mu except while it waits for events (net_wait: for
 * poll_us after a lock frame it polls without sleeping first).
 *
 * The thread sleeps until its next event or its tickers' next deadline
 * (dial_missing, lk_member_tick, lk_core_tick each return theirs), with
 * no cap: a settled idle node wakes for heartbeats and redials only.
 * Another thread that reads a connection (net_wait_rx, net_rx_release,
 * net_poll_rx) and so sees a connection drop, a peer authenticate or a
 * membership or recovery frame, or that fences the node, wakes it
 * (net_kick) so that it ticks at once, as its own read would have; one
 * that makes other work due before the thread's planned wake-up
 * (ls->net_next: a tossed resource, an idle unlock's record, the end
 * of a recovery callback) wakes it through lk_net_wake_by, and the disk
 * hook's user through lk_ls_disk_changed.
 *
 * A thread in lk_wait may read its lock master's link itself
 * (net_wait_rx, at most one such thread per lockspace): the network
 * thread stops watching that socket meanwhile, so a remote grant costs
 * the same two wake-ups as a bare round trip (the master's network
 * thread, then the waiter) instead of three.
 *
 * Fault hooks for tests: UCFS_LK_KILL_AT=N makes the process SIGKILL
 * itself at the N-th lock or recovery frame it sends or receives;
 * UCFS_LK_REDIAL_MS=N waits N ms instead of LK_REDIAL_MS between two
 * dials of one peer (test_lk_rejoin: a redial backoff longer than every
 * membership rule's wait).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lockmgr/lk_auth.h"
#include "lockmgr/lk_config.h"
#include "lockmgr/lk_internal.h"
#include "lockmgr/lk_net.h"

enum { C_CONNECTING = 1, C_HANDSHAKE, C_AUTHED };

/* The pause after a dial of a peer (dial_missing): LK_REDIAL_MS, doubled
 * after every dial that did not lead to an authenticated connection, up
 * to LK_REDIAL_MAX_MS. A peer that starts dials us at once and we dial
 * back when its connection authenticates (authed), so a long pause only
 * delays noticing that a cut link healed. */
#define LK_REDIAL_MS 100
#define LK_REDIAL_MAX_MS 1000

/* A membership or recovery frame (not lock traffic): when another
 * thread reads it, the network thread must tick on it (net_kick). */
static int ctl_frame(unsigned type)
{
	switch (type) {
	case LK_M_HEARTBEAT:
	case LK_M_LEAVE:
	case LK_M_START:
	case LK_M_DONE:
	case LK_M_DIR_ADD:
	case LK_M_RLOOKUP:
	case LK_M_RLOOKUP_REPLY:
	case LK_M_RCOM:
	case LK_M_HANDOFF:
	case LK_M_PRCOM:
		return 1;
	default:
		return 0;
	}
}

struct lk_conn {
	struct lk_conn *next; /* net->conns */
	int fd;
	int state;
	int outgoing;	   /* we dialed it */
	int closing;	   /* close at the end of this loop turn */
	uint32_t peer;	   /* expected (dialer) or announced id */
	uint64_t peer_inc; /* its incarnation (HELLO) */
	int got_hello, got_auth, sent_auth;
	uint8_t nonce[32]; /* ours */
	uint8_t peer_nonce[32];
	uint8_t *rbuf;
	size_t rlen, rcap;
	uint8_t *wbuf;
	size_t wlen, woff, wcap;
	int want_out;	   /* EPOLLOUT armed */
	int polled;	   /* a waiter reads it (net_wait_rx): EPOLLIN off, and
			      reap() keeps it until the waiter is done */
	int held;	   /* an lk_lock_batch call reads it (net_rx_hold):
			      EPOLLIN off until net_rx_release */
	uint8_t fkey[32];  /* frame key (lk_auth_frame_key), after HELLO */
	int tagged_rx;	   /* the peer's AUTH came: its frames carry tags */
	uint64_t last_seq; /* highest header seq accepted on it */
};

struct lk_net {
	struct lk_ls *ls;
	const struct lk_config *cfg;
	int epfd, lfd, evfd;
	int rxfd;    /* eventfd: wakes the waiter in net_wait_rx */
	int pollers; /* threads in net_wait_rx (0 or 1) */
	pthread_t thread;
	int started, stop;
	struct lk_conn *conns;
	struct lk_conn *out[LK_MAX_NODES]; /* dialed, per peer */
	struct lk_conn *in[LK_MAX_NODES];  /* accepted and authed */
	uint64_t next_dial[LK_MAX_NODES];
	uint64_t redial_ns; /* immutable: LK_REDIAL_MS (UCFS_LK_REDIAL_MS) */
	uint64_t redial_max_ns; /* immutable: LK_REDIAL_MAX_MS or more */
	uint64_t redial_wait[LK_MAX_NODES]; /* the pause after the next dial
					       (0: redial_ns) */
	uint64_t kill_at, frames;
	const char *cut_file; /* immutable: fault hook UCFS_LK_CUT */
	int cut;	      /* the file exists: link cut */
	uint64_t auth_fails[LK_MAX_NODES];  /* per peer (auth_fail) */
	uint64_t auth_logged[LK_MAX_NODES]; /* ns: last logged */
	uint64_t cut_checked;		    /* ns */
	int no_dial;		 /* fenced or closing: stop dialing */
	uint64_t incarnation;	 /* ours, random */
	uint64_t last_rx;	 /* ns, last lock or recovery frame read */
	uint64_t spin_ns;	 /* immutable: how long the network thread polls
				    without sleeping after a lock frame came in
				    (net_wait; configuration poll_us) */
	uint64_t poll_off_until; /* atomic: no polling before (ns) */
	uint64_t slow_since;	 /* atomic: slow yields counted since */
	unsigned slow_yields;	 /* atomic: ... how many (poll_yield) */
	uint64_t poll_backoffs;	 /* atomic: times polling was switched off */
	uint64_t next_tick;	 /* network thread only: ns, its tickers' next
				    deadline (net_main, net_wait) */
	uint32_t spin_wins;	 /* network thread only: of its last 16 waits
				    that began inside a poll window, those
				    whose input came within it, polled or
				    not (bit 0: the newest; net_wait) */
};

/* The connection that carries the frames to and from @node: the one the
 * higher id of the pair dialed. NULL if there is none now. */
static struct lk_conn *link_conn(const struct lk_net *net, uint32_t node)
{
	if (node == 0 || node >= LK_MAX_NODES)
		return NULL;
	return net->ls->nodeid > node ? net->out[node] : net->in[node];
}

static void set_events(struct lk_net *net, struct lk_conn *c)
{
	struct epoll_event ev = {.events = (c->polled || c->held ? 0
								: EPOLLIN) |
					   (c->want_out ? EPOLLOUT : 0),
				 .data.ptr = c};

	epoll_ctl(net->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void arm(struct lk_net *net, struct lk_conn *c, int out)
{
	if (c->want_out == out)
		return;
	c->want_out = out;
	set_events(net, c);
}

/* The network thread, in its own thread (net_main sets it). */
static __thread const struct lk_net *net_self;

/* Wake the network thread unless this is it: it ticks at the end of the
 * turn anyway. */
static void net_kick(struct lk_net *net)
{
	uint64_t one = 1;

	if (net_self != net)
		(void)!write(net->evfd, &one, sizeof(one));
}

void lk_net_kick(struct lk_net *net)
{
	net_kick(net);
}

void lk_net_wake_by(struct lk_ls *ls, uint64_t t)
{
	if (ls->net == NULL || t >= ls->net_next)
		return;
	ls->net_next = t; /* one write for any number of callers */
	net_kick(ls->net);
}

static void conn_drop(struct lk_net *net, struct lk_conn *c, const char *why)
{
	if (c->closing)
		return;
	c->closing = 1;
	net_kick(net); /* reap it, and membership sees it */
	if (why != NULL)
		lk_log(net->ls, c->state == C_AUTHED ? 1 : 2,
		       "connection %s node %u closed: %s",
		       c->outgoing ? "to" : "from", c->peer, why);
	if (c->state == C_AUTHED && c->peer < LK_MAX_NODES) {
		lk_member_peer_lost(net->ls, c->peer);
		/* a link that worked: dial again at once, not a backoff
		 * after its dial (it may have been short-lived) */
		net->next_dial[c->peer] = 0;
		net->redial_wait[c->peer] = 0;
	}
}

static void conn_free(struct lk_net *net, struct lk_conn *c)
{
	if (c->outgoing && net->out[c->peer] == c)
		net->out[c->peer] = NULL;
	if (!c->outgoing && c->peer < LK_MAX_NODES && net->in[c->peer] == c)
		net->in[c->peer] = NULL;
	epoll_ctl(net->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->rbuf);
	free(c->wbuf);
	free(c);
}

static void reap(struct lk_net *net)
{
	struct lk_conn **pp = &net->conns;

	while (*pp != NULL) {
		struct lk_conn *c = *pp;

		if (c->closing && !c->polled) {
			*pp = c->next;
			conn_free(net, c);
		} else {
			pp = &c->next;
		}
	}
}

static void conn_flush(struct lk_net *net, struct lk_conn *c)
{
	while (c->woff < c->wlen) {
		ssize_t n = send(c->fd, c->wbuf + c->woff, c->wlen - c->woff,
				 MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			arm(net, c, 1);
			return;
		}
		if (n <= 0) {
			conn_drop(net, c, "write failed");
			return;
		}
		c->woff += (size_t)n;
	}
	c->woff = c->wlen = 0;
	arm(net, c, 0);
}

static size_t iov_bytes(const struct iovec *iov, int cnt)
{
	size_t n = 0;

	for (int i = 0; i < cnt; i++)
		n += iov[i].iov_len;
	return n;
}

/* Send what the socket takes of @iov straight from it (nothing may be
 * queued before it); the number of bytes sent, or -1 if the connection
 * was dropped. */
static ssize_t conn_send_now(struct lk_net *net, struct lk_conn *c,
			     const struct iovec *iov, int cnt)
{
	struct msghdr mh = {.msg_iov = (struct iovec *)iov,
			    .msg_iovlen = (size_t)cnt};
	ssize_t n;

	do
		n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (n <= 0) {
		conn_drop(net, c, "write failed");
		return -1;
	}
	return n;
}

static int wbuf_reserve(struct lk_net *net, struct lk_conn *c, size_t len)
{
	size_t cap = c->wcap ? c->wcap : 4096;
	uint8_t *nb;

	if (c->wlen + len <= c->wcap)
		return 0;
	while (cap < c->wlen + len)
		cap *= 2;
	if (cap > 64u << 20) {
		conn_drop(net, c, "peer does not read");
		return -ENOBUFS;
	}
	nb = realloc(c->wbuf, cap);
	if (nb == NULL)
		return -ENOMEM;
	c->wbuf = nb;
	c->wcap = cap;
	return 0;
}

/*
 * Queue the bytes of @iov for sending. When nothing is queued before them
 * they go to the socket at once, straight from @iov (a batch frame is
 * tens of KiB: no copy); what the socket does not take is copied into
 * wbuf and waits for EPOLLOUT.
 */
static int conn_queue(struct lk_net *net, struct lk_conn *c,
		      const struct iovec *iov, int cnt)
{
	size_t skip = 0, len = iov_bytes(iov, cnt);
	int ret;

	if (c->closing)
		return -ENOTCONN;
	if (c->wlen == 0 && !c->want_out && c->state != C_CONNECTING) {
		ssize_t n = conn_send_now(net, c, iov, cnt);

		if (n < 0)
			return -ENOTCONN;
		if ((size_t)n == len)
			return 0;
		skip = (size_t)n;
	}
	ret = wbuf_reserve(net, c, len - skip);
	if (ret < 0)
		return ret;
	for (int i = 0; i < cnt; i++) {
		size_t l = iov[i].iov_len;
		const uint8_t *p = iov[i].iov_base;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		memcpy(c->wbuf + c->wlen, p + skip, l - skip);
		c->wlen += l - skip;
		skip = 0;
	}
	if (!c->want_out && c->state != C_CONNECTING)
		conn_flush(net, c);
	return 0;
}

/* A single-record control frame on one connection (HELLO, AUTH). */
static void conn_send_rec(struct lk_net *net, struct lk_conn *c, unsigned type,
			  const void *rec, size_t rs)
{
	uint8_t buf[sizeof(struct lk_hdr) + 64];
	struct lk_hdr *h = (struct lk_hdr *)buf;

	memset(h, 0, sizeof(*h));
	h->magic = LK_MAGIC;
	h->version = LK_VERSION;
	h->type = (uint8_t)type;
	h->count = 1;
	h->length = (uint32_t)(sizeof(*h) + rs);
	h->sender = net->ls->nodeid;
	memcpy(buf + sizeof(*h), rec, rs);
	conn_queue(net, c, &(struct iovec){buf, h->length}, 1);
}

static void send_hello(struct lk_net *net, struct lk_conn *c)
{
	struct lk_rec_hello hello = {0};

	lk_auth_nonce(c->nonce);
	hello.nodeid = net->ls->nodeid;
	hello.to = c->outgoing ? c->peer : 0;
	hello.cluster_hash = net->cfg->cluster_hash;
	hello.incarnation = net->incarnation;
	memcpy(hello.nonce, c->nonce, 32);
	c->state = C_HANDSHAKE;
	conn_send_rec(net, c, LK_M_HELLO, &hello, sizeof(hello));
}

/* Logged once per peer per 10 s (a peer with another secret retries
 * every 100 ms); every failure is counted. */
static void auth_fail(struct lk_net *net, struct lk_conn *c, const char *why)
{
	uint64_t now = lk_now_ns();
	uint32_t p = c->peer % LK_MAX_NODES;

	net->ls->stats.auth_failures++;
	net->auth_fails[p]++;
	if (net->auth_logged[p] == 0 ||
	    now - net->auth_logged[p] > 10000000000ull) {
		lk_log(net->ls, 1,
		       "authentication failed (%s connection, node %u): %s "
		       "(%llu failures with this node)",
		       c->outgoing ? "outgoing" : "incoming", c->peer, why,
		       (unsigned long long)net->auth_fails[p]);
		net->auth_logged[p] = now;
	}
	conn_drop(net, c, NULL);
}

static void rx_hello(struct lk_net *net, struct lk_conn *c,
		     const struct lk_rec_hello *h)
{
	struct lk_rec_auth a;

	if (c->got_hello)
		return auth_fail(net, c, "second HELLO");
	if (h->cluster_hash != net->cfg->cluster_hash)
		return auth_fail(net, c, "different cluster name");
	if (h->nodeid == 0 || h->nodeid >= LK_MAX_NODES ||
	    !(net->cfg->configured & (1ull << h->nodeid)) ||
	    h->nodeid == net->ls->nodeid)
		return auth_fail(net, c, "unknown node id");
	if (c->outgoing && h->nodeid != c->peer)
		return auth_fail(net, c, "answered by the wrong node");
	if (!c->outgoing && h->to != net->ls->nodeid)
		return auth_fail(net, c, "meant for another node");
	c->peer = h->nodeid;
	c->peer_inc = h->incarnation;
	c->got_hello = 1;
	memcpy(c->peer_nonce, h->nonce, 32);
	if (c->outgoing)
		lk_auth_frame_key(net->cfg->key, c->nonce, c->peer_nonce,
				  net->ls->nodeid, c->peer, c->fkey);
	else
		lk_auth_frame_key(net->cfg->key, c->peer_nonce, c->nonce,
				  c->peer, net->ls->nodeid, c->fkey);
	lk_auth_mac(net->cfg->key, c->peer_nonce, net->ls->nodeid, c->peer,
		    a.mac);
	conn_send_rec(net, c, LK_M_AUTH, &a, sizeof(a));
	c->sent_auth = 1;
}

static void authed(struct lk_net *net, struct lk_conn *c)
{
	struct lk_conn **slot =
	    c->outgoing ? &net->out[c->peer] : &net->in[c->peer];

	c->state = C_AUTHED;
	if (*slot != NULL && *slot != c)
		conn_drop(net, *slot, "replaced by a new connection");
	*slot = c;
	lk_log(net->ls, 2, "%s connection with node %u authenticated",
	       c->outgoing ? "outgoing" : "incoming", c->peer);
	lk_member_peer_authed(net->ls, c->peer, c->peer_inc);
	/* the peer listens now (it dialed us): dial back at once rather
	 * than after the backoff of a refused dial, or a link half up for
	 * 100 ms let a lockspace reopened at once form a membership of its
	 * own beside its peer's (PROTOCOL.md §9 "Half-up links") */
	if (!c->outgoing &&
	    (net->out[c->peer] == NULL || net->out[c->peer]->closing)) {
		net->next_dial[c->peer] = 0;
		net->redial_wait[c->peer] = 0;
	}
	if (c->outgoing)
		net->redial_wait[c->peer] = 0; /* the dial worked */
	net_kick(net); /* membership: a peer may be up; dial_missing */
}

static void rx_auth(struct lk_net *net, struct lk_conn *c,
		    const struct lk_rec_auth *a)
{
	if (!c->got_hello || c->got_auth)
		return auth_fail(net, c, "AUTH out of order");
	if (lk_auth_verify(net->cfg->key, c->nonce, net->ls->nodeid, c->peer,
			   a->mac) != 0)
		return auth_fail(net, c, "wrong MAC (different secret?)");
	c->got_auth = 1;
	c->tagged_rx = 1; /* every later frame of the peer has a tag */
	authed(net, c);
}

static void fault_hook(struct lk_net *net, unsigned type)
{
	if (net->kill_at == 0 || type == LK_M_HEARTBEAT)
		return;
	if (++net->frames >= net->kill_at)
		kill(getpid(), SIGKILL);
}

static void rx_frame(struct lk_net *net, struct lk_conn *c, const void *f,
		     size_t len)
{
	const struct lk_hdr *h = f;
	const char *why;
	const void *rec = (const uint8_t *)f + sizeof(*h);

#ifdef LK_TIMELINE
	if (h->type == LK_M_RUNREQ && h->count > 100)
		LK_TL(LK_TL_MASTER_RX);
	if (h->type == LK_M_GRANTS)
		LK_TL(LK_TL_GRANTS_RX);
#endif
	if (lk_wire_check(f, len, &why) != 0) {
		net->ls->stats.bad_frames++;
		net->ls->stats.peer[c->peer % LK_MAX_NODES].dropped++;
		lk_log(net->ls, 1, "frame from node %u dropped: %s", c->peer,
		       why);
		return;
	}
	if (c->state != C_AUTHED) {
		if (h->type == LK_M_HELLO && h->count == 1)
			rx_hello(net, c, rec);
		else if (h->type == LK_M_AUTH && h->count == 1)
			rx_auth(net, c, rec);
		else
			auth_fail(net, c, "traffic before authentication");
		return;
	}
	if (c != link_conn(net, c->peer) || h->sender != c->peer ||
	    h->type == LK_M_HELLO || h->type == LK_M_AUTH) {
		net->ls->stats.bad_frames++;
		lk_log(net->ls, 1, "frame %s from node %u dropped: %s",
		       lk_wire_name(h->type), c->peer,
		       c != link_conn(net, c->peer)
			   ? "not on the link's connection"
			   : "wrong sender or handshake frame");
		return;
	}
	fault_hook(net, h->type);
	lk_member_peer_seen(net->ls, c->peer);
	if (ctl_frame(h->type))
		net_kick(net); /* membership or recovery: tick on it */
	if (h->type == LK_M_HEARTBEAT || h->type == LK_M_LEAVE) {
		for (unsigned i = 0; i < h->count; i++)
			lk_member_rx(net->ls, c->peer, h->type,
				     (const struct lk_rec_ctl *)rec + i);
		return;
	}
	lk_core_rx(net->ls, c->peer, f, len);
	/* the network thread polls after the frames it reads itself; a
	 * reply read by its waiter (net_wait_rx, net_rx_release) asks
	 * nothing of it, and polling then only keeps a CPU from the
	 * threads that have work */
	if (!net->ls->rx_in_poller)
		net->last_rx = net->ls->now; /* lk_core_rx read the clock */
}

/* A frame whose tag did not verify: dropped (the connection stays: the
 * stream is still in step, the next frame may be genuine). */
static void frame_forged(struct lk_net *net, struct lk_conn *c,
			 const struct lk_hdr *h)
{
	struct lk_ls *ls = net->ls;

	ls->stats.bad_frames++;
	ls->stats.auth_failures++;
	ls->stats.peer[c->peer % LK_MAX_NODES].dropped++;
	lk_log(ls, 1,
	       "frame %s from node %u dropped: bad frame MAC or sequence "
	       "(altered, replayed or forged)",
	       lk_wire_name(h->type), c->peer);
}

/*
 * Does the tag after @h verify, with the header's seq as nonce, and is
 * that seq beyond every one accepted on @c? (A sender numbers its frames
 * to a peer 1, 2, 3, ... for the life of the lockspace, so on one
 * connection they only grow: an old frame sent again fails here.)
 */
static int frame_genuine(struct lk_conn *c, const struct lk_hdr *h)
{
	if (lk_auth_frame_verify(c->fkey, c->peer, h->seq, h, h->length,
				 (const uint8_t *)h + h->length) != 0 ||
	    h->seq <= c->last_seq)
		return 0;
	c->last_seq = h->seq;
	return 1;
}

/* Parse complete frames (and their tags) out of c->rbuf. */
static void parse(struct lk_net *net, struct lk_conn *c)
{
	size_t off = 0;

	while (!c->closing && c->rlen - off >= sizeof(struct lk_hdr)) {
		const struct lk_hdr *h = (void *)(c->rbuf + off);
		size_t tag = c->tagged_rx ? LK_FRAME_TAG : 0;

		/* every valid frame is a multiple of 8 bytes long, which
		 * also keeps the next header aligned in rbuf */
		if (h->magic != LK_MAGIC || h->version != LK_VERSION ||
		    h->length < sizeof(*h) || h->length > LK_FRAME_MAX ||
		    h->length % 8 != 0) {
			net->ls->stats.bad_frames++;
			conn_drop(net, c,
				  "bad frame header (magic, version "
				  "or length)");
			return;
		}
		if (c->rlen - off < h->length + tag)
			break;
		if (tag == 0)
			rx_frame(net, c, h, h->length);
		else if (frame_genuine(c, h))
			rx_frame(net, c, h, h->length);
		else
			frame_forged(net, c, h);
#ifdef LK_TIMELINE
		if (h->type == LK_M_RUNREQ && h->count > 100 &&
		    lk_tl[LK_TL_MASTER_DONE] < lk_tl[LK_TL_MASTER_RX])
			LK_TL(LK_TL_MASTER_DONE); /* if not answered first */
		if (h->type == LK_M_GRANTS)
			LK_TL(LK_TL_GRANTS_DONE);
#endif
		off += h->length + tag;
	}
	memmove(c->rbuf, c->rbuf + off, c->rlen - off);
	c->rlen -= off;
}

static void conn_read(struct lk_net *net, struct lk_conn *c)
{
	for (int i = 0; i < 16 && !c->closing; i++) {
		size_t space;
		ssize_t n;

		if (c->rcap - c->rlen < 65536) {
			/* parse() keeps less than one frame: this is bounded */
			size_t cap = c->rcap ? c->rcap * 2 : 131072;
			uint8_t *nb = cap <= 4 * LK_FRAME_MAX
					  ? realloc(c->rbuf, cap)
					  : NULL;

			if (nb == NULL) {
				conn_drop(net, c, "receive buffer");
				return;
			}
			c->rbuf = nb;
			c->rcap = cap;
		}
		space = c->rcap - c->rlen;
		n = recv(c->fd, c->rbuf + c->rlen, space, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			conn_drop(net, c,
				  n == 0 ? "closed by peer" : "read error");
			return;
		}
		c->rlen += (size_t)n;
		parse(net, c);
		/* a short read drained the socket: save the EAGAIN call
		 * (level-triggered epoll reports anything that came since) */
		if ((size_t)n < space)
			return;
	}
}

static struct lk_conn *conn_new(struct lk_net *net, int fd, int outgoing,
				uint32_t peer)
{
	struct lk_conn *c = calloc(1, sizeof(*c));
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	int one = 1;

	if (c == NULL)
		return NULL;
	c->fd = fd;
	c->outgoing = outgoing;
	c->peer = peer;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	ev.data.ptr = c;
	if (epoll_ctl(net->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		free(c);
		return NULL;
	}
	c->next = net->conns;
	net->conns = c;
	return c;
}

static void do_accept(struct lk_net *net)
{
	for (;;) {
		int fd =
		    accept4(net->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct lk_conn *c;

		if (fd < 0)
			return;
		if (net->cut || net->no_dial) {
			close(fd); /* fenced or closing: not alive for them */
			continue;
		}
		c = conn_new(net, fd, 0, 0);
		if (c == NULL) {
			close(fd);
			continue;
		}
		send_hello(net, c);
	}
}

static void dial(struct lk_net *net, const struct lk_node_cfg *n)
{
	const struct lk_node_cfg *self =
	    lk_config_node(net->cfg, net->ls->nodeid);
	struct sockaddr_in src = self->addr;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct lk_conn *c;

	if (fd < 0)
		return;
	src.sin_port = 0; /* our address, any port */
	bind(fd, (struct sockaddr *)&src, sizeof(src));
	if (connect(fd, (const struct sockaddr *)&n->addr, sizeof(n->addr)) <
		0 &&
	    errno != EINPROGRESS) {
		close(fd);
		return;
	}
	c = conn_new(net, fd, 1, n->id);
	if (c == NULL) {
		close(fd);
		return;
	}
	c->state = C_CONNECTING;
	arm(net, c, 1);
	net->out[n->id] = c;
}

static void connect_done(struct lk_net *net, struct lk_conn *c)
{
	int err = 0;
	socklen_t len = sizeof(err);

	getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
	if (err != 0) {
		conn_drop(net, c, NULL); /* not up yet: retry later */
		return;
	}
	arm(net, c, 0);
	send_hello(net, c);
}

/*
 * Fault hook for tests (tests/integration/clu_split.sh): while the file
 * named by UCFS_LK_CUT exists, this node's links are cut: every
 * connection is dropped, none is accepted or dialed (checked every
 * 100 ms). ls->mu held.
 */
static void cut_hook(struct lk_net *net, uint64_t now)
{
	int cut;

	if (net->cut_file == NULL || now - net->cut_checked < 100000000ull)
		return;
	net->cut_checked = now;
	cut = access(net->cut_file, F_OK) == 0;
	if (cut && !net->cut) {
		lk_log(net->ls, 1, "fault hook: links cut (%s exists)",
		       net->cut_file);
		for (struct lk_conn *c = net->conns; c != NULL; c = c->next)
			conn_drop(net, c, NULL);
	}
	net->cut = cut;
}

/* Dial the peers we have no connection to, each at most every
 * LK_REDIAL_MS, backing off to LK_REDIAL_MAX_MS while dials fail.
 * Returns when it must run next (ns; CVW_NEVER: nothing to redial). */
static uint64_t dial_missing(struct lk_net *net, uint64_t now)
{
	uint64_t next = CVW_NEVER;

	cut_hook(net, now);
	if (net->cut_file != NULL)
		next = net->cut_checked + 100000000ull;
	if (net->no_dial || net->ls->fenced || net->cut)
		return next;
	for (unsigned i = 0; i < net->cfg->nnodes; i++) {
		const struct lk_node_cfg *n = &net->cfg->node[i];

		if (n->id == net->ls->nodeid || net->out[n->id] != NULL)
			continue;
		if (now >= net->next_dial[n->id]) {
			uint64_t *w = &net->redial_wait[n->id];

			*w = *w == 0 ? net->redial_ns : *w;
			net->next_dial[n->id] = now + *w;
			*w = *w * 2 < net->redial_max_ns ? *w * 2
							 : net->redial_max_ns;
			dial(net, n);
		}
		if (net->out[n->id] == NULL && net->next_dial[n->id] < next)
			next = net->next_dial[n->id];
	}
	return next;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static void handle(struct lk_net *net, struct epoll_event *ev)
{
	struct lk_conn *c = ev->data.ptr;
	uint64_t v;

	if (c == NULL) {
		do_accept(net);
		return;
	}
	if (c == (void *)net) {
		if (read(net->evfd, &v, sizeof(v)) < 0)
			return;
		return;
	}
	if (c->closing)
		return;
	if (c->state == C_CONNECTING) {
		if (ev->events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			connect_done(net, c);
		return;
	}
	if (ev->events & (EPOLLIN | EPOLLERR | EPOLLHUP))
		conn_read(net, c);
	if (!c->closing && (ev->events & EPOLLOUT))
		conn_flush(net, c);
}

/*
 * Polling without sleeping pays only while the CPU has nothing else to
 * run: each turn yields, and a yield that gives the CPU to another task
 * for long (a CPU-bound process, or our own busy threads) means the CPU
 * is contended. A polling thread that is runnable, not sleeping, is not
 * woken (and so not run early) when its input comes, and may wait for
 * the other task's whole time slice: under a CPU hog on both vCPUs that
 * made lock throughput 6x lower than without polling. So such a yield
 * stops the poll, and LK_SLOW_YIELDS of them within LK_SLOW_WINDOW_NS
 * switch polling off for LK_POLL_BACKOFF_NS: the threads sleep and are
 * woken by their input, as without polling. One slow yield alone is not
 * contention: it is the process's own thread on that CPU working for a
 * while (ucfs-lockbench's caller setting up 1,000 names), an interrupt,
 * or the hypervisor running another guest; switching polling off for it
 * made a whole 400-batch run (~250 ms) unpolled, and 2x slower.
 */
enum {
	LK_YIELD_BUSY_NS = 250000,
	LK_SLOW_YIELDS = 3,
	LK_SLOW_WINDOW_NS = 100000000,
	LK_POLL_BACKOFF_NS = 200000000,
};

static int poll_allowed(struct lk_net *net)
{
	return lk_now_ns() >=
	       __atomic_load_n(&net->poll_off_until, __ATOMIC_RELAXED);
}

/* Yield the CPU between two polls; 0 if polling must stop. */
static int poll_yield(struct lk_net *net)
{
	uint64_t t0 = lk_now_ns(), t1;

	sched_yield();
	t1 = lk_now_ns();
	if (t1 - t0 < LK_YIELD_BUSY_NS)
		return 1;
	/* racy between pollers, harmlessly: a slow yield more or less */
	if (t1 - __atomic_load_n(&net->slow_since, __ATOMIC_RELAXED) >
	    LK_SLOW_WINDOW_NS) {
		__atomic_store_n(&net->slow_since, t1, __ATOMIC_RELAXED);
		__atomic_store_n(&net->slow_yields, 0, __ATOMIC_RELAXED);
	}
	if (__atomic_add_fetch(&net->slow_yields, 1, __ATOMIC_RELAXED) <
	    LK_SLOW_YIELDS)
		return 0;
	__atomic_store_n(&net->poll_off_until, t1 + LK_POLL_BACKOFF_NS,
			 __ATOMIC_RELAXED);
	__atomic_fetch_add(&net->poll_backoffs, 1, __ATOMIC_RELAXED);
	return 0;
}

/*
 * Polling pays only where input tends to come within the window: a
 * window that sees none burns up to poll_us of a CPU, which a CPU-bound
 * machine takes from the threads doing the work (2-node rm -rf: a tenth
 * to a fifth of the windows caught a frame). So the network thread
 * polls only while at least LK_SPIN_WINS_MIN of its last 16 windows saw
 * input come within them; it learns that from the windows it sleeps
 * through too (the time its sleep ended), so polling resumes by itself
 * once the traffic is dense again.
 */
enum { LK_SPIN_WINS_MIN = 4 };

static void spin_learn(struct lk_net *net, int win)
{
	net->spin_wins = (net->spin_wins << 1 | (win ? 1u : 0u)) & 0xffffu;
}

/* How long to sleep until @next (ns), in whole ms rounded up so that
 * the wake-up is not early; -1 (until an event) for CVW_NEVER. */
static int sleep_ms(uint64_t next)
{
	uint64_t now = lk_now_ns(), ms;

	if (next == CVW_NEVER)
		return -1;
	if (next <= now)
		return 0;
	ms = (next - now + 999999) / 1000000;
	return ms < INT_MAX ? (int)ms : INT_MAX;
}

/*
 * Wait for events. For net->spin_ns after the last lock frame came in
 * (@busy_until), poll without sleeping first, yielding the CPU at every
 * turn: lock traffic comes in bursts (a lock loop, a batch after its
 * lookups), and on this VM a network thread that went to sleep costs
 * the next frame a halted vCPU's wake-up, more than a round trip. *spun
 * is set when it polled, *hit when that caught an event, *skipped when
 * it did not poll because recent windows saw nothing (spin_learn).
 * ls->mu not held.
 */
static int net_wait(struct lk_net *net, struct epoll_event *evs, int nev,
		    uint64_t busy_until, int *spun, int *hit, int *skipped)
{
	uint64_t end = busy_until;
	int window = lk_now_ns() < end, n = 0;

	*spun = *hit = *skipped = 0;
	if (window && __builtin_popcount(net->spin_wins) < LK_SPIN_WINS_MIN) {
		*skipped = 1;
		busy_until = 0;
	}
	if (!poll_allowed(net))
		busy_until = 0;
	while (lk_now_ns() < busy_until) {
		*spun = 1;
		n = epoll_wait(net->epfd, evs, nev, 0);
		if (n != 0 || !poll_yield(net))
			break;
	}
	*hit = n > 0;
	if (n == 0)
		n = epoll_wait(net->epfd, evs, nev, sleep_ms(net->next_tick));
	if (window)
		spin_learn(net, *hit || (n > 0 && lk_now_ns() < end));
	return n;
}

static void *net_main(void *arg)
{
	struct lk_net *net = arg;
	struct lk_ls *ls = net->ls;
	struct epoll_event evs[64];
	uint64_t waited = 0; /* ls->stats.unlocks_waited at the last turn */

	net_self = net;
	net->next_tick = lk_now_ns(); /* dial at once */
	pthread_mutex_lock(&ls->mu);
	ls->net_next = net->next_tick;
	while (!net->stop) {
		uint64_t now, next, busy_until = net->last_rx + net->spin_ns;
		int n, spun, hit, skipped;

		pthread_mutex_unlock(&ls->mu);
		n = net_wait(net, evs, 64, busy_until, &spun, &hit, &skipped);
		lk_net_lock(ls);
		ls->stats.net_wakeups++;
		ls->stats.net_spins += spun;
		ls->stats.net_spin_hits += hit;
		ls->stats.net_spin_skips += skipped;
		ls->stats.poll_backoffs =
		    __atomic_load_n(&net->poll_backoffs, __ATOMIC_RELAXED);
		for (int i = 0; i < n; i++)
			handle(net, &evs[i]);
		lk_out_flush(ls); /* replies first, housekeeping after */
#ifdef LK_TIMELINE
		if (lk_tl[LK_TL_MASTER_DONE] > lk_tl[LK_TL_MASTER_SENT])
			LK_TL(LK_TL_MASTER_SENT);
#endif
		reap(net); /* a link lost in this turn is dialed in it */
		now = lk_now_ns();
		next = dial_missing(net, now);
		next = min_u64(next, lk_member_tick(ls, now));
		next = min_u64(next, lk_core_tick(ls, now));
		lk_out_flush(ls);
		if (ls->stats.unlocks_waited != waited) {
			/* idle unlocks leave records in out[] (lk_unlock):
			 * flush them within LK_TICK_BUSY_NS as they come */
			waited = ls->stats.unlocks_waited;
			next = min_u64(next, now + LK_TICK_BUSY_NS);
		}
		net->next_tick = next;
		ls->net_next = next;
		__atomic_store_n(&ls->usable,
				 ls->quorate && ls->rphase == 0 && !ls->fenced,
				 __ATOMIC_RELEASE);
		if (ls->fenced && !net->no_dial) {
			/* out of the cluster for good: stop looking alive */
			net->no_dial = 1;
			for (struct lk_conn *c = net->conns; c; c = c->next)
				conn_drop(net, c, "fenced");
		}
		reap(net);
	}
	pthread_mutex_unlock(&ls->mu);
	return NULL;
}

/* Published by net_main at the end of every turn, under ls->mu: request
 * handlers ask before every operation, and taking ls->mu for it made
 * them queue behind the network and callback threads (about 1,500
 * futex calls per node in a 2-node rm -rf of 14,806 files). */
int lk_ls_usable(struct lk_ls *ls)
{
	return __atomic_load_n(&ls->usable, __ATOMIC_ACQUIRE);
}

/*
 * Poll @pf without sleeping for up to @spin_ns before net_wait_rx
 * sleeps: a reply that comes within that time finds this thread
 * running, and nobody has to wake it (on this VM a halted vCPU takes
 * longer to wake than a whole round trip). Each turn yields, so a
 * thread that shares this CPU — the master's network thread when the
 * process has one CPU to itself — is not held up by the spin. Returns
 * what poll returned (0: nothing came).
 */
static int spin_poll(struct lk_net *net, struct pollfd *pf, uint64_t spin_ns)
{
	uint64_t end = lk_now_ns() + spin_ns;
	int n;

	do {
		n = poll(pf, 2, 0);
		if (n != 0)
			return n;
		if (!poll_yield(net))
			break;
	} while (lk_now_ns() < end);
	return 0;
}

/*
 * xp.wait_rx: a thread in lk_wait reads @node's connection itself. While
 * it sleeps in poll() the network thread does not watch that socket
 * (EPOLLIN off), so the reply wakes only the waiter. ls->mu held on entry
 * and return, dropped while sleeping.
 */
static int net_wait_rx(void *ctx, uint32_t node, uint64_t spin_ns)
{
	struct lk_net *net = ctx;
	struct lk_ls *ls = net->ls;
	struct lk_conn *c = link_conn(net, node);
	struct pollfd pf[2];
	uint64_t v;
	int n, spun;

	if (c == NULL || c->closing || net->stop || !net->started)
		return -EAGAIN;
	c->polled = 1;
	set_events(net, c);
	net->pollers++;
	pf[0] = (struct pollfd){.fd = c->fd, .events = POLLIN};
	pf[1] = (struct pollfd){.fd = net->rxfd, .events = POLLIN};
	pthread_mutex_unlock(&ls->mu);
	if (!poll_allowed(net))
		spin_ns = 0;
	n = spin_ns != 0 ? spin_poll(net, pf, spin_ns) : 0;
	spun = n > 0;
	if (n == 0)
		n = poll(pf, 2, 5);
	pthread_mutex_lock(&ls->mu);
	ls->stats.rx_spins += spin_ns != 0;
	ls->stats.rx_spin_hits += spun;
	if (n > 0 && pf[1].revents != 0)
		(void)!read(net->rxfd, &v, sizeof(v));
	if (n > 0 && pf[0].revents != 0 && !c->closing) {
		ls->rx_in_poller = 1;
		conn_read(net, c);
		ls->rx_in_poller = 0;
		lk_out_flush(ls);
	}
	c->polled = 0;
	if (!c->closing)
		set_events(net, c);
	if (--net->pollers == 0)
		pthread_cond_broadcast(&ls->cv); /* lk_net_stop */
	return 0;
}

/*
 * xp.rx_hold / rx_release: an lk_lock_batch call sent @node requests
 * while it still builds its lkbs, and keeps holding ls->mu. A reply that
 * comes meanwhile would make the network thread block on ls->mu and need
 * a wake-up (tens of µs here) once the call ends; so the network thread
 * stops reading that link until the call reads what came itself.
 */
static int net_rx_hold(void *ctx, uint32_t node)
{
	struct lk_net *net = ctx;
	struct lk_conn *c = link_conn(net, node);

	if (c == NULL || c->closing || c->polled || c->held || net->stop ||
	    !net->started)
		return 0;
	c->held = 1;
	set_events(net, c);
	return 1;
}

static void net_rx_release(void *ctx, uint32_t node)
{
	struct lk_net *net = ctx;
	struct lk_ls *ls = net->ls;
	struct lk_conn *c = link_conn(net, node);

	if (c == NULL || !c->held)
		return;
	c->held = 0;
	if (c->closing)
		return;
	ls->rx_in_poller = 1;
	conn_read(net, c);
	ls->rx_in_poller = 0;
	if (!c->closing)
		set_events(net, c);
}

/* xp.poll_rx: the input already waiting, read by the caller (ls->mu
 * held, not the network thread). The network thread may be handed the
 * same readiness by its own epoll_wait: it then finds the socket empty
 * (conn_read stops at EAGAIN). Connections are only freed by the network
 * thread (reap), so none of these can go away under it. */
static void net_poll_rx(void *ctx)
{
	struct lk_net *net = ctx;
	struct epoll_event evs[16];
	int n;

	if (!net->started || net->stop)
		return;
	n = epoll_wait(net->epfd, evs, 16, 0);
	for (int i = 0; i < n; i++)
		if (evs[i].data.ptr != NULL && evs[i].data.ptr != (void *)net)
			handle(net, &evs[i]);
}

static void net_wake_rx(void *ctx)
{
	struct lk_net *net = ctx;
	uint64_t one = 1;

	(void)!write(net->rxfd, &one, sizeof(one));
}

enum { LK_XMIT_GROUP = 32 }; /* frames per sendmsg */

/* Each frame goes out followed by its tag (lk_auth.h). */
static int net_xmit(void *ctx, uint32_t node, const void *buf, size_t len)
{
	struct lk_net *net = ctx;
	struct lk_conn *c = link_conn(net, node);
	const uint8_t *p = buf;
	struct iovec iov[2 * LK_XMIT_GROUP];
	uint8_t tags[LK_XMIT_GROUP][LK_FRAME_TAG];
	int cnt = 0, ret = 0;

	if (c == NULL || c->state != C_AUTHED || c->closing)
		return -ENOTCONN;
	for (size_t off = 0; off < len && ret == 0;) {
		const struct lk_hdr *h = (const void *)(p + off);
		int k = cnt / 2;

		fault_hook(net, h->type);
		lk_auth_frame_tag(c->fkey, net->ls->nodeid, h->seq, h,
				  h->length, tags[k]);
		iov[cnt++] = (struct iovec){(void *)h, h->length};
		iov[cnt++] = (struct iovec){tags[k], LK_FRAME_TAG};
		off += h->length;
		if (cnt == 2 * LK_XMIT_GROUP || off >= len) {
			ret = conn_queue(net, c, iov, cnt);
			cnt = 0;
		}
	}
	return ret;
}

int lk_net_create(struct lk_ls *ls, const struct lk_config *cfg,
		  struct lk_net **out, struct lk_xport *xp)
{
	uint8_t buf_inc[32];
	const struct lk_node_cfg *self = lk_config_node(cfg, ls->nodeid);
	struct lk_net *net;
	struct epoll_event ev = {.events = EPOLLIN};
	const char *kill_at = getenv("UCFS_LK_KILL_AT");
	const char *redial = getenv("UCFS_LK_REDIAL_MS");
	int one = 1, ret;

	if (self == NULL)
		return -EINVAL;
	net = calloc(1, sizeof(*net));
	if (net == NULL)
		return -ENOMEM;
	net->ls = ls;
	net->cfg = cfg;
	net->spin_ns = (uint64_t)cfg->poll_us * 1000ull;
	net->spin_wins = 0xffffu; /* poll until windows go empty */
	net->lfd = net->evfd = net->epfd = net->rxfd = -1;
	lk_auth_nonce(buf_inc); /* random bytes */
	memcpy(&net->incarnation, buf_inc, sizeof(net->incarnation));
	net->kill_at = kill_at != NULL ? strtoull(kill_at, NULL, 10) : 0;
	net->cut_file = getenv("UCFS_LK_CUT");
	net->redial_ns =
	    (redial != NULL ? strtoull(redial, NULL, 10) : LK_REDIAL_MS) *
	    1000000ull;
	net->redial_max_ns = LK_REDIAL_MAX_MS * 1000000ull;
	if (net->redial_max_ns < net->redial_ns)
		net->redial_max_ns = net->redial_ns;
	net->epfd = epoll_create1(EPOLL_CLOEXEC);
	net->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	net->rxfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	net->lfd =
	    socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (net->epfd < 0 || net->evfd < 0 || net->rxfd < 0 || net->lfd < 0) {
		ret = -errno;
		goto out_free;
	}
	setsockopt(net->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* only the configured address, never INADDR_ANY */
	if (bind(net->lfd, (const struct sockaddr *)&self->addr,
		 sizeof(self->addr)) < 0 ||
	    listen(net->lfd, 64) < 0) {
		ret = -errno;
		goto out_free;
	}
	ev.data.ptr = NULL;
	epoll_ctl(net->epfd, EPOLL_CTL_ADD, net->lfd, &ev);
	ev.data.ptr = net;
	epoll_ctl(net->epfd, EPOLL_CTL_ADD, net->evfd, &ev);
	xp->xmit = net_xmit;
	xp->wait_rx = net_wait_rx;
	xp->flushes = 1;
	xp->wake_rx = net_wake_rx;
	xp->poll_rx = net_poll_rx;
	xp->rx_hold = net_rx_hold;
	xp->rx_release = net_rx_release;
	xp->ctx = net;
	*out = net;
	return 0;
out_free:
	lk_net_destroy(net);
	return ret;
}

int lk_net_start(struct lk_net *net)
{
	int ret = pthread_create(&net->thread, NULL, net_main, net);
	char name[16];

	if (ret != 0)
		return -ret;
	snprintf(name, sizeof(name), "lk-net%u", net->ls->nodeid);
	pthread_setname_np(net->thread, name); /* for perf and top */
	net->started = 1;
	return 0;
}

/* Stop dialing (fenced, or leaving). ls->mu held. */
void lk_net_quiesce(struct lk_net *net)
{
	net->no_dial = 1;
}

/* Does @node answer: one of our connections with it is authenticated,
 * or our dial reached a listener and awaits its handshake? (It runs,
 * even if the link is not up both ways yet.) ls->mu held. */
int lk_net_peer_answers(const struct lk_net *net, uint32_t node)
{
	const struct lk_conn *o, *i;

	if (node >= LK_MAX_NODES)
		return 0;
	o = net->out[node];
	i = net->in[node];
	return (o != NULL && !o->closing && o->state != C_CONNECTING) ||
	       (i != NULL && !i->closing);
}

/* Is the link to @node authenticated both ways? ls->mu held. */
int lk_net_peer_ok(const struct lk_net *net, uint32_t node)
{
	return node < LK_MAX_NODES && net->out[node] != NULL &&
	       net->out[node]->state == C_AUTHED && !net->out[node]->closing &&
	       net->in[node] != NULL && !net->in[node]->closing;
}

/* Bytes still queued for @node (0 when everything left). ls->mu held. */
size_t lk_net_pending(const struct lk_net *net, uint32_t node)
{
	const struct lk_conn *c = link_conn(net, node);

	return c != NULL && !c->closing ? c->wlen - c->woff : 0;
}

void lk_net_stop(struct lk_net *net)
{
	uint64_t one = 1;

	if (net == NULL || !net->started)
		return;
	pthread_mutex_lock(&net->ls->mu);
	net->stop = 1;
	while (net->pollers > 0) { /* a waiter still holds a connection */
		net_wake_rx(net);
		pthread_cond_wait(&net->ls->cv, &net->ls->mu);
	}
	pthread_mutex_unlock(&net->ls->mu);
	/* (an eventfd write fails only when its counter would overflow:
	 * then it is not 0, and the thread wakes anyway) */
	(void)!write(net->evfd, &one, sizeof(one));
	pthread_join(net->thread, NULL);
	net->started = 0;
}

void lk_net_destroy(struct lk_net *net)
{
	if (net == NULL)
		return;
	lk_net_stop(net);
	while (net->conns != NULL) {
		struct lk_conn *c = net->conns;

		net->conns = c->next;
		conn_free(net, c);
	}
	if (net->lfd >= 0)
		close(net->lfd);
	if (net->evfd >= 0)
		close(net->evfd);
	if (net->rxfd >= 0)
		close(net->rxfd);
	if (net->epfd >= 0)
		close(net->epfd);
	free(net);
}
