/* mountinfo.h - a directory's filesystem identity (DESIGN.md section 3),
 * from /proc/self/mountinfo (proc(5)) and statfs(2). */
#ifndef WSLOCK_MOUNTINFO_H
#define WSLOCK_MOUNTINFO_H

#include <limits.h>
#include <stddef.h>

#include "error.h"

#define MOUNTINFO_FS_MAX 64	/* bytes of a filesystem identity, without the NUL */

/*
 * The identity of the directory at path (canonical, absolute; symlinks
 * already resolved): the filesystem it is on into fs, as "fsid:<16 hex>"
 * (statfs(2) f_fsid, which ext4 and btrfs derive from the filesystem's
 * UUID) when f_fsid is not zero, else "dev:MAJ:MIN" (stat(2) st_dev); and
 * the path inside that filesystem into fspath: the root of the mount that
 * path is on, within its filesystem (mountinfo field 4), followed by the
 * rest of path below the mount point. "/" for the root of a filesystem.
 *
 * The answer is the same through a bind mount, in another mount namespace
 * (a container with the directory mounted), and for any user who can reach
 * the directory: nothing in it needs privileges or udev. The mount is found
 * by statx(2) STATX_MNT_ID when the kernel gives it (exact, even for a mount
 * point hidden under a later mount), else by the longest mount point that
 * prefixes path. /proc/self/mountinfo is read once per process; later
 * calls use the same copy (and a repeated path the same answer).
 *
 * Returns 0; or -1 with WSL_NO_WORKSPACE when path does not exist, WSL_OS
 * when mountinfo cannot be read or holds no mount for path.
 */
int mountinfo_identity(const char *path, char fs[MOUNTINFO_FS_MAX + 1],
		       char fspath[PATH_MAX], struct wsl_error *err);

/*
 * Parses one line of mountinfo (len bytes, no newline; proc(5)): field 1,
 * the mount id, into *mnt_id; field 4, the root of the mount within its
 * filesystem, into root; field 5, the mount point, into target; octal
 * escapes (\040 and the like) undone. Returns 0, or -1 for a malformed
 * line (a field missing, not absolute, longer than PATH_MAX, or a bad or
 * NUL escape).
 */
int mountinfo_parse_line(const char *line, size_t len, int *mnt_id,
			 char root[PATH_MAX], char target[PATH_MAX]);

/* Forgets the parsed table, so that the next call reads mountinfo again
 * (tests; a process that changed its mount namespace). */
void mountinfo_reset(void);

#endif
