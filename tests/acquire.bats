#!/usr/bin/env bats
# acquire: the owner document, conflicts (same, nested, sibling, symlinked
# workspaces), -n / -w / -E, option validation, dead holders.

load helpers

@test "acquire --pid \$\$ prints a complete schema 2 owner document" {
	mkws a
	run -0 --separate-stderr wsl acquire --pid $$ "$(W a)"
	[ "${#lines[@]}" -eq 1 ] || fail "owner document is not one line: $output"
	jq_ok "keys == $OWNER_KEYS"
	jq_ok '.schema_version == 2 and (.schema_version | type == "number")'
	jq_ok '.kind == "wslock-owner"'
	jq_ok '.token | type == "string" and test("^[0-9a-f]{32}$")'
	jq_ok ".pid == $$"
	jq_ok '.pid_start_ticks | type == "number" and . >= 0 and floor == .'
	jq_ok ".pid_start_ticks == $(start_ticks $$)"
	jq_ok ".boot_id == \"$(cat /proc/sys/kernel/random/boot_id)\""
	jq_ok ".host == \"$(uname -n)\""
	jq_ok '.identity_policy == "pid-start-boot"'
	jq_ok ".pid_namespace == \"$(readlink /proc/self/ns/pid)\""
	if [ -r /etc/machine-id ]; then
		jq_ok ".machine_id == \"$(cat /etc/machine-id)\""
	else
		jq_ok '.machine_id == null'
	fi
	jq_ok '.workspace_fs | test("^(fsid:[0-9a-f]{16}|dev:[0-9]+:[0-9]+)$")'
	jq_ok '.workspace_fs_path | startswith("/")'
	jq_ok '.acquired_at | type == "string" and test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?Z$")'
	jq_ok '.recovery_of == null'
	jq_ok '.purpose | type == "string"'
	jq_ok '.operation_id | type == "string" and test("^[A-Za-z0-9][A-Za-z0-9._-]{0,191}$")'
	jq_ok ".workspace_root == \"$(canon "$(W a)")\""
}

@test "acquire records --purpose and --operation-id, and two acquires get different tokens" {
	mkws a b
	run -0 --separate-stderr wsl acquire --pid $$ --purpose 'nightly build #7' --operation-id build-42.a_b "$(W a)"
	jq_ok '.purpose == "nightly build #7" and .operation_id == "build-42.a_b"'
	t1=$(json_get .token)
	run -0 --separate-stderr wsl acquire --pid $$ "$(W b)"
	t2=$(json_get .token)
	[ "$t1" != "$t2" ] || fail "same token twice: $t1"
}

@test "acquire publishes owner.json 0600 under locks/KEY with KEY = b2sum-256 of the canonical path" {
	mkws a
	run -0 --separate-stderr wsl acquire --pid $$ "$(W a)/"
	d=$(lock_dir_of "$(W a)")
	[ -f "$d/owner.json" ] || fail "no $d/owner.json; registry: $(find "$WSLOCK_DIR")"
	[ "$(stat -c %a "$d/owner.json")" = 600 ] || fail "owner.json mode $(stat -c %a "$d/owner.json")"
	[ "$(stat -c %a "$WSLOCK_DIR")" = 700 ] || fail "registry mode $(stat -c %a "$WSLOCK_DIR")"
	jq -e --argjson o "$output" '. == $o' "$d/owner.json" >/dev/null ||
		fail "owner.json differs from printed document: $(cat "$d/owner.json")"
}

@test "acquire without --pid records wslock's parent process" {
	mkws a
	run -0 sh -c 'echo $$; "$0" acquire "$1"' "$WSLOCK" "$(W a)"
	[ "${#lines[@]}" -eq 2 ] || fail "unexpected output: $output"
	jq_ok ".pid == ${lines[0]}" "${lines[1]}"
}

@test "acquired lock shows held/live in inspect and blocks run -n and acquire -n (75 WSLOCK_BUSY)" {
	mkws a
	# Held for a process this test does not descend from (a descendant
	# of the holder would nest: DESIGN.md section 2).
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "live"' "$INSPECT"
	jq -e --argjson o "$OWNER" '.owner == $o' <<<"$INSPECT" >/dev/null || fail "owner differs: $INSPECT"

	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	assert_json_error WSLOCK_BUSY
	[[ $stderr == *"$SLEEPER_PID"* ]] || fail "stderr does not name the holder pid $SLEEPER_PID: $stderr"

	run -75 --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_BUSY
}

@test "acquire -w 0.3 on a held workspace fails with 75 WSLOCK_TIMEOUT" {
	mkws a
	hold "$(W a)"
	run -75 --separate-stderr wsl acquire -w 0.3 --pid $$ "$(W a)"
	assert_json_error_after_wait WSLOCK_TIMEOUT
}

@test "acquire -w 0 is a single attempt reported as WSLOCK_TIMEOUT" {
	mkws a
	hold "$(W a)"
	run -75 --separate-stderr wsl acquire -w 0 --pid $$ "$(W a)"
	assert_json_error WSLOCK_TIMEOUT
}

@test "acquire -E 9 -n on a held workspace exits 9; -E does not change other failures" {
	mkws a b
	hold "$(W a)"
	run -9 --separate-stderr wsl acquire -E 9 -n --pid $$ "$(W a)"
	jq_ok '.error.code == "WSLOCK_BUSY"'
	run -9 --separate-stderr wsl acquire -E 9 -w 0.2 --pid $$ "$(W a)"
	jq_ok '.error.code == "WSLOCK_TIMEOUT"'
	run -66 --separate-stderr wsl acquire -E 9 -n --pid $$ "$(W nonexistent)"
	assert_json_error WSLOCK_NO_WORKSPACE
}

@test "long option forms: --nonblock, --timeout, --conflict-exit-code, --quiet, --verbose" {
	mkws a
	hold "$(W a)"
	run -75 --separate-stderr wsl acquire --nonblock --pid $$ "$(W a)"
	assert_json_error WSLOCK_BUSY
	run -75 --separate-stderr wsl acquire --timeout 0.2 --pid $$ "$(W a)"
	assert_json_error_after_wait WSLOCK_TIMEOUT
	run -9 --separate-stderr wsl acquire --conflict-exit-code 9 --nonblock --quiet --pid $$ "$(W a)"
	jq_ok '.error.code == "WSLOCK_BUSY"'
	run -75 --separate-stderr wsl acquire --verbose --nonblock --pid $$ "$(W a)"
	jq_ok '.error.code == "WSLOCK_BUSY"'
	[ "$(jq -s length <<<"$output")" = 1 ] || fail "--verbose put more than JSON on stdout: $output"
}

@test "acquire --verbose keeps stdout to the one owner document" {
	mkws a
	run -0 --separate-stderr wsl acquire -v --pid $$ "$(W a)"
	[ "$(jq -s length <<<"$output")" = 1 ] || fail "stdout: $output"
	jq_ok '.kind == "wslock-owner"'
}

@test "acquire -E accepts 0..255 only" {
	mkws a
	run -64 --separate-stderr wsl acquire -E 256 -n --pid $$ "$(W a)"
	assert_usage_error
	run -64 --separate-stderr wsl acquire -E -1 -n --pid $$ "$(W a)"
	assert_usage_error
	run -64 --separate-stderr wsl acquire -E x -n --pid $$ "$(W a)"
	assert_usage_error
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
	run -0 --separate-stderr wsl acquire -E 255 -n --pid $$ "$(W a)"
}

@test "acquire rejects bad -w values with 64" {
	mkws a
	for v in abc -1 '' 1x; do
		run -64 --separate-stderr wsl acquire -w "$v" --pid $$ "$(W a)"
		assert_usage_error
	done
}

@test "--operation-id must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,191}\$" {
	mkws a
	long_ok=a$(printf 'b%.0s' $(seq 191))
	long_bad=a$(printf 'b%.0s' $(seq 192))
	for bad in '' -abc .abc 'a b' 'a/b' 'a:b' "$long_bad" $'a\nb' 'é'; do
		run -64 --separate-stderr wsl acquire --pid $$ --operation-id="$bad" "$(W a)"
		assert_usage_error
	done
	[ ! -e "$(lock_dir_of "$(W a)")" ] || fail "a refused acquire left a lock"
	run -0 --separate-stderr wsl acquire --pid $$ --operation-id "$long_ok" "$(W a)"
	jq_ok ".operation_id == \"$long_ok\""
}

@test "--purpose must be 1..128 printable characters" {
	mkws a
	p128=$(printf 'p%.0s' $(seq 128))
	for bad in '' "${p128}x" $'tab\there' $'new\nline' $'bell\a'; do
		run -64 --separate-stderr wsl acquire --pid $$ --purpose "$bad" "$(W a)"
		assert_usage_error
	done
	[ ! -e "$(lock_dir_of "$(W a)")" ] || fail "a refused acquire left a lock"
	run -0 --separate-stderr wsl acquire --pid $$ --purpose "$p128" "$(W a)"
	jq_ok ".purpose == \"$p128\""
}

@test "acquire --pid rejects pids outside 1..4194304 and non-numbers with 64" {
	mkws a
	for bad in 0 -1 4194305 abc 12x ''; do
		run -64 --separate-stderr wsl acquire --pid "$bad" "$(W a)"
		assert_usage_error
	done
}

@test "acquire --pid of a process that has exited is refused (64) or recorded as dead" {
	mkws a
	p=$(dead_pid)
	if is_running "$p"; then fail "pid $p still runs"; fi
	run --separate-stderr wsl acquire --pid "$p" "$(W a)"
	case $status in
	64)
		assert_usage_error
		inspect_json "$(W a)"
		jq_ok '.state == "free"' "$INSPECT"
		;;
	0)
		inspect_json "$(W a)"
		jq_ok '.state == "held" and .liveness == "dead"' "$INSPECT"
		jq_ok '.liveness_reason | type == "string" and length > 0' "$INSPECT"
		;;
	*) fail "acquire --pid <exited pid>: status $status: $output $stderr" ;;
	esac
}

@test "a lock on a workspace blocks its subdirectories and deeper descendants" {
	mkws w/sub/deep/er
	hold "$(W w)"
	run -75 --separate-stderr wsl run -n "$(W w/sub)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_BUSY
	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W w/sub/deep/er)"
	assert_json_error WSLOCK_BUSY
}

@test "a lock on a subdirectory blocks its ancestors" {
	mkws w/sub/deep
	hold "$(W w/sub/deep)"
	run -75 --separate-stderr wsl run -n "$(W w/sub)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_BUSY
	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W w)"
	assert_json_error WSLOCK_BUSY
}

@test "an acquired (not run) descendant lock blocks the ancestor and vice versa" {
	mkws w/sub x/sub
	acquire_as $$ "$(W w/sub)"
	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W w)"
	assert_json_error WSLOCK_BUSY
	acquire_as $$ "$(W x)"
	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W x/sub)"
	assert_json_error WSLOCK_BUSY
}

@test "sibling workspaces do not conflict, nor do name-prefix siblings" {
	mkws w/a w/b w/ab w/a-b
	hold "$(W w/a)"
	run -0 --separate-stderr wsl run -n "$(W w/b)" -- echo ran-b
	[ "$output" = ran-b ]
	run -0 --separate-stderr wsl run -n "$(W w/ab)" -- echo ran-ab
	[ "$output" = ran-ab ]
	run -0 --separate-stderr wsl acquire -n --pid $$ "$(W w/a-b)"
	# The holder is unaffected.
	inspect_json "$(W w/a)"
	jq_ok '.state == "held" and .liveness == "live"' "$INSPECT"
}

@test "a path through a symlink conflicts with its target" {
	mkws real/sub
	ln -s "$(W real)" "$(W link)"
	hold "$(W link)"
	run -75 --separate-stderr wsl run -n "$(W real)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_BUSY
	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W link)/sub"
	assert_json_error WSLOCK_BUSY
	inspect_json "$(W link)"
	jq_ok ".workspace_root == \"$(canon "$(W real)")\" and .state == \"held\"" "$INSPECT"
	jq_ok ".owner.workspace_root == \"$(canon "$(W real)")\"" "$INSPECT"
}

@test "equivalent spellings of a path (trailing slash, ., ..) are the same workspace" {
	mkws a/sub
	acquire_as $$ "$(W a)"
	for p in "$(W a)/" "$(W a)/." "$(W a)/sub/.." "$(W a)//"; do
		run -75 --separate-stderr wsl acquire -n --pid $$ "$p"
		assert_json_error WSLOCK_BUSY
	done
}

@test "acquire on a workspace whose holder died fails with 69 WSLOCK_RECOVERY_REQUIRED" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	inspect_json "$(W a)"
	jq_ok '.liveness == "live"' "$INSPECT"
	kill "$SLEEPER_PID"
	wait_exit "$SLEEPER_PID"
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "dead"' "$INSPECT"
	jq_ok '.liveness_reason | type == "string" and length > 0 and (contains("\n") | not)' "$INSPECT"

	run -69 --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	assert_json_error WSLOCK_RECOVERY_REQUIRED
	[[ $stderr == *"$SLEEPER_PID"* ]] || fail "stderr does not name the dead holder $SLEEPER_PID: $stderr"
	# Waiting cannot help: it fails at once rather than timing out.
	run -69 --separate-stderr wsl acquire -w 20 --pid $$ "$(W a)"
	assert_json_error WSLOCK_RECOVERY_REQUIRED
	run -69 --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_RECOVERY_REQUIRED
	# The dead owner's lock is still there, unchanged.
	jq -e --argjson o "$OWNER" '. == $o' "$(lock_dir_of "$(W a)")/owner.json" >/dev/null
}

@test "a dead holder of an ancestor also requires recovery of the descendant" {
	mkws a/sub
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	kill "$SLEEPER_PID"
	wait_exit "$SLEEPER_PID"
	run -69 --separate-stderr wsl acquire -n --pid $$ "$(W a/sub)"
	assert_json_error WSLOCK_RECOVERY_REQUIRED
}

@test "acquire --reclaim-dead takes over a provably dead owner's lock and journals it" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	old=$(json_get .token "$OWNER")
	kill "$SLEEPER_PID"
	wait_exit "$SLEEPER_PID"
	jlines=0
	[ -f "$WSLOCK_DIR/journal.jsonl" ] && jlines=$(wc -l <"$WSLOCK_DIR/journal.jsonl")
	run -0 --separate-stderr wsl acquire --reclaim-dead -n --pid $$ "$(W a)"
	jq_ok ".pid == $$ and .token != \"$old\""
	inspect_json "$(W a)"
	jq_ok ".liveness == \"live\" and .owner.pid == $$" "$INSPECT"
	[ -f "$WSLOCK_DIR/journal.jsonl" ] || fail "no journal.jsonl after a reclaim"
	[ "$(wc -l <"$WSLOCK_DIR/journal.jsonl")" -gt "$jlines" ] || fail "journal did not grow"
	tail -n 1 "$WSLOCK_DIR/journal.jsonl" | jq -e . >/dev/null || fail "last journal line is not JSON"
	[ "$(stat -c %a "$WSLOCK_DIR/journal.jsonl")" = 600 ] || fail "journal mode $(stat -c %a "$WSLOCK_DIR/journal.jsonl")"
}

@test "run --reclaim-dead runs under a lock reclaimed from a dead owner" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	kill "$SLEEPER_PID"
	wait_exit "$SLEEPER_PID"
	run -0 --separate-stderr wsl run --reclaim-dead -n "$(W a)" -- sh -c 'printf %s "$WSLOCK_TOKEN"'
	[[ $output =~ ^[0-9a-f]{32}$ ]] || fail "stdout: $output"
	[ "$output" != "$(json_get .token "$OWNER")" ]
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "acquire --reclaim-dead never displaces a live owner" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	run -75 --separate-stderr wsl acquire --reclaim-dead -n --pid $$ "$(W a)"
	assert_json_error WSLOCK_BUSY
	jq -e --argjson o "$OWNER" '. == $o' "$(lock_dir_of "$(W a)")/owner.json" >/dev/null
}

@test "a released workspace can be acquired again at once" {
	mkws a
	for i in 1 2 3; do
		acquire_as $$ "$(W a)"
		run -0 --separate-stderr wsl release --token "$(json_get .token "$OWNER")" "$(W a)"
	done
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

# acquire_to_closed_pipe WS: acquire --pid $$ WS with stdout a pipe that no
# one reads any more (a write gets EPIPE). The binary itself (WSLOCK_REAL
# under tests/schema/collect-wslock, whose tee would stand in as the reader).
acquire_to_closed_pipe() {
	local p=$BATS_TEST_TMPDIR/pipe.$RANDOM
	mkfifo "$p"
	run --separate-stderr timeout -k 5 30 bash -c \
		'exec 4<>"$1"; exec 5>"$1"; exec 4<&-; exec "$2" acquire --pid "$3" "$4" >&5' \
		sh "$p" "${WSLOCK_REAL:-$WSLOCK}" $$ "$1"
}

# assert_given_back WS: the acquire that just failed said so (74, one line
# ending with [WSLOCK_IO]) and left WS free.
assert_given_back() {
	[ "$status" -eq 74 ] || fail "exit $status, not 74: $stderr"
	assert_one_stderr_line
	[[ $stderr == *"[WSLOCK_IO]" ]] || fail "no [WSLOCK_IO] at the end: $stderr"
	[[ $stderr == *"released again"* ]] || fail "does not say the lock was given back: $stderr"
	inspect_json "$1"
	jq_ok '.state == "free"' "$INSPECT"
	run -0 --separate-stderr wsl run -n "$1" -- true
}

@test "acquire that cannot write its owner document releases its lock (74 WSLOCK_IO): a full disk, a closed pipe" {
	[ -c /dev/full ] || fail "no /dev/full on this Linux system"
	mkws a
	run --separate-stderr timeout -k 5 30 sh -c 'exec "$1" acquire --pid "$2" "$3" >/dev/full' \
		sh "$WSLOCK" $$ "$(W a)"
	assert_given_back "$(W a)"
	acquire_to_closed_pipe "$(W a)"
	assert_given_back "$(W a)"
	# Other commands' write errors end with the code too.
	run --separate-stderr timeout -k 5 30 sh -c 'exec "$1" inspect "$2" >/dev/full' sh "$WSLOCK" "$(W a)"
	[ "$status" -eq 74 ] && [[ $stderr == *"[WSLOCK_IO]" ]] || fail "inspect: $status $stderr"
}

# zombie_child: a background parent (ZPARENT) with one child (ZCHILD)
# that it would reap; zombify then stops the parent (SIGSTOP: it reaps
# nothing) and kills the child, which stays a zombie until the parent is
# continued (teardown kills both).
zombie_child() {
	sh -c 'sleep 300 & echo $! >"$1"; wait' sh "$BATS_TEST_TMPDIR/zchild" \
		</dev/null >/dev/null 2>&1 3>&- &
	ZPARENT=$!
	track_pid "$ZPARENT"
	wait_for "[ -s '$BATS_TEST_TMPDIR/zchild' ]" 30 || fail "no child pid"
	ZCHILD=$(cat "$BATS_TEST_TMPDIR/zchild")
	track_pid "$ZCHILD"
}
zombify() {
	kill -STOP "$ZPARENT"
	kill -KILL "$ZCHILD"
	wait_for "[ \"\$(sed 's/.*) //' /proc/$ZCHILD/stat | cut -d' ' -f1)\" = Z ]" 30 ||
		fail "pid $ZCHILD did not become a zombie"
}

@test "acquire -w --pid P: P made a zombie while it waits (its parent stopped) ends the wait at once, 66, nothing locked" {
	mkws a
	hold "$(W a)"
	zombie_child
	"$WSLOCK" acquire -w 120 --pid "$ZCHILD" "$(W a)" \
		</dev/null >"$BATS_TEST_TMPDIR/acq.out" 2>"$BATS_TEST_TMPDIR/acq.err" 3>&- &
	local acq=$!
	track_pid "$acq"
	wait_for "queued $acq" 20 || fail "acquire did not wait: $(cat "$BATS_TEST_TMPDIR/acq.err")"
	zombify
	# Long before -w 120 is up (a holder that still ran would keep it
	# waiting, and the holder of a keeps it held).
	wait_exit "$acq" 60 || fail "the wait went on for a zombie holder"
	[ "$WAIT_STATUS" = 66 ] || fail "exit $WAIT_STATUS: $(cat "$BATS_TEST_TMPDIR/acq.err")"
	grep -q "exited while waiting" "$BATS_TEST_TMPDIR/acq.err"
	is_running "$ZPARENT" || fail "the parent ended, so the zombie may have been reaped"
	kill -CONT "$ZPARENT"
	unhold
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "free"'
}

@test "acquire --pid of a zombie (exited, its parent stopped) is refused (64) and locks nothing" {
	mkws a
	zombie_child
	zombify
	run -64 --separate-stderr wsl acquire --pid "$ZCHILD" "$(W a)"
	[[ "$stderr" == *"zombie"* ]] || fail "stderr: $stderr"
	kill -CONT "$ZPARENT"
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "free"'
}
