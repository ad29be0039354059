#!/bin/sh
# clu_fence: fencing that ends, and quorum witnesses. Nodes 1, 2 and 3
# mount one image; nodes 4 and 5 are quorum witnesses (ucfs-witness):
#  (1) mounting node 1 a second time is refused ("node 1 is already
#      mounted"); a cluster file with a JSON syntax error is refused
#      naming its line and column;
#  (2) node 2's daemon is stopped (SIGSTOP) past hb_timeout while it
#      holds the fs lock in EX with an fsync'ed file in its journal: node
#      1 declares it dead once both its network and its disk heartbeats
#      are silent, replays its journal (the file is there) and goes on;
#      node 2 resumes (SIGCONT): its disk lease ran out, so it fences
#      itself without writing (its heartbeat counter in the image stands
#      still), every request fails with EIO (also stat of a name,
#      statfs, and fstat, pread and write on a descriptor opened before:
#      its kernel's caches are dropped; the stats say why), a flock(2) waiter node 2
#      had queued behind node 1's lock fails instead of waiting for ever
#      (the lock manager answers no waiter of a fenced node with
#      -ESHUTDOWN); node 3 mounts while the
#      fenced node 2 is still mounted (a fenced node blocks nobody); node
#      2's unmount completes and its daemon exits within seconds, and
#      node 2 mounts again;
#  (3) with the witnesses up, nodes 3, 1 and then 2 (the last filesystem
#      node) unmount cleanly (status 0); fsck.ucfs -n is clean.
# Prints the times from SIGCONT to the fence and to the daemon's exit.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_fence jq

clu_setup clu_fence 3 256 -j 3 -r 64
now() { date +%s.%N; }

# (1) refused: node 1 twice; a JSON syntax error
clu_mount clu_fence 1
clu_refused clu_fence_node_twice "node 1 is already mounted" "$IMG" \
	"$(clu_opts "$CFG" 1)"
sed 's/"nodes": \[/"nodes": [ ,/' "$CFG" >"$T/syntax.json"
clu_refused clu_fence_json_line_column \
	"JSON syntax error at line 3, column" "$IMG" \
	"$(clu_opts "$T/syntax.json" 2)"

# (2) node 2 frozen past hb_timeout while it holds EX
fs_mount "$IMG" "$M2" "$(clu_opts "$CFG" 2 minhold=10000)" || {
	fail clu_fence_m2; exit 1; }
slot2=$(clu_stat "$M2" .cluster.slot)
hb_off=$(( (3 + 2 * slot2) * 4096 + 48 ))
head -c 300000 /dev/urandom >"$T/ref"
cp "$T/ref" "$M2/frozen"
python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); \
os.fsync(fd)" "$M2/frozen"
# a flock(2) waiter on node 2 behind node 1's lock: it waits in the
# lock manager (lk_wait or a completion) when node 2 is fenced below
: >"$M1/lockf"
python3 -c "
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
open(sys.argv[2], 'w').close()
while not os.path.exists(sys.argv[3]):
    time.sleep(0.1)
" "$M1/lockf" "$T/locked" "$T/unlock" &
LOCKER=$!
on_exit "kill $LOCKER 2>/dev/null"
wait_for 30 test -f "$T/locked"
python3 -c "
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
open(sys.argv[2], 'w').close()
try:
    fcntl.flock(fd, fcntl.LOCK_EX)
    r = 0
except OSError as e:
    r = e.errno
open(sys.argv[3], 'w').write(str(r))
" "$M2/lockf" "$T/opened2" "$T/waiter.rc" &
check clu_fence_flock_opened wait_for 30 test -f "$T/opened2"
sleep 1
check clu_fence_flock_waits test ! -f "$T/waiter.rc"
# a descriptor node 2 opened (read-write) before it is stopped, its
# pages and attributes in node 2's kernel: once fenced, fstat, pread and
# write through it must fail with EIO, not answer from those caches
clu_fd_probe rw "$M2/frozen" "$T/fd_open" "$T/fd_go" "$T/fd_result"
check clu_fence_fd_opened wait_for 30 test -f "$T/fd_open"
pid2=$(cat "$(fs_daemon_log "$M2" | sed 's|/log$|/pid|')")
kill -STOP "$pid2"
tstop=$(now)
# its last beat: once it is stopped (the signal is taken later)
wait_for 10 stopped "$pid2" || fail clu_fence_node2_stopped
hb_stop=$(od -An -tu8 -j $hb_off -N8 "$IMG")
# node 1 needs the fs lock node 2 holds: granted once node 2 is dead
if timeout 60 cmp "$T/ref" "$M1/frozen"; then
	pass clu_fence_survivor_replayed_frozen_node
else
	fail clu_fence_survivor_replayed_frozen_node
fi
echo "node 1 read node 2's fsync'ed file $(echo "$(now) - $tstop" | bc -l) s" \
	"after node 2 was stopped"
check clu_fence_survivor_writes sh -c "echo after >'$M1/after'"
check clu_fence_survivor_counted sh -c "'$B/ucfs-stat' --json '$M1' |
	jq -e '.cluster.recoveries >= 1 and .cluster.node_deaths >= 1'"
tcont=$(now)
kill -CONT "$pid2"
if wait_for 30 sh -c "'$B/ucfs-stat' --json '$M2' |
	jq -e .cluster.fenced >/dev/null"; then
	pass clu_fence_resumed_node_fenced
else
	fail clu_fence_resumed_node_fenced
fi
tfenced=$(now)
check clu_fence_resumed_eio sh -c "! ls '$M2' >/dev/null 2>&1"
# no stale answer from the kernel's caches of node 2 either (it held
# "frozen" in EX: its name and attributes were cached for a day)
check clu_fence_resumed_kernel_dropped wait_for 30 sh -c "'$B/ucfs-stat' \
	--json '$M2' | jq -e '.cluster.fence_kernel_dropped' >/dev/null"
check clu_fence_resumed_stat_eio sh -c "! stat '$M2/frozen' >/dev/null 2>&1"
check clu_fence_resumed_statfs_eio sh -c "! stat -f '$M2' >/dev/null 2>&1"
: >"$T/fd_go"
check clu_fence_resumed_fd_result wait_for 30 test -s "$T/fd_result"
check clu_fence_resumed_fd_eio test "$(cat "$T/fd_result")" = \
	"errno 5 errno 5 errno 5"
echo "node 2's old descriptor after the fence: $(cat "$T/fd_result")"
# the reason names what a node stopped past hb_timeout finds first on
# waking: its disk lease ran out, the lock manager removed it (or refused
# a lock for it), quorum is gone, or a survivor took its heartbeat slot
# (under load any of them may come first: a race of threads, all correct)
why=$("$B/ucfs-stat" --json "$M2" | jq -r '.cluster.fence_reason')
echo "node 2's fence reason: $why"
check clu_fence_resumed_reason sh -c "printf '%s' '$why' |
	grep -Eq 'disk lease|lock manager (fenced|refused)|quorum lost|heartbeat slot'"
# nothing answers a fenced node: its flock waiter fails (it waited for
# ever before), while node 2 is still mounted
check clu_fence_flock_waiter_ends wait_for 30 test -s "$T/waiter.rc"
check clu_fence_flock_waiter_failed test "$(cat "$T/waiter.rc")" -ne 0
: >"$T/unlock"
wait $LOCKER
sleep 1
hb_after=$(od -An -tu8 -j $hb_off -N8 "$IMG")
check clu_fence_resumed_wrote_no_beat test "$hb_stop" -eq "$hb_after"
check clu_fence_join_beside_fenced fs_mount "$IMG" "$M3" "$(clu_opts "$CFG" 3)"
check clu_fence_joined_reads cmp "$T/ref" "$M3/frozen"
fs_umount "$M2" 2>/dev/null
texit=$(now)
check clu_fence_daemon_exited test -f "$(fs_daemon_log "$M2" |
	sed 's|/log$|/rc|')"
echo "SIGCONT to fenced: $(echo "$tfenced - $tcont" | bc -l) s (polled);" \
	"to the daemon's exit after unmount: $(echo "$texit - $tcont" |
	bc -l) s"
check clu_fence_node2_remounts fs_mount "$IMG" "$M2" "$(clu_opts "$CFG" 2)"
check clu_fence_remounted_reads cmp "$T/ref" "$M2/frozen"
check clu_fence_remounted_sees test -e "$M2/after"

# (3) both unmount cleanly in turn with the witness up
check clu_fence_umount3_clean fs_umount "$M3"
check clu_fence_umount1_clean fs_umount "$M1"
check clu_fence_umount2_last_clean fs_umount "$M2"
check clu_fence_fsck fs_fsck "$IMG"
rm -f "$IMG"
exit 0
