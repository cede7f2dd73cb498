#!/usr/bin/env bash
# tests/run-bats.sh - bats, plus the rule that CI runs every test its tools
# allow: a skipped test fails the run in CI unless tests/skips.allowed (or a
# file given with --allow) names it with a reason.
#
#   tests/run-bats.sh [--allow FILE]... [BATS-OPTIONS...] FILE-OR-DIR...
#
# bats runs as usual (its own output and summary on stdout); a TAP report is
# written beside it (--report-formatter tap) and its "# skip" lines are
# checked afterwards. Outside CI a skip is reported by bats only. CI is
# on when CI=true (GitHub Actions, GitLab CI and .ci/run set it) or
# WSLOCK_STRICT_SKIPS=1. Exit status: bats's, or 1 for a skip not allowed.
#
# An allow-list line is "TEST NAME<TAB>WHY" (the test's name exactly as bats
# prints it); blank lines and lines starting with # are ignored. Nothing is
# printed after bats's summary unless a skip is refused.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lib.sh
. "$HERE/lib.sh"

allow=("$HERE/skips.allowed")
while [ $# -gt 0 ]; do
	case $1 in
	--allow)
		[ $# -ge 2 ] || { echo "run-bats.sh: --allow needs a file" >&2; exit 64; }
		allow+=("$2")
		shift 2
		;;
	*) break ;;
	esac
done

report=$(mktemp -d "${TMPDIR:-/tmp}/wslock-bats-report.XXXXXX") || exit 70
trap 'rm -rf "$report"' EXIT

bats --report-formatter tap --output "$report" "$@"
rc=$?

wsl_strict_skips || exit "$rc"
if [ ! -s "$report/report.tap" ]; then
	echo "run-bats.sh: bats wrote no TAP report; cannot check for skips" >&2
	exit $((rc == 0 ? 1 : rc))
fi
wsl_refused_skips "$report/report.tap" "${allow[@]}" >"$report/refused" || exit 70
if [ -s "$report/refused" ]; then
	echo "run-bats.sh: in CI a skipped test fails the run unless $(basename "${allow[0]}") allows it:" >&2
	sed 's/^/  skipped: /' "$report/refused" >&2
	exit 1
fi
exit "$rc"
