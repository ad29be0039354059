#!/bin/sh
# clu_localflocks: the localflocks mount option (MOUNT.md "File locks";
# GFS2's option of the same name). Two dlm nodes mount one image with it:
#  * flock: an exclusive lock held on node 1 still keeps out another
#    process on node 1 (the kernel's local lock), but not one on node 2:
#    the locks are no longer cluster-wide;
#  * fcntl: the same for a POSIX write lock (plockctl);
#  * a close(2) sends no FLUSH (fuse.ops.flush.count unchanged over 50
#    open/write/close) and the mount has no file_locks stats section;
#  * every node must use the same setting (unlike GFS2, which leaves it to
#    the administrator): node 3 mounting without the option while nodes 1
#    and 2 have it is refused with a clear message, and node 1 mounting
#    with it while node 3 is mounted without is refused too;
#  * node 3, mounted without the option once 1 and 2 are gone, sends a
#    FLUSH per close and keeps its cluster lock statistics.
# Nodes 4 and 5 are lockspace-only witnesses (tests/clulib.sh: quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_localflocks jq flock

PC=$B/tests/plockctl
clu_setup clu_localflocks 3 128 -j 3 -r 64
clu_mount clu_localflocks 1 localflocks
clu_mount clu_localflocks 2 localflocks
clu_refused clu_localflocks_mixed_refused "every node must mount with localflocks" \
	"$IMG" "$(clu_opts "$CFG" 3)"
touch "$M1/f" "$M1/p"
bg_pids=""
on_exit 'kill $bg_pids 2>/dev/null'

# ---- flock: local exclusion only ----
flock -x "$M1/f" -c "touch '$T/a_in'; while [ ! -e '$T/go' ]; do
	sleep 0.05; done" &
bg_pids="$bg_pids $!"
wait_for 20 test -e "$T/a_in" || fail clu_localflocks_holder_in
if flock -n -x "$M1/f" true; then
	fail clu_localflocks_flock_same_node_refused
else
	pass clu_localflocks_flock_same_node_refused
fi
check clu_localflocks_flock_other_node_free flock -n -x "$M2/f" true
touch "$T/go"

# ---- fcntl: local exclusion only ----
"$PC" "$M1/p" w:0:10 touch:"$T/p_in" wait:"$T/p_go" >"$T/p1" &
bg_pids="$bg_pids $!"
wait_for 20 test -e "$T/p_in" || fail clu_localflocks_plock_holder_in
"$PC" "$M1/p" w:0:1 >"$T/p_same"
check clu_localflocks_fcntl_same_node_refused grep -qx "w:0:1 EAGAIN" \
	"$T/p_same"
"$PC" "$M2/p" w:0:1 >"$T/p_other"
check clu_localflocks_fcntl_other_node_free grep -qx "w:0:1 ok" \
	"$T/p_other"
touch "$T/p_go"

# ---- no FLUSH per close, no cluster file-lock statistics ----
flushes() { "$B/ucfs-stat" --json "$1" | jq '.fuse.ops.flush.count // 0'; }
closes() {	# MOUNT: 50 open + write + close
	_i=0
	while [ $_i -lt 50 ]; do
		echo "$_i" >"$1/c$_i"
		_i=$((_i + 1))
	done
}
f0=$(flushes "$M1")
closes "$M1"
f1=$(flushes "$M1")
check clu_localflocks_no_flush test "$f1" -eq "$f0"
"$B/ucfs-stat" --json "$M1" >"$T/st1.json"
check clu_localflocks_no_file_locks_section \
	jq -e 'has("file_locks") | not' "$T/st1.json"
# node 3 without it, once 1 and 2 are gone: a FLUSH per close, cluster
# file locks; now node 1 with it is refused
for n in 1 2; do
	check clu_localflocks_umount$n fs_umount "$T/m$n"
done
clu_mount clu_localflocks 3
clu_refused clu_localflocks_mixed_refused_back \
	"every node must mount without localflocks" "$IMG" \
	"$(clu_opts "$CFG" 1 localflocks)"
g0=$(flushes "$M3")
closes "$M3"
g1=$(flushes "$M3")
check clu_localflocks_default_flushes test "$((g1 - g0))" -ge 50
"$B/ucfs-stat" --json "$M3" >"$T/st3.json"
check clu_localflocks_default_file_locks jq -e 'has("file_locks")' \
	"$T/st3.json"

check clu_localflocks_umount3 fs_umount "$T/m3"
check clu_localflocks_fsck fs_fsck "$IMG"
rm -f "$IMG"
exit 0
