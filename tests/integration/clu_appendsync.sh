#!/bin/sh
# clu_appendsync: two lockproto=dlm nodes append 4 KiB records with fsync
# to one shared file at once (ucfs-bench-ops append: O_APPEND, write(2)
# then fsync, each record carrying its writer and number in every byte),
# the workload of ucfs-bench's "append" scenario (tools/BENCH.md) at a
# small count. Each append needs the file's inode lock in EX, so the lock
# moves between the nodes while both run:
#  (1) read back on both nodes (ucfs-bench-ops appendcheck), every record
#      of both writers is there exactly once, whole, in each writer's
#      order, and nothing else (a lost, doubled, torn or overwritten
#      record fails); both nodes see the same bytes; the file's size is
#      exactly the records written;
#  (2) the checker itself fails on copies of that file broken on purpose:
#      one record written over another (what two nodes appending at a
#      stale end of file would do), one record cut out, and 100 bytes of
#      the other writer's record inside a record (a torn write);
#  (3) the stats count the lock's transfers (glocks.types.inode.bounces,
#      printed with the records/s: figures come from ucfs-bench); fsck.ucfs
#      -n is clean after both unmount;
#  (4) both nodes traced (trace=): every demote event of the file's lock
#      says what it wrote back (log_blocks, home_blocks, data_bytes,
#      flushes) and what the kernel was told to drop (kinval: a regular
#      file's attributes and pages), with its time (demote_us); some
#      demote wrote blocks (the other node's fsync'ed records reach home
#      before the lock moves), and ucfs-trace sums them; no event carries
#      an unknown peer (-1);
#  (5) ucfs-top lists the file among the most contended inodes of the
#      glock engine (glocks.top) by its path, "/log", found by walking
#      the mount; with --paths 0 (no walk) the path is "?".
# Node 3 is a quorum witness (ucfs-witness).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_appendsync jq

N=${UCFS_APPEND_N:-150}
OPS=$B/ucfs-bench-ops
clu_setup clu_appendsync 2 256 -j 2 -r 64
clu_mount clu_appendsync 1 "trace=$T/tr1.json"
clu_mount clu_appendsync 2 "trace=$T/tr2.json"

bounces() {
	"$B/ucfs-stat" --json "$1" |
		jq '.glocks.types.inode.bounces // 0'
}

# (1) both writers at once, then the read-back on both nodes
touch "$M1/log"
"$OPS" append -i 1 -c "$N" "$M1/log" >"$T/w1.out" 2>&1 &
p1=$!
"$OPS" append -i 2 -c "$N" "$M2/log" >"$T/w2.out" 2>&1 &
p2=$!
wait $p1; r1=$?
wait $p2; r2=$?
cat "$T/w1.out" "$T/w2.out"
check clu_appendsync_writers_ok test "$r1" -eq 0 -a "$r2" -eq 0
for m in 1 2; do
	eval "d=\$M$m"
	"$OPS" appendcheck "$d/log" 1:"$N" 2:"$N" >"$T/chk$m.out" 2>&1
	r=$?
	if [ "$r" -eq 0 ]; then pass clu_appendsync_all_records_node$m
	else fail clu_appendsync_all_records_node$m "$(head -n 1 "$T/chk$m.out")"
	fi
done
check clu_appendsync_same_bytes cmp "$M1/log" "$M2/log"
check clu_appendsync_size test "$(stat -c %s "$M2/log")" -eq $((2 * N * 4096))
# how often the file changed writers: the records interleaved
sw=$(od -An -v -w4096 -t u4 -j 8 -N $((2 * N * 4096)) "$M1/log" |
	awk '{ if (NR > 1 && $1 != last) n++; last = $1 } END { print n + 0 }')
b1=$(bounces "$M1") b2=$(bounces "$M2")
echo "writer changes in the file: $sw; inode lock bounces: node 1 $b1," \
	"node 2 $b2"

# (5) the contended file by its path in ucfs-top (before the unmount)
"$B/ucfs-top" --batch --iterations 1 "$M1" "$M2" >"$T/top.txt" 2>&1
sed -n '/most contended inodes/,$p' "$T/top.txt"
check clu_appendsync_top_inode_path grep -Eq \
	'^[12] +inode:[0-9]+ +/log +[A-Z]+ ' "$T/top.txt"
"$B/ucfs-top" --batch --iterations 1 --paths 0 "$M1" >"$T/top0.txt" 2>&1
check clu_appendsync_top_no_walk_no_path grep -Eq \
	'^1 +inode:[0-9]+ +\? +[A-Z]+ ' "$T/top0.txt"

# (2) the checker catches what it is there to catch
cp "$M1/log" "$T/good"
check clu_appendsync_copy_checks "$OPS" appendcheck "$T/good" 1:"$N" 2:"$N"
cp "$T/good" "$T/over"	# record 5 written over record 9
dd if="$T/good" of="$T/over" bs=4096 skip=5 seek=9 count=1 conv=notrunc \
	status=none
cp "$T/good" "$T/cut"	# record 4 gone
{ head -c $((4 * 4096)) "$T/good"; tail -c +$((5 * 4096 + 1)) "$T/good"; } \
	>"$T/cut"
cp "$T/good" "$T/torn"	# 100 bytes of record 20 inside record 7
dd if="$T/good" of="$T/torn" bs=1 skip=$((20 * 4096 + 1000)) \
	seek=$((7 * 4096 + 1000)) count=100 conv=notrunc status=none
for k in over cut torn; do
	"$OPS" appendcheck "$T/$k" 1:"$N" 2:"$N" >"$T/$k.out" 2>&1
	r=$?
	if [ "$r" -eq 1 ] && grep -q '^BAD' "$T/$k.out"; then
		pass clu_appendsync_checker_catches_$k
	else
		fail clu_appendsync_checker_catches_$k "exit $r"
	fi
done

# (3) the lock moved, counted by both nodes; fsck after unmount
check clu_appendsync_bounces_counted test $((b1 + b2)) -gt 0
check clu_appendsync_umount2 fs_umount "$M2"
check clu_appendsync_umount1 fs_umount "$M1"
check clu_appendsync_fsck fs_fsck "$IMG"

# (4) the demotes in the traces (written out at unmount)
cat "$T/tr1.json" "$T/tr2.json" >"$T/tr.json"
jq -s '[.[] | select(.ev == "demote" and .type == "inode")]' "$T/tr.json" \
	>"$T/demotes.json"
echo "demote events: $(jq length "$T/demotes.json"), writing back" \
	"$(jq '[.[] | select(.log_blocks + .home_blocks > 0)] | length' \
	"$T/demotes.json")"
check clu_appendsync_trace_demotes jq -e 'length > 0' "$T/demotes.json"
check clu_appendsync_trace_demote_fields jq -e 'all(.[];
	(.log_blocks | type) == "number" and (.home_blocks | type) ==
	"number" and (.data_bytes | type) == "number" and
	(.flushes | type) == "number" and (.demote_us | type) == "number"
	and (.kinval | type) == "string")' "$T/demotes.json"
check clu_appendsync_trace_demote_wrote jq -e \
	'any(.[]; .log_blocks + .home_blocks > 0 and .flushes > 0)' \
	"$T/demotes.json"
check clu_appendsync_trace_demote_kinval jq -e \
	'any(.[]; .kinval == "attrs+pages")' "$T/demotes.json"
"$B/ucfs-trace" --json "$T/tr1.json" "$T/tr2.json" >"$T/sum.json" 2>&1
check clu_appendsync_trace_summary_writeback jq -e '.writeback.demote |
	.count > 0 and .home_blocks > 0 and .flushes > 0 and
	.kinval_pages > 0 and .mean_us > 0' "$T/sum.json"
check clu_appendsync_trace_no_unknown_peer jq -e -s \
	'all(.[]; .peer == null or .peer > 0)' "$T/tr.json"
rm -f "$IMG"
exit 0
