/* etcd.c - etcd v3 through its JSON gateway, with libcurl and jansson:
 * loading libcurl, the client and its endpoints, authentication, and the
 * transport (one request at the endpoints in failover order).  The KV,
 * txn and lease requests are in etcd_kv.c, the watch stream in
 * etcd_watch.c; etcd_impl.h is what the three share.
 *
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
#include "etcd_impl.h"
#include "platform.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dlfcn.h>

/*
 * libcurl is loaded with dlopen(3) when the etcd backend is first used,
 * not linked: its thirty-odd shared libraries would add ~3 ms to every
 * wslock start (measured against a jansson+libsodium binary; see
 * bench/RESULTS.md), while only --backend etcd needs them. The functions
 * are called through this table; the names below are macros for it.
 */
struct curl_fns curlf;

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
	/* RTLD_LAZY: the functions of its thirty libraries are bound when
	 * first called, as in a program linked with them, not all at the
	 * load (about 1,800 fewer symbol look-ups, 0.4 ms of CPU); ours are
	 * all looked up below, so a missing one still fails here. */
	lib = dlopen("libcurl.so.4", RTLD_LAZY | RTLD_LOCAL);
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

/* How one attempt at one endpoint ended. */
enum attempt_end {
	ATTEMPT_OK,
	ATTEMPT_NEXT,		/* this endpoint failed; another may serve */
	ATTEMPT_STOP,		/* final: etcd's verdict, or unsafe to resend */
};

static bool curl_ready;

void append(char *buf, size_t cap, const char *fmt, ...)
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
	if (c->watch_curl != NULL)
		curl_easy_cleanup(c->watch_curl);
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

size_t etcd_endpoint_count(const struct etcd_client *c)
{
	return c->n_urls;
}

void etcd_start_at(struct etcd_client *c, const char *endpoint)
{
	size_t i;

	for (i = 0; endpoint != NULL && i < c->n_urls; i++)
		if (strcmp(c->urls[i], endpoint) == 0)
			c->current = i;
}

/* ---- transport ------------------------------------------------------- */

int body_add(struct body *b, const char *data, size_t n)
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
void prepare(struct etcd_client *c, const char *url,
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

bool transient_grpc(long long code)
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
bool gateway_error(json_t *doc, long long *code, const char **message)
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
int call(struct etcd_client *c, const char *path, json_t *req,
		bool may_apply, json_t **doc, struct wsl_error *err)
{
	char failures[FAIL_MAX] = "";
	char why[512];
	enum wsl_code code = WSL_BACKEND_UNAVAILABLE;
	enum attempt_end end;
	char *text;
	size_t i, idx, start;
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
	for (i = 0, start = c->current; i < c->n_urls; i++) {
		idx = (start + i) % c->n_urls;
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
		/* This endpoint failed: later calls start at the next one, so
		 * that one that accepts connections but never answers costs
		 * one timeout per client, not one per request. */
		if (idx == c->current)
			c->current = (idx + 1) % c->n_urls;
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
