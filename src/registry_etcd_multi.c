/* registry_etcd_multi.c - several workspaces at once on etcd (`run A B C
 * -- CMD`, `acquire A B C`, `release --token T A B C`; DESIGN.md sections
 * 2 and 5b), exclusive locks.
 *
 * No key kind of its own: a set is n ordinary locks (the keys atop
 * registry_etcd.c), one owner document each, all with one token, written
 * together:
 *
 *  - Acquiring is ONE transaction. Its compares: for every workspace W_i
 *    its own lock key, its proper ancestors' lock keys (one compare for an
 *    ancestor the workspaces share) and the range below it, all CREATE ==
 *    0; for a newcomer also "no overlapping waiter is queued" for each
 *    (registry_etcd_queue.c), or "nobody is queued" when those do not
 *    fit. Its puts: every lock key (no lease), every lease key and every
 *    live key, the live keys on ONE liveness lease; the retained keys
 *    (and a waiter's queue keys) are deleted. etcd serialises
 *    transactions, so the set is taken whole or not at all; every lock key
 *    gets the transaction's revision as its create revision: one fencing
 *    token for the set. etcd allows 128 compares (and 128 puts) in one
 *    transaction by default (--max-txn-ops): a set whose compares do not
 *    fit is refused (usage), never split; the puts (5 per workspace) always
 *    fit REGISTRY_MULTI_MAX.
 *  - Waiting: a waiter puts its queue key of every workspace in ONE
 *    transaction on its one lease, so they share one create revision,
 *    its place in a single order across every queue; it waits only for
 *    queue keys of lower revision whose workspace overlaps any of its own,
 *    and for holders (queue_ahead_set). Holders wait for nobody, and
 *    waiters only for lower revisions: the waits-for graph has no cycle,
 *    so two jobs naming `A B` and `B A` never deadlock, and FIFO holds
 *    across queues (no barging past an `A B` waiter on a free A).
 *  - One keeper renews the one lease; its check (check_own) and its
 *    watch cover every workspace of the set.
 *  - Releasing the set (a run's own release, `release --token T A B`) is
 *    ONE transaction: the exact bytes and create revision of every lock
 *    key, then its four keys deleted; all or nothing. recover and reclaim
 *    act on one workspace's lock, as for any lock.
 *
 * A crash can leave no partial set: the set is written and removed whole.
 * A killed holder leaves every lock of its set, each dead once the one
 * lease has expired (recovery required), as on disk.
 */
#include "registry_etcd.h"
#include "platform.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TXN_OPS_MAX 128		/* etcd's default --max-txn-ops */

/* ---- the set held ------------------------------------------------------ */

void set_forget(struct etcd_state *s)
{
	struct etcd_set *set = s->set;

	if (set == NULL)
		return;
	for (size_t i = 0; i < set->n; i++)
		free(set->vals[i]);
	free(set->vals);
	free(set->lens);
	free(set->os);
	free(set);
	s->set = NULL;
}

/* Remembers the set just acquired (its owners, bytes and create
 * revision): the keeper's check and watch cover it, its release needs no
 * read first. Out of memory: not remembered (the keeper then checks the
 * first workspace only, and the release reads first). */
static void set_note(struct etcd_state *s, const struct owner *os, size_t n,
		     char *const *vals, const size_t *lens, long long create)
{
	struct etcd_set *set = calloc(1, sizeof(*set));
	size_t i;

	set_forget(s);
	if (set == NULL)
		return;
	set->os = malloc(n * sizeof(*set->os));
	set->vals = calloc(n, sizeof(*set->vals));
	set->lens = calloc(n, sizeof(*set->lens));
	if (set->os == NULL || set->vals == NULL || set->lens == NULL) {
		free(set->os);
		free(set->vals);
		free(set->lens);
		free(set);
		return;
	}
	set->n = n;
	s->set = set;
	for (i = 0; i < n; i++) {
		set->os[i] = os[i];
		set->vals[i] = dup_bytes(vals[i], lens[i]);
		set->lens[i] = lens[i];
		if (set->vals[i] == NULL) {
			set_forget(s);
			return;
		}
	}
	set->create = create;
}

bool set_names(const struct etcd_state *s, const char *token)
{
	return s->set != NULL && strcmp(s->set->os[0].token, token) == 0;
}

int check_own_set(struct etcd_state *s, struct wsl_error *err)
{
	const struct etcd_set *set = s->set;
	const char *paths[REGISTRY_MULTI_MAX];
	struct lock_entry e[REGISTRY_MULTI_MAX];
	struct kv_meta m[REGISTRY_MULTI_MAX];
	struct wsl_error rerr = { 0 };
	size_t i;
	int rc = 0;

	for (i = 0; i < set->n; i++)
		paths[i] = set->os[i].workspace_root;
	if (read_entries(s, paths, set->n, true, e, m, &rerr) != 0) {
		wsl_error_clear(&rerr);
		return 0;	/* a read that fails proves nothing */
	}
	for (i = 0; i < set->n && rc == 0; i++) {
		if (!same_bytes(e[i].raw, e[i].raw_len, set->vals[i], set->lens[i]))
			rc = wsl_error_set(err, WSL_OWNERSHIP_LOST,
					   "the lock of %s was %s while this command held it",
					   paths[i], e[i].state == LOCK_FREE ? "deleted" :
					   "changed (another owner holds it now)");
		else if (e[i].liveness != LIVENESS_LIVE)
			rc = wsl_error_set(err, WSL_OWNERSHIP_LOST,
					   "the liveness key of %s was removed (its lease expired or was revoked) while this command held it",
					   paths[i]);
	}
	for (i = 0; i < set->n; i++)
		lock_entry_free(&e[i]);
	return rc;
}

/* ---- acquire ----------------------------------------------------------- */

/* The compares of one transaction, each with its own copy of its key and
 * range end; a compare made twice (an ancestor two workspaces share) is
 * kept once. need counts them all, kept or not (for the message). */
struct cmps {
	struct etcd_compare c[TXN_OPS_MAX];
	struct key keys[TXN_OPS_MAX];
	struct key ends[TXN_OPS_MAX];
	size_t n, need;
};

static bool cmp_same(const struct etcd_compare *a, const struct etcd_compare *b)
{
	return a->target == b->target && a->cmp == b->cmp && a->number == b->number &&
	       same_bytes(a->key, a->key_len, b->key, b->key_len) &&
	       (a->range_end == NULL) == (b->range_end == NULL) &&
	       (a->range_end == NULL ||
		same_bytes(a->range_end, a->range_end_len, b->range_end, b->range_end_len));
}

/* Adds cp[0..n) to cs, each once. */
static void cmps_add(struct cmps *cs, const struct etcd_compare *cp, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct etcd_compare *d;
		size_t j;

		for (j = 0; j < cs->n && !cmp_same(&cs->c[j], &cp[i]); j++)
			;
		if (j < cs->n)
			continue;
		cs->need++;
		if (cs->n == TXN_OPS_MAX || cp[i].key_len > sizeof(cs->keys[0].b) ||
		    cp[i].range_end_len > sizeof(cs->ends[0].b))
			continue;	/* counted: cs->need > cs->n says it */
		d = &cs->c[cs->n];
		*d = cp[i];
		memcpy(cs->keys[cs->n].b, cp[i].key, cp[i].key_len);
		d->key = cs->keys[cs->n].b;
		if (cp[i].range_end != NULL) {
			memcpy(cs->ends[cs->n].b, cp[i].range_end, cp[i].range_end_len);
			d->range_end = cs->ends[cs->n].b;
		}
		cs->n++;
	}
}

/* The lock compares of every workspace of os[0..n) into cs (see the top);
 * -1 with WSL_USAGE when they do not fit in one transaction. */
static int lock_cmps(struct etcd_state *s, const struct owner *os, size_t n,
		     struct cmps *cs, struct wsl_error *err)
{
	struct etcd_compare *cmp = calloc(DEPTH_MAX + 2, sizeof(*cmp));
	struct key *keys = calloc(DEPTH_MAX + 2, sizeof(*keys)), self;
	char *dend = malloc(KEY_MAX);
	int rc = -1;

	if (cmp == NULL || keys == NULL || dend == NULL) {
		wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const char *ws = os[i].workspace_root;
		int nc;

		if (depth_of(ws) > DEPTH_MAX) {
			wsl_error_set(err, WSL_UNSAFE_PATH,
				      "workspace %s is more than %d directories deep: too deep for one etcd transaction",
				      ws, DEPTH_MAX);
			goto out;
		}
		if (key_make(s, "lock", ws, &self, err) != 0)
			goto out;
		nc = lock_compares(s, ws, &self, cmp, keys, dend, err);
		if (nc < 0)
			goto out;
		cmps_add(cs, cmp, (size_t)nc);
	}
	if (cs->need > cs->n) {
		wsl_error_set(err, WSL_USAGE,
			      "these %zu workspaces need %zu compares in one etcd transaction (each one's own key, its parent directories and the range below it), more than the %d etcd allows by default: name fewer, or workspaces that share more parent directories",
			      n, cs->need, TXN_OPS_MAX);
		goto out;
	}
	rc = 0;
out:
	free(cmp);
	free(keys);
	free(dend);
	return rc;
}

/* A newcomer's queue compares of every workspace (no overlapping waiter
 * ahead), after the lock compares in cs; the one "nobody is queued" when
 * they do not fit. */
static int queue_cmps(struct etcd_state *s, const struct owner *os, size_t n,
		      struct cmps *cs, struct wsl_error *err)
{
	size_t nlock = cs->n, i;
	/* queue_compares_room: at most 2 x DEPTH_MAX (both kinds of waiter) */
	struct etcd_compare *cmp = calloc(2 * DEPTH_MAX + 2, sizeof(*cmp));
	struct key *keys = calloc(2 * (2 * DEPTH_MAX + 2), sizeof(*keys));
	int rc = -1;

	if (keys == NULL || cmp == NULL) {
		free(cmp);
		free(keys);
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	}
	for (i = 0; i < n; i++) {
		size_t room = queue_compares_room(os[i].workspace_root), nq = 0;

		if (queue_compares(s, os[i].workspace_root, cmp, keys, keys + room, &nq,
				   err) != 0)
			goto out;
		cmps_add(cs, cmp, nq);
	}
	if (cs->need > cs->n) {
		cs->n = cs->need = nlock;
		if (cs->n == TXN_OPS_MAX) {
			rc = wsl_error_set(err, WSL_USAGE,
					   "these %zu workspaces need more than the %d compares etcd allows in one transaction by default: name fewer",
					   n, TXN_OPS_MAX);
			goto out;
		}
		if (queue_compare_all(s, &cs->c[cs->n], &cs->keys[cs->n], &cs->ends[cs->n],
				      err) != 0)
			goto out;
		cs->n++;
		cs->need++;
	}
	rc = 0;
out:
	free(cmp);
	free(keys);
	return rc;
}

/* After a failed compare: the conflict on os[0..n) ranked as the local
 * backend ranks it (the one waiting cannot cure first, else the first in
 * argument order) into *conflict, its index to *which; LOCK_FREE when
 * none is there any more. *mine (and *create) when the first workspace's
 * lock holds our bytes: the set's put was applied after all. */
static int find_conflicts(struct registry *reg, const struct owner *os, size_t n,
			  char *const *vals, const size_t *lens, struct lock_entry *conflict,
			  size_t *which, bool *mine, long long *create, struct wsl_error *err)
{
	*mine = false;
	for (size_t i = 0; i < n; i++) {
		const char *ws = os[i].workspace_root;
		struct lock_entry self, c;
		struct overlap *ov = NULL;
		struct kv_meta m;
		size_t nov = 0;

		if (etcd_read_around(reg, ws, true, &self, &m, &ov, &nov, err) != 0)
			return -1;
		if (i == 0 && same_bytes(self.raw, self.raw_len, vals[0], lens[0])) {
			*mine = true;
			*create = m.create_rev;
			lock_entry_free(&self);
			lock_overlaps_free(ov, nov);
			return 0;
		}
		memset(&c, 0, sizeof(c));
		c.state = LOCK_FREE;
		lockrules_conflict_keep_own(&c, &self, ws);
		for (size_t j = 0; j < nov; j++)
			lockrules_conflict_keep(&c, &ov[j].entry);
		lock_overlaps_free(ov, nov);
		if (lockrules_conflict_take(conflict, &c))
			*which = i;
	}
	return 0;
}

/* The state of one acquire attempt of a set: the transaction and what its
 * operations point to. */
struct attempt {
	struct cmps cs;
	size_t nlock;			/* cs.c[0..nlock): the lock compares */
	struct key k[REGISTRY_MULTI_MAX][KINDS];
	struct key qk[REGISTRY_MULTI_MAX];	/* our queue keys */
	struct etcd_op ops[REGISTRY_MULTI_MAX * (KINDS + 1)];
	struct etcd_op join[REGISTRY_MULTI_MAX];
	char *vals[REGISTRY_MULTI_MAX];
	size_t lens[REGISTRY_MULTI_MAX];
	char *docs[REGISTRY_MULTI_MAX];
	char *join_vals[REGISTRY_MULTI_MAX];
	struct etcd_txn t;
};

static void attempt_free(struct attempt *a, size_t n)
{
	if (a == NULL)
		return;
	for (size_t i = 0; i < n; i++) {
		free(a->vals[i]);
		free(a->docs[i]);
		free(a->join_vals[i]);
	}
	free(a);
}

/* The success operations of a's transaction: for every workspace its lock
 * key, no retained key, its liveness keys (with a keeper: on s->lease),
 * and a waiter's queue key gone. */
static int success_ops(struct etcd_state *s, const struct owner *os, size_t n,
		       bool keeper, struct attempt *a, struct wsl_error *err)
{
	size_t i, o = 0;

	for (i = 0; i < n; i++) {
		const char *ws = os[i].workspace_root;

		for (size_t j = 0; j < KINDS; j++)
			if (key_make(s, kind_names[j], ws, &a->k[i][j], err) != 0)
				return -1;
		memset(&a->ops[o], 0, 2 * sizeof(a->ops[o]));
		/* The owner key on no lease: a crash leaves it (DESIGN.md 5b). */
		a->ops[o].type = ETCD_OP_PUT;
		a->ops[o].key = a->k[i][K_LOCK].b;
		a->ops[o].key_len = a->k[i][K_LOCK].len;
		a->ops[o].value = a->vals[i];
		a->ops[o].value_len = a->lens[i];
		a->ops[o + 1].type = ETCD_OP_DELETE;
		a->ops[o + 1].key = a->k[i][K_RETAINED].b;
		a->ops[o + 1].key_len = a->k[i][K_RETAINED].len;
		if (liveness_ops(s, &os[i], keeper, &a->k[i][K_LEASE], &a->k[i][K_LIVE],
				 &a->ops[o + 2], &a->docs[i], err) != 0)
			return -1;
		o += 4;
		if (s->queued) {
			if (queue_key_lease(s, ws, s->queue_lease, &a->qk[i], err) != 0)
				return -1;
			memset(&a->ops[o], 0, sizeof(a->ops[o]));
			a->ops[o].type = ETCD_OP_DELETE;
			a->ops[o].key = a->qk[i].b;
			a->ops[o].key_len = a->qk[i].len;
			o++;
		}
	}
	a->t.success = a->ops;
	a->t.n_success = o;
	return 0;
}

/* A waiter: our turn only when no overlapping waiter is ahead of us in any
 * of the queues, and (read, not a failed transaction) no holder in the
 * way. Returns 0 to go on to the transaction, ACQUIRE_CONFLICT, or -1. */
static int queued_turn(struct registry *reg, const struct owner *os, size_t n,
		       struct attempt *a, struct lock_entry *conflict, size_t *which,
		       bool *done, struct wsl_error *err)
{
	struct etcd_state *s = state(reg);
	struct lock_entry ahead;
	long long seen, create = 0;
	bool mine;

	*done = false;
	memset(&ahead, 0, sizeof(ahead));
	ahead.state = LOCK_FREE;
	if (lease_ready(s, err) != 0)
		return -1;
	if (s->wait_head)
		return 0;	/* we waited at the head for the holder */
	if (queue_ahead_set(s, os, n, &ahead, which, err) != 0)
		return -1;
	if (ahead.state != LOCK_FREE) {
		*conflict = ahead;
		return ACQUIRE_CONFLICT;
	}
	seen = s->last_rev;
	if (find_conflicts(reg, os, n, a->vals, a->lens, conflict, which, &mine, &create,
			   err) != 0) {
		lock_entry_free(conflict);
		return -1;
	}
	if (mine) {
		reg->fence = create;
		*done = true;
		return 0;
	}
	if (conflict->state != LOCK_FREE) {
		queue_watch_lock(s, conflict->workspace_root, seen);
		return ACQUIRE_CONFLICT;
	}
	return 0;
}

int etcd_try_acquire_multi(struct registry *reg, const struct owner *os, size_t n,
			   const struct registry_deadline *dl, int *live_fds,
			   struct lock_entry *conflict, size_t *which,
			   struct wsl_error *err)
{
	struct etcd_state *s = state(reg);
	bool keeper = live_fds != NULL, done = false;
	struct attempt *a = NULL;
	size_t i;
	int attempt, rc = -1;

	memset(conflict, 0, sizeof(*conflict));
	conflict->state = LOCK_FREE;
	*which = 0;
	if (n < 2 || n > REGISTRY_MULTI_MAX)
		return wsl_error_set(err, WSL_INTERNAL, "%zu workspaces at once", n);
	etcd_bound_requests(reg, dl);
	s->want = os;		/* for etcd_wait_prepare: its queue keys */
	s->want_n = n;
	s->want_shared = false;	/* several at once are exclusive */
	a = calloc(1, sizeof(*a));
	if (a == NULL) {
		wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		a->vals[i] = owner_bytes(&os[i], &a->lens[i]);
		if (a->vals[i] == NULL) {
			wsl_error_set(err, WSL_INTERNAL, "cannot format the owner document");
			goto out;
		}
	}
	if (lock_cmps(s, os, n, &a->cs, err) != 0)
		goto out;
	a->nlock = a->cs.n;
	if (s->queued) {
		rc = queued_turn(reg, os, n, a, conflict, which, &done, err);
		if (rc != 0)
			goto out;
		rc = -1;
	} else if (queue_cmps(s, os, n, &a->cs, err) != 0) {
		goto out;
	}
	s->lease_for_pid = reg->lease_for_pid;
	if (keeper && lease_ready(s, err) != 0)
		goto out;
	if (success_ops(s, os, n, keeper, a, err) != 0)
		goto out;
	a->t.compare = a->cs.c;
	a->t.n_compare = a->cs.n;
	/* A run that may wait joins every queue in the same transaction when
	 * the compares fail: one write, one revision for all its keys. */
	if (!s->queued && keeper && s->lease != 0 &&
	    (dl == NULL || dl->at_ms > platform_mono_ms())) {
		if (queue_put_ops(s, os, n, a->join, a->qk, a->join_vals, err) != 0)
			goto out;
		a->t.failure = a->join;
		a->t.n_failure = n;
	}
	for (attempt = 0; !done && attempt < 20; attempt++) {
		struct etcd_txn_result res;
		long long seen, create = 0;
		bool ok, mine;

		if (etcd_txn(s->c, &a->t, &ok, &res, err) != 0) {
			struct lock_entry e;
			struct kv_meta m;

			if (!outcome_unknown(err))
				goto out;
			/* Our bytes (our token) stored: our one transaction won. */
			if (read_entry(s, os[0].workspace_root, false, &e, &m, err) != 0)
				goto out;
			mine = same_bytes(e.raw, e.raw_len, a->vals[0], a->lens[0]);
			lock_entry_free(&e);
			wsl_error_clear(err);
			if (mine) {
				reg->fence = m.create_rev;
				done = true;
			}
			continue;	/* not applied: the compares make a retry safe */
		}
		note_rev(s, res.revision);
		if (ok) {
			reg->fence = res.revision;
			etcd_txn_result_free(&res);
			done = true;
			break;
		}
		seen = res.revision;
		etcd_txn_result_free(&res);
		if (a->t.n_failure > 0) {
			/* Queued now, in every queue at one revision: wait as
			 * a waiter does. */
			queue_joined(s);
			attempt_free(a, n);
			return etcd_try_acquire_multi(reg, os, n, dl, live_fds, conflict, which,
						      err);
		}
		if (find_conflicts(reg, os, n, a->vals, a->lens, conflict, which, &mine, &create,
				   err) != 0) {
			lock_entry_free(conflict);
			goto out;
		}
		if (mine) {
			reg->fence = create;
			done = true;
			break;
		}
		if (conflict->state != LOCK_FREE) {
			queue_watch_lock(s, conflict->workspace_root, seen);
			rc = ACQUIRE_CONFLICT;
			goto out;
		}
		if (!s->queued) {
			/* No holder: a waiter queued ahead, or a release
			 * between the compare and the read. */
			if (queue_ahead_set(s, os, n, conflict, which, err) != 0)
				goto out;
			if (conflict->state != LOCK_FREE) {
				rc = ACQUIRE_CONFLICT;
				goto out;
			}
			a->t.n_compare = a->nlock;	/* the lock compares decide */
		}
	}
	if (!done) {
		wsl_error_set(err, WSL_BACKEND_UNAVAILABLE,
			      "the etcd keys around %s and the other %zu workspaces kept changing; gave up after %d attempts",
			      os[0].workspace_root, n - 1, attempt);
		goto out;
	}
	if (keeper) {
		lease_bind(reg, &os[0]);
		for (i = 0; i < n; i++)
			live_fds[i] = -1;
		/* a run's command: the file its nested runs hold (one for the
		 * set: it is named after the token) */
		if (!s->lease_for_pid)
			etcd_nest_make(s, os[0].token, &live_fds[0]);
	}
	held_note(s, &os[0], a->vals[0], a->lens[0], reg->fence);
	set_note(s, os, n, a->vals, a->lens, reg->fence);
	queue_left(s);
	rc = ACQUIRE_DONE;
out:
	if (rc != ACQUIRE_CONFLICT) {
		s->want = NULL;
		s->want_n = 0;
	}
	attempt_free(a, n);
	return rc;
}

/* ---- release ----------------------------------------------------------- */

/* The release transaction of wss[0..n) whose lock keys were read as
 * e[]/m[] (or are ours, as held): every guard, then every key deleted. */
static int release_txn(struct etcd_state *s, const char *const *wss, size_t n,
		       const struct lock_entry *e, const struct kv_meta *m, bool *ok,
		       struct wsl_error *err)
{
	struct etcd_compare cmp[2 * REGISTRY_MULTI_MAX];
	struct etcd_op ops[KINDS * REGISTRY_MULTI_MAX];
	struct key *k = calloc(KINDS * n, sizeof(*k));
	struct etcd_txn t = { 0 };
	size_t i, j;
	int rc = -1;

	if (k == NULL)
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	memset(ops, 0, sizeof(ops));
	for (i = 0; i < n; i++) {
		for (j = 0; j < KINDS; j++) {
			struct key *kk = &k[KINDS * i + j];

			if (key_make(s, kind_names[j], wss[i], kk, err) != 0)
				goto out;
			ops[KINDS * i + j].type = ETCD_OP_DELETE;
			ops[KINDS * i + j].key = kk->b;
			ops[KINDS * i + j].key_len = kk->len;
		}
		guard(&cmp[2 * i], &k[KINDS * i + K_LOCK], &e[i], &m[i]);
	}
	t.compare = cmp;
	t.n_compare = 2 * n;
	t.success = ops;
	t.n_success = KINDS * n;
	rc = etcd_txn(s->c, &t, ok, NULL, err);
out:
	free(k);
	return rc;
}

/* Whether wss[0..n) is the set this process holds, in its order. */
static bool set_is(const struct etcd_state *s, const char *const *wss, size_t n,
		   const char *token)
{
	if (!set_names(s, token) || s->set->n != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (strcmp(s->set->os[i].workspace_root, wss[i]) != 0)
			return false;
	return true;
}

int etcd_release_multi(struct registry *reg, const char *const *wss, size_t n,
		       const char *token, struct owner *released, struct wsl_error *err)
{
	struct etcd_state *s = state(reg);
	struct lock_entry e[REGISTRY_MULTI_MAX];
	struct kv_meta m[REGISTRY_MULTI_MAX];
	size_t i;
	int attempt;
	bool ok = false, read = false;

	if (n < 2 || n > REGISTRY_MULTI_MAX)
		return wsl_error_set(err, WSL_INTERNAL, "%zu workspaces at once", n);
	etcd_bound_requests(reg, NULL);
	if (released == NULL && set_is(s, wss, n, token)) {
		/* Our own set, as we wrote it: no read first. A compare
		 * that fails goes the long way. */
		memset(e, 0, sizeof(e));
		memset(m, 0, sizeof(m));
		for (i = 0; i < n; i++) {
			e[i].raw = s->set->vals[i];
			e[i].raw_len = s->set->lens[i];
			m[i].create_rev = s->set->create;
		}
		if (release_txn(s, wss, n, e, m, &ok, err) != 0) {
			if (!outcome_unknown(err))
				return -1;
			wsl_error_clear(err);
			ok = false;
		}
		if (ok) {
			lease_drop(s, token, false);
			held_forget(s);
			set_forget(s);
			return 0;
		}
	}
	for (attempt = 0; attempt < 10; attempt++) {
		if (read_entries(s, wss, n, false, e, m, err) != 0)
			return -1;
		read = true;
		for (i = 0; i < n && !e[i].shared; i++)
			;
		if (i < n) {
			/* A shared lock among them (readers of one workspace
			 * each, taken one at a time): one release each, as
			 * the local backend does. */
			for (i = 0; i < n; i++)
				lock_entry_free(&e[i]);
			for (i = 0; i < n; i++)
				if (etcd_release(reg, wss[i], token,
						 released != NULL ? &released[i] : NULL, err) != 0) {
					wsl_error_detail(&err->workspace_root, wss[i]);
					return -1;
				}
			return 0;
		}
		for (i = 0; i < n; i++)
			if (lockrules_check_release(wss[i], token, &e[i], err) != 0) {
				wsl_error_detail(&err->workspace_root, wss[i]);
				goto fail;
			}
		if (release_txn(s, wss, n, e, m, &ok, err) != 0) {
			struct lock_entry now;
			struct kv_meta nm;
			bool gone;

			if (!outcome_unknown(err))
				goto fail;
			/* Settled by reading back: one transaction, so the
			 * first one's bytes gone means all are. */
			if (read_entry(s, wss[0], false, &now, &nm, err) != 0)
				goto fail;
			gone = !same_bytes(now.raw, now.raw_len, e[0].raw, e[0].raw_len);
			lock_entry_free(&now);
			if (!gone) {
				wsl_error_set(err, WSL_BACKEND_UNAVAILABLE,
					      "the release of %s and the other %zu workspaces could not be confirmed; they are still held",
					      wss[0], n - 1);
				goto fail;
			}
			wsl_error_clear(err);
			ok = true;
		}
		if (ok)
			break;
		/* One changed between the read and the compare: read them
		 * again and judge them afresh. */
		for (i = 0; i < n; i++)
			lock_entry_free(&e[i]);
		read = false;
	}
	if (!ok)
		return wsl_error_set(err, WSL_BACKEND_UNAVAILABLE,
				     "the locks of %s and the other %zu workspaces kept changing; nothing released",
				     wss[0], n - 1);
	lease_drop(s, token, false);
	/* An acquire's lease, renewed by its keeper elsewhere: gone with its
	 * keys, so that the keeper's next check finds it ended. */
	for (i = 0; i < n; i++) {
		bool again = false;

		for (size_t j = 0; j < i; j++)
			again = again || m[j].live_lease == m[i].live_lease;
		if (m[i].lease_for_pid && m[i].live_lease != 0 && m[i].live_lease != s->lease &&
		    !again) {
			struct wsl_error ignore = { 0 };
			etcd_lease_revoke(s->c, m[i].live_lease, &ignore);
			wsl_error_clear(&ignore);
		}
	}
	if (strcmp(s->held_token, token) == 0)
		held_forget(s);
	if (set_names(s, token))
		set_forget(s);
	for (i = 0; i < n; i++) {
		if (released != NULL)
			released[i] = e[i].owner;
		lock_entry_free(&e[i]);
	}
	return 0;
fail:
	for (i = 0; read && i < n; i++)
		lock_entry_free(&e[i]);
	return -1;
}
