/* spawn.c - the process image of a command run under a lock: which
 * descriptors it inherits (the caller's, noted at start, and the one named
 * by its runner) and its exec. child.c and keeper.c start commands with it.
 */
#include "spawn.h"
#include "cli.h"
#include "output.h"
#include "error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static unsigned char inherited[INHERITED_MAX / 8];

void spawn_note_inherited_fds(void)
{
	struct dirent *de;
	DIR *dir = opendir("/proc/self/fd");
	int self;

	if (dir == NULL)
		return;
	self = dirfd(dir);
	while ((de = readdir(dir)) != NULL) {
		long fd;
		if (cli_parse_long(de->d_name, 0, INHERITED_MAX - 1, &fd) != 0 ||
		    fd < 3 || fd == self)
			continue;
		inherited[fd / 8] |= (unsigned char)(1u << (fd % 8));
	}
	closedir(dir);
}

void spawn_list_fds(int keep, struct spawn_fds *out)
{
	struct dirent *de;
	DIR *dir = opendir("/proc/self/fd");
	int self;

	out->n = 0;
	if (dir == NULL)
		return;
	self = dirfd(dir);
	while ((de = readdir(dir)) != NULL && out->n < INHERITED_MAX) {
		long fd;
		if (cli_parse_long(de->d_name, 3, INHERITED_MAX - 1, &fd) != 0 ||
		    fd == self || fd == keep ||
		    (inherited[fd / 8] & (1u << (fd % 8))) != 0)
			continue;
		out->fd[out->n++] = (int)fd;
	}
	closedir(dir);
}

void spawn_keep_fds(struct spawn_fds *fds, const int *keep, int n)
{
	int i, j, k = 0;

	for (i = 0; i < fds->n; i++) {
		bool kept = false;
		for (j = 0; j < n && !kept; j++)
			kept = fds->fd[i] == keep[j];
		if (!kept)
			fds->fd[k++] = fds->fd[i];
	}
	fds->n = k;
}

/* Lets fd pass to the command (clears FD_CLOEXEC; async-signal-safe). */
static void spawn_pass(int fd)
{
	int flags = fd >= 0 ? fcntl(fd, F_GETFD) : -1;

	if (flags >= 0)
		fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC);
}

void spawn_close_own_fds(int keep)
{
	struct spawn_fds fds;
	int i;

	spawn_list_fds(keep, &fds);
	for (i = 0; i < fds.n; i++)
		close(fds.fd[i]);
}

/* 0 when path (relative: to cwd) is a regular file we may execute, else
 * ENOENT or EACCES. */
static int runnable(const char *cwd, const char *dir, size_t dlen, const char *name)
{
	char path[PATH_MAX];
	struct stat st;
	int n;

	if (dlen == 0 && name[0] == '/')
		n = snprintf(path, sizeof(path), "%s", name);
	else if (dlen > 0 && dir[0] == '/')
		n = snprintf(path, sizeof(path), "%.*s/%s", (int)dlen, dir, name);
	else if (dlen > 0)
		n = snprintf(path, sizeof(path), "%s/%.*s/%s", cwd, (int)dlen, dir, name);
	else
		n = snprintf(path, sizeof(path), "%s/%s", cwd, name);
	if (n < 0 || (size_t)n >= sizeof(path) || stat(path, &st) != 0)
		return ENOENT;
	return S_ISREG(st.st_mode) && access(path, X_OK) == 0 ? 0 : EACCES;
}

int spawn_check_command(char *const cmd[], const char *cwd)
{
	const char *p = getenv("PATH"), *name = cmd[0];
	int worst = ENOENT;

	if (name == NULL || name[0] == '\0')
		return ENOENT;
	if (strchr(name, '/') != NULL)
		return runnable(cwd, "", 0, name);
	if (p == NULL)
		p = "/bin:/usr/bin";
	for (;;) {
		size_t len = strcspn(p, ":");
		int e = runnable(cwd, p, len, name);

		if (e == 0)
			return 0;
		if (e == EACCES)
			worst = EACCES;
		if (p[len] == '\0')
			return worst;
		p += len + 1;
	}
}

void spawn_exec(char **cmd)
{
	int e;

	execvp(cmd[0], cmd);
	e = errno;
	output_notice("cannot run %s: %s [%s]", cmd[0], strerror(e),
		wsl_code_name(WSL_OS));
	_exit(e == ENOENT ? 127 : 126);
}

void spawn_command(const struct child *ch, int live_fd, const struct spawn_fds *fds)
{
	int i;

	for (i = 0; i < fds->n; i++)
		close(fds->fd[i]);
	spawn_pass(live_fd);
	for (i = 0; i < ch->n_more_fds; i++)
		spawn_pass(ch->more_fds[i]);
	sigprocmask(SIG_SETMASK, ch->orig_mask, NULL);
	if (ch->stdout_to_stderr && dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
		_exit(126);
	if (ch->cwd != NULL && chdir(ch->cwd) != 0) {
		output_notice("cannot enter %s: %s [%s]", ch->cwd, strerror(errno),
			wsl_code_name(WSL_OS));
		_exit(126);
	}
	spawn_exec(ch->cmd);
}

bool spawn_forwards(int signo)
{
	return signo == SIGTERM || signo == SIGHUP || signo == SIGUSR1 || signo == SIGUSR2;
}
