#!/bin/sh
# clu_kill: kill -9 a lockproto=dlm node while it holds inode glocks in
# EX with committed but unwritten transactions, and while the other node
# waits for one of them:
#  (1) node 1 writes files and fsyncs them (its journal holds them; it
#      keeps EX), node 2 starts reading them (it waits for the glock),
#      node 1 is killed: node 2's read completes with node 1's fsync'ed
#      bytes (the survivor replayed node 1's journal in its node-down
#      callback, before the lock manager granted the glock again), node 2
#      goes on writing, its stats count the recovery;
#  (2) node 1 is killed in the middle of a stream of creates while node 2
#      lists the directory: node 2 goes on; node 1 mounts again (its slot
#      is reused), everything is readable;
#  after each: the survivors unmount cleanly and fsck.ucfs -n is clean.
# Node 3 is a lockspace-only witness (tests/clulib.sh: quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_kill

clu_setup clu_kill 2 512 -j 3 -r 64

fsync_file() {	# PATH: fsync through a read-only descriptor
	python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); \
os.fsync(fd)" "$1"
}

# (1) the EX holder dies with fsync'ed changes in its journal only (a
# long minimum hold time keeps node 1 from giving EX to node 2's read
# before it is killed)
clu_mount clu_kill 1 minhold=5000
clu_mount clu_kill 2
ls "$M2" >/dev/null
head -c 2000000 /dev/urandom >"$T/ref"
mkdir "$M1/d"
i=0
while [ $i -lt 40 ]; do echo "$i" >"$M1/d/f$i"; i=$((i + 1)); done
cp "$T/ref" "$M1/d/big"
fsync_file "$M1/d/big"
fsync_file "$M1/d"
cat "$M2/d/big" >"$T/got" 2>"$T/got.err" & rpid=$!
sleep 0.5
fs_kill9 "$M1"
if wait $rpid; then pass clu_kill_waiter_done; else
	fail clu_kill_waiter_done "$(cat "$T/got.err")"; fi
check clu_kill_fsynced_data cmp "$T/ref" "$T/got"
check clu_kill_fsynced_files test "$(ls "$M2/d" | wc -l)" -eq 41
check clu_kill_survivor_writes sh -c "echo after >'$M2/d/after' &&
	grep -q after '$M2/d/after'"
if command -v jq >/dev/null 2>&1; then
	"$B/ucfs-stat" --json "$M2" >"$T/st.json" 2>&1
	check clu_kill_recovery_counted jq -e '.cluster.recoveries >= 1 and
		.cluster.node_deaths >= 1' "$T/st.json"
fi
check clu_kill_umount_survivor fs_umount "$M2"
check clu_kill_fsck_after fs_fsck "$IMG"

# (2) killed in the middle of creates while the other node lists
fs_mount "$IMG" "$M1" "$(clu_opts "$CFG" 1)" || { fail clu_kill_m1b; exit 1; }
fs_mount "$IMG" "$M2" "$(clu_opts "$CFG" 2)" || { fail clu_kill_m2b; exit 1; }
mkdir "$M1/s"
(
	i=0
	while [ $i -lt 100000 ]; do
		echo "$i" >"$M1/s/g$i" 2>/dev/null || exit 0
		i=$((i + 1))
	done
) & cpid=$!
(
	while :; do ls "$M2/s" >/dev/null 2>&1 || exit 0; done
) & lpid=$!
on_exit "kill $cpid $lpid 2>/dev/null"
wait_for 20 test -e "$M2/s/g300"
fs_kill9 "$M1"
wait $cpid
n=$(ls "$M2/s" | wc -l)
kill $lpid 2>/dev/null
echo "node 2 sees $n of node 1's files after the kill"
check clu_kill2_survivor_lists test "$n" -ge 300
check clu_kill2_survivor_reads sh -c "cat '$M2'/s/* >/dev/null"
fs_mount "$IMG" "$M1" "$(clu_opts "$CFG" 1)" || fail clu_kill2_remount
check clu_kill2_rejoined_sees test "$(ls "$M1/s" | wc -l)" -eq "$n"
check clu_kill2_rm_on_rejoined rm -rf "$M1/s"
check clu_kill2_rm_seen test ! -e "$M2/s"
check clu_kill2_umount1 fs_umount "$M1"
check clu_kill2_umount2 fs_umount "$M2"
check clu_kill2_fsck_after fs_fsck "$IMG"
rm -f "$IMG"
exit 0
