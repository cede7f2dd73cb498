/* test_mountinfo.c - a directory's filesystem identity. Bind mounts and
 * other namespaces are covered by tests/identity.bats (they need root). */
#include "mountinfo.h"
#include "owner.h"
#include "tap.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* What mountinfo_identity should say about fs, from statfs/stat alone. */
static void expected_fs(const char *path, char out[MOUNTINFO_FS_MAX + 1])
{
	struct statfs sf;
	struct stat st;
	unsigned int v[2];

	if (statfs(path, &sf) != 0 || stat(path, &st) != 0) {
		out[0] = '\0';
		return;
	}
	memcpy(v, &sf.f_fsid, sizeof(v));
	if (v[0] != 0 || v[1] != 0)
		snprintf(out, MOUNTINFO_FS_MAX + 1, "fsid:%08x%08x", v[0], v[1]);
	else
		snprintf(out, MOUNTINFO_FS_MAX + 1, "dev:%u:%u", major(st.st_dev),
			 minor(st.st_dev));
}

int main(void)
{
	struct wsl_error err = { 0 };
	char fs[MOUNTINFO_FS_MAX + 1], fs2[MOUNTINFO_FS_MAX + 1], want[MOUNTINFO_FS_MAX + 1];
	char path[PATH_MAX], path2[PATH_MAX], dir[] = "/tmp/wslock-mi-XXXXXX";
	char ws[PATH_MAX], sub[PATH_MAX + 8], gone[PATH_MAX + 8];

	CHECK(mountinfo_identity("/", fs, path, &err) == 0, "the root directory has an identity");
	expected_fs("/", want);
	CHECK(strcmp(fs, want) == 0, "root: the identity is statfs f_fsid, else st_dev");
	CHECK(owner_fs_valid(fs), "root: the identity has the documented shape");
	CHECK(path[0] == '/', "root: the path inside starts with /");

	CHECK(mkdtemp(dir) != NULL && realpath(dir, ws) != NULL, "a temporary directory");
	snprintf(sub, sizeof(sub), "%s/sub", ws);
	CHECK(mkdir(sub, 0700) == 0, "a subdirectory");
	CHECK(mountinfo_identity(ws, fs, path, &err) == 0, "the directory has an identity");
	expected_fs(ws, want);
	CHECK(strcmp(fs, want) == 0 && owner_fs_valid(fs), "directory: statfs identity");
	CHECK(mountinfo_identity(sub, fs2, path2, &err) == 0 && strcmp(fs, fs2) == 0,
	      "a subdirectory is on the same filesystem");
	{
		size_t n = strlen(path);
		CHECK((strcmp(path, "/") == 0 ? strcmp(path2, "/sub") == 0 :
		       strncmp(path2, path, n) == 0 && strcmp(path2 + n, "/sub") == 0),
		      "the subdirectory's path inside is the directory's plus /sub");
	}
	CHECK(owner_path_canonical(path) || strcmp(path, "/") == 0,
	      "the path inside is canonical");

	/* A second call answers from the table parsed by the first; after a
	 * reset the same answer comes from a fresh parse. */
	mountinfo_reset();
	CHECK(mountinfo_identity(sub, fs, path, &err) == 0 && strcmp(fs, fs2) == 0 &&
	      strcmp(path, path2) == 0, "the same answer after mountinfo_reset");

	CHECK(mountinfo_identity("/proc/sys", fs, path, &err) == 0 &&
	      strcmp(path, "/sys") == 0, "/proc/sys is /sys inside procfs");
	CHECK(mountinfo_identity("/proc", fs, path, &err) == 0 && strcmp(path, "/") == 0,
	      "a mount point is / inside its filesystem");

	snprintf(gone, sizeof(gone), "%s/gone", ws);
	CHECK(mountinfo_identity(gone, fs, path, &err) != 0 && err.code == WSL_NO_WORKSPACE,
	      "a missing directory: WSL_NO_WORKSPACE");
	wsl_error_clear(&err);

	rmdir(sub);
	rmdir(ws);
	mountinfo_reset();
	return tap_done();
}
