#!/bin/sh
# build-format2.sh [OUTDIR]: builds the last wslock that wrote registry
# format 2 (commit 77836c4) from this repository's history into OUTDIR
# (default: a new temporary directory) and prints the binary's path. The
# format 3 tests run it against a registry before and after a format 3
# binary upgrades it. Exit 2: no git history to build from.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$(mktemp -d "${TMPDIR:-/tmp}/wslock-format2.XXXXXX")}
if [ -x "$out/src/wslock" ]; then
	printf '%s\n' "$out/src/wslock"
	exit 0
fi
command -v git >/dev/null 2>&1 || { echo "build-format2.sh: git is not installed" >&2; exit 2; }
rev=$(git -C "$here" rev-parse -q --verify "77836c4^{commit}" 2>/dev/null) ||
	{ echo "build-format2.sh: commit 77836c4 is not in $here's history" >&2; exit 2; }
mkdir -p "$out/src"
git -C "$here" archive --format=tar "$rev" | tar -x -C "$out/src"
make -s -C "$out/src" wslock >"$out/build.log" 2>&1 ||
	{ cat "$out/build.log" >&2; echo "build-format2.sh: building $rev failed" >&2; exit 1; }
printf '%s\n' "$out/src/wslock"
