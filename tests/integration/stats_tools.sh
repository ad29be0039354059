# stats_tools.sh — ucfs-stat, ucfs-top and ucfs-trace against stats_fake
# (a real struct fs_stats and server with a simulated workload), so the
# tools are tested without a mounted filesystem. The real-mount tests are
# in stats_mount.sh.
. "$UCFS_TOP/tests/lib.sh"

FAKE=$B/tests/stats_fake
for p in "$FAKE" "$B/ucfs-stat" "$B/ucfs-top" "$B/ucfs-trace"; do
	[ -x "$p" ] || { fail "build" "$p missing"; exit 1; }
done
command -v jq >/dev/null || { skip all "jq not installed"; exit 0; }

# start_fake NAME ARGS... — run stats_fake in the background, wait until
# it serves, register its stop.
start_fake() {
	_n=$1; shift
	"$FAKE" "$@" >"$T/$_n.out" 2>&1 &
	_pid=$!
	on_exit "kill $_pid; wait $_pid"
	wait_for 5 grep -q ready "$T/$_n.out"
}

start_fake a --sock "$T/a.sock" --node 1 --creates 100 ||
	fail "fake_a" "$(cat "$T/a.out")"

# 1. JSON is valid and has the documented keys; 100 creates count 100.
"$B/ucfs-stat" --json "$T/a.sock" >"$T/a.json"
check json_valid jq -e . "$T/a.json"
check json_keys jq -e '
	.version == 1 and (.time | type) == "number" and
	.node.id == 1 and .node.slot == 0 and
	(.node.uptime_s | type) == "number" and
	.node.options.lockproto == "fake" and
	(.fuse.ops | length) >= 40 and
	(.fuse.ops | to_entries | all(.value.count != null and
		.value.errors != null and .value.lat.p50_ns != null and
		.value.lat.p99_ns != null and .value.lat.max_ns != null and
		(.value.lat.hist | type) == "array")) and
	.server.served == 0 and .server.refused == 0 and
	(.blockdev.read.count | type) == "number" and
	(.journal.flush | has("fsync") and has("timer") and has("demote")
		and has("full")) and
	(.locks.types.inode | has("requests") and has("bast_recv")) and
	(.locks.top[0].holders | length) == 1' "$T/a.json"
check creates_100 jq -e '.fuse.ops.create.count == 100 and
	.fuse.ops.create.errors == 0 and .fuse.count == 100 and
	.fuse.ops.lookup.count == 0' "$T/a.json"
check served_counts sh -c "'$B/ucfs-stat' --json '$T/a.sock' |
	jq -e '.server.served == 1'"

# 2. the human format shows the create row
"$B/ucfs-stat" "$T/a.sock" >"$T/a.txt"
check human_create grep -Eq '^create +100 +0 ' "$T/a.txt"
check human_node grep -Eq '^node.id +1$' "$T/a.txt"

# 3. several nodes side by side; rates per interval
start_fake b --sock "$T/b.sock" --node 2 --rate 2000 --seed 7 ||
	fail "fake_b" "$(cat "$T/b.out")"
check two_nodes_json sh -c "'$B/ucfs-stat' --json '$T/a.sock' '$T/b.sock' |
	jq -e 'length == 2 and .[0].node.id == 1 and .[1].node.id == 2'"
"$B/ucfs-stat" "$T/a.sock" "$T/b.sock" >"$T/ab.txt"
check two_nodes_human grep -Eq '^node.id +1 +2$' "$T/ab.txt"
"$B/ucfs-stat" --json --interval 0.5 --count 2 "$T/a.sock" "$T/b.sock" \
	>"$T/rates.json"
check interval_lines test "$(wc -l <"$T/rates.json")" -eq 2
# node a is idle (rate 0), node b does ~2000 ops/s
check interval_rates jq -e -s 'all(.[];
	.nodes[0].rates["fuse.ops.create.count"] == 0 and
	.nodes[1].rates["fuse.count"] > 100 and
	.nodes[1].rates["node.id"] == 2)' "$T/rates.json"
"$B/ucfs-stat" --interval 0.3 --count 1 "$T/b.sock" >"$T/b.txt"
check interval_human grep -q 'ops/s' "$T/b.txt"

# 4. a non-root user is refused
if [ "$(id -u)" -eq 0 ]; then
	mkdir -p "$T/bin" && cp "$B/ucfs-stat" "$T/bin/" && chmod 755 "$T" \
		"$T/bin"
	if setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$T/bin/ucfs-stat" --json "$T/a.sock" >"$T/nobody.out" 2>&1
	then
		fail nonroot_refused "nobody read the stats"
	else
		check nonroot_refused grep -q 'Permission denied' \
			"$T/nobody.out"
	fi
	chmod 700 "$T"
else
	skip nonroot_refused "needs root"
fi

# 5. ucfs-top renders in tmux with sane content and quits on q
if command -v tmux >/dev/null; then
	TM="tmux -L ucfs-test-$$"
	on_exit "$TM kill-server"
	$TM new-session -d -s top -x 110 -y 40 \
		"'$B/ucfs-top' '$T/a.sock' '$T/b.sock'"
	sleep 2.5
	$TM capture-pane -p -t top >"$T/top.txt" 2>&1
	check top_header grep -q '^ucfs-top .* q: quit' "$T/top.txt"
	check top_nodes grep -Eq '^node +n1/s0 +n2/s1' "$T/top.txt"
	check top_ops_rate sh -c "awk '/^FUSE ops\\/s/ { exit !(\$4 > 100) }' \
		'$T/top.txt'"
	check top_op_rows grep -Eq '^(lookup|getattr|write) ' "$T/top.txt"
	check top_resources grep -q 'inode:4242' "$T/top.txt"
	$TM send-keys -t top q
	sleep 0.5
	if $TM has-session -t top 2>/dev/null; then
		fail top_quits_on_q
	else
		pass top_quits_on_q
	fi
else
	skip top_tmux "tmux not installed"
fi
check top_batch sh -c "'$B/ucfs-top' --batch --iterations 1 '$T/b.sock' |
	grep -q 'FUSE ops/s'"

# 6. ucfs-trace: a 2-node ping-pong trace, summarized and plotted
start_fake p1 --sock "$T/p1.sock" --node 1 --trace "$T/t1.jsonl" \
	--pingpong 20 --seconds 2 --rate 200 --trace-ops
start_fake p2 --sock "$T/p2.sock" --node 2 --trace "$T/t2.jsonl" \
	--pingpong 20 --seconds 2
sleep 2.5
"$B/ucfs-trace" --json "$T/t1.jsonl" "$T/t2.jsonl" >"$T/sum.json"
check trace_summary jq -e '.events > 100 and (.nodes | length) == 2 and
	.bad_lines == 0 and .pingpong[0].res == "inode:4242" and
	.pingpong[0].transfers > 20 and .pingpong[0].pairs[0][0] == 1 and
	.pingpong[0].pairs[0][1] == 2 and .top_waits[0].wait_us > 1000 and
	(.timeline | length) >= 2 and .timeline[0].ops > 0' "$T/sum.json"
printf 'not json\n{"t":1,"ev":"grant"}\n' >"$T/bad.jsonl"
check trace_bad_lines sh -c "'$B/ucfs-trace' --json '$T/bad.jsonl' |
	jq -e '.bad_lines == 2 and .events == 0'"
if command -v gnuplot >/dev/null; then
	"$B/ucfs-trace" --plot "$T/plot" "$T/t1.jsonl" "$T/t2.jsonl" \
		>"$T/sum.txt" 2>&1
	check trace_text grep -q '^inode:4242 ' "$T/sum.txt"
	check plot_svg sh -c "test -s '$T/plot.svg' &&
		grep -q '<svg' '$T/plot.svg'"
	check plot_png sh -c "test -s '$T/plot.png' &&
		head -c 8 '$T/plot.png' | od -c | grep -q 'P   N   G'"
else
	skip plot "gnuplot not installed"
fi
exit 0
