#!/usr/bin/env bats
# The registry on disk (DESIGN §5) and hostile set-ups of it: each is
# refused with its exit code and nothing on disk changes. Malformed owner
# documents (DESIGN §3) have their one home in malformed.bats.

load helpers

# make_registry: create the registry through normal use, leaving no lock.
make_registry() {
	mkws zz-init
	run -0 --separate-stderr wsl run "$(W zz-init)" -- true
	[ -d "$WSLOCK_DIR" ] || fail "registry not created"
}

snapshot_all() {
	registry_snapshot --strict
	if [ -n "${EXTRA_SNAPSHOT_DIR:-}" ]; then registry_snapshot --strict "$EXTRA_SNAPSHOT_DIR"; fi
}

# assert_refused STATUS CODE WS: acquire -n, acquire -w 5 and run -n on WS all
# fail with STATUS / CODE and change nothing (strict snapshot of the
# registry and of $EXTRA_SNAPSHOT_DIR when set).
assert_refused() {
	local st=$1 code=$2 ws=$3 before after
	before=$(snapshot_all)
	run -"$st" --separate-stderr wsl acquire -n --pid $$ "$ws"
	assert_json_error "$code"
	run -"$st" --separate-stderr wsl acquire -w 5 --pid $$ "$ws"
	assert_json_error "$code"
	run -"$st" --separate-stderr wsl run -n "$ws" -- echo SHOULD-NOT-RUN
	assert_run_error "$code"
	after=$(snapshot_all)
	assert_same_snapshot "$before" "$after"
}

@test "the registry is created 0700 with .coordination and locks/, and nothing is left after use" {
	mkws w/a/b w/c
	[ ! -e "$WSLOCK_DIR" ]
	run -0 --separate-stderr wsl run "$(W w/a/b)" -- true
	[ "$(stat -c '%a %u' "$WSLOCK_DIR")" = "700 $(id -u)" ] || fail "registry: $(stat -c '%a %u' "$WSLOCK_DIR")"
	[ -f "$WSLOCK_DIR/.coordination" ] || fail "no .coordination: $(ls -A "$WSLOCK_DIR")"
	[ -d "$WSLOCK_DIR/locks" ] && [ ! -L "$WSLOCK_DIR/locks" ]
	for i in 1 2 3; do
		acquire_as $$ "$(W w/a)"
		run -0 --separate-stderr wsl run "$(W w/c)" -- true
		run -0 --separate-stderr wsl release --token "$(json_get .token "$OWNER")" "$(W w/a)"
		run -0 --separate-stderr wsl run "$(W w/a/b)" -- true
	done
	left=$(find "$WSLOCK_DIR/locks" "$WSLOCK_DIR/staging" -mindepth 1 2>/dev/null || true)
	# nest/ and ids/ keep their emptied directories (reclaim collects
	# them) and .marker: no marker is left.
	for d in nest ids; do
		left+=$(find "$WSLOCK_DIR/$d" -mindepth 1 ! -type d ! -path "$WSLOCK_DIR/$d/.marker" 2>/dev/null || true)
	done
	[ -z "$left" ] || fail "left behind: $left"
	# Nothing in the registry is group/world accessible.
	bad=$(find "$WSLOCK_DIR" -perm /077)
	[ -z "$bad" ] || fail "group/world bits on: $bad"
}

@test "nest/ keeps each ancestor's marker directory between runs; reclaim --yes collects the empty ones" {
	mkws w/a/b w/c
	run -0 --separate-stderr wsl run "$(W w/a/b)" -- true
	dirs=$(cd "$WSLOCK_DIR/nest" && find . -mindepth 1 -type d -printf '%P %i\n' | sort)
	[ -n "$dirs" ] || fail "no marker directory kept in nest/"
	run -0 --separate-stderr wsl run "$(W w/a/b)" -- true
	# The same directories (same inodes): none made or removed per run.
	[ "$(cd "$WSLOCK_DIR/nest" && find . -mindepth 1 -type d -printf '%P %i\n' | sort)" = "$dirs" ] ||
		fail "nest/ directories changed between runs"
	# Held below w/a: the directories holding its markers stay.
	acquire_as $$ "$(W w/a/b)"
	run -0 --separate-stderr wsl reclaim --yes
	marked=$(cd "$WSLOCK_DIR/nest" && find . -mindepth 2 -type f | wc -l)
	[ "$marked" -gt 0 ] || fail "reclaim removed a held lock's markers"
	run -0 --separate-stderr wsl release --token "$(json_get .token "$OWNER")" "$(W w/a/b)"
	run -0 --separate-stderr wsl reclaim --yes
	left=$(find "$WSLOCK_DIR/nest" "$WSLOCK_DIR/ids" -mindepth 1 -type d)
	[ -z "$left" ] || fail "empty marker directories not collected: $left"
	# And the registry still works afterwards.
	run -0 --separate-stderr wsl run "$(W w/a/b)" -- true
}

@test "with umask 000 the registry is still 0700 and owner.json 0600" {
	mkws a b
	umask 000
	run -0 --separate-stderr wsl acquire --pid $$ "$(W a)"
	hold "$(W b)"
	umask 022
	[ "$(stat -c %a "$WSLOCK_DIR")" = 700 ] || fail "registry mode $(stat -c %a "$WSLOCK_DIR")"
	[ "$(stat -c %a "$(lock_dir_of "$(W a)")/owner.json")" = 600 ]
	bad=$(find "$WSLOCK_DIR" -perm /077)
	[ -z "$bad" ] || fail "group/world bits on: $(find "$WSLOCK_DIR" -perm /077 -printf '%p %m\n')"
}

@test "a held lock in a nested workspace leaves no files group/world accessible" {
	mkws w/sub
	hold "$(W w/sub)"
	mkws w2
	acquire_as $$ "$(W w2)"
	bad=$(find "$WSLOCK_DIR" -perm /077)
	[ -z "$bad" ] || fail "group/world bits on: $bad"
	[ -f "$(lock_dir_of "$(W w/sub)")/owner.json" ]
	[ -e "$(lock_dir_of "$(W w/sub)")/live" ] || fail "run holder has no live file"
}

@test "-d selects the registry before or after the subcommand, over WSLOCK_DIR" {
	mkws a b
	r1=$BATS_TEST_TMPDIR/r1
	r2=$BATS_TEST_TMPDIR/r2
	run -0 --separate-stderr wsl -d "$r1" acquire --pid $$ "$(W a)"
	[ -f "$r1/locks/$(lock_key_of "$(W a)")/owner.json" ] || fail "not in $r1: $(find "$r1" 2>&1)"
	run -0 --separate-stderr wsl acquire --lock-dir "$r2" --pid $$ "$(W b)"
	[ -f "$r2/locks/$(lock_key_of "$(W b)")/owner.json" ] || fail "not in $r2: $(find "$r2" 2>&1)"
	[ ! -e "$WSLOCK_DIR" ] || fail "WSLOCK_DIR used despite -d"
	# Different registries do not see each other's locks.
	run -0 --separate-stderr wsl inspect "$(W a)"
	jq_ok '.state == "free"'
	run -0 --separate-stderr wsl -d "$r1" inspect "$(W a)"
	jq_ok '.state == "held"'
}

@test "default registry: \$XDG_STATE_HOME/wslock, else \$HOME/.local/state/wslock" {
	mkws a b
	unset WSLOCK_DIR
	XDG_STATE_HOME=$BATS_TEST_TMPDIR/xdg run -0 --separate-stderr wsl acquire --pid $$ "$(W a)"
	[ -d "$BATS_TEST_TMPDIR/xdg/wslock/locks" ] || fail "no registry under XDG_STATE_HOME"
	# A HOME that exists (tests/location.bats: a missing one is refused).
	mkdir "$BATS_TEST_TMPDIR/home"
	HOME=$BATS_TEST_TMPDIR/home run -0 --separate-stderr wsl acquire --pid $$ "$(W b)"
	[ -d "$BATS_TEST_TMPDIR/home/.local/state/wslock/locks" ] || fail "no registry under HOME"
}

@test "registry is a symlink: 77 WSLOCK_UNSAFE_PATH, nothing changed" {
	mkws a
	mkdir -m 0700 "$BATS_TEST_TMPDIR/real-reg"
	ln -s "$BATS_TEST_TMPDIR/real-reg" "$WSLOCK_DIR"
	EXTRA_SNAPSHOT_DIR=$BATS_TEST_TMPDIR/real-reg
	assert_refused 77 WSLOCK_UNSAFE_PATH "$(W a)"
	[ -z "$(ls -A "$BATS_TEST_TMPDIR/real-reg")" ] || fail "wrote through the symlink"
}

@test "registry is a symlink to a populated registry: refused too" {
	mkws a
	export WSLOCK_DIR=$BATS_TEST_TMPDIR/real-reg
	make_registry
	ln -s "$BATS_TEST_TMPDIR/real-reg" "$BATS_TEST_TMPDIR/reg"
	export WSLOCK_DIR=$BATS_TEST_TMPDIR/reg
	EXTRA_SNAPSHOT_DIR=$BATS_TEST_TMPDIR/real-reg
	assert_refused 77 WSLOCK_UNSAFE_PATH "$(W a)"
}

@test "registry mode 0777: 77 WSLOCK_UNSAFE_PATH, nothing changed (no repair)" {
	mkws a
	make_registry
	chmod 0777 "$WSLOCK_DIR"
	assert_refused 77 WSLOCK_UNSAFE_PATH "$(W a)"
	[ "$(stat -c %a "$WSLOCK_DIR")" = 777 ]
	# inspect refuses the unsafe registry too, and repairs nothing.
	before=$(registry_snapshot --strict)
	run -77 --separate-stderr wsl inspect "$(W a)"
	assert_json_error WSLOCK_UNSAFE_PATH
	run -77 --separate-stderr wsl release --token 0123456789abcdef0123456789abcdef "$(W a)"
	assert_json_error WSLOCK_UNSAFE_PATH
	assert_same_snapshot "$before" "$(registry_snapshot --strict)"
}

@test "registry mode 0750 (group bits): 77 WSLOCK_UNSAFE_PATH" {
	mkws a
	make_registry
	chmod 0750 "$WSLOCK_DIR"
	assert_refused 77 WSLOCK_UNSAFE_PATH "$(W a)"
}

@test "a pre-existing empty registry with mode 0777 is refused, not repaired" {
	mkws a
	mkdir -m 0777 "$WSLOCK_DIR"
	chmod 0777 "$WSLOCK_DIR"
	assert_refused 77 WSLOCK_UNSAFE_PATH "$(W a)"
}

@test "registry owned by another user: 77 WSLOCK_UNSAFE_PATH, nothing changed" {
	[ "$(id -u)" = 0 ] || skip "needs root to chown"
	mkws a
	make_registry
	chown nobody "$WSLOCK_DIR"
	assert_refused 77 WSLOCK_UNSAFE_PATH "$(W a)"
}

@test "locks/ owned by another user or a symlink or 0777: refused with 77" {
	[ "$(id -u)" = 0 ] || skip "needs root to chown"
	mkws a
	make_registry
	chown nobody "$WSLOCK_DIR/locks"
	assert_refused 77 WSLOCK_UNSAFE_PATH "$(W a)"
	chown 0 "$WSLOCK_DIR/locks"
	chmod 0777 "$WSLOCK_DIR/locks"
	assert_refused 77 WSLOCK_UNSAFE_PATH "$(W a)"
	rmdir "$WSLOCK_DIR/locks"
	mkdir -m 0700 "$BATS_TEST_TMPDIR/elsewhere"
	ln -s "$BATS_TEST_TMPDIR/elsewhere" "$WSLOCK_DIR/locks"
	EXTRA_SNAPSHOT_DIR=$BATS_TEST_TMPDIR/elsewhere
	assert_refused 77 WSLOCK_UNSAFE_PATH "$(W a)"
}

@test "staging/, ids/, nest/ or the tmp stamp a symlink: refused with 77, target untouched" {
	mkws a
	make_registry
	mkdir -m 0700 "$BATS_TEST_TMPDIR/elsewhere"
	EXTRA_SNAPSHOT_DIR=$BATS_TEST_TMPDIR/elsewhere
	for sub in staging ids nest tmp; do
		[ -e "$WSLOCK_DIR/$sub" ] || fail "registry has no $sub"
		mv "$WSLOCK_DIR/$sub" "$BATS_TEST_TMPDIR/saved-$sub"
		ln -s "$BATS_TEST_TMPDIR/elsewhere" "$WSLOCK_DIR/$sub"
		assert_refused 77 WSLOCK_UNSAFE_PATH "$(W a)"
		rm "$WSLOCK_DIR/$sub"
		mv "$BATS_TEST_TMPDIR/saved-$sub" "$WSLOCK_DIR/$sub"
	done
	[ -z "$(ls -A "$BATS_TEST_TMPDIR/elsewhere")" ] || fail "wrote through a symlink"
}

@test "a lock directory locks/KEY that is a symlink is refused (65 or 77)" {
	mkws a b
	acquire_as $$ "$(W b)"
	# b's real lock directory, linked as a's.
	ln -s "$(lock_dir_of "$(W b)")" "$(lock_dir_of "$(W a)")"
	before=$(registry_snapshot)
	run --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	[[ $status == 65 || $status == 77 ]] || fail "acquire: status $status, output $output"
	run --separate-stderr wsl release --token "$(json_get .token "$OWNER")" "$(W a)"
	[ "$status" -ne 0 ] || fail "released b's lock through a's symlinked lock dir"
	assert_same_snapshot "$before" "$(registry_snapshot)"
}

@test ".coordination is a symlink: 77 WSLOCK_UNSAFE_PATH, target untouched" {
	mkws a
	make_registry
	echo precious >"$BATS_TEST_TMPDIR/target"
	rm "$WSLOCK_DIR/.coordination"
	ln -s "$BATS_TEST_TMPDIR/target" "$WSLOCK_DIR/.coordination"
	assert_refused 77 WSLOCK_UNSAFE_PATH "$(W a)"
	[ "$(cat "$BATS_TEST_TMPDIR/target")" = precious ]
}

@test "owner.json is a symlink: refused (65 or 77), link and target untouched" {
	mkws a
	acquire_as $$ "$(W a)"
	f=$(lock_dir_of "$(W a)")/owner.json
	cp "$f" "$BATS_TEST_TMPDIR/target.json"
	chmod 0600 "$BATS_TEST_TMPDIR/target.json"
	rm "$f"
	ln -s "$BATS_TEST_TMPDIR/target.json" "$f"
	before=$(registry_snapshot; registry_snapshot "$BATS_TEST_TMPDIR/target.json")
	run --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	case $status in
	65) assert_json_error WSLOCK_LOCK_CORRUPT ;;
	77) assert_json_error WSLOCK_UNSAFE_PATH ;;
	*) fail "acquire: status $status, output $output" ;;
	esac
	run --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
	[[ $status == 65 || $status == 77 ]] || fail "run: status $status"
	[ -z "$output" ]
	run --separate-stderr wsl release --token "$(json_get .token "$OWNER")" "$(W a)"
	[[ $status == 65 || $status == 77 ]] || fail "release: status $status, output $output"
	run --separate-stderr wsl inspect "$(W a)"
	if [ "$status" = 0 ]; then
		jq_ok '.state == "corrupt" and .owner == null'
	else
		[ "$status" = 77 ] || fail "inspect: status $status"
	fi
	assert_same_snapshot "$before" "$(registry_snapshot; registry_snapshot "$BATS_TEST_TMPDIR/target.json")"
	[ -L "$f" ] || fail "the symlink was replaced"
}

@test "owner.json with group/world permission bits or a foreign owner: 77 WSLOCK_UNSAFE_PATH for every command, nothing changed" {
	mkws a
	acquire_as $$ "$(W a)"
	local f
	f=$(lock_dir_of "$(W a)")/owner.json
	wsl inspect --owner "$(W a)" >"$BATS_TEST_TMPDIR/owner.json"
	for bad in "chmod 0644 $f" "chmod 0600 $f; chown 65534 $f"; do
		eval "$bad"
		before=$(registry_snapshot)
		run -77 --separate-stderr wsl acquire -n --pid $$ "$(W a)"
		assert_json_error WSLOCK_UNSAFE_PATH
		run -77 --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
		[ -z "$output" ]
		run -77 --separate-stderr wsl release --token "$(json_get .token "$OWNER")" "$(W a)"
		assert_json_error WSLOCK_UNSAFE_PATH
		run -77 --separate-stderr wsl recover --force --reason test \
			--expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
		assert_json_error WSLOCK_UNSAFE_PATH
		# inspect shows it, as a corrupt lock, and says why.
		run -0 --separate-stderr wsl inspect "$(W a)"
		jq_ok '.state == "corrupt" and (.problem | length > 0)'
		assert_same_snapshot "$before" "$(registry_snapshot)"
	done
}

# Malformed owner documents (every class, as a lock file and as the
# expected owner of recover) live in malformed.bats.

@test "a lock directory without owner.json is corrupt" {
	mkws a
	acquire_as $$ "$(W a)"
	rm "$(lock_dir_of "$(W a)")/owner.json"
	run -0 --separate-stderr wsl inspect "$(W a)"
	jq_ok '.state == "corrupt" and .owner == null and (.problem | length > 0)'
	before=$(registry_snapshot)
	run -65 --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	assert_json_error WSLOCK_LOCK_CORRUPT
	assert_same_snapshot "$before" "$(registry_snapshot)"
}

@test "a corrupt ancestor lock refuses a descendant acquire with 65" {
	mkws w/sub
	acquire_as $$ "$(W w)"
	printf 'garbage' | put_owner "$(W w)"
	before=$(registry_snapshot)
	run -65 --separate-stderr wsl acquire -n --pid $$ "$(W w/sub)"
	assert_json_error WSLOCK_LOCK_CORRUPT
	assert_same_snapshot "$before" "$(registry_snapshot)"
}

@test "lock dir inside the workspace: 77 WSLOCK_UNSAFE_PATH" {
	mkws a b
	export WSLOCK_DIR=$(W a)/.wslock
	make_registry
	assert_refused 77 WSLOCK_UNSAFE_PATH "$(W a)"
	# An ancestor of the workspace containing the registry too.
	assert_refused 77 WSLOCK_UNSAFE_PATH "$BATS_TEST_TMPDIR/ws"
	# Unrelated workspaces still work with that registry.
	run -0 --separate-stderr wsl run -n "$(W b)" -- echo ok
}

@test "workspace inside the lock dir: 77 WSLOCK_UNSAFE_PATH" {
	make_registry
	assert_refused 77 WSLOCK_UNSAFE_PATH "$WSLOCK_DIR"
	assert_refused 77 WSLOCK_UNSAFE_PATH "$WSLOCK_DIR/locks"
}

@test "/ as workspace: 77 WSLOCK_UNSAFE_PATH" {
	make_registry
	assert_refused 77 WSLOCK_UNSAFE_PATH /
}

@test "nonexistent workspace: 66 WSLOCK_NO_WORKSPACE, nothing changed" {
	make_registry
	assert_refused 66 WSLOCK_NO_WORKSPACE "$(W does-not-exist)"
}

@test "a stale staging file in staging/ does not block acquire" {
	mkws a
	make_registry
	mkdir -p -m 0700 "$WSLOCK_DIR/staging"
	printf 'half' >"$WSLOCK_DIR/staging/crashed.json"
	chmod 0600 "$WSLOCK_DIR/staging/crashed.json"
	run -0 --separate-stderr wsl acquire -n --pid $$ "$(W a)"
}

@test "many wslock processes creating one registry at the same moment: every one opens it, none sees a half-written stamp" {
	local round i pids rc fails=0
	for i in 1 2 3 4 5 6 7 8; do mkws "w$i"; done
	for round in $(seq 1 25); do
		local reg=$BATS_TEST_TMPDIR/reg.$round
		pids=()
		for i in 1 2 3 4 5 6 7 8; do
			if [ "$i" = 8 ]; then
				# reclaim sweeps staging/ (where a stamp is written)
				"$WSLOCK" -d "$reg" reclaim --yes >/dev/null \
					2>>"$BATS_TEST_TMPDIR/err" &
			else
				"$WSLOCK" -d "$reg" run -n "$(W "w$i")" -- true \
					2>>"$BATS_TEST_TMPDIR/err" &
			fi
			pids+=($!)
		done
		for i in "${pids[@]}"; do
			rc=0
			wait "$i" || rc=$?
			[ "$rc" = 0 ] || fails=$((fails + 1))
		done
		[ "$(cat "$reg/tmp")" = "wslock registry format 3" ] ||
			fail "round $round: the stamp is '$(cat "$reg/tmp")'"
	done
	[ "$fails" = 0 ] || fail "$fails of 200 first opens failed: $(sort -u "$BATS_TEST_TMPDIR/err" | head -3)"
}
