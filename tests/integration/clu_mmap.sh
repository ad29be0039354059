#!/bin/sh
# clu_mmap: shared writable mappings in a cluster mount (lockproto=dlm)
# are coherent at lock granularity, as on GFS2 (MOUNT.md "Cluster
# mounts"). Two nodes on one image; B first reads the file (its kernel
# caches the pages):
#  * A stores through a shared mapping and msyncs: a read(2) on B and a
#    mapping B makes afterwards see the store;
#  * A stores through a shared mapping and keeps it, no msync: B's
#    read(2) forces A's lock down, whose demote has A's kernel write the
#    page back first; a mapping B makes then sees it too;
#  * the same from B to A, and both storing into one page in turns (each
#    node's store survives the other's);
#  * the kcache and lock counters show the flushes; both unmount,
#    fsck.ucfs -n finds the image clean.
# Node 3 is a lockspace-only witness (tests/clulib.sh: quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_mmap jq

clu_two_nodes clu_mmap 128 -j 2 -r 64
MA=$M1 MB=$M2

eq() { [ "$1" = "$2" ] || { echo "got '$1', want '$2'"; return 1; }; }
at() { dd if="$1" bs=1 skip="$2" count="$3" status=none; }
# hold NODE_DIR OFF STRING TAG: a mapping that stored STRING, kept
# until $T/TAG.go exists
hold() {
	"$B/tests/mapop" hold "$1/m" "$2" "$3" "$T/$4.go" >"$T/$4.out" 2>&1 &
	eval "${4}_pid=\$!"
	wait_for 20 grep -q stored "$T/$4.out"
}
release() {	# TAG: PASS/FAIL clu_mmap_release_TAG
	: >"$T/$1.go"
	if eval "wait \$${1}_pid"; then
		pass "clu_mmap_release_$1"
	else
		fail "clu_mmap_release_$1" "$(cat "$T/$1.out")"
	fi
}

head -c 65536 /dev/zero >"$MA/m"
check clu_mmap_b_caches eq "$(at "$MB/m" 5000 4 | od -An -tx1 | tr -d ' ')" \
	00000000

# ---- with msync ----
check clu_mmap_msync_write "$B/tests/mapop" write "$MA/m" 5000 "msync-on-A"
check clu_mmap_msync_read_b eq "$(at "$MB/m" 5000 10)" "msync-on-A"
check clu_mmap_msync_map_b eq "$("$B/tests/mapop" read "$MB/m" 5000 10)" \
	"msync-on-A"

# ---- no msync: B's read forces A's lock down ----
hold "$MA" 20000 "held-on-A" ha
check clu_mmap_nosync_read_b eq "$(at "$MB/m" 20000 9)" "held-on-A"
check clu_mmap_nosync_map_b eq "$("$B/tests/mapop" read "$MB/m" 20000 9)" \
	"held-on-A"
release ha

# ---- the other way: B stores, A reads ----
hold "$MB" 40000 "held-on-B" hb
check clu_mmap_nosync_read_a eq "$(at "$MA/m" 40000 9)" "held-on-B"
check clu_mmap_nosync_map_a eq "$("$B/tests/mapop" read "$MA/m" 40000 9)" \
	"held-on-B"
release hb

# ---- both nodes store into one page in turns, mappings kept ----
hold "$MA" 60000 "AAAA" t1
hold "$MB" 60004 "BBBB" t2
check clu_mmap_turns_b_sees_both eq "$(at "$MB/m" 60000 8)" "AAAABBBB"
check clu_mmap_turns_a_sees_both eq "$(at "$MA/m" 60000 8)" "AAAABBBB"
release t1
release t2
check clu_mmap_turns_after_unmap eq "$(at "$MB/m" 60000 8)" "AAAABBBB"
check clu_mmap_earlier_kept eq "$(at "$MA/m" 5000 10)$(at "$MA/m" 20000 9)" \
	"msync-on-Aheld-on-A"

check clu_mmap_flush_counted sh -c "'$B/ucfs-stat' --json '$MA' |
	jq -e '.kcache.flushes > 0 and .kcache.errors == 0'"

check clu_mmap_umount2 fs_umount "$MB"
check clu_mmap_umount1 fs_umount "$MA"
check clu_mmap_fsck_clean fs_fsck "$IMG"
rm -f "$IMG"
exit 0
