#!/usr/bin/env bats
# Smaller items of issue 12: an empty registry path, -E 0 -q, exec failures,
# reclaim's report of a workspace its cleanup command left retained.

load helpers

@test "issue 12.6: -d \"\" and --lock-dir= are usage errors, before or after the command" {
	mkws a
	for form in "-d|" "--lock-dir=" ; do
		if [ "$form" = "-d|" ]; then pre=(-d ""); else pre=(--lock-dir=); fi
		run -64 --separate-stderr wsl "${pre[@]}" acquire --pid $$ "$(W a)"
		assert_usage_error
		run -64 --separate-stderr wsl acquire "${pre[@]}" --pid $$ "$(W a)"
		assert_usage_error
		run -64 --separate-stderr wsl run "${pre[@]}" "$(W a)" -- echo SHOULD-NOT-RUN
		assert_usage_error --run
		run -64 --separate-stderr wsl inspect "${pre[@]}" --all
		assert_usage_error
	done
	[ ! -e "$WSLOCK_DIR" ] || fail "a registry was created"
	[ ! -e "$HOME/.local/state/wslock/locks/$(lock_key_of "$(W a)")" ] || fail "the default registry was used"
}

@test "issue 12.6: an empty WSLOCK_DIR counts as unset" {
	mkws a
	export XDG_STATE_HOME=$BATS_TEST_TMPDIR/xdg
	WSLOCK_DIR= run -0 --separate-stderr wsl acquire --pid $$ "$(W a)"
	[ -d "$XDG_STATE_HOME/wslock/locks/$(lock_key_of "$(W a)")" ] || fail "not in the default registry"
}

@test "-E 0 -q prints nothing when the workspace is busy" {
	mkws a
	hold "$(W a)"
	run -0 --separate-stderr wsl run -n -E 0 -q "$(W a)" -- echo SHOULD-NOT-RUN
	[ -z "$output" ] || fail "stdout: $output"
	[ -z "$stderr" ] || fail "stderr: $stderr"
	run -0 --separate-stderr wsl acquire -n -E 0 -q --pid $$ "$(W a)"
	[ -z "$output" ] || fail "stdout: $output"
	[ -z "$stderr" ] || fail "stderr: $stderr"
	run -0 --separate-stderr wsl run -w 0.2 -E 0 -q "$(W a)" -- echo SHOULD-NOT-RUN
	[ -z "$output$stderr" ] || fail "stdout '$output' stderr '$stderr'"
}

@test "exec failures carry their [CODE]" {
	mkws a
	run -127 --separate-stderr wsl run "$(W a)" -- /nonexistent/command
	[[ $stderr == "wslock: "*"/nonexistent/command"*"["WSLOCK_*"]" ]] || fail "stderr: $stderr"
	printf '#!/bin/sh\n' >"$BATS_TEST_TMPDIR/noexec"
	chmod 0644 "$BATS_TEST_TMPDIR/noexec"
	run -126 --separate-stderr wsl run "$(W a)" -- "$BATS_TEST_TMPDIR/noexec"
	[[ $stderr == "wslock: "*"["WSLOCK_*"]" ]] || fail "stderr: $stderr"
}

@test "issue 12.9: reclaim --yes -- false reports the workspace retained, not reclaimed" {
	mkws a b
	dead_acquired "$(W a)"
	dead_acquired "$(W b)"
	run -1 --separate-stderr wsl reclaim --yes "$(W a)" -- false
	jq_ok '.reclaimed == [] and (.retained | length == 1) and .retained[0].command_status == 1'
	jq_ok ".retained[0].workspace_root == \"$(canon "$(W a)")\""
	inspect_json "$(W a)"
	jq_ok '.state == "retained"' "$INSPECT"
	run -0 --separate-stderr wsl reclaim --yes "$(W b)" -- true
	jq_ok '(.reclaimed | length == 1) and .retained == []'
}
