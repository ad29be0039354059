# stats_pingpong.sh — a 2-node lock ping-pong over the real DLM (two
# lockspaces talking TCP on 127.0.0.1, tests/progs/stats_pingpong): the
# "locks" sections of both nodes count the blocking callbacks on both
# sides, the "net" sections count the traffic, and ucfs-trace finds the
# ping-pong in the two nodes' traces and plots it. (Through FUSE this
# needs cluster mode, which does not exist yet; this drives the same lock
# manager and stats code directly.)
. "$UCFS_TOP/tests/lib.sh"

command -v jq >/dev/null || { skip all "jq not installed"; exit 0; }
N=50
mkdir -p "$T/pp"
"$B/tests/stats_pingpong" --dir "$T/pp" --rounds $N >"$T/pp.out" 2>&1 &
PID=$!
on_exit "kill $PID; wait $PID"
if ! wait_for 30 grep -q ready "$T/pp.out"; then
	fail pingpong_ran "$(cat "$T/pp.out")"
	exit 1
fi
"$B/ucfs-stat" --json "$T/pp/n1.sock" "$T/pp/n2.sock" >"$T/st.json"
check json_two_nodes jq -e 'length == 2 and .[0].node.id == 1 and
	.[1].node.id == 2' "$T/st.json"
# every grant but the last was taken away by the other node's request:
# at least N-1 blocking callbacks on each side, 2N-1 in all, and as many
# sent (by the resource's master) as received
check requests_counted jq -e "all(.[]; .locks.types.inode.requests == $N and
	.locks.types.inode.grants_local + .locks.types.inode.grants_remote
	== $N and .locks.types.inode.num_exmode == $N)" "$T/st.json"
check basts_both_sides jq -e "all(.[]; .locks.types.inode.bast_recv >=
	$N - 1)" "$T/st.json"
check basts_total jq -e "(map(.locks.types.inode.bast_recv) | add) >=
	2 * $N - 1" "$T/st.json"
check basts_sent_eq_recv jq -e '(map(.locks.types.inode.bast_sent) | add)
	== (map(.locks.types.inode.bast_recv) | add)' "$T/st.json"
# every EX grant ends in an unlock of EX (the lock is handed over): N
# demotes on each node
check demotes_counted jq -e "all(.[]; .locks.types.inode.demotes == $N)" \
	"$T/st.json"
check waits_counted jq -e "(map(.locks.types.inode.waits) | add) >=
	2 * $N - 1" "$T/st.json"
check remote_rtt jq -e 'any(.[]; .locks.types.inode.grants_remote > 0 and
	.locks.types.inode.srttb > 0) and all(.[];
	.locks.types.inode.grant_lat.count == '$N')' "$T/st.json"
check net_peers jq -e 'all(.[]; (.net.peers | length) == 1 and
	.net.peers[0].frames_tx > 0 and .net.peers[0].bytes_rx > 0)' \
	"$T/st.json"
# the tracker counts every request not granted at once (queued behind a
# conflict, or answered over the network): at least lk's waits
check top_resources jq -e "all(.[]; .locks.top[0].res == \"inode:4242\" and
	.locks.top[0].type == \"inode\" and .locks.top[0].mode == \"EX\" and
	.locks.top[0].waits >= $N - 1 and .locks.top[0].wait_ns > 0) and
	(map(.locks.top[0].waits) | add) >= (map(.locks.types.inode.waits) |
	add)" "$T/st.json"
"$B/ucfs-top" --batch --iterations 1 "$T/pp/n1.sock" "$T/pp/n2.sock" \
	>"$T/top.txt"
check top_callbacks sh -c "awk '/^callbacks recv/ { ok = \$3 > 0 && \$4 > 0 }
	END { exit !ok }' '$T/top.txt'"
check top_contended sh -c "grep -Eq '^1 +inode:4242 +EX ' '$T/top.txt' &&
	grep -Eq '^2 +inode:4242 +EX ' '$T/top.txt'"

"$B/ucfs-trace" --json "$T/pp/n1.trace" "$T/pp/n2.trace" >"$T/sum.json"
check trace_pingpong jq -e ".pingpong[0].res == \"inode:4242\" and
	.pingpong[0].transfers == 2 * $N - 1 and
	.pingpong[0].pairs[0] == [1, 2, 2 * $N - 1] and
	(.nodes | map(.grant) | add) == 2 * $N and
	(.nodes | map(.bast_recv) | add) >= 2 * $N - 1 and
	.top_waits[0].wait_us > 0" "$T/sum.json"
if command -v gnuplot >/dev/null; then
	"$B/ucfs-trace" "$T/pp/n1.trace" "$T/pp/n2.trace" --plot "$T/plot" \
		>"$T/sum.txt" 2>&1
	check trace_plot sh -c "test -s '$T/plot.svg' && test -s '$T/plot.png'"
fi
exit 0
