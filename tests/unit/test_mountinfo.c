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
#include <libmount.h>

/* Every line of this process's mountinfo parsed by mountinfo_parse_line
 * and by libmount gives the same id, root and mount point. */
static void cross_check_libmount(void)
{
	struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs = NULL;
	char line[8192], root[PATH_MAX], target[PATH_MAX];
	int n = 0, same = 0, id;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	CHECK(tb != NULL && it != NULL && f != NULL, "libmount reads mountinfo");
	if (tb == NULL || it == NULL || f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL &&
	       mnt_table_next_fs(tb, it, &fs) == 0) {
		size_t len = strcspn(line, "\n");
		n++;
		if (mountinfo_parse_line(line, len, &id, root, target) == 0 &&
		    id == mnt_fs_get_id(fs) && strcmp(root, mnt_fs_get_root(fs)) == 0 &&
		    strcmp(target, mnt_fs_get_target(fs)) == 0)
			same++;
	}
	fclose(f);
	CHECK(n > 0 && same == n, "every mountinfo line parses as libmount parses it");
	mnt_free_iter(it);
	mnt_unref_table(tb);
}

struct each_ctx {
	struct libmnt_table *tb;
	struct libmnt_iter *it;
	int n, same;
};

static int each_one(const struct mountinfo_mount *m, void *arg)
{
	struct each_ctx *c = arg;
	struct libmnt_fs *fs = NULL;

	if (mnt_table_next_fs(c->tb, c->it, &fs) != 0)
		return 1;
	c->n++;
	if (m->id == mnt_fs_get_id(fs) && m->parent == mnt_fs_get_parent_id(fs) &&
	    makedev(m->dev_major, m->dev_minor) == mnt_fs_get_devno(fs) &&
	    strcmp(m->root, mnt_fs_get_root(fs)) == 0 &&
	    strcmp(m->target, mnt_fs_get_target(fs)) == 0)
		c->same++;
	return 0;
}

/* The table mountinfo_for_each walks (parsed once) is libmount's, line by
 * line: ids, parents, devices, roots and mount points. */
static void cross_check_each(void)
{
	struct each_ctx c = { mnt_new_table_from_file("/proc/self/mountinfo"),
			      mnt_new_iter(MNT_ITER_FORWARD), 0, 0 };
	struct wsl_error err = { 0 };

	CHECK(c.tb != NULL && c.it != NULL, "libmount reads mountinfo again");
	if (c.tb == NULL || c.it == NULL)
		return;
	mountinfo_reset();
	CHECK(mountinfo_for_each(each_one, &c, &err) == 0 && c.n > 0 &&
	      c.n == mnt_table_get_nents(c.tb) && c.same == c.n,
	      "mountinfo_for_each gives every mount as libmount parses it");
	mnt_free_iter(c.it);
	mnt_unref_table(c.tb);
}

static void parse_lines(void)
{
	char root[PATH_MAX], target[PATH_MAX];
	const char *l1 = "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue";
	const char *l2 = "40 1 0:5 /a\\040b /with\\040space\\134x rw - tmpfs none rw";
	int id;

	CHECK(mountinfo_parse_line(l1, strlen(l1), &id, root, target) == 0 && id == 36 &&
	      strcmp(root, "/mnt1") == 0 && strcmp(target, "/mnt2") == 0,
	      "proc(5)'s example line parses");
	CHECK(mountinfo_parse_line(l2, strlen(l2), &id, root, target) == 0 && id == 40 &&
	      strcmp(root, "/a b") == 0 && strcmp(target, "/with space\\x") == 0,
	      "octal escapes are undone");
	{
		struct mountinfo_mount m;
		CHECK(mountinfo_parse_mount(l1, strlen(l1), &m, root, target) == 0 && m.id == 36 &&
		      m.parent == 35 && m.dev_major == 98 && m.dev_minor == 0 &&
		      strcmp(m.root, "/mnt1") == 0 && strcmp(m.target, "/mnt2") == 0,
		      "parent and device of proc(5)'s example line");
		CHECK(mountinfo_parse_mount("36 x 98:0 / / rw", 16, &m, root, target) != 0,
		      "a parent that is not a number refused");
		CHECK(mountinfo_parse_mount("36 35 98-0 / / rw", 17, &m, root, target) != 0,
		      "a device without its colon refused");
	}
	CHECK(mountinfo_parse_line("", 0, &id, root, target) != 0, "empty line refused");
	CHECK(mountinfo_parse_line("36 35 98:0", 10, &id, root, target) != 0, "short line refused");
	CHECK(mountinfo_parse_line("x 35 98:0 / / rw", 16, &id, root, target) != 0,
	      "non-numeric id refused");
	CHECK(mountinfo_parse_line("1 2 0:1 /\\000 / rw", 18, &id, root, target) != 0,
	      "NUL escape refused");
	CHECK(mountinfo_parse_line("1 2 0:1 /\\09 / rw", 17, &id, root, target) != 0,
	      "bad escape refused");
	CHECK(mountinfo_parse_line("1 2 0:1 rel / rw", 16, &id, root, target) != 0,
	      "relative root refused");
	CHECK(mountinfo_parse_line("99999999999 2 0:1 / / rw", 24, &id, root, target) != 0,
	      "id beyond int refused");
}

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

	parse_lines();
	cross_check_libmount();
	cross_check_each();
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
