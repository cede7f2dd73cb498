/* owner.c - owner documents with jansson (DESIGN.md section 3). */
#include "owner.h"

#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *const policy_names[] = {
	[IDENTITY_PID_START_BOOT] = "pid-start-boot",
	[IDENTITY_PID_ONLY] = "pid-only-fail-closed",
};

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

bool owner_fs_valid(const char *s)
{
	size_t i, n;

	if (strncmp(s, "fsid:", 5) == 0)
		return crypto_hex_valid(s + 5, 16);
	if (strncmp(s, "dev:", 4) != 0)
		return false;
	/* "dev:" MAJ ":" MIN, each 1..10 decimal digits. */
	s += 4;
	for (i = 0; i < 2; i++) {
		for (n = 0; s[n] >= '0' && s[n] <= '9'; n++)
			;
		if (n == 0 || n > 10 || s[n] != (i == 0 ? ':' : '\0'))
			return false;
		s += n + 1;
	}
	return true;
}

/* workspace_fs_path: the root of a filesystem or a canonical path in it. */
static bool fs_path_valid(const char *s)
{
	return strcmp(s, "/") == 0 || owner_path_canonical(s);
}

static bool token_valid(const char *s)
{
	return hex_token_valid(s);
}

static bool policy_valid(const char *s)
{
	return strcmp(s, "pid-start-boot") == 0 ||
	       strcmp(s, "pid-only-fail-closed") == 0;
}

void owner_setup(void)
{
	/* jansson seeds its hash function from /dev/urandom on first use
	 * unless it is given a seed: one from libsodium saves that open. */
	uint32_t seed = crypto_random_u32();

	json_object_seed(seed != 0 ? seed : 1);
}

void owner_new_operation_id(char out[OWNER_OPID_MAX + 1])
{
	char rnd[9], stamp[32];
	struct tm tm;
	time_t now = time(NULL);

	platform_utc(now, &tm);
	snprintf(stamp, sizeof(stamp), "%04d%02d%02dT%02d%02d%02dZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
	crypto_random_hex(rnd, 4);
	snprintf(out, OWNER_OPID_MAX + 1, "%s-%s", stamp, rnd);
}

int owner_build(struct owner *o, const char *workspace_root, pid_t pid,
		const char *purpose, const char *operation_id,
		const char *recovery_of, struct wsl_error *err)
{
	return owner_build_in(o, NULL, workspace_root, pid, purpose, operation_id,
			      recovery_of, err);
}

int owner_build_in(struct owner *o, const struct owner *place,
		   const char *workspace_root, pid_t pid,
		   const char *purpose, const char *operation_id,
		   const char *recovery_of, struct wsl_error *err)
{
	char state = '?';

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
	if (place != NULL) {
		snprintf(o->workspace_fs, sizeof(o->workspace_fs), "%s", place->workspace_fs);
		snprintf(o->workspace_fs_path, sizeof(o->workspace_fs_path), "%s",
			 place->workspace_fs_path);
	} else if (mountinfo_identity(workspace_root, o->workspace_fs,
				      o->workspace_fs_path, err) != 0) {
		return -1;
	}
	if (!fs_path_valid(o->workspace_fs_path))
		return wsl_error_set(err, WSL_OS,
				     "%s is at %s inside its filesystem, which is not a canonical path",
				     workspace_root, o->workspace_fs_path);
	o->schema = OWNER_SCHEMA;
	o->pid = pid;
	o->has_machine_id = platform_machine_id(o->machine_id) == 0;
	/* The pid is numbered in the caller's namespace, whatever namespace
	 * the process itself lives in (acquire --pid may name a process of a
	 * child namespace by its number here). */
	o->has_pid_namespace = platform_pid_namespace(0, o->pid_namespace) == 0;
	o->has_boot_id = platform_boot_id(o->boot_id) == 0;
	o->has_start_ticks = platform_pid_stat(pid, &o->start_ticks, &state) == 0;
	/* Without a start time (a /proc of another pid namespace, say) the
	 * pid's existence is still checked in this namespace, by kill(2). */
	if (!o->has_start_ticks && (errno == ESRCH || platform_pid_exists(pid) == 0))
		return wsl_error_set(err, WSL_USAGE,
				     "pid %ld does not exist; a holder must be a running process",
				     (long)pid);
	/* A zombie has exited (platform_pid_fate): its lock would be dead
	 * the moment it is made. */
	if (o->has_start_ticks && state == 'Z')
		return wsl_error_set(err, WSL_USAGE,
				     "pid %ld has exited (a zombie, not yet reaped); a holder must be a running process",
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

/*
 * The one table of owner document keys (DESIGN.md section 3), in the order
 * documents are written. parse, to_json, equal and diff all walk it, so a
 * key is added in one place. since: the first schema_version with the key;
 * a document of version V has exactly the keys with since <= V.
 */
enum field_type {
	FT_SCHEMA,	/* the integer schema_version */
	FT_KIND,	/* the constant OWNER_KIND */
	FT_STRING,	/* char[cap] at off, checked by valid */
	FT_STRING_NULL,	/* the same, or null: bool at has_off */
	FT_PID,		/* pid_t, 1..WSL_PID_MAX */
	FT_TICKS,	/* unsigned long long >= 0, or null (has_start_ticks) */
	FT_POLICY,	/* enum identity_policy by its name */
};

struct field {
	const char *key;
	enum field_type type;
	int since;
	size_t off, cap, has_off;
	bool (*valid)(const char *);
	const char *rule;	/* what the value must be, for the reason */
};

#define STR(k, v, since, valid, rule) \
	{ k, FT_STRING, since, offsetof(struct owner, v), \
	  sizeof(((struct owner *)0)->v), 0, valid, rule }
#define STR_NULL(k, v, has, since, valid, rule) \
	{ k, FT_STRING_NULL, since, offsetof(struct owner, v), \
	  sizeof(((struct owner *)0)->v), offsetof(struct owner, has), valid, rule }

static const struct field fields[] = {
	{ "schema_version", FT_SCHEMA, 1, 0, 0, 0, NULL,
	  "must be the integer 1 or 2" },
	{ "kind", FT_KIND, 1, 0, 0, 0, NULL, "must be \"" OWNER_KIND "\"" },
	STR("token", token, 1, token_valid, "must be 32 lowercase hex digits"),
	STR("operation_id", operation_id, 1, owner_operation_id_valid,
	    "has characters or a length that are not allowed"),
	STR("purpose", purpose, 1, owner_purpose_valid,
	    "must be 1..128 printable characters"),
	STR("workspace_root", workspace_root, 1, owner_path_canonical,
	    "is not a canonical absolute path"),
	STR("workspace_fs", workspace_fs, 2, owner_fs_valid,
	    "must be \"fsid:\" and 16 lowercase hex digits or \"dev:MAJOR:MINOR\""),
	STR("workspace_fs_path", workspace_fs_path, 2, fs_path_valid,
	    "is not / or a canonical absolute path"),
	STR("host", host, 1, platform_host_valid,
	    "must be 1..255 printable characters without spaces"),
	STR_NULL("machine_id", machine_id, has_machine_id, 2,
		 platform_machine_id_valid, "must be null or 32 lowercase hex digits"),
	STR_NULL("boot_id", boot_id, has_boot_id, 1, platform_boot_id_valid,
		 "is not a kernel boot id"),
	{ "pid", FT_PID, 1, 0, 0, 0, NULL, "must be an integer in 1..4194304" },
	{ "pid_start_ticks", FT_TICKS, 1, 0, 0, 0, NULL,
	  "must be a non-negative integer or null" },
	STR_NULL("pid_namespace", pid_namespace, has_pid_namespace, 2,
		 platform_pid_namespace_valid, "must be null or \"pid:[INODE]\""),
	{ "identity_policy", FT_POLICY, 1, 0, 0, 0, policy_valid,
	  "must be \"pid-start-boot\" or \"pid-only-fail-closed\"" },
	STR("acquired_at", acquired_at, 1, platform_time_valid,
	    "must be UTC time as YYYY-MM-DDTHH:MM:SS.mmmZ"),
	STR_NULL("recovery_of", recovery_of, has_recovery_of, 1, token_valid,
		 "must be null or 32 lowercase hex digits"),
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static char *field_str(struct owner *o, const struct field *f)
{
	return (char *)o + f->off;
}

static const char *field_cstr(const struct owner *o, const struct field *f)
{
	return (const char *)o + f->off;
}

static bool *field_has(struct owner *o, const struct field *f)
{
	return (bool *)((char *)o + f->has_off);
}

static bool field_chas(const struct owner *o, const struct field *f)
{
	return *(const bool *)((const char *)o + f->has_off);
}

static const struct field *field_find(const char *key)
{
	size_t i;

	for (i = 0; i < NFIELDS; i++)
		if (strcmp(key, fields[i].key) == 0)
			return &fields[i];
	return NULL;
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

/* Reads one member of doc into o as f describes it. */
static int field_parse(json_t *doc, const struct field *f, struct owner *o,
		       char *why, size_t whylen)
{
	json_t *v = json_object_get(doc, f->key);
	char buf[32];
	bool *has = NULL;

	switch (f->type) {
	case FT_SCHEMA:
		return 0;	/* read before the key set is checked */
	case FT_KIND:
		if (get_string(doc, f->key, buf, sizeof(buf), NULL, why, whylen) != 0)
			return -1;
		if (strcmp(buf, OWNER_KIND) != 0)
			return why_set(why, whylen, "\"%s\" %s", f->key, f->rule);
		return 0;
	case FT_STRING_NULL:
		has = field_has(o, f);
		/* fall through */
	case FT_STRING:
		if (get_string(doc, f->key, field_str(o, f), f->cap, has, why, whylen) != 0)
			return -1;
		if ((has == NULL || *has) && !f->valid(field_str(o, f)))
			return why_set(why, whylen, "\"%s\" %s", f->key, f->rule);
		return 0;
	case FT_PID:
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > WSL_PID_MAX)
			return why_set(why, whylen, "\"%s\" %s", f->key, f->rule);
		o->pid = (pid_t)json_integer_value(v);
		return 0;
	case FT_TICKS:
		if (json_is_null(v)) {
			o->has_start_ticks = false;
		} else if (json_is_integer(v) && json_integer_value(v) >= 0) {
			o->has_start_ticks = true;
			o->start_ticks = (unsigned long long)json_integer_value(v);
		} else {
			return why_set(why, whylen, "\"%s\" %s", f->key, f->rule);
		}
		return 0;
	case FT_POLICY:
		if (get_string(doc, f->key, buf, sizeof(buf), NULL, why, whylen) != 0)
			return -1;
		if (strcmp(buf, policy_names[IDENTITY_PID_START_BOOT]) == 0)
			o->policy = IDENTITY_PID_START_BOOT;
		else if (strcmp(buf, policy_names[IDENTITY_PID_ONLY]) == 0)
			o->policy = IDENTITY_PID_ONLY;
		else
			return why_set(why, whylen, "\"%s\" %s", f->key, f->rule);
		return 0;
	}
	return why_set(why, whylen, "internal error: key \"%s\"", f->key);
}

/* The document's schema_version: OWNER_SCHEMA_V1 or OWNER_SCHEMA, or -1. */
static int doc_schema(json_t *doc, char *why, size_t whylen)
{
	json_t *v = json_object_get(doc, "schema_version");

	if (v == NULL)
		return why_set(why, whylen, "missing key \"schema_version\"");
	if (!json_is_integer(v) || (json_integer_value(v) != OWNER_SCHEMA_V1 &&
				    json_integer_value(v) != OWNER_SCHEMA))
		return why_set(why, whylen, "\"schema_version\" must be the integer %d or %d",
			       OWNER_SCHEMA_V1, OWNER_SCHEMA);
	return (int)json_integer_value(v);
}

/* Exactly the keys of schema version schema, each once; *in_order tells
 * whether they come in the order owner_to_json writes them (so that doc
 * dumps to the very bytes owner_to_json's object would). */
static int check_keys(json_t *doc, int schema, bool *in_order, char *why, size_t whylen)
{
	const struct field *f;
	const char *key;
	json_t *v;
	size_t i, next = 0;

	*in_order = true;
	json_object_foreach(doc, key, v) {
		/* Documents are written in order: the next field is the one. */
		while (next < NFIELDS && fields[next].since > schema)
			next++;
		if (next < NFIELDS && strcmp(key, fields[next].key) == 0) {
			next++;
			continue;
		}
		*in_order = false;
		f = field_find(key);
		if (f == NULL || f->since > schema)
			return why_set(why, whylen, "unknown key \"%.64s\"%s", key,
				       f != NULL ? " in a schema_version 1 document" : "");
	}
	for (i = 0; i < NFIELDS; i++)
		if (fields[i].since <= schema &&
		    json_object_get(doc, fields[i].key) == NULL)
			return why_set(why, whylen, "missing key \"%s\"", fields[i].key);
	return 0;
}

/* owner_memo_begin's memo: the document owner_parse read last, with the
 * owner it gave, while it is on (a listing); NULL doc: none. */
static struct {
	bool on;
	json_t *doc;
	struct owner o;
} memo;

void owner_memo_begin(void)
{
	memo.on = true;
}

void owner_memo_end(void)
{
	json_decref(memo.doc);
	memo.doc = NULL;
	memo.on = false;
}

/* Keeps doc, just parsed into o, as the memo (when it is on and doc's
 * keys are in owner_to_json's order). */
static void memo_keep(json_t *doc, bool in_order, const struct owner *o)
{
	if (!memo.on)
		return;
	json_decref(memo.doc);
	memo.doc = NULL;
	if (!in_order)
		return;
	memo.doc = json_incref(doc);
	memo.o = *o;
}

int owner_parse(const char *buf, size_t len, struct owner *o, char *why,
		size_t whylen)
{
	json_error_t jerr;
	json_t *doc;
	size_t i;
	bool in_order;
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
	o->schema = doc_schema(doc, why, whylen);
	if (o->schema < 0 || check_keys(doc, o->schema, &in_order, why, whylen) != 0)
		goto out;
	for (i = 0; i < NFIELDS; i++)
		if (fields[i].since <= o->schema &&
		    field_parse(doc, &fields[i], o, why, whylen) != 0)
			goto out;
	if (o->policy == IDENTITY_PID_START_BOOT &&
	    (!o->has_boot_id || !o->has_start_ticks)) {
		why_set(why, whylen, "policy pid-start-boot needs \"boot_id\" and \"pid_start_ticks\"");
		goto out;
	}
	memo_keep(doc, in_order, o);
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

/* The value of one member as a new jansson value (NULL: no memory, or a
 * string that is not valid UTF-8). */
static json_t *field_to_json(const struct owner *o, const struct field *f)
{
	switch (f->type) {
	case FT_SCHEMA:
		return json_integer(o->schema);
	case FT_KIND:
		return json_string(OWNER_KIND);
	case FT_STRING_NULL:
		if (!field_chas(o, f))
			return json_null();
		/* fall through */
	case FT_STRING:
		return json_string(field_cstr(o, f));
	case FT_PID:
		return json_integer(o->pid);
	case FT_TICKS:
		return o->has_start_ticks ?
			json_integer((json_int_t)o->start_ticks) : json_null();
	case FT_POLICY:
		return json_string(policy_names[o->policy]);
	}
	return NULL;
}

json_t *owner_to_json(const struct owner *o)
{
	json_t *doc;
	size_t i;

	/* The document just parsed: the same keys in the same order with the
	 * same values, so the same bytes, without building it again. */
	if (memo.doc != NULL && owner_equal(o, &memo.o))
		return json_incref(memo.doc);
	doc = json_object();
	if (doc == NULL)
		return NULL;
	for (i = 0; i < NFIELDS; i++) {
		if (fields[i].since > o->schema)
			continue;
		/* json_string() returns NULL for invalid UTF-8, and set_new fails. */
		if (json_object_set_new(doc, fields[i].key,
					field_to_json(o, &fields[i])) != 0) {
			json_decref(doc);
			return NULL;
		}
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

/* True when a and b hold the same value for f. */
static bool field_equal(const struct owner *a, const struct owner *b,
			const struct field *f)
{
	switch (f->type) {
	case FT_SCHEMA:
		return a->schema == b->schema;
	case FT_KIND:
		return true;
	case FT_STRING_NULL:
		if (field_chas(a, f) != field_chas(b, f))
			return false;
		if (!field_chas(a, f))
			return true;
		/* fall through */
	case FT_STRING:
		return strcmp(field_cstr(a, f), field_cstr(b, f)) == 0;
	case FT_PID:
		return a->pid == b->pid;
	case FT_TICKS:
		return a->has_start_ticks == b->has_start_ticks &&
		       (!a->has_start_ticks || a->start_ticks == b->start_ticks);
	case FT_POLICY:
		return a->policy == b->policy;
	}
	return false;
}

bool owner_equal(const struct owner *a, const struct owner *b)
{
	size_t i;

	for (i = 0; i < NFIELDS; i++)
		if (!field_equal(a, b, &fields[i]))
			return false;
	return true;
}

void owner_diff(const struct owner *a, const struct owner *b, char *out, size_t len)
{
	size_t i, used = 0;

	if (len == 0)
		return;
	out[0] = '\0';
	for (i = 0; i < NFIELDS; i++) {
		int n;
		if (field_equal(a, b, &fields[i]))
			continue;
		n = snprintf(out + used, len - used, "%s%s", used ? ", " : "",
			     fields[i].key);
		if (n < 0 || (size_t)n >= len - used)
			break;
		used += (size_t)n;
	}
}

int owner_parse_saved(const char *buf, size_t len, struct owner *o, char *why,
		      size_t whylen)
{
	json_t *doc;
	char *text;
	int rc;

	if (owner_parse(buf, len, o, why, whylen) == 0)
		return 0;
	if (len > OWNER_DOC_MAX + 64)
		return -1;
	doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(doc) || !json_is_integer(json_object_get(doc, "fence"))) {
		json_decref(doc);
		return -1;
	}
	json_object_del(doc, "fence");
	text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	if (text == NULL)
		return why_set(why, whylen, "out of memory");
	rc = owner_parse(text, strlen(text), o, why, whylen);
	free(text);
	return rc;
}
