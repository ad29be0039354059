#!/bin/sh
# bench_demo — "make demo" (tools/demo.sh) runs to the end: mkfs, mount,
# untar a kernel subtree, read it back identical after a remount, stats,
# rm, unmount; and leaves no mount, daemon or scratch directory behind.
. "$UCFS_TOP/tests/lib.sh"

if [ "$(id -u)" != 0 ]; then
	skip bench_demo "needs root (FUSE mounts)"; exit 0
fi
[ -e /usr/src/linux-source-6.1.tar.xz ] ||
	{ skip bench_demo "linux-source-6.1 missing: run make deps"; exit 0; }
before=$(ls -d /tmp/ucfs-demo.* 2>/dev/null | wc -l)

timeout -k 10 300 sh "$UCFS_TOP/tools/demo.sh" "$B" >"$T/log" 2>&1
rc=$?
if [ "$rc" = 0 ]; then pass demo_runs
else fail demo_runs "exit $rc"; tail -n 20 "$T/log" | sed 's/^/    /'; fi
check demo_tree_identical grep -q 'is identical to the source' "$T/log"
check demo_shows_stats grep -q 'FUSE op' "$T/log"
check demo_unmounted sh -c "! grep -q ucfs-demo /proc/mounts"
check demo_cleaned test "$(ls -d /tmp/ucfs-demo.* 2>/dev/null | wc -l)" \
	-le "$before"
exit 0
