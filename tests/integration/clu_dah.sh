#!/bin/sh
# clu_dah: one change by another node costs this node the lock of what
# changed, not its kernel's view of everything idle nearby (demote-ahead
# answers a streak of requests from one node, fusefs/MOUNT.md
# "demote-ahead"). Node 2 builds a tree (4 directories of 10 files),
# node 1 reads it (ls -lR: its kernel holds every inode, its inode
# locks idle in PR), then, well after any earlier request of node 2
# (0.3 s: longer than the streak window), node 2 changes ONE file
# (chmod):
#  * node 1 gave up that file's lock alone: no demote-ahead
#    (glocks.types.inode.demotes_ahead unchanged; glocks.ahead_unswept
#    counts the callback), and its kernel kept the rest: the inodes it
#    holds (namespace.inodes_referenced) stay but for a couple, no
#    directory's names were dropped or forgotten (kcache.dirs_dropped,
#    kcache.dirs_forgotten unchanged);
#  * node 1 sees node 2's chmod;
#  * a streak still sweeps: node 2 then chmods every file of one
#    directory (one chmod(1)), and node 1's demote-ahead gives up
#    neighbours (demotes_ahead grows) while node 1 sees every change.
# Node 3 is a lockspace-only witness (tests/clulib.sh: quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_dah jq

clu_two_nodes clu_dah 256 -j 2 -r 64

snap() {
	"$B/ucfs-stat" --json "$M1" | jq -c '{
		ahead: (.glocks.types.inode.demotes_ahead // 0),
		unswept: (.glocks.ahead_unswept // 0),
		refs: (.namespace.inodes_referenced // 0),
		dirs_dropped: (.kcache.dirs_dropped // 0),
		dirs_forgotten: (.kcache.dirs_forgotten // 0),
		names_forgotten: (.kcache.names_forgotten // 0)}'
}
get() { echo "$1" | jq ".$2"; }

check clu_dah_tree clu_tree "$M2/t" 4 10
ls -lR "$M1/t" >/dev/null
ls -lR "$M1/t" >/dev/null
sleep 0.3 # idle (FS_GLOCK_AHEAD_IDLE_MS), past any streak of node 2
s0=$(snap)
check clu_dah_chmod chmod 600 "$M2/t/d1/f3"
check clu_dah_seen test "$(stat -c %a "$M1/t/d1/f3")" = 600
sleep 0.2 # the kernel's FORGETs of what it dropped, if any, come late
s1=$(snap)
echo "node 1 around one chmod of node 2: $s0 -> $s1"
check clu_dah_no_ahead test "$(get "$s1" ahead)" -eq "$(get "$s0" ahead)"
check clu_dah_unswept test "$(get "$s1" unswept)" -gt "$(get "$s0" unswept)"
check clu_dah_refs_kept test $(($(get "$s1" refs) + 2)) -ge "$(get "$s0" refs)"
check clu_dah_dirs_kept test "$(get "$s1" dirs_dropped)" -eq \
	"$(get "$s0" dirs_dropped)"
check clu_dah_dirs_not_forgotten test "$(get "$s1" dirs_forgotten)" -eq \
	"$(get "$s0" dirs_forgotten)"
check clu_dah_names_kept test $(($(get "$s1" names_forgotten) - \
	$(get "$s0" names_forgotten))) -le 1

# a streak: every file of a directory in one chmod(1); a loaded machine
# may space the callbacks past the window: then the next directory
ahead() { get "$(snap)" ahead; }
a1=$(get "$s1" ahead) a2=$a1
for d in d2 d3 d0; do
	chmod 640 "$M2/t/$d"/f*
	i=0
	while [ "$(ahead)" -eq "$a1" ] && [ $i -lt 20 ]; do
		sleep 0.1 # the pass runs on node 1's callback thread
		i=$((i + 1))
	done
	a2=$(ahead) last=$d
	[ "$a2" -eq "$a1" ] || break
	echo "no sweep for $d (callbacks spaced past the window?)"
done
echo "node 1 demotes ahead around the chmods of $last: $a1 -> $a2"
check clu_dah_streak_sweeps test "$a2" -gt "$a1"
check clu_dah_streak_seen test "$(stat -c %a "$M1/t/$last"/f* | sort -u)" = 640

check clu_dah_umount2 fs_umount "$M2"
check clu_dah_umount1 fs_umount "$M1"
check clu_dah_fsck fs_fsck "$IMG"
rm -f "$IMG"
exit 0
