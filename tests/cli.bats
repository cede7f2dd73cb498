#!/usr/bin/env bats
# The command line (DESIGN §7, man page OPTIONS): every common option works
# before the subcommand and after it, read by the one option table, with
# the same value checks and messages in both places.

load helpers

setup_file() {
	etcd_setup_file
}

teardown_file() {
	etcd_teardown_file
}

@test "-q before the subcommand: inspect succeeds and prints what 'inspect -q' prints" {
	mkws a
	run -0 --separate-stderr wsl inspect -q "$(W a)"
	local after=$output
	run -0 --separate-stderr wsl -q inspect "$(W a)"
	[ "$output" = "$after" ] || fail "before: '$output', after: '$after'"
	jq_ok '.state == "free"'
}

@test "-q before the subcommand silences the --help hint of a usage error" {
	mkws a
	run -64 --separate-stderr wsl -q acquire --no-such-option "$(W a)"
	[ "${#stderr_lines[@]}" -eq 1 ] || fail "expected one stderr line, got: '$stderr'"
	[[ ${stderr_lines[0]} == "wslock: "*"[WSLOCK_USAGE]" ]] || fail "stderr: '$stderr'"
}

@test "--pretty before the subcommand indents the JSON as after it" {
	mkws a
	run -0 --separate-stderr wsl inspect --pretty "$(W a)"
	local after=$output
	run -0 --separate-stderr wsl --pretty inspect "$(W a)"
	[ "$output" = "$after" ] || fail "before: '$output', after: '$after'"
	[ "${#lines[@]}" -gt 1 ] || fail "not indented: '$output'"
	[[ ${lines[1]} == "  "* ]] || fail "not indented: '$output'"
}

@test "-d DIR, -dDIR, --lock-dir DIR and --lock-dir=DIR before the subcommand name the registry" {
	mkws a b c d
	local reg=$BATS_TEST_TMPDIR/other ws
	run -0 --separate-stderr wsl -d "$reg" acquire --pid $$ "$(W a)"
	run -0 --separate-stderr wsl -d"$reg" acquire --pid $$ "$(W b)"
	run -0 --separate-stderr wsl --lock-dir "$reg" acquire --pid $$ "$(W c)"
	run -0 --separate-stderr wsl --lock-dir="$reg" acquire --pid $$ "$(W d)"
	for ws in a b c d; do
		run -0 --separate-stderr wsl inspect -d "$reg" "$(W "$ws")"
		jq_ok '.state == "held"'
		run -0 --separate-stderr wsl inspect "$(W "$ws")"
		jq_ok '.state == "free"'
	done
}

@test "-qv before the subcommand: a cluster of flags, each one as after it" {
	mkws a
	run -0 --separate-stderr wsl -qv run "$(W a)" -- true
	[[ $stderr == *"wslock: locked $(canon "$(W a)")"* ]] || fail "no verbose line: '$stderr'"
}

@test "a bad value before the subcommand is refused as after it: 64, the same message" {
	mkws a
	run -64 --separate-stderr wsl inspect --lease-ttl 1 "$(W a)"
	local after=${stderr_lines[0]}
	run -64 --separate-stderr wsl --lease-ttl 1 inspect "$(W a)"
	assert_usage_error
	[ "${stderr_lines[0]}" = "$after" ] || fail "before: '${stderr_lines[0]}', after: '$after'"
}

@test "an option before the subcommand that needs a value and has none: 64" {
	run -64 --separate-stderr wsl --lease-ttl
	assert_usage_error --no-json
	run -64 --separate-stderr wsl -d
	assert_usage_error --no-json
	run -64 --separate-stderr wsl --pretty=yes inspect --all
	assert_usage_error --no-json
}

@test "a value before the subcommand is never taken for it, nor for --" {
	mkws a
	# The registry named "run" and "--" are values, not the subcommand or
	# the end of run's options.
	run -0 --separate-stderr wsl -d "$BATS_TEST_TMPDIR/run" inspect "$(W a)"
	jq_ok '.state == "free"'
	run -0 --separate-stderr wsl --lock-dir "$BATS_TEST_TMPDIR/r" run "$(W a)" -- sh -c 'echo "$WSLOCK_WORKSPACE"'
	[ "$output" = "$(canon "$(W a)")" ] || fail "stdout: '$output'"
	[ -d "$BATS_TEST_TMPDIR/r/locks" ] || fail "the registry given before run was not used"
}

@test "--etcd-endpoints=URLS and --backend before the subcommand select etcd" {
	need_etcd
	mkws a
	run -0 --separate-stderr wsl --backend etcd --etcd-endpoints="$WSL_ETCD_EP" acquire --pid $$ "$(W a)"
	run -0 --separate-stderr wsl inspect --backend etcd --etcd-endpoints "$WSL_ETCD_EP" "$(W a)"
	jq_ok '.state == "held"'
	# The local registry saw nothing.
	run -0 --separate-stderr wsl inspect "$(W a)"
	jq_ok '.state == "free"'
}

@test "--lease-ttl 5 --backend etcd run ...: the holder's liveness lease is granted 5 s + a lock-delay of 5 s" {
	need_etcd
	mkws a
	local key="/wslock/live$(canon "$(W a)")"
	# Inside the command the lock is held: read its lease and its TTL.
	run -0 --separate-stderr wsl --lease-ttl 5 --backend etcd --etcd-endpoints "$WSL_ETCD_EP" \
		run "$(W a)" -- sh -c '
			id=$(etcdctl --endpoints="$1" get "$2" -w json | grep -o "\"lease\":[0-9]*" | cut -d: -f2)
			[ -n "$id" ] && [ "$id" != 0 ] || exit 3
			etcdctl --endpoints="$1" lease timetolive "$(printf %x "$id")"' sh "$WSL_ETCD_EP" "$key"
	[[ $output == *"granted with TTL(10s)"* ]] || fail "lease: '$output' (stderr: '$stderr')"
}
