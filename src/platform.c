/* platform.c - /proc parsing, host identity and clocks. */
#include "platform.h"
#include "crypto.h"
#include "fsx.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

bool platform_boot_id_valid(const char *s)
{
	size_t i;

	if (strlen(s) != WSL_BOOT_ID_LEN)
		return false;
	for (i = 0; i < WSL_BOOT_ID_LEN; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
		} else if (!((s[i] >= '0' && s[i] <= '9') ||
			     (s[i] >= 'a' && s[i] <= 'f'))) {
			return false;
		}
	}
	return true;
}

/* Reads a one-line identifier file (boot_id, machine-id) into out (len
 * characters and a NUL), after valid() accepts it; -1 with errno (EINVAL:
 * not a valid identifier). */
static int read_id_file(const char *path, bool (*valid)(const char *),
			char *out, size_t len)
{
	char buf[64];
	ssize_t n;
	int fd;

	fd = fsx_open(path, O_RDONLY, 0);
	if (fd < 0)
		return -1;
	n = fsx_read_all(fd, buf, sizeof(buf) - 1);
	fsx_close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	if (n > 0 && buf[n - 1] == '\n')
		buf[n - 1] = '\0';
	if (!valid(buf)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(out, buf, len + 1);
	return 0;
}

int platform_boot_id(char out[WSL_BOOT_ID_LEN + 1])
{
	return read_id_file("/proc/sys/kernel/random/boot_id",
			    platform_boot_id_valid, out, WSL_BOOT_ID_LEN);
}

bool platform_machine_id_valid(const char *s)
{
	return crypto_hex_valid(s, WSL_MACHINE_ID_LEN) &&
	       strspn(s, "0") != WSL_MACHINE_ID_LEN;
}

int platform_machine_id(char out[WSL_MACHINE_ID_LEN + 1])
{
	return read_id_file("/etc/machine-id", platform_machine_id_valid, out,
			    WSL_MACHINE_ID_LEN);
}

bool platform_pid_namespace_valid(const char *s)
{
	size_t len = strlen(s), i;

	if (len < 7 || len > WSL_PIDNS_MAX || strncmp(s, "pid:[", 5) != 0 ||
	    s[len - 1] != ']' || s[5] == '0')
		return false;
	for (i = 5; i < len - 1; i++)
		if (!isdigit((unsigned char)s[i]))
			return false;
	return len - 6 <= 10;	/* an inode number of at most 32 bits */
}

int platform_pid_namespace(pid_t pid, char out[WSL_PIDNS_MAX + 1])
{
	char path[64], buf[WSL_PIDNS_MAX + 2];
	ssize_t n;

	if (pid == 0)
		snprintf(path, sizeof(path), "/proc/self/ns/pid");
	else
		snprintf(path, sizeof(path), "/proc/%ld/ns/pid", (long)pid);
	n = readlink(path, buf, sizeof(buf) - 1);
	if (n < 0) {
		if (errno == ENOENT)
			errno = ESRCH;
		return -1;
	}
	buf[n] = '\0';
	if (!platform_pid_namespace_valid(buf)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(out, buf, (size_t)n + 1);
	return 0;
}

bool platform_host_valid(const char *s)
{
	size_t len = strlen(s), i;

	if (len == 0 || len > WSL_HOST_MAX)
		return false;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c <= ' ' || c >= 0x7f)
			return false;
	}
	return true;
}

int platform_hostname(char out[WSL_HOST_MAX + 1])
{
	const char *env = getenv("WSLOCK_HOST");
	char buf[WSL_HOST_MAX + 2];

	if (env != NULL) {
		if (!platform_host_valid(env)) {
			errno = EINVAL;
			return -1;
		}
		snprintf(out, WSL_HOST_MAX + 1, "%s", env);
		return 0;
	}
	memset(buf, 0, sizeof(buf));
	if (gethostname(buf, sizeof(buf) - 1) != 0)
		return -1;
	if (!platform_host_valid(buf)) {
		errno = EINVAL;
		return -1;
	}
	snprintf(out, WSL_HOST_MAX + 1, "%s", buf);
	return 0;
}

int platform_parse_stat_start(const char *buf, size_t len,
			      unsigned long long *ticks)
{
	return platform_parse_stat(buf, len, ticks, NULL);
}

int platform_parse_stat(const char *buf, size_t len,
			unsigned long long *ticks, char *state)
{
	const char *p = NULL, *end = buf + len;
	int field = 2;	/* the last ')' ends field 2 */
	size_t i;

	for (i = len; i > 0; i--) {
		if (buf[i - 1] == ')') {
			p = buf + i;
			break;
		}
	}
	if (p == NULL)
		goto bad;
	while (p < end) {
		const char *start;
		char num[32];
		unsigned long long v;
		size_t n;
		char *stop;

		if (*p != ' ')
			goto bad;
		p++;
		start = p;
		while (p < end && *p != ' ' && *p != '\n')
			p++;
		field++;
		if (field == 3) {
			if (p - start != 1)
				goto bad;
			if (state != NULL)
				*state = *start;
		}
		if (field < 22)
			continue;
		n = (size_t)(p - start);
		if (n == 0 || n >= sizeof(num))
			goto bad;
		memcpy(num, start, n);
		num[n] = '\0';
		for (i = 0; i < n; i++)
			if (!isdigit((unsigned char)num[i]))
				goto bad;
		errno = 0;
		v = strtoull(num, &stop, 10);
		if (errno != 0 || *stop != '\0')
			goto bad;
		if (ticks != NULL)
			*ticks = v;
		return 0;
	}
bad:
	errno = EINVAL;
	return -1;
}

bool platform_proc_is_ours(void)
{
	static int ours = -1;
	char buf[32];
	ssize_t n;
	long v;
	char *end;

	if (ours >= 0)
		return ours;
	n = readlink("/proc/self", buf, sizeof(buf) - 1);
	if (n <= 0)
		return (ours = 0);
	buf[n] = '\0';
	errno = 0;
	v = strtol(buf, &end, 10);
	ours = errno == 0 && *end == '\0' && v == (long)getpid();
	return ours;
}

int platform_pid_start_ticks(pid_t pid, unsigned long long *ticks)
{
	return platform_pid_stat(pid, ticks, NULL);
}

int platform_pid_stat(pid_t pid, unsigned long long *ticks, char *state)
{
	if (!platform_proc_is_ours()) {
		errno = ENOTSUP;
		return -1;
	}
	return platform_proc_stat(pid, ticks, state);
}

int platform_proc_stat(pid_t pid, unsigned long long *ticks, char *state)
{
	char path[64], buf[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	fd = fsx_open(path, O_RDONLY, 0);
	if (fd < 0) {
		if (errno == ENOENT)
			errno = ESRCH;
		return -1;
	}
	n = fsx_read_all(fd, buf, sizeof(buf));
	fsx_close(fd);
	if (n < 0) {
		/* Reading the stat of a process that just exited fails so. */
		if (errno == ENOENT)
			errno = ESRCH;
		return -1;
	}
	return platform_parse_stat(buf, (size_t)n, ticks, state);
}

int platform_pid_exists(pid_t pid)
{
	if (kill(pid, 0) == 0)
		return 1;
	if (errno == EPERM)
		return 1;
	if (errno == ESRCH)
		return 0;
	return -1;
}

enum pid_fate platform_pid_fate(pid_t pid, bool has_ticks, unsigned long long ticks,
				unsigned long long *now)
{
	unsigned long long t = 0;
	char state = '?';
	int exists = platform_pid_exists(pid);

	if (now != NULL)
		*now = 0;
	if (exists == 0)
		return PID_GONE;
	if (exists < 0)
		return PID_EXISTS_UNKNOWN;
	if (!has_ticks) {
		errno = 0;
		return PID_RUNS_UNPROVEN;
	}
	if (platform_pid_stat(pid, &t, &state) != 0)
		return errno == ESRCH ? PID_GONE : PID_RUNS_UNPROVEN;
	if (now != NULL)
		*now = t;
	if (t != ticks)
		return PID_REUSED;
	return state == 'Z' ? PID_ZOMBIE : PID_RUNS;
}

bool platform_pid_ended(enum pid_fate fate)
{
	return fate == PID_GONE || fate == PID_REUSED || fate == PID_ZOMBIE;
}

void platform_utc(time_t t, struct tm *tm)
{
	/* The proleptic Gregorian calendar from a day count (the well-known
	 * era arithmetic: 400-year eras of 146097 days, years from March). */
	long long days = (long long)(t >= 0 ? t / 86400 : (t - 86399) / 86400);
	long long secs = (long long)t - days * 86400;
	long long z = days + 719468;
	long long era = (z >= 0 ? z : z - 146096) / 146097;
	long long doe = z - era * 146097;
	long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	long long mp = (5 * doy + 2) / 153;
	long long d = doy - (153 * mp + 2) / 5 + 1;
	long long m = mp < 10 ? mp + 3 : mp - 9;
	long long y = yoe + era * 400 + (m <= 2);

	memset(tm, 0, sizeof(*tm));
	tm->tm_year = (int)(y - 1900);
	tm->tm_mon = (int)(m - 1);
	tm->tm_mday = (int)d;
	tm->tm_hour = (int)(secs / 3600);
	tm->tm_min = (int)(secs / 60 % 60);
	tm->tm_sec = (int)(secs % 60);
}

void platform_now_iso(char out[WSL_TIME_LEN + 1])
{
	struct timespec ts;
	struct tm tm;
	char date[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	platform_utc(ts.tv_sec, &tm);
	snprintf(date, sizeof(date), "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
	snprintf(out, WSL_TIME_LEN + 1, "%.19s.%03dZ", date,
		 (int)(ts.tv_nsec / 1000000) % 1000);
}

long long platform_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool digits(const char *s, int n, int lo, int hi)
{
	int v = 0, i;

	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	return v >= lo && v <= hi;
}

bool platform_time_valid(const char *s)
{
	if (strlen(s) != WSL_TIME_LEN)
		return false;
	return digits(s, 4, 1970, 9999) && s[4] == '-' &&
	       digits(s + 5, 2, 1, 12) && s[7] == '-' &&
	       digits(s + 8, 2, 1, 31) && s[10] == 'T' &&
	       digits(s + 11, 2, 0, 23) && s[13] == ':' &&
	       digits(s + 14, 2, 0, 59) && s[16] == ':' &&
	       digits(s + 17, 2, 0, 60) && s[19] == '.' &&
	       digits(s + 20, 3, 0, 999) && s[23] == 'Z';
}

const char *platform_network_fs(int fd)
{
	static const struct {
		unsigned long magic;
		const char *name;
	} netfs[] = {
		{ 0x6969, "nfs" },
		{ 0x517b, "smb" },
		{ 0xff534d42, "cifs" },
		{ 0xfe534d42, "smb2" },
		{ 0x5346414f, "afs" },
		{ 0x00c36400, "ceph" },
		{ 0x01021997, "9p" },
		{ 0x0bd00bd0, "lustre" },
		{ 0x01161970, "gfs2" },
		{ 0x7461636f, "ocfs2" },
		{ 0x73757245, "coda" },
		{ 0x564c, "ncp" },
	};
	struct statfs st;
	size_t i;

#ifdef WSLOCK_TEST_HOOKS
	/* Test builds only: pretend the registry's filesystem has this name. */
	const char *forced = getenv("WSLOCK_TEST_FSTYPE");
	if (forced != NULL && forced[0] != '\0')
		return strcmp(forced, "local") == 0 ? NULL : forced;
#endif
	if (fstatfs(fd, &st) != 0)
		return NULL;
	for (i = 0; i < sizeof(netfs) / sizeof(netfs[0]); i++)
		if ((unsigned long)st.f_type == netfs[i].magic)
			return netfs[i].name;
	return NULL;
}

/*
 * Whether the ext3/ext4 filesystem on device dev has a journal: an ext4
 * made without one (mkfs.ext4 -O ^has_journal) commits nothing in order.
 * jbd2 lists each journal it runs in /proc/fs/jbd2 as "NAME-INODE", NAME
 * the kernel's name of the block device (/sys/dev/block/MAJ:MIN points at
 * it). Unknown (no /sys, no /proc/fs/jbd2, an external journal named after
 * its own device): false, so that every directory is fsynced.
 */
static bool ext_has_journal(dev_t dev)
{
	char link[64], target[PATH_MAX];
	const char *name;
	struct dirent *de;
	bool found = false;
	size_t n;
	ssize_t len;
	DIR *dir;

	snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", major(dev), minor(dev));
	len = readlink(link, target, sizeof(target) - 1);
	if (len <= 0)
		return false;
	target[len] = '\0';
	name = strrchr(target, '/');
	name = name != NULL ? name + 1 : target;
	n = strlen(name);
	dir = opendir("/proc/fs/jbd2");
	if (dir == NULL)
		return false;
	while (!found && (de = readdir(dir)) != NULL)
		found = strncmp(de->d_name, name, n) == 0 && de->d_name[n] == '-';
	closedir(dir);
	return found;
}

enum fs_kind platform_fs_kind(int fd)
{
	struct statfs sf;
	struct stat st;

	if (fstatfs(fd, &sf) != 0)
		return FS_OTHER;
	switch ((unsigned long)sf.f_type) {
	case 0x01021994:	/* TMPFS_MAGIC */
	case 0x858458f6:	/* RAMFS_MAGIC */
		return FS_VOLATILE;
	case 0x58465342:	/* XFS_SUPER_MAGIC */
		return FS_ORDERED;
	case 0xef53:		/* EXT2/3/4_SUPER_MAGIC */
		/* ext3 and ext4 with their journal; ext2, and an ext4 made
		 * or mounted without one, run no jbd2 journal. */
		if (fstat(fd, &st) == 0 && ext_has_journal(st.st_dev))
			return FS_ORDERED;
		return FS_OTHER;
	default:
		return FS_OTHER;
	}
}
