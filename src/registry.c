/* registry.c - the registry contract's front end: backend selection,
 * workspace resolution, and dispatch to the backend's operations. */
#include "registry_backend.h"
#include "wspath.h"
#include "wsmounts.h"
#include "fsx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The default registry when neither -d nor WSLOCK_DIR names one (DESIGN §5):
 * $STATE_DIRECTORY/wslock (systemd's StateDirectory=, a colon-separated list:
 * the first), else ${XDG_STATE_HOME:-$HOME/.local/state}/wslock; relative
 * values are ignored, as the XDG spec says. root (if not NULL) gets the
 * directory that must already exist for the registry to be made below it:
 * the StateDirectory, $HOME, or $XDG_STATE_HOME's parent (the spec has
 * XDG_STATE_HOME itself made when missing). */
static int default_base(char base[PATH_MAX], char root[PATH_MAX], struct wsl_error *err)
{
	const char *env;
	int n, r = 0;

	if ((env = getenv("STATE_DIRECTORY")) != NULL && env[0] == '/') {
		n = snprintf(base, PATH_MAX, "%.*s/wslock", (int)strcspn(env, ":"), env);
		if (root != NULL)
			r = snprintf(root, PATH_MAX, "%.*s", (int)strcspn(env, ":"), env);
	} else if ((env = getenv("XDG_STATE_HOME")) != NULL && env[0] == '/') {
		n = snprintf(base, PATH_MAX, "%s/wslock", env);
		if (root != NULL) {
			char *slash;

			r = snprintf(root, PATH_MAX, "%s", env);
			while (r > 1 && root[r - 1] == '/')
				root[--r] = '\0';
			slash = strrchr(root, '/');
			if (slash == root)
				slash[1] = '\0';
			else if (slash != NULL)
				*slash = '\0';
		}
	} else if ((env = getenv("HOME")) != NULL && env[0] == '/') {
		n = snprintf(base, PATH_MAX, "%s/.local/state/wslock", env);
		if (root != NULL)
			r = snprintf(root, PATH_MAX, "%s", env);
	} else
		return wsl_error_set(err, WSL_USAGE,
				     "no registry directory: none of -d, WSLOCK_DIR, STATE_DIRECTORY (systemd's StateDirectory=), XDG_STATE_HOME or HOME is set to an absolute path");
	if (n < 0 || n >= PATH_MAX || r < 0 || r >= PATH_MAX)
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "registry path is longer than PATH_MAX");
	return 0;
}

int registry_default_path(const char *dir, char out[PATH_MAX],
			  struct wsl_error *err)
{
	char base[PATH_MAX], cwd[PATH_MAX];
	const char *env;
	int n;

	if (dir != NULL && dir[0] == '\0')
		/* -d "$UNSET" must not quietly mean the default registry:
		 * two jobs would then lock in two registries. */
		return wsl_error_set(err, WSL_USAGE,
				     "-d/--lock-dir needs a directory, not an empty string (unset it to use the default)");
	if (dir == NULL) {
		env = getenv("WSLOCK_DIR");
		if (env != NULL && env[0] != '\0') {
			/* Relative, it would name another registry in every
			 * working directory: two holders of one workspace. */
			if (env[0] != '/')
				return wsl_error_set(err, WSL_USAGE,
						     "WSLOCK_DIR must be an absolute path, not '%s'", env);
			dir = env;
		} else {
			if (default_base(base, NULL, err) != 0)
				return -1;
			dir = base;
		}
	}
	if (dir[0] == '/') {
		n = snprintf(out, PATH_MAX, "%s", dir);
	} else {
		if (getcwd(cwd, sizeof(cwd)) == NULL)
			return wsl_error_errno(err, WSL_OS, errno,
					       "cannot get the working directory");
		n = snprintf(out, PATH_MAX, "%s/%s", cwd, dir);
	}
	if (n < 0 || n >= PATH_MAX)
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "registry path is longer than PATH_MAX");
	/* Trailing slashes would make lstat follow a symlink. */
	while (n > 1 && out[n - 1] == '/')
		out[--n] = '\0';
	return 0;
}

/* The mount-table half of keeping ws and the registry apart
 * (wsmounts_apart, DESIGN.md sections 3 and 5): a filesystem mounted
 * below ws, or a bind mount of a directory inside it, reaches the registry
 * by a path that neither the path nor the identity comparison sees. */
static int apart_by_mounts(const char *ws, const char *reg_path, const char *reg_real,
			   struct wsl_error *err)
{
	int where;

	if (reg_path[0] == '\0' || reg_real[0] == '\0')
		return 0;
	where = wsmounts_apart(ws, reg_real, err);
	if (where < 0)
		return -1;
	if (where == WSMOUNTS_INSIDE)
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "registry %s lies inside workspace %s (through a filesystem mounted inside it); choose a registry outside it (-d or WSLOCK_DIR)",
				     reg_path, ws);
	if (where == WSMOUNTS_AROUND)
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "workspace %s lies inside the registry %s (through a mount)",
				     ws, reg_path);
	return 0;
}

int registry_workspace(const struct registry *reg, const char *arg,
		       bool allow_missing, char out[PATH_MAX],
		       struct wsl_error *err)
{
	if (wspath_resolve(arg, allow_missing, out, err) != 0)
		return -1;
	if (wspath_check_apart(out, reg->path, reg->real, err) != 0)
		return -1;
	return apart_by_mounts(out, reg->path, reg->real, err);
}

int registry_open(struct registry *reg, const struct registry_config *cfg,
		  bool create, struct wsl_error *err)
{
	const char *backend = cfg->backend, *env_ep;
	char path[PATH_MAX];

	if (backend == NULL || backend[0] == '\0')
		backend = getenv("WSLOCK_BACKEND");
	if (backend == NULL || backend[0] == '\0') {
		/* etcd settings without a backend chosen: falling back to the
		 * local registry silently would let every machine lock its own
		 * (DESIGN 5b): the backend must be named. */
		env_ep = getenv("WSLOCK_ETCD_ENDPOINTS");
		if (cfg->etcd_endpoints == NULL && env_ep != NULL && env_ep[0] != '\0')
			return wsl_error_set(err, WSL_USAGE,
					     "WSLOCK_ETCD_ENDPOINTS is set but no backend is chosen: "
					     "use --backend etcd (or WSLOCK_BACKEND=etcd) for etcd, or "
					     "WSLOCK_BACKEND=local to use the local registry on purpose");
	}
	if (backend == NULL || backend[0] == '\0' || strcmp(backend, "local") == 0) {
		if (cfg->etcd_endpoints != NULL)
			return wsl_error_set(err, WSL_USAGE,
					     "--etcd-endpoints is given but the backend is local: "
					     "add --backend etcd (or WSLOCK_BACKEND=etcd), or drop "
					     "--etcd-endpoints to use the local registry");
		const char *wd = getenv("WSLOCK_DIR");
		char root[PATH_MAX], unused[PATH_MAX];
		bool named = cfg->lock_dir != NULL || (wd != NULL && wd[0] != '\0');

		/* A registry named by -d or WSLOCK_DIR is made only where its
		 * parent exists: a typo or a volume not mounted must not
		 * quietly make a second, empty registry beside the real one. */
		if (registry_default_path(cfg->lock_dir, path, err) != 0 ||
		    (!named && default_base(unused, root, err) != 0) ||
		    local_open(reg, path, cfg->workspace, create, named ? NULL : root,
			       err) != 0)
			return -1;
		reg->acquire_shared = cfg->shared;
		return 0;
	}
	if (strcmp(backend, "etcd") == 0) {
		memset(reg, 0, sizeof(*reg));
		if (etcd_registry_open(reg, cfg, err) != 0)
			return -1;
		reg->acquire_shared = cfg->shared;
		return 0;
	}
	return wsl_error_set(err, WSL_USAGE, "unknown backend '%s' (local or etcd)", backend);
}

int registry_open_for(struct registry *reg, struct registry_config *cfg,
		      const char *arg, bool allow_missing, bool create,
		      char ws[PATH_MAX], struct wsl_error *err)
{
	struct registry none;

	memset(&none, 0, sizeof(none));
	if (registry_workspace(&none, arg, allow_missing, ws, err) != 0)
		return -1;
	cfg->workspace = ws;
	if (registry_open(reg, cfg, create, err) != 0)
		return -1;
	/* Resolved once; now kept apart from the registry as opened. */
	if (wspath_check_apart(ws, reg->path, reg->real, err) != 0 ||
	    apart_by_mounts(ws, reg->path, reg->real, err) != 0) {
		registry_close(reg);
		return -1;
	}
	return 0;
}

const char *registry_backend(const struct registry *reg)
{
	return reg->ops != NULL ? reg->ops->name : "none";
}

void registry_close(struct registry *reg)
{
	if (reg->ops != NULL)
		reg->ops->close(reg);
	reg->ops = NULL;
	reg->backend = NULL;
}

int registry_coord_lock(struct registry *reg, int op, struct wsl_error *err)
{
	return reg->ops->lock != NULL ? reg->ops->lock(reg, op, err) : 0;
}

void registry_coord_bound(struct registry *reg, bool nonblock, long long deadline_ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	reg->coord_bounded = nonblock || deadline_ms >= 0;
	reg->coord_bound_ms = nonblock ?
		(long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 : deadline_ms;
}

void registry_coord_signals(struct registry *reg, int sigfd)
{
	reg->coord_has_sigfd = sigfd >= 0;
	reg->coord_sigfd = sigfd;
}

void registry_coord_unlock(struct registry *reg)
{
	if (reg->ops->unlock != NULL)
		reg->ops->unlock(reg);
}

int registry_get(struct registry *reg, const char *workspace, bool probe,
		 struct lock_entry *e, struct wsl_error *err)
{
	return reg->ops->get(reg, workspace, probe, e, err);
}

struct chain_ctx {
	struct registry *reg;
	bool probe;
	struct lock_entry *es;
	size_t n, cap;
	struct wsl_error *err;
};

static int chain_one(const char *ws, void *arg)
{
	struct chain_ctx *c = arg;

	if (c->n == c->cap) {
		size_t cap = c->cap == 0 ? 16 : c->cap * 2;
		struct lock_entry *p = realloc(c->es, cap * sizeof(*p));
		if (p == NULL)
			return wsl_error_errno(c->err, WSL_OS, ENOMEM, "out of memory");
		c->es = p;
		c->cap = cap;
	}
	if (registry_get(c->reg, ws, c->probe, &c->es[c->n], c->err) != 0)
		return -1;
	c->n++;
	return 0;
}

/* The chain of ws and of each other path of its directory in this mount
 * namespace (wsmounts.h: a bind mount showing it inside another
 * workspace, whose holder's command then runs inside it). */
static int chain_all(struct chain_ctx *c, const char *workspace)
{
	struct wsmounts m;
	size_t i;
	int rc = 0;

	if (chain_one(workspace, c) != 0 ||
	    wspath_for_each_ancestor(workspace, chain_one, c) != 0 ||
	    wsmounts_find(workspace, false, &m, c->err) != 0)
		return -1;
	for (i = 0; rc == 0 && i < m.n_paths; i++)
		if (m.paths[i].alias)
			rc = chain_one(m.paths[i].path, c) != 0 ||
			     wspath_for_each_ancestor(m.paths[i].path, chain_one, c) != 0 ? -1 : 0;
	wsmounts_free(&m);
	return rc;
}

int registry_get_chain(struct registry *reg, const char *workspace, bool probe,
		       struct lock_entry **out, size_t *n, struct wsl_error *err)
{
	struct chain_ctx c = { reg, probe, NULL, 0, 0, err };

	*out = NULL;
	*n = 0;
	if (reg->ops->get_chain != NULL)
		return reg->ops->get_chain(reg, workspace, probe, out, n, err);
	if (chain_all(&c, workspace) != 0) {
		while (c.n > 0)
			lock_entry_free(&c.es[--c.n]);
		free(c.es);
		return -1;
	}
	*out = c.es;
	*n = c.n;
	return 0;
}

int registry_locate(struct registry *reg, const char *ws, char root[PATH_MAX],
		    struct wsl_error *err)
{
	struct lock_entry e;
	bool other;

	if (registry_get(reg, ws, false, &e, err) != 0)
		return -1;
	other = e.state != LOCK_FREE && e.workspace_root[0] != '\0' &&
		strcmp(e.workspace_root, ws) != 0;
	if (other)	/* root may be ws itself */
		snprintf(root, PATH_MAX, "%s", e.workspace_root);
	else if (root != ws)
		snprintf(root, PATH_MAX, "%s", ws);
	lock_entry_free(&e);
	return 0;
}

int registry_overlaps(struct registry *reg, const char *workspace, bool probe,
		      struct overlap **out, size_t *n, struct wsl_error *err)
{
	return reg->ops->overlaps(reg, workspace, probe, out, n, err);
}

int registry_queued(struct registry *reg, const char *workspace,
		    struct lock_entry **out, size_t *n, struct wsl_error *err)
{
	*out = NULL;
	*n = 0;
	return reg->ops->queued != NULL ? reg->ops->queued(reg, workspace, out, n, err) : 0;
}

int registry_try_acquire(struct registry *reg, const struct owner *o,
			 const struct registry_deadline *dl, int *live_fd,
			 struct lock_entry *conflict, struct wsl_error *err)
{
	return reg->ops->try_acquire(reg, o, dl, live_fd, conflict, err);
}

int registry_multi_check(const struct registry *reg, size_t n, struct wsl_error *err)
{
	if (n > REGISTRY_MULTI_MAX)
		return wsl_error_set(err, WSL_USAGE, "at most %d workspaces at once, not %zu",
				     REGISTRY_MULTI_MAX, n);
	if (n > 1 && reg->acquire_shared && !reg->ops->multi_shared)
		return wsl_error_set(err, WSL_USAGE,
				     "--shared with several workspaces at once is not supported by the %s backend yet; take them exclusively, or one --shared lock at a time",
				     reg->ops->name);
	if (n > 1 && reg->ops->try_acquire_multi == NULL)
		return wsl_error_set(err, WSL_USAGE,
				     "several workspaces at once are not supported by the %s backend yet; lock them one at a time (nested runs), or use the local backend",
				     reg->ops->name);
	return 0;
}

int registry_try_acquire_multi(struct registry *reg, const struct owner *os, size_t n,
			       const struct registry_deadline *dl, int *live_fds,
			       struct lock_entry *conflict, size_t *which,
			       struct wsl_error *err)
{
	*which = 0;
	if (n == 1)
		return registry_try_acquire(reg, os, dl, live_fds, conflict, err);
	memset(conflict, 0, sizeof(*conflict));
	conflict->state = LOCK_FREE;
	if (registry_multi_check(reg, n, err) != 0)
		return -1;
	return reg->ops->try_acquire_multi(reg, os, n, dl, live_fds, conflict, which, err);
}

int registry_release(struct registry *reg, const char *workspace,
		     const char *token, struct owner *released,
		     struct wsl_error *err)
{
	return reg->ops->release(reg, workspace, token, released, err);
}

int registry_release_multi(struct registry *reg, const char *const *wss, size_t n,
			   const char *token, struct owner *released,
			   struct wsl_error *err)
{
	if (n == 1 || reg->ops->release_multi == NULL) {
		for (size_t i = 0; i < n; i++)
			if (registry_release(reg, wss[i], token,
					     released != NULL ? &released[i] : NULL, err) != 0) {
				wsl_error_detail(&err->workspace_root, wss[i]);
				return -1;
			}
		return 0;
	}
	return reg->ops->release_multi(reg, wss, n, token, released, err);
}

int registry_list(struct registry *reg, bool probe,
		  int (*fn)(const struct lock_entry *e, void *arg), void *arg,
		  struct wsl_error *err)
{
	return reg->ops->list(reg, probe, fn, arg, err);
}

int registry_take_over(struct registry *reg, const char *workspace,
		       const struct registry_expect *x, const struct owner *next,
		       int *live_fd, struct lock_entry *prior,
		       struct wsl_error *err)
{
	return reg->ops->take_over(reg, workspace, x, next, live_fd, prior, err);
}

int registry_retain(struct registry *reg, const char *workspace,
		    const char *token, const char *json, struct wsl_error *err)
{
	return reg->ops->retain(reg, workspace, token, json, err);
}

int registry_garbage(struct registry *reg, bool remove, size_t *staging,
		     size_t *orphan_markers, struct wsl_error *err)
{
	return reg->ops->garbage(reg, remove, staging, orphan_markers, err);
}

int registry_journal(struct registry *reg, char **buf, size_t *len,
		     struct wsl_error *err)
{
	*buf = NULL;
	*len = 0;
	if (reg->ops->journal == NULL)
		return wsl_error_set(err, WSL_USAGE,
				     "the %s backend keeps its journal in its directory",
				     registry_backend(reg));
	return reg->ops->journal(reg, buf, len, err);
}

int registry_wait_prepare(struct registry *reg, struct wsl_error *err)
{
	return reg->ops->wait_prepare != NULL ? reg->ops->wait_prepare(reg, err) : 0;
}

int registry_wait(struct registry *reg, int sigfd, long timeout_ms,
		  struct wsl_error *err)
{
	if (!reg->ops->wait_until_change && (timeout_ms < 0 || timeout_ms > WAIT_POLL_MS))
		timeout_ms = WAIT_POLL_MS;
	return reg->ops->wait(reg, sigfd, timeout_ms, err);
}

void registry_wait_end(struct registry *reg)
{
	if (reg->ops != NULL && reg->ops->wait_end != NULL)
		reg->ops->wait_end(reg);
}

int registry_keepalive(struct registry *reg, const struct owner *o,
		       long *next_ms, long *ttl_ms, struct wsl_error *err)
{
	*next_ms = -1;
	*ttl_ms = -1;
	return reg->ops->keepalive != NULL ?
		reg->ops->keepalive(reg, o, next_ms, ttl_ms, err) : 0;
}

int registry_watch_own(struct registry *reg, const struct owner *o, int *fd,
		       struct wsl_error *err)
{
	*fd = -1;
	return reg->ops->watch_own != NULL ? reg->ops->watch_own(reg, o, fd, err) : 0;
}

ssize_t registry_watch_read(int *fd, char *why, size_t len)
{
	ssize_t n;

	do
		n = read(*fd, why, len - 1);
	while (n < 0 && errno == EINTR);
	fsx_close(*fd);
	*fd = -1;
	why[n > 0 ? n : 0] = '\0';
	return n;
}

void registry_lease_lost(struct wsl_error *err, const char *workspace)
{
	if (err->code != WSL_OWNERSHIP_LOST)
		wsl_error_prefix(err, WSL_OWNERSHIP_LOST,
				 "the lease of %s could not be renewed before its deadline",
				 workspace);
}

bool registry_nest_on_conflict(const struct registry *reg)
{
	return reg->ops != NULL && reg->ops->nest_on_conflict;
}

int registry_nest_lock(struct registry *reg, const char *workspace, const char *token,
		       int op, int *fd, struct wsl_error *err)
{
	*fd = -1;
	return reg->ops->nest_lock != NULL ?
		reg->ops->nest_lock(reg, workspace, token, op, fd, err) : 0;
}
