/* local_upgrade.c - the local backend's format 2 -> 3 upgrade (layout
 * atop registry_local.c). Format 2 kept the identity "below" markers
 * beside the "at" markers, as ids/IA/KEY.below, so that with 10 000 locks
 * under one directory every acquire read 10 000 entries to find the one
 * lock at that ancestor; format 3 keeps them as idnest/IA/KEY.
 *
 * Steps, under the coordination lock: (1) each below marker of a held lock
 * is linked to idnest/IA/KEY and synced; (2) the stamp is replaced by
 * rename (the commit point); (3) the ids/ copies are unlinked. A crash
 * leaves, by step:
 *  - before (2): a format 2 registry with extra idnest/ markers, which a
 *    format 2 binary never reads; the next format 3 mutation upgrades it
 *    again (links that exist are kept).
 *  - after (2): format 3 with below markers still in ids/. A format 2
 *    binary refuses it. A format 3 one reads them in place (a lookup of
 *    descendants reads idnest/I and the *.below names of ids/I, which
 *    holds only the few at markers of I besides), and the first mutation
 *    that meets one in a directory it reads finishes the upgrade:
 *    below_sweep moves them all (reclaim --yes does too).
 * A format 2 binary that opened the registry before the upgrade (a
 * waiter) and acquires after it writes format 2 markers: they are read
 * and moved the same way. A format 2 `run` holding a lock across the
 * upgrade keeps its lock, bytes and markers; its release leaves idnest/
 * orphans, which are ignored (every marker is checked against its lock)
 * and collected by reclaim. The 0.1 (format 1) upgrade is in local_open.c.
 */
#include "registry_local.h"
#include "fsx.h"
#include "testhook.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether name is a format 2 below marker, KEY.below; its KEY into key. */
static bool below_name(const char *name, char key[WSL_KEY_HEX + 1])
{
	if (strlen(name) != WSL_KEY_HEX + strlen(ID_BELOW) ||
	    strcmp(name + WSL_KEY_HEX, ID_BELOW) != 0)
		return false;
	memcpy(key, name, WSL_KEY_HEX);
	key[WSL_KEY_HEX] = '\0';
	return key_valid(key);
}

/* Whether the lock locks/key exists (its markers are to be kept). */
static bool lock_exists(const struct registry *reg, const char *key)
{
	struct stat st;

	return loc(reg)->locks_fd >= 0 &&
	       fstatat(loc(reg)->locks_fd, key, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Links every below marker of a held lock in ids/akey (names, n of them)
 * into idnest/akey, then makes them durable before anything is unlinked:
 * idnest/akey, and idnest/ when that directory was made (each only where
 * the filesystem does not commit metadata in order). */
static int below_link(struct registry *reg, const char *akey, char **names, size_t n,
		      struct wsl_error *err)
{
	char key[WSL_KEY_HEX + 1];
	struct marker_ctx m = { reg, key, MARKER_ADD, err, "", loc(reg)->idnest_fd, "idnest" };
	bool linked = false;
	int fd;

	loc(reg)->idnest_made = false;
	for (size_t i = 0; i < n; i++) {
		if (!below_name(names[i], key) || !lock_exists(reg, key))
			continue;
		if (marker_add_at(&m, akey) != 0)
			return -1;
		linked = true;
	}
	if (!linked)
		return 0;
	fd = fsx_openat(loc(reg)->idnest_fd, akey, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0 || sync_before_commit(reg, fd) != 0 ||
	    (loc(reg)->idnest_made && sync_before_commit(reg, loc(reg)->idnest_fd) != 0)) {
		wsl_error_errno(err, WSL_IO, errno, "cannot sync %s/idnest/%s", reg->path, akey);
		fsx_close(fd);
		return -1;
	}
	fsx_close(fd);
	return 0;
}

/* below_sweep's work on one directory ids/akey. */
static int below_move_dir(struct registry *reg, const char *akey, bool remove,
			  struct wsl_error *err)
{
	char key[WSL_KEY_HEX + 1], **names = NULL;
	size_t n = 0;
	int fd, rc = 0;

	fd = fsx_openat(loc(reg)->ids_fd, akey, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return 0;	/* .marker, or gone */
	if (list_names(fd, &names, &n) != 0) {
		rc = wsl_error_errno(err, WSL_IO, errno, "cannot read %s/ids/%s", reg->path, akey);
		goto out;
	}
	if (below_link(reg, akey, names, n, err) != 0) {
		rc = -1;
		goto out;
	}
	for (size_t i = 0; remove && i < n; i++) {
		if (!below_name(names[i], key))
			continue;
		unlinkat(fd, names[i], 0);
		CRASH_POINT("upgrade:below-removing");
	}
out:
	free_names(names, n);
	fsx_close(fd);
	return rc;
}

int below_sweep(struct registry *reg, bool remove, struct wsl_error *err)
{
	char **dirs = NULL;
	size_t n = 0;
	int rc = 0;

	if (loc(reg)->ids_fd < 0)
		return 0;
	if (loc(reg)->idnest_fd < 0)
		return wsl_error_set(err, WSL_INTERNAL, "registry %s has no idnest/", reg->path);
	if (list_names(loc(reg)->ids_fd, &dirs, &n) != 0)
		return wsl_error_errno(err, WSL_IO, errno, "cannot read %s/ids", reg->path);
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (key_valid(dirs[i]))
			rc = below_move_dir(reg, dirs[i], remove, err);
	free_names(dirs, n);
	return rc;
}

/* Format 2 -> 3, steps (1) to (3) of the header comment. */
int upgrade_v2(struct registry *reg, struct wsl_error *err)
{
	struct wsl_error ignored = { 0 };

	if ((loc(reg)->idnest_fd < 0 &&
	     open_subdir(reg, "idnest", true, &loc(reg)->idnest_fd, err) != 0))
		return -1;
	if (marker_inode_make(loc(reg)->idnest_fd) != 0)
		return wsl_error_errno(err, WSL_IO, errno, "cannot create %s/idnest/%s",
				       reg->path, ID_MARKER);
	if (sync_before_commit(reg, loc(reg)->dir_fd) != 0)
		return wsl_error_errno(err, WSL_IO, errno, "cannot sync %s", reg->path);
	if (below_sweep(reg, false, err) != 0)
		return -1;
	CRASH_POINT("upgrade:below-linked");
	if (stamp_upgrade(reg, loc(reg)->tmp_fd, false, err) != 0)
		return -1;
	loc(reg)->format = REGISTRY_FORMAT;
	CRASH_POINT("upgrade:format3-stamped");
	/* Committed: what this cannot remove is read in place and moved by
	 * a later mutation, so it fails no command. */
	if (below_sweep(reg, true, &ignored) != 0)
		wsl_error_clear(&ignored);
	return 0;
}
