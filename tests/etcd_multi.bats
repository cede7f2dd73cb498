#!/usr/bin/env bats
# Several workspaces at once on etcd (DESIGN.md sections 2 and 5b;
# src/registry_etcd_multi.c): run/acquire/release/inspect A B C, all or
# nothing in one transaction, a waiter's queue keys put in one
# transaction (one revision: one global order across queues), so jobs
# naming the same workspaces in different orders never deadlock; the
# child's environment; one release transaction; what a kill -9 leaves.
# The same behaviour and JSON as tests/multi.bats on the local backend.
# A real etcd on loopback (one member for the file); skipped without etcd
# and etcdctl. Every wait is bounded and waits on a condition.

load helpers

setup_file() {
	etcd_setup_file
}

teardown_file() {
	etcd_teardown_file
}

local_setup() {
	etcd_use m
}


# keys KIND: how many keys of KIND (lock, live, lease, queue, retained)
# the test's prefix holds.
keys() {
	ectl get --prefix "${WSLOCK_ETCD_PREFIX}$1/" --keys-only -w json | jq -r '.count // 0'
}

state() { wsl inspect "$1" | jq -r .state; }
liveness() { wsl inspect "$1" | jq -r .liveness; }

# waiter NAME WS...: a background `wslock run -w 60 WS...` whose command
# appends NAME to $BATS_TEST_TMPDIR/order; returns once its queue keys are
# in etcd. Sets WAITER_PID.
waiter() {
	local name=$1 before
	shift
	before=$(keys queue)
	"$WSLOCK" run -w 60 --lease-ttl 2 "$@" -- sh -c 'echo "$1" >>"$2/order"' sh "$name" "$BATS_TEST_TMPDIR" \
		</dev/null >"$BATS_TEST_TMPDIR/$name.out" 2>"$BATS_TEST_TMPDIR/$name.err" 3>&- &
	WAITER_PID=$!
	track_pid "$WAITER_PID"
	wait_for "[ \"\$(keys queue)\" -gt $before ] || ! is_running $WAITER_PID" 20 ||
		fail "waiter $name never queued: $(cat "$BATS_TEST_TMPDIR/$name.err")"
	is_running "$WAITER_PID" || fail "waiter $name ended: $(cat "$BATS_TEST_TMPDIR/$name.err")"
}

@test "etcd multi: run -n A B while B is held takes neither; a waiter for A B leaves A free, queued in both queues at one revision, and gets both" {
	mkws a b
	hold "$(W b)"
	run -75 --separate-stderr wsl run -n "$(W a)" "$(W b)" -- echo SHOULD-NOT-RUN
	[[ $output != *SHOULD-NOT-RUN* ]] || fail "the command ran: $output"
	[[ $stderr == *"$(canon "$(W b)")"*"WSLOCK_BUSY"* ]] || fail "stderr does not name B: $stderr"
	[ "$(state "$(W a)")" = free ] || fail "A is locked: $(wsl inspect "$(W a)")"
	[ "$(keys lock)" = 1 ] && [ "$(keys queue)" = 0 ]
	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W a)" "$(W b)"
	jq -e '.error.code == "WSLOCK_BUSY"' <<<"$output" >/dev/null || fail "output: $output"
	[ "$(state "$(W a)")" = free ]
	# A waiter: one queue key in each queue, both of one transaction.
	waiter ab "$(W a)" "$(W b)"
	local pab=$WAITER_PID
	[ "$(keys queue)" = 2 ]
	ectl get --prefix "${WSLOCK_ETCD_PREFIX}queue/" -w json |
		jq -e '[.kvs[].create_revision] | length == 2 and (unique | length) == 1' >/dev/null ||
		fail "queue keys: $(ectl get --prefix "${WSLOCK_ETCD_PREFIX}queue/" --keys-only)"
	[ "$(state "$(W a)")" = free ]
	# No barging: A is free, but the A B waiter came first.
	run -75 --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
	[[ $stderr == *"locked by pid $pab "*WSLOCK_BUSY* ]] || fail "stderr: $stderr"
	unhold
	wait_exit "$pab" 30 || fail "the waiter did not finish"
	[ "$WAIT_STATUS" = 0 ] || fail "waiter: $WAIT_STATUS $(cat "$BATS_TEST_TMPDIR/ab.err")"
	[ "$(cat "$BATS_TEST_TMPDIR/order")" = ab ]
	[ "$(keys lock)" = 0 ] && [ "$(keys queue)" = 0 ] && [ "$(keys live)" = 0 ] && [ "$(keys lease)" = 0 ]
}

@test "etcd multi: the command sees WSLOCK_WORKSPACES, WSLOCK_OWNERS, the first as WSLOCK_WORKSPACE/WSLOCK_OWNER, and one fence for all" {
	mkws a b c
	run -0 --separate-stderr wsl run "$(W a)" "$(W b)" "$(W c)" -- sh -c '
		printf "%s\n" "$WSLOCK_WORKSPACES" >"$1/wss"
		printf "%s" "$WSLOCK_OWNERS" >"$1/owners"
		printf "%s" "$WSLOCK_OWNER" >"$1/owner"
		printf "%s\n%s\n%s\n" "$WSLOCK_WORKSPACE" "$WSLOCK_TOKEN" "$WSLOCK_FENCE" >"$1/first"
		etcdctl --endpoints="$2" get --prefix "${WSLOCK_ETCD_PREFIX}lock/" -w json >"$1/locks"
		' sh "$BATS_TEST_TMPDIR" "$WSL_ETCD_EP"
	local a b c o=$BATS_TEST_TMPDIR/owners
	a=$(canon "$(W a)") b=$(canon "$(W b)") c=$(canon "$(W c)")
	[ "$(cat "$BATS_TEST_TMPDIR/wss")" = "$(printf '%s\n' "$a" "$b" "$c")" ]
	jq -e --arg a "$a" --arg b "$b" --arg c "$c" \
		'length == 3 and [.[].workspace_root] == [$a, $b, $c] and
		 ([.[].token] | unique | length) == 1 and ([.[].operation_id] | unique | length) == 1' \
		"$o" >/dev/null || fail "WSLOCK_OWNERS: $(cat "$o")"
	[ "$(jq -c '.[0]' "$o")" = "$(jq -c . "$BATS_TEST_TMPDIR/owner")" ]
	[ "$(sed -n 1p "$BATS_TEST_TMPDIR/first")" = "$a" ]
	[ "$(sed -n 2p "$BATS_TEST_TMPDIR/first")" = "$(jq -r '.[0].token' "$o")" ]
	# One transaction: every lock key was created at the fence.
	local fence
	fence=$(sed -n 3p "$BATS_TEST_TMPDIR/first")
	jq -e --argjson f "$fence" '.count == 3 and ([.kvs[].create_revision] | unique) == [$f]' \
		"$BATS_TEST_TMPDIR/locks" >/dev/null || fail "fence $fence, locks: $(cat "$BATS_TEST_TMPDIR/locks")"
	# Each lock key held its own workspace's owner document.
	jq -e --arg a "$a" --arg b "$b" --arg c "$c" \
		'[.kvs[] | (.key | @base64d | sub("^.*/lock"; "")) == (.value | @base64d | fromjson | .workspace_root)] == [true, true, true] and
		 ([.kvs[].value | @base64d | fromjson | .workspace_root] | sort) == ([$a, $b, $c] | sort)' \
		"$BATS_TEST_TMPDIR/locks" >/dev/null || fail "locks: $(cat "$BATS_TEST_TMPDIR/locks")"
	[ "$(keys lock)" = 0 ] && [ "$(keys live)" = 0 ]
}

@test "etcd multi: acquire A B prints one owner each with one token and a fence; release --token T A B releases both in one go, a wrong token none" {
	mkws a b c
	start_sleeper
	local a b t
	a=$(canon "$(W a)") b=$(canon "$(W b)")
	OWNER=$(wsl acquire --pid "$SLEEPER_PID" "$(W a)" "$(W b)") || fail "acquire: $OWNER"
	jq -e --arg a "$a" --arg b "$b" '[.owners[].workspace_root] == [$a, $b] and
		.owners[0].token == .owners[1].token and .owners[0].operation_id == .owners[1].operation_id and
		.owners[0].kind == "wslock-owner" and (.fence | type) == "number"' <<<"$OWNER" >/dev/null ||
		fail "owners: $OWNER"
	t=$(jq -r '.owners[0].token' <<<"$OWNER")
	pgrep -f -- "acquire --pid $SLEEPER_PID $(W a) $(W b)" >/dev/null ||
		fail "no keeper: $(pgrep -af -- "--pid $SLEEPER_PID")"
	run -0 wsl inspect "$(W a)" "$(W b)"
	jq -e '[.workspaces[].state] == ["held", "held"] and [.workspaces[].liveness] == ["live", "live"]' \
		<<<"$output" >/dev/null || fail "inspect: $output"
	run -0 wsl inspect --owner "$(W a)" "$(W b)"
	[ "$(jq -c .owners <<<"$output")" = "$(jq -c .owners <<<"$OWNER")" ]
	run -75 wsl inspect --exit-status -q "$(W a)" "$(W b)"
	# One lease for both live keys, kept by one keeper.
	[ "$(ectl get --prefix "${WSLOCK_ETCD_PREFIX}live/" -w json | grep -o '"lease":[0-9]*' | sort -u | wc -l)" = 1 ]
	# A wrong token on one of them: nothing released.
	local tc
	tc=$(wsl acquire --pid "$SLEEPER_PID" "$(W c)" | jq -r .token)
	run -78 --separate-stderr wsl release --token "$tc" "$(W a)" "$(W c)"
	[ "$(state "$(W a)")" = held ] && [ "$(state "$(W c)")" = held ]
	run -0 --separate-stderr wsl release --token "$t" "$(W a)" "$(W b)"
	jq -e --arg a "$a" --arg b "$b" '[.releases[].action] == ["released", "released"] and
		[.releases[].workspace_root] == [$a, $b] and .releases[0].owner.token == .releases[1].owner.token' \
		<<<"$output" >/dev/null || fail "release: $output"
	[ "$(state "$(W a)")" = free ] && [ "$(state "$(W b)")" = free ]
	# the set's one keeper is gone with it (release pokes it)
	wait_for "! pgrep -f -- 'acquire --pid $SLEEPER_PID $(W a) $(W b)' >/dev/null" 10 ||
		fail "the keeper of A B still runs: $(pgrep -af -- "--pid $SLEEPER_PID")"
	run -0 wsl inspect --exit-status -q "$(W a)" "$(W b)"
	run -75 wsl inspect --exit-status -q "$(W a)" "$(W c)"
	run -0 wsl release --token "$tc" "$(W c)"
	[ "$(keys lock)" = 0 ] && [ "$(keys live)" = 0 ] && [ "$(keys lease)" = 0 ]
	wsl_kill_reap "$SLEEPER_PID"
}

@test "etcd multi: overlapping workspaces are a usage error, and so are more compares than one transaction holds" {
	mkws a/sub b
	run -64 --separate-stderr wsl run "$(W a)" "$(W a)/" -- echo SHOULD-NOT-RUN
	[[ $stderr == *"named twice"*WSLOCK_USAGE* ]] || fail "stderr: $stderr"
	run -64 --separate-stderr wsl run "$(W b)" "$(W a)/sub" "$(W a)" -- echo SHOULD-NOT-RUN
	[[ $stderr == *"overlap (one lies inside the other); lock only the outer one, which covers both"*WSLOCK_USAGE* ]] ||
		fail "stderr: $stderr"
	run -64 --separate-stderr wsl acquire --pid $$ "$(W a)/sub" "$(W a)"
	jq -e '.error.code == "WSLOCK_USAGE"' <<<"$output" >/dev/null
	[ "$(keys lock)" = 0 ]
	# 16 workspaces 4 levels below a common parent: their lock compares
	# fit, their queue compares do not (one "nobody queued" instead).
	local i wss=() deep=()
	for i in $(seq 1 16); do
		mkws "m$i/x/y/z" "d$i/1/2/3/4/5/6/7"
		wss+=("$(W "m$i/x/y/z")")
		deep+=("$(W "d$i/1/2/3/4/5/6/7")")
	done
	run -0 --separate-stderr wsl run -n "${wss[@]}" -- sh -c 'printf "%s\n" "$WSLOCK_WORKSPACES" | wc -l'
	[ "$output" = 16 ] || fail "output: $output $stderr"
	# Deeper, they do not fit: refused, nothing locked.
	run -64 --separate-stderr wsl run -n "${deep[@]}" -- echo SHOULD-NOT-RUN
	[[ $stderr == *"compares in one etcd transaction"*"128"*WSLOCK_USAGE* ]] || fail "stderr: $stderr"
	[ "$(keys lock)" = 0 ]
	run -64 --separate-stderr wsl run -n "${wss[@]}" "$(W b)" -- true
	[[ $stderr == *"at most 16"* ]] || fail "stderr: $stderr"
}

@test "etcd multi: two jobs locking A B and B A (and A B C and C A) 30 times each never deadlock and never overlap" {
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
	local o=$BATS_TEST_TMPDIR/j p pids=()
	for p in "$a $b" "$b $a" "$a $b $c" "$c $a"; do
		# shellcheck disable=SC2086
		WSLOCK=$WSLOCK "$BATS_TEST_TMPDIR/job" "$o" 30 $p </dev/null >/dev/null 2>&1 3>&- &
		pids+=($!)
		track_pid "$!"
	done
	for p in "${pids[@]}"; do
		wait_exit "$p" 300 || fail "job $p did not finish"
	done
	[ ! -e "$o.violations" ] || fail "overlaps: $(sort "$o.violations" | uniq -c)"
	[ ! -e "$o.failures" ] || fail "runs failed: $(sort "$o.failures" | uniq -c)"
	[ "$(wc -l <"$o.done")" = 4 ]
	[ "$(keys lock)" = 0 ] && [ "$(keys queue)" = 0 ]
}

@test "etcd multi: kill -9 of a run of A B: both stay live while the command runs, then both need recovery" {
	mkws a b
	hold --lease-ttl 2 "$(W a)" "$(W b)"
	wsl_kill_reap "$HOLD_PID"
	# The keeper goes on renewing the one lease while the command runs.
	is_running "$HOLD_CHILD"
	[ "$(liveness "$(W a)")" = live ] && [ "$(liveness "$(W b)")" = live ]
	run -75 wsl run -n "$(W b)" -- true
	touch "$HOLD_DIR/GO"
	wait_for "! is_running $HOLD_CHILD" 20 || fail "the command did not end"
	# Left behind, dead once the lease (2 s + 2 s lock-delay) has gone.
	wait_for "[ \"\$(liveness '$(W a)')\" = dead ] && [ \"\$(liveness '$(W b)')\" = dead ]" 30 ||
		fail "not dead: $(wsl inspect "$(W a)" "$(W b)")"
	[ "$(state "$(W a)")" = held ] && [ "$(state "$(W b)")" = held ]
	run -69 --separate-stderr wsl run -n "$(W a)" "$(W b)" -- echo SHOULD-NOT-RUN
	[[ $stderr == *WSLOCK_RECOVERY_REQUIRED* ]] || fail "stderr: $stderr"
	run -69 --separate-stderr wsl run -n "$(W b)" -- true
	# Recovery of one workspace is its own; --reclaim-dead covers the set.
	wsl inspect --owner "$(W a)" >"$BATS_TEST_TMPDIR/owner.json"
	run -0 wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	[ "$(state "$(W a)")" = free ] && [ "$(state "$(W b)")" = held ]
	run -0 --separate-stderr wsl run --reclaim-dead -n "$(W b)" "$(W a)" -- echo ran
	[ "$output" = ran ] || fail "output: $output $stderr"
	[ "$(keys lock)" = 0 ]
}

@test "etcd multi: deleting one lock of a running set stops the command (78)" {
	mkws a b
	hold --lease-ttl 3 "$(W a)" "$(W b)"
	ectl del "${WSLOCK_ETCD_PREFIX}lock$(canon "$(W b)")" >/dev/null
	wait_exit "$HOLD_PID" 30 || fail "the run did not end"
	[ "$WAIT_STATUS" = 78 ] || fail "status $WAIT_STATUS: $(cat "$HOLD_DIR/err")"
	grep -q "$(canon "$(W b)")" "$HOLD_DIR/err" || fail "err: $(cat "$HOLD_DIR/err")"
	# stopped at once (SIGKILL: a lost lock gives no grace)
	wait_for "! is_running $HOLD_CHILD" 10 || fail "the command was not stopped"
}

@test "etcd multi: run --retain-on-failure A B of a failing command leaves both retained with its status, recovered one by one" {
	mkws a b
	run -3 --separate-stderr wsl run --retain-on-failure "$(W a)" "$(W b)" -- sh -c 'exit 3'
	local ws
	for ws in "$(W a)" "$(W b)"; do
		run -0 wsl inspect "$ws"
		jq -e '.state == "retained" and (.retained.exit_status == 3)' <<<"$output" >/dev/null ||
			fail "$ws: $output"
	done
	[ "$(keys retained)" = 2 ] && [ "$(keys live)" = 0 ]
	run -69 --separate-stderr wsl run -n "$(W b)" "$(W a)" -- echo SHOULD-NOT-RUN
	[[ $stderr == *WSLOCK_RECOVERY_REQUIRED* ]] || fail "stderr: $stderr"
	for ws in "$(W a)" "$(W b)"; do
		wsl inspect --owner "$ws" >"$BATS_TEST_TMPDIR/owner.json"
		run -0 wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$ws"
	done
	[ "$(keys lock)" = 0 ] && [ "$(keys retained)" = 0 ]
}
