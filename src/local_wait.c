/* local_wait.c - the local backend's waits: the coordination lock
 * (.coordination, a bounded wait naming its holder from /proc/locks) and
 * the FIFO wait queue for a held workspace (DESIGN.md section 5).
 *
 * The wait queue. flock(2) promises no order and a release used to wake
 * every waiter (each then took .coordination and tried again: a herd, and
 * the starvation tail), so the order comes from queue/:
 *
 *   queue/SEQ.PID.RAND   one regular file (0600) per waiter, kept
 *                        flock()ed LOCK_EX by it while it waits. SEQ (20
 *                        decimal digits) is one more than the highest SEQ
 *                        present, taken under .coordination LOCK_EX: the
 *                        SEQ order of the entries present is their arrival
 *                        order. The file holds, NUL-separated, a magic, the
 *                        mode ("exclusive"; issue 15 adds "shared": then
 *                        two shared entries do not conflict), the waiter's
 *                        pid and pid namespace, its arrival time, and the
 *                        workspace's identity (fs, path inside it) and
 *                        canonical path; a waiter for several workspaces
 *                        at once (local_multi.c) adds the identity and
 *                        path of each further one, so that its one entry,
 *                        at one SEQ, stands in the queue of every
 *                        workspace it needs (two entries conflict when any
 *                        workspace of one nests with any of the other's:
 *                        queue order is one order for all, and waiters
 *                        that name them in different orders cannot wait
 *                        for each other). Nothing in it is durable: a
 *                        crash ends every waiter, so nothing is fsynced.
 *
 * An entry whose kernel lock is free is abandoned (its waiter was killed:
 * the kernel dropped the lock): every scan under .coordination LOCK_EX,
 * and reclaim, unlinks it. Two entries conflict when their workspaces nest
 * (the same, ancestor or descendant; by path, or by identity when both are
 * known). There is one queue per registry; each waiter waits only for the
 * entries ahead of it that conflict with it, so unrelated workspaces never
 * wait for each other, and a waiter for /w behind holders of /w/a and /w/b
 * is not starved: an acquire that meets a conflicting waiter ahead of it
 * (queued, or not yet queued: every arrival is behind the whole queue) does
 * not take the lock even when its workspace is free (no barging; with -n it
 * fails, WSLOCK_BUSY naming that waiter).
 *
 * Who sleeps on what (poll(2) on inotify descriptors, a pidfd and the
 * caller's signalfd; no timer unless -w, or a terminal's progress line,
 * asks for one):
 *  - a waiter with a conflicting entry ahead sleeps on the nearest such
 *    entry (inotify IN_CLOSE_WRITE: its owner closing it, by leaving or by
 *    dying; only the owner opens it for writing);
 *  - the head (no conflicting waiter ahead) sleeps on the holder: the close
 *    of its live file (a run, its command included), of its nested file
 *    (nested runs), its pidfd (an acquire --pid holder in this pid
 *    namespace), and the rename of its lock directory out of locks/ (a
 *    release; only heads watch locks/, so a release wakes only them).
 * A waiter reads the queue's names and, from the nearest one back, only
 * the entries it needs: usually the one ahead of it.
 * A waiter that takes the lock leaves the queue at once (unlink, then
 * close: the close wakes the one entry behind it, which becomes the head
 * and sleeps on the new holder), so each hand-over wakes one process. A
 * killed waiter's lock vanishes; the one behind it wakes, sees the entry
 * abandoned and moves up. A killed holder's descriptors close: the head
 * wakes and finds the lock dead (recovery required, or --reclaim-dead).
 *
 * Stopped waiters (SIGSTOP, Ctrl-Z) never break safety, which rests on
 * locks/ and .coordination alone: the queue only orders. A stopped waiter
 * is passed over: a scan that finds a conflicting entry whose waiter is
 * stopped does not wait for it, and opens it for writing once (a poke:
 * the close wakes the waiters sleeping on it, which pass it over too); a
 * release pokes the stopped waiters at the front of the queue, up to the
 * first running one. So a stopped head never keeps a
 * free workspace from the others. What is not noticed without a timer: a
 * waiter stopped after its wake-up, at the head, delays the ones behind
 * it until the next arrival or release. A continued waiter keeps its
 * place (its SEQ) and is served next.
 *
 * Deadlock: an acquire inside a held lock's run (nest.c's proof) that
 * would queue behind waiters whose chain of conflicts reaches a lock it is
 * inside would wait for itself. Such an acquire passes the queue by and
 * waits only for real locks (an exception to FIFO, never to safety).
 *
 * A crash (SIGKILL) leaves, by step: queue:created, queue:joined,
 * queue:sleeping - an abandoned entry (its kernel lock gone: the waiter
 * behind moves up; the next scan or reclaim removes it); queue:left -
 * nothing (the entry is unlinked before it is closed, so a name is never
 * reused while its old owner could still unlink it).
 */
#include "registry_local.h"
#include "fsx.h"
#include "nest.h"
#include "platform.h"
#include "testhook.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

/* The least time a bounded wait gives a running holder of .coordination
 * (ms): it holds it for microseconds, but under load (valgrind, a busy CI
 * machine) a change can take seconds. */
#define COORD_WAIT_MIN_MS 10000

/* The pauses between two tries for the coordination lock (coord_lock):
 * at most COORD_PAUSE_MAX_US (µs) during the first COORD_PAUSE_FAST_MS
 * (ms) of a wait, then at most COORD_PAUSE_SLOW_US. */
#define COORD_PAUSE_MAX_US 1000
#define COORD_PAUSE_FAST_MS 1000
#define COORD_PAUSE_SLOW_US 20000

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

/* Whether pid is stopped by a signal (state T in /proc/PID/stat); see
 * registry_local.h. */
bool pid_stopped(long pid)
{
	char state = '?';

	/* Whatever pid namespace /proc shows: the pid may come from
	 * /proc/locks of that same /proc (platform_proc_stat). */
	return platform_proc_stat((pid_t)pid, NULL, &state) == 0 && state == 'T';
}

/* Tells reg->coord_notice, once a wait that began waited_ms ago has
 * lasted long enough for its holder (registry.h); *told keeps it to once
 * a wait. */
static void coord_notice(struct registry *reg, long long waited_ms, bool *told)
{
	long holder;
	bool stopped;

	if (reg->coord_notice == NULL || *told || waited_ms < REGISTRY_COORD_NOTICE_MS)
		return;
	holder = coord_holder(loc(reg)->coord_fd);
	stopped = holder > 0 && pid_stopped(holder);
	if (!stopped && waited_ms < COORD_WAIT_MIN_MS)
		return;
	*told = true;
	reg->coord_notice(reg, holder, stopped);
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
 * it; with reg->coord_notice neither, so that a long wait is told. */
static int coord_lock(struct registry *reg, int op,
		      const struct registry_deadline *dl, struct wsl_error *err)
{
	long long first = -1, bound, look = 0;
	bool told = false;

	if (loc(reg)->coord_fd < 0) {
		if (op == LOCK_EX)
			return wsl_error_set(err, WSL_INTERNAL,
					     "registry %s was opened read-only", reg->path);
		return 0;
	}
	if (dl == NULL && !reg->coord_bounded && !reg->coord_has_sigfd &&
	    reg->coord_notice == NULL) {
		if (fsx_flock(loc(reg)->coord_fd, op) != 0)
			return wsl_error_errno(err, WSL_IO, errno,
					       "cannot lock %s/.coordination", reg->path);
		loc(reg)->coord_held = op;
		return 0;
	}
	bound = dl != NULL ? dl->at_ms : reg->coord_bounded ? reg->coord_bound_ms : LLONG_MAX;
	/* A woken waiter usually finds the releaser still inside (removing
	 * the markers after its commit): the first retries come soon. Each
	 * holder keeps it for microseconds to a few fsyncs, and every
	 * contender polls: a pause longer than a hold lets the others take
	 * it again and again before this one looks (a newcomer waited 180 ms
	 * to join the queue behind 45 hand-overs with pauses of 20 ms), so
	 * the pause stays under COORD_PAUSE_MAX_US while the wait is
	 * young and grows to COORD_PAUSE_SLOW_US only for a holder that
	 * keeps it longer than COORD_PAUSE_FAST_MS (stopped, or a disk
	 * stalled): no spinning on a stuck one. */
	for (long wait_us = 50;;) {
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
		if (!told && now >= look && now - first >= REGISTRY_COORD_NOTICE_MS) {
			/* /proc/locks four times a second, not at every try */
			coord_notice(reg, now - first, &told);
			look = now + 250;
		}
		if (now >= bound) {
			holder = coord_holder(loc(reg)->coord_fd);
			if ((holder > 0 && pid_stopped(holder)) ||
			    now >= first + COORD_WAIT_MIN_MS)
				return coord_busy(reg, holder, err);
		}
		if (coord_pause(reg, wait_us, err) != 0)
			return -1;
		wait_us *= 2;
		if (wait_us > COORD_PAUSE_MAX_US && now - first < COORD_PAUSE_FAST_MS)
			wait_us = COORD_PAUSE_MAX_US;
		else if (wait_us > COORD_PAUSE_SLOW_US)
			wait_us = COORD_PAUSE_SLOW_US;
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
	struct local_queue *q = queue_state(reg);

	if (q == NULL)
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	q->join = true;
	/* One inotify instance per waiting process, its watches made per
	 * wait (wait_arm): closing an instance can cost milliseconds. */
	if (q->watch_fd < 0) {
		q->watch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (q->watch_fd < 0)
			return wsl_error_errno(err, WSL_OS, errno, "inotify_init1");
	}
	return 0;
}

/* pidfd_open(2) (Linux 5.3), -1 with errno where there is none. */
static int pidfd_of(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	(void)pid;
	errno = ENOSYS;
	return -1;
#endif
}

/* A pidfd for pid if it is still the process started at ticks (when
 * known); -1 when it is gone (ESRCH) or pidfds do not exist. */
static int pidfd_checked(pid_t pid, bool has_ticks, unsigned long long ticks, bool *gone)
{
	int fd = pidfd_of(pid);

	*gone = fd < 0 && errno == ESRCH;
	/* A zombie has ended too (platform_pid_fate), though its pidfd opens. */
	if (fd >= 0 && has_ticks && platform_pid_fate(pid, true, ticks, NULL) != PID_RUNS) {
		fsx_close(fd);
		*gone = true;
		return -1;
	}
	return fd;
}

/* Adds an inotify watch on reg/DIR[/NAME[/FILE]]: its wd, or -1. */
static int watch_path(struct registry *reg, int fd, const char *dir, const char *name,
		      const char *file, uint32_t mask)
{
	char path[PATH_MAX];
	struct wsl_error ignored = { 0 };

	if (path_join(path, reg->path, dir, &ignored) != 0 ||
	    (name != NULL && path_join(path, path, name, &ignored) != 0) ||
	    (file != NULL && path_join(path, path, file, &ignored) != 0))
		return -1;
	return inotify_add_watch(fd, path, mask | IN_DONT_FOLLOW);
}

/* Whether what the wait sleeps on has changed since queue_check: 1 yes
 * (the caller tries again), 0 no. */
static int target_changed(struct registry *reg, struct local_queue *q)
{
	struct stat st;
	int fd, rc;

	if (q->target == TARGET_ENTRY) {
		fd = q->dir_fd >= 0 ? fsx_openat(q->dir_fd, q->t_name,
						 O_RDONLY | O_NONBLOCK | O_NOCTTY, 0) : -1;
		if (fd < 0)
			return 1;
		rc = fstat(fd, &st) != 0 || st.st_ino != q->t_ino || st.st_dev != q->t_dev ||
		     fsx_flock(fd, LOCK_SH | LOCK_NB) == 0;
		fsx_close(fd);
		return rc || queue_stopped_pid(q->t_pid, q->t_pidns, q->t_dev, q->t_ino);
	}
	if (q->target != TARGET_LOCK)
		return 1;
	fd = fsx_openat(loc(reg)->locks_fd, q->t_key, O_RDONLY | O_DIRECTORY, 0);
	if (fd >= 0 && q->t_holder_dir[0] != '\0') {
		/* A shared lock's holder (local_shared.c). */
		char sub[WSL_KEY_HEX + 16];
		int lfd = fd;

		snprintf(sub, sizeof(sub), "holders/%s", q->t_holder_dir);
		fd = fsx_openat(lfd, sub, O_RDONLY | O_DIRECTORY, 0);
		fsx_close(lfd);
	}
	if (fd < 0)
		return 1;
	/* A fresh live file: another lock at that key now (released and
	 * taken meanwhile, or taken over). */
	rc = fstatat(fd, "live", &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_ino != q->t_live_ino :
		q->t_live_ino != 0;
	if (!rc && q->t_live)
		rc = liveness_live_held(fd) != 1;
	if (!rc && q->t_nested)
		rc = fstatat(fd, LOCK_NESTED_FILE, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		     flock_holder(&st) <= 0;
	fsx_close(fd);
	return rc;
}

/* Reads the pending events of fd: 1 when one says the lock slept on left
 * locks/ (the watch locks_wd, the entry named key), or its holder left a
 * shared lock's holders/ (holders_wd, the entry holder), or events were
 * lost, else 0 (a close: target_changed decides). */
static int release_seen(int fd, int locks_wd, const char *key, int holders_wd,
			const char *holder)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t len;
	int seen = 0;

	while ((len = read(fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			if ((ev->mask & IN_Q_OVERFLOW) ||
			    (locks_wd >= 0 && ev->wd == locks_wd && ev->len > 0 &&
			     strcmp(ev->name, key) == 0) ||
			    (holders_wd >= 0 && ev->wd == holders_wd && ev->len > 0 &&
			     strcmp(ev->name, holder) == 0))
				seen = 1;
			p += sizeof(*ev) + ev->len;
		}
	}
	return seen;
}

static void drain(int fd)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	while (fd >= 0 && read(fd, buf, sizeof(buf)) > 0)
		;
}

/* The watches of one wait: inotify wds, the holder's pidfd, and whether
 * some could not be made (then it also looks once a second). */
struct wait_set {
	int wds[4];
	int pidfd;
	bool slow;
};

/* Arms ws for what queue_check recorded: 1 when it has changed already
 * (the caller tries again), else 0. A watch that cannot be added for
 * lack of watches or pidfds makes the wait slow, never blind. */
static int wait_arm(struct registry *reg, struct local_queue *q, struct wait_set *ws)
{
	char dir[2 * WSL_KEY_HEX + 16];
	bool gone = false;

	drain(q->watch_fd);
	if (q->target == TARGET_ENTRY) {
		ws->wds[0] = watch_path(reg, q->watch_fd, QUEUE_DIR, q->t_name, NULL,
					IN_CLOSE_WRITE);
		if (ws->wds[0] < 0 && errno == ENOENT)
			return 1;
		ws->slow = ws->wds[0] < 0;
	} else {
		/* The release notice: only a head watches locks/, so a
		 * release wakes no one else. Made after the try that saw the
		 * lock: target_changed then sees a release that came between. */
		ws->wds[2] = watch_path(reg, q->watch_fd, "locks", NULL, NULL,
					IN_MOVED_FROM | IN_DELETE | IN_ONLYDIR);
		ws->slow = ws->wds[2] < 0;
		/* A shared lock's holder: its own files, and its leaving
		 * holders/ (the lock stays while other holders have it). */
		snprintf(dir, sizeof(dir), "%s%s%s", q->t_key,
			 q->t_holder_dir[0] != '\0' ? "/holders/" : "", q->t_holder_dir);
		if (q->t_holder_dir[0] != '\0') {
			ws->wds[3] = watch_path(reg, q->watch_fd, "locks", q->t_key, "holders",
						IN_MOVED_FROM | IN_DELETE | IN_ONLYDIR);
			ws->slow = ws->slow || ws->wds[3] < 0;
		}
		if (q->t_live) {
			ws->wds[0] = watch_path(reg, q->watch_fd, "locks", dir, "live",
						IN_CLOSE_WRITE);
			ws->slow = ws->slow || ws->wds[0] < 0;
		}
		if (q->t_nested) {
			ws->wds[1] = watch_path(reg, q->watch_fd, "locks", dir,
						LOCK_NESTED_FILE, IN_CLOSE_WRITE | IN_CLOSE_NOWRITE);
			ws->slow = ws->slow || ws->wds[1] < 0;
		}
		if (q->t_pid_watch) {
			ws->pidfd = pidfd_checked(q->t_holder, q->t_has_ticks, q->t_ticks, &gone);
			if (gone)
				return 1;
			ws->slow = ws->slow || ws->pidfd < 0;
		}
	}
	CRASH_POINT("queue:sleeping");
	if (q->own_pid != getpid() && !q->own_tried) {
		q->own_tried = true;
		q->own_pidfd = pidfd_checked(q->own_pid, q->own_has_ticks, q->own_ticks, &gone);
		if (gone)
			return 1;
	}
	/* Without a pidfd for the holder-to-be (before Linux 5.3, or under
	 * a tool that lacks pidfd_open) it is looked at every poll. */
	if (q->own_pid != getpid() && q->own_pidfd < 0)
		ws->slow = true;
	return 0;
}

/* Whether the holder watched without a pidfd (a slow wait) has gone. */
static bool holder_gone_slow(const struct local_queue *q)
{
	return platform_pid_ended(platform_pid_fate(q->t_holder, q->t_has_ticks, q->t_ticks,
						    NULL));
}

/* One sleep of a wait until (CLOCK_MONOTONIC ms, -1: none): 1 a signal,
 * 0 something changed or the time is up, 2 nothing yet (sleep again),
 * -1 with err. */
static int wait_once(struct registry *reg, struct local_queue *q,
		     const struct wait_set *ws, int sigfd, long long until,
		     struct wsl_error *err)
{
	struct pollfd pfd[5];
	nfds_t np = 0;
	int at_pid = -1, at_own = -1, at_sig = -1, wait;
	long long left = until >= 0 ? until - platform_mono_ms() : -1;

	if (until >= 0 && left <= 0)
		return 0;
	wait = left < 0 || left > INT_MAX ? -1 : (int)left;
	if (ws->slow && (wait < 0 || wait > WAIT_POLL_MS))
		wait = WAIT_POLL_MS;
	pfd[np++] = (struct pollfd){ q->watch_fd, POLLIN, 0 };
	if (ws->pidfd >= 0) {
		at_pid = (int)np;
		pfd[np++] = (struct pollfd){ ws->pidfd, POLLIN, 0 };
	}
	if (q->own_pidfd >= 0) {
		at_own = (int)np;
		pfd[np++] = (struct pollfd){ q->own_pidfd, POLLIN, 0 };
	}
	if (sigfd >= 0) {
		at_sig = (int)np;
		pfd[np++] = (struct pollfd){ sigfd, POLLIN, 0 };
	}
	if (poll(pfd, np, wait) < 0)
		return errno == EINTR ? 2 : wsl_error_errno(err, WSL_OS, errno, "poll");
	if (at_sig >= 0 && (pfd[at_sig].revents & POLLIN))
		return 1;
	/* The holder-to-be (acquire --pid) exited: the caller says so. */
	if ((at_own >= 0 && (pfd[at_own].revents & POLLIN)) ||
	    (at_pid >= 0 && (pfd[at_pid].revents & POLLIN)))
		return 0;
	if ((pfd[0].revents & POLLIN) &&
	    release_seen(q->watch_fd, ws->wds[2], q->t_key, ws->wds[3], q->t_holder_dir))
		return 0;
	if (ws->slow && q->t_pid_watch && ws->pidfd < 0 && holder_gone_slow(q))
		return 0;
	if (ws->slow && q->own_pid != getpid() && q->own_pidfd < 0 &&
	    platform_pid_ended(platform_pid_fate(q->own_pid, q->own_has_ticks, q->own_ticks, NULL)))
		return 0;
	return 2;
}

int local_wait(struct registry *reg, int sigfd, long timeout_ms,
	       struct wsl_error *err)
{
	struct local_queue *q = loc(reg)->queue;
	long long until = timeout_ms >= 0 ? platform_mono_ms() + timeout_ms : -1;
	struct wait_set ws = { { -1, -1, -1, -1 }, -1, false };
	int rc = 0;

	/* Before the first sleep: the lock staged, owner.json fsynced, so
	 * that once served only the rename and locks/ remain. */
	prestage_waiting(reg);
	if (q == NULL || q->watch_fd < 0 || q->target == TARGET_NONE) {
		/* No watches (inotify unavailable): a bounded sleep. */
		struct pollfd p = { sigfd, POLLIN, 0 };
		if (poll(&p, sigfd >= 0 ? 1 : 0, timeout_ms < 0 ? WAIT_POLL_MS : (int)timeout_ms) < 0 &&
		    errno != EINTR)
			return wsl_error_errno(err, WSL_OS, errno, "poll");
		return sigfd >= 0 && (p.revents & POLLIN) ? 1 : 0;
	}
	if (wait_arm(reg, q, &ws) == 0)
		do
			rc = target_changed(reg, q) ? 0 : wait_once(reg, q, &ws, sigfd, until, err);
		while (rc == 2);
	for (int i = 0; i < 4; i++)
		if (ws.wds[i] >= 0)
			inotify_rm_watch(q->watch_fd, ws.wds[i]);
	fsx_close(ws.pidfd);
	return rc;
}

void local_wait_end(struct registry *reg)
{
	struct local_queue *q = loc(reg)->queue;

	if (q == NULL)
		return;
	queue_leave(reg);
	q->join = false;
	q->target = TARGET_NONE;
	fsx_close(q->own_pidfd);
	q->own_pidfd = -1;
	q->own_tried = false;
}

void local_wait_close(struct registry *reg)
{
	struct local_queue *q = loc(reg)->queue;

	if (q == NULL)
		return;
	local_wait_end(reg);
	fsx_close(q->watch_fd);
	fsx_close(q->dir_fd);
	free(q);
	loc(reg)->queue = NULL;
}
