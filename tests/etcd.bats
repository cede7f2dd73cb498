#!/usr/bin/env bats
# The etcd backend (DESIGN §5b) against a real etcd on loopback: one member
# for the whole file, three members for the failover test.  Same commands,
# documents, JSON shapes and exit codes as the local registry; locks of
# `run` live on a lease, `acquire` and retained locks persist without one.
#
# Every test uses its own workspaces (under $BATS_TEST_TMPDIR), so their
# keys never meet in the shared cluster.  Needs etcd and etcdctl (Debian:
# apt-get install etcd-server etcd-client); skipped without them.

load helpers

CLUSTER=$BATS_TEST_DIRNAME/etcd/cluster.sh

setup_file() {
	etcd_setup_file
}

teardown_file() {
	etcd_teardown_file
	if [ -d "$BATS_FILE_TMPDIR/etcd3" ]; then "$CLUSTER" stop "$BATS_FILE_TMPDIR/etcd3"; fi
	return 0
}

local_setup() {
	etcd_use
}


# lease_of WS: the lease id (decimal, 0: none) of WS's liveness key (the
# owner key itself is never on a lease: owner_lease_of).  Read with grep:
# jq would round the 64-bit id.
lease_of() {
	local n
	n=$(ectl get "/wslock/live$(canon "$1")" -w json | grep -o '"lease":[0-9]*' | cut -d: -f2)
	echo "${n:-0}"
}
owner_lease_of() {
	local n
	n=$(ectl get "/wslock/lock$(canon "$1")" -w json | grep -o '"lease":[0-9]*' | cut -d: -f2)
	echo "${n:-0}"
}

# shape JSON: the structure of a JSON value (every path, values dropped).
shape() {
	jq -c '[paths | map(if type == "number" then 0 else . end)] | unique' <<<"$1"
}

@test "etcd: --backend etcd without endpoints is a usage error" {
	mkws a
	unset WSLOCK_ETCD_ENDPOINTS
	run --separate-stderr wsl acquire --backend etcd "$(W a)"
	[ "$status" -eq 64 ]
	assert_json_error WSLOCK_USAGE
	[[ $stderr == *"--etcd-endpoints or WSLOCK_ETCD_ENDPOINTS"* ]]
}

@test "etcd: acquire, inspect, release print the local backend's JSON shapes and exit codes" {
	mkws a a/sub
	local ws=$(W a) b
	for b in local etcd; do
		run --separate-stderr wsl acquire --backend "$b" --pid $$ "$ws"
		[ "$status" -eq 0 ]
		eval "acq_$b=\$output"
		run --separate-stderr wsl inspect --backend "$b" "$ws/sub"
		[ "$status" -eq 0 ]
		eval "insp_$b=\$output"
		run --separate-stderr wsl inspect --backend "$b" --owner "$ws"
		[ "$status" -eq 0 ]
		eval "own_$b=\$output"
		run --separate-stderr wsl acquire --backend "$b" -n --pid $$ "$ws/sub"
		[ "$status" -eq 75 ]
		assert_json_error WSLOCK_BUSY
		eval "busy_$b=\$output"
		run --separate-stderr wsl release --backend "$b" --token "$(json_get .token "$(eval echo "\$acq_$b")")" "$ws"
		[ "$status" -eq 0 ]
		eval "rel_$b=\$output"
		run --separate-stderr wsl release --backend "$b" --token 0123456789abcdef0123456789abcdef "$ws"
		[ "$status" -eq 66 ]
		assert_json_error WSLOCK_NOT_HELD
	done
	# etcd's acquire adds the fencing token beside the owner document
	jq_ok '.fence | type == "number" and . > 0' "$acq_etcd"
	jq_ok 'has("fence") | not' "$acq_local"
	[ "$(shape "$acq_local")" = "$(shape "$(jq -c 'del(.fence)' <<<"$acq_etcd")")" ]
	[ "$(shape "$insp_local")" = "$(shape "$insp_etcd")" ]
	[ "$(shape "$own_local")" = "$(shape "$own_etcd")" ]
	[ "$(shape "$busy_local")" = "$(shape "$busy_etcd")" ]
	[ "$(shape "$rel_local")" = "$(shape "$rel_etcd")" ]
	jq_ok '.overlapping[0].relation == "ancestor" and .overlapping[0].liveness == "live"' "$insp_etcd"
	jq_ok '.overlapping[0].lock_path | startswith("/wslock/lock/")' "$insp_etcd"
	run wsl inspect "$ws"
	jq_ok '.state == "free"'
}

@test "etcd: the command inherits no descriptor of wslock's (libcurl's sockets are closed) but its nested runs' file" {
	mkws a
	list='for f in /proc/$$/fd/*; do n=${f##*/}; [ "$n" -gt 2 ] && echo "$n $(readlink "$f" | sed "s/:\\[[0-9]*\\]//")"; done; :'
	run -0 --separate-stderr sh -c "$list"
	before=$(printf '%s\n' "$output" | grep -v '/proc/' | sort)
	run -0 --separate-stderr wsl run "$(W a)" -- sh -c "$list"
	[ "$(printf '%s\n' "$output" | grep -c '/memfd:wslock-nested-[0-9a-f]* (deleted)$')" -eq 1 ]
	after=$(printf '%s\n' "$output" | grep -v '/proc/' | grep -v '/memfd:wslock-nested-' | sort)
	[ "$before" = "$after" ] || fail "extra descriptors: $(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after"))"
}

@test "etcd: run gives the child WSLOCK_FENCE, increasing across runs, and its exit status" {
	mkws a
	local f1 f2 f3
	f1=$(wsl run "$(W a)" -- sh -c 'echo "$WSLOCK_FENCE"')
	f2=$(wsl run "$(W a)" -- sh -c 'echo "$WSLOCK_FENCE"')
	run wsl run "$(W a)" -- sh -c 'echo "$WSLOCK_FENCE"; exit 3'
	[ "$status" -eq 3 ]
	f3=$output
	[[ $f1 =~ ^[0-9]+$ && $f2 =~ ^[0-9]+$ && $f3 =~ ^[0-9]+$ ]]
	[ "$f1" -lt "$f2" ] && [ "$f2" -lt "$f3" ]
	run wsl inspect "$(W a)"
	jq_ok '.state == "free"'
	run wsl run "$(W a)" -- sh -c 'kill -TERM $$'
	[ "$status" -eq 143 ]
}

@test "etcd: a run nested in a run of the workspace or an ancestor runs at once; the outer releases only after it" {
	mkws a a/b
	local d=$BATS_TEST_TMPDIR outer
	# the outer's command: a nested run of the same workspace with -n
	# (nested, it is not busy), then one below it left running (the
	# command ends once the nested one's command has started)
	cat >"$d/inner.sh" <<'EOF'
"$1" run -n "$2" -- sh -c 'echo same >>"$0/log"' "$4" || exit 9
"$1" run "$3" -- sh -c 'touch "$0/started"; i=0; while [ ! -e "$0/go" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done; echo sub >>"$0/log"' "$4" &
i=0
while [ ! -e "$4/started" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done
exit 0
EOF
	"$WSLOCK" run "$(W a)" -- sh "$d/inner.sh" "$WSLOCK" "$(W a)" "$(W a/b)" "$d" \
		</dev/null >"$d/outer.out" 2>"$d/outer.err" 3>&- &
	outer=$!
	track_pid "$outer"
	wait_for "[ -e '$d/started' ] || ! is_running $outer" 20 || fail "no nested run: $(cat "$d/outer.err")"
	[ "$(cat "$d/log")" = same ]
	# the outer's command has ended; its lock stays while the nested run runs
	run --separate-stderr wsl run -n "$(W a)" -- true
	[ "$status" -eq 75 ] || fail "the lock was let go under a nested run (exit $status)"
	is_running "$outer"
	touch "$d/go"
	wait_exit "$outer" 20
	[ "$WAIT_STATUS" -eq 0 ] || fail "outer: $WAIT_STATUS $(cat "$d/outer.err")"
	[ "$(tr '\n' ' ' <"$d/log")" = "same sub " ]
	grep -q 'waiting for the wslock runs nested under' "$d/outer.err"
	run wsl inspect "$(W a)"
	jq_ok '.state == "free"'
}

@test "etcd: a run's liveness key is on a lease, its owner key on none; released when it ends" {
	mkws a
	hold --lease-ttl 3 "$(W a)"
	[ "$(lease_of "$(W a)")" != 0 ]
	[ "$(owner_lease_of "$(W a)")" = 0 ]
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "live" and (.liveness_reason | contains("lease"))' "$INSPECT"
	run --separate-stderr wsl run -n "$(W a)" -- true
	[ "$status" -eq 75 ]
	assert_run_error WSLOCK_BUSY
	unhold
	[ "$WAIT_STATUS" -eq 0 ]
	run wsl inspect "$(W a)"
	jq_ok '.state == "free"'
}

@test "etcd: a waiting acquire gets the lock once it is released; a signal ends the wait" {
	mkws a
	local d=$BATS_TEST_TMPDIR p
	hold --lease-ttl 3 "$(W a)"
	"$WSLOCK" acquire --pid $$ -w 60 "$(W a)" >"$d/acq" 2>"$d/acq.err" 3>&- &
	p=$!
	track_pid "$p"
	wait_for "grep -q waiting '$d/acq.err'" 20
	unhold
	wait_exit "$p" 30
	[ "$WAIT_STATUS" -eq 0 ] || fail "acquire: $WAIT_STATUS $(cat "$d/acq.err")"
	"$WSLOCK" acquire --pid $$ -w 60 "$(W a)" >"$d/acq2" 2>"$d/acq2.err" 3>&- &
	p=$!
	track_pid "$p"
	wait_for "grep -q waiting '$d/acq2.err'" 20
	kill -TERM "$p"
	wait_exit "$p" 10
	[ "$WAIT_STATUS" -eq 143 ]
	run wsl release --token "$(jq -r .token "$d/acq")" "$(W a)"
	[ "$status" -eq 0 ]
}

@test "etcd: ancestors and descendants conflict, siblings and prefixes do not" {
	mkws p/q/r p2 p/s
	local p=$(W p) out tok
	out=$(wsl acquire --pid $$ "$p/q") || fail "$out"
	tok=$(json_get .token "$out")
	run --separate-stderr wsl acquire -n --pid $$ "$p"
	[ "$status" -eq 75 ]
	[[ $stderr == *"overlaps its descendant $p/q"* ]]
	run --separate-stderr wsl acquire -n --pid $$ "$p/q/r"
	[ "$status" -eq 75 ]
	[[ $stderr == *"overlaps its ancestor $p/q"* ]]
	run wsl run -n "$p/s" -- true
	[ "$status" -eq 0 ]
	run wsl run -n "$(W p2)" -- true
	[ "$status" -eq 0 ]
	run --separate-stderr wsl inspect "$p"
	jq_ok '.state == "free" and (.overlapping | length) == 1 and .overlapping[0].relation == "descendant"'
	run wsl inspect --all
	jq -e --arg p "$p/" '[.locks[] | select(.workspace_root | startswith($p))] | map(.workspace_root) == [$p + "q"]' <<<"$output"
	run wsl release --token "$tok" "$p/q"
	[ "$status" -eq 0 ]
	run wsl acquire -n --pid $$ "$p"
	[ "$status" -eq 0 ]
	run wsl release --token "$(json_get .token)" "$p"
	[ "$status" -eq 0 ]
}

@test "etcd: two hosts, 200 contended runs, never two in the critical section" {
	mkws shared
	local ws=$(W shared) t=$BATS_TEST_TMPDIR/cs h j pids=()
	mkdir -p "$t"
	: >"$t/overlaps"
	: >"$t/done"
	for h in h1 h2; do
		for j in 1 2 3 4; do
			(
				for _ in $(seq 25); do
					WSLOCK_HOST=$h "$WSLOCK" run -q --lease-ttl 5 -w 120 "$ws" -- sh -c '
						mkdir "$1/in" 2>/dev/null || echo overlap >>"$1/overlaps"
						echo "$WSLOCK_FENCE" >>"$1/fences"
						sleep 0.01
						rmdir "$1/in" 2>/dev/null
						echo ok >>"$1/done"' sh "$t" || echo "fail $?" >>"$t/overlaps"
				done
			) </dev/null 3>&- &
			pids+=($!)
			track_pid $!
		done
	done
	for h in "${pids[@]}"; do wait_exit "$h" 170 || fail "runner $h hung"; done
	[ ! -s "$t/overlaps" ] || fail "overlaps or failures: $(sort "$t/overlaps" | uniq -c)"
	[ "$(wc -l <"$t/done")" -eq 200 ]
	# every holder had its own, distinct fencing token
	[ "$(sort -u "$t/fences" | wc -l)" -eq 200 ]
}

@test "etcd: a revoked lease kills the command at once (SIGKILL, no SIGTERM: the lock is lost) and exit 78; the lock is left, dead" {
	mkws a
	hold --lease-ttl 3 "$(W a)"
	local lease
	lease=$(lease_of "$(W a)")
	[ "$lease" != 0 ]
	ectl lease revoke "$(printf %x "$lease")"
	wait_exit "$HOLD_PID" 30
	[ "$WAIT_STATUS" -eq 78 ]
	[ ! -e "$HOLD_DIR/TERMED" ] || fail "the command got SIGTERM after its lock was lost"
	! is_running "$HOLD_CHILD"
	grep -q 'WSLOCK_OWNERSHIP_LOST' "$HOLD_DIR/err"
	grep -q 'lease' "$HOLD_DIR/err"
	run wsl inspect "$(W a)"
	jq_ok '.state == "held" and .liveness == "dead" and (.liveness_reason | contains("lease"))'
	run --separate-stderr wsl run -n "$(W a)" -- true
	[ "$status" -eq 69 ]
	assert_run_error WSLOCK_RECOVERY_REQUIRED
}

@test "etcd: a command that ignores SIGTERM is SIGKILLed at once when its lease is revoked, not after --kill-after" {
	mkws a
	local d=$BATS_TEST_TMPDIR/k lease
	mkdir -p "$d"
	"$WSLOCK" run --lease-ttl 3 --kill-after 1.5 "$(W a)" -- sh -c '
		trap "touch \"$1/TERMED\"" TERM
		echo $$ >"$1/child.pid"
		touch "$1/READY"
		while :; do sleep 0.05; done' sh "$d" </dev/null >"$d/out" 2>"$d/err" 3>&- &
	local pid=$!
	track_pid "$pid"
	wait_for "[ -e '$d/READY' ]" 20
	track_pid "$(cat "$d/child.pid")"
	lease=$(lease_of "$(W a)")
	ectl lease revoke "$(printf %x "$lease")"
	wait_exit "$pid" 30
	[ "$WAIT_STATUS" -eq 78 ]
	[ ! -e "$d/TERMED" ] || fail "the command got SIGTERM and the --kill-after grace after its lock was lost"
	! is_running "$(cat "$d/child.pid")"
	grep -q WSLOCK_OWNERSHIP_LOST "$d/err"
}

@test "etcd: a retained lock outlives its run's lease and needs recover" {
	mkws a
	run --separate-stderr wsl run --lease-ttl 2 --retain-on-failure "$(W a)" -- false
	[ "$status" -eq 1 ]
	[ "$(lease_of "$(W a)")" = 0 ]
	sleep 3	# longer than the lease: a leased key would be gone now
	inspect_json "$(W a)"
	jq_ok '.state == "retained" and .liveness == "dead" and .retained.exit_status == 1' "$INSPECT"
	run --separate-stderr wsl run -n "$(W a)" -- true
	[ "$status" -eq 69 ]
	assert_run_error WSLOCK_RECOVERY_REQUIRED
	wsl inspect --owner "$(W a)" >"$BATS_TEST_TMPDIR/owner.json"
	run --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	[ "$status" -eq 0 ]
	jq_ok '.action == "recovered" and .liveness == "dead" and .released == true'
	run wsl inspect "$(W a)"
	jq_ok '.state == "free"'
	# the takeover is journaled in etcd, as journal.c writes it locally
	run ectl get --prefix /wslock/journal/ --print-value-only
	jq -s -e --arg ws "$(W a)" \
		'[.[] | select(.workspace_root == $ws)] | length == 1 and .[0].action == "recover" and .[0].prior_owner != null and .[0].new_owner.recovery_of == .[0].prior_owner.token' <<<"$output"
	# and inspect --journal reads it, as it reads journal.jsonl on disk
	run -0 --separate-stderr wsl inspect --journal "$(W a)"
	jq_ok '(.journal | length) == 1 and .journal[0].action == "recover" and .journal[0].new_owner.recovery_of == .journal[0].prior_owner.token'
	run -0 --separate-stderr wsl inspect --journal
	jq_ok "[.journal[] | select(.workspace_root == \"$(canon "$(W a)")\")] | length == 1"
}

# keeper_of TOKEN: the pid of the keeper of the acquire whose owner has
# TOKEN (the process listening on its abstract socket), or nothing.
keeper_of() {
	ss -Hxlp 2>/dev/null | grep -F "@wslock-keeper-$1" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2
}

@test "etcd: acquire's keeper keeps a 2 s lease live for 8 s while its pid lives; then the lock is left, dead" {
	mkws a
	start_sleeper
	local t0 keeper
	# $(...) returns at once: the keeper keeps no stdio open
	OWNER=$(timeout 10 "$WSLOCK" acquire --lease-ttl 2 --pid "$SLEEPER_PID" "$(W a)") ||
		fail "acquire: $OWNER"
	[ "$(lease_of "$(W a)")" != 0 ]
	[ "$(owner_lease_of "$(W a)")" = 0 ]
	keeper=$(keeper_of "$(json_get .token "$OWNER")")
	[ -n "$keeper" ] || fail "no keeper listens for the lock's token"
	track_pid "$keeper"
	[ "$(readlink "/proc/$keeper/fd/1")" = /dev/null ]
	[ "$(ps -o sid= -p "$keeper")" != "$(ps -o sid= -p $$)" ] || fail "the keeper is in the caller's session"
	# four times the TTL, and the lease (2 s + 2 s lock-delay) lives on
	t0=$SECONDS
	while [ $((SECONDS - t0)) -lt 8 ]; do
		inspect_json "$(W a)"
		jq_ok '.state == "held" and .liveness == "live" and (.liveness_reason | contains("keeper"))' "$INSPECT"
		sleep 1
	done
	kill -KILL "$SLEEPER_PID"
	wait_exit "$SLEEPER_PID" 10
	# TTL + lock-delay (4 s) and a margin for a loaded machine
	wait_for "! is_running $keeper" 20 || fail "the keeper outlived its pid"
	wait_for "wsl inspect '$(W a)' | jq -e '.liveness == \"dead\"' >/dev/null" 20 ||
		fail "the lock did not go dead: $(wsl inspect "$(W a)")"
	run --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	[ "$status" -eq 69 ]
	assert_json_error WSLOCK_RECOVERY_REQUIRED
	# recover takes acquire's output (fence and all) as the expected owner
	printf '%s\n' "$OWNER" >"$BATS_TEST_TMPDIR/owner.json"
	run --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	[ "$status" -eq 0 ]
	run wsl inspect "$(W a)"
	jq_ok '.state == "free"'
}

@test "etcd: release frees an acquired lock and its keeper is gone when it returns" {
	mkws a
	start_sleeper
	local keeper tok
	acquire_as "$SLEEPER_PID" "$(W a)"
	tok=$(json_get .token "$OWNER")
	keeper=$(keeper_of "$tok")
	[ -n "$keeper" ] || fail "no keeper"
	track_pid "$keeper"
	run --separate-stderr wsl release --token 0123456789abcdef0123456789abcdef "$(W a)"
	[ "$status" -eq 78 ]
	assert_json_error WSLOCK_OWNERSHIP_LOST
	is_running "$keeper" || fail "a wrong token stopped the keeper"
	run --separate-stderr wsl release --token "$tok" "$(W a)"
	[ "$status" -eq 0 ]
	jq_ok '.action == "released"'
	wait_for "! is_running $keeper" 10 || fail "the keeper outlived the release"
	[ -z "$(keeper_of "$tok")" ]
	run wsl inspect "$(W a)"
	jq_ok '.state == "free"'
	# its lease went with it
	run ectl get --prefix "/wslock/live$(canon "$(W a)")" --keys-only
	[ -z "$output" ]
	is_running "$SLEEPER_PID"
}

@test "etcd: acquire that cannot write its owner document releases its lock and stops its keeper (74 WSLOCK_IO)" {
	mkws a
	start_sleeper
	run --separate-stderr timeout -k 5 30 sh -c 'exec "$1" acquire --pid "$2" "$3" >/dev/full' \
		sh "$WSLOCK" "$SLEEPER_PID" "$(W a)"
	[ "$status" -eq 74 ] || fail "exit $status, not 74: $stderr"
	assert_one_stderr_line
	[[ $stderr == *"released again [WSLOCK_IO]" ]] || fail "stderr: $stderr"
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
	run ectl get --prefix "/wslock/live$(canon "$(W a)")" --keys-only
	[ -z "$output" ] || fail "its liveness key is left: $output"
	# No keeper is left renewing a lease for the sleeper (a keeper keeps
	# the argv of the acquire that forked it).
	wait_for "! pgrep -f -- 'acquire --pid $SLEEPER_PID' >/dev/null" 10 ||
		fail "a keeper outlived the failed acquire: $(pgrep -af -- "acquire --pid $SLEEPER_PID")"
	run -0 --separate-stderr wsl run -n "$(W a)" -- true
	is_running "$SLEEPER_PID"
}

@test "etcd: acquire's keeper ends when its lock is removed elsewhere (another machine's release, an operator's del)" {
	mkws a
	start_sleeper
	local keeper tok
	acquire_as "$SLEEPER_PID" "$(W a)"
	tok=$(json_get .token "$OWNER")
	keeper=$(keeper_of "$tok")
	[ -n "$keeper" ] || fail "no keeper"
	track_pid "$keeper"
	# no poke reaches it: only its watch (or its next renewal) can tell
	ectl del "/wslock/lock$(canon "$(W a)")" >/dev/null
	wait_for "! is_running $keeper" 20 || fail "the keeper renews a lock that is gone"
	is_running "$SLEEPER_PID"
	run wsl inspect "$(W a)"
	jq_ok '.state == "free"'
}

@test "etcd: release --token is refused while a run's liveness lease lives, as on disk" {
	mkws a
	hold --lease-ttl 3 "$(W a)"
	local tok before
	tok=$(wsl inspect --owner "$(W a)" | jq -r .token)
	before=$(ectl get --prefix "/wslock/" -w json | jq -c '[.kvs[] | select(.key | @base64d | contains("'"$(canon "$(W a)")"'"))] | map([.key, .value, .mod_revision])')
	run -75 --separate-stderr wsl release --token "$tok" "$(W a)"
	assert_json_error WSLOCK_OWNER_LIVE
	[[ $stderr == *"releases itself"* ]] || fail "the message does not say the lock releases itself: $stderr"
	[ "$before" = "$(ectl get --prefix "/wslock/" -w json | jq -c '[.kvs[] | select(.key | @base64d | contains("'"$(canon "$(W a)")"'"))] | map([.key, .value, .mod_revision])')" ]
	unhold
	[ "$WAIT_STATUS" -eq 0 ]
	run wsl inspect "$(W a)"
	jq_ok '.state == "free"'
}

@test "etcd: a dead holder on this host needs recovery; reclaim removes it" {
	mkws a b
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)" --lease-ttl 2
	kill -KILL "$SLEEPER_PID"
	wait_exit "$SLEEPER_PID" 10
	wait_for "wsl inspect '$(W a)' | jq -e '.liveness == \"dead\"' >/dev/null" 20
	run --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	[ "$status" -eq 69 ]
	assert_json_error WSLOCK_RECOVERY_REQUIRED
	run --separate-stderr wsl reclaim "$(W a)"
	[ "$status" -eq 0 ]
	jq_ok '.action == "preview" and .candidates[0].reclaimable == true'
	run --separate-stderr wsl reclaim --yes "$(W a)"
	[ "$status" -eq 0 ]
	run wsl inspect "$(W a)"
	jq_ok '.state == "free"'
}

# put_lock WS DOC: WS's lock as DOC, without a liveness lease (as an
# acquire of 0.2.0 before keepers left it).
put_lock() {
	printf '%s\n' "$2" | ectl put "/wslock/lock$(canon "$1")" >/dev/null
}

# a_document WS: an owner document of this host for WS, its lock released.
a_document() {
	local out
	out=$(wsl acquire --pid $$ "$1") || fail "acquire: $out"
	wsl release --token "$(json_get .token "$out")" "$1" >/dev/null || fail "release"
	jq -c 'del(.fence)' <<<"$out"
}

@test "etcd: the acquire of another host is live while its keeper renews its lease" {
	mkws a
	local out
	out=$(WSLOCK_HOST=h2 wsl acquire --pid $$ "$(W a)") || fail "$out"
	printf '%s\n' "$out" >"$BATS_TEST_TMPDIR/owner.json"
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "live" and .owner.host == "h2"' "$INSPECT"
	run --separate-stderr wsl recover --force --reason x --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	[ "$status" -eq 75 ]
	assert_json_error WSLOCK_OWNER_LIVE
	run wsl release --token "$(json_get .token "$out")" "$(W a)"
	[ "$status" -eq 0 ]
}

@test "etcd: an owner without a lease of another host is unknown, refused without --force" {
	mkws a
	local doc
	doc=$(a_document "$(W a)" | jq -c --arg p "$(dead_pid)" '.host = "h2" | .pid = ($p | tonumber)')
	put_lock "$(W a)" "$doc"
	printf '%s\n' "$doc" >"$BATS_TEST_TMPDIR/owner.json"
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "unknown" and .owner.host == "h2"' "$INSPECT"
	run --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	[ "$status" -eq 69 ]
	assert_json_error WSLOCK_LIVENESS_UNKNOWN
	run --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	[ "$status" -eq 69 ]
	assert_json_error WSLOCK_LIVENESS_UNKNOWN
	run --separate-stderr wsl recover --force --reason "h2 checked" \
		--expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	[ "$status" -eq 0 ]
	jq_ok '.forced == true and .liveness == "unknown"'
}

@test "etcd: finding 5: another machine with this host name is unknown (machine_id), never dead; nothing takes it over without --force" {
	mkws a
	local doc key before
	# a pid that is dead here and another boot id: were the machine taken
	# for this one, the lock would read dead (pid gone, or rebooted)
	doc=$(a_document "$(W a)" | jq -c --arg p "$(dead_pid)" \
		'.machine_id = "0123456789abcdef0123456789abcdef" | .boot_id = "00000000-1111-2222-3333-444444444444" | .pid = ($p | tonumber)')
	put_lock "$(W a)" "$doc"
	printf '%s\n' "$doc" >"$BATS_TEST_TMPDIR/owner.json"
	key="/wslock/lock$(canon "$(W a)")"
	before=$(ectl get "$key" -w json | jq -c '.kvs[0] | [.value, .mod_revision]')
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "unknown" and (.liveness_reason | contains("machine id"))' "$INSPECT"
	run --separate-stderr wsl acquire -n --reclaim-dead --pid $$ "$(W a)"
	[ "$status" -eq 69 ]
	assert_json_error WSLOCK_LIVENESS_UNKNOWN
	run --separate-stderr wsl run -n --reclaim-dead "$(W a)" -- true
	[ "$status" -eq 69 ]
	run --separate-stderr wsl reclaim --yes "$(W a)"
	jq_ok '.action == "reclaimed" and (.reclaimed | length) == 0'
	run --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	[ "$status" -eq 69 ]
	assert_json_error WSLOCK_LIVENESS_UNKNOWN
	[ "$before" = "$(ectl get "$key" -w json | jq -c '.kvs[0] | [.value, .mod_revision]')" ] ||
		fail "the lock changed"
	run ectl get --prefix /wslock/journal/ --print-value-only
	! grep -qF "$(json_get .token "$doc")" <<<"$output"
}

@test "etcd: a run of another host is live through its lease" {
	mkws a
	WSLOCK_HOST=h2 hold --lease-ttl 3 "$(W a)"
	inspect_json --owner "$(W a)"
	printf '%s\n' "$INSPECT" >"$BATS_TEST_TMPDIR/owner.json"
	run --separate-stderr wsl recover --force --reason x \
		--expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	[ "$status" -eq 75 ]
	assert_json_error WSLOCK_OWNER_LIVE
	unhold
	[ "$WAIT_STATUS" -eq 0 ]
}

@test "etcd: two concurrent recovers of the same owner: exactly one wins" {
	mkws a
	local round d s1 s2 p1 p2
	for round in 1 2 3; do
		start_sleeper
		acquire_as "$SLEEPER_PID" "$(W a)" --lease-ttl 2
		kill -KILL "$SLEEPER_PID"
		wait_exit "$SLEEPER_PID" 10
		wait_for "wsl inspect '$(W a)' | jq -e '.liveness == \"dead\"' >/dev/null" 20
		d=$BATS_TEST_TMPDIR/r$round
		mkdir -p "$d"
		printf '%s\n' "$OWNER" >"$d/owner.json"
		for i in 1 2; do
			sh -c 'while [ ! -e "$1/START" ]; do sleep 0.01; done
				exec "$2" recover --lease-ttl 5 --expected-owner "$1/owner.json" "$3" -- \
					sh -c "while [ ! -e \"\$1/GO\" ]; do sleep 0.05; done" sh "$1"' \
				sh "$d" "$WSLOCK" "$(W a)" </dev/null >"$d/out$i" 2>"$d/err$i" 3>&- &
			eval "p$i=\$!"
			track_pid $!
		done
		touch "$d/START"
		# the loser ends on its own; then let the winner's command finish
		wait_for "! is_running $p1 || ! is_running $p2" 30
		touch "$d/GO"
		wait_exit "$p1" 30
		s1=$WAIT_STATUS
		wait_exit "$p2" 30
		s2=$WAIT_STATUS
		[ "$(printf '%s\n' "$s1" "$s2" | sort -n | tr '\n' ' ')" = "0 65 " ] ||
			fail "round $round: statuses $s1 $s2; $(cat "$d/err1" "$d/err2")"
		cat "$d/err1" "$d/err2" | grep -q WSLOCK_OWNER_MISMATCH
		run wsl inspect "$(W a)"
		jq_ok '.state == "free"'
	done
}

@test "etcd: a corrupt value is reported, blocks acquire, and only an exact forced recover clears it" {
	mkws a
	ectl put "/wslock/lock$(W a)" 'not a document' >/dev/null
	inspect_json "$(W a)"
	jq_ok '.state == "corrupt" and .owner == null and (.problem | length > 0)' "$INSPECT"
	run --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	[ "$status" -eq 65 ]
	assert_json_error WSLOCK_LOCK_CORRUPT
	printf 'not a document\n' >"$BATS_TEST_TMPDIR/wrong"
	run --separate-stderr wsl recover --force --reason x --expected-owner "$BATS_TEST_TMPDIR/wrong" "$(W a)"
	[ "$status" -eq 65 ]
	printf 'not a document' >"$BATS_TEST_TMPDIR/exact"
	run --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/exact" "$(W a)"
	[ "$status" -eq 65 ]
	run --separate-stderr wsl recover --force --reason x --expected-owner "$BATS_TEST_TMPDIR/exact" "$(W a)"
	[ "$status" -eq 0 ]
	jq_ok '.action == "cleared-corrupt"'
	run wsl inspect "$(W a)"
	jq_ok '.state == "free"'
}

@test "etcd: unreachable etcd is 69 WSLOCK_BACKEND_UNAVAILABLE for every command" {
	mkws a
	export WSLOCK_ETCD_ENDPOINTS=http://127.0.0.1:9
	printf '{}' >"$BATS_TEST_TMPDIR/owner.json"
	run --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	[ "$status" -eq 69 ]
	assert_json_error WSLOCK_BACKEND_UNAVAILABLE
	run --separate-stderr wsl release --token 0123456789abcdef0123456789abcdef "$(W a)"
	[ "$status" -eq 69 ]
	assert_json_error WSLOCK_BACKEND_UNAVAILABLE
	run --separate-stderr wsl run "$(W a)" -- true
	[ "$status" -eq 69 ]
	assert_run_error WSLOCK_BACKEND_UNAVAILABLE
	run --separate-stderr wsl inspect "$(W a)"
	[ "$status" -eq 69 ]
	assert_json_error WSLOCK_BACKEND_UNAVAILABLE
	run --separate-stderr wsl inspect --all
	[ "$status" -eq 69 ]
	run --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	[ "$status" -eq 69 ]
	assert_json_error WSLOCK_BACKEND_UNAVAILABLE
	run --separate-stderr wsl reclaim
	[ "$status" -eq 69 ]
	assert_json_error WSLOCK_BACKEND_UNAVAILABLE
	run --separate-stderr wsl reclaim --yes
	[ "$status" -eq 69 ]
}

@test "etcd: --backend etcd --etcd-endpoints and --etcd-prefix work without the environment" {
	mkws a
	unset WSLOCK_BACKEND WSLOCK_ETCD_ENDPOINTS
	run --separate-stderr wsl run --backend etcd --etcd-endpoints "$WSL_ETCD_EP" \
		--etcd-prefix /wslock-other/ "$(W a)" -- \
		sh -c 'etcdctl --endpoints="$1" get --prefix /wslock-other/lock --keys-only' sh "$WSL_ETCD_EP"
	[ "$status" -eq 0 ]
	[[ $output == *"/wslock-other/lock$(W a)"* ]]
	[ ! -e "$WSLOCK_DIR" ]	# no local registry was made
}

@test "etcd: an empty WSLOCK_ETCD_PREFIX counts as unset (the default /wslock/), as an empty WSLOCK_DIR does" {
	mkws a
	WSLOCK_ETCD_PREFIX= run -0 --separate-stderr wsl run "$(W a)" -- \
		sh -c 'etcdctl --endpoints="$1" get --prefix /wslock/lock --keys-only' sh "$WSL_ETCD_EP"
	[[ $output == *"/wslock/lock$(W a)"* ]] || fail "not under /wslock/: $output"
}

@test "etcd: recover of a corrupt key given 'etcdctl get --print-value-only' bytes (a newline added) says so; the exact bytes from -w json clear it" {
	mkws a
	wsl run "$(W a)" -- true
	ectl put "/wslock/lock$(W a)" 'half a docu' >/dev/null
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "corrupt"'
	ectl get --print-value-only "/wslock/lock$(W a)" >"$BATS_TEST_TMPDIR/c.json"
	run -65 --separate-stderr wsl recover --force --reason "torn, checked" --expected-owner "$BATS_TEST_TMPDIR/c.json" "$(W a)"
	[[ $stderr == *"only by a trailing newline"*"etcdctl get -w json /wslock/lock$(W a) "* ]] || fail "no hint: $stderr"
	[[ $stderr != *"cp of"* && $stderr != *"cp "* ]] || fail "a file hint on etcd: $stderr"
	[ "$(ectl get --print-value-only "/wslock/lock$(W a)")" = "half a docu" ] || fail "the key changed"
	ectl get -w json "/wslock/lock$(W a)" | jq -r '.kvs[0].value' | base64 -d >"$BATS_TEST_TMPDIR/exact.json"
	run -0 --separate-stderr wsl recover --force --reason "torn, checked" --expected-owner "$BATS_TEST_TMPDIR/exact.json" "$(W a)"
	jq_ok '.action == "cleared-corrupt"'
}

@test "etcd: losing one member of three keeps run, acquire and release working" {
	local d=$BATS_FILE_TMPDIR/etcd3 ep leader i urls="" out deadline
	ep=$("$CLUSTER" start -n 3 "$d")
	[ -n "$ep" ]
	for i in 1 2 3; do is_running "$(cat "$d/member-$i/pid")"; done
	leader=$("$CLUSTER" leader "$d")
	# the leader first: the client starts there and must fail over
	urls=$(cat "$d/member-$leader/client")
	for i in 1 2 3; do
		[ "$i" = "$leader" ] || urls="$urls,$(cat "$d/member-$i/client")"
	done
	export WSLOCK_ETCD_ENDPOINTS=$urls
	mkws a b c
	hold --lease-ttl 15 "$(W a)"
	"$CLUSTER" kill "$d" "$leader"
	# the survivors elect a new leader (bounded wait, no timing asserted)
	deadline=$((SECONDS + 60))
	until etcdctl --endpoints="${urls#*,}" --dial-timeout=1s --command-timeout=2s \
		endpoint health >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$deadline" ] || fail "the two survivors did not become healthy"
		sleep 0.2
	done
	run wsl run "$(W b)" -- true
	[ "$status" -eq 0 ]
	out=$(wsl acquire --pid $$ "$(W c)") || fail "acquire: $out"
	run --separate-stderr wsl acquire -n --pid $$ "$(W c)"
	[ "$status" -eq 75 ]
	run wsl release --token "$(json_get .token "$out")" "$(W c)"
	[ "$status" -eq 0 ]
	# the holder kept its lease alive across the failover
	run wsl inspect "$(W a)"
	jq_ok '.state == "held" and .liveness == "live"'
	unhold
	[ "$WAIT_STATUS" -eq 0 ]
	run wsl inspect "$(W a)"
	jq_ok '.state == "free"'
	"$CLUSTER" stop "$d"
}

@test "etcd: a 0.1 lock (its owner key bound to a lease) still reads as held and live while the lease lasts" {
	mkws a
	local key doc lease
	key="/wslock/lock$(canon "$(W a)")"
	# Held for a process this test does not descend from (a run from a
	# descendant of the holder would nest).
	start_sleeper
	run --separate-stderr wsl acquire --pid "$SLEEPER_PID" "$(W a)"
	[ "$status" -eq 0 ]
	doc=$(ectl get "$key" --print-value-only)
	ectl del "$key" >/dev/null
	# as 0.1's run stored it: the owner document on the holder's lease
	lease=$(ectl lease grant 60 | awk '{ print $2 }')
	ectl put --lease="$lease" "$key" "$doc" >/dev/null
	inspect_json "$(W a)"
	jq_ok '.state == "held" and .liveness == "live" and (.liveness_reason | contains("lease"))' "$INSPECT"
	run --separate-stderr wsl run -n "$(W a)" -- true
	[ "$status" -eq 75 ]
	ectl lease revoke "$lease" >/dev/null
	run wsl inspect "$(W a)"
	jq_ok '.state == "free"'
}

@test "etcd: release --retain --reason keeps an acquired lock retained with the reason until an exact recover" {
	mkws a
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)" --lease-ttl 2
	run -0 --separate-stderr wsl release --token "$(json_get .token "$OWNER")" \
		--retain --reason "migration stopped" "$(W a)"
	jq_ok ".action == \"retained\" and .owner == ($OWNER | del(.fence)) and .retained.reason == \"migration stopped\""
	inspect_json "$(W a)"
	jq_ok '.state == "retained" and .retained.reason == "migration stopped" and .retained.exit_status == null' "$INSPECT"
	run -0 --separate-stderr wsl inspect --format text "$(W a)"
	[[ $output == *"retained: migration stopped, at "* ]] || fail "text view: $output"
	run -69 --separate-stderr wsl run -n "$(W a)" -- true
	assert_run_error WSLOCK_RECOVERY_REQUIRED
	run -69 --separate-stderr wsl release --token "$(json_get .token "$OWNER")" --retain --reason again "$(W a)"
	assert_json_error WSLOCK_RECOVERY_REQUIRED
	# The holder's keeper renews its liveness while it lives; then its
	# lease runs out and the retained lock is dead: recover takes it.
	kill -KILL "$SLEEPER_PID"
	wait_exit "$SLEEPER_PID" 10
	wait_for "[ \"\$(wsl inspect '$(W a)' | jq -r .liveness)\" = dead ]" 30 ||
		fail "never dead: $(wsl inspect "$(W a)")"
	printf '%s' "$OWNER" >"$BATS_TEST_TMPDIR/owner.json"
	run -0 --separate-stderr wsl recover --expected-owner "$BATS_TEST_TMPDIR/owner.json" "$(W a)"
	jq_ok '.action == "recovered"'
	inspect_json "$(W a)"
	jq_ok '.state == "free"' "$INSPECT"
}

@test "etcd: inspect --exit-status: 0 free, 75 held by a live owner, 69 retained, an ancestor's lock counted; -q prints nothing" {
	mkws a b
	run -0 --separate-stderr wsl inspect --exit-status "$(W a)"
	jq_ok '.state == "free"'
	start_sleeper
	acquire_as "$SLEEPER_PID" "$(W a)"
	run -75 --separate-stderr wsl inspect --exit-status "$(W a)"
	jq_ok '.state == "held" and .liveness == "live"'
	run -75 --separate-stderr wsl inspect -q --exit-status "$(W a)"
	[ -z "$output" ] || fail "-q printed: $output"
	run -1 --separate-stderr wsl run --retain-on-failure "$(W b)" -- false
	run -69 --separate-stderr wsl inspect --exit-status "$(W b)"
	jq_ok '.state == "retained"'
	# The overlapping locks count: an ancestor held live, a retained one.
	mkdir -p "$(W a)/sub" "$(W b)/sub"
	run -75 --separate-stderr wsl inspect --exit-status "$(W a)/sub"
	jq_ok '.state == "free" and .overlapping[0].relation == "ancestor"'
	run -69 --separate-stderr wsl inspect -q --exit-status "$(W b)/sub"
}

@test "etcd: -n, -w 0 and a short -w still give each endpoint one full request: a first endpoint that never answers is passed over" {
	mkws a
	local proxy=$BATS_TEST_DIRNAME/etcd/proxy.sh p1 o
	p1=$("$proxy" start "$BATS_TEST_TMPDIR" p1 "${WSL_ETCD_EP#http://}")
	# The proxy accepts TCP (the kernel does) but answers nothing.
	"$proxy" pause "$BATS_TEST_TMPDIR" p1
	for o in -n "-w 0" "-w 0.5"; do
		# shellcheck disable=SC2086
		run --separate-stderr wsl run $o --etcd-timeout 1 \
			--etcd-endpoints "$p1,$WSL_ETCD_EP" "$(W a)" -- true
		[ "$status" -eq 0 ] || { "$proxy" stop "$BATS_TEST_TMPDIR"; fail "run $o: $status $stderr"; }
	done
	# -n still does not wait for the lock.
	hold "$(W a)"
	run --separate-stderr wsl run -n --etcd-timeout 1 \
		--etcd-endpoints "$p1,$WSL_ETCD_EP" "$(W a)" -- true
	"$proxy" stop "$BATS_TEST_TMPDIR"
	[ "$status" -eq 75 ] || fail "busy run -n: $status $stderr"
}

@test "etcd: a lock dead by the double fault (keeper stopped, wslock killed) does not claim its command was stopped" {
	mkws a
	local keeper
	hold --lease-ttl 2 "$(W a)"
	keeper=$(ps -o ppid= -p "$HOLD_CHILD" | tr -d ' ')
	[ -n "$keeper" ] && [ "$keeper" != "$HOLD_PID" ] || fail "no keeper between wslock $HOLD_PID and the command"
	track_pid "$keeper"
	kill -STOP "$keeper"
	kill -9 "$HOLD_PID"
	# dead once the lease (2 s + 2 s lock-delay) is gone, command still running
	if ! wait_for "wsl inspect '$(W a)' | jq -e '.liveness == \"dead\"' >/dev/null" 30; then
		kill -CONT "$keeper"
		fail "never dead"
	fi
	is_running "$HOLD_CHILD" || { kill -CONT "$keeper"; fail "the command ended"; }
	inspect_json "$(W a)"
	kill -CONT "$keeper"
	jq_ok '.liveness_reason | contains("expired or was revoked")' "$INSPECT"
	jq_ok '.liveness_reason | contains("stopped its command") | not' "$INSPECT"
	jq_ok '.liveness_reason | contains("if it ran") and contains("may still run")' "$INSPECT"
}

@test "etcd: a corrupt key gets the next step with etcdctl's exact bytes, in the error and the text view, and the pasted line clears it" {
	mkws a
	local next text
	wsl run "$(W a)" -- true
	ectl put "/wslock/lock$(W a)" 'garbage{' >/dev/null
	run -65 --separate-stderr wsl acquire -n --pid $$ "$(W a)"
	assert_json_error WSLOCK_LOCK_CORRUPT
	next=$(json_get .error.next "$output")
	[[ $next == "etcdctl --endpoints=$WSL_ETCD_EP get -w json /wslock/lock$(W a) | "*"base64 -d > corrupt-owner.json && "*" recover --force --reason \"\$REASON\" --expected-owner corrupt-owner.json $(W a)" ]] ||
		fail "next: $next"
	[[ $stderr == *"; next: $next "* ]] || fail "stderr: $stderr"
	[[ $next != *"cp "* ]] || fail "a file to copy on etcd: $next"
	text=$(wsl inspect --format text "$(W a)") || true
	[[ $text == *"next: after checking"*"$next"* ]] || fail "text view: $text"
	# Pasted in another terminal (no wslock settings in its environment):
	# with REASON unset it changes nothing, with it the key is cleared.
	mkdir "$BATS_TEST_TMPDIR/bin" "$BATS_TEST_TMPDIR/paste"
	ln -s "$WSLOCK" "$BATS_TEST_TMPDIR/bin/wslock"
	run -64 --separate-stderr env -u WSLOCK_BACKEND -u WSLOCK_ETCD_ENDPOINTS -u ETCDCTL_API -u REASON \
		PATH="$BATS_TEST_TMPDIR/bin:$PATH" sh -c "cd '$BATS_TEST_TMPDIR/paste' && $next"
	[ "$(ectl get --print-value-only "/wslock/lock$(W a)")" = 'garbage{' ] || fail "the key changed"
	run -0 --separate-stderr env -u WSLOCK_BACKEND -u WSLOCK_ETCD_ENDPOINTS -u ETCDCTL_API \
		REASON="torn, checked" PATH="$BATS_TEST_TMPDIR/bin:$PATH" sh -c "cd '$BATS_TEST_TMPDIR/paste' && $next"
	jq_ok '.action == "cleared-corrupt"'
	run -0 wsl inspect "$(W a)"
	jq_ok '.state == "free"'
}
