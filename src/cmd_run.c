/* cmd_run.c - wslock run WORKSPACE -- CMD...: hold the lock while CMD runs.
 * How the command is supervised is in child.c. */
#include "child.h"
#include "cli.h"
#include "hold.h"
#include "hold_multi.h"
#include "nest.h"
#include "output.h"
#include "fsx.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static const struct cli_option run_options[] = {
	CLI_WAIT_OPTIONS,
	{ "print-owner", OPT_PRINT_OWNER, no_argument, NULL,
	  "write the owner document to stderr once the lock is held" },
	{ "retain-on-failure", OPT_RETAIN, no_argument, NULL,
	  "if COMMAND fails, keep the lock, retained, until 'wslock recover'" },
	{ "reclaim-dead", OPT_RECLAIM_DEAD, no_argument, NULL,
	  "first take over a lock whose owner is provably dead (journaled)" },
	CLI_SHARED_OPTION,
	CLI_KILL_AFTER_OPTION,
	CLI_OPT_END
};

struct run_args {
	struct hold_opts hold;
	bool print_owner;
	bool retain;
	bool shared;
	long kill_after_ms;
};

static int run_option(int id, const char *arg, void *ctx, struct wsl_error *err)
{
	struct run_args *a = ctx;
	int rc = hold_option(&a->hold, id, arg, err);

	if (rc != 0)
		return rc < 0 ? -1 : 0;
	switch (id) {
	case OPT_PRINT_OWNER:
		a->print_owner = true;
		return 0;
	case OPT_RETAIN:
		a->retain = true;
		return 0;
	case OPT_RECLAIM_DEAD:
		a->hold.wait.reclaim_dead = true;
		return 0;
	case OPT_SHARED:
		a->shared = true;
		return 0;
	case OPT_KILL_AFTER:
		a->kill_after_ms = cli_opt_seconds("--kill-after", arg, err);
		return a->kill_after_ms < 0 ? -1 : 0;
	default:
		return wsl_error_set(err, WSL_USAGE, "unexpected option");
	}
}

enum { RUN_INSIDE_GONE = -1, RUN_INSIDE_ERROR = -2 };

/* Runs the command inside outer's lock, whose holder the caller is inside
 * by proof, without acquiring again: holding the lock's nested-runs file
 * shared, so that the outer does not let go meanwhile. Blocks the signals
 * first unless ch->orig_mask says they are. Returns the exit status,
 * RUN_INSIDE_GONE when the outer let go meanwhile (take the normal path),
 * or RUN_INSIDE_ERROR with err. */
static int run_inside(struct cli *c, struct registry *reg, const struct lock_entry *outer,
		      const char *ws, struct child *ch, sigset_t *orig, struct wsl_error *err)
{
	int nest_fd = -1, rc;

	if (outer->shared && !reg->acquire_shared) {
		/* A writer inside a reader: the reader (its own parent) would
		 * have to leave first, and it waits for this run. */
		wsl_error_detail(&err->workspace_root, outer->workspace_root);
		wsl_error_set(err, WSL_BUSY,
			      "%s: an exclusive run inside a shared holder of %s (pid %ld) would wait for itself; nested runs under a shared lock need --shared",
			      ws, outer->workspace_root, (long)outer->owner.pid);
		return RUN_INSIDE_ERROR;
	}
	rc = registry_nest_lock(reg, outer->workspace_root, outer->owner.token, LOCK_SH,
				&nest_fd, err);
	if (rc < 0)
		return RUN_INSIDE_ERROR;
	if (rc != 0)
		return RUN_INSIDE_GONE;
	if (c->verbose)
		output_notice("%s is already held by the enclosing holder of %s",
			      ws, outer->workspace_root);
	if (ch->orig_mask == NULL) {
		ch->sigfd = child_block_signals(orig, err);
		if (ch->sigfd < 0) {
			if (nest_fd >= 0)
				fsx_close(nest_fd);
			return RUN_INSIDE_ERROR;
		}
		ch->orig_mask = orig;
	}
	return child_run_nested(c, reg, outer, ws, nest_fd, ch);
}

/* run_inside, then frees outer; the registry is closed when the status
 * is the command's (neither RUN_INSIDE_GONE nor RUN_INSIDE_ERROR), so the
 * caller returns it as it is. */
static int run_nested(struct cli *c, struct registry *reg, struct lock_entry *outer,
		      const char *ws, struct child *ch, sigset_t *orig, struct wsl_error *err)
{
	int status = run_inside(c, reg, outer, ws, ch, orig, err);

	lock_entry_free(outer);
	if (status != RUN_INSIDE_GONE && status != RUN_INSIDE_ERROR)
		registry_close(reg);
	return status;
}

/*
 * A run of several workspaces inside enclosing holders: nests when every
 * one of them is held by an enclosing holder (nest_find, per workspace as
 * for one), holding each outer lock's nested file shared while the
 * command runs. Returns 1 with *status when it ran nested, 0 when none
 * is held around us (the normal acquire), -1 with err: WSL_USAGE when
 * only some are (taking some from an enclosing holder and the rest anew
 * would be neither all nor nothing, and waiting for the enclosing holder
 * would wait for itself), or an error of the reads.
 */
static int run_inside_multi(struct cli *c, struct registry *reg, const struct hold_set *set,
			    struct child *ch, sigset_t *orig, int *status, struct wsl_error *err)
{
	struct lock_entry outer[REGISTRY_MULTI_MAX];
	struct owner owners[REGISTRY_MULTI_MAX];
	const char *wss[REGISTRY_MULTI_MAX];
	int nest_fds[REGISTRY_MULTI_MAX];
	size_t i, found = 0, got = 0, first = 0, free_at = 0;
	int rc = 0;

	for (i = 0; i < set->n && rc == 0; i++) {
		int r = nest_find(reg, set->ws[i], getpid(), &outer[i], err);

		if (r < 0) {
			rc = -1;
			break;
		}
		free_at = i + 1;	/* outer[0..free_at) to free */
		if (r == 1 && found++ == 0)
			first = i;
	}
	if (rc == 0 && found > 0 && found < set->n) {
		wsl_error_set(err, WSL_USAGE,
			      "%s is held already by the enclosing holder of %s (pid %ld), but not every workspace named is: a run of several workspaces nests only when all of them are held around it; run it outside that holder, or name only workspaces held around it",
			      set->ws[first], outer[first].workspace_root,
			      (long)outer[first].owner.pid);
		rc = -1;
	}
	for (i = 0; rc == 0 && found == set->n && i < set->n; i++)
		if (outer[i].shared && !reg->acquire_shared) {
			/* A writer inside a reader would wait for itself (as
			 * run_inside says for one workspace). */
			wsl_error_detail(&err->workspace_root, outer[i].workspace_root);
			wsl_error_set(err, WSL_BUSY,
				      "%s: an exclusive run inside a shared holder of %s (pid %ld) would wait for itself; nested runs under a shared lock need --shared",
				      set->ws[i], outer[i].workspace_root, (long)outer[i].owner.pid);
			rc = -1;
		}
	for (i = 0; rc == 0 && found == set->n && i < set->n; i++, got = i) {
		int r = registry_nest_lock(reg, outer[i].workspace_root, outer[i].owner.token,
					   LOCK_SH, &nest_fds[i], err);
		if (r != 0) {
			rc = r < 0 ? -1 : 0;	/* an outer let go: the normal path */
			found = 0;
			break;
		}
		owners[i] = outer[i].owner;
		wss[i] = set->ws[i];
	}
	for (i = 0; i < free_at; i++)
		lock_entry_free(&outer[i]);
	if (rc == 0 && found == set->n) {
		if (c->verbose)
			output_notice("all %zu workspaces are held already by enclosing holders", set->n);
		ch->sigfd = child_block_signals(orig, err);
		if (ch->sigfd >= 0) {
			ch->orig_mask = orig;
			*status = child_run_nested_multi(c, reg, owners, set->n, wss, nest_fds, ch);
			return 1;
		}
		rc = -1;
	}
	for (i = 0; i < got; i++) {
		fsx_flock(nest_fds[i], LOCK_UN);
		fsx_close(nest_fds[i]);
	}
	return rc;
}

/* run WS1 WS2... -- CMD: all of them or none (hold_acquire_multi), then
 * CMD under every lock (child_run_held_multi). */
static int run_multi(struct cli *c, struct run_args *a, struct child *ch,
		     char **args, size_t n)
{
	char purpose[OWNER_PURPOSE_MAX + 1];
	struct wsl_error err = { 0 };
	struct hold_set set;
	struct registry reg;
	sigset_t orig;
	int rc, status;

	memset(&reg, 0, sizeof(reg));
	rc = hold_set_open(&set, &reg, &c->reg_cfg, args, n, &err);
	if (rc == 0) {
		hold_registry_bound(c, &reg, &a->hold.wait);
		rc = run_inside_multi(c, &reg, &set, ch, &orig, &status, &err);
		registry_coord_bound(&reg, false, -1);
		if (rc == 1) {
			hold_set_free(&set);
			registry_close(&reg);
			return status;
		}
	}
	cli_default_purpose("run:", ch->cmd, purpose);
	if (rc == 0)
		rc = hold_set_owners(&set, getpid(), a->hold.purpose ? a->hold.purpose : purpose,
				     a->hold.operation_id, &err);
	if (rc == 0) {
		a->hold.wait.sigfd = ch->sigfd = child_block_signals(&orig, &err);
		rc = ch->sigfd < 0 ? -1 : 0;
		ch->orig_mask = &orig;
	}
	if (rc != 0) {
		hold_set_free(&set);
		registry_close(&reg);
		status = output_error(c, &err);
		wsl_error_clear(&err);
		return status;
	}
	rc = hold_acquire_multi(c, &reg, set.os, n, &a->hold.wait, set.live_fds, &err);
	if (rc > 0)
		status = 128 + rc;
	else if (rc < 0) {
		status = hold_conflict_status(&a->hold.wait, &err);
		if (!hold_conflict_silent(c, &a->hold.wait, &err))
			output_error(c, &err);
		wsl_error_clear(&err);
	} else {
		for (size_t i = 0; a->print_owner && i < n; i++) {
			char *doc = owner_format(&set.os[i], c->pretty);
			if (doc != NULL)
				output_document(doc);
			free(doc);
		}
		if (c->verbose)
			output_notice("locked %zu workspaces (token %.8s...)", n, set.os[0].token);
		status = child_run_held_multi(c, &reg, set.os, n, set.live_fds, ch);
	}
	hold_set_free(&set);
	registry_close(&reg);
	return status;
}

static int run_main(struct cli *c, int argc, char **argv)
{
	struct run_args a = { .hold.wait = { false, -1, -1, -1, false } };
	char ws[PATH_MAX];
	struct lock_entry outer;
	char purpose[OWNER_PURPOSE_MAX + 1];
	struct wsl_error err = { 0 };
	struct child ch = { 0 };
	struct registry reg;
	struct owner o;
	sigset_t orig;
	int dashdash, first, status = 0, rc, live_fd = -1;

	c->json_errors = false;
	dashdash = cli_split_command(argc, argv);
	first = cli_parse(c, &cmd_run, dashdash, argv, run_option, &a, &status);
	if (first < 0)
		return status;
	if (dashdash == argc)
		return output_usage(c, "run needs -- before the command: wslock run WORKSPACE -- COMMAND");
	if (dashdash == first)
		return output_usage(c, "run needs a WORKSPACE");
	ch.cmd = argv + dashdash + 1;
	if (ch.cmd[0] == NULL)
		return output_usage(c, "run needs a COMMAND after --");
	ch.retain_on_failure = a.retain;
	ch.kill_after_ms = a.kill_after_ms;
	c->reg_cfg.shared = a.shared;
	/* A command that cannot be started (not found, not executable) never
	 * touches the workspace: no lock is taken, nothing is retained, and
	 * the status is the one its failed exec would give (127, 126). One
	 * that goes missing after this check fails at its exec under the
	 * lock, as any command that exits 127 there. */
	if ((rc = spawn_check_command(ch.cmd, ".")) != 0) {
		output_notice("cannot run %s: %s; no lock taken [%s]", ch.cmd[0], strerror(rc),
			      wsl_code_name(WSL_OS));
		return rc == ENOENT ? 127 : 126;
	}
	if (dashdash - first > 1)
		return run_multi(c, &a, &ch, argv + first, (size_t)(dashdash - first));

	if (registry_open_for(&reg, &c->reg_cfg, argv[first], false, true, ws, &err) != 0)
		return output_error(c, &err);

	/* Inside the holder of this workspace or an ancestor, by proof (its
	 * live descriptor, or descent from its holder; never by a token):
	 * run the command without acquiring again. Where reading first costs
	 * (both backends: a request, a walk of the ancestors), hold_acquire
	 * looks only when its first attempt meets a conflict: an acquire
	 * that succeeds proves that no lock encloses the caller. */
	/* -w/-n bound its reads too (etcd's requests; the local registry
	 * reads without its coordination lock), and only them: the wait
	 * below has its own deadline. */
	if (!registry_nest_on_conflict(&reg)) {
		hold_registry_bound(c, &reg, &a.hold.wait);
		rc = nest_find(&reg, ws, getpid(), &outer, &err);
		registry_coord_bound(&reg, false, -1);
		if (rc < 0)
			goto fail;
		if (rc == 1) {
			status = run_nested(c, &reg, &outer, ws, &ch, &orig, &err);
			if (status == RUN_INSIDE_ERROR)
				goto fail;
			if (status != RUN_INSIDE_GONE)
				return status;
		} else {
			lock_entry_free(&outer);
		}
	} else {
		a.hold.wait.nest_outer = &outer;
	}

	cli_default_purpose("run:", ch.cmd, purpose);
	if (owner_build(&o, ws, getpid(), a.hold.purpose ? a.hold.purpose : purpose,
			a.hold.operation_id, NULL, &err) != 0)
		goto fail;
	a.hold.wait.sigfd = ch.sigfd = child_block_signals(&orig, &err);
	if (ch.sigfd < 0)
		goto fail;
	ch.orig_mask = &orig;
	while ((rc = hold_acquire(c, &reg, &o, &a.hold.wait, &live_fd, &err)) == HOLD_NESTED) {
		status = run_nested(c, &reg, &outer, ws, &ch, &orig, &err);
		if (status == RUN_INSIDE_ERROR)
			goto fail;
		if (status != RUN_INSIDE_GONE)
			return status;
	}
	if (rc > 0) {
		registry_close(&reg);
		return 128 + rc;
	}
	if (rc < 0) {
		status = hold_conflict_status(&a.hold.wait, &err);
		if (!hold_conflict_silent(c, &a.hold.wait, &err))
			output_error(c, &err);
		wsl_error_clear(&err);
		registry_close(&reg);
		return status;
	}
	if (a.print_owner) {
		char *doc = owner_format(&o, c->pretty);
		if (doc != NULL)
			output_document(doc);
		free(doc);
	}
	if (c->verbose)
		output_notice("locked %s (token %.8s...)", ws, o.token);
	status = child_run_held(c, &reg, &o, live_fd, &ch);
	registry_close(&reg);
	return status;
fail:
	registry_close(&reg);
	status = output_error(c, &err);
	wsl_error_clear(&err);
	return status;
}

const struct cli_command cmd_run = {
	"run", run_main, "[options] WORKSPACE... -- COMMAND [ARG...]",
	"Hold the lock on WORKSPACE (or on each, all or none) while COMMAND runs, then release it.",
	run_options,
	"wslock exits with COMMAND's status (128+N if it died of signal N). COMMAND\n"
	"gets WSLOCK_WORKSPACE, WSLOCK_TOKEN and WSLOCK_OWNER. A wslock run on the same\n"
	"workspace or below runs without locking again when it descends from the\n"
	"holder (or holds the lock's live file): nesting by ancestry, never by token.\n"
	"The outer waits for runs nested under it before it releases. stdout is\n"
	"COMMAND's alone. SIGINT and SIGQUIT go to COMMAND from the terminal;\n"
	"SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 are forwarded to it. If wslock is\n"
	"killed, the lock stays live until COMMAND ends, then needs recovery.\n"
	"--shared: many shared runs at once, never beside an exclusive one; a\n"
	"writer that waits is served before readers that come after it.\n"
	"Several workspaces are taken all at once or not at all, without deadlock\n"
	"against jobs naming them in another order; COMMAND also gets\n"
	"WSLOCK_WORKSPACES (one a line) and WSLOCK_OWNERS (a JSON array); with\n"
	"--shared each of them is shared (local backend). Such a run nests only\n"
	"when every workspace is held around it (some only: a usage error).\n",
};
