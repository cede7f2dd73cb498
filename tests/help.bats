#!/usr/bin/env bats
# Help and messages: every --help fits 80 columns, the exit-status summary
# is in `wslock --help` once and not repeated per command, an ambiguous
# abbreviation says so and names the candidates, -y is --yes, zsh and fish
# offer - for --expected-owner, and no message prints a whole token (8
# characters tell tokens apart).

load helpers

@test "help: every --help fits 80 columns; the exit-status footer is in wslock --help only" {
	local c
	run -0 wsl --help
	! awk 'length > 80 { print; bad = 1 } END { exit !bad }' <<<"$output" || fail "wslock --help is wider than 80"
	[ "$(grep -c '^Exit status:' <<<"$output")" -eq 1 ] || fail "no exit-status footer: $output"
	for c in acquire release run inspect recover reclaim; do
		run -0 wsl "$c" --help
		! awk 'length > 80 { print; bad = 1 } END { exit !bad }' <<<"$output" ||
			fail "$c --help is wider than 80: $(awk 'length > 80' <<<"$output")"
		! grep -q '^Exit status:' <<<"$output" || fail "$c --help repeats the exit-status footer"
	done
}

@test "help: an ambiguous abbreviation says it is ambiguous and names the candidates" {
	mkws a
	run -64 --separate-stderr wsl run --re "$(W a)" -- true
	[[ $stderr == *"option --re is ambiguous: "*"--retain-on-failure"*"--reclaim-dead"* ]] || fail "$stderr"
	run -64 --separate-stderr wsl recover --re "$(W a)"
	[[ $stderr == *"ambiguous"*"--reason"*"--retain-on-failure"* ]] || fail "$stderr"
	jq_ok '.error.code == "WSLOCK_USAGE"'
	# A unique abbreviation still works, an unknown one is unknown.
	run -64 --separate-stderr wsl run --bogus "$(W a)" -- true
	[[ $stderr == *"unknown option --bogus"* ]] || fail "$stderr"
	run -0 --separate-stderr wsl run --retain "$(W a)" -- true
}

@test "help: -y is --yes for reclaim" {
	mkws a
	dead_acquired "$(W a)"
	run -0 --separate-stderr wsl reclaim -y "$(W a)"
	jq_ok '.action == "reclaimed" and (.reclaimed | length) == 1'
}

@test "help: zsh and fish offer - (standard input) for --expected-owner" {
	local comp=$BATS_TEST_DIRNAME/../completions
	if command -v fish >/dev/null; then
		run -0 fish -c "source '$comp/wslock.fish'; complete -C 'wslock recover --expected-owner '"
		grep -q '^-'$'\t' <<<"$output" || fail "fish does not offer -: $output"
	fi
	# zsh: the --expected-owner action offers - beside files.
	grep -q "^_wslock_owner_file()" "$comp/_wslock" &&
		grep -q -- "--expected-owner=.*:_wslock_owner_file'" "$comp/_wslock" &&
		sed -n '/^_wslock_owner_file()/,/^}/p' "$comp/_wslock" | grep -q '(-\\:' ||
		fail "zsh does not offer - for --expected-owner"
	if command -v zsh >/dev/null; then
		run -0 zsh -n "$comp/_wslock"
	fi
}

@test "help: -v and messages never print a whole token" {
	mkws a
	run -0 --separate-stderr wsl run -v "$(W a)" -- true
	! grep -qE '[0-9a-f]{32}' <<<"$stderr" || fail "-v prints a whole token: $stderr"
	[[ $stderr == *"token "????????"..."* ]] || fail "no short token in -v: $stderr"
	local tok
	tok=$(wsl acquire --pid $$ "$(W a)" | jq -r .token)
	run -78 --separate-stderr wsl release --token 0123456789abcdef0123456789abcdef "$(W a)"
	! grep -qE '[0-9a-f]{32}' <<<"$stderr" || fail "a whole token on stderr: $stderr"
	[[ $stderr == *"${tok:0:8}..."* && $stderr == *"01234567..."* ]] || fail "$stderr"
}
