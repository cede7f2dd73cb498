# Shared helpers for the wslock black-box tests (bats-core >= 1.5).
#
# Every test gets its own registry ($WSLOCK_DIR under $BATS_TEST_TMPDIR) and
# its own workspaces.  Background processes started through the helpers here
# are recorded in $BATS_TEST_TMPDIR/.pids and killed in teardown.  Nothing
# relies on sleeps for correctness: waits poll a condition with a bound.

bats_require_minimum_version 1.5.0

# is_running, start_ticks, wait_for, lock_key_of and the other helpers the
# crash matrix and the stress test use too.
# shellcheck source=tests/lib.sh
. "${BASH_SOURCE[0]%/*}/lib.sh"

WSLOCK=${WSLOCK:-$BATS_TEST_DIRNAME/../wslock}

# The exact, sorted key set of a schema 2 owner document (DESIGN §3), and of
# a schema 1 document as 0.1 wrote it.
OWNER_KEYS='["acquired_at","boot_id","host","identity_policy","kind","machine_id","operation_id","pid","pid_namespace","pid_start_ticks","purpose","recovery_of","schema_version","token","workspace_fs","workspace_fs_path","workspace_root"]'
OWNER_KEYS_V1='["acquired_at","boot_id","host","identity_policy","kind","operation_id","pid","pid_start_ticks","purpose","recovery_of","schema_version","token","workspace_root"]'

setup() {
	# A missing binary is a failure, not a skip: a broken build must not
	# pass as an all-skipped suite.
	[ -x "$WSLOCK" ] || fail "wslock binary not found at $WSLOCK (run make first)"
	# The suite may itself run under wslock or with a user's settings.
	wsl_clean_env
	export WSLOCK_DIR=$BATS_TEST_TMPDIR/reg
	: >"$BATS_TEST_TMPDIR/.pids"
	: >"$BATS_TEST_TMPDIR/.holds"
	HOLD_N=0
	if declare -F local_setup >/dev/null; then local_setup; fi
}

teardown() {
	local d p t
	# Let every holder's child finish normally first.
	if [ -f "$BATS_TEST_TMPDIR/.holds" ]; then
		while read -r d; do
			[ -n "$d" ] && touch "$d/GO" 2>/dev/null
		done <"$BATS_TEST_TMPDIR/.holds"
	fi
	[ -f "$BATS_TEST_TMPDIR/.pids" ] || return 0
	# Only processes that are still the ones tracked (same start time) are
	# signalled: a pid may have been reused by an unrelated process.
	while read -r p t; do
		tracked_alive "$p" "$t" && kill -TERM "$p" 2>/dev/null
	done <"$BATS_TEST_TMPDIR/.pids"
	while read -r p t; do
		if ! wait_for "! tracked_alive $p '$t'" 5 2>/dev/null; then
			tracked_alive "$p" "$t" && kill -KILL "$p" 2>/dev/null
			wait_for "! tracked_alive $p '$t'" 5 2>/dev/null
		fi
		wait "$p" 2>/dev/null || true
	done <"$BATS_TEST_TMPDIR/.pids"
	return 0
}

# tracked_alive PID TICKS: PID runs and still has start time TICKS ("-":
# it had already ended when tracked; empty: a bare pid line, trusted).
tracked_alive() {
	[ "$2" != - ] && is_running "$1" &&
		{ [ -z "$2" ] || [ "$(start_ticks "$1" 2>/dev/null)" = "$2" ]; }
}

fail() {
	printf '%s\n' "$*" >&2
	return 1
}

# wsl ARGS...: the binary, bounded so that a hang fails the test instead of
# the whole suite.
wsl() {
	timeout -k 5 30 "$WSLOCK" "$@"
}

# wait_exit PID [SECONDS=30]: wait (bounded) until PID has ended; if it is
# our child, reap it and set WAIT_STATUS to its exit status.
wait_exit() {
	local pid=$1 secs=${2:-30}
	WAIT_STATUS=
	wait_for "! is_running $pid" "$secs" || return 1
	WAIT_STATUS=0
	wait "$pid" 2>/dev/null || WAIT_STATUS=$?
	return 0
}

# track_pid PID: kill PID in teardown if it still runs (PID and start time
# recorded now).
track_pid() {
	local t
	t=$(start_ticks "$1" 2>/dev/null)
	echo "$1 ${t:--}" >>"$BATS_TEST_TMPDIR/.pids"
}

# start_sleeper: a live process to name as holder; sets SLEEPER_PID.
start_sleeper() {
	wsl_start_sleeper 300
	track_pid "$SLEEPER_PID"
}

# dead_pid: the pid of a process that has exited (and been reaped).
dead_pid() {
	local p
	sh -c 'exit 0' </dev/null >/dev/null 2>&1 3>&- &
	p=$!
	wait "$p" || true
	echo "$p"
}

# W NAME: the path of workspace NAME under $BATS_TEST_TMPDIR/ws;
# mkws NAME...: create those directories (with parents).
W() { printf '%s/ws/%s' "$BATS_TEST_TMPDIR" "$1"; }
mkws() {
	local n
	for n in "$@"; do mkdir -p "$(W "$n")"; done
}

canon() { realpath -e "$1"; }

# lock_dir_of WS: the registry directory of WS's lock (lock_key_of: lib.sh).
lock_dir_of() {
	printf '%s/locks/%s' "$WSLOCK_DIR" "$(lock_key_of "$1")"
}

# hold [RUN-OPTIONS...] WS: start `wslock run ... WS -- child` in the
# background and wait until the child runs.  Sets HOLD_PID (wslock),
# HOLD_DIR (READY, GO, child.pid, out, err), HOLD_CHILD (child pid).
# The child exits 0 once $HOLD_DIR/GO exists; on SIGTERM it exits 7.
hold() {
	HOLD_N=$((HOLD_N + 1))
	HOLD_DIR=$BATS_TEST_TMPDIR/hold.$HOLD_N
	mkdir -p "$HOLD_DIR"
	echo "$HOLD_DIR" >>"$BATS_TEST_TMPDIR/.holds"
	"$WSLOCK" run "$@" -- sh -c '
		echo $$ >"$1/child.pid"
		trap "touch \"$1/TERMED\"; exit 7" TERM
		touch "$1/READY"
		while [ ! -e "$1/GO" ]; do sleep 0.05; done' sh "$HOLD_DIR" \
		</dev/null >"$HOLD_DIR/out" 2>"$HOLD_DIR/err" 3>&- &
	HOLD_PID=$!
	track_pid "$HOLD_PID"
	if ! wait_for "[ -e '$HOLD_DIR/READY' ] || ! is_running $HOLD_PID" 20 ||
		[ ! -e "$HOLD_DIR/READY" ]; then
		fail "hold $*: holder did not start; stderr: $(cat "$HOLD_DIR/err")"
		return 1
	fi
	HOLD_CHILD=$(cat "$HOLD_DIR/child.pid")
	track_pid "$HOLD_CHILD"
}

# unhold [DIR PID]: let a holder's child finish; wait for wslock; sets
# WAIT_STATUS.
unhold() {
	local dir=${1:-$HOLD_DIR} pid=${2:-$HOLD_PID}
	touch "$dir/GO"
	wait_exit "$pid" 30 || fail "holder $pid did not exit"
}

# acquire_as PID WS [OPTS...]: acquire WS for PID, owner doc in $OWNER.
acquire_as() {
	local pid=$1 ws=$2
	shift 2
	OWNER=$(wsl acquire --pid "$pid" "$@" "$ws") || fail "acquire $ws for $pid failed: $OWNER"
}

# edit_owner WS JQ-FILTER: rewrite WS's owner.json through jq in place
# (same inode, mode kept 0600).
edit_owner() {
	local f tmp
	f=$(lock_dir_of "$1")/owner.json
	tmp=$BATS_TEST_TMPDIR/.edit.$$
	jq -c "$2" "$f" >"$tmp" || return 1
	printf '%s' "$(cat "$tmp")" >"$f"
	chmod 0600 "$f"
}

# put_owner WS < CONTENT: replace WS's owner.json bytes with stdin.
put_owner() {
	local f
	f=$(lock_dir_of "$1")/owner.json
	cat >"$f"
	chmod 0600 "$f"
}

# registry_snapshot [--strict] [DIR]: paths, types, modes, owners, sizes,
# file mtimes and contents; --strict adds directory mtimes (so that even a
# staged-and-removed temporary file shows).
registry_snapshot() {
	local strict=0 d
	if [ "${1:-}" = --strict ]; then strict=1; shift; fi
	d=${1:-$WSLOCK_DIR}
	if [ ! -e "$d" ] && [ ! -L "$d" ]; then echo "ABSENT $d"; return 0; fi
	if [ "$strict" = 1 ]; then
		find "$d" -printf '%p %y %m %U:%G %s %T@ -> %l\n' | LC_ALL=C sort
	else
		find "$d" \( -type d -printf '%p %y %m %U:%G\n' \) -o \
			-printf '%p %y %m %U:%G %s %T@ -> %l\n' | LC_ALL=C sort
	fi
	find "$d" -type f -exec b2sum {} + | LC_ALL=C sort
}

# assert_same_snapshot BEFORE AFTER
assert_same_snapshot() {
	if [ "$1" != "$2" ]; then
		diff <(printf '%s\n' "$1") <(printf '%s\n' "$2") >&2
		fail "registry changed on disk"
	fi
}

# assert_json_error CODE: after `run --separate-stderr` of a non-run command:
# stdout is {"error":{"code":CODE,"message":non-empty}} and stderr is one
# line "wslock: ...".
assert_json_error() {
	local code=$1
	jq -e --arg c "$code" \
		'.error.code == $c and (.error.message | type == "string" and length > 0)' \
		<<<"$output" >/dev/null ||
		fail "expected JSON error $code on stdout, got: '$output' (stderr: '$stderr')"
	[ "$(jq -s length <<<"$output")" = 1 ] || fail "more than one JSON value on stdout: $output"
	assert_one_stderr_line
}

# assert_usage_error: exit-64 checks that leave the one-line rule to
# errors.bats: stdout is the WSLOCK_USAGE error object (or, for run,
# empty: pass --run) and stderr starts with "wslock: ".
assert_usage_error() {
	case ${1:-} in
	--run)
		[ -z "$output" ] || fail "run printed on stdout: '$output'" ;;
	--no-json)
		[ -z "$output" ] || jq -e '.error.code == "WSLOCK_USAGE"' <<<"$output" >/dev/null ||
			fail "stdout is neither empty nor a WSLOCK_USAGE error: '$output'" ;;
	*)
		jq -e '.error.code == "WSLOCK_USAGE" and (.error.message | length > 0)' <<<"$output" >/dev/null ||
			fail "expected JSON error WSLOCK_USAGE on stdout, got: '$output' (stderr: '$stderr')" ;;
	esac
	# One line naming the problem, then at most one hint (issue: usage
	# errors print one line and a hint, "try 'wslock run --help'").
	[[ ${stderr_lines[0]:-} == "wslock: "*"[WSLOCK_USAGE]" ]] ||
		fail "first stderr line is not 'wslock: ... [WSLOCK_USAGE]': '$stderr'"
	case ${#stderr_lines[@]} in
	1) ;;
	2) [[ ${stderr_lines[1]} == "try 'wslock "*"--help'" ]] ||
		fail "second stderr line is not a --help hint: '$stderr'" ;;
	*) fail "expected one line and a hint on stderr, got: '$stderr'" ;;
	esac
}

# assert_json_error_after_wait CODE: as assert_json_error, but the waiting
# notice may precede the failure line (the command had to wait).
assert_json_error_after_wait() {
	local code=$1
	jq -e --arg c "$code" \
		'.error.code == $c and (.error.message | type == "string" and length > 0)' \
		<<<"$output" >/dev/null ||
		fail "expected JSON error $code on stdout, got: '$output' (stderr: '$stderr')"
	[ "${#stderr_lines[@]}" -ge 1 ] && [ "${#stderr_lines[@]}" -le 2 ] ||
		fail "expected the failure line (after at most one notice), got: '$stderr'"
	[[ ${stderr_lines[-1]} == "wslock: "* ]] || fail "last stderr line: '$stderr'"
}

# assert_one_stderr_line: exactly one stderr line, starting with "wslock: ".
assert_one_stderr_line() {
	[ "${#stderr_lines[@]}" -eq 1 ] ||
		fail "expected one stderr line, got ${#stderr_lines[@]}: '$stderr'"
	[[ ${stderr_lines[0]} == "wslock: "* ]] ||
		fail "stderr line does not start with 'wslock: ': '$stderr'"
}

# assert_run_error CODE: after `run --separate-stderr wsl run ...` that
# failed before the child started: nothing on stdout, one stderr line that
# names CODE.
assert_run_error() {
	[ -z "$output" ] || fail "run printed on stdout: '$output'"
	assert_one_stderr_line
	[[ $stderr == *"$1"* ]] || fail "stderr does not name $1: '$stderr'"
}

# jq_ok FILTER [JSON=$output]: assert jq -e FILTER holds.
jq_ok() {
	local json=${2-$output}
	jq -e "$1" <<<"$json" >/dev/null ||
		fail "jq assertion failed: $1
on: $json"
}

# json_get FILTER [JSON=$output]
json_get() {
	jq -r "$1" <<<"${2-$output}"
}

# inspect_json WS: inspect's JSON for WS (asserts exit 0).
inspect_json() {
	INSPECT=$(wsl inspect "$@") || fail "inspect $* failed: $INSPECT"
}

# dead_acquired WS [ACQUIRE-OPTIONS...]: WS acquired for a sleeper that is
# then killed and reaped, so its owner is provably dead. Sets DEAD_OWNER.
dead_acquired() {
	local ws=$1 p
	shift
	start_sleeper
	p=$SLEEPER_PID
	acquire_as "$p" "$ws" "$@"
	kill -KILL "$p"
	wait_exit "$p" 10 2>/dev/null
	DEAD_OWNER=$OWNER
}

# One etcd member for a whole bats file (etcd.bats, cli.bats), from
# setup_file: started on free loopback ports when etcd and etcdctl are
# installed (WSL_ETCD_EP, WSL_ETCD_DIR), else WSL_ETCD_MISSING is set and
# need_etcd skips. etcd_teardown_file stops it.
etcd_setup_file() {
	if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
		export WSL_ETCD_MISSING=1
		return 0
	fi
	export WSL_ETCD_DIR=$BATS_FILE_TMPDIR/etcd1
	WSL_ETCD_EP=$("$BATS_TEST_DIRNAME/etcd/cluster.sh" start "$WSL_ETCD_DIR")
	export WSL_ETCD_EP
}

etcd_teardown_file() {
	if [ -n "${WSL_ETCD_DIR:-}" ]; then
		"$BATS_TEST_DIRNAME/etcd/cluster.sh" stop "$WSL_ETCD_DIR"
	fi
	return 0
}

need_etcd() {
	[ -z "${WSL_ETCD_MISSING:-}" ] ||
		skip "etcd is not installed (apt-get install etcd-server etcd-client)"
}

# etcd_use [TAG]: from local_setup, a test of the file's etcd member
# (need_etcd skips without one): the backend and endpoint variables, and
# with TAG a key prefix of the test's own, /wslock-TAGN/ (N: the test's
# number), so that no key of another test is seen.
etcd_use() {
	need_etcd
	export WSLOCK_BACKEND=etcd WSLOCK_ETCD_ENDPOINTS=$WSL_ETCD_EP ETCDCTL_API=3
	if [ $# -gt 0 ]; then
		export WSLOCK_ETCD_PREFIX="/wslock-$1$BATS_TEST_NUMBER/"
	fi
}

# ectl ARGS...: etcdctl against the file's etcd member, bounded.
ectl() {
	etcdctl --endpoints="$WSL_ETCD_EP" --dial-timeout=2s --command-timeout=5s "$@"
}

# queued PID: PID has an entry in the local registry's FIFO wait queue
# ($WSLOCK_DIR/queue/SEQ.PID.RAND).
queued() {
	compgen -G "$WSLOCK_DIR/queue/*.$1.*" >/dev/null
}

# queue_waiter NAME RUN-ARGS...: a background `wslock run RUN-ARGS -- CMD`
# whose command appends NAME to $BATS_TEST_TMPDIR/order; waits (bounded)
# until it is queued, and fails when it ended before. Sets WAITER_PID.
queue_waiter() {
	local name=$1
	shift
	"$WSLOCK" run "$@" -- sh -c 'echo "$1" >>"$2/order"' sh "$name" "$BATS_TEST_TMPDIR" \
		</dev/null >"$BATS_TEST_TMPDIR/$name.out" 2>"$BATS_TEST_TMPDIR/$name.err" 3>&- &
	WAITER_PID=$!
	track_pid "$WAITER_PID"
	wait_for "queued $WAITER_PID || ! is_running $WAITER_PID" 20 ||
		fail "waiter $name never queued"
	queued "$WAITER_PID" || fail "waiter $name ended before it queued: $(cat "$BATS_TEST_TMPDIR/$name.err")"
}
