#!/bin/sh
# fs_uring: the two ways FUSE requests reach ucfs, each running the same
# work — /dev/fuse (uring=off) and per-CPU io_uring queues (uring=on;
# Linux 6.14+ built with CONFIG_FUSE_IO_URING): a source tree copied and
# compared with diff -r, 3 MiB written with O_DIRECT and read back, a
# rename and an unlink, the stats naming the transport that served them;
# then a remount over the other transport still sees both trees, and
# fsck is clean.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
fs_require_ucfs || exit 0

IMG=$T/img MNT=$T/mnt
PARAM=/sys/module/fuse/parameters/enable_uring
fs_mkfs "$IMG" 256 || { fail uring_mkfs; exit 1; }
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

# each tree again, over the default transport
fs_mount "$IMG" "$MNT" || { fail uring_remount; exit 1; }
for mode in off on; do
	[ -d "$MNT/$mode" ] || continue
	check uring_${mode}_after_remount sh -c \
		"diff -r -x fs.h '$UCFS_TOP/fusefs' '$MNT/$mode/src' && cmp '$T/rand' '$MNT/$mode/big2'"
done
check uring_final_umount fs_umount "$MNT"
check uring_fsck fs_fsck "$IMG"
