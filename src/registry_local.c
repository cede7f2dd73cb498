/* registry_local.c - the local backend: the on-disk lock protocol
 * (DESIGN.md section 5).
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
 *                   recovery.
 *   nest/A/KEY      an empty marker for each proper ancestor A of a held
 *                   workspace KEY; a new lock on A finds its descendants by
 *                   reading nest/A, never by scanning locks/.
 *   ids/I/KEY       a marker: the lock KEY has the identity key I, BLAKE2b
 *                   of workspace_fs and workspace_fs_path (DESIGN.md
 *                   section 3); ids/IA/KEY.below marks it below each
 *                   identity ancestor IA, as nest/A/KEY does by path. Both
 *                   are hard links to ids/.marker. A lock is found
 *                   in both spaces: by canonical path (KEY, as 0.1 keyed it)
 *                   and by identity (a bind mount, a container's mount).
 *   staging/        staging (acq.PID.RAND) and release (rel.PID.RAND)
 *                   directories.
 *   tmp             the format stamp, a file: "wslock registry format 2".
 *                   0.1 kept its staging in a directory tmp/, so a 0.1
 *                   binary refuses a registry where tmp is a file (77).
 *                   The first mutation of a 0.1 registry (tmp/ a directory)
 *                   upgrades it under the coordination lock: identity
 *                   markers for every lock (their bytes stay at their 0.1
 *                   keys), then the stamp replaces tmp/ in one
 *                   rename(RENAME_EXCHANGE); a crash before it leaves a 0.1
 *                   registry with harmless extra markers.
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
 *    release directory in tmp/ and orphan markers remain.
 *  - an outer run, while it waits for nested runs (holding nested or
 *    waiting for it): the lock stays; it is live while a nested run's
 *    command keeps live or nested, then dead: recovery required. A nested
 *    run killed at any point leaves no file; its command keeps the lock
 *    live until it ends.
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
 * too) each is fsynced. On tmpfs nothing survives a crash, so nothing is
 * synced.
 */
#include "registry.h"
#include "registry_backend.h"
#include "fsx.h"
#include "journal.h"
#include "testhook.h"
#include "platform.h"

#include <dirent.h>
#include <poll.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define STAGE_NAME_MAX 64
#define REGISTRY_FORMAT 2	/* the layout this binary writes (see above) */
#define STAMP_PREFIX "wslock registry format "

/* Identity markers are hard links to ids/.marker, so that adding one
 * allocates no inode, and their directories stay when they empty (reclaim
 * collects them): on ext4 an inode made and freed per ancestor and per
 * command cost more than the rest of an uncontended run together. */
#define ID_MARKER ".marker"
#define ID_BELOW ".below"	/* ids/IA/KEY.below: KEY is below IA */

static bool sync_data(const struct registry *reg);

/* Joins a and b with '/' into out; fails with WSL_UNSAFE_PATH when the
 * result would not fit in PATH_MAX. */
static int path_join(char out[PATH_MAX], const char *a, const char *b,
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

/* mkdir -p for the parents of path, each new directory 0700. */
static int make_parents(const char *path, struct wsl_error *err)
{
	char buf[PATH_MAX];
	char *p;

	snprintf(buf, sizeof(buf), "%s", path);
	for (p = buf + 1; *p != '\0'; p++) {
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
	fd = fsx_open(real, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return 0;
	rc = check_netfs(fd, path, err);
	fsx_close(fd);
	return rc;
}

static void local_close(struct registry *reg);

/* The local backend's own state (reg->backend): nobody else sees it. */
struct local {
	bool exists;		/* false: opened read-only and not there */
	int dir_fd, locks_fd, nest_fd, tmp_fd, coord_fd;
	int coord_held;		/* 0, LOCK_SH or LOCK_EX */
	int watch_fd;		/* inotify on locks/, or -1 */
	enum fs_kind fs_kind;	/* of the registry directory */
	int ids_fd;		/* ids/, the identity space (DESIGN.md section 3) */
	int format;		/* 1 (0.1: staging in tmp/) or REGISTRY_FORMAT */
};

static struct local *loc(const struct registry *reg)
{
	return reg->backend;
}

static int local_init(struct registry *reg, struct wsl_error *err)
{
	struct local *l = calloc(1, sizeof(*l));

	memset(reg, 0, sizeof(*reg));
	if (l == NULL)
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	l->dir_fd = l->locks_fd = l->nest_fd = l->tmp_fd = -1;
	l->coord_fd = l->watch_fd = l->ids_fd = -1;
	l->format = REGISTRY_FORMAT;
	l->fs_kind = FS_OTHER;
	reg->ops = &registry_local_ops;
	reg->backend = l;
	return 0;
}

/* Opens (or with create makes) the subdirectory name; *fd stays -1 when it
 * is missing and create is false. */
static int open_subdir(struct registry *reg, const char *name, bool create,
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
				     "%s is not a registry format stamp (\"%s2\")", path,
				     STAMP_PREFIX);
	}
	free(buf);
	*format = (int)n;
	return 0;
}

static int stamp_write(struct registry *reg, const char *name, struct wsl_error *err)
{
	static const char stamp[] = STAMP_PREFIX "2\n";

	if (fsx_write_new_file(loc(reg)->dir_fd, name, stamp, sizeof(stamp) - 1,
			       sync_data(reg)) != 0)
		return wsl_error_errno(err, WSL_IO, errno, "cannot write %s/%s",
				       reg->path, name);
	return 0;
}

/* ids/.marker, the inode every identity marker links to. */
static int id_marker_make(struct registry *reg, struct wsl_error *err)
{
	if (fsx_write_new_file(loc(reg)->ids_fd, ID_MARKER, "", 0, false) != 0 && errno != EEXIST)
		return wsl_error_errno(err, WSL_IO, errno, "cannot create %s/ids/%s",
				       reg->path, ID_MARKER);
	return 0;
}

/*
 * The registry's format, from tmp: a directory is a 0.1 registry (format 1,
 * staging in tmp/ until it is upgraded), a file the stamp. A registry
 * without tmp is new: with create it gets ids/, staging/ and the stamp.
 * A format above REGISTRY_FORMAT is refused (WSL_UNSAFE_PATH).
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
		if (open_subdir(reg, "ids", true, &loc(reg)->ids_fd, err) != 0 ||
		    id_marker_make(reg, err) != 0 ||
		    open_subdir(reg, "staging", true, &loc(reg)->tmp_fd, err) != 0)
			return -1;
		if (stamp_write(reg, "tmp", err) != 0) {
			if (err->sys_errno != EEXIST)
				return -1;
			wsl_error_clear(err);	/* another wslock made it first */
			return format_open(reg, create, err);
		}
		return 0;
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
	if (create && loc(reg)->ids_fd >= 0 && id_marker_make(reg, err) != 0)
		return -1;
	return open_subdir(reg, "staging", create, &loc(reg)->tmp_fd, err);
}

static int open_dirs(struct registry *reg, const char *path, const char *workspace,
		     bool create, struct wsl_error *err)
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
		    make_parents(path, err) != 0)
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
		if (errno == ELOOP)
			wsl_error_set(err, WSL_UNSAFE_PATH,
				      "%s/.coordination is a symbolic link; refusing to follow it",
				      path);
		else if (errno == ENXIO || errno == ENODEV)
			wsl_error_set(err, WSL_UNSAFE_PATH,
				      "%s/.coordination is not a regular file", path);
		else
			wsl_error_errno(err, WSL_IO, errno,
					"cannot open %s/.coordination", path);
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
	return 0;
fail:
	if (err->code == WSL_OK)
		wsl_error_errno(err, WSL_IO, errno, "cannot open registry %s", path);
	return -1;
}

int local_open(struct registry *reg, const char *path, const char *workspace,
	       bool create, struct wsl_error *err)
{
	if (local_init(reg, err) != 0)
		return -1;
	if (open_dirs(reg, path, workspace, create, err) != 0) {
		local_close(reg);
		return -1;
	}
	return 0;
}

/* Closes every descriptor (dropping the coordination lock) and frees the
 * state; reg is not open afterwards. */
static void local_close(struct registry *reg)
{
	struct local *l = loc(reg);

	if (l == NULL)
		return;
	fsx_close(l->watch_fd);
	fsx_close(l->coord_fd);
	fsx_close(l->tmp_fd);
	fsx_close(l->nest_fd);
	fsx_close(l->ids_fd);
	fsx_close(l->locks_fd);
	fsx_close(l->dir_fd);
	free(l);
	reg->backend = NULL;
	reg->ops = NULL;
}

/* The least time a bounded wait gives a running holder of .coordination
 * (ms): it holds it for microseconds, but under load (valgrind, a busy CI
 * machine) a change can take seconds. */
#define COORD_WAIT_MIN_MS 10000

/* The pid holding a flock(2) (shared or exclusive) on the file st
 * describes, from /proc/locks: the kernel's own table, read without taking
 * any lock ("N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE ..." with the device
 * in hex; "->" lines are waiters). 0 when there is none, or its holder is
 * in a pid namespace this one cannot see (the kernel hides those). */
static long flock_holder(const struct stat *st)
{
	char line[256];
	long pid = 0;
	FILE *f;

	f = fopen("/proc/locks", "re");
	if (f == NULL)
		return 0;
	while (pid == 0 && fgets(line, sizeof(line), f) != NULL) {
		char kind[16], adv[16], mode[16];
		unsigned int maj, min;
		unsigned long long ino;
		long p;

		if (strstr(line, "->") != NULL)
			continue;
		if (sscanf(line, "%*d: %15s %15s %15s %ld %x:%x:%llu", kind, adv, mode,
			   &p, &maj, &min, &ino) != 7)
			continue;
		if (strcmp(kind, "FLOCK") == 0 && ino == (unsigned long long)st->st_ino &&
		    maj == major(st->st_dev) && min == minor(st->st_dev) && p > 0)
			pid = p;
	}
	fclose(f);
	return pid;
}

/* The pid holding the coordination lock (fd), or 0 (flock_holder). */
static long coord_holder(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 ? flock_holder(&st) : 0;
}

/* Whether pid is stopped (state T or t in /proc/PID/stat): it cannot
 * finish what it does inside .coordination until someone continues it. */
static bool pid_stopped(long pid)
{
	char path[64], buf[512];
	const char *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	fd = fsx_open(path, O_RDONLY | O_NOCTTY, 0);
	if (fd < 0)
		return false;
	n = fsx_read_all(fd, buf, sizeof(buf) - 1);
	fsx_close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p != NULL && p[1] == ' ' && (p[2] == 'T' || p[2] == 't');
}

static int coord_busy(struct registry *reg, long holder, struct wsl_error *err)
{
	if (holder > 0)
		return wsl_error_set(err, WSL_REGISTRY_BUSY,
				     "the registry %s stayed busy: pid %ld holds %s/.coordination%s; nothing done (the workspace itself may be free)",
				     reg->path, holder, reg->path,
				     pid_stopped(holder) ? " and is stopped (continue it with kill -CONT, or end it)" : "");
	return wsl_error_set(err, WSL_REGISTRY_BUSY,
			     "the registry %s stayed busy: a process this one cannot see holds %s/.coordination; nothing done (the workspace itself may be free)",
			     reg->path, reg->path);
}

/* Takes the coordination lock (op LOCK_SH or LOCK_EX), waiting until dl,
 * else until the bound of registry_coord_bound, else as long as it takes.
 * A bounded wait gives a running holder COORD_WAIT_MIN_MS at least and
 * ends at the bound when the holder is stopped. */
static int coord_lock(struct registry *reg, int op,
		      const struct registry_deadline *dl, struct wsl_error *err)
{
	long long first = -1, bound;

	if (loc(reg)->coord_fd < 0) {
		if (op == LOCK_EX)
			return wsl_error_set(err, WSL_INTERNAL,
					     "registry %s was opened read-only", reg->path);
		return 0;
	}
	if (dl == NULL && !reg->coord_bounded) {
		if (fsx_flock(loc(reg)->coord_fd, op) != 0)
			return wsl_error_errno(err, WSL_IO, errno,
					       "cannot lock %s/.coordination", reg->path);
		loc(reg)->coord_held = op;
		return 0;
	}
	bound = dl != NULL ? dl->at_ms : reg->coord_bound_ms;
	for (long wait_us = 200;; wait_us = wait_us < 20000 ? wait_us * 2 : wait_us) {
		struct timespec ts;
		long long now;
		long holder;

		if (fsx_flock(loc(reg)->coord_fd, op | LOCK_NB) == 0) {
			loc(reg)->coord_held = op;
			return 0;
		}
		if (errno != EWOULDBLOCK)
			return wsl_error_errno(err, WSL_IO, errno,
					       "cannot lock %s/.coordination", reg->path);
		now = platform_mono_ms();
		if (first < 0)
			first = now;
		if (now >= bound) {
			holder = coord_holder(loc(reg)->coord_fd);
			if ((holder > 0 && pid_stopped(holder)) ||
			    now >= first + COORD_WAIT_MIN_MS)
				return coord_busy(reg, holder, err);
		}
		ts.tv_sec = 0;
		ts.tv_nsec = wait_us * 1000;
		nanosleep(&ts, NULL);
	}
}


static void local_unlock(struct registry *reg)
{
	if (loc(reg)->coord_fd >= 0 && loc(reg)->coord_held != 0)
		fsx_flock(loc(reg)->coord_fd, LOCK_UN);
	loc(reg)->coord_held = 0;
}

static int upgrade(struct registry *reg, struct wsl_error *err);

/* The coordination lock; a mutation (LOCK_EX) of a 0.1 registry upgrades
 * it first. */
static int local_lock(struct registry *reg, int op,
		      const struct registry_deadline *dl, struct wsl_error *err)
{
	if (coord_lock(reg, op, dl, err) != 0)
		return -1;
	if (op == LOCK_EX && loc(reg)->format < REGISTRY_FORMAT && upgrade(reg, err) != 0) {
		local_unlock(reg);
		return -1;
	}
	return 0;
}

static int local_coord_lock(struct registry *reg, int op, struct wsl_error *err)
{
	return local_lock(reg, op, NULL, err);
}

static bool key_valid(const char *s)
{
	return crypto_hex_valid(s, WSL_KEY_HEX);
}

static void set_corrupt(struct lock_entry *e, const char *why)
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

/* Whether the directory fd is still the lock directory locks/key. */
static bool still_linked(const struct registry *reg, const char *key, int fd)
{
	struct stat a, b;

	if (fstat(fd, &a) != 0 || fstatat(loc(reg)->locks_fd, key, &b, AT_SYMLINK_NOFOLLOW) != 0)
		return false;
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

static int local_get_key(struct registry *reg, const char *key, bool probe,
			 struct lock_entry *e, struct wsl_error *err)
{
	char dirpath[PATH_MAX], path[PATH_MAX], why[256];
	char check[WSL_KEY_HEX + 1];
	struct wsl_error local = { 0 };
	size_t len;
	int fd;

	memset(e, 0, sizeof(*e));
	e->state = LOCK_FREE;
	snprintf(e->key, sizeof(e->key), "%s", key);
	if (loc(reg)->locks_fd < 0)
		return 0;
	if (path_join(dirpath, reg->path, "locks", err) != 0 ||
	    path_join(dirpath, dirpath, key, err) != 0 ||
	    path_join(e->lock_path, dirpath, "owner.json", err) != 0)
		return -1;
	fd = fsx_open_dir_checked(loc(reg)->locks_fd, key, dirpath, false, &local);
	if (fd < 0) {
		if (local.sys_errno == ENOENT && local.code == WSL_IO) {
			wsl_error_clear(&local);
			e->lock_path[0] = '\0';
			return 0;
		}
		if (local.code == WSL_UNSAFE_PATH) {
			set_corrupt_err(e, &local);
			wsl_error_clear(&local);
			return 0;
		}
		*err = local;
		return -1;
	}
	{
		struct stat st;
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
			fsx_close(fd);
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
	if (fsx_read_file_checked(fd, "retained.json", path, OWNER_DOC_MAX,
				  &e->retained, &len, &local) == 0) {
		e->state = LOCK_RETAINED;
	} else if (local.sys_errno != ENOENT) {
		set_corrupt_err(e, &local);
		e->has_owner = false;
		wsl_error_clear(&local);
		goto done;
	}
	wsl_error_clear(&local);
	if (probe) {
		e->live_held = liveness_live_held(fd) == 1;
		e->liveness = liveness_probe(fd, &e->owner, e->reason, sizeof(e->reason));
		e->probed = true;
		probe_nested(fd, e);
	}
done:
	if (probe && e->state == LOCK_CORRUPT)
		probe_corrupt(fd, e);
	/* Read without the coordination lock (inspect, the reclaim preview):
	 * a lock released meanwhile was renamed away from locks/KEY, and what
	 * was read from it is not a lock any more. */
	if (loc(reg)->coord_held == 0 && !still_linked(reg, key, fd)) {
		lock_entry_free(e);
		snprintf(e->key, sizeof(e->key), "%s", key);
	}
	fsx_close(fd);
	return 0;
}

/* The identity of a lock's workspace: its version 2 document's, else (a
 * 0.1 lock, or a corrupt one whose path could be read) the directory's as
 * it is now. False when it cannot be known. */
static bool owner_identity(const struct owner *o, const char *root,
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

static bool entry_identity(const struct lock_entry *e, char fs[MOUNTINFO_FS_MAX + 1],
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
	slot = registry_overlap_push(&c->items, &c->n, &c->cap, ancestor, c->err);
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

/* The locks marked in dirfd/KEY (nest/ or ids/; KEY for where), kept as
 * overlaps when marker_true. */
static int overlap_marked(struct overlap_ctx *c, int dirfd, const char *dirname,
			  const char *key, enum marker_match how, const char *where,
			  bool ancestor)
{
	char path[PATH_MAX], lockkey[WSL_KEY_HEX + 1];
	/* ids/ holds both kinds: KEY (at) and KEY.below. */
	const char *suffix = how == MATCH_ID_BELOW ? ID_BELOW : "";
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
		struct lock_entry e;

		if (strlen(de->d_name) != WSL_KEY_HEX + strlen(suffix) ||
		    strcmp(de->d_name + WSL_KEY_HEX, suffix) != 0)
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
	return overlap_marked(c, loc(c->reg)->ids_fd, "ids", key, MATCH_ID_AT, fspath, true);
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
			   workspace, false) != 0)
		return -1;
	if (c->fs == NULL)
		return 0;
	wspath_identity_key(c->fs, c->fspath, key);
	return overlap_marked(c, loc(c->reg)->ids_fd, "ids", key, MATCH_ID_BELOW,
			      c->fspath, false);
}

static int local_overlaps(struct registry *reg, const char *workspace, bool probe,
			  struct overlap **out, size_t *n, struct wsl_error *err)
{
	char self[WSL_KEY_HEX + 1], fs[MOUNTINFO_FS_MAX + 1], fspath[PATH_MAX];
	struct overlap_ctx c = { reg, probe, NULL, 0, 0, err, self, NULL, NULL };
	struct wsl_error ignored = { 0 };

	*out = NULL;
	*n = 0;
	crypto_path_key(workspace, self);
	if (identity_space_used(reg) && wspath_identity(workspace, fs, fspath, &ignored) == 0) {
		c.fs = fs;
		c.fspath = fspath;
	}
	wsl_error_clear(&ignored);
	if (overlaps_both(&c, workspace) != 0) {
		registry_overlaps_free(c.items, c.n);
		return -1;
	}
	*out = c.items;
	*n = c.n;
	return 0;
}

/*
 * The lock on the workspace itself found by identity: another spelling of
 * the same directory (a bind mount, a container's mount) holds it at
 * another path key than skip_key. *e stays LOCK_FREE when there is none.
 */
static int identity_self(struct registry *reg, const char *workspace, const char *skip_key,
			 bool probe, struct lock_entry *e, struct wsl_error *err)
{
	char fs[MOUNTINFO_FS_MAX + 1], fspath[PATH_MAX], key[WSL_KEY_HEX + 1];
	struct overlap_ctx c = { reg, probe, NULL, 0, 0, err, skip_key, fs, fspath };
	struct wsl_error ignored = { 0 };
	size_t i;

	memset(e, 0, sizeof(*e));
	e->state = LOCK_FREE;
	if (!identity_space_used(reg) || wspath_identity(workspace, fs, fspath, &ignored) != 0) {
		wsl_error_clear(&ignored);
		return 0;
	}
	wspath_identity_key(fs, fspath, key);
	if (overlap_marked(&c, loc(reg)->ids_fd, "ids", key, MATCH_ID_AT, fspath, true) != 0) {
		registry_overlaps_free(c.items, c.n);
		return -1;
	}
	if (c.n > 0) {
		*e = c.items[0].entry;
		for (i = 1; i < c.n; i++)
			lock_entry_free(&c.items[i].entry);
		free(c.items);
	}
	return 0;
}

/* Whether bytes written must be fsynced: not where nothing survives. */
static bool sync_data(const struct registry *reg)
{
	return loc(reg)->fs_kind != FS_VOLATILE;
}

/* fsync of a directory whose change must be durable on its own: a commit
 * point (locks/ after a rename, a lock directory after a replace). */
static int sync_commit(const struct registry *reg, int dirfd)
{
	return sync_data(reg) ? fsx_fsync_dir(dirfd) : 0;
}

/* fsync of a directory changed before a commit point: needed only where
 * metadata is not committed in order (see the top of this file). */
static int sync_before_commit(const struct registry *reg, int dirfd)
{
	return loc(reg)->fs_kind == FS_OTHER ? fsx_fsync_dir(dirfd) : 0;
}

enum marker_step { MARKER_ADD, MARKER_SYNC, MARKER_REMOVE };

struct marker_ctx {
	struct registry *reg;
	const char *key;	/* the held workspace's key */
	enum marker_step step;
	struct wsl_error *err;
	const char *fs;		/* identity space: the filesystem; NULL: by path */
	int dirfd;		/* nest/ or ids/ */
	const char *dirname;
	const char *suffix;	/* after the key in the marker's name */
};


static int marker_apply(const char *ancestor, void *arg)
{
	struct marker_ctx *m = arg;
	char akey[WSL_KEY_HEX + 1], path[PATH_MAX], name[WSL_KEY_HEX + 16];
	int fd, mfd;

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
	snprintf(name, sizeof(name), "%s%s", m->key, m->suffix);
	if (m->step == MARKER_REMOVE) {
		fd = fsx_openat(m->dirfd, akey, O_RDONLY | O_DIRECTORY, 0);
		if (fd < 0)
			return 0;
		unlinkat(fd, name, 0);
		fsx_close(fd);
		/* Fails with ENOTEMPTY while other markers remain. */
		if (m->fs == NULL)
			unlinkat(m->dirfd, akey, AT_REMOVEDIR);
		return 0;
	}
	if (path_join(path, m->reg->path, m->dirname, m->err) != 0 ||
	    path_join(path, path, akey, m->err) != 0)
		return -1;
	fd = fsx_open_dir_checked(m->dirfd, akey, path, true, m->err);
	if (fd < 0)
		return -1;
	if (m->fs != NULL) {
		if (linkat(loc(m->reg)->ids_fd, ID_MARKER, fd, name, 0) != 0 && errno != EEXIST) {
			wsl_error_errno(m->err, WSL_IO, errno, "cannot write identity marker in %s",
					path);
			fsx_close(fd);
			return -1;
		}
		fsx_close(fd);
		return 0;
	}
	mfd = fsx_openat(fd, name, O_WRONLY | O_CREAT | O_NONBLOCK, 0600);
	if (mfd < 0) {
		wsl_error_errno(m->err, WSL_IO, errno, "cannot write nest marker in %s", path);
		fsx_close(mfd);
		fsx_close(fd);
		return -1;
	}
	fsx_close(mfd);
	fsx_close(fd);
	return 0;
}

/* Adds, syncs or removes (step) the identity markers of the lock key whose
 * owner is o (a 0.1 or corrupt one: root's identity now): ids/I/key and
 * nest/IA/key for every identity ancestor IA. Unknown identity: nothing. */
static int identity_markers_at(struct registry *reg, const char *key, const char *fs,
			       const char *fspath, enum marker_step step,
			       struct wsl_error *err)
{
	struct marker_ctx m = { reg, key, step, err, fs, loc(reg)->ids_fd, "ids", ID_BELOW };
	int rc;

	if (loc(reg)->ids_fd < 0)
		return 0;
	rc = wspath_for_each_fs_ancestor(fspath, marker_apply, &m);
	if (rc != 0 && step != MARKER_REMOVE)
		return -1;
	m.suffix = "";
	return marker_apply(fspath, &m);
}

static int identity_markers(struct registry *reg, const char *key, const struct owner *o,
			    enum marker_step step, struct wsl_error *err)
{
	char fs[MOUNTINFO_FS_MAX + 1], fspath[PATH_MAX];

	if (!owner_identity(o, o->workspace_root, fs, fspath))
		return 0;
	return identity_markers_at(reg, key, fs, fspath, step, err);
}

static void stage_name(char out[STAGE_NAME_MAX], const char *prefix)
{
	char rnd[17];

	crypto_random_hex(rnd, 8);
	snprintf(out, STAGE_NAME_MAX, "%s.%ld.%s", prefix, (long)getpid(), rnd);
}

static int unpublish(struct registry *reg, const char *key, const char *workspace,
		     const struct owner *o, struct wsl_error *err);

/* Writes and publishes o; the caller holds the coordination lock and has
 * checked that nothing overlaps. */
static int publish(struct registry *reg, const struct owner *o, int *live_fd,
		   struct wsl_error *err)
{
	char key[WSL_KEY_HEX + 1], stage[STAGE_NAME_MAX], path[PATH_MAX];
	struct marker_ctx m;
	char *text = NULL;
	int sfd = -1, lfd = -1;

	crypto_path_key(o->workspace_root, key);
	stage_name(stage, "acq");
	if (path_join(path, reg->path, "tmp", err) != 0 ||
	    path_join(path, path, stage, err) != 0)
		return -1;
	sfd = fsx_open_dir_checked(loc(reg)->tmp_fd, stage, path, true, err);
	if (sfd < 0)
		return -1;
	text = owner_format(o, false);
	if (text == NULL) {
		wsl_error_set(err, WSL_INTERNAL, "cannot format the owner document");
		goto fail;
	}
	{
		size_t len = strlen(text);
		text[len] = '\n';	/* owner_format left room: the NUL */
		if (fsx_write_new_file(sfd, "owner.json", text, len + 1, sync_data(reg)) != 0) {
			wsl_error_errno(err, WSL_IO, errno, "cannot write %s/owner.json", path);
			goto fail;
		}
	}
	lfd = fsx_openat(sfd, "live", O_RDWR | O_CREAT | O_EXCL, 0600);
	if (lfd < 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot create %s/live", path);
		goto fail;
	}
	if (live_fd != NULL && fsx_flock(lfd, LOCK_EX | LOCK_NB) != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot lock %s/live", path);
		goto fail;
	}
	{
		/* Nested runs hold it shared (registry_nest_lock). */
		int nfd = fsx_openat(sfd, LOCK_NESTED_FILE, O_RDWR | O_CREAT | O_EXCL, 0600);
		if (nfd < 0) {
			wsl_error_errno(err, WSL_IO, errno, "cannot create %s/%s", path,
					LOCK_NESTED_FILE);
			goto fail;
		}
		fsx_close(nfd);
	}
	CRASH_POINT("acquire:staged");
	if (sync_before_commit(reg, sfd) != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot sync %s", path);
		goto fail;
	}
	CRASH_POINT("acquire:staging-synced");
	m = (struct marker_ctx){ reg, key, MARKER_ADD, err, NULL, loc(reg)->nest_fd, "nest", "" };
	if (wspath_for_each_ancestor(o->workspace_root, marker_apply, &m) != 0 ||
	    identity_markers(reg, key, o, MARKER_ADD, err) != 0)
		goto fail_markers;
	m.step = MARKER_SYNC;
	if (loc(reg)->fs_kind == FS_OTHER &&
	    (wspath_for_each_ancestor(o->workspace_root, marker_apply, &m) != 0 ||
	     identity_markers(reg, key, o, MARKER_SYNC, err) != 0))
		goto fail_markers;
	if (sync_before_commit(reg, loc(reg)->nest_fd) != 0 ||
	    (loc(reg)->ids_fd >= 0 && sync_before_commit(reg, loc(reg)->ids_fd) != 0)) {
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
		free(text);
		fsx_close(lfd);
		unpublish(reg, key, o->workspace_root, o, err);
		return wsl_error_errno(err, WSL_IO, e, "cannot sync %s/locks", reg->path);
	}
	CRASH_POINT("acquire:dir-synced");
	fsx_close(sfd);
	free(text);
	if (live_fd != NULL)
		*live_fd = lfd;
	else
		fsx_close(lfd);
	return 0;
fail_markers:
	m.step = MARKER_REMOVE;
	wspath_for_each_ancestor(o->workspace_root, marker_apply, &m);
	identity_markers(reg, key, o, MARKER_REMOVE, err);
fail:
	fsx_close(lfd);
	fsx_close(sfd);
	free(text);
	fsx_remove_dir_files(loc(reg)->tmp_fd, stage);
	return -1;
}

static int local_try_acquire(struct registry *reg, const struct owner *o,
			     const struct registry_deadline *dl, int *live_fd,
			     struct lock_entry *conflict, struct wsl_error *err)
{
	char key[WSL_KEY_HEX + 1];
	struct overlap *ov = NULL;
	struct lock_entry self;
	size_t n = 0, i;
	int rc = -1;

	memset(conflict, 0, sizeof(*conflict));
	conflict->state = LOCK_FREE;
	if (local_lock(reg, LOCK_EX, dl, err) != 0)
		return -1;
	crypto_path_key(o->workspace_root, key);
	if (local_get_key(reg, key, true, &self, err) != 0)
		goto out;
	if (self.state == LOCK_CORRUPT)
		snprintf(self.workspace_root, sizeof(self.workspace_root), "%s",
			 o->workspace_root);
	if (self.state != LOCK_FREE)
		lockrules_conflict_keep(conflict, &self);
	/* The same directory locked through another path. */
	if (identity_self(reg, o->workspace_root, key, true, &self, err) != 0)
		goto out;
	if (self.state != LOCK_FREE)
		lockrules_conflict_keep(conflict, &self);
	if (local_overlaps(reg, o->workspace_root, true, &ov, &n, err) != 0)
		goto out;
	for (i = 0; i < n; i++)
		lockrules_conflict_keep(conflict, &ov[i].entry);
	if (conflict->state != LOCK_FREE) {
		rc = ACQUIRE_CONFLICT;
		goto out;
	}
	rc = publish(reg, o, live_fd, err) == 0 ? ACQUIRE_DONE : -1;
out:
	registry_overlaps_free(ov, n);
	local_unlock(reg);
	return rc;
}

/* Removes the lock key of workspace: renamed out of locks/ into tmp/ (the
 * atomic step), then its nest markers and files go. The caller holds
 * LOCK_EX. */
static int unpublish(struct registry *reg, const char *key, const char *workspace,
		     const struct owner *o, struct wsl_error *err)
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
	m = (struct marker_ctx){ reg, key, MARKER_REMOVE, err, NULL, loc(reg)->nest_fd, "nest", "" };
	wspath_for_each_ancestor(workspace, marker_apply, &m);
	if (has_id)
		identity_markers_at(reg, key, fs, fspath, MARKER_REMOVE, err);
	CRASH_POINT("release:markers-removed");
	/* A corrupt lock may be a symlink or a file: unlink it, never follow. */
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
	char key[WSL_KEY_HEX + 1];
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
	if (lockrules_check_release(workspace, token, &e, err) != 0)
		goto out;
	if (unpublish(reg, e.key, e.workspace_root[0] != '\0' ? e.workspace_root : workspace,
		      e.has_owner ? &e.owner : NULL, err) != 0)
		goto out;
	if (released != NULL)
		*released = e.owner;
	rc = 0;
out:
	lock_entry_free(&e);
	local_unlock(reg);
	return rc;
}

static int key_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int local_list(struct registry *reg, bool probe,
		      int (*fn)(const struct lock_entry *e, void *arg), void *arg,
		      struct wsl_error *err)
{
	char **names = NULL;
	size_t n = 0, cap = 0, i;
	struct dirent *de;
	DIR *dir;
	int fd, rc = 0;

	if (loc(reg)->locks_fd < 0)
		return 0;
	fd = fsx_openat(loc(reg)->locks_fd, ".", O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0 || (dir = fdopendir(fd)) == NULL) {
		fsx_close(fd);
		return wsl_error_errno(err, WSL_IO, errno, "cannot read %s/locks", reg->path);
	}
	while ((de = readdir(dir)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n == cap) {
			char **p;
			cap = cap ? cap * 2 : 64;
			p = realloc(names, cap * sizeof(*p));
			if (p == NULL) {
				rc = wsl_error_errno(err, WSL_OS, errno, "out of memory");
				goto out;
			}
			names = p;
		}
		names[n] = strdup(de->d_name);
		if (names[n] == NULL) {
			rc = wsl_error_errno(err, WSL_OS, errno, "out of memory");
			goto out;
		}
		n++;
	}
	if (n > 0)
		qsort(names, n, sizeof(*names), key_cmp);
	for (i = 0; i < n && rc == 0; i++) {
		struct lock_entry e;

		if (strlen(names[i]) >= sizeof(e.key)) {
			memset(&e, 0, sizeof(e));
			snprintf(e.key, sizeof(e.key), "%.64s", names[i]);
			set_corrupt(&e, "unexpected entry in locks/");
		} else if (local_get_key(reg, names[i], probe, &e, err) != 0) {
			rc = -1;
			break;
		}
		if (e.state != LOCK_FREE)
			rc = fn(&e, arg);
		lock_entry_free(&e);
	}
out:
	closedir(dir);
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
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

	memset(prior, 0, sizeof(*prior));
	if (loc(reg)->locks_fd < 0)
		return wsl_error_set(err, WSL_NOT_HELD, "%s is not locked", workspace);
	if (local_lock(reg, LOCK_EX, NULL, err) != 0)
		return -1;
	crypto_path_key(workspace, key);
	if (local_get_key(reg, key, true, e, err) != 0)
		goto out;
	if (path_join(dirpath, reg->path, "locks", err) != 0 ||
	    path_join(dirpath, dirpath, key, err) != 0)
		goto out;
	ev.action = x->action;
	ev.workspace_root = workspace;
	ev.force_reason = x->force ? x->force_reason : NULL;
	ev.next = next;

	if (lockrules_check_take_over(workspace, x, e, err) != 0)
		goto out;
	if (e->state == LOCK_CORRUPT) {
		ev.action = "clear-corrupt";
		ev.prior_raw = e->raw;
		ev.prior_raw_len = e->raw_len;
		if (journal_append(loc(reg)->dir_fd, reg->path, &ev, sync_data(reg), err) != 0 ||
		    unpublish(reg, key, workspace, NULL, err) != 0)
			goto out;
		CRASH_POINT("takeover:corrupt-removed");
		rc = next != NULL ? publish(reg, next, live_fd, err) : 0;
		goto out;
	}
	ev.prior = &e->owner;
	ev.liveness = liveness_name(e->liveness);
	ev.liveness_reason = e->reason;
	if (journal_append(loc(reg)->dir_fd, reg->path, &ev, sync_data(reg), err) != 0)
		goto out;
	CRASH_POINT("takeover:journaled");
	if (next == NULL) {
		rc = unpublish(reg, key, workspace, &e->owner, err);
		goto out;
	}
	lfd = fsx_open_dir_checked(loc(reg)->locks_fd, key, dirpath, false, err);
	if (lfd < 0)
		goto out;
	/* The new owner is found by its identity before it takes over (a
	 * 0.1 owner's markers came from the upgrade: the same or orphans). */
	if (identity_markers(reg, key, next, MARKER_ADD, err) != 0 ||
	    (loc(reg)->ids_fd >= 0 && sync_before_commit(reg, loc(reg)->ids_fd) != 0))
		goto out;
	rc = replace_owner(reg, lfd, dirpath, next, live_fd, err);
out:
	fsx_close(lfd);
	local_unlock(reg);
	if (rc == 0) {
		wsl_error_clear(err);
	}
	return rc;
}

static int local_retain(struct registry *reg, const char *workspace,
			const char *token, const char *json, struct wsl_error *err)
{
	char key[WSL_KEY_HEX + 1], dirpath[PATH_MAX];
	struct lock_entry e;
	int lfd = -1, rc = -1;

	if (local_lock(reg, LOCK_EX, NULL, err) != 0)
		return -1;
	crypto_path_key(workspace, key);
	if (local_get_key(reg, key, false, &e, err) != 0 ||
	    lockrules_check_retain(workspace, token, &e, err) != 0)
		goto out;
	if (path_join(dirpath, reg->path, "locks", err) != 0 ||
	    path_join(dirpath, dirpath, key, err) != 0)
		goto out;
	lfd = fsx_open_dir_checked(loc(reg)->locks_fd, key, dirpath, false, err);
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

/* Lists the names in directory fd (not "." or ".."); *out NULL-terminated. */
static int list_names(int fd, char ***out, size_t *n)
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

static void free_names(char **names, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static int garbage_markers(struct registry *reg, int dirfd, const char *dirname,
			   bool remove, size_t *orphan_markers, struct wsl_error *err);

static int local_garbage(struct registry *reg, bool remove, size_t *staging,
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
	if (garbage_markers(reg, loc(reg)->nest_fd, "nest", remove, orphan_markers, err) != 0)
		return -1;
	return garbage_markers(reg, loc(reg)->ids_fd, "ids", remove, orphan_markers, err);
}

/* Counts (and with remove deletes) the markers in dirfd (nest/ or ids/)
 * whose lock is gone. */
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

static int local_wait_prepare(struct registry *reg, struct wsl_error *err)
{
	char path[PATH_MAX];

	if (loc(reg)->watch_fd >= 0)
		return 0;
	if (path_join(path, reg->path, "locks", err) != 0)
		return -1;
	loc(reg)->watch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (loc(reg)->watch_fd < 0)
		return wsl_error_errno(err, WSL_OS, errno, "inotify_init1");
	/* A release renames locks/KEY away (IN_MOVED_FROM); a removal by hand
	 * deletes it (IN_DELETE). IN_DONT_FOLLOW: never through a symlink. */
	if (inotify_add_watch(loc(reg)->watch_fd, path, IN_MOVED_FROM | IN_DELETE |
			      IN_ONLYDIR | IN_DONT_FOLLOW) < 0) {
		wsl_error_errno(err, WSL_OS, errno, "inotify_add_watch %s", path);
		fsx_close(loc(reg)->watch_fd);
		loc(reg)->watch_fd = -1;
		return -1;
	}
	return 0;
}

static int local_wait(struct registry *reg, int sigfd, long timeout_ms,
		      struct wsl_error *err)
{
	struct pollfd pfd[2];
	char buf[4096];
	nfds_t n = 0;

	if (loc(reg)->watch_fd >= 0) {
		pfd[n].fd = loc(reg)->watch_fd;
		pfd[n].events = POLLIN;
		pfd[n++].revents = 0;
	}
	if (sigfd >= 0) {
		pfd[n].fd = sigfd;
		pfd[n].events = POLLIN;
		pfd[n++].revents = 0;
	}
	if (poll(pfd, n, (int)timeout_ms) < 0 && errno != EINTR)
		return wsl_error_errno(err, WSL_OS, errno, "poll");
	if (loc(reg)->watch_fd >= 0)
		while (read(loc(reg)->watch_fd, buf, sizeof(buf)) > 0)
			;
	return sigfd >= 0 && (pfd[n - 1].revents & POLLIN) ? 1 : 0;
}

/*
 * Upgrades a 0.1 registry (format 1) in place; the caller holds the
 * coordination lock exclusively, so no wslock is inside a mutation. Every
 * lock keeps its bytes at its 0.1 key and gets its identity markers; then
 * the stamp file takes tmp/'s place in one rename(RENAME_EXCHANGE) (the
 * commit point). The old tmp/ moves into staging/: a 0.1 `run` holding a
 * lock across the upgrade still releases through it (it opened it at its
 * start), and reclaim collects it later like any staging leftover.
 */
static int upgrade(struct registry *reg, struct wsl_error *err)
{
	char **names = NULL;
	size_t n = 0, i;
	int staging = -1, rc = -1;

	if (format_open(reg, true, err) != 0)	/* another wslock may have done it */
		return -1;
	if (loc(reg)->format >= REGISTRY_FORMAT)
		return 0;
	if (open_subdir(reg, "ids", true, &loc(reg)->ids_fd, err) != 0 ||
	    id_marker_make(reg, err) != 0 ||
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
	    sync_before_commit(reg, loc(reg)->ids_fd) != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot sync %s", reg->path);
		goto out;
	}
	CRASH_POINT("upgrade:markers-written");
	unlinkat(loc(reg)->dir_fd, "tmp.new", 0);
	if (stamp_write(reg, "tmp.new", err) != 0)
		goto out;
	if (renameat2(loc(reg)->dir_fd, "tmp.new", loc(reg)->dir_fd, "tmp", RENAME_EXCHANGE) != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot stamp %s/tmp", reg->path);
		unlinkat(loc(reg)->dir_fd, "tmp.new", 0);
		goto out;
	}
	if (sync_commit(reg, loc(reg)->dir_fd) != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot sync %s", reg->path);
		goto out;
	}
	CRASH_POINT("upgrade:stamped");
	{
		char old[STAGE_NAME_MAX];
		stage_name(old, "v0.1-tmp");
		if (renameat(loc(reg)->dir_fd, "tmp.new", staging, old) != 0)
			wsl_error_clear(err);	/* left beside the stamp: harmless */
	}
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

static int local_nest_lock(struct registry *reg, const char *workspace,
			   const char *token, int op, int *fd, struct wsl_error *err)
{
	char key[WSL_KEY_HEX + 1], dirpath[PATH_MAX], path[PATH_MAX];
	struct wsl_error local = { 0 };
	struct lock_entry e;
	struct stat st;
	int lfd, nfd, rc;

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
	/* Made at publish; a lock published by 0.1 gets it on first use. */
	nfd = fsx_openat(lfd, LOCK_NESTED_FILE, O_RDONLY | O_CREAT | O_NONBLOCK | O_NOCTTY, 0600);
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
	if (!still_linked(reg, key, lfd)) {
		rc = NEST_LOCK_GONE;
	} else if (local_get_key(reg, key, false, &e, err) != 0) {
		rc = -1;
	} else {
		if (!e.has_owner || strcmp(e.owner.token, token) != 0)
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
	.try_acquire = local_try_acquire,
	.release = local_release,
	.list = local_list,
	.take_over = local_take_over,
	.retain = local_retain,
	.garbage = local_garbage,
	.wait_prepare = local_wait_prepare,
	.wait = local_wait,
	.keepalive = NULL,
	.nest_lock = local_nest_lock,
};
