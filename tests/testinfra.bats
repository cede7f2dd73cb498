#!/usr/bin/env bats
# The test runners themselves: tests/run-bats.sh fails a CI run on a skip
# that no allow-list justifies, and only then; tests/lib.sh can be sourced
# without side effects.

bats_require_minimum_version 1.5.0

ROOT=$BATS_TEST_DIRNAME/..

setup() {
	unset CI WSLOCK_STRICT_SKIPS
	F=$BATS_TEST_TMPDIR/inner.bats
	printf '%s\n' \
		'@test "plain" { true; }' \
		'@test "needs a # sign" { skip "tool x is missing"; }' \
		'@test "bare skip" { skip; }' >"$F"
}

@test "run-bats.sh: outside CI a skip passes, bats's own output comes last" {
	run --separate-stderr "$ROOT/tests/run-bats.sh" "$F"
	[ "$status" -eq 0 ]
	[ -z "$stderr" ]
	[[ ${lines[-1]} == "ok 3 bare skip # skip"* ]]
}

@test "run-bats.sh: in CI every skip not allowed fails the run and is named with its reason" {
	CI=true run --separate-stderr "$ROOT/tests/run-bats.sh" "$F"
	[ "$status" -eq 1 ]
	[[ $stderr == *"skipped: needs a # sign (tool x is missing)"* ]]
	[[ $stderr == *"skipped: bare skip (no reason given)"* ]]
	[[ $stderr != *"plain"* ]]
	WSLOCK_STRICT_SKIPS=1 run "$ROOT/tests/run-bats.sh" "$F"
	[ "$status" -eq 1 ]
}

@test "run-bats.sh: an allow-list line with a reason lets exactly that skip pass" {
	local a=$BATS_TEST_TMPDIR/allow
	printf '# comment\n\n%s\t%s\n' "needs a # sign" "x cannot be installed in CI" >"$a"
	CI=true run --separate-stderr "$ROOT/tests/run-bats.sh" --allow "$a" "$F"
	[ "$status" -eq 1 ]
	[[ $stderr == *"skipped: bare skip"* ]]
	[[ $stderr != *"needs a # sign"* ]]
	printf '%s\t%s\n' "bare skip" "for this test" >>"$a"
	CI=true run --separate-stderr "$ROOT/tests/run-bats.sh" --allow "$a" "$F"
	[ "$status" -eq 0 ]
	# A line without a reason is refused, not taken as allowing.
	printf '%s\n' "bare skip" >"$a"
	CI=true run --separate-stderr "$ROOT/tests/run-bats.sh" --allow "$a" "$F"
	[ "$status" -ne 0 ]
	[[ $stderr == *"has no reason"* ]]
}

@test "run-bats.sh: a failing test fails the run, in CI and out" {
	printf '%s\n' '@test "broken" { false; }' >"$F"
	run "$ROOT/tests/run-bats.sh" "$F"
	[ "$status" -eq 1 ]
	CI=true run "$ROOT/tests/run-bats.sh" "$F"
	[ "$status" -eq 1 ]
}

@test "the allow-lists in tests/ name only tests that exist, each with a reason" {
	local f n w names
	names=$(cd "$ROOT/tests" && grep -ho '^@test "[^"]*"' ./*.bats | sed 's/^@test "\(.*\)"$/\1/')
	for f in "$ROOT"/tests/skips.*; do
		while IFS=$'\t' read -r n w; do
			case $n in '' | '#'*) continue ;; esac
			[ -n "$w" ] || { echo "$f: '$n' has no reason" >&2; return 1; }
			grep -qxF -- "$n" <<<"$names" || { echo "$f: no test named '$n'" >&2; return 1; }
		done <"$f"
	done
}

@test "tests/lib.sh defines functions and runs nothing" {
	run bash -c 'set -eu; out=$(. "$1/tests/lib.sh"); [ -z "$out" ]; . "$1/tests/lib.sh"; declare -F wsl_strict_skips' sh "$ROOT"
	[ "$status" -eq 0 ]
}

@test "lib.sh: wsl_journal_problems finds every line that is not one JSON object, and a missing final newline" {
	. "$ROOT/tests/lib.sh"
	local j=$BATS_TEST_TMPDIR/journal.jsonl
	run wsl_journal_problems "$j"
	[ "$status" -eq 0 ] && [ -z "$output" ]
	printf '{"a":1}\n{"b":"x y"}\n' >"$j"
	run wsl_journal_problems "$j"
	[ "$status" -eq 0 ] && [ -z "$output" ]
	printf '{"a":1}\n{}{}\n[1]\n{"half":\n{"b":2}' >"$j"
	run wsl_journal_problems "$j"
	[ "$status" -eq 1 ]
	[[ $output == *"object: {}{}"* && $output == *"object: [1]"* && $output == *'object: {"half":'* ]]
	[[ $output == *"does not end with a newline"* ]]
	[[ $output != *'{"a":1}'* && $output != *'{"b":2}'* ]]
}

@test "lib.sh: wsl_registry_leftovers names non-empty working directories, not the tmp format stamp" {
	. "$ROOT/tests/lib.sh"
	local r=$BATS_TEST_TMPDIR/reg
	mkdir -p "$r/locks" "$r/nest" "$r/staging"
	: >"$r/tmp"
	: >"$r/journal.jsonl"
	run wsl_registry_leftovers "$r"
	[ "$status" -eq 0 ] && [ -z "$output" ]
	# an emptied nest/ directory is kept (reclaim collects it): no leftover
	mkdir "$r/nest/k1"
	run wsl_registry_leftovers "$r"
	[ "$status" -eq 0 ] && [ -z "$output" ]
	: >"$r/nest/k1/m1"
	mkdir "$r/staging/s1"
	run wsl_registry_leftovers "$r"
	[ "$status" -eq 1 ]
	[[ $output == *"nest/: k1/m1"* && $output == *"staging/: s1"* && $output != *locks* ]]
}

@test "lib.sh: wsl_kill_reap leaves a started sleeper provably gone; wait_for is bounded" {
	. "$ROOT/tests/lib.sh"
	wsl_start_sleeper 60
	is_running "$SLEEPER_PID"
	[ -n "$(start_ticks "$SLEEPER_PID")" ]
	wsl_kill_reap "$SLEEPER_PID"
	! is_running "$SLEEPER_PID"
	run wait_for false 1
	[ "$status" -eq 1 ]
	[[ $output == *"not met within 1s"* ]]
}

@test "unit/run.sh: a unit test's 'skipped' line fails in CI only; a failing unit test always fails" {
	local t=$BATS_TEST_TMPDIR/test_fake
	printf '#!/bin/sh\necho "ok 1 - a"\necho "# the network tests skipped (no server)"\necho "1..1"\n' >"$t"
	chmod +x "$t"
	run --separate-stderr "$ROOT/tests/unit/run.sh" "$t"
	[ "$status" -eq 0 ]
	CI=true run --separate-stderr "$ROOT/tests/unit/run.sh" "$t"
	[ "$status" -eq 1 ]
	[[ $stderr == *"the network tests skipped"* ]]
	printf '#!/bin/sh\necho "not ok 1 - a"\nexit 1\n' >"$t"
	run --separate-stderr "$ROOT/tests/unit/run.sh" "$t"
	[ "$status" -eq 1 ]
	[[ $stderr == *"test_fake failed"* ]]
}
