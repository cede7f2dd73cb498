#!/usr/bin/env bats
# The registry never freezes (issue 12.5, DESIGN.md section 5): readers take
# no lock on .coordination; every wait for it is bounded by -w/-n and ends
# with WSLOCK_REGISTRY_BUSY naming the pid that holds it, never with a
# workspace called busy that is free.

load helpers

# stop_coordinator [again]: a process that holds .coordination exclusively and is
# then stopped (as a wslock suspended with Ctrl-Z inside it would be). Sets
# COORD_PID.
stop_coordinator() {
	mkws .init
	# again: the registry is there, and .init held already
	[ "${1:-}" = again ] ||
		wsl acquire --pid $$ "$(W .init)" >/dev/null || fail "cannot create the registry"
	# -F: flock execs the command itself, so the pid /proc/locks shows is
	# the one that holds the lock, and ending it ends the lock.
	flock -F -x "$WSLOCK_DIR/.coordination" sleep 300 </dev/null >/dev/null 2>&1 3>&- &
	COORD_PID=$!
	track_pid $COORD_PID
	wait_for "! flock -n -s '$WSLOCK_DIR/.coordination' true" 10
	kill -STOP $COORD_PID
}

teardown_coordinator() {
	kill -TERM "$COORD_PID" 2>/dev/null || true
	kill -CONT "$COORD_PID" 2>/dev/null || true
	wait_exit "$COORD_PID" 10
}

local_setup() { COORD_PID=; }

# sigterm_blocked PID: PID has SIGTERM (15: bit 14) in its blocked mask.
sigterm_blocked() {
	local mask
	mask=$(sed -n 's/^SigBlk:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null) || return 1
	[ -n "$mask" ] && (( (16#$mask >> 14) & 1 ))
}

# bounded CMD...: the command, killed (status 124) if it hangs.
bounded() { timeout -k 5 30 "$@"; }

@test "issue 12.5: inspect, inspect --all and the reclaim preview finish while a stopped process holds .coordination" {
	mkws a
	hold "$(W a)"
	stop_coordinator
	run -0 --separate-stderr bounded "$WSLOCK" inspect "$(W a)"
	jq_ok '.state == "held" and .liveness == "live"'
	run -0 --separate-stderr bounded "$WSLOCK" inspect --all
	jq_ok '[.locks[].state] | length == 2'
	run -0 --separate-stderr bounded "$WSLOCK" inspect --owner "$(W a)"
	jq_ok '.token | length == 32'
	run -0 --separate-stderr bounded "$WSLOCK" reclaim
	jq_ok '.action == "preview"'
	run -0 --separate-stderr bounded "$WSLOCK" inspect --format text --all
	teardown_coordinator
}

@test "issue 12.5: run -n and acquire -n on a free workspace give WSLOCK_REGISTRY_BUSY naming the pid, never WSLOCK_BUSY" {
	mkws a
	stop_coordinator
	run -75 --separate-stderr bounded "$WSLOCK" run -n "$(W a)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_REGISTRY_BUSY
	[[ $stderr == *"pid $COORD_PID"* ]] || fail "the holder's pid is not named: $stderr"
	[[ $stderr != *WSLOCK_BUSY* ]] || fail "a free workspace was called busy: $stderr"
	run -75 --separate-stderr bounded "$WSLOCK" acquire -n --pid $$ "$(W a)"
	assert_json_error WSLOCK_REGISTRY_BUSY
	[[ $stderr == *"pid $COORD_PID"* ]] || fail "the holder's pid is not named: $stderr"
	run -75 --separate-stderr bounded "$WSLOCK" run -w 0.5 "$(W a)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_REGISTRY_BUSY
	teardown_coordinator
	run -0 --separate-stderr bounded "$WSLOCK" run -n "$(W a)" -- echo ran
	[ "$output" = ran ]
}

@test "issue 12.5: -E applies to a busy workspace, not to a busy registry" {
	mkws a
	stop_coordinator
	run -75 --separate-stderr bounded "$WSLOCK" run -n -E 3 "$(W a)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_REGISTRY_BUSY
	teardown_coordinator
}

@test "issue 12.5: release, recover and reclaim --yes accept -n and -w and give WSLOCK_REGISTRY_BUSY" {
	mkws a b
	acquire_as $$ "$(W a)"
	tok=$(json_get .token "$OWNER")
	dead_acquired "$(W b)"
	printf '%s' "$DEAD_OWNER" >"$BATS_TEST_TMPDIR/b.json"
	stop_coordinator
	for opt in -n "-w 0.5"; do
		# shellcheck disable=SC2086
		run -75 --separate-stderr bounded "$WSLOCK" release $opt --token "$tok" "$(W a)"
		assert_json_error WSLOCK_REGISTRY_BUSY
		[[ $stderr == *"pid $COORD_PID"* ]] || fail "release $opt: pid not named: $stderr"
		# shellcheck disable=SC2086
		run -75 --separate-stderr bounded "$WSLOCK" recover $opt --expected-owner "$BATS_TEST_TMPDIR/b.json" "$(W b)"
		assert_json_error WSLOCK_REGISTRY_BUSY
		# shellcheck disable=SC2086
		run -75 --separate-stderr bounded "$WSLOCK" reclaim --yes $opt
		assert_json_error WSLOCK_REGISTRY_BUSY
	done
	teardown_coordinator
	run -0 --separate-stderr bounded "$WSLOCK" release -n --token "$tok" "$(W a)"
	run -0 --separate-stderr bounded "$WSLOCK" recover -w 5 --expected-owner "$BATS_TEST_TMPDIR/b.json" "$(W b)"
	run -0 --separate-stderr bounded "$WSLOCK" reclaim --yes -n
}

@test "issue 12.5: run -n on a free workspace succeeds while another workspace is held (the registry wait stays short and free is free)" {
	mkws a b
	hold "$(W a)"
	for _ in 1 2 3 4 5; do
		run -0 --separate-stderr bounded "$WSLOCK" run -n "$(W b)" -- echo ran
		[ "$output" = ran ] || fail "stdout '$output' stderr '$stderr'"
	done
}

@test "SIGTERM ends an unbounded wait for a stopped holder of .coordination (run and acquire: 143, nothing written, the command never runs)" {
	mkws a
	stop_coordinator
	before=$(registry_snapshot)
	T=$BATS_TEST_TMPDIR
	for cmd in run acquire; do
		if [ "$cmd" = run ]; then
			"$WSLOCK" run "$(W a)" -- touch "$T/RAN" </dev/null >/dev/null 2>"$T/err.$cmd" 3>&- &
		else
			"$WSLOCK" acquire --pid $$ "$(W a)" </dev/null >/dev/null 2>"$T/err.$cmd" 3>&- &
		fi
		pid=$!
		track_pid $pid
		# Only once SIGTERM is blocked (bit 15 of SigBlk) does the signal
		# test the wait: before that it would kill wslock by default.
		wait_for "sigterm_blocked $pid" 10 || fail "$cmd never blocked SIGTERM"
		kill -TERM $pid
		wait_exit $pid 10 || fail "$cmd did not end on SIGTERM while .coordination is held by a stopped process"
		[ "$WAIT_STATUS" = 143 ] || fail "$cmd: exit $WAIT_STATUS, want 143: $(cat "$T/err.$cmd")"
	done
	[ ! -e "$T/RAN" ] || fail "the command ran"
	assert_same_snapshot "$before" "$(registry_snapshot)"
	teardown_coordinator
}

@test "a wait for a stopped holder of .coordination says so once, naming the pid and the way on (run, acquire, release; -q silences it)" {
	mkws a b c
	acquire_as $$ "$(W a)"
	tok=$(json_get .token "$OWNER")
	stop_coordinator
	T=$BATS_TEST_TMPDIR
	"$WSLOCK" run "$(W b)" -- touch "$T/RAN" </dev/null >/dev/null 2>"$T/err.run" 3>&- &
	p_run=$!
	track_pid $p_run
	"$WSLOCK" acquire --pid $$ "$(W c)" </dev/null >/dev/null 2>"$T/err.acquire" 3>&- &
	p_acq=$!
	track_pid $p_acq
	"$WSLOCK" release --token "$tok" "$(W a)" </dev/null >/dev/null 2>"$T/err.release" 3>&- &
	p_rel=$!
	track_pid $p_rel
	for cmd in run acquire release; do
		wait_for "grep -q 'waiting for the registry' '$T/err.$cmd'" 20 ||
			fail "$cmd: no notice: $(cat "$T/err.$cmd")"
	done
	for cmd in run acquire release; do
		grep -q "pid $COORD_PID holds its lock (.coordination) and is stopped; 'kill -CONT $COORD_PID'.*-w SECONDS" "$T/err.$cmd" ||
			fail "$cmd: the notice does not name the stopped pid and the way on: $(cat "$T/err.$cmd")"
	done
	[ ! -e "$T/RAN" ] || fail "the command ran while the registry was held"
	kill -CONT "$COORD_PID"
	teardown_coordinator
	wait_exit $p_run 20 && [ "$WAIT_STATUS" = 0 ] || fail "run: exit $WAIT_STATUS: $(cat "$T/err.run")"
	[ -e "$T/RAN" ] || fail "the command did not run"
	wait_exit $p_rel 20 && [ "$WAIT_STATUS" = 0 ] || fail "release: exit $WAIT_STATUS: $(cat "$T/err.release")"
	wait_exit $p_acq 20 && [ "$WAIT_STATUS" = 0 ] || fail "acquire: exit $WAIT_STATUS: $(cat "$T/err.acquire")"
	for cmd in run acquire release; do
		[ "$(wc -l <"$T/err.$cmd")" -eq 1 ] || fail "$cmd: not one line: $(cat "$T/err.$cmd")"
	done
	# A bounded wait longer than the notice's delay: the notice, then the
	# error; with -q only the error.
	stop_coordinator again
	run -75 --separate-stderr bounded "$WSLOCK" run -w 2 "$(W a)" -- echo SHOULD-NOT-RUN
	[ "${#stderr_lines[@]}" -eq 2 ] && [[ ${stderr_lines[0]} == *"is stopped; 'kill -CONT $COORD_PID'"* ]] &&
		[[ ${stderr_lines[1]} == *"[WSLOCK_REGISTRY_BUSY]" ]] || fail "not the notice and the error: $stderr"
	run -75 --separate-stderr bounded "$WSLOCK" -q run -w 2 "$(W a)" -- echo SHOULD-NOT-RUN
	[ "${#stderr_lines[@]}" -eq 1 ] && [[ $stderr == *"[WSLOCK_REGISTRY_BUSY]" ]] || fail "-q: $stderr"
	teardown_coordinator
}
