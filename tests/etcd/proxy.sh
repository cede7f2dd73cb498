#!/bin/sh
# proxy.sh - a TCP proxy (socat) in front of an etcd member, one per
# simulated host, so that a test can cut that host off without touching the
# others.  Loopback only.
#
#   proxy.sh start DIR NAME HOST:PORT   listen on a free 127.0.0.1 port and
#                                       forward each connection to HOST:PORT;
#                                       prints http://127.0.0.1:PORT
#   proxy.sh pause DIR NAME             SIGSTOP the proxy and every
#                                       connection it serves: a partition in
#                                       which packets vanish (connects still
#                                       succeed: the kernel accepts them)
#   proxy.sh resume DIR NAME            SIGCONT: the partition heals
#   proxy.sh cut DIR NAME               SIGKILL it: every connection is
#                                       reset and new ones are refused
#   proxy.sh restart DIR NAME           listen again on the same port
#   proxy.sh stop DIR                   kill every proxy under DIR
#
# The proxy runs in its own process group (setsid), and its forked
# per-connection children stay in it, so one signal to the group reaches
# them all.  State: DIR/proxy-NAME/{pid,port,target,log}.
set -eu

prog=proxy.sh
die() {
	echo "$prog: $*" >&2
	exit 1
}

. "$(dirname "$0")/ports.sh"

alive() {
	[ -n "$1" ] || return 1
	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	case "$st" in Z*|"") return 1 ;; esac
}

# launch D: run socat for the proxy described by D; wait (bounded) until it
# listens.
launch() {
	port=$(cat "$1/port")
	setsid socat -lf "$1/log" \
		"TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork" \
		"TCP:$(cat "$1/target")" </dev/null >/dev/null 2>&1 &
	echo $! >"$1/pid"
	i=0
	until ss -Hltn "sport = :$port" | grep -q .; do
		alive "$(cat "$1/pid")" || return 1
		i=$((i + 1))
		[ "$i" -le 100 ] || return 1
		sleep 0.05
	done
}

signal_group() {
	pid=$(cat "$1/pid" 2>/dev/null) || die "no proxy in $1"
	kill "-$2" "-$pid" 2>/dev/null || :
}

[ $# -ge 2 ] || die "usage: start DIR NAME HOST:PORT | pause|resume|cut|restart DIR NAME | stop DIR"
cmd=$1
dir=$2
case "$cmd" in
start)
	[ $# -eq 4 ] || die "usage: start DIR NAME HOST:PORT"
	d="$dir/proxy-$3"
	mkdir -p "$d"
	echo "$4" >"$d/target"
	n=0
	while :; do
		free_port >"$d/port"
		launch "$d" && break
		n=$((n + 1))
		[ "$n" -lt 3 ] || die "proxy $3 did not start"
	done
	echo "http://127.0.0.1:$(cat "$d/port")"
	;;
pause) signal_group "$dir/proxy-$3" STOP ;;
resume) signal_group "$dir/proxy-$3" CONT ;;
cut)
	signal_group "$dir/proxy-$3" CONT
	signal_group "$dir/proxy-$3" KILL
	;;
restart)
	d="$dir/proxy-$3"
	signal_group "$d" KILL
	launch "$d" || die "proxy $3 did not restart"
	;;
stop)
	for d in "$dir"/proxy-*; do
		[ -f "$d/pid" ] || continue
		signal_group "$d" CONT
		signal_group "$d" KILL
	done
	;;
*) die "unknown command $cmd" ;;
esac
