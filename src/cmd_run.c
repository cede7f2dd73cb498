/* cmd_run.c - wslock run WORKSPACE -- CMD...: hold the lock while CMD runs.
 *
 * The child inherits exactly one descriptor of ours: the holder's live file,
 * flock()ed exclusively (DESIGN.md section 4). While the child or anything
 * it started keeps it open, the lock stays live even if wslock itself is
 * killed. Every other descriptor is O_CLOEXEC.
 *
 * Signals: from the start, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1,
 * SIGUSR2 and SIGCHLD are blocked and read from a signalfd, so no handler
 * runs at all. While waiting for the lock, any of the first six ends the
 * wait (exit 128+N, nothing held). While CMD runs, SIGINT and SIGQUIT are
 * left to the child (the terminal sends them to the whole process group, as
 * with system(3)); SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 are forwarded to it.
 * The child gets the original signal mask back before exec.
 */
#include "cli.h"
#include "fsx.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

static const struct cli_option run_options[] = {
	CLI_WAIT_OPTIONS,
	{ "print-owner", OPT_PRINT_OWNER, no_argument, NULL,
	  "write the owner document to stderr once the lock is held" },
	CLI_OPT_END
};

struct run_args {
	struct cli_hold hold;
	bool print_owner;
};

static int run_option(int id, const char *arg, void *ctx, struct wsl_error *err)
{
	struct run_args *a = ctx;
	int rc = cli_hold_option(&a->hold, id, arg, err);

	if (rc != 0)
		return rc < 0 ? -1 : 0;
	if (id == OPT_PRINT_OWNER) {
		a->print_owner = true;
		return 0;
	}
	return wsl_error_set(err, WSL_USAGE, "unexpected option");
}

/* "run: make test" from argv, printable ASCII, at most 128 characters. */
static void default_purpose(char **cmd, char out[OWNER_PURPOSE_MAX + 1])
{
	size_t len = 0, i;

	len = (size_t)snprintf(out, OWNER_PURPOSE_MAX + 1, "run:");
	for (; *cmd != NULL && len < OWNER_PURPOSE_MAX; cmd++) {
		out[len++] = ' ';
		for (i = 0; (*cmd)[i] != '\0' && len < OWNER_PURPOSE_MAX; i++) {
			unsigned char ch = (unsigned char)(*cmd)[i];
			out[len++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
		}
	}
	out[len] = '\0';
}

/* Replaces the process with cmd; only returns... never. */
static void exec_command(char **cmd)
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

/* Runs cmd as a child, forwarding signals read from sigfd; returns the
 * child's exit status, 128+N when it died of signal N, or -1 with err. */
static int supervise(char **cmd, int live_fd, int sigfd, const sigset_t *orig,
		     struct wsl_error *err)
{
	pid_t child, got;
	int status;

	child = fork();
	if (child < 0)
		return wsl_error_errno(err, WSL_OS, errno, "cannot fork");
	if (child == 0) {
		/* The one inherited descriptor: the holder's live lock. */
		int flags = fcntl(live_fd, F_GETFD);
		if (flags >= 0)
			fcntl(live_fd, F_SETFD, flags & ~FD_CLOEXEC);
		sigprocmask(SIG_SETMASK, orig, NULL);
		exec_command(cmd);
	}
	for (;;) {
		struct signalfd_siginfo si;
		ssize_t n;

		got = waitpid(child, &status, WNOHANG);
		if (got == child)
			break;
		if (got < 0 && errno != EINTR)
			return wsl_error_errno(err, WSL_OS, errno, "waitpid");
		{
			/* SIGCHLD is in sigfd's set: its arrival wakes this. */
			struct pollfd pfd = { sigfd, POLLIN, 0 };
			if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
				return wsl_error_errno(err, WSL_OS, errno, "poll");
		}
		n = read(sigfd, &si, sizeof(si));
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			return wsl_error_errno(err, WSL_OS, errno, "signalfd");
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
			/* SIGCHLD: loop to waitpid; SIGINT, SIGQUIT: the child's. */
			break;
		}
	}
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

static int run_main(struct cli *c, int argc, char **argv)
{
	struct run_args a = { .hold.wait = { false, -1, -1, -1 }, .print_owner = false };
	char dir[PATH_MAX], ws[PATH_MAX], nested[PATH_MAX];
	char purpose[OWNER_PURPOSE_MAX + 1];
	struct wsl_error err = { 0 };
	struct registry reg;
	struct owner o;
	sigset_t mask, orig;
	const char *token;
	char **cmd;
	int dashdash, first, status = 0, rc, live_fd = -1;

	c->json_errors = false;
	for (dashdash = 1; dashdash < argc; dashdash++)
		if (strcmp(argv[dashdash], "--") == 0)
			break;
	first = cli_parse(c, &cmd_run, dashdash, argv, run_option, &a, &status);
	if (first < 0)
		return status;
	if (dashdash == argc)
		return cli_usage(c, "run needs -- before the command: wslock run WORKSPACE -- COMMAND");
	if (dashdash - first != 1)
		return cli_usage(c, dashdash == first ? "run needs a WORKSPACE" :
				 "run takes one WORKSPACE before --");
	cmd = argv + dashdash + 1;
	if (cmd[0] == NULL)
		return cli_usage(c, "run needs a COMMAND after --");

	if (registry_default_path(c->lock_dir, dir, &err) != 0 ||
	    registry_open(&reg, dir, true, &err) != 0)
		return cli_fail(c, &err);
	if (registry_workspace(&reg, argv[first], false, ws, &err) != 0)
		goto fail;

	/* Inside a run that holds this workspace or an ancestor: the lock is
	 * already ours, so run the command without acquiring again. */
	token = getenv("WSLOCK_TOKEN");
	if (token != NULL && token[0] != '\0') {
		rc = registry_find_token(&reg, ws, token, nested, &err);
		if (rc < 0)
			goto fail;
		if (rc == 1) {
			registry_close(&reg);
			if (c->verbose)
				fprintf(stderr, "wslock: %s is already held by the enclosing run on %s\n",
					ws, nested);
			exec_command(cmd);
		}
	}

	default_purpose(cmd, purpose);
	if (owner_build(&o, ws, getpid(), a.hold.purpose ? a.hold.purpose : purpose,
			a.hold.operation_id, NULL, &err) != 0)
		goto fail;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGQUIT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGUSR1);
	sigaddset(&mask, SIGUSR2);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, &orig);
	a.hold.wait.sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (a.hold.wait.sigfd < 0) {
		wsl_error_errno(&err, WSL_OS, errno, "signalfd");
		goto fail;
	}
	rc = cli_acquire(c, &reg, &o, &a.hold.wait, &live_fd, &err);
	if (rc > 0) {
		registry_close(&reg);
		return 128 + rc;
	}
	if (rc < 0) {
		status = cli_conflict_status(&a.hold.wait, &err);
		cli_fail(c, &err);
		wsl_error_clear(&err);
		registry_close(&reg);
		return status;
	}
	if (a.print_owner) {
		char *doc = owner_format(&o, c->pretty);
		if (doc != NULL)
			fprintf(stderr, "%s\n", doc);
		free(doc);
	}
	if (c->verbose)
		fprintf(stderr, "wslock: locked %s (token %s)\n", ws, o.token);

	/* The registry's descriptors are O_CLOEXEC: the child gets none of
	 * them, and the coordination lock is not held while it runs. */
	if (set_child_env(&o, &err) != 0)
		status = -1;
	else
		status = supervise(cmd, live_fd, a.hold.wait.sigfd, &orig, &err);
	if (registry_release(&reg, ws, o.token, NULL, &err) != 0) {
		if (err.code == WSL_NOT_HELD)
			wsl_error_set(&err, WSL_OWNERSHIP_LOST,
				      "the lock of %s was removed while this run held it; nothing released",
				      ws);
		fsx_close(live_fd);
		goto fail;
	}
	fsx_close(live_fd);
	registry_close(&reg);
	if (status < 0) {
		status = cli_fail(c, &err);
		wsl_error_clear(&err);
	}
	return status;
fail:
	registry_close(&reg);
	status = cli_fail(c, &err);
	wsl_error_clear(&err);
	return status;
}

const struct cli_command cmd_run = {
	"run", run_main, "[options] WORKSPACE -- COMMAND [ARG...]",
	"Hold the lock on WORKSPACE while COMMAND runs, then release it.",
	run_options,
	"wslock exits with COMMAND's status (128+N if it died of signal N). COMMAND\n"
	"gets WSLOCK_WORKSPACE, WSLOCK_TOKEN and WSLOCK_OWNER; a wslock run inside it\n"
	"on the same workspace or below runs without locking again. stdout is\n"
	"COMMAND's alone. SIGINT and SIGQUIT go to COMMAND from the terminal;\n"
	"SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 are forwarded to it.\n",
};
