#!/usr/bin/env bats
# Every recipe of README.md and man/wslock.1 runs here, under dash and under
# bash, as documented: the text is taken from the documents themselves
# (tests/recipes/extract), so a recipe cannot drift from what is tested.
# Only the example paths (/srv/..., the CI variables) are pointed at this
# test's directories, and the commands a recipe runs (make, git, the repair
# scripts) are stubs that record how they were called and, when asked,
# block until released.  Each recipe is also interrupted the way a CI
# runner cancels a job: a signal to the recipe's whole process group.

load helpers

EXTRACT=$BATS_TEST_DIRNAME/recipes/extract
README=$BATS_TEST_DIRNAME/../README.md
MANPAGE=$BATS_TEST_DIRNAME/../man/wslock.1

# The recipes tested below, as FILE:NAME; the first test checks that this is
# every recipe the documents mark, and that every command-like block is
# marked.
TESTED="README.md:ci-recover README.md:deploy README.md:github README.md:gitlab
README.md:cleanup README.md:etcd README.md:systemd README.md:exit-status README.md:retain-reason README.md:shared-cache README.md:deploy-two wslock.1:runbook-inspect wslock.1:runbook-save
wslock.1:runbook-recover wslock.1:runbook-repair wslock.1:ci-recover
wslock.1:deploy wslock.1:ci-retain wslock.1:skip-if-held wslock.1:who-holds-what"

local_setup() {
	command -v jq >/dev/null || skip "jq is not installed"
	command -v perl >/dev/null || skip "perl is not installed"
	T=$BATS_TEST_TMPDIR
	mkdir -p "$T/bin" "$T/cwd/scripts" "$T/stub" "$T/srv"
	ln -s "$WSLOCK" "$T/bin/wslock"
	# stub: logs "NAME ARGS|WSLOCK_WORKSPACE|PWD|locks-held" to $STUB_LOG;
	# blocks (until $STUB_DIR/go) when NAME is $STUB_BLOCK; exits $STUB_EXIT.
	cat >"$T/stub/stub" <<'EOF'
#!/bin/sh
name=${0##*/}
n=$(ls "$WSLOCK_DIR/locks" 2>/dev/null | wc -l)
printf '%s %s|%s|%s|%s\n' "$name" "$*" "${WSLOCK_WORKSPACE:-}" "$PWD" "$n" >>"$STUB_DIR/log"
if [ "$name" = "${STUB_BLOCK:-}" ]; then
	: >"$STUB_DIR/started"
	i=0
	while [ ! -e "$STUB_DIR/go" ] && [ "$i" -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
fi
exit "${STUB_EXIT:-0}"
EOF
	chmod +x "$T/stub/stub"
	local s
	for s in make git; do ln -s "$T/stub/stub" "$T/bin/$s"; done
	for s in repair reset-workspace refresh-cache scripts/reset-workspace.sh; do
		ln -s "$T/stub/stub" "$T/cwd/$s"
	done
	export STUB_DIR=$T/stub PATH="$T/bin:$PATH"
	unset STUB_BLOCK STUB_EXIT
}

# recipe FILE NAME: the recipe's text, example paths pointed at $T/srv.
recipe() {
	local f
	case $1 in README.md) f=$README ;; wslock.1) f=$MANPAGE ;; esac
	"$EXTRACT" "$f" "$2" | sed "s|/srv/|$T/srv/|g"
}

# recipe_file FILE NAME: write the recipe to $T/recipe.sh.
recipe_file() {
	recipe "$@" >"$T/recipe.sh" || fail "no recipe $2 in $1"
	[ -s "$T/recipe.sh" ] || fail "recipe $2 of $1 is empty"
}

# run_recipe SHELL [ARGS...]: run $T/recipe.sh under SHELL in $T/cwd;
# sets status/output (stdout+stderr) as bats' run does.
run_recipe() {
	local sh=$1
	shift
	run --separate-stderr -- timeout -k 5 60 sh -c 'cd "$1" && shift && exec "$@"' \
		sh "$T/cwd" "$sh" "$T/recipe.sh" "$@"
}

# start_recipe SHELL [ARGS...]: start it in its own process group, in the
# background (REC_PID = the group's id); stdout/stderr to $T/rec.out/err.
start_recipe() {
	local sh=$1
	shift
	(cd "$T/cwd" && exec setsid "$sh" "$T/recipe.sh" "$@") \
		</dev/null >"$T/rec.out" 2>"$T/rec.err" 3>&- &
	REC_PID=$!
	track_pid "$REC_PID"
}

# interrupt SIGNAL: once the blocking stub runs, send SIGNAL to the whole
# process group of the recipe, as a CI runner cancelling the job does, and
# wait (bounded) for the recipe to end; sets WAIT_STATUS.
interrupt() {
	wait_for "[ -e '$STUB_DIR/started' ] || ! is_running $REC_PID" 30
	[ -e "$STUB_DIR/started" ] || fail "the recipe ended before its command ran: $(cat "$T/rec.err")"
	kill -"$1" -- -"$REC_PID"
	wait_exit "$REC_PID" 30 || fail "the recipe did not end after SIG$1"
	# The shell may end first; a wslock in the group still finishing its
	# release (or retention) is waited for too.
	wait_for "! kill -0 -- -$REC_PID 2>/dev/null" 30 ||
		fail "processes of the recipe's group still run after SIG$1"
}

# state WS: the workspace's state in inspect ("free", "held", ...).
state() {
	wsl inspect "$1" | jq -r .state
}

# stub_called PATTERN: some stub call line matches the grep -E PATTERN.
stub_called() {
	grep -qE -- "$1" "$STUB_DIR/log" 2>/dev/null ||
		fail "no stub call matching '$1'; calls: $(cat "$STUB_DIR/log" 2>/dev/null)"
}

shells() {
	local s
	for s in dash bash; do
		command -v "$s" >/dev/null && printf '%s\n' "$s"
	done
}

@test "recipes: every command block of README and man page is a marked recipe, and each is tested here" {
	run -0 "$EXTRACT" --unmarked "$README"
	[ -z "$output" ] || fail "$output"
	run -0 "$EXTRACT" --unmarked "$MANPAGE"
	[ -z "$output" ] || fail "$output"
	local found n
	found=$({ "$EXTRACT" --list "$README" | sed 's/^/README.md:/'
		"$EXTRACT" --list "$MANPAGE" | sed 's/^/wslock.1:/'; } | sort)
	[ "$found" = "$(printf '%s\n' $TESTED | sort)" ] ||
		fail "marked recipes differ from the tested ones: $(diff <(echo "$found") <(printf '%s\n' $TESTED | sort))"
	# Each is named by a test: @test "recipe README NAME..." / "recipe man NAME...".
	local doc
	for n in $TESTED; do
		doc=README
		[ "${n%%:*}" = README.md ] || doc=man
		grep -qE "^@test \"recipe $doc [^:]*\<${n#*:}\>" "$BATS_TEST_FILENAME" ||
			fail "recipe $n is not run by any test"
	done
	[ "$(shells | wc -l)" -eq 2 ] || fail "dash and bash must both be installed: $(shells)"
}

# --- the deploy scripts (README and man page) --------------------------------

# deploy_ok FILE: the script's steps run under the lock and it releases.
deploy_ok() {
	local sh
	mkdir -p "$T/srv/app" "$T/srv/build"
	recipe_file "$1" deploy
	for sh in $(shells); do
		rm -f "$STUB_DIR/log"
		run_recipe "$sh" v42
		[ "$status" -eq 0 ] || fail "$sh: exit $status: $stderr"
		stub_called "^make .*install\|\|.*\|[1-9][0-9]*$"
		[ "$(state "$T/srv/app")" = free ] && [ "$(state "$T/srv/build")" = free ] ||
			fail "$sh: the lock stayed after a normal exit"
		# A failing step: the script fails and still releases.
		STUB_EXIT=2 run_recipe "$sh" v43
		[ "$status" -ne 0 ] || fail "$sh: a failing step did not fail the script"
		[ "$(state "$T/srv/app")" = free ] && [ "$(state "$T/srv/build")" = free ] ||
			fail "$sh: the lock stayed after a failing step"
	done
}

# deploy_interrupted FILE WS: SIGHUP, SIGINT, SIGTERM to the script's process
# group while a step runs leave no lock; SIGKILL leaves it, dead.
deploy_interrupted() {
	local sh sig
	mkdir -p "$T/srv/app" "$T/srv/build"
	recipe_file "$1" deploy
	export STUB_BLOCK=make
	for sh in $(shells); do
		for sig in HUP INT TERM; do
			rm -f "$STUB_DIR/started"
			start_recipe "$sh" v44
			interrupt "$sig"
			[ "$WAIT_STATUS" -ne 0 ] || fail "$sh: SIG$sig: the script exited 0"
			[ "$(state "$2")" = free ] ||
				fail "$sh: SIG$sig to the group left the lock: $(wsl inspect "$2")"
		done
		rm -f "$STUB_DIR/started"
		start_recipe "$sh" v45
		interrupt KILL
		run -0 wsl inspect "$2"
		jq_ok '.state == "held" and .liveness == "dead"'
		wsl inspect --owner "$2" >"$T/owner.json"
		wsl recover -q --expected-owner "$T/owner.json" "$2" >/dev/null
	done
}

@test "recipe README deploy: runs its steps under the lock and releases (dash, bash)" {
	deploy_ok README.md
}

@test "recipe README deploy: Ctrl-C, SIGTERM, SIGHUP to its process group leave no stale lock (dash, bash)" {
	deploy_interrupted README.md "$T/srv/app"
}

@test "recipe README deploy-two: both directories are held while each step runs, neither after; a holder of one makes it wait (dash, bash)" {
	local sh
	mkdir -p "$T/srv/app" "$T/srv/static"
	recipe_file README.md deploy-two
	for sh in $(shells); do
		rm -f "$STUB_DIR/log"
		run_recipe "$sh" v46
		[ "$status" -eq 0 ] || fail "$sh: exit $status: $stderr"
		# Each make ran with WSLOCK_WORKSPACE the first and two locks held.
		stub_called "^make -C $T/srv/app install\|$T/srv/app\|.*\|2$"
		stub_called "^make -C $T/srv/static install\|$T/srv/app\|.*\|2$"
		[ "$(state "$T/srv/app")" = free ] && [ "$(state "$T/srv/static")" = free ] ||
			fail "$sh: a lock stayed"
	done
	# A job holding /srv/static: the deploy waits, holding nothing of /srv/app.
	hold "$T/srv/static"
	rm -f "$STUB_DIR/log"
	start_recipe dash v47
	wait_for "compgen -G '$WSLOCK_DIR/queue/*' >/dev/null || ! is_running $REC_PID" 20
	is_running "$REC_PID" || fail "the deploy did not wait: $(cat "$T/rec.err")"
	[ "$(state "$T/srv/app")" = free ] || fail "the waiting deploy holds /srv/app"
	[ ! -e "$STUB_DIR/log" ] || fail "a step ran while /srv/static was held"
	unhold
	wait_exit "$REC_PID" 60 && [ "$WAIT_STATUS" = 0 ] || fail "the deploy failed: $(cat "$T/rec.err")"
	stub_called "^make -C $T/srv/static install"
}

@test "recipe man deploy: runs its steps under the lock and releases (dash, bash)" {
	deploy_ok wslock.1
}

@test "recipe man deploy: Ctrl-C, SIGTERM, SIGHUP to its process group leave no stale lock (dash, bash)" {
	deploy_interrupted wslock.1 "$T/srv/build"
}

# --- the CI recovery step (README and man page) -------------------------------

# ci_recover FILE: free, dead holder, live holder (another job), interrupted.
ci_recover() {
	local sh
	export WS=$T/srv/w
	mkdir -p "$WS"
	recipe_file "$1" ci-recover
	for sh in $(shells); do
		# Free: the tests run, nothing is recovered.
		rm -f "$STUB_DIR/log"
		run_recipe "$sh" -e
		[ "$status" -eq 0 ] || fail "$sh, free: exit $status: $stderr"
		stub_called "^make test\|$WS\|"
		! grep -q reset-workspace "$STUB_DIR/log" || fail "$sh: repaired a free workspace"

		# A crashed earlier job: repaired under the recovered lock, then the tests.
		rm -f "$STUB_DIR/log"
		dead_acquired "$WS"
		run_recipe "$sh" -e
		[ "$status" -eq 0 ] || fail "$sh, dead holder: exit $status: $stderr"
		stub_called "^reset-workspace(\.sh)? \|$WS\|"
		stub_called "^make test\|$WS\|"
		[ "$(state "$WS")" = free ]

		# A lock retained on purpose (its owner reads dead too) is left
		# for a person: no repair, and the tests fail with 69.
		rm -f "$STUB_DIR/log"
		run wsl run --retain-on-failure "$WS" -- false
		[ "$(state "$WS")" = retained ]
		run_recipe "$sh" -e
		[ "$status" -eq 69 ] || fail "$sh, retained: exit $status: $stderr"
		! grep -q reset-workspace "$STUB_DIR/log" 2>/dev/null || fail "$sh: repaired a retained lock"
		[ "$(state "$WS")" = retained ]
		wsl inspect --owner "$WS" >"$T/retained.json"
		run -0 wsl recover --expected-owner "$T/retained.json" "$WS"

		# Another job holds the lock: the step waits for it instead of failing.
		rm -f "$STUB_DIR/log"
		hold "$WS"
		start_recipe "$sh" -e
		wait_for "grep -q 'waiting' '$T/rec.err' || ! is_running $REC_PID" 30
		is_running "$REC_PID" || fail "$sh, live holder: the step ended: $(cat "$T/rec.err")"
		unhold
		wait_exit "$REC_PID" 30 || fail "$sh: the step did not finish"
		[ "$WAIT_STATUS" -eq 0 ] || fail "$sh, live holder: exit $WAIT_STATUS: $(cat "$T/rec.err")"
		! grep -q reset-workspace "$STUB_DIR/log" || fail "$sh: repaired under a live holder"
		stub_called "^make test\|$WS\|"

		# The job is cancelled while its tests run: no stale lock.
		rm -f "$STUB_DIR/started"
		STUB_BLOCK=make start_recipe "$sh" -e
		interrupt TERM
		[ "$(state "$WS")" = free ] || fail "$sh: cancelling left the lock: $(wsl inspect "$WS")"
	done
}

@test "recipe README ci-recover: free, crashed earlier job, another job holding, cancelled (dash, bash)" {
	ci_recover README.md
}

@test "recipe man ci-recover: free, crashed earlier job, another job holding, cancelled (dash, bash)" {
	ci_recover wslock.1
}

# --- CI configurations --------------------------------------------------------

# yaml_script FILE NAME: the shell of a GitHub "run: |" or GitLab "script:"
# block, as the runner would run it (the CI variables come from the test).
yaml_script() {
	recipe "$1" "$2" | awk '
		/^ *run: \|/ { run = 1; match($0, /^ */); ind = RLENGTH + 2; next }
		run { print substr($0, ind + 1); next }
		/^ *script:/ { scr = 1; next }
		scr && /^ *- / { sub(/^ *- /, ""); print }' |
		sed -e 's/\${{ github.run_id }}/4711/g' -e 's/\${{ github.run_attempt }}/1/g'
}

# ci_job FILE NAME: free, after a killed job (reclaimed), cancelled.
ci_job() {
	local sh
	yaml_script "$1" "$2" >"$T/recipe.sh"
	grep -q 'wslock run' "$T/recipe.sh" || fail "no script in $2: $(cat "$T/recipe.sh")"
	export GITHUB_WORKSPACE=$T/srv/job CI_PROJECT_DIR=$T/srv/job CI_JOB_ID=99
	mkdir -p "$T/srv/job"
	for sh in $(shells); do
		rm -f "$STUB_DIR/log"
		run_recipe "$sh" -e
		[ "$status" -eq 0 ] || fail "$sh: exit $status: $stderr"
		stub_called "^make test\|$T/srv/job\|"
		dead_acquired "$T/srv/job"
		run_recipe "$sh" -e
		[ "$status" -eq 0 ] || fail "$sh, after a killed job: exit $status: $stderr"
		tail -n1 "$WSLOCK_DIR/journal.jsonl" | jq -e '.action == "reclaim-dead"' >/dev/null ||
			fail "$sh: the killed job's lock was not reclaimed by the journal"
		rm -f "$STUB_DIR/started"
		STUB_BLOCK=make start_recipe "$sh" -e
		interrupt TERM
		[ "$WAIT_STATUS" -ne 0 ] || fail "$sh: a cancelled job exited 0"
		[ "$(state "$T/srv/job")" = free ] || fail "$sh: cancelling left the lock"
	done
}

@test "recipe README github: runs, takes over a killed job's lock, cancelled leaves none (dash, bash)" {
	recipe_file README.md github
	ci_job README.md github
}

@test "recipe README gitlab: runs, takes over a killed job's lock, cancelled leaves none (dash, bash)" {
	recipe_file README.md gitlab
	ci_job README.md gitlab
}

@test "recipe man ci-retain: success frees, failure and cancellation keep the lock retained (dash, bash)" {
	local sh
	recipe_file wslock.1 ci-retain
	export CI_PROJECT_DIR=$T/srv/p CI_JOB_ID=7
	mkdir -p "$CI_PROJECT_DIR"
	for sh in $(shells); do
		run_recipe "$sh" -e
		[ "$status" -eq 0 ] || fail "$sh: exit $status: $stderr"
		stub_called "^make check\|$CI_PROJECT_DIR\|"
		[ "$(state "$CI_PROJECT_DIR")" = free ]
		STUB_EXIT=2 run_recipe "$sh" -e
		[ "$status" -eq 2 ] || fail "$sh: a failed build exited $status"
		[ "$(state "$CI_PROJECT_DIR")" = retained ]
		wsl inspect --owner "$CI_PROJECT_DIR" >"$T/owner.json"
		wsl recover -q --expected-owner "$T/owner.json" "$CI_PROJECT_DIR" >/dev/null
		rm -f "$STUB_DIR/started"
		STUB_BLOCK=make start_recipe "$sh" -e
		interrupt TERM
		[ "$(state "$CI_PROJECT_DIR")" = retained ] ||
			fail "$sh: a cancelled build's lock is not retained: $(wsl inspect "$CI_PROJECT_DIR")"
		wsl inspect --owner "$CI_PROJECT_DIR" >"$T/owner.json"
		wsl recover -q --expected-owner "$T/owner.json" "$CI_PROJECT_DIR" >/dev/null
	done
}

@test "recipe man skip-if-held: skipped (exit 0) while held, run when free, cancelled leaves none (dash, bash)" {
	local sh
	recipe_file wslock.1 skip-if-held
	mkdir -p "$T/srv/cache"
	for sh in $(shells); do
		rm -f "$STUB_DIR/log"
		hold "$T/srv/cache"
		run_recipe "$sh" -e
		[ "$status" -eq 0 ] || fail "$sh, held: exit $status: $stderr"
		[ ! -e "$STUB_DIR/log" ] || fail "$sh: refreshed a held cache"
		unhold
		run_recipe "$sh" -e
		[ "$status" -eq 0 ] || fail "$sh, free: exit $status: $stderr"
		stub_called "^refresh-cache \|$T/srv/cache\|"
		rm -f "$STUB_DIR/started"
		STUB_BLOCK=refresh-cache start_recipe "$sh" -e
		interrupt TERM
		[ "$(state "$T/srv/cache")" = free ]
	done
}

@test "recipe man who-holds-what: one tab-separated line per lock (dash, bash)" {
	local sh
	recipe_file wslock.1 who-holds-what
	mkdir -p "$T/srv/a" "$T/srv/b"
	start_sleeper
	local live=$SLEEPER_PID
	acquire_as "$live" "$T/srv/a"
	dead_acquired "$T/srv/b"
	for sh in $(shells); do
		run_recipe "$sh" -e
		[ "$status" -eq 0 ] || fail "$sh: exit $status: $stderr"
		[ "${#lines[@]}" -eq 2 ] || fail "$sh: $output"
		[[ $output == *"$T/srv/a"$'\t'held$'\t'live$'\t'"$live"* ]] || fail "$sh: $output"
		[[ $output == *"$T/srv/b"$'\t'held$'\t'dead$'\t'* ]] || fail "$sh: $output"
	done
}

@test "recipe README exit-status: free and busy told apart by the exit status alone (dash, bash)" {
	local sh
	recipe_file README.md exit-status
	mkdir -p "$T/srv/a"
	for sh in $(shells); do
		WS=$T/srv/a run_recipe "$sh"
		[ "$status" -eq 0 ] && [ "$output" = free ] || fail "$sh, free: exit $status: $output $stderr"
	done
	start_sleeper
	acquire_as "$SLEEPER_PID" "$T/srv/a"
	for sh in $(shells); do
		WS=$T/srv/a run_recipe "$sh"
		[ "$status" -eq 0 ] && [ "$output" = busy ] || fail "$sh, held: exit $status: $output $stderr"
	done
}

@test "recipe README retain-reason: an acquire holder leaves its lock retained with the reason (dash, bash)" {
	local sh token
	mkdir -p "$T/srv/app"
	recipe_file README.md retain-reason
	for sh in $(shells); do
		start_sleeper
		acquire_as "$SLEEPER_PID" "$T/srv/app"
		token=$(jq -r .token <<<"$OWNER")
		token=$token run_recipe "$sh"
		[ "$status" -eq 0 ] || fail "$sh: exit $status: $stderr"
		run -0 wsl inspect "$T/srv/app"
		[ "$(jq -r .state <<<"$output")" = retained ] || fail "$sh: $output"
		[[ $output == *"migration stopped at step 4"* ]] || fail "$sh: no reason in $output"
		# the next job is told to recover; recover by the exact document frees it
		run wsl run -n "$T/srv/app" -- true
		[ "$status" -eq 69 ] || fail "$sh: next job exited $status"
		# the script that retained it ends; then an exact recover frees it
		kill -KILL "$SLEEPER_PID"
		wait_exit "$SLEEPER_PID" 10 2>/dev/null
		run wsl recover --expected-owner - "$T/srv/app" -- true <<<"$OWNER"
		[ "$status" -eq 0 ] || fail "$sh: exact recover: exit $status: $output"
		[ "$(state "$T/srv/app")" = free ] || fail "$sh: not free after recover"
	done
}

@test "recipe README shared-cache: a reader enters beside another reader, the rebuild waits for it (dash, bash)" {
	local sh
	recipe_file README.md shared-cache
	mkdir -p "$T/srv/cache"
	for sh in $(shells); do
		rm -f "$STUB_DIR/log"
		start_sleeper
		run -0 wsl acquire --shared --pid "$SLEEPER_PID" "$T/srv/cache"
		local tok
		tok=$(jq -r .token <<<"$output")
		start_recipe "$sh"
		# the test job ran beside the other reader; the rebuild waits
		wait_for "grep -q '^make test' '$STUB_DIR/log' 2>/dev/null && compgen -G '$WSLOCK_DIR/queue/*' >/dev/null" 30 ||
			fail "$sh: the reader did not run or the rebuild did not wait: $(cat "$T/rec.err")"
		if grep -q '^make cache' "$STUB_DIR/log"; then fail "$sh: the rebuild ran beside a reader"; fi
		wsl release --token "$tok" "$T/srv/cache" >/dev/null
		wait_exit "$REC_PID" 30 || fail "$sh: the recipe did not end"
		[ "$WAIT_STATUS" -eq 0 ] || fail "$sh: exit $WAIT_STATUS: $(cat "$T/rec.err")"
		stub_called '^make cache\|'
		[ "$(state "$T/srv/cache")" = free ]
	done
}

@test "recipe README cleanup: previews in text, then runs the hook inside each reclaimed workspace (dash, bash)" {
	local sh
	recipe_file README.md cleanup
	mkdir -p "$T/srv/a" "$T/srv/b" "$T/srv/live"
	start_sleeper
	acquire_as "$SLEEPER_PID" "$T/srv/live"
	for sh in $(shells); do
		rm -f "$STUB_DIR/log"
		dead_acquired "$T/srv/a"
		dead_acquired "$T/srv/b"
		run_recipe "$sh" -e
		[ "$status" -eq 0 ] || fail "$sh: exit $status: $stderr"
		[[ $output == *"$T/srv/a"* && $output == *"$T/srv/live"* ]] || fail "$sh: no text preview: $output"
		stub_called "^git clean -fdx\|$T/srv/a\|$T/srv/a\|"
		stub_called "^git clean -fdx\|$T/srv/b\|$T/srv/b\|"
		! grep -q "$T/srv/live" "$STUB_DIR/log" || fail "$sh: the hook ran in a live holder's workspace"
		[ "$(state "$T/srv/a")" = free ] && [ "$(state "$T/srv/b")" = free ]
		[ "$(state "$T/srv/live")" = held ]
		# Cancelled inside the hook: the lock is kept, retained, not left
		# looking held by a live job.
		dead_acquired "$T/srv/a"
		rm -f "$STUB_DIR/started"
		STUB_BLOCK=git start_recipe "$sh" -e
		interrupt TERM
		run -0 wsl inspect "$T/srv/a"
		jq_ok '.state == "free" or .state == "retained"'
		if [ "$(jq -r .state <<<"$output")" = retained ]; then
			wsl inspect --owner "$T/srv/a" >"$T/owner.json"
			wsl recover -q --expected-owner "$T/owner.json" "$T/srv/a" >/dev/null
		fi
	done
}

@test "recipe man runbook-inspect, runbook-save, runbook-recover, runbook-repair: the steps recover a crashed lock (dash, bash)" {
	local sh step
	mkdir -p "$T/srv/w"
	for sh in $(shells); do
		dead_acquired "$T/srv/w"
		for step in runbook-inspect runbook-save runbook-recover; do
			recipe_file wslock.1 "$step"
			run_recipe "$sh" -e
			[ "$status" -eq 0 ] || fail "$sh, $step: exit $status: $stderr"
			[ "$step" != runbook-inspect ] || jq_ok '.state == "held" and .liveness == "dead"'
		done
		jq -e '.action == "recovered"' <<<"$output" >/dev/null || fail "$sh: $output"
		[ "$(state "$T/srv/w")" = free ]
		dead_acquired "$T/srv/w"
		for step in runbook-save runbook-repair; do
			recipe_file wslock.1 "$step"
			run_recipe "$sh" -e
			[ "$status" -eq 0 ] || fail "$sh, $step: exit $status: $stderr"
		done
		stub_called "^repair \|$T/srv/w\|"
		[ "$(state "$T/srv/w")" = free ]
		# Run again on the same owner.json: that owner is gone, nothing changes.
		run_recipe "$sh" -e
		[ "$status" -ne 0 ] || fail "$sh: recovered twice from one owner"
	done
}

@test "recipe README etcd: the same run against a real etcd (dash, bash)" {
	command -v etcd >/dev/null || skip "etcd is not installed (apt-get install etcd-server)"
	local sh d e
	recipe_file README.md etcd
	d=$T/etcd
	mkdir -p "$d"
	e=$("$BATS_TEST_DIRNAME/etcd/cluster.sh" start "$d") || fail "etcd did not start"
	# Point the recipe's endpoints at the local server.
	sed -i "s|WSLOCK_ETCD_ENDPOINTS=[^ ]*|WSLOCK_ETCD_ENDPOINTS=$e|" "$T/recipe.sh"
	export WS=$T/srv/e
	mkdir -p "$WS"
	for sh in $(shells); do
		rm -f "$STUB_DIR/log"
		run_recipe "$sh" -e
		[ "$status" -eq 0 ] || { "$BATS_TEST_DIRNAME/etcd/cluster.sh" stop "$d"; fail "$sh: exit $status: $stderr"; }
		grep -q "^make test|$WS|" "$STUB_DIR/log" || { "$BATS_TEST_DIRNAME/etcd/cluster.sh" stop "$d"; fail "$sh: not run"; }
	done
	"$BATS_TEST_DIRNAME/etcd/cluster.sh" stop "$d"
}

# The unit's ExecStart= as systemd runs it: no HOME, no WSLOCK_DIR, and
# STATE_DIRECTORY set to the StateDirectory= it created.  systemd is not
# PID 1 on every machine the tests run on (CI containers): there, the same
# environment is built by hand and the command is run under it; with
# systemd as PID 1 the unit's lines run through systemd-run as well.
@test "recipe README systemd: the unit's command locks in \$STATE_DIRECTORY/wslock without HOME; stopping it leaves no lock" {
	local sd cmd reg
	recipe_file README.md systemd
	sd=$(sed -n 's/^StateDirectory=//p' "$T/recipe.sh")
	cmd=$(sed -n 's/^ExecStart=//p' "$T/recipe.sh" | sed 's|^/usr/bin/wslock |wslock |')
	[ -n "$sd" ] && [ -n "$cmd" ] || fail "no StateDirectory= or ExecStart= in: $(cat "$T/recipe.sh")"
	grep -q '^Type=oneshot$' "$T/recipe.sh" || fail "not a oneshot unit"
	mkdir -p "$T/srv/build" "$T/var/lib/$sd"
	chmod 0755 "$T/var/lib/$sd"
	reg=$T/var/lib/$sd/wslock
	printf '%s\n' "$cmd" >"$T/recipe.sh"
	svc() {
		env -i PATH="$PATH" STUB_DIR="$STUB_DIR" ${STUB_BLOCK:+STUB_BLOCK=$STUB_BLOCK} \
			STATE_DIRECTORY="$T/var/lib/$sd" "$@"
	}
	rm -f "$STUB_DIR/log"
	run svc timeout -k 5 60 sh "$T/recipe.sh"
	[ "$status" -eq 0 ] || fail "exit $status: $output"
	stub_called "^make -C $T/srv/build all\|$T/srv/build\|"
	[ -d "$reg/locks" ] || fail "no registry in \$STATE_DIRECTORY/wslock"
	[ "$(stat -c %a "$reg")" = 700 ]
	[ "$(wsl -d "$reg" inspect "$T/srv/build" | jq -r .state)" = free ]
	# systemctl stop: SIGTERM to every process of the service.
	rm -f "$STUB_DIR/started"
	export STUB_BLOCK=make
	(cd "$T/cwd" && exec setsid env -i PATH="$PATH" STUB_DIR="$STUB_DIR" STUB_BLOCK=make \
		STATE_DIRECTORY="$T/var/lib/$sd" sh "$T/recipe.sh") </dev/null >"$T/rec.out" 2>"$T/rec.err" 3>&- &
	REC_PID=$!
	track_pid "$REC_PID"
	interrupt TERM
	[ "$(wsl -d "$reg" inspect "$T/srv/build" | jq -r .state)" = free ] || fail "stopping the service left the lock"
	unset STUB_BLOCK
	if [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ] && command -v systemd-run >/dev/null; then
		local unit=wslock-recipe-$$ state=/var/lib/wslock-recipe-$$
		run systemd-run --wait --pipe --collect --quiet --unit="$unit" -p Type=oneshot \
			-p StateDirectory="wslock-recipe-$$" -p Environment="PATH=$PATH STUB_DIR=$STUB_DIR" \
			sh -c "$cmd"
		local rc=$status
		[ -d "$state/wslock/locks" ] && [ "$(stat -c %a "$state/wslock")" = 700 ]
		local made=$?
		rm -rf "$state"
		[ "$rc" -eq 0 ] && [ "$made" -eq 0 ] || fail "under systemd-run: exit $rc: $output"
	fi
}

# The "coming from flock" table: each row whose two columns are commands is
# run both ways, on a free and on a held lock, and the exit statuses must be
# the same (the table's promise to a ported script).
@test "README tour: its mkdir makes every workspace the tour's run --shared line uses" {
	local tour mk line
	tour=$(sed -n '/^## A quick tour/,/^## /p' "$README")
	mk=$(grep -m1 '^\$ mkdir -p ' <<<"$tour") || fail "no mkdir in the tour"
	line=$(grep -m1 '^\$ wslock run --shared ' <<<"$tour") || fail "no run --shared in the tour"
	mkdir -p "$T/tour/bin" && ln -s "$WSLOCK" "$T/tour/bin/wslock"
	cd "$T/tour"
	run -0 --separate-stderr env PATH="$T/tour/bin:$PATH" sh -c "${mk#\$ } && ${line#\$ }"
	[[ $output == "reading as "* ]] || fail "output: $output stderr: $stderr"
}

@test "README flock-table: each wslock line exits as its flock line, free and held" {
	command -v flock >/dev/null || skip "flock(1) is not installed"
	local rows row f w n=0 held_f held_w st_f st_w fpid
	rows=$(awk '/^<!-- flock-table -->/ { t = 1; next } t && !/^\|/ && NR > 1 && seen { exit }
		t && /^\|/ { seen = 1; print }' "$README" | tail -n +3)
	[ -n "$rows" ] || fail "no flock table in README"
	mkdir -p "$T/srv/d"
	: >"$T/lockfile"
	# subst TEXT: the table's placeholders made concrete (a 10 s wait shortened).
	subst() {
		sed -e "s|FILE|$T/lockfile|g" -e "s|DIR|$T/srv/d|g" -e 's|CMD|true|g' \
			-e "s|'STRING'|'exit 4'|g" -e 's|-w 10 |-w 0.2 |g' <<<"$1"
	}
	while IFS= read -r row; do
		f=$(awk -F'|' '{ print $2 }' <<<"$row" | sed -n 's/^ *`\(.*\)` *$/\1/p')
		w=$(awk -F'|' '{ print $3 }' <<<"$row" | sed -n 's/^ *`\([^`]*\)` *$/\1/p')
		case $f in flock\ *) ;; *) continue ;; esac
		case $w in "wslock run "*) ;; *) continue ;; esac
		f=$(subst "$f") w=$(subst "$w")
		n=$((n + 1))
		st_f=0 st_w=0
		SHELL=/bin/sh timeout 20 sh -c "$f" >/dev/null 2>&1 || st_f=$?
		timeout 20 sh -c "$w" >/dev/null 2>&1 || st_w=$?
		[ "$st_f" = "$st_w" ] || fail "free: '$f' exits $st_f, '$w' exits $st_w"
		# Held: only rows that give up (-n, -w) can be compared.
		case $f in *" -n "* | *" -w "*) ;; *) continue ;; esac
		# -o: the lock stays with flock itself, so that killing it frees the file.
		flock -o "$T/lockfile" sleep 300 </dev/null >/dev/null 2>&1 3>&- &
		fpid=$!
		track_pid "$fpid"
		wait_for "! flock -n '$T/lockfile' true" 10
		hold "$T/srv/d"
		st_f=0 st_w=0
		timeout 20 sh -c "$f" >/dev/null 2>&1 || st_f=$?
		timeout 20 sh -c "$w" >/dev/null 2>&1 || st_w=$?
		kill "$fpid"
		wait "$fpid" 2>/dev/null || true
		unhold
		[ "$st_f" = "$st_w" ] || fail "held: '$f' exits $st_f, '$w' exits $st_w"
		[ "$st_f" -ne 0 ] || fail "held: '$f' did not give up"
	done <<<"$rows"
	[ "$n" -ge 5 ] || fail "only $n comparable rows in the flock table"
}
