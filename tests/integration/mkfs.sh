#!/bin/sh
# mkfs.sh — mkfs.ucfs on image files: formats (and the image mounts),
# refuses an existing filesystem without -f, refuses foreign signatures,
# refuses a too-small device and bad options, 4 GiB in well under 2 s;
# --help / -h print the usage and exit 0.
. "$UCFS_TOP/tests/lib.sh"

MKFS=$B/mkfs.ucfs
MNT=$B/tests/core_mount
IMG=$T/img

truncate -s 256M "$IMG"
check mkfs_basic "$MKFS" -q "$IMG"
check mount_after_mkfs "$MNT" "$IMG"
check nolock_exclusive "$MNT" "$IMG" excl
check help_exits_0 sh -c "'$MKFS' --help | grep -q '^usage: ' && '$MKFS' -h | grep -q '^usage: '"
check bad_option_exits_2 sh -c "'$MKFS' --bogus 2>/dev/null; test \$? = 2"

if "$MKFS" -q "$IMG" 2>"$T/err"; then
	fail refuses_existing "formatted over an existing ucfs"
elif grep -q "ucfs signature" "$T/err"; then
	pass refuses_existing
else
	fail refuses_existing "$(cat "$T/err")"
fi
check force_overwrite "$MKFS" -q -f -j 3 -J 8 -r 64 -p dlm -t c1:fs1 \
	-L test "$IMG"
check mount_after_force "$MNT" "$IMG"

# foreign signatures (written by hand: no mkfs.ext4 needed)
sig_case() {	# name offset bytes-as-printf
	truncate -s 0 "$IMG" && truncate -s 64M "$IMG"
	printf "$3" | dd of="$IMG" bs=1 seek="$2" conv=notrunc 2>/dev/null
	if "$MKFS" -q "$IMG" 2>"$T/err"; then
		fail "refuses_$1" "formatted over $1"
	elif grep -q "signature" "$T/err"; then
		pass "refuses_$1"
	else
		fail "refuses_$1" "$(cat "$T/err")"
	fi
}
sig_case ext4 1080 '\123\357'
sig_case xfs 0 'XFSB'
sig_case btrfs 65600 '_BHRfS_M'
sig_case gfs2 65536 '\001\026\031\160'
sig_case ocfs2 2048 'OCFSV2'
sig_case swap 4086 'SWAPSPACE2'
check force_over_foreign "$MKFS" -q -f "$IMG"

truncate -s 0 "$IMG" && truncate -s 16M "$IMG"
if "$MKFS" -q "$IMG" 2>"$T/err"; then
	fail refuses_too_small "16 MiB with a 32 MiB journal accepted"
elif grep -q "too small" "$T/err"; then
	pass refuses_too_small
else
	fail refuses_too_small "$(cat "$T/err")"
fi
check small_with_small_journal "$MKFS" -q -J 1 -r 4 "$IMG"
check mount_small "$MNT" "$IMG"

bad_opt() {	# name args... : must exit 2 with a message
	_n=$1; shift
	"$MKFS" "$@" >"$T/out" 2>"$T/err"
	_rc=$?
	if [ "$_rc" -eq 2 ] && [ -s "$T/err" ]; then
		pass "$_n"
	else
		fail "$_n" "exit $_rc: $(cat "$T/err")"
	fi
}
bad_opt bad_blocksize -b 1024 "$IMG"
bad_opt bad_slots -j 0 "$IMG"
bad_opt bad_slots_big -j 1000 "$IMG"
bad_opt bad_journal -J abc "$IMG"
bad_opt bad_rgroup -r -5 "$IMG"
bad_opt bad_proto -p foo "$IMG"
bad_opt bad_table -t nocolon "$IMG"
bad_opt unknown_option -Z "$IMG"
bad_opt missing_device
bad_opt two_devices "$IMG" "$IMG"

if "$MKFS" -q "$T/nonexistent" 2>"$T/err"; then
	fail missing_file "formatted a missing file"
else
	pass missing_file
fi

# speed: 4 GiB sparse image
truncate -s 0 "$IMG" && truncate -s 4G "$IMG"
s=$(date +%s%N)
"$MKFS" -q -f "$IMG"
e=$(date +%s%N)
ms=$(( (e - s) / 1000000 ))
echo "mkfs of 4 GiB: ${ms} ms"
if [ "$ms" -lt 2000 ]; then
	pass mkfs_4g_fast
else
	fail mkfs_4g_fast "${ms} ms"
fi
check mount_4g "$MNT" "$IMG"
rm -f "$IMG"
