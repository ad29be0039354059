# tests/fslib.sh — helpers for filesystem integration tests (POSIX sh).
# Source it after tests/lib.sh:   . "$UCFS_TOP/tests/lib.sh"
#                                  . "$UCFS_TOP/tests/fslib.sh"
#
# The target filesystem is switchable so that every script can be proven
# on a reference filesystem before ucfs passes it:
#   UCFS_TEST_TARGET=ucfs   (default) mkfs.ucfs image + the ucfs daemon
#   UCFS_TEST_TARGET=ext4   ext4 image on a loop device (mkfs.ext4)
#   UCFS_TEST_TARGET=tmpfs  a size-limited tmpfs as the "image" directory,
#                           bind-mounted on the mountpoint (remount keeps
#                           the data; kill9 is not available)
#   UCFS_TEST_TARGET=pt     ext4 image on a loop device, seen through the
#                           ucfs daemon's pass-through lens
#                           (ucfs -o passthrough LOWER MNT; fusefs/MOUNT.md)
#
# Functions (all return 0 / non-zero; none exits):
#   fs_target                      prints the target name
#   fs_require_ucfs NAME           SKIP NAME and exit 0 if the target is not
#                                  ucfs (for ucfs-only checks such as fsck,
#                                  kill -9) — never on the default target
#   fs_mkfs IMG SIZE_MB [ARGS...]  make a fresh image of SIZE_MB MiB
#   fs_mount IMG MNT [OPTS]        mount (ucfs, pt: daemon in the
#                                  background, PID kept, wait until
#                                  mounted; pt: OPTS go to the lens); an
#                                  exit hook unmounts it and kills the
#                                  daemon
#   fs_umount MNT                  clean unmount; waits for the daemon to
#                                  exit (its exit status is the result)
#   fs_remount IMG MNT [OPTS]      fs_umount + fs_mount
#   fs_kill9 MNT                   kill -9 the daemon, lazily unmount the
#                                  dead mount (ucfs only)
#   fs_fsck IMG                    read-only check: fsck.ucfs -n (ext4:
#                                  e2fsck -fn; tmpfs: nothing to check)
#   fs_daemon_log MNT              prints the daemon's log file name
#   fs_daemon_target               0 if the target is served by the ucfs
#                                  daemon (ucfs, pt): its stats and tools
#
# Each mount records "pid" and "log" in $T/.mnt.<id>/ keyed by the
# mountpoint, so several mounts can coexist.

UCFS_TEST_TARGET=${UCFS_TEST_TARGET:-ucfs}
FS_MOUNT_TIMEOUT=${FS_MOUNT_TIMEOUT:-20}

fs_target() { echo "$UCFS_TEST_TARGET"; }

fs_daemon_target() {
	[ "$UCFS_TEST_TARGET" = ucfs ] || [ "$UCFS_TEST_TARGET" = pt ]
}

fs_require_ucfs() {
	if [ "$UCFS_TEST_TARGET" != ucfs ]; then
		skip "$1" "needs UCFS_TEST_TARGET=ucfs"
		exit 0
	fi
}

# Per-mountpoint state directory.
_fs_state() {
	_id=$(printf '%s' "$1" | cksum | cut -d' ' -f1)
	echo "$T/.mnt.$_id"
}

fs_daemon_log() { echo "$(_fs_state "$1")/log"; }

fs_mkfs() {
	_img=$1 _mb=$2
	shift 2
	case $UCFS_TEST_TARGET in
	ucfs)
		rm -f "$_img"
		truncate -s "${_mb}M" "$_img" || return 1
		"$B/mkfs.ucfs" "$@" "$_img" >"$_img.mkfs.log" 2>&1 || {
			cat "$_img.mkfs.log" >&2
			return 1
		}
		;;
	ext4|pt)
		rm -f "$_img"
		truncate -s "${_mb}M" "$_img" || return 1
		# 4 KiB blocks and 256-byte inodes as on any disk-sized ext4
		# (the "small" defaults leave 1 KiB for all xattrs of a file)
		mkfs.ext4 -q -F -b 4096 -I 256 "$_img" >/dev/null 2>&1 ||
			return 1
		;;
	tmpfs)
		mkdir -p "$_img" || return 1
		mountpoint -q "$_img" && umount "$_img"
		mount -t tmpfs -o "size=${_mb}m" tmpfs "$_img" || return 1
		on_exit "umount '$_img' 2>/dev/null"
		;;
	*)
		echo "fslib: unknown UCFS_TEST_TARGET $UCFS_TEST_TARGET" >&2
		return 1
		;;
	esac
}

_fs_mounted() {	# MNT: 0 if MNT is a mountpoint now
	grep -q " $(printf '%s' "$1" | sed 's/ /\\040/g') " /proc/self/mounts
}

# _fs_daemon SRC MNT OPTS: start the ucfs daemon on SRC (an image, or a
# directory with -o passthrough) and wait until MNT is mounted.
_fs_daemon() {
	_src=$1 _mnt=$2 _opts=$3
	_st=$(_fs_state "$_mnt")
	rm -f "$_st/pid" "$_st/rc" "$_st/rc.tmp"
	# a wrapper records the daemon's PID and, when it exits, its
	# status (fs_umount may run in a subshell: no "wait" there)
	(
		if [ -n "$_opts" ]; then
			"$B/ucfs" -f -o "$_opts" "$_src" "$_mnt" &
		else
			"$B/ucfs" -f "$_src" "$_mnt" &
		fi
		echo $! >"$_st/pid.tmp"
		mv "$_st/pid.tmp" "$_st/pid"
		wait $!
		# written whole, then renamed: a reader never sees it empty
		echo $? >"$_st/rc.tmp"
		mv "$_st/rc.tmp" "$_st/rc"
	) >>"$_st/log" 2>&1 &
	wait_for 5 test -f "$_st/pid" || return 1
	_pid=$(cat "$_st/pid")
	on_exit "fusermount3 -u -z '$_mnt'; [ -f '$_st/rc' ] || kill -9 $_pid"
	_i=0
	while ! _fs_mounted "$_mnt"; do
		if [ -f "$_st/rc" ]; then
			echo "fslib: ucfs exited before mounting:" >&2
			tail -n 20 "$_st/log" >&2
			return 1
		fi
		_i=$((_i + 1))
		if [ "$_i" -gt $((FS_MOUNT_TIMEOUT * 10)) ]; then
			echo "fslib: mount timed out" >&2
			tail -n 20 "$_st/log" >&2
			return 1
		fi
		sleep 0.1
	done
}

fs_mount() {
	_img=$1 _mnt=$2 _opts=${3:-}
	_st=$(_fs_state "$_mnt")
	mkdir -p "$_mnt" "$_st" || return 1
	case $UCFS_TEST_TARGET in
	ucfs)
		_fs_daemon "$_img" "$_mnt" "$_opts" || return 1
		;;
	pt)
		mkdir -p "$_st/lower" || return 1
		mount -o loop "$_img" "$_st/lower" || return 1
		on_exit "umount -l '$_st/lower'"
		chmod 755 "$_st" "$_st/lower"
		_fs_daemon "$_st/lower" "$_mnt" \
			"passthrough${_opts:+,$_opts}" || return 1
		;;
	ext4)
		mount -o "loop${_opts:+,$_opts}" "$_img" "$_mnt" || return 1
		on_exit "umount -l '$_mnt'"
		;;
	tmpfs)
		mount --bind "$_img" "$_mnt" || return 1
		on_exit "umount -l '$_mnt'"
		;;
	esac
	return 0
}

# _fs_daemon_umount MNT: unmount a daemon's mount and wait for the daemon
# to exit; its status is the result.
_fs_daemon_umount() {
	_mnt=$1
	_st=$(_fs_state "$_mnt")
	_pid=$(cat "$_st/pid" 2>/dev/null) || return 1
	_i=0
	while ! fusermount3 -u "$_mnt" 2>>"$_st/log"; do
		_i=$((_i + 1))
		[ "$_i" -gt 50 ] && return 1   # busy for 5 s
		sleep 0.1
	done
	# the daemon writes back and exits: its status is the result
	if ! wait_for 60 test -f "$_st/rc"; then
		echo "fslib: ucfs did not exit after unmount" >&2
		return 1
	fi
	_rc=$(cat "$_st/rc")
	rm -f "$_st/pid"
	if [ "$_rc" -ne 0 ]; then
		echo "fslib: ucfs exited with status $_rc:" >&2
		tail -n 20 "$_st/log" >&2
	fi
	return "$_rc"
}

fs_umount() {
	_mnt=$1
	_st=$(_fs_state "$_mnt")
	case $UCFS_TEST_TARGET in
	ucfs)
		_fs_daemon_umount "$_mnt"
		;;
	pt)
		_fs_daemon_umount "$_mnt" || return 1
		umount "$(_fs_state "$_mnt")/lower"
		;;
	*)
		umount "$_mnt"
		;;
	esac
}

fs_remount() {
	fs_umount "$2" && fs_mount "$@"
}

fs_kill9() {
	_mnt=$1
	_st=$(_fs_state "$_mnt")
	[ "$UCFS_TEST_TARGET" = ucfs ] || return 1
	_pid=$(cat "$_st/pid" 2>/dev/null) || return 1
	kill -9 "$_pid"
	wait_for 10 test -f "$_st/rc"
	rm -f "$_st/pid"
	fusermount3 -u -z "$_mnt" 2>/dev/null || umount -l "$_mnt"
}

fs_fsck() {
	case $UCFS_TEST_TARGET in
	ucfs) "$B/fsck.ucfs" -n "$1" ;;
	ext4|pt) e2fsck -fn "$1" >/dev/null 2>&1 ;;
	tmpfs) return 0 ;;
	esac
}
