#!/bin/sh
# fs_rdp: readdirplus entries sent bare (FUSE nodeid 0, no attributes, no
# reference) for inodes the kernel already got from a readdirplus less
# than a second before (fs.h FS_READDIR_BARE), on one node. Each case
# reads directories as rm -rf does (tests/rdpwalk.py: one getdents, then
# a second open read to the end, then lstat of every entry):
#  * what getdents says of each entry (type, inode number) agrees with
#    lstat, and the listing equals a plain one; bare entries were sent
#    (namespace.readdir_bare rises; up to 3 tries, since the second read
#    must come within the second);
#  * a second hard link, whose dentry the kernel lacks while it holds the
#    inode through the first: found by lookup, with the right link count;
#  * directories read while another process unlinks and creates in them;
#  * references: after rm -rf of all of it the kernel and ucfs hold no
#    more inodes than before (namespace.inodes_referenced) and every
#    removed inode is freed (inodes_freed), so a bare entry took no
#    reference and lost none; fsck.ucfs -n clean after unmount.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
fs_require_ucfs fs_rdp
command -v jq >/dev/null 2>&1 || { skip fs_rdp "jq missing"; exit 0; }

IMG=$T/img MNT=$T/mnt
WALK="python3 $UCFS_TOP/tests/rdpwalk.py"
fs_mkfs "$IMG" 128 || { fail fs_rdp_mkfs; exit 1; }
fs_mount "$IMG" "$MNT" || { fail fs_rdp_mount; exit 1; }

ns() { "$B/ucfs-stat" --json "$MNT" | jq ".namespace.$1"; }
# tree DIR: 30 files and 3 subdirectories of 5 files
tree() {
	mkdir -p "$1"
	for i in $(seq 1 30); do echo "$i" >"$1/f$i"; done
	for s in 1 2 3; do
		mkdir "$1/s$s"
		for i in 1 2 3 4 5; do echo "$s$i" >"$1/s$s/g$i"; done
	done
}
# same DIR: the rm-like walk of DIR equals a plain one (and the walk's
# own getdents/lstat checks held)
same() {
	$WALK "$1" >"$T/walk.out" && $WALK --plain "$1" >"$T/plain.out" &&
		cmp "$T/walk.out" "$T/plain.out"
}

refs0=$(ns inodes_referenced)
freed0=$(ns inodes_freed)

# ---- the rm pattern: bare entries, listing right ----
tree "$MNT/a"
check fs_rdp_walk_same same "$MNT/a"
bare=0
for try in 1 2 3; do
	b0=$(ns readdir_bare)
	$WALK "$MNT/a/s$try" >/dev/null
	b1=$(ns readdir_bare)
	echo "try $try: readdir_bare $b0 -> $b1"
	[ "$b1" -gt "$b0" ] && { bare=1; break; }
done
check fs_rdp_bare_sent [ "$bare" = 1 ]
for s in 1 2 3; do
	check fs_rdp_walk_sub$s same "$MNT/a/s$s"
done

# ---- a second hard link: the kernel holds the inode, not the name ----
mkdir "$MNT/h1" "$MNT/h2"
echo x >"$MNT/h1/one"
ln "$MNT/h1/one" "$MNT/h2/two"
ls -l "$MNT/h1" >/dev/null
$WALK "$MNT/h2" >"$T/h2.out"
ino=$(stat -c %i "$MNT/h1/one")
check fs_rdp_link_found grep -q "^two f 100644 2 2 0 [0-9]* $ino\$" "$T/h2.out"
check fs_rdp_link_stat [ "$(stat -c '%h %i' "$MNT/h2/two")" = "2 $ino" ]

# ---- readdir while another process unlinks and creates ----
tree "$MNT/c"
(
	for r in 1 2 3 4 5 6; do
		for i in $(seq 1 30); do
			rm -f "$MNT/c/f$i"
			echo "$r" >"$MNT/c/f$i"
		done
	done
) &
churn=$!
walks_ok=1
for r in $(seq 1 15); do
	$WALK --lax "$MNT/c" >/dev/null || walks_ok=0
done
wait $churn
check fs_rdp_churn_walks [ "$walks_ok" = 1 ]
check fs_rdp_churn_same same "$MNT/c"

# ---- references ----
n=$(find "$MNT/a" "$MNT/h1" "$MNT/h2" "$MNT/c" | sort -u | wc -l)
n=$((n - 1)) # the hard link is one inode
check fs_rdp_rm rm -rf "$MNT/a" "$MNT/h1" "$MNT/h2" "$MNT/c"
# the kernel's FORGETs come after the unlinks: wait for them
wait_for 30 sh -c "[ \$('$B/ucfs-stat' --json '$MNT' |
	jq .namespace.inodes_referenced) -le $refs0 ]"
refs1=$(ns inodes_referenced)
freed=$(($(ns inodes_freed) - freed0))
echo "referenced $refs0 -> $refs1; freed $freed of $n (plus the churn's)"
check fs_rdp_refs_back [ "$refs1" -le "$refs0" ]
check fs_rdp_all_freed [ "$freed" -ge "$n" ]
check fs_rdp_umount fs_umount "$MNT"
check fs_rdp_fsck fs_fsck "$IMG"
exit $_ucfs_failed
