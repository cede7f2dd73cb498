#!/usr/bin/env bats
# Where the registry is when -d does not say (DESIGN §5): $WSLOCK_DIR, then
# $STATE_DIRECTORY/wslock (a systemd service's StateDirectory=, created
# 0700 inside it), then ${XDG_STATE_HOME:-$HOME/.local/state}/wslock; with
# none of them (a system service without HOME or StateDirectory=), a clear
# usage error.

load helpers

# registry_of WS: the registry directory that holds WS's lock (from
# inspect's lock_path, .../locks/KEY/owner.json).
registry_of() {
	wsl inspect "$1" | jq -r .lock_path | sed 's|/locks/[^/]*/owner.json$||'
}

# in_env VAR=VALUE... -- ARGS: wslock with only PATH and the given variables.
in_env() {
	local vars=()
	while [ "$1" != -- ]; do vars+=("$1"); shift; done
	shift
	timeout -k 5 30 env -i PATH="$PATH" "${vars[@]}" "$WSLOCK" "$@"
}

@test "location: STATE_DIRECTORY/wslock without HOME, created 0700 inside systemd's 0755 directory" {
	mkws a
	local sd=$BATS_TEST_TMPDIR/var/lib/svc
	mkdir -p "$sd"
	chmod 0755 "$sd"
	run -0 --separate-stderr in_env STATE_DIRECTORY="$sd" -- acquire --pid $$ "$(W a)"
	[ -d "$sd/wslock/locks" ] || fail "no registry in $sd/wslock: $stderr"
	[ "$(stat -c %a "$sd/wslock")" = 700 ]
	[ "$(stat -c %a "$sd")" = 755 ] || fail "systemd's directory was changed"
	run -0 --separate-stderr in_env STATE_DIRECTORY="$sd" -- inspect "$(W a)"
	jq_ok '.state == "held"'
	[[ $(jq -r .lock_path <<<"$output") == "$sd/wslock/locks/"* ]]
}

@test "location: STATE_DIRECTORY with several directories uses the first" {
	mkws a
	local one=$BATS_TEST_TMPDIR/one two=$BATS_TEST_TMPDIR/two
	mkdir -p "$one" "$two"
	run -0 --separate-stderr in_env STATE_DIRECTORY="$one:$two" -- acquire --pid $$ "$(W a)"
	[ -d "$one/wslock/locks" ] && [ ! -e "$two/wslock" ] && [ ! -e "$one:$two" ] ||
		fail "not in the first of the list: $(ls "$BATS_TEST_TMPDIR")"
}

@test "location: WSLOCK_DIR wins over STATE_DIRECTORY, STATE_DIRECTORY over XDG_STATE_HOME and HOME" {
	mkws a b c
	local sd=$BATS_TEST_TMPDIR/sd x=$BATS_TEST_TMPDIR/xdg h=$BATS_TEST_TMPDIR/home
	mkdir -p "$sd" "$x" "$h"
	run -0 --separate-stderr in_env WSLOCK_DIR="$BATS_TEST_TMPDIR/explicit" STATE_DIRECTORY="$sd" \
		XDG_STATE_HOME="$x" HOME="$h" -- acquire --pid $$ "$(W a)"
	[ -d "$BATS_TEST_TMPDIR/explicit/locks" ] && [ ! -e "$sd/wslock" ]
	run -0 --separate-stderr in_env STATE_DIRECTORY="$sd" XDG_STATE_HOME="$x" HOME="$h" -- \
		acquire --pid $$ "$(W b)"
	[ -d "$sd/wslock/locks" ] && [ ! -e "$x/wslock" ] && [ ! -e "$h/.local" ]
	# -d wins over all of them.
	run -0 --separate-stderr in_env STATE_DIRECTORY="$sd" -- -d "$BATS_TEST_TMPDIR/dash-d" \
		acquire --pid $$ "$(W c)"
	[ -d "$BATS_TEST_TMPDIR/dash-d/locks" ]
	# A relative STATE_DIRECTORY is ignored, as a relative XDG_STATE_HOME is.
	run -0 --separate-stderr in_env STATE_DIRECTORY=rel XDG_STATE_HOME=rel2 HOME="$h" -- \
		inspect --all
	[ ! -e rel ] && [ ! -e rel2 ]
}

@test "location: no WSLOCK_DIR, STATE_DIRECTORY, XDG_STATE_HOME or HOME: usage error naming them, nothing created" {
	mkws a
	run -64 --separate-stderr in_env -- acquire --pid $$ "$(W a)"
	[[ $stderr == *STATE_DIRECTORY* && $stderr == *HOME* && $stderr == *WSLOCK_DIR* ]] ||
		fail "unclear: $stderr"
	jq_ok '.error.code == "WSLOCK_USAGE"'
	# Only when none applies: STATE_DIRECTORY alone is enough.
	mkdir -p "$BATS_TEST_TMPDIR/sd"
	run -0 --separate-stderr in_env STATE_DIRECTORY="$BATS_TEST_TMPDIR/sd" -- inspect "$(W a)"
}

@test "location: a relative -d is made absolute against the working directory, and every message shows the absolute path" {
	mkws a
	mkdir -p "$BATS_TEST_TMPDIR/cwd"
	cd "$BATS_TEST_TMPDIR/cwd"
	local abs=$BATS_TEST_TMPDIR/cwd/rel/reg
	mkdir rel
	run -0 --separate-stderr wsl -d rel/reg inspect --registry
	jq_ok ".registry == \"$abs\""
	run -0 --separate-stderr wsl -d rel/reg acquire --pid $$ "$(W a)"
	[ -d "$abs/locks" ] || fail "not made at $abs"
	chmod 0755 "$abs"
	run -77 --separate-stderr wsl -d rel/reg run "$(W a)" -- true
	[[ $stderr == "wslock: $abs has mode 0755"* ]] || fail "not the absolute path: $stderr"
	chmod 0700 "$abs"
	# The command to copy after "recovery required" names the registry
	# by its absolute path, so it works from another directory.
	mkws b
	WSLOCK_DIR=$abs dead_acquired "$(W b)"
	unset WSLOCK_DIR
	run -69 --separate-stderr wsl -d rel/reg run "$(W b)" -- true
	[[ $stderr == *"; next: wslock -d $abs inspect --owner "* ]] || fail "next: $stderr"
	run -0 --separate-stderr wsl -d rel/reg inspect --format text "$(W b)"
	[[ $output == *"wslock -d $abs inspect --owner "* ]] || fail "text view: $output"
}

@test "location: without HOME (env -u HOME) and no other setting, one clear line and 64 for run and inspect" {
	mkws a
	run -64 --separate-stderr env -u HOME -u WSLOCK_DIR -u STATE_DIRECTORY -u XDG_STATE_HOME \
		timeout -k 5 30 "$WSLOCK" run "$(W a)" -- echo SHOULD-NOT-RUN
	[ -z "$output" ] || fail "run printed on stdout: $output"
	[ "${#stderr_lines[@]}" -eq 1 ] || fail "not one line: $stderr"
	[[ $stderr == "wslock: no registry directory: "*WSLOCK_DIR*STATE_DIRECTORY*XDG_STATE_HOME*HOME*"[WSLOCK_USAGE]" ]] ||
		fail "unclear: $stderr"
	run -64 --separate-stderr env -u HOME -u WSLOCK_DIR -u STATE_DIRECTORY -u XDG_STATE_HOME \
		timeout -k 5 30 "$WSLOCK" inspect "$(W a)"
	[ "${#stderr_lines[@]}" -eq 1 ] || fail "not one line: $stderr"
	jq_ok '.error.code == "WSLOCK_USAGE"'
}

@test "location: a registry named by WSLOCK_DIR or -d is made only where its parent exists (a volume not mounted, a typo): 64, nothing made" {
	mkws a
	local vol=$BATS_TEST_TMPDIR/var-lib-wslock
	# The volume is not there: no registry is made, with or without its parents.
	run -64 --separate-stderr in_env WSLOCK_DIR="$vol/registry" -- run "$(W a)" -- echo SHOULD-NOT-RUN
	[ -z "$output" ] || fail "the command ran: $output"
	[ "${#stderr_lines[@]}" -eq 1 ] || fail "not one line: $stderr"
	[[ $stderr == "wslock: registry $vol/registry does not exist and its parent $vol is missing"*"[WSLOCK_USAGE]" ]] ||
		fail "unclear: $stderr"
	[ ! -e "$vol" ] || fail "made $vol"
	run -64 --separate-stderr in_env -- -d "$vol/registry" acquire --pid $$ "$(W a)"
	jq_ok '.error.code == "WSLOCK_USAGE"'
	[ ! -e "$vol" ] || fail "made $vol"
	# A file where the parent should be is no directory either.
	: >"$BATS_TEST_TMPDIR/afile"
	run --separate-stderr in_env WSLOCK_DIR="$BATS_TEST_TMPDIR/afile/registry" -- acquire --pid $$ "$(W a)"
	[ "$status" -ne 0 ] || fail "acquired in a registry below a file"
	# A readers' look changes nothing either: the workspace is free.
	run -0 --separate-stderr in_env WSLOCK_DIR="$vol/registry" -- inspect "$(W a)"
	jq_ok '.state == "free"'
	[ ! -e "$vol" ] || fail "inspect made $vol"
	# Once the volume is there (mounted), the registry inside it is made 0700.
	mkdir "$vol"
	run -0 --separate-stderr in_env WSLOCK_DIR="$vol/registry" -- run "$(W a)" -- echo ran
	[ "$output" = ran ]
	[ "$(stat -c %a "$vol/registry")" = 700 ]
}

@test "location: the default registry is made below a HOME that exists, never a missing HOME (Debian's /nonexistent)" {
	mkws a
	local h=$BATS_TEST_TMPDIR/nonexistent
	run -64 --separate-stderr in_env HOME="$h" -- run "$(W a)" -- echo SHOULD-NOT-RUN
	[ -z "$output" ] || fail "the command ran: $output"
	[[ $stderr == "wslock: the default registry $h/.local/state/wslock cannot be made: $h does not exist"*"[WSLOCK_USAGE]" ]] ||
		fail "unclear: $stderr"
	[ ! -e "$h" ] || fail "made $h"
	run -64 --separate-stderr in_env XDG_STATE_HOME="$BATS_TEST_TMPDIR/no/state" HOME="$BATS_TEST_TMPDIR" -- \
		acquire --pid $$ "$(W a)"
	[ ! -e "$BATS_TEST_TMPDIR/no" ] || fail "made the XDG_STATE_HOME's parent"
	# A HOME that exists gets .local/state/wslock made, as before.
	mkdir "$h"
	run -0 --separate-stderr in_env HOME="$h" -- run "$(W a)" -- echo ran
	[ "$output" = ran ]
	[ "$(stat -c %a "$h/.local/state/wslock")" = 700 ]
}
