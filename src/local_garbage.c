/* local_garbage.c - the local backend's garbage: staging leftovers,
 * abandoned queue entries (their waiter died; local_wait.c) and orphan
 * markers (a marker whose lock is gone; format 2 below markers left in
 * ids/ are moved to idnest/ first), counted for the reclaim
 * preview and removed by reclaim --yes. A crash leaves them (the crash
 * table atop registry_local.c); they are harmless until collected.
 */
#include "registry_local.h"
#include "fsx.h"
#include "testhook.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Lists the names in directory fd (not "." or ".."); *out NULL-terminated. */
int list_names(int fd, char ***out, size_t *n)
{
	struct dirent *de;
	size_t cap = 0;
	char **names = NULL;
	DIR *dir;
	int dfd;

	*out = NULL;
	*n = 0;
	dfd = fsx_openat(fd, ".", O_RDONLY | O_DIRECTORY, 0);
	if (dfd < 0 || (dir = fdopendir(dfd)) == NULL) {
		fsx_close(dfd);
		return -1;
	}
	while ((de = readdir(dir)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (*n + 1 >= cap) {
			char **p;
			cap = cap ? cap * 2 : 16;
			p = realloc(names, cap * sizeof(*p));
			if (p == NULL)
				break;
			names = p;
		}
		names[*n] = strdup(de->d_name);
		if (names[*n] == NULL)
			break;
		(*n)++;
		names[*n] = NULL;
	}
	closedir(dir);
	*out = names;
	return 0;
}

void free_names(char **names, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* Whether staging/name is a lock staged by a running acquire (its
 * directory flock()ed: local_prestage.c), not garbage. */
static bool staged_in_use(int tmp_fd, const char *name)
{
	int fd = fsx_openat(tmp_fd, name, O_RDONLY | O_DIRECTORY, 0);
	bool busy;

	if (fd < 0)
		return false;
	busy = fsx_flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
	fsx_close(fd);
	return busy;
}

static int garbage_markers(struct registry *reg, int dirfd, const char *dirname,
			   bool remove, size_t *orphan_markers, struct wsl_error *err);

int local_garbage(struct registry *reg, bool remove, size_t *staging,
		  size_t *orphan_markers, struct wsl_error *err)
{
	char **names = NULL;
	size_t n = 0, i;

	*staging = *orphan_markers = 0;
	if (loc(reg)->tmp_fd >= 0) {
		if (list_names(loc(reg)->tmp_fd, &names, &n) != 0)
			return wsl_error_errno(err, WSL_IO, errno, "cannot read %s/staging",
					       reg->path);
		for (i = 0; i < n; i++) {
			struct stat st;
			if (staged_in_use(loc(reg)->tmp_fd, names[i]))
				continue;
			(*staging)++;
			if (!remove)
				continue;
			if (fstatat(loc(reg)->tmp_fd, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISDIR(st.st_mode))
				fsx_remove_dir_files(loc(reg)->tmp_fd, names[i]);
			else
				unlinkat(loc(reg)->tmp_fd, names[i], 0);
			CRASH_POINT("garbage:staging-removed");
		}
		free_names(names, n);
	}
	/* Abandoned queue entries count with the staging leftovers. */
	if (queue_garbage(reg, remove, staging, err) != 0)
		return -1;
	/* Format 2 below markers left in ids/ (a crashed upgrade, a format 2
	 * binary that opened the registry before it) move to idnest/ first. */
	if (remove && loc(reg)->format >= REGISTRY_FORMAT && loc(reg)->idnest_fd >= 0 &&
	    below_sweep(reg, true, err) != 0)
		return -1;
	if (garbage_markers(reg, loc(reg)->nest_fd, "nest", remove, orphan_markers, err) != 0 ||
	    garbage_markers(reg, loc(reg)->idnest_fd, "idnest", remove, orphan_markers, err) != 0)
		return -1;
	return garbage_markers(reg, loc(reg)->ids_fd, "ids", remove, orphan_markers, err);
}

/* Counts (and with remove deletes) the markers in dirfd (nest/, idnest/
 * or ids/) whose lock is gone. */
static int garbage_markers(struct registry *reg, int dirfd, const char *dirname,
			   bool remove, size_t *orphan_markers, struct wsl_error *err)
{
	char **names = NULL, **markers = NULL;
	size_t n = 0, m = 0, i, j;

	if (dirfd < 0)
		return 0;
	if (list_names(dirfd, &names, &n) != 0)
		return wsl_error_errno(err, WSL_IO, errno, "cannot read %s/%s", reg->path,
				       dirname);
	for (i = 0; i < n; i++) {
		int afd = fsx_openat(dirfd, names[i], O_RDONLY | O_DIRECTORY, 0);
		if (afd < 0)
			continue;
		if (list_names(afd, &markers, &m) == 0) {
			for (j = 0; j < m; j++) {
				struct stat st;
				char lk[WSL_KEY_HEX + 1];
				snprintf(lk, sizeof(lk), "%.64s", markers[j]);
				if (loc(reg)->locks_fd >= 0 &&
				    fstatat(loc(reg)->locks_fd, lk, &st, AT_SYMLINK_NOFOLLOW) == 0)
					continue;
				(*orphan_markers)++;
				if (remove)
					unlinkat(afd, markers[j], 0);
			}
			free_names(markers, m);
		}
		fsx_close(afd);
		if (remove)
			unlinkat(dirfd, names[i], AT_REMOVEDIR);
	}
	free_names(names, n);
	return 0;
}

