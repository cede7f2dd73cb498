/* cmd_reclaim.c - wslock reclaim: preview, then (--yes) remove the locks of
 * provably dead owners, and the garbage crashes leave. */
#include "child.h"
#include "cli.h"
#include "hold.h"
#include "output.h"
#include "spawn.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static const struct cli_option reclaim_options[] = {
	{ "yes", 'y', no_argument, NULL,
	  "really remove the reclaimable locks (default: preview only)" },
	{ "force", OPT_FORCE, no_argument, NULL,
	  "also reclaim owners of unknown liveness (another host)" },
	{ "reason", OPT_REASON, required_argument, "TEXT",
	  "why --force is safe, recorded in the journal (required with --force)" },
	HOLD_REGISTRY_OPTIONS,
	CLI_FORMAT_OPTION,
	CLI_OPT_END
};

struct reclaim_args {
	bool named;		/* WORKSPACE operands given */
	bool yes;
	bool force;
	const char *reason;
	bool text;
	struct hold_wait wait;	/* -w, -n: the waits for the registry */
};

static int reclaim_option(int id, const char *arg, void *ctx, struct wsl_error *err)
{
	struct reclaim_args *a = ctx;
	int rc = hold_registry_option(&a->wait, id, arg, err);

	if (rc != 0)
		return rc < 0 ? -1 : 0;
	switch (id) {
	case OPT_FORMAT:
		return cli_parse_format(arg, &a->text, err);
	case 'y':
		a->yes = true;
		return 0;
	case OPT_FORCE:
		a->force = true;
		return 0;
	case OPT_REASON:
		return cli_opt_reason(arg, &a->reason, err);
	default:
		return wsl_error_set(err, WSL_USAGE, "unexpected option");
	}
}

struct candidates {
	struct lock_entry *items;
	size_t n, cap;
};

/* Keeps a deep copy of e. */
static int keep(const struct lock_entry *e, void *arg)
{
	struct candidates *c = arg;
	struct lock_entry *slot;

	/* A shared lock: each holder is a candidate of its own. */
	for (size_t i = 0; i < e->n_holders; i++)
		if (keep(&e->holders[i], arg) != 0)
			return -1;
	if (e->holders != NULL)
		return 0;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		struct lock_entry *p = realloc(c->items, cap * sizeof(*p));
		if (p == NULL)
			return -1;
		c->items = p;
		c->cap = cap;
	}
	slot = &c->items[c->n];
	*slot = *e;
	slot->raw = e->raw ? strdup(e->raw) : NULL;
	slot->retained = e->retained ? strdup(e->retained) : NULL;
	if ((e->raw != NULL && slot->raw == NULL) ||
	    (e->retained != NULL && slot->retained == NULL)) {
		lock_entry_free(slot);
		return -1;	/* out of memory: the caller fails, never lists less */
	}
	c->n++;
	return 0;
}

static int collect(struct registry *reg, int argc, char **argv, int first, int last,
		   struct candidates *cands, struct wsl_error *err)
{
	char ws[PATH_MAX];
	int i;

	if (first == last)
		return registry_list(reg, true, keep, cands, err) == 0 ? 0 :
			(err->code != WSL_OK ? -1 :
			 wsl_error_set(err, WSL_OS, "out of memory"));
	for (i = first; i < last; i++) {
		struct lock_entry e;
		int rc;

		if (registry_workspace(reg, argv[i], true, ws, err) != 0)
			return -1;
		if (registry_get(reg, ws, true, &e, err) != 0)
			return -1;
		rc = e.state == LOCK_FREE ? 0 : keep(&e, cands);
		lock_entry_free(&e);
		if (rc != 0)
			return wsl_error_set(err, WSL_OS, "out of memory");
	}
	(void)argc;
	return 0;
}

static json_t *garbage_json(size_t staging, size_t orphans)
{
	return json_pack("{s:I,s:I}", "staging", (json_int_t)staging,
			 "orphan_markers", (json_int_t)orphans);
}

/* Reclaims one candidate; with a command, runs it under the lock first.
 * Returns 0 and sets *cmd_status, or -1 with err when skipped. */
static int reclaim_one(struct cli *c, struct registry *reg, const struct lock_entry *e,
		       const struct reclaim_args *a, struct child *ch,
		       int *cmd_status, struct wsl_error *err)
{
	struct registry_expect x = { 0 };
	struct lock_entry prior;
	struct owner next;
	int live_fd = -1, rc;

	x.owner = &e->owner;
	x.force = a->force;
	x.force_reason = a->reason;
	x.action = "reclaim";
	x.alone = ch->cmd != NULL;
	if (ch->cmd == NULL) {
		rc = registry_take_over(reg, e->workspace_root, &x, NULL, NULL, &prior, err);
		lock_entry_free(&prior);
		return rc;
	}
	/* A command that cannot run must not cost the lock anything: found
	 * missing after the take-over, it left the lock retained, recovery
	 * required, for a cleanup that never ran. */
	rc = spawn_check_command(ch->cmd, e->workspace_root);
	if (rc != 0)
		return wsl_error_errno(err, WSL_USAGE, rc,
				       "cannot run %s in %s; not reclaimed", ch->cmd[0],
				       e->workspace_root);
	/* The new owner keeps the operation and its purpose, as recover's
	 * does: retained after a failed cleanup, the lock still says what it
	 * was for. */
	if (owner_build(&next, e->workspace_root, getpid(), e->owner.purpose,
			e->owner.operation_id, e->owner.token, err) != 0)
		return -1;
	rc = registry_take_over(reg, e->workspace_root, &x, &next, &live_fd, &prior, err);
	lock_entry_free(&prior);
	if (rc != 0)
		return -1;
	ch->cwd = e->workspace_root;
	*cmd_status = child_run_held(c, reg, &next, live_fd, ch);
	return 0;
}

/* --format text: the candidates as a table, each with its verdict. */
static int preview_text(struct cli *c, const struct candidates *cands,
			const struct reclaim_args *a,
			size_t staging, size_t orphans, struct wsl_error *err)
{
	struct output_row *rows = calloc(cands->n + 1, sizeof(*rows));
	char (*notes)[1300] = calloc(cands->n + 1, sizeof(*notes));
	char why[1200];
	size_t i;
	int status;

	if (rows == NULL || notes == NULL) {
		free(rows);
		free(notes);
		return wsl_error_set(err, WSL_OS, "out of memory");
	}
	for (i = 0; i < cands->n; i++) {
		bool ok = lockrules_reclaimable(&cands->items[i], a->force, why, sizeof(why));
		snprintf(notes[i], sizeof(notes[i]), "%s%s%s%s: %s",
			 ok ? "reclaimable" : "kept", ok ? "" : " [",
			 ok ? "" : wsl_code_name(lockrules_reclaim_code(&cands->items[i], a->force)),
			 ok ? "" : "]", why);
		rows[i].e = &cands->items[i];
		rows[i].note = notes[i];
	}
	status = output_table(c, rows, cands->n);
	if (status == 0)
		printf("garbage: %zu staging, %zu orphan markers; 'wslock reclaim --yes' removes what is reclaimable\n",
		       staging, orphans);
	free(rows);
	free(notes);
	return status;
}

/* The preview document: every candidate with "reclaimable" and "why". */
static int preview_json(struct cli *c, const struct candidates *cands,
			const struct reclaim_args *a, size_t staging, size_t orphans,
			struct wsl_error *err)
{
	json_t *out = json_object(), *list = json_array();
	char why[1200];
	size_t i;
	int rc;

	if (out == NULL || list == NULL)
		goto oom;
	for (i = 0; i < cands->n; i++) {
		json_t *item = output_entry_json(&cands->items[i]);
		bool ok = lockrules_reclaimable(&cands->items[i], a->force, why, sizeof(why));
		enum wsl_code code = lockrules_reclaim_code(&cands->items[i], a->force);
		char next[PATH_MAX * 8 + 256];

		if (item == NULL ||
		    json_object_set_new(item, "reclaimable", json_boolean(ok)) != 0 ||
		    json_object_set_new(item, "why", json_string(why)) != 0 ||
		    json_object_set_new(item, "code", ok ? json_null() :
					json_string(wsl_code_name(code))) != 0 ||
		    (code == WSL_LOCK_CORRUPT && output_corrupt_next(c, &cands->items[i], next, sizeof(next)) &&
		     json_object_set_new(item, "next", json_string(next)) != 0) ||
		    json_array_append_new(list, item) != 0)
			goto oom;
	}
	if (json_object_set_new(out, "action", json_string("preview")) != 0)
		goto oom;
	rc = json_object_set_new(out, "candidates", list);
	list = NULL;	/* out's now, or freed */
	if (rc != 0 || json_object_set_new(out, "garbage", garbage_json(staging, orphans)) != 0)
		goto oom;
	return output_json(c, out);
oom:
	json_decref(list);
	json_decref(out);
	return wsl_error_set(err, WSL_OS, "out of memory");
}

/* What reclaim --yes did with one candidate, for its document. */
static json_t *reclaimed_json(const struct lock_entry *e, const struct child *ch,
			      int cmd_status)
{
	json_t *item = json_object();

	if (item == NULL)
		return NULL;
	if (json_object_set_new(item, "workspace_root", json_string(e->workspace_root)) != 0 ||
	    json_object_set_new(item, "prior_owner", owner_to_json(&e->owner)) != 0 ||
	    json_object_set_new(item, "liveness", json_string(liveness_name(e->liveness))) != 0 ||
	    json_object_set_new(item, "liveness_reason", json_string(e->reason)) != 0 ||
	    (ch->cmd != NULL &&
	     json_object_set_new(item, "command_status", json_integer(cmd_status)) != 0)) {
		json_decref(item);
		return NULL;
	}
	return item;
}

/* Whether the lock of ws is retained now (a cleanup command failed). */
static bool left_retained(struct registry *reg, const char *ws)
{
	struct wsl_error err = { 0 };
	struct lock_entry e;
	bool r;

	if (registry_get(reg, ws, false, &e, &err) != 0) {
		wsl_error_clear(&err);
		return false;
	}
	r = e.state == LOCK_RETAINED;
	lock_entry_free(&e);
	return r;
}

/* A candidate reclaim --yes left alone: why, the code that says it (from
 * the error table), and for a corrupt lock that recover clears the
 * command to do it (next, as in the error line). */
static json_t *skipped_json(const struct cli *c, const struct lock_entry *e,
			    const char *why, enum wsl_code code)
{
	char next[PATH_MAX * 8 + 256];
	json_t *item = json_pack("{s:o,s:s,s:s}", "workspace_root",
				 e->workspace_root[0] ? json_string(e->workspace_root) : json_null(),
				 "why", why, "code", wsl_code_name(code));

	if (item != NULL && code == WSL_LOCK_CORRUPT &&
	    output_corrupt_next(c, e, next, sizeof(next)) &&
	    json_object_set_new(item, "next", json_string(next)) != 0) {
		json_decref(item);
		return NULL;
	}
	return item;
}

/*
 * reclaim --yes: takes over each reclaimable candidate (lockrules decides,
 * as for the preview), runs ch's command under each when there is one,
 * clears the garbage and prints what was done. Returns the exit status, or
 * -1 with err.
 */
static int reclaim_all(struct cli *c, struct registry *reg, const struct candidates *cands,
		       const struct reclaim_args *a, struct child *ch, struct wsl_error *err)
{
	json_t *out = json_object(), *list = json_array(), *skipped = json_array();
	json_t *retained = json_array();
	size_t staging = 0, orphans = 0, i;
	int status, exit_status = 0, rc;
	char why[1200];

	if (out == NULL || list == NULL || skipped == NULL || retained == NULL)
		goto oom;
	for (i = 0; i < cands->n; i++) {
		const struct lock_entry *e = &cands->items[i];
		int cmd_status = -1;
		json_t *item;

		if (!lockrules_reclaimable(e, a->force, why, sizeof(why))) {
			enum wsl_code code = lockrules_reclaim_code(e, a->force);
			char next[PATH_MAX * 8 + 256];

			if (json_array_append_new(skipped, skipped_json(c, e, why, code)) != 0)
				goto oom;
			/* A workspace named on the command line and not reclaimed
			 * fails reclaim with that reason's code, so a script sees it. */
			if (a->named) {
				bool has_next = code == WSL_LOCK_CORRUPT &&
					output_corrupt_next(c, e, next, sizeof(next));
				if (exit_status == 0)
					exit_status = wsl_code_exit(code);
				if (!c->quiet)
					output_notice("not reclaimed: %s: %s%s%s [%s]",
						e->workspace_root, why, has_next ? "; next: " : "",
						has_next ? next : "", wsl_code_name(code));
			}
			continue;
		}
		if (reclaim_one(c, reg, e, a, ch, &cmd_status, err) != 0 &&
		    err->code == WSL_REGISTRY_BUSY)
			goto fail;	/* -w/-n ran out: nothing more can be done now */
		if (err->code != WSL_OK) {
			/* Changed since it was read, came alive, or failed: only
			 * a failure (not a lock that moved on) fails reclaim. */
			if (exit_status == 0 && (a->named || (err->code != WSL_NOT_HELD &&
			    err->code != WSL_OWNER_MISMATCH && err->code != WSL_OWNER_LIVE &&
			    err->code != WSL_BUSY &&
			    err->code != WSL_LIVENESS_UNKNOWN && err->code != WSL_RECOVERY_REQUIRED)))
				exit_status = wsl_code_exit(err->code);
			if (!c->quiet)
				output_notice("skipped %s: %s [%s]", e->workspace_root,
					err->message, wsl_code_name(err->code));
			item = json_pack("{s:s,s:s,s:s}", "workspace_root", e->workspace_root,
					 "why", err->message, "code", wsl_code_name(err->code));
			wsl_error_clear(err);
			if (json_array_append_new(skipped, item) != 0)
				goto oom;
			continue;
		}
		if (ch->cmd != NULL && cmd_status != 0 && exit_status == 0)
			exit_status = cmd_status;
		/* A cleanup that failed left the workspace locked again,
		 * retained for recovery: not reclaimed. */
		if (json_array_append_new(ch->cmd != NULL && cmd_status != 0 &&
					  left_retained(reg, e->workspace_root) ? retained : list,
					  reclaimed_json(e, ch, cmd_status)) != 0)
			goto oom;
		if (c->verbose)
			output_notice("reclaimed %s (%s)", e->workspace_root, e->reason);
	}
	if (registry_coord_lock(reg, LOCK_EX, err) != 0 ||
	    registry_garbage(reg, true, &staging, &orphans, err) != 0)
		goto fail;
	registry_coord_unlock(reg);
	if (json_object_set_new(out, "action", json_string("reclaimed")) != 0)
		goto oom;
	rc = json_object_set_new(out, "reclaimed", list);
	rc |= json_object_set_new(out, "retained", retained);
	rc |= json_object_set_new(out, "skipped", skipped);
	list = skipped = retained = NULL;	/* out's now, or freed */
	if (rc != 0 ||
	    json_object_set_new(out, "garbage_removed", garbage_json(staging, orphans)) != 0)
		goto oom;
	status = output_json(c, out);
	return status != 0 ? status : exit_status;
oom:
	wsl_error_set(err, WSL_OS, "out of memory");
fail:
	json_decref(list);
	json_decref(skipped);
	json_decref(retained);
	json_decref(out);
	return -1;
}

/* The arguments' rules beyond each option's own: a usage error's exit
 * status, or 0. */
static int check_args(struct cli *c, const struct reclaim_args *a, int argc, int dashdash,
		      char **argv, struct child *ch)
{
	if (a->force != (a->reason != NULL))
		return output_usage(c, a->force ? "--force needs --reason TEXT" :
				    "--reason goes with --force");
	if (a->text && a->yes)
		return output_usage(c, "--format text is for the preview; --yes prints JSON");
	if (dashdash < argc) {
		ch->cmd = argv + dashdash + 1;
		if (ch->cmd[0] == NULL)
			return output_usage(c, "reclaim needs a COMMAND after --");
		if (!a->yes)
			return output_usage(c, "a cleanup COMMAND runs only with --yes");
	}
	return 0;
}

static int reclaim_main(struct cli *c, int argc, char **argv)
{
	struct reclaim_args a = { .wait = { false, -1, -1, -1, false, false, NULL } };
	struct candidates cands = { NULL, 0, 0 };
	struct wsl_error err = { 0 };
	struct child ch = { 0 };
	struct registry reg;
	bool have_reg = false;
	size_t staging = 0, orphans = 0, i;
	sigset_t orig;
	int dashdash, first, status = 0;

	dashdash = cli_split_command(argc, argv);
	c->json_errors = true;
	first = cli_parse(c, &cmd_reclaim, dashdash, argv, reclaim_option, &a, &status);
	if (first < 0)
		return status;
	a.named = first < dashdash;
	status = check_args(c, &a, argc, dashdash, argv, &ch);
	if (status != 0)
		return status;
	if (registry_open(&reg, &c->reg_cfg, a.yes, &err) != 0)
		goto fail;
	have_reg = true;
	hold_registry_bound(c, &reg, &a.wait);
	/* The preview reads without .coordination (section 5); --yes then
	 * compares-and-swaps each candidate under it. */
	if (collect(&reg, argc, argv, first, dashdash, &cands, &err) != 0 ||
	    registry_garbage(&reg, false, &staging, &orphans, &err) != 0)
		goto fail;
	if (!a.yes) {
		status = a.text ? preview_text(c, &cands, &a, staging, orphans, &err) :
			preview_json(c, &cands, &a, staging, orphans, &err);
	} else {
		if (ch.cmd != NULL) {
			ch.sigfd = child_block_signals(&orig, &err);
			if (ch.sigfd < 0)
				goto fail;
			ch.orig_mask = &orig;
			ch.stdout_to_stderr = true;
			/* A failed cleanup leaves a half-clean workspace: keep
			 * it locked, retained, like run --retain-on-failure. */
			ch.retain_on_failure = true;
		}
		status = reclaim_all(c, &reg, &cands, &a, &ch, &err);
	}
	if (status < 0)
		goto fail;
	goto done;
fail:
	status = output_error(c, &err);
	wsl_error_clear(&err);
done:
	for (i = 0; i < cands.n; i++)
		lock_entry_free(&cands.items[i]);
	free(cands.items);
	if (have_reg)
		registry_close(&reg);
	return status;
}

const struct cli_command cmd_reclaim = {
	"reclaim", reclaim_main, "[--yes] [--force --reason TEXT] [WORKSPACE...] [-- COMMAND [ARG...]]",
	"List (default) or remove (--yes) the locks of provably dead owners.",
	reclaim_options,
	"Without --yes nothing changes: every lock is listed with its liveness and\n"
	"whether it is reclaimable. --yes removes each reclaimable lock by the same\n"
	"exact compare-and-swap as recover (an owner that changed meanwhile is skipped)\n"
	"and clears garbage left by crashes. Retained, corrupt and live locks are\n"
	"never removed. --yes acts on the registry as it is then: each removal is a\n"
	"compare-and-swap against the owner it has just read. With COMMAND, it runs\n"
	"inside each reclaimed workspace under its lock (a cleanup hook; its stdout\n"
	"goes to stderr, stdout stays JSON); a COMMAND that fails leaves that lock\n"
	"retained, and the exit status is the first failing COMMAND's. Every removal\n"
	"is appended to journal.jsonl.\n",
};
