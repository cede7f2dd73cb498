/* hold_multi.h - the workspaces of one acquire or run (src/hold_multi.c):
 * several at once (`run A B C -- CMD`, `acquire A B C`), resolved,
 * checked apart from one another and given their owners. */
#ifndef WSLOCK_HOLD_MULTI_H
#define WSLOCK_HOLD_MULTI_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"
#include "owner.h"
#include "registry.h"

/* The workspaces of one command, as resolved and as owned. */
struct hold_set {
	size_t n;			/* 1..REGISTRY_MULTI_MAX */
	char (*ws)[PATH_MAX];		/* canonical paths, in argument order */
	struct owner *os;		/* hold_set_owners: one each */
	int *live_fds;			/* n, each -1 until held */
};

/*
 * Opens reg for args[0..n) (registry_open_for the first, create as
 * there; registry_workspace each further one, allow_missing false) into
 * set (hold_set_free it in every case). Fails with WSL_USAGE for more
 * than REGISTRY_MULTI_MAX, several on a backend that cannot take them at
 * once (registry_multi_check), and two that nest by path: the same
 * workspace twice, or one inside the other (locking both at once would
 * conflict with itself); on the local backend also two that share a
 * directory through a mount of this namespace (wsmounts.h: one mounted
 * inside the other); else with the errors of those calls.
 */
int hold_set_open(struct hold_set *set, struct registry *reg, struct registry_config *cfg,
		  char *const *args, size_t n, struct wsl_error *err);

/*
 * Builds one owner per workspace (owner_build: holder pid, purpose,
 * operation_id or a new one); every owner of the set gets the first's
 * token and operation id: one ownership of several workspaces, released by
 * one `release --token T A B`, listed by `inspect --operation-id`. Fails
 * with WSL_USAGE when two workspaces are one directory, or one inside the
 * other, by identity (a bind mount, another path to it: DESIGN.md section
 * 3), else as owner_build.
 */
int hold_set_owners(struct hold_set *set, pid_t pid, const char *purpose,
		    const char *operation_id, struct wsl_error *err);

/* Frees set (closes no descriptor). */
void hold_set_free(struct hold_set *set);

#endif
