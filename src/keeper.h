/* keeper.h - running a command under a lock whose liveness is a lease
 * (the etcd backend, DESIGN.md section 5b).
 *
 * wslock forks a keeper, and the keeper forks the command: the renewal
 * loop lives in the keeper, so a SIGSTOPped or SIGKILLed wslock changes
 * nothing (the lock stays live until the command ends; then, with wslock
 * gone, it is left behind, dead once its lease runs out: recovery
 * required). Both wslock and the keeper are child subreapers and both
 * enforce the holder's deadline (TTL from the send time of the last
 * renewal that succeeded): before it passes, the command and every
 * descendant still in the session get SIGTERM at deadline - kill-after and
 * SIGKILL at the deadline, while the liveness lease at the server lasts
 * lock-delay longer. The command stays in the caller's process group. The
 * keeper keeps no stdio open once the command is started.
 */
#ifndef WSLOCK_KEEPER_H
#define WSLOCK_KEEPER_H

#include "registry.h"
#include "spawn.h"

/*
 * Runs ch->cmd under o's lease-backed lock as described above and waits
 * for it; the command inherits live_fd (-1: nothing but 0-2). Fills *wstatus with the command's wait status and returns 0 when
 * it ended by itself; -1 with err otherwise: WSL_OWNERSHIP_LOST when the
 * lease was lost, could not be renewed before the deadline, or the lock's
 * keys were deleted or changed (the command has been stopped then), or an
 * OS error (the command never ran). The keeper keeps renewing until
 * keeper_done(), so the caller releases (or retains) a lock that is still
 * live.
 */
int keeper_supervise(struct registry *reg, const struct owner *o,
		     const struct child *ch, int live_fd, int *wstatus,
		     struct wsl_error *err);

/* Tells the keeper of the last keeper_supervise that the lock has been
 * released or retained: it exits without touching anything. Nothing when
 * there is none. */
void keeper_done(void);

#endif
