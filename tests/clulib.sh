# tests/clulib.sh — helpers for cluster (lockproto=dlm) integration tests
# (POSIX sh). Source it after tests/lib.sh and tests/fslib.sh.
#
#   clu_require NAME [CMD...]  the preamble: SKIP NAME and exit 0 unless
#                              the target is ucfs (fs_require_ucfs) and
#                              every CMD is installed ("CMD missing")
#   clu_config FILE NODES...   write a cluster configuration through
#                              ucfs-mkcluster listing node ids NODES,
#                              each on 127.0.0.<id>, all on one fresh TCP
#                              port CLU_PORT (from the shell's PID,
#                              reserved among these tests and the lk_
#                              ones: a directory in /tmp/ucfs-clu-ports,
#                              removed on exit); cluster "clu"
#                              ($CLU_NAME), secret $T/clu.secret shared
#                              by every file of the test ($CLU_SECRET:
#                              another, made if missing), heartbeat
#                              100 ms ($CLU_HEARTBEAT_MS), timeout
#                              2500 ms ($CLU_TIMEOUT_MS); $CLU_TWO_NODE=1:
#                              two-node mode
#   clu_witness FILE ID        start a quorum witness (ucfs-witness: a
#                              lockspace-only member that only adds its
#                              vote); stopped by PID on exit
#   clu_opts FILE ID [MORE]    prints the mount options of node ID
#   clu_setup NAME N MB [MKFS_ARGS...]
#                              a cluster of N filesystem nodes (ids 1..N)
#                              and N-1 witnesses (ids N+1..2N-1, started:
#                              any one node may go, and the others, the
#                              last one included, still unmount cleanly);
#                              sets CFG=$T/cluster.json, IMG=$T/img (made:
#                              MB MiB, mkfs.ucfs -J 8 -p dlm -t clu:fs1
#                              MKFS_ARGS, e.g. -j 2 -r 64) and M1..MN
#                              ($T/m1..); FAIL NAME_mkfs and exit if mkfs
#                              fails
#   clu_mount NAME ID [MORE]   mount node ID (options MORE) on $T/mID;
#                              FAIL NAME_mID and exit if it fails
#   clu_two_nodes NAME MB [MKFS_ARGS...]
#                              the usual set-up: clu_setup NAME 2 MB ...,
#                              then nodes 1 and 2 mounted on M1 and M2
#   clu_at_once NAME CMD1 CMD2 runs the shell commands CMD1 and CMD2 (each
#                              eval'd in a subshell: the test's functions
#                              work) at the same time: PASS NAME if both
#                              exit 0, else FAIL NAME with their output
#   clu_refused NAME PATTERN IMAGE OPTS
#                              runs the daemon in the foreground on IMAGE
#                              with OPTS: PASS NAME if it exits != 0 with
#                              PATTERN (grep) in its output ($T/bad.log)
#                              and leaves no mount
#   clu_stat MNT [FILTER]      the stats document of the node mounted on
#                              MNT (ucfs-stat --json), or with a jq
#                              FILTER its value (raw, jq -r)
#   clu_stat_ge MNT FILTER N   true if FILTER's value on MNT is a number
#                              >= N; reads the stats afresh at each call,
#                              so "check NAME wait_for S clu_stat_ge ..."
#                              waits until it holds or S seconds passed
#   clu_tree DIR NDIRS NFILES [big]
#                              makes DIR/d0..: NDIRS directories of NFILES
#                              small files f0..; with "big" also a file
#                              "big" of d * 20000 + 1 random bytes in
#                              directory d
#
# Quorum: the lock manager counts a strict majority of the CONFIGURED
# nodes, including nodes that left cleanly, so the last filesystem node
# of a cluster can unmount cleanly only while a quorum is up. The tests
# configure witnesses (as a cluster would use a quorum device) so that
# every filesystem node, the last one included, leaves cleanly.

# 20000-31999: below Linux's default ephemeral range (32768-60999), from
# which any outgoing connection (a node's own, to another node) takes its
# local port: a listener asked for there later can find it taken.
CLU_PORT=$((20000 + ($$ + 11) % 12000))
CLU_PORT_HELD=""

# Reserve CLU_PORT among the tests using this file (a directory per
# port, made atomically, removed on exit): two scripts whose PIDs are
# 12,000 apart would otherwise listen on the same port, and one of them
# finds it in use (or, between its mounts, the other's node on it).
clu_port_reserve() {
	[ -n "$CLU_PORT_HELD" ] && return 0
	mkdir -p /tmp/ucfs-clu-ports 2>/dev/null
	_cpr_n=0 # (shell variables are global: clu_setup has an _n)
	while ! mkdir "/tmp/ucfs-clu-ports/$CLU_PORT" 2>/dev/null; do
		CLU_PORT=$((20000 + (CLU_PORT - 20000 + 1) % 12000))
		_cpr_n=$((_cpr_n + 1))
		[ $_cpr_n -gt 1000 ] && return 0
	done
	CLU_PORT_HELD=$CLU_PORT
	on_exit "rmdir /tmp/ucfs-clu-ports/$CLU_PORT"
}

clu_require() {
	_crq=$1
	shift
	fs_require_ucfs "$_crq"
	for _c in "$@"; do
		if ! command -v "$_c" >/dev/null 2>&1; then
			skip "$_crq" "$_c missing"
			exit 0
		fi
	done
}

clu_config() {
	_f=$1; shift
	clu_port_reserve
	"$B/ucfs-mkcluster" -o "$_f" -s "${CLU_SECRET:-$T/clu.secret}" \
		-c "${CLU_NAME:-clu}" -a -p "$CLU_PORT" \
		-b "${CLU_HEARTBEAT_MS:-100}" -t "${CLU_TIMEOUT_MS:-2500}" \
		-w "${CLU_TWO_NODE:-0}" -i "$(echo "$@" | tr ' ' ',')" >/dev/null
}

clu_witness() {
	"$B/ucfs-witness" "$1" "$2" >"$T/witness$2.log" 2>&1 &
	CLU_WITNESS_PID=$!
	on_exit "kill $! 2>/dev/null"
}

clu_opts() {
	echo "lockproto=dlm,cluster=$1,node=$2${3:+,$3}"
}

clu_setup() {
	_name=$1 _n=$2 _mb=$3
	shift 3
	CFG=$T/cluster.json IMG=$T/img
	_ids="" _i=1
	while [ $_i -lt $((2 * _n)) ]; do
		_ids="$_ids $_i"
		if [ $_i -le $_n ]; then eval "M$_i=\$T/m$_i"; fi
		_i=$((_i + 1))
	done
	clu_config "$CFG" $_ids
	_i=$((_n + 1))
	while [ $_i -lt $((2 * _n)) ]; do
		clu_witness "$CFG" $_i
		_i=$((_i + 1))
	done
	fs_mkfs "$IMG" "$_mb" -J 8 -p dlm -t clu:fs1 "$@" || {
		fail "${_name}_mkfs"
		exit 1
	}
}

clu_mount() {
	fs_mount "$IMG" "$T/m$2" "$(clu_opts "$CFG" "$2" "${3:-}")" || {
		fail "${1}_m$2"
		exit 1
	}
}

clu_two_nodes() {
	_name=$1
	shift
	clu_setup "$_name" 2 "$@"
	clu_mount "$_name" 1
	clu_mount "$_name" 2
}

clu_at_once() {
	(eval "$2") >"$T/$1.1.out" 2>&1 &
	_cao1=$!
	(eval "$3") >"$T/$1.2.out" 2>&1 &
	_cao2=$!
	wait $_cao1
	_car1=$?
	wait $_cao2
	_car2=$?
	if [ $_car1 -eq 0 ] && [ $_car2 -eq 0 ]; then
		pass "$1"
	else
		fail "$1" "exit $_car1 + $_car2: $(cat "$T/$1.1.out" "$T/$1.2.out")"
	fi
}

clu_refused() {
	mkdir -p "$T/bad"
	if timeout -k 5 60 "$B/ucfs" -f -o "$4" "$3" "$T/bad" \
		>"$T/bad.log" 2>&1; then
		fail "$1" "mounted"
		fusermount3 -u "$T/bad"
	elif ! grep -q "$2" "$T/bad.log"; then
		fail "$1" "message: $(cat "$T/bad.log")"
	elif _fs_mounted "$T/bad"; then
		fail "$1" "left a mount"
	else
		pass "$1"
	fi
}

# A descriptor held across a fence: open FILE (MODE ro or rw) and read it
# (its pages and attributes are now in this node's kernel), create
# OPENED, wait for GO to exist, then try fstat, pread and (rw) pwrite
# through it and write what each gave to RESULT, space separated ("got
# VALUE" or "errno N"). Runs in the background: $FD_PROBE is its PID.
# Usage: clu_fd_probe MODE FILE OPENED GO RESULT
clu_fd_probe() {
	python3 -c "
import os, sys, time
rw = sys.argv[1] == 'rw'
fd = os.open(sys.argv[2], os.O_RDWR if rw else os.O_RDONLY)
os.pread(fd, 4096, 0)
open(sys.argv[3], 'w').close()
while not os.path.exists(sys.argv[4]):
    time.sleep(0.1)
tries = [lambda: os.fstat(fd).st_size, lambda: os.pread(fd, 4096, 0)]
if rw:
    tries.append(lambda: os.pwrite(fd, b'late', 0))
r = []
for f in tries:
    try:
        r.append('got %r' % (f(),))
    except OSError as e:
        r.append('errno %d' % e.errno)
open(sys.argv[5], 'w').write(' '.join(r))
" "$@" &
	FD_PROBE=$!
	on_exit "kill $FD_PROBE 2>/dev/null"
}

clu_stat() {
	if [ $# -ge 2 ]; then
		"$B/ucfs-stat" --json "$1" | jq -r "$2"
	else
		"$B/ucfs-stat" --json "$1"
	fi
}

clu_stat_ge() {
	_csg=$(clu_stat "$1" "$2" 2>/dev/null) &&
		[ "$_csg" -ge "$3" ] 2>/dev/null
}

clu_tree() {
	mkdir -p "$1" || return 1
	_d=0
	while [ $_d -lt "$2" ]; do
		mkdir "$1/d$_d" || return 1
		_f=0
		while [ $_f -lt "$3" ]; do
			echo "file $_d/$_f" >"$1/d$_d/f$_f" || return 1
			_f=$((_f + 1))
		done
		if [ "${4:-}" = big ]; then
			head -c $((_d * 20000 + 1)) /dev/urandom >"$1/d$_d/big" ||
				return 1
		fi
		_d=$((_d + 1))
	done
}

# clu_flog_end NAME DATA MNT: the end of a test whose clu_flog_pending
# frees and clu_orphan orphan (named "o") a recovery took over, MNT the
# node left: DATA passes if the truncates were kept (k0 and k1 empty, k2
# whole in MNT/$FLOG_K) and the orphan is gone; then NAME_umount of MNT
# and fsck.ucfs -n of $IMG (printed): NAME_fsck clean, NAME_no_flog_left
# (no block in a free log), NAME_no_orphan; $IMG is removed.
clu_flog_end() {
	check "$2" test ! -s "$3/$FLOG_K/k0" -a ! -s "$3/$FLOG_K/k1" \
		-a ! -e "$3/o" -a "$(stat -c %s "$3/$FLOG_K/k2")" -eq 65536
	check "${1}_umount" fs_umount "$3"
	"$B/fsck.ucfs" -n "$IMG" >"$T/fsck.log" 2>&1
	_cfe=$?
	cat "$T/fsck.log"
	check "${1}_fsck" test "$_cfe" -eq 0
	check "${1}_no_flog_left" sh -c "! grep -q 'in free logs' '$T/fsck.log'"
	check "${1}_no_orphan" grep -q ' 0 orphans;' "$T/fsck.log"
	rm -f "$IMG"
}

# clu_orphan NAME FILE: a process opens FILE, unlinks it, fsyncs and keeps
# it open, so that FILE's inode is an orphan of its node's slot; HOLDER is
# its pid (killed at exit). Checks NAME_unlinked.
clu_orphan() {
	python3 - "$2" "$T/held.$1" <<'PY' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
os.unlink(sys.argv[1])
os.fsync(fd)
open(sys.argv[2], "w").close()
time.sleep(600)
PY
	HOLDER=$!
	on_exit "kill $HOLDER 2>/dev/null"
	check "${1}_unlinked" wait_for 30 test -f "$T/held.$1"
}

# clu_flog_pending NAME MA MB: MB frees blocks of files MA wrote, in MA's
# resource groups, so that MB logs the frees in its free log (fs_flog.c)
# instead of its bitmaps; a round in which MA happened not to hold those
# groups (a busy machine: the frees went straight to the bitmap) is done
# again, up to 5 rounds. PENDING is MB's free log's blocks not yet
# applied at the end (0 if no round logged any), FLOG_K the last round's
# directory (under both mounts).
clu_flog_pending() {
	_cfr=0
	while :; do
		FLOG_K=k$_cfr
		mkdir "$2/$FLOG_K"
		for _cfi in 0 1 2; do
			head -c 65536 /dev/urandom >"$2/$FLOG_K/k$_cfi"
		done
		python3 -c "import os; os.fsync(os.open('$2/$FLOG_K/k2', os.O_RDONLY))"
		python3 - "$3/$FLOG_K" <<'PY' || fail "${1}_truncates"
import os, sys
for n in ("k0", "k1"):
    fd = os.open(os.path.join(sys.argv[1], n), os.O_WRONLY | os.O_TRUNC)
    os.fsync(fd)
    os.close(fd)
PY
		PENDING=$(clu_stat "$3" \
			'.alloc.flog_logged - .alloc.flog_applied')
		[ "${PENDING:-0}" -gt 0 ] || [ $_cfr -ge 4 ] && break
		_cfr=$((_cfr + 1))
	done
	PENDING=${PENDING:-0}
	echo "${1}: free log of $3: $PENDING blocks pending (round $_cfr)"
}

# An NBD server (nbdkit, file plugin) exporting $IMG on $SOCK without
# multi-conn: a node mounting $URI has a flush that does not cover the
# image file's other users (FORMAT.md "Journal": no checkpoint records
# while it is mounted). With LOGFILE, nbdkit's log filter writes every
# request there. Sets SOCK, URI and SRV (killed on exit); checks
# NAME_nbd_server. Usage: clu_nbd_nomc NAME [LOGFILE]
clu_nbd_nomc() {
	SOCK=$T/nbd.sock
	URI="nbd+unix:///?socket=$SOCK&io_timeout=10"
	if [ -n "${2:-}" ]; then
		nbdkit -f -U "$SOCK" --filter=log --filter=multi-conn \
			file "$IMG" multi-conn-mode=disable logfile="$2" \
			>"$T/nbdkit.log" 2>&1 &
	else
		nbdkit -f -U "$SOCK" --filter=multi-conn file "$IMG" \
			multi-conn-mode=disable >"$T/nbdkit.log" 2>&1 &
	fi
	SRV=$!
	on_exit "kill $SRV 2>/dev/null"
	check "${1}_nbd_server" wait_for 10 test -S "$SOCK"
}
