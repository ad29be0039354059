#!/bin/sh
# clu_basic: lockproto=dlm, several ucfs processes (nodes 1..3, each its
# own lock manager node on 127.0.0.<id>) on ONE image, mkfs -j 3 -p dlm:
#  * wrong options and wrong images are refused with a clear message and
#    nothing is mounted;
#  * a file written on one node reads back byte-identical on the other,
#    both ways; mkdir / rename / unlink on one node are seen on the other;
#    a file unlinked while open stays readable on its node;
#    appends from two nodes taking turns keep every line in order; two
#    nodes untar the same tree into separate directories at once and each
#    sees the other's tree identical to the source (diff -r);
#  * a nolock mount is refused while dlm nodes are mounted; a fourth
#    node finds all 3 journal slots in use;
#  * a third node sees everything and its writes are seen; stats carry
#    the "cluster" section;
#  * every node unmounts cleanly and fsck.ucfs -n finds the image clean.
# Nodes 5..7 are lockspace-only witnesses (tests/clulib.sh: quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_basic

IMG=$T/img CFG=$T/cluster.json
clu_config "$CFG" 1 2 3 4 5 6 7
for w in 5 6 7; do clu_witness "$CFG" $w; done
fs_mkfs "$IMG" 512 -j 3 -J 8 -r 64 -p dlm -t clu:fs1 || {
	fail clu_mkfs; exit 1; }

# refused (tests/clulib.sh clu_refused): an exit != 0, the message, and
# no mount
clu_refused clu_refuse_no_cluster "needs cluster=FILE" "$IMG" lockproto=dlm
clu_refused clu_refuse_missing_file "cluster=$T/none.json" "$IMG" \
	"$(clu_opts "$T/none.json" 1)"
clu_refused clu_refuse_unknown_node "node=9 is not a node of" "$IMG" \
	"$(clu_opts "$CFG" 9)"
clu_refused clu_refuse_cluster_without_dlm "need lockproto=dlm" "$IMG" \
	"cluster=$CFG,node=1"
clu_refused clu_refuse_hb_interval \
	"hb_interval must be at most hb_timeout / 4" "$IMG" \
	 "$(clu_opts "$CFG" 1 hb_interval=1000,hb_timeout=2000)"
clu_refused clu_refuse_hb_without_dlm "need lockproto=dlm" "$IMG" \
	hb_timeout=3000
clu_refused clu_refuse_writeback_cache "writeback_cache" "$IMG" \
	"$(clu_opts "$CFG" 1 writeback_cache)"
fs_mkfs "$T/nolock.img" 128 -j 2 -p nolock ||
	fail clu_mkfs_nolock
clu_refused clu_refuse_nolock_image "made for lockproto=nolock" \
	"$T/nolock.img" "$(clu_opts "$CFG" 1)"
fs_mkfs "$T/other.img" 128 -j 2 -p dlm -t other:fs1 || fail clu_mkfs_other
clu_refused clu_refuse_other_cluster "lock table is 'other:fs1'" \
	"$T/other.img" "$(clu_opts "$CFG" 1)"
rm -f "$T/nolock.img" "$T/other.img"

M1=$T/m1 M2=$T/m2 M3=$T/m3
fs_mount "$IMG" "$M1" "$(clu_opts "$CFG" 1)" || { fail clu_mount1; exit 1; }
fs_mount "$IMG" "$M2" "$(clu_opts "$CFG" 2)" || { fail clu_mount2; exit 1; }
pass clu_mount_two_nodes

# data both ways
head -c 3000000 /dev/urandom >"$T/r1"
head -c 1234567 /dev/urandom >"$T/r2"
cp "$T/r1" "$M1/one"
check clu_write1_read2 cmp "$T/r1" "$M2/one"
cp "$T/r2" "$M2/two"
check clu_write2_read1 cmp "$T/r2" "$M1/two"
dd if="$T/r2" of="$M2/one" bs=4096 seek=10 conv=notrunc status=none
cp "$T/r1" "$T/r1x"
dd if="$T/r2" of="$T/r1x" bs=4096 seek=10 conv=notrunc status=none
check clu_overwrite2_read1 cmp "$T/r1x" "$M1/one"

echo "a longer first line" >"$M1/trunc"
echo x >"$M2/trunc"
check clu_truncate_seen test "$(cat "$M1/trunc")" = x

# namespace
mkdir "$M1/dir" && echo x >"$M1/dir/f"
check clu_mkdir_seen test -d "$M2/dir" -a -f "$M2/dir/f"
mv "$M2/dir" "$M2/dir2"
check clu_rename_seen sh -c "test -d '$M1/dir2' -a ! -e '$M1/dir'"
rm "$M1/dir2/f"
check clu_unlink_seen sh -c "test ! -e '$M2/dir2/f' && rmdir '$M2/dir2'"
check clu_rmdir_seen test ! -e "$M1/dir2"

# a file unlinked while open on the same node stays readable; its last
# close (a PR request) leaves it for the next EX request to free
cp "$T/r2" "$M1/open"
exec 3<"$M1/open"
rm "$M1/open"
check clu_unlinked_open_readable sh -c "cat <&3 | cmp - '$T/r2'"
exec 3<&-
check clu_unlinked_gone_on_other test ! -e "$M2/open"
touch "$M1/after-close"

# appends taking turns
i=1
while [ $i -le 100 ]; do
	echo "node1 $i" >>"$M1/log"
	echo "node2 $i" >>"$M2/log"
	i=$((i + 1))
done
i=1
while [ $i -le 100 ]; do
	echo "node1 $i"; echo "node2 $i"
	i=$((i + 1))
done >"$T/log.want"
check clu_alternate_appends cmp "$T/log.want" "$M1/log"
check clu_alternate_appends_other_node cmp "$T/log.want" "$M2/log"

# two untars at once
mkdir -p "$T/src"
d=0
while [ $d -lt 12 ]; do
	mkdir -p "$T/src/d$d/sub"
	f=0
	while [ $f -lt 15 ]; do
		head -c $(((d * 15 + f) * 211 % 20000)) /dev/urandom \
			>"$T/src/d$d/f$f"
		f=$((f + 1))
	done
	echo "$d" >"$T/src/d$d/sub/s"
	ln -s "f1" "$T/src/d$d/link"
	d=$((d + 1))
done
tar -C "$T/src" -cf "$T/src.tar" .
mkdir "$M1/t1" "$M2/t2"
tar -C "$M1/t1" -xf "$T/src.tar" & p1=$!
tar -C "$M2/t2" -xf "$T/src.tar" & p2=$!
ok=1
wait $p1 || ok=0
wait $p2 || ok=0
[ $ok = 1 ] && pass clu_two_untars || fail clu_two_untars
check clu_untar1_seen_on_2 diff -r "$T/src" "$M2/t1"
check clu_untar2_seen_on_1 diff -r "$T/src" "$M1/t2"

# nolock refused while dlm nodes are mounted (it waits 10 s first)
clu_refused clu_refuse_nolock_while_dlm "already mounted" "$IMG" \
	lockproto=nolock

# a third node
fs_mount "$IMG" "$M3" "$(clu_opts "$CFG" 3)" || { fail clu_mount3; exit 1; }
check clu_node3_sees_tree diff -r "$T/src" "$M3/t2"
check clu_node3_sees_data cmp "$T/r1x" "$M3/one"
echo three >"$M3/three"
check clu_node3_write_seen grep -q three "$M1/three"
clu_refused clu_refuse_no_free_slot "all 3 journal slots are in use" \
	"$IMG" "$(clu_opts "$CFG" 4)"

# stats
if command -v jq >/dev/null 2>&1; then
	"$B/ucfs-stat" --json "$M1" >"$T/st.json" 2>&1
	check clu_stats_cluster_section jq -e \
		'.cluster.node_id == 1 and .cluster.glock_acquires > 0 and
		 .cluster.lvb_generation > 0 and .node.id == 1' "$T/st.json"
else
	skip clu_stats_cluster_section "jq missing"
fi

check clu_umount3 fs_umount "$M3"
check clu_umount2 fs_umount "$M2"
check clu_umount1 fs_umount "$M1"
check clu_fsck_clean fs_fsck "$IMG"
rm -f "$IMG"
exit 0
