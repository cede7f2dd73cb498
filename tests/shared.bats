#!/usr/bin/env bats
# tests/shared.bats - shared locks (acquire/run --shared, DESIGN.md section
# 2, src/local_shared.c): readers together, a writer alone and not starved
# (the FIFO queue), overlap with exclusive locks both ways, a killed
# reader (other readers go on, a writer needs recovery, reclaim and
# recover act on that reader's exact document), release of one reader,
# nesting under a reader, the registry layout, and the etcd refusal of
# several shared workspaces at once.
#
# Readers and writers leave markers in $BATS_TEST_TMPDIR/m while inside:
# in.N (reader N entered, kept), inside.N (reader N inside now),
# writer.in (the writer inside now); a violation leaves VIOLATION. Every
# wait is bounded; nothing depends on timing.

load helpers

# queued PID: PID has an entry in the wait queue.
queued() {
	compgen -G "$WSLOCK_DIR/queue/*.$1.*" >/dev/null
}

M() { printf '%s/m' "$BATS_TEST_TMPDIR"; }

# reader N WS BARRIER [MORE-WS...]: a background `wslock run --shared WS
# MORE-WS...` whose command enters (markers), waits until BARRIER readers
# have entered and GO exists (bounded: 60 s, else BARRIER_TIMEOUT), then
# leaves. Sets RPID.
reader() {
	mkdir -p "$(M)"
	"$WSLOCK" run --shared "$2" "${@:4}" -- sh -c '
		m=$1
		[ -e "$m/writer.in" ] && touch "$m/VIOLATION"
		touch "$m/in.$2" "$m/inside.$2"
		echo "$WSLOCK_TOKEN" >"$m/token.$2"
		i=0
		until [ "$(ls "$m" | grep -c "^in\.")" -ge "$3" ] && [ -e "$m/GO" ]; do
			i=$((i + 1))
			[ "$i" -gt 1200 ] && { touch "$m/BARRIER_TIMEOUT"; break; }
			sleep 0.05
		done
		[ -e "$m/writer.in" ] && touch "$m/VIOLATION"
		rm -f "$m/inside.$2"
		echo "r$2" >>"$m/order"' sh "$(M)" "$1" "$3" \
		</dev/null >"$BATS_TEST_TMPDIR/r$1.out" 2>"$BATS_TEST_TMPDIR/r$1.err" 3>&- &
	RPID=$!
	track_pid "$RPID"
}

# writer WS [RUN-OPTIONS...]: a background exclusive run whose command
# checks that no reader is inside. Sets WPID.
writer() {
	local ws=$1
	shift
	mkdir -p "$(M)"
	"$WSLOCK" run "$@" "$ws" -- sh -c '
		m=$1
		touch "$m/writer.in"
		ls "$m" | grep -q "^inside\." && touch "$m/VIOLATION"
		echo w >>"$m/order"
		rm -f "$m/writer.in"' sh "$(M)" \
		</dev/null >"$BATS_TEST_TMPDIR/w.out" 2>"$BATS_TEST_TMPDIR/w.err" 3>&- &
	WPID=$!
	track_pid "$WPID"
}

# dead_readers WS: how many of WS's holders read dead.
dead_readers() {
	wsl inspect "$1" | jq '[.holders[]? | select(.liveness == "dead")] | length'
}

# killed_reader WS: one more reader of WS (a run --shared), killed with -9
# together with its command; waits until inspect sees it dead (a
# grandchild of the command may keep the live descriptor a moment).
killed_reader() {
	local n
	n=$(dead_readers "$1")
	hold --shared "$1"
	kill -9 "$HOLD_PID" "$HOLD_CHILD"
	wait_for "[ \"\$(dead_readers '$1')\" = $((n + 1)) ]" 20 ||
		fail "the killed reader does not read dead: $(wsl inspect "$1")"
}

entered() {
	[ "$(ls "$(M)" 2>/dev/null | grep -c '^in\.')" -ge "$1" ]
}

@test "shared runs are inside together; a waiting writer runs after them, alone" {
	mkws a
	local -a pids
	for i in 1 2 3 4; do
		reader "$i" "$(W a)" 4
		pids+=("$RPID")
	done
	# All four inside at once: each saw the others' in.N before leaving.
	wait_for "entered 4" 30 || fail "the readers were not inside together: $(ls "$(M)")"
	writer "$(W a)"
	wait_for "queued $WPID" 20 || fail "the writer did not wait: $(cat "$BATS_TEST_TMPDIR/w.err")"
	[ ! -e "$(M)/writer.in" ]
	touch "$(M)/GO"
	for p in "${pids[@]}" "$WPID"; do
		wait_exit "$p" 30 || fail "$p did not finish"
		[ "$WAIT_STATUS" = 0 ] || fail "$p exited $WAIT_STATUS"
	done
	[ ! -e "$(M)/VIOLATION" ] && [ ! -e "$(M)/BARRIER_TIMEOUT" ]
	# The writer came last, after every reader had left.
	[ "$(tail -n 1 "$(M)/order")" = w ]
	[ "$(grep -c '^r' "$(M)/order")" = 4 ]
	# Each reader had a token of its own.
	[ "$(cat "$(M)"/token.* | sort -u | wc -l)" = 4 ]
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "free"'
}

@test "a waiting writer is not overtaken by a reader that arrives after it" {
	mkws a
	reader 1 "$(W a)" 1
	local r1=$RPID
	wait_for "entered 1" 20 || fail "reader 1 did not enter"
	writer "$(W a)"
	wait_for "queued $WPID" 20 || fail "the writer did not queue"
	# A reader arriving now queues behind the writer, although only
	# readers hold the lock.
	reader 2 "$(W a)" 2
	local r2=$RPID
	wait_for "queued $r2" 20 || fail "reader 2 did not queue: $(cat "$BATS_TEST_TMPDIR/r2.err")"
	[ ! -e "$(M)/in.2" ]
	run wsl run -n --shared "$(W a)" -- true
	[ "$status" = 75 ] || fail "a later reader barged past the writer: $status $output"
	touch "$(M)/GO"
	for p in "$r1" "$WPID" "$r2"; do
		wait_exit "$p" 30 || fail "$p did not finish"
		[ "$WAIT_STATUS" = 0 ] || fail "$p exited $WAIT_STATUS"
	done
	[ "$(cat "$(M)/order")" = "$(printf 'r1\nw\nr2')" ]
	[ ! -e "$(M)/VIOLATION" ]
}

@test "readers queued behind a writer enter together once it is done" {
	mkws a
	hold "$(W a)"
	reader 1 "$(W a)" 2
	local r1=$RPID
	wait_for "queued $r1" 20 || fail "reader 1 did not queue"
	reader 2 "$(W a)" 2
	local r2=$RPID
	wait_for "queued $r2" 20 || fail "reader 2 did not queue"
	touch "$(M)/GO"
	unhold
	# Both inside at once: each waits for the other's in.N.
	for p in "$r1" "$r2"; do
		wait_exit "$p" 30 || fail "$p did not finish"
		[ "$WAIT_STATUS" = 0 ] || fail "$p exited $WAIT_STATUS"
	done
	[ ! -e "$(M)/BARRIER_TIMEOUT" ]
}

@test "shared and exclusive locks on nested workspaces conflict both ways; two shared ones do not" {
	mkws a/sub
	start_sleeper
	run -0 wsl acquire --shared --pid "$SLEEPER_PID" "$(W a)"
	run -0 wsl acquire --shared --pid "$SLEEPER_PID" "$(W a)/sub"
	run wsl acquire -n --pid "$SLEEPER_PID" "$(W a)/sub"
	[ "$status" = 75 ]
	run wsl run -n "$(W a)" -- true
	[ "$status" = 75 ]
	mkws b/sub
	run -0 wsl acquire --pid "$SLEEPER_PID" "$(W b)/sub"
	run wsl run -n --shared "$(W b)" -- true
	[ "$status" = 75 ]
	run --separate-stderr wsl acquire -n --shared --pid "$SLEEPER_PID" "$(W b)/sub"
	[ "$status" = 75 ]
	jq_ok '.error.code == "WSLOCK_BUSY"'
}

@test "a killed reader: readers still enter, a writer needs recovery, reclaim --yes takes that reader only" {
	mkws a
	start_sleeper
	run -0 wsl acquire --shared --pid "$SLEEPER_PID" "$(W a)"
	local live_token
	live_token=$(json_get .token)
	killed_reader "$(W a)"
	run -0 wsl run -n --shared "$(W a)" -- true
	run wsl run -n "$(W a)" -- true
	[ "$status" = 69 ]
	[[ "$output" == *WSLOCK_RECOVERY_REQUIRED* ]]
	run -0 wsl inspect "$(W a)"
	jq_ok '.mode == "shared" and (.owners | length) == 2 and (.holders | length) == 2'
	jq_ok '.liveness == "dead" and ([.holders[].liveness] | sort) == ["dead","live"]'
	run -0 wsl reclaim --yes
	run -0 wsl inspect "$(W a)"
	jq_ok "(.owners | length) == 1 and .owners[0].token == \"$live_token\" and .liveness == \"live\""
	grep -q '"action":"reclaim"' "$WSLOCK_DIR/journal.jsonl"
}

@test "--reclaim-dead of a writer takes the dead readers' documents, then waits for the live ones" {
	mkws a
	killed_reader "$(W a)"
	run -0 --separate-stderr wsl run -n --reclaim-dead "$(W a)" -- echo wrote
	[ "$output" = wrote ]
	grep -q '"action":"reclaim-dead"' "$WSLOCK_DIR/journal.jsonl"
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "free"'
}

@test "recover --expected-owner acts on the one reader whose exact document it is given" {
	mkws a
	start_sleeper
	run -0 wsl acquire --shared --pid "$SLEEPER_PID" "$(W a)"
	local live_token=$(json_get .token)
	killed_reader "$(W a)"
	# --owner names the holder a writer meets first: the dead one.
	run -0 --separate-stderr wsl inspect --owner "$(W a)"
	printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/dead.json"
	jq_ok ".token != \"$live_token\""
	# The live reader's document is refused (live), the dead one's taken.
	run -0 --separate-stderr wsl inspect "$(W a)"
	jq -c ".owners[] | select(.token == \"$live_token\")" <<<"$output" >"$BATS_TEST_TMPDIR/live.json"
	run wsl recover --expected-owner "$BATS_TEST_TMPDIR/live.json" "$(W a)"
	[ "$status" = 75 ]
	# (without a command: one would run beside the live reader, refused)
	run -0 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/dead.json" "$(W a)"
	local new=$(json_get .owner.token)
	[ "${#new}" = 32 ] && [ "$new" != "$live_token" ]
	run -0 wsl inspect "$(W a)"
	jq_ok "(.owners | length) == 1 and .owners[0].token == \"$live_token\""
	grep -q '"action":"recover"' "$WSLOCK_DIR/journal.jsonl"
}

@test "release --token releases that one reader; the last one frees the workspace" {
	mkws a
	start_sleeper
	run -0 wsl acquire --shared --pid "$SLEEPER_PID" "$(W a)"
	local t1=$(json_get .token)
	run -0 wsl acquire --shared --pid "$SLEEPER_PID" "$(W a)"
	local t2=$(json_get .token)
	run -0 wsl release --token "$t1" "$(W a)"
	jq_ok ".owner.token == \"$t1\""
	run -0 wsl inspect "$(W a)"
	jq_ok "(.owners | length) == 1 and .owner.token == \"$t2\""
	run wsl release --token "$t1" "$(W a)"
	[ "$status" = 78 ]
	run -0 wsl release --token "$t2" "$(W a)"
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "free"'
	[ -z "$(ls "$WSLOCK_DIR/locks")" ]
}

@test "release --token refuses a reader that is a running run" {
	mkws a
	hold --shared "$(W a)"
	local t
	t=$(jq -r .owners[0].token <<<"$(wsl inspect "$(W a)")")
	run --separate-stderr wsl release --token "$t" "$(W a)"
	[ "$status" = 75 ]
	jq_ok '.error.code == "WSLOCK_OWNER_LIVE"'
	unhold
}

@test "each reader's command gets its own holder's WSLOCK_OWNER and WSLOCK_TOKEN" {
	mkws a
	hold --shared "$(W a)"
	run -0 --separate-stderr wsl run --shared "$(W a)" -- sh -c 'printf "%s\n" "$WSLOCK_OWNER"; echo "$WSLOCK_TOKEN"'
	local doc=${lines[0]} tok=${lines[1]}
	[ "$(jq -r .token <<<"$doc")" = "$tok" ]
	run -0 wsl inspect "$(W a)"
	[ "$(jq -r .owners[0].token <<<"$output")" != "$tok" ]
	unhold
}

@test "inside a shared run, a nested shared run is fine and a nested exclusive one is refused" {
	mkws a/sub
	run -0 --separate-stderr wsl run --shared "$(W a)" -- sh -c '
		"$1" run --shared "$2/sub" -- echo nested-shared || exit 10
		"$1" run -n "$2/sub" -- echo nested-exclusive
		echo "exclusive:$?"' sh "$WSLOCK" "$(W a)"
	[ "${lines[0]}" = nested-shared ]
	[ "${lines[1]}" = exclusive:75 ]
	[[ "$stderr" == *"would wait for itself"* ]]
	# An exclusive run may nest a shared one.
	run -0 --separate-stderr wsl run "$(W a)" -- "$WSLOCK" run --shared "$(W a)/sub" -- echo ok
	[ "$output" = ok ]
}

@test "the layout: mode file and one directory per holder; a registry without shared locks is unchanged" {
	mkws a b
	start_sleeper
	run -0 wsl acquire --pid "$SLEEPER_PID" "$(W b)"
	[ ! -e "$(lock_dir_of "$(W b)")/mode" ] && [ -f "$(lock_dir_of "$(W b)")/owner.json" ]
	run -0 wsl acquire --shared --pid "$SLEEPER_PID" "$(W a)"
	run -0 wsl acquire --shared --pid "$SLEEPER_PID" "$(W a)"
	local d
	d=$(lock_dir_of "$(W a)")
	[ "$(cat "$d/mode")" = shared ]
	[ ! -e "$d/owner.json" ]
	[ "$(ls "$d/holders" | wc -l)" = 2 ]
	for h in "$d"/holders/*; do
		[ -f "$h/owner.json" ] && [ -f "$h/live" ] && [ -f "$h/nested" ]
		# The owner document keeps its key set: the mode is in the lock.
		jq_ok "keys == $OWNER_KEYS" "$(cat "$h/owner.json")"
	done
	# A mode this binary does not know is corrupt, never free.
	printf 'other\n' >"$d/mode"
	run wsl run -n --shared "$(W a)" -- true
	[ "$status" = 65 ]
	run wsl run -n "$(W a)" -- true
	[ "$status" = 65 ]
}

@test "--shared of several workspaces is a usage error with the etcd backend, and --shared where it means nothing" {
	mkws a b
	# (one workspace works on etcd: etcd_shared.bats)
	run wsl --backend etcd --etcd-endpoints http://127.0.0.1:9 run --shared "$(W a)" "$(W b)" -- true
	[ "$status" = 64 ]
	[[ "$output" == *"--shared with several workspaces at once is not supported by the etcd backend"* ]]
	run --separate-stderr wsl --backend etcd --etcd-endpoints http://127.0.0.1:9 acquire --shared "$(W a)" "$(W b)"
	[ "$status" = 64 ]
	jq_ok '.error.code == "WSLOCK_USAGE"'
	for cmd in release inspect recover reclaim; do
		run wsl "$cmd" --shared "$(W a)"
		[ "$status" = 64 ] || fail "$cmd --shared: $status"
	done
	run -0 wsl run --help
	[[ "$output" == *--shared* ]]
	run -0 wsl acquire --help
	[[ "$output" == *--shared* ]]
}

@test "readers of A B and of B A are inside together; a writer of A waits and is not overtaken by a later reader of B A" {
	mkws a b
	reader 1 "$(W a)" 2 "$(W b)"
	local r1=$RPID
	reader 2 "$(W b)" 2 "$(W a)"
	local r2=$RPID
	wait_for "entered 2" 30 || fail "the readers were not inside together: $(ls "$(M)") $(cat "$BATS_TEST_TMPDIR"/r*.err)"
	run -0 wsl inspect "$(W a)" "$(W b)"
	jq_ok '[.workspaces[] | .mode == "shared" and (.owners | length) == 2] == [true, true]'
	writer "$(W a)"
	wait_for "queued $WPID" 20 || fail "the writer did not wait: $(cat "$BATS_TEST_TMPDIR/w.err")"
	# A later reader set that needs A queues behind the writer (75 with
	# -n); one of B alone is not in the writer's queue and shares B.
	run wsl run -n --shared "$(W b)" "$(W a)" -- true
	[ "$status" = 75 ] || fail "a later reader of B A barged past the writer of A: $status $output"
	run -0 wsl run -n --shared "$(W b)" -- true
	reader 3 "$(W b)" 3 "$(W a)"
	local r3=$RPID
	wait_for "queued $r3" 20 || fail "reader 3 did not queue: $(cat "$BATS_TEST_TMPDIR/r3.err")"
	[ ! -e "$(M)/in.3" ] && [ ! -e "$(M)/writer.in" ]
	touch "$(M)/GO"
	for p in "$r1" "$r2" "$WPID" "$r3"; do
		wait_exit "$p" 30 || fail "$p did not finish"
		[ "$WAIT_STATUS" = 0 ] || fail "$p exited $WAIT_STATUS"
	done
	[ ! -e "$(M)/VIOLATION" ] && [ ! -e "$(M)/BARRIER_TIMEOUT" ]
	[ "$(sed -n 3,4p "$(M)/order")" = "$(printf 'w\nr3')" ] || fail "order: $(cat "$(M)/order")"
	run -0 wsl inspect "$(W a)" "$(W b)"
	jq_ok '[.workspaces[].state] == ["free", "free"]'
}

@test "acquire --shared A B joins a shared lock on A and makes one on B; all or none; release --token of the set" {
	mkws a b c
	start_sleeper
	run -0 wsl acquire --shared --pid "$SLEEPER_PID" "$(W a)"
	local t1=$(json_get .token)
	run -0 wsl acquire --shared --pid "$SLEEPER_PID" "$(W a)" "$(W b)"
	jq_ok '(.owners | length) == 2 and .owners[0].token == .owners[1].token'
	local t2=$(json_get .owners[0].token)
	run -0 wsl inspect "$(W a)" "$(W b)"
	jq_ok '[.workspaces[] | .mode, (.owners | length)] == ["shared", 2, "shared", 1]'
	# All or none: C is held exclusively, so nothing of A C is taken.
	run -0 wsl acquire --pid "$SLEEPER_PID" "$(W c)"
	run --separate-stderr wsl acquire -n --shared --pid "$SLEEPER_PID" "$(W a)" "$(W c)"
	[ "$status" = 75 ]
	run -0 wsl inspect "$(W a)"
	jq_ok '(.owners | length) == 2'
	# release --token of the set frees its reader in each, and only it;
	# a token that is not a reader of every workspace named frees none.
	run --separate-stderr wsl release --token "$t1" "$(W a)" "$(W b)"
	[ "$status" -ne 0 ] || fail "a release of A B by a token only A has succeeded"
	run -0 wsl inspect "$(W a)"
	jq_ok "[.owners[].token] | index(\"$t1\") != null and length == 2"
	run -0 wsl release --token "$t2" "$(W a)" "$(W b)"
	jq_ok '(.releases | length) == 2'
	run -0 wsl inspect "$(W a)" "$(W b)"
	jq_ok "[.workspaces[] | .state] == [\"held\", \"free\"] and .workspaces[0].owner.token == \"$t1\""
}

@test "a killed run --shared A B leaves a dead reader's document in A and in B" {
	mkws a b
	hold --shared "$(W a)" "$(W b)"
	kill -9 "$HOLD_PID" "$HOLD_CHILD"
	wait_for "[ \"\$(dead_readers '$(W a)')\" = 1 ] && [ \"\$(dead_readers '$(W b)')\" = 1 ]" 20 ||
		fail "the killed reader set does not read dead: $(wsl inspect "$(W a)" "$(W b)")"
	run -0 wsl inspect "$(W a)" "$(W b)"
	jq_ok '[.workspaces[] | .mode == "shared" and .liveness == "dead" and (.owners | length) == 1] == [true, true]'
	jq_ok '.workspaces[0].owner.token == .workspaces[1].owner.token'
	# Readers go on; a writer of either needs recovery.
	run -0 wsl run -n --shared "$(W b)" "$(W a)" -- true
	run wsl run -n "$(W b)" -- true
	[ "$status" = 69 ]
	[[ "$output" == *WSLOCK_RECOVERY_REQUIRED* ]]
	run -0 wsl reclaim --yes
	run -0 wsl inspect "$(W a)" "$(W b)"
	jq_ok '[.workspaces[].state] == ["free", "free"]'
}

@test "--shared with several workspaces is a usage error with the etcd backend" {
	mkws a b
	run wsl --backend etcd --etcd-endpoints http://127.0.0.1:9 run --shared "$(W a)" "$(W b)" -- true
	[ "$status" = 64 ]
}

@test "through a bind mount: a reader by one path keeps a writer by the other out; two readers share" {
	unshare -m sh -c 'mount -t tmpfs none /mnt' 2>/dev/null ||
		skip "cannot create a mount namespace and mount here (no CAP_SYS_ADMIN)"
	mkws a alias
	start_sleeper
	run -0 --separate-stderr timeout -k 5 60 unshare -m --propagation private sh -c '
		W=$1 real=$2 alias=$3 pid=$4
		mount --bind "$real" "$alias" || exit 90
		"$W" acquire -q --shared --pid "$pid" "$alias" >/dev/null || exit 91
		"$W" run -n "$real" -- true 2>/dev/null; echo "writer-real:$?"
		"$W" run -n --shared "$real" -- true; echo "reader-real:$?"
		"$W" acquire -q --shared --pid "$pid" "$real" >/dev/null; echo "reader-held:$?"
		"$W" run -n "$alias" -- true 2>/dev/null; echo "writer-alias:$?"' \
		sh "$WSLOCK" "$(canon "$(W a)")" "$(canon "$(W alias)")" "$SLEEPER_PID"
	[ "${lines[0]}" = writer-real:75 ] && [ "${lines[1]}" = reader-real:0 ] &&
		[ "${lines[2]}" = reader-held:0 ] && [ "${lines[3]}" = writer-alias:75 ] ||
		fail "unexpected: $output $stderr"
}

# repair_cmd: the command line of a repair (a write): it marks itself
# inside and leaves VIOLATION when a reader is inside with it.
repair_cmd() {
	printf "sh -c 'touch \"\$1/writer.in\"; ls \"\$1\" | grep -q \"^inside\\\\.\" && touch \"\$1/VIOLATION\"; touch \"\$1/repaired\"; echo w >>\"\$1/order\"; rm -f \"\$1/writer.in\"' sh %s" "$(M)"
}

@test "a dead reader beside a live one: recover and reclaim --yes with a command refuse (75) and run nothing; the printed next: recovers it, then repairs alone after the live reader" {
	mkws a
	local ws=$(W a) doc cmd
	reader 1 "$ws" 1
	wait_for "entered 1" 20 || fail "the reader did not enter"
	killed_reader "$ws"
	doc=$(wsl inspect "$ws" | jq -r '.holders[] | select(.liveness == "dead") | .lock_path')
	cp "$doc" "$BATS_TEST_TMPDIR/dead.json"
	local before
	before=$(wsl inspect "$ws" | jq -c '[.holders[] | .liveness] | sort')
	# recover with a command would run it as a reader, beside reader 1
	for opt in "" --retain-on-failure; do
		run -75 --separate-stderr wsl recover $opt --expected-owner "$BATS_TEST_TMPDIR/dead.json" "$ws" -- \
			sh -c "$(repair_cmd)"
		[[ $stderr == *"1 other reader still holds"*"pid $RPID"*"wslock run $(canon "$ws") -- REPAIR-CMD"*"[WSLOCK_BUSY]" ]] ||
			fail "recover $opt: $stderr"
		[ ! -e "$(M)/repaired" ] || fail "the repair ran beside the live reader"
		[ "$(wsl inspect "$ws" | jq -c '[.holders[] | .liveness] | sort')" = "$before" ]
	done
	# reclaim --yes -- CMD: the dead reader is skipped, the hook never runs
	run -0 --separate-stderr wsl reclaim --yes -- sh -c "$(repair_cmd)"
	jq -e '.reclaimed == [] and ([.skipped[] | select(.code == "WSLOCK_BUSY") | .why |
		startswith("live readers; the hook needs the workspace alone")] == [true])' <<<"$output" >/dev/null ||
		fail "reclaim: $output"
	[ ! -e "$(M)/repaired" ] || fail "the hook ran beside the live reader"
	# The next: of a writer meeting the dead reader recovers it without a
	# command, then repairs under an exclusive run that waits for reader 1.
	run -69 --separate-stderr wsl run -n "$ws" -- true
	cmd=$(sed -n 's/^wslock: .*; next: \(.*\) \[WSLOCK_[A-Z_]*\]$/\1/p' <<<"$stderr")
	[[ $cmd == "cp "*" owner.json && "*" recover --expected-owner owner.json "*" && "*" run --retain-on-failure "*" -- REPAIR-CMD" ]] ||
		fail "next: $cmd"
	mkdir -p "$BATS_TEST_TMPDIR/bin"
	ln -sf "$WSLOCK" "$BATS_TEST_TMPDIR/bin/wslock"
	(cd "$BATS_TEST_TMPDIR" && PATH=$BATS_TEST_TMPDIR/bin:$PATH &&
		eval "${cmd/REPAIR-CMD/$(repair_cmd)}") </dev/null >/dev/null 2>"$BATS_TEST_TMPDIR/paste.err" 3>&- &
	local paste=$!
	track_pid "$paste"
	wait_for "[ \"\$(wsl inspect '$ws' | jq '.holders | length')\" = 1 ] && grep -q waiting '$BATS_TEST_TMPDIR/paste.err'" 20 ||
		fail "the repair does not wait for the live reader: $(cat "$BATS_TEST_TMPDIR/paste.err")"
	[ ! -e "$(M)/repaired" ]
	touch "$(M)/GO"
	wait_exit "$paste" 30
	[ "$WAIT_STATUS" -eq 0 ] || fail "the pasted line: $WAIT_STATUS $(cat "$BATS_TEST_TMPDIR/paste.err")"
	[ -e "$(M)/repaired" ] && [ ! -e "$(M)/VIOLATION" ]
	[ "$(cat "$(M)/order")" = "$(printf 'r1\nw')" ]
	[ "$(wsl inspect "$ws" | jq -r .state)" = free ]
}

@test "a reader refused behind a queued writer while a reader holds: the message names the holding reader, then the waiter ahead" {
	mkws q
	hold --shared --purpose "reader one" "$(W q)"
	queue_waiter writer "$(W q)"
	run -75 --separate-stderr wsl run -n --shared "$(W q)" -- true
	[[ $stderr == *"is locked by pid $HOLD_PID on host "*'(purpose "reader one"'*"), and a waiter queued ahead (pid $WAITER_PID, since "*") is served first [WSLOCK_BUSY]" ]] ||
		fail "stderr: $stderr"
	[[ $stderr != *"nobody"* ]] || fail "nobody: $stderr"
	unhold
	wait_exit "$WAITER_PID" 20
}
