#!/bin/sh
# fs_seek: SEEK_DATA/SEEK_HOLE through FUSE lseek. A 100 MiB file with
# ten 1 MiB data chunks (90% holes, one of them preallocated: unwritten
# counts as a hole): lseek answers from the extent map; after a remount
# (cold caches) `cp --sparse=always` and `tar -S` read only the data:
# device read bytes (blockdev.read.bytes) stay near 10 MiB, the daemon's
# logical read bytes (namespace.data_read_bytes) well below 100 MiB (the
# kernel reads ahead into holes); the copies
# are identical and sparse. fsck clean at the end.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
fs_require_ucfs seek_stats

IMG=$T/img MNT=$T/mnt F=$T/mnt/sparse
MB=1048576
fs_mkfs "$IMG" 512 || { fail seek_mkfs; exit 1; }
fs_mount "$IMG" "$MNT" || { fail seek_mount; exit 1; }

stat_of() {	# JSON path of the mount's stats
	"$B/ucfs-stat" --json "$MNT" | jq -r "$1"
}

head -c $MB /dev/urandom >"$T/chunk"
for i in 0 1 2 3 4 5 6 7 8 9; do
	dd if="$T/chunk" of="$F" bs=1M seek=$((i * 10)) conv=notrunc \
		status=none || fail seek_write_$i
done
truncate -s $((100 * MB)) "$F"
check seek_prealloc fallocate -o $((3 * MB)) -l $((4 * MB)) "$F"

expect() {	# NAME OP OFF WANT
	got=$("$B/tests/fileop" "$2" "$F" "$3")
	if [ "$got" = "$4" ]; then pass "$1"; else fail "$1" "got $got"; fi
}
expect seek_data_at_0 seek_data 0 0
expect seek_hole_at_0 seek_hole 0 $MB
expect seek_data_skips_hole seek_data $MB $((10 * MB))
expect seek_data_skips_unwritten seek_data $((3 * MB)) $((10 * MB))
expect seek_hole_in_unwritten seek_hole $((4 * MB)) $((4 * MB))
expect seek_data_inside seek_data $((10 * MB + 5)) $((10 * MB + 5))
expect seek_hole_end seek_hole $((90 * MB)) $((91 * MB))
expect seek_data_after_last seek_data $((91 * MB)) ENXIO
expect seek_past_eof seek_hole $((100 * MB)) ENXIO

# the data read by a sparse-aware copy, from a cold mount
copy_reads() {	# NAME COMMAND...
	name=$1
	shift
	if ! fs_umount "$MNT" || ! fs_mount "$IMG" "$MNT"; then
		fail "${name}_remount"
		return
	fi
	l0=$(stat_of .namespace.data_read_bytes)
	d0=$(stat_of .blockdev.read.bytes)
	check "${name}_runs" "$@"
	l1=$(stat_of .namespace.data_read_bytes)
	d1=$(stat_of .blockdev.read.bytes)
	echo "$name: read $(((l1 - l0) / 1024)) KiB through the daemon," \
		"$(((d1 - d0) / 1024)) KiB from the device (data: 10240 KiB)"
	# the kernel's readahead reads past each chunk into the hole (from
	# the daemon, not the device): without SEEK_DATA all 100 MiB
	check "${name}_skips_holes" test $((l1 - l0)) -le $((50 * MB))
	check "${name}_device_reads_data_only" \
		test $((d1 - d0)) -le $((12 * MB))
}
copy_reads cp_sparse cp --sparse=always "$F" "$T/copy"
check cp_sparse_same cmp "$F" "$T/copy"
check cp_sparse_copy_sparse test "$(du -k "$T/copy" | cut -f1)" -lt 40000
copy_reads tar_sparse tar -S -cf "$T/t.tar" -C "$MNT" sparse
mkdir -p "$T/x"
check tar_extract tar -xf "$T/t.tar" -C "$T/x"
check tar_sparse_same cmp "$F" "$T/x/sparse"
check seek_umount fs_umount "$MNT"
check seek_fsck fs_fsck "$IMG"
