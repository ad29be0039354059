#!/bin/sh
# pt_posix: the POSIX integration tests through the pass-through lens
# (ucfs -o passthrough over an ext4 loop mount, fusefs/MOUNT.md): the
# ns_posix checks (I/O, O_DIRECT, mmap, fallocate, names, rename flags,
# times, xattrs, permissions as an ordinary user with allow_other, setgid,
# sticky, suid clearing, ACLs, readdir), then the fs_* scripts unchanged,
# mounted through fslib's "pt" target: rename/link edge cases with exact
# errnos, permissions as uid 65534, xattrs and ACLs, sparse files past
# 4 GiB. Test names get a "pt_" prefix. Needs root and /dev/fuse.
. "$UCFS_TOP/tests/lib.sh"
UCFS_TEST_TARGET=pt
. "$UCFS_TOP/tests/fslib.sh"

if [ "$(id -u)" -ne 0 ] || [ ! -c /dev/fuse ]; then
	skip pt_posix "needs root and /dev/fuse"
	exit 0
fi

IMG=$T/img MNT=$T/mnt
chmod 755 "$T"
fs_mkfs "$IMG" 512 || { fail pt_mkfs; exit 1; }
fs_mount "$IMG" "$MNT" allow_other,suid,dev || { fail pt_mount; exit 1; }
pass pt_mount
chmod 755 "$MNT"
"$B/tests/ns_posix" "$MNT" | sed 's/^\(PASS\|FAIL\|SKIP\) /\1 pt_/'
check pt_umount fs_umount "$MNT"
check pt_fsck fs_fsck "$IMG"

for t in fs_rename fs_perm fs_xattr fs_sparse; do
	UCFS_TEST_TARGET=pt sh "$UCFS_TOP/tests/integration/$t.sh" 2>&1 |
		sed 's/^\(PASS\|FAIL\|SKIP\) /\1 pt_/' >"$T/$t.out"
	cat "$T/$t.out"
	grep -q '^PASS ' "$T/$t.out" || fail "pt_$t" "no check ran"
done
