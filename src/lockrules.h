/* lockrules.h - every lock rule, once (DESIGN.md sections 4 and 5).
 *
 * A lock as a backend read it (struct lock_entry, struct overlap: the types
 * the backends fill, below the registry front end) and the rules that decide
 * what may be done with it: which of several conflicts is reported, which
 * conflicts waiting cannot cure, and the release, retain and take-over
 * checks. Both backends and the command layer ask these functions; none
 * decides a rule by itself, so that the reclaim preview and reclaim --yes,
 * the local and the etcd backend, cannot disagree. Nothing here does I/O:
 * each function looks at entries already read (under the backend's
 * compare) and returns 0, or -1 with the refusal in a struct wsl_error.
 */
#ifndef WSLOCK_LOCKRULES_H
#define WSLOCK_LOCKRULES_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "crypto.h"
#include "error.h"
#include "liveness.h"
#include "owner.h"

enum lock_state {
	LOCK_FREE,
	LOCK_HELD,
	LOCK_RETAINED,
	LOCK_CORRUPT,
};

/* One lock as read from the registry, with its holder's liveness. */
struct lock_entry {
	char key[WSL_KEY_HEX + 1];
	char workspace_root[PATH_MAX];	/* from the document; "" when corrupt */
	char lock_path[PATH_MAX];	/* .../locks/KEY/owner.json, or the
					 * etcd key (etcd_key) */
	bool etcd_key;			/* lock_path is an etcd key: its bytes are
					 * read with etcdctl, there is no file */
	enum lock_state state;
	bool has_owner;
	struct owner owner;
	char *raw;			/* owner.json bytes (NUL added), or NULL */
	size_t raw_len;
	char *retained;			/* retained.json bytes, or NULL */
	char problem[1024];		/* why corrupt */
	bool unsafe;			/* corrupt because a file or directory of the
					 * lock is a symlink, foreign or group/world
					 * accessible: WSL_UNSAFE_PATH, as for the
					 * registry itself (DESIGN §6) */
	bool probed;			/* liveness set; a corrupt lock is probed
					 * only by its live file: live, or not
					 * probed */
	enum liveness liveness;
	char reason[LIVENESS_REASON_MAX];
	dev_t live_dev;			/* the lock's live file (local), or 0 */
	ino_t live_ino;
	bool live_held;			/* probed: its kernel lock is held (a running
					 * `wslock run` or its command) */
	bool nested_held;		/* probed: a nested run holds the lock's
					 * nested file (local) */
	bool queued;			/* not a lock: a waiter that arrived first
					 * and still waits for workspace_root, which
					 * overlaps the one wanted (local queue,
					 * DESIGN.md section 5); owner.pid and
					 * owner.acquired_at (its arrival) are set,
					 * has_owner is false, liveness live */
	char *behind;			/* queued: who holds the workspace meanwhile
					 * (readers a newcomer reader could have
					 * joined but for the waiter), as
					 * lockrules_describe_holder says it, malloc'd;
					 * NULL: nobody */
	/* Shared locks (DESIGN.md section 2, issue 15): the mode lives in
	 * the lock, not in the owner document. A shared lock's entry
	 * describes its representative holder (the one a writer meets
	 * first: lockrules_conflict_keep's ranking over holders[]) and owns
	 * every holder's entry in holders[]; a holder's entry names its
	 * directory (holder, "" for an exclusive lock). */
	bool shared;
	char holder[WSL_KEY_HEX + 1];
	struct lock_entry *holders;
	size_t n_holders;
	const char *relation;		/* a conflict found by identity or through a
					 * mount (local): "same", "ancestor" or
					 * "descendant" as the backend found it,
					 * which its path may not tell; NULL: by
					 * path (lockrules_conflict_relation) */
};

/* "free", "held", "retained" or "corrupt". */
const char *lock_state_name(enum lock_state s);

/* Frees what e owns (a shared lock's holders too) and marks it free. */
void lock_entry_free(struct lock_entry *e);

/* The entry of e's holder with token: e itself for an exclusive lock
 * whose owner has it, the holder in e->holders for a shared one; NULL
 * when no holder has it. */
const struct lock_entry *lock_entry_by_token(const struct lock_entry *e,
					     const char *token);

/* The holder of e whose owner document equals o (owner_equal), or, with
 * o NULL, whose bytes equal raw (raw_len bytes: a corrupt holder's);
 * e itself for an exclusive lock. NULL when no holder is that one. */
const struct lock_entry *lock_entry_by_owner(const struct lock_entry *e,
					     const struct owner *o,
					     const char *raw, size_t raw_len);

/* A lock that overlaps a workspace. */
struct overlap {
	struct lock_entry entry;
	bool ancestor;		/* true: on an ancestor; false: a descendant */
};

/* Frees the n overlaps of o (registry_overlaps) and o. */
void lock_overlaps_free(struct overlap *o, size_t n);

/* Appends a zeroed overlap (ancestor or descendant) to the growing array
 * *items of *n entries (*cap allocated) and returns its entry to fill;
 * NULL with WSL_OS on allocation failure. */
struct lock_entry *lock_overlap_push(struct overlap **items, size_t *n,
				     size_t *cap, bool ancestor,
				     struct wsl_error *err);

/* What recover and reclaim expect to find: the compare of their
 * compare-and-swap, and the rules for taking the lock over. */
struct registry_expect {
	const struct owner *owner;	/* the exact expected owner, or NULL when
					 * the given document is not valid */
	const char *invalid_why;	/* why it is not, when owner is NULL */
	const char *raw;		/* the given bytes (a corrupt lock is cleared
					 * only when they equal its bytes) */
	size_t raw_len;
	bool force;			/* accept unknown liveness; needed for corrupt */
	const char *force_reason;	/* recorded in the journal */
	bool allow_retained;		/* recover: true; reclaim: false */
	const char *action;		/* journal action */
	bool alone;			/* the new owner runs a command that needs the
					 * workspace alone (recover -- CMD, reclaim
					 * --yes -- CMD): lockrules_check_alone */
};

/*
 * For x->alone: 0 unless e is a shared lock in which another holder than
 * the one x names is held and not provably dead (live, or of unknown
 * liveness: fail closed); then -1 with WSL_BUSY naming it (and how many
 * there are), with nothing changed: a recovered reader stays a reader, so
 * its command would run beside the live readers, and a repair is a write.
 * Every backend asks this before it takes one reader over with a command.
 */
int lockrules_check_alone(const char *workspace, const struct registry_expect *x,
			  const struct lock_entry *e, struct wsl_error *err);

/* ---- conflicts (acquire) --------------------------------------------- */

/* Whether an acquire (shared: --shared) may coexist with e, a lock on the
 * wanted workspace or one overlapping it (DESIGN.md section 2): only a
 * shared request beside a shared lock none of whose holders is corrupt.
 * A dead, retained or unknown reader does not keep readers out (only a
 * writer needs it recovered); a corrupt one does (fail closed). */
bool lockrules_compatible(bool shared, const struct lock_entry *e);

/* The index of the holder among h[0..n) (n > 0) that stands for a shared
 * lock: the first that waiting cures least, as lockrules_conflict_keep
 * ranks (corrupt, retained, dead, then live or unknown), and within a
 * rank a dead one first, so that a writer meets a dead reader's document
 * before a live reader's, and inspect --owner gives one recover can take. */
size_t lockrules_representative(const struct lock_entry *h, size_t n);

/* Moves cand into best when waiting cures it less (corrupt, then retained,
 * then dead, then live or unknown); best empty: always. cand is left
 * empty. The one ranking of conflicts, used by every backend. */
void lockrules_conflict_keep(struct lock_entry *best, struct lock_entry *cand);

/* As lockrules_conflict_keep, for a cand that may be free (a free cand is
 * only freed): true when cand was moved into best. For the checks of a set
 * of workspaces, which note the index of the conflict they keep. */
bool lockrules_conflict_take(struct lock_entry *best, struct lock_entry *cand);

/* Whether conflict cand ranks before best in that order (strictly: of
 * two alike, the one found first is kept), as lockrules_conflict_keep
 * decides; acquires of several workspaces rank theirs so. */
bool lockrules_conflict_worse(const struct lock_entry *cand, const struct lock_entry *best);

/* Keeps own, the lock read on the wanted workspace itself, as a candidate
 * (lockrules_conflict_keep) when it is held, retained or corrupt; a
 * corrupt one is named by workspace, since its document names nothing.
 * own is taken (freed or moved into *best) in every case. */
void lockrules_conflict_keep_own(struct lock_entry *best, struct lock_entry *own,
				 const char *workspace);

/*
 * Whether waiting can cure conflict e met while acquiring wanted
 * (canonical): 0 when it can (a live holder, or one of unknown liveness);
 * else -1 with the error and e's details: WSL_LOCK_CORRUPT (corrupt),
 * WSL_RECOVERY_REQUIRED (retained, or a dead holder), WSL_BUSY when inside:
 * the caller is within e's holder by proof (nest.h: it holds e's live
 * file, so it runs inside that run's command and the run ends only after
 * it), since waiting for it would never end. A token proves nothing.
 */
int lockrules_conflict_final(const char *wanted, const struct lock_entry *e,
			     bool inside, struct wsl_error *err);

/* Where the conflict e met while acquiring wanted lies: "same",
 * "ancestor" or "descendant" (the error's relation, DESIGN.md section 6):
 * e->relation when the backend set it, else by the two paths. */
const char *lockrules_conflict_relation(const char *wanted, const struct lock_entry *e);

/* "W is", "W overlaps its ancestor A, which is" or "W overlaps its
 * descendant D, which is", for a conflict e met while acquiring wanted. */
void lockrules_conflict_subject(const char *wanted, const struct lock_entry *e,
				char *out, size_t len);

/* One phrase naming e's holder for messages: "pid 12 on host h (purpose
 * "x", operation o, since T)", "a corrupt lock (problem)", or for a
 * waiter queued ahead (e->queued) "nobody yet: a waiter queued ahead
 * (pid 12, since T) is served first". */
void lockrules_describe_holder(const struct lock_entry *e, char *out, size_t len);

/* Fills err's details from a conflicting or current lock: workspace_root,
 * holder (the owner JSON), liveness and its reason, the path when corrupt
 * or when e is one holder of a shared lock (lockrules_holder_document). */
void lockrules_error_holder(struct wsl_error *err, const struct lock_entry *e);

/* Whether e is one holder of a shared lock whose own owner document is a
 * file, e->lock_path (local: locks/KEY/holders/H/owner.json): the one
 * document that names that holder and no other, where `inspect --owner`
 * gives the holder a writer meets first. */
bool lockrules_holder_document(const struct lock_entry *e);

/* The code whose exit status `inspect --exit-status` gives for e's state:
 * WSL_OK (free), WSL_BUSY (held by a live owner: 75), WSL_RECOVERY_REQUIRED
 * (held by a dead owner or one of unknown liveness, or retained: 69),
 * WSL_LOCK_CORRUPT (corrupt, unsafe too: 65). DESIGN.md section 2. */
enum wsl_code lockrules_state_code(const struct lock_entry *e);

/* The worse of two lockrules_state_code codes, for `inspect --exit-status`
 * over a workspace's own lock and the locks overlapping it: corrupt (65)
 * before recovery required (69) before busy (75) before free (0). A code
 * outside those four counts as the worst. */
enum wsl_code lockrules_worse_code(enum wsl_code a, enum wsl_code b);

/* Whether e, a corrupt lock, is cleared by `recover --force --reason`
 * given a copy of its owner.json (e->lock_path; on etcd the exact bytes
 * of its key, e->etcd_key) for its workspace (e->workspace_root): its bytes could be read, it is not unsafe, its
 * holder's kernel lock is not held, and its workspace is known. The
 * corrupt errors of the checks below set err->corrupt_clearable alike. */
bool lockrules_corrupt_clearable(const struct lock_entry *e);

/* As lockrules_corrupt_clearable, its workspace aside: a document that
 * does not say which workspace it locks (not JSON, no workspace_root) is
 * still cleared by recover run for the workspace it locks (the only one
 * whose key finds it). */
bool lockrules_corrupt_bytes_clearable(const struct lock_entry *e);

/* ---- release, retain, take-over -------------------------------------- */

/* 0 when e (read under the backend's compare) is token's own lock and may
 * be released; else the error of registry_release. */
int lockrules_check_release(const char *workspace, const char *token,
			    const struct lock_entry *e, struct wsl_error *err);

/* 0 when e is token's own lock and may be retained; else
 * WSL_OWNERSHIP_LOST (the holder in err's details when there is one), or
 * WSL_RECOVERY_REQUIRED when it is retained already. */
int lockrules_check_retain(const char *workspace, const char *token,
			   const struct lock_entry *e, struct wsl_error *err);

/* 0 when e may be taken over as x says (registry_take_over's rules: exact
 * owner, provably dead, unknown only with force, retained only for
 * recover, corrupt only by its exact bytes with force); else its error,
 * with the holder, liveness and reason in err's details. */
int lockrules_check_take_over(const char *workspace, const struct registry_expect *x,
			      const struct lock_entry *e, struct wsl_error *err);

/*
 * Whether reclaim (force: with --force) may take e over: exactly
 * lockrules_check_take_over with e's own owner expected and no bytes
 * given, so that the preview says what --yes will do. Returns true or
 * false and says why in why (len bytes), in the preview's words.
 */
/* The code lockrules_check_take_over gives reclaim for e (WSL_OK when
 * reclaimable): what `reclaim --yes` exits with for a named workspace it
 * did not reclaim (live: OWNER_LIVE, unknown or retained: 69, corrupt: 65,
 * unsafe: 77). */
enum wsl_code lockrules_reclaim_code(const struct lock_entry *e, bool force);

bool lockrules_reclaimable(const struct lock_entry *e, bool force, char *why,
			   size_t len);

#endif
