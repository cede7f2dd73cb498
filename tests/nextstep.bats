#!/usr/bin/env bats
# At 3 a.m. the error says what to run next: a "recovery required" error
# ends with "; next: COMMAND" (and carries it as error.next), the text view
# shows the operation, the absolute time, the retention reason and the same
# command, and copying that command (with the repair in place of
# REPAIR-CMD) recovers a crashed lock.  Copied verbatim, it never frees the
# workspace unchecked.  inspect --journal, --registry and --operation-id
# give the rest.

load helpers

local_setup() {
	T=$BATS_TEST_TMPDIR
	mkdir -p "$T/bin" "$T/paste"
	ln -s "$WSLOCK" "$T/bin/wslock"
	# The repair: records that it ran under the lock, in the workspace.
	cat >"$T/bin/repair" <<'EOS'
#!/bin/sh
printf '%s|%s\n' "${WSLOCK_WORKSPACE:-}" "$(wslock -d "$REPAIR_REG" inspect "$WSLOCK_WORKSPACE" | jq -r .state)" >>"$REPAIR_LOG"
EOS
	chmod +x "$T/bin/repair"
	export PATH="$T/bin:$PATH" REPAIR_LOG=$T/repair.log REPAIR_REG=$WSLOCK_DIR
}

# crash WS: a `wslock run` on WS killed outright with its command, as a
# machine losing a job would: the lock stays, its owner dead.
crash() {
	hold "$1"
	kill -KILL "$HOLD_PID" "$HOLD_CHILD"
	wait_exit "$HOLD_PID" 10
	# The command's last sleep may hold the live file a moment longer.
	wait_for "[ \"\$(wsl inspect '$1' | jq -r .liveness)\" = dead ]" 10
	run -0 wsl inspect "$1"
	jq_ok '.state == "held" and .liveness == "dead"'
}

# next_of STDERR: the command after "; next: " on the one error line.
next_of() {
	sed -n 's/^wslock: .*; next: \(.*\) \[WSLOCK_[A-Z_]*\]$/\1/p' <<<"$1"
}

# paste_run [-STATUS] CMD: run a copied command line in a fresh shell, in another
# directory, without WSLOCK_DIR (as another terminal would be).
paste_run() {
	local st=
	case $1 in -[0-9]*) st=$1 && shift ;; esac
	run $st --separate-stderr env -u WSLOCK_DIR HOME="$T/home" sh -c "cd '$T/paste' && $1"
}

@test "next: the recovery-required line's command, with the repair, recovers a crashed lock" {
	mkws "app dir"
	local ws cmd
	ws=$(W "app dir")
	crash "$ws"
	run -69 --separate-stderr wsl run "$ws" -- make deploy
	[ "${#stderr_lines[@]}" -eq 1 ] || fail "not one line: $stderr"
	cmd=$(next_of "$stderr")
	[ -n "$cmd" ] || fail "no next command in: $stderr"
	[[ $cmd == *"-d $WSLOCK_DIR "* ]] || fail "the registry is not the default, yet no -d: $cmd"
	[[ $cmd == *REPAIR-CMD* ]] || fail "no repair step: $cmd"
	# The JSON error document of acquire carries the same command.
	run -69 --separate-stderr wsl acquire -n --pid $$ "$ws"
	[ "$(json_get .error.next)" = "$cmd" ] || fail "error.next differs: $output"
	paste_run "${cmd/REPAIR-CMD/repair}"
	[ "$status" -eq 0 ] || fail "the pasted command failed ($status): $stderr"
	[ "$(cat "$REPAIR_LOG")" = "$ws|held" ] || fail "repair did not run under the lock: $(cat "$REPAIR_LOG")"
	[ "$(wsl inspect "$ws" | jq -r .state)" = free ]
	[ "$(wsl inspect --journal "$ws" | jq -r '.journal[-1].action')" = recover ]
}

@test "next: pasted verbatim (REPAIR-CMD left in), the command frees nothing" {
	mkws a
	crash "$(W a)"
	run -69 --separate-stderr wsl run "$(W a)" -- true
	paste_run -127 "$(next_of "$stderr")"
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "retained"'
	# ... and the next error proposes the recovery again.
	run -69 --separate-stderr wsl run "$(W a)" -- true
	paste_run "$(next_of "$stderr" | sed 's/REPAIR-CMD/repair/')"
	[ "$status" -eq 0 ] || fail "second recovery: $stderr"
	[ "$(wsl inspect "$(W a)" | jq -r .state)" = free ]
}

@test "next: no -d when the registry is the default one" {
	mkws a
	local h=$T/home
	mkdir -p "$h"
	start_sleeper
	env -u WSLOCK_DIR HOME="$h" "$WSLOCK" acquire -q --pid "$SLEEPER_PID" "$(W a)" >/dev/null
	kill -KILL "$SLEEPER_PID"
	wait_exit "$SLEEPER_PID" 10
	run -69 --separate-stderr env -u WSLOCK_DIR HOME="$h" "$WSLOCK" run "$(W a)" -- true
	[[ $(next_of "$stderr") == "wslock inspect --owner $(W a) > owner.json && wslock recover "* ]] ||
		fail "$stderr"
}

@test "next: an owner of unknown liveness gets the inspect line and the reason, not a ready --force" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	run -69 --separate-stderr env WSLOCK_HOST=elsewhere "$WSLOCK" run -n "$(W a)" -- true
	[[ $stderr == *"host"* ]] || fail "no reason: $stderr"
	[ "$(next_of "$stderr")" = "wslock -d $WSLOCK_DIR inspect $(W a)" ] || fail "$stderr"
	wsl inspect --owner "$(W a)" >"$T/owner.json"
	run -69 --separate-stderr env WSLOCK_HOST=elsewhere "$WSLOCK" recover --expected-owner "$T/owner.json" "$(W a)"
	[ "$(next_of "$stderr")" = "wslock -d $WSLOCK_DIR inspect $(W a)" ] || fail "$stderr"
	[[ $(json_get .error.next) != *force* ]] || fail "a ready --force: $output"
}

@test "next: the text view shows operation, absolute time, retention reason and the command" {
	mkws a b
	crash "$(W a)"
	run -3 wsl run -q --retain-on-failure --operation-id op-77 "$(W b)" -- sh -c 'exit 3'
	run -0 --separate-stderr wsl inspect --all --format text
	[[ $output == *"operation op-77, acquired 20"*"T"*"Z"* ]] || fail "$output"
	[[ $output == *"retained: command exited with status 3"* ]] || fail "$output"
	local cmd
	run -0 --separate-stderr wsl inspect --format text "$(W a)"
	cmd=$(grep -A1 "next:" <<<"$output" | grep "^    wslock" | head -1 | sed 's/^    //')
	[ -n "$cmd" ] || fail "no command in the text view: $output"
	paste_run "${cmd/REPAIR-CMD/repair}"
	[ "$status" -eq 0 ] || fail "$stderr"
	run -0 --separate-stderr wsl inspect --format text "$(W a)"
	[[ $output != *"next:"* ]] || fail "a free workspace still proposes a recovery: $output"
}

@test "inspect --journal, --registry and --operation-id" {
	mkws a b
	run -0 --separate-stderr wsl inspect --journal
	jq_ok '.journal == []'
	crash "$(W a)"
	wsl inspect --owner "$(W a)" >"$T/owner.json"
	wsl recover -q --expected-owner "$T/owner.json" "$(W a)" >/dev/null
	run -0 --separate-stderr wsl inspect --journal
	jq_ok '(.journal | length) == 1 and .journal[0].action == "recover"'
	run -0 --separate-stderr wsl inspect --journal "$(W b)"
	jq_ok '.journal == []'
	run -0 --separate-stderr wsl inspect --registry
	jq_ok '.backend == "local"'
	[ "$(json_get .registry)" = "$WSLOCK_DIR" ]
	run -0 --separate-stderr env -u WSLOCK_DIR HOME="$T/h" STATE_DIRECTORY="$T/sd" "$WSLOCK" inspect --registry
	[ "$(json_get .registry)" = "$T/sd/wslock" ]
	acquire_as $$ "$(W b)" --operation-id deploy-9
	run -0 --separate-stderr wsl inspect --operation-id deploy-9
	jq_ok '(.locks | length) == 1'
	[ "$(json_get '.locks[0].workspace_root')" = "$(W b)" ]
	run -0 --separate-stderr wsl inspect --operation-id nope
	jq_ok '.locks == []'
	run -64 --separate-stderr wsl inspect --registry "$(W a)"
}

@test "next: a corrupt lock's error names the copy-and-recover --force command; pasted without REASON it changes nothing, with it the lock is cleared" {
	mkws "app dir"
	local ws cmd before
	ws=$(W "app dir")
	dead_acquired "$ws"
	printf '{"schema_version":2,"kind":"wslock-owner","tok' | put_owner "$ws"
	run -65 --separate-stderr wsl run -n "$ws" -- true
	[ "${#stderr_lines[@]}" -eq 1 ] || fail "not one line: $stderr"
	cmd=$(next_of "$stderr")
	[[ $cmd == "cp "*" corrupt-owner.json && wslock -d $WSLOCK_DIR recover --force --reason \"\$REASON\" --expected-owner corrupt-owner.json '$ws'" ]] ||
		fail "next: $cmd"
	# The same from acquire (error.next), release and recover without --force.
	run -65 --separate-stderr wsl acquire -n --pid $$ "$ws"
	[ "$(json_get .error.next)" = "$cmd" ] || fail "error.next differs: $output"
	run -65 --separate-stderr wsl release --token 0123456789abcdef0123456789abcdef "$ws"
	[ "$(json_get .error.next)" = "$cmd" ] || fail "release's next differs: $output"
	run -0 --separate-stderr wsl inspect --format text "$ws"
	[[ $output == *"next: after checking the workspace, set REASON"*"    $cmd"* ]] || fail "text view: $output"
	before=$(registry_snapshot)
	paste_run -64 "$cmd"
	assert_same_snapshot "$before" "$(registry_snapshot)"
	paste_run "REASON='truncated by a full disk'; $cmd"
	[ "$status" -eq 0 ] || fail "the pasted command failed ($status): $stderr"
	jq_ok '.action == "cleared-corrupt"'
	[ "$(wsl inspect "$ws" | jq -r .state)" = free ]
	[ "$(wsl inspect --journal "$ws" | jq -r '.journal[-1] | .action + "|" + .force_reason')" = "clear-corrupt|truncated by a full disk" ]
	# No command where recover cannot clear it: no owner.json to copy.
	mkws b
	acquire_as $$ "$(W b)"
	rm "$(lock_dir_of "$(W b)")/owner.json"
	run -65 --separate-stderr wsl run -n "$(W b)" -- true
	[ -z "$(next_of "$stderr")" ] || fail "a command for an unreadable lock: $stderr"
}

@test "next: two dead readers of a shared lock each get a line naming their own document; each line recovers its reader" {
	mkws a
	local ws=$(W a) l1 l2 cmd
	local -a nl
	hold --shared "$ws"
	kill -KILL "$HOLD_PID" "$HOLD_CHILD"
	hold --shared "$ws"
	kill -KILL "$HOLD_PID" "$HOLD_CHILD"
	wait_for "[ \"\$(wsl inspect '$ws' | jq '[.holders[] | select(.liveness == \"dead\")] | length')\" = 2 ]" 20 ||
		fail "the two readers do not read dead: $(wsl inspect "$ws")"
	run -0 --separate-stderr wsl inspect --format text "$ws"
	mapfile -t nl < <(grep -A1 'next: check the workspace' <<<"$output" | grep '^    ')
	[ "${#nl[@]}" = 2 ] || fail "not two next lines: $output"
	[ "${nl[0]}" != "${nl[1]}" ] || fail "the two readers' next lines are the same: ${nl[0]}"
	run -0 wsl inspect "$ws"
	for i in 0 1; do
		local p
		p=$(jq -r ".holders[$i].lock_path" <<<"$output")
		[[ $p == */holders/*/owner.json ]] || fail "lock_path: $p"
		printf '%s\n' "${nl[@]}" | grep -qF "cp $p owner.json" || fail "no line copies $p: ${nl[*]}"
	done
	# The error names one of them, the one a writer meets first.
	run -69 --separate-stderr wsl run "$ws" -- true
	cmd=$(next_of "$stderr")
	[ "$cmd" = "${nl[0]#    }" ] || [ "$cmd" = "${nl[1]#    }" ] || fail "error's next: $cmd"
	# Each line, pasted with the repair, recovers its own reader only,
	# then runs the repair under an exclusive run: after the first, that
	# run meets the other dead reader (69, naming it) and repairs nothing.
	l1=${nl[0]#    } l2=${nl[1]#    }
	paste_run -69 "${l1/REPAIR-CMD/repair}"
	[ ! -e "$REPAIR_LOG" ] || fail "the repair ran beside a reader: $(cat "$REPAIR_LOG")"
	run -0 wsl inspect "$ws"
	jq_ok '(.holders | length) == 1'
	[[ $l2 == *"cp $(jq -r '.holders[0].lock_path' <<<"$output") "* ]] || fail "the wrong reader went: $output"
	paste_run "${l2/REPAIR-CMD/repair}"
	[ "$status" -eq 0 ] || fail "second reader: $stderr"
	[ "$(cat "$REPAIR_LOG")" = "$ws|held" ] || fail "repair did not run under the lock: $(cat "$REPAIR_LOG")"
	[ "$(wsl inspect "$ws" | jq -r .state)" = free ]
}
