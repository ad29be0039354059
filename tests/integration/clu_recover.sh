#!/bin/sh
# clu_recover: kill -9 of the SURVIVOR in the middle of its recovery of a
# dead node, on a real 3-node cluster (nodes 4 and 5 are quorum
# witnesses). The daemons of nodes 1 and 2 run with the test-only hook
# UCFS_RECOVER_HOLD=DIR (fs_cluster.h fs_cluster_recover_hold): a
# recovery step waits while DIR/STEP exists, so the kill lands inside it.
# Each case: nodes 1 and 3 write fsync'ed files (tests/progs/fsyncer);
# node 3 leaves two orphans (files unlinked while a process keeps them
# open), frees logged in its free log (in node 1's groups) and an
# unfolded statfs change; node 3 is killed (kill -9), then node 1 while
# it recovers node 3:
#  (1) "replay": node 1 stopped with one image of node 3's journal
#      written home (node 2 replays node 3 in its own callback too);
#  (2) "adopt": node 1 holds node 3's slot and has adopted the first of
#      its orphans (node 2's worker held off until then: "adopt_try"),
#      its adoption committed in node 1's journal by an fsync; node 2's
#      node-down callback for node 1 is held ("node_down") while its
#      worker tries to take node 3's slot: the slot must not be granted
#      before node 1's journal is replayed (it was: a NOEXP grant, the
#      first orphan adopted twice, its blocks freed twice);
# node 2 must then recover both slots: both journals replayed
# (cluster.recoveries), every orphan adopted and freed, node 3's free
# log applied and its statfs change folded; every file nodes 1 and 3
# logged as fsync'ed is intact (read through node 2).
#  (3) "race": two survivors replay node 3's journal at once (node 2 held
#      with one image written home while node 1, held in its callback
#      until then, replays it whole from the same header): no
#      survivor takes over node 3's orphans, free log or statfs change
#      before both replays ended (node 2's replay writes older images of
#      node 3's slot); then one of them adopts both orphans and folds the
#      change, the other finds nothing left; data intact.
# Nodes 1 and 3 are mounted again between the cases. At the end node 2
# unmounts and fsck.ucfs -n is clean, with no orphan and no free log
# left.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_recover jq

SEED=${UCFS_SEED:-1}
echo "seed $SEED"
FSYNCER=$B/tests/fsyncer
clu_setup clu_recover 3 512 -j 3
mkdir -p "$T/hold1" "$T/hold2"

# mount node ID with the hook's directory (nodes 1 and 2) and MORE
hmount() {
	if [ "$1" -le 2 ]; then
		export UCFS_RECOVER_HOLD="$T/hold$1"
	fi
	clu_mount clu_recover "$1" "${2:-}"
	unset UCFS_RECOVER_HOLD
}
hmount 1
# node 2's stats through its socket: the tool resolving the mountpoint
# would wait for the recovery that node 2's held callback keeps going
S2=$T/n2.sock S1=$T/n1.sock
hmount 2 "stats=$S2"
# node 3 never folds its statfs change itself: it dies with one
hmount 3 statfs_quantum=3600

# what node 3 leaves: fsync'ed files, two orphans, a free log (frees in
# node 1's groups), a statfs change; node 1's own fsync'ed files
leave() { # CASE
	mkdir "$M1/n1$1" "$M3/n3$1"
	check "clu_recover_$1_n1_files" "$FSYNCER" write --seed \
		$((SEED + 10)) --max 30 "$M1/n1$1" "$T/n1$1.log"
	check "clu_recover_$1_n3_files" "$FSYNCER" write --seed \
		$((SEED + 20)) --max 30 "$M3/n3$1" "$T/n3$1.log"
	for k in a b; do
		head -c $((40000 + 4096)) /dev/urandom >"$M3/o$1$k"
		clu_orphan "clu_recover_$1_o$k" "$M3/o$1$k"
		eval "HOLDER_$k=\$HOLDER"
	done
	clu_flog_pending "clu_recover_$1" "$M1" "$M3"
	check "clu_recover_$1_pending" test "$PENDING" -gt 0
}

# node 2's stats: both slots recovered, the dead slot's leftovers taken
# over (counters from before the case: $R0 $A0 $F0 $S0)
recovered2() {
	clu_stat "$S2" >"$T/st2.json" &&
		jq -e ".cluster.recoveries >= $R0 + $1 and
			.namespace.orphans_adopted >= $A0 + $2 and
			.alloc.flog_dead_applied >= $F0 + $PENDING and
			.alloc.statfs_dead_folds >= $S0 + 1" "$T/st2.json" \
		>/dev/null
}

counters2() {
	clu_stat "$S2" >"$T/st2.json"
	R0=$(jq .cluster.recoveries "$T/st2.json")
	A0=$(jq .namespace.orphans_adopted "$T/st2.json")
	F0=$(jq .alloc.flog_dead_applied "$T/st2.json")
	S0=$(jq .alloc.statfs_dead_folds "$T/st2.json")
}

verify() { # CASE
	check "clu_recover_$1_n1_intact" "$FSYNCER" verify --seed \
		$((SEED + 10)) "$M2/n1$1" "$T/n1$1.log"
	check "clu_recover_$1_n3_intact" "$FSYNCER" verify --seed \
		$((SEED + 20)) "$M2/n3$1" "$T/n3$1.log"
	check "clu_recover_$1_truncates_kept" test ! -s "$M2/$FLOG_K/k0" \
		-a ! -s "$M2/$FLOG_K/k1" -a ! -e "$M2/o$1a" -a ! -e "$M2/o$1b"
	echo "node 2 after case $1: $(jq -c '{recoveries: .cluster.recoveries,
		deaths: .cluster.node_deaths,
		adopted: .namespace.orphans_adopted,
		dead_applied: .alloc.flog_dead_applied,
		dead_errors: .alloc.flog_dead_errors,
		dead_folds: .alloc.statfs_dead_folds}' "$T/st2.json")"
}

# (1) node 1 killed in the middle of its replay of node 3's journal
leave replay
counters2
touch "$T/hold1/replay"
fs_kill9 "$M3"
kill "$HOLDER_a" "$HOLDER_b" 2>/dev/null
check clu_recover_replay_held wait_for 60 test -f "$T/hold1/replay.held"
fs_kill9 "$M1"
rm -f "$T/hold1/replay"
# node 2: node 3's slot (its own callback) and node 1's
check clu_recover_replay_node2_recovers wait_for 90 recovered2 2 2
verify replay
check clu_recover_replay_no_dead_errors jq -e \
	'.alloc.flog_dead_errors == 0 and (.cluster.fenced | not)' "$T/st2.json"

# (2) node 1 killed while it adopts node 3's orphans (clu_flog_pending
# makes its directory k0 again)
mv "$M2/$FLOG_K" "$M2/replay.$FLOG_K"
hmount 1 "stats=$S1"
hmount 3 statfs_quantum=3600
leave adopt
counters2
touch "$T/hold2/adopt_try" "$T/hold1/adopt"
fs_kill9 "$M3"
kill "$HOLDER_a" "$HOLDER_b" 2>/dev/null
check clu_recover_adopt_held wait_for 60 test -f "$T/hold1/adopt.held"
# node 1's first adoption committed to its journal (not yet home)
check clu_recover_adopt_commit python3 -c "
import os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, b'commit')
os.fsync(fd)" "$M1/commit"
check clu_recover_adopt_node1_adopted clu_stat_ge "$S1" \
	.namespace.orphans_adopted 1
# node 2's node-down callback held before it replays node 1's journal,
# its worker let go: it must not take node 3's slot before that replay
# (with a NOEXP grant it did, and adopted the first orphan again: a
# double free). The hold ends when node 2 adopted something (the bug) or
# after 2 s (it cannot before the replay).
touch "$T/hold2/node_down"
fs_kill9 "$M1"
rm -f "$T/hold2/adopt_try" "$T/hold1/adopt"
wait_for 60 test -f "$T/hold2/node_down.held"
wait_for 2 clu_stat_ge "$S2" .namespace.orphans_adopted $((A0 + 1)) &&
	echo "node 2 adopted an orphan of node 3 before it replayed node 1"
rm -f "$T/hold2/node_down"
# node 2: node 1's journal (with the adoption), then what is left of
# node 3's slot: at least the second orphan
check clu_recover_adopt_node2_recovers wait_for 90 recovered2 1 1
verify adopt
check clu_recover_adopt_commit_kept test "$(cat "$M2/commit")" = commit
check clu_recover_adopt_no_dead_errors jq -e \
	'.alloc.flog_dead_errors == 0 and (.cluster.fenced | not)' "$T/st2.json"
mv "$M2/$FLOG_K" "$M2/adopt.$FLOG_K"

# (3) two survivors replay node 3's journal at once: node 2 held with one
# image written home while node 1 replays it whole; neither may take
# over node 3's orphans, free log or statfs change before both replays
# ended (node 2's replay would write older images of node 3's slot over
# node 1's adoption); then exactly one of them adopts, the other finds
# nothing left
hmount 1 "stats=$S1"
hmount 3 statfs_quantum=3600
leave race
counters2
A1=$(clu_stat "$S1" .namespace.orphans_adopted)
R1=$(clu_stat "$S1" .cluster.recoveries)
# node 1 waits in its callback until node 2 stands in the middle of its
# replay, then replays the same journal from the same header
touch "$T/hold2/replay" "$T/hold1/node_down"
fs_kill9 "$M3"
kill "$HOLDER_a" "$HOLDER_b" 2>/dev/null
check clu_recover_race_held wait_for 60 test -f "$T/hold2/replay.held"
rm -f "$T/hold1/node_down"
check clu_recover_race_node1_replayed wait_for 60 clu_stat_ge "$S1" \
	.cluster.recoveries $((R1 + 1))
if wait_for 2 clu_stat_ge "$S1" .namespace.orphans_adopted $((A1 + 1)); then
	fail clu_recover_race_no_adoption_during_replay
else
	pass clu_recover_race_no_adoption_during_replay
fi
rm -f "$T/hold2/replay"
both_adopted() {
	_a1=$(clu_stat "$S1" .namespace.orphans_adopted) &&
		_a2=$(clu_stat "$S2" .namespace.orphans_adopted) &&
		[ $((_a1 - A1 + _a2 - A0)) -ge 2 ]
}
check clu_recover_race_adopted wait_for 60 both_adopted
check clu_recover_race_node2_replayed clu_stat_ge "$S2" .cluster.recoveries \
	$((R0 + 1))
check clu_recover_race_folded wait_for 60 sh -c "
	f1=\$('$B/ucfs-stat' --json '$S1' | jq .alloc.statfs_dead_folds)
	f2=\$('$B/ucfs-stat' --json '$S2' | jq .alloc.statfs_dead_folds)
	[ \$((f1 + f2)) -ge \$(($S0 + 1)) ]"
clu_stat "$S2" >"$T/st2.json"
verify race
echo "node 1 after case race: $(clu_stat "$S1" '{recoveries:
	.cluster.recoveries, adopted: .namespace.orphans_adopted,
	dead_applied: .alloc.flog_dead_applied,
	dead_folds: .alloc.statfs_dead_folds} | tostring')"
check clu_recover_race_umount1 fs_umount "$M1"

check clu_recover_umount fs_umount "$M2"
"$B/fsck.ucfs" -n "$IMG" >"$T/fsck.log" 2>&1
rc=$?
cat "$T/fsck.log"
check clu_recover_fsck test "$rc" -eq 0
check clu_recover_no_flog_left sh -c "! grep -q 'in free logs' '$T/fsck.log'"
check clu_recover_no_orphan grep -q ' 0 orphans;' "$T/fsck.log"
rm -f "$IMG"
exit 0
