#!/bin/sh
# three_node.sh - runs tests/unit/test_etcd against a three-member cluster,
# including losing a member: first a follower that is the client's first
# endpoint (revived afterwards), then the leader.
#
#   tests/etcd/three_node.sh [TEST_PROGRAM [ARGS...]]   default tests/unit/test_etcd
#
# The cluster lives in a mktemp directory and is stopped on exit.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
cluster="$here/cluster.sh"
[ $# -ge 1 ] || set -- "$here/../unit/test_etcd"

dir=$(mktemp -d "${TMPDIR:-/tmp}/wslock-etcd3.XXXXXX")
trap '"$cluster" stop "$dir"; rmdir "$dir" 2>/dev/null || :' EXIT INT TERM
"$cluster" start -n 3 "$dir" >/dev/null

leader=$("$cluster" leader "$dir")
follower="" other=""
for i in 1 2 3; do
	[ "$i" = "$leader" ] && continue
	if [ -z "$follower" ]; then follower=$i; else other=$i; fi
done
url() { cat "$dir/member-$1/client"; }

WSLOCK_ETCD_ENDPOINTS="$(url "$follower"),$(url "$leader"),$(url "$other")"
# shell commands for the test's system(3), quoted for sh -c on purpose
# shellcheck disable=SC2089
{
WSLOCK_ETCD_KILL_FOLLOWER="'$cluster' kill '$dir' $follower"
WSLOCK_ETCD_REVIVE_FOLLOWER="'$cluster' revive '$dir' $follower"
# whoever leads when the test gets there (the revive may have moved it)
WSLOCK_ETCD_KILL_LEADER="l=\$('$cluster' leader '$dir') && echo \"# killing leader member \$l\" && '$cluster' kill '$dir' \$l"
}
# shellcheck disable=SC2090
export WSLOCK_ETCD_ENDPOINTS WSLOCK_ETCD_KILL_FOLLOWER \
	WSLOCK_ETCD_REVIVE_FOLLOWER WSLOCK_ETCD_KILL_LEADER
echo "# members: leader $leader, follower $follower, other $other"
"$@"
