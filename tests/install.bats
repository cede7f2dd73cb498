#!/usr/bin/env bats
# make install / uninstall into a DESTDIR: the binary, the man page and the
# three completions land in their conventional places, and go again.

bats_require_minimum_version 1.5.0

setup() {
	REPO=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
	DEST=$BATS_TEST_TMPDIR/dest
}

@test "make install puts every file in its place under DESTDIR and PREFIX" {
	run -0 make -C "$REPO" -s install DESTDIR="$DEST" PREFIX=/opt/ws
	[ -x "$DEST/opt/ws/bin/wslock" ]
	[ -f "$DEST/opt/ws/share/man/man1/wslock.1" ]
	[ -f "$DEST/opt/ws/share/bash-completion/completions/wslock" ]
	[ -f "$DEST/opt/ws/share/zsh/vendor-completions/_wslock" ]
	[ -f "$DEST/opt/ws/share/fish/vendor_completions.d/wslock.fish" ]
	run -0 "$DEST/opt/ws/bin/wslock" --version
	[[ $output == "wslock $(cat "$REPO/VERSION")" ]]
	# Nothing else: exactly five files.
	[ "$(find "$DEST" -type f | wc -l)" -eq 5 ]
	[ "$(stat -c %a "$DEST/opt/ws/share/man/man1/wslock.1")" = 644 ]
}

@test "make uninstall removes what install put there" {
	run -0 make -C "$REPO" -s install DESTDIR="$DEST" PREFIX=/opt/ws
	run -0 make -C "$REPO" -s uninstall DESTDIR="$DEST" PREFIX=/opt/ws
	[ "$(find "$DEST" -type f | wc -l)" -eq 0 ]
}

@test "the installed man page renders" {
	command -v man >/dev/null || skip "man is not installed"
	run -0 make -C "$REPO" -s install DESTDIR="$DEST" PREFIX=/usr
	run -0 env MANWIDTH=80 man -l "$DEST/usr/share/man/man1/wslock.1"
	[[ $output == *"wslock"*"SYNOPSIS"* ]]
}
