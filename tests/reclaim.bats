#!/usr/bin/env bats
# reclaim: preview (default, changes nothing) and --yes (exact
# compare-and-swap removal of provably dead, non-retained owners), garbage
# collection, cleanup commands; and --reclaim-dead on acquire and run.

load helpers

# die_holding WS: a `run` killed by its own child.
die_holding() {
	run -137 wsl run "$1" -- sh -c 'kill -9 $PPID'
}

# candidate WS: the preview candidate for WS in $output (found by its
# lock_path, since a corrupt lock cannot name its workspace).
candidate() {
	jq -c --arg w "$(canon "$1")" --arg p "$(lock_dir_of "$1")/owner.json" \
		'[.candidates[] | select(.workspace_root == $w or .lock_path == $p)] | if length == 1 then .[0] else error("candidates for \($w): \(length)") end' <<<"$output"
}

hex64() { printf '%064d' 0 | tr 0 "$1"; }

# A registry with one lock of each kind: dead, live, retained, other host,
# corrupt; plus a dead-owner staging directory and an orphan nest marker.
populate() {
	mkws dead live retained remote corrupt
	dead_acquired "$(W dead)"
	DEAD_DEAD=$DEAD_OWNER
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W live)"
	run -1 wsl run --retain-on-failure "$(W retained)" -- false
	dead_acquired "$(W remote)"
	edit_owner "$(W remote)" '.host = "far.example"'
	dead_acquired "$(W corrupt)"
	printf 'not an owner' | put_owner "$(W corrupt)"
	mkdir -m 0700 "$WSLOCK_DIR/staging/acq.999999.deadbeef"
	mkdir -m 0700 "$WSLOCK_DIR/nest/$(hex64 a)"
	: >"$WSLOCK_DIR/nest/$(hex64 a)/$(hex64 b)"
	chmod 0600 "$WSLOCK_DIR/nest/$(hex64 a)/$(hex64 b)"
}

@test "reclaim preview: every lock with liveness, reclaimable and why; garbage counted; not one byte changed" {
	populate
	before=$(registry_snapshot --strict)
	run -0 --separate-stderr wsl reclaim
	assert_same_snapshot "$before" "$(registry_snapshot --strict)"
	[ "${#lines[@]}" -eq 1 ] || fail "not one JSON line: $output"
	jq_ok '.action == "preview" and (.candidates | type == "array" and length == 5)'
	jq_ok 'all(.candidates[]; (.reclaimable | type == "boolean") and (.why | type == "string" and length > 0) and ((.workspace_root | type == "string") or .state == "corrupt") and has("state") and has("liveness"))'
	jq_ok '.garbage == {"staging": 1, "orphan_markers": 1}'
	jq -e '.reclaimable == true and .state == "held" and .liveness == "dead" and (.liveness_reason | length > 0)' <<<"$(candidate "$(W dead)")" >/dev/null || fail "dead: $(candidate "$(W dead)")"
	jq -e '.reclaimable == false and .liveness == "live"' <<<"$(candidate "$(W live)")" >/dev/null || fail "live: $(candidate "$(W live)")"
	jq -e '.reclaimable == false and .state == "retained"' <<<"$(candidate "$(W retained)")" >/dev/null || fail "retained: $(candidate "$(W retained)")"
	jq -e '.reclaimable == false and .liveness == "unknown"' <<<"$(candidate "$(W remote)")" >/dev/null || fail "remote: $(candidate "$(W remote)")"
	jq -e '.reclaimable == false and .state == "corrupt"' <<<"$(candidate "$(W corrupt)")" >/dev/null || fail "corrupt: $(candidate "$(W corrupt)")"
	# --pretty and -v previews change nothing either.
	run -0 --separate-stderr wsl reclaim --pretty -v
	jq_ok '.action == "preview"'
	assert_same_snapshot "$before" "$(registry_snapshot --strict)"
}

@test "reclaim preview on an empty registry lists nothing" {
	mkws a
	run -0 --separate-stderr wsl run "$(W a)" -- true
	run -0 --separate-stderr wsl reclaim
	jq_ok '.action == "preview" and .candidates == [] and .garbage == {"staging": 0, "orphan_markers": 0}'
}

@test "reclaim --yes removes only the dead owner's lock; live, retained, unknown and corrupt stay byte for byte" {
	populate
	keep=$(for w in live retained remote corrupt; do registry_snapshot "$(lock_dir_of "$(W $w)")"; done)
	run -0 --separate-stderr wsl reclaim --yes
	jq_ok '.action == "reclaimed"'
	jq_ok "[.reclaimed[].workspace_root] == [\"$(canon "$(W dead)")\"]"
	jq -e --argjson o "$DEAD_DEAD" '.reclaimed[0].prior_owner == $o and .reclaimed[0].liveness == "dead"' <<<"$output" >/dev/null ||
		fail "reclaimed entry: $output"
	# (a corrupt lock cannot name its workspace: count it, do not match it)
	jq_ok "(.skipped | length) == 4 and ([.skipped[].workspace_root] | contains([\"$(canon "$(W live)")\", \"$(canon "$(W retained)")\", \"$(canon "$(W remote)")\"]))"
	jq_ok 'all(.skipped[]; .why | type == "string" and length > 0)'
	assert_same_snapshot "$keep" "$(for w in live retained remote corrupt; do registry_snapshot "$(lock_dir_of "$(W $w)")"; done)"
	inspect_json "$(W dead)"
	jq_ok '.state == "free"' "$INSPECT"
	[ ! -e "$(lock_dir_of "$(W dead)")" ] || fail "dead lock left"
	jq -e -s --arg w "$(canon "$(W dead)")" 'length == 1 and .[0].action == "reclaim" and .[0].workspace_root == $w and .[0].forced == false' \
		"$WSLOCK_DIR/journal.jsonl" >/dev/null || fail "journal: $(cat "$WSLOCK_DIR/journal.jsonl")"
	# The live holder still holds.
	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W live)"
}

@test "reclaim: unknown liveness only with --yes --force --reason; retained, live and corrupt still kept" {
	populate
	run -64 --separate-stderr wsl reclaim --yes --force
	jq_ok '.error.code == "WSLOCK_USAGE"'
	run -64 --separate-stderr wsl reclaim --force
	jq_ok '.error.code == "WSLOCK_USAGE"'
	run -0 --separate-stderr wsl reclaim --yes --force --reason "far.example was reimaged"
	jq_ok "[.reclaimed[].workspace_root] | sort == ([\"$(canon "$(W dead)")\", \"$(canon "$(W remote)")\"] | sort)"
	jq_ok "(.skipped | length) == 3 and ([.skipped[].workspace_root] | contains([\"$(canon "$(W live)")\", \"$(canon "$(W retained)")\"]))"
	inspect_json "$(W retained)"
	jq_ok '.state == "retained"' "$INSPECT"
	inspect_json "$(W corrupt)"
	jq_ok '.state == "corrupt"' "$INSPECT"
	inspect_json "$(W live)"
	jq_ok '.state == "held" and .liveness == "live"' "$INSPECT"
	jq -e -s --arg w "$(canon "$(W remote)")" '[.[] | select(.workspace_root == $w)] |
		length == 1 and .[0].forced == true and .[0].force_reason == "far.example was reimaged" and .[0].liveness == "unknown"' \
		"$WSLOCK_DIR/journal.jsonl" >/dev/null || fail "journal: $(cat "$WSLOCK_DIR/journal.jsonl")"
}

@test "reclaim counts pid reuse and a rebooted host as dead" {
	mkws reused rebooted
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W reused)"
	edit_owner "$(W reused)" ".pid_start_ticks = $(($(start_ticks "$SLEEPER_PID") + 7))"
	acquire_as "$SLEEPER_PID" "$(W rebooted)"
	edit_owner "$(W rebooted)" '.boot_id = "00000000-1111-4222-8333-444444444444"'
	run -0 --separate-stderr wsl reclaim
	jq -e '.reclaimable == true and .liveness == "dead"' <<<"$(candidate "$(W reused)")" >/dev/null || fail "$(candidate "$(W reused)")"
	jq -e '.reclaimable == true and .liveness == "dead"' <<<"$(candidate "$(W rebooted)")" >/dev/null || fail "$(candidate "$(W rebooted)")"
	run -0 --separate-stderr wsl reclaim --yes
	jq_ok '(.reclaimed | length) == 2'
	is_running "$SLEEPER_PID" || fail "the live process was touched"
}

@test "reclaim with named workspaces only considers those" {
	mkws a b c
	dead_acquired "$(W a)"
	dead_acquired "$(W b)"
	dead_acquired "$(W c)"
	before_b=$(registry_snapshot "$(lock_dir_of "$(W b)")")
	run -0 --separate-stderr wsl reclaim "$(W a)" "$(W c)"
	jq_ok "[.candidates[].workspace_root] | sort == ([\"$(canon "$(W a)")\", \"$(canon "$(W c)")\"] | sort)"
	run -0 --separate-stderr wsl reclaim --yes "$(W a)"
	jq_ok "[.reclaimed[].workspace_root] == [\"$(canon "$(W a)")\"]"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
	for w in b c; do
		inspect_json "$(W $w)"
		jq_ok '.state == "held" and .liveness == "dead"' "$INSPECT"
	done
	assert_same_snapshot "$before_b" "$(registry_snapshot "$(lock_dir_of "$(W b)")")"
}

@test "reclaim --yes -- CMD runs CMD in each reclaimed workspace under its lock, then releases" {
	mkws a b live
	dead_acquired "$(W a)"
	die_holding "$(W b)"
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W live)"
	T=$BATS_TEST_TMPDIR
	run -0 --separate-stderr wsl reclaim --yes -- sh -c '
		n=$(basename "$PWD")
		pwd >"$1/cwd.$n"
		printf %s "$WSLOCK_TOKEN" >"$1/tok.$n"
		printf %s "$WSLOCK_WORKSPACE" >"$1/ws.$n"
		"$2" inspect . >"$1/inspect.$n"' sh "$T" "$WSLOCK"
	jq_ok '(.reclaimed | length) == 2'
	for n in a b; do
		[ -e "$T/cwd.$n" ] || fail "CMD did not run in $n"
		[ "$(cat "$T/cwd.$n")" = "$(canon "$(W $n)")" ] || fail "cwd: $(cat "$T/cwd.$n")"
		[ "$(cat "$T/ws.$n")" = "$(canon "$(W $n)")" ] || fail "WSLOCK_WORKSPACE: $(cat "$T/ws.$n")"
		jq -e --arg t "$(cat "$T/tok.$n")" '.state == "held" and .owner.token == $t and .liveness == "live"' "$T/inspect.$n" >/dev/null ||
			fail "inspect during CMD in $n: $(cat "$T/inspect.$n")"
		inspect_json "$(W $n)"
		jq_ok '.state == "free"' "$INSPECT"
	done
	[ ! -e "$T/cwd.live" ] || fail "CMD ran in a live owner's workspace"
}

@test "reclaim --yes -- CMD exits with the CMD's failing status and keeps that workspace retained" {
	mkws a
	dead_acquired "$(W a)"
	run -4 --separate-stderr wsl reclaim --yes -- sh -c 'exit 4'
	# Listed as retained (the cleanup failed), not as reclaimed.
	jq_ok '.reclaimed == [] and (.retained | length) == 1 and .retained[0].command_status == 4'
	inspect_json "$(W a)"
	# A failed cleanup leaves a half-clean workspace: it stays locked.
	jq_ok '.state == "retained" and .retained.exit_status == 4' "$INSPECT"
	# ... and still says what it was for (the owner's purpose, as recover
	# keeps it), taken over from the dead owner.
	jq_ok '.owner.purpose == "acquire" and .owner.recovery_of == "'"$(json_get .token "$DEAD_OWNER")"'"' "$INSPECT"
}

@test "reclaim --yes removes a dead staging directory and an orphan nest marker, keeps a held lock's markers, reports counts" {
	mkws p
	mkdir -p "$(W p)/child"
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W p)/child"
	markers=$(cd "$WSLOCK_DIR/nest" && find . -type f | sort)
	[ -n "$markers" ] || fail "no nest markers for a held lock"
	mkdir -m 0700 "$WSLOCK_DIR/staging/acq.999999.deadbeef"
	: >"$WSLOCK_DIR/staging/acq.999999.deadbeef/owner.json"
	chmod 0600 "$WSLOCK_DIR/staging/acq.999999.deadbeef/owner.json"
	mkdir -m 0700 "$WSLOCK_DIR/nest/$(hex64 c)"
	: >"$WSLOCK_DIR/nest/$(hex64 c)/$(hex64 d)"
	chmod 0600 "$WSLOCK_DIR/nest/$(hex64 c)/$(hex64 d)"
	run -0 --separate-stderr wsl reclaim
	jq_ok '.garbage == {"staging": 1, "orphan_markers": 1}'
	[ -d "$WSLOCK_DIR/staging/acq.999999.deadbeef" ] || fail "preview removed garbage"
	run -0 --separate-stderr wsl reclaim --yes
	jq_ok '.garbage_removed == {"staging": 1, "orphan_markers": 1} and .reclaimed == []'
	[ ! -e "$WSLOCK_DIR/staging/acq.999999.deadbeef" ] || fail "staging directory left"
	[ ! -e "$WSLOCK_DIR/nest/$(hex64 c)/$(hex64 d)" ] || fail "orphan marker left"
	[ "$(cd "$WSLOCK_DIR/nest" && find . -type f | sort)" = "$markers" ] || fail "a held lock's markers changed"
	# Overlap checks still work: the parent is busy.
	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W p)"
	run -0 --separate-stderr wsl reclaim
	jq_ok '.garbage == {"staging": 0, "orphan_markers": 0}'
}

@test "reclaim never removes a lock whose owner changed since the preview" {
	mkws a
	dead_acquired "$(W a)"
	run -0 --separate-stderr wsl reclaim
	jq -e '.reclaimable == true' <<<"$(candidate "$(W a)")" >/dev/null || fail "not reclaimable"
	# The owner is recovered and a new live holder takes it meanwhile.
	printf '%s' "$DEAD_OWNER" >"$BATS_TEST_TMPDIR/owner.json"
	wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)" >/dev/null
	hold "$(W a)"
	run -0 --separate-stderr wsl reclaim --yes
	jq_ok '.reclaimed == []'
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "live"' "$INSPECT"
	unhold
	[ "$WAIT_STATUS" = 0 ] || fail "holder exited $WAIT_STATUS"
}

@test "acquire on a dead owner without --reclaim-dead: 69 WSLOCK_RECOVERY_REQUIRED, nothing changed" {
	mkws a
	dead_acquired "$(W a)"
	before=$(registry_snapshot)
	run -69 --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	assert_json_error WSLOCK_RECOVERY_REQUIRED
	run -69 --separate-stderr timeout -k 2 10 "$WSLOCK" acquire --pid $$ "$(W a)"
	assert_json_error WSLOCK_RECOVERY_REQUIRED
	run -69 --separate-stderr wsl run -n "$(W a)" -- true
	assert_run_error WSLOCK_RECOVERY_REQUIRED
	assert_same_snapshot "$before" "$(registry_snapshot)"
}

@test "acquire --reclaim-dead takes over a dead, non-retained owner and journals reclaim-dead" {
	mkws a
	dead_acquired "$(W a)"
	run -0 --separate-stderr wsl acquire --reclaim-dead -n --pid $$ --purpose "next job" "$(W a)"
	new=$output
	jq_ok '.kind == "wslock-owner" and .purpose == "next job"'
	jq -e --argjson o "$DEAD_OWNER" '.token != $o.token' <<<"$new" >/dev/null || fail "same token"
	inspect_json "$(W a)"
	jq -e --argjson n "$new" '.state == "held" and .owner == $n' <<<"$INSPECT" >/dev/null || fail "$INSPECT"
	jq -e -s --argjson o "$DEAD_OWNER" --argjson n "$new" \
		'length == 1 and .[0].action == "reclaim-dead" and .[0].prior_owner == $o and (.[0].new_owner == null or .[0].new_owner == $n) and .[0].liveness == "dead"' \
		"$WSLOCK_DIR/journal.jsonl" >/dev/null || fail "journal: $(cat "$WSLOCK_DIR/journal.jsonl")"
	wsl release --token "$(json_get .token "$new")" "$(W a)" >/dev/null
}

@test "run --reclaim-dead runs CMD after reclaiming a dead owner and journals it" {
	mkws a
	die_holding "$(W a)"
	old=$(wsl inspect --owner "$(W a)")
	run -0 --separate-stderr wsl run --reclaim-dead -n "$(W a)" -- sh -c 'printf %s "$WSLOCK_TOKEN" >"$1/tok"' sh "$BATS_TEST_TMPDIR"
	[ -s "$BATS_TEST_TMPDIR/tok" ] || fail "CMD did not run: $stderr"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
	jq -e -s --argjson o "$old" --arg t "$(cat "$BATS_TEST_TMPDIR/tok")" \
		'length == 1 and .[0].action == "reclaim-dead" and .[0].prior_owner == $o and (.[0].new_owner == null or .[0].new_owner.token == $t)' \
		"$WSLOCK_DIR/journal.jsonl" >/dev/null || fail "journal: $(cat "$WSLOCK_DIR/journal.jsonl")"
}

@test "--reclaim-dead never takes a live, other-host or corrupt lock" {
	mkws live remote corrupt
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W live)"
	dead_acquired "$(W remote)"
	edit_owner "$(W remote)" '.host = "far.example"'
	dead_acquired "$(W corrupt)"
	printf '{}' | put_owner "$(W corrupt)"
	before=$(registry_snapshot)
	run -75 --separate-stderr wsl acquire --reclaim-dead -n --pid $$ "$(W live)"
	assert_json_error WSLOCK_BUSY
	run --separate-stderr wsl acquire --reclaim-dead -n --pid $$ "$(W remote)"
	[ "$status" -ne 0 ] || fail "an owner of unknown liveness was reclaimed"
	run -65 --separate-stderr wsl acquire --reclaim-dead -n --pid $$ "$(W corrupt)"
	run --separate-stderr wsl run --reclaim-dead -n "$(W remote)" -- touch "$BATS_TEST_TMPDIR/ran"
	[ "$status" -ne 0 ] || fail "run reclaimed an owner of unknown liveness"
	[ ! -e "$BATS_TEST_TMPDIR/ran" ] || fail "CMD ran"
	assert_same_snapshot "$before" "$(registry_snapshot)"
	[ ! -e "$WSLOCK_DIR/journal.jsonl" ] || fail "journal written"
}

@test "reclaim usage: --force without --reason is 64 and changes nothing" {
	mkws a
	dead_acquired "$(W a)"
	before=$(registry_snapshot)
	run -64 --separate-stderr wsl reclaim --force
	jq_ok '.error.code == "WSLOCK_USAGE"'
	run -64 --separate-stderr wsl reclaim --yes --force "$(W a)"
	jq_ok '.error.code == "WSLOCK_USAGE"'
	run -64 --separate-stderr wsl reclaim --yes --force --reason "" "$(W a)"
	jq_ok '.error.code == "WSLOCK_USAGE"'
	assert_same_snapshot "$before" "$(registry_snapshot)"
}

@test "reclaim --yes -- CMD keeps stdout JSON only: the command's output does not mix into it" {
	mkws a
	dead_acquired "$(W a)"
	run -0 --separate-stderr wsl reclaim --yes -- sh -c 'echo CHILD-OUT'
	[ "$(jq -s length <<<"$output" 2>/dev/null)" = 1 ] || fail "stdout is not one JSON document: $output"
	jq_ok '.action == "reclaimed" and (.reclaimed | length) == 1'
}

@test "reclaim --yes reports a skipped corrupt lock with workspace_root a path or null (never its lock key), like the preview" {
	mkws a
	dead_acquired "$(W a)"
	printf 'not an owner' | put_owner "$(W a)"
	run -0 --separate-stderr wsl reclaim
	jq_ok '.candidates[0].workspace_root == null or .candidates[0].workspace_root == "'"$(canon "$(W a)")"'"'
	run -0 --separate-stderr wsl reclaim --yes
	jq_ok '(.skipped | length) == 1'
	jq_ok 'all(.skipped[]; .workspace_root == null or (.workspace_root | startswith("/")))'
}

@test "reclaim: each lock kept carries the code that says why, in the preview, its text view and skipped[]; a corrupt one the command that clears it" {
	populate
	run -0 --separate-stderr wsl reclaim
	local k
	for k in live:WSLOCK_OWNER_LIVE retained:WSLOCK_RECOVERY_REQUIRED remote:WSLOCK_LIVENESS_UNKNOWN \
		corrupt:WSLOCK_LOCK_CORRUPT; do
		jq_ok ".code == \"${k#*:}\" and .reclaimable == false" "$(candidate "$(W "${k%%:*}")")"
	done
	jq_ok '.code == null and .reclaimable == true' "$(candidate "$(W dead)")"
	run -0 --separate-stderr wsl reclaim --format text
	[[ $output == *"kept [WSLOCK_OWNER_LIVE]: owner is live"* ]] || fail "text view: $output"
	[[ $output == *"kept [WSLOCK_LOCK_CORRUPT]: corrupt"* ]] || fail "text view: $output"
	run -0 --separate-stderr wsl reclaim --yes
	jq_ok '(.skipped | length) == 4 and ([.skipped[].code] | sort) == ["WSLOCK_LIVENESS_UNKNOWN","WSLOCK_LOCK_CORRUPT","WSLOCK_OWNER_LIVE","WSLOCK_RECOVERY_REQUIRED"]'
	# The corrupt lock is listed from locks/: its path cannot be known,
	# so the command proposed names "$WORKSPACE"; named, it is known.
	jq_ok '[.skipped[] | select(.code == "WSLOCK_LOCK_CORRUPT")][0] | .workspace_root == null and (.next | endswith(" \"$WORKSPACE\""))'
	run -65 --separate-stderr wsl reclaim --yes "$(W corrupt)"
	jq_ok ".skipped[0].code == \"WSLOCK_LOCK_CORRUPT\" and (.skipped[0].next | startswith(\"cp $(lock_dir_of "$(W corrupt)")/owner.json \"))"
	[[ $stderr == *"; next: $(json_get '.skipped[0].next') [WSLOCK_LOCK_CORRUPT]"* ]] || fail "stderr: $stderr"
}

@test "reclaim: a corrupt lock that does not say which workspace it locks gets the command that clears it (text and JSON), never a removal by hand" {
	mkws a b
	dead_acquired "$(W a)"
	printf '{"broken":' | put_owner "$(W a)"
	before=$(registry_snapshot)
	run -0 --separate-stderr wsl reclaim --format text
	[[ $output != *"by hand"* ]] || fail "text view: $output"
	local line cmd
	line=$(grep -F 'cp ' <<<"$output") || fail "no command in the text view: $output"
	cmd=$(sed 's/^ *//' <<<"$line")
	[[ $cmd == "cp $(lock_dir_of "$(W a)")/owner.json corrupt-owner.json && wslock "*" recover --force --reason \"\$REASON\" --expected-owner corrupt-owner.json \"\$WORKSPACE\"" ]] ||
		fail "not the command: $cmd"
	[[ $output == *"set WORKSPACE to it"* ]] || fail "WORKSPACE is not explained: $output"
	run -0 --separate-stderr wsl reclaim
	[ "$(json_get '.candidates[0].next')" = "$cmd" ] || fail "JSON next differs: $output"
	[[ $(json_get '.candidates[0].why') != *"by hand"* ]] || fail "why: $output"
	mkdir -p "$BATS_TEST_TMPDIR/paste"
	cd "$BATS_TEST_TMPDIR/paste"
	# Pasted as it is, or for another workspace, it changes nothing.
	ln -sf "$WSLOCK" "$BATS_TEST_TMPDIR/paste/wslock"
	PATH="$BATS_TEST_TMPDIR/paste:$PATH" run -64 sh -c "$cmd"
	PATH="$BATS_TEST_TMPDIR/paste:$PATH" WORKSPACE=$(W b) REASON="checked" run -66 sh -c "$cmd"
	assert_same_snapshot "$before" "$(registry_snapshot)"
	PATH="$BATS_TEST_TMPDIR/paste:$PATH" WORKSPACE=$(W a) REASON="checked: a crashed test" run -0 sh -c "$cmd"
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "free"'
}

@test "reclaim --yes -- CMD: a command that cannot run changes nothing (64); a failing one leaves the lock retained with its purpose and operation" {
	mkws a
	dead_acquired "$(W a)" --purpose "deploy v1" --operation-id op-deploy-1
	printf 'echo hi\n' >"$(W a)/cleanup.sh"	# not executable
	before=$(registry_snapshot)
	run -64 --separate-stderr wsl reclaim --yes -- no-such-command-here
	jq_ok '.reclaimed == [] and .retained == [] and .skipped[0].code == "WSLOCK_USAGE"'
	[[ $stderr == *"cannot run no-such-command-here in $(canon "$(W a)")"*"not reclaimed"* ]] || fail "stderr: $stderr"
	run -64 --separate-stderr wsl reclaim --yes "$(W a)" -- ./cleanup.sh
	jq_ok '.skipped[0].code == "WSLOCK_USAGE"'
	assert_same_snapshot "$before" "$(registry_snapshot)"
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "held" and .liveness == "dead" and .owner.purpose == "deploy v1"'
	# A command that runs and fails: retained, still saying what it was for.
	run -1 --separate-stderr wsl reclaim --yes "$(W a)" -- sh -c 'exit 1'
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "retained" and .owner.purpose == "deploy v1" and .owner.operation_id == "op-deploy-1"'
}
