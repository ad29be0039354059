#!/bin/sh
# pt_fsx: the fsx and nscheck random checkers (tests/integration/fs_fsx.sh,
# unchanged) through the pass-through lens over ext4 (fslib's "pt"
# target). Test names get a "pt_" prefix; UCFS_SEED adds a seed.
# run.sh: long (about a minute: the random checkers through the lens)
. "$UCFS_TOP/tests/lib.sh"

if [ "$(id -u)" -ne 0 ] || [ ! -c /dev/fuse ]; then
	skip pt_fsx "needs root and /dev/fuse"
	exit 0
fi
UCFS_TEST_TARGET=pt sh "$UCFS_TOP/tests/integration/fs_fsx.sh" 2>&1 |
	sed 's/^\(PASS\|FAIL\|SKIP\) /\1 pt_/' >"$T/out"
cat "$T/out"
grep -q '^PASS ' "$T/out" || fail pt_fsx "no check ran"
