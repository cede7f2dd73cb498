/* mountinfo.c - filesystem identity of a directory (see mountinfo.h).
 *
 * Why not a UUID from udev or blkid: /dev/disk/by-uuid is missing in most
 * containers and probing a block device needs root, so two callers would
 * compute two keys for one directory - a double lock. statfs(2) f_fsid and
 * st_dev are what the kernel tells every caller alike. */
#include "mountinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <libmount.h>

static struct libmnt_table *table;	/* parsed once per process */

void mountinfo_reset(void)
{
	mnt_unref_table(table);
	table = NULL;
}

static int table_load(struct wsl_error *err)
{
	if (table != NULL)
		return 0;
	errno = 0;
	table = mnt_new_table_from_file("/proc/self/mountinfo");
	if (table == NULL)
		return wsl_error_errno(err, WSL_OS, errno != 0 ? errno : EINVAL,
				       "cannot read /proc/self/mountinfo");
	return 0;
}

/* The mount with id mnt_id, or NULL. */
static struct libmnt_fs *find_by_id(int mnt_id)
{
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs = NULL, *found = NULL;

	if (it == NULL)
		return NULL;
	while (mnt_table_next_fs(table, it, &fs) == 0) {
		if (mnt_fs_get_id(fs) == mnt_id) {
			found = fs;
			break;
		}
	}
	mnt_free_iter(it);
	return found;
}

/* The mount path is on: by statx's mount id, else by mount point. */
static struct libmnt_fs *find_mount(const char *path)
{
	struct statx stx;

	if (statx(AT_FDCWD, path, AT_STATX_DONT_SYNC, STATX_MNT_ID, &stx) == 0 &&
	    (stx.stx_mask & STATX_MNT_ID) != 0) {
		struct libmnt_fs *fs = find_by_id((int)stx.stx_mnt_id);
		if (fs != NULL)
			return fs;
	}
	return mnt_table_find_mountpoint(table, path, MNT_ITER_BACKWARD);
}

/* The rest of path below the mount point target ("" at the mount point),
 * or NULL when target does not prefix path component-wise. */
static const char *below_target(const char *path, const char *target)
{
	size_t n = strlen(target);

	if (strcmp(target, "/") == 0)
		return path;
	if (strncmp(path, target, n) != 0 || (path[n] != '\0' && path[n] != '/'))
		return NULL;
	return path + n;
}

int mountinfo_identity(const char *path, char fs[MOUNTINFO_FS_MAX + 1],
		       char fspath[PATH_MAX], struct wsl_error *err)
{
	struct libmnt_fs *m;
	struct statfs sf;
	struct stat st;
	const char *root, *target, *rest;
	unsigned int v0, v1;
	int n;

	if (stat(path, &st) != 0 || statfs(path, &sf) != 0)
		return wsl_error_errno(err, errno == ENOENT || errno == ENOTDIR ?
				       WSL_NO_WORKSPACE : WSL_OS, errno,
				       "cannot read the filesystem of %s", path);
	memcpy(&v0, &sf.f_fsid.__val[0], sizeof(v0));
	memcpy(&v1, &sf.f_fsid.__val[1], sizeof(v1));
	if (v0 != 0 || v1 != 0)
		snprintf(fs, MOUNTINFO_FS_MAX + 1, "fsid:%08x%08x", v0, v1);
	else
		snprintf(fs, MOUNTINFO_FS_MAX + 1, "dev:%u:%u", major(st.st_dev),
			 minor(st.st_dev));

	if (table_load(err) != 0)
		return -1;
	m = find_mount(path);
	target = m != NULL ? mnt_fs_get_target(m) : NULL;
	root = m != NULL ? mnt_fs_get_root(m) : NULL;
	rest = target != NULL ? below_target(path, target) : NULL;
	if (root == NULL || rest == NULL || root[0] != '/')
		return wsl_error_set(err, WSL_OS,
				     "no mount for %s in /proc/self/mountinfo", path);
	if (strcmp(root, "/") == 0)
		n = snprintf(fspath, PATH_MAX, "%s", rest[0] != '\0' ? rest : "/");
	else
		n = snprintf(fspath, PATH_MAX, "%s%s", root, rest);
	if (n < 0 || n >= PATH_MAX)
		return wsl_error_set(err, WSL_OS,
				     "the path of %s inside its filesystem is longer than PATH_MAX",
				     path);
	return 0;
}
