#!/usr/bin/env bats
# Waiting on etcd (DESIGN §5b): FIFO through queue keys, each bound to its
# waiter's own lease and renewed while it waits; the holder's watch on
# its own keys; and the requests of an uncontended run. A real etcd on loopback (one member for the file); skipped
# without etcd and etcdctl.
#
# Arrival order is made known by starting a waiter only once the queue key
# of the one before it is visible in etcd; every wait is bounded and waits
# on a condition.

load helpers

setup_file() {
	etcd_setup_file
}

teardown_file() {
	etcd_teardown_file
}

local_setup() {
	etcd_use q
}


# queued [WS]: how many queue keys etcd holds (for WS and every workspace
# below it; without WS: all of the prefix).
queued() {
	local p="${WSLOCK_ETCD_PREFIX}queue"
	[ $# -eq 0 ] || p="$p$(canon "$1")/"
	ectl get --prefix "$p" --keys-only -w json | jq -r '.count // 0'
}

# waiter NAME WS [OPTS...]: a background `wslock run -w 60 WS` whose
# command appends NAME to $BATS_TEST_TMPDIR/order; returns once its queue
# key is in etcd (one more than before). Sets WAITER (its pid).
waiter() {
	local name=$1 ws=$2 before
	shift 2
	before=$(queued)
	"$WSLOCK" run -w 60 --lease-ttl 2 "$@" "$ws" -- \
		sh -c 'echo "$1" >>"$2/order"' sh "$name" "$BATS_TEST_TMPDIR" \
		</dev/null >"$BATS_TEST_TMPDIR/$name.out" 2>"$BATS_TEST_TMPDIR/$name.err" 3>&- &
	WAITER=$!
	track_pid "$WAITER"
	eval "PID_$name=\$WAITER"
	wait_for "[ \"\$(queued)\" -gt $before ] || ! is_running $WAITER" 20 ||
		fail "waiter $name never queued: $(cat "$BATS_TEST_TMPDIR/$name.err")"
	is_running "$WAITER" || fail "waiter $name ended: $(cat "$BATS_TEST_TMPDIR/$name.err")"
}

order() { tr '\n' ' ' <"$BATS_TEST_TMPDIR/order"; }

@test "etcd queue: a wait three times longer than the lease TTL ends with the lock" {
	mkws a
	local start
	hold --lease-ttl 2 "$(W a)"
	waiter w1 "$(W a)"
	start=$SECONDS
	# The waiter's lease (TTL 2 s + lock-delay 2 s) would have expired
	# twice over: its queue key is still there, so it was renewed.
	wait_for "[ \$((SECONDS - start)) -ge 6 ]" 10
	is_running "$PID_w1"
	[ "$(queued "$(W a)")" -eq 1 ]
	unhold
	[ "$WAIT_STATUS" -eq 0 ]
	wait_exit "$PID_w1" 30
	[ "$WAIT_STATUS" -eq 0 ] || fail "waiter: $WAIT_STATUS $(cat "$BATS_TEST_TMPDIR/w1.err")"
	[ "$(order)" = "w1 " ]
	[ "$(queued)" -eq 0 ]
}

@test "etcd queue: waiters get the lock in the order they arrived" {
	mkws a
	local i
	hold --lease-ttl 5 "$(W a)"
	for i in 1 2 3 4 5; do waiter "w$i" "$(W a)"; done
	[ "$(queued "$(W a)")" -eq 5 ]
	unhold
	[ "$WAIT_STATUS" -eq 0 ]
	for i in 1 2 3 4 5; do
		eval "wait_exit \$PID_w$i 60"
		[ "$WAIT_STATUS" -eq 0 ] || fail "w$i: $WAIT_STATUS $(cat "$BATS_TEST_TMPDIR/w$i.err")"
	done
	[ "$(order)" = "w1 w2 w3 w4 w5 " ]
	[ "$(queued)" -eq 0 ]
}

@test "etcd queue: a SIGKILLed waiter in the middle of the queue does not stall the ones behind it" {
	mkws a
	hold --lease-ttl 5 "$(W a)"
	waiter w1 "$(W a)"
	waiter w2 "$(W a)"
	waiter w3 "$(W a)"
	kill -KILL "$PID_w2"
	wait_exit "$PID_w2" 10
	unhold
	wait_exit "$PID_w1" 30
	[ "$WAIT_STATUS" -eq 0 ] || fail "w1: $(cat "$BATS_TEST_TMPDIR/w1.err")"
	# w3 passes w2 once w2's lease has gone one TTL unrenewed
	wait_exit "$PID_w3" 30
	[ "$WAIT_STATUS" -eq 0 ] || fail "w3: $(cat "$BATS_TEST_TMPDIR/w3.err")"
	[ "$(order)" = "w1 w3 " ]
	# and w2's key goes with its lease (TTL + lock-delay, 4 s)
	wait_for '[ "$(queued)" -eq 0 ]' 20
}

@test "etcd queue: the waiters behind a SIGKILLed one move up after one TTL, before its key expires" {
	mkws a
	local killed
	hold --lease-ttl 5 "$(W a)"
	# Waiter leases of TTL 10 + lock-delay 10: w2's key outlives it by
	# up to 20 s; w3 passes it once w2 has not renewed for one TTL.
	waiter w1 "$(W a)" --lease-ttl 10
	waiter w2 "$(W a)" --lease-ttl 10
	waiter w3 "$(W a)" --lease-ttl 10
	kill -KILL "$PID_w2"
	wait_exit "$PID_w2" 10
	killed=$SECONDS
	unhold
	wait_exit "$PID_w1" 30
	[ "$WAIT_STATUS" -eq 0 ] || fail "w1: $(cat "$BATS_TEST_TMPDIR/w1.err")"
	wait_exit "$PID_w3" 30
	[ "$WAIT_STATUS" -eq 0 ] || fail "w3: $(cat "$BATS_TEST_TMPDIR/w3.err")"
	# w2's queue key is still there (its lease has not run out): w3 did
	# not wait for it to go
	[ "$(queued)" -eq 1 ] || fail "w2's key was gone when w3 got the lock ($((SECONDS - killed)) s after the kill)"
	[ "$(order)" = "w1 w3 " ]
	wait_for '[ "$(queued)" -eq 0 ]' 30
}

@test "etcd queue: a waiter that gives up (timeout, signal) leaves the queue at once" {
	mkws a
	hold --lease-ttl 5 "$(W a)"
	run --separate-stderr wsl run -w 1 "$(W a)" -- true
	[ "$status" -eq 75 ]
	[ "$(queued)" -eq 0 ]
	waiter w1 "$(W a)"
	kill -TERM "$PID_w1"
	wait_exit "$PID_w1" 10
	[ "$WAIT_STATUS" -eq 143 ]
	[ "$(queued)" -eq 0 ]
	unhold
	[ ! -e "$BATS_TEST_TMPDIR/order" ]
}

@test "etcd queue: nested workspaces queue together, FIFO among those that overlap; others pass" {
	mkws p/q p/r p2
	local p
	p=$(canon "$(W p)")
	hold --lease-ttl 5 "$p/q"
	# first the ancestor, then a sibling of the held one: it overlaps the
	# waiting ancestor, so it waits behind it although nobody holds p/r
	waiter anc "$p"
	waiter sib "$p/r"
	# an unrelated workspace is not held up by the queue
	run wsl run -n "$(W p2)" -- true
	[ "$status" -eq 0 ]
	# nor is a -n of a workspace the queue does not touch... but one it
	# touches is busy: it would jump the queue
	run --separate-stderr wsl run -n "$p/r" -- true
	[ "$status" -eq 75 ]
	unhold
	wait_exit "$PID_anc" 30
	[ "$WAIT_STATUS" -eq 0 ] || fail "anc: $(cat "$BATS_TEST_TMPDIR/anc.err")"
	wait_exit "$PID_sib" 30
	[ "$WAIT_STATUS" -eq 0 ] || fail "sib: $(cat "$BATS_TEST_TMPDIR/sib.err")"
	[ "$(order)" = "anc sib " ]
	[ "$(queued)" -eq 0 ]
}

@test "etcd queue: a waiting acquire (no lease of its own once held) is queued too" {
	mkws a
	local d=$BATS_TEST_TMPDIR out
	hold --lease-ttl 5 "$(W a)"
	"$WSLOCK" acquire --pid $$ -w 60 "$(W a)" >"$d/acq" 2>"$d/acq.err" 3>&- &
	local p=$!
	track_pid "$p"
	wait_for "[ \"\$(queued)\" -eq 1 ]" 20
	waiter w2 "$(W a)"
	unhold
	wait_exit "$p" 30
	[ "$WAIT_STATUS" -eq 0 ] || fail "acquire: $(cat "$d/acq.err")"
	[ "$(queued)" -eq 1 ]	# w2 waits for the acquired lock
	out=$(wsl release --token "$(jq -r .token "$d/acq")" "$(W a)")
	wait_exit "$PID_w2" 30
	[ "$WAIT_STATUS" -eq 0 ]
	[ "$(order)" = "w2 " ]
	[ "$(queued)" -eq 0 ]
}

@test "etcd watch: deleting the holder's key kills its command (SIGKILL) long before a renewal would notice" {
	mkws a
	# TTL 60: the keeper's renewal (and re-read) comes every ~17 s; the
	# watch must act well before that.
	hold --lease-ttl 60 --kill-after 2 "$(W a)"
	ectl del "${WSLOCK_ETCD_PREFIX}lock$(canon "$(W a)")" >/dev/null
	wait_exit "$HOLD_PID" 10 || fail "the holder still runs 10 s after its key was deleted"
	[ "$WAIT_STATUS" -eq 78 ]
	[ ! -e "$HOLD_DIR/TERMED" ] || fail "the command got SIGTERM after its lock was lost"
	! is_running "$HOLD_CHILD"
	grep -q WSLOCK_OWNERSHIP_LOST "$HOLD_DIR/err"
}

@test "etcd watch: revoking the holder's lease kills its command (SIGKILL) long before a renewal would notice" {
	mkws a
	local lease
	hold --lease-ttl 60 --kill-after 2 "$(W a)"
	lease=$(ectl get "${WSLOCK_ETCD_PREFIX}live$(canon "$(W a)")" -w json | grep -o '"lease":[0-9]*' | cut -d: -f2)
	[ -n "$lease" ]
	ectl lease revoke "$(printf %x "$lease")" >/dev/null
	wait_exit "$HOLD_PID" 10 || fail "the holder still runs 10 s after its lease was revoked"
	[ "$WAIT_STATUS" -eq 78 ]
	[ ! -e "$HOLD_DIR/TERMED" ] || fail "the command got SIGTERM after its lock was lost"
	! is_running "$HOLD_CHILD"
	grep -q WSLOCK_OWNERSHIP_LOST "$HOLD_DIR/err"
}

@test "etcd requests: an uncontended run sends three, however deep its workspace" {
	command -v strace >/dev/null || skip "strace is not installed (apt-get install strace)"
	mkws a/b/c/d/e
	local t=$BATS_TEST_TMPDIR/trace ws n
	for ws in "$(W a)" "$(W a/b/c/d/e)"; do
		# lease grant, acquire txn, release txn: no nesting check (an
		# acquire that succeeds proves that no lock encloses it), no
		# revoke (the release deleted the lease's only key)
		# (LeakSanitizer refuses to run under ptrace: leak checks off)
		ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
			run strace -f -e trace=sendto -s 32 -o "$t" "$WSLOCK" run "$ws" -- true
		[ "$status" -eq 0 ] || fail "exit $status: $output"
		# (a watch of the lock, should the command outlast 200 ms on a
		# loaded machine, is not counted)
		n=$(awk '/POST \/v3\// && !/POST \/v3\/watch/ { n++ } END { print n + 0 }' "$t")
		[ "$n" -eq 3 ] || fail "$n requests for $ws: $(grep -o 'POST /v3/[a-z/]*' "$t" | tr '\n' ' ')"
	done
}

@test "etcd queue: a workspace too deep for the exact queue compares is not held up by an unrelated waiter" {
	mkws x
	local deep
	# deeper than 63 levels: the acquire compares the whole queue
	deep=$(W d)/$(seq -s / 1 64)
	mkdir -p "$deep"
	hold --lease-ttl 5 "$(W x)"
	waiter w1 "$(W x)"
	run --separate-stderr wsl run -n "$deep" -- true
	[ "$status" -eq 0 ] || fail "$stderr"
	unhold
	wait_exit "$PID_w1" 30
	[ "$WAIT_STATUS" -eq 0 ]
}
