#!/bin/sh
# fs_perm: permission rules as a non-root user (setpriv to uid/gid 65534,
# mount with allow_other): access checks (EACCES), ownership of new
# objects, chmod/chown by a non-owner (EPERM), the sticky bit, setgid
# directories (group and bit inherited), a write by a non-root user
# clearing setuid/setgid; the privileges a write, truncate or chown
# drops (setuid/setgid, file capabilities; ucfs does it itself under
# FUSE_HANDLE_KILLPRIV_V2 and must then not ask for security.capability
# on every write); fsck clean.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"

IMG=$T/img MNT=$T/mnt OP=$B/tests/fsop
NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups"
opts=
fs_daemon_target && opts=allow_other
fs_mkfs "$IMG" 256 || { fail perm_mkfs; exit 1; }
fs_mount "$IMG" "$MNT" "$opts" || { fail perm_mount; exit 1; }
chmod 755 "$MNT"
cd "$MNT" || exit 1
# the unprivileged user must be able to run the helper
cp "$OP" "$T/fsop" && chmod 755 "$T" "$T/fsop"
OP=$T/fsop
as_nobody() { $NOBODY "$@"; }

mkdir rootonly shared sticky sgid
chmod 755 rootonly; chmod 1777 sticky; chmod 777 shared
echo secret >rootonly/file; chmod 600 rootonly/file

check perm_create_denied test "$(as_nobody "$OP" create rootonly/x)" = EACCES
check perm_read_denied test "$(as_nobody "$OP" open rootonly/file)" = EACCES
check perm_unlink_denied test "$(as_nobody "$OP" unlink rootonly/file)" = EACCES
check perm_create_shared test "$(as_nobody "$OP" create shared/mine)" = OK
check perm_owner_uid test "$(stat -c %u:%g shared/mine)" = 65534:65534
check perm_mkdir_owner sh -c "$NOBODY mkdir shared/mydir && test \"\$(stat -c %u:%g shared/mydir)\" = 65534:65534"
check perm_chmod_not_owner sh -c "! $NOBODY chmod 777 rootonly/file 2>/dev/null"
check perm_chown_denied sh -c "! $NOBODY chown 0 shared/mine 2>/dev/null"
check perm_root_chown chown 1234:5678 shared/mine
check perm_root_chown_result test "$(stat -c %u:%g shared/mine)" = 1234:5678

# sticky: nobody cannot remove root's file, can remove its own
touch sticky/roots; chmod 666 sticky/roots
check perm_sticky_other test "$(as_nobody "$OP" unlink sticky/roots)" = EPERM
check perm_sticky_own sh -c "$NOBODY touch sticky/own && test \"\$($NOBODY $OP unlink sticky/own)\" = OK"
check perm_sticky_rename_other test "$(as_nobody "$OP" rename sticky/roots sticky/moved)" = EPERM

# setgid directory: group and (for directories) the bit pass on
chgrp 4321 sgid; chmod 2777 sgid
check perm_sgid_file_group sh -c "$NOBODY touch sgid/f && test \"\$(stat -c %g sgid/f)\" = 4321"
check perm_sgid_dir_inherits sh -c "$NOBODY mkdir sgid/sub && test \"\$(stat -c %g sgid/sub)\" = 4321 && test -g sgid/sub"

# a write by a non-root user clears setuid/setgid
echo x >shared/suid; chmod 6777 shared/suid
check perm_suid_set test -u shared/suid
check perm_write_by_nobody sh -c "echo more | $NOBODY tee -a shared/suid >/dev/null"
check perm_write_clears_suid sh -c "test ! -u shared/suid && test ! -g shared/suid"

# what write/truncate/chown keep and drop, as the VFS does
echo x >shared/rootw; chmod 6755 shared/rootw
check perm_root_write_keeps_suid sh -c "echo y >>shared/rootw && test -u shared/rootw && test -g shared/rootw"
echo x >shared/trunc; chmod 6777 shared/trunc
check perm_truncate_by_nobody $NOBODY truncate -s 1 shared/trunc
check perm_truncate_clears_suid sh -c "test ! -u shared/trunc && test ! -g shared/trunc"
echo x >shared/chown; chmod 6755 shared/chown
check perm_chown_clears_suid sh -c "chown 1:1 shared/chown && test ! -u shared/chown && test ! -g shared/chown"
hascap() { getcap "$1" | grep -q cap_net_raw; }
capped() { setcap cap_net_raw+ep "$1" && hascap "$1"; }
drops_caps() { "$@" && ! hascap shared/cap; }	# CMD... on shared/cap
echo x >shared/cap
check perm_setcap capped shared/cap
check perm_write_drops_caps drops_caps sh -c "echo y >>shared/cap"
capped shared/cap
check perm_truncate_drops_caps drops_caps truncate -s 1 shared/cap
capped shared/cap
check perm_chown_drops_caps drops_caps chown 0:0 shared/cap
if fs_daemon_target; then
	# the kernel asks for security.capability once per inode, not once
	# per write (FUSE_HANDLE_KILLPRIV_V2 negotiated)
	getx() { "$B/ucfs-stat" --json "$MNT" | jq '.fuse.ops.getxattr.count'; }
	echo x >shared/many
	g0=$(getx)
	for i in 1 2 3 4 5 6 7 8 9 10; do echo $i >>shared/many; done
	g1=$(getx)
	check perm_killpriv_v2_one_getxattr test $((g1 - g0)) -le 1
fi

# access checks on directories: search permission
mkdir nosearch; chmod 700 nosearch; touch nosearch/f
check perm_no_search test "$(as_nobody "$OP" open nosearch/f)" = EACCES

cd /
check perm_umount fs_umount "$MNT"
check perm_fsck fs_fsck "$IMG"
