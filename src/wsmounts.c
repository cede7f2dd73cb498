/* wsmounts.c - what a workspace shares with the rest of this mount
 * namespace (see wsmounts.h).
 *
 * The directories to look from are the workspace and the root of every
 * mount below it (or below one of its other paths), each with its
 * filesystem's device numbers and its path inside the filesystem. A mount
 * of the same filesystem shows such a directory elsewhere when its root
 * (mountinfo field 4) is at or above the directory's path inside the
 * filesystem; it shows a directory inside it when its root lies below.
 * Mounts below a path found so far bring in more directories to look
 * from, until nothing new comes (bounded by WSMOUNTS_MAX). Device numbers
 * pick the candidates (mountinfo's own field, so the table agrees with
 * itself); a stat(2) of the alias (same device and inode) or statx(2) of a
 * mount point (still the visible mount) confirms each.
 */
#include "wsmounts.h"
#include "wspath.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CHAIN_MAX 64	/* mount points crossed on the way up from one path */

/* A directory whose other paths are looked for. */
struct origin {
	unsigned int dev_major, dev_minor;	/* of its mount (mountinfo field 3) */
	char fspath[PATH_MAX];			/* its path inside the filesystem */
	dev_t dev;
	ino_t ino;
	bool is_ws;
};

struct finder {
	const char *ws;
	bool ids;
	struct wsmounts *out;
	size_t cap_paths, cap_places;
	struct origin *origins;
	size_t n_origins, cap_origins;
	const struct origin *cur;	/* the origin of an alias pass */
	size_t added;			/* origins added by a below pass */
	struct wsl_error *err;
};

void wsmounts_free(struct wsmounts *m)
{
	free(m->paths);
	free(m->places);
	memset(m, 0, sizeof(*m));
}

/* Grows *items (n used, *cap allocated, size bytes each) for one more;
 * -1 with err past WSMOUNTS_MAX or out of memory. */
static int grow(void **items, size_t n, size_t *cap, size_t size, struct wsl_error *err)
{
	void *p;
	size_t want;

	if (n < *cap)
		return 0;
	if (n >= WSMOUNTS_MAX)
		return wsl_error_set(err, WSL_OS,
				     "more than %d mounts share directories with the workspace; refusing to check only some of them",
				     WSMOUNTS_MAX);
	want = *cap == 0 ? 4 : *cap * 2;
	p = realloc(*items, want * size);
	if (p == NULL)
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	*items = p;
	*cap = want;
	return 0;
}

/* Adds path (alias: of the workspace's own directory) unless it is the
 * workspace, lies below it or below a path already found (whose own checks
 * cover it). */
static int add_path(struct finder *f, const char *path, bool alias)
{
	struct wsmounts *o = f->out;
	size_t i;

	if (wspath_within(path, f->ws))
		return 0;
	for (i = 0; i < o->n_paths; i++)
		if (wspath_within(path, o->paths[i].path))
			return 0;
	if (grow((void **)&o->paths, o->n_paths, &f->cap_paths, sizeof(*o->paths), f->err) != 0)
		return -1;
	snprintf(o->paths[o->n_paths].path, PATH_MAX, "%s", path);
	o->paths[o->n_paths].alias = alias;
	o->n_paths++;
	return 0;
}

/* Adds the identity place fs/fspath once. */
static int add_place(struct finder *f, const char *fs, const char *fspath, bool below)
{
	struct wsmounts *o = f->out;
	size_t i;

	for (i = 0; i < o->n_places; i++) {
		if (strcmp(o->places[i].fs, fs) == 0 && strcmp(o->places[i].fspath, fspath) == 0) {
			o->places[i].below = o->places[i].below || below;
			return 0;
		}
	}
	if (grow((void **)&o->places, o->n_places, &f->cap_places, sizeof(*o->places), f->err) != 0)
		return -1;
	snprintf(o->places[o->n_places].fs, sizeof(o->places[0].fs), "%s", fs);
	snprintf(o->places[o->n_places].fspath, PATH_MAX, "%s", fspath);
	o->places[o->n_places].below = below;
	o->n_places++;
	return 0;
}

/* The alias pass (a mountinfo_for_each callback): the other paths of
 * f->cur's directory, and of directories inside it, that mount m shows. */
static int alias_one(const struct mountinfo_mount *m, void *arg)
{
	struct finder *f = arg;
	const struct origin *c = f->cur;
	char alias[PATH_MAX];
	const char *rest;
	struct stat st;
	int n;

	if (m->dev_major != c->dev_major || m->dev_minor != c->dev_minor)
		return 0;
	if (wspath_within(c->fspath, m->root)) {
		/* The directory itself, at m's mount point plus the rest. */
		rest = strcmp(m->root, "/") == 0 ? c->fspath : c->fspath + strlen(m->root);
		if (strcmp(rest, "/") == 0)
			rest = "";
		if (strcmp(m->target, "/") == 0)
			n = snprintf(alias, sizeof(alias), "%s", rest[0] != '\0' ? rest : "/");
		else
			n = snprintf(alias, sizeof(alias), "%s%s", m->target, rest);
		if (n < 0 || n >= (int)sizeof(alias) || stat(alias, &st) != 0 ||
		    st.st_dev != c->dev || st.st_ino != c->ino)
			return 0;	/* hidden there, or not reachable */
		return add_path(f, alias, c->is_ws) != 0 ? -1 : 0;
	}
	if (!wspath_within(m->root, c->fspath) || !mountinfo_visible(m))
		return 0;
	/* A directory inside it, at m's mount point. */
	return add_path(f, m->target, false) != 0 ? -1 : 0;
}

/* True when path lies strictly below the workspace or one of the paths. */
static bool below_any(const struct finder *f, const char *path)
{
	size_t i;

	if (strcmp(path, f->ws) != 0 && wspath_within(path, f->ws))
		return true;
	for (i = 0; i < f->out->n_paths; i++) {
		const char *p = f->out->paths[i].path;
		if (strcmp(path, p) != 0 && wspath_within(path, p))
			return true;
	}
	return false;
}

/* The below pass (a mountinfo_for_each callback): a visible mount below
 * the workspace or one of its paths is content inside the workspace. */
static int below_one(const struct mountinfo_mount *m, void *arg)
{
	struct finder *f = arg;
	char fs[MOUNTINFO_FS_MAX + 1], fspath[PATH_MAX];
	struct origin *o;
	struct stat st;
	size_t i;

	if (!below_any(f, m->target) || !mountinfo_visible(m))
		return 0;
	for (i = 0; i < f->n_origins; i++)
		if (f->origins[i].dev_major == m->dev_major && f->origins[i].dev_minor == m->dev_minor &&
		    strcmp(f->origins[i].fspath, m->root) == 0)
			return 0;
	if (stat(m->target, &st) != 0)
		return 0;	/* gone meanwhile */
	if (mountinfo_identity(m->target, fs, fspath, f->err) != 0) {
		if (f->err->code != WSL_NO_WORKSPACE)
			return -1;
		wsl_error_clear(f->err);
		return 0;
	}
	if (f->ids && add_place(f, fs, fspath, true) != 0)
		return -1;
	if (grow((void **)&f->origins, f->n_origins, &f->cap_origins, sizeof(*f->origins),
		 f->err) != 0)
		return -1;
	o = &f->origins[f->n_origins++];
	o->dev_major = m->dev_major;
	o->dev_minor = m->dev_minor;
	snprintf(o->fspath, sizeof(o->fspath), "%s", m->root);
	o->dev = st.st_dev;
	o->ino = st.st_ino;
	o->is_ws = false;
	f->added++;
	return 0;
}

/* The places above path beyond each mount point on the way to /: the
 * directory each mount point is in, by its identity. */
static int chain_up(struct finder *f, const char *path)
{
	char cur[PATH_MAX], fs[MOUNTINFO_FS_MAX + 1], fspath[PATH_MAX];
	struct mountinfo_mount m;
	char *slash;
	int steps;

	snprintf(cur, sizeof(cur), "%s", path);
	for (steps = 0; steps < CHAIN_MAX; steps++) {
		if (mountinfo_mount_of(cur, &m, f->err) != 0)
			return -1;
		if (strcmp(m.target, "/") == 0)
			return 0;
		snprintf(cur, sizeof(cur), "%s", m.target);
		slash = strrchr(cur, '/');
		if (slash == cur)
			slash[1] = '\0';
		else
			*slash = '\0';
		if (mountinfo_identity(cur, fs, fspath, f->err) != 0 ||
		    add_place(f, fs, fspath, false) != 0)
			return -1;
	}
	return wsl_error_set(f->err, WSL_OS,
			     "more than %d mount points above %s", CHAIN_MAX, path);
}

/* The workspace as the first origin; 1 when it does not exist (nothing to
 * share). */
static int origin_ws(struct finder *f)
{
	struct mountinfo_mount m;
	char fs[MOUNTINFO_FS_MAX + 1];
	struct origin *o;
	struct stat st;

	if (stat(f->ws, &st) != 0)
		return errno == ENOENT || errno == ENOTDIR ? 1 :
			wsl_error_errno(f->err, WSL_OS, errno, "cannot read %s", f->ws);
	if (grow((void **)&f->origins, 0, &f->cap_origins, sizeof(*f->origins), f->err) != 0)
		return -1;
	o = &f->origins[0];
	if (mountinfo_identity(f->ws, fs, o->fspath, f->err) != 0 ||
	    mountinfo_mount_of(f->ws, &m, f->err) != 0)
		return -1;
	o->dev_major = m.dev_major;
	o->dev_minor = m.dev_minor;
	o->dev = st.st_dev;
	o->ino = st.st_ino;
	o->is_ws = true;
	f->n_origins = 1;
	return 0;
}

int wsmounts_find(const char *ws, bool ids, struct wsmounts *out, struct wsl_error *err)
{
	struct finder f = { ws, ids, out, 0, 0, NULL, 0, 0, NULL, 0, err };
	size_t done = 0, i;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = origin_ws(&f)) != 0)
		goto out;
	do {
		while (done < f.n_origins) {
			f.cur = &f.origins[done++];
			if ((rc = mountinfo_for_each(alias_one, &f, err)) != 0)
				goto out;
		}
		f.added = 0;
		if ((rc = mountinfo_for_each(below_one, &f, err)) != 0)
			goto out;
	} while (f.added > 0);
	if (ids) {
		if ((rc = chain_up(&f, ws)) != 0)
			goto out;
		for (i = 0; i < out->n_paths; i++)
			if ((rc = chain_up(&f, out->paths[i].path)) != 0)
				goto out;
	}
out:
	free(f.origins);
	if (rc < 0) {
		wsmounts_free(out);
		return -1;
	}
	return 0;
}

int wsmounts_apart(const char *ws, const char *path, struct wsl_error *err)
{
	struct wsmounts m;
	struct stat st;
	int where = WSMOUNTS_APART;
	size_t i;

	if (stat(ws, &st) != 0 || !S_ISDIR(st.st_mode))
		return WSMOUNTS_APART;
	if (wsmounts_find(ws, false, &m, err) != 0)
		return -1;
	for (i = 0; where == WSMOUNTS_APART && i < m.n_paths; i++) {
		if (wspath_within(path, m.paths[i].path))
			where = WSMOUNTS_INSIDE;
		else if (wspath_within(m.paths[i].path, path))
			where = WSMOUNTS_AROUND;
	}
	wsmounts_free(&m);
	return where;
}
