/* keeper_pid.c - the keeper of an `acquire` lock (see keeper_pid.h).
 *
 *   acquire --fork--> (setsid) --fork--> keeper      (the middle one exits)
 *
 * The keeper tells acquire it is ready through a pipe (one byte), once it
 * listens on its poke socket, so that a release right after acquire finds
 * it. The poke socket is an abstract unix socket named by the lock's
 * token: nothing on disk to clean up, gone with the keeper. A poke is
 * answered by closing the connection after the check (or by exiting).
 */
#include "keeper_pid.h"
#include "fsx.h"
#include "platform.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define RETRY_MS 300		/* a renewal that failed is tried again */
#define PID_POLL_MS 1000	/* no pidfd: the pid is checked this often */
#define READY_WAIT_MS 10000	/* acquire waits this long for its keeper */
#define POKE_GAP_MS 300		/* a check right after a renewal would send
				 * nothing (the backend skips it): wait */

/* The abstract socket address of token's keeper into *a; its length. */
static socklen_t poke_addr(const char *token, struct sockaddr_un *a)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	/* sun_path[0] = '\0': the abstract namespace */
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "wslock-keeper-%s", token);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

int keeper_pid_open(const struct owner *o, struct wsl_error *err)
{
	int fd = (int)syscall(SYS_pidfd_open, (pid_t)o->pid, 0);

	if (fd < 0 && (errno == ENOSYS || errno == EPERM))
		return -2;
	/* The pidfd is of the holder: still the process of its ticks, and
	 * not a zombie (which has ended: platform_pid_fate). */
	if (fd < 0 ||
	    (o->has_start_ticks &&
	     platform_pid_fate(o->pid, true, o->start_ticks, NULL) != PID_RUNS)) {
		fsx_close(fd);
		return wsl_error_set(err, WSL_NOT_HELD,
				     "the holder pid %ld exited before its lock on %s could be kept alive",
				     (long)o->pid, o->workspace_root);
	}
	/* pidfd_open gives O_CLOEXEC descriptors */
	return fd;
}

/* Whether o's holder still runs (no pidfd: by its pid and start ticks;
 * a zombie has ended). */
static bool holder_runs(const struct owner *o)
{
	return !platform_pid_ended(platform_pid_fate(o->pid, o->has_start_ticks,
						     o->start_ticks, NULL));
}

/* Closes every descriptor above 2 but keep[0..n). */
static void close_all_but(const int *keep, size_t n)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int fds[1024], nf = 0, i;

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL && nf < 1024) {
		char *end;
		long fd;
		size_t j;

		errno = 0;
		fd = strtol(de->d_name, &end, 10);
		if (errno != 0 || *end != '\0' || end == de->d_name || fd <= 2 ||
		    fd == dirfd(d) || fd > 1048576)
			continue;
		for (j = 0; j < n && keep[j] != fd; j++)
			;
		if (j == n)
			fds[nf++] = (int)fd;
	}
	closedir(d);
	for (i = 0; i < nf; i++)
		close(fds[i]);
}

/* The keeper's state. */
struct pidkeep {
	struct registry *reg;
	const struct owner *o;
	int pidfd;		/* -1: no pidfd, the pid is polled */
	int sock;		/* listening for pokes */
	int poker;		/* a poke's connection, answered after the check; -1 */
	int watch;		/* registry_watch_own's descriptor, or -1 */
	long long renew_at;	/* CLOCK_MONOTONIC ms of the next renewal */
	long long expires_at;	/* the lease's end as last renewed */
	long long last_ms;	/* when the last renewal was tried */
};

/* One renewal (and check of the lock). Returns 1 when the keeper is to
 * exit: the lock is gone, not ours, or its lease is. */
static int keep_renew(struct pidkeep *k)
{
	struct wsl_error err = { 0 };
	long next_ms, ttl_ms;
	long long now;
	int rc;

	k->last_ms = platform_mono_ms();
	rc = registry_keepalive(k->reg, k->o, &next_ms, &ttl_ms, &err);
	now = platform_mono_ms();
	if (rc == 0) {
		if (next_ms < 0)
			return 1;	/* no lease behind the lock any more */
		k->renew_at = now + next_ms;
		if (ttl_ms >= 0)
			k->expires_at = now + ttl_ms;
		return 0;
	}
	rc = err.code == WSL_OWNERSHIP_LOST || now >= k->expires_at;
	wsl_error_clear(&err);
	k->renew_at = now + RETRY_MS;
	return rc;
}

/* The watch reported: with a message the lock is lost (released, taken
 * over, its lease revoked; confirmed by a read): 1. Without one it ended:
 * the renewals' checks remain. */
static int keep_watched(struct pidkeep *k)
{
	char why[401];

	return registry_watch_read(&k->watch, why, sizeof(why)) > 0;
}

static void __attribute__((noreturn)) keeper_loop(struct pidkeep *k)
{
	for (;;) {
		/* -1 descriptors are ignored by poll */
		struct pollfd p[3] = { { k->sock, POLLIN, 0 }, { k->pidfd, POLLIN, 0 },
				       { k->watch, POLLIN, 0 } };
		long long now = platform_mono_ms(), wait = k->renew_at - now;

		if (k->pidfd < 0 && wait > PID_POLL_MS)
			wait = PID_POLL_MS;
		if (wait < 0)
			wait = 0;
		if (poll(p, 3, (int)wait) < 0 && errno != EINTR)
			_exit(71);
		/* The holder exited: stop renewing, leave the lock (dead once
		 * the lease runs out: recovery required). */
		if (k->pidfd >= 0 ? (p[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0 :
		    !holder_runs(k->o))
			_exit(0);
		if (k->watch >= 0 && (p[2].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    keep_watched(k)) {
			/* lost: a last renewal revokes the lease when its
			 * check runs (else it runs out unused) */
			keep_renew(k);
			_exit(0);
		}
		if ((p[0].revents & POLLIN) && k->poker < 0) {
			k->poker = accept4(k->sock, NULL, NULL, SOCK_CLOEXEC);
			if (k->poker >= 0 && k->renew_at > k->last_ms + POKE_GAP_MS)
				k->renew_at = k->last_ms + POKE_GAP_MS;
		}
		if (platform_mono_ms() >= k->renew_at) {
			if (keep_renew(k) != 0)
				_exit(0);
			if (k->poker >= 0) {
				close(k->poker);
				k->poker = -1;
			}
		}
	}
}

/* In the keeper: no terminal, no stdio, no descriptor of the caller's,
 * default signals; then listen for pokes, say so on ready, and keep. */
static void __attribute__((noreturn)) keeper_main(struct registry *reg,
						  const struct owner *o, int pidfd,
						  long ttl_ms, long next_ms, int ready)
{
	struct pidkeep k = { 0 };
	struct sockaddr_un a;
	socklen_t alen = poke_addr(o->token, &a);
	sigset_t none;
	int null, keep[3];

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	if (chdir("/") != 0)
		_exit(71);
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0 ||
	    dup2(null, STDERR_FILENO) < 0)
		_exit(71);
	k.sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (k.sock < 0 || bind(k.sock, (struct sockaddr *)&a, alen) != 0 ||
	    listen(k.sock, 8) != 0)
		_exit(71);
	keep[0] = k.sock;
	keep[1] = pidfd;
	keep[2] = ready;
	close_all_but(keep, 3);
	k.reg = reg;
	k.o = o;
	k.pidfd = pidfd >= 0 ? pidfd : -1;
	k.poker = -1;
	/* A release from any machine (or a take-over) is seen at once, not
	 * at the next renewal; without a watch the renewals still check. */
	{
		struct wsl_error werr = { 0 };
		if (registry_watch_own(reg, o, &k.watch, &werr) != 0)
			k.watch = -1;
		wsl_error_clear(&werr);
	}
	k.last_ms = platform_mono_ms();
	k.renew_at = k.last_ms + next_ms;
	k.expires_at = k.last_ms + ttl_ms;
	if (write(ready, "r", 1) != 1)
		_exit(71);
	close(ready);
	keeper_loop(&k);
}

int keeper_pid_start(struct registry *reg, const struct owner *o, int pidfd,
		     struct wsl_error *err)
{
	struct pollfd p;
	long next_ms, ttl_ms;
	int ready[2], st, rc;
	pid_t mid;
	char b;

	if (registry_keepalive(reg, o, &next_ms, &ttl_ms, err) != 0 ||
	    pipe2(ready, O_CLOEXEC) != 0) {
		rc = err->code != WSL_OK ? -1 : wsl_error_errno(err, WSL_OS, errno, "pipe");
		fsx_close(pidfd);
		return rc;
	}
	fflush(NULL);
	mid = fork();
	if (mid < 0) {
		rc = wsl_error_errno(err, WSL_OS, errno, "cannot fork the keeper");
		close(ready[0]);
		close(ready[1]);
		fsx_close(pidfd);
		return rc;
	}
	if (mid == 0) {
		pid_t keeper;

		close(ready[0]);
		if (setsid() < 0)
			_exit(71);
		keeper = fork();
		if (keeper != 0)
			_exit(keeper < 0 ? 71 : 0);
		keeper_main(reg, o, pidfd, ttl_ms, next_ms, ready[1]);
	}
	close(ready[1]);
	fsx_close(pidfd);
	while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
		;
	p.fd = ready[0];
	p.events = POLLIN;
	p.revents = 0;
	do
		rc = poll(&p, 1, READY_WAIT_MS);
	while (rc < 0 && errno == EINTR);
	rc = rc == 1 && read(ready[0], &b, 1) == 1 ? 0 :
		wsl_error_set(err, WSL_OS, "the keeper of the lock on %s did not start",
			      o->workspace_root);
	close(ready[0]);
	return rc;
}

void keeper_pid_poke(const char *token, long timeout_ms)
{
	struct sockaddr_un a;
	socklen_t alen = poke_addr(token, &a);
	long long end = platform_mono_ms() + timeout_ms;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	if (connect(fd, (struct sockaddr *)&a, alen) == 0) {
		/* The keeper closes the connection when it has checked. */
		for (;;) {
			struct pollfd p = { fd, POLLIN, 0 };
			long long left = end - platform_mono_ms();
			char b;
			int rc;

			if (left <= 0)
				break;
			rc = poll(&p, 1, (int)left);
			if (rc < 0 && errno == EINTR)
				continue;
			if (rc <= 0 || read(fd, &b, 1) <= 0)
				break;
		}
	}
	close(fd);
}
