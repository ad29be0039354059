# tests/statlib.sh — the stats of a mounted ucfs daemon in integration
# tests (POSIX sh; source it after tests/lib.sh, with $MNT set).
#
#   stat_json                  the stats document of $MNT (ucfs-stat --json)
#   snap_until OUT BASE FILTER take snapshots into OUT until the jq FILTER
#                              ($a = BASE, $b = OUT) holds, 5 s at most: a
#                              request is counted when its handler returns,
#                              just after the answer the caller waited for
#                              (the checks that follow fail on their own)
#   ns_churn                   100 creates (f0..f99), 10 mkdirs (d0..d9)
#                              and 100 unlinks in $MNT: the requests whose
#                              counts the tests then check

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

ns_churn() {
	_i=0
	while [ $_i -lt 100 ]; do : >"$MNT/f$_i"; _i=$((_i + 1)); done
	_i=0
	while [ $_i -lt 10 ]; do mkdir "$MNT/d$_i"; _i=$((_i + 1)); done
	_i=0
	while [ $_i -lt 100 ]; do rm "$MNT/f$_i"; _i=$((_i + 1)); done
}
