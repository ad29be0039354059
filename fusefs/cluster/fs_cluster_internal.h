/*
 * fs_cluster_internal.h — what fs_cluster.c (membership, glock ops,
 * fencing, stats) and fs_recover.c (journal slot locks, recovery of dead
 * nodes) share: the cluster mount's state and three helpers. Not for
 * other files: they use fs_cluster.h.
 */
#ifndef UCFS_FS_CLUSTER_INTERNAL_H
#define UCFS_FS_CLUSTER_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "fusefs/cluster/fs_cluster.h"

struct bd_dev;
struct fs_hb;
struct fs_jrec;
struct fs_stats_lk;
struct lk_lock;

struct fs_cluster {
	struct lk_ls *ls;	  /* immutable after open */
	char name[64];		  /* immutable */
	uint32_t node;		  /* immutable */
	unsigned minhold_ms;	  /* immutable */
	unsigned glock_max;	  /* immutable: the engine's LRU bound */
	unsigned timeout_ms;	  /* immutable: quorum loss -> fence */
	int ro;			  /* immutable: fs_cluster_opts.ro */
	unsigned records_timeout_s; /* immutable: records_timeout= */
	struct fs_glocks *e;	  /* immutable after attach: the engine */
	struct fs_glock *gl;	  /* immutable after attach: FS_LK_FS/0 */
	struct fs_jrec *jrec;	  /* immutable after attach: records
				     agreement (NULL: ro, no JCKPT) */
	struct lk_lock *slot_lk;  /* mount thread: own slot's lock */
	int slot;		  /* immutable after claim; -1 */
	struct lk_lock **try_lk;  /* per slot: recovery locks (thread
				     that took them) */
	unsigned nslots;	  /* immutable after attach */
	struct fs_stats_lk *stlk; /* stats "locks" section */
	struct fs_hb *hb;	  /* immutable after open */
	struct bd_dev *hb_bd;	  /* immutable: owned, or NULL (shared) */
	struct bd_dev *gate_bd;	  /* the mount's device: set by attach
				     before any request, cleared by detach
				     or close (mount thread) */
	uint64_t configured;	  /* immutable: node ids */
	uint32_t node_addr;	  /* immutable: ours (network order) */
	uint16_t node_port;	  /* immutable */
	uint64_t rg_start;	  /* immutable after attach: the rgroup */
	uint32_t rg_blocks;	  /*   geometry, for lock placement */
	uint32_t rg_count;
	uint64_t fence_ms;   /* mu: when we fenced (cvw_now_ms), 0 */
	char fence_why[160]; /* mu: why we fenced ("" until then) */
	int kernel_dropped;  /* mu: the kernel's caches dropped after
				the fence (cl_thread) */

	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct fs *fs;		      /* mu */
	uint64_t deaths;	      /* mu: node-down callbacks */
	int stop;		      /* mu */
	int fenced;		      /* mu */
	uint64_t recoveries;	      /* mu: slots replayed here */
	uint64_t recovered_tx;	      /* mu */
	uint64_t drops, dropped_bufs; /* mu: cache drops */
	uint64_t kinval_skips; /* atomic: drops the kernel had nothing of */
	uint64_t sync_errors;  /* mu */
	unsigned ops_busy;     /* mu: glock ops using fs (cl_fs) */
};

/* The lock manager's log callback (lk_ls_config.log), also ours: level
 * 0 errors, 1 notices (both to stderr), above: dropped. */
void fs_cl_log(int level, const char *msg, void *arg);
/* The mount a glock op or the node-down callback works on, or NULL
 * (mounting, unmounted, quiesced); a non-NULL one stays usable until
 * fs_cl_fs_put (fs_cluster_quiesce waits). */
struct fs *fs_cl_fs(struct fs_cluster *cl);
void fs_cl_fs_put(struct fs_cluster *cl, struct fs *fs);

/* fs_recover.c: the mount lock's recover op (its LVB came back invalid:
 * first mount after a whole-cluster crash, or a node died holding it in
 * EX) and the lock manager's node-down callback (lk_ls_config.recover). */
int fs_cl_gl_recover(struct fs_glock *gl, void *arg);
void fs_cl_node_down(struct lk_ls *ls, uint32_t nodeid, void *arg);

#endif /* UCFS_FS_CLUSTER_INTERNAL_H */
