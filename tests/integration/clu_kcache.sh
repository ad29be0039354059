#!/bin/sh
# clu_kcache: the kernel caches of a cluster mount (lockproto=dlm), kept
# under the cluster lock and dropped when it leaves the node (MOUNT.md
# "Kernel caches in cluster mounts"). Two nodes on one image; node B
# first reads (so its kernel caches), then node A changes, then B looks
# again and must see the change, never the cached copy:
#  * data: write(2) on A (same size, longer, shorter) seen by read(2) on
#    B; a second read on B is served by its page cache (no READ);
#  * attributes: chmod, chown, touch -d, truncate on A seen by stat on B,
#    also through an open file (fstat) and a working directory (stat .);
#  * names: create, unlink, rename, mkdir on A seen by lookup and readdir
#    on B, also where B cached the name as absent; `rm -rf d; mkdir d`
#    on A, then `ls d` on B is empty; the same for names in the root;
#  * shared mappings: a write through a shared mapping on A + msync seen
#    by read(2) on B; a shared mapping on B sees a write(2) of A;
#  * a change in one directory on A drops B's names of that directory
#    one by one (kcache.dirs), not every name (kcache.epochs stays);
#  * warm `du -s` on B is served by its kernel: the third one makes
#    (almost) no lookup, getattr or readdir request (stats);
#  * the kcache stats section counts what was dropped; both nodes
#    unmount and fsck.ucfs -n finds the image clean.
# Node 3 is a lockspace-only witness (tests/clulib.sh: quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_kcache jq

clu_two_nodes clu_kcache 256 -j 2 -r 64
MA=$M1 MB=$M2

# FUSE requests of kinds $2.. made on mount $1 so far
nops() {
	_m=$1; shift
	_q=$(printf '.fuse.ops.%s.count + ' "$@")
	clu_stat "$_m" | jq "${_q% + }"
}
eq() { [ "$1" = "$2" ] || { echo "got '$1', want '$2'"; return 1; }; }
# Run "$@" and print how many requests of kinds $REQS mount $MB made
# meanwhile; the least of 3 tries (another process's drop_caches may
# empty the kernel's caches under one).
served() {
	_best=""
	for _try in 1 2 3; do
		_n1=$(nops "$MB" $REQS)
		"$@" >/dev/null
		_d=$(($(nops "$MB" $REQS) - _n1))
		[ -z "$_best" ] || [ "$_d" -lt "$_best" ] && _best=$_d
	done
	echo "$_best"
}

check clu_kcache_stats_section sh -c "'$B/ucfs-stat' --json '$MB' |
	jq -e '.kcache.proto_minor > 0 and .kcache.errors == 0'"
minor=$(clu_stat "$MB" | jq .kcache.proto_minor)
if [ "$minor" -ge 44 ]; then
	check clu_kcache_names_cached sh -c "'$B/ucfs-stat' --json '$MB' |
		jq -e '.kcache.names_cached'"
fi

# ---- data ----
printf 'one one one\n' >"$MA/f"
check clu_kcache_read_first eq "$(cat "$MB/f")" "one one one"
check clu_kcache_page_cache eq "$(cat "$MB/f")" "one one one"
check clu_kcache_page_cache_no_read eq "$(REQS=read served cat "$MB/f")" 0
printf 'two two two\n' | dd of="$MA/f" conv=notrunc status=none
check clu_kcache_write_same_size eq "$(cat "$MB/f")" "two two two"
printf 'three\n' >>"$MA/f"
check clu_kcache_write_longer eq "$(cat "$MB/f" | tail -n 1)" "three"
printf 'four\n' >"$MA/f"
check clu_kcache_write_shorter eq "$(cat "$MB/f")" "four"
# a larger file read through B's readahead, rewritten in the middle
head -c 3000000 /dev/urandom >"$T/big"
cp "$T/big" "$MA/big"
check clu_kcache_big_first cmp "$T/big" "$MB/big"
head -c 70000 /dev/urandom >"$T/patch"
dd if="$T/patch" of="$T/big" bs=1 seek=1000000 conv=notrunc status=none
dd if="$T/patch" of="$MA/big" bs=1 seek=1000000 conv=notrunc status=none
check clu_kcache_big_rewritten cmp "$T/big" "$MB/big"

# ---- attributes ----
touch "$MA/g"
stat -c '%a %u %g %s %Y' "$MB/g" >/dev/null
chmod 640 "$MA/g"
check clu_kcache_chmod eq "$(stat -c %a "$MB/g")" 640
chown 1234:4321 "$MA/g"
check clu_kcache_chown eq "$(stat -c '%u %g' "$MB/g")" "1234 4321"
touch -d '2001-02-03 04:05:06 UTC' "$MA/g"
check clu_kcache_mtime eq "$(stat -c %Y "$MB/g")" 981173106
truncate -s 12345 "$MA/g"
check clu_kcache_size eq "$(stat -c %s "$MB/g")" 12345
exec 3<"$MB/g"	# an open file's attributes (fstat, no path walk)
truncate -s 777 "$MA/g"
check clu_kcache_size_open eq "$(stat -L -c %s /dev/fd/3)" 777
exec 3<&-

# a working directory's own attributes (stat ., no name looked up)
mkdir "$MA/cw"
(
	cd "$MB/cw" && stat -c %a . >/dev/null && : >"$T/cw.ready" &&
	while [ ! -e "$T/cw.go" ]; do sleep 0.1; done &&
	stat -c %a . >"$T/cw.out"
) &
cwp=$!
wait_for 10 test -e "$T/cw.ready"
chmod 700 "$MA/cw"
: >"$T/cw.go"
wait $cwp
check clu_kcache_cwd_attrs eq "$(cat "$T/cw.out")" 700

# ---- names ----
# in the root, which the kernel holds with no lookup (its lock's drop
# always tells the kernel)
check clu_kcache_root_absent_first test ! -e "$MB/rootname"
touch "$MA/rootname"
check clu_kcache_root_create_seen test -e "$MB/rootname"
rm "$MA/rootname"
check clu_kcache_root_unlink_seen test ! -e "$MB/rootname"
mkdir "$MA/d"
touch "$MA/d/a" "$MA/d/b"
check clu_kcache_ls_first eq "$(ls "$MB/d" | tr '\n' ' ')" "a b "
check clu_kcache_absent_first test ! -e "$MB/d/c"
touch "$MA/d/c"
check clu_kcache_create_seen test -e "$MB/d/c"
check clu_kcache_create_readdir eq "$(ls "$MB/d" | tr '\n' ' ')" "a b c "
rm "$MA/d/a"
check clu_kcache_unlink_seen test ! -e "$MB/d/a"
check clu_kcache_unlink_readdir eq "$(ls "$MB/d" | tr '\n' ' ')" "b c "
mv "$MA/d/b" "$MA/d/z"
check clu_kcache_rename_seen sh -c "test ! -e '$MB/d/b' && test -e '$MB/d/z'"
mkdir "$MA/d/sub"
check clu_kcache_mkdir_seen test -d "$MB/d/sub"
echo inside >"$MB/d/sub/x"
check clu_kcache_b_writes_seen_on_a eq "$(cat "$MA/d/sub/x")" inside
cd "$MB/d" || exit 1
rm -rf "$MA/d"
mkdir "$MA/d"
cd "$T" || exit 1
check clu_kcache_rm_rf_mkdir eq "$(ls -A "$MB/d" | wc -l)" 0
check clu_kcache_rm_rf_mkdir_stat test ! -e "$MB/d/sub/x"
ln -s target "$MA/l"
check clu_kcache_symlink eq "$(readlink "$MB/l")" target
rm "$MA/l"
ln -s other "$MA/l"
check clu_kcache_symlink_replaced eq "$(readlink "$MB/l")" other

# ---- shared mappings ----
head -c 16384 /dev/zero >"$MA/m"
cat "$MB/m" >/dev/null
check clu_kcache_mmap_write_a "$B/tests/mapop" write "$MA/m" 5000 "mapped-on-A"
check clu_kcache_mmap_seen_by_read_b eq \
	"$(dd if="$MB/m" bs=1 skip=5000 count=11 status=none)" "mapped-on-A"
"$B/tests/mapop" watch "$MB/m" 9000 "written-on-A" 30 >"$T/watch.out" 2>&1 &
wp=$!
wait_for 10 grep -q mapped "$T/watch.out"
printf 'written-on-A' | dd of="$MA/m" bs=1 seek=9000 conv=notrunc status=none
if wait $wp; then
	pass clu_kcache_mmap_b_sees_write_a
else
	fail clu_kcache_mmap_b_sees_write_a "$(cat "$T/watch.out")"
fi

# ---- a directory's lock drops that directory's names only ----
mkdir "$MA/px" "$MA/py"
touch "$MA/px/f1" "$MA/px/f2" "$MA/py/g"
stat "$MB/px/f1" "$MB/px/f2" "$MB/py/g" >/dev/null
check clu_kcache_dir_absent_first test ! -e "$MB/py/later"
k0=$(clu_stat "$MB" | jq -c '[.kcache.epochs, .kcache.dirs, .kcache.dir_fallbacks, .kcache.dir_skips, .kcache.entries]')
touch "$MA/py/later"
check clu_kcache_dir_create_seen test -e "$MB/py/later"
rm "$MA/py/g"
check clu_kcache_dir_unlink_seen test ! -e "$MB/py/g"
k1=$(clu_stat "$MB" | jq -c '[.kcache.epochs, .kcache.dirs, .kcache.dir_fallbacks, .kcache.dir_skips, .kcache.entries]')
# py's names went one by one (dirs moved), no epoch dropped px's
check clu_kcache_dir_names_only sh -c "echo '$k0 -> $k1';
	[ $(echo "$k0" | jq '.[0]') -eq $(echo "$k1" | jq '.[0]') ] &&
	[ $(echo "$k1" | jq '.[1]') -gt $(echo "$k0" | jq '.[1]') ]"
check clu_kcache_dir_px_kept sh -c "test -e '$MB/px/f1' && test -e '$MB/px/f2'"

# ---- warm du served by the kernel ----
clu_tree "$MA/tree" 20 20 || fail clu_kcache_tree
du -s "$MB/tree" >/dev/null
du -s "$MB/tree" >/dev/null
n=$(REQS="lookup getattr readdir readdirplus" served du -s "$MB/tree")
# 420 names, 20 directories: "almost none" is a handful. (The first
# warm du stats each directory again: a listing read from ucfs leaves
# its directory's atime stale in the kernel; the listings themselves
# come from the kernel's readdir cache from then on.)
check clu_kcache_du_warm sh -c "echo 'requests: $n'; [ $n -le 5 ]"

check clu_kcache_counted sh -c "'$B/ucfs-stat' --json '$MB' |
	jq -e '.kcache.attrs > 0 and .kcache.syncs > 0 and .kcache.errors == 0'"

check clu_kcache_umount2 fs_umount "$MB"
check clu_kcache_umount1 fs_umount "$MA"
check clu_kcache_fsck_clean fs_fsck "$IMG"
rm -f "$IMG"
exit 0
