#!/usr/bin/env bats
# make install / uninstall into a DESTDIR: the binary, the man page, the
# three completions (where each shell looks for them by default), the
# documentation and the schemas land in their places, and go again; the
# build honours the CPPFLAGS a Debian build passes.

bats_require_minimum_version 1.5.0

setup() {
	REPO=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
	DEST=$BATS_TEST_TMPDIR/dest
}

fail() {
	printf '%s\n' "$*" >&2
	return 1
}

# installed_files: every file under DEST, relative to DEST, sorted.
installed_files() {
	(cd "$DEST" && find . -type f | sed 's|^\./|/|' | sort)
}

@test "make install puts every file in its place under DESTDIR and PREFIX" {
	run -0 make -C "$REPO" -s install DESTDIR="$DEST" PREFIX=/opt/ws
	[ -x "$DEST/opt/ws/bin/wslock" ]
	[ -f "$DEST/opt/ws/share/man/man1/wslock.1" ]
	[ -f "$DEST/opt/ws/share/bash-completion/completions/wslock" ]
	[ -f "$DEST/opt/ws/share/zsh/site-functions/_wslock" ]
	[ -f "$DEST/opt/ws/share/fish/vendor_completions.d/wslock.fish" ]
	local f
	for f in README.md LICENSE CHANGELOG.md; do
		cmp "$REPO/$f" "$DEST/opt/ws/share/doc/wslock/$f" || fail "$f not installed"
	done
	for f in "$REPO"/doc/schema/*.schema.json; do
		cmp "$f" "$DEST/opt/ws/share/doc/wslock/schema/${f##*/}" || fail "$f not installed"
	done
	run -0 "$DEST/opt/ws/bin/wslock" --version
	[[ $output == "wslock $(cat "$REPO/VERSION")" ]]
	# Nothing else: the binary, man page, 3 completions, 3 documents, the schemas.
	local n
	n=$(ls "$REPO"/doc/schema/*.schema.json | wc -l)
	[ "$(installed_files | wc -l)" -eq $((8 + n)) ] || fail "$(installed_files)"
	[ "$(stat -c %a "$DEST/opt/ws/share/man/man1/wslock.1")" = 644 ]
	[ "$(stat -c %a "$DEST/opt/ws/share/doc/wslock/schema/owner.schema.json")" = 644 ]
}

@test "make uninstall removes what install put there" {
	run -0 make -C "$REPO" -s install DESTDIR="$DEST" PREFIX=/opt/ws
	run -0 make -C "$REPO" -s uninstall DESTDIR="$DEST" PREFIX=/opt/ws
	[ "$(find "$DEST" -type f | wc -l)" -eq 0 ]
	[ ! -e "$DEST/opt/ws/share/doc/wslock" ]
	run -0 make -C "$REPO" -s install DESTDIR="$DEST" PREFIX=/usr/local
	run -0 make -C "$REPO" -s uninstall DESTDIR="$DEST" PREFIX=/usr/local
	[ "$(find "$DEST" -type f | wc -l)" -eq 0 ]
}

# The directories each shell searches with no configuration (no fpath
# additions, no XDG_DATA_DIRS): an installed completion must be in one.
@test "with PREFIX=/usr/local and PREFIX=/usr, zsh and fish find the completions in their default search path" {
	local zsh_ok= fish_ok= prefix dir
	for prefix in /usr/local /usr; do
		rm -rf "$DEST"
		run -0 make -C "$REPO" -s install DESTDIR="$DEST" PREFIX=$prefix
		if command -v zsh >/dev/null; then
			dir=$(cd "$DEST" && dirname "$(find . -name _wslock | sed 's|^\.||')")
			env -u FPATH zsh -fc 'print -l $fpath' | grep -qxF "$dir" ||
				fail "PREFIX=$prefix: zsh does not search $dir: $(zsh -fc 'print -l $fpath' | head -5)"
			zsh_ok=1
		fi
		if command -v fish >/dev/null; then
			dir=$(cd "$DEST" && dirname "$(find . -name wslock.fish | sed 's|^\.||')")
			env -u XDG_DATA_DIRS -u XDG_CONFIG_HOME -u XDG_DATA_HOME HOME="$BATS_TEST_TMPDIR/home" fish \
				-c 'printf "%s\n" $fish_complete_path' | grep -qxF "$dir" ||
				fail "PREFIX=$prefix: fish does not search $dir"
			fish_ok=1
		fi
		dir=$(cd "$DEST" && find . -path '*/bash-completion/completions/wslock' | sed 's|^\.||')
		[ "$dir" = "$prefix/share/bash-completion/completions/wslock" ]
	done
	[ -n "$zsh_ok$fish_ok" ] || skip "neither zsh nor fish is installed"
}

@test "the build passes CPPFLAGS to the compiler (a Debian build keeps _FORTIFY_SOURCE)" {
	run -0 make -C "$REPO" -n -B CPPFLAGS='-D_FORTIFY_SOURCE=2 -DWSLOCK_CPPFLAGS_SEEN' src/error.o
	[[ $output == *"-DWSLOCK_CPPFLAGS_SEEN"* ]] || fail "CPPFLAGS ignored: $output"
	run -0 make -C "$REPO" -n -B CPPFLAGS='-DWSLOCK_CPPFLAGS_SEEN' wslock-test
	[[ $output == *"-DWSLOCK_CPPFLAGS_SEEN"* ]] || fail "CPPFLAGS ignored by wslock-test: $output"
}

@test "debian/changelog's upstream version is VERSION" {
	[ -f "$REPO/debian/changelog" ] || fail "no debian/changelog"
	local v
	v=$(sed -n '1s/^wslock (\([^)]*\)).*/\1/p' "$REPO/debian/changelog")
	[ "${v%-*}" = "$(cat "$REPO/VERSION")" ] || fail "debian/changelog has $v, VERSION $(cat "$REPO/VERSION")"
}

@test "the installed man page renders" {
	command -v man >/dev/null || skip "man is not installed"
	run -0 make -C "$REPO" -s install DESTDIR="$DEST" PREFIX=/usr
	run -0 env MANWIDTH=80 man -l "$DEST/usr/share/man/man1/wslock.1"
	[[ $output == *"wslock"*"SYNOPSIS"* ]]
}
