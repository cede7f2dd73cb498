# tests/etcd/ports.sh - sourced by cluster.sh and proxy.sh (POSIX sh).
#
# free_port: prints a random TCP port on 127.0.0.1 (20000-49999) that
# nothing listens on (ss, iproute2) and that is not in $taken (ports
# separated by spaces). Called as $(free_port) it runs in a subshell and
# cannot add to $taken: the caller appends the port it got. Gives up
# through die() after 200 tries.
free_port() {
	tries=0
	while :; do
		tries=$((tries + 1))
		[ "$tries" -le 200 ] || die "no free port found"
		p=$(( ($(od -An -N2 -tu2 /dev/urandom) % 30000) + 20000 ))
		case " ${taken:-} " in *" $p "*) continue ;; esac
		if ! ss -Hltn "sport = :$p" | grep -q .; then
			echo "$p"
			return
		fi
	done
}
