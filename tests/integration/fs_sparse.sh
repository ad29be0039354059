#!/bin/sh
# fs_sparse: sparse files and files larger than 4 GiB: write at 5 GiB,
# size and du (small), data back, holes read as zeros, truncate down and
# up across the 4 GiB boundary, a hole punched, everything again after a
# remount, fsck clean.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"

IMG=$T/img MNT=$T/mnt
fs_mkfs "$IMG" 256 || { fail sparse_mkfs; exit 1; }
fs_mount "$IMG" "$MNT" || { fail sparse_mount; exit 1; }
F=$MNT/sparse
G5=$((5 << 30))

head -c 1048576 /dev/urandom >"$T/chunk"
check sparse_write_at_5GiB dd if="$T/chunk" of="$F" bs=1M seek=5120 \
	conv=notrunc status=none
check sparse_size test "$(stat -c %s "$F")" = $((G5 + 1048576))
check sparse_du_small test "$(du -k "$F" | cut -f1)" -lt 4096
check sparse_data_back sh -c "dd if='$F' bs=1M skip=5120 status=none | cmp - '$T/chunk'"
check sparse_hole_zero sh -c "dd if='$F' bs=1M skip=4000 count=4 status=none | cmp - /dev/zero 2>&1 | grep -q EOF"
check sparse_hole_at_4GiB sh -c "dd if='$F' bs=4096 skip=1048575 count=2 status=none | cmp -n 8192 - /dev/zero"
# a small write in the middle of the hole, across the 4 GiB boundary
printf 'across4G' >"$T/mark"
check sparse_write_across_4GiB dd if="$T/mark" of="$F" bs=1 \
	seek=$(((4 << 30) - 4)) conv=notrunc status=none
check sparse_read_across_4GiB sh -c "test \"\$(dd if='$F' bs=1 skip=$(((4 << 30) - 4)) count=8 status=none)\" = across4G"
# truncate down below 4 GiB and up again: the tail reads as zeros
check sparse_truncate_down truncate -s $(((4 << 30) + 2)) "$F"
check sparse_truncated_size test "$(stat -c %s "$F")" = $(((4 << 30) + 2))
check sparse_truncate_up truncate -s $((6 << 30)) "$F"
check sparse_old_data_gone sh -c "dd if='$F' bs=1M skip=5120 count=1 status=none | cmp - /dev/zero 2>&1 | grep -q EOF"
check sparse_kept_prefix sh -c "test \"\$(dd if='$F' bs=1 skip=$(((4 << 30) - 4)) count=6 status=none)\" = across"
# punch a hole into real data (EOPNOTSUPP is an allowed answer)
check sparse_dense_write dd if="$T/chunk" of="$MNT/dense" bs=1M count=1 status=none
if fallocate -p -o 4096 -l 65536 "$MNT/dense" 2>"$T/punch.err"; then
	check sparse_punched_zero sh -c "dd if='$MNT/dense' bs=4096 skip=1 count=16 status=none | cmp - /dev/zero 2>&1 | grep -q EOF"
	check sparse_punch_keeps_rest sh -c "cmp -i 69632 '$MNT/dense' '$T/chunk'"
elif grep -q 'not supported' "$T/punch.err"; then
	skip sparse_punch "punch hole returns EOPNOTSUPP"
else
	fail sparse_punch "$(cat "$T/punch.err")"
fi
check sparse_umount fs_umount "$MNT"
fs_mount "$IMG" "$MNT" || { fail sparse_remount; exit 1; }
check sparse_size_after_remount test "$(stat -c %s "$F")" = $((6 << 30))
check sparse_content_after_remount sh -c "test \"\$(dd if='$F' bs=1 skip=$(((4 << 30) - 4)) count=6 status=none)\" = across"
check sparse_tail_after_remount sh -c "dd if='$F' bs=1M skip=6140 status=none | cmp - /dev/zero 2>&1 | grep -q EOF"
check sparse_dense_after_remount sh -c "cmp -i 69632 '$MNT/dense' '$T/chunk'"
check sparse_du_after_remount test "$(du -k "$F" | cut -f1)" -lt 4096
check sparse_rm rm "$F" "$MNT/dense"
check sparse_umount_final fs_umount "$MNT"
check sparse_fsck fs_fsck "$IMG"
