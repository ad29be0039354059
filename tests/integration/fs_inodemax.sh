#!/bin/sh
# fs_inodemax: the in-core inode table stays near inode_max on a nolock
# mount (fs_iprune.c). With no memory pressure the kernel keeps every
# inode it looked up, and ucfs a record for each; past 7/8 of the bound
# a worker asks the kernel to forget the least recently used ones
# (NOTIFY_PRUNE). A mount with inode_max=256 walks a tree of 1,213
# inodes twice: afterwards the table is back within the bound (FORGETs
# came: waits at most 20 s, not a timed assert), the walks listed the
# same tree, the contents read back, and fsck is clean. Without a kernel
# that prunes (FUSE < 7.45) the test is skipped.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
fs_require_ucfs inodemax
if ! command -v jq >/dev/null 2>&1; then
	skip inodemax "jq missing"
	exit 0
fi

IMG=$T/img MNT=$T/mnt MAX=256

fs_mkfs "$IMG" 256 || { fail inodemax_mkfs; exit 1; }
fs_mount "$IMG" "$MNT" || { fail inodemax_mount; exit 1; }
tree() {
	d=0
	while [ $d -lt 12 ]; do
		mkdir "$MNT/d$d" || return 1
		f=0
		while [ $f -lt 100 ]; do
			echo "file $d/$f" >"$MNT/d$d/f$f" || return 1
			f=$((f + 1))
		done
		d=$((d + 1))
	done
}
check inodemax_tree tree
check inodemax_umount0 fs_umount "$MNT"
fs_mount "$IMG" "$MNT" "inode_max=$MAX" || { fail inodemax_mount1; exit 1; }

st() { "$B/ucfs-stat" --json "$MNT" >"$T/$1.json"; }
settle() {
	_i=0
	while [ $_i -lt 200 ]; do
		st "$1"
		jq -e ".namespace.inodes_referenced <= $MAX" "$T/$1.json" \
			>/dev/null && return 0
		sleep 0.1
		_i=$((_i + 1))
	done
	return 1
}

st s0
if ! jq -e '.kcache.prune' "$T/s0.json" >/dev/null; then
	skip inodemax "the kernel cannot prune (FUSE < 7.45)"
	fs_umount "$MNT"
	exit 0
fi
check inodemax_bound jq -e ".namespace.inode_max == $MAX and
	.namespace.inode_bound == $MAX" "$T/s0.json"
(cd "$MNT" && find . -printf '%p %y %s %n\n' | LC_ALL=C sort) >"$T/l1"
check inodemax_settle1 settle s1
(cd "$MNT" && find . -printf '%p %y %s %n\n' | LC_ALL=C sort) >"$T/l2"
check inodemax_settle2 settle s2
jq '.namespace | {inode_max, inodes_referenced, inodes_lru_now,
	iprune_rounds, iprune_asked, iprune_refused}' "$T/s2.json"
check inodemax_walked test "$(wc -l <"$T/l1")" -eq 1213
check inodemax_same cmp "$T/l1" "$T/l2"
check inodemax_asked jq -e '.namespace.iprune_asked > 0 and
	.namespace.iprune_refused == 0 and
	(.fuse.ops.forget.count + .fuse.ops.forget_multi.count) > 0' \
	"$T/s2.json"
check inodemax_read test "$(cat "$MNT/d11/f99")" = "file 11/99"
check inodemax_umount1 fs_umount "$MNT"
check inodemax_fsck fs_fsck "$IMG"
