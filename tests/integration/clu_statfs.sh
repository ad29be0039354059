#!/bin/sh
# clu_statfs: statfs (df) agrees across two cluster nodes within the
# statfs quantum (MOUNT.md statfs_quantum=, FORMAT.md "Statfs records"),
# also after a node is killed:
#  (1) both nodes mounted with statfs_quantum=1; node 1 writes 8 MiB:
#      node 2's df shows it (free blocks and inodes equal to node 1's,
#      8 MiB less than at the start) once node 1 folded (polled);
#  (2) the clu_enospc case: each node writes files in groups it takes,
#      then each removes its own, also files in groups the other node
#      holds (free logs): both dfs come back to the free space of the
#      start, equal (polled);
#  (3) node 1 mounted again with statfs_quantum=3600 (it never folds on
#      its own) writes 4 MiB and fsyncs them: its own df shows them at
#      once, node 2's not (no fold yet); node 1 is killed (kill -9):
#      node 2 replays its journal and folds its change record, and its
#      df then equals what node 1 showed (polled); its stats count the
#      dead slot's fold;
#  node 2 unmounts, fsck.ucfs -n is clean (it checks the records), and
#  a fresh mount's df equals node 2's last one;
#  (4) both nodes (statfs_quantum=3600) write and fsync, node 1 removes
#      a file and fsyncs the directory, both are killed: the next mount
#      replays both journals and folds the other slot's change (stats:
#      statfs_dead_folds);
#      after its unmount fsck is clean and a fresh mount's df equals
#      what it showed.
# No timed assert: every "shows" is polled up to a generous deadline.
# Node 3 is a lockspace-only witness (tests/clulib.sh: quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_statfs jq

clu_setup clu_statfs 2 64 -j 2 -r 8
clu_mount clu_statfs 1 statfs_quantum=1
clu_mount clu_statfs 2 statfs_quantum=1
avail() { stat -f -c %a "$1"; }
files() { stat -f -c %c "$1"; }
show() { echo "$1: node 1 $(avail "$M1") free, $(files "$M1") inodes;" \
	"node 2 $(avail "$M2") free, $(files "$M2") inodes"; }
start=$(avail "$M1")
show "at start"
check clu_statfs_same_at_start test "$start" = "$(avail "$M2")"

# agree MAX: both nodes show the same free blocks and inodes, at most MAX
# free blocks
agree() {
	[ "$(avail "$M1")" = "$(avail "$M2")" ] &&
		[ "$(files "$M1")" = "$(files "$M2")" ] &&
		[ "$(avail "$M2")" -le "$1" ]
}
# (1) one node writes, the other sees it
mkdir "$M1/a"
i=0
while [ $i -lt 8 ]; do
	dd if=/dev/zero of="$M1/a/f$i" bs=1M count=1 status=none
	i=$((i + 1))
done
sync -f "$M1/a/f0"
check clu_statfs_write_seen wait_for 60 agree $((start - 2048))
show "node 1 wrote 8 MiB"

# (2) both write, each removes its own (some of those frees land in
# groups the other node holds: free logs, applied within a second)
mkdir "$M2/b"
i=0
while [ $i -lt 8 ]; do
	dd if=/dev/zero of="$M2/b/f$i" bs=1M count=1 status=none
	dd if=/dev/zero of="$M1/a/g$i" bs=1M count=1 status=none
	i=$((i + 1))
done
show "both wrote"
rm -rf "$M1/a" "$M2/b"
sync -f "$M1"
sync -f "$M2"
back() { agree "$start" && [ "$(avail "$M2")" -ge $((start - 8)) ]; }
check clu_statfs_free_seen wait_for 90 back
show "both removed theirs"

# (3) a node killed with a change it never folded
check clu_statfs_umount1 fs_umount "$M1"
clu_mount clu_statfs 1 statfs_quantum=3600
before=$(avail "$M2")
dd if=/dev/zero of="$M1/k" bs=1M count=4 conv=fsync status=none
mine=$(avail "$M1")
show "node 1 wrote 4 MiB (fsync), not folded"
check clu_statfs_own_change_shown test "$mine" -le $((before - 1024))
# node 2 shows the master plus its own change: not node 1's yet (its
# worker folds every hour)
check clu_statfs_unfolded_not_shown test "$(avail "$M2")" -gt "$mine"
fs_kill9 "$M1"
recovered() { [ "$(avail "$M2")" = "$mine" ]; }
check clu_statfs_recovered wait_for 90 recovered
show "node 1 killed, node 2 recovered it"
"$B/ucfs-stat" --json "$M2" >"$T/st.json" 2>&1
check clu_statfs_dead_fold_counted jq -e '.alloc.statfs_dead_folds >= 1 and
	.alloc.statfs_reads >= 1 and .alloc.statfs_fold_errors == 0' \
	"$T/st.json"
last=$(avail "$M2")
check clu_statfs_umount2 fs_umount "$M2"
check clu_statfs_fsck fs_fsck "$IMG"
clu_mount clu_statfs 2 statfs_quantum=3600
fresh=$(avail "$M2")
echo "fresh mount: $fresh free (node 2 showed $last)"
check clu_statfs_fresh_agrees test "$fresh" = "$last"

# (4) the whole cluster dies, both nodes with changes they never folded:
# the first node to mount again replays both journals and folds the
# other slot's change (its recovery worker takes over a slot left free
# with a change not zero)
clu_mount clu_statfs 1 statfs_quantum=3600
dd if=/dev/zero of="$M1/x1" bs=1M count=2 conv=fsync status=none
dd if=/dev/zero of="$M2/x2" bs=1M count=3 conv=fsync status=none
rm -f "$M1/k"
python3 -c "import os,sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))" "$M1"
sleep 1 # (the kernel's forget of k; its blocks may or may not be freed
	# and committed before the kill: the records agree either way)
fs_kill9 "$M1"
fs_kill9 "$M2"
clu_mount clu_statfs 2
folded() {
	"$B/ucfs-stat" --json "$M2" | jq -e '.alloc.statfs_dead_folds >= 1'
}
check clu_statfs_crashall_folded wait_for 90 folded
after=$(avail "$M2")
show "both killed, node 2 mounted again"
check clu_statfs_umount3 fs_umount "$M2"
check clu_statfs_fsck_crashall fs_fsck "$IMG"
clu_mount clu_statfs 1
fresh=$(avail "$M1")
echo "fresh mount: $fresh free (node 2 showed $after)"
check clu_statfs_crashall_agrees test "$fresh" = "$after"
check clu_statfs_umount_final fs_umount "$M1"
rm -f "$IMG"
exit 0
