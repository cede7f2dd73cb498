#!/usr/bin/env bats
# release: only the holder's exact token frees a lock.

load helpers

other_token() {
	# A well-formed token that differs from $1.
	if [ "$1" = 00000000000000000000000000000000 ]; then
		echo 11111111111111111111111111111111
	else
		echo 00000000000000000000000000000000
	fi
}

@test "release with the right token frees the workspace and prints the released owner" {
	mkws a
	acquire_as $$ "$(W a)"
	tok=$(json_get .token "$OWNER")
	run -0 --separate-stderr wsl release --token "$tok" "$(W a)"
	[ "${#lines[@]}" -eq 1 ] || fail "release output is not one line: $output"
	jq_ok ".action == \"released\" and .workspace_root == \"$(canon "$(W a)")\""
	jq -e --argjson o "$OWNER" '.owner == $o' <<<"$output" >/dev/null || fail "owner differs: $output"
	[ -z "$stderr" ] || fail "unexpected stderr: $stderr"
	inspect_json "$(W a)"
	jq_ok '.state == "free" and .owner == null' "$INSPECT"
	[ ! -e "$(lock_dir_of "$(W a)")" ] || fail "lock dir still exists after release"
}

@test "release with a wrong token fails with 78 WSLOCK_OWNERSHIP_LOST and the lock stays" {
	mkws a
	acquire_as $$ "$(W a)"
	tok=$(json_get .token "$OWNER")
	before=$(registry_snapshot)
	run -78 --separate-stderr wsl release --token "$(other_token "$tok")" "$(W a)"
	assert_json_error WSLOCK_OWNERSHIP_LOST
	assert_same_snapshot "$before" "$(registry_snapshot)"
	inspect_json "$(W a)"
	jq_ok ".state == \"held\" and .owner.token == \"$tok\"" "$INSPECT"
}

@test "release with a malformed token fails and the lock stays" {
	mkws a
	acquire_as $$ "$(W a)"
	tok=$(json_get .token "$OWNER")
	for bad in "${tok:0:31}" "${tok}0" "$(tr a-f A-F <<<"$tok")" xyz ''; do
		run --separate-stderr wsl release --token "$bad" "$(W a)"
		[ "$status" -ne 0 ] || fail "release --token '$bad' succeeded"
		[[ $status == 64 || $status == 78 ]] || fail "release --token '$bad': status $status"
	done
	inspect_json "$(W a)"
	jq_ok ".state == \"held\" and .owner.token == \"$tok\"" "$INSPECT"
}

@test "release of a free workspace fails with 66 WSLOCK_NOT_HELD" {
	mkws a
	run -66 --separate-stderr wsl release --token 0123456789abcdef0123456789abcdef "$(W a)"
	assert_json_error WSLOCK_NOT_HELD
}

@test "release of a free workspace with an existing registry changes nothing" {
	mkws a b
	acquire_as $$ "$(W b)"
	before=$(registry_snapshot --strict)
	run -66 --separate-stderr wsl release --token 0123456789abcdef0123456789abcdef "$(W a)"
	assert_json_error WSLOCK_NOT_HELD
	assert_same_snapshot "$before" "$(registry_snapshot --strict)"
}

@test "release does not free an ancestor or descendant lock with its token" {
	mkws w/sub
	acquire_as $$ "$(W w)"
	tok=$(json_get .token "$OWNER")
	run --separate-stderr wsl release --token "$tok" "$(W w/sub)"
	[ "$status" -ne 0 ] || fail "release of the subdirectory with the ancestor's token succeeded"
	inspect_json "$(W w)"
	jq_ok ".state == \"held\" and .owner.token == \"$tok\"" "$INSPECT"
}

@test "release without --token is a usage error" {
	mkws a
	acquire_as $$ "$(W a)"
	run -64 --separate-stderr wsl release "$(W a)"
	assert_usage_error
	inspect_json "$(W a)"
	jq_ok '.state == "held"' "$INSPECT"
}

@test "release with the token of a lock held by a run frees nothing of a later owner" {
	# A holder whose lock was released and re-acquired by someone else must
	# not free the new owner's lock with its old token.
	mkws a
	acquire_as $$ "$(W a)"
	old=$(json_get .token "$OWNER")
	run -0 --separate-stderr wsl release --token "$old" "$(W a)"
	acquire_as $$ "$(W a)"
	new=$(json_get .token "$OWNER")
	run -78 --separate-stderr wsl release --token "$old" "$(W a)"
	assert_json_error WSLOCK_OWNERSHIP_LOST
	inspect_json "$(W a)"
	jq_ok ".owner.token == \"$new\"" "$INSPECT"
}

@test "release of a lock whose holder is dead works with the right token" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	kill "$SLEEPER_PID"
	wait_exit "$SLEEPER_PID"
	run -0 --separate-stderr wsl release --token "$(json_get .token "$OWNER")" "$(W a)"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "release --pretty prints indented JSON" {
	mkws a
	acquire_as $$ "$(W a)"
	run -0 --separate-stderr wsl release --pretty --token "$(json_get .token "$OWNER")" "$(W a)"
	[ "${#lines[@]}" -gt 1 ] || fail "--pretty output is one line: $output"
	jq_ok '.action == "released"'
}
