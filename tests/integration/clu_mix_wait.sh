#!/bin/sh
# clu_mix_wait: a mount whose device's flush does not cover every writer
# waits a bounded time for the nodes writing checkpoint records
# (fusefs/MOUNT.md "Mixing device paths", records_timeout=). Node 1 mounts
# the image file and writes records; its records-off flush is made to hang
# (the test hook UCFS_JREC_HOLD: while the file exists, giving the
# agreement's PR up waits after the flush). Node 2 mounts through nbdkit
# with multi-conn disabled and records_timeout=2:
#  * its mount fails with the records_timeout message, having logged its
#    wait, and wrote nothing to the device (nbdkit's log filter: no Write
#    from any connection);
#  * once node 1's flush returns, node 1 takes its PR back (records on)
#    and keeps working;
#  * node 2 mounts again (default records_timeout): node 1 turns its
#    records off, node 2 shows "cw" and how long it waited, reads node
#    1's file.
# fsck -n clean at the end. Node 3 is a lockspace-only witness.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_mix_wait jq nbdkit

clu_setup clu_mix_wait 2 256 -j 3
j1() { clu_stat "$M1" "$1"; }
j2() { clu_stat "$M2" "$1"; }

export UCFS_JREC_HOLD="$T/hold"
clu_mount clu_mix_wait 1
unset UCFS_JREC_HOLD
check clu_mix_wait_n1_on test "$(j1 .cluster.records)" = on
echo "from node 1" >"$M1/f"
sync "$M1/f"

clu_nbd_nomc clu_mix_wait "$T/nbd.log"

# node 1's records-off flush hangs: node 2 gives up after 2 s
: >"$T/hold"
clu_refused clu_mix_wait_refused "did not turn them off within records_timeout" \
	"$URI" "$(clu_opts "$CFG" 2 records_timeout=2)"
grep "^ucfs" "$T/bad.log" | sed 's/^/  node 2: /'
check clu_mix_wait_progress grep -q \
	"waiting [0-9]* s for the nodes writing checkpoint records" "$T/bad.log"
check clu_mix_wait_gave_up grep -q "within 2 s (records_timeout=2)" \
	"$T/bad.log"
check clu_mix_wait_nbd_connected grep -q "connection=" "$T/nbd.log"
check clu_mix_wait_nothing_written test "$(grep -c " Write " "$T/nbd.log")" -eq 0
check clu_mix_wait_n1_not_allowed test "$(j1 .journal.records_allowed)" = 0

# the flush returns: node 1 gives the PR up, then takes it back
rm -f "$T/hold"
on() { test "$(j1 .cluster.records)" = on && \
	test "$(j1 .journal.records_allowed)" = 1; }
check clu_mix_wait_n1_on_again wait_for 30 on
check clu_mix_wait_n1_given_up test "$(j1 .cluster.records_given_up)" -eq 1
check clu_mix_wait_n1_writes sh -c "echo 'node 1 again' >>'$M1/f' &&
	sync '$M1/f'"

# node 2 again, nothing hangs now: it joins
fs_mount "$URI" "$M2" "$(clu_opts "$CFG" 2)" || {
	fail clu_mix_wait_m2 "$(cat "$T/nbdkit.log")"
	exit 1
}
pass clu_mix_wait_m2
check clu_mix_wait_n2_cw test "$(j2 .cluster.records)" = cw
check clu_mix_wait_n1_off test "$(j1 .cluster.records)" = off
check clu_mix_wait_n1_given_up_twice \
	test "$(j1 .cluster.records_given_up)" -eq 2
echo "node 2's join waited $(j2 .cluster.records_join_ms) ms"
check clu_mix_wait_join_ms_shown test "$(j2 .cluster.records_join_ms)" -ge 0
check clu_mix_wait_n2_reads test "$(cat "$M2/f")" = "from node 1
node 1 again"
check clu_mix_wait_umount2 fs_umount "$M2"
check clu_mix_wait_umount1 fs_umount "$M1"
kill "$SRV" 2>/dev/null && wait "$SRV"
"$B/fsck.ucfs" -n "$IMG" >"$T/fsck.log" 2>&1
rc=$?
[ $rc -eq 0 ] || cat "$T/fsck.log"
check clu_mix_wait_fsck test "$rc" -eq 0
