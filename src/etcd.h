/* etcd.h - a small client for etcd's v3 JSON gateway (etcd >= 3.4 serves it
 * at /v3/): key ranges, transactions, leases and a bounded wait for a change.
 *
 * Keys and values are byte strings (pointer and length, NUL allowed); the
 * client base64-encodes them and sends int64 fields as JSON strings, as the
 * gateway's proto3 JSON mapping wants.  Every call fills a struct wsl_error
 * on failure and returns -1; nothing is printed.
 *
 * Failure codes: WSL_BACKEND_UNAVAILABLE when no endpoint could serve the
 * request (connection refused, timeout, HTTP 5xx, etcd's "unavailable",
 * "no leader", "request timed out" and similar); WSL_IO when etcd answered
 * but rejected the request (invalid argument, permission, a missing lease)
 * or the answer was not a well-formed gateway response; WSL_INTERNAL when out
 * of memory or for arguments the client refuses (too large, bad TTL).
 *
 * Failover: endpoints are tried in order starting with the one that last
 * worked.  A request that is safe to repeat (range, a txn without put or
 * delete, lease grant (a duplicate is an orphan lease that expires), lease
 * keepalive and revoke, watch) moves on to the next endpoint after any
 * transport error or transient etcd error.  A txn with put or delete moves
 * on only when it cannot have been applied: nothing was sent (connection
 * refused, unresolvable host, connect timeout) or etcd refused it before
 * proposing it ("no leader", "too many requests", "not capable").  Each
 * attempt has the full timeout, so a call may take n_endpoints times it,
 * but never past the deadline of etcd_set_deadline; an endpoint that
 * failed is tried last by later calls.  Any other failure of such a request
 * leaves its outcome unknown: err->outcome_unknown is set (and the message
 * says "outcome unknown") and the caller must read the key back before
 * concluding anything.
 *
 * A client is not thread-safe (one curl handle); use one per thread.
 * libcurl's signals are off (CURLOPT_NOSIGNAL).  libcurl's proxy variables
 * (http_proxy, no_proxy, ...) are honoured like any curl client's.
 */
#ifndef WSLOCK_ETCD_H
#define WSLOCK_ETCD_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

#define ETCD_MAX_ENDPOINTS 16
#define ETCD_MAX_RESPONSE (16u << 20)	/* bytes of one response body */

struct etcd_client;

/* One key as stored: key and value are heap copies with a NUL after their
 * bytes (not counted in the lengths).  lease is 0 when none. */
struct etcd_kv {
	char *key;
	size_t key_len;
	char *value;
	size_t value_len;
	long long create_revision;
	long long mod_revision;
	long long version;
	long long lease;
};

enum etcd_target {
	ETCD_TARGET_VERSION,
	ETCD_TARGET_CREATE,	/* create revision; 0 when absent */
	ETCD_TARGET_MOD,
	ETCD_TARGET_VALUE,	/* never true for an absent key */
	ETCD_TARGET_LEASE,
};

enum etcd_cmp {
	ETCD_CMP_EQUAL,
	ETCD_CMP_NOT_EQUAL,
	ETCD_CMP_GREATER,
	ETCD_CMP_LESS,
};

/*
 * One compare of a transaction: "target of key cmp operand".  With range_end
 * set it holds for every key in [key, range_end); over an empty range the
 * operand is compared with an absent key's zero values, so
 * {ETCD_TARGET_CREATE, ETCD_CMP_EQUAL, number 0} over a prefix range means
 * "no key under the prefix".  number is the operand for VERSION, CREATE, MOD
 * and LEASE; value/value_len for VALUE.
 */
struct etcd_compare {
	enum etcd_target target;
	enum etcd_cmp cmp;
	const char *key;
	size_t key_len;
	const char *range_end;	/* NULL: the single key */
	size_t range_end_len;
	long long number;
	const char *value;
	size_t value_len;
};

enum etcd_op_type {
	ETCD_OP_RANGE,
	ETCD_OP_PUT,
	ETCD_OP_DELETE,
};

/* One operation of a transaction branch.  range_end (NULL: single key) is
 * used by RANGE and DELETE; value and lease (0: none) by PUT; limit (0: no
 * limit) by RANGE. */
struct etcd_op {
	enum etcd_op_type type;
	const char *key;
	size_t key_len;
	const char *range_end;
	size_t range_end_len;
	const char *value;
	size_t value_len;
	long long lease;
	long limit;
};

struct etcd_txn {
	const struct etcd_compare *compare;
	size_t n_compare;
	const struct etcd_op *success;
	size_t n_success;
	const struct etcd_op *failure;
	size_t n_failure;
};

/* The response of one operation that a transaction ran.  RANGE: kvs/n_kvs,
 * count (keys in the range, ignoring limit) and more; DELETE: count is the
 * number of keys deleted; PUT: nothing. */
struct etcd_op_result {
	enum etcd_op_type type;
	struct etcd_kv *kvs;
	size_t n_kvs;
	long long count;
	bool more;
};

/* What etcd_txn returns: the store revision after the transaction (that of
 * its writes, if any) and one result per operation of the branch that ran,
 * in order. */
struct etcd_txn_result {
	long long revision;
	struct etcd_op_result *ops;
	size_t n_ops;
};

/*
 * Creates a client for endpoints, a comma-separated list of base URLs
 * ("http://h1:2379,http://h2:2379"; http or https, at most
 * ETCD_MAX_ENDPOINTS, a trailing slash is dropped).  timeout_ms (> 0) bounds
 * every request, and separately its connection to each endpoint.  Nothing is
 * contacted yet.  Returns 0 with *out set (free it with etcd_close), or -1:
 * WSL_USAGE for a malformed list or timeout, WSL_INTERNAL when libcurl
 * cannot start or out of memory.  The first call initialises libcurl
 * (curl_global_init), which is not thread-safe: call it before starting
 * threads.
 */
int etcd_open(struct etcd_client **out, const char *endpoints, long timeout_ms,
	      struct wsl_error *err);

/*
 * TLS for https endpoints: cacert (PEM file of the CA that signed the
 * servers' certificates; NULL: the system's), cert and key (PEM files of a
 * client certificate for etcd's --client-cert-auth; NULL: none). The
 * strings are copied. Returns 0, or -1 with WSL_INTERNAL (out of memory).
 */
int etcd_set_tls(struct etcd_client *c, const char *cacert, const char *cert,
		 const char *key, struct wsl_error *err);

/*
 * etcd user/password authentication: before the first request the client
 * asks /v3/auth/authenticate for a token and sends it with every request,
 * and asks again when etcd says the token is invalid (simple tokens
 * expire). user NULL: none. The strings are copied (the password is
 * zeroed when the client is closed). Returns 0, or -1 (out of memory).
 */
int etcd_set_auth(struct etcd_client *c, const char *user, const char *password,
		  struct wsl_error *err);

/*
 * Bounds every later request and its connection by deadline_ms, a
 * CLOCK_MONOTONIC time in ms, as well as by the timeout (0: no deadline).
 * A request that would start after the deadline fails at once with
 * WSL_BACKEND_UNAVAILABLE, not sent. A lease holder sets it to the time
 * its lease may expire, so that no renewal waits past it.
 */
void etcd_set_deadline(struct etcd_client *c, long long deadline_ms);

/* Frees the client and closes its connections; NULL is ignored. */
void etcd_close(struct etcd_client *c);

/* The base URL the next request goes to first: the one that served the
 * last successful request, or the one after an endpoint that failed (the
 * first endpoint before any); owned by the client. */
const char *etcd_endpoint(const struct etcd_client *c);

/* The number of endpoints c was opened with (1 .. ETCD_MAX_ENDPOINTS): a
 * call that finds every one of them unresponsive takes that many
 * timeouts. */
size_t etcd_endpoint_count(const struct etcd_client *c);

/* Makes endpoint (a base URL as etcd_endpoint returns it) the first one
 * tried by the next request, when it is one of c's; so a client opened
 * for a forked keeper starts where its parent's left off, past an
 * endpoint that did not answer. */
void etcd_start_at(struct etcd_client *c, const char *endpoint);

/* Frees n key-values from etcd_range or a result; NULL is ignored. */
void etcd_kvs_free(struct etcd_kv *kvs, size_t n);

/* Frees what etcd_txn stored in res and zeroes it; NULL is ignored. */
void etcd_txn_result_free(struct etcd_txn_result *res);

/*
 * Writes to out the range end that covers every key starting with the
 * len-byte prefix (etcd's convention: drop trailing 0xff bytes, increment
 * the last remaining one; an empty or all-0xff prefix gives the single byte
 * "\0", meaning "to the end of the key space").  out must hold
 * len bytes, at least 1.  Returns the length of the range end.
 */
size_t etcd_prefix_end(const char *prefix, size_t len, char *out);

/*
 * Reads the key (range_end NULL) or the keys in [key, range_end), at most
 * limit of them (0: all), in key order.  Returns 0 with *kvs (free with
 * etcd_kvs_free; NULL when none) and *n set, and the store revision the
 * read saw in *header_revision (may be NULL); -1 otherwise.
 */
int etcd_range(struct etcd_client *c, const char *key, size_t key_len,
	       const char *range_end, size_t range_end_len, long limit,
	       struct etcd_kv **kvs, size_t *n, long long *header_revision,
	       struct wsl_error *err);

/*
 * Runs a transaction: if every compare holds, the success operations, else
 * the failure ones, atomically.  Returns 0 with *succeeded telling which
 * branch ran and, when res is not NULL, the responses in *res (free with
 * etcd_txn_result_free; zeroed first, also on failure).  -1 otherwise; see
 * the top of this file for when a failed transaction may still have been
 * applied.
 */
int etcd_txn(struct etcd_client *c, const struct etcd_txn *t, bool *succeeded,
	     struct etcd_txn_result *res, struct wsl_error *err);

/*
 * Grants a lease of ttl_s seconds (1 .. 9000000000).  etcd rounds small TTLs
 * up to its minimum (2 s with default timing); the TTL granted is stored in
 * *granted_ttl_s (may be NULL).  Returns 0 with *lease_id set, or -1.
 */
int etcd_lease_grant(struct etcd_client *c, long long ttl_s,
		     long long *lease_id, long long *granted_ttl_s,
		     struct wsl_error *err);

/*
 * Renews a lease once.  Returns 0 with *ttl_left_s the TTL it was renewed
 * to, in seconds, or 0 when the lease no longer exists (expired or revoked;
 * its keys are gone or about to go).  -1 when the renewal could not be sent
 * or answered: the lease is then in an unknown state and expires ttl seconds
 * after the last successful renewal was sent.
 */
int etcd_lease_keepalive(struct etcd_client *c, long long lease_id,
			 long long *ttl_left_s, struct wsl_error *err);

/*
 * Revokes a lease, deleting the keys attached to it.  Returns 0 when
 * revoked and also when the lease did not exist any more (the same end
 * state); -1 otherwise.
 */
int etcd_lease_revoke(struct etcd_client *c, long long lease_id,
		      struct wsl_error *err);

/*
 * Asks how long lease_id has left: *left_s its remaining TTL (s; -1 when
 * it expired or was revoked) and *granted_s the TTL it was granted (0 when
 * gone). Returns 0, or -1 when etcd could not be asked.
 */
int etcd_lease_ttl(struct etcd_client *c, long long lease_id, long long *left_s,
		   long long *granted_s, struct wsl_error *err);

/*
 * Waits at most timeout_ms (> 0) for a change (put or delete) to the key
 * (range_end NULL) or the keys in [key, range_end) at a revision greater
 * than after_revision (0: changes from now on only, which races with any
 * earlier read).  Returns 1 when a change came, or when the history after
 * after_revision has been compacted away so changes may have been missed;
 * 0 when the time ran out without a change; -1 on failure.  The wait is not
 * interrupted by signals: to react to one, wait in short slices.
 */
int etcd_wait_change(struct etcd_client *c, const char *key, size_t key_len,
		     const char *range_end, size_t range_end_len,
		     long long after_revision, long timeout_ms,
		     struct wsl_error *err);

/* One key (range_end NULL) or range [key, range_end) to watch. */
struct etcd_watch_range {
	const char *key;
	size_t key_len;
	const char *range_end;
	size_t range_end_len;
};

/*
 * etcd_wait_change for n (>= 1) keys or ranges at once, on one stream:
 * returns 1 when any of them changed after after_revision. With progress,
 * each watch asks for etcd's progress notifications (sent every
 * --experimental-watch-progress-notify-interval of the server, 10 min by
 * default); they are no change. A stream that falls silent on a half-open
 * connection ends with the timeout like a quiet one (0): watch in slices
 * no longer than the silence you accept, from the revision up to which
 * you know the keys.
 */
int etcd_wait_changes(struct etcd_client *c, const struct etcd_watch_range *r,
		      size_t n, long long after_revision, long timeout_ms,
		      bool progress, struct wsl_error *err);

#endif
