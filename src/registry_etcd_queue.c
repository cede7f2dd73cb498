/* registry_etcd_queue.c - waiting on etcd is FIFO (DESIGN.md section 5b),
 * as etcd's own concurrency.Mutex waits, extended to nested workspaces.
 *
 * One queue per registry prefix P. A waiter puts the key
 *
 *   P "queue" W "//" LEASE      (LEASE: its lease id, 16 hex digits)
 *
 * or, waiting for a shared lock (--shared), P "queue+" W "//" LEASE: a
 * reader waits only for the exclusive waiters ahead of it, a writer for
 * every waiter ahead (both kinds are read in one range: "queue+/" sorts
 * just before "queue/"), so readers arriving after a waiting writer queue
 * behind it and a writer is not starved. A binary from before shared
 * locks does not see "queue+" keys (order only: the lock keys decide).
 *
 * holding the owner document it will write, bound to its own lease (the
 * lease it will hold the lock on; `acquire` has one just for waiting). The
 * lease is renewed while it waits, so a wait may last longer than the TTL;
 * a waiter that crashes leaves the queue when its lease runs out (TTL +
 * lock-delay), one that gives up revokes it at once. The waiter behind a
 * crashed one does not wait that long: when the same waiter is still
 * ahead after a wait slice, it asks how long that waiter's lease has left,
 * and passes it once it has gone one TTL (half its lease) unrenewed; a
 * live waiter renews every third of its TTL (queue_stale). Queue keys are
 * ordered by their create revision: who came first.
 *
 * A workspace conflicts with itself, its ancestors and its descendants, so
 * a waiter waits only for the *conflicting* waiters ahead of it: those whose
 * workspace overlaps its own. It watches just one key: the nearest of them
 * (greatest create revision below its own), and when that one is gone it
 * looks again. With none ahead it tries the lock (one transaction with the
 * overlap checks, which also deletes its queue key), and when a holder
 * conflicts it watches that holder's lock key. A waiter thus waits on keys
 * of lower revision or on a holder, never in a cycle: nobody starves and
 * nobody waits forever for a waiter that is gone.
 *
 * A newcomer does not jump the queue: its first acquire transaction also
 * compares that no queue key lies in the ranges of its own workspace and
 * descendants ("P queue W/") or of an ancestor A's own ("P queue A//");
 * canonical paths never hold "//", so these ranges hold exactly the
 * overlapping waiters. (A workspace too deep for both sets of compares in
 * one transaction compares the whole queue instead.) A waiter ahead of it
 * is reported like a holder: live, "waiting ahead in the queue". A -n
 * attempt therefore finds a workspace busy while a conflicting waiter is
 * queued, even if nobody holds it at that instant.
 *
 * Uncontended, none of this costs a request: the queue compares ride in
 * the acquire transaction, the queue key is put only when hold.c prepares
 * to wait.
 */
#include "registry_etcd.h"
#include "platform.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEASE_HEX 16
#define SEP "//"
#define SEP_LEN 2
#define TXN_COMPARE_MAX 128	/* etcd's default --max-txn-ops */

/* P "queue" path into k (shared: P "queue+", a shared waiter's). */
static int queue_key_of(const struct etcd_state *s, bool shared, const char *path,
			const char *tail, struct key *k, struct wsl_error *err)
{
	int n = snprintf(k->b, sizeof(k->b), "%squeue%s%s%s", s->prefix, shared ? "+" : "",
			 path, tail);

	if (n < 0 || (size_t)n >= sizeof(k->b))
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "etcd queue key for %s is too long", path);
	k->len = (size_t)n;
	return 0;
}

static int queue_key(const struct etcd_state *s, const char *path, const char *tail,
		     struct key *k, struct wsl_error *err)
{
	return queue_key_of(s, false, path, tail, k, err);
}

/* Whether canonical paths a (alen bytes) and b overlap: the same, or one
 * below the other. */
static bool paths_overlap(const char *a, size_t alen, const char *b)
{
	size_t blen = strlen(b), n = alen < blen ? alen : blen;

	if (memcmp(a, b, n) != 0)
		return false;
	if (alen == blen)
		return true;
	return (alen < blen ? b[alen] : a[blen]) == '/';
}

/* The workspace of queue key kv (*len bytes at *path); false when kv is
 * not shaped like one. */
static bool queue_path(const struct etcd_state *s, const struct etcd_kv *kv,
		       const char **path, size_t *len)
{
	size_t head = s->prefix_len + 5;	/* "queue" */

	if (kv->key_len > head && kv->key[head] == '+')
		head++;			/* "queue+": a shared waiter */
	if (kv->key_len < head + 1 + SEP_LEN + LEASE_HEX ||
	    memcmp(kv->key + kv->key_len - LEASE_HEX - SEP_LEN, SEP, SEP_LEN) != 0)
		return false;
	*path = kv->key + head;
	*len = kv->key_len - head - SEP_LEN - LEASE_HEX;
	return (*path)[0] == '/';
}

size_t queue_compares_room(const char *ws)
{
	size_t d = depth_of(ws);

	/* the lock's d + 1 compares, then the queue's: d for the exclusive
	 * waiters, d for the shared ones (a writer waits for both) */
	return 3 * d + 1 <= TXN_COMPARE_MAX ? 2 * d : 2;
}

/* Into k: the start of the range of the exclusive waiters (P "queue/"),
 * with both the shared ones (P "queue+/", which sorts just before it),
 * and its end into end. */
static int queue_all(const struct etcd_state *s, bool both, struct key *k,
		     char end[KEY_MAX], size_t *end_len, struct wsl_error *err)
{
	struct key ex;

	if (queue_key(s, "/", "", &ex, err) != 0 ||
	    queue_key_of(s, both, "/", "", k, err) != 0)
		return -1;
	*end_len = etcd_prefix_end(ex.b, ex.len, end);
	return 0;
}

int queue_compares(const struct etcd_state *s, const char *ws,
		   struct etcd_compare *cmp, struct key *keys, struct key *ends,
		   size_t *n, struct wsl_error *err)
{
	char buf[PATH_MAX];
	char *slash;
	size_t i = 0;

	bool shared = s->want_shared;

	/* A reader waits for exclusive waiters only; a writer for both
	 * kinds (P "queue" and P "queue+"). */
	if (queue_compares_room(ws) == 2) {
		size_t el;
		if (queue_all(s, !shared, &keys[0], ends[0].b, &el, err) != 0)
			return -1;
		ends[0].len = el;
		i = 1;
	} else {
		for (int pass = 0; pass < (shared ? 1 : 2); pass++) {
			bool kind = pass == 1;

			if (queue_key_of(s, kind, ws, "/", &keys[i++], err) != 0)
				return -1;
			snprintf(buf, sizeof(buf), "%s", ws);
			while ((slash = strrchr(buf, '/')) != NULL && slash != buf) {
				*slash = '\0';
				if (queue_key_of(s, kind, buf, SEP, &keys[i++], err) != 0)
					return -1;
			}
		}
		for (size_t j = 0; j < i; j++)
			ends[j].len = etcd_prefix_end(keys[j].b, keys[j].len, ends[j].b);
	}
	for (*n = 0; *n < i; (*n)++) {
		memset(&cmp[*n], 0, sizeof(cmp[*n]));
		cmp[*n].target = ETCD_TARGET_CREATE;
		cmp[*n].cmp = ETCD_CMP_EQUAL;
		cmp[*n].key = keys[*n].b;
		cmp[*n].key_len = keys[*n].len;
		cmp[*n].range_end = ends[*n].b;
		cmp[*n].range_end_len = ends[*n].len;
	}
	return 0;
}

int queue_compare_all(const struct etcd_state *s, struct etcd_compare *cmp,
		      struct key *key, struct key *end, struct wsl_error *err)
{
	size_t el;

	/* both kinds: a set is exclusive, it waits for every waiter */
	if (queue_all(s, true, key, end->b, &el, err) != 0)
		return -1;
	end->len = el;
	memset(cmp, 0, sizeof(*cmp));
	cmp->target = ETCD_TARGET_CREATE;
	cmp->cmp = ETCD_CMP_EQUAL;
	cmp->key = key->b;
	cmp->key_len = key->len;
	cmp->range_end = end->b;
	cmp->range_end_len = end->len;
	return 0;
}

int queue_key_lease(const struct etcd_state *s, const char *ws, long long lease,
		    struct key *k, struct wsl_error *err)
{
	char tail[SEP_LEN + LEASE_HEX + 1];

	snprintf(tail, sizeof(tail), SEP "%016llx", (unsigned long long)lease);
	return queue_key(s, ws, tail, k, err);
}

int queue_put_op(struct etcd_state *s, const struct owner *o, struct etcd_op *op,
		 char **value, struct wsl_error *err)
{
	char tail[SEP_LEN + LEASE_HEX + 1];
	size_t len = 0;

	*value = NULL;
	snprintf(tail, sizeof(tail), SEP "%016llx", (unsigned long long)s->lease);
	if (queue_key_of(s, s->want_shared, o->workspace_root, tail, &s->queue_key, err) != 0)
		return -1;
	*value = owner_bytes(o, &len);
	if (*value == NULL)
		return wsl_error_set(err, WSL_INTERNAL, "cannot format the owner document");
	memset(op, 0, sizeof(*op));
	op->type = ETCD_OP_PUT;
	op->key = s->queue_key.b;
	op->key_len = s->queue_key.len;
	op->value = *value;
	op->value_len = len;
	op->lease = s->lease;
	return 0;
}

int queue_put_ops(struct etcd_state *s, const struct owner *os, size_t n,
		  struct etcd_op *ops, struct key *keys, char **values, struct wsl_error *err)
{
	size_t i;

	for (i = 0; i < n; i++)
		values[i] = NULL;
	/* backwards, so that s->queue_key is left the first workspace's */
	for (i = n; i-- > 0;) {
		if (queue_put_op(s, &os[i], &ops[i], &values[i], err) != 0)
			return -1;
		keys[i] = s->queue_key;
		ops[i].key = keys[i].b;
	}
	return 0;
}

void queue_joined(struct etcd_state *s)
{
	s->queued = true;
	s->queue_lease = s->lease;
	s->wait_head = false;
}

/* Puts the queue keys of os[0..n) (one waiter: n workspaces at once) on
 * s's lease (granted or renewed first), in one transaction: they share
 * its revision, the waiter's one place in the order of every queue. */
static int queue_join(struct etcd_state *s, const struct owner *os, size_t n,
		      struct wsl_error *err)
{
	struct etcd_op ops[REGISTRY_MULTI_MAX];
	char *values[REGISTRY_MULTI_MAX] = { NULL };
	struct key *keys = calloc(n, sizeof(*keys));
	struct etcd_txn t = { 0 };
	struct etcd_txn_result res;
	size_t i;
	bool ok;
	int rc = -1;

	if (keys == NULL)
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	if (n == 0 || n > REGISTRY_MULTI_MAX) {
		free(keys);
		return wsl_error_set(err, WSL_INTERNAL, "%zu queue keys at once", n);
	}
	if (lease_ready(s, err) != 0 || queue_put_ops(s, os, n, ops, keys, values, err) != 0)
		goto out;
	t.success = ops;
	t.n_success = n;
	/* A put of the same key and value twice is harmless: resent as a read. */
	rc = etcd_txn(s->c, &t, &ok, &res, err);
	if (rc != 0 && !(err->outcome_unknown && err->code == WSL_BACKEND_UNAVAILABLE))
		goto out;
	wsl_error_clear(err);
	if (rc == 0) {
		note_rev(s, res.revision);
		etcd_txn_result_free(&res);
	}
	queue_joined(s);
	rc = 0;
out:
	for (i = 0; i < n; i++)
		free(values[i]);
	free(keys);
	return rc;
}

/* Fills e as the conflict that waiter kv (workspace path) is to a caller:
 * a live holder, "waiting ahead in the queue". */
static int ahead_entry(const struct etcd_kv *kv, const char *path, size_t len,
		       struct lock_entry *e, struct wsl_error *err)
{
	char why[256];

	memset(e, 0, sizeof(*e));
	e->state = LOCK_HELD;
	snprintf(e->workspace_root, sizeof(e->workspace_root), "%.*s", (int)len, path);
	crypto_path_key(e->workspace_root, e->key);
	snprintf(e->lock_path, sizeof(e->lock_path), "%s", kv->key);
	e->raw = dup_bytes(kv->value, kv->value_len);
	if (e->raw == NULL)
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	e->raw_len = kv->value_len;
	e->has_owner = owner_parse(e->raw, e->raw_len, &e->owner, why, sizeof(why)) == 0;
	e->probed = true;
	e->liveness = LIVENESS_LIVE;
	snprintf(e->reason, sizeof(e->reason),
		 "it is waiting ahead in the queue (its queue key lives on its own lease %llx)",
		 (unsigned long long)kv->lease);
	return 0;
}

/* The nearest waiter in kvs[0..n) ahead of ours (create revision below
 * mine; mine < 0: all of them) whose workspace overlaps one of os[0..nos),
 * passing own and s->stale_key; NULL when none. Its workspace goes to
 * *path, *len, the index of the first of ours it overlaps to *which. */
static const struct etcd_kv *nearest_ahead(const struct etcd_state *s, const struct etcd_kv *kvs,
					   size_t n, const struct etcd_kv *own, long long mine,
					   const struct owner *os, size_t nos,
					   const char **path, size_t *len, size_t *which)
{
	const struct etcd_kv *best = NULL;
	const char *p = NULL;
	size_t i, j, plen = 0;

	for (i = 0; i < n; i++) {
		if (&kvs[i] == own || (mine >= 0 && kvs[i].create_revision >= mine) ||
		    kvs[i].key_len > sizeof(s->stale_key.b) ||
		    same_bytes(kvs[i].key, kvs[i].key_len, s->stale_key.b, s->stale_key.len) ||
		    (s->stale_lease != 0 && kvs[i].lease == s->stale_lease) ||
		    !queue_path(s, &kvs[i], &p, &plen) ||
		    /* a reader waits for exclusive waiters only */
		    (s->want_shared && kvs[i].key_len > s->prefix_len + 5 &&
		     kvs[i].key[s->prefix_len + 5] == '+') ||
		    (best != NULL && kvs[i].create_revision <= best->create_revision))
			continue;
		for (j = 0; j < nos && !paths_overlap(p, plen, os[j].workspace_root); j++)
			;
		if (j == nos)
			continue;
		best = &kvs[i];
		*path = p;
		*len = plen;
		*which = j;
	}
	return best;
}

/* Whether the waiter of queue key kv has stopped renewing its lease: the
 * lease (its TTL + lock-delay, which is one TTL) has gone more than half
 * its granted TTL, one TTL of the waiter's, without a renewal, where a
 * live waiter renews every third of its TTL; or it is gone. Passing such
 * a waiter affects the order only: the lock's own compares still decide
 * who holds it. A question that fails proves nothing: false. */
static bool queue_stale(struct etcd_state *s, const struct etcd_kv *kv)
{
	struct wsl_error ignore = { 0 };
	long long left = 0, granted = 0;

	if (kv->lease == 0)
		return false;
	if (etcd_lease_ttl(s->c, kv->lease, &left, &granted, &ignore) != 0) {
		wsl_error_clear(&ignore);
		return false;
	}
	return left < 0 || 2 * left < granted;
}

int queue_ahead(struct etcd_state *s, const struct owner *o, struct lock_entry *ahead,
		struct wsl_error *err)
{
	size_t which;

	return queue_ahead_set(s, o, 1, ahead, &which, err);
}

int queue_turn(struct etcd_state *s, const struct owner *o, struct lock_entry *conflict,
	       struct wsl_error *err)
{
	struct lock_entry ahead;

	memset(&ahead, 0, sizeof(ahead));
	ahead.state = LOCK_FREE;
	if (lease_ready(s, err) != 0 ||
	    (!s->wait_head && queue_ahead(s, o, &ahead, err) != 0))
		return -1;
	if (ahead.state == LOCK_FREE)
		return 0;
	*conflict = ahead;
	return 1;
}

int queue_ahead_set(struct etcd_state *s, const struct owner *os, size_t nos,
		    struct lock_entry *ahead, size_t *which, struct wsl_error *err)
{
	const char *ws = os[0].workspace_root;
	struct key k;
	char end[KEY_MAX];
	size_t end_len;
	int tries;

	memset(ahead, 0, sizeof(*ahead));
	ahead->state = LOCK_FREE;
	*which = 0;
	if (queue_all(s, true, &k, end, &end_len, err) != 0)
		return -1;
	for (tries = 0; tries < 3; tries++) {
		struct etcd_kv *kvs = NULL, *own = NULL;
		const struct etcd_kv *best;
		const char *bpath = NULL;
		size_t n = 0, i, blen = 0;
		long long rev = 0, mine = -1;

		if (s->queued && s->queue_lease != s->lease &&
		    queue_join(s, os, nos, err) != 0)	/* the lease was granted anew */
			return -1;
		if (etcd_range(s->c, k.b, k.len, end, end_len, 0, &kvs, &n, &rev, err) != 0)
			return -1;
		note_rev(s, rev);
		for (i = 0; s->queued && i < n; i++)
			if (same_bytes(kvs[i].key, kvs[i].key_len, s->queue_key.b, s->queue_key.len))
				own = &kvs[i];
		if (s->queued && own == NULL) {
			/* Our lease ran out while we could not renew it: back
			 * to the end of the queue (nothing better is safe). */
			etcd_kvs_free(kvs, n);
			s->queue_lease = 0;
			continue;
		}
		if (own != NULL)
			mine = own->create_revision;
		best = nearest_ahead(s, kvs, n, own, mine, os, nos, &bpath, &blen, which);
		/* The same waiter ahead as at the last look, a wait slice
		 * ago: a waiter killed with -9 keeps its key until its lease
		 * (TTL + lock-delay) runs out; one that stopped renewing for
		 * a TTL is passed (so the ones behind it move up within about
		 * one TTL), and the nearest one behind it is watched. */
		if (best != NULL &&
		    same_bytes(best->key, best->key_len, s->ahead_key.b, s->ahead_key.len) &&
		    queue_stale(s, best)) {
			memcpy(s->stale_key.b, best->key, best->key_len);
			s->stale_key.len = best->key_len;
			/* all its keys: a waiter for several workspaces has
			 * one on each, on one lease */
			s->stale_lease = best->lease;
			best = nearest_ahead(s, kvs, n, own, mine, os, nos, &bpath, &blen, which);
		}
		s->wait_head = false;
		s->ahead_key.len = 0;
		if (best != NULL) {
			memcpy(s->wait_key.b, best->key, best->key_len);
			s->wait_key.len = best->key_len;
			s->ahead_key = s->wait_key;
			s->wait_rev = rev;
			if (ahead_entry(best, bpath, blen, ahead, err) != 0) {
				etcd_kvs_free(kvs, n);
				return -1;
			}
		}
		etcd_kvs_free(kvs, n);
		return 0;
	}
	return wsl_error_set(err, WSL_BACKEND_UNAVAILABLE,
			     "the queue key of %s kept vanishing (its lease could not be renewed)", ws);
}

void queue_watch_lock(struct etcd_state *s, const char *workspace, long long rev)
{
	struct wsl_error ignore = { 0 };

	if (key_make(s, "lock", workspace, &s->wait_key, &ignore) != 0) {
		s->wait_key.len = 0;
		wsl_error_clear(&ignore);
	}
	s->wait_rev = rev;
	s->wait_head = s->queued;
}

void queue_left(struct etcd_state *s)
{
	s->wait_head = false;
	s->queued = false;
	s->queue_lease = 0;
	s->wait_key.len = 0;
}

/* ---- registry_ops.wait_prepare and .wait ------------------------------ */

int etcd_wait_prepare(struct registry *reg, struct wsl_error *err)
{
	struct etcd_state *s = state(reg);

	/* hold.c calls it after the first conflict of s->want's acquire;
	 * etcd_wait watches from the revision that attempt read. */
	if (!s->queued && s->want != NULL &&
	    queue_join(s, s->want, s->want_n > 0 ? s->want_n : 1, err) != 0)
		return -1;
	return 1;
}

void etcd_wait_end(struct registry *reg)
{
	struct etcd_state *s = state(reg);
	struct wsl_error ignore = { 0 };

	if (!s->queued)
		return;
	if (s->lease != 0 && !s->lease_used) {
		etcd_lease_revoke(s->c, s->lease, &ignore);
		wsl_error_clear(&ignore);
		s->lease = 0;
	}
	queue_left(s);
}

static int sig_ready(int sigfd)
{
	struct pollfd p = { sigfd, POLLIN, 0 };

	return sigfd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

/* Renews the waiter's lease when a third of its TTL has passed. A lease
 * that is gone took the queue key with it: queue_ahead puts it again. */
static void queue_renew(struct etcd_state *s)
{
	struct wsl_error ignore = { 0 };
	long long now = platform_mono_ms(), ttl = 0;

	if (s->lease == 0 || s->lease_used || now - s->lease_sent_ms < s->ttl_s * 1000 / 3)
		return;
	if (etcd_lease_keepalive(s->c, s->lease, &ttl, &ignore) == 0) {
		if (ttl > 0)
			s->lease_sent_ms = now;
		else
			s->lease = 0;	/* lease_ready grants a new one */
	}
	wsl_error_clear(&ignore);
}

int etcd_wait(struct registry *reg, int sigfd, long timeout_ms, struct wsl_error *err)
{
	struct etcd_state *s = state(reg);
	long long deadline = platform_mono_ms() + timeout_ms;
	struct key all;
	char end[KEY_MAX];
	const char *key, *range_end = NULL;
	size_t key_len, end_len = 0;
	long long after;

	/* The key just ahead of us, or the holder in our way; without one
	 * (nothing read yet) any change to a lock. */
	if (s->wait_key.len > 0) {
		key = s->wait_key.b;
		key_len = s->wait_key.len;
		after = s->wait_rev;
	} else {
		if (key_make(s, "lock", "", &all, err) != 0)
			return -1;
		key = all.b;
		key_len = all.len;
		end_len = etcd_prefix_end(all.b, all.len, end);
		range_end = end;
		after = s->last_rev;
	}
	for (;;) {
		struct wsl_error werr = { 0 };
		long long now = platform_mono_ms(), left = deadline - now, slice;
		int rc;

		if (sig_ready(sigfd))
			return 1;
		if (left <= 0)
			return 0;
		queue_renew(s);
		/* the watch cannot renew the lease meanwhile: slices */
		slice = left < WAIT_SLICE_MS ? left : WAIT_SLICE_MS;
		if (s->queued && s->ttl_s * 1000 / 3 < slice)
			slice = s->ttl_s * 1000 / 3;
		rc = etcd_wait_change(s->c, key, key_len, range_end, end_len, after,
				      (long)slice, &werr);
		if (rc == 1)
			return 0;	/* it changed: the caller tries again */
		if (rc < 0) {
			/* No watch now: wait out the slice, the next attempt
			 * says whether etcd is reachable. */
			struct pollfd p = { sigfd, POLLIN, 0 };
			wsl_error_clear(&werr);
			left = deadline - platform_mono_ms();
			if (left > 0)
				poll(&p, sigfd >= 0 ? 1 : 0, (int)(left < slice ? left : slice));
		}
	}
}
