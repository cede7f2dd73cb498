/* supervise.c - running a command under a held lock (run, recover, reclaim).
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
#include "cli.h"
#include "fsx.h"
#include "platform.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

int cli_block_signals(sigset_t *orig, struct wsl_error *err)
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

void cli_default_purpose(const char *prefix, char **cmd,
			 char out[OWNER_PURPOSE_MAX + 1])
{
	size_t len, i;

	len = (size_t)snprintf(out, OWNER_PURPOSE_MAX + 1, "%s", prefix);
	if (len > OWNER_PURPOSE_MAX)
		len = OWNER_PURPOSE_MAX;
	for (; *cmd != NULL && len < OWNER_PURPOSE_MAX; cmd++) {
		out[len++] = ' ';
		for (i = 0; (*cmd)[i] != '\0' && len < OWNER_PURPOSE_MAX; i++) {
			unsigned char ch = (unsigned char)(*cmd)[i];
			out[len++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
		}
	}
	out[len] = '\0';
}

int cli_split_command(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0)
			return i;
	return argc;
}

void cli_exec(char **cmd)
{
	int e;

	execvp(cmd[0], cmd);
	e = errno;
	fprintf(stderr, "wslock: cannot run %s: %s\n", cmd[0], strerror(e));
	_exit(e == ENOENT ? 127 : 126);
}

static int set_child_env(const struct owner *o, struct wsl_error *err)
{
	char *doc = owner_format(o, false);
	int rc = 0;

	if (doc == NULL)
		return wsl_error_set(err, WSL_INTERNAL, "cannot format the owner document");
	if (setenv("WSLOCK_WORKSPACE", o->workspace_root, 1) != 0 ||
	    setenv("WSLOCK_TOKEN", o->token, 1) != 0 ||
	    setenv("WSLOCK_OWNER", doc, 1) != 0)
		rc = wsl_error_errno(err, WSL_OS, errno, "cannot set the environment");
	free(doc);
	return rc;
}

/* Forks and waits; fills *wstatus. Returns 0 or -1 with err. */
static int supervise(const struct cli_child *ch, int live_fd, int *wstatus,
		     struct wsl_error *err)
{
	pid_t child, got;

	child = fork();
	if (child < 0)
		return wsl_error_errno(err, WSL_OS, errno, "cannot fork");
	if (child == 0) {
		int flags = fcntl(live_fd, F_GETFD);
		if (flags >= 0)
			fcntl(live_fd, F_SETFD, flags & ~FD_CLOEXEC);
		sigprocmask(SIG_SETMASK, ch->orig_mask, NULL);
		if (ch->stdout_to_stderr && dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
			_exit(126);
		if (ch->cwd != NULL && chdir(ch->cwd) != 0) {
			fprintf(stderr, "wslock: cannot enter %s: %s\n", ch->cwd,
				strerror(errno));
			_exit(126);
		}
		cli_exec(ch->cmd);
	}
	for (;;) {
		struct signalfd_siginfo si;
		struct pollfd pfd = { ch->sigfd, POLLIN, 0 };
		ssize_t n;

		got = waitpid(child, wstatus, WNOHANG);
		if (got == child)
			return 0;
		if (got < 0 && errno != EINTR)
			return wsl_error_errno(err, WSL_OS, errno, "waitpid");
		/* SIGCHLD is in the signalfd's set: the child's exit wakes this. */
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			return wsl_error_errno(err, WSL_OS, errno, "poll");
		n = read(ch->sigfd, &si, sizeof(si));
		if (n != (ssize_t)sizeof(si))
			continue;
		switch (si.ssi_signo) {
		case SIGTERM:
		case SIGHUP:
		case SIGUSR1:
		case SIGUSR2:
			kill(child, (int)si.ssi_signo);
			break;
		default:
			break;	/* SIGCHLD: back to waitpid; SIGINT, SIGQUIT: the child's */
		}
	}
}

/* retained.json for a child that ended with wstatus. */
static char *retained_doc(const struct owner *o, int wstatus)
{
	char now[WSL_TIME_LEN + 1], reason[160];
	json_t *doc;
	char *text;

	platform_now_iso(now);
	if (WIFSIGNALED(wstatus))
		snprintf(reason, sizeof(reason), "command died of signal %d (%s)",
			 WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)));
	else
		snprintf(reason, sizeof(reason), "command exited with status %d",
			 WEXITSTATUS(wstatus));
	doc = json_object();
	json_object_set_new(doc, "reason", json_string(reason));
	json_object_set_new(doc, "exit_status", WIFSIGNALED(wstatus) ? json_null() :
			    json_integer(WEXITSTATUS(wstatus)));
	json_object_set_new(doc, "signal", WIFSIGNALED(wstatus) ?
			    json_integer(WTERMSIG(wstatus)) : json_null());
	json_object_set_new(doc, "retained_at", json_string(now));
	json_object_set_new(doc, "token", json_string(o->token));
	text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	return text;
}

int cli_run_held(struct cli *c, struct registry *reg, const struct owner *o,
		 int live_fd, const struct cli_child *ch)
{
	struct wsl_error err = { 0 };
	int wstatus = 0, status;

	if (set_child_env(o, &err) != 0 || supervise(ch, live_fd, &wstatus, &err) != 0) {
		/* The child never ran (or was lost): release, then report. */
		struct wsl_error rerr = { 0 };
		registry_release(reg, o->workspace_root, o->token, NULL, &rerr);
		wsl_error_clear(&rerr);
		fsx_close(live_fd);
		status = cli_fail(c, &err);
		wsl_error_clear(&err);
		return status;
	}
	status = WIFSIGNALED(wstatus) ? 128 + WTERMSIG(wstatus) : WEXITSTATUS(wstatus);
	if (status != 0 && ch->retain_on_failure) {
		char *doc = retained_doc(o, wstatus);
		int rc = doc != NULL ? registry_retain(reg, o->workspace_root, o->token,
						       doc, &err) :
			wsl_error_set(&err, WSL_INTERNAL, "cannot format retained.json");
		free(doc);
		fsx_close(live_fd);
		if (rc != 0) {
			cli_fail(c, &err);
			wsl_error_clear(&err);
			return status;
		}
		if (!c->quiet)
			fprintf(stderr, "wslock: the command failed (status %d); the lock on %s is retained for recovery: see 'wslock inspect %s'\n",
				status, o->workspace_root, o->workspace_root);
		return status;
	}
	if (registry_release(reg, o->workspace_root, o->token, NULL, &err) != 0) {
		if (err.code == WSL_NOT_HELD)
			wsl_error_set(&err, WSL_OWNERSHIP_LOST,
				      "the lock of %s was removed while this command held it; nothing released",
				      o->workspace_root);
		fsx_close(live_fd);
		status = cli_fail(c, &err);
		wsl_error_clear(&err);
		return status;
	}
	fsx_close(live_fd);
	return status;
}
