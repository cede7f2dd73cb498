#!/usr/bin/env bats
# Malformed owner documents (DESIGN.md section 3), one regression test per
# class, twice:
#  - as a lock's owner.json, written by hand: inspect says corrupt, acquire
#    and run refuse with 65 WSLOCK_LOCK_CORRUPT, release and recover with a
#    valid other document refuse with 65, reclaim skips it, and nothing on
#    disk changes (strict snapshot: contents, modes, mtimes of files and
#    directories);
#  - as the --expected-owner of recover on a lock of a dead owner: 65, with
#    or without a command, the command never runs, nothing changes, and the
#    exact document still recovers afterwards.
# This file is the one home of malformed-document cases (registry.bats keeps
# the registry's own hostile set-ups: symlinks, modes, owners, a missing
# owner.json). The seed corpus of fuzz/ has the same classes for the parser
# alone.

load helpers

PURPOSE=malformed-test

local_setup() {
	mkws ws ws/sub other
	T=$(canon "$(W ws)")
	# A real owner document to derive the malformed ones from.
	start_sleeper
	acquire_as "$SLEEPER_PID" "$T" --purpose "$PURPOSE"
	BASE=$OWNER
	BASE_PID=$SLEEPER_PID
}

# malformed CLASS DOC: writes the malformed variant of the compact document
# DOC to stdout (raw bytes; NUL and invalid UTF-8 are spliced with printf).
malformed() {
	local class=$1 doc=$2 pid head tail
	pid=$(jq .pid <<<"$doc")
	head=${doc%%"$PURPOSE"*}
	tail=${doc#*"$PURPOSE"}
	case $class in
	empty) ;;
	truncated) printf %s "${doc:0:$((${#doc} / 2))}" ;;
	trailing-bytes) printf '%s garbage' "$doc" ;;
	second-object) printf '%s%s' "$doc" "$doc" ;;
	duplicate-keys) printf '%s,"pid":%s}' "${doc%\}}" "$pid" ;;
	extra-key) jq -c '.extra = "x"' <<<"$doc" | tr -d '\n' ;;
	missing-key) jq -c 'del(.host)' <<<"$doc" | tr -d '\n' ;;
	wrong-type-pid) jq -c '.pid |= tostring' <<<"$doc" | tr -d '\n' ;;
	wrong-type-token) jq -c '.token = 12345' <<<"$doc" | tr -d '\n' ;;
	wrong-type-schema) jq -c '.schema_version = "1"' <<<"$doc" | tr -d '\n' ;;
	wrong-type-pid-float) printf %s "${doc/\"pid\":$pid,/\"pid\":$pid.0,}" ;;
	pid-0) jq -c '.pid = 0' <<<"$doc" | tr -d '\n' ;;
	pid-minus-1) jq -c '.pid = -1' <<<"$doc" | tr -d '\n' ;;
	pid-huge) jq -c '.pid = 4194305' <<<"$doc" | tr -d '\n' ;;
	pid-overflow) printf %s "${doc/\"pid\":$pid,/\"pid\":18446744073709551617,}" ;;
	non-canonical-path)
		jq -c '.workspace_root |= (. + "/../" + (split("/") | last))' <<<"$doc" | tr -d '\n' ;;
	trailing-slash-path) jq -c '.workspace_root |= . + "/"' <<<"$doc" | tr -d '\n' ;;
	nul-escaped) jq -c '.purpose = "a\u0000b"' <<<"$doc" | tr -d '\n' ;;
	nul-raw) printf '%sa\0b%s' "$head" "$tail" ;;
	invalid-utf8) printf '%sa\377b%s' "$head" "$tail" ;;
	over-64k)
		printf %s "$doc"
		head -c 65600 /dev/zero | tr '\0' ' '
		;;
	not-an-object) printf '[%s]' "$doc" ;;
	foreign-workspace) jq -c --arg o "$(canon "$(W other)")" '.workspace_root = $o' <<<"$doc" | tr -d '\n' ;;
	garbage) printf 'this is not json at all' ;;
	json-array) printf '[1,2,3]' ;;
	over-64k-leading)
		head -c 70000 /dev/zero | tr '\0' ' '
		printf %s "$doc"
		;;
	purpose-70k) jq -c --arg p "$(head -c 70000 /dev/zero | tr '\0' p)" '.purpose = $p' <<<"$doc" | tr -d '\n' ;;
	purpose-129) jq -c --arg p "$(printf 'p%.0s' $(seq 129))" '.purpose = $p' <<<"$doc" | tr -d '\n' ;;
	pid-huge-decimal) printf %s "${doc/\"pid\":$pid,/\"pid\":99999999999999999999999999,}" ;;
	pid-exponent) printf %s "${doc/\"pid\":$pid,/\"pid\":1e30,}" ;;
	pid-fraction) jq -c '.pid = 1.5' <<<"$doc" | tr -d '\n' ;;
	start-ticks-negative) jq -c '.pid_start_ticks = -5' <<<"$doc" | tr -d '\n' ;;
	missing-token) jq -c 'del(.token)' <<<"$doc" | tr -d '\n' ;;
	missing-recovery-of) jq -c 'del(.recovery_of)' <<<"$doc" | tr -d '\n' ;;
	missing-boot-id) jq -c 'del(.boot_id)' <<<"$doc" | tr -d '\n' ;;
	trailing-letter) printf '%sx' "$doc" ;;
	trailing-empty-object) printf '%s{}' "$doc" ;;
	trailing-nul) printf '%s\0' "$doc" ;;
	duplicate-key-differs) printf '%s,"pid":1}' "${doc%\}}" ;;
	# A version this binary does not know: the one after the one it writes.
	schema-version-next) jq -c '.schema_version += 1' <<<"$doc" | tr -d '\n' ;;
	# Version 1 with the keys only version 2 has.
	schema-version-1-v2-keys) jq -c '.schema_version = 1' <<<"$doc" | tr -d '\n' ;;
	bad-pid-namespace) jq -c '.pid_namespace = "net:[4026531840]"' <<<"$doc" | tr -d '\n' ;;
	bad-workspace-fs) jq -c '.workspace_fs = "uuid:1234"' <<<"$doc" | tr -d '\n' ;;
	kind-other) jq -c '.kind = "flock-owner"' <<<"$doc" | tr -d '\n' ;;
	recovery-of-number) jq -c '.recovery_of = 5' <<<"$doc" | tr -d '\n' ;;
	token-non-hex) jq -c '.token = "zz" + .token[2:]' <<<"$doc" | tr -d '\n' ;;
	token-short) jq -c '.token = .token[1:]' <<<"$doc" | tr -d '\n' ;;
	identity-policy-unknown) jq -c '.identity_policy = "trust-me"' <<<"$doc" | tr -d '\n' ;;
	acquired-at-number) jq -c '.acquired_at = 0' <<<"$doc" | tr -d '\n' ;;
	operation-id-invalid) jq -c '.operation_id = "bad id/with spaces"' <<<"$doc" | tr -d '\n' ;;
	dot-path) jq -c '.workspace_root += "/."' <<<"$doc" | tr -d '\n' ;;
	relative-path) jq -c '.workspace_root = "relative/path"' <<<"$doc" | tr -d '\n' ;;
	*) fail "unknown class $class" ;;
	esac
}

# corrupt_lock_case CLASS
corrupt_lock_case() {
	local class=$1 d other before tok
	tok=$(json_get .token "$BASE")
	d=$(lock_dir_of "$T")
	malformed "$class" "$BASE" >"$BATS_TEST_TMPDIR/bad"
	put_owner "$T" <"$BATS_TEST_TMPDIR/bad"
	cmp -s "$BATS_TEST_TMPDIR/bad" "$d/owner.json" || fail "setup: owner.json not written"
	# A valid document of another holder of the same workspace.
	other=$(jq -c '.token = "0123456789abcdef0123456789abcdef"' <<<"$BASE")
	printf '%s\n' "$other" >"$BATS_TEST_TMPDIR/other.json"
	before=$(registry_snapshot --strict)

	run --separate-stderr wsl inspect "$T"
	[ "$status" -eq 0 ] || fail "inspect: exit $status ($stderr)"
	jq_ok '.state == "corrupt" and .owner == null and .liveness == null and (.problem | type == "string" and length > 0)'
	run --separate-stderr wsl inspect --owner "$T"
	[ "$status" -eq 0 ] && [ "$output" = null ] || fail "inspect --owner: $status '$output'"
	run --separate-stderr wsl inspect --all
	[ "$status" -eq 0 ] || fail "inspect --all: exit $status"
	jq_ok '[.locks[] | select(.state == "corrupt")] | length == 1'

	run --separate-stderr wsl acquire -n --pid $$ "$T"
	[ "$status" -eq 65 ] || fail "acquire: exit $status, want 65 ($stderr)"
	assert_json_error WSLOCK_LOCK_CORRUPT
	run --separate-stderr wsl acquire -n --reclaim-dead --pid $$ "$T"
	[ "$status" -eq 65 ] || fail "acquire --reclaim-dead: exit $status, want 65 ($stderr)"
	assert_json_error WSLOCK_LOCK_CORRUPT
	run --separate-stderr wsl acquire -w 0.2 --pid $$ "$(W ws/sub)"
	[ "$status" -eq 65 ] || fail "acquire of a descendant: exit $status, want 65 ($stderr)"
	assert_json_error WSLOCK_LOCK_CORRUPT
	run --separate-stderr wsl run -n "$T" -- touch "$BATS_TEST_TMPDIR/ran"
	[ "$status" -eq 65 ] || fail "run: exit $status, want 65 ($stderr)"
	assert_run_error WSLOCK_LOCK_CORRUPT
	[ ! -e "$BATS_TEST_TMPDIR/ran" ] || fail "run started its command"
	run --separate-stderr wsl release --token "$tok" "$T"
	[ "$status" -eq 65 ] || fail "release: exit $status, want 65 ($stderr)"
	assert_json_error WSLOCK_LOCK_CORRUPT
	run --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/other.json" "$T"
	[ "$status" -eq 65 ] || fail "recover with another valid document: exit $status ($stderr)"
	assert_json_error WSLOCK_LOCK_CORRUPT
	run --separate-stderr wsl recover --force --reason "test" --expected-owner "$BATS_TEST_TMPDIR/other.json" "$T"
	[ "$status" -eq 65 ] || fail "recover --force with other bytes: exit $status ($stderr)"
	assert_json_error WSLOCK_LOCK_CORRUPT
	run --separate-stderr wsl reclaim --yes
	[ "$status" -eq 0 ] || fail "reclaim --yes: exit $status ($stderr)"
	jq_ok '(.reclaimed | length == 0) and (.skipped | length == 1)'
	if [ "$class" = foreign-workspace ]; then
		# ... and it does not lock the workspace it names.
		run --separate-stderr wsl inspect "$(W other)"
		[ "$status" -eq 0 ] || fail "inspect of the named workspace: exit $status ($stderr)"
		jq_ok '.state == "free"'
	fi

	assert_same_snapshot "$before" "$(registry_snapshot --strict)"
}

# expected_owner_case CLASS: the lock is a dead owner's; recover is given the
# malformed variant of its exact document.
expected_owner_case() {
	local class=$1 before
	kill -KILL "$BASE_PID"
	wait_exit "$BASE_PID" 10
	wsl inspect "$T" | jq -e '.liveness == "dead"' >/dev/null || fail "setup: owner not dead"
	malformed "$class" "$BASE" >"$BATS_TEST_TMPDIR/expected"
	printf '%s\n' "$BASE" >"$BATS_TEST_TMPDIR/exact"
	before=$(registry_snapshot --strict)

	run --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/expected" "$T"
	[ "$status" -eq 65 ] || fail "recover: exit $status, want 65 ($output $stderr)"
	jq_ok '.error.code | IN("WSLOCK_INVALID_OWNER", "WSLOCK_OWNER_MISMATCH")'
	assert_one_stderr_line
	run --separate-stderr wsl recover --expected-owner - "$T" <"$BATS_TEST_TMPDIR/expected"
	[ "$status" -eq 65 ] || fail "recover from stdin: exit $status, want 65"
	run --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/expected" "$T" -- \
		touch "$BATS_TEST_TMPDIR/ran"
	[ "$status" -eq 65 ] || fail "recover -- CMD: exit $status, want 65 ($stderr)"
	[ ! -e "$BATS_TEST_TMPDIR/ran" ] || fail "recover ran its command"
	run --separate-stderr wsl recover --force --reason test --expected-owner "$BATS_TEST_TMPDIR/expected" "$T"
	[ "$status" -eq 65 ] || fail "recover --force: exit $status, want 65 ($stderr)"
	assert_same_snapshot "$before" "$(registry_snapshot --strict)"

	# The exact document still recovers: the refusals took nothing away.
	run --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/exact" "$T"
	[ "$status" -eq 0 ] || fail "exact recover afterwards: exit $status ($stderr)"
	jq_ok '.action == "recovered"'
}

# Classes added when registry.bats's cases moved here (one home for them).
CLASSES_MORE=(garbage json-array over-64k-leading purpose-70k purpose-129 pid-huge-decimal
	pid-exponent pid-fraction start-ticks-negative missing-token missing-recovery-of
	missing-boot-id trailing-letter trailing-empty-object trailing-nul duplicate-key-differs
	schema-version-next kind-other recovery-of-number token-non-hex token-short
	identity-policy-unknown acquired-at-number operation-id-invalid dot-path relative-path)

@test "control: the exact document recovers, whatever its key order and white space" {
	kill -KILL "$BASE_PID"
	wait_exit "$BASE_PID" 10
	jq -S --indent 3 . <<<"$BASE" >"$BATS_TEST_TMPDIR/exact"
	printf '\n\t \n' >>"$BATS_TEST_TMPDIR/exact"
	run --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/exact" "$T"
	[ "$status" -eq 0 ] || fail "exit $status ($stderr)"
}

@test "control: every class is rejected by the parser as a lock file and as expected owner (generator check)" {
	local c n=0
	for c in empty truncated trailing-bytes second-object duplicate-keys extra-key missing-key \
		wrong-type-pid wrong-type-token wrong-type-schema wrong-type-pid-float pid-0 pid-minus-1 \
		pid-huge pid-overflow non-canonical-path trailing-slash-path nul-escaped nul-raw \
		invalid-utf8 over-64k not-an-object foreign-workspace "${CLASSES_MORE[@]}"; do
		malformed "$c" "$BASE" >"$BATS_TEST_TMPDIR/m"
		cmp -s "$BATS_TEST_TMPDIR/m" <(printf '%s' "$BASE") && fail "class $c did not change the document"
		n=$((n + 1))
	done
	[ "$n" -ge 40 ]
	# The two over-64k classes are valid JSON: refused for their size alone.
	for c in over-64k over-64k-leading; do
		malformed "$c" "$BASE" >"$BATS_TEST_TMPDIR/m"
		[ "$(stat -c %s "$BATS_TEST_TMPDIR/m")" -gt 65536 ] || fail "class $c is not over 64 KiB"
		jq -e . "$BATS_TEST_TMPDIR/m" >/dev/null || fail "class $c is not valid JSON"
	done
	# The substituted numbers made it in as written.
	for c in pid-overflow:18446744073709551617 pid-huge-decimal:99999999999999999999999999 pid-exponent:1e30; do
		malformed "${c%%:*}" "$BASE" | grep -q "\"pid\":${c#*:}," || fail "class ${c%%:*}: substitution failed"
	done
}

@test "lock file: empty" { corrupt_lock_case empty; }
@test "lock file: truncated" { corrupt_lock_case truncated; }
@test "lock file: trailing bytes" { corrupt_lock_case trailing-bytes; }
@test "lock file: a second object after the first" { corrupt_lock_case second-object; }
@test "lock file: duplicate keys" { corrupt_lock_case duplicate-keys; }
@test "lock file: an extra key" { corrupt_lock_case extra-key; }
@test "lock file: a missing key" { corrupt_lock_case missing-key; }
@test "lock file: wrong type (pid as a string)" { corrupt_lock_case wrong-type-pid; }
@test "lock file: wrong type (token as a number)" { corrupt_lock_case wrong-type-token; }
@test "lock file: wrong type (schema_version as a string)" { corrupt_lock_case wrong-type-schema; }
@test "lock file: wrong type (pid as a real)" { corrupt_lock_case wrong-type-pid-float; }
@test "lock file: pid 0" { corrupt_lock_case pid-0; }
@test "lock file: pid -1" { corrupt_lock_case pid-minus-1; }
@test "lock file: pid 4194305" { corrupt_lock_case pid-huge; }
@test "lock file: pid beyond 64 bits" { corrupt_lock_case pid-overflow; }
@test "lock file: non-canonical workspace_root (..)" { corrupt_lock_case non-canonical-path; }
@test "lock file: non-canonical workspace_root (trailing /)" { corrupt_lock_case trailing-slash-path; }
@test "lock file: NUL in a string (\\u0000)" { corrupt_lock_case nul-escaped; }
@test "lock file: NUL in a string (raw byte)" { corrupt_lock_case nul-raw; }
@test "lock file: invalid UTF-8" { corrupt_lock_case invalid-utf8; }
@test "lock file: larger than 64 KiB" { corrupt_lock_case over-64k; }
@test "lock file: not an object" { corrupt_lock_case not-an-object; }
@test "lock file: a valid document of another workspace" { corrupt_lock_case foreign-workspace; }
@test "lock file: not JSON at all" { corrupt_lock_case garbage; }
@test "lock file: a JSON array" { corrupt_lock_case json-array; }
@test "lock file: larger than 64 KiB (leading white space, valid JSON)" { corrupt_lock_case over-64k-leading; }
@test "lock file: a 70 KB purpose" { corrupt_lock_case purpose-70k; }
@test "lock file: a purpose of 129 characters" { corrupt_lock_case purpose-129; }
@test "lock file: pid 99999999999999999999999999" { corrupt_lock_case pid-huge-decimal; }
@test "lock file: pid 1e30" { corrupt_lock_case pid-exponent; }
@test "lock file: pid 1.5" { corrupt_lock_case pid-fraction; }
@test "lock file: negative pid_start_ticks" { corrupt_lock_case start-ticks-negative; }
@test "lock file: a missing key (token)" { corrupt_lock_case missing-token; }
@test "lock file: a missing key (recovery_of)" { corrupt_lock_case missing-recovery-of; }
@test "lock file: a missing key (boot_id)" { corrupt_lock_case missing-boot-id; }
@test "lock file: a letter after the object" { corrupt_lock_case trailing-letter; }
@test "lock file: an empty object after the object" { corrupt_lock_case trailing-empty-object; }
@test "lock file: a NUL byte after the object" { corrupt_lock_case trailing-nul; }
@test "lock file: a duplicate key with another value" { corrupt_lock_case duplicate-key-differs; }
@test "lock file: an unknown schema_version (the next one)" { corrupt_lock_case schema-version-next; }
@test "lock file: schema_version 1 with the version 2 keys" { corrupt_lock_case schema-version-1-v2-keys; }
@test "lock file: a pid_namespace that is not one" { corrupt_lock_case bad-pid-namespace; }
@test "lock file: a workspace_fs of an unknown kind" { corrupt_lock_case bad-workspace-fs; }
@test "lock file: another kind" { corrupt_lock_case kind-other; }
@test "lock file: recovery_of a number" { corrupt_lock_case recovery-of-number; }
@test "lock file: a non-hex token" { corrupt_lock_case token-non-hex; }
@test "lock file: a short token" { corrupt_lock_case token-short; }
@test "lock file: an unknown identity_policy" { corrupt_lock_case identity-policy-unknown; }
@test "lock file: acquired_at a number" { corrupt_lock_case acquired-at-number; }
@test "lock file: an invalid operation_id" { corrupt_lock_case operation-id-invalid; }
@test "lock file: non-canonical workspace_root (/.)" { corrupt_lock_case dot-path; }
@test "lock file: a relative workspace_root" { corrupt_lock_case relative-path; }

@test "expected owner: empty" { expected_owner_case empty; }
@test "expected owner: truncated" { expected_owner_case truncated; }
@test "expected owner: trailing bytes" { expected_owner_case trailing-bytes; }
@test "expected owner: a second object after the first" { expected_owner_case second-object; }
@test "expected owner: duplicate keys" { expected_owner_case duplicate-keys; }
@test "expected owner: an extra key" { expected_owner_case extra-key; }
@test "expected owner: a missing key" { expected_owner_case missing-key; }
@test "expected owner: wrong type (pid as a string)" { expected_owner_case wrong-type-pid; }
@test "expected owner: wrong type (token as a number)" { expected_owner_case wrong-type-token; }
@test "expected owner: wrong type (schema_version as a string)" { expected_owner_case wrong-type-schema; }
@test "expected owner: wrong type (pid as a real)" { expected_owner_case wrong-type-pid-float; }
@test "expected owner: pid 0" { expected_owner_case pid-0; }
@test "expected owner: pid -1" { expected_owner_case pid-minus-1; }
@test "expected owner: pid 4194305" { expected_owner_case pid-huge; }
@test "expected owner: pid beyond 64 bits" { expected_owner_case pid-overflow; }
@test "expected owner: non-canonical workspace_root (..)" { expected_owner_case non-canonical-path; }
@test "expected owner: non-canonical workspace_root (trailing /)" { expected_owner_case trailing-slash-path; }
@test "expected owner: NUL in a string (\\u0000)" { expected_owner_case nul-escaped; }
@test "expected owner: NUL in a string (raw byte)" { expected_owner_case nul-raw; }
@test "expected owner: invalid UTF-8" { expected_owner_case invalid-utf8; }
@test "expected owner: larger than 64 KiB" { expected_owner_case over-64k; }
@test "expected owner: not an object" { expected_owner_case not-an-object; }
@test "expected owner: a valid document of another workspace" { expected_owner_case foreign-workspace; }
@test "expected owner: not JSON at all" { expected_owner_case garbage; }
@test "expected owner: a JSON array" { expected_owner_case json-array; }
@test "expected owner: larger than 64 KiB (leading white space, valid JSON)" { expected_owner_case over-64k-leading; }
@test "expected owner: a 70 KB purpose" { expected_owner_case purpose-70k; }
@test "expected owner: a purpose of 129 characters" { expected_owner_case purpose-129; }
@test "expected owner: pid 99999999999999999999999999" { expected_owner_case pid-huge-decimal; }
@test "expected owner: pid 1e30" { expected_owner_case pid-exponent; }
@test "expected owner: pid 1.5" { expected_owner_case pid-fraction; }
@test "expected owner: negative pid_start_ticks" { expected_owner_case start-ticks-negative; }
@test "expected owner: a missing key (token)" { expected_owner_case missing-token; }
@test "expected owner: a missing key (recovery_of)" { expected_owner_case missing-recovery-of; }
@test "expected owner: a missing key (boot_id)" { expected_owner_case missing-boot-id; }
@test "expected owner: a letter after the object" { expected_owner_case trailing-letter; }
@test "expected owner: an empty object after the object" { expected_owner_case trailing-empty-object; }
@test "expected owner: a NUL byte after the object" { expected_owner_case trailing-nul; }
@test "expected owner: a duplicate key with another value" { expected_owner_case duplicate-key-differs; }
@test "expected owner: an unknown schema_version (the next one)" { expected_owner_case schema-version-next; }
@test "expected owner: schema_version 1 with the version 2 keys" { expected_owner_case schema-version-1-v2-keys; }
@test "expected owner: another kind" { expected_owner_case kind-other; }
@test "expected owner: recovery_of a number" { expected_owner_case recovery-of-number; }
@test "expected owner: a non-hex token" { expected_owner_case token-non-hex; }
@test "expected owner: a short token" { expected_owner_case token-short; }
@test "expected owner: an unknown identity_policy" { expected_owner_case identity-policy-unknown; }
@test "expected owner: acquired_at a number" { expected_owner_case acquired-at-number; }
@test "expected owner: an invalid operation_id" { expected_owner_case operation-id-invalid; }
@test "expected owner: non-canonical workspace_root (/.)" { expected_owner_case dot-path; }
@test "expected owner: a relative workspace_root" { expected_owner_case relative-path; }
