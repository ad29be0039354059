#!/bin/sh
# fs_enospc: fill a small filesystem until ENOSPC (one big file, then many
# small files for the inodes and directory blocks), check the failure is
# clean (the error is ENOSPC, files written before are intact, df shows
# it full), delete, write again, unmount, fsck clean.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"

IMG=$T/img MNT=$T/mnt
if [ "$UCFS_TEST_TARGET" = ucfs ]; then
	fs_mkfs "$IMG" 48 -J 4 -r 16 || { fail enospc_mkfs; exit 1; }
else
	fs_mkfs "$IMG" 48 || { fail enospc_mkfs; exit 1; }
fi
fs_mount "$IMG" "$MNT" || { fail enospc_mount; exit 1; }

head -c 1048576 /dev/urandom >"$T/chunk"
check enospc_first_file cp "$T/chunk" "$MNT/keep"
mkdir "$MNT/small"
echo data >"$T/small"
# 100 MiB into 48: ENOSPC must come (at write or, with the FUSE
# writeback cache, at close); a count keeps dd finite either way
timeout 120 dd if=/dev/zero of="$MNT/fill" bs=1M count=100 2>"$T/dd.err"
check enospc_dd_fails_with_enospc grep -q 'No space left on device' "$T/dd.err"
check enospc_df_full test "$(stat -f -c %a "$MNT")" -lt 64
check enospc_keep_intact cmp "$MNT/keep" "$T/chunk"
check enospc_rm_fill rm -f "$MNT/fill"
# then many small files until ENOSPC (inode and directory blocks), with
# most of the space taken by a 30 MiB file so that it comes soon
check enospc_fill2 dd if=/dev/zero of="$MNT/fill" bs=1M count=30 status=none
i=0 err=
while [ $i -lt 20000 ]; do
	if ! timeout 20 cp "$T/small" "$MNT/small/f$i" 2>"$T/small.err"; then
		err=$(cat "$T/small.err")
		break
	fi
	i=$((i + 1))
done
echo "small files written at ENOSPC: $i"
check enospc_small_files_enospc sh -c "echo '$err' | grep -q 'No space left'"
check enospc_small_files_some test "$i" -gt 100
check enospc_small_files_readable sh -c "cat '$MNT'/small/f1 '$MNT'/small/f$((i - 1)) | grep -c data | grep -q 2"
check enospc_sync sync
check enospc_rm_all rm -rf "$MNT/fill" "$MNT/small"
sync
check enospc_space_back test "$(stat -f -c %a "$MNT")" -gt 2048
check enospc_write_again dd if=/dev/zero of="$MNT/again" bs=1M count=8 status=none
check enospc_keep_still_intact cmp "$MNT/keep" "$T/chunk"
check enospc_umount fs_umount "$MNT"
check enospc_fsck fs_fsck "$IMG"
fs_mount "$IMG" "$MNT" || { fail enospc_remount; exit 1; }
check enospc_after_remount cmp "$MNT/keep" "$T/chunk"
check enospc_umount_final fs_umount "$MNT"
