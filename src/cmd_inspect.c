/* cmd_inspect.c - wslock inspect: who holds a workspace, is the holder
 * alive, what overlaps. Never creates or changes anything. */
#include "cli.h"
#include "output.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

static const struct cli_option inspect_options[] = {
	{ "owner", OPT_OWNER, no_argument, NULL,
	  "print only the owner document (or null): the input 'recover' expects" },
	{ "all", OPT_ALL, no_argument, NULL, "list every lock in the registry" },
	CLI_FORMAT_OPTION,
	CLI_OPT_END
};

struct inspect_args {
	bool owner_only;
	bool all;
	bool text;
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
	else
		return wsl_error_set(err, WSL_USAGE, "unexpected option");
	return 0;
}

static int list_one(const struct lock_entry *e, void *arg)
{
	json_t *locks = arg;

	return json_array_append_new(locks, output_entry_json(e)) == 0 ? 0 : -1;
}

struct text_list {
	struct lock_entry *items;
	size_t n, cap;
};

static int keep_one(const struct lock_entry *e, void *arg)
{
	struct text_list *t = arg;

	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		struct lock_entry *p = realloc(t->items, cap * sizeof(*p));
		if (p == NULL)
			return -1;
		t->items = p;
		t->cap = cap;
	}
	t->items[t->n] = *e;
	/* The text table needs neither document bytes nor retained.json. */
	t->items[t->n].raw = NULL;
	t->items[t->n].retained = NULL;
	t->n++;
	return 0;
}

static int inspect_all(struct cli *c, struct registry *reg, bool text,
		       struct wsl_error *err)
{
	json_t *locks, *out;

	if (text) {
		struct text_list t = { NULL, 0, 0 };
		struct output_row *rows;
		size_t i;
		int rc;

		if (registry_list(reg, true, keep_one, &t, err) != 0) {
			free(t.items);
			if (err->code == WSL_OK)
				wsl_error_set(err, WSL_OS, "out of memory");
			return -1;
		}
		registry_coord_unlock(reg);
		rows = calloc(t.n + 1, sizeof(*rows));
		if (rows == NULL) {
			free(t.items);
			return wsl_error_set(err, WSL_OS, "out of memory");
		}
		for (i = 0; i < t.n; i++)
			rows[i].e = &t.items[i];
		rc = output_table(rows, t.n);
		free(rows);
		free(t.items);
		return rc;
	}
	locks = json_array();
	if (registry_list(reg, true, list_one, locks, err) != 0) {
		json_decref(locks);
		if (err->code == WSL_OK)
			wsl_error_set(err, WSL_OS, "out of memory");
		return -1;
	}
	registry_coord_unlock(reg);
	out = json_object();
	json_object_set_new(out, "locks", locks);
	return output_json(c, out);
}

static int inspect_one(struct cli *c, struct registry *reg, const char *arg,
		       bool owner_only, bool text, struct wsl_error *err)
{
	char ws[PATH_MAX];
	struct overlap *ov = NULL;
	struct lock_entry e;
	struct stat st;
	json_t *out, *list;
	size_t n = 0, i;

	if (registry_workspace(reg, arg, true, ws, err) != 0)
		return -1;
	if (registry_get(reg, ws, true, &e, err) != 0)
		return -1;
	if (owner_only) {
		registry_coord_unlock(reg);
		out = e.has_owner ? owner_to_json(&e.owner) : json_null();
		lock_entry_free(&e);
		return output_json(c, out);
	}
	if (registry_overlaps(reg, ws, true, &ov, &n, err) != 0) {
		lock_entry_free(&e);
		return -1;
	}
	registry_coord_unlock(reg);
	if (e.state == LOCK_FREE && n == 0 && stat(ws, &st) != 0) {
		lock_entry_free(&e);
		registry_overlaps_free(ov, n);
		return wsl_error_set(err, WSL_NO_WORKSPACE,
				     "workspace %s does not exist and holds no lock", arg);
	}
	snprintf(e.workspace_root, sizeof(e.workspace_root), "%s", ws);
	if (text) {
		struct output_row *rows = calloc(n + 1, sizeof(*rows));
		char (*labels)[PATH_MAX + 32] = calloc(n + 1, sizeof(*labels));
		int rc = -1;

		if (rows != NULL && labels != NULL) {
			rows[0].e = &e;
			for (i = 0; i < n; i++) {
				snprintf(labels[i], sizeof(labels[i]), "  %s %s",
					 ov[i].ancestor ? "ancestor" : "descendant",
					 ov[i].entry.workspace_root[0] ?
					 ov[i].entry.workspace_root : ov[i].entry.key);
				rows[i + 1].e = &ov[i].entry;
				rows[i + 1].label = labels[i];
			}
			rc = output_table(rows, n + 1);
		} else {
			wsl_error_set(err, WSL_OS, "out of memory");
		}
		free(rows);
		free(labels);
		lock_entry_free(&e);
		registry_overlaps_free(ov, n);
		return rc;
	}
	out = output_entry_json(&e);
	list = json_array();
	for (i = 0; i < n; i++) {
		json_t *item = output_entry_json(&ov[i].entry);
		json_object_set_new(item, "relation",
				    json_string(ov[i].ancestor ? "ancestor" : "descendant"));
		json_array_append_new(list, item);
	}
	json_object_set_new(out, "overlapping", list);
	lock_entry_free(&e);
	registry_overlaps_free(ov, n);
	return output_json(c, out);
}

static int inspect_main(struct cli *c, int argc, char **argv)
{
	struct inspect_args a = { false, false, false };
	struct wsl_error err = { 0 };
	struct registry reg;
	int first, status = 0, rc;

	c->json_errors = true;
	first = cli_parse(c, &cmd_inspect, argc, argv, inspect_option, &a, &status);
	if (first < 0)
		return status;
	if (a.all ? argc - first != 0 : argc - first != 1)
		return output_usage(c, a.all ? "inspect --all takes no WORKSPACE" :
				 argc - first == 0 ? "inspect needs a WORKSPACE or --all" :
				 "inspect takes one WORKSPACE");
	if (a.all && a.owner_only)
		return output_usage(c, "--owner and --all do not go together");
	if (a.text && a.owner_only)
		return output_usage(c, "--owner prints the document itself; --format text does not apply");
	if (registry_open(&reg, &c->reg_cfg, false, &err) != 0 ||
	    registry_coord_lock(&reg, LOCK_SH, &err) != 0)
		return output_error(c, &err);
	rc = a.all ? inspect_all(c, &reg, a.text, &err) :
		inspect_one(c, &reg, argv[first], a.owner_only, a.text, &err);
	registry_close(&reg);
	if (rc < 0) {
		status = output_error(c, &err);
		wsl_error_clear(&err);
		return status;
	}
	return rc;
}

const struct cli_command cmd_inspect = {
	"inspect", inspect_main, "[options] WORKSPACE | --all",
	"Show the lock on WORKSPACE: state, owner, liveness and overlapping locks.",
	inspect_options,
	"State is free, held, retained or corrupt; liveness is live, dead or unknown,\n"
	"with a one-line reason. inspect never creates or changes anything.\n",
};
