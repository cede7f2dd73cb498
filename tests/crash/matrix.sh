#!/usr/bin/env bash
# tests/crash/matrix.sh - crash injection: every command through every
# registry step it reaches (src/testhook.h, CRASH_POINT in src/*.c).
#
# For each (step, command) cell: build the state the command needs with the
# normal ./wslock, run the command with ./wslock-test and WSLOCK_CRASH_AT=step,
# expect it to die of SIGKILL (137) when the step is on its path, then check
# with the normal ./wslock that the registry is consistent:
#
#   - inspect works; the workspace is free, or held/retained by a dead owner
#     (never corrupt, never live, never a second lock in the tree);
#   - the nest markers still make overlaps visible: acquire -n of an ancestor
#     and of a descendant fails with 69 while the workspace is held, works
#     when it is free;
#   - acquire -n of the workspace succeeds or reports WSLOCK_RECOVERY_REQUIRED;
#   - an exact recover (inspect --owner > f; recover --expected-owner f)
#     succeeds whenever something is held;
#   - reclaim --yes then leaves locks/, nest/ and tmp/ empty;
#   - every journal line is one whole JSON object;
#   - finally acquire + release works.
#
# Prints the matrix (rows: steps, columns: commands; PASS / FAIL / n/a) and
# exits 1 on any FAIL. A cell whose command does not reach the step is n/a,
# unless the step is expected on that command's path (then FAIL: the hook or
# the path changed).
#
# Usage: tests/crash/matrix.sh [-v]   (from anywhere; WSLOCK / WSLOCK_TEST
# override the binaries, CRASH_KEEP=1 keeps the scratch directory,
# CRASH_STEPS='s1 s2' and CRASH_COLS='run release' run a part of the matrix).
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WSLOCK=${WSLOCK:-$ROOT/wslock}
WSLOCK_TEST=${WSLOCK_TEST:-$ROOT/wslock-test}
VERBOSE=0
[ "${1:-}" = -v ] && VERBOSE=1
# shellcheck source=tests/lib.sh
. "$ROOT/tests/lib.sh"

for b in "$WSLOCK" "$WSLOCK_TEST"; do
	[ -x "$b" ] || { echo "matrix.sh: $b is not built (make && make test-build)" >&2; exit 2; }
done
wsl_need matrix.sh jq timeout b2sum || exit 2
wsl_clean_env

# Every step named by CRASH_POINT in the sources, in source order.
mapfile -t STEPS < <(grep -ho 'CRASH_POINT("[^"]*")' "$ROOT"/src/registry_local.c "$ROOT"/src/local_garbage.c \
	"$ROOT"/src/local_open.c "$ROOT"/src/journal.c \
	"$ROOT"/src/*.c 2>/dev/null | sed 's/CRASH_POINT("\(.*\)")/\1/' | awk '!seen[$0]++')
if [ "${#STEPS[@]}" -eq 0 ]; then
	echo "matrix.sh: no CRASH_POINT found in $ROOT/src" >&2
	exit 2
fi

# Columns: id, header, the steps expected on its path (space-separated).
ACQ="acquire:staged acquire:staging-synced acquire:markers-written acquire:published acquire:dir-synced"
REL="release:renamed release:markers-removed"
TAKE="journal:opened takeover:journaled takeover:owner-staged takeover:live-replaced takeover:owner-replaced takeover:retained-dropped"
QUEUE="queue:created queue:joined queue:sleeping queue:left"
COLS=(acquire run run_multi run_nested run_wait release recover recover_cmd reclaim run_retain acquire_reclaim recover_retained recover_corrupt
	run_shared run_shared_join release_shared reclaim_shared recover_shared)
declare -A HEAD=(
	[acquire]="acquire"
	[run]="run"
	[run_multi]="run(2 ws)"
	[run_nested]="run(nested)"
	[run_wait]="run(waits)"
	[release]="release"
	[recover]="recover"
	[recover_cmd]="recover--CMD"
	[reclaim]="reclaim--yes"
	[run_retain]="run--retain"
	[acquire_reclaim]="acq--reclaim-dead"
	[recover_retained]="recover(retained)"
	[recover_corrupt]="recover(corrupt)"
	[run_shared]="run--shared"
	[run_shared_join]="run--shared(2nd)"
	[release_shared]="release(1 of 2)"
	[reclaim_shared]="reclaim(2 readers)"
	[recover_shared]="recover(reader)--CMD"
)
declare -A EXPECT=(
	[acquire]="$ACQ"
	[run]="$ACQ $REL"
	[run_multi]="$ACQ multi:published-one $REL"
	[run_nested]="$ACQ $REL"
	[run_wait]="$QUEUE $ACQ $REL"
	[release]="$REL"
	[recover]="$TAKE $REL"
	[recover_cmd]="$TAKE $REL"
	[reclaim]="journal:opened takeover:journaled $REL garbage:staging-removed"
	[run_retain]="$ACQ retain:written"
	[acquire_reclaim]="journal:opened takeover:journaled $REL $ACQ"
	[recover_retained]="$TAKE $REL"
	[recover_corrupt]="journal:opened $REL takeover:corrupt-removed $ACQ"
	[run_shared]="$ACQ $REL"
	[run_shared_join]="shared:staged shared:joined shared:left"
	[release_shared]="shared:left"
	[reclaim_shared]="journal:opened takeover:journaled shared:left $REL garbage:staging-removed"
	[recover_shared]="$TAKE shared:left"
)

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/wslock-crash.XXXXXX")
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ "${CRASH_KEEP:-0}" = 1 ] || rm -rf "$SCRATCH"
}
trap cleanup EXIT
# Private copies (a rebuild during the run must not swap them).
WSLOCK=$(wsl_private_copy "$WSLOCK" "$SCRATCH") && WSLOCK_TEST=$(wsl_private_copy "$WSLOCK_TEST" "$SCRATCH") || exit 2

# ---------------------------------------------------------------- helpers

W() { timeout -k 5 60 "$WSLOCK" "$@"; }

# A live holder to name as owner; sets SLEEPER.
start_sleeper() {
	wsl_start_sleeper 600
	SLEEPER=$SLEEPER_PID
	PIDS+=("$SLEEPER")
}
# Kills and reaps a holder: from now on it is provably dead.
kill_holder() { wsl_kill_reap "$1"; }

CELL_ERR=
bad() {
	CELL_ERR+="$*; "
}

# A fresh cell: registry $REG, workspaces $WS (the target), $PARENT above
# it and $CHILD below it, and a sibling.
new_cell() {
	CELL=$SCRATCH/$1
	rm -rf "$CELL"
	mkdir -p "$CELL/ws/p/t/c" "$CELL/ws/p/sib" "$CELL/ws/q"
	export WSLOCK_DIR=$CELL/reg
	PARENT=$(realpath "$CELL/ws/p")
	WS=$PARENT/t
	CHILD=$WS/c
	SIB=$PARENT/sib
	OTHER=$(realpath "$CELL/ws/q")	# run_multi's second workspace
	CELL_ERR=
	HOLDER=
	CORRUPT_FILE=
}

# Leaves a lock of $WS held by a dead acquire holder; its owner doc in $OWNER.
setup_dead_owner() {
	start_sleeper
	OWNER=$(W acquire --pid "$SLEEPER" --purpose "crash-matrix setup" "$WS") ||
		{ bad "setup: acquire failed: $OWNER"; return 1; }
	kill_holder "$SLEEPER"
}

# Leaves one more reader of $WS, a dead acquire --shared holder.
setup_dead_reader() {
	start_sleeper
	W acquire --shared --pid "$SLEEPER" --purpose "crash-matrix reader" "$WS" >/dev/null ||
		{ bad "setup: acquire --shared failed"; return 1; }
	kill_holder "$SLEEPER"
}

# Leaves garbage as a crashed acquire does: a staging dir and orphan markers.
setup_garbage() {
	# The braces take bash's "Killed" notice away from the terminal.
	{ WSLOCK_CRASH_AT=acquire:markers-written timeout -k 5 60 "$WSLOCK_TEST" \
		run "$SIB" -- true >/dev/null 2>&1; } 2>/dev/null
	local st=$?
	[ "$st" = 137 ] || { bad "setup: garbage-making run exited $st, not 137"; return 1; }
}

setup_retained() {
	W run --retain-on-failure "$WS" -- false >/dev/null 2>&1
	local st=$?
	[ "$st" = 1 ] || { bad "setup: retaining run exited $st"; return 1; }
	W inspect "$WS" | jq -e '.state == "retained"' >/dev/null ||
		{ bad "setup: lock not retained"; return 1; }
}

# A lock whose owner.json was damaged in place (its nest markers exist, as
# for any published lock); its exact bytes in $CORRUPT_FILE.
setup_corrupt() {
	local d
	setup_dead_owner || return 1
	d=$WSLOCK_DIR/locks/$(lock_key_of "$WS")
	printf '{"schema_version":1,"kind":"wslock-owner","workspace_root":"%s","pid":0}\n' "$WS" >"$d/owner.json"
	chmod 0600 "$d/owner.json"
	CORRUPT_FILE=$CELL/corrupt.json
	cp "$d/owner.json" "$CORRUPT_FILE"
}

# Runs column $1's command under WSLOCK_CRASH_AT=$2; sets CRASH_STATUS.
crash_run() {
	local col=$1 step=$2 tok
	local -a cmd
	case $col in
	acquire)
		start_sleeper
		HOLDER=$SLEEPER
		cmd=(acquire --pid "$HOLDER" "$WS")
		;;
	run) cmd=(run "$WS" -- true) ;;
	run_multi) cmd=(run "$WS" "$OTHER" -- true) ;;
	run_nested)
		# A run nested under the crashing one, in the background: the
		# outer waits for it before its release steps.
		cmd=(run "$WS" -- sh -c '"$0" run -n "$1" -- true </dev/null >/dev/null 2>&1 & exit 0' \
			"$WSLOCK" "$CHILD")
		;;
	release)
		start_sleeper
		HOLDER=$SLEEPER
		OWNER=$(W acquire --pid "$HOLDER" "$WS") || { bad "setup: acquire failed"; return 1; }
		tok=$(jq -r .token <<<"$OWNER")
		cmd=(release --token "$tok" "$WS")
		;;
	run_wait)
		# A run that has to wait (it joins the queue), then gets the
		# lock once the holder releases; a second waiter queued behind
		# it must be served whatever step the first dies at.
		{ crash_run_wait "$step"; } 2>/dev/null
		return
		;;
	recover | recover_cmd)
		setup_dead_owner || return 1
		W inspect --owner "$WS" >"$CELL/expected.json"
		cmd=(recover --expected-owner "$CELL/expected.json" "$WS")
		[ "$col" = recover_cmd ] && cmd+=(-- true)
		;;
	reclaim)
		setup_dead_owner && setup_garbage || return 1
		cmd=(reclaim --yes)
		;;
	run_retain) cmd=(run --retain-on-failure "$WS" -- false) ;;
	acquire_reclaim)
		setup_dead_owner || return 1
		start_sleeper
		HOLDER=$SLEEPER
		cmd=(acquire --reclaim-dead --pid "$HOLDER" "$WS")
		;;
	recover_retained)
		setup_retained || return 1
		W inspect --owner "$WS" >"$CELL/expected.json"
		cmd=(recover --expected-owner "$CELL/expected.json" "$WS")
		;;
	run_shared) cmd=(run --shared "$WS" -- true) ;;
	run_shared_join)
		# A second reader joins a lock whose first reader is the job
		# that dies with it.
		start_sleeper
		HOLDER=$SLEEPER
		W acquire --shared --pid "$HOLDER" "$WS" >/dev/null || { bad "setup: acquire --shared failed"; return 1; }
		cmd=(run --shared "$WS" -- true)
		;;
	release_shared)
		start_sleeper
		HOLDER=$SLEEPER
		W acquire --shared --pid "$HOLDER" "$WS" >/dev/null || { bad "setup: acquire --shared failed"; return 1; }
		OWNER=$(W acquire --shared --pid "$HOLDER" "$WS") || { bad "setup: acquire --shared failed"; return 1; }
		tok=$(jq -r .token <<<"$OWNER")
		cmd=(release --token "$tok" "$WS")
		;;
	reclaim_shared)
		setup_dead_reader && setup_dead_reader && setup_garbage || return 1
		cmd=(reclaim --yes)
		;;
	recover_shared)
		# A dead reader beside another dead one, recovered with a
		# command: replaced in its holder directory, then released.
		# (Beside a live reader, recover -- CMD refuses with 75 before
		# it changes anything: a repair never runs beside live readers.)
		setup_dead_reader && setup_dead_reader || return 1
		W inspect --owner "$WS" >"$CELL/expected.json"
		cmd=(recover --expected-owner "$CELL/expected.json" "$WS" -- true)
		;;
	recover_corrupt)
		setup_corrupt || return 1
		cmd=(recover --force --reason "crash matrix" --expected-owner "$CORRUPT_FILE" "$WS")
		;;
	esac
	{ WSLOCK_CRASH_AT=$step timeout -k 5 60 "$WSLOCK_TEST" "${cmd[@]}" \
		</dev/null >"$CELL/crash.out" 2>"$CELL/crash.err"; } 2>/dev/null
	CRASH_STATUS=$?
	# The job that held the lock dies with the crashed command.
	[ -n "$HOLDER" ] && kill_holder "$HOLDER"
	return 0
}

# The run_wait cell: $WS held by a live acquire holder; the crashing run
# waits in the queue with a plain waiter behind it; the holder releases.
# Sets CRASH_STATUS; the second waiter must end with 0 (it got the lock)
# or 69 (the first died holding it: recovery required).
crash_run_wait() {
	local step=$1 tok pid second st
	start_sleeper
	HOLDER=$SLEEPER
	OWNER=$(W acquire --pid "$HOLDER" "$WS") || { bad "setup: acquire failed"; return 1; }
	tok=$(jq -r .token <<<"$OWNER")
	# Started directly (not under timeout), so that $! is the pid its
	# queue entry names; cleanup kills them, every wait below is bounded.
	{ WSLOCK_CRASH_AT=$step "$WSLOCK_TEST" run "$WS" -- true \
		</dev/null >"$CELL/crash.out" 2>"$CELL/crash.err" & } 2>/dev/null
	pid=$!
	PIDS+=("$pid")
	wait_for "compgen -G '$WSLOCK_DIR/queue/*.$pid.*' >/dev/null || ! is_running $pid" 30 ||
		{ bad "setup: the waiting run never queued"; return 1; }
	"$WSLOCK" run "$WS" -- true </dev/null >"$CELL/second.out" 2>"$CELL/second.err" &
	second=$!
	PIDS+=("$second")
	# The second is queued behind the first (or the first already died).
	wait_for "compgen -G '$WSLOCK_DIR/queue/*.$second.*' >/dev/null || ! is_running $second" 30 ||
		{ bad "setup: the second waiter never queued"; return 1; }
	W release --token "$tok" "$WS" >/dev/null 2>&1 || { bad "setup: release failed"; return 1; }
	wait_for "! is_running $pid && ! is_running $second" 60 ||
		{ bad "a waiter did not finish after the release"; return 1; }
	{ wait "$pid"; } 2>/dev/null
	CRASH_STATUS=$?
	wait "$second"
	st=$?
	case $st in
	0 | 69) ;;
	*) bad "the waiter behind exited $st: $(head -c 300 "$CELL/second.err")" ;;
	esac
	kill_holder "$HOLDER"
	return 0
}

# acquire -n of $1 for a live holder: prints "ok" (then released) or the
# error code; anything else is reported as "exit N".
try_acquire() {
	local out st
	start_sleeper
	out=$(W acquire -n --pid "$SLEEPER" "$1" 2>/dev/null)
	st=$?
	if [ "$st" = 0 ]; then
		if W release --token "$(jq -r .token <<<"$out")" "$1" >"$CELL/rel.out" 2>&1; then
			echo ok
		else
			echo "release failed: $(cat "$CELL/rel.out")"
		fi
	elif [ "$st" = 69 ] && jq -e '.error.code == "WSLOCK_RECOVERY_REQUIRED"' <<<"$out" >/dev/null 2>&1; then
		echo RECOVERY_REQUIRED
	else
		echo "exit $st: $(jq -r '.error.code // empty' <<<"$out" 2>/dev/null)"
	fi
	kill_holder "$SLEEPER"
}

# run_multi's second workspace after a crash: free, or held by a dead
# owner (never live, never corrupt); an exact recover then clears it, so
# that the checks below see $WS alone.
check_other() {
	local insp state live
	insp=$(W inspect "$OTHER" 2>"$CELL/other.err") || { bad "inspect of the second workspace failed"; return; }
	state=$(jq -r .state <<<"$insp")
	live=$(jq -r .liveness <<<"$insp")
	case $state in
	free) ;;
	held)
		[ "$live" = dead ] || bad "second workspace held with liveness $live (want dead)"
		W inspect --owner "$OTHER" >"$CELL/other.json"
		W recover --expected-owner "$CELL/other.json" "$OTHER" >/dev/null 2>"$CELL/other.err" ||
			bad "exact recover of the second workspace failed: $(cat "$CELL/other.err")"
		;;
	*) bad "second workspace $state" ;;
	esac
}

# The invariants after a crash; appends failures to CELL_ERR.
check_invariants() {
	local col=$1 insp state live all n got f
	[ "$col" = run_multi ] && check_other
	insp=$(W inspect "$WS" 2>"$CELL/inspect.err") || { bad "inspect failed: $(cat "$CELL/inspect.err")"; return; }
	state=$(jq -r .state <<<"$insp")
	live=$(jq -r .liveness <<<"$insp")
	case $state in
	free) ;;
	held | retained)
		[ "$live" = dead ] || bad "state $state with liveness $live (want dead)"
		;;
	corrupt)
		# Only the cell that starts from a corrupt lock may still have it.
		[ "$col" = recover_corrupt ] && cmp -s "$WSLOCK_DIR/locks/$(lock_key_of "$WS")/owner.json" "$CORRUPT_FILE" ||
			bad "lock is corrupt: $(jq -c .problem <<<"$insp")"
		;;
	*) bad "inspect state '$state'" ;;
	esac
	all=$(W inspect --all 2>/dev/null) || { bad "inspect --all failed"; return; }
	n=$(jq '.locks | length' <<<"$all")
	[ "$n" -le 1 ] || bad "$n locks in the tree (two owners)"
	[ "$n" = 0 ] || jq -e --arg w "$WS" '.locks[0].workspace_root == $w' <<<"$all" >/dev/null ||
		bad "a lock on another workspace: $(jq -c '[.locks[].workspace_root]' <<<"$all")"
	[ "$n" = 0 ] || [ "$state" != free ] || bad "inspect says free but --all lists a lock"
	jq -e '[.locks[] | select(.state == "corrupt")] | length == 0' <<<"$all" >/dev/null ||
		[ "$col" = recover_corrupt ] || bad "inspect --all lists a corrupt lock"

	# Overlaps stay visible (markers before publish) and orphans are ignored.
	if [ "$state" = free ]; then
		want=ok
	elif [ "$state" = corrupt ]; then
		want="exit 65: WSLOCK_LOCK_CORRUPT"
	else
		want=RECOVERY_REQUIRED
	fi
	for f in "$WS" "$PARENT" "$CHILD"; do
		got=$(try_acquire "$f")
		[ "$got" = "$want" ] || bad "acquire -n ${f#"$CELL"/}: $got (want $want)"
	done
	got=$(try_acquire "$SIB")
	[ "$got" = ok ] || bad "acquire -n of the sibling: $got"

	# An exact recover always succeeds when something is held (a shared
	# lock: once per dead reader, each by its own document).
	n=0
	while { [ "$state" = held ] || [ "$state" = retained ]; } && [ "$n" -lt 4 ]; do
		n=$((n + 1))
		W inspect --owner "$WS" >"$CELL/now.json" || bad "inspect --owner failed"
		got=$(W recover --expected-owner "$CELL/now.json" "$WS" 2>"$CELL/recover.err")
		[ $? = 0 ] && jq -e '.action == "recovered"' <<<"$got" >/dev/null ||
			{ bad "exact recover failed: $(cat "$CELL/recover.err")"; break; }
		state=$(W inspect "$WS" | jq -r .state)
	done
	if [ "$state" = corrupt ]; then
		got=$(W recover --force --reason "crash matrix check" --expected-owner "$CORRUPT_FILE" "$WS" 2>"$CELL/recover.err")
		[ $? = 0 ] || bad "exact recover of the corrupt lock failed: $(cat "$CELL/recover.err")"
	fi
	state=$(W inspect "$WS" | jq -r .state)
	[ "$state" = free ] || bad "after recover the workspace is $state"

	# No garbage survives reclaim --yes.
	W reclaim --yes >"$CELL/reclaim.out" 2>"$CELL/reclaim.err" || bad "reclaim --yes failed: $(cat "$CELL/reclaim.err")"
	got=$(wsl_registry_leftovers "$WSLOCK_DIR") || bad "not empty after reclaim --yes: $got"
	# The journal never keeps a half-written line.
	got=$(wsl_journal_problems "$WSLOCK_DIR/journal.jsonl") || bad "$got"
	got=$(try_acquire "$WS")
	[ "$got" = ok ] || bad "final acquire: $got"
}

# ---------------------------------------------------------------- the matrix

declare -A RESULT
declare -a FAILS NOTES
pass=0 fail=0 na=0 i=0
for step in "${STEPS[@]}"; do
	for col in "${COLS[@]}"; do
		i=$((i + 1))
		# CRASH_STEPS / CRASH_COLS (space-separated) run a part of it.
		[ -z "${CRASH_STEPS:-}" ] || [[ " $CRASH_STEPS " == *" $step "* ]] || { RESULT[$step,$col]=-; continue; }
		[ -z "${CRASH_COLS:-}" ] || [[ " $CRASH_COLS " == *" $col "* ]] || { RESULT[$step,$col]=-; continue; }
		new_cell "c$i"
		expected=0
		[[ " ${EXPECT[$col]} " == *" $step "* ]] && expected=1
		CRASH_STATUS=
		if ! crash_run "$col" "$step"; then
			RESULT[$step,$col]=FAIL
			FAILS+=("$step × ${HEAD[$col]}: $CELL_ERR")
			fail=$((fail + 1))
			continue
		fi
		if [ "$CRASH_STATUS" != 137 ]; then
			if [ "$expected" = 1 ]; then
				RESULT[$step,$col]=FAIL
				FAILS+=("$step × ${HEAD[$col]}: step not reached (exit $CRASH_STATUS: $(head -c 300 "$CELL/crash.err"))")
				fail=$((fail + 1))
			else
				RESULT[$step,$col]=n/a
				na=$((na + 1))
			fi
			continue
		fi
		[ "$expected" = 1 ] || NOTES+=("$step × ${HEAD[$col]}: reached although not listed as expected")
		check_invariants "$col"
		if [ -z "$CELL_ERR" ]; then
			RESULT[$step,$col]=PASS
			pass=$((pass + 1))
			[ "${CRASH_KEEP:-0}" = 1 ] || rm -rf "$CELL"
		else
			RESULT[$step,$col]=FAIL
			FAILS+=("$step × ${HEAD[$col]}: $CELL_ERR")
			fail=$((fail + 1))
		fi
		[ "$VERBOSE" = 1 ] && echo "$step × $col: ${RESULT[$step,$col]}" >&2
	done
done

# ---------------------------------------------------------------- report

w0=4
for s in "${STEPS[@]}"; do [ ${#s} -gt $w0 ] && w0=${#s}; done
declare -A CW
for col in "${COLS[@]}"; do
	CW[$col]=${#HEAD[$col]}
	[ "${CW[$col]}" -ge 4 ] || CW[$col]=4
done
printf '%-*s' "$w0" "step"
for col in "${COLS[@]}"; do printf ' | %-*s' "${CW[$col]}" "${HEAD[$col]}"; done
printf '\n'
printf '%*s' "$w0" '' | tr ' ' '-'
for col in "${COLS[@]}"; do printf -- '-+-%s' "$(printf '%*s' "${CW[$col]}" '' | tr ' ' '-')"; done
printf '\n'
for s in "${STEPS[@]}"; do
	printf '%-*s' "$w0" "$s"
	for col in "${COLS[@]}"; do printf ' | %-*s' "${CW[$col]}" "${RESULT[$s,$col]}"; done
	printf '\n'
done
printf '\ncrash matrix: %d steps x %d commands: %d passed, %d failed, %d n/a\n' \
	"${#STEPS[@]}" "${#COLS[@]}" "$pass" "$fail" "$na"
for n in "${NOTES[@]}"; do printf 'note: %s\n' "$n"; done
for f in "${FAILS[@]}"; do printf 'FAIL: %s\n' "$f"; done
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
