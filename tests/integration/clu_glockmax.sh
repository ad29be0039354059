#!/bin/sh
# clu_glockmax: the glock bound (mount option glock_max=, MOUNT.md) on a
# lockproto=dlm node. Node 1 mounts with glock_max=64 and touches 1,000
# files and 10 directories (a create, then a stat, each taking the
# inode's glock): the stats show the bound (glocks.glock_max 64), the
# table stays within it plus the glocks in use (the resource groups'),
# idle glocks were dropped from the LRU (evictions > 0; the kernel is
# asked to forget the inodes it holds beyond the bound), and node 2,
# mounted with the default bound, reads every file back (a dropped glock
# wrote back what it covered and gave the lock up). A bad value is
# refused with a message. Node 3 is a lockspace-only witness (quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_glockmax jq

clu_setup clu_glockmax 2 256 -j 2 -r 64
MA=$M1 MB=$M2

# a value out of range: refused, nothing mounted
clu_refused clu_glockmax_bad_value "glock_max" "$IMG" \
	"$(clu_opts "$CFG" 1 glock_max=3)"

clu_mount clu_glockmax 1 glock_max=64
clu_mount clu_glockmax 2

d=0
while [ $d -lt 10 ]; do
	mkdir "$MA/d$d"
	i=0
	while [ $i -lt 100 ]; do
		echo "$d.$i" >"$MA/d$d/f$i"
		i=$((i + 1))
	done
	d=$((d + 1))
done
ls -lR "$MA" >/dev/null
# the glocks of inodes the kernel still holds stay until it forgets
# them (asked by the node: NOTIFY_PRUNE, MOUNT.md glock_max=): wait
# for that (at most 20 s; not a timed assert)
i=0
while [ $i -lt 200 ]; do
	"$B/ucfs-stat" --json "$MA" >"$T/s1.json"
	jq -e '.glocks.glocks_now <= 64 + 8' "$T/s1.json" >/dev/null && break
	sleep 0.1
	i=$((i + 1))
done
jq '.glocks | {glock_max, glocks_now, idle_now, held_now,
	evictions: ([.types[] | .evictions // 0] | add)}' "$T/s1.json"
check clu_glockmax_bound jq -e '.glocks.glock_max == 64' "$T/s1.json"
# the resource groups' glocks are kept for the mount (4 here, 256 MiB
# in 64 MiB groups) besides the bound
check clu_glockmax_table jq -e '.glocks.glocks_now <= 64 + 8' "$T/s1.json"
check clu_glockmax_evicted jq -e \
	'[.glocks.types[] | .evictions // 0] | add > 0' "$T/s1.json"

bad=0
d=0
while [ $d -lt 10 ]; do
	i=0
	while [ $i -lt 100 ]; do
		[ "$(cat "$MB/d$d/f$i")" = "$d.$i" ] || bad=$((bad + 1))
		i=$((i + 1))
	done
	d=$((d + 1))
done
check clu_glockmax_other_reads test $bad -eq 0

fs_umount "$MB" || fail clu_glockmax_umount2
fs_umount "$MA" || fail clu_glockmax_umount1
check clu_glockmax_fsck "$B/fsck.ucfs" -n "$IMG"
