# tests/lib.sh - shell helpers shared by the bats suite (through
# tests/helpers.bash), the crash matrix (tests/crash/matrix.sh), the race
# stress (tests/stress/) and the test runners (tests/run-bats.sh,
# tests/unit/run.sh). Plain bash, no bats: source it, it defines functions
# and runs nothing. Every function is safe under set -e and set -u (bats
# runs tests with -e): a helper fails only to report what it checks.

# --- CI and skips ----------------------------------------------------------

# wsl_strict_skips: true in CI (CI=true, as GitHub Actions, GitLab CI and
# .ci/run set it) or with WSLOCK_STRICT_SKIPS=1: there a skipped test fails
# the run unless an allow-list names it.
wsl_strict_skips() {
	[ "${CI:-}" = true ] || [ "${WSLOCK_STRICT_SKIPS:-}" = 1 ]
}

# wsl_refused_skips TAP-FILE ALLOW-FILE...: prints, one a line, "NAME (WHY)"
# for every "# skip" in the TAP report whose test NAME no allow file lists
# (allow-list lines: "NAME<TAB>WHY"; # comments and blank lines ignored).
# Missing allow files count as empty.
wsl_refused_skips() {
	local tap=$1 line name why f n w
	shift
	local -A allowed=()
	for f in "$@"; do
		[ -f "$f" ] || continue
		while IFS=$'\t' read -r n w; do
			case $n in '' | '#'*) continue ;; esac
			[ -n "$w" ] || { echo "allow-list $f: '$n' has no reason" >&2; return 1; }
			allowed[$n]=1
		done <"$f"
	done
	local re='^ok [0-9]+ (.*) # skip( (.*))?$'
	while IFS= read -r line; do
		[[ $line =~ $re ]] || continue
		name=${BASH_REMATCH[1]}
		why=${BASH_REMATCH[3]}
		[ -n "${allowed[$name]:-}" ] || printf '%s (%s)\n' "$name" "${why:-no reason given}"
	done <"$tap"
	return 0
}

# --- environment and tools -------------------------------------------------

# The variables a caller's wslock (or the user) may have set that would
# change what the binary under test does; wsl_clean_env unsets them.
WSL_ENV_VARS=(WSLOCK_TOKEN WSLOCK_WORKSPACE WSLOCK_WORKSPACES WSLOCK_OWNER WSLOCK_OWNERS
	WSLOCK_HOST WSLOCK_FENCE WSLOCK_ALLOW_NETWORK_FS WSLOCK_CRASH_AT WSLOCK_TEST_FSTYPE
	WSLOCK_BACKEND WSLOCK_ETCD_ENDPOINTS XDG_STATE_HOME STATE_DIRECTORY)
wsl_clean_env() {
	unset "${WSL_ENV_VARS[@]}"
}

# wsl_need PROG TOOL...: 0 when every TOOL is on PATH; else names the
# missing ones on stderr, prefixed "PROG: ", and returns 2.
wsl_need() {
	local prog=$1 t missing=()
	shift
	for t in "$@"; do command -v "$t" >/dev/null 2>&1 || missing+=("$t"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "$prog: needs ${missing[*]}" >&2
	return 2
}

# wsl_private_copy BINARY DIR: copies BINARY into DIR and prints the copy's
# path. A rebuild of the tree's binary during a long run must not change
# the binary under test halfway (or make exec fail with ETXTBSY).
wsl_private_copy() {
	cp "$1" "$2/${1##*/}" && printf '%s/%s\n' "$2" "${1##*/}"
}

# --- processes -------------------------------------------------------------

# is_running PID: true while PID exists and is not a zombie.
is_running() {
	local st
	st=$(sed -n 's/.*) \([A-Za-z]\) .*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# start_ticks PID: field 22 of /proc/PID/stat (clock ticks after boot),
# parsed after the last ')' (the command name may hold spaces and parens).
start_ticks() {
	sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f20
}

# wait_for 'CONDITION' [SECONDS=10]: poll CONDITION (eval'd) every 0.05 s;
# 1 with a message on stderr when it is not met within SECONDS.
wait_for() {
	local cond=$1 secs=${2:-10} i n
	n=$((secs * 20))
	for ((i = 0; i < n; i++)); do
		if eval "$cond"; then return 0; fi
		sleep 0.05
	done
	echo "wait_for: condition not met within ${secs}s: $cond" >&2
	return 1
}

# wsl_start_sleeper [SECONDS=300]: a live process to name as a lock's
# holder, with no descriptor of the caller's beyond /dev/null (so it never
# keeps a pipe or a lock's live file open); sets SLEEPER_PID. The caller
# kills it (wsl_kill_reap) or tracks it.
wsl_start_sleeper() {
	sleep "${1:-300}" </dev/null >/dev/null 2>&1 3>&- &
	SLEEPER_PID=$!
}

# wsl_kill_reap PID [SECONDS=10]: SIGKILL PID, wait (bounded) until it is
# gone and reap it if it is our child: from then on it is provably dead.
wsl_kill_reap() {
	kill -KILL "$1" 2>/dev/null || :
	wait_for "! is_running $1" "${2:-10}" 2>/dev/null || :
	wait "$1" 2>/dev/null || :
}

# --- the registry ----------------------------------------------------------

# lock_key_of WS: the registry key of WS's lock (BLAKE2b-256 of its
# canonical path, DESIGN §5).
lock_key_of() {
	printf %s "$(realpath -e "$1")" | b2sum -l 256 | cut -d' ' -f1
}

# wsl_registry_leftovers REGISTRY: prints "DIR/: ENTRY..." for each of the
# registry's working directories (locks, nest, staging, ids, idnest, queue,
# and tmp when it is a directory) that is not empty; 1 when one is not.
# nest/, ids/ and idnest/ keep .marker (the inode their markers link to)
# and may keep emptied directories (reclaim collects them).
wsl_registry_leftovers() {
	local d rc=0 left
	for d in locks nest staging tmp ids idnest queue; do
		[ -d "$1/$d" ] && [ ! -L "$1/$d" ] || continue
		if [ "$d" = ids ] || [ "$d" = idnest ] || [ "$d" = nest ]; then
			left=$(find "$1/$d" -mindepth 1 ! -type d ! -path "$1/$d/.marker" -printf '%P\n')
		else
			left=$(ls -A "$1/$d")
		fi
		if [ -n "$left" ]; then
			echo "$d/: $(head -3 <<<"$left" | tr '\n' ' ')"
			rc=1
		fi
	done
	return "$rc"
}

# wsl_journal_problems JOURNAL: prints what is wrong with the journal (a
# line that is not one whole JSON object, no final newline); 1 when
# something is. A missing journal has no problems.
wsl_journal_problems() {
	local bad rc=0
	[ -f "$1" ] || return 0
	# One jq for the whole file: each line parsed on its own (-R, fromjson).
	bad=$(jq -R -r '. as $l | try (fromjson | if type == "object" then empty else error end)
		catch ("journal line is not a JSON object: " + $l[0:80])' "$1" 2>&1) || rc=1
	[ -z "$bad" ] || { printf '%s\n' "$bad" | head -5; rc=1; }
	if [ -s "$1" ] && [ -n "$(tail -c1 "$1")" ]; then
		echo "journal does not end with a newline"
		rc=1
	fi
	return "$rc"
}
