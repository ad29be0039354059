#!/bin/sh
# bench_quick — the CI smoke test of ucfs-bench. It checks that the tool
# works end to end, not the figures, so it runs the --quick sizes smaller
# still (a 256 MiB image: less to prime and age; one iozone record size,
# the record loop runs all the same) and each system in each setup once:
#  (1) "ucfs-bench all --quick --lockproto nolock --setups 1node" runs
#      every scenario on every 1-node system (ucfs; ext4 on loop,
#      passthrough_ll, the ucfs lens over ext4, the raw image, in both
#      its setups); then the JSON must be valid and carry the keys
#      tools/BENCH.md documents, every scenario must have measured values,
#      ratios, lens steps, tables and plots must be there;
#  (2) "ucfs-bench all --quick --systems ucfs --setups 2way,aged": ucfs's
#      other setups (2 clients at once on one mount in untar, iozone and
#      dd, and dd on an aged image) are measured, dd reads back what it
#      wrote, nothing failed. The baselines (ext4, pt, the lens) run only
#      1node: their 2-client and aged runs measured other code than ours
#      (the lens under concurrency: pt_scale, pt_fsx) through the same
#      bench paths as ucfs's;
#  (3) "ucfs-bench untar --quick --systems ucfs,ucfs_dlm": the cluster
#      system (lockproto=dlm: the probe, node 2 mounted beside node 1, the
#      2-node setup) is measured, or the JSON says why not (ucfs comes
#      along for the dlm / nolock target rows);
#  (4) the two issue-13 scenarios on ucfs_dlm, briefly: "append" (2
#      nodes, 1 s) measures records/s and lock transfers/s and reads every
#      record back on both nodes (lost 0); "find --files 2000" makes the
#      tree, walks it, and records the daemon's peak RSS beside its bounds,
#      each with its target row;
# and after all nothing may stay mounted. About 2 minutes on 2 cores
# under a load of 3-5 (1: 45 s, 2: 11 s, 3: 41 s, 4: 15 + 12 s; "all" on
# every system in every setup took 2.3 minutes on quiet cores, and with
# ucfs_dlm in every scenario 3.5).
# run.sh: alone (ucfs-bench drops the caches of the machine, loads both cores)
. "$UCFS_TOP/tests/lib.sh"

if [ "$(id -u)" != 0 ]; then
	skip bench_quick "needs root (loop devices, mounts)"
	exit 0
fi
for c in jq fio bonnie++ gnuplot mkfs.ext4 pkg-config; do
	command -v "$c" >/dev/null 2>&1 ||
		{ skip bench_quick "$c missing: run make deps"; exit 0; }
done
[ -e /usr/src/linux-source-6.1.tar.xz ] ||
	{ skip bench_quick "linux-source-6.1 missing: run make deps"; exit 0; }

# bench NAME ARGS...: ucfs-bench ARGS into $T/NAME, PASS NAME_runs if it
# exits 0; says how long it took
bench() {
	_n=$1; shift
	_t0=$(date +%s)
	timeout -k 10 600 sh "$B/ucfs-bench" "$@" --quick --no-install \
		--size 256 --out "$T/$_n" --work "$T/work" >"$T/$_n.log" 2>&1
	_rc=$?
	echo "$_n: $(($(date +%s) - _t0)) s"
	if [ "$_rc" = 0 ]; then pass "${_n}_runs"
	else fail "${_n}_runs" "exit $_rc"
		tail -n 30 "$T/$_n.log" | sed 's/^/    /'
	fi
}
bench bench_quick all --lockproto nolock --records 1m --setups 1node
bench bench_setups all --lockproto nolock --records 1m --systems ucfs \
	--setups 2way,aged --no-plots
bench bench_dlm untar --systems ucfs,ucfs_dlm
UCFS_BENCH_APPEND_SECS=1 bench bench_append append --systems ucfs_dlm
bench bench_find find --systems ucfs_dlm --files 2000
OUT=$T/bench_quick J2=$T/bench_dlm/results.json
J=$OUT/results.json JS=$T/bench_setups/results.json

check bench_json_valid python3 -m json.tool "$J"
check bench_setups_json_valid python3 -m json.tool "$JS"
check bench_json_top_keys jq -e '
	["tool", "version", "scenario", "quick", "started", "finished",
	 "host", "params", "systems", "results", "runs", "ratios", "targets",
	 "skipped", "ucfs_stats", "plots"] - keys == [] and
	.tool == "ucfs-bench" and .quick == true and .scenario == "all"' "$J"
for j in "$J" "$JS"; do
	n=bench_json; [ "$j" = "$JS" ] && n=bench_setups
	check "${n}_result_keys" jq -e '.results | length > 0 and all(.[];
		keys == (["client", "metric", "phase", "scenario", "setup",
			  "system", "unit", "value"]))' "$j"
	# every dd write of a system has its read (cold remount between)
	check "${n}_dd_read_after_write" jq -e '[.results[] | select(
		.scenario == "dd" and .phase == "write" and .metric ==
		"MBps") | [.system, .setup, .client]] - [.results[] | select(
		.scenario == "dd" and .phase == "read" and .metric == "MBps")
		| [.system, .setup, .client]] == []' "$j"
	check "${n}_no_failed_steps" jq -e '[.results[] | select(.metric ==
		"failed")] | length == 0' "$j"
done
for s in untar bonnie iozone fileben dd; do
	check "bench_json_has_$s" jq -e --arg s "$s" '[.results[] |
		select(.scenario == $s and (.value | type) == "number")]
		| length > 0' "$J"
done
# ucfs in its other setups: 2 clients at once in untar, iozone and dd
# (aggregate MB/s), dd fresh and aged
for s in untar iozone dd; do
	check "bench_setups_2clients_$s" jq -e --arg s "$s" '[.results[] |
		select(.scenario == $s and .system == "ucfs" and .setup ==
		"2clients" and .client == "all" and (.value | type) ==
		"number")] | length > 0' "$JS"
done
check bench_setups_aged jq -e '[.results[] | select(.scenario == "dd" and
	.system == "ucfs" and .setup == "aged" and (.phase == "fresh_write"
	or .phase == "aged_write") and (.value | type) == "number")]
	| length > 0 and ([.[].phase] | unique | length == 2)' "$JS"
# the daemons' peak memory, and nothing else under an rss: phase
check bench_daemon_rss jq -e '([.results[] | select(.system == "ucfs" and
	(.phase | startswith("rss:")) and .metric == "peak" and .value > 0)]
	| length > 0) and ([.results[] | select((.phase | startswith("rss:"))
	and .metric != "peak")] | length == 0)' "$J"
check bench_ratio_keys jq -e '.ratios | length > 0 and all(.[];
	(.ratio | type) == "number" and (.baseline | type) == "string")' "$J"
check bench_ext4_vs_pt_ratio jq -e '[.ratios[] | select(.system == "pt"
	and .baseline == "ext4" and .scenario == "untar")] | length > 0' "$J"
# the lens: ratios like any system, and its steps seen op by op
check bench_lens_vs_pt_ratio jq -e '[.ratios[] | select(.system == "lens"
	and .baseline == "pt" and .scenario == "untar")] | length > 0' "$J"
check bench_lens_steps jq -e '[.lens_steps[] | select(.scenario ==
	"untar" and .phase == "du_cold" and .fuse_ops > 0 and
	(.top_ops | test("readdirplus")))] | length > 0' "$J"
check bench_untar_files jq -e '.params.untar_files > 1000' "$J"
check bench_tables grep -q 'x ext4\|xext4' "$OUT/tables.txt"
check bench_plots_exist sh -c "jq -r '.plots[]' '$J' | grep -q svg &&
	jq -r '.plots[]' '$J' | while read -r p; do test -s \"\$p\" || exit 1;
	done"
check bench_png_is_png sh -c "head -c 4 \"\$(jq -r '.plots[]' '$J' |
	grep png | head -n 1)\" | grep -q PNG"
# The 2-node part is either measured or says why not.
check bench_two_nodes_accounted jq -e '([.results[] | select(.system ==
	"ucfs_dlm" and .setup == "2nodes" and (.value | type) == "number")]
	| length > 0) or ([.skipped[] | select(.what == "2 nodes" or
	.what == "all")] | length > 0)' "$J2"
check bench_dlm_no_failed_steps jq -e '[.results[] | select(.metric ==
	"failed")] | length == 0' "$J2"
JA=$T/bench_append/results.json JF=$T/bench_find/results.json
check bench_append_measured jq -e '[.results[] | select(.system ==
	"ucfs_dlm" and .setup == "2nodes" and .client == "all" and
	(.metric == "records_ps" or .metric == "transfers_ps") and
	.value > 0)] | length == 2' "$JA"
check bench_append_nothing_lost jq -e '([.results[] | select(.metric ==
	"lost" and .value == 0)] | length == 2) and ([.results[] |
	select(.metric == "failed")] | length == 0)' "$JA"
check bench_append_target jq -e '[.targets[] | select(.target |
	test("lock transfers"))] | length == 1' "$JA"
check bench_find_measured jq -e '[.results[] | select(.scenario == "find"
	and .phase == "find" and ((.metric == "rss_mb" and .value > 0) or
	(.metric == "glock_max" and .value > 0) or .metric == "real"))]
	| length == 3' "$JF"
# the bound with the glock engine's bytes, and with the lock manager's
check bench_find_target jq -e '[.targets[] | select(.target |
	test("peak RSS"))] | length == 2' "$JF"
check bench_unmounted sh -c "! grep -q '$T/work' /proc/mounts"
check bench_no_loop_left sh -c "! losetup -a | grep -q '$T/work'"
check bench_scratch_removed test -z "$(ls -A "$T/work")"
exit 0
