/* main.c - the subcommand table; options before the subcommand go to it
 * through the same option table as after it (cli_hoist_globals). */
#include "child.h"
#include "cli.h"
#include "output.h"
#include "crypto.h"
#include "fsx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct cli_command *const commands[] = {
	&cmd_acquire,
	&cmd_release,
	&cmd_run,
	&cmd_inspect,
	&cmd_recover,
	&cmd_reclaim,
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *out)
{
	size_t i;

	fprintf(out, "usage: wslock [options] COMMAND [options] [ARGS]\n\n"
		"A crash-safe lock on a workspace directory: who holds it, whether the\n"
		"holder is alive, and recovery only from a provably dead holder.\n\n"
		"commands:\n");
	for (i = 0; i < NCOMMANDS; i++) {
		fprintf(out, "  %-9s ", commands[i]->name);
		cli_print_wrapped(out, 12, 12, commands[i]->summary);
	}
	fprintf(out, "\noptions (before COMMAND or after it):\n");
	cli_help_common(out);
	fprintf(out, "  -V, --version              print the version and exit\n\n"
		"'wslock COMMAND --help' shows the options of one command. See wslock(1).\n");
	cli_help_exit_status(out);
}

static const struct cli_command *find_command(const char *name)
{
	size_t i;

	for (i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i]->name, name) == 0)
			return commands[i];
	return NULL;
}

/* POSIX lets a program start with fd 0, 1 or 2 closed; a file opened then
 * would take that number and receive stray output. Returns true when
 * stdout was closed (it is /dev/null now). */
static bool ensure_std_fds(void)
{
	bool stdout_closed = false;
	int fd;

	for (fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
			int nfd = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
			if (nfd < 0 || nfd != fd)
				_exit(wsl_code_exit(WSL_OS));
			if (fd == STDOUT_FILENO)
				stdout_closed = true;
		}
	}
	return stdout_closed;
}

/* Runs the subcommand named at argv[i], with the options before it moved
 * after its name (cli_hoist_globals). */
static int run_command(struct cli *c, const struct cli_command *cmd,
		       struct cli_argv *args, bool stdout_closed)
{
	c->cmd = cmd->name;
	/* Output nobody can read: acquire's token would be lost for good, and
	 * a JSON answer would be reported as done while nobody saw it. (run
	 * prints nothing; its command decides about its own stdout.) */
	if (stdout_closed && cmd != &cmd_run && cmd != &cmd_recover) {
		output_notice("standard output is closed: the answer of '%s' would be lost; nothing done [%s]",
			cmd->name, wsl_code_name(WSL_IO));
		return wsl_code_exit(WSL_IO);
	}
	return cmd->run(c, args->argc, args->argv);
}

int main(int argc, char **argv)
{
	const struct cli_command *cmd;
	struct wsl_error err = { 0 };
	struct cli_argv args = { 0, NULL, NULL };
	struct cli c = { 0 };
	bool stdout_closed;
	int i, what, status;

	stdout_closed = ensure_std_fds();
	spawn_note_inherited_fds();
	if (crypto_setup() != 0) {
		output_notice("cannot initialise libsodium [%s]", wsl_code_name(WSL_OS));
		return wsl_code_exit(WSL_OS);
	}
	owner_setup();
	what = cli_hoist_globals(argc, argv, &i, &args, &err);
	switch (what) {
	case CLI_GLOBAL_HELP:
		cli_argv_free(&args);
		usage(stdout);
		return 0;
	case CLI_GLOBAL_VERSION:
		cli_argv_free(&args);
		printf("wslock %s\n", WSLOCK_VERSION);
		return 0;
	case CLI_GLOBAL_NONE:
		cli_argv_free(&args);
		usage(stderr);
		return wsl_code_exit(WSL_USAGE);
	case CLI_GLOBAL_COMMAND:
		break;
	default:
		cli_argv_free(&args);
		status = err.code == WSL_USAGE ? output_usage(&c, "%s", err.message) :
			output_error(&c, &err);
		wsl_error_clear(&err);
		return status;
	}
	if (strcmp(argv[i], "help") == 0) {
		cli_argv_free(&args);
		if (i + 1 < argc && (cmd = find_command(argv[i + 1])) != NULL) {
			cli_help(cmd);
			return 0;
		}
		usage(stdout);
		return i + 1 < argc ? wsl_code_exit(WSL_USAGE) : 0;
	}
	cmd = find_command(argv[i]);
	if (cmd == NULL) {
		char names[128] = "";
		size_t k, len = 0;
		for (k = 0; k < NCOMMANDS; k++)
			len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s",
						k ? ", " : "", commands[k]->name);
		cli_argv_free(&args);
		return output_usage(&c, "unknown command '%s' (%s)", argv[i], names);
	}
	status = run_command(&c, cmd, &args, stdout_closed);
	cli_argv_free(&args);
	return status;
}
