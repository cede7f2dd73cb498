#!/bin/sh
# cluster.sh - a throwaway etcd cluster on loopback for the etcd backend tests.
#
#   cluster.sh start [-n 1|3] [DIR]   start 1 (default) or 3 members, wait
#                                     until every member is healthy (at most
#                                     ETCD_WAIT seconds, default 20) and print
#                                     the client endpoints, comma-separated,
#                                     on stdout; DIR defaults to mktemp -d
#                                     and is then named on stderr
#   cluster.sh endpoints DIR          print the client endpoints again
#   cluster.sh leader DIR             print the index of the current leader
#   cluster.sh kill DIR I             SIGKILL member I (1-based)
#   cluster.sh revive DIR I           start a killed member again on its data
#   cluster.sh stop DIR               kill every member and remove the data
#
# Everything lives below DIR: endpoints (one line), member-I/{data,log,pid,
# client,peer}.  Ports are free loopback ports picked at random (checked with
# ss(8)); a start that loses the race for a port is retried.  Members log to
# DIR/member-I/log, never to the caller's descriptors, so $(cluster.sh start)
# returns as soon as the cluster is healthy.
set -eu

prog=cluster.sh
wait_s=${ETCD_WAIT:-20}

die() {
	echo "$prog: $*" >&2
	exit 1
}

need() {
	command -v "$1" >/dev/null 2>&1 || die "$1 not found (apt-get install etcd-server etcd-client)"
}

. "$(dirname "$0")/ports.sh"

member_pid() {
	f="$1/member-$2/pid"
	[ -f "$f" ] && cat "$f"
}

# A member is alive while its process exists and is not a zombie (members
# are reparented to whatever reaps orphans here, maybe not promptly).
alive() {
	[ -n "$1" ] || return 1
	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	case "$st" in Z*|"") return 1 ;; esac
}

# launch DIR I STATE: runs member I described by DIR/member-I and DIR/cluster
launch() {
	m="$1/member-$2"
	# setsid: the member must not get the caller's terminal signals (^C).
	setsid etcd --name "m$2" --data-dir "$m/data" \
		--listen-client-urls "$(cat "$m/client")" \
		--advertise-client-urls "$(cat "$m/client")" \
		--listen-peer-urls "$(cat "$m/peer")" \
		--initial-advertise-peer-urls "$(cat "$m/peer")" \
		--initial-cluster "$(cat "$1/cluster")" \
		--initial-cluster-token "$(cat "$1/token")" \
		--initial-cluster-state "$3" \
		--logger zap --log-outputs stderr --log-level warn \
		</dev/null >"$m/log" 2>&1 &
	echo $! >"$m/pid"
}

# wait_healthy DIR [all]: 0 when every live member answers endpoint health
# within the deadline; with "all", a member that is not running (it lost the
# race for its port, say) fails it too
wait_healthy() {
	deadline=$(( $(date +%s) + wait_s ))
	for m in "$1"/member-*; do
		pid=$(cat "$m/pid")
		if ! alive "$pid"; then
			[ "${2:-}" = all ] && return 1
			continue
		fi
		until ETCDCTL_API=3 etcdctl --endpoints="$(cat "$m/client")" \
			--dial-timeout=1s --command-timeout=2s endpoint health \
			>/dev/null 2>&1; do
			alive "$pid" || return 1
			[ "$(date +%s)" -lt "$deadline" ] || return 1
			sleep 0.2
		done
	done
}

stop_members() {
	for m in "$1"/member-*; do
		[ -f "$m/pid" ] || continue
		pid=$(cat "$m/pid")
		if alive "$pid"; then kill "$pid" 2>/dev/null || :; fi
	done
	for m in "$1"/member-*; do
		[ -f "$m/pid" ] || continue
		pid=$(cat "$m/pid")
		i=0
		while alive "$pid" && [ "$i" -lt 50 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		if alive "$pid"; then kill -9 "$pid" 2>/dev/null || :; fi
	done
}

cmd_start() {
	n=1
	if [ "${1:-}" = "-n" ]; then
		[ $# -ge 2 ] || die "-n needs 1 or 3"
		n=$2
		shift 2
	fi
	case "$n" in 1|3) ;; *) die "-n must be 1 or 3" ;; esac
	need etcd
	need etcdctl
	need ss
	if [ $# -ge 1 ]; then
		dir=$1
		mkdir -p "$dir"
	else
		dir=$(mktemp -d "${TMPDIR:-/tmp}/wslock-etcd.XXXXXX")
		: >"$dir/.made-by-cluster.sh"
		echo "$prog: state in $dir" >&2
	fi
	ls "$dir"/member-* >/dev/null 2>&1 && die "$dir already holds a cluster"

	attempt=0
	while :; do
		attempt=$((attempt + 1))
		taken=""
		cluster=""
		endpoints=""
		i=1
		while [ "$i" -le "$n" ]; do
			m="$dir/member-$i"
			mkdir -p "$m"
			chmod 700 "$m"
			port=$(free_port)
			taken="$taken $port"
			echo "http://127.0.0.1:$port" >"$m/client"
			port=$(free_port)
			taken="$taken $port"
			echo "http://127.0.0.1:$port" >"$m/peer"
			cluster="${cluster:+$cluster,}m$i=$(cat "$m/peer")"
			endpoints="${endpoints:+$endpoints,}$(cat "$m/client")"
			i=$((i + 1))
		done
		echo "$cluster" >"$dir/cluster"
		echo "wslock-test-$$-$attempt" >"$dir/token"
		echo "$endpoints" >"$dir/endpoints"
		i=1
		while [ "$i" -le "$n" ]; do
			launch "$dir" "$i" new
			i=$((i + 1))
		done
		if wait_healthy "$dir" all; then
			echo "$endpoints"
			return 0
		fi
		stop_members "$dir"
		if [ "$attempt" -ge 3 ]; then
			for m in "$dir"/member-*; do
				echo "$prog: $m/log:" >&2
				tail -n 5 "$m/log" >&2 || :
			done
			rm -rf "$dir"/member-*
			die "cluster did not become healthy within ${wait_s}s"
		fi
		rm -rf "$dir"/member-*
	done
}

cmd_kill() {
	[ $# -eq 2 ] || die "usage: kill DIR I"
	pid=$(member_pid "$1" "$2") || die "no member $2 in $1"
	kill -9 "$pid" 2>/dev/null || :
	i=0
	while alive "$pid" && [ "$i" -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
}

cmd_leader() {
	[ $# -eq 1 ] || die "usage: leader DIR"
	for m in "$1"/member-*; do
		alive "$(cat "$m/pid")" || continue
		# "endpoint, id, version, size, is leader, ..."
		if ETCDCTL_API=3 etcdctl --endpoints="$(cat "$m/client")" \
			--dial-timeout=1s --command-timeout=2s endpoint status \
			-w simple 2>/dev/null | awk -F', ' '$5 == "true" { f = 1 } END { exit !f }'; then
			echo "${m##*/member-}"
			return 0
		fi
	done
	die "no leader found in $1"
}

cmd_revive() {
	[ $# -eq 2 ] || die "usage: revive DIR I"
	pid=$(member_pid "$1" "$2") || die "no member $2 in $1"
	alive "$pid" && die "member $2 is running"
	launch "$1" "$2" existing
	wait_healthy "$1" || die "member $2 did not become healthy within ${wait_s}s"
}

cmd_stop() {
	[ $# -eq 1 ] || die "usage: stop DIR"
	[ -d "$1" ] || return 0
	stop_members "$1"
	rm -rf "$1"/member-* "$1/endpoints" "$1/cluster" "$1/token"
	if [ -f "$1/.made-by-cluster.sh" ]; then
		rm -f "$1/.made-by-cluster.sh"
		rmdir "$1" 2>/dev/null || :
	fi
}

[ $# -ge 1 ] || die "usage: start [-n 1|3] [DIR] | endpoints DIR | leader DIR | kill DIR I | revive DIR I | stop DIR"
cmd=$1
shift
case "$cmd" in
start) cmd_start "$@" ;;
endpoints) [ $# -eq 1 ] || die "usage: endpoints DIR"; cat "$1/endpoints" ;;
leader) cmd_leader "$@" ;;
kill) cmd_kill "$@" ;;
revive) cmd_revive "$@" ;;
stop) cmd_stop "$@" ;;
*) die "unknown command $cmd" ;;
esac
