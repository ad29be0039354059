#!/bin/sh
# age_bench — the aged part of "ucfs-bench dd --quick" on ucfs and ext4:
# each system gets the fresh and the aged dd rates (setup "aged") and the
# fill ucfs-age reached, the DESIGN.md target "aged fs write / fresh" has a
# value and a verdict, the aged table is printed, and nothing stays
# mounted. About 15 s.
# run.sh: alone (ucfs-bench drops the caches of the machine)
. "$UCFS_TOP/tests/lib.sh"

if [ "$(id -u)" != 0 ]; then
	skip age_bench "needs root (loop devices, mounts)"
	exit 0
fi
for c in jq mkfs.ext4; do
	command -v "$c" >/dev/null 2>&1 ||
		{ skip age_bench "$c missing: run make deps"; exit 0; }
done

OUT=$T/out
timeout -k 10 300 sh "$B/ucfs-bench" dd --quick --no-install --no-plots \
	--systems ucfs,ext4 --out "$OUT" --work "$T/work" >"$T/log" 2>&1
rc=$?
if [ "$rc" = 0 ]; then pass age_bench_runs
else fail age_bench_runs "exit $rc"; tail -n 30 "$T/log" | sed 's/^/    /'
fi
J=$OUT/results.json

for s in ucfs ext4; do
	check "age_bench_${s}_rates" jq -e --arg s "$s" '[.results[] |
		select(.system == $s and .setup == "aged" and .metric == "MBps"
		and (.value | type) == "number") | .phase] | sort ==
		["aged_read", "aged_write", "fresh_read", "fresh_write"]' "$J"
	check "age_bench_${s}_filled" jq -e --arg s "$s" '[.results[] |
		select(.system == $s and .phase == "age" and
		.metric == "fill_pct") | .value] | length == 1 and
		.[0] >= 75 and .[0] <= 85' "$J"
done
check age_bench_no_failed jq -e '[.results[] | select(.metric ==
	"failed")] | length == 0' "$J"
check age_bench_ucfs_allocs jq -e '[.results[] | select(.system == "ucfs"
	and .setup == "aged" and .metric == "alloc_calls")] | length == 2' "$J"
check age_bench_target jq -e '[.targets[] | select(.target ==
	"aged fs write / fresh" and .system == "ucfs")] | length == 1 and
	(.[0].value | type) == "number" and
	(.[0].verdict == "met" or .[0].verdict == "NOT met")' "$J"
check age_bench_table grep -q 'then on it aged (ucfs-age --fill 80' \
	"$OUT/tables.txt"
check age_bench_not_skipped jq -e '[.skipped[] | select(.what ==
	"aged")] | length == 0' "$J"
check age_bench_unmounted sh -c "! grep -q '$T/work' /proc/mounts"
check age_bench_no_loop_left sh -c "! losetup -a | grep -q '$T/work'"
exit 0
