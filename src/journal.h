/* journal.h - the append-only audit journal, LOCKDIR/journal.jsonl. */
#ifndef WSLOCK_JOURNAL_H
#define WSLOCK_JOURNAL_H

#include <stdbool.h>

#include "error.h"
#include "liveness.h"
#include "owner.h"

/* One takeover or removal of somebody else's lock. */
struct journal_event {
	const char *action;		/* "recover", "reclaim", "reclaim-dead", "clear-corrupt" */
	const char *workspace_root;
	const struct owner *prior;	/* NULL for a corrupt lock */
	const char *prior_raw;		/* the corrupt document's bytes, or NULL */
	size_t prior_raw_len;
	const struct owner *next;	/* the new owner, or NULL when removed */
	const char *liveness;		/* verdict on the prior owner, or NULL */
	const char *liveness_reason;
	const char *force_reason;	/* --reason with --force, or NULL */
};

/* ev as one JSON line with its newline, in a new buffer (free(3) it) of
 * *len bytes, not NUL-terminated; NULL on allocation failure. The format
 * every backend's journal shares. */
char *journal_format(const struct journal_event *ev, size_t *len);

/*
 * Appends ev as one JSON line (with the time, and the acting pid, uid and
 * host) to journal.jsonl below the registry directory dir_fd (path for
 * messages): opened O_APPEND | O_NOFOLLOW, created 0600, refused unless a
 * private regular file; the line goes out in one write(2) so concurrent
 * appends never interleave (O_APPEND, write(2)), then fsync unless sync
 * is false (a filesystem where nothing survives a crash). A file that does
 * not end with a newline (a line torn before) gets one first, in the same
 * write. A write or fsync that fails (ENOSPC) is undone: the file is cut
 * back to its old length (ftruncate), so no torn line is left to swallow
 * the next one. The caller holds the registry's coordination lock (no
 * other append in between). Returns 0 or -1 with WSL_IO /
 * WSL_UNSAFE_PATH.
 */
int journal_append(int dir_fd, const char *path, const struct journal_event *ev,
		   bool sync, struct wsl_error *err);

#endif
