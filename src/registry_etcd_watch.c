/* registry_etcd_watch.c - the holder watches its own keys (DESIGN.md
 * section 5b): the lock key deleted or changed, or the liveness key gone
 * with a revoked lease, and the keeper stops the command at once instead
 * of at its next renewal.
 *
 * A thread of the keeper, with an etcd client of its own (a client is not
 * thread-safe), watches P "lock" W and P "live" W (of every workspace of
 * a set held at once, registry_etcd_multi.c) on one stream with
 * progress notifications, from the revision at which the holder's
 * ownership began: every change since is replayed, so no change is missed
 * between two watches. Any event is confirmed by a read (check_own) before
 * it counts: a loss is written to the descriptor the keeper polls, one
 * message of at most WATCH_MSG_MAX bytes, and the thread ends (closing it); anything
 * else (a compaction, say) moves the watch on to the revision read.
 *
 * A watch can stall silently on a half-open connection. The stream is
 * therefore made anew every slice (a third of the TTL, as the renewals),
 * so a stall lasts at most one slice, after which the new stream replays
 * what the old one missed; and the keeper's renewal re-reads the keys
 * anyway (the bounded re-read this watch only makes faster).
 */
#include "registry_etcd.h"
#include "platform.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WATCH_RETRY_MS 300	/* after a failed watch or read */

struct own_watch {
	struct etcd_state s;		/* a copy of the holder's, own client */
	const struct owner *o;
	struct key k[2 * REGISTRY_MULTI_MAX];	/* lock and live key of each
						 * workspace (several: its set) */
	size_t nk;
	long long rev;			/* the keys are known up to here */
	long slice_ms;
	int fd;				/* the write end */
};

static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void *own_watch_main(void *arg)
{
	struct own_watch *w = arg;
	struct etcd_watch_range r[2 * REGISTRY_MULTI_MAX];

	for (size_t i = 0; i < w->nk; i++) {
		r[i].key = w->k[i].b;
		r[i].key_len = w->k[i].len;
		r[i].range_end = NULL;
		r[i].range_end_len = 0;
	}
	for (;;) {
		struct wsl_error err = { 0 };
		long long before = w->s.last_rev;
		int rc = etcd_wait_changes(w->s.c, r, w->nk, w->rev, w->slice_ms, true, &err);

		wsl_error_clear(&err);
		if (rc == 0)
			continue;	/* quiet (or stalled): a new stream */
		if (rc < 0) {
			pause_ms(WATCH_RETRY_MS);
			continue;
		}
		if (check_own(&w->s, w->o, &err) != 0) {
			ssize_t n;
			size_t len = strnlen(err.message, WATCH_MSG_MAX);

			do
				n = write(w->fd, err.message, len);
			while (n < 0 && errno == EINTR);
			close(w->fd);
			etcd_close(w->s.c);
			free(w);
			return NULL;
		}
		if (w->s.last_rev > before)
			w->rev = w->s.last_rev;
		else
			pause_ms(WATCH_RETRY_MS);	/* the read failed: proves nothing */
	}
}

int etcd_watch_own(struct registry *reg, const struct owner *o, int *fd,
		   struct wsl_error *err)
{
	struct etcd_state *s = state(reg);
	struct own_watch *w;
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;
	int p[2], rc;

	*fd = -1;
	if (s->lease == 0 || !s->lease_used || strcmp(s->lease_token, o->token) != 0)
		return 0;	/* no lease behind this lock: nothing to watch */
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	w->s = *s;
	w->o = o;
	w->rev = reg->fence > 0 ? reg->fence : s->last_rev;
	w->slice_ms = s->ttl_s * 1000 / 3 > 1000 ? (long)(s->ttl_s * 1000 / 3) : 1000;
	if (s->held_shared) {	/* a reader's own keys (registry_etcd_shared.c) */
		if (holder_key(s, K_LOCK, o->workspace_root, o->token, &w->k[0], err) != 0 ||
		    holder_key(s, K_LIVE, o->workspace_root, o->token, &w->k[1], err) != 0) {
			free(w);
			return -1;
		}
		w->nk = 2;
	}
	/* Several workspaces held at once: the keys of each. */
	for (size_t i = 0; !s->held_shared && i < (set_names(s, o->token) ? s->set->n : 1); i++) {
		const char *ws = set_names(s, o->token) ? s->set->os[i].workspace_root :
			o->workspace_root;

		if (key_make(s, "lock", ws, &w->k[w->nk], err) != 0 ||
		    key_make(s, "live", ws, &w->k[w->nk + 1], err) != 0) {
			free(w);
			return -1;
		}
		w->nk += 2;
	}
	if (client_new(s, &w->s.c, err) != 0) {
		free(w);
		return -1;
	}
	if (pipe2(p, O_CLOEXEC) != 0) {
		etcd_close(w->s.c);
		free(w);
		return wsl_error_errno(err, WSL_OS, errno, "pipe");
	}
	w->fd = p[1];
	/* The thread takes no signal: the keeper reads them from its
	 * signalfd. It runs until it reports a loss or the keeper exits. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, own_watch_main, w);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		close(p[0]);
		close(p[1]);
		etcd_close(w->s.c);
		free(w);
		return wsl_error_errno(err, WSL_OS, rc, "cannot start the watch of %s",
				       o->workspace_root);
	}
	*fd = p[0];
	return 0;
}
