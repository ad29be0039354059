#!/bin/sh
# fs_xattr: extended attributes and POSIX ACLs through a mount: set, get,
# list, replace, remove, create/replace flags, values up to 1 KiB, many
# names; ACLs with setfacl/getfacl (the mode mirrors the ACL), default
# ACLs inherited by new files and directories; all of it after a remount;
# fsck clean.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"

IMG=$T/img MNT=$T/mnt OP=$B/tests/fsop
fs_mkfs "$IMG" 256 || { fail xattr_mkfs; exit 1; }
fs_mount "$IMG" "$MNT" || { fail xattr_mount; exit 1; }
cd "$MNT" || exit 1
touch f; mkdir d

check xattr_set setfattr -n user.color -v blue f
check xattr_get test "$(getfattr --only-values -n user.color f)" = blue
check xattr_replace setfattr -n user.color -v red f
check xattr_get_replaced test "$(getfattr --only-values -n user.color f)" = red
check xattr_create_flag_exists test "$("$OP" setxattr f user.color x create)" = EEXIST
check xattr_replace_flag_missing test "$("$OP" setxattr f user.none x replace)" = ENODATA
check xattr_missing sh -c "! getfattr -n user.none f 2>/dev/null"
v1k=$(head -c 1024 /dev/zero | tr '\0' v)
check xattr_1KiB_value setfattr -n user.big -v "$v1k" f
check xattr_1KiB_back test "$(getfattr --only-values -n user.big f)" = "$v1k"
check xattr_many sh -c 'for i in $(seq 1 20); do setfattr -n user.k$i -v val$i d || exit 1; done'
check xattr_list_count test "$(getfattr -d -m '^user\.' d | grep -c '^user\.k')" = 20
check xattr_remove setfattr -x user.k7 d
check xattr_removed sh -c "! getfattr -n user.k7 d 2>/dev/null"
check xattr_trusted setfattr -n trusted.t -v tv f

# ACLs
check acl_set setfacl -m u:nobody:rwx,g::r-x,m::rwx f
check acl_get sh -c "getfacl -c f 2>/dev/null | grep -q '^user:nobody:rwx'"
check acl_mode_mirrors_mask test "$(stat -c %A f | cut -c5-7)" = rwx
check acl_chmod_updates_mask sh -c "chmod g-w f && getfacl -c f 2>/dev/null | grep -q '^mask::r-x'"
check acl_default_set setfacl -d -m u:nobody:rw-,g::r-x,o::- d
touch d/child; mkdir d/subdir
check acl_inherited_file sh -c "getfacl -c d/child 2>/dev/null | grep -q '^user:nobody:rw-'"
check acl_inherited_dir_default sh -c "getfacl -c d/subdir 2>/dev/null | grep -q '^default:user:nobody:rw-'"
check acl_inherited_other_none test "$(stat -c %A d/child | cut -c8-10)" = ---
check acl_remove setfacl -b f
check acl_removed sh -c "! getfacl -c f 2>/dev/null | grep -q nobody"

cd /
snap() { (cd "$MNT" && getfattr -R -d -m - . 2>/dev/null; getfacl -R . 2>/dev/null) ; }
snap >"$T/before"
check xattr_umount fs_umount "$MNT"
fs_mount "$IMG" "$MNT" || { fail xattr_remount; exit 1; }
snap >"$T/after"
check xattr_survive_remount cmp "$T/before" "$T/after"
check xattr_nonempty grep -q user.k20 "$T/after"
check xattr_umount_final fs_umount "$MNT"
check xattr_fsck fs_fsck "$IMG"
