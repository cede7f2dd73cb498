/* child.h - running a command under a held lock (run, recover, reclaim):
 * signals, keeping the lock alive, the child's descriptors and environment.
 * Like the rest of the command layer it may print; it reports through
 * output_error. */
#ifndef WSLOCK_CHILD_H
#define WSLOCK_CHILD_H

#include <signal.h>
#include <stdbool.h>

#include "cli.h"
#include "registry.h"
#include "spawn.h"

/*
 * Blocks SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 and SIGCHLD and
 * returns a signalfd (O_CLOEXEC, non-blocking) reading them; the previous
 * mask goes to *orig. -1 with err on failure.
 */
int child_block_signals(sigset_t *orig, struct wsl_error *err);

/*
 * retained.json (doc/schema/retained.schema.json) for the owner with
 * token, retained now for reason (a NUL-terminated text): exit_status
 * (0..255; -1: null) and signo (the signal that ended the command; 0:
 * null). The one writer of that document, for run and recover
 * --retain-on-failure, reclaim's failed cleanup and release --retain.
 * Returns a malloc'ed NUL-terminated text, or NULL out of memory.
 */
char *child_retained_doc(const char *token, const char *reason, int exit_status,
			 int signo);

/*
 * Runs ch->cmd as a child while o's lock is held (live_fd is the holder's
 * live file: the child inherits it, the one descriptor it gets from us),
 * with WSLOCK_WORKSPACE, WSLOCK_TOKEN and WSLOCK_OWNER set; SIGTERM, SIGHUP,
 * SIGUSR1 and SIGUSR2 are forwarded, SIGINT and SIGQUIT left to the child.
 * Then releases the lock, or with retain_on_failure and a failed child
 * marks it retained. Closes live_fd. Returns the exit status for wslock:
 * the child's (128+N for signal N), or the error's (78 when the lock was
 * taken over meanwhile), after reporting it.
 */
int child_run_held(struct cli *c, struct registry *reg, const struct owner *o,
		   int live_fd, const struct child *ch);

/*
 * child_run_held for the n locks of os[0..n) taken at once
 * (hold_acquire_multi): the child inherits every live file
 * (live_fds[0..n)), gets WSLOCK_WORKSPACE, WSLOCK_TOKEN and WSLOCK_OWNER
 * of the first and WSLOCK_WORKSPACES (one a line) and WSLOCK_OWNERS (a
 * JSON array) of all; then each lock is released (or retained), each
 * after the runs nested under it. Closes the live files. n == 1 is
 * child_run_held, which sets WSLOCK_WORKSPACES and WSLOCK_OWNERS alike.
 */
int child_run_held_multi(struct cli *c, struct registry *reg, const struct owner *os,
			 size_t n, int *live_fds, const struct child *ch);

/*
 * A run nested under outer's lock (proven by nest_find) on
 * workspace (outer's or below it): runs ch->cmd like child_run_held,
 * with WSLOCK_WORKSPACE set to workspace and WSLOCK_TOKEN/WSLOCK_OWNER to
 * outer's owner, keeping nest_fd (the lock's nested file, LOCK_SH, from
 * registry_nest_lock) open in the child, so that the outer run does not
 * let go of the lock while the command runs, even if this wslock is
 * killed. Unlocks and closes nest_fd. Returns the command's status
 * (128+N for signal N), or the error's after reporting it.
 */
int child_run_nested(struct cli *c, struct registry *reg, const struct lock_entry *outer,
		     const char *workspace, int nest_fd, const struct child *ch);

/*
 * child_run_nested for a run of several workspaces wss[0..n) each inside
 * an enclosing holder's lock (outers[i], whose nested file the caller
 * holds LOCK_SH in nest_fds[i]; one outer may cover several): the command
 * inherits every nested file and gets WSLOCK_WORKSPACES (wss) and
 * WSLOCK_OWNERS (outers) beside the first's WSLOCK_WORKSPACE,
 * WSLOCK_TOKEN and WSLOCK_OWNER. Unlocks and closes every nest_fds[i].
 * Returns as child_run_nested.
 */
int child_run_nested_multi(struct cli *c, struct registry *reg, const struct owner *outers,
			   size_t n, const char *const *wss, int *nest_fds,
			   const struct child *ch);

#endif
