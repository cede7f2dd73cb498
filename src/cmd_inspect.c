/* cmd_inspect.c - wslock inspect: who holds a workspace, is the holder
 * alive, what overlaps. Never creates or changes anything. */
#include "cli.h"
#include "fsx.h"
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct cli_option inspect_options[] = {
	{ "owner", OPT_OWNER, no_argument, NULL,
	  "print only the owner document (or null when free): the input 'recover' expects" },
	{ "all", OPT_ALL, no_argument, NULL, "list every lock in the registry" },
	{ "operation-id", OPT_OPERATION_ID, required_argument, "ID",
	  "list the locks of the operation ID (as --all lists)" },
	{ "journal", OPT_JOURNAL, no_argument, NULL,
	  "print the audit journal (of WORKSPACE only, if given); --format text: one line an entry" },
	{ "registry", OPT_REGISTRY, no_argument, NULL,
	  "print where the registry is (backend and directory)" },
	{ "exit-status", OPT_EXIT_STATUS, no_argument, NULL,
	  "exit with the state: 0 free, 75 held by a live owner, 69 dead, retained or unknown, 65 corrupt (-q: print nothing)" },
	CLI_FORMAT_OPTION,
	CLI_OPT_END
};

struct inspect_args {
	bool owner_only;
	bool all;
	bool exit_status;	/* --exit-status: the state as the exit status */
	bool text;
	bool journal;
	bool registry;
	const char *operation_id;
};

static int inspect_option(int id, const char *arg, void *ctx, struct wsl_error *err)
{
	struct inspect_args *a = ctx;

	if (id == OPT_FORMAT)
		return cli_parse_format(arg, &a->text, err);
	if (id == OPT_OWNER)
		a->owner_only = true;
	else if (id == OPT_ALL)
		a->all = true;
	else if (id == OPT_EXIT_STATUS)
		a->exit_status = true;
	else if (id == OPT_JOURNAL)
		a->journal = true;
	else if (id == OPT_REGISTRY)
		a->registry = true;
	else if (id == OPT_OPERATION_ID)
		a->operation_id = arg;
	else
		return wsl_error_set(err, WSL_USAGE, "unexpected option");
	return 0;
}

/* inspect --all and --operation-id: {"locks":[...]}, each lock printed as
 * it is read (output_stream), so memory does not grow with the registry. */
struct stream_list {
	struct output_stream out;
	const char *operation_id;	/* only this operation's locks, or NULL */
};

static int stream_one(const struct lock_entry *e, void *arg)
{
	struct stream_list *l = arg;

	if (l->operation_id != NULL &&
	    (!e->has_owner || strcmp(e->owner.operation_id, l->operation_id) != 0))
		return 0;
	return output_stream_item(&l->out, output_entry_json(e)) == 0 ? 0 : -1;
}

/* Returns 0 or the exit status of a write error, or -1 with err when the
 * registry could not be read (the list printed so far is left unclosed,
 * on a line of its own, before the error). */
static int inspect_stream(struct cli *c, struct registry *reg, const char *operation_id,
			  struct wsl_error *err)
{
	struct stream_list l = { .operation_id = operation_id };

	if (output_stream_begin(c, &l.out, "locks") != 0)
		return l.out.status;
	if (registry_list(reg, true, stream_one, &l, err) != 0) {
		if (l.out.status != 0)
			return l.out.status;
		output_stream_abort(&l.out);
		if (err->code == WSL_OK)
			wsl_error_set(err, WSL_OS, "out of memory");
		return -1;
	}
	return output_stream_end(&l.out);
}

/* inspect --operation-id ID: the locks whose owner carries that operation
 * id, in the shape of --all (several workspaces may share one operation). */
static int inspect_operation(struct cli *c, struct registry *reg, const char *id,
			     struct wsl_error *err)
{
	return inspect_stream(c, reg, id, err);
}

/* The journal may grow without bound (DESIGN §5); this is what one inspect
 * reads of it. */
#define JOURNAL_READ_MAX (256u << 20)

/* Bytes of a line that is not a journal entry shown in its "text". */
#define JOURNAL_BAD_TEXT_MAX 4096

/* buf's len bytes of journal lines as a JSON array, oldest first: each
 * line that parses as an object is an entry (kept only when ws is NULL or
 * it names ws); any other non-empty line becomes {"invalid":true,
 * "line":N (1-based, as sed -n Np counts), "length":BYTES,"text":its first
 * JOURNAL_BAD_TEXT_MAX bytes or null when they are not UTF-8}, kept with
 * any ws (whose it was cannot be known), and is named on stderr unless
 * quiet (path names the journal). NULL only when out of memory. */
static json_t *journal_entries(const char *buf, size_t len, const char *ws,
			       const char *path, bool quiet)
{
	json_t *list = json_array();
	size_t at = 0, lineno = 0;

	while (list != NULL && buf != NULL && at < len) {
		const char *line = buf + at, *nl = memchr(line, '\n', len - at);
		size_t n = nl ? (size_t)(nl - line) : len - at;
		json_t *ev;

		at += n + (nl ? 1 : 0);
		lineno++;
		if (n == 0)
			continue;
		ev = json_loadb(line, n, 0, NULL);
		if (json_is_object(ev)) {
			const char *w = json_string_value(json_object_get(ev, "workspace_root"));

			if (ws == NULL || (w != NULL && strcmp(w, ws) == 0))
				json_array_append(list, ev);
		} else {
			json_t *bad = json_object(), *t;

			t = json_stringn(line, n < JOURNAL_BAD_TEXT_MAX ? n : JOURNAL_BAD_TEXT_MAX);
			json_object_set_new(bad, "invalid", json_true());
			json_object_set_new(bad, "line", json_integer((json_int_t)lineno));
			json_object_set_new(bad, "length", json_integer((json_int_t)n));
			json_object_set_new(bad, "text", t != NULL ? t : json_null());
			if (json_array_append_new(list, bad) != 0) {
				json_decref(list);
				list = NULL;
			}
			if (!quiet)
				output_notice("%s: line %zu is not a journal entry (%zu bytes; listed as invalid)",
					      path, lineno, n);
		}
		json_decref(ev);
	}
	return list;
}

/* inspect --journal [WORKSPACE]: LOCKDIR/journal.jsonl as {"journal":[...]},
 * every line (or those of one workspace), oldest first; a line that is not
 * an entry is listed as invalid (journal_entries), the rest still shown. */
static int inspect_journal(struct cli *c, struct registry *reg, const char *ws,
			   bool text, struct wsl_error *err)
{
	char path[PATH_MAX + 32], *buf = NULL;
	json_t *list, *out;
	size_t len = 0;
	int fd;

	registry_coord_unlock(reg);
	if (reg->path[0] == '\0') {
		/* etcd: the journal's keys */
		snprintf(path, sizeof(path), "the %s journal", registry_backend(reg));
		if (registry_journal(reg, &buf, &len, err) != 0)
			return -1;
		fd = -1;
	} else {
		snprintf(path, sizeof(path), "%s/journal.jsonl", reg->path);
		fd = open(reg->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0 && errno != ENOENT && reg->path[0] != '\0')	/* no registry yet: no journal */
		return wsl_error_errno(err, WSL_IO, errno, "cannot open %s", reg->path);
	if (fd >= 0 && fsx_read_file_checked(fd, "journal.jsonl", path, JOURNAL_READ_MAX,
					     &buf, &len, err) != 0) {
		close(fd);
		if (err->code != WSL_IO || err->sys_errno != ENOENT)
			return -1;
		wsl_error_clear(err);
	} else if (fd >= 0) {
		close(fd);
	}
	list = journal_entries(buf, len, ws, path, c->quiet);
	if (list == NULL) {
		free(buf);
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	}
	free(buf);
	if (text) {
		int rc = output_journal_table(list);

		json_decref(list);
		return rc;
	}
	out = json_object();
	json_object_set_new(out, "journal", list);
	return output_json(c, out);
}

/* inspect --registry: which backend and, for the local one, which directory. */
static int inspect_registry(struct cli *c, struct registry *reg)
{
	json_t *out = json_object();

	registry_coord_unlock(reg);
	json_object_set_new(out, "backend", json_string(registry_backend(reg)));
	json_object_set_new(out, "registry", reg->path[0] ? json_string(reg->path) : json_null());
	return output_json(c, out);
}

/* inspect --all --format text: every row rendered as it is read. */
struct text_list {
	const struct cli *c;
	struct output_text *items;
	size_t n, cap;
};

static int keep_one(const struct lock_entry *e, void *arg)
{
	struct text_list *t = arg;
	struct output_row row = { e, NULL, NULL };

	/* A shared lock: one row per holder. */
	for (size_t i = 0; i < e->n_holders; i++)
		if (keep_one(&e->holders[i], arg) != 0)
			return -1;
	if (e->holders != NULL)
		return 0;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		struct output_text *p = realloc(t->items, cap * sizeof(*p));
		if (p == NULL)
			return -1;
		t->items = p;
		t->cap = cap;
	}
	if (output_text_row(t->c, &row, &t->items[t->n]) != 0)
		return -1;
	t->n++;
	return 0;
}

static int inspect_all(struct cli *c, struct registry *reg, bool text,
		       struct wsl_error *err)
{
	/* The text table sizes its columns by every row, so it keeps them
	 * (as text: a few hundred bytes a row). */
	if (text) {
		struct text_list t = { c, NULL, 0, 0 };
		size_t i;
		int rc;

		rc = registry_list(reg, true, keep_one, &t, err);
		if (rc != 0 && err->code == WSL_OK)
			wsl_error_set(err, WSL_OS, "out of memory");
		if (rc == 0)
			rc = output_text_table(t.items, t.n);
		for (i = 0; i < t.n; i++)
			output_text_free(&t.items[i]);
		free(t.items);
		return rc;
	}
	return inspect_stream(c, reg, NULL, err);
}

/* Prints out, unless silent (--exit-status -q: the status says it all);
 * with several workspaces, appends it to collect instead (NULL: one). */
static int emit(struct cli *c, json_t *out, bool silent, json_t *collect)
{
	if (!silent && collect != NULL)
		return json_array_append_new(collect, out) == 0 ? 0 :
			(output_notice("out of memory"), 71);
	if (!silent)
		return output_json(c, out);
	json_decref(out);
	return 0;
}

/* The exit status of err, reported as every error is, except with
 * --exit-status -q: then the status says it all and nothing is printed
 * (a workspace that does not exist: 66, silently). Clears err. */
static int quiet_error(struct cli *c, const struct inspect_args *a, struct wsl_error *err)
{
	int status;

	if (a->exit_status && c->quiet)
		status = wsl_code_exit(err->code);
	else
		status = output_error(c, err);
	wsl_error_clear(err);
	return status;
}

static void queued_free(struct lock_entry *q, size_t n)
{
	for (size_t i = 0; i < n; i++)
		lock_entry_free(&q[i]);
	free(q);
}

/* The waiters queued for a free workspace (registry_queued) as the
 * report's "queued": [{pid, mode, workspace_root, since}], oldest first;
 * NULL when out of memory. */
static json_t *queued_json(const struct lock_entry *q, size_t n)
{
	json_t *list = json_array();

	for (size_t i = 0; list != NULL && i < n; i++)
		if (json_array_append_new(list, json_pack("{s:I,s:s,s:s,s:s}",
				"pid", (json_int_t)q[i].owner.pid,
				"mode", q[i].shared ? "shared" : "exclusive",
				"workspace_root", q[i].workspace_root,
				"since", q[i].owner.acquired_at)) != 0) {
			json_decref(list);
			list = NULL;
		}
	return list;
}

/* inspect WORKSPACE: its lock and the locks overlapping it; *state gets
 * the exit status --exit-status gives: the worst state of those locks
 * (lockrules_worse_code). */
static int inspect_one(struct cli *c, struct registry *reg, const char *arg,
		       const struct inspect_args *a, int *state, json_t *collect,
		       struct wsl_error *err)
{
	bool owner_only = a->owner_only, text = a->text;
	bool silent = a->exit_status && c->quiet;
	char ws[PATH_MAX];
	struct overlap *ov = NULL;
	struct lock_entry e, *queued = NULL;
	struct stat st;
	json_t *out, *list;
	size_t n = 0, i, nq = 0;
	enum wsl_code code;
	int rc;

	if (registry_workspace(reg, arg, true, ws, err) != 0)
		return -1;
	if (registry_get(reg, ws, true, &e, err) != 0)
		return -1;
	code = lockrules_state_code(&e);
	*state = wsl_code_exit(code);
	/* --owner of a free workspace that does not exist: the same error as
	 * without --owner (below), never a null that reads as "free". */
	if (owner_only && !a->exit_status &&
	    (e.state != LOCK_FREE || stat(ws, &st) == 0)) {
		out = e.has_owner ? owner_to_json(&e.owner) : json_null();
		lock_entry_free(&e);
		return emit(c, out, silent, collect);
	}
	if (registry_overlaps(reg, ws, true, &ov, &n, err) != 0) {
		lock_entry_free(&e);
		return -1;
	}
	/* --exit-status: the worst of the workspace's own lock and those that
	 * overlap it, as run would meet them (a dead ancestor: 69). */
	for (i = 0; i < n; i++)
		code = lockrules_worse_code(code, lockrules_state_code(&ov[i].entry));
	/* Free, but a waiter queued for it (or for a workspace overlapping
	 * it) comes first: run -n is refused (75), so --exit-status says 75
	 * too, and the report names the waiters. */
	if (code == WSL_OK && registry_queued(reg, ws, &queued, &nq, err) != 0) {
		lock_entry_free(&e);
		lock_overlaps_free(ov, n);
		return -1;
	}
	if (nq > 0)
		code = WSL_BUSY;
	*state = wsl_code_exit(code);
	if (e.state == LOCK_FREE && n == 0 && nq == 0 && stat(ws, &st) != 0) {
		lock_entry_free(&e);
		lock_overlaps_free(ov, n);
		return wsl_error_set(err, WSL_NO_WORKSPACE,
				     "workspace %s does not exist and holds no lock", arg);
	}
	if (owner_only) {
		out = e.has_owner ? owner_to_json(&e.owner) : json_null();
		lock_entry_free(&e);
		lock_overlaps_free(ov, n);
		queued_free(queued, nq);
		return emit(c, out, silent, collect);
	}
	snprintf(e.workspace_root, sizeof(e.workspace_root), "%s", ws);
	if (silent) {
		lock_entry_free(&e);
		lock_overlaps_free(ov, n);
		queued_free(queued, nq);
		return 0;
	}
	if (text) {
		size_t nh = e.n_holders > 0 ? e.n_holders : 1;
		struct output_row *rows = calloc(n + nh, sizeof(*rows));
		char (*labels)[PATH_MAX + 32] = calloc(n + 1, sizeof(*labels));
		rc = -1;
		if (rows != NULL && labels != NULL) {
			/* A shared lock: a row for each holder. */
			for (i = 0; i < nh; i++)
				rows[i].e = e.n_holders > 0 ? &e.holders[i] : &e;
			for (i = 0; i < n; i++) {
				snprintf(labels[i], sizeof(labels[i]), "  %s %s",
					 ov[i].ancestor ? "ancestor" : "descendant",
					 ov[i].entry.workspace_root[0] ?
					 ov[i].entry.workspace_root : ov[i].entry.key);
				rows[i + nh].e = &ov[i].entry;
				rows[i + nh].label = labels[i];
			}
			rc = output_table(c, rows, n + nh);
			if (rc == 0 && nq > 0)
				rc = output_queued_text(queued, nq);
		} else {
			wsl_error_set(err, WSL_OS, "out of memory");
		}
		free(rows);
		free(labels);
		lock_entry_free(&e);
		lock_overlaps_free(ov, n);
		queued_free(queued, nq);
		return rc;
	}
	out = output_entry_json(&e);
	list = json_array();
	for (i = 0; out != NULL && list != NULL && i < n; i++) {
		json_t *item = output_entry_json(&ov[i].entry);
		if (item == NULL ||
		    json_object_set_new(item, "relation",
					json_string(ov[i].ancestor ? "ancestor" : "descendant")) != 0 ||
		    json_array_append_new(list, item) != 0)
			break;	/* out of memory: never a shorter list */
	}
	lock_entry_free(&e);
	lock_overlaps_free(ov, n);
	rc = nq > 0 && out != NULL ? json_object_set_new(out, "queued", queued_json(queued, nq)) : 0;
	queued_free(queued, nq);
	if (out == NULL || list == NULL || i < n || rc != 0 ||
	    json_object_set_new(out, "overlapping", json_incref(list)) != 0) {
		json_decref(list);
		json_decref(out);
		return wsl_error_set(err, WSL_OS, "out of memory");
	}
	json_decref(list);
	return emit(c, out, false, collect);
}

/* inspect WS1 WS2...: {"workspaces":[...]} (or, with --owner,
 * {"owners":[...]}), each item exactly what inspect of that one prints;
 * --format text prints each table in turn; *state gets the worst
 * --exit-status of them (65 before 69 before 75 before 0). */
static int inspect_several(struct cli *c, struct registry *reg, char **args, size_t n,
			   const struct inspect_args *a, int *state, struct wsl_error *err)
{
	/* The --exit-status statuses, best first (lockrules_worse_code). */
	static const int order[] = { 0, 75, 69, 65 };
	json_t *collect = a->text ? NULL : json_array();
	size_t worst = 0;
	int rc = 0;

	if (!a->text && collect == NULL)
		return wsl_error_set(err, WSL_OS, "out of memory");
	for (size_t i = 0; i < n && rc == 0; i++) {
		int one = 0;
		size_t r = 0;

		rc = inspect_one(c, reg, args[i], a, &one, collect, err);
		while (r < 3 && order[r] != one)
			r++;
		if (r > worst)
			worst = r;
	}
	*state = order[worst];
	if (rc != 0 || collect == NULL) {
		json_decref(collect);
		return rc;
	}
	if (a->exit_status && c->quiet) {
		json_decref(collect);
		return 0;
	}
	{
		json_t *out = json_object();
		json_object_set_new(out, a->owner_only ? "owners" : "workspaces", collect);
		return output_json(c, out);
	}
}

static int inspect_main(struct cli *c, int argc, char **argv)
{
	struct inspect_args a = { 0 };
	struct wsl_error err = { 0 };
	struct registry reg;
	int first, status = 0, rc, state = 0;

	c->json_errors = true;
	first = cli_parse(c, &cmd_inspect, argc, argv, inspect_option, &a, &status);
	if (first < 0)
		return status;
	if ((a.journal || a.registry || a.operation_id) &&
	    (a.all || a.owner_only || (a.text && !a.journal)))
		return output_usage(c, "--journal, --registry and --operation-id go without --all and --owner; --format text goes with --journal only");
	if (a.registry || a.operation_id) {
		if (argc - first != 0 || (a.registry && a.operation_id) || a.journal)
			return output_usage(c, "%s takes no WORKSPACE and no other view",
					    a.registry ? "inspect --registry" : "inspect --operation-id");
	} else if (a.journal) {
		if (argc - first > 1)
			return output_usage(c, "inspect --journal takes at most one WORKSPACE");
	} else if (a.all ? argc - first != 0 : argc - first == 0) {
		return output_usage(c, a.all ? "inspect --all takes no WORKSPACE" :
				 "inspect needs a WORKSPACE or --all");
	}
	if (a.all && a.owner_only)
		return output_usage(c, "--owner and --all do not go together");
	if (a.exit_status && (a.all || a.journal || a.registry || a.operation_id))
		return output_usage(c, "--exit-status gives the state of WORKSPACE (the worst of several)");
	if (a.text && a.owner_only)
		return output_usage(c, "--owner prints the document itself; --format text does not apply");
	/* No lock on .coordination (section 5): documents are published by
	 * rename, so inspect sees the old or the new state, and a stopped
	 * wslock inside .coordination cannot make it hang. */
	if (registry_open(&reg, &c->reg_cfg, false, &err) != 0)
		return quiet_error(c, &a, &err);
	if (a.registry) {
		rc = inspect_registry(c, &reg);
	} else if (a.operation_id) {
		rc = inspect_operation(c, &reg, a.operation_id, &err);
	} else if (a.journal) {
		char ws[PATH_MAX];
		rc = argc - first == 1 &&
			registry_workspace(&reg, argv[first], true, ws, &err) != 0 ? -1 :
			inspect_journal(c, &reg, argc - first == 1 ? ws : NULL, a.text, &err);
	} else {
		rc = a.all ? inspect_all(c, &reg, a.text, &err) :
			argc - first > 1 ?
			inspect_several(c, &reg, argv + first, (size_t)(argc - first), &a, &state, &err) :
			inspect_one(c, &reg, argv[first], &a, &state, NULL, &err);
	}
	registry_close(&reg);
	if (rc < 0)
		return quiet_error(c, &a, &err);
	return rc == 0 && a.exit_status ? state : rc;
}

const struct cli_command cmd_inspect = {
	"inspect", inspect_main,
	"[options] WORKSPACE... | --all | --operation-id ID | --journal [WORKSPACE] | --registry",
	"Show the lock on WORKSPACE (or on each): state, owner, liveness and overlapping locks.",
	inspect_options,
	"State is free, held, retained or corrupt; liveness is live, dead or unknown,\n"
	"with a one-line reason. inspect never creates or changes anything.\n"
	"mode is shared or exclusive, owners every holder's document; a shared lock\n"
	"also lists its holders, and its owner is the one a writer meets first\n"
	"(dead before live): the document recover needs.\n"
	"--exit-status: the state as the exit status, for scripts without jq: 0 free,\n"
	"75 held by a live owner, 69 dead, retained or unknown, 65 corrupt; the\n"
	"worst of WORKSPACE's own lock and the overlapping locks on its ancestors\n"
	"and descendants (65 before 69 before 75), as run would meet them. The JSON\n"
	"is still printed (its state is WORKSPACE's own), unless -q.\n"
	"Several workspaces: {\"workspaces\":[...]} (--owner: {\"owners\":[...]}), each\n"
	"item as for one; --exit-status gives the worst of them.\n",
};
