#!/bin/sh
# clu_pathloss: one node loses its path to the shared disk (a SAN or
# iSCSI path failure) while its network stays up. Each node reaches the
# image through its own nbdkit server (the file plugin, so both see one
# page cache); node 2's server has nbdkit's error filter, which fails
# every request of node 2 while a trigger file exists:
#  * node 2 holds an fsync'ed file in EX (minhold) when its path fails;
#    it fences itself (its disk lease cannot be renewed, a demote cannot
#    write back): stats cluster.fenced with a reason, every request EIO;
#  * node 1 declares it dead (its disk beat stopped, its lockspace gone),
#    replays its journal: node 2's fsync'ed file reads back whole on
#    node 1, which goes on writing;
#  * node 2's unmount completes and its daemon exits; with the path back
#    node 2 mounts again and reads both nodes' files; both unmount;
#    fsck.ucfs -n is clean.
# Needs nbdkit with its error filter (SKIP otherwise). Node 3 is a
# lockspace-only witness (tests/clulib.sh: quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_pathloss jq
if ! command -v nbdkit >/dev/null 2>&1 ||
	! nbdkit --dump-plugin --filter=error null >/dev/null 2>&1; then
	skip clu_pathloss "needs nbdkit and its error filter (make deps)"
	exit 0
fi

clu_setup clu_pathloss 2 128 -j 2 -r 16
INJECT=$T/inject
SRV1="" SRV2=""
on_exit '[ -n "$SRV1" ] && kill "$SRV1"; [ -n "$SRV2" ] && kill "$SRV2"'
# srv N [FILTER ARGS...]: serve $IMG on $T/nbdN.sock; PID in SRVN
srv() {
	_n=$1
	shift
	rm -f "$T/nbd$_n.sock"
	nbdkit -f -U "$T/nbd$_n.sock" "$@" >"$T/nbdkit$_n.log" 2>&1 &
	eval "SRV$_n=$!"
	wait_for 10 test -S "$T/nbd$_n.sock"
}
uri() { echo "nbd+unix:///?socket=$T/nbd$1.sock&io_timeout=10"; }
# not through check(): nbdkit must not inherit a command substitution
srv 1 file "$IMG" || { fail clu_pathloss_srv1; exit 1; }
srv 2 --filter=error file "$IMG" error-rate=100% error-file="$INJECT" ||
	{ fail clu_pathloss_srv2; exit 1; }
fs_mount "$(uri 1)" "$M1" "$(clu_opts "$CFG" 1)" ||
	{ fail clu_pathloss_m1; exit 1; }
fs_mount "$(uri 2)" "$M2" "$(clu_opts "$CFG" 2 minhold=10000)" ||
	{ fail clu_pathloss_m2; exit 1; }

head -c 300000 /dev/urandom >"$T/ref"
cp "$T/ref" "$M2/held"
python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); \
os.fsync(fd)" "$M2/held"
echo one >"$M1/one"
check clu_pathloss_before sh -c "[ \"\$(cat '$M2/one')\" = one ]"

# node 2's path fails
: >"$INJECT"
fenced() { clu_stat "$M2" | jq -e '.cluster.fenced' >/dev/null; }
check clu_pathloss_node2_fenced wait_for 60 fenced
check clu_pathloss_node2_reason sh -c "'$B/ucfs-stat' --json '$M2' |
	jq -e '.cluster.fence_reason | test(\"could not be written\")'"
echo "node 2 fenced: $(clu_stat "$M2" | jq -c '{fence_reason: .cluster.fence_reason}')"
check clu_pathloss_node2_eio sh -c "! ls '$M2' >/dev/null 2>&1 &&
	! cat '$M2/one' >/dev/null 2>&1"
# node 1 takes over: node 2's fsync'ed file, replayed from its journal
if timeout 60 cmp "$T/ref" "$M1/held"; then
	pass clu_pathloss_survivor_reads_fsynced
else
	fail clu_pathloss_survivor_reads_fsynced
fi
check clu_pathloss_survivor_recovered test "$(clu_stat "$M1" \
	'.cluster.recoveries >= 1 and .cluster.node_deaths >= 1 and
	(.cluster.fenced | not)')" = true
check clu_pathloss_survivor_writes sh -c "echo two >'$M1/two' &&
	[ \"\$(cat '$M1/two')\" = two ]"

# node 2 unmounts (its daemon exits), mounts again with its path back
fs_umount "$M2" 2>/dev/null
check clu_pathloss_node2_daemon_exited test -f "$(fs_daemon_log "$M2" |
	sed 's|/log$|/rc|')"
rm -f "$INJECT"
check clu_pathloss_node2_remounts fs_mount "$(uri 2)" "$M2" \
	"$(clu_opts "$CFG" 2)"
check clu_pathloss_node2_reads cmp "$T/ref" "$M2/held"
check clu_pathloss_node2_sees_survivor sh -c "[ \"\$(cat '$M2/two')\" = two ]"
check clu_pathloss_umount2 fs_umount "$M2"
check clu_pathloss_umount1 fs_umount "$M1"
kill "$SRV1" && wait "$SRV1"
SRV1=""
kill "$SRV2" && wait "$SRV2"
SRV2=""
check clu_pathloss_fsck fs_fsck "$IMG"
rm -f "$IMG"
exit 0
