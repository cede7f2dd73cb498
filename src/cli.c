/* cli.c - option tables, output, and the wait-and-acquire loop. */
#include "cli.h"
#include "platform.h"
#include "fsx.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

enum { OPT_PRETTY = 1000, OPT_BACKEND, OPT_ETCD_ENDPOINTS, OPT_ETCD_PREFIX, OPT_LEASE_TTL };

static const struct cli_option common_options[] = {
	{ "lock-dir", 'd', required_argument, "DIR",
	  "registry (default $WSLOCK_DIR, $STATE_DIRECTORY/wslock, ${XDG_STATE_HOME:-~/.local/state}/wslock)" },
	{ "backend", OPT_BACKEND, required_argument, "NAME",
	  "local (default, or $WSLOCK_BACKEND) or etcd" },
	{ "etcd-endpoints", OPT_ETCD_ENDPOINTS, required_argument, "URLS",
	  "etcd client URLs, comma-separated (default $WSLOCK_ETCD_ENDPOINTS)" },
	{ "etcd-prefix", OPT_ETCD_PREFIX, required_argument, "PREFIX",
	  "etcd key prefix (default /wslock/)" },
	{ "lease-ttl", OPT_LEASE_TTL, required_argument, "SECONDS",
	  "etcd: lease of a holder, kept alive while it runs (default 15)" },
	{ "pretty", OPT_PRETTY, no_argument, NULL, "indent JSON output" },
	{ "quiet", 'q', no_argument, NULL, "no waiting notice or hints on stderr" },
	{ "verbose", 'v', no_argument, NULL, "say more on stderr" },
	{ "help", 'h', no_argument, NULL, "show this help and exit" },
	CLI_OPT_END
};

static size_t count_options(const struct cli_option *o)
{
	size_t n = 0;

	while (o != NULL && o[n].name != NULL)
		n++;
	return n;
}

static void help_options(const struct cli_option *o)
{
	char left[64];

	for (; o != NULL && o->name != NULL; o++) {
		if (o->id < 256)
			snprintf(left, sizeof(left), "-%c, --%s%s%s", o->id, o->name,
				 o->arg_name ? " " : "", o->arg_name ? o->arg_name : "");
		else
			snprintf(left, sizeof(left), "    --%s%s%s", o->name,
				 o->arg_name ? " " : "", o->arg_name ? o->arg_name : "");
		if (strlen(left) > 26)
			printf("  %s\n  %-26s %s\n", left, "", o->help);
		else
			printf("  %-26s %s\n", left, o->help);
	}
}

void cli_help(const struct cli_command *cmd)
{
	printf("usage: wslock %s %s\n\n%s\n", cmd->name, cmd->synopsis, cmd->summary);
	if (count_options(cmd->options) > 0) {
		printf("\noptions:\n");
		help_options(cmd->options);
	}
	printf("\ncommon options:\n");
	help_options(common_options);
	if (cmd->details != NULL)
		printf("\n%s", cmd->details);
	printf("\nExit status: 0 done; 64 usage; 65 owner mismatch or corrupt lock; 66 no\n"
	       "workspace or not held; 69 recovery required; 75 busy or timeout; 77 unsafe\n"
	       "path; 78 ownership lost (see wslock(1)).\n");
}

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
			cli_print_json(c, doc);
	}
	one_line(err.message, line, sizeof(line));
	fprintf(stderr, "wslock: %s [%s]\n", line, wsl_code_name(WSL_USAGE));
	if (!c->quiet)
		fprintf(stderr, "try 'wslock %s%s--help'\n", c->cmd ? c->cmd : "",
			c->cmd ? " " : "");
	return wsl_code_exit(WSL_USAGE);
}

int cli_usage(struct cli *c, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vusage(c, fmt, ap);
	va_end(ap);
	return rc;
}

int cli_parse(struct cli *c, const struct cli_command *cmd, int argc,
	      char **argv, int (*on_option)(int id, const char *arg, void *ctx,
					    struct wsl_error *err),
	      void *ctx, int *status)
{
	size_t ncmd = count_options(cmd->options), ncommon = count_options(common_options);
	struct option *longopts;
	char optstring[128];
	size_t i, k = 0, s = 0;
	int opt, first = -1;

	longopts = calloc(ncmd + ncommon + 1, sizeof(*longopts));
	if (longopts == NULL) {
		*status = cli_usage(c, "out of memory");
		return -1;
	}
	optstring[s++] = ':';
	for (i = 0; i < ncmd + ncommon; i++) {
		const struct cli_option *o = i < ncmd ? &cmd->options[i] :
			&common_options[i - ncmd];
		longopts[k].name = o->name;
		longopts[k].has_arg = o->has_arg;
		longopts[k].val = o->id;
		k++;
		if (o->id < 256 && s + 3 < sizeof(optstring)) {
			optstring[s++] = (char)o->id;
			if (o->has_arg == required_argument)
				optstring[s++] = ':';
		}
	}
	optstring[s] = '\0';
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
		struct wsl_error err = { 0 };
		const char *bad = argv[optind - 1];

		switch (opt) {
		case 'd':
			c->reg_cfg.lock_dir = optarg;
			break;
		case OPT_BACKEND:
			c->reg_cfg.backend = optarg;
			break;
		case OPT_ETCD_ENDPOINTS:
			c->reg_cfg.etcd_endpoints = optarg;
			break;
		case OPT_ETCD_PREFIX:
			c->reg_cfg.etcd_prefix = optarg;
			break;
		case OPT_LEASE_TTL: {
			long ttl;
			if (cli_parse_long(optarg, 2, 3600, &ttl) != 0) {
				*status = cli_usage(c, "--lease-ttl takes 2..3600 seconds, not '%s'", optarg);
				goto done;
			}
			c->reg_cfg.lease_ttl_s = ttl;
			break;
		}
		case 'h':
			cli_help(cmd);
			*status = 0;
			goto done;
		case 'q':
			c->quiet = true;
			break;
		case 'v':
			c->verbose++;
			break;
		case OPT_PRETTY:
			c->pretty = true;
			break;
		case '?':
			if (optopt != 0 && optopt < 256)
				*status = cli_usage(c, "unknown option -%c", optopt);
			else
				*status = cli_usage(c, "unknown option %s", bad);
			goto done;
		case ':':
			*status = cli_usage(c, "option %s needs a value", bad);
			goto done;
		default:
			if (on_option(opt, optarg, ctx, &err) != 0) {
				*status = cli_usage(c, "%s", err.message);
				wsl_error_clear(&err);
				goto done;
			}
		}
	}
	first = optind;
done:
	free(longopts);
	return first;
}

int cli_print_json(struct cli *c, json_t *value)
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

json_t *cli_entry_json(const struct lock_entry *e)
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

int cli_fail(struct cli *c, struct wsl_error *err)
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
		cli_print_json(c, doc);
	}
	{
		char line[sizeof(err->message) * 4];
		one_line(err->message, line, sizeof(line));
		fprintf(stderr, "wslock: %s [%s]\n", line, wsl_code_name(err->code));
	}
	return wsl_code_exit(err->code);
}

long long cli_parse_seconds(const char *s)
{
	char *end;
	double v;

	if (s == NULL || *s == '\0' || *s == '-' || *s == '+' ||
	    strspn(s, " \t") > 0)
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || *end != '\0' || !isfinite(v) || v < 0 || v > 1e9)
		return -1;
	/* Hexadecimal and exponent forms pass strtod; allow only decimals. */
	if (strspn(s, "0123456789.") != strlen(s))
		return -1;
	return (long long)ceil(v * 1000.0);
}

int cli_parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	if (s == NULL || *s == '\0' || strspn(s, "0123456789-") != strlen(s))
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

int cli_conflict_status(const struct cli_wait *w, const struct wsl_error *err)
{
	if (w->conflict_exit >= 0 &&
	    (err->code == WSL_BUSY || err->code == WSL_TIMEOUT))
		return w->conflict_exit;
	return wsl_code_exit(err->code);
}

/* The least time -n and -w wait for the registry's coordination lock, ms. */
#define COORD_WAIT_MIN_MS 10000

/* Rewrites the terminal's current line: elapsed time and whom we wait for,
 * cut to the terminal's width so that it never wraps. */
static void status_line(long long elapsed_ms, const char *subject, const char *who)
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

/* --reclaim-dead: takes over the dead owner of e by the same
 * compare-and-swap as reclaim --yes. Returns 0 when it is gone (or changed
 * meanwhile: the caller retries), -1 with err otherwise. */
static int reclaim_dead(struct cli *c, struct registry *reg,
			const struct lock_entry *e, struct wsl_error *err)
{
	struct registry_expect x = { 0 };
	struct lock_entry prior;
	char who[1024];
	int rc;

	x.owner = &e->owner;
	x.action = "reclaim-dead";
	rc = registry_take_over(reg, e->workspace_root, &x, NULL, NULL, &prior, err);
	if (rc == 0 && !c->quiet) {
		lockrules_describe_holder(e, who, sizeof(who));
		fprintf(stderr, "wslock: reclaimed %s from %s: %s\n",
			e->workspace_root, who, e->reason);
	}
	lock_entry_free(&prior);
	if (rc != 0 && (err->code == WSL_NOT_HELD || err->code == WSL_OWNER_MISMATCH)) {
		wsl_error_clear(err);
		rc = 0;
	}
	return rc;
}

int cli_acquire(struct cli *c, struct registry *reg, const struct owner *o,
		const struct cli_wait *w, int *live_fd, struct wsl_error *err)
{
	const char *ws = o->workspace_root;
	long long start = platform_mono_ms();
	long long deadline = w->timeout_ms >= 0 ? start + w->timeout_ms : -1;
	struct wsl_error werr = { 0 };
	/* On a terminal the notice is one status line updated in place;
	 * elsewhere (logs, CI) it is printed once. */
	bool tty = !c->quiet && isatty(STDERR_FILENO);
	bool told = false;
	int watch = 0, rc;
	bool watching = false;

	for (;;) {
		struct lock_entry conflict;
		struct registry_deadline dl;
		char who[1024], subject[2 * PATH_MAX + 64], why[1200];
		long long wait_ms;

		/* -n and -w also bound the wait for the registry itself, which
		 * is held only for the length of one change: generously (10 s
		 * at least), so that a loaded machine does not turn a free
		 * workspace into WSLOCK_BUSY, while a stopped wslock holding
		 * it cannot hang -n forever. */
		if (w->nonblock || deadline >= 0) {
			long long floor = platform_mono_ms() + COORD_WAIT_MIN_MS;
			dl.at_ms = !w->nonblock && deadline > floor ? deadline : floor;
			dl.code = w->nonblock ? WSL_BUSY : WSL_TIMEOUT;
		}
		rc = registry_try_acquire(reg, o, w->nonblock || deadline >= 0 ? &dl : NULL,
					  live_fd, &conflict, err);
		if (rc == ACQUIRE_DONE || rc < 0) {
			lock_entry_free(&conflict);
			break;
		}
		if (w->reclaim_dead &&
		    lockrules_reclaimable(&conflict, false, why, sizeof(why))) {
			rc = reclaim_dead(c, reg, &conflict, err);
			lock_entry_free(&conflict);
			if (rc < 0)
				break;
			continue;
		}
		if (lockrules_conflict_final(ws, &conflict, getenv("WSLOCK_TOKEN"), err) != 0) {
			lock_entry_free(&conflict);
			rc = -1;
			break;
		}
		lockrules_describe_holder(&conflict, who, sizeof(who));
		lockrules_conflict_subject(ws, &conflict, subject, sizeof(subject));
		if (w->nonblock || (deadline >= 0 && platform_mono_ms() >= deadline)) {
			lockrules_error_holder(err, &conflict);
			wsl_error_set(err, w->nonblock ? WSL_BUSY : WSL_TIMEOUT,
				      "%s%s locked by %s%s%s",
				      w->nonblock ? "" : "timed out: ", subject, who,
				      conflict.liveness == LIVENESS_UNKNOWN ? "; liveness unknown: " : "",
				      conflict.liveness == LIVENESS_UNKNOWN ? conflict.reason : "");
			lock_entry_free(&conflict);
			rc = -1;
			break;
		}
		if (!watching) {
			/* Only now, on a conflict: an uncontended acquire needs no
			 * watch (closing an inotify fd can cost milliseconds).
			 * Then try once more, since a release that came before the
			 * watch existed would wake nobody. */
			watching = true;
			watch = registry_wait_prepare(reg, &werr);
			if (watch < 0 && c->verbose)
				fprintf(stderr, "wslock: %s; polling instead\n", werr.message);
			wsl_error_clear(&werr);
			lock_entry_free(&conflict);
			continue;
		}
		if (tty) {
			status_line(platform_mono_ms() - start, subject, who);
			told = true;
		} else if (!told && !c->quiet) {
			fprintf(stderr, "wslock: waiting: %s locked by %s\n", subject, who);
			told = true;
		}
		lock_entry_free(&conflict);
		/* With a watch, releases wake us at once; the poll only notices
		 * holders that died without releasing. */
		wait_ms = watch == 0 ? 1000 : 250;
		if (deadline >= 0 && deadline - platform_mono_ms() < wait_ms)
			wait_ms = deadline - platform_mono_ms() < 0 ? 0 : deadline - platform_mono_ms();
		rc = registry_wait(reg, w->sigfd, (long)wait_ms, err);
		if (rc < 0)
			break;
		if (rc == 1) {
			struct signalfd_siginfo si;
			if (read(w->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si) &&
			    si.ssi_signo != SIGCHLD) {
				rc = (int)si.ssi_signo;
				break;
			}
		}
	}
	if (tty && told)
		fputs("\r\033[K", stderr);	/* clear the status line */
	return rc;
}

void cli_default_purpose(const char *prefix, char **cmd,
			 char out[OWNER_PURPOSE_MAX + 1])
{
	size_t len, i;

	len = (size_t)snprintf(out, OWNER_PURPOSE_MAX + 1, "%s", prefix);
	if (len > OWNER_PURPOSE_MAX)
		len = OWNER_PURPOSE_MAX;
	for (; *cmd != NULL && len < OWNER_PURPOSE_MAX; cmd++) {
		out[len++] = ' ';
		for (i = 0; (*cmd)[i] != '\0' && len < OWNER_PURPOSE_MAX; i++) {
			unsigned char ch = (unsigned char)(*cmd)[i];
			out[len++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
		}
	}
	out[len] = '\0';
}

int cli_split_command(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0)
			return i;
	return argc;
}

long long cli_opt_seconds(const char *option, const char *arg, struct wsl_error *err)
{
	long long ms = cli_parse_seconds(arg);

	if (ms < 0)
		wsl_error_set(err, WSL_USAGE,
			      "%s takes a number of seconds (e.g. 10 or 0.5), not '%s'", option, arg);
	return ms;
}

int cli_opt_reason(const char *arg, const char **out, struct wsl_error *err)
{
	if (!owner_purpose_valid(arg))
		return wsl_error_set(err, WSL_USAGE, "--reason must be 1..%d printable characters",
				     OWNER_PURPOSE_MAX);
	*out = arg;
	return 0;
}

int cli_hold_option(struct cli_hold *h, int id, const char *arg,
		    struct wsl_error *err)
{
	long v;

	switch (id) {
	case 'w':
		h->wait.timeout_ms = cli_opt_seconds("-w", arg, err);
		return h->wait.timeout_ms < 0 ? -1 : 1;
	case 'n':
		h->wait.nonblock = true;
		return 1;
	case 'E':
		if (cli_parse_long(arg, 0, 255, &v) != 0)
			return wsl_error_set(err, WSL_USAGE,
					     "-E takes an exit status 0..255, not '%s'", arg);
		h->wait.conflict_exit = (int)v;
		return 1;
	case OPT_OPERATION_ID:
		if (!owner_operation_id_valid(arg))
			return wsl_error_set(err, WSL_USAGE,
					     "operation id '%.200s' must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,191}$", arg);
		h->operation_id = arg;
		return 1;
	case OPT_PURPOSE:
		if (!owner_purpose_valid(arg))
			return wsl_error_set(err, WSL_USAGE,
					     "purpose must be 1..%d printable characters", OWNER_PURPOSE_MAX);
		h->purpose = arg;
		return 1;
	default:
		return 0;
	}
}

int cli_parse_format(const char *arg, bool *text, struct wsl_error *err)
{
	if (strcmp(arg, "text") == 0)
		*text = true;
	else if (strcmp(arg, "json") == 0)
		*text = false;
	else
		return wsl_error_set(err, WSL_USAGE, "--format takes json or text, not '%s'", arg);
	return 0;
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

int cli_print_table(const struct cli_row *rows, size_t n)
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
