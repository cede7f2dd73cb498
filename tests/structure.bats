#!/usr/bin/env bats
# tests/structure.sh, the layout check of DESIGN.md section 7: the tree
# passes it, and each rule fails on a copy of src/ with a violation planted.

bats_require_minimum_version 1.5.0

ROOT=$BATS_TEST_DIRNAME/..

setup() {
	S=$BATS_TEST_TMPDIR/src
	mkdir "$S"
	cp "$ROOT"/src/*.c "$ROOT"/src/*.h "$S"/
}

@test "structure: the source tree passes" {
	run sh "$ROOT/tests/structure.sh" "$S"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
}

@test "structure: an include cycle between two modules fails and is named with its edges" {
	echo '#include "cli.h"' >>"$S/output.h"
	run sh "$ROOT/tests/structure.sh" "$S"
	[ "$status" -eq 1 ]
	[[ $output == *"include cycle between modules: output cli"* ]]
	[[ $output == *"output -> cli (#include in output.h)"* ]]
}

@test "structure: a cycle through a third module fails too" {
	echo '#include "hold.h"' >>"$S/output.c"
	run sh "$ROOT/tests/structure.sh" "$S"
	[ "$status" -eq 1 ]
	[[ $output == *"include cycle between modules:"*hold* ]]
	[[ $output == *"output -> hold (#include in output.c)"* ]]
}

@test "structure: files of one module may include each other's header" {
	echo '#include "registry_etcd.h"' >>"$S/registry_etcd_write.c"
	echo '#include "etcd_impl.h"' >>"$S/etcd.c"
	run sh "$ROOT/tests/structure.sh" "$S"
	[ "$status" -eq 0 ]
}

@test "structure: a lock rule defined outside lockrules.c fails" {
	printf 'int lockrules_check_release(void);\nint lockrules_check_release(void) { return 0; }\n' >>"$S/hold.c"
	run sh "$ROOT/tests/structure.sh" "$S"
	[ "$status" -eq 1 ]
	[[ $output == *"lockrules_check_release (lockrules.h) is defined in hold.c lockrules.c"* ]]
}

@test "structure: a .c over 900 lines fails" {
	seq 1 901 | sed 's#.*#/* line */#' >>"$S/cmd_run.c"
	run sh "$ROOT/tests/structure.sh" "$S"
	[ "$status" -eq 1 ]
	[[ $output == *"cmd_run.c has "*" lines (at most 900"* ]]
}

@test "structure: two objects that use each other's symbols fail" {
	command -v nm >/dev/null && command -v cc >/dev/null ||
		skip "nm or cc is missing"
	printf 'extern int b_used; int a_used = 1; int a(void) { return b_used; }\n' >"$S/aa.c"
	printf 'extern int a_used; int b_used = 1; int b(void) { return a_used; }\n' >"$S/bb.c"
	cc -c -o "$S/aa.o" "$S/aa.c"
	cc -c -o "$S/bb.o" "$S/bb.c"
	run sh "$ROOT/tests/structure.sh" "$S"
	[ "$status" -eq 1 ]
	[[ $output == *"symbol cycle between modules: "*aa* ]]
	[[ $output == *"aa -> bb (b_used)"* ]]
}
