#!/bin/sh
# clu_rmrt: the lock round trips of an rm -rf whose tree another node
# read first, after a fresh mount (ucfs-bench untar's du + rm phase):
#  * node 1 builds a tree (12 directories of 30 files), both nodes
#    unmount and mount again (no lock mastered anywhere), node 2 reads
#    the tree (du -s, ls -lR: its kernel keeps every inode, and its
#    iopen PR holds with them), then node 1 removes it;
#  * the tree is gone on both nodes (no stale name on node 2);
#  * node 1 frees every inode (namespace.iopen_frees_now + _later: at
#    its unlink, or once node 2's kernel let it go);
#  * round trips: node 1's locks.remote_round_trips during the rm, per
#    removed entry, stay under 0.5, and both nodes' together under 2;
#  * the reader's releases travel in batches: node 2 gives up about two
#    locks per entry of the tree (its inode lock, by demote-ahead, and
#    its iopen hold, when its kernel forgets the inode), and sends them
#    in fewer than 1.5 frames per entry (net.peers[].frames_tx to
#    node 1; one frame per release before: a demote-ahead worker's
#    batch and a FUSE batch forget are one lockspace call each).
#    The tree's locks are placed on node 1 (its allocator's groups);
#    before their directory node mastered them (lockmgr/PROTOCOL.md §5),
#    node 2, the first to ask, did, and node 1 made about 4 round trips
#    per removed entry (PR then EX on its inode and iopen locks).
# Node 3 is a lockspace-only witness (tests/clulib.sh: quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_rmrt jq

clu_setup clu_rmrt 2 256 -j 3
clu_mount clu_rmrt 1
clu_mount clu_rmrt 2
check clu_rmrt_tree clu_tree "$M1/t" 12 30
check clu_rmrt_umount2 fs_umount "$M2"
check clu_rmrt_umount1 fs_umount "$M1"
clu_mount clu_rmrt 1
clu_mount clu_rmrt 2
n=$(find "$M2/t" | wc -l)
echo "entries: $n"
check clu_rmrt_read_on_2 test "$n" -eq 373
du -s "$M2/t" >/dev/null
ls -lR "$M2/t" >/dev/null

rtt() { clu_stat "$1" .locks.remote_round_trips; }
frames() { # node $2's frames to node $3 as seen by mount $1
	clu_stat "$1" "[.net.peers[] | select(.node == $3) | .frames_tx] |
		add // 0"
}
freed() {
	clu_stat "$1" '.namespace.iopen_frees_now +
		.namespace.iopen_frees_later'
}
a1=$(rtt "$M1") a2=$(rtt "$M2") f1=$(freed "$M1") x2=$(frames "$M2" 2 1)
check clu_rmrt_rm rm -rf "$M1/t"
b1=$(rtt "$M1") b2=$(rtt "$M2") g1=$(freed "$M1")
check clu_rmrt_gone_on_1 test ! -e "$M1/t"
check clu_rmrt_gone_on_2 test ! -e "$M2/t"
check clu_rmrt_empty_on_2 test -z "$(ls -A "$M2")"
d1=$((b1 - a1)) d2=$((b2 - a2))
i=0
while [ $((g1 - f1)) -lt "$n" ] && [ $i -lt 100 ]; do
	sleep 0.1 # frees waiting for node 2's kernel to let go
	g1=$(freed "$M1") i=$((i + 1))
done
y2=$(frames "$M2" 2 1)
echo "remote round trips for $n removed entries: node 1 $d1, node 2 $d2;" \
	"node 1 freed $((g1 - f1)) inodes; node 2 sent $((y2 - x2)) frames"
check clu_rmrt_freed test $((g1 - f1)) -eq "$n"
check clu_rmrt_rtt_remover test $((d1 * 2)) -lt "$n"
check clu_rmrt_rtt_both test $((d1 + d2)) -lt $((n * 2))
check clu_rmrt_reader_frames test $(((y2 - x2) * 2)) -lt $((n * 3))

check clu_rmrt_umount2_end fs_umount "$M2"
check clu_rmrt_umount1_end fs_umount "$M1"
check clu_rmrt_fsck fs_fsck "$IMG"
rm -f "$IMG"
exit 0
