#!/bin/sh
# ucfs-mkcluster — write the configuration of a cluster of local nodes
# (on this machine's loopback) for lockproto=dlm mounts: a random secret
# (mode 0600) and the configuration file (lockmgr/PROTOCOL.md,
# "Membership"), then print the configuration's path. The demo,
# ucfs-bench, ucfs-rmpair and the clu_ tests (tests/clulib.sh
# clu_config) mount their nodes with it; a cluster over several machines
# needs its own file (their addresses, one secret copied to all).
#
#   ucfs-mkcluster [-n NODES | -i ID,...] [-p PORT] [-a] [-c NAME]
#                  [-b HEARTBEAT_MS] [-t TIMEOUT_MS] [-w 0|1]
#                  [-s SECRET] DIR | -o FILE
#
# DIR: writes DIR/cluster.json and a fresh DIR/cluster.secret (both
# replaced). -o FILE: the configuration is FILE, the secret a fresh
# cluster.secret beside it. -s SECRET: the configuration names SECRET,
# kept if it exists (made, 0600, if not): configurations written for one
# cluster share it.
# Nodes 1..NODES (default 2), or the ids listed with -i (1..63). Each
# listens on 127.0.0.1, on PORT, PORT+1, ... in id order (default 20000
# + this process's id % 12000: below Linux's ephemeral ports, which
# outgoing connections take); with -a each on its own address
# 127.0.0.<id>, all on PORT. Heartbeat every HEARTBEAT_MS (default 500),
# a node silent for TIMEOUT_MS (default 3000) is dead. -w 1: two-node
# mode (one survivor keeps quorum), the default with exactly two nodes.
# NAME (default ucfs-PID) is the cluster's name: nodes of different
# clusters refuse each other.
set -eu
ME=ucfs-mkcluster
N=2 IDS="" PORT=$((20000 + $$ % 12000)) NAME=ucfs-$$ PERADDR=0
HB=500 TMO=3000 TWO="" SECRET="" OUT=""

usage() {
	echo "usage: $ME [-n NODES | -i ID,...] [-p PORT] [-a] [-c NAME]" \
		"[-b HEARTBEAT_MS] [-t TIMEOUT_MS] [-w 0|1] [-s SECRET]" \
		"DIR | -o FILE" >&2
	exit 2
}
while getopts n:i:p:ac:b:t:w:s:o: o; do
	case $o in
	n) N=$OPTARG ;; i) IDS=$(echo "$OPTARG" | tr ',' ' ') ;;
	p) PORT=$OPTARG ;; a) PERADDR=1 ;; c) NAME=$OPTARG ;;
	b) HB=$OPTARG ;; t) TMO=$OPTARG ;; w) TWO=$OPTARG ;;
	s) SECRET=$OPTARG ;; o) OUT=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
if [ -n "$OUT" ]; then
	[ $# -eq 0 ] || usage
	mkdir -p "$(dirname "$OUT")"
	DIR=$(cd "$(dirname "$OUT")" && pwd)
	OUT=$DIR/$(basename "$OUT")
else
	[ $# -eq 1 ] || usage
	mkdir -p "$1"
	DIR=$(cd "$1" && pwd)
	OUT=$DIR/cluster.json
fi
[ -n "$IDS" ] || IDS=$(seq 1 "$N" 2>/dev/null || echo x)
N=0 SEEN=" "
for i in $IDS; do
	case $i in '' | *[!0-9]*) usage ;; esac
	i=${i#"${i%%[!0]*}"} # (no leading zeros: not octal)
	if [ -z "$i" ] || [ "$i" -lt 1 ] || [ "$i" -gt 63 ]; then
		echo "$ME: node ids are 1..63" >&2
		exit 2
	fi
	case $SEEN in *" $i "*)
		echo "$ME: node id $i listed twice" >&2
		exit 2 ;;
	esac
	SEEN="$SEEN$i " N=$((N + 1))
done
IDS=$SEEN
case $PORT$HB$TMO in *[!0-9]*) usage ;; esac
case $TWO in '') [ "$N" -eq 2 ] && TWO=1 || TWO=0 ;; 0 | 1) ;; *) usage ;; esac
LAST=$((PORT + N - 1))
[ "$PERADDR" -eq 1 ] && LAST=$PORT
if [ "$N" -lt 1 ] || [ "$N" -gt 63 ] || [ "$PORT" -lt 1 ] ||
	[ "$LAST" -gt 65535 ]; then
	echo "$ME: 1..63 nodes on ports 1..65535" >&2
	exit 2
fi

if [ -z "$SECRET" ]; then
	SECRET=$DIR/cluster.secret
	rm -f "$SECRET" # (a new file: created 0600)
fi
[ -f "$SECRET" ] ||
	(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' \
		>"$SECRET")
SECRET=$(cd "$(dirname "$SECRET")" && pwd)/$(basename "$SECRET")
two=""
[ "$TWO" -eq 1 ] && two=' "two_node": true,'
{
	printf '{"cluster": "%s", "secret_file": "%s",\n' "$NAME" "$SECRET"
	printf ' "heartbeat_ms": %d, "timeout_ms": %d,%s\n' "$HB" "$TMO" "$two"
	printf ' "nodes": ['
	sep="" port=$PORT addr=127.0.0.1
	for i in $IDS; do
		[ "$PERADDR" -eq 1 ] && addr=127.0.0.$i
		printf '%s{"id": %d, "addr": "%s", "port": %d}' \
			"$sep" "$i" "$addr" "$port"
		[ "$PERADDR" -eq 1 ] || port=$((port + 1))
		sep=",
	   "
	done
	printf ']}\n'
} >"$OUT"
printf '%s\n' "$OUT"
