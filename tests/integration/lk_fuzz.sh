#!/bin/sh
# lk_fuzz.sh — nodes 1 and 2 of a 3-node cluster keep locking (mutual
# exclusion checked through a shared file) while tests/progs/lk_fuzz
# sends each of them random bytes, frames before authentication, wrong
# MACs and, authenticated as the absent node 3, mutated frames with right
# (and a few broken) frame tags. Both nodes
# must stay up, keep serving, log why they dropped what they dropped, and
# finish. UCFS_SEED picks the fuzz seed.
. "$UCFS_TOP/tests/lib.sh"
. "$UCFS_TOP/tests/clulib.sh"

SEED=${UCFS_SEED:-4242}
# nodes 1-3 on 127.0.0.1-3 (clulib.sh clu_config)
CLU_NAME=lkf CLU_TIMEOUT_MS=1000 CLU_SECRET=$T/secret \
	clu_config "$T/c.json" 1 2 3
head -c 4096 /dev/zero >"$T/shm"
export LK_SHM="$T/shm" LK_GO="$T/go" LK_LEAVE="$T/leave"
for i in 1 2; do
	"$B/tests/lk_node" "$T/c.json" $i churn 0 >"$T/out$i" 2>"$T/err$i" &
	eval "PID$i=$!"
	on_exit "kill -9 $! 2>/dev/null"
done
sleep 1
ok=1
for target in 1 2; do
	"$B/tests/lk_fuzz" "$T/c.json" $target 3 $((SEED + target)) 400 \
		>"$T/fuzz$target" 2>&1 || ok=0
	kill -0 $PID1 2>/dev/null || ok=0
	kill -0 $PID2 2>/dev/null || ok=0
done
touch "$T/go"
wait_for 10 grep -q "^OK" "$T/out1"
wait_for 10 grep -q "^OK" "$T/out2"
touch "$T/leave"
wait $PID1 || ok=0
wait $PID2 || ok=0
grep -q "^OK churn=[1-9]" "$T/out1" || ok=0
grep -q "^OK churn=[1-9]" "$T/out2" || ok=0
if [ $ok = 1 ]; then
	pass lk_fuzz_nodes_survive_and_serve
	echo "    seed $SEED; $(cat "$T/out1") $(cat "$T/out2")"
else
	fail lk_fuzz_nodes_survive_and_serve "seed $SEED"
	tail -n 5 "$T/fuzz1" "$T/fuzz2" "$T/out1" "$T/out2" "$T/err1"
	grep -v authenticated "$T/err2" | tail -n 25
fi
# the tagged frames got past the transport (the core refused them on its
# own checks) and the broken tags did not
for why in "authentication failed" "dropped" "bad frame header" \
	   "bad frame MAC" "wrong size for its type"; do
	if grep -q "$why" "$T/err1"; then
		pass "lk_fuzz_logged_$(echo "$why" | tr ' ' _)"
	else
		fail "lk_fuzz_logged_$(echo "$why" | tr ' ' _)"
	fi
done
echo "    why node 1 dropped what it dropped:"
sed "s/[0-9]\+/N/g" "$T/err1" | sort | uniq -c | sort -rn | head -20
exit $_ucfs_failed
