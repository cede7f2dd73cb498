/* hold_multi.c - the workspaces of one acquire or run, resolved and
 * checked apart: two that nest (the same directory, one inside the other;
 * by path or by identity, so a bind-mount alias counts, or through a
 * filesystem mounted below one of them) are a usage error,
 * since locking both at once would conflict with itself. One owner each,
 * sharing the token and operation id of the first (hold_multi.h). */
#include "hold_multi.h"
#include "wspath.h"
#include "wsmounts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hold_set_free(struct hold_set *set)
{
	free(set->ws);
	free(set->os);
	free(set->live_fds);
	memset(set, 0, sizeof(*set));
}

/* Usage error for the workspaces i and j (i < j) that nest; by_mount: they
 * were found to through a mount, not by their paths. */
static int nesting(const struct hold_set *set, size_t i, size_t j, bool by_mount,
		   struct wsl_error *err)
{
	const char *a = set->ws[i], *b = set->ws[j];
	const char *how = by_mount ?
		"through a mount: one is mounted inside the other, or a bind mount makes both paths of one directory" :
		"one lies inside the other";

	if (strcmp(a, b) == 0)
		return wsl_error_set(err, WSL_USAGE, "%s is named twice; name each workspace once",
				     a);
	return wsl_error_set(err, WSL_USAGE, "%s and %s overlap (%s); lock only %s, which covers both",
			     a, b, how, by_mount ? "one of them" : "the outer one");
}

/* Whether a filesystem mounted below a (or another path of a's directory,
 * wsmounts.h) makes a and b share a directory: b lies inside one of those
 * paths or holds one, or b's identity holds a mount below a, lies inside
 * it, or holds a directory above a across a mount point. */
static int mounts_overlap(const char *a, const char *b, bool *out, struct wsl_error *err)
{
	char fs[MOUNTINFO_FS_MAX + 1], fspath[PATH_MAX];
	struct wsmounts m;
	size_t k;
	int rc = 0;

	*out = false;
	if (wsmounts_find(a, true, &m, err) != 0)
		return -1;
	for (k = 0; !*out && k < m.n_paths; k++)
		*out = wspath_within(b, m.paths[k].path) || wspath_within(m.paths[k].path, b);
	if (!*out && m.n_places > 0 && (rc = wspath_identity(b, fs, fspath, err)) == 0) {
		for (k = 0; !*out && k < m.n_places; k++) {
			const struct wsmounts_place *pl = &m.places[k];

			*out = strcmp(pl->fs, fs) == 0 &&
			       (wspath_within(pl->fspath, fspath) ||
				(pl->below && wspath_within(fspath, pl->fspath)));
		}
	}
	wsmounts_free(&m);
	return rc;
}

int hold_set_open(struct hold_set *set, struct registry *reg, struct registry_config *cfg,
		  char *const *args, size_t n, struct wsl_error *err)
{
	size_t i, j;

	memset(set, 0, sizeof(*set));
	if (n > REGISTRY_MULTI_MAX)
		return wsl_error_set(err, WSL_USAGE, "at most %d workspaces at once, not %zu",
				     REGISTRY_MULTI_MAX, n);
	set->ws = calloc(n, sizeof(*set->ws));
	set->os = calloc(n, sizeof(*set->os));
	set->live_fds = calloc(n, sizeof(*set->live_fds));
	if (set->ws == NULL || set->os == NULL || set->live_fds == NULL)
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	set->n = n;
	for (i = 0; i < n; i++)
		set->live_fds[i] = -1;
	if (registry_open_for(reg, cfg, args[0], false, true, set->ws[0], err) != 0)
		return -1;
	if (registry_multi_check(reg, n, err) != 0)
		return -1;
	for (i = 1; i < n; i++)
		if (registry_workspace(reg, args[i], false, set->ws[i], err) != 0)
			return -1;
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			if (wspath_within(set->ws[i], set->ws[j]) ||
			    wspath_within(set->ws[j], set->ws[i]))
				return nesting(set, i, j, false, err);
	/* The local backend also sees mounts (etcd keys by path alone). */
	if (strcmp(registry_backend(reg), "etcd") == 0)
		return 0;
	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++) {
			bool both;

			if (i == j)
				continue;
			if (mounts_overlap(set->ws[i], set->ws[j], &both, err) != 0)
				return -1;
			if (both)
				return nesting(set, i < j ? i : j, i < j ? j : i, true, err);
		}
	return 0;
}

int hold_set_owners(struct hold_set *set, pid_t pid, const char *purpose,
		    const char *operation_id, struct wsl_error *err)
{
	size_t i, j;

	for (i = 0; i < set->n; i++) {
		struct owner *o = &set->os[i];

		if (owner_build(o, set->ws[i], pid, purpose,
				i == 0 ? operation_id : set->os[0].operation_id, NULL, err) != 0)
			return -1;
		if (i > 0)
			memcpy(o->token, set->os[0].token, sizeof(o->token));
	}
	for (i = 0; i < set->n; i++)
		for (j = i + 1; j < set->n; j++) {
			const struct owner *a = &set->os[i], *b = &set->os[j];

			if (a->workspace_fs[0] != '\0' && strcmp(a->workspace_fs, b->workspace_fs) == 0 &&
			    (wspath_within(a->workspace_fs_path, b->workspace_fs_path) ||
			     wspath_within(b->workspace_fs_path, a->workspace_fs_path)))
				return nesting(set, i, j, true, err);
		}
	return 0;
}
