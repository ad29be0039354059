#!/bin/sh
# age_basic: ucfs-age (tools/ucfs-age.c) on a small filesystem — option
# errors are clear and change nothing; it reaches the fill level within
# tolerance; the same seed on a fresh filesystem makes the same files
# (names and sizes; ucfs); pushed past the free space (--fill 99 on a
# filesystem whose directories and metadata it does not account) it meets
# ENOSPC, backs off and exits 0; the image is fsck-clean after each run.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"

AGE=$B/ucfs-age
IMG=$T/img MNT=$T/mnt
SEED=${UCFS_SEED:-5}
echo "seed $SEED"

fresh() {	# SIZE_MB — a fresh filesystem on $MNT
	if [ "$UCFS_TEST_TARGET" = ucfs ]; then
		fs_mkfs "$IMG" "$1" -J 8 -r 32
	else
		fs_mkfs "$IMG" "$1"
	fi && fs_mount "$IMG" "$MNT"
}
jnum() { sed -n "s/.*\"$1\": \\([0-9.]*\\).*/\\1/p" "$2"; }

# ---- options: a clear message, status 1, nothing created
mkdir -p "$T/d"
: >"$T/file"
bad() {	# NAME WANT ARGS... — exit 1 and stderr matching WANT
	_n=$1 _w=$2; shift 2
	if "$AGE" "$@" >"$T/o" 2>"$T/e"; then
		fail "age_opt_$_n" "exit 0"
	elif grep -q -e "$_w" "$T/e"; then
		pass "age_opt_$_n"
	else
		fail "age_opt_$_n" "$(cat "$T/e")"
	fi
}
bad fill_zero "--fill wants a number from 1 to 99" --fill 0 "$T/d"
bad fill_text "not 'abc'" --fill abc "$T/d"
bad churn_neg "--churn wants" --churn -1 "$T/d"
bad sizes "--sizes is small, mixed or large" --sizes huge "$T/d"
bad no_dir "missing DIR" --fill 50
bad two_dirs "one DIR only" "$T/d" "$T/d"
bad missing_dir "No such file" "$T/nope"
bad not_dir "Not a directory" "$T/file"
bad unknown "usage:" --frobnicate "$T/d"
check age_opt_nothing_made test -z "$(ls -A "$T/d")"

# ---- fill level, JSON report, fsck
fresh 128 || { fail age_mount; exit 1; }
timeout 120 "$AGE" --fill 80 --churn 4 --seed "$SEED" --json "$MNT" \
	>"$T/r1.json" 2>"$T/r1.err"
check age_runs_ok test $? = 0
check age_json_valid python3 -m json.tool "$T/r1.json"
f=$(jnum fill_final "$T/r1.json")
# statvfs as stat(1) reads it (df's Use% leaves ext4's reserve out)
df=$(stat -f -c '%b %f' "$MNT" | awk '{ printf "%d", 100 * ($1 - $2) / $1 }')
echo "fill_final $f, statvfs $df%, $(jnum files_created "$T/r1.json") created,"\
	"$(jnum files_deleted "$T/r1.json") deleted"
check age_fill_in_tolerance awk -v f="$f" 'BEGIN { exit !(f >= 78 && f <= 83) }'
check age_statvfs_agrees awk -v d="$df" 'BEGIN { exit !(d >= 77 && d <= 84) }'
check age_churn_deleted awk -v n="$(jnum files_deleted "$T/r1.json")" \
	'BEGIN { exit !(n > 0) }'
(cd "$MNT" && find . -type f -printf '%p %s\n' | sort) >"$T/list1"
check age_files_listed test "$(wc -l <"$T/list1")" -gt 20
"$AGE" --seed "$SEED" "$MNT" >"$T/o" 2>"$T/e"
check age_same_seed_exists grep -q "exists: this seed already aged" "$T/e"
fs_umount "$MNT" || fail age_umount
if [ "$UCFS_TEST_TARGET" = ucfs ]; then
	check age_fsck_clean fs_fsck "$IMG"
fi

# ---- the same seed on a fresh filesystem: the same files
fresh 128 || { fail age_mount2; exit 1; }
timeout 120 "$AGE" --fill 80 --churn 4 --seed "$SEED" "$MNT" >"$T/r2.txt" 2>&1
check age_runs_ok_again test $? = 0
check age_text_report grep -q "^final: .* full (target 80%)" "$T/r2.txt"
(cd "$MNT" && find . -type f -printf '%p %s\n' | sort) >"$T/list2"
# ucfs allocates at write and reports it at once; ext4's delayed
# allocation makes st_blocks and statvfs depend on writeback timing
if [ "$UCFS_TEST_TARGET" = ucfs ]; then
	check age_deterministic cmp "$T/list1" "$T/list2"
fi
fs_umount "$MNT" || fail age_umount2

# ---- past the free space: ENOSPC, back off, carry on, exit 0
fresh 64 || { fail age_mount3; exit 1; }
timeout 120 "$AGE" --fill 99 --churn 3 --sizes small --seed "$SEED" --json \
	"$MNT" >"$T/r3.json" 2>"$T/r3.err"
check age_enospc_exit_0 test $? = 0
echo "full run: enospc $(jnum enospc "$T/r3.json"), fill_final"\
	"$(jnum fill_final "$T/r3.json")"
# tmpfs accounts exactly what ucfs-age does: no ENOSPC there
[ "$UCFS_TEST_TARGET" = tmpfs ] ||
	check age_enospc_met awk -v n="$(jnum enospc "$T/r3.json")" \
	'BEGIN { exit !(n > 0) }'
check age_enospc_still_full awk -v f="$(jnum fill_final "$T/r3.json")" \
	'BEGIN { exit !(f >= 90) }'
check age_enospc_fs_usable sh -c "echo ok >'$MNT/after' && rm '$MNT/after'"
fs_umount "$MNT" || fail age_umount3
if [ "$UCFS_TEST_TARGET" = ucfs ]; then
	check age_enospc_fsck_clean fs_fsck "$IMG"
fi
exit 0
