#!/bin/sh
# fs_statahead: directory readahead on a real FUSE mount. A source tree
# (linux-quick.tar from the bench cache, else a generated one) is
# extracted, then each of statahead=0 and statahead=512 gets a fresh mount
# (cold daemon cache, empty kernel cache for the new mount) and runs
# du -s and a find listing every object's size, mode and link count. Both
# must print exactly the same; with statahead on, ucfs-stat must show the
# inode reads served by prefetched blocks (cache.ra_hits) and few demand
# misses, descends into the next level finished after their reply, with
# statahead=0 no prefetch hits from the walk. fsck at the end.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
fs_require_ucfs statahead

IMG=$T/img MNT=$T/mnt SRC=$T/src
QUICK=/var/cache/ucfs-bench/linux-quick.tar

fs_mkfs "$IMG" 512 || { fail statahead_mkfs; exit 1; }
fs_mount "$IMG" "$MNT" || { fail statahead_mount; exit 1; }
if [ -f "$QUICK" ]; then
	check statahead_untar tar -C "$MNT" -xf "$QUICK"
else
	# 40 directories of 50 small files, and a subdirectory in each
	i=0
	while [ $i -lt 40 ]; do
		mkdir -p "$MNT/d$i/sub"
		j=0
		while [ $j -lt 50 ]; do
			echo "$i $j" >"$MNT/d$i/f$j"
			echo "$j" >"$MNT/d$i/sub/f$j"
			j=$((j + 1))
		done
		i=$((i + 1))
	done
	pass statahead_untar
fi
check statahead_umount fs_umount "$MNT"

json() { jq -r "$1" "$T/stat.$2.json"; }

# walk OPTS TAG: fresh mount, du + listing, stats, umount
walk() {
	fs_mount "$IMG" "$MNT" "$1" || return 1
	du -s "$MNT" | cut -f1 >"$T/du.$2" &&
		(cd "$MNT" && find . -printf '%p %y %s %m %n\n' |
			LC_ALL=C sort) >"$T/list.$2" &&
		"$B/ucfs-stat" --json "$MNT" >"$T/stat.$2.json" &&
		fs_umount "$MNT"
}

check statahead_walk_off walk statahead=0 off
check statahead_walk_on walk statahead=512 on
n=$(wc -l <"$T/list.on")
echo "objects: $n; du: off $(cat "$T/du.off") on $(cat "$T/du.on")"
for tag in off on; do
	echo "statahead $tag: $(json '.cache | "misses \(.misses) readahead \(.readahead) ra_ios \(.ra_ios) ra_hits \(.ra_hits) ra_waits \(.ra_waits) wasted \(.ra_wasted)"' $tag);" \
		"readdirplus $(json '.fuse.ops.readdirplus.count' $tag)" \
		"lookup $(json '.fuse.ops.lookup.count' $tag)"
done
check statahead_same_du cmp "$T/du.off" "$T/du.on"
check statahead_same_listing cmp "$T/list.off" "$T/list.on"
check statahead_many_objects test "$n" -gt 1000
# on: most inode reads were prefetched blocks, few demand misses
check statahead_hits test "$(json .cache.ra_hits on)" -gt $((n * 9 / 10))
check statahead_few_misses test "$(json .cache.misses on)" -lt $((n / 10))
check statahead_batched test "$(json .cache.ra_ios on)" -lt \
	"$(json .cache.readahead on)"
# on: the descends into the next level beyond a first subdirectory ran
# after their replies (the adapter's fs_sa_defer_end)
check statahead_descends test "$(json .namespace.statahead_descends on)" -gt 0
check statahead_after_reply test \
	"$(json .namespace.statahead_after_reply on)" -gt 0
# off: every inode of the walk was a demand read
check statahead_off_misses test "$(json .cache.misses off)" -gt \
	$((n * 9 / 10))
check statahead_off_no_hits test "$(json .cache.ra_hits off)" -lt 64
check statahead_fsck fs_fsck "$IMG"
