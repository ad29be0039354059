#!/bin/sh
# pt_splice: the lens's read replies spliced from the lower file's page
# cache to /dev/fuse (fs_fuse_io.c) return the lower bytes exactly:
#  - files of sizes around the splice threshold (2 pages), around the
#    largest reply (max_read) and larger, read cold, whole and at random
#    offsets and lengths (UCFS_SEED), and with O_DIRECT;
#  - the replies went by splice (transport.spliced_reads grew) and the
#    mount's max_read lets a reply and its header fit one pipe;
#  - a max_read= given by the user mounts and reads right.
# run.sh: alone (it drops the caches of the machine)
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/statlib.sh"

[ "$(id -u)" -eq 0 ] || { skip pt_splice "needs root (FUSE mount)"; exit 0; }
[ -c /dev/fuse ] || { skip pt_splice "no /dev/fuse"; exit 0; }
command -v jq >/dev/null || { skip pt_splice "jq not installed"; exit 0; }
command -v python3 >/dev/null || { skip pt_splice "no python3"; exit 0; }

SEED=${UCFS_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
echo "pt_splice: UCFS_SEED=$SEED"
IMG=$T/img LOW=$T/low MNT=$T/mnt
mkdir -p "$LOW" "$MNT"
truncate -s 256M "$IMG"
mkfs.ext4 -q -F -b 4096 "$IMG" || { fail pt_splice_mkfs; exit 1; }
mount -o loop "$IMG" "$LOW" || { fail pt_splice_lower_mount; exit 1; }
on_exit "umount -l '$LOW'"

# sizes: empty, under and at the splice threshold, odd, one reply, more
for n in 0 5 4096 8191 8192 8193 12345 1044480 1048576 1048577 3000000; do
	head -c "$n" /dev/urandom >"$LOW/f$n"
done
head -c 40000000 /dev/urandom >"$LOW/big"

"$B/ucfs" -o passthrough "$LOW" "$MNT" || { fail pt_splice_mount; exit 1; }
on_exit "mountpoint -q '$MNT' && umount '$MNT'"
stat_json >"$T/s0.json" || { fail pt_splice_stat; exit 1; }
sync
echo 3 >/proc/sys/vm/drop_caches

bad=
for f in "$LOW"/f* "$LOW/big"; do
	cmp -s "$f" "$MNT/${f##*/}" || bad="$bad ${f##*/}"
done
check pt_splice_whole_files test -z "$bad"
[ -z "$bad" ] || echo "differ:$bad"

check pt_splice_random_reads python3 - "$MNT/big" "$LOW/big" "$SEED" <<'PY'
import mmap, os, random, sys
lens, low, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rnd = random.Random(seed)
a, b = os.open(lens, os.O_RDONLY), os.open(low, os.O_RDONLY)
size = os.fstat(b).st_size
for _ in range(300):
    off, n = rnd.randrange(size + 4096), rnd.randrange(1, 3 << 20)
    if os.pread(a, n, off) != os.pread(b, n, off):
        sys.exit("buffered %d+%d differs" % (off, n))
d = os.open(lens, os.O_RDONLY | os.O_DIRECT)
m = mmap.mmap(-1, 4 << 20)
for _ in range(100):
    off = rnd.randrange(size) // 4096 * 4096
    n = max(4096, rnd.randrange(4 << 20) // 4096 * 4096)
    k = os.preadv(d, [memoryview(m)[:n]], off)
    if m[:k] != os.pread(b, n, off):
        sys.exit("O_DIRECT %d+%d differs" % (off, n))
PY

stat_json >"$T/s1.json" || { fail pt_splice_stat; exit 1; }
check pt_splice_used jq -n --slurpfile a "$T/s0.json" \
	--slurpfile b "$T/s1.json" -e \
	'$b[0].transport.spliced_reads - $a[0].transport.spliced_reads >= 20'
# a 1 MiB reply and its header need 257 pipe slots: where pipe-max-size
# binds (no CAP_SYS_RESOURCE) the lens asks the kernel for less
check pt_splice_max_read sh -c "
	m=\$(grep ' $MNT ' /proc/self/mounts | grep -o 'max_read=[0-9]*' |
		cut -d= -f2)
	[ -z \"\$m\" ] || [ \"\$m\" -le 1044480 ]"
umount "$MNT" && pass pt_splice_umount || fail pt_splice_umount

# a max_read= of the user's is the mount's (libfuse 3.14 refuses INIT
# unless the filesystem's init says the same)
if "$B/ucfs" -o passthrough,max_read=524288 "$LOW" "$MNT"; then
	echo 3 >/proc/sys/vm/drop_caches
	check pt_splice_user_max_read cmp -s "$LOW/big" "$MNT/big"
	check pt_splice_user_max_read_mounted sh -c \
		"grep ' $MNT ' /proc/self/mounts | grep -q 'max_read=524288'"
	umount "$MNT"
else
	fail pt_splice_user_max_read "mount -o max_read=524288 failed"
fi
exit 0
