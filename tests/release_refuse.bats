#!/usr/bin/env bats
# release never frees a lock whose live kernel lock is held (issue 12.2,
# DESIGN.md section 2): a token is printed everywhere, so it cannot be
# enough to displace a running `wslock run`.

load helpers

@test "issue 12.2: release --token of a live run's lock is refused with 75 WSLOCK_OWNER_LIVE and changes nothing" {
	mkws a
	hold "$(W a)"
	tok=$(wsl inspect --owner "$(W a)" | jq -r .token)
	before=$(registry_snapshot --strict)
	run -75 --separate-stderr wsl release --token "$tok" "$(W a)"
	assert_json_error WSLOCK_OWNER_LIVE
	[[ $stderr == *"releases itself"* ]] || fail "the message does not say the lock releases itself: $stderr"
	assert_same_snapshot "$before" "$(registry_snapshot --strict)"
	run -75 --separate-stderr wsl run -n "$(W a)" -- echo SECOND
	assert_run_error WSLOCK_BUSY
	unhold
	[ "$WAIT_STATUS" = 0 ] || fail "holder exit $WAIT_STATUS: $(cat "$HOLD_DIR/err")"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "release --token is refused while a command whose wslock was killed still holds the live file" {
	mkws a
	hold "$(W a)"
	tok=$(wsl inspect --owner "$(W a)" | jq -r .token)
	kill -KILL "$HOLD_PID"
	wait_exit "$HOLD_PID" 10
	is_running "$HOLD_CHILD" || fail "the command ended with its wslock"
	run -75 --separate-stderr wsl release --token "$tok" "$(W a)"
	assert_json_error WSLOCK_OWNER_LIVE
	inspect_json "$(W a)"
	jq_ok ".state == \"held\" and .owner.token == \"$tok\"" "$INSPECT"
}

@test "release --token of a recovered run's lock is refused while its command runs" {
	mkws a
	dead_acquired "$(W a)"
	printf '%s' "$DEAD_OWNER" >"$BATS_TEST_TMPDIR/o.json"
	d=$BATS_TEST_TMPDIR/r
	mkdir "$d"
	"$WSLOCK" recover --expected-owner "$BATS_TEST_TMPDIR/o.json" "$(W a)" -- sh -c '
		printf %s "$WSLOCK_TOKEN" >"$1/tok.tmp" && mv "$1/tok.tmp" "$1/tok"
		i=0; while [ ! -e "$1/GO" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done' sh "$d" \
		</dev/null >/dev/null 2>"$d/err" 3>&- &
	rpid=$!
	track_pid $rpid
	wait_for "[ -e '$d/tok' ]" 20
	run -75 --separate-stderr wsl release --token "$(cat "$d/tok")" "$(W a)"
	assert_json_error WSLOCK_OWNER_LIVE
	touch "$d/GO"
	wait_exit $rpid 20
	[ "$WAIT_STATUS" = 0 ] || fail "recover exit $WAIT_STATUS: $(cat "$d/err")"
}

@test "release of an acquired lock still works with its token" {
	mkws a
	acquire_as $$ "$(W a)"
	run -0 --separate-stderr wsl release --token "$(json_get .token "$OWNER")" "$(W a)"
	jq_ok '.action == "released"'
}

@test "release waits for a nested run under an acquired lock, and -n refuses instead" {
	mkws a
	d=$BATS_TEST_TMPDIR/n
	mkdir "$d"
	acquire_as $$ "$(W a)"
	tok=$(json_get .token "$OWNER")
	# A nested run: it descends from the holder (this shell).
	"$WSLOCK" run -n "$(W a)" -- sh -c 'touch "$1/INNER"; i=0; while [ ! -e "$1/GO" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; touch "$1/INNER_DONE"' sh "$d" \
		</dev/null >/dev/null 2>"$d/inner.err" 3>&- &
	ipid=$!
	track_pid $ipid
	wait_for "[ -e '$d/INNER' ] || ! is_running $ipid" 20
	[ -e "$d/INNER" ] || fail "the nested run did not start: $(cat "$d/inner.err")"
	run -75 --separate-stderr wsl release -n --token "$tok" "$(W a)"
	assert_json_error WSLOCK_BUSY
	inspect_json "$(W a)"
	jq_ok '.state == "held"' "$INSPECT"
	"$WSLOCK" release --token "$tok" "$(W a)" </dev/null >"$d/rel.out" 2>"$d/rel.err" 3>&- &
	rel=$!
	track_pid $rel
	wait_for "grep -q nested '$d/rel.err'" 20
	is_running $rel || fail "release did not wait: $(cat "$d/rel.out") $(cat "$d/rel.err")"
	touch "$d/GO"
	wait_exit $rel 20
	[ "$WAIT_STATUS" = 0 ] || fail "release exit $WAIT_STATUS: $(cat "$d/rel.err")"
	[ -e "$d/INNER_DONE" ] || fail "release returned before the nested run ended"
	jq -e '.action == "released"' "$d/rel.out" >/dev/null || fail "release output: $(cat "$d/rel.out")"
}
