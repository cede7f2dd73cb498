#!/bin/sh
# build-v010.sh [OUTDIR]: builds wslock 0.1.0 from this repository's history
# (tag v0.1.0, else its commit 2dad4c0, for a clone without tags) into
# OUTDIR (default: a new temporary directory) and prints the binary's path.
# The compatibility tests run it against a registry before and after a 0.2
# binary upgrades it. Exit 2: no git history to build from.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$(mktemp -d "${TMPDIR:-/tmp}/wslock-v010.XXXXXX")}
if [ -x "$out/src/wslock" ]; then
	printf '%s\n' "$out/src/wslock"
	exit 0
fi
command -v git >/dev/null 2>&1 || { echo "build-v010.sh: git is not installed" >&2; exit 2; }
rev=
for r in v0.1.0 2dad4c0; do
	if c=$(git -C "$here" rev-parse -q --verify "$r^{commit}" 2>/dev/null); then
		rev=$c
		break
	fi
done
[ -n "$rev" ] || { echo "build-v010.sh: neither v0.1.0 nor 2dad4c0 is in $here's history" >&2; exit 2; }
mkdir -p "$out/src"
git -C "$here" archive --format=tar "$rev" | tar -x -C "$out/src"
make -s -C "$out/src" wslock >"$out/build.log" 2>&1 ||
	{ cat "$out/build.log" >&2; echo "build-v010.sh: building $rev failed" >&2; exit 1; }
printf '%s\n' "$out/src/wslock"
