#!/bin/sh
# clu_create: creates cost no lock round trip (lock placement,
# lockmgr/PROTOCOL.md §5; FORMAT.md "Cluster locks"). Two lockproto=dlm
# nodes each create $N files (UCFS_CREATE_N, default 2000) in a
# directory of their own, at the same time. From each node's stats
# (before and after the creates): the remote lock round trips (master
# lookups sent to another node's directory, plus grants by another
# master) per created inode stay <= 0.05 — without placement a new
# inode's lock has its directory on the other node half the time (~0.5
# per file). Then both nodes list all 2 x $N names. Then numbers used
# again (below). After both unmount fsck.ucfs -n finds the image clean.
# Node 3 is a quorum witness.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_create

N=${UCFS_CREATE_N:-2000}
clu_two_nodes clu_create 512 -j 2 -r 32

mkdir "$M1/d1" && mkdir "$M2/d2" || { fail clu_create_mkdir; exit 1; }
# one file each first: the directories' own locks settle
: >"$M1/d1/first" && : >"$M2/d2/first"
"$B/ucfs-stat" --json "$M1" >"$T/b1.json"
"$B/ucfs-stat" --json "$M2" >"$T/b2.json"
mkfiles() {	# DIR TAG [COUNT]
	python3 - "$1" "$2" "${3:-$N}" <<'PY'
import os, sys
d, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(n):
    os.close(os.open("%s/%s-%06d" % (d, tag, i),
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
PY
}
clu_at_once clu_create_both 'mkfiles "$M1/d1" a' 'mkfiles "$M2/d2" b'
"$B/ucfs-stat" --json "$M1" >"$T/a1.json"
"$B/ucfs-stat" --json "$M2" >"$T/a2.json"

# remote round trips per created inode, from the counters that lk has
# always had (lookups sent, remote grants), and the sum the stats give
rtt_per_create() {	# BEFORE AFTER
	jq -n --slurpfile a "$1" --slurpfile b "$2" '
	def rtt: (.locks.lookups // 0) +
		([.locks.types[]? | .grants_remote // 0] | add // 0);
	def mine: .locks.remote_round_trips // null;
	($b[0].namespace.inodes_created - $a[0].namespace.inodes_created)
		as $n |
	(($b[0] | rtt) - ($a[0] | rtt)) as $r |
	{created: $n, rtt: $r, per: (if $n > 0 then $r / $n else 99 end),
	 sum_ok: (($b[0] | mine) == null or
		(($b[0] | mine) - ($a[0] | mine)) == $r)}'
}
rtt_ok() {	# BEFORE AFTER NODE
	_r=$(rtt_per_create "$1" "$2") || return 1
	echo "node $3: $_r" | tr -d '\n '; echo
	echo "$_r" | jq -e --argjson n "$N" \
		'.created >= $n and .per <= 0.05 and .sum_ok' >/dev/null
}
check clu_create_rtt_node1 rtt_ok "$T/b1.json" "$T/a1.json" 1
check clu_create_rtt_node2 rtt_ok "$T/b2.json" "$T/a2.json" 2
rtt_ok "$T/b1.json" "$T/a1.json" 1 | sed 's/^/  /'
rtt_ok "$T/b2.json" "$T/a2.json" 2 | sed 's/^/  /'

names_ok() {	# MNT: both directories hold exactly the names made
	for _d in d1 d2; do
		_c=$(ls -f "$1/$_d" | grep -vc '^\.\.\?$')
		[ "$_c" -eq $((N + 1)) ] || {
			echo "$1/$_d: $_c names, want $((N + 1))"; return 1; }
	done
}
check clu_create_names_node1 names_ok "$M1"
check clu_create_names_node2 names_ok "$M2"

# numbers used again: node 2 removes node 1's files (it then holds their
# inode locks EX, cached; the frees reach node 1's groups through its
# free log) while node 1 creates as many again. A new number whose lock
# node 2 still holds is refused by node 1's try and another taken (the
# stats count it): all files are there on both nodes, fsck is clean.
rm -rf "$M2/d1" & P2=$!
mkdir "$M1/d3"
mkfiles "$M1/d3" c >"$T/mk3.out" 2>&1; R1=$?
wait $P2; R2=$?
mkfiles "$M1/d3" e >>"$T/mk3.out" 2>&1 || R1=1
if [ $R1 -eq 0 ] && [ $R2 -eq 0 ]; then pass clu_create_reuse
else fail clu_create_reuse "$(cat "$T/mk3.out")"; fi
reuse_ok() {	# MNT
	[ ! -e "$1/d1" ] || { echo "$1/d1 still there"; return 1; }
	_c=$(ls -f "$1/d3" | grep -vc '^\.\.\?$')
	[ "$_c" -eq $((2 * N)) ] || { echo "$1/d3: $_c, want $((2 * N))"; return 1; }
}
check clu_create_reuse_node1 reuse_ok "$M1"
check clu_create_reuse_node2 reuse_ok "$M2"

# UCFS_CREATE_REUSE=1 (about a minute more): the same numbers again,
# surely. Node 1 makes $N files in d4 (inode chunks are found from the
# parent's block on), node 2 removes them (holding their locks EX) and
# its free log gives the blocks back; node 1's next chunk searches from
# d4 find them: its EX tries are refused (counted), other numbers taken
# or the lock waited for with no handle; every file is made. (Each
# reused number costs a demote on node 2, as it did when the lock was
# taken after the transaction: main took as long.)
if [ "${UCFS_CREATE_REUSE:-0}" = 1 ]; then
	mkdir "$M1/d4"
	mkfiles "$M1/d4" f >"$T/mk4.out" 2>&1
	rm -f "$M2"/d4/f-*
	flog_done() {	# node 2's free log applied
		"$B/ucfs-stat" --json "$M2" | jq -e \
			'.alloc.flog_logged == .alloc.flog_applied' >/dev/null
	}
	wait_for 30 flog_done
	refused() { "$B/ucfs-stat" --json "$M1" | jq '.namespace |
		(.new_inode_refused // 0) + (.new_inode_waits // 0) +
		(.new_inode_unlocked // 0)'; }
	r0=$(refused)
	mkfiles "$M1/d4" g >>"$T/mk4.out" 2>&1
	mkfiles "$M1/d4" h >>"$T/mk4.out" 2>&1
	check clu_create_reused_names \
		test "$(ls "$M2/d4" | wc -l)" -eq $((2 * N))
	r1=$(refused)
	echo "  node 1: new-inode locks refused $((r1 - r0)) times"
	check clu_create_reused_refused test "$r1" -gt "$r0"
fi
check clu_create_umount2 fs_umount "$M2"
check clu_create_umount1 fs_umount "$M1"
if "$B/fsck.ucfs" -n "$IMG" >"$T/fsck.out" 2>&1; then
	pass clu_create_fsck_clean
else
	fail clu_create_fsck_clean "$(head -5 "$T/fsck.out")"
fi
