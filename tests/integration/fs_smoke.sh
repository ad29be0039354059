#!/bin/sh
# fs_smoke.sh — first end-to-end test of the ucfs daemon through real FUSE:
# mount a fresh image, create/write/read/mkdir/rename/link/symlink/unlink,
# copy a tree, remount, compare, refused options and second mounts,
# unmount. Needs root and /dev/fuse (SKIP otherwise).
. "$UCFS_TOP/tests/lib.sh"

if [ "$(id -u)" -ne 0 ] || [ ! -c /dev/fuse ]; then
	skip fs_smoke "needs root and /dev/fuse"
	exit 0
fi

IMG=$T/img
MNT=$T/mnt
mkdir -p "$MNT"
truncate -s 512M "$IMG"
if [ -x "$B/mkfs.ucfs" ]; then
	check mkfs "$B/mkfs.ucfs" -J 8 "$IMG"
else
	check mkfs "$B/tests/fs_mkimg" "$IMG" 8
fi

MNT2=$T/mnt2
mkdir -p "$MNT2"
PID=""
# Not through check(): the daemon must not inherit a command
# substitution's pipe. PASS/FAIL printed here.
mount_fs() {	# $1 = test name, $2 = extra options
	"$B/ucfs" -f ${2:+-o "$2"} "$IMG" "$MNT" 2>"$T/ucfs.err" &
	PID=$!
	if wait_for 10 mountpoint -q "$MNT"; then
		pass "$1"
	else
		fail "$1" "$(cat "$T/ucfs.err")"
		exit 1
	fi
}
umount_fs() {	# $1 = test name; the daemon must exit 0
	umount "$MNT" && wait "$PID"
	_rc=$?
	PID=""
	if [ "$_rc" -eq 0 ]; then pass "$1"; else fail "$1" "rc $_rc"; fi
}
on_exit 'mountpoint -q "$MNT2" && umount "$MNT2"'
on_exit 'mountpoint -q "$MNT" && umount "$MNT"; [ -n "$PID" ] && kill "$PID"'

mount_fs mount ""
check mounted_type sh -c "grep -q ' $MNT fuse.ucfs ' /proc/mounts"

# basic namespace operations
check write sh -c "printf 'hello world' > '$MNT/a'"
check read sh -c "[ \"\$(cat '$MNT/a')\" = 'hello world' ]"
check append sh -c "printf '!' >> '$MNT/a' && [ \"\$(cat '$MNT/a')\" = 'hello world!' ]"
check mkdir mkdir -p "$MNT/d1/d2"
check rename mv "$MNT/a" "$MNT/d1/d2/b"
check rename_gone sh -c "! test -e '$MNT/a'"
check link ln "$MNT/d1/d2/b" "$MNT/hard"
check link_count sh -c "[ \$(stat -c %h '$MNT/hard') -eq 2 ]"
check symlink ln -s d1/d2/b "$MNT/sym"
check readlink sh -c "[ \"\$(cat '$MNT/sym')\" = 'hello world!' ]"
check big_write dd if=/dev/urandom of="$T/rand" bs=1M count=8 status=none
check big_copy cp "$T/rand" "$MNT/rand"
check big_cmp cmp "$T/rand" "$MNT/rand"
check truncate sh -c "truncate -s 5000 '$MNT/rand' && [ \$(stat -c %s '$MNT/rand') -eq 5000 ]"
check unlink rm "$MNT/hard"
check rmdir_notempty sh -c "! rmdir '$MNT/d1' 2>/dev/null"
check mkfifo mkfifo "$MNT/fifo"
check xattr sh -c "setfattr -n user.k -v v '$MNT/d1/d2/b' && [ \"\$(getfattr --only-values -n user.k '$MNT/d1/d2/b')\" = v ]"
check name_too_long sh -c "! touch '$MNT/$(printf '%0256d' 0)' 2>/dev/null"
check name_255 touch "$MNT/$(printf '%0255d' 0)"
check tree_copy cp -a "$UCFS_TOP/tests" "$UCFS_TOP/fusefs" "$MNT/d1/"
check tree_diff diff -r "$UCFS_TOP/fusefs" "$MNT/d1/fusefs"
check statfs df "$MNT"
check sync sync

# refusals while mounted
check second_mount_refused sh -c "! '$B/ucfs' '$IMG' '$MNT2' 2>'$T/second.err' && grep -q 'already mounted' '$T/second.err'"

umount_fs umount

# a bad option is refused with a message naming it
check bad_option sh -c "! '$B/ucfs' -o foo '$IMG' '$MNT2' 2>'$T/bad.err' && grep -q \"unknown mount option 'foo'\" '$T/bad.err'"
check garbage_image sh -c "truncate -s 64M '$T/junk' && ! '$B/ucfs' '$T/junk' '$MNT2' 2>/dev/null"

# remount (with fstab-style options) and compare again
mount_fs remount "rw,dev,suid,_netdev,defaults,noatime,commit=2"
check remount_data sh -c "[ \"\$(cat '$MNT/d1/d2/b')\" = 'hello world!' ]"
check remount_tree diff -r "$UCFS_TOP/fusefs" "$MNT/d1/fusefs"
check remount_trunc sh -c "[ \$(stat -c %s '$MNT/rand') -eq 5000 ] && cmp -n 5000 '$T/rand' '$MNT/rand'"
check remount_symlink sh -c "[ \"\$(readlink '$MNT/sym')\" = d1/d2/b ]"
check remount_fifo test -p "$MNT/fifo"
check rm_tree rm -rf "$MNT/d1"
umount_fs umount2

# through mount(8) and fuse3's helper (the "fuse" type with PROG#DEVICE
# finds the daemon without installing it), fstab-style options
if command -v mount.fuse3 >/dev/null 2>&1; then
	check mount_helper mount -t fuse "$B/ucfs#$IMG" "$MNT" -o "defaults,_netdev,noatime,nofail,x-systemd.automount"
	check mount_helper_type sh -c "grep -q ' $MNT fuse.ucfs .*noatime' /proc/mounts"
	check mount_helper_data sh -c "[ \"\$(cat '$MNT/d1/d2/b' 2>/dev/null || echo gone)\" = gone ]"
	check mount_helper_umount umount "$MNT"
	check mount_helper_bad_option sh -c "! mount -t fuse '$B/ucfs#$IMG' '$MNT' -o bogus 2>'$T/mh.err' && grep -q \"unknown mount option 'bogus'\" '$T/mh.err'"
	check mount_helper_not_mounted sh -c "! mountpoint -q '$MNT'"
else
	skip mount_helper "mount.fuse3 not installed"
fi
if [ -x "$B/fsck.ucfs" ]; then
	check fsck "$B/fsck.ucfs" -n "$IMG"
fi
