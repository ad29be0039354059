#!/bin/sh
# fs_copy: copy_file_range inside the daemon. `cp` of an 8 MiB file
# (coreutils 9 copies a dense file with copy_file_range): identical, and
# its data never crossed the kernel (no FUSE read or write of it:
# namespace.copy_bytes counts it instead) and it shares the source's
# blocks (reflink; a write copies on write); FICLONE is refused by the
# kernel's FUSE (cp --reflink=always fails); a 20 MiB source with holes
# copied with copy_file_range keeps its holes; a copy into the middle of
# another file at unaligned offsets; remount; fsck.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
fs_require_ucfs copy_stats

IMG=$T/img MNT=$T/mnt
MB=1048576
fs_mkfs "$IMG" 256 || { fail copy_mkfs; exit 1; }
fs_mount "$IMG" "$MNT" || { fail copy_mount; exit 1; }

stat_of() { "$B/ucfs-stat" --json "$MNT" | jq -r "$1"; }

head -c $((8 * MB)) /dev/urandom >"$T/data"
cp "$T/data" "$MNT/dense"
dd if="$T/data" of="$MNT/src" bs=1M count=2 status=none
dd if="$T/data" of="$MNT/src" bs=1M skip=2 seek=12 count=2 status=none
truncate -s $((20 * MB)) "$MNT/src"
sync "$MNT/src"
# cp (coreutils 9) copies a dense file with copy_file_range
r0=$(stat_of .fuse.ops.read.count)
w0=$(stat_of .fuse.ops.write.count)
c0=$(stat_of .namespace.copy_bytes)
check copy_cp cp "$MNT/dense" "$MNT/dense2"
check copy_in_daemon test $(($(stat_of .namespace.copy_bytes) - c0)) \
	-eq $((8 * MB))
check copy_no_fuse_read test "$(stat_of .fuse.ops.read.count)" -eq "$r0"
check copy_no_fuse_write test "$(stat_of .fuse.ops.write.count)" -eq "$w0"
check copy_same cmp "$T/data" "$MNT/dense2"
# the copy shares the blocks (reflink through copy_file_range): little
# space used, and a write into it copies on write, the source unchanged
check copy_shares test "$(stat_of .namespace.clone_bytes)" -eq $((8 * MB))
printf 'cow!' | dd of="$MNT/dense2" bs=1 seek=5000 conv=notrunc status=none
check copy_cow_source_intact cmp "$T/data" "$MNT/dense"
check copy_cow_dest_changed sh -c "! cmp -s '$T/data' '$MNT/dense2'"
check copy_cow_counted test "$(stat_of .namespace.cow_blocks)" -ge 1
# FICLONE (cp --reflink=always): Linux's FUSE does not forward it
r=$("$B/tests/fileop" clone "$MNT/dense" "$MNT/ficlone")
echo "FICLONE through FUSE: $r"
check ficlone_refused_or_right sh -c "test '$r' = EOPNOTSUPP ||
	cmp '$MNT/dense' '$MNT/ficlone'"
# a sparse source (cp reads those itself): holes stay holes
got=$("$B/tests/fileop" copy_range "$MNT/src" 0 "$MNT/dst" 0 $((30 * MB)))
check copy_sparse_count test "$got" = $((20 * MB))
check copy_sparse_same cmp "$MNT/src" "$MNT/dst"
check copy_keeps_holes test "$(du -k "$MNT/dst" | cut -f1)" -le 5000

# into the middle of an existing file, at unaligned offsets
head -c $((3 * MB)) /dev/urandom >"$T/other"
cp "$T/other" "$MNT/other"
got=$("$B/tests/fileop" copy_range "$MNT/src" 12345 "$MNT/other" 777 \
	$((2 * MB)))
check copy_range_count test "$got" = $((2 * MB))
{ head -c 777 "$T/other"; tail -c +12346 "$MNT/src" | head -c $((2 * MB))
  tail -c +$((777 + 2 * MB + 1)) "$T/other"; } >"$T/want"
check copy_range_content cmp "$MNT/other" "$T/want"
got=$("$B/tests/fileop" copy_range "$MNT/src" $((20 * MB)) "$MNT/other" 0 10)
check copy_range_at_eof test "$got" = 0
fs_umount "$MNT" && fs_mount "$IMG" "$MNT" || { fail copy_remount; exit 1; }
check copy_same_after_remount cmp "$MNT/src" "$MNT/dst"
check copy_range_after_remount cmp "$MNT/other" "$T/want"
check copy_umount fs_umount "$MNT"
check copy_fsck fs_fsck "$IMG"
