#!/bin/sh
# ucfs-mkcluster — write the configuration of a cluster of local nodes
# (all on 127.0.0.1) for lockproto=dlm mounts: DIR/cluster.secret (a fresh
# random secret, mode 0600) and DIR/cluster.json (lockmgr/PROTOCOL.md,
# "Membership"), then print the path of cluster.json. The demo, ucfs-bench
# and ucfs-rmpair mount their nodes with it; a cluster over several
# machines needs its own file (their addresses, one secret copied to all).
#
#   ucfs-mkcluster [-n NODES] [-p PORT] [-c NAME] DIR
#
# Nodes 1..NODES (default 2, at most 63) listen on PORT, PORT+1, ...
# (default 20000 + this process's id % 20000); heartbeat_ms 500,
# timeout_ms 3000; two nodes are in two-node mode (one survivor keeps
# quorum). NAME (default ucfs-PID) is the cluster's name: nodes of
# different clusters refuse each other. Both files are replaced.
set -eu
ME=ucfs-mkcluster
N=2 PORT=$((20000 + $$ % 20000)) NAME=ucfs-$$

usage() {
	echo "usage: $ME [-n NODES] [-p PORT] [-c NAME] DIR" >&2
	exit 2
}
while getopts n:p:c: o; do
	case $o in
	n) N=$OPTARG ;; p) PORT=$OPTARG ;; c) NAME=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || usage
DIR=$1
case $N$PORT in *[!0-9]*) usage ;; esac
if [ "$N" -lt 1 ] || [ "$N" -gt 63 ] || [ "$PORT" -lt 1 ] ||
	[ $((PORT + N - 1)) -gt 65535 ]; then
	echo "$ME: 1..63 nodes on ports 1..65535" >&2
	exit 2
fi
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

rm -f "$DIR/cluster.secret" # (a new file: created 0600)
(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' \
	>"$DIR/cluster.secret")
two=""
[ "$N" -eq 2 ] && two=' "two_node": true,'
{
	printf '{"cluster": "%s", "secret_file": "%s",\n' "$NAME" \
		"$DIR/cluster.secret"
	printf ' "heartbeat_ms": 500, "timeout_ms": 3000,%s\n' "$two"
	printf ' "nodes": ['
	i=1 sep=""
	while [ "$i" -le "$N" ]; do
		printf '%s{"id": %d, "addr": "127.0.0.1", "port": %d}' \
			"$sep" "$i" $((PORT + i - 1))
		sep=",
	   "
		i=$((i + 1))
	done
	printf ']}\n'
} >"$DIR/cluster.json"
printf '%s\n' "$DIR/cluster.json"
