#!/usr/bin/env bats
# Exit codes and error shapes (DESIGN §6): usage errors -> 64 with one
# stderr line and a --help hint; JSON error objects on stdout for every command but run.

load helpers

@test "unknown option: 64 WSLOCK_USAGE, one stderr line and a hint, JSON on stdout" {
	mkws a
	run -64 --separate-stderr wsl acquire --no-such-option "$(W a)"
	assert_usage_error
	run -64 --separate-stderr wsl inspect --no-such-option "$(W a)"
	assert_usage_error
	run -64 --separate-stderr wsl release --token 0123456789abcdef0123456789abcdef --bogus "$(W a)"
	assert_usage_error
	[ ! -e "$(lock_dir_of "$(W a)")" ]
}

@test "unknown option to run: 64, one stderr line and a hint, nothing on stdout, command not run" {
	mkws a
	run -64 --separate-stderr wsl run --no-such-option "$(W a)" -- echo SHOULD-NOT-RUN
	assert_usage_error --run
}

@test "unknown global option: 64 with one stderr line and a hint" {
	run -64 --separate-stderr wsl --no-such-option inspect --all
	assert_usage_error --no-json
}

@test "unknown subcommand: 64 with one stderr line and a hint" {
	run -64 --separate-stderr wsl frobnicate
	assert_usage_error --no-json
}

@test "no subcommand at all: 64" {
	run -64 --separate-stderr wsl
	[ "${#stderr_lines[@]}" -ge 1 ] || fail "no stderr"
}

@test "missing workspace: 64 for acquire, release, inspect, run" {
	run -64 --separate-stderr wsl acquire --pid $$
	assert_usage_error
	run -64 --separate-stderr wsl release --token 0123456789abcdef0123456789abcdef
	assert_usage_error
	run -64 --separate-stderr wsl inspect
	assert_usage_error
	run -64 --separate-stderr wsl run -- echo SHOULD-NOT-RUN
	assert_usage_error --run
}

@test "two workspaces that nest (several at once must not overlap): 64, nothing locked" {
	mkws a/b
	run -64 --separate-stderr wsl acquire --pid $$ "$(W a)" "$(W a/b)"
	assert_usage_error
	[ ! -e "$(lock_dir_of "$(W a)")" ] && [ ! -e "$(lock_dir_of "$(W a/b)")" ]
}

@test "inspect with both a workspace and --all: 64" {
	mkws a
	run -64 --separate-stderr wsl inspect --all "$(W a)"
	assert_usage_error
}

@test "run without -- : 64, one stderr line and a hint, nothing on stdout, nothing run" {
	mkws a
	run -64 --separate-stderr wsl run "$(W a)" echo SHOULD-NOT-RUN
	assert_usage_error --run
	run -64 --separate-stderr wsl run "$(W a)"
	assert_usage_error --run
}

@test "run with -- but no command: 64, one stderr line and a hint, nothing on stdout" {
	mkws a
	run -64 --separate-stderr wsl run "$(W a)" --
	assert_usage_error --run
	[ ! -e "$WSLOCK_DIR/locks/$(lock_key_of "$(W a)")" ]
}

@test "options of the command after -- are the command's" {
	mkws a
	run -0 --separate-stderr wsl run "$(W a)" -- sh -c 'echo "$1 $2"' sh -n --bogus
	[ "$output" = "-n --bogus" ] || fail "stdout: $output"
}

@test "a usage error in run is reported before any wait for the lock" {
	mkws a
	acquire_as $$ "$(W a)"
	run -64 --separate-stderr wsl run -E 999 "$(W a)" -- true
	assert_usage_error --run
}

@test "error objects carry code and message; stderr names the holder" {
	mkws a
	hold --purpose 'err-holder' "$(W a)"
	hpid=$(wsl inspect --owner "$(W a)" | jq -r .pid)
	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	assert_json_error WSLOCK_BUSY
	jq_ok '.error | (.code | type == "string") and (.message | type == "string")'
	[[ $stderr == *"$hpid"* ]] || fail "stderr does not name holder pid $hpid: $stderr"
	jq_ok ".error.workspace_root == null or .error.workspace_root == \"$(canon "$(W a)")\""
	jq_ok ".error.holder == null or .error.holder.pid == $hpid"
}

@test "run failures print nothing on stdout (busy, missing workspace, corrupt, unsafe)" {
	mkws a b
	hold "$(W a)"
	run -75 --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_BUSY
	run -66 --separate-stderr wsl run -n "$(W missing)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_NO_WORKSPACE
	acquire_as $$ "$(W b)"
	printf 'garbage' | put_owner "$(W b)"
	run -65 --separate-stderr wsl run -n "$(W b)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_LOCK_CORRUPT
	run -77 --separate-stderr wsl run -n / -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_UNSAFE_PATH
}

@test "JSON error for a missing workspace names the code and exits 66" {
	run -66 --separate-stderr wsl acquire -n --pid $$ "$(W missing)"
	assert_json_error WSLOCK_NO_WORKSPACE
}

@test "a workspace that is a regular file is refused (not locked)" {
	touch "$BATS_TEST_TMPDIR/file"
	run --separate-stderr wsl acquire -n --pid $$ "$BATS_TEST_TMPDIR/file"
	[ "$status" -ne 0 ] || fail "acquired a regular file as workspace"
	jq_ok '.error.code | type == "string"'
}

@test "-h and --help succeed for the program and each subcommand" {
	run -0 wsl --help
	[ -n "$output" ]
	for c in acquire release run inspect recover reclaim; do
		run -0 wsl "$c" --help
		[ -n "$output" ] || fail "$c --help printed nothing"
		run -0 wsl "$c" -h
		[ -n "$output" ] || fail "$c -h printed nothing"
	done
}

@test "-V / --version succeed and print a version" {
	run -0 wsl -V
	[[ $output =~ [0-9]+\.[0-9]+ ]] || fail "version: $output"
	run -0 wsl --version
	[[ $output =~ [0-9]+\.[0-9]+ ]] || fail "version: $output"
}

@test "--pretty indents error objects too" {
	mkws a
	run -66 --separate-stderr wsl release --pretty --token 0123456789abcdef0123456789abcdef "$(W a)"
	[ "${#lines[@]}" -gt 1 ] || fail "not indented: $output"
	jq_ok '.error.code == "WSLOCK_NOT_HELD"'
}
