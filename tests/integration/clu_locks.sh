#!/bin/sh
# clu_locks: flock(2), fcntl record locks and OFD locks across the nodes
# of a cluster mount (fusefs/fuse/fs_plock.c, lockmgr/lk_plock.c). Nodes 1-3
# mount one image; nodes 4 and 5 are lockspace-only witnesses (quorum). With
# flock(1) and tests/progs/plockctl from the shell, as users script it:
#  * flock: an exclusive lock on node 1 keeps node 2 out (LOCK_NB refused,
#    a waiter gets the lock only after the holder released it); shared
#    locks on two nodes coexist; three nodes take turns; a wait is
#    interrupted by a signal (flock -w);
#  * fcntl: F_GETLK on node 2 reports node 1's lock with its pid;
#    F_SETLKW waits across nodes and a signal interrupts it (EINTR); a
#    cross-node deadlock returns EDEADLK to exactly one side; a holder
#    killed with -9 releases its locks, a waiter killed gets none; OFD
#    locks conflict across nodes
#    and go with their open file description;
#  * POSIX ranges (overlap, split, merge, upgrade, downgrade, close) on
#    two nodes give exactly the outcomes of the same seeded sequence on
#    the local filesystem (tests/progs/plock_model, UCFS_SEED);
#  * kill -9 of the node that holds locks (and is the plock server):
#    the waiters on the survivors get them;
#  * stats count waits, conflicts and deadlocks; every node unmounts;
#  * over io_uring (uring=on, when the kernel has it; the parameter is put
#    back): F_SETLKW waits and is interrupted, flock -w is interrupted,
#    other requests go on;
#  * a nolock mount keeps the kernel's local locks.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_locks

PC=$B/tests/plockctl
SEED=${UCFS_SEED:-14}
clu_setup clu_locks 3 256 -j 3 -r 64
for n in 1 2 3; do
	clu_mount clu_locks $n
done
touch "$M1/f" "$M1/p"
bg_pids=""
on_exit 'kill $bg_pids 2>/dev/null'
bg() { "$@" & bg_pids="$bg_pids $!"; }

# ---- flock ----
bg flock -x "$M1/f" -c "touch '$T/a_in'; while [ ! -e '$T/go' ]; do
	sleep 0.05; done; touch '$T/a_out'"
wait_for 20 test -e "$T/a_in" || fail clu_flock_holder_in
if flock -n -x "$M2/f" true; then fail clu_flock_nb_refused; else
	pass clu_flock_nb_refused; fi
if flock -n -s "$M3/f" true; then fail clu_flock_nb_refused_3; else
	pass clu_flock_nb_refused_3; fi
# the waiters get the lock only once the holder has let it go
flock -x "$M2/f" -c "test -e '$T/a_out' && echo after >>'$T/order'" &
w2=$!
flock -x "$M3/f" -c "test -e '$T/a_out' && echo after >>'$T/order'" &
w3=$!
sleep 0.5
touch "$T/go"
wait $w2 && wait $w3
check clu_flock_waiters_after_release test "$(grep -c after "$T/order")" -eq 2
bg flock -s "$M1/f" -c "touch '$T/s1'; while [ ! -e '$T/s2' ]; do
	sleep 0.05; done"
if timeout 30 flock -s "$M2/f" -c "touch '$T/s2'; while [ ! -e '$T/s1' ]; do
	sleep 0.05; done"; then pass clu_flock_shared_coexist; else
	fail clu_flock_shared_coexist; fi
rm -f "$T/go" "$T/a_in"
bg flock -x "$M1/f" -c "touch '$T/a_in'; while [ ! -e '$T/go' ]; do
	sleep 0.05; done"
wait_for 20 test -e "$T/a_in"
# flock -w 1: SIGALRM interrupts the wait (FUSE INTERRUPT), exit 1
timeout 30 flock -w 1 -x "$M2/f" true
check clu_flock_wait_interrupted test $? -eq 1
touch "$T/go"

# ---- fcntl ----
bg "$PC" "$M1/p" w:10:5 touch:"$T/p_in" wait:"$T/p_go" u:10:5 \
	touch:"$T/p_out" wait:"$T/p_end"
ppid=$!
wait_for 20 test -e "$T/p_in"
"$PC" "$M2/p" g:r:12:1 g:w:5:10 g:r:15:4 w:12:1 >"$T/getlk"
check clu_fcntl_getlk_reports_holder \
	grep -qx "g:r:12:1 w 10 5 $ppid" "$T/getlk"
check clu_fcntl_getlk_overlap grep -qx "g:w:5:10 w 10 5 $ppid" "$T/getlk"
check clu_fcntl_getlk_free grep -qx "g:r:15:4 unlocked" "$T/getlk"
check clu_fcntl_setlk_refused grep -qx "w:12:1 EAGAIN" "$T/getlk"
# F_SETLKW on node 3 waits for node 1's unlock: still waiting 0.5 s on
# (not granted past node 1's lock), granted once node 1 unlocks. (Node 1
# touches p_out only after its unlock returned, so node 3 may be granted
# before p_out exists: not a check.)
"$PC" "$M3/p" W:14:1 >"$T/setlkw" &
w3=$!
sleep 0.5
check clu_fcntl_setlkw_waits kill -0 $w3
touch "$T/p_go"
wait $w3
check clu_fcntl_setlkw_after_unlock grep -qx 'W:14:1 ok' "$T/setlkw"
touch "$T/p_end"
# a signal interrupts F_SETLKW
bg "$PC" "$M1/p" w:0:1 touch:"$T/i_in" wait:"$T/i_end"
wait_for 20 test -e "$T/i_in"
"$PC" "$M2/p" W:0:1 >"$T/intr" &
w2=$!
sleep 0.5
kill -USR1 $w2
wait $w2
check clu_fcntl_setlkw_interrupted grep -qx "W:0:1 EINTR" "$T/intr"
touch "$T/i_end"
# deadlock across nodes: each holds one byte and waits for the other's
"$PC" "$M1/p" W:100:1 touch:"$T/d1" wait:"$T/d2" W:200:1 >"$T/dl1" &
d1=$!
"$PC" "$M2/p" W:200:1 touch:"$T/d2" wait:"$T/d1" W:100:1 >"$T/dl2" &
d2=$!
wait_for 60 sh -c "test \$(cat '$T/dl1' '$T/dl2' | wc -l) -ge 4" ||
	kill $d1 $d2
wait $d1
wait $d2
cat "$T/dl1" "$T/dl2"
check clu_fcntl_deadlock_one_side test \
	"$(cat "$T/dl1" "$T/dl2" | grep -c EDEADLK)" -eq 1
check clu_fcntl_deadlock_other_granted test \
	"$(cat "$T/dl1" "$T/dl2" | grep -c '^W:.* ok$')" -eq 3
# a holder killed with -9 releases its locks (the kernel's flush at exit)
bg "$PC" "$M1/p" w:0:0 touch:"$T/k_in" hold
kp=$!
wait_for 20 test -e "$T/k_in"
kill -9 $kp
timeout 60 "$PC" "$M2/p" W:0:0 >"$T/killed"
check clu_fcntl_killed_holder_released grep -qx "W:0:0 ok" "$T/killed"
sh -c "exec 9>>'$M1/f'; flock -x 9; touch '$T/kf_in'; exec sleep 1000" &
kf=$!
wait_for 20 test -e "$T/kf_in"
kill -9 $kf
check clu_flock_killed_holder_released timeout 60 flock -x "$M2/f" true
# a waiter killed with -9 (the kernel interrupts its wait, then waits
# for the answer) is given nothing: the lock goes to the next one
bg "$PC" "$M1/p" w:300:1 touch:"$T/kw_in" wait:"$T/kw_go"
wait_for 20 test -e "$T/kw_in"
"$PC" "$M2/p" W:300:1 hold >/dev/null &
kw=$!
sh -c "exec 9>>'$M2/f'; exec flock -x 9" &
kwf=$!
bg flock -x "$M1/f" -c "touch '$T/kwf_in'; while [ ! -e '$T/kw_go' ]; do
	sleep 0.05; done"
sleep 0.5
kill -9 $kw $kwf
wait $kw $kwf 2>/dev/null
touch "$T/kw_go"
check clu_fcntl_killed_waiter_gets_nothing timeout 60 "$PC" "$M3/p" W:300:1
check clu_flock_killed_waiter_gets_nothing timeout 60 flock -x "$M3/f" true
# OFD locks: conflict across nodes, go with their description
bg "$PC" -o "$M1/p" w:0:10 touch:"$T/o_in" wait:"$T/o_go"
wait_for 20 test -e "$T/o_in"
"$PC" -o "$M2/p" w:5:1 g:w:0:1 >"$T/ofd"
check clu_ofd_refused grep -qx "w:5:1 EAGAIN" "$T/ofd"
cat "$T/ofd"
check clu_ofd_getlk grep -qx "g:w:0:1 w 0 10 -1" "$T/ofd"
"$PC" -o "$M3/p" W:5:1 >"$T/ofd3" &
w3=$!
sleep 0.3
touch "$T/o_go"
wait $w3
check clu_ofd_released_with_description grep -qx "W:5:1 ok" "$T/ofd3"

# ---- POSIX ranges against the local model ----
echo "plock_model seed $SEED"
touch "$T/model" "$M1/model"
"$B/tests/plock_model" "$SEED" 400 "$T/model" "$M1/model" "$M2/model" \
	>"$T/model.out" 2>&1
rc=$?
cat "$T/model.out"
check clu_fcntl_model test $rc -eq 0

# ---- stats ----
if command -v jq >/dev/null 2>&1; then
	for n in 1 2 3; do "$B/ucfs-stat" --json "$T/m$n" >"$T/st$n.json"; done
	check clu_locks_stats_keys jq -e '.file_locks.flock_waits >= 0 and
		.file_locks.posix_deadlocks >= 0' "$T/st1.json"
	check clu_locks_stats_counted sh -c "jq -s '[.[].file_locks] |
		(map(.posix_deadlocks) | add) >= 1 and
		(map(.posix_waits) | add) >= 1 and
		(map(.flock_conflicts) | add) >= 1 and
		(map(.posix_conflicts) | add) >= 1 and
		(map(.server_requests) | add) >= 1' \
		'$T/st1.json' '$T/st2.json' '$T/st3.json' | grep -qx true"
fi

# ---- the holders' node dies (it is the plock server: lowest id) ----
touch "$M1/n"
bg "$PC" "$M1/n" w:0:0 touch:"$T/n_in" hold
bg sh -c "exec 9>>'$M1/n'; flock -x 9; touch '$T/nf_in'; exec sleep 1000"
wait_for 20 test -e "$T/n_in" && wait_for 20 test -e "$T/nf_in"
"$PC" "$M2/n" W:0:0 hold >"$T/node" &
w2=$!
bg_pids="$bg_pids $w2"
flock -x "$M3/n" -c "echo got >'$T/nodef'" &
w3=$!
sleep 0.5
fs_kill9 "$M1"
wait_for 60 grep -q ok "$T/node"
check clu_node_death_posix_released grep -qx "W:0:0 ok" "$T/node"
wait $w3
check clu_node_death_flock_released grep -qx got "$T/nodef"
"$PC" "$M3/n" g:w:0:1 >"$T/after"
check clu_node_death_survivor_lock_seen grep -q "^g:w:0:1 w 0 0 " \
	"$T/after"
kill $w2
wait $w2
check clu_locks_umount2 fs_umount "$M2"
check clu_locks_umount3 fs_umount "$M3"
check clu_locks_fsck fs_fsck "$IMG"
rm -f "$IMG"

# ---- over io_uring (the handler waits itself), if the kernel has it ----
PARAM=/sys/module/fuse/parameters/enable_uring
ur_old=$(cat "$PARAM" 2>/dev/null)
fs_mkfs "$IMG" 256 -j 3 -J 8 -r 64 -p dlm -t clu:fs1 || fail clu_locks_mkfs2
if [ -n "$ur_old" ] && fs_mount "$IMG" "$M2" "$(clu_opts "$CFG" 2 uring=on)" &&
	fs_mount "$IMG" "$M3" "$(clu_opts "$CFG" 3 uring=on)"; then
	echo "$ur_old" >"$PARAM"	# only these two mounts use it
	if "$B/ucfs-stat" --json "$M3" | grep -q '"io_uring"'; then
		touch "$M2/u"
		bg "$PC" "$M2/u" w:0:1 touch:"$T/u_in" wait:"$T/u_go"
		wait_for 20 test -e "$T/u_in"
		"$PC" "$M3/u" W:0:1 >"$T/uw" &
		uw=$!
		"$PC" "$M3/u" W:0:1 >"$T/ui" &
		ui=$!
		sleep 0.5
		kill -USR1 $ui
		wait $ui
		check clu_uring_setlkw_interrupted grep -qx "W:0:1 EINTR" \
			"$T/ui"
		check clu_uring_other_requests ls "$M3"
		touch "$T/u_go"
		wait $uw
		check clu_uring_setlkw_granted grep -qx "W:0:1 ok" "$T/uw"
		bg sh -c "exec 9>>'$M2/u'; flock -x 9; touch '$T/uf_in';
			exec sleep 1000"
		ufp=$!
		wait_for 20 test -e "$T/uf_in"
		timeout 30 flock -w 0.5 -x "$M3/u" true
		check clu_uring_flock_wait_interrupted test $? -eq 1
		kill $ufp
		check clu_uring_flock_after timeout 60 flock -x "$M3/u" true
	else
		skip clu_uring "the kernel offers no FUSE over io_uring"
	fi
	check clu_uring_umount2 fs_umount "$M2"
	check clu_uring_umount3 fs_umount "$M3"
else
	[ -n "$ur_old" ] && echo "$ur_old" >"$PARAM"
	skip clu_uring "no FUSE io_uring parameter or no mount"
fi

# ---- a nolock mount keeps the kernel's own (local) locks ----
fs_mkfs "$T/nolock.img" 128 -j 2 -p nolock || fail clu_locks_mkfs_nolock
fs_mount "$T/nolock.img" "$M1" "" || { fail clu_locks_mount_nolock; exit 1; }
bg "$PC" "$M1/l" w:0:0 touch:"$T/l_in" wait:"$T/l_end"
wait_for 20 test -e "$T/l_in"
check clu_nolock_fcntl_local sh -c "'$PC' '$M1/l' w:0:1 g:r:0:1 |
	tr '\n' ' ' | grep -q 'w:0:1 EAGAIN g:r:0:1 w 0 0'"
touch "$T/l_end"
bg flock -x "$M1/l" -c "touch '$T/lf_in'; while [ ! -e '$T/lf_end' ]; do
	sleep 0.05; done"
wait_for 20 test -e "$T/lf_in"
if flock -n -x "$M1/l" true; then fail clu_nolock_flock_local; else
	pass clu_nolock_flock_local; fi
touch "$T/lf_end"
if command -v jq >/dev/null 2>&1; then
	"$B/ucfs-stat" --json "$M1" >"$T/stn.json"
	check clu_nolock_no_file_locks_section jq -e \
		'.file_locks == null' "$T/stn.json"
fi
sleep 0.3
check clu_locks_umount_nolock fs_umount "$M1"
exit 0
