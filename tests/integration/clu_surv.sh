#!/bin/sh
# clu_surv: a survivor recovers a killed node's slot WHILE it keeps
# working (the unit test test_crash_survivor cuts the power at every
# write of that stretch; this is the same with real mounts and kill -9):
#  * node 1 runs, until the end, rounds of a writer that fsyncs file
#    after file (tests/progs/fsyncer: a file is logged only once it and
#    its directory are durable; every fourth replaces an older one by
#    rename), 20 files a round, each round in a directory of its own,
#    removed three rounds later; and a loop that creates and removes
#    small trees;
#  * node 2 writes files with fsync (its journal holds them), unlinks a
#    file a process keeps open (an orphan on node 2's list), truncates
#    two of node 1's files (frees logged in node 2's free log: node 1
#    holds the groups), and its allocations leave an unfolded statfs
#    change; then it is killed (kill -9);
#  * node 1 replays node 2's journal, adopts its orphan, applies its
#    free log and folds its statfs change (stats: cluster.recoveries,
#    namespace.orphans_adopted, alloc.flog_dead_applied,
#    alloc.statfs_dead_folds) while the writer and the loop go on; they
#    keep going after it;
#  * then: every file either node logged as fsync'ed is intact (read
#    through node 1), node 2's truncates are there, node 1 unmounts, and
#    fsck -n is clean with no free log or orphan left (and the statfs
#    records agree with the bitmaps).
# Node 3 is a lockspace-only witness (tests/clulib.sh: quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_surv jq

SEED=${UCFS_SEED:-1}
clu_setup clu_surv 2 512 -j 3
clu_mount clu_surv 1
# node 2 never folds its statfs change itself: it dies with one
clu_mount clu_surv 2 statfs_quantum=3600
FSYNCER=$B/tests/fsyncer

# node 1 works until the end
mkdir "$M1/churn"
(
	i=0
	while [ ! -e "$T/stop" ]; do
		mkdir "$M1/w$i" || exit 1
		"$FSYNCER" write --seed $((SEED + 10 + i)) --max 20 "$M1/w$i" \
			"$T/w$i.log" >/dev/null || exit 1
		[ "$(wc -l <"$T/w$i.log")" -eq 20 ] || exit 1
		if [ $i -ge 3 ]; then
			rm -rf "$M1/w$((i - 3))" || exit 1
			rm -f "$T/w$((i - 3)).log"
		fi
		i=$((i + 1))
		echo "$i" >"$T/rounds"
	done
	echo "$i" >"$T/wdone"
) & WPID=$!
(
	i=0
	while [ ! -e "$T/stop" ]; do
		d="$M1/churn/d$i"
		mkdir "$d" || exit 1
		for k in 0 1 2 3 4 5 6 7; do
			head -c $((k * 3000 + 1)) /dev/zero >"$d/f$k" || exit 1
		done
		rm -rf "$d" || exit 1
		i=$((i + 1))
	done
	echo "$i" >"$T/churned"
) & CPID=$!
on_exit "touch '$T/stop'; kill $WPID $CPID 2>/dev/null"
check clu_surv_writer_runs wait_for 30 test -s "$T/rounds"

# node 2: fsync'ed files
mkdir "$M2/n2"
check clu_surv_node2_files "$FSYNCER" write --seed $((SEED + 1)) --max 40 \
	"$M2/n2" "$T/n2.log"

# node 2: an orphan (unlinked while a process keeps it open)
echo orphan >"$M2/o"
clu_orphan clu_surv "$M2/o"

# node 2 frees into node 1's groups (logged while node 1 holds them; if
# it happened not to at that moment, another round)
clu_flog_pending clu_surv "$M1" "$M2"
clu_stat "$M2" >"$T/st2.json"
echo "node 2 before the kill: $(jq -c '{flog_pending:
	(.alloc.flog_logged - .alloc.flog_applied),
	orphans: .namespace.orphans_added,
	statfs_folds: .alloc.statfs_folds}' "$T/st2.json")"
check clu_surv_pending test "$PENDING" -gt 0
check clu_surv_orphan jq -e '.namespace.orphans_added >= 1' "$T/st2.json"
clu_stat "$M1" >"$T/st1a.json"

# node 2 dies while node 1 works
fs_kill9 "$M2"
kill "$HOLDER" 2>/dev/null
recovered() {
	clu_stat "$M1" >"$T/st1.json" &&
		jq -e ".cluster.recoveries >= 1 and
			.namespace.orphans_adopted >= 1 and
			.alloc.flog_dead_applied >= $PENDING and
			.alloc.statfs_dead_folds >= 1" "$T/st1.json" >/dev/null
}
check clu_surv_recovered wait_for 60 recovered
echo "node 1 after the recovery: $(jq -c '{recoveries: .cluster.recoveries,
	adopted: .namespace.orphans_adopted,
	dead_applied: .alloc.flog_dead_applied,
	dead_errors: .alloc.flog_dead_errors,
	dead_folds: .alloc.statfs_dead_folds}' "$T/st1.json")"
check clu_surv_exact jq -e ".alloc.flog_dead_applied == $PENDING and
	.alloc.flog_dead_errors == 0" "$T/st1.json"
# node 1 kept working through it and after it
n0=$(cat "$T/rounds")
rounds_ge() { [ "$(cat "$T/rounds")" -ge "$1" ]; }
check clu_surv_writer_goes_on wait_for 60 rounds_ge $((n0 + 2))
touch "$T/stop"
wait "$WPID"
wait "$CPID"
check clu_surv_writer_ok test -s "$T/wdone"
check clu_surv_churned test -s "$T/churned"
echo "node 1: $(cat "$T/rounds") rounds of 20 fsync'ed files" \
	"($n0 before the recovery was seen), $(cat "$T/churned" \
	2>/dev/null) trees made and removed"
n=$(cat "$T/rounds")
for i in $((n - 3)) $((n - 2)) $((n - 1)); do
	[ $i -ge 0 ] || continue
	check clu_surv_node1_intact_$((n - i)) "$FSYNCER" verify \
		--seed $((SEED + 10 + i)) "$M1/w$i" "$T/w$i.log"
done
check clu_surv_node2_intact "$FSYNCER" verify --seed $((SEED + 1)) \
	"$M1/n2" "$T/n2.log"
clu_flog_end clu_surv clu_surv_truncates_kept "$M1"
exit 0
