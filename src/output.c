/* output.c - the only printer: JSON documents on stdout, the one-line
 * error on stderr and its JSON document, and the text table for people.
 * Every message goes through one_line, so that a hostile name cannot
 * break a line or drive the terminal. */
#include "output.h"
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Copies a message for one line of stderr: control characters become
 * escapes (\n, \t, \xHH) so that a hostile name cannot break the line or
 * drive the terminal. */
static void one_line(const char *in, char *out, size_t len)
{
	size_t o = 0;

	for (; *in != '\0' && o + 5 < len; in++) {
		unsigned char ch = (unsigned char)*in;
		if (ch == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else if (ch == '\t') {
			out[o++] = '\\';
			out[o++] = 't';
		} else if (ch < 0x20 || ch == 0x7f) {
			o += (size_t)snprintf(out + o, len - o, "\\x%02x", ch);
		} else {
			out[o++] = (char)ch;
		}
	}
	out[o] = '\0';
}

/* A JSON string of msg; invalid UTF-8 (from a hostile argument) is
 * replaced by its one_line form with such bytes as '?'. */
static json_t *message_json(const char *msg)
{
	char buf[sizeof(((struct wsl_error *)0)->message) * 4];
	json_t *j = json_string(msg);
	size_t i;

	if (j != NULL)
		return j;
	one_line(msg, buf, sizeof(buf));
	for (i = 0; buf[i] != '\0'; i++)
		if ((unsigned char)buf[i] >= 0x80)
			buf[i] = '?';
	return json_string(buf);
}

static int vusage(struct cli *c, const char *fmt, va_list ap)
{
	struct wsl_error err = { 0 };

	char line[sizeof(err.message) * 4];

	err.code = WSL_USAGE;
	vsnprintf(err.message, sizeof(err.message), fmt, ap);
	if (c->json_errors) {
		json_t *doc = json_pack("{s:{s:s,s:o}}", "error", "code",
					wsl_code_name(WSL_USAGE), "message",
					message_json(err.message));
		if (doc != NULL)
			output_json(c, doc);
	}
	one_line(err.message, line, sizeof(line));
	fprintf(stderr, "wslock: %s [%s]\n", line, wsl_code_name(WSL_USAGE));
	if (!c->quiet)
		fprintf(stderr, "try 'wslock %s%s--help'\n", c->cmd ? c->cmd : "",
			c->cmd ? " " : "");
	return wsl_code_exit(WSL_USAGE);
}

int output_usage(struct cli *c, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vusage(c, fmt, ap);
	va_end(ap);
	return rc;
}

int output_json(struct cli *c, json_t *value)
{
	int rc = 0;

	if (value == NULL ||
	    json_dumpf(value, stdout, JSON_ENCODE_ANY | (c->pretty ? JSON_INDENT(2) : JSON_COMPACT)) != 0 ||
	    fputc('\n', stdout) == EOF || fflush(stdout) == EOF) {
		fprintf(stderr, "wslock: cannot write to standard output: %s\n",
			strerror(errno));
		rc = wsl_code_exit(WSL_IO);
	}
	json_decref(value);
	return rc;
}

json_t *output_entry_json(const struct lock_entry *e)
{
	json_t *o = json_object();

	if (o == NULL)
		return NULL;
	json_object_set_new(o, "workspace_root",
			    e->workspace_root[0] ? json_string(e->workspace_root) : json_null());
	json_object_set_new(o, "state", json_string(lock_state_name(e->state)));
	json_object_set_new(o, "liveness", e->probed && e->state != LOCK_CORRUPT ?
			    json_string(liveness_name(e->liveness)) : json_null());
	json_object_set_new(o, "liveness_reason", e->probed && e->state != LOCK_CORRUPT ?
			    json_string(e->reason) : json_null());
	json_object_set_new(o, "owner", e->has_owner ? owner_to_json(&e->owner) : json_null());
	if (e->state == LOCK_CORRUPT)
		json_object_set_new(o, "problem", json_string(e->problem));
	if (e->state == LOCK_RETAINED && e->retained != NULL) {
		json_t *r = json_loads(e->retained, 0, NULL);
		json_object_set_new(o, "retained", r != NULL ? r : json_null());
	}
	if (e->state != LOCK_FREE && e->lock_path[0] != '\0')
		json_object_set_new(o, "lock_path", json_string(e->lock_path));
	return o;
}

int output_error(struct cli *c, struct wsl_error *err)
{
	if (c->json_errors) {
		json_t *doc = json_object(), *inner = json_object();
		json_object_set_new(inner, "code", json_string(wsl_code_name(err->code)));
		json_object_set_new(inner, "message", message_json(err->message));
		if (err->workspace_root != NULL)
			json_object_set_new(inner, "workspace_root",
					    json_string(err->workspace_root));
		if (err->holder != NULL) {
			json_t *h = json_loads(err->holder, 0, NULL);
			json_object_set_new(inner, "holder", h != NULL ? h : json_null());
		}
		if (err->liveness != NULL)
			json_object_set_new(inner, "liveness", json_string(err->liveness));
		if (err->liveness_reason != NULL)
			json_object_set_new(inner, "liveness_reason",
					    json_string(err->liveness_reason));
		if (err->path != NULL)
			json_object_set_new(inner, "path", json_string(err->path));
		json_object_set_new(doc, "error", inner);
		output_json(c, doc);
	}
	{
		char line[sizeof(err->message) * 4];
		one_line(err->message, line, sizeof(line));
		fprintf(stderr, "wslock: %s [%s]\n", line, wsl_code_name(err->code));
	}
	return wsl_code_exit(err->code);
}

/* "45s", "3m05s", "2h07m", "3d04h" since an owner's acquired_at. */
static void format_age(const char *iso, char *out, size_t len)
{
	struct tm tm = { 0 };
	long long age;
	time_t then;

	if (sscanf(iso, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
		   &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6) {
		snprintf(out, len, "?");
		return;
	}
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	then = timegm(&tm);
	age = (long long)(time(NULL) - then);
	if (age < 0)
		age = 0;
	if (age < 60)
		snprintf(out, len, "%llds", age);
	else if (age < 3600)
		snprintf(out, len, "%lldm%02llds", age / 60, age % 60);
	else if (age < 86400)
		snprintf(out, len, "%lldh%02lldm", age / 3600, age % 3600 / 60);
	else
		snprintf(out, len, "%lldd%02lldh", age / 86400, age % 86400 / 3600);
}

int output_table(const struct output_row *rows, size_t n)
{
	size_t wcol = strlen("WORKSPACE"), i;

	for (i = 0; i < n; i++) {
		const char *name = rows[i].label ? rows[i].label :
			rows[i].e->workspace_root[0] ? rows[i].e->workspace_root : rows[i].e->key;
		if (strlen(name) > wcol)
			wcol = strlen(name);
	}
	printf("%-*s  %-8s  %-8s  %-20s  %-7s  %s\n", (int)wcol, "WORKSPACE", "STATE",
	       "LIVENESS", "HOLDER", "AGE", "PURPOSE");
	for (i = 0; i < n; i++) {
		const struct lock_entry *e = rows[i].e;
		const char *name = rows[i].label ? rows[i].label :
			e->workspace_root[0] ? e->workspace_root : e->key;
		char holder[300] = "-", age[32] = "-";
		const char *note = rows[i].note;

		if (e->has_owner) {
			snprintf(holder, sizeof(holder), "%ld@%s", (long)e->owner.pid, e->owner.host);
			format_age(e->owner.acquired_at, age, sizeof(age));
		}
		printf("%-*s  %-8s  %-8s  %-20s  %-7s  %s\n", (int)wcol, name,
		       lock_state_name(e->state),
		       e->probed && e->has_owner ? liveness_name(e->liveness) : "-",
		       holder, age, e->has_owner ? e->owner.purpose : "-");
		if (note == NULL)
			note = e->state == LOCK_CORRUPT ? e->problem :
				e->probed && e->has_owner ? e->reason : NULL;
		if (note != NULL && note[0] != '\0')
			printf("%s  %s\n", rows[i].label ? "  " : "", note);
	}
	if (fflush(stdout) == EOF || ferror(stdout)) {
		fprintf(stderr, "wslock: cannot write to standard output: %s\n", strerror(errno));
		return wsl_code_exit(WSL_IO);
	}
	return 0;
}
