/* fsx.h - safe file-system primitives for the registry: every descriptor
 * O_CLOEXEC, every registry path O_NOFOLLOW, EINTR retried, atomic publish
 * and fsync. Functions return 0 or a descriptor, or -1 with errno set (the
 * *_checked ones also fill a struct wsl_error). */
#ifndef WSLOCK_FSX_H
#define WSLOCK_FSX_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "error.h"

/* open(2) with O_CLOEXEC added, retried on EINTR. */
int fsx_open(const char *path, int flags, mode_t mode);

/* openat(2) with O_CLOEXEC | O_NOFOLLOW added, retried on EINTR: a symlink as
 * the last component fails with ELOOP (or ENOTDIR with O_DIRECTORY). */
int fsx_openat(int dirfd, const char *name, int flags, mode_t mode);

/* close(2); EINTR is not retried (the descriptor is gone on Linux). */
int fsx_close(int fd);

/* Reads until end of file or cap bytes; returns the byte count. */
ssize_t fsx_read_all(int fd, void *buf, size_t cap);

/* Writes all len bytes, retrying short writes and EINTR. */
int fsx_write_all(int fd, const void *buf, size_t len);

/* fsync(2), retried on EINTR. */
int fsx_fsync(int fd);

/* flock(2), retried on EINTR unless op has LOCK_NB... and also then. */
int fsx_flock(int fd, int op);

/*
 * Checks that st (from fstat/fstatat without following symlinks) is an
 * object the registry may trust: of the given type (S_IFDIR or S_IFREG),
 * owned by the effective uid, without group or world permission bits.
 * Fails with WSL_UNSAFE_PATH naming path.
 */
int fsx_check_private(const struct stat *st, mode_t type, const char *path,
		      struct wsl_error *err);

/* The effective uid, asked of the kernel once per process (wslock never
 * changes it); registry objects must be owned by it. */
uid_t fsx_euid(void);

/* Creates the directory name below dirfd (0700; EEXIST is an error: it must
 * be new), opens it O_NOFOLLOW and checks it as fsx_open_dir_checked does.
 * Returns the descriptor, or -1 with err (WSL_IO with errno, or
 * WSL_UNSAFE_PATH). */
int fsx_make_dir_checked(int dirfd, const char *name, const char *path,
			 struct wsl_error *err);

/*
 * Opens the directory name below dirfd (O_DIRECTORY | O_NOFOLLOW), creating
 * it 0700 first when create is true, and checks it with fsx_check_private.
 * path is the full path for messages. Returns the descriptor; -1 with
 * WSL_UNSAFE_PATH for a symlink or unsafe owner/mode, WSL_NOT_HELD-free
 * errno ENOENT (err code WSL_IO) when missing and create is false.
 */
int fsx_open_dir_checked(int dirfd, const char *name, const char *path,
			 bool create, struct wsl_error *err);

/* fsx_open_dir_checked, also filling *st with the opened directory's
 * fstat (its device and inode: what a reader compares later to tell that
 * the directory is still linked where it opened it). */
int fsx_open_dir_checked_st(int dirfd, const char *name, const char *path,
			    bool create, struct stat *st, struct wsl_error *err);

/*
 * Fills err for an open(2) of path (the full path, for the message) that
 * failed with errno e: WSL_UNSAFE_PATH for a symbolic link (ELOOP, from
 * O_NOFOLLOW) or a socket or device (ENXIO, ENODEV: O_NONBLOCK opens), else
 * WSL_IO with e. Returns -1 with errno e.
 */
int fsx_open_failed(int e, const char *path, struct wsl_error *err);

/*
 * Reads the regular file name below dirfd into a new NUL-terminated buffer
 * (*out, free(3) it), at most cap bytes: a larger file fails with errno
 * EFBIG. The file must pass fsx_check_private (a FIFO, socket, symlink or
 * foreign file fails with WSL_UNSAFE_PATH). Missing: -1, errno ENOENT, err
 * code WSL_IO.
 */
int fsx_read_file_checked(int dirfd, const char *name, const char *path,
			  size_t cap, char **out, size_t *len,
			  struct wsl_error *err);

/* Creates name below dirfd exclusively (0600), writes len bytes, fsyncs it
 * when sync is true, and closes it. An existing name fails with EEXIST. */
int fsx_write_new_file(int dirfd, const char *name, const void *data,
		       size_t len, bool sync);

/* Opens dirfd's directory again read-only and fsyncs it, so that entries
 * created or renamed in it survive a crash. */
int fsx_fsync_dir(int dirfd);

/* Removes the directory name below dirfd together with what is inside it:
 * files, and directories down to 3 levels below it (a shared lock keeps
 * holders/H/ in its lock directory), never following a symlink (one is
 * unlinked). Missing: 0. */
int fsx_remove_dir_files(int dirfd, const char *name);

#endif
