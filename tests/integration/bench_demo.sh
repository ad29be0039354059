#!/bin/sh
# bench_demo — "make demo" (tools/demo.sh) runs to the end: mkfs, mount
# two nodes (lockproto=dlm), untar a kernel subtree on node 1, read it back
# identical on node 2 after node 1 remounted, stats, rm, unmount, fsck;
# and leaves no mount, daemon or scratch directory behind.
. "$UCFS_TOP/tests/lib.sh"

if [ "$(id -u)" != 0 ]; then
	skip bench_demo "needs root (FUSE mounts)"; exit 0
fi
[ -e /usr/src/linux-source-6.1.tar.xz ] ||
	{ skip bench_demo "linux-source-6.1 missing: run make deps"; exit 0; }

timeout -k 10 300 sh "$UCFS_TOP/tools/demo.sh" "$B" >"$T/log" 2>&1
rc=$?
if [ "$rc" = 0 ]; then pass demo_runs
else fail demo_runs "exit $rc"; tail -n 20 "$T/log" | sed 's/^/    /'; fi
check demo_tree_identical grep -q 'is identical to the source' "$T/log"
check demo_shows_stats grep -q 'FUSE op' "$T/log"
check demo_two_nodes grep -q 'mount (2 node(s), lockproto=dlm)' "$T/log"

# Other runs of the demo may be going on: check this run's directory only.
W=$(sed -n 's|^== image: .* at \(/tmp/ucfs-demo\.[^/]*\)/disk.img.*|\1|p' \
	"$T/log" | head -n 1)
check demo_scratch_named test -n "$W"
check demo_unmounted sh -c "! grep -q '${W:-none}/' /proc/mounts"
check demo_cleaned test ! -e "${W:-none}"
exit 0
