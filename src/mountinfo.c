/* mountinfo.c - filesystem identity of a directory (see mountinfo.h).
 *
 * Why a parser of its own and not libmount: linking libmount (and with it
 * libblkid, libselinux and libpcre2, whose constructors probe for SELinux)
 * added about 0.5 ms of start-up to every command, more than the 5% an
 * uncontended `run` may cost; DESIGN.md section 3 allows reading the one
 * line that statx(2) STATX_MNT_ID names instead. The parser is fuzzed
 * (fuzz/) and cross-checked against libmount in tests/unit/test_mountinfo.c.
 *
 * Why not a UUID from udev or blkid: /dev/disk/by-uuid is missing in most
 * containers and probing a block device needs root, so two callers would
 * compute two keys for one directory - a double lock. statfs(2) f_fsid and
 * st_dev are what the kernel tells every caller alike. */
#include "mountinfo.h"
#include "fsx.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#define MOUNTINFO_MAX (16 * 1024 * 1024)	/* bytes; more is refused */

static char *table;		/* /proc/self/mountinfo, read once per process */
static size_t table_len;

static size_t memo_n;

void mountinfo_reset(void)
{
	free(table);
	table = NULL;
	table_len = 0;
	memo_n = 0;
}

static int table_load(struct wsl_error *err)
{
	size_t cap = 16384;
	ssize_t n;
	int fd;

	if (table != NULL)
		return 0;
	fd = fsx_open("/proc/self/mountinfo", O_RDONLY, 0);
	if (fd < 0)
		return wsl_error_errno(err, WSL_OS, errno, "cannot read /proc/self/mountinfo");
	for (;;) {
		char *p = realloc(table, cap);
		if (p == NULL) {
			fsx_close(fd);
			mountinfo_reset();
			return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
		}
		table = p;
		n = fsx_read_all(fd, table + table_len, cap - table_len);
		if (n < 0) {
			int e = errno;
			fsx_close(fd);
			mountinfo_reset();
			return wsl_error_errno(err, WSL_OS, e, "cannot read /proc/self/mountinfo");
		}
		table_len += (size_t)n;
		if (table_len < cap)
			break;
		if (cap >= MOUNTINFO_MAX) {
			fsx_close(fd);
			mountinfo_reset();
			return wsl_error_set(err, WSL_OS, "/proc/self/mountinfo is larger than %d bytes",
					     MOUNTINFO_MAX);
		}
		cap *= 2;
	}
	fsx_close(fd);
	return 0;
}

/* Copies the space-delimited field at *p (n bytes left) into out, undoing
 * the octal escapes the kernel writes for space, tab, newline and
 * backslash; advances *p past one following space. */
static int field_unescape(const char **p, const char *end, char out[PATH_MAX])
{
	const char *s = *p;
	size_t o = 0;

	while (s < end && *s != ' ') {
		unsigned char c = (unsigned char)*s;
		if (c == '\\') {
			if (end - s < 4 || s[1] < '0' || s[1] > '3' || s[2] < '0' || s[2] > '7' ||
			    s[3] < '0' || s[3] > '7')
				return -1;
			c = (unsigned char)(((s[1] - '0') << 6) | ((s[2] - '0') << 3) | (s[3] - '0'));
			s += 4;
		} else {
			s++;
		}
		if (c == '\0' || o + 1 >= PATH_MAX)
			return -1;
		out[o++] = (char)c;
	}
	if (o == 0 || s >= end)
		return -1;
	out[o] = '\0';
	*p = s + 1;
	return 0;
}

/* Skips one space-delimited field and the space after it. */
static int field_skip(const char **p, const char *end)
{
	const char *s = *p;

	while (s < end && *s != ' ')
		s++;
	if (s == *p || s >= end)
		return -1;
	*p = s + 1;
	return 0;
}

int mountinfo_parse_line(const char *line, size_t len, int *mnt_id,
			 char root[PATH_MAX], char target[PATH_MAX])
{
	const char *p = line, *end = line + len;
	long id = 0;

	if (len == 0 || *p < '0' || *p > '9')
		return -1;
	while (p < end && *p >= '0' && *p <= '9') {
		id = id * 10 + (*p - '0');
		if (id > 0x7fffffffL)
			return -1;
		p++;
	}
	if (p >= end || *p != ' ')
		return -1;
	p++;
	/* parent id, major:minor */
	if (field_skip(&p, end) != 0 || field_skip(&p, end) != 0 ||
	    field_unescape(&p, end, root) != 0 || field_unescape(&p, end, target) != 0)
		return -1;
	if (root[0] != '/' || target[0] != '/')
		return -1;
	*mnt_id = (int)id;
	return 0;
}

/* True when target is path or a proper ancestor of it, component-wise. */
static bool target_covers(const char *target, const char *path)
{
	size_t n = strlen(target);

	if (strcmp(target, "/") == 0)
		return true;
	return strncmp(path, target, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/*
 * The mount path is on: the line whose mount id statx(2) names (exact,
 * even where a later mount hides this one's mount point), else - a kernel
 * without STATX_MNT_ID (before 5.8) - the last line whose mount point is
 * the longest that covers path. Fills root and target; -1 when none.
 */
static int find_mount(const char *path, char root[PATH_MAX], char target[PATH_MAX])
{
	char r[PATH_MAX], t[PATH_MAX];
	const char *line = table, *end = table + table_len;
	struct statx stx;
	int want = -1, id;
	size_t best = 0;
	bool found = false;

	if (statx(AT_FDCWD, path, AT_STATX_DONT_SYNC, STATX_MNT_ID, &stx) == 0 &&
	    (stx.stx_mask & STATX_MNT_ID) != 0 && stx.stx_mnt_id <= 0x7fffffff)
		want = (int)stx.stx_mnt_id;
	while (line < end) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		size_t n = nl != NULL ? (size_t)(nl - line) : (size_t)(end - line);

		if (mountinfo_parse_line(line, n, &id, r, t) == 0) {
			if (want >= 0 && id == want) {
				memcpy(root, r, strlen(r) + 1);
				memcpy(target, t, strlen(t) + 1);
				return 0;
			}
			if (want < 0 && target_covers(t, path) && strlen(t) >= best) {
				best = strlen(t);
				memcpy(root, r, strlen(r) + 1);
				memcpy(target, t, strlen(t) + 1);
				found = true;
			}
		}
		line += n + 1;
	}
	return found ? 0 : -1;
}

/* The rest of path below the mount point target ("" at the mount point),
 * or NULL when target does not prefix path component-wise. */
static const char *below_target(const char *path, const char *target)
{
	if (strcmp(target, "/") == 0)
		return path;
	if (!target_covers(target, path))
		return NULL;
	return path + strlen(target);
}

/* The answers of this process, by path: one command asks about its
 * workspace, its registry and / (the safety checks of DESIGN.md section
 * 6), some of them more than once. Filled while table (one copy of
 * mountinfo) is; a later mountinfo_reset forgets them with it. */
#define MEMO_MAX 4
static struct memo {
	char path[PATH_MAX];
	char fs[MOUNTINFO_FS_MAX + 1];
	char fspath[PATH_MAX];
} *memo;
static size_t memo_next;

static bool memo_find(const char *path, char fs[MOUNTINFO_FS_MAX + 1], char fspath[PATH_MAX])
{
	for (size_t i = 0; table != NULL && i < memo_n; i++)
		if (strcmp(memo[i].path, path) == 0) {
			memcpy(fs, memo[i].fs, sizeof(memo[i].fs));
			memcpy(fspath, memo[i].fspath, strlen(memo[i].fspath) + 1);
			return true;
		}
	return false;
}

static void memo_add(const char *path, const char *fs, const char *fspath)
{
	struct memo *m;

	if (memo == NULL && (memo = calloc(MEMO_MAX, sizeof(*memo))) == NULL)
		return;
	if (strlen(path) >= PATH_MAX || strlen(fspath) >= PATH_MAX)
		return;
	m = &memo[memo_next];
	memo_next = (memo_next + 1) % MEMO_MAX;
	if (memo_n < MEMO_MAX)
		memo_n++;
	memcpy(m->path, path, strlen(path) + 1);
	snprintf(m->fs, sizeof(m->fs), "%s", fs);
	memcpy(m->fspath, fspath, strlen(fspath) + 1);
}

int mountinfo_identity(const char *path, char fs[MOUNTINFO_FS_MAX + 1],
		       char fspath[PATH_MAX], struct wsl_error *err)
{
	char root[PATH_MAX], target[PATH_MAX];
	struct statfs sf;
	struct stat st;
	const char *rest;
	unsigned int v0, v1;
	int n;

	if (memo_find(path, fs, fspath))
		return 0;
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
	if (find_mount(path, root, target) != 0 ||
	    (rest = below_target(path, target)) == NULL)
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
	memo_add(path, fs, fspath);
	return 0;
}
