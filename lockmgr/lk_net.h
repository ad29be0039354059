/*
 * lk_net.h — the TCP transport (lk_net.c) and membership (lk_member.c)
 * as the rest of lockmgr sees them. Internal to lockmgr.
 */
#ifndef UCFS_LK_NET_H
#define UCFS_LK_NET_H

#include <stddef.h>
#include <stdint.h>

struct lk_ls;
struct lk_net;
struct lk_config;
struct lk_xport;
struct lk_rec_ctl;

/* Listen on the configured address of ls->nodeid; fills @xp. */
int lk_net_create(struct lk_ls *ls, const struct lk_config *cfg,
		  struct lk_net **out, struct lk_xport *xp);
int lk_net_start(struct lk_net *net);
void lk_net_stop(struct lk_net *net);
void lk_net_destroy(struct lk_net *net);
/* The following need ls->mu. */
void lk_net_quiesce(struct lk_net *net);
int lk_net_peer_ok(const struct lk_net *net, uint32_t node);
int lk_net_peer_answers(const struct lk_net *net, uint32_t node);
size_t lk_net_pending(const struct lk_net *net, uint32_t node);
/* Wake the network thread for a turn now (state its tickers act on
 * changed outside it); any thread, ls->mu held or not. */
void lk_net_kick(struct lk_net *net);
/* Work of another thread is due at @t (ns): wake the network thread if
 * it sleeps past @t (ls->net_next). ls->mu held; no-op without it. */
void lk_net_wake_by(struct lk_ls *ls, uint64_t t);

/* lk_member.c; all with ls->mu held. */
int lk_member_create(struct lk_ls *ls, const struct lk_config *cfg);
void lk_member_destroy(struct lk_ls *ls);
/* The disk liveness hook (lk_ls_config.disk); before the net starts. */
void lk_member_set_disk(struct lk_ls *ls, lk_disk_fn fn, unsigned timeout_ms);
uint64_t lk_member_tick(struct lk_ls *ls, uint64_t now);
void lk_member_rx(struct lk_ls *ls, uint32_t sender, unsigned type,
		  const struct lk_rec_ctl *c);
void lk_member_peer_seen(struct lk_ls *ls, uint32_t node);
void lk_member_peer_lost(struct lk_ls *ls, uint32_t node);
void lk_member_peer_authed(struct lk_ls *ls, uint32_t node,
			   uint64_t incarnation);
/* Tell the members we leave. */
void lk_member_leave(struct lk_ls *ls);

#endif /* UCFS_LK_NET_H */
