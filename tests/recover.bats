#!/usr/bin/env bats
# recover: exact-owner takeover of a dead holder's lock (DESIGN §2, §4, §6;
# doc/cli-notes.md "Recovery").  Live owners are never displaced, unknown
# liveness needs --force --reason, any difference is WSLOCK_OWNER_MISMATCH
# and changes nothing.

load helpers

# die_holding WS [RUN-OPTIONS...]: leave WS locked by a dead owner: a `run`
# whose wslock is SIGKILLed by its own child (the child then exits).
# Sets DEAD_OWNER to the owner document.
die_holding() {
	local ws=$1
	shift
	run -137 wsl run "$@" "$ws" -- sh -c 'kill -9 $PPID'
	inspect_json "$ws"
	jq_ok '.state == "held" and .liveness == "dead"' "$INSPECT"
	DEAD_OWNER=$(json_get .owner "$INSPECT")
}

owner_file() { printf '%s/owner.json' "$(lock_dir_of "$1")"; }

# assert_no_journal_change BEFORE: journal bytes are what they were.
journal_bytes() { cat "$WSLOCK_DIR/journal.jsonl" 2>/dev/null | b2sum; }

# assert_recovered_from OLD-OWNER-JSON NEW-OWNER-JSON
assert_recovered_from() {
	jq -e -n --argjson o "$1" --argjson n "$2" '
		$n.token != $o.token and ($n.token | test("^[0-9a-f]{32}$"))
		and $n.recovery_of == $o.token
		and $n.operation_id == $o.operation_id
		and $n.purpose == $o.purpose
		and $n.workspace_root == $o.workspace_root
		and $n.kind == "wslock-owner" and $n.schema_version == 2
		and ($n | keys) == '"$OWNER_KEYS"'
		and ([$o | keys | .[] | select(. as $k | $n | has($k) | not)] == [])' >/dev/null ||
		fail "new owner is not a recovery of the old one:
old: $1
new: $2"
}

@test "the 3 a.m. runbook: inspect, inspect --owner > owner.json, check, recover" {
	mkws a
	die_holding "$(W a)" --purpose "nightly build" --operation-id job-42
	cd "$BATS_TEST_TMPDIR"
	# 1. inspect: who holds it and is it dead?
	run -0 --separate-stderr wsl inspect "$(W a)"
	jq_ok '.state == "held" and .liveness == "dead" and (.liveness_reason | type == "string" and length > 0)'
	jq_ok '.owner.purpose == "nightly build" and .owner.operation_id == "job-42"'
	# 2. save the owner document.
	wsl inspect --owner "$(W a)" >owner.json
	# 3. check it: it is the owner inspect showed.
	jq -e --argjson o "$(json_get .owner)" '. == $o' owner.json >/dev/null || fail "inspect --owner differs from inspect's owner"
	old=$(cat owner.json)
	# 4. recover.
	run -0 --separate-stderr wsl recover --expected-owner owner.json "$(W a)"
	[ "${#lines[@]}" -eq 1 ] || fail "recover output is not one JSON line: $output"
	jq_ok ".action == \"recovered\" and .workspace_root == \"$(canon "$(W a)")\""
	jq_ok '.liveness == "dead" and (.liveness_reason | type == "string" and length > 0)'
	jq_ok '.released == true'
	jq -e --argjson o "$old" '.prior_owner == $o' <<<"$output" >/dev/null || fail "prior_owner is not the expected document: $output"
	assert_recovered_from "$old" "$(json_get .owner)"
	inspect_json "$(W a)"
	jq_ok '.state == "free" and .owner == null' "$INSPECT"
	[ ! -e "$(lock_dir_of "$(W a)")" ] || fail "lock directory left behind"
	# The workspace is usable again.
	run -0 --separate-stderr wsl run -n "$(W a)" -- true
}

@test "a lock whose workspace was removed: the pasted next line says to drop the command, a plain recover clears it" {
	local next lockdir left
	mkws a
	dead_acquired "$(W a)"
	lockdir=$(lock_dir_of "$(W a)")
	run -69 --separate-stderr wsl run -n "$(W a)" -- true
	next=${stderr##*next: }
	next=${next% \[WSLOCK_*}
	[[ "$next" == *"-- REPAIR-CMD" ]] || fail "no pasteable next line: $stderr"
	rmdir "$(W a)"
	cd "$BATS_TEST_TMPDIR"
	# The next line, pasted with a repair command: the command cannot run
	# in a directory that is gone, and nothing changes.
	run -66 --separate-stderr bash -c "${next//wslock /$WSLOCK }" _
	[[ "$stderr" == *"does not exist"*"without '-- REPAIR-CMD'"* ]] || fail "stderr: $stderr"
	jq -e --argjson o "$DEAD_OWNER" '. == $o' owner.json >/dev/null || fail "owner.json is not the dead owner"
	[ -e "$lockdir/owner.json" ] || fail "the lock went away"
	# Plain recover, with the same document.
	run -0 --separate-stderr wsl recover --expected-owner owner.json "$(W a)"
	jq_ok '.action == "recovered" and .released == true'
	assert_recovered_from "$DEAD_OWNER" "$(json_get .owner)"
	[ ! -e "$lockdir" ] || fail "lock directory left behind"
	left=$(wsl_registry_leftovers "$WSLOCK_DIR") || fail "left in the registry: $left"
	mkws a
	run -0 --separate-stderr wsl run -n "$(W a)" -- true
}

@test "a holder killed with SIGKILL: its child keeps it live; once the child is gone, the exact document recovers it" {
	mkws a
	hold --purpose "deploy" "$(W a)"
	kill -KILL "$HOLD_PID"
	wait_exit "$HOLD_PID" 10
	wsl inspect --owner "$(W a)" >"$BATS_TEST_TMPDIR/owner.json"
	# The child still holds the kernel lock on `live`: never displaced.
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "live"' "$INSPECT"
	before=$(registry_snapshot)
	run -75 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	assert_json_error WSLOCK_OWNER_LIVE
	assert_same_snapshot "$before" "$(registry_snapshot)"
	# The child finishes: nobody is left, the owner is dead.
	touch "$HOLD_DIR/GO"
	wait_for "! is_running $HOLD_CHILD" 10
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "dead"' "$INSPECT"
	run -0 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	jq_ok '.action == "recovered" and .released == true'
	assert_recovered_from "$(cat "$BATS_TEST_TMPDIR/owner.json")" "$(json_get .owner)"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "recover accepts the document re-indented and with keys reordered" {
	mkws a b
	dead_acquired "$(W a)"
	jq . <<<"$DEAD_OWNER" >"$BATS_TEST_TMPDIR/pretty.json"
	run -0 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/pretty.json" "$(W a)"
	jq_ok '.action == "recovered"'
	dead_acquired "$(W b)"
	# Sorted keys, tabs, CRLF-free but odd spacing.
	jq -S --tab . <<<"$DEAD_OWNER" | sed 's/:/ :  /' >"$BATS_TEST_TMPDIR/sorted.json"
	run -0 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/sorted.json" "$(W b)"
	jq_ok '.action == "recovered"'
}

@test "recover --expected-owner - reads the document from stdin" {
	mkws a
	dead_acquired "$(W a)"
	wsl inspect --owner "$(W a)" >"$BATS_TEST_TMPDIR/owner.json"
	run -0 --separate-stderr wsl recover --expected-owner - "$(W a)" <"$BATS_TEST_TMPDIR/owner.json"
	jq_ok '.action == "recovered" and .released == true'
	assert_recovered_from "$DEAD_OWNER" "$(json_get .owner)"
	# A pipe works as well.
	mkws b
	dead_acquired "$(W b)"
	run -0 --separate-stderr bash -c 'timeout 30 "$1" inspect --owner "$2" | timeout 30 "$1" recover --expected-owner - "$2"' _ "$WSLOCK" "$(W b)"
	jq_ok '.action == "recovered"'
}

@test "recover refuses a document that differs by one value: 65 WSLOCK_OWNER_MISMATCH with the current owner, nothing changed" {
	mkws a
	dead_acquired "$(W a)" --purpose "p1" --operation-id op-1
	before=$(registry_snapshot)
	f=$BATS_TEST_TMPDIR/expected.json
	for filter in \
		'.pid += 1' \
		'.pid_start_ticks += 1' \
		'.token = "0123456789abcdef0123456789abcdef"' \
		'.purpose = "p2"' \
		'.operation_id = "op-2"' \
		'.acquired_at = "2001-01-01T00:00:00.000Z"' \
		'.recovery_of = "0123456789abcdef0123456789abcdef"' \
		'.host = "other-host"' \
		'.boot_id = "00000000-0000-4000-8000-000000000000"' \
		'.identity_policy = "pid-only-fail-closed"'; do
		jq -c "$filter" <<<"$DEAD_OWNER" >"$f"
		run -65 --separate-stderr wsl recover --expected-owner "$f" "$(W a)"
		assert_json_error WSLOCK_OWNER_MISMATCH
		jq -e --argjson o "$DEAD_OWNER" '.error.holder == $o' <<<"$output" >/dev/null ||
			fail "[$filter] error details do not carry the current owner: $output"
	done
	# A different key set (extra, missing) or a different type: also 65.
	for filter in '.extra = 1' 'del(.purpose)' '.pid |= tostring' '.recovery_of = false'; do
		jq -c "$filter" <<<"$DEAD_OWNER" >"$f"
		run -65 --separate-stderr wsl recover --expected-owner "$f" "$(W a)"
		jq_ok '.error.code == "WSLOCK_OWNER_MISMATCH" or .error.code == "WSLOCK_INVALID_OWNER"'
		assert_one_stderr_line
	done
	assert_same_snapshot "$before" "$(registry_snapshot)"
	[ ! -e "$WSLOCK_DIR/journal.jsonl" ] || fail "a refused recover wrote the journal"
	# The exact document still works afterwards.
	printf '%s' "$DEAD_OWNER" >"$f"
	run -0 --separate-stderr wsl recover --expected-owner "$f" "$(W a)"
}

@test "recover never displaces a live owner, even with --force --reason: 75 WSLOCK_OWNER_LIVE" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	printf '%s' "$OWNER" >"$BATS_TEST_TMPDIR/owner.json"
	before=$(registry_snapshot)
	run -75 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	assert_json_error WSLOCK_OWNER_LIVE
	jq -e --argjson o "$OWNER" '.error.holder == $o' <<<"$output" >/dev/null || fail "holder not in details: $output"
	run -75 --separate-stderr wsl recover --force --reason "I am sure" --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	assert_json_error WSLOCK_OWNER_LIVE
	assert_same_snapshot "$before" "$(registry_snapshot)"
	# A `run` holder too.
	mkws b
	hold "$(W b)"
	wsl inspect --owner "$(W b)" >"$BATS_TEST_TMPDIR/owner-b.json"
	run -75 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner-b.json" "$(W b)"
	assert_json_error WSLOCK_OWNER_LIVE
	unhold
	[ "$WAIT_STATUS" = 0 ] || fail "holder exited $WAIT_STATUS"
}

@test "an owner on another host: 69 WSLOCK_LIVENESS_UNKNOWN; --force without --reason is 64; --force --reason recovers" {
	mkws a
	dead_acquired "$(W a)"
	edit_owner "$(W a)" '.host = "build-07.elsewhere.example"'
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "unknown" and (.liveness_reason | length > 0)' "$INSPECT"
	wsl inspect --owner "$(W a)" >"$BATS_TEST_TMPDIR/owner.json"
	old=$(cat "$BATS_TEST_TMPDIR/owner.json")
	before=$(registry_snapshot)
	run -69 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	assert_json_error WSLOCK_LIVENESS_UNKNOWN
	run -64 --separate-stderr wsl recover --force --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	jq_ok '.error.code == "WSLOCK_USAGE"'
	run -64 --separate-stderr wsl recover --force --reason "" --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	jq_ok '.error.code == "WSLOCK_USAGE"'
	assert_same_snapshot "$before" "$(registry_snapshot)"
	[ ! -e "$WSLOCK_DIR/journal.jsonl" ] || fail "a refused recover wrote the journal"
	run -0 --separate-stderr wsl recover --force --reason "build-07 was decommissioned" \
		--expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	jq_ok '.action == "recovered" and .liveness == "unknown"'
	assert_recovered_from "$old" "$(json_get .owner)"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
	jq -e -s 'length == 1 and .[0].forced == true and .[0].force_reason == "build-07 was decommissioned"
		and .[0].liveness == "unknown"' "$WSLOCK_DIR/journal.jsonl" >/dev/null ||
		fail "journal: $(cat "$WSLOCK_DIR/journal.jsonl")"
}

@test "pid reuse: a live pid with other start ticks counts as dead and is recovered" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	edit_owner "$(W a)" ".pid_start_ticks = $(($(start_ticks "$SLEEPER_PID") + 1))"
	is_running "$SLEEPER_PID" || fail "sleeper gone"
	inspect_json "$(W a)"
	jq_ok '.liveness == "dead" and (.liveness_reason | length > 0)' "$INSPECT"
	wsl inspect --owner "$(W a)" >"$BATS_TEST_TMPDIR/owner.json"
	run -0 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	jq_ok '.action == "recovered" and .liveness == "dead"'
	is_running "$SLEEPER_PID" || fail "recover touched the process that reused the pid"
}

@test "a rebooted host (other boot id) counts as dead, even with the pid alive" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	edit_owner "$(W a)" '.boot_id = "00000000-1111-4222-8333-444444444444"'
	inspect_json "$(W a)"
	jq_ok '.liveness == "dead" and (.liveness_reason | length > 0)' "$INSPECT"
	wsl inspect --owner "$(W a)" >"$BATS_TEST_TMPDIR/owner.json"
	run -0 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	jq_ok '.action == "recovered" and .liveness == "dead"'
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "recover of a free workspace: 66 WSLOCK_NOT_HELD" {
	mkws a
	acquire_as $$ "$(W a)"
	printf '%s' "$OWNER" >"$BATS_TEST_TMPDIR/owner.json"
	wsl release --token "$(json_get .token "$OWNER")" "$(W a)" >/dev/null
	before=$(registry_snapshot)
	run -66 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	assert_json_error WSLOCK_NOT_HELD
	assert_same_snapshot "$before" "$(registry_snapshot)"
	[ ! -e "$(lock_dir_of "$(W a)")" ] || fail "recover created a lock"
}

@test "an invalid expected document on a valid lock: 65, nothing changed" {
	mkws a
	dead_acquired "$(W a)"
	before=$(registry_snapshot)
	f=$BATS_TEST_TMPDIR/expected.json
	i=0
	for doc in 'garbage' '' 'null' '[]' '{}' "$DEAD_OWNER trailing" "$DEAD_OWNER$DEAD_OWNER" \
		"$(jq -c '.schema_version = 3' <<<"$DEAD_OWNER")" \
		"$(jq -c '.pid = 0' <<<"$DEAD_OWNER")" \
		"$(jq -c '.token = "XYZ"' <<<"$DEAD_OWNER")"; do
		i=$((i + 1))
		printf '%s' "$doc" >"$f"
		run -65 --separate-stderr wsl recover --expected-owner "$f" "$(W a)"
		jq -e '.error.code == "WSLOCK_INVALID_OWNER" or .error.code == "WSLOCK_OWNER_MISMATCH"' <<<"$output" >/dev/null ||
			fail "document #$i: $output"
		assert_one_stderr_line
	done
	# Through stdin as well.
	run -65 --separate-stderr wsl recover --expected-owner - "$(W a)" <<<'not json'
	jq_ok '.error.code == "WSLOCK_INVALID_OWNER" or .error.code == "WSLOCK_OWNER_MISMATCH"'
	assert_same_snapshot "$before" "$(registry_snapshot)"
	[ ! -e "$WSLOCK_DIR/journal.jsonl" ] || fail "journal written"
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "dead"' "$INSPECT"
}

@test "a corrupt lock: 65 without --force, 65 with other bytes, cleared with its exact bytes and --force --reason" {
	mkws a
	dead_acquired "$(W a)"
	valid=$DEAD_OWNER
	printf '{"schema_version":1,"kind":"wslock-owner","tok' | put_owner "$(W a)"
	inspect_json "$(W a)"
	jq_ok '.state == "corrupt"' "$INSPECT"
	cp "$(owner_file "$(W a)")" "$BATS_TEST_TMPDIR/corrupt.json"
	before=$(registry_snapshot)
	# Exact bytes, no --force.
	run -65 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/corrupt.json" "$(W a)"
	assert_json_error WSLOCK_LOCK_CORRUPT
	# --force --reason, but other bytes: the last valid document, or the
	# corrupt bytes plus a newline.
	printf '%s' "$valid" >"$BATS_TEST_TMPDIR/valid.json"
	run -65 --separate-stderr wsl recover --force --reason "cleanup" --expected-owner "$BATS_TEST_TMPDIR/valid.json" "$(W a)"
	assert_json_error "$(json_get .error.code)"
	{ cat "$BATS_TEST_TMPDIR/corrupt.json"; echo; } >"$BATS_TEST_TMPDIR/corrupt-nl.json"
	run -65 --separate-stderr wsl recover --force --reason "cleanup" --expected-owner "$BATS_TEST_TMPDIR/corrupt-nl.json" "$(W a)"
	assert_json_error "$(json_get .error.code)"
	# Other tools do not clear it either.
	run -0 --separate-stderr wsl reclaim --yes
	run -65 --separate-stderr wsl acquire -n --reclaim-dead --pid $$ "$(W a)"
	assert_json_error WSLOCK_LOCK_CORRUPT
	assert_same_snapshot "$before" "$(registry_snapshot)"
	[ ! -e "$WSLOCK_DIR/journal.jsonl" ] || fail "journal written"
	# Exact bytes with --force --reason.
	run -0 --separate-stderr wsl recover --force --reason "truncated by a full disk" \
		--expected-owner "$BATS_TEST_TMPDIR/corrupt.json" "$(W a)"
	jq_ok ".action == \"cleared-corrupt\" and .prior_owner == null and .workspace_root == \"$(canon "$(W a)")\""
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
	[ ! -e "$(lock_dir_of "$(W a)")" ] || fail "lock directory left behind"
	jq -e -s 'length == 1 and .[0].action == "clear-corrupt" and .[0].forced == true
		and .[0].force_reason == "truncated by a full disk"' "$WSLOCK_DIR/journal.jsonl" >/dev/null ||
		fail "journal: $(cat "$WSLOCK_DIR/journal.jsonl")"
}

@test "a valid-JSON but corrupt current owner (extra key) is not recovered by the document it had before" {
	mkws a
	dead_acquired "$(W a)"
	printf '%s' "$DEAD_OWNER" >"$BATS_TEST_TMPDIR/before.json"
	edit_owner "$(W a)" '.note = "edited by hand"'
	inspect_json "$(W a)"
	jq_ok '.state == "corrupt" and .owner == null' "$INSPECT"
	before=$(registry_snapshot)
	run -65 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/before.json" "$(W a)"
	assert_json_error "$(json_get .error.code)"
	run -65 --separate-stderr wsl recover --force --reason x --expected-owner "$BATS_TEST_TMPDIR/before.json" "$(W a)"
	assert_json_error "$(json_get .error.code)"
	assert_same_snapshot "$before" "$(registry_snapshot)"
	# Its exact bytes with --force --reason clear it.
	cp "$(owner_file "$(W a)")" "$BATS_TEST_TMPDIR/corrupt.json"
	run -0 --separate-stderr wsl recover --force --reason "hand-edited" --expected-owner "$BATS_TEST_TMPDIR/corrupt.json" "$(W a)"
	jq_ok '.action == "cleared-corrupt"'
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "the recovered owner keeps operation_id and purpose, gets a new token and recovery_of = the old token" {
	mkws a
	dead_acquired "$(W a)" --purpose "migrate db" --operation-id "release-2026.11"
	printf '%s' "$DEAD_OWNER" >"$BATS_TEST_TMPDIR/owner.json"
	run -0 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	assert_recovered_from "$DEAD_OWNER" "$(json_get .owner)"
	jq_ok '.owner.purpose == "migrate db" and .owner.operation_id == "release-2026.11"'
	jq_ok '.owner.recovery_of != null and .prior_owner.recovery_of == null'
}

@test "recover -- CMD runs CMD under the recovered lock like run and exits with its status" {
	mkws a
	dead_acquired "$(W a)" --purpose "p" --operation-id op-7
	printf '%s' "$DEAD_OWNER" >"$BATS_TEST_TMPDIR/owner.json"
	T=$BATS_TEST_TMPDIR
	run -5 --separate-stderr wsl recover --expected-owner "$T/owner.json" "$(W a)" -- sh -c '
		printf %s "$WSLOCK_TOKEN" >"$1/token"
		printf %s "$WSLOCK_OWNER" >"$1/owner"
		printf %s "$WSLOCK_WORKSPACE" >"$1/workspace"
		"$2" inspect "$3" >"$1/inspect"
		"$2" run -n "$3" -- true; echo $? >"$1/nested"
		echo child-out
		exit 5' sh "$T" "$WSLOCK" "$(W a)"
	[ "$output" = child-out ] || fail "stdout is not only the child's: '$output'"
	assert_recovered_from "$DEAD_OWNER" "$(cat "$T/owner")"
	[ "$(json_get .token "$(cat "$T/owner")")" = "$(cat "$T/token")" ] || fail "WSLOCK_TOKEN is not the new owner's token"
	[ "$(cat "$T/workspace")" = "$(canon "$(W a)")" ] || fail "WSLOCK_WORKSPACE: $(cat "$T/workspace")"
	jq -e --arg t "$(cat "$T/token")" '.state == "held" and .liveness == "live" and .owner.token == $t' "$T/inspect" >/dev/null ||
		fail "inspect during CMD: $(cat "$T/inspect")"
	[ "$(cat "$T/nested")" = 0 ] || fail "nested run under the recovered lock exited $(cat "$T/nested")"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
	jq -e -s --arg t "$(cat "$T/token")" 'length == 1 and .[0].action == "recover" and .[0].new_owner.token == $t' \
		"$WSLOCK_DIR/journal.jsonl" >/dev/null || fail "journal: $(cat "$WSLOCK_DIR/journal.jsonl")"
	# A CMD killed by signal N gives 128+N.
	mkws b
	dead_acquired "$(W b)"
	printf '%s' "$DEAD_OWNER" >"$T/owner-b.json"
	run -143 --separate-stderr wsl recover --expected-owner "$T/owner-b.json" "$(W b)" -- sh -c 'kill -TERM $$'
	inspect_json "$(W b)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "two concurrent recover calls with the same document: exactly one wins, the other gets 65" {
	mkws a
	dead_acquired "$(W a)"
	T=$BATS_TEST_TMPDIR
	printf '%s' "$DEAD_OWNER" >"$T/owner.json"
	for i in 1 2; do
		(
			rc=0
			timeout -k 5 30 "$WSLOCK" recover --expected-owner "$T/owner.json" "$(W a)" -- sh -c '
				printf %s "$WSLOCK_TOKEN" >"$1/won.$2"
				while [ ! -e "$1/GO" ]; do sleep 0.05; done' sh "$T" "$i" \
				</dev/null >"$T/out.$i" 2>"$T/err.$i" || rc=$?
			echo "$rc" >"$T/rc.$i"
		) 3>&- &
		track_pid $!
	done
	# The loser finishes on its own; the winner's CMD is running.
	wait_for "ls '$T'/won.* >/dev/null 2>&1 && { [ -e '$T/rc.1' ] || [ -e '$T/rc.2' ]; }" 20
	if [ -e "$T/rc.1" ]; then loser=1 winner=2; else loser=2 winner=1; fi
	[ ! -e "$T/rc.$winner" ] || fail "both recover calls finished while one CMD should be running"
	[ -e "$T/won.$winner" ] || fail "the CMD that runs is not the winner's"
	[ ! -e "$T/won.$loser" ] || fail "the loser's CMD ran"
	[ "$(cat "$T/rc.$loser")" = 65 ] || fail "loser exited $(cat "$T/rc.$loser"), stdout: $(cat "$T/out.$loser") stderr: $(cat "$T/err.$loser")"
	jq -e --arg t "$(cat "$T/won.$winner")" --arg o "$(json_get .token "$DEAD_OWNER")" \
		'.error.code == "WSLOCK_OWNER_MISMATCH" and .error.holder.token == $t and .error.holder.recovery_of == $o' \
		"$T/out.$loser" >/dev/null || fail "loser's error: $(cat "$T/out.$loser")"
	touch "$T/GO"
	wait_for "[ -e '$T/rc.$winner' ]" 20
	[ "$(cat "$T/rc.$winner")" = 0 ] || fail "winner exited $(cat "$T/rc.$winner"): $(cat "$T/err.$winner")"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
	[ "$(wc -l <"$WSLOCK_DIR/journal.jsonl")" = 1 ] || fail "journal: $(cat "$WSLOCK_DIR/journal.jsonl")"
}

@test "ownership loss: the old holder's release after a takeover is 78 and leaves the new lock intact" {
	mkws a
	dead_acquired "$(W a)"
	old_tok=$(json_get .token "$DEAD_OWNER")
	T=$BATS_TEST_TMPDIR
	printf '%s' "$DEAD_OWNER" >"$T/owner.json"
	"$WSLOCK" recover --expected-owner "$T/owner.json" "$(W a)" -- sh -c '
		printf %s "$WSLOCK_TOKEN" >"$1/new.tmp" && mv "$1/new.tmp" "$1/new"
		while [ ! -e "$1/GO" ]; do sleep 0.05; done' sh "$T" \
		</dev/null >"$T/out" 2>"$T/err" 3>&- &
	rpid=$!
	track_pid "$rpid"
	wait_for "[ -e '$T/new' ] || ! is_running $rpid" 20
	[ -e "$T/new" ] || fail "recover did not run CMD: $(cat "$T/err")"
	new_tok=$(cat "$T/new")
	before=$(registry_snapshot)
	run -78 --separate-stderr wsl release --token "$old_tok" "$(W a)"
	assert_json_error WSLOCK_OWNERSHIP_LOST
	assert_same_snapshot "$before" "$(registry_snapshot)"
	inspect_json "$(W a)"
	jq -e --arg t "$new_tok" --arg o "$old_tok" \
		'.state == "held" and .liveness == "live" and .owner.token == $t and .owner.recovery_of == $o' \
		<<<"$INSPECT" >/dev/null || fail "new lock not intact: $INSPECT"
	touch "$T/GO"
	wait_exit "$rpid" 20
	[ "$WAIT_STATUS" = 0 ] || fail "recover exited $WAIT_STATUS: $(cat "$T/err")"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "ownership loss: a run whose lock was taken over exits 78, says so, and leaves the new owner's lock" {
	mkws a
	hold "$(W a)"
	old_tok=$(json_get .token "$(wsl inspect --owner "$(W a)")")
	new_tok=0123456789abcdef0123456789abcdef
	# The owner document replaced behind the holder's back (as a takeover would).
	edit_owner "$(W a)" ".token = \"$new_tok\" | .recovery_of = \"$old_tok\""
	unhold
	[ "$WAIT_STATUS" = 78 ] || fail "run exited $WAIT_STATUS, stderr: $(cat "$HOLD_DIR/err")"
	grep -q 'WSLOCK_OWNERSHIP_LOST\|ownership\|taken over' "$HOLD_DIR/err" || fail "run did not say so: $(cat "$HOLD_DIR/err")"
	[ -f "$(owner_file "$(W a)")" ] || fail "the new owner's lock was removed"
	jq -e --arg t "$new_tok" '.token == $t' "$(owner_file "$(W a)")" >/dev/null || fail "owner.json changed"
}

@test "recover usage errors: no --expected-owner, --force without --reason, no workspace: 64" {
	mkws a
	dead_acquired "$(W a)"
	printf '%s' "$DEAD_OWNER" >"$BATS_TEST_TMPDIR/owner.json"
	before=$(registry_snapshot)
	run -64 --separate-stderr wsl recover "$(W a)"
	jq_ok '.error.code == "WSLOCK_USAGE"'
	run -64 --separate-stderr wsl recover --force --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	jq_ok '.error.code == "WSLOCK_USAGE"'
	run -64 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json"
	jq_ok '.error.code == "WSLOCK_USAGE"'
	assert_same_snapshot "$before" "$(registry_snapshot)"
}

@test "recover -- CMD forwards SIGTERM to CMD like run, exits with its status and releases" {
	mkws a
	dead_acquired "$(W a)"
	T=$BATS_TEST_TMPDIR
	printf '%s' "$DEAD_OWNER" >"$T/owner.json"
	"$WSLOCK" recover --expected-owner "$T/owner.json" "$(W a)" -- sh -c '
		trap "touch \"$1/TERMED\"; exit 7" TERM
		touch "$1/READY"
		while :; do sleep 0.05; done' sh "$T" </dev/null >"$T/out" 2>"$T/err" 3>&- &
	rpid=$!
	track_pid "$rpid"
	wait_for "[ -e '$T/READY' ] || ! is_running $rpid" 20
	[ -e "$T/READY" ] || fail "CMD did not start: $(cat "$T/err")"
	kill -TERM "$rpid"
	wait_exit "$rpid" 20
	[ "$WAIT_STATUS" = 7 ] || fail "recover exited $WAIT_STATUS: $(cat "$T/err")"
	[ -e "$T/TERMED" ] || fail "SIGTERM was not forwarded to CMD"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "recover --print-owner -- CMD writes the new owner to stderr, not stdout" {
	mkws a
	dead_acquired "$(W a)"
	printf '%s' "$DEAD_OWNER" >"$BATS_TEST_TMPDIR/owner.json"
	run -0 --separate-stderr wsl recover --print-owner --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)" \
		-- sh -c 'echo "$WSLOCK_TOKEN"'
	tok=$output
	[[ $tok =~ ^[0-9a-f]{32}$ ]] || fail "stdout is not only the child's: '$output'"
	doc=$(grep '^{' <<<"$stderr" | head -n 1)
	jq -e --arg t "$tok" --argjson o "$DEAD_OWNER" '.token == $t and .recovery_of == $o.token' <<<"$doc" >/dev/null ||
		fail "no new owner document on stderr: $stderr"
}

@test "recover canonicalizes the workspace argument (relative path, symlink)" {
	mkws a b
	dead_acquired "$(W a)"
	printf '%s' "$DEAD_OWNER" >"$BATS_TEST_TMPDIR/a.json"
	cd "$(W a)"
	run -0 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/a.json" .
	jq_ok ".action == \"recovered\" and .workspace_root == \"$(canon "$(W a)")\""
	dead_acquired "$(W b)"
	printf '%s' "$DEAD_OWNER" >"$BATS_TEST_TMPDIR/b.json"
	ln -s "$(W b)" "$BATS_TEST_TMPDIR/link-b"
	run -0 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/b.json" "$BATS_TEST_TMPDIR/link-b"
	jq_ok ".action == \"recovered\" and .workspace_root == \"$(canon "$(W b)")\""
}

@test "ownership loss: a recovered holder whose lock was taken over exits 78 and leaves the new owner's lock" {
	mkws a
	dead_acquired "$(W a)"
	T=$BATS_TEST_TMPDIR
	printf '%s' "$DEAD_OWNER" >"$T/owner.json"
	"$WSLOCK" recover --expected-owner "$T/owner.json" "$(W a)" -- sh -c '
		printf %s "$WSLOCK_TOKEN" >"$1/tok.tmp" && mv "$1/tok.tmp" "$1/tok"
		while [ ! -e "$1/GO" ]; do sleep 0.05; done' sh "$T" </dev/null >"$T/out" 2>"$T/err" 3>&- &
	rpid=$!
	track_pid "$rpid"
	wait_for "[ -e '$T/tok' ] || ! is_running $rpid" 20
	[ -e "$T/tok" ] || fail "CMD did not start: $(cat "$T/err")"
	third=fedcba9876543210fedcba9876543210
	edit_owner "$(W a)" ".token = \"$third\" | .recovery_of = \"$(cat "$T/tok")\""
	touch "$T/GO"
	wait_exit "$rpid" 20
	[ "$WAIT_STATUS" = 78 ] || fail "recover exited $WAIT_STATUS: $(cat "$T/err")"
	[ -s "$T/err" ] || fail "recover did not say it lost the lock"
	jq -e --arg t "$third" '.token == $t' "$(owner_file "$(W a)")" >/dev/null || fail "the new owner's lock was touched"
}

@test "recover of a corrupt lock: bytes that differ only by a trailing newline are refused (exact bytes), and the message says so and how to get them" {
	mkws a
	dead_acquired "$(W a)"
	printf 'half a docu' | put_owner "$(W a)"
	T=$BATS_TEST_TMPDIR
	printf 'half a docu\n' >"$T/nl.json"
	before=$(registry_snapshot)
	run -65 --separate-stderr wsl recover --force --reason "torn, checked" --expected-owner "$T/nl.json" "$(W a)"
	assert_json_error WSLOCK_LOCK_CORRUPT
	[[ $stderr == *"only by a trailing newline"*"exact bytes"* ]] || fail "no hint: $stderr"
	# Any other difference is refused as before, without that hint.
	printf 'half a docU' >"$T/other.json"
	run -65 --separate-stderr wsl recover --force --reason "torn, checked" --expected-owner "$T/other.json" "$(W a)"
	[[ $stderr != *"trailing newline"* ]] || fail "wrong hint: $stderr"
	printf 'half a docu\n\n' >"$T/nl2.json"
	run -65 --separate-stderr wsl recover --force --reason "torn, checked" --expected-owner "$T/nl2.json" "$(W a)"
	[[ $stderr != *"trailing newline"* ]] || fail "wrong hint: $stderr"
	assert_same_snapshot "$before" "$(registry_snapshot)"
	# The exact bytes clear it.
	cp "$(lock_dir_of "$(W a)")/owner.json" "$T/exact.json"
	run -0 --separate-stderr wsl recover --force --reason "torn, checked" --expected-owner "$T/exact.json" "$(W a)"
	[ "$(wsl inspect "$(W a)" | jq -r .state)" = free ]
}
