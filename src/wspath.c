/* wspath.c - what a workspace argument names: resolution to a canonical
 * path, the ancestor walk, and keeping workspaces and the registry apart
 * (DESIGN.md section 3). No registry here: only paths. */
#include "wspath.h"
#include "owner.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int wspath_for_each_ancestor(const char *path,
			      int (*fn)(const char *ancestor, void *arg), void *arg)
{
	char buf[PATH_MAX];
	char *slash;
	int rc;

	snprintf(buf, sizeof(buf), "%s", path);
	for (;;) {
		slash = strrchr(buf, '/');
		if (slash == NULL || slash == buf)
			return 0;
		*slash = '\0';
		rc = fn(buf, arg);
		if (rc != 0)
			return rc;
	}
}

/* Folds an absolute path lexically: "//" and "." dropped, ".." pops. */
static int fold_path(const char *in, char out[PATH_MAX])
{
	size_t len = 0;
	const char *p = in;

	out[0] = '\0';
	while (*p != '\0') {
		const char *start;
		size_t n;

		while (*p == '/')
			p++;
		start = p;
		while (*p != '\0' && *p != '/')
			p++;
		n = (size_t)(p - start);
		if (n == 0 || (n == 1 && start[0] == '.'))
			continue;
		if (n == 2 && start[0] == '.' && start[1] == '.') {
			while (len > 0 && out[len - 1] != '/')
				len--;
			if (len > 0)
				len--;
			out[len] = '\0';
			continue;
		}
		if (len + 1 + n >= PATH_MAX)
			return -1;
		out[len++] = '/';
		memcpy(out + len, start, n);
		len += n;
		out[len] = '\0';
	}
	if (len == 0) {
		out[0] = '/';
		out[1] = '\0';
	}
	return 0;
}

bool wspath_within(const char *inner, const char *outer)
{
	size_t n = strlen(outer);

	if (strcmp(outer, "/") == 0)
		return true;
	return strncmp(inner, outer, n) == 0 &&
	       (inner[n] == '\0' || inner[n] == '/');
}

/* The identity of path into fs and fspath; 1 when path does not exist (a
 * workspace being released after it was removed, a registry not made
 * yet: nothing there to compare), -1 with err when it cannot be read. */
static int identity_if_any(const char *path, char fs[MOUNTINFO_FS_MAX + 1],
			   char fspath[PATH_MAX], struct wsl_error *err)
{
	if (mountinfo_identity(path, fs, fspath, err) == 0)
		return 0;
	if (err->code != WSL_NO_WORKSPACE)
		return -1;
	wsl_error_clear(err);
	return 1;
}

/* True when (fs, fspath) is the place (ofs, ofspath) in the identity space
 * or lies below it. */
static bool identity_within(const char *fs, const char *fspath, const char *ofs,
			    const char *ofspath)
{
	return strcmp(fs, ofs) == 0 && wspath_within(fspath, ofspath);
}

/* Refuses ws (canonical, not "/") when its identity is that of "/": the
 * root directory reached through a bind mount of it (DESIGN.md section 3:
 * one directory, whatever path reaches it). */
static int refuse_root_alias(const char *arg, const char *ws, struct wsl_error *err)
{
	char fs[MOUNTINFO_FS_MAX + 1], fspath[PATH_MAX];
	char root_fs[MOUNTINFO_FS_MAX + 1], root_fspath[PATH_MAX];
	int rc;

	if ((rc = identity_if_any(ws, fs, fspath, err)) != 0)
		return rc < 0 ? -1 : 0;
	if ((rc = identity_if_any("/", root_fs, root_fspath, err)) != 0)
		return rc < 0 ? -1 : 0;
	if (strcmp(fs, root_fs) == 0 && strcmp(fspath, root_fspath) == 0)
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "refusing %s as a workspace: it is / (reached through a bind mount or another mount), which would contain every other workspace and the registry",
				     arg);
	return 0;
}

int wspath_resolve(const char *arg, bool allow_missing, char out[PATH_MAX],
		   struct wsl_error *err)
{
	char abs[PATH_MAX], cwd[PATH_MAX];
	struct stat st;
	json_t *probe;

	if (arg[0] == '\0')
		return wsl_error_set(err, WSL_USAGE, "empty workspace path");
	if (realpath(arg, out) == NULL) {
		int e = errno;
		if (!allow_missing || (e != ENOENT && e != ENOTDIR))
			return wsl_error_errno(err, WSL_NO_WORKSPACE, e,
					       "workspace %s", arg);
		if (arg[0] == '/') {
			snprintf(abs, sizeof(abs), "%s", arg);
		} else {
			if (getcwd(cwd, sizeof(cwd)) == NULL ||
			    snprintf(abs, sizeof(abs), "%s/%s", cwd, arg) >= (int)sizeof(abs))
				return wsl_error_errno(err, WSL_NO_WORKSPACE, e,
						       "workspace %s", arg);
		}
		if (fold_path(abs, out) != 0)
			return wsl_error_set(err, WSL_UNSAFE_PATH,
					     "workspace path %s is longer than PATH_MAX", arg);
	} else {
		if (stat(out, &st) != 0)
			return wsl_error_errno(err, WSL_NO_WORKSPACE, errno,
					       "workspace %s", arg);
		if (!S_ISDIR(st.st_mode))
			return wsl_error_set(err, WSL_NO_WORKSPACE,
					     "workspace %s is not a directory", arg);
	}
	if (strcmp(out, "/") == 0)
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "refusing / as a workspace: it would contain every other workspace and the registry");
	if (refuse_root_alias(arg, out, err) != 0)
		return -1;
	if (!owner_path_canonical(out))
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "workspace path %s has control characters",
				     arg);
	probe = json_string(out);
	if (probe == NULL)
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "workspace path %s is not valid UTF-8", arg);
	json_decref(probe);
	return 0;
}

/*
 * The rule of wspath_check_apart in the identity space (DESIGN.md sections
 * 3 and 5): a bind mount can reach a directory inside the workspace by a
 * path outside it. The registry's place is reg_real's identity, followed by
 * rest (the part not made yet, folded) when rest is not NULL: it must be
 * neither the workspace's place nor below it, nor above it.
 */
static int apart_by_identity(const char *ws, const char *reg_path, const char *reg_real,
			     const char *rest, struct wsl_error *err)
{
	char fs[MOUNTINFO_FS_MAX + 1], fspath[PATH_MAX];
	char reg_fs[MOUNTINFO_FS_MAX + 1], reg_fspath[PATH_MAX], joined[PATH_MAX];
	int rc;

	if ((rc = identity_if_any(ws, fs, fspath, err)) != 0)
		return rc < 0 ? -1 : 0;
	if ((rc = identity_if_any(reg_real, reg_fs, reg_fspath, err)) != 0)
		return rc < 0 ? -1 : 0;
	if (rest != NULL && rest[0] != '\0') {
		if (snprintf(joined, sizeof(joined), "%s/%s", reg_fspath, rest) >= (int)sizeof(joined) ||
		    fold_path(joined, reg_fspath) != 0)
			return wsl_error_set(err, WSL_UNSAFE_PATH,
					     "registry path %s is longer than PATH_MAX", reg_path);
	}
	if (identity_within(reg_fs, reg_fspath, fs, fspath))
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "registry %s lies inside workspace %s (through a bind mount or another mount); choose a registry outside it (-d or WSLOCK_DIR)",
				     reg_path, ws);
	if (identity_within(fs, fspath, reg_fs, reg_fspath))
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "workspace %s lies inside the registry %s (through a bind mount or another mount)",
				     ws, reg_path);
	return 0;
}

int wspath_check_apart(const char *ws, const char *reg_path, const char *reg_real,
		       struct wsl_error *err)
{
	if (reg_path[0] == '\0')
		return 0;	/* no registry directory to keep apart (etcd, or
				 * not opened yet) */
	if (wspath_within(reg_real, ws) || wspath_within(reg_path, ws))
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "registry %s lies inside workspace %s; choose a registry outside it (-d or WSLOCK_DIR)",
				     reg_path, ws);
	if (wspath_within(ws, reg_real))
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "workspace %s lies inside the registry %s",
				     ws, reg_path);
	return apart_by_identity(ws, reg_path, reg_real, NULL, err);
}

int wspath_check_apart_planned(const char *ws, const char *reg_path, const char *existing,
			       const char *rest, struct wsl_error *err)
{
	return apart_by_identity(ws, reg_path, existing, rest, err);
}

int wspath_identity(const char *ws, char fs[MOUNTINFO_FS_MAX + 1], char fspath[PATH_MAX],
		    struct wsl_error *err)
{
	return mountinfo_identity(ws, fs, fspath, err);
}

void wspath_identity_key(const char *fs, const char *fspath, char out[WSL_KEY_HEX + 1])
{
	char buf[MOUNTINFO_FS_MAX + PATH_MAX + 1];

	snprintf(buf, sizeof(buf), "%s%s", fs, fspath);
	crypto_path_key(buf, out);
}

int wspath_for_each_fs_ancestor(const char *fspath,
				int (*fn)(const char *ancestor, void *arg), void *arg)
{
	char buf[PATH_MAX];
	char *slash;
	int rc;

	if (strcmp(fspath, "/") == 0)
		return 0;
	snprintf(buf, sizeof(buf), "%s", fspath);
	for (;;) {
		slash = strrchr(buf, '/');
		if (slash == NULL)
			return 0;
		if (slash == buf)
			return fn("/", arg);
		*slash = '\0';
		rc = fn(buf, arg);
		if (rc != 0)
			return rc;
	}
}
