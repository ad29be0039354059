#!/bin/sh
# pt_splice: the lens's read replies spliced from the lower file's page
# cache to /dev/fuse, and its write payloads spliced from /dev/fuse into
# the lower file (fs_fuse_io.c), carry the bytes exactly:
#  - files of sizes around the splice threshold (2 pages), around the
#    largest reply (max_read) and larger, read cold, whole and at random
#    offsets and lengths (UCFS_SEED), and with O_DIRECT;
#  - the replies went by splice (transport.spliced_reads grew) and the
#    mount's max_read lets a reply and its header fit one pipe;
#  - large writes, received by splice and spliced from the writer's
#    pages into the lower file (fs_fuse_io.c), land exactly: sequential
#    1 MiB writes, then writes at random offsets and lengths (unaligned,
#    up to 3 MiB: several requests each) against a model and the lower
#    file; O_DIRECT writes (copied to an aligned buffer) and O_APPEND
#    writes (a file splice refuses: copied too); fsx with operations up
#    to 3 MiB; errors of the lower filesystem come back with its errno
#    through the spliced path (EFBIG past ext4's largest file, ENOSPC
#    when it is full); transport.spliced_writes counts them; fsx with
#    the kernel's writeback cache (its writeback goes through any open,
#    O_DIRECT ones too);
#  - a max_read= given by the user mounts and reads right, on the lens
#    and on a ucfs device mount.
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

# ucfs ARGS: mount; umount returns before the last daemon has let its
# stats socket go, and a mount on the same mountpoint waits for that
ucfs() {
	_i=0
	until "$B/ucfs" "$@" 2>"$T/mount.err"; do
		_i=$((_i + 1))
		grep -q "another ucfs serves there" "$T/mount.err" &&
			[ "$_i" -lt 100 ] || { cat "$T/mount.err"; return 1; }
		sleep 0.1
	done
}
ucfs -o passthrough "$LOW" "$MNT" || { fail pt_splice_mount; exit 1; }
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
# ---- writes ----
# spliced_writes grew by at least $1 since the snapshot $2
grew() {
	stat_json >"$T/now.json" &&
		jq -n -e --slurpfile a "$2" --slurpfile b "$T/now.json" \
			"\$b[0].transport.spliced_writes -
			 \$a[0].transport.spliced_writes >= $1" >/dev/null
}

head -c 41943040 /dev/urandom >"$T/wsrc"
stat_json >"$T/w0.json" || { fail pt_splice_write_stat; exit 1; }
check pt_splice_write_dd dd if="$T/wsrc" of="$MNT/seq" bs=1M conv=fsync \
	status=none
check pt_splice_write_dd_lower cmp "$T/wsrc" "$LOW/seq"
# 40 writes of 1 MiB: the first is read (it turns splicing on), and so
# is the first after any other request (a late RELEASE of the reads)
check pt_splice_write_counted grew 35 "$T/w0.json"

stat_json >"$T/w1.json"
check pt_splice_write_random python3 - "$MNT/rnd" "$LOW/rnd" "$SEED" <<'PY'
import os, random, sys
lens, low, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rnd = random.Random(seed)
size = 24 << 20
model = bytearray(size)
fd = os.open(lens, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
end = 0
for i in range(200):
    n = rnd.choice([rnd.randrange(1, 4096), rnd.randrange(64 << 10, 3 << 20),
                    1 << 20, 1040384, 1044480, (1 << 20) + 1])
    off = rnd.randrange(size - n)
    data = rnd.randbytes(n)
    if os.pwrite(fd, data, off) != n:
        sys.exit("short write %d+%d" % (off, n))
    model[off:off + n] = data
    end = max(end, off + n)
    if i % 25 == 0:
        k = rnd.randrange(end)
        m = min(rnd.randrange(1, 2 << 20), end - k)
        if os.pread(fd, m, k) != bytes(model[k:k + m]):
            sys.exit("read back %d+%d differs after op %d" % (k, m, i))
os.fsync(fd)
os.close(fd)
for path in (lens, low):
    with open(path, "rb") as f:
        if f.read() != bytes(model[:end]):
            sys.exit("%s differs from the model" % path)
PY
check pt_splice_write_random_spliced grew 20 "$T/w1.json"

# O_DIRECT: aligned buffers of the caller, the lower file opened O_DIRECT
check pt_splice_write_direct python3 - "$MNT/dio" "$LOW/dio" "$SEED" <<'PY'
import mmap, os, random, sys
lens, low, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rnd = random.Random(seed + 1)
model = bytearray(16 << 20)
fd = os.open(lens, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
buf = mmap.mmap(-1, 4 << 20)
for _ in range(40):
    n = rnd.randrange(1, 1024) * 4096
    off = rnd.randrange((len(model) - n) // 4096) * 4096
    data = rnd.randbytes(n)
    buf[:n] = data
    if os.pwritev(fd, [memoryview(buf)[:n]], off) != n:
        sys.exit("short O_DIRECT write %d+%d" % (off, n))
    model[off:off + n] = data
os.close(fd)
with open(low, "rb") as f:
    got = f.read()
if got != bytes(model[:len(got)]) or any(model[len(got):]):
    sys.exit("O_DIRECT writes differ in the lower file")
PY

# O_APPEND: splice(2) refuses an O_APPEND file; the payload is copied
check pt_splice_write_append python3 - "$MNT/app" "$LOW/app" <<'PY'
import os, sys
lens, low = sys.argv[1], sys.argv[2]
a, b = os.urandom(3 << 20), os.urandom(1 << 20)
fd = os.open(lens, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for d in (a, b, a):
    os.write(fd, d)
os.close(fd)
with open(low, "rb") as f:
    if f.read() != a + b + a:
        sys.exit("O_APPEND writes differ")
PY

check pt_splice_write_fsx "$B/tests/fsx" --seed "$SEED" --ops 1500 \
	--maxlen $((8 << 20)) --maxop $((3 << 20)) --direct-every 40 \
	--quiet "$MNT/fsx"

# a lower error through the spliced path: a large write first (the next
# request is spliced), then one past ext4's largest file (16 TiB - 4 KiB)
check pt_splice_write_efbig python3 - "$MNT/efbig" <<'PY'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.pwrite(fd, os.urandom(1 << 20), 0)
try:
    os.pwrite(fd, os.urandom(1 << 20), 1 << 44)
    sys.exit("a write past 16 TiB succeeded")
except OSError as e:
    if e.errno != errno.EFBIG:
        sys.exit("errno %d, not EFBIG" % e.errno)
os.close(fd)
PY

# with the kernel's writeback cache the payloads are its writeback of
# any file's pages, through any open of it, O_DIRECT ones too
umount "$MNT" && ucfs -o passthrough,writeback_cache "$LOW" "$MNT" ||
	{ fail pt_splice_write_wb_mount; exit 1; }
stat_json >"$T/w2.json"
check pt_splice_write_wb_fsx "$B/tests/fsx" --seed "$SEED" --ops 1500 \
	--maxlen $((8 << 20)) --maxop $((3 << 20)) --direct-every 40 \
	--quiet "$MNT/fsxwb"
check pt_splice_write_wb_spliced grew 1 "$T/w2.json"
rm -f "$MNT/fsxwb"
umount "$MNT" && ucfs -o passthrough "$LOW" "$MNT" ||
	{ fail pt_splice_write_remount; exit 1; }

rm -f "$MNT/seq" "$MNT/rnd" "$MNT/dio" "$MNT/app" "$MNT/fsx" "$MNT/efbig"
dd if=/dev/zero of="$MNT/full" bs=1M count=400 conv=fsync \
	2>"$T/dd.err" >/dev/null
check pt_splice_write_enospc grep -q "No space left on device" "$T/dd.err"
rm -f "$MNT/full"
umount "$MNT" && pass pt_splice_umount || fail pt_splice_umount

# a max_read= of the user's is the mount's (libfuse 3.14 refuses INIT
# unless the filesystem's init says the same)
if ucfs -o passthrough,max_read=524288 "$LOW" "$MNT"; then
	echo 3 >/proc/sys/vm/drop_caches
	check pt_splice_user_max_read cmp -s "$LOW/big" "$MNT/big"
	check pt_splice_user_max_read_mounted sh -c \
		"grep ' $MNT ' /proc/self/mounts | grep -q 'max_read=524288'"
	umount "$MNT"
else
	fail pt_splice_user_max_read "mount -o max_read=524288 failed"
fi

# the same option on a ucfs device mount (the same libfuse rule: its
# init used to leave max_read 0, and INIT failed with EPROTO after the
# mount command had returned)
dev_ok() {
	ls "$MNT" >/dev/null 2>&1 &&
		grep -q " $MNT fuse.ucfs .*max_read=131072" /proc/self/mounts
}
truncate -s 128M "$T/dev.img"
"$B/mkfs.ucfs" -q -J 8 "$T/dev.img" || fail pt_splice_device_mkfs
head -c 3000000 /dev/urandom >"$T/devsrc"
ucfs -o max_read=131072 "$T/dev.img" "$MNT"
check pt_splice_device_max_read dev_ok
cp "$T/devsrc" "$MNT/f"
umount "$MNT"
ucfs -o max_read=131072 "$T/dev.img" "$MNT"
echo 3 >/proc/sys/vm/drop_caches
check pt_splice_device_max_read_remount dev_ok
check pt_splice_device_max_read_data cmp "$T/devsrc" "$MNT/f"
umount "$MNT"
exit 0
