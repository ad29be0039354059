#!/bin/sh
# clu_gen: an inode lock's value block generation moves on only when the
# node giving up EX changed the inode (fs_glock_ops.stamp/changed, the
# journal's owner table), so that the other node keeps the blocks it
# cached when nothing changed, and drops them when something did.
# Two nodes hold one file open O_RDWR, so every read there takes the
# inode's lock in EX (MOUNT.md "Shared writable mappings"): reads on A
# and B in turns move the lock at each read with no change:
#  (1) every read returns the file's bytes; the EX turns left the
#      generation as it was (glocks.types.inode.gen_kept grows on both)
#      and no turn made a node drop its cached blocks (invals stay);
#  (2) then A writes: B's next read returns A's bytes, its stat the new
#      size, and B dropped its cache (invals + 1); after B appends, A
#      sees that too;
#  (3) fsck.ucfs -n is clean after both unmount.
# Node 3 is a quorum witness (ucfs-witness).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_gen jq

N=20
clu_two_nodes clu_gen 128 -j 2 -r 64

st() { clu_stat "$1" ".glocks.types.inode.$2 // 0"; } # MOUNT KEY

printf 'version one\n' >"$M1/f"
exec 3<>"$M1/f" 4<>"$M2/f"
check clu_gen_first_read_a test "$(cat "$M1/f")" = "version one"
check clu_gen_first_read_b test "$(cat "$M2/f")" = "version one"
ia=$(st "$M1" invals) ib=$(st "$M2" invals)
ka=$(st "$M1" gen_kept) kb=$(st "$M2" gen_kept)

# (1) reads in turns: each takes EX, nothing changes
bad=0 i=0
while [ $i -lt $N ]; do
	[ "$(cat "$M1/f")" = "version one" ] || bad=$((bad + 1))
	[ "$(cat "$M2/f")" = "version one" ] || bad=$((bad + 1))
	i=$((i + 1))
done
check clu_gen_reads_exact test "$bad" -eq 0
ia2=$(st "$M1" invals) ib2=$(st "$M2" invals)
ka2=$(st "$M1" gen_kept) kb2=$(st "$M2" gen_kept)
echo "reads in turns: invals A $ia -> $ia2, B $ib -> $ib2;" \
	"gen_kept A $ka -> $ka2, B $kb -> $kb2"
check clu_gen_kept_a test "$ka2" -gt "$ka"
check clu_gen_kept_b test "$kb2" -gt "$kb"
check clu_gen_no_inval_a test "$ia2" -eq "$ia"
check clu_gen_no_inval_b test "$ib2" -eq "$ib"

# (2) a change moves it: the other node drops and sees it
printf 'version two, longer\n' >"$M1/f"
check clu_gen_b_sees_write test "$(cat "$M2/f")" = "version two, longer"
check clu_gen_b_stat_size test "$(stat -c %s "$M2/f")" -eq 20
check clu_gen_b_dropped test "$(st "$M2" invals)" -gt "$ib2"
printf 'three\n' >>"$M2/f"
check clu_gen_a_sees_append test "$(tail -n 1 "$M1/f")" = "three"
check clu_gen_a_stat_size test "$(stat -c %s "$M1/f")" -eq 26

exec 3>&- 4>&-
# (3)
check clu_gen_umount2 fs_umount "$M2"
check clu_gen_umount1 fs_umount "$M1"
check clu_gen_fsck fs_fsck "$IMG"
rm -f "$IMG"
exit 0
