#!/bin/sh
# ucfs test runner: runs every unit test binary in BUILD/tests/test_* and
# every script tests/integration/*.sh, then prints the slowest programs
# and, as its last line, "N passed, N failed".
#
# Each test program reports one line per case: "PASS name" or "FAIL name"
# (tests/unit/harness.h and tests/lib.sh print them). A program that exits
# non-zero without printing a FAIL line counts as one failure, so a crash
# is never a pass. A program that prints "SKIP name: reason" is counted as
# skipped.
#
# The unit test binaries run UCFS_TEST_JOBS at a time (each on its own RAM
# devices, temporary directories and PID-derived ports); their summaries
# are printed in name order once all of them are done. The integration
# scripts run one at a time (they mount, time and drop caches), each
# summary as it finishes. Every summary gives the program's wall time;
# the UCFS_TEST_SLOWEST slowest are listed before the last line.
#
# Usage: sh tests/run.sh [BUILD] [PATTERN...]
#   PATTERN selects tests whose file name contains it.
#   UCFS_TEST_TIMEOUT  seconds per program (default 900)
#   UCFS_TEST_JOBS     unit test binaries at once (default 2; 1: in turn)
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
TIMES="$LOGDIR/times"

pass=0 fail=0 skip=0
failed_names=""

selected() {
	[ $# -le 1 ] && return 0
	name=$1; shift
	for p in "$@"; do
		case "$name" in *"$p"*) return 0 ;; esac
	done
	return 1
}

# exec_one NAME CMD...: run CMD into NAME's log under the timeout; its exit
# status and wall time go to NAME's .res file ("RC SECONDS"). Needs no
# state of this shell: "run.sh --exec" runs it for the parallel jobs.
exec_one() {
	name=$1; shift
	log="$LOGDIR/$name.log"
	rm -f "$LOGDIR/$name.res"
	start=$(date +%s)
	timeout -k 10 "$TMO" "$@" >"$log" 2>&1
	rc=$?
	echo "$rc $(( $(date +%s) - start ))" >"$LOGDIR/$name.res"
}

# report NAME: count NAME's PASS/FAIL/SKIP lines and print its summary.
report() {
	name=$1
	log="$LOGDIR/$name.log"
	rc=1 secs=0	# no .res: the job never ran
	[ -f "$LOGDIR/$name.res" ] && read -r rc secs <"$LOGDIR/$name.res"
	[ -f "$log" ] || : >"$log"
	echo "$secs $name" >>"$TIMES"
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
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
	if [ "$f" -gt 0 ]; then
		failed_names="$failed_names $name"
		echo "== $name: $p passed, $f failed, $s skipped (${secs}s) — log:"
		grep -E '^(FAIL|SKIP) ' "$log" | head -20
		tail -n 30 "$log" | grep -vE '^(PASS|FAIL|SKIP) ' | sed 's/^/   | /'
	else
		echo "== $name: $p passed, $s skipped (${secs}s)"
		grep '^SKIP ' "$log" | head -5
	fi
}

if [ "${1:-}" = --exec ]; then	# a parallel job (see below)
	shift
	exec_one "$@"
	exit 0
fi
: >"$TIMES"

# Unit tests: UCFS_TEST_JOBS at once, then their summaries in order.
units=""
for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	n=$(basename "$t")
	selected "$n" "$@" && units="$units $n"
done
if [ -n "$units" ]; then
	for n in $units; do rm -f "$LOGDIR/$n.res"; echo "$n"; done |
		xargs -P "$JOBS" -I{} sh "$0" "$BUILD" --exec {} "$BUILD/tests/{}"
	for n in $units; do report "$n"; done
fi
for t in "$TOP"/tests/integration/*.sh; do
	[ -f "$t" ] || continue
	n=$(basename "$t" .sh)
	selected "$n" "$@" || continue
	exec_one "$n" sh "$t"
	report "$n"
done

[ -n "$failed_names" ] && echo "failed:$failed_names"
if [ "$SLOWEST" -gt 0 ] && [ -s "$TIMES" ]; then
	echo "slowest:"
	sort -rn "$TIMES" | head -n "$SLOWEST" |
		awk '{ printf "  %5ds %s\n", $1, $2 }'
fi
if [ "$skip" -gt 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ "$fail" -eq 0 ]
