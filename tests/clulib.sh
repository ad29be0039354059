# tests/clulib.sh — helpers for cluster (lockproto=dlm) integration tests
# (POSIX sh). Source it after tests/lib.sh and tests/fslib.sh.
#
#   clu_config FILE NODES...   write a cluster configuration (secret in
#                              $T/clu.secret) listing node ids NODES on
#                              127.0.0.<id>, one fresh TCP port (from the
#                              shell's PID, like the lk tests)
#                              ($CLU_EXTRA: more JSON fields, e.g.
#                              '"two_node": true,')
#   clu_witness FILE ID        start a quorum witness (ucfs-witness: a
#                              lockspace-only member that only adds its
#                              vote); stopped by PID on exit
#   clu_opts FILE ID [MORE]    prints the mount options of node ID
#
# Quorum: the lock manager counts a strict majority of the CONFIGURED
# nodes, including nodes that left cleanly, so the last filesystem node
# of a cluster can unmount cleanly only while a quorum is up. The tests
# configure witnesses (as a cluster would use a quorum device) so that
# every filesystem node, the last one included, leaves cleanly.

CLU_PORT=$((20000 + ($$ + 11) % 30000))

clu_config() {
	_f=$1; shift
	[ -f "$T/clu.secret" ] ||
		head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' \
			>"$T/clu.secret"
	{
		printf '{ "cluster": "clu", "secret_file": "%s",\n' \
			"$T/clu.secret"
		printf '  "heartbeat_ms": 100, "timeout_ms": 2500, %s\n' \
			"${CLU_EXTRA:-}"
		printf '  "nodes": ['
		_sep=""
		for _id in "$@"; do
			printf '%s\n    {"id": %s, "addr": "127.0.0.%s", "port": %s}' \
				"$_sep" "$_id" "$_id" "$CLU_PORT"
			_sep=","
		done
		printf ' ] }\n'
	} >"$_f"
}

clu_witness() {
	"$B/ucfs-witness" "$1" "$2" >"$T/witness$2.log" 2>&1 &
	CLU_WITNESS_PID=$!
	on_exit "kill $! 2>/dev/null"
}

clu_opts() {
	echo "lockproto=dlm,cluster=$1,node=$2${3:+,$3}"
}
