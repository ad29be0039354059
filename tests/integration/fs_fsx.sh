#!/bin/sh
# fs_fsx: the fsx and nscheck random checkers through a mount, a few seeds
# each (UCFS_SEED adds one more), then unmount/remount: the file and the
# tree must be exactly as they were; fsck clean at the end.
# run.sh: long (40 s: the random checkers)
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"

IMG=$T/img MNT=$T/mnt
SEEDS="1 2 3 ${UCFS_SEED:-}"
fs_mkfs "$IMG" 512 || { fail fsx_mkfs; exit 1; }
fs_mount "$IMG" "$MNT" || { fail fsx_mount; exit 1; }

for s in $SEEDS; do
	check "fsx_seed_$s" "$B/tests/fsx" --seed "$s" --ops 4000 \
		--direct-every 1000 "$MNT/fsx.$s"
done
check fsx_5GiB_offset "$B/tests/fsx" --seed 11 --ops 2000 \
	--base $((5 << 30)) "$MNT/fsx.big"
for s in $SEEDS; do
	mkdir -p "$MNT/ns.$s"
	check "nscheck_seed_$s" "$B/tests/nscheck" --seed "$s" --ops 4000 \
		--quiet "$MNT/ns.$s"
done

snap() {	# checksums + tree listing of everything under the mount
	(cd "$MNT" && find . -printf '%p %y %m %n %s %l\n' | LC_ALL=C sort &&
		find . -type f -exec md5sum {} + | LC_ALL=C sort)
}
snap >"$T/before"
check fsx_umount fs_umount "$MNT"
fs_mount "$IMG" "$MNT" || { fail fsx_remount; exit 1; }
snap >"$T/after"
check fsx_state_survives_remount cmp "$T/before" "$T/after"
check fsx_umount_final fs_umount "$MNT"
check fsx_fsck fs_fsck "$IMG"
