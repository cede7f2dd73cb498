/* registry_etcd_shared_leave.c - a reader of a shared lock on etcd
 * leaves (release, reclaim, recover without a command), is retained, or is
 * taken over by recover: each a transaction that compares the reader's
 * exact document. The layout and why it is safe are atop
 * registry_etcd_shared.c.
 */
#include "registry_etcd.h"
#include "etcd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- leaving: release, reclaim, recover without a command ------------- */

/* Removes the reader name (its document: the len bytes at bytes) of W: with
 * its keys the marker when it is the last, else only its keys; extra (NULL:
 * none) rides in the same transaction. *lease_kv_lease and *for_pid get
 * what its lease key said (0: none). 0; 1 when its document is not there
 * (any more); -1 with err. */
static int leave(struct etcd_state *s, const char *ws, const char *name,
		 const char *bytes, size_t len, const struct etcd_op *extra,
		 long long *lease, bool *for_pid, struct wsl_error *err)
{
	struct key hk[KINDS], self, pre, after;
	char pend[KEY_MAX];
	size_t pend_len;
	struct etcd_compare cmp[3];
	struct etcd_op ops[KINDS + 3], fops[2];
	int attempt, j, rounds = 0;

	*lease = 0;
	*for_pid = false;
	for (j = 0; j < KINDS; j++)
		if (holder_key(s, j, ws, name, &hk[j], err) != 0)
			return -1;
	if (key_make(s, "lock", ws, &self, err) != 0 ||
	    holder_key(s, K_LOCK, ws, "", &pre, err) != 0)
		return -1;
	pend_len = etcd_prefix_end(pre.b, pre.len, pend);
	after = hk[K_LOCK];
	after.b[after.len++] = '\0';	/* the first key after ours */
	memset(ops, 0, sizeof(ops));
	ops[0].type = ETCD_OP_RANGE;	/* what its lease key said */
	ops[0].key = hk[K_LEASE].b;
	ops[0].key_len = hk[K_LEASE].len;
	for (j = 0; j < KINDS; j++) {
		ops[1 + j].type = ETCD_OP_DELETE;
		ops[1 + j].key = hk[j].b;
		ops[1 + j].key_len = hk[j].len;
	}
	memset(fops, 0, sizeof(fops));
	fops[0].type = ETCD_OP_RANGE;	/* the readers */
	fops[0].key = pre.b;
	fops[0].key_len = pre.len;
	fops[0].range_end = pend;
	fops[0].range_end_len = pend_len;
	fops[1].type = ETCD_OP_RANGE;	/* the marker */
	fops[1].key = self.b;
	fops[1].key_len = self.len;
	memset(cmp, 0, sizeof(cmp));
	cmp[0].target = ETCD_TARGET_VALUE;
	cmp[0].cmp = ETCD_CMP_EQUAL;
	cmp[0].key = hk[K_LOCK].b;
	cmp[0].key_len = hk[K_LOCK].len;
	cmp[0].value = bytes;
	cmp[0].value_len = len;
	for (attempt = 0; attempt < 10; attempt++) {
		struct etcd_txn t = { 0 };
		struct etcd_txn_result res;
		const struct etcd_kv *other = NULL;
		size_t nops = 1 + KINDS, i;
		bool ok, last = attempt == 0, mine = false, marked;

		/* First try as the last reader: nobody before or after us. */
		if (last) {
			cmp[1].target = cmp[2].target = ETCD_TARGET_CREATE;
			cmp[1].cmp = cmp[2].cmp = ETCD_CMP_EQUAL;
			cmp[1].number = cmp[2].number = 0;
			cmp[1].key = pre.b;
			cmp[1].key_len = pre.len;
			cmp[1].range_end = hk[K_LOCK].b;
			cmp[1].range_end_len = hk[K_LOCK].len;
			cmp[2].key = after.b;
			cmp[2].key_len = after.len;
			cmp[2].range_end = pend;
			cmp[2].range_end_len = pend_len;
			ops[nops].type = ETCD_OP_DELETE;
			ops[nops].key = self.b;
			ops[nops].key_len = self.len;
			nops++;
		}
		if (extra != NULL)
			ops[nops++] = *extra;
		t.compare = cmp;
		t.n_compare = last ? 3 : 2;
		t.success = ops;
		t.n_success = nops;
		t.failure = fops;
		t.n_failure = 2;
		if (etcd_txn(s->c, &t, &ok, &res, err) != 0) {
			struct etcd_kv *kvs = NULL;
			size_t n = 0;

			if (!outcome_unknown(err))
				return -1;
			/* Settled by reading back: our document gone means done. */
			wsl_error_clear(err);
			if (etcd_range(s->c, hk[K_LOCK].b, hk[K_LOCK].len, NULL, 0, 1,
				       &kvs, &n, NULL, err) != 0)
				return -1;
			mine = n == 1 && same_bytes(kvs[0].value, kvs[0].value_len, bytes, len);
			etcd_kvs_free(kvs, n);
			if (!mine)
				return 0;
			continue;
		}
		note_rev(s, res.revision);
		if (ok) {
			if (res.n_ops > 0 && res.ops[0].n_kvs > 0) {
				long long delay;
				lease_doc_names(&res.ops[0].kvs[0], "", lease, &delay, for_pid);
			}
			etcd_txn_result_free(&res);
			return 0;
		}
		if (res.n_ops != 2) {
			etcd_txn_result_free(&res);
			return wsl_error_set(err, WSL_IO, "etcd answered %zu reads, not 2", res.n_ops);
		}
		for (i = 0; i < res.ops[0].n_kvs; i++) {
			const struct etcd_kv *kv = &res.ops[0].kvs[i];
			if (same_bytes(kv->key, kv->key_len, hk[K_LOCK].b, hk[K_LOCK].len))
				mine = same_bytes(kv->value, kv->value_len, bytes, len);
			else if (other == NULL)
				other = kv;
		}
		marked = res.ops[1].n_kvs > 0 &&
			shared_marker(res.ops[1].kvs[0].value, res.ops[1].kvs[0].value_len);
		if (!mine) {
			etcd_txn_result_free(&res);
			return 1;
		}
		/* Not the last: leave comparing that another reader stays
		 * (or, with no marker to take, that nobody else is there). */
		memset(&cmp[1], 0, sizeof(cmp[1]));
		if (other != NULL) {
			memcpy(after.b, other->key, other->key_len < sizeof(after.b) ?
			       other->key_len : sizeof(after.b));
			after.len = other->key_len < sizeof(after.b) ? other->key_len : sizeof(after.b);
			cmp[1].target = ETCD_TARGET_CREATE;
			cmp[1].cmp = ETCD_CMP_EQUAL;
			cmp[1].key = after.b;
			cmp[1].key_len = after.len;
			cmp[1].number = other->create_revision;
		} else if (!marked) {
			cmp[1].target = ETCD_TARGET_CREATE;
			cmp[1].cmp = ETCD_CMP_EQUAL;
			cmp[1].key = self.b;
			cmp[1].key_len = self.len;
			cmp[1].number = res.ops[1].n_kvs > 0 ? res.ops[1].kvs[0].create_revision : 0;
		} else {
			/* The last after all (the others left): as the last. */
			after = hk[K_LOCK];
			after.b[after.len++] = '\0';
			etcd_txn_result_free(&res);
			if (++rounds < 10)
				attempt = -1;
			continue;
		}
		etcd_txn_result_free(&res);
	}
	return wsl_error_set(err, WSL_BACKEND_UNAVAILABLE,
			     "the readers of %s kept changing; nothing released", ws);
}

/* After a reader left: forgets (or revokes, an acquire's keeper's) its
 * lease and what this process remembered of it. */
static void left(struct etcd_state *s, const char *token, long long lease, bool for_pid)
{
	lease_drop(s, token, false);
	if (for_pid && lease != 0 && lease != s->lease) {
		struct wsl_error ignore = { 0 };
		etcd_lease_revoke(s->c, lease, &ignore);
		wsl_error_clear(&ignore);
	}
	if (strcmp(s->held_token, token) == 0) {
		held_forget(s);
		s->held_shared = false;
	}
}

int etcd_shared_release(struct registry *reg, const char *workspace,
			const char *token, const struct lock_entry *e,
			struct owner *released, struct wsl_error *err)
{
	struct etcd_state *s = state(reg);
	const struct lock_entry *h;
	struct lock_entry now;
	struct kv_meta m;
	long long lease = 0;
	bool for_pid = false;
	int rc;

	etcd_bound_requests(reg, NULL);
	if (e == NULL) {
		/* Our own reader, as we wrote it: no read first. */
		char why[256];
		struct owner mine;

		if (owner_parse(s->held_value, s->held_len, &mine, why, sizeof(why)) != 0)
			return wsl_error_set(err, WSL_INTERNAL, "our own owner document: %s", why);
		rc = leave(s, workspace, token, s->held_value, s->held_len, NULL,
			   &lease, &for_pid, err);
		if (rc < 0)
			return -1;
		if (rc == 0) {
			left(s, token, lease, for_pid);
			if (released != NULL)
				*released = mine;
			return 0;
		}
		/* Gone or changed: judged as any release is. */
		if (read_entry(s, workspace, false, &now, &m, err) != 0)
			return -1;
		rc = now.shared ? etcd_shared_release(reg, workspace, token, &now, released, err) :
			lockrules_check_release(workspace, token, &now, err) != 0 ? -1 :
			wsl_error_set(err, WSL_OWNERSHIP_LOST,
				      "the lock of %s is no longer this reader's", workspace);
		lock_entry_free(&now);
		return rc;
	}
	h = lock_entry_by_token(e, token);
	if (lockrules_check_release(workspace, token, h != NULL ? h : e, err) != 0)
		return -1;
	if (h == NULL)
		return wsl_error_set(err, WSL_OWNERSHIP_LOST,
				     "no reader of %s has this token; nothing released", workspace);
	rc = leave(s, workspace, h->holder, h->raw, h->raw_len, NULL, &lease, &for_pid, err);
	if (rc < 0)
		return -1;
	if (rc == 1)
		return wsl_error_set(err, WSL_OWNERSHIP_LOST,
				     "the reader's lock of %s changed while it was released; nothing released",
				     workspace);
	left(s, token, lease, for_pid);
	if (released != NULL)
		*released = h->owner;
	return 0;
}

int etcd_shared_retain(struct registry *reg, const char *workspace,
		       const char *token, const struct lock_entry *e,
		       const char *json, struct wsl_error *err)
{
	struct etcd_state *s = state(reg);
	const struct lock_entry *h = lock_entry_by_token(e, token);
	struct etcd_compare cmp;
	struct etcd_op op;
	struct etcd_txn t = { 0 };
	struct key lk, rk;
	bool ok;

	if (lockrules_check_retain(workspace, token, h != NULL ? h : e, err) != 0)
		return -1;
	if (h == NULL)
		return wsl_error_set(err, WSL_OWNERSHIP_LOST,
				     "no reader of %s has this token; nothing retained", workspace);
	if (holder_key(s, K_LOCK, workspace, h->holder, &lk, err) != 0 ||
	    holder_key(s, K_RETAINED, workspace, h->holder, &rk, err) != 0)
		return -1;
	memset(&cmp, 0, sizeof(cmp));
	cmp.target = ETCD_TARGET_VALUE;
	cmp.cmp = ETCD_CMP_EQUAL;
	cmp.key = lk.b;
	cmp.key_len = lk.len;
	cmp.value = h->raw;
	cmp.value_len = h->raw_len;
	memset(&op, 0, sizeof(op));
	op.type = ETCD_OP_PUT;
	op.key = rk.b;
	op.key_len = rk.len;
	op.value = json;
	op.value_len = strlen(json);
	t.compare = &cmp;
	t.n_compare = 1;
	t.success = &op;
	t.n_success = 1;
	if (etcd_txn(s->c, &t, &ok, NULL, err) != 0) {
		struct etcd_kv *kvs = NULL;
		size_t n = 0;

		if (!outcome_unknown(err))
			return -1;
		wsl_error_clear(err);
		if (etcd_range(s->c, rk.b, rk.len, NULL, 0, 1, &kvs, &n, NULL, err) != 0)
			return -1;
		ok = n == 1 && same_bytes(kvs[0].value, kvs[0].value_len, json, strlen(json));
		etcd_kvs_free(kvs, n);
		if (!ok)
			return wsl_error_set(err, WSL_BACKEND_UNAVAILABLE,
					     "retaining %s could not be confirmed", workspace);
	}
	if (!ok)
		return wsl_error_set(err, WSL_OWNERSHIP_LOST,
				     "the lock of %s changed while held; nothing retained", workspace);
	lease_drop(s, token, true);
	return 0;
}

/* ---- take-over -------------------------------------------------------- */

int etcd_shared_take_over(struct registry *reg, const char *workspace,
			  const struct registry_expect *x, const struct owner *next,
			  int *live_fd, struct lock_entry *prior,
			  struct wsl_error *err)
{
	struct etcd_state *s = state(reg);
	struct lock_entry *h = (struct lock_entry *)lock_entry_by_owner(prior, x->owner, x->raw,
									 x->raw_len);
	struct key ho[KINDS], hn[KINDS], jk;
	struct etcd_compare cmp;
	struct etcd_op ops[2 * KINDS + 1], jop;
	struct etcd_txn t = { 0 };
	struct etcd_txn_result res;
	char suffix[64], rnd[17], name[WSL_KEY_HEX + 1];
	char *line = NULL, *value = NULL, *doc = NULL;
	size_t line_len = 0, value_len = 0;
	struct timespec ts;
	long long lease = 0;
	bool ok, for_pid = false;
	int j, rc = -1;

	if (lockrules_check_alone(workspace, x, prior, err) != 0)
		return -1;
	if (h != NULL) {
		/* The one reader x names is the prior owner. */
		struct lock_entry pick = *h;

		memset(h, 0, sizeof(*h));
		lock_entry_free(prior);
		*prior = pick;
	}
	if (lockrules_check_take_over(workspace, x, prior, err) != 0)
		return -1;
	snprintf(name, sizeof(name), "%s", prior->holder);
	clock_gettime(CLOCK_REALTIME, &ts);
	crypto_random_hex(rnd, 8);
	snprintf(suffix, sizeof(suffix), "%020lld-%s",
		 (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000, rnd);
	if (key_make(s, "journal/", suffix, &jk, err) != 0)
		return -1;
	line = journal_line(prior->state == LOCK_CORRUPT ? "clear-corrupt" : x->action,
			    workspace, x, prior, next, &line_len);
	if (line == NULL)
		return wsl_error_set(err, WSL_INTERNAL, "cannot format a journal line");
	memset(&jop, 0, sizeof(jop));
	jop.type = ETCD_OP_PUT;
	jop.key = jk.b;
	jop.key_len = jk.len;
	jop.value = line;
	jop.value_len = line_len;
	if (next == NULL) {
		/* reclaim, recover without a command: the reader leaves */
		rc = leave(s, workspace, name, prior->raw, prior->raw_len, &jop, &lease,
			   &for_pid, err);
		if (rc == 1)
			rc = wsl_error_set(err, WSL_OWNER_MISMATCH,
					   "the reader's lock of %s changed while it was being taken over; nothing changed",
					   workspace);
		if (rc == 0) {
			left(s, name, lease, for_pid);
			wsl_error_clear(err);
		}
		goto out;
	}
	/* recover -- CMD: its successor, a reader too, under its own token */
	for (j = 0; j < KINDS; j++)
		if (holder_key(s, j, workspace, name, &ho[j], err) != 0 ||
		    holder_key(s, j, workspace, next->token, &hn[j], err) != 0)
			goto out;
	value = owner_bytes(next, &value_len);
	if (value == NULL) {
		wsl_error_set(err, WSL_INTERNAL, "cannot format the owner document");
		goto out;
	}
	s->lease_for_pid = false;	/* recover -- CMD: a run's */
	if (live_fd != NULL && lease_ready(s, err) != 0)
		goto out;
	memset(ops, 0, sizeof(ops));
	for (j = 0; j < KINDS; j++) {
		ops[j].type = ETCD_OP_DELETE;
		ops[j].key = ho[j].b;
		ops[j].key_len = ho[j].len;
	}
	ops[KINDS].type = ETCD_OP_PUT;
	ops[KINDS].key = hn[K_LOCK].b;
	ops[KINDS].key_len = hn[K_LOCK].len;
	ops[KINDS].value = value;
	ops[KINDS].value_len = value_len;
	if (liveness_ops(s, next, live_fd != NULL, &hn[K_LEASE], &hn[K_LIVE],
			 &ops[KINDS + 1], &doc, err) != 0)
		goto out;
	ops[KINDS + 3] = jop;
	memset(&cmp, 0, sizeof(cmp));
	cmp.target = ETCD_TARGET_VALUE;
	cmp.cmp = ETCD_CMP_EQUAL;
	cmp.key = ho[K_LOCK].b;
	cmp.key_len = ho[K_LOCK].len;
	cmp.value = prior->raw;
	cmp.value_len = prior->raw_len;
	t.compare = &cmp;
	t.n_compare = 1;
	t.success = ops;
	t.n_success = KINDS + 4;
	if (etcd_txn(s->c, &t, &ok, &res, err) != 0) {
		struct etcd_kv *kvs = NULL;
		size_t n = 0;

		if (!outcome_unknown(err))
			goto out;
		/* Our journal key exists only if our transaction was applied. */
		wsl_error_clear(err);
		if (etcd_range(s->c, jk.b, jk.len, NULL, 0, 1, &kvs, &n, NULL, err) != 0)
			goto out;
		ok = n == 1;
		etcd_kvs_free(kvs, n);
		if (!ok) {
			wsl_error_set(err, WSL_BACKEND_UNAVAILABLE,
				      "taking over %s could not be confirmed; nothing changed", workspace);
			goto out;
		}
		if (etcd_range(s->c, hn[K_LOCK].b, hn[K_LOCK].len, NULL, 0, 1, &kvs, &n, NULL,
			       err) != 0)
			goto out;
		reg->fence = n == 1 ? kvs[0].create_revision : 0;
		etcd_kvs_free(kvs, n);
	} else {
		long long rev = res.revision;

		note_rev(s, rev);
		etcd_txn_result_free(&res);
		if (!ok) {
			wsl_error_set(err, WSL_OWNER_MISMATCH,
				      "the reader's lock of %s changed while it was being taken over; nothing changed",
				      workspace);
			goto out;
		}
		reg->fence = rev;
	}
	if (live_fd != NULL) {
		lease_bind(reg, next);
		etcd_nest_make(s, next->token, live_fd);
	}
	held_note(s, next, value, value_len, reg->fence);
	s->held_shared = true;
	wsl_error_clear(err);
	rc = 0;
out:
	free(doc);
	free(line);
	free(value);
	return rc;
}
