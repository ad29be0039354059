#!/bin/sh
# clu_rdp: readdirplus entries sent bare (FUSE nodeid 0: fs.h
# FS_READDIR_BARE) on a cluster mount: what keeps node A's kernel true is
# the cluster lock, not readdirplus. Node A makes a directory (its kernel
# holds every inode) and reads it as rm -rf does (tests/rdpwalk.py: one
# getdents, so those entries were just handed out); node B then changes
# it; A reads it again to the end (the entries whose inode A's kernel
# holds go bare if B was quick) and stats every entry. A's view must
# equal B's (name, type, mode, links, size, owner, mtime, inode), the old
# names must be gone on A, and a name A had cached as absent must be
# found:
#  * round 1: attributes and data only (chmod, chown, touch, a longer
#    and a truncated file): the directory's lock stays on A, so A's
#    kernel keeps the names and inodes, the entries go bare and only the
#    inodes' locks (their attributes dropped on A) make A see B's change;
#  * round 2: chmod, a rename onto a name A cached as absent, unlink,
#    unlink and create again under the same name, a longer file, touch
#    (the directory's lock leaves A, which drops the names it holds
#    there, and its kernel then forgets their inodes: full entries);
#  * round 3: a subdirectory removed and made again, a hard link, a
#    rename between directories, chown;
#  * round 4: names in a directory of 60 entries (more than one
#    readdirplus page: rm's second read goes on with plain READDIR).
# How many entries went bare, and how long B took, is printed (bare
# entries need the second read within a second of the first); the
# one-node fs_rdp checks that they are sent. Both nodes unmount and
# fsck.ucfs -n finds the image clean.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_rdp jq python3

clu_two_nodes clu_rdp 128 -j 2 -r 32
MA=$M1 MB=$M2
WALK="python3 $UCFS_TOP/tests/rdpwalk.py"

bare() { "$B/ucfs-stat" --json "$MA" | jq .namespace.readdir_bare; }
# round N DIR CHANGES: A's first read, B's CHANGES (eval'd), A's second
# read compared with B's plain view
round() {
	_rn=$1 _d=$2
	rm -f "$T/go$_rn" "$T/go$_rn.ready"
	_b0=$(bare)
	$WALK --wait "$T/go$_rn" "$MA/$_d" >"$T/a$_rn.out" 2>"$T/a$_rn.err" &
	_w=$!
	if ! wait_for 60 test -e "$T/go$_rn.ready"; then
		fail "clu_rdp_round${_rn}_first_read" "$(cat "$T/a$_rn.err")"
		kill $_w 2>/dev/null
		return
	fi
	_t0=$(date +%s%N)
	(eval "$3") >"$T/b$_rn.log" 2>&1 ||
		fail "clu_rdp_round${_rn}_changes" "$(cat "$T/b$_rn.log")"
	touch "$T/go$_rn"
	echo "round $_rn: B's changes took $((($(date +%s%N) - _t0) / 1000000)) ms"
	wait $_w
	_rc=$?
	cat "$T/a$_rn.err"
	check "clu_rdp_round${_rn}_walk" [ "$_rc" = 0 ]
	$WALK --plain "$MB/$_d" >"$T/b$_rn.out"
	echo "round $_rn: bare entries $(($(bare) - _b0))"
	check "clu_rdp_round${_rn}_same" diff "$T/b$_rn.out" "$T/a$_rn.out"
}
absent() { ! stat "$1" >/dev/null 2>&1; }

# ---- round 1: attributes and data only ----
mkdir "$MA/d"
for i in $(seq 1 12); do echo "$i" >"$MA/d/f$i"; done
mkdir "$MA/d/s1" "$MA/d/s2"
echo x >"$MA/d/s1/x"
# B reads the directory first: both nodes hold its lock in PR, so that
# B's changes of the files take only their locks from A
ls -lR "$MB/d" >/dev/null
round 1 d "
	chmod 640 '$MB/d/f10'
	touch -d '2002-03-04 05:06:07' '$MB/d/f11'
	echo more >>'$MB/d/f12'
	chown 7:8 '$MB/d/f1'
	truncate -s 0 '$MB/d/f2'"

# ---- round 2: names ----
absent "$MA/d/g1"	# A's kernel caches "g1" as absent
round 2 d "
	chmod 600 '$MB/d/f1'
	mv '$MB/d/f2' '$MB/d/g1'
	rm '$MB/d/f3'
	rm '$MB/d/f4' && echo again >'$MB/d/f4'
	echo longer and longer >>'$MB/d/f5'
	touch -d '2001-02-03 04:05:06' '$MB/d/f6'"
check clu_rdp_renamed_old_gone absent "$MA/d/f2"
check clu_rdp_unlinked_gone absent "$MA/d/f3"
check clu_rdp_absent_now_found test -f "$MA/d/g1"
check clu_rdp_recreated_data [ "$(cat "$MA/d/f4")" = again ]
check clu_rdp_mode_seen [ "$(stat -c %a "$MA/d/f1")" = 600 ]

# ---- round 3 ----
round 3 d "
	rm -rf '$MB/d/s1' && mkdir '$MB/d/s1'
	ln '$MB/d/f7' '$MB/d/s2/f7link'
	mv '$MB/d/f8' '$MB/d/s2/f8'
	chown 123:456 '$MB/d/f9'"
check clu_rdp_subdir_new_empty [ -z "$(ls -A "$MA/d/s1")" ]
check clu_rdp_link_count [ "$(stat -c %h "$MA/d/f7")" = 2 ]
check clu_rdp_moved_gone absent "$MA/d/f8"
check clu_rdp_moved_found test -f "$MA/d/s2/f8"
check clu_rdp_owner_seen [ "$(stat -c %u:%g "$MA/d/f9")" = 123:456 ]
$WALK --plain "$MB/d/s2" >"$T/s2.b"
check clu_rdp_round3_sub_same sh -c "$WALK '$MA/d/s2' | diff '$T/s2.b' -"

# ---- round 4: more than one readdirplus page ----
mkdir "$MA/big"
for i in $(seq 1 60); do echo "$i" >"$MA/big/file-with-a-longer-name-$i"; done
round 4 big "
	for i in 3 17 29 41 58; do
		chmod 640 '$MB/big/file-with-a-longer-name-'\$i
	done
	mv '$MB/big/file-with-a-longer-name-50' '$MB/big/moved'
	rm '$MB/big/file-with-a-longer-name-2'
	rm '$MB/big/file-with-a-longer-name-33'
	echo new >'$MB/big/file-with-a-longer-name-33'"

check clu_rdp_rm_on_a rm -rf "$MA/d" "$MA/big"
check clu_rdp_gone_on_b sh -c "[ -z \"\$(ls -A '$MB')\" ]"
check clu_rdp_umount_a fs_umount "$MA"
check clu_rdp_umount_b fs_umount "$MB"
check clu_rdp_fsck fs_fsck "$IMG"
exit $_ucfs_failed
