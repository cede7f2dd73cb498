/* wspath.h - workspace paths (DESIGN.md section 3): what a workspace
 * argument names, its ancestors, and the rule that a workspace and the
 * registry never contain one another.
 *
 * Everything here works on canonical absolute paths and does no registry
 * I/O. Workspace identity (the filesystem a workspace lives on and its
 * path inside it, from the mount table) belongs here as well; the mount
 * table itself is read by mountinfo.c.
 */
#ifndef WSLOCK_WSPATH_H
#define WSLOCK_WSPATH_H

#include <limits.h>
#include <stdbool.h>

#include "crypto.h"
#include "error.h"
#include "mountinfo.h"

/*
 * Resolves a workspace argument to its canonical path (realpath(3): symlinks
 * resolved, so a path through a symlink names its target's lock). Fails with
 * WSL_USAGE for "", WSL_NO_WORKSPACE when it does not exist or is not a
 * directory (sys_errno says why), and with WSL_UNSAFE_PATH for "/", for
 * a directory whose identity (wspath_identity) is that of "/" (a bind mount
 * of it), and for a path with control characters or invalid UTF-8. With allow_missing, a
 * workspace that no longer exists resolves lexically (absolute, "." and
 * ".." folded) so its lock can still be released.
 */
int wspath_resolve(const char *arg, bool allow_missing, char out[PATH_MAX],
		   struct wsl_error *err);

/*
 * Refuses (WSL_UNSAFE_PATH) a workspace ws that contains the registry
 * directory (reg_path as given, reg_real canonical) or lies inside it,
 * compared by path and in the identity space (wspath_identity: a bind
 * mount of a directory inside ws reaches it by a path outside ws).
 * reg_path "" (no registry directory on this host: etcd): always 0. A ws
 * or registry that does not exist is compared by path only; an identity
 * that cannot be read otherwise fails (WSL_OS), never passes unchecked.
 */
int wspath_check_apart(const char *ws, const char *reg_path, const char *reg_real,
		       struct wsl_error *err);

/*
 * The identity half of wspath_check_apart for a registry not made yet:
 * reg_path would be the existing directory existing (canonical) followed
 * by rest (the components still to be made, joined with "/" and folded
 * lexically). Same errors.
 */
int wspath_check_apart_planned(const char *ws, const char *reg_path, const char *existing,
			       const char *rest, struct wsl_error *err);

/* True when inner is outer or lies below it (canonical paths). */
bool wspath_within(const char *inner, const char *outer);

/* Calls fn(ancestor, arg) for each proper ancestor of path (canonical),
 * nearest first, "/" excluded; stops at the first non-zero return and
 * returns it; 0 when fn returned 0 for all. */
int wspath_for_each_ancestor(const char *path,
			     int (*fn)(const char *ancestor, void *arg),
			     void *arg);

/*
 * The workspace's identity (DESIGN.md section 3): the filesystem ws is on
 * into fs ("fsid:<16 hex>" or "dev:MAJ:MIN") and its path inside that
 * filesystem into fspath, the same for every process that reaches the
 * directory (a bind mount, another mount namespace, another user). See
 * mountinfo_identity() for how and for the errors (WSL_NO_WORKSPACE,
 * WSL_OS).
 */
int wspath_identity(const char *ws, char fs[MOUNTINFO_FS_MAX + 1], char fspath[PATH_MAX],
		    struct wsl_error *err);

/* The key of a place in the identity space: hex BLAKE2b (crypto_path_key)
 * of the filesystem's identity followed by the path inside it. */
void wspath_identity_key(const char *fs, const char *fspath, char out[WSL_KEY_HEX + 1]);

/* Calls fn(ancestor, arg) for each proper ancestor of fspath, a path inside
 * a filesystem, nearest first and ending with "/" (a filesystem's root is a
 * workspace like any other when it is a mount point); stops at the first
 * non-zero return and returns it. Nothing for "/" itself. */
int wspath_for_each_fs_ancestor(const char *fspath,
				int (*fn)(const char *ancestor, void *arg), void *arg);

#endif
