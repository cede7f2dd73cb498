/* registry.h - the lock registry contract (DESIGN.md section 5).
 *
 * The operations every backend implements: get, try-acquire (publish),
 * release, compare-and-swap take-over, retain, list, the overlap queries and
 * waiting for a change. The commands call only these functions and never
 * know which backend answers: the local on-disk registry (registry_local.c,
 * the default) or etcd (registry_etcd.c); registry.c is the front end that
 * selects one and dispatches to it (registry_backend.h). The core never prints and never
 * exits: every function returns 0 (or a documented positive value) or -1
 * and fills a struct wsl_error.
 */
#ifndef WSLOCK_REGISTRY_H
#define WSLOCK_REGISTRY_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "crypto.h"
#include "error.h"
#include "liveness.h"
#include "lockrules.h"
#include "owner.h"

struct registry_ops;

/* An owner.json up to this size is read whole (bytes), so that one larger
 * than OWNER_DOC_MAX (corrupt) can still be cleared by its exact bytes. */
#define LOCK_RAW_MAX (1024 * 1024)

/* The file in a lock directory that nested runs hold LOCK_SH while they
 * run; the outer run and release take it LOCK_EX before the lock goes. */
#define LOCK_NESTED_FILE "nested"

/* Where the registry is: from -d/--lock-dir, --backend, --etcd-* and the
 * environment (WSLOCK_DIR, WSLOCK_BACKEND, WSLOCK_ETCD_ENDPOINTS). */
struct registry_config {
	const char *lock_dir;		/* local: -d, or NULL for the default */
	const char *backend;		/* "local" or "etcd"; NULL: $WSLOCK_BACKEND, else local */
	const char *etcd_endpoints;	/* NULL: $WSLOCK_ETCD_ENDPOINTS */
	const char *etcd_prefix;	/* NULL: $WSLOCK_ETCD_PREFIX (empty:
					 * unset), else "/wslock/"; never ""
					 * (cli.c refuses --etcd-prefix "") */
	const char *etcd_cacert;	/* TLS CA file; NULL: $WSLOCK_ETCD_CACERT */
	const char *etcd_cert;		/* client certificate; NULL: $WSLOCK_ETCD_CERT */
	const char *etcd_key;		/* its key; NULL: $WSLOCK_ETCD_KEY */
	const char *etcd_user;		/* USER[:PASSWORD]; NULL: $WSLOCK_ETCD_USER
					 * (password: $WSLOCK_ETCD_PASSWORD) */
	long lease_ttl_s;		/* etcd lease of a holder, s; 0: 15 */
	long timeout_ms;		/* etcd per-request timeout, ms; 0: 5000 */
	const char *workspace;		/* the canonical workspace the command is
					 * about, or NULL: a registry that would
					 * overlap it is refused before it is
					 * created */
	bool shared;			/* acquire/run --shared: the next acquire
					 * takes a shared lock (DESIGN.md section
					 * 2; one workspace: registry_multi_check) */
};

/* An open registry: the backend's operations and its private state, plus
 * what every caller may read. Only the backend touches *backend. */
struct registry {
	const struct registry_ops *ops;	/* NULL: not open */
	void *backend;		/* the backend's own state (opaque) */
	char path[PATH_MAX];	/* local: absolute, as given (for messages);
				 * "" when the registry is no directory here */
	char real[PATH_MAX];	/* local: canonical, for the disjointness check */
	bool coord_bounded;	/* registry_coord_bound was called: every wait
				 * for the registry itself ends by */
	long long coord_bound_ms;	/* this CLOCK_MONOTONIC time (ms) */
	bool coord_has_sigfd;	/* registry_coord_signals: a wait for the
				 * registry itself also ends on a signal
				 * read from coord_sigfd */
	int coord_sigfd;
	long long fence;	/* fencing token of the lock last acquired or
				 * taken over (etcd create revision), 0: none */
	long long keep_deadline_ms;	/* registry_keepalive: no request may
					 * end after this CLOCK_MONOTONIC time
					 * (ms); 0: the lease's own deadline */
	bool lease_for_pid;	/* acquire: a lock acquired with a liveness
				 * lease (live_fd given) is kept alive by a
				 * keeper watching the owner's pid, not by a
				 * running wslock with a command
				 * (keeper_pid.h): it may be released by
				 * token, and its renewals may go on until the
				 * lease expires at the server */
	/* Whether an acquire for the process from runs inside the held lock
	 * e (nest_proven's proof; set by hold.c, so that no backend
	 * depends on nest.c). The local wait queue asks it so that a
	 * command inside a run never queues behind waiters for that very
	 * run's lock. NULL: never inside. */
	bool (*inside)(const struct lock_entry *e, pid_t from);
	/* Set by hold.c when a conflict will be waited for (not -n): the
	 * local backend then joins its wait queue in the very attempt that
	 * meets the conflict, so a waiter's place is that of its first
	 * attempt, not of the one after registry_wait_prepare. */
	bool queue_early;
	/* Told once per wait for the registry's own coordination lock (local:
	 * .coordination) that lasts: after REGISTRY_COORD_NOTICE_MS when its
	 * holder (pid, from /proc/locks) is stopped, after 10 s when it runs
	 * or cannot be seen (holder 0). Set by the command layer (hold.c),
	 * which prints: a person at a terminal otherwise waits silently for
	 * a process stopped with Ctrl-Z. NULL: nobody is told. */
	void (*coord_notice)(const struct registry *reg, long holder, bool stopped);
	/* registry_try_acquire takes a shared lock (from cfg->shared; the
	 * mode lives in the lock, not in the owner document). */
	bool acquire_shared;
};

/* How long a wait for a stopped holder of the coordination lock lasts
 * before reg->coord_notice is told (ms). */
#define REGISTRY_COORD_NOTICE_MS 1000

/* How long a call may wait for the registry itself (local: its
 * coordination lock, normally held for well under a millisecond): the
 * -w/-n bound at_ms (CLOCK_MONOTONIC, platform_mono_ms; -n: now), applied
 * as registry_coord_bound says, then it fails with WSL_REGISTRY_BUSY. A
 * NULL deadline waits as long as it takes (or as registry_coord_bound
 * said for every call). */
struct registry_deadline {
	long long at_ms;
};

/*
 * The registry directory: dir when not NULL, else $WSLOCK_DIR, else
 * $STATE_DIRECTORY/wslock (systemd; the first of its list), else
 * ${XDG_STATE_HOME:-$HOME/.local/state}/wslock, made absolute against the
 * working directory (DESIGN §5). Fails with WSL_USAGE when none can be
 * formed (no HOME, as for a system service without StateDirectory=).
 */
int registry_default_path(const char *dir, char out[PATH_MAX],
			  struct wsl_error *err);

/*
 * Opens the registry cfg names (see struct registry_config). With create,
 * the local registry is made on first use; without it nothing is created.
 * Fails with WSL_USAGE for an unknown backend or missing etcd endpoints,
 * for cfg->etcd_endpoints (--etcd-endpoints) with the local backend, and
 * for a non-empty $WSLOCK_ETCD_ENDPOINTS when no backend is chosen
 * (cfg->backend and $WSLOCK_BACKEND unset or empty): etcd settings never
 * fall back to the local registry silently.
 * WSL_BACKEND_UNAVAILABLE when etcd cannot be reached, and as
 * local_open for the local registry.
 */
int registry_open(struct registry *reg, const struct registry_config *cfg,
		  bool create, struct wsl_error *err);

/*
 * registry_workspace and registry_open in the order a mutating command
 * needs: arg is resolved first (its errors come first), then the registry
 * is opened knowing the workspace, so that one that would lie inside it is
 * refused before anything is created, then the two are checked apart.
 * cfg->workspace is set to ws. Errors as both.
 */
int registry_open_for(struct registry *reg, struct registry_config *cfg,
		      const char *arg, bool allow_missing, bool create,
		      char ws[PATH_MAX], struct wsl_error *err);

/* The name of reg's backend: "local" or "etcd". */
const char *registry_backend(const struct registry *reg);

/*
 * The local registry at path (absolute). With create, a missing registry is
 * made 0700 with locks/, nest/, tmp/ and .coordination: when make_below is
 * NULL (a registry named by -d or WSLOCK_DIR) only the registry itself, and
 * a missing parent fails with WSL_USAGE; else make_below (the default's
 * $HOME, StateDirectory or XDG_STATE_HOME's parent) must exist (WSL_USAGE)
 * and the directories between it and path are made 0700 like mkdir -p.
 * Without create (inspect) nothing is created and a missing registry opens
 * as empty (reg->exists false).
 * Refuses with WSL_UNSAFE_PATH a registry, or any entry in it, that is a
 * symlink, not owned by the effective uid or open to group or others, and
 * with WSL_NETWORK_FS one on a network filesystem unless
 * WSLOCK_ALLOW_NETWORK_FS=1 (the kernel lock does not work across hosts).
 */
int local_open(struct registry *reg, const char *path, const char *workspace,
	       bool create, const char *make_below, struct wsl_error *err);

/* Closes every descriptor (dropping the coordination lock). */
void registry_close(struct registry *reg);

/*
 * Resolves a workspace argument (wspath_resolve: canonical, errors as
 * there) and refuses one that contains reg's directory or lies inside it
 * (wspath_check_apart, WSL_UNSAFE_PATH).
 */
int registry_workspace(const struct registry *reg, const char *arg,
		       bool allow_missing, char out[PATH_MAX],
		       struct wsl_error *err);

/* Takes (LOCK_EX) or shares (LOCK_SH) the registry's coordination lock,
 * for a consistent read of several locks (local: the kernel lock on
 * .coordination, waiting for it; a read-only registry without that file
 * takes nothing. etcd: nothing, every read is one consistent revision). */
int registry_coord_lock(struct registry *reg, int op, struct wsl_error *err);

/*
 * Bounds every later wait of reg for its coordination lock (local:
 * .coordination) by -n (nonblock) or -w (deadline_ms, a CLOCK_MONOTONIC
 * time in ms; -1: none). The lock is normally held for microseconds, so
 * a bounded wait lasts up to the bound, or at least 10 s while its holder
 * runs (a loaded machine must not make a free workspace fail), and ends at
 * the bound when the holder is stopped (SIGSTOP, Ctrl-Z) or cannot be
 * named. Giving up fails with WSL_REGISTRY_BUSY naming the pid that holds
 * it (from /proc/locks, the kernel's own record). Neither: waits forever.
 */
void registry_coord_bound(struct registry *reg, bool nonblock, long long deadline_ms);

/*
 * While sigfd (a signalfd of the caller's blocked signals; -1: none again)
 * is set, no wait for the registry's coordination lock blocks in the
 * kernel where that signal could not end it: the wait also ends when a
 * signal other than SIGCHLD arrives, failing with WSL_REGISTRY_BUSY and
 * err->signo set (the signal is consumed). Without it, a SIGTERM from a CI
 * runner stayed pending behind a stopped holder of .coordination forever.
 */
void registry_coord_signals(struct registry *reg, int sigfd);

/* Drops the coordination lock. */
void registry_coord_unlock(struct registry *reg);

/*
 * Reads the lock of workspace (canonical) into e: LOCK_FREE when
 * there is none; LOCK_CORRUPT with e->problem when the lock directory or
 * owner.json is unsafe (symlink, FIFO, foreign, open mode), too large, not a
 * valid document, or names a workspace of another key; LOCK_RETAINED when
 * retained.json is present; else LOCK_HELD. With probe, held and retained
 * owners get a liveness verdict and reason. -1 only for I/O failures.
 */
int registry_get(struct registry *reg, const char *workspace, bool probe,
		 struct lock_entry *e, struct wsl_error *err);

/*
 * The locks of workspace and of each proper ancestor ("/" excluded),
 * nearest first, as registry_get reads them (probe likewise), into
 * *out[0..*n) (lock_entry_free each, then free the array); in one read
 * where the backend can (etcd: one transaction), else one get each; the
 * local backend also reads the chain of every other path of workspace's
 * directory in this mount namespace (wsmounts.h: a bind mount that shows it
 * inside another workspace). Returns 0, or -1 with err as registry_get
 * (WSL_OS when the mount table cannot be read).
 */
int registry_get_chain(struct registry *reg, const char *workspace, bool probe,
		       struct lock_entry **out, size_t *n, struct wsl_error *err);

/*
 * The path under which the lock of ws (canonical) is kept, into root: when
 * the lock on ws was taken through another path to the same directory (a
 * bind mount, a container's mount: found by identity, DESIGN.md section
 * 3), that path; else ws itself. release, recover, reclaim and retain act
 * on root, as the backends key a lock by the path it was taken by. Read
 * without the coordination lock: a lock that changes meanwhile meets the
 * operation's own compare under it. root may be ws itself. Errors as
 * registry_get.
 */
int registry_locate(struct registry *reg, const char *ws, char root[PATH_MAX],
		    struct wsl_error *err);

/*
 * Every lock on a proper ancestor of workspace (nearest first) or below it
 * (through the nest markers of workspace: O(depth + locks below), never
 * O(all locks)); the local backend also every lock that overlaps it
 * through a mount of this namespace (wsmounts.h: a filesystem mounted
 * below it, its directory mounted inside another workspace), by path and
 * by identity, O(mounts that matter x depth). *out is a new array of *n entries; free with
 * lock_overlaps_free. Markers whose lock is gone are skipped.
 */
/*
 * The waiters queued for workspace (canonical) or for a workspace that
 * overlaps it, oldest first, each as a queued lock_entry (queued true,
 * owner.pid and owner.acquired_at its arrival, workspace_root what it
 * waits for, shared its mode): the waiters a `run` of workspace now would
 * stand behind (no barging, DESIGN.md section 5). Read only, without the
 * coordination lock; stopped waiters, which a newcomer passes, are left
 * out. *out is a new array of *n (lock_entry_free each, free it); a
 * backend without a readable queue gives none. 0, or -1 with err.
 */
int registry_queued(struct registry *reg, const char *workspace,
		    struct lock_entry **out, size_t *n, struct wsl_error *err);

int registry_overlaps(struct registry *reg, const char *workspace, bool probe,
		      struct overlap **out, size_t *n, struct wsl_error *err);

/* Outcome of registry_try_acquire. */
enum acquire_result {
	ACQUIRE_DONE = 0,	/* published: the caller holds the lock */
	ACQUIRE_CONFLICT = 1,	/* a lock on the workspace, an ancestor or a
				 * descendant; conflict describes it */
};

/*
 * Under the exclusive coordination lock: checks the workspace of o, its
 * ancestors and its descendants, and when none is locked publishes o as the
 * lock of o->workspace_root. Publishing writes tmp/acq.PID.RAND/owner.json
 * (fsync) and an empty live file, the nest markers below every ancestor
 * (fsync), then renames the staging directory to locks/KEY (renameat2
 * RENAME_NOREPLACE) and fsyncs locks/. With live_fd not NULL the new live
 * file is kept open and exclusively flock(2)ed, its descriptor (O_CLOEXEC) in
 * *live_fd: whoever inherits it keeps the holder live.
 * When several locks conflict, the one reported is the one waiting cannot
 * cure (corrupt, then retained, then dead), else the first live one
 * (lockrules_conflict_keep). dl bounds the wait for the coordination lock
 * (NULL: unbounded); past it, fails with dl->code.
 */
int registry_try_acquire(struct registry *reg, const struct owner *o,
			 const struct registry_deadline *dl, int *live_fd,
			 struct lock_entry *conflict, struct wsl_error *err);

/* Workspaces one acquire or run may take at once. */
#define REGISTRY_MULTI_MAX 16

/*
 * Fails with WSL_USAGE for more than REGISTRY_MULTI_MAX workspaces, when
 * reg's backend cannot take n > 1 workspaces at once, or not shared ones
 * (reg->acquire_shared, the backend without multi_shared: etcd); else
 * returns 0; n of 0 or 1 always passes.
 */
int registry_multi_check(const struct registry *reg, size_t n, struct wsl_error *err);

/*
 * registry_try_acquire for the n owners os[0..n) (one per workspace, the
 * workspaces given in that order, none nesting with another), all or
 * none, in one critical section (local: one hold of the exclusive
 * coordination lock): every workspace is checked, then every lock is
 * published, in order; when a publish fails, the ones before it are
 * removed again. live_fds[0..n) (or NULL) get the live files as live_fd
 * does. A conflict on any of them is reported in *conflict (the one
 * waiting cannot cure first, else the first in argument order) and *which
 * gets its index in os. When waiting was prepared, the caller's queue
 * entry names every workspace, so that it takes its place in each of
 * their queues at once (local_wait.c). A crash between two publishes
 * leaves the first ones as locks of a dead owner (recovery required),
 * the rest free; see local_multi.c. n == 1 is registry_try_acquire.
 */
int registry_try_acquire_multi(struct registry *reg, const struct owner *os, size_t n,
			       const struct registry_deadline *dl, int *live_fds,
			       struct lock_entry *conflict, size_t *which,
			       struct wsl_error *err);

/*
 * Releases the lock of workspace if its owner's token is token: the lock
 * directory is renamed out of locks/ into tmp/ (atomic), then its nest
 * markers and files are removed. No fsync: a release lost to a power cut
 * leaves a lock of a dead owner, never a lost lock. Fails with WSL_NOT_HELD
 * (no lock), WSL_LOCK_CORRUPT, or WSL_OWNERSHIP_LOST when another owner
 * holds it now (err->holder names it; nothing is touched). The released
 * owner is copied to *released when not NULL.
 */
int registry_release(struct registry *reg, const char *workspace,
		     const char *token, struct owner *released,
		     struct wsl_error *err);

/*
 * registry_release for the n workspaces wss[0..n) (n <= REGISTRY_MULTI_MAX)
 * whose owners all have token (a set acquired at once), released[0..n)
 * (or NULL) getting their owners: where the backend can, all or none in
 * one step (etcd: one transaction that compares every lock's exact bytes;
 * any of them not token's: nothing released, with that one's error and
 * err->workspace_root naming it); elsewhere (local) one registry_release
 * each, in order, stopping at the first that fails (the ones before it
 * stay released). n == 1 is registry_release.
 */
int registry_release_multi(struct registry *reg, const char *const *wss, size_t n,
			   const char *token, struct owner *released,
			   struct wsl_error *err);

/*
 * Calls fn for every lock in locks/ (sorted by key), probing liveness when
 * probe. Stops and returns fn's value when it is not 0.
 */
int registry_list(struct registry *reg, bool probe,
		  int (*fn)(const struct lock_entry *e, void *arg), void *arg,
		  struct wsl_error *err);

/* Whether a run looks for an enclosing lock (nest_find) only after its
 * first acquire attempt met a conflict, not before it: true where a read
 * costs a network request (etcd). */
bool registry_nest_on_conflict(const struct registry *reg);

/* Outcome of registry_nest_lock besides 0 (taken) and -1 (error). */
enum {
	NEST_LOCK_BUSY = 1,	/* LOCK_NB: held the other way */
	NEST_LOCK_GONE = 2,	/* the lock of token is not there (any more) */
};

/*
 * Takes the nested-runs file of the lock of workspace whose owner has
 * token (local: locks/KEY/nested, made when missing): LOCK_SH for a run
 * nested under it, which waits while the outer release holds it and then
 * checks the lock is still token's (NEST_LOCK_GONE when it went meanwhile:
 * the nested run must take the normal path); LOCK_EX, or LOCK_EX|LOCK_NB
 * (NEST_LOCK_BUSY while nested runs run), by the outer run and release
 * before they drop the lock. *fd gets the descriptor (O_CLOEXEC; -1 on a
 * backend without such a file, where 0 means nothing to wait for); keep
 * it until the lock is released, then close it (a nested run: flock
 * LOCK_UN first, so that nothing that inherited it holds it).
 */
int registry_nest_lock(struct registry *reg, const char *workspace, const char *token,
		       int op, int *fd, struct wsl_error *err);

/*
 * Starts watching for releases, before the next acquire attempt, so that a
 * release between an attempt and the wait is not missed (local: inotify(7)
 * on locks/ for entries leaving it, and the next attempt that meets a
 * conflict joins the FIFO wait queue; etcd: from the revision of the last
 * read). Returns 0; 1 when the wait starts from what the last attempt read
 * (etcd: the watch replays every change since), so that no release can be
 * missed and the caller need not try again first; or -1 with err when
 * only polling is possible.
 */
int registry_wait_prepare(struct registry *reg, struct wsl_error *err);

/*
 * Waits at most timeout_ms (ms; < 0: no bound) for the conflict the last
 * registry_try_acquire reported to change (local: the waiter queued ahead
 * leaves the queue, or the holder releases, dies or stops being live), or
 * for sigfd (-1: none) to become readable. Returns 1 when sigfd is
 * readable, 0 when something changed or the time is up (the caller tries
 * again either way), -1 with err on failure. A backend that cannot see a
 * holder die (etcd today) wakes at least every WAIT_POLL_MS.
 */
int registry_wait(struct registry *reg, int sigfd, long timeout_ms,
		  struct wsl_error *err);

/* How often registry_wait wakes at least on a backend that is not told of
 * every change (ms). */
#define WAIT_POLL_MS 1000

/*
 * Ends a wait begun with registry_wait_prepare, however it ended (held,
 * given up, a signal): local: leaves the queue, waking the waiter behind.
 * No error; safe to call when nothing was prepared.
 */
void registry_wait_end(struct registry *reg);

/*
 * Keeps o's lock alive where the backend needs it (etcd: the lease).
 * Sets *next_ms to when it must be called again (ms from now; -1: never)
 * and *ttl_ms to how long the lock now lives without another call (ms;
 * -1: forever). Fails with WSL_OWNERSHIP_LOST when the lock is gone (the
 * lease expired) and WSL_BACKEND_UNAVAILABLE when the backend cannot be
 * reached (the caller retries until its own deadline passes).
 */
int registry_keepalive(struct registry *reg, const struct owner *o,
		       long *next_ms, long *ttl_ms, struct wsl_error *err);

/*
 * Watches o's lock for its loss while a keeper keeps it (etcd: a thread
 * watching its lock and liveness keys, each change confirmed by a read;
 * registry_etcd_watch.c). Sets *fd to a descriptor (O_CLOEXEC) that
 * becomes readable when the lock is lost: it then holds one message, the
 * reason (at most 400 bytes, no NUL), then end of file; -1 when
 * the backend has nothing to watch. Returns 0, or -1 with err (WSL_OS).
 * The watch ends with the process.
 */
int registry_watch_own(struct registry *reg, const struct owner *o, int *fd,
		       struct wsl_error *err);

/*
 * Reads the message of a watch from registry_watch_own that became
 * readable, into why (len bytes, NUL-terminated), and closes *fd (set to
 * -1). Returns the message's length in bytes: > 0 the lock is lost (the
 * reason), 0 the watch ended without one, -1 a read error (EINTR retried).
 */
ssize_t registry_watch_read(int *fd, char *why, size_t len);

/*
 * Turns the failure of registry_keepalive for the lock of workspace into
 * the loss of that lock: err (as keepalive filled it) becomes
 * WSL_OWNERSHIP_LOST; when it was not already that (the backend stayed
 * unreachable until the renewal's deadline), its message is kept after
 * "the lease of WORKSPACE could not be renewed before its deadline: ".
 */
void registry_lease_lost(struct wsl_error *err, const char *workspace);

/*
 * The compare-and-swap of recover and reclaim, under the exclusive
 * coordination lock: the lock of workspace must hold exactly x->owner (same
 * key set and values), and that owner must be provably dead (unknown
 * liveness only with x->force; live never). Then a journal line is appended
 * (before the change: a crash between them leaves a line for a change that
 * did not happen, never a change without a line) and the lock is either
 * handed to next in place (owner.json replaced by rename, a fresh live file,
 * retained.json dropped; with live_fd the new live file is held as in
 * registry_try_acquire) or, when next is NULL, removed.
 * A corrupt lock is cleared (and next, if any, published) only when x->raw
 * equals its bytes exactly and x->force is set.
 * Errors: WSL_NOT_HELD (no lock), WSL_INVALID_OWNER (x->owner NULL for a
 * valid lock), WSL_OWNER_MISMATCH (another owner; err->holder is it),
 * WSL_LOCK_CORRUPT, WSL_OWNER_LIVE, WSL_LIVENESS_UNKNOWN,
 * WSL_RECOVERY_REQUIRED (retained, for reclaim). The lock as found is
 * copied to *prior (lock_entry_free it) in every case but I/O failures.
 */
int registry_take_over(struct registry *reg, const char *workspace,
		       const struct registry_expect *x, const struct owner *next,
		       int *live_fd, struct lock_entry *prior,
		       struct wsl_error *err);

/*
 * Marks the lock of workspace retained for recovery, if token is its
 * owner's: writes retained.json (json, a NUL-terminated text) by an
 * exclusive create, fsync and rename inside the lock directory. Errors as
 * registry_release.
 */
int registry_retain(struct registry *reg, const char *workspace,
		    const char *token, const char *json, struct wsl_error *err);

/*
 * The audit journal of a backend that keeps it elsewhere than in the
 * registry directory (etcd: the keys P "journal/", DESIGN.md 5b), as
 * JSON lines, oldest first: *buf (malloc'd, *len bytes, every line ending
 * in '\n'; NULL and 0 when empty). Fails with WSL_USAGE on the local
 * registry (its journal.jsonl is read as a file), else as the backend's
 * reads.
 */
int registry_journal(struct registry *reg, char **buf, size_t *len,
		     struct wsl_error *err);

/*
 * Garbage left by crashes: staging and release directories in tmp/ (every
 * one is garbage while the exclusive coordination lock is held, because
 * they exist only inside it), and nest markers whose lock is gone. Counts
 * them; with remove, also deletes them (the caller holds LOCK_EX).
 */
int registry_garbage(struct registry *reg, bool remove, size_t *staging,
		     size_t *orphan_markers, struct wsl_error *err);

#endif
