#!/bin/sh
# clu_kforget: the kernel cache sink's per-name records follow the
# kernel's cache (fs_inval_forgot). A lockproto=dlm mount records every
# name it hands the kernel, per directory, so that losing a directory's
# lock drops exactly those names (kcache.names_tracked, dirs_tracked).
# When the kernel forgets a directory (its inode's last FORGET) it can
# hold none of its names (a dentry pins its parent), so the records go:
#  (1) 24 directories of 40 files each, listed with ls -l: at least
#      24 * 40 names and 24 directories tracked;
#  (2) the kernel drops its dentries and inodes (echo 2 >
#      /proc/sys/vm/drop_caches, until its FORGETs reach the mount):
#      names_tracked falls to under a quarter, kcache.dirs_forgotten and
#      names_forgotten count what went;
#  (3) the directories looked up again are tracked again, and a change
#      made there is seen (the records are not needed for that on one
#      node, but the mount keeps working after the drop); fsck -n clean.
# run.sh: alone (it drops the caches of the machine)
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_kforget jq

ND=24 NF=40
clu_setup clu_kforget 1 128 -j 1 -r 64
clu_mount clu_kforget 1
kc() { clu_stat "$M1" ".kcache.$1"; }

d=0
while [ $d -lt $ND ]; do
	mkdir "$M1/d$d"
	f=0
	while [ $f -lt $NF ]; do
		: >"$M1/d$d/f$f"
		f=$((f + 1))
	done
	d=$((d + 1))
done
ls -l "$M1"/d* >/dev/null
n0=$(kc names_tracked) dirs0=$(kc dirs_tracked)
echo "tracked before: $n0 names in $dirs0 directories"
check clu_kforget_tracked_names test "$n0" -ge $((ND * NF))
check clu_kforget_tracked_dirs test "$dirs0" -ge "$ND"

# (2) the kernel forgets; its FORGETs come as requests, a while later
sync
n1=$n0 i=0
while [ $i -lt 20 ] && [ "$n1" -ge $((n0 / 4)) ]; do
	echo 2 >/proc/sys/vm/drop_caches
	sleep 0.2
	n1=$(kc names_tracked)
	i=$((i + 1))
done
"$B/ucfs-stat" --json "$M1" | jq -c '.kcache | {names_tracked,
	dirs_tracked, dirs_forgotten, names_forgotten, forgets_kept}'
check clu_kforget_names_fall test "$n1" -lt $((n0 / 4))
check clu_kforget_dirs_fall test "$(kc dirs_tracked)" -lt "$dirs0"
check clu_kforget_counted test "$(kc dirs_forgotten)" -gt 0 \
	-a "$(kc names_forgotten)" -ge $((n0 - n1 - ND))

# (3) looked up again: tracked again, and the mount works
ls -l "$M1/d3" >/dev/null
: >"$M1/d3/new"
check clu_kforget_tracked_again test "$(kc names_tracked)" -ge "$NF"
check clu_kforget_listing sh -c "ls '$M1/d3' | grep -qx new &&
	test \$(ls '$M1/d3' | wc -l) -eq $((NF + 1))"
check clu_kforget_no_errors test "$(kc errors)" -eq 0
check clu_kforget_umount fs_umount "$M1"
check clu_kforget_fsck fs_fsck "$IMG"
rm -f "$IMG"
exit 0
