/* lockrules.c - every lock rule, once: conflict ranking, the conflicts
 * waiting cannot cure, and the release, retain and take-over checks (see
 * lockrules.h). Only decisions and their messages: no I/O. */
#include "lockrules.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *lock_state_name(enum lock_state s)
{
	switch (s) {
	case LOCK_FREE:
		return "free";
	case LOCK_HELD:
		return "held";
	case LOCK_RETAINED:
		return "retained";
	case LOCK_CORRUPT:
	default:
		return "corrupt";
	}
}

void lock_entry_free(struct lock_entry *e)
{
	for (size_t i = 0; i < e->n_holders; i++)
		lock_entry_free(&e->holders[i]);
	free(e->holders);
	free(e->raw);
	free(e->retained);
	free(e->behind);
	memset(e, 0, sizeof(*e));
	e->state = LOCK_FREE;
}

void lock_overlaps_free(struct overlap *o, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		lock_entry_free(&o[i].entry);
	free(o);
}

struct lock_entry *lock_overlap_push(struct overlap **items, size_t *n,
				     size_t *cap, bool ancestor,
				     struct wsl_error *err)
{
	if (*n == *cap) {
		size_t grown = *cap ? *cap * 2 : 8;
		struct overlap *p = realloc(*items, grown * sizeof(*p));
		if (p == NULL) {
			wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
			return NULL;
		}
		*items = p;
		*cap = grown;
	}
	memset(&(*items)[*n], 0, sizeof((*items)[*n]));
	(*items)[*n].ancestor = ancestor;
	return &(*items)[(*n)++].entry;
}

const struct lock_entry *lock_entry_by_token(const struct lock_entry *e,
					     const char *token)
{
	if (!e->shared)
		return e->has_owner && strcmp(e->owner.token, token) == 0 ? e : NULL;
	for (size_t i = 0; i < e->n_holders; i++)
		if (e->holders[i].has_owner && strcmp(e->holders[i].owner.token, token) == 0)
			return &e->holders[i];
	return NULL;
}

const struct lock_entry *lock_entry_by_owner(const struct lock_entry *e,
					     const struct owner *o,
					     const char *raw, size_t raw_len)
{
	if (!e->shared)
		return e;
	for (size_t i = 0; i < e->n_holders; i++) {
		const struct lock_entry *h = &e->holders[i];

		if (o != NULL ? h->has_owner && owner_equal(o, &h->owner) :
		    h->raw != NULL && raw != NULL && h->raw_len == raw_len &&
		    memcmp(h->raw, raw, raw_len) == 0)
			return h;
	}
	return NULL;
}

/* ---- conflicts -------------------------------------------------------- */

bool lockrules_compatible(bool shared, const struct lock_entry *e)
{
	if (!shared || !e->shared || e->queued)
		return false;
	for (size_t i = 0; i < e->n_holders; i++)
		if (e->holders[i].state == LOCK_CORRUPT)
			return false;
	return true;
}

/* How much waiting cannot cure a conflict: higher is reported first. */
static int conflict_rank(const struct lock_entry *e)
{
	switch (e->state) {
	case LOCK_CORRUPT:
		return 4;
	case LOCK_RETAINED:
		return 3;
	case LOCK_HELD:
		return e->liveness == LIVENESS_DEAD ? 2 : 1;
	case LOCK_FREE:
	default:
		return 0;
	}
}

/* conflict_rank, and within a rank a dead holder first (a retained one
 * that is dead can be recovered now; a live one not yet). */
static int holder_rank(const struct lock_entry *e)
{
	return 2 * conflict_rank(e) + (e->probed && e->liveness == LIVENESS_DEAD);
}

size_t lockrules_representative(const struct lock_entry *h, size_t n)
{
	size_t best = 0;

	for (size_t i = 1; i < n; i++)
		if (holder_rank(&h[i]) > holder_rank(&h[best]))
			best = i;
	return best;
}

bool lockrules_conflict_worse(const struct lock_entry *cand, const struct lock_entry *best)
{
	return conflict_rank(cand) > conflict_rank(best);
}

void lockrules_conflict_keep(struct lock_entry *best, struct lock_entry *cand)
{
	if (best->state == LOCK_FREE || lockrules_conflict_worse(cand, best)) {
		lock_entry_free(best);
		*best = *cand;
	} else {
		lock_entry_free(cand);
	}
	memset(cand, 0, sizeof(*cand));
}

bool lockrules_conflict_take(struct lock_entry *best, struct lock_entry *cand)
{
	bool take = cand->state != LOCK_FREE &&
		    (best->state == LOCK_FREE || lockrules_conflict_worse(cand, best));

	if (take) {
		lock_entry_free(best);
		*best = *cand;
	} else {
		lock_entry_free(cand);
	}
	memset(cand, 0, sizeof(*cand));
	return take;
}

void lockrules_conflict_keep_own(struct lock_entry *best, struct lock_entry *own,
				 const char *workspace)
{
	if (own->state == LOCK_CORRUPT)
		snprintf(own->workspace_root, sizeof(own->workspace_root), "%s",
			 workspace);
	if (own->state != LOCK_FREE)
		lockrules_conflict_keep(best, own);
	else
		lock_entry_free(own);
}

void lockrules_describe_holder(const struct lock_entry *e, char *out, size_t len)
{
	if (e->queued) {
		snprintf(out, len,
			 "%s%s a waiter queued ahead (pid %ld, since %s) is served first",
			 e->behind ? e->behind : "nobody yet", e->behind ? ", and" : ":",
			 (long)e->owner.pid, e->owner.acquired_at);
		return;
	}
	if (!e->has_owner) {
		snprintf(out, len, "a corrupt lock (%s)", e->problem);
		return;
	}
	snprintf(out, len, "pid %ld on host %s (purpose \"%s\", operation %s, since %s)",
		 (long)e->owner.pid, e->owner.host, e->owner.purpose,
		 e->owner.operation_id, e->owner.acquired_at);
}

void lockrules_error_holder(struct wsl_error *err, const struct lock_entry *e)
{
	if (e->workspace_root[0] != '\0')
		wsl_error_detail(&err->workspace_root, e->workspace_root);
	if (e->has_owner)
		wsl_error_detail(&err->holder, e->raw);
	if (e->probed) {	/* a corrupt lock: only when its live file is held */
		wsl_error_detail(&err->liveness, liveness_name(e->liveness));
		wsl_error_detail(&err->liveness_reason, e->reason);
	}
	/* One reader of a shared lock among several: its own document names
	 * it (output's next step copies that one, not the representative). */
	if (e->state == LOCK_CORRUPT || lockrules_holder_document(e))
		wsl_error_detail(&err->path, e->lock_path);
	err->shared_holder = e->shared;
}

bool lockrules_holder_document(const struct lock_entry *e)
{
	size_t n = strlen(e->lock_path), suffix = strlen("/owner.json");

	return e->shared && e->holder[0] != '\0' && !e->etcd_key && e->has_owner &&
	       n > suffix && strcmp(e->lock_path + n - suffix, "/owner.json") == 0;
}

const char *lockrules_conflict_relation(const char *wanted, const struct lock_entry *e)
{
	size_t n = strlen(e->workspace_root);

	if (e->relation != NULL)
		return e->relation;
	if (strcmp(wanted, e->workspace_root) == 0)
		return "same";
	return strncmp(wanted, e->workspace_root, n) == 0 && wanted[n] == '/' ?
		"ancestor" : "descendant";
}

void lockrules_conflict_subject(const char *wanted, const struct lock_entry *e,
				char *out, size_t len)
{
	size_t n = strlen(e->workspace_root);

	if (strcmp(wanted, e->workspace_root) == 0)
		snprintf(out, len, "%s is", wanted);
	else if (strncmp(wanted, e->workspace_root, n) == 0 && wanted[n] == '/')
		snprintf(out, len, "%s overlaps its ancestor %s, which is", wanted,
			 e->workspace_root);
	else if (strncmp(e->workspace_root, wanted, strlen(wanted)) == 0 &&
		 e->workspace_root[strlen(wanted)] == '/')
		snprintf(out, len, "%s overlaps its descendant %s, which is", wanted,
			 e->workspace_root);
	else
		/* Found by identity (DESIGN.md section 3): a bind mount or
		 * another mount namespace reaches the same directory. */
		snprintf(out, len,
			 "%s is, or nests with, %s reached through another path (a bind mount or another mount), which is",
			 wanted, e->workspace_root);
}

/* A lock whose files are unsafe (e->unsafe): refused like an unsafe
 * registry, never acted on; a person fixes or removes it by hand. */
static int unsafe_lock(const char *ws, const struct lock_entry *e, struct wsl_error *err)
{
	wsl_error_detail(&err->path, e->lock_path);
	return wsl_error_set(err, WSL_UNSAFE_PATH,
			     "the lock of %s is unsafe (%s); nothing is repaired behind your back: after checking who made it so, fix its owner and mode (0700 directory, 0600 files) or remove it by hand",
			     ws, e->problem);
}

bool lockrules_corrupt_bytes_clearable(const struct lock_entry *e)
{
	size_t n = strlen(e->lock_path), suffix = strlen("/owner.json");

	return e->state == LOCK_CORRUPT && !e->unsafe && e->raw != NULL &&
		!(e->probed && e->liveness == LIVENESS_LIVE) &&
		(e->etcd_key ||
		 (n > suffix && strcmp(e->lock_path + n - suffix, "/owner.json") == 0));
}

bool lockrules_corrupt_clearable(const struct lock_entry *e)
{
	return lockrules_corrupt_bytes_clearable(e) && e->workspace_root[0] != '\0';
}

/* The details of a WSL_LOCK_CORRUPT error about e: its path, and, when
 * recover can clear it, its workspace (e's, else ws: the path it was
 * found by; NULL: none) and the flag for output.c's next step. err's
 * code and message are the caller's to set. */
static void corrupt_details(struct wsl_error *err, const struct lock_entry *e,
			    const char *ws)
{
	if (e->workspace_root[0] != '\0')
		ws = e->workspace_root;
	wsl_error_detail(&err->path, e->lock_path);
	err->corrupt_clearable = ws != NULL && lockrules_corrupt_bytes_clearable(e);
	if (err->corrupt_clearable)
		wsl_error_detail(&err->workspace_root, ws);
}

int lockrules_conflict_final(const char *ws, const struct lock_entry *e,
			     bool inside, struct wsl_error *err)
{
	char who[1024], subject[2 * PATH_MAX + 64];

	lockrules_describe_holder(e, who, sizeof(who));
	lockrules_conflict_subject(ws, e, subject, sizeof(subject));
	if (e->state == LOCK_CORRUPT && e->unsafe) {
		lockrules_error_holder(err, e);
		return unsafe_lock(ws, e, err);
	}
	if (e->state == LOCK_CORRUPT) {
		lockrules_error_holder(err, e);
		corrupt_details(err, e, NULL);
		return wsl_error_set(err, WSL_LOCK_CORRUPT,
				     "%s locked by a corrupt lock: %s%s%s%s; see 'wslock inspect'",
				     subject, e->problem,
				     strstr(e->problem, e->lock_path) ? "" : " (",
				     strstr(e->problem, e->lock_path) ? "" : e->lock_path,
				     strstr(e->problem, e->lock_path) ? "" : ")");
	}
	if (e->state == LOCK_RETAINED) {
		lockrules_error_holder(err, e);
		/* recover never displaces a live owner (75), retained or not. */
		if (e->probed && e->liveness != LIVENESS_DEAD)
			return wsl_error_set(err, WSL_RECOVERY_REQUIRED,
					     "%s retained for recovery (a failed command, or release --retain) by %s, which is %s (%s); 'wslock inspect' says why; once its holder has ended, 'wslock recover'",
					     subject, who, liveness_name(e->liveness), e->reason);
		return wsl_error_set(err, WSL_RECOVERY_REQUIRED,
				     "%s retained for recovery (a failed command, or release --retain) by %s; 'wslock inspect' says why, then 'wslock recover'",
				     subject, who);
	}
	if (e->liveness == LIVENESS_DEAD) {
		lockrules_error_holder(err, e);
		return wsl_error_set(err, WSL_RECOVERY_REQUIRED,
				     "%s locked by %s, which is dead (%s); check the workspace, then 'wslock recover'",
				     subject, who, e->reason);
	}
	if (inside) {
		lockrules_error_holder(err, e);
		return wsl_error_set(err, WSL_BUSY,
				     "%s locked by this command's own enclosing wslock run; waiting would never end",
				     subject);
	}
	return 0;
}

enum wsl_code lockrules_state_code(const struct lock_entry *e)
{
	switch (e->state) {
	case LOCK_FREE:
		return WSL_OK;
	case LOCK_CORRUPT:
		return WSL_LOCK_CORRUPT;
	case LOCK_RETAINED:
		return WSL_RECOVERY_REQUIRED;
	case LOCK_HELD:
	default:
		return e->probed && e->liveness == LIVENESS_LIVE ? WSL_BUSY :
			WSL_RECOVERY_REQUIRED;
	}
}

/* The rank of a state code for lockrules_worse_code: higher is worse. */
static int state_rank(enum wsl_code code)
{
	switch (code) {
	case WSL_OK:
		return 0;
	case WSL_BUSY:
		return 1;
	case WSL_RECOVERY_REQUIRED:
		return 2;
	case WSL_LOCK_CORRUPT:
		return 3;
	default:
		return 4;
	}
}

enum wsl_code lockrules_worse_code(enum wsl_code a, enum wsl_code b)
{
	return state_rank(b) > state_rank(a) ? b : a;
}

/* ---- release, retain, take-over --------------------------------------- */

int lockrules_check_release(const char *workspace, const char *token,
			    const struct lock_entry *e, struct wsl_error *err)
{
	switch (e->state) {
	case LOCK_FREE:
		return wsl_error_set(err, WSL_NOT_HELD, "%s is not locked", workspace);
	case LOCK_CORRUPT:
		if (e->unsafe)
			return unsafe_lock(workspace, e, err);
		corrupt_details(err, e, workspace);
		return wsl_error_set(err, WSL_LOCK_CORRUPT,
				     "the lock of %s is corrupt (%s); nothing released",
				     workspace, e->problem);
	default:
		break;
	}
	if (strcmp(e->owner.token, token) != 0) {
		lockrules_error_holder(err, e);
		if (e->owner.has_recovery_of && strcmp(e->owner.recovery_of, token) == 0)
			return wsl_error_set(err, WSL_OWNERSHIP_LOST,
					     "%s was taken over from token %.8s... by recover: it is now held by pid %ld on %s (token %.8s...); nothing released",
					     workspace, token, (long)e->owner.pid, e->owner.host,
					     e->owner.token);
		return wsl_error_set(err, WSL_OWNERSHIP_LOST,
				     "%s is held by pid %ld on %s with token %.8s..., not %.8s...: the lock was taken over (recover or reclaim) or the token is mistyped; nothing released",
				     workspace, (long)e->owner.pid, e->owner.host, e->owner.token, token);
	}
	if (e->state == LOCK_RETAINED) {
		lockrules_error_holder(err, e);
		return wsl_error_set(err, WSL_RECOVERY_REQUIRED,
				     "%s is retained for recovery; only 'wslock recover' with its exact owner clears it",
				     workspace);
	}
	return 0;
}

int lockrules_check_retain(const char *workspace, const char *token,
			   const struct lock_entry *e, struct wsl_error *err)
{
	if (e->state == LOCK_FREE)
		return wsl_error_set(err, WSL_OWNERSHIP_LOST,
				     "the lock of %s was removed while held; nothing retained",
				     workspace);
	if (!e->has_owner || strcmp(e->owner.token, token) != 0) {
		lockrules_error_holder(err, e);
		return wsl_error_set(err, WSL_OWNERSHIP_LOST,
				     "%s is now held by another owner; nothing retained", workspace);
	}
	if (e->state == LOCK_RETAINED) {
		lockrules_error_holder(err, e);
		return wsl_error_set(err, WSL_RECOVERY_REQUIRED,
				     "%s is already retained for recovery; only 'wslock recover' with its exact owner clears it",
				     workspace);
	}
	return 0;
}

/* Whether the expected bytes x and a corrupt lock's bytes e differ only
 * by one trailing newline, either way. */
static bool newline_apart(const struct registry_expect *x, const struct lock_entry *e)
{
	const char *a = x->raw, *b = e->raw;
	size_t na = x->raw_len, nb = e->raw_len;

	if (a == NULL || b == NULL)
		return false;
	if (na < nb) {
		const char *t = a;
		size_t n = na;

		a = b;
		na = nb;
		b = t;
		nb = n;
	}
	return na == nb + 1 && a[nb] == '\n' && memcmp(a, b, nb) == 0;
}

int lockrules_check_alone(const char *workspace, const struct registry_expect *x,
			  const struct lock_entry *e, struct wsl_error *err)
{
	const struct lock_entry *mine, *first = NULL;
	size_t i, n = 0;
	char who[600];

	if (!x->alone || !e->shared || e->holders == NULL)
		return 0;
	mine = lock_entry_by_owner(e, x->owner, x->raw, x->raw_len);
	for (i = 0; i < e->n_holders; i++) {
		const struct lock_entry *h = &e->holders[i];

		if (h == mine || h->state == LOCK_FREE || h->state == LOCK_RETAINED ||
		    (h->probed && h->liveness == LIVENESS_DEAD))
			continue;
		if (first == NULL)
			first = h;
		n++;
	}
	if (first == NULL)
		return 0;
	if (first->has_owner)
		snprintf(who, sizeof(who), "pid %ld on host %s, purpose \"%s\"",
			 (long)first->owner.pid, first->owner.host, first->owner.purpose);
	else
		snprintf(who, sizeof(who), "a reader whose document is corrupt");
	wsl_error_detail(&err->workspace_root, workspace);
	if (first->has_owner)
		wsl_error_detail(&err->holder, first->raw);
	if (first->probed) {
		wsl_error_detail(&err->liveness, liveness_name(first->liveness));
		wsl_error_detail(&err->liveness_reason, first->reason);
	}
	if (x->action != NULL && strcmp(x->action, "reclaim") == 0)
		return wsl_error_set(err, WSL_BUSY,
				     "live readers; the hook needs the workspace alone: %s is a shared lock that %zu other reader%s still hold%s (%s%s); not reclaimed (reclaim without '-- CMD' takes the dead reader over)",
				     workspace, n, n == 1 ? "" : "s", n == 1 ? "s" : "", who,
				     n > 1 ? ", and others" : "");
	return wsl_error_set(err, WSL_BUSY,
			     "%s is a shared lock that %zu other reader%s still hold%s (%s%s): the command would run beside %s, as a reader, and a repair needs the workspace alone; nothing changed; next: take the dead reader over without a command (the same recover without '-- ...'), then run the repair with 'wslock run %s -- REPAIR-CMD', which waits for the readers",
			     workspace, n, n == 1 ? "" : "s", n == 1 ? "s" : "", who,
			     n > 1 ? ", and others" : "", n == 1 ? "it" : "them", workspace);
}

int lockrules_check_take_over(const char *workspace, const struct registry_expect *x,
			      const struct lock_entry *e, struct wsl_error *err)
{
	if (e->state == LOCK_FREE)
		return wsl_error_set(err, WSL_NOT_HELD,
				     "%s is not locked: nothing to take over", workspace);
	if (e->state == LOCK_CORRUPT && e->unsafe)
		return unsafe_lock(workspace, e, err);
	if (e->state == LOCK_CORRUPT) {
		corrupt_details(err, e, workspace);
		/* Section 4: the live lock first, even for a corrupt document. */
		if (e->probed && e->liveness == LIVENESS_LIVE) {
			wsl_error_detail(&err->liveness, liveness_name(e->liveness));
			wsl_error_detail(&err->liveness_reason, e->reason);
			return wsl_error_set(err, WSL_OWNER_LIVE,
					     "the lock of %s is corrupt (%s) but its holder is alive (%s); a live holder is never displaced, not even with --force",
					     workspace, e->problem, e->reason);
		}
		if (e->raw == NULL)
			return wsl_error_set(err, WSL_LOCK_CORRUPT,
					     "the lock of %s is corrupt (%s) and its document cannot be read; after checking, remove it by hand (%s)",
					     workspace, e->problem, e->lock_path);
		if (newline_apart(x, e))
			/* Still refused: the compare is on exact bytes (a
			 * newline may be what tore the document), but the
			 * message says what differs and how to get them. */
			return wsl_error_set(err, WSL_LOCK_CORRUPT,
					     e->etcd_key ?
					     "the lock of %s is corrupt (%s); the bytes given differ from its exact bytes (etcd key %s) only by a trailing newline, as 'etcdctl get --print-value-only' or echo adds one: give the exact bytes ('etcdctl get -w json %s | jq -r \".kvs[0].value\" | base64 -d > FILE'); nothing changed" :
					     "the lock of %s is corrupt (%s); the bytes given differ from its exact bytes (%s) only by a trailing newline, as echo adds one: give the exact bytes ('cp %s FILE'); nothing changed",
					     workspace, e->problem, e->lock_path, e->lock_path);
		if (x->raw == NULL || x->raw_len != e->raw_len ||
		    memcmp(x->raw, e->raw, e->raw_len) != 0)
			return wsl_error_set(err, WSL_LOCK_CORRUPT,
					     "the lock of %s is corrupt (%s); it is cleared only by recover given its exact bytes (%s) with --force --reason",
					     workspace, e->problem, e->lock_path);
		if (!x->force)
			return wsl_error_set(err, WSL_LOCK_CORRUPT,
					     "the lock of %s is corrupt (%s); clearing it needs --force --reason",
					     workspace, e->problem);
		return 0;
	}
	if (x->owner == NULL) {
		lockrules_error_holder(err, e);
		return wsl_error_set(err, WSL_INVALID_OWNER,
				     "the expected owner document is not valid (%s); nothing changed",
				     x->invalid_why ? x->invalid_why : "unreadable");
	}
	if (!owner_equal(x->owner, &e->owner)) {
		char keys[256];
		owner_diff(x->owner, &e->owner, keys, sizeof(keys));
		lockrules_error_holder(err, e);
		return wsl_error_set(err, WSL_OWNER_MISMATCH,
				     "the owner of %s is not the one expected: %s differ%s (now pid %ld on %s, token %.8s...); nothing changed",
				     workspace, keys, strchr(keys, ',') ? "" : "s",
				     (long)e->owner.pid, e->owner.host, e->owner.token);
	}
	lockrules_error_holder(err, e);
	wsl_error_detail(&err->liveness, liveness_name(e->liveness));
	wsl_error_detail(&err->liveness_reason, e->reason);
	if (e->state == LOCK_RETAINED && !x->allow_retained)
		return wsl_error_set(err, WSL_RECOVERY_REQUIRED,
				     "%s is retained for recovery; only 'wslock recover' clears it",
				     workspace);
	if (e->liveness == LIVENESS_LIVE)
		return wsl_error_set(err, WSL_OWNER_LIVE,
				     "the owner of %s is alive (%s); a live owner is never displaced",
				     workspace, e->reason);
	if (e->liveness == LIVENESS_UNKNOWN && !x->force)
		return wsl_error_set(err, WSL_LIVENESS_UNKNOWN,
				     "the owner of %s cannot be proven dead (%s); after checking that its holder has ended (on its host, in its container), use --force --reason",
				     workspace, e->reason);
	return 0;
}

enum wsl_code lockrules_reclaim_code(const struct lock_entry *e, bool force)
{
	struct registry_expect x = { 0 };
	struct wsl_error err = { 0 };
	enum wsl_code code;

	x.owner = e->has_owner ? &e->owner : NULL;
	x.force = force;
	code = lockrules_check_take_over(e->workspace_root, &x, e, &err) == 0 ?
		WSL_OK : err.code;
	wsl_error_clear(&err);
	return code;
}

bool lockrules_reclaimable(const struct lock_entry *e, bool force, char *why,
			   size_t len)
{
	struct registry_expect x = { 0 };
	struct wsl_error err = { 0 };
	bool ok;

	x.owner = e->has_owner ? &e->owner : NULL;
	x.force = force;
	ok = lockrules_check_take_over(e->workspace_root, &x, e, &err) == 0;
	switch (ok ? WSL_OK : err.code) {
	case WSL_OK:
		if (e->liveness == LIVENESS_DEAD)
			snprintf(why, len, "owner is dead: %s", e->reason);
		else
			snprintf(why, len, "liveness unknown: %s; reclaimed with --force",
				 e->reason);
		break;
	case WSL_NOT_HELD:
		snprintf(why, len, "free");
		break;
	case WSL_LOCK_CORRUPT:
		if (e->raw != NULL && e->workspace_root[0] != '\0') {
			snprintf(why, len, "corrupt (%s): only 'wslock recover --force' with its exact bytes clears it",
				 e->problem);
		} else if (lockrules_corrupt_bytes_clearable(e)) {
			/* Its key is a hash: only the one workspace it locks
			 * finds it, so naming another clears nothing. */
			snprintf(why, len, "corrupt (%s): it does not say which workspace it locks; only 'wslock recover --force' with its exact bytes, for that workspace, clears it",
				 e->problem);
		} else {
			/* lock_path names .../locks/KEY/owner.json (or the
			 * directory itself when owner.json is missing): the
			 * directory entry to remove is .../locks/KEY. */
			size_t n = strlen(e->lock_path), suffix = strlen("/owner.json");
			int dir_len = n > suffix && strcmp(e->lock_path + n - suffix,
							   "/owner.json") == 0 ?
				(int)(n - suffix) : (int)n;
			snprintf(why, len, "corrupt (%s): its document cannot be read; after checking, remove %.*s by hand",
				 e->problem, dir_len, e->lock_path);
		}
		break;
	case WSL_UNSAFE_PATH:
		snprintf(why, len, "unsafe (%s): fix its owner and mode or remove it by hand",
			 e->problem);
		break;
	case WSL_RECOVERY_REQUIRED:
		snprintf(why, len, "retained for recovery: only 'wslock recover' clears it");
		break;
	case WSL_OWNER_LIVE:
		snprintf(why, len, "owner is live: %s", e->reason);
		break;
	case WSL_LIVENESS_UNKNOWN:
		snprintf(why, len, "liveness unknown: %s; needs --force --reason", e->reason);
		break;
	default:
		snprintf(why, len, "%s", err.message);
		break;
	}
	wsl_error_clear(&err);
	return ok;
}
