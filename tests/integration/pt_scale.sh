#!/bin/sh
# pt_scale: a 200,000-file tree created, walked and removed through the
# pass-through lens with the daemon's descriptor limit at 8,192: inodes are
# held by file handles, not descriptors (libfuse's passthrough_ll holds one
# per inode and fails with EMFILE past its limit). The descriptors the
# daemon holds stay within its cache bound while the kernel references far
# more inodes than that; the stats count exactly the creates and mkdirs.
# PT_SCALE_FILES overrides the number of files (a multiple of 1000).
# run.sh: long (about a minute: 200,000 files)
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/statlib.sh"

[ "$(id -u)" -eq 0 ] || { skip pt_scale "needs root (FUSE mount)"; exit 0; }
[ -c /dev/fuse ] || { skip pt_scale "no /dev/fuse"; exit 0; }
command -v jq >/dev/null || { skip pt_scale "jq not installed"; exit 0; }

N=${PT_SCALE_FILES:-200000}
DIRS=$((N / 1000))
LIMIT=8192
IMG=$T/img LOW=$T/low MNT=$T/mnt
mkdir -p "$LOW" "$MNT"
truncate -s 2G "$IMG"
mkfs.ext4 -q -F -b 4096 -N $((N + 10000)) "$IMG" || { fail pt_scale_mkfs; exit 1; }
mount -o loop "$IMG" "$LOW" || { fail pt_scale_lower; exit 1; }
on_exit "umount -l '$LOW'"

(ulimit -n $LIMIT && exec "$B/ucfs" -f -o passthrough "$LOW" "$MNT") \
	>"$T/ucfs.log" 2>&1 &
PID=$!
on_exit "kill $PID 2>/dev/null"
on_exit "mountpoint -q '$MNT' && umount '$MNT'"
wait_for 10 mountpoint -q "$MNT" || { fail pt_scale_mount "$(cat "$T/ucfs.log")"; exit 1; }
check pt_scale_fd_limit sh -c "grep -q 'Max open files *$LIMIT *$LIMIT' /proc/$PID/limits"

fds() { ls /proc/$PID/fd | wc -l; }
stat_json >"$T/s0.json"
MAXFD=$(jq .passthrough.max_fds_cached "$T/s0.json")

# create, watching the daemon's descriptors every 10 directories
python3 - "$MNT" "$DIRS" "$PID" >"$T/create.out" 2>&1 <<'PY'
import os, sys
mnt, dirs, pid = sys.argv[1], int(sys.argv[2]), sys.argv[3]
peak = 0
for d in range(dirs):
    p = os.path.join(mnt, "d%03d" % d)
    os.mkdir(p)
    for f in range(1000):
        os.close(os.open(os.path.join(p, "f%04d" % f),
                         os.O_CREAT | os.O_WRONLY, 0o644))
    if d % 10 == 9:
        peak = max(peak, len(os.listdir("/proc/%s/fd" % pid)))
print("peak_fds", peak)
PY
check pt_scale_created grep -q peak_fds "$T/create.out"
PEAK=$(awk '/peak_fds/ { print $2 }' "$T/create.out")
check pt_scale_fds_bounded_create test "${PEAK:-99999}" -le $((MAXFD + 64))

# walk: every file seen, stat'ed, counted by du
check pt_scale_find test "$(find "$MNT" -type f | wc -l)" -eq "$N"
check pt_scale_stat_all test "$(find "$MNT" -type f -printf '%s\n' |
	awk '{ n++; s += $1 } END { print n ":" s }')" = "$N:0"
check pt_scale_du du -s "$MNT"
stat_json >"$T/s1.json"
check pt_scale_fds_bounded_walk test "$(fds)" -le $((MAXFD + 64))
d() { jq -n --slurpfile a "$T/s0.json" --slurpfile b "$T/s1.json" \
	"\$b[0].fuse.ops.$1.count - \$a[0].fuse.ops.$1.count"; }
# far more inodes held than descriptors allowed: every inode the kernel
# references, none dropped by the lens. How many the kernel keeps is its
# own choice: with no FORGET it keeps all it was given (then exactly one
# per name the walk met, the lower tree's lost+found too, and the root
# must be held); under memory
# pressure it forgets, and if it kept no more than the descriptor limit
# the check has nothing to show (skipped, saying so).
HELD=$(jq .passthrough.inodes_now "$T/s1.json")
FORGETS=$(($(d forget) + $(d forget_multi)))
echo "after the walk: $HELD inodes held, $FORGETS FORGET requests"
if [ "$FORGETS" -eq 0 ]; then
	check pt_scale_inodes_held test "$HELD" -eq "$(find "$LOW" | wc -l)"
elif [ "$HELD" -gt $LIMIT ]; then
	pass pt_scale_inodes_held
else
	skip pt_scale_inodes_held "the kernel forgot inodes ($FORGETS FORGET\
 requests: memory pressure?), $HELD held, not more than $LIMIT"
fi
check pt_scale_creates_counted test "$(d create)" -eq "$N"
check pt_scale_mkdirs_counted test "$(d mkdir)" -eq "$DIRS"
check pt_scale_create_errors test "$(jq .fuse.ops.create.errors "$T/s1.json")" -eq 0

check pt_scale_rm rm -rf "$MNT"/d*
# the descriptor cache turned over, and every handle reopened
"$B/ucfs-stat" --json "$MNT" >"$T/s2.json"
check pt_scale_cache_reused jq -e '.passthrough.fd_evictions > 0 and
	.passthrough.fd_opens > 0 and .passthrough.stale == 0' "$T/s2.json"
check pt_scale_lower_empty test -z "$(ls -A "$LOW" | grep -v lost+found)"
check pt_scale_daemon_alive kill -0 $PID
check pt_scale_no_emfile sh -c "! grep -qi 'too many open files' '$T/ucfs.log'"
check pt_scale_umount umount "$MNT"
