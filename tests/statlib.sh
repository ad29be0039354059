# tests/statlib.sh — the stats of a mounted ucfs daemon in integration
# tests (POSIX sh; source it after tests/lib.sh, with $MNT set).
#
#   stat_json                  the stats document of $MNT (ucfs-stat --json)
#   snap_until OUT BASE FILTER take snapshots into OUT until the jq FILTER
#                              ($a = BASE, $b = OUT) holds, 5 s at most: a
#                              request is counted when its handler returns,
#                              just after the answer the caller waited for
#                              (the checks that follow fail on their own)

stat_json() { "$B/ucfs-stat" --json "$MNT"; }

snap_until() {
	_i=0
	while stat_json >"$1" && ! jq -e -n --slurpfile a "$2" \
		--slurpfile b "$1" "$3" >/dev/null 2>&1; do
		_i=$((_i + 1))
		[ "$_i" -ge 50 ] && return 1
		sleep 0.1
	done
}
