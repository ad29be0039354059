#!/bin/sh
# clu_remount: a lockproto=dlm node that unmounts cleanly and mounts
# again at once (a new lock manager incarnation after a clean LEAVE,
# lockmgr/PROTOCOL.md §9 "Back after leaving"), three times, in a
# two-node cluster ("two_node", as make demo) and in a cluster of two
# filesystem nodes and a witness (node 3, a lockspace-only member:
# tests/clulib.sh, quorum):
#  * the survivor does not take the new incarnation for a restarted
#    node (in two-node mode it once did, refused its generation, and each
#    remount took 4 timeouts, 10 s); the time of each round is printed,
#    not asserted (a loaded machine stretches it);
#  * the other node goes on: it reads what the remounted node wrote and
#    the remounted node reads what it wrote;
#  * the survivor counted no death (node_deaths 0) and logged no
#    "restarted";
#  * both unmount cleanly and fsck.ucfs -n finds the image clean.
# Heartbeats every 500 ms (as in make demo): with clulib's 100 ms the
# survivors form a membership without the node before it is back, the
# case that always worked.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_remount

IMG=$T/img M1=$T/m1 M2=$T/m2
fs_mkfs "$IMG" 256 -j 3 -J 8 -r 64 -p dlm -t clu:fs1 || {
	fail clu_remount_mkfs; exit 1; }

# config FILE TWO NODES...: clu_config with 500 ms heartbeats (TWO 1:
# two-node mode)
config() {
	_c=$1 _x=$2; shift 2
	CLU_HEARTBEAT_MS=500 CLU_TWO_NODE=$_x clu_config "$_c" "$@"
}

rounds() {	# NAME CFG
	fs_mount "$IMG" "$M1" "$(clu_opts "$2" 1)" || {
		fail $1_m1; return 1; }
	fs_mount "$IMG" "$M2" "$(clu_opts "$2" 2)" || {
		fail $1_m2; return 1; }
	echo before >"$M1/f0"
	r=1
	while [ $r -le 3 ]; do
		t0=$(date +%s.%N)
		fs_umount "$M1" || { fail $1_umount "round $r"; return 1; }
		fs_mount "$IMG" "$M1" "$(clu_opts "$2" 1)" || {
			fail $1_mount "round $r"; return 1; }
		echo "round $r" >"$M1/f$r"
		t1=$(date +%s.%N)
		ms=$(awk -v a="$t0" -v b="$t1" \
			'BEGIN { printf "%d", (b - a) * 1000 }')
		echo "$1 round $r: unmount, mount and a write took $ms ms"
		check $1_other_reads_$r test "$(cat "$M2/f$r")" = "round $r"
		check $1_reads_old_$r test "$(cat "$M1/f0")" = before
		r=$((r + 1))
	done
	echo after >"$M2/g"
	check $1_reads_other test "$(cat "$M1/g")" = after
	if command -v jq >/dev/null 2>&1; then
		"$B/ucfs-stat" --json "$M2" >"$T/st.json" 2>&1
		check $1_no_death jq -e '.cluster.node_deaths == 0' \
			"$T/st.json"
	fi
	check $1_not_restarted sh -c \
		"! grep -h restarted '$(_fs_state "$M2")/log'"
	rm -f "$M1"/f* "$M1/g"
	check $1_umount1 fs_umount "$M1"
	check $1_umount2 fs_umount "$M2"
	# the next part's daemons log to the same files
	rm -f "$(_fs_state "$M1")/log" "$(_fs_state "$M2")/log"
}

config "$T/two.json" 1 1 2 ||
	{ fail clu_remount_config; exit 1; }
rounds clu_remount_two_node "$T/two.json"

config "$T/three.json" 0 1 2 3 || { fail clu_remount_config3; exit 1; }
clu_witness "$T/three.json" 3
rounds clu_remount_witness "$T/three.json"

check clu_remount_fsck fs_fsck "$IMG"
rm -f "$IMG"
exit 0
