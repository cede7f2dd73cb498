/* cli.c - option tables, getopt_long, --help and the value parsers. */
#include "cli.h"
#include "output.h"
#include "platform.h"
#include "fsx.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_PRETTY = 1000, OPT_BACKEND, OPT_ETCD_ENDPOINTS, OPT_ETCD_PREFIX, OPT_LEASE_TTL,
       OPT_ETCD_TIMEOUT, OPT_ETCD_CACERT, OPT_ETCD_CERT, OPT_ETCD_KEY, OPT_ETCD_USER };

static const struct cli_option common_options[] = {
	{ "lock-dir", 'd', required_argument, "DIR",
	  "registry (default $WSLOCK_DIR, $STATE_DIRECTORY/wslock, ${XDG_STATE_HOME:-~/.local/state}/wslock)" },
	{ "backend", OPT_BACKEND, required_argument, "NAME",
	  "local (default, or $WSLOCK_BACKEND) or etcd; with $WSLOCK_ETCD_ENDPOINTS set, name it (a usage error otherwise)" },
	{ "etcd-endpoints", OPT_ETCD_ENDPOINTS, required_argument, "URLS",
	  "etcd client URLs, comma-separated (default $WSLOCK_ETCD_ENDPOINTS); only with --backend etcd" },
	{ "etcd-prefix", OPT_ETCD_PREFIX, required_argument, "PREFIX",
	  "etcd key prefix, not empty (default $WSLOCK_ETCD_PREFIX, else /wslock/)" },
	{ "lease-ttl", OPT_LEASE_TTL, required_argument, "SECONDS",
	  "etcd: lease of a holder, kept alive while it runs (default 15)" },
	{ "etcd-cacert", OPT_ETCD_CACERT, required_argument, "FILE",
	  "etcd: CA certificate of https endpoints (default $WSLOCK_ETCD_CACERT)" },
	{ "etcd-cert", OPT_ETCD_CERT, required_argument, "FILE",
	  "etcd: client certificate (default $WSLOCK_ETCD_CERT)" },
	{ "etcd-key", OPT_ETCD_KEY, required_argument, "FILE",
	  "etcd: client certificate's key (default $WSLOCK_ETCD_KEY)" },
	{ "etcd-user", OPT_ETCD_USER, required_argument, "USER[:PASSWORD]",
	  "etcd: user name and password (default $WSLOCK_ETCD_USER, $WSLOCK_ETCD_PASSWORD)" },
	{ "etcd-timeout", OPT_ETCD_TIMEOUT, required_argument, "SECONDS",
	  "etcd: connect and reply timeout of one request (default 5, or $WSLOCK_ETCD_TIMEOUT); with -n all of one attempt's together, with -w by the deadline or one timeout after the last attempt began" },
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

/* Help fits 80 columns. */
#define HELP_WIDTH 80

void cli_print_wrapped(FILE *out, size_t col, size_t indent, const char *text)
{
	const char *p = text;

	while (*p != '\0') {
		size_t room = col < HELP_WIDTH ? HELP_WIDTH - col : 1, n = strlen(p);

		if (n > room) {
			/* Break at the last space that fits, else the first one. */
			size_t cut = room;
			/* Not before a word starting with '-': a continuation line
			 * must not look like an option's own line. */
			while (cut > 0 && (p[cut] != ' ' || p[cut + 1] == '-'))
				cut--;
			if (cut == 0)
				cut = strcspn(p, " ");
			n = cut;
		}
		fprintf(out, "%.*s\n", (int)n, p);
		p += n;
		while (*p == ' ')
			p++;
		if (*p != '\0')
			fprintf(out, "%*s", (int)indent, "");
		col = indent;
	}
}

static void help_options(FILE *out, const struct cli_option *o)
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
			fprintf(out, "  %s\n  %-26s ", left, "");
		else
			fprintf(out, "  %-26s ", left);
		cli_print_wrapped(out, 29, 29, o->help);
	}
}

void cli_help(const struct cli_command *cmd)
{
	printf("usage: wslock %s ", cmd->name);
	cli_print_wrapped(stdout, strlen("usage: wslock  ") + strlen(cmd->name),
			  strlen("usage: wslock  ") + strlen(cmd->name), cmd->synopsis);
	printf("\n");
	cli_print_wrapped(stdout, 0, 0, cmd->summary);
	if (count_options(cmd->options) > 0) {
		printf("\noptions:\n");
		help_options(stdout, cmd->options);
	}
	printf("\ncommon options:\n");
	help_options(stdout, common_options);
	if (cmd->details != NULL)
		printf("\n%s", cmd->details);
}

void cli_help_exit_status(FILE *out)
{
	fprintf(out, "\nExit status: 0 done; 64 usage; 65 owner mismatch or corrupt lock; 66 no\n"
		"workspace or not held; 69 recovery required or liveness unknown; 75 busy,\n"
		"timeout or owner live; 77 unsafe path; 78 ownership lost (see wslock(1)).\n");
}

void cli_help_common(FILE *out)
{
	help_options(out, common_options);
}

/* The common option named by the word w before the subcommand, its long
 * name ("--name[=value]", unambiguous prefixes too, as getopt_long takes
 * them) or its letter: NULL when none. */
static const struct cli_option *global_long(const char *name, size_t len)
{
	const struct cli_option *o, *found = NULL;

	for (o = common_options; o->name != NULL; o++) {
		if (strncmp(o->name, name, len) != 0)
			continue;
		if (o->name[len] == '\0')
			return o;	/* exact */
		if (found != NULL)
			return NULL;	/* ambiguous */
		found = o;
	}
	return found;
}

static const struct cli_option *global_short(int ch)
{
	const struct cli_option *o;

	for (o = common_options; o->name != NULL; o++)
		if (o->id == ch)
			return o;
	return NULL;
}

/* Appends "--name" or "--name=value" to out->argv (room was made). */
static int hoist_word(struct cli_argv *out, size_t *nowned, const char *name,
		      const char *value, struct wsl_error *err)
{
	size_t len = strlen(name) + 3 + (value != NULL ? strlen(value) + 1 : 0);
	char *w = malloc(len);

	if (w == NULL)
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	snprintf(w, len, "--%s%s%s", name, value != NULL ? "=" : "",
		 value != NULL ? value : "");
	out->owned[(*nowned)++] = w;
	out->argv[out->argc++] = w;
	return 0;
}

/* One word of options before the subcommand, at argv[*i] (moved past the
 * value it consumes). Returns CLI_GLOBAL_COMMAND to go on, HELP or
 * VERSION, or -1 with err. */
static int hoist_one(int argc, char **argv, int *i, struct cli_argv *out,
		     size_t *nowned, struct wsl_error *err)
{
	const char *a = argv[*i];
	const struct cli_option *o;

	if (a[1] == '-') {
		const char *eq = strchr(a + 2, '=');
		size_t len = eq != NULL ? (size_t)(eq - a - 2) : strlen(a + 2);

		o = len > 0 ? global_long(a + 2, len) : NULL;
		/* --version is wslock's own, not a subcommand's. */
		if (o == NULL && len > 0 && strncmp(a + 2, "version", len) == 0 && eq == NULL)
			return CLI_GLOBAL_VERSION;
		if (o == NULL)
			return wsl_error_set(err, WSL_USAGE, "unknown option %s before the command", a);
		if (o->id == 'h')
			return CLI_GLOBAL_HELP;
		if (o->has_arg == no_argument) {
			if (eq != NULL)
				return wsl_error_set(err, WSL_USAGE, "option --%s takes no value", o->name);
			return hoist_word(out, nowned, o->name, NULL, err);
		}
		if (eq != NULL)
			return hoist_word(out, nowned, o->name, eq + 1, err);
		if (*i + 1 >= argc)
			return wsl_error_set(err, WSL_USAGE, "option %s needs a value", a);
		return hoist_word(out, nowned, o->name, argv[++*i], err);
	}
	for (a++; *a != '\0'; a++) {
		if (*a == 'V')
			return CLI_GLOBAL_VERSION;
		o = global_short((unsigned char)*a);
		if (o == NULL)
			return wsl_error_set(err, WSL_USAGE, "unknown option -%c before the command", *a);
		if (o->id == 'h')
			return CLI_GLOBAL_HELP;
		if (o->has_arg == no_argument) {
			if (hoist_word(out, nowned, o->name, NULL, err) != 0)
				return -1;
			continue;
		}
		if (a[1] != '\0')
			return hoist_word(out, nowned, o->name, a + 1, err);
		if (*i + 1 >= argc)
			return wsl_error_set(err, WSL_USAGE, "option -%c needs a value", *a);
		return hoist_word(out, nowned, o->name, argv[++*i], err);
	}
	return CLI_GLOBAL_COMMAND;
}

int cli_hoist_globals(int argc, char **argv, int *cmd_index, struct cli_argv *out,
		      struct wsl_error *err)
{
	size_t nowned = 0, room = 2;
	int i, k, rc;

	/* A word becomes at most one word per letter (a cluster like -qv). */
	for (i = 0; i < argc; i++)
		room += strlen(argv[i]) + 1;
	out->argc = 0;
	out->argv = calloc(room, sizeof(*out->argv));
	out->owned = calloc(room, sizeof(*out->owned));
	if (out->argv == NULL || out->owned == NULL) {
		cli_argv_free(out);
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	}
	out->argc = 1;		/* argv[0]: the subcommand, set below */
	for (i = 1; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		}
		rc = hoist_one(argc, argv, &i, out, &nowned, err);
		if (rc != CLI_GLOBAL_COMMAND)
			return rc;
	}
	*cmd_index = i;
	if (i >= argc)
		return CLI_GLOBAL_NONE;
	out->argv[0] = argv[i];
	for (k = i + 1; k < argc; k++)
		out->argv[out->argc++] = argv[k];
	out->argv[out->argc] = NULL;
	return CLI_GLOBAL_COMMAND;
}

void cli_argv_free(struct cli_argv *a)
{
	size_t i;

	for (i = 0; a->owned != NULL && a->owned[i] != NULL; i++)
		free(a->owned[i]);
	free(a->owned);
	free(a->argv);
	a->owned = NULL;
	a->argv = NULL;
	a->argc = 0;
}

/* Whether word ("--re", "--re=x") abbreviates two or more of longopts; if
 * so, lists them in out ("--reason, --retain-on-failure"). */
static bool ambiguous(const struct option *longopts, const char *word,
		      char *out, size_t len)
{
	size_t n, k = 0;
	int hits = 0;

	if (strncmp(word, "--", 2) != 0)
		return false;
	word += 2;
	n = strcspn(word, "=");
	out[0] = '\0';
	for (; longopts->name != NULL; longopts++) {
		if (strncmp(longopts->name, word, n) != 0)
			continue;
		if (strlen(longopts->name) == n)
			return false;	/* an exact name is never ambiguous */
		k += (size_t)snprintf(out + k, k < len ? len - k : 0, "%s--%s",
				      hits ? ", " : "", longopts->name);
		hits++;
	}
	return hits >= 2;
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
		*status = output_usage(c, "out of memory");
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
			/* As -d "": --etcd-prefix "$UNSET" must not quietly mean
			 * the default prefix (another set of locks). */
			if (optarg[0] == '\0') {
				*status = output_usage(c, "--etcd-prefix needs a key prefix, not an empty string (unset it to use the default)");
				goto done;
			}
			c->reg_cfg.etcd_prefix = optarg;
			break;
		case OPT_LEASE_TTL: {
			long ttl;
			if (cli_parse_long(optarg, 2, 3600, &ttl) != 0) {
				*status = output_usage(c, "--lease-ttl takes 2..3600 seconds, not '%s'", optarg);
				goto done;
			}
			c->reg_cfg.lease_ttl_s = ttl;
			break;
		}
		case OPT_ETCD_CACERT:
			c->reg_cfg.etcd_cacert = optarg;
			break;
		case OPT_ETCD_CERT:
			c->reg_cfg.etcd_cert = optarg;
			break;
		case OPT_ETCD_KEY:
			c->reg_cfg.etcd_key = optarg;
			break;
		case OPT_ETCD_USER:
			c->reg_cfg.etcd_user = optarg;
			break;
		case OPT_ETCD_TIMEOUT: {
			long long ms = cli_opt_seconds("--etcd-timeout", optarg, &err);
			if (ms <= 0) {
				*status = output_usage(c, "--etcd-timeout takes a positive number of seconds, not '%s'", optarg);
				wsl_error_clear(&err);
				goto done;
			}
			c->reg_cfg.timeout_ms = ms > 600000 ? 600000 : (long)ms;
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
			if (optopt != 0 && optopt < 256) {
				*status = output_usage(c, "unknown option -%c", optopt);
			} else {
				char which[512];
				if (ambiguous(longopts, bad, which, sizeof(which)))
					*status = output_usage(c, "option %s is ambiguous: %s", bad, which);
				else
					*status = output_usage(c, "unknown option %s", bad);
			}
			goto done;
		case ':':
			*status = output_usage(c, "option %s needs a value", bad);
			goto done;
		default:
			if (on_option(opt, optarg, ctx, &err) != 0) {
				*status = output_usage(c, "%s", err.message);
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

long long cli_parse_seconds(const char *s)
{
	long long ms;
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
	/* Rounded up to the next millisecond (ceil, without libm). */
	ms = (long long)(v * 1000.0);
	return (double)ms < v * 1000.0 ? ms + 1 : ms;
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

