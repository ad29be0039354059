#!/bin/sh
# ucfs test runner: runs every unit test binary in BUILD/tests/test_* and
# every script tests/integration/*.sh, then lists the slowest programs and
# prints "N passed, N failed" as its last line.
#
# Each test program reports one line per case: "PASS name" or "FAIL name"
# (tests/unit/harness.h and tests/lib.sh print them). A program that exits
# non-zero without printing a FAIL line counts as one failure, so a crash
# is never a pass. A program that prints "SKIP name: reason" is counted as
# skipped.
#
# Programs run UCFS_TEST_JOBS at a time: first the unit test binaries,
# then the integration scripts (each works in its own temporary directory
# with its own mounts, daemons and PID-derived ports), then, one at a
# time with nothing beside them, the scripts with a line
#   # run.sh: alone (why)
# (they drop the caches of the whole machine or take many minutes of
# both cores). Scripts with a line
#   # run.sh: long (why)
# start first among the others, so that the last minute of the parallel
# phase is not one long script with the other job slot idle. Each
# program's summary ("== NAME: ... (Ns)", its wall time,
# and the FAIL lines and log tail of a failure) is printed in one piece
# when it ends; the logs are in BUILD/test-logs/.
#
# Usage: sh tests/run.sh [BUILD] [PATTERN...]
#   PATTERN selects tests whose file name contains it.
#   UCFS_TEST_TIMEOUT  seconds per program (default 900)
#   UCFS_TEST_JOBS     programs at once (default 2; 1: one after another)
#   UCFS_TEST_SLOWEST  how many of the slowest to list (default 10)
#   UCFS_SEED          seed for randomized tests (default: fixed per test)
set -u
BUILD=${1:-build}
[ $# -gt 0 ] && shift
BUILD=$(cd "$BUILD" && pwd) || { echo "no build dir"; exit 2; }
export UCFS_BUILD="$BUILD"
TOP=$(cd "$(dirname "$0")/.." && pwd)
export UCFS_TOP="$TOP"
TMO=${UCFS_TEST_TIMEOUT:-900}
JOBS=${UCFS_TEST_JOBS:-2}
SLOWEST=${UCFS_TEST_SLOWEST:-10}
LOGDIR="$BUILD/test-logs"
mkdir -p "$LOGDIR"

selected() {
	[ $# -le 1 ] && return 0
	name=$1; shift
	for p in "$@"; do
		case "$name" in *"$p"*) return 0 ;; esac
	done
	return 1
}

# run_one unit|script NAME: run the test program under the timeout into
# NAME's log, count its PASS/FAIL/SKIP lines into NAME.res ("PASSED FAILED
# SKIPPED SECONDS"), print its summary in one write. Uses no state of the
# calling shell: the jobs of run_many are "run.sh BUILD --run KIND NAME".
run_one() {
	kind=$1 name=$2
	log="$LOGDIR/$name.log"
	start=$(date +%s)
	if [ "$kind" = unit ]; then
		timeout -k 10 "$TMO" "$BUILD/tests/$name" >"$log" 2>&1
	else
		timeout -k 10 "$TMO" sh "$TOP/tests/integration/$name.sh" \
			>"$log" 2>&1
	fi
	rc=$?
	secs=$(( $(date +%s) - start ))
	p=$(grep -c '^PASS ' "$log")
	f=$(grep -c '^FAIL ' "$log")
	s=$(grep -c '^SKIP ' "$log")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		if [ "$rc" -eq 124 ]; then
			echo "FAIL $name: timed out after ${TMO}s" >>"$log"
		else
			echo "FAIL $name: exit status $rc" >>"$log"
		fi
	fi
	if [ "$f" -gt 0 ]; then
		echo "== $name: $p passed, $f failed, $s skipped (${secs}s) — log:"
		grep -E '^(FAIL|SKIP) ' "$log" | head -20
		tail -n 30 "$log" | grep -vE '^(PASS|FAIL|SKIP) ' | sed 's/^/   | /'
	else
		echo "== $name: $p passed, $s skipped (${secs}s)"
		grep '^SKIP ' "$log" | head -5
	fi >"$LOGDIR/$name.sum"
	cat "$LOGDIR/$name.sum"
	echo "$p $f $s $secs" >"$LOGDIR/$name.res"
}

if [ "${1:-}" = --run ]; then	# one job of run_many
	shift
	run_one "$@"
	exit 0
fi

# run_many KIND JOBS NAME...: run_one KIND for each NAME, JOBS at a time.
run_many() {
	_kind=$1 _jobs=$2
	shift 2
	for _n in "$@"; do echo "$_n"; done |
		xargs -r -P "$_jobs" -n 1 sh "$0" "$BUILD" --run "$_kind"
}

units="" par="" long="" alone=""
for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	n=$(basename "$t")
	selected "$n" "$@" && units="$units $n"
done
for t in "$TOP"/tests/integration/*.sh; do
	[ -f "$t" ] || continue
	n=$(basename "$t" .sh)
	selected "$n" "$@" || continue
	if grep -q '^# run\.sh: alone' "$t"; then
		alone="$alone $n"
	elif grep -q '^# run\.sh: long' "$t"; then
		long="$long $n"
	else
		par="$par $n"
	fi
done
par="$long $par"
for n in $units $par $alone; do rm -f "$LOGDIR/$n.res"; done

run_many unit "$JOBS" $units
run_many script "$JOBS" $par
run_many script 1 $alone

pass=0 fail=0 skip=0 failed_names=""
: >"$LOGDIR/times"
for n in $units $par $alone; do
	p=0 f=1 s=0 secs=0	# no .res: it never ran to the end
	[ -f "$LOGDIR/$n.res" ] && read -r p f s secs <"$LOGDIR/$n.res"
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
	[ "$f" -gt 0 ] && failed_names="$failed_names $n"
	echo "$secs $n" >>"$LOGDIR/times"
done

[ -n "$failed_names" ] && echo "failed:$failed_names"
if [ "$SLOWEST" -gt 0 ] && [ -s "$LOGDIR/times" ]; then
	echo "slowest:"
	sort -rn "$LOGDIR/times" | head -n "$SLOWEST" |
		awk '{ printf "  %5ds %s\n", $1, $2 }'
fi
if [ "$skip" -gt 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ "$fail" -eq 0 ]
