/* registry_etcd.c - the etcd backend (DESIGN.md section 5b).
 *
 * Keys, below the prefix P (default "/wslock/"), W a canonical workspace
 * path (so its first byte is '/'):
 *
 *   P "lock" W       the lock of W: exactly the owner document bytes that the
 *                    local backend writes to owner.json (one line and '\n').
 *                    Never bound to a lease (0.2): a crash leaves it, as on
 *                    disk. (0.1 bound it to the holder's lease while `run`
 *                    kept it alive; such a key still reads as live while it
 *                    exists.)
 *   P "lease" W      for a holder kept alive by a keeper (`run`, `recover
 *                    -- CMD`): {"token":…,"lease":"<hex id>","ttl_s":N,
 *                    "lock_delay_s":N}, not bound to a lease: it says that
 *                    the lock's liveness is the liveness key's.
 *   P "live" W       the holder's token, bound to its liveness lease,
 *                    granted for TTL + lock-delay; the holder works to a
 *                    deadline of TTL from the send time of its last
 *                    successful renewal, so it has stopped its command
 *                    lock-delay before this key can vanish. Lease key
 *                    present and live key gone: the holder is dead.
 *   P "retained" W   retained.json of a lock kept for recovery.
 *   P "journal/" T   one audit line per takeover; T is the time in
 *                    microseconds, zero-padded, and random hex: sortable and
 *                    unique.
 *
 * Invariants:
 *  - Acquiring is one transaction: the key of W, the key of every proper
 *    ancestor of W and every key in [P "lock" W "/", prefix end) have
 *    create revision 0 (do not exist), then W's key is put. etcd serialises
 *    transactions, so no interleaving lets an ancestor and a descendant be
 *    held at once.
 *  - Every change to an existing lock (release, retain, take-over) is one
 *    transaction comparing VALUE with the exact bytes read and CREATE with
 *    their create revision: the compare-and-swap. The bytes hold a random
 *    token, so equal bytes name the same holder.
 *  - A holder's fencing token is the revision of the transaction that gave
 *    it the key: the create revision for an acquire; for a take-over the
 *    revision of the put (a put keeps the create revision, so the new owner
 *    gets the transaction's revision, greater than any earlier fence).
 *
 * A crash of a `run` holder leaves its lock, dead once the liveness lease
 * has expired: the next job gets "recovery required", as on disk; an
 * acquire's lock stays until release or recover, as the local one does. A write whose outcome is unknown (the endpoint failed
 * after the request was sent) is settled by reading back: our token in the
 * stored bytes (or our journal or retained key) means it was applied.
 */
#include "registry_backend.h"
#include "journal.h"
#include "etcd.h"
#include "platform.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#define PREFIX_MAX 256			/* bytes of the key prefix */
#define KEY_MAX (PREFIX_MAX + 16 + PATH_MAX)
#define DEPTH_MAX 100			/* ancestors compared in one txn
					 * (etcd allows 128 operations) */
#define READ_CHUNK 30			/* workspaces read per txn (4 ranges each) */
#define KINDS 4				/* keys per workspace: see the top */
#define WAIT_SLICE_MS 1000		/* a watch cannot be interrupted: slices */

struct etcd_state {
	struct etcd_client *c;
	char prefix[PREFIX_MAX + 1];
	size_t prefix_len;
	long long ttl_s;		/* the holder's TTL: its deadline, s */
	long long delay_s;		/* lock-delay: the lease lasts ttl + this */
	long long lease;		/* granted lease, 0: none */
	long long lease_sent_ms;	/* CLOCK_MONOTONIC send time of its
					 * last successful grant or renewal */
	bool lease_used;		/* a lock's live key is bound to it */
	pid_t pid;			/* the process that opened c: a keeper
					 * (a forked child) opens its own */
	char endpoints[ETCD_MAX_ENDPOINTS * 1100];
	long timeout_ms;
	const char *cacert, *cert, *key;	/* TLS files, or NULL */
	char user[256];				/* "": no etcd auth */
	char password[256];
	char lease_token[WSL_TOKEN_HEX + 1];	/* that lock's owner */
	char *held_value;		/* the bytes and create revision of the */
	size_t held_len;		/* lock this process acquired (token */
	long long held_create;		/* held_token): released without a read */
	char held_token[WSL_TOKEN_HEX + 1];
	char lease_ws[PATH_MAX];
	long long last_rev;		/* header revision of the last read */
};

/* What a lock entry does not say about its key. */
struct kv_meta {
	long long create_rev;
	long long lease;
};

struct key {
	char b[KEY_MAX];
	size_t len;
};

static struct etcd_state *state(struct registry *reg)
{
	return reg->backend;
}

/* P kind path into k; -1 when too long. */
static int key_make(const struct etcd_state *s, const char *kind,
		    const char *path, struct key *k, struct wsl_error *err)
{
	int n = snprintf(k->b, sizeof(k->b), "%s%s%s", s->prefix, kind, path);

	if (n < 0 || (size_t)n >= sizeof(k->b))
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "etcd key for %s is too long", path);
	k->len = (size_t)n;
	return 0;
}

static void note_rev(struct etcd_state *s, long long rev)
{
	if (rev > s->last_rev)
		s->last_rev = rev;
}

/* The stored form of an owner document: owner_format and '\n', *len bytes
 * (no NUL). NULL when it cannot be formatted. */
static char *owner_bytes(const struct owner *o, size_t *len)
{
	char *text = owner_format(o, false);
	size_t n;

	if (text == NULL)
		return NULL;
	n = strlen(text);
	text[n] = '\n';		/* owner_format left room: the NUL */
	*len = n + 1;
	return text;
}

static char *dup_bytes(const char *p, size_t n)
{
	char *d = malloc(n + 1);

	if (d != NULL) {
		memcpy(d, p, n);
		d[n] = '\0';
	}
	return d;
}

static bool same_bytes(const char *a, size_t alen, const char *b, size_t blen)
{
	return a != NULL && b != NULL && alen == blen && memcmp(a, b, alen) == 0;
}

enum { K_LOCK, K_RETAINED, K_LEASE, K_LIVE };
static const char *const kind_names[KINDS] = { "lock", "retained", "lease", "live" };

/* The lease key's value for token's lock on lease (see the top). */
static char *lease_doc(const struct etcd_state *s, const char *token, long long lease)
{
	char id[32];
	json_t *o = json_object();
	char *text;

	snprintf(id, sizeof(id), "%llx", (unsigned long long)lease);
	json_object_set_new(o, "token", json_string(token));
	json_object_set_new(o, "lease", json_string(id));
	json_object_set_new(o, "ttl_s", json_integer(s->ttl_s));
	json_object_set_new(o, "lock_delay_s", json_integer(s->delay_s));
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return text;
}

/* True when the lease key kv names token; its lease id goes to *lease. */
static bool lease_doc_names(const struct etcd_kv *kv, const char *token,
			    long long *lease, long long *delay_s)
{
	json_t *o = json_loadb(kv->value, kv->value_len, 0, NULL);
	const char *t = json_string_value(json_object_get(o, "token"));
	const char *id = json_string_value(json_object_get(o, "lease"));
	bool ok = t != NULL && strcmp(t, token) == 0;

	*lease = id != NULL ? (long long)strtoull(id, NULL, 16) : 0;
	*delay_s = json_integer_value(json_object_get(o, "lock_delay_s"));
	json_decref(o);
	return ok;
}

/* The liveness of a lock whose keeper renews a liveness lease (DESIGN.md
 * section 4, step 2): its live key exists while the lease does. */
static void probe_lease(struct lock_entry *e, const struct etcd_kv *lease_kv,
			const struct etcd_kv *live_kv)
{
	long long lease = 0, delay = 0;

	if (!lease_doc_names(lease_kv, e->owner.token, &lease, &delay)) {
		e->liveness = LIVENESS_UNKNOWN;
		snprintf(e->reason, sizeof(e->reason),
			 "the etcd lease key of this lock names another holder");
	} else if (live_kv != NULL &&
		   same_bytes(live_kv->value, live_kv->value_len, e->owner.token,
			      strlen(e->owner.token))) {
		e->liveness = LIVENESS_LIVE;
		snprintf(e->reason, sizeof(e->reason),
			 "its liveness lease %llx is alive: its keeper renews it",
			 (unsigned long long)lease);
	} else {
		e->liveness = LIVENESS_DEAD;
		snprintf(e->reason, sizeof(e->reason),
			 "its liveness lease %llx expired or was revoked: its holder stopped renewing it, and stopped its command at least %llds (the lock-delay) before the lease ran out",
			 (unsigned long long)lease, delay);
	}
}

/* Fills e (and *m) for workspace path from its keys kv[K_*] (NULL:
 * absent). */
static int fill_entry(const char *path, const struct etcd_kv *const kv[KINDS],
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
	snprintf(e->lock_path, sizeof(e->lock_path), "%s", lock->key);
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

/* Reads the locks of paths[0..n) (lock and retained keys, one consistent
 * revision per chunk) into e[] and m[]. */
static int read_entries(struct etcd_state *s, const char *const *paths, size_t n,
			bool probe, struct lock_entry *e, struct kv_meta *m,
			struct wsl_error *err)
{
	struct etcd_op ops[KINDS * READ_CHUNK];
	struct key *keys;
	size_t i, j, k;
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

		memset(ops, 0, sizeof(ops));
		for (j = 0; j < cnt && rc == 0; j++)
			for (k = 0; k < KINDS; k++) {
				struct key *kk = &keys[KINDS * j + k];
				if (key_make(s, kind_names[k], paths[i + j], kk, err) != 0) {
					rc = -1;
					break;
				}
				ops[KINDS * j + k].type = ETCD_OP_RANGE;
				ops[KINDS * j + k].key = kk->b;
				ops[KINDS * j + k].key_len = kk->len;
			}
		if (rc != 0)
			break;
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
		for (j = 0; j < cnt && rc == 0; j++) {
			const struct etcd_kv *kv[KINDS];
			for (k = 0; k < KINDS; k++) {
				const struct etcd_op_result *r = &res.ops[KINDS * j + k];
				kv[k] = r->n_kvs > 0 ? &r->kvs[0] : NULL;
			}
			rc = fill_entry(paths[i + j], kv, probe, &e[i + j], &m[i + j], err);
		}
		etcd_txn_result_free(&res);
	}
	free(keys);
	if (rc != 0)
		for (i = 0; i < n; i++)
			lock_entry_free(&e[i]);
	return rc;
}

static int read_entry(struct etcd_state *s, const char *path, bool probe,
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

/* Calls fn(e, arg) for every lock whose key lies in [P "lock" under "/",
 * prefix end), in key order, from one consistent read; under "" lists all. */
static int read_below(struct etcd_state *s, const char *under, bool probe,
		      int (*fn)(struct lock_entry *e, void *arg), void *arg,
		      struct wsl_error *err)
{
	struct key k[KINDS];
	char end[KINDS][KEY_MAX];
	struct etcd_op ops[KINDS];
	struct etcd_txn t = { 0 };
	struct etcd_txn_result res;
	char path[PATH_MAX + 1];
	size_t i, j, at[KINDS] = { 0 }, plen[KINDS];
	bool ok;
	int rc = 0;

	memset(ops, 0, sizeof(ops));
	for (j = 0; j < KINDS; j++) {
		if (key_make(s, kind_names[j], under, &k[j], err) != 0 ||
		    k[j].len + 1 >= sizeof(k[j].b))
			return -1;
		plen[j] = s->prefix_len + strlen(kind_names[j]);
		k[j].b[k[j].len++] = '/';
		ops[j].type = ETCD_OP_RANGE;
		ops[j].key = k[j].b;
		ops[j].key_len = k[j].len;
		ops[j].range_end = end[j];
		ops[j].range_end_len = etcd_prefix_end(k[j].b, k[j].len, end[j]);
	}
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
	for (i = 0; i < res.ops[K_LOCK].n_kvs && rc == 0; i++) {
		const struct etcd_kv *kv[KINDS];
		struct lock_entry e;
		struct kv_meta m;
		size_t n;

		kv[K_LOCK] = &res.ops[K_LOCK].kvs[i];
		if (kv[K_LOCK]->key_len <= plen[K_LOCK])
			continue;
		n = kv[K_LOCK]->key_len - plen[K_LOCK];
		if (n >= sizeof(path) || memchr(kv[K_LOCK]->key + plen[K_LOCK], '\0', n))
			continue;
		memcpy(path, kv[K_LOCK]->key + plen[K_LOCK], n);
		path[n] = '\0';
		/* Every range comes sorted by the same path suffix: merge. */
		for (j = 1; j < KINDS; j++)
			kv[j] = match_path(&res.ops[j], plen[j], path, n, &at[j]);
		rc = fill_entry(path, kv, probe, &e, &m, err);
		if (rc == 0)
			rc = fn(&e, arg);
		lock_entry_free(&e);
	}
	etcd_txn_result_free(&res);
	return rc;
}

/* ---- get, overlaps, list --------------------------------------------- */

static int etcd_get(struct registry *reg, const char *workspace, bool probe,
		    struct lock_entry *e, struct wsl_error *err)
{
	struct kv_meta m;

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
	return registry_overlap_push(&c->items, &c->n, &c->cap, ancestor, c->err);
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

static size_t depth_of(const char *path)
{
	size_t n = 0;

	for (; *path != '\0'; path++)
		n += *path == '/';
	return n;
}

static int etcd_overlaps(struct registry *reg, const char *workspace, bool probe,
			 struct overlap **out, size_t *n, struct wsl_error *err)
{
	struct etcd_state *s = state(reg);
	struct ov_ctx c = { 0 };
	struct lock_entry *es = NULL;
	struct kv_meta *ms = NULL;
	size_t i, depth = depth_of(workspace);
	int rc = -1;

	*out = NULL;
	*n = 0;
	c.err = err;
	c.paths = calloc(depth + 1, sizeof(*c.paths));
	es = calloc(depth + 1, sizeof(*es));
	ms = calloc(depth + 1, sizeof(*ms));
	if (c.paths == NULL || es == NULL || ms == NULL) {
		wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
		goto out;
	}
	if (wspath_for_each_ancestor(workspace, collect_ancestor, &c) != 0 ||
	    read_entries(s, c.paths, c.np, probe, es, ms, err) != 0)
		goto out;
	for (i = 0; i < c.np; i++) {
		struct lock_entry *slot;
		if (es[i].state == LOCK_FREE)
			continue;
		slot = ov_push(&c, true);
		if (slot == NULL)
			goto out;
		*slot = es[i];
		memset(&es[i], 0, sizeof(es[i]));
	}
	if (read_below(s, workspace, probe, ov_descendant, &c, err) != 0)
		goto out;
	*out = c.items;
	*n = c.n;
	c.items = NULL;
	c.n = 0;
	rc = 0;
out:
	registry_overlaps_free(c.items, c.n);
	for (i = 0; i < c.np; i++) {
		lock_entry_free(&es[i]);
		free((char *)c.paths[i]);
	}
	free(c.paths);
	free(es);
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

static int etcd_list(struct registry *reg, bool probe,
		     int (*fn)(const struct lock_entry *e, void *arg), void *arg,
		     struct wsl_error *err)
{
	struct list_ctx l = { fn, arg };

	/* "lock" "" "/": every workspace path starts with '/'. */
	return read_below(state(reg), "", probe, list_one, &l, err);
}

/* ---- acquire ---------------------------------------------------------- */

static bool outcome_unknown(const struct wsl_error *err)
{
	return err->code == WSL_BACKEND_UNAVAILABLE && err->outcome_unknown;
}

/* A liveness lease (TTL + lock-delay) for a holder that a keeper keeps
 * alive; kept across attempts, and renewed before it is used after a wait
 * so that the holder's deadline counts from a recent send. */
static int lease_ready(struct etcd_state *s, struct wsl_error *err)
{
	long long now = platform_mono_ms(), ttl = 0;

	if (s->lease != 0 && !s->lease_used) {
		if (now - s->lease_sent_ms < s->ttl_s * 1000 / 3)
			return 0;
		if (etcd_lease_keepalive(s->c, s->lease, &ttl, err) == 0 && ttl > 0) {
			s->lease_sent_ms = now;
			return 0;
		}
		wsl_error_clear(err);
	}
	s->lease = 0;
	s->lease_used = false;
	if (etcd_lease_grant(s->c, s->ttl_s + s->delay_s, &s->lease, NULL, err) != 0)
		return -1;
	s->lease_sent_ms = now;
	return 0;
}

static void lease_bind(struct registry *reg, const struct owner *o)
{
	struct etcd_state *s = state(reg);

	s->lease_used = true;
	snprintf(s->lease_token, sizeof(s->lease_token), "%s", o->token);
	snprintf(s->lease_ws, sizeof(s->lease_ws), "%s", o->workspace_root);
}

/* Revokes the lease bound to token's lock (it no longer is: released,
 * retained or lost). */
static void lease_drop(struct etcd_state *s, const char *token)
{
	struct wsl_error ignore = { 0 };

	if (s->lease == 0 || !s->lease_used || strcmp(s->lease_token, token) != 0)
		return;
	etcd_lease_revoke(s->c, s->lease, &ignore);
	wsl_error_clear(&ignore);
	s->lease = 0;
	s->lease_used = false;
	s->lease_token[0] = '\0';
}

/* Remembers the lock just acquired (o's bytes value, create revision
 * create), so that its release needs no read first. */
static void held_note(struct etcd_state *s, const struct owner *o,
		      const char *value, size_t len, long long create)
{
	free(s->held_value);
	s->held_value = dup_bytes(value, len);
	s->held_len = len;
	s->held_create = create;
	snprintf(s->held_token, sizeof(s->held_token), "%s", o->token);
}

static void held_forget(struct etcd_state *s)
{
	free(s->held_value);
	s->held_value = NULL;
	s->held_token[0] = '\0';
}

/* The operations that give o's lock its liveness keys (keeper: the lease
 * key and the live key on the lease) or remove any (no keeper), into
 * ops[0..2); *doc is the lease key's value to free. */
static int liveness_ops(struct etcd_state *s, const struct owner *o, bool keeper,
			const struct key *lease_k, const struct key *live_k,
			struct etcd_op ops[2], char **doc, struct wsl_error *err)
{
	memset(ops, 0, 2 * sizeof(*ops));
	*doc = NULL;
	ops[0].key = lease_k->b;
	ops[0].key_len = lease_k->len;
	ops[1].key = live_k->b;
	ops[1].key_len = live_k->len;
	if (!keeper) {
		ops[0].type = ops[1].type = ETCD_OP_DELETE;
		return 0;
	}
	*doc = lease_doc(s, o->token, s->lease);
	if (*doc == NULL)
		return wsl_error_set(err, WSL_INTERNAL, "cannot format the lease key");
	ops[0].type = ops[1].type = ETCD_OP_PUT;
	ops[0].value = *doc;
	ops[0].value_len = strlen(*doc);
	ops[1].value = o->token;
	ops[1].value_len = strlen(o->token);
	ops[1].lease = s->lease;
	return 0;
}

/* After a failed compare: the conflicting lock ranked as the local backend
 * ranks it, or LOCK_FREE when none is there any more. *mine is set when
 * the lock of the workspace itself holds our bytes (a put that reported
 * failure but was applied). */
static int find_conflict(struct registry *reg, const struct owner *o,
			 const char *value, size_t value_len,
			 struct lock_entry *conflict, struct kv_meta *self_m,
			 bool *mine, struct wsl_error *err)
{
	struct lock_entry self;
	struct overlap *ov = NULL;
	size_t n = 0, i;

	*mine = false;
	if (read_entry(state(reg), o->workspace_root, true, &self, self_m, err) != 0)
		return -1;
	if (same_bytes(self.raw, self.raw_len, value, value_len)) {
		*mine = true;
		lock_entry_free(&self);
		return 0;
	}
	if (self.state == LOCK_CORRUPT)
		snprintf(self.workspace_root, sizeof(self.workspace_root), "%s",
			 o->workspace_root);
	if (self.state != LOCK_FREE)
		lockrules_conflict_keep(conflict, &self);
	else
		lock_entry_free(&self);
	if (etcd_overlaps(reg, o->workspace_root, true, &ov, &n, err) != 0)
		return -1;
	for (i = 0; i < n; i++)
		lockrules_conflict_keep(conflict, &ov[i].entry);
	registry_overlaps_free(ov, n);
	return 0;
}

static int etcd_try_acquire(struct registry *reg, const struct owner *o,
			    const struct registry_deadline *dl, int *live_fd, struct lock_entry *conflict,
			    struct wsl_error *err)
{
	struct etcd_state *s = state(reg);
	const char *ws = o->workspace_root;
	size_t depth = depth_of(ws), nc = 0, value_len = 0, i;
	struct etcd_compare *cmp = NULL;
	struct key *keys = NULL, self, ret, lease_k, live_k;
	char dend[KEY_MAX];
	struct etcd_op ops[4];
	struct etcd_txn t = { 0 };
	char *value = NULL, *doc = NULL;
	int attempt, rc = -1;

	memset(conflict, 0, sizeof(*conflict));
	conflict->state = LOCK_FREE;
	if (depth > DEPTH_MAX)
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "workspace %s is more than %d directories deep: too deep for one etcd transaction",
				     ws, DEPTH_MAX);
	value = owner_bytes(o, &value_len);
	cmp = calloc(depth + 2, sizeof(*cmp));
	keys = calloc(depth + 2, sizeof(*keys));
	if (value == NULL || cmp == NULL || keys == NULL) {
		wsl_error_set(err, WSL_INTERNAL, "cannot format the owner document");
		goto out;
	}
	if (key_make(s, "lock", ws, &self, err) != 0 ||
	    key_make(s, "retained", ws, &ret, err) != 0 ||
	    key_make(s, "lease", ws, &lease_k, err) != 0 ||
	    key_make(s, "live", ws, &live_k, err) != 0)
		goto out;
	/* The workspace itself, then every proper ancestor ("/" excluded:
	 * it is never a workspace), then everything below it. */
	{
		char buf[PATH_MAX];
		char *slash;

		cmp[nc].key = self.b;
		cmp[nc].key_len = self.len;
		nc++;
		snprintf(buf, sizeof(buf), "%s", ws);
		while ((slash = strrchr(buf, '/')) != NULL && slash != buf) {
			*slash = '\0';
			if (key_make(s, "lock", buf, &keys[nc], err) != 0)
				goto out;
			cmp[nc].key = keys[nc].b;
			cmp[nc].key_len = keys[nc].len;
			nc++;
		}
		keys[nc] = self;
		if (keys[nc].len + 1 >= sizeof(keys[nc].b)) {
			wsl_error_set(err, WSL_UNSAFE_PATH, "etcd key for %s is too long", ws);
			goto out;
		}
		keys[nc].b[keys[nc].len++] = '/';
		cmp[nc].key = keys[nc].b;
		cmp[nc].key_len = keys[nc].len;
		cmp[nc].range_end = dend;
		cmp[nc].range_end_len = etcd_prefix_end(keys[nc].b, keys[nc].len, dend);
		nc++;
	}
	for (i = 0; i < nc; i++) {
		cmp[i].target = ETCD_TARGET_CREATE;
		cmp[i].cmp = ETCD_CMP_EQUAL;
		cmp[i].number = 0;
	}
	if (live_fd != NULL && lease_ready(s, err) != 0)
		goto out;
	memset(ops, 0, sizeof(ops));
	/* The owner key on no lease: a crash leaves it (DESIGN.md 5b). */
	ops[0].type = ETCD_OP_PUT;
	ops[0].key = self.b;
	ops[0].key_len = self.len;
	ops[0].value = value;
	ops[0].value_len = value_len;
	/* A retained key never outlives its lock; drop any left by hand. */
	ops[1].type = ETCD_OP_DELETE;
	ops[1].key = ret.b;
	ops[1].key_len = ret.len;
	if (liveness_ops(s, o, live_fd != NULL, &lease_k, &live_k, &ops[2], &doc, err) != 0)
		goto out;
	t.compare = cmp;
	t.n_compare = nc;
	t.success = ops;
	t.n_success = 4;

	for (attempt = 0; attempt < 20; attempt++) {
		struct etcd_txn_result res;
		struct kv_meta m;
		bool ok, mine;

		if (etcd_txn(s->c, &t, &ok, &res, err) != 0) {
			struct lock_entry e;

			if (!outcome_unknown(err))
				goto out;
			/* Our bytes (our token) stored: our put won. */
			if (read_entry(s, ws, false, &e, &m, err) != 0)
				goto out;
			mine = same_bytes(e.raw, e.raw_len, value, value_len);
			lock_entry_free(&e);
			if (mine) {
				wsl_error_clear(err);
				reg->fence = m.create_rev;
				break;
			}
			wsl_error_clear(err);
			continue;	/* not applied (or not yet): the compares make a retry safe */
		}
		note_rev(s, res.revision);
		if (ok) {
			reg->fence = res.revision;
			etcd_txn_result_free(&res);
			break;
		}
		etcd_txn_result_free(&res);
		if (find_conflict(reg, o, value, value_len, conflict, &m, &mine, err) != 0) {
			lock_entry_free(conflict);
			goto out;
		}
		if (mine) {
			reg->fence = m.create_rev;
			break;
		}
		if (conflict->state != LOCK_FREE) {
			rc = ACQUIRE_CONFLICT;
			goto out;
		}
		/* Released between the compare and the read: try again. */
	}
	if (attempt == 20) {
		wsl_error_set(err, WSL_BACKEND_UNAVAILABLE,
			      "the etcd keys around %s kept changing; gave up after %d attempts",
			      ws, attempt);
		goto out;
	}
	if (live_fd != NULL) {
		lease_bind(reg, o);
		*live_fd = -1;
	}
	held_note(s, o, value, value_len, reg->fence);
	rc = ACQUIRE_DONE;
out:
	free(doc);
	free(value);
	free(cmp);
	free(keys);
	return rc;
}

/* ---- release, retain -------------------------------------------------- */

/* The compare-and-swap guard of a lock read as e/m. */
static void guard(struct etcd_compare cmp[2], const struct key *k,
		  const struct lock_entry *e, const struct kv_meta *m)
{
	memset(cmp, 0, 2 * sizeof(*cmp));
	cmp[0].target = ETCD_TARGET_VALUE;
	cmp[0].cmp = ETCD_CMP_EQUAL;
	cmp[0].key = k->b;
	cmp[0].key_len = k->len;
	cmp[0].value = e->raw;
	cmp[0].value_len = e->raw_len;
	cmp[1].target = ETCD_TARGET_CREATE;
	cmp[1].cmp = ETCD_CMP_EQUAL;
	cmp[1].key = k->b;
	cmp[1].key_len = k->len;
	cmp[1].number = m->create_rev;
}

static int etcd_release(struct registry *reg, const char *workspace,
			const char *token, struct owner *released,
			struct wsl_error *err)
{
	struct etcd_state *s = state(reg);
	struct etcd_compare cmp[2];
	struct etcd_op ops[KINDS];
	struct etcd_txn t = { 0 };
	struct lock_entry e;
	struct kv_meta m;
	struct key k[KINDS];
	size_t j;
	int attempt, rc = -1;

	for (j = 0; j < KINDS; j++)
		if (key_make(s, kind_names[j], workspace, &k[j], err) != 0)
			return -1;
	memset(ops, 0, sizeof(ops));
	for (j = 0; j < KINDS; j++) {
		ops[j].type = ETCD_OP_DELETE;
		ops[j].key = k[j].b;
		ops[j].key_len = k[j].len;
	}
	t.compare = cmp;
	t.n_compare = 2;
	t.success = ops;
	t.n_success = KINDS;
	if (released == NULL && s->held_value != NULL && strcmp(s->held_token, token) == 0) {
		/* Our own lock, as we wrote it: the compare-and-swap needs no
		 * read first. A compare that fails goes the long way. */
		struct lock_entry he = { 0 };
		struct kv_meta hm = { 0 };
		bool ok = false;

		he.raw = s->held_value;
		he.raw_len = s->held_len;
		hm.create_rev = s->held_create;
		guard(cmp, &k[K_LOCK], &he, &hm);
		if (etcd_txn(s->c, &t, &ok, NULL, err) != 0) {
			if (!outcome_unknown(err))
				return -1;
			wsl_error_clear(err);
		} else if (ok) {
			lease_drop(s, token);
			held_forget(s);
			return 0;
		}
	}
	for (attempt = 0; attempt < 10; attempt++) {
		bool ok;

		if (read_entry(s, workspace, false, &e, &m, err) != 0)
			return -1;
		if (lockrules_check_release(workspace, token, &e, err) != 0)
			goto out;
		guard(cmp, &k[K_LOCK], &e, &m);
		if (etcd_txn(s->c, &t, &ok, NULL, err) != 0) {
			struct lock_entry now;
			struct kv_meta nm;
			bool gone;

			if (!outcome_unknown(err))
				goto out;
			/* Settled by reading back: our bytes gone means done. */
			if (read_entry(s, workspace, false, &now, &nm, err) != 0)
				goto out;
			gone = !same_bytes(now.raw, now.raw_len, e.raw, e.raw_len);
			lock_entry_free(&now);
			if (!gone) {
				wsl_error_set(err, WSL_BACKEND_UNAVAILABLE,
					      "the release of %s could not be confirmed; the lock is still held",
					      workspace);
				goto out;
			}
			wsl_error_clear(err);
			ok = true;
		}
		if (ok)
			break;
		/* The lock changed between the read and the compare: read it
		 * again and judge it afresh. */
		lock_entry_free(&e);
	}
	if (attempt == 10) {
		return wsl_error_set(err, WSL_BACKEND_UNAVAILABLE,
				     "the lock of %s kept changing; nothing released", workspace);
	}
	lease_drop(s, token);
	if (strcmp(s->held_token, token) == 0)
		held_forget(s);
	if (released != NULL)
		*released = e.owner;
	rc = 0;
out:
	lock_entry_free(&e);
	return rc;
}

static int etcd_retain(struct registry *reg, const char *workspace,
		       const char *token, const char *json, struct wsl_error *err)
{
	struct etcd_state *s = state(reg);
	struct etcd_compare cmp[2];
	struct etcd_op ops[2];
	struct etcd_txn t = { 0 };
	struct lock_entry e;
	struct kv_meta m;
	struct key lk, rk;
	bool ok;
	int rc = -1;

	if (key_make(s, "lock", workspace, &lk, err) != 0 ||
	    key_make(s, "retained", workspace, &rk, err) != 0)
		return -1;
	if (read_entry(s, workspace, false, &e, &m, err) != 0)
		return -1;
	if (lockrules_check_retain(workspace, token, &e, err) != 0)
		goto out;
	/* The lock key is put again without a lease: a retained lock stays
	 * until recovered, whatever happens to its holder. */
	guard(cmp, &lk, &e, &m);
	memset(ops, 0, sizeof(ops));
	ops[0].type = ops[1].type = ETCD_OP_PUT;
	ops[0].key = lk.b;
	ops[0].key_len = lk.len;
	ops[0].value = e.raw;
	ops[0].value_len = e.raw_len;
	ops[1].key = rk.b;
	ops[1].key_len = rk.len;
	ops[1].value = json;
	ops[1].value_len = strlen(json);
	t.compare = cmp;
	t.n_compare = 2;
	t.success = ops;
	t.n_success = 2;
	if (etcd_txn(s->c, &t, &ok, NULL, err) != 0) {
		struct lock_entry now;
		struct kv_meta nm;

		if (!outcome_unknown(err))
			goto out;
		if (read_entry(s, workspace, false, &now, &nm, err) != 0)
			goto out;
		ok = now.state == LOCK_RETAINED && nm.lease == 0 &&
		     same_bytes(now.raw, now.raw_len, e.raw, e.raw_len) &&
		     strcmp(now.retained, json) == 0;
		lock_entry_free(&now);
		if (!ok) {
			wsl_error_set(err, WSL_BACKEND_UNAVAILABLE,
				      "retaining %s could not be confirmed", workspace);
			goto out;
		}
		wsl_error_clear(err);
	}
	if (!ok) {
		wsl_error_set(err, WSL_OWNERSHIP_LOST,
			      "the lock of %s changed while held; nothing retained", workspace);
		goto out;
	}
	lease_drop(s, token);
	rc = 0;
out:
	lock_entry_free(&e);
	return rc;
}

/* ---- take-over -------------------------------------------------------- */

/* One journal line as journal.c writes it (journal.h has no function that
 * returns the line): the same JSON object, '\n' terminated. */
static char *journal_line(const char *action, const char *workspace,
			  const struct registry_expect *x,
			  const struct lock_entry *e, const struct owner *next,
			  size_t *len)
{
	struct journal_event ev = { 0 };

	ev.action = action;
	ev.workspace_root = workspace;
	ev.prior = e->has_owner ? &e->owner : NULL;
	if (!e->has_owner && e->raw != NULL) {
		ev.prior_raw = e->raw;
		ev.prior_raw_len = e->raw_len;
	}
	ev.next = next;
	ev.liveness = e->has_owner && e->probed ? liveness_name(e->liveness) : NULL;
	ev.liveness_reason = e->has_owner && e->probed ? e->reason : NULL;
	ev.force_reason = x->force ? x->force_reason : NULL;
	return journal_format(&ev, len);
}

static int etcd_take_over(struct registry *reg, const char *workspace,
			  const struct registry_expect *x, const struct owner *next,
			  int *live_fd, struct lock_entry *prior,
			  struct wsl_error *err)
{
	struct etcd_state *s = state(reg);
	struct etcd_compare cmp[2];
	struct etcd_op ops[5];
	struct etcd_txn t = { 0 };
	struct etcd_txn_result res;
	struct kv_meta m;
	struct key lk, rk, jk, lease_k, live_k;
	char suffix[64], rnd[17];
	struct timespec ts;
	char *line = NULL, *value = NULL, *doc = NULL;
	size_t line_len = 0, value_len = 0;
	bool ok;
	int rc = -1;

	memset(prior, 0, sizeof(*prior));
	if (key_make(s, "lock", workspace, &lk, err) != 0 ||
	    key_make(s, "retained", workspace, &rk, err) != 0 ||
	    key_make(s, "lease", workspace, &lease_k, err) != 0 ||
	    key_make(s, "live", workspace, &live_k, err) != 0)
		return -1;
	if (read_entry(s, workspace, true, prior, &m, err) != 0)
		return -1;
	if (prior->state == LOCK_CORRUPT)
		snprintf(prior->workspace_root, sizeof(prior->workspace_root), "%s", workspace);
	if (lockrules_check_take_over(workspace, x, prior, err) != 0)
		return -1;
	clock_gettime(CLOCK_REALTIME, &ts);
	crypto_random_hex(rnd, 8);
	snprintf(suffix, sizeof(suffix), "%020lld-%s",
		 (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000, rnd);
	if (key_make(s, "journal/", suffix, &jk, err) != 0)
		return -1;
	line = journal_line(prior->state == LOCK_CORRUPT ? "clear-corrupt" : x->action,
			    workspace, x, prior, next, &line_len);
	if (line == NULL) {
		wsl_error_set(err, WSL_INTERNAL, "cannot format a journal line");
		goto out;
	}
	if (next != NULL) {
		value = owner_bytes(next, &value_len);
		if (value == NULL) {
			wsl_error_set(err, WSL_INTERNAL, "cannot format the owner document");
			goto out;
		}
		if (live_fd != NULL && lease_ready(s, err) != 0)
			goto out;
	}
	/* One transaction: the exact bytes and create revision as read, then
	 * the new owner (or nothing), no retained key, and the journal line. */
	guard(cmp, &lk, prior, &m);
	memset(ops, 0, sizeof(ops));
	if (next != NULL) {
		ops[0].type = ETCD_OP_PUT;
		ops[0].value = value;
		ops[0].value_len = value_len;
	} else {
		ops[0].type = ETCD_OP_DELETE;
	}
	ops[0].key = lk.b;
	ops[0].key_len = lk.len;
	ops[1].type = ETCD_OP_DELETE;
	ops[1].key = rk.b;
	ops[1].key_len = rk.len;
	ops[2].type = ETCD_OP_PUT;
	ops[2].key = jk.b;
	ops[2].key_len = jk.len;
	ops[2].value = line;
	ops[2].value_len = line_len;
	/* The prior holder's liveness keys go; a new holder with a keeper
	 * gets its own. */
	if (liveness_ops(s, next, next != NULL && live_fd != NULL, &lease_k, &live_k,
			 &ops[3], &doc, err) != 0)
		goto out;
	t.compare = cmp;
	t.n_compare = 2;
	t.success = ops;
	t.n_success = 5;
	if (etcd_txn(s->c, &t, &ok, &res, err) != 0) {
		struct etcd_kv *kvs = NULL;
		size_t n = 0;
		long long rev = 0;

		if (!outcome_unknown(err))
			goto out;
		/* Our journal key exists only if our transaction was applied. */
		if (etcd_range(s->c, jk.b, jk.len, NULL, 0, 1, &kvs, &n, &rev, err) != 0)
			goto out;
		ok = n == 1;
		etcd_kvs_free(kvs, n);
		if (!ok) {
			wsl_error_set(err, WSL_BACKEND_UNAVAILABLE,
				      "taking over %s could not be confirmed; nothing changed", workspace);
			goto out;
		}
		/* The put's revision is not known: read it back. */
		if (next != NULL) {
			struct etcd_kv *k2 = NULL;
			size_t n2 = 0;
			if (etcd_range(s->c, lk.b, lk.len, NULL, 0, 1, &k2, &n2, &rev, err) != 0)
				goto out;
			reg->fence = n2 == 1 && same_bytes(k2[0].value, k2[0].value_len,
							   value, value_len) ?
				k2[0].mod_revision : 0;
			etcd_kvs_free(k2, n2);
		}
		wsl_error_clear(err);
	} else {
		long long rev = res.revision;

		note_rev(s, rev);
		etcd_txn_result_free(&res);
		if (!ok) {
			struct lock_entry now;
			struct kv_meta nm;

			/* Another take-over (or a release) won the race. */
			wsl_error_clear(err);
			if (read_entry(s, workspace, false, &now, &nm, err) != 0)
				goto out;
			if (now.raw != NULL)
				wsl_error_detail(&err->holder, now.has_owner ? now.raw : NULL);
			wsl_error_set(err, WSL_OWNER_MISMATCH,
				      "the lock of %s changed while it was being taken over (%s); nothing changed",
				      workspace, now.state == LOCK_FREE ? "it is free now" :
				      now.has_owner ? "another owner holds it now" : "it is corrupt now");
			lock_entry_free(&now);
			goto out;
		}
		if (next != NULL)
			reg->fence = rev;
	}
	if (next != NULL && live_fd != NULL) {
		lease_bind(reg, next);
		*live_fd = -1;
	}
	/* a put keeps the key's create revision */
	if (next != NULL)
		held_note(s, next, value, value_len, m.create_rev);
	wsl_error_clear(err);
	rc = 0;
out:
	free(doc);
	free(line);
	free(value);
	return rc;
}

/* ---- waiting, keepalive ------------------------------------------------ */

static int etcd_garbage(struct registry *reg, bool remove, size_t *staging,
			size_t *orphan_markers, struct wsl_error *err)
{
	(void)reg;
	(void)remove;
	(void)err;
	*staging = *orphan_markers = 0;	/* nothing is staged in etcd */
	return 0;
}

static int etcd_wait_prepare(struct registry *reg, struct wsl_error *err)
{
	(void)reg;
	(void)err;
	return 0;	/* every read records its revision: waits start there */
}

static int sig_ready(int sigfd)
{
	struct pollfd p = { sigfd, POLLIN, 0 };

	return sigfd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

static int etcd_wait(struct registry *reg, int sigfd, long timeout_ms,
		     struct wsl_error *err)
{
	struct etcd_state *s = state(reg);
	long long deadline = platform_mono_ms() + timeout_ms;
	struct key k;
	char end[KEY_MAX];
	size_t end_len;

	(void)err;
	if (key_make(s, "lock", "", &k, err) != 0)
		return -1;
	end_len = etcd_prefix_end(k.b, k.len, end);
	for (;;) {
		struct wsl_error werr = { 0 };
		long long left = deadline - platform_mono_ms();
		int rc;

		if (sig_ready(sigfd))
			return 1;
		if (left <= 0)
			return 0;
		rc = etcd_wait_change(s->c, k.b, k.len, end, end_len, s->last_rev,
				      left < WAIT_SLICE_MS ? (long)left : WAIT_SLICE_MS,
				      &werr);
		if (rc == 1)
			return 0;	/* something changed: the caller tries again */
		if (rc < 0) {
			/* No watch now: wait out the slice, the next attempt
			 * says whether etcd is reachable. */
			struct pollfd p = { sigfd, POLLIN, 0 };
			wsl_error_clear(&werr);
			left = deadline - platform_mono_ms();
			if (left > 0)
				poll(&p, sigfd >= 0 ? 1 : 0,
				     (int)(left < WAIT_SLICE_MS ? left : WAIT_SLICE_MS));
		}
	}
}

/* A client for s's endpoints with its TLS files and user. */
static int client_new(struct etcd_state *s, struct etcd_client **out,
		      struct wsl_error *err)
{
	if (etcd_open(out, s->endpoints, s->timeout_ms, err) != 0)
		return -1;
	if (etcd_set_tls(*out, s->cacert, s->cert, s->key, err) != 0 ||
	    etcd_set_auth(*out, s->user[0] != '\0' ? s->user : NULL, s->password, err) != 0) {
		etcd_close(*out);
		*out = NULL;
		return -1;
	}
	return 0;
}

/* cfg's value, else the environment variable's; NULL when neither. */
static const char *opt_or_env(const char *v, const char *name)
{
	if (v == NULL || v[0] == '\0')
		v = getenv(name);
	return v != NULL && v[0] != '\0' ? v : NULL;
}

/* The TLS files and the user (USER[:PASSWORD]) from cfg or the
 * environment into s. */
static int auth_config(struct etcd_state *s, const struct registry_config *cfg,
		       struct wsl_error *err)
{
	const char *u = opt_or_env(cfg->etcd_user, "WSLOCK_ETCD_USER"), *colon;
	const char *pw = getenv("WSLOCK_ETCD_PASSWORD");

	s->cacert = opt_or_env(cfg->etcd_cacert, "WSLOCK_ETCD_CACERT");
	s->cert = opt_or_env(cfg->etcd_cert, "WSLOCK_ETCD_CERT");
	s->key = opt_or_env(cfg->etcd_key, "WSLOCK_ETCD_KEY");
	if (u == NULL)
		return 0;
	colon = strchr(u, ':');
	if (colon != NULL)
		pw = colon + 1;
	if ((size_t)(colon != NULL ? colon - u : (ptrdiff_t)strlen(u)) >= sizeof(s->user) ||
	    (pw != NULL && strlen(pw) >= sizeof(s->password)))
		return wsl_error_set(err, WSL_USAGE, "the etcd user name or password is too long");
	snprintf(s->user, sizeof(s->user), "%.*s",
		 (int)(colon != NULL ? colon - u : (ptrdiff_t)strlen(u)), u);
	snprintf(s->password, sizeof(s->password), "%s", pw != NULL ? pw : "");
	return 0;
}

/* In a keeper (a process forked after the client was opened): a client
 * of its own. The inherited one is abandoned, not closed: its connections
 * are the parent's too, and closing a TLS one would send on them. */
static int client_own(struct etcd_state *s, struct wsl_error *err)
{
	struct etcd_client *c;

	if (s->pid == getpid())
		return 0;
	if (client_new(s, &c, err) != 0)
		return -1;
	s->c = c;
	s->pid = getpid();
	return 0;
}

/* 0 when o's lock still holds o's exact bytes and its live key; else
 * WSL_OWNERSHIP_LOST. A read that fails proves nothing: 0. */
static int check_own(struct etcd_state *s, const struct owner *o,
		     struct wsl_error *err)
{
	struct wsl_error rerr = { 0 };
	struct lock_entry e;
	struct kv_meta m;
	size_t len = 0;
	char *mine = owner_bytes(o, &len);
	int rc = 0;

	if (mine == NULL || read_entry(s, o->workspace_root, true, &e, &m, &rerr) != 0) {
		free(mine);
		wsl_error_clear(&rerr);
		return 0;
	}
	if (!same_bytes(e.raw, e.raw_len, mine, len))
		rc = wsl_error_set(err, WSL_OWNERSHIP_LOST,
				   "the lock of %s was %s while this command held it",
				   o->workspace_root, e.state == LOCK_FREE ? "deleted" :
				   "changed (another owner holds it now)");
	else if (e.liveness != LIVENESS_LIVE)
		rc = wsl_error_set(err, WSL_OWNERSHIP_LOST,
				   "the liveness key of %s was removed while this command held it",
				   o->workspace_root);
	lock_entry_free(&e);
	free(mine);
	return rc;
}

static int etcd_keepalive(struct registry *reg, const struct owner *o,
			  long *next_ms, long *ttl_ms, struct wsl_error *err)
{
	struct etcd_state *s = state(reg);
	long long ttl, sent, period = s->ttl_s * 1000 / 3;
	int rc;

	*next_ms = -1;
	*ttl_ms = -1;
	if (s->lease == 0 || !s->lease_used || strcmp(s->lease_token, o->token) != 0)
		return 0;	/* no lease behind this lock: it lives until released */
	sent = platform_mono_ms();
	/* Right after the grant (the first call of a keeper) nothing is
	 * sent: a renewal then would be a redundant request. */
	if (sent - s->lease_sent_ms >= 250) {
		if (client_own(s, err) != 0)
			return -1;
		/* Never wait past the deadline for an answer. */
		etcd_set_deadline(s->c, reg->keep_deadline_ms > 0 ? reg->keep_deadline_ms :
				  s->lease_sent_ms + s->ttl_s * 1000);
		if (etcd_lease_keepalive(s->c, s->lease, &ttl, err) != 0) {
			etcd_set_deadline(s->c, 0);
			if (err->code != WSL_BACKEND_UNAVAILABLE)
				return wsl_error_prefix(err, WSL_BACKEND_UNAVAILABLE,
							"cannot renew the lease of %s",
							o->workspace_root);
			return -1;
		}
		etcd_set_deadline(s->c, 0);
		if (ttl <= 0) {
			s->lease_used = false;
			s->lease = 0;
			return wsl_error_set(err, WSL_OWNERSHIP_LOST,
					     "the liveness lease of %s expired or was revoked",
					     o->workspace_root);
		}
		s->lease_sent_ms = sent;
		if (reg->keep_deadline_ms > 0)
			etcd_set_deadline(s->c, reg->keep_deadline_ms);
		rc = check_own(s, o, err);
		etcd_set_deadline(s->c, 0);
		if (rc != 0)
			return -1;
	}
	*next_ms = (long)(s->lease_sent_ms + period - platform_mono_ms());
	if (*next_ms < 0)
		*next_ms = 0;
	*ttl_ms = (long)(s->lease_sent_ms + s->ttl_s * 1000 - platform_mono_ms());
	return 0;
}

/* ---- open, close -------------------------------------------------------- */

static void etcd_registry_close(struct registry *reg)
{
	struct etcd_state *s = state(reg);

	if (s == NULL)
		return;
	if (s->lease != 0 && !s->lease_used) {
		struct wsl_error ignore = { 0 };
		etcd_lease_revoke(s->c, s->lease, &ignore);
		wsl_error_clear(&ignore);
	}
	etcd_close(s->c);
	held_forget(s);
	explicit_bzero(s->password, sizeof(s->password));
	free(s);
	reg->backend = NULL;
}

static const struct registry_ops etcd_ops = {
	.name = "etcd",
	.close = etcd_registry_close,
	.lock = NULL,
	.unlock = NULL,
	.get = etcd_get,
	.overlaps = etcd_overlaps,
	.try_acquire = etcd_try_acquire,
	.release = etcd_release,
	.list = etcd_list,
	.take_over = etcd_take_over,
	.retain = etcd_retain,
	.garbage = etcd_garbage,
	.wait_prepare = etcd_wait_prepare,
	.wait = etcd_wait,
	.keepalive = etcd_keepalive,
};

/* $WSLOCK_ETCD_TIMEOUT (seconds, fractional) in ms; 5000 when unset or
 * not a positive number of at most 600 s. */
static long timeout_from_env(void)
{
	const char *v = getenv("WSLOCK_ETCD_TIMEOUT");
	char *end;
	double d;

	if (v == NULL || v[0] == '\0')
		return 5000;
	errno = 0;
	d = strtod(v, &end);
	if (errno != 0 || *end != '\0' || !(d > 0) || d > 600)
		return 5000;
	return d * 1000 < 1 ? 1 : (long)(d * 1000);
}

int etcd_registry_open(struct registry *reg, const struct registry_config *cfg,
		       struct wsl_error *err)
{
	const char *endpoints = cfg->etcd_endpoints, *prefix = cfg->etcd_prefix;
	struct etcd_state *s;
	size_t plen;

	reg->path[0] = '\0';	/* no registry directory */
	reg->real[0] = '\0';
	if (endpoints == NULL || endpoints[0] == '\0')
		endpoints = getenv("WSLOCK_ETCD_ENDPOINTS");
	if (endpoints == NULL || endpoints[0] == '\0')
		return wsl_error_set(err, WSL_USAGE,
				     "--backend etcd needs --etcd-endpoints or WSLOCK_ETCD_ENDPOINTS");
	if (prefix == NULL || prefix[0] == '\0')
		prefix = getenv("WSLOCK_ETCD_PREFIX");
	if (prefix == NULL || prefix[0] == '\0')
		prefix = "/wslock/";
	plen = strlen(prefix);
	if (plen > PREFIX_MAX)
		return wsl_error_set(err, WSL_USAGE, "--etcd-prefix is longer than %d bytes",
				     PREFIX_MAX);
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	memcpy(s->prefix, prefix, plen + 1);
	s->prefix_len = plen;
	s->ttl_s = cfg->lease_ttl_s > 0 ? cfg->lease_ttl_s : 15;
	s->delay_s = s->ttl_s;	/* lock-delay: one TTL, as Chubby and consul */
	s->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : timeout_from_env();
	s->pid = getpid();
	snprintf(s->endpoints, sizeof(s->endpoints), "%s", endpoints);
	if (auth_config(s, cfg, err) != 0 || client_new(s, &s->c, err) != 0) {
		explicit_bzero(s->password, sizeof(s->password));
		free(s);
		return -1;
	}
	/* Nothing is read yet: every command's first read (or write) says
	 * whether etcd is reachable, and one that cannot read fails, never
	 * taking an unread registry for an empty one. */
	reg->ops = &etcd_ops;
	reg->backend = s;
	return 0;
}
