#!/usr/bin/env bats
# Scripts get the facts, not only the words: a busy or timed-out error
# document says which workspace was asked for, whose lock is in the way and
# how the two relate, and the timeout; `reclaim --yes W` fails for a named
# workspace it did not reclaim, with that reason's code; `inspect
# --operation-id` finds an operation's locks (tests/nextstep.bats).

load helpers

@test "facts: WSLOCK_BUSY carries requested, holder workspace and relation (same, ancestor, descendant)" {
	mkws top top/mid top/mid/low other
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W top/mid)"
	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W top/mid)"
	jq_ok '.error.code == "WSLOCK_BUSY" and .error.relation == "same" and (.error | has("timeout_s") | not)'
	[ "$(json_get .error.requested)" = "$(W top/mid)" ]
	[ "$(json_get .error.workspace_root)" = "$(W top/mid)" ]
	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W top/mid/low)"
	jq_ok '.error.relation == "ancestor"'
	[ "$(json_get .error.requested)" = "$(W top/mid/low)" ]
	[ "$(json_get .error.workspace_root)" = "$(W top/mid)" ]
	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W top)"
	jq_ok '.error.relation == "descendant"'
	[ "$(json_get .error.requested)" = "$(W top)" ]
}

@test "facts: WSLOCK_TIMEOUT carries the timeout that expired" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	run -75 --separate-stderr wsl acquire -w 0.25 --pid $$ "$(W a)"
	jq_ok '.error.code == "WSLOCK_TIMEOUT" and .error.timeout_s == 0.25 and .error.relation == "same"'
	run -9 --separate-stderr wsl acquire -w 0.1 -E 9 --pid $$ "$(W a)"
	jq_ok '.error.timeout_s == 0.1'
}

@test "facts: reclaim --yes W exits with the reason's code for a named workspace it did not reclaim" {
	mkws live retained dead unknown
	start_sleeper
	local live=$SLEEPER_PID
	acquire_as "$live" "$(W live)"
	run -3 wsl run -q --retain-on-failure "$(W retained)" -- sh -c 'exit 3'
	dead_acquired "$(W dead)"
	run -75 --separate-stderr wsl reclaim --yes "$(W live)"
	[[ $stderr == *"$(W live)"*"[WSLOCK_OWNER_LIVE]"* ]] || fail "$stderr"
	jq_ok '.action == "reclaimed" and (.skipped | length) == 1'
	run -69 --separate-stderr wsl reclaim --yes "$(W retained)"
	[[ $stderr == *"[WSLOCK_RECOVERY_REQUIRED]"* ]] || fail "$stderr"
	# A reclaimable one next to it is still reclaimed; the status says the other.
	run -75 --separate-stderr wsl reclaim --yes "$(W dead)" "$(W live)"
	jq_ok '(.reclaimed | length) == 1 and (.skipped | length) == 1'
	[ "$(wsl inspect "$(W dead)" | jq -r .state)" = free ]
	# Unknown liveness (another host) without --force: 69.
	acquire_as "$live" "$(W unknown)"
	WSLOCK_HOST=elsewhere run -69 --separate-stderr wsl reclaim --yes "$(W unknown)"
	[[ $stderr == *"[WSLOCK_LIVENESS_UNKNOWN]"* ]] || fail "$stderr"
	# Without names, what is left alone is no failure.
	run -0 --separate-stderr wsl reclaim --yes
}
