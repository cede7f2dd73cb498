/* mountinfo.h - a directory's filesystem identity (DESIGN.md section 3),
 * from /proc/self/mountinfo (proc(5)) and statfs(2). */
#ifndef WSLOCK_MOUNTINFO_H
#define WSLOCK_MOUNTINFO_H

#include <limits.h>
#include <stdbool.h>
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
 * calls use the same copy (and the last few paths asked, the same answer).
 *
 * Returns 0; or -1 with WSL_NO_WORKSPACE when path does not exist, WSL_OS
 * when mountinfo cannot be read or holds no mount for path.
 */
int mountinfo_identity(const char *path, char fs[MOUNTINFO_FS_MAX + 1],
		       char fspath[PATH_MAX], struct wsl_error *err);

/* One mount of the table: fields 1 to 5 of a mountinfo line (proc(5)),
 * octal escapes (\040 and the like) undone. The strings belong to the
 * parsed table: valid until mountinfo_reset. */
struct mountinfo_mount {
	int id;				/* field 1, the mount id */
	int parent;			/* field 2, the mount it is mounted on */
	unsigned int dev_major, dev_minor;	/* field 3: the filesystem (superblock) */
	const char *root;		/* field 4: what is mounted, inside its filesystem */
	const char *target;		/* field 5: the mount point, in this namespace */
};

/*
 * Parses one line of mountinfo (len bytes, no newline) into *m, its root
 * and mount point unescaped into root and target, which m then points
 * to. Returns 0, or -1 for a malformed line (as mountinfo_parse_line;
 * also a parent or device that is not a number).
 */
int mountinfo_parse_mount(const char *line, size_t len, struct mountinfo_mount *m,
			  char root[PATH_MAX], char target[PATH_MAX]);

/*
 * Calls fn(m, arg) for every mount of /proc/self/mountinfo, in the
 * table's order (read and parsed once per process, as for
 * mountinfo_identity; lines that do not parse are left out); stops at the first non-zero return and
 * returns it. -1 with WSL_OS when the table cannot be read.
 */
int mountinfo_for_each(int (*fn)(const struct mountinfo_mount *m, void *arg), void *arg,
		       struct wsl_error *err);

/* The mount path (canonical) is on, into *m, found as mountinfo_identity
 * finds it. 0, or -1 with WSL_OS (no such mount, table unreadable). */
int mountinfo_mount_of(const char *path, struct mountinfo_mount *m, struct wsl_error *err);

/* False when m is hidden in this namespace: statx(2) of its mount point
 * names another mount (one mounted over it or over a directory above
 * it, or a mount point that does not exist there). True when the kernel
 * cannot tell (no STATX_MNT_ID, or another error: fail closed). */
bool mountinfo_visible(const struct mountinfo_mount *m);

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
