#!/bin/sh
# campaign.sh — `make fuzz`: runs every libFuzzer harness of BUILD/fuzz for
# SECONDS each, then prints one summary line per harness.
#
# Usage: sh tests/fuzz/campaign.sh BUILD SECONDS [NAME...]
#
# Per harness NAME: the working corpus is BUILD/corpus/NAME (kept between
# campaigns, started from tests/fuzz/NAME/seeds and .../regress and the
# seed the harness writes itself, FZ_WRITE_SEED), crashes, leaks and
# timeouts go to BUILD/crashes/NAME/ and the log to BUILD/fuzz-NAME.log.
# Summary: "fuzz NAME: S s (as run: a find stops it), EXECS execs, cov EDGES, ft FEATURES,
# corpus N, crashes N". Exit status 1 if anything was found.
set -u
BUILD=$1
SECS=$2
shift 2
TOP=$(cd "$(dirname "$0")/../.." && pwd)
found=0
names=$*
if [ -z "$names" ]; then
	for b in "$BUILD"/fuzz/fuzz_*; do
		names="$names ${b##*/fuzz_}"
	done
fi
for n in $names; do
	bin=$BUILD/fuzz/fuzz_$n
	corpus=$BUILD/corpus/$n
	crashes=$BUILD/crashes/$n
	log=$BUILD/fuzz-$n.log
	mkdir -p "$corpus" "$crashes"
	for d in seeds regress; do
		[ -d "$TOP/tests/fuzz/$n/$d" ] &&
			cp -n "$TOP/tests/fuzz/$n/$d"/* "$corpus"/ 2>/dev/null
	done
	: >"$BUILD/empty"
	FZ_WRITE_SEED=$corpus/built-seed "$bin" "$BUILD/empty" \
		>/dev/null 2>&1 </dev/null
	start=$(date +%s)
	"$bin" -max_total_time="$SECS" -timeout=30 -rss_limit_mb=2048 \
		-max_len=1048576 -print_final_stats=1 \
		-artifact_prefix="$crashes/" "$corpus" </dev/null >"$log" 2>&1
	secs=$(($(date +%s) - start))
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	line=$(grep -E '^#[0-9]+' "$log" | grep 'cov:' | tail -n 1)
	# a find stops libFuzzer before its final stats: the last status line
	[ -n "$execs" ] || execs=$(echo "$line" | sed -n 's/^#\([0-9]*\).*/\1/p')
	cov=$(echo "$line" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
	ft=$(echo "$line" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
	ncorp=$(ls "$corpus" | wc -l)
	ncrash=$(ls "$crashes" | wc -l)
	[ "$ncrash" -gt 0 ] && found=1
	echo "fuzz $n: $secs s, ${execs:-?} execs, cov ${cov:-?}," \
		"ft ${ft:-?}, corpus $ncorp, crashes $ncrash"
done
[ "$found" -eq 0 ]
