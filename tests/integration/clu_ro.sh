#!/bin/sh
# clu_ro: a ro cluster mount (-o ro with lockproto=dlm; MOUNT.md "Cluster
# mounts"). Node A mounts read-write, node B read-only on one image:
#  * B mounts (no journal slot, no heartbeat of its own) and reads what
#    A wrote; every write through B fails with EROFS (create, write,
#    mkdir, unlink, rename, chmod, truncate, setxattr) and changes
#    nothing;
#  * B sees A's new files, changed data and removed names afterwards
#    (B holds its locks in PR only: the locks stats count no EX);
#  * B holds no journal slot; B unmounts, then A; fsck.ucfs -n finds
#    the image clean;
#  * A killed while B is the only other node, A's journal written home
#    (idle): nothing to replay, B goes on serving alone; A mounts again;
#  * A killed with a committed transaction in its journal: B cannot
#    replay it, so it stops serving (fenced, EIO); a ro mount is refused
#    then ("needs replay"); A's rw mount recovers, and B mounts ro again
#    and reads A's fsync'ed files.
# Node 5 is a lockspace-only witness (tests/clulib.sh: quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_ro jq

IMG=$T/img CFG=$T/cluster.json
clu_config "$CFG" 1 2 5
clu_witness "$CFG" 5
fs_mkfs "$IMG" 128 -j 2 -J 8 -r 64 -p dlm -t clu:fs1 || {
	fail clu_ro_mkfs; exit 1; }
MA=$T/a MB=$T/b
fs_mount "$IMG" "$MA" "$(clu_opts "$CFG" 1)" || { fail clu_ro_mount1; exit 1; }
echo first >"$MA/f"
mkdir "$MA/d"
if fs_mount "$IMG" "$MB" "$(clu_opts "$CFG" 2 ro)"; then
	pass clu_ro_mount
else
	fail clu_ro_mount "$(tail -n 5 "$(fs_daemon_log "$MB")" 2>/dev/null)"
	exit 1
fi

eq() { [ "$1" = "$2" ] || { echo "got '$1', want '$2'"; return 1; }; }
# "$@" must fail with EROFS ("Read-only file system")
erofs() {
	_e=$("$@" 2>&1) && { echo "succeeded: $*"; return 1; }
	case $_e in
	*"Read-only file system"*) return 0 ;;
	esac
	echo "not EROFS: $_e"
	return 1
}

check clu_ro_reads eq "$(cat "$MB/f")" first
check clu_ro_create erofs sh -c "echo x >'$MB/new'"
check clu_ro_write erofs sh -c "echo x >>'$MB/f'"
check clu_ro_mkdir erofs mkdir "$MB/e"
check clu_ro_unlink erofs rm "$MB/f"
check clu_ro_rename erofs mv "$MB/f" "$MB/g"
check clu_ro_chmod erofs chmod 600 "$MB/f"
check clu_ro_truncate erofs truncate -s 0 "$MB/f"
if command -v setfattr >/dev/null 2>&1; then
	check clu_ro_setxattr erofs setfattr -n user.k -v v "$MB/f"
fi
check clu_ro_unchanged eq "$(cat "$MA/f") $(ls "$MA" | tr '\n' ' ')" \
	"first d f "

# A's changes seen by B
echo second >"$MA/f"
echo new >"$MA/d/n"
check clu_ro_sees_data eq "$(cat "$MB/f")" second
check clu_ro_sees_create eq "$(cat "$MB/d/n")" new
rm "$MA/d/n"
check clu_ro_sees_unlink test ! -e "$MB/d/n"
check clu_ro_pr_only sh -c "'$B/ucfs-stat' --json '$MB' |
	jq -e '[.locks | .. | objects | .num_exmode? // empty] | add == 0'"
check clu_ro_no_slot sh -c "'$B/ucfs-stat' --json '$MB' |
	jq -e '.cluster.slot == -1'"

check clu_ro_umount2 fs_umount "$MB"
check clu_ro_umount1 fs_umount "$MA"
check clu_ro_fsck_clean fs_fsck "$IMG"

# ---- recovery needed while only a ro node is left ----
fs_mount "$IMG" "$MA" "$(clu_opts "$CFG" 1)" || { fail clu_ro_mount1b; exit 1; }
fs_mount "$IMG" "$MB" "$(clu_opts "$CFG" 2 ro)" || { fail clu_ro_mount2b; exit 1; }
echo synced >"$MA/s"
sync "$MA/s"
check clu_ro_b_reads_before eq "$(cat "$MB/s")" synced
# A dies with its journal written home (B's reads made it give its locks
# up, which writes home what they covered): nothing is half written, B
# goes on alone and reads
fs_kill9 "$MA"
wait_for 30 sh -c "'$B/ucfs-stat' --json '$MB' |
	jq -e '.cluster.node_deaths >= 1'" >/dev/null 2>&1
check clu_ro_alone_clean_journal_goes_on sh -c "'$B/ucfs-stat' --json '$MB' |
	jq -e '.cluster.node_deaths >= 1 and (.cluster.fenced | not)'"
check clu_ro_alone_reads eq "$(cat "$MB/s")" synced
fs_mount "$IMG" "$MA" "$(clu_opts "$CFG" 1)" || { fail clu_ro_mount1c; exit 1; }
check clu_ro_b_sees_new_rw sh -c "ls '$MB' >/dev/null"
# A dies with a committed transaction not written home yet: B cannot
# replay it. B holds /s in its kernel caches (attributes, pages) and
# keeps it open; A's last change is to a file B never asked for, so
# none of B's locks is called back before the fence: once fenced, none
# of what B's kernel cached may be served (fstat, pread)
echo more >"$MA/t"
sync "$MA/t"
check clu_ro_b_cached eq "$(cat "$MB/s") $(stat -c %s "$MB/s")" "synced 7"
clu_fd_probe ro "$MB/s" "$T/ro_open" "$T/ro_go" "$T/ro_read"
wait_for 30 test -f "$T/ro_open"
echo again >>"$MA/t"
sync "$MA/t"
fs_kill9 "$MA"
# B cannot replay A's journal and no read-write node is left: it stops
# serving (fenced), never reading a half-written tree
wait_for 30 sh -c "'$B/ucfs-stat' --json '$MB' | jq -e '.cluster.fenced'" \
	>/dev/null 2>&1
check clu_ro_fenced_alone sh -c "'$B/ucfs-stat' --json '$MB' |
	jq -e '.cluster.fenced'"
check clu_ro_eio_alone sh -c "! cat '$MB/s' 2>/dev/null"
# fenced means no stale answer from the kernel's caches either: stat of
# a cached name, a read through a descriptor opened before, statfs and
# a listing all fail with EIO; the stats say why it fenced
eio() {
	_e=$("$@" 2>&1) && { echo "succeeded: $*"; return 1; }
	case $_e in
	*"Input/output error"*) return 0 ;;
	esac
	echo "not EIO: $_e"
	return 1
}
check clu_ro_fenced_kernel_dropped wait_for 30 sh -c "'$B/ucfs-stat' --json \
	'$MB' | jq -e '.cluster.fence_kernel_dropped' >/dev/null"
check clu_ro_fenced_stat_eio eio stat "$MB/s"
: >"$T/ro_go"
wait_for 30 test -s "$T/ro_read"
check clu_ro_fenced_open_fd_eio eq "$(cat "$T/ro_read")" "errno 5 errno 5"
check clu_ro_fenced_statfs_eio eio stat -f "$MB"
check clu_ro_fenced_ls_eio eio ls "$MB"
check clu_ro_fenced_reason sh -c "'$B/ucfs-stat' --json '$MB' |
	jq -e '.cluster.fence_reason | test(\"needs replay\")'"
fs_umount "$MB" >/dev/null 2>&1
if fs_mount "$IMG" "$MB" "$(clu_opts "$CFG" 2 ro)" 2>"$T/ro.err"; then
	fail clu_ro_refused_needs_replay "mounted"
	fs_umount "$MB"
else
	check clu_ro_refused_needs_replay grep -q "needs replay" \
		"$(fs_daemon_log "$MB")"
fi
check clu_ro_rw_recovers fs_mount "$IMG" "$MA" "$(clu_opts "$CFG" 1)"
check clu_ro_mount_after_recovery fs_mount "$IMG" "$MB" \
	"$(clu_opts "$CFG" 2 ro)"
check clu_ro_fsynced_seen eq "$(cat "$MB/s")" synced
check clu_ro_fsynced_replayed eq "$(cat "$MB/t" | tr '\n' ' ')" "more again "
check clu_ro_umount2b fs_umount "$MB"
check clu_ro_umount1b fs_umount "$MA"
check clu_ro_fsck_clean_after fs_fsck "$IMG"
rm -f "$IMG"
exit 0
