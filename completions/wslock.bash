# bash completion for wslock(1)                         -*- shell-script -*-
#
# Install as $(PREFIX)/share/bash-completion/completions/wslock.  Works with
# and without the bash-completion package: when its _command_offset is there,
# the command after `--` (run, recover, reclaim) is completed with that
# command's own completion.

_wslock_subcommands='acquire release run inspect recover reclaim'
_wslock_global_opts='-d --lock-dir --backend --etcd-endpoints --etcd-prefix
	--lease-ttl --etcd-timeout --etcd-cacert --etcd-cert --etcd-key --etcd-user --pretty -q --quiet -v --verbose -h --help -V --version'
_wslock_common_opts='-d --lock-dir --backend --etcd-endpoints --etcd-prefix
	--lease-ttl --etcd-timeout --etcd-cacert --etcd-cert --etcd-key --etcd-user --pretty -q --quiet -v --verbose -h --help'

# _wslock_opts SUBCOMMAND: the options of SUBCOMMAND, common ones included.
_wslock_opts()
{
	local o
	case $1 in
	acquire)
		o='-w --timeout -n --nonblock -E --conflict-exit-code --pid
		   --operation-id --purpose --reclaim-dead --shared' ;;
	release)
		o='--token -w --timeout -n --nonblock --retain --reason' ;;
	run)
		o='-w --timeout -n --nonblock -E --conflict-exit-code
		   --operation-id --purpose --print-owner --retain-on-failure
		   --reclaim-dead --shared --kill-after' ;;
	inspect)
		o='--owner --all --format --operation-id --journal --registry --exit-status' ;;
	recover)
		o='--expected-owner --force --reason --retain-on-failure
		   --print-owner --kill-after -w --timeout -n --nonblock' ;;
	reclaim)
		o='-y --yes --force --reason --format -w --timeout -n --nonblock' ;;
	esac
	printf '%s\n' $o $_wslock_common_opts
}

# _wslock_takes_arg OPTION: true when OPTION consumes the next word.
_wslock_takes_arg()
{
	case $1 in
	-d | --lock-dir | -w | --timeout | -E | --conflict-exit-code | --pid | \
		--operation-id | --purpose | --token | --expected-owner | --reason | \
		--backend | --etcd-endpoints | --etcd-prefix | --lease-ttl | --etcd-timeout | --etcd-user | --etcd-cacert | \
		--etcd-cert | --etcd-key | --format | \
		--kill-after)
		return 0 ;;
	esac
	return 1
}

_wslock_dirs()
{
	local IFS=$'\n'
	compopt -o filenames 2>/dev/null || :
	COMPREPLY+=($(compgen -d -- "$1" || :))
}

_wslock_files()
{
	local IFS=$'\n'
	compopt -o filenames 2>/dev/null || :
	COMPREPLY+=($(compgen -f -- "$1" || :))
}

# _wslock_optarg OPTION CUR: complete the argument of OPTION.
_wslock_optarg()
{
	case $1 in
	-d | --lock-dir)
		_wslock_dirs "$2" ;;
	--expected-owner)
		[[ $2 == - || -z $2 ]] && COMPREPLY+=(-)
		_wslock_files "$2" ;;
	--pid)
		COMPREPLY=($(compgen -W "$(command ls /proc 2>/dev/null |
			command grep -E '^[0-9]+$')" -- "$2" || :)) ;;
	--backend)
		COMPREPLY=($(compgen -W 'local etcd' -- "$2" || :)) ;;
	--format)
		COMPREPLY=($(compgen -W 'json text' -- "$2" || :)) ;;
	-E | --conflict-exit-code)
		COMPREPLY=($(compgen -W '0 1 75' -- "$2" || :)) ;;
	*)
		# -w, --operation-id, --purpose, --token, --reason, --etcd-*,
		# --lease-ttl: free text.
		COMPREPLY=() ;;
	esac
}

_wslock()
{
	local IFS=$' \t\n'
	local cur=${COMP_WORDS[COMP_CWORD]} prev=
	local i w sub= subi=0 dashdash=0 npos=0 optarg=

	COMPREPLY=()
	((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}

	# Walk the words before the cursor: global options, the subcommand,
	# its options (skipping their arguments), positionals and `--`.
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		if ((dashdash)); then
			continue
		fi
		if [[ $w == = ]]; then
			# COMP_WORDBREAKS split --opt=value: the value follows.
			i=$((i + 1))
			continue
		fi
		if [[ $w == -- && -n $sub ]]; then
			dashdash=$i
			continue
		fi
		if [[ $w == -* ]]; then
			if [[ $w != *=* ]] && _wslock_takes_arg "$w" &&
				[[ ${COMP_WORDS[i + 1]} != = ]]; then
				i=$((i + 1))
			fi
			continue
		fi
		if [[ -z $sub ]]; then
			sub=$w
			subi=$i
		else
			npos=$((npos + 1))
		fi
	done

	# After `--`: a command and its arguments.
	if ((dashdash)); then
		if declare -F _command_offset >/dev/null; then
			_command_offset $((dashdash + 1))
		elif ((COMP_CWORD == dashdash + 1)); then
			COMPREPLY=($(compgen -c -- "$cur" || :))
		else
			_wslock_files "$cur"
		fi
		return 0
	fi

	# The argument of an option: `-d DIR`, `--lock-dir=DIR`, `--lock-dir = DIR`.
	if [[ $cur == --*=* ]]; then
		optarg=${cur%%=*}
		cur=${cur#*=}
	elif [[ $cur == = && $prev == --* ]]; then
		optarg=$prev
		cur=
	elif [[ $prev == = ]] && ((COMP_CWORD >= 2)); then
		optarg=${COMP_WORDS[COMP_CWORD - 2]}
	elif _wslock_takes_arg "$prev"; then
		# Only when prev is not itself the argument of an option.
		local pp=
		((COMP_CWORD >= 2)) && pp=${COMP_WORDS[COMP_CWORD - 2]}
		if ! _wslock_takes_arg "$pp"; then
			optarg=$prev
		fi
	fi
	if [[ -n $optarg ]]; then
		if _wslock_takes_arg "$optarg"; then
			_wslock_optarg "$optarg" "$cur"
		fi
		return 0
	fi

	if [[ -z $sub ]]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "$_wslock_global_opts" -- "$cur" || :))
		else
			COMPREPLY=($(compgen -W "$_wslock_subcommands" -- "$cur" || :))
		fi
		return 0
	fi

	case $sub in
	acquire | release | run | inspect | recover | reclaim) ;;
	*) return 0 ;;
	esac

	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(_wslock_opts "$sub")" -- "$cur" || :))
		case $sub in
		run | recover | reclaim)
			((npos > 0)) && [[ -- == "$cur"* ]] && COMPREPLY+=(--) ;;
		esac
		return 0
	fi

	# Positionals: WORKSPACE... (recover: one), then `--` and a command
	# for run, recover and reclaim. After run's first workspace an empty
	# word offers `--`, a started one a further workspace.
	case $sub in
	reclaim)
		_wslock_dirs "$cur" ;;
	inspect)
		# inspect --all, --registry and --operation-id take no workspace.
		local a
		for a in "${COMP_WORDS[@]:subi:COMP_CWORD-subi}"; do
			[[ $a == --all || $a == --registry || $a == --operation-id* ]] && return 0
		done
		_wslock_dirs "$cur" ;;
	run | recover)
		if ((npos == 0)); then
			_wslock_dirs "$cur"
		elif [[ -z $cur ]]; then
			COMPREPLY=(--)
		elif [[ $sub == run ]]; then
			_wslock_dirs "$cur"
		fi ;;
	*)
		_wslock_dirs "$cur" ;;
	esac
	return 0
}

complete -F _wslock wslock

# ex: filetype=sh noexpandtab
