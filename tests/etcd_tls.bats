#!/usr/bin/env bats
# The etcd backend over TLS with client certificates and user/password auth
# (DESIGN.md section 5b): certificates made here with openssl, one etcd
# member on loopback started with --client-cert-auth, a user with a role on
# the lock prefix, auth enabled.  Skipped without etcd, etcdctl or openssl.

load helpers

setup_file() {
	if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null ||
	   ! command -v openssl >/dev/null; then
		export WSL_TLS_MISSING=1
		return 0
	fi
	local d=$BATS_FILE_TMPDIR/tls p q i
	mkdir -p "$d"
	export WSL_TLS=$d
	(
		cd "$d"
		openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=wslock-test-ca \
			-keyout ca.key -out ca.crt
		printf 'subjectAltName=IP:127.0.0.1\n' >san
		openssl req -newkey rsa:2048 -nodes -subj /CN=etcd -keyout server.key -out server.csr
		openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
			-days 2 -extfile san -out server.crt
		# no CN: etcd 3.4's JSON gateway refuses a client certificate
		# with a CommonName once auth is on (it cannot pass the CN on)
		openssl req -newkey rsa:2048 -nodes -subj /O=wslock-test-client -keyout client.key -out client.csr
		openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
			-days 2 -out client.crt
	) >"$d/openssl.log" 2>&1
	for i in 1 2 3; do
		p=$(( ($(od -An -N2 -tu2 /dev/urandom) % 30000) + 20000 ))
		q=$((p + 1))
		ss -Hltn "sport = :$p" | grep -q . && continue
		ss -Hltn "sport = :$q" | grep -q . && continue
		setsid etcd --name tls --data-dir "$d/data" \
			--listen-client-urls "https://127.0.0.1:$p" --advertise-client-urls "https://127.0.0.1:$p" \
			--listen-peer-urls "http://127.0.0.1:$q" --initial-advertise-peer-urls "http://127.0.0.1:$q" \
			--initial-cluster "tls=http://127.0.0.1:$q" \
			--cert-file "$d/server.crt" --key-file "$d/server.key" \
			--trusted-ca-file "$d/ca.crt" --client-cert-auth \
			--logger zap --log-outputs stderr --log-level warn \
			</dev/null >"$d/etcd.log" 2>&1 3>&- &
		echo $! >"$d/pid"
		export WSL_TLS_EP="https://127.0.0.1:$p"
		if wait_for "tctl endpoint health >/dev/null 2>&1" 20 2>/dev/null; then break; fi
		kill "$(cat "$d/pid")" 2>/dev/null
		rm -rf "$d/data"
		WSL_TLS_EP=
	done
	[ -n "$WSL_TLS_EP" ] || return 1
	tctl user add root:rootpw >/dev/null
	tctl user grant-role root root >/dev/null
	tctl user add alice:alicepw >/dev/null
	tctl role add wslock >/dev/null
	tctl role grant-permission wslock readwrite --prefix=true /wslock/ >/dev/null
	tctl user grant-role alice wslock >/dev/null
	tctl auth enable >/dev/null
}

teardown_file() {
	if [ -f "${WSL_TLS:-/nonexistent}/pid" ]; then
		kill "$(cat "$WSL_TLS/pid")" 2>/dev/null || :
	fi
	return 0
}

# tctl ARGS...: etcdctl with the client certificate (as root once auth is on).
tctl() {
	local u=()
	[ -d "$WSL_TLS/data" ] && tctl_auth_on && u=(--user root:rootpw)
	ETCDCTL_API=3 etcdctl --endpoints="$WSL_TLS_EP" --cacert "$WSL_TLS/ca.crt" \
		--cert "$WSL_TLS/client.crt" --key "$WSL_TLS/client.key" \
		--dial-timeout=2s --command-timeout=5s "${u[@]}" "$@"
}
tctl_auth_on() { [ -e "$WSL_TLS/auth-on" ]; }

local_setup() {
	[ -z "${WSL_TLS_MISSING:-}" ] || skip "etcd, etcdctl or openssl is not installed"
	touch "$WSL_TLS/auth-on"
	export WSLOCK_BACKEND=etcd WSLOCK_ETCD_ENDPOINTS=$WSL_TLS_EP
	unset WSLOCK_ETCD_CACERT WSLOCK_ETCD_CERT WSLOCK_ETCD_KEY WSLOCK_ETCD_USER WSLOCK_ETCD_PASSWORD
}

@test "etcd TLS: run, acquire, inspect and release with a client certificate and a user" {
	mkws a
	local tls=(--etcd-cacert "$WSL_TLS/ca.crt" --etcd-cert "$WSL_TLS/client.crt"
		--etcd-key "$WSL_TLS/client.key" --etcd-user alice:alicepw)
	run --separate-stderr wsl run "${tls[@]}" "$(W a)" -- sh -c 'echo "fence=$WSLOCK_FENCE"'
	[ "$status" -eq 0 ] || fail "$stderr"
	[[ $output == fence=[1-9]* ]]
	run --separate-stderr wsl acquire "${tls[@]}" --pid $$ "$(W a)"
	[ "$status" -eq 0 ]
	local token
	token=$(jq -r .token <<<"$output")
	run --separate-stderr wsl inspect "${tls[@]}" "$(W a)"
	[ "$status" -eq 0 ]
	jq_ok '.state == "held"'
	run --separate-stderr wsl release "${tls[@]}" --token "$token" "$(W a)"
	[ "$status" -eq 0 ]
	# the keys are there, under the user's prefix
	run tctl get --prefix /wslock/ --keys-only
	[ "$status" -eq 0 ]
}

@test "etcd TLS: the WSLOCK_ETCD_* variables do the same; the password may come from WSLOCK_ETCD_PASSWORD" {
	mkws a
	export WSLOCK_ETCD_CACERT=$WSL_TLS/ca.crt WSLOCK_ETCD_CERT=$WSL_TLS/client.crt \
		WSLOCK_ETCD_KEY=$WSL_TLS/client.key WSLOCK_ETCD_USER=alice WSLOCK_ETCD_PASSWORD=alicepw
	run --separate-stderr wsl run "$(W a)" -- true
	[ "$status" -eq 0 ]
}

@test "etcd TLS: without the client certificate, or with a wrong password, nothing is done" {
	mkws a
	run --separate-stderr wsl run --etcd-cacert "$WSL_TLS/ca.crt" --etcd-user alice:alicepw \
		"$(W a)" -- touch "$BATS_TEST_TMPDIR/ran"
	[ "$status" -eq 69 ]
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
	run --separate-stderr wsl run --etcd-cacert "$WSL_TLS/ca.crt" --etcd-cert "$WSL_TLS/client.crt" \
		--etcd-key "$WSL_TLS/client.key" --etcd-user alice:wrong "$(W a)" -- touch "$BATS_TEST_TMPDIR/ran"
	[ "$status" -ne 0 ]
	[[ $stderr == *"authentication"* ]]
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
}

@test "etcd TLS: a corrupt key's next step carries the endpoints, CA, certificate, key and user for etcdctl and wslock, never the password; pasted, it clears the key" {
	mkws a
	local tls=(--etcd-cacert "$WSL_TLS/ca.crt" --etcd-cert "$WSL_TLS/client.crt"
		--etcd-key "$WSL_TLS/client.key" --etcd-user alice:alicepw) next
	run -0 --separate-stderr wsl run "${tls[@]}" "$(W a)" -- true
	tctl put "/wslock/lock$(W a)" 'garbage{' >/dev/null
	run -65 --separate-stderr wsl acquire "${tls[@]}" -n --pid $$ "$(W a)"
	assert_json_error WSLOCK_LOCK_CORRUPT
	next=$(json_get .error.next "$output")
	[[ $next == "etcdctl --endpoints=$WSL_TLS_EP --cacert=$WSL_TLS/ca.crt --cert=$WSL_TLS/client.crt --key=$WSL_TLS/client.key --user=alice --password=\"\$WSLOCK_ETCD_PASSWORD\" get -w json /wslock/lock$(W a) | "* ]] ||
		fail "etcdctl part: $next"
	[[ $next == *" recover --force --reason \"\$REASON\" --expected-owner corrupt-owner.json $(W a)" ]] || fail "recover part: $next"
	[[ $next == *"--etcd-endpoints $WSL_TLS_EP --etcd-cacert $WSL_TLS/ca.crt --etcd-cert $WSL_TLS/client.crt --etcd-key $WSL_TLS/client.key --etcd-user alice recover "* ]] ||
		fail "wslock part: $next"
	[[ $next != *alicepw* && $stderr != *alicepw* && $output != *alicepw* ]] || fail "the password is printed: $stderr"
	# The same from the WSLOCK_ETCD_* variables, the password among them.
	run -65 --separate-stderr env WSLOCK_ETCD_CACERT="$WSL_TLS/ca.crt" WSLOCK_ETCD_CERT="$WSL_TLS/client.crt" \
		WSLOCK_ETCD_KEY="$WSL_TLS/client.key" WSLOCK_ETCD_USER=alice WSLOCK_ETCD_PASSWORD=alicepw \
		"$WSLOCK" acquire -n --pid $$ "$(W a)"
	[ "$(json_get .error.next "$output")" = "$next" ] || fail "from the variables: $output"
	# Pasted in another terminal with only the password in its environment.
	mkdir "$BATS_TEST_TMPDIR/bin" "$BATS_TEST_TMPDIR/paste"
	ln -s "$WSLOCK" "$BATS_TEST_TMPDIR/bin/wslock"
	run -0 --separate-stderr env -u WSLOCK_BACKEND -u WSLOCK_ETCD_ENDPOINTS -u ETCDCTL_API \
		WSLOCK_ETCD_PASSWORD=alicepw REASON="torn, checked" PATH="$BATS_TEST_TMPDIR/bin:$PATH" \
		sh -c "cd '$BATS_TEST_TMPDIR/paste' && $next"
	jq_ok '.action == "cleared-corrupt"'
	run -0 --separate-stderr wsl inspect "${tls[@]}" "$(W a)"
	jq_ok '.state == "free"'
}
