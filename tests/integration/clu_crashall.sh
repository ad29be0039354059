#!/bin/sh
# clu_crashall: the whole cluster crashes (kill -9 of both nodes), then
# ONE node mounts: its mount replays the other slot's journal, and its
# recovery worker then applies that slot's free log and adopts its
# orphans at once, with no writing request and no mount of that slot
# (fusefs/MOUNT.md "Cluster mounts", FORMAT.md "Free log"):
#  * node 2 unlinks a file while a process keeps it open (an orphan on
#    node 2's list); node 1 writes files (its groups); node 2 truncates
#    two of them (logged in node 2's free log: node 1 holds the groups);
#    both daemons are killed;
#  * node 1 mounts alone (the witness keeps quorum): without touching
#    the filesystem, alloc.flog_dead_applied reaches what node 2 had
#    pending, alloc.flog_dead_slots and namespace.leftover_slots count
#    node 2's slot, its orphan is adopted and freed;
#  * node 1 unmounts: fsck -n is clean, with nothing left in any free
#    log and no orphan (before, node 2's log and orphan stayed until
#    node 2's slot was mounted again: fsck counted them as in use).
# Node 3 is a lockspace-only witness (tests/clulib.sh: quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_crashall jq

clu_two_nodes clu_crashall 256 -j 3

# node 2 unlinks a file of its own while it keeps it open: an orphan of
# node 2's slot
echo orphan >"$M2/o"
clu_orphan clu_crashall "$M2/o"

# node 2 frees into node 1's groups (logged, and not applied yet: its
# entries are younger than a second); if node 1 happened not to hold
# them at that moment (a busy machine), the frees went straight to the
# bitmap: another round
clu_flog_pending clu_crashall "$M1" "$M2"
clu_stat "$M2" >"$T/st2.json"
check clu_crashall_pending test "$PENDING" -gt 0
check clu_crashall_orphan jq -e '.namespace.orphans_added >= 1' "$T/st2.json"

# the whole cluster dies
fs_kill9 "$M2"
kill "$HOLDER" 2>/dev/null
fs_kill9 "$M1"

# one node mounts; it writes nothing itself
clu_mount clu_crashall 1
recovered() {
	clu_stat "$M1" >"$T/st1.json" &&
		jq -e ".alloc.flog_dead_applied >= $PENDING and
			.namespace.orphans_adopted >= 1" "$T/st1.json" \
			>/dev/null
}
check clu_crashall_applied_at_mount wait_for 60 recovered
echo "node 1: $(jq -c '{dead_applied: .alloc.flog_dead_applied,
	dead_slots: .alloc.flog_dead_slots,
	dead_errors: .alloc.flog_dead_errors,
	leftover_slots: .namespace.leftover_slots,
	adopted: .namespace.orphans_adopted}' "$T/st1.json")"
check clu_crashall_exact jq -e \
	".alloc.flog_dead_applied == $PENDING and
	 .alloc.flog_dead_errors == 0 and .alloc.flog_dead_slots >= 1 and
	 .namespace.leftover_slots >= 1" "$T/st1.json"
clu_flog_end clu_crashall clu_crashall_data "$M1"
exit 0
