#!/bin/sh
# clu_mix: two nodes that reach one image by different paths (fusefs/
# MOUNT.md "Cluster mounts": mixing device paths; FORMAT.md "Journal":
# whose flush a checkpoint record relies on). Node 1 mounts the image
# file (a flush covers every writer's writes: it writes checkpoint
# records, cluster.records "on"); node 2 mounts it through nbdkit with
# multi-conn disabled (its flush covers only its own connection's
# writes). Node 2's mount takes the records agreement's lock in CW:
#  * node 1 has given its PR up and turned its records off before
#    node 2 serves (cluster.records "off", journal.records_allowed 0,
#    records_off 1); node 2 shows "cw";
#  * files passed back and forth between the nodes are moved by header
#    writes only, no new checkpoint record on either node;
#  * node 2 unmounts and wakes node 1 (cluster.records_wakes; its poll
#    is every 30 s): node 1 gets PR back (records "on");
#    node 2 mounts again through the image file: both write records at
#    their hand-overs again.
# fsck -n clean at the end. Node 3 is a lockspace-only witness.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_mix jq nbdkit

clu_setup clu_mix 2 256 -j 3
st() { "$B/ucfs-stat" --json "$1"; }
j1() { st "$M1" | jq -r "$1"; }
j2() { st "$M2" | jq -r "$1"; }

clu_mount clu_mix 1
check clu_mix_n1_records_on test "$(j1 .cluster.records)" = on

# node 2: the same image through NBD, multi-conn off
clu_nbd_nomc clu_mix
fs_mount "$URI" "$M2" "$(clu_opts "$CFG" 2)" || {
	fail clu_mix_m2 "$(cat "$T/nbdkit.log")"
	exit 1
}
pass clu_mix_m2
check clu_mix_n2_cw test "$(j2 .cluster.records)" = cw
check clu_mix_n1_off test "$(j1 .cluster.records)" = off
check clu_mix_n1_not_allowed test "$(j1 .journal.records_allowed)" = 0
check clu_mix_n1_records_off test "$(j1 .journal.records_off)" = 1
check clu_mix_n2_not_allowed test "$(j2 .journal.records_allowed)" = 0

# hand-overs both ways: header moves only while node 2 is mounted
r1=$(j1 .journal.checkpoint_records)
h1=$(j1 .journal.header_writes)
i=0
while [ $i -lt 5 ]; do
	echo "n1 $i" >>"$M1/f"
	sync "$M1/f"
	cat "$M2/f" >/dev/null
	echo "n2 $i" >>"$M2/f"
	sync "$M2/f"
	cat "$M1/f" >/dev/null
	i=$((i + 1))
done
check clu_mix_content test "$(wc -l <"$M1/f")" -eq 10
check clu_mix_n1_no_new_records test "$(j1 .journal.checkpoint_records)" -eq "$r1"
check clu_mix_n2_no_records test "$(j2 .journal.checkpoint_records)" -eq 0
check clu_mix_n1_header_moves test "$(j1 .journal.header_writes)" -gt "$h1"
echo "node 1: $(st "$M1" | jq -c '{records: .cluster.records,
	tries: .cluster.records_tries, refused: .cluster.records_refused,
	given_up: .cluster.records_given_up,
	ckpt_records: .journal.checkpoint_records,
	header_writes: .journal.header_writes}')"

check clu_mix_umount2 fs_umount "$M2"
on() { test "$(j1 .cluster.records)" = on; }
check clu_mix_n1_on_again wait_for 30 on
check clu_mix_n1_allowed_again test "$(j1 .journal.records_allowed)" = 1
check clu_mix_n1_woken test "$(j1 .cluster.records_wakes)" -ge 1
echo "node 1 after node 2 left: $(st "$M1" | jq -c '{
	records: .cluster.records, tries: .cluster.records_tries,
	refused: .cluster.records_refused, wakes: .cluster.records_wakes}')"
kill "$SRV" 2>/dev/null && wait "$SRV"

# node 2 back through the image file: both write records again
clu_mount clu_mix 2
check clu_mix_n2_file_on test "$(j2 .cluster.records)" = on
r1=$(j1 .journal.checkpoint_records)
i=0
while [ $i -lt 3 ]; do
	echo "n1 again $i" >>"$M1/f"
	cat "$M2/f" >/dev/null
	echo "n2 again $i" >>"$M2/f"
	cat "$M1/f" >/dev/null
	i=$((i + 1))
done
check clu_mix_n1_records_again test "$(j1 .journal.checkpoint_records)" -gt "$r1"
check clu_mix_n2_records test "$(j2 .journal.checkpoint_records)" -gt 0
check clu_mix_content_again test "$(wc -l <"$M2/f")" -eq 16
check clu_mix_umount2_file fs_umount "$M2"
check clu_mix_umount1 fs_umount "$M1"
"$B/fsck.ucfs" -n "$IMG" >"$T/fsck.log" 2>&1
rc=$?
[ $rc -eq 0 ] || cat "$T/fsck.log"
check clu_mix_fsck test "$rc" -eq 0
