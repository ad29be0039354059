#!/bin/sh
# fs_parallel: several random checkers at once on one mount (per-inode
# locks, fusefs/namespace/fs_ilock.h): four nscheck runs, each in its own
# directory with its own model, and four fsx runs on four files, all in
# parallel; then cross-directory renames from several processes over one shared
# directory; every checker must match its model, and fsck is clean after
# unmount. Seeds: 1..4 plus UCFS_SEED (printed).
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"

IMG=$T/img MNT=$T/mnt
BASE=${UCFS_SEED:-0}
echo "seed base $BASE (UCFS_SEED)"
fs_mkfs "$IMG" 512 || { fail par_mkfs; exit 1; }
fs_mount "$IMG" "$MNT" || { fail par_mount; exit 1; }

# run NAME CMD...: in the background, its status in $T/NAME.rc; JOBS
# lists the PIDs (a bare `wait` would wait for the daemon too)
JOBS=""
run() {
	_n=$1; shift
	("$@" >"$T/$_n.log" 2>&1; echo $? >"$T/$_n.rc") &
	JOBS="$JOBS $!"
}
waitjobs() {
	for _p in $JOBS; do wait "$_p"; done
	JOBS=""
}
# collect NAME...: a PASS/FAIL line each, from the status files
collect() {
	for _n in "$@"; do
		if [ "$(cat "$T/$_n.rc" 2>/dev/null)" = 0 ]; then
			pass "$_n"
		else
			fail "$_n" "$(tail -5 "$T/$_n.log")"
		fi
	done
}

names=""
for k in 1 2 3 4; do
	s=$((BASE + k))
	mkdir -p "$MNT/ns$k"
	run "par_nscheck_$k" "$B/tests/nscheck" --seed "$s" --ops 3000 \
		--quiet "$MNT/ns$k"
	run "par_fsx_$k" "$B/tests/fsx" --seed "$s" --ops 3000 "$MNT/fsx$k"
	names="$names par_nscheck_$k par_fsx_$k"
done
waitjobs
collect $names

# four movers: each creates its files in its own directory, moves them
# into a shared one and back under new names, many times at once
mkdir -p "$MNT/shared"
mover() {	# K: exits 1 on the first wrong result
	_d=$MNT/own$1
	mkdir -p "$_d" || return 1
	for _i in $(seq 1 60); do
		echo "$1.$_i" >"$_d/f$_i" || return 1
		mkdir "$_d/d$_i" || return 1
		mv "$_d/f$_i" "$MNT/shared/m$1.f$_i" || return 1
		mv "$_d/d$_i" "$MNT/shared/m$1.d$_i" || return 1
		mv "$MNT/shared/m$1.f$_i" "$_d/g$_i" || return 1
		[ "$(cat "$_d/g$_i")" = "$1.$_i" ] || return 1
		rmdir "$MNT/shared/m$1.d$_i" || return 1
	done
	[ "$(ls "$_d" | wc -l)" = 60 ] || return 1
	[ -z "$(ls "$MNT/shared" | grep "^m$1\.")" ]
}
for k in 1 2 3 4; do run "par_mover_$k" mover "$k"; done
waitjobs
collect par_mover_1 par_mover_2 par_mover_3 par_mover_4
check par_shared_empty test -z "$(ls "$MNT/shared")"

check par_umount fs_umount "$MNT"
check par_fsck fs_fsck "$IMG"
