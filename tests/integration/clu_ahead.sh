#!/bin/sh
# clu_ahead: lock-ahead on a cluster mount (lockproto=dlm; fs_statahead.c,
# fs_glocks_prefetch). Node A writes a tree (16 directories of 60 files
# with distinct sizes, each with a subdirectory of 10 more) and lists
# it, then remounts (so it holds no lock of the tree), and node B,
# freshly mounted, walks it cold: `du -s`, then `ls -lR`. Directory
# readahead asks for the inodes' PR locks in batches (one message per
# lock master, not one request per inode), so B's first walk makes far
# fewer lock round trips than there are inodes, counted two ways from
# B's stats: the glock engine's (requests made one at a time plus
# lock-ahead batches, `glocks.types.inode`) and the lock manager's
# frames sent to the other nodes (`net.peers`); both under a quarter of
# the inodes (one per inode without lock-ahead). The lock-ahead grants
# were used (`ahead_hits`), B sees what A wrote (the same `du -s` and
# the same names and sizes), and fsck.ucfs -n finds the image clean.
# Node 5 is a lockspace-only witness (tests/clulib.sh: quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_ahead jq

IMG=$T/img CFG=$T/cluster.json MA=$T/a MB=$T/b
clu_config "$CFG" 1 2 5
clu_witness "$CFG" 5
fs_mkfs "$IMG" 256 -j 2 -J 8 -r 64 -p dlm -t clu:fs1 || {
	fail clu_ahead_mkfs; exit 1; }
fs_mount "$IMG" "$MA" "$(clu_opts "$CFG" 1)" || {
	fail clu_ahead_mount1; exit 1; }

d=0
while [ $d -lt 16 ]; do
	mkdir -p "$MA/t/d$d/s"
	i=0
	while [ $i -lt 60 ]; do
		head -c $((d * 97 + i * 13)) /dev/zero >"$MA/t/d$d/f$i"
		i=$((i + 1))
	done
	i=0
	while [ $i -lt 10 ]; do
		echo "$d $i" >"$MA/t/d$d/s/g$i"
		i=$((i + 1))
	done
	d=$((d + 1))
done
# names and sizes, as A sees them
listing() { (cd "$1/t" && find . -printf '%p %y %s\n' | sort); }
listing "$MA" >"$T/list.a"
inodes=$(wc -l <"$T/list.a")
echo "inodes in the tree: $inodes"

# A gives every lock of the tree up (the node that wrote it is still in
# the cluster, holding nothing), then B comes, cold
fs_umount "$MA" || fail clu_ahead_umount1
fs_mount "$IMG" "$MA" "$(clu_opts "$CFG" 1)" || {
	fail clu_ahead_remount1; exit 1; }
fs_mount "$IMG" "$MB" "$(clu_opts "$CFG" 2)" || {
	fail clu_ahead_mount2; exit 1; }

# lock round trips of mount $1 so far: inode requests made one at a
# time, plus lock-ahead batches
trips() {
	clu_stat "$1" | jq '.glocks.types.inode // {} |
		(.dcnt // 0) - (.ahead_requests // 0) + (.ahead_batches // 0)'
}
frames() { clu_stat "$1" '[.net.peers[]? | .frames_tx] | add // 0'; }
ahead() { clu_stat "$1" ".glocks.types.inode.$2 // 0"; }

t0=$(trips "$MB") f0=$(frames "$MB")
du_b=$(du -s "$MB/t" | cut -f1)
t1=$(trips "$MB") f1=$(frames "$MB")
ls -lR "$MB/t" >/dev/null
t2=$(trips "$MB") f2=$(frames "$MB")
echo "B: du -s $((t1 - t0)) lock round trips, $((f1 - f0)) frames sent;" \
	"ls -lR after it $((t2 - t1)), $((f2 - f1));" \
	"ahead: $(ahead "$MB" ahead_batches) batches," \
	"$(ahead "$MB" ahead_requests) requests," \
	"$(ahead "$MB" ahead_grants) grants, $(ahead "$MB" ahead_hits) hits"
check clu_ahead_du_trips test $(((t1 - t0) * 4)) -lt "$inodes"
check clu_ahead_du_frames test $(((f1 - f0) * 4)) -lt "$inodes"
check clu_ahead_walk_trips test $(((t2 - t0) * 4)) -lt "$inodes"
check clu_ahead_hits test "$(ahead "$MB" ahead_hits)" -gt $((inodes / 2))

# B sees what A wrote
listing "$MB" >"$T/list.b"
check clu_ahead_same_tree cmp "$T/list.a" "$T/list.b"
du_a=$(du -s "$MA/t" | cut -f1)
check clu_ahead_same_du test "$du_a" = "$du_b"

fs_umount "$MB" || fail clu_ahead_umount2
fs_umount "$MA" || fail clu_ahead_umount1b
check clu_ahead_fsck "$B/fsck.ucfs" -n "$IMG"
