/* spawn.h - the process image of a command run under a lock (src/spawn.c):
 * what it is (struct child), the descriptors it inherits, its exec. Used by
 * child.c (a command under a lock) and keeper.c (under a lease). */
#ifndef WSLOCK_SPAWN_H
#define WSLOCK_SPAWN_H

#include <signal.h>
#include <stdbool.h>

/* How a command runs under a held lock. */
struct child {
	char **cmd;			/* argv, NULL-terminated */
	const char *cwd;		/* chdir here before exec, or NULL */
	bool stdout_to_stderr;		/* the command's stdout goes to our stderr
					 * (reclaim: stdout is JSON only) */
	bool retain_on_failure;		/* keep the lock, retained, if it fails */
	int sigfd;			/* from child_block_signals */
	const sigset_t *orig_mask;	/* restored in the child */
	long kill_after_ms;		/* lease lost: SIGTERM, then SIGKILL after
					 * this long (ms); 0: 10000 */
	const int *more_fds;		/* further descriptors the command inherits
					 * (the live files of a run of several
					 * workspaces after the first), or NULL */
	int n_more_fds;
};

/* Descriptors 3..INHERITED_MAX-1 open at start; above that, all are kept. */
#define INHERITED_MAX 1024

/* The descriptors above 2 that wslock opened, but keep: found before
 * fork(), because after it the child may only make async-signal-safe calls
 * (another thread, libcurl's resolver, may have held malloc's lock), so it
 * just closes them. Where close_range(2) works (Linux 5.9) they are the
 * ranges of descriptors 3..INHERITED_MAX-1 that were not inherited
 * (ranges: no /proc read, one call per range in the child); else the
 * descriptors listed from /proc/self/fd. */
struct spawn_fds {
	bool ranges;			/* lo[i]..hi[i] (inclusive), else fd[i] */
	int n;
	int lo[INHERITED_MAX / 2 + 2];
	int hi[INHERITED_MAX / 2 + 2];
	int fd[INHERITED_MAX];
};

/* Fills *out with the descriptors above 2 that wslock opened (see struct
 * spawn_fds), but keep (-1: none). */
void spawn_list_fds(int keep, struct spawn_fds *out);

/* Drops from *fds the n descriptors keep[0..n) (a run of several
 * workspaces: its further live files pass to the command too). */
void spawn_keep_fds(struct spawn_fds *fds, const int *keep, int n);

/*
 * Remembers which descriptors above 2 the process inherited (called first
 * thing in main): they are the caller's and pass through to a command, as
 * with flock(1). Everything else above 2 is wslock's own.
 */
void spawn_note_inherited_fds(void);

/* Closes every descriptor above 2 that wslock opened, except keep (-1:
 * none): libraries (libcurl) do not all open theirs O_CLOEXEC, this is the
 * guarantee that a command gets only keep. It reads /proc/self/fd
 * (opendir, malloc): after fork() in a process with threads, list before
 * forking instead (spawn_list_fds), as supervise does. */
void spawn_close_own_fds(int keep);

/* Whether execvp(3) would find cmd[0] from directory cwd: 0 when it names
 * (with a '/': relative to cwd; without: in $PATH, or the default path
 * "/bin:/usr/bin" when PATH is unset, an empty entry being cwd) a regular
 * file this process may execute; else ENOENT (nothing there) or EACCES
 * (there, but not a regular file or not executable). A check only, for a
 * caller that must change nothing when the command cannot run: the file
 * may still change before the exec. */
int spawn_check_command(char *const cmd[], const char *cwd);

/* Replaces the process with cmd (execvp); on failure says why and exits
 * 127 (not found) or 126. */
void spawn_exec(char **cmd) __attribute__((noreturn));

/* In the forked child: closes fds (spawn_list_fds, before the fork),
 * lets live_fd (-1: none) and ch->more_fds pass to the command, restores ch->orig_mask,
 * sends stdout to stderr when ch says so, enters ch->cwd and execs
 * ch->cmd (spawn_exec). Only async-signal-safe calls until exec, but for
 * the messages of a failure (exit 126). */
void spawn_command(const struct child *ch, int live_fd, const struct spawn_fds *fds)
	__attribute__((noreturn));

/* Whether the runner of a command forwards signal signo to it: SIGTERM,
 * SIGHUP, SIGUSR1, SIGUSR2. SIGINT and SIGQUIT reach the command from the
 * terminal (its process group) by themselves; SIGCHLD is the runner's. */
bool spawn_forwards(int signo);

#endif
