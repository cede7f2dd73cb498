/* local_open.c - the local backend: opening and creating the registry
 * directory, its format stamp (tmp) and the upgrades (0.1's format 1 -> 3
 * here, 2 -> 3 in local_upgrade.c); closing it. The layout and the
 * upgrades' crash steps are described atop registry_local.c.
 */
#include "registry_local.h"
#include "fsx.h"
#include "testhook.h"
#include "platform.h"
#include "wsmounts.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STAMP_PREFIX "wslock registry format "
#define STAMP_STR_(n) #n
#define STAMP_STR(n) STAMP_STR_(n)
/* The stamp this binary writes: "wslock registry format 3\n". */
#define STAMP_TEXT STAMP_PREFIX STAMP_STR(REGISTRY_FORMAT) "\n"

/* The parents of the registry path to be made: with make_below NULL none
 * (the parent must exist), else mkdir -p below make_below (which must
 * exist), each new directory 0700. WSL_USAGE when what must exist does not:
 * a mistyped WSLOCK_DIR or an unmounted volume would otherwise get a new,
 * empty registry beside the real one, and two holders of one workspace. */
static int make_parents(const char *path, const char *make_below, struct wsl_error *err)
{
	char buf[PATH_MAX];
	struct stat st;
	char *p;
	size_t skip;

	snprintf(buf, sizeof(buf), "%s", path);
	if (make_below == NULL) {
		p = strrchr(buf, '/');
		if (p == NULL || p == buf)
			return 0;
		*p = '\0';
		if (stat(buf, &st) == 0 && S_ISDIR(st.st_mode))
			return 0;
		return wsl_error_set(err, WSL_USAGE,
				     "registry %s does not exist and its parent %s is %s: "
				     "a registry named by -d or WSLOCK_DIR is made only in an existing directory "
				     "(mistyped, or a volume not mounted?); create the parent first if this is meant",
				     path, buf, errno == ENOENT ? "missing" : "not a directory");
	}
	if (stat(make_below, &st) != 0 || !S_ISDIR(st.st_mode))
		return wsl_error_set(err, WSL_USAGE,
				     "the default registry %s cannot be made: %s does not exist "
				     "(set WSLOCK_DIR or -d to an existing directory's registry)",
				     path, make_below);
	skip = strlen(make_below);
	if (strncmp(buf, make_below, skip) != 0)
		skip = 0;
	for (p = buf + (skip > 0 ? skip : 1); *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0700) != 0 && errno != EEXIST)
			return wsl_error_errno(err, WSL_IO, errno,
					       "cannot create %s", buf);
		*p = '/';
	}
	return 0;
}

/* Refuses a registry netfs does not allow, naming path. */
static int check_netfs(int fd, const char *path, struct wsl_error *err)
{
	const char *netfs = platform_network_fs(fd);
	const char *allow = getenv("WSLOCK_ALLOW_NETWORK_FS");

	if (netfs != NULL && (allow == NULL || strcmp(allow, "1") != 0))
		return wsl_error_set(err, WSL_NETWORK_FS,
				     "registry %s is on a network filesystem (%s), where its kernel lock does not hold across machines; use --backend etcd, or set WSLOCK_ALLOW_NETWORK_FS=1 if only this machine uses it",
				     path, netfs);
	return 0;
}

/*
 * Before a missing registry is created: the checks that would refuse it
 * afterwards (inside the workspace, on a network filesystem), made on where
 * it would be, so that a refused command creates nothing.
 */
static int check_before_create(const char *path, const char *workspace,
			       struct wsl_error *err)
{
	char existing[PATH_MAX], real[PATH_MAX], would[PATH_MAX];
	size_t cut = strlen(path);
	int fd, rc;

	snprintf(existing, sizeof(existing), "%s", path);
	for (;;) {
		char *slash = strrchr(existing, '/');
		if (slash == NULL)
			return 0;
		if (slash == existing) {
			existing[1] = '\0';
			cut = 1;
		} else {
			*slash = '\0';
			cut = (size_t)(slash - existing);
		}
		if (realpath(existing, real) != NULL)
			break;
		if (errno != ENOENT || cut == 1)
			return 0;	/* the real attempt will report it */
	}
	if (snprintf(would, sizeof(would), "%s%s", strcmp(real, "/") == 0 ? "" : real,
		     path + cut) >= (int)sizeof(would))
		return wsl_error_set(err, WSL_UNSAFE_PATH, "registry path %s is longer than PATH_MAX",
				     path);
	if (workspace != NULL &&
	    (wspath_within(would, workspace) || wspath_within(workspace, would)))
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "registry %s and workspace %s overlap; choose a registry outside every workspace (-d or WSLOCK_DIR)",
				     path, workspace);
	if (workspace != NULL &&
	    wspath_check_apart_planned(workspace, path, real, path + cut, err) != 0)
		return -1;
	/* A filesystem mounted inside the workspace reaches the registry by
	 * its own path (wsmounts_apart): refused before anything is made. */
	if (workspace != NULL) {
		int where = wsmounts_apart(workspace, would, err);

		if (where < 0)
			return -1;
		if (where != WSMOUNTS_APART)
			return wsl_error_set(err, WSL_UNSAFE_PATH,
					     "registry %s and workspace %s overlap through a mount (a filesystem mounted inside the workspace, or a bind mount); choose a registry outside every workspace (-d or WSLOCK_DIR)",
					     path, workspace);
	}
	fd = fsx_open(real, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return 0;
	rc = check_netfs(fd, path, err);
	fsx_close(fd);
	return rc;
}

static int local_init(struct registry *reg, struct wsl_error *err)
{
	struct local *l = calloc(1, sizeof(*l));

	memset(reg, 0, sizeof(*reg));
	if (l == NULL)
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	l->dir_fd = l->locks_fd = l->nest_fd = l->tmp_fd = -1;
	l->coord_fd = l->ids_fd = l->idnest_fd = -1;
	l->format = REGISTRY_FORMAT;
	l->fs_kind = FS_OTHER;
	reg->ops = &registry_local_ops;
	reg->backend = l;
	return 0;
}

/* Opens (or with create makes) the subdirectory name; *fd stays -1 when it
 * is missing and create is false. */
int open_subdir(struct registry *reg, const char *name, bool create,
		       int *fd, struct wsl_error *err)
{
	char path[PATH_MAX];

	if (path_join(path, reg->path, name, err) != 0)
		return -1;
	*fd = fsx_open_dir_checked(loc(reg)->dir_fd, name, path, create, err);
	if (*fd < 0) {
		if (!create && err->sys_errno == ENOENT) {
			wsl_error_clear(err);
			return 0;
		}
		return -1;
	}
	return 0;
}

/* Reads the stamp file tmp: its format number into *format. */
static int stamp_read(struct registry *reg, int *format, struct wsl_error *err)
{
	char path[PATH_MAX], *buf = NULL, *end;
	size_t len;
	long n;

	if (path_join(path, reg->path, "tmp", err) != 0 ||
	    fsx_read_file_checked(loc(reg)->dir_fd, "tmp", path, 256, &buf, &len, err) != 0)
		return -1;
	errno = 0;
	if (len < sizeof(STAMP_PREFIX) || buf[len - 1] != '\n' ||
	    memcmp(buf, STAMP_PREFIX, sizeof(STAMP_PREFIX) - 1) != 0 ||
	    (n = strtol(buf + sizeof(STAMP_PREFIX) - 1, &end, 10), errno != 0) ||
	    end != buf + len - 1 || n < 2 || n > 999999) {
		free(buf);
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "%s is not a registry format stamp (\"%s%d\")", path,
				     STAMP_PREFIX, REGISTRY_FORMAT);
	}
	free(buf);
	*format = (int)n;
	return 0;
}

int stamp_upgrade(struct registry *reg, int staging, bool exchange,
		  struct wsl_error *err)
{
	static const char stamp[] = STAMP_TEXT;
	char name[STAGE_NAME_MAX];

	stage_name(name, "stamp");
	if (fsx_write_new_file(staging, name, stamp, sizeof(stamp) - 1, sync_data(reg)) != 0)
		return wsl_error_errno(err, WSL_IO, errno, "cannot write %s/staging/%s",
				       reg->path, name);
	if (renameat2(staging, name, loc(reg)->dir_fd, "tmp",
		      exchange ? RENAME_EXCHANGE : 0) != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot stamp %s/tmp", reg->path);
		unlinkat(staging, name, 0);
		return -1;
	}
	if (sync_commit(reg, loc(reg)->dir_fd) != 0)
		return wsl_error_errno(err, WSL_IO, errno, "cannot sync %s", reg->path);
	return 0;
}

/* Publishes the stamp of a new registry: written whole in staging/ (the
 * registry's open tmp_fd), then renamed to tmp with RENAME_NOREPLACE, so a
 * second wslock creating the registry at the same moment never reads a
 * stamp before its bytes are there. Returns 0, 1 when another process
 * published one first (ours is removed), -1 with err. Entries of staging/
 * are garbage to whoever holds .coordination (reclaim sweeps them), and
 * this runs outside it: a stamp swept before its rename (ENOENT) is
 * written again, a few times at most. A crash before the rename leaves a
 * file in staging/, which reclaim collects. */
static int stamp_publish(struct registry *reg, struct wsl_error *err)
{
	char name[STAGE_NAME_MAX];
	int e = 0;

	for (int attempt = 0; attempt < 8; attempt++) {
		stage_name(name, "stamp");
		if (fsx_write_new_file(loc(reg)->tmp_fd, name, STAMP_TEXT,
				       sizeof(STAMP_TEXT) - 1, sync_data(reg)) != 0) {
			if (errno == ENOENT)
				continue;
			return wsl_error_errno(err, WSL_IO, errno,
					       "cannot write %s/staging/%s",
					       reg->path, name);
		}
		if (renameat2(loc(reg)->tmp_fd, name, loc(reg)->dir_fd, "tmp",
			      RENAME_NOREPLACE) == 0) {
			if (sync_commit(reg, loc(reg)->dir_fd) != 0)
				return wsl_error_errno(err, WSL_IO, errno,
						       "cannot sync %s", reg->path);
			return 0;
		}
		e = errno;
		unlinkat(loc(reg)->tmp_fd, name, 0);
		if (e == EEXIST)
			return 1;
		if (e != ENOENT)
			break;
	}
	return wsl_error_errno(err, WSL_IO, e != 0 ? e : ENOENT, "cannot stamp %s/tmp",
			       reg->path);
}

/* ids/ and idnest/ with their .marker, the inode every identity marker
 * links to (made again by the first marker when it is missing;
 * nest/.marker is made that way). */
static int id_dirs_make(struct registry *reg, struct wsl_error *err)
{
	if ((loc(reg)->ids_fd < 0 &&
	     open_subdir(reg, "ids", true, &loc(reg)->ids_fd, err) != 0) ||
	    (loc(reg)->idnest_fd < 0 &&
	     open_subdir(reg, "idnest", true, &loc(reg)->idnest_fd, err) != 0))
		return -1;
	if (marker_inode_make(loc(reg)->ids_fd) != 0)
		return wsl_error_errno(err, WSL_IO, errno, "cannot create %s/ids/%s",
				       reg->path, ID_MARKER);
	if (marker_inode_make(loc(reg)->idnest_fd) != 0)
		return wsl_error_errno(err, WSL_IO, errno, "cannot create %s/idnest/%s",
				       reg->path, ID_MARKER);
	return 0;
}

/*
 * The registry's format, from tmp: a directory is a 0.1 registry (format 1,
 * staging in tmp/ until it is upgraded), a file the stamp. A registry
 * without tmp is new: with create it gets ids/, idnest/, staging/ and the
 * stamp. A format above REGISTRY_FORMAT is refused (WSL_UNSAFE_PATH).
 * idnest/ of a format 2 registry is opened when a crashed upgrade left it
 * (it is read beside ids/), never made.
 */
static int format_open(struct registry *reg, bool create, struct wsl_error *err)
{
	struct stat st;

	fsx_close(loc(reg)->tmp_fd);
	loc(reg)->tmp_fd = -1;
	if (fstatat(loc(reg)->dir_fd, "tmp", &st, AT_SYMLINK_NOFOLLOW) != 0) {
		if (errno != ENOENT)
			return wsl_error_errno(err, WSL_IO, errno, "cannot stat %s/tmp",
					       reg->path);
		loc(reg)->format = REGISTRY_FORMAT;
		if (!create)
			return 0;
		if (id_dirs_make(reg, err) != 0 ||
		    open_subdir(reg, "staging", true, &loc(reg)->tmp_fd, err) != 0)
			return -1;
		switch (stamp_publish(reg, err)) {
		case 0:
			return 0;
		case 1:		/* another wslock made it first */
			return format_open(reg, create, err);
		default:
			return -1;
		}
	}
	if (S_ISDIR(st.st_mode)) {
		loc(reg)->format = 1;
		return open_subdir(reg, "tmp", create, &loc(reg)->tmp_fd, err);
	}
	if (stamp_read(reg, &loc(reg)->format, err) != 0)
		return -1;
	if (loc(reg)->format > REGISTRY_FORMAT)
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "registry %s has format %d, newer than this wslock knows (%d); use a newer wslock",
				     reg->path, loc(reg)->format, REGISTRY_FORMAT);
	if (loc(reg)->ids_fd < 0 && open_subdir(reg, "ids", create, &loc(reg)->ids_fd, err) != 0)
		return -1;
	if (loc(reg)->idnest_fd < 0 &&
	    open_subdir(reg, "idnest", create && loc(reg)->format >= REGISTRY_FORMAT,
			&loc(reg)->idnest_fd, err) != 0)
		return -1;
	return open_subdir(reg, "staging", create, &loc(reg)->tmp_fd, err);
}

/* The journal, where there is one, is checked as every registry file is
 * (DESIGN.md section 5: a symlink, a foreign owner or group/world bits are
 * refused), by every command at open, before anything is changed: not
 * only by the take-over that appends to it (journal_append refuses the
 * same file with the same words), after its work was done. */
static int journal_check(struct registry *reg, const char *path, struct wsl_error *err)
{
	char jpath[PATH_MAX];
	struct stat st;

	if (path_join(jpath, path, "journal.jsonl", err) != 0)
		return -1;
	if (fstatat(loc(reg)->dir_fd, "journal.jsonl", &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT ? 0 :
			wsl_error_errno(err, WSL_IO, errno, "cannot stat %s", jpath);
	return fsx_check_private(&st, S_IFREG, jpath, err);
}

static int open_dirs(struct registry *reg, const char *path, const char *workspace,
		     bool create, const char *make_below, struct wsl_error *err)
{
	struct stat st;
	int fd;

	snprintf(reg->path, sizeof(reg->path), "%s", path);
	if (lstat(path, &st) != 0) {
		if (errno != ENOENT)
			return wsl_error_errno(err, WSL_IO, errno,
					       "cannot stat registry %s", path);
		if (!create) {
			/* Nothing was ever locked here; say so without
			 * creating anything. */
			snprintf(reg->real, sizeof(reg->real), "%s", path);
			return 0;
		}
		if (check_before_create(path, workspace, err) != 0 ||
		    make_parents(path, make_below, err) != 0)
			return -1;
		if (mkdir(path, 0700) != 0 && errno != EEXIST)
			return wsl_error_errno(err, WSL_IO, errno,
					       "cannot create registry %s", path);
		if (lstat(path, &st) != 0)
			return wsl_error_errno(err, WSL_IO, errno,
					       "cannot stat registry %s", path);
	}
	if (fsx_check_private(&st, S_IFDIR, path, err) != 0)
		return -1;
	loc(reg)->dir_fd = fsx_open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
	if (loc(reg)->dir_fd < 0)
		return wsl_error_errno(err, WSL_UNSAFE_PATH, errno,
				       "cannot open registry %s", path);
	if (fstat(loc(reg)->dir_fd, &st) != 0 ||
	    fsx_check_private(&st, S_IFDIR, path, err) != 0)
		goto fail;
	loc(reg)->exists = true;
	if (realpath(path, reg->real) == NULL) {
		wsl_error_errno(err, WSL_IO, errno, "cannot resolve registry %s", path);
		goto fail;
	}
	loc(reg)->fs_kind = platform_fs_kind(loc(reg)->dir_fd);
	if (check_netfs(loc(reg)->dir_fd, path, err) != 0)
		goto fail;
	if (open_subdir(reg, "locks", create, &loc(reg)->locks_fd, err) != 0 ||
	    open_subdir(reg, "nest", create, &loc(reg)->nest_fd, err) != 0 ||
	    format_open(reg, create, err) != 0)
		goto fail;
	fd = fsx_openat(loc(reg)->dir_fd, ".coordination",
			create ? O_RDWR | O_CREAT | O_NONBLOCK : O_RDONLY | O_NONBLOCK,
			0600);
	if (fd < 0 && !(errno == ENOENT && !create)) {
		char cpath[PATH_MAX + 16];

		snprintf(cpath, sizeof(cpath), "%s/.coordination", path);
		fsx_open_failed(errno, cpath, err);
		goto fail;
	}
	loc(reg)->coord_fd = fd;
	if (fd >= 0) {
		char cpath[PATH_MAX];
		if (path_join(cpath, path, ".coordination", err) != 0 ||
		    fstat(fd, &st) != 0 ||
		    fsx_check_private(&st, S_IFREG, cpath, err) != 0)
			goto fail;
	}
	if (journal_check(reg, path, err) != 0)
		goto fail;
	return 0;
fail:
	if (err->code == WSL_OK)
		wsl_error_errno(err, WSL_IO, errno, "cannot open registry %s", path);
	return -1;
}

int local_open(struct registry *reg, const char *path, const char *workspace,
	       bool create, const char *make_below, struct wsl_error *err)
{
	if (local_init(reg, err) != 0)
		return -1;
	if (open_dirs(reg, path, workspace, create, make_below, err) != 0) {
		local_close(reg);
		return -1;
	}
	return 0;
}

/* Closes every descriptor (dropping the coordination lock) and frees the
 * state; reg is not open afterwards. */
void local_close(struct registry *reg)
{
	struct local *l = loc(reg);

	if (l == NULL)
		return;
	local_wait_close(reg);
	prestage_drop(reg);
	fsx_close(l->coord_fd);
	fsx_close(l->tmp_fd);
	fsx_close(l->nest_fd);
	fsx_close(l->ids_fd);
	fsx_close(l->idnest_fd);
	fsx_close(l->locks_fd);
	fsx_close(l->dir_fd);
	free(l);
	reg->backend = NULL;
	reg->ops = NULL;
}

/*
 * Upgrades a 0.1 registry (format 1) straight to REGISTRY_FORMAT; the
 * caller holds the coordination lock exclusively, so no wslock is inside a
 * mutation. Every lock keeps its bytes at its 0.1 key and gets its
 * identity markers (format 3's: ids/ and idnest/); then the stamp file
 * takes tmp/'s place in one rename(RENAME_EXCHANGE) (the commit point),
 * which moves the old tmp/ into staging/: a 0.1 `run` holding a lock across the
 * upgrade still releases through it (it opened it at its start), and
 * reclaim collects it later like any staging leftover.
 */
static int upgrade_v01(struct registry *reg, struct wsl_error *err)
{
	char **names = NULL;
	size_t n = 0, i;
	int staging = -1, rc = -1;

	if (id_dirs_make(reg, err) != 0 ||
	    open_subdir(reg, "staging", true, &staging, err) != 0)
		goto out;
	if (loc(reg)->locks_fd >= 0 && list_names(loc(reg)->locks_fd, &names, &n) != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot read %s/locks", reg->path);
		goto out;
	}
	for (i = 0; i < n; i++) {
		char fs[MOUNTINFO_FS_MAX + 1], fspath[PATH_MAX];
		struct lock_entry e;

		if (!key_valid(names[i]))
			continue;
		if (local_get_key(reg, names[i], false, &e, err) != 0)
			goto out;
		if (e.state != LOCK_FREE && entry_identity(&e, fs, fspath) &&
		    identity_markers_at(reg, names[i], fs, fspath, MARKER_ADD, err) != 0) {
			lock_entry_free(&e);
			goto out;
		}
		lock_entry_free(&e);
	}
	if (sync_before_commit(reg, loc(reg)->nest_fd) != 0 ||
	    sync_before_commit(reg, loc(reg)->ids_fd) != 0 ||
	    sync_before_commit(reg, loc(reg)->idnest_fd) != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot sync %s", reg->path);
		goto out;
	}
	CRASH_POINT("upgrade:markers-written");
	/* The old tmp/ takes the staged stamp's name in staging/. */
	if (stamp_upgrade(reg, staging, true, err) != 0)
		goto out;
	CRASH_POINT("upgrade:stamped");
	fsx_close(loc(reg)->tmp_fd);
	loc(reg)->tmp_fd = staging;
	staging = -1;
	loc(reg)->format = REGISTRY_FORMAT;
	rc = 0;
out:
	fsx_close(staging);
	free_names(names, n);
	return rc;
}

int upgrade(struct registry *reg, struct wsl_error *err)
{
	if (format_open(reg, true, err) != 0)	/* another wslock may have done it */
		return -1;
	if (loc(reg)->format >= REGISTRY_FORMAT)
		return 0;
	if (loc(reg)->format == 1)
		return upgrade_v01(reg, err);
	return upgrade_v2(reg, err);
}
