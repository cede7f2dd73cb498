#!/bin/sh
# tests/valgrind-wslock.sh - stands in for ./wslock in the bats suite under
# `make valgrind-check` (WSLOCK=tests/valgrind-wslock.sh): runs the real
# binary ($WSLOCK_REAL, default ./wslock beside tests/) under memcheck.
#
# exec keeps the pid, so --pid defaults, signals and the tests' process
# bookkeeping see wslock itself. A memcheck error or a definite leak makes
# it exit 99, a status no wslock command uses, and leaves the report in
# $VALGRIND_LOGS/vg.PID (empty when clean); stderr stays the tests'.
here=$(cd "$(dirname "$0")" && pwd)
logs=${VALGRIND_LOGS:-${TMPDIR:-/tmp}/wslock-valgrind}
mkdir -p "$logs"
exec valgrind --quiet --error-exitcode=99 --leak-check=full \
	--errors-for-leak-kinds=definite --show-leak-kinds=definite \
	--child-silent-after-fork=yes --track-fds=no \
	--log-file="$logs/vg.%p" \
	"${WSLOCK_REAL:-$here/../wslock}" "$@"
