#!/usr/bin/env bats
# run: exclusion, the child's environment and status, nesting, waiting,
# signals, a killed holder, background grandchildren.

load helpers

@test "run exits with the child's status and releases the lock" {
	mkws a
	run -0 --separate-stderr wsl run "$(W a)" -- true
	run -3 --separate-stderr wsl run "$(W a)" -- sh -c 'exit 3'
	[ -z "$output" ]
	run -255 --separate-stderr wsl run "$(W a)" -- sh -c 'exit 255'
	inspect_json "$(W a)"
	jq_ok '.state == "free" and .owner == null' "$INSPECT"
}

@test "run reports a child killed by signal N as 128+N" {
	mkws a
	run -143 --separate-stderr wsl run "$(W a)" -- sh -c 'kill -TERM $$'
	run -137 --separate-stderr wsl run "$(W a)" -- sh -c 'kill -KILL $$'
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "stdout of run is only the child's (stderr too when it succeeds)" {
	mkws a
	run -0 --separate-stderr wsl run "$(W a)" -- printf 'hello\nworld\n'
	[ "$output" = $'hello\nworld' ] || fail "stdout: '$output'"
	[ -z "$stderr" ] || fail "stderr: '$stderr'"
	run -0 --separate-stderr wsl run "$(W a)" -- sh -c 'echo to-err >&2'
	[ -z "$output" ] || fail "stdout: '$output'"
	[ "$stderr" = to-err ] || fail "stderr: '$stderr'"
}

@test "the child gets run's stdin, working directory and environment" {
	mkws a
	mkdir "$BATS_TEST_TMPDIR/cwd"
	cd "$BATS_TEST_TMPDIR/cwd"
	run -0 --separate-stderr bash -c 'echo from-stdin | FOO=bar "$0" run "$1" -- sh -c "cat; pwd; echo \$FOO"' "$WSLOCK" "$(W a)"
	[ "${lines[0]}" = from-stdin ] || fail "stdout: $output"
	[ "${lines[1]}" = "$(pwd -P)" ] || [ "${lines[1]}" = "$BATS_TEST_TMPDIR/cwd" ] || fail "cwd: ${lines[1]}"
	[ "${lines[2]}" = bar ] || fail "env: $output"
}

@test "the child gets WSLOCK_WORKSPACE, WSLOCK_TOKEN and WSLOCK_OWNER of its lock" {
	mkws real
	ln -s "$(W real)" "$(W link)"
	out=$BATS_TEST_TMPDIR/env
	mkdir "$out"
	run -0 --separate-stderr wsl run --purpose 'env check' --operation-id op-env-1 "$(W link)/" -- sh -c '
		printf %s "$WSLOCK_WORKSPACE" >"$1/ws"
		printf %s "$WSLOCK_TOKEN" >"$1/token"
		printf %s "$WSLOCK_OWNER" >"$1/owner"
		"$2" inspect --owner "$WSLOCK_WORKSPACE" >"$1/inspect"' sh "$out" "$WSLOCK"
	[ "$(cat "$out/ws")" = "$(canon "$(W real)")" ] || fail "WSLOCK_WORKSPACE=$(cat "$out/ws")"
	grep -Eq '^[0-9a-f]{32}$' "$out/token" || fail "WSLOCK_TOKEN=$(cat "$out/token")"
	jq -e . "$out/owner" >/dev/null || fail "WSLOCK_OWNER is not JSON: $(cat "$out/owner")"
	[ "$(wc -l <"$out/owner")" -eq 0 ] || fail "WSLOCK_OWNER is not compact: $(cat "$out/owner")"
	owner=$(cat "$out/owner")
	jq_ok "keys == $OWNER_KEYS" "$owner"
	jq_ok ".token == \"$(cat "$out/token")\"" "$owner"
	jq_ok ".workspace_root == \"$(canon "$(W real)")\"" "$owner"
	jq_ok '.purpose == "env check" and .operation_id == "op-env-1"' "$owner"
	jq -e --argjson o "$owner" '. == $o' "$out/inspect" >/dev/null ||
		fail "inspect --owner inside the run differs from WSLOCK_OWNER: $(cat "$out/inspect")"
}

@test "16 concurrent run loops on one workspace never overlap" {
	mkws a
	ws=$(W a)
	t=$BATS_TEST_TMPDIR/mx
	mkdir "$t"
	pids=()
	for n in $(seq 16); do
		(
			for i in 1 2 3 4 5; do
				timeout -k 5 120 "$WSLOCK" run -q "$ws" -- sh -c '
					if ! mkdir "$1/inside" 2>/dev/null; then echo "overlap $$" >>"$2/fail"; exit 0; fi
					echo "$$" >>"$2/entered"
					sleep 0.01
					rmdir "$1/inside"' sh "$ws" "$t" ||
					echo "loop $n iteration $i: status $?" >>"$t/fail"
			done
			touch "$t/done.$n"
		) </dev/null >/dev/null 2>"$t/err.$n" 3>&- &
		pids+=($!)
		track_pid $!
	done
	wait_for "[ \$(ls '$t' | grep -c '^done\\.') -eq 16 ]" 150
	for p in "${pids[@]}"; do wait_exit "$p" 10; done
	[ ! -e "$t/fail" ] || fail "failures: $(cat "$t/fail"); stderr: $(cat "$t"/err.*)"
	[ "$(wc -l <"$t/entered")" -eq 80 ] || fail "only $(wc -l <"$t/entered") of 80 critical sections ran"
	[ ! -e "$ws/inside" ]
	inspect_json "$ws"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "concurrent run loops on a workspace and its subdirectory never overlap" {
	mkws w/sub
	t=$BATS_TEST_TMPDIR/mx
	mkdir "$t"
	pids=()
	for n in $(seq 8); do
		if [ $((n % 2)) = 0 ]; then ws=$(W w); else ws=$(W w/sub); fi
		(
			for i in 1 2 3 4; do
				timeout -k 5 120 "$WSLOCK" run -q "$ws" -- sh -c '
					if ! mkdir "$1/inside" 2>/dev/null; then echo "overlap $$" >>"$1/fail"; exit 0; fi
					echo "$$" >>"$1/entered"
					sleep 0.01
					rmdir "$1/inside"' sh "$t" ||
					echo "loop $n iteration $i: status $?" >>"$t/fail"
			done
			touch "$t/done.$n"
		) </dev/null >/dev/null 2>"$t/err.$n" 3>&- &
		pids+=($!)
		track_pid $!
	done
	wait_for "[ \$(ls '$t' | grep -c '^done\\.') -eq 8 ]" 150
	for p in "${pids[@]}"; do wait_exit "$p" 10; done
	[ ! -e "$t/fail" ] || fail "failures: $(cat "$t/fail"); stderr: $(cat "$t"/err.*)"
	[ "$(wc -l <"$t/entered")" -eq 32 ] || fail "only $(wc -l <"$t/entered") of 32 critical sections ran"
}

@test "a waiter (-w 60) on an ancestor starts as soon as an acquired descendant lock is released" {
	mkws w/sub
	acquire_as $$ "$(W w/sub)"
	d=$BATS_TEST_TMPDIR/waiter
	mkdir "$d"
	"$WSLOCK" run -w 60 "$(W w)" -- sh -c 'touch "$1/STARTED"' sh "$d" \
		</dev/null >"$d/out" 2>"$d/err" 3>&- &
	wpid=$!
	track_pid $wpid
	wait_for "[ \$(wc -l <'$d/err') -ge 1 ]" 20
	[ ! -e "$d/STARTED" ] || fail "waiter ran while a descendant was held"
	run -0 --separate-stderr wsl release --token "$(json_get .token "$OWNER")" "$(W w/sub)"
	wait_for "[ -e '$d/STARTED' ]" 10
	wait_exit "$wpid" 10
	[ "$WAIT_STATUS" = 0 ] || fail "waiter exit $WAIT_STATUS: $(cat "$d/err")"
}

@test "nested run on the same workspace inherits the lock (no deadlock)" {
	mkws a
	run -0 --separate-stderr wsl run "$(W a)" -- sh -c '
		"$1" run -n "$2" -- sh -c "echo inner \"\$WSLOCK_WORKSPACE\"; exit 3"; echo "inner=$?"
		# The outer lock is intact after the inner run ended (even failing).
		"$1" inspect --owner "$2" | jq -r .token
		echo "$WSLOCK_TOKEN"' sh "$WSLOCK" "$(W a)"
	[ "${lines[0]}" = "inner $(canon "$(W a)")" ] || fail "stdout: '$output' stderr: '$stderr'"
	[ "${lines[1]}" = inner=3 ] || fail "stdout: '$output' stderr: '$stderr'"
	[ "${lines[2]}" = "${lines[3]}" ] || fail "outer lock changed by the inner run: '$output'"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "nested run on a subdirectory of the held workspace runs under the ancestor's token" {
	mkws a/sub
	run -0 --separate-stderr wsl run "$(W a)" -- sh -c '
		"$1" run -n "$2" -- sh -c "echo inner-ran"; echo "inner=$?"
		"$1" inspect "$3"' sh "$WSLOCK" "$(W a/sub)" "$(W a)"
	[ "${lines[0]}" = inner-ran ] || fail "stdout: '$output' stderr: '$stderr'"
	[ "${lines[1]}" = inner=0 ] || fail "stdout: '$output' stderr: '$stderr'"
	# The outer lock is still the one held after the inner run ended.
	jq_ok '.state == "held"' "${lines[2]}"
	inspect_json "$(W a)"
	jq_ok '.state == "free" and .overlapping == []' "$INSPECT"
}

@test "a WSLOCK_TOKEN that does not belong to the holder does not bypass the lock" {
	mkws a b/sub
	hold "$(W a)"
	tok=$(wsl inspect --owner "$(W a)" | jq -r .token)
	# b's holder is not an ancestor of this test (that would nest).
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W b)"
	# The token of a's holder is no key to b or its subdirectories.
	WSLOCK_TOKEN=$tok run -75 --separate-stderr wsl run -n "$(W b/sub)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_BUSY
	WSLOCK_TOKEN=0123456789abcdef0123456789abcdef run -75 --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_BUSY
	# Nor does a holder's token give access to its ancestor.
	mkws c/sub
	hold "$(W c/sub)"
	tok=$(wsl inspect --owner "$(W c/sub)" | jq -r .token)
	WSLOCK_TOKEN=$tok run -75 --separate-stderr wsl run -n "$(W c)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_BUSY
}

@test "run -n on a held workspace fails with 75 WSLOCK_BUSY, stdout empty" {
	mkws a
	hold "$(W a)"
	run -75 --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_BUSY
}

@test "run -w 0.3 on a held workspace fails with 75 WSLOCK_TIMEOUT" {
	mkws a
	hold "$(W a)"
	run -75 --separate-stderr wsl run -w 0.3 "$(W a)" -- echo SHOULD-NOT-RUN
	# The waiting notice may precede the failure line.
	[ -z "$output" ] || fail "stdout: $output"
	[[ ${stderr_lines[-1]} == "wslock: "*WSLOCK_TIMEOUT* ]] || fail "stderr: $stderr"
	[ "${#stderr_lines[@]}" -le 2 ] || fail "stderr: $stderr"
}

@test "run -E 9 -n exits 9 on a held workspace; -E 256 is a usage error" {
	mkws a
	hold "$(W a)"
	run -9 --separate-stderr wsl run -E 9 -n "$(W a)" -- echo SHOULD-NOT-RUN
	[ -z "$output" ]
	run -64 --separate-stderr wsl run -E 256 -n "$(W a)" -- echo SHOULD-NOT-RUN
	assert_usage_error --run
}

@test "-E does not replace the child's own status" {
	mkws a
	run -4 --separate-stderr wsl run -E 9 -n "$(W a)" -- sh -c 'exit 4'
}

@test "a waiter says once whom it waits for and starts as soon as the holder releases" {
	mkws a
	hold --purpose 'holder-purpose-xyz' --operation-id holder-op-77 "$(W a)"
	hpid=$(wsl inspect --owner "$(W a)" | jq -r .pid)
	d=$BATS_TEST_TMPDIR/waiter
	mkdir "$d"
	"$WSLOCK" run "$(W a)" -- sh -c 'touch "$1/STARTED"' sh "$d" \
		</dev/null >"$d/out" 2>"$d/err" 3>&- &
	wpid=$!
	track_pid $wpid
	wait_for "[ \$(wc -l <'$d/err') -ge 1 ]" 20
	grep -q "$hpid" "$d/err" || fail "notice does not name holder pid $hpid: $(cat "$d/err")"
	grep -q 'holder-purpose-xyz' "$d/err" || fail "notice does not name the purpose: $(cat "$d/err")"
	grep -q 'holder-op-77' "$d/err" || fail "notice does not name the operation: $(cat "$d/err")"
	grep -qF "$(canon "$(W a)")" "$d/err" || fail "notice does not name the workspace: $(cat "$d/err")"
	grep -qF "$(uname -n)" "$d/err" || fail "notice does not name the host: $(cat "$d/err")"
	[ ! -e "$d/STARTED" ] || fail "waiter ran while the workspace was held"
	unhold
	[ "$WAIT_STATUS" = 0 ] || fail "holder exit $WAIT_STATUS"
	wait_for "[ -e '$d/STARTED' ]" 10
	wait_exit "$wpid" 10
	[ "$WAIT_STATUS" = 0 ] || fail "waiter exit $WAIT_STATUS: $(cat "$d/err")"
	[ "$(grep -c . "$d/err")" -eq 1 ] || fail "notice printed more than once: $(cat "$d/err")"
	[ ! -s "$d/out" ] || fail "waiter stdout: $(cat "$d/out")"
}

@test "a quiet waiter (-q) prints no waiting notice" {
	mkws a
	hold --purpose 'quiet-holder-purpose' "$(W a)"
	run -75 --separate-stderr wsl run -q -w 0.5 "$(W a)" -- echo SHOULD-NOT-RUN
	[ -z "$output" ] || fail "stdout: $output"
	[ "${#stderr_lines[@]}" -le 1 ] || fail "quiet waiter printed more than a failure line: $stderr"
	# Without -q the same wait prints the notice.
	run -75 --separate-stderr wsl run -w 0.5 "$(W a)" -- echo SHOULD-NOT-RUN
	[[ $stderr == *quiet-holder-purpose* ]] || fail "no waiting notice without -q: $stderr"
	[ "${#stderr_lines[@]}" -eq 2 ] || fail "want the notice and the failure line: $stderr"
}

@test "a waiter whose holder dies while it waits stops with 69 WSLOCK_RECOVERY_REQUIRED" {
	mkws a
	hold "$(W a)"
	d=$BATS_TEST_TMPDIR/waiter
	mkdir "$d"
	"$WSLOCK" run "$(W a)" -- sh -c 'touch "$1/STARTED"' sh "$d" \
		</dev/null >"$d/out" 2>"$d/err" 3>&- &
	wpid=$!
	track_pid $wpid
	wait_for "[ \$(wc -l <'$d/err') -ge 1 ]" 20
	kill -KILL "$HOLD_PID"
	wait_exit "$HOLD_PID" 10
	touch "$HOLD_DIR/GO"
	wait_for "! is_running $HOLD_CHILD" 10
	wait_exit "$wpid" 30 || fail "waiter still waiting on a dead holder: $(cat "$d/err")"
	[ "$WAIT_STATUS" = 69 ] || fail "waiter exit $WAIT_STATUS: $(cat "$d/err")"
	[ ! -e "$d/STARTED" ] || fail "waiter ran under a dead holder's lock"
	tail -n 1 "$d/err" | grep -q WSLOCK_RECOVERY_REQUIRED || fail "stderr: $(cat "$d/err")"
	[ ! -s "$d/out" ]
}

@test "SIGKILL of wslock while the child runs: live while the child runs, then dead and recovery required" {
	mkws a
	hold "$(W a)"
	kill -KILL "$HOLD_PID"
	wait_exit "$HOLD_PID" 10
	[ "$WAIT_STATUS" = 137 ] || fail "holder status $WAIT_STATUS"
	is_running "$HOLD_CHILD" || fail "the child died with wslock"
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "live"' "$INSPECT"
	jq_ok '.liveness_reason | type == "string" and length > 0' "$INSPECT"
	run -75 --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_BUSY

	touch "$HOLD_DIR/GO"
	wait_for "! is_running $HOLD_CHILD" 10
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "dead"' "$INSPECT"
	jq_ok '.liveness_reason | type == "string" and length > 0' "$INSPECT"
	run -69 --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_RECOVERY_REQUIRED
	run -69 --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	assert_json_error WSLOCK_RECOVERY_REQUIRED
}

@test "a background grandchild does not hold the workspace after run exits" {
	mkws a
	pf=$BATS_TEST_TMPDIR/grandchild.pid
	run -0 --separate-stderr wsl run "$(W a)" -- \
		sh -c 'sleep 300 </dev/null >/dev/null 2>&1 3>&- & echo $! >"$1"' sh "$pf"
	gpid=$(cat "$pf")
	track_pid "$gpid"
	is_running "$gpid" || fail "grandchild not running"
	inspect_json "$(W a)"
	jq_ok '.state == "free" and .owner == null' "$INSPECT"
	run -0 --separate-stderr wsl run -n "$(W a)" -- echo again
	[ "$output" = again ]
	run -0 --separate-stderr wsl acquire -n --pid $$ "$(W a)"
}

@test "SIGTERM to wslock run is forwarded to the child" {
	mkws a
	hold "$(W a)"
	kill -TERM "$HOLD_PID"
	wait_exit "$HOLD_PID" 20
	[ -e "$HOLD_DIR/TERMED" ] || fail "child did not get SIGTERM"
	[ "$WAIT_STATUS" = 7 ] || fail "run exit $WAIT_STATUS, want the child's 7"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "wslock run ignores SIGINT and SIGQUIT while the child runs" {
	mkws a
	d=$BATS_TEST_TMPDIR/int
	mkdir "$d"
	# Background jobs start with SIGINT/SIGQUIT ignored: restore the default
	# so that only wslock's own handling keeps it alive.
	env --default-signal=INT,QUIT "$WSLOCK" run "$(W a)" -- sh -c '
		trap "" INT QUIT
		touch "$1/READY"
		while [ ! -e "$1/GO" ]; do sleep 0.05; done
		echo child-done' sh "$d" </dev/null >"$d/out" 2>"$d/err" 3>&- &
	p=$!
	track_pid $p
	wait_for "[ -e '$d/READY' ]" 20
	kill -INT "$p"
	kill -QUIT "$p"
	# Prove wslock handled both signals before the child is let go: a
	# further signal it forwards (USR1 -> the child's default action kills
	# it) would otherwise race.  Just check it is still there and holding.
	is_running "$p" || fail "wslock died of SIGINT/SIGQUIT"
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "live"' "$INSPECT"
	touch "$d/GO"
	wait_exit "$p" 20
	[ "$WAIT_STATUS" = 0 ] || fail "run exit $WAIT_STATUS"
	[ "$(cat "$d/out")" = child-done ]
}

@test "a run whose lock was taken over reports 78 WSLOCK_OWNERSHIP_LOST and keeps the new owner's lock" {
	mkws a
	hold "$(W a)"
	# Fake a takeover: the owner document now names another token.
	edit_owner "$(W a)" '.token = "0123456789abcdef0123456789abcdef"'
	before=$(cat "$(lock_dir_of "$(W a)")/owner.json")
	unhold
	[ "$WAIT_STATUS" = 78 ] || fail "run exit $WAIT_STATUS, stderr: $(cat "$HOLD_DIR/err")"
	grep -q WSLOCK_OWNERSHIP_LOST "$HOLD_DIR/err" || fail "stderr: $(cat "$HOLD_DIR/err")"
	[ ! -s "$HOLD_DIR/out" ] || fail "stdout: $(cat "$HOLD_DIR/out")"
	[ "$(cat "$(lock_dir_of "$(W a)")/owner.json")" = "$before" ] || fail "the new owner's document was touched"
}

@test "concurrent liveness probes of a dead run holder never see each other as alive" {
	mkws a
	hold "$(W a)"
	kill -KILL "$HOLD_PID"
	wait_exit "$HOLD_PID" 10
	touch "$HOLD_DIR/GO"
	wait_for "! is_running $HOLD_CHILD" 10
	t=$BATS_TEST_TMPDIR/probes
	mkdir "$t"
	pids=()
	for n in 1 2 3 4 5 6; do
		(
			for i in $(seq 15); do
				timeout 30 "$WSLOCK" inspect "$(W a)" | jq -r .liveness >>"$t/verdicts.$n"
			done
		) </dev/null >/dev/null 2>&1 3>&- &
		pids+=($!)
		track_pid $!
	done
	for p in "${pids[@]}"; do wait_exit "$p" 60; done
	got=$(cat "$t"/verdicts.* | sort | uniq -c)
	[ "$(cat "$t"/verdicts.* | grep -c '^dead$')" -eq 90 ] || fail "verdicts: $got"
}

@test "SIGHUP to wslock run is forwarded to the child" {
	mkws a
	d=$BATS_TEST_TMPDIR/hup
	mkdir "$d"
	"$WSLOCK" run "$(W a)" -- sh -c 'trap "touch \"$1/HUPPED\"; exit 5" HUP; touch "$1/READY"; while :; do sleep 0.05; done' sh "$d" \
		</dev/null >/dev/null 2>"$d/err" 3>&- &
	p=$!
	track_pid $p
	wait_for "[ -e '$d/READY' ]" 20
	kill -HUP "$p"
	wait_exit "$p" 20
	[ -e "$d/HUPPED" ] || fail "child did not get SIGHUP"
	[ "$WAIT_STATUS" = 5 ] || fail "run exit $WAIT_STATUS"
}

@test "a command that cannot be executed fails and leaves the workspace free" {
	mkws a
	st=0
	wsl run "$(W a)" -- "$BATS_TEST_TMPDIR/no-such-command" >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" || st=$?
	[ "$st" -ne 0 ] || fail "exec of a missing command succeeded"
	[ "$st" -ne 124 ] || fail "run hung"
	[ ! -s "$BATS_TEST_TMPDIR/out" ] || fail "stdout: $(cat "$BATS_TEST_TMPDIR/out")"
	grep -q '^wslock: ' "$BATS_TEST_TMPDIR/err" || fail "no error line: $(cat "$BATS_TEST_TMPDIR/err")"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "--print-owner writes the owner document to stderr, not stdout" {
	mkws a
	run -0 --separate-stderr wsl run --print-owner "$(W a)" -- sh -c 'printf %s "$WSLOCK_TOKEN"'
	[[ $output =~ ^[0-9a-f]{32}$ ]] || fail "stdout: '$output'"
	jq -e --arg t "$output" '.token == $t and .kind == "wslock-owner"' <<<"$stderr" >/dev/null ||
		fail "stderr is not the owner: '$stderr'"
}

@test "--retain-on-failure keeps the lock retained after a failing child" {
	mkws a b
	run -3 --separate-stderr wsl run --retain-on-failure "$(W a)" -- sh -c 'exit 3'
	inspect_json "$(W a)"
	jq_ok '.state == "retained"' "$INSPECT"
	[ -e "$(lock_dir_of "$(W a)")/retained.json" ] || fail "no retained.json"
	run -69 --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	assert_json_error WSLOCK_RECOVERY_REQUIRED
	run -69 --separate-stderr wsl acquire --reclaim-dead -n --pid $$ "$(W a)"
	assert_json_error WSLOCK_RECOVERY_REQUIRED
	# A successful child releases as usual.
	run -0 --separate-stderr wsl run --retain-on-failure "$(W b)" -- true
	inspect_json "$(W b)"
	jq_ok '.state == "free"' "$INSPECT"
	# A child killed by a signal is a failure too.
	run -143 --separate-stderr wsl run --retain-on-failure "$(W b)" -- sh -c 'kill -TERM $$'
	inspect_json "$(W b)"
	jq_ok '.state == "retained"' "$INSPECT"
	[ -e "$(lock_dir_of "$(W b)")/retained.json" ] || fail "no retained.json"
}

@test "without --retain-on-failure a failing child's lock is released" {
	mkws a
	run -1 --separate-stderr wsl run "$(W a)" -- false
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "run holds the lock while the child runs (inspect from outside)" {
	mkws a
	hold --purpose 'held by hold' "$(W a)"
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "live" and .owner.purpose == "held by hold"' "$INSPECT"
	unhold
	[ "$WAIT_STATUS" = 0 ] || fail "holder exit $WAIT_STATUS: $(cat "$HOLD_DIR/err")"
	[ ! -s "$HOLD_DIR/out" ] || fail "holder stdout: $(cat "$HOLD_DIR/out")"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "the command inherits exactly one descriptor from wslock: the holder's live file" {
	# Under the valgrind wrapper the command also inherits valgrind's own
	# log file and pipe, which wslock can neither see nor close.
	[[ $WSLOCK != *valgrind* ]] || skip "valgrind's descriptors are inherited by the command"
	mkws a
	# fd number and target; a pipe's or socket's inode differs per run.
	list='for f in /proc/$$/fd/*; do n=${f##*/}; [ "$n" -gt 2 ] && echo "$n $(readlink "$f" | sed "s/:\[[0-9]*\]//")"; done; :'
	# Both listings from inside bats' run, so both see the same inherited
	# descriptors.
	run -0 --separate-stderr sh -c "$list"
	before=$(printf '%s\n' "$output" | grep -v '/proc/' | sort)
	run -0 --separate-stderr wsl run "$(W a)" -- sh -c "$list"
	after=$(printf '%s\n' "$output" | grep -v '/proc/' | sort)
	extra=$(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after"))
	[ "$(printf '%s\n' "$extra" | grep -c .)" -eq 1 ] || fail "extra descriptors: '$extra'"
	[[ $extra == *"/locks/"*"/live" ]] || fail "the extra descriptor is not the live file: '$extra'"
}
