/* registry_etcd_shared.c - shared locks on etcd (DESIGN.md section 2, issue
 * 15): etcd's own RWMutex recipe (one key per holder, FIFO by revision)
 * fitted to the keys atop registry_etcd.c.
 *
 * Keys, below the prefix P, W a canonical workspace, T a reader's token:
 *
 *   P "lock" W                 the marker MARKER below, not an owner
 *                              document: it exists while W has a reader.
 *                              The first reader puts it, the last one
 *                              deletes it in the transaction that deletes
 *                              its own keys. The mode thus lives in the
 *                              lock, not in the owner documents.
 *   P "holder/lock" W "//" T   the reader's owner document (exactly the
 *                              bytes of an exclusive lock key); its create
 *                              revision is the reader's fencing token
 *   P "holder/lease" W "//" T  as P "lease" W, for that reader
 *   P "holder/live" W "//" T   as P "live" W: T on the reader's own lease
 *   P "holder/retained" W "//" T  retained.json of that reader
 *   P "queue+" W "//" L        a waiter for a shared lock, shaped as P
 *                              "queue" W "//" L (registry_etcd_queue.c)
 *
 * Why it is safe:
 *  - A writer is kept out by what it compares already: the marker is a
 *    lock key, so "CREATE == 0 on W, its ancestors and [P lock W/, end)"
 *    fails while any reader holds W or a workspace overlapping it. The
 *    exclusive path and several-workspace sets need no change.
 *  - A reader's acquire is one transaction. Its first attempt compares as a
 *    writer's does (and puts the marker); when a lock is in the way, the
 *    failure branch reads every overlapping lock key at the transaction's
 *    revision R; if each is a marker, the next attempt compares "VALUE ==
 *    MARKER" on W (when it was there at R) and "MOD < R + 1" on every
 *    ancestor's key and over [P lock W/, end): every key overlapping W now
 *    is one seen as a marker at R and unchanged since (a key made after R
 *    has a later revision; one deleted is no conflict). Readers joining
 *    change holder keys only, never a lock key, so readers do not make
 *    each other retry.
 *  - The last reader leaves with compares that its own document is there
 *    and the holder ranges on both sides of its key are empty; otherwise it
 *    deletes only its own keys, comparing that another holder's key exists.
 *    So the marker never outlives its readers and never goes before them.
 *  - A crash leaves the reader's document (its lease and live key go with
 *    its lease): a dead reader, as a dead exclusive holder. The next
 *    writer meets it first (lockrules_representative): recovery required.
 *    Other readers are not blocked (lockrules_compatible).
 *  - Recover of one reader replaces its four keys by its successor's (under
 *    the new token) in one transaction comparing the reader's exact bytes,
 *    with the journal line; the marker stays.
 *
 * What an older (0.2) binary sees: P "lock" W holding a value that is not
 * an owner document, i.e. a corrupt lock (WSLOCK_LOCK_CORRUPT, 65) on W, on
 * an ancestor or a descendant of what it wants: never a free workspace.
 * Its reclaim never touches a corrupt lock; only its `recover --force`
 * with the marker's exact bytes would delete the marker (and leave the
 * readers' keys, which it does not know). It does not see P "holder/..."
 * nor P "queue+": its waiters do not queue behind shared waiters (order
 * only; the lock keys still decide).
 */
#include "registry_etcd.h"
#include "etcd.h"
#include "platform.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MARKER "{\"kind\":\"wslock-shared\",\"mode\":\"shared\"}\n"
#define MARKER_LEN (sizeof(MARKER) - 1)
#define SEP "//"
#define ATTEMPTS 20

/* The keys of one reader, in the order of K_* (registry_etcd.h). */
static const char *const holder_kinds[KINDS] = {
	"holder/lock", "holder/retained", "holder/lease", "holder/live"
};

bool shared_marker(const char *v, size_t n)
{
	return v != NULL && n == MARKER_LEN && memcmp(v, MARKER, n) == 0;
}

int holder_key(const struct etcd_state *s, int kind, const char *ws,
	       const char *token, struct key *k, struct wsl_error *err)
{
	int n = snprintf(k->b, sizeof(k->b), "%s%s%s" SEP "%s", s->prefix,
			 holder_kinds[kind], ws, token);

	if (n < 0 || (size_t)n >= sizeof(k->b))
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "etcd key for %s is too long", ws);
	k->len = (size_t)n;
	return 0;
}

/* ---- reading ---------------------------------------------------------- */

/* The key of r whose name is prefix (plen bytes) and then name (n
 * bytes); NULL when none. */
static const struct etcd_kv *by_suffix(const struct etcd_op_result *r, size_t plen,
				       const char *name, size_t n)
{
	for (size_t i = 0; i < r->n_kvs; i++)
		if (r->kvs[i].key_len == plen + n &&
		    memcmp(r->kvs[i].key + plen, name, n) == 0)
			return &r->kvs[i];
	return NULL;
}

/* Holders in arrival order (acquired_at), then by token. */
static int holder_cmp(const void *a, const void *b)
{
	const struct lock_entry *x = a, *y = b;
	int c = strcmp(x->owner.acquired_at, y->owner.acquired_at);

	return c != 0 ? c : strcmp(x->holder, y->holder);
}

/* Makes *e a copy of its representative holder that owns its own bytes,
 * keeping the holders (as local_shared.c does for the local registry). */
static int represent(struct lock_entry *e, struct wsl_error *err)
{
	const struct lock_entry *r = &e->holders[lockrules_representative(e->holders,
									 e->n_holders)];
	struct lock_entry *hs = e->holders;
	size_t n = e->n_holders;

	free(e->raw);		/* the marker's */
	free(e->retained);
	*e = *r;
	e->raw = r->raw != NULL ? dup_bytes(r->raw, r->raw_len) : NULL;
	e->retained = r->retained != NULL ? strdup(r->retained) : NULL;
	e->holders = hs;
	e->n_holders = n;
	if ((r->raw != NULL && e->raw == NULL) || (r->retained != NULL && e->retained == NULL))
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	return 0;
}

/* Fills h from the reader keys named name (n bytes) in res's first KINDS
 * ranges (prefix lengths plen[]). */
static int fill_holder(const char *path, const struct etcd_txn_result *res,
		       const size_t plen[KINDS], const char *name, size_t n, bool probe,
		       struct lock_entry *h, struct wsl_error *err)
{
	const struct etcd_kv *kv[KINDS];
	struct kv_meta m;
	int j;

	for (j = 0; j < KINDS; j++)
		kv[j] = by_suffix(&res->ops[j], plen[j], name, n);
	if (fill_entry(path, kv, probe, h, &m, err) != 0)
		return -1;
	snprintf(h->holder, sizeof(h->holder), "%.*s", (int)(n < WSL_KEY_HEX ? n : WSL_KEY_HEX),
		 name);
	if (h->shared || (h->has_owner && (n != WSL_TOKEN_HEX ||
					   strcmp(h->owner.token, h->holder) != 0))) {
		h->shared = false;
		h->has_owner = false;
		h->state = LOCK_CORRUPT;
		h->probed = false;
		snprintf(h->problem, sizeof(h->problem),
			 "the reader key %.*s does not hold the owner document of its token",
			 (int)kv[K_LOCK]->key_len, kv[K_LOCK]->key);
	}
	h->shared = true;
	return 0;
}

int shared_load(struct etcd_state *s, const char *path, bool probe,
		struct lock_entry *e, struct wsl_error *err)
{
	struct etcd_op ops[2 * KINDS];
	struct key k[2 * KINDS];
	char end[KINDS][KEY_MAX];
	size_t plen[KINDS], i;
	struct etcd_txn t = { 0 };
	struct etcd_txn_result res;
	const struct etcd_kv *own[KINDS];
	struct kv_meta m;
	bool ok;
	int j, rc = 0;

	/* The readers and W's own keys again, at one revision: the marker
	 * may have gone (the last reader left) since the first read. */
	memset(ops, 0, sizeof(ops));
	for (j = 0; j < KINDS; j++) {
		if (holder_key(s, j, path, "", &k[j], err) != 0 ||
		    key_make(s, kind_names[j], path, &k[KINDS + j], err) != 0)
			return -1;
		plen[j] = k[j].len;
		ops[j].type = ETCD_OP_RANGE;
		ops[j].key = k[j].b;
		ops[j].key_len = k[j].len;
		ops[j].range_end = end[j];
		ops[j].range_end_len = etcd_prefix_end(k[j].b, k[j].len, end[j]);
		ops[KINDS + j].type = ETCD_OP_RANGE;
		ops[KINDS + j].key = k[KINDS + j].b;
		ops[KINDS + j].key_len = k[KINDS + j].len;
	}
	t.success = ops;
	t.n_success = 2 * KINDS;
	if (etcd_txn(s->c, &t, &ok, &res, err) != 0)
		return -1;
	note_rev(s, res.revision);
	if (res.n_ops != 2 * KINDS) {
		etcd_txn_result_free(&res);
		return wsl_error_set(err, WSL_IO, "etcd answered %zu reads, not %d",
				     res.n_ops, 2 * KINDS);
	}
	for (j = 0; j < KINDS; j++)
		own[j] = res.ops[KINDS + j].n_kvs > 0 ? &res.ops[KINDS + j].kvs[0] : NULL;
	lock_entry_free(e);
	if (own[K_LOCK] == NULL || !shared_marker(own[K_LOCK]->value, own[K_LOCK]->value_len)) {
		/* Free now, or locked otherwise since: as it reads now. */
		rc = fill_entry(path, own, probe, e, &m, err);
		etcd_txn_result_free(&res);
		return rc;
	}
	if (fill_entry(path, own, false, e, &m, err) != 0) {
		etcd_txn_result_free(&res);
		return -1;
	}
	if (res.ops[K_LOCK].n_kvs > 0) {
		e->holders = calloc(res.ops[K_LOCK].n_kvs, sizeof(*e->holders));
		if (e->holders == NULL)
			rc = wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	}
	for (i = 0; rc == 0 && i < res.ops[K_LOCK].n_kvs; i++) {
		const struct etcd_kv *kv = &res.ops[K_LOCK].kvs[i];

		rc = fill_holder(path, &res, plen, kv->key + plen[K_LOCK],
				 kv->key_len - plen[K_LOCK], probe, &e->holders[i], err);
		if (rc == 0)
			e->n_holders++;
	}
	etcd_txn_result_free(&res);
	if (rc != 0) {
		lock_entry_free(e);
		return -1;
	}
	if (e->n_holders == 0) {
		/* Not made by wslock (the last reader takes the marker with
		 * it): corrupt, cleared only by recover --force of its bytes. */
		e->shared = false;
		e->state = LOCK_CORRUPT;
		snprintf(e->problem, sizeof(e->problem),
			 "a shared lock without readers (its marker %s is left alone)",
			 e->lock_path);
		return 0;
	}
	qsort(e->holders, e->n_holders, sizeof(*e->holders), holder_cmp);
	return represent(e, err);
}

/* ---- acquire ---------------------------------------------------------- */

/* Whether every key in the n range results r[] is a marker (a shared lock
 * a reader may join); *here: the first of them (W itself) holds one. */
static bool all_markers(const struct etcd_op_result *r, size_t n, bool *here)
{
	*here = n > 0 && r[0].n_kvs > 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < r[i].n_kvs; j++)
			if (!shared_marker(r[i].kvs[j].value, r[i].kvs[j].value_len))
				return false;
	return true;
}

/* Whether every reader document in r (the range P "holder/lock" W "//",
 * plen bytes before each token) is a valid owner document of W under its
 * own token: a corrupt reader keeps readers out too (lockrules_compatible,
 * fail closed). */
static bool readers_sound(const struct etcd_op_result *r, size_t plen, const char *ws)
{
	for (size_t i = 0; i < r->n_kvs; i++) {
		const struct etcd_kv *kv = &r->kvs[i];
		struct owner o;
		char why[256];

		if (kv->key_len != plen + WSL_TOKEN_HEX || kv->value_len > OWNER_DOC_MAX ||
		    owner_parse(kv->value, kv->value_len, &o, why, sizeof(why)) != 0 ||
		    strcmp(o.workspace_root, ws) != 0 ||
		    memcmp(o.token, kv->key + plen, WSL_TOKEN_HEX) != 0)
			return false;
	}
	return true;
}

/* Whether every key in the n range results r[] is unchanged since rev. */
static bool unchanged_since(const struct etcd_op_result *r, size_t n, long long rev)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < r[i].n_kvs; j++)
			if (r[i].kvs[j].mod_revision > rev)
				return false;
	return true;
}

/* The lock in a reader's way, ranked as every backend ranks conflicts,
 * into *conflict (LOCK_FREE: none now). */
static int reader_conflict(struct registry *reg, const char *ws,
			   struct lock_entry *conflict, struct wsl_error *err)
{
	struct lock_entry self;
	struct kv_meta m;
	struct overlap *ov = NULL;
	size_t n = 0, i;

	if (etcd_read_around(reg, ws, true, &self, &m, &ov, &n, err) != 0)
		return -1;
	if (lockrules_compatible(true, &self))
		lock_entry_free(&self);
	lockrules_conflict_keep_own(conflict, &self, ws);
	for (i = 0; i < n; i++)
		if (!lockrules_compatible(true, &ov[i].entry))
			lockrules_conflict_keep(conflict, &ov[i].entry);
	lock_overlaps_free(ov, n);
	return 0;
}

/* Sets the compares of the lock part, cmp[0..nc): as a writer's (rev 0),
 * or "as seen at rev" (marker: W held a marker then). */
static void reader_compares(struct etcd_compare *cmp, int nc, long long rev, bool marker)
{
	for (int i = 0; i < nc; i++) {
		cmp[i].target = rev == 0 ? ETCD_TARGET_CREATE : ETCD_TARGET_MOD;
		cmp[i].cmp = rev == 0 ? ETCD_CMP_EQUAL : ETCD_CMP_LESS;
		cmp[i].number = rev == 0 ? 0 : rev + 1;
		cmp[i].value = NULL;
		cmp[i].value_len = 0;
	}
	if (rev != 0 && nc > 0) {
		/* W itself: the marker is still (or again) there, or it is
		 * still absent and this transaction puts it */
		cmp[0].target = marker ? ETCD_TARGET_VALUE : ETCD_TARGET_CREATE;
		cmp[0].cmp = ETCD_CMP_EQUAL;
		cmp[0].number = 0;
		cmp[0].value = marker ? MARKER : NULL;
		cmp[0].value_len = marker ? MARKER_LEN : 0;
	}
}

int etcd_shared_acquire(struct registry *reg, const struct owner *o,
			const struct registry_deadline *dl, int *live_fd,
			struct lock_entry *conflict, struct wsl_error *err)
{
	struct etcd_state *s = state(reg);
	const char *ws = o->workspace_root;
	size_t depth = depth_of(ws), nq = 0, value_len = 0, qroom = queue_compares_room(ws);
	struct etcd_compare *cmp = NULL;
	struct etcd_op *fops = NULL, ops[6], qdel = { 0 }, mput = { 0 };
	struct key *keys = NULL, *qkeys = NULL, self, hk[KINDS];
	char dend[KEY_MAX], hend[KEY_MAX];
	char *value = NULL, *doc = NULL;
	struct key hpre;
	long long rev = 0;
	bool marker = false, use_q;
	int attempt, nc = 0, j, rc = -1;

	memset(conflict, 0, sizeof(*conflict));
	conflict->state = LOCK_FREE;
	etcd_bound_requests(reg, dl);
	if (depth > DEPTH_MAX)
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "workspace %s is more than %d directories deep: too deep for one etcd transaction",
				     ws, DEPTH_MAX);
	s->want = o;	/* for etcd_wait_prepare: its queue key */
	s->want_shared = true;
	value = owner_bytes(o, &value_len);
	cmp = calloc(depth + 2 + qroom, sizeof(*cmp));
	fops = calloc(depth + 3, sizeof(*fops));
	keys = calloc(depth + 2, sizeof(*keys));
	qkeys = calloc(2 * qroom, sizeof(*qkeys));
	if (value == NULL || cmp == NULL || fops == NULL || keys == NULL || qkeys == NULL) {
		wsl_error_set(err, WSL_INTERNAL, "cannot format the owner document");
		goto out;
	}
	if (key_make(s, "lock", ws, &self, err) != 0)
		goto out;
	for (j = 0; j < KINDS; j++)
		if (holder_key(s, j, ws, o->token, &hk[j], err) != 0)
			goto out;
	nc = lock_compares(s, ws, &self, cmp, keys, dend, err);
	if (nc < 0)
		goto out;
	/* On failure: every lock key those compares cover, at that revision. */
	for (j = 0; j < nc; j++) {
		fops[j].type = ETCD_OP_RANGE;
		fops[j].key = cmp[j].key;
		fops[j].key_len = cmp[j].key_len;
		fops[j].range_end = cmp[j].range_end;
		fops[j].range_end_len = cmp[j].range_end_len;
	}
	/* and W's readers: a corrupt one keeps readers out */
	if (holder_key(s, K_LOCK, ws, "", &hpre, err) != 0)
		goto out;
	fops[nc].type = ETCD_OP_RANGE;
	fops[nc].key = hpre.b;
	fops[nc].key_len = hpre.len;
	fops[nc].range_end = hend;
	fops[nc].range_end_len = etcd_prefix_end(hpre.b, hpre.len, hend);
	if (s->queued) {
		/* A reader waits only for exclusive waiters ahead of it
		 * (queue_ahead with s->want_shared). */
		int turn = queue_turn(s, o, conflict, err);

		if (turn != 0) {
			if (turn > 0)
				rc = ACQUIRE_CONFLICT;
			goto out;
		}
	} else if (queue_compares(s, ws, cmp + nc, qkeys, qkeys + qroom, &nq, err) != 0) {
		goto out;
	}
	use_q = nq > 0;
	s->lease_for_pid = reg->lease_for_pid;
	if (live_fd != NULL && lease_ready(s, err) != 0)
		goto out;
	memset(ops, 0, sizeof(ops));
	/* The reader's document on no lease: a crash leaves it. */
	ops[0].type = ETCD_OP_PUT;
	ops[0].key = hk[K_LOCK].b;
	ops[0].key_len = hk[K_LOCK].len;
	ops[0].value = value;
	ops[0].value_len = value_len;
	ops[1].type = ETCD_OP_DELETE;
	ops[1].key = hk[K_RETAINED].b;
	ops[1].key_len = hk[K_RETAINED].len;
	if (liveness_ops(s, o, live_fd != NULL, &hk[K_LEASE], &hk[K_LIVE], &ops[2], &doc, err) != 0)
		goto out;
	qdel.type = ETCD_OP_DELETE;	/* a waiter leaves the queue */
	qdel.key = s->queue_key.b;
	qdel.key_len = s->queue_key.len;
	mput.type = ETCD_OP_PUT;	/* the marker, when W has none yet */
	mput.key = self.b;
	mput.key_len = self.len;
	mput.value = MARKER;
	mput.value_len = MARKER_LEN;

	for (attempt = 0; attempt < ATTEMPTS; attempt++) {
		struct etcd_txn t = { 0 };
		struct etcd_txn_result res;
		size_t nops = 4;
		bool ok, here, mine;

		reader_compares(cmp, nc, rev, marker);
		if (s->queued)
			ops[nops++] = qdel;
		if (rev == 0 || !marker)
			ops[nops++] = mput;
		t.compare = cmp;
		t.n_compare = (size_t)nc + (use_q ? nq : 0);
		t.success = ops;
		t.n_success = nops;
		t.failure = fops;
		t.n_failure = (size_t)nc + 1;
		if (etcd_txn(s->c, &t, &ok, &res, err) != 0) {
			struct etcd_kv *kvs = NULL;
			size_t n = 0;

			if (!outcome_unknown(err))
				goto out;
			/* Our document stored: our transaction was applied. */
			wsl_error_clear(err);
			if (etcd_range(s->c, hk[K_LOCK].b, hk[K_LOCK].len, NULL, 0, 1,
				       &kvs, &n, NULL, err) != 0)
				goto out;
			mine = n == 1 && same_bytes(kvs[0].value, kvs[0].value_len, value, value_len);
			if (mine)
				reg->fence = kvs[0].create_revision;
			etcd_kvs_free(kvs, n);
			if (mine)
				break;
			rev = 0;
			continue;	/* not applied: the compares make a retry safe */
		}
		note_rev(s, res.revision);
		if (ok) {
			reg->fence = res.revision;
			etcd_txn_result_free(&res);
			break;
		}
		if (res.n_ops != (size_t)nc + 1) {
			etcd_txn_result_free(&res);
			wsl_error_set(err, WSL_IO, "etcd answered %zu reads, not %d", res.n_ops, nc + 1);
			goto out;
		}
		if (all_markers(res.ops, (size_t)nc, &here) &&
		    readers_sound(&res.ops[nc], hpre.len, ws)) {
			/* Only readers in the way. When the lock compares
			 * held as they were (nothing changed since rev), it
			 * was the queue: an exclusive waiter is ahead. */
			bool queue_only = rev != 0 && here == marker &&
				unchanged_since(res.ops, (size_t)nc, rev);
			long long seen = res.revision;

			etcd_txn_result_free(&res);
			if (queue_only && use_q) {
				if (queue_ahead(s, o, conflict, err) != 0)
					goto out;
				if (conflict->state != LOCK_FREE) {
					rc = ACQUIRE_CONFLICT;
					goto out;
				}
				use_q = false;	/* no overlapping waiter any more */
			}
			rev = seen;
			marker = here;
			continue;
		}
		rev = res.revision;
		etcd_txn_result_free(&res);
		/* A writer (or something corrupt) in the way: read it whole. */
		if (reader_conflict(reg, ws, conflict, err) != 0) {
			lock_entry_free(conflict);
			goto out;
		}
		if (conflict->state != LOCK_FREE) {
			queue_watch_lock(s, conflict->workspace_root, rev);
			rc = ACQUIRE_CONFLICT;
			goto out;
		}
		rev = 0;	/* it went meanwhile: as a writer would, again */
	}
	if (attempt == ATTEMPTS) {
		wsl_error_set(err, WSL_BACKEND_UNAVAILABLE,
			      "the etcd keys around %s kept changing; gave up after %d attempts",
			      ws, attempt);
		goto out;
	}
	if (live_fd != NULL) {
		lease_bind(reg, o);
		*live_fd = -1;
		if (!s->lease_for_pid)
			etcd_nest_make(s, o->token, live_fd);
	}
	held_note(s, o, value, value_len, reg->fence);
	s->held_shared = true;
	queue_left(s);
	rc = ACQUIRE_DONE;
out:
	if (rc != ACQUIRE_CONFLICT)
		s->want = NULL;
	free(doc);
	free(value);
	free(cmp);
	free(fops);
	free(keys);
	free(qkeys);
	return rc;
}
