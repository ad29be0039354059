#!/bin/sh
# clu_random: seeded random namespace operations from two nodes on ONE
# tree (issue 13's guarantee; tests/progs/nscheck.c, UCFS_SEED):
#  * in turns: nscheck --view runs every operation (create, mkdir,
#    unlink, rmdir, link, symlink, the renames, append, stat) through node
#    1, 2 or 3, drawn at random, checks its result (errno included)
#    against its model, and every 50 operations walks both nodes' whole
#    views against the model (names, d_type, nlink, st_ino, contents,
#    symlink targets): what one node did must be seen at once by the
#    others, with no stale positive or negative entry, attribute or page;
#    two seeds, one over nodes 1 and 2, one over all three;
#  * at once: nscheck --chaos on nodes 1 and 2 in one tree (results not
#    checked; an EIO or EUCLEAN fails it), then both nodes' views of the
#    whole tree (names, types, nlink, st_ino, size, symlink targets,
#    contents) must be equal;
#  * data: fsx on node 1 (writes, truncates, fallocate modes, punch,
#    zero, collapse/insert, copy_file_range, clone, O_DIRECT, fsync) with
#    its second descriptor on node 2 (fsx --other): every read and size
#    check there must see node 1's last change; two seeds;
#  * fsck.ucfs -n clean after both unmount.
# Nodes 4 and 5 are quorum witnesses (ucfs-witness). CLU_RANDOM_OPS
# (default 1,500) sets the operations per run for a longer soak.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_random

NS=$B/tests/nscheck
SEED=${UCFS_SEED:-13}
OPS=${CLU_RANDOM_OPS:-1500}	# per run; more for a long soak
echo "clu_random: seed $SEED (UCFS_SEED=$SEED to replay)"
clu_setup clu_random 3 128 -j 3 -r 64
for n in 1 2 3; do
	clu_mount clu_random $n
done

# ---- in turns, each result checked ----
check clu_random_turns_seed0 "$NS" --seed "$SEED" --ops "$OPS" \
	--verify-every 50 --names 6 --quiet --view "$M2" "$M1"
check clu_random_turns_3nodes_seed1 "$NS" --seed $((SEED + 1)) --ops "$OPS" \
	--verify-every 50 --names 6 --quiet --view "$M2" --view "$M3" "$M1"


# ---- at once, then the two views compared ----
view() {	# MOUNT: the tree as the node sees it, one line per object
	(cd "$1/chaos" && find . -printf '%P|%y|%n|%i|%s|%l\n' |
		LC_ALL=C sort &&
		find . -type f -exec md5sum {} + | LC_ALL=C sort)
}
mkdir "$M1/chaos"
clu_at_once clu_random_at_once \
	"'$NS' --seed $((SEED + 10)) --ops $OPS --names 5 --chaos '$M1/chaos'" \
	"'$NS' --seed $((SEED + 11)) --ops $OPS --names 5 --chaos '$M2/chaos'"
view "$M1" >"$T/view1"
view "$M2" >"$T/view2"
check clu_random_views_equal cmp -s "$T/view1" "$T/view2" ||
	diff "$T/view1" "$T/view2" | head -20
check clu_random_views_not_empty test "$(wc -l <"$T/view1")" -gt 3

# ---- data: changes on node 1, reads and sizes on node 2 ----
for k in 0 1; do
	s=$((SEED + 20 + k))
	: >"$M1/data$k"
	check "clu_random_data_seed$k" "$B/tests/fsx" --seed "$s" --ops "$OPS" \
		--maxlen 1048576 --quiet --other "$M2/data$k" "$M1/data$k"
done

for n in 1 2 3; do
	check clu_random_umount$n fs_umount "$T/m$n"
done
check clu_random_fsck fs_fsck "$IMG"
rm -f "$IMG"
exit 0
