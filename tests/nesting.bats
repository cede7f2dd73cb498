#!/usr/bin/env bats
# Nesting by proof, not by token (DESIGN.md section 2, issue 12): a run or
# acquire nests without locking only when it holds a descriptor of the
# lock's own live file or descends from the live holder; the outer run
# holds the lock until every nested run under it has ended.

load helpers

# nested_job DIR: a command for `wslock run` that marks its start, waits
# for DIR/GO (bounded) and marks its end.
nested_job() {
	printf '%s' 'touch "$1/INNER"; i=0; while [ ! -e "$1/GO" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; touch "$1/INNER_DONE"'
}

@test "issue 12.1: a stale WSLOCK_TOKEN of a dead owner gets recovery required, not the lock" {
	mkws a
	dead_acquired "$(W a)"
	tok=$(json_get .token "$DEAD_OWNER")
	WSLOCK_TOKEN=$tok run -69 --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_RECOVERY_REQUIRED
	# Plain run gets the same.
	run -69 --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_RECOVERY_REQUIRED
	inspect_json --owner "$(W a)"
	[ "$INSPECT" = "$(jq -c . <<<"$DEAD_OWNER")" ] || fail "owner changed: $INSPECT"
}

@test "issue 12.1: a leaked WSLOCK_TOKEN of a retained lock does not skip retention" {
	mkws a
	run -3 --separate-stderr wsl run --retain-on-failure "$(W a)" -- sh -c 'exit 3'
	tok=$(wsl inspect --owner "$(W a)" | jq -r .token)
	[ "${#tok}" = 32 ] || fail "no retained owner: $tok"
	WSLOCK_TOKEN=$tok run -69 --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_RECOVERY_REQUIRED
	WSLOCK_TOKEN=$tok run -69 --separate-stderr wsl run -n "$(W a)/." -- echo SHOULD-NOT-RUN
	inspect_json "$(W a)"
	jq_ok '.state == "retained"' "$INSPECT"
}

@test "issue 12.1: the token of a live holder that is not an ancestor grants nothing" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	tok=$(json_get .token "$OWNER")
	WSLOCK_TOKEN=$tok WSLOCK_OWNER=$OWNER WSLOCK_WORKSPACE=$(W a) \
		run -75 --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_BUSY
}

@test "issue 12.3: a nested background run keeps the outer run holding; the outer says so once and exits with its command's status" {
	mkws a
	d=$BATS_TEST_TMPDIR/n
	mkdir "$d"
	"$WSLOCK" run "$(W a)" -- sh -c '
		"$1" run "$2" -- sh -c "$4" sh "$3" </dev/null >"$3/inner.out" 2>"$3/inner.err" &
		i=0; while [ ! -e "$3/INNER" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
		touch "$3/OUTER_CMD_DONE"; exit 5' sh "$WSLOCK" "$(W a)" "$d" "$(nested_job)" \
		</dev/null >"$d/out" 2>"$d/err" 3>&- &
	opid=$!
	track_pid $opid
	# Bounds for a loaded 2-core machine (a full make check beside other
	# builds): the nested wslock may take seconds to start.
	wait_for "[ -e '$d/OUTER_CMD_DONE' ]" 70
	[ -e "$d/INNER" ] || fail "the nested run did not start: $(cat "$d/inner.err")"
	# The outer's command has ended; the nested run still runs: the outer
	# waits (and says so) instead of releasing.
	wait_for "grep -q nested '$d/err'" 20
	is_running $opid || fail "outer exited while the nested run still ran: $(cat "$d/err")"
	run -75 --separate-stderr wsl run -n "$(W a)" -- echo SECOND
	assert_run_error WSLOCK_BUSY
	[[ $output != *SECOND* ]] || fail "a second job ran beside the nested run"
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "live"' "$INSPECT"
	touch "$d/GO"
	wait_exit $opid 20
	[ "$WAIT_STATUS" = 5 ] || fail "outer exit $WAIT_STATUS, want its command's 5: $(cat "$d/err")"
	[ -e "$d/INNER_DONE" ] || fail "outer exited before the nested run ended"
	[ "$(grep -c . "$d/err")" = 1 ] || fail "expected one notice on stderr: $(cat "$d/err")"
	run -0 --separate-stderr wsl run -n "$(W a)" -- echo SECOND
	[ "$output" = SECOND ]
}

@test "issue 12.3: a second job never overlaps a nested background run (marker detector)" {
	mkws a
	d=$BATS_TEST_TMPDIR/m
	mkdir "$d"
	: >"$d/overlaps"
	: >"$d/entered"
	job='if ! mkdir "$1/in" 2>/dev/null; then echo overlap >>"$1/overlaps"; exit 0; fi
		echo x >>"$1/entered"; sleep 0.05; rmdir "$1/in"'
	# The second job: plain runs in a loop.
	(
		for _ in 1 2 3 4 5 6 7 8; do
			"$WSLOCK" run -w 60 "$(W a)" -- sh -c "$job" sh "$d" || echo "second: $?" >>"$d/fail"
		done
	) </dev/null >/dev/null 2>"$d/second.err" 3>&- &
	spid=$!
	track_pid $spid
	# The first: outer runs whose command leaves a nested run behind.
	(
		for _ in 1 2 3 4 5 6 7 8; do
			"$WSLOCK" run -w 60 "$(W a)" -- sh -c '
				"$1" run -w 60 "$2" -- sh -c "$3" sh "$4" </dev/null >/dev/null 2>>"$4/nested.err" &
				exit 0' sh "$WSLOCK" "$(W a)" "$job" "$d" || echo "outer: $?" >>"$d/fail"
		done
	) </dev/null >/dev/null 2>"$d/outer.err" 3>&- &
	fpid=$!
	track_pid $fpid
	wait_exit $spid 120
	wait_exit $fpid 120
	wait_for "[ \$(wc -l <'$d/entered') -ge 16 ] || [ -s '$d/overlaps' ]" 30 || true
	[ ! -s "$d/overlaps" ] || fail "$(wc -l <"$d/overlaps") overlaps"
	[ ! -e "$d/fail" ] || fail "failures: $(cat "$d/fail")"
	[ "$(wc -l <"$d/entered")" = 16 ] || fail "only $(wc -l <"$d/entered") of 16 critical sections ran"
}

@test "issue 12.7: acquire --pid \$\$ then wslock run on the same workspace nests (no self-wait)" {
	mkws a
	run -0 --separate-stderr timeout -k 5 30 bash -c '
		o=$("$1" acquire --pid $$ "$2") || exit 90
		"$1" run -w 5 "$2" -- echo nested; rc=$?
		"$1" release --token "$(jq -r .token <<<"$o")" "$2" >/dev/null || exit 91
		exit $rc' bash "$WSLOCK" "$(W a)"
	[ "$output" = nested ] || fail "stdout '$output' stderr '$stderr'"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "issue 12.7: a run below an acquired workspace nests too, with its own WSLOCK_WORKSPACE" {
	mkws a/sub
	run -0 --separate-stderr timeout -k 5 30 bash -c '
		o=$("$1" acquire --pid $$ "$2") || exit 90
		"$1" run -w 5 "$2/sub" -- printenv WSLOCK_WORKSPACE; rc=$?
		"$1" release --token "$(jq -r .token <<<"$o")" "$2" >/dev/null || exit 91
		exit $rc' bash "$WSLOCK" "$(W a)"
	[ "$output" = "$(canon "$(W a/sub)")" ] || fail "stdout '$output' stderr '$stderr'"
}

@test "a nested run below the outer workspace gets its own WSLOCK_WORKSPACE" {
	mkws a/sub
	run -0 --separate-stderr wsl run "$(W a)" -- sh -c '
		"$1" run -n "$2" -- printenv WSLOCK_WORKSPACE
		echo "outer $WSLOCK_WORKSPACE"' sh "$WSLOCK" "$(W a/sub)"
	[ "${lines[0]}" = "$(canon "$(W a/sub)")" ] || fail "stdout '$output' stderr '$stderr'"
	[ "${lines[1]}" = "outer $(canon "$(W a)")" ] || fail "stdout '$output'"
}

@test "a run that holds the live descriptor nests even across a pid namespace" {
	unshare -fp --mount-proc true 2>/dev/null || skip "no pid namespaces here (unshare -fp)"
	mkws a
	# In a new pid namespace the parent chain does not reach the holder's
	# pid; the inherited live descriptor is the proof.
	run -0 --separate-stderr wsl run "$(W a)" -- \
		unshare -fp --mount-proc "$WSLOCK" run -n "$(W a)" -- echo inside
	[ "$output" = inside ] || fail "stdout '$output' stderr '$stderr'"
}

@test "a process that neither descends from the holder nor holds its live file does not nest" {
	mkws a
	hold "$(W a)"
	owner=$(wsl inspect --owner "$(W a)")
	# Everything a child sees, copied into an unrelated process.
	WSLOCK_TOKEN=$(json_get .token "$owner") WSLOCK_OWNER=$owner WSLOCK_WORKSPACE=$(canon "$(W a)") \
		run -75 --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_BUSY
}

@test "a descriptor of the live file opened by path, not inherited from the holder, does not nest" {
	mkws a
	hold "$(W a)"
	live=$(lock_dir_of "$(W a)")/live
	[ -f "$live" ] || fail "no live file at $live"
	# The same file, but a new open file description: it holds no lock,
	# so it proves nothing (an inherited one carries the holder's flock).
	run -75 --separate-stderr bash -c 'exec 7<"$1" && exec timeout -k 5 30 "$2" run -n "$3" -- echo SHOULD-NOT-RUN' \
		_ "$live" "$WSLOCK" "$(W a)"
	assert_run_error WSLOCK_BUSY
	[ -z "$output" ] || fail "the command ran: '$output'"
}

@test "issue 12.8: acquire --pid P that waits while P exits fails and leaves no lock" {
	mkws a
	hold "$(W a)"
	start_sleeper
	p=$SLEEPER_PID
	d=$BATS_TEST_TMPDIR/acq
	mkdir "$d"
	"$WSLOCK" acquire --pid "$p" "$(W a)" </dev/null >"$d/out" 2>"$d/err" 3>&- &
	apid=$!
	track_pid $apid
	wait_for "grep -q waiting '$d/err'" 20
	kill -KILL "$p"
	wait_exit "$p" 10
	unhold
	wait_exit $apid 20
	[ "$WAIT_STATUS" != 0 ] || fail "acquire for a pid that exited succeeded: $(cat "$d/out")"
	! jq -e '.token' "$d/out" >/dev/null 2>&1 || fail "acquire printed an owner: $(cat "$d/out")"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "acquire --pid 1 is refused (a container's entrypoint would make everything nest)" {
	mkws a
	run -64 --separate-stderr wsl acquire --pid 1 "$(W a)"
	assert_usage_error
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "a nested run under a run that was killed keeps the lock live; it ends as recovery required" {
	mkws a
	d=$BATS_TEST_TMPDIR/k
	mkdir "$d"
	"$WSLOCK" run "$(W a)" -- sh -c '
		"$1" run "$2" -- sh -c "$4" sh "$3" </dev/null >/dev/null 2>"$3/inner.err" &
		i=0; while [ ! -e "$3/INNER" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
		exit 0' sh "$WSLOCK" "$(W a)" "$d" "$(nested_job)" \
		</dev/null >/dev/null 2>"$d/err" 3>&- &
	opid=$!
	track_pid $opid
	wait_for "grep -q nested '$d/err'" 20
	kill -KILL $opid
	wait_exit $opid 10
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "live"' "$INSPECT"
	run -75 --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_BUSY
	touch "$d/GO"
	wait_for "[ -e '$d/INNER_DONE' ]" 20
	wait_for "wsl inspect '$(W a)' | jq -e '.liveness == \"dead\"' >/dev/null" 20
	run -69 --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_RECOVERY_REQUIRED
}

@test "a run nested under an acquire holder that exited keeps the lock live until it ends" {
	mkws a
	d=$BATS_TEST_TMPDIR/x
	mkdir "$d"
	bash -c '
		"$1" acquire --pid $$ "$2" >/dev/null || exit 90
		"$1" run "$2" -- sh -c "$4" sh "$3" </dev/null >/dev/null 2>"$3/inner.err" &
		i=0; while [ ! -e "$3/INNER" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
		exit 0' bash "$WSLOCK" "$(W a)" "$d" "$(nested_job)" </dev/null >/dev/null 2>"$d/err" 3>&-
	[ -e "$d/INNER" ] || fail "the nested run did not start: $(cat "$d/inner.err" "$d/err")"
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "live" and (.liveness_reason | contains("nested"))' "$INSPECT"
	run -0 --separate-stderr wsl reclaim --yes
	jq_ok '.reclaimed == []'
	run -75 --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_BUSY
	touch "$d/GO"
	wait_for "[ -e '$d/INNER_DONE' ]" 20
	wait_for "wsl inspect '$(W a)' | jq -e '.liveness == \"dead\"' >/dev/null" 20
}
