/* cmd_acquire.c - wslock acquire: hold a lock for a process that outlives
 * wslock (a shell script), and print its owner document. */
#include "cli.h"
#include "fsx.h"
#include "hold.h"
#include "hold_multi.h"
#include "keeper_pid.h"
#include "output.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <unistd.h>

static const struct cli_option acquire_options[] = {
	CLI_WAIT_OPTIONS,
	{ "pid", OPT_PID, required_argument, "PID",
	  "the holder's pid (default: wslock's parent; in scripts use --pid $$)" },
	{ "reclaim-dead", OPT_RECLAIM_DEAD, no_argument, NULL,
	  "first take over a lock whose owner is provably dead (journaled)" },
	CLI_SHARED_OPTION,
	CLI_OPT_END
};

struct acquire_args {
	struct hold_opts hold;
	long pid;
	bool shared;
};

static int acquire_option(int id, const char *arg, void *ctx, struct wsl_error *err)
{
	struct acquire_args *a = ctx;
	int rc = hold_option(&a->hold, id, arg, err);

	if (rc != 0)
		return rc < 0 ? -1 : 0;
	if (id == OPT_RECLAIM_DEAD) {
		a->hold.wait.reclaim_dead = true;
		return 0;
	}
	if (id == OPT_SHARED) {
		a->shared = true;
		return 0;
	}
	if (id == OPT_PID) {
		if (cli_parse_long(arg, 1, WSL_PID_MAX, &a->pid) != 0)
			return wsl_error_set(err, WSL_USAGE,
					     "--pid takes a process id 2..%d, not '%s'",
					     WSL_PID_MAX, arg);
		/* Every process descends from pid 1: in a container, where
		 * the entrypoint is pid 1, every wslock run would nest. */
		if (a->pid == 1)
			return wsl_error_set(err, WSL_USAGE,
					     "--pid 1 is refused: every process descends from pid 1, so every run would nest under the lock");
		return 0;
	}
	return wsl_error_set(err, WSL_USAGE, "unexpected option");
}

/* The keeper of o's lock, just acquired on a lease (keeper_pid.h); when
 * it cannot start, or the holder is gone already, the lock is given back:
 * nobody would keep it alive. */
static int start_keeper(struct registry *reg, const struct owner *o,
			struct wsl_error *err)
{
	struct wsl_error rerr = { 0 };
	int pidfd = keeper_pid_open(o, err);

	if (pidfd != -1 && keeper_pid_start(reg, o, pidfd, err) == 0)
		return 0;
	registry_release(reg, o->workspace_root, o->token, NULL, &rerr);
	wsl_error_clear(&rerr);
	return -1;
}

/*
 * The owner document could not be written (errno e): the caller never
 * learns the token, so nobody could release the lock; it is given back
 * as `release --token` would (not while runs nested under it run; an
 * etcd keeper is poked so that it is gone too). One stderr line, no JSON
 * (stdout is what failed). Returns 74 (WSL_IO).
 */
static int give_back(struct cli *c, struct registry *reg, const struct owner *o, int e)
{
	struct wsl_error err = { 0 }, rerr = { 0 };
	int nfd = -1, rc, status;

	rc = registry_nest_lock(reg, o->workspace_root, o->token, LOCK_EX | LOCK_NB, &nfd,
				&rerr);
	if (rc == NEST_LOCK_BUSY)
		rc = wsl_error_set(&rerr, WSL_BUSY, "wslock runs nested under it are running");
	else if (rc >= 0)
		rc = registry_release(reg, o->workspace_root, o->token, NULL, &rerr);
	fsx_close(nfd);
	if (rc == 0 && strcmp(registry_backend(reg), "etcd") == 0)
		keeper_pid_poke(o->token, KEEPER_POKE_WAIT_MS);
	if (rc == 0)
		wsl_error_set(&err, WSL_IO,
			      "cannot write the owner document to standard output (%s); the lock of %s was released again",
			      strerror(e), o->workspace_root);
	else
		wsl_error_set(&err, WSL_IO,
			      "cannot write the owner document to standard output (%s), and the lock of %s could not be released (%s): it is held for pid %ld, token %s",
			      strerror(e), o->workspace_root, rerr.message, (long)o->pid,
			      o->token);
	wsl_error_clear(&rerr);
	c->json_errors = false;
	status = output_error(c, &err);
	wsl_error_clear(&err);
	return status;
}

/* Releases every lock of set (all or none where the backend can:
 * registry_release_multi). */
static int release_set(struct registry *reg, const struct hold_set *set,
		       struct wsl_error *err)
{
	const char *wss[REGISTRY_MULTI_MAX];

	for (size_t i = 0; i < set->n; i++)
		wss[i] = set->ws[i];
	return registry_release_multi(reg, wss, set->n, set->os[0].token, NULL, err);
}

/* start_keeper for the set's locks, just acquired at once on one lease:
 * one keeper (of the first owner: the lease, the check and the watch
 * cover the whole set); when it cannot start, the set is given back. */
static int start_keeper_multi(struct registry *reg, const struct hold_set *set,
			      struct wsl_error *err)
{
	struct wsl_error rerr = { 0 };
	int pidfd = keeper_pid_open(&set->os[0], err);

	if (pidfd != -1 && keeper_pid_start(reg, &set->os[0], pidfd, err) == 0)
		return 0;
	release_set(reg, set, &rerr);
	wsl_error_clear(&rerr);
	return -1;
}

/* give_back for the set (one release of all where the backend can, an
 * etcd keeper poked); the status of the last that failed, else 74. */
static int give_back_multi(struct cli *c, struct registry *reg, const struct hold_set *set,
			   int e)
{
	int status = 0;

	if (strcmp(registry_backend(reg), "etcd") != 0) {
		for (size_t i = 0; i < set->n; i++)
			status = give_back(c, reg, &set->os[i], e);
		return status;
	}
	{
		struct wsl_error err = { 0 }, rerr = { 0 };

		if (release_set(reg, set, &rerr) == 0) {
			keeper_pid_poke(set->os[0].token, KEEPER_POKE_WAIT_MS);
			wsl_error_set(&err, WSL_IO,
				      "cannot write the owner documents to standard output (%s); the locks of %s and the other %zu workspaces were released again",
				      strerror(e), set->ws[0], set->n - 1);
		} else {
			wsl_error_set(&err, WSL_IO,
				      "cannot write the owner documents to standard output (%s), and the locks of %s and the other %zu workspaces could not be released (%s): they are held for pid %ld, token %s",
				      strerror(e), set->ws[0], set->n - 1, rerr.message,
				      (long)set->os[0].pid, set->os[0].token);
		}
		wsl_error_clear(&rerr);
		c->json_errors = false;
		status = output_error(c, &err);
		wsl_error_clear(&err);
	}
	return status;
}

/* Blocks SIGINT, SIGTERM and SIGHUP and returns a signalfd of them: a
 * signal ends a wait cleanly; once published, the holder is the caller. */
static int acquire_signals(void)
{
	sigset_t mask, old;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, &old);
	return signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* acquire WS1 WS2...: all of them or none (hold_acquire_multi); prints
 * {"owners":[...]}, one owner document per workspace in argument order,
 * all with one token (`release --token T WS1 WS2...` releases them). */
static int acquire_multi(struct cli *c, struct acquire_args *a, char **args, size_t n)
{
	struct wsl_error err = { 0 };
	struct hold_set set;
	struct registry reg;
	sigset_t mask;
	json_t *out, *list;
	int rc, status = 0;
	long long fence;
	bool leased;

	memset(&reg, 0, sizeof(reg));
	rc = hold_set_open(&set, &reg, &c->reg_cfg, args, n, &err);
	if (rc == 0)
		rc = hold_set_owners(&set, (pid_t)a->pid,
				     a->hold.purpose ? a->hold.purpose : "acquire",
				     a->hold.operation_id, &err);
	if (rc != 0) {
		hold_set_free(&set);
		registry_close(&reg);
		return output_error(c, &err);
	}
	a->hold.wait.sigfd = acquire_signals();
	/* etcd: one liveness lease for the set, one keeper (as for one). */
	leased = strcmp(registry_backend(&reg), "etcd") == 0;
	reg.lease_for_pid = leased;
	rc = hold_acquire_multi(c, &reg, set.os, n, &a->hold.wait,
				leased ? set.live_fds : NULL, &err);
	if (rc == 0 && a->hold.wait.sigfd >= 0) {
		/* Interrupted while publishing: the caller will not learn the
		 * token, so nobody could release the locks. Give them back. */
		struct signalfd_siginfo si;
		if (read(a->hold.wait.sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
			release_set(&reg, &set, &err);
			wsl_error_clear(&err);
			rc = (int)si.ssi_signo;
		}
	}
	if (rc == 0 && leased && start_keeper_multi(&reg, &set, &err) != 0)
		rc = -1;
	fence = reg.fence;
	if (a->hold.wait.sigfd >= 0)
		close(a->hold.wait.sigfd);
	if (rc != 0) {
		if (rc > 0)
			status = 128 + rc;
		else {
			status = hold_conflict_status(&a->hold.wait, &err);
			if (!hold_conflict_silent(c, &a->hold.wait, &err))
				output_error(c, &err);
			wsl_error_clear(&err);
		}
		hold_set_free(&set);
		registry_close(&reg);
		return status;
	}
	out = json_object();
	list = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(list, owner_to_json(&set.os[i]));
	json_object_set_new(out, "owners", list);
	/* etcd: the set's one fencing token (one transaction took it all) */
	if (fence > 0)
		json_object_set_new(out, "fence", json_integer(fence));
	sigemptyset(&mask);
	sigaddset(&mask, SIGPIPE);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	if (output_json_write(c, out) != 0)
		status = give_back_multi(c, &reg, &set, errno);
	hold_set_free(&set);
	registry_close(&reg);
	return status;
}

static int acquire_main(struct cli *c, int argc, char **argv)
{
	struct acquire_args a = { .hold.wait = { false, -1, -1, -1, false }, .pid = 0 };
	char ws[PATH_MAX];
	struct wsl_error err = { 0 };
	struct registry reg;
	struct owner o;
	sigset_t mask, old;
	int first, status = 0, rc, live_fd = -1;
	long long fence;
	bool leased;
	json_t *out;

	c->json_errors = true;
	first = cli_parse(c, &cmd_acquire, argc, argv, acquire_option, &a, &status);
	if (first < 0)
		return status;
	if (argc - first == 0)
		return output_usage(c, "acquire needs a WORKSPACE");
	if (a.pid == 0)
		a.pid = getppid();
	if (a.pid == 1)
		return output_usage(c, "acquire's parent is pid 1 (an entrypoint or init), which every process descends from; name the holder with --pid");
	a.hold.wait.holder_must_live = true;
	c->reg_cfg.shared = a.shared;
	if (argc - first > 1)
		return acquire_multi(c, &a, argv + first, (size_t)(argc - first));
	if (registry_open_for(&reg, &c->reg_cfg, argv[first], false, true, ws, &err) != 0)
		return output_error(c, &err);
	if (owner_build(&o, ws, (pid_t)a.pid,
			a.hold.purpose ? a.hold.purpose : "acquire",
			a.hold.operation_id, NULL, &err) != 0) {
		registry_close(&reg);
		return output_error(c, &err);
	}
	/* Signals that end a wait are read from a signalfd, so the loop can
	 * stop cleanly; once published, the holder is the caller. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, &old);
	a.hold.wait.sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	/* A backend whose locks live on a lease (etcd) gives this one a
	 * liveness lease and a keeper that renews it while the holder lives;
	 * the local one needs neither (the pid is the proof). */
	leased = strcmp(registry_backend(&reg), "etcd") == 0;
	reg.lease_for_pid = leased;
	rc = hold_acquire(c, &reg, &o, &a.hold.wait, leased ? &live_fd : NULL, &err);
	if (rc == 0 && a.hold.wait.sigfd >= 0) {
		/* Interrupted while publishing: the caller will not learn the
		 * token, so nobody could release the lock. Give it back. */
		struct signalfd_siginfo si;
		if (read(a.hold.wait.sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
			registry_release(&reg, ws, o.token, NULL, &err);
			wsl_error_clear(&err);
			rc = (int)si.ssi_signo;
		}
	}
	if (rc == 0 && leased && start_keeper(&reg, &o, &err) != 0)
		rc = -1;
	fence = reg.fence;
	if (a.hold.wait.sigfd >= 0)
		close(a.hold.wait.sigfd);
	/* Signals stay blocked until exit: the output below must be whole. */
	(void)old;
	if (rc != 0)
		registry_close(&reg);
	if (rc > 0)
		return 128 + rc;
	if (rc < 0) {
		status = hold_conflict_status(&a.hold.wait, &err);
		if (!hold_conflict_silent(c, &a.hold.wait, &err))
			output_error(c, &err);
		wsl_error_clear(&err);
		return status;
	}
	out = owner_to_json(&o);
	/* etcd: the fencing token, the revision at which the ownership
	 * began (WSLOCK_FENCE of run); not part of the owner document. */
	if (fence > 0)
		json_object_set_new(out, "fence", json_integer(fence));
	/* A closed pipe is a write error (EPIPE) like a full disk, not a
	 * death by SIGPIPE that would leave the lock behind. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGPIPE);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	status = output_json_write(c, out) == 0 ? 0 : give_back(c, &reg, &o, errno);
	registry_close(&reg);
	return status;
}

const struct cli_command cmd_acquire = {
	"acquire", acquire_main, "[options] WORKSPACE...",
	"Lock WORKSPACE (or each, all or none) for a holder that outlives wslock and print the owner document.",
	acquire_options,
	"The holder is --pid (default: wslock's parent process). Inside $(...) that\n"
	"parent is a short-lived subshell, so scripts write:\n"
	"  owner=$(wslock acquire --pid $$ WS) && token=$(jq -r .token <<<\"$owner\")\n"
	"  ...; wslock release --token \"$token\" WS\n"
	"With the etcd backend, a keeper process left behind (no stdio, a session\n"
	"of its own) renews the lock's liveness lease while the holder lives and\n"
	"stops when it exits (the lock is then left, dead: recovery required) or\n"
	"at release; the output carries the fencing token as \"fence\".\n"
	"If the owner document cannot be written (a full disk, a closed pipe), the\n"
	"lock is released again and acquire exits 74 (WSLOCK_IO).\n"
	"Several workspaces are locked all at once or not at all; acquire then prints\n"
	"{\"owners\":[...]}, one document each, all with one token (etcd: and the\n"
	"set's one \"fence\"):\n"
	"  token=$(wslock acquire --pid $$ A B | jq -r '.owners[0].token')\n"
	"  ...; wslock release --token \"$token\" A B\n",
};
