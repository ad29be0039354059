#!/bin/sh
# bench_parse — ucfs-bench's parsers against recorded samples, and the
# ucfs-bench-ops helpers against their own parsers.
#
# tests/data/bench/NAME.KIND.txt is real output (bonnie++, fio --output-
# format=json, dd, ucfs-bench-ops, and the fileben/db lines of seeds/003);
# NAME.KIND.expect is what "ucfs-bench parse KIND" must print for it
# (checked by hand once: see tools/BENCH.md). bad-NAME.KIND.txt must be
# rejected (non-zero exit), so a broken run never turns into a figure.
. "$UCFS_TOP/tests/lib.sh"

D=$UCFS_TOP/tests/data/bench
BENCH="sh $B/ucfs-bench"
OPS=$B/ucfs-bench-ops

for f in "$D"/*.txt; do
	n=$(basename "$f" .txt)
	kind=${n##*.}
	case $n in
	bad-*)
		if $BENCH parse "$kind" "$f" >"$T/out" 2>&1; then
			fail "parse_rejects_$n" "accepted: $(head -n 3 "$T/out")"
		else
			pass "parse_rejects_$n"
		fi ;;
	*)
		if ! $BENCH parse "$kind" "$f" >"$T/out" 2>"$T/err"; then
			fail "parse_$n" "exit $?: $(head -n 3 "$T/err")"
		elif diff -u "$D/$n.expect" "$T/out" >"$T/diff"; then
			pass "parse_$n"
		else
			fail "parse_$n"; sed 's/^/    /' "$T/diff"
		fi ;;
	esac
done

# The parser output must be what the tables use: numbers or "-".
check parse_values_are_numbers sh -c "$BENCH parse bonnie \
	'$D/passthrough-fast.bonnie.txt' | awk '\$1 != \"size\" && \
	\$2 !~ /^([0-9.]+|-)\$/ { exit 1 }'"

# ucfs-bench-ops: time passes the exit status through and is parseable.
"$OPS" time -o "$T/t1" sh -c 'exit 3'
rc=$?
if [ "$rc" = 3 ] && $BENCH parse time "$T/t1" | grep -qx 'status 3'; then
	pass ops_time_status
else
	fail ops_time_status "rc=$rc $(cat "$T/t1")"
fi
"$OPS" time -o "$T/t2" sleep 0.2
real=$($BENCH parse time "$T/t2" | awk '$1 == "real" { print $2 }')
check ops_time_real awk -v r="$real" 'BEGIN { exit !(r >= 0.19 && r < 5) }'

# fileben writes then reads a real file; db leaves the directory empty.
"$OPS" fileben -0 -p 3 -f "$T/aaa" >"$T/fw" &&
	"$OPS" fileben -1 -p 3 -f "$T/aaa" >"$T/fr"
check ops_fileben_size test "$(stat -c %s "$T/aaa")" = 131072
check ops_fileben_parse sh -c "$BENCH parse fileben '$T/fw' |
	grep -qx 'passes 3' && $BENCH parse fileben '$T/fr' | grep -q total_kbs"
check ops_fileben_missing_file_fails sh -c \
	"! '$OPS' fileben -1 -p 1 -f '$T/nonexistent' 2>/dev/null"
mkdir "$T/db"
"$OPS" db -n 20 "$T/db" >"$T/db.out"
check ops_db_parse sh -c "$BENCH parse db '$T/db.out' | grep -q mvdir_ps"
check ops_db_cleans_up test -z "$(ls -A "$T/db")"
check ops_db_bad_dir_fails sh -c "! '$OPS' db '$T/nonexistent' 2>/dev/null"
check ops_bad_usage sh -c "! '$OPS' fileben -p x -f '$T/a' 2>/dev/null"
# Ratios: each row over each other baseline in the equivalent setup (two
# ucfs nodes <-> two baseline clients, mounted2 <-> 1node), nothing from or
# to a system/setup with a failed step, "-" (not measured) never divides.
mkdir -p "$T/ro"
cp "$D/ratios-sample.results.tsv" "$T/ro/results.tsv"
( UCFS_BENCH_LIB=1 . "$B/ucfs-bench"
  OUT=$T/ro BASELINES="raw ext4 pt"
  make_ratios
  UCFS_SYSTEMS=ucfs RUN_SYSTEMS="ucfs ext4 pt" KFILES=10
  make_targets )
if diff -u "$D/ratios-sample.ratios.expect" "$T/ro/ratios.tsv" >"$T/diff"
then pass ratios_sample
else fail ratios_sample; sed 's/^/    /' "$T/diff"
fi
check targets_two_nodes awk -F'\t' '$1 ~ /2 at once/ && $1 ~ /untar/ {
	found = 1; if ($3 != "1.250" || $5 != "met" || $6 != "2 nodes")
	exit 1 } END { exit !found }' "$T/ro/targets.tsv"
check targets_untar_vs_ext4 awk -F'\t' '$1 ~ /no unmount/ {
	found = 1; if ($3 != "2.000" || $5 != "met") exit 1 }
	END { exit !found }' "$T/ro/targets.tsv"

# --repeat: medians over the repetitions (even count: mean of the middle
# two), "-" only if never measured, a failed step stays failed.
mkdir -p "$T/rp"
cp "$D/repeat-sample.runs.tsv" "$T/rp/runs.tsv"
: >"$T/rp/results.tsv"
( UCFS_BENCH_LIB=1 . "$B/ucfs-bench"; OUT=$T/rp; collapse_runs x )
if diff -u "$D/repeat-sample.results.expect" "$T/rp/results.tsv" >"$T/diff"
then pass repeat_medians
else fail repeat_medians; sed 's/^/    /' "$T/diff"
fi

# The ucfs stats delta (recorded from tests/progs/stats_fake through
# ucfs-stat --json, two snapshots 1.5 s apart): the summary must be the
# difference of the counters, gauges and arrays left out.
mkdir -p "$T/sw/log" "$T/so"
cp "$D/stats-fake-before.json" "$T/sw/stats.ucfs.1.before.json"
cp "$D/stats-fake-after.json" "$T/sw/stats.ucfs.1.after.json"
( UCFS_BENCH_LIB=1 . "$B/ucfs-bench"
  WORK=$T/sw OUT=$T/so SCEN=untar SETUP=1node STATS_TAG=untar
  stats_delta ucfs 1 ) >"$T/stats.out"
S=$(ls "$T"/so/stats/*.json 2>/dev/null | head -n 1)
want=$(jq -s '[.[1].locks.types[].requests] as $b |
	[.[0].locks.types[].requests] as $a | ($b | add) - ($a | add)' \
	"$D/stats-fake-before.json" "$D/stats-fake-after.json")
check stats_delta_lock_requests jq -e --argjson w "$want" \
	'.summary.lock_requests == $w and $w > 0' "$S"
check stats_delta_commits jq -e -s '.[2].summary.journal_commits ==
	.[1].journal.commits - .[0].journal.commits' \
	"$D/stats-fake-before.json" "$D/stats-fake-after.json" "$S"
G='(pid|uptime_s|inflight|mean_ns|max_ns|p99_ns)$'
check stats_delta_no_gauges jq -e --arg g "$G" '.delta | length > 20 and
	(keys | all((test($g) or test("\\.hist\\.")) | not))' "$S"
check stats_delta_printed grep -q 'lock requests' "$T/stats.out"
exit 0
