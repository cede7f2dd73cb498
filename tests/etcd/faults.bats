#!/usr/bin/env bats
# The etcd backend under faults (DESIGN.md section 5b, issue 13): a real
# etcd on loopback, one TCP proxy per simulated host (proxy.sh) and one
# hostname per host (unshare -u), faults made by SIGSTOP/SIGKILL of a
# proxy (a partition), of wslock, of the etcd member.  Every command under
# the lock is section.sh: it records overlaps (another live process inside
# its section) and writes with its fence to a fenced store
# (fenced_store.sh).  A case passes when there is no overlap, no fence went
# backwards and the store accepted no stale write.  The shared storm runs
# rw_section.sh instead (readers together, a writer alone).
#
# Run with `make check-etcd-faults`.  Every wait is bounded; the whole file
# is meant to stay within a few minutes on a loaded 2-core machine.

HERE=$BATS_TEST_DIRNAME
WSLOCK=${WSLOCK:-$HERE/../../wslock}
# helpers.bash finds its lib.sh beside the test file: load it as if from tests/.
BATS_TEST_DIRNAME=${HERE%/etcd}
load helpers
BATS_TEST_DIRNAME=$HERE
CLUSTER=$HERE/cluster.sh
PROXY=$HERE/proxy.sh
SECTION=$HERE/section.sh
TTL=2			# --lease-ttl of every holder (etcd's minimum)
STORM=${WSLOCK_FAULT_SECTIONS:-200}	# contended sections per fault kind

setup_file() {
	if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null ||
	   ! command -v socat >/dev/null; then
		export WSL_FAULTS_MISSING="etcd, etcdctl or socat is not installed (apt-get install etcd-server etcd-client socat)"
		return 0
	fi
	if ! unshare -u true 2>/dev/null; then
		export WSL_FAULTS_MISSING="unshare -u is not permitted here (needs CAP_SYS_ADMIN)"
		return 0
	fi
	export WSL_ETCD_DIR=$BATS_FILE_TMPDIR/etcd
	WSL_ETCD_EP=$("$CLUSTER" start "$WSL_ETCD_DIR")
	export WSL_ETCD_EP
}

teardown_file() {
	if [ -n "${WSL_ETCD_DIR:-}" ]; then
		kill -CONT "$(cat "$WSL_ETCD_DIR/member-1/pid")" 2>/dev/null || :
		"$CLUSTER" stop "$WSL_ETCD_DIR"
	fi
	return 0
}

local_setup() {
	[ -z "${WSL_FAULTS_MISSING:-}" ] || skip "$WSL_FAULTS_MISSING"
	export WSLOCK_BACKEND=etcd ETCDCTL_API=3
	unset WSLOCK_ETCD_ENDPOINTS
	# A case's own prefix: keys of an earlier case (a lock left dead on
	# purpose) never meet this one's.
	export WSLOCK_ETCD_PREFIX="/wslock-$BATS_TEST_NUMBER/"
	FX=$BATS_TEST_TMPDIR/fx
	mkdir -p "$FX/marks" "$FX/store"
	: >"$FX/overlaps"
	: >"$FX/sections"
	mkws w
	WS=$(canon "$(W w)")
	PA=$("$PROXY" start "$BATS_TEST_TMPDIR" A "${WSL_ETCD_EP#http://}")
	PB=$("$PROXY" start "$BATS_TEST_TMPDIR" B "${WSL_ETCD_EP#http://}")
}

local_teardown() {
	[ -n "${WSL_ETCD_DIR:-}" ] && kill -CONT "$(etcd_pid)" 2>/dev/null
	touch "$FX/stop" 2>/dev/null
	"$PROXY" stop "$BATS_TEST_TMPDIR" 2>/dev/null
	return 0
}

teardown() {
	local_teardown
	# the helpers' teardown: tracked background processes
	local p t
	[ -f "$BATS_TEST_TMPDIR/.pids" ] || return 0
	while read -r p t; do
		tracked_alive "$p" "$t" && kill -CONT "$p" 2>/dev/null && kill -TERM "$p" 2>/dev/null
	done <"$BATS_TEST_TMPDIR/.pids"
	while read -r p t; do
		if ! wait_for "! tracked_alive $p '$t'" 5 2>/dev/null; then
			tracked_alive "$p" "$t" && kill -KILL "$p" 2>/dev/null
		fi
		wait "$p" 2>/dev/null || true
	done <"$BATS_TEST_TMPDIR/.pids"
	return 0
}

etcd_pid() { cat "$WSL_ETCD_DIR/member-1/pid"; }

ectl() {
	etcdctl --endpoints="$WSL_ETCD_EP" --dial-timeout=2s --command-timeout=5s "$@"
}

# on HOST ENDPOINT CMD...: CMD as a process of simulated host HOST (its own
# hostname) that reaches etcd through ENDPOINT; exec'd, so $! of a
# background `on` is CMD's pid.
on() {
	local host=$1 ep=$2
	shift 2
	WSLOCK_ETCD_ENDPOINTS=$ep unshare -u sh -c 'hostname "$0" && exec "$@"' "$host" "$@"
}

# holder HOST ENDPOINT MODE [OPTS...]: a background `wslock run` holding
# $WS with section.sh in MODE (loop, stubborn); sets HOLDER; waits until
# its command is inside the section.
holder() {
	local host=$1 ep=$2 mode=$3
	shift 3
	on "$host" "$ep" timeout -s KILL 120 "$WSLOCK" run --lease-ttl $TTL "$@" "$WS" -- \
		"$SECTION" "$FX" "$mode" </dev/null >"$FX/holder.out" 2>"$FX/holder.err" 3>&- &
	HOLDER=$!
	track_pid "$HOLDER"
	wait_for "[ -e '$FX/begun' ]" 20
	HOLDER_CMD=$(awk 'NR == 1 { print $1 }' "$FX/sections")
	# the wslock process itself (HOLDER is the timeout(1) around it)
	HOLDER_W=$(on "$host" "$ep" "$WSLOCK" inspect "$WS" | jq -r .owner.pid)
	[ "$(ps -o comm= -p "$HOLDER_W")" = wslock ]
}

# contend HOST ENDPOINT N [OPTS...]: N sections in a row from HOST, each
# `wslock run -w 30 --reclaim-dead`; every status goes to FX/status.
# CONTEND_SET=ab or ba: of the workspaces $WS $WS2 or $WS2 $WS at once
# (every section holds $WS, so the markers see any overlap).
contend() {
	local host=$1 ep=$2 n=$3 i rc wss=("$WS")
	shift 3
	case "${CONTEND_SET:-}" in
	ab) wss=("$WS" "$WS2") ;;
	ba) wss=("$WS2" "$WS") ;;
	esac
	for ((i = 0; i < n; i++)); do
		rc=0
		on "$host" "$ep" timeout -s KILL 60 "$WSLOCK" run -q -w 30 --reclaim-dead \
			--lease-ttl $TTL --kill-after 1 "$@" "${wss[@]}" -- "$SECTION" "$FX" once \
			</dev/null >/dev/null 2>>"$FX/contend.err" 3>&- || rc=$?
		echo "$rc" >>"$FX/status"
	done
}

# dead_from HOST ENDPOINT: $WS is held by a dead owner, as HOST sees it.
dead_from() {
	on "$1" "$2" "$WSLOCK" inspect "$WS" | jq -e '.state == "held" and .liveness == "dead"' >/dev/null
}

# no_violations: no overlap, no fence that went backwards, no stale write
# accepted by the fenced store.
no_violations() {
	local o
	o=$(cat "$FX/overlaps")
	[ -z "$o" ] || fail "overlaps or regressions: $o"
	! grep -q '^stale' "$FX/store/log" 2>/dev/null ||
		fail "stale writes accepted: $(grep '^stale' "$FX/store/log")"
}

@test "faults: the harness itself sees an overlap and a stale write (two holders with one fence)" {
	# Without wslock: two sections at once with the same fence.
	WSLOCK_FENCE=7 WSLOCK_TOKEN=a "$SECTION" "$FX" loop 3>&- &
	local p=$!
	wait_for "[ -e '$FX/begun' ]"
	WSLOCK_FENCE=7 WSLOCK_TOKEN=b "$SECTION" "$FX" once
	WSLOCK_FENCE=6 WSLOCK_TOKEN=c "$SECTION" "$FX" once
	touch "$FX/stop"
	wait "$p"
	grep -q '^overlap' "$FX/overlaps"
	grep -q '^regress' "$FX/overlaps"
	grep -q '^stale 7 b' "$FX/store/log"
	run no_violations
	[ "$status" -ne 0 ]
}

@test "faults: finding 1: a partitioned holder's command is stopped before another host can take the lock" {
	holder hostA "$PA" loop --kill-after 1
	"$PROXY" pause "$BATS_TEST_TMPDIR" A
	contend hostB "$PB" 10
	"$PROXY" resume "$BATS_TEST_TMPDIR" A
	wait_exit "$HOLDER" 60
	[ "$WAIT_STATUS" -eq 78 ]
	! is_running "$HOLDER_CMD"
	no_violations
	# B took the dead lock over (--reclaim-dead) and ran every section.
	[ "$(grep -c '^0$' "$FX/status")" -eq 10 ]
}

@test "faults: finding 2: lock-delay: a command ignoring SIGTERM is killed before the lease can expire" {
	holder hostA "$PA" stubborn --kill-after 1
	kill -STOP "$(etcd_pid)"
	# The keeper cannot renew: the command gets SIGTERM (and ignores it).
	wait_for "[ -e '$FX/termed' ]" 30
	kill -CONT "$(etcd_pid)"
	contend hostB "$PB" 5
	wait_exit "$HOLDER" 60
	[ "$WAIT_STATUS" -eq 78 ]
	no_violations
	[ "$(grep -c '^0$' "$FX/status")" -eq 5 ]
}

@test "faults: finding 3: SIGKILL of wslock: the command keeps the lock live, then the lock is left for recovery" {
	holder hostA "$PA" loop
	kill -KILL "$HOLDER_W"
	# Longer than the whole liveness lease (TTL + lock-delay): B must wait.
	run on hostB "$PB" "$WSLOCK" run -q -w $((3 * TTL + 2)) --reclaim-dead \
		--lease-ttl $TTL "$WS" -- "$SECTION" "$FX" once
	[ "$status" -eq 75 ]
	is_running "$HOLDER_CMD"
	touch "$FX/stop"
	wait_for "! is_running $HOLDER_CMD" 20
	# The lock stays; once its lease is gone it is dead: recovery required.
	wait_for "dead_from hostB '$PB'" 30
	run on hostB "$PB" "$WSLOCK" run -q -n "$WS" -- true
	[ "$status" -eq 69 ]
	no_violations
}

@test "faults: finding 3: SIGSTOP of wslock changes nothing: the lock stays live, released after SIGCONT" {
	holder hostA "$PA" loop
	kill -STOP "$HOLDER_W"
	run on hostB "$PB" "$WSLOCK" run -q -w $((3 * TTL + 2)) --reclaim-dead \
		--lease-ttl $TTL "$WS" -- "$SECTION" "$FX" once
	[ "$status" -eq 75 ]
	touch "$FX/stop"
	wait_for "! is_running $HOLDER_CMD" 20
	kill -CONT "$HOLDER_W"
	wait_exit "$HOLDER" 30
	[ "$WAIT_STATUS" -eq 0 ]
	run on hostB "$PB" "$WSLOCK" run -q -n "$WS" -- true
	[ "$status" -eq 0 ]
	no_violations
}

@test "faults: finding 3: a process-group SIGKILL (a CI runner's) reaches the command; the lock is left for recovery" {
	on hostA "$PA" setsid sh -c 'echo $$ >"$1/pgid"; exec timeout -s KILL 120 "$2" run --lease-ttl '$TTL' "$3" -- "$4" "$1" loop' \
		sh "$FX" "$WSLOCK" "$WS" "$SECTION" </dev/null >/dev/null 2>"$FX/holder.err" 3>&- &
	track_pid $!
	wait_for "[ -e '$FX/begun' ]" 20
	HOLDER_CMD=$(awk 'NR == 1 { print $1 }' "$FX/sections")
	kill -KILL -- "-$(cat "$FX/pgid")"
	wait_for "! is_running $HOLDER_CMD" 10
	wait_for "dead_from hostB '$PB'" 30
	run on hostB "$PB" "$WSLOCK" run -q -n "$WS" -- true
	[ "$status" -eq 69 ]
	no_violations
}

@test "faults: finding 4: deleting the holder's key stops its command at once, exit 78" {
	holder hostA "$PA" loop --kill-after 1
	ectl del "${WSLOCK_ETCD_PREFIX}lock$WS" >/dev/null
	wait_exit "$HOLDER" 15
	[ "$WAIT_STATUS" -eq 78 ]
	! is_running "$HOLDER_CMD"
	grep -q 'changed\|removed\|deleted' "$FX/holder.err"
}

# revoke_or_delete HOW: as an operator would, by hand: revoke the holder's
# liveness lease (HOW=revoke) or delete its lock key (HOW=delete); then a
# contender from host B takes the workspace over.  The lock is lost at
# that moment, so the holder's command (stubborn: it ignores SIGTERM, as a
# build that traps TERM to clean up does) is killed at once with SIGKILL:
# it never gets SIGTERM and a --kill-after grace, and is gone when its
# wslock exits 78.  The contender may still get in a few milliseconds
# before the kill lands (a revoke or delete frees the lock at the server
# at once; nothing can order that): the fence covers them, so the store
# must have accepted no stale write.  (The old command's markers are not
# counted as overlaps here: in those milliseconds they are expected.)
revoke_or_delete() {
	local lease
	holder hostA "$PA" stubborn --kill-after 1
	if [ "$1" = revoke ]; then
		lease=$(on hostA "$PA" "$WSLOCK" inspect "$WS" | jq -r .liveness_reason |
			grep -o 'lease [0-9a-f]*' | cut -d' ' -f2)
		[ -n "$lease" ]
		ectl lease revoke "$lease" >/dev/null
	else
		ectl del "${WSLOCK_ETCD_PREFIX}lock$WS" >/dev/null
	fi
	contend hostB "$PB" 1
	wait_exit "$HOLDER" 30
	[ "$WAIT_STATUS" -eq 78 ]
	[ ! -e "$FX/termed" ] || fail "the command got SIGTERM and a grace period after the lock was lost"
	! is_running "$HOLDER_CMD"
	[ "$(cat "$FX/status")" = 0 ]
	! grep -q '^stale' "$FX/store/log" || fail "stale writes accepted: $(grep '^stale' "$FX/store/log")"
	grep -q 'changed\|removed\|deleted\|revoked' "$FX/holder.err"
}

@test "faults: by hand: the holder's lease revoked by hand: its command is SIGKILLed at once, no --kill-after grace" {
	revoke_or_delete revoke
}

@test "faults: by hand: the holder's lock key deleted by hand: its command is SIGKILLed at once, no --kill-after grace" {
	revoke_or_delete delete
}

@test "faults: finding 6: a waiter waits longer than its lease TTL and then gets the lock" {
	holder hostA "$PA" loop
	on hostB "$PB" timeout -s KILL 60 "$WSLOCK" run -w 40 --lease-ttl $TTL "$WS" -- \
		"$SECTION" "$FX" once </dev/null >/dev/null 2>"$FX/waiter.err" 3>&- &
	local waiter=$!
	track_pid "$waiter"
	wait_for "grep -q 'waiting' '$FX/waiter.err'" 20
	# Three lease TTLs of waiting (the fault here is the duration).
	sleep $((3 * TTL))
	touch "$FX/stop"
	wait_exit "$HOLDER" 30
	[ "$WAIT_STATUS" -eq 0 ]
	wait_exit "$waiter" 30
	[ "$WAIT_STATUS" -eq 0 ]
	no_violations
}

@test "faults: finding 9: a command that finished is not reported 69 when etcd is cut off at release" {
	run on hostA "$PA" "$WSLOCK" run --lease-ttl $TTL --etcd-timeout 1 "$WS" -- \
		"$PROXY" pause "$BATS_TEST_TMPDIR" A
	"$PROXY" resume "$BATS_TEST_TMPDIR" A
	[ "$status" -eq 0 ]
	[[ $output == *"could not be released"* ]]
}

@test "faults: finding 10: WSLOCK_FENCE after recover is the take-over's revision and grows" {
	local owner f1 f2 rev
	# a lock left by a dead holder on this host (same hostname: provably dead)
	start_sleeper
	run --separate-stderr wsl acquire --etcd-endpoints "$PA" --lease-ttl $TTL --pid "$SLEEPER_PID" "$WS"
	[ "$status" -eq 0 ]
	kill -KILL "$SLEEPER_PID"
	wait_exit "$SLEEPER_PID" 10
	# its keeper stops renewing: dead once the lease (TTL + lock-delay) ends
	wait_for "dead_from hostA '$PA'" 20
	owner=$BATS_TEST_TMPDIR/owner.json
	wsl inspect --etcd-endpoints "$PA" --owner "$WS" >"$owner"
	f1=$(ectl get "${WSLOCK_ETCD_PREFIX}lock$WS" -w json | grep -o '"create_revision":[0-9]*' | cut -d: -f2)
	run --separate-stderr wsl recover --etcd-endpoints "$PA" --expected-owner "$owner" "$WS" -- \
		sh -c 'echo "$WSLOCK_FENCE" >"$1"; etcdctl --endpoints="$2" get "$3" -w json >"$1.kv"' \
		sh "$BATS_TEST_TMPDIR/fence" "$WSL_ETCD_EP" "${WSLOCK_ETCD_PREFIX}lock$WS"
	[ "$status" -eq 0 ]
	f2=$(cat "$BATS_TEST_TMPDIR/fence")
	rev=$(grep -o '"mod_revision":[0-9]*' "$BATS_TEST_TMPDIR/fence.kv" | cut -d: -f2)
	[ "$f2" -gt "$f1" ]
	[ "$f2" -eq "$rev" ]
}

# storm KIND: $STORM contended sections from two hosts (two contenders
# each) while KIND is injected over and over: partition (a host's proxy
# paused), kill (SIGKILL of the holding wslock), stop (SIGSTOP of it for
# longer than the TTL, then SIGCONT), etcd (the member paused).  Holders
# that lose their lock exit 78 and leave it dead; contenders take it over
# with --reclaim-dead.  Passes with no overlap and no stale write.
# With STORM_SETS, three of the four contenders lock $WS and $WS2 at
# once, in both orders (ab, ba), the fourth $WS alone.
storm() {
	local kind=$1 pids=() i n=0 w faults=0 next at sets=("" "" "" "") total=$STORM
	[ -z "${STORM_SETS:-}" ] || sets=(ab ba ba "")
	for i in 0 1; do
		CONTEND_SET=${sets[2 * i]} contend_until hostA "$PA" &
		pids+=($!)
		CONTEND_SET=${sets[2 * i + 1]} contend_until hostB "$PB" &
		pids+=($!)
	done
	for i in "${pids[@]}"; do track_pid "$i"; done
	# a fault every total/8 sections
	next=$((total / 8))
	while [ "$(wc -l <"$FX/sections")" -lt "$total" ]; do
		n=$((n + 1))
		[ "$n" -le 2000 ] || fail "storm $kind: only $(wc -l <"$FX/sections") sections"
		if [ "$(wc -l <"$FX/sections")" -lt "$next" ]; then
			sleep 0.1
			continue
		fi
		at=$(wc -l <"$FX/sections")
		case "$kind" in
		partition)
			local h=A
			[ $((n % 2)) -eq 0 ] && h=B
			"$PROXY" pause "$BATS_TEST_TMPDIR" "$h"
			sleep $((TTL + 1))
			"$PROXY" resume "$BATS_TEST_TMPDIR" "$h"
			;;
		kill|stop)
			# the wslock holding the lock now (a few tries: holders
			# come and go fast)
			w=
			for i in $(seq 50); do
				w=$(ectl get "${WSLOCK_ETCD_PREFIX}lock$WS" --print-value-only | jq -r '.pid // empty' 2>/dev/null)
			[ -n "$w" ] && [ "$(ps -o comm= -p "$w" 2>/dev/null)" = wslock ] && break
				w=
			done
			[ -n "$w" ] || continue
			if [ "$kind" = kill ]; then
				kill -KILL "$w" 2>/dev/null || continue
			else
				kill -STOP "$w" 2>/dev/null || continue
				sleep $((TTL + 1))
				kill -CONT "$w" 2>/dev/null || :
			fi
			;;
		etcd)
			kill -STOP "$(etcd_pid)"
			sleep $((TTL + 1))
			kill -CONT "$(etcd_pid)"
			;;
		esac
		# the next fault total/8 sections after this one began; a
		# holder not found (on a loaded machine sections come and go
		# between the read and the kill) is looked for again at once
		next=$((at + total / 8))
		faults=$((faults + 1))
	done
	touch "$FX/stop"
	for i in "${pids[@]}"; do wait_exit "$i" 90 || fail "contender $i hung"; done
	echo "# storm $kind: $(wc -l <"$FX/sections") sections, $faults faults, statuses: $(sort "$FX/status" | uniq -c | tr -s ' \n' ' ')" >&3
	no_violations
	[ "$faults" -ge 3 ]
}

# contend_until HOST ENDPOINT: sections from HOST until FX/stop exists.
contend_until() {
	while [ ! -e "$FX/stop" ]; do
		contend "$1" "$2" 1
	done
}

@test "faults: storm: contended sections while hosts are partitioned" {
	storm partition
}

@test "faults: storm: contended sections while holders' wslock is SIGKILLed" {
	storm kill
}

@test "faults: storm: contended sections while holders' wslock is SIGSTOPped" {
	storm stop
}

@test "faults: storm: contended sections while etcd is paused" {
	storm etcd
}

@test "faults: storm: several workspaces at once (A B, B A and A alone) while holders' wslock is SIGKILLed" {
	mkws w2
	WS2=$(canon "$(W w2)")
	STORM_SETS=1 storm kill
	# no waiter's queue key is left behind (a waiter killed by its
	# timeout(1) would leave one until its lease, TTL + lock-delay, ends)
	wait_for "[ \"\$(ectl get --prefix '${WSLOCK_ETCD_PREFIX}queue' --keys-only | grep -c .)\" -eq 0 ]" 20 ||
		fail "queue keys left: $(ectl get --prefix "${WSLOCK_ETCD_PREFIX}queue" --keys-only)"
}

# rw_until HOST ENDPOINT r|w: shared (r) or exclusive (w) sections from
# HOST (rw_section.sh) until FX/stop exists; every status to FX/status.
rw_until() {
	local host=$1 ep=$2 mode=$3 rc opt=
	[ "$mode" = r ] && opt=--shared
	while [ ! -e "$FX/stop" ]; do
		rc=0
		on "$host" "$ep" timeout -s KILL 60 "$WSLOCK" run -q -w 30 --reclaim-dead $opt \
			--lease-ttl $TTL --kill-after 1 "$WS" -- "$HERE/rw_section.sh" "$FX" "$mode" \
			</dev/null >/dev/null 2>>"$FX/contend.err" 3>&- || rc=$?
		echo "$rc" >>"$FX/status"
	done
}

@test "faults: the shared harness sees a reader beside a writer, and readers together" {
	start_sleeper
	: >"$FX/marks/r.$SLEEPER_PID"
	"$HERE/rw_section.sh" "$FX" r
	[ -z "$(cat "$FX/overlaps")" ] && [ -s "$FX/together" ]
	"$HERE/rw_section.sh" "$FX" w
	grep -q "^overlap w\.[0-9]* with r\.$SLEEPER_PID" "$FX/overlaps"
	: >"$FX/overlaps"
	mv "$FX/marks/r.$SLEEPER_PID" "$FX/marks/w.$SLEEPER_PID"
	"$HERE/rw_section.sh" "$FX" r
	grep -q "^overlap r\.[0-9]* with w\.$SLEEPER_PID" "$FX/overlaps"
	# a killed command's marker (a dead pid) does not count
	: >"$FX/overlaps"
	: >"$FX/marks/w.$(dead_pid)"
	rm "$FX/marks/w.$SLEEPER_PID"
	"$HERE/rw_section.sh" "$FX" w
	[ -z "$(cat "$FX/overlaps")" ]
}

@test "faults: storm: readers and writers on two hosts while holders' wslock is SIGKILLed: never a reader beside a writer" {
	local pids=() i n=0 w faults=0 next sections
	for i in A B; do
		rw_until "host$i" "$(eval echo "\$P$i")" w &
		pids+=($!)
		rw_until "host$i" "$(eval echo "\$P$i")" r &
		pids+=($!)
		rw_until "host$i" "$(eval echo "\$P$i")" r &
		pids+=($!)
	done
	for i in "${pids[@]}"; do track_pid "$i"; done
	next=$((STORM / 8))
	while [ "$(wc -l <"$FX/sections")" -lt "$STORM" ]; do
		n=$((n + 1))
		[ "$n" -le 2000 ] || fail "only $(wc -l <"$FX/sections") sections"
		if [ "$(wc -l <"$FX/sections")" -lt "$next" ]; then
			sleep 0.1
			continue
		fi
		# a wslock holding the lock now, reader or writer (holders come
		# and go fast: tried again until one is caught)
		w=
		for i in $(seq 20); do
			w=$(wsl inspect --etcd-endpoints "$WSL_ETCD_EP" "$WS" |
				jq -r '[.owners[]?.pid] | .[length - 1] // empty' 2>/dev/null)
			[ -n "$w" ] && [ "$(ps -o comm= -p "$w" 2>/dev/null)" = wslock ] && break
			w=
		done
		[ -n "$w" ] || continue
		kill -KILL "$w" 2>/dev/null || continue
		faults=$((faults + 1))
		next=$(($(wc -l <"$FX/sections") + STORM / 8))
	done
	touch "$FX/stop"
	for i in "${pids[@]}"; do wait_exit "$i" 90 || fail "contender $i hung"; done
	sections=$(wc -l <"$FX/sections")
	echo "# shared storm: $sections sections ($(grep -c '^r' "$FX/sections") shared), $faults faults, readers together $(wc -l <"$FX/together" 2>/dev/null || echo 0) times, statuses: $(sort "$FX/status" | uniq -c | tr -s ' \n' ' ')" >&3
	[ -z "$(cat "$FX/overlaps")" ] || fail "reader/writer overlaps: $(head -5 "$FX/overlaps")"
	[ "$faults" -ge 3 ]
	# the case proves something: readers were inside together, writers ran
	[ -s "$FX/together" ]
	grep -q '^w' "$FX/sections"
	grep -q '^r' "$FX/sections"
}

@test "faults: finding 8: an endpoint that accepts connections but never answers is passed over (--etcd-timeout)" {
	"$PROXY" pause "$BATS_TEST_TMPDIR" A
	# A's proxy still accepts TCP (the kernel does) but answers nothing.
	run on hostA "$PA,$PB" timeout -s KILL 30 "$WSLOCK" run --etcd-timeout 1 --lease-ttl $TTL \
		"$WS" -- "$SECTION" "$FX" once
	[ "$status" -eq 0 ]
	[ "$(wc -l <"$FX/sections")" -eq 1 ]
	run on hostA "$PA,$PB" timeout -s KILL 30 "$WSLOCK" inspect --etcd-timeout 1 "$WS"
	[ "$status" -eq 0 ]
	jq_ok '.state == "free"'
	"$PROXY" resume "$BATS_TEST_TMPDIR" A
	no_violations
}

@test "faults: finding 8: an endpoint that never answers is skipped by later requests, the keeper's renewals too" {
	"$PROXY" pause "$BATS_TEST_TMPDIR" A
	# The command holds the lock for several TTLs, so its keeper renews
	# many times; a renewal that tried A first would wait --etcd-timeout
	# (half the TTL) and miss its deadline: SIGTERM, 78.
	run on hostA "$PA,$PB" timeout -s KILL 60 "$WSLOCK" run --etcd-timeout 1 --lease-ttl $TTL \
		--kill-after 0.5 "$WS" -- sh -c '
			"$1" "$2" loop & p=$!
			i=0; while [ $i -lt 60 ]; do sleep 0.1; i=$((i + 1)); done
			touch "$2/stop"; wait $p' sh "$SECTION" "$FX"
	[ "$status" -eq 0 ] || fail "run: $status $output"
	[ ! -e "$FX/termed" ]
	"$PROXY" resume "$BATS_TEST_TMPDIR" A
	run wsl inspect --etcd-endpoints "$PB" "$WS"
	jq_ok '.state == "free"'
	no_violations
}

@test "faults: finding 8: -n with endpoints that accept connections but never answer fails within one --etcd-timeout per endpoint" {
	"$PROXY" pause "$BATS_TEST_TMPDIR" A
	"$PROXY" pause "$BATS_TEST_TMPDIR" B
	# -n allows one timeout per endpoint (2 x 2 s) in all, not one per
	# endpoint and request: killed at 7 s, that shows as 137
	run --separate-stderr on hostA "$PA,$PB" timeout -s KILL 7 "$WSLOCK" acquire -n \
		--etcd-timeout 2 --pid $$ "$WS"
	[ "$status" -eq 69 ] || fail "acquire -n: $status $stderr"
	assert_json_error WSLOCK_BACKEND_UNAVAILABLE
	run --separate-stderr on hostA "$PA,$PB" timeout -s KILL 7 "$WSLOCK" run -n \
		--etcd-timeout 2 "$WS" -- true
	[ "$status" -eq 69 ] || fail "run -n: $status $stderr"
	run --separate-stderr on hostA "$PA,$PB" timeout -s KILL 7 "$WSLOCK" release -n \
		--etcd-timeout 2 --token 0123456789abcdef0123456789abcdef "$WS"
	[ "$status" -eq 69 ] || fail "release -n: $status $stderr"
	"$PROXY" resume "$BATS_TEST_TMPDIR" A
	"$PROXY" resume "$BATS_TEST_TMPDIR" B
	run wsl inspect --etcd-endpoints "$PA" "$WS"
	jq_ok '.state == "free"'
}
