#!/bin/sh
# build-old.sh WHICH [OUTDIR]: builds an older wslock from this repository's
# history into OUTDIR (default: a new temporary directory) and prints the
# binary's path; the compatibility tests run it against a registry before
# and after this binary upgrades it. WHICH:
#   v010     wslock 0.1.0 (tag v0.1.0, else its commit 2dad4c0, for a
#            clone without tags)
#   format2  the last wslock that wrote registry format 2 (commit 77836c4)
# Exit 2: no git history to build from; 64: WHICH unknown.
set -eu
case ${1:-} in
v010) revs="v0.1.0 2dad4c0" ;;
format2) revs=77836c4 ;;
*) echo "usage: build-old.sh v010|format2 [OUTDIR]" >&2; exit 64 ;;
esac
which=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${2:-$(mktemp -d "${TMPDIR:-/tmp}/wslock-$which.XXXXXX")}
if [ -x "$out/src/wslock" ]; then
	printf '%s\n' "$out/src/wslock"
	exit 0
fi
command -v git >/dev/null 2>&1 || { echo "build-old.sh: git is not installed" >&2; exit 2; }
rev=
for r in $revs; do
	if c=$(git -C "$here" rev-parse -q --verify "$r^{commit}" 2>/dev/null); then
		rev=$c
		break
	fi
done
[ -n "$rev" ] || { echo "build-old.sh: none of $revs is in $here's history" >&2; exit 2; }
mkdir -p "$out/src"
git -C "$here" archive --format=tar "$rev" | tar -x -C "$out/src"
make -s -C "$out/src" wslock >"$out/build.log" 2>&1 ||
	{ cat "$out/build.log" >&2; echo "build-old.sh: building $rev failed" >&2; exit 1; }
printf '%s\n' "$out/src/wslock"
