#!/bin/sh
# fs_tree: extract a real source tree (linux-source-6.1/include, several
# thousand files; /usr/include if the kernel tarball is missing) into a
# mount, compare contents (diff -r) and metadata (type, mode, size, mtime,
# symlink target) with the source, unmount, remount and compare again,
# then rm -rf and check the space came back and fsck is clean.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"

IMG=$T/img MNT=$T/mnt REF=$T/ref
KTAR=/usr/src/linux-source-6.1.tar.xz

mkdir -p "$REF"
if [ -f "$KTAR" ]; then
	xz -dc "$KTAR" | tar -x -C "$REF" linux-source-6.1/include ||
		{ fail tree_source "extract $KTAR"; exit 1; }
else
	tar -C /usr -cf - include | tar -C "$REF" -xf -
fi
nfiles=$(find "$REF" | wc -l)
echo "source tree: $nfiles entries, $(du -sk "$REF" | cut -f1) KiB"

# one line per object: mtime(s) type mode size path -> link-target
# (directory sizes are filesystem-specific: not compared)
listing() {
	(cd "$1" && { find . ! -type d -printf '%T@ %y %m %s %p -> %l\n'
		find . -mindepth 1 -type d -printf '%T@ %y %m - %p\n'; } |
		sed 's/^\([0-9]*\)\.[0-9]* /\1 /' | LC_ALL=C sort)
}
listing "$REF" >"$T/ref.list"

fs_mkfs "$IMG" 1024 || { fail tree_mkfs; exit 1; }
fs_mount "$IMG" "$MNT" || { fail tree_mount; exit 1; }
df0=$(stat -f -c '%a' "$MNT")

mkdir "$MNT/t"
check tree_untar sh -c "tar -C '$REF' -cf - . | tar -C '$MNT/t' -xpf -"
check tree_diff diff -r "$REF" "$MNT/t"
listing "$MNT/t" >"$T/mnt.list"
check tree_metadata diff "$T/ref.list" "$T/mnt.list"
check tree_du sh -c "test \$(du -s '$MNT' | cut -f1) -gt 0"

check tree_umount fs_umount "$MNT"
if [ "$UCFS_TEST_TARGET" = ucfs ]; then
	check tree_fsck_after_untar fs_fsck "$IMG"
fi
fs_mount "$IMG" "$MNT" || { fail tree_remount; exit 1; }
check tree_diff_after_remount diff -r "$REF" "$MNT/t"
listing "$MNT/t" >"$T/mnt2.list"
check tree_metadata_after_remount diff "$T/ref.list" "$T/mnt2.list"

check tree_rm_rf rm -rf "$MNT/t"
check tree_gone_after_rm sh -c "test ! -e '$MNT/t'"
sync
df1=$(stat -f -c '%a' "$MNT")
# every block came back (allow a few for directories' own growth)
check tree_space_returned sh -c "test $df1 -ge $((df0 - 64))"
echo "free blocks before $df0, after rm -rf $df1"
check tree_umount_final fs_umount "$MNT"
check tree_fsck_final fs_fsck "$IMG"
