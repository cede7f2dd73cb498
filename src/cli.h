/* cli.h - what the subcommands share: option tables that drive both
 * getopt_long(3) and --help, and the value parsers. Output is output.h,
 * the wait-and-acquire loop hold.h, running a command child.h. Only the
 * command layer prints or chooses exit statuses. */
#ifndef WSLOCK_CLI_H
#define WSLOCK_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <jansson.h>

#include "error.h"
#include "output.h"
#include "registry.h"

#ifndef WSLOCK_VERSION		/* from the VERSION file, by the Makefile */
#define WSLOCK_VERSION "unknown"
#endif

/* One option of a subcommand. id is what the parse callback receives: the
 * short letter when there is one, else a value >= 256. */
struct cli_option {
	const char *name;	/* long name without "--" */
	int id;
	int has_arg;		/* no_argument or required_argument */
	const char *arg_name;	/* for --help, e.g. "SECONDS" */
	const char *help;	/* one line */
};

/* One subcommand: its table row in main.c and its --help text. */
struct cli_command {
	const char *name;
	int (*run)(struct cli *c, int argc, char **argv);
	const char *synopsis;	/* arguments after the name */
	const char *summary;	/* one line */
	const struct cli_option *options;
	const char *details;	/* paragraphs after the options, or NULL */
};

/* The option every subcommand accepts: -d/--lock-dir, -h/--help,
 * --pretty, -q, -v are handled by cli_parse itself. */
#define CLI_OPT_END { NULL, 0, 0, NULL, NULL }

/*
 * Parses argv[1..argc-1] (argv[0] is the subcommand name) with the
 * command's option table plus the common ones, calling on_option for each
 * command option (arg NULL for flags). on_option returns 0, or -1 after
 * filling err (a usage error). Returns the index of the first operand, or
 * -1 when it already handled --help (exit 0) or a usage error (printed;
 * *status holds the exit status).
 */
int cli_parse(struct cli *c, const struct cli_command *cmd, int argc,
	      char **argv, int (*on_option)(int id, const char *arg, void *ctx,
					    struct wsl_error *err),
	      void *ctx, int *status);

/* Prints the --help text of cmd on stdout. */
void cli_help(const struct cli_command *cmd);

/* The exit-status summary, once, at the end of `wslock --help`. */
void cli_help_exit_status(FILE *out);

/* Prints text on out, starting at column col, wrapped at spaces to fit 80
 * columns, continuation lines indented by indent spaces; ends the line. */
void cli_print_wrapped(FILE *out, size_t col, size_t indent, const char *text);

/* Prints the rows of the common options (the one table cli_parse uses) to
 * out, for the usage text of wslock itself. */
void cli_help_common(FILE *out);

/* What the options before the subcommand ask for. */
enum cli_global {
	CLI_GLOBAL_COMMAND,	/* run the subcommand */
	CLI_GLOBAL_HELP,	/* -h/--help came first: wslock's own usage */
	CLI_GLOBAL_VERSION,	/* -V/--version came first */
	CLI_GLOBAL_NONE,	/* no subcommand follows */
};

/* The subcommand's argument vector that cli_hoist_globals builds. */
struct cli_argv {
	int argc;
	char **argv;		/* argv[0] the subcommand, NULL-terminated */
	char **owned;		/* the words it allocated, NULL-terminated */
};

/*
 * Reads the options before the subcommand in main's argv by the common
 * option table (the one cli_parse uses after it, so that every common
 * option works in both places) and builds the subcommand's argv with them
 * moved after its name: "wslock -q --lease-ttl 5 run W -- x" gives
 * {"run", "--quiet", "--lease-ttl=5", "W", "--", "x"}. Each moved option
 * becomes one word, so that neither its value nor a "--" can be taken for
 * an operand; values are checked by cli_parse, with the same messages.
 * Sets *cmd_index to the subcommand's index in argv. Returns what to do
 * (enum cli_global), or -1 with err (WSL_USAGE: unknown option, missing
 * value) or WSL_OS (out of memory).
 */
int cli_hoist_globals(int argc, char **argv, int *cmd_index, struct cli_argv *out,
		      struct wsl_error *err);

/* Frees what cli_hoist_globals allocated. */
void cli_argv_free(struct cli_argv *a);

/* Parses a number of seconds (fractional, 0 .. 1e9) into milliseconds;
 * -1 when it is not one. */
long long cli_parse_seconds(const char *s);

/* Parses a decimal integer in lo..hi; returns 0 or -1. */
int cli_parse_long(const char *s, long lo, long hi, long *out);

/* Subcommand handlers (src/cmd_*.c). */
extern const struct cli_command cmd_acquire, cmd_release, cmd_run, cmd_inspect,
	cmd_recover, cmd_reclaim;

/* Option ids shared by acquire, run and recover. */
enum {
	OPT_OPERATION_ID = 300,
	OPT_PURPOSE,
	OPT_PID,
	OPT_PRINT_OWNER,
	OPT_RETAIN,
	OPT_RECLAIM_DEAD,
	OPT_TOKEN,
	OPT_OWNER,
	OPT_ALL,
	OPT_EXPECTED,
	OPT_FORCE,
	OPT_REASON,
	OPT_YES,
	OPT_FORMAT,
	OPT_KILL_AFTER,
	OPT_JOURNAL,
	OPT_REGISTRY,
	OPT_EXIT_STATUS,
	OPT_SHARED,
};

/* --shared, for acquire and run. */
#define CLI_SHARED_OPTION \
	{ "shared", OPT_SHARED, no_argument, NULL, \
	  "take a shared lock: many shared holders at once, none beside an exclusive one" }

/* -w, -n, -E, --operation-id, --purpose as cli_option rows. */
#define CLI_WAIT_OPTIONS \
	{ "timeout", 'w', required_argument, "SECONDS", \
	  "give up after SECONDS (fractional) with WSLOCK_TIMEOUT; default: wait forever" }, \
	{ "nonblock", 'n', no_argument, NULL, \
	  "fail at once with WSLOCK_BUSY if the workspace is held (not with -w)" }, \
	{ "conflict-exit-code", 'E', required_argument, "N", \
	  "exit with N (0..255) instead of 75 when busy or timed out" }, \
	{ "operation-id", OPT_OPERATION_ID, required_argument, "ID", \
	  "operation id to record (default: generated)" }, \
	{ "purpose", OPT_PURPOSE, required_argument, "TEXT", \
	  "why the lock is held, 1..128 printable characters" }

/* --kill-after, for the commands that run a command under a lease. */
#define CLI_KILL_AFTER_OPTION \
	{ "kill-after", OPT_KILL_AFTER, required_argument, "SECONDS", \
	  "etcd: if the lease cannot be renewed in time, SIGKILL the command this long after SIGTERM (default 10; a lock found lost: SIGKILL at once)" }

/* A duration option's value in ms (cli_parse_seconds), or -1 with a usage
 * err naming the option. */
long long cli_opt_seconds(const char *option, const char *arg, struct wsl_error *err);

/* A --reason value: 1..128 printable characters, or -1 with a usage err. */
int cli_opt_reason(const char *arg, const char **out, struct wsl_error *err);

/* "run: make test" from argv: printable ASCII, at most 128 characters. */
void cli_default_purpose(const char *prefix, char **cmd,
			 char out[OWNER_PURPOSE_MAX + 1]);

/* Index of the first "--" in argv (argc when there is none): options and
 * operands before it, the command after it. */
int cli_split_command(int argc, char **argv);

/* --format text|json, for the commands a person reads (inspect, reclaim). */
#define CLI_FORMAT_OPTION \
	{ "format", OPT_FORMAT, required_argument, "FMT", \
	  "json (default) or text: a table for people" }

/* Parses a --format value: sets *text; -1 with a usage err otherwise. */
int cli_parse_format(const char *arg, bool *text, struct wsl_error *err);

#endif
