# fish completion for wslock(1).
# Install as $(PREFIX)/share/fish/vendor_completions.d/wslock.fish.

set -l __wslock_cmds acquire release run inspect recover reclaim

# __wslock_subcommand: print the subcommand on the command line, if any
# (skipping -d DIR / --lock-dir DIR before it).
function __wslock_subcommand
    set -l tokens (commandline -opc)
    set -e tokens[1]
    set -l skip 0
    for t in $tokens
        if test $skip -eq 1
            set skip 0
            continue
        end
        switch $t
            case -d --lock-dir --backend --etcd-endpoints --etcd-prefix --lease-ttl --etcd-timeout --etcd-cacert --etcd-cert --etcd-key --etcd-user
                set skip 1
            case '-*'
            case '*'
                echo $t
                return 0
        end
    end
    return 1
end

# __wslock_dashdash: true once `--` follows the subcommand.
function __wslock_dashdash
    set -l tokens (commandline -opc)
    __wslock_subcommand >/dev/null; or return 1
    contains -- -- $tokens
end

# __wslock_using CMD...: the subcommand is one of CMD and no `--` yet.
function __wslock_using
    set -l sub (__wslock_subcommand); or return 1
    contains -- $sub $argv; or return 1
    not __wslock_dashdash
end

# __wslock_command_line: complete the command line after `--`.
function __wslock_command_line
    set -l tokens (commandline -opc)
    set -l i (contains -i -- -- $tokens)
    set -l rest $tokens[(math $i + 1)..-1] (commandline -ct)
    complete -C (string join -- ' ' (string escape -- $rest[1..-2]) $rest[-1])
end

complete -c wslock -f

# Before the subcommand.
complete -c wslock -n 'not __wslock_subcommand' -s d -l lock-dir -r -f -a '(__fish_complete_directories)' -d 'Registry directory'
complete -c wslock -n 'not __wslock_subcommand' -l backend -x -a 'local etcd' -d 'Where locks live'
complete -c wslock -n 'not __wslock_subcommand' -l etcd-endpoints -x -d 'etcd client URLs, comma-separated'
complete -c wslock -n 'not __wslock_subcommand' -l etcd-prefix -x -d 'etcd key prefix'
complete -c wslock -n 'not __wslock_subcommand' -l lease-ttl -x -d 'etcd: lease of a holder, seconds'
complete -c wslock -n 'not __wslock_subcommand' -l etcd-cacert -r -F -d 'etcd: CA certificate'
complete -c wslock -n 'not __wslock_subcommand' -l etcd-cert -r -F -d 'etcd: client certificate'
complete -c wslock -n 'not __wslock_subcommand' -l etcd-key -r -F -d 'etcd: client key'
complete -c wslock -n 'not __wslock_subcommand' -l etcd-user -x -d 'etcd: user[:password]'
complete -c wslock -n 'not __wslock_subcommand' -l etcd-timeout -x -d 'etcd: request timeout, seconds'
complete -c wslock -n 'not __wslock_subcommand' -l pretty -d 'Indent JSON output'
complete -c wslock -n 'not __wslock_subcommand' -s q -l quiet -d 'No waiting notice or hints on stderr'
complete -c wslock -n 'not __wslock_subcommand' -s v -l verbose -d 'Say more on stderr'
complete -c wslock -n 'not __wslock_subcommand' -s h -l help -d 'Show help and exit'
complete -c wslock -n 'not __wslock_subcommand' -s V -l version -d 'Print the version and exit'
complete -c wslock -n 'not __wslock_subcommand' -a acquire -d 'Lock a workspace for a holder that outlives wslock'
complete -c wslock -n 'not __wslock_subcommand' -a release -d 'Release a lock taken by acquire'
complete -c wslock -n 'not __wslock_subcommand' -a run -d 'Hold the lock while a command runs'
complete -c wslock -n 'not __wslock_subcommand' -a inspect -d 'Show state, owner, liveness, overlaps'
complete -c wslock -n 'not __wslock_subcommand' -a recover -d 'Take over the lock of a dead owner'
complete -c wslock -n 'not __wslock_subcommand' -a reclaim -d 'Remove locks of provably dead owners'

# Common options of every subcommand.
set -l all "__wslock_using $__wslock_cmds"
complete -c wslock -n $all -s d -l lock-dir -r -f -a '(__fish_complete_directories)' -d 'Registry directory'
complete -c wslock -n $all -l backend -x -a 'local etcd' -d 'Where locks live'
complete -c wslock -n $all -l etcd-endpoints -x -d 'etcd client URLs, comma-separated'
complete -c wslock -n $all -l etcd-prefix -x -d 'etcd key prefix'
complete -c wslock -n $all -l lease-ttl -x -d 'etcd: lease of a holder (seconds)'
complete -c wslock -n $all -l etcd-cacert -r -F -d 'etcd: CA certificate'
complete -c wslock -n $all -l etcd-cert -r -F -d 'etcd: client certificate'
complete -c wslock -n $all -l etcd-key -r -F -d 'etcd: client key'
complete -c wslock -n $all -l etcd-user -x -d 'etcd: user[:password]'
complete -c wslock -n $all -l etcd-timeout -x -d 'etcd: request timeout (seconds)'
complete -c wslock -n $all -l pretty -d 'Indent JSON output'
complete -c wslock -n $all -s q -l quiet -d 'No waiting notice or hints on stderr'
complete -c wslock -n $all -s v -l verbose -d 'Say more on stderr'
complete -c wslock -n $all -s h -l help -d 'Show help and exit'

# The workspace: a directory.
complete -c wslock -n $all -a '(__fish_complete_directories)'

# acquire and run.
set -l wait '__wslock_using acquire run'
complete -c wslock -n $wait -s w -l timeout -x -d 'Give up after SECONDS (fractional)'
complete -c wslock -n $wait -s n -l nonblock -d 'Fail at once if the workspace is held'
complete -c wslock -n $wait -s E -l conflict-exit-code -x -a '0 1 75' -d 'Exit status when busy or timed out'
complete -c wslock -n $wait -l operation-id -x -d 'Operation id to record'
complete -c wslock -n $wait -l purpose -x -d 'Why the lock is held'
complete -c wslock -n $wait -l reclaim-dead -d 'First reclaim a provably dead owner'
complete -c wslock -n $wait -l shared -d 'Take a shared lock (many readers, no writer)'
complete -c wslock -n '__wslock_using acquire' -l pid -x -a '(__fish_complete_pids)' -d 'The holder process'

# release.
complete -c wslock -n '__wslock_using release' -l token -x -d 'The owner token from acquire'
complete -c wslock -n '__wslock_using release' -l retain -d 'Keep the lock retained for recovery, with --reason'
complete -c wslock -n '__wslock_using release' -l reason -x -d 'Why the lock is retained'

# release, recover and reclaim: -w and -n bound the wait for the registry.
set -l regwait '__wslock_using release recover reclaim'
complete -c wslock -n $regwait -s w -l timeout -x -d 'Give up waiting after SECONDS'
complete -c wslock -n $regwait -s n -l nonblock -d 'Do not wait'

# run and recover.
complete -c wslock -n '__wslock_using run recover' -l print-owner -d 'Write the owner document to stderr'
complete -c wslock -n '__wslock_using run recover' -l kill-after -x -d 'etcd: SIGKILL this long after SIGTERM on lease loss'
complete -c wslock -n '__wslock_using run recover' -l retain-on-failure -d 'Keep the lock if the command fails'
complete -c wslock -n '__wslock_using run recover reclaim' -a -- -d 'Then the command'

# inspect.
complete -c wslock -n '__wslock_using inspect' -l owner -d 'Print only the owner document'
complete -c wslock -n '__wslock_using inspect' -l all -d 'List every lock in the registry'
complete -c wslock -n '__wslock_using inspect' -l operation-id -x -d 'List the locks of one operation'
complete -c wslock -n '__wslock_using inspect' -l journal -d 'Print the audit journal'
complete -c wslock -n '__wslock_using inspect' -l registry -d 'Print where the registry is'
complete -c wslock -n '__wslock_using inspect' -l exit-status -d 'Exit with the worst state of it and overlapping locks: 0 free, 75 live, 69 dead/retained/unknown, 65 corrupt'

# recover and reclaim.
complete -c wslock -n '__wslock_using recover' -l expected-owner -r -F -a '-\t"Read the owner document from standard input"' -d 'Owner document to take over (- for stdin)'
complete -c wslock -n '__wslock_using recover reclaim' -l force -d 'Also unknown liveness (needs --reason)'
complete -c wslock -n '__wslock_using recover reclaim' -l reason -x -d 'Why the force is justified'
complete -c wslock -n '__wslock_using reclaim' -s y -l yes -d 'Reclaim instead of previewing'
complete -c wslock -n '__wslock_using inspect reclaim' -l format -x -a 'json text' -d 'Output format'

# After `--`: the command.
complete -c wslock -n __wslock_dashdash -x -a '(__wslock_command_line)'
