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
	/* > 0: when the watch is created past this revision, the key is read
	 * (on the client's other handle, the stream staying open) to cover
	 * the gap; read_failed: that read failed, its error is in read_err */
	long long check_after;
	struct etcd_client *c;
	const char *key;
	size_t key_len;
	bool read_failed;
	struct wsl_error *read_err;
	enum wsl_code code;
	char message[512];
};

static int key_changed(struct etcd_client *c, const char *key, size_t key_len,
		       long long *after, struct wsl_error *err);

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
	if (created) {
		json_t *h = json_object_get(r, "header");
		long long rev = 0;

		w->created = true;
		/* Created at a revision past the one the caller knows the key
		 * at: a change in between would not be reported. A read of
		 * the key, at a revision at least the watch's, covers the
		 * gap; the watch covers what comes after it, so the stream
		 * stays open (a new one is a new connection, and would be
		 * created past a busy store's revision again). */
		if (w->check_after > 0 &&
		    (!json_is_object(h) || get_int64(h, "revision", &rev) < 0 ||
		     rev > w->check_after)) {
			int rc = key_changed(w->c, w->key, w->key_len, &w->check_after,
					     w->read_err);
			if (rc < 0)
				w->read_failed = true;
			else if (rc > 0)
				w->changed = true;
		}
	}
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
	while (!w->changed && !w->failed && !w->read_failed &&
	       (nl = memchr(w->buf.data, '\n', w->buf.len)) != NULL) {
		watch_line(w, w->buf.data, (size_t)(nl - w->buf.data));
		w->buf.len -= (size_t)(nl + 1 - w->buf.data);
		memmove(w->buf.data, nl + 1, w->buf.len + 1);
	}
	return w->changed || w->failed || w->read_failed ? 0 : n;
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

/* etcd_wait_changes; with check_after > 0 (then after_revision is 0:
 * changes from the watch's creation on, and n is 1, a single key) a watch
 * created past check_after also reads the key (see watch_line). */
static int watch_stream(struct etcd_client *c, const struct etcd_watch_range *r,
			size_t n, long long after_revision, long timeout_ms,
			bool progress, long long check_after, struct wsl_error *err)
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
		w.check_after = check_after;
		w.c = c;
		w.key = r[0].key;
		w.key_len = r[0].key_len;
		w.read_err = err;
		snprintf(url, sizeof(url), "%s/v3/watch", c->urls[idx]);
		/* prepare sets up c->curl: the watch handle for this transfer;
		 * then c->curl is the requests' handle again, for the read
		 * that watch_line may make while the stream is open (libcurl
		 * allows a transfer on another handle from a callback) */
		main = c->curl;
		c->curl = c->watch_curl;
		prepare(c, url, c->watch_headers, text, strlen(text), (long)left,
			left < c->timeout_ms ? (long)left : c->timeout_ms,
			write_watch, &w);
		c->curl = main;
		rc = curl_easy_perform(c->watch_curl);
		if (w.read_failed) {
			free(w.buf.data);
			free(text);
			return -1;
		}
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

int etcd_wait_changes(struct etcd_client *c, const struct etcd_watch_range *r,
		      size_t n, long long after_revision, long timeout_ms,
		      bool progress, struct wsl_error *err)
{
	return watch_stream(c, r, n, after_revision, timeout_ms, progress, 0, err);
}

/* 1 when key changed after revision *after, as far as a read can tell
 * (it is gone, or its mod revision is later), else 0 with *after moved
 * to the read's revision; -1 when it cannot be read. Called from the
 * watch stream's callback (watch_line): it uses c->curl, never the
 * watch's handle. */
static int key_changed(struct etcd_client *c, const char *key, size_t key_len,
		       long long *after, struct wsl_error *err)
{
	struct etcd_kv *kvs = NULL;
	size_t n = 0;
	long long rev = 0;
	int changed;

	if (etcd_range(c, key, key_len, NULL, 0, 1, &kvs, &n, &rev, err) != 0)
		return -1;
	changed = n == 0 || kvs[0].mod_revision > *after;
	etcd_kvs_free(kvs, n);
	if (!changed && rev > *after)
		*after = rev;
	return changed ? 1 : 0;
}

/*
 * A watch from a past revision is slow to report: etcd puts it among its
 * lagging watchers, which it catches up every 100 ms, so a release right
 * after a waiter started watching reached it 50 ms late on average. One
 * key (a waiter's: the waiter ahead, or the holder) is therefore watched
 * from the watch's creation on, and when that was past after_revision, a
 * read of the key, made while the stream stays open, covers the gap
 * (watch_line): one stream, one connection per wait slice, however busy
 * the store. A range is watched from after_revision.
 */
int etcd_wait_change(struct etcd_client *c, const char *key, size_t key_len,
		     const char *range_end, size_t range_end_len,
		     long long after_revision, long timeout_ms,
		     struct wsl_error *err)
{
	struct etcd_watch_range r = { key, key_len, range_end, range_end_len };

	if (timeout_ms <= 0 || after_revision < 0 || after_revision == LLONG_MAX)
		return wsl_error_set(err, WSL_INTERNAL, "bad etcd watch timeout or revision");
	if (range_end == NULL && after_revision > 0)
		return watch_stream(c, &r, 1, 0, timeout_ms, false, after_revision, err);
	return watch_stream(c, &r, 1, after_revision, timeout_ms, false, 0, err);
}
