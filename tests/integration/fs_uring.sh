#!/bin/sh
# fs_uring: the two ways FUSE requests reach ucfs, each running the same
# work — /dev/fuse (uring=off) and per-CPU io_uring queues (uring=on;
# Linux 6.14+ built with CONFIG_FUSE_IO_URING): a source tree copied and
# compared with diff -r, 3 MiB written with O_DIRECT and read back, a
# rename and an unlink, the stats naming the transport that served them;
# uring=auto uses io_uring once the kernel parameter is on; a remount over
# /dev/fuse still sees both trees; fsck is clean; the kernel parameter
# is put back as it was.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
fs_require_ucfs || exit 0

IMG=$T/img MNT=$T/mnt
PARAM=/sys/module/fuse/parameters/enable_uring
fs_mkfs "$IMG" 256 || { fail uring_mkfs; exit 1; }
# uring=on sets the kernel's parameter; put back what it was
if [ -e "$PARAM" ]; then
	old=$(cat "$PARAM")
	on_exit "echo '$old' >'$PARAM'"
fi
dd if=/dev/urandom of="$T/rand" bs=1M count=3 status=none

stat_of() { "$B/ucfs-stat" --json "$MNT" | jq -r "$1"; }
work() {	# DIR
	mkdir "$MNT/$1" &&
	cp -a "$UCFS_TOP/fusefs" "$MNT/$1/src" &&
	diff -r "$UCFS_TOP/fusefs" "$MNT/$1/src" &&
	dd if="$T/rand" of="$MNT/$1/big" bs=1M oflag=direct status=none &&
	cmp "$T/rand" "$MNT/$1/big" &&
	mv "$MNT/$1/big" "$MNT/$1/big2" && rm "$MNT/$1/src/fs.h" &&
	test ! -e "$MNT/$1/src/fs.h" && cmp "$T/rand" "$MNT/$1/big2"
}

for mode in off on; do
	if [ $mode = on ] && [ ! -e "$PARAM" ]; then
		skip uring_on "this kernel has no FUSE over io_uring ($PARAM)"
		continue
	fi
	want=dev
	[ $mode = on ] && want=io_uring
	fs_mount "$IMG" "$MNT" "uring=$mode" || { fail uring_${mode}_mount; continue; }
	check uring_${mode}_work work $mode
	check uring_${mode}_transport test "$(stat_of .transport.name)" = $want
	if [ $mode = on ]; then
		check uring_on_ring_requests test "$(stat_of .transport.ring_requests)" -gt 100
	else
		check uring_off_no_ring_requests test "$(stat_of .transport.ring_requests)" -eq 0
	fi
	check uring_${mode}_killpriv_v2 test "$(stat_of .transport.killpriv_v2)" = true
	check uring_${mode}_umount fs_umount "$MNT"
done

# uring=auto follows the parameter: on after uring=on set it
if [ -e "$PARAM" ]; then
	fs_mount "$IMG" "$MNT" "uring=auto" || fail uring_auto_mount
	check uring_auto_follows_param test "$(stat_of .transport.name)" = io_uring
	check uring_auto_umount fs_umount "$MNT"
fi

# each tree again, over /dev/fuse
fs_mount "$IMG" "$MNT" "uring=off" || { fail uring_remount; exit 1; }
for mode in off on; do
	[ -d "$MNT/$mode" ] || continue
	check uring_${mode}_after_remount sh -c \
		"diff -r -x fs.h '$UCFS_TOP/fusefs' '$MNT/$mode/src' && cmp '$T/rand' '$MNT/$mode/big2'"
done
check uring_final_umount fs_umount "$MNT"
check uring_fsck fs_fsck "$IMG"
