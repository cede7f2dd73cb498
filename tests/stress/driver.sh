#!/usr/bin/env bash
# tests/stress/driver.sh - race stress: STRESS_N contenders (default 32), each
# doing STRESS_ITER operations (default 12) on a tree of nested and sibling
# workspaces, then tests/stress/check.sh verifies from the contenders' own
# logs that no two overlapping workspaces were ever held at once and that
# every operation exited as expected.
#
# Operations (picked by a seeded $RANDOM per contender):
#   shared         wslock run --shared -w W WS -- hold          0 | 69 | 75
#                  (a reader: its interval may overlap other readers'
#                  only; a recover or reclaim hook that took over a
#                  reader holds shared too, and says so by its tag)
#   run            wslock run -w W WS -- hold                   0 | 69 | 75
#   multi          wslock run -w W WS WS2 -- hold both          0 | 69 | 75
#                  (two workspaces that do not nest, all or none: an
#                  interval on each, with one tag)
#   multi-shared   the same with --shared (a reader in each)    0 | 69 | 75
#   nested         wslock run -w W WS -- sh -c 'wslock run -n WS -- hold &'
#                  (the outer waits for its nested run, once it
#                  holds)                                        0 | 69 | 75
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
# one lock (DESIGN.md section 3). The logs name the real path. A directory
# outside the tree is also mounted below it, at t/b/m (and at the alias's
# b/m): an operation on t/b/m names it by its own path half of the time,
# and locks on t, t/b and t/b/m must exclude it (a filesystem mounted below
# a workspace belongs to it).
#
# With STRESS_PIDNS=1 (the default where 'unshare -fp --mount-proc' works:
# root with CAP_SYS_ADMIN), every fourth contender runs in its own new pid
# namespace (with its own mount namespace for its /proc: a copy, so the
# registry, the tree and the alias stay visible), and every second one of
# those also in a new UTS namespace under another hostname. By DESIGN.md
# section 4 a `run` holder there is live to everyone (the kernel lock on
# `live`), while an `acquire --pid` holder, and once its run has exited a
# retained lock, is of unknown liveness to every prober outside its pid
# namespace, and every pid-based verdict is unknown between different
# hostnames. So:
#   recover-foreign  recover of a lock whose owner document names another
#                    pid namespace or host than the recoverer's: it must
#                    never take over, only refuse          69 | 65 | 66 | 75
#   reclaim-dead     may meet such owners: they refuse it with 69, as a dead
#                    one does (the journal check below tells them apart)
# and after the run the journal must show that no takeover without --force
# ever took an owner whose liveness was not "dead". The final cleanup runs
# in the driver's own namespaces: a lock left by a contender of another pid
# namespace is unknown to it, and that namespace is gone (its init, the
# contender, has exited, and the kernel killed everything in it), which the
# driver knows and wslock cannot: such a lock is recovered with
# recover --force --reason, after the plain recover refused it with
# WSLOCK_LIVENESS_UNKNOWN; a lock that is still there and is not foreign is
# an error. CLOCK_MONOTONIC, which the stamps use, is one clock for every
# pid and UTS namespace (only a time namespace would offset it).
#
# Environment: STRESS_N, STRESS_ITER, STRESS_SEED, STRESS_HOLD_MS (default 5),
# STRESS_WAIT (-w seconds, default 10), STRESS_KEEP=1 keeps the scratch dir,
# STRESS_ALIAS (1/0), STRESS_PIDNS (1/0), WSLOCK (binary), CC.
set -u

# driver.sh --contender ID [HOSTNAME]: one contender, started by the driver
# inside new namespaces, the shared settings in its environment.
CONTENDER=
if [ "${1:-}" = --contender ]; then
	CONTENDER=$2
	CHOST=${3:-}
fi

if [ -z "$CONTENDER" ] && [ "${STRESS_ALIAS:-1}" = 1 ] && [ -z "${STRESS_IN_MOUNT_NS:-}" ]; then
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

if [ -z "$CONTENDER" ]; then
[ -x "$WSLOCK" ] || { echo "stress: $WSLOCK is not built (make)" >&2; exit 2; }
wsl_need stress jq timeout || exit 2
wsl_clean_env

S=$(mktemp -d "${TMPDIR:-/tmp}/wslock-stress.XXXXXX")
cleanup() {
	[ -n "${MSRC:-}" ] && umount "$TREE/b/m" 2>/dev/null && umount "$ALIAS/b/m" 2>/dev/null
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
for d in t t/a t/a/x t/a/x/deep t/a/y t/b t/b/x t/b/m t/c m; do mkdir -p "$S/ws/$d"; done
TREE=$(realpath "$S/ws/t")
ALIAS= MSRC=
if [ -n "${STRESS_IN_MOUNT_NS:-}" ]; then
	mkdir -p "$S/alias" && mount --bind "$TREE" "$S/alias" && ALIAS=$(realpath "$S/alias") ||
		{ echo "stress: cannot bind-mount the alias" >&2; exit 2; }
	mount --bind "$S/ws/m" "$TREE/b/m" && mount --bind "$S/ws/m" "$ALIAS/b/m" &&
		MSRC=$(realpath "$S/ws/m") ||
		{ echo "stress: cannot mount a directory below the tree" >&2; exit 2; }
fi
# Pid (and UTS) namespaces for a share of the contenders.
PIDNS=
if [ "${STRESS_PIDNS:-1}" = 1 ]; then
	if unshare -fp --mount-proc --kill-child true 2>/dev/null && unshare -u true 2>/dev/null; then
		PIDNS=1
	else
		echo "stress: no pid or UTS namespace here (no CAP_SYS_ADMIN): all contenders in this one" >&2
	fi
fi
# What a contender started in new namespaces needs (--contender).
export S W STAMP TREE ALIAS MSRC
export STRESS_SEED=$SEED
fi
WSS=("$TREE" "$TREE/a" "$TREE/a/x" "$TREE/a/x/deep" "$TREE/a/y" "$TREE/b" "$TREE/b/x" "$TREE/c")
[ -n "$MSRC" ] && WSS+=("$TREE/b/m")
# spelled WS: WS (real) or, half of the time, the same directory through
# the alias; t/b/m half of the time by the path of what is mounted there.
spelled() {
	if [ -n "$MSRC" ] && [[ $1 == "$TREE/b/m" || $1 == "$TREE/b/m"/* ]] && ((RANDOM % 2)); then
		printf '%s\n' "$MSRC${1#"$TREE/b/m"}"
	elif [ -n "$ALIAS" ] && ((RANDOM % 2)); then
		printf '%s\n' "$ALIAS${1#"$TREE"}"
	else
		printf '%s\n' "$1"
	fi
}
# real WS: the real path of a workspace named either way.
real() {
	if [ -n "$MSRC" ] && [[ $1 == "$MSRC" || $1 == "$MSRC"/* ]]; then
		printf '%s\n' "$TREE/b/m${1#"$MSRC"}"
	elif [ -n "$ALIAS" ] && [[ $1 == "$ALIAS" || $1 == "$ALIAS"/* ]]; then
		printf '%s\n' "$TREE${1#"$ALIAS"}"
	else
		printf '%s\n' "$1"
	fi
}

wsl() { timeout -k 5 120 "$W" "$@"; }

# recover_own: a contender in a pid namespace of its own recovers at once
# the lock its last operation left (retained, or dead with its subshell), as
# an operation of its own: to everyone else that owner's liveness is
# unknown, and a waiter would sit out its whole -w. Logs the operation that
# left it, then sets kind, tag and st (the contender's locals) for the
# recover.
recover_own() {
	echo "OP $kind $ws $st $tag" >>"$log"
	kind=recover tag=$tag.r
	wsl inspect --owner "$ws" >"$S/logs/$id.expected" 2>/dev/null
	wsl recover -q --expected-owner "$S/logs/$id.expected" "$ws" -- \
		"$STAMP" hold "$log" "$ws" "$tag" "$HOLD_MS" </dev/null >/dev/null 2>>"$S/logs/$id.err"
	st=$?
}

# The hold of a recover or reclaim hook, which may have taken over one
# reader of a shared lock (then it holds it shared, beside the others): the
# hook asks inspect for the mode of the lock it holds (fixed while it holds
# it) and tags its interval .s when shared. Arguments: W STAMP LOG WS TAG MS.
MODE_HOLD='ws=$3; [ "$ws" = - ] && ws=$WSLOCK_WORKSPACE
	t=$4; [ "$("$0" inspect "$ws" 2>/dev/null | jq -r .mode)" = shared ] && t=$4.s
	exec "$1" hold "$2" "$3" "$t" "$5"'

# multi_partner WS: a workspace of the tree that does not nest with WS
# (neither the tree's root nor the mount below t/b, which nest with
# others by path or by mount), or exit 1 when WS has none.
multi_partner() {
	local w c=()
	[ "$1" = "$TREE" ] || [[ $1 == "$TREE/b/m"* ]] && return 1
	for w in "${WSS[@]}"; do
		[ "$w" = "$TREE" ] || [[ $w == "$TREE/b/m"* ]] && continue
		[[ $w == "$1" || $w == "$1"/* || $1 == "$w"/* ]] && continue
		c+=("$w")
	done
	[ "${#c[@]}" -gt 0 ] || return 1
	printf '%s\n' "${c[$((RANDOM % ${#c[@]}))]}"
}

# contender ID: ITER operations; its log is $S/logs/ID.log.
contender() {
	local id=$1 log=$S/logs/$1.log j r ws ws2 arg tag st out tok kind me
	local -a cands
	local myns myhost
	# $BASHPID inside $(...) would name the short-lived substitution shell.
	me=$BASHPID
	# The namespace and hostname wslock records for this contender's owners.
	myns=$(readlink /proc/self/ns/pid)
	myhost=$(hostname)
	RANDOM=$((SEED + id * 7919))
	for ((j = 0; j < ITER; j++)); do
		r=$((RANDOM % 100))
		ws=${WSS[$((RANDOM % ${#WSS[@]}))]}
		arg=$(spelled "$ws")
		tag=$id.$j
		if ((r < 12)); then
			# A reader: beside other readers, never beside a writer
			# (its interval's tag ends in .s: check.sh).
			kind=shared
			wsl run -q --shared -w "$WAIT" "$arg" -- "$STAMP" hold "$log" "$ws" "$tag.s" "$HOLD_MS" \
				</dev/null >/dev/null 2>>"$S/logs/$id.err"
			st=$?
		elif ((r >= 24 && r < 30)); then
			# The work is done by a run nested under the outer one, in
			# the background: the outer must not let go before it ends.
			# The outer's command exits once the nested run holds (its
			# START is logged) or has ended: the outer waits for a nested
			# run that is running (DESIGN.md section 2), one still starting
			# races with it and may meet another holder. (Its START by
			# exact tag: check.sh --started; a numeric awk compare took
			# N.1's START for N.10's, let the outer go and refused the
			# nested run.)
			kind=nested
			wsl run -q -w "$WAIT" "$ws" -- sh -c '
				"$0" run -q -n "$1" -- "$2" hold "$3" "$1" "$4" "$5" </dev/null >/dev/null &
				p=$!
				while kill -0 "$p" 2>/dev/null && ! "$6" --started "$3" "$4"; do
					sleep 0.01
				done
				exit 0' "$W" "$ws" "$STAMP" "$log" "$tag" "$HOLD_MS" "$HERE/check.sh" \
				</dev/null >/dev/null 2>>"$S/logs/$id.err"
			st=$?
		elif ((r >= 19 && r < 24)) && ws2=$(multi_partner "$ws"); then
			# Two workspaces at once (the second never nests with the
			# first), named in either order: one interval on each.
			# One in three a reader set (--shared: its tag ends in .s).
			kind=multi
			local -a pair=("$arg" "$(spelled "$ws2")") mopt=()
			local mtag=$tag
			((RANDOM % 2)) && pair=("${pair[1]}" "${pair[0]}")
			((RANDOM % 3 == 0)) && { kind=multi-shared mopt=(--shared) mtag=$tag.s; }
			wsl run -q "${mopt[@]}" -w "$WAIT" "${pair[@]}" -- sh -c '
				"$0" hold "$1" "$2" "$4" "$5" & "$0" hold "$1" "$3" "$4" "$5"; wait' \
				"$STAMP" "$log" "$ws" "$ws2" "$mtag" "$HOLD_MS" \
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
			# In a namespace of its own: the retained lock (recover_own).
			[ -n "$CONTENDER" ] && [ "$st" = 3 ] && recover_own
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
			# In a namespace of its own: the dead owner (recover_own).
			[ -n "$CONTENDER" ] && [ "$st" = 0 ] && recover_own
		elif ((r < 80)); then
			kind=recover
			# Mostly a candidate of this contender's own namespace and
			# host when there is one (only there can a dead owner be
			# told from a live one), else any.
			local sel='.locks[] | select(.state == "retained" or .liveness == "dead")'
			cands=()
			((RANDOM % 4)) && mapfile -t cands < <(wsl inspect --all 2>/dev/null |
				jq -r --arg me "$myns $myhost" "$sel"' | select(((.owner.pid_namespace // "pid:[4026531836]") + " " + .owner.host) == $me) | .workspace_root' 2>/dev/null)
			[ "${#cands[@]}" = 0 ] && mapfile -t cands < <(wsl inspect --all 2>/dev/null |
				jq -r "$sel"' | .workspace_root' 2>/dev/null)
			if [ "${#cands[@]}" = 0 ]; then
				kind=recover-none
				st=0
				ws=-
			else
				arg=${cands[$((RANDOM % ${#cands[@]}))]}
				ws=$(real "$arg")
				wsl inspect --owner "$arg" >"$S/logs/$id.expected" 2>/dev/null
				# An owner of another pid namespace or host: its pid
				# means nothing here, so recover must refuse it.
				[ "$(jq -r 'if type == "object" then
					(.pid_namespace // "pid:[4026531836]") + " " + .host else "-" end' \
					"$S/logs/$id.expected" 2>/dev/null)" = "$myns $myhost" ] ||
					[ "$(jq -r type "$S/logs/$id.expected" 2>/dev/null)" != object ] ||
					kind=recover-foreign
				wsl recover -q --expected-owner "$S/logs/$id.expected" "$arg" -- \
					sh -c "$MODE_HOLD" "$W" "$STAMP" "$log" "$ws" "$tag" "$HOLD_MS" \
					</dev/null >/dev/null 2>>"$S/logs/$id.err"
				st=$?
			fi
		else
			kind=reclaim
			ws=-
			wsl reclaim -q --yes -- sh -c "$MODE_HOLD" "$W" "$STAMP" "$log" - "$tag" "$HOLD_MS" \
				</dev/null >"$S/logs/$id.reclaim" 2>>"$S/logs/$id.err"
			st=$?
		fi
		echo "OP $kind $ws $st $tag" >>"$log"
	done
	# In a namespace of its own, leave no dead or retained lock that only
	# this namespace can judge: recover them before it ends (unlogged, as
	# the driver's cleanup; what is left there is the driver's to force).
	# (Those under another hostname leave theirs to the driver's cleanup.)
	if [ -n "$CONTENDER" ] && [ -z "$CHOST" ]; then
		wsl inspect --all 2>/dev/null | jq -r --arg me "$myns $myhost" '.locks[] |
			select(.state == "retained" or .liveness == "dead") |
			select(((.owner.pid_namespace // "pid:[4026531836]") + " " + .owner.host) == $me) | .workspace_root' 2>/dev/null |
			while IFS= read -r ws; do
				wsl inspect --owner "$ws" >"$S/logs/$id.expected" 2>/dev/null &&
					wsl recover -q --expected-owner "$S/logs/$id.expected" "$ws" >/dev/null 2>>"$S/logs/$id.err"
			done
	fi
}

if [ -n "$CONTENDER" ]; then
	if [ -n "$CHOST" ]; then hostname "$CHOST" || exit 2; fi
	# The stamps compare as one clock only within one time namespace.
	readlink /proc/self/ns/time >"$S/logs/$CONTENDER.timens" 2>/dev/null
	# This shell is pid 1 here, an ancestor of everything (wslock refuses
	# --pid 1): it stays the namespace's init, as in a container, and the
	# contender is its child.
	contender "$CONTENDER" &
	wait $!
	exit 0
fi

# Contender C runs in a new pid namespace when C % 4 == 3, and then, when
# C % 8 == 7, in a new UTS namespace as host stress-uts-C too. unshare
# --kill-child: a deadline that kills unshare kills the namespace with it.
nspid=0 nsuts=0
echo "stress: $N contenders x $ITER operations on ${#WSS[@]} workspaces (seed $SEED, hold ${HOLD_MS}ms, -w $WAIT${ALIAS:+, each also through a bind-mount alias}${MSRC:+, one mounted below the tree}${PIDNS:+, every 4th in its own pid namespace, every 8th also under another hostname})"
start=$(date +%s)
pids=()
for ((c = 0; c < N; c++)); do
	if [ -n "$PIDNS" ] && ((c % 8 == 7)); then
		unshare -fp --mount-proc --kill-child -u "$0" --contender "$c" "stress-uts-$c" &
		nsuts=$((nsuts + 1))
	elif [ -n "$PIDNS" ] && ((c % 4 == 3)); then
		unshare -fp --mount-proc --kill-child "$0" --contender "$c" &
		nspid=$((nspid + 1))
	else
		contender "$c" &
	fi
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
if [ -n "$PIDNS" ] && here_time=$(readlink /proc/self/ns/time 2>/dev/null); then
	for f in "$S"/logs/*.timens; do
		[ "$(cat "$f")" = "$here_time" ] ||
			{ echo "stress: $f: another time namespace, the stamps do not compare" >&2; exit 1; }
	done
fi

# Leave nothing behind: recover every retained or dead lock, then reclaim.
# Every contender has exited, so every pid namespace but this one is gone
# with all its processes: a lock whose owner names another namespace or
# host is refused as unknown (checked), then recovered with --force.
FORCE_REASON="stress: the holder's pid namespace ended with its contender"
final_err=0 forced=0 planted=
here_ns=$(readlink /proc/self/ns/pid)
here_host=$(hostname)
clean_all() {
	local k left ws st
	for ((k = 0; k < 20; k++)); do
		left=$(wsl inspect --all | jq -r '.locks[] | .workspace_root') || { final_err=1; break; }
		[ -z "$left" ] && break
		while IFS= read -r ws; do
			wsl inspect --owner "$ws" >"$S/final.json" || continue
			wsl recover --expected-owner "$S/final.json" "$ws" >/dev/null 2>"$S/final.last"
			st=$?
			cat "$S/final.last" >>"$S/final.err"
			[ "$st" = 69 ] && grep -q WSLOCK_LIVENESS_UNKNOWN "$S/final.last" || continue
			if [ "$(jq -r '(.pid_namespace // "pid:[4026531836]") + " " + .host' "$S/final.json")" = "$here_ns $here_host" ]; then
				echo "stress: $ws: an owner of this namespace and host is of unknown liveness" >>"$S/final.err"
				final_err=1
				continue
			fi
			wsl recover --force --reason "$FORCE_REASON" --expected-owner "$S/final.json" "$ws" \
				>/dev/null 2>>"$S/final.err" && forced=$((forced + 1))
		done <<<"$left"
	done
}
clean_all
# With namespaces, one owner the cleanup cannot judge for sure: an acquire
# --pid holder in a pid and UTS namespace that has ended (pid 2 there).
if [ -n "$PIDNS" ]; then
	for ws in "${WSS[@]}"; do
		unshare -fp --mount-proc --kill-child -u sh -c 'hostname stress-uts-end &&
			sh -c "\"\$0\" acquire -q --pid \$\$ \"\$1\" >/dev/null" "$0" "$1"' "$W" "$ws" 2>/dev/null &&
			{ planted=$ws; break; }
	done
	[ -n "$planted" ] || { echo "stress: no owner in an ended namespace could be left for the cleanup" >&2; final_err=1; }
fi
[ -n "$planted" ] && clean_all
wsl reclaim --yes >/dev/null 2>>"$S/final.err" || final_err=1
if [ -n "$planted" ] && [ "$forced" = 0 ]; then
	echo "stress: the owner left in an ended namespace on $planted was not met by the cleanup" >&2
	final_err=1
fi
# The journal: a takeover without --force only ever took a dead owner, and
# (when it names its new owner) one of the taker's own namespace and host;
# the forced ones are exactly the cleanup's, of owners of unknown liveness.
jbad=
[ -f "$WSLOCK_DIR/journal.jsonl" ] && { jbad=$(jq -rs --arg why "$FORCE_REASON" --argjson forced "$forced" '
	def where: if type == "object" then (.pid_namespace // "pid:[4026531836]") + " " + .host else null end;
	[.[] | select(.forced | not) | select(.liveness != "dead" or
		((.new_owner | type) == "object" and (.prior_owner | where) != (.new_owner | where)))] as $bad |
	[.[] | select(.forced)] as $f |
	if ($bad | length) > 0 then "takeovers without --force of owners not dead here: \($bad | map(.action + " " + .workspace_root + " (" + .liveness + ")") | join(", "))"
	elif ($f | length) != $forced or ([$f[] | select(.force_reason != $why or .liveness != "unknown")] | length) > 0
	then "forced takeovers that the cleanup did not make: \($f | length) forced, \($forced) by the cleanup"
	else empty end' "$WSLOCK_DIR/journal.jsonl") || jbad="cannot be read"; }
if [ -n "$jbad" ]; then
	echo "stress: journal: $jbad" >&2
	final_err=1
fi
if ! left=$(wsl_registry_leftovers "$WSLOCK_DIR"); then
	echo "stress: not empty at the end: $left" >&2
	final_err=1
fi
if ! left=$(wsl_journal_problems "$WSLOCK_DIR/journal.jsonl"); then
	echo "stress: $left" >&2
	final_err=1
fi
echo "stress: contenders done in ${elapsed}s ($nspid in their own pid namespace, $nsuts also under another hostname); journal: $(wc -l <"$WSLOCK_DIR/journal.jsonl" 2>/dev/null || echo 0) lines; the cleanup recovered $forced lock(s) of unknown liveness with --force"

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
