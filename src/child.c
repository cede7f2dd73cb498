/* child.c - running a command under a held lock (run, recover, reclaim).
 *
 * The child inherits exactly one descriptor of ours: the holder's live file,
 * flock()ed exclusively (DESIGN.md section 4). While the child, or anything
 * it started, keeps it open the lock stays live even if wslock itself is
 * killed. Every other descriptor is O_CLOEXEC.
 *
 * No signal handler runs at all: the signals wslock cares about are blocked
 * and read from a signalfd. SIGINT and SIGQUIT are left to the child (the
 * terminal sends them to the whole process group, as with system(3));
 * SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 are forwarded to it. The child gets
 * the original signal mask back before exec.
 */
#include "child.h"
#include "spawn.h"
#include "output.h"
#include "fsx.h"
#include "keeper.h"
#include "platform.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int child_block_signals(sigset_t *orig, struct wsl_error *err)
{
	static const int sigs[] = { SIGINT, SIGQUIT, SIGTERM, SIGHUP,
				    SIGUSR1, SIGUSR2, SIGCHLD };
	sigset_t mask;
	size_t i;
	int fd;

	sigemptyset(&mask);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&mask, sigs[i]);
	if (sigprocmask(SIG_BLOCK, &mask, orig) != 0)
		return wsl_error_errno(err, WSL_OS, errno, "sigprocmask");
	fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (fd < 0)
		return wsl_error_errno(err, WSL_OS, errno, "signalfd");
	return fd;
}

/* WSLOCK_WORKSPACES (wss[0..n), one a line) and WSLOCK_OWNERS (the JSON
 * array of os[0..n)), for a run of one workspace too, so that a script
 * reads them the same way either way. */
static int set_child_env_all(const struct owner *os, size_t n, const char *const *wss,
			     struct wsl_error *err)
{
	size_t len = 1;
	json_t *owners = json_array();
	char *list, *doc;
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		len += strlen(wss[i]) + 1;
	list = malloc(len);
	for (size_t i = 0; owners != NULL && i < n; i++)
		json_array_append_new(owners, owner_to_json(&os[i]));
	doc = owners != NULL ? json_dumps(owners, JSON_COMPACT) : NULL;
	json_decref(owners);
	if (list == NULL || doc == NULL) {
		free(list);
		free(doc);
		return wsl_error_set(err, WSL_INTERNAL, "cannot format the owner documents");
	}
	snprintf(list, len, "%s", wss[0]);
	for (size_t i = 1, at = strlen(list); i < n; i++)
		at += (size_t)snprintf(list + at, len - at, "\n%s", wss[i]);
	if (setenv("WSLOCK_WORKSPACES", list, 1) != 0 || setenv("WSLOCK_OWNERS", doc, 1) != 0)
		rc = wsl_error_errno(err, WSL_OS, errno, "cannot set the environment");
	free(list);
	free(doc);
	return rc;
}

/* The child's environment: its workspaces wss[0..n) (their own, for a
 * nested run below the outer's workspace) and the owners os[0..n) of the
 * locks it runs under (WSLOCK_WORKSPACE, WSLOCK_OWNER and WSLOCK_TOKEN:
 * the first's). */
static int set_child_env(const struct registry *reg, const struct owner *os, size_t n,
			 const char *const *wss, struct wsl_error *err)
{
	const char *workspace = wss[0];
	const struct owner *o = &os[0];
	char *doc = owner_format(o, false);
	char fence[32];
	int rc = 0;

	if (doc == NULL)
		return wsl_error_set(err, WSL_INTERNAL, "cannot format the owner document");
	snprintf(fence, sizeof(fence), "%lld", reg->fence);
	if (setenv("WSLOCK_WORKSPACE", workspace, 1) != 0 ||
	    setenv("WSLOCK_TOKEN", o->token, 1) != 0 ||
	    setenv("WSLOCK_OWNER", doc, 1) != 0 ||
	    (reg->fence > 0 ? setenv("WSLOCK_FENCE", fence, 1) : unsetenv("WSLOCK_FENCE")) != 0)
		rc = wsl_error_errno(err, WSL_OS, errno, "cannot set the environment");
	free(doc);
	return rc == 0 ? set_child_env_all(os, n, wss, err) : rc;
}

/* Reads one signal from the signalfd and forwards SIGTERM, SIGHUP, SIGUSR1
 * and SIGUSR2 to the command, once; SIGCHLD only wakes the loop, SIGINT
 * and SIGQUIT reached the command from the terminal already. */
static void forward_signal(int sigfd, pid_t child)
{
	struct signalfd_siginfo si;

	if (read(sigfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
		return;
	if (spawn_forwards((int)si.ssi_signo))
		kill(child, (int)si.ssi_signo);
}

/*
 * Forks the command and waits for it, forwarding signals. A lock that
 * lives on a lease is kept alive by its keeper instead (keeper.c), which
 * runs the command itself. Fills *wstatus; returns 0, or -1 with err (the
 * command has ended then).
 */
static int supervise(struct registry *reg, const struct owner *o,
		     const struct child *ch, int live_fd, int *wstatus,
		     struct wsl_error *err)
{
	struct spawn_fds fds;
	long next_ms, ttl_ms;
	pid_t child, got;

	if (registry_keepalive(reg, o, &next_ms, &ttl_ms, err) != 0)
		return -1;
	if (next_ms >= 0)	/* a lease: its keeper runs the command */
		return keeper_supervise(reg, o, ch, live_fd, wstatus, err);
	spawn_list_fds(live_fd, &fds);
	spawn_keep_fds(&fds, ch->more_fds, ch->n_more_fds);
	child = fork();
	if (child < 0)
		return wsl_error_errno(err, WSL_OS, errno, "cannot fork");
	if (child == 0)
		spawn_command(ch, live_fd, &fds);
	for (;;) {
		struct pollfd pfd = { ch->sigfd, POLLIN, 0 };

		got = waitpid(child, wstatus, WNOHANG);
		if (got == child)
			return 0;
		if (got < 0 && errno != EINTR)
			return wsl_error_errno(err, WSL_OS, errno, "waitpid");
		/* SIGCHLD is in the signalfd's set: the child's exit wakes this. */
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			return wsl_error_errno(err, WSL_OS, errno, "poll");
		forward_signal(ch->sigfd, child);
	}
}

char *child_retained_doc(const char *token, const char *reason, int exit_status,
			 int signo)
{
	char now[WSL_TIME_LEN + 1];
	json_t *doc;
	char *text;

	platform_now_iso(now);
	doc = json_object();
	json_object_set_new(doc, "reason", json_string(reason));
	json_object_set_new(doc, "exit_status", exit_status >= 0 ?
			    json_integer(exit_status) : json_null());
	json_object_set_new(doc, "signal", signo > 0 ? json_integer(signo) : json_null());
	json_object_set_new(doc, "retained_at", json_string(now));
	json_object_set_new(doc, "token", json_string(token));
	text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	return text;
}

/* retained.json for a child that ended with wstatus: the status or signal
 * as the reason. */
static char *retained_doc(const struct owner *o, int wstatus)
{
	char reason[160];

	if (WIFSIGNALED(wstatus))
		snprintf(reason, sizeof(reason), "command died of signal %d (%s)",
			 WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)));
	else
		snprintf(reason, sizeof(reason), "command exited with status %d",
			 WEXITSTATUS(wstatus));
	return child_retained_doc(o->token, reason,
				  WIFSIGNALED(wstatus) ? -1 : WEXITSTATUS(wstatus),
				  WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0);
}

/*
 * Before the outer run lets go of o's lock (release or retain): takes the
 * lock's nested file exclusively, waiting while runs nested under it still
 * run (they hold it shared), and says so once. *nfd is kept until the lock
 * is gone. A failure here is reported and the release goes on: a nested
 * run keeps the live file it inherited, so nothing is displaced.
 */
static void wait_nested(struct cli *c, struct registry *reg, const struct owner *o,
			int *nfd)
{
	struct wsl_error err = { 0 };
	int rc;

	rc = registry_nest_lock(reg, o->workspace_root, o->token, LOCK_EX | LOCK_NB, nfd, &err);
	if (rc == NEST_LOCK_BUSY) {
		if (!c->quiet)
			output_notice("the command ended; waiting for the wslock runs nested under %s to end before releasing it",
				o->workspace_root);
		rc = registry_nest_lock(reg, o->workspace_root, o->token, LOCK_EX, nfd, &err);
	}
	if (rc < 0) {
		output_error(c, &err);
		wsl_error_clear(&err);
	}
}

/* After the command and the runs nested under it: keeps o's lock
 * retained (ch->retain_on_failure and a failed command) or releases it,
 * then stops the keeper. Returns wslock's exit status. */
static int let_go(struct cli *c, struct registry *reg, const struct owner *o,
		  const struct child *ch, int wstatus)
{
	struct wsl_error err = { 0 };
	int status = WIFSIGNALED(wstatus) ? 128 + WTERMSIG(wstatus) : WEXITSTATUS(wstatus);

	if (status != 0 && ch->retain_on_failure) {
		char *doc = retained_doc(o, wstatus);
		int rc = doc != NULL ? registry_retain(reg, o->workspace_root, o->token,
						       doc, &err) :
			wsl_error_set(&err, WSL_INTERNAL, "cannot format retained.json");
		free(doc);
		keeper_done();
		if (rc != 0) {
			output_error(c, &err);
			wsl_error_clear(&err);
			return status;
		}
		if (!c->quiet)
			output_notice("the command failed (status %d); the lock on %s is retained for recovery: see 'wslock inspect %s'",
				status, o->workspace_root, o->workspace_root);
		return status;
	}
	if (registry_release(reg, o->workspace_root, o->token, NULL, &err) != 0) {
		keeper_done();
		if (err.code == WSL_BACKEND_UNAVAILABLE) {
			/* The command finished: its status is the answer. The
			 * lock stays, and reads as dead once its lease runs
			 * out (recovery required): say so, not 69. */
			output_notice("the command finished, but the lock of %s could not be released (%s): it is left held, dead once its lease runs out; see 'wslock inspect %s'",
				o->workspace_root, err.message, o->workspace_root);
			wsl_error_clear(&err);
			return status;
		}
		if (err.code == WSL_NOT_HELD)
			wsl_error_set(&err, WSL_OWNERSHIP_LOST,
				      "the lock of %s was removed while this command held it; nothing released",
				      o->workspace_root);
		status = output_error(c, &err);
		wsl_error_clear(&err);
		return status;
	}
	keeper_done();
	return status;
}

/* let_go of the n locks of os[0..n) (workspaces wss) at once, released
 * all or none (registry_release_multi: one etcd transaction); status is
 * the command's. Returns wslock's exit status. */
static int let_go_all(struct cli *c, struct registry *reg, const struct owner *os,
		      const char *const *wss, size_t n, int status)
{
	struct wsl_error err = { 0 };

	if (registry_release_multi(reg, wss, n, os[0].token, NULL, &err) == 0) {
		keeper_done();
		return status;
	}
	keeper_done();
	if (err.code == WSL_BACKEND_UNAVAILABLE) {
		output_notice("the command finished, but the locks of %s and the other %zu workspaces could not be released (%s): they are left held, dead once their lease runs out; see 'wslock inspect %s'",
			      wss[0], n - 1, err.message, wss[0]);
		wsl_error_clear(&err);
		return status;
	}
	if (err.code == WSL_NOT_HELD)
		wsl_error_set(&err, WSL_OWNERSHIP_LOST,
			      "the lock of %s was removed while this command held it; nothing released",
			      err.workspace_root != NULL ? err.workspace_root : wss[0]);
	status = output_error(c, &err);
	wsl_error_clear(&err);
	return status;
}

int child_run_held(struct cli *c, struct registry *reg, const struct owner *o,
		   int live_fd, const struct child *ch)
{
	return child_run_held_multi(c, reg, o, 1, &live_fd, ch);
}

int child_run_held_multi(struct cli *c, struct registry *reg, const struct owner *os,
			 size_t n, int *live_fds, const struct child *ch)
{
	struct wsl_error err = { 0 };
	struct child run = *ch;
	int wstatus = 0, status, wstatus_ok, nfd[REGISTRY_MULTI_MAX];
	const char *wss[REGISTRY_MULTI_MAX] = { NULL };
	size_t i;

	for (i = 0; i < n; i++)
		wss[i] = os[i].workspace_root;
	/* The command inherits every live file: each lock is live while
	 * it runs, even if this wslock is killed. */
	run.more_fds = live_fds + 1;
	run.n_more_fds = (int)n - 1;
	if (set_child_env(reg, os, n, wss, &err) != 0 ||
	    supervise(reg, &os[0], &run, live_fds[0], &wstatus, &err) != 0) {
		/* The child never ran, or the lock was lost under it: release
		 * what is still ours (never another owner's), then report. A
		 * lost lock is not ours: no release to wait for. */
		struct wsl_error rerr = { 0 };
		for (i = 0; i < n; i++) {
			if (err.code != WSL_OWNERSHIP_LOST)
				registry_release(reg, os[i].workspace_root, os[i].token, NULL, &rerr);
			wsl_error_clear(&rerr);
			fsx_close(live_fds[i]);
		}
		keeper_done();
		status = output_error(c, &err);
		wsl_error_clear(&err);
		return status;
	}
	/* The outer does not let go while runs nested under it still run;
	 * and the release waits for the registry as long as it must (-w/-n
	 * bounded getting the lock, not giving it back). */
	registry_coord_bound(reg, false, -1);
	for (i = 0; i < n; i++) {
		nfd[i] = -1;
		wait_nested(c, reg, &os[i], &nfd[i]);
	}
	/* Each lock is let go (released, or retained on failure) even when
	 * another one's fails: that one's error is the status. */
	status = WIFSIGNALED(wstatus) ? 128 + WTERMSIG(wstatus) : WEXITSTATUS(wstatus);
	if (n > 1 && !(status != 0 && ch->retain_on_failure) &&
	    strcmp(registry_backend(reg), "etcd") == 0) {
		/* etcd: the set is released whole, in one transaction. */
		status = let_go_all(c, reg, os, wss, n, status);
	} else {
		for (i = 0, wstatus_ok = status; i < n; i++) {
			int s = let_go(c, reg, &os[i], ch, wstatus);
			if (s != wstatus_ok)
				status = s;
		}
	}
	for (i = 0; i < n; i++) {
		fsx_close(live_fds[i]);
		fsx_close(nfd[i]);
	}
	return status;
}

int child_run_nested(struct cli *c, struct registry *reg, const struct lock_entry *outer,
		     const char *workspace, int nest_fd, const struct child *ch)
{
	return child_run_nested_multi(c, reg, &outer->owner, 1, &workspace, &nest_fd, ch);
}

int child_run_nested_multi(struct cli *c, struct registry *reg, const struct owner *outers,
			   size_t n, const char *const *wss, int *nest_fds,
			   const struct child *ch)
{
	struct wsl_error err = { 0 };
	struct child run = *ch;
	int wstatus = 0, status;
	size_t i;

	/* The command inherits every nested file it holds shared. */
	run.more_fds = nest_fds + 1;
	run.n_more_fds = (int)n - 1;
	if (set_child_env(reg, outers, n, wss, &err) != 0 ||
	    supervise(reg, &outers[0], &run, nest_fds[0], &wstatus, &err) != 0)
		status = output_error(c, &err);
	else
		status = WIFSIGNALED(wstatus) ? 128 + WTERMSIG(wstatus) : WEXITSTATUS(wstatus);
	wsl_error_clear(&err);
	/* LOCK_UN first: a daemon the command left behind holds a copy of
	 * the descriptor, and must not keep the outer run waiting. */
	for (i = 0; i < n; i++) {
		fsx_flock(nest_fds[i], LOCK_UN);
		fsx_close(nest_fds[i]);
	}
	return status;
}
