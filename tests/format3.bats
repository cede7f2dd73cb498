#!/usr/bin/env bats
# Registry format 3 (DESIGN §3 "Registry format", README "Registry layout"):
# identity "below" markers in idnest/, apart from the "at" markers in ids/,
# so that an acquire reads O(depth) directory entries however many locks
# are held beside it. The upgrades 2 -> 3 (against the last format 2
# binary, commit 77836c4, built from this repository's history) and
# 0.1 -> 3 (tag v0.1.0, else commit 2dad4c0), crashes inside the upgrade,
# and the format 2 binary refusing the upgraded registry.

load helpers

setup_file() {
	# bats runs setup_file under errexit: keep each status for needs_*.
	local rc=0
	F2=$("$BATS_TEST_DIRNAME/compat/build-old.sh" format2 "$BATS_FILE_TMPDIR/f2" 2>"$BATS_FILE_TMPDIR/f2.err") || rc=$?
	echo "$rc" >"$BATS_FILE_TMPDIR/f2.rc"
	rc=0
	OLD=$("$BATS_TEST_DIRNAME/compat/build-old.sh" v010 "$BATS_FILE_TMPDIR/v010" 2>"$BATS_FILE_TMPDIR/v010.err") || rc=$?
	echo "$rc" >"$BATS_FILE_TMPDIR/v010.rc"
	export F2 OLD
}

needs_built() {
	local rc
	rc=$(cat "$BATS_FILE_TMPDIR/$1.rc")
	[ "$rc" != 2 ] || skip "no git history to build $1 from: $(cat "$BATS_FILE_TMPDIR/$1.err")"
	[ "$rc" = 0 ] || fail "building $1 failed: $(cat "$BATS_FILE_TMPDIR/$1.err")"
}

needs_f2() {
	needs_built f2
	[ -x "$F2" ] || fail "no format 2 binary at $F2"
}

needs_mounts() {
	unshare -m sh -c 'mount -t tmpfs none /mnt' 2>/dev/null ||
		skip "cannot create a mount namespace and mount here (no CAP_SYS_ADMIN)"
}

stamp() { cat "$WSLOCK_DIR/tmp"; }

# The format 2 below markers left in ids/ (none once upgraded).
below_left() { find "$WSLOCK_DIR/ids" -name '*.below' | wc -l; }

# owner_sums: b2sum of every owner.json and retained.json in locks/.
owner_sums() {
	(cd "$WSLOCK_DIR/locks" && find . -name owner.json -o -name retained.json | LC_ALL=C sort |
		xargs -r b2sum)
}

# alias_try [--inspect] REAL ALIAS WS...: in a mount namespace where ALIAS
# is a bind mount of REAL, `acquire -n` each WS (paths under ALIAS) and
# print "WS=STATUS"; with --inspect (which changes nothing) print
# "WS=N", N the locks inspect finds overlapping WS.
alias_try() {
	local mode=acquire
	if [ "$1" = --inspect ]; then mode=inspect; shift; fi
	local real=$1 alias=$2
	shift 2
	timeout -k 5 60 unshare -m --propagation private sh -c '
		W=$1 mode=$2 r=$3 a=$4
		shift 4
		mount --bind "$r" "$a" || exit 1
		for ws in "$@"; do
			if [ "$mode" = inspect ]; then
				echo "$ws=$("$W" inspect "$ws" | jq ".overlapping | length")"
			else
				"$W" acquire -n --pid $$ "$ws" >/dev/null 2>&1
				echo "$ws=$?"
			fi
		done' sh "$WSLOCK" "$mode" "$real" "$alias" "$@"
}

@test "format 2 -> 3: held, retained, corrupt and running locks keep their bytes and hold; the format 2 binary then refuses the registry" {
	needs_f2
	mkws live held/sub retained corrupt other third
	WSLOCK=$F2 hold "$(W live)"
	local live_pid=$HOLD_PID live_dir=$HOLD_DIR
	start_sleeper
	run -0 "$F2" acquire --pid "$SLEEPER_PID" "$(W held/sub)"
	run -0 "$F2" acquire --pid "$SLEEPER_PID" "$(W corrupt)"
	printf 'not an owner' | put_owner "$(W corrupt)"
	run -1 "$F2" run --retain-on-failure "$(W retained)" -- false
	[ "$(stamp)" = "wslock registry format 2" ] || fail "not a format 2 registry: $(stamp)"
	[ "$(below_left)" -gt 0 ] || fail "format 2 wrote no below markers in ids/"
	local sums before
	sums=$(owner_sums)

	# Reading changes nothing.
	before=$(registry_snapshot)
	inspect_json "$(W live)"
	jq_ok '.state == "held" and .liveness == "live"' "$INSPECT"
	run -0 --separate-stderr wsl inspect --all
	assert_same_snapshot "$before" "$(registry_snapshot)"

	# The first mutation upgrades.
	run -0 --separate-stderr wsl run -n "$(W other)" -- true
	[ "$(stamp)" = "wslock registry format 3" ] || fail "not upgraded: $(stamp)"
	[ "$(below_left)" = 0 ] || fail "below markers left in ids/: $(find "$WSLOCK_DIR/ids" -name '*.below')"
	[ -n "$(find "$WSLOCK_DIR/idnest" -mindepth 2 -type f)" ] || fail "no marker in idnest/"
	[ "$(owner_sums)" = "$sums" ] || fail "a document's bytes changed"

	run -75 --separate-stderr wsl run -n "$(W live)" -- echo RAN
	[[ $output != *RAN* ]] || fail "ran beside the format 2 run"
	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W held)"
	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W held/sub)"
	run -69 --separate-stderr wsl acquire -n --pid $$ "$(W retained)"
	run -65 --separate-stderr wsl acquire -n --pid $$ "$(W corrupt)"
	run -0 --separate-stderr wsl inspect --all
	jq_ok '[.locks[] | .state] | sort == ["corrupt", "held", "held", "retained"]'

	# The format 2 binary refuses, and never runs unlocked.
	run -77 --separate-stderr "$F2" run "$(W third)" -- echo RAN
	[[ $output != *RAN* ]] || fail "format 2 ran on a format 3 registry"
	[[ $stderr == *"format 3"* ]] || fail "does not say why: $stderr"
	run -77 --separate-stderr "$F2" inspect "$(W held/sub)"

	# The format 2 run still ends and releases its lock.
	unhold "$live_dir" "$live_pid"
	[ "$WAIT_STATUS" -eq 0 ] || fail "the format 2 holder exited $WAIT_STATUS: $(cat "$live_dir/err")"
	inspect_json "$(W live)"
	jq_ok '.state == "free"' "$INSPECT"
	run -0 --separate-stderr wsl run -n "$(W live)" -- true
	run -0 --separate-stderr wsl reclaim --yes
}

@test "0.1 -> 3 in one step: the 0.1.0 lock keeps its bytes, gets format 3 markers, and 0.1.0 refuses the registry" {
	needs_built v010
	mkws held/sub other
	start_sleeper
	"$OLD" acquire --pid "$SLEEPER_PID" "$(W held/sub)" >/dev/null
	local key bytes
	key=$(lock_key_of "$(W held/sub)")
	bytes=$(b2sum <"$WSLOCK_DIR/locks/$key/owner.json")
	[ -d "$WSLOCK_DIR/tmp" ] || fail "not a 0.1 registry"
	run -0 --separate-stderr wsl run -n "$(W other)" -- true
	[ "$(stamp)" = "wslock registry format 3" ] || fail "not upgraded: $(ls -la "$WSLOCK_DIR")"
	[ "$(b2sum <"$WSLOCK_DIR/locks/$key/owner.json")" = "$bytes" ] || fail "the 0.1 lock's bytes changed"
	[ -n "$(find "$WSLOCK_DIR/ids" -mindepth 2 -name "$key")" ] || fail "no at marker in ids/"
	[ -n "$(find "$WSLOCK_DIR/idnest" -mindepth 2 -name "$key")" ] || fail "no below marker in idnest/"
	[ "$(below_left)" = 0 ] || fail "format 2 below markers written"
	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W held)"
	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W held/sub)"
	run -77 "$OLD" run "$(W other)" -- echo RAN
	[[ $output != *RAN* ]] || fail "0.1.0 ran on a format 3 registry"
}

@test "after the 2 -> 3 upgrade a bind-mount alias still finds descendants and ancestors by identity, also of a lock the format 2 binary took after it" {
	needs_f2
	needs_mounts
	mkws real/sub/deep real2 alias alias2 other late/x
	start_sleeper
	run -0 "$F2" acquire --pid "$SLEEPER_PID" "$(W real/sub)"
	run -0 "$F2" acquire --pid "$SLEEPER_PID" "$(W real2)"
	# A format 2 waiter that opened the registry before the upgrade and
	# acquires after it (its queue entry behind a format 2 holder).
	WSLOCK=$F2 hold "$(W late)"
	local late_pid=$HOLD_PID late_dir=$HOLD_DIR
	local d=$BATS_TEST_TMPDIR/waiter
	mkdir -p "$d"
	"$F2" run "$(W late/x)" -- sh -c 'touch "$1/ran"; while [ ! -e "$1/go" ]; do sleep 0.05; done' sh "$d" \
		</dev/null >/dev/null 2>"$d/err" 3>&- &
	local waiter=$!
	track_pid "$waiter"
	wait_for "[ -n \"\$(ls -A '$WSLOCK_DIR/queue' 2>/dev/null)\" ]" 20 || fail "the format 2 waiter did not queue: $(cat "$d/err")"

	run -0 --separate-stderr wsl run -n "$(W other)" -- true
	[ "$(stamp)" = "wslock registry format 3" ] || fail "not upgraded"
	[ "$(below_left)" = 0 ] || fail "below markers left in ids/"
	local r a r2 a2
	r=$(canon "$(W real)") a=$(canon "$(W alias)") r2=$(canon "$(W real2)") a2=$(canon "$(W alias2)")
	run -0 alias_try "$r" "$a" "$a" "$a/sub/deep"
	[[ $output == *"$a=75"* ]] || fail "the alias of an ancestor did not find real/sub: $output"
	[[ $output == *"$a/sub/deep=75"* ]] || fail "a descendant through the alias did not find real/sub: $output"
	mkdir -p "$r2/sub"
	run -0 alias_try "$r2" "$a2" "$a2/sub"
	[[ $output == *"$a2/sub=75"* ]] || fail "a descendant through the alias did not find real2: $output"

	# The format 2 waiter: refused (77) or holding, and then found.
	unhold "$late_dir" "$late_pid"
	wait_for "[ -e '$d/ran' ] || ! is_running $waiter" 20
	if [ -e "$d/ran" ]; then
		# Its markers are format 2's: read in place, then moved by the
		# next mutation that meets them.
		[ "$(below_left)" -gt 0 ] || fail "the format 2 waiter wrote no below marker in ids/"
		run -0 alias_try --inspect "$(canon "$(W late)")" "$a" "$a"
		[[ $output == *"$a=1"* ]] || fail "inspect through the alias of late/ did not find late/x: $output"
		run -0 alias_try "$(canon "$(W late)")" "$a" "$a"
		[[ $output == *"$a=75"* ]] || fail "the alias of late/ did not find the format 2 lock of late/x: $output"
		[ "$(below_left)" = 0 ] || fail "the mutation left format 2 below markers in ids/"
		touch "$d/go"
		wait_exit "$waiter" 20
	else
		wait_exit "$waiter" 20
		[ "$WAIT_STATUS" = 77 ] || fail "the format 2 waiter exited $WAIT_STATUS: $(cat "$d/err")"
	fi
}

@test "a crash at each step of the 2 -> 3 upgrade leaves a registry that reads correctly, and the next mutation finishes the upgrade" {
	needs_f2
	needs_mounts
	local T=$BATS_TEST_DIRNAME/../wslock-test step sums out r a
	[ -x "$T" ] || fail "the crash-test binary is not built (make test-build)"
	for step in upgrade:below-linked upgrade:format3-stamped upgrade:below-removing; do
		export WSLOCK_DIR=$BATS_TEST_TMPDIR/reg-${step#*:}
		local n=${step#*:}
		mkws "$n/p/held" "$n/q/x" "$n/other" "$n/alias"
		start_sleeper
		run -0 "$F2" acquire --pid "$SLEEPER_PID" "$(W "$n/p/held")"
		run -0 "$F2" acquire --pid "$SLEEPER_PID" "$(W "$n/q/x")"
		sums=$(owner_sums)
		run -137 env WSLOCK_CRASH_AT="$step" "$T" run -n "$(W "$n/other")" -- echo RAN
		[[ $output != *RAN* ]] || fail "$step: ran after the crash point"
		[ "$(owner_sums)" = "$sums" ] || fail "$step: bytes changed"
		if [ "$step" = upgrade:below-linked ]; then
			# Still format 2: the format 2 binary reads and writes it.
			[ "$(stamp)" = "wslock registry format 2" ] || fail "$step: stamp $(stamp)"
			run -0 "$F2" inspect "$(W "$n/p/held")"
			jq_ok '.state == "held"'
			run -75 "$F2" acquire -n --pid $$ "$(W "$n/p")"
		else
			[ "$(stamp)" = "wslock registry format 3" ] || fail "$step: stamp $(stamp)"
			[ "$(below_left)" -gt 0 ] || fail "$step: nothing was left to finish"
			run -77 "$F2" inspect "$(W "$n/p/held")"
		fi
		# The format 3 binary reads it: the lock below an alias of p/.
		r=$(canon "$(W "$n/p")") a=$(canon "$(W "$n/alias")")
		local before
		before=$(registry_snapshot)
		run -0 alias_try --inspect "$r" "$a" "$a"
		[[ $output == *"$a=1"* ]] || fail "$step: the alias of p/ did not find p/held: $output"
		assert_same_snapshot "$before" "$(registry_snapshot)"
		# The next mutation finishes the upgrade.
		run -0 --separate-stderr wsl run -n "$(W "$n/other")" -- true
		[ "$(stamp)" = "wslock registry format 3" ] || fail "$step: not upgraded afterwards"
		[ "$(below_left)" = 0 ] || fail "$step: below markers left: $(find "$WSLOCK_DIR/ids" -name '*.below')"
		[ "$(owner_sums)" = "$sums" ] || fail "$step: bytes changed"
		run -0 alias_try "$r" "$a" "$a"
		[[ $output == *"$a=75"* ]] || fail "$step: after the upgrade the alias of p/ did not find p/held: $output"
		run -75 --separate-stderr wsl acquire -n --pid $$ "$(W "$n/q")"
		run -75 --separate-stderr wsl acquire -n --pid $$ "$(W "$n/p/held")"
	done
}

# entries_read N BIN: fills a fresh registry with N held siblings (under
# u/), then prints the bytes of directory entries (getdents64) that one
# `run` of another workspace (t/w) reads in the registry (strace -y names
# each descriptor's path: /proc/self/fd and /proc/fs/jbd2, which change with
# the machine's mounts and descriptors, are not the registry's).
entries_read() {
	local n=$1 bin=$2 reg=$BATS_TEST_TMPDIR/reg-$1-${2##*/}
	mkdir -p "$BATS_TEST_TMPDIR/ws/u" "$(W t/w)"
	(cd "$BATS_TEST_TMPDIR/ws/u" && seq -f "d%05g" 1 "$n" | xargs mkdir -p)
	seq -f "$BATS_TEST_TMPDIR/ws/u/d%05g" 1 "$n" |
		xargs -P2 -n1 "$bin" -d "$reg" acquire -q --pid "$SLEEPER_PID" >/dev/null ||
		fail "filling $n locks failed"
	[ "$(find "$reg/locks" -mindepth 1 -maxdepth 1 | wc -l)" = "$n" ] || fail "not $n locks"
	timeout -k 5 60 strace -f -y -e trace=getdents64 -o "$reg.strace" \
		"$bin" -d "$reg" run -n "$(W t/w)" -- true || fail "run under strace failed"
	awk -F'= ' -v r="<$reg/" -v r0="<$reg>" \
		'/getdents64\(/ && (index($0, r) || index($0, r0)) { s += $NF } END { print s + 0 }' "$reg.strace"
}

@test "an acquire reads as many directory entries beside 2000 held sibling locks as beside 10 (O(depth)); format 2 read them all" {
	command -v strace >/dev/null || skip "strace is not installed"
	start_sleeper
	local few many
	few=$(entries_read 10 "$WSLOCK")
	many=$(entries_read 2000 "$WSLOCK")
	[ "$few" = "$many" ] || fail "entries read grow with the locks held beside: $few bytes at 10, $many at 2000"
	# The measure sees the difference: format 2 read every sibling's marker.
	if [ "$(cat "$BATS_FILE_TMPDIR/f2.rc")" = 0 ]; then
		few=$(entries_read 10 "$F2")
		many=$(entries_read 300 "$F2")
		[ "$many" -gt $((few * 10)) ] || fail "format 2 read $few bytes at 10 and $many at 300"
	fi
}
