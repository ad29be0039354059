#!/bin/sh
# clu_rmrf: rm -rf of separate trees by two dlm nodes at once, each tree
# read by the other node first (as ucfs-bench untar does: the other node
# then caches PR inode locks on every inode about to be removed):
#  * both nodes build a tree at once (cp -r), each reads the other's
#    back (diff -r), and after 0.3 s idle both remove their own tree at
#    once: both rm -rf succeed, both trees are gone on both nodes;
#  * demote-ahead: the node that read the other's tree gave most of its
#    idle PR inode locks up without a blocking callback of their own
#    (glocks.types.inode.demotes_ahead > 0 on both nodes);
#  * the space comes back: after both unmount (the free logs applied),
#    a fresh mount's statfs shows the free blocks of before the trees
#    (within 64 blocks: directory blocks of the root), and fsck -n is
#    clean.
# Node 3 is a lockspace-only witness (tests/clulib.sh: quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_rmrf jq

clu_setup clu_rmrf 2 512 -j 3
clu_mount clu_rmrf 1
free0=$(stat -f -c %f "$M1")
clu_mount clu_rmrf 2

# a source tree: 25 directories of 40 small files, and a bigger one each
mkdir "$T/src"
d=0
while [ $d -lt 25 ]; do
	mkdir "$T/src/d$d"
	f=0
	while [ $f -lt 40 ]; do
		echo "file $d/$f" >"$T/src/d$d/f$f"
		f=$((f + 1))
	done
	head -c $((d * 8000 + 1)) /dev/urandom >"$T/src/d$d/big"
	d=$((d + 1))
done

clu_at_once clu_rmrf_trees_built 'cp -r "$T/src" "$M1/t1"' \
	'cp -r "$T/src" "$M2/t2"'
# each node reads the other's tree: PR inode locks cached there
check clu_rmrf_tree1_read_on_2 diff -r "$T/src" "$M2/t1"
check clu_rmrf_tree2_read_on_1 diff -r "$T/src" "$M1/t2"
sleep 0.3	# idle long enough for demote-ahead (100 ms)

clu_at_once clu_rmrf_both_removed 'rm -rf "$M1/t1"' 'rm -rf "$M2/t2"'
check clu_rmrf_gone_on_1 test ! -e "$M1/t1" -a ! -e "$M1/t2"
check clu_rmrf_gone_on_2 test ! -e "$M2/t1" -a ! -e "$M2/t2"
check clu_rmrf_empty_on_1 test -z "$(ls -A "$M1")"
check clu_rmrf_empty_on_2 test -z "$(ls -A "$M2")"
"$B/ucfs-stat" --json "$M1" >"$T/st1.json" 2>&1
"$B/ucfs-stat" --json "$M2" >"$T/st2.json" 2>&1
for n in 1 2; do
	echo "node $n: $(jq -c '{ahead: .glocks.types.inode.demotes_ahead,
		to_nl: .glocks.types.inode.demotes_to_nl,
		requests: .glocks.types.inode.dcnt,
		flog: [.alloc.flog_logged, .alloc.flog_applied,
		       .alloc.flog_overflows]}' "$T/st$n.json")"
	check clu_rmrf_demote_ahead_$n jq -e \
		'.glocks.types.inode.demotes_ahead > 0' "$T/st$n.json"
done

check clu_rmrf_umount2 fs_umount "$M2"
check clu_rmrf_umount1 fs_umount "$M1"
fs_mount "$IMG" "$M1" "$(clu_opts "$CFG" 1)" || fail clu_rmrf_remount1
free1=$(stat -f -c %f "$M1")
echo "free blocks: $free0 before the trees, $free1 after"
check clu_rmrf_space_back test $((free0 - free1)) -le 64
check clu_rmrf_umount_final fs_umount "$M1"
check clu_rmrf_fsck fs_fsck "$IMG"
rm -f "$IMG"
exit 0
