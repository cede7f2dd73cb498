#!/usr/bin/env bats
# inspect: states, liveness verdicts (from hand-edited owner documents),
# overlapping locks, --owner, --all; it never creates or changes anything.

load helpers

assert_reason() { # JSON: liveness_reason is one non-empty line
	jq_ok '.liveness_reason | type == "string" and length > 0 and (contains("\n") | not)' "$1"
}

@test "inspect of a free workspace" {
	mkws a
	run -0 --separate-stderr wsl inspect "$(W a)"
	[ "${#lines[@]}" -eq 1 ] || fail "not one line: $output"
	jq_ok 'keys == ["liveness","liveness_reason","mode","overlapping","owner","owners","state","workspace_root"]'
	jq_ok '.mode == null and .owners == []'
	jq_ok ".workspace_root == \"$(canon "$(W a)")\""
	jq_ok '.state == "free" and .owner == null and .liveness == null and .overlapping == []'
	[ -z "$stderr" ] || fail "stderr: $stderr"
}

@test "inspect of a workspace held by run: held, live, with reason, owner and lock_path" {
	mkws a
	hold "$(W a)"
	run -0 --separate-stderr wsl inspect "$(W a)"
	jq_ok '.state == "held" and .liveness == "live"'
	assert_reason "$output"
	jq_ok "(.owner | keys) == $OWNER_KEYS"
	jq_ok ".owner.workspace_root == \"$(canon "$(W a)")\""
	jq_ok ".lock_path == \"$(lock_dir_of "$(W a)")/owner.json\""
	jq_ok '.overlapping == []'
}

@test "inspect of a workspace held through acquire by a live pid: live with reason" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "live"' "$INSPECT"
	assert_reason "$INSPECT"
	jq -e --argjson o "$OWNER" '.owner == $o' <<<"$INSPECT" >/dev/null || fail "owner differs: $INSPECT"
}

@test "liveness: holder pid gone -> dead, with a reason" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	kill "$SLEEPER_PID"
	wait_exit "$SLEEPER_PID"
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "dead"' "$INSPECT"
	assert_reason "$INSPECT"
}

@test "liveness: a holder killed but not yet reaped (a zombie) -> dead at once" {
	local parent child
	mkws a
	# The parent forks the holder and never waits for it.
	python3 -c 'import os, sys, time
c = os.fork()
if c == 0:
    time.sleep(300)
    os._exit(0)
print(c, flush=True)
time.sleep(300)' >"$BATS_TEST_TMPDIR/child" </dev/null 2>/dev/null 3>&- &
	parent=$!
	track_pid "$parent"
	wait_for "[ -s '$BATS_TEST_TMPDIR/child' ]" 30 || fail "no child pid"
	child=$(cat "$BATS_TEST_TMPDIR/child")
	acquire_as "$child" "$(W a)"
	kill -KILL "$child"
	wait_for "[ \"\$(sed 's/.*) //' /proc/$child/stat | cut -d' ' -f1)\" = Z ]" 30 ||
		fail "pid $child did not become a zombie"
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "dead"' "$INSPECT"
	jq_ok ".liveness_reason == \"pid $child has exited (a zombie, not yet reaped)\"" "$INSPECT"
	run -69 --separate-stderr wsl run -n "$(W a)" -- true
	[[ "$stderr" == *"zombie"* ]] || fail "stderr: $stderr"
	is_running "$parent" || fail "the parent ended, so the zombie may have been reaped"
}

@test "liveness: pid alive but other pid_start_ticks (pid reused) -> dead" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	edit_owner "$(W a)" '.pid_start_ticks += 1'
	[ "$(stat -c %a "$(lock_dir_of "$(W a)")/owner.json")" = 600 ]
	is_running "$SLEEPER_PID"
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "dead"' "$INSPECT"
	assert_reason "$INSPECT"
	run -69 --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	assert_json_error WSLOCK_RECOVERY_REQUIRED
}

@test "liveness: other boot_id (host rebooted) -> dead even though the pid is alive" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	edit_owner "$(W a)" '.boot_id = "00000000-0000-4000-8000-000000000000"'
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "dead"' "$INSPECT"
	assert_reason "$INSPECT"
	run -69 --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	assert_json_error WSLOCK_RECOVERY_REQUIRED
}

@test "liveness: another host -> unknown; acquire and run never take it, and give 69 WSLOCK_LIVENESS_UNKNOWN as inspect --exit-status does" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	edit_owner "$(W a)" '.host = "some-other-host.invalid"'
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "unknown"' "$INSPECT"
	assert_reason "$INSPECT"
	run -69 wsl inspect --exit-status -q "$(W a)"
	run -69 --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	assert_json_error WSLOCK_LIVENESS_UNKNOWN
	[[ "$stderr" == *"liveness is unknown (held on host some-other-host.invalid"*"once its holder has ended"*"recover --force --reason"* ]] ||
		fail "stderr: $stderr"
	run -69 --separate-stderr wsl acquire --reclaim-dead -n --pid $$ "$(W a)"
	assert_json_error WSLOCK_LIVENESS_UNKNOWN
	run -69 --separate-stderr wsl run -n "$(W a)" -- echo RAN
	[[ "$output" != *RAN* ]] || fail "ran beside the holder"
	[[ "$stderr" == *"[WSLOCK_LIVENESS_UNKNOWN]" ]] || fail "stderr: $stderr"
	# It is waited for (it may release), then the same 69.
	run -69 --separate-stderr wsl run -w 1 "$(W a)" -- echo RAN
	[[ "$stderr" == *"timed out: "*"liveness is unknown"*"[WSLOCK_LIVENESS_UNKNOWN]" ]] || fail "stderr: $stderr"
	# -E N replaces 75 for a live owner only.
	run -69 --separate-stderr wsl run -n -E 3 "$(W a)" -- echo RAN
	jq -e '.host == "some-other-host.invalid"' "$(lock_dir_of "$(W a)")/owner.json" >/dev/null
}

@test "liveness: another host with a dead pid and other boot id is still unknown" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	kill "$SLEEPER_PID"
	wait_exit "$SLEEPER_PID"
	edit_owner "$(W a)" '.host = "elsewhere" | .boot_id = "00000000-0000-4000-8000-000000000000"'
	inspect_json "$(W a)"
	jq_ok '.liveness == "unknown"' "$INSPECT"
	assert_reason "$INSPECT"
}

@test "liveness: WSLOCK_HOST is recorded and compared" {
	mkws a
	start_sleeper
	OWNER=$(WSLOCK_HOST=ci-runner-7 wsl acquire --pid "$SLEEPER_PID" "$(W a)")
	jq_ok '.host == "ci-runner-7"' "$OWNER"
	inspect_json "$(W a)"
	jq_ok '.liveness == "unknown"' "$INSPECT"
	INSPECT=$(WSLOCK_HOST=ci-runner-7 wsl inspect "$(W a)")
	jq_ok '.liveness == "live"' "$INSPECT"
}

@test "liveness: pid 4194304 (in range, not running) -> held and dead, not corrupt" {
	mkws a
	acquire_as $$ "$(W a)"
	edit_owner "$(W a)" '.pid = 4194304'
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "dead"' "$INSPECT"
	assert_reason "$INSPECT"
}

@test "liveness verdicts differ in their reasons" {
	mkws a b c
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	acquire_as "$SLEEPER_PID" "$(W b)"
	acquire_as "$SLEEPER_PID" "$(W c)"
	edit_owner "$(W b)" '.pid_start_ticks += 1'
	edit_owner "$(W c)" '.boot_id = "00000000-0000-4000-8000-000000000000"'
	ra=$(wsl inspect "$(W a)" | jq -r .liveness_reason)
	rb=$(wsl inspect "$(W b)" | jq -r .liveness_reason)
	rc=$(wsl inspect "$(W c)" | jq -r .liveness_reason)
	[ "$ra" != "$rb" ] && [ "$rb" != "$rc" ] && [ "$ra" != "$rc" ] ||
		fail "reasons do not tell the verdicts apart: '$ra' '$rb' '$rc'"
}

@test "inspect of a corrupt lock: state corrupt, owner and liveness null, a problem and the lock path" {
	mkws a
	acquire_as $$ "$(W a)"
	printf 'this is not json' | put_owner "$(W a)"
	run -0 --separate-stderr wsl inspect "$(W a)"
	jq_ok '.state == "corrupt" and .owner == null and .liveness == null'
	jq_ok '.problem | type == "string" and length > 0'
	jq_ok ".lock_path == \"$(lock_dir_of "$(W a)")/owner.json\""
	jq_ok ".workspace_root == \"$(canon "$(W a)")\""
}

@test "overlapping lists a held descendant" {
	mkws w/sub w/other
	hold "$(W w/sub)"
	inspect_json "$(W w)"
	jq_ok '.state == "free" and (.overlapping | length) == 1' "$INSPECT"
	jq_ok ".overlapping[0].workspace_root == \"$(canon "$(W w/sub)")\" and .overlapping[0].relation == \"descendant\"" "$INSPECT"
	jq_ok '.overlapping[0].state == "held" and .overlapping[0].liveness == "live"' "$INSPECT"
	jq_ok '.overlapping[0].liveness_reason | type == "string" and length > 0' "$INSPECT"
	jq_ok ".overlapping[0].owner.workspace_root == \"$(canon "$(W w/sub)")\"" "$INSPECT"
	inspect_json "$(W w/other)"
	jq_ok '.overlapping == []' "$INSPECT"
}

@test "overlapping lists a held ancestor" {
	mkws w/sub/deep
	hold "$(W w)"
	inspect_json "$(W w/sub/deep)"
	jq_ok '.state == "free" and (.overlapping | length) == 1' "$INSPECT"
	jq_ok ".overlapping[0].workspace_root == \"$(canon "$(W w)")\" and .overlapping[0].relation == \"ancestor\"" "$INSPECT"
	jq_ok '.overlapping[0].state == "held" and .overlapping[0].liveness == "live"' "$INSPECT"
	# The lock itself is not listed as overlapping itself.
	inspect_json "$(W w)"
	jq_ok '.state == "held" and .overlapping == []' "$INSPECT"
}

@test "overlapping lists a corrupt descendant lock" {
	mkws w/sub
	acquire_as $$ "$(W w/sub)"
	printf '{"garbage":' | put_owner "$(W w/sub)"
	inspect_json "$(W w)"
	jq_ok '(.overlapping | length) == 1 and .overlapping[0].state == "corrupt" and .overlapping[0].relation == "descendant"' "$INSPECT"
}

@test "inspect --owner prints exactly the owner document, or null when free" {
	mkws a b
	acquire_as $$ "$(W a)" --purpose 'owner check'
	run -0 --separate-stderr wsl inspect --owner "$(W a)"
	[ "${#lines[@]}" -eq 1 ] || fail "not one line: $output"
	jq -e --argjson o "$OWNER" '. == $o' <<<"$output" >/dev/null || fail "differs: $output vs $OWNER"
	[ "$output" = "$OWNER" ] || fail "not byte-identical to the acquired document: $output vs $OWNER"
	jq_ok "keys == $OWNER_KEYS"
	run -0 --separate-stderr wsl inspect --owner "$(W b)"
	[ "$output" = null ] || fail "free workspace --owner: '$output'"
}

@test "inspect --owner of a workspace that does not exist: 66 WSLOCK_NO_WORKSPACE, as without --owner" {
	run -66 --separate-stderr wsl inspect "$(W missing)"
	assert_json_error WSLOCK_NO_WORKSPACE
	run -66 --separate-stderr wsl inspect --owner "$(W missing)"
	assert_json_error WSLOCK_NO_WORKSPACE
	[[ "$stderr" == *"does not exist"* ]] || fail "stderr: $stderr"
}

@test "inspect --all lists every lock in the registry" {
	mkws a b c/sub d
	hold "$(W a)"
	acquire_as $$ "$(W b)"
	acquire_as $$ "$(W c/sub)"
	acquire_as $$ "$(W d)"
	printf 'garbage' | put_owner "$(W d)"
	run -0 --separate-stderr wsl inspect --all
	[ "${#lines[@]}" -eq 1 ] || fail "not one line: $output"
	jq_ok '(.locks | length) == 4'
	# A corrupt lock's workspace cannot be known from its key (a hash): it
	# is identified by its lock_path.
	got=$(jq -r '[.locks[] | select(.state != "corrupt") | .workspace_root] | sort | join(" ")' <<<"$output")
	want=$(printf '%s\n' "$(canon "$(W a)")" "$(canon "$(W b)")" "$(canon "$(W c/sub)")" | LC_ALL=C sort | paste -sd' ')
	[ "$got" = "$want" ] || fail "locks: $got, want $want"
	jq_ok "[.locks[] | select(.workspace_root == \"$(canon "$(W a)")\")][0] | .state == \"held\" and .liveness == \"live\"" "$output"
	jq_ok "[.locks[] | select(.lock_path == \"$(lock_dir_of "$(W d)")/owner.json\")] | length == 1 and (.[0] | .state == \"corrupt\" and .owner == null and (.problem | length > 0))" "$output"
	jq_ok '[.locks[] | has("overlapping")] | any | not'
}

@test "inspect --all of many locks of one holder: each lock's start time is still compared (a reused pid is dead after a live one)" {
	local i k n=0
	mkws w1 w2 w3 w4 w5 w6
	start_sleeper
	for i in 1 2 3 4 5 6; do acquire_as "$SLEEPER_PID" "$(W "w$i")"; done
	# Every other lock in listing order (the order of the keys) says
	# another start time: each of those follows a live one.
	for k in $(ls "$WSLOCK_DIR/locks" | LC_ALL=C sort); do
		n=$((n + 1))
		[ $((n % 2)) = 0 ] || continue
		jq -c '.pid_start_ticks += 1' "$WSLOCK_DIR/locks/$k/owner.json" >"$BATS_TEST_TMPDIR/o.json"
		printf '%s' "$(cat "$BATS_TEST_TMPDIR/o.json")" >"$WSLOCK_DIR/locks/$k/owner.json"
	done
	run -0 --separate-stderr wsl inspect --all
	jq_ok '[.locks[] | .liveness] == ["live", "dead", "live", "dead", "live", "dead"]'
	jq_ok '[.locks[] | select(.liveness == "dead") | .liveness_reason | test("reused")] | all'
}

@test "inspect --all read in passes of a few keys (test build): every lock once, in key order, the bytes of one pass" {
	local T=$BATS_TEST_DIRNAME/../wslock-test i p one got want
	[ -x "$T" ] || fail "the test binary is not built (make test-build)"
	mkws w1 w2 w3 w4 w5 w6 w7
	start_sleeper
	for i in 1 2 3 4 5 6 7; do acquire_as "$SLEEPER_PID" "$(W "w$i")"; done
	# A name that is no key is merged in by name, whatever the pass.
	mkdir -m 0700 "$WSLOCK_DIR/locks/7-not-a-key"
	one=$(timeout -k 5 30 "$T" inspect --all) || fail "inspect --all failed"
	want=$( (ls "$WSLOCK_DIR/locks" | sed "s|^|$WSLOCK_DIR/locks/|; s|\$|/owner.json|") | LC_ALL=C sort | paste -sd' ')
	got=$(jq -r '[.locks[] | .lock_path] | join(" ")' <<<"$one")
	[ "$got" = "$want" ] || fail "order: $got, want $want"
	for p in 1 2 3 7 8; do
		got=$(WSLOCK_TEST_LIST_PASS=$p timeout -k 5 30 "$T" inspect --all) || fail "pass $p: failed"
		[ "$got" = "$one" ] || fail "pass of $p keys: $got, want $one"
	done
}

@test "inspect --all prints an owner document whose keys are out of order in the file in the documented order, as inspect WORKSPACE does" {
	mkws a b
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	acquire_as "$SLEEPER_PID" "$(W b)"
	edit_owner "$(W a)" 'to_entries | reverse | from_entries'
	[ "$(head -c 15 "$(lock_dir_of "$(W a)")/owner.json")" = '{"recovery_of":' ] || fail "not reordered"
	run -0 --separate-stderr wsl inspect "$(W a)"
	want=$(jq -c .owner <<<"$output")
	run -0 --separate-stderr wsl inspect --all
	got=$(jq -c --arg w "$(canon "$(W a)")" '.locks[] | select(.workspace_root == $w) | .owner' <<<"$output")
	[ "$got" = "$want" ] || fail "--all: $got, want $want"
	got=$(jq -c --arg w "$(canon "$(W a)")" '.locks[] | select(.workspace_root == $w) | .owners[0]' <<<"$output")
	[ "$got" = "$want" ] || fail "--all owners: $got, want $want"
	jq_ok 'keys_unsorted[0:3] == ["schema_version", "kind", "token"]' "$want"
}

@test "inspect --all of an empty registry is an empty list" {
	mkws a
	run -0 --separate-stderr wsl run "$(W a)" -- true
	run -0 --separate-stderr wsl inspect --all
	jq_ok '.locks == []'
}

@test "inspect never creates the registry" {
	mkws a
	export WSLOCK_DIR=$BATS_TEST_TMPDIR/nonexistent/reg
	run -0 --separate-stderr wsl inspect "$(W a)"
	jq_ok '.state == "free"'
	run -0 --separate-stderr wsl inspect --owner "$(W a)"
	[ "$output" = null ]
	run -0 --separate-stderr wsl inspect --all
	jq_ok '.locks == []'
	run -0 --separate-stderr wsl -d "$BATS_TEST_TMPDIR/other-reg" inspect "$(W a)"
	[ ! -e "$BATS_TEST_TMPDIR/nonexistent" ] || fail "inspect created $(find "$BATS_TEST_TMPDIR/nonexistent")"
	[ ! -e "$BATS_TEST_TMPDIR/other-reg" ] || fail "inspect -d created the registry"
}

@test "inspect never creates the registry even when its parent exists" {
	mkws a
	run -0 --separate-stderr wsl inspect "$(W a)"
	[ ! -e "$WSLOCK_DIR" ] || fail "inspect created $WSLOCK_DIR"
}

@test "inspect changes nothing on disk (held, dead, unknown, corrupt, free, --all, --owner)" {
	mkws a b c d e f
	hold "$(W a)"
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W b)"
	acquire_as "$SLEEPER_PID" "$(W c)"
	edit_owner "$(W c)" '.pid_start_ticks += 1'
	acquire_as "$SLEEPER_PID" "$(W d)"
	edit_owner "$(W d)" '.host = "elsewhere"'
	acquire_as "$SLEEPER_PID" "$(W e)"
	printf '{}' | put_owner "$(W e)"
	before=$(registry_snapshot --strict)
	for w in a b c d e f; do
		run -0 --separate-stderr wsl inspect "$(W $w)"
		run --separate-stderr wsl inspect --owner "$(W $w)"
		[[ $status == 0 || ($w == e && $status == 65) ]] || fail "inspect --owner $w: status $status"
		run -0 --separate-stderr wsl inspect --pretty "$(W $w)"
	done
	run -0 --separate-stderr wsl inspect --all
	assert_same_snapshot "$before" "$(registry_snapshot --strict)"
}

@test "inspect --pretty prints the same document indented" {
	mkws a
	acquire_as $$ "$(W a)"
	compact=$(wsl inspect "$(W a)")
	run -0 --separate-stderr wsl inspect --pretty "$(W a)"
	[ "${#lines[@]}" -gt 1 ] || fail "not indented: $output"
	jq -e --argjson c "$compact" '. == $c' <<<"$output" >/dev/null
}

@test "inspect of a missing workspace fails with 66 WSLOCK_NO_WORKSPACE" {
	run -66 --separate-stderr wsl inspect "$(W missing)"
	assert_json_error WSLOCK_NO_WORKSPACE
}

# exit_state WS STATUS STATE: inspect --exit-status WS exits STATUS and
# still prints its JSON (state STATE); with -q it prints nothing.
exit_state() {
	run --separate-stderr wsl inspect --exit-status "$1"
	[ "$status" -eq "$2" ] || fail "inspect --exit-status $1: $status, not $2 ($output)"
	jq_ok ".state == \"$3\""
	run --separate-stderr wsl inspect -q --exit-status "$1"
	[ "$status" -eq "$2" ] || fail "inspect -q --exit-status $1: $status, not $2"
	[ -z "$output" ] || fail "-q printed on stdout: $output"
	[ -z "$stderr" ] || fail "stderr: $stderr"
}

@test "inspect --exit-status: 0 free, 75 live, 69 dead, unknown or retained, 65 corrupt; the JSON still printed, nothing with -q" {
	mkws free live dead unknown retained corrupt
	exit_state "$(W free)" 0 free
	start_sleeper
	local live=$SLEEPER_PID
	acquire_as "$live" "$(W live)"
	exit_state "$(W live)" 75 held
	dead_acquired "$(W dead)"
	exit_state "$(W dead)" 69 held
	acquire_as "$live" "$(W unknown)"
	edit_owner "$(W unknown)" '.host = "some-other-host.invalid"'
	exit_state "$(W unknown)" 69 held
	run -1 --separate-stderr wsl run --retain-on-failure "$(W retained)" -- false
	exit_state "$(W retained)" 69 retained
	acquire_as "$live" "$(W corrupt)"
	printf 'not json' | put_owner "$(W corrupt)"
	exit_state "$(W corrupt)" 65 corrupt
	# --owner and --format text give the same status.
	run -75 --separate-stderr wsl inspect --exit-status --owner "$(W live)"
	jq_ok ".token == $(jq .token <<<"$(wsl inspect --owner "$(W live)")")"
	run -69 --separate-stderr wsl inspect --exit-status --format text "$(W dead)"
	[[ $output == *WORKSPACE* ]] || fail "no text view: $output"
	# Errors keep their own status.
	run -66 --separate-stderr wsl inspect --exit-status "$(W missing)"
	assert_json_error WSLOCK_NO_WORKSPACE
	run -64 --separate-stderr wsl inspect --exit-status --all
	assert_usage_error
}

@test "inspect --exit-status is the worst of the workspace's own lock and the overlapping ones (65 > 69 > 75 > 0), as run meets them" {
	mkws live/sub dead/sub down/a down/b down/c
	start_sleeper
	local live=$SLEEPER_PID
	acquire_as "$live" "$(W live)"
	dead_acquired "$(W dead)"
	# An ancestor: the JSON's state stays the workspace's own.
	exit_state "$(W live/sub)" 75 free
	run -75 --separate-stderr wsl run -n "$(W live/sub)" -- true
	exit_state "$(W dead/sub)" 69 free
	run -69 --separate-stderr wsl run -n "$(W dead/sub)" -- true
	run -69 --separate-stderr wsl inspect --exit-status --owner "$(W dead/sub)"
	[ "$output" = null ] || fail "--owner of a free workspace: $output"
	# Descendants (siblings of each other): the worst of them.
	exit_state "$(W down)" 0 free
	acquire_as "$live" "$(W down/a)"
	exit_state "$(W down)" 75 free
	dead_acquired "$(W down/b)"
	exit_state "$(W down)" 69 free
	acquire_as "$live" "$(W down/c)"
	printf 'not json' | put_owner "$(W down/c)"
	exit_state "$(W down)" 65 free
	run -65 --separate-stderr wsl run -n "$(W down)" -- true
	# The README's snippet says busy only for a live holder.
	run -0 env W="$WSLOCK" sh -c 'wslock() { "$W" "$@"; }; wslock inspect -q --exit-status "$1"; case $? in 0) echo free ;; 75) echo busy ;; *) echo other ;; esac' \
		sh "$(W dead/sub)"
	[ "$output" = other ] || fail "the snippet says: $output"
}

@test "inspect -q --exit-status prints nothing at all, even for an error: the status says it (66 for a workspace that does not exist)" {
	run -66 --separate-stderr wsl inspect -q --exit-status "$BATS_TEST_TMPDIR/nonexistent"
	[ -z "$output$stderr" ] || fail "stdout '$output' stderr '$stderr'"
	run -66 --separate-stderr wsl inspect --exit-status "$BATS_TEST_TMPDIR/nonexistent"
	[[ $stderr == *WSLOCK_NO_WORKSPACE* ]]
}
