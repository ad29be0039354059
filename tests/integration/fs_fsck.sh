#!/bin/sh
# fs_fsck: the fsck.ucfs command line: exit codes (0 clean, 1 fixed,
# 4 problems, 8 cannot run, 16 usage), a populated image checks clean,
# and garbage never crashes it: random data, an empty and a truncated
# image, and seeded random byte flips in a real image's metadata. The
# repair (-y) leaves a clean image alone, refuses a bad superblock
# without writing, and on every flipped image either fixes it (exit 1,
# then -n is clean) or leaves problems it reports (exit 4, -n agrees).
# run.sh: long (30 s: seeded flips, each image checked and repaired)
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
fs_require_ucfs fs_fsck

F=$B/fsck.ucfs IMG=$T/img MNT=$T/mnt SEED=${UCFS_SEED:-1}
rc_of() { "$@" >"$T/out" 2>&1; echo $?; }

check fsck_usage test "$(rc_of "$F")" = 16
check fsck_n_and_y_usage test "$(rc_of "$F" -n -y "$T/none")" = 16
check fsck_repair_missing_device test "$(rc_of "$F" -y "$T/none")" = 8
check fsck_missing_device test "$(rc_of "$F" -n "$T/none")" = 8

fs_mkfs "$IMG" 128 -J 4 -r 16 || { fail fsck_mkfs; exit 1; }
check fsck_fresh_clean test "$(rc_of "$F" -n "$IMG")" = 0
fs_mount "$IMG" "$MNT" || { fail fsck_mount; exit 1; }
cp -a "$UCFS_TOP/fusefs" "$MNT/src"
mkdir -p "$MNT/a/b/c"; ln "$MNT/src/fs.h" "$MNT/a/hl"; ln -s ../src "$MNT/a/sl"
setfattr -n user.x -v y "$MNT/a"
check fsck_umount fs_umount "$MNT"
check fsck_populated_clean test "$(rc_of "$F" -n "$IMG")" = 0
check fsck_repair_clean_noop test "$(rc_of "$F" -y "$IMG")" = 0

# garbage: random bytes, empty, truncated
head -c 4194304 /dev/urandom >"$T/rand"
check fsck_random_data test "$(rc_of "$F" -n "$T/rand")" = 4
cp "$T/rand" "$T/rand0"
check fsck_repair_bad_sb_refused test "$(rc_of "$F" -y "$T/rand")" = 4
check fsck_repair_bad_sb_unchanged cmp -s "$T/rand" "$T/rand0"
: >"$T/empty"
r=$(rc_of "$F" -n "$T/empty")
check fsck_empty_file sh -c "test $r = 4 -o $r = 8"
head -c 16777216 "$IMG" >"$T/trunc"
check fsck_truncated test "$(rc_of "$F" -n "$T/trunc")" = 4
check fsck_truncated_says_so grep -q truncated "$T/out"

# seeded byte flips in the first blocks (superblocks, slot area,
# journal header, rgroup headers, bitmaps, inodes): 4 = found, 0 = the
# flip hit unused bytes; never a crash (status >= 128) or 8
crashes=0 found=0 fixed=0 badfix=0 i=0
blocks=$(($(stat -c %s "$IMG") / 4096))
while [ $i -lt 60 ]; do
	cp "$IMG" "$T/fuzz"
	python3 - "$T/fuzz" "$SEED" "$i" <<'PY'
import random, sys
p, seed, it = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(seed * 1000 + it)
with open(p, "r+b") as f:
	for _ in range(r.randint(1, 16)):
		blk = r.choice([0, 1, 2, 3, 4]) if r.random() < 0.3 else r.randrange(0, 9000)
		off = blk * 4096 + r.randrange(0, 4096)
		f.seek(off); b = f.read(1)
		f.seek(off); f.write(bytes([(b[0] if b else 0) ^ (1 << r.randrange(8))]))
PY
	r=$(rc_of "$F" -n "$T/fuzz")
	case $r in
	0) ;;
	4) found=$((found + 1)) ;;
	*) crashes=$((crashes + 1)); echo "flip run $i (seed $SEED): status $r"; tail -3 "$T/out" ;;
	esac
	y=$(rc_of "$F" -y "$T/fuzz")
	n=$(rc_of "$F" -n "$T/fuzz")
	case $r/$y/$n in
	0/0/0) ;;
	4/1/0) fixed=$((fixed + 1)) ;;
	4/4/4) ;;
	*) badfix=$((badfix + 1)); echo "flip run $i (seed $SEED): -n $r, -y $y, then -n $n" ;;
	esac
	i=$((i + 1))
done
echo "byte flips: 60 images, $found with problems found ($fixed fixed by -y), $crashes crashes"
check fsck_fuzz_no_crash test "$crashes" = 0
check fsck_fuzz_finds_some test "$found" -gt 10
check fsck_fuzz_repair_consistent test "$badfix" = 0
