/* registry_local.c - the local backend: the on-disk lock protocol
 * (DESIGN.md section 5): publish, release, take-over, retain, list, get.
 * Beside it (sharing registry_local.h): local_open.c opens and creates the
 * registry and upgrades a 0.1 one, local_wait.c holds the coordination
 * lock and waits for a release, local_markers.c writes and reads the nest
 * and identity markers, local_list.c lists the locks for readers,
 * local_garbage.c collects what a crash leaves.
 *
 * Layout, below the registry directory (0700, owned by the caller):
 *
 *   .coordination   flock(2)ed LOCK_EX around every mutation; readers
 *                   (inspect, the reclaim preview, probes) never take it. A
 *                   kernel lock: it dies with its holder, so a crash never
 *                   leaves the registry locked; a bounded wait names its
 *                   holder from /proc/locks (the kernel's record).
 *   locks/KEY/      one per held workspace, KEY = BLAKE2b-256 hex of the
 *                   canonical path: owner.json (0600), live (flock()ed by a
 *                   running `run` and inherited by its command), nested
 *                   (LOCK_SH by each run nested under the lock while its
 *                   command runs; LOCK_EX by the outer run and by release
 *                   before they let go), and retained.json when kept for
 *                   recovery. A shared lock: mode, holders/H/ (local_shared.c).
 *   nest/A/KEY      an empty marker for each proper ancestor A of a held
 *                   workspace KEY; a new lock on A finds its descendants by
 *                   reading nest/A, never by scanning locks/.
 *   ids/I/KEY       "at" marker: lock KEY has identity key I (BLAKE2b of
 *                   workspace_fs and workspace_fs_path, DESIGN.md section
 *                   3); ids/I holds nothing else, so the lock at an
 *                   identity ancestor costs a directory of one entry.
 *   idnest/IA/KEY   "below" marker, for each identity ancestor IA, as
 *                   nest/A/KEY is by path (where the lock at A is
 *                   locks/KEY(A): no mix). A lock is found in both spaces
 *                   (a bind mount, a container's mount: by identity).
 *   staging/        staging (acq.PID.RAND) and release (rel.PID.RAND)
 *                   directories.
 *   queue/SEQ.PID.RAND  one entry per waiter, flock()ed by it while it
 *                   waits: the FIFO wait queue (described atop
 *                   local_wait.c). Made by the first waiter.
 *   tmp             the format stamp, a file: "wslock registry format 3";
 *                   a higher format is refused (77), a lower one upgraded
 *                   by the first mutation, under the coordination lock.
 *                   Format 1 (0.1; tmp/ its staging, so 0.1 refuses a
 *                   file): identity markers for every lock (bytes stay at
 *                   their 0.1 keys), then the stamp replaces tmp/ by
 *                   rename(RENAME_EXCHANGE); a crash before it leaves 0.1's
 *                   registry with extra markers. Format 2 (below markers
 *                   in ids/IA/KEY.below): atop local_upgrade.c.
 *
 * Invariants: a lock exists iff locks/KEY exists, and it never exists
 * half-written, because it appears by one rename(2) of a complete, fsynced
 * staging directory. Every lock has its nest markers before it appears
 * (markers are written and fsynced first), so no interleaving lets an
 * ancestor and a descendant be held at once. A marker without its lock is
 * an orphan and is ignored.
 *
 * Readers: every document is published or replaced by one rename, so a
 * reader without .coordination sees a lock's old or new state; a lock
 * directory it opened that was renamed away meanwhile (released) is not
 * reported (still_linked).
 *
 * Nested runs: a run nests only by proof (nest.c). It takes nested
 * LOCK_SH, then checks that locks/KEY is still the directory it opened and
 * still names the proven owner's token (else it takes the normal path);
 * the outer takes nested LOCK_EX after its command ended and keeps it over
 * the release, so no nested run can start under a lock that is going. The
 * shared lock is inherited by the nested run's command: a killed nested
 * wslock does not end it. A probe that finds nested held calls the lock
 * live whatever its owner's pid says.
 *
 * A crash (or SIGKILL) leaves, by step:
 *  - acquire, before the rename: a staging directory in tmp/ and possibly
 *    orphan markers; the workspace is free. (reclaim removes the garbage.)
 *  - acquire, after the rename: a complete lock of a process that is now
 *    dead: acquire reports WSLOCK_RECOVERY_REQUIRED until it is recovered.
 *  - release, after the rename out of locks/: the workspace is free; a
 *    release directory in tmp/ (removed after .coordination) and orphan markers remain.
 *  - an outer run, while it waits for nested runs (holding nested or
 *    waiting for it): the lock stays; it is live while a nested run's
 *    command keeps live or nested, then dead: recovery required. A nested
 *    run killed at any point leaves no file; its command keeps the lock
 *    live until it ends.
 *  - a waiter, at any step (queue:created, queue:joined, while it sleeps):
 *    its queue entry, abandoned (its kernel lock is gone): the waiter
 *    behind it moves up at once; the next scan under .coordination or
 *    reclaim removes it. After queue:left (unlinked, not yet closed):
 *    nothing. A waiter holds nothing else, so a crash changes no lock.
 * The coordination lock is dropped by the kernel in every case.
 *
 * Durability: a published lock must survive a power cut together with its
 * nest markers. Document bytes are always fsynced before their rename and
 * locks/ after it. Whether the directories changed before the rename (the
 * staging directory, each nest/A) need their own fsync depends on the
 * filesystem (platform_fs_kind): on XFS, and on ext3/ext4 that have a
 * journal, metadata changes are journaled and committed in order, so the
 * fsync of locks/ after the rename commits them too (one cache flush
 * instead of one per ancestor); elsewhere (an ext4 made without a journal
 * too) each is fsynced: the staging directory, every marker directory that
 * got a marker, and nest/, ids/, idnest/ only when a marker directory
 * was made in them (a kept one was synced by the command that made it; one
 * made by a command killed before that sync is written back by the kernel
 * within its writeback interval). On tmpfs nothing survives a crash, so
 * nothing is synced. An uncontended acquire on a journaled filesystem thus
 * makes two fsyncs (owner.json, then locks/), the least the promise allows;
 * a waiter makes the first before it sleeps (local_prestage.c), so once
 * served it makes only the second.
 */
#include "registry.h"
#include "registry_backend.h"
#include "fsx.h"
#include "journal.h"
#include "testhook.h"
#include "platform.h"
#include "registry_local.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Joins a and b with '/' into out; fails with WSL_UNSAFE_PATH when the
 * result would not fit in PATH_MAX. */
int path_join(char out[PATH_MAX], const char *a, const char *b,
	      struct wsl_error *err)
{
	size_t la = strlen(a), lb = strlen(b);

	if (la + 1 + lb >= PATH_MAX)
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "path %s/%s is longer than PATH_MAX", a, b);
	/* out may be a itself. */
	memmove(out, a, la);
	out[la] = '/';
	memmove(out + la + 1, b, lb + 1);
	return 0;
}

void set_corrupt(struct lock_entry *e, const char *why)
{
	e->state = LOCK_CORRUPT;
	snprintf(e->problem, sizeof(e->problem), "%s", why);
}

/* Corrupt because of what fsx refused as unsafe (symlink, foreign owner,
 * group/world bits, not a regular file), or for another reason. */
static void set_corrupt_err(struct lock_entry *e, const struct wsl_error *why)
{
	set_corrupt(e, why->message);
	e->unsafe = why->code == WSL_UNSAFE_PATH;
}

/* Whether the directory fd (its fstat in *st, or NULL) is still the lock
 * directory locks/key. */
static bool still_linked(const struct registry *reg, const char *key, int fd,
			 const struct stat *st)
{
	struct stat a, b;

	if ((st == NULL && fstat(fd, &a) != 0) ||
	    fstatat(loc(reg)->locks_fd, key, &b, AT_SYMLINK_NOFOLLOW) != 0)
		return false;
	if (st != NULL)
		a = *st;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* A nested run under the lock in directory fd holds its nested file
 * (LOCK_SH): then the lock is live whatever its owner's pid says (an
 * acquire holder that exited while a run nested under it still runs).
 * Asked of /proc/locks, so that a probe takes no lock that could make a
 * nested run or the outer's release wait. */
static void probe_nested(int fd, struct lock_entry *e)
{
	struct stat st;
	long pid;

	if (e->liveness == LIVENESS_LIVE ||
	    fstatat(fd, LOCK_NESTED_FILE, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
	    !S_ISREG(st.st_mode))
		return;
	pid = flock_holder(&st);
	if (pid <= 0)
		return;
	e->nested_held = true;
	e->liveness = LIVENESS_LIVE;
	snprintf(e->reason, sizeof(e->reason),
		 "a wslock run nested under this lock is still running (pid %ld holds the lock's nested file)",
		 pid);
}

/* A corrupt lock is live when its live file's kernel lock is held: the
 * document is unreadable, the run behind it is not (section 4). Only the
 * kernel lock counts here: a live file that cannot be probed (a planted
 * symlink) must not make a corrupt lock impossible to clear. */
static void probe_corrupt(int fd, struct lock_entry *e)
{
	if (liveness_live_held(fd) != 1)
		return;
	e->live_held = true;
	e->probed = true;
	e->liveness = LIVENESS_LIVE;
	snprintf(e->reason, sizeof(e->reason),
		 "the holder's kernel lock on its live file is held (a wslock run or its command is running), although owner.json is corrupt");
}

static int read_entry_at(struct registry *reg, const char *key, int fd,
			 const struct stat *dirst, const char *dirpath, bool probe,
			 struct lock_entry *e, struct wsl_error *err);

int local_get_key(struct registry *reg, const char *key, bool probe,
		  struct lock_entry *e, struct wsl_error *err)
{
	char dirpath[PATH_MAX];
	struct wsl_error local = { 0 };
	struct stat dirst;
	int fd, rc;

	memset(e, 0, sizeof(*e));
	e->state = LOCK_FREE;
	snprintf(e->key, sizeof(e->key), "%s", key);
	if (loc(reg)->locks_fd < 0)
		return 0;
	if (path_join(dirpath, reg->path, "locks", err) != 0 ||
	    path_join(dirpath, dirpath, key, err) != 0)
		return -1;
	fd = fsx_open_dir_checked_st(loc(reg)->locks_fd, key, dirpath, false, &dirst, &local);
	if (fd < 0) {
		if (local.sys_errno == ENOENT && local.code == WSL_IO) {
			wsl_error_clear(&local);
			return 0;
		}
		if (local.code == WSL_UNSAFE_PATH) {
			path_join(e->lock_path, dirpath, "owner.json", err);
			set_corrupt_err(e, &local);
			wsl_error_clear(&local);
			return 0;
		}
		*err = local;
		return -1;
	}
	rc = read_entry_at(reg, key, fd, &dirst, dirpath, probe, e, err);
	fsx_close(fd);
	return rc;
}

/* The lock in the opened lock directory fd (locks/key, at dirpath) into
 * *e, as local_get_key reads it (a shared lock by local_shared.c); fd
 * stays open. */
static int read_entry_at(struct registry *reg, const char *key, int fd,
			 const struct stat *dirst, const char *dirpath, bool probe,
			 struct lock_entry *e, struct wsl_error *err)
{
	memset(e, 0, sizeof(*e));
	e->state = LOCK_FREE;
	snprintf(e->key, sizeof(e->key), "%s", key);
	if ((shared_marked(fd) ? shared_read(reg, key, fd, dirpath, probe, e, err) :
	     local_read_dir(reg, key, fd, dirpath, probe, e, err)) != 0)
		return -1;
	/* Read without the coordination lock (inspect, the reclaim preview):
	 * a lock released meanwhile was renamed away from locks/KEY, and what
	 * was read from it is not a lock any more. */
	if (loc(reg)->coord_held == 0 && !still_linked(reg, key, fd, dirst)) {
		lock_entry_free(e);
		snprintf(e->key, sizeof(e->key), "%s", key);
	}
	return 0;
}

int local_read_dir(struct registry *reg, const char *key, int fd,
		   const char *dirpath, bool probe, struct lock_entry *e,
		   struct wsl_error *err)
{
	char path[PATH_MAX], why[256];
	char check[WSL_KEY_HEX + 1];
	struct wsl_error local = { 0 };
	struct stat st;
	size_t len;

	memset(e, 0, sizeof(*e));
	e->state = LOCK_FREE;
	snprintf(e->key, sizeof(e->key), "%s", key);
	if (path_join(e->lock_path, dirpath, "owner.json", err) != 0)
		return -1;
	if (!loc(reg)->listing) {
		if (fstatat(fd, "live", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
			e->live_dev = st.st_dev;
			e->live_ino = st.st_ino;
		}
	}
	if (!key_valid(key)) {
		set_corrupt(e, "the lock directory's name is not a registry key");
		goto done;
	}
	if (fsx_read_file_checked(fd, "owner.json", e->lock_path, LOCK_RAW_MAX,
				  &e->raw, &e->raw_len, &local) != 0) {
		if (local.code == WSL_IO && local.sys_errno != ENOENT) {
			*err = local;
			return -1;
		}
		if (local.sys_errno == ENOENT) {
			/* The directory, not a file in it, is what to remove. */
			set_corrupt(e, "the lock directory has no owner.json");
			snprintf(e->lock_path, sizeof(e->lock_path), "%s", dirpath);
		} else {
			set_corrupt_err(e, &local);
		}
		wsl_error_clear(&local);
		goto done;
	}
	if (owner_parse(e->raw, e->raw_len, &e->owner, why, sizeof(why)) != 0) {
		set_corrupt(e, why);
		if (owner_guess_workspace(e->raw, e->raw_len, e->workspace_root)) {
			crypto_path_key(e->workspace_root, check);
			if (strcmp(check, key) != 0)
				e->workspace_root[0] = '\0';
		}
		goto done;
	}
	crypto_path_key(e->owner.workspace_root, check);
	if (strcmp(check, key) != 0) {
		set_corrupt(e, "the owner document names a workspace whose key is not this lock's");
		goto done;
	}
	e->has_owner = true;
	snprintf(e->workspace_root, sizeof(e->workspace_root), "%s",
		 e->owner.workspace_root);
	e->state = LOCK_HELD;
	path_join(path, dirpath, "retained.json", err);
	/* (Looked up first: a failed open costs more than a failed stat.) */
	if (!(fstatat(fd, "retained.json", &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT) &&
	    fsx_read_file_checked(fd, "retained.json", path, OWNER_DOC_MAX,
				  &e->retained, &len, &local) == 0) {
		e->state = LOCK_RETAINED;
	} else if (local.code != WSL_OK && local.sys_errno != ENOENT) {
		set_corrupt_err(e, &local);
		e->has_owner = false;
		wsl_error_clear(&local);
		goto done;
	}
	wsl_error_clear(&local);
	if (probe) {
		int held = liveness_live_held(fd);

		e->live_held = held == 1;
		e->liveness = liveness_probe_held(held, &e->owner, e->reason, sizeof(e->reason));
		e->probed = true;
		probe_nested(fd, e);
	}
done:
	if (probe && e->state == LOCK_CORRUPT)
		probe_corrupt(fd, e);
	(void)reg;
	return 0;
}

/* Whether bytes written must be fsynced: not where nothing survives. */
bool sync_data(const struct registry *reg)
{
	return loc(reg)->fs_kind != FS_VOLATILE;
}

/* fsync of a directory whose change must be durable on its own: a commit
 * point (locks/ after a rename, a lock directory after a replace). */
int sync_commit(const struct registry *reg, int dirfd)
{
	return sync_data(reg) ? fsx_fsync_dir(dirfd) : 0;
}

/* fsync of a directory changed before a commit point: needed only where
 * metadata is not committed in order (see the top of this file). */
int sync_before_commit(const struct registry *reg, int dirfd)
{
	return loc(reg)->fs_kind == FS_OTHER ? fsx_fsync_dir(dirfd) : 0;
}

void stage_name(char out[STAGE_NAME_MAX], const char *prefix)
{
	char rnd[17];

	crypto_random_hex(rnd, 8);
	snprintf(out, STAGE_NAME_MAX, "%s.%ld.%s", prefix, (long)getpid(), rnd);
}


/* Writes and publishes o; the caller holds the coordination lock and has
 * checked that nothing overlaps. */
int publish(struct registry *reg, const struct owner *o, int *live_fd,
	    struct wsl_error *err)
{
	char key[WSL_KEY_HEX + 1], stage[STAGE_NAME_MAX];
	struct marker_ctx m;
	int sfd = -1, lfd = -1;

	crypto_path_key(o->workspace_root, key);
	/* Staged by a waiter before it slept (local_prestage.c), else here. */
	if (!prestage_take(reg, o, live_fd != NULL, stage, &sfd, &lfd) &&
	    stage_lock(reg, o, live_fd != NULL, stage, &sfd, &lfd, err) != 0)
		return -1;
	m = (struct marker_ctx){ reg, key, MARKER_ADD, err, NULL, loc(reg)->nest_fd, "nest" };
	loc(reg)->nest_made = loc(reg)->ids_made = loc(reg)->idnest_made = false;
	if (wspath_for_each_ancestor(o->workspace_root, marker_apply, &m) != 0 ||
	    identity_markers(reg, key, o, MARKER_ADD, err) != 0)
		goto fail_markers;
	m.step = MARKER_SYNC;
	if (loc(reg)->fs_kind == FS_OTHER &&
	    (wspath_for_each_ancestor(o->workspace_root, marker_apply, &m) != 0 ||
	     identity_markers(reg, key, o, MARKER_SYNC, err) != 0))
		goto fail_markers;
	/* nest/, ids/, idnest/ changed only where a marker directory was made. */
	if ((loc(reg)->nest_made && sync_before_commit(reg, loc(reg)->nest_fd) != 0) ||
	    (loc(reg)->ids_made && loc(reg)->ids_fd >= 0 &&
	     sync_before_commit(reg, loc(reg)->ids_fd) != 0) ||
	    (loc(reg)->idnest_made && loc(reg)->idnest_fd >= 0 &&
	     sync_before_commit(reg, loc(reg)->idnest_fd) != 0)) {
		wsl_error_errno(err, WSL_IO, errno, "cannot sync %s/nest", reg->path);
		goto fail_markers;
	}
	CRASH_POINT("acquire:markers-written");
	if (renameat2(loc(reg)->tmp_fd, stage, loc(reg)->locks_fd, key, RENAME_NOREPLACE) != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot publish the lock of %s",
				o->workspace_root);
		goto fail_markers;
	}
	CRASH_POINT("acquire:published");
	if (sync_commit(reg, loc(reg)->locks_fd) != 0) {
		/* Published but not durable: a holder must not work on that
		 * promise, so take the lock back and fail. */
		int e = errno;
		fsx_close(sfd);
		fsx_close(lfd);
		unpublish(reg, key, o->workspace_root, o, NULL, err);
		return wsl_error_errno(err, WSL_IO, e, "cannot sync %s/locks", reg->path);
	}
	CRASH_POINT("acquire:dir-synced");
	fsx_close(sfd);
	if (live_fd != NULL)
		*live_fd = lfd;
	else
		fsx_close(lfd);
	return 0;
fail_markers:
	m.step = MARKER_REMOVE;
	wspath_for_each_ancestor(o->workspace_root, marker_apply, &m);
	identity_markers(reg, key, o, MARKER_REMOVE, err);
	fsx_close(lfd);
	fsx_close(sfd);
	fsx_remove_dir_files(loc(reg)->tmp_fd, stage);
	return -1;
}

int local_check_locks(struct registry *reg, const struct owner *o,
		      struct lock_entry *conflict, bool *join, struct wsl_error *err)
{
	char key[WSL_KEY_HEX + 1];
	struct overlap *ov = NULL;
	struct lock_entry self;
	size_t n = 0, i;
	int rc = -1;

	memset(conflict, 0, sizeof(*conflict));
	conflict->state = LOCK_FREE;
	crypto_path_key(o->workspace_root, key);
	if (local_get_key(reg, key, true, &self, err) != 0)
		return -1;
	/* A shared request joins a shared lock (lockrules_compatible). */
	*join = lockrules_compatible(reg->acquire_shared, &self);
	if (*join)
		lock_entry_free(&self);
	lockrules_conflict_keep_own(conflict, &self, o->workspace_root);
	/* The same directory locked through another path. */
	if (identity_self(reg, o->workspace_root, key, true, &self, err) != 0)
		return -1;
	if (self.state != LOCK_FREE && !lockrules_compatible(reg->acquire_shared, &self)) {
		self.relation = "same";
		lockrules_conflict_keep(conflict, &self);
	}
	lock_entry_free(&self);
	if (local_overlaps(reg, o->workspace_root, true, &ov, &n, err) == 0) {
		for (i = 0; i < n; i++) {
			ov[i].entry.relation = ov[i].ancestor ? "ancestor" : "descendant";
			if (!lockrules_compatible(reg->acquire_shared, &ov[i].entry))
				lockrules_conflict_keep(conflict, &ov[i].entry);
		}
		rc = 0;
	}
	lock_overlaps_free(ov, n);
	return rc;
}

/* Removes the released lock directory staging/gone by the names a lock
 * has; -1 when something else is left in it (the caller lists it). Only
 * for a directory this process renamed there itself under .coordination,
 * so the paths through gone follow nothing. */
static int remove_known(int stagefd, const char *gone)
{
	static const char *const names[] = { "owner.json", "live", LOCK_NESTED_FILE,
					      "retained.json" };
	char path[STAGE_NAME_MAX + 32];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", gone, names[i]);
		if (unlinkat(stagefd, path, 0) != 0 && errno != ENOENT)
			return -1;
	}
	return unlinkat(stagefd, gone, AT_REMOVEDIR);
}

/* Removes the lock key of workspace: renamed out of locks/ into tmp/ (the
 * atomic step), then its nest markers and files go. The caller holds
 * LOCK_EX. With later and o, the directory's name goes there instead:
 * the caller removes it after .coordination, which the woken waiter needs. */
int unpublish(struct registry *reg, const char *key, const char *workspace,
	      const struct owner *o, char *later, struct wsl_error *err)
{
	char gone[STAGE_NAME_MAX], fs[MOUNTINFO_FS_MAX + 1], fspath[PATH_MAX];
	struct marker_ctx m;
	struct stat st;
	bool has_id = owner_identity(o, workspace, fs, fspath);

	stage_name(gone, "rel");
	if (renameat2(loc(reg)->locks_fd, key, loc(reg)->tmp_fd, gone, RENAME_NOREPLACE) != 0)
		return wsl_error_errno(err, WSL_IO, errno,
				       "cannot remove the lock of %s", workspace);
	CRASH_POINT("release:renamed");
	m = (struct marker_ctx){ reg, key, MARKER_REMOVE, err, NULL, loc(reg)->nest_fd, "nest" };
	wspath_for_each_ancestor(workspace, marker_apply, &m);
	if (has_id)
		identity_markers_at(reg, key, fs, fspath, MARKER_REMOVE, err);
	CRASH_POINT("release:markers-removed");
	/* A lock that was read whole (o) is a directory of known files,
	 * removed by name; anything else there, or a corrupt lock (maybe a
	 * symlink or a file: unlinked, never followed), by listing it. */
	if (o != NULL && later != NULL) {
		memcpy(later, gone, sizeof(gone));
		return 0;
	}
	if (o != NULL && remove_known(loc(reg)->tmp_fd, gone) == 0)
		return 0;
	if (fstatat(loc(reg)->tmp_fd, gone, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode))
		unlinkat(loc(reg)->tmp_fd, gone, 0);
	else
		fsx_remove_dir_files(loc(reg)->tmp_fd, gone);
	return 0;
}

static int local_release(struct registry *reg, const char *workspace,
			 const char *token, struct owner *released,
			 struct wsl_error *err)
{
	char key[WSL_KEY_HEX + 1], gone[STAGE_NAME_MAX] = "";
	const struct lock_entry *h;
	struct lock_entry e;
	int rc = -1;

	if (loc(reg)->locks_fd < 0)
		return wsl_error_set(err, WSL_NOT_HELD, "%s is not locked", workspace);
	if (local_lock(reg, LOCK_EX, NULL, err) != 0)
		return -1;
	crypto_path_key(workspace, key);
	if (local_get_key(reg, key, false, &e, err) != 0)
		goto out;
	if (e.state == LOCK_FREE && identity_self(reg, workspace, key, false, &e, err) != 0)
		goto out;
	/* A shared lock: the holder with token (none: the lock as read). */
	h = e.shared && lock_entry_by_token(&e, token) != NULL ? lock_entry_by_token(&e, token) : &e;
	if (lockrules_check_release(workspace, token, h, err) != 0)
		goto out;
	if ((e.shared ? shared_leave(reg, e.key, e.workspace_root[0] != '\0' ? e.workspace_root :
				     workspace, h, e.n_holders, err) :
	     unpublish(reg, e.key, e.workspace_root[0] != '\0' ? e.workspace_root : workspace,
		       e.has_owner ? &e.owner : NULL, gone, err)) != 0)
		goto out;
	if (released != NULL)
		*released = h->owner;
	rc = 0;
out:
	lock_entry_free(&e);
	local_unlock(reg);
	if (gone[0] != '\0' && remove_known(loc(reg)->tmp_fd, gone) != 0)
		fsx_remove_dir_files(loc(reg)->tmp_fd, gone);
	if (rc == 0)
		queue_poke_stopped(reg);
	return rc;
}

/* Hands the lock directory lfd over to next in place: owner.json and live
 * are replaced by rename (each a single atomic step; owner.json is the
 * commit point), retained.json is dropped, and the directory is fsynced. */
static int replace_owner(const struct registry *reg, int lfd, const char *dirpath,
			 const struct owner *next,
			 int *live_fd, struct wsl_error *err)
{
	char *text;
	size_t len;
	int nfd;

	unlinkat(lfd, "owner.json.new", 0);
	unlinkat(lfd, "live.new", 0);
	text = owner_format(next, false);
	if (text == NULL)
		return wsl_error_set(err, WSL_INTERNAL, "cannot format the owner document");
	len = strlen(text);
	text[len] = '\n';	/* replaces the NUL; written as len + 1 bytes */
	if (fsx_write_new_file(lfd, "owner.json.new", text, len + 1, sync_data(reg)) != 0) {
		int e = errno;
		free(text);
		unlinkat(lfd, "owner.json.new", 0);
		return wsl_error_errno(err, WSL_IO, e, "cannot write %s/owner.json.new",
				       dirpath);
	}
	free(text);
	CRASH_POINT("takeover:owner-staged");
	nfd = fsx_openat(lfd, "live.new", O_RDWR | O_CREAT | O_EXCL, 0600);
	if (nfd < 0 || (live_fd != NULL && fsx_flock(nfd, LOCK_EX | LOCK_NB) != 0) ||
	    renameat(lfd, "live.new", lfd, "live") != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot create %s/live", dirpath);
		fsx_close(nfd);
		unlinkat(lfd, "owner.json.new", 0);
		return -1;
	}
	CRASH_POINT("takeover:live-replaced");
	if (renameat(lfd, "owner.json.new", lfd, "owner.json") != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot replace %s/owner.json", dirpath);
		fsx_close(nfd);
		return -1;
	}
	CRASH_POINT("takeover:owner-replaced");
	unlinkat(lfd, "retained.json", 0);
	CRASH_POINT("takeover:retained-dropped");
	if (sync_commit(reg, lfd) != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot sync %s", dirpath);
		fsx_close(nfd);
		return -1;
	}
	if (live_fd != NULL)
		*live_fd = nfd;
	else
		fsx_close(nfd);
	return 0;
}

static int local_take_over(struct registry *reg, const char *workspace,
			   const struct registry_expect *x, const struct owner *next,
			   int *live_fd, struct lock_entry *prior,
			   struct wsl_error *err)
{
	char key[WSL_KEY_HEX + 1], dirpath[PATH_MAX];
	struct journal_event ev = { 0 };
	struct lock_entry *e = prior;
	int lfd = -1, rc = -1;
	size_t nh;
	bool was_shared;

	memset(prior, 0, sizeof(*prior));
	if (loc(reg)->locks_fd < 0)
		return wsl_error_set(err, WSL_NOT_HELD, "%s is not locked", workspace);
	if (local_lock(reg, LOCK_EX, NULL, err) != 0)
		return -1;
	crypto_path_key(workspace, key);
	if (local_get_key(reg, key, true, e, err) != 0)
		goto out;
	/* The same directory locked through another path, whose path a
	 * corrupt document may not tell (registry_locate gives it when it
	 * can): found by identity, acted on by its key. */
	if (e->state == LOCK_FREE) {
		if (identity_self(reg, workspace, key, true, e, err) != 0)
			goto out;
		if (e->state != LOCK_FREE)
			snprintf(key, sizeof(key), "%s", e->key);
	}
	if (path_join(dirpath, reg->path, "locks", err) != 0 ||
	    path_join(dirpath, dirpath, key, err) != 0)
		goto out;
	ev.action = x->action;
	ev.workspace_root = workspace;
	ev.force_reason = x->force ? x->force_reason : NULL;
	ev.next = next;

	/* A shared lock: the one holder x names becomes *prior (nh holders),
	 * unless a command that needs the workspace alone would run beside
	 * the other readers. */
	if (lockrules_check_alone(workspace, x, e, err) != 0)
		goto out;
	nh = shared_pick(e, x);
	if (lockrules_check_take_over(workspace, x, e, err) != 0)
		goto out;
	if (e->state == LOCK_CORRUPT) {
		ev.action = "clear-corrupt";
		ev.prior_raw = e->raw;
		ev.prior_raw_len = e->raw_len;
		if (journal_append(loc(reg)->dir_fd, reg->path, &ev, sync_data(reg), err) != 0 ||
		    (nh > 0 ? shared_leave(reg, key, workspace, e, nh, err) :
		     unpublish(reg, key, workspace, NULL, NULL, err)) != 0)
			goto out;
		CRASH_POINT("takeover:corrupt-removed");
		was_shared = reg->acquire_shared;
		reg->acquire_shared = nh > 0;	/* a reader's successor stays a reader */
		rc = next == NULL ? 0 : nh > 1 ? shared_join(reg, next, key, live_fd, err) :
			publish(reg, next, live_fd, err);
		reg->acquire_shared = was_shared;
		goto out;
	}
	ev.prior = &e->owner;
	ev.liveness = liveness_name(e->liveness);
	ev.liveness_reason = e->reason;
	if (journal_append(loc(reg)->dir_fd, reg->path, &ev, sync_data(reg), err) != 0)
		goto out;
	CRASH_POINT("takeover:journaled");
	if (next == NULL) {
		rc = nh > 0 ? shared_leave(reg, key, workspace, e, nh, err) :
			unpublish(reg, key, workspace, &e->owner, NULL, err);
		goto out;
	}
	lfd = holder_dir_open(reg, key, e->holder, dirpath, err);
	if (lfd < 0)
		goto out;
	/* The new owner is found by its identity before it takes over (a
	 * 0.1 owner's markers came from the upgrade: the same or orphans). */
	if (identity_markers(reg, key, next, MARKER_ADD, err) != 0 ||
	    (loc(reg)->ids_fd >= 0 && sync_before_commit(reg, loc(reg)->ids_fd) != 0) ||
	    (loc(reg)->idnest_fd >= 0 && sync_before_commit(reg, loc(reg)->idnest_fd) != 0))
		goto out;
	rc = replace_owner(reg, lfd, dirpath, next, live_fd, err);
out:
	fsx_close(lfd);
	local_unlock(reg);
	if (rc == 0) {
		wsl_error_clear(err);
		if (next == NULL)
			queue_poke_stopped(reg);	/* the workspace is free */
	}
	return rc;
}

static int local_retain(struct registry *reg, const char *workspace,
			const char *token, const char *json, struct wsl_error *err)
{
	char key[WSL_KEY_HEX + 1], dirpath[PATH_MAX];
	const struct lock_entry *h;
	struct lock_entry e;
	int lfd = -1, rc = -1;

	if (local_lock(reg, LOCK_EX, NULL, err) != 0)
		return -1;
	crypto_path_key(workspace, key);
	if (local_get_key(reg, key, false, &e, err) != 0)
		goto out;
	h = lock_entry_by_token(&e, token);	/* a shared lock's holder */
	if (lockrules_check_retain(workspace, token, h != NULL ? h : &e, err) != 0)
		goto out;
	lfd = holder_dir_open(reg, key, h->holder, dirpath, err);
	if (lfd < 0)
		goto out;
	unlinkat(lfd, "retained.json.new", 0);
	if (fsx_write_new_file(lfd, "retained.json.new", json, strlen(json), sync_data(reg)) != 0 ||
	    renameat(lfd, "retained.json.new", lfd, "retained.json") != 0 ||
	    sync_commit(reg, lfd) != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot write %s/retained.json", dirpath);
		goto out;
	}
	CRASH_POINT("retain:written");
	rc = 0;
out:
	fsx_close(lfd);
	lock_entry_free(&e);
	local_unlock(reg);
	return rc;
}

/* Reads the lock of a workspace by its path. */
static int local_get(struct registry *reg, const char *workspace, bool probe,
		     struct lock_entry *e, struct wsl_error *err)
{
	char key[WSL_KEY_HEX + 1];

	crypto_path_key(workspace, key);
	if (local_get_key(reg, key, probe, e, err) != 0)
		return -1;
	if (e->state == LOCK_FREE)
		return identity_self(reg, workspace, key, probe, e, err);
	if (e->state == LOCK_CORRUPT)
		snprintf(e->workspace_root, sizeof(e->workspace_root), "%s", workspace);
	return 0;
}

static int local_nest_lock(struct registry *reg, const char *workspace,
			   const char *token, int op, int *fd, struct wsl_error *err)
{
	char key[WSL_KEY_HEX + 1], dirpath[PATH_MAX], path[PATH_MAX];
	struct wsl_error local = { 0 };
	struct lock_entry e;
	struct stat st;
	int lfd, hfd, nfd, rc;

	*fd = -1;
	if (loc(reg)->locks_fd < 0)
		return NEST_LOCK_GONE;
	crypto_path_key(workspace, key);
	if (path_join(dirpath, reg->path, "locks", err) != 0 ||
	    path_join(dirpath, dirpath, key, err) != 0 ||
	    path_join(path, dirpath, LOCK_NESTED_FILE, err) != 0)
		return -1;
	lfd = fsx_open_dir_checked(loc(reg)->locks_fd, key, dirpath, false, &local);
	if (lfd < 0) {
		if (local.code == WSL_IO && local.sys_errno == ENOENT) {
			wsl_error_clear(&local);
			return NEST_LOCK_GONE;
		}
		*err = local;
		return -1;
	}
	/* A shared lock: the nested file of the holder with token. */
	hfd = shared_marked(lfd) ? shared_nest_dir(reg, key, lfd, dirpath, token, path, err) : lfd;
	if (hfd < 0) {
		fsx_close(lfd);
		return hfd == -2 ? NEST_LOCK_GONE : -1;
	}
	/* Made at publish; a lock published by 0.1 gets it on first use. */
	nfd = fsx_openat(hfd, LOCK_NESTED_FILE, O_RDONLY | O_CREAT | O_NONBLOCK | O_NOCTTY, 0600);
	if (hfd != lfd)
		fsx_close(hfd);
	if (nfd < 0 || fstat(nfd, &st) != 0 || fsx_check_private(&st, S_IFREG, path, err) != 0) {
		if (err->code == WSL_OK)
			wsl_error_errno(err, WSL_IO, errno, "cannot open %s", path);
		fsx_close(nfd);
		fsx_close(lfd);
		return -1;
	}
	if (fsx_flock(nfd, op) != 0) {
		rc = errno == EWOULDBLOCK ? NEST_LOCK_BUSY :
			wsl_error_errno(err, WSL_IO, errno, "cannot lock %s", path);
		fsx_close(nfd);
		fsx_close(lfd);
		return rc;
	}
	/* The lock may have been released, or taken over, before we held
	 * it: then this file protects nothing. */
	rc = 0;
	if ((loc(reg)->coord_held != 0 || (op & LOCK_EX) != 0) && !still_linked(reg, key, lfd, NULL)) {
		rc = NEST_LOCK_GONE;
	} else if ((op & LOCK_EX) != 0) {
		/* The holder before it lets go: it checks its token under
		 * .coordination in that release; meanwhile this only keeps
		 * nested runs from starting. */
	} else if (read_entry_at(reg, key, lfd, NULL, dirpath, false, &e, err) != 0) {
		rc = -1;
	} else {
		/* Read without .coordination, a lock renamed away reads as
		 * free (read_entry_at checks still_linked). */
		if (lock_entry_by_token(&e, token) == NULL)
			rc = NEST_LOCK_GONE;
		lock_entry_free(&e);
	}
	fsx_close(lfd);
	if (rc != 0) {
		fsx_flock(nfd, LOCK_UN);
		fsx_close(nfd);
		return rc;
	}
	*fd = nfd;
	return 0;
}

const struct registry_ops registry_local_ops = {
	.name = "local",
	.close = local_close,
	.lock = local_coord_lock,
	.unlock = local_unlock,
	.get = local_get,
	.overlaps = local_overlaps,
	.queued = queue_list,
	.try_acquire = local_try_acquire,
	.try_acquire_multi = local_try_acquire_multi,
	.multi_shared = true,
	.release = local_release,
	.list = local_list,
	.take_over = local_take_over,
	.retain = local_retain,
	.garbage = local_garbage,
	.wait_prepare = local_wait_prepare,
	.wait = local_wait,
	.wait_end = local_wait_end,
	.wait_until_change = true,
	.nest_on_conflict = true,
	.nest_lock = local_nest_lock,
};
