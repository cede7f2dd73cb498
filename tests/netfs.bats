#!/usr/bin/env bats
# The network filesystem guard of DESIGN.md section 5, with statfs mocked by
# the test build: ./wslock-test with WSLOCK_TEST_FSTYPE=NAME sees the
# registry on filesystem NAME (src/testhook.h). `make test-build` builds it.

load helpers

# This file always drives the test build (the hook is not in ./wslock).
WSLOCK=${WSLOCK_TEST:-$BATS_TEST_DIRNAME/../wslock-test}
REAL_WSLOCK=$BATS_TEST_DIRNAME/../wslock

eval "$(declare -f setup | sed '1s/^setup/helpers_setup/')"
setup() {
	[ -x "$WSLOCK" ] || skip "wslock-test is not built at $WSLOCK (make test-build)"
	helpers_setup
	unset WSLOCK_TEST_FSTYPE WSLOCK_CRASH_AT
	mkws a a/sub
	# An existing, empty registry: the guard must leave it as it is.
	mkdir -m 0700 "$WSLOCK_DIR"
}

# assert_netfs_refused FSNAME: after `run --separate-stderr` of a non-run
# command: 77, WSLOCK_NETWORK_FS naming the filesystem, the etcd backend
# and the override.
assert_netfs_refused() {
	[ "$status" -eq 77 ] || fail "exit $status, want 77; stdout '$output' stderr '$stderr'"
	assert_json_error WSLOCK_NETWORK_FS
	jq_ok '.error.message | (contains("etcd") and contains("WSLOCK_ALLOW_NETWORK_FS"))'
	[[ $stderr == *"($1)"* ]] || fail "stderr does not name the filesystem $1: $stderr"
	[[ $stderr == *etcd* ]] || fail "stderr does not name the etcd backend: $stderr"
}

@test "nfs: acquire is refused with 77 WSLOCK_NETWORK_FS naming the etcd backend; nothing written" {
	local before
	before=$(registry_snapshot --strict)
	WSLOCK_TEST_FSTYPE=nfs run --separate-stderr wsl acquire --pid $$ "$(W a)"
	assert_netfs_refused nfs
	assert_same_snapshot "$before" "$(registry_snapshot --strict)"
}

@test "nfs: run is refused with 77 before the command starts" {
	local before
	before=$(registry_snapshot --strict)
	WSLOCK_TEST_FSTYPE=nfs run --separate-stderr wsl run "$(W a)" -- touch "$BATS_TEST_TMPDIR/ran"
	[ "$status" -eq 77 ] || fail "exit $status"
	assert_run_error WSLOCK_NETWORK_FS
	[[ $stderr == *etcd* ]] || fail "stderr: $stderr"
	[ ! -e "$BATS_TEST_TMPDIR/ran" ] || fail "the command ran"
	assert_same_snapshot "$before" "$(registry_snapshot --strict)"
}

@test "nfs: every command refuses an existing registry, the lock stays as it was" {
	local owner tok before
	acquire_as $$ "$(W a)"
	tok=$(json_get .token "$OWNER")
	wsl inspect --owner "$(W a)" >"$BATS_TEST_TMPDIR/owner.json"
	before=$(registry_snapshot --strict)
	export WSLOCK_TEST_FSTYPE=nfs
	run --separate-stderr wsl inspect "$(W a)"
	assert_netfs_refused nfs
	run --separate-stderr wsl inspect --all
	assert_netfs_refused nfs
	run --separate-stderr wsl release --token "$tok" "$(W a)"
	assert_netfs_refused nfs
	run --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	assert_netfs_refused nfs
	run --separate-stderr wsl reclaim
	assert_netfs_refused nfs
	run --separate-stderr wsl reclaim --yes
	assert_netfs_refused nfs
	run --separate-stderr wsl acquire -n --pid $$ "$(W a/sub)"
	assert_netfs_refused nfs
	unset WSLOCK_TEST_FSTYPE
	assert_same_snapshot "$before" "$(registry_snapshot --strict)"
	run wsl release --token "$tok" "$(W a)"
	[ "$status" -eq 0 ] || fail "release on the local registry: $output"
}

@test "other network filesystems (cifs, ceph, 9p) are refused by name" {
	local fs
	for fs in cifs ceph 9p; do
		WSLOCK_TEST_FSTYPE=$fs run --separate-stderr wsl acquire --pid $$ "$(W a)"
		assert_netfs_refused "$fs"
	done
}

@test "WSLOCK_ALLOW_NETWORK_FS=1 allows acquire, run, inspect and release on nfs" {
	local tok
	export WSLOCK_TEST_FSTYPE=nfs WSLOCK_ALLOW_NETWORK_FS=1
	run --separate-stderr wsl acquire --pid $$ "$(W a)"
	[ "$status" -eq 0 ] || fail "acquire: $status $output $stderr"
	tok=$(json_get .token)
	run --separate-stderr wsl inspect "$(W a)"
	[ "$status" -eq 0 ] || fail "inspect: $status $stderr"
	jq_ok '.state == "held"'
	run --separate-stderr wsl release --token "$tok" "$(W a)"
	[ "$status" -eq 0 ] || fail "release: $status $stderr"
	run --separate-stderr wsl run "$(W a)" -- sh -c 'echo "$WSLOCK_WORKSPACE"'
	[ "$status" -eq 0 ] || fail "run: $status $stderr"
	[ "$output" = "$(canon "$(W a)")" ] || fail "run output: $output"
}

@test "only the value 1 allows a network filesystem" {
	local v
	for v in 0 yes true " 1" "" 11; do
		WSLOCK_TEST_FSTYPE=nfs WSLOCK_ALLOW_NETWORK_FS=$v run --separate-stderr wsl acquire --pid $$ "$(W a)"
		[ "$status" -eq 77 ] || fail "WSLOCK_ALLOW_NETWORK_FS='$v': exit $status"
	done
}

@test "a local filesystem (WSLOCK_TEST_FSTYPE=local) is not refused" {
	WSLOCK_TEST_FSTYPE=local run --separate-stderr wsl run "$(W a)" -- true
	[ "$status" -eq 0 ] || fail "exit $status: $stderr"
}

@test "the installed binary has no test hooks: WSLOCK_TEST_FSTYPE and WSLOCK_CRASH_AT do nothing" {
	[ -x "$REAL_WSLOCK" ] || skip "wslock is not built"
	WSLOCK_TEST_FSTYPE=nfs run --separate-stderr timeout -k 5 30 "$REAL_WSLOCK" run "$(W a)" -- true
	[ "$status" -eq 0 ] || fail "./wslock with WSLOCK_TEST_FSTYPE=nfs: exit $status $stderr"
	WSLOCK_CRASH_AT=acquire:published run --separate-stderr timeout -k 5 30 "$REAL_WSLOCK" run "$(W a)" -- true
	[ "$status" -eq 0 ] || fail "./wslock with WSLOCK_CRASH_AT: exit $status $stderr"
	if grep -aq -e WSLOCK_TEST_FSTYPE -e WSLOCK_CRASH_AT "$REAL_WSLOCK"; then
		fail "./wslock contains the test hook variables"
	fi
}
