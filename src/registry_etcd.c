/* registry_etcd.c - the etcd backend (DESIGN.md section 5b): its keys and
 * documents, the keeper's keepalive, opening and closing. Reading locks is
 * in registry_etcd_read.c, the writes (acquire, release, retain,
 * take-over) in registry_etcd_write.c, waiting (the FIFO queue) in
 * registry_etcd_queue.c; registry_etcd.h is what they share.
 *
 * Several workspaces at once (registry_etcd_multi.c) are locks of these
 * keys too, written and released together in one transaction each.
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
 *                    -- CMD`, `acquire`): {"token":…,"lease":"<hex id>",
 *                    "ttl_s":N,"lock_delay_s":N,"keeper":"run"|"acquire"},
 *                    not bound to a lease: it says that the lock's
 *                    liveness is the liveness key's. "run" (or no
 *                    "keeper": written before acquire had keepers): a
 *                    running wslock with its command, which release
 *                    refuses to displace;
 *                    "acquire": the keeper of an acquire's holder pid
 *                    (keeper_pid.h), which renews until the lease ends at
 *                    the server, and whose lease a release revokes.
 *   P "live" W       the holder's token, bound to its liveness lease,
 *                    granted for TTL + lock-delay; the holder works to a
 *                    deadline of TTL from the send time of its last
 *                    successful renewal, so a keeper that runs has
 *                    stopped its command lock-delay before this key can
 *                    vanish (a stopped or killed one has not: the double
 *                    fault, so the reason of a dead lock never claims
 *                    it). Lease key
 *                    present and live key gone: the holder is dead.
 *   P "retained" W   retained.json of a lock kept for recovery.
 *   P "queue" W "//" L  a waiter for W: the owner document it will write,
 *                    bound to its own lease L (16 hex digits); see
 *                    registry_etcd_queue.c.
 *   P "queue+" W "//" L  a waiter for a shared lock of W (same shape).
 *   P "holder/" K W "//" T  K in lock, lease, live, retained: the keys of
 *                    reader T of a shared lock of W, whose P "lock" W is
 *                    then a marker, not an owner document; see
 *                    registry_etcd_shared.c.
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
 * A crash of a `run` holder, or the exit of an `acquire` holder's pid,
 * leaves its lock, dead once the liveness lease has expired: the next job
 * gets "recovery required", as on disk. A write whose outcome is unknown (the endpoint failed
 * after the request was sent) is settled by reading back: our token in the
 * stored bytes (or our journal or retained key) means it was applied.
 */
#include "registry_etcd.h"
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

/* P kind path into k; -1 when too long. */
int key_make(const struct etcd_state *s, const char *kind,
		    const char *path, struct key *k, struct wsl_error *err)
{
	int n = snprintf(k->b, sizeof(k->b), "%s%s%s", s->prefix, kind, path);

	if (n < 0 || (size_t)n >= sizeof(k->b))
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "etcd key for %s is too long", path);
	k->len = (size_t)n;
	return 0;
}

void etcd_bound_requests(struct registry *reg, const struct registry_deadline *dl)
{
	struct etcd_state *s = state(reg);
	long long at = dl != NULL ? dl->at_ms : reg->coord_bounded ? reg->coord_bound_ms : 0;
	long long floor = platform_mono_ms() +
		(long long)s->timeout_ms * (long long)etcd_endpoint_count(s->c);

	/* -n and -w bound the wait for the lock, not the network: an
	 * operation with less than one --etcd-timeout per endpoint left
	 * (-n's only attempt, -w 0, a -w shorter than that, the attempt at
	 * the -w deadline) gets that long from its start, so that one
	 * endpoint that accepts connections but never answers is timed out
	 * and the next one still asked; else it would fail unsent,
	 * "unavailable". */
	if (at > 0 && at < floor)
		at = floor;
	etcd_set_deadline(s->c, at);
}

void note_rev(struct etcd_state *s, long long rev)
{
	if (rev > s->last_rev)
		s->last_rev = rev;
}

/* The stored form of an owner document: owner_format and '\n', *len bytes
 * (no NUL). NULL when it cannot be formatted. */
char *owner_bytes(const struct owner *o, size_t *len)
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

char *dup_bytes(const char *p, size_t n)
{
	char *d = malloc(n + 1);

	if (d != NULL) {
		memcpy(d, p, n);
		d[n] = '\0';
	}
	return d;
}

bool same_bytes(const char *a, size_t alen, const char *b, size_t blen)
{
	return a != NULL && b != NULL && alen == blen && memcmp(a, b, alen) == 0;
}

const char *const kind_names[KINDS] = { "lock", "retained", "lease", "live" };

/* The lease key's value for token's lock on lease (see the top). */
char *lease_doc(const struct etcd_state *s, const char *token, long long lease,
		bool for_pid)
{
	char id[32];
	json_t *o = json_object();
	char *text;

	snprintf(id, sizeof(id), "%llx", (unsigned long long)lease);
	json_object_set_new(o, "token", json_string(token));
	json_object_set_new(o, "lease", json_string(id));
	json_object_set_new(o, "ttl_s", json_integer(s->ttl_s));
	json_object_set_new(o, "lock_delay_s", json_integer(s->delay_s));
	json_object_set_new(o, "keeper", json_string(for_pid ? "acquire" : "run"));
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return text;
}

/* True when the lease key kv names token; its lease id goes to *lease. */
bool lease_doc_names(const struct etcd_kv *kv, const char *token,
		     long long *lease, long long *delay_s, bool *for_pid)
{
	json_t *o = json_loadb(kv->value, kv->value_len, 0, NULL);
	const char *t = json_string_value(json_object_get(o, "token"));
	const char *id = json_string_value(json_object_get(o, "lease"));
	const char *keeper = json_string_value(json_object_get(o, "keeper"));
	bool ok = t != NULL && strcmp(t, token) == 0;

	*for_pid = keeper != NULL && strcmp(keeper, "acquire") == 0;
	*lease = id != NULL ? (long long)strtoull(id, NULL, 16) : 0;
	*delay_s = json_integer_value(json_object_get(o, "lock_delay_s"));
	json_decref(o);
	return ok;
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

/* A client for s's endpoints with its TLS files and user. */
int client_new(struct etcd_state *s, struct etcd_client **out,
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
	/* past an endpoint that did not answer the parent */
	etcd_start_at(c, etcd_endpoint(s->c));
	s->c = c;
	s->pid = getpid();
	return 0;
}

/* 0 when o's lock still holds o's exact bytes and its live key; else
 * WSL_OWNERSHIP_LOST. A read that fails proves nothing: 0. */
int check_own(struct etcd_state *s, const struct owner *o,
	      struct wsl_error *err)
{
	struct wsl_error rerr = { 0 };
	struct lock_entry e;
	struct kv_meta m;
	size_t len = 0;
	char *mine = owner_bytes(o, &len);
	int rc = 0;

	if (set_names(s, o->token)) {	/* several workspaces: each of them */
		free(mine);
		return check_own_set(s, err);
	}
	if (mine == NULL || read_entry(s, o->workspace_root, true, &e, &m, &rerr) != 0) {
		free(mine);
		wsl_error_clear(&rerr);
		return 0;
	}
	if (e.shared && lock_entry_by_token(&e, o->token) != NULL) {
		/* a reader's: its own document and live key */
		struct lock_entry *h = (struct lock_entry *)lock_entry_by_token(&e, o->token);
		struct lock_entry keep = *h;

		memset(h, 0, sizeof(*h));
		lock_entry_free(&e);
		e = keep;
	}
	if (!same_bytes(e.raw, e.raw_len, mine, len))
		rc = wsl_error_set(err, WSL_OWNERSHIP_LOST,
				   "the lock of %s was %s while this command held it",
				   o->workspace_root, e.state == LOCK_FREE ? "deleted" :
				   "changed (another owner holds it now)");
	else if (e.liveness != LIVENESS_LIVE)
		rc = wsl_error_set(err, WSL_OWNERSHIP_LOST,
				   "the liveness key of %s was removed (its lease expired or was revoked) while this command held it",
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
	/* A run works to a deadline of TTL; an acquire's keeper has no
	 * command to stop, so it may renew until the lease (TTL +
	 * lock-delay) ends at the server. */
	long long life = (reg->lease_for_pid ? s->ttl_s + s->delay_s : s->ttl_s) * 1000;
	int rc;

	*next_ms = -1;
	*ttl_ms = -1;
	if (s->lease == 0 || !s->lease_used || strcmp(s->lease_token, o->token) != 0)
		return 0;	/* no lease behind this lock: it lives until released */
	sent = platform_mono_ms();
	/* Right after the acquire (the calls before the keeper starts)
	 * nothing is sent: the lease was granted or renewed less than a
	 * third of its TTL ago (lease_ready), so a renewal would be a
	 * redundant request on the way to the command (a waiter's lease is
	 * hundreds of ms old by then). The keeper's first renewal comes at
	 * the period. */
	if (!(s->lease_fresh && sent - s->lease_sent_ms < period) &&
	    sent - s->lease_sent_ms >= 250) {
		if (client_own(s, err) != 0)
			return -1;
		/* Never wait past the deadline for an answer. */
		etcd_set_deadline(s->c, reg->keep_deadline_ms > 0 ? reg->keep_deadline_ms :
				  s->lease_sent_ms + life);
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
		/* Just acquired: the acquire's own transaction was the
		 * check, a read now would be a redundant request. */
		rc = s->lease_fresh ? 0 : check_own(s, o, err);
		s->lease_fresh = false;
		etcd_set_deadline(s->c, 0);
		if (rc != 0) {
			if (reg->lease_for_pid) {
				/* released or taken over: the lease is ours
				 * alone, and of no use now */
				struct wsl_error ignore = { 0 };
				etcd_lease_revoke(s->c, s->lease, &ignore);
				wsl_error_clear(&ignore);
				s->lease = 0;
				s->lease_used = false;
			}
			return -1;
		}
	}
	*next_ms = (long)(s->lease_sent_ms + period - platform_mono_ms());
	if (*next_ms < 0)
		*next_ms = 0;
	*ttl_ms = (long)(s->lease_sent_ms + life - platform_mono_ms());
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
	if (s->nest_fd >= 0)
		close(s->nest_fd);
	held_forget(s);
	set_forget(s);
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
	.get_chain = etcd_get_chain,
	.overlaps = etcd_overlaps,
	.try_acquire = etcd_try_acquire,
	.try_acquire_multi = etcd_try_acquire_multi,
	.release = etcd_release,
	.release_multi = etcd_release_multi,
	.list = etcd_list,
	.take_over = etcd_take_over,
	.retain = etcd_retain,
	.garbage = etcd_garbage,
	.wait_prepare = etcd_wait_prepare,
	.wait = etcd_wait,
	.wait_end = etcd_wait_end,
	.nest_on_conflict = true,
	.nest_lock = etcd_nest_lock,
	.keepalive = etcd_keepalive,
	.watch_own = etcd_watch_own,
	.journal = etcd_journal,
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
	s->nest_fd = -1;
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
