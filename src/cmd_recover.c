/* cmd_recover.c - wslock recover --expected-owner FILE WORKSPACE [-- CMD]:
 * take over the lock of a provably dead owner, named exactly. */
#include "child.h"
#include "cli.h"
#include "hold.h"
#include "output.h"
#include "fsx.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct cli_option recover_options[] = {
	{ "expected-owner", OPT_EXPECTED, required_argument, "FILE",
	  "the owner document expected (from 'inspect --owner'); - reads stdin" },
	{ "force", OPT_FORCE, no_argument, NULL,
	  "take over an owner of unknown liveness, or clear a corrupt lock" },
	{ "reason", OPT_REASON, required_argument, "TEXT",
	  "why --force is safe, recorded in the journal (required with --force)" },
	{ "retain-on-failure", OPT_RETAIN, no_argument, NULL,
	  "with COMMAND: if it fails, keep the lock retained again" },
	{ "print-owner", OPT_PRINT_OWNER, no_argument, NULL,
	  "with COMMAND: write the new owner document to stderr" },
	HOLD_REGISTRY_OPTIONS,
	CLI_KILL_AFTER_OPTION,
	CLI_OPT_END
};

struct recover_args {
	const char *expected;
	const char *reason;
	bool force;
	bool retain;
	bool print_owner;
	long kill_after_ms;
	struct hold_wait wait;
};

static int recover_option(int id, const char *arg, void *ctx, struct wsl_error *err)
{
	struct recover_args *a = ctx;
	int rc = hold_registry_option(&a->wait, id, arg, err);

	if (rc != 0)
		return rc < 0 ? -1 : 0;
	switch (id) {
	case OPT_EXPECTED:
		a->expected = arg;
		return 0;
	case OPT_FORCE:
		a->force = true;
		return 0;
	case OPT_REASON:
		return cli_opt_reason(arg, &a->reason, err);
	case OPT_RETAIN:
		a->retain = true;
		return 0;
	case OPT_PRINT_OWNER:
		a->print_owner = true;
		return 0;
	case OPT_KILL_AFTER:
		a->kill_after_ms = cli_opt_seconds("--kill-after", arg, err);
		return a->kill_after_ms < 0 ? -1 : 0;
	default:
		return wsl_error_set(err, WSL_USAGE, "unexpected option");
	}
}

/* Reads the expected owner document: at most LOCK_RAW_MAX bytes, so that
 * the exact bytes of a corrupt, oversized owner.json can be given. */
static int read_expected(const char *name, char **buf, size_t *len,
			 struct wsl_error *err)
{
	ssize_t n;
	int fd;

	*buf = malloc(LOCK_RAW_MAX + 2);
	if (*buf == NULL)
		return wsl_error_errno(err, WSL_OS, errno, "out of memory");
	fd = strcmp(name, "-") == 0 ? STDIN_FILENO : fsx_open(name, O_RDONLY | O_NOCTTY, 0);
	if (fd < 0)
		return wsl_error_errno(err, WSL_INVALID_OWNER, errno,
				       "cannot read the expected owner %s", name);
	n = fsx_read_all(fd, *buf, LOCK_RAW_MAX + 1);
	if (fd != STDIN_FILENO)
		fsx_close(fd);
	if (n < 0)
		return wsl_error_errno(err, WSL_INVALID_OWNER, errno,
				       "cannot read the expected owner %s", name);
	if (n > LOCK_RAW_MAX)
		return wsl_error_set(err, WSL_INVALID_OWNER,
				     "the expected owner %s is larger than %d bytes",
				     name, LOCK_RAW_MAX);
	(*buf)[n] = '\0';
	*len = (size_t)n;
	return 0;
}

static int recover_main(struct cli *c, int argc, char **argv)
{
	struct recover_args a = { .wait = { false, -1, -1, -1, false, false, NULL } };
	char ws[PATH_MAX], root[PATH_MAX], why[256], purpose[OWNER_PURPOSE_MAX + 1];
	struct wsl_error err = { 0 };
	struct registry_expect x = { 0 };
	struct child ch = { 0 };
	struct lock_entry prior = { 0 };
	struct owner expected, next;
	struct registry reg;
	bool have_reg = false, valid;
	char *raw = NULL;
	size_t raw_len = 0;
	sigset_t orig;
	int dashdash, first, status = 0, live_fd = -1;
	json_t *out;

	dashdash = cli_split_command(argc, argv);
	c->json_errors = dashdash == argc;
	first = cli_parse(c, &cmd_recover, dashdash, argv, recover_option, &a, &status);
	if (first < 0)
		return status;
	if (dashdash - first != 1)
		return output_usage(c, dashdash == first ? "recover needs a WORKSPACE" :
				 "recover takes one WORKSPACE");
	if (a.expected == NULL)
		return output_usage(c, "recover needs --expected-owner FILE (save it with 'wslock inspect --owner WORKSPACE > FILE')");
	if (a.force != (a.reason != NULL))
		return output_usage(c, a.force ? "--force needs --reason TEXT" :
				 "--reason goes with --force");
	if (dashdash < argc) {
		ch.cmd = argv + dashdash + 1;
		if (ch.cmd[0] == NULL)
			return output_usage(c, "recover needs a COMMAND after --");
	}
	if (read_expected(a.expected, &raw, &raw_len, &err) != 0)
		goto fail;
	valid = owner_parse_saved(raw, raw_len, &expected, why, sizeof(why)) == 0;
	if (!valid && raw_len >= 4 && strspn(raw, " \t\r\n") + 4 <= raw_len &&
	    strncmp(raw + strspn(raw, " \t\r\n"), "null", 4) == 0)
		snprintf(why, sizeof(why),
			 "it is null: 'inspect --owner' found the workspace free when it was saved");
	if (registry_open_for(&reg, &c->reg_cfg, argv[first], ch.cmd == NULL, true, ws,
			      &err) != 0) {
		/* A COMMAND runs in the workspace; without one a lock left on
		 * a removed workspace is still recovered (and released). */
		if (ch.cmd != NULL && err.code == WSL_NO_WORKSPACE) {
			wsl_error_clear(&err);
			wsl_error_set(&err, WSL_NO_WORKSPACE,
				      "workspace %s does not exist, so %s cannot run in it; nothing changed; next: the same recover without '-- %s' clears its dead owner's lock",
				      argv[first], ch.cmd[0], ch.cmd[0]);
		}
		goto fail;
	}
	have_reg = true;
	hold_registry_bound(c, &reg, &a.wait);
	/* Through another path to the same directory (a bind mount): the
	 * lock is kept under the path it was taken by. */
	if (registry_locate(&reg, ws, root, &err) != 0)
		goto fail;
	if (valid && strcmp(expected.workspace_root, root) != 0) {
		wsl_error_set(&err, WSL_OWNER_MISMATCH,
			      "the expected owner is of workspace %s, not of %s; nothing changed",
			      expected.workspace_root, root);
		goto fail;
	}

	if (valid) {
		/* A workspace removed since it was locked: the lock is still
		 * found by its path, and kept where the owner's identity says. */
		struct stat st;
		bool gone = expected.schema >= OWNER_SCHEMA && stat(ws, &st) != 0 &&
			    (errno == ENOENT || errno == ENOTDIR);

		if (owner_build_in(&next, gone ? &expected : NULL, ws, getpid(),
				   expected.purpose, expected.operation_id,
				   expected.token, &err) != 0)
			goto fail;
	} else {
		if (ch.cmd != NULL)
			cli_default_purpose("recover:", ch.cmd, purpose);
		else
			snprintf(purpose, sizeof(purpose), "recover: clear a corrupt lock");
		if (owner_build(&next, ws, getpid(), purpose, NULL, NULL, &err) != 0)
			goto fail;
	}
	/* Its identity as this process reaches it (ws), its key the lock's. */
	snprintf(next.workspace_root, sizeof(next.workspace_root), "%s", root);
	snprintf(ws, sizeof(ws), "%s", root);
	x.owner = valid ? &expected : NULL;
	x.invalid_why = valid ? NULL : why;
	x.raw = raw;
	x.raw_len = raw_len;
	x.force = a.force;
	x.force_reason = a.reason;
	x.allow_retained = true;
	x.action = "recover";
	x.alone = ch.cmd != NULL;
	if (ch.cmd != NULL) {
		ch.sigfd = child_block_signals(&orig, &err);
		if (ch.sigfd < 0)
			goto fail;
		ch.orig_mask = &orig;
		ch.retain_on_failure = a.retain;
		ch.kill_after_ms = a.kill_after_ms;
	}
	if (registry_take_over(&reg, ws, &x, &next, ch.cmd ? &live_fd : NULL,
			       &prior, &err) != 0)
		goto fail;

	if (ch.cmd != NULL) {
		if (!c->quiet)
			output_notice("recovered %s from %s; running %s", ws,
				prior.has_owner ? "its dead owner" : "a corrupt lock", ch.cmd[0]);
		if (a.print_owner) {
			char *doc = owner_format(&next, c->pretty);
			if (doc != NULL)
				output_document(doc);
			free(doc);
		}
		status = child_run_held(c, &reg, &next, live_fd, &ch);
		goto done;
	}
	if (registry_release(&reg, ws, next.token, NULL, &err) != 0)
		goto fail;
	out = json_object();
	json_object_set_new(out, "action",
			    json_string(prior.has_owner ? "recovered" : "cleared-corrupt"));
	json_object_set_new(out, "workspace_root", json_string(ws));
	json_object_set_new(out, "prior_owner",
			    prior.has_owner ? owner_to_json(&prior.owner) : json_null());
	json_object_set_new(out, "owner", owner_to_json(&next));
	json_object_set_new(out, "liveness", prior.probed && prior.has_owner ?
			    json_string(liveness_name(prior.liveness)) : json_null());
	json_object_set_new(out, "liveness_reason", prior.probed && prior.has_owner ?
			    json_string(prior.reason) : json_null());
	json_object_set_new(out, "forced", json_boolean(a.force));
	json_object_set_new(out, "released", json_true());
	status = output_json(c, out);
	goto done;
fail:
	status = output_error(c, &err);
	wsl_error_clear(&err);
done:
	lock_entry_free(&prior);
	if (have_reg)
		registry_close(&reg);
	free(raw);
	return status;
}

const struct cli_command cmd_recover = {
	"recover", recover_main,
	"--expected-owner FILE [options] WORKSPACE [-- COMMAND [ARG...]]",
	"Take over the lock of a dead owner, named exactly by its owner document.",
	recover_options,
	"The current owner must equal FILE exactly (same keys and values; white\n"
	"space and key order do not matter) and be provably dead. The new owner keeps\n"
	"operation_id and purpose, gets a new token and records recovery_of. Without\n"
	"COMMAND the lock is then released; with it, COMMAND runs under the lock as\n"
	"with 'wslock run'. Every recovery is appended to journal.jsonl.\n"
	"Runbook: wslock inspect WS; wslock inspect --owner WS > owner.json;\n"
	"check the workspace; wslock recover --expected-owner owner.json WS\n",
};
