#!/usr/bin/env bats
# tests/queue.bats - the local backend's FIFO wait queue (DESIGN.md section
# 5, src/local_wait.c): arrival order, waiters killed or stopped in the
# queue, a killed holder, no wake-ups while blocked, no starvation behind
# overlapping holders, no barging past a queued waiter, and reclaim of
# abandoned entries.
#
# Arrival order is made known by waiting until each waiter is visibly
# queued (its entry in $WSLOCK_DIR/queue, named SEQ.PID.RAND) before the
# next one starts. Every wait is bounded; nothing depends on timing.

load helpers

# waiter NAME WS [RUN-OPTIONS...]: queue_waiter (helpers.bash) for
# `wslock run RUN-OPTIONS WS`.
waiter() {
	local name=$1 ws=$2
	shift 2
	queue_waiter "$name" "$@" "$ws"
}

# queue_len: the number of entries in the queue.
queue_len() {
	local f n=0
	for f in "$WSLOCK_DIR"/queue/*; do [ -e "$f" ] && n=$((n + 1)); done
	echo "$n"
}


# vcs PID: voluntary context switches of PID so far.
vcs() {
	awk '/^voluntary_ctxt_switches:/ { print $2 }' "/proc/$1/status"
}


# two_waiters WS: waiters w1 and w2 for WS, queued in that order (P1, P2
# their pids).
two_waiters() {
	waiter w1 "$1"
	P1=$WAITER_PID
	waiter w2 "$1"
	P2=$WAITER_PID
}

@test "waiters get the lock in the order they arrived" {
	mkws a
	hold "$(W a)"
	local -a pids
	for i in 1 2 3 4 5; do
		waiter "w$i" "$(W a)"
		pids+=("$WAITER_PID")
	done
	[ "$(queue_len)" = 5 ]
	unhold
	for p in "${pids[@]}"; do
		wait_exit "$p" 30 || fail "waiter $p did not finish"
		[ "$WAIT_STATUS" = 0 ] || fail "waiter $p exited $WAIT_STATUS"
	done
	run cat "$BATS_TEST_TMPDIR/order"
	[ "$output" = "$(printf 'w%s\n' 1 2 3 4 5)" ]
	# Each left the queue as it took the lock.
	[ "$(queue_len)" = 0 ]
}

@test "a waiter killed in the middle of the queue does not stall the others" {
	mkws a
	hold "$(W a)"
	two_waiters "$(W a)"
	local p1=$P1 p2=$P2
	waiter w3 "$(W a)"
	local p3=$WAITER_PID
	wsl_kill_reap "$p2"
	# Its kernel lock is gone: the waiter behind it wakes at once, moves
	# up and, in its scan under the registry lock, removes the abandoned
	# entry, while the workspace is still held.
	wait_for "! queued $p2" 20
	queued "$p1" && queued "$p3"
	unhold
	wait_exit "$p1" 30 && [ "$WAIT_STATUS" = 0 ]
	wait_exit "$p3" 30 && [ "$WAIT_STATUS" = 0 ]
	run cat "$BATS_TEST_TMPDIR/order"
	[ "$output" = "$(printf 'w1\nw3')" ]
	[ "$(queue_len)" = 0 ]
}

@test "a blocked waiter does not wake up while it waits" {
	mkws a
	hold "$(W a)"
	waiter head "$(W a)"
	local head=$WAITER_PID
	# The second waits on the first's entry, with a deadline far away.
	waiter second "$(W a)" -w 600
	local second=$WAITER_PID
	local h0 s0 h1 s1
	h0=$(vcs "$head") s0=$(vcs "$second")
	sleep 3
	h1=$(vcs "$head") s1=$(vcs "$second")
	[ "$h1" = "$h0" ] || fail "the head woke $((h1 - h0)) times in 3 s"
	[ "$s1" = "$s0" ] || fail "the second waiter woke $((s1 - s0)) times in 3 s"
	unhold
	wait_exit "$head" 30 && [ "$WAIT_STATUS" = 0 ]
	wait_exit "$second" 30 && [ "$WAIT_STATUS" = 0 ]
}

@test "a run holder killed with its command wakes its waiters: recovery required" {
	mkws a
	hold "$(W a)"
	two_waiters "$(W a)"
	local p1=$P1 p2=$P2
	# The run and its command die: their kernel lock on live vanishes and
	# the lock is left behind, dead.
	kill -KILL "$HOLD_PID" "$HOLD_CHILD"
	wait_exit "$p1" 20 || fail "the head was not woken"
	[ "$WAIT_STATUS" = 69 ]
	grep -q 'dead' "$BATS_TEST_TMPDIR/w1.err"
	wait_exit "$p2" 20 || fail "the second waiter was not woken"
	[ "$WAIT_STATUS" = 69 ]
	[ ! -e "$BATS_TEST_TMPDIR/order" ]
	[ "$(queue_len)" = 0 ]
}

@test "an acquire --pid holder whose pid exits wakes its waiter" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	waiter w1 "$(W a)"
	local p1=$WAITER_PID
	wsl_kill_reap "$SLEEPER_PID"
	wait_exit "$p1" 20 || fail "the waiter was not woken"
	[ "$WAIT_STATUS" = 69 ]
	# Woken by the pidfd at the exit, the waiter may probe before the
	# parent reaps the sleeper (a zombie: dead too) or after (no such pid).
	grep -Eq 'no longer exists|has exited \(a zombie' "$BATS_TEST_TMPDIR/w1.err" ||
		fail "no dead-owner reason: $(cat "$BATS_TEST_TMPDIR/w1.err")"
}

@test "a waiter with --reclaim-dead takes over when its holder dies" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	waiter w1 "$(W a)" --reclaim-dead
	local p1=$WAITER_PID
	wsl_kill_reap "$SLEEPER_PID"
	wait_exit "$p1" 20 || fail "the waiter was not woken"
	[ "$WAIT_STATUS" = 0 ]
	[ "$(cat "$BATS_TEST_TMPDIR/order")" = w1 ]
}

@test "a waiter for a workspace is not starved by overlapping holders below it" {
	mkws w/a w/b
	local stop=$BATS_TEST_TMPDIR/STOP
	# Two streams of holders, each run back to back, so that /w/a and
	# /w/b are held in turns and /w is almost never free at once.
	for sub in a b; do
		(
			n=0
			while [ ! -e "$stop" ]; do
				"$WSLOCK" run "$(W "w/$sub")" -- sleep 0.2 </dev/null >/dev/null 2>&1 3>&- || exit 9
				n=$((n + 1))
				echo "$n" >"$BATS_TEST_TMPDIR/stream.$sub"
			done
		) &
		track_pid "$!"
		eval "stream_$sub=\$!"
	done
	wait_for "[ -e '$BATS_TEST_TMPDIR/stream.a' ] && [ -e '$BATS_TEST_TMPDIR/stream.b' ]" 20
	waiter w "$(W w)"
	local pw=$WAITER_PID
	# Holders of /w/a and /w/b that come after queue behind it, so it is
	# served as soon as the ones before it have finished.
	wait_exit "$pw" 30 || fail "the waiter for /w starved"
	[ "$WAIT_STATUS" = 0 ]
	[ "$(cat "$BATS_TEST_TMPDIR/order")" = w ]
	touch "$stop"
	wait_exit "$stream_a" 30 && [ "$WAIT_STATUS" = 0 ]
	wait_exit "$stream_b" 30 && [ "$WAIT_STATUS" = 0 ]
}

@test "a free workspace is not taken past a conflicting waiter that arrived first" {
	mkws w/a w/b
	hold "$(W w/a)"
	waiter w "$(W w)"
	local pw=$WAITER_PID
	# /w/b is free, but the waiter for /w came first.
	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W w/b)"
	jq -e '.error.code == "WSLOCK_BUSY"' <<<"$output"
	[[ "$stderr" == *"locked by nobody yet: a waiter queued ahead (pid $pw,"* ]] || fail "stderr: $stderr"
	# An unrelated workspace is not held up.
	mkws other
	run wsl run -n "$(W other)" -- true
	[ "$status" = 0 ]
	# A waiting run for /w/b queues behind it and is served after it.
	waiter b "$(W w/b)"
	local pb=$WAITER_PID
	unhold
	wait_exit "$pw" 30 && [ "$WAIT_STATUS" = 0 ]
	wait_exit "$pb" 30 && [ "$WAIT_STATUS" = 0 ]
	[ "$(cat "$BATS_TEST_TMPDIR/order")" = "$(printf 'w\nb')" ]
}

@test "a stopped waiter at the head does not keep a free workspace from the others" {
	mkws a
	hold "$(W a)"
	two_waiters "$(W a)"
	local p1=$P1 p2=$P2
	kill -STOP "$p1"
	# The release pokes the stopped head's entry: the one behind passes it.
	unhold
	wait_exit "$p2" 30 || { kill -CONT "$p1"; fail "the waiter behind a stopped head stalled"; }
	[ "$WAIT_STATUS" = 0 ]
	# Continued, the first keeps its place and gets the lock.
	kill -CONT "$p1"
	wait_exit "$p1" 30 && [ "$WAIT_STATUS" = 0 ]
	[ "$(cat "$BATS_TEST_TMPDIR/order")" = "$(printf 'w2\nw1')" ]
}

@test "a new arrival passes a stopped waiter and wakes the ones behind it" {
	mkws a
	hold "$(W a)"
	waiter w1 "$(W a)"
	local p1=$WAITER_PID
	kill -STOP "$p1"
	waiter w2 "$(W a)"
	local p2=$WAITER_PID
	unhold
	wait_exit "$p2" 30 || { kill -CONT "$p1"; fail "stalled behind a stopped waiter"; }
	[ "$WAIT_STATUS" = 0 ]
	kill -CONT "$p1"
	wait_exit "$p1" 30 && [ "$WAIT_STATUS" = 0 ]
}

@test "a signal ends a queued wait: 128+N, the entry is gone, the lock untouched" {
	mkws a
	hold "$(W a)"
	two_waiters "$(W a)"
	local p1=$P1 p2=$P2
	local before
	before=$(cat "$(lock_dir_of "$(W a)")/owner.json")
	kill -TERM "$p1"
	wait_exit "$p1" 20 && [ "$WAIT_STATUS" = 143 ]
	! queued "$p1"
	[ "$(cat "$(lock_dir_of "$(W a)")/owner.json")" = "$before" ]
	unhold
	wait_exit "$p2" 30 && [ "$WAIT_STATUS" = 0 ]
	[ "$(cat "$BATS_TEST_TMPDIR/order")" = w2 ]
}

@test "-w ends a queued wait and its place goes to the next" {
	mkws a
	hold "$(W a)"
	waiter w1 "$(W a)" -w 1
	local p1=$WAITER_PID
	waiter w2 "$(W a)"
	local p2=$WAITER_PID
	wait_exit "$p1" 20 && [ "$WAIT_STATUS" = 75 ]
	! queued "$p1"
	unhold
	wait_exit "$p2" 30 && [ "$WAIT_STATUS" = 0 ]
	[ "$(cat "$BATS_TEST_TMPDIR/order")" = w2 ]
}

@test "reclaim collects the entries of killed waiters" {
	mkws a
	hold "$(W a)"
	waiter w1 "$(W a)"
	local p1=$WAITER_PID
	wsl_kill_reap "$p1"
	queued "$p1"
	run wsl reclaim
	[ "$status" = 0 ]
	jq -e '.garbage.staging >= 1' <<<"$output"
	run wsl reclaim --yes
	[ "$status" = 0 ]
	! queued "$p1"
	# The held lock is untouched.
	run wsl inspect "$(W a)"
	jq -e '.state == "held" and .liveness == "live"' <<<"$output"
	unhold
}

@test "a command inside a held run does not queue behind a waiter for that run's lock" {
	mkws w/a w/b
	# The outer run holds /w/a and a waiter for /w queues behind it; then
	# the outer's command locks /w/b, which is free: queued behind the
	# waiter for /w it would wait for itself, so it passes the queue by.
	"$WSLOCK" run "$(W w/a)" -- sh -c '
		while [ ! -e "$1/QUEUED" ]; do sleep 0.05; done
		"$2" run -w 20 "$3" -- sh -c "echo inner >>\"$1/order\""' \
		sh "$BATS_TEST_TMPDIR" "$WSLOCK" "$(W w/b)" \
		</dev/null >"$BATS_TEST_TMPDIR/outer.out" 2>"$BATS_TEST_TMPDIR/outer.err" 3>&- &
	local outer=$!
	track_pid "$outer"
	wait_for "[ -d '$(lock_dir_of "$(W w/a)")' ]" 20
	waiter w "$(W w)"
	local pw=$WAITER_PID
	touch "$BATS_TEST_TMPDIR/QUEUED"
	wait_exit "$outer" 30 || fail "the outer run hung: $(cat "$BATS_TEST_TMPDIR/outer.err")"
	[ "$WAIT_STATUS" = 0 ] || fail "outer exited $WAIT_STATUS: $(cat "$BATS_TEST_TMPDIR/outer.err")"
	wait_exit "$pw" 30 && [ "$WAIT_STATUS" = 0 ]
	[ "$(cat "$BATS_TEST_TMPDIR/order")" = "$(printf 'inner\nw')" ]
}

@test "a nested run of its holder's own workspace is not held back by a waiter queued below it" {
	mkws a/x/deep
	# The outer run holds /a; a waiter for /a/x/deep queues behind it.
	# Then the outer's command runs 'run -n /a': it nests (it holds the
	# outer's live file), so the queue has no say, and it runs before the
	# waiter.
	"$WSLOCK" run "$(W a)" -- sh -c '
		while [ ! -e "$1/QUEUED" ]; do sleep 0.05; done
		"$2" run -n "$3" -- sh -c "echo inner >>\"$1/order\""' \
		sh "$BATS_TEST_TMPDIR" "$WSLOCK" "$(W a)" \
		</dev/null >"$BATS_TEST_TMPDIR/outer.out" 2>"$BATS_TEST_TMPDIR/outer.err" 3>&- &
	local outer=$!
	track_pid "$outer"
	wait_for "[ -d '$(lock_dir_of "$(W a)")' ]" 20
	waiter w "$(W a/x/deep)" -w 30
	local pw=$WAITER_PID
	touch "$BATS_TEST_TMPDIR/QUEUED"
	wait_exit "$outer" 30 || fail "the outer run hung: $(cat "$BATS_TEST_TMPDIR/outer.err")"
	[ "$WAIT_STATUS" = 0 ] || fail "outer exited $WAIT_STATUS: $(cat "$BATS_TEST_TMPDIR/outer.err")"
	wait_exit "$pw" 30 && [ "$WAIT_STATUS" = 0 ]
	[ "$(cat "$BATS_TEST_TMPDIR/order")" = "$(printf 'inner\nw')" ]
}

@test "inspect of a free workspace a waiter is queued for: --exit-status 75 as run -n meets it, the waiters under queued (JSON and text)" {
	mkws app site other
	hold "$(W site)"
	# waits for site, and so stands in app's queue too
	queue_waiter multi "$(W app)" "$(W site)"
	run -75 --separate-stderr wsl run -n "$(W app)" -- true
	run -75 --separate-stderr wsl inspect -q --exit-status "$(W app)"
	run -0 --separate-stderr wsl inspect "$(W app)"
	jq -e --arg app "$(canon "$(W app)")" --argjson pid "$WAITER_PID" \
		'.state == "free" and .queued == [{"pid": $pid, "mode": "exclusive", "workspace_root": $app, "since": .queued[0].since}]' \
		<<<"$output" >/dev/null || fail "queued: $output"
	run -0 --separate-stderr wsl inspect --format text "$(W app)"
	[[ $output == *"queued: pid $WAITER_PID (exclusive) waits for $(canon "$(W app)") since "* ]] || fail "text: $output"
	# a workspace nobody waits for: no queued, 0
	run -0 --separate-stderr wsl inspect "$(W other)"
	jq_ok 'has("queued") | not'
	run -0 wsl inspect -q --exit-status "$(W other)"
	unhold
	wait_exit "$WAITER_PID" 20
	run -0 wsl inspect -q --exit-status "$(W app)"
}
