/* registry_etcd.h - internal to the etcd backend: the state and the
 * functions its files share (registry_etcd.c: keys, documents, waiting,
 * keepalive, open and close, with the key layout and the invariants atop
 * it; registry_etcd_read.c: reading locks; registry_etcd_write.c: acquire,
 * release, retain, take-over); registry_etcd_shared.c and
 * registry_etcd_shared_leave.c: shared locks; registry_etcd_multi.c:
 * several workspaces at once). Nothing else includes it: the rest of
 * wslock sees the backend through etcd_registry_open (registry_backend.h).
 *
 * Every function that can fail returns -1 with err filled, as the registry
 * contract's functions do.
 */
#ifndef WSLOCK_REGISTRY_ETCD_H
#define WSLOCK_REGISTRY_ETCD_H

#include "registry_backend.h"
#include "etcd.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define PREFIX_MAX 256			/* bytes of the key prefix */
#define KEY_MAX (PREFIX_MAX + 16 + PATH_MAX)
#define DEPTH_MAX 100			/* ancestors compared in one txn
					 * (etcd allows 128 operations) */
#define READ_CHUNK 30			/* workspaces read per txn (4 ranges each) */
#define KINDS 4				/* keys per workspace: see the top */
#define WAIT_SLICE_MS 1000		/* a watch cannot be interrupted: slices */

struct key {
	char b[KEY_MAX];
	size_t len;
};

struct etcd_state {
	struct etcd_client *c;
	char prefix[PREFIX_MAX + 1];
	size_t prefix_len;
	long long ttl_s;		/* the holder's TTL: its deadline, s */
	long long delay_s;		/* lock-delay: the lease lasts ttl + this */
	long long lease;		/* granted lease, 0: none */
	long long lease_sent_ms;	/* CLOCK_MONOTONIC send time of its
					 * last successful grant or renewal */
	bool lease_used;		/* a lock's live key is bound to it */
	bool lease_fresh;		/* bound by the last acquire or take-over,
					 * not renewed since: no check needed */
	pid_t pid;			/* the process that opened c: a keeper
					 * (a forked child) opens its own */
	char endpoints[ETCD_MAX_ENDPOINTS * 1100];
	long timeout_ms;
	const char *cacert, *cert, *key;	/* TLS files, or NULL */
	char user[256];				/* "": no etcd auth */
	char password[256];
	char lease_token[WSL_TOKEN_HEX + 1];	/* that lock's owner */
	char *held_value;		/* the bytes and create revision of the */
	size_t held_len;		/* lock this process acquired (token */
	long long held_create;		/* held_token): released without a read */
	char held_token[WSL_TOKEN_HEX + 1];
	char lease_ws[PATH_MAX];
	long long last_rev;		/* header revision of the last read */
	/* waiting (registry_etcd_queue.c) */
	const struct owner *want;	/* the owners of the acquire in progress */
	size_t want_n;			/* (several workspaces at once: n) */
	bool want_shared;		/* it is a shared one (--shared): its queue
					 * key is P "queue+" (registry_etcd_queue.c) */
	bool held_shared;		/* the lock this process acquired is one
					 * reader's (registry_etcd_shared.c) */
	bool queued;			/* queue_key is ours, on queue_lease */
	long long queue_lease;
	struct key queue_key;
	struct key wait_key;		/* what etcd_wait watches ("": all locks) */
	struct key ahead_key;		/* the waiter ahead, as last seen */
	struct key stale_key;		/* a waiter ahead that stopped renewing:
					 * passed (registry_etcd_queue.c) */
	long long stale_lease;		/* its lease: all its keys are passed */
	bool wait_head;			/* it is the holder's lock key: no
					 * waiter was ahead when it was read */
	long long wait_rev;		/* from this revision on */
	bool lease_for_pid;		/* the lease is an acquire's: its keeper
					 * watches the holder pid (registry.h) */
	int nest_fd;			/* the outer run's own open of its nested
					 * runs' file, or -1 (registry_etcd_nest.c) */
	struct etcd_set *set;		/* the several workspaces this process
					 * acquired at once, or NULL
					 * (registry_etcd_multi.c) */
};

/* Several workspaces acquired at once (registry_etcd_multi.c): one token,
 * one lease, one create revision. */
struct etcd_set {
	size_t n;			/* 2..REGISTRY_MULTI_MAX */
	struct owner *os;		/* n owners, in argument order */
	char **vals;			/* their stored bytes */
	size_t *lens;
	long long create;		/* the create revision of every lock key */
	size_t retained;		/* how many of them were retained so far */
};

/* What a lock entry does not say about its key. */
struct kv_meta {
	long long create_rev;
	long long lease;		/* the owner key's (0.1), 0: none */
	long long live_lease;		/* named by the lease key, 0: none */
	bool lease_for_pid;		/* the lease key says: an acquire's */
};

static inline struct etcd_state *state(struct registry *reg)
{
	return reg->backend;
}

enum { K_LOCK, K_RETAINED, K_LEASE, K_LIVE };
extern const char *const kind_names[KINDS];	/* the key of each K_* */

/* ---- registry_etcd.c: keys and documents ---- */

/* P kind path into k; -1 (WSL_UNSAFE_PATH) when too long. */
int key_make(const struct etcd_state *s, const char *kind,
	     const char *path, struct key *k, struct wsl_error *err);
/* Bounds the requests of the operation that starts (DESIGN.md 5b: never
 * longer than -w/-n allow): by dl (acquire, run) or else by the bound of
 * registry_coord_bound (release, recover, reclaim), made no earlier than
 * one --etcd-timeout per endpoint from now (ms: timeout x endpoints), so
 * that -n, -w 0, a short -w and the attempt at the -w deadline still give
 * every endpoint one full request, moving on from one that times out; neither: by
 * nothing but the timeout of each request. */
void etcd_bound_requests(struct registry *reg, const struct registry_deadline *dl);
/* Records rev as the last header revision seen (waits start there). */
void note_rev(struct etcd_state *s, long long rev);
/* The stored form of an owner document: owner_format and '\n', *len bytes
 * (no NUL). NULL when it cannot be formatted. */
char *owner_bytes(const struct owner *o, size_t *len);
/* n bytes at p as a new NUL-terminated buffer; NULL: out of memory. */
char *dup_bytes(const char *p, size_t n);
/* Whether a and b are present and hold the same bytes. */
bool same_bytes(const char *a, size_t alen, const char *b, size_t blen);
/* The lease key's value for token's lock on lease (malloc'd JSON text);
 * for_pid: kept by an acquire's keeper ("keeper":"acquire"), else by a
 * running wslock ("keeper":"run"). */
char *lease_doc(const struct etcd_state *s, const char *token, long long lease,
		bool for_pid);
/* True when the lease key kv names token; its lease id goes to *lease,
 * its lock-delay (s) to *delay_s, whether an acquire's keeper keeps it to
 * *for_pid (a document without "keeper", written before 0.2.0 had
 * acquire keepers, is a run's). */
bool lease_doc_names(const struct etcd_kv *kv, const char *token,
		     long long *lease, long long *delay_s, bool *for_pid);

/* ---- registry_etcd.c: clients and the holder's check ---- */

/* A client for s's endpoints with its TLS files and user. */
int client_new(struct etcd_state *s, struct etcd_client **out,
	       struct wsl_error *err);
/* 0 when o's lock still holds o's exact bytes and its live key; else
 * WSL_OWNERSHIP_LOST. A read that fails proves nothing: 0. */
int check_own(struct etcd_state *s, const struct owner *o,
	      struct wsl_error *err);

/* ---- registry_etcd_read.c ---- */

/* Fills e (and *m) for workspace path from its keys kv[K_*] (NULL:
 * absent); a shared lock's marker gives e->shared with no holders yet
 * (shared_load reads them). */
int fill_entry(const char *path, const struct etcd_kv *const kv[KINDS],
	       bool probe, struct lock_entry *e, struct kv_meta *m,
	       struct wsl_error *err);

/* Reads path's lock into *e (and *m); with probe, its liveness too. */
int read_entry(struct etcd_state *s, const char *path, bool probe,
	       struct lock_entry *e, struct kv_meta *m, struct wsl_error *err);
/* read_entry for paths[0..n) into e[0..n) and m[0..n): READ_CHUNK
 * workspaces per transaction, each chunk at one revision. */
int read_entries(struct etcd_state *s, const char *const *paths, size_t n,
		 bool probe, struct lock_entry *e, struct kv_meta *m,
		 struct wsl_error *err);
/* The number of components of path. */
size_t depth_of(const char *path);
/* registry_ops.get, .get_chain, .overlaps and .list (registry.h,
 * registry_backend.h). */
int etcd_get(struct registry *reg, const char *workspace, bool probe,
	     struct lock_entry *e, struct wsl_error *err);
int etcd_overlaps(struct registry *reg, const char *workspace, bool probe,
		  struct overlap **out, size_t *n, struct wsl_error *err);
/* etcd_overlaps, and with self the workspace's own lock into *self and
 * *self_m (read in the ancestors' transaction: two requests in all). */
int etcd_read_around(struct registry *reg, const char *workspace, bool probe,
		     struct lock_entry *self, struct kv_meta *self_m,
		     struct overlap **out, size_t *n, struct wsl_error *err);
int etcd_get_chain(struct registry *reg, const char *workspace, bool probe,
		   struct lock_entry **out, size_t *n, struct wsl_error *err);
int etcd_list(struct registry *reg, bool probe,
	      int (*fn)(const struct lock_entry *e, void *arg), void *arg,
	      struct wsl_error *err);
/* registry_ops.journal: the values of the keys P "journal/", one line
 * each, in key (time) order. */
int etcd_journal(struct registry *reg, char **buf, size_t *len,
		 struct wsl_error *err);

/* ---- registry_etcd_write.c ---- */

/* A liveness lease (TTL + lock-delay) in s->lease, granted, or renewed
 * when a third of its TTL has passed since its last renewal. */
int lease_ready(struct etcd_state *s, struct wsl_error *err);
/* Forgets the lock this process acquired (frees held_value). */
void held_forget(struct etcd_state *s);
/* registry_ops.try_acquire, .release, .retain and .take_over (registry.h). */
int etcd_try_acquire(struct registry *reg, const struct owner *o,
		     const struct registry_deadline *dl, int *live_fd,
		     struct lock_entry *conflict, struct wsl_error *err);
int etcd_release(struct registry *reg, const char *workspace,
		 const char *token, struct owner *released,
		 struct wsl_error *err);
int etcd_retain(struct registry *reg, const char *workspace,
		const char *token, const char *json, struct wsl_error *err);
int etcd_take_over(struct registry *reg, const char *workspace,
		   const struct registry_expect *x, const struct owner *next,
		   int *live_fd, struct lock_entry *prior,
		   struct wsl_error *err);

/* Whether a transport error left the outcome of a write unknown. */
bool outcome_unknown(const struct wsl_error *err);
/* Records the lease as bound to o's lock (s->lease_token, lease_ws). */
void lease_bind(struct registry *reg, const struct owner *o);
/* Forgets the lease bound to token's lock; with revoke, revokes it. */
void lease_drop(struct etcd_state *s, const char *token, bool revoke);
/* Remembers the lock just acquired: o's bytes value (len bytes) and the
 * create revision of its key, so that its release needs no read. */
void held_note(struct etcd_state *s, const struct owner *o,
	       const char *value, size_t len, long long create);
/* The two operations that give o's lock its liveness keys lease_k and
 * live_k (keeper) or delete them (no keeper), into ops[0..2); *doc: the
 * lease key's value, to free. */
int liveness_ops(struct etcd_state *s, const struct owner *o, bool keeper,
		 const struct key *lease_k, const struct key *live_k,
		 struct etcd_op ops[2], char **doc, struct wsl_error *err);
/* The compares "no lock overlaps ws" (CREATE == 0 on self, every proper
 * ancestor's lock key, then the range below ws ending at dend, a buffer
 * of KEY_MAX bytes) into cmp[] with their keys in keys[] (depth + 2
 * each); returns their number, or -1 with err. */
int lock_compares(struct etcd_state *s, const char *ws, const struct key *self,
		  struct etcd_compare *cmp, struct key *keys, char *dend,
		  struct wsl_error *err);
/* The compare-and-swap guard of a lock read as e/m into cmp[0..2): VALUE
 * equal to e's bytes and CREATE equal to m's create revision. */
void guard(struct etcd_compare cmp[2], const struct key *k,
	   const struct lock_entry *e, const struct kv_meta *m);
/* The journal line of a take-over (journal_format's, '\n' terminated),
 * *len bytes, malloc'd; NULL when it cannot be formatted. */
char *journal_line(const char *action, const char *workspace,
		   const struct registry_expect *x, const struct lock_entry *e,
		   const struct owner *next, size_t *len);

/* ---- registry_etcd_shared.c: shared locks (the layout atop it); the
 * release, retain and take-over of a reader in registry_etcd_shared_leave.c */

/* Whether the n bytes at v are a shared lock's marker (the value of its
 * P "lock" W key). */
bool shared_marker(const char *v, size_t n);
/* Reads the holders of the shared lock of path into e (fill_entry set
 * e->shared): e becomes its representative holder (lockrules_representative)
 * with every holder in e->holders; LOCK_FREE when its marker went
 * meanwhile, LOCK_CORRUPT when it has no holder. */
int shared_load(struct etcd_state *s, const char *path, bool probe,
		struct lock_entry *e, struct wsl_error *err);
/* P "holder/" kind W "//" token into k (kind: a K_* index). */
int holder_key(const struct etcd_state *s, int kind, const char *ws,
	       const char *token, struct key *k, struct wsl_error *err);
/* registry_ops.try_acquire for reg->acquire_shared. */
int etcd_shared_acquire(struct registry *reg, const struct owner *o,
			const struct registry_deadline *dl, int *live_fd,
			struct lock_entry *conflict, struct wsl_error *err);
/* One reader of workspace leaves: the holder with token of the shared
 * lock e as read (NULL: the one this process acquired, s->held_*). The
 * last one takes the marker with it. Errors as registry_release. */
int etcd_shared_release(struct registry *reg, const char *workspace,
			const char *token, const struct lock_entry *e,
			struct owner *released, struct wsl_error *err);
/* registry_ops.retain of the reader with token of the shared lock e. */
int etcd_shared_retain(struct registry *reg, const char *workspace,
		       const char *token, const struct lock_entry *e,
		       const char *json, struct wsl_error *err);
/* registry_ops.take_over of the reader x names, of the shared lock read
 * into *prior (probed); *prior becomes that reader's entry. */
int etcd_shared_take_over(struct registry *reg, const char *workspace,
			  const struct registry_expect *x, const struct owner *next,
			  int *live_fd, struct lock_entry *prior,
			  struct wsl_error *err);

/* ---- registry_etcd_queue.c: FIFO waiting (the design atop it) ---- */

/* queue_ahead for a waiter of several workspaces os[0..n) at once: the
 * nearest waiter ahead overlapping any of them; *which gets the index of
 * the first of os it overlaps. */
int queue_ahead_set(struct etcd_state *s, const struct owner *os, size_t n,
		    struct lock_entry *ahead, size_t *which, struct wsl_error *err);
/* queue_put_op for each of os[0..n) on s->lease into ops[0..n), their
 * keys in keys[0..n) and values (to free, each NULL when not made) in
 * values[0..n); s->queue_key is left the first's. */
int queue_put_ops(struct etcd_state *s, const struct owner *os, size_t n,
		  struct etcd_op *ops, struct key *keys, char **values, struct wsl_error *err);
/* The compare "no waiter is queued at all" into *cmp (its key and range
 * end in *key and *end): the one a transaction too full for the
 * per-workspace ones makes instead. */
int queue_compare_all(const struct etcd_state *s, struct etcd_compare *cmp,
		      struct key *key, struct key *end, struct wsl_error *err);
/* P "queue" ws "//" lease into k: that waiter's key. */
int queue_key_lease(const struct etcd_state *s, const char *ws, long long lease,
		    struct key *k, struct wsl_error *err);
/* How many compares queue_compares makes for ws (at most depth_of(ws)). */
size_t queue_compares_room(const char *ws);
/* The compares "no waiter of a workspace overlapping ws is queued" into
 * cmp[], with their keys and range ends in keys[] and ends[] (each
 * queue_compares_room(ws) long); *n gets their number. */
int queue_compares(const struct etcd_state *s, const char *ws,
		   struct etcd_compare *cmp, struct key *keys, struct key *ends,
		   size_t *n, struct wsl_error *err);
/* Reads the queue: the nearest waiter ahead of o (all of them when o is
 * not queued) whose workspace overlaps o's goes to *ahead as a live
 * conflict, and etcd_wait will watch its key; LOCK_FREE when none. Puts
 * o's queue key again when its lease was lost. */
int queue_ahead(struct etcd_state *s, const struct owner *o, struct lock_entry *ahead,
		struct wsl_error *err);
/* A queued acquire's turn (s->queued): the lease renewed (lease_ready,
 * which keeps the place), then, unless it waited at the head, queue_ahead.
 * 1 with *conflict the live waiter ahead (its turn has not come), 0 its
 * turn, -1 with err. */
int queue_turn(struct etcd_state *s, const struct owner *o, struct lock_entry *conflict,
	       struct wsl_error *err);
/* The put of o's queue key on s->lease into *op (*value: its bytes, to
 * free), for a transaction that joins the queue; queue_joined once it
 * was applied. */
int queue_put_op(struct etcd_state *s, const struct owner *o, struct etcd_op *op,
		 char **value, struct wsl_error *err);
void queue_joined(struct etcd_state *s);
/* etcd_wait watches the lock key of workspace (a holder in the way) for
 * changes after rev: a revision at which the holder was there (the reads
 * that named it may be later than its release). */
void queue_watch_lock(struct etcd_state *s, const char *workspace, long long rev);
/* The queue key is gone (deleted with the acquire): not queued any more. */
void queue_left(struct etcd_state *s);
/* registry_ops.wait_prepare (puts the queue key of the acquire in
 * progress) and .wait (registry.h). */
int etcd_wait_prepare(struct registry *reg, struct wsl_error *err);
int etcd_wait(struct registry *reg, int sigfd, long timeout_ms, struct wsl_error *err);
/* registry_ops.wait_end: a waiter that did not get the lock (it gave up,
 * or it nests in the holder's lock) revokes its lease now, and its queue
 * key goes with it: nobody waits behind it meanwhile. */
void etcd_wait_end(struct registry *reg);

/* ---- registry_etcd_multi.c: several workspaces at once (the design
 * atop it) ---- */

/* registry_ops.try_acquire_multi and .release_multi (registry.h), for
 * 2..REGISTRY_MULTI_MAX workspaces. */
int etcd_try_acquire_multi(struct registry *reg, const struct owner *os, size_t n,
			   const struct registry_deadline *dl, int *live_fds,
			   struct lock_entry *conflict, size_t *which,
			   struct wsl_error *err);
int etcd_release_multi(struct registry *reg, const char *const *wss, size_t n,
		       const char *token, struct owner *released, struct wsl_error *err);
/* Whether s->set is the set of token's owners. */
bool set_names(const struct etcd_state *s, const char *token);
/* check_own for every lock of s->set (one read transaction): 0, or
 * WSL_OWNERSHIP_LOST naming the first workspace lost. */
int check_own_set(struct etcd_state *s, struct wsl_error *err);
/* Forgets s->set (frees it). */
void set_forget(struct etcd_state *s);

/* ---- registry_etcd_nest.c: runs nested under a run's lock ---- */

/* Makes the nested runs' file of the lock of token that this process
 * has just acquired for a run: *live_fd gets the descriptor its command
 * is to inherit (O_CLOEXEC), s->nest_fd an open of it of our own; -1 and
 * nothing when it cannot be made (nested runs are then not waited for). */
void etcd_nest_make(struct etcd_state *s, const char *token, int *live_fd);
/* registry_ops.nest_lock (registry.h). */
int etcd_nest_lock(struct registry *reg, const char *workspace, const char *token,
		   int op, int *fd, struct wsl_error *err);

/* ---- registry_etcd_watch.c: the holder's watch of its own keys ---- */

#define WATCH_MSG_MAX 400	/* bytes of the message of a loss */

/* registry_ops.watch_own (registry.h). */
int etcd_watch_own(struct registry *reg, const struct owner *o, int *fd,
		   struct wsl_error *err);

#endif
