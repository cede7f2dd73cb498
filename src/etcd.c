/* etcd.c - etcd v3 through its JSON gateway, with libcurl and jansson.
 *
 * Every call is one POST of a JSON document to BASE/v3/..., answered by one
 * JSON document (the watch and lease keepalive calls are gRPC streams: the
 * gateway sends one JSON object per line, each wrapped as {"result":...}).
 * proto3 JSON omits fields at their zero value, so an absent number is 0, an
 * absent bool false and an absent byte string empty; int64 fields arrive as
 * decimal strings, bytes as padded base64.  Every field used is checked for
 * its type before use; anything else is a malformed response (WSL_IO), never
 * a default.
 *
 * An error is either {"error":"...","message":"...","code":N} with an HTTP
 * error status (unary calls) or {"error":{"grpc_code":N,"message":...}} in a
 * stream.  The gRPC codes that mean "try again, maybe elsewhere" map to
 * WSL_BACKEND_UNAVAILABLE, the others to WSL_IO.
 *
 * Failover and its limits for writes are described in etcd.h.  The one piece
 * of global state is libcurl's own, initialised once in etcd_open.
 */
#include "etcd.h"
#include "platform.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* libcurl's type-checking macros would wrap the calls below; the calls go
 * through function pointers instead (see curl_load). */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <dlfcn.h>
#include <jansson.h>

#include "crypto.h"

/*
 * libcurl is loaded with dlopen(3) when the etcd backend is first used,
 * not linked: its thirty-odd shared libraries would add ~3 ms to every
 * wslock start (measured against a jansson+libsodium binary; see
 * bench/RESULTS.md), while only --backend etcd needs them. The functions
 * are called through this table; the names below are macros for it.
 */
static struct {
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
} curlf;

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

/* Loads libcurl.so.4 and fills curlf; returns 0 or -1 with
 * WSL_BACKEND_UNAVAILABLE naming what is missing. */
static int curl_load(struct wsl_error *err)
{
	static void *lib;
	static const struct {
		const char *name;
		size_t offset;
	} syms[] = {
#define SYM(field, name) { name, offsetof(__typeof__(curlf), field) }
		SYM(global_init, "curl_global_init"),
		SYM(easy_init, "curl_easy_init"),
		SYM(easy_setopt, "curl_easy_setopt"),
		SYM(easy_perform, "curl_easy_perform"),
		SYM(easy_getinfo, "curl_easy_getinfo"),
		SYM(easy_reset, "curl_easy_reset"),
		SYM(easy_cleanup, "curl_easy_cleanup"),
		SYM(easy_strerror, "curl_easy_strerror"),
		SYM(slist_append, "curl_slist_append"),
		SYM(slist_free_all, "curl_slist_free_all"),
#undef SYM
	};
	size_t i;

	if (lib != NULL)
		return 0;
	lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL)
		return wsl_error_set(err, WSL_BACKEND_UNAVAILABLE,
				     "the etcd backend needs libcurl (libcurl.so.4, Debian package libcurl4): %s",
				     dlerror());
	for (i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(lib, syms[i].name);
		if (f == NULL) {
			dlclose(lib);
			lib = NULL;
			return wsl_error_set(err, WSL_BACKEND_UNAVAILABLE,
					     "libcurl.so.4 lacks %s", syms[i].name);
		}
		/* POSIX dlsym: a function pointer travels as void *. */
		memcpy((char *)&curlf + syms[i].offset, &f, sizeof(f));
	}
	return 0;
}

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

/* How one attempt at one endpoint ended. */
enum attempt_end {
	ATTEMPT_OK,
	ATTEMPT_NEXT,		/* this endpoint failed; another may serve */
	ATTEMPT_STOP,		/* final: etcd's verdict, or unsafe to resend */
};

/* The state of a watch stream while it is being read. */
struct watch {
	struct body buf;
	bool created;
	bool changed;
	bool failed;
	enum wsl_code code;
	char message[512];
};

static bool curl_ready;

/* Appends to a fixed buffer, silently cutting at its end. */
static void append(char *buf, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void append(char *buf, size_t cap, const char *fmt, ...)
{
	size_t used = strnlen(buf, cap);
	va_list ap;

	if (used + 1 >= cap)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, cap - used, fmt, ap);
	va_end(ap);
}

/* ---- endpoints ------------------------------------------------------- */

static int add_endpoint(struct etcd_client *c, const char *s, size_t len,
			struct wsl_error *err)
{
	size_t i, host;

	while (len > 0 && (s[0] == ' ' || s[0] == '\t'))
		s++, len--;
	while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	while (len > 0 && s[len - 1] == '/')
		len--;
	if (len == 0)
		return wsl_error_set(err, WSL_USAGE, "empty etcd endpoint");
	if (len >= 7 && strncmp(s, "http://", 7) == 0)
		host = 7;
	else if (len >= 8 && strncmp(s, "https://", 8) == 0)
		host = 8;
	else
		return wsl_error_set(err, WSL_USAGE,
				     "etcd endpoint '%.*s' is not an http:// or https:// url",
				     (int)(len > 200 ? 200 : len), s);
	if (len == host || len >= URL_MAX)
		return wsl_error_set(err, WSL_USAGE,
				     "etcd endpoint '%.*s' has no host or is too long",
				     (int)(len > 200 ? 200 : len), s);
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch <= ' ' || ch >= 0x7f || ch == '?' || ch == '#')
			return wsl_error_set(err, WSL_USAGE,
					     "etcd endpoint '%.*s' contains a space, control character, '?' or '#'",
					     (int)(len > 200 ? 200 : len), s);
	}
	if (c->n_urls == ETCD_MAX_ENDPOINTS)
		return wsl_error_set(err, WSL_USAGE,
				     "more than %d etcd endpoints", ETCD_MAX_ENDPOINTS);
	c->urls[c->n_urls] = strndup(s, len);
	if (c->urls[c->n_urls] == NULL)
		return wsl_error_set(err, WSL_INTERNAL, "out of memory");
	c->n_urls++;
	return 0;
}

int etcd_open(struct etcd_client **out, const char *endpoints, long timeout_ms,
	      struct wsl_error *err)
{
	struct etcd_client *c;
	const char *p, *comma;

	*out = NULL;
	if (endpoints == NULL || endpoints[0] == '\0')
		return wsl_error_set(err, WSL_USAGE, "no etcd endpoints given");
	if (timeout_ms <= 0)
		return wsl_error_set(err, WSL_USAGE,
				     "etcd timeout must be positive");
	if (!curl_ready) {
		if (curl_load(err) != 0)
			return -1;
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return wsl_error_set(err, WSL_INTERNAL,
					     "cannot initialise libcurl");
		curl_ready = true;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return wsl_error_set(err, WSL_INTERNAL, "out of memory");
	c->timeout_ms = timeout_ms;
	for (p = endpoints;; p = comma + 1) {
		comma = strchr(p, ',');
		if (add_endpoint(c, p, comma ? (size_t)(comma - p) : strlen(p),
				 err) < 0)
			goto fail;
		if (comma == NULL)
			break;
	}
	c->curl = curl_easy_init();
	if (c->curl == NULL) {
		wsl_error_set(err, WSL_INTERNAL, "cannot create a curl handle");
		goto fail;
	}
	/* "Expect:" stops curl from waiting for 100-continue on large bodies;
	 * hasleader makes etcd cancel a watch whose member loses its leader
	 * (gRPC metadata, forwarded by the gateway) instead of going quiet. */
	c->headers = curl_slist_append(NULL, "Content-Type: application/json");
	if (c->headers != NULL &&
	    curl_slist_append(c->headers, "Expect:") == NULL) {
		curl_slist_free_all(c->headers);
		c->headers = NULL;
	}
	c->watch_headers = curl_slist_append(NULL, "Content-Type: application/json");
	if (c->watch_headers != NULL &&
	    (curl_slist_append(c->watch_headers, "Expect:") == NULL ||
	     curl_slist_append(c->watch_headers,
			       "Grpc-Metadata-hasleader: true") == NULL)) {
		curl_slist_free_all(c->watch_headers);
		c->watch_headers = NULL;
	}
	if (c->headers == NULL || c->watch_headers == NULL) {
		wsl_error_set(err, WSL_INTERNAL, "out of memory");
		goto fail;
	}
	*out = c;
	return 0;
fail:
	etcd_close(c);
	return -1;
}

static int dup_opt(char **to, const char *from, struct wsl_error *err)
{
	free(*to);
	*to = NULL;
	if (from == NULL || from[0] == '\0')
		return 0;
	*to = strdup(from);
	return *to != NULL ? 0 : wsl_error_set(err, WSL_INTERNAL, "out of memory");
}

int etcd_set_tls(struct etcd_client *c, const char *cacert, const char *cert,
		 const char *key, struct wsl_error *err)
{
	if (dup_opt(&c->cacert, cacert, err) != 0 || dup_opt(&c->cert, cert, err) != 0 ||
	    dup_opt(&c->key, key, err) != 0)
		return -1;
	return 0;
}

int etcd_set_auth(struct etcd_client *c, const char *user, const char *password,
		  struct wsl_error *err)
{
	c->authenticated = false;
	if (dup_opt(&c->user, user, err) != 0 ||
	    dup_opt(&c->password, password != NULL ? password : "", err) != 0)
		return -1;
	if (c->user != NULL && c->password == NULL && (c->password = strdup("")) == NULL)
		return wsl_error_set(err, WSL_INTERNAL, "out of memory");
	return 0;
}

/* Replaces the Authorization header of list (or appends one). */
static struct curl_slist *with_token(struct curl_slist *list, const char *token)
{
	struct curl_slist *n = NULL, *p;
	char line[1024];

	for (p = list; p != NULL; p = p->next)
		if (strncmp(p->data, "Authorization:", 14) != 0 &&
		    (n = curl_slist_append(n, p->data)) == NULL)
			return NULL;
	snprintf(line, sizeof(line), "Authorization: %s", token);
	return curl_slist_append(n, line);
}

static int call(struct etcd_client *c, const char *path, json_t *req,
		bool may_apply, json_t **doc, struct wsl_error *err);

/* Gets a token for c->user (POST /v3/auth/authenticate) and puts it into
 * every request's headers. */
static int authenticate(struct etcd_client *c, struct wsl_error *err)
{
	json_t *req = json_object(), *doc = NULL;
	const char *token;
	struct curl_slist *h, *wh;
	int rc;

	json_object_set_new(req, "name", json_string(c->user));
	json_object_set_new(req, "password", json_string(c->password));
	c->authenticating = true;
	rc = call(c, "/v3/auth/authenticate", req, false, &doc, err);
	c->authenticating = false;
	if (rc != 0)
		return wsl_error_prefix(err, err->code, "etcd authentication as %s failed",
					c->user);
	token = json_string_value(json_object_get(doc, "token"));
	if (token == NULL || strlen(token) > 900) {
		json_decref(doc);
		return wsl_error_set(err, WSL_IO,
				     "etcd authentication as %s: no token in the answer", c->user);
	}
	h = with_token(c->headers, token);
	wh = with_token(c->watch_headers, token);
	json_decref(doc);
	if (h == NULL || wh == NULL) {
		curl_slist_free_all(h);
		curl_slist_free_all(wh);
		return wsl_error_set(err, WSL_INTERNAL, "out of memory");
	}
	curl_slist_free_all(c->headers);
	curl_slist_free_all(c->watch_headers);
	c->headers = h;
	c->watch_headers = wh;
	c->authenticated = true;
	return 0;
}

void etcd_set_deadline(struct etcd_client *c, long long deadline_ms)
{
	c->deadline_ms = deadline_ms;
}

void etcd_close(struct etcd_client *c)
{
	size_t i;

	if (c == NULL)
		return;
	free(c->cacert);
	free(c->cert);
	free(c->key);
	free(c->user);
	if (c->password != NULL) {
		explicit_bzero(c->password, strlen(c->password));
		free(c->password);
	}
	if (c->curl != NULL)
		curl_easy_cleanup(c->curl);
	curl_slist_free_all(c->headers);
	curl_slist_free_all(c->watch_headers);
	for (i = 0; i < c->n_urls; i++)
		free(c->urls[i]);
	free(c);
}

const char *etcd_endpoint(const struct etcd_client *c)
{
	return c->urls[c->current];
}

/* ---- transport ------------------------------------------------------- */

static int body_add(struct body *b, const char *data, size_t n)
{
	size_t cap;
	char *p;

	if (n > ETCD_MAX_RESPONSE - b->len) {
		b->too_large = true;
		return -1;
	}
	if (b->len + n + 1 > b->cap) {
		cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n + 1)
			cap *= 2;
		p = realloc(b->data, cap);
		if (p == NULL) {
			b->no_memory = true;
			return -1;
		}
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, data, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

static size_t write_body(char *data, size_t size, size_t nmemb, void *arg)
{
	/* size is always 1 for write callbacks */
	return body_add(arg, data, size * nmemb) < 0 ? 0 : size * nmemb;
}

/*
 * Sets the handle up for one POST of len bytes at body to url: no signals,
 * http(s) only, no redirects (curl's default), the whole transfer bounded
 * by timeout_ms and the connection by connect_ms, the response to fn(arg).
 * The connections of earlier transfers survive curl_easy_reset.
 */
static void prepare(struct etcd_client *c, const char *url,
		    struct curl_slist *headers, const char *body, size_t len,
		    long timeout_ms, long connect_ms,
		    size_t (*fn)(char *, size_t, size_t, void *), void *arg)
{
	CURL *h = c->curl;

	curl_easy_reset(h);
	c->curl_err[0] = '\0';
	curl_easy_setopt(h, CURLOPT_URL, url);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(h, CURLOPT_PROTOCOLS,
			 (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->curl_err);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, fn);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, arg);
	if (c->cacert != NULL)
		curl_easy_setopt(h, CURLOPT_CAINFO, c->cacert);
	if (c->cert != NULL)
		curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert);
	if (c->key != NULL)
		curl_easy_setopt(h, CURLOPT_SSLKEY, c->key);
}

static bool transient_grpc(long long code)
{
	/* CANCELLED, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED,
	 * UNAVAILABLE */
	return code == 1 || code == 4 || code == 8 || code == 10 || code == 14;
}

/* etcd errors returned before the request was proposed to raft: the write
 * was certainly not applied, another member may take it. */
static bool refused_before_proposal(const char *message)
{
	return strstr(message, "etcdserver: no leader") != NULL ||
	       strstr(message, "etcdserver: too many requests") != NULL ||
	       strstr(message, "etcdserver: not capable") != NULL;
}

/*
 * If doc is a gateway error, fills code (gRPC, -1 unknown) and message and
 * returns true.  Unary: {"error":"...","message":"...","code":N}; stream:
 * {"error":{"grpc_code":N,"message":"..."}}.
 */
static bool gateway_error(json_t *doc, long long *code, const char **message)
{
	json_t *e = json_object_get(doc, "error");
	json_t *m, *n;

	if (e == NULL)
		return false;
	*code = -1;
	*message = "unknown error";
	if (json_is_object(e)) {
		m = json_object_get(e, "message");
		n = json_object_get(e, "grpc_code");
	} else {
		m = json_object_get(doc, "message");
		n = json_object_get(doc, "code");
		if (!json_is_string(m))
			m = e;
	}
	if (json_is_string(m) && json_string_length(m) > 0)
		*message = json_string_value(m);
	if (json_is_integer(n))
		*code = json_integer_value(n);
	/* LeaseGrantResponse has a string "error" field of its own: without a
	 * code and empty it is no error */
	if (json_is_string(e) && n == NULL && json_string_length(e) == 0)
		return false;
	return true;
}

/*
 * One POST to one endpoint.  On ATTEMPT_OK *doc holds the parsed response
 * object.  Otherwise why (cap bytes) says what went wrong, *code is the
 * wsl code to report, and *sent tells whether the request may have reached
 * etcd (false: certainly not applied).
 */
static enum attempt_end attempt(struct etcd_client *c, const char *base,
				const char *path, const char *req, size_t req_len,
				json_t **doc, enum wsl_code *code, bool *sent,
				char *why, size_t cap)
{
	struct body b = { 0 };
	char url[URL_MAX + 64];
	json_error_t jerr;
	long status = 0, request_size = 0;
	long long grpc_code;
	const char *message;
	CURLcode rc;
	enum attempt_end end = ATTEMPT_NEXT;

	*doc = NULL;
	*sent = true;
	*code = WSL_BACKEND_UNAVAILABLE;
	why[0] = '\0';
	snprintf(url, sizeof(url), "%s%s", base, path);

	{
		long t = c->timeout_ms;
		if (c->deadline_ms > 0) {
			long long left = c->deadline_ms - platform_mono_ms();
			if (left <= 0) {
				*sent = false;
				snprintf(why, cap, "the deadline passed before it could be sent");
				return ATTEMPT_STOP;
			}
			if (left < t)
				t = (long)left;
		}
		prepare(c, url, c->headers, req, req_len, t, t, write_body, &b);
	}
	rc = curl_easy_perform(c->curl);
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(c->curl, CURLINFO_REQUEST_SIZE, &request_size);
	if (rc != CURLE_OK) {
		if (b.no_memory) {
			*code = WSL_INTERNAL;
			snprintf(why, cap, "out of memory");
			end = ATTEMPT_STOP;
		} else if (b.too_large) {
			*code = WSL_IO;
			snprintf(why, cap, "response larger than %u bytes",
				 ETCD_MAX_RESPONSE);
			end = ATTEMPT_STOP;
		} else {
			if (rc == CURLE_COULDNT_CONNECT ||
			    rc == CURLE_COULDNT_RESOLVE_HOST ||
			    rc == CURLE_COULDNT_RESOLVE_PROXY ||
			    request_size == 0)
				*sent = false;
			snprintf(why, cap, "%s",
				 c->curl_err[0] ? c->curl_err : curl_easy_strerror(rc));
		}
		goto out;
	}
	*doc = json_loadb(b.data ? b.data : "", b.len, 0, &jerr);
	if (*doc != NULL && gateway_error(*doc, &grpc_code, &message)) {
		if (transient_grpc(grpc_code)) {
			if (refused_before_proposal(message))
				*sent = false;
		} else {
			*code = WSL_IO;
			end = ATTEMPT_STOP;
		}
		snprintf(why, cap, "%s (grpc code %lld, http %ld)", message,
			 grpc_code, status);
		goto out;
	}
	if (status != 200) {
		snprintf(why, cap, "http status %ld", status);
		if (status < 500)
			*code = WSL_IO;
		goto out;
	}
	if (!json_is_object(*doc)) {
		*code = WSL_IO;
		snprintf(why, cap, "response is not a json object%s%s",
			 *doc == NULL ? ": " : "", *doc == NULL ? jerr.text : "");
		goto out;
	}
	free(b.data);
	return ATTEMPT_OK;
out:
	json_decref(*doc);
	*doc = NULL;
	free(b.data);
	return end;
}

/*
 * Sends req (a JSON object; the reference is taken) to path at the
 * endpoints in failover order.  may_apply: the request may change the store
 * (see etcd.h for what that restricts).  Returns 0 with *doc the response
 * object (json_decref it), or -1 with err filled.
 */
static int call(struct etcd_client *c, const char *path, json_t *req,
		bool may_apply, json_t **doc, struct wsl_error *err)
{
	char failures[FAIL_MAX] = "";
	char why[512];
	enum wsl_code code = WSL_BACKEND_UNAVAILABLE;
	enum attempt_end end;
	char *text;
	size_t i, idx;
	bool sent, reauthed = false;

	*doc = NULL;
	if (req == NULL)
		return wsl_error_set(err, WSL_INTERNAL, "out of memory");
	if (c->user != NULL && !c->authenticated && !c->authenticating &&
	    authenticate(c, err) != 0) {
		json_decref(req);
		return -1;
	}
	text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (text == NULL)
		return wsl_error_set(err, WSL_INTERNAL, "out of memory");
	for (i = 0; i < c->n_urls; i++) {
		idx = (c->current + i) % c->n_urls;
		end = attempt(c, c->urls[idx], path, text, strlen(text), doc,
			      &code, &sent, why, sizeof(why));
		if (end == ATTEMPT_OK) {
			c->current = idx;
			free(text);
			return 0;
		}
		if (end == ATTEMPT_STOP && c->user != NULL && c->authenticated &&
		    !c->authenticating && !reauthed &&
		    strstr(why, "invalid auth token") != NULL) {
			/* The token expired (etcd's simple tokens do): get a
			 * new one and send again; etcd rejected the request
			 * before applying it. */
			c->authenticated = false;
			reauthed = true;
			if (authenticate(c, err) != 0) {
				free(text);
				return -1;
			}
			i--;
			continue;
		}
		if (end == ATTEMPT_STOP) {
			free(text);
			return wsl_error_set(err, code, "etcd %s at %s: %s", path,
					     c->urls[idx], why);
		}
		if (may_apply && sent) {
			free(text);
			wsl_error_set(err, WSL_BACKEND_UNAVAILABLE,
				      "etcd %s at %s failed, outcome unknown: %s",
				      path, c->urls[idx], why);
			if (err != NULL)
				err->outcome_unknown = true;
			return -1;
		}
		append(failures, sizeof(failures), "%s%s: %s",
		       i ? "; " : "", c->urls[idx], why);
	}
	free(text);
	return wsl_error_set(err, WSL_BACKEND_UNAVAILABLE,
			     "no etcd endpoint could serve %s: %s", path, failures);
}

/* ---- JSON fields ----------------------------------------------------- */

static int set_bytes(json_t *o, const char *name, const char *p, size_t len)
{
	char *b64 = crypto_base64_encode(p, len);
	int rc;

	if (b64 == NULL)
		return -1;
	rc = json_object_set_new(o, name, json_string(b64));
	free(b64);
	return rc;
}

static int set_int64(json_t *o, const char *name, long long v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%lld", v);
	return json_object_set_new(o, name, json_string(buf));
}

/* An int64 field: absent or null is 0; a decimal string or a JSON integer. */
static int get_int64(json_t *o, const char *name, long long *out)
{
	json_t *v = json_object_get(o, name);
	const char *s, *p;
	char *end;
	size_t len;

	*out = 0;
	if (v == NULL || json_is_null(v))
		return 0;
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return -1;
	s = json_string_value(v);
	len = json_string_length(v);
	p = s[0] == '-' ? s + 1 : s;
	if (len == 0 || len > 20 || *p < '0' || *p > '9')
		return -1;
	errno = 0;
	*out = strtoll(s, &end, 10);
	if (errno != 0 || end != s + len) {
		*out = 0;
		return -1;
	}
	return 0;
}

static int get_bool(json_t *o, const char *name, bool *out)
{
	json_t *v = json_object_get(o, name);

	*out = false;
	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return -1;
	*out = json_is_true(v);
	return 0;
}

/* A bytes field as a new NUL-terminated buffer; absent is empty. */
static int get_bytes(json_t *o, const char *name, char **out, size_t *len)
{
	json_t *v = json_object_get(o, name);

	if (v == NULL || json_is_null(v)) {
		*out = strdup("");
		*len = 0;
		return *out == NULL ? -1 : 0;
	}
	if (!json_is_string(v))
		return -1;
	return crypto_base64_decode(json_string_value(v), json_string_length(v),
				    out, len);
}

static int malformed(struct etcd_client *c, const char *path, const char *what,
		     struct wsl_error *err)
{
	return wsl_error_set(err, WSL_IO, "malformed etcd response to %s from %s: %s",
			     path, etcd_endpoint(c), what);
}

/* The response header's store revision: etcd always sends the header, and
 * the revision is at least 1 (that of the empty store). */
static int get_revision(json_t *doc, long long *rev)
{
	json_t *h = json_object_get(doc, "header");

	if (!json_is_object(h) || get_int64(h, "revision", rev) < 0 || *rev < 1) {
		*rev = 0;
		return -1;
	}
	return 0;
}

static int parse_kv(json_t *o, struct etcd_kv *kv)
{
	memset(kv, 0, sizeof(*kv));
	if (!json_is_object(o) ||
	    get_bytes(o, "key", &kv->key, &kv->key_len) < 0 ||
	    get_bytes(o, "value", &kv->value, &kv->value_len) < 0 ||
	    get_int64(o, "create_revision", &kv->create_revision) < 0 ||
	    get_int64(o, "mod_revision", &kv->mod_revision) < 0 ||
	    get_int64(o, "version", &kv->version) < 0 ||
	    get_int64(o, "lease", &kv->lease) < 0) {
		free(kv->key);
		free(kv->value);
		memset(kv, 0, sizeof(*kv));
		return -1;
	}
	return 0;
}

void etcd_kvs_free(struct etcd_kv *kvs, size_t n)
{
	size_t i;

	if (kvs == NULL)
		return;
	for (i = 0; i < n; i++) {
		free(kvs[i].key);
		free(kvs[i].value);
	}
	free(kvs);
}

/* A RangeResponse's kvs, count and more. */
static int parse_range(json_t *o, struct etcd_kv **kvs, size_t *n,
		       long long *count, bool *more)
{
	json_t *arr = json_object_get(o, "kvs");
	size_t i, len;

	*kvs = NULL;
	*n = 0;
	if (get_int64(o, "count", count) < 0 || get_bool(o, "more", more) < 0)
		return -1;
	if (arr == NULL || json_is_null(arr))
		return 0;
	if (!json_is_array(arr))
		return -1;
	len = json_array_size(arr);
	if (len == 0)
		return 0;
	*kvs = calloc(len, sizeof(**kvs));
	if (*kvs == NULL)
		return -1;
	for (i = 0; i < len; i++) {
		if (parse_kv(json_array_get(arr, i), &(*kvs)[i]) < 0) {
			etcd_kvs_free(*kvs, i);
			*kvs = NULL;
			return -1;
		}
	}
	*n = len;
	return 0;
}

/* ---- requests -------------------------------------------------------- */

size_t etcd_prefix_end(const char *prefix, size_t len, char *out)
{
	size_t n = len;

	while (n > 0 && (unsigned char)prefix[n - 1] == 0xff)
		n--;
	if (n == 0) {
		out[0] = '\0';
		return 1;
	}
	memcpy(out, prefix, n);
	out[n - 1] = (char)((unsigned char)out[n - 1] + 1);
	return n;
}

/* Sets key and, when given, range_end on o. */
static int set_range(json_t *o, const char *key, size_t key_len,
		     const char *range_end, size_t range_end_len)
{
	if (set_bytes(o, "key", key, key_len) < 0)
		return -1;
	if (range_end != NULL &&
	    set_bytes(o, "range_end", range_end, range_end_len) < 0)
		return -1;
	return 0;
}

static json_t *range_request(const char *key, size_t key_len,
			     const char *range_end, size_t range_end_len,
			     long limit)
{
	json_t *o = json_object();

	if (o == NULL || set_range(o, key, key_len, range_end, range_end_len) < 0 ||
	    (limit > 0 && set_int64(o, "limit", limit) < 0)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int etcd_range(struct etcd_client *c, const char *key, size_t key_len,
	       const char *range_end, size_t range_end_len, long limit,
	       struct etcd_kv **kvs, size_t *n, long long *header_revision,
	       struct wsl_error *err)
{
	json_t *doc;
	long long rev, count;
	bool more;

	*kvs = NULL;
	*n = 0;
	if (limit < 0)
		return wsl_error_set(err, WSL_INTERNAL, "negative etcd range limit");
	if (call(c, "/v3/kv/range",
		 range_request(key, key_len, range_end, range_end_len, limit),
		 false, &doc, err) < 0)
		return -1;
	if (get_revision(doc, &rev) < 0 ||
	    parse_range(doc, kvs, n, &count, &more) < 0) {
		json_decref(doc);
		return malformed(c, "/v3/kv/range", "bad header or kvs", err);
	}
	json_decref(doc);
	if (header_revision != NULL)
		*header_revision = rev;
	return 0;
}

static const char *const target_names[] = {
	[ETCD_TARGET_VERSION] = "VERSION",
	[ETCD_TARGET_CREATE] = "CREATE",
	[ETCD_TARGET_MOD] = "MOD",
	[ETCD_TARGET_VALUE] = "VALUE",
	[ETCD_TARGET_LEASE] = "LEASE",
};

static const char *const target_fields[] = {
	[ETCD_TARGET_VERSION] = "version",
	[ETCD_TARGET_CREATE] = "create_revision",
	[ETCD_TARGET_MOD] = "mod_revision",
	[ETCD_TARGET_VALUE] = "value",
	[ETCD_TARGET_LEASE] = "lease",
};

static const char *const cmp_names[] = {
	[ETCD_CMP_EQUAL] = "EQUAL",
	[ETCD_CMP_NOT_EQUAL] = "NOT_EQUAL",
	[ETCD_CMP_GREATER] = "GREATER",
	[ETCD_CMP_LESS] = "LESS",
};

static json_t *compare_json(const struct etcd_compare *k)
{
	json_t *o = json_object();
	int rc;

	if (o == NULL || (unsigned)k->target > ETCD_TARGET_LEASE ||
	    (unsigned)k->cmp > ETCD_CMP_LESS)
		goto fail;
	if (set_range(o, k->key, k->key_len, k->range_end, k->range_end_len) < 0 ||
	    json_object_set_new(o, "target",
				json_string(target_names[k->target])) < 0 ||
	    json_object_set_new(o, "result", json_string(cmp_names[k->cmp])) < 0)
		goto fail;
	if (k->target == ETCD_TARGET_VALUE)
		rc = set_bytes(o, "value", k->value ? k->value : "", k->value_len);
	else
		rc = set_int64(o, target_fields[k->target], k->number);
	if (rc < 0)
		goto fail;
	return o;
fail:
	json_decref(o);
	return NULL;
}

static json_t *op_json(const struct etcd_op *op)
{
	json_t *o = json_object(), *wrap = json_object();
	const char *name;

	if (o == NULL || wrap == NULL)
		goto fail;
	switch (op->type) {
	case ETCD_OP_RANGE:
		name = "request_range";
		if (set_range(o, op->key, op->key_len, op->range_end,
			      op->range_end_len) < 0 ||
		    (op->limit > 0 && set_int64(o, "limit", op->limit) < 0))
			goto fail;
		break;
	case ETCD_OP_PUT:
		name = "request_put";
		if (set_bytes(o, "key", op->key, op->key_len) < 0 ||
		    set_bytes(o, "value", op->value ? op->value : "",
			      op->value_len) < 0 ||
		    (op->lease != 0 && set_int64(o, "lease", op->lease) < 0))
			goto fail;
		break;
	case ETCD_OP_DELETE:
		name = "request_delete_range";
		if (set_range(o, op->key, op->key_len, op->range_end,
			      op->range_end_len) < 0)
			goto fail;
		break;
	default:
		goto fail;
	}
	if (json_object_set_new(wrap, name, o) < 0) {
		json_decref(wrap);
		return NULL;
	}
	return wrap;
fail:
	json_decref(o);
	json_decref(wrap);
	return NULL;
}

static int add_ops(json_t *req, const char *name, const struct etcd_op *ops,
		   size_t n, bool *writes)
{
	json_t *arr;
	size_t i;

	if (n == 0)
		return 0;
	arr = json_array();
	if (json_object_set_new(req, name, arr) < 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (ops[i].type != ETCD_OP_RANGE)
			*writes = true;
		if (json_array_append_new(arr, op_json(&ops[i])) < 0)
			return -1;
	}
	return 0;
}

static json_t *txn_request(const struct etcd_txn *t, bool *writes)
{
	json_t *req = json_object(), *arr;
	size_t i;

	*writes = false;
	if (req == NULL)
		return NULL;
	if (t->n_compare > 0) {
		arr = json_array();
		if (json_object_set_new(req, "compare", arr) < 0)
			goto fail;
		for (i = 0; i < t->n_compare; i++)
			if (json_array_append_new(arr,
						  compare_json(&t->compare[i])) < 0)
				goto fail;
	}
	if (add_ops(req, "success", t->success, t->n_success, writes) < 0 ||
	    add_ops(req, "failure", t->failure, t->n_failure, writes) < 0)
		goto fail;
	return req;
fail:
	json_decref(req);
	return NULL;
}

void etcd_txn_result_free(struct etcd_txn_result *res)
{
	size_t i;

	if (res == NULL)
		return;
	for (i = 0; i < res->n_ops; i++)
		etcd_kvs_free(res->ops[i].kvs, res->ops[i].n_kvs);
	free(res->ops);
	memset(res, 0, sizeof(*res));
}

/* The responses array of a TxnResponse, checked against the branch run. */
static int parse_txn_responses(json_t *doc, const struct etcd_op *ops,
			       size_t n_ops, struct etcd_txn_result *res)
{
	static const char *const names[] = {
		[ETCD_OP_RANGE] = "response_range",
		[ETCD_OP_PUT] = "response_put",
		[ETCD_OP_DELETE] = "response_delete_range",
	};
	json_t *arr = json_object_get(doc, "responses"), *r;
	struct etcd_op_result *op;
	size_t i, n = 0;

	if (arr != NULL && !json_is_null(arr)) {
		if (!json_is_array(arr))
			return -1;
		n = json_array_size(arr);
	}
	if (n != n_ops)
		return -1;
	if (n == 0)
		return 0;
	res->ops = calloc(n, sizeof(*res->ops));
	if (res->ops == NULL)
		return -1;
	for (i = 0; i < n; i++) {
		op = &res->ops[i];
		op->type = ops[i].type;
		res->n_ops = i + 1;
		r = json_object_get(json_array_get(arr, i), names[op->type]);
		if (!json_is_object(r))
			return -1;
		if (op->type == ETCD_OP_RANGE &&
		    parse_range(r, &op->kvs, &op->n_kvs, &op->count,
				&op->more) < 0)
			return -1;
		if (op->type == ETCD_OP_DELETE &&
		    get_int64(r, "deleted", &op->count) < 0)
			return -1;
	}
	return 0;
}

int etcd_txn(struct etcd_client *c, const struct etcd_txn *t, bool *succeeded,
	     struct etcd_txn_result *res, struct wsl_error *err)
{
	struct etcd_txn_result local = { 0 };
	json_t *req, *doc;
	bool writes;

	*succeeded = false;
	if (res != NULL)
		memset(res, 0, sizeof(*res));
	req = txn_request(t, &writes);
	/* a txn of compares and ranges alone is resent like a range */
	if (call(c, "/v3/kv/txn", req, writes, &doc, err) < 0)
		return -1;
	if (get_bool(doc, "succeeded", succeeded) < 0 ||
	    get_revision(doc, &local.revision) < 0 ||
	    parse_txn_responses(doc, *succeeded ? t->success : t->failure,
				*succeeded ? t->n_success : t->n_failure,
				&local) < 0) {
		json_decref(doc);
		etcd_txn_result_free(&local);
		*succeeded = false;
		return malformed(c, "/v3/kv/txn", "bad succeeded, header or responses",
				 err);
	}
	json_decref(doc);
	if (res != NULL)
		*res = local;
	else
		etcd_txn_result_free(&local);
	return 0;
}

static json_t *lease_request(const char *field, long long v)
{
	json_t *o = json_object();

	if (o == NULL || set_int64(o, field, v) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int etcd_lease_grant(struct etcd_client *c, long long ttl_s,
		     long long *lease_id, long long *granted_ttl_s,
		     struct wsl_error *err)
{
	json_t *doc;
	long long id, ttl, rev;

	*lease_id = 0;
	if (ttl_s < 1 || ttl_s > 9000000000LL)
		return wsl_error_set(err, WSL_INTERNAL,
				     "etcd lease ttl %lld s out of range", ttl_s);
	/* a second grant after an unanswered first one leaves at most an
	 * orphan lease without keys, which expires: safe to resend */
	if (call(c, "/v3/lease/grant", lease_request("TTL", ttl_s), false, &doc,
		 err) < 0)
		return -1;
	if (get_revision(doc, &rev) < 0 || get_int64(doc, "ID", &id) < 0 ||
	    get_int64(doc, "TTL", &ttl) < 0 || id == 0 || ttl <= 0) {
		json_decref(doc);
		return malformed(c, "/v3/lease/grant", "bad ID or TTL", err);
	}
	json_decref(doc);
	*lease_id = id;
	if (granted_ttl_s != NULL)
		*granted_ttl_s = ttl;
	return 0;
}

int etcd_lease_keepalive(struct etcd_client *c, long long lease_id,
			 long long *ttl_left_s, struct wsl_error *err)
{
	json_t *doc, *result;
	long long id, ttl, rev;

	*ttl_left_s = 0;
	/* a bidirectional stream: the gateway sends the one request, relays
	 * the one answer as {"result":{...}} and ends the stream */
	if (call(c, "/v3/lease/keepalive", lease_request("ID", lease_id), false,
		 &doc, err) < 0)
		return -1;
	result = json_object_get(doc, "result");
	if (!json_is_object(result) || get_revision(result, &rev) < 0 ||
	    get_int64(result, "ID", &id) < 0 ||
	    get_int64(result, "TTL", &ttl) < 0 || id != lease_id) {
		json_decref(doc);
		return malformed(c, "/v3/lease/keepalive", "bad result", err);
	}
	json_decref(doc);
	*ttl_left_s = ttl > 0 ? ttl : 0;
	return 0;
}

int etcd_lease_revoke(struct etcd_client *c, long long lease_id,
		      struct wsl_error *err)
{
	json_t *doc;

	/* revoking twice ends the same way, so it is resent like a read */
	if (call(c, "/v3/lease/revoke", lease_request("ID", lease_id), false,
		 &doc, err) < 0) {
		if (err != NULL && err->code == WSL_IO &&
		    strstr(err->message, "requested lease not found") != NULL) {
			wsl_error_clear(err);
			return 0;
		}
		return -1;
	}
	json_decref(doc);
	return 0;
}

/* ---- watch ----------------------------------------------------------- */

/*
 * Looks at one line of the watch stream: {"result":{"created":true}} first,
 * then {"result":{"events":[...]}} or {"result":{"canceled":true,
 * "compact_revision":N,"cancel_reason":...}}, or {"error":{...}}.
 */
static void watch_line(struct watch *w, const char *line, size_t len)
{
	json_t *doc, *r, *events;
	json_error_t jerr;
	long long code, compact;
	const char *message;
	bool created, canceled;

	while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' '))
		len--;
	if (len == 0)
		return;
	doc = json_loadb(line, len, 0, &jerr);
	if (doc != NULL && gateway_error(doc, &code, &message)) {
		w->failed = true;
		w->code = transient_grpc(code) ? WSL_BACKEND_UNAVAILABLE : WSL_IO;
		snprintf(w->message, sizeof(w->message),
			 "%s (grpc code %lld)", message, code);
		json_decref(doc);
		return;
	}
	r = json_object_get(doc, "result");
	events = json_object_get(r, "events");
	if (!json_is_object(r) || get_bool(r, "created", &created) < 0 ||
	    get_bool(r, "canceled", &canceled) < 0 ||
	    get_int64(r, "compact_revision", &compact) < 0 ||
	    (events != NULL && !json_is_array(events))) {
		w->failed = true;
		w->code = WSL_IO;
		snprintf(w->message, sizeof(w->message),
			 "malformed watch response");
		json_decref(doc);
		return;
	}
	if (created)
		w->created = true;
	if (json_array_size(events) > 0 || (canceled && compact > 0)) {
		w->changed = true;
	} else if (canceled) {
		message = json_string_value(json_object_get(r, "cancel_reason"));
		w->failed = true;
		w->code = WSL_BACKEND_UNAVAILABLE;
		snprintf(w->message, sizeof(w->message), "watch canceled: %s",
			 message && message[0] ? message : "no reason given");
	}
	json_decref(doc);
}

/* Collects the stream and stops the transfer (returns 0) as soon as a
 * change or a failure is seen. */
static size_t write_watch(char *data, size_t size, size_t nmemb, void *arg)
{
	struct watch *w = arg;
	size_t n = size * nmemb;
	char *nl;

	if (body_add(&w->buf, data, n) < 0)
		return 0;
	while (!w->changed && !w->failed &&
	       (nl = memchr(w->buf.data, '\n', w->buf.len)) != NULL) {
		watch_line(w, w->buf.data, (size_t)(nl - w->buf.data));
		w->buf.len -= (size_t)(nl + 1 - w->buf.data);
		memmove(w->buf.data, nl + 1, w->buf.len + 1);
	}
	return w->changed || w->failed ? 0 : n;
}

static json_t *watch_request(const char *key, size_t key_len,
			     const char *range_end, size_t range_end_len,
			     long long after_revision)
{
	json_t *o = json_object(), *wrap = json_object();

	if (o == NULL || wrap == NULL ||
	    set_range(o, key, key_len, range_end, range_end_len) < 0 ||
	    (after_revision > 0 &&
	     set_int64(o, "start_revision", after_revision + 1) < 0) ||
	    json_object_set(wrap, "create_request", o) < 0) {
		json_decref(o);
		json_decref(wrap);
		return NULL;
	}
	json_decref(o);
	return wrap;
}

int etcd_wait_change(struct etcd_client *c, const char *key, size_t key_len,
		     const char *range_end, size_t range_end_len,
		     long long after_revision, long timeout_ms,
		     struct wsl_error *err)
{
	char failures[FAIL_MAX] = "";
	char url[URL_MAX + 64];
	long long deadline, left;
	struct watch w;
	json_t *req;
	char *text;
	CURLcode rc;
	size_t i, idx;

	if (timeout_ms <= 0 || after_revision < 0 || after_revision == LLONG_MAX)
		return wsl_error_set(err, WSL_INTERNAL,
				     "bad etcd watch timeout or revision");
	req = watch_request(key, key_len, range_end, range_end_len,
			    after_revision);
	text = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (text == NULL)
		return wsl_error_set(err, WSL_INTERNAL, "out of memory");
	deadline = platform_mono_ms() + timeout_ms;
	for (i = 0; i < c->n_urls; i++) {
		idx = (c->current + i) % c->n_urls;
		left = deadline - platform_mono_ms();
		if (left <= 0) {
			append(failures, sizeof(failures), "%sno time left",
			       i ? "; " : "");
			break;
		}
		memset(&w, 0, sizeof(w));
		snprintf(url, sizeof(url), "%s/v3/watch", c->urls[idx]);
		prepare(c, url, c->watch_headers, text, strlen(text), (long)left,
			left < c->timeout_ms ? (long)left : c->timeout_ms,
			write_watch, &w);
		rc = curl_easy_perform(c->curl);
		/* the gateway ends a stream with an error object that has no
		 * newline after it */
		if (!w.changed && !w.failed && w.buf.len > 0)
			watch_line(&w, w.buf.data, w.buf.len);
		free(w.buf.data);
		if (w.changed) {
			c->current = idx;
			free(text);
			return 1;
		}
		if (w.buf.no_memory) {
			free(text);
			return wsl_error_set(err, WSL_INTERNAL, "out of memory");
		}
		if (w.failed && w.code == WSL_IO) {
			free(text);
			return wsl_error_set(err, WSL_IO, "etcd /v3/watch at %s: %s",
					     c->urls[idx], w.message);
		}
		if (rc == CURLE_OPERATION_TIMEDOUT && w.created) {
			c->current = idx;
			free(text);
			return 0;
		}
		if (w.failed)
			append(failures, sizeof(failures), "%s%s: %s",
			       i ? "; " : "", c->urls[idx], w.message);
		else if (w.buf.too_large)
			append(failures, sizeof(failures),
			       "%s%s: watch response line larger than %u bytes",
			       i ? "; " : "", c->urls[idx], ETCD_MAX_RESPONSE);
		else if (rc != CURLE_OK)
			append(failures, sizeof(failures), "%s%s: %s",
			       i ? "; " : "", c->urls[idx],
			       c->curl_err[0] ? c->curl_err : curl_easy_strerror(rc));
		else
			append(failures, sizeof(failures),
			       "%s%s: watch stream ended without a change",
			       i ? "; " : "", c->urls[idx]);
	}
	free(text);
	return wsl_error_set(err, WSL_BACKEND_UNAVAILABLE,
			     "no etcd endpoint could serve /v3/watch: %s", failures);
}
