#!/bin/sh
# ucfs-rmpair — ucfs-bench untar's du -s + rm -rf phases on their own, with
# each daemon's CPU seconds per phase (utime + stime of /proc/PID/stat, so
# that a noisy machine's wall times can be read against the work done),
# the stats and per-thread CPU around the rm phase, and optionally perf.
#
#   sudo build/ucfs-rmpair [-b BUILD] [-w WORKDIR] [-t TAR] [-r REPEAT]
#                          [-k] [-p] [-s EVENTS] [-o OPTS] SETUP...
#
# Setups (one fresh image each, the untar run by each node into c<N>, then
# all unmounted, caches dropped, mounted again):
#   1node   one dlm node: du -s of its tree twice (cold, warm), rm -rf of it
#           (ucfs-bench untar, setup 1node)
#   2nodes  two dlm nodes: each du -s the OTHER node's tree twice, then both
#           rm -rf their own at once (ucfs-bench untar, setup 2way)
#   2seq    as 2nodes, the two rm -rf one after the other (rm_byN lines:
#           what the remover and the reader of one tree cost)
#   2own    as 2nodes, but each node du -s its OWN tree (seeds/000's
#           procedure): both rm -rf at once walk warm trees
#   1cold   one dlm node removing its tree with no du first (cold, as the
#           remover's own tree is in 2nodes)
#   nolock1, nolock2  a nolock mount with one client, or two at once (the
#           2-core floor of 2nodes)
#
# -o adds mount options (every mount). -r runs every setup REPEAT times,
# interleaved. -k keeps the image of each
# setup after its untar (WORKDIR/snap.*) and starts later runs from a copy
# of it. -p records `perf record -g` (PERFEV overrides `-F 999`) of every
# daemon during the rm phase (WORKDIR/perf.SETUP.RUN.N.data); -s EVENTS
# counts with `perf stat -e EVENTS` (WORKDIR/pstat.SETUP.RUN.N).
#
# Prints "SETUP RUN PHASE nodeN wall S cpu S" per node and phase, and
# "SETUP RUN rm_cmd clientC user S sys S" (the rm process's own CPU), then
# per setup the rm phase's walls, daemon CPU per node, rm's system time
# per client and daemon CPU per removed entry (all daemons' CPU / entries
# freed). WORKDIR keeps the
# stats (stats.SETUP.RUN.N.{before,after}.json; 2seq: also
# stats.2seq.RUN.N.byC.{before,after}.json around client C's rm) and
# per-thread CPU and context switches (threads.*, the same names: comm
# ticks vol invol) around the rm phase.
set -eu
B=build W=/tmp/ucfs-rmpair TAR=/var/cache/ucfs-bench/linux-subset.tar
PERF=0 REPEAT=1 SIZE_MB=4096 PSTAT="" KEEP=0 OPTS=""
while getopts b:w:t:r:kps:o: o; do
	case $o in
	o) OPTS=$OPTARG ;;
	b) B=$OPTARG ;; w) W=$OPTARG ;; t) TAR=$OPTARG ;;
	r) REPEAT=$OPTARG ;; k) KEEP=1 ;; p) PERF=1 ;; s) PSTAT=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { sed -n "7,8p" "$0" >&2; exit 2; }
[ -s "$TAR" ] || { echo "no $TAR (run ucfs-bench untar once)" >&2; exit 2; }
B=$(cd "$B" && pwd)
mkdir -p "$W"
IMG=$W/img PIDS="" LOG=$W/rmpair.log
: >"$LOG"
"$B/ucfs-mkcluster" -c "rmpair-$$" "$W" >/dev/null # $W/cluster.json

now() { date +%s.%N; }
pid() { eval echo "\$PID$1"; }
cpu() {	# PID -> utime + stime in seconds
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, "");
		printf "%.2f", ($12 + $13) / hz }' "/proc/$1/stat"
}
say() { echo "$*" | tee -a "$LOG"; }

mnt() {	# N
	_n=$1
	mkdir -p "$W/m$_n"
	if [ "$PROTO" = dlm ]; then
		set -- -o "lockproto=dlm,cluster=$W/cluster.json,node=$_n${OPTS:+,$OPTS}"
	elif [ -n "$OPTS" ]; then
		set -- -o "$OPTS"
	else
		set --
	fi
	"$B/ucfs" -f "$@" "$IMG" "$W/m$_n" >"$W/ucfs.$_n.log" 2>&1 &
	eval "PID$_n=$!"
	PIDS="$PIDS $!"
	_i=0
	while ! mountpoint -q "$W/m$_n"; do
		_i=$((_i + 1))
		if [ $_i -ge 300 ] || ! kill -0 "$(pid "$_n")" 2>/dev/null; then
			echo "mount $_n failed:" >&2
			tail -n 3 "$W/ucfs.$_n.log" >&2
			exit 1
		fi
		sleep 0.1
	done
}
umnt() {	# N
	_p=$(pid "$1")
	umount "$W/m$1"
	while kill -0 "$_p" 2>/dev/null; do sleep 0.05; done
	PIDS=$(echo "$PIDS" | tr ' ' '\n' | grep -vx "$_p" | tr '\n' ' ' || :)
}
cleanup() {
	for _n in 1 2; do
		if mountpoint -q "$W/m$_n" 2>/dev/null; then
			umount -l "$W/m$_n"
		fi
	done
	for _p in $PIDS; do kill "$_p" 2>/dev/null || :; done
}
trap cleanup EXIT INT TERM

# client C works on mount m<C> if node C is up, else on m1
cm() { case " $NODES " in *" $1 "*) echo "$W/m$1" ;; *) echo "$W/m1" ;; esac; }
other() { [ "$CLIENTS" = 1 ] && echo 1 || echo $((3 - $1)); }
untar_c() { mkdir -p "$(cm "$1")/c$1"; tar -xf "$TAR" -C "$(cm "$1")/c$1"
	sync -f "$(cm "$1")/c$1"; }
du_c() { du -s "$(cm "$1")/c$(du_of "$1")" >/dev/null; }
du_of() { [ "$OWN" = 1 ] && echo "$1" || other "$1"; }
rm_c() {	# C: rm -rf, and its own user and system seconds to rmtime.C
	/usr/bin/time -f "%U %S" -o "$W/rmtime.$1" rm -rf "$(cm "$1")/c$1"
}
rm_say() {	# SETUP RUN
	for _c in $CLIENTS; do
		say "$1 $2 rm_cmd client$_c $(awk '{ printf "user %.2f sys %.2f",
			$1, $2 }' "$W/rmtime.$_c")"
	done
}

cpu_mark() { for _n in $NODES; do eval "C0_$_n=$(cpu "$(pid "$_n")")"; done; }
cpu_say() {	# SETUP RUN PHASE START
	_w=$(echo "$(now) - $4" | bc)
	for _n in $NODES; do
		_cv=$(echo "$(cpu "$(pid "$_n")") - $(eval echo "\$C0_$_n")" | bc)
		say "$(printf '%s %s %s node%s wall %.2f cpu %.2f' \
			"$1" "$2" "$3" "$_n" "$_w" "$_cv")"
	done
}
phase() {	# SETUP RUN PHASE FUNC: FUNC per client, at once (2seq: rm
		# one after the other)
	_t=$(now)
	cpu_mark
	if [ "$3" = rm ] && [ "$SEQ" = 1 ]; then
		for _n in $NODES; do eval "CR_$_n=\$C0_$_n"; done
		for _c in $CLIENTS; do
			snap "by$_c.before"
			_s=$(now)
			cpu_mark
			"$4" "$_c"
			cpu_say "$1" "$2" "rm_by$_c" "$_s"
			snap "by$_c.after"
		done
		for _n in $NODES; do eval "C0_$_n=\$CR_$_n"; done
	else
		for _c in $CLIENTS; do "$4" "$_c" & eval "J$_c=$!"; done
		for _c in $CLIENTS; do wait "$(eval echo "\$J$_c")"; done
	fi
	cpu_say "$1" "$2" "$3" "$_t"
}
threads() {	# PID -> "comm ticks vol_cs invol_cs" per thread
	for _t in /proc/"$1"/task/*; do
		awk '{ sub(/^[0-9]+ \(/, ""); c = $0; sub(/\).*$/, "", c);
			sub(/^.*\) /, ""); printf "%s %d ", c, $12 + $13 }' \
			"$_t/stat"
		awk '/^voluntary_ctxt/ { v = $2 }
			/^nonvoluntary_ctxt/ { n = $2 }
			END { print v, n }' "$_t/status"
	done
}
snap() {	# TAG
	for _n in $NODES; do
		"$B/ucfs-stat" --json "$W/m$_n" \
			>"$W/stats.$SETUP.$RUN.$_n.$1.json"
		threads "$(pid "$_n")" >"$W/threads.$SETUP.$RUN.$_n.$1"
	done
}
tools_start() {	# perf record / perf stat of every daemon
	for _n in $NODES; do
		if [ "$PERF" = 1 ]; then
			# shellcheck disable=SC2086 # PERFEV: several words
			perf record -q ${PERFEV:--F 999} -g \
				-o "$W/perf.$SETUP.$RUN.$_n.data" \
				-p "$(pid "$_n")" 2>"$W/perf.$_n.err" &
			eval "PP$_n=$!"
		fi
		if [ -n "$PSTAT" ]; then
			perf stat -e "$PSTAT" -o "$W/pstat.$SETUP.$RUN.$_n" \
				-p "$(pid "$_n")" &
			eval "PST$_n=$!"
		fi
	done
	if [ "$PERF" = 1 ] || [ -n "$PSTAT" ]; then sleep 0.5; fi
}
tools_stop() {
	for _v in PP PST; do
		for _n in $NODES; do
			_p=$(eval echo "\${$_v$_n:-}")
			[ -n "$_p" ] || continue
			kill -INT "$_p"
			wait "$_p" || :
			eval "$_v$_n="
		done
	done
}

run() {	# SETUP RUN
	SETUP=$1 RUN=$2 SEQ=0 OWN=0
	case $1 in
	1node|1cold) NODES=1 CLIENTS=1 PROTO=dlm ;;
	2nodes) NODES="1 2" CLIENTS="1 2" PROTO=dlm ;;
	2own) NODES="1 2" CLIENTS="1 2" PROTO=dlm OWN=1 ;;
	2seq) NODES="1 2" CLIENTS="1 2" PROTO=dlm SEQ=1 ;;
	nolock1) NODES=1 CLIENTS=1 PROTO=nolock ;;
	nolock2) NODES=1 CLIENTS="1 2" PROTO=nolock ;;
	*) echo "unknown setup $1" >&2; exit 2 ;;
	esac
	_snap=$W/snap.$PROTO.$(echo "$CLIENTS" | tr -d ' ')
	if [ "$KEEP" = 1 ] && [ -s "$_snap" ]; then
		cp --sparse=always "$_snap" "$IMG"
	else
		rm -f "$IMG"
		truncate -s "${SIZE_MB}M" "$IMG"
		"$B/mkfs.ucfs" -f -j 2 -p "$PROTO" "$IMG" >"$W/mkfs.log" 2>&1
		for _n in $NODES; do mnt "$_n"; done
		phase "$1" "$2" untar untar_c
		for _n in $NODES; do umnt "$_n"; done
		if [ "$KEEP" = 1 ]; then cp --sparse=always "$IMG" "$_snap"; fi
	fi
	sync
	echo 3 >/proc/sys/vm/drop_caches
	for _n in $NODES; do mnt "$_n"; done
	if [ "$1" != 1cold ]; then
		phase "$1" "$2" du_cold du_c
		phase "$1" "$2" du_warm du_c
	fi
	snap before
	tools_start
	phase "$1" "$2" rm rm_c
	tools_stop
	rm_say "$1" "$2"
	snap after
	_f=0
	for _n in $NODES; do
		_f=$((_f + $(jq -s '.[1].namespace.inodes_freed -
			.[0].namespace.inodes_freed' \
			"$W/stats.$1.$2.$_n.before.json" \
			"$W/stats.$1.$2.$_n.after.json")))
	done
	say "$1 $2 freed $_f"
	for _n in $NODES; do umnt "$_n"; done
}

for _r in $(seq 1 "$REPEAT"); do
	for _s in "$@"; do run "$_s" "$_r"; done
done
rm -f "$IMG"
echo "== rm phase: wall s / daemon cpu s per node / rm sys s per client /" \
	"daemon cpu us per entry"
awk '$3 == "rm" { w[$1] = w[$1] " " $6; c[$1] = c[$1] " " $8; t[$1] += $8 }
     $3 == "rm_cmd" { r[$1] = r[$1] " " $8 }
     $3 == "freed" { f[$1] += $4 }
     END { for (s in w) printf "%-8s wall%s\n         cpu%s\n" \
		"         rm sys%s\n         cpu/entry %.1f us\n", s, w[s],
		c[s], r[s], f[s] ? t[s] / f[s] * 1e6 : 0 }' "$LOG"
