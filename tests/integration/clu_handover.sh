#!/bin/sh
# clu_handover: an orphan's owner unmounts cleanly while another node
# still has the file open; the orphan is handed over, and its space comes
# back at that node's last close, with no remount (fusefs/MOUNT.md
# "Cluster mounts", FORMAT.md "Orphans under dlm"):
#  * node 1 writes a 4 MiB file; node 2 opens it and keeps it open;
#    node 1 unlinks it (node 1 owns the orphan: node 2 uses it, so it
#    cannot be freed) and unmounts cleanly;
#  * node 2's recovery worker sees node 1 leave, finds node 1's slot
#    free with an orphan left, and adopts it
#    (namespace.leftover_slots, orphans_adopted); the open file still
#    reads back whole;
#  * node 2 closes it: node 2 frees it then (its 1,025 blocks), with no
#    mount; node 2 unmounts: fsck -n clean, no orphan left.
# Before, the orphan stayed on node 1's list until node 1's slot was
# mounted again: the space did not come back.
# Node 3 is a lockspace-only witness (tests/clulib.sh: quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_handover jq

clu_two_nodes clu_handover 256 -j 3

head -c 4194304 /dev/urandom >"$T/data"
cp "$T/data" "$M1/f"
python3 -c "import os; fd=os.open('$M1/f', os.O_RDONLY); os.fsync(fd)"

# node 2 keeps f open until $T/close appears, then reads it whole
python3 - "$M2/f" "$T" <<'PY' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
os.read(fd, 4096)
t = sys.argv[2]
open(t + "/opened", "w").close()
while not os.path.exists(t + "/close"):
    time.sleep(0.05)
data = os.pread(fd, 8 << 20, 0)
open(t + "/read", "wb").write(data)
os.close(fd)
open(t + "/closed", "w").close()
PY
HOLDER=$!
on_exit "kill $HOLDER 2>/dev/null"
check clu_handover_opened wait_for 30 test -f "$T/opened"
check clu_handover_unlink rm "$M1/f"
check clu_handover_umount1 fs_umount "$M1"

adopted() {
	clu_stat "$M2" >"$T/st2.json" &&
		jq -e '.namespace.leftover_slots >= 1 and
			.namespace.orphans_adopted >= 1' "$T/st2.json" >/dev/null
}
check clu_handover_adopted wait_for 60 adopted
echo "node 2: $(jq -c '{leftover_slots: .namespace.leftover_slots,
	adopted: .namespace.orphans_adopted,
	frees_now: .namespace.iopen_frees_now}' "$T/st2.json")"
: >"$T/close"
check clu_handover_closed wait_for 30 test -f "$T/closed"
check clu_handover_read_whole cmp "$T/data" "$T/read"

# freed by node 2 at its close (statfs is no witness: node 2's counts
# of the groups node 1 wrote were stale until it took them to free)
freed() {
	clu_stat "$M2" >"$T/st2b.json" &&
		jq -e '.namespace.inodes_freed >= 1 and
			.alloc.freed_blocks >= 1024 and
			.alloc.flog_logged == 0' "$T/st2b.json" >/dev/null
}
check clu_handover_freed_at_close wait_for 60 freed
echo "node 2 after the close: $(jq -c '{freed: .namespace.inodes_freed,
	blocks: .alloc.freed_blocks, frees_now: .namespace.iopen_frees_now}' \
	"$T/st2b.json")"
check clu_handover_umount2 fs_umount "$M2"
"$B/fsck.ucfs" -n "$IMG" >"$T/fsck.log" 2>&1
rc=$?
cat "$T/fsck.log"
check clu_handover_fsck test "$rc" -eq 0
check clu_handover_no_orphan grep -q ' 0 orphans;' "$T/fsck.log"
rm -f "$IMG"
exit 0
