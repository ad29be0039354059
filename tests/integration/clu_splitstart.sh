#!/bin/sh
# clu_splitstart: two-node mode ("two_node": true), both nodes started
# with the link between them already cut (fault hook UCFS_LK_CUT, the
# file exists before either starts), neither mounted before: each side
# may form a membership of one and be granted journal slot 0 by its own
# lockspace. Several rounds, node 1 started at offsets around timeout_ms
# (2.5 s) after node 2, where both pass the lock manager's disk check
# before the other beats (and at 0): at most one node is ever mounted;
# the other exits refused ("... not mounting ... (no split brain)" or
# "alive on the disk but cannot be reached") without having mounted;
# the winner's fsync'ed files are intact after it unmounts, and the
# image stays fsck clean. Prints per round the offset, the winner, its
# start-to-mount time and the loser's start-to-refusal time.
# Also: ucfs-witness refuses the lowest id of a cluster (a witness never
# reads the disk, so it must not be the coordinator).
# run.sh: long (about 45 s: six split-brain start rounds)
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_splitstart jq

IMG=$T/img CFG=$T/cluster.json
clu_config "$T/three.json" 1 2 3
if timeout -k 5 20 "$B/ucfs-witness" "$T/three.json" 1 >"$T/w1.log" 2>&1; then
	fail clu_splitstart_witness_lowest_refused "ran"
else
	check clu_splitstart_witness_lowest_refused grep -q \
		"node 1 has the lowest id of cluster clu" "$T/w1.log"
fi
CLU_TWO_NODE=1 clu_config "$CFG" 1 2
fs_mkfs "$IMG" 256 -j 2 -J 8 -r 64 -p dlm -t clu:fs1 || {
	fail clu_splitstart_mkfs; exit 1; }
export UCFS_LK_CUT="$T/cut"
touch "$T/cut"
mkdir -p "$T/m1" "$T/m2"

now() { date +%s.%N; }

# start N: run node N's daemon in the foreground (in the background of
# this shell), its PID in $T/pidN, start time in $T/startN, exit status
# in $T/rcN
start() {
	rm -f "$T/rc$1" "$T/pid$1"
	now >"$T/start$1"
	(
		"$B/ucfs" -f -o "$(clu_opts "$CFG" "$1")" "$IMG" "$T/m$1" &
		echo $! >"$T/pid$1"
		wait $!
		echo $? >"$T/rc$1"
		now >"$T/end$1"
	) >"$T/log$1" 2>&1 &
	wait_for 5 test -f "$T/pid$1"
	on_exit "fusermount3 -u -z '$T/m$1'; [ -f '$T/rc$1' ] ||
		kill -9 \$(cat '$T/pid$1')"
}

# settled: each node is mounted or its daemon exited
settled() {
	for n in 1 2; do
		_fs_mounted "$T/m$n" || [ -f "$T/rc$n" ] || return 1
	done
}

rounds=0 bad=0
for d in 0 2.1 2.3 2.5 2.7 2.9; do
	rounds=$((rounds + 1))
	rm -f "$T/both" "$T/mnt1" "$T/mnt2"
	start 2
	sleep "$d"
	start 1
	# watch: never both mounted; note when each mounted
	i=0
	while [ $i -lt 600 ]; do
		for n in 1 2; do
			_fs_mounted "$T/m$n" && [ ! -f "$T/mnt$n" ] &&
				now >"$T/mnt$n"
		done
		_fs_mounted "$T/m1" && _fs_mounted "$T/m2" && touch "$T/both"
		settled && [ $i -ge 20 ] && break
		i=$((i + 1))
		sleep 0.1
	done
	# a node that exited never mounts again; what it wrote before it
	# did, the one mounted has read once it made two more passes over
	# the heartbeat blocks (a beat of another node in its slot fences
	# it, and its writes below fail)
	for n in 1 2; do
		_fs_mounted "$T/m$n" || continue
		hb=$(clu_stat "$T/m$n" .cluster.hb_reads) &&
			wait_for 30 clu_stat_ge "$T/m$n" .cluster.hb_reads \
				$((hb + 2))
	done
	_fs_mounted "$T/m1" && _fs_mounted "$T/m2" && touch "$T/both"
	if [ -f "$T/both" ]; then
		fail clu_splitstart_one_writer_$rounds "both nodes mounted (offset $d s)"
		bad=1
	fi
	winner=0 loser=0
	for n in 1 2; do
		if _fs_mounted "$T/m$n"; then
			winner=$n
		elif [ -f "$T/rc$n" ]; then
			loser=$n
		fi
	done
	if [ "$winner" = 0 ] || [ "$loser" = 0 ]; then
		echo "round $rounds (offset $d s): winner $winner, loser $loser"
		tail -n 3 "$T/log1" "$T/log2"
	fi
	if [ "$winner" != 0 ]; then
		mkdir -p "$T/m$winner/r$rounds" &&
			for f in 1 2 3; do
				echo "round $rounds file $f" >"$T/m$winner/r$rounds/f$f"
			done && sync "$T/m$winner/r$rounds/f3" ||
			{ fail clu_splitstart_winner_writes_$rounds; bad=1; }
		t_mount=$(echo "$(cat "$T/mnt$winner") - $(cat "$T/start$winner")" | bc -l)
	fi
	if [ "$loser" != 0 ]; then
		if grep -q "no split brain\|alive on the disk but cannot be" \
			"$T/log$loser"; then :; else
			fail clu_splitstart_refusal_message_$rounds \
				"$(tail -n 3 "$T/log$loser")"
			bad=1
		fi
		if [ -f "$T/mnt$loser" ]; then
			echo "round $rounds: node $loser mounted, then was fenced"
			tail -n 3 "$T/log$loser"
		fi
		t_ref=$(echo "$(cat "$T/end$loser") - $(cat "$T/start$loser")" | bc -l)
	fi
	echo "round $rounds: node 1 started $d s after node 2: winner node" \
		"$winner (mounted $(printf %.2f "${t_mount:-0}") s after its" \
		"start), node $loser refused $(printf %.2f "${t_ref:-0}") s after" \
		"its start: $(grep -o 'ucfs:.*' "$T/log$loser" | tail -1)"
	[ "$winner" != 0 ] && fusermount3 -u "$T/m$winner"
	for n in 1 2; do
		wait_for 30 test -f "$T/rc$n" || {
			fail clu_splitstart_daemon_exit_$rounds; bad=1; }
	done
	t_mount= t_ref=
done
[ $bad = 0 ] && pass clu_splitstart_one_writer
check clu_splitstart_fsck fs_fsck "$IMG"
# every round's files, from either node (link back, both mount)
rm -f "$T/cut"
unset UCFS_LK_CUT
check_files() {
	for r in $(seq 1 $rounds); do
		[ -d "$1/r$r" ] || continue
		for f in 1 2 3; do
			[ "$(cat "$1/r$r/f$f")" = "round $r file $f" ] || return 1
		done
	done
	[ "$(ls "$1" | grep -c '^r')" -ge 1 ]
}
fs_mount "$IMG" "$T/m1" "$(clu_opts "$CFG" 1)" || fail clu_splitstart_remount
check clu_splitstart_files_intact check_files "$T/m1"
check clu_splitstart_umount fs_umount "$T/m1"
check clu_splitstart_fsck2 fs_fsck "$IMG"
rm -f "$IMG"
exit 0
