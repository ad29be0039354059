#!/bin/sh
# clu_iopen: a file unlinked on one lockproto=dlm node while it is open on
# another is not freed under it (iopen locks, fusefs/cluster/fs_iopen.h):
#  (1) node 2 opens a file and keeps it open, node 1 unlinks it: node 2
#      keeps reading the same bytes and writing; node 1's statfs does not
#      get the space back while node 2 has it open; after node 2's close
#      the space comes back (statfs on both nodes), node 1's stats count a
#      free that waited (iopen_frees_later);
#  (2) the same, but node 2 is killed (kill -9) while it holds the file
#      open: the survivor (node 1, the unlinker) frees it after recovery;
#  (3) the unlinking node 1 is killed while node 2 has the file open:
#      node 2's recovery adopts node 1's orphan list, node 2 still reads
#      the file, and its last close frees it (orphans_adopted);
#  (4) as (1), but the file made on node 2 (which took no iopen hold at
#      the create, fs_ino_iopen_late): node 2 takes it when node 1 asks
#      for the inode's lock, and keeps reading what it wrote;
#  after each: the survivors unmount cleanly, fsck.ucfs -n is clean and
#  lists no orphan.
# Node 3 is a lockspace-only witness (tests/clulib.sh: quorum).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_iopen jq

MB=24 # the file; its blocks (4 KiB) are what must come back
FBLK=$((MB * 256))
clu_setup clu_iopen 2 512 -j 3 -r 64
head -c $((MB * 1048576)) /dev/urandom >"$T/ref"
# what the holder's "write 2" makes of it
cp "$T/ref" "$T/ref2"
head -c 1048576 /dev/zero | tr '\000' '\002' |
	dd of="$T/ref2" bs=1048576 seek=1 conv=notrunc 2>/dev/null

# The holder: opens PATH read-write and keeps it open, then runs the
# commands it reads (one a line): "read N" (the whole file to $T/read.N),
# "write N" (1 MiB at 1 MiB, fsync, read back: $T/wrote.N says ok), and
# "close". Each answers by creating $T/done.N (close: $T/closed).
cat >"$T/holder.py" <<'EOF'
import os, sys
path, out = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDWR)
open(out + "/opened", "w").close()
for line in sys.stdin:
    cmd = line.split()
    if not cmd:
        continue
    if cmd[0] == "close":
        os.close(fd)
        open(out + "/closed", "w").close()
        break
    n = cmd[1]
    if cmd[0] == "read":
        # from the daemon, not the kernel's page cache
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        size = os.fstat(fd).st_size
        with open(out + "/read." + n, "wb") as f:
            off = 0
            while off < size:
                b = os.pread(fd, min(1 << 20, size - off), off)
                if not b:
                    break
                f.write(b)
                off += len(b)
    elif cmd[0] == "write":
        data = bytes([int(n) % 251]) * (1 << 20)
        os.pwrite(fd, data, 1 << 20)
        os.fsync(fd)
        ok = os.pread(fd, 1 << 20, 1 << 20) == data
        with open(out + "/wrote." + n, "w") as f:
            f.write("ok" if ok else "bad")
    open(out + "/done." + n, "w").close()
EOF

HPID=
holder_start() { # PATH: node's holder, commands through fd 7
	rm -f "$T/ctl" "$T/opened" "$T/closed" "$T"/done.* "$T"/read.* \
		"$T"/wrote.*
	mkfifo "$T/ctl"
	python3 "$T/holder.py" "$1" "$T" <"$T/ctl" >"$T/holder.log" 2>&1 &
	HPID=$!
	on_exit "kill $HPID 2>/dev/null"
	exec 7>"$T/ctl"
	wait_for 20 test -e "$T/opened"
}
holder_cmd() { # CMD N: run it, wait for its answer
	echo "$1 $2" >&7
	wait_for 60 test -e "$T/done.$2"
}
holder_stop() {
	echo close >&7
	wait_for 60 test -e "$T/closed"
	exec 7>&-
	wait "$HPID" 2>/dev/null
}
free_blocks() { stat -f -c %f "$1"; }
# The space is back on MNT: its statfs shows at least @base less a tenth
# of the file. (A node's statfs counts the groups it last held: node 2
# sees what node 1 frees in groups it never held only once it takes them.)
space_back() { # BASE MNT...
	_base=$1; shift
	for _m in "$@"; do
		_f=$(free_blocks "$_m") || return 1
		[ "$_f" -ge $((_base - FBLK / 10)) ] || return 1
	done
}
fsck_clean() {
	"$B/fsck.ucfs" -n "$IMG" >"$T/fsck.out" 2>&1 &&
		grep -q ' 0 orphans' "$T/fsck.out"
}
mount_both() {
	fs_mount "$IMG" "$M1" "$(clu_opts "$CFG" 1)" || return 1
	fs_mount "$IMG" "$M2" "$(clu_opts "$CFG" 2)"
}
fsync_path() { # PATH: fsync through a read-only descriptor
	python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); \
os.fsync(fd)" "$1"
}
# A file of node 1's (open_unlink) or made by node 2 beforehand
# (hold_unlink), open on node 2, then unlinked on node 1 (durably: the
# orphan is on node 1's list on the disk). open_unlink sets F0 (node 1's
# free blocks before the file was written).
hold_unlink() { # NAME
	holder_start "$M2/$1"
	rm "$M1/$1"
	fsync_path "$M1"
}
open_unlink() { # NAME
	F0=$(free_blocks "$M1")
	cp "$T/ref" "$M1/$1"
	fsync_path "$M1/$1"
	hold_unlink "$1"
}
# blocks freed under node 2 would be reused by this file of node 1's
filler() {
	head -c $((MB * 1048576)) /dev/zero >"$M1/filler"
	fsync_path "$M1/filler"
}
# The end of a case: the nodes still mounted unmount cleanly, fsck finds
# the image clean and no orphan.
case_end() { # CASE NODE...
	_c=$1
	shift
	for _n in "$@"; do
		check "${_c}_umount$_n" fs_umount "$T/m$_n"
	done
	check "${_c}_fsck" fsck_clean
}

# (1) unlinked on node 1 while open on node 2; node 2 closes
mount_both || { fail clu_iopen_mount; exit 1; }
open_unlink f
check clu_iopen_gone_on_unlinker test ! -e "$M1/f"
filler
holder_cmd read 1
check clu_iopen_open_reads_intact cmp "$T/ref" "$T/read.1"
holder_cmd write 2
check clu_iopen_open_writes test "$(cat "$T/wrote.2" 2>/dev/null)" = ok
F1=$(free_blocks "$M1")
echo "node 1 free blocks: $F0 before the file, $F1 after its unlink and" \
	"as big a filler"
check clu_iopen_space_kept test "$F1" -lt $((F0 - FBLK * 3 / 2))
check clu_iopen_in_use_counted clu_stat_ge "$M1" .namespace.iopen_in_use 1
holder_cmd read 3
check clu_iopen_reads_own_write cmp "$T/ref2" "$T/read.3"
holder_stop
rm "$M1/filler"
wait_for 60 space_back "$F0" "$M1" "$M2"
echo "after the close: node 1 $(free_blocks "$M1"), node 2" \
	"$(free_blocks "$M2") free blocks"
check clu_iopen_space_back space_back "$F0" "$M1" "$M2"
check clu_iopen_freed_later clu_stat_ge "$M1" .namespace.iopen_frees_later 1
case_end clu_iopen 1 2

# (2) the node that has it open is killed
mount_both || { fail clu_iopen_mount2; exit 1; }
open_unlink g
holder_cmd read 1
check clu_iopen2_open_reads_intact cmp "$T/ref" "$T/read.1"
check clu_iopen2_space_kept test "$(free_blocks "$M1")" -lt \
	$((F0 - FBLK / 2))
fs_kill9 "$M2"
kill "$HPID" 2>/dev/null
exec 7>&-
wait "$HPID" 2>/dev/null
wait_for 60 space_back "$F0" "$M1"
check clu_iopen2_survivor_frees space_back "$F0" "$M1"
case_end clu_iopen2 1

# (3) the unlinking node is killed while the file is open on node 2
mount_both || { fail clu_iopen_mount3; exit 1; }
open_unlink h
fs_kill9 "$M1"
holder_cmd read 1
check clu_iopen3_open_reads_after_kill cmp "$T/ref" "$T/read.1"
check clu_iopen3_adopted wait_for 60 clu_stat_ge "$M2" \
	.namespace.orphans_adopted 1
holder_cmd write 2
check clu_iopen3_open_writes test "$(cat "$T/wrote.2" 2>/dev/null)" = ok
check clu_iopen3_not_freed_while_open test "$(clu_stat "$M2" \
	.namespace.inodes_freed)" -eq 0
holder_cmd read 3
check clu_iopen3_reads_own_write cmp "$T/ref2" "$T/read.3"
holder_stop
check clu_iopen3_last_close_frees wait_for 60 clu_stat_ge "$M2" \
	.namespace.iopen_frees_now 1
case_end clu_iopen3 2

# (4) made on node 2 and open there, unlinked on node 1: node 2 took no
# iopen hold at the creates (it held the inodes' locks EX since before
# they existed), and takes the open file's when node 1 asks for its
# inode lock, before that lock leaves (fs_ino_iopen_late)
mount_both || { fail clu_iopen_mount4; exit 1; }
R0=$(clu_stat "$M2" '.locks.types.iopen.requests // 0')
cp "$T/ref" "$M2/k"
for i in $(seq 1 50); do echo "$i" >"$M2/small.$i"; done
fsync_path "$M2/k"
R1=$(clu_stat "$M2" '.locks.types.iopen.requests // 0')
echo "node 2: $((R1 - R0)) iopen requests for 51 files made," \
	"$(clu_stat "$M2" .namespace.iopen_late) holds put off"
check clu_iopen4_made_no_request test $((R1 - R0)) -lt 5
check clu_iopen4_made_put_off clu_stat_ge "$M2" .namespace.iopen_late 51
L0=$(clu_stat "$M2" .fuse.ops.lookup.count)
hold_unlink k
# the late take needs k still in node 2's kernel when the holder opens
# it; if the kernel forgot it meanwhile (another process dropped the
# caches), the open looks it up again, and a lookup takes the hold at
# once
if [ "$(clu_stat "$M2" .fuse.ops.lookup.count)" -gt "$L0" ]; then
	skip clu_iopen4_taken_late "node 2's kernel looked k up again for\
 the holder's open (it had forgotten it): the hold came with the lookup"
else
	check clu_iopen4_taken_late clu_stat_ge "$M2" \
		.namespace.iopen_late_taken 1
fi
filler
holder_cmd read 1
check clu_iopen4_open_reads_intact cmp "$T/ref" "$T/read.1"
check clu_iopen4_in_use wait_for 30 clu_stat_ge "$M1" \
	.namespace.iopen_in_use 1
holder_stop
rm "$M1/filler"
check clu_iopen4_freed_later wait_for 60 clu_stat_ge "$M1" \
	.namespace.iopen_frees_later 1
case_end clu_iopen4 1 2
rm -f "$IMG"
exit 0
