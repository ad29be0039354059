/*
 * fs_super.c — mount and unmount of the storage layer: superblock read
 * and verification, slot claim in the slot map, journal replay, and the
 * set-up of cache, journal and allocator.
 *
 * Slot claims: a nolock mount must hold the device exclusively (BD_EXCL,
 * which fs_core_open takes, so a second nolock mount fails with -EBUSY).
 * It then replays every slot's journal (a nolock mount is the only user,
 * so any slot left mounted belongs to a crashed node), and claims slot 0
 * with FS_SLOT_NOLOCK. A dlm mount (fs_cluster.h) opens the device
 * shared (plus a shared flock, so nolock and dlm mounts on one machine
 * exclude each other), refuses a superblock not made for dlm or of
 * another cluster, takes its slot by the slot's DLM lock, then the fs
 * glock in EX (kept until the mount is complete), recovers slots whose
 * owner is gone (fs_core_recover_slots), refuses a slot map with a
 * nolock claim, writes its claim and replays its own journal.
 * Clean unmount: checkpoint, journal header clean, (dlm: dead slots
 * freed,) slot free.
 *
 * The slot map and the journal headers are written in place with FUA and
 * never journaled; only their first sector changes (FORMAT.md).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "fusefs/cluster/fs_cluster.h"
#include "fusefs/core/fs_core_priv.h"
#include "fusefs/cluster/fs_iopen.h"
#include "lockmgr/lk.h"

void fs_core_opts_init(struct fs_core_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->nolock = 1;
	o->commit_s = 5;
	o->cache_mb = 256;
	o->slot = -1;
}

/* lockproto=dlm on this superblock, with this cluster's name? */
static int check_dlm_sb(struct fs *fs, char *why, size_t whylen)
{
	const char *name = fs_cluster_name(fs->opts.cl);
	const char *lt = fs->sb.locktable;
	size_t n = strlen(name);
	char msg[300];

	if (strncmp(fs->sb.lockproto, "dlm", FS_LOCKPROTO_MAX) != 0)
		return fs_why(why, whylen, -EINVAL, "lockproto=dlm on a "
			      "filesystem made for lockproto=nolock (mkfs.ucfs "
			      "-p dlm -t CLUSTER:NAME makes a cluster one)");
	if (lt[0] != '\0' && (strncmp(lt, name, n) != 0 || lt[n] != ':')) {
		snprintf(msg, sizeof(msg), "the filesystem's lock table is "
			 "'%.*s' but this node is in cluster '%s'",
			 FS_LOCKTABLE_MAX, lt, name);
		return fs_why(why, whylen, -EINVAL, msg);
	}
	return 0;
}

/* Read superblock copy @blk into @sb and check it: 0, or -errno with the
 * reason in @msg. */
static int sb_load(struct fs *fs, uint64_t blk, struct fs_sb *sb, char *msg,
		   size_t msglen)
{
	uint64_t dev_blocks = bd_size(fs->bd) / FS_BLOCK_SIZE;
	int ret;

	ret = bd_read(fs->bd, sb, FS_BLOCK_SIZE, blk << FS_BLOCK_SHIFT);
	if (ret < 0)
		return fs_why(msg, msglen, ret, "read error");
	if (sb->hdr.magic != FS_MAGIC || sb->hdr.type != FS_BT_SB)
		return fs_why(msg, msglen, -EINVAL, "not a ucfs superblock");
	if (fs_blk_verify(sb, FS_BT_SB, blk) < 0)
		return fs_why(msg, msglen, -EUCLEAN, "checksum mismatch");
	return fs_sb_check(sb, dev_blocks, !fs->opts.ro, msg, msglen);
}

/* The backup is used: a rw mount restores the primary from it (the
 * superblock never changes after mkfs, so the copy is exact). */
static int sb_restore(struct fs *fs, struct fs_sb *sb)
{
	fs->sb_backup = 1;
	if (fs->opts.ro)
		return 0;
	fs_blk_seal(sb, FS_BT_SB, FS_SB_BLK, sb->hdr.seq);
	if (bd_write(fs->bd, sb, FS_BLOCK_SIZE, FS_SB_BLK << FS_BLOCK_SHIFT,
		     BD_IO_FUA) == 0)
		fs->sb_backup = 2;
	return 0;
}

/*
 * Superblock policy (FORMAT.md "Superblock"): a primary that is a ucfs
 * superblock but damaged (checksum, geometry) is replaced by a good
 * backup, with fs->sb_backup / fs->notice saying so. A primary that is
 * not ucfs at all (overwritten by another format?) is refused unless the
 * caller asks for the backup (opts.sb_backup), since mounting a device
 * that now holds something else would destroy it. Version/feature
 * refusals and truncated devices are never overridden.
 */
static int read_sb(struct fs *fs, char *why, size_t whylen)
{
	struct fs_sb *sb = bd_buf_alloc(FS_BLOCK_SIZE);
	char pmsg[160] = "", bmsg[160] = "", msg[400];
	int ret, bret = -EINVAL;

	if (sb == NULL)
		return -ENOMEM;
	ret = fs->opts.sb_backup ? -EUCLEAN :
	      sb_load(fs, FS_SB_BLK, sb, pmsg, sizeof(pmsg));
	if (ret == 0 || ret == -EIO || ret == -EPROTONOSUPPORT ||
	    ret == -EFBIG) {
		if (ret < 0)
			fs_why(why, whylen, ret, ret == -EIO ?
			       "cannot read the superblock" : pmsg);
		goto out_done;
	}
	bret = sb_load(fs, FS_SB_BACKUP_BLK, sb, bmsg, sizeof(bmsg));
	if (bret == 0 && (ret == -EUCLEAN || fs->opts.sb_backup)) {
		ret = sb_restore(fs, sb);
		snprintf(fs->notice, sizeof(fs->notice),
			 "superblock (block 0) %s%s: mounted with the backup "
			 "superblock (block 1)%s", fs->opts.sb_backup ?
			 "ignored (sb=backup)" : "is bad: ", pmsg,
			 fs->sb_backup == 2 ? ", block 0 rewritten from it" :
			 "");
		goto out_done;
	}
	if (ret == -EINVAL && bret == 0)
		snprintf(msg, sizeof(msg), "not a ucfs filesystem (block 0), "
			 "but block 1 holds a valid ucfs backup superblock: if "
			 "block 0 was overwritten by mistake, mount with the "
			 "backup (sb=backup)");
	else if (ret == -EINVAL)
		snprintf(msg, sizeof(msg), "not a ucfs filesystem");
	else
		snprintf(msg, sizeof(msg), "superblock (block 0): %s; backup "
			 "superblock (block 1): %s", fs->opts.sb_backup ?
			 "not used (sb=backup)" : pmsg, bmsg);
	if (fs->opts.sb_backup && bret < 0)
		ret = bret;
	fs_why(why, whylen, ret, msg);
out_done:
	if (ret == 0)
		memcpy(&fs->sb, sb, sizeof(*sb));
	free(sb);
	return ret;
}

static int slotmap_io(struct fs *fs, struct fs_slotmap *sm, int write)
{
	int ret;

	if (write) {
		fs_blk_seal(sm, FS_BT_SLOTMAP, FS_SLOTMAP_BLK,
			    sm->hdr.seq + 1);
		return bd_write(fs->bd, sm, FS_BLOCK_SIZE,
				FS_SLOTMAP_BLK << FS_BLOCK_SHIFT, BD_IO_FUA);
	}
	ret = bd_read(fs->bd, sm, FS_BLOCK_SIZE,
		      FS_SLOTMAP_BLK << FS_BLOCK_SHIFT);
	if (ret < 0)
		return ret;
	ret = fs_blk_verify(sm, FS_BT_SLOTMAP, FS_SLOTMAP_BLK);
	if (ret == 0 && sm->slot_count != fs->sb.slot_count)
		ret = -EUCLEAN;
	return ret;
}

/* Replay every slot (nolock) or just @slot. */
static int replay_slots(struct fs *fs, const struct fs_slotmap *sm,
			int all, char *why, size_t whylen)
{
	for (unsigned s = 0; s < fs->sb.slot_count; s++) {
		unsigned n = 0;
		int ret;

		if (!all && s != fs->slot)
			continue;
		if (all && s != fs->slot &&
		    sm->slots[s].state == FS_SLOT_FREE)
			continue;
		ret = fs_journal_replay(fs, s, fs->ro, &n, why, whylen);
		if (ret < 0)
			return ret;
	}
	return 0;
}

static int claim_slot(struct fs *fs, struct fs_slotmap *sm, char *why,
		      size_t whylen)
{
	struct fs_slot_ent *e;
	int slot = fs->opts.slot;

	if (fs->opts.nolock) {
		/* slot 0; a test may pick another (two library mounts
		 * standing for two nodes on one device) */
		slot = slot < 0 ? 0 : slot;
		if ((unsigned)slot >= sm->slot_count)
			return fs_why(why, whylen, -EINVAL, "no such slot");
	} else {
		for (unsigned s = 0; s < sm->slot_count; s++)
			if (sm->slots[s].flags & FS_SLOT_NOLOCK)
				return fs_why(why, whylen, -EBUSY,
					      "slot map holds a nolock claim: "
					      "mounted (or crashed) with "
					      "lockproto=nolock");
		if (fs->cl != NULL)
			slot = (int)fs->slot;	/* its lock is ours */
		else if (slot < 0)
			for (unsigned s = 0; s < sm->slot_count && slot < 0;
			     s++)
				if (sm->slots[s].state == FS_SLOT_FREE)
					slot = (int)s;
		if (slot < 0 || (unsigned)slot >= sm->slot_count)
			return fs_why(why, whylen, -EBUSY, "no free slot");
	}
	fs->slot = (unsigned)slot;
	if (fs->ro)
		return 0;
	e = &sm->slots[slot];
	e->state = FS_SLOT_MOUNTED;
	e->flags = fs->opts.nolock ? FS_SLOT_NOLOCK : 0;
	e->node_id = fs->opts.node_id;
	e->generation++;
	e->mount_time = time(NULL);
	fs->slot_gen = e->generation;
	return 0;
}

static int release_slot(struct fs *fs)
{
	struct fs_slotmap *sm = bd_buf_alloc(FS_BLOCK_SIZE);
	int ret;

	if (sm == NULL)
		return -ENOMEM;
	ret = slotmap_io(fs, sm, 0);
	if (ret == 0) {
		struct fs_slot_ent *e = &sm->slots[fs->slot];

		e->state = FS_SLOT_FREE;
		e->flags = 0;
		ret = slotmap_io(fs, sm, 1);
	}
	free(sm);
	return ret;
}

static void fs_free_all(struct fs *fs)
{
	fs_data_destroy(fs);
	fs_statfs_destroy(fs);
	fs_alloc_destroy(fs);
	fs_cache_destroy(fs);
	if (fs->own_bd)
		bd_close(fs->bd);
	if (fs->share_fd >= 0)
		close(fs->share_fd);
	free(fs);
}

/* Replay dead slot @s's journal (its owner's locks are gone) and count
 * it. */
static int recover_one(struct fs *fs, unsigned s)
{
	char why[160];
	unsigned n = 0;
	int ret;

	ret = fs_journal_replay(fs, s, 0, &n, why, sizeof(why));
	if (ret == 0)
		fs_cluster_note_recovery(fs->cl, s, n);
	return ret;
}

int fs_core_recover_slots(struct fs *fs, int mark_free)
{
	struct fs_slotmap *sm = bd_buf_alloc(FS_BLOCK_SIZE);
	int ret, dirty = 0;

	if (sm == NULL)
		return -ENOMEM;
	ret = slotmap_io(fs, sm, 0);
	for (unsigned s = 0; s < fs->sb.slot_count && ret == 0; s++) {
		int got;

		if (s == fs->slot || sm->slots[s].state == FS_SLOT_FREE)
			continue;
		got = fs_cluster_slot_try(fs->cl, s);
		if (got <= 0) {
			ret = got;	/* 0: alive; keep going */
			continue;
		}
		ret = recover_one(fs, s);
		if (ret == 0 && mark_free) {
			sm->slots[s].state = FS_SLOT_FREE;
			sm->slots[s].flags = 0;
			dirty = 1;
		}
		fs_cluster_slot_drop(fs->cl, s);
	}
	if (ret == 0 && dirty)
		ret = slotmap_io(fs, sm, 1);
	free(sm);
	return ret;
}

int fs_core_recover_node(struct fs *fs, uint32_t node)
{
	struct fs_slotmap *sm = bd_buf_alloc(FS_BLOCK_SIZE);
	int ret;

	if (sm == NULL)
		return -ENOMEM;
	ret = slotmap_io(fs, sm, 0);
	for (unsigned s = 0; s < fs->sb.slot_count && ret == 0; s++) {
		if (s == fs->slot || sm->slots[s].state != FS_SLOT_MOUNTED ||
		    sm->slots[s].node_id != node)
			continue;
		if (!fs_cluster_slot_dead(fs->cl, s))
			continue; /* still beating: not ours to replay */
		ret = recover_one(fs, s);
		/* its orphans and its free log: recovered by the iopen
		 * worker, off this thread (it takes locks; fs_iopen.h) */
		if (ret == 0)
			fs_iopen_slot_dead(fs, s);
	}
	free(sm);
	return ret;
}

/* 1 if slot @s's slotinfo, read from the disk, holds orphans or free
 * log entries, or its statfs change record is not zero; 0 if not (or
 * unreadable: a hint only). */
static int slot_has_leftovers(struct fs *fs, unsigned s)
{
	const struct fs_slotinfo *si;
	struct fs_buf *b;
	int ret;

	fs_core_slotinfo_forget(fs, s); /* no stale copy */
	if (fs_buf_read(fs, fs_slotinfo_blk(s), FS_BT_SLOTINFO, &b) < 0)
		return 0;
	si = b->data;
	ret = si->orphan_head != 0 || si->flog_count != 0;
	fs_buf_put(b);
	fs_core_slotinfo_forget(fs, s); /* read again under its lock */
	return ret || fs_statfs_slot_pending(fs, s);
}

int fs_core_slots_leftover(struct fs *fs, uint64_t *slots)
{
	struct fs_slotmap *sm = bd_buf_alloc(FS_BLOCK_SIZE);
	int ret;

	*slots = 0;
	if (sm == NULL)
		return -ENOMEM;
	ret = slotmap_io(fs, sm, 0);
	for (unsigned s = 0; s < fs->sb.slot_count && s < 64 && ret == 0; s++)
		if (s != fs->slot && sm->slots[s].state == FS_SLOT_FREE &&
		    slot_has_leftovers(fs, s))
			*slots |= 1ull << s;
	free(sm);
	return ret;
}

void fs_core_slotinfo_forget(struct fs *fs, unsigned slot)
{
	struct fs_buf *b = fs_cache_lookup(fs, fs_slotinfo_blk(slot));

	fs_statfs_forget(fs, slot);
	if (b == NULL)
		return;
	fs_cache_unhash(b);
	fs_buf_put(b);
}

/* Does gone node's slot @s hold committed transactions to replay? Read
 * only (the journal scan of a ro mount); an unreadable journal counts
 * as one that does. */
static int journal_pending(struct fs *fs, unsigned s)
{
	char why[160];
	unsigned n = 0;

	return fs_journal_replay(fs, s, 1, &n, why, sizeof(why)) != 0;
}

int fs_core_ro_unrecovered(struct fs *fs, uint64_t members, uint32_t dead,
			   unsigned *slot)
{
	struct fs_slotmap *sm = bd_buf_alloc(FS_BLOCK_SIZE);
	uint64_t gone = 0;
	int ret, rw = 0;

	if (sm == NULL)
		return -ENOMEM;
	ret = slotmap_io(fs, sm, 0);
	for (unsigned s = 0; s < fs->sb.slot_count && s < 64 && ret == 0; s++) {
		uint32_t n = sm->slots[s].node_id;

		if (sm->slots[s].state != FS_SLOT_MOUNTED)
			continue;
		if (n < 64 && n != dead && (members >> n & 1))
			rw = 1;
		else
			gone |= 1ull << s;
	}
	free(sm);
	if (ret < 0)
		return ret;
	/* a gone node whose journal is empty (idle, or checkpointed since
	 * its last change) left nothing half written: nothing to wait for */
	for (unsigned s = 0; !rw && gone != 0; s++, gone >>= 1)
		if ((gone & 1) && journal_pending(fs, s)) {
			*slot = s;
			return 1;
		}
	return 0;
}

/* A ro cluster node takes no slot and replays nothing: it mounts only
 * when no journal waits for a replay (fs_core_ro_unrecovered). */
static int ro_cluster_slots(struct fs *fs, char *why, size_t whylen)
{
	uint64_t members = 0;
	unsigned slot = 0;
	char msg[200];
	int ret;

	fs_cluster_members(fs->cl, &members);
	ret = fs_core_ro_unrecovered(fs, members, 0, &slot);
	if (ret < 0)
		return fs_why(why, whylen, ret, "bad slot map");
	if (ret == 0)
		return 0;
	snprintf(msg, sizeof(msg),
		 "the journal of slot %u (a node that is "
		 "gone) needs replay, which a ro node cannot do: mount a "
		 "read-write node first",
		 slot);
	return fs_why(why, whylen, -EROFS, msg);
}

static int mount_slots(struct fs *fs, char *why, size_t whylen)
{
	struct fs_slotmap *sm = bd_buf_alloc(FS_BLOCK_SIZE);
	int ret;

	if (sm == NULL)
		return -ENOMEM;
	if (fs->cl != NULL && fs->ro) {
		free(sm);
		return ro_cluster_slots(fs, why, whylen);
	}
	ret = slotmap_io(fs, sm, 0);
	if (ret < 0) {
		fs_why(why, whylen, ret, "bad slot map");
		goto out_free;
	}
	ret = claim_slot(fs, sm, why, whylen);
	if (ret < 0)
		goto out_free;
	if (fs->cl != NULL && !fs->ro) {
		/* first in after a crash: dead nodes' journals (their slot
		 * locks are free), under the fs glock in EX */
		ret = fs_core_recover_slots(fs, 1);
		if (ret == 0)
			ret = slotmap_io(fs, sm, 0);
		if (ret == 0)
			ret = claim_slot(fs, sm, why, whylen);
		if (ret < 0) {
			fs_why(why, whylen, ret, "cannot recover the journal "
			       "of a dead node");
			goto out_free;
		}
	}
	ret = replay_slots(fs, sm, fs->opts.nolock, why, whylen);
	if (ret < 0)
		goto out_free;
	if (!fs->ro) {
		if (fs->opts.nolock)
			for (unsigned s = 0; s < sm->slot_count; s++)
				if (s != fs->slot)
					sm->slots[s].state = FS_SLOT_FREE;
		ret = slotmap_io(fs, sm, 1);
		if (ret < 0)
			fs_why(why, whylen, ret, "cannot write the slot map");
	}
out_free:
	free(sm);
	return ret;
}

/* cache_mb is shared: the data write-behind copies get fs_data_share(),
 * the metadata cache the rest. */
static int cache_data_init(struct fs *fs, unsigned cache_mb)
{
	unsigned mb = cache_mb == 0 ? 256 : cache_mb;
	unsigned share = (unsigned)(fs_data_share(mb) >> 20);
	int ret;

	ret = fs_cache_init(fs, mb > share ? mb - share : 1);
	if (ret == 0)
		ret = fs_data_init(fs, mb);
	return ret;
}

/* dlm: check the superblock, bind the cluster, take a slot by its lock
 * and the fs glock in EX (kept until the mount is complete: the caller
 * releases it with fs_cluster_unlock). */
static int dlm_begin(struct fs *fs, char *why, size_t whylen)
{
	struct fs_cluster *cl = fs->opts.cl;
	int ret;

	if (cl == NULL)
		return fs_why(why, whylen, -EINVAL,
			      "lockproto=dlm needs "
			      "cluster=FILE and node=ID");
	ret = check_dlm_sb(fs, why, whylen);
	if (ret < 0)
		return ret;
	ret = fs_cluster_attach(cl, fs);
	if (ret < 0)
		return fs_why(why, whylen, ret, "cannot set up the fs lock");
	fs->cl = cl;
	/* before any write of ours (FORMAT.md "Journal") */
	ret = fs_cluster_records_join(cl);
	if (ret == -ETIMEDOUT)
		return fs_why(why, whylen, ret,
			      "the nodes writing checkpoint records did not "
			      "turn them off within records_timeout= (this "
			      "device's flush does not cover every node's "
			      "writes): nothing written; see their logs");
	if (ret < 0)
		return fs_why(why, whylen, ret,
			      "cannot turn the cluster's checkpoint records "
			      "off (this device's flush does not cover every "
			      "node's writes)");
	if (fs->ro) /* no slot: no journal, no heartbeat of its own */
		fs->slot = fs->sb.slot_count;
	else
		ret = fs_cluster_slot_claim(cl, fs->sb.slot_count, &fs->slot,
					    why, whylen);
	if (ret < 0)
		return ret;
	ret = fs_cluster_lock(cl, LK_EX);
	if (ret < 0)
		return fs_why(why, whylen, ret, "cannot get the fs lock");
	fs->cl_held = 1;
	return 0;
}

int fs_core_mount(struct bd_dev *bd, const struct fs_core_opts *o,
		  struct fs **out, char *why, size_t whylen)
{
	struct fs *fs = calloc(1, sizeof(*fs));
	int ret;

	if (fs == NULL)
		return -ENOMEM;
	fs->bd = bd;
	fs->opts = *o;
	fs->ro = o->ro;
	fs->share_fd = -1;
	if (!fs->ro && bd_readonly(bd)) {
		free(fs);
		return fs_why(why, whylen, -EROFS,
			      "device is read-only: mount with -o ro");
	}
	ret = read_sb(fs, why, whylen);
	if (ret < 0)
		goto out_free;
	if (!o->nolock) {
		ret = dlm_begin(fs, why, whylen);
		if (ret < 0)
			goto out_free;
	}
	ret = mount_slots(fs, why, whylen);
	if (ret < 0)
		goto out_free;
	ret = cache_data_init(fs, o->cache_mb);
	if (ret < 0)
		goto out_free;
	ret = fs_alloc_init(fs);
	if (ret < 0) {
		fs_why(why, whylen, ret, "bad resource group header");
		goto out_free;
	}
	ret = fs_statfs_init(fs, o->statfs_quantum_s);
	if (ret < 0) {
		fs_why(why, whylen, ret, "cannot set up the statfs records");
		goto out_free;
	}
	ret = fs_journal_init(fs);
	if (ret < 0) {
		fs_why(why, whylen, ret, "cannot start the journal");
		goto out_free;
	}
	if (fs->cl != NULL && !fs->ro)
		ret = fs_cluster_records_start(fs->cl);
	if (ret < 0) {
		fs_why(why, whylen, ret, "cannot start the records agreement");
		fs_journal_shutdown(fs, 0);
		goto out_free;
	}
	ret = fs_statfs_start(fs);
	if (ret < 0) {
		fs_why(why, whylen, ret, "cannot start the statfs worker");
		fs_journal_shutdown(fs, 0);
		goto out_free;
	}
	*out = fs;
	return 0;
out_free:
	if (fs->cl != NULL)
		fs_cluster_detach(fs->cl, fs->cl_held);
	fs->own_bd = 0;
	fs_free_all(fs);
	return ret;
}

/* bd_file_open, waiting up to @wait_ms while the device is held
 * exclusively (-EBUSY) by someone else: a daemon whose mount was just
 * unmounted keeps its claim until it has written everything back. */
static int open_wait(const char *path, unsigned flags, unsigned wait_ms,
		     struct bd_dev **bd)
{
	struct timespec nap = { 0, 50 * 1000 * 1000 };
	unsigned waited = 0;
	int ret;

	for (;;) {
		ret = bd_open_any(path, flags, bd);
		if (ret == -EINVAL)	/* O_DIRECT refused (tmpfs) */
			ret = bd_open_any(path, flags | BD_BUFFERED, bd);
		if (ret != -EBUSY || waited >= wait_ms)
			return ret;
		nanosleep(&nap, NULL);
		waited += 50;
	}
}

/* dlm: a shared flock on the device, so that a nolock mount on this
 * machine (BD_EXCL: an exclusive flock) is refused while dlm nodes are
 * mounted, and the reverse. Not for NBD URIs. 0, or -errno (reason in
 * @why). */
static int share_lock(const char *path, int *fd, char *why, size_t whylen)
{
	int ret;

	*fd = -1;
	if (strstr(path, "://") != NULL)
		return 0;	/* NBD URI: no file to lock (MOUNT.md) */
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0) {
		ret = -errno;
		return fs_why(why, whylen, ret, "cannot open the device");
	}
	if (flock(*fd, LOCK_SH | LOCK_NB) == 0)
		return 0;
	ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
	close(*fd);
	*fd = -1;
	return fs_why(why, whylen, ret, ret == -EBUSY ? "already mounted with "
		      "lockproto=nolock" : "cannot lock the device");
}

int fs_core_open(const char *path, const struct fs_core_opts *o,
		 struct fs **out, char *why, size_t whylen)
{
	unsigned flags = 0;
	struct bd_dev *bd;
	int ret, sfd = -1;

	if (o->ro)
		flags |= BD_RDONLY;
	if (o->nolock && !o->ro)
		flags |= BD_EXCL;
	if (!o->nolock) {
		ret = share_lock(path, &sfd, why, whylen);
		if (ret < 0)
			return ret;
	}
	ret = open_wait(path, flags, o->busy_wait_ms ? o->busy_wait_ms :
			10000, &bd);
	if (ret == -EBUSY) {
		char msg[160];

		snprintf(msg, sizeof(msg), "already mounted with "
			 "lockproto=nolock, or by lockproto=dlm nodes on this "
			 "machine (device still held after %u ms)",
			 o->busy_wait_ms ? o->busy_wait_ms : 10000);
		return fs_why(why, whylen, ret, msg);
	}
	if (ret < 0) {
		char msg[128];

		snprintf(msg, sizeof(msg), "cannot open %s: %s", path,
			 strerror(-ret));
		if (sfd >= 0)
			close(sfd);
		return fs_why(why, whylen, ret, msg);
	}
	ret = fs_core_mount(bd, o, out, why, whylen);
	if (ret < 0) {
		bd_close(bd);
		if (sfd >= 0)
			close(sfd);
		return ret;
	}
	(*out)->own_bd = 1;
	(*out)->share_fd = sfd;
	return 0;
}

int fs_core_unmount(struct fs *fs)
{
	int ret, r2 = 0, derr;

	if (fs == NULL)
		return 0;
	if (fs->cl != NULL && fs_cluster_fenced(fs->cl)) {
		fs_core_abandon(fs);	/* write nothing more */
		return -EIO;
	}
	/* our statfs change into the master last (the worker stopped
	 * first): a failure leaves it in our change record, consistent,
	 * for the next mount of the slot or its recovery */
	fs_statfs_stop(fs);
	if (!fs->ro)
		fs_statfs_fold(fs);
	/* file data written back first; a data write error is reported
	 * but does not keep the journal from being made clean */
	derr = fs->ro ? 0 : fs_journal_sync(fs);
	if (fs->cl != NULL) {
		/* dlm: other nodes' requests may still demote our glocks:
		 * everything in place first, then the ops leave the journal
		 * alone (it goes away next) */
		ret = fs_journal_writeback(fs);
		if (ret < 0)
			goto out_cluster;
		fs_cluster_quiesce(fs->cl);
	}
	ret = fs_journal_shutdown(fs, 1);
	if (!fs->ro && ret == 0 && fs->cl != NULL)
		r2 = fs_core_recover_slots(fs, 1);	/* tidy dead slots */
	if (!fs->ro && ret == 0 && r2 == 0) {
		r2 = release_slot(fs);
		if (r2 == 0)
			r2 = bd_flush(fs->bd);
	}
out_cluster:
	if (fs->cl != NULL) {
		if (ret < 0 || r2 < 0)
			fs_cluster_fence(fs->cl, "unmount could not write back");
		fs_statfs_destroy(fs); /* their glock references first */
		fs_alloc_destroy(fs);
		fs_cluster_close(fs->cl);
	}
	fs_free_all(fs);
	return ret < 0 ? ret : r2 < 0 ? r2 : derr;
}

void fs_core_abandon(struct fs *fs)
{
	if (fs == NULL)
		return;
	if (fs->cl != NULL) {
		fs_journal_abort(fs);
		/* the glock ops and the records agreement leave the journal
		 * alone before it goes */
		fs_cluster_quiesce(fs->cl);
	}
	fs_statfs_stop(fs);
	fs_journal_shutdown(fs, 0);
	fs_statfs_destroy(fs); /* their glock references first */
	fs_alloc_destroy(fs);
	fs_cluster_abandon(fs->cl);
	fs_free_all(fs);
}
