#!/usr/bin/env bats
# A filesystem mounted below a workspace (DESIGN §3, two spaces): neither
# the canonical path nor the identity of /c is below /p when /c is mounted
# at /p/.cache, yet /p contains it. wslock finds such locks through the
# mount table of its own mount namespace: the mounts below a workspace, and
# the other paths under which its directory (or one inside it) is visible.
#
# The mounts are real (CI runs as root), made under $BATS_TEST_TMPDIR in
# this namespace and undone in teardown.

load helpers

# needs_bind: skip, saying why, only when a bind mount cannot be made here
# (root without CAP_SYS_ADMIN in an unprivileged container).
needs_bind() {
	local d=$BATS_TEST_TMPDIR/probe
	mkdir -p "$d/a" "$d/b"
	if ! mount --bind "$d/a" "$d/b" 2>/dev/null; then
		skip "mount --bind fails here (no CAP_SYS_ADMIN)"
	fi
	umount "$d/b"
}

# bind SRC DST / tmpfs DST: mount, recorded for teardown (undone in
# reverse order).
bind() {
	mount --bind "$1" "$2" || fail "mount --bind $1 $2 failed"
	echo "$2" >>"$BATS_TEST_TMPDIR/.mounts"
}
tmpfs() {
	mount -t tmpfs wslock-test "$1" || fail "mount -t tmpfs $1 failed"
	echo "$1" >>"$BATS_TEST_TMPDIR/.mounts"
}

eval "helpers_$(declare -f teardown)"
teardown() {
	helpers_teardown
	if [ -f "$BATS_TEST_TMPDIR/.mounts" ]; then
		tac "$BATS_TEST_TMPDIR/.mounts" | while read -r m; do
			umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
		done
	fi
	return 0
}

# The usual layout: proj, with cache bind-mounted at proj/.cache. Sets P
# and C (canonical).
proj_with_cache() {
	needs_bind
	mkws proj/.cache cache/sub
	P=$(canon "$(W proj)")
	C=$(canon "$(W cache)")
	bind "$C" "$P/.cache"
}

# refused WS: `run -n WS` and `acquire -n` both meet a conflict (75) and
# run nothing.
refused() {
	run --separate-stderr wsl run -n "$1" -- echo RAN
	[ "$status" -eq 75 ] || fail "run -n $1: status $status, output $output, stderr $stderr"
	[[ $output != *RAN* ]] || fail "run -n $1 ran its command"
	run -75 --separate-stderr wsl acquire -n --pid $$ "$1"
	assert_json_error WSLOCK_BUSY
}

@test "a directory bind-mounted below a held workspace is refused, and so is the workspace while the directory is held" {
	proj_with_cache
	hold "$C"
	refused "$P"
	jq_ok ".error.workspace_root == \"$C\" and .error.holder.workspace_root == \"$C\" and .error.requested == \"$P\" and .error.relation == \"descendant\""
	refused "$P/.cache"
	inspect_json "$P"
	jq_ok ".state == \"free\" and ([.overlapping[] | [.workspace_root, .relation]] == [[\"$C\", \"descendant\"]])" "$INSPECT"
	unhold
	hold "$P"
	refused "$C"
	jq_ok ".error.workspace_root == \"$P\" and .error.relation == \"ancestor\""
	refused "$C/sub"
	inspect_json "$C"
	jq_ok ".state == \"free\" and ([.overlapping[] | [.workspace_root, .relation]] == [[\"$P\", \"ancestor\"]])" "$INSPECT"
	unhold
	run -0 --separate-stderr wsl run -n "$P" -- echo FREE
	[ "$output" = FREE ]
	run -0 --separate-stderr wsl run -n "$C" -- echo FREE
	[ "$output" = FREE ]
}

@test "a tmpfs mounted below a workspace and also elsewhere: the other mount point conflicts with the workspace, both ways" {
	needs_bind
	mkws proj/.cache other
	local p o
	p=$(canon "$(W proj)")
	o=$(canon "$(W other)")
	tmpfs "$p/.cache"
	mkdir "$p/.cache/sub"
	bind "$p/.cache" "$o"
	hold "$p"
	refused "$o"
	refused "$o/sub"
	unhold
	hold "$o/sub"
	refused "$p"
	refused "$o"
	refused "$p/.cache"
	unhold
	hold "$o"
	refused "$p"
	unhold
	run -0 --separate-stderr wsl run -n "$o" -- true
	run -0 --separate-stderr wsl run -n "$p" -- true
}

@test "through a bind mount of a bind mount, the mounted directory and the workspace conflict" {
	needs_bind
	mkws proj/.cache cache c2
	local p c c2
	p=$(canon "$(W proj)")
	c=$(canon "$(W cache)")
	c2=$(canon "$(W c2)")
	bind "$c" "$c2"
	bind "$c2" "$p/.cache"
	hold "$c"
	refused "$p"
	unhold
	hold "$p"
	refused "$c"
	refused "$c2"
	unhold
	hold "$c2"
	refused "$p"
	unhold
}

@test "nested subdirectories: a lock below the mounted directory refuses the workspace, and a workspace held through its own alias refuses a directory inside the mount" {
	proj_with_cache
	hold "$P/.cache/sub"
	refused "$P"
	refused "$C"
	refused "$C/sub"
	unhold
	hold "$C/sub"
	refused "$P"
	refused "$P/.cache"
	unhold
	# proj held through another path of its own: a directory inside the
	# mount below it is inside proj too.
	mkws palias
	local a
	a=$(canon "$(W palias)")
	bind "$P" "$a"
	hold "$a"
	refused "$P/.cache/sub"
	refused "$C/sub"
	unhold
	run -0 --separate-stderr wsl run -n "$C/sub" -- true
}

@test "release, recover and inspect act on the mounted directory's own lock" {
	proj_with_cache
	start_sleeper
	local sp=$SLEEPER_PID tok
	run -0 --separate-stderr wsl acquire --pid "$sp" "$C"
	tok=$(json_get .token)
	refused "$P"
	# proj holds no lock of its own: release there finds nothing.
	run --separate-stderr wsl release --token "$tok" "$P"
	[ "$status" -eq 66 ] || fail "release through proj: status $status, $output"
	inspect_json "$C"
	jq_ok '.state == "held" and .liveness == "live"' "$INSPECT"
	# Dead: recovery required through proj, and the next step names cache.
	kill -KILL "$sp"
	wait_exit "$sp" 10
	run -69 --separate-stderr wsl run -n "$P" -- echo RAN
	[[ $stderr == *"$C"* && $stderr == *"wslock"*"recover"*"$C"* ]] || fail "no next step for $C: $stderr"
	run -69 --separate-stderr wsl inspect --exit-status "$P"
	wsl inspect --owner "$C" >"$BATS_TEST_TMPDIR/expected.json"
	run -0 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/expected.json" "$C"
	inspect_json "$C"
	jq_ok '.state == "free" and .overlapping == []' "$INSPECT"
	# Released through the path that shows it inside proj, too.
	run -0 --separate-stderr wsl acquire --pid $$ "$C"
	tok=$(json_get .token)
	run -0 --separate-stderr wsl release --token "$tok" "$P/.cache"
	inspect_json "$P"
	jq_ok '.state == "free" and .overlapping == []' "$INSPECT"
	run -0 --separate-stderr wsl run -n "$P" -- true
}

@test "a run inside the holder of the workspace nests on the mounted directory; inside the directory's holder the workspace is refused" {
	proj_with_cache
	run -0 --separate-stderr wsl run "$P" -- "$WSLOCK" run -n "$C" -- echo NESTED
	[ "$output" = NESTED ] || fail "no nested run: $output $stderr"
	run -75 --separate-stderr wsl run "$C" -- "$WSLOCK" run -n "$P" -- echo RAN
	[[ $output != *RAN* ]] || fail "ran inside the directory's holder: $output"
}

@test "another mount namespace sees only its own mounts: without the mount there, the workspace is free" {
	proj_with_cache
	hold "$C"
	refused "$P"
	run -0 --separate-stderr timeout -k 5 30 unshare -m --propagation private sh -c '
		umount "$2/.cache" && "$1" run -n "$2" -- echo RAN' sh "$WSLOCK" "$P"
	[ "$output" = RAN ]
	unhold
}

@test "run and acquire of the workspace and the directory mounted below it at once: a usage error, nothing locked" {
	proj_with_cache
	local before
	run -0 --separate-stderr wsl run "$P" -- true
	before=$(registry_snapshot)
	run -64 --separate-stderr wsl run "$P" "$C" -- echo RAN
	[[ $output != *RAN* ]] || fail "ran: $output"
	[[ $stderr == *"$P"*"$C"*"mount"* ]] || fail "no reason: $stderr"
	run -64 --separate-stderr wsl acquire --pid $$ "$C/sub" "$P"
	assert_json_error WSLOCK_USAGE
	run -64 --separate-stderr wsl run "$P/.cache" "$C" -- echo RAN
	assert_same_snapshot "$before" "$(registry_snapshot)"
}

# The marker detector: a marker in one place for whoever is inside; any
# other marker there is an overlap.
DETECT='for m in "$2"/*; do [ -e "$m" ] && echo "$3 saw $m" >>"$4"; done
	touch "$2/$3"; sleep 0.01
	for m in "$2"/*; do [ "$m" = "$2/$3" ] || { [ -e "$m" ] && echo "$3 saw $m" >>"$4"; }; done
	rm -f "$2/$3"; echo "$3" >>"$4.order"'

# detect_loop WS TAG N: N runs of the detector under a lock on WS.
detect_loop() {
	local i
	for ((i = 0; i < $3; i++)); do
		"$WSLOCK" run -w 120 "$1" -- sh -c "$DETECT" sh "$1" "$BATS_TEST_TMPDIR/marks" "$2" \
			"$BATS_TEST_TMPDIR/overlaps" || return 1
	done
}

@test "two loops, on the mounted directory and on the workspace above it: zero overlaps" {
	proj_with_cache
	mkdir -p "$BATS_TEST_TMPDIR/marks"
	: >"$BATS_TEST_TMPDIR/overlaps"
	local n=50
	detect_loop "$C" cache "$n" &
	local bg=$!
	track_pid "$bg"
	detect_loop "$P" proj "$n" || fail "the proj loop failed"
	wait_exit "$bg" 300 || fail "the cache loop did not end"
	[ "$WAIT_STATUS" -eq 0 ] || fail "the cache loop failed ($WAIT_STATUS)"
	[ ! -s "$BATS_TEST_TMPDIR/overlaps" ] || fail "overlaps: $(head "$BATS_TEST_TMPDIR/overlaps")"
	[ "$(grep -c cache "$BATS_TEST_TMPDIR/overlaps.order")" -eq "$n" ] || fail "not every cache run held"
	[ "$(grep -c proj "$BATS_TEST_TMPDIR/overlaps.order")" -eq "$n" ] || fail "not every proj run held"
}

@test "a registry on a filesystem mounted inside the workspace is refused (77), before anything is made, and when it exists" {
	proj_with_cache
	# Not made yet: refused, and nothing is created in the mounted cache.
	run -77 --separate-stderr env WSLOCK_DIR="$C/reg" "$WSLOCK" run -n "$P" -- echo RAN
	[ -z "$output" ] || fail "the command ran: $output"
	[[ "$stderr" == *WSLOCK_UNSAFE_PATH* ]] || fail "stderr: $stderr"
	[ ! -e "$C/reg" ] || fail "the refused command made $C/reg"
	# Already there (made while nothing was mounted inside proj): refused too.
	mkdir -m 0700 "$C/reg2"
	run -77 --separate-stderr env WSLOCK_DIR="$C/reg2" "$WSLOCK" run -n "$P" -- echo RAN
	[ -z "$output" ] || fail "the command ran: $output"
	run -77 --separate-stderr env WSLOCK_DIR="$C/reg2" "$WSLOCK" inspect "$P"
	# The same registry for a workspace beside it is fine.
	mkws other
	run -0 --separate-stderr env WSLOCK_DIR="$C/reg2" "$WSLOCK" run -n "$(W other)" -- echo RAN
	[ "$output" = RAN ] || fail "output $output, stderr $stderr"
}

@test "a workspace bind-mounted inside the registry is refused (77)" {
	needs_bind
	mkws ws
	mkdir -p -m 0700 "$BATS_TEST_TMPDIR/reg3"
	mkdir "$BATS_TEST_TMPDIR/reg3/x"
	bind "$(canon "$(W ws)")" "$BATS_TEST_TMPDIR/reg3/x"
	run -77 --separate-stderr env WSLOCK_DIR="$BATS_TEST_TMPDIR/reg3" "$WSLOCK" run -n "$(W ws)" -- echo RAN
	[ -z "$output" ] || fail "the command ran: $output"
	[[ "$stderr" == *"inside the registry"* || "$stderr" == *"overlap"* ]] || fail "stderr: $stderr"
}
