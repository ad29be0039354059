#!/bin/sh
# fs_rename: rename / link / unlink edge cases through a mount, with exact
# errnos (tests/progs/fsop), then the same tree after a remount and a
# clean fsck. Random coverage of the same rules is nscheck's (fs_fsx).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"

IMG=$T/img MNT=$T/mnt
OP=$B/tests/fsop
fs_mkfs "$IMG" 256 || { fail rename_mkfs; exit 1; }
fs_mount "$IMG" "$MNT" || { fail rename_mount; exit 1; }
cd "$MNT" || exit 1

# expect NAME WANT OP ARGS...: the call's outcome must be WANT
expect() {
	_n=$1 _w=$2; shift 2
	_g=$("$OP" "$@")
	if [ "$_g" = "$_w" ]; then pass "$_n"; else fail "$_n" "$* -> $_g, want $_w"; fi
}
ino() { stat -c %i "$1"; }
nl() { stat -c %h "$1"; }

mkdir -p d1/sub d2 empty full/x
echo one >f1; echo two >f2; echo three >d1/f3

# file over file: the target's inode goes, the source keeps its inode
i1=$(ino f1)
expect rename_file_over_file OK rename f1 f2
check rename_over_kept_inode test "$(ino f2)" = "$i1"
check rename_over_content test "$(cat f2)" = one
check rename_over_source_gone test ! -e f1
# a name renamed onto a hard link of itself: nothing changes
ln f2 f2link
expect rename_onto_own_link OK rename f2 f2link
check rename_onto_own_link_both_stay test -e f2 -a -e f2link
check rename_onto_own_link_nlink test "$(nl f2)" = 2
# directories
expect rename_dir_over_empty_dir OK rename d2 empty
check rename_dir_over_empty_gone test ! -e d2
expect rename_dir_over_nonempty ENOTEMPTY rename empty full
expect rename_dir_over_file ENOTDIR rename empty f2
expect rename_file_over_dir EISDIR rename f2 empty
expect rename_dir_into_itself EINVAL rename d1 d1/sub/inside
expect rename_dir_onto_ancestor ENOTEMPTY rename d1/sub d1
expect rename_missing ENOENT rename nosuch x
expect rename_into_missing_dir ENOENT rename f2 nosuch/x
expect rename_through_file ENOTDIR rename f2 f2link/x
expect rename_same_name OK rename f2 f2
# directory link counts follow moves between parents
mkdir p1 p2 p1/c
check rename_dir_nlink_before test "$(nl p1)/$(nl p2)" = "3/2"
expect rename_dir_move OK rename p1/c p2/c
check rename_dir_nlink_after test "$(nl p1)/$(nl p2)" = "2/3"
check rename_dotdot_follows test "$(ino p2/c/..)" = "$(ino p2)"
# renameat2 flags
expect noreplace_existing EEXIST rename_noreplace f2 f2link
expect noreplace_new OK rename_noreplace f2link f3new
echo A >xa; mkdir xb; echo B >xb/in
expect exchange_file_dir OK rename_exchange xa xb
check exchange_result sh -c 'test -d xa && test "$(cat xa/in)" = B && test "$(cat xb)" = A'
expect exchange_missing ENOENT rename_exchange xa nosuch
expect exchange_into_own_subtree EINVAL rename_exchange xa xa/in

# links
expect link_to_dir EPERM link d1 d1link
expect link_exists EEXIST link f2 f3new
expect link_ok OK link d1/f3 d1/f3b
check link_nlink test "$(nl d1/f3)" = 2
expect unlink_dir EISDIR unlink d1
expect rmdir_file ENOTDIR rmdir f2
expect rmdir_nonempty ENOTEMPTY rmdir d1
expect unlink_missing ENOENT unlink nosuch
expect create_exists EEXIST create f2
expect mkdir_over_symlink EEXIST mkdir "$(ln -s nowhere dangling && echo dangling)"

# names: 255 bytes fine, 256 ENAMETOOLONG, any byte but / and NUL
n255=$(printf '%0255d' 0)
expect name_255 OK create "$n255"
expect name_256 ENAMETOOLONG create "${n255}1"
nl_name=$(printf 'new\nline\001\377')
expect name_odd_bytes OK create "$nl_name"
check name_odd_bytes_listed sh -c "ls -A | grep -c line >/dev/null"

# unlink while open: the data stays readable through the descriptor
echo keep >open1
exec 3<open1
rm open1
check unlinked_open_readable sh -c 'test "$(cat <&3)" = keep'
exec 3<&-
# ctime moves on link, rename and unlink of another name
touch -d '2001-01-01' tfile
c0=$(stat -c %Z tfile)
sleep 1
ln tfile tfile2
check ctime_on_link test "$(stat -c %Z tfile)" -gt "$c0"

cd /
listing() { (cd "$MNT" && find . -printf '%p %y %m %n %s\n' | LC_ALL=C sort); }
listing >"$T/before"
check rename_umount fs_umount "$MNT"
fs_mount "$IMG" "$MNT" || { fail rename_remount; exit 1; }
listing >"$T/after"
check rename_tree_survives_remount cmp "$T/before" "$T/after"
check rename_umount_final fs_umount "$MNT"
check rename_fsck fs_fsck "$IMG"
