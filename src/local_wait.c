/* local_wait.c - the local backend's waits: the coordination lock
 * (.coordination, a bounded wait naming its holder from /proc/locks) and
 * the wait for a lock to go (inotify on locks/).
 */
#include "registry_local.h"
#include "fsx.h"
#include "platform.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

/* The least time a bounded wait gives a running holder of .coordination
 * (ms): it holds it for microseconds, but under load (valgrind, a busy CI
 * machine) a change can take seconds. */
#define COORD_WAIT_MIN_MS 10000

/* The pid holding a flock(2) (shared or exclusive) on the file st
 * describes, from /proc/locks: the kernel's own table, read without taking
 * any lock ("N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE ..." with the device
 * in hex; "->" lines are waiters). 0 when there is none, or its holder is
 * in a pid namespace this one cannot see (the kernel hides those). */
long flock_holder(const struct stat *st)
{
	char line[256];
	long pid = 0;
	FILE *f;

	f = fopen("/proc/locks", "re");
	if (f == NULL)
		return 0;
	while (pid == 0 && fgets(line, sizeof(line), f) != NULL) {
		char kind[16], adv[16], mode[16];
		unsigned int maj, min;
		unsigned long long ino;
		long p;

		if (strstr(line, "->") != NULL)
			continue;
		if (sscanf(line, "%*d: %15s %15s %15s %ld %x:%x:%llu", kind, adv, mode,
			   &p, &maj, &min, &ino) != 7)
			continue;
		if (strcmp(kind, "FLOCK") == 0 && ino == (unsigned long long)st->st_ino &&
		    maj == major(st->st_dev) && min == minor(st->st_dev) && p > 0)
			pid = p;
	}
	fclose(f);
	return pid;
}

/* The pid holding the coordination lock (fd), or 0 (flock_holder). */
static long coord_holder(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 ? flock_holder(&st) : 0;
}

/* Whether pid is stopped (state T or t in /proc/PID/stat): it cannot
 * finish what it does inside .coordination until someone continues it. */
static bool pid_stopped(long pid)
{
	char path[64], buf[512];
	const char *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	fd = fsx_open(path, O_RDONLY | O_NOCTTY, 0);
	if (fd < 0)
		return false;
	n = fsx_read_all(fd, buf, sizeof(buf) - 1);
	fsx_close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p != NULL && p[1] == ' ' && (p[2] == 'T' || p[2] == 't');
}

static int coord_busy(struct registry *reg, long holder, struct wsl_error *err)
{
	if (holder > 0)
		return wsl_error_set(err, WSL_REGISTRY_BUSY,
				     "the registry %s stayed busy: pid %ld holds %s/.coordination%s; nothing done (the workspace itself may be free)",
				     reg->path, holder, reg->path,
				     pid_stopped(holder) ? " and is stopped (continue it with kill -CONT, or end it)" : "");
	return wsl_error_set(err, WSL_REGISTRY_BUSY,
			     "the registry %s stayed busy: a process this one cannot see holds %s/.coordination; nothing done (the workspace itself may be free)",
			     reg->path, reg->path);
}

/* Sleeps wait_us (µs) between two tries for the coordination lock, or
 * until a signal other than SIGCHLD arrives on the caller's signalfd
 * (registry_coord_signals): then -1 with err->signo. */
static int coord_pause(struct registry *reg, long wait_us, struct wsl_error *err)
{
	struct timespec ts = { 0, wait_us * 1000 };
	struct pollfd pfd;
	struct signalfd_siginfo si;

	if (!reg->coord_has_sigfd) {
		nanosleep(&ts, NULL);
		return 0;
	}
	pfd.fd = reg->coord_sigfd;
	pfd.events = POLLIN;
	pfd.revents = 0;
	if (ppoll(&pfd, 1, &ts, NULL) <= 0 || !(pfd.revents & POLLIN))
		return 0;
	if (read(reg->coord_sigfd, &si, sizeof(si)) != (ssize_t)sizeof(si) ||
	    si.ssi_signo == SIGCHLD)
		return 0;
	wsl_error_set(err, WSL_REGISTRY_BUSY,
		      "signal %u while waiting for %s/.coordination; nothing done",
		      si.ssi_signo, reg->path);
	err->signo = (int)si.ssi_signo;
	return -1;
}

/* Takes the coordination lock (op LOCK_SH or LOCK_EX), waiting until dl,
 * else until the bound of registry_coord_bound, else as long as it takes.
 * A bounded wait gives a running holder COORD_WAIT_MIN_MS at least and
 * ends at the bound when the holder is stopped. With a signalfd
 * (registry_coord_signals) no wait blocks in flock(2), so a signal ends
 * it. */
static int coord_lock(struct registry *reg, int op,
		      const struct registry_deadline *dl, struct wsl_error *err)
{
	long long first = -1, bound;

	if (loc(reg)->coord_fd < 0) {
		if (op == LOCK_EX)
			return wsl_error_set(err, WSL_INTERNAL,
					     "registry %s was opened read-only", reg->path);
		return 0;
	}
	if (dl == NULL && !reg->coord_bounded && !reg->coord_has_sigfd) {
		if (fsx_flock(loc(reg)->coord_fd, op) != 0)
			return wsl_error_errno(err, WSL_IO, errno,
					       "cannot lock %s/.coordination", reg->path);
		loc(reg)->coord_held = op;
		return 0;
	}
	bound = dl != NULL ? dl->at_ms : reg->coord_bounded ? reg->coord_bound_ms : LLONG_MAX;
	for (long wait_us = 200;; wait_us = wait_us < 20000 ? wait_us * 2 : wait_us) {
		long long now;
		long holder;

		if (fsx_flock(loc(reg)->coord_fd, op | LOCK_NB) == 0) {
			loc(reg)->coord_held = op;
			return 0;
		}
		if (errno != EWOULDBLOCK)
			return wsl_error_errno(err, WSL_IO, errno,
					       "cannot lock %s/.coordination", reg->path);
		now = platform_mono_ms();
		if (first < 0)
			first = now;
		if (now >= bound) {
			holder = coord_holder(loc(reg)->coord_fd);
			if ((holder > 0 && pid_stopped(holder)) ||
			    now >= first + COORD_WAIT_MIN_MS)
				return coord_busy(reg, holder, err);
		}
		if (coord_pause(reg, wait_us, err) != 0)
			return -1;
	}
}


void local_unlock(struct registry *reg)
{
	if (loc(reg)->coord_fd >= 0 && loc(reg)->coord_held != 0)
		fsx_flock(loc(reg)->coord_fd, LOCK_UN);
	loc(reg)->coord_held = 0;
}


/* The coordination lock; a mutation (LOCK_EX) of a 0.1 registry upgrades
 * it first. */
int local_lock(struct registry *reg, int op,
	       const struct registry_deadline *dl, struct wsl_error *err)
{
	if (coord_lock(reg, op, dl, err) != 0)
		return -1;
	if (op == LOCK_EX && loc(reg)->format < REGISTRY_FORMAT && upgrade(reg, err) != 0) {
		local_unlock(reg);
		return -1;
	}
	return 0;
}

int local_coord_lock(struct registry *reg, int op, struct wsl_error *err)
{
	return local_lock(reg, op, NULL, err);
}

int local_wait_prepare(struct registry *reg, struct wsl_error *err)
{
	char path[PATH_MAX];

	if (loc(reg)->watch_fd >= 0)
		return 0;
	if (path_join(path, reg->path, "locks", err) != 0)
		return -1;
	loc(reg)->watch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (loc(reg)->watch_fd < 0)
		return wsl_error_errno(err, WSL_OS, errno, "inotify_init1");
	/* A release renames locks/KEY away (IN_MOVED_FROM); a removal by hand
	 * deletes it (IN_DELETE). IN_DONT_FOLLOW: never through a symlink. */
	if (inotify_add_watch(loc(reg)->watch_fd, path, IN_MOVED_FROM | IN_DELETE |
			      IN_ONLYDIR | IN_DONT_FOLLOW) < 0) {
		wsl_error_errno(err, WSL_OS, errno, "inotify_add_watch %s", path);
		fsx_close(loc(reg)->watch_fd);
		loc(reg)->watch_fd = -1;
		return -1;
	}
	return 0;
}

int local_wait(struct registry *reg, int sigfd, long timeout_ms,
	       struct wsl_error *err)
{
	struct pollfd pfd[2];
	char buf[4096];
	nfds_t n = 0;

	if (loc(reg)->watch_fd >= 0) {
		pfd[n].fd = loc(reg)->watch_fd;
		pfd[n].events = POLLIN;
		pfd[n++].revents = 0;
	}
	if (sigfd >= 0) {
		pfd[n].fd = sigfd;
		pfd[n].events = POLLIN;
		pfd[n++].revents = 0;
	}
	if (poll(pfd, n, (int)timeout_ms) < 0 && errno != EINTR)
		return wsl_error_errno(err, WSL_OS, errno, "poll");
	if (loc(reg)->watch_fd >= 0)
		while (read(loc(reg)->watch_fd, buf, sizeof(buf)) > 0)
			;
	return sigfd >= 0 && (pfd[n - 1].revents & POLLIN) ? 1 : 0;
}

