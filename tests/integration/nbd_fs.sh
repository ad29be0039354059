#!/bin/sh
# nbd_fs: ucfs on a network block device. nbdkit's file plugin serves an
# image on a unix socket in the scratch dir; mkfs.ucfs, the ucfs daemon
# (lockproto=nolock) and fsck.ucfs all take the nbd+unix:// URI as their
# DEVICE. Files written through the mount read back after a remount, fsck
# through NBD is clean, and the image file itself (server stopped) checks
# clean too: the NBD path wrote the real device. A second nolock mount
# and a mkfs of the mounted export are refused. A URI whose server is
# absent fails mkfs, fsck and mount with an error, not a hang; a server
# that dies or hangs under a mount gives EIO, and umount still works.
# Needs root, /dev/fuse and nbdkit (SKIP otherwise).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
fs_require_ucfs nbd_fs

if [ "$(id -u)" -ne 0 ] || [ ! -c /dev/fuse ]; then
	skip nbd_fs "needs root and /dev/fuse"
	exit 0
fi
if ! command -v nbdkit >/dev/null 2>&1; then
	skip nbd_fs "needs nbdkit (make deps)"
	exit 0
fi

IMG=$T/img MNT=$T/mnt SOCK=$T/nbd.sock
URI="nbd+unix:///?socket=$SOCK&io_timeout=10"
SRV=""
truncate -s 256M "$IMG"

on_exit '[ -n "$SRV" ] && kill -CONT "$SRV" && kill "$SRV"'
srv_start() {	# serve $IMG on $SOCK; PID in $SRV (stopped on exit)
	rm -f "$SOCK"
	nbdkit -f -U "$SOCK" file "$IMG" >"$T/nbdkit.log" 2>&1 &
	SRV=$!
	wait_for 10 test -S "$SOCK"
}
# srv_dead KILL|STOP: wait until the server signalled so serves no more.
# kill(2) returns before the signal is taken (lib.sh "stopped"): seen
# under load, a create and its fsync issued after "kill -STOP" were
# served, durable.
srv_dead() {
	if [ "$1" = KILL ]; then
		wait "$SRV"
		SRV=""
	else
		wait_for 10 stopped "$SRV"
	fi
}
srv_stop() {	# SIGTERM: nbdkit exits 0 after closing the image
	kill "$SRV" && wait "$SRV"
	_rc=$?
	SRV=""
	return $_rc
}

# not through check(): nbdkit must not inherit a command substitution
if srv_start; then pass nbd_server; else fail nbd_server; exit 1; fi
check nbd_mkfs "$B/mkfs.ucfs" -q -J 8 -r 64 "$URI"
check nbd_fsck_fresh "$B/fsck.ucfs" -n "$URI"

fs_mount "$URI" "$MNT" lockproto=nolock || { fail nbd_mount; exit 1; }
pass nbd_mount
check nbd_mounted_type grep -q " $MNT fuse.ucfs " /proc/mounts
head -c 8388608 /dev/urandom >"$T/big"
check nbd_write_big cp "$T/big" "$MNT/big"
check nbd_write_tree cp -a "$UCFS_TOP/blockdev" "$MNT/src"
check nbd_mkdirs mkdir -p "$MNT/a/b/c" "$MNT/x/y"
check nbd_small sh -c \
	"for i in \$(seq 1 200); do echo \$i >'$MNT/a/b/c/f'\$i; done"
check nbd_read_big cmp "$T/big" "$MNT/big"
# BD_EXCL over NBD excludes this host's other users of the URI (whatever
# its io_timeout): a second nolock mount and a mkfs are refused.
MNT2=$T/mnt2 URI2="nbd+unix:///?socket=$SOCK&io_timeout=5"
mkdir -p "$MNT2"
on_exit "mountpoint -q '$MNT2' && umount '$MNT2'"
check nbd_second_mount_refused sh -c \
	"! '$B/ucfs' -o lockproto=nolock '$URI2' '$MNT2' 2>'$T/second.err' &&
	 grep -q 'already mounted' '$T/second.err'"
check nbd_mkfs_mounted_refused sh -c \
	"! '$B/mkfs.ucfs' -q -f '$URI2' 2>'$T/mkfs2.err' &&
	 grep -q 'in use' '$T/mkfs2.err'"
check nbd_umount fs_umount "$MNT"

fs_mount "$URI" "$MNT" lockproto=nolock || { fail nbd_remount; exit 1; }
pass nbd_remount
check nbd_reread_big cmp "$T/big" "$MNT/big"
check nbd_reread_tree diff -r "$UCFS_TOP/blockdev" "$MNT/src"
check nbd_reread_small sh -c "[ \"\$(cat '$MNT/a/b/c/f137')\" = 137 ]"
check nbd_count_small sh -c "[ \$(ls '$MNT/a/b/c' | wc -l) -eq 200 ]"
check nbd_rm rm -rf "$MNT/src"
check nbd_umount2 fs_umount "$MNT"

check nbd_fsck_used "$B/fsck.ucfs" -n "$URI"
if srv_stop; then pass nbd_server_stop; else fail nbd_server_stop; fi
# The bytes went to the image through NBD: it checks clean as a file.
check nbd_fsck_image "$B/fsck.ucfs" -n "$IMG"

# No server behind the URI: clear errors, no hang.
check nbd_mkfs_no_server sh -c "! timeout 20 '$B/mkfs.ucfs' -q '$URI'"
check nbd_fsck_no_server sh -c \
	"timeout 20 '$B/fsck.ucfs' -n '$URI'; [ \$? -eq 8 ]"
check nbd_mount_no_server sh -c \
	"! timeout 20 '$B/ucfs' -f -o lockproto=nolock '$URI' '$MNT'"

# The server dies (kill -9) or hangs (SIGSTOP) under a mount: a write
# the cache takes fails at fsync, a create or its fsync fails (EIO or
# ENOTCONN, at once or after io_timeout=2), umount works and the daemon
# exits (status 1: it could not write back), nothing hangs.
URI3="nbd+unix:///?socket=$SOCK&io_timeout=2"
UP=""
on_exit '[ -n "$UP" ] && kill -9 "$UP"'
on_exit 'mountpoint -q "$MNT" && umount -l "$MNT"'
for how in KILL STOP; do
	srv_start || { fail "nbd_dies_$how" "no server"; continue; }
	"$B/ucfs" -f -o lockproto=nolock "$URI3" "$MNT" 2>"$T/dies.err" &
	UP=$!
	if ! wait_for 10 mountpoint -q "$MNT"; then
		fail "nbd_dies_${how}_mount" "$(cat "$T/dies.err")"
		continue
	fi
	check "nbd_dies_${how}_synced" sh -c \
		"echo before >'$MNT/before' && sync '$MNT/before'"
	kill -"$how" "$SRV"
	srv_dead "$how" || fail "nbd_dies_${how}_server_stopped"
	t0=$(date +%s)
	# "before" is cached: the write needs no read and is taken, and
	# its fsync must fail. A new file: its create or its fsync fails.
	check "nbd_dies_${how}_write_cached" sh -c "echo x >>'$MNT/before'"
	check "nbd_dies_${how}_fsync_eio" sh -c "! sync '$MNT/before'"
	check "nbd_dies_${how}_create_eio" \
		sh -c "echo x >'$MNT/after'; ! sync '$MNT/after'"
	check "nbd_dies_${how}_umount" umount "$MNT"
	wait "$UP"
	rc=$?
	UP=""
	check "nbd_dies_${how}_daemon_exit" test "$rc" -eq 1
	check "nbd_dies_${how}_bounded" test $(($(date +%s) - t0)) -lt 30
	if [ -n "$SRV" ]; then
		kill -CONT "$SRV"
		kill -9 "$SRV"
		wait "$SRV"
	fi 2>/dev/null
	SRV=""
done
exit 0
