#!/bin/sh
# pt_basic: the pass-through lens's front door and its instruments.
#  - bad input: DIR missing, not a directory, not readable, a mountpoint
#    inside DIR, ucfs-device options (lockproto=dlm) — each refused with
#    its own message, nothing mounted;
#  - the mount(8) / fstab form, through fuse3's mount helper;
#  - the stats count exactly what was done (102 creates, 10 mkdirs, 100
#    unlinks, 8 O_DIRECT writes and reads of 1 MiB (a read split at
#    max_read), a copy_file_range),
#    the "passthrough" section splits handler time into lower-filesystem
#    time and the lens's own, the trace (trace=, trace_ops) has one line
#    per op, ucfs-top and ucfs-trace read them;
#  - what the lens does lands in the lower directory, with the caller's
#    ownership and supplementary groups;
#  - a lower filesystem without lasting file handles (FUSE: the lens over
#    the lens) works with a descriptor per inode; a directory mounted on
#    itself (in place) keeps what it held.
# run.sh: alone (it drops the caches of the machine)
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/statlib.sh"

[ "$(id -u)" -eq 0 ] || { skip pt_basic "needs root (FUSE mount)"; exit 0; }
[ -c /dev/fuse ] || { skip pt_basic "no /dev/fuse"; exit 0; }
command -v jq >/dev/null || { skip pt_basic "jq not installed"; exit 0; }

IMG=$T/img LOW=$T/low MNT=$T/mnt
mkdir -p "$LOW" "$MNT"
chmod 755 "$T"
truncate -s 512M "$IMG"
mkfs.ext4 -q -F -b 4096 "$IMG" || { fail pt_mkfs; exit 1; }
mount -o loop "$IMG" "$LOW" || { fail pt_lower_mount; exit 1; }
on_exit "umount -l '$LOW'"

# refused NAME WANT ARGS...: ucfs exits 1 with a message matching WANT
# and leaves nothing mounted
refused() {
	_n=$1 _w=$2; shift 2
	if "$B/ucfs" "$@" >"$T/out" 2>&1; then
		fail "$_n" "mounted"
		fusermount3 -u "$MNT"
	elif ! grep -q "$_w" "$T/out"; then
		fail "$_n" "message: $(cat "$T/out")"
	elif mountpoint -q "$MNT"; then
		fail "$_n" "left a mount"
	else
		pass "$_n"
	fi
}
touch "$T/afile"
mkdir -m 700 "$T/private"
refused pt_dir_missing "'$T/nosuch': No such file or directory" \
	-o passthrough "$T/nosuch" "$MNT"
refused pt_not_a_directory "'$T/afile' is not a directory" \
	-o passthrough "$T/afile" "$MNT"
# root reads any local directory; an unprivileged user cannot read this
if setpriv --reuid=65534 --regid=65534 --clear-groups "$B/ucfs" \
	-o passthrough "$T/private" "$MNT" >"$T/out" 2>&1; then
	fail pt_dir_unreadable_user mounted
else
	check pt_dir_unreadable_user grep -q "cannot read '$T/private'" \
		"$T/out"
fi
mkdir -p "$LOW/sub"
refused pt_mountpoint_inside "is inside '$LOW'" -o passthrough "$LOW" \
	"$LOW/sub"
refused pt_dlm_refused "are for ucfs devices" \
	-o passthrough,lockproto=dlm "$LOW" "$MNT"
refused pt_unknown_option "unknown mount option 'pasthrough'" \
	-o pasthrough "$LOW" "$MNT"

# mount(8): fuse3's helper runs "ucfs LOW MNT -o ..." (as for an fstab
# line "LOW MNT fuse.ucfs passthrough,..."; here with the build's ucfs)
if mount -t fuse "$B/ucfs#$LOW" "$MNT" \
	-o "passthrough,allow_other,trace=$T/trace,trace_ops" \
	2>"$T/mount.err"; then
	pass pt_mount_helper
else
	fail pt_mount_helper "$(cat "$T/mount.err")"
	exit 1
fi
on_exit "mountpoint -q '$MNT' && umount '$MNT'"
check pt_fstype sh -c "grep ' $MNT ' /proc/self/mounts | grep -q 'fuse.ucfs'"
check pt_fsname sh -c "grep ' $MNT ' /proc/self/mounts | grep -q '^$LOW '"

delta() { # SECTION.PATH (of the two snapshots s0, s1)
	jq -n --slurpfile a "$T/s0.json" --slurpfile b "$T/s1.json" \
		"\$b[0].$1 - \$a[0].$1"
}
stat_json >"$T/s0.json" || { fail pt_ucfs_stat; exit 1; }
check pt_stats_section jq -e '.passthrough.dir != null and
	.transport.name != null' "$T/s0.json"

ns_churn
head -c 8M /dev/urandom >"$T/data"
dd if="$T/data" of="$MNT/direct" bs=1M oflag=direct status=none
dd if="$MNT/direct" of="$T/back" bs=1M iflag=direct status=none
python3 -c "
import os
a = os.open('$MNT/direct', os.O_RDONLY)
b = os.open('$MNT/copy', os.O_WRONLY | os.O_CREAT, 0o644)
n = os.copy_file_range(a, b, 1 << 20)
assert n == 1 << 20, n
" || fail pt_copy_file_range_call
snap_until "$T/s1.json" "$T/s0.json" \
	'$b[0].fuse.ops.copy_file_range.count > $a[0].fuse.ops.copy_file_range.count'
# 100 + the two files dd and copy_file_range made
check pt_creates_102 test "$(delta fuse.ops.create.count)" -eq 102
check pt_create_errors_0 test "$(delta fuse.ops.create.errors)" -eq 0
check pt_mkdirs_10 test "$(delta fuse.ops.mkdir.count)" -eq 10
check pt_unlinks_100 test "$(delta fuse.ops.unlink.count)" -eq 100
# each 1 MiB write is split at the mount's max_write (the lens keeps a
# spliced write request within one pipe: fs_fuse_io.c, MOUNT.md)
mw=$(jq '.transport.max_write' "$T/s1.json")
check pt_max_write_set test "${mw:-0}" -gt 0
check pt_direct_writes_8 test "$(delta fuse.ops.write.count)" -eq \
	$((8 * ((1048576 + ${mw:-1} - 1) / ${mw:-1})))
# each 1 MiB read is split at the mount's max_read (the lens keeps a
# read reply within one pipe: fs_fuse_io.c, MOUNT.md)
mr=$(grep " $MNT " /proc/self/mounts | grep -o 'max_read=[0-9]*' |
	cut -d= -f2)
mr=${mr:-1048576}
check pt_direct_reads_8 test "$(delta fuse.ops.read.count)" -eq \
	$((8 * ((1048576 + mr - 1) / mr)))
check pt_copy_file_range_1 test "$(delta fuse.ops.copy_file_range.count)" -eq 1
check pt_direct_data cmp "$T/data" "$T/back"
check pt_copy_data sh -c "head -c 1M '$T/data' | cmp - '$LOW/copy'"
# every create made one openat(O_CREAT) and the lookup's three calls;
# the split is consistent: lower + resolve + reply + lens = handler
check pt_split_create jq -e '.passthrough.ops.create as $c |
	$c.count == 102 and $c.lower_calls >= 4 * 102 and
	$c.lower_ns > 0 and $c.lower_ns <= $c.handler_ns and
	$c.reply_ns > 0 and
	$c.lower_ns + $c.resolve_ns + $c.reply_ns + $c.lens_ns == $c.handler_ns' \
	"$T/s1.json"
check pt_split_totals jq -e '.passthrough.lower_ns > 0 and
	.passthrough.lens_ns > 0 and .passthrough.lower_calls > 0' \
	"$T/s1.json"
check pt_lower_has_dirs sh -c "ls -d '$LOW'/d[0-9] | wc -l | grep -qx 10"
check pt_lower_files_gone sh -c "! ls '$LOW'/f* 2>/dev/null"

# the caller's identity reaches the lower filesystem
chmod 777 "$MNT/d0"
setpriv --reuid=65534 --regid=65534 --clear-groups touch "$MNT/d0/user"
check pt_owner_in_lower test "$(stat -c %u:%g "$LOW/d0/user")" = 65534:65534
# ... with its supplementary groups: a directory only group 4321 may
# write to, the kernel's check and the lower filesystem's must both pass
mkdir "$MNT/grp" && chgrp 4321 "$MNT/grp" && chmod 770 "$MNT/grp"
check pt_supplementary_group setpriv --reuid=65534 --regid=65534 \
	--groups=4321 touch "$MNT/grp/member"
check pt_supplementary_group_owner test \
	"$(stat -c %u:%g "$LOW/grp/member")" = 65534:65534
check pt_no_group_refused sh -c "! setpriv --reuid=65534 --regid=65534 \
	--clear-groups touch '$MNT/grp/other' 2>/dev/null"

# ucfs-top draws the mount; the trace has the ops with their latency
check pt_top sh -c "'$B/ucfs-top' --batch --iterations 1 '$MNT' | grep -q create"
fs_sync_trace() { sleep 1.5; }	# flushed every second
fs_sync_trace
# every create and mkdir above, the refused one excepted (the kernel
# refused it: default_permissions)
check pt_trace_creates test "$(grep -c '"op":"create"' "$T/trace")" -eq 104
check pt_trace_mkdirs test "$(grep -c '"op":"mkdir"' "$T/trace")" -eq 11
check pt_ucfs_trace sh -c "'$B/ucfs-trace' '$T/trace' | grep -q ."

# a lower filesystem without lasting file handles (FUSE: here the lens
# itself) is served by a descriptor per inode, and survives cache drops
M2=$T/mnt2
mkdir -p "$M2"
if "$B/ucfs" -o passthrough "$MNT" "$M2" 2>"$T/m2.err"; then
	on_exit "mountpoint -q '$M2' && umount '$M2'"
	mkdir "$M2/pin"
	for i in 1 2 3 4 5 6 7 8 9 10; do echo "$i" >"$M2/pin/f$i"; done
	echo 3 >/proc/sys/vm/drop_caches
	check pt_fuse_lower_data test "$(cat "$M2/pin/f7")" = 7
	check pt_fuse_lower_pinned jq -e '.passthrough.pinned >= 11 and
		.passthrough.stale == 0' "$("$B/ucfs-stat" --json "$M2" >"$T/m2.json" &&
		echo "$T/m2.json")"
	check pt_fuse_lower_umount umount "$M2"
else
	fail pt_fuse_lower_mount "$(cat "$T/m2.err")"
fi

# in place: DIR mounted on itself, the lens sees what was there
mkdir -p "$T/inplace"
echo before >"$T/inplace/old"
if "$B/ucfs" -o passthrough "$T/inplace" "$T/inplace" 2>"$T/ip.err"; then
	on_exit "mountpoint -q '$T/inplace' && umount '$T/inplace'"
	check pt_in_place_old test "$(cat "$T/inplace/old")" = before
	echo after >"$T/inplace/new"
	check pt_in_place_counted sh -c "'$B/ucfs-stat' --json '$T/inplace' |
		jq -e '.fuse.ops.create.count == 1'"
	check pt_in_place_umount umount "$T/inplace"
	check pt_in_place_kept test "$(cat "$T/inplace/new")" = after
else
	fail pt_in_place_mount "$(cat "$T/ip.err")"
fi

cd /
check pt_umount umount "$MNT"
check pt_daemon_gone wait_for 10 sh -c "! pgrep -f '[u]cfs $LOW $MNT'"
