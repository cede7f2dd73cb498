#!/usr/bin/env bats
# tests/multi.bats - several workspaces at once (DESIGN.md section 2):
# run/acquire/release/inspect A B C, all or nothing in one critical
# section (src/local_multi.c), one queue entry standing in every queue a
# waiter needs (src/local_queue.c), so that jobs naming the same workspaces
# in different orders never deadlock and FIFO holds across queues;
# overlapping arguments; the child's environment; what a kill -9 and a
# crash between two publishes leave. Every wait is bounded.

load helpers

# state WS: the state of WS's own lock as inspect reads it.
state() {
	wsl inspect "$1" | jq -r .state
}

# liveness WS
liveness() {
	wsl inspect "$1" | jq -r .liveness
}

# waiter NAME WS...: queue_waiter (helpers.bash) for `wslock run -w 60
# WS...`.
waiter() {
	local name=$1
	shift
	queue_waiter "$name" -w 60 "$@"
}

@test "run -n A B while B is held: exit 75 naming B, and A is not locked afterwards" {
	mkws a b
	hold "$(W b)"
	run -75 --separate-stderr wsl run -n "$(W a)" "$(W b)" -- echo SHOULD-NOT-RUN
	[[ $output != *SHOULD-NOT-RUN* ]] || fail "the command ran: $output"
	[[ $stderr == *"$(canon "$(W b)")"*"WSLOCK_BUSY"* ]] || fail "stderr does not name B: $stderr"
	[ "$(state "$(W a)")" = free ] || fail "A is locked: $(wsl inspect "$(W a)")"
	[ "$(ls "$WSLOCK_DIR/locks" | wc -l)" = 1 ] || fail "locks: $(ls "$WSLOCK_DIR/locks")"
	# acquire too: nothing of the set is left.
	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W a)" "$(W b)"
	jq -e '.error.code == "WSLOCK_BUSY"' <<<"$output" >/dev/null || fail "output: $output"
	[ "$(state "$(W a)")" = free ]
	unhold
	run -0 wsl run -n "$(W a)" "$(W b)" -- true
	[ "$(state "$(W a)")" = free ] && [ "$(state "$(W b)")" = free ]
}

@test "the command sees WSLOCK_WORKSPACES, WSLOCK_OWNERS and the first as WSLOCK_WORKSPACE/WSLOCK_OWNER" {
	mkws a b c
	run -0 --separate-stderr wsl run "$(W a)" "$(W b)" "$(W c)" -- sh -c '
		printf "%s\n" "$WSLOCK_WORKSPACES" >"$1/wss"
		printf "%s" "$WSLOCK_OWNERS" >"$1/owners"
		printf "%s" "$WSLOCK_OWNER" >"$1/owner"
		printf "%s\n%s\n" "$WSLOCK_WORKSPACE" "$WSLOCK_TOKEN" >"$1/first"
		for f in /proc/self/fd/*; do readlink "$f" || :; done >"$1/fds"
		' sh "$BATS_TEST_TMPDIR"
	local a b c
	a=$(canon "$(W a)") b=$(canon "$(W b)") c=$(canon "$(W c)")
	[ "$(cat "$BATS_TEST_TMPDIR/wss")" = "$(printf '%s\n' "$a" "$b" "$c")" ]
	local o=$BATS_TEST_TMPDIR/owners
	jq -e --arg a "$a" --arg b "$b" --arg c "$c" \
		'length == 3 and [.[].workspace_root] == [$a, $b, $c] and
		 ([.[].token] | unique | length) == 1 and ([.[].operation_id] | unique | length) == 1' \
		"$o" >/dev/null || fail "WSLOCK_OWNERS: $(cat "$o")"
	[ "$(jq -c '.[0]' "$o")" = "$(jq -c . "$BATS_TEST_TMPDIR/owner")" ]
	[ "$(sed -n 1p "$BATS_TEST_TMPDIR/first")" = "$a" ]
	[ "$(sed -n 2p "$BATS_TEST_TMPDIR/first")" = "$(jq -r '.[0].token' "$o")" ]
	# It inherited the live file of every lock.
	[ "$(grep -c '/locks/[0-9a-f]*/live$' "$BATS_TEST_TMPDIR/fds")" = 3 ] ||
		fail "fds: $(cat "$BATS_TEST_TMPDIR/fds")"
	# A run of one workspace sets them too (one line, one owner).
	run -0 wsl run "$(W a)" -- sh -c 'printf "%s|" "$WSLOCK_WORKSPACES"; printf "%s" "$WSLOCK_OWNERS" | jq -r length'
	[ "$output" = "$a|1" ]
	[ "$(ls "$WSLOCK_DIR/locks" | wc -l)" = 0 ]
}

@test "acquire A B prints one owner each with one token; release --token T A B releases all, a wrong token none" {
	mkws a b
	OWNER=$(wsl acquire --pid $$ "$(W a)" "$(W b)") || fail "acquire: $OWNER"
	local a b t
	a=$(canon "$(W a)") b=$(canon "$(W b)")
	jq -e --arg a "$a" --arg b "$b" '[.owners[].workspace_root] == [$a, $b] and
		.owners[0].token == .owners[1].token and .owners[0].operation_id == .owners[1].operation_id and
		.owners[0].kind == "wslock-owner"' <<<"$OWNER" >/dev/null || fail "owners: $OWNER"
	t=$(jq -r '.owners[0].token' <<<"$OWNER")
	run -0 wsl inspect "$(W a)" "$(W b)"
	jq -e '[.workspaces[].state] == ["held", "held"] and [.workspaces[].liveness] == ["live", "live"]' \
		<<<"$output" >/dev/null || fail "inspect: $output"
	run -0 wsl inspect --owner "$(W a)" "$(W b)"
	[ "$(jq -c .owners <<<"$output")" = "$(jq -c .owners <<<"$OWNER")" ]
	run -0 wsl inspect --operation-id "$(jq -r '.owners[0].operation_id' <<<"$OWNER")"
	jq -e '.locks | length == 2' <<<"$output" >/dev/null
	run -75 wsl inspect --exit-status -q "$(W a)" "$(W b)"
	# A wrong token on one of them: nothing released.
	mkws c
	acquire_as $$ "$(W c)"
	local tc
	tc=$(jq -r .token <<<"$OWNER")
	run -78 --separate-stderr wsl release --token "$tc" "$(W a)" "$(W c)"
	[ "$(state "$(W a)")" = held ] && [ "$(state "$(W c)")" = held ]
	run -0 --separate-stderr wsl release --token "$t" "$(W a)" "$(W b)"
	jq -e --arg a "$a" --arg b "$b" '[.releases[].action] == ["released", "released"] and
		[.releases[].workspace_root] == [$a, $b]' <<<"$output" >/dev/null || fail "release: $output"
	[ "$(state "$(W a)")" = free ] && [ "$(state "$(W b)")" = free ]
	run -0 wsl inspect --exit-status -q "$(W a)" "$(W b)"
	run -75 wsl inspect --exit-status -q "$(W a)" "$(W c)"
}

@test "overlapping workspaces are a usage error: the same twice, one inside the other, a bind-mount alias" {
	mkws a/sub b alias
	run -64 --separate-stderr wsl run "$(W a)" "$(W a)/" -- echo SHOULD-NOT-RUN
	[[ $stderr == *"named twice"*WSLOCK_USAGE* ]] || fail "stderr: $stderr"
	run -64 --separate-stderr wsl run "$(W b)" "$(W a)/sub" "$(W a)" -- echo SHOULD-NOT-RUN
	[[ $stderr == *"overlap (one lies inside the other); lock only the outer one, which covers both"*WSLOCK_USAGE* ]] ||
		fail "stderr: $stderr"
	run -64 --separate-stderr wsl acquire --pid $$ "$(W a)/sub" "$(W a)"
	jq -e '.error.code == "WSLOCK_USAGE"' <<<"$output" >/dev/null
	[ "$(ls "$WSLOCK_DIR/locks" 2>/dev/null | wc -l)" = 0 ]
	unshare -m sh -c 'mount -t tmpfs none /mnt' 2>/dev/null ||
		skip "cannot create a mount namespace and mount here (no CAP_SYS_ADMIN)"
	run -64 timeout -k 5 30 unshare -m --propagation private sh -c '
		mount --bind "$1" "$2" || exit 1
		"$3" run "$2/sub" "$4" "$1" -- echo SHOULD-NOT-RUN
		' sh "$(canon "$(W a)")" "$(canon "$(W alias)")" "$WSLOCK" "$(W b)"
	[[ $output == *"bind mount"*WSLOCK_USAGE* ]] || fail "output: $output"
	# One sentence: one reason, not two parentheticals in a row.
	[[ $output != *") ("* ]] || fail "output: $output"
	[[ $output == *"overlap (through a mount: one is mounted inside the other, or a bind mount makes both paths of one directory); lock only one of them, which covers both"* ]] ||
		fail "output: $output"
	[[ $output != *SHOULD-NOT-RUN* ]]
}

@test "two jobs locking A B and B A (and A B C and C A) 50 times each never deadlock and never overlap" {
	mkws a b c
	local a b c
	a=$(canon "$(W a)") b=$(canon "$(W b)") c=$(canon "$(W c)")
	# The command marks every workspace it holds with mkdir (atomic): a
	# mark already there is an overlap. -w 60 bounds every wait: a
	# deadlock would show as a timeout (75), not hang the suite.
	cat >"$BATS_TEST_TMPDIR/job" <<'EOF'
#!/bin/sh
out=$1 n=$2
shift 2
i=0
while [ "$i" -lt "$n" ]; do
	"$WSLOCK" run -q -w 60 "$@" -- sh -c '
		out=$1; shift
		for d; do mkdir "$d/.held" 2>/dev/null || echo "overlap on $d" >>"$out.violations"; done
		for d; do rmdir "$d/.held" 2>/dev/null; done' sh "$out" "$@" || echo "run exited $?" >>"$out.failures"
	i=$((i + 1))
done
echo done >>"$out.done"
EOF
	chmod +x "$BATS_TEST_TMPDIR/job"
	local o=$BATS_TEST_TMPDIR/j p1 p2 p3 p4
	WSLOCK=$WSLOCK "$BATS_TEST_TMPDIR/job" "$o" 50 "$a" "$b" </dev/null >/dev/null 2>&1 3>&- &
	p1=$!
	WSLOCK=$WSLOCK "$BATS_TEST_TMPDIR/job" "$o" 50 "$b" "$a" </dev/null >/dev/null 2>&1 3>&- &
	p2=$!
	WSLOCK=$WSLOCK "$BATS_TEST_TMPDIR/job" "$o" 50 "$a" "$b" "$c" </dev/null >/dev/null 2>&1 3>&- &
	p3=$!
	WSLOCK=$WSLOCK "$BATS_TEST_TMPDIR/job" "$o" 50 "$c" "$a" </dev/null >/dev/null 2>&1 3>&- &
	p4=$!
	local p
	for p in $p1 $p2 $p3 $p4; do track_pid "$p"; done
	for p in $p1 $p2 $p3 $p4; do
		wait_exit "$p" 600 || fail "job $p did not finish"
	done
	[ ! -e "$o.violations" ] || fail "overlaps: $(sort "$o.violations" | uniq -c)"
	[ ! -e "$o.failures" ] || fail "runs failed: $(sort "$o.failures" | uniq -c)"
	[ "$(wc -l <"$o.done")" = 4 ]
	[ "$(ls "$WSLOCK_DIR/locks" | wc -l)" = 0 ]
	[ "$(ls "$WSLOCK_DIR/queue" | wc -l)" = 0 ]
}

@test "a waiter for A B queued before a later waiter for A gets A first, although A was free" {
	mkws a b
	hold "$(W b)"
	waiter ab "$(W a)" "$(W b)"
	local pab=$WAITER_PID
	# One entry names both workspaces.
	local entry
	entry=$(compgen -G "$WSLOCK_DIR/queue/*.$pab.*")
	tr '\0' '\n' <"$entry" | grep -qx "$(canon "$(W a)")" && tr '\0' '\n' <"$entry" | grep -qx "$(canon "$(W b)")" ||
		fail "entry: $(tr '\0' ' ' <"$entry")"
	[ "$(state "$(W a)")" = free ]
	waiter a "$(W a)"
	local pa=$WAITER_PID
	# No barging: A is free, but the A B waiter arrived first.
	run -75 --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
	[[ $stderr == *"queue"* ]] || fail "stderr: $stderr"
	is_running "$pa" || fail "the later A waiter did not wait: $(cat "$BATS_TEST_TMPDIR/a.err")"
	unhold
	wait_exit "$pab" 30 && [ "$WAIT_STATUS" = 0 ]
	wait_exit "$pa" 30 && [ "$WAIT_STATUS" = 0 ]
	run cat "$BATS_TEST_TMPDIR/order"
	[ "$output" = "$(printf 'ab\na')" ]
	[ "$(ls "$WSLOCK_DIR/queue" | wc -l)" = 0 ]
}

@test "kill -9 of a run of A B: both locks stay live while the command runs, then need recovery" {
	mkws a b
	hold "$(W a)" "$(W b)"
	wsl_kill_reap "$HOLD_PID"
	# The command keeps every live file it inherited.
	is_running "$HOLD_CHILD"
	[ "$(liveness "$(W a)")" = live ] && [ "$(liveness "$(W b)")" = live ]
	run -75 wsl run -n "$(W b)" -- true
	touch "$HOLD_DIR/GO"
	wait_for "! is_running $HOLD_CHILD" 20
	[ "$(state "$(W a)")" = held ] && [ "$(liveness "$(W a)")" = dead ]
	[ "$(state "$(W b)")" = held ] && [ "$(liveness "$(W b)")" = dead ]
	run -69 --separate-stderr wsl run -n "$(W a)" "$(W b)" -- echo SHOULD-NOT-RUN
	[[ $stderr == *WSLOCK_RECOVERY_REQUIRED* ]] || fail "stderr: $stderr"
	# --reclaim-dead applies to every workspace of the set.
	run -0 --separate-stderr wsl run --reclaim-dead -n "$(W b)" "$(W a)" -- echo ran
	[ "$output" = ran ]
	[ "$(ls "$WSLOCK_DIR/locks" | wc -l)" = 0 ]
}

@test "a crash between publishing A and B leaves A held by a dead owner and B free" {
	local T=$BATS_TEST_DIRNAME/../wslock-test
	[ -x "$T" ] || fail "$T is not built (make test-build)"
	mkws a b
	run -137 env WSLOCK_CRASH_AT=multi:published-one "$T" run "$(W a)" "$(W b)" -- echo SHOULD-NOT-RUN
	[[ $output != *SHOULD-NOT-RUN* ]]
	[ "$(state "$(W a)")" = held ] && [ "$(liveness "$(W a)")" = dead ]
	[ "$(state "$(W b)")" = free ]
	run -69 wsl run -n "$(W a)" "$(W b)" -- true
	run -0 wsl run -n "$(W b)" -- true
	# The exact recover the crash promise offers, then the set again.
	wsl inspect --owner "$(W a)" >"$BATS_TEST_TMPDIR/owner.json"
	run -0 wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	run -0 wsl run -n "$(W a)" "$(W b)" -- true
	[ "$(ls "$WSLOCK_DIR/locks" | wc -l)" = 0 ]
}

@test "nesting: run A inside run A B nests; run B A/sub inside run A B nests; run A B inside run A is refused" {
	mkws a/sub b
	local a b
	a=$(canon "$(W a)") b=$(canon "$(W b)")
	run -0 --separate-stderr wsl run "$(W a)" "$(W b)" -- "$WSLOCK" run -n "$(W a)" -- sh -c 'printf "%s" "$WSLOCK_WORKSPACE"'
	[ "$output" = "$a" ]
	# Every workspace held around it: it nests, by the rules of one each.
	run -0 --separate-stderr wsl run "$(W a)" "$(W b)" -- "$WSLOCK" run -n "$(W b)" "$(W a)/sub" -- sh -c '
		printf "%s|" "$WSLOCK_WORKSPACES"; printf "%s" "$WSLOCK_OWNERS" | jq -r "[.[].workspace_root] | join(\",\")"'
	[ "$output" = "$(printf '%s\n%s|%s,%s' "$b" "$a/sub" "$b" "$a")" ] || fail "output: $output"
	# Only some held around it: refused, nothing locked anew.
	run -64 --separate-stderr wsl run "$(W a)" -- "$WSLOCK" run -n "$(W b)" "$(W a)" -- echo SHOULD-NOT-RUN
	[[ $stderr == *"not every workspace"*WSLOCK_USAGE* ]] || fail "stderr: $stderr"
	[[ $output != *SHOULD-NOT-RUN* ]]
	[ "$(ls "$WSLOCK_DIR/locks" | wc -l)" = 0 ]
}

@test "the outer run of A B waits for a run of B A nested under it before it lets go" {
	mkws a b
	local T=$BATS_TEST_TMPDIR
	# The outer's command exits once the nested run holds (a nested run
	# still starting when the outer lets go takes the normal path).
	"$WSLOCK" run "$(W a)" "$(W b)" -- sh -c '
		"$0" run -n "$2" "$1" -- sh -c "touch \"$3/started\"; while [ ! -e \"$3/go\" ]; do sleep 0.05; done" \
			</dev/null >/dev/null 2>"$3/nested.err" &
		p=$!
		while kill -0 "$p" 2>/dev/null && [ ! -e "$3/started" ]; do sleep 0.05; done
		exit 0' "$WSLOCK" "$(W a)" "$(W b)" "$T" </dev/null >/dev/null 2>"$T/outer.err" 3>&- &
	local outer=$!
	track_pid "$outer"
	wait_for "[ -e '$T/started' ] || ! is_running $outer" 20
	[ -e "$T/started" ] || fail "the nested run did not start: $(cat "$T/nested.err" "$T/outer.err")"
	# The outer's command has exited; it still holds both for the nested run.
	wait_for "grep -q 'waiting for the wslock runs nested' '$T/outer.err'" 20 ||
		fail "the outer did not wait: $(cat "$T/outer.err")"
	is_running "$outer"
	[ "$(state "$(W a)")" = held ] && [ "$(state "$(W b)")" = held ]
	touch "$T/go"
	wait_exit "$outer" 30 && [ "$WAIT_STATUS" = 0 ]
	[ "$(state "$(W a)")" = free ] && [ "$(state "$(W b)")" = free ]
}

@test "several workspaces with --shared on the etcd backend are a usage error, before any request" {
	mkws a b
	# Port 9 (discard): nothing answers; the refusal comes first.
	# (Several at once on etcd: tests/etcd_multi.bats.)
	run -64 --separate-stderr wsl --backend etcd --etcd-endpoints http://127.0.0.1:9 \
		run --shared "$(W a)" "$(W b)" -- echo SHOULD-NOT-RUN
	[[ $stderr == *"--shared"*WSLOCK_USAGE* ]] || fail "stderr: $stderr"
	run -64 --separate-stderr wsl --backend etcd --etcd-endpoints http://127.0.0.1:9 \
		acquire --shared --pid $$ "$(W a)" "$(W b)"
	jq -e '.error.code == "WSLOCK_USAGE"' <<<"$output" >/dev/null || fail "output: $output"
}
