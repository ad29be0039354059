#!/bin/sh
# lk_cluster.sh — three DLM nodes (tests/progs/lk_node) on 127.0.0.1-3:
# they form one membership, lock and leave cleanly; a node with the wrong
# secret is refused (authentication failure logged, never a member) and
# the others carry on; a bad configuration is refused with a reason.
. "$UCFS_TOP/tests/lib.sh"

. "$UCFS_TOP/tests/clulib.sh"

# nodes 1-3 on 127.0.0.1-3 (clulib.sh clu_config); bad.json: the same
# with another secret
CLU_NAME=lkt CLU_TIMEOUT_MS=1000 CLU_SECRET=$T/secret \
	clu_config "$T/c.json" 1 2 3
CLU_NAME=lkt CLU_TIMEOUT_MS=1000 CLU_SECRET=$T/wrong \
	clu_config "$T/bad.json" 1 2 3

start() {	# $1 = id, $2 = config, rest = lk_node args
	_id=$1 _cfg=$2; shift 2
	"$B/tests/lk_node" "$_cfg" "$_id" "$@" \
		>"$T/out$_id" 2>"$T/err$_id" &
	eval "PID$_id=$!"
	on_exit "kill -9 $! 2>/dev/null"
}

# 1. three nodes join, lock, leave cleanly
for i in 1 2 3; do start $i "$T/c.json" join; done
ok=1
for i in 1 2 3; do
	eval "wait \$PID$i" || ok=0
	grep -q MEMBERS "$T/out$i" || ok=0
done
if [ $ok = 1 ]; then pass lk_three_nodes_join_and_leave
else fail lk_three_nodes_join_and_leave; cat "$T"/err* | tail -20; fi

# 2. node 3 with the wrong secret: refused, 1 and 2 still form a quorum
LK_WAIT_MS=1500 start 3 "$T/bad.json" join
start 1 "$T/c.json" hold 1
start 2 "$T/c.json" hold 1
wait $PID3
if grep -q "authentication failed" "$T/err1" "$T/err2" &&
   grep -q "no full membership" "$T/out3"; then
	pass lk_auth_failure_refused
else
	fail lk_auth_failure_refused; tail -5 "$T/err1" "$T/out3"
fi
kill -9 $PID1 $PID2 2>/dev/null
wait $PID1 $PID2 2>/dev/null

# 3. a configuration error names the field
printf '{"cluster": "x", "nodes": []}' >"$T/broken.json"
if "$B/tests/lk_node" "$T/broken.json" 1 join >"$T/o" 2>&1; then
	fail lk_bad_config_refused
elif grep -q "nodes must be" "$T/o"; then
	pass lk_bad_config_refused
else
	fail lk_bad_config_refused "$(cat "$T/o")"
fi
exit $_ucfs_failed
