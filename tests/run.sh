#!/bin/sh
# ucfs test runner: runs every unit test binary in BUILD/tests/test_* and
# every script tests/integration/*.sh, then prints "N passed, N failed" as
# its last line.
#
# Each test program reports one line per case: "PASS name" or "FAIL name"
# (tests/unit/harness.h and tests/lib.sh print them). A program that exits
# non-zero without printing a FAIL line counts as one failure, so a crash
# is never a pass. A program that prints "SKIP name: reason" is counted as
# skipped.
#
# Usage: sh tests/run.sh [BUILD] [PATTERN...]
#   PATTERN selects tests whose file name contains it.
#   UCFS_TEST_TIMEOUT  seconds per program (default 900)
#   UCFS_SEED          seed for randomized tests (default: fixed per test)
set -u
BUILD=${1:-build}
[ $# -gt 0 ] && shift
BUILD=$(cd "$BUILD" && pwd) || { echo "no build dir"; exit 2; }
export UCFS_BUILD="$BUILD"
TOP=$(cd "$(dirname "$0")/.." && pwd)
export UCFS_TOP="$TOP"
TMO=${UCFS_TEST_TIMEOUT:-900}
LOGDIR="$BUILD/test-logs"
mkdir -p "$LOGDIR"

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

run_one() {	# $1 = display name, rest = command
	name=$1; shift
	log="$LOGDIR/$name.log"
	start=$(date +%s)
	timeout -k 10 "$TMO" "$@" >"$log" 2>&1
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

for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	n=$(basename "$t")
	selected "$n" "$@" && run_one "$n" "$t"
done
for t in "$TOP"/tests/integration/*.sh; do
	[ -f "$t" ] || continue
	n=$(basename "$t" .sh)
	selected "$n" "$@" && run_one "$n" sh "$t"
done

[ -n "$failed_names" ] && echo "failed:$failed_names"
if [ "$skip" -gt 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ "$fail" -eq 0 ]
