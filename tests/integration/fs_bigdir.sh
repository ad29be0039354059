#!/bin/sh
# fs_bigdir: one directory with 20,000 entries (UCFS_BIGDIR_N to change):
# create them, stat a sample, readdir count (no duplicates, none missing),
# fsck clean, the same after a remount, delete every entry, fsck clean.
# 20,000 names fill about 320 leaves of the directory's B+tree: more than
# its root in the inode can point to, so the root is two levels above the
# leaves (checked: the full tree fsck walks has interior nodes).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"

IMG=$T/img MNT=$T/mnt
N=${UCFS_BIGDIR_N:-20000}
fs_mkfs "$IMG" 1024 || { fail bigdir_mkfs; exit 1; }
fs_mount "$IMG" "$MNT" || { fail bigdir_mount; exit 1; }
D=$MNT/big
mkdir "$D"

# names of varying length so the tree holds varying value sizes
seq -f 'entry-%06g' 1 "$N" | awk '{ print $0 (NR % 7 ? "" : "-a-longer-name-for-some-entries") }' >"$T/names"
start=$(date +%s)
check bigdir_create sh -c "cd '$D' && xargs touch <'$T/names'"
echo "created $N entries in $(( $(date +%s) - start ))s"

check bigdir_stat_sample sh -c "cd '$D' && awk 'NR % 997 == 1' '$T/names' | xargs stat -c %n >/dev/null"
check bigdir_missing_enoent sh -c "! stat '$D/entry-999999x' 2>/dev/null"

count_check() {	# readdir must return each name exactly once
	ls -f "$D" | grep -v '^\.\.\?$' | LC_ALL=C sort >"$T/listed"
	LC_ALL=C sort "$T/names" | cmp - "$T/listed"
}
check bigdir_readdir_exact count_check
check bigdir_nlink test "$(stat -c %h "$D")" = 2

INO=$(stat -c %i "$D")
check bigdir_umount fs_umount "$MNT"
# the root node's level (fusefs/FORMAT.md: inode block = ino, the root
# node at byte 256, its header's first u16)
if [ "$(fs_target)" = ucfs ]; then
	check bigdir_tree_interior test "$(od -An -tu2 -j $((INO * 4096 + 256)) \
		-N2 "$IMG")" -ge 2
fi
# the full tree (interior nodes, key 0 above child 0's keys) checks clean
check bigdir_fsck_full fs_fsck "$IMG"
fs_mount "$IMG" "$MNT" || { fail bigdir_remount; exit 1; }
check bigdir_readdir_after_remount count_check

# delete half by name, then the rest with rm -rf (readdir while deleting)
check bigdir_unlink_half sh -c "cd '$D' && awk 'NR % 2' '$T/names' | xargs rm"
check bigdir_count_half test "$(ls -f "$D" | grep -vc '^\.\.\?$')" = $((N / 2))
start=$(date +%s)
check bigdir_rm_rf rm -rf "$D"
echo "deleted the rest in $(( $(date +%s) - start ))s"
check bigdir_gone test ! -e "$D"
check bigdir_umount_final fs_umount "$MNT"
check bigdir_fsck fs_fsck "$IMG"
