# stats_mount.sh — the stats of a real mount: the socket appears at the
# path derived from the mountpoint, the counters move exactly with a known
# workload (100 creates count 100 creates), the socket refuses non-root
# users, ucfs-top shows the mount, and the socket goes away on unmount.
# (The 2-node ping-pong counters need cluster mode: not tested here.)
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/statlib.sh"

[ "$(id -u)" -eq 0 ] || { skip all "needs root (FUSE mount)"; exit 0; }
[ -c /dev/fuse ] || { skip all "no /dev/fuse"; exit 0; }
command -v jq >/dev/null || { skip all "jq not installed"; exit 0; }

IMG=$T/disk.img
MNT=$T/mnt
mkdir -p "$MNT"
truncate -s 512M "$IMG"
"$B/mkfs.ucfs" "$IMG" >"$T/mkfs.log" 2>&1 ||
	{ fail mkfs "$(cat "$T/mkfs.log")"; exit 1; }

"$B/ucfs" -f "$IMG" "$MNT" >"$T/ucfs.log" 2>&1 &
UPID=$!
on_exit "kill $UPID; wait $UPID"
on_exit "mountpoint -q '$MNT' && umount '$MNT'"
if ! wait_for 10 mountpoint -q "$MNT"; then
	fail mount "$(cat "$T/ucfs.log")"
	exit 1
fi
SOCK=$(printf '%s' "$MNT" | sed 's|^/||; s|-|%2D|g; s|/|-|g')
SOCK=/run/ucfs/$SOCK.sock
check socket_at_derived_path wait_for 5 test -S "$SOCK"
check socket_mode sh -c "stat -c %a '$SOCK' | grep -qx 600 &&
	stat -c %a /run/ucfs | grep -qx 700"

stat_json >"$T/s0.json" || fail ucfs_stat_mountpoint
check json_keys jq -e '.version == 1 and .node.mountpoint != null and
	(.node.uptime_s | type) == "number" and (.fuse.ops | length) >= 40 and
	(.fuse.ops.create.lat | has("p50_ns") and has("p99_ns") and
	 has("max_ns"))' "$T/s0.json"
# the daemon's memory: resident now, and a high-water mark not below it
check node_rss jq -e '.node.rss_kb_now > 0 and
	.node.max_rss_kb >= .node.rss_kb_now' "$T/s0.json"

# 100 creates, 10 mkdirs, 100 unlinks: each counts exactly once
ns_churn
snap_until "$T/s1.json" "$T/s0.json" \
	'$b[0].fuse.ops.unlink.count - $a[0].fuse.ops.unlink.count >= 100'
delta() { # OP FIELD
	jq -n --slurpfile a "$T/s0.json" --slurpfile b "$T/s1.json" \
		"\$b[0].fuse.ops.$1.$2 - \$a[0].fuse.ops.$1.$2"
}
check creates_100 test "$(delta create count)" -eq 100
check create_errors_0 test "$(delta create errors)" -eq 0
check mkdirs_10 test "$(delta mkdir count)" -eq 10
check unlinks_100 test "$(delta unlink count)" -eq 100
# a lookup of a missing name is an error reply (ENOENT)
ls "$MNT/no-such-file" >/dev/null 2>&1
snap_until "$T/s2.json" "$T/s1.json" \
	'$b[0].fuse.ops.lookup.errors > $a[0].fuse.ops.lookup.errors'
check lookup_enoent_counted jq -e -n --slurpfile a "$T/s1.json" \
	--slurpfile b "$T/s2.json" \
	'$b[0].fuse.ops.lookup.errors > $a[0].fuse.ops.lookup.errors'
check latency_sane jq -e '.fuse.ops.create.lat.max_ns > 0 and
	.fuse.ops.create.lat.p50_ns <= .fuse.ops.create.lat.p99_ns and
	.fuse.ops.create.lat.p99_ns <= .fuse.ops.create.lat.max_ns' \
	"$T/s1.json"

# non-root users are refused
chmod 755 "$T"
if setpriv --reuid=65534 --regid=65534 --clear-groups \
	"$B/ucfs-stat" --json "$MNT" >"$T/nobody.out" 2>&1; then
	fail nonroot_refused "nobody read the stats"
else
	check nonroot_refused grep -q 'Permission denied' "$T/nobody.out"
fi
chmod 700 "$T"

# ucfs-top on the mount, in tmux, while files are being created
if command -v tmux >/dev/null; then
	TM="tmux -L ucfs-mtest-$$"
	on_exit "$TM kill-server"
	mkdir "$MNT/load"
	( i=0; while [ $i -lt 20000 ]; do : >"$MNT/load/f$i"; i=$((i + 1))
	  done ) &
	LPID=$!
	on_exit "kill $LPID"
	$TM new-session -d -s top -x 100 -y 40 "'$B/ucfs-top' '$MNT'"
	sleep 2.5
	$TM capture-pane -p -t top >"$T/top.txt" 2>&1
	check top_tmux_node grep -Eq '^node +n0/s0' "$T/top.txt"
	check top_tmux_creates sh -c "awk '\$1 == \"create\" { ok = \$2 > 0 }
		END { exit !ok }' '$T/top.txt'"
	$TM send-keys -t top q
	kill $LPID
	wait $LPID 2>/dev/null
fi

# ucfs-top on the mount (batch mode: one frame)
check top_on_mount sh -c "'$B/ucfs-top' --batch --iterations 1 '$MNT' |
	grep -q '^FUSE ops/s'"

umount "$MNT"
wait_for 10 sh -c "! kill -0 $UPID 2>/dev/null"
check socket_removed_on_unmount test ! -e "$SOCK"

# second mount: -o stats=PATH,trace=FILE,trace_ops; the core's sections
"$B/ucfs" -f -o "stats=$T/s.sock,trace=$T/tr.jsonl,trace_ops" "$IMG" \
	"$MNT" >"$T/ucfs2.log" 2>&1 &
UPID2=$!
on_exit "kill $UPID2; wait $UPID2"
if ! wait_for 10 mountpoint -q "$MNT"; then
	fail mount_with_stats_opts "$(cat "$T/ucfs2.log")"
	exit 1
fi
check stats_path_option wait_for 5 test -S "$T/s.sock"
check no_derived_socket test ! -e "$SOCK"
i=0
while [ $i -lt 50 ]; do : >"$MNT/g$i"; i=$((i + 1)); done
dd if=/dev/zero of="$MNT/big" bs=64k count=16 conv=fsync 2>/dev/null
"$B/ucfs-stat" --json "$T/s.sock" >"$T/s3.json"
check sections_present jq -e '
	(.blockdev.write.count > 0) and (.blockdev.read.lat | has("p99_ns")) and
	(.journal.commits >= 1) and (.journal.flush.fsync >= 1) and
	(.journal.flush | has("timer") and has("demote") and has("full")) and
	(.cache | has("hits") and has("misses") and has("evictions")) and
	(.alloc.calls > 0) and .server.tracing == true and
	.node.options.trace_ops == true and .fuse.ops.fsync.count >= 1' \
	"$T/s3.json"
umount "$MNT"
wait_for 10 sh -c "! kill -0 $UPID2 2>/dev/null"
# 50 files and dd's "big": 51 creates, each traced once
check trace_written sh -c "grep -c '\"op\":\"create\"' '$T/tr.jsonl' |
	grep -qx 51"
check trace_lines_json sh -c "jq -e -s 'length > 50 and
	all(.[]; .ev == \"op\" and (.lat_us | type) == \"number\")' \
	'$T/tr.jsonl'"
check trace_summary sh -c "'$B/ucfs-trace' --json '$T/tr.jsonl' |
	jq -e '.bad_lines == 0 and .nodes[0].op > 50 and
	(.timeline | length) >= 1'"
exit 0
