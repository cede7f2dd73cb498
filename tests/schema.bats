#!/usr/bin/env bats
# The JSON schemas in doc/schema/ against real output of the binary: owner
# documents, inspect (free, held, dead, unknown, corrupt, overlapping, --all,
# --owner), errors, release, recover, reclaim, retained.json and journal
# lines; and, last, every document that the command tests print, collected
# while they run (tests/schema/collect-wslock) and validated by
# tests/schema/validate.py.  Needs python3 with jsonschema >= 4 (Debian:
# python3-jsonschema) and jq.
#
# Self-contained on purpose: it does not load helpers (only the plain shell
# helpers of lib.sh).

bats_require_minimum_version 1.5.0
# shellcheck source=tests/lib.sh
. "$BATS_TEST_DIRNAME/lib.sh"

WSLOCK=${WSLOCK:-$BATS_TEST_DIRNAME/../wslock}
SCHEMA_DIR=$BATS_TEST_DIRNAME/../doc/schema
# validate.py SCHEMA-DIR SCHEMA-FILE MODE: see its header; it registers every
# doc/schema/*.schema.json under its $id so that cross-file $refs resolve.
VALIDATE=$BATS_TEST_DIRNAME/schema/validate.py

setup() {
	[ -x "$WSLOCK" ] || skip "wslock binary not built at $WSLOCK"
	command -v jq >/dev/null || skip "jq is not installed"
	PY=
	local p
	for p in ${PYTHON:-} python3 /usr/bin/python3; do
		if "$p" -c 'from jsonschema import Draft202012Validator' 2>/dev/null; then
			PY=$p
			break
		fi
	done
	[ -n "$PY" ] || skip "python3-jsonschema is not installed (apt-get install python3-jsonschema)"
	unset WSLOCK_TOKEN WSLOCK_WORKSPACE WSLOCK_OWNER WSLOCK_HOST STATE_DIRECTORY \
		WSLOCK_ALLOW_NETWORK_FS WSLOCK_FENCE XDG_STATE_HOME
	export WSLOCK_DIR=$BATS_TEST_TMPDIR/reg
	: >"$BATS_TEST_TMPDIR/.pids"
}

teardown() {
	local p
	[ -f "$BATS_TEST_TMPDIR/.pids" ] || return 0
	for p in $(cat "$BATS_TEST_TMPDIR/.pids"); do
		kill "$p" 2>/dev/null || true
	done
	return 0
}

fail() {
	printf '%s\n' "$*" >&2
	return 1
}

wsl() {
	timeout -k 5 30 "$WSLOCK" "$@"
}

# valid SCHEMA [JSON=$output]: JSON validates against doc/schema/SCHEMA.schema.json.
valid() {
	local out
	out=$("$PY" "$VALIDATE" "$SCHEMA_DIR" "$1.schema.json" one \
		<<<"${2-$output}" 2>&1) || fail "not valid against $1.schema.json:
$out"
}

# valid_lines SCHEMA FILE: every line of FILE validates.
valid_lines() {
	local out
	out=$("$PY" "$VALIDATE" "$SCHEMA_DIR" "$1.schema.json" lines \
		<"$2" 2>&1) || fail "$2 not valid against $1.schema.json:
$out"
}

# invalid SCHEMA JSON: JSON does NOT validate.
invalid() {
	if "$PY" "$VALIDATE" "$SCHEMA_DIR" "$1.schema.json" one \
		<<<"$2" >/dev/null 2>&1; then
		fail "unexpectedly valid against $1.schema.json: $2"
	fi
}

ws() {
	mkdir -p "$BATS_TEST_TMPDIR/ws/$1"
	printf '%s/ws/%s' "$BATS_TEST_TMPDIR" "$1"
}

lock_dir_of() {
	printf '%s/locks/%s' "$WSLOCK_DIR" "$(lock_key_of "$1")"
}

# start_sleeper: a live process to name as holder; sets SLEEPER.
start_sleeper() {
	sleep 300 </dev/null >/dev/null 2>&1 &
	SLEEPER=$!
	echo "$SLEEPER" >>"$BATS_TEST_TMPDIR/.pids"
}

# hold_dead WS: WS held by an owner that has died (pid gone).
hold_dead() {
	start_sleeper
	wsl acquire -q --pid "$SLEEPER" --purpose "dead holder" "$1" >/dev/null ||
		fail "acquire for $SLEEPER failed"
	kill "$SLEEPER"
	wait "$SLEEPER" 2>/dev/null || true
}

# hold_dead_shared WS: one more reader of WS, whose holder has died.
hold_dead_shared() {
	local p
	sleep 300 </dev/null >/dev/null 2>&1 &
	p=$!
	wsl acquire -q --shared --pid "$p" --purpose "dead reader" "$1" >/dev/null ||
		fail "acquire --shared for $p failed"
	kill "$p"
	wait "$p" 2>/dev/null || true
}

# put_owner WS JSON: replace WS's owner.json bytes.
put_owner() {
	local f
	f=$(lock_dir_of "$1")/owner.json
	printf '%s' "$2" >"$f"
	chmod 0600 "$f"
}

have_cmd() {
	"$WSLOCK" "$1" --help >/dev/null 2>&1
}

have_opt() {
	"$WSLOCK" "$1" --help 2>/dev/null | grep -q -- "$2"
}

@test "schema: every file is a valid draft 2020-12 schema with an \$id" {
	local f n=0
	for f in "$SCHEMA_DIR"/*.schema.json; do
		jq -e '."$schema" == "https://json-schema.org/draft/2020-12/schema" and (."$id" | type == "string")' \
			"$f" >/dev/null || fail "$f: \$schema or \$id missing"
		n=$((n + 1))
	done
	[ "$n" -ge 8 ] || fail "only $n schema files"
	# validate.py checks every schema against the meta-schema on load.
	valid owner "$(wsl acquire --pid $$ "$(ws a)")"
}

@test "schema: acquire's owner document (compact and --pretty)" {
	run -0 --separate-stderr wsl acquire --pid $$ --purpose 'nightly build #7 ✓' \
		--operation-id build-42.a_b "$(ws a)"
	valid owner
	run -0 --separate-stderr wsl acquire --pretty --pid $$ "$(ws b)"
	valid owner
	# What is in the registry is the same document.
	valid owner "$(cat "$(lock_dir_of "$(ws b)")/owner.json")"
}

@test "schema: acquire's output: the owner document, or on etcd the owner document and its fence" {
	local doc bad
	doc=$(wsl acquire --pid $$ "$(ws a)")
	valid acquire "$doc"
	# the etcd backend's form (tests/etcd.bats prints it for real)
	valid acquire "$(jq -c '.fence = 17' <<<"$doc")"
	invalid owner "$(jq -c '.fence = 17' <<<"$doc")"
	for bad in '.fence = 0' '.fence = "17"' '.fence = 17 | .extra = 1' '.fence = 17 | del(.token)' \
		'.fence = 17 | .pid = "x"' '.fence = 17 | .schema_version = 1'; do
		invalid acquire "$(jq -c "$bad" <<<"$doc")"
	done
	# several workspaces: {"owners":[...]}, on etcd with the set's fence
	doc=$(wsl acquire --pid $$ "$(ws b)" "$(ws c)")
	valid acquire "$doc"
	valid acquire "$(jq -c '.fence = 17' <<<"$doc")"
	for bad in '.fence = 0' '.fence = "17"' '.extra = 1' '.owners |= .[:1]'; do
		invalid acquire "$(jq -c "$bad" <<<"$doc")"
	done
}

@test "schema: the owner schema is exact: missing or extra keys and bad values are rejected" {
	local doc bad
	doc=$(wsl acquire --pid $$ "$(ws a)")
	valid owner "$doc"
	for bad in 'del(.token)' '.extra = 1' '.schema_version = 3' '.schema_version = 1' '.schema_version = "2"' \
		'.kind = "other"' '.token = "ABC"' '.token = (.token + "0")' \
		'.operation_id = "-x"' '.operation_id = ("a" * 193)' '.purpose = ""' \
		'.purpose = ("x" * 129)' '.purpose = "a\u0007b"' '.workspace_root = "relative"' \
		'.workspace_root = "/"' '.workspace_root = "/a/"' '.workspace_root = "/a/../b"' \
		'.workspace_root = "/a//b"' '.host = ""' '.host = "a b"' '.boot_id = "nope"' \
		'.pid = 0' '.pid = 4194305' '.pid = 1.5' '.pid = "1"' '.pid_start_ticks = -1' \
		'.identity_policy = "trust-me"' '.boot_id = null' \
		'.acquired_at = "2026-11-30T13:24:49Z"' '.acquired_at = "2026-11-30 13:24:49.791Z"' \
		'.recovery_of = "x"' '.recovery_of = 1'; do
		invalid owner "$(jq -c "$bad" <<<"$doc")"
	done
	for ok in '.pid = 1' '.pid = 4194304' '.purpose = ("é" * 128)' \
		'.recovery_of = .token' \
		'.identity_policy = "pid-only-fail-closed" | .boot_id = null | .pid_start_ticks = null'; do
		valid owner "$(jq -c "$ok" <<<"$doc")"
	done
}

@test "schema: the owner schema and the binary agree on what is corrupt" {
	local w doc bad
	w=$(ws a)
	start_sleeper
	doc=$(wsl acquire --pid "$SLEEPER" "$w")
	for bad in '.extra = 1' 'del(.host)' '.pid = 4194305' '.token = "ABC"' \
		'.identity_policy = "x"' '.acquired_at = "yesterday"' '.workspace_root = "/a/"'; do
		put_owner "$w" "$(jq -c "$bad" <<<"$doc")"
		invalid owner "$(jq -c "$bad" <<<"$doc")"
		run -0 --separate-stderr wsl inspect "$w"
		[ "$(jq -r .state <<<"$output")" = corrupt ] || fail "binary accepts $bad: $output"
		valid inspect
	done
	for ok in '.pid = 4194304' '.identity_policy = "pid-only-fail-closed" | .boot_id = null | .pid_start_ticks = null'; do
		put_owner "$w" "$(jq -c "$ok" <<<"$doc")"
		valid owner "$(jq -c "$ok" <<<"$doc")"
		run -0 --separate-stderr wsl inspect "$w"
		[ "$(jq -r .state <<<"$output")" != corrupt ] || fail "binary rejects $ok: $output"
		valid inspect
	done
}

@test "schema: inspect of a free workspace" {
	run -0 --separate-stderr wsl inspect "$(ws a)"
	valid inspect
	[ "$(jq -r .state <<<"$output")" = free ]
	run -0 --separate-stderr wsl inspect --pretty "$(ws a)"
	valid inspect
}

@test "schema: inspect of held (live, dead, unknown) workspaces" {
	local a b c
	a=$(ws a) b=$(ws b) c=$(ws c)
	start_sleeper
	wsl acquire --pid "$SLEEPER" "$a" >/dev/null
	run -0 --separate-stderr wsl inspect "$a"
	valid inspect
	[ "$(jq -r .liveness <<<"$output")" = live ]
	hold_dead "$b"
	run -0 --separate-stderr wsl inspect "$b"
	valid inspect
	[ "$(jq -r .liveness <<<"$output")" = dead ]
	wsl acquire --pid $$ "$c" >/dev/null
	WSLOCK_HOST=elsewhere run -0 --separate-stderr wsl inspect "$c"
	valid inspect
	[ "$(jq -r .liveness <<<"$output")" = unknown ]
}

@test "schema: inspect with overlapping ancestor and descendant locks" {
	local top mid low
	top=$(ws top) mid=$(ws top/mid) low=$(ws top/mid/low)
	wsl acquire --pid $$ "$low" >/dev/null
	run -0 --separate-stderr wsl inspect "$top"
	valid inspect
	[ "$(jq -r '.overlapping[0].relation' <<<"$output")" = descendant ]
	wsl release --token "$(wsl inspect --owner "$low" | jq -r .token)" "$low" >/dev/null
	wsl acquire --pid $$ "$top" >/dev/null
	run -0 --separate-stderr wsl inspect "$mid"
	valid inspect
	[ "$(jq -r '.overlapping[0].relation' <<<"$output")" = ancestor ]
}

@test "schema: inspect of a corrupt lock, inspect --all and inspect --owner" {
	local a b c
	a=$(ws a) b=$(ws b) c=$(ws c)
	wsl acquire --pid $$ "$a" >/dev/null
	hold_dead "$b"
	wsl acquire --pid $$ "$c" >/dev/null
	put_owner "$c" '{"junk":1}'
	run -0 --separate-stderr wsl inspect "$c"
	valid inspect
	[ "$(jq -r .state <<<"$output")" = corrupt ]
	run -0 --separate-stderr wsl inspect --all
	valid inspect
	[ "$(jq '.locks | length' <<<"$output")" = 3 ]
	run -0 --separate-stderr wsl inspect --all --pretty
	valid inspect
	run -0 --separate-stderr wsl inspect --owner "$a"
	valid owner
	run -0 --separate-stderr wsl inspect --owner "$(ws free)"
	[ "$output" = null ]
	# An empty registry.
	WSLOCK_DIR=$BATS_TEST_TMPDIR/empty run -0 --separate-stderr wsl inspect --all
	valid inspect
}

@test "schema: inspect of a shared lock (a live and a dead reader), --all, --owner and the reclaim preview" {
	local a
	a=$(ws a)
	start_sleeper
	wsl acquire -q --shared --pid "$SLEEPER" "$a" >/dev/null
	hold_dead_shared "$a"
	run -0 --separate-stderr wsl inspect "$a"
	valid inspect
	[ "$(jq -r '.mode, (.holders | length), (.owners | length)' <<<"$output" | tr '\n' ' ')" = "shared 2 2 " ]
	run -0 --separate-stderr wsl inspect --all
	valid inspect
	run -0 --separate-stderr wsl inspect --owner "$a"
	valid owner
	run -0 --separate-stderr wsl reclaim
	valid reclaim
	run -0 --separate-stderr wsl reclaim --yes
	valid reclaim
	run -0 --separate-stderr wsl inspect "$a"
	valid inspect
}

@test "schema: the inspect schema rejects what inspect must not print" {
	local r
	r=$(wsl inspect "$(ws a)")
	invalid inspect "$(jq -c '.state = "locked"' <<<"$r")"
	invalid inspect "$(jq -c '.extra = 1' <<<"$r")"
	invalid inspect "$(jq -c 'del(.overlapping)' <<<"$r")"
	invalid inspect "$(jq -c '.liveness = "live"' <<<"$r")"
	invalid inspect '{"locks":[{"workspace_root":"/a","state":"free"}]}'
	start_sleeper
	wsl acquire --pid "$SLEEPER" "$(ws b)" >/dev/null
	r=$(wsl inspect "$(ws b)")
	invalid inspect "$(jq -c '.owner = null' <<<"$r")"
	invalid inspect "$(jq -c '.liveness = "maybe"' <<<"$r")"
	invalid inspect "$(jq -c 'del(.lock_path)' <<<"$r")"
	invalid inspect "$(jq -c '.owner.extra = 1' <<<"$r")"
}

@test "schema: errors (busy from acquire -n, and others)" {
	local a b c
	a=$(ws a) b=$(ws b) c=$(ws c)
	start_sleeper
	wsl acquire --pid "$SLEEPER" "$a" >/dev/null
	run -75 --separate-stderr wsl acquire -n "$a"
	valid error
	[ "$(jq -r .error.code <<<"$output")" = WSLOCK_BUSY ]
	run -75 --separate-stderr wsl acquire -n "$(ws a/sub)"
	valid error
	run -75 --separate-stderr wsl acquire -w 0.1 "$a"
	valid error
	[ "$(jq -r .error.code <<<"$output")" = WSLOCK_TIMEOUT ]
	hold_dead "$b"
	run -69 --separate-stderr wsl acquire -n "$b"
	valid error
	[ "$(jq -r .error.code <<<"$output")" = WSLOCK_RECOVERY_REQUIRED ]
	wsl acquire --pid $$ "$c" >/dev/null
	put_owner "$c" '{}'
	run -65 --separate-stderr wsl acquire -n "$c"
	valid error
	run -66 --separate-stderr wsl release --token 0123456789abcdef0123456789abcdef "$(ws free)"
	valid error
	[ "$(jq -r .error.code <<<"$output")" = WSLOCK_NOT_HELD ]
	run -66 --separate-stderr wsl inspect "$BATS_TEST_TMPDIR/nonexistent"
	valid error
	run -64 --separate-stderr wsl acquire -w soon "$a"
	valid error
	[ "$(jq -r .error.code <<<"$output")" = WSLOCK_USAGE ]
	invalid error '{"error":{"code":"WSLOCK_NOPE","message":"x"}}'
	invalid error '{"error":{"code":"WSLOCK_BUSY"}}'
	invalid error '{"error":{"code":"WSLOCK_BUSY","message":"x"},"extra":1}'
}

@test "schema: release output" {
	local a tok
	a=$(ws a)
	tok=$(wsl acquire --pid $$ "$a" | jq -r .token)
	run -0 --separate-stderr wsl release --token "$tok" "$a"
	valid release
	[ "$(jq -r .owner.token <<<"$output")" = "$tok" ]
}

@test "schema: release --retain output and its retained.json" {
	local a tok
	a=$(ws a)
	tok=$(wsl acquire --pid $$ "$a" | jq -r .token)
	run -0 --separate-stderr wsl release --token "$tok" --retain --reason "kept on purpose" "$a"
	valid release
	[ "$(jq -r .action <<<"$output")" = retained ]
	valid retained "$(cat "$WSLOCK_DIR/locks/$(lock_key_of "$a")/retained.json")"
	valid inspect "$(wsl inspect "$a")"
}

@test "schema: recover output and its journal line" {
	have_cmd recover || skip "wslock recover is not in this binary yet"
	local b prior
	b=$(ws b)
	hold_dead "$b"
	wsl inspect --owner "$b" >"$BATS_TEST_TMPDIR/owner.json"
	prior=$(jq -r .token "$BATS_TEST_TMPDIR/owner.json")
	run -0 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$b"
	valid recover
	[ "$(jq -r .owner.recovery_of <<<"$output")" = "$prior" ] || fail "recovery_of is not the prior token: $output"
	[ "$(jq -r .prior_owner.token <<<"$output")" = "$prior" ]
	[ -s "$WSLOCK_DIR/journal.jsonl" ] || fail "no journal after recover"
	valid_lines journal "$WSLOCK_DIR/journal.jsonl"
	[ "$(tail -n1 "$WSLOCK_DIR/journal.jsonl" | jq -r .action)" = recover ]
}

@test "schema: recover of a corrupt lock (--force --reason) output" {
	have_cmd recover || skip "wslock recover is not in this binary yet"
	local c
	c=$(ws c)
	wsl acquire --pid $$ "$c" >/dev/null
	put_owner "$c" '{"junk":1}'
	printf '%s' '{"junk":1}' >"$BATS_TEST_TMPDIR/corrupt.json"
	run -0 --separate-stderr wsl recover --force --reason "schema test" \
		--expected-owner "$BATS_TEST_TMPDIR/corrupt.json" "$c"
	valid recover
	[ "$(jq -r .action <<<"$output")" = cleared-corrupt ]
	valid_lines journal "$WSLOCK_DIR/journal.jsonl"
}

@test "schema: reclaim preview and reclaim --yes output, and journal lines" {
	have_cmd reclaim || skip "wslock reclaim is not in this binary yet"
	local a b c
	a=$(ws a) b=$(ws b) c=$(ws c)
	start_sleeper
	wsl acquire --pid "$SLEEPER" "$a" >/dev/null
	hold_dead "$b"
	run -3 wsl run -q --retain-on-failure "$c" -- sh -c 'exit 3'
	run -0 --separate-stderr wsl reclaim
	valid reclaim
	[ "$(jq -r .action <<<"$output")" = preview ]
	[ "$(jq '.candidates | length' <<<"$output")" = 3 ]
	[ "$(jq '[.candidates[] | select(.reclaimable)] | length' <<<"$output")" = 1 ]
	run -0 --separate-stderr wsl reclaim "$b"
	valid reclaim
	run -0 --separate-stderr wsl reclaim --yes
	valid reclaim
	[ "$(jq -r .action <<<"$output")" = reclaimed ]
	[ "$(jq '.reclaimed | length' <<<"$output")" = 1 ]
	valid_lines journal "$WSLOCK_DIR/journal.jsonl"
	[ "$(tail -n1 "$WSLOCK_DIR/journal.jsonl" | jq -r .action)" = reclaim ]
}

@test "schema: reclaim with a corrupt lock: preview and --yes name it alike" {
	have_cmd reclaim || skip "wslock reclaim is not in this binary yet"
	local c
	c=$(ws c)
	wsl acquire --pid $$ "$c" >/dev/null
	put_owner "$c" '{"junk":1}'
	run -0 --separate-stderr wsl reclaim
	valid reclaim
	[ "$(jq '[.candidates[] | select(.state == "corrupt" and (.reclaimable | not))] | length' <<<"$output")" = 1 ]
	run -0 --separate-stderr wsl reclaim --yes
	# skipped[].workspace_root is a path or null (as in the preview and in
	# inspect --all), never the registry key.
	valid reclaim
	[ "$(jq '.skipped | length' <<<"$output")" = 1 ]
}

@test "schema: acquire --reclaim-dead writes a valid journal line" {
	have_opt acquire --reclaim-dead || skip "acquire --reclaim-dead is not in this binary yet"
	local b
	b=$(ws b)
	hold_dead "$b"
	run -0 --separate-stderr wsl acquire --reclaim-dead --pid $$ "$b"
	valid owner
	valid_lines journal "$WSLOCK_DIR/journal.jsonl"
	[ "$(tail -n1 "$WSLOCK_DIR/journal.jsonl" | jq -r .action)" = reclaim-dead ]
}

@test "schema: run --retain-on-failure leaves a valid retained.json and inspect output" {
	have_opt run --retain-on-failure || skip "run --retain-on-failure is not in this binary yet"
	local a
	a=$(ws a)
	run -3 wsl run -q --retain-on-failure "$a" -- sh -c 'exit 3'
	valid retained "$(cat "$(lock_dir_of "$a")/retained.json")"
	run -0 --separate-stderr wsl inspect "$a"
	valid inspect
	[ "$(jq -r .state <<<"$output")" = retained ]
	run -0 --separate-stderr wsl inspect --all
	valid inspect
	if have_cmd reclaim; then
		run -0 --separate-stderr wsl reclaim
		valid reclaim
	fi
}

@test "schema: the journal schema accepts the documented line and rejects others" {
	local o line
	o=$(wsl acquire --pid $$ "$(ws a)")
	line=$(jq -c '{time: .acquired_at, action: "recover", workspace_root,
		prior_owner: ., new_owner: (.recovery_of = .token), liveness: "dead",
		liveness_reason: "pid 1 no longer exists", forced: false, force_reason: null,
		actor: {pid: 1, uid: 0, host: .host}}' <<<"$o")
	valid journal "$line"
	invalid journal "$(jq -c '.action = "steal"' <<<"$line")"
	invalid journal "$(jq -c '.forced = true' <<<"$line")"
	valid journal "$(jq -c '.forced = true | .force_reason = "host is gone" | .liveness = "unknown"' <<<"$line")"
	invalid journal "$(jq -c 'del(.actor.uid)' <<<"$line")"
	invalid journal "$(jq -c '.new_owner = null' <<<"$line")"
	valid journal "$(jq -c '.action = "reclaim" | .new_owner = null' <<<"$line")"
}

# The bats files whose every wslock command's stdout is kept and validated
# below: between them they drive each command through its outcomes and
# errors (about a minute here).
COLLECT_FILES="acquire errors inspect journal malformed reclaim recover release retain attack shared multi"

@test "schema: every JSON document the command tests print validates (collected from $COLLECT_FILES)" {
	command -v bats >/dev/null || skip "bats is not on PATH"
	local dir=$BATS_TEST_TMPDIR/collected f files=()
	mkdir -p "$dir"
	for f in $COLLECT_FILES; do files+=("$BATS_TEST_DIRNAME/$f.bats"); done
	# Each file's own tests must pass with the collector in place.
	run env WSLOCK="$BATS_TEST_DIRNAME/schema/collect-wslock" WSLOCK_REAL="$WSLOCK" \
		WSLOCK_COLLECT="$dir" bats "${files[@]}"
	[ "$status" -eq 0 ] || fail "the command tests failed under the collector:
$(grep -A6 '^not ok' <<<"$output" | head -60)"
	run "$PY" "$VALIDATE" "$SCHEMA_DIR" - collected "$dir"
	[ "$status" -eq 0 ] || fail "$output"
	# Each kind of document was seen, and in numbers.
	local name n
	for name in acquire owner inspect error release recover reclaim; do
		n=$(awk -v s="$name.schema.json" '$1 == s { print $2 }' <<<"$output")
		[ "${n:-0}" -ge 3 ] || fail "only ${n:-0} documents for $name.schema.json: $output"
	done
}
