#!/bin/sh
# clu_statfs2: the statfs records' repairs and options on two cluster
# nodes (MOUNT.md statfs_quantum=, statfs_percent=; FORMAT.md "Statfs
# records"; fsck.ucfs -O statfs):
#  (1) an image made without the records (mkfs.ucfs -O ^statfs, as
#      before them) is upgraded offline: fsck.ucfs -O statfs is refused
#      while a node has it mounted, and (with -y, after its replay)
#      while a killed node still holds its slot, the image unchanged;
#      after a mount and unmount it adds them (fsck clean); both nodes
#      mount it, node 1 writes 4 MiB and node 2's df agrees (polled)
#      from the records;
#  (2) the master record damaged (its checksum broken): fsck -n finds
#      it; both nodes still answer df (counting the groups under their
#      locks), node 1 writes 4 MiB and both agree (polled), node 2 counts
#      such answers (alloc.statfs_slow_reads, no statfs_reads) and logs
#      it once; fsck -y repairs the records, a fresh mount's df equals
#      the last fallback answer and the records are used again;
#  (3) statfs_percent= with statfs_quantum=3600 (no fold by the clock):
#      with 100, node 1 writing 2 MiB (about 4% of the free space) wakes
#      nothing and folds nothing, node 2's df does not move; with 2,
#      node 1's change is folded early (alloc.statfs_percent_wakes,
#      statfs_folds) and node 2's df follows it to within 2% of the
#      free space (polled);
#  (4) statfs_quantum=0 (GFS2's statfs_slow) on node 2, node 1 never
#      folding (3600): right after node 1 wrote and fsync'ed 2 MiB, node
#      2's df equals node 1's, no poll (the groups counted under their
#      locks: alloc.statfs_slow_reads, no statfs_reads).
# No timed assert: every "agrees" is polled up to a generous deadline;
# the early fold is asserted on the counters, not on seconds.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_statfs2 jq

clu_setup clu_statfs2 2 64 -j 2 -r 8 -O ^statfs
avail() { stat -f -c %a "$1"; }
files() { stat -f -c %c "$1"; }
st() { "$B/ucfs-stat" --json "$1" | jq -e "$2"; }
show() { echo "$1: node 1 $(avail "$M1") free, $(files "$M1") inodes;" \
	"node 2 $(avail "$M2") free, $(files "$M2") inodes"; }
# agree MAX: both nodes show the same free blocks and inodes, at most MAX
agree() {
	[ "$(avail "$M1")" = "$(avail "$M2")" ] &&
		[ "$(files "$M1")" = "$(files "$M2")" ] &&
		[ "$(avail "$M2")" -le "$1" ]
}
write_mb() { # DIR NAME MiB: written and fsync'ed
	dd if=/dev/zero of="$1/$2" bs=1M count="$3" conv=fsync status=none
}

# (1) the upgrade of an old image
clu_mount clu_statfs2 1
write_mb "$M1" old 1
"$B/fsck.ucfs" -O statfs "$IMG" >"$T/upg0.log" 2>&1
rc=$?
cat "$T/upg0.log"
check clu_statfs2_upgrade_refused_mounted test "$rc" = 8
write_mb "$M1" old2 1
fs_kill9 "$M1"
"$B/fsck.ucfs" -y -O statfs "$IMG" >"$T/upg1.log" 2>&1
rc=$?
cat "$T/upg1.log"
check clu_statfs2_upgrade_refused_killed test "$rc" = 8
check clu_statfs2_upgrade_refused_says grep -q "slot 0 is claimed" \
	"$T/upg1.log"
clu_mount clu_statfs2 1 # recovers its slot
check clu_statfs2_umount_old fs_umount "$M1"
check clu_statfs2_old_clean fs_fsck "$IMG"
sb_blk() { od -An -t u8 -j 288 -N 8 "$IMG" | tr -d ' '; }
check clu_statfs2_old_unchanged test "$(sb_blk)" = 0
"$B/fsck.ucfs" -y -O statfs "$IMG" >"$T/upg.log" 2>&1
rc=$?
cat "$T/upg.log"
check clu_statfs2_upgraded test "$rc" = 0
check clu_statfs2_upgrade_said grep -q "statfs records added" "$T/upg.log"
check clu_statfs2_upgraded_clean fs_fsck "$IMG"
check clu_statfs2_upgraded_sb test "$(sb_blk)" -gt 0
"$B/fsck.ucfs" -O statfs "$IMG" >"$T/upg2.log" 2>&1
check clu_statfs2_upgrade_again grep -q "has the statfs records already" \
	"$T/upg2.log"
clu_mount clu_statfs2 1 statfs_quantum=1
clu_mount clu_statfs2 2 statfs_quantum=1
start=$(avail "$M1")
show "upgraded"
write_mb "$M1" a 4
check clu_statfs2_upgraded_agree wait_for 60 agree $((start - 1024))
show "node 1 wrote 4 MiB"
check clu_statfs2_upgraded_records st "$M2" \
	'.alloc.statfs_reads >= 1 and .alloc.statfs_slow_reads == 0'
check clu_statfs2_umount1 fs_umount "$M1"
check clu_statfs2_umount2 fs_umount "$M2"

# (2) a damaged master
sblk=$(sb_blk)
printf '\377' | dd of="$IMG" bs=1 seek=$((sblk * 4096 + 40)) conv=notrunc \
	status=none
check clu_statfs2_damage_found sh -c "! '$B/fsck.ucfs' -n '$IMG' >/dev/null"
log2=$(fs_daemon_log "$M2")
said0=$(grep -c "statfs records unreadable" "$log2")
clu_mount clu_statfs2 1 statfs_quantum=1
clu_mount clu_statfs2 2 statfs_quantum=1
start=$(avail "$M2")
check clu_statfs2_damaged_df_answers test -n "$start"
show "master damaged"
write_mb "$M1" b 4
check clu_statfs2_damaged_agree wait_for 60 agree $((start - 1024))
show "node 1 wrote 4 MiB"
check clu_statfs2_damaged_counted st "$M2" \
	'.alloc.statfs_slow_reads >= 2 and .alloc.statfs_reads == 0'
said=$(grep -c "statfs records unreadable" "$log2")
check clu_statfs2_damaged_logged_once test $((said - said0)) = 1
last=$(avail "$M2")
check clu_statfs2_umount3 fs_umount "$M1"
check clu_statfs2_umount4 fs_umount "$M2"
"$B/fsck.ucfs" -y "$IMG" >"$T/fix.log" 2>&1
rc=$?
cat "$T/fix.log"
check clu_statfs2_repaired test "$rc" = 1
check clu_statfs2_repaired_clean fs_fsck "$IMG"
clu_mount clu_statfs2 1 statfs_quantum=3600,statfs_percent=100
clu_mount clu_statfs2 2 statfs_quantum=3600
echo "repaired: $(avail "$M2") free (the fallback showed $last)"
check clu_statfs2_repaired_agrees test "$(avail "$M2")" = "$last"
check clu_statfs2_repaired_records st "$M2" \
	'.alloc.statfs_reads >= 1 and .alloc.statfs_slow_reads == 0'

# (3) statfs_percent: 100, then 2
before=$(avail "$M2")
write_mb "$M1" c 2
show "percent 100: node 1 wrote 2 MiB"
check clu_statfs2_pct100_no_wake st "$M1" \
	'.alloc.statfs_percent_wakes == 0 and .alloc.statfs_folds == 0'
check clu_statfs2_pct100_not_shown test "$(avail "$M2")" = "$before"
check clu_statfs2_umount5 fs_umount "$M1" # folds
clu_mount clu_statfs2 1 statfs_quantum=3600,statfs_percent=2
before=$(avail "$M2")
write_mb "$M1" d 2
show "percent 2: node 1 wrote 2 MiB"
check clu_statfs2_pct2_woke st "$M1" \
	'.alloc.statfs_percent_wakes >= 1'
moved() { [ "$(avail "$M2")" -le $((before - 256)) ]; }
check clu_statfs2_pct2_shown wait_for 60 moved
show "node 2 followed"
check clu_statfs2_pct2_folded st "$M1" '.alloc.statfs_folds >= 1'
a1=$(avail "$M1")
a2=$(avail "$M2")
d=$((a2 > a1 ? a2 - a1 : a1 - a2))
echo "node 1 $a1, node 2 $a2: $d blocks apart (2% of $before: $((before / 50)))"
check clu_statfs2_pct2_within test $((d * 50)) -le "$before"
check clu_statfs2_umount6 fs_umount "$M1"
check clu_statfs2_umount7 fs_umount "$M2"

# (4) statfs_quantum=0: exact at once
clu_mount clu_statfs2 1 statfs_quantum=3600
clu_mount clu_statfs2 2 statfs_quantum=0
write_mb "$M1" e 2
show "slow: node 1 wrote 2 MiB"
check clu_statfs2_slow_exact agree "$(avail "$M1")"
check clu_statfs2_slow_counted st "$M2" \
	'.alloc.statfs_slow_reads >= 1 and .alloc.statfs_reads == 0'
check clu_statfs2_slow_no_fold st "$M1" '.alloc.statfs_folds == 0'
check clu_statfs2_umount8 fs_umount "$M1"
check clu_statfs2_umount9 fs_umount "$M2"
check clu_statfs2_fsck_end fs_fsck "$IMG"
rm -f "$IMG"
exit 0
