/* mountinfo.c - filesystem identity of a directory (see mountinfo.h).
 *
 * Why a parser of its own and not libmount: linking libmount (and with it
 * libblkid, libselinux and libpcre2, whose constructors probe for SELinux)
 * added about 0.5 ms of start-up to every command, more than the 5% an
 * uncontended `run` may cost; DESIGN.md section 3 allows reading the one
 * line that statx(2) STATX_MNT_ID names instead. The table is read and
 * parsed once per process: the line statx names gives a directory's
 * identity, and the other lines the mounts that share directories with a
 * workspace (wsmounts.c). The parser is cross-checked against libmount in
 * tests/unit/test_mountinfo.c.
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
/* Its lines, parsed once (roots and mount points unescaped into pool). */
static struct mountinfo_mount *mounts;
static size_t n_mounts;
static char *pool;

static int parse_all(struct wsl_error *err);

static size_t memo_n;

void mountinfo_reset(void)
{
	free(table);
	free(mounts);
	free(pool);
	table = NULL;
	table_len = 0;
	memo_n = 0;
	mounts = NULL;
	n_mounts = 0;
	pool = NULL;
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
	if (parse_all(err) != 0) {
		mountinfo_reset();
		return -1;
	}
	return 0;
}

/* Copies the space-delimited field at *p (n bytes left) into out, undoing
 * the octal escapes the kernel writes for space, tab, newline and
 * backslash; advances *p past one following space. */
static int field_unescape(const char **p, const char *end, char *out)
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

/* Parses the unsigned decimal at *p up to the byte stop into *v (at most
 * max); advances *p past stop. */
static int field_number(const char **p, const char *end, char stop, unsigned long max,
			unsigned long *v)
{
	const char *s = *p;
	unsigned long n = 0;

	if (s >= end || *s < '0' || *s > '9')
		return -1;
	while (s < end && *s >= '0' && *s <= '9') {
		n = n * 10 + (unsigned long)(*s - '0');
		if (n > max)
			return -1;
		s++;
	}
	if (s >= end || *s != stop)
		return -1;
	*v = n;
	*p = s + 1;
	return 0;
}

/* Parses fields 1 to 5 of a line into *m, unescaping the root and the
 * mount point into root and target (PATH_MAX bytes each), which m then
 * points to. */
static int parse_fields(const char *line, size_t len, struct mountinfo_mount *m,
			char *root, char *target)
{
	const char *p = line, *end = line + len;
	unsigned long id, parent, major, minor;

	if (field_number(&p, end, ' ', 0x7fffffffUL, &id) != 0 ||
	    field_number(&p, end, ' ', 0x7fffffffUL, &parent) != 0 ||
	    field_number(&p, end, ':', 0xffffffffUL, &major) != 0 ||
	    field_number(&p, end, ' ', 0xffffffffUL, &minor) != 0 ||
	    field_unescape(&p, end, root) != 0 || field_unescape(&p, end, target) != 0)
		return -1;
	if (root[0] != '/' || target[0] != '/')
		return -1;
	m->id = (int)id;
	m->parent = (int)parent;
	m->dev_major = (unsigned int)major;
	m->dev_minor = (unsigned int)minor;
	m->root = root;
	m->target = target;
	return 0;
}

/* Parses every line of the table into mounts, once (lines that do not
 * parse are left out): the root and mount point of each go to pool,
 * where, unescaped and with their NULs, they take no more room than
 * their line (each is followed by a space there). */
static int parse_all(struct wsl_error *err)
{
	char root[PATH_MAX], target[PATH_MAX];
	const char *line, *end = table + table_len;
	size_t lines = 1, used = 0;

	for (line = table; line < end; line++)
		lines += *line == '\n';
	mounts = calloc(lines, sizeof(*mounts));
	pool = malloc(table_len + 1);
	if (mounts == NULL || pool == NULL)
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	for (line = table; line < end && n_mounts < lines;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		size_t n = nl != NULL ? (size_t)(nl - line) : (size_t)(end - line);
		struct mountinfo_mount *m = &mounts[n_mounts];

		if (parse_fields(line, n, m, root, target) == 0) {
			size_t r = strlen(root) + 1, t = strlen(target) + 1;

			if (used + r + t > table_len + 1)
				break;	/* cannot happen (see above) */
			memcpy(pool + used, root, r);
			memcpy(pool + used + r, target, t);
			m->root = pool + used;
			m->target = pool + used + r;
			used += r + t;
			n_mounts++;
		}
		line += n + 1;
	}
	return 0;
}

int mountinfo_parse_mount(const char *line, size_t len, struct mountinfo_mount *m,
			  char root[PATH_MAX], char target[PATH_MAX])
{
	return parse_fields(line, len, m, root, target);
}

int mountinfo_parse_line(const char *line, size_t len, int *mnt_id,
			 char root[PATH_MAX], char target[PATH_MAX])
{
	struct mountinfo_mount m;

	if (parse_fields(line, len, &m, root, target) != 0)
		return -1;
	*mnt_id = m.id;
	return 0;
}

int mountinfo_for_each(int (*fn)(const struct mountinfo_mount *m, void *arg), void *arg,
		       struct wsl_error *err)
{
	size_t i;
	int rc;

	if (table_load(err) != 0)
		return -1;
	for (i = 0; i < n_mounts; i++)
		if ((rc = fn(&mounts[i], arg)) != 0)
			return rc;
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

/* The mount id statx(2) gives for path; -1 when the kernel does not
 * tell (before 5.8), -2 when path cannot be reached (errno set). */
static int statx_mount_id(const char *path)
{
	struct statx stx;

	if (statx(AT_FDCWD, path, AT_STATX_DONT_SYNC, STATX_MNT_ID, &stx) != 0)
		return -2;
	if ((stx.stx_mask & STATX_MNT_ID) != 0 && stx.stx_mnt_id <= 0x7fffffff)
		return (int)stx.stx_mnt_id;
	return -1;
}

struct find_ctx {
	const char *path;
	int want;			/* the mount id statx named, or -1 */
	size_t best;
	bool found;
	struct mountinfo_mount *out;
};

static int find_one(const struct mountinfo_mount *m, void *arg)
{
	struct find_ctx *f = arg;

	if (f->want >= 0) {
		if (m->id != f->want)
			return 0;
		*f->out = *m;
		f->found = true;
		return 1;
	}
	if (target_covers(m->target, f->path) && strlen(m->target) >= f->best) {
		f->best = strlen(m->target);
		*f->out = *m;
		f->found = true;
	}
	return 0;
}

/*
 * The mount path is on: the line whose mount id statx(2) names (exact,
 * even where a later mount hides this one's mount point), else - a kernel
 * without STATX_MNT_ID (before 5.8) - the last line whose mount point is
 * the longest that covers path. -1 when none (err set when the table
 * cannot be read).
 */
static int find_mount(const char *path, struct mountinfo_mount *out, struct wsl_error *err)
{
	struct find_ctx f = { path, statx_mount_id(path), 0, false, out };

	if (f.want < -1)
		f.want = -1;	/* by the longest mount point, as without statx */

	if (mountinfo_for_each(find_one, &f, err) < 0)
		return -1;
	return f.found ? 0 : -1;
}

int mountinfo_mount_of(const char *path, struct mountinfo_mount *m, struct wsl_error *err)
{
	if (find_mount(path, m, err) == 0)
		return 0;
	if (err->code != WSL_OK)
		return -1;
	return wsl_error_set(err, WSL_OS, "no mount for %s in /proc/self/mountinfo", path);
}

bool mountinfo_visible(const struct mountinfo_mount *m)
{
	int id = statx_mount_id(m->target);

	if (id == -2)
		return errno != ENOENT && errno != ENOTDIR;
	return id == -1 || id == m->id;
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
	struct mountinfo_mount m;
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

	if (mountinfo_mount_of(path, &m, err) != 0)
		return -1;
	if ((rest = below_target(path, m.target)) == NULL)
		return wsl_error_set(err, WSL_OS,
				     "no mount for %s in /proc/self/mountinfo", path);
	if (strcmp(m.root, "/") == 0)
		n = snprintf(fspath, PATH_MAX, "%s", rest[0] != '\0' ? rest : "/");
	else
		n = snprintf(fspath, PATH_MAX, "%s%s", m.root, rest);
	if (n < 0 || n >= PATH_MAX)
		return wsl_error_set(err, WSL_OS,
				     "the path of %s inside its filesystem is longer than PATH_MAX",
				     path);
	memo_add(path, fs, fspath);
	return 0;
}
