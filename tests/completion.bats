#!/usr/bin/env bats
# Shell integration: the bash completion (driven through COMP_WORDS), the zsh
# and fish completions (parse checks), the man page (mandoc -Tlint), and that
# all of them know every option the binary's --help lists.
#
# Self-contained on purpose: it does not load helpers.

WSLOCK=${WSLOCK:-$BATS_TEST_DIRNAME/../wslock}
TOP=$BATS_TEST_DIRNAME/..
BASH_COMPLETION=$TOP/completions/wslock.bash
ZSH_COMPLETION=$TOP/completions/_wslock
FISH_COMPLETION=$TOP/completions/wslock.fish
MANPAGE=$TOP/man/wslock.1

setup() {
	unset WSLOCK_TOKEN WSLOCK_WORKSPACE WSLOCK_OWNER WSLOCK_HOST XDG_STATE_HOME
	export WSLOCK_DIR=$BATS_TEST_TMPDIR/reg
	# shellcheck source=../completions/wslock.bash
	source "$BASH_COMPLETION"
}

fail() {
	printf '%s\n' "$*" >&2
	return 1
}

# comp WORD...: complete the last WORD (give '' for an empty one) of the
# command line WORD... as bash would, leaving the result in COMPREPLY.
comp() {
	COMP_WORDS=("$@")
	COMP_CWORD=$(($# - 1))
	COMP_LINE="$*"
	COMP_POINT=${#COMP_LINE}
	COMPREPLY=()
	_wslock wslock "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
}

# has WORD...: every WORD is in COMPREPLY.
has() {
	local w r found
	for w in "$@"; do
		found=0
		for r in "${COMPREPLY[@]}"; do
			[ "$r" = "$w" ] && found=1 && break
		done
		[ "$found" = 1 ] || fail "'$w' not in COMPREPLY: (${COMPREPLY[*]})"
	done
}

# hasnt WORD...: no WORD is in COMPREPLY.
hasnt() {
	local w r
	for w in "$@"; do
		for r in "${COMPREPLY[@]}"; do
			[ "$r" != "$w" ] || fail "'$w' unexpectedly in COMPREPLY: (${COMPREPLY[*]})"
		done
	done
}

# only WORD...: COMPREPLY is exactly the set WORD...
only() {
	local got want
	got=$(printf '%s\n' "${COMPREPLY[@]}" | LC_ALL=C sort)
	want=$(printf '%s\n' "$@" | LC_ALL=C sort)
	[ "$got" = "$want" ] || fail "COMPREPLY is ($(echo $got)), expected ($(echo $want))"
}

# help_long_options CMD: the long options `wslock CMD --help` lists.
help_long_options() {
	"$WSLOCK" "$1" --help | grep -oE '^ +(-[A-Za-z], )?--[a-z][a-z-]*' |
		grep -oE -- '--[a-z][a-z-]*' | LC_ALL=C sort -u
}

@test "bash: the completion file is valid bash and registers _wslock" {
	run bash -n "$BASH_COMPLETION"
	[ "$status" -eq 0 ] || fail "bash -n: $output"
	declare -F _wslock >/dev/null
	run complete -p wslock
	[ "$status" -eq 0 ]
	[[ $output == *"-F _wslock"* ]] || fail "not registered: $output"
}

@test "bash: 'wslock <TAB>' offers the subcommands" {
	comp wslock ''
	only acquire release run inspect recover reclaim
	comp wslock re
	only release recover reclaim
	comp wslock -d /tmp ''
	has acquire inspect recover
	comp wslock --lock-dir=/tmp in
	only inspect
}

@test "bash: 'wslock -<TAB>' offers the global options" {
	comp wslock -
	has -d --lock-dir -h --help -V --version
	hasnt --timeout acquire
}

@test "bash: 'wslock run --<TAB>' offers run's options, --timeout and --nonblock among them" {
	comp wslock run --
	has --timeout --nonblock --conflict-exit-code --operation-id --purpose \
		--print-owner --retain-on-failure --reclaim-dead --lock-dir --quiet --help
	hasnt --owner --all --token --pid --yes
	comp wslock run -
	has -w -n -E -q -v -d --timeout
	comp wslock run --no
	only --nonblock
}

@test "bash: 'wslock inspect --<TAB>' offers --owner and --all" {
	comp wslock inspect --
	has --owner --all --pretty --lock-dir
	hasnt --timeout --nonblock --token
	comp wslock inspect --a
	only --all
}

@test "bash: every subcommand offers its own options" {
	comp wslock acquire --
	has --pid --timeout --nonblock --conflict-exit-code --operation-id --purpose --reclaim-dead --pretty
	hasnt --token --print-owner
	# release, recover and reclaim take -w/-n too (they bound the wait
	# for the registry), but not acquire's other options.
	comp wslock release --
	has --token --timeout --nonblock --pretty --quiet --verbose
	hasnt --pid --conflict-exit-code
	comp wslock recover --
	has --expected-owner --force --reason --retain-on-failure --print-owner --timeout --nonblock --pretty
	hasnt --yes --conflict-exit-code
	comp wslock reclaim --
	has --yes --force --reason --timeout --nonblock --pretty
	hasnt --expected-owner --conflict-exit-code
	comp wslock -d /tmp reclaim --y
	only --yes
}

@test "bash: the workspace completes to directories only" {
	mkdir -p "$BATS_TEST_TMPDIR/t/alpha" "$BATS_TEST_TMPDIR/t/beta dir" "$BATS_TEST_TMPDIR/t/apple.d"
	: >"$BATS_TEST_TMPDIR/t/afile"
	cd "$BATS_TEST_TMPDIR/t"
	comp wslock acquire a
	only alpha apple.d
	comp wslock run -w 5 --purpose x ''
	only alpha 'beta dir' apple.d
	comp wslock inspect b
	only 'beta dir'
	comp wslock release --token 0123 al
	only alpha
	comp wslock recover --expected-owner o.json al
	only alpha
	comp wslock reclaim alpha ''
	only alpha 'beta dir' apple.d
	comp wslock inspect --all ''
	only
}

@test "bash: -d / --lock-dir complete directories, before and after the subcommand" {
	mkdir -p "$BATS_TEST_TMPDIR/t/regdir"
	: >"$BATS_TEST_TMPDIR/t/regfile"
	cd "$BATS_TEST_TMPDIR/t"
	comp wslock -d reg
	only regdir
	comp wslock --lock-dir reg
	only regdir
	comp wslock acquire -d reg
	only regdir
	comp wslock inspect --lock-dir=reg
	only regdir
	# COMP_WORDBREAKS splits --lock-dir=DIR into three words.
	comp wslock inspect --lock-dir = reg
	only regdir
	# ... and the subcommand is still found after it.
	comp wslock --lock-dir = regdir inspect --ow
	only --owner
}

@test "bash: --expected-owner completes files (and - for stdin)" {
	mkdir -p "$BATS_TEST_TMPDIR/t/osub"
	: >"$BATS_TEST_TMPDIR/t/owner.json"
	: >"$BATS_TEST_TMPDIR/t/other.txt"
	cd "$BATS_TEST_TMPDIR/t"
	comp wslock recover --expected-owner ow
	only owner.json
	comp wslock recover --expected-owner o
	only owner.json other.txt osub
	comp wslock recover --expected-owner ''
	has - owner.json other.txt osub
	comp wslock recover --expected-owner=ow
	only owner.json
	# The word after the file is the workspace again: directories.
	comp wslock recover --expected-owner owner.json o
	only osub
}

@test "bash: --backend and --format complete their values" {
	comp wslock --backend ''
	only local etcd
	comp wslock --backend etcd ''
	has acquire inspect
	comp wslock inspect --backend e
	only etcd
	comp wslock inspect --format ''
	only json text
	comp wslock reclaim --format=t
	only text
	comp wslock run --
	has --backend --etcd-endpoints --etcd-prefix --lease-ttl
	hasnt --format
}

@test "bash: option arguments that are free text complete nothing" {
	comp wslock run --purpose ''
	only
	comp wslock acquire -w ''
	only
	comp wslock release --token ''
	only
	comp wslock reclaim --force --reason ''
	only
}

@test "bash: after -- in run, recover and reclaim, a command is completed" {
	mkdir -p "$BATS_TEST_TMPDIR/t/ws"
	: >"$BATS_TEST_TMPDIR/t/ws/data.txt"
	cd "$BATS_TEST_TMPDIR/t"
	comp wslock run ws -- bas
	has bash
	comp wslock recover --expected-owner o.json ws -- bas
	has bash
	comp wslock reclaim --yes ws -- bas
	has bash
	# Options after -- belong to the command, not to wslock.
	comp wslock run ws -- bash --
	hasnt --timeout --nonblock
	comp wslock run ws -- cat ws/da
	has ws/data.txt
}

@test "bash: after run's workspace, -- is offered" {
	mkdir -p "$BATS_TEST_TMPDIR/t/ws"
	cd "$BATS_TEST_TMPDIR/t"
	comp wslock run ws ''
	only --
	comp wslock run ws --
	has -- --timeout
}

@test "bash: completions and the man page know every option of every subcommand's --help" {
	[ -x "$WSLOCK" ] || skip "wslock binary not built at $WSLOCK"
	local c o missing=
	for c in acquire release run inspect recover reclaim; do
		if ! "$WSLOCK" "$c" --help >/dev/null 2>&1; then
			echo "# $c --help fails (not in this binary yet)" >&3
			continue
		fi
		comp wslock "$c" --
		for o in $(help_long_options "$c"); do
			has "$o" || missing+=" bash:$c:$o"
			grep -qF -- "$(sed 's/-/\\-/g' <<<"$o")" "$MANPAGE" || missing+=" man:$c:$o"
			grep -qE -- "$o([^a-z-]|\$)" "$ZSH_COMPLETION" || missing+=" zsh:$c:$o"
			grep -qE -- "-l ${o#--}([^a-z-]|\$)" "$FISH_COMPLETION" || missing+=" fish:$c:$o"
		done
	done
	[ -z "$missing" ] || fail "options of --help not covered:$missing"
}

@test "zsh: completions/_wslock parses (zsh -n) and starts with #compdef wslock" {
	[ "$(head -n1 "$ZSH_COMPLETION")" = "#compdef wslock" ]
	command -v zsh >/dev/null || skip "zsh is not installed"
	run zsh -n "$ZSH_COMPLETION"
	[ "$status" -eq 0 ] || fail "zsh -n: $output"
	[ -z "$output" ] || fail "zsh -n printed: $output"
}

@test "zsh: _wslock loads under compinit" {
	command -v zsh >/dev/null || skip "zsh is not installed"
	run zsh -f -c '
		fpath=("$1" $fpath)
		autoload -Uz compinit && compinit -u -d "$2/zcompdump"
		[[ ${_comps[wslock]} == _wslock ]] || { print "not registered: ${_comps[wslock]}"; exit 1 }
		autoload -Uz +X _wslock || exit 1
		print ok' zsh "$TOP/completions" "$BATS_TEST_TMPDIR"
	[ "$status" -eq 0 ] || fail "zsh: $output"
	[ "$output" = ok ] || fail "zsh: $output"
}

@test "fish: completions/wslock.fish parses (fish -n)" {
	command -v fish >/dev/null || skip "fish is not installed"
	run fish -n "$FISH_COMPLETION"
	[ "$status" -eq 0 ] || fail "fish -n: $output"
	[ -z "$output" ] || fail "fish -n printed: $output"
}

@test "fish: completing subcommands and options" {
	command -v fish >/dev/null || skip "fish is not installed"
	mkdir -p "$BATS_TEST_TMPDIR/t/wsdir"
	: >"$BATS_TEST_TMPDIR/t/owner.json"
	cd "$BATS_TEST_TMPDIR/t"
	run fish --no-config -c "source '$FISH_COMPLETION'; complete -C 'wslock '"
	[ "$status" -eq 0 ] || fail "fish: $output"
	for w in acquire release run inspect recover reclaim; do
		grep -q "^$w\b" <<<"$output" || fail "fish: no $w in: $output"
	done
	run fish --no-config -c "source '$FISH_COMPLETION'; complete -C 'wslock run --'"
	grep -q '^--timeout\b' <<<"$output" || fail "fish: no --timeout in: $output"
	grep -q '^--nonblock\b' <<<"$output" || fail "fish: no --nonblock in: $output"
	! grep -q '^--owner\b' <<<"$output" || fail "fish: --owner offered for run: $output"
	run fish --no-config -c "source '$FISH_COMPLETION'; complete -C 'wslock inspect --'"
	grep -q '^--owner\b' <<<"$output" || fail "fish: no --owner in: $output"
	grep -q '^--all\b' <<<"$output" || fail "fish: no --all in: $output"
	run fish --no-config -c "source '$FISH_COMPLETION'; complete -C 'wslock acquire ws'"
	grep -q '^wsdir/' <<<"$output" || fail "fish: no wsdir/ in: $output"
	run fish --no-config -c "source '$FISH_COMPLETION'; complete -C 'wslock recover --expected-owner own'"
	grep -q '^owner.json' <<<"$output" || fail "fish: no owner.json in: $output"
	run fish --no-config -c "source '$FISH_COMPLETION'; complete -C 'wslock run wsdir -- bas'"
	grep -q '^bash\b' <<<"$output" || fail "fish: no bash after --: $output"
}

@test "man: mandoc -Tlint man/wslock.1 prints nothing" {
	command -v mandoc >/dev/null || skip "mandoc is not installed"
	run mandoc -Tlint "$MANPAGE"
	[ -z "$output" ] || fail "mandoc -Tlint: $output"
	[ "$status" -eq 0 ]
}

@test "man: the page renders with every section and fits 80 columns" {
	command -v mandoc >/dev/null || skip "mandoc is not installed"
	run mandoc -Tascii -O width=78 "$MANPAGE"
	[ "$status" -eq 0 ]
	local s plain
	plain=$(sed 's/.\x08//g' <<<"$output")
	for s in NAME SYNOPSIS DESCRIPTION COMMANDS 'OWNER DOCUMENT' LIVENESS \
		REGISTRY ENVIRONMENT 'EXIT STATUS' RECOVERY EXAMPLES 'SEE ALSO'; do
		grep -q "^$s\$" <<<"$plain" || fail "no section $s"
	done
	for s in WSLOCK_DIR XDG_STATE_HOME WSLOCK_HOST WSLOCK_ALLOW_NETWORK_FS \
		WSLOCK_BACKEND WSLOCK_ETCD_ENDPOINTS WSLOCK_WORKSPACE WSLOCK_TOKEN \
		WSLOCK_OWNER WSLOCK_FENCE 'flock(1)' 'lslocks(8)'; do
		grep -qF "$s" <<<"$plain" || fail "man page does not mention $s"
	done
	! awk 'length > 80 { print; bad = 1 } END { exit !bad }' <<<"$plain" ||
		fail "lines wider than 80 columns"
}
