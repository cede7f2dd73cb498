/* local_multi.c - the local backend's acquire, of one workspace or of
 * several at once (`run A B C -- CMD`, `acquire A B C`; DESIGN.md section
 * 2, "several workspaces").
 *
 * All or nothing, in one critical section: under one hold of
 * .coordination LOCK_EX every workspace is checked (its own lock by path
 * and by identity, its ancestors and descendants: local_check_locks, then
 * the wait queue), and only when none conflicts is every lock published,
 * in argument order, each exactly as a single acquire publishes it
 * (registry_local.c). A failed publish removes the ones made before it,
 * still under the same hold, so no other wslock ever sees part of the
 * set: readers without .coordination (inspect) may see the locks appear
 * one after the other, as they see any two acquires.
 *
 * No deadlock between two jobs naming the same workspaces in different
 * orders: nothing is held while waiting (a waiter holds no lock, only its
 * queue entry), and a waiter for several workspaces writes one queue
 * entry that names them all (local_queue.c), taken at one SEQ under
 * .coordination. So every waiter stands in all the queues it needs at one
 * place of one global order, waits only for conflicting entries ahead of
 * it (smaller SEQ) and for holders, and holders wait for nobody: the
 * waits-for graph follows SEQ downwards and has no cycle. FIFO holds
 * across queues: an `A B` waiter queued before a later `A` waiter is
 * served first, even while A is free and it still waits for B (no barging).
 *
 * Shared (`run --shared A B`): the same, with every lock of the set
 * shared: in each workspace it joins the shared lock there (one more
 * holder, local_shared.c) or publishes a new one, and its one queue entry
 * says "shared", so it passes readers in every queue and waits behind a
 * writer queued earlier in any of them (a writer is never overtaken by a
 * later reader set). A failure takes back only what this set added: its
 * own holder of a shared lock others hold too, the whole lock where it
 * was the first (unpublish_ours).
 *
 * A crash (SIGKILL) leaves, by step: before the first rename, nothing but
 * garbage (as a single acquire); between publishing workspace k and k+1
 * (multi:published-one, after each publish but the last), the first k
 * locks, complete, of an owner that is now dead (a run: its live files
 * are closed with it; acquire --pid P: the lock of P, who never learned
 * its token, exactly as a single acquire killed after its publish), and
 * the others free. That is a partial set, but never one that looks
 * complete and live: each of those locks reads as held by a dead owner
 * (recovery required, or --reclaim-dead), which is the crash promise of
 * every lock; a shared set leaves a dead reader in each of the first k
 * (other readers go on; a writer needs recovery). The set shares one operation_id, so `inspect --operation-id`
 * lists what a crash left of it.
 */
#include "registry_local.h"
#include "fsx.h"
#include "testhook.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

/* Checks every workspace of os[0..n): the conflict waiting cannot cure
 * first (lockrules ranking), else the first in argument order, into
 * *conflict, its index into *which; join[i]: a shared request joins the
 * shared lock there (local_check_locks). */
static int check_all(struct registry *reg, const struct owner *os, size_t n,
		     struct lock_entry *conflict, size_t *which, bool *join,
		     struct wsl_error *err)
{
	for (size_t i = 0; i < n; i++) {
		struct lock_entry c;

		if (local_check_locks(reg, &os[i], &c, &join[i], err) != 0)
			return -1;
		if (lockrules_conflict_take(conflict, &c))
			*which = i;
	}
	return 0;
}

/* Takes back o's lock (key) that publish_all made in this hold of
 * .coordination: the whole lock when it was ours alone, else only our
 * holder of the shared lock, found by o's token (shared_leave). No
 * error: what cannot be read is left for the lock checks to report. */
static void unpublish_ours(struct registry *reg, const char *key, const struct owner *o)
{
	struct wsl_error ignored = { 0 };
	const struct lock_entry *h;
	struct lock_entry e;

	if (local_get_key(reg, key, false, &e, &ignored) == 0) {
		h = lock_entry_by_token(&e, o->token);
		if (h != NULL && e.shared)
			shared_leave(reg, key, o->workspace_root, h, e.n_holders, &ignored);
		else if (h != NULL)
			unpublish(reg, key, o->workspace_root, o, NULL, &ignored);
		lock_entry_free(&e);
	}
	wsl_error_clear(&ignored);
}

/* Publishes every lock of os[0..n) in order (join[i]: as one more
 * holder of the shared lock there); on a failure, takes back the ones
 * published before it (nothing of the set is left: unpublish_ours) and
 * closes their live files. */
static int publish_all(struct registry *reg, const struct owner *os, size_t n,
		       const bool *join, int *live_fds, struct wsl_error *err)
{
	size_t i;

	for (i = 0; i < n; i++) {
		char key[WSL_KEY_HEX + 1];
		int *lfd = live_fds != NULL ? &live_fds[i] : NULL;

		crypto_path_key(os[i].workspace_root, key);
		if ((join[i] ? shared_join(reg, &os[i], key, lfd, err) :
		     publish(reg, &os[i], lfd, err)) != 0)
			break;
		if (i + 1 < n)
			CRASH_POINT("multi:published-one");
	}
	if (i == n)
		return 0;
	while (i-- > 0) {
		char key[WSL_KEY_HEX + 1];

		crypto_path_key(os[i].workspace_root, key);
		unpublish_ours(reg, key, &os[i]);
		if (live_fds != NULL) {
			fsx_close(live_fds[i]);
			live_fds[i] = -1;
		}
	}
	return -1;
}

int local_try_acquire_multi(struct registry *reg, const struct owner *os, size_t n,
			    const struct registry_deadline *dl, int *live_fds,
			    struct lock_entry *conflict, size_t *which,
			    struct wsl_error *err)
{
	bool join[REGISTRY_MULTI_MAX] = { false };
	int rc = -1;

	memset(conflict, 0, sizeof(*conflict));
	conflict->state = LOCK_FREE;
	*which = 0;
	if (n == 0 || n > REGISTRY_MULTI_MAX)
		return wsl_error_set(err, WSL_INTERNAL, "%zu workspaces at once", n);
	/* What a waiter stages before it sleeps (local_prestage.c). */
	prestage_note(reg, os, n, live_fds != NULL);
	if (local_lock(reg, LOCK_EX, dl, err) != 0)
		return -1;
	if (check_all(reg, os, n, conflict, which, join, err) != 0)
		goto out;
	/* The FIFO wait queue (local_wait.c): no barging past a waiter, in
	 * any of the workspaces' queues. A waiter queued ahead is reported
	 * for the first workspace; the one it waits for is named. */
	if (conflict->state == LOCK_FREE)
		*which = 0;
	if (queue_check(reg, os, n, conflict, err) != 0)
		goto out;
	if (conflict->state != LOCK_FREE) {
		/* A waiter ahead: name our workspace that nests with its. */
		for (size_t i = 0; conflict->queued && i < n; i++)
			if (wspath_within(os[i].workspace_root, conflict->workspace_root) ||
			    wspath_within(conflict->workspace_root, os[i].workspace_root)) {
				*which = i;
				break;
			}
		rc = ACQUIRE_CONFLICT;
		goto out;
	}
	rc = publish_all(reg, os, n, join, live_fds, err) == 0 ? ACQUIRE_DONE : -1;
out:
	local_unlock(reg);
	if (rc == ACQUIRE_DONE)
		queue_leave(reg);	/* wakes the waiter behind */
	return rc;
}

int local_try_acquire(struct registry *reg, const struct owner *o,
		      const struct registry_deadline *dl, int *live_fd,
		      struct lock_entry *conflict, struct wsl_error *err)
{
	size_t which;

	return local_try_acquire_multi(reg, o, 1, dl, live_fd, conflict, &which, err);
}
