#!/bin/sh
# clu_atime: relatime in a cluster mount (lockproto=dlm; MOUNT.md
# "Cluster mounts"). Two nodes on one image:
#  * a read on B of a file whose atime is older than its mtime moves
#    its atime (one EX of the inode's lock), and A's stat sees it;
#  * a second read on B (O_DIRECT, so that it reaches ucfs) leaves it:
#    atime is newer than mtime and less than a day old, the read needs
#    the lock in PR only;
#  * a node mounted with noatime never moves it;
#  * both unmount, fsck.ucfs -n finds the image clean.
# Node 3 is a lockspace-only witness (tests/clulib.sh: quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_atime

clu_setup clu_atime 2 128 -j 2 -r 64
clu_mount clu_atime 1 noatime
clu_mount clu_atime 2 relatime
MA=$M1 MB=$M2

eq() { [ "$1" = "$2" ] || { echo "got '$1', want '$2'"; return 1; }; }
newer() { [ "$1" -gt "$2" ] || { echo "$1 is not after $2"; return 1; }; }
atime() { stat -c %X "$1"; }

head -c 8192 /dev/urandom >"$MA/f"
touch -a -d '2001-02-03 04:05:06 UTC' "$MA/f"
old=$(atime "$MA/f")
mtime=$(stat -c %Y "$MA/f")
check clu_atime_set eq "$old" 981173106
check clu_atime_b_sees_old eq "$(atime "$MB/f")" "$old"
cat "$MB/f" >/dev/null
first=$(atime "$MB/f")
check clu_atime_read_moves newer "$first" "$old"
check clu_atime_read_moves_not_before_mtime sh -c "[ $first -ge $mtime ]"
check clu_atime_seen_by_a eq "$(atime "$MA/f")" "$first"
sleep 1.1	# a second apart: a move would show (not a timed assert)
dd if="$MB/f" of=/dev/null bs=4096 iflag=direct status=none
check clu_atime_second_read_stays eq "$(atime "$MB/f")" "$first"
check clu_atime_second_read_stays_a eq "$(atime "$MA/f")" "$first"

# noatime on A: a read there (O_DIRECT: it reaches ucfs) moves nothing,
# also when atime is older than mtime
touch -a -d '2001-02-03 04:05:06 UTC' "$MA/f"
dd if="$MA/f" of=/dev/null bs=4096 iflag=direct status=none
check clu_atime_noatime_stays eq "$(atime "$MA/f")" 981173106
check clu_atime_noatime_stays_b eq "$(atime "$MB/f")" 981173106

check clu_atime_umount2 fs_umount "$MB"
check clu_atime_umount1 fs_umount "$MA"
check clu_atime_fsck_clean fs_fsck "$IMG"
rm -f "$IMG"
exit 0
