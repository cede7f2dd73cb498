/* keeper_pid.h - the keeper of an `acquire` lock whose liveness is a lease
 * (the etcd backend, DESIGN.md section 5b).
 *
 * `acquire` exits at once, so the renewals of its lock's liveness lease
 * live in a small process of their own: started by acquire once the lock
 * is held, in a session of its own (no terminal signal reaches it), with
 * no stdio and no descriptor of the caller's (`owner=$(wslock acquire …)`
 * returns), its working directory "/". It renews the lease while the
 * holder pid lives, watching it through a pidfd, and exits
 *  - when the pid exits: the lock is left, dead once the lease runs out
 *    (recovery required, as on disk);
 *  - when a renewal, or the watch of its keys (registry_watch_own), finds
 *    the lock released, taken over or its lease gone;
 *  - when the lease could not be renewed before it expired at the server.
 * It never signals anything. `release` on the same machine also pokes it
 * (keeper_pid_poke) and waits for its check, so that the keeper is gone
 * when release returns; a poke carries no authority: the keeper only
 * reads.
 */
#ifndef WSLOCK_KEEPER_PID_H
#define WSLOCK_KEEPER_PID_H

#include "registry.h"

/*
 * Opens a pidfd of o->pid (pidfd_open(2)) and checks that the pid is
 * still o's holder (its start ticks, when recorded). Returns the pidfd
 * (O_CLOEXEC), or -2 when the kernel has no pidfd_open (the keeper then
 * checks the pid once a second), or -1 with WSL_NOT_HELD when the holder
 * has exited.
 */
int keeper_pid_open(const struct owner *o, struct wsl_error *err);

/*
 * Starts the keeper of o's lock, just acquired in reg with a liveness
 * lease, watching pidfd (from keeper_pid_open; closed here in the
 * caller). Returns once the keeper runs and listens for pokes: 0, or -1
 * with WSL_OS when it could not be started (the caller releases the
 * lock). Forks twice: the keeper is nobody's child here.
 */
int keeper_pid_start(struct registry *reg, const struct owner *o, int pidfd,
		     struct wsl_error *err);

/*
 * Asks the keeper of the lock whose owner has token (if one runs on this
 * machine, in this network namespace) to check its lock now, and waits
 * at most timeout_ms (ms) for it to have done so. Nothing when none
 * listens. Used by release after the lock is gone, so that its keeper is
 * gone when release returns.
 */
void keeper_pid_poke(const char *token, long timeout_ms);

/* How long (ms) a release waits in keeper_pid_poke for the keeper's check. */
#define KEEPER_POKE_WAIT_MS 3000

#endif
