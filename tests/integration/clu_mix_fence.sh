#!/bin/sh
# clu_mix_fence: a node whose records-off flush fails fences itself
# (fusefs/cluster/fs_jrec.h; MOUNT.md "Mixing device paths"), end to end
# in a real cluster. Node 1 mounts the image file and writes checkpoint
# records; the test hook UCFS_JREC_FAIL makes the flush before it gives
# the agreement's PR up fail. Node 2 mounts through nbdkit with
# multi-conn disabled:
#  * node 1 fences itself with the records reason (cluster.fenced,
#    fence_reason, its log), and answers EIO from then on;
#  * node 2's mount goes on only once the cluster recovered node 1
#    (node_deaths): its slot claim, which follows the join and takes the
#    lowest slot whose lock is free, gets node 1's slot 0 (while node 1
#    held it, slot 1), and it replays that journal, whose fsync'ed
#    transactions no checkpoint had written home, before it serves
#    (journal.replay_tx); it holds CW ("cw") and reads every file node 1
#    had fsync'ed, the last one written just before the join;
#  * node 1 unmounts (its daemon exits), node 1 mounts again through
#    the image file beside node 2 (records stay off: node 2 is in) and
#    reads node 2's file; both unmount; fsck -n clean.
# Node 3 is a lockspace-only witness.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_mix_fence jq nbdkit

clu_setup clu_mix_fence 2 256 -j 3
j1() { clu_stat "$M1" "$1"; }
j2() { clu_stat "$M2" "$1"; }

export UCFS_JREC_FAIL="$T/fail"
clu_mount clu_mix_fence 1
unset UCFS_JREC_FAIL
check clu_mix_fence_n1_on test "$(j1 .cluster.records)" = on
head -c 300000 /dev/urandom >"$T/ref"
mkdir "$M1/d"
i=0
while [ $i -lt 20 ]; do
	cp "$T/ref" "$M1/d/f$i"
	i=$((i + 1))
done
sync "$M1/d/f19"
echo "last words" >"$M1/last"
sync "$M1/last"
check clu_mix_fence_n1_allowed test "$(j1 .journal.records_allowed)" = 1
# what node 2 must replay: node 1's commits, none checkpointed yet
check clu_mix_fence_n1_committed test "$(j1 .journal.commits)" -ge 1
check clu_mix_fence_n1_no_checkpoint test "$(j1 .journal.checkpoints)" -eq 0
slot1=$(j1 .cluster.slot)
check clu_mix_fence_n1_slot0 test "$slot1" = 0

clu_nbd_nomc clu_mix_fence

# node 1's records-off flush fails when node 2 joins
: >"$T/fail"
fs_mount "$URI" "$M2" "$(clu_opts "$CFG" 2)" || {
	fail clu_mix_fence_m2 "$(cat "$T/nbdkit.log")"
	exit 1
}
pass clu_mix_fence_m2
rm -f "$T/fail"
check clu_mix_fence_n1_fenced test "$(j1 .cluster.fenced)" = true
why=$(j1 .cluster.fence_reason)
echo "node 1's fence reason: $why"
check clu_mix_fence_n1_reason sh -c "printf '%s' '$why' |
	grep -q 'cannot flush the checkpoint records'"
check clu_mix_fence_n1_logged grep -q \
	"fenced itself (cannot flush the checkpoint records" \
	"$(fs_daemon_log "$M1")"
# (the kernel's caches of node 1 are dropped by its cluster thread)
check clu_mix_fence_n1_eio wait_for 30 sh -c "! cat '$M1/last' >/dev/null 2>&1"
check clu_mix_fence_n2_cw test "$(j2 .cluster.records)" = cw
check clu_mix_fence_n2_death test "$(j2 .cluster.node_deaths)" -ge 1
check clu_mix_fence_n2_took_n1_slot test "$(j2 .cluster.slot)" = "$slot1"
check clu_mix_fence_n2_replayed test "$(j2 .journal.replay_tx)" -ge 1
echo "node 1 (slot $slot1) fenced; node 2: $(clu_stat "$M2" | jq -c '{
	slot: .cluster.slot, records: .cluster.records,
	join_ms: .cluster.records_join_ms, deaths: .cluster.node_deaths,
	recoveries: .cluster.recoveries, replay_tx: .journal.replay_tx}')"
ok=1
i=0
while [ $i -lt 20 ]; do
	cmp -s "$T/ref" "$M2/d/f$i" || ok=0
	i=$((i + 1))
done
check clu_mix_fence_n2_reads_data test $ok -eq 1
check clu_mix_fence_n2_reads_last test "$(cat "$M2/last")" = "last words"
check clu_mix_fence_n2_writes sh -c "echo 'node 2' >'$M2/n2' && sync '$M2/n2'"

# the fenced node leaves and comes back
fs_umount "$M1" 2>/dev/null
check clu_mix_fence_n1_exited test -f "$(fs_daemon_log "$M1" |
	sed 's|/log$|/rc|')"
clu_mount clu_mix_fence 1
check clu_mix_fence_n1_back_off test "$(j1 .cluster.records)" = off
check clu_mix_fence_n1_reads test "$(cat "$M1/n2")" = "node 2"
check clu_mix_fence_umount1 fs_umount "$M1"
check clu_mix_fence_umount2 fs_umount "$M2"
kill "$SRV" 2>/dev/null && wait "$SRV"
"$B/fsck.ucfs" -n "$IMG" >"$T/fsck.log" 2>&1
rc=$?
[ $rc -eq 0 ] || cat "$T/fsck.log"
check clu_mix_fence_fsck test "$rc" -eq 0
