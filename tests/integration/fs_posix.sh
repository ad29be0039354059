#!/bin/sh
# fs_posix.sh — POSIX behaviour of a ucfs mount through real FUSE: runs
# tests/progs/ns_posix.c (pread/pwrite/O_APPEND, truncate, fallocate,
# sparse > 4 GiB, unlink while open, O_DIRECT, shared mmap, names, rename
# flags, times, xattrs, permissions as an ordinary user with allow_other,
# setgid dirs, sticky bit, suid clearing, ACLs, readdir), then ENOSPC
# (the filesystem keeps working), a read-only mount, and remount checks.
# Needs root and /dev/fuse (SKIP otherwise).
. "$UCFS_TOP/tests/lib.sh"

if [ "$(id -u)" -ne 0 ] || [ ! -c /dev/fuse ]; then
	skip fs_posix "needs root and /dev/fuse"
	exit 0
fi

IMG=$T/img
MNT=$T/mnt
mkdir -p "$MNT"
chmod 755 "$T"
truncate -s 256M "$IMG"
check mkfs "$B/mkfs.ucfs" -J 8 "$IMG"

PID=""
mount_fs() {	# $1 = test name, $2 = options
	"$B/ucfs" -f -o "$2" "$IMG" "$MNT" 2>"$T/ucfs.err" &
	PID=$!
	if wait_for 10 mountpoint -q "$MNT"; then
		pass "$1"
	else
		fail "$1" "$(cat "$T/ucfs.err")"
		exit 1
	fi
}
umount_fs() {
	umount "$MNT" && wait "$PID"
	_rc=$?
	PID=""
	if [ "$_rc" -eq 0 ]; then pass "$1"; else fail "$1" "rc $_rc"; fi
}
on_exit 'mountpoint -q "$MNT" && umount "$MNT"; [ -n "$PID" ] && kill "$PID"'

mount_fs mount "allow_other,suid,dev"
chmod 755 "$MNT"
"$B/tests/ns_posix" "$MNT"

# ENOSPC: fill, get a clean error, delete, keep working
check enospc sh -c "! dd if=/dev/zero of='$MNT/fill' bs=1M count=400 status=none 2>'$T/dd.err' && grep -q 'No space left' '$T/dd.err'"
check enospc_still_works sh -c "echo ok > '$MNT/after_full' 2>/dev/null || rm -f '$MNT/fill'; rm -f '$MNT/fill' && echo ok > '$MNT/after_full' && [ \"\$(cat '$MNT/after_full')\" = ok ]"
check enospc_space_back sh -c "dd if=/dev/zero of='$MNT/fill2' bs=1M count=100 status=none && rm '$MNT/fill2'"
umount_fs umount

mount_fs mount_ro "ro"
check ro_read sh -c "[ \"\$(cat '$MNT/after_full')\" = ok ]"
check ro_write_erofs sh -c "! touch '$MNT/new' 2>'$T/ro.err' && grep -q 'Read-only' '$T/ro.err'"
umount_fs umount_ro

mount_fs remount "noatime"
check remount_xattr sh -c "[ \"\$(getfattr --only-values -n trusted.b '$MNT/xa')\" = 22 ]"
check remount_sparse_gone sh -c "! test -e '$MNT/big'"
check remount_readdir sh -c "[ \$(ls '$MNT/rd' | wc -l) -eq 300 ]"
umount_fs umount2
