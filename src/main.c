/* main.c - global options and the subcommand table. */
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

	fprintf(out, "usage: wslock [-d DIR] COMMAND [options] [ARGS]\n\n"
		"A crash-safe lock on a workspace directory: who holds it, whether the\n"
		"holder is alive, and recovery only from a provably dead holder.\n\n"
		"commands:\n");
	for (i = 0; i < NCOMMANDS; i++)
		fprintf(out, "  %-9s %s\n", commands[i]->name, commands[i]->summary);
	fprintf(out, "\nglobal options:\n"
		"  -d, --lock-dir DIR  registry directory (also accepted after COMMAND)\n"
		"      --backend NAME  local (default) or etcd; --etcd-endpoints URLS\n"
		"  -h, --help          show this help; 'wslock COMMAND --help' for one command\n"
		"  -V, --version       print the version\n\n"
		"See wslock(1).\n");
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
				_exit(71);
			if (fd == STDOUT_FILENO)
				stdout_closed = true;
		}
	}
	return stdout_closed;
}

int main(int argc, char **argv)
{
	const struct cli_command *cmd;
	struct cli c = { 0 };
	bool stdout_closed;
	int i = 1;

	stdout_closed = ensure_std_fds();
	child_note_inherited_fds();
	if (crypto_setup() != 0) {
		fprintf(stderr, "wslock: cannot initialise libsodium\n");
		return 71;
	}
	while (i < argc && argv[i][0] == '-') {
		const char *a = argv[i];
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
			printf("wslock %s\n", WSLOCK_VERSION);
			return 0;
		} else if (strcmp(a, "-d") == 0 || strcmp(a, "--lock-dir") == 0 ||
			   strcmp(a, "--backend") == 0 || strcmp(a, "--etcd-endpoints") == 0) {
			if (i + 1 >= argc)
				return output_usage(&c, "option %s needs a value", a);
			if (a[1] == 'd' || strcmp(a, "--lock-dir") == 0)
				c.reg_cfg.lock_dir = argv[i + 1];
			else if (strcmp(a, "--backend") == 0)
				c.reg_cfg.backend = argv[i + 1];
			else
				c.reg_cfg.etcd_endpoints = argv[i + 1];
			i += 2;
		} else if (strncmp(a, "--lock-dir=", 11) == 0) {
			c.reg_cfg.lock_dir = a + 11;
			i++;
		} else if (strncmp(a, "--backend=", 10) == 0) {
			c.reg_cfg.backend = a + 10;
			i++;
		} else if (strncmp(a, "-d", 2) == 0) {
			c.reg_cfg.lock_dir = a + 2;
			i++;
		} else {
			return output_usage(&c, "unknown option %s before the command", a);
		}
	}
	if (i >= argc) {
		usage(stderr);
		return 64;
	}
	if (strcmp(argv[i], "help") == 0) {
		if (i + 1 < argc && (cmd = find_command(argv[i + 1])) != NULL) {
			cli_help(cmd);
			return 0;
		}
		usage(stdout);
		return i + 1 < argc ? 64 : 0;
	}
	cmd = find_command(argv[i]);
	if (cmd == NULL) {
		char names[128] = "";
		size_t k, len = 0;
		for (k = 0; k < NCOMMANDS; k++)
			len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s",
						k ? ", " : "", commands[k]->name);
		return output_usage(&c, "unknown command '%s' (%s)", argv[i], names);
	}
	c.cmd = cmd->name;
	/* Output nobody can read: acquire's token would be lost for good, and
	 * a JSON answer would be reported as done while nobody saw it. (run
	 * prints nothing; its command decides about its own stdout.) */
	if (stdout_closed && cmd != &cmd_run && cmd != &cmd_recover) {
		fprintf(stderr, "wslock: standard output is closed: the answer of '%s' would be lost; nothing done [WSLOCK_IO]\n",
			cmd->name);
		return 74;
	}
	return cmd->run(&c, argc - i, argv + i);
}
