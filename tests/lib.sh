# tests/lib.sh — shared by tests/integration/*.sh (POSIX sh; source it).
#
# Gives: pass NAME, fail NAME [why], skip NAME why, check NAME CMD...,
# wait_for SECONDS CMD..., stopped PID,
# a scratch dir $T removed on exit, and cleanup hooks that always run:
# on_exit "CMD" registers a command (run last-registered first), so every
# mount is unmounted and every daemon started is stopped by PID even when a
# test fails or times out.
#
# Environment (set by tests/run.sh): UCFS_BUILD (absolute build dir),
# UCFS_TOP (source tree).
set -u
: "${UCFS_BUILD:?run through tests/run.sh}"
: "${UCFS_TOP:?run through tests/run.sh}"
B=$UCFS_BUILD
T=$(mktemp -d /tmp/ucfs-test.XXXXXX)
_ucfs_exit_cmds=""
_ucfs_failed=0

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1${2:+: $2}"; _ucfs_failed=1; }
skip() { echo "SKIP $1: $2"; }

# check NAME CMD... — PASS if CMD exits 0, FAIL (with its output) if not.
check() {
	_n=$1; shift
	if _out=$("$@" 2>&1); then
		pass "$_n"
	else
		fail "$_n" "$*"
		printf '%s\n' "$_out" | tail -n 20 | sed 's/^/    /'
	fi
}

on_exit() { _ucfs_exit_cmds="$1
$_ucfs_exit_cmds"; }

_ucfs_cleanup() {
	printf '%s\n' "$_ucfs_exit_cmds" | while IFS= read -r c; do
		[ -n "$c" ] && eval "$c" >/dev/null 2>&1
	done
	rm -rf "$T"
}
trap _ucfs_cleanup EXIT
trap 'exit 130' INT TERM

# stopped PID — every thread of process PID is stopped (state T). A
# SIGSTOP is taken by one thread, which then stops the others: kill(2)
# returns before that, and until the kernel runs that thread the others
# still run. After "kill -STOP PID": wait_for 10 stopped PID.
stopped() {
	for _t in /proc/"$1"/task/*/stat; do
		read -r _st <"$_t" || return 1
		_st=${_st##*) }
		[ "${_st%% *}" = T ] || return 1
	done
}

# wait_for SECONDS CMD... — poll until CMD succeeds; non-zero on timeout.
wait_for() {
	_s=$1; shift
	_i=0
	while ! "$@" >/dev/null 2>&1; do
		_i=$((_i + 1))
		[ "$_i" -gt $((_s * 10)) ] && return 1
		sleep 0.1
	done
}
