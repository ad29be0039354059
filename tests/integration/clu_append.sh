#!/bin/sh
# clu_append: O_APPEND across two lockproto=dlm nodes. Each kernel
# computes an append's offset from the size it last saw; a cluster mount
# writes it at the end of the file as the node holding the lock sees it
# (fs_write, FS_CRED_APPEND), so appends from two nodes never overwrite
# each other:
#  (1) a file held open with O_APPEND on node 1 and on node 2, 1,000
#      appends each, alternating: every line present exactly once, in
#      the order written; prints the appends per second;
#  (2) two shell loops appending at once (">>" from both nodes): every
#      line present exactly once;
#  (3) a write at an explicit offset (pwrite, no O_APPEND) still lands
#      there;
#  (4) both nodes open(O_CREAT|O_APPEND) the same 300 new names at once:
#      a name the other node created between this kernel's LOOKUP and its
#      CREATE is opened, never "File exists" (op_create's -ESTALE retry),
#      and every file ends with both lines; fsck.ucfs -n is clean after
#      both unmount.
# Node 3 is a quorum witness (ucfs-witness).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_append

clu_two_nodes clu_append 256 -j 2 -r 64

# (1) alternating appends through descriptors held open on both nodes
python3 - "$M1/alt" "$M2/alt" 1000 >"$T/alt.out" 2>&1 <<'PY'
import os, sys, time
a, b, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
fa = os.open(a, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
fb = os.open(b, os.O_WRONLY | os.O_APPEND)
t0 = time.monotonic()
for i in range(n):
    os.write(fa, b"node1 %d\n" % i)
    os.write(fb, b"node2 %d\n" % i)
dt = time.monotonic() - t0
os.close(fa); os.close(fb)
print("appends/s %.0f (%d appends in %.2f s)" % (2 * n / dt, 2 * n, dt))
PY
cat "$T/alt.out"
python3 - "$M1/alt" 1000 >"$T/alt.chk" 2>&1 <<'PY'
import sys
lines = open(sys.argv[1], "rb").read().split(b"\n")
n = int(sys.argv[2])
want = []
for i in range(n):
    want += [b"node1 %d" % i, b"node2 %d" % i]
want.append(b"")
if lines != want:
    bad = next(i for i in range(min(len(lines), len(want)))
               if lines[i] != want[i]) if lines[:len(want)] != want else -1
    print("got %d lines, first difference at %d" % (len(lines), bad))
    sys.exit(1)
PY
if [ $? -eq 0 ]; then pass clu_append_alternating_all_lines_once; else
	fail clu_append_alternating_all_lines_once "$(cat "$T/alt.chk")"; fi
check clu_append_same_on_node2 cmp "$M1/alt" "$M2/alt"

# (2) two shell loops appending at once
(i=0; while [ $i -lt 500 ]; do echo "a $i"; i=$((i + 1)); done) >>"$M1/sh" &
p1=$!
(i=0; while [ $i -lt 500 ]; do echo "b $i"; i=$((i + 1)); done) >>"$M2/sh" &
p2=$!
wait $p1 $p2
check clu_append_loops_count test "$(wc -l <"$M1/sh")" -eq 1000
check clu_append_loops_unique test "$(sort -u "$M2/sh" | wc -l)" -eq 1000
check clu_append_loops_order_a sh -c "grep '^a ' '$M1/sh' |
	cut -d' ' -f2 | sort -n -c"
check clu_append_loops_order_b sh -c "grep '^b ' '$M1/sh' |
	cut -d' ' -f2 | sort -n -c"

# (3) an explicit offset is kept without O_APPEND
printf 'XXXX' | dd of="$M2/alt" bs=1 seek=6 conv=notrunc status=none
check clu_append_pwrite_in_place test "$(head -c 10 "$M1/alt")" = "node1 XXXX"

# (4) racing creates of the same names from both nodes
(i=0; while [ $i -lt 300 ]; do echo a >>"$M1/c.$i"; i=$((i + 1)); done) \
	2>"$T/race1.err" &
p1=$!
(i=0; while [ $i -lt 300 ]; do echo b >>"$M2/c.$i"; i=$((i + 1)); done) \
	2>"$T/race2.err" &
p2=$!
wait $p1 $p2
check clu_append_race_no_error test ! -s "$T/race1.err" -a ! -s "$T/race2.err"
check clu_append_race_both_lines test "$(cat "$M1"/c.* | wc -l)" -eq 600

check clu_append_umount2 fs_umount "$M2"
check clu_append_umount1 fs_umount "$M1"
check clu_append_fsck fs_fsck "$IMG"
rm -f "$IMG"
exit 0
