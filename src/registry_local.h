/* registry_local.h - internal to the local backend: the state and the
 * functions its files share (registry_local.c, the on-disk protocol, whose
 * header comment describes the layout and the crash steps; local_open.c,
 * local_wait.c, local_queue.c, local_markers.c, local_list.c, local_garbage.c).
 * Nothing
 * outside these files includes it: the rest of wslock sees the backend through
 * registry_local_ops (registry_backend.h) and local_open (registry.h).
 *
 * Every function fails by returning -1 (or false where it returns bool,
 * as said) with err filled, as the registry contract's functions do.
 */
#ifndef WSLOCK_REGISTRY_LOCAL_H
#define WSLOCK_REGISTRY_LOCAL_H

#include "registry.h"
#include "registry_backend.h"
#include "platform.h"

#include <sys/stat.h>

#define STAGE_NAME_MAX 64
#define REGISTRY_FORMAT 3	/* the layout this binary writes (registry_local.c) */

/* Markers are hard links to the .marker file of their space (nest/,
 * ids/, idnest/), so that adding one allocates no inode, and their
 * directories stay when they empty (reclaim collects them): on ext4 an
 * inode made and freed per ancestor and per command cost more than the
 * rest of an uncontended run together. */
#define ID_MARKER ".marker"
/* Format 2's below marker by identity, ids/IA/KEY.below (KEY is below
 * IA); format 3 keeps it as idnest/IA/KEY. Still read where a crash in
 * the upgrade or a format 2 binary that opened the registry before it
 * left one (registry_local.c, "tmp"). */
#define ID_BELOW ".below"

struct local_queue;
struct local_prestage;

/* The local backend's own state (reg->backend): nobody else sees it. */
struct local {
	bool exists;		/* false: opened read-only and not there */
	int dir_fd, locks_fd, nest_fd, tmp_fd, coord_fd;
	int coord_held;		/* 0, LOCK_SH or LOCK_EX */
	struct local_queue *queue;	/* the wait queue (local_wait.c), or NULL */
	enum fs_kind fs_kind;	/* of the registry directory */
	int ids_fd;		/* ids/, the identity space (DESIGN.md section 3) */
	int idnest_fd;		/* idnest/, its markers of locks below (format 3) */
	int format;		/* 1 (0.1: staging in tmp/), 2, or REGISTRY_FORMAT */
	bool nest_made, ids_made, idnest_made;	/* a marker directory was created
						 * in nest/, ids/, idnest/ (so that
						 * directory needs its fsync) */
	bool below_left;	/* a mutation met a format 2 below marker in ids/ */
	struct local_prestage *pre;	/* REGISTRY_MULTI_MAX locks staged before
					 * .coordination (local_prestage.c), or NULL */
	const struct owner *pre_os;	/* the last attempt's locks (prestage_note) */
	size_t pre_n;
	bool pre_live;
	bool listing;		/* local_list runs: its entries go to readers,
				 * which need no live file identity (nest.c) */
};

static inline struct local *loc(const struct registry *reg)
{
	return reg->backend;
}

/* Whether s is a registry key: WSL_KEY_HEX lowercase hex digits. */
static inline bool key_valid(const char *s)
{
	return crypto_hex_valid(s, WSL_KEY_HEX);
}

/* ---- registry_local.c: the protocol core ---- */

/* Joins a and b with '/' into out (out may be a); fails with
 * WSL_UNSAFE_PATH when the result would not fit in PATH_MAX. */
int path_join(char out[PATH_MAX], const char *a, const char *b,
	      struct wsl_error *err);

/* Reads the lock locks/key into *e (LOCK_FREE when there is none; a lock
 * that cannot be read is LOCK_CORRUPT, not an error); with probe, asks
 * whether its holder lives. Without the coordination lock, a lock renamed
 * away meanwhile reads as free. Fails (-1) only on I/O errors. */
int local_get_key(struct registry *reg, const char *key, bool probe,
		  struct lock_entry *e, struct wsl_error *err);

/* Reads the lock (or shared holder) directory fd at dirpath into *e as
 * local_get_key does, key being the lock's key, without the check that
 * it is still linked (read_entry_at does that for a lock). */
int local_read_dir(struct registry *reg, const char *key, int fd,
		   const char *dirpath, bool probe, struct lock_entry *e,
		   struct wsl_error *err);

/* Removes the lock key of workspace (o: its owner as read, or NULL): one
 * rename out of locks/ into staging, then its markers and files (with
 * later (STAGE_NAME_MAX bytes) and o, the staging name goes there for the
 * caller to remove after .coordination; NULL: at once). The caller holds
 * the coordination lock exclusively. */
int unpublish(struct registry *reg, const char *key, const char *workspace,
	      const struct owner *o, char *later, struct wsl_error *err);

/* The lock checks of an acquire of o, under the exclusive coordination
 * lock: the lock on its workspace (by path and by identity) and those on
 * its ancestors and descendants, into *conflict (LOCK_FREE: none; else
 * the one lockrules_conflict_keep ranks first; a shared request is not in
 * conflict with shared locks, lockrules_compatible); *join: the workspace
 * holds a shared lock that a shared request joins (shared_join), not
 * publish. 0, or -1 with err. */
int local_check_locks(struct registry *reg, const struct owner *o,
		      struct lock_entry *conflict, bool *join, struct wsl_error *err);

/* Writes and publishes o as the lock of its workspace (the steps and
 * crash points atop registry_local.c), keeping its live file as
 * registry_try_acquire says; the caller holds the exclusive coordination
 * lock and has checked that nothing conflicts. 0, or -1 with err (nothing
 * published). */
int publish(struct registry *reg, const struct owner *o, int *live_fd,
	    struct wsl_error *err);

/* Marks *e corrupt (LOCK_CORRUPT) with the reason why. */
void set_corrupt(struct lock_entry *e, const char *why);

/* Durability (registry_local.c, "Durability"): whether bytes written must
 * be fsynced (not on tmpfs); the fsync of a directory whose change is a
 * commit point; the fsync of a directory changed before a commit point
 * (only where metadata is not committed in order). Both fsyncs return 0 or
 * -1 with errno set (no err). */
bool sync_data(const struct registry *reg);
int sync_commit(const struct registry *reg, int dirfd);
int sync_before_commit(const struct registry *reg, int dirfd);

/* A fresh name for a staging directory: "PREFIX.PID.RANDOM". */
void stage_name(char out[STAGE_NAME_MAX], const char *prefix);

/* ---- local_prestage.c: a lock staged before .coordination ---- */

/* Makes a new, empty staging directory "acq.PID.RANDOM" (its name into
 * stage, its path for messages into path) in the registry's staging
 * directory (staging/, tmp/ in a format 1 registry): the one place a lock
 * or a shared holder is staged (stage_lock, shared_join). Its descriptor,
 * or -1 with err. */
int stage_dir_make(struct registry *reg, char stage[STAGE_NAME_MAX], char path[PATH_MAX],
		   struct wsl_error *err);

/* Makes o's staging directory (a fresh name into stage), flock()ed
 * LOCK_EX (in use: reclaim passes it by), with its files (stage_files, or
 * shared_stage for a shared request) synced as publish needs them;
 * *sfd is the directory, *lfd the live file kept with keep_live (else
 * -1). 0, or -1 with err (nothing left behind). */
int stage_lock(struct registry *reg, const struct owner *o, bool keep_live,
	       char stage[STAGE_NAME_MAX], int *sfd, int *lfd, struct wsl_error *err);

/* Notes the locks os[0..n) an attempt asks for (keep_live: a run keeps
 * live files), which a waiter stages before it sleeps; os must stay valid
 * until the next attempt or the registry's close. */
void prestage_note(struct registry *reg, const struct owner *os, size_t n, bool keep_live);

/* Stages the noted exclusive locks that are not staged yet (called by
 * local_wait before a waiter sleeps, outside .coordination). No error:
 * what cannot be staged here is staged by publish. */
void prestage_waiting(struct registry *reg);

/* Hands o's prestaged lock to publish (stage name, directory and live
 * descriptors); false when none was staged. */
bool prestage_take(struct registry *reg, const struct owner *o, bool keep_live,
		   char stage[STAGE_NAME_MAX], int *sfd, int *lfd);

/* Removes the staged locks never published (closing their files). */
void prestage_drop(struct registry *reg);

/* ---- local_shared.c: shared locks (layout atop that file) ---- */

/* Whether the lock directory fd is a shared lock's: its mode file exists
 * (whatever it holds: shared_read judges it). */
bool shared_marked(int lockfd);

/* Writes o's owner.json, live and nested into the new directory dfd (at
 * path): the files of an exclusive lock and of a shared holder alike.
 * With keep_live, live is flock()ed LOCK_EX and its descriptor left in
 * *lfd (else closed; *lfd -1 on entry). */
int stage_files(const struct registry *reg, const struct owner *o, int dfd,
		const char *path, bool keep_live, int *lfd, struct wsl_error *err);

/* The shared layout in the new staging directory sfd (at path): the mode
 * file and holders/H with o's files (stage_files). */
int shared_stage(const struct registry *reg, const struct owner *o, int sfd,
		 const char *path, bool keep_live, int *lfd, struct wsl_error *err);

/* Reads the shared lock in directory fd (locks/key at dirpath) into *e
 * (initialised free with its key): every holder in e->holders, e itself
 * the representative (lockrules_representative); a mode file that says
 * anything but "shared", a missing holders/ or no holder is corrupt. */
int shared_read(struct registry *reg, const char *key, int fd,
		const char *dirpath, bool probe, struct lock_entry *e,
		struct wsl_error *err);

/* Adds o as one more holder of the shared lock key: a staging directory
 * with its files, renamed into locks/key/holders/ (the commit point).
 * live_fd as for publish. The caller holds LOCK_EX and has checked the
 * lock is shared and compatible. */
int shared_join(struct registry *reg, const struct owner *o, const char *key,
		int *live_fd, struct wsl_error *err);

/* Removes holder h of the shared lock key of workspace, which has n
 * holders: the last one takes the whole lock (unpublish), any other
 * renames its own directory out of holders/. The caller holds LOCK_EX. */
int shared_leave(struct registry *reg, const char *key, const char *workspace,
		 const struct lock_entry *h, size_t n, struct wsl_error *err);

/* For a take-over: when *e is a shared lock, replaces it by the holder
 * whose document x names (its exact owner, or its bytes), and returns the
 * lock's holder count; 0 for an exclusive lock. No holder named: *e
 * stays the lock as read, whose compare then fails. */
size_t shared_pick(struct lock_entry *e, const struct registry_expect *x);

/* Opens (checked) the directory of a lock's holder: locks/key itself
 * when holder is "" (an exclusive lock), else locks/key/holders/holder;
 * its path into dirpath. -1 with err. */
int holder_dir_open(struct registry *reg, const char *key, const char *holder,
		    char dirpath[PATH_MAX], struct wsl_error *err);

/* local_nest_lock's part for a shared lock (lock directory lfd at
 * dirpath): the directory of the holder with token (its nested file's
 * path into path); -2 when no holder has it, -1 with err. */
int shared_nest_dir(struct registry *reg, const char *key, int lfd,
		    const char *dirpath, const char *token, char path[PATH_MAX],
		    struct wsl_error *err);

/* ---- local_open.c: opening, the format stamp, the upgrade ---- */

/* Closes every descriptor (dropping the coordination lock) and frees the
 * state; reg is not open afterwards. */
void local_close(struct registry *reg);

/* Upgrades a registry of format 1 (0.1) or 2 to REGISTRY_FORMAT in place;
 * the caller holds the coordination lock exclusively. 0 also when another
 * wslock has done it meanwhile. */
int upgrade(struct registry *reg, struct wsl_error *err);

/* Replaces the format stamp tmp by one of REGISTRY_FORMAT, written whole
 * in the directory staging first, and syncs the registry directory: the
 * commit point of an upgrade. With exchange (format 1, where tmp is a
 * directory) the old tmp/ takes the stamp's place in staging. 0 or -1
 * with err. */
int stamp_upgrade(struct registry *reg, int staging, bool exchange,
		  struct wsl_error *err);

/* Opens (or with create makes) the subdirectory name of the registry;
 * *fd stays -1 when it is missing and create is false. */
int open_subdir(struct registry *reg, const char *name, bool create,
		int *fd, struct wsl_error *err);

/* ---- local_upgrade.c: format 2 -> 3 ---- */

/* The format 2 -> 3 upgrade (the caller holds the coordination lock
 * exclusively and has read format 2): every below marker of a held lock
 * in ids/ gets its idnest/ twin, the stamp says 3, then the ids/ ones go
 * (crash steps atop registry_local.c). 0 or -1 with err. */
int upgrade_v2(struct registry *reg, struct wsl_error *err);

/* Moves every format 2 below marker left in ids/ (ids/IA/KEY.below) to
 * idnest/IA/KEY: linked there for a held lock and synced, then unlinked
 * from ids/ (orphans are just unlinked); with remove false only the links
 * are made. Under the exclusive coordination lock, with idnest/ open. 0 or
 * -1 with err (what was moved stays moved). */
int below_sweep(struct registry *reg, bool remove, struct wsl_error *err);

/* ---- local_wait.c: the coordination lock, waiting for a release ---- */

/* The pid holding a flock(2) on the file st describes, from /proc/locks;
 * 0 when there is none or it is in a pid namespace this one cannot see. */
long flock_holder(const struct stat *st);

/* Whether pid is stopped by a signal (state T in /proc/PID/stat:
 * SIGSTOP, Ctrl-Z; proc(5)); false when it cannot be read. A tracing
 * stop (t) is not counted: it is usually brief (LeakSanitizer stops
 * every thread with ptrace at exit, while the exiting process may still
 * hold .coordination), and a bounded wait covers the rest. */
bool pid_stopped(long pid);

/* Takes the coordination lock (op LOCK_SH or LOCK_EX), waiting until dl
 * (NULL: the registry's bound, else unbounded); fails with
 * WSL_REGISTRY_BUSY naming the holder when the wait ends. A LOCK_EX on a
 * 0.1 registry upgrades it first. local_coord_lock is the same without a
 * deadline (the ops table's lock); local_unlock drops it (no error). */
int local_lock(struct registry *reg, int op,
	       const struct registry_deadline *dl, struct wsl_error *err);
int local_coord_lock(struct registry *reg, int op, struct wsl_error *err);
void local_unlock(struct registry *reg);

/* The registry contract's wait_prepare and wait (registry.h): an inotify
 * watch on locks/ and a request to join the queue on the next conflict;
 * then a sleep on what queue_check recorded (the entry of the waiter
 * ahead, else the holder: its live file, nested file, pidfd, and the
 * release notice on locks/) and sigfd, for at most timeout_ms (ms; < 0:
 * no bound); wait returns 1 when sigfd is readable, else 0. */
int local_wait_prepare(struct registry *reg, struct wsl_error *err);
int local_wait(struct registry *reg, int sigfd, long timeout_ms,
	       struct wsl_error *err);

/* ---- local_queue.c: the wait queue (queue/, described atop local_wait.c) ---- */

#define QUEUE_DIR "queue"
#define QUEUE_NAME_MAX 64	/* an entry's name, SEQ.PID.RAND, with its NUL */
#define QUEUE_PROOFS 8		/* nesting proofs a waiter remembers */

/* What a waiter sleeps on (queue_check records it, local_wait sleeps). */
enum queue_target {
	TARGET_NONE,
	TARGET_ENTRY,		/* the nearest conflicting waiter ahead */
	TARGET_LOCK,		/* the holder of the conflicting lock */
};

/* The wait state of one registry (struct local's queue). */
struct local_queue {
	int dir_fd;			/* queue/, or -1 */
	int fd;				/* our entry (LOCK_EX), or -1: not queued */
	char name[QUEUE_NAME_MAX];
	unsigned long long seq;
	bool join;			/* wait_prepare: join at the next conflict */
	int watch_fd;			/* inotify for the watches of a wait (locks/ for a head), or -1 */
	int own_pidfd;			/* the acquire --pid holder's pidfd, or -1 */
	bool own_tried;
	pid_t own_pid;			/* o->pid of the last try */
	unsigned long long own_ticks;
	bool own_has_ticks;
	/* What the last queue_check found to sleep on. */
	enum queue_target target;
	char t_name[QUEUE_NAME_MAX];	/* TARGET_ENTRY: the entry ahead */
	dev_t t_dev;
	ino_t t_ino;
	long t_pid;
	char t_pidns[WSL_PIDNS_MAX + 1];
	char t_key[WSL_KEY_HEX + 1];	/* TARGET_LOCK: the conflicting lock */
	char t_holder_dir[WSL_KEY_HEX + 1];	/* and its holder's directory in
						 * holders/ (a shared lock), or "" */
	bool t_live, t_nested, t_pid_watch;
	ino_t t_live_ino;
	pid_t t_holder;
	unsigned long long t_ticks;
	bool t_has_ticks;
	char inside_of[QUEUE_NAME_MAX];	/* the entry queue_chain_inside was asked for */
	bool inside;			/* and its answer */
	struct {			/* registry->inside per lock, remembered */
		char key[WSL_KEY_HEX + 1];
		ino_t live_ino;
		bool inside;
	} proofs[QUEUE_PROOFS];
	size_t n_proofs;
};

/* reg's wait state, made on first use; NULL when out of memory. */
struct local_queue *queue_state(struct registry *reg);

/* Whether the waiter that wrote an entry (pid, in pid namespace pidns) is
 * stopped; another namespace's by the pid /proc/locks names for the
 * entry's kernel lock (the file dev/ino). False when not known. */
bool queue_stopped_pid(long pid, const char *pidns, dev_t dev, ino_t ino);


/* ---- local_multi.c: the acquire of one or several workspaces ---- */

/* The registry contract's try_acquire and try_acquire_multi (registry.h). */
int local_try_acquire(struct registry *reg, const struct owner *o,
		      const struct registry_deadline *dl, int *live_fd,
		      struct lock_entry *conflict, struct wsl_error *err);
int local_try_acquire_multi(struct registry *reg, const struct owner *os, size_t n,
			    const struct registry_deadline *dl, int *live_fds,
			    struct lock_entry *conflict, size_t *which,
			    struct wsl_error *err);

/* Under the exclusive coordination lock, after the lock checks of an
 * acquire of os[0..n) (one workspace, or several at once: then one entry
 * names them all, standing in each of their queues at one SEQ): the
 * queue's part of the verdict. *conflict is the lock
 * conflict found (LOCK_FREE: none). A conflicting waiter that arrived
 * earlier and still waits makes a free workspace a conflict too (no
 * barging): then *conflict describes that waiter (queued set). Records
 * what local_wait is to sleep on (that waiter's entry, else the lock
 * conflict's holder), joins the queue on a conflict once
 * local_wait_prepare asked for it, collects abandoned entries, and wakes
 * the successors of stopped waiters it passes over. 0, or -1 with err. */
int queue_check(struct registry *reg, const struct owner *os, size_t n,
		struct lock_entry *conflict, struct wsl_error *err);

/* The backend's queued (registry_queued): the live, running entries of
 * queue/ that overlap workspace, read without collecting any. */
int queue_list(struct registry *reg, const char *workspace,
	       struct lock_entry **out, size_t *n, struct wsl_error *err);

/* Leaves the queue if queued (no error): the entry is closed, which wakes
 * the waiters sleeping on it, then unlinked. */
void queue_leave(struct registry *reg);

/* After a lock went (release, reclaim; without the coordination lock, so
 * that the next holder need not wait for it): wakes the waiters sleeping
 * on every stopped waiter, so that a stopped waiter does not keep a free
 * workspace from the ones behind it. No error. */
void queue_poke_stopped(struct registry *reg);

/* local_wait.c: the registry contract's wait_end (registry.h): leaves the
 * queue, drops the wait's state. local_wait_close also frees it
 * (local_close). */
void local_wait_end(struct registry *reg);
void local_wait_close(struct registry *reg);

/* reclaim's part (local_garbage): counts (and with remove unlinks) the
 * queue entries whose kernel lock is free (abandoned: their waiter died);
 * adds them to *n. -1 with err when queue/ cannot be read. */
int queue_garbage(struct registry *reg, bool remove, size_t *n,
		  struct wsl_error *err);

/* ---- local_markers.c: nest/ and ids/ markers, overlaps ---- */

/* The identity of a lock's workspace into fs and fspath: o's (a version 2
 * document), else root's as it is now; entry_identity is the same for a
 * read lock entry. False when it cannot be known (no error). */
bool owner_identity(const struct owner *o, const char *root,
		    char fs[MOUNTINFO_FS_MAX + 1], char fspath[PATH_MAX]);
bool entry_identity(const struct lock_entry *e, char fs[MOUNTINFO_FS_MAX + 1],
		    char fspath[PATH_MAX]);

/* The registry contract's overlaps (registry.h): the held locks above and
 * below workspace, by path and by identity. */
int local_overlaps(struct registry *reg, const char *workspace, bool probe,
		   struct overlap **out, size_t *n, struct wsl_error *err);

/* The lock on workspace itself found by identity at another path key than
 * skip_key (a bind mount, a container's mount); *e stays LOCK_FREE when
 * there is none. */
int identity_self(struct registry *reg, const char *workspace, const char *skip_key,
		  bool probe, struct lock_entry *e, struct wsl_error *err);

enum marker_step { MARKER_ADD, MARKER_SYNC, MARKER_REMOVE };

struct marker_ctx {
	struct registry *reg;
	const char *key;	/* the held workspace's key */
	enum marker_step step;
	struct wsl_error *err;
	const char *fs;		/* identity space: the filesystem; NULL: by path */
	int dirfd;		/* nest/, ids/ or idnest/ (its .marker is linked) */
	const char *dirname;
};

/* Creates the marker inode dirfd/.marker (empty, 0600) that markers link
 * to; 0 also when it exists, else -1 with errno. */
int marker_inode_make(int dirfd);

/* A wspath_for_each_ancestor callback (arg a struct marker_ctx): adds,
 * syncs or removes (m->step) the marker of m->key below ancestor.
 * Removing never fails. */
int marker_apply(const char *ancestor, void *arg);

/* Adds m->key's marker in m->dirfd/akey (the directory made, and kept,
 * when it is the first there: then the matching *_made flag is set).
 * marker_apply's MARKER_ADD for a known directory key. 0 or -1 with
 * m->err. */
int marker_add_at(struct marker_ctx *m, const char *akey);

/* Adds, syncs or removes (step) the identity markers of the lock key:
 * ids/I/key and idnest/IA/key for every identity ancestor IA; _at for
 * the identity fs/fspath, identity_markers for owner o's (nothing when it
 * is unknown). Removing never fails. */
int identity_markers_at(struct registry *reg, const char *key, const char *fs,
			const char *fspath, enum marker_step step,
			struct wsl_error *err);
int identity_markers(struct registry *reg, const char *key, const struct owner *o,
		     enum marker_step step, struct wsl_error *err);

/* ---- local_list.c: every lock, read one at a time ---- */

/* The registry contract's list (registry.h). */
int local_list(struct registry *reg, bool probe,
	       int (*fn)(const struct lock_entry *e, void *arg), void *arg,
	       struct wsl_error *err);

/* ---- local_garbage.c: staging leftovers and orphan markers ---- */

/* Lists the names in directory fd (not "." or "..") into *out, *n of them,
 * NULL-terminated (NULL when empty); -1 with errno when fd cannot be read.
 * free_names frees the list. */
int list_names(int fd, char ***out, size_t *n);
void free_names(char **names, size_t n);

/* The registry contract's garbage (registry.h). */
int local_garbage(struct registry *reg, bool remove, size_t *staging,
		  size_t *orphan_markers, struct wsl_error *err);

#endif
