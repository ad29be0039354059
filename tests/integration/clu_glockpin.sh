#!/bin/sh
# clu_glockpin: an inode the kernel holds keeps its glock (a pin,
# fs_glock_pin), and the glock bound asks the kernel to forget inodes
# (NOTIFY_PRUNE) instead of dropping locks under its cached entries.
# One lockproto=dlm node with glock_max=256 walks a tree of 1,200
# inodes (more than the bound) twice, on a fresh mount: afterwards the
# table is back within the bound (the kernel forgot inodes: FORGETs
# came, the pins went, the LRU dropped their glocks), and no kernel
# entry was invalidated by the walks (kcache attrs, dirs, epochs
# unchanged: a glock dropped for the bound covered nothing the kernel
# still held). The inode bound's prune is the one prune of a dlm mount:
# with inode_max at its default (65,536) it asks for inodes because
# glock_max/2 (128: a kernel-held inode holds its glock and its iopen
# lock) is the smaller bound (namespace.iprune_asked). Without
# a kernel that prunes (FUSE < 7.45) the engine drops pins as it did
# before: the walk checks are then skipped.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_glockpin jq

MAX=256
clu_setup clu_glockpin 1 256 -j 2 -r 64
clu_mount clu_glockpin 1
clu_tree "$M1" 12 99 || fail clu_glockpin_tree
fs_umount "$M1" || fail clu_glockpin_umount0
clu_mount clu_glockpin 1 glock_max=$MAX

st() { clu_stat "$M1" >"$T/$1.json"; }
# the table within the bound, and the kernel-held inodes within half of
# it (each holds its glock and its iopen lock), once the kernel's
# FORGETs came (a prune round every 5 ms; waits at most 20 s, not a
# timed assert)
settle() {
	_i=0
	while [ $_i -lt 200 ]; do
		st "$1"
		jq -e ".glocks.glocks_now <= $MAX and
			.namespace.inodes_referenced <= $MAX / 2" \
			"$T/$1.json" >/dev/null && return 0
		sleep 0.1
		_i=$((_i + 1))
	done
	return 1
}
kc() { jq '.kcache | .attrs + .dirs + .epochs' "$T/$1.json"; }

st s0
if ! jq -e '.glocks.prune' "$T/s0.json" >/dev/null; then
	jq '.kcache.proto_minor' "$T/s0.json"
	skip clu_glockpin "the kernel cannot prune (FUSE < 7.45)"
	exit 0
fi
ls -lR "$M1" >/dev/null
check clu_glockpin_settle1 settle s1
ls -lR "$M1" >/dev/null
check clu_glockpin_settle2 settle s2
jq '{g: .glocks | {glock_max, glocks_now, idle_now, pinned_now,
	pinned_idle_now, prune, pin_drops},
	n: .namespace | {inode_max, inode_bound, iprune_rounds, iprune_asked,
	iprune_refused},
	k: .kcache | {attrs, dirs, epochs},
	refs: .namespace.inodes_referenced,
	forgets: (.fuse.ops.forget.count + .fuse.ops.forget_multi.count)}' \
	"$T/s2.json"
check clu_glockpin_pruned jq -e '.namespace.iprune_asked > 0 and
	.namespace.inode_max > .glocks.glock_max and
	.namespace.inode_bound == .glocks.glock_max / 2 and .glocks.prune and
	.glocks.pin_drops == 0' "$T/s2.json"
check clu_glockpin_forgot jq -e '(.fuse.ops.forget.count +
	.fuse.ops.forget_multi.count) > 0 and
	.namespace.inodes_referenced <= .glocks.glock_max / 2' "$T/s2.json"
check clu_glockpin_pinned jq -e '.glocks.pinned_now > 0 and
	.glocks.pinned_now <= .glocks.glock_max' "$T/s2.json"
check clu_glockpin_no_kinval test "$(kc s0)" -eq "$(kc s2)"

fs_umount "$M1" || fail clu_glockpin_umount1
check clu_glockpin_fsck "$B/fsck.ucfs" -n "$IMG"
