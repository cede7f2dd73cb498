#!/usr/bin/env bats
# --retain-on-failure (run, recover -- CMD): a failed command leaves the lock
# retained (retained.json); inspect says "retained"; acquire and run get
# WSLOCK_RECOVERY_REQUIRED; nothing but an exact recover clears it.

load helpers

retained_file() { printf '%s/retained.json' "$(lock_dir_of "$1")"; }

# assert_retained WS EXIT-STATUS|null SIGNAL|null
assert_retained() {
	local f
	f=$(retained_file "$1")
	[ -f "$f" ] || fail "no retained.json for $1"
	[ "$(stat -c %a "$f")" = 600 ] || fail "retained.json mode $(stat -c %a "$f")"
	jq -e --argjson e "$2" --argjson s "$3" '
		(.reason | type == "string" and length > 0)
		and .exit_status == $e and .signal == $s
		and (.retained_at | type == "string" and test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z$"))' \
		"$f" >/dev/null || fail "retained.json: $(cat "$f")"
	inspect_json "$1"
	jq_ok '.state == "retained" and .owner != null' "$INSPECT"
}

@test "run --retain-on-failure: a non-zero exit keeps the lock retained with reason, exit status and time" {
	mkws a
	run -3 --separate-stderr wsl run --retain-on-failure --purpose "schema migration" "$(W a)" -- sh -c 'exit 3'
	[ -z "$output" ] || fail "run printed on stdout: $output"
	[ -n "$stderr" ] || fail "run did not say the lock is retained"
	assert_retained "$(W a)" 3 null
	jq_ok '.owner.purpose == "schema migration"' "$INSPECT"
	# inspect --all shows it too.
	run -0 --separate-stderr wsl inspect --all
	jq_ok "[.locks[] | select(.workspace_root == \"$(canon "$(W a)")\") | .state] == [\"retained\"]"
}

@test "run --retain-on-failure: a child killed by a signal keeps the lock retained with the signal" {
	mkws a b
	run -137 --separate-stderr wsl run --retain-on-failure "$(W a)" -- sh -c 'kill -KILL $$'
	assert_retained "$(W a)" null 9
	run -143 --separate-stderr wsl run --retain-on-failure "$(W b)" -- sh -c 'kill -TERM $$'
	assert_retained "$(W b)" null 15
}

@test "run --retain-on-failure with a successful command releases normally; without it a failure releases" {
	mkws a b
	run -0 --separate-stderr wsl run --retain-on-failure "$(W a)" -- true
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
	[ ! -e "$(lock_dir_of "$(W a)")" ] || fail "lock left behind"
	run -4 --separate-stderr wsl run "$(W b)" -- sh -c 'exit 4'
	inspect_json "$(W b)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "a retained lock: acquire and run get 69 WSLOCK_RECOVERY_REQUIRED, --reclaim-dead does not take it, nothing changes" {
	mkws a
	run -1 --separate-stderr wsl run --retain-on-failure "$(W a)" -- false
	assert_retained "$(W a)" 1 null
	before=$(registry_snapshot)
	run -69 --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	assert_json_error WSLOCK_RECOVERY_REQUIRED
	jq_ok '.error.holder != null'
	# Without -n it does not wait for a retained lock either.
	run -69 --separate-stderr timeout -k 2 10 "$WSLOCK" acquire --pid $$ "$(W a)"
	assert_json_error WSLOCK_RECOVERY_REQUIRED
	run -69 --separate-stderr wsl acquire -n --reclaim-dead --pid $$ "$(W a)"
	assert_json_error WSLOCK_RECOVERY_REQUIRED
	run -69 --separate-stderr wsl run -n "$(W a)" -- touch "$BATS_TEST_TMPDIR/ran"
	assert_run_error WSLOCK_RECOVERY_REQUIRED
	run -69 --separate-stderr wsl run -n --reclaim-dead "$(W a)" -- touch "$BATS_TEST_TMPDIR/ran"
	assert_run_error WSLOCK_RECOVERY_REQUIRED
	[ ! -e "$BATS_TEST_TMPDIR/ran" ] || fail "a command ran on a retained workspace"
	assert_same_snapshot "$before" "$(registry_snapshot)"
	[ ! -e "$WSLOCK_DIR/journal.jsonl" ] || fail "journal written"
}

@test "only an exact recover clears a retained lock" {
	mkws a
	run -2 --separate-stderr wsl run --retain-on-failure "$(W a)" -- sh -c 'exit 2'
	wsl inspect --owner "$(W a)" >"$BATS_TEST_TMPDIR/owner.json"
	old=$(cat "$BATS_TEST_TMPDIR/owner.json")
	before=$(registry_snapshot)
	jq -c '.pid_start_ticks += 1' "$BATS_TEST_TMPDIR/owner.json" >"$BATS_TEST_TMPDIR/wrong.json"
	run -65 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/wrong.json" "$(W a)"
	assert_json_error WSLOCK_OWNER_MISMATCH
	assert_same_snapshot "$before" "$(registry_snapshot)"
	run -0 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	jq_ok '.action == "recovered" and .released == true'
	jq -e --argjson o "$old" '.prior_owner == $o and .owner.recovery_of == $o.token' <<<"$output" >/dev/null || fail "$output"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
	[ ! -e "$(lock_dir_of "$(W a)")" ] || fail "lock (retained.json) left behind"
	run -0 --separate-stderr wsl run -n "$(W a)" -- true
}

@test "recover -- CMD --retain-on-failure with a failing CMD leaves the lock retained again" {
	mkws a
	run -2 --separate-stderr wsl run --retain-on-failure --operation-id op-r "$(W a)" -- sh -c 'exit 2'
	wsl inspect --owner "$(W a)" >"$BATS_TEST_TMPDIR/owner.json"
	first_tok=$(jq -r .token "$BATS_TEST_TMPDIR/owner.json")
	run -6 --separate-stderr wsl recover --retain-on-failure --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)" \
		-- sh -c 'printf %s "$WSLOCK_TOKEN" >"$1/tok"; exit 6' sh "$BATS_TEST_TMPDIR"
	assert_retained "$(W a)" 6 null
	jq -e --arg t "$(cat "$BATS_TEST_TMPDIR/tok")" --arg f "$first_tok" \
		'.owner.token == $t and .owner.recovery_of == $f and .owner.operation_id == "op-r"' <<<"$INSPECT" >/dev/null ||
		fail "retained owner is not the recovered one: $INSPECT"
	run -69 --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	assert_json_error WSLOCK_RECOVERY_REQUIRED
	# The old document no longer matches; the new one clears it.
	run -65 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	assert_json_error WSLOCK_OWNER_MISMATCH
	wsl inspect --owner "$(W a)" >"$BATS_TEST_TMPDIR/owner2.json"
	run -0 --separate-stderr wsl recover --retain-on-failure --expected-owner "$BATS_TEST_TMPDIR/owner2.json" "$(W a)" -- true
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "recover -- CMD failing by signal with --retain-on-failure is retained with the signal; without it, released" {
	mkws a b
	run -1 --separate-stderr wsl run --retain-on-failure "$(W a)" -- false
	wsl inspect --owner "$(W a)" >"$BATS_TEST_TMPDIR/a.json"
	run -143 --separate-stderr wsl recover --retain-on-failure --expected-owner "$BATS_TEST_TMPDIR/a.json" "$(W a)" -- sh -c 'kill -TERM $$'
	assert_retained "$(W a)" null 15
	run -1 --separate-stderr wsl run --retain-on-failure "$(W b)" -- false
	wsl inspect --owner "$(W b)" >"$BATS_TEST_TMPDIR/b.json"
	run -9 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/b.json" "$(W b)" -- sh -c 'exit 9'
	inspect_json "$(W b)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "a retained lock survives reclaim, with and without --force --reason" {
	mkws a
	run -1 --separate-stderr wsl run --retain-on-failure "$(W a)" -- false
	before=$(registry_snapshot)
	run -0 --separate-stderr wsl reclaim
	jq_ok "[.candidates[] | select(.workspace_root == \"$(canon "$(W a)")\") | .reclaimable] == [false]"
	run -0 --separate-stderr wsl reclaim --yes
	jq_ok '.reclaimed == []'
	jq_ok "[.skipped[].workspace_root] == [\"$(canon "$(W a)")\"]"
	# Named, and not reclaimed: reclaim says so with the reason's status.
	run -69 --separate-stderr wsl reclaim --yes --force --reason "clean everything" "$(W a)"
	jq_ok '.reclaimed == []'
	assert_same_snapshot "$before" "$(registry_snapshot)"
	inspect_json "$(W a)"
	jq_ok '.state == "retained"' "$INSPECT"
}

@test "a retained lock still held by the failed command's background process is live: recover waits for it to end" {
	mkws a
	T=$BATS_TEST_TMPDIR
	run -3 --separate-stderr wsl run --retain-on-failure "$(W a)" -- sh -c '
		( while [ ! -e "$1/GO" ]; do sleep 0.05; done ) </dev/null >/dev/null 2>&1 &
		echo $! >"$1/bg.pid"
		exit 3' sh "$T"
	bg=$(cat "$T/bg.pid")
	track_pid "$bg"
	inspect_json "$(W a)"
	jq_ok '.state == "retained" and .liveness == "live"' "$INSPECT"
	wsl inspect --owner "$(W a)" >"$T/owner.json"
	before=$(registry_snapshot)
	run -75 --separate-stderr wsl recover --expected-owner "$T/owner.json" "$(W a)"
	assert_json_error WSLOCK_OWNER_LIVE
	assert_same_snapshot "$before" "$(registry_snapshot)"
	touch "$T/GO"
	wait_for "! is_running $bg" 10
	inspect_json "$(W a)"
	jq_ok '.state == "retained" and .liveness == "dead"' "$INSPECT"
	run -0 --separate-stderr wsl recover --expected-owner "$T/owner.json" "$(W a)"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "release --retain --reason: an acquire holder leaves its lock retained with the reason; the next job gets 69; an exact recover clears it" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	local owner_sum
	owner_sum=$(b2sum <"$(lock_dir_of "$(W a)")/owner.json")
	run -0 --separate-stderr wsl release --token "$(json_get .token "$OWNER")" \
		--retain --reason "deploy stopped half way" "$(W a)"
	jq_ok ".action == \"retained\" and .workspace_root == \"$(canon "$(W a)")\" and .owner == $OWNER"
	jq_ok '.retained.reason == "deploy stopped half way" and .retained.exit_status == null and .retained.signal == null'
	[ "$(b2sum <"$(lock_dir_of "$(W a)")/owner.json")" = "$owner_sum" ] || fail "owner.json changed"
	assert_retained "$(W a)" null null
	jq_ok ".retained.reason == \"deploy stopped half way\" and .retained.token == $(jq .token <<<"$OWNER")" "$INSPECT"
	run -0 --separate-stderr wsl inspect --format text "$(W a)"
	[[ $output == *"retained: deploy stopped half way, at "* ]] || fail "text view: $output"
	local before
	before=$(registry_snapshot)
	run -69 --separate-stderr wsl run -n "$(W a)" -- echo RAN
	assert_run_error WSLOCK_RECOVERY_REQUIRED
	# Its holder still runs, so recover would give 75: the message says
	# to wait for it to end first.
	[[ $stderr == *"which is live (pid $SLEEPER_PID is running"*"once its holder has ended, 'wslock recover'"* ]] ||
		fail "stderr: $stderr"
	[[ $stderr != *"then 'wslock recover'"* ]] || fail "stderr: $stderr"
	printf '%s' "$OWNER" >"$BATS_TEST_TMPDIR/owner.json"
	run -75 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	assert_json_error WSLOCK_OWNER_LIVE
	run -69 --separate-stderr wsl acquire -n --reclaim-dead --pid $$ "$(W a)"
	assert_json_error WSLOCK_RECOVERY_REQUIRED
	run -69 --separate-stderr wsl release --token "$(json_get .token "$OWNER")" "$(W a)"
	assert_json_error WSLOCK_RECOVERY_REQUIRED
	run -69 --separate-stderr wsl release --token "$(json_get .token "$OWNER")" --retain --reason again "$(W a)"
	assert_json_error WSLOCK_RECOVERY_REQUIRED
	assert_same_snapshot "$before" "$(registry_snapshot)"
	kill -KILL "$SLEEPER_PID"
	wait_exit "$SLEEPER_PID" 10
	run -69 --separate-stderr wsl run -n "$(W a)" -- echo RAN
	[[ $stderr == *"says why, then 'wslock recover'"* ]] || fail "stderr: $stderr"
	run -0 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	jq_ok '.action == "recovered"'
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "release --retain: --reason needed and only with it; another token, a free workspace and a running run are refused, nothing changed" {
	mkws a b c
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	local tok before
	tok=$(json_get .token "$OWNER")
	before=$(registry_snapshot)
	run -64 --separate-stderr wsl release --token "$tok" --retain "$(W a)"
	assert_usage_error
	run -64 --separate-stderr wsl release --token "$tok" --reason why "$(W a)"
	assert_usage_error
	run -78 --separate-stderr wsl release --token 0123456789abcdef0123456789abcdef --retain --reason why "$(W a)"
	assert_json_error WSLOCK_OWNERSHIP_LOST
	run -66 --separate-stderr wsl release --token "$tok" --retain --reason why "$(W b)"
	assert_json_error WSLOCK_NOT_HELD
	assert_same_snapshot "$before" "$(registry_snapshot)"
	hold "$(W c)"
	before=$(registry_snapshot)
	run -75 --separate-stderr wsl release --token "$(jq -r .token "$(lock_dir_of "$(W c)")/owner.json")" \
		--retain --reason why "$(W c)"
	assert_json_error WSLOCK_OWNER_LIVE
	assert_same_snapshot "$before" "$(registry_snapshot)"
	unhold
	[ "$WAIT_STATUS" -eq 0 ] || fail "the run failed: $WAIT_STATUS"
	inspect_json "$(W c)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "run --retain-on-failure of a command that cannot be started (not found 127, not executable 126) takes no lock and retains nothing; a real exit 127 still retains" {
	mkws a
	run -127 --separate-stderr wsl run --retain-on-failure "$(W a)" -- /nonexistent/command
	[[ $stderr == "wslock: cannot run /nonexistent/command: "*"no lock taken [WSLOCK_OS]" ]] || fail "stderr: $stderr"
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "free"'
	printf '#!/bin/sh\n' >"$BATS_TEST_TMPDIR/noexec"
	chmod 0644 "$BATS_TEST_TMPDIR/noexec"
	run -126 --separate-stderr wsl run --retain-on-failure "$(W a)" "$(W a)/../other" -- "$BATS_TEST_TMPDIR/noexec"
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "free"'
	# not in PATH
	run -127 --separate-stderr env PATH=/nonexistent "$WSLOCK" run --retain-on-failure "$(W a)" -- true
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "free"'
	[ ! -e "$WSLOCK_DIR/journal.jsonl" ]
	# A command that ran and exited 127 is a failure like any other.
	run -127 --separate-stderr wsl run --retain-on-failure "$(W a)" -- sh -c 'exit 127'
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "retained" and .retained.reason == "command exited with status 127"'
}
