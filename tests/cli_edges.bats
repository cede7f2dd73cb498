#!/usr/bin/env bats
# Smaller items of issue 12: an empty registry path, -E 0 -q, exec failures,
# reclaim's report of a workspace its cleanup command left retained; etcd
# settings without the etcd backend.

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

@test "etcd settings without the etcd backend are a usage error, not a silent local registry" {
	mkws a
	unset WSLOCK_BACKEND
	# Port 9 (discard): nothing answers, and nothing may be asked.
	export WSLOCK_ETCD_ENDPOINTS=http://127.0.0.1:9
	local be
	for be in unset empty; do
		if [ "$be" = empty ]; then export WSLOCK_BACKEND=; fi
		run -64 --separate-stderr wsl acquire --pid $$ "$(W a)"
		assert_usage_error
		[[ $stderr == *"--backend etcd"*"WSLOCK_BACKEND=local"* ]] || fail "no way out named: $stderr"
		run -64 --separate-stderr wsl run "$(W a)" -- echo SHOULD-NOT-RUN
		assert_usage_error --run
		run -64 --separate-stderr wsl inspect --registry
		assert_usage_error
		run -64 --separate-stderr wsl reclaim
		assert_usage_error
	done
	[ ! -e "$WSLOCK_DIR" ] || fail "a local registry was created"
	# Chosen on purpose, the local registry works as before.
	WSLOCK_BACKEND=local run -0 --separate-stderr wsl inspect --registry
	jq_ok '.backend == "local"'
	run -0 --separate-stderr wsl --backend local run "$(W a)" -- true
	# An empty variable is unset.
	WSLOCK_BACKEND= WSLOCK_ETCD_ENDPOINTS= run -0 --separate-stderr wsl inspect --registry
	jq_ok '.backend == "local"'
	# --etcd-endpoints on the command line never selects the local registry.
	unset WSLOCK_BACKEND WSLOCK_ETCD_ENDPOINTS
	run -64 --separate-stderr wsl inspect --etcd-endpoints http://127.0.0.1:9 --registry
	assert_usage_error
	[[ $stderr == *"--backend etcd"* ]] || fail "stderr: $stderr"
	run -64 --separate-stderr wsl --backend local --etcd-endpoints http://127.0.0.1:9 run "$(W a)" -- echo SHOULD-NOT-RUN
	assert_usage_error --run
	WSLOCK_BACKEND=local run -64 --separate-stderr wsl acquire --etcd-endpoints http://127.0.0.1:9 --pid $$ "$(W a)"
	assert_usage_error
}

@test "-n and -w together are a usage error naming both, in either order, for every command that takes them" {
	mkws a
	local ws tok
	ws=$(W a)
	for order in "-n -w 1" "-w 1 -n" "--nonblock --timeout=0"; do
		# shellcheck disable=SC2086
		run -64 --separate-stderr wsl run $order "$ws" -- echo SHOULD-NOT-RUN
		assert_usage_error --run
		[[ $stderr == *"-n and -w"* ]] || fail "does not name both: $stderr"
		# shellcheck disable=SC2086
		run -64 --separate-stderr wsl acquire $order --pid $$ "$ws"
		assert_usage_error
	done
	[ "$(wsl inspect "$ws" | jq -r .state)" = free ] || fail "something was locked"
	tok=$(wsl acquire --pid $$ "$ws" | jq -r .token)
	run -64 --separate-stderr wsl release -n -w 1 --token "$tok" "$ws"
	assert_usage_error
	wsl inspect --owner "$ws" >"$BATS_TEST_TMPDIR/owner.json"
	run -64 --separate-stderr wsl recover -w 1 -n --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$ws"
	assert_usage_error
	run -64 --separate-stderr wsl reclaim -n -w 1
	assert_usage_error
	[ "$(wsl inspect "$ws" | jq -r .owner.token)" = "$tok" ] || fail "the lock changed"
	# Each alone still works.
	run -0 wsl release -n --token "$tok" "$ws"
	run -0 wsl run -w 1 "$ws" -- true
}

@test "--etcd-prefix \"\" is a usage error as -d \"\" is, before or after the command" {
	mkws a
	unset WSLOCK_BACKEND
	# Port 9 (discard): nothing answers, and nothing may be asked.
	export WSLOCK_ETCD_ENDPOINTS=http://127.0.0.1:9
	run -64 --separate-stderr wsl --backend etcd --etcd-prefix "" inspect "$(W a)"
	assert_usage_error
	[[ $stderr == *"--etcd-prefix"*"empty"* ]] || fail "unclear: $stderr"
	run -64 --separate-stderr wsl acquire --backend etcd --etcd-prefix= --pid $$ "$(W a)"
	assert_usage_error
	run -64 --separate-stderr wsl run --backend etcd --etcd-prefix "" "$(W a)" -- echo SHOULD-NOT-RUN
	assert_usage_error --run
	unset WSLOCK_ETCD_ENDPOINTS
	run -64 --separate-stderr wsl --etcd-prefix "" run "$(W a)" -- echo SHOULD-NOT-RUN
	assert_usage_error --run
	[ ! -e "$WSLOCK_DIR" ] || fail "a registry was created"
}
