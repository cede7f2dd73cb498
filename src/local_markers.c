/* local_markers.c - the local backend's markers and the overlap search
 * over them: nest/A/KEY (by path) and ids/I/KEY, idnest/IA/KEY (by
 * identity, DESIGN.md section 3). Writing them is part of publish and
 * release (registry_local.c, whose header comment says why a marker
 * precedes its lock); reading them finds the locks that overlap a workspace
 * in both spaces. Each lookup reads one directory that holds only the kind
 * of marker it looks for, so an acquire reads O(depth) entries however
 * many locks are held beside it (format 3; format 2 kept ids/IA/KEY.below
 * beside the at markers, and those are still read: local_upgrade.c).
 */
#include "registry_local.h"
#include "fsx.h"
#include "wsmounts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The identity of a lock's workspace: its version 2 document's, else (a
 * 0.1 lock, or a corrupt one whose path could be read) the directory's as
 * it is now. False when it cannot be known. */
bool owner_identity(const struct owner *o, const char *root,
		    char fs[MOUNTINFO_FS_MAX + 1], char fspath[PATH_MAX])
{
	struct wsl_error ignored = { 0 };

	if (o != NULL && o->schema >= OWNER_SCHEMA) {
		snprintf(fs, MOUNTINFO_FS_MAX + 1, "%s", o->workspace_fs);
		snprintf(fspath, PATH_MAX, "%s", o->workspace_fs_path);
		return true;
	}
	if (root == NULL || root[0] == '\0')
		return false;
	if (wspath_identity(root, fs, fspath, &ignored) != 0) {
		wsl_error_clear(&ignored);
		return false;
	}
	return true;
}

bool entry_identity(const struct lock_entry *e, char fs[MOUNTINFO_FS_MAX + 1],
		    char fspath[PATH_MAX])
{
	return owner_identity(e->has_owner ? &e->owner : NULL,
			      e->has_owner ? e->owner.workspace_root : e->workspace_root,
			      fs, fspath);
}

struct overlap_ctx {
	struct registry *reg;
	bool probe;
	struct overlap *items;
	size_t n, cap;
	struct wsl_error *err;
	const char *self_key;	/* the workspace's own path key: not an overlap */
	const char *fs;		/* identity space: the workspace's filesystem */
	const char *fspath;	/* and its path inside it */
	int relation;		/* -1, else every overlap found is an ancestor
				 * (1) or a descendant (0): where the directory
				 * shared through a mount lies (overlaps_mounts) */
};

/* True when the lock key is the workspace's own or already listed (the
 * same lock is often found in both spaces). */
static bool overlap_seen(const struct overlap_ctx *c, const char *key)
{
	size_t i;

	if (c->self_key != NULL && strcmp(key, c->self_key) == 0)
		return true;
	for (i = 0; i < c->n; i++)
		if (strcmp(c->items[i].entry.key, key) == 0)
			return true;
	return false;
}

/* Keeps e (taking its memory) as an overlap, or frees it when seen. */
static int overlap_add(struct overlap_ctx *c, struct lock_entry *e, bool ancestor)
{
	struct lock_entry *slot;

	if (overlap_seen(c, e->key)) {
		lock_entry_free(e);
		return 0;
	}
	if (c->relation >= 0)
		ancestor = c->relation == 1;
	slot = lock_overlap_push(&c->items, &c->n, &c->cap, ancestor, c->err);
	if (slot == NULL) {
		lock_entry_free(e);
		return -1;
	}
	*slot = *e;
	return 0;
}

static int overlap_ancestor(const char *ancestor, void *arg)
{
	struct overlap_ctx *c = arg;
	char key[WSL_KEY_HEX + 1];
	struct lock_entry e;

	crypto_path_key(ancestor, key);
	if (local_get_key(c->reg, key, c->probe, &e, c->err) != 0)
		return -1;
	if (e.state == LOCK_FREE)
		return 0;
	if (e.state == LOCK_CORRUPT)
		snprintf(e.workspace_root, sizeof(e.workspace_root), "%s", ancestor);
	return overlap_add(c, &e, true);
}

/* How a lock found through a marker relates to the place marked. */
enum marker_match { MATCH_PATH_BELOW, MATCH_ID_AT, MATCH_ID_BELOW };

/* True when the held lock e really is where the marker says (markers
 * outlive a crash; an orphan is ignored). A corrupt lock counts (fail
 * closed): its place cannot be read. */
static bool marker_true(const struct overlap_ctx *c, const struct lock_entry *e,
			enum marker_match how, const char *where)
{
	char fs[MOUNTINFO_FS_MAX + 1], fspath[PATH_MAX];

	if (e->state == LOCK_CORRUPT)
		return true;
	if (how == MATCH_PATH_BELOW)
		return wspath_within(e->workspace_root, where);
	if (!entry_identity(e, fs, fspath) || strcmp(fs, c->fs) != 0)
		return false;
	if (how == MATCH_ID_AT)
		return strcmp(fspath, where) == 0;
	return strcmp(fspath, where) != 0 && wspath_within(fspath, where);
}

/* The locks marked in dirfd/KEY (nest/, ids/ or idnest/; KEY for where)
 * whose names end in suffix ("" or ID_BELOW), kept as overlaps when
 * marker_true. A format 2 below marker met in ids/ by a mutation of a
 * format 3 registry is noted (below_left): the mutation moves it. */
static int overlap_marked(struct overlap_ctx *c, int dirfd, const char *dirname,
			  const char *key, enum marker_match how, const char *where,
			  bool ancestor, const char *suffix)
{
	char path[PATH_MAX], lockkey[WSL_KEY_HEX + 1];
	size_t want = WSL_KEY_HEX + strlen(suffix);
	struct dirent *de;
	DIR *dir;
	int fd;

	if (dirfd < 0)
		return 0;
	if (path_join(path, c->reg->path, dirname, c->err) != 0 ||
	    path_join(path, path, key, c->err) != 0)
		return -1;
	fd = fsx_open_dir_checked(dirfd, key, path, false, c->err);
	if (fd < 0) {
		if (c->err->sys_errno == ENOENT && c->err->code == WSL_IO) {
			wsl_error_clear(c->err);
			return 0;
		}
		return -1;
	}
	dir = fdopendir(fd);
	if (dir == NULL) {
		fsx_close(fd);
		return wsl_error_errno(c->err, WSL_IO, errno, "cannot read %s", path);
	}
	while ((de = readdir(dir)) != NULL) {
		size_t len = strlen(de->d_name);
		struct lock_entry e;

		if (dirfd == loc(c->reg)->ids_fd && len == WSL_KEY_HEX + strlen(ID_BELOW) &&
		    strcmp(de->d_name + WSL_KEY_HEX, ID_BELOW) == 0)
			loc(c->reg)->below_left = true;
		if (len != want || strcmp(de->d_name + WSL_KEY_HEX, suffix) != 0)
			continue;
		memcpy(lockkey, de->d_name, WSL_KEY_HEX);
		lockkey[WSL_KEY_HEX] = '\0';
		if (!key_valid(lockkey) || overlap_seen(c, lockkey))
			continue;
		if (local_get_key(c->reg, lockkey, c->probe, &e, c->err) != 0) {
			closedir(dir);
			return -1;
		}
		if (e.state == LOCK_FREE || !marker_true(c, &e, how, where)) {
			lock_entry_free(&e);
			continue;	/* an orphan marker */
		}
		if (overlap_add(c, &e, ancestor) != 0) {
			closedir(dir);
			return -1;
		}
	}
	closedir(dir);
	return 0;
}

static int overlap_id_ancestor(const char *fspath, void *arg)
{
	struct overlap_ctx *c = arg;
	char key[WSL_KEY_HEX + 1];

	wspath_identity_key(c->fs, fspath, key);
	return overlap_marked(c, loc(c->reg)->ids_fd, "ids", key, MATCH_ID_AT, fspath, true, "");
}

/* False when no lock has an identity marker: every marker is a link to
 * ids/.marker, so its link count says so in one fstatat(2), and an
 * uncontended command skips the identity space's lookups. */
static bool identity_space_used(const struct registry *reg)
{
	struct stat st;

	if (loc(reg)->ids_fd < 0)
		return false;
	return fstatat(loc(reg)->ids_fd, ID_MARKER, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
	       st.st_nlink > 1;
}

/* The locks below c->fs and c->fspath by identity: idnest/I, and format
 * 2's ids/I/KEY.below (ids/I holds only the at markers of I besides: a
 * few entries). */
static int overlap_id_below(struct overlap_ctx *c)
{
	char key[WSL_KEY_HEX + 1];

	wspath_identity_key(c->fs, c->fspath, key);
	if (overlap_marked(c, loc(c->reg)->idnest_fd, "idnest", key, MATCH_ID_BELOW,
			   c->fspath, false, "") != 0)
		return -1;
	return overlap_marked(c, loc(c->reg)->ids_fd, "ids", key, MATCH_ID_BELOW,
			      c->fspath, false, ID_BELOW);
}

/* Overlaps in both spaces: ancestors by path and by identity, then
 * descendants by path and by identity. */
static int overlaps_both(struct overlap_ctx *c, const char *workspace)
{
	char key[WSL_KEY_HEX + 1];

	crypto_path_key(workspace, key);
	if (wspath_for_each_ancestor(workspace, overlap_ancestor, c) != 0 ||
	    (c->fs != NULL &&
	     wspath_for_each_fs_ancestor(c->fspath, overlap_id_ancestor, c) != 0) ||
	    overlap_marked(c, loc(c->reg)->nest_fd, "nest", key, MATCH_PATH_BELOW,
			   workspace, false, "") != 0)
		return -1;
	if (c->fs == NULL)
		return 0;
	return overlap_id_below(c);
}

/* A mutation (the exclusive coordination lock) of a format 3 registry
 * that met a format 2 below marker in ids/ (left by a crash in the
 * upgrade, or written by a format 2 binary that opened the registry
 * before it) finishes the upgrade: below_sweep moves them all, so the
 * next lookups read only the kind they look for. */
static void below_moved(struct registry *reg)
{
	struct wsl_error ignored = { 0 };

	if (!loc(reg)->below_left || loc(reg)->coord_held != LOCK_EX ||
	    loc(reg)->format < REGISTRY_FORMAT || loc(reg)->idnest_fd < 0)
		return;
	loc(reg)->below_left = false;
	/* Best effort: what stays is still read in place. */
	if (below_sweep(reg, true, &ignored) != 0)
		wsl_error_clear(&ignored);
}

/* Overlaps by path through wp, another path of the workspace or of a
 * directory inside it (wsmounts.h): a lock on an ancestor of it or below
 * it, and on the path itself when it is a directory inside. */
static int overlaps_path(struct overlap_ctx *c, const struct wsmounts_path *wp)
{
	const char *p = wp->path;
	char key[WSL_KEY_HEX + 1];

	/* A lock on an alias itself is the workspace's own (identity_self
	 * finds it). Through an alias, a lock above it is on an ancestor; a
	 * lock below it, or anywhere around a directory inside, shares a
	 * directory inside the workspace: a descendant. */
	crypto_path_key(p, key);
	c->relation = wp->alias ? 1 : 0;
	if ((!wp->alias && overlap_ancestor(p, c) != 0) ||
	    wspath_for_each_ancestor(p, overlap_ancestor, c) != 0)
		return -1;
	c->relation = 0;
	return overlap_marked(c, loc(c->reg)->nest_fd, "nest", key, MATCH_PATH_BELOW, p, false, "");
}

/* Overlaps by identity at the place pl (wsmounts.h): a lock on it or on an
 * ancestor of it, and when pl->below one below it. c->fs and c->fspath
 * name the place meanwhile. */
static int overlaps_place(struct overlap_ctx *c, const struct wsmounts_place *pl)
{
	c->fs = pl->fs;
	c->fspath = pl->fspath;
	c->relation = pl->below ? 0 : 1;
	if (overlap_id_ancestor(pl->fspath, c) != 0 ||
	    wspath_for_each_fs_ancestor(pl->fspath, overlap_id_ancestor, c) != 0)
		return -1;
	return pl->below ? overlap_id_below(c) : 0;
}

/* Overlaps through the mounts the workspace shares with the rest of this
 * mount namespace (wsmounts.h): a filesystem mounted below it, the same
 * directory mounted elsewhere. By identity only when the identity space is
 * used (ids). */
static int overlaps_mounts(struct overlap_ctx *c, const char *workspace, bool ids)
{
	const char *fs = c->fs, *fspath = c->fspath;
	struct wsmounts m;
	size_t i;
	int rc = 0;

	if (wsmounts_find(workspace, ids, &m, c->err) != 0)
		return -1;
	for (i = 0; rc == 0 && i < m.n_paths; i++)
		rc = overlaps_path(c, &m.paths[i]);
	for (i = 0; rc == 0 && i < m.n_places; i++)
		rc = overlaps_place(c, &m.places[i]);
	c->fs = fs;
	c->fspath = fspath;
	c->relation = -1;
	wsmounts_free(&m);
	return rc;
}

int local_overlaps(struct registry *reg, const char *workspace, bool probe,
		   struct overlap **out, size_t *n, struct wsl_error *err)
{
	char self[WSL_KEY_HEX + 1], fs[MOUNTINFO_FS_MAX + 1], fspath[PATH_MAX];
	struct overlap_ctx c = { reg, probe, NULL, 0, 0, err, self, NULL, NULL, -1 };
	struct wsl_error ignored = { 0 };

	*out = NULL;
	*n = 0;
	crypto_path_key(workspace, self);
	if (identity_space_used(reg) && wspath_identity(workspace, fs, fspath, &ignored) == 0) {
		c.fs = fs;
		c.fspath = fspath;
	}
	wsl_error_clear(&ignored);
	if (overlaps_both(&c, workspace) != 0 ||
	    overlaps_mounts(&c, workspace, identity_space_used(reg)) != 0) {
		lock_overlaps_free(c.items, c.n);
		return -1;
	}
	below_moved(reg);
	*out = c.items;
	*n = c.n;
	return 0;
}

/*
 * The lock on the workspace itself found by identity: another spelling of
 * the same directory (a bind mount, a container's mount) holds it at
 * another path key than skip_key. *e stays LOCK_FREE when there is none.
 */
int identity_self(struct registry *reg, const char *workspace, const char *skip_key,
		  bool probe, struct lock_entry *e, struct wsl_error *err)
{
	char fs[MOUNTINFO_FS_MAX + 1], fspath[PATH_MAX], key[WSL_KEY_HEX + 1];
	struct overlap_ctx c = { reg, probe, NULL, 0, 0, err, skip_key, fs, fspath, -1 };
	struct wsl_error ignored = { 0 };
	size_t i;

	memset(e, 0, sizeof(*e));
	e->state = LOCK_FREE;
	if (!identity_space_used(reg) || wspath_identity(workspace, fs, fspath, &ignored) != 0) {
		wsl_error_clear(&ignored);
		return 0;
	}
	wspath_identity_key(fs, fspath, key);
	if (overlap_marked(&c, loc(reg)->ids_fd, "ids", key, MATCH_ID_AT, fspath, true, "") != 0) {
		lock_overlaps_free(c.items, c.n);
		return -1;
	}
	if (c.n > 0) {
		*e = c.items[0].entry;
		for (i = 1; i < c.n; i++)
			lock_entry_free(&c.items[i].entry);
		free(c.items);
	}
	below_moved(reg);
	return 0;
}

/* Links the marker name into directory fd: a hard link to the marker
 * inode of m's space (nest/.marker, ids/.marker or idnest/.marker), made
 * first when it is missing (a registry made before it existed); where the
 * filesystem allows no more links to it (EMLINK), an empty file of its
 * own. */
static int marker_link(const struct marker_ctx *m, int fd, const char *name)
{
	int src = m->dirfd;
	int mfd;

	if (linkat(src, ID_MARKER, fd, name, 0) == 0 || errno == EEXIST)
		return 0;
	if (errno == ENOENT && marker_inode_make(src) == 0 &&
	    (linkat(src, ID_MARKER, fd, name, 0) == 0 || errno == EEXIST))
		return 0;
	if (errno != EMLINK && errno != ENOENT)
		return -1;
	mfd = fsx_openat(fd, name, O_WRONLY | O_CREAT | O_NONBLOCK, 0600);
	if (mfd < 0)
		return -1;
	return fsx_close(mfd);
}

int marker_inode_make(int dirfd)
{
	if (fsx_write_new_file(dirfd, ID_MARKER, "", 0, false) != 0 && errno != EEXIST)
		return -1;
	return 0;
}

int marker_apply(const char *ancestor, void *arg)
{
	struct marker_ctx *m = arg;
	char akey[WSL_KEY_HEX + 1];
	int fd;

	if (m->fs != NULL)
		wspath_identity_key(m->fs, ancestor, akey);
	else
		crypto_path_key(ancestor, akey);
	if (m->step == MARKER_SYNC) {
		/* After every marker exists: the first fsync commits them all
		 * on a journaling filesystem, the others find little to do. */
		fd = fsx_openat(m->dirfd, akey, O_RDONLY | O_DIRECTORY, 0);
		if (fd < 0 || sync_before_commit(m->reg, fd) != 0) {
			wsl_error_errno(m->err, WSL_IO, errno, "cannot sync nest marker of %s",
					ancestor);
			fsx_close(fd);
			return -1;
		}
		fsx_close(fd);
		return 0;
	}
	if (m->step == MARKER_REMOVE) {
		/* The directory stays for the next lock below the ancestor
		 * (no directory made and removed per command); reclaim
		 * collects it once it is empty. */
		fd = fsx_openat(m->dirfd, akey, O_RDONLY | O_DIRECTORY, 0);
		if (fd < 0)
			return 0;
		unlinkat(fd, m->key, 0);
		fsx_close(fd);
		return 0;
	}
	return marker_add_at(m, akey);
}

int marker_add_at(struct marker_ctx *m, const char *akey)
{
	char path[PATH_MAX];
	int fd;

	if (path_join(path, m->reg->path, m->dirname, m->err) != 0 ||
	    path_join(path, path, akey, m->err) != 0)
		return -1;
	fd = fsx_open_dir_checked(m->dirfd, akey, path, false, m->err);
	if (fd < 0 && m->err->code == WSL_IO && m->err->sys_errno == ENOENT) {
		/* The first lock below this ancestor: its directory is made
		 * (and kept), and its parent then needs an fsync. */
		wsl_error_clear(m->err);
		if (m->dirfd == loc(m->reg)->ids_fd)
			loc(m->reg)->ids_made = true;
		else if (m->dirfd == loc(m->reg)->idnest_fd)
			loc(m->reg)->idnest_made = true;
		else
			loc(m->reg)->nest_made = true;
		fd = fsx_open_dir_checked(m->dirfd, akey, path, true, m->err);
	}
	if (fd < 0)
		return -1;
	if (marker_link(m, fd, m->key) != 0) {
		wsl_error_errno(m->err, WSL_IO, errno, "cannot write %s marker in %s",
				m->fs != NULL ? "identity" : "nest", path);
		fsx_close(fd);
		return -1;
	}
	fsx_close(fd);
	return 0;
}

/* Adds, syncs or removes (step) the identity markers of the lock key whose
 * owner is o (a 0.1 or corrupt one: root's identity now): ids/I/key and
 * idnest/IA/key for every identity ancestor IA. Unknown identity: nothing.
 * Only a format 3 registry is written (a mutation upgrades first), so
 * idnest/ is open whenever ids/ is. */
int identity_markers_at(struct registry *reg, const char *key, const char *fs,
			const char *fspath, enum marker_step step,
			struct wsl_error *err)
{
	struct marker_ctx m = { reg, key, step, err, fs, loc(reg)->idnest_fd, "idnest" };
	int rc;

	if (loc(reg)->ids_fd < 0)
		return 0;
	if (loc(reg)->idnest_fd >= 0)
		rc = wspath_for_each_fs_ancestor(fspath, marker_apply, &m);
	else if (step == MARKER_REMOVE)
		rc = 0;
	else
		rc = wsl_error_set(err, WSL_INTERNAL, "registry %s has no idnest/", reg->path);
	if (rc != 0 && step != MARKER_REMOVE)
		return -1;
	m.dirfd = loc(reg)->ids_fd;
	m.dirname = "ids";
	return marker_apply(fspath, &m);
}

int identity_markers(struct registry *reg, const char *key, const struct owner *o,
		     enum marker_step step, struct wsl_error *err)
{
	char fs[MOUNTINFO_FS_MAX + 1], fspath[PATH_MAX];

	if (!owner_identity(o, o->workspace_root, fs, fspath))
		return 0;
	return identity_markers_at(reg, key, fs, fspath, step, err);
}

