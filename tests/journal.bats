#!/usr/bin/env bats
# journal.jsonl: one JSON line per recover, reclaim, forced action and
# reclaim-dead, with time, action, prior and new owner, liveness verdict and
# reason, forcing reason and the actor; appended, never rewritten.

load helpers

JOURNAL_KEYS='["action","actor","force_reason","forced","liveness","liveness_reason","new_owner","prior_owner","time","workspace_root"]'

journal() { printf '%s/journal.jsonl' "$WSLOCK_DIR"; }

# assert_journal_lines_parse: every line is exactly one JSON object with
# (at least) the documented keys.
assert_journal_lines_parse() {
	local line n=0
	[ -f "$(journal)" ] || fail "no journal"
	[ -z "$(tail -c 1 "$(journal)")" ] || fail "journal does not end with a newline"
	while IFS= read -r line; do
		n=$((n + 1))
		[ "$(jq -s length <<<"$line" 2>/dev/null)" = 1 ] || fail "line $n is not one JSON value: $line"
		jq -e --argjson k "$JOURNAL_KEYS" '
			type == "object" and (keys | contains($k))
			and (.time | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?Z$"))
			and (.action | IN("recover", "reclaim", "reclaim-dead", "clear-corrupt"))
			and (.forced | type == "boolean")
			and (if .forced then (.force_reason | type == "string" and length > 0) else .force_reason == null end)
			and (.actor | (keys | contains(["host", "pid", "uid"])) and (.pid | type == "number" and . > 0)
				and (.uid | type == "number") and (.host | type == "string" and length > 0))' \
			<<<"$line" >/dev/null || fail "line $n lacks documented fields: $line"
	done <"$(journal)"
	JOURNAL_N=$n
}

# jline N: the Nth journal line (1-based).
jline() { sed -n "${1}p" "$(journal)"; }

@test "every recovery action appends one parseable line carrying liveness, reason and actor" {
	export WSLOCK_HOST=journal-host
	uid=$(id -u)
	mkws rec forced reclaimed rdead corrupt
	T=$BATS_TEST_TMPDIR
	# 1. recover of a dead owner
	dead_acquired "$(W rec)"
	rec_old=$DEAD_OWNER
	printf '%s' "$DEAD_OWNER" >"$T/rec.json"
	run -0 wsl recover --expected-owner "$T/rec.json" "$(W rec)"
	rec_new=$(json_get .owner)
	# 2. forced recover of an owner on another host
	dead_acquired "$(W forced)"
	edit_owner "$(W forced)" '.host = "other-host"'
	wsl inspect --owner "$(W forced)" >"$T/forced.json"
	run -0 wsl recover --force --reason "other-host is gone for good" --expected-owner "$T/forced.json" "$(W forced)"
	# 3. reclaim --yes
	dead_acquired "$(W reclaimed)"
	reclaimed_old=$DEAD_OWNER
	run -0 wsl reclaim --yes "$(W reclaimed)"
	# 4. acquire --reclaim-dead
	dead_acquired "$(W rdead)"
	rdead_old=$DEAD_OWNER
	run -0 wsl acquire --reclaim-dead -n --pid $$ "$(W rdead)"
	# 5. clear a corrupt lock
	dead_acquired "$(W corrupt)"
	printf 'half a docu' | put_owner "$(W corrupt)"
	printf 'half a docu' >"$T/corrupt.json"
	run -0 wsl recover --force --reason "torn write, checked" --expected-owner "$T/corrupt.json" "$(W corrupt)"

	assert_journal_lines_parse
	[ "$JOURNAL_N" = 5 ] || fail "expected 5 lines, got $JOURNAL_N: $(cat "$(journal)")"
	for i in 1 2 3 4 5; do
		jq -e --arg u "$uid" '.actor.uid == ($u | tonumber) and .actor.host == "journal-host"' <<<"$(jline $i)" >/dev/null ||
			fail "actor of line $i: $(jline $i)"
	done
	jq -e --argjson o "$rec_old" --argjson n "$rec_new" --arg w "$(canon "$(W rec)")" '
		.action == "recover" and .workspace_root == $w and .prior_owner == $o and .new_owner == $n
		and .liveness == "dead" and (.liveness_reason | length > 0) and .forced == false and .force_reason == null' \
		<<<"$(jline 1)" >/dev/null || fail "line 1: $(jline 1)"
	jq -e --argjson o "$(cat "$T/forced.json")" '
		.action == "recover" and .prior_owner == $o and .new_owner.recovery_of == $o.token
		and .liveness == "unknown" and (.liveness_reason | length > 0)
		and .forced == true and .force_reason == "other-host is gone for good"' \
		<<<"$(jline 2)" >/dev/null || fail "line 2: $(jline 2)"
	jq -e --argjson o "$reclaimed_old" '.action == "reclaim" and .prior_owner == $o and .liveness == "dead"
		and (.liveness_reason | length > 0) and .forced == false' \
		<<<"$(jline 3)" >/dev/null || fail "line 3: $(jline 3)"
	jq -e --argjson o "$rdead_old" '.action == "reclaim-dead" and .prior_owner == $o and .liveness == "dead"
		and (.liveness_reason | length > 0) and .forced == false' \
		<<<"$(jline 4)" >/dev/null || fail "line 4: $(jline 4)"
	jq -e --arg w "$(canon "$(W corrupt)")" '.action == "clear-corrupt" and .workspace_root == $w
		and .prior_owner == null and .forced == true and .force_reason == "torn write, checked"' \
		<<<"$(jline 5)" >/dev/null || fail "line 5: $(jline 5)"
}

@test "the journal is private (no group/world bits) and only appended to" {
	mkws a b
	dead_acquired "$(W a)"
	printf '%s' "$DEAD_OWNER" >"$BATS_TEST_TMPDIR/a.json"
	wsl recover --expected-owner "$BATS_TEST_TMPDIR/a.json" "$(W a)" >/dev/null
	[ -f "$(journal)" ] && [ ! -L "$(journal)" ] || fail "journal missing"
	mode=$(stat -c %a "$(journal)")
	(((8#$mode & 8#077) == 0)) || fail "journal mode $mode"
	first=$(cat "$(journal)")
	ino=$(stat -c %i "$(journal)")
	dead_acquired "$(W b)"
	wsl reclaim --yes >/dev/null
	[ "$(head -n 1 "$(journal)")" = "$first" ] || fail "first line rewritten"
	[ "$(stat -c %i "$(journal)")" = "$ino" ] || fail "journal replaced instead of appended"
	assert_journal_lines_parse
	[ "$JOURNAL_N" = 2 ] || fail "lines: $JOURNAL_N"
}

@test "refused and read-only actions write nothing to the journal" {
	mkws dead live remote
	dead_acquired "$(W dead)"
	printf '%s' "$DEAD_OWNER" >"$BATS_TEST_TMPDIR/dead.json"
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W live)"
	printf '%s' "$OWNER" >"$BATS_TEST_TMPDIR/live.json"
	dead_acquired "$(W remote)"
	edit_owner "$(W remote)" '.host = "far.example"'
	wsl inspect --owner "$(W remote)" >"$BATS_TEST_TMPDIR/remote.json"
	jq -c '.pid += 1' "$BATS_TEST_TMPDIR/dead.json" >"$BATS_TEST_TMPDIR/wrong.json"
	run -65 wsl recover --expected-owner "$BATS_TEST_TMPDIR/wrong.json" "$(W dead)"
	run -75 wsl recover --expected-owner "$BATS_TEST_TMPDIR/live.json" "$(W live)"
	run -69 wsl recover --expected-owner "$BATS_TEST_TMPDIR/remote.json" "$(W remote)"
	run -64 wsl recover --force --expected-owner "$BATS_TEST_TMPDIR/remote.json" "$(W remote)"
	run -0 wsl reclaim
	run -0 wsl reclaim --pretty "$(W dead)"
	run -69 wsl acquire -n --pid $$ "$(W dead)"
	run -0 wsl inspect --all
	[ ! -e "$(journal)" ] || fail "journal written: $(cat "$(journal)")"
}

@test "concurrent --reclaim-dead and recover calls append whole lines, one per action" {
	n=6
	T=$BATS_TEST_TMPDIR
	for i in $(seq 1 $n); do
		mkws "a$i" "b$i"
		dead_acquired "$(W "a$i")" --purpose "job $i: $(printf 'x%.0s' $(seq 1 100))"
		dead_acquired "$(W "b$i")"
		printf '%s' "$DEAD_OWNER" >"$T/b$i.json"
	done
	pids=()
	for i in $(seq 1 $n); do
		timeout -k 5 30 "$WSLOCK" acquire --reclaim-dead -n --pid $$ "$(W "a$i")" </dev/null >"$T/out.a$i" 2>&1 3>&- &
		pids+=($!)
		timeout -k 5 30 "$WSLOCK" recover --expected-owner "$T/b$i.json" "$(W "b$i")" </dev/null >"$T/out.b$i" 2>&1 3>&- &
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		track_pid "$p"
	done
	for p in "${pids[@]}"; do
		wait_exit "$p" 30 || fail "a call did not finish"
		[ "$WAIT_STATUS" = 0 ] || fail "a call exited $WAIT_STATUS: $(cat "$T"/out.*)"
	done
	assert_journal_lines_parse
	[ "$JOURNAL_N" = $((2 * n)) ] || fail "expected $((2 * n)) lines, got $JOURNAL_N"
	expect=$(for i in $(seq 1 $n); do canon "$(W "a$i")"; canon "$(W "b$i")"; done | sort)
	[ "$(jq -r .workspace_root "$(journal)" | sort)" = "$expect" ] || fail "workspaces in the journal differ"
	[ "$(jq -r 'select(.action == "reclaim-dead") | .workspace_root' "$(journal)" | wc -l)" = $n ] || fail "reclaim-dead lines"
	[ "$(jq -r 'select(.action == "recover") | .workspace_root' "$(journal)" | wc -l)" = $n ] || fail "recover lines"
}

@test "journal lines of reclaim -- CMD and of a recover with CMD name the new owner" {
	mkws a b
	dead_acquired "$(W a)"
	printf '%s' "$DEAD_OWNER" >"$BATS_TEST_TMPDIR/a.json"
	run -0 wsl recover --expected-owner "$BATS_TEST_TMPDIR/a.json" "$(W a)" -- sh -c 'printf %s "$WSLOCK_TOKEN" >"$1/a.tok"' sh "$BATS_TEST_TMPDIR"
	dead_acquired "$(W b)"
	b_old=$DEAD_OWNER
	run -0 wsl reclaim --yes "$(W b)" -- sh -c 'printf %s "$WSLOCK_TOKEN" >"$1/b.tok"' sh "$BATS_TEST_TMPDIR"
	assert_journal_lines_parse
	jq -e --arg t "$(cat "$BATS_TEST_TMPDIR/a.tok")" '.action == "recover" and .new_owner.token == $t' <<<"$(jline 1)" >/dev/null ||
		fail "line 1: $(jline 1)"
	jq -e --arg t "$(cat "$BATS_TEST_TMPDIR/b.tok")" --argjson o "$b_old" \
		'.action == "reclaim" and .prior_owner == $o and .new_owner.token == $t and .new_owner.recovery_of == $o.token' \
		<<<"$(jline 2)" >/dev/null || fail "line 2: $(jline 2)"
}

@test "inspect --journal --format text: a header, then one line per entry (time, action, workspace, who, reason), one workspace's only when named" {
	export WSLOCK_HOST=journal-host
	mkws rec forced
	T=$BATS_TEST_TMPDIR
	dead_acquired "$(W rec)"
	printf '%s' "$DEAD_OWNER" >"$T/rec.json"
	run -0 wsl recover --expected-owner "$T/rec.json" "$(W rec)"
	dead_acquired "$(W forced)"
	edit_owner "$(W forced)" '.host = "other-host"'
	wsl inspect --owner "$(W forced)" >"$T/forced.json"
	run -0 wsl recover --force --reason "gone for good" --expected-owner "$T/forced.json" "$(W forced)"
	run -0 --separate-stderr wsl inspect --journal --format text
	[ "${#lines[@]}" -eq 3 ] || fail "not a header and two lines: $output"
	[[ ${lines[0]} =~ ^TIME\ +ACTION\ +WORKSPACE\ +WHO\ +REASON$ ]] || fail "header: ${lines[0]}"
	local t1 t2
	t1=$(wsl inspect --journal | jq -r '.journal[0].time')
	t2=$(wsl inspect --journal | jq -r '.journal[1].time')
	[[ ${lines[1]} =~ ^$t1\ +recover\ +$(canon "$(W rec)")\ +[0-9]+@journal-host\ uid\ $(id -u)\ +pid\ [0-9]+\ no\ longer\ exists$ ]] ||
		fail "first entry: ${lines[1]}"
	[[ ${lines[2]} == "$t2 "*" recover "*"$(canon "$(W forced)") "*"@journal-host uid $(id -u) "*" forced: gone for good; "* ]] ||
		fail "second entry: ${lines[2]}"
	# One workspace's entries only; an empty journal is the header alone.
	run -0 --separate-stderr wsl inspect --journal --format text "$(W forced)"
	[ "${#lines[@]}" -eq 2 ] && [[ ${lines[1]} == *"$(canon "$(W forced)")"* ]] || fail "filtered: $output"
	mkws none
	run -0 --separate-stderr wsl inspect --journal --format text "$(W none)"
	[ "${#lines[@]}" -eq 1 ] || fail "empty: $output"
	# The other views still take no --format.
	run -64 --separate-stderr wsl inspect --registry --format text
	assert_usage_error
}

@test "a journal.jsonl with group/world bits or another owner: run, acquire, release and inspect refuse it (77) as recover does, and change nothing" {
	mkws a b
	dead_acquired "$(W a)"
	printf '%s' "$DEAD_OWNER" >"$BATS_TEST_TMPDIR/a.json"
	wsl recover --expected-owner "$BATS_TEST_TMPDIR/a.json" "$(W a)" >/dev/null
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W b)"
	local tok=$(jq -r .token <<<"$OWNER") bad before
	for bad in mode owner; do
		if [ "$bad" = mode ]; then
			chmod 0666 "$(journal)"
		else
			chmod 0600 "$(journal)"
			chown 65534 "$(journal)"
		fi
		before=$(registry_snapshot)
		run -77 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/a.json" "$(W a)"
		local said=$stderr
		[[ $said == *"$(journal)"* ]] || fail "recover does not name the journal: $said"
		run -77 --separate-stderr wsl run "$(W a)" -- touch "$BATS_TEST_TMPDIR/ran"
		[ "$stderr" = "$said" ] || fail "run ($bad): $stderr, recover: $said"
		[ ! -e "$BATS_TEST_TMPDIR/ran" ] || fail "the command ran"
		run -77 --separate-stderr wsl acquire --pid "$SLEEPER_PID" "$(W a)"
		[ "$stderr" = "$said" ] || fail "acquire ($bad): $stderr"
		jq_ok '.error.code == "WSLOCK_UNSAFE_PATH"'
		run -77 --separate-stderr wsl release --token "$tok" "$(W b)"
		[ "$stderr" = "$said" ] || fail "release ($bad): $stderr"
		run -77 --separate-stderr wsl inspect "$(W b)"
		assert_same_snapshot "$before" "$(registry_snapshot)"
	done
	chown "$(id -u)" "$(journal)"
	run -0 wsl release --token "$tok" "$(W b)"
	assert_journal_lines_parse
	[ "$JOURNAL_N" = 1 ] || fail "lines: $JOURNAL_N"
}

# dead_recovered WS: WS gets a dead owner and is recovered: one journal line.
dead_recovered() {
	dead_acquired "$1"
	printf '%s' "$DEAD_OWNER" >"$BATS_TEST_TMPDIR/dead.json"
	run -0 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/dead.json" "$1"
}

@test "inspect --journal: a line that is not an entry is listed as invalid with its line number, the rest still shown; an append after a torn line starts a line of its own" {
	mkws a b
	dead_recovered "$(W a)"
	dead_recovered "$(W b)"
	# a garbage line between the two, and a line torn at the end (a full
	# disk under an older binary)
	sed -i '1a garbage' "$(journal)"
	printf '{"time":"2026-12-01T00:00:00.000Z","action":"r' >>"$(journal)"
	dead_recovered "$(W a)"
	[ "$(wc -l <"$(journal)")" -eq 5 ] || fail "the append was glued onto the torn line: $(cat "$(journal)")"
	[ "$(jline 5 | jq -r .action)" = recover ] || fail "line 5: $(jline 5)"
	run -0 --separate-stderr wsl inspect --journal
	jq -e '[.journal[] | if .invalid then "bad:\(.line):\(.length)" else .action end] ==
		["recover", "bad:2:7", "recover", "bad:4:\(("{\"time\":\"2026-12-01T00:00:00.000Z\",\"action\":\"r" | length))", "recover"]' \
		<<<"$output" >/dev/null || fail "entries: $output"
	jq -e '.journal[1].text == "garbage"' <<<"$output" >/dev/null
	[[ $stderr == *"line 2 is not a journal entry"*"line 4 is not a journal entry"* ]] || fail "stderr: $stderr"
	# one workspace's: its entries, and the lines whose workspace nobody knows
	run -0 --separate-stderr wsl inspect -q --journal "$(W a)"
	jq -e '[.journal[] | .line // .workspace_root] == [$a, 2, 4, $a]' --arg a "$(canon "$(W a)")" \
		<<<"$output" >/dev/null || fail "filtered: $output"
	[ -z "$stderr" ]
	# text: one row per line, the invalid ones saying which line
	run -0 --separate-stderr wsl inspect --journal --format text
	[ "${#lines[@]}" -eq 6 ] || fail "not a header and five rows: $output"
	[[ ${lines[2]} =~ ^-\ +invalid\ +-\ +-\ +line\ 2\ is\ not\ a\ journal\ entry\ \(7\ bytes\)$ ]] || fail "row 2: ${lines[2]}"
	[[ ${lines[4]} == "- "*" invalid "*"line 4 is not a journal entry"* ]] || fail "row 4: ${lines[4]}"
}

@test "a journal append that fails on a full disk is cut back: no torn line, and the next recovery's line reads whole" {
	unshare -m sh -c 'mount -t tmpfs none /mnt' 2>/dev/null ||
		skip "cannot create a mount namespace and mount here (no CAP_SYS_ADMIN)"
	mkdir -p "$BATS_TEST_TMPDIR/fs"
	mkws g
	# In a private mount namespace: the registry on a 256 KiB tmpfs.
	# Recover a dead owner until the journal's last page has room for part
	# of a line but not all of it, fill the disk, recover once more (74),
	# free the disk, recover again (0).
	run -0 timeout -k 5 60 unshare -m --propagation private bash -c '
		set -u
		W=$1 fs=$2 ws=$3
		mount -t tmpfs -o size=256k tmpfs "$fs" || exit 90
		export WSLOCK_DIR=$fs/reg
		j=$WSLOCK_DIR/journal.jsonl
		dead() {
			sh -c "exec \"\$0\" acquire --pid \$\$ \"\$1\" >/dev/null" "$W" "$ws" || exit 91
			"$W" inspect --owner "$ws" >"$fs/o.json" || exit 92
		}
		recover() { "$W" recover -q --expected-owner "$fs/o.json" "$ws" >/dev/null; }
		for i in 1 2 3 4 5 6 7 8; do
			dead
			recover || exit 93
			size=$(stat -c %s "$j") last=$(tail -n 1 "$j" | wc -c)
			room=$((4096 - size % 4096))
			[ "$room" -lt "$last" ] && [ "$room" -gt 1 ] && break
		done
		[ "$room" -lt "$last" ] || exit 94
		dead
		dd if=/dev/zero of="$fs/fill" bs=4k 2>/dev/null
		recover
		echo "full=$?"
		echo "before=$size after=$(stat -c %s "$j") tail=$(tail -c 1 "$j" | od -An -c | tr -d " ")"
		rm "$fs/fill"
		recover
		echo "freed=$?"
		"$W" inspect --journal >"$fs/journal.out"
		echo "journal=$? $(jq -c "[.journal[] | .invalid // false] | unique" "$fs/journal.out")"
		jq -c . "$j" >/dev/null 2>&1 && echo parse=ok
		exit 0
	' sh "$WSLOCK" "$BATS_TEST_TMPDIR/fs" "$(W g)"
	[[ $output == *"full=74"* ]] || fail "the recover on a full disk: $output"
	[[ $output =~ before=([0-9]+)\ after=([0-9]+)\ tail=\\n ]] || fail "the journal after the failed append: $output"
	[ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ] || fail "not cut back to its length: $output"
	[[ $output == *"freed=0"* ]] || fail "$output"
	[[ $output == *"journal=0 [false]"* ]] || fail "inspect --journal: $output"
	[[ $output == *"parse=ok"* ]] || fail "a line that is not JSON: $output"
}
