#!/bin/sh
# crash_kill9: kill -9 the ucfs daemon (1) in the middle of a tar
# extraction, (2) while a writer fsyncs file after file (tests/progs/
# fsyncer records each file only once it and its directory were
# fsync'ed), (3) while an unlinked file is still open (an orphan). Each
# time: the dead mount is lazily unmounted, fsck.ucfs -n is clean on the
# crashed image (committed journal applied in memory), the remount
# replays the journal, every fsync'ed file is intact, the rest can be
# removed, and fsck is clean after the unmount. In (2), fsck.ucfs -y
# replays the journal before the remount (exit 0 or 1, then clean); in
# (3) it releases the orphan (then clean, and the space is back).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
fs_require_ucfs crash_kill9

IMG=$T/img MNT=$T/mnt SEED=${UCFS_SEED:-1}
fs_mkfs "$IMG" 1024 || { fail crash_mkfs; exit 1; }

# (1) tar killed midway
fs_mount "$IMG" "$MNT" || { fail crash_mount; exit 1; }
(tar -C /usr -cf - include | tar -C "$MNT" -xf - 2>/dev/null) &
tarpid=$!
sleep 3
check crash_tar_in_progress test -d "$MNT/include"
fs_kill9 "$MNT"
wait "$tarpid"
check crash_tar_fsck_crashed_image fs_fsck "$IMG"
fs_mount "$IMG" "$MNT" || { fail crash_tar_remount; exit 1; }
n=$(find "$MNT" | wc -l)
echo "after the tar crash: $n entries survived"
check crash_tar_tree_walkable sh -c "find '$MNT' -type f | head -200 | xargs cat >/dev/null"
check crash_tar_rm_rf rm -rf "$MNT/include"
check crash_tar_umount fs_umount "$MNT"
check crash_tar_fsck_after fs_fsck "$IMG"

# (2) kill -9 right after fsyncs
fs_mount "$IMG" "$MNT" || { fail crash_fsync_mount; exit 1; }
mkdir "$MNT/fs"
"$B/tests/fsyncer" write --seed "$SEED" "$MNT/fs" "$T/fsync.log" &
wpid=$!
sleep 4
fs_kill9 "$MNT"
wait "$wpid"
echo "fsync'ed records before the kill: $(wc -l <"$T/fsync.log")"
check crash_fsync_some_records test "$(wc -l <"$T/fsync.log")" -gt 5
check crash_fsync_fsck_crashed_image fs_fsck "$IMG"
r=$("$B/fsck.ucfs" -y "$IMG" >"$T/fsck-y.out" 2>&1; echo $?)
grep -E "replayed|fixed|clean" "$T/fsck-y.out" | head -3
check crash_fsync_fsck_repair_replays sh -c "test $r = 0 -o $r = 1"
check crash_fsync_fsck_clean_after_repair fs_fsck "$IMG"
fs_mount "$IMG" "$MNT" || { fail crash_fsync_remount; exit 1; }
check crash_fsync_files_intact "$B/tests/fsyncer" verify --seed "$SEED" \
	"$MNT/fs" "$T/fsync.log"
check crash_fsync_umount fs_umount "$MNT"
check crash_fsync_fsck_after fs_fsck "$IMG"

# (3) an unlinked file still open when the daemon dies
fs_mount "$IMG" "$MNT" || { fail crash_orphan_mount; exit 1; }
free0=$(stat -f -c %a "$MNT")
dd if=/dev/urandom of="$MNT/orphan" bs=1M count=16 conv=fsync status=none
exec 3<"$MNT/orphan"
rm "$MNT/orphan"
# sync(2) does not reach a FUSE daemon (no FUSE_SYNCFS outside virtiofs
# on Linux 6.1): fsync the directory to make the unlink durable
check crash_orphan_dir_fsync test "$("$B/tests/fsop" fsync "$MNT")" = OK
fs_kill9 "$MNT"
exec 3<&-
check crash_orphan_fsck_crashed_image fs_fsck "$IMG"
"$B/fsck.ucfs" -y "$IMG" >"$T/fsck-y.out" 2>&1
check crash_orphan_fsck_repair_releases grep -q "orphan inode(s) released" "$T/fsck-y.out"
check crash_orphan_fsck_clean_after_repair fs_fsck "$IMG"
fs_mount "$IMG" "$MNT" || { fail crash_orphan_remount; exit 1; }
check crash_orphan_gone test ! -e "$MNT/orphan"
check crash_orphan_space_back test "$(stat -f -c %a "$MNT")" -ge $((free0 - 16))
check crash_orphan_umount fs_umount "$MNT"
check crash_orphan_fsck_after fs_fsck "$IMG"
