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
	bool holder_must_live;	/* acquire --pid P: fail, leaving no lock,
				 * when P exits before the lock is held */
	struct lock_entry *nest_outer;	/* run, registry_nest_on_conflict:
					 * at the first conflict, the lock
					 * enclosing the caller (nest_find)
					 * goes here and hold_acquire returns
					 * HOLD_NESTED; NULL: not looked for */
};

/* hold_acquire: the caller is inside the holder of *w->nest_outer. */
#define HOLD_NESTED (-2)

/*
 * Acquires o's workspace, waiting as w says: in the backend's FIFO queue
 * (local: asleep in the kernel until the waiter ahead leaves, or the
 * holder releases or dies; no periodic wake-up but a terminal's progress
 * line; registry_wait), leaving it however the wait ends. Says once on stderr (unless -q)
 * whom it waits for. A conflict that waiting cannot cure fails at once:
 * WSLOCK_LOCK_CORRUPT, WSLOCK_RECOVERY_REQUIRED (dead or retained owner),
 * or WSLOCK_BUSY when the caller is inside the holder's run by possession
 * of its live file (nest_proven), so waiting would wait for itself; never
 * because of a token. With w->holder_must_live, fails with WSLOCK_NOT_HELD
 * (and leaves no lock) when o's pid exits before the lock is held. -w/-n
 * bound the waits for the registry too (WSLOCK_REGISTRY_BUSY, see
 * registry_coord_bound). Returns 0 when held; -1 with err (WSLOCK_BUSY,
 * WSLOCK_TIMEOUT...); HOLD_NESTED (see w->nest_outer: nothing is held,
 * the wait queue is left); or a signal number > 0 when a signal arrived on
 * w->sigfd while waiting.
 */
int hold_acquire(struct cli *c, struct registry *reg, const struct owner *o,
		 const struct hold_wait *w, int *live_fd, struct wsl_error *err);

/*
 * hold_acquire for the n owners os[0..n) (one per workspace; n <=
 * REGISTRY_MULTI_MAX, workspaces that do not nest with one another, all
 * with the same pid, token and operation id): all of them or none,
 * waiting as w says until every one can be taken at once
 * (registry_try_acquire_multi: one critical section; a waiter stands in
 * every queue it needs at one place, so two of them never deadlock).
 * live_fds[0..n) as live_fd. Errors and messages as hold_acquire, about
 * the workspace the conflict is on.
 */
int hold_acquire_multi(struct cli *c, struct registry *reg, const struct owner *os,
		       size_t n, const struct hold_wait *w, int *live_fds,
		       struct wsl_error *err);

/* Exit status for err, with -E applied to WSLOCK_BUSY and WSLOCK_TIMEOUT. */
int hold_conflict_status(const struct hold_wait *w, const struct wsl_error *err);

/* True when err is to be reported by its exit status alone: -q with -E N
 * for WSLOCK_BUSY and WSLOCK_TIMEOUT (the caller chose the status and
 * asked for silence, as with flock -n -E N). */
bool hold_conflict_silent(const struct cli *c, const struct hold_wait *w,
			  const struct wsl_error *err);

/* What acquire and run record and how they wait. */
struct hold_opts {
	struct hold_wait wait;
	const char *purpose;
	const char *operation_id;
};

/* Handles an option of CLI_WAIT_OPTIONS: returns 1 when id was one of them
 * (0 when not), -1 with err for a bad value or for -n with -w
 * (hold_registry_option). */
int hold_option(struct hold_opts *h, int id, const char *arg,
		struct wsl_error *err);

/* -w and -n for the commands that change the registry but do not wait for
 * a workspace (release, recover, reclaim): they bound the wait for the
 * registry's coordination lock (and release's wait for nested runs). */
#define HOLD_REGISTRY_OPTIONS \
	{ "timeout", 'w', required_argument, "SECONDS", \
	  "give up waiting for the registry after SECONDS (WSLOCK_REGISTRY_BUSY)" }, \
	{ "nonblock", 'n', no_argument, NULL, \
	  "do not wait for a registry another wslock is changing (not with -w)" }

/* Handles -w and -n into w: 1 when id was one of them, 0 when not, -1
 * with a usage err for a bad value, or when -n and -w are both given (in
 * either order: they contradict each other; flock(1) lets -n win
 * silently). */
int hold_registry_option(struct hold_wait *w, int id, const char *arg,
			 struct wsl_error *err);

/* Unless -q, makes a long wait of reg for its coordination lock say on
 * stderr who holds it (registry->coord_notice), once a wait: a stopped
 * holder after REGISTRY_COORD_NOTICE_MS, a running one after 10 s. */
void hold_registry_notice(const struct cli *c, struct registry *reg);

/* Applies w's -w/-n to reg's waits for its coordination lock, counting
 * -w from now (registry_coord_bound), and hold_registry_notice. */
void hold_registry_bound(const struct cli *c, struct registry *reg,
			 const struct hold_wait *w);

#endif
