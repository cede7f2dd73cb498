/* registry_backend.h - what a registry backend implements (internal to
 * src/: the front end registry.c and the backends include it).
 *
 * Every function has the contract of the registry_* function of the same
 * name in registry.h; registry_open has selected the backend and filled
 * reg->ops. A NULL entry means "nothing to do" (lock, unlock, wait_prepare,
 * keepalive, watch_own, wait_end).
 */
#ifndef WSLOCK_REGISTRY_BACKEND_H
#define WSLOCK_REGISTRY_BACKEND_H

#include "registry.h"
#include "wspath.h"

struct registry_ops {
	const char *name;
	void (*close)(struct registry *reg);
	int (*lock)(struct registry *reg, int op, struct wsl_error *err);
	void (*unlock)(struct registry *reg);
	int (*get)(struct registry *reg, const char *workspace, bool probe,
		   struct lock_entry *e, struct wsl_error *err);
	/* optional: the locks of workspace and of each proper ancestor,
	 * nearest first, at once (out: n entries, lock_entry_free each and
	 * free the array); without it, one get each */
	int (*get_chain)(struct registry *reg, const char *workspace, bool probe,
			 struct lock_entry **out, size_t *n, struct wsl_error *err);
	int (*overlaps)(struct registry *reg, const char *workspace, bool probe,
			struct overlap **out, size_t *n, struct wsl_error *err);
	/* optional: the waiters queued for workspace (registry_queued);
	 * NULL: none are known */
	int (*queued)(struct registry *reg, const char *workspace,
		      struct lock_entry **out, size_t *n, struct wsl_error *err);
	int (*try_acquire)(struct registry *reg, const struct owner *o,
			   const struct registry_deadline *dl, int *live_fd, struct lock_entry *conflict,
			   struct wsl_error *err);
	/* optional: several workspaces at once; NULL: refused (usage) */
	int (*try_acquire_multi)(struct registry *reg, const struct owner *os, size_t n,
				 const struct registry_deadline *dl, int *live_fds,
				 struct lock_entry *conflict, size_t *which,
				 struct wsl_error *err);
	/* try_acquire_multi takes a --shared set too (every lock shared);
	 * false: that is refused (usage) */
	bool multi_shared;
	int (*release)(struct registry *reg, const char *workspace,
		       const char *token, struct owner *released,
		       struct wsl_error *err);
	/* optional: several workspaces at once, all or none; NULL: one
	 * release each (registry_release_multi) */
	int (*release_multi)(struct registry *reg, const char *const *wss, size_t n,
			     const char *token, struct owner *released,
			     struct wsl_error *err);
	int (*list)(struct registry *reg, bool probe,
		    int (*fn)(const struct lock_entry *e, void *arg), void *arg,
		    struct wsl_error *err);
	int (*take_over)(struct registry *reg, const char *workspace,
			 const struct registry_expect *x, const struct owner *next,
			 int *live_fd, struct lock_entry *prior,
			 struct wsl_error *err);
	int (*retain)(struct registry *reg, const char *workspace,
		      const char *token, const char *json, struct wsl_error *err);
	int (*garbage)(struct registry *reg, bool remove, size_t *staging,
		       size_t *orphan_markers, struct wsl_error *err);
	int (*wait_prepare)(struct registry *reg, struct wsl_error *err);
	int (*wait)(struct registry *reg, int sigfd, long timeout_ms,
		    struct wsl_error *err);
	void (*wait_end)(struct registry *reg);
	/* wait sleeps until a change it is told of, a holder's death
	 * included, so it may be called without a bound (timeout_ms < 0);
	 * false: registry_wait bounds such a call to WAIT_POLL_MS. */
	bool wait_until_change;
	/* A run looks for the lock it may be nested in only when its first
	 * attempt meets a conflict (an acquire that succeeds proves that no
	 * lock encloses it): reading before acquiring costs a request (etcd)
	 * or a walk of both spaces' ancestors (local); false: nest_find
	 * first. */
	bool nest_on_conflict;
	int (*keepalive)(struct registry *reg, const struct owner *o,
			 long *next_ms, long *ttl_ms, struct wsl_error *err);
	int (*watch_own)(struct registry *reg, const struct owner *o, int *fd,
			 struct wsl_error *err);
	int (*nest_lock)(struct registry *reg, const char *workspace,
			 const char *token, int op, int *fd, struct wsl_error *err);
	int (*journal)(struct registry *reg, char **buf, size_t *len,
		       struct wsl_error *err);
};

/* The local on-disk registry (registry_local.c, with local_open.c,
 * local_wait.c, local_markers.c and local_garbage.c; registry_local.h). */
extern const struct registry_ops registry_local_ops;

/* The etcd backend (registry_etcd.c): opens reg from cfg. */
int etcd_registry_open(struct registry *reg, const struct registry_config *cfg,
		       struct wsl_error *err);

#endif
