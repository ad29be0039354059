#!/bin/sh
# demo.sh — what "make demo" runs after building: make an image, format
# it, mount it, run a real workload on it, show the results and the stats,
# unmount and clean up. Usage: sh tools/demo.sh [BUILD] (default build).
#
# Workload: untar linux-source-6.1/{kernel,ipc,init,block} (about 800
# files) from Debian's linux-source-6.1 into the mount, sync, compare it
# byte for byte with the same tree extracted on the host, du -s, rm -rf.
# Nodes: two (DEMO_NODES, default 2): both mount the image with
# lockproto=dlm, in two-node mode (lockmgr/PROTOCOL.md), on 127.0.0.1;
# node 1 writes, node 2 reads the tree back. DEMO_NODES=1 runs one node
# with lockproto=nolock.
#
# Invariants: everything lives in one scratch directory removed on exit;
# every mount is unmounted and every daemon stopped by its PID, also on
# failure or ^C.
set -u
BUILD=${1:-build}
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "demo: no $1" >&2; exit 1; }
KSRC=/usr/src/linux-source-6.1.tar.xz
SUBTREE="kernel ipc init block"
NODES=${DEMO_NODES:-2}
SIZE_MB=${DEMO_SIZE_MB:-1024}
W=""
PIDS=""

step() { printf '\n== %s\n' "$*"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

cleanup() {
	trap - EXIT INT TERM
	n=$NODES
	while [ "$n" -ge 1 ]; do
		[ -n "$W" ] && mountpoint -q "$W/node$n" && umount "$W/node$n"
		n=$((n - 1))
	done
	for p in $PIDS; do
		i=0
		while kill -0 "$p" 2>/dev/null && [ "$i" -lt 100 ]; do
			sleep 0.1; i=$((i + 1))
		done
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	[ -n "$W" ] && rm -rf "$W"
}

# start_node N OPTS — start the ucfs daemon of node N (in the background:
# in two-node mode a node waits for its peer before it mounts, so all are
# started before wait_node waits for them); adding a node to the demo is
# one more call of each.
start_node() {
	mkdir -p "$W/node$1"
	o=$2
	[ "$NODES" -gt 1 ] && o="$o,cluster=$W/cluster.json,node=$1"
	"$BUILD/ucfs" -f -o "$o" "$W/disk.img" "$W/node$1" \
		>"$W/ucfs.$1.log" 2>&1 &
	PIDS="$PIDS $!"
	eval "PID$1=$!"
	eval "OPTS$1=\$o"
}

wait_node() {	# N
	eval "p=\$PID$1 o=\$OPTS$1"
	i=0
	while ! mountpoint -q "$W/node$1"; do
		kill -0 "$p" 2>/dev/null && [ "$i" -lt 600 ] ||
			{ cat "$W/ucfs.$1.log" >&2; die "node $1 did not mount"; }
		sleep 0.1; i=$((i + 1))
	done
	echo "node $1 mounted on $W/node$1 (-o $o)"
}

mount_node() {	# N OPTS
	start_node "$1" "$2"
	wait_node "$1"
}

show_stats() {	# N
	if [ -x "$BUILD/ucfs-stat" ]; then
		"$BUILD/ucfs-stat" "$W/node$1" 2>&1 | head -n 40
	else
		echo "(ucfs-stat not built yet)"
	fi
}

[ "$(id -u)" = 0 ] || die "run as root (FUSE mounts): sudo make demo"
for t in ucfs mkfs.ucfs ucfs-mkcluster; do
	[ -x "$BUILD/$t" ] || die "$BUILD/$t is not built yet: the file" \
		"system is still being written (see README)"
done
[ -e "$KSRC" ] || die "$KSRC missing: make deps installs linux-source-6.1"

W=$(mktemp -d /tmp/ucfs-demo.XXXXXX) || die "mktemp failed"
trap cleanup EXIT
trap 'exit 130' INT TERM

step "image: $SIZE_MB MiB at $W/disk.img, mkfs.ucfs"
truncate -s "${SIZE_MB}M" "$W/disk.img"
proto=nolock
if [ "$NODES" -gt 1 ]; then	# $W/cluster.json and its secret
	proto=dlm
	"$BUILD/ucfs-mkcluster" -n "$NODES" -p $((21000 + $$ % 20000)) \
		-c "ucfs-demo-$$" "$W" >/dev/null || die "ucfs-mkcluster failed"
fi
"$BUILD/mkfs.ucfs" -f -j 2 -p "$proto" "$W/disk.img" || die "mkfs.ucfs failed"

step "mount ($NODES node(s), lockproto=$proto)"
n=1
while [ "$n" -le "$NODES" ]; do
	start_node "$n" "lockproto=$proto"
	n=$((n + 1))
done
n=1
while [ "$n" -le "$NODES" ]; do
	wait_node "$n"
	n=$((n + 1))
done

step "workload: untar linux-source-6.1/{$(echo $SUBTREE | tr ' ' ,)} into node 1, sync"
mkdir -p "$W/ref"
l=""
for d in $SUBTREE; do l="$l linux-source-6.1/$d"; done
# shellcheck disable=SC2086
xz -dc "$KSRC" | tar -xf - -C "$W/ref" $l || die "extracting $KSRC failed"
tar -cf "$W/tree.tar" -C "$W/ref" linux-source-6.1
files=$(find "$W/ref" -type f | wc -l)
t0=$(date +%s.%N)
tar -xf "$W/tree.tar" -C "$W/node1" || die "untar into ucfs failed"
sync -f "$W/node1"
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" -v f="$files" \
	'BEGIN { printf "%d files in %.2f s (%.0f files/s)\n", f, b - a, f / (b - a) }'

step "stats of node 1 after the untar (ucfs-stat)"
show_stats 1

step "unmount and mount node 1 again: what follows is read from the image"
umount "$W/node1" || die "umount failed"
eval "p=\$PID1"
wait "$p" 2>/dev/null
mount_node 1 "lockproto=$proto"

step "results"
last=$NODES
if diff -r "$W/ref/linux-source-6.1" "$W/node$last/linux-source-6.1" \
	>"$W/diff.txt" 2>&1; then
	echo "tree read back on node $last is identical to the source ($files files)"
else
	head -n 20 "$W/diff.txt"; die "the tree read back differs"
fi
du -s "$W/node$last/linux-source-6.1"
df -h "$W/node1" | tail -n 1

step "rm -rf, unmount"
rm -rf "$W/node1/linux-source-6.1" || die "rm -rf failed"
n=$NODES
while [ "$n" -ge 1 ]; do
	umount "$W/node$n" || die "umount node $n failed"
	# umount returns before the daemon has written everything back:
	# wait for it to exit before anything reads the image.
	eval "p=\$PID$n"
	wait "$p" 2>/dev/null
	n=$((n - 1))
done
if [ -x "$BUILD/fsck.ucfs" ]; then
	step "fsck.ucfs"
	"$BUILD/fsck.ucfs" "$W/disk.img" || die "fsck.ucfs found problems"
fi
echo
echo "demo done: image, mounts and scratch files are removed on exit"
