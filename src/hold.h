/* hold.h - the wait-and-acquire loop (src/hold.c) shared by acquire and
 * run. */
#ifndef WSLOCK_HOLD_H
#define WSLOCK_HOLD_H

#include <stdbool.h>

#include "error.h"
#include "owner.h"
#include "registry.h"

struct cli;

/* How acquire and run wait for a held workspace. */
struct hold_wait {
	bool nonblock;		/* -n: fail at once with WSLOCK_BUSY */
	long long timeout_ms;	/* -w, or -1: wait forever */
	int conflict_exit;	/* -E, or -1 */
	int sigfd;		/* signalfd to watch while waiting, or -1 */
	bool reclaim_dead;	/* --reclaim-dead: take over provably dead,
				 * non-retained owners first (journaled) */
};

/*
 * Acquires o's workspace, waiting as w says: an inotify watch on locks/
 * wakes it as soon as a lock is released, with a 250 ms poll as fallback
 * (a holder that dies releases nothing). Says once on stderr (unless -q)
 * whom it waits for. A conflict that waiting cannot cure fails at once:
 * WSLOCK_LOCK_CORRUPT, WSLOCK_RECOVERY_REQUIRED (dead or retained owner),
 * or WSLOCK_BUSY when the holder is the caller's own enclosing run
 * ($WSLOCK_TOKEN). Returns 0 when held; -1 with err (WSLOCK_BUSY,
 * WSLOCK_TIMEOUT...); or a signal number > 0 when a signal arrived on
 * w->sigfd while waiting.
 */
int hold_acquire(struct cli *c, struct registry *reg, const struct owner *o,
		 const struct hold_wait *w, int *live_fd, struct wsl_error *err);

/* Exit status for err, with -E applied to WSLOCK_BUSY and WSLOCK_TIMEOUT. */
int hold_conflict_status(const struct hold_wait *w, const struct wsl_error *err);

#endif
