#!/bin/sh
# clu_inodes: per-inode and per-rgroup cluster locks (issue 13), two dlm
# nodes on one image made with mkfs's automatic rgroup size:
#  * mkfs -p dlm without -r makes at least 8 rgroups per journal slot;
#  * both nodes create 1500 files each in ONE shared directory at once:
#    both end up listing all 3000;
#  * each node builds its own tree at once; each reads the other's back
#    identical to the source (diff -r);
#  * node 2 removes node 1's tree (rm -rf) while node 1 keeps writing in
#    its own: the frees land in node 1's rgroups through node 2's free
#    log (alloc.flog_logged > 0), both see it gone;
#  * a directory renamed between parents on node 1 while node 2 creates
#    files inside it (its cwd): every file is there, under the new name,
#    on both nodes;
#  * node 2 truncates two of node 1's files (fsync'ed: the frees are in
#    its free log, node 1 holding the groups) and is killed (kill -9):
#    node 1 goes on (writes, fsync, reads back), unmounts, fsck -n is
#    clean (logged blocks count as in use); node 2 mounts its slot again
#    (which applies its log), sees the truncates, unmounts, fsck -n is
#    clean again.
# Node 3 is a lockspace-only witness (tests/clulib.sh: quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_inodes

clu_two_nodes clu_inodes 512 -j 3
n=$(sed -n 's/.* \([0-9]*\) rgroups of.*/\1/p' "$IMG.mkfs.log")
check clu_inodes_mkfs_auto_rgroups test "${n:-0}" -ge 24

creates() {	# DIR PREFIX COUNT
	_i=0
	while [ $_i -lt "$3" ]; do
		: >"$1/$2$_i" || return 1
		_i=$((_i + 1))
	done
}

# one shared directory, both nodes creating at once
mkdir "$M1/shared"
clu_at_once clu_inodes_shared_creates 'creates "$M1/shared" a 1500' \
	'creates "$M2/shared" b 1500'
check clu_inodes_shared_all_on_1 test "$(ls "$M1/shared" | wc -l)" -eq 3000
check clu_inodes_shared_all_on_2 test "$(ls "$M2/shared" | wc -l)" -eq 3000

# a source tree: 20 directories of 40 files, a few bigger ones
clu_tree "$T/src" 20 40 big || fail clu_inodes_src_tree

# separate trees at once, each read back on the other node
clu_at_once clu_inodes_trees_copied 'cp -r "$T/src" "$M1/t1"' \
	'cp -r "$T/src" "$M2/t2"'
check clu_inodes_tree1_on_2 diff -r "$T/src" "$M2/t1"
check clu_inodes_tree2_on_1 diff -r "$T/src" "$M1/t2"

# node 2 removes node 1's tree while node 1 keeps its groups busy
cp -r "$T/src" "$M1/t3" & p1=$!
check clu_inodes_rm_other_tree rm -rf "$M2/t1"
wait $p1
check clu_inodes_rm_seen_on_1 test ! -e "$M1/t1"
check clu_inodes_busy_tree_intact diff -r "$T/src" "$M2/t3"
if command -v jq >/dev/null 2>&1; then
	"$B/ucfs-stat" --json "$M2" >"$T/st2.json" 2>&1
	check clu_inodes_flog_used jq -e '.alloc.flog_logged > 0' \
		"$T/st2.json"
fi

# a directory renamed between parents while the other node works in it
mkdir -p "$M1/p1/w" "$M1/p2"
(cd "$M2/p1/w" && creates . w 400) & p2=$!
# the worker is inside (and writing) before the rename
wait_for 30 test -e "$M1/p1/w/w20"
check clu_inodes_rename_dir mv "$M1/p1/w" "$M1/p2/w"
wait $p2
check clu_inodes_worker_done test $? -eq 0
check clu_inodes_renamed_on_1 test "$(ls "$M1/p2/w" | wc -l)" -eq 400
check clu_inodes_renamed_on_2 test "$(ls "$M2/p2/w" | wc -l)" -eq 400
check clu_inodes_old_name_gone test ! -e "$M2/p1/w" -a ! -e "$M1/p1/w"

# node 2 dies with frees in its log for node 1's groups (the truncates
# just before the kill: their entries are too young to be applied yet)
cp -r "$T/src" "$M1/t4" & p1=$!
rm -rf "$M2/t3"
wait $p1
# node 1 writes again (its groups, which node 2's free log may have
# taken, come back to it); node 2 truncates two of those files: their
# blocks are freed at once, into groups node 1 holds
mkdir "$M1/k"
for i in 0 1 2; do head -c 65536 /dev/urandom >"$M1/k/k$i"; done
: >"$M2/k/k0"
: >"$M2/k/k1"
# durable (the free log entries with them): a commit of node 2's journal
python3 -c "import os; fd=os.open('$M2/k/k1', os.O_RDONLY); os.fsync(fd)"
if command -v jq >/dev/null 2>&1; then
	"$B/ucfs-stat" --json "$M2" >"$T/st2k.json" 2>&1
	echo "node 2's free log before the kill: $(jq \
		'.alloc.flog_logged - .alloc.flog_applied' "$T/st2k.json") \
blocks not applied yet"
fi
fs_kill9 "$M2"
check clu_inodes_survivor_tree diff -r "$T/src" "$M1/t4"
head -c 300000 /dev/urandom >"$T/ref"
check clu_inodes_survivor_writes sh -c "cp '$T/ref' '$M1/after' && \
python3 -c \"import os; fd=os.open('$M1/after', os.O_RDONLY); os.fsync(fd)\""
check clu_inodes_survivor_reads cmp "$T/ref" "$M1/after"
check clu_inodes_umount1 fs_umount "$M1"
check clu_inodes_fsck_after_kill fs_fsck "$IMG"
fs_mount "$IMG" "$M2" "$(clu_opts "$CFG" 2)" || fail clu_inodes_remount2
check clu_inodes_remount_sees cmp "$T/ref" "$M2/after"
check clu_inodes_truncates_kept test ! -s "$M2/k/k0" -a ! -s "$M2/k/k1"
check clu_inodes_untouched_file test "$(stat -c %s "$M2/k/k2")" -eq 65536
check clu_inodes_umount2 fs_umount "$M2"
check clu_inodes_fsck_final fs_fsck "$IMG"
rm -f "$IMG"
exit 0
