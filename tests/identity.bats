#!/usr/bin/env bats
# Identity and liveness across pid namespaces, machines and schema versions
# (DESIGN §3, §4): a live holder in another pid namespace is never judged
# dead, a holder's kernel lock is seen across namespaces, a version 1
# document is kept and recovered by its exact bytes, another machine with
# the same host name is unknown.

load helpers

# needs_pidns: skip, saying why, when new pid namespaces cannot be made here
# (root without CAP_SYS_ADMIN in an unprivileged container).
needs_pidns() {
	unshare -fp --mount-proc true 2>/dev/null ||
		skip "cannot create a pid namespace here (unshare -fp --mount-proc: no CAP_SYS_ADMIN)"
}

# ns_acquire WS: in a new pid namespace, a sleeper acquires WS with
# acquire --pid. Sets NS_PID (unshare, outside), NS_DIR (owner.json there).
# The namespace ends (and its sleeper with it) when NS_DIR/GO appears.
ns_acquire() {
	NS_DIR=$BATS_TEST_TMPDIR/ns.$RANDOM
	mkdir -p "$NS_DIR"
	unshare -fp --mount-proc --kill-child sh -c '
		sleep 300 </dev/null >/dev/null 2>&1 &
		"$1" acquire -q --pid $! "$2" >"$3/owner.json" 2>"$3/err" || exit 1
		touch "$3/READY"
		while [ ! -e "$3/GO" ]; do sleep 0.05; done' sh "$WSLOCK" "$1" "$NS_DIR" \
		</dev/null >/dev/null 2>&1 3>&- &
	NS_PID=$!
	track_pid "$NS_PID"
	wait_for "[ -e '$NS_DIR/READY' ] || ! is_running $NS_PID" 20
	[ -e "$NS_DIR/READY" ] || fail "acquire in a pid namespace failed: $(cat "$NS_DIR/err")"
}

ns_end() {
	touch "$NS_DIR/GO"
	wait_exit "$NS_PID" 20 || fail "namespace $NS_PID did not end"
}

# in_pidns CMD...: CMD in a new pid namespace with its own /proc.
in_pidns() {
	timeout -k 5 30 unshare -fp --mount-proc --kill-child "$@"
}

# refuses_takeover WS: with WS's owner of unknown liveness, --reclaim-dead,
# reclaim --yes and recover without --force all refuse and change nothing.
refuses_takeover() {
	local ws=$1 before f=$BATS_TEST_TMPDIR/expected.json
	before=$(registry_snapshot)
	run --separate-stderr wsl run -n --reclaim-dead "$ws" -- echo RAN
	[ "$status" -ne 0 ] || fail "run --reclaim-dead ran: $output"
	[[ $output != *RAN* ]] || fail "the command ran: $output"
	run -0 --separate-stderr wsl reclaim --yes
	jq_ok '.reclaimed == [] and (.skipped | length) == 1'
	wsl inspect --owner "$ws" >"$f"
	run -69 --separate-stderr wsl recover --expected-owner "$f" "$ws"
	assert_json_error WSLOCK_LIVENESS_UNKNOWN
	assert_same_snapshot "$before" "$(registry_snapshot)"
}

@test "a live acquire --pid holder in another pid namespace is unknown outside, never dead, and is not taken over" {
	needs_pidns
	mkws a
	ns_acquire "$(W a)"
	jq_ok ".pid_namespace != \"$(readlink /proc/self/ns/pid)\" and .pid_namespace != null" \
		"$(cat "$NS_DIR/owner.json")"
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "unknown"' "$INSPECT"
	jq_ok '.liveness_reason | test("pid namespace")' "$INSPECT"
	refuses_takeover "$(W a)"
	ns_end
}

@test "a holder in the initial namespace is unknown to a prober in another pid namespace, alive or dead" {
	needs_pidns
	mkws a b
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	dead_acquired "$(W b)"
	run -0 in_pidns "$WSLOCK" inspect "$(W a)"
	jq_ok '.liveness == "unknown" and (.liveness_reason | test("pid namespace"))'
	run -0 in_pidns "$WSLOCK" inspect "$(W b)"
	jq_ok '.liveness == "unknown"'
	# Outside, in the holder's own namespace, the pid is checked.
	inspect_json "$(W b)"
	jq_ok '.liveness == "dead"' "$INSPECT"
	before=$(registry_snapshot)
	run in_pidns "$WSLOCK" run -n --reclaim-dead "$(W b)" -- echo RAN
	[ "$status" -ne 0 ] && [[ $output != *RAN* ]] || fail "reclaimed from another namespace: $output"
	run -0 in_pidns "$WSLOCK" reclaim --yes
	jq_ok '.reclaimed == []'
	assert_same_snapshot "$before" "$(registry_snapshot)"
}

@test "a container entrypoint that is pid 1: acquire --pid \$\$ is refused (64), run and acquire --pid of a child work, as the README says" {
	needs_pidns
	mkws a
	run -0 timeout -k 5 60 unshare -fp --mount-proc sh -c '
		"$1" acquire --pid $$ "$2" >/dev/null 2>"$3/err1"; echo "self=$?"
		"$1" run -n "$2" -- true; echo "run=$?"
		sleep 300 </dev/null >/dev/null 2>&1 &
		o=$("$1" acquire --pid $! "$2") || echo "child-acquire failed"
		t=$(printf "%s" "$o" | jq -r .token)
		"$1" release --token "$t" "$2" >/dev/null; echo "release=$?"
		kill $!' sh "$WSLOCK" "$(W a)" "$BATS_TEST_TMPDIR"
	[[ $output == *"self=64"*"run=0"*"release=0"* ]] || fail "output: $output"
	[[ $output != *"child-acquire failed"* ]] || fail "output: $output"
	grep -q "descends from pid 1" "$BATS_TEST_TMPDIR/err1" || fail "err: $(cat "$BATS_TEST_TMPDIR/err1")"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
	tr '\n' ' ' <"$BATS_TEST_DIRNAME/../README.md" | tr -s ' ' |
		grep -q 'acquire --pid \$\$` from an entrypoint that is pid 1 is refused' ||
		fail "README Containers and CI runners does not say so"
}

@test "a run holder inside a pid namespace is live outside (its kernel lock), and excludes" {
	needs_pidns
	mkws a
	local d=$BATS_TEST_TMPDIR/nsrun
	mkdir -p "$d"
	unshare -fp --mount-proc --kill-child "$WSLOCK" run "$(W a)" -- sh -c '
		touch "$1/READY"; while [ ! -e "$1/GO" ]; do sleep 0.05; done' sh "$d" \
		</dev/null >/dev/null 2>"$d/err" 3>&- &
	local p=$!
	track_pid "$p"
	wait_for "[ -e '$d/READY' ] || ! is_running $p" 20
	[ -e "$d/READY" ] || fail "run in a pid namespace failed: $(cat "$d/err")"
	inspect_json "$(W a)"
	jq_ok '.liveness == "live" and (.liveness_reason | test("kernel lock"))' "$INSPECT"
	run -75 --separate-stderr wsl run -n --reclaim-dead "$(W a)" -- echo RAN
	[[ $output != *RAN* ]] || fail "ran beside the holder"
	touch "$d/GO"
	wait_exit "$p" 20
	[ "$WAIT_STATUS" -eq 0 ] || fail "the namespaced run exited $WAIT_STATUS: $(cat "$d/err")"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "a run holder in a killed container (its pid namespace SIGKILLed) stays unknown outside: recover needs --force --reason" {
	needs_pidns
	mkws a
	local d=$BATS_TEST_TMPDIR/nskill f=$BATS_TEST_TMPDIR/expected.json
	mkdir -p "$d"
	unshare -fp --mount-proc --kill-child "$WSLOCK" run "$(W a)" -- sh -c '
		touch "$1/READY"; exec sleep 300' sh "$d" \
		</dev/null >/dev/null 2>"$d/err" 3>&- &
	local p=$!
	track_pid "$p"
	wait_for "[ -e '$d/READY' ] || ! is_running $p" 20
	[ -e "$d/READY" ] || fail "run in a pid namespace failed: $(cat "$d/err")"
	inspect_json "$(W a)"
	jq_ok '.liveness == "live"' "$INSPECT"
	# The container is killed: unshare's SIGKILL reaches its init (the
	# run), and the kernel kills everything else in the namespace.
	kill -KILL "$p"
	wait_exit "$p" 20 || fail "the namespace did not end"
	wait_for "! wsl inspect '$(W a)' | jq -e '.liveness == \"live\"' >/dev/null" 20 ||
		fail "still live after the namespace was killed"
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "unknown" and (.liveness_reason | test("pid namespace"))' "$INSPECT"
	refuses_takeover "$(W a)"
	wsl inspect --owner "$(W a)" >"$f"
	run -0 --separate-stderr wsl recover --force --reason "container killed" --expected-owner "$f" "$(W a)"
	jq_ok '.liveness == "unknown" and .prior_owner.pid_namespace != null'
	jq -e 'select(.forced and .force_reason == "container killed" and .liveness == "unknown")' \
		"$WSLOCK_DIR/journal.jsonl" >/dev/null || fail "not journaled as forced: $(cat "$WSLOCK_DIR/journal.jsonl")"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
	run -0 --separate-stderr wsl run -n "$(W a)" -- echo FREE
	[ "$output" = FREE ]
}

@test "a dead acquire --pid holder of another pid namespace stays unknown: recover needs --force --reason" {
	needs_pidns
	mkws a
	ns_acquire "$(W a)"
	ns_end
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "unknown"' "$INSPECT"
	refuses_takeover "$(W a)"
	f=$BATS_TEST_TMPDIR/expected.json
	wsl inspect --owner "$(W a)" >"$f"
	run -0 --separate-stderr wsl recover --force --reason "namespace gone" --expected-owner "$f" "$(W a)"
	jq_ok '.action == "recovered" or .action == "released"'
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

# v1_doc JSON: the same holder as a 0.1 (schema_version 1) document.
v1_doc() {
	jq -c '.schema_version = 1 | del(.workspace_fs, .workspace_fs_path, .machine_id, .pid_namespace)' <<<"$1"
}

@test "a pid namespace that kept the parent's /proc records no start time: fail closed, never another process's" {
	needs_pidns
	mkws a
	mkws b
	T=$BATS_TEST_TMPDIR
	# unshare -p --fork without --mount-proc: /proc still shows the parent
	# namespace, where /proc/2 is another process than this namespace's pid 2.
	# LeakSanitizer (make check SANITIZE=address) reads /proc/ITS-PID/task at
	# exit and stops with a fatal error in such a namespace: leak checks off
	# for these commands only (ASan itself stays on; a plain build ignores it).
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
	timeout 60 unshare -p --fork sh -c '
		sleep 300 </dev/null >/dev/null 2>&1 &
		s=$!
		"$1" acquire -q --pid $s "$2" >"$3/owner.json" || exit 1
		"$1" inspect "$2" >"$3/inspect.json" || exit 2
		kill $s; wait $s
		"$1" inspect "$2" >"$3/after.json" || exit 3
		"$1" acquire --pid 4000000 "$4" >/dev/null 2>"$3/nopid.err"; echo $? >"$3/nopid.rc"' \
		sh "$WSLOCK" "$(W a)" "$T" "$(W b)" </dev/null 3>&-
	jq_ok '.identity_policy == "pid-only-fail-closed" and .pid_start_ticks == null' "$(cat "$T/owner.json")"
	jq_ok '.liveness == "live"' "$(cat "$T/inspect.json")"
	# Gone in its own namespace (kill(2) asks there): dead, from in there.
	jq_ok '.liveness == "dead"' "$(cat "$T/after.json")"
	# A pid that does not exist is still refused without /proc.
	[ "$(cat "$T/nopid.rc")" = 64 ] || fail "exit $(cat "$T/nopid.rc"), want 64: $(head -c 600 "$T/nopid.err")"
}

@test "a version 1 document planted by hand is honoured, shown and recovered by its exact bytes" {
	mkws a b
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	v1_doc "$OWNER" | tr -d '\n' | put_owner "$(W a)"
	local bytes
	bytes=$(cat "$(lock_dir_of "$(W a)")/owner.json")
	jq_ok "keys == $OWNER_KEYS_V1" "$bytes"
	# Live: honoured.
	run -75 --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "live"' "$INSPECT"
	run -0 --separate-stderr wsl inspect --owner "$(W a)"
	[ "$output" = "$bytes" ] || fail "inspect --owner is not the document's bytes:
$output
$bytes"
	# Dead: recovered by exactly those bytes.
	kill -KILL "$SLEEPER_PID"
	wait_exit "$SLEEPER_PID" 10
	inspect_json "$(W a)"
	jq_ok '.liveness == "dead"' "$INSPECT"
	printf '%s' "$bytes" >"$BATS_TEST_TMPDIR/expected.json"
	# The same document as version 2 is not the one held.
	jq -c '.schema_version = 2 | .workspace_fs = "dev:0:1" | .workspace_fs_path = "/x"
		| .machine_id = null | .pid_namespace = null' <<<"$bytes" >"$BATS_TEST_TMPDIR/v2.json"
	run -65 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/v2.json" "$(W a)"
	assert_json_error WSLOCK_OWNER_MISMATCH
	run -0 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/expected.json" "$(W a)"
	jq_ok ".prior_owner == $bytes"
	jq_ok '.owner.schema_version == 2 and .owner.recovery_of == .prior_owner.token'
	tail -n 1 "$WSLOCK_DIR/journal.jsonl" | jq -e --argjson b "$bytes" '.prior_owner == $b' >/dev/null ||
		fail "journal does not hold the version 1 document"
	# reclaim takes a dead version 1 owner too.
	dead_acquired "$(W b)"
	v1_doc "$DEAD_OWNER" | tr -d '\n' | put_owner "$(W b)"
	run -0 --separate-stderr wsl reclaim --yes "$(W b)"
	jq_ok '(.reclaimed | length) == 1'
}

@test "another machine with the same host name (machine_id differs, boot id differs) is unknown, not dead" {
	[ -r /etc/machine-id ] && [ -s /etc/machine-id ] ||
		skip "this machine has no /etc/machine-id, so no machine id can differ from it"
	mkws a b
	dead_acquired "$(W a)"
	edit_owner "$(W a)" '.machine_id = "0123456789abcdef0123456789abcdef" | .boot_id = "4a760414-a5f5-4c44-b75c-0e8b7c280e9a"'
	inspect_json "$(W a)"
	jq_ok '.liveness == "unknown" and (.liveness_reason | test("machine id"))' "$INSPECT"
	refuses_takeover "$(W a)"
	# The same machine id and another boot: rebooted, dead.
	dead_acquired "$(W b)"
	edit_owner "$(W b)" '.boot_id = "4a760414-a5f5-4c44-b75c-0e8b7c280e9a"'
	inspect_json "$(W b)"
	jq_ok '.liveness == "dead" and (.liveness_reason | test("rebooted"))' "$INSPECT"
	# No machine id recorded: the host name and boot id decide, as in 0.1.
	edit_owner "$(W b)" '.machine_id = null'
	inspect_json "$(W b)"
	jq_ok '.liveness == "dead"' "$INSPECT"
}

@test "a document without pid_namespace counts as written in the initial namespace" {
	[ "$(readlink /proc/self/ns/pid)" = "pid:[4026531836]" ] ||
		skip "these tests do not run in the initial pid namespace"
	mkws a
	dead_acquired "$(W a)"
	edit_owner "$(W a)" '.pid_namespace = null'
	inspect_json "$(W a)"
	jq_ok '.liveness == "dead"' "$INSPECT"
	edit_owner "$(W a)" '.pid_namespace = "pid:[4026532999]"'
	inspect_json "$(W a)"
	jq_ok '.liveness == "unknown"' "$INSPECT"
}

@test "workspace identity: the fs identity and path inside agree with findmnt and statfs" {
	command -v findmnt >/dev/null || skip "findmnt (util-linux) is not installed"
	mkws a/sub
	local ws fs root target rest
	ws=$(canon "$(W a/sub)")
	run -0 --separate-stderr wsl acquire --pid $$ "$ws"
	root=$(findmnt -n -o FSROOT -T "$ws")
	target=$(findmnt -n -o TARGET -T "$ws")
	rest=${ws#"$target"}
	[ "$target" = / ] && rest=$ws
	want=$root$rest
	[ "$root" = / ] && want=${rest:-/}
	jq_ok ".workspace_fs_path == \"$want\""
	fs=$(stat -f -c %i "$ws")
	if [ "$fs" != 0 ] && [ "$fs" != 0000000000000000 ]; then
		jq_ok ".workspace_fs == \"fsid:$(printf %16s "$fs" | tr " " 0)\""
	else
		jq_ok ".workspace_fs == \"dev:$(stat -c '%Hd:%Ld' "$ws")\""
	fi
}

# needs_mounts: skip, saying why, when mount namespaces and bind mounts
# cannot be made here.
needs_mounts() {
	unshare -m sh -c 'mount -t tmpfs none /mnt' 2>/dev/null ||
		skip "cannot create a mount namespace and mount here (no CAP_SYS_ADMIN)"
}

# in_mountns SCRIPT ARGS...: SCRIPT (sh) in a new mount namespace, mounts
# private, so nothing it mounts is seen outside or outlives it.
in_mountns() {
	timeout -k 5 30 unshare -m --propagation private sh -c "$@"
}

@test "owner documents through a bind mount, another mount namespace and the real path carry one identity" {
	needs_mounts
	mkws real/sub alias
	local r a
	r=$(canon "$(W real)")
	a=$(canon "$(W alias)")
	run -0 in_mountns '
		mount --bind "$1" "$2" || exit 1
		"$3" acquire --pid $$ "$2/sub"
		' sh "$r" "$a" "$WSLOCK"
	local via_alias=$output
	jq_ok ".workspace_root == \"$a/sub\"" "$via_alias"
	# The namespace is gone: the real path, from here.
	rm -rf "$WSLOCK_DIR"
	run -0 --separate-stderr wsl acquire --pid $$ "$r/sub"
	local via_real=$output
	jq_ok ".workspace_root == \"$r/sub\"" "$via_real"
	[ "$(jq -c '[.workspace_fs, .workspace_fs_path]' <<<"$via_alias")" = \
	  "$(jq -c '[.workspace_fs, .workspace_fs_path]' <<<"$via_real")" ] ||
		fail "identity differs: alias $via_alias, real $via_real"
	# A container-like view: the directory mounted at another place in a
	# new mount namespace, seen by a process with another root.
	run -0 in_mountns '
		mkdir -p /tmp/wslock-ct.$$ && mount -t tmpfs none /tmp/wslock-ct.$$ &&
		mkdir /tmp/wslock-ct.$$/work && mount --bind "$1" /tmp/wslock-ct.$$/work &&
		WSLOCK_DIR=/tmp/wslock-ct.$$/reg "$2" acquire --pid $$ /tmp/wslock-ct.$$/work/sub
		' sh "$r" "$WSLOCK"
	[ "$(jq -c '[.workspace_fs, .workspace_fs_path]' <<<"$output")" = \
	  "$(jq -c '[.workspace_fs, .workspace_fs_path]' <<<"$via_real")" ] ||
		fail "identity differs in another mount namespace: $output"
}

@test "a bind-mount alias and its subdirectory conflict with the real path, both ways" {
	needs_mounts
	mkws real/sub alias
	run -0 in_mountns '
		W=$1 r=$2 a=$3 d=$4
		mount --bind "$r" "$a" || exit 1
		hold() {
			rm -f "$d/ready" "$d/go"
			"$W" run "$1" -- sh -c "touch $d/ready; while [ ! -e $d/go ]; do sleep 0.05; done" &
			i=0; while [ ! -e "$d/ready" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
			[ -e "$d/ready" ] || { echo "holder of $1 did not start"; exit 1; }
		}
		try() { "$W" run -n "$1" -- echo TWICE 2>/dev/null; echo "$2=$?"; }
		hold "$r"
		try "$a" alias; try "$a/sub" alias_sub; try "$r/sub" real_sub
		touch "$d/go"; wait
		hold "$a/sub"
		try "$r" real; try "$r/sub" real_sub2; try "$a" alias2
		touch "$d/go"; wait
		try "$a/sub" after
		' sh "$WSLOCK" "$(canon "$(W real)")" "$(canon "$(W alias)")" "$BATS_TEST_TMPDIR"
	for k in alias alias_sub real_sub real real_sub2 alias2; do
		[[ $output == *"$k=75"* ]] || fail "$k did not conflict: $output"
	done
	[[ $output == *"after=0"* ]] || fail "free again afterwards: $output"
	[ "$(grep -c TWICE <<<"$output")" -eq 1 ] || fail "ran beside a holder: $output"
}

# The container-like side of the contention test: new mount, pid and UTS
# namespaces, the registry and the workspace bind-mounted at other paths.
container_loop() {
	local reg=$1 ws=$2 n=$3 marks=$4
	timeout -k 5 300 unshare -m -p -u --fork --mount-proc --propagation private sh -c '
		hostname wslock-ct || exit 1
		mount --bind "$1" "$5/ct-reg" && mount --bind "$2" "$5/ct-ws" || exit 1
		i=0
		while [ $i -lt "$3" ]; do
			WSLOCK_DIR=$5/ct-reg "$6" run "$5/ct-ws" -- sh -c "$7" sh "$5/ct-ws" "$4" ct || exit 1
			i=$((i + 1))
		done' sh "$reg" "$ws" "$n" "$marks" "$BATS_TEST_TMPDIR" "$WSLOCK" "$DETECT"
}

# The marker detector: one holder at a time, or an overlap is recorded.
DETECT='mkdir "$1/.held" 2>/dev/null || { echo "$3 overlap" >>"$2"; exit 0; }
	echo "$3" >>"$2.order"; sleep 0.01; rmdir "$1/.held"'

@test "a container-like namespace sharing the registry by bind mount contends with the host: zero overlaps" {
	needs_pidns
	needs_mounts
	mkws shared
	mkdir -p "$BATS_TEST_TMPDIR/ct-reg" "$BATS_TEST_TMPDIR/ct-ws" "$WSLOCK_DIR"
	chmod 0700 "$WSLOCK_DIR"
	local ws marks=$BATS_TEST_TMPDIR/marks n=25
	ws=$(canon "$(W shared)")
	: >"$marks"
	container_loop "$WSLOCK_DIR" "$ws" "$n" "$marks" &
	local ct=$!
	track_pid "$ct"
	for ((i = 0; i < n; i++)); do
		wsl run "$ws" -- sh -c "$DETECT" sh "$ws" "$marks" host || fail "host run $i failed"
	done
	wait_exit "$ct" 300
	[ "$WAIT_STATUS" -eq 0 ] || fail "the container loop failed ($WAIT_STATUS)"
	[ ! -s "$marks" ] || fail "overlaps: $(cat "$marks")"
	[ "$(grep -c . "$marks.order")" -eq $((2 * n)) ] || fail "not every run held: $(wc -l <"$marks.order")"
	grep -q ct "$marks.order" && grep -q host "$marks.order" || fail "one side never ran"
}

@test "a registry format newer than this binary knows is refused, and nothing changes" {
	mkws a
	run -0 --separate-stderr wsl run "$(W a)" -- true
	[ "$(cat "$WSLOCK_DIR/tmp")" = "wslock registry format 3" ] || fail "stamp: $(cat "$WSLOCK_DIR/tmp")"
	[ "$(stat -c %a "$WSLOCK_DIR/tmp")" = 600 ] || fail "stamp mode $(stat -c %a "$WSLOCK_DIR/tmp")"
	[ -d "$WSLOCK_DIR/staging" ] && [ -d "$WSLOCK_DIR/ids" ] && [ -d "$WSLOCK_DIR/idnest" ] ||
		fail "no staging/, ids/ or idnest/"
	printf 'wslock registry format 4\n' >"$WSLOCK_DIR/tmp"
	before=$(registry_snapshot)
	run -77 --separate-stderr wsl run "$(W a)" -- echo RAN
	[[ $output != *RAN* ]] || fail "ran on a newer registry"
	[[ $stderr == *"format 4"* ]] || fail "does not say why: $stderr"
	run -77 --separate-stderr wsl inspect "$(W a)"
	assert_same_snapshot "$before" "$(registry_snapshot)"
}

# in_alias_ns SCRIPT: SCRIPT (sh) in a new mount namespace where $a is a
# bind mount of $r (both canonical), with W the binary and $s a sleeper
# to name as an acquire holder.
in_alias_ns() {
	mkws real alias
	in_mountns '
		W=$1 r=$2 a=$3 d=$4
		mount --bind "$r" "$a" || exit 1
		sleep 300 </dev/null >/dev/null 2>&1 &
		s=$!
		'"$1"'
		rc=$?
		kill $s
		exit $rc' sh "$WSLOCK" "$(canon "$(W real)")" "$(canon "$(W alias)")" "$BATS_TEST_TMPDIR"
}

@test "release --token through a bind-mount alias frees the lock taken through the real path, and the reverse" {
	needs_mounts
	run -0 in_alias_ns '
		t=$("$W" acquire -q --pid $s "$r" | jq -r .token) || exit 1
		"$W" release --token "$t" "$a" >"$d/rel1.json"; echo "alias=$?"
		echo "after1=$("$W" inspect "$r" | jq -r .state)"
		t=$("$W" acquire -q --pid $s "$a" | jq -r .token) || exit 1
		"$W" release --token "$t" "$r" >"$d/rel2.json"; echo "real=$?"
		echo "after2=$("$W" inspect "$a" | jq -r .state)"
		# A run nested under the holder keeps it: release through the
		# alias waits for it (-n: 75), as through the real path.
		t=$("$W" acquire -q --pid $$ "$r" | jq -r .token) || exit 1
		"$W" run "$r" -- sh -c "touch $d/nested; while [ ! -e $d/go ]; do sleep 0.05; done" &
		n=$!
		i=0; while [ ! -e "$d/nested" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
		"$W" release -n --token "$t" "$a" >/dev/null 2>&1; echo "nested=$?"
		touch "$d/go"; wait $n
		"$W" release --token "$t" "$a" >/dev/null; echo "last=$?"
		echo "after3=$("$W" inspect "$r" | jq -r .state)"'
	for k in alias=0 after1=free real=0 after2=free nested=75 last=0 after3=free; do
		[[ $output == *"$k"* ]] || fail "expected $k: $output"
	done
	jq_ok ".action == \"released\" and .workspace_root == \"$(canon "$(W real)")\"" \
		"$(cat "$BATS_TEST_TMPDIR/rel1.json")"
	jq_ok ".action == \"released\" and .workspace_root == \"$(canon "$(W alias)")\"" \
		"$(cat "$BATS_TEST_TMPDIR/rel2.json")"
}

@test "recover through a bind-mount alias with the exact owner takes over the lock taken through the real path, and the reverse" {
	needs_mounts
	run -0 in_alias_ns '
		for via in r a; do
			if [ $via = r ]; then take=$r give=$a; else take=$a give=$r; fi
			sh -c "exec sleep 300" </dev/null >/dev/null 2>&1 &
			p=$!
			"$W" acquire -q --pid $p "$take" >"$d/owner.$via.json" || exit 1
			kill -KILL $p; wait $p 2>/dev/null
			"$W" inspect --owner "$give" >"$d/expected.$via.json"
			"$W" recover --expected-owner "$d/expected.$via.json" "$give" >"$d/rec.$via.json"
			echo "recover_$via=$?"
			echo "after_$via=$("$W" inspect "$take" | jq -r .state)"
			# With a command: it runs under the recovered lock.
			sh -c "exec sleep 300" </dev/null >/dev/null 2>&1 &
			p=$!
			"$W" acquire -q --pid $p "$take" >"$d/owner2.$via.json" || exit 1
			kill -KILL $p; wait $p 2>/dev/null
			"$W" recover --expected-owner "$d/owner2.$via.json" "$give" -- \
				sh -c "\"$W\" inspect \"$take\" | jq -r .owner.recovery_of >$d/rof.$via"
			echo "recover_cmd_$via=$?"
			echo "after_cmd_$via=$("$W" inspect "$give" | jq -r .state)"
		done'
	for k in recover_r=0 after_r=free recover_a=0 after_a=free recover_cmd_r=0 after_cmd_r=free \
		recover_cmd_a=0 after_cmd_a=free; do
		[[ $output == *"$k"* ]] || fail "expected $k: $output"
	done
	local via
	for via in r a; do
		jq_ok ".action == \"recovered\" and .prior_owner == $(cat "$BATS_TEST_TMPDIR/owner.$via.json")" \
			"$(cat "$BATS_TEST_TMPDIR/rec.$via.json")"
		[ "$(cat "$BATS_TEST_TMPDIR/rof.$via")" = "$(jq -r .token "$BATS_TEST_TMPDIR/owner2.$via.json")" ] ||
			fail "not the recovered lock: $(cat "$BATS_TEST_TMPDIR/rof.$via")"
	done
}

@test "a corrupt lock taken through the real path is shown, cleared and reclaimed through a bind-mount alias" {
	needs_mounts
	run -0 in_alias_ns '
		"$W" acquire -q --pid $s "$r" >/dev/null || exit 1
		f=$("$W" inspect "$r" | jq -r .lock_path)
		printf "{\"schema_version\":2,\"kind\":\"wslock-owner\",\"workspace_root\":\"%s\"" "$r" >"$f"
		echo "state=$("$W" inspect "$a" | jq -r .state)"
		cp "$f" "$d/corrupt.json"
		"$W" recover --force --reason "truncated" --expected-owner "$d/corrupt.json" "$a" >"$d/rec.json"
		echo "recover=$?"
		echo "after=$("$W" inspect "$r" | jq -r .state)"
		# reclaim naming the alias: a dead owner taken through the real path.
		sh -c "exec sleep 300" </dev/null >/dev/null 2>&1 &
		p=$!
		"$W" acquire -q --pid $p "$r" >/dev/null || exit 1
		kill -KILL $p; wait $p 2>/dev/null
		"$W" reclaim --yes "$a" >"$d/reclaim.json"; echo "reclaim=$?"
		echo "after_reclaim=$("$W" inspect "$r" | jq -r .state)"'
	for k in state=corrupt recover=0 after=free reclaim=0 after_reclaim=free; do
		[[ $output == *"$k"* ]] || fail "expected $k: $output"
	done
	jq_ok '.action == "cleared-corrupt"' "$(cat "$BATS_TEST_TMPDIR/rec.json")"
	jq_ok "(.reclaimed | length) == 1 and .reclaimed[0].workspace_root == \"$(canon "$(W real)")\"" \
		"$(cat "$BATS_TEST_TMPDIR/reclaim.json")"
}

@test "a registry inside the workspace reached through a bind mount is refused (77), made or not, and so is a workspace inside it" {
	needs_mounts
	mkws sws/inner other bm4
	run -0 in_mountns '
		W=$1 r=$2 a=$3 o=$4
		mount --bind "$r/inner" "$a" || exit 1
		# Not made yet: refused before anything is created.
		WSLOCK_DIR=$a/reg "$W" run -n "$r" -- echo RAN; echo "fresh=$?"
		[ -e "$r/inner/reg" ] && echo "CREATED"
		# Made by a command on another workspace, then used for this one.
		WSLOCK_DIR=$a/reg "$W" run -n "$o" -- true; echo "other=$?"
		WSLOCK_DIR=$a/reg "$W" run -n "$r" -- echo RAN; echo "run=$?"
		WSLOCK_DIR=$a/reg "$W" run -n "$r/inner" -- echo RAN; echo "inner=$?"
		WSLOCK_DIR=$a/reg "$W" acquire --pid $$ "$r" >/dev/null; echo "acquire=$?"
		WSLOCK_DIR=$a/reg "$W" inspect "$r" >/dev/null; echo "inspect=$?"
		WSLOCK_DIR=$a/reg "$W" run -n "$r" -- echo RAN 2>&1 | grep -c "registry $a/reg lies inside workspace $r"
		# The registry by its real path, the workspace inside it through the alias.
		WSLOCK_DIR=$r/inner/reg "$W" run -n "$a/reg/locks" -- echo RAN; echo "within=$?"
		WSLOCK_DIR=$r/inner/reg "$W" run -n "$a/reg/locks" -- echo RAN 2>&1 | grep -c "workspace $a/reg/locks lies inside the registry"
		true' sh "$WSLOCK" "$(canon "$(W sws)")" "$(canon "$(W bm4)")" "$(canon "$(W other)")"
	for k in fresh=77 other=0 run=77 inner=77 acquire=77 inspect=77 within=77; do
		[[ $output == *"$k"$'\n'* || $output == *"$k" ]] || fail "expected $k: $output"
	done
	[[ $output != *RAN* ]] || fail "ran with the registry inside the workspace: $output"
	[[ $output != *CREATED* ]] || fail "a refused command created the registry: $output"
	[ "$(grep -cx 1 <<<"$output")" -eq 2 ] || fail "the messages do not say why: $output"
}

@test "/ reached through a bind mount is refused as a workspace like / (77)" {
	needs_mounts
	mkws bm2
	run -0 in_mountns '
		W=$1 a=$2
		mount --bind / "$a" || exit 1
		"$W" run -n "$a" -- echo RAN; echo "run=$?"
		"$W" acquire --pid $$ "$a" >/dev/null; echo "acquire=$?"
		"$W" inspect "$a" >/dev/null; echo "inspect=$?"
		"$W" run -n "$a" -- echo RAN 2>&1 | grep -c "refusing $a as a workspace: it is /"
		true' sh "$WSLOCK" "$(canon "$(W bm2)")"
	for k in run=77 acquire=77 inspect=77; do
		[[ $output == *"$k"* ]] || fail "expected $k: $output"
	done
	[[ $output != *RAN* ]] || fail "ran with / as the workspace: $output"
	[[ $output == *$'\n'1* ]] || fail "the message does not say why: $output"
}

@test "a run holder started under another host name (unshare -u), killed: unknown here, the next acquire is 69, recover --force --reason clears it" {
	unshare -u true 2>/dev/null || skip "cannot create a UTS namespace here (no CAP_SYS_ADMIN)"
	mkws a
	local d=$BATS_TEST_TMPDIR/uts f=$BATS_TEST_TMPDIR/expected.json here
	here=$(hostname)
	mkdir -p "$d"
	# unshare -u and sh's exec keep one pid: $! is the wslock run.
	unshare -u sh -c 'hostname wslock-other-host || exit 90
		exec "$1" run "$2" -- sh -c "echo \$\$ >\"\$1/child\"; touch \"\$1/READY\"; exec sleep 300" sh "$3"' \
		sh "$WSLOCK" "$(W a)" "$d" </dev/null >/dev/null 2>"$d/err" 3>&- &
	local p=$!
	track_pid "$p"
	wait_for "[ -e '$d/READY' ] || ! is_running $p" 20
	[ -e "$d/READY" ] || fail "run under another host name failed: $(cat "$d/err")"
	track_pid "$(cat "$d/child")"
	[ "$(hostname)" = "$here" ] || fail "the host name changed outside the namespace"
	# While it runs, its kernel lock on live makes it live from here too.
	inspect_json "$(W a)"
	jq_ok '.liveness == "live" and .owner.host == "wslock-other-host"' "$INSPECT"
	run -75 --separate-stderr wsl run -n "$(W a)" -- true
	kill -KILL "$p" "$(cat "$d/child")"
	wait_exit "$p" 20 || fail "the holder did not end"
	wait_for "! wsl inspect '$(W a)' | jq -e '.liveness == \"live\"' >/dev/null" 20 ||
		fail "still live after the holder was killed"
	# DESIGN section 4, step 3: another host -> unknown, never dead.
	inspect_json "$(W a)"
	jq_ok ".state == \"held\" and .liveness == \"unknown\" and .liveness_reason == \"held on host wslock-other-host, this is $here: pid $p cannot be checked from here\"" "$INSPECT"
	run -69 --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	assert_json_error WSLOCK_LIVENESS_UNKNOWN
	[[ $stderr == *"held on host wslock-other-host, this is $here"* ]] || fail "stderr: $stderr"
	refuses_takeover "$(W a)"
	wsl inspect --owner "$(W a)" >"$f"
	run -0 --separate-stderr wsl recover --force --reason "that job was killed" --expected-owner "$f" "$(W a)"
	jq_ok '.liveness == "unknown" and .prior_owner.host == "wslock-other-host"'
	jq -e 'select(.forced and .force_reason == "that job was killed" and .liveness == "unknown")' \
		"$WSLOCK_DIR/journal.jsonl" >/dev/null || fail "not journaled as forced: $(cat "$WSLOCK_DIR/journal.jsonl")"
	run -0 --separate-stderr wsl run -n "$(W a)" -- echo FREE
	[ "$output" = FREE ]
}
