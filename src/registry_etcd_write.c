/* registry_etcd_write.c - the etcd backend's writes: acquire (one txn that
 * no overlapping key exists), release, retain and take-over (each a
 * compare-and-swap on the bytes read), the liveness lease a keeper's lock is
 * bound to, and settling a write whose outcome is unknown by reading back.
 * The invariants are atop registry_etcd.c.
 */
#include "registry_etcd.h"
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

/* ---- acquire ---------------------------------------------------------- */

bool outcome_unknown(const struct wsl_error *err)
{
	return err->code == WSL_BACKEND_UNAVAILABLE && err->outcome_unknown;
}

/* A liveness lease (TTL + lock-delay) for a holder that a keeper keeps
 * alive (and for a waiter's queue key); kept across attempts, and renewed
 * before it is used after a wait so that the holder's deadline counts from
 * a recent send. */
int lease_ready(struct etcd_state *s, struct wsl_error *err)
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

void lease_bind(struct registry *reg, const struct owner *o)
{
	struct etcd_state *s = state(reg);

	s->lease_used = true;
	s->lease_fresh = true;
	snprintf(s->lease_token, sizeof(s->lease_token), "%s", o->token);
	snprintf(s->lease_ws, sizeof(s->lease_ws), "%s", o->workspace_root);
}

/* Forgets the lease bound to token's lock (it no longer is: released,
 * retained or lost); with revoke, revokes it too. A release needs no
 * revoke: its transaction deleted the live key, so nothing is bound to the
 * lease any more, and it is left to expire at the server (TTL +
 * lock-delay) rather than cost every release a request. */
void lease_drop(struct etcd_state *s, const char *token, bool revoke)
{
	struct wsl_error ignore = { 0 };

	if (s->lease == 0 || !s->lease_used || strcmp(s->lease_token, token) != 0)
		return;
	if (revoke)
		etcd_lease_revoke(s->c, s->lease, &ignore);
	wsl_error_clear(&ignore);
	s->lease = 0;
	s->lease_used = false;
	s->lease_token[0] = '\0';
}

/* Remembers the lock just acquired (o's bytes value, create revision
 * create), so that its release needs no read first. */
void held_note(struct etcd_state *s, const struct owner *o,
		      const char *value, size_t len, long long create)
{
	free(s->held_value);
	s->held_value = dup_bytes(value, len);
	s->held_len = len;
	s->held_create = create;
	snprintf(s->held_token, sizeof(s->held_token), "%s", o->token);
}

void held_forget(struct etcd_state *s)
{
	free(s->held_value);
	s->held_value = NULL;
	s->held_token[0] = '\0';
}

/* The operations that give o's lock its liveness keys (keeper: the lease
 * key and the live key on the lease) or remove any (no keeper), into
 * ops[0..2); *doc is the lease key's value to free. */
int liveness_ops(struct etcd_state *s, const struct owner *o, bool keeper,
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
	*doc = lease_doc(s, o->token, s->lease, s->lease_for_pid);
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
	if (etcd_read_around(reg, o->workspace_root, true, &self, self_m, &ov, &n, err) != 0)
		return -1;
	if (same_bytes(self.raw, self.raw_len, value, value_len)) {
		*mine = true;
		lock_entry_free(&self);
		lock_overlaps_free(ov, n);
		return 0;
	}
	lockrules_conflict_keep_own(conflict, &self, o->workspace_root);
	for (i = 0; i < n; i++)
		lockrules_conflict_keep(conflict, &ov[i].entry);
	lock_overlaps_free(ov, n);
	return 0;
}

/* The compares "no lock overlaps ws" into cmp[0..): ws itself, every
 * proper ancestor ("/" excluded: it is never a workspace), then
 * everything below it ([keys[nc]], dend); returns their number or -1. */
int lock_compares(struct etcd_state *s, const char *ws, const struct key *self,
			 struct etcd_compare *cmp, struct key *keys, char *dend,
			 struct wsl_error *err)
{
	char buf[PATH_MAX];
	char *slash;
	int nc = 0, i;

	cmp[nc].key = self->b;
	cmp[nc].key_len = self->len;
	nc++;
	snprintf(buf, sizeof(buf), "%s", ws);
	while ((slash = strrchr(buf, '/')) != NULL && slash != buf) {
		*slash = '\0';
		if (key_make(s, "lock", buf, &keys[nc], err) != 0)
			return -1;
		cmp[nc].key = keys[nc].b;
		cmp[nc].key_len = keys[nc].len;
		nc++;
	}
	keys[nc] = *self;
	if (keys[nc].len + 1 >= sizeof(keys[nc].b))
		return wsl_error_set(err, WSL_UNSAFE_PATH, "etcd key for %s is too long", ws);
	keys[nc].b[keys[nc].len++] = '/';
	cmp[nc].key = keys[nc].b;
	cmp[nc].key_len = keys[nc].len;
	cmp[nc].range_end = dend;
	cmp[nc].range_end_len = etcd_prefix_end(keys[nc].b, keys[nc].len, dend);
	nc++;
	for (i = 0; i < nc; i++) {
		cmp[i].target = ETCD_TARGET_CREATE;
		cmp[i].cmp = ETCD_CMP_EQUAL;
		cmp[i].number = 0;
	}
	return nc;
}

int etcd_try_acquire(struct registry *reg, const struct owner *o,
			    const struct registry_deadline *dl, int *live_fd, struct lock_entry *conflict,
			    struct wsl_error *err)
{
	struct etcd_state *s = state(reg);
	const char *ws = o->workspace_root;
	size_t depth = depth_of(ws), nq = 0, value_len = 0, qroom = queue_compares_room(ws);
	struct etcd_compare *cmp = NULL;
	struct key *keys = NULL, *qkeys = NULL, self, ret, lease_k, live_k;
	char dend[KEY_MAX];
	struct etcd_op ops[5], join;
	struct etcd_txn t = { 0 };
	char *value = NULL, *doc = NULL, *join_value = NULL;
	int attempt, nc, rc = -1;

	if (reg->acquire_shared)
		return etcd_shared_acquire(reg, o, dl, live_fd, conflict, err);
	s->want_shared = false;
	memset(conflict, 0, sizeof(*conflict));
	conflict->state = LOCK_FREE;
	etcd_bound_requests(reg, dl);
	if (depth > DEPTH_MAX)
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "workspace %s is more than %d directories deep: too deep for one etcd transaction",
				     ws, DEPTH_MAX);
	s->want = o;	/* for etcd_wait_prepare: its queue key */
	s->want_n = 1;
	value = owner_bytes(o, &value_len);
	cmp = calloc(depth + 2 + qroom, sizeof(*cmp));
	keys = calloc(depth + 2, sizeof(*keys));
	qkeys = calloc(2 * qroom, sizeof(*qkeys));
	if (value == NULL || cmp == NULL || keys == NULL || qkeys == NULL) {
		wsl_error_set(err, WSL_INTERNAL, "cannot format the owner document");
		goto out;
	}
	if (key_make(s, "lock", ws, &self, err) != 0 ||
	    key_make(s, "retained", ws, &ret, err) != 0 ||
	    key_make(s, "lease", ws, &lease_k, err) != 0 ||
	    key_make(s, "live", ws, &live_k, err) != 0)
		goto out;
	nc = lock_compares(s, ws, &self, cmp, keys, dend, err);
	if (nc < 0)
		goto out;
	if (s->queued) {
		/* Our turn only when no overlapping waiter is ahead of us
		 * (the design is atop registry_etcd_queue.c); renewing the
		 * lease keeps our place. At the head (we waited for the
		 * holder) none can be: a waiter ahead has a lower revision,
		 * and none is put any more. The waiter ahead is the conflict
		 * (live): a dead or corrupt holder is judged at the head of
		 * the queue, and reading it now would cost every waiter
		 * three requests at every wake-up. */
		int turn = queue_turn(s, o, conflict, err);

		if (turn != 0) {
			if (turn > 0)
				rc = ACQUIRE_CONFLICT;
			goto out;
		}
		if (!s->wait_head) {
			/* The waiter ahead has just gone, most likely with the
			 * lock: a read says so, where a transaction that fails
			 * would cost etcd a write. */
			long long seen = s->last_rev;
			struct kv_meta m;
			bool mine;

			if (find_conflict(reg, o, value, value_len, conflict, &m, &mine, err) != 0) {
				lock_entry_free(conflict);
				goto out;
			}
			if (conflict->state != LOCK_FREE && !mine) {
				queue_watch_lock(s, conflict->workspace_root, seen);
				rc = ACQUIRE_CONFLICT;
				goto out;
			}
			lock_entry_free(conflict);
			conflict->state = LOCK_FREE;
		}
	} else if (queue_compares(s, ws, cmp + nc, qkeys, qkeys + qroom, &nq, err) != 0) {
		goto out;
	}
	s->lease_for_pid = reg->lease_for_pid;
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
	/* A waiter leaves the queue as it takes the lock. */
	ops[4].type = ETCD_OP_DELETE;
	ops[4].key = s->queue_key.b;
	ops[4].key_len = s->queue_key.len;
	t.compare = cmp;
	t.n_compare = (size_t)nc + nq;
	t.success = ops;
	t.n_success = s->queued ? 5 : 4;
	/* A run that may wait joins the queue in the same transaction when
	 * the compares fail: one write, not two. */
	if (!s->queued && live_fd != NULL && s->lease != 0 &&
	    (dl == NULL || dl->at_ms > platform_mono_ms())) {
		if (queue_put_op(s, o, &join, &join_value, err) != 0)
			goto out;
		t.failure = &join;
		t.n_failure = 1;
	}

	for (attempt = 0; attempt < 20; attempt++) {
		struct etcd_txn_result res;
		struct kv_meta m;
		long long seen;
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
		seen = res.revision;	/* a conflict was there */
		etcd_txn_result_free(&res);
		if (t.n_failure > 0) {
			/* Queued now: wait as a waiter does (its compares,
			 * its place in the queue). */
			queue_joined(s);
			free(doc);
			free(value);
			free(cmp);
			free(keys);
			free(qkeys);
			free(join_value);
			return etcd_try_acquire(reg, o, dl, live_fd, conflict, err);
		}
		if (find_conflict(reg, o, value, value_len, conflict, &m, &mine, err) != 0) {
			lock_entry_free(conflict);
			goto out;
		}
		if (mine) {
			reg->fence = m.create_rev;
			break;
		}
		if (conflict->state != LOCK_FREE) {
			queue_watch_lock(s, conflict->workspace_root, seen);
			rc = ACQUIRE_CONFLICT;
			goto out;
		}
		/* No holder: a waiter queued ahead (then a newcomer waits
		 * behind it), or released between the compare and the read:
		 * try again. */
		if (!s->queued) {
			if (queue_ahead(s, o, conflict, err) != 0)
				goto out;
			if (conflict->state != LOCK_FREE) {
				rc = ACQUIRE_CONFLICT;
				goto out;
			}
			/* No overlapping waiter (it left, or the whole-queue
			 * compare of a deep workspace met an unrelated one):
			 * the lock's compares alone decide. */
			t.n_compare = (size_t)nc;
		}
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
		/* a run's command: the file its nested runs hold */
		if (!s->lease_for_pid)
			etcd_nest_make(s, o->token, live_fd);
	}
	held_note(s, o, value, value_len, reg->fence);
	queue_left(s);
	rc = ACQUIRE_DONE;
out:
	if (rc != ACQUIRE_CONFLICT)
		s->want = NULL;
	free(doc);
	free(value);
	free(cmp);
	free(keys);
	free(qkeys);
	free(join_value);
	return rc;
}

/* ---- release, retain -------------------------------------------------- */

/* The compare-and-swap guard of a lock read as e/m. */
void guard(struct etcd_compare cmp[2], const struct key *k,
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

int etcd_release(struct registry *reg, const char *workspace,
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

	etcd_bound_requests(reg, NULL);
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
	if (s->held_shared && s->held_value != NULL && strcmp(s->held_token, token) == 0)
		return etcd_shared_release(reg, workspace, token, NULL, released, err);
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
			lease_drop(s, token, false);
			held_forget(s);
			return 0;
		}
	}
	for (attempt = 0; attempt < 10; attempt++) {
		bool ok;

		if (read_entry(s, workspace, false, &e, &m, err) != 0)
			return -1;
		if (e.shared) {	/* one reader leaves (registry_etcd_shared.c) */
			rc = etcd_shared_release(reg, workspace, token, &e, released, err);
			goto out;
		}
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
	lease_drop(s, token, false);
	/* An acquire's lease, renewed by its keeper elsewhere: its keys are
	 * gone, and so is the lease, so that the keeper's next renewal (or
	 * the check a poke asks for) finds it ended. */
	if (m.lease_for_pid && m.live_lease != 0 && m.live_lease != s->lease) {
		struct wsl_error ignore = { 0 };
		etcd_lease_revoke(s->c, m.live_lease, &ignore);
		wsl_error_clear(&ignore);
	}
	if (strcmp(s->held_token, token) == 0)
		held_forget(s);
	if (released != NULL)
		*released = e.owner;
	rc = 0;
out:
	lock_entry_free(&e);
	return rc;
}

int etcd_retain(struct registry *reg, const char *workspace,
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

	etcd_bound_requests(reg, NULL);
	if (key_make(s, "lock", workspace, &lk, err) != 0 ||
	    key_make(s, "retained", workspace, &rk, err) != 0)
		return -1;
	if (read_entry(s, workspace, false, &e, &m, err) != 0)
		return -1;
	if (e.shared) {
		rc = etcd_shared_retain(reg, workspace, token, &e, json, err);
		goto out;
	}
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
	/* Of a set held at once, the lease goes with the last one retained:
	 * revoked now, it would make the others read dead before they are
	 * retained too. */
	if (!set_names(s, token) || ++s->set->retained >= s->set->n)
		lease_drop(s, token, true);
	rc = 0;
out:
	lock_entry_free(&e);
	return rc;
}

/* ---- take-over -------------------------------------------------------- */

/* One journal line as journal.c writes it (journal.h has no function that
 * returns the line): the same JSON object, '\n' terminated. */
char *journal_line(const char *action, const char *workspace,
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

int etcd_take_over(struct registry *reg, const char *workspace,
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
	etcd_bound_requests(reg, NULL);
	if (key_make(s, "lock", workspace, &lk, err) != 0 ||
	    key_make(s, "retained", workspace, &rk, err) != 0 ||
	    key_make(s, "lease", workspace, &lease_k, err) != 0 ||
	    key_make(s, "live", workspace, &live_k, err) != 0)
		return -1;
	if (read_entry(s, workspace, true, prior, &m, err) != 0)
		return -1;
	if (prior->shared)
		return etcd_shared_take_over(reg, workspace, x, next, live_fd, prior, err);
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
		s->lease_for_pid = false;	/* recover -- CMD: a run's */
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
		etcd_nest_make(s, next->token, live_fd);
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

