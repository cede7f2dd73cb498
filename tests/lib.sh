# tests/lib.sh - shell helpers shared by the bats suite (through
# tests/helpers.bash), the crash matrix (tests/crash/matrix.sh), the race
# stress (tests/stress/) and the test runners (tests/run-bats.sh,
# tests/unit/run.sh). Plain bash, no bats: source it, it defines functions
# and runs nothing.

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
