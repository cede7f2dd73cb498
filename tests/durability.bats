#!/usr/bin/env bats
# How acquire syncs (src/registry_local.c, "Durability"): one commit fsync
# where the filesystem journals metadata in order, one per changed
# directory elsewhere. An ext4 made without a journal is not ordered.
# Needs root (loop mounts), mkfs.ext4 and strace.

load helpers

local_setup() {
	command -v strace >/dev/null || skip "strace is not installed"
	command -v mkfs.ext4 >/dev/null || skip "mkfs.ext4 is not installed (e2fsprogs)"
	[ "$(id -u)" -eq 0 ] || skip "loop mounts need root"
}

teardown() {
	local m
	[ -f "$BATS_TEST_TMPDIR/.mounts" ] || return 0
	while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" || true; done \
		<"$BATS_TEST_TMPDIR/.mounts"
}

# ext4_mount NAME MKFS-OPTIONS...: a fresh 16 MiB ext4 mounted at
# $BATS_TEST_TMPDIR/NAME; skips when this machine cannot loop-mount.
ext4_mount() {
	local name=$1 img=$BATS_TEST_TMPDIR/$1.img
	shift
	truncate -s 16M "$img"
	mkfs.ext4 -q -F "$@" "$img"
	mkdir -p "$BATS_TEST_TMPDIR/$name"
	mount -o loop "$img" "$BATS_TEST_TMPDIR/$name" 2>/dev/null ||
		skip "cannot loop-mount an ext4 image here"
	echo "$BATS_TEST_TMPDIR/$name" >>"$BATS_TEST_TMPDIR/.mounts"
}

# fsyncs_of_acquire MOUNT: how many fsync/fdatasync calls an acquire of a
# workspace three levels deep makes with its registry on MOUNT.
fsyncs_of_acquire() {
	local m=$1
	mkdir -p "$m/ws/a/b/c"
	WSLOCK_DIR=$m/reg strace -f -qq -e trace=fsync,fdatasync -o "$m.trace" \
		"$WSLOCK" acquire --pid $$ "$m/ws/a/b/c" >/dev/null
	WSLOCK_DIR=$m/reg "$WSLOCK" inspect "$m/ws/a/b/c" | jq -e '.state == "held"' >/dev/null
	wc -l <"$m.trace"
}

@test "ext4 without a journal fsyncs every changed directory; with one, one commit" {
	ext4_mount journaled
	ext4_mount nojournal -O ^has_journal
	local j n
	j=$(fsyncs_of_acquire "$BATS_TEST_TMPDIR/journaled")
	n=$(fsyncs_of_acquire "$BATS_TEST_TMPDIR/nojournal")
	# Journaled: the documents and one commit of locks/; without a journal
	# also the staging directory and each ancestor's marker directory.
	[ "$n" -ge $((j + 3)) ] || fail "ext4 without a journal: $n fsyncs, journaled: $j"
}

@test "a waiter's owner document is fsynced before it waits: once served, only locks/ is synced" {
	ext4_mount journaled
	local m=$BATS_TEST_TMPDIR/journaled w
	export WSLOCK_DIR=$m/reg
	mkdir -p "$m/ws"
	hold "$m/ws"
	# (LeakSanitizer refuses to run under ptrace: leak checks off)
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
		strace -f -qq -e trace=fsync,fdatasync,poll -o "$m.trace" \
		"$WSLOCK" run -q "$m/ws" -- true </dev/null 2>"$BATS_TEST_TMPDIR/waiter.err" 3>&- &
	w=$!
	track_pid "$w"
	# It queues, then stages its lock before it sleeps.
	wait_for "compgen -G '$WSLOCK_DIR/staging/acq.*/owner.json' >/dev/null || ! is_running $w" 20 ||
		fail "the waiter never staged its lock"
	compgen -G "$WSLOCK_DIR/staging/acq.*/owner.json" >/dev/null ||
		fail "the waiter ended before it staged: $(cat "$BATS_TEST_TMPDIR/waiter.err")"
	compgen -G "$WSLOCK_DIR/queue/*" >/dev/null || fail "a staged waiter that is not queued"
	# reclaim leaves a waiter's staged lock alone.
	wsl reclaim --yes
	compgen -G "$WSLOCK_DIR/staging/acq.*/owner.json" >/dev/null ||
		fail "reclaim removed a waiter's staged lock"
	unhold
	wait_exit "$w" 30 || fail "the waiter did not finish"
	[ "$WAIT_STATUS" -eq 0 ] || fail "waiter: $WAIT_STATUS $(cat "$BATS_TEST_TMPDIR/waiter.err")"
	# Before its first sleep (poll): owner.json; after it: locks/ alone (a
	# release makes no fsync). Two in all, as an uncontended acquire.
	local before after
	before=$(awk '/poll\(/ { exit } /fsync|fdatasync/ { n++ } END { print n + 0 }' "$m.trace")
	after=$(awk '/poll\(/ { p = 1 } p && /fsync|fdatasync/ { n++ } END { print n + 0 }' "$m.trace")
	[ "$before" -eq 1 ] && [ "$after" -eq 1 ] ||
		fail "fsyncs before the wait: $before, after it: $after; $(cat "$m.trace")"
	[ -z "$(ls "$WSLOCK_DIR/staging")" ] || fail "staging left: $(ls "$WSLOCK_DIR/staging")"
}
