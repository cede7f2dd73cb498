#!/usr/bin/env bats
# A corrupt lock whose holder is alive (issue 12.4, DESIGN.md sections 3-4):
# liveness comes from the live kernel lock first, even when owner.json is
# not a valid document; nothing clears such a lock. Plus the lock
# directories that cannot be read as documents at all.

load helpers

@test "issue 12.4: inspect shows a corrupt lock of a live run as live" {
	mkws a
	hold "$(W a)"
	printf '{"not":"an owner"}' | put_owner "$(W a)"
	inspect_json "$(W a)"
	jq_ok '.state == "corrupt" and .liveness == "live" and (.liveness_reason | length > 0)' "$INSPECT"
	run -0 --separate-stderr wsl inspect --all
	jq_ok '.locks[0].state == "corrupt" and .locks[0].liveness == "live"'
}

@test "issue 12.4: recover --force never clears a corrupt lock whose holder is live" {
	mkws a
	hold "$(W a)"
	printf '{"not":"an owner"}' | put_owner "$(W a)"
	cp "$(lock_dir_of "$(W a)")/owner.json" "$BATS_TEST_TMPDIR/exact"
	before=$(registry_snapshot)
	run -75 --separate-stderr wsl recover --force --reason "looks stale" \
		--expected-owner "$BATS_TEST_TMPDIR/exact" "$(W a)"
	assert_json_error WSLOCK_OWNER_LIVE
	assert_same_snapshot "$before" "$(registry_snapshot)"
	run -0 --separate-stderr wsl reclaim --yes --force --reason "looks stale"
	jq_ok '.reclaimed == []'
	[ -e "$(lock_dir_of "$(W a)")/owner.json" ] || fail "reclaim removed a live corrupt lock"
	# Once the command ends the same exact recover clears it.
	unhold
	run -0 --separate-stderr wsl recover --force --reason "checked" \
		--expected-owner "$BATS_TEST_TMPDIR/exact" "$(W a)"
	jq_ok '.action == "cleared-corrupt"'
}

@test "a lock directory without owner.json names the directory to remove" {
	mkws a
	acquire_as $$ "$(W a)"
	d=$(lock_dir_of "$(W a)")
	rm "$d/owner.json"
	run -65 --separate-stderr wsl run -n "$(W a)" -- echo SHOULD-NOT-RUN
	assert_run_error WSLOCK_LOCK_CORRUPT
	[[ $stderr == *"$d"* ]] || fail "the lock directory is not named: $stderr"
	[[ $stderr != *"$d/owner.json"* ]] || fail "names owner.json, which does not exist: $stderr"
	printf 'x' >"$BATS_TEST_TMPDIR/x"
	run -65 --separate-stderr wsl recover --force --reason r --expected-owner "$BATS_TEST_TMPDIR/x" "$(W a)"
	[[ $stderr == *"$d"* && $stderr != *"$d/owner.json"* ]] || fail "recover names the wrong path: $stderr"
	run -0 --separate-stderr wsl reclaim
	jq_ok ".candidates[0].why | contains(\"$d\") and (contains(\"$d/owner.json\") | not)"
}

@test "an owner file over 64 KiB can be cleared by recover with its exact bytes" {
	mkws a
	acquire_as $$ "$(W a)"
	head -c 70000 /dev/zero | tr '\0' ' ' >"$BATS_TEST_TMPDIR/big"
	printf '{}' >>"$BATS_TEST_TMPDIR/big"
	put_owner "$(W a)" <"$BATS_TEST_TMPDIR/big"
	inspect_json "$(W a)"
	jq_ok '.state == "corrupt"' "$INSPECT"
	run -0 --separate-stderr wsl recover --force --reason "oversized" \
		--expected-owner "$BATS_TEST_TMPDIR/big" "$(W a)"
	jq_ok '.action == "cleared-corrupt"'
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}
