#!/bin/sh
# Builds the Debian package from a copy of this tree, checks it with
# lintian (no errors), installs it, runs debian/tests/smoke against the
# installed files and purges it again.  Needs root, dpkg-dev, debhelper,
# lintian and the build dependencies in debian/control.
#
#   tests/deb.sh [--keep]     (--keep: leave the package installed)
set -eu
cd "$(dirname "$0")/.."
keep=${1:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/wslock"
# The files of the tree (tracked, or new and not ignored), as a source package
# would have them; no build output.
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work/wslock"
(cd "$work/wslock" && dpkg-buildpackage -us -uc -b)
deb=$(ls "$work"/wslock_*.deb)
lintian --fail-on error --no-tag-display-limit "$work"/wslock_*.changes
dpkg-deb -c "$deb"
if dpkg -s wslock >/dev/null 2>&1; then
	echo "deb.sh: wslock is already installed as a package; not touching it" >&2
	exit 1
fi
apt-get install -y -q "$deb"
rc=0
debian/tests/smoke || rc=$?
if [ "$keep" != --keep ]; then
	apt-get purge -y -q wslock
	if [ -e /usr/bin/wslock ] || dpkg -s wslock >/dev/null 2>&1; then
		echo "deb.sh: the purge left wslock behind" >&2
		rc=1
	fi
fi
exit $rc
