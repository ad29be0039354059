#!/bin/sh
# clu_flog: the free log (fusefs/FORMAT.md "Free log") never outgrows its
# slotinfo block, and a dead node's log is applied by the survivor:
#  * node 1 writes a 16 MiB file and punches every other block (2,048
#    one-block extents with gaps: no two merge); node 2 truncates it to
#    0 while node 1 holds the file's groups: every free goes to node 2's
#    free log, far more than its 251 entries in one request; the log is
#    applied between the truncate's transactions instead of growing in
#    memory (alloc.flog_overflows 0, alloc.flog_room_applies > 0);
#  * node 2 truncates two more of node 1's files (logged, not applied
#    yet: younger than a second), fsyncs and is killed (kill -9); node 1
#    replays its journal and its recovery worker applies node 2's log
#    at once, with no request on node 1 (alloc.flog_dead_applied = what
#    node 2 had pending, alloc.flog_dead_slots 1);
#  * node 1 unmounts: fsck -n is clean (an entry left in node 2's log
#    for blocks already free would be an error, a lost one a leak);
#    node 2 mounts its slot again: the truncates are there, nothing is
#    left to apply, fsck -n clean again.
# Node 3 is a lockspace-only witness (tests/clulib.sh: quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_flog jq

clu_two_nodes clu_flog 512 -j 3

# node 1: a file of 2,048 one-block extents with a hole after each
check clu_flog_fragmented python3 - "$M1/frag" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long,
                           ctypes.c_long]
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, os.urandom(16 << 20))
os.fsync(fd)
for i in range(1, 4096, 2):  # PUNCH_HOLE | KEEP_SIZE
    if libc.fallocate(fd, 3, i * 4096, 4096) != 0:
        sys.exit("punch: " + os.strerror(ctypes.get_errno()))
os.fsync(fd)
PY
check clu_flog_fragmented_blocks test "$(stat -c %b "$M1/frag")" -le 16400

# node 2 frees all of it into node 1's groups, in one request
check clu_flog_truncate truncate -s 0 "$M2/frag"
clu_stat "$M2" >"$T/st2a.json"
echo "node 2 after the truncate: $(jq -c '.alloc | {flog_logged,
	flog_applied, flog_overflows, flog_room_applies}' "$T/st2a.json")"
# more than the log can take with room to spare (251 - 64) ...
check clu_flog_nearly_full jq -e '.alloc.flog_logged > 187' "$T/st2a.json"
# ... applied early instead of kept in memory
check clu_flog_no_overflow jq -e '.alloc.flog_overflows == 0' "$T/st2a.json"
check clu_flog_room_applied jq -e '.alloc.flog_room_applies > 0' \
	"$T/st2a.json"

# node 1 owns its groups again; node 2 frees into them and dies
mkdir "$M1/k"
for i in 0 1 2; do head -c 65536 /dev/urandom >"$M1/k/k$i"; done
python3 -c "import os; fd=os.open('$M1/k/k2', os.O_RDONLY); os.fsync(fd)"
check clu_flog_truncates python3 - "$M2/k" <<'PY'
import os, sys
for n in ("k0", "k1"):
    fd = os.open(os.path.join(sys.argv[1], n), os.O_WRONLY | os.O_TRUNC)
    os.fsync(fd)
    os.close(fd)
PY
clu_stat "$M2" >"$T/st2b.json"
pending=$(jq '.alloc.flog_logged - .alloc.flog_applied' "$T/st2b.json")
echo "node 2's free log before the kill: $pending blocks"
check clu_flog_pending test "${pending:-0}" -gt 0
fs_kill9 "$M2"

# node 1 replays node 2's journal, then its recovery worker applies its
# log (nothing is written through node 1 meanwhile)
check clu_flog_survivor_applies wait_for 60 clu_stat_ge "$M1" \
	.alloc.flog_dead_applied "$pending"
clu_stat "$M1" >"$T/st1.json"
echo "node 1: $(jq -c '{recoveries: .cluster.recoveries,
	dead_applied: .alloc.flog_dead_applied,
	dead_errors: .alloc.flog_dead_errors}' "$T/st1.json")"
check clu_flog_survivor_exact jq -e \
	".alloc.flog_dead_applied == $pending and .alloc.flog_dead_errors == 0
	 and .alloc.flog_dead_slots == 1" \
	"$T/st1.json"
check clu_flog_survivor_sees test ! -s "$M1/k/k0" -a ! -s "$M1/k/k1"
check clu_flog_umount1 fs_umount "$M1"
check clu_flog_fsck_after_kill fs_fsck "$IMG"

fs_mount "$IMG" "$M2" "$(clu_opts "$CFG" 2)" || fail clu_flog_remount2
: >"$M2/tick2"
check clu_flog_remount_nothing_left jq -e \
	'.alloc.flog_applied == 0 and .alloc.flog_logged == 0' \
	"$(clu_stat "$M2" >"$T/st2c.json"; echo "$T/st2c.json")"
check clu_flog_truncates_kept test ! -s "$M2/k/k0" -a ! -s "$M2/k/k1"
check clu_flog_untouched_file test "$(stat -c %s "$M2/k/k2")" -eq 65536
check clu_flog_umount2 fs_umount "$M2"
check clu_flog_fsck_final fs_fsck "$IMG"
rm -f "$IMG"
exit 0
