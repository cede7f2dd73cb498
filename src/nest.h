/* nest.h - nesting by proof (DESIGN.md section 2, issue 12).
 *
 * A `wslock run` (or acquire) inside a holder's command runs without
 * locking again only when it can show that it is inside that holder: it
 * holds a descriptor of the lock's own `live` file (inherited from the
 * holder; this works across pid namespaces, where pids mean nothing), or
 * its parent chain in /proc reaches the holder's pid with the holder's
 * start ticks on this host and boot. A token proves nothing: it is printed
 * by inspect, in error documents and in every child's environment.
 */
#ifndef WSLOCK_NEST_H
#define WSLOCK_NEST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "registry.h"

/* How a nesting was proven. */
enum nest_how {
	NEST_NONE = 0,
	NEST_POSSESSION,	/* this process holds a descriptor of the live file */
	NEST_ANCESTRY,		/* from descends from the holder (pid and start ticks) */
};

/*
 * Whether e (read with registry_get; held, not retained, not corrupt) is
 * a lock this process is inside: possession of a descriptor of e's live
 * file (e->live_dev, e->live_ino), or the parent chain of from (itself
 * included; a run passes its own pid, acquire --pid P passes P) reaching
 * e's owner pid with its start ticks, on the owner's host and boot.
 * For a shared lock, inside any one of its holders (e->holders).
 * Returns how (NEST_NONE: not proven). Reads /proc; never fails: what
 * cannot be read proves nothing.
 */
enum nest_how nest_proven(const struct lock_entry *e, pid_t from);

/* 1 when some descriptor of this process is the file dev/ino (by
 * fstat(2) of every entry of /proc/self/fd) and its open file description
 * holds a flock(2) lock on it (/proc/self/fdinfo/FD, proc(5)): the holder's
 * own lock on live, inherited; a descriptor opened anew by path holds none.
 * Else 0. */
int nest_holds_file(dev_t dev, ino_t ino);

/*
 * 1 when pid with start time ticks (clock ticks after boot, field 22 of
 * /proc/PID/stat) is from or one of its ancestors (field 4, the parent,
 * followed up to pid 1, at most 4096 steps), else 0.
 */
int nest_descends_from(pid_t from, pid_t pid, unsigned long long ticks);

/*
 * Finds, on workspace itself or an ancestor, a held lock that the process
 * from (its own pid for run, --pid for acquire) is inside by proof
 * (nest_proven: a descriptor of its live file, or descent from its
 * holder). Returns 1 with the lock in *out (lock_entry_free it; for a
 * shared lock, the one holder it is inside, out->shared set), 0 when
 * there is none, -1 on error. A token proves nothing.
 */
int nest_find(struct registry *reg, const char *workspace, pid_t from,
	      struct lock_entry *out, struct wsl_error *err);

#endif
