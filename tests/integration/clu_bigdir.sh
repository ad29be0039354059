#!/bin/sh
# clu_bigdir: one large directory and one large file modified from two
# lockproto=dlm nodes taking turns (the filesystem glock moves on every
# turn: commit, checkpoint, flush and cache drop on the node giving it
# up). Past a few thousand entries the directory B+tree has interior
# nodes and splits on both nodes:
#  (1) node 1 and node 2 create 2 x $N names into ONE directory at once
#      (UCFS_BIGDIR_N, default 7000), then each unlinks every third of
#      its own names; both nodes list exactly the expected names, each
#      once;
#  (2) one file appended to (O_APPEND) from both nodes at once, 64 KiB
#      records (hundreds of extents), and overwritten in places from
#      the other node: both nodes read what was written;
#  (2b) 15 xattrs (3 KB) of one file set from both nodes in turn (an xattr
#      block); the big file shared by copy_file_range from each node
#      (reflink: refcount tree) and each copy overwritten from the other
#      node (copy on write): every copy and the source read as expected;
#  (3) both unmount; fsck.ucfs -n finds the image clean; a fresh mount
#      lists exactly the expected names.
# fsck used to fail here on every large directory ("internal keys out of
# order", every entry a lost file): key 0 of an internal node is minus
# infinity (FORMAT.md), fsck ordered it (tests/unit/test_fsck.c).
# Node 3 is a quorum witness (ucfs-witness).
# run.sh: long (45 s: 14,000 names from two nodes)
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_bigdir

N=${UCFS_BIGDIR_N:-7000}
clu_two_nodes clu_bigdir 512 -j 2 -r 64

# (1) creates from both nodes at once, then unlinks from both
mkdir "$M1/d"
mkfiles() {	# MNT TAG: create N names, then unlink every third
	python3 - "$1/d" "$2" "$N" <<'PY'
import os, sys
d, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(n):
    os.close(os.open("%s/%s-file-%06d" % (d, tag, i),
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
for i in range(0, n, 3):
    os.unlink("%s/%s-file-%06d" % (d, tag, i))
PY
}
clu_at_once clu_bigdir_create_unlink 'mkfiles "$M1" a' 'mkfiles "$M2" b'
python3 - "$N" >"$T/want" <<'PY'
import sys
n = int(sys.argv[1])
for tag in "ab":
    for i in range(n):
        if i % 3:
            print("%s-file-%06d" % (tag, i))
PY
sort "$T/want" -o "$T/want"
names_ok() {	# DIR: the directory lists exactly $T/want, each name once
	ls -f "$1" | grep -v '^\.\.\?$' | sort >"$T/got"
	cmp -s "$T/want" "$T/got" && return 0
	echo "want $(wc -l <"$T/want") got $(wc -l <"$T/got")" \
		"unique $(sort -u "$T/got" | wc -l)"
	return 1
}
check clu_bigdir_names_node1 names_ok "$M1/d"
check clu_bigdir_names_node2 names_ok "$M2/d"

# (2) one big file: appends from both nodes at once, then overwrites
appender() {	# FILE TAG COUNT
	python3 - "$1" "$2" "$3" <<'PY'
import os, sys
f, tag, n = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3])
fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for i in range(n):
    rec = (b"%s %06d " % (tag, i)).ljust(65535, tag[:1]) + b"\n"
    os.write(fd, rec)
os.close(fd)
PY
}
NA=$((N / 20))
clu_at_once clu_bigdir_append_both 'appender "$M1/big" x "$NA"' \
	'appender "$M2/big" y "$NA"'
check_records() {	# FILE: every record once, whole, in its node's order
	python3 - "$1" "$NA" <<'PY'
import sys
f, n = sys.argv[1], int(sys.argv[2])
data = open(f, "rb").read()
if len(data) != 2 * n * 65536:
    print("size %d want %d" % (len(data), 2 * n * 65536)); sys.exit(1)
seen = {b"x": [], b"y": []}
for off in range(0, len(data), 65536):
    rec = data[off:off + 65536]
    tag, num = rec[:1], int(rec[2:8])
    want = (b"%s %06d " % (tag, num)).ljust(65535, tag) + b"\n"
    if rec != want:
        print("bad record at %d" % off); sys.exit(1)
    seen[tag].append(num)
for t in seen:
    if seen[t] != list(range(n)):
        print("%s records out of order or missing" % t); sys.exit(1)
PY
}
check clu_bigdir_big_node1 check_records "$M1/big"
check clu_bigdir_big_node2 check_records "$M2/big"
# overwrite every 7th 4 KiB block from node 2, every 11th from node 1
python3 - "$M2/big" "$M1/big" "$T/big.copy" <<'PY'
import os, sys
a, b, copy = sys.argv[1], sys.argv[2], sys.argv[3]
data = bytearray(open(a, "rb").read())
fa, fb = os.open(a, os.O_WRONLY), os.open(b, os.O_WRONLY)
for blk in range(0, len(data) // 4096):
    for fd, step, ch in ((fa, 7, b"7"), (fb, 11, b"B")):
        if blk % step == 0:
            os.pwrite(fd, ch * 4096, blk * 4096)
            data[blk * 4096:(blk + 1) * 4096] = ch * 4096
os.close(fa); os.close(fb)
open(copy, "wb").write(data)
PY
check clu_bigdir_overwrite_node1 cmp "$T/big.copy" "$M1/big"
check clu_bigdir_overwrite_node2 cmp "$T/big.copy" "$M2/big"

# (2b) xattrs of one file set from both nodes in turn (past the inode:
# an xattr block), and the big file shared by copy_file_range from both
# nodes (reflink: the refcount tree), each copy overwritten from the
# other node (copy on write)
python3 - "$M1/big" "$M2/big" "$T/big.copy" >"$T/share.out" 2>&1 <<'PY'
import os, sys
a, b, copy = sys.argv[1], sys.argv[2], sys.argv[3]
for i in range(15):
    os.setxattr(a if i % 2 else b, "user.k%02d" % i, b"%02d" % i * 100)
for f in (a, b):
    names = sorted(os.listxattr(f))
    if names != ["user.k%02d" % i for i in range(15)]:
        sys.exit("%s: %d xattrs" % (f, len(names)))
    for i in range(15):
        if os.getxattr(f, "user.k%02d" % i) != b"%02d" % i * 100:
            sys.exit("%s: xattr %d differs" % (f, i))
want = open(copy, "rb").read()
for src, dst, other in ((a, a + ".c1", b + ".c1"), (b, b + ".c2", a + ".c2")):
    fi = os.open(src, os.O_RDONLY)
    fo = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    left = len(want)
    while left > 0:
        n = os.copy_file_range(fi, fo, left)
        if n <= 0:
            sys.exit("copy_file_range returned %d" % n)
        left -= n
    os.close(fi); os.close(fo)
    fo = os.open(other, os.O_WRONLY)
    for blk in range(3, len(want) // 4096, 13):
        os.pwrite(fo, b"C" * 4096, blk * 4096)
    os.close(fo)
mod = bytearray(want)
for blk in range(3, len(want) // 4096, 13):
    mod[blk * 4096:(blk + 1) * 4096] = b"C" * 4096
for f in (a + ".c1", b + ".c1", a + ".c2", b + ".c2"):
    if open(f, "rb").read() != mod:
        sys.exit("%s differs" % f)
if open(a, "rb").read() != want or open(b, "rb").read() != want:
    sys.exit("the source changed")
PY
if [ $? -eq 0 ]; then pass clu_bigdir_xattr_reflink_both
else fail clu_bigdir_xattr_reflink_both "$(cat "$T/share.out")"; fi

# (3) clean unmounts, fsck, a fresh mount
check clu_bigdir_umount2 fs_umount "$M2"
check clu_bigdir_umount1 fs_umount "$M1"
if "$B/fsck.ucfs" -n "$IMG" >"$T/fsck.out" 2>&1; then
	pass clu_bigdir_fsck_clean
else
	fail clu_bigdir_fsck_clean "$(head -5 "$T/fsck.out")"
	# UCFS_KEEP=FILE keeps a copy of the damaged image to study
	[ -z "${UCFS_KEEP:-}" ] || cp "$IMG" "$UCFS_KEEP"
fi
fs_mount "$IMG" "$M1" "$(clu_opts "$CFG" 1)" || {
	fail clu_bigdir_remount; exit 1; }
check clu_bigdir_names_remount names_ok "$M1/d"
check clu_bigdir_big_remount cmp "$T/big.copy" "$M1/big"
check clu_bigdir_umount_last fs_umount "$M1"
