#!/bin/sh
# ucfs-bench — rerun the field reports of ../shared/seeds side by side on ucfs
# and on baselines measured in the same run, on the same image, on the same
# machine. Documentation (scenarios, options, output keys): tools/BENCH.md.
#
#   ucfs-bench SCENARIO [options]      SCENARIO: untar bonnie iozone fileben dd
#                                      append find all
#   ucfs-bench parse KIND FILE         KIND: time dd fio bonnie fileben db
#
# Sections of this file: settings and messages; parsers (awk, also used by
# tests/integration/bench_parse.sh); requirements; the kernel tree cache;
# systems (format, mount node N, cold remount, unmount); ucfs stats deltas;
# the scenarios; tables, ratios, targets, JSON and plots; main.
#
# Invariants: every mount made is unmounted and every daemon started is
# stopped by its PID (trap on exit); every figure printed comes from a run
# of this invocation (results.tsv) — a part that cannot run is reported as
# "skipped: REASON", never estimated.
set -u

# ---- settings and messages ------------------------------------------------

ME=ucfs-bench
BIN=${UCFS_BENCH_BIN:-$(cd "$(dirname "$0")" && pwd)}
CACHE=${UCFS_BENCH_CACHE:-/var/cache/ucfs-bench}
KSRC=${UCFS_BENCH_KSRC:-/usr/src/linux-source-6.1.tar.xz}
PT_SRC_DIR=/usr/share/doc/libfuse3-dev/examples
KTOP=linux-source-6.1
SUBSET="include fs net kernel lib sound mm block crypto security scripts init ipc"
QUICKSET="kernel ipc init block mm crypto security"

QUICK=0 FULLTREE=0 KEEP=0 INSTALL=1 PLOTS=1 REPEAT=1 REP=1 FILL=1 DU_OTHER=0
SIZE_MB="" FILE_MB="" RECS="" OUT="" WORK="" SYSFILTER="" UOPTS="" MKFS_OPTS=""
SETUPFILTER="" FIND_N=""
LOCKPROTOS="nolock dlm" DIRS="" VARIANTS="" CLUSTER_FILE=""
T0=$(date +%s)
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)

say() { printf '%s\n' "$*"; }
warn() { printf '%s: %s\n' "$ME" "$*" >&2; }
die() { warn "$*"; exit 1; }
# A progress line (stderr) before every step that takes time.
progress() {
	_e=$(( $(date +%s) - T0 ))
	printf '[%s %2dm%02ds] %s\n' "$ME" $((_e / 60)) $((_e % 60)) "$*" >&2
}
now() { date +%s.%N; }
fsub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", a - b }'; }

usage() {
	cat <<EOF
usage: $ME SCENARIO [options]
  SCENARIO   untar | bonnie | iozone | fileben | dd | append | find | all
  --quick             small sizes (a few minutes in all; the CI smoke test)
  --repeat N          run each scenario N times (systems interleaved) and
                      report medians; every run is in runs.tsv
  --full-tree         untar the whole kernel tree, not the 15k-file subset
  --du-other          untar with 2 clients: each client's du -s reads the
                      OTHER client's tree, so its rm -rf walks its own
                      tree cold (default: its own tree, as the seed did)
  -o OPTS             extra ucfs mount options (comma list, appended)
  --lockproto LIST    ucfs lock protocols to run: nolock,dlm (default both)
  --variant NAME=OPTS one more ucfs system mounted with OPTS (repeatable)
  --dir [NAME=]PATH   a directory to measure as one more baseline, and the
                      same through the ucfs lens (system NAME_lens;
                      repeatable)
  --systems LIST      run only these systems (ucfs,ucfs_dlm,ext4,pt,lens,
                      raw,dir,dir_lens...)
  --setups LIST       run only these setups of each scenario (1node,2way,
                      mounted2,aged)
  --size MB           image size (default: 1024 quick, 12288 full)
  --file-mb MB        large-file size of iozone and dd, bonnie++ -s
                      (default 2048, 2 x RAM for bonnie++; capped at 40%
                      of the image)
  --files N           files of the find scenario (default 1000000)
  --records LIST      iozone record sizes (default 64k,128k,...,16m)
  --mkfs-opts OPTS    extra mkfs.ucfs options (e.g. "-J 64")
  --cluster FILE      cluster configuration for lockproto=dlm nodes 1, 2
  --out DIR           results directory (default ./ucfs-bench-out/SCEN-DATE)
  --work DIR          where to make the scratch directory (image, mounts)
  --cache DIR         cache for the kernel tar and passthrough_ll ($CACHE)
  --no-install        never apt-get a missing package: fail with a message
  --no-plots          skip gnuplot
  --keep              keep the scratch directory
  --fill              write the image full of zeros first (the default:
                      no holes, as a disk; no host allocation in the runs)
  --sparse            a sparse image instead, punched back to holes before
                      every system
EOF
}

# ---- parsers: "key value" lines on stdout ----------------------------------

# ucfs-bench-ops time: "real=S user=S sys=S status=N"
parse_time() {
	awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "=");
		if (kv[1] ~ /^(real|user|sys|status)$/) print kv[1], kv[2] } }' "$1"
}

# dd's summary line: "N bytes (...) copied, S s, R UNIT"; MB/s = 1e6 B/s
# as dd and the report count. Last summary line wins.
parse_dd() {
	awk '/ bytes .*copied, / { b = $1; s = $0;
		sub(/.* copied, /, "", s); split(s, f, " "); secs = f[1] }
	END { if (b == "") exit 1
		print "bytes", b; print "seconds", secs
		printf "MBps %.1f\n", (secs > 0 ? b / secs / 1e6 : 0) }' "$1"
}

# fio --output-format=json: bandwidth in KiB/s (= iozone's Kbytes/sec),
# summed over jobs; runtime in ms (max over jobs).
parse_fio() {
	jq -r '[.jobs[]] as $j |
		"read_kbs \([$j[].read.bw] | add)",
		"write_kbs \([$j[].write.bw] | add)",
		"read_bytes \([$j[].read.io_bytes] | add)",
		"write_bytes \([$j[].write.io_bytes] | add)",
		"runtime_ms \([$j[] | .read.runtime, .write.runtime] | max)"' \
		"$1"
}

# bonnie++ 1.9x/2.x CSV line (the text table is for people). "+++++"
# (too fast to measure) and empty fields print as "-".
parse_bonnie() {
	awk -F, '$1 ~ /^1\.9[0-9]*$/ && NF >= 38 { line = $0 }
	END { if (line == "") exit 1
		n = split(line, f, ",")
		split("size:6 putc_kbs:10 putc_cpu:11 block_out_kbs:12 " \
		"block_out_cpu:13 rewrite_kbs:14 rewrite_cpu:15 getc_kbs:16 " \
		"getc_cpu:17 block_in_kbs:18 block_in_cpu:19 seeks_ps:20 " \
		"seeks_cpu:21 files:22 seq_create_ps:27 seq_create_cpu:28 " \
		"seq_read_ps:29 seq_read_cpu:30 seq_delete_ps:31 " \
		"seq_delete_cpu:32 ran_create_ps:33 ran_create_cpu:34 " \
		"ran_read_ps:35 ran_read_cpu:36 ran_delete_ps:37 " \
		"ran_delete_cpu:38", keys, " ")
		for (i = 1; keys[i] != ""; i++) {
			split(keys[i], kv, ":"); v = f[kv[2]]
			if (v == "" || v ~ /^\++$/) v = "-"
			print kv[1], v
		}
	}' "$1"
}

# fileben lines "total:128.000K Time:0.448 Rate:285714KB" (ms, KB/s); the
# last one is the total of all passes.
parse_fileben() {
	awk '/^total:.*Time:.*Rate:/ { n++; r = $3; sub(/^Rate:/, "", r)
		sub(/KB$/, "", r); rate[n] = r }
	END { if (n < 2) exit 1
		for (i = 1; i < n; i++) print "pass" i "_kbs", rate[i]
		print "passes", n - 1; print "total_kbs", rate[n] }' "$1"
}

# db lines "total:100, rate:2410.7 dir/sec": mkdir, rmdir, mkdir, mvdir.
parse_db() {
	awk 'BEGIN { split("mkdir rmdir mkdir2 mvdir", op, " ") }
	/^total:[0-9]+, rate:/ { n++; r = $2; sub(/^rate:/, "", r)
		print op[n] "_ps", r }
	END { if (n != 4) exit 1 }' "$1"
}

# ---- requirements ----------------------------------------------------------

# need CMD PACKAGE WHY — make sure CMD exists, installing PACKAGE if allowed.
need() {
	command -v "$1" >/dev/null 2>&1 && return 0
	if [ "$INSTALL" = 1 ] && command -v apt-get >/dev/null 2>&1; then
		warn "$1 is missing ($3): installing Debian package $2" \
			"(make deps installs it too)"
		DEBIAN_FRONTEND=noninteractive apt-get install -y \
			--no-install-recommends "$2" >&2 ||
			die "could not install $2; run: make deps"
		command -v "$1" >/dev/null 2>&1 && return 0
	fi
	die "$1 is missing ($3): apt-get install $2 (or: make deps)"
}

# need_file FILE PACKAGE WHY
need_file() {
	[ -e "$1" ] && return 0
	if [ "$INSTALL" = 1 ] && command -v apt-get >/dev/null 2>&1; then
		warn "$1 is missing ($3): installing Debian package $2"
		DEBIAN_FRONTEND=noninteractive apt-get install -y \
			--no-install-recommends "$2" >&2 ||
			die "could not install $2; run: make deps"
		[ -e "$1" ] && return 0
	fi
	die "$1 is missing ($3): apt-get install $2 (or: make deps)"
}

# tool NAME — path of a ucfs program: beside this script (the build
# directory) first, then PATH (installed: bin/ and sbin/); empty if none.
tool() {
	if [ -x "$BIN/$1" ]; then printf '%s' "$BIN/$1"
	else command -v "$1" 2>/dev/null; fi
}

check_common() {
	[ "$(id -u)" = 0 ] || die "must run as root (loop devices, mounts," \
		"drop_caches)"
	need jq jq "JSON results"
	need mkfs.ext4 e2fsprogs "the ext4 baseline"
	need losetup mount "the ext4 baseline"
	need xz xz-utils "the kernel tarball"
	OPS=$(tool ucfs-bench-ops) || die "ucfs-bench-ops missing: run make"
	UCFS=$(tool ucfs) MKFS=$(tool mkfs.ucfs) STAT=$(tool ucfs-stat)
	MKCLUSTER=$(tool ucfs-mkcluster)
	AGE=$(tool ucfs-age)
}

# ---- the kernel tree cache --------------------------------------------------

# ktar_build NAME DIRS... — $CACHE/NAME.tar of linux-source-6.1/DIRS (all if
# none), uncompressed, so the timed untar reads a local plain file.
ktar_build() {
	_name=$1; shift
	[ -s "$CACHE/$_name.tar" ] && return 0
	need_file "$KSRC" linux-source-6.1 "the untar scenario's kernel tree"
	mkdir -p "$CACHE" || die "cannot create $CACHE"
	progress "caching $CACHE/$_name.tar from $KSRC (once)"
	if [ $# -eq 0 ]; then
		xz -dc "$KSRC" >"$CACHE/$_name.tar.part" || die "xz failed"
	else
		_st=$(mktemp -d "$CACHE/stage.XXXXXX")
		_l=""
		for _d in "$@"; do _l="$_l $KTOP/$_d"; done
		# shellcheck disable=SC2086
		xz -dc "$KSRC" | tar -xf - -C "$_st" $_l || die "untar failed"
		tar -cf "$CACHE/$_name.tar.part" -C "$_st" "$KTOP" ||
			die "tar failed"
		rm -rf "$_st"
	fi
	mv "$CACHE/$_name.tar.part" "$CACHE/$_name.tar"
}

# ktar — sets KTAR (path) and KFILES (regular files in it).
ktar() {
	if [ "$FULLTREE" = 1 ]; then
		_n=linux-full; ktar_build "$_n"
	elif [ "$QUICK" = 1 ]; then
		# shellcheck disable=SC2086
		_n=linux-quick; ktar_build "$_n" $QUICKSET
	else
		# shellcheck disable=SC2086
		_n=linux-subset; ktar_build "$_n" $SUBSET
	fi
	KTAR=$CACHE/$_n.tar
	if [ ! -s "$CACHE/$_n.files" ]; then
		tar -tvf "$KTAR" | awk 'substr($1, 1, 1) == "-"' | wc -l \
			>"$CACHE/$_n.files"
	fi
	KFILES=$(cat "$CACHE/$_n.files")
}

# ---- passthrough_ll, built from libfuse's example --------------------------

pt_build() {
	PT=$CACHE/passthrough_ll
	[ -x "$PT" ] && return 0
	need pkg-config pkg-config "building passthrough_ll"
	need cc build-essential "building passthrough_ll"
	_s=$PT_SRC_DIR/passthrough_ll.c
	[ -e "$_s" ] || [ -e "$_s.gz" ] ||
		need_file "$_s" libfuse3-dev "the passthrough_ll baseline"
	mkdir -p "$CACHE/pt-src" || die "cannot create $CACHE"
	for _f in passthrough_ll.c passthrough_helpers.h; do
		if [ -e "$PT_SRC_DIR/$_f" ]; then
			cp "$PT_SRC_DIR/$_f" "$CACHE/pt-src/"
		elif [ -e "$PT_SRC_DIR/$_f.gz" ]; then
			gzip -dc "$PT_SRC_DIR/$_f.gz" >"$CACHE/pt-src/$_f"
		fi
	done
	progress "building passthrough_ll from $PT_SRC_DIR (once)"
	# shellcheck disable=SC2046
	cc -O2 -o "$PT.part" "$CACHE/pt-src/passthrough_ll.c" \
		$(pkg-config --cflags --libs fuse3) ||
		die "building passthrough_ll failed"
	mv "$PT.part" "$PT"
}

# ---- systems ----------------------------------------------------------------
#
# A system is a name with attributes in variables K_<name> (kind: ucfs ext4
# pt lens raw dir), D_<name> (description), O_<name> (ucfs mount options), P_<name>
# (ucfs lock protocol), X_<name> (path of a dir system; of a lens system's
# lower directory, empty for the lens over the ext4 image). sys_up formats the
# one image for it and mounts NODES nodes; node_dir gives where client N
# works; sys_cold remounts with cold caches; sys_down undoes sys_up.
# Baselines have a single node: clients 1 and 2 share it.

SYSTEMS=""
attr() { eval "printf '%s' \"\${$1_$2:-}\""; }
add_system() {	# NAME KIND DESCRIPTION [OPTS PROTO | PATH]
	SYSTEMS="$SYSTEMS $1"
	eval "K_$1=\$2; D_$1=\$3; O_$1=\${4:-}; P_$1=\${5:-}; X_$1=\${4:-}"
}
is_base() { [ "$(attr K "$1")" != ucfs ]; }

MOUNTED=""	# "sys.node" entries, for cleanup
LOOP=""
PIDS=""

mp() { printf '%s/mnt/%s.%s' "$WORK" "$1" "$2"; }

# wait_mount MP PID — until MP is a mount point; 1 if PID died or 30 s.
wait_mount() {
	_i=0
	while ! mountpoint -q "$1"; do
		kill -0 "$2" 2>/dev/null || return 1
		_i=$((_i + 1))
		[ "$_i" -gt 300 ] && return 1
		sleep 0.1
	done
}

# stop_fuse MP PID — unmount a FUSE mount and reap its daemon by PID.
stop_fuse() {
	mountpoint -q "$1" && { umount "$1" 2>/dev/null ||
		fusermount3 -u "$1" 2>/dev/null || umount -l "$1"; }
	# timed phases end here: poll finely (10 ms), give up after 20 s
	_i=0
	while kill -0 "$2" 2>/dev/null; do
		_i=$((_i + 1))
		if [ "$_i" -gt 2000 ]; then
			warn "daemon $2 did not exit; killing it"
			kill "$2" 2>/dev/null; sleep 1
			kill -9 "$2" 2>/dev/null
			break
		fi
		sleep 0.01
	done
	wait "$2" 2>/dev/null
	PIDS=$(printf '%s\n' $PIDS | grep -vx "$2" | tr '\n' ' ')
}

loop_up() {
	[ -n "$LOOP" ] && return 0
	LOOP=$(losetup -f --show "$IMG") || die "losetup failed"
}
loop_down() {
	[ -n "$LOOP" ] && losetup -d "$LOOP"
	LOOP=""
}

# ucfs_mkfs SYS — format the image for ucfs with SYS's lock protocol.
ucfs_mkfs() {
	# shellcheck disable=SC2086
	"$MKFS" -f -j 2 -p "$(attr P "$1")" $MKFS_OPTS "$IMG" \
		>"$WORK/log/mkfs.$1.log" 2>&1 ||
		{ warn "mkfs.ucfs failed: $(tail -n 3 "$WORK/log/mkfs.$1.log")"
		  return 1; }
}

# The cluster configuration of the local nodes (lockproto=dlm): --cluster
# FILE as given, else nodes 1 and 2 on 127.0.0.1 with a fresh secret
# (ucfs-mkcluster: two_node, so that one survivor keeps quorum), made once.
cluster_json() {
	[ -n "$CLUSTER_FILE" ] && { printf '%s' "$CLUSTER_FILE"; return; }
	[ -s "$WORK/cluster.json" ] ||
		"$MKCLUSTER" -c "ucfs-bench-$$" "$WORK" >/dev/null ||
		die "ucfs-mkcluster failed"
	printf '%s' "$WORK/cluster.json"
}

# ucfs_mount_node SYS N — mount node N of SYS; adding a node is this call.
ucfs_mount_node() {
	_m=$(mp "$1" "$2")
	mkdir -p "$_m"
	_o="$(attr O "$1")"
	if [ "$(attr P "$1")" = dlm ]; then
		_o="$_o,lockproto=dlm,cluster=$(cluster_json),node=$2"
	fi
	_o=${_o#,}
	"$UCFS" -f ${_o:+-o "$_o"} "$IMG" "$_m" \
		>"$WORK/log/ucfs.$1.$2.log" 2>&1 &
	_pid=$!
	PIDS="$PIDS $_pid"
	eval "PID_$1_$2=$_pid"
	if ! wait_mount "$_m" "$_pid"; then
		stop_fuse "$_m" "$_pid"
		warn "ucfs node $2 did not mount ($_o):" \
			"$(tail -n 3 "$WORK/log/ucfs.$1.$2.log")"
		return 1
	fi
	MOUNTED="$MOUNTED $1.$2"
	stats_snap "$1" "$2" before
	eval "CPU0_$1_$2=\$(daemon_ticks $_pid)"
}

ucfs_umount_node() {
	_m=$(mp "$1" "$2")
	if [ "$(eval echo "\${STATS_CLOSED_$1_$2:-}")" != 1 ]; then
		stats_snap "$1" "$2" after
		stats_delta "$1" "$2"
		stats_rss "$1" "$2"
		stats_cpu "$1" "$2"
	fi
	eval "STATS_CLOSED_$1_$2="
	stop_fuse "$_m" "$(attr PID "$1_$2")"
	MOUNTED=$(printf '%s\n' $MOUNTED | grep -vx "$1.$2" | tr '\n' ' ')
}

pt_mount() {
	_low=$(mp pt lower)
	mkdir -p "$_low" "$(mp pt 1)"
	mount "$LOOP" "$_low" || return 1
	# passthrough_ll holds an O_PATH fd per inode the kernel knows: give
	# it the hard limit (it fails with EMFILE past that; BENCH.md).
	( ulimit -n "$(ulimit -Hn)" 2>/dev/null
	  exec "$PT" -f -o "source=$_low" "$(mp pt 1)" ) \
		>"$WORK/log/pt.log" 2>&1 &
	PID_pt=$!
	PIDS="$PIDS $PID_pt"
	wait_mount "$(mp pt 1)" "$PID_pt" || { warn "passthrough_ll failed:" \
		"$(tail -n 3 "$WORK/log/pt.log")"; umount "$_low"; return 1; }
	MOUNTED="$MOUNTED pt.1"
}
pt_umount() {
	stop_fuse "$(mp pt 1)" "$PID_pt"
	umount "$(mp pt lower)"
	MOUNTED=$(printf '%s\n' $MOUNTED | grep -vx pt.1 | tr '\n' ' ')
}

# The ucfs pass-through lens (fusefs/MOUNT.md) over the ext4 of the image,
# or over a --dir (in a directory of its own there).
lens_lower() {
	if [ -z "$(attr X "$1")" ]; then mp "$1" lower
	else printf '%s/ucfs-bench.%s.lens' "$(attr X "$1")" "$$"; fi
}
lens_mount() {
	_low=$(lens_lower "$1")
	mkdir -p "$_low" "$(mp "$1" 1)" || return 1
	if [ -z "$(attr X "$1")" ]; then mount "$LOOP" "$_low" || return 1; fi
	"$UCFS" -f -o "passthrough${UOPTS:+,$UOPTS}" "$_low" "$(mp "$1" 1)" \
		>"$WORK/log/ucfs.$1.1.log" 2>&1 &
	_pid=$!
	PIDS="$PIDS $_pid"
	eval "PID_$1_1=$_pid"
	if ! wait_mount "$(mp "$1" 1)" "$_pid"; then
		stop_fuse "$(mp "$1" 1)" "$_pid"
		warn "the lens did not mount: $(tail -n 3 \
			"$WORK/log/ucfs.$1.1.log")"
		[ -z "$(attr X "$1")" ] && umount "$_low"
		return 1
	fi
	MOUNTED="$MOUNTED $1.1"
	stats_snap "$1" 1 before
}
lens_umount() {
	ucfs_umount_node "$1" 1
	[ -z "$(attr X "$1")" ] && umount "$(lens_lower "$1")"
}

# mount_all SYS NODES / umount_all SYS — (re)mount without formatting.
mount_all() {
	case $(attr K "$1") in
	ucfs)	# NODES_sys counts the nodes up, so a failure unwinds them
		eval "NODES_$1=0"
		_n=1
		while [ "$_n" -le "$2" ]; do
			ucfs_mount_node "$1" "$_n" || return 1
			eval "NODES_$1=$_n"
			_n=$((_n + 1))
		done
		return 0 ;;
	ext4)
		mkdir -p "$(mp ext4 1)"
		mount "$LOOP" "$(mp ext4 1)" || return 1
		MOUNTED="$MOUNTED ext4.1" ;;
	pt) pt_mount || return 1 ;;
	lens) lens_mount "$1" || return 1 ;;
	dir)
		mkdir -p "$(attr X "$1")/ucfs-bench.$$" || return 1 ;;
	esac
	eval "NODES_$1=$2"
}

umount_all() {
	case $(attr K "$1") in
	ucfs)
		_n=$(attr NODES "$1")
		while [ "${_n:-0}" -ge 1 ]; do
			ucfs_umount_node "$1" "$_n"
			_n=$((_n - 1))
		done ;;
	ext4)
		umount "$(mp ext4 1)"
		MOUNTED=$(printf '%s\n' $MOUNTED | grep -vx ext4.1 |
			tr '\n' ' ') ;;
	pt) pt_umount ;;
	lens) lens_umount "$1" ;;
	esac
}

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# image_reset — the image file as every system finds it before its
# format: written full (make_image; nothing punches it: mkfs.ext4 runs
# with nodiscard), or with --sparse all holes (truncated to 0 and back);
# then its pages written back (a loop-mounted ext4's too, which its
# detach left dirty in the host's cache) and dropped from that cache.
# Before, the image was sparse and not reset: the first system of a run
# wrote into holes (the host filesystem allocating under its writes and
# flushes), the next ones into blocks it had allocated, or into the
# holes a discarding mkfs.ext4 had punched (freeing host blocks, which
# the host's discard then trims), and the dirty pages a loop-mounted
# ext4 left in the host's cache were written back during the next
# system's run.
image_reset() {
	if [ "$FILL" != 1 ]; then
		: >"$IMG" && truncate -s "${SIZE_MB}M" "$IMG" ||
			die "cannot reset $IMG"
	fi
	sync "$IMG" # fsync: the image's pages only, not every filesystem's
	dd if="$IMG" iflag=nocache count=0 status=none 2>/dev/null
}

# sys_up SYS NODES — a fresh file system on the image, mounted on NODES.
sys_up() {
	case $(attr K "$1") in
	ucfs) image_reset; ucfs_mkfs "$1" || return 1 ;;
	ext4|pt|lens)
		[ -n "$(attr X "$1")" ] && { rm -rf "$(lens_lower "$1")"
			mount_all "$1" "$2"; return; }
		image_reset
		loop_up
		# shellcheck disable=SC2046
		mkfs.ext4 -q -F $([ "$FILL" = 1 ] && echo -E nodiscard) \
			"$LOOP" >"$WORK/log/mkfs.ext4.log" 2>&1 ||
			{ warn "mkfs.ext4 failed"; return 1; } ;;
	esac
	mount_all "$1" "$2" || return 1
}

sys_down() {
	umount_all "$1"
	case $(attr K "$1") in
	ext4|pt) loop_down ;;
	lens) if [ -z "$(attr X "$1")" ]; then loop_down
	      else rm -rf "$(lens_lower "$1")"; fi ;;
	dir) rm -rf "$(attr X "$1")/ucfs-bench.$$" ;;
	esac
}

# stats_close SYS — the closing stats snapshot and delta of every node of a
# ucfs system, taken before a timed unmount so that the time does not
# include ucfs-stat and jq.
stats_close() {
	case $(attr K "$1") in ucfs|lens) ;; *) return 0 ;; esac
	_sn=$(attr NODES "$1")
	while [ "${_sn:-0}" -ge 1 ]; do
		stats_snap "$1" "$_sn" after
		stats_delta "$1" "$_sn"
		stats_rss "$1" "$_sn"
		stats_cpu "$1" "$_sn"
		eval "STATS_CLOSED_$1_$_sn=1"
		_sn=$((_sn - 1))
	done
}

# sys_cold SYS [PHASE] — what "first mount" means: unmount, drop caches,
# mount. With PHASE, the unmount is timed and recorded (client all): on
# FUSE, syncfs does not reach the daemon, so the unmount (which waits for
# the daemon to exit) is where its data is written.
sys_cold() {
	_nn=$(attr NODES "$1")
	[ $# -ge 2 ] && stats_close "$1"
	_tcold=$(now)
	umount_all "$1"
	COLD_UMOUNT_SECS=$(fsub "$(now)" "$_tcold")
	[ $# -ge 2 ] && rec "$1" all "$2" real "$COLD_UMOUNT_SECS" s
	drop_caches
	mount_all "$1" "$_nn"
}

# node_dir SYS N — where client N works (a node that is not mounted means
# client N shares node 1).
node_dir() {
	case $(attr K "$1") in
	dir) printf '%s/ucfs-bench.%s' "$(attr X "$1")" "$$" ;;
	ucfs)
		if [ "$2" -le "$(attr NODES "$1")" ]; then mp "$1" "$2"
		else mp "$1" 1; fi ;;
	*) mp "$1" 1 ;;
	esac
}

# Cluster mode probe (lockproto=dlm, 2 nodes): CLUSTER=yes|no, CLUSTER_WHY.
CLUSTER="" CLUSTER_WHY=""
SKIP2="skipped: cluster mode (lockproto=dlm) not available yet"
cluster_probe() {
	[ -n "$CLUSTER" ] && return 0
	CLUSTER=no
	if [ -z "$UCFS" ] || [ -z "$MKFS" ]; then
		CLUSTER_WHY="ucfs is not built"
		return 0
	fi
	if [ -z "$CLUSTER_FILE" ] && [ -z "$MKCLUSTER" ]; then
		CLUSTER_WHY="ucfs-mkcluster is not built (nor --cluster FILE)"
		return 0
	fi
	add_system probe ucfs "cluster probe" "" dlm
	SYSTEMS=${SYSTEMS% probe}
	SETUP=probe STATS_TAG=probe # its stats, before any setup ran
	if ! sys_up probe 2 2>"$WORK/log/probe.err"; then
		CLUSTER_WHY="a 2-node lockproto=dlm mount failed (see" \
		CLUSTER_WHY="$CLUSTER_WHY $WORK/log/ucfs.probe.*.log)"
		sys_down probe 2>/dev/null
		return 0
	fi
	sys_down probe
	CLUSTER=yes
}

# ---- ucfs stats deltas -------------------------------------------------------

STATS_OK=""
stats_snap() {	# SYS N before|after
	[ "$STATS_OK" = no ] && return 0
	if [ -z "$STAT" ]; then
		STATS_OK=no
		warn "ucfs-stat not built: no ucfs stats deltas in this run"
		return 0
	fi
	"$STAT" --json "$(mp "$1" "$2")" \
		>"$WORK/stats.$1.$2.$3.json" 2>"$WORK/log/stat.err" ||
		{ warn "ucfs-stat --json failed: $(head -n 1 \
			"$WORK/log/stat.err")"; rm -f "$WORK/stats.$1.$2.$3.json"; }
}

# stats_rss SYS N — the daemon's peak resident memory over this mount
# (node.max_rss_kb of the closing snapshot), as phase rss:<what ran>.
stats_rss() {	# (its variables are named for it: callers loop on _ph)
	_rss_j=$WORK/stats.$1.$2.after.json
	[ -s "$_rss_j" ] || return 0
	_rss_kb=$(jq '.node.max_rss_kb // empty' "$_rss_j" 2>/dev/null)
	[ -n "$_rss_kb" ] || return 0
	_rss_ph=rss:$(printf '%s' "${STATS_TAG:-mount}" | tr -d ':' |
		tr ', ' '+_')
	rec "$1" "$2" "$_rss_ph" peak \
		"$(awk -v k="$_rss_kb" 'BEGIN { printf "%.1f", k / 1024 }')" MB
}

# daemon_ticks PID — user + system CPU of a daemon so far, in clock
# ticks (/proc/PID/stat fields 14 and 15); empty if it is gone.
daemon_ticks() {
	awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null
}

# stats_cpu SYS N — the daemon's CPU seconds (user + system) since its
# mount, as phase cpu:<what ran>, metric daemon_s: on a machine shared
# with other work, wall times swing with the load, and this says what
# the daemon itself spent.
stats_cpu() {
	_cpu_p=$(attr PID "$1_$2") _cpu_0=$(attr CPU0 "$1_$2")
	[ -n "$_cpu_p" ] && [ -n "$_cpu_0" ] || return 0
	_cpu_t=$(daemon_ticks "$_cpu_p")
	[ -n "$_cpu_t" ] || return 0
	rec "$1" "$2" "cpu:$(printf '%s' "${STATS_TAG:-mount}" | tr -d ':' |
		tr ', ' '+_')" daemon_s "$(awk -v a="$_cpu_t" -v b="$_cpu_0" \
		-v hz="$CLK_TCK" 'BEGIN { printf "%.2f", (a - b) / hz }')" s
}

# Counters of after - before (fusefs/STATS.md: gauges, latency figures and
# anything inside an array are not counters and are left out), then the
# summary the tables explain themselves with.
STATS_SEQ=0
stats_delta() {	# SYS N
	_a=$WORK/stats.$1.$2.before.json _b=$WORK/stats.$1.$2.after.json
	[ -s "$_a" ] && [ -s "$_b" ] || return 0
	STATS_SEQ=$((STATS_SEQ + 1))
	_d=$OUT/stats/$(printf %04d "$STATS_SEQ").$SCEN.$1.$SETUP.node$2.json
	mkdir -p "$OUT/stats"
	jq -n --slurpfile a "$_a" --slurpfile b "$_b" \
		--arg scen "$SCEN" --arg sys "$1" --arg setup "$SETUP" \
		--arg node "$2" --arg tag "$STATS_TAG" '
	def gauge: test("^(id|slot|pid|uptime_s|start_time|time|version|"
		+ "inflight|dirty|cached|entries|mean_ns|p50_ns|p99_ns|max_ns|"
		+ "srtt|srttvar|srttb|srttvarb|sirt|sirtvar|mode|holders|"
		+ "waiters|free|size|capacity|queue_depth|node|window)$|"
		+ "^(max|min|cur)|_now$");
	def counters: [paths(numbers) as $p
		| select(($p | map(type) | index("number")) == null)
		| select(($p[-1] | gauge) | not)
		| {key: ($p | join(".")), value: getpath($p)}] | from_entries;
	def pick($re): [to_entries[] | select(.key | test($re))
		| .value] | add // 0;
	($a[0] | counters) as $old |
	($b[0] | counters | with_entries(.value -= ($old[.key] // 0))) as $d |
	{scenario: $scen, system: $sys, setup: $setup,
	 node: ($node | tonumber), phases: $tag,
	 summary: {
	  fuse_ops: ($d | pick("^fuse\\.count$")),
	  lock_requests: ($d | pick("^locks\\.types\\.[^.]+\\.requests$")),
	  remote_grants: ($d | pick("^locks\\.types\\.[^.]+\\.grants_remote$")),
	  remote_round_trips: ($d | pick("^locks\\.remote_round_trips$")),
	  inodes_created: ($d | pick("^namespace\\.inodes_created$")),
	  blocking_callbacks: ($d | pick("^locks\\.types\\.[^.]+\\.bast_recv$")),
	  blocking_callbacks_sent: ($d | pick("^locks\\.types\\.[^.]+\\.bast_sent$")),
	  demotes: ($d | pick("^glocks\\.types\\.[^.]+\\.demotes_to_(pr|nl)$")),
	  kernel_invals: ($d | pick("^kcache\\.(attrs|pages|entries|epochs)$")),
	  window_refills: ($d | pick("^alloc\\..*refill")),
	  readahead_hits: ($d | pick("^readahead\\..*hit")),
	  cache_hits: ($d | pick("^cache\\.hits$")),
	  cache_misses: ($d | pick("^cache\\.misses$")),
	  journal_commits: ($d | pick("^journal\\.commits$")),
	  dev_read_bytes: ($d | pick("^blockdev\\.read\\.bytes$")),
	  dev_write_bytes: ($d | pick("^blockdev\\.write\\.bytes$"))},
	 delta: $d}
	| .summary.remote_rtt_per_create = (if .summary.inodes_created > 0
		then .summary.remote_round_trips / .summary.inodes_created
		else null end)' >"$_d" 2>>"$WORK/log/stat.err" ||
		{ rm -f "$_d"; return 0; }
	jq -r '.summary as $s | "ucfs stats \(.system) \(.setup) node " +
		"\(.node) [\(.phases)]: lock requests \($s.lock_requests), " +
		"blocking callbacks \($s.blocking_callbacks), demotes " +
		"\($s.demotes), kernel invalidations \($s.kernel_invals), " +
		"window refills " +
		"\($s.window_refills), readahead hits \($s.readahead_hits); " +
		"fuse ops \($s.fuse_ops), journal commits " +
		"\($s.journal_commits), remote lock round trips " +
		"\($s.remote_round_trips) for \($s.inodes_created) created " +
		"(\($s.remote_rtt_per_create // "-") each), " +
		"device read \($s.dev_read_bytes) B " +
		"write \($s.dev_write_bytes) B"' "$_d" | tee -a "$OUT/stats.txt"
	# dlm untar: each node's remote round trips per created file, a
	# result row for its target (make_targets)
	[ "$SCEN" = untar ] && [ "$(attr P "$1")" = dlm ] || return 0
	_rr=$(jq -r '.summary.remote_rtt_per_create // empty' "$_d")
	[ -n "$_rr" ] || return 0
	rec "$1" "$2" "locks:$(printf '%s' "$STATS_TAG" | tr -d ':' |
		tr ', ' '+_')" remote_rtt_per_create \
		"$(awk -v x="$_rr" 'BEGIN { printf "%.5f", x }')" each
}

# ---- results -------------------------------------------------------------------
#
# runs.tsv: scenario system setup client phase metric value unit rep, one
# line per measurement; results.tsv: the same without rep, the median over
# the repetitions (collapse_runs). setup is
# 1node | 2nodes (two ucfs nodes) | 2clients (two clients at once on one
# mount: the baselines' and the 1-node fallback's "2 at once") | mounted2
# (run on node 1 while node 2 has it mounted). client is 1, 2 or all.

rec() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$SCEN" "$1" \
	"$SETUP" "$2" "$3" "$4" "$5" "$6" "$REP" >>"$OUT/runs.tsv"; }

# collapse_runs SCEN — results.tsv gets the median over the repetitions
# (runs.tsv, last column = repetition) of every figure of SCEN; "-" (not
# measured) only if no repetition measured it; a failed step stays failed
# (its worst status).
collapse_runs() {
	awk -F'\t' -v OFS='\t' -v scen="$1" '$1 == scen {
		k = $1 OFS $2 OFS $3 OFS $4 OFS $5 OFS $6
		if (!(k in n)) { order[++nk] = k; unit[k] = $8 }
		if ($6 == "failed") { if ($7 + 0 > v[k, 1] + 0) v[k, 1] = $7
			n[k] = 1; next }
		n[k] += 0
		if ($7 != "-" && $7 != "") v[k, ++n[k]] = $7 + 0 }
	function median(k, m,   i, j, t) {
		for (i = 2; i <= m; i++) { t = v[k, i]
			for (j = i - 1; j >= 1 && v[k, j] > t; j--)
				v[k, j + 1] = v[k, j]
			v[k, j + 1] = t }
		if (m % 2) return v[k, (m + 1) / 2]
		return (v[k, m / 2] + v[k, m / 2 + 1]) / 2 }
	END { for (i = 1; i <= nk; i++) { k = order[i]
		split(k, f, OFS)
		if (f[6] == "failed") x = v[k, 1]
		else if (n[k] == 0) x = "-"
		else { x = sprintf("%.6f", median(k, n[k]))
			sub(/0+$/, "", x); sub(/\.$/, "", x) }
		print k, x, unit[k] } }' "$OUT/runs.tsv" >>"$OUT/results.tsv"
}
skipped() {	# SYS WHAT REASON (once per run, not per repetition)
	_sk=$(printf '%s\t%s\t%s\t%s' "$SCEN" "$1" "$2" "$3")
	grep -qxF "$_sk" "$OUT/skipped.tsv" && return 0
	printf '%s\n' "$_sk" >>"$OUT/skipped.tsv"
	say "$1 $2: $3"
}

# rec_time SYS CLIENT PHASE FILE — record real/user/sys of one timed step.
rec_time() {
	parse_time "$4" >"$4.kv" || return 1
	while read -r _k _v; do
		case $_k in
		real|user|sys) rec "$1" "$2" "$3" "$_k" "$_v" s ;;
		status) [ "$_v" = 0 ] || { warn "$3 failed on $1 (status" \
			"$_v)"; rec "$1" "$2" "$3" failed "$_v" status; } ;;
		esac
	done <"$4.kv"
}

# timed SYS CLIENT PHASE CMD... — run and record one step.
timed() {	# (sh has no locals: _t* names are used by nothing else)
	_ts=$1 _tc=$2 _tp=$3; shift 3
	_tf=$WORK/time.$_ts.$_tc.$_tp
	lens_begin "$_ts"
	"$OPS" time -o "$_tf" "$@" >>"$WORK/log/cmd.log" 2>&1
	lens_end "$_ts" "$_tp"
	rec_time "$_ts" "$_tc" "$_tp" "$_tf"
}

# lens.tsv: scenario system phase wall_s fuse_ops handler_s lower_s
# resolve_s reply_s lens_s outside_s lower_calls top_ops rep — what one
# step asked of the filesystem under a lens system, from its stats before
# and after the step (1 node, one client: two at once would mix their
# requests). handler = lower (inside the lower fs's system calls) +
# resolve (file handles reopened) + reply (to /dev/fuse) + lens (its own
# work); outside = wall - handler: the way into the daemon, the kernel and
# the program itself (the daemon cannot split it).
lens_on() {
	[ "$(attr K "$1")" = lens ] && [ "$SETUP" = 1node ] &&
		[ -n "$STAT" ] && [ "$STATS_OK" != no ]
}
lens_begin() {	# SYS
	lens_on "$1" || return 0
	"$STAT" --json "$(mp "$1" 1)" >"$WORK/lens.before.json" 2>/dev/null
	LENS_T0=$(now)
}
lens_end() {	# SYS PHASE
	lens_on "$1" || return 0
	_lw=$(fsub "$(now)" "$LENS_T0")
	"$STAT" --json "$(mp "$1" 1)" >"$WORK/lens.after.json" 2>/dev/null ||
		return 0
	jq -r -n --slurpfile a "$WORK/lens.before.json" \
		--slurpfile b "$WORK/lens.after.json" --arg scen "$SCEN" \
		--arg sys "$1" --arg ph "$2" --argjson w "$_lw" --arg rep "$REP" '
	$a[0] as $x | $b[0] as $y |
	def d(p): ($y | getpath(p) // 0) - ($x | getpath(p) // 0);
	def s(p): d(p) / 1e9 * 1000 | round / 1000;
	[$y.fuse.ops | to_entries[] | {k: .key, n: (.value.count -
		($x.fuse.ops[.key].count // 0))} | select(.n > 0)] |
		sort_by(-.n) | .[:6] | map("\(.k) \(.n)") | join(", ") as $top |
	[$scen, $sys, $ph, $w, d(["fuse", "count"]), s(["fuse", "total_ns"]),
	 s(["passthrough", "lower_ns"]), s(["passthrough", "resolve_ns"]),
	 s(["passthrough", "reply_ns"]), s(["passthrough", "lens_ns"]),
	 (($w - d(["fuse", "total_ns"]) / 1e9) * 1000 | round / 1000),
	 d(["passthrough", "lower_calls"]), $top, $rep] | @tsv' \
		>>"$OUT/lens.tsv" 2>>"$WORK/log/stat.err"
}

# table_lens SCEN — lens.tsv of SCEN, repetitions as they ran.
table_lens() {
	awk -F'\t' -v scen="$1" '$1 == scen {
		if (!n++) { print ""
			print "through the ucfs lens (1 node), seconds: " \
				"handler = lower fs + handle reopen + reply + " \
				"lens own; outside = wall - handler (the way " \
				"in, kernel, program)"
			printf "%-10s %-8s %8s %9s %8s %8s %7s %7s %7s %8s  %s\n",
				"system", "step", "wall", "fuse ops",
				"handler", "lower", "reopen", "reply", "lens",
				"outside", "most frequent ops" }
		printf "%-10s %-8s %8.3f %9d %8.3f %8.3f %7.3f %7.3f %7.3f %8.3f  %s\n",
			$2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $13 }' \
		"$OUT/lens.tsv" 2>/dev/null
}

# clients SYS N FUNC [ARG...] — run "FUNC SYS CLIENT ARG..." for clients
# 1..N (1 or 2) at once; PAIR_SECS = wall time, recorded as client "all"
# of phase $PAIR_PHASE unless that is empty. One client runs in this shell
# (it may remount: the new daemon's PID must stay known to cleanup).
clients() {
	_c2s=$1 _c2n=$2 _c2f=$3; shift 3
	_c2t=$(now)
	if [ "$_c2n" = 1 ]; then
		"$_c2f" "$_c2s" 1 "$@"
	else
		"$_c2f" "$_c2s" 1 "$@" & _p1=$!
		"$_c2f" "$_c2s" 2 "$@" & _p2=$!
		wait "$_p1"; wait "$_p2"
	fi
	PAIR_SECS=$(fsub "$(now)" "$_c2t")
	[ -z "$PAIR_PHASE" ] || rec "$_c2s" all "$PAIR_PHASE" real "$PAIR_SECS" s
}

# for_setups SYS FUNC — run FUNC SYS NCLIENTS under each setup the
# scenario wants ($SETUPS: 1node, 2way = two at once, mounted2), with a
# fresh file system for each.
for_setups() {
	if [ "$(attr P "$1")" = dlm ]; then
		cluster_probe
		[ "$CLUSTER" = yes ] || { skipped "$1" all "$SKIP2"; return; }
	fi
	for SETUP in $SETUPS; do
		case " ${SETUPFILTER:-$SETUP} " in *" $SETUP "*) ;; *) continue ;; esac
		_nodes=1 _ncl=1
		case $SETUP in
		2way|mounted2)
			_ncl=2; [ "$SETUP" = mounted2 ] && _ncl=1
			if is_base "$1"; then
				[ "$SETUP" = mounted2 ] && continue
				SETUP=2clients
			elif [ "$(attr P "$1")" = dlm ]; then
				_nodes=2 # the cluster probe above succeeded
				[ "$SETUP" = 2way ] && SETUP=2nodes
			else
				# a nolock node owns the device: two
				# clients on its one mount
				[ "$SETUP" = mounted2 ] && continue
				SETUP=2clients
			fi ;;
		esac
		progress "$SCEN: $1 $SETUP: format and mount"
		if ! sys_up "$1" "$_nodes"; then
			skipped "$1" "$SETUP" "skipped: could not format or mount"
			sys_down "$1" 2>/dev/null
			continue
		fi
		"$2" "$1" "$_ncl"
		sys_down "$1"
	done
}

# ---- scenario: untar (seeds/000) -----------------------------------------------

untar_one() {	# SYS CLIENT — untar + sync into the client's own directory
	_d=$(node_dir "$1" "$2")/c$2
	mkdir -p "$_d"
	timed "$1" "$2" untar tar -xf "$KTAR" -C "$_d"
	timed "$1" "$2" sync sync -f "$_d"
}
# du -s of the client's own tree, as in seeds/000 (each node's du and rm
# ran on the tree it untarred: "separate directories"), so that the
# 2-client rm -rf is compared with the 1-client one from the same state.
# --du-other reads the other client's tree instead: its rm then walks its
# own tree cold (no lock, no kernel cache) against a warm 1-client rm.
du_one() {	# SYS CLIENT — du -s of a client's tree ($DU_PHASE)
	_o=$2
	[ "$DU_OTHER" = 1 ] && [ "$NCL" = 2 ] && _o=$(( $2 == 1 ? 2 : 1 ))
	timed "$1" "$2" "$DU_PHASE" du -s "$(node_dir "$1" "$2")/c$_o"
}
du_cold_one() { DU_PHASE=du_cold du_one "$@"; }
du_warm_one() { DU_PHASE=du_warm du_one "$@"; }
rm_one() { timed "$1" "$2" rm rm -rf "$(node_dir "$1" "$2")/c$2"; }

untar_run() {	# SYS NCLIENTS
	NCL=$2
	STATS_TAG="untar,sync"
	progress "$SCEN: $1 $SETUP: untar + sync ($KFILES files)"
	# the machine's load as the step starts: what a wall time swung with
	rec "$1" all load:untar+sync load1 "$(cut -d' ' -f1 /proc/loadavg)" tasks
	PAIR_PHASE=untar+sync clients "$1" "$2" untar_one
	_tw=$PAIR_SECS
	progress "$SCEN: $1 $SETUP: unmount, du -s on a fresh mount, again, rm -rf"
	sys_cold "$1" umount
	# the two timed parts: not the stats snapshot and delta between
	# them (0.3-4 s of jq on a loaded machine, more for dlm's larger
	# document)
	rec "$1" all untar+sync+umount real "$(awk -v a="$_tw" \
		-v b="$COLD_UMOUNT_SECS" 'BEGIN { printf "%.6f", a + b }')" s
	STATS_TAG="du_cold,du_warm,rm"
	for _ph in du_cold du_warm rm; do
		PAIR_PHASE=$_ph clients "$1" "$2" "${_ph}_one"
	done
}

sc_untar() {
	ktar
	say "untar: $KTAR ($KFILES files)"
	SETUPS="1node 2way"
	for _s in $RUN_SYSTEMS; do
		[ "$(attr K "$_s")" = raw ] && continue
		for_setups "$_s" untar_run
	done
}

# ---- scenario: bonnie (seeds/001) ------------------------------------------

bonnie_sizes() {
	_ram=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
	if [ "$QUICK" = 1 ]; then
		BON_S=64 BON_R=32 BON_N=1 BON_F=-f
	else
		# bonnie++ 2 does its per-char tests with one write(2) per
		# byte: one FUSE request each. -f1 keeps them at 1 MiB.
		BON_S=$((_ram * 2)) BON_R=$_ram BON_N=16 BON_F=-f1
		[ -n "$FILE_MB" ] && BON_S=$FILE_MB BON_R=$((FILE_MB / 2))
		_cap=$((SIZE_MB * 2 / 5))
		if [ "$BON_S" -gt "$_cap" ]; then
			BON_S=$_cap BON_R=$((_cap / 2))
			say "bonnie: -s capped at 40% of the image (${_cap}M);" \
				"bonnie++ is told RAM=${BON_R}M, so page cache shows"
		fi
	fi
}

bonnie_run() {	# SYS NCLIENTS
	_d=$(node_dir "$1" 1)/bonnie
	mkdir -p "$_d"
	STATS_TAG=bonnie
	progress "$SCEN: $1 $SETUP: bonnie++ -s ${BON_S}M -n $BON_N $BON_F"
	_f=$WORK/bonnie.$1.$SETUP
	bonnie++ -d "$_d" -s "$BON_S" -r "$BON_R" -n "$BON_N" -u root \
		$BON_F -m "$1" >"$_f.out" 2>"$_f.err"
	cat "$_f.out" >>"$OUT/raw-bonnie.txt"
	if ! parse_bonnie "$_f.out" >"$_f.kv"; then
		warn "bonnie++ failed on $1: $(tail -n 2 "$_f.err")"
		rec "$1" 1 bonnie failed 1 status
		return 0
	fi
	while read -r _k _v; do
		case $_k in
		*_cpu) _u=%CP ;; *_kbs) _u=K/sec ;; *_ps) _u=/sec ;;
		size) continue ;; *) _u="" ;;
		esac
		rec "$1" 1 bonnie "$_k" "$_v" "$_u"
	done <"$_f.kv"
}

sc_bonnie() {
	need bonnie++ bonnie++ "the bonnie scenario"
	bonnie_sizes
	SETUPS="1node mounted2"
	for _s in $RUN_SYSTEMS; do
		[ "$(attr K "$_s")" = raw ] && continue
		for_setups "$_s" bonnie_run
	done
}

# ---- scenario: iozone via fio (seeds/002) --------------------------------------

IOZ_OPS="write rewrite read reread randread randwrite"
fio_op() {	# SYS CLIENT OP RECLEN — one fio run; records KB/s
	_file=$(node_dir "$1" "$2")/iozone.$2
	case $3 in
	write) rm -f "$_file"; _rw=write ;;
	rewrite) _rw=write ;;
	read|reread) _rw=read ;;
	*) _rw=$3 ;;
	esac
	_f=$WORK/fio.$1.$2.$3.$4
	fio --name="$3" --filename="$_file" --rw="$_rw" --bs="$4" \
		--size="${IOZ_MB}m" --ioengine=psync --end_fsync=1 \
		--fallocate=none --output-format=json >"$_f.json" 2>"$_f.err"
	if ! parse_fio "$_f.json" >"$_f.kv" 2>>"$_f.err"; then
		warn "fio $3 failed on $1: $(tail -n 2 "$_f.err")"
		rec "$1" "$2" "$3" failed 1 status
		return 0
	fi
	case $_rw in *read) _k=read_kbs ;; *) _k=write_kbs ;; esac
	rec "$1" "$2" "$3" "kbs@$4" "$(awk -v k="$_k" '$1 == k { print $2 }' \
		"$_f.kv")" KB/s
}

iozone_client() {	# SYS CLIENT — all ops at $IOZ_REC
	for _op in $IOZ_OPS; do
		[ "$_op" = read ] && [ "$2" = 1 ] && [ "$NCL" = 1 ] &&
			sys_cold "$1"
		fio_op "$1" "$2" "$_op" "$IOZ_REC"
	done
}

iozone_run() {	# SYS NCLIENTS
	NCL=$2
	for IOZ_REC in $IOZ_RECS; do
		STATS_TAG="fio record $IOZ_REC"
		progress "$SCEN: $1 $SETUP: fio ${IOZ_MB}M file, record $IOZ_REC"
		PAIR_PHASE=all-ops@$IOZ_REC clients "$1" "$2" iozone_client
	done
}

sc_iozone() {
	need fio fio "the iozone scenario"
	if [ "$QUICK" = 1 ]; then
		IOZ_MB=32 IOZ_RECS="64k 1m 16m"
	else
		IOZ_MB=${FILE_MB:-2048}
		IOZ_RECS="64k 128k 256k 512k 1m 2m 4m 8m 16m"
		_cap=$((SIZE_MB * 2 / 5))
		[ "$IOZ_MB" -gt "$_cap" ] && IOZ_MB=$_cap
	fi
	[ -n "$RECS" ] && IOZ_RECS=$RECS
	say "iozone: fio, ${IOZ_MB}M file, records $IOZ_RECS" \
		"(write/rewrite/read/reread/randread/randwrite, end_fsync)"
	SETUPS="1node 2way"
	for _s in $RUN_SYSTEMS; do
		[ "$(attr K "$_s")" = raw ] && continue
		for_setups "$_s" iozone_run
	done
}

# ---- scenario: fileben and db (seeds/003) ----------------------------------

fileben_run() {	# SYS NCLIENTS
	_d=$(node_dir "$1" 1)
	STATS_TAG="fileben,db"
	progress "$SCEN: $1 $SETUP: fileben write/read 128K x10, db x100"
	for _m in 0 1; do
		_f=$WORK/fileben.$1.$SETUP.$_m
		"$OPS" fileben -$_m -p 10 -a -f "$_d/aaa" >"$_f" 2>&1
		cat "$_f" >>"$OUT/raw-fileben.txt"
		_ph=write; [ "$_m" = 1 ] && _ph=read
		parse_fileben "$_f" >"$_f.kv" ||
			{ rec "$1" 1 "$_ph" failed 1 status; continue; }
		while read -r _k _v; do
			[ "$_k" = passes ] && continue
			rec "$1" 1 "$_ph" "$_k" "$_v" KB/s
		done <"$_f.kv"
	done
	_f=$WORK/db.$1.$SETUP
	mkdir -p "$_d/db"
	"$OPS" db "$_d/db" >"$_f" 2>&1
	cat "$_f" >>"$OUT/raw-fileben.txt"
	parse_db "$_f" >"$_f.kv" || { rec "$1" 1 db failed 1 status; return; }
	while read -r _k _v; do
		rec "$1" 1 db "$_k" "$_v" dir/sec
	done <"$_f.kv"
}

sc_fileben() {
	SETUPS="1node mounted2"
	for _s in $RUN_SYSTEMS; do
		[ "$(attr K "$_s")" = raw ] && continue
		for_setups "$_s" fileben_run
	done
}

# ---- scenario: dd (seeds/004) ----------------------------------------------

# dd_one SYS CLIENT write|read — client N uses its own file (or, on the raw
# device, its own region: offset (N-1) * size).
dd_one() {
	_f=$WORK/dd.$1.$2.$3
	if [ "$(attr K "$1")" = raw ]; then
		_off=$(( ($2 - 1) * DD_MB ))
		if [ "$3" = write ]; then
			dd if=/dev/zero of="$IMG" bs=1M count="$DD_MB" \
				seek="$_off" oflag=direct conv=notrunc,fsync \
				2>"$_f"
		else
			dd if="$IMG" of=/dev/null bs=1M count="$DD_MB" \
				skip="$_off" iflag=direct 2>"$_f"
		fi
	else
		_t=$(node_dir "$1" "$2")/dd.$2
		if [ "$3" = write ]; then
			dd if=/dev/zero of="$_t" bs=1M count="$DD_MB" \
				conv=fsync 2>"$_f"
		else
			dd if="$_t" of=/dev/null bs=1M 2>"$_f"
		fi
	fi
	if parse_dd "$_f" >"$_f.kv"; then
		rec "$1" "$2" "$3" MBps "$(awk '$1 == "MBps" { print $2 }' \
			"$_f.kv")" MB/s
	else
		warn "dd $3 failed on $1: $(tail -n 1 "$_f")"
		rec "$1" "$2" "$3" failed 1 status
	fi
}

dd_run() {	# SYS NCLIENTS
	STATS_TAG="dd write,read"
	for _ph in write read; do
		progress "$SCEN: $1 $SETUP: dd $_ph ${DD_MB}M x $2"
		if [ "$_ph" = read ]; then
			if [ "$(attr K "$1")" = raw ]; then drop_caches
			else sys_cold "$1"; fi
		fi
		[ "$2" = 1 ] && lens_begin "$1"
		PAIR_PHASE="" clients "$1" "$2" dd_one "$_ph"
		[ "$2" = 1 ] && lens_end "$1" "dd_$_ph"
		# Two at once: aggregate MB/s = bytes of both / their wall time.
		if [ "$2" = 2 ]; then
			rec "$1" all "$_ph" MBps "$(awk -v t="$PAIR_SECS" \
				-v b=$((DD_MB * 2 * 1048576)) \
				'BEGIN { printf "%.1f", b / t / 1e6 }')" MB/s
		fi
	done
}

raw_run() {	# the raw image has no mount: both setups here
	for SETUP in 1node 2clients; do
		_n=1; [ "$SETUP" = 2clients ] && _n=2
		dd_run raw "$_n"
	done
}

# ---- dd on an aged filesystem (DESIGN.md: aged write >= 80% of fresh) ---
#
# Setup "aged", client 1, one fresh format per system, primed (aged_prime),
# then dd write + cold read of AGED_MB (phases fresh_write, fresh_read),
# rm, ucfs-age to AGE_FILL% with AGE_CHURN rounds (phase age: fill_pct,
# real, files), cold remount, the same dd (aged_write, aged_read). AGED_MB = DD_MB capped to half the space the
# aged fs leaves free, so both runs write the same size. Systems: ucfs
# (1 node), ext4 and pt (like with like); never a --dir (a user's fs).
# UCFS_BENCH_AGE_FILL / UCFS_BENCH_AGE_CHURN override the defaults.

AGE_FILL=${UCFS_BENCH_AGE_FILL:-80}
AGE_CHURN=${UCFS_BENCH_AGE_CHURN:-}
AGE_SEED=1

# aged_dd SYS write|read PHASE — one dd of the aged setup, recorded as PHASE.
aged_dd() {
	_af=$WORK/dd.$1.$3 _at=$(node_dir "$1" 1)/dd.aged
	if [ "$2" = write ]; then
		dd if=/dev/zero of="$_at" bs=1M count="$AGED_MB" conv=fsync \
			2>"$_af"
	else
		dd if="$_at" of=/dev/null bs=1M 2>"$_af"
	fi
	if parse_dd "$_af" >"$_af.kv"; then
		rec "$1" 1 "$3" MBps "$(awk '$1 == "MBps" { print $2 }' \
			"$_af.kv")" MB/s
	else
		warn "dd $3 failed on $1: $(tail -n 1 "$_af")"
		rec "$1" 1 "$3" failed 1 status
		return 1
	fi
}

# aged_age SYS — ucfs-age the mounted fs; records phase age.
aged_age() {
	_aj=$WORK/age.$1.json
	progress "$SCEN: $1 aged: ucfs-age --fill $AGE_FILL --churn" \
		"$AGE_CHURN --seed $AGE_SEED"
	if ! "$AGE" --fill "$AGE_FILL" --churn "$AGE_CHURN" --seed \
	    "$AGE_SEED" --json "$(node_dir "$1" 1)" >"$_aj" \
	    2>"$WORK/log/age.$1.log"; then
		warn "ucfs-age failed on $1: $(tail -n 2 "$WORK/log/age.$1.log")"
		rec "$1" 1 age failed 1 status
		return 1
	fi
	rec "$1" 1 age fill_pct "$(jq .fill_final "$_aj")" %
	rec "$1" 1 age real "$(jq .seconds "$_aj")" s
	rec "$1" 1 age files "$(jq .files_live "$_aj")" files
	say "$1 aged: $(jq -r '"\(.fill_final)% full, \(.files_created)" +
		" files created, \(.files_deleted) deleted, \(.enospc) ENOSPC," +
		" \(.seconds) s"' "$_aj")"
}

# aged_cold SYS PHASE — cold remount before PHASE; a failure is recorded.
aged_cold() {
	sys_cold "$1" && return 0
	warn "remount before $2 failed on $1"
	rec "$1" 1 "$2" failed 1 status
	return 1
}

# aged_allocs SYS PHASE — after the unmount that ended PHASE's mount (ucfs):
# the allocator calls and device writes of that mount (its stats delta),
# the fragmentation the rates alone do not show.
aged_allocs() {
	[ "$(attr K "$1")" = ucfs ] || return 0
	_sf=$(ls "$OUT/stats/$(printf %04d "$STATS_SEQ")".*.json 2>/dev/null)
	[ -s "$_sf" ] || return 0
	for _k in alloc.calls:alloc_calls:calls \
		  blockdev.write.count:dev_writes:ios; do
		_x=$(jq --arg k "${_k%%:*}" '.delta[$k] // empty' "$_sf")
		_m=${_k#*:}
		[ -n "$_x" ] && rec "$1" 1 "$2" "${_m%:*}" "$_x" "${_m#*:}"
	done
}

# aged_prime SYS — write 95% of the free space as one file, delete it,
# remount cold. The image is a sparse file and mkfs.ext4 discards it back
# to holes: without this the fresh write pays the host filesystem's block
# allocation and the aged one (into blocks the aging wrote) does not.
aged_prime() {
	_ad=$(node_dir "$1" 1)
	_amb=$(stat -f -c '%a %S' "$_ad" |
		awk '{ printf "%d", $1 * $2 / 1048576 * 0.95 }')
	progress "$SCEN: $1 aged: prime the image (${_amb}M written, deleted)"
	dd if=/dev/zero of="$_ad/prime" bs=1M count="$_amb" conv=fsync \
		2>"$WORK/log/prime.$1.log" ||
		warn "priming $1 stopped early: $(tail -n 1 \
			"$WORK/log/prime.$1.log")"
	rm -f "$_ad/prime"
	aged_cold "$1" fresh_write
}

# (STATS_TAG names what the mount did: it is read when the mount ends.)
aged_run() {	# SYS NCLIENTS (1) — the phases above, under for_setups
	STATS_TAG="dd aged: prime"
	aged_prime "$1" || return 0
	progress "$SCEN: $1 aged: dd ${AGED_MB}M on the fresh fs"
	STATS_TAG="dd aged: fresh write"
	aged_dd "$1" write fresh_write || return 0
	aged_cold "$1" fresh_read || return 0
	aged_allocs "$1" fresh_write
	STATS_TAG="dd aged: fresh read, rm, ucfs-age"
	aged_dd "$1" read fresh_read || return 0
	rm -f "$(node_dir "$1" 1)/dd.aged"
	aged_age "$1" || return 0
	progress "$SCEN: $1 aged: dd ${AGED_MB}M on the aged fs"
	aged_cold "$1" aged_write || return 0
	STATS_TAG="dd aged: aged write"
	aged_dd "$1" write aged_write || return 0
	aged_cold "$1" aged_read || return 0
	aged_allocs "$1" aged_write
	STATS_TAG="dd aged: aged read"
	aged_dd "$1" read aged_read
}

# aged_sys SYS — the aged comparison of SYS, or why it is skipped.
aged_sys() {
	case $(attr K "$1") in
	raw) return 0 ;;
	dir) skipped "$1" aged "skipped: ucfs-age never fills a --dir"
	     return 0 ;;
	lens) [ -n "$(attr X "$1")" ] && { skipped "$1" aged \
		"skipped: ucfs-age never fills a --dir"; return 0; } ;;
	esac
	[ "$(attr P "$1")" = dlm ] && [ "$CLUSTER" != yes ] && return 0
	if [ -z "$AGE" ]; then
		skipped "$1" aged "skipped: aging tool (ucfs-age) not built"
		return 0
	fi
	: "${AGE_CHURN:=$([ "$QUICK" = 1 ] && echo 2 || echo 10)}"
	AGED_MB=$((SIZE_MB * (100 - AGE_FILL) / 200))
	[ "$AGED_MB" -gt "$DD_MB" ] && AGED_MB=$DD_MB
	[ "$AGED_MB" -ge 1 ] || { skipped "$1" aged "skipped: image too small"
		return 0; }
	_as=$SETUPS SETUPS=aged
	for_setups "$1" aged_run
	SETUPS=$_as
}

sc_dd() {
	if [ "$QUICK" = 1 ]; then DD_MB=64
	else
		DD_MB=${FILE_MB:-2048}
		_cap=$((SIZE_MB * 2 / 5))
		[ "$DD_MB" -gt "$_cap" ] && DD_MB=$_cap
	fi
	say "dd: ${DD_MB} MiB per file, bs=1M; fs writes end with fsync," \
		"reads start on a fresh mount; raw uses O_DIRECT"
	SETUPS="1node 2way"
	for _s in $RUN_SYSTEMS; do
		if [ "$(attr K "$_s")" = raw ]; then raw_run; continue; fi
		for_setups "$_s" dd_run
		aged_sys "$_s"
	done
}

# ---- scenario: append (issue 13: a lock moving between nodes) ---------------
#
# Two clients append 4 KiB records with fsync to ONE shared file at once
# (ucfs-bench-ops append: O_APPEND, write(2), fsync) for APP_SECS seconds;
# on two dlm nodes every record needs the file's inode lock in EX, so the
# lock moves between the nodes. Then the file is read back on every node
# (ucfs-bench-ops appendcheck): each writer's records exactly once, whole,
# in order. Figures: records/s of each client and of both; for ucfs
# systems the lock's transfers (glocks.types.inode.bounces of both nodes
# over the run), transfers/s, demotes and the mean demote time, device
# durability waits (flushes + FUA writes of both nodes) per transfer,
# journal commits and kernel page invalidations; lost = records not read back
# whole exactly once (0, else the step fails).

app_stats() {	# SYS before|after — stats of every node of SYS
	_an=1
	while [ "$_an" -le "$(attr NODES "$1")" ]; do
		"$STAT" --json "$(mp "$1" "$_an")" \
			>"$WORK/app.$_an.$2.json" 2>/dev/null ||
			rm -f "$WORK/app.$_an.$2.json"
		_an=$((_an + 1))
	done
}

# app_delta SYS — the lock figures of the run, from both nodes' stats
# (journal commits on any ucfs system; the rest on lockproto=dlm).
app_delta() {
	[ "$(attr K "$1")" = ucfs ] || return 0
	_an=1
	while [ "$_an" -le "$(attr NODES "$1")" ]; do
		[ -s "$WORK/app.$_an.before.json" ] &&
			[ -s "$WORK/app.$_an.after.json" ] || return 0
		jq -r -n --slurpfile a "$WORK/app.$_an.before.json" \
			--slurpfile b "$WORK/app.$_an.after.json" '
		def d(p): ($b[0] | getpath(p) // 0) - ($a[0] | getpath(p) // 0);
		def i(k): ["glocks", "types", "inode", k];
		"transfers \(d(i("bounces")))",
		"demotes \(d(i("demotes_to_nl")) + d(i("demotes_to_pr")))",
		"demote_ns \(d(i("demote_ns")))",
		"bast_recv \(d(["locks", "types", "inode", "bast_recv"]))",
		"commits \(d(["journal", "commits"]))",
		"dev_waits \(d(["blockdev", "flush", "count"]) +
			d(["blockdev", "fua_writes"]))",
		"page_invals \(d(["kcache", "pages"]))"'
		_an=$((_an + 1))
	done | awk '{ s[$1] += $2 } END { for (k in s) print k, s[k] }' \
		>"$WORK/app.delta"
	_ad() { awk -v k="$1" '$1 == k { print $2 }' "$WORK/app.delta"; }
	rec "$1" all append commits "$(_ad commits)" ""
	[ "$(attr P "$1")" = dlm ] || return 0
	for _k in transfers demotes bast_recv page_invals; do
		rec "$1" all append "$_k" "$(_ad "$_k")" ""
	done
	rec "$1" all append transfers_ps "$(awk -v n="$(_ad transfers)" \
		-v s="$PAIR_SECS" 'BEGIN { printf "%.1f", (s > 0 ? n / s : 0) }')" /s
	rec "$1" all append demote_ms "$(awk -v n="$(_ad demotes)" \
		-v t="$(_ad demote_ns)" 'BEGIN { printf "%.3f",
		(n > 0 ? t / n / 1e6 : 0) }')" ms
	rec "$1" all append waits_per_xfer "$(awk -v n="$(_ad transfers)" \
		-v w="$(_ad dev_waits)" 'BEGIN { printf "%.2f",
		(n > 0 ? w / n : 0) }')" ""
}

append_one() {	# SYS CLIENT
	_af=$WORK/append.$1.$2
	if ! "$OPS" append -i "$2" -t "$APP_SECS" \
		"$(node_dir "$1" "$2")/append.log" >"$_af" 2>&1; then
		warn "append failed on $1 client $2: $(tail -n 1 "$_af")"
		rec "$1" "$2" append failed 1 status
		return 0
	fi
	rec "$1" "$2" append records_ps "$(sed -n 's/.* rate=\([0-9.]*\).*/\1/p' \
		"$_af")" /s
}

append_run() {	# SYS NCLIENTS
	STATS_TAG=append
	progress "$SCEN: $1 $SETUP: 2 writers, O_APPEND + fsync, ${APP_SECS}s"
	: >"$(node_dir "$1" 1)/append.log"
	app_stats "$1" before
	PAIR_PHASE="" clients "$1" 2 append_one
	app_stats "$1" after
	_aw="" _at=0
	for _c in 1 2; do
		_n=$(sed -n 's/^records=\([0-9]*\) .*/\1/p' "$WORK/append.$1.$_c")
		_aw="$_aw $_c:${_n:-0}"
		_at=$((${_at:-0} + ${_n:-0}))
	done
	rec "$1" all append records_ps "$(awk -v n="$_at" -v s="$PAIR_SECS" \
		'BEGIN { printf "%.1f", (s > 0 ? n / s : 0) }')" /s
	app_delta "$1"
	# read back on every node (client 2's view is node 2's on dlm)
	for _c in 1 2; do
		# shellcheck disable=SC2086
		"$OPS" appendcheck "$(node_dir "$1" "$_c")/append.log" $_aw \
			>"$WORK/appcheck.$1.$_c" 2>&1
		_ar=$?
		_al=$(awk -F'[= ]' '/^writer=/ { n += $4 } END { print n + 0 }' \
			"$WORK/appcheck.$1.$_c")
		_al=$(( $(echo "$_aw" | tr ' :' '\n\n' | awk 'NR % 2 == 0 {
			s += $1 } END { print s + 0 }') - _al ))
		[ "$_ar" = 0 ] && _al=0
		[ "$_ar" = 0 ] || { [ "$_al" -gt 0 ] || _al=1
			warn "append read-back on $1 client $_c:" \
			"$(grep -v '^writer=' "$WORK/appcheck.$1.$_c" | head -n 1)"
			rec "$1" "$_c" check failed 1 status; }
		rec "$1" "$_c" check lost "$_al" ""
	done
}

sc_append() {
	APP_SECS=${UCFS_BENCH_APPEND_SECS:-10}
	[ "$QUICK" = 1 ] && APP_SECS=${UCFS_BENCH_APPEND_SECS:-3}
	say "append: 2 writers, one file, 4 KiB O_APPEND records + fsync," \
		"${APP_SECS}s"
	SETUPS="2way"
	for _s in $RUN_SYSTEMS; do
		case $(attr K "$_s") in raw) continue ;; esac
		for_setups "$_s" append_run
	done
}

# ---- scenario: find (issue 13: a daemon's memory after a huge walk) ---------
#
# ucfs systems only: FIND_FILES empty files (1,000,000; --quick 20,000;
# --files N) made by ucfs-mktree through the library on the fresh image,
# then one node mounted (caches cold), `find` over the whole tree, and
# the daemon's peak RSS (node.max_rss_kb: VmHWM) beside its bounds: the
# block cache's cache_mb, the glock engine's bytes (glocks.bytes_now) at
# its bound glock_max, the glocks in the table, the cache's buffers.

find_run() {	# SYS NCLIENTS (1)
	_fm=$(mp "$1" 1)
	STATS_TAG=find
	progress "$SCEN: $1: find over $FIND_FILES files"
	timed "$1" 1 find find "$_fm" -xdev -name 'f*' -type f \
		-printf '' -o -type d -printf ''
	stats_snap "$1" 1 after
	_fj=$WORK/stats.$1.1.after.json
	[ -s "$_fj" ] || return 0
	jq -r '"rss_mb \(.node.max_rss_kb / 1024)",
		"cache_mb \(.node.options.cache_mb // "256")",
		"glock_max \(.glocks.glock_max // 0)",
		"glocks \(.glocks.glocks_now // 0)",
		"glock_mb \((.glocks.bytes_now // 0) / 1048576)",
		"locks_mb \((.locks.bytes_now // 0) / 1048576)",
		"pinned \(.glocks.pinned_now // 0)",
		"lock_b \(if (.glocks.glocks_now // 0) > 0 then
			((.glocks.bytes_now // 0) + (.locks.bytes_now // 0))
			/ .glocks.glocks_now else 0 end)",
		"kinval \((.kcache.attrs // 0) + (.kcache.dirs // 0) +
			(.kcache.epochs // 0))",
		"cache_bufs \(.cache.bufs_now // 0)",
		"inodes \(.namespace.inodes_referenced // 0)",
		"inode_b \(if (.namespace.inodes_referenced // 0) > 0 then
			(.node.max_rss_kb * 1024 - (.cache.bufs_now // 0) * 4096
			- (.glocks.bytes_now // 0))
			/ .namespace.inodes_referenced else 0 end)",
		"lookups \(.fuse.ops.lookup.count)",
		"forgets \(.fuse.ops.forget.count +
			.fuse.ops.forget_multi.count)"' "$_fj" \
		>"$WORK/find.kv" 2>/dev/null || return 0
	while read -r _k _v; do
		case $_k in *_mb) _u=MB ;; *) _u="" ;; esac
		rec "$1" 1 find "$_k" "$(awk -v x="$_v" \
			'BEGIN { printf "%.1f", x }')" "$_u"
	done <"$WORK/find.kv"
}

find_sys() {	# SYS — format, make the tree, mount, find, unmount
	if [ "$(attr P "$1")" = dlm ]; then
		cluster_probe
		[ "$CLUSTER" = yes ] || { skipped "$1" all "$SKIP2"; return; }
	fi
	SETUP=1node
	progress "$SCEN: $1: format, ucfs-mktree $FIND_FILES files"
	ucfs_mkfs "$1" || { skipped "$1" 1node "skipped: mkfs failed"; return; }
	if ! "$MKTREE" "$IMG" "$FIND_FILES" >"$WORK/mktree.$1" 2>&1; then
		warn "ucfs-mktree failed: $(tail -n 1 "$WORK/mktree.$1")"
		rec "$1" 1 mktree failed 1 status
		return 0
	fi
	rec "$1" 1 mktree rate "$(sed -n 's/.* rate=\([0-9]*\).*/\1/p' \
		"$WORK/mktree.$1")" /s
	drop_caches
	mount_all "$1" 1 || { skipped "$1" 1node "skipped: could not mount"
		umount_all "$1"; return; }
	find_run "$1" 1
	umount_all "$1"
}

sc_find() {
	FIND_FILES=${FIND_N:-1000000}
	[ "$QUICK" = 1 ] && FIND_FILES=${FIND_N:-20000}
	MKTREE=$(tool ucfs-mktree)
	say "find: $FIND_FILES empty files in directories of 1,000, find" \
		"on a fresh mount, the daemon's peak RSS"
	for _s in $RUN_SYSTEMS; do
		if [ "$(attr K "$_s")" != ucfs ]; then
			skipped "$_s" all "skipped: ucfs systems only (the tree is made through the ucfs library)"
			continue
		fi
		[ -n "$MKTREE" ] || { skipped "$_s" all \
			"skipped: ucfs-mktree is not built"; continue; }
		find_sys "$_s"
	done
}

# ---- ratios, tables, targets ------------------------------------------------
#
# ratios.tsv: scenario system setup client phase metric baseline ratio: the
# value of every row over each baseline's row of the same scenario, phase,
# metric and client, in the equivalent setup (two ucfs nodes <-> two
# clients of a baseline; "mounted on 2 nodes" <-> the baseline's single
# node). None from or to a system and setup with a failed step (its other
# figures are suspect). Baseline "ucfs" (nolock, when other ucfs systems
# run) is the reference of the other ucfs systems only: dlm vs nolock, as
# seeds/002 compares lock_dlm with localcache.

BASELINES="" UCFS_SYSTEMS="" TBASES=""
make_ratios() {
	awk -F'\t' -v OFS='\t' -v bases="$BASELINES" -v u="$UCFS_SYSTEMS" '
	BEGIN { nb = split(bases, B, " "); nu = split(u, U, " ")
		for (i = 1; i <= nu; i++) isu[U[i]] = 1 }
	function eqv(s) {
		if (s == "2nodes") return "2clients"
		if (s == "mounted2") return "1node"
		return s }
	$6 == "failed" { bad[$1, $2, eqv($3)] = 1 }
	$7 ~ /^-?[0-9]+(\.[0-9]*)?(e[+-]?[0-9]+)?$/ { key = $1 SUBSEP eqv($3) SUBSEP $4 SUBSEP $5 \
		SUBSEP $6; val[$2, key] = $7
		rows[++n] = $0 }
	END { for (r = 1; r <= n; r++) { split(rows[r], f, "\t")
		if ((f[1], f[2], eqv(f[3])) in bad) continue
		key = f[1] SUBSEP eqv(f[3]) SUBSEP f[4] SUBSEP f[5] SUBSEP f[6]
		for (b = 1; b <= nb; b++) if (B[b] != f[2] &&
		    (B[b] != "ucfs" || isu[f[2]]) &&
		    !((f[1], B[b], eqv(f[3])) in bad) &&
		    (B[b], key) in val && val[B[b], key] + 0 > 0)
			print f[1], f[2], f[3], f[4], f[5], f[6], B[b],
				sprintf("%.3f", f[7] / val[B[b], key]) } }' \
		"$OUT/results.tsv" >"$OUT/ratios.tsv"
}

# Row order of the tables: systems, setups and steps in the order they
# ran, clients 1, 2, all (the two clients finish in any order).
AWK_SORT='
function rk(arr, x) { if (!(x in arr)) arr[x] = ++arr[SUBSEP]; return arr[x] }
function sortkey(sys, setup, cl, step) {
	return sprintf("%04d%04d%04d%s", rk(rs, sys), rk(rt, setup),
		rk(rp, step), cl == "all" ? "9" : cl) }
function sort_rows(   i, j, t) {
	for (i = 2; i <= n; i++) { t = order[i]
		for (j = i - 1; j >= 1 && rank[order[j]] > rank[t]; j--)
			order[j + 1] = order[j]
		order[j + 1] = t } }'

# table_times SCEN — the untar report: one row per system, setup, client
# and step; real/user/sys as "0m15.826s"; then real over each baseline.
table_times() {
	awk -F'\t' -v scen="$1" -v bases="$TBASES" "$AWK_SORT"'
	function ms(s) { return sprintf("%dm%06.3fs", int(s / 60), s - 60 * int(s / 60)) }
	FILENAME ~ /ratios/ { if ($1 == scen && $6 == "real")
		rat[$2, $3, $4, $5, $7] = $8; next }
	$1 != scen || $5 ~ /^(rss|locks|cpu|load):/ { next }
	{ k = $2 SUBSEP $3 SUBSEP $4 SUBSEP $5
	  if (!(k in seen)) { seen[k] = 1; order[++n] = k
		rank[k] = sortkey($2, $3, $4, $5) }
	  v[k, $6] = $7 }
	END { sort_rows(); nb = split(bases, B, " ")
		hdr = sprintf("%-10s %-8s %-3s %-17s %11s %11s %11s", "system",
			"setup", "cl", "step", "real", "user", "sys")
		for (b = 1; b <= nb; b++) hdr = hdr sprintf(" %8s", "x" B[b])
		print hdr
		for (i = 1; i <= n; i++) { split(order[i], f, SUBSEP)
			k = order[i]
			line = sprintf("%-10s %-8s %-3s %-17s %11s %11s %11s",
				f[1], f[2], f[3], f[4], ms(v[k, "real"]),
				(k, "user") in v ? ms(v[k, "user"]) : "-",
				(k, "sys") in v ? ms(v[k, "sys"]) : "-")
			if ((k, "failed") in v) line = line "  FAILED"
			for (b = 1; b <= nb; b++) {
				r = rat[f[1], f[2], f[3], f[4], B[b]]
				line = line sprintf(" %8s", r == "" ? "" : r)
			}
			print line } }' "$OUT/ratios.tsv" "$OUT/results.tsv"
}

# table_wide SCEN TITLE COLS — one row per system/setup/client(/record
# size), one column per "phase:metric:header" of COLS; under each ucfs row
# one row per baseline with the ratios ("/ext4").
table_wide() {
	awk -F'\t' -v scen="$1" -v title="$2" -v cols="$3" \
		-v bases="$TBASES" "$AWK_SORT"'
	BEGIN { nc = split(cols, C, " ")
		for (c = 1; c <= nc; c++) { split(C[c], p, ":")
			ph[c] = p[1]; me[c] = p[2]; hd[c] = p[3] } }
	function cell(x) { return x == "-" ? "+++++" : x }
	function rowkey(m) { sub(/^[^@]*@?/, "", m); return m }
	function colof(phase, m,   c) { sub(/@.*/, "", m)
		for (c = 1; c <= nc; c++)
			if (ph[c] == phase && me[c] == m) return c
		return 0 }
	FILENAME ~ /ratios/ { if ($1 != scen) next
		c = colof($5, $6); if (!c) next
		rat[$2 SUBSEP $3 SUBSEP $4 SUBSEP rowkey($6), $7, c] = $8; next }
	$1 != scen { next }
	{ c = colof($5, $6); if (!c) next
	  k = $2 SUBSEP $3 SUBSEP $4 SUBSEP rowkey($6)
	  if (!(k in seen)) { seen[k] = 1; order[++n] = k
		rank[k] = sortkey($2, $3, $4, rowkey($6)) }
	  v[k, c] = $7 }
	END { sort_rows(); nb = split(bases, B, " ")
		print title
		line = sprintf("%-10s %-8s %-3s %-6s", "system", "setup", "cl", "")
		for (c = 1; c <= nc; c++) line = line sprintf(" %10s", hd[c])
		print line
		for (i = 1; i <= n; i++) { split(order[i], f, SUBSEP)
			line = sprintf("%-10s %-8s %-3s %-6s", f[1], f[2], f[3], f[4])
			for (c = 1; c <= nc; c++) line = line sprintf(" %10s",
				(order[i], c) in v ? cell(v[order[i], c]) : "")
			print line
			for (b = 1; b <= nb; b++) { any = 0
				line = sprintf("%-10s %-8s %-3s %-6s", "", "", "", "/" B[b])
				for (c = 1; c <= nc; c++) { r = ""
					if ((order[i], B[b], c) in rat) {
						r = rat[order[i], B[b], c]; any = 1 }
					line = line sprintf(" %10s", r) }
				if (any) print line } } }' "$OUT/ratios.tsv" "$OUT/results.tsv"
}

# report_failures SCEN — every failed step, so no figure of its run is
# read as valid (the ratios leave that system and setup out).
report_failures() {
	awk -F'\t' -v scen="$1" '$1 == scen && $6 == "failed" {
		if (!n++) print "\nFAILED steps (their system and setup" \
			" get no ratios; --keep keeps the logs):"
		printf "  %s %s client %s: %s (exit status %s)\n", $2, $3,
			$4, $5, $7 }' "$OUT/results.tsv"
}

report_tables() {	# SCEN (column lists: whitespace-separated, any lines)
	TBASES=""	# the baselines this scenario has ratios to
	for _b in $BASELINES; do
		awk -F'\t' -v s="$1" -v b="$_b" '$1 == s && $7 == b { f = 1
			exit } END { exit !f }' "$OUT/ratios.tsv" &&
			TBASES="$TBASES $_b"
	done
	case $1 in
	untar) table_times untar ;;
	bonnie)
		table_wide bonnie \
			"bonnie++: Sequential Output / Sequential Input / Random" "
			bonnie:putc_kbs:PerChrK/s bonnie:putc_cpu:%CP
			bonnie:block_out_kbs:BlockK/s bonnie:block_out_cpu:%CP
			bonnie:rewrite_kbs:RewrK/s bonnie:rewrite_cpu:%CP
			bonnie:getc_kbs:PerChrK/s bonnie:getc_cpu:%CP
			bonnie:block_in_kbs:BlockK/s bonnie:block_in_cpu:%CP
			bonnie:seeks_ps:Seeks/s bonnie:seeks_cpu:%CP"
		echo
		table_wide bonnie \
			"bonnie++: Sequential Create / Random Create (files/sec)" "
			bonnie:seq_create_ps:SeqCreate bonnie:seq_read_ps:SeqRead
			bonnie:seq_delete_ps:SeqDelete bonnie:ran_create_ps:RanCreate
			bonnie:ran_read_ps:RanRead bonnie:ran_delete_ps:RanDelete" ;;
	iozone)
		table_wide iozone "iozone (fio): Kbytes/sec by record length" "
			write:kbs:write rewrite:kbs:rewrite read:kbs:read
			reread:kbs:reread randread:kbs:randread
			randwrite:kbs:randwrite" ;;
	fileben)
		table_wide fileben \
			"fileben: 128K file, KB/sec per pass and total" "
			write:pass1_kbs:w1 write:pass2_kbs:w2 write:pass5_kbs:w5
			write:pass10_kbs:w10 write:total_kbs:write
			read:pass1_kbs:r1 read:pass2_kbs:r2 read:pass5_kbs:r5
			read:pass10_kbs:r10 read:total_kbs:read"
		echo
		table_wide fileben "db: mkdir, rmdir, mkdir, mvdir (dir/sec)" "
			db:mkdir_ps:mkdir db:rmdir_ps:rmdir db:mkdir2_ps:mkdir
			db:mvdir_ps:mvdir" ;;
	dd)
		table_wide dd \
			"dd: sequential MB/s (client all = aggregate of 2 at once)" \
			"write:MBps:write read:MBps:read"
		grep -q '	aged	1	aged_write	MBps	' "$OUT/results.tsv" &&
		{ echo; _t="dd, MB/s: ${AGED_MB} MiB on a fresh fs, then on it"
		  _t="$_t aged (ucfs-age --fill $AGE_FILL --churn $AGE_CHURN)"
		  table_wide dd "$_t" "
			fresh_write:MBps:fresh_w fresh_read:MBps:fresh_r
			aged_write:MBps:aged_w aged_read:MBps:aged_r
			age:fill_pct:full% fresh_write:alloc_calls:allocs_f
			aged_write:alloc_calls:allocs_a"; } ;;
	append)
		table_wide append "append: 4 KiB O_APPEND + fsync from 2 writers to one file" "
			append:records_ps:records/s append:transfers_ps:transfer/s
			append:transfers:transfers append:demote_ms:demote_ms
			append:waits_per_xfer:waits/xfer
			append:commits:commits append:page_invals:pg_invals
			check:lost:lost" ;;
	find)
		table_wide find "find over $FIND_FILES files on a fresh mount: peak RSS and its bounds" "
			mktree:rate:mktree/s find:real:find_s find:rss_mb:rss_mb
			find:cache_mb:cache_mb find:glock_max:glock_max
			find:glocks:glocks find:glock_mb:glock_mb
			find:locks_mb:locks_mb find:lock_b:B/glock
			find:pinned:pinned
			find:kinval:kinval
			find:cache_bufs:bufs find:inodes:inodes
			find:inode_b:B/inode find:lookups:lookups
			find:forgets:forgets" ;;
	esac
	table_lens "$1"
	table_rss "$1"
	report_failures "$1"
}

# table_rss SCEN — the ucfs daemons' peak resident memory per mount
# (phase rss:<what ran on that mount>), if the run has any.
table_rss() {
	awk -F'\t' -v scen="$1" '$1 == scen && $5 ~ /^rss:/ && $6 == "peak" {
		if (!n++) { print ""; printf "%-10s %-8s %-3s %-28s %9s\n",
			"daemon", "setup", "cl", "peak RSS over the mount of",
			"MB" }
		printf "%-10s %-8s %-3s %-28s %9s\n", $2, $3, $4,
			substr($5, 5), $7 }' "$OUT/results.tsv"
}

# targets.tsv: target system value limit verdict note — DESIGN.md's table,
# where this run measured it.
make_targets() {
	_run_ucfs="" _dlm=""
	for _s in $UCFS_SYSTEMS; do
		case " $RUN_SYSTEMS " in *" $_s "*) _run_ucfs="$_run_ucfs $_s" ;; esac
		[ "$(attr P "$_s")" = dlm ] && _dlm="$_dlm $_s"
	done
	awk -F'\t' -v OFS='\t' -v ucfs="$_run_ucfs" -v files="${KFILES:-?}" \
		-v dlm=" $_dlm " -v duother="$DU_OTHER" \
		-v dd="${DD_MB:-?} MiB files" -v findn="${FIND_FILES:-?}" \
		-v agemb="${AGED_MB:-?} MiB, churn ${AGE_CHURN:-?}" '
	FILENAME ~ /ratios/ { r[$1, $2, $3, $4, $5, $6, $7] = $8; next }
	{ v[$1, $2, $3, $4, $5, $6] = $7; ran[$1, $2] = 1 }
	function out(t, s, x, lim, le, note, bad) {	# bad: NOT met anyway
		if (x == "") { print t, s, "-", lim, "not measured", note; return }
		ok = (le ? x + 0 <= lim : x + 0 >= lim) && !bad
		print t, s, x, lim, (ok ? "met" : "NOT met"), note }
	function rtt(s,   a, b) {	# the worse node of the 2-node untar
		a = v["untar", s, "2nodes", "1", "locks:untar+sync",
			"remote_rtt_per_create"]
		b = v["untar", s, "2nodes", "2", "locks:untar+sync",
			"remote_rtt_per_create"]
		if (a == "" || (b != "" && b + 0 > a + 0)) a = b
		return a }
	function aged(s, op,   a, f) {	# aged / fresh, same size, setup aged
		a = v["dd", s, "aged", "1", "aged_" op, "MBps"]
		f = v["dd", s, "aged", "1", "fresh_" op, "MBps"]
		return (a != "" && f + 0 > 0) ? sprintf("%.3f", a / f) : "" }
	function aged_note(s,   n) {
		if (aged(s, "write") == "") return "not run (see skipped)"
		n = sprintf("%s%% full, %s; read %s", v["dd", s, "aged", "1",
			"age", "fill_pct"], agemb, aged(s, "read"))
		if (aged("ext4", "write") != "")
			n = n sprintf("; ext4 write %s read %s",
				aged("ext4", "write"), aged("ext4", "read"))
		return n }
	function two(sc, s, cl, ph, m,   k) {
		if ((sc, s, "2nodes", cl, ph, m) in v) { setup2 = "2 nodes"
			return v[sc, s, "2nodes", cl, ph, m] }
		setup2 = "2 clients on 1 node (nolock)"
		return v[sc, s, "2clients", cl, ph, m] }
	function scale(sc, s, cl1, cl2, ph, m, inv,   a, b) {
		a = two(sc, s, cl2, ph, m); b = v[sc, s, "1node", cl1, ph, m]
		if (a == "" || b == "" || b + 0 == 0) return ""
		return sprintf("%.3f", inv ? b / a : a / b) }
	END { n = split(ucfs, U, " ")
	for (i = 1; i <= n; i++) { s = U[i]
	if (("untar", s) in ran) {
	out("untar " files " files + sync + unmount, 1 node: x ext4", s,
		r["untar", s, "1node", "all", "untar+sync+umount", "real", "ext4"], 2.5, 1,
		"unmount included: FUSE syncfs does not reach the daemon")
	out("untar + sync (no unmount), 1 node: x ext4", s,
		r["untar", s, "1node", "all", "untar+sync", "real", "ext4"], 2.5, 1, "")
	out("untar + sync + unmount, 1 node: x passthrough_ll", s,
		r["untar", s, "1node", "all", "untar+sync+umount", "real", "pt"], 1, 1,
		"below 1 = faster")
	x = scale("untar", s, "all", "all", "untar+sync+umount", "real", 0)
	out("untar + sync + unmount 2 at once: / 1-node time", s, x, 1.3, 1, setup2)
	out("du -s on a fresh mount: x ext4", s,
		r["untar", s, "1node", "all", "du_cold", "real", "ext4"], 2, 1, "")
	x = scale("untar", s, "all", "all", "rm", "real", 0)
	dn = duother == 1 ? "; du read the other tree (--du-other)" : ""
	out("rm -rf 2 at once: / 1-node time", s, x, 1.3, 1, setup2 dn)
	if (index(dlm, " " s " ")) {	# issue 13: the locks cost little
	x = r["untar", s, "1node", "1", "cpu:untar+sync", "daemon_s", "ucfs"]
	note = "dlm / the nolock ucfs of this run"
	if (x != "") note = note "; daemon CPU over untar + sync x nolock " x
	l = v["untar", s, "1node", "all", "load:untar+sync", "load1"]
	m = v["untar", "ucfs", "1node", "all", "load:untar+sync", "load1"]
	if (l != "" && m != "") note = note "; load " l " / " m
	out("untar + sync + unmount, 1 node: x nolock", s,
		r["untar", s, "1node", "all", "untar+sync+umount", "real", "ucfs"],
		1.2, 1, note)
	out("du -s warm (again), 1 node: x nolock", s,
		r["untar", s, "1node", "all", "du_warm", "real", "ucfs"], 1.5, 1,
		"kernel caches kept under the locks")
	out("remote lock round trips per created file, 2 nodes", s, rtt(s),
		0.05, 1, "the worse node (stats.txt)")
	}
	}
	if (("dd", s) in ran) {
	out("dd write: share of raw O_DIRECT", s,
		r["dd", s, "1node", "1", "write", "MBps", "raw"], 0.5, 0, dd)
	out("dd read: share of raw O_DIRECT", s,
		r["dd", s, "1node", "1", "read", "MBps", "raw"], 0.5, 0, dd)
	out("dd write: x passthrough_ll", s,
		r["dd", s, "1node", "1", "write", "MBps", "pt"], 1.5, 0, dd)
	out("dd read: x passthrough_ll", s,
		r["dd", s, "1node", "1", "read", "MBps", "pt"], 1.5, 0, dd)
	a = two("dd", s, "all", "write", "MBps"); b = v["dd", s, "1node", "1", "write", "MBps"]
	x = (a != "" && b + 0 > 0) ? sprintf("%.3f", a / b) : ""
	out("2 writers, different files: aggregate / 1 node", s, x, 1, 0, setup2)
	out("aged fs write / fresh", s, aged(s, "write"), 0.8, 0,
		aged_note(s))
	}
	k = "append" SUBSEP s SUBSEP "2nodes" SUBSEP "all" SUBSEP "append"
	lost = v["append", s, "2nodes", "1", "check", "lost"] + \
		v["append", s, "2nodes", "2", "check", "lost"]
	if ((k SUBSEP "transfers_ps") in v)	# and nothing lost
	out("2 nodes O_APPEND + fsync, one file: lock transfers/s", s,
		v[k, "transfers_ps"], 1000, 0, "records/s " v[k, "records_ps"] \
		", lost " lost, lost > 0)
	k = "find" SUBSEP s SUBSEP "1node" SUBSEP "1" SUBSEP "find"
	if ((k SUBSEP "rss_mb") in v) {
	lim = v[k, "cache_mb"] + v[k, "glock_mb"] + 64
	out("find, " findn " files: peak RSS MB (cache_mb + glocks + 64)",
		s, v[k, "rss_mb"], lim, 1, "cache_mb " v[k, "cache_mb"] \
		", glocks " v[k, "glocks"] " of " v[k, "glock_max"] " in " \
		v[k, "glock_mb"] " MB")
	if (v[k, "locks_mb"] + 0 > 0) {
	lim = v[k, "cache_mb"] + v[k, "glock_mb"] + v[k, "locks_mb"] + 64
	out("find, " findn " files: peak RSS MB (cache_mb + glocks + lock manager + 64)",
		s, v[k, "rss_mb"], lim, 1, "lock manager " v[k, "locks_mb"] \
		" MB, pinned " v[k, "pinned"] ", kernel invalidations " \
		v[k, "kinval"])
	} } } }' "$OUT/ratios.tsv" "$OUT/results.tsv" >"$OUT/targets.tsv"
}

# The lens's targets (issue: faster than passthrough_ll on the untar steps,
# at least 70% of ext4 on sequential I/O), for the lens over the ext4 of
# the image when it ran; appended to targets.tsv.
make_lens_targets() {
	case " $RUN_SYSTEMS " in *" lens "*) ;; *) return 0 ;; esac
	awk -F'\t' -v OFS='\t' -v dd="${DD_MB:-?} MiB file" '
	$2 == "lens" { r[$1, $3, $4, $5, $6, $7] = $8; ran[$1] = 1 }
	function out(t, x, lim, le, note) {
		if (x == "") { print t, "lens", "-", lim, "not measured", note
			return }
		ok = le ? x + 0 <= lim : x + 0 >= lim
		print t, "lens", x, lim, (ok ? "met" : "NOT met"), note }
	END {
	if ("untar" in ran) {
	out("lens untar + sync + unmount: x passthrough_ll",
		r["untar", "1node", "all", "untar+sync+umount", "real", "pt"],
		1, 1, "below 1 = faster")
	out("lens du -s on a fresh mount: x passthrough_ll",
		r["untar", "1node", "all", "du_cold", "real", "pt"], 1, 1, "")
	out("lens rm -rf: x passthrough_ll",
		r["untar", "1node", "all", "rm", "real", "pt"], 1, 1, "") }
	if ("dd" in ran) {
	out("lens dd write: share of ext4",
		r["dd", "1node", "1", "write", "MBps", "ext4"], 0.7, 0, dd)
	out("lens dd read: share of ext4",
		r["dd", "1node", "1", "read", "MBps", "ext4"], 0.7, 0, dd) } }' \
		"$OUT/ratios.tsv" >>"$OUT/targets.tsv"
}

report_targets() {
	[ -s "$OUT/targets.tsv" ] || return 0
	say ""
	say "DESIGN.md targets (this run):"
	awk -F'\t' '{ printf "  %-52s %-9s %8s  (limit %s) %-12s %s\n",
		$1, $2, $3, $4, $5, $6 }' "$OUT/targets.tsv"
}

# ---- JSON and plots ----------------------------------------------------------

tsv_json() {	# FILE KEYS... — an array of objects; numeric-looking values
	_f=$1; shift	# become numbers, "-" becomes null
	if [ ! -s "$_f" ]; then printf '[]'; return; fi
	jq -R -s --arg keys "$*" '($keys | split(" ")) as $k |
		split("\n") | map(select(length > 0) | split("\t") |
		[range(0; $k | length) as $i | {key: $k[$i], value: (.[$i] |
		if . == "-" then null else (tonumber? // .) end)}] |
		from_entries)' "$_f"
}

write_json() {
	_mem=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
	_sys=$(for _s in $RUN_SYSTEMS; do
		printf '%s\t%s\t%s\t%s\n' "$_s" "$(attr K "$_s")" \
			"$(attr D "$_s")" "$(attr O "$_s")"; done)
	_stats=$(ls "$OUT"/stats/*.json 2>/dev/null)
	printf '%s\n' "$_sys" >"$WORK/systems.tsv"
	tsv_json "$WORK/systems.tsv" name kind description options \
		>"$WORK/j.systems"
	tsv_json "$OUT/results.tsv" scenario system setup client phase \
		metric value unit >"$WORK/j.results"
	tsv_json "$OUT/runs.tsv" scenario system setup client phase \
		metric value unit rep >"$WORK/j.runs"
	tsv_json "$OUT/ratios.tsv" scenario system setup client phase \
		metric baseline ratio >"$WORK/j.ratios"
	tsv_json "$OUT/targets.tsv" target system value limit verdict \
		note >"$WORK/j.targets"
	tsv_json "$OUT/skipped.tsv" scenario system what reason \
		>"$WORK/j.skipped"
	tsv_json "$OUT/lens.tsv" scenario system phase wall_s fuse_ops \
		handler_s lower_s resolve_s reply_s lens_s outside_s \
		lower_calls top_ops rep >"$WORK/j.lens"
	ls "$OUT"/plots/*.svg "$OUT"/plots/*.png 2>/dev/null | jq -R . |
		jq -s . >"$WORK/j.plots"
	jq -n --arg scen "$SCEN_ARG" --argjson quick "$QUICK" \
		--arg started "$STARTED" --arg finished "$(date -u +%FT%TZ)" \
		--argjson cpus "$(nproc)" --argjson mem "$_mem" \
		--arg kernel "$(uname -r)" --argjson size "$SIZE_MB" \
		--arg ktar "${KTAR:-}" --arg kfiles "${KFILES:-}" \
		--arg opts "$UOPTS" --arg cluster "${CLUSTER:-not probed}" \
		--argjson repeat "$REPEAT" --slurpfile runs "$WORK/j.runs" \
		--slurpfile systems "$WORK/j.systems" \
		--slurpfile results "$WORK/j.results" \
		--slurpfile ratios "$WORK/j.ratios" \
		--slurpfile targets "$WORK/j.targets" \
		--slurpfile skipped "$WORK/j.skipped" \
		--slurpfile lens "$WORK/j.lens" \
		--slurpfile plots "$WORK/j.plots" \
		'
	{tool: "ucfs-bench", version: 1, scenario: $scen, quick: ($quick == 1),
	 started: $started, finished: $finished,
	 host: {cpus: $cpus, mem_mb: $mem, kernel: $kernel},
	 params: {image_mb: $size, untar_tar: $ktar,
		  untar_files: ($kfiles | tonumber? // null),
		  ucfs_options: $opts, cluster_mode: $cluster,
		  repeat: $repeat},
	 systems: $systems[0], results: $results[0], runs: $runs[0],
	 ratios: $ratios[0], targets: $targets[0], skipped: $skipped[0],
	 lens_steps: $lens[0],
	 ucfs_stats: [], plots: $plots[0]}' >"$OUT/results.json.part" ||
		die "writing JSON failed"
	# Stats deltas are files of their own; gather them in a second pass.
	if [ -n "$_stats" ]; then
		# shellcheck disable=SC2086
		jq -s '.[0] + {ucfs_stats: .[1:]}' "$OUT/results.json.part" \
			$_stats >"$OUT/results.json" || die "writing JSON failed"
		rm -f "$OUT/results.json.part"
	else
		mv "$OUT/results.json.part" "$OUT/results.json"
	fi
}

# plot_bars NAME TITLE YLABEL SPEC — clustered bars, one bar per system;
# SPEC is "label=scenario:phase:metric:setupclass:client ..." with
# setupclass 1 (1node), 2 (2nodes or 2clients) or m (mounted2).
plot_bars() {
	_dat=$OUT/plots/$1.dat
	awk -F'\t' -v spec="$4" -v systems="$RUN_SYSTEMS" '
	BEGIN { nc = split(spec, S, " "); ns = split(systems, Y, " ") }
	function cls(s) {
		if (s == "1node") return "1"
		if (s == "mounted2") return "m"
		return "2" }
	{ val[$1, $5, $6, cls($3), $4, $2] = $7 }
	END { line = "category"
		for (j = 1; j <= ns; j++) line = line "\t" Y[j]
		print line
		for (i = 1; i <= nc; i++) { split(S[i], lp, "=")
			split(lp[2], p, ":"); line = lp[1]; any = 0
			for (j = 1; j <= ns; j++) {
				x = val[p[1], p[2], p[3], p[4], p[5], Y[j]]
				if (x == "" || x == "-") x = "-"; else any = 1
				line = line "\t" x }
			if (any) print line } }' "$OUT/results.tsv" >"$_dat"
	[ "$(wc -l <"$_dat")" -gt 1 ] || { rm -f "$_dat"; return 0; }
	_n=$(( $(echo $RUN_SYSTEMS | wc -w) + 1 ))
	for _t in svg png; do
		case $_t in
		svg) _term="svg size 900,500 dynamic noenhanced" ;;
		png) _term="pngcairo size 900,500 noenhanced" ;;
		esac
		gnuplot >>"$WORK/log/gnuplot.log" 2>&1 <<GP ||
set terminal $_term
set output '$OUT/plots/$1.$_t'
set title "$2"
set ylabel "$3"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set datafile separator "\t"
set datafile missing "-"
set key outside right top
set xtics rotate by -25
set yrange [0:*]
set grid ytics
plot for [i=2:$_n] '$_dat' using i:xtic(1) title columnheader(i)
GP
		warn "gnuplot failed for $1 ($_t): see $WORK/log/gnuplot.log"
	done
}

make_plots() {	# SCEN
	[ "$PLOTS" = 1 ] || return 0
	command -v gnuplot >/dev/null 2>&1 ||
		{ warn "gnuplot missing: no plots (apt-get install gnuplot-nox)"
		  return 0; }
	mkdir -p "$OUT/plots"
	case $1 in
	untar) _sp=""
		for _p in untar+sync untar+sync+umount du_cold du_warm rm; do
			_sp="$_sp $_p,1-node=untar:$_p:real:1:all"
			_sp="$_sp $_p,2-at-once=untar:$_p:real:2:all"
		done
		plot_bars untar "untar, du -s, rm -rf of $KFILES files (lower is better)" \
			"seconds" "$_sp" ;;
	bonnie)
		plot_bars bonnie-io "bonnie++ sequential I/O (higher is better)" \
			"K/sec" "putc=bonnie:bonnie:putc_kbs:1:1
			block-out=bonnie:bonnie:block_out_kbs:1:1
			rewrite=bonnie:bonnie:rewrite_kbs:1:1
			getc=bonnie:bonnie:getc_kbs:1:1
			block-in=bonnie:bonnie:block_in_kbs:1:1"
		plot_bars bonnie-files \
			"bonnie++ file create/read/delete (higher is better)" \
			"files/sec" "seq-create=bonnie:bonnie:seq_create_ps:1:1
			seq-read=bonnie:bonnie:seq_read_ps:1:1
			seq-delete=bonnie:bonnie:seq_delete_ps:1:1
			ran-create=bonnie:bonnie:ran_create_ps:1:1
			ran-read=bonnie:bonnie:ran_read_ps:1:1
			ran-delete=bonnie:bonnie:ran_delete_ps:1:1" ;;
	iozone)
		for _op in $IOZ_OPS; do _sp=""
			for _r in $IOZ_RECS; do
				_sp="$_sp $_r=iozone:$_op:kbs@$_r:1:1"
			done
			plot_bars "iozone-$_op" "iozone (fio) $_op, 1 client (higher is better)" \
				"KB/sec" "$_sp"
		done ;;
	fileben)
		plot_bars fileben "fileben 128K x10 (higher is better)" "KB/sec" \
			"write=fileben:write:total_kbs:1:1
			read=fileben:read:total_kbs:1:1"
		plot_bars db "db directory operations (higher is better)" \
			"dir/sec" "mkdir=fileben:db:mkdir_ps:1:1
			rmdir=fileben:db:rmdir_ps:1:1
			mkdir2=fileben:db:mkdir2_ps:1:1
			mvdir=fileben:db:mvdir_ps:1:1" ;;
	dd)
		plot_bars dd "dd sequential (higher is better)" "MB/sec" "
			write,1-node=dd:write:MBps:1:1
			read,1-node=dd:read:MBps:1:1
			write,2-at-once,total=dd:write:MBps:2:all
			read,2-at-once,total=dd:read:MBps:2:all" ;;
	esac
}

# ---- main ----------------------------------------------------------------------

cleanup() {
	trap - EXIT INT TERM
	for _m in $MOUNTED; do
		_s=${_m%.*} _n=${_m##*.}
		case $_s in
		pt) stop_fuse "$(mp pt 1)" "${PID_pt:-0}"
		    umount "$(mp pt lower)" 2>/dev/null ;;
		ext4) umount "$(mp ext4 1)" 2>/dev/null ;;
		*) stop_fuse "$(mp "$_s" "$_n")" "$(attr PID "${_s}_$_n")"
		   [ "$(attr K "$_s")" = lens ] && [ -z "$(attr X "$_s")" ] &&
			umount "$(mp "$_s" lower)" 2>/dev/null ;;
		esac
	done
	for _p in $PIDS; do kill "$_p" 2>/dev/null; done
	loop_down 2>/dev/null
	for _s in $SYSTEMS; do
		[ "$(attr K "$_s")" = dir ] &&
			rm -rf "$(attr X "$_s")/ucfs-bench.$$"
		[ "$(attr K "$_s")" = lens ] && [ -n "$(attr X "$_s")" ] &&
			rm -rf "$(lens_lower "$_s")"
	done
	if [ "$KEEP" = 1 ]; then warn "scratch kept in $WORK"
	else rm -rf "$WORK"; fi
}

# define_systems — the systems of this run, in the order they run.
define_systems() {
	UCFS_SYSTEMS=""
	if [ -n "$UCFS" ] && [ -n "$MKFS" ]; then
		for _lp in $LOCKPROTOS; do
			_n=ucfs; [ "$_lp" = dlm ] && _n=ucfs_dlm
			add_system "$_n" ucfs "ucfs 1 node, lockproto=$_lp" \
				"lockproto=$_lp${UOPTS:+,$UOPTS}" "$_lp"
			UCFS_SYSTEMS="$UCFS_SYSTEMS $_n"
		done
		for _v in $VARIANTS; do
			_n=${_v%%=*}
			add_system "$_n" ucfs "ucfs, ${_v#*=}" \
				"lockproto=nolock,${_v#*=}${UOPTS:+,$UOPTS}" nolock
			UCFS_SYSTEMS="$UCFS_SYSTEMS $_n"
		done
	else
		NO_UCFS="skipped: ucfs is not built yet (no ucfs and mkfs.ucfs in $BIN or PATH)"
	fi
	add_system raw raw "the image file, dd with O_DIRECT"
	add_system ext4 ext4 "ext4 on a loop device of the image"
	add_system pt pt "libfuse passthrough_ll over that ext4"
	LENS_SYSTEMS=""
	if [ -n "$UCFS" ]; then
		add_system lens lens "the ucfs lens (-o passthrough) over that ext4"
		LENS_SYSTEMS=lens
	fi
	_i=0
	for _d in $DIRS; do
		_i=$((_i + 1))
		_n=dir; [ "$_i" -gt 1 ] && _n=dir$_i
		case $_d in *=*) _n=${_d%%=*}; _d=${_d#*=} ;; esac
		[ -d "$_d" ] || die "--dir $_d: not a directory"
		_d=$(cd "$_d" && pwd)
		add_system "$_n" dir "directory $_d" "$_d"
		[ -n "$UCFS" ] && add_system "${_n}_lens" lens \
			"the ucfs lens over directory $_d" "$_d"
	done
	BASELINES="raw ext4 pt"
	for _s in $SYSTEMS; do
		[ "$(attr K "$_s")" = dir ] && BASELINES="$BASELINES $_s"
	done
	RUN_SYSTEMS=""
	for _s in $SYSTEMS; do
		if [ -n "$SYSFILTER" ]; then
			case ",$SYSFILTER," in *",$_s,"*) ;; *) continue ;; esac
		fi
		RUN_SYSTEMS="$RUN_SYSTEMS $_s"
	done
	case " $RUN_SYSTEMS " in *" pt "*) pt_build ;; esac
	_nu=0
	for _s in $UCFS_SYSTEMS; do
		case " $RUN_SYSTEMS " in *" $_s "*) _nu=$((_nu + 1)) ;; esac
	done
	case " $RUN_SYSTEMS " in
	*" ucfs "*) [ "$_nu" -gt 1 ] && BASELINES="$BASELINES ucfs" ;;
	esac
}

run_scenario() {	# SCEN
	SCEN=$1
	say ""
	say "==== $SCEN ($(scen_source "$1")) ===="
	[ -n "${NO_UCFS:-}" ] && skipped ucfs all "$NO_UCFS"
	REP=1	# repetitions interleave the systems: load drifts hit all
	while [ "$REP" -le "$REPEAT" ]; do
		[ "$REPEAT" -gt 1 ] && progress "$SCEN: repetition $REP of $REPEAT"
		"sc_$1"
		REP=$((REP + 1))
	done
	collapse_runs "$1"
	make_ratios
	say ""
	report_tables "$1" | tee -a "$OUT/tables.txt"
	make_plots "$1"
}

scen_source() {
	case $1 in
	untar) echo "seeds/000: untar, sync, du -s first mount and again, rm -rf" ;;
	bonnie) echo "seeds/001: bonnie++ with the fs mounted on 2 nodes" ;;
	iozone) echo "seeds/002: iozone -i0 -i1 -i2 record sizes 64K..16M, via fio" ;;
	fileben) echo "seeds/003: fileben 128K x10 and db dir ops, 2 nodes mounted" ;;
	dd) echo "seeds/004: dd sequential, 1 node and 2 at once, vs raw device" ;;
	append) echo "issue 13: 2 writers O_APPEND + fsync on one file: lock transfers" ;;
	find) echo "issue 13: find over a huge tree: the daemon's peak RSS" ;;
	esac
}

main() {
	[ $# -ge 1 ] || { usage; exit 2; }
	if [ "$1" = parse ]; then
		[ $# -eq 3 ] || { usage; exit 2; }
		case $2 in
		time|dd|fio|bonnie|fileben|db) "parse_$2" "$3"; exit ;;
		*) die "parse: unknown kind $2" ;;
		esac
	fi
	SCEN_ARG=$1; shift
	case $SCEN_ARG in
	untar|bonnie|iozone|fileben|dd|append|find) SCENS=$SCEN_ARG ;;
	all) SCENS="untar bonnie iozone fileben dd" ;;
	-h|--help) usage; exit 0 ;;
	*) usage; exit 2 ;;
	esac
	while [ $# -gt 0 ]; do
		case $1 in
		--quick) QUICK=1 ;;
		--repeat) REPEAT=${2:?}; shift
			case $REPEAT in ""|*[!0-9]*|0) die "--repeat wants N >= 1" ;; esac ;;
		--full-tree) FULLTREE=1 ;;
		--du-other) DU_OTHER=1 ;;
		-o) UOPTS="${UOPTS:+$UOPTS,}${2:?-o needs options}"; shift ;;
		--lockproto) LOCKPROTOS=$(echo "${2:?}" | tr ',' ' '); shift ;;
		--variant) VARIANTS="$VARIANTS ${2:?}"; shift ;;
		--dir) DIRS="$DIRS ${2:?}"; shift ;;
		--systems) SYSFILTER=${2:?}; shift ;;
		--setups) SETUPFILTER=$(echo "${2:?}" | tr ',' ' '); shift ;;
		--size) SIZE_MB=${2:?}; shift ;;
		--file-mb) FILE_MB=${2:?}; shift ;;
		--files) FIND_N=${2:?}; shift
			case $FIND_N in *[!0-9]*|0) die "--files wants N >= 1" ;; esac ;;
		--records) RECS=$(echo "${2:?}" | tr ',' ' '); shift ;;
		--mkfs-opts) MKFS_OPTS=${2:?}; shift ;;
		--cluster) CLUSTER_FILE=$(realpath "${2:?}") ||
			die "--cluster $2: no such file"; shift ;;
		--out) OUT=${2:?}; shift ;;
		--work) WORK=${2:?}; shift ;;
		--cache) CACHE=${2:?}; shift ;;
		--no-install) INSTALL=0 ;;
		--no-plots) PLOTS=0 ;;
		--keep) KEEP=1 ;;
		--fill) FILL=1 ;;
		--sparse) FILL=0 ;;
		-h|--help) usage; exit 0 ;;
		*) usage; die "unknown option $1" ;;
		esac
		shift
	done
	case $SIZE_MB in
	"") SIZE_MB=12288; [ "$QUICK" = 1 ] && SIZE_MB=1024 ;;
	*[!0-9]*) die "--size wants MB" ;;
	esac
	case $FILE_MB in *[!0-9]*) die "--file-mb wants MB" ;; esac
	check_common
	STARTED=$(date -u +%FT%TZ)
	: "${OUT:=ucfs-bench-out/$SCEN_ARG-$(date +%Y%m%d-%H%M%S)}"
	mkdir -p "$OUT" || die "cannot create $OUT"
	OUT=$(cd "$OUT" && pwd)
	: >"$OUT/results.tsv"; : >"$OUT/runs.tsv"; : >"$OUT/skipped.tsv"
	: >"$OUT/tables.txt"; : >"$OUT/stats.txt"; : >"$OUT/lens.tsv"
	# Our own directory even under --work: cleanup removes only it.
	[ -n "$WORK" ] && { mkdir -p "$WORK" || die "cannot create $WORK"; }
	WORK=$(mktemp -d "${WORK:-/tmp}/ucfs-bench.XXXXXX") ||
		die "cannot create a scratch directory"
	trap cleanup EXIT
	trap 'exit 130' INT TERM
	mkdir -p "$WORK/log" "$WORK/mnt"
	IMG=$WORK/disk.img
	make_image
	define_systems
	say "ucfs-bench $SCEN_ARG: systems:$RUN_SYSTEMS; image ${SIZE_MB} MiB;" \
		"$(nproc) CPUs; results in $OUT"
	for _sc in $SCENS; do run_scenario "$_sc"; done
	make_targets
	make_lens_targets
	report_targets | tee -a "$OUT/tables.txt"
	write_json
	say ""
	say "results: $OUT/results.json, tables: $OUT/tables.txt," \
		"plots: $OUT/plots/"
}

# The scratch image: written full of zeros (the default), so that no
# run's write lands in a hole of the host file: in a hole, the host
# filesystem allocates, and every later fdatasync of the image commits
# the host's journal too (a cost a disk does not have); with --sparse,
# truncated (image_reset punches it back before every system).
make_image() {
	if [ "$FILL" = 1 ]; then
		progress "writing the ${SIZE_MB} MiB image full of zeros (--sparse: none)"
		dd if=/dev/zero of="$IMG" bs=1M count="$SIZE_MB" conv=fsync \
			status=none || die "cannot fill $IMG"
	else
		truncate -s "${SIZE_MB}M" "$IMG" || die "cannot create $IMG"
	fi
}

# UCFS_BENCH_LIB=1: define the functions only (tests source this file).
[ "${UCFS_BENCH_LIB:-}" = 1 ] || main "$@"
