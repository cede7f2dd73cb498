/* etcd_kv.c - the KV, txn and lease calls of the etcd client: proto3 JSON
 * field codecs (int64 as decimal strings, bytes as base64, absent fields at
 * their zero value: see etcd.c), the request documents and the checked
 * parsing of their responses.  Each call goes through call() (etcd.c).
 */
#include "etcd_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto.h"

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

int set_int64(json_t *o, const char *name, long long v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%lld", v);
	return json_object_set_new(o, name, json_string(buf));
}

/* An int64 field: absent or null is 0; a decimal string or a JSON integer. */
int get_int64(json_t *o, const char *name, long long *out)
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

int get_bool(json_t *o, const char *name, bool *out)
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
int set_range(json_t *o, const char *key, size_t key_len,
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

int etcd_lease_ttl(struct etcd_client *c, long long lease_id, long long *left_s,
		   long long *granted_s, struct wsl_error *err)
{
	json_t *doc;
	long long id, ttl, granted, rev;

	*left_s = -1;
	*granted_s = 0;
	if (call(c, "/v3/lease/timetolive", lease_request("ID", lease_id), false,
		 &doc, err) < 0)
		return -1;
	if (get_revision(doc, &rev) < 0 || get_int64(doc, "ID", &id) < 0 ||
	    get_int64(doc, "TTL", &ttl) < 0 || get_int64(doc, "grantedTTL", &granted) < 0 ||
	    id != lease_id) {
		json_decref(doc);
		return malformed(c, "/v3/lease/timetolive", "bad ID or TTL", err);
	}
	json_decref(doc);
	*left_s = ttl < 0 ? -1 : ttl;
	*granted_s = ttl < 0 ? 0 : granted;
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
