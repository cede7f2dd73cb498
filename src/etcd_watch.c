/* etcd_watch.c - etcd_wait_change(s): one watch stream through the JSON
 * gateway (one {"result":...} object a line), read until a change, a
 * failure or the timeout, at the endpoints in failover order. Several
 * keys are several create requests in the one request body (the gateway
 * relays each line as a message of the stream); a progress notification
 * (a response with a header and nothing else) is no change.
 */
#include "etcd_impl.h"
#include "platform.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The state of a watch stream while it is being read. */
struct watch {
	struct body buf;
	bool created;
	bool changed;
	bool failed;
	enum wsl_code code;
	char message[512];
};

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

static json_t *watch_request(const struct etcd_watch_range *r,
			     long long after_revision, bool progress)
{
	json_t *o = json_object(), *wrap = json_object();

	if (o == NULL || wrap == NULL ||
	    set_range(o, r->key, r->key_len, r->range_end, r->range_end_len) < 0 ||
	    (after_revision > 0 &&
	     set_int64(o, "start_revision", after_revision + 1) < 0) ||
	    (progress && json_object_set_new(o, "progress_notify", json_true()) < 0) ||
	    json_object_set(wrap, "create_request", o) < 0) {
		json_decref(o);
		json_decref(wrap);
		return NULL;
	}
	json_decref(o);
	return wrap;
}

/* The create requests of r[0..n), one JSON object a line: the gateway
 * relays each as a message of the one stream. */
static char *watch_body(const struct etcd_watch_range *r, size_t n,
			long long after_revision, bool progress)
{
	struct body b = { 0 };
	size_t i;

	for (i = 0; i < n; i++) {
		json_t *req = watch_request(&r[i], after_revision, progress);
		char *one = req ? json_dumps(req, JSON_COMPACT) : NULL;
		int rc = one == NULL || body_add(&b, one, strlen(one)) < 0 ||
			 body_add(&b, "\n", 1) < 0;

		json_decref(req);
		free(one);
		if (rc) {
			free(b.data);
			return NULL;
		}
	}
	return b.data;
}

int etcd_wait_change(struct etcd_client *c, const char *key, size_t key_len,
		     const char *range_end, size_t range_end_len,
		     long long after_revision, long timeout_ms,
		     struct wsl_error *err)
{
	struct etcd_watch_range r = { key, key_len, range_end, range_end_len };

	return etcd_wait_changes(c, &r, 1, after_revision, timeout_ms, false, err);
}

int etcd_wait_changes(struct etcd_client *c, const struct etcd_watch_range *r,
		      size_t n, long long after_revision, long timeout_ms,
		      bool progress, struct wsl_error *err)
{
	char failures[FAIL_MAX] = "";
	char url[URL_MAX + 64];
	long long deadline, left;
	struct watch w;
	char *text;
	CURL *main;
	CURLcode rc;
	size_t i, idx;

	if (timeout_ms <= 0 || after_revision < 0 || after_revision == LLONG_MAX ||
	    n == 0)
		return wsl_error_set(err, WSL_INTERNAL,
				     "bad etcd watch timeout, revision or keys");
	if (c->watch_curl == NULL && (c->watch_curl = curl_easy_init()) == NULL)
		return wsl_error_set(err, WSL_INTERNAL, "cannot create a curl handle");
	text = watch_body(r, n, after_revision, progress);
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
		/* prepare sets up c->curl: the watch handle for this transfer */
		main = c->curl;
		c->curl = c->watch_curl;
		prepare(c, url, c->watch_headers, text, strlen(text), (long)left,
			left < c->timeout_ms ? (long)left : c->timeout_ms,
			write_watch, &w);
		rc = curl_easy_perform(c->curl);
		c->curl = main;
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
