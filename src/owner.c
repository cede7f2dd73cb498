/* owner.c - owner documents with jansson (DESIGN.md section 3). */
#include "owner.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *const policy_names[] = {
	[IDENTITY_PID_START_BOOT] = "pid-start-boot",
	[IDENTITY_PID_ONLY] = "pid-only-fail-closed",
};

static const char *const owner_keys[] = {
	"schema_version", "kind", "token", "operation_id", "purpose",
	"workspace_root", "host", "boot_id", "pid", "pid_start_ticks",
	"identity_policy", "acquired_at", "recovery_of",
};
#define OWNER_NKEYS (sizeof(owner_keys) / sizeof(owner_keys[0]))

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9');
}

static bool hex_token_valid(const char *s)
{
	return crypto_hex_valid(s, WSL_TOKEN_HEX);
}

bool owner_operation_id_valid(const char *s)
{
	size_t len = strlen(s), i;

	if (len == 0 || len > OWNER_OPID_MAX || !is_alnum(s[0]))
		return false;
	for (i = 1; i < len; i++)
		if (!is_alnum(s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
			return false;
	return true;
}

/* Decodes one UTF-8 sequence at s; returns its length (0 when invalid). */
static size_t utf8_decode(const unsigned char *s, unsigned long *cp)
{
	size_t n, i;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	} else if ((s[0] & 0xe0) == 0xc0) {
		*cp = s[0] & 0x1f;
		n = 2;
	} else if ((s[0] & 0xf0) == 0xe0) {
		*cp = s[0] & 0x0f;
		n = 3;
	} else if ((s[0] & 0xf8) == 0xf0) {
		*cp = s[0] & 0x07;
		n = 4;
	} else {
		return 0;
	}
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		*cp = (*cp << 6) | (s[i] & 0x3f);
	}
	if ((n == 2 && *cp < 0x80) || (n == 3 && *cp < 0x800) ||
	    (n == 4 && (*cp < 0x10000 || *cp > 0x10ffff)) ||
	    (*cp >= 0xd800 && *cp <= 0xdfff))
		return 0;
	return n;
}

bool owner_purpose_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t chars = 0;

	while (*p != '\0') {
		unsigned long cp;
		size_t n = utf8_decode(p, &cp);

		if (n == 0 || cp < 0x20 || (cp >= 0x7f && cp < 0xa0))
			return false;
		p += n;
		if (++chars > OWNER_PURPOSE_MAX)
			return false;
	}
	return chars > 0;
}

bool owner_path_canonical(const char *s)
{
	size_t len = strlen(s), i;

	if (len < 2 || len >= PATH_MAX || s[0] != '/' || s[len - 1] == '/')
		return false;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f)
			return false;
		if (c == '/') {
			const char *next = s + i + 1;
			if (next[0] == '/' ||
			    (next[0] == '.' && (next[1] == '/' || next[1] == '\0')) ||
			    (next[0] == '.' && next[1] == '.' &&
			     (next[2] == '/' || next[2] == '\0')))
				return false;
		}
	}
	return true;
}

void owner_new_operation_id(char out[OWNER_OPID_MAX + 1])
{
	char rnd[9], stamp[32];
	struct tm tm;
	time_t now = time(NULL);

	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	crypto_random_hex(rnd, 4);
	snprintf(out, OWNER_OPID_MAX + 1, "%s-%s", stamp, rnd);
}

int owner_build(struct owner *o, const char *workspace_root, pid_t pid,
		const char *purpose, const char *operation_id,
		const char *recovery_of, struct wsl_error *err)
{
	memset(o, 0, sizeof(*o));
	if (!owner_path_canonical(workspace_root))
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "workspace path %s is not canonical", workspace_root);
	if (!owner_purpose_valid(purpose))
		return wsl_error_set(err, WSL_USAGE,
				     "purpose must be 1..%d printable characters",
				     OWNER_PURPOSE_MAX);
	if (operation_id != NULL && !owner_operation_id_valid(operation_id))
		return wsl_error_set(err, WSL_USAGE,
				     "operation id '%s' must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,191}$",
				     operation_id);
	if (pid < 1 || pid > WSL_PID_MAX)
		return wsl_error_set(err, WSL_USAGE, "pid %ld is outside 1..%d",
				     (long)pid, WSL_PID_MAX);
	if (platform_hostname(o->host) != 0) {
		if (getenv("WSLOCK_HOST") != NULL)
			return wsl_error_set(err, WSL_USAGE,
					     "WSLOCK_HOST must be 1..%d printable characters without spaces",
					     WSL_HOST_MAX);
		return wsl_error_errno(err, WSL_OS, errno, "cannot determine the host name");
	}
	crypto_token(o->token);
	if (operation_id != NULL)
		snprintf(o->operation_id, sizeof(o->operation_id), "%s", operation_id);
	else
		owner_new_operation_id(o->operation_id);
	snprintf(o->purpose, sizeof(o->purpose), "%s", purpose);
	snprintf(o->workspace_root, sizeof(o->workspace_root), "%s", workspace_root);
	o->pid = pid;
	o->has_boot_id = platform_boot_id(o->boot_id) == 0;
	o->has_start_ticks = platform_pid_start_ticks(pid, &o->start_ticks) == 0;
	if (!o->has_start_ticks && errno == ESRCH)
		return wsl_error_set(err, WSL_USAGE,
				     "pid %ld does not exist; a holder must be a running process",
				     (long)pid);
	o->policy = o->has_boot_id && o->has_start_ticks ?
		IDENTITY_PID_START_BOOT : IDENTITY_PID_ONLY;
	platform_now_iso(o->acquired_at);
	if (recovery_of != NULL) {
		snprintf(o->recovery_of, sizeof(o->recovery_of), "%s", recovery_of);
		o->has_recovery_of = true;
	}
	return 0;
}

static int why_set(char *why, size_t whylen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int why_set(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return -1;
}

/* Copies the string member key into out (cap bytes incl. NUL); a null is
 * allowed when *present is not NULL. */
static int get_string(json_t *obj, const char *key, char *out, size_t cap,
		      bool *present, char *why, size_t whylen)
{
	json_t *v = json_object_get(obj, key);
	size_t len;

	if (present != NULL && json_is_null(v)) {
		*present = false;
		out[0] = '\0';
		return 0;
	}
	if (!json_is_string(v))
		return why_set(why, whylen, "\"%s\" must be a string%s", key,
			       present != NULL ? " or null" : "");
	len = json_string_length(v);
	if (len >= cap || memchr(json_string_value(v), '\0', len) != NULL)
		return why_set(why, whylen, "\"%s\" is too long or holds NUL", key);
	memcpy(out, json_string_value(v), len + 1);
	if (present != NULL)
		*present = true;
	return 0;
}

int owner_parse(const char *buf, size_t len, struct owner *o, char *why,
		size_t whylen)
{
	json_error_t jerr;
	json_t *doc, *v;
	const char *key;
	char policy[32], kind[32];
	size_t i;
	int rc = -1;

	memset(o, 0, sizeof(*o));
	if (len > OWNER_DOC_MAX)
		return why_set(why, whylen, "document is larger than %d bytes",
			       OWNER_DOC_MAX);
	if (len == 0)
		return why_set(why, whylen, "document is empty");
	/* JSON_REJECT_DUPLICATES: {"pid":1,"pid":2} must not pass as either.
	 * Without JSON_DISABLE_EOF_CHECK, bytes after the object are an error;
	 * without JSON_ALLOW_NUL, "\u0000" is. */
	doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (doc == NULL)
		return why_set(why, whylen, "not valid JSON: %s (line %d, column %d)",
			       jerr.text, jerr.line, jerr.column);
	if (!json_is_object(doc)) {
		why_set(why, whylen, "not a JSON object");
		goto out;
	}
	json_object_foreach(doc, key, v) {
		bool known = false;
		for (i = 0; i < OWNER_NKEYS; i++)
			if (strcmp(key, owner_keys[i]) == 0)
				known = true;
		if (!known) {
			why_set(why, whylen, "unknown key \"%.64s\"", key);
			goto out;
		}
	}
	for (i = 0; i < OWNER_NKEYS; i++) {
		if (json_object_get(doc, owner_keys[i]) == NULL) {
			why_set(why, whylen, "missing key \"%s\"", owner_keys[i]);
			goto out;
		}
	}

	v = json_object_get(doc, "schema_version");
	if (!json_is_integer(v) || json_integer_value(v) != OWNER_SCHEMA) {
		why_set(why, whylen, "\"schema_version\" must be the integer %d", OWNER_SCHEMA);
		goto out;
	}
	if (get_string(doc, "kind", kind, sizeof(kind), NULL, why, whylen) != 0)
		goto out;
	if (strcmp(kind, OWNER_KIND) != 0) {
		why_set(why, whylen, "\"kind\" must be \"%s\"", OWNER_KIND);
		goto out;
	}
	if (get_string(doc, "token", o->token, sizeof(o->token), NULL, why, whylen) != 0)
		goto out;
	if (!hex_token_valid(o->token)) {
		why_set(why, whylen, "\"token\" must be 32 lowercase hex digits");
		goto out;
	}
	if (get_string(doc, "operation_id", o->operation_id, sizeof(o->operation_id),
		       NULL, why, whylen) != 0)
		goto out;
	if (!owner_operation_id_valid(o->operation_id)) {
		why_set(why, whylen, "\"operation_id\" has characters or a length that are not allowed");
		goto out;
	}
	if (get_string(doc, "purpose", o->purpose, sizeof(o->purpose), NULL, why, whylen) != 0)
		goto out;
	if (!owner_purpose_valid(o->purpose)) {
		why_set(why, whylen, "\"purpose\" must be 1..%d printable characters",
			OWNER_PURPOSE_MAX);
		goto out;
	}
	if (get_string(doc, "workspace_root", o->workspace_root,
		       sizeof(o->workspace_root), NULL, why, whylen) != 0)
		goto out;
	if (!owner_path_canonical(o->workspace_root)) {
		why_set(why, whylen, "\"workspace_root\" is not a canonical absolute path");
		goto out;
	}
	if (get_string(doc, "host", o->host, sizeof(o->host), NULL, why, whylen) != 0)
		goto out;
	if (!platform_host_valid(o->host)) {
		why_set(why, whylen, "\"host\" must be 1..%d printable characters without spaces",
			WSL_HOST_MAX);
		goto out;
	}
	if (get_string(doc, "boot_id", o->boot_id, sizeof(o->boot_id), &o->has_boot_id,
		       why, whylen) != 0)
		goto out;
	if (o->has_boot_id && !platform_boot_id_valid(o->boot_id)) {
		why_set(why, whylen, "\"boot_id\" is not a kernel boot id");
		goto out;
	}
	v = json_object_get(doc, "pid");
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    json_integer_value(v) > WSL_PID_MAX) {
		why_set(why, whylen, "\"pid\" must be an integer in 1..%d", WSL_PID_MAX);
		goto out;
	}
	o->pid = (pid_t)json_integer_value(v);
	v = json_object_get(doc, "pid_start_ticks");
	if (json_is_null(v)) {
		o->has_start_ticks = false;
	} else if (json_is_integer(v) && json_integer_value(v) >= 0) {
		o->has_start_ticks = true;
		o->start_ticks = (unsigned long long)json_integer_value(v);
	} else {
		why_set(why, whylen, "\"pid_start_ticks\" must be a non-negative integer or null");
		goto out;
	}
	if (get_string(doc, "identity_policy", policy, sizeof(policy), NULL, why, whylen) != 0)
		goto out;
	if (strcmp(policy, policy_names[IDENTITY_PID_START_BOOT]) == 0) {
		o->policy = IDENTITY_PID_START_BOOT;
		if (!o->has_boot_id || !o->has_start_ticks) {
			why_set(why, whylen, "policy pid-start-boot needs \"boot_id\" and \"pid_start_ticks\"");
			goto out;
		}
	} else if (strcmp(policy, policy_names[IDENTITY_PID_ONLY]) == 0) {
		o->policy = IDENTITY_PID_ONLY;
	} else {
		why_set(why, whylen, "\"identity_policy\" must be \"pid-start-boot\" or \"pid-only-fail-closed\"");
		goto out;
	}
	if (get_string(doc, "acquired_at", o->acquired_at, sizeof(o->acquired_at),
		       NULL, why, whylen) != 0)
		goto out;
	if (!platform_time_valid(o->acquired_at)) {
		why_set(why, whylen, "\"acquired_at\" must be UTC time as YYYY-MM-DDTHH:MM:SS.mmmZ");
		goto out;
	}
	if (get_string(doc, "recovery_of", o->recovery_of, sizeof(o->recovery_of),
		       &o->has_recovery_of, why, whylen) != 0)
		goto out;
	if (o->has_recovery_of && !hex_token_valid(o->recovery_of)) {
		why_set(why, whylen, "\"recovery_of\" must be null or 32 lowercase hex digits");
		goto out;
	}
	rc = 0;
out:
	json_decref(doc);
	return rc;
}

bool owner_guess_workspace(const char *buf, size_t len, char out[PATH_MAX])
{
	json_t *doc, *v;
	bool ok = false;

	doc = json_loadb(buf, len, 0, NULL);
	v = json_object_get(doc, "workspace_root");
	if (json_is_string(v) && json_string_length(v) < PATH_MAX &&
	    owner_path_canonical(json_string_value(v))) {
		snprintf(out, PATH_MAX, "%s", json_string_value(v));
		ok = true;
	}
	json_decref(doc);
	return ok;
}

json_t *owner_to_json(const struct owner *o)
{
	json_t *doc = json_object();
	int bad = 0;

	if (doc == NULL)
		return NULL;
	bad |= json_object_set_new(doc, "schema_version", json_integer(OWNER_SCHEMA));
	bad |= json_object_set_new(doc, "kind", json_string(OWNER_KIND));
	bad |= json_object_set_new(doc, "token", json_string(o->token));
	bad |= json_object_set_new(doc, "operation_id", json_string(o->operation_id));
	bad |= json_object_set_new(doc, "purpose", json_string(o->purpose));
	bad |= json_object_set_new(doc, "workspace_root", json_string(o->workspace_root));
	bad |= json_object_set_new(doc, "host", json_string(o->host));
	bad |= json_object_set_new(doc, "boot_id",
				   o->has_boot_id ? json_string(o->boot_id) : json_null());
	bad |= json_object_set_new(doc, "pid", json_integer(o->pid));
	bad |= json_object_set_new(doc, "pid_start_ticks",
				   o->has_start_ticks ?
				   json_integer((json_int_t)o->start_ticks) : json_null());
	bad |= json_object_set_new(doc, "identity_policy",
				   json_string(policy_names[o->policy]));
	bad |= json_object_set_new(doc, "acquired_at", json_string(o->acquired_at));
	bad |= json_object_set_new(doc, "recovery_of",
				   o->has_recovery_of ? json_string(o->recovery_of) : json_null());
	if (bad) {
		/* json_string() returns NULL for invalid UTF-8, and set_new fails. */
		json_decref(doc);
		return NULL;
	}
	return doc;
}

char *owner_format(const struct owner *o, bool pretty)
{
	json_t *doc = owner_to_json(o);
	char *text;

	if (doc == NULL)
		return NULL;
	text = json_dumps(doc, pretty ? JSON_INDENT(2) : JSON_COMPACT);
	json_decref(doc);
	return text;
}

bool owner_equal(const struct owner *a, const struct owner *b)
{
	return strcmp(a->token, b->token) == 0 &&
	       strcmp(a->operation_id, b->operation_id) == 0 &&
	       strcmp(a->purpose, b->purpose) == 0 &&
	       strcmp(a->workspace_root, b->workspace_root) == 0 &&
	       strcmp(a->host, b->host) == 0 &&
	       a->has_boot_id == b->has_boot_id &&
	       (!a->has_boot_id || strcmp(a->boot_id, b->boot_id) == 0) &&
	       a->pid == b->pid &&
	       a->has_start_ticks == b->has_start_ticks &&
	       (!a->has_start_ticks || a->start_ticks == b->start_ticks) &&
	       a->policy == b->policy &&
	       strcmp(a->acquired_at, b->acquired_at) == 0 &&
	       a->has_recovery_of == b->has_recovery_of &&
	       (!a->has_recovery_of || strcmp(a->recovery_of, b->recovery_of) == 0);
}

void owner_diff(const struct owner *a, const struct owner *b, char *out, size_t len)
{
	const struct {
		const char *key;
		bool differs;
	} k[] = {
		{ "token", strcmp(a->token, b->token) != 0 },
		{ "operation_id", strcmp(a->operation_id, b->operation_id) != 0 },
		{ "purpose", strcmp(a->purpose, b->purpose) != 0 },
		{ "workspace_root", strcmp(a->workspace_root, b->workspace_root) != 0 },
		{ "host", strcmp(a->host, b->host) != 0 },
		{ "boot_id", a->has_boot_id != b->has_boot_id ||
		  (a->has_boot_id && strcmp(a->boot_id, b->boot_id) != 0) },
		{ "pid", a->pid != b->pid },
		{ "pid_start_ticks", a->has_start_ticks != b->has_start_ticks ||
		  (a->has_start_ticks && a->start_ticks != b->start_ticks) },
		{ "identity_policy", a->policy != b->policy },
		{ "acquired_at", strcmp(a->acquired_at, b->acquired_at) != 0 },
		{ "recovery_of", a->has_recovery_of != b->has_recovery_of ||
		  (a->has_recovery_of && strcmp(a->recovery_of, b->recovery_of) != 0) },
	};
	size_t i, used = 0;

	if (len == 0)
		return;
	out[0] = '\0';
	for (i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		int n;
		if (!k[i].differs)
			continue;
		n = snprintf(out + used, len - used, "%s%s", used ? ", " : "", k[i].key);
		if (n < 0 || (size_t)n >= len - used)
			break;
		used += (size_t)n;
	}
}
