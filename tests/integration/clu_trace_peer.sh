#!/bin/sh
# clu_trace_peer: the trace names who asked for a lock. Two lockproto=dlm
# nodes, both traced (trace=), take turns writing one small file (each
# write needs the file's inode lock in EX, each read PR), so the lock
# ping-pongs between them:
#  (1) node 1's blocking callbacks and demotes of that file's lock name
#      node 2 as their "peer", node 2's name node 1, and no blocking
#      callback of either trace lacks a peer or names a third node (the
#      lock manager carries the asking node in the BAST frame);
#  (2) ucfs-trace's "who takes locks from whom" pairs count the
#      demotes both ways (asker 2 -> node 1 and asker 1 -> node 2);
#  (3) the stats say the same without a trace: net.peers[].basts_for of
#      the other node is > 0 on both nodes, and ucfs-top's "callbacks
#      from (top)" row names the other node on each;
#  (4) demote-ahead: node 2 stats files g0..g7 of node 1 (idle PR locks
#      of neighbouring inodes), then node 1 writes g0, g1, ...: node 2's
#      second blocking callback of that streak gives up the rest of
#      g1..g7 too (released ahead, fs_glock.h ahead_span), and those
#      releases name node 1 as their peer, as ucfs-trace's "aheads"
#      column does.
# Node 3 is a quorum witness (ucfs-witness).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_trace_peer jq

ROUNDS=8
clu_setup clu_trace_peer 2 128 -j 2 -r 64
clu_mount clu_trace_peer 1 "trace=$T/tr1.json"
clu_mount clu_trace_peer 2 "trace=$T/tr2.json"

echo start >"$M1/f"
ino=$(stat -c %i "$M1/f")
i=0
while [ $i -lt $ROUNDS ]; do
	echo "one $i" >>"$M1/f"
	cat "$M2/f" >/dev/null
	echo "two $i" >>"$M2/f"
	cat "$M1/f" >/dev/null
	i=$((i + 1))
done
check clu_trace_peer_content test "$(wc -l <"$M2/f")" -eq $((2 * ROUNDS + 1))

# (4) neighbours of a lock another node asks for, released ahead
mkdir "$M1/g"
for i in 0 1 2 3 4 5 6 7; do echo "g $i" >"$M1/g/g$i"; done
gino=""
for i in 1 2 3 4 5 6 7; do gino="$gino inode:$(stat -c %i "$M1/g/g$i")"; done
stat "$M2"/g/g* >/dev/null # PR (a read would update atime: EX)
sleep 0.2 # idle longer than FS_GLOCK_AHEAD_IDLE_MS
# the first callback of a streak gives up its lock alone, the next
# within the streak window sweeps: node 1 writes g0, g1, ... until node
# 2 gave some up ahead (a loaded machine may space two writes past the
# window)
aheads() {
	"$B/ucfs-stat" --json "$M2" | jq '.glocks.types.inode.demotes_ahead // 0'
}
a0=$(aheads)
for i in 0 1 2 3 4 5; do
	echo more >>"$M1/g/g$i"
	[ "$(aheads)" -eq "$a0" ] || break
done

# (3) per-peer blocking callbacks in the stats
for n in 1 2; do
	o=$((3 - n))
	eval "m=\$M$n"
	"$B/ucfs-stat" --json "$m" >"$T/st$n.json"
	echo "node $n net.peers: $(jq -c '[.net.peers[] |
		{node, basts_for}]' "$T/st$n.json")"
	check clu_trace_peer_stats_basts_for_$n jq -e --argjson o "$o" \
		'any(.net.peers[]; .node == $o and .basts_for > 0)' \
		"$T/st$n.json"
done

# ... and ucfs-top's node table names the other node as the top asker
"$B/ucfs-top" --batch --iterations 1 "$M1" "$M2" >"$T/top.txt" 2>&1
grep 'callbacks from' "$T/top.txt"
check clu_trace_peer_top_asker grep -Eq \
	'^callbacks from \(top\) +n2 [0-9.]+/s +n1 [0-9.]+/s' "$T/top.txt"

check clu_trace_peer_umount2 fs_umount "$M2"
check clu_trace_peer_umount1 fs_umount "$M1"

# (1) the file's lock events name the other node
for n in 1 2; do
	o=$((3 - n))
	jq -s --arg r "inode:$ino" '[.[] | select(.res == $r and
		(.ev == "bast_recv" or .ev == "demote"))]' "$T/tr$n.json" \
		>"$T/ev$n.json"
	echo "node $n: $(jq length "$T/ev$n.json") bast_recv/demote events" \
		"of inode:$ino, peers $(jq -c '[.[].peer] | unique' \
		"$T/ev$n.json")"
	check clu_trace_peer_demotes_name_$o jq -e --argjson o "$o" \
		'[.[] | select(.ev == "demote" and .peer == $o)] | length >= 2' \
		"$T/ev$n.json"
	check clu_trace_peer_basts_name_$o jq -e --argjson o "$o" \
		'[.[] | select(.ev == "bast_recv")] | length > 0 and
		all(.[]; .peer == $o)' "$T/ev$n.json"
	check clu_trace_peer_no_bast_without_peer_$n jq -e -s --argjson o "$o" \
		'all(.[] | select(.ev == "bast_recv"); .peer == $o)' \
		"$T/tr$n.json"
done

# (4) node 2 released g1..g7 ahead for node 1
jq -c -n '[inputs | select(.ev == "release" and .peer == 1) | .res]' \
	"$T/tr2.json" >"$T/ahead2.json"
echo "node 2 releases naming node 1: $(jq -c . "$T/ahead2.json")"
check clu_trace_peer_ahead_names_1 jq -e --arg g "$gino" \
	'. as $r | ($g | split(" ") | map(select(. != ""))) as $w |
	any($w[]; . as $x | $r | any(.[]; . == $x))' "$T/ahead2.json"
check clu_trace_peer_release_peer_only_ahead jq -e -n \
	'all(inputs | select(.ev == "release" and has("peer")); .peer == 1)' \
	"$T/tr2.json"

# (2) the summary
"$B/ucfs-trace" "$T/tr1.json" "$T/tr2.json" | sed -n '/Who takes/,/no peer/p'
"$B/ucfs-trace" --json "$T/tr1.json" "$T/tr2.json" >"$T/sum.json" 2>&1
check clu_trace_peer_summary_pairs jq -e '.peers.pairs as $p |
	any($p[]; .asker == 2 and .node == 1 and .demotes > 0) and
	any($p[]; .asker == 1 and .node == 2 and .demotes > 0)' "$T/sum.json"
check clu_trace_peer_summary_aheads jq -e '.peers.pairs as $p |
	any($p[]; .asker == 1 and .node == 2 and .aheads > 0)' "$T/sum.json"
rm -f "$IMG"
exit 0
