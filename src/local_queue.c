/* local_queue.c - the local backend's FIFO wait queue: its entries in
 * queue/ (read, joined, left, collected) and the queue's part of an
 * acquire's verdict (queue_check). The protocol, its invariants and what
 * a crash leaves are described atop local_wait.c, which sleeps on what
 * queue_check records.
 */
#include "registry_local.h"
#include "fsx.h"
#include "platform.h"
#include "testhook.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define QUEUE_MAGIC "wslock-queue-1"
#define QUEUE_SEQ_DIGITS 20
/* An entry's bytes at most: the fields and two paths per workspace (a
 * waiter for several workspaces at once, registry_try_acquire_multi,
 * writes one entry naming them all). */
#define QUEUE_WS_BYTES (2 * PATH_MAX + MOUNTINFO_FS_MAX + 3)
#define QUEUE_ENTRY_MAX (REGISTRY_MULTI_MAX * QUEUE_WS_BYTES + WSL_PIDNS_MAX + 160)

/* What an entry asks for: two shared entries do not conflict. A binary
 * that knows only "exclusive" passes a shared entry over (never trusted,
 * never removed): the queue only orders, safety rests on locks/. */
enum queue_mode { QUEUE_EXCLUSIVE, QUEUE_SHARED };

/* A further workspace of an entry (the first is inline in the entry). */
struct queue_ws {
	char fs[MOUNTINFO_FS_MAX + 1];
	char fspath[PATH_MAX];
	char workspace[PATH_MAX];
};

/* One live entry as read from queue/. */
struct queue_entry {
	char name[QUEUE_NAME_MAX];
	unsigned long long seq;
	dev_t dev;
	ino_t ino;
	enum queue_mode mode;
	long pid;			/* in the waiter's pid namespace */
	char pidns[WSL_PIDNS_MAX + 1];
	char since[WSL_TIME_LEN + 1];	/* arrival */
	char fs[MOUNTINFO_FS_MAX + 1];	/* "" when unknown */
	char fspath[PATH_MAX];
	char workspace[PATH_MAX];
	struct queue_ws *more;		/* the further workspaces of a waiter
					 * for several (malloc'd), or NULL */
	size_t n_more;
};

/* Workspace i of e (0: the first) as its path, fs and fspath. */
static void entry_ws(const struct queue_entry *e, size_t i, const char **ws,
		     const char **fs, const char **fspath)
{
	const struct queue_ws *w = i > 0 ? &e->more[i - 1] : NULL;

	*ws = w != NULL ? w->workspace : e->workspace;
	*fs = w != NULL ? w->fs : e->fs;
	*fspath = w != NULL ? w->fspath : e->fspath;
}

static void entry_free(struct queue_entry *e)
{
	free(e->more);
	e->more = NULL;
	e->n_more = 0;
}

struct local_queue *queue_state(struct registry *reg)
{
	struct local_queue *q = loc(reg)->queue;

	if (q != NULL)
		return q;
	q = calloc(1, sizeof(*q));
	if (q == NULL)
		return NULL;
	q->dir_fd = q->fd = q->watch_fd = q->own_pidfd = -1;
	loc(reg)->queue = q;
	return q;
}

/* Opens queue/ when it exists (with create: makes it); 0 when it is open
 * or missing without create. */
static int queue_open_dir(struct registry *reg, struct local_queue *q, bool create,
			  struct wsl_error *err)
{
	char path[PATH_MAX];
	struct wsl_error local = { 0 };

	if (q->dir_fd >= 0 || loc(reg)->dir_fd < 0)
		return 0;
	if (path_join(path, reg->path, QUEUE_DIR, err) != 0)
		return -1;
	q->dir_fd = fsx_open_dir_checked(loc(reg)->dir_fd, QUEUE_DIR, path, create, &local);
	if (q->dir_fd >= 0)
		return 0;
	if (!create && local.code == WSL_IO && local.sys_errno == ENOENT) {
		wsl_error_clear(&local);
		return 0;
	}
	*err = local;
	return -1;
}

/* Whether name is an entry's name: SEQ (QUEUE_SEQ_DIGITS digits) and a
 * dot; *seq gets SEQ. */
static bool queue_name_seq(const char *name, unsigned long long *seq)
{
	unsigned long long v = 0;
	int i;

	for (i = 0; i < QUEUE_SEQ_DIGITS; i++) {
		if (name[i] < '0' || name[i] > '9')
			return false;
		v = v * 10 + (unsigned long long)(name[i] - '0');
	}
	if (name[i] != '.' || strlen(name) >= QUEUE_NAME_MAX)
		return false;
	*seq = v;
	return true;
}

/* The next NUL-terminated field of buf[*at..len) into out (cap bytes). */
static bool queue_field(const char *buf, size_t len, size_t *at, char *out, size_t cap)
{
	const char *end = memchr(buf + *at, '\0', len - *at);
	size_t n;

	if (*at >= len || end == NULL)
		return false;
	n = (size_t)(end - (buf + *at));
	if (n >= cap)
		return false;
	memcpy(out, buf + *at, n + 1);
	*at += n + 1;
	return true;
}

static bool queue_parse(const char *buf, size_t len, struct queue_entry *e)
{
	char magic[32], mode[16], pid[24], *end;
	size_t at = 0;

	if (!queue_field(buf, len, &at, magic, sizeof(magic)) ||
	    strcmp(magic, QUEUE_MAGIC) != 0 ||
	    !queue_field(buf, len, &at, mode, sizeof(mode)) ||
	    !queue_field(buf, len, &at, pid, sizeof(pid)) ||
	    !queue_field(buf, len, &at, e->pidns, sizeof(e->pidns)) ||
	    !queue_field(buf, len, &at, e->since, sizeof(e->since)) ||
	    !queue_field(buf, len, &at, e->fs, sizeof(e->fs)) ||
	    !queue_field(buf, len, &at, e->fspath, sizeof(e->fspath)) ||
	    !queue_field(buf, len, &at, e->workspace, sizeof(e->workspace)))
		return false;
	if (strcmp(mode, "exclusive") == 0)
		e->mode = QUEUE_EXCLUSIVE;
	else if (strcmp(mode, "shared") == 0)
		e->mode = QUEUE_SHARED;
	else
		return false;	/* a mode this binary does not know */
	errno = 0;
	e->pid = strtol(pid, &end, 10);
	if (errno != 0 || *end != '\0' || e->pid <= 0 || e->workspace[0] != '/')
		return false;
	/* A waiter for several workspaces: a triple (fs, fspath, path) for
	 * each further one. */
	while (at < len) {
		struct queue_ws *w;

		if (e->n_more + 1 >= REGISTRY_MULTI_MAX)
			return false;
		w = realloc(e->more, (e->n_more + 1) * sizeof(*w));
		if (w == NULL)
			return false;
		e->more = w;
		w = &e->more[e->n_more];
		if (!queue_field(buf, len, &at, w->fs, sizeof(w->fs)) ||
		    !queue_field(buf, len, &at, w->fspath, sizeof(w->fspath)) ||
		    !queue_field(buf, len, &at, w->workspace, sizeof(w->workspace)) ||
		    w->workspace[0] != '/')
			return false;
		e->n_more++;
	}
	return true;
}

/* One name of queue/, in SEQ order, and its entry once loaded. */
struct queue_slot {
	char *name;
	unsigned long long seq;
	int state;			/* 0 not loaded, 1 live (e valid), -1 not live */
	struct queue_entry e;
};

static int slot_cmp(const void *a, const void *b)
{
	const struct queue_slot *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * The entries' names in queue/ (our own left out), sorted by SEQ, into a
 * new array (*out, *n; queue_slots_free it), none loaded yet; *max gets
 * the highest SEQ named (our own included). Only names are read: an
 * entry is opened when it is needed (queue_load), so that a waiter reads
 * the one ahead of it, not the whole queue.
 */
static int queue_slots(struct registry *reg, struct local_queue *q, struct queue_slot **out,
		       size_t *n, unsigned long long *max, struct wsl_error *err)
{
	char **names = NULL;
	size_t count = 0, i;
	struct queue_slot *slots;

	*out = NULL;
	*n = 0;
	*max = q->fd >= 0 ? q->seq : 0;
	if (q->dir_fd < 0)
		return 0;
	if (list_names(q->dir_fd, &names, &count) != 0)
		return wsl_error_errno(err, WSL_IO, errno, "cannot read %s/%s", reg->path,
				       QUEUE_DIR);
	slots = count > 0 ? calloc(count, sizeof(*slots)) : NULL;
	if (count > 0 && slots == NULL) {
		free_names(names, count);
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	}
	for (i = 0; i < count; i++) {
		unsigned long long seq;

		if (!queue_name_seq(names[i], &seq) ||
		    (q->fd >= 0 && strcmp(names[i], q->name) == 0)) {
			free(names[i]);
			continue;
		}
		if (seq > *max)
			*max = seq;
		slots[*n].name = names[i];
		slots[*n].seq = seq;
		(*n)++;
	}
	free(names);	/* the names kept live on in slots */
	if (*n > 1)
		qsort(slots, *n, sizeof(*slots), slot_cmp);
	*out = slots;
	return 0;
}

static void queue_slots_free(struct queue_slot *slots, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(slots[i].name);
		entry_free(&slots[i].e);
	}
	free(slots);
}

/*
 * Loads slot s: 1 when its entry is live (s->e filled), 0 when it is not:
 * abandoned (its kernel lock is free: with gc, where the caller holds
 * .coordination LOCK_EX so that no entry is being made, it is unlinked and
 * counted in *abandoned) or not a private regular file or not an entry
 * (passed over: never trusted, never removed here).
 */
static int queue_load(struct local_queue *q, struct queue_slot *s, bool gc,
		      size_t *abandoned)
{
	char *buf;
	struct stat st;
	ssize_t len;
	size_t cap;
	int fd;

	if (s->state != 0)
		return s->state > 0;
	s->state = -1;
	fd = fsx_openat(q->dir_fd, s->name, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077) != 0) {
		fsx_close(fd);
		return 0;
	}
	if (fsx_flock(fd, LOCK_SH | LOCK_NB) == 0) {
		fsx_close(fd);
		if (abandoned != NULL)
			(*abandoned)++;
		if (gc)
			unlinkat(q->dir_fd, s->name, 0);
		return 0;
	}
	/* Sized by the file: most entries name one short path. */
	cap = st.st_size > 0 && st.st_size < QUEUE_ENTRY_MAX ? (size_t)st.st_size + 1 :
		QUEUE_ENTRY_MAX;
	buf = malloc(cap);
	len = buf != NULL ? fsx_read_all(fd, buf, cap) : -1;
	fsx_close(fd);
	if (len > 0 && queue_parse(buf, (size_t)len, &s->e)) {
		snprintf(s->e.name, sizeof(s->e.name), "%s", s->name);
		s->e.seq = s->seq;
		s->e.dev = st.st_dev;
		s->e.ino = st.st_ino;
		s->state = 1;
	}
	free(buf);
	if (s->state <= 0)
		entry_free(&s->e);
	return s->state > 0;
}

/* Whether two waiters' workspaces nest: by canonical path, or by identity
 * (filesystem and path inside it) when both are known. */
static bool queue_overlap(const char *ws_a, const char *fs_a, const char *fsp_a,
			  const char *ws_b, const char *fs_b, const char *fsp_b)
{
	if (wspath_within(ws_a, ws_b) || wspath_within(ws_b, ws_a))
		return true;
	return fs_a[0] != '\0' && fs_b[0] != '\0' && strcmp(fs_a, fs_b) == 0 &&
	       (wspath_within(fsp_a, fsp_b) || wspath_within(fsp_b, fsp_a));
}

/* The first workspace of a that nests with one of b's (0-based), or -1. */
static long queue_conflict_at(const struct queue_entry *a, const struct queue_entry *b)
{
	const char *wa, *fa, *pa, *wb, *fb, *pb;

	for (size_t i = 0; i <= a->n_more; i++) {
		entry_ws(a, i, &wa, &fa, &pa);
		for (size_t j = 0; j <= b->n_more; j++) {
			entry_ws(b, j, &wb, &fb, &pb);
			if (queue_overlap(wa, fa, pa, wb, fb, pb))
				return (long)i;
		}
	}
	return -1;
}

/* Whether two entries conflict: some workspace of one nests with some
 * workspace of the other (an entry for several workspaces stands in each
 * of their queues at once, at one SEQ). */
static bool queue_conflict(const struct queue_entry *a, const struct queue_entry *b)
{
	if (a->mode == QUEUE_SHARED && b->mode == QUEUE_SHARED)
		return false;
	return queue_conflict_at(a, b) >= 0;
}

/* Whether the waiter of entry e is stopped (SIGSTOP, Ctrl-Z): by its pid
 * when it is in our pid namespace, else by the pid /proc/locks names for
 * its kernel lock (0 when invisible: not known to be stopped). */
bool queue_stopped_pid(long pid, const char *pidns, dev_t dev, ino_t ino)
{
	static char ours[WSL_PIDNS_MAX + 1];	/* this process's, read once */
	struct stat st;

	if (ours[0] == '\0' && platform_pid_namespace(0, ours) != 0)
		ours[0] = '\0';
	if (ours[0] != '\0' && strcmp(ours, pidns) == 0)
		return pid_stopped(pid);
	memset(&st, 0, sizeof(st));
	st.st_dev = dev;
	st.st_ino = ino;
	pid = flock_holder(&st);
	return pid > 0 && pid_stopped(pid);
}

static bool queue_stopped(const struct queue_entry *e)
{
	return queue_stopped_pid(e->pid, e->pidns, e->dev, e->ino);
}

/* Wakes the waiters sleeping on entry name: an open for writing and its
 * close (IN_CLOSE_WRITE); the bytes are not touched. */
static void queue_poke(struct local_queue *q, const char *name)
{
	int fd = fsx_openat(q->dir_fd, name, O_WRONLY | O_NONBLOCK | O_NOCTTY, 0);

	fsx_close(fd);
}

/* Whether a lock that a waiter in the chain C waits for (a lock on, above
 * or below the workspace of an entry of C) is one this acquire runs inside
 * (reg->inside, from o's pid): then queuing behind C would wait for
 * itself. */
/* reg->inside for lock e, remembered per lock (its key and live file:
 * a fresh live file is another lock), since the proof reads /proc. */
static bool inside_lock(struct registry *reg, struct local_queue *q,
			const struct lock_entry *e, pid_t from)
{
	size_t i, slot;

	if (e->state != LOCK_HELD)
		return false;
	for (i = 0; i < q->n_proofs && i < QUEUE_PROOFS; i++)
		if (q->proofs[i].live_ino == e->live_ino && strcmp(q->proofs[i].key, e->key) == 0)
			return q->proofs[i].inside;
	slot = q->n_proofs++ % QUEUE_PROOFS;
	snprintf(q->proofs[slot].key, sizeof(q->proofs[slot].key), "%s", e->key);
	q->proofs[slot].live_ino = e->live_ino;
	q->proofs[slot].inside = reg->inside(e, from);
	return q->proofs[slot].inside;
}

static bool queue_chain_inside(struct registry *reg, struct local_queue *q,
			       const struct owner *o, const struct queue_slot *slots,
			       const bool *in_chain, size_t n)
{
	struct wsl_error ignored = { 0 };
	size_t i, j;

	if (reg->inside == NULL)
		return false;
	for (i = 0; i < n; i++) {
		bool seen = false;

		if (!in_chain[i])
			continue;
		/* Waiters for one workspace meet the same locks. */
		for (j = i + 1; j < n && !seen; j++)
			seen = in_chain[j] && slots[i].e.n_more == 0 &&
			       strcmp(slots[j].e.workspace, slots[i].e.workspace) == 0;
		if (seen)
			continue;
		for (size_t w = 0; w <= slots[i].e.n_more; w++) {
			const char *ws, *fs, *fspath;
			char key[WSL_KEY_HEX + 1];
			struct overlap *ov = NULL;
			struct lock_entry e;
			size_t m = 0;
			bool inside = false;

			entry_ws(&slots[i].e, w, &ws, &fs, &fspath);
			crypto_path_key(ws, key);
			if (local_get_key(reg, key, false, &e, &ignored) == 0) {
				inside = inside_lock(reg, q, &e, o->pid);
				lock_entry_free(&e);
			}
			if (!inside && local_overlaps(reg, ws, false, &ov, &m, &ignored) == 0)
				for (j = 0; j < m && !inside; j++)
					inside = inside_lock(reg, q, &ov[j].entry, o->pid);
			lock_overlaps_free(ov, m);
			wsl_error_clear(&ignored);
			if (inside)
				return true;
		}
	}
	return false;
}

/* Our own side of the conflict test, as an entry for the n workspaces
 * of os[0..n) (one entry for all: it stands in every queue they need at
 * one SEQ) in reg's mode; with full, also what only our own entry needs
 * (pid namespace, arrival time). -1 (errno ENOMEM) when out of memory;
 * entry_free it. */
static int queue_self(const struct registry *reg, const struct owner *os, size_t n,
		      struct queue_entry *me, bool full)
{
	memset(me, 0, sizeof(*me));
	me->mode = reg->acquire_shared ? QUEUE_SHARED : QUEUE_EXCLUSIVE;
	me->pid = (long)getpid();
	snprintf(me->workspace, sizeof(me->workspace), "%s", os[0].workspace_root);
	if (!owner_identity(&os[0], os[0].workspace_root, me->fs, me->fspath))
		me->fs[0] = me->fspath[0] = '\0';
	if (n > 1) {
		me->more = calloc(n - 1, sizeof(*me->more));
		if (me->more == NULL)
			return -1;
		me->n_more = n - 1;
	}
	for (size_t i = 1; i < n; i++) {
		struct queue_ws *w = &me->more[i - 1];

		snprintf(w->workspace, sizeof(w->workspace), "%s", os[i].workspace_root);
		if (!owner_identity(&os[i], os[i].workspace_root, w->fs, w->fspath))
			w->fs[0] = w->fspath[0] = '\0';
	}
	if (!full)
		return 0;
	if (platform_pid_namespace(0, me->pidns) != 0)
		me->pidns[0] = '\0';
	platform_now_iso(me->since);
	return 0;
}

/* Appends the NUL-terminated field f to buf (len bytes so far). */
static void queue_put(char *buf, size_t *len, const char *f)
{
	size_t l = strlen(f) + 1;

	memcpy(buf + *len, f, l);
	*len += l;
}

/* Joins the queue as SEQ seq; the caller holds .coordination LOCK_EX. */
static int queue_join(struct registry *reg, struct local_queue *q,
		      const struct owner *os, size_t n, unsigned long long seq,
		      struct wsl_error *err)
{
	char rnd[9], name[QUEUE_NAME_MAX], pid[24];
	char *buf;
	struct queue_entry me;
	size_t len = 0;
	int fd;

	if (queue_open_dir(reg, q, true, err) != 0)
		return -1;
	crypto_random_hex(rnd, 4);
	snprintf(name, sizeof(name), "%0*llu.%ld.%s", QUEUE_SEQ_DIGITS, seq,
		 (long)getpid(), rnd);
	fd = fsx_openat(q->dir_fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOCTTY, 0600);
	if (fd < 0)
		return wsl_error_errno(err, WSL_IO, errno, "cannot create %s/%s/%s",
				       reg->path, QUEUE_DIR, name);
	CRASH_POINT("queue:created");
	memset(&me, 0, sizeof(me));
	buf = malloc(QUEUE_ENTRY_MAX);
	if (buf == NULL || fsx_flock(fd, LOCK_EX | LOCK_NB) != 0 ||
	    queue_self(reg, os, n, &me, true) != 0) {
		wsl_error_errno(err, WSL_IO, buf == NULL || errno == ENOMEM ? ENOMEM : errno,
				"cannot lock %s/%s/%s", reg->path, QUEUE_DIR, name);
		goto fail;
	}
	snprintf(pid, sizeof(pid), "%ld", me.pid);
	{
		const char *fields[] = { QUEUE_MAGIC,
					 me.mode == QUEUE_SHARED ? "shared" : "exclusive",
					 pid, me.pidns, me.since,
					 me.fs, me.fspath, me.workspace };
		for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
			queue_put(buf, &len, fields[i]);
		/* Several workspaces: one entry for all of them, so that it
		 * takes its place in each of their queues at once. */
		for (size_t i = 0; i < me.n_more; i++) {
			queue_put(buf, &len, me.more[i].fs);
			queue_put(buf, &len, me.more[i].fspath);
			queue_put(buf, &len, me.more[i].workspace);
		}
	}
	entry_free(&me);
	if (fsx_write_all(fd, buf, len) != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot write %s/%s/%s", reg->path,
				QUEUE_DIR, name);
		goto fail;
	}
	free(buf);
	CRASH_POINT("queue:joined");
	q->fd = fd;
	q->seq = seq;
	snprintf(q->name, sizeof(q->name), "%s", name);
	return 0;
fail:
	entry_free(&me);
	free(buf);
	unlinkat(q->dir_fd, name, 0);
	fsx_close(fd);
	return -1;
}

void queue_leave(struct registry *reg)
{
	struct local_queue *q = loc(reg)->queue;

	if (q == NULL || q->fd < 0)
		return;
	/* Unlinked while still locked, so no scan takes the name for
	 * abandoned and a later entry of the same name is never ours to
	 * unlink; the close then wakes the waiter behind. */
	unlinkat(q->dir_fd, q->name, 0);
	CRASH_POINT("queue:left");
	fsx_close(q->fd);
	q->fd = -1;
	q->name[0] = '\0';
}

/* Whether o's holder is in this process's pid space (host and pid
 * namespace), where its pid can be watched. */
static bool holder_here(const struct owner *o)
{
	char host[WSL_HOST_MAX + 1], ns[WSL_PIDNS_MAX + 1];

	return platform_hostname(host) == 0 && strcmp(host, o->host) == 0 &&
	       platform_pid_namespace(0, ns) == 0 &&
	       strcmp(ns, o->has_pid_namespace ? o->pid_namespace : WSL_PIDNS_INITIAL) == 0;
}

/* Records the lock conflict c as what to sleep on. */
static void queue_target_lock(struct local_queue *q, const struct lock_entry *c)
{
	q->target = TARGET_NONE;
	if (c->state == LOCK_FREE || c->queued)
		return;
	q->target = TARGET_LOCK;
	snprintf(q->t_key, sizeof(q->t_key), "%s", c->key);
	snprintf(q->t_holder_dir, sizeof(q->t_holder_dir), "%s", c->holder);
	q->t_live = c->live_held;
	q->t_live_ino = c->live_ino;
	q->t_nested = c->nested_held;
	q->t_pid_watch = c->has_owner && !c->live_held && !c->nested_held &&
			 c->liveness == LIVENESS_LIVE && holder_here(&c->owner);
	q->t_holder = c->has_owner ? c->owner.pid : 0;
	q->t_has_ticks = c->has_owner && c->owner.has_start_ticks;
	q->t_ticks = c->has_owner ? c->owner.start_ticks : 0;
}

/* The chain of waiters an acquire would wait for, from slots[nearest]
 * (the nearest conflicting waiter ahead) back to the head: each entry
 * ahead that conflicts with us or with a later member (in_chain). Loads
 * what it needs; stopped waiters are left out. */
static void queue_chain(struct local_queue *q, struct queue_slot *slots, size_t nearest,
			const struct queue_entry *me, bool *in_chain)
{
	in_chain[nearest] = true;
	for (size_t i = nearest; i-- > 0;) {
		bool chained;

		if (!queue_load(q, &slots[i], true, NULL))
			continue;
		chained = queue_conflict(me, &slots[i].e);
		for (size_t j = i + 1; j <= nearest && !chained; j++)
			chained = in_chain[j] && queue_conflict(&slots[j].e, &slots[i].e);
		in_chain[i] = chained && !queue_stopped(&slots[i].e);
	}
}

/* Makes *conflict describe the waiter e queued ahead (a free workspace),
 * naming e's workspace that nests with one of me's. */
static void queued_conflict(struct lock_entry *conflict, const struct queue_entry *e,
			    const struct queue_entry *me)
{
	const char *ws, *fs, *fspath;
	long at = queue_conflict_at(e, me);

	entry_ws(e, at > 0 ? (size_t)at : 0, &ws, &fs, &fspath);
	lock_entry_free(conflict);
	conflict->state = LOCK_HELD;
	conflict->queued = true;
	conflict->probed = true;
	conflict->liveness = LIVENESS_LIVE;
	snprintf(conflict->workspace_root, sizeof(conflict->workspace_root), "%s", ws);
	crypto_path_key(ws, conflict->key);
	conflict->owner.pid = (pid_t)e->pid;
	snprintf(conflict->owner.acquired_at, sizeof(conflict->owner.acquired_at), "%s", e->since);
	snprintf(conflict->reason, sizeof(conflict->reason),
		 "pid %ld waits in the queue for %s and arrived first (since %s)",
		 e->pid, ws, e->since);
}

/* A queued conflict on a workspace that readers hold (a reader that
 * could join them but for the waiter): names them in conflict->behind,
 * so that the message says who holds it, then the waiter. Best effort:
 * a lock that cannot be read leaves it NULL ("nobody yet"). */
static void queued_behind(struct registry *reg, struct lock_entry *conflict)
{
	struct lock_entry held = { 0 };
	struct wsl_error ignored = { 0 };
	char key[WSL_KEY_HEX + 1], who[1200];
	size_t len;

	crypto_path_key(conflict->workspace_root, key);
	if (local_get_key(reg, key, false, &held, &ignored) == 0 && held.state == LOCK_FREE)
		identity_self(reg, conflict->workspace_root, key, false, &held, &ignored);
	wsl_error_clear(&ignored);
	if (held.state == LOCK_HELD && held.has_owner) {
		lockrules_describe_holder(&held, who, sizeof(who));
		len = strlen(who);
		if (held.n_holders > 1)
			snprintf(who + len, sizeof(who) - len, " and %zu other reader%s",
				 held.n_holders - 1, held.n_holders > 2 ? "s" : "");
		conflict->behind = strdup(who);
	}
	lock_entry_free(&held);
}

int queue_check(struct registry *reg, const struct owner *os, size_t n_os,
		struct lock_entry *conflict, struct wsl_error *err)
{
	const struct owner *o = &os[0];
	struct local_queue *q = queue_state(reg);
	struct queue_slot *slots = NULL;
	struct wsl_error jerr = { 0 };
	struct queue_entry me;
	unsigned long long max = 0;
	size_t n = 0, i, nearest = 0;
	bool found = false;

	if (q == NULL)
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	q->own_pid = o->pid;
	q->own_has_ticks = o->has_start_ticks;
	q->own_ticks = o->start_ticks;
	if (queue_open_dir(reg, q, false, err) != 0 ||
	    queue_slots(reg, q, &slots, &n, &max, err) != 0)
		return -1;
	if (queue_self(reg, os, n_os, &me, false) != 0) {
		queue_slots_free(slots, n);
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	}
	/* The nearest live, running waiter ahead whose workspace conflicts
	 * (every entry is ahead of one not queued yet). */
	for (i = n; i-- > 0 && !found;) {
		if ((q->fd >= 0 && slots[i].seq >= q->seq) ||
		    !queue_load(q, &slots[i], true, NULL) || !queue_conflict(&me, &slots[i].e))
			continue;
		if (queue_stopped(&slots[i].e)) {
			queue_poke(q, slots[i].name);	/* pass it, and wake the ones behind it */
			continue;
		}
		found = true;
		nearest = i;
	}
	/* Asked once per entry slept on (it reads every lock the chain
	 * meets): a waiter behind W stays behind W until W leaves. */
	if (found && strcmp(q->inside_of, slots[nearest].name) != 0) {
		bool *in_chain = calloc(n, sizeof(*in_chain));

		snprintf(q->inside_of, sizeof(q->inside_of), "%s", slots[nearest].name);
		q->inside = false;
		if (in_chain != NULL) {
			queue_chain(q, slots, nearest, &me, in_chain);
			q->inside = queue_chain_inside(reg, q, o, slots, in_chain, nearest + 1);
		}
		free(in_chain);
	}
	if (found && !q->inside) {
		const struct queue_entry *p = &slots[nearest].e;

		q->target = TARGET_ENTRY;
		snprintf(q->t_name, sizeof(q->t_name), "%s", p->name);
		q->t_dev = p->dev;
		q->t_ino = p->ino;
		q->t_pid = p->pid;
		snprintf(q->t_pidns, sizeof(q->t_pidns), "%s", p->pidns);
		if (conflict->state == LOCK_FREE) {
			queued_conflict(conflict, p, &me);
			queued_behind(reg, conflict);
		}
	} else {
		/* No waiter ahead, or it would wait for itself: only real
		 * locks count (the deadlock rule atop local_wait.c). */
		queue_target_lock(q, conflict);
	}
	queue_slots_free(slots, n);
	entry_free(&me);
	/* Joined only to wait: at a conflict, once the caller prepared a
	 * wait, or said it will wait (reg->queue_early) and the conflict is
	 * one that waiting can end (a live or unknown holder, a waiter: a
	 * dead, retained or corrupt lock is refused, changing nothing). A
	 * queue that cannot be joined still lets it wait, unordered. */
	if ((q->join || (reg->queue_early &&
			 (conflict->queued || (conflict->state == LOCK_HELD &&
					       conflict->liveness != LIVENESS_DEAD)))) &&
	    q->fd < 0 && conflict->state != LOCK_FREE &&
	    queue_join(reg, q, os, n_os, max + 1, &jerr) != 0)
		wsl_error_clear(&jerr);
	return 0;
}

int queue_list(struct registry *reg, const char *workspace,
	       struct lock_entry **out, size_t *n, struct wsl_error *err)
{
	struct local_queue *q = queue_state(reg);
	struct queue_slot *slots = NULL;
	struct queue_entry me = { 0 };
	unsigned long long max = 0;
	size_t ns = 0, i;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (q == NULL)
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	if (queue_open_dir(reg, q, false, err) != 0 ||
	    queue_slots(reg, q, &slots, &ns, &max, err) != 0)
		return -1;
	/* an exclusive newcomer for workspace: every waiter it conflicts with */
	me.mode = QUEUE_EXCLUSIVE;
	snprintf(me.workspace, sizeof(me.workspace), "%s", workspace);
	if (!owner_identity(NULL, workspace, me.fs, me.fspath))
		me.fs[0] = me.fspath[0] = '\0';
	for (i = 0; i < ns; i++) {
		struct lock_entry *more;

		if (!queue_load(q, &slots[i], false, NULL) || !queue_conflict(&me, &slots[i].e) ||
		    queue_stopped(&slots[i].e))
			continue;
		more = realloc(*out, (*n + 1) * sizeof(**out));
		if (more == NULL) {
			rc = wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
			break;
		}
		*out = more;
		memset(&more[*n], 0, sizeof(more[*n]));
		queued_conflict(&more[*n], &slots[i].e, &me);
		more[*n].shared = slots[i].e.mode == QUEUE_SHARED;
		(*n)++;
	}
	queue_slots_free(slots, ns);
	if (rc != 0) {
		for (i = 0; i < *n; i++)
			lock_entry_free(&(*out)[i]);
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

void queue_poke_stopped(struct registry *reg)
{
	struct local_queue *q = queue_state(reg);
	struct wsl_error ignored = { 0 };
	struct queue_slot *slots = NULL;
	unsigned long long max;
	size_t n = 0, i;

	/* From the head: every stopped waiter up to the first running one
	 * (a poke wakes the waiters sleeping on it; the ones behind a
	 * running waiter are its to wake). No collection: this runs
	 * without .coordination. */
	if (q == NULL || queue_open_dir(reg, q, false, &ignored) != 0 || q->dir_fd < 0 ||
	    queue_slots(reg, q, &slots, &n, &max, &ignored) != 0) {
		wsl_error_clear(&ignored);
		return;
	}
	for (i = 0; i < n; i++) {
		if (!queue_load(q, &slots[i], false, NULL))
			continue;
		if (!queue_stopped(&slots[i].e))
			break;
		queue_poke(q, slots[i].name);
	}
	queue_slots_free(slots, n);
}

int queue_garbage(struct registry *reg, bool remove, size_t *n, struct wsl_error *err)
{
	struct local_queue *q = queue_state(reg);
	struct queue_slot *slots = NULL;
	unsigned long long max;
	size_t count = 0, i;

	if (q == NULL)
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	if (queue_open_dir(reg, q, false, err) != 0 ||
	    queue_slots(reg, q, &slots, &count, &max, err) != 0)
		return -1;
	for (i = 0; i < count; i++)
		queue_load(q, &slots[i], remove, n);
	queue_slots_free(slots, count);
	return 0;
}
