#!/bin/sh
# fs_enospc_strict: write(2) itself must return ENOSPC on a full
# filesystem (not only the later fsync/close, as with the opt-in
# writeback_cache), a writer without a size limit must stop, and a file
# whose writes failed must not end up longer than the data stored.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"

IMG=$T/img MNT=$T/mnt
fs_mkfs "$IMG" 48 -J 4 -r 16 || { fail strict_mkfs; exit 1; }
fs_mount "$IMG" "$MNT" || { fail strict_mount; exit 1; }
timeout 60 dd if=/dev/urandom of="$MNT/r" bs=1M count=100 2>"$T/dd.err"
cat "$T/dd.err"
check strict_write_returns_enospc sh -c "grep 'No space left' '$T/dd.err' | grep -vq closing"
check strict_size_within_capacity test "$(stat -c %s "$MNT/r")" -le $((48 << 20))
check strict_umount fs_umount "$MNT"
fs_mount "$IMG" "$MNT" || { fail strict_remount; exit 1; }
sz=$(stat -c %s "$MNT/r"); du=$(du -k "$MNT/r" | cut -f1)
echo "after remount: size $sz, allocated ${du} KiB"
check strict_no_hole_after_failed_writes test "$sz" -le $((du * 1024))
rm -f "$MNT/r"
# an unbounded writer must get ENOSPC and stop, not write into a cache
timeout 60 dd if=/dev/zero of="$MNT/z" bs=1M 2>"$T/dd2.err"
rc=$?
cat "$T/dd2.err"
check strict_unbounded_writer_stops test "$rc" -ne 124
check strict_unbounded_writer_enospc grep -q 'No space left' "$T/dd2.err"
check strict_umount_final fs_umount "$MNT"
check strict_fsck fs_fsck "$IMG"
