/* hold.c - the wait-and-acquire loop of acquire and run: try, and on a
 * conflict decide (lockrules) whether waiting can cure it, then wait for a
 * release, a deadline or a signal. */
#include "hold.h"
#include "cli.h"
#include "lockrules.h"
#include "nest.h"
#include "output.h"
#include "platform.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

bool hold_conflict_silent(const struct cli *c, const struct hold_wait *w,
			  const struct wsl_error *err)
{
	return c->quiet && w->conflict_exit >= 0 &&
	       (err->code == WSL_BUSY || err->code == WSL_TIMEOUT);
}

int hold_option(struct hold_opts *h, int id, const char *arg,
		struct wsl_error *err)
{
	long v;

	switch (id) {
	case 'w':
	case 'n':
		return hold_registry_option(&h->wait, id, arg, err);
	case 'E':
		if (cli_parse_long(arg, 0, 255, &v) != 0)
			return wsl_error_set(err, WSL_USAGE,
					     "-E takes an exit status 0..255, not '%s'", arg);
		h->wait.conflict_exit = (int)v;
		return 1;
	case OPT_OPERATION_ID:
		if (!owner_operation_id_valid(arg))
			return wsl_error_set(err, WSL_USAGE,
					     "operation id '%.200s' must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,191}$", arg);
		h->operation_id = arg;
		return 1;
	case OPT_PURPOSE:
		if (!owner_purpose_valid(arg))
			return wsl_error_set(err, WSL_USAGE,
					     "purpose must be 1..%d printable characters", OWNER_PURPOSE_MAX);
		h->purpose = arg;
		return 1;
	default:
		return 0;
	}
}

int hold_registry_option(struct hold_wait *w, int id, const char *arg,
			 struct wsl_error *err)
{
	if (id == 'w') {
		w->timeout_ms = cli_opt_seconds("-w", arg, err);
		if (w->timeout_ms < 0)
			return -1;
	} else if (id == 'n') {
		w->nonblock = true;
	} else {
		return 0;
	}
	/* flock(1) lets -n win silently; two options that contradict each
	 * other are a usage error here, as --owner with --all is. */
	if (w->nonblock && w->timeout_ms >= 0)
		return wsl_error_set(err, WSL_USAGE,
				     "-n and -w do not go together: -n gives up at once, -w SECONDS waits that long");
	return 1;
}

/* registry->coord_notice: one line on stderr about a long wait for the
 * registry's coordination lock (a terminal's waiting line cleared first:
 * it is redrawn after). */
static void coord_notice(const struct registry *reg, long holder, bool stopped)
{
	if (isatty(STDERR_FILENO))
		output_status_clear();
	if (holder > 0 && stopped)
		output_notice("waiting for the registry %s: pid %ld holds its lock (.coordination) and is stopped; 'kill -CONT %ld' lets it go on, or -w SECONDS gives up waiting (the workspace itself may be free)",
			      reg->path, holder, holder);
	else if (holder > 0)
		output_notice("waiting for the registry %s: pid %ld has held its lock (.coordination) for 10 s or more (the workspace itself may be free)",
			      reg->path, holder);
	else
		output_notice("waiting for the registry %s: a process this one cannot see (another pid namespace) has held its lock (.coordination) for 10 s or more",
			      reg->path);
}

void hold_registry_notice(const struct cli *c, struct registry *reg)
{
	reg->coord_notice = c->quiet ? NULL : coord_notice;
}

void hold_registry_bound(const struct cli *c, struct registry *reg, const struct hold_wait *w)
{
	hold_registry_notice(c, reg);
	if (w->nonblock || w->timeout_ms >= 0)
		registry_coord_bound(reg, w->nonblock,
				     w->timeout_ms >= 0 ? platform_mono_ms() + w->timeout_ms : -1);
}

/* True (with err) when o's holder pid is no longer the process it names:
 * acquire --pid P must not leave a lock for a P that exited while it
 * waited. */
static bool holder_gone(const struct owner *o, const char *ws, struct wsl_error *err)
{
	if (platform_pid_ended(platform_pid_fate(o->pid, o->has_start_ticks, o->start_ticks,
						 NULL))) {
		wsl_error_set(err, WSL_NOT_HELD,
			      "the holder pid %ld exited while waiting for %s; nothing is locked",
			      (long)o->pid, ws);
		return true;
	}
	return false;
}

int hold_conflict_status(const struct hold_wait *w, const struct wsl_error *err)
{
	if (w->conflict_exit >= 0 &&
	    (err->code == WSL_BUSY || err->code == WSL_TIMEOUT))
		return w->conflict_exit;
	return wsl_code_exit(err->code);
}

/* --reclaim-dead: takes over the dead owner of e by the same
 * compare-and-swap as reclaim --yes. Returns 0 when it is gone (or changed
 * meanwhile: the caller retries), -1 with err otherwise. */
static int reclaim_dead(struct cli *c, struct registry *reg,
			const struct lock_entry *e, struct wsl_error *err)
{
	struct registry_expect x = { 0 };
	struct lock_entry prior;
	char who[1024];
	int rc;

	x.owner = &e->owner;
	x.action = "reclaim-dead";
	rc = registry_take_over(reg, e->workspace_root, &x, NULL, NULL, &prior, err);
	if (rc == 0 && !c->quiet) {
		lockrules_describe_holder(e, who, sizeof(who));
		output_notice("reclaimed %s from %s: %s",
			e->workspace_root, who, e->reason);
	}
	lock_entry_free(&prior);
	if (rc != 0 && (err->code == WSL_NOT_HELD || err->code == WSL_OWNER_MISMATCH)) {
		wsl_error_clear(err);
		rc = 0;
	}
	return rc;
}

/* registry->inside: nest.c's proof, for the backend's wait queue. */
static bool hold_inside(const struct lock_entry *e, pid_t from)
{
	return nest_proven(e, from) != NEST_NONE;
}

int hold_acquire(struct cli *c, struct registry *reg, const struct owner *o,
		 const struct hold_wait *w, int *live_fd, struct wsl_error *err)
{
	return hold_acquire_multi(c, reg, o, 1, w, live_fd, err);
}

int hold_acquire_multi(struct cli *c, struct registry *reg, const struct owner *os,
		       size_t n, const struct hold_wait *w, int *live_fds,
		       struct wsl_error *err)
{
	const struct owner *o = &os[0];	/* the holder's pid is every owner's */
	const char *ws = o->workspace_root;	/* the one a conflict is on */
	long long start = platform_mono_ms();
	long long deadline = w->timeout_ms >= 0 ? start + w->timeout_ms : -1;
	struct wsl_error werr = { 0 };
	/* On a terminal the notice is one status line updated in place;
	 * elsewhere (logs, CI) it is printed once. */
	bool tty = !c->quiet && isatty(STDERR_FILENO);
	bool told = false, nest_checked = w->nest_outer == NULL;
	int watch = 0, rc;
	bool watching = false;
	size_t which = 0;

	/* A signal also ends a wait for the registry itself (a stopped
	 * holder of .coordination must not make SIGTERM wait for it). */
	registry_coord_signals(reg, w->sigfd);
	hold_registry_notice(c, reg);
	reg->inside = hold_inside;
	/* A conflict will be waited for: queue at once (local), so that
	 * the place is that of the first attempt. */
	reg->queue_early = !w->nonblock && w->timeout_ms != 0;
	for (;;) {
		struct lock_entry conflict;
		struct registry_deadline dl;
		char who[1024], subject[2 * PATH_MAX + 64], why[1200];
		long long wait_ms;

		/* -n and -w also bound the wait for the registry itself
		 * (WSLOCK_REGISTRY_BUSY, never a free workspace called busy;
		 * registry_coord_bound says how long). */
		dl.at_ms = w->nonblock ? platform_mono_ms() : deadline;
		if (w->holder_must_live && holder_gone(o, ws, err)) {
			rc = -1;
			break;
		}
		rc = registry_try_acquire_multi(reg, os, n,
						w->nonblock || deadline >= 0 ? &dl : NULL,
						live_fds, &conflict, &which, err);
		ws = os[which].workspace_root;
		if (rc == ACQUIRE_DONE && w->holder_must_live && holder_gone(o, ws, err)) {
			/* It exited between the check and the publish: give the
			 * locks back, nobody would ever release them. */
			struct wsl_error rerr = { 0 };
			for (size_t i = 0; i < n; i++) {
				registry_release(reg, os[i].workspace_root, os[i].token, NULL, &rerr);
				wsl_error_clear(&rerr);
			}
			lock_entry_free(&conflict);
			rc = -1;
			break;
		}
		if (rc == ACQUIRE_DONE || rc < 0) {
			lock_entry_free(&conflict);
			break;
		}
		if (!nest_checked) {
			/* Only a conflict can be an enclosing holder; the
			 * conflict itself may be a waiter queued ahead. */
			nest_checked = true;
			rc = nest_find(reg, ws, o->pid, w->nest_outer, err);
			if (rc != 0) {
				lock_entry_free(&conflict);
				rc = rc > 0 ? HOLD_NESTED : -1;
				break;
			}
		}
		if (w->reclaim_dead &&
		    lockrules_reclaimable(&conflict, false, why, sizeof(why))) {
			rc = reclaim_dead(c, reg, &conflict, err);
			lock_entry_free(&conflict);
			if (rc < 0)
				break;
			continue;
		}
		if (lockrules_conflict_final(ws, &conflict,
					     nest_proven(&conflict, o->pid) == NEST_POSSESSION,
					     err) != 0) {
			lock_entry_free(&conflict);
			rc = -1;
			break;
		}
		lockrules_describe_holder(&conflict, who, sizeof(who));
		lockrules_conflict_subject(ws, &conflict, subject, sizeof(subject));
		if (w->nonblock || (deadline >= 0 && platform_mono_ms() >= deadline)) {
			lockrules_error_holder(err, &conflict);
			wsl_error_detail(&err->requested, ws);
			err->relation = lockrules_conflict_relation(ws, &conflict);
			err->has_timeout = !w->nonblock;
			err->timeout_ms = w->nonblock ? 0 : w->timeout_ms;
			/* An owner of unknown liveness may release (it was
			 * waited for), but what is left at the end is that its
			 * liveness is unprovable, not that it is busy (69, as
			 * inspect --exit-status says; DESIGN.md section 6). */
			if (conflict.liveness == LIVENESS_UNKNOWN)
				wsl_error_set(err, WSL_LIVENESS_UNKNOWN,
					      "%s%s locked by %s, whose liveness is unknown (%s); once its holder has ended (check on its host or in its container), 'wslock recover --force --reason TEXT' takes it over",
					      w->nonblock ? "" : "timed out: ", subject, who,
					      conflict.reason);
			else
				wsl_error_set(err, w->nonblock ? WSL_BUSY : WSL_TIMEOUT,
					      "%s%s locked by %s",
					      w->nonblock ? "" : "timed out: ", subject, who);
			lock_entry_free(&conflict);
			rc = -1;
			break;
		}
		if (!watching) {
			/* Only now, on a conflict: an uncontended acquire needs no
			 * watch (closing an inotify fd can cost milliseconds).
			 * Then try once more, since a release that came before the
			 * watch existed would wake nobody; that try joins the
			 * wait queue (local) if it meets a conflict again. */
			watching = true;
			watch = registry_wait_prepare(reg, &werr);
			if (watch < 0 && c->verbose)
				output_notice("%s; polling instead", werr.message);
			wsl_error_clear(&werr);
			if (watch != 1) {
				lock_entry_free(&conflict);
				continue;
			}
			watch = 0;	/* the wait starts where this attempt read */
		}
		if (tty) {
			output_status_line(platform_mono_ms() - start, subject, who);
			told = true;
		} else if (!told && !c->quiet) {
			output_notice("waiting: %s locked by %s", subject, who);
			told = true;
		}
		lock_entry_free(&conflict);
		/* The backend sleeps until what we wait for changes (local:
		 * the waiter ahead leaves, or the holder releases or dies): no
		 * timer but the deadline, and a terminal's progress line,
		 * redrawn each second. Without a watch, a poll. */
		wait_ms = watch != 0 ? WAIT_POLL_MS : tty ? 1000 : -1;
		if (deadline >= 0) {
			long long left = deadline - platform_mono_ms();
			if (left < 0)
				left = 0;
			if (wait_ms < 0 || left < wait_ms)
				wait_ms = left;
		}
		rc = registry_wait(reg, w->sigfd, (long)wait_ms, err);
		if (rc < 0)
			break;
		if (rc == 1) {
			struct signalfd_siginfo si;
			if (read(w->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si) &&
			    si.ssi_signo != SIGCHLD) {
				rc = (int)si.ssi_signo;
				break;
			}
		}
	}
	registry_wait_end(reg);	/* leaves the queue, if in it */
	reg->queue_early = false;
	registry_coord_signals(reg, -1);
	if (rc < 0 && err->signo > 0) {
		rc = err->signo;	/* as a signal during the wait below */
		wsl_error_clear(err);
	}
	if (tty && told)
		output_status_clear();
	return rc;
}
