/* output.c - the only printer: JSON documents on stdout, the one-line
 * error on stderr and its JSON document, and the text table for people.
 * Every message goes through one_line, so that a hostile name cannot
 * break a line or drive the terminal. */
#include "output.h"
#include "registry.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

int output_json_write(struct cli *c, json_t *value)
{
	int rc = 0, e = 0;

	if (value == NULL) {
		rc = -1;
		e = ENOMEM;
	} else if (json_dumpf(value, stdout, JSON_ENCODE_ANY |
			      (c->pretty ? JSON_INDENT(2) : JSON_COMPACT)) != 0 ||
		   fputc('\n', stdout) == EOF || fflush(stdout) == EOF) {
		rc = -1;
		e = errno != 0 ? errno : EIO;
	}
	json_decref(value);
	errno = e;
	return rc;
}

/* The one stderr line of a write error on stdout (DESIGN §6: the code
 * last, as every error line ends); returns 74. */
static int write_failed(int e)
{
	fprintf(stderr, "wslock: cannot write to standard output: %s [%s]\n",
		strerror(e), wsl_code_name(WSL_IO));
	return wsl_code_exit(WSL_IO);
}

int output_json(struct cli *c, json_t *value)
{
	return output_json_write(c, value) == 0 ? 0 : write_failed(errno);
}

/* A write error on stdout: said once, remembered in s. */
static int stream_failed(struct output_stream *s)
{
	if (s->status == 0)
		s->status = write_failed(errno);
	return s->status;
}

int output_stream_begin(struct cli *c, struct output_stream *s, const char *name)
{
	json_t *key = json_string(name);
	int rc;

	s->c = c;
	s->n = 0;
	s->status = 0;
	/* The key through jansson too: escaped as output_json escapes it. */
	rc = key == NULL ||
	     fputs(c->pretty ? "{\n  " : "{", stdout) == EOF ||
	     json_dumpf(key, stdout, JSON_ENCODE_ANY) != 0 ||
	     fputs(c->pretty ? ": [" : ":[", stdout) == EOF;
	json_decref(key);
	return rc ? stream_failed(s) : 0;
}

/* json_dump_callback's sink for an item of an indented list: each line
 * break gets the four spaces of the item's depth (a JSON string holds no
 * raw line break, so every '\n' is jansson's own). */
static int stream_indented(const char *buf, size_t size, void *data)
{
	(void)data;
	for (size_t i = 0; i < size; i++) {
		if (putc(buf[i], stdout) == EOF)
			return -1;
		if (buf[i] == '\n' && fputs("    ", stdout) == EOF)
			return -1;
	}
	return 0;
}

int output_stream_item(struct output_stream *s, json_t *item)
{
	const char *sep = s->c->pretty ? (s->n == 0 ? "\n    " : ",\n    ") :
		(s->n == 0 ? "" : ",");
	int rc;

	if (s->status != 0 || item == NULL) {
		json_decref(item);
		return s->status != 0 ? s->status : stream_failed(s);
	}
	if (s->c->pretty) {
		rc = fputs(sep, stdout) == EOF ||
		     json_dump_callback(item, stream_indented, NULL, JSON_INDENT(2)) != 0;
	} else {
		/* Dumped whole into a buffer, then written at once: json_dumpf
		 * writes every token with an fwrite of its own (a tenth of
		 * inspect --all's time at 10 000 locks), json_dumps grows a
		 * buffer of its own and copies it. An item larger than buf (a
		 * shared lock of many holders) goes through json_dumps. */
		char buf[16384], *text = NULL;
		size_t len = json_dumpb(item, buf, sizeof(buf), JSON_COMPACT);

		if (len > sizeof(buf)) {
			text = json_dumps(item, JSON_COMPACT);
			len = text != NULL ? strlen(text) : 0;
		}
		rc = len == 0 || fputs(sep, stdout) == EOF ||
		     fwrite(text != NULL ? text : buf, 1, len, stdout) != len;
		free(text);
	}
	json_decref(item);
	s->n++;
	return rc ? stream_failed(s) : 0;
}

void output_stream_abort(struct output_stream *s)
{
	if (s->status == 0 && (putc('\n', stdout) == EOF || fflush(stdout) == EOF))
		stream_failed(s);
}

int output_stream_end(struct output_stream *s)
{
	const char *tail = !s->c->pretty ? "]}\n" : s->n == 0 ? "]\n}\n" : "\n  ]\n}\n";

	if (s->status != 0)
		return s->status;
	if (fputs(tail, stdout) == EOF || fflush(stdout) == EOF)
		return stream_failed(s);
	return 0;
}

json_t *output_entry_json(const struct lock_entry *e)
{
	json_t *o = json_object();
	/* One object for "owner" and "owners" of an exclusive lock. */
	json_t *own = e->has_owner ? owner_to_json(&e->owner) : NULL;

	if (o == NULL) {
		json_decref(own);
		return NULL;
	}
	json_object_set_new(o, "workspace_root",
			    e->workspace_root[0] ? json_string(e->workspace_root) : json_null());
	json_object_set_new(o, "state", json_string(lock_state_name(e->state)));
	/* A corrupt lock is probed only by its live file: live, or null. */
	json_object_set_new(o, "liveness", e->probed ?
			    json_string(liveness_name(e->liveness)) : json_null());
	json_object_set_new(o, "liveness_reason", e->probed ?
			    json_string(e->reason) : json_null());
	/* (NULL, which set_new refuses, leaves the key out, as before.) */
	json_object_set_new(o, "owner", e->has_owner ? json_incref(own) : json_null());
	if (e->state == LOCK_CORRUPT)
		json_object_set_new(o, "problem", json_string(e->problem));
	if (e->state == LOCK_RETAINED && e->retained != NULL) {
		json_t *r = json_loads(e->retained, 0, NULL);
		json_object_set_new(o, "retained", r != NULL ? r : json_null());
	}
	if (e->state != LOCK_FREE && e->lock_path[0] != '\0')
		json_object_set_new(o, "lock_path", json_string(e->lock_path));
	/* The mode lives in the lock (DESIGN.md section 2): a shared lock
	 * lists every holder's owner, and each holder as an entry of its
	 * own; "owner" stays the representative (lockrules_representative). */
	if (e->holder[0] == '\0' || e->holders != NULL) {
		json_t *owners = json_array();

		json_object_set_new(o, "mode", e->state == LOCK_FREE ? json_null() :
				    json_string(e->shared ? "shared" : "exclusive"));
		for (size_t i = 0; i < e->n_holders; i++)
			if (e->holders[i].has_owner)
				json_array_append_new(owners, owner_to_json(&e->holders[i].owner));
		if (!e->shared && own != NULL)
			json_array_append(owners, own);
		json_object_set_new(o, "owners", owners);
	}
	if (e->holders != NULL) {
		json_t *hs = json_array();

		for (size_t i = 0; i < e->n_holders; i++)
			json_array_append_new(hs, output_entry_json(&e->holders[i]));
		json_object_set_new(o, "holders", hs);
	}
	json_decref(own);
	return o;
}

/* Appends word to out for a POSIX shell: as is when it is made of safe
 * characters only, else in single quotes (a quote as '\''). */
static void shell_word(const char *word, char *out, size_t len)
{
	size_t o = strlen(out);

	if (word[0] != '\0' && strspn(word, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				      "0123456789_@%+=:,./-") == strlen(word)) {
		snprintf(out + o, len - o, "%s", word);
		return;
	}
	if (o + 1 < len)
		out[o++] = '\'';
	for (; *word != '\0' && o + 5 < len; word++) {
		if (*word == '\'') {
			memcpy(out + o, "'\\''", 4);
			o += 4;
		} else {
			out[o++] = *word;
		}
	}
	if (o + 1 < len)
		out[o++] = '\'';
	out[o] = '\0';
}

/* The bound of command_prefix's words (a -d path; or the etcd endpoints,
 * prefix, three TLS file paths and a user), shell-quoted. */
#define PREFIX_MAX (PATH_MAX * 4 + 256)

/* Whether c's commands go to etcd (--backend, else WSLOCK_BACKEND). */
static bool etcd_backend(const struct cli *c)
{
	const char *backend = c->reg_cfg.backend;

	if (backend == NULL || backend[0] == '\0')
		backend = getenv("WSLOCK_BACKEND");
	return backend != NULL && strcmp(backend, "etcd") == 0;
}

/* An etcd setting: the option, else its variable (empty counts as unset,
 * as the etcd backend reads them). */
static const char *etcd_setting(const char *opt, const char *var)
{
	if (opt == NULL || opt[0] == '\0')
		opt = getenv(var);
	return opt != NULL && opt[0] != '\0' ? opt : NULL;
}

/* Appends to out the TLS files and the user that c's etcd client uses,
 * as etcdctl's options (etcdctl) or as wslock's, so that a line pasted in
 * another terminal reaches the same cluster the same way. The password
 * is never written: etcdctl gets --password="$WSLOCK_ETCD_PASSWORD" (the
 * variable named, expanded by the shell that runs the line) and wslock
 * reads that variable itself for an --etcd-user without ":PASSWORD". */
static void etcd_auth_words(const struct cli *c, bool etcdctl, char *out, size_t len)
{
	static const char *const ctl[] = { " --cacert=", " --cert=", " --key=" };
	static const char *const own[] = { " --etcd-cacert ", " --etcd-cert ", " --etcd-key " };
	const char *files[] = {
		etcd_setting(c->reg_cfg.etcd_cacert, "WSLOCK_ETCD_CACERT"),
		etcd_setting(c->reg_cfg.etcd_cert, "WSLOCK_ETCD_CERT"),
		etcd_setting(c->reg_cfg.etcd_key, "WSLOCK_ETCD_KEY"),
	};
	const char *user = etcd_setting(c->reg_cfg.etcd_user, "WSLOCK_ETCD_USER"), *colon;
	char name[256];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (files[i] != NULL) {
			snprintf(out + strlen(out), len - strlen(out), "%s",
				 etcdctl ? ctl[i] : own[i]);
			shell_word(files[i], out, len);
		}
	if (user == NULL)
		return;
	colon = strchr(user, ':');
	snprintf(name, sizeof(name), "%.*s",
		 (int)(colon != NULL ? (size_t)(colon - user) : strlen(user)), user);
	snprintf(out + strlen(out), len - strlen(out), "%s", etcdctl ? " --user=" : " --etcd-user ");
	shell_word(name, out, len);
	if (etcdctl && (colon != NULL || getenv("WSLOCK_ETCD_PASSWORD") != NULL))
		snprintf(out + strlen(out), len - strlen(out),
			 " --password=\"$WSLOCK_ETCD_PASSWORD\"");
}

/* "wslock" and the options that name this command's registry when it is not
 * the one a plain "wslock" in another terminal would find: -d for a registry
 * other than ${XDG_STATE_HOME:-$HOME/.local/state}/wslock (from -d,
 * WSLOCK_DIR or STATE_DIRECTORY), the etcd backend, its endpoints, prefix,
 * TLS files and user (etcd_auth_words). */
static void command_prefix(const struct cli *c, char *out, size_t len)
{
	const char *backend = c->reg_cfg.backend, *env;
	char path[PATH_MAX], plain[PATH_MAX] = "";
	struct wsl_error err = { 0 };

	snprintf(out, len, "wslock");
	if (backend == NULL || backend[0] == '\0')
		backend = getenv("WSLOCK_BACKEND");
	if (backend != NULL && strcmp(backend, "etcd") == 0) {
		env = c->reg_cfg.etcd_endpoints ? c->reg_cfg.etcd_endpoints :
			getenv("WSLOCK_ETCD_ENDPOINTS");
		snprintf(out + strlen(out), len - strlen(out), " --backend etcd");
		if (env != NULL) {
			snprintf(out + strlen(out), len - strlen(out), " --etcd-endpoints ");
			shell_word(env, out, len);
		}
		if (c->reg_cfg.etcd_prefix != NULL) {
			snprintf(out + strlen(out), len - strlen(out), " --etcd-prefix ");
			shell_word(c->reg_cfg.etcd_prefix, out, len);
		}
		etcd_auth_words(c, false, out, len);
		return;
	}
	if (registry_default_path(c->reg_cfg.lock_dir, path, &err) != 0) {
		wsl_error_clear(&err);
		return;
	}
	if ((env = getenv("XDG_STATE_HOME")) != NULL && env[0] == '/')
		snprintf(plain, sizeof(plain), "%s/wslock", env);
	else if ((env = getenv("HOME")) != NULL && env[0] == '/')
		snprintf(plain, sizeof(plain), "%s/.local/state/wslock", env);
	if (strcmp(path, plain) != 0) {
		snprintf(out + strlen(out), len - strlen(out), " -d ");
		shell_word(path, out, len);
	}
}

/* The save-and-recover line for the dead owner of ws; path (or NULL) is
 * that owner's own document when it is one reader of several
 * (lockrules_holder_document): copied by its path, since inspect --owner
 * gives every reader the same one, the first a writer meets. A dead
 * reader (shared) is recovered without a command, and the repair runs
 * after it under an exclusive run, which waits for the other readers: a
 * recovered reader stays a reader, and recover refuses to run a command
 * beside live ones (lockrules_check_alone). */
static void recover_line(const char *pre, const char *ws, const char *path,
			 bool shared, char *out, size_t len)
{
	char p[PATH_MAX * 4 + 8] = "", save[PATH_MAX * 8 + 64];

	if (path != NULL) {
		shell_word(path, p, sizeof(p));
		snprintf(save, sizeof(save), "cp %s owner.json", p);
	} else {
		snprintf(save, sizeof(save), "%s inspect --owner %s > owner.json", pre, ws);
	}
	if (shared)
		snprintf(out, len,
			 "%s && %s recover --expected-owner owner.json %s && %s run --retain-on-failure %s -- REPAIR-CMD",
			 save, pre, ws, pre, ws);
	else
		snprintf(out, len,
			 "%s && %s recover --retain-on-failure --expected-owner owner.json %s -- REPAIR-CMD",
			 save, pre, ws);
}

/* The next step for a corrupt lock that recover clears (the lock of ws,
 * path its owner.json): copy its bytes, so that the compare is against what
 * was looked at, then recover --force with the reason in $REASON. Pasted
 * as it is, REASON unset, recover refuses (64: --reason needs 1..128
 * characters) and nothing changes: a --force is never ready-made. Only
 * for a workspace that exists (recover resolves it) and an owner.json
 * there is to copy. On etcd (path its key) the bytes come from etcdctl
 * get -w json, base64-decoded (exact: --print-value-only adds a newline),
 * and ws must be known. ws NULL: the document does not say
 * which workspace it locks; the line names "$WORKSPACE" for the user to
 * set (unset, recover refuses too: 64). */
static bool corrupt_line(const struct cli *c, const char *ws, const char *path,
			 char *out, size_t len)
{
	char pre[PREFIX_MAX], w[PATH_MAX * 4 + 8] = "", p[PATH_MAX * 4 + 8] = "";
	char ep[PREFIX_MAX] = "";
	const char *eps;
	struct stat st;

	if (etcd_backend(c)) {
		/* etcd: path is the lock's key, and the key names its
		 * workspace (ws NULL: a key no workspace finds). etcdctl
		 * get --print-value-only adds a newline: the exact bytes
		 * come from -w json, base64. */
		if (ws == NULL)
			return false;
		eps = c->reg_cfg.etcd_endpoints ? c->reg_cfg.etcd_endpoints :
			getenv("WSLOCK_ETCD_ENDPOINTS");
		if (eps != NULL && eps[0] != '\0') {
			snprintf(ep, sizeof(ep), " --endpoints=");
			shell_word(eps, ep, sizeof(ep));
		}
		etcd_auth_words(c, true, ep, sizeof(ep));
		command_prefix(c, pre, sizeof(pre));
		shell_word(ws, w, sizeof(w));
		shell_word(path, p, sizeof(p));
		snprintf(out, len,
			 "etcdctl%s get -w json %s | jq -r '.kvs[0].value' | base64 -d > corrupt-owner.json && %s recover --force --reason \"$REASON\" --expected-owner corrupt-owner.json %s",
			 ep, p, pre, w);
		return true;
	}
	if ((ws != NULL && (stat(ws, &st) != 0 || !S_ISDIR(st.st_mode))) ||
	    stat(path, &st) != 0 || !S_ISREG(st.st_mode))	/* etcd: a key */
		return false;
	command_prefix(c, pre, sizeof(pre));
	if (ws != NULL)
		shell_word(ws, w, sizeof(w));
	else
		snprintf(w, sizeof(w), "\"$WORKSPACE\"");
	shell_word(path, p, sizeof(p));
	snprintf(out, len,
		 "cp %s corrupt-owner.json && %s recover --force --reason \"$REASON\" --expected-owner corrupt-owner.json %s",
		 p, pre, w);
	return true;
}

bool output_corrupt_next(const struct cli *c, const struct lock_entry *e,
			 char *out, size_t len)
{
	if (lockrules_corrupt_clearable(e))
		return corrupt_line(c, e->workspace_root, e->lock_path, out, len);
	return e->workspace_root[0] == '\0' && lockrules_corrupt_bytes_clearable(e) &&
		corrupt_line(c, NULL, e->lock_path, out, len);
}

/*
 * After a "recovery required" or "liveness unknown" error: the command line
 * to run next, ready to copy (REPAIR-CMD stands for the user's repair). A
 * dead or retained owner gets the save-and-recover line with the repair run
 * under the recovered lock, and --retain-on-failure, so that copying it
 * never frees a half-written workspace unchecked (a missing or failing
 * repair leaves the lock retained); an owner of unknown liveness gets the
 * inspect line, never a ready-made --force. A corrupt lock that recover
 * clears gets corrupt_line. Returns false when there is nothing to
 * propose.
 */
static bool next_command(const struct cli *c, const struct wsl_error *err,
			 char *out, size_t len)
{
	char pre[PREFIX_MAX], ws[PATH_MAX * 4 + 8] = "";

	if (err->code == WSL_LOCK_CORRUPT)
		return err->corrupt_clearable && err->workspace_root != NULL &&
			err->path != NULL &&
			corrupt_line(c, err->workspace_root, err->path, out, len);
	if (err->workspace_root == NULL || err->liveness == NULL)
		return false;
	if (err->code != WSL_RECOVERY_REQUIRED && err->code != WSL_LIVENESS_UNKNOWN &&
	    strcmp(err->liveness, "unknown") != 0)
		return false;
	command_prefix(c, pre, sizeof(pre));
	shell_word(err->workspace_root, ws, sizeof(ws));
	if (strcmp(err->liveness, "dead") == 0 && err->code == WSL_RECOVERY_REQUIRED)
		recover_line(pre, ws, err->path, err->shared_holder, out, len);
	else
		snprintf(out, len, "%s inspect %s", pre, ws);
	return true;
}

int output_error(struct cli *c, struct wsl_error *err)
{
	char next[PATH_MAX * 8 + 256] = "";
	bool has_next = next_command(c, err, next, sizeof(next));

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
		if (has_next)
			json_object_set_new(inner, "next", message_json(next));
		if (err->requested != NULL)
			json_object_set_new(inner, "requested", json_string(err->requested));
		if (err->relation != NULL)
			json_object_set_new(inner, "relation", json_string(err->relation));
		if (err->has_timeout)
			json_object_set_new(inner, "timeout_s",
					    json_real((double)err->timeout_ms / 1000.0));
		json_object_set_new(doc, "error", inner);
		output_json(c, doc);
	}
	{
		char line[sizeof(err->message) * 4], tail[sizeof(next) * 4];
		one_line(err->message, line, sizeof(line));
		one_line(next, tail, sizeof(tail));
		/* One line still (DESIGN §6): the command to copy after "next: ". */
		fprintf(stderr, "wslock: %s%s%s [%s]\n", line,
			has_next && !c->quiet ? "; next: " : "",
			has_next && !c->quiet ? tail : "", wsl_code_name(err->code));
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

/* Under a lock's row: its operation, when it was taken (absolute), why it
 * is retained, and the command to run next for a dead or unknown owner. */
static void row_details(FILE *out, const struct cli *c, const struct lock_entry *e,
			const char *indent)
{
	char pre[PREFIX_MAX], ws[PATH_MAX * 4 + 8] = "";
	char line[PATH_MAX * 8 + 256];

	if (e->state == LOCK_CORRUPT && output_corrupt_next(c, e, line, sizeof(line))) {
		if (e->workspace_root[0] == '\0')
			fprintf(out, "%s  next: its document does not say which workspace it locks: set WORKSPACE to it\n"
			       "%s  (only that workspace's key finds this lock), check it, set REASON to why\n"
			       "%s  clearing it is safe and run:\n"
			       "    %s\n", indent, indent, indent, line);
		else
			fprintf(out, "%s  next: after checking the workspace, set REASON to why clearing it is safe and run:\n"
			       "    %s\n", indent, line);
		return;
	}
	if (!e->has_owner)
		return;
	fprintf(out, "%s  operation %s, acquired %s\n", indent, e->owner.operation_id,
	       e->owner.acquired_at);
	if (e->state == LOCK_RETAINED) {
		json_t *r = e->retained ? json_loads(e->retained, 0, NULL) : NULL;
		const char *why = json_string_value(json_object_get(r, "reason"));
		const char *at = json_string_value(json_object_get(r, "retained_at"));
		char text[1024];

		one_line(why ? why : "(no reason recorded)", text, sizeof(text));
		fprintf(out, "%s  retained: %s%s%s\n", indent, text, at ? ", at " : "", at ? at : "");
		json_decref(r);
	}
	if (!e->probed)
		return;
	command_prefix(c, pre, sizeof(pre));
	shell_word(e->workspace_root, ws, sizeof(ws));
	if (e->liveness == LIVENESS_DEAD) {
		recover_line(pre, ws, lockrules_holder_document(e) ? e->lock_path : NULL,
			     e->shared, line, sizeof(line));
		fprintf(out, "%s  next: check the workspace, then recover it, with your repair as REPAIR-CMD:\n"
		       "    %s\n", indent, line);
	} else if (e->liveness == LIVENESS_UNKNOWN) {
		fprintf(out, "%s  next: its liveness cannot be proven here; check that host or container\n"
		       "%s  by hand (wslock(1), RECOVERY), starting from:\n"
		       "    %s inspect %s\n", indent, indent, pre, ws);
	}
}

/* The WORKSPACE cell of row r. */
static const char *row_name(const struct output_row *r)
{
	return r->label ? r->label : r->e->workspace_root[0] ? r->e->workspace_root : r->e->key;
}

/* Row r after its WORKSPACE cell and the two spaces after it: the rest of
 * its line and the lines under it, on out. */
static void row_rest(FILE *out, const struct cli *c, const struct output_row *r)
{
	const struct lock_entry *e = r->e;
	char holder[300] = "-", age[32] = "-";
	const char *note = r->note;

	if (e->has_owner) {
		snprintf(holder, sizeof(holder), "%ld@%s", (long)e->owner.pid, e->owner.host);
		format_age(e->owner.acquired_at, age, sizeof(age));
	}
	fprintf(out, "%-8s  %-8s  %-20s  %-7s  %s\n",
		e->shared && e->state == LOCK_HELD ? "shared" : lock_state_name(e->state),
		e->probed ? liveness_name(e->liveness) : "-",
		holder, age, e->has_owner ? e->owner.purpose : "-");
	if (note == NULL)
		note = e->state == LOCK_CORRUPT ? e->problem :
			e->probed && e->has_owner ? e->reason : NULL;
	if (note != NULL && note[0] != '\0')
		fprintf(out, "%s  %s\n", r->label ? "  " : "", note);
	if (e->state != LOCK_FREE)
		row_details(out, c, e, r->label ? "  " : "");
}

int output_text_row(const struct cli *c, const struct output_row *r, struct output_text *t)
{
	size_t len;
	FILE *out;

	t->rest = NULL;
	t->name = strdup(row_name(r));
	out = t->name != NULL ? open_memstream(&t->rest, &len) : NULL;
	if (out == NULL) {
		free(t->name);
		t->name = NULL;
		return -1;
	}
	row_rest(out, c, r);
	if (fclose(out) != 0) {
		free(t->name);
		free(t->rest);
		t->name = t->rest = NULL;
		return -1;
	}
	return 0;
}

void output_text_free(struct output_text *t)
{
	free(t->name);
	free(t->rest);
	t->name = t->rest = NULL;
}

/* The header, sized by the widest WORKSPACE cell of n (names[i]). */
static void table_header(size_t wcol)
{
	printf("%-*s  %-8s  %-8s  %-20s  %-7s  %s\n", (int)wcol, "WORKSPACE", "STATE",
	       "LIVENESS", "HOLDER", "AGE", "PURPOSE");
}

static size_t name_width(size_t wcol, const char *name)
{
	size_t n = strlen(name);

	return n > wcol ? n : wcol;
}

int output_text_table(const struct output_text *rows, size_t n)
{
	size_t wcol = strlen("WORKSPACE"), i;

	for (i = 0; i < n; i++)
		wcol = name_width(wcol, rows[i].name);
	table_header(wcol);
	for (i = 0; i < n; i++)
		printf("%-*s  %s", (int)wcol, rows[i].name, rows[i].rest);
	if (fflush(stdout) == EOF || ferror(stdout))
		return write_failed(errno);
	return 0;
}

int output_table(const struct cli *c, const struct output_row *rows, size_t n)
{
	size_t wcol = strlen("WORKSPACE"), i;

	for (i = 0; i < n; i++)
		wcol = name_width(wcol, row_name(&rows[i]));
	table_header(wcol);
	for (i = 0; i < n; i++) {
		printf("%-*s  ", (int)wcol, row_name(&rows[i]));
		row_rest(stdout, c, &rows[i]);
	}
	if (fflush(stdout) == EOF || ferror(stdout))
		return write_failed(errno);
	return 0;
}

int output_queued_text(const struct lock_entry *q, size_t n)
{
	char ws[PATH_MAX * 4];

	for (size_t i = 0; i < n; i++) {
		one_line(q[i].workspace_root, ws, sizeof(ws));
		printf("  queued: pid %ld (%s) waits for %s since %s: a run of this workspace now waits behind it (-n: 75)\n",
		       (long)q[i].owner.pid, q[i].shared ? "shared" : "exclusive", ws,
		       q[i].owner.acquired_at);
	}
	if (fflush(stdout) == EOF || ferror(stdout))
		return write_failed(errno);
	return 0;
}

/* One journal line's cells for the text view, each on one line
 * (one_line): time, action, workspace, who did it, and why it was allowed. */
struct journal_cells {
	char time[64], action[32], ws[PATH_MAX * 4], who[400], why[1200];
};

static void journal_cells(json_t *ev, struct journal_cells *j)
{
	json_t *actor = json_object_get(ev, "actor");
	const char *s, *lr = json_string_value(json_object_get(ev, "liveness_reason"));
	const char *fr = json_string_value(json_object_get(ev, "force_reason"));
	char why[2048];

	if (json_is_true(json_object_get(ev, "invalid"))) {
		/* a line that is not an entry (inspect --journal lists it) */
		snprintf(j->time, sizeof(j->time), "-");
		snprintf(j->action, sizeof(j->action), "invalid");
		snprintf(j->ws, sizeof(j->ws), "-");
		snprintf(j->who, sizeof(j->who), "-");
		snprintf(why, sizeof(why), "line %" JSON_INTEGER_FORMAT
			 " is not a journal entry (%" JSON_INTEGER_FORMAT " bytes)",
			 json_integer_value(json_object_get(ev, "line")),
			 json_integer_value(json_object_get(ev, "length")));
		one_line(why, j->why, sizeof(j->why));
		return;
	}
	s = json_string_value(json_object_get(ev, "time"));
	one_line(s ? s : "-", j->time, sizeof(j->time));
	s = json_string_value(json_object_get(ev, "action"));
	one_line(s ? s : "-", j->action, sizeof(j->action));
	s = json_string_value(json_object_get(ev, "workspace_root"));
	one_line(s ? s : "-", j->ws, sizeof(j->ws));
	s = json_string_value(json_object_get(actor, "host"));
	snprintf(why, sizeof(why), "%" JSON_INTEGER_FORMAT "@%s uid %" JSON_INTEGER_FORMAT,
		 json_integer_value(json_object_get(actor, "pid")), s ? s : "?",
		 json_integer_value(json_object_get(actor, "uid")));
	one_line(why, j->who, sizeof(j->who));
	if (json_is_true(json_object_get(ev, "forced")))
		snprintf(why, sizeof(why), "forced: %s%s%s", fr ? fr : "-",
			 lr ? "; " : "", lr ? lr : "");
	else
		snprintf(why, sizeof(why), "%s", lr ? lr : "-");
	one_line(why, j->why, sizeof(j->why));
}

int output_journal_table(json_t *list)
{
	size_t i, n = json_array_size(list), wcol = strlen("WORKSPACE");
	size_t hcol = strlen("WHO");
	struct journal_cells *j = calloc(n + 1, sizeof(*j));

	if (j == NULL)
		return write_failed(ENOMEM);
	for (i = 0; i < n; i++) {
		journal_cells(json_array_get(list, i), &j[i]);
		if (strlen(j[i].ws) > wcol)
			wcol = strlen(j[i].ws);
		if (strlen(j[i].who) > hcol)
			hcol = strlen(j[i].who);
	}
	printf("%-24s  %-13s  %-*s  %-*s  %s\n", "TIME", "ACTION", (int)wcol, "WORKSPACE",
	       (int)hcol, "WHO", "REASON");
	for (i = 0; i < n; i++)
		printf("%-24s  %-13s  %-*s  %-*s  %s\n", j[i].time, j[i].action, (int)wcol,
		       j[i].ws, (int)hcol, j[i].who, j[i].why);
	free(j);
	if (fflush(stdout) == EOF || ferror(stdout))
		return write_failed(errno);
	return 0;
}

void output_notice(const char *fmt, ...)
{
	va_list ap;

	fputs("wslock: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void output_document(const char *doc)
{
	fprintf(stderr, "%s\n", doc);
}

void output_status_line(long long elapsed_ms, const char *subject, const char *who)
{
	char line[4096];
	struct winsize wsz;
	size_t cols = 80;

	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &wsz) == 0 && wsz.ws_col > 0)
		cols = wsz.ws_col;
	snprintf(line, sizeof(line), "wslock: waiting %llds: %s locked by %s",
		 elapsed_ms / 1000, subject, who);
	if (cols < sizeof(line) && strlen(line) >= cols)
		line[cols - 1] = '\0';
	fprintf(stderr, "\r\033[K%s", line);
	fflush(stderr);
}

void output_status_clear(void)
{
	fputs("\r\033[K", stderr);
}
