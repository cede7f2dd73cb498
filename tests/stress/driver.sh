#!/usr/bin/env bash
# tests/stress/driver.sh - race stress: STRESS_N contenders (default 32), each
# doing STRESS_ITER operations (default 12) on a tree of nested and sibling
# workspaces, then tests/stress/check.sh verifies from the contenders' own
# logs that no two overlapping workspaces were ever held at once and that
# every operation exited as expected.
#
# Operations (picked by a seeded $RANDOM per contender):
#   run            wslock run -w W WS -- hold                   0 | 69 | 75
#   nested         wslock run -w W WS -- sh -c 'wslock run -n WS -- hold &'
#                  (the outer waits for its nested run)          0 | 69 | 75
#   run-fail       wslock run --retain-on-failure ... exit 3     3 | 69 | 75
#   acquire        acquire --pid $BASHPID; hold; release         0 | 69 | 75, release 0
#   abandon        acquire for a subshell that then dies          0 | 69 | 75 (leaves a dead owner)
#   reclaim-dead   acquire --reclaim-dead; hold; release          0 | 69 | 75, release 0
#   recover        inspect --all, pick a dead or retained lock,
#                  recover --expected-owner -- hold              0 | 65 | 66 | 75
#                  (75: a retained lock whose run has not exited yet)
#   reclaim        reclaim --yes -- hold (in each workspace)      0
# "hold" logs START, sleeps STRESS_HOLD_MS, logs END (tests/stress/stamp.c,
# CLOCK_MONOTONIC). At the end everything left is recovered or reclaimed and
# the registry must be empty.
#
# With STRESS_ALIAS=1 (the default where a mount namespace can be made:
# root with CAP_SYS_ADMIN), the tree is also bind-mounted at a second path
# in a private mount namespace and each operation names its workspace by
# either path at random: the same directory through two spellings must be
# one lock (DESIGN.md section 3). The logs name the real path.
#
# Environment: STRESS_N, STRESS_ITER, STRESS_SEED, STRESS_HOLD_MS (default 5),
# STRESS_WAIT (-w seconds, default 10), STRESS_KEEP=1 keeps the scratch dir,
# STRESS_ALIAS (1/0), WSLOCK (binary), CC.
set -u

if [ "${STRESS_ALIAS:-1}" = 1 ] && [ -z "${STRESS_IN_MOUNT_NS:-}" ]; then
	if unshare -m --propagation private true 2>/dev/null; then
		STRESS_IN_MOUNT_NS=1 exec unshare -m --propagation private "$0" "$@"
	fi
	echo "stress: no mount namespace here (no CAP_SYS_ADMIN): no bind-mount alias" >&2
fi

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WSLOCK=${WSLOCK:-$ROOT/wslock}
N=${STRESS_N:-32}
ITER=${STRESS_ITER:-12}
SEED=${STRESS_SEED:-$$}
HOLD_MS=${STRESS_HOLD_MS:-5}
WAIT=${STRESS_WAIT:-10}
DEADLINE=${STRESS_TIMEOUT:-900}
# shellcheck source=tests/lib.sh
. "$ROOT/tests/lib.sh"

[ -x "$WSLOCK" ] || { echo "stress: $WSLOCK is not built (make)" >&2; exit 2; }
wsl_need stress jq timeout || exit 2
wsl_clean_env

S=$(mktemp -d "${TMPDIR:-/tmp}/wslock-stress.XXXXXX")
cleanup() {
	[ -n "${ALIAS:-}" ] && umount "$ALIAS" 2>/dev/null
	[ "${STRESS_KEEP:-0}" = 1 ] && { echo "stress: kept $S" >&2; return; }
	rm -rf "$S"
}
trap cleanup EXIT

# A private copy of the binary (a rebuild meanwhile must not swap it), and
# the logger.
W=$(wsl_private_copy "$WSLOCK" "$S") || exit 2
STAMP=$S/stamp
${CC:-cc} -O2 -o "$STAMP" "$HERE/stamp.c" || { echo "stress: cannot build stamp" >&2; exit 2; }

export WSLOCK_DIR=$S/reg
mkdir -p "$S/logs"
for d in t t/a t/a/x t/a/x/deep t/a/y t/b t/b/x t/c; do mkdir -p "$S/ws/$d"; done
TREE=$(realpath "$S/ws/t")
WSS=("$TREE" "$TREE/a" "$TREE/a/x" "$TREE/a/x/deep" "$TREE/a/y" "$TREE/b" "$TREE/b/x" "$TREE/c")
ALIAS=
if [ -n "${STRESS_IN_MOUNT_NS:-}" ]; then
	mkdir -p "$S/alias" && mount --bind "$TREE" "$S/alias" && ALIAS=$(realpath "$S/alias") ||
		{ echo "stress: cannot bind-mount the alias" >&2; exit 2; }
fi
# spelled WS: WS (real) or, half of the time, the same directory through
# the alias.
spelled() {
	if [ -n "$ALIAS" ] && ((RANDOM % 2)); then
		printf '%s\n' "$ALIAS${1#"$TREE"}"
	else
		printf '%s\n' "$1"
	fi
}
# real WS: the real path of a workspace named either way.
real() {
	if [ -n "$ALIAS" ] && [[ $1 == "$ALIAS" || $1 == "$ALIAS"/* ]]; then
		printf '%s\n' "$TREE${1#"$ALIAS"}"
	else
		printf '%s\n' "$1"
	fi
}

wsl() { timeout -k 5 120 "$W" "$@"; }

# contender ID: ITER operations; its log is $S/logs/ID.log.
contender() {
	local id=$1 log=$S/logs/$1.log j r ws arg tag st out tok kind me
	local -a cands
	# $BASHPID inside $(...) would name the short-lived substitution shell.
	me=$BASHPID
	RANDOM=$((SEED + id * 7919))
	for ((j = 0; j < ITER; j++)); do
		r=$((RANDOM % 100))
		ws=${WSS[$((RANDOM % ${#WSS[@]}))]}
		arg=$(spelled "$ws")
		tag=$id.$j
		if ((r >= 24 && r < 30)); then
			# The work is done by a run nested under the outer one, in
			# the background: the outer must not let go before it ends.
			kind=nested
			wsl run -q -w "$WAIT" "$ws" -- sh -c '
				"$0" run -q -n "$1" -- "$2" hold "$3" "$1" "$4" "$5" </dev/null >/dev/null &
				exit 0' "$W" "$ws" "$STAMP" "$log" "$tag" "$HOLD_MS" \
				</dev/null >/dev/null 2>>"$S/logs/$id.err"
			st=$?
		elif ((r < 30)); then
			kind=run
			wsl run -q -w "$WAIT" "$arg" -- "$STAMP" hold "$log" "$ws" "$tag" "$HOLD_MS" \
				</dev/null >/dev/null 2>>"$S/logs/$id.err"
			st=$?
		elif ((r < 35)); then
			kind=run-fail
			wsl run -q --retain-on-failure -w "$WAIT" "$arg" -- sh -c '"$0" hold "$1" "$2" "$3" "$4"; exit 3' \
				"$STAMP" "$log" "$ws" "$tag" "$HOLD_MS" </dev/null >/dev/null 2>>"$S/logs/$id.err"
			st=$?
		elif ((r < 55)) || ((r >= 88 && r < 95)); then
			kind=acquire
			((r >= 88)) && kind=reclaim-dead
			local -a opt=()
			[ "$kind" = reclaim-dead ] && opt=(--reclaim-dead)
			out=$(wsl acquire -q "${opt[@]}" -w "$WAIT" --pid "$me" "$arg" 2>>"$S/logs/$id.err")
			st=$?
			if [ "$st" = 0 ]; then
				"$STAMP" hold "$log" "$ws" "$tag" "$HOLD_MS"
				tok=$(jq -r .token <<<"$out")
				wsl release --token "$tok" "$arg" >/dev/null 2>>"$S/logs/$id.err"
				echo "OP release $ws $? $tag" >>"$log"
			fi
		elif ((r < 63)); then
			kind=abandon
			# The holder is this subshell; it exits without releasing.
			(
				sub=$BASHPID
				out=$(wsl acquire -q -w "$WAIT" --pid "$sub" "$arg" 2>>"$S/logs/$id.err")
				st=$?
				[ "$st" = 0 ] && "$STAMP" hold "$log" "$ws" "$tag" "$HOLD_MS"
				exit "$st"
			)
			st=$?
		elif ((r < 80)); then
			kind=recover
			mapfile -t cands < <(wsl inspect --all 2>/dev/null |
				jq -r '.locks[] | select(.state == "retained" or .liveness == "dead") | .workspace_root' 2>/dev/null)
			if [ "${#cands[@]}" = 0 ]; then
				kind=recover-none
				st=0
				ws=-
			else
				arg=${cands[$((RANDOM % ${#cands[@]}))]}
				ws=$(real "$arg")
				wsl inspect --owner "$arg" >"$S/logs/$id.expected" 2>/dev/null
				wsl recover -q --expected-owner "$S/logs/$id.expected" "$arg" -- \
					"$STAMP" hold "$log" "$ws" "$tag" "$HOLD_MS" </dev/null >/dev/null 2>>"$S/logs/$id.err"
				st=$?
			fi
		else
			kind=reclaim
			ws=-
			wsl reclaim -q --yes -- "$STAMP" hold "$log" - "$tag" "$HOLD_MS" \
				</dev/null >"$S/logs/$id.reclaim" 2>>"$S/logs/$id.err"
			st=$?
		fi
		echo "OP $kind $ws $st $tag" >>"$log"
	done
}

echo "stress: $N contenders x $ITER operations on ${#WSS[@]} workspaces (seed $SEED, hold ${HOLD_MS}ms, -w $WAIT${ALIAS:+, each also through a bind-mount alias})"
start=$(date +%s)
pids=()
for ((c = 0; c < N; c++)); do
	contender "$c" &
	pids+=($!)
done
# Bounded wait for all contenders.
any_alive() {
	local p
	for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done
	return 1
}
if ! wait_for '! any_alive' "$DEADLINE" 2>/dev/null; then
	echo "stress: contenders still running after ${DEADLINE}s" >&2
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	exit 1
fi
wait
elapsed=$(($(date +%s) - start))

# Leave nothing behind: recover every retained or dead lock, then reclaim.
final_err=0
for ((k = 0; k < 20; k++)); do
	left=$(wsl inspect --all | jq -r '.locks[] | .workspace_root') || { final_err=1; break; }
	[ -z "$left" ] && break
	while IFS= read -r ws; do
		wsl inspect --owner "$ws" >"$S/final.json" &&
			wsl recover --expected-owner "$S/final.json" "$ws" >/dev/null 2>>"$S/final.err"
	done <<<"$left"
done
wsl reclaim --yes >/dev/null 2>>"$S/final.err" || final_err=1
if ! left=$(wsl_registry_leftovers "$WSLOCK_DIR"); then
	echo "stress: not empty at the end: $left" >&2
	final_err=1
fi
if ! left=$(wsl_journal_problems "$WSLOCK_DIR/journal.jsonl"); then
	echo "stress: $left" >&2
	final_err=1
fi
echo "stress: contenders done in ${elapsed}s; journal: $(wc -l <"$WSLOCK_DIR/journal.jsonl" 2>/dev/null || echo 0) lines"

"$HERE/check.sh" "$S/logs"/*.log
rc=$?
if [ "$final_err" != 0 ]; then
	echo "stress: the registry was not clean at the end: $(cat "$S/final.err" 2>/dev/null)" >&2
	rc=1
fi
if [ "$rc" != 0 ]; then
	STRESS_KEEP=1
	for f in "$S"/logs/*.err; do [ -s "$f" ] && { echo "--- $f"; head -5 "$f"; }; done >&2
fi
exit "$rc"
