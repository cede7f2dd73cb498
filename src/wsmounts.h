/* wsmounts.h - what a workspace shares with the rest of this mount
 * namespace (DESIGN.md section 3, two spaces): the other paths under which
 * its directory, or a directory inside it, is visible (a bind mount of it,
 * or of its filesystem, somewhere else), the filesystems mounted below it,
 * and the directories above it across a mount point.
 *
 * A lock is keyed by its canonical path and by its identity (filesystem
 * and path inside it). Neither key shows that /p contains /c when /c is
 * mounted at /p/.cache: the path /c is not below /p, and the identity of
 * /c is not below that of /p. Only the mount table says so, and only the
 * table of the caller's own mount namespace: a process in another one
 * sees its own mounts.
 *
 * No registry here: the mount table (mountinfo.c, read once per process)
 * and a stat(2), statx(2) or statfs(2) for the few mounts that matter.
 */
#ifndef WSLOCK_WSMOUNTS_H
#define WSLOCK_WSMOUNTS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "mountinfo.h"

/* A place in the identity space (a filesystem and a path inside it). */
struct wsmounts_place {
	char fs[MOUNTINFO_FS_MAX + 1];
	char fspath[PATH_MAX];
	bool below;	/* true: content mounted inside the workspace; false: a
			 * directory above it, beyond a mount point */
};

/* Another path of the workspace, or of a directory inside it. */
struct wsmounts_path {
	char path[PATH_MAX];
	bool alias;	/* true: the workspace's own directory; false: a
			 * directory inside it */
};

struct wsmounts {
	struct wsmounts_path *paths;	/* never the workspace's own path, nor
					 * one inside it or inside another alias */
	size_t n_paths;
	struct wsmounts_place *places;
	size_t n_places;
};

/* At most this many paths and places; a table that needs more fails
 * (never a shorter list: a missed path would be a missed conflict). */
#define WSMOUNTS_MAX 1024

/*
 * What workspace ws (canonical, existing) shares with the mount table of
 * this process, into *out (wsmounts_free it):
 *
 * paths: every path, other than ws and paths below it, under which ws's
 * directory is visible (for each visible mount of ws's filesystem whose
 * root, mountinfo field 4, is ws's path inside the filesystem or above
 * it: that mount point followed by the rest, when it reaches the same
 * directory), and under which a directory inside it is (a visible mount
 * whose root lies below ws's path inside the filesystem: its mount point);
 * the same again for the content of every filesystem mounted below ws.
 * A lock on such a path, on one of its ancestors or below it overlaps ws.
 *
 * places (with ids): the root of every visible mount below ws or below one
 * of those paths, in the identity space (below: a lock there, below it or
 * on an ancestor of it overlaps ws); and for ws and each path, the
 * directory above every mount point crossed on the way to / (not below:
 * a lock there or on an ancestor of it overlaps ws). Without ids, no
 * places (nothing in the registry is keyed by identity).
 *
 * Nothing at all, in the usual case: ws on a filesystem mounted once,
 * nothing mounted below it. Returns 0, or -1 with err (WSL_OS: the table
 * cannot be read, or more than WSMOUNTS_MAX paths or places).
 */
int wsmounts_find(const char *ws, bool ids, struct wsmounts *out, struct wsl_error *err);

/* Where a directory lies against a workspace through the mount table
 * (wsmounts_apart). */
enum wsmounts_where {
	WSMOUNTS_APART = 0,	/* neither contains the other */
	WSMOUNTS_INSIDE = 1,	/* the directory is inside the workspace */
	WSMOUNTS_AROUND = 2,	/* the workspace (or a directory inside it) is
				 * inside the directory */
};

/*
 * Where path (canonical; its last components may not exist yet, as for a
 * registry about to be made) lies against workspace ws (canonical)
 * through this mount namespace's table: INSIDE when path is at or below
 * one of the other paths wsmounts_find gives for ws (a filesystem mounted
 * below ws, reached by its own path; a bind mount of ws or of a directory
 * inside it), AROUND when one of those paths lies below path. A ws that
 * does not exist: APART (only paths can be compared, by the caller).
 * Returns the where (>= 0), or -1 with err as wsmounts_find.
 */
int wsmounts_apart(const char *ws, const char *path, struct wsl_error *err);

/* Frees what wsmounts_find filled (out stays empty). */
void wsmounts_free(struct wsmounts *m);

#endif
