/* liveness.h - is a lock's holder alive? (DESIGN.md section 4, fail closed) */
#ifndef WSLOCK_LIVENESS_H
#define WSLOCK_LIVENESS_H

#include <stddef.h>

#include "owner.h"

enum liveness {
	LIVENESS_LIVE,
	LIVENESS_DEAD,
	LIVENESS_UNKNOWN,
};

#define LIVENESS_REASON_MAX 512	/* bytes, including the NUL */

/* "live", "dead" or "unknown". */
const char *liveness_name(enum liveness l);

/*
 * Decides whether o's holder is alive, in the order of DESIGN.md section 4
 * (first match wins; the etcd backend checks its lease, step 2, before it
 * calls this):
 *  1. the holder's kernel lock on the file "live" in the lock directory
 *     lockdir_fd (-1: none) is held -> live; a live file that cannot be
 *     probed -> live. The probe takes a shared flock(2) with LOCK_NB and
 *     drops it at once, so that concurrent probes never see each other as
 *     holders. This is the one proof that crosses pid namespaces;
 *  3. o->host is not this host, or o->machine_id is not this machine's
 *     where both are known -> unknown (its pid means nothing here);
 *  4. the same machine, o->boot_id differs from this boot's -> dead;
 *  5. o's pid namespace (the initial one when not recorded) is not this
 *     process's, or this process's cannot be read -> unknown;
 *  6. kill(pid, 0) fails with ESRCH -> dead; the pid's start ticks differ
 *     from o->start_ticks -> dead (pid reuse); equal, EPERM, or anything
 *     unreadable -> live (fail closed).
 * Writes a one-line reason into reason (reasonlen bytes).
 */
/* Step 1 alone: 1 when a holder keeps the file "live" in the lock
 * directory lockdir_fd (-1: none) flock(2)ed, 0 when not (or there is no
 * such file), -1 with errno when it cannot be probed. It tries a shared
 * lock without blocking and drops it at once. Works whatever owner.json
 * holds, so a corrupt lock of a live run is known live (section 4). */
int liveness_live_held(int lockdir_fd);

enum liveness liveness_probe(int lockdir_fd, const struct owner *o,
			     char *reason, size_t reasonlen);

/* liveness_probe with step 1 already made: held is what
 * liveness_live_held returned (errno as it left it, for -1), so a caller
 * that needs that answer itself probes the live file once. */
enum liveness liveness_probe_held(int held, const struct owner *o,
				  char *reason, size_t reasonlen);

/*
 * A listing's memo of start times (inspect --all, the reclaim preview and
 * --yes: many locks, often of a few holders): between liveness_memo_begin
 * and liveness_memo_end, a pid whose start ticks were read and matched a
 * document (the last such pid of each of 64 slots, by pid modulo 64) is, for a later document with the same pid and ticks, live
 * once kill(pid, 0) finds it, without reading /proc/PID/stat again. It
 * can only err towards live (the holder died and its pid was reused
 * within the listing), never towards dead, so it stays fail closed; a
 * mismatch is always read afresh. Not for a process that waits (its
 * answer must follow the holder). No errors.
 */
void liveness_memo_begin(void);
void liveness_memo_end(void);

#endif
