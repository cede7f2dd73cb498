#!/usr/bin/env bash
# tests/unit/run.sh - the C unit tests as `make check` runs them.
#
#   tests/unit/run.sh TEST-PROGRAM...
#
# Each program prints TAP and exits non-zero on a failure. test_etcd needs a
# real etcd for most of its tests: when WSLOCK_ETCD_ENDPOINTS is unset and
# etcd is installed, it runs against a throwaway cluster on free loopback
# ports (tests/etcd/cluster.sh): in CI three members, so that the member
# kill tests run too (tests/etcd/three_node.sh), elsewhere one member
# (faster; `make check-etcd` runs both). Without etcd those tests are
# skipped; in CI (see wsl_strict_skips in tests/lib.sh) any "skipped" line
# of a unit test fails the run.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lib.sh
. "$HERE/../lib.sh"

[ $# -gt 0 ] || { echo "usage: tests/unit/run.sh TEST-PROGRAM..." >&2; exit 64; }

log=$(mktemp "${TMPDIR:-/tmp}/wslock-unit.XXXXXX") || exit 70
edir=
cleanup() {
	[ -z "$edir" ] || "$HERE/../etcd/cluster.sh" stop "$edir"
	[ -z "$edir" ] || rmdir "$edir" 2>/dev/null
	rm -f "$log"
}
trap cleanup EXIT

have_etcd() { command -v etcd >/dev/null && command -v etcdctl >/dev/null; }

rc=0
for t in "$@"; do
	case ${t##*/} in
	test_etcd)
		if [ -n "${WSLOCK_ETCD_ENDPOINTS:-}" ] || ! have_etcd; then
			"$t" | tee "$log"
		elif wsl_strict_skips; then
			"$HERE/../etcd/three_node.sh" "$t" | tee "$log"
		else
			edir=$(mktemp -d "${TMPDIR:-/tmp}/wslock-unit-etcd.XXXXXX") || exit 70
			ep=$("$HERE/../etcd/cluster.sh" start "$edir") || { echo "unit: etcd did not start" >&2; exit 1; }
			WSLOCK_ETCD_ENDPOINTS=$ep "$t" | tee "$log"
		fi
		;;
	*) "$t" | tee "$log" ;;
	esac
	st=${PIPESTATUS[0]}
	[ "$st" = 0 ] || { echo "unit: $t failed (exit $st)" >&2; rc=1; }
	if wsl_strict_skips && grep -q '^#.*skipped' "$log"; then
		echo "unit: in CI no unit test may be skipped ($t):" >&2
		grep '^#.*skipped' "$log" | sed 's/^/  /' >&2
		rc=1
	fi
done
exit "$rc"
