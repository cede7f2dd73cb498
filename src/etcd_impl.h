/* etcd_impl.h - internal to the etcd client (etcd.c: libcurl, endpoints,
 * transport; etcd_kv.c: KV, txn and lease calls; etcd_watch.c: the watch
 * stream).  Nothing else includes it: the rest of wslock sees etcd.h.
 */
#ifndef WSLOCK_ETCD_IMPL_H
#define WSLOCK_ETCD_IMPL_H

#include "etcd.h"

#include <stdbool.h>
#include <stddef.h>

/* libcurl's type-checking macros would wrap the calls below; the calls go
 * through function pointers instead (see curl_load). */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <jansson.h>

/* libcurl's functions, loaded by etcd.c on first use; the names below are
 * macros for this table. */
struct curl_fns {
	CURLcode (*global_init)(long flags);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *h, CURLoption opt, ...);
	CURLcode (*easy_perform)(CURL *h);
	CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
	void (*easy_reset)(CURL *h);
	void (*easy_cleanup)(CURL *h);
	const char *(*easy_strerror)(CURLcode code);
	struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
	void (*slist_free_all)(struct curl_slist *l);
};
extern struct curl_fns curlf;	/* filled by curl_load (etcd.c) */

#define curl_global_init curlf.global_init
#define curl_easy_init curlf.easy_init
#undef curl_easy_setopt
#undef curl_easy_getinfo
#define curl_easy_setopt curlf.easy_setopt
#define curl_easy_perform curlf.easy_perform
#define curl_easy_getinfo curlf.easy_getinfo
#define curl_easy_reset curlf.easy_reset
#define curl_easy_cleanup curlf.easy_cleanup
#define curl_easy_strerror curlf.easy_strerror
#define curl_slist_append curlf.slist_append
#define curl_slist_free_all curlf.slist_free_all

#define URL_MAX 1024		/* bytes of one endpoint base URL */
#define FAIL_MAX 900		/* bytes of the collected per-endpoint failures */

struct etcd_client {
	char *urls[ETCD_MAX_ENDPOINTS];
	size_t n_urls;
	size_t current;		/* index of the endpoint that last worked */
	long timeout_ms;
	long long deadline_ms;	/* CLOCK_MONOTONIC; 0: none (etcd_set_deadline) */
	char *cacert, *cert, *key;	/* TLS files (etcd_set_tls), or NULL */
	char *user, *password;		/* etcd auth (etcd_set_auth), or NULL */
	bool authenticated;		/* the headers carry a token */
	bool authenticating;
	CURL *curl;
	/* The watches' own handle (made on first use): a watch ends by
	 * closing its connection, which must not be the one kept alive for
	 * the next request (a new connection costs etcd's gateway more
	 * than a request on an open one). */
	CURL *watch_curl;
	struct curl_slist *headers;
	struct curl_slist *watch_headers;
	char curl_err[CURL_ERROR_SIZE];
};

/* A response body, at most ETCD_MAX_RESPONSE bytes. */
struct body {
	char *data;
	size_t len;
	size_t cap;
	bool too_large;
	bool no_memory;
};

/* ---- etcd.c ---- */

/* Appends to a fixed buffer, silently cutting at its end. */
void append(char *buf, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Adds n bytes to b; -1 (too_large or no_memory set) when it cannot. */
int body_add(struct body *b, const char *data, size_t n);

/* Sets c's handle up for one POST of len bytes at body to url, bounded by
 * timeout_ms (the transfer) and connect_ms, the response to fn(arg). */
void prepare(struct etcd_client *c, const char *url,
	     struct curl_slist *headers, const char *body, size_t len,
	     long timeout_ms, long connect_ms,
	     size_t (*fn)(char *, size_t, size_t, void *), void *arg);

/* Whether gRPC code means "try again, maybe elsewhere". */
bool transient_grpc(long long code);

/* If doc is a gateway error, fills code (gRPC, -1 unknown) and message and
 * returns true. */
bool gateway_error(json_t *doc, long long *code, const char **message);

/* Sends req (the reference is taken) to path at the endpoints in failover
 * order; may_apply: it may change the store.  0 with *doc the response
 * object (json_decref it), or -1 with err filled. */
int call(struct etcd_client *c, const char *path, json_t *req,
	 bool may_apply, json_t **doc, struct wsl_error *err);

/* ---- etcd_kv.c: proto3 JSON fields; each returns 0 or -1 ---- */

/* Sets key and, when given, range_end on o (bytes, base64). */
int set_range(json_t *o, const char *key, size_t key_len,
	      const char *range_end, size_t range_end_len);
/* Sets an int64 field as a decimal string. */
int set_int64(json_t *o, const char *name, long long v);
/* An int64 field: absent or null is 0; a decimal string or a JSON integer. */
int get_int64(json_t *o, const char *name, long long *out);
/* A bool field: absent or null is false. */
int get_bool(json_t *o, const char *name, bool *out);

#endif
