#!/bin/sh
# clu_pause: a node that is only paused (SIGSTOP) in the middle of heavy
# writing, past its disk lease, is declared dead and recovered by the
# others, then resumed (SIGCONT): it must not write to the shared device
# any more. Nodes 1 and 2 mount one image (node 3 is a quorum witness):
#  * node 2 runs writers that keep its journal, its checkpoints and its
#    data writes busy (fsync'ed files, big unsynced files, creates and
#    removes), so that writes are queued or under way when it stops;
#  * node 2 is stopped; node 1 recovers it (cluster.recoveries), reads
#    node 2's fsync'ed files whole, writes its own fsync'ed files, and
#    unmounts cleanly (the witness keeps quorum);
#  * the image's checksum is taken; node 2 is resumed: it fences itself
#    (cluster.fenced), its requests fail; the image's checksum is the
#    same afterwards (node 2 wrote nothing after the resume, not even
#    writes it had queued before it stopped) and fsck.ucfs -n is clean;
#    a fresh node 1 mount reads both nodes' fsync'ed files whole.
# Prints node 2's device write counts before the stop and after the fence.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/fslib.sh"
. "$UCFS_TOP/tests/clulib.sh"
clu_require clu_pause jq md5sum

SEED=${UCFS_SEED:-1}
echo "seed $SEED"
FSYNCER=$B/tests/fsyncer
clu_setup clu_pause 2 512 -j 2
clu_mount clu_pause 1
S2=$T/n2.sock
clu_mount clu_pause 2 "stats=$S2"

# node 2 writes: fsync'ed files (logged once durable), big files without
# fsync, a create/remove loop
mkdir "$M2/sync" "$M2/big" "$M2/churn"
(
	i=0
	while [ ! -e "$T/stop" ]; do
		mkdir "$M2/sync/r$i" || exit 0
		"$FSYNCER" write --seed $((SEED + i)) --max 10 "$M2/sync/r$i" \
			"$T/s$i.log" >/dev/null 2>&1 || exit 0
		echo $i >"$T/srounds"
		i=$((i + 1))
	done
) &
W1=$!
(
	i=0
	while [ ! -e "$T/stop" ]; do
		head -c 4000000 /dev/urandom >"$M2/big/b$((i % 4))" 2>/dev/null ||
			exit 0
		i=$((i + 1))
	done
) &
W2=$!
(
	i=0
	while [ ! -e "$T/stop" ]; do
		clu_tree "$M2/churn/t$i" 3 10 >/dev/null 2>&1 || exit 0
		rm -rf "$M2/churn/t$i" 2>/dev/null || exit 0
		i=$((i + 1))
	done
) &
W3=$!
on_exit "touch '$T/stop'; kill $W1 $W2 $W3 2>/dev/null"
srounds_ge() { [ "$(cat "$T/srounds" 2>/dev/null || echo -1)" -ge "$1" ]; }
check clu_pause_node2_writes wait_for 60 srounds_ge 2
clu_stat "$S2" >"$T/st2a.json"

pid2=$(cat "$(fs_daemon_log "$M2" | sed 's|/log$|/pid|')")
kill -STOP "$pid2"
wait_for 10 stopped "$pid2" || fail clu_pause_node2_stopped
n=$(cat "$T/srounds")
echo "node 2 stopped after $((n + 1)) rounds of fsync'ed files;" \
	"device writes before: $(jq -c '.blockdev.write.count' "$T/st2a.json")"

# node 1 recovers node 2 and works
check clu_pause_recovered wait_for 60 clu_stat_ge "$M1" .cluster.recoveries 1
i=0
while [ $i -lt "$n" ]; do
	check clu_pause_node2_intact_$i "$FSYNCER" verify --seed $((SEED + i)) \
		"$M1/sync/r$i" "$T/s$i.log"
	i=$((i + 1))
done
mkdir "$M1/n1"
check clu_pause_node1_files "$FSYNCER" write --seed $((SEED + 100)) --max 30 \
	"$M1/n1" "$T/n1.log"
rm -rf "$M1/churn" "$M1/big"
check clu_pause_node1_umount fs_umount "$M1"
sum1=$(md5sum <"$IMG")

# node 2 resumes: fenced, and no write reaches the device
kill -CONT "$pid2"
check clu_pause_resumed_fenced wait_for 30 sh -c \
	"'$B/ucfs-stat' --json '$S2' | jq -e .cluster.fenced >/dev/null"
touch "$T/stop"
wait "$W1" "$W2" "$W3" 2>/dev/null
check clu_pause_resumed_eio sh -c "! ls '$M2/sync' >/dev/null 2>&1"
clu_stat "$S2" >"$T/st2b.json"
echo "node 2 after the resume: $(jq -c '{fenced: .cluster.fenced,
	reason: .cluster.fence_reason, writes: .blockdev.write.count,
	write_errors: .blockdev.write.errors,
	gate_refused: .blockdev.gate_refused}' "$T/st2b.json")"
fs_umount "$M2" 2>/dev/null
sum2=$(md5sum <"$IMG")
check clu_pause_no_write_after_resume test "$sum1" = "$sum2"
check clu_pause_fsck fs_fsck "$IMG"

# both nodes' fsync'ed files, through a fresh mount
clu_mount clu_pause 1
check clu_pause_node1_kept "$FSYNCER" verify --seed $((SEED + 100)) \
	"$M1/n1" "$T/n1.log"
i=0
while [ $i -lt "$n" ]; do
	check clu_pause_node2_kept_$i "$FSYNCER" verify --seed $((SEED + i)) \
		"$M1/sync/r$i" "$T/s$i.log"
	i=$((i + 1))
done
check clu_pause_umount fs_umount "$M1"
check clu_pause_fsck_end fs_fsck "$IMG"
rm -f "$IMG"
exit 0
