#!/usr/bin/env bats
# Mixed versions (DESIGN §3 "Registry format"): wslock 0.1.0, built from this
# repository's history, against a registry before and after a 0.2 binary
# upgrades it, with a lock held by 0.1.0 across the upgrade.

load helpers

setup_file() {
	# bats runs setup_file under errexit: keep the status for needs_old
	# instead of failing the whole file on a clone without the history.
	local rc=0
	OLD=$("$BATS_TEST_DIRNAME/compat/build-old.sh" v010 "$BATS_FILE_TMPDIR/v010" 2>"$BATS_FILE_TMPDIR/build.err") || rc=$?
	echo "$rc" >"$BATS_FILE_TMPDIR/build.rc"
	export OLD
}

needs_old() {
	local rc
	rc=$(cat "$BATS_FILE_TMPDIR/build.rc")
	[ "$rc" != 2 ] || skip "no git history to build 0.1.0 from: $(cat "$BATS_FILE_TMPDIR/build.err")"
	[ "$rc" = 0 ] && [ -x "$OLD" ] || fail "building 0.1.0 failed: $(cat "$BATS_FILE_TMPDIR/build.err")"
	"$OLD" --version | grep -q '^wslock 0\.1\.0$' || fail "not 0.1.0: $("$OLD" --version)"
}

@test "a 0.1.0 lock held across the upgrade keeps its bytes and holds; afterwards 0.1.0 refuses the registry (77) for run and inspect" {
	needs_old
	mkws held other third
	local d=$BATS_TEST_TMPDIR/old key bytes
	mkdir -p "$d"
	"$OLD" run "$(W held)" -- sh -c 'touch "$1/ready"; while [ ! -e "$1/go" ]; do sleep 0.05; done' sh "$d" \
		</dev/null >/dev/null 2>"$d/err" 3>&- &
	local p=$!
	track_pid "$p"
	wait_for "[ -e '$d/ready' ] || ! is_running $p" 20
	[ -e "$d/ready" ] || fail "0.1.0 run did not start: $(cat "$d/err")"
	[ -d "$WSLOCK_DIR/tmp" ] || fail "not a 0.1 registry"
	key=$(lock_key_of "$(W held)")
	bytes=$(b2sum <"$WSLOCK_DIR/locks/$key/owner.json")
	run -0 "$OLD" inspect "$(W held)"
	jq_ok '.state == "held" and .liveness == "live"'

	# 0.2 reads the 0.1 registry without changing it, and honours the lock.
	before=$(registry_snapshot)
	inspect_json "$(W held)"
	jq_ok '.state == "held" and .liveness == "live" and .owner.schema_version == 1' "$INSPECT"
	assert_same_snapshot "$before" "$(registry_snapshot)"
	# Its first mutation upgrades the registry once.
	run -0 --separate-stderr wsl run -n "$(W other)" -- true
	[ -f "$WSLOCK_DIR/tmp" ] && [ "$(cat "$WSLOCK_DIR/tmp")" = "wslock registry format 3" ] ||
		fail "not upgraded: $(ls -la "$WSLOCK_DIR")"
	[ "$(b2sum <"$WSLOCK_DIR/locks/$key/owner.json")" = "$bytes" ] || fail "the 0.1 lock's bytes changed"
	run -75 --separate-stderr wsl run -n "$(W held)" -- echo RAN
	[[ $output != *RAN* ]] || fail "ran beside the 0.1.0 holder"
	[ -n "$(ls "$WSLOCK_DIR/ids")" ] || fail "the 0.1 lock has no identity marker"

	# 0.1.0 on the upgraded registry: refused, never run unlocked.
	run -77 "$OLD" run "$(W third)" -- echo RAN
	[[ $output != *RAN* ]] || fail "0.1.0 ran on an upgraded registry"
	run -77 "$OLD" inspect "$(W held)"
	run -77 "$OLD" run "$(W held)" -- echo RAN
	[[ $output != *RAN* ]] || fail "0.1.0 ran on an upgraded registry"

	# The 0.1.0 holder still releases its lock.
	touch "$d/go"
	wait_exit "$p" 20
	[ "$WAIT_STATUS" -eq 0 ] || fail "the 0.1.0 holder exited $WAIT_STATUS: $(cat "$d/err")"
	inspect_json "$(W held)"
	jq_ok '.state == "free"' "$INSPECT"
	run -0 --separate-stderr wsl run -n "$(W held)" -- true
}

@test "a dead 0.1.0 lock is recovered by its exact bytes after the upgrade" {
	needs_old
	mkws a b
	start_sleeper
	local owner
	owner=$("$OLD" acquire --pid "$SLEEPER_PID" "$(W a)")
	kill -KILL "$SLEEPER_PID"
	wait_exit "$SLEEPER_PID" 10
	run -0 --separate-stderr wsl run -n "$(W b)" -- true
	[ -f "$WSLOCK_DIR/tmp" ] || fail "not upgraded"
	printf '%s' "$owner" >"$BATS_TEST_TMPDIR/expected.json"
	run -0 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/expected.json" "$(W a)"
	jq_ok ".prior_owner == $owner and .owner.schema_version == 2"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "a crash at each step of the upgrade leaves a registry that 0.2 upgrades later, the 0.1.0 lock kept by its bytes" {
	needs_old
	local T=$BATS_TEST_DIRNAME/../wslock-test step key bytes
	[ -x "$T" ] || fail "the crash-test binary is not built (make test-build)"
	for step in upgrade:markers-written upgrade:stamped; do
		export WSLOCK_DIR=$BATS_TEST_TMPDIR/reg-${step#*:}
		mkws "held-${step#*:}" other
		start_sleeper
		"$OLD" acquire --pid "$SLEEPER_PID" "$(W "held-${step#*:}")" >/dev/null
		key=$(lock_key_of "$(W "held-${step#*:}")")
		bytes=$(b2sum <"$WSLOCK_DIR/locks/$key/owner.json")
		run -137 env WSLOCK_CRASH_AT="$step" "$T" run -n "$(W other)" -- echo RAN
		[[ $output != *RAN* ]] || fail "$step: ran after the crash point"
		# Before the stamp the registry is still 0.1's; after it, 0.2's.
		if [ "$step" = upgrade:markers-written ]; then
			[ -d "$WSLOCK_DIR/tmp" ] || fail "$step: tmp/ is gone"
			run -0 "$OLD" inspect "$(W "held-${step#*:}")"
		else
			[ -f "$WSLOCK_DIR/tmp" ] || fail "$step: no stamp"
		fi
		run -75 --separate-stderr wsl acquire -n --pid $$ "$(W "held-${step#*:}")"
		run -0 --separate-stderr wsl run -n "$(W other)" -- true
		[ -f "$WSLOCK_DIR/tmp" ] || fail "$step: not upgraded afterwards"
		[ "$(b2sum <"$WSLOCK_DIR/locks/$key/owner.json")" = "$bytes" ] || fail "$step: bytes changed"
		run -75 --separate-stderr wsl acquire -n --pid $$ "$(W "held-${step#*:}")"
	done
}
