/* cmd_release.c - wslock release --token T WORKSPACE: release a lock taken
 * by acquire, only when T is its owner's token, never one whose live
 * kernel lock is held (a running `wslock run`), and not while runs nested
 * under it still run. */
#include "child.h"
#include "cli.h"
#include "hold.h"
#include "keeper_pid.h"
#include "output.h"
#include "fsx.h"
#include "platform.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>

static const struct cli_option release_options[] = {
	{ "token", OPT_TOKEN, required_argument, "TOKEN",
	  "the owner's token (from acquire's owner document); required" },
	{ "timeout", 'w', required_argument, "SECONDS",
	  "give up after SECONDS waiting for nested runs (WSLOCK_TIMEOUT) or the registry (WSLOCK_REGISTRY_BUSY)" },
	{ "nonblock", 'n', no_argument, NULL,
	  "fail at once (WSLOCK_BUSY) while runs nested under the lock still run (not with -w)" },
	{ "retain", OPT_RETAIN, no_argument, NULL,
	  "keep the lock, retained for recovery, instead of releasing it (needs --reason)" },
	{ "reason", OPT_REASON, required_argument, "TEXT",
	  "why the lock is retained (with --retain), recorded in its retained.json" },
	CLI_OPT_END
};

struct release_args {
	const char *token;
	bool retain;
	const char *reason;
	struct hold_wait wait;
};

static int release_option(int id, const char *arg, void *ctx, struct wsl_error *err)
{
	struct release_args *a = ctx;
	int rc = hold_registry_option(&a->wait, id, arg, err);

	if (rc != 0)
		return rc < 0 ? -1 : 0;
	if (id == OPT_RETAIN) {
		a->retain = true;
		return 0;
	}
	if (id == OPT_REASON)
		return cli_opt_reason(arg, &a->reason, err);
	if (id != OPT_TOKEN)
		return wsl_error_set(err, WSL_USAGE, "unexpected option");
	if (strlen(arg) != WSL_TOKEN_HEX)
		return wsl_error_set(err, WSL_USAGE,
				     "--token takes the 32 hex digits of an owner's token");
	if (!crypto_hex_valid(arg, WSL_TOKEN_HEX))
		return wsl_error_set(err, WSL_USAGE,
				     "--token takes the 32 lowercase hex digits of an owner's token");
	a->token = arg;
	return 0;
}

/* A lock whose live kernel lock is held belongs to a running `wslock run`
 * (or its command, or recover/reclaim running a command): the token is
 * printed everywhere, so it is no right to end that (nor to retain it).
 * The kernel lock on live is taken at publish and only ever dropped, so a
 * check before the release cannot be outrun. Also refuses --retain of a
 * free workspace (WSL_NOT_HELD), and copies token's owner, when it is the
 * one there, to *seen for the output. */
static int refuse_live(struct registry *reg, const char *ws, const char *token,
		       bool retain, struct owner *seen, struct wsl_error *err)
{
	const struct lock_entry *h;
	struct lock_entry e;
	int rc = 0;

	if (registry_get(reg, ws, true, &e, err) != 0)
		return -1;
	/* The owner that a retain under the coordination lock will find
	 * again by its token (never edited while held). */
	/* A shared lock: token's own holder (lock_entry_by_token). */
	h = lock_entry_by_token(&e, token);
	if (h != NULL)
		*seen = h->owner;
	if (retain && e.state == LOCK_FREE)
		rc = wsl_error_set(err, WSL_NOT_HELD, "%s is not locked; nothing retained", ws);
	else if (h != NULL && h->live_held) {
		lockrules_error_holder(err, h);
		rc = wsl_error_set(err, WSL_OWNER_LIVE,
				   "%s is held by a running wslock run (pid %ld) or its command (%s); it %s itself when the command ends; nothing %s",
				   ws, (long)h->owner.pid, h->reason,
				   retain ? "releases or retains" : "releases",
				   retain ? "retained" : "released");
	}
	lock_entry_free(&e);
	return rc;
}

/* Takes the lock's nested file exclusively into *nfd, waiting as -w/-n say
 * while runs nested under the lock still run. */
static int wait_nested(struct cli *c, struct registry *reg, const char *ws,
		       const struct release_args *a, int *nfd, struct wsl_error *err)
{
	long long deadline = a->wait.timeout_ms >= 0 ?
		platform_mono_ms() + a->wait.timeout_ms : -1;
	int rc;

	rc = registry_nest_lock(reg, ws, a->token, LOCK_EX | LOCK_NB, nfd, err);
	if (rc != NEST_LOCK_BUSY)
		return rc < 0 ? -1 : 0;	/* GONE: release reports what is there */
	if (a->wait.nonblock)
		return wsl_error_set(err, WSL_BUSY,
				     "wslock runs nested under the lock of %s are still running; nothing released",
				     ws);
	if (!c->quiet)
		output_notice("waiting for the wslock runs nested under %s to end", ws);
	if (deadline < 0) {
		rc = registry_nest_lock(reg, ws, a->token, LOCK_EX, nfd, err);
		return rc < 0 ? -1 : 0;
	}
	/* flock(2) has no timeout: a bounded wait polls. */
	for (;;) {
		struct timespec ts = { 0, 20 * 1000 * 1000 };

		rc = registry_nest_lock(reg, ws, a->token, LOCK_EX | LOCK_NB, nfd, err);
		if (rc != NEST_LOCK_BUSY)
			return rc < 0 ? -1 : 0;
		if (platform_mono_ms() >= deadline)
			return wsl_error_set(err, WSL_TIMEOUT,
					     "timed out: wslock runs nested under the lock of %s are still running; nothing released",
					     ws);
		nanosleep(&ts, NULL);
	}
}

/* release --retain: marks the lock of ws retained for recovery, as a
 * failed `run --retain-on-failure` does, with --reason in its
 * retained.json (a copy in *doc: free it). */
static int retain(struct registry *reg, const char *ws, const struct release_args *a,
		  char **doc, struct wsl_error *err)
{
	*doc = child_retained_doc(a->token, a->reason, -1, 0);
	if (*doc == NULL)
		return wsl_error_set(err, WSL_INTERNAL, "cannot format retained.json");
	return registry_retain(reg, ws, a->token, *doc, err);
}

/* The release document of one workspace: {"action", "workspace_root",
 * "owner", "retained"?}. Takes retained (a text, freed). */
static json_t *release_doc(const struct release_args *a, const char *ws,
			   const struct owner *o, char *retained)
{
	json_t *out = json_object();

	json_object_set_new(out, "action", json_string(a->retain ? "retained" : "released"));
	json_object_set_new(out, "workspace_root", json_string(ws));
	json_object_set_new(out, "owner", owner_to_json(o));
	if (retained != NULL) {
		json_t *r = json_loads(retained, 0, NULL);
		json_object_set_new(out, "retained", r != NULL ? r : json_null());
		free(retained);
	}
	return out;
}

/* Before anything of several workspaces is released: each is token's
 * own lock (as registry_release will check again under the coordination
 * lock) and not a running run's (refuse_live), so that a wrong token or
 * workspace leaves every lock as it was. */
static int release_check(struct registry *reg, const char *ws, const struct release_args *a,
			 struct owner *seen, struct wsl_error *err)
{
	const struct lock_entry *h;
	struct lock_entry e;
	int rc;

	if (refuse_live(reg, ws, a->token, a->retain, seen, err) != 0 ||
	    registry_get(reg, ws, false, &e, err) != 0)
		return -1;
	/* A shared lock: token's own holder among several, as the release
	 * itself finds it (none: the lock as read, which the check refuses). */
	h = e.shared ? lock_entry_by_token(&e, a->token) : NULL;
	rc = lockrules_check_release(ws, a->token, h != NULL ? h : &e, err);
	lock_entry_free(&e);
	return rc;
}

/* release --token T WS1 WS2...: every one of them checked first (none is
 * released when one is not T's), then each released (or retained) after
 * the runs nested under it; prints {"releases":[...]}, one release
 * document each in argument order. */
static int release_multi(struct cli *c, struct release_args *a, char **args, size_t n)
{
	struct wsl_error err = { 0 };
	struct registry reg;
	char (*ws)[PATH_MAX] = calloc(n, sizeof(*ws));
	struct owner *os = calloc(n, sizeof(*os));
	int *nfd = calloc(n, sizeof(*nfd));
	json_t *list = json_array(), *out;
	size_t i = 0;
	int rc = -1, status;

	memset(&reg, 0, sizeof(reg));
	if (ws == NULL || os == NULL || nfd == NULL || list == NULL) {
		wsl_error_set(&err, WSL_OS, "out of memory");
		goto done;
	}
	for (i = 0; i < n; i++)
		nfd[i] = -1;
	if (n > REGISTRY_MULTI_MAX) {
		wsl_error_set(&err, WSL_USAGE, "at most %d workspaces at once, not %zu",
			      REGISTRY_MULTI_MAX, n);
		goto done;
	}
	if (registry_open_for(&reg, &c->reg_cfg, args[0], true, true, ws[0], &err) != 0)
		goto done;
	hold_registry_bound(c, &reg, &a->wait);
	for (i = 1; i < n; i++)
		if (registry_workspace(&reg, args[i], true, ws[i], &err) != 0)
			goto done;
	for (i = 0; i < n; i++)
		if (registry_locate(&reg, ws[i], ws[i], &err) != 0 ||
		    release_check(&reg, ws[i], a, &os[i], &err) != 0)
			goto done;
	for (i = 0; i < n; i++)
		if (wait_nested(c, &reg, ws[i], a, &nfd[i], &err) != 0)
			goto done;
	if (!a->retain) {
		/* All at once where the backend can (etcd: one transaction). */
		const char *wss[REGISTRY_MULTI_MAX];

		for (i = 0; i < n; i++)
			wss[i] = ws[i];
		if (registry_release_multi(&reg, wss, n, a->token, os, &err) != 0) {
			/* the one it names (none: the set as a whole) */
			for (i = 0; i < n && (err.workspace_root == NULL ||
					      strcmp(err.workspace_root, ws[i]) != 0); i++)
				;
			goto done;
		}
		/* An acquire's keeper on this machine (etcd) checks its locks
		 * now and exits, rather than at its next renewal. */
		if (strcmp(registry_backend(&reg), "etcd") == 0)
			keeper_pid_poke(a->token, KEEPER_POKE_WAIT_MS);
	}
	for (i = 0; i < n; i++) {
		char *retained = NULL;

		if (a->retain && retain(&reg, ws[i], a, &retained, &err) != 0) {
			free(retained);
			goto done;
		}
		json_array_append_new(list, release_doc(a, ws[i], &os[i], retained));
		if (c->verbose)
			output_notice("%s %s", a->retain ? "retained for recovery:" : "released", ws[i]);
	}
	rc = 0;
done:
	for (size_t j = 0; nfd != NULL && j < n; j++)
		fsx_close(nfd[j]);
	if (rc != 0) {
		wsl_error_detail(&err.workspace_root, ws != NULL && i < n && ws[i][0] == '/' ? ws[i] : NULL);
		status = hold_conflict_status(&a->wait, &err);
		output_error(c, &err);
		wsl_error_clear(&err);
		json_decref(list);
	} else {
		out = json_object();
		json_object_set_new(out, "releases", list);
		status = output_json(c, out);
	}
	registry_close(&reg);
	free(ws);
	free(os);
	free(nfd);
	return status;
}

static int release_main(struct cli *c, int argc, char **argv)
{
	struct release_args a = { NULL, false, NULL, { false, -1, -1, -1, false, false, NULL } };
	char ws[PATH_MAX];
	struct wsl_error err = { 0 };
	struct registry reg;
	struct owner o;
	int first, status = 0, nfd = -1;
	char *retained = NULL;
	json_t *out;

	c->json_errors = true;
	memset(&o, 0, sizeof(o));
	first = cli_parse(c, &cmd_release, argc, argv, release_option, &a, &status);
	if (first < 0)
		return status;
	if (argc - first == 0)
		return output_usage(c, "release needs a WORKSPACE");
	if (a.token == NULL)
		return output_usage(c, "release needs --token TOKEN");
	if (a.retain != (a.reason != NULL))
		return output_usage(c, a.retain ? "--retain needs --reason TEXT" :
				    "--reason goes with --retain");
	if (argc - first > 1)
		return release_multi(c, &a, argv + first, (size_t)(argc - first));
	/* A workspace deleted while locked can still be released by path. */
	ws[0] = '\0';
	if (registry_open_for(&reg, &c->reg_cfg, argv[first], true, true, ws, &err) != 0)
		return output_error(c, &err);
	hold_registry_bound(c, &reg, &a.wait);
	/* Through another path to the same directory: its lock's path. */
	if (registry_locate(&reg, ws, ws, &err) != 0 ||
	    refuse_live(&reg, ws, a.token, a.retain, &o, &err) != 0 ||
	    wait_nested(c, &reg, ws, &a, &nfd, &err) != 0 ||
	    (a.retain ? retain(&reg, ws, &a, &retained, &err) :
	     registry_release(&reg, ws, a.token, &o, &err)) != 0) {
		free(retained);
		fsx_close(nfd);
		wsl_error_detail(&err.workspace_root, ws[0] == '/' ? ws : NULL);
		registry_close(&reg);
		status = hold_conflict_status(&a.wait, &err);
		output_error(c, &err);
		wsl_error_clear(&err);
		return status;
	}
	fsx_close(nfd);
	/* An acquire's keeper on this machine (etcd) checks its lock now and
	 * exits, rather than at its next renewal. */
	if (strcmp(registry_backend(&reg), "etcd") == 0)
		keeper_pid_poke(a.token, KEEPER_POKE_WAIT_MS);
	registry_close(&reg);
	if (c->verbose)
		output_notice("%s %s", a.retain ? "retained for recovery:" : "released", ws);
	out = release_doc(&a, ws, &o, retained);
	return output_json(c, out);
}

const struct cli_command cmd_release = {
	"release", release_main,
	"[-w SECONDS | -n] --token TOKEN [--retain --reason TEXT] WORKSPACE...",
	"Release the lock on WORKSPACE (or on each) taken by 'wslock acquire', if TOKEN is its owner's.",
	release_options,
	"A lock held by another owner (taken over by recover) is never touched:\n"
	"release then fails with WSLOCK_OWNERSHIP_LOST (78). The lock of a running\n"
	"'wslock run' (its kernel lock on live is held) is never released by token:\n"
	"WSLOCK_OWNER_LIVE (75); it releases itself when its command ends. While\n"
	"runs nested under the lock still run, release waits for them (-n: fails\n"
	"with WSLOCK_BUSY). With --retain the lock stays, its owner document\n"
	"untouched, retained for recovery with the reason (as a failed\n"
	"'run --retain-on-failure' leaves it): the next job gets WSLOCK_RECOVERY_REQUIRED\n"
	"(69) until 'wslock recover' with the exact owner clears it.\n"
	"Several workspaces (an 'acquire A B' gives them one token): each is checked\n"
	"first, none is released unless all are TOKEN's; prints {\"releases\":[...]}.\n",
};
