#!/usr/bin/env bats
# tests/etcd_shared.bats - shared locks on the etcd backend (DESIGN.md
# section 2, src/registry_etcd_shared.c) against a real etcd on loopback
# (one member for the file; skipped without etcd and etcdctl): readers
# together while a writer waits, then the writer alone; a writer not
# overtaken by later readers; a SIGKILLed reader (a writer needs recovery,
# readers still enter, recover acts on that reader's exact document only);
# release of one reader; nested workspaces; the key layout and what an
# older binary meets (the marker, never a free lock).
#
# Readers and writers leave markers in $BATS_TEST_TMPDIR/m while inside, as
# in shared.bats: in.N (reader N entered, kept), inside.N (inside now),
# writer.in; a violation leaves VIOLATION. Every wait is bounded and waits
# on a condition (a queue key visible in etcd, a marker, a liveness).

load helpers

setup_file() {
	etcd_setup_file
}

teardown_file() {
	etcd_teardown_file
}

local_setup() {
	etcd_use s
}


# nkeys PREFIX: how many keys lie below $WSLOCK_ETCD_PREFIX PREFIX.
nkeys() {
	ectl get --prefix "$WSLOCK_ETCD_PREFIX$1" --keys-only -w json | jq -r '.count // 0'
}

# writers_queued WS / readers_queued WS: the waiters queued for WS.
writers_queued() { nkeys "queue$(canon "$1")//"; }
readers_queued() { nkeys "queue+$(canon "$1")//"; }

M() { printf '%s/m' "$BATS_TEST_TMPDIR"; }

# reader N WS BARRIER: a background `wslock run --shared WS` whose command
# enters (markers), waits until BARRIER readers have entered and GO exists
# (bounded: 60 s, else BARRIER_TIMEOUT), then leaves. Sets RPID.
reader() {
	mkdir -p "$(M)"
	"$WSLOCK" run -w 60 --shared "$2" -- sh -c '
		m=$1
		[ -e "$m/writer.in" ] && touch "$m/VIOLATION"
		touch "$m/in.$2" "$m/inside.$2"
		echo "$WSLOCK_TOKEN $WSLOCK_FENCE" >"$m/token.$2"
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
	"$WSLOCK" run -w 60 "$@" "$ws" -- sh -c '
		m=$1
		touch "$m/writer.in"
		ls "$m" | grep -q "^inside\." && touch "$m/VIOLATION"
		echo w >>"$m/order"
		rm -f "$m/writer.in"' sh "$(M)" \
		</dev/null >"$BATS_TEST_TMPDIR/w.out" 2>"$BATS_TEST_TMPDIR/w.err" 3>&- &
	WPID=$!
	track_pid "$WPID"
}

entered() {
	[ "$(ls "$(M)" 2>/dev/null | grep -c '^in\.')" -ge "$1" ]
}

# dead_readers WS: how many of WS's holders read dead.
dead_readers() {
	wsl inspect "$1" | jq '[.holders[]? | select(.liveness == "dead")] | length'
}

# killed_reader WS: one more reader of WS (run --shared, lease TTL 2 s),
# SIGKILLed together with its command; waits until inspect sees it dead
# (its lease, TTL + lock-delay, has run out).
killed_reader() {
	local n
	n=$(dead_readers "$1")
	hold --shared --lease-ttl 2 "$1"
	kill -9 "$HOLD_PID" "$HOLD_CHILD"
	wait_for "[ \"\$(dead_readers '$1')\" = $((n + 1)) ]" 30 ||
		fail "the killed reader does not read dead: $(wsl inspect "$1")"
}

@test "etcd shared: four readers are inside together while a writer waits; then the writer runs alone" {
	mkws a
	local -a pids
	local i p
	for i in 1 2 3 4; do
		reader "$i" "$(W a)" 4
		pids+=("$RPID")
	done
	# All four inside at once: each saw the others' in.N before leaving.
	wait_for "entered 4" 30 || fail "the readers were not inside together: $(ls "$(M)")"
	writer "$(W a)"
	wait_for "[ \"\$(writers_queued '$(W a)')\" = 1 ]" 20 ||
		fail "the writer did not queue: $(cat "$BATS_TEST_TMPDIR/w.err")"
	[ ! -e "$(M)/writer.in" ]
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "held" and .mode == "shared" and (.owners | length) == 4 and (.holders | length) == 4'
	jq_ok '[.owners[].token] | unique | length == 4'
	touch "$(M)/GO"
	for p in "${pids[@]}" "$WPID"; do
		wait_exit "$p" 30 || fail "$p did not finish"
		[ "$WAIT_STATUS" = 0 ] || fail "$p exited $WAIT_STATUS: $(cat "$BATS_TEST_TMPDIR"/*.err)"
	done
	[ ! -e "$(M)/VIOLATION" ] && [ ! -e "$(M)/BARRIER_TIMEOUT" ]
	[ "$(tail -n 1 "$(M)/order")" = w ]
	[ "$(grep -c '^r' "$(M)/order")" = 4 ]
	# Each reader had a token and a fencing token of its own.
	[ "$(cut -d' ' -f1 "$(M)"/token.* | sort -u | wc -l)" = 4 ]
	[ "$(cut -d' ' -f2 "$(M)"/token.* | grep -c '^[0-9][0-9]*$')" = 4 ]
	[ "$(cut -d' ' -f2 "$(M)"/token.* | sort -u | wc -l)" = 4 ]
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "free"'
	[ "$(nkeys "")" = 0 ] || fail "keys left: $(ectl get --prefix "$WSLOCK_ETCD_PREFIX" --keys-only)"
}

@test "etcd shared: a waiting writer is not overtaken by readers that arrive after it" {
	mkws a
	reader 1 "$(W a)" 1
	local r1=$RPID r2 p
	wait_for "entered 1" 20 || fail "reader 1 did not enter: $(cat "$BATS_TEST_TMPDIR/r1.err")"
	writer "$(W a)"
	wait_for "[ \"\$(writers_queued '$(W a)')\" = 1 ]" 20 || fail "the writer did not queue"
	# A reader arriving now queues behind the writer, although only
	# readers hold the lock.
	reader 2 "$(W a)" 2
	r2=$RPID
	wait_for "[ \"\$(readers_queued '$(W a)')\" = 1 ]" 20 ||
		fail "reader 2 did not queue: $(cat "$BATS_TEST_TMPDIR/r2.err")"
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
	[ "$(nkeys queue)" = 0 ]
}

@test "etcd shared: readers queued behind a writer enter together once it is done" {
	mkws a
	local r1 r2 p
	hold "$(W a)"
	reader 1 "$(W a)" 2
	r1=$RPID
	wait_for "[ \"\$(readers_queued '$(W a)')\" = 1 ]" 20 || fail "reader 1 did not queue"
	reader 2 "$(W a)" 2
	r2=$RPID
	wait_for "[ \"\$(readers_queued '$(W a)')\" = 2 ]" 20 || fail "reader 2 did not queue"
	touch "$(M)/GO"
	unhold
	for p in "$r1" "$r2"; do
		wait_exit "$p" 30 || fail "$p did not finish"
		[ "$WAIT_STATUS" = 0 ] || fail "$p exited $WAIT_STATUS"
	done
	# Both inside at once: each waited for the other's in.N.
	[ ! -e "$(M)/BARRIER_TIMEOUT" ]
}

@test "etcd shared: a SIGKILLed reader's document stays; a writer gets 69, a reader still enters; recover takes that document only" {
	mkws a
	local live_token new
	start_sleeper
	run -0 --separate-stderr wsl acquire --shared --pid "$SLEEPER_PID" "$(W a)"
	live_token=$(json_get .token)
	printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/live.json"
	killed_reader "$(W a)"
	run --separate-stderr wsl run -n "$(W a)" -- true
	[ "$status" = 69 ] || fail "writer: $status $stderr"
	[[ "$stderr" == *WSLOCK_RECOVERY_REQUIRED* ]]
	run -0 --separate-stderr wsl run -n --shared "$(W a)" -- echo reader-in
	[ "$output" = reader-in ]
	run -0 wsl inspect "$(W a)"
	jq_ok '.mode == "shared" and (.owners | length) == 2 and .liveness == "dead"'
	jq_ok '([.holders[].liveness] | sort) == ["dead","live"]'
	# --owner names the one a writer meets first: the dead reader.
	run -0 --separate-stderr wsl inspect --owner "$(W a)"
	printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/dead.json"
	jq_ok ".token != \"$live_token\""
	# A document that is not that reader's exact one is refused, and so is
	# the live reader's; nothing changes.
	jq -c '.purpose = "not this one"' "$BATS_TEST_TMPDIR/dead.json" >"$BATS_TEST_TMPDIR/wrong.json"
	run --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/wrong.json" "$(W a)"
	[ "$status" = 65 ] || fail "wrong document: $status $stderr"
	assert_json_error WSLOCK_OWNER_MISMATCH
	run --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/live.json" "$(W a)"
	[ "$status" = 75 ] || fail "live reader: $status $stderr"
	run -0 wsl inspect "$(W a)"
	jq_ok '(.owners | length) == 2'
	# The dead reader's exact document with a command: its successor would
	# be a reader, its command beside the live reader: refused, nothing
	# changes. Without one it is taken over.
	run -75 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/dead.json" "$(W a)" -- \
		touch "$BATS_TEST_TMPDIR/ran"
	[[ $stderr == *"other reader still holds"*WSLOCK_BUSY* ]] || fail "recover -- CMD: $stderr"
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
	run -0 wsl inspect "$(W a)"
	jq_ok '(.owners | length) == 2'
	run -0 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/dead.json" "$(W a)"
	new=$(json_get .owner.token)
	[ "${#new}" = 32 ] && [ "$new" != "$live_token" ]
	run -0 wsl inspect "$(W a)"
	jq_ok "(.owners | length) == 1 and .owners[0].token == \"$live_token\" and .liveness == \"live\""
	ectl get --prefix "${WSLOCK_ETCD_PREFIX}journal/" --print-value-only | grep -q '"action":"recover"'
	run -0 wsl release --token "$live_token" "$(W a)"
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "free"'
}

@test "etcd shared: reclaim --yes and --reclaim-dead take a dead reader's document" {
	mkws a b
	local live_token
	start_sleeper
	run -0 wsl acquire --shared --pid "$SLEEPER_PID" "$(W a)"
	live_token=$(json_get .token)
	killed_reader "$(W a)"
	run -0 wsl reclaim --yes
	run -0 wsl inspect "$(W a)"
	jq_ok "(.owners | length) == 1 and .owners[0].token == \"$live_token\" and .liveness == \"live\""
	ectl get --prefix "${WSLOCK_ETCD_PREFIX}journal/" --print-value-only | grep -q '"action":"reclaim"'
	# a writer with --reclaim-dead takes the dead reader, then runs
	killed_reader "$(W b)"
	run -0 --separate-stderr wsl run -n --reclaim-dead "$(W b)" -- echo wrote
	[ "$output" = wrote ]
	ectl get --prefix "${WSLOCK_ETCD_PREFIX}journal/" --print-value-only | grep -q '"action":"reclaim-dead"'
	run -0 wsl inspect "$(W b)"
	jq_ok '.state == "free"'
}

@test "etcd shared: release --token of one reader leaves the others; the last one frees the workspace" {
	mkws a
	local t1 t2
	start_sleeper
	run -0 wsl acquire --shared --pid "$SLEEPER_PID" "$(W a)"
	t1=$(json_get .token)
	jq_ok '.fence > 0'
	run -0 wsl acquire --shared --pid "$SLEEPER_PID" "$(W a)"
	t2=$(json_get .token)
	run -0 wsl release --token "$t1" "$(W a)"
	jq_ok ".owner.token == \"$t1\""
	run -0 wsl inspect "$(W a)"
	jq_ok "(.owners | length) == 1 and .owner.token == \"$t2\""
	run wsl release --token "$t1" "$(W a)"
	[ "$status" = 78 ]
	run wsl run -n "$(W a)" -- true
	[ "$status" = 75 ]
	run -0 wsl release --token "$t2" "$(W a)"
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "free"'
	[ "$(nkeys "")" = 0 ] || fail "keys left: $(ectl get --prefix "$WSLOCK_ETCD_PREFIX" --keys-only)"
	run -0 wsl run -n "$(W a)" -- true
}

@test "etcd shared: exclusive and shared locks on nested workspaces conflict both ways; two shared ones do not" {
	mkws a/sub b/sub
	start_sleeper
	run -0 wsl acquire --shared --pid "$SLEEPER_PID" "$(W a)"
	run -0 wsl acquire --shared --pid "$SLEEPER_PID" "$(W a)/sub"
	run wsl acquire -n --pid "$SLEEPER_PID" "$(W a)/sub"
	[ "$status" = 75 ]
	run wsl run -n "$(W a)" -- true
	[ "$status" = 75 ]
	run -0 wsl acquire --pid "$SLEEPER_PID" "$(W b)"
	run --separate-stderr wsl run -n --shared "$(W b)/sub" -- true
	[ "$status" = 75 ]
	[[ "$stderr" == *"overlaps its ancestor"* ]] || fail "$stderr"
	run --separate-stderr wsl acquire -n --shared --pid "$SLEEPER_PID" "$(W b)"
	[ "$status" = 75 ]
	jq_ok '.error.code == "WSLOCK_BUSY"'
}

@test "etcd shared: the keys: a marker that is no owner document, one set of keys per reader; several workspaces stay a usage error" {
	mkws a b
	local tok v
	hold --shared "$(W a)"
	tok=$(wsl inspect "$(W a)" | jq -r .owners[0].token)
	# An older binary reads the lock key: not an owner document (corrupt,
	# 65, never free); the exclusive compares keep any writer out.
	v=$(ectl get "${WSLOCK_ETCD_PREFIX}lock$(canon "$(W a)")" --print-value-only)
	jq -e '.kind == "wslock-shared" and .mode == "shared" and (has("token") | not)' <<<"$v"
	for k in lock lease live; do
		[ "$(nkeys "holder/$k$(canon "$(W a)")//$tok")" = 1 ] || fail "no holder/$k key"
	done
	ectl get "${WSLOCK_ETCD_PREFIX}holder/lock$(canon "$(W a)")//$tok" --print-value-only |
		jq -e "keys == $OWNER_KEYS"
	# the reader's liveness key is on a lease, its document not
	ectl get "${WSLOCK_ETCD_PREFIX}holder/live$(canon "$(W a)")//$tok" -w json | grep -q '"lease":[1-9]'
	! ectl get "${WSLOCK_ETCD_PREFIX}holder/lock$(canon "$(W a)")//$tok" -w json | grep -q '"lease":[1-9]'
	run --separate-stderr wsl run --shared "$(W a)" "$(W b)" -- true
	[ "$status" = 64 ]
	[[ "$stderr" == *"--shared with several workspaces at once is not supported by the etcd backend"* ]]
	unhold
	[ "$WAIT_STATUS" = 0 ]
	[ "$(nkeys "")" = 0 ]
}

@test "etcd shared: inspect --all lists a shared lock once with its readers, beside an exclusive one" {
	mkws a b
	start_sleeper
	run -0 wsl acquire --shared --pid "$SLEEPER_PID" "$(W a)"
	run -0 wsl acquire --shared --pid "$SLEEPER_PID" "$(W a)"
	run -0 wsl acquire --pid "$SLEEPER_PID" "$(W b)"
	run -0 wsl inspect --all
	jq_ok '(.locks | length) == 2'
	jq_ok ".locks[0].workspace_root == \"$(canon "$(W a)")\" and .locks[0].mode == \"shared\" and (.locks[0].owners | length) == 2"
	jq_ok '.locks[1].mode == "exclusive" and (.locks[1].owners | length) == 1'
	run -0 wsl inspect --format text "$(W a)"
	[ "$(grep -c ' shared  *live ' <<<"$output")" = 2 ] || fail "$output"
}

@test "etcd shared: a reader whose document or marker is deleted by hand is stopped at once, exit 78; the other reader goes on" {
	mkws a
	local tok
	hold --shared "$(W a)"
	local other_pid=$HOLD_PID other_dir=$HOLD_DIR
	hold --shared "$(W a)"
	tok=$(wsl inspect "$(W a)" | jq -r ".owners[] | select(.pid == $HOLD_PID) | .token")
	[ ${#tok} = 32 ] || fail "no token of $HOLD_PID: $(wsl inspect "$(W a)")"
	ectl del "${WSLOCK_ETCD_PREFIX}holder/lock$(canon "$(W a)")//$tok" >/dev/null
	wait_exit "$HOLD_PID" 20 || fail "the reader went on without its document"
	[ "$WAIT_STATUS" = 78 ] || fail "status $WAIT_STATUS: $(cat "$HOLD_DIR/err")"
	is_running "$other_pid"
	# the marker gone: the other reader is stopped too (no lock is left)
	ectl del "${WSLOCK_ETCD_PREFIX}lock$(canon "$(W a)")" >/dev/null
	wait_exit "$other_pid" 20 || fail "the reader went on without its lock's marker"
	[ "$WAIT_STATUS" = 78 ] || fail "status $WAIT_STATUS: $(cat "$other_dir/err")"
}

@test "etcd shared requests: an uncontended shared run sends three, one joining readers at most five" {
	command -v strace >/dev/null || skip "strace is not installed (apt-get install strace)"
	mkws a
	local t=$BATS_TEST_TMPDIR/trace n
	count() { awk '/POST \/v3\// && !/POST \/v3\/watch/ { n++ } END { print n + 0 }' "$t"; }
	# lease grant, acquire txn (puts the marker), release txn (the last
	# reader: takes it with it); leak checks off under ptrace
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
		run strace -f -e trace=sendto -s 32 -o "$t" "$WSLOCK" run --shared "$(W a)" -- true
	[ "$status" -eq 0 ] || fail "exit $status: $output"
	n=$(count)
	[ "$n" -eq 3 ] || fail "$n requests: $(grep -o 'POST /v3/[a-z/]*' "$t" | tr '\n' ' ')"
	# beside a reader: the first txn meets the marker and reads the lock
	# keys in its failure branch, the second joins; the release is not
	# the last one's
	hold --shared "$(W a)"
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
		run strace -f -e trace=sendto -s 32 -o "$t" "$WSLOCK" run --shared "$(W a)" -- true
	[ "$status" -eq 0 ] || fail "exit $status: $output"
	n=$(count)
	[ "$n" -le 5 ] || fail "$n requests: $(grep -o 'POST /v3/[a-z/]*' "$t" | tr '\n' ' ')"
	unhold
}

@test "etcd shared: release --retain of one reader: a writer gets 69, readers still enter, recover of that reader frees it" {
	mkws a
	local t
	start_sleeper
	run -0 wsl acquire --shared --lease-ttl 2 --pid "$SLEEPER_PID" "$(W a)"
	t=$(json_get .token)
	run -0 wsl release --retain --reason "cache half-written" --token "$t" "$(W a)"
	jq_ok '.action == "retained"'
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "retained" and .mode == "shared" and .holders[0].state == "retained"'
	run wsl run -n "$(W a)" -- true
	[ "$status" = 69 ]
	run -0 --separate-stderr wsl run -n --shared "$(W a)" -- echo reader-in
	[ "$output" = reader-in ]
	kill -KILL "$SLEEPER_PID"
	wait_for "wsl inspect '$(W a)' | jq -e '.liveness == \"dead\"' >/dev/null" 30 ||
		fail "never dead: $(wsl inspect "$(W a)")"
	run -0 --separate-stderr wsl inspect --owner "$(W a)"
	printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/ret.json"
	run -0 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/ret.json" "$(W a)"
	jq_ok '.action == "recovered"'
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "free"'
	[ "$(nkeys "" )" = "$(nkeys journal/)" ] || fail "keys left: $(ectl get --prefix "$WSLOCK_ETCD_PREFIX" --keys-only)"
}

@test "etcd shared: a corrupt reader document keeps readers and writers out (65), never read as free" {
	mkws a
	hold --shared "$(W a)"
	ectl put "${WSLOCK_ETCD_PREFIX}holder/lock$(canon "$(W a)")//0123456789abcdef0123456789abcdef" 'garbage{' >/dev/null
	run --separate-stderr wsl run -n --shared "$(W a)" -- true
	[ "$status" = 65 ] || fail "reader: $status $stderr"
	run --separate-stderr wsl run -n "$(W a)" -- true
	[ "$status" = 65 ] || fail "writer: $status $stderr"
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "corrupt" and .mode == "shared" and (.holders | length) == 2'
	unhold
	[ "$WAIT_STATUS" = 0 ]
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "corrupt"'
	# cleared only by an exact, forced recover of its bytes
	printf 'garbage{' >"$BATS_TEST_TMPDIR/bad"
	run -0 --separate-stderr wsl recover --force --reason test --expected-owner "$BATS_TEST_TMPDIR/bad" "$(W a)"
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "free"'
}
