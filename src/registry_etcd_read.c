/* registry_etcd_read.c - reading locks from etcd: a workspace's four keys
 * (see registry_etcd.c) into a lock entry, in chunks at one revision each,
 * the liveness a lease key says, and the backend's get, overlaps and list.
 */
#include "registry_etcd.h"
#include "etcd.h"
#include "platform.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <jansson.h>

/* The liveness of a lock whose keeper renews a liveness lease (DESIGN.md
 * section 4, step 2): its live key exists while the lease does. */
static void probe_lease(struct lock_entry *e, const struct etcd_kv *lease_kv,
			const struct etcd_kv *live_kv)
{
	long long lease = 0, delay = 0;
	bool for_pid = false;

	if (!lease_doc_names(lease_kv, e->owner.token, &lease, &delay, &for_pid)) {
		e->liveness = LIVENESS_UNKNOWN;
		snprintf(e->reason, sizeof(e->reason),
			 "the etcd lease key of this lock names another holder");
	} else if (live_kv != NULL &&
		   same_bytes(live_kv->value, live_kv->value_len, e->owner.token,
			      strlen(e->owner.token))) {
		e->liveness = LIVENESS_LIVE;
		/* A run's lease: its command runs, as a held kernel lock on
		 * live says on disk (release refuses it). */
		e->live_held = !for_pid;
		if (for_pid)
			snprintf(e->reason, sizeof(e->reason),
				 "its liveness lease %llx is alive: the keeper of acquire's holder pid %ld renews it",
				 (unsigned long long)lease, (long)e->owner.pid);
		else
			snprintf(e->reason, sizeof(e->reason),
				 "its liveness lease %llx is alive: its keeper renews it",
				 (unsigned long long)lease);
	} else if (for_pid) {
		e->liveness = LIVENESS_DEAD;
		snprintf(e->reason, sizeof(e->reason),
			 "its liveness lease %llx expired or was revoked: the keeper of acquire's holder pid %ld stopped renewing it (the pid exited, or the keeper was killed or cut off from etcd)",
			 (unsigned long long)lease, (long)e->owner.pid);
	} else {
		e->liveness = LIVENESS_DEAD;
		snprintf(e->reason, sizeof(e->reason),
			 "its liveness lease %llx expired or was revoked (expired: not renewed for its TTL and the %llds lock-delay after it); its keeper, if it ran, stopped the command by the TTL, but one stopped or killed along with its wslock stops nothing: the command may still run",
			 (unsigned long long)lease, delay);
	}
}

int fill_entry(const char *path, const struct etcd_kv *const kv[KINDS],
		      bool probe, struct lock_entry *e, struct kv_meta *m,
		      struct wsl_error *err)
{
	const struct etcd_kv *lock = kv[K_LOCK], *ret = kv[K_RETAINED];
	char why[256];

	memset(e, 0, sizeof(*e));
	memset(m, 0, sizeof(*m));
	e->state = LOCK_FREE;
	crypto_path_key(path, e->key);
	if (lock == NULL)
		return 0;
	m->create_rev = lock->create_revision;
	m->lease = lock->lease;
	if (kv[K_LEASE] != NULL) {
		long long delay;
		/* whoever it names: a release revokes what it removes */
		lease_doc_names(kv[K_LEASE], "", &m->live_lease, &delay, &m->lease_for_pid);
	}
	snprintf(e->lock_path, sizeof(e->lock_path), "%s", lock->key);
	e->etcd_key = true;
	e->raw = dup_bytes(lock->value, lock->value_len);
	if (e->raw == NULL)
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	e->raw_len = lock->value_len;
	if (!owner_path_canonical(path)) {
		e->state = LOCK_CORRUPT;
		snprintf(e->problem, sizeof(e->problem),
			 "the etcd key %s does not name a canonical workspace path",
			 lock->key);
		return 0;
	}
	snprintf(e->workspace_root, sizeof(e->workspace_root), "%s", path);
	if (shared_marker(e->raw, e->raw_len)) {
		e->shared = true;	/* its holders: shared_load */
		e->state = LOCK_HELD;
		return 0;
	}
	if (e->raw_len > OWNER_DOC_MAX) {
		e->state = LOCK_CORRUPT;
		snprintf(e->problem, sizeof(e->problem),
			 "the owner document is larger than %d bytes", OWNER_DOC_MAX);
		return 0;
	}
	if (owner_parse(e->raw, e->raw_len, &e->owner, why, sizeof(why)) != 0) {
		e->state = LOCK_CORRUPT;
		snprintf(e->problem, sizeof(e->problem), "%s", why);
		return 0;
	}
	if (strcmp(e->owner.workspace_root, path) != 0) {
		e->state = LOCK_CORRUPT;
		snprintf(e->problem, sizeof(e->problem),
			 "the owner document names workspace %.200s, not its key's",
			 e->owner.workspace_root);
		return 0;
	}
	e->has_owner = true;
	e->state = LOCK_HELD;
	if (ret != NULL) {
		e->state = LOCK_RETAINED;
		e->retained = dup_bytes(ret->value, ret->value_len);
		if (e->retained == NULL)
			return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	}
	if (probe) {
		if (m->lease != 0) {
			/* 0.1: the owner key itself was bound to the lease, so
			 * it exists only while its holder renews the lease. */
			e->liveness = LIVENESS_LIVE;
			e->live_held = true;	/* only 0.1's run did this */
			snprintf(e->reason, sizeof(e->reason),
				 "etcd lease %llx is held: its holder keeps renewing it (the lock would be gone had it expired)",
				 (unsigned long long)m->lease);
		} else if (kv[K_LEASE] != NULL) {
			probe_lease(e, kv[K_LEASE], kv[K_LIVE]);
		} else {
			e->liveness = liveness_probe(-1, &e->owner, e->reason,
						     sizeof(e->reason));
		}
		e->probed = true;
	}
	return 0;
}

/* The KINDS range reads of each of paths[0..cnt) into ops[] (their keys
 * in keys[]). */
static int entry_ops(struct etcd_state *s, const char *const *paths, size_t cnt,
		     struct etcd_op *ops, struct key *keys, struct wsl_error *err)
{
	size_t j, k;

	for (j = 0; j < cnt; j++)
		for (k = 0; k < KINDS; k++) {
			struct key *kk = &keys[KINDS * j + k];
			if (key_make(s, kind_names[k], paths[j], kk, err) != 0)
				return -1;
			memset(&ops[KINDS * j + k], 0, sizeof(ops[0]));
			ops[KINDS * j + k].type = ETCD_OP_RANGE;
			ops[KINDS * j + k].key = kk->b;
			ops[KINDS * j + k].key_len = kk->len;
		}
	return 0;
}

/* e[] and m[] of paths[0..cnt) from the results r[] of their entry_ops. */
static int entry_fill(struct etcd_state *s, const char *const *paths, size_t cnt,
		      const struct etcd_op_result *r, bool probe, struct lock_entry *e,
		      struct kv_meta *m, struct wsl_error *err)
{
	size_t j, k;
	int rc = 0;

	for (j = 0; j < cnt && rc == 0; j++) {
		const struct etcd_kv *kv[KINDS];
		for (k = 0; k < KINDS; k++)
			kv[k] = r[KINDS * j + k].n_kvs > 0 ? &r[KINDS * j + k].kvs[0] : NULL;
		rc = fill_entry(paths[j], kv, probe, &e[j], &m[j], err);
		if (rc == 0 && e[j].shared)
			rc = shared_load(s, paths[j], probe, &e[j], err);
	}
	return rc;
}

/* Reads the locks of paths[0..n) (lock and retained keys, one consistent
 * revision per chunk) into e[] and m[]. */
int read_entries(struct etcd_state *s, const char *const *paths, size_t n,
		 bool probe, struct lock_entry *e, struct kv_meta *m,
		 struct wsl_error *err)
{
	struct etcd_op ops[KINDS * READ_CHUNK];
	struct key *keys;
	size_t i;
	int rc = 0;

	for (i = 0; i < n; i++)
		memset(&e[i], 0, sizeof(e[i]));
	keys = calloc(KINDS * READ_CHUNK, sizeof(*keys));
	if (keys == NULL)
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	for (i = 0; i < n && rc == 0; i += READ_CHUNK) {
		size_t cnt = n - i < READ_CHUNK ? n - i : READ_CHUNK;
		struct etcd_txn t = { 0 };
		struct etcd_txn_result res;
		bool ok;

		if (entry_ops(s, paths + i, cnt, ops, keys, err) != 0) {
			rc = -1;
			break;
		}
		t.success = ops;
		t.n_success = KINDS * cnt;
		if (etcd_txn(s->c, &t, &ok, &res, err) != 0) {
			rc = -1;
			break;
		}
		note_rev(s, res.revision);
		if (res.n_ops != KINDS * cnt) {
			etcd_txn_result_free(&res);
			rc = wsl_error_set(err, WSL_IO, "etcd answered %zu reads, not %zu",
					   res.n_ops, KINDS * cnt);
			break;
		}
		rc = entry_fill(s, paths + i, cnt, res.ops, probe, e + i, m + i, err);
		etcd_txn_result_free(&res);
	}
	free(keys);
	if (rc != 0)
		for (i = 0; i < n; i++)
			lock_entry_free(&e[i]);
	return rc;
}

int read_entry(struct etcd_state *s, const char *path, bool probe,
		      struct lock_entry *e, struct kv_meta *m, struct wsl_error *err)
{
	return read_entries(s, &path, 1, probe, e, m, err);
}

/* In the sorted range result r of keys "P kind …" (plen bytes before the
 * path), the key for path (n bytes), from cursor *at on; NULL when none. */
static const struct etcd_kv *match_path(const struct etcd_op_result *r, size_t plen,
					const char *path, size_t n, size_t *at)
{
	while (*at < r->n_kvs) {
		const struct etcd_kv *q = &r->kvs[*at];
		size_t qn = q->key_len > plen ? q->key_len - plen : 0;
		int c = memcmp(q->key + plen, path, qn < n ? qn : n);
		if (c == 0)
			c = qn < n ? -1 : qn > n ? 1 : 0;
		if (c > 0)
			return NULL;
		(*at)++;
		if (c == 0)
			return q;
	}
	return NULL;
}

/* What below_ops builds: the KINDS ranges of one read below a path. */
struct below {
	struct key k[KINDS];
	char end[KINDS][KEY_MAX];
	size_t plen[KINDS];
};

/* The KINDS ranges [P kind under "/", prefix end) into ops[]. */
static int below_ops(struct etcd_state *s, const char *under, struct below *b,
		     struct etcd_op *ops, struct wsl_error *err)
{
	size_t j;

	memset(ops, 0, KINDS * sizeof(*ops));
	for (j = 0; j < KINDS; j++) {
		struct key *k = &b->k[j];

		if (key_make(s, kind_names[j], under, k, err) != 0 ||
		    k->len + 1 >= sizeof(k->b))
			return -1;
		b->plen[j] = s->prefix_len + strlen(kind_names[j]);
		k->b[k->len++] = '/';
		ops[j].type = ETCD_OP_RANGE;
		ops[j].key = k->b;
		ops[j].key_len = k->len;
		ops[j].range_end = b->end[j];
		ops[j].range_end_len = etcd_prefix_end(k->b, k->len, b->end[j]);
	}
	return 0;
}

/* Calls fn(e, arg) for every lock in the results r[0..KINDS) of
 * below_ops(b), in key order. */
static int below_each(struct etcd_state *s, const struct below *b,
		      const struct etcd_op_result *r, bool probe,
		      int (*fn)(struct lock_entry *e, void *arg), void *arg,
		      struct wsl_error *err)
{
	const size_t *plen = b->plen;
	char path[PATH_MAX + 1];
	size_t i, j, at[KINDS] = { 0 };
	int rc = 0;

	for (i = 0; i < r[K_LOCK].n_kvs && rc == 0; i++) {
		const struct etcd_kv *kv[KINDS];
		struct lock_entry e;
		struct kv_meta m;
		size_t n;

		kv[K_LOCK] = &r[K_LOCK].kvs[i];
		if (kv[K_LOCK]->key_len <= plen[K_LOCK])
			continue;
		n = kv[K_LOCK]->key_len - plen[K_LOCK];
		if (n >= sizeof(path) || memchr(kv[K_LOCK]->key + plen[K_LOCK], '\0', n))
			continue;
		memcpy(path, kv[K_LOCK]->key + plen[K_LOCK], n);
		path[n] = '\0';
		/* Every range comes sorted by the same path suffix: merge. */
		for (j = 1; j < KINDS; j++)
			kv[j] = match_path(&r[j], plen[j], path, n, &at[j]);
		rc = fill_entry(path, kv, probe, &e, &m, err);
		if (rc == 0 && e.shared)
			rc = shared_load(s, path, probe, &e, err);
		if (rc == 0)
			rc = fn(&e, arg);
		lock_entry_free(&e);
	}
	return rc;
}

/* Calls fn(e, arg) for every lock whose key lies in [P "lock" under "/",
 * prefix end), in key order, from one consistent read; under "" lists all. */
static int read_below(struct etcd_state *s, const char *under, bool probe,
		      int (*fn)(struct lock_entry *e, void *arg), void *arg,
		      struct wsl_error *err)
{
	struct below b;
	struct etcd_op ops[KINDS];
	struct etcd_txn t = { 0 };
	struct etcd_txn_result res;
	bool ok;
	int rc;

	if (below_ops(s, under, &b, ops, err) != 0)
		return -1;
	t.success = ops;
	t.n_success = KINDS;
	if (etcd_txn(s->c, &t, &ok, &res, err) != 0)
		return -1;
	note_rev(s, res.revision);
	if (res.n_ops != KINDS) {
		etcd_txn_result_free(&res);
		return wsl_error_set(err, WSL_IO, "etcd answered %zu reads, not %d",
				     res.n_ops, KINDS);
	}
	rc = below_each(s, &b, res.ops, probe, fn, arg, err);
	etcd_txn_result_free(&res);
	return rc;
}

/* read_entries of paths[0..n) and read_below of under in one transaction
 * (one request, one revision) when they fit in one (READ_CHUNK workspaces
 * and the KINDS ranges below: within etcd's 128 operations); else the
 * two. */
static int read_entries_below(struct etcd_state *s, const char *const *paths, size_t n,
			      bool probe, struct lock_entry *e, struct kv_meta *m,
			      const char *under,
			      int (*fn)(struct lock_entry *e, void *arg), void *arg,
			      struct wsl_error *err)
{
	struct etcd_op ops[KINDS * (READ_CHUNK + 1)];
	struct etcd_txn t = { 0 };
	struct etcd_txn_result res;
	struct below b;
	struct key *keys;
	size_t i;
	bool ok;
	int rc = -1;

	if (n > READ_CHUNK) {
		if (read_entries(s, paths, n, probe, e, m, err) != 0)
			return -1;
		if (read_below(s, under, probe, fn, arg, err) == 0)
			return 0;
		for (i = 0; i < n; i++)
			lock_entry_free(&e[i]);
		return -1;
	}
	for (i = 0; i < n; i++)
		memset(&e[i], 0, sizeof(e[i]));
	keys = calloc(KINDS * n + 1, sizeof(*keys));
	if (keys == NULL)
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	if (entry_ops(s, paths, n, ops, keys, err) != 0 ||
	    below_ops(s, under, &b, ops + KINDS * n, err) != 0)
		goto out;
	t.success = ops;
	t.n_success = KINDS * (n + 1);
	if (etcd_txn(s->c, &t, &ok, &res, err) != 0)
		goto out;
	note_rev(s, res.revision);
	if (res.n_ops != KINDS * (n + 1))
		wsl_error_set(err, WSL_IO, "etcd answered %zu reads, not %zu",
			      res.n_ops, KINDS * (n + 1));
	else if (entry_fill(s, paths, n, res.ops, probe, e, m, err) == 0 &&
		 below_each(s, &b, res.ops + KINDS * n, probe, fn, arg, err) == 0)
		rc = 0;
	etcd_txn_result_free(&res);
out:
	free(keys);
	if (rc != 0)
		for (i = 0; i < n; i++)
			lock_entry_free(&e[i]);
	return rc;
}

/* ---- get, overlaps, list --------------------------------------------- */

int etcd_get(struct registry *reg, const char *workspace, bool probe,
		    struct lock_entry *e, struct wsl_error *err)
{
	struct kv_meta m;

	etcd_bound_requests(reg, NULL);
	if (read_entry(state(reg), workspace, probe, e, &m, err) != 0)
		return -1;
	if (e->state == LOCK_CORRUPT)
		snprintf(e->workspace_root, sizeof(e->workspace_root), "%s", workspace);
	return 0;
}

struct ov_ctx {
	struct overlap *items;
	size_t n, cap;
	const char **paths;
	size_t np;
	struct wsl_error *err;
};

static struct lock_entry *ov_push(struct ov_ctx *c, bool ancestor)
{
	return lock_overlap_push(&c->items, &c->n, &c->cap, ancestor, c->err);
}

static int ov_descendant(struct lock_entry *e, void *arg)
{
	struct ov_ctx *c = arg;
	struct lock_entry *slot;

	if (e->state == LOCK_FREE)
		return 0;
	slot = ov_push(c, false);
	if (slot == NULL)
		return -1;
	*slot = *e;
	memset(e, 0, sizeof(*e));	/* the slot owns raw and retained now */
	return 0;
}

static int collect_ancestor(const char *ancestor, void *arg)
{
	struct ov_ctx *c = arg;
	char *d = strdup(ancestor);

	if (d == NULL)
		return wsl_error_errno(c->err, WSL_OS, ENOMEM, "out of memory");
	c->paths[c->np++] = d;
	return 0;
}

size_t depth_of(const char *path)
{
	size_t n = 0;

	for (; *path != '\0'; path++)
		n += *path == '/';
	return n;
}

int etcd_overlaps(struct registry *reg, const char *workspace, bool probe,
			 struct overlap **out, size_t *n, struct wsl_error *err)
{
	return etcd_read_around(reg, workspace, probe, NULL, NULL, out, n, err);
}

int etcd_read_around(struct registry *reg, const char *workspace, bool probe,
		     struct lock_entry *self, struct kv_meta *self_m,
		     struct overlap **out, size_t *n, struct wsl_error *err)
{
	struct etcd_state *s = state(reg);
	struct ov_ctx c = { 0 };
	struct lock_entry *es = NULL;
	struct kv_meta *ms = NULL;
	struct overlap *desc = NULL;
	size_t i, nd, first = self != NULL ? 1 : 0, depth = depth_of(workspace);
	int rc = -1;

	*out = NULL;
	*n = 0;
	c.err = err;
	c.paths = calloc(depth + 2, sizeof(*c.paths));
	es = calloc(depth + 2, sizeof(*es));
	ms = calloc(depth + 2, sizeof(*ms));
	if (c.paths == NULL || es == NULL || ms == NULL) {
		wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
		goto out;
	}
	/* the workspace itself, its ancestors and what lies below it: one
	 * transaction (the descendants come first into c.items) */
	if ((self != NULL && collect_ancestor(workspace, &c) != 0) ||
	    wspath_for_each_ancestor(workspace, collect_ancestor, &c) != 0 ||
	    read_entries_below(s, c.paths, c.np, probe, es, ms, workspace, ov_descendant,
			       &c, err) != 0)
		goto out;
	nd = c.n;
	if (self != NULL) {
		*self = es[0];
		*self_m = ms[0];
		memset(&es[0], 0, sizeof(es[0]));
		if (self->state == LOCK_CORRUPT)
			snprintf(self->workspace_root, sizeof(self->workspace_root), "%s",
				 workspace);
	}
	for (i = first; i < c.np; i++) {
		struct lock_entry *slot;
		if (es[i].state == LOCK_FREE)
			continue;
		slot = ov_push(&c, true);
		if (slot == NULL)
			goto out;
		*slot = es[i];
		memset(&es[i], 0, sizeof(es[i]));
	}
	/* ancestors first, then descendants, as the two reads gave them */
	if (nd > 0 && c.n > nd) {
		desc = malloc(nd * sizeof(*desc));
		if (desc == NULL) {
			wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
			if (self != NULL)
				lock_entry_free(self);
			goto out;
		}
		memcpy(desc, c.items, nd * sizeof(*desc));
		memmove(c.items, c.items + nd, (c.n - nd) * sizeof(*desc));
		memcpy(c.items + (c.n - nd), desc, nd * sizeof(*desc));
		free(desc);
	}
	*out = c.items;
	*n = c.n;
	c.items = NULL;
	c.n = 0;
	rc = 0;
out:
	lock_overlaps_free(c.items, c.n);
	for (i = 0; i < c.np; i++) {
		lock_entry_free(&es[i]);
		free((char *)c.paths[i]);
	}
	free(c.paths);
	free(es);
	free(ms);
	return rc;
}

/* registry_ops.get_chain: workspace and its ancestors in one read (a
 * run's nesting check is then one request, not one per level). */
int etcd_get_chain(struct registry *reg, const char *workspace, bool probe,
		   struct lock_entry **out, size_t *n, struct wsl_error *err)
{
	struct ov_ctx c = { 0 };
	struct kv_meta *ms;
	size_t i, depth = depth_of(workspace);
	int rc = -1;

	*out = NULL;
	*n = 0;
	c.err = err;
	etcd_bound_requests(reg, NULL);
	c.paths = calloc(depth + 1, sizeof(*c.paths));
	ms = calloc(depth + 1, sizeof(*ms));
	*out = calloc(depth + 1, sizeof(**out));
	if (c.paths == NULL || ms == NULL || *out == NULL) {
		wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
		goto out;
	}
	if (collect_ancestor(workspace, &c) != 0 ||
	    wspath_for_each_ancestor(workspace, collect_ancestor, &c) != 0 ||
	    read_entries(state(reg), c.paths, c.np, probe, *out, ms, err) != 0)
		goto out;
	for (i = 0; i < c.np; i++)
		if ((*out)[i].state == LOCK_CORRUPT)
			snprintf((*out)[i].workspace_root, sizeof((*out)[i].workspace_root),
				 "%s", c.paths[i]);
	*n = c.np;
	rc = 0;
out:
	if (rc != 0) {
		free(*out);
		*out = NULL;
	}
	for (i = 0; i < c.np; i++)
		free((char *)c.paths[i]);
	free(c.paths);
	free(ms);
	return rc;
}

struct list_ctx {
	int (*fn)(const struct lock_entry *e, void *arg);
	void *arg;
};

static int list_one(struct lock_entry *e, void *arg)
{
	struct list_ctx *l = arg;

	return e->state == LOCK_FREE ? 0 : l->fn(e, l->arg);
}

int etcd_journal(struct registry *reg, char **buf, size_t *len,
		 struct wsl_error *err)
{
	struct etcd_state *s = state(reg);
	struct etcd_kv *kvs = NULL;
	struct key k;
	char end[KEY_MAX];
	size_t n = 0, i, total = 0, at = 0;

	*buf = NULL;
	*len = 0;
	if (key_make(s, "journal/", "", &k, err) != 0)
		return -1;
	/* keys sort by their time: oldest first */
	if (etcd_range(s->c, k.b, k.len, end, etcd_prefix_end(k.b, k.len, end), 0,
		       &kvs, &n, NULL, err) != 0)
		return -1;
	for (i = 0; i < n; i++)
		total += kvs[i].value_len + 1;
	if (n > 0) {
		*buf = malloc(total + 1);
		if (*buf == NULL) {
			etcd_kvs_free(kvs, n);
			return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
		}
		for (i = 0; i < n; i++) {
			memcpy(*buf + at, kvs[i].value, kvs[i].value_len);
			at += kvs[i].value_len;
			if (at == 0 || (*buf)[at - 1] != '\n')
				(*buf)[at++] = '\n';
		}
		(*buf)[at] = '\0';
	}
	*len = at;
	etcd_kvs_free(kvs, n);
	return 0;
}

int etcd_list(struct registry *reg, bool probe,
		     int (*fn)(const struct lock_entry *e, void *arg), void *arg,
		     struct wsl_error *err)
{
	struct list_ctx l = { fn, arg };

	etcd_bound_requests(reg, NULL);
	/* "lock" "" "/": every workspace path starts with '/'. */
	return read_below(state(reg), "", probe, list_one, &l, err);
}

