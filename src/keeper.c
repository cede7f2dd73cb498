/* keeper.c - the keeper of a lease-backed lock (see keeper.h).
 *
 *   wslock (subreaper) --fork--> keeper (subreaper) --fork--> command
 *
 * The keeper reports to wslock through a pipe (one fixed-size message per
 * write, so each is atomic): the command's pid, each renewal's new
 * deadline, a loss, the command's wait status. wslock writes one byte to
 * the keeper's control pipe when it has released the lock; end of file
 * without it means wslock died: the keeper then goes on renewing until
 * the command ends, and leaves the lock (dead once the lease runs out).
 *
 * Who stops the command:
 *  - the keeper, when the watch or a renewal says the lease is gone or the
 *    lock's keys changed (SIGKILL at once: the lock is lost already, a
 *    grace period would be time with two holders), or when no renewal
 *    succeeded in time (SIGTERM at deadline - kill-after, SIGKILL at the
 *    deadline, all before the lease can end at the server);
 *  - wslock, when the keeper's reports stop (the keeper is stopped or
 *    stuck) past the same times, or the keeper died: it kills the keeper
 *    first, so a resumed keeper cannot renew a lease for a stopped
 *    command, and the command, reparented to wslock, is reaped there.
 * "The command" is every descendant of the subreaper that is still in its
 * session: orphans come back to the subreaper, so none escapes by
 * double-forking; one that called setsid() is out of reach (the fencing
 * token is for that).
 *
 * No signal handlers: the signalfd of child_block_signals, inherited by the
 * keeper, reads SIGCHLD in both.
 */
#include "keeper.h"
#include "cli.h"
#include "output.h"
#include "fsx.h"
#include "platform.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TREE_MAX 8192		/* processes looked at when stopping a tree */
#define RETRY_MS 300		/* a renewal that failed is tried again */
#define WATCH_DELAY_MS 200	/* the lock's watch starts after the command */

enum msg_type { MSG_STARTED, MSG_RENEWED, MSG_LOST, MSG_EXITED };

struct keeper_msg {
	int type;
	int status;		/* MSG_EXITED: wait status */
	pid_t pid;		/* MSG_STARTED: the command */
	long long deadline_ms;	/* MSG_RENEWED: CLOCK_MONOTONIC */
	char text[400];		/* MSG_LOST: why */
};

static pid_t keeper_pid;
static int keeper_ctl = -1;

static int ms_until(long long when, long long now)
{
	if (when < 0)
		return -1;
	if (when <= now)
		return 0;
	return when - now > 60000 ? 60000 : (int)(when - now);
}

/* Sends sig to every descendant of root that is in root's session, except
 * root and spare (0: none). Returns how many were signalled. */
static int signal_tree(pid_t root, pid_t spare, int sig)
{
	static pid_t pid[TREE_MAX], ppid[TREE_MAX];
	static pid_t sid[TREE_MAX];
	static unsigned char mark[TREE_MAX];
	pid_t my_sid = getsid(root);
	struct dirent *de;
	DIR *d = opendir("/proc");
	size_t n = 0, i;
	bool grew = true;
	int count = 0;

	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL && n < TREE_MAX) {
		char path[64], buf[512], *p;
		long v;
		int fd;
		ssize_t got;

		if (de->d_name[0] < '1' || de->d_name[0] > '9' ||
		    cli_parse_long(de->d_name, 1, 4194304, &v) != 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", v);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		got = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (got <= 0)
			continue;
		buf[got] = '\0';
		/* after the last ')': state ppid pgrp session */
		p = strrchr(buf, ')');
		if (p == NULL)
			continue;
		{
			char st;
			int pp, pg, se;
			if (sscanf(p + 1, " %c %d %d %d", &st, &pp, &pg, &se) != 4)
				continue;
			pid[n] = (pid_t)v;
			ppid[n] = (pid_t)pp;
			sid[n] = (pid_t)se;
			mark[n] = 0;
			n++;
		}
	}
	closedir(d);
	while (grew) {
		grew = false;
		for (i = 0; i < n; i++) {
			size_t j;
			if (mark[i])
				continue;
			if (ppid[i] == root) {
				mark[i] = grew = true;
				continue;
			}
			for (j = 0; j < n; j++)
				if (mark[j] && pid[j] == ppid[i]) {
					mark[i] = grew = true;
					break;
				}
		}
	}
	for (i = 0; i < n; i++)
		if (mark[i] && pid[i] != root && pid[i] != spare && sid[i] == my_sid &&
		    kill(pid[i], sig) == 0)
			count++;
	return count;
}

static void send_msg(int fd, const struct keeper_msg *m)
{
	ssize_t w;

	do
		w = write(fd, m, sizeof(*m));
	while (w < 0 && errno == EINTR);
	/* A full pipe (wslock stopped) drops the message: later ones say more. */
}

static void drain_signals(int sigfd)
{
	struct signalfd_siginfo si;

	while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		;
}

/* The keeper's state while the command runs. */
struct keep {
	struct registry *reg;
	const struct owner *o;
	int rep, ctl, sigfd;
	int live_fd;		/* the descriptor the command inherits, or -1 */
	int watch;		/* registry_watch_own's descriptor, or -1 */
	long long watch_at;	/* when to start the watch; -1: started */
	long kill_after_ms, period_ms;
	long long deadline, renew_at, kill_at;
	pid_t cmd;
	bool cmd_done, w_gone, lost;
};

/* Stops the command: lost says the lock is gone already (its key deleted
 * or changed, its lease revoked or expired at the server: someone else may
 * hold it now), so SIGKILL at once, with no grace; otherwise the deadline
 * is near but the lease still holds at the server: SIGTERM, and SIGKILL
 * after kill-after (at the latest at the deadline). */
static void keep_lose(struct keep *k, const char *why, long long now, bool lost)
{
	struct keeper_msg m = { 0 };

	k->lost = true;
	if (lost) {
		signal_tree(getpid(), 0, SIGKILL);
		k->kill_at = now;	/* and again at once, for one that forked meanwhile */
	} else {
		signal_tree(getpid(), 0, SIGTERM);
		signal_tree(getpid(), 0, SIGCONT);
		k->kill_at = now + k->kill_after_ms;
		if (k->kill_at > k->deadline)
			k->kill_at = k->deadline;
	}
	m.type = MSG_LOST;
	snprintf(m.text, sizeof(m.text), "%s", why);
	send_msg(k->rep, &m);
}

static void keep_renew(struct keep *k)
{
	struct wsl_error kerr = { 0 };
	struct keeper_msg m = { 0 };
	long next_ms, ttl_ms;
	long long now = platform_mono_ms();

	/* A renewal that cannot be answered before SIGTERM is due is given
	 * up then: the stop must not wait for the network. */
	k->reg->keep_deadline_ms = k->deadline - k->kill_after_ms;
	if (registry_keepalive(k->reg, k->o, &next_ms, &ttl_ms, &kerr) == 0) {
		now = platform_mono_ms();
		if (ttl_ms >= 0)
			k->deadline = now + ttl_ms;
		k->renew_at = now + (next_ms < k->period_ms ? next_ms : k->period_ms);
		m.type = MSG_RENEWED;
		m.deadline_ms = k->deadline;
		send_msg(k->rep, &m);
		return;
	}
	now = platform_mono_ms();
	if (k->cmd_done) {
		/* The command has ended: wslock is releasing; nothing to stop. */
		k->renew_at = now + RETRY_MS;
	} else if (kerr.code == WSL_OWNERSHIP_LOST) {
		keep_lose(k, kerr.message, now, true);
	} else if (now >= k->deadline - k->kill_after_ms) {
		registry_lease_lost(&kerr, k->o->workspace_root);
		keep_lose(k, kerr.message, now, false);
	} else {
		k->renew_at = now + RETRY_MS;
	}
	wsl_error_clear(&kerr);
}

static void keep_watch(struct keep *k)
{
	struct wsl_error werr = { 0 };

	k->watch_at = -1;
	if (k->lost || k->cmd_done ||
	    registry_watch_own(k->reg, k->o, &k->watch, &werr) != 0)
		k->watch = -1;
	wsl_error_clear(&werr);
}

/* The watch reported a loss (or ended): the lock is gone, kill the
 * command now. */
static void keep_watched(struct keep *k)
{
	char why[401];

	if (registry_watch_read(&k->watch, why, sizeof(why)) <= 0 || k->lost || k->cmd_done)
		return;	/* no message: the renewals' re-read remains */
	keep_lose(k, why, platform_mono_ms(), true);
}

static void keep_reap(struct keep *k)
{
	int st;
	pid_t got;

	while ((got = waitpid(-1, &st, WNOHANG)) > 0) {
		if (got == k->cmd && !k->cmd_done) {
			struct keeper_msg m = { 0 };
			k->cmd_done = true;
			m.type = MSG_EXITED;
			m.status = st;
			send_msg(k->rep, &m);
		}
	}
}

static void __attribute__((noreturn)) keeper_main(struct keep *k, const struct child *ch)
{
	struct keeper_msg m = { 0 };
	struct spawn_fds fds;
	int null;

	prctl(PR_SET_CHILD_SUBREAPER, 1);
	spawn_list_fds(k->live_fd, &fds);
	k->cmd = fork();
	if (k->cmd < 0)
		_exit(71);
	if (k->cmd == 0)
		spawn_command(ch, k->live_fd, &fds);
	/* wslock may die: a report to nobody must not kill the keeper. */
	signal(SIGPIPE, SIG_IGN);
	/* No stdio from here on: `x=$(wslock …)` must not wait for us. */
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		if (null > STDERR_FILENO)
			close(null);
	}
	m.type = MSG_STARTED;
	m.pid = k->cmd;
	send_msg(k->rep, &m);
	/* A loss is seen at once through the watch of the lock's keys,
	 * started WATCH_DELAY_MS after the command (a command that ends
	 * sooner costs no watch); without one, at the next renewal's
	 * re-read. */
	k->watch = -1;
	k->watch_at = platform_mono_ms() + WATCH_DELAY_MS;
	for (;;) {
		struct pollfd p[3] = { { k->sigfd, POLLIN, 0 }, { k->ctl, POLLIN, 0 },
				       { k->watch, POLLIN, 0 } };
		long long now = platform_mono_ms(), when;

		keep_reap(k);
		if (k->cmd_done && k->w_gone) {
			/* wslock is gone and the command has ended: what it
			 * left in the session goes too; the lock stays, dead
			 * once its lease runs out. */
			signal_tree(getpid(), 0, SIGKILL);
			_exit(0);
		}
		if (k->lost && k->kill_at >= 0 && now >= k->kill_at) {
			signal_tree(getpid(), 0, SIGKILL);
			k->kill_at = -1;
		}
		if (!k->lost && now >= k->renew_at)
			keep_renew(k);
		if (k->watch_at >= 0 && now >= k->watch_at)
			keep_watch(k);
		now = platform_mono_ms();
		when = k->lost ? k->kill_at : k->renew_at;
		if (k->watch_at >= 0 && k->watch_at < when)
			when = k->watch_at;
		/* a descriptor of -1 is skipped by poll(2) */
		p[1].fd = k->ctl;
		p[2].fd = k->watch;
		if (poll(p, 3, ms_until(when, now)) < 0 && errno != EINTR)
			_exit(71);
		if (p[0].revents & POLLIN)
			drain_signals(k->sigfd);
		if (k->watch >= 0 && (p[2].revents & (POLLIN | POLLHUP)))
			keep_watched(k);
		if (k->ctl >= 0 && (p[1].revents & (POLLIN | POLLHUP))) {
			char b;
			ssize_t r = read(k->ctl, &b, 1);
			if (r == 1)
				_exit(0);	/* released: nothing more to keep */
			if (r == 0) {
				close(k->ctl);
				k->ctl = -1;
				k->w_gone = true;
			}
		}
	}
}

/* wslock's side: what it knows of the keeper and the command. */
struct watch {
	pid_t keeper, cmd;
	int pidfd;		/* the command's, once known; -1 */
	long long deadline, term_at, kill_at;
	long kill_after_ms;
	bool keeper_gone, lost, exited;
	int status;
};

static void cmd_signal(struct watch *w, int sig)
{
	if (w->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, w->pidfd, sig, NULL, 0);
}

/* wslock stops the command itself: the keeper is not reporting. */
static void watch_lose(struct watch *w, struct wsl_error *err, const char *why,
		       long long now)
{
	if (!w->keeper_gone)
		kill(w->keeper, SIGKILL);
	w->lost = true;
	wsl_error_set(err, WSL_OWNERSHIP_LOST, "%s", why);
	output_notice("%s; stopping the command", why);
	signal_tree(getpid(), w->keeper, SIGTERM);
	signal_tree(getpid(), w->keeper, SIGCONT);
	w->kill_at = now + w->kill_after_ms;
	if (w->kill_at > w->deadline)
		w->kill_at = w->deadline;
}

static void watch_msg(struct watch *w, const struct keeper_msg *m,
		      struct wsl_error *err)
{
	switch (m->type) {
	case MSG_STARTED:
		w->cmd = m->pid;
		w->pidfd = (int)syscall(SYS_pidfd_open, m->pid, 0);
		break;
	case MSG_RENEWED:
		if (!w->lost) {
			w->deadline = m->deadline_ms;
			w->term_at = w->deadline - w->kill_after_ms;
		}
		break;
	case MSG_LOST:
		if (!w->lost) {
			w->lost = true;
			wsl_error_set(err, WSL_OWNERSHIP_LOST, "%s", m->text);
			output_notice("%s; stopping the command", m->text);
			/* the keeper stops it; should the keeper stall, we do */
			w->kill_at = w->deadline + 200;
		}
		break;
	case MSG_EXITED:
		w->exited = true;
		w->status = m->status;
		break;
	default:
		break;
	}
}

/* Reaps the keeper and, once it is gone, the command (then our child). */
static void watch_reap(struct watch *w, struct wsl_error *err)
{
	int st;
	pid_t got;

	while ((got = waitpid(-1, &st, WNOHANG)) > 0) {
		if (got == w->keeper) {
			w->keeper_gone = true;
		} else if (got == w->cmd && !w->exited) {
			w->exited = true;
			w->status = st;
		}
	}
	if (w->keeper_gone && !w->exited && !w->lost)
		watch_lose(w, err, "the keeper of the lease died", platform_mono_ms());
}

/* Reads every report waiting in rep; closes it (sets *rep to -1) at its
 * end. */
static void watch_read(struct watch *w, int *rep, struct wsl_error *err)
{
	struct keeper_msg m;
	ssize_t r;

	if (*rep < 0)
		return;
	while ((r = read(*rep, &m, sizeof(m))) == (ssize_t)sizeof(m))
		watch_msg(w, &m, err);
	if (r == 0) {
		close(*rep);
		*rep = -1;
	}
}

static int watch_loop(struct watch *w, int rep, int sigfd, struct wsl_error *err)
{
	for (;;) {
		struct pollfd p[2] = { { sigfd, POLLIN, 0 }, { rep, POLLIN, 0 } };
		struct signalfd_siginfo si;
		long long now;

		/* Reports first: after a SIGSTOP of ours, the keeper's
		 * renewals are waiting here, and they move the deadline. */
		watch_read(w, &rep, err);
		watch_reap(w, err);
		if (w->exited) {
			if (rep >= 0)
				close(rep);
			return w->lost ? -1 : 0;
		}
		now = platform_mono_ms();
		if (!w->lost && now >= w->term_at)
			watch_lose(w, err, "the lease was not renewed in time (its keeper is stopped or cannot reach etcd)",
				   now);
		if (w->lost && w->kill_at >= 0 && now >= w->kill_at) {
			signal_tree(getpid(), w->keeper_gone ? 0 : w->keeper, SIGKILL);
			if (w->keeper_gone)
				w->kill_at = -1;
			else
				w->kill_at = now + 100;	/* the keeper's own kill may lag */
		}
		now = platform_mono_ms();
		if (poll(p, rep >= 0 ? 2 : 1,
			 ms_until(w->lost ? w->kill_at : w->term_at, now)) < 0 && errno != EINTR)
			return wsl_error_errno(err, WSL_OS, errno, "poll");
		/* SIGCHLD: reap above; SIGINT, SIGQUIT: the command's */
		while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			if (spawn_forwards((int)si.ssi_signo))
				cmd_signal(w, (int)si.ssi_signo);
	}
}

int keeper_supervise(struct registry *reg, const struct owner *o,
		     const struct child *ch, int live_fd, int *wstatus,
		     struct wsl_error *err)
{
	struct watch w = { 0 };
	struct keep k = { 0 };
	long next_ms, ttl_ms;
	int rep[2], ctl[2], rc;

	if (registry_keepalive(reg, o, &next_ms, &ttl_ms, err) != 0)
		return -1;
	w.kill_after_ms = ch->kill_after_ms > 0 ? ch->kill_after_ms : 10000;
	/* SIGTERM must leave time for renewals before it: at most half the
	 * TTL goes to the grace period. */
	if (w.kill_after_ms > ttl_ms / 2)
		w.kill_after_ms = ttl_ms / 2;
	w.deadline = platform_mono_ms() + ttl_ms;
	w.term_at = w.deadline - w.kill_after_ms;
	w.kill_at = -1;
	w.pidfd = -1;
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
		return wsl_error_errno(err, WSL_OS, errno, "cannot become a child subreaper");
	if (pipe2(rep, O_CLOEXEC) != 0)
		return wsl_error_errno(err, WSL_OS, errno, "pipe");
	if (pipe2(ctl, O_CLOEXEC) != 0) {
		close(rep[0]);
		close(rep[1]);
		return wsl_error_errno(err, WSL_OS, errno, "pipe");
	}
	fflush(NULL);
	w.keeper = fork();
	if (w.keeper < 0) {
		rc = wsl_error_errno(err, WSL_OS, errno, "cannot fork");
		close(rep[0]);
		close(rep[1]);
		close(ctl[0]);
		close(ctl[1]);
		return rc;
	}
	if (w.keeper == 0) {
		close(rep[0]);
		close(ctl[1]);
		k.reg = reg;
		k.o = o;
		k.rep = rep[1];
		k.ctl = ctl[0];
		k.sigfd = ch->sigfd;
		k.live_fd = live_fd;
		k.kill_after_ms = w.kill_after_ms;
		k.period_ms = (ttl_ms - w.kill_after_ms) / 3;
		if (k.period_ms > next_ms && next_ms > 0)
			k.period_ms = next_ms;
		if (k.period_ms < 100)
			k.period_ms = 100;
		k.deadline = w.deadline;
		k.renew_at = platform_mono_ms() + k.period_ms;
		k.kill_at = -1;
		keeper_main(&k, ch);
	}
	close(rep[1]);
	close(ctl[0]);
	fcntl(rep[0], F_SETFL, fcntl(rep[0], F_GETFL) | O_NONBLOCK);
	keeper_pid = w.keeper;
	keeper_ctl = ctl[1];
	rc = watch_loop(&w, rep[0], ch->sigfd, err);
	if (w.pidfd >= 0)
		close(w.pidfd);
	*wstatus = w.status;
	return rc;
}

void keeper_done(void)
{
	char b = 'd';
	sigset_t pipe_set, old;
	struct timespec zero = { 0, 0 };

	if (keeper_ctl < 0)
		return;
	/* A keeper that is gone already must not kill us with SIGPIPE. */
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	sigprocmask(SIG_BLOCK, &pipe_set, &old);
	if (write(keeper_ctl, &b, 1) < 0)
		sigtimedwait(&pipe_set, NULL, &zero);
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(keeper_ctl);
	keeper_ctl = -1;
	keeper_pid = 0;
}
