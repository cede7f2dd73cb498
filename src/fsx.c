/* fsx.c - safe file-system primitives (see fsx.h). */
#include "fsx.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

int fsx_open(const char *path, int flags, mode_t mode)
{
	int fd;

	do
		fd = open(path, flags | O_CLOEXEC, mode);
	while (fd < 0 && errno == EINTR);
	return fd;
}

int fsx_openat(int dirfd, const char *name, int flags, mode_t mode)
{
	int fd;

	do
		fd = openat(dirfd, name, flags | O_CLOEXEC | O_NOFOLLOW, mode);
	while (fd < 0 && errno == EINTR);
	return fd;
}

int fsx_close(int fd)
{
	int saved = errno, rc;

	if (fd < 0)
		return 0;
	rc = close(fd);
	if (rc == 0 || errno == EINTR)
		errno = saved;
	return rc == 0 || errno == EINTR ? 0 : -1;
}

ssize_t fsx_read_all(int fd, void *buf, size_t cap)
{
	size_t got = 0;

	while (got < cap) {
		ssize_t n = read(fd, (char *)buf + got, cap - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int fsx_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int fsx_fsync(int fd)
{
	int rc;

	do
		rc = fsync(fd);
	while (rc != 0 && errno == EINTR);
	return rc;
}

int fsx_flock(int fd, int op)
{
	int rc;

	do
		rc = flock(fd, op);
	while (rc != 0 && errno == EINTR);
	return rc;
}

uid_t fsx_euid(void)
{
	/* wslock never changes its ids, and every registry object is checked
	 * against this: asked once, not once per object. */
	static uid_t euid;
	static bool known;

	if (!known) {
		euid = geteuid();
		known = true;
	}
	return euid;
}

int fsx_check_private(const struct stat *st, mode_t type, const char *path,
		      struct wsl_error *err)
{
	if ((st->st_mode & S_IFMT) == S_IFLNK)
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "%s is a symbolic link; refusing to follow it",
				     path);
	if ((st->st_mode & S_IFMT) != type)
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "%s is not a %s", path,
				     type == S_IFDIR ? "directory" : "regular file");
	if (st->st_uid != fsx_euid())
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "%s is owned by uid %lu, not by uid %lu",
				     path, (unsigned long)st->st_uid,
				     (unsigned long)fsx_euid());
	if ((st->st_mode & 077) != 0)
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "%s has mode %04o; group and others must have no access (chmod go= it)",
				     path, (unsigned)(st->st_mode & 07777));
	/* A hard link would let a write meant for the registry land in a
	 * file elsewhere (and the other way round). */
	if (type == S_IFREG && st->st_nlink != 1)
		return wsl_error_set(err, WSL_UNSAFE_PATH,
				     "%s has %lu hard links; registry files must have one",
				     path, (unsigned long)st->st_nlink);
	return 0;
}

/* Why name could not be opened as a directory (ELOOP, ENOTDIR): what it
 * is, from lstat, else that it changed meanwhile. */
static int explain_not_dir(int dirfd, const char *name, const char *path, int e,
			   struct wsl_error *err)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
	    fsx_check_private(&st, S_IFDIR, path, err) == 0)
		wsl_error_set(err, WSL_UNSAFE_PATH,
			      "%s changed into a non-directory while opening it", path);
	errno = e;
	return -1;
}

/* The end of opening the directory name below dirfd as fd (-1: the open
 * failed, errno says why): a refusal explained, the opened object checked
 * (fsx_check_private). Returns fd, or -1 with err. */
static int dir_opened(int dirfd, const char *name, const char *path, int fd,
		      struct stat *out, struct wsl_error *err)
{
	struct stat mine, *stp = out != NULL ? out : &mine;
	int e;

	if (fd < 0) {
		e = errno;
		if (e == ELOOP || e == ENOTDIR)
			return explain_not_dir(dirfd, name, path, e, err);
		wsl_error_errno(err, WSL_IO, e, "cannot open %s", path);
		errno = e;
		return -1;
	}
	if (fstat(fd, stp) != 0 ||
	    fsx_check_private(stp, S_IFDIR, path, err) != 0) {
		if (err->code == WSL_OK)
			wsl_error_errno(err, WSL_IO, errno, "cannot stat %s", path);
		fsx_close(fd);
		errno = EPERM;
		return -1;
	}
	return fd;
}

int fsx_open_dir_checked(int dirfd, const char *name, const char *path,
			 bool create, struct wsl_error *err)
{
	return fsx_open_dir_checked_st(dirfd, name, path, create, NULL, err);
}

int fsx_open_dir_checked_st(int dirfd, const char *name, const char *path,
			    bool create, struct stat *st, struct wsl_error *err)
{
	int fd;

	/* O_NOFOLLOW | O_DIRECTORY refuses a symlink or a non-directory
	 * without following or opening it (a FIFO never blocks here); the
	 * opened object is then checked. An lstat is made only to explain a
	 * refusal. */
	fd = fsx_openat(dirfd, name, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0 && errno == ENOENT && create) {
		if (mkdirat(dirfd, name, 0700) != 0 && errno != EEXIST)
			return wsl_error_errno(err, WSL_IO, errno, "cannot create %s", path);
		fd = fsx_openat(dirfd, name, O_RDONLY | O_DIRECTORY, 0);
	}
	return dir_opened(dirfd, name, path, fd, st, err);
}

int fsx_make_dir_checked(int dirfd, const char *name, const char *path,
			 struct wsl_error *err)
{
	int fd;

	if (mkdirat(dirfd, name, 0700) != 0)
		return wsl_error_errno(err, WSL_IO, errno, "cannot create %s", path);
	fd = fsx_openat(dirfd, name, O_RDONLY | O_DIRECTORY, 0);
	return dir_opened(dirfd, name, path, fd, NULL, err);
}

int fsx_open_failed(int e, const char *path, struct wsl_error *err)
{
	if (e == ELOOP)
		wsl_error_set(err, WSL_UNSAFE_PATH,
			      "%s is a symbolic link; refusing to follow it", path);
	else if (e == ENXIO || e == ENODEV)
		wsl_error_set(err, WSL_UNSAFE_PATH,
			      "%s is a socket or device, not a regular file", path);
	else
		wsl_error_errno(err, WSL_IO, e, "cannot open %s", path);
	errno = e;
	return -1;
}

int fsx_read_file_checked(int dirfd, const char *name, const char *path,
			  size_t cap, char **out, size_t *len,
			  struct wsl_error *err)
{
	struct stat st;
	char *buf;
	size_t want;
	ssize_t n;
	int fd, e;

	*out = NULL;
	*len = 0;
	/* O_NONBLOCK: a FIFO planted here must not hang the open. */
	fd = fsx_openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	if (fd < 0)
		return fsx_open_failed(errno, path, err);
	if (fstat(fd, &st) != 0) {
		e = errno;
		wsl_error_errno(err, WSL_IO, e, "cannot stat %s", path);
		goto fail;
	}
	if (fsx_check_private(&st, S_IFREG, path, err) != 0) {
		e = EPERM;
		goto fail;
	}
	/* Sized by fstat (documents are small, and replaced by rename, never
	 * grown in place); one byte more shows a file that grew meanwhile. */
	want = st.st_size >= 0 && (size_t)st.st_size < cap ? (size_t)st.st_size : cap;
	buf = malloc(want + 2);
	if (buf == NULL) {
		e = errno;
		wsl_error_errno(err, WSL_OS, e, "cannot read %s", path);
		goto fail;
	}
	/* One read(2) normally: a regular file that gives fstat's size when
	 * asked for a byte more is at its end then (a local filesystem
	 * returns what is there). A shorter read is read on to the end. */
	do
		n = read(fd, buf, want + 1);
	while (n < 0 && errno == EINTR);
	if (n >= 0 && !((size_t)n == want && (off_t)want == st.st_size) &&
	    (size_t)n < want + 1) {
		ssize_t m = fsx_read_all(fd, buf + n, want + 1 - (size_t)n);
		n = m < 0 ? m : n + m;
	}
	if (n > (ssize_t)want && want < cap) {
		/* It grew: read the rest, up to the bound. */
		char *more = realloc(buf, cap + 2);
		ssize_t m;
		if (more == NULL) {
			e = errno;
			free(buf);
			wsl_error_errno(err, WSL_OS, e, "cannot read %s", path);
			goto fail;
		}
		buf = more;
		m = fsx_read_all(fd, buf + n, cap + 1 - (size_t)n);
		n = m < 0 ? m : n + m;
	}
	if (n < 0) {
		e = errno;
		free(buf);
		wsl_error_errno(err, WSL_IO, e, "cannot read %s", path);
		goto fail;
	}
	fsx_close(fd);
	if ((size_t)n > cap) {
		free(buf);
		errno = EFBIG;
		return wsl_error_set(err, WSL_LOCK_CORRUPT,
				     "%s is larger than %zu bytes", path, cap);
	}
	buf[n] = '\0';
	*out = buf;
	*len = (size_t)n;
	return 0;
fail:
	fsx_close(fd);
	errno = e;
	return -1;
}

int fsx_write_new_file(int dirfd, const char *name, const void *data,
		       size_t len, bool sync)
{
	int fd, e;

	fd = fsx_openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return -1;
	if (fsx_write_all(fd, data, len) != 0 || (sync && fsx_fsync(fd) != 0)) {
		e = errno;
		fsx_close(fd);
		errno = e;
		return -1;
	}
	return fsx_close(fd);
}

int fsx_fsync_dir(int dirfd)
{
	return fsx_fsync(dirfd);
}

static int remove_tree(int dirfd, const char *name, int depth)
{
	struct dirent *de;
	DIR *dir;
	int fd, rc = 0;

	fd = fsx_openat(dirfd, name, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	dir = fdopendir(fd);
	if (dir == NULL) {
		fsx_close(fd);
		return -1;
	}
	while ((de = readdir(dir)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (unlinkat(fd, de->d_name, 0) == 0 || errno == ENOENT)
			continue;
		if (errno != EISDIR || depth <= 0 || remove_tree(fd, de->d_name, depth - 1) != 0)
			rc = -1;
	}
	closedir(dir);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
		rc = -1;
	return rc;
}

int fsx_remove_dir_files(int dirfd, const char *name)
{
	return remove_tree(dirfd, name, 3);
}
