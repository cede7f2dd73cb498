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
#include <sys/syscall.h>
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

/* Whether close_range(2) closes descriptors here (Linux 5.9; an empty
 * range probes it). */
static bool have_close_range(void)
{
#ifdef SYS_close_range
	return syscall(SYS_close_range, ~0U, ~0U, 0) == 0;
#else
	return false;
#endif
}

static bool is_inherited(int fd)
{
	return (inherited[fd / 8] & (1u << (fd % 8))) != 0;
}

/* Removes descriptor fd from the ranges of *fds (splitting one). */
static void ranges_drop(struct spawn_fds *fds, int fd)
{
	int i, j;

	for (i = 0; i < fds->n; i++) {
		if (fd < fds->lo[i] || fd > fds->hi[i])
			continue;
		if (fds->lo[i] == fds->hi[i]) {
			for (j = i + 1; j < fds->n; j++) {
				fds->lo[j - 1] = fds->lo[j];
				fds->hi[j - 1] = fds->hi[j];
			}
			fds->n--;
		} else if (fd == fds->lo[i]) {
			fds->lo[i]++;
		} else if (fd == fds->hi[i]) {
			fds->hi[i]--;
		} else if (fds->n < (int)(sizeof(fds->lo) / sizeof(fds->lo[0]))) {
			for (j = fds->n; j > i + 1; j--) {
				fds->lo[j] = fds->lo[j - 1];
				fds->hi[j] = fds->hi[j - 1];
			}
			fds->lo[i + 1] = fd + 1;
			fds->hi[i + 1] = fds->hi[i];
			fds->hi[i] = fd - 1;
			fds->n++;
		} else {	/* cannot happen: inherited and kept fds alternate */
			fds->hi[i] = fd - 1;
		}
		return;
	}
}

void spawn_list_fds(int keep, struct spawn_fds *out)
{
	struct dirent *de;
	DIR *dir;
	int self;

	out->n = 0;
	out->ranges = have_close_range();
	if (out->ranges) {
		for (int fd = 3; fd < INHERITED_MAX; fd++) {
			if (is_inherited(fd))
				continue;
			if (out->n > 0 && out->hi[out->n - 1] == fd - 1) {
				out->hi[out->n - 1] = fd;
			} else {
				out->lo[out->n] = out->hi[out->n] = fd;
				out->n++;
			}
		}
		if (keep >= 0)
			ranges_drop(out, keep);
		return;
	}
	dir = opendir("/proc/self/fd");
	if (dir == NULL)
		return;
	self = dirfd(dir);
	while ((de = readdir(dir)) != NULL && out->n < INHERITED_MAX) {
		long fd;
		if (cli_parse_long(de->d_name, 3, INHERITED_MAX - 1, &fd) != 0 ||
		    fd == self || fd == keep || is_inherited((int)fd))
			continue;
		out->fd[out->n++] = (int)fd;
	}
	closedir(dir);
}

void spawn_keep_fds(struct spawn_fds *fds, const int *keep, int n)
{
	int i, j, k = 0;

	if (fds->ranges) {
		for (j = 0; j < n; j++)
			if (keep[j] >= 0)
				ranges_drop(fds, keep[j]);
		return;
	}
	for (i = 0; i < fds->n; i++) {
		bool kept = false;
		for (j = 0; j < n && !kept; j++)
			kept = fds->fd[i] == keep[j];
		if (!kept)
			fds->fd[k++] = fds->fd[i];
	}
	fds->n = k;
}

/* Closes the descriptors of *fds (async-signal-safe). */
static void close_fds(const struct spawn_fds *fds)
{
	int i;

	for (i = 0; i < fds->n; i++) {
#ifdef SYS_close_range
		if (fds->ranges) {
			syscall(SYS_close_range, (unsigned)fds->lo[i], (unsigned)fds->hi[i], 0);
			continue;
		}
#endif
		close(fds->fd[i]);
	}
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
	static struct spawn_fds fds;

	spawn_list_fds(keep, &fds);
	close_fds(&fds);
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

	close_fds(fds);
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
