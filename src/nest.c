/* nest.c - nesting by proof (see nest.h). */
#include "nest.h"
#include "fsx.h"
#include "platform.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NEST_WALK_MAX 4096

/* Whether descriptor fd's open file description holds a flock(2) lock:
 * /proc/self/fdinfo/FD lists a "lock:" line for each lock whose file is
 * that description (proc(5), fs/locks.c show_fd_locks), so a descriptor
 * inherited from the holder shows its lock and a fresh open(2) of the same
 * file shows none. */
static bool fd_holds_flock(long fd)
{
	char path[64], buf[4096];
	ssize_t n;
	int info;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%ld", fd);
	info = fsx_open(path, O_RDONLY | O_NOCTTY, 0);
	if (info < 0)
		return false;
	n = fsx_read_all(info, buf, sizeof(buf) - 1);
	fsx_close(info);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	for (const char *line = buf; line != NULL && *line != '\0';) {
		if (strncmp(line, "lock:", 5) == 0 && strstr(line, " FLOCK ") != NULL)
			return true;
		line = strchr(line, '\n');
		if (line != NULL)
			line++;
	}
	return false;
}

int nest_holds_file(dev_t dev, ino_t ino)
{
	struct dirent *de;
	DIR *dir;
	int self, found = 0;

	if (ino == 0)
		return 0;
	dir = opendir("/proc/self/fd");
	if (dir == NULL)
		return 0;
	self = dirfd(dir);
	while (!found && (de = readdir(dir)) != NULL) {
		struct stat st;
		char *end;
		long fd;

		errno = 0;
		fd = strtol(de->d_name, &end, 10);
		if (errno != 0 || *end != '\0' || end == de->d_name || fd < 0 ||
		    fd == self || fd > 1048576)
			continue;
		if (fstat((int)fd, &st) == 0 && S_ISREG(st.st_mode) &&
		    st.st_dev == dev && st.st_ino == ino && fd_holds_flock(fd))
			found = 1;
	}
	closedir(dir);
	return found;
}

/* The parent (field 4) and start ticks (field 22) of pid, from
 * /proc/PID/stat, counted after the last ')' (comm may hold anything).
 * Returns 0, or -1 when the file cannot be read or parsed. */
static int stat_parent(pid_t pid, pid_t *ppid, unsigned long long *ticks)
{
	char path[64], buf[1024];
	const char *p;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	fd = fsx_open(path, O_RDONLY | O_NOCTTY, 0);
	if (fd < 0)
		return -1;
	n = fsx_read_all(fd, buf, sizeof(buf) - 1);
	fsx_close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (p == NULL)
		return -1;
	if (platform_parse_stat_start(buf, (size_t)n, ticks) != 0)
		return -1;
	/* ") S PPID ...": field 3 is the state, field 4 the parent. */
	for (field = 2; field < 4; field++) {
		p = strchr(p + 1, ' ');
		if (p == NULL)
			return -1;
	}
	{
		char *end;
		long v;

		errno = 0;
		v = strtol(p + 1, &end, 10);
		if (errno != 0 || end == p + 1 || *end != ' ' || v < 0 || v > WSL_PID_MAX)
			return -1;
		*ppid = (pid_t)v;
	}
	return 0;
}

int nest_descends_from(pid_t from, pid_t pid, unsigned long long ticks)
{
	pid_t cur = from;
	int steps;

	/* A /proc of another pid namespace shows other processes' parents. */
	if (!platform_proc_is_ours())
		return 0;
	for (steps = 0; steps < NEST_WALK_MAX && cur > 0; steps++) {
		unsigned long long t;
		pid_t parent;

		if (stat_parent(cur, &parent, &t) != 0)
			return 0;
		if (cur == pid)
			return t == ticks ? 1 : 0;
		if (parent == cur)
			return 0;
		cur = parent;
	}
	return 0;
}

/* Whether o was written on this host, in this boot and in our pid
 * namespace (the initial one when the document does not say): only then
 * does a pid in our /proc mean the same process. */
static bool same_pid_space(const struct owner *o)
{
	char host[WSL_HOST_MAX + 1], boot[WSL_BOOT_ID_LEN + 1];
	char ns[WSL_PIDNS_MAX + 1];

	if (platform_hostname(host) != 0 || strcmp(host, o->host) != 0)
		return false;
	if (!o->has_boot_id || platform_boot_id(boot) != 0 ||
	    strcmp(boot, o->boot_id) != 0)
		return false;
	if (platform_pid_namespace(0, ns) != 0 ||
	    strcmp(ns, o->has_pid_namespace ? o->pid_namespace : WSL_PIDNS_INITIAL) != 0)
		return false;
	return true;
}

/* The holder of e (a shared lock: one of its holders) that from is
 * inside, and how; NULL when none. */
static const struct lock_entry *proven_holder(const struct lock_entry *e, pid_t from,
					      enum nest_how *how)
{
	for (size_t i = 0; i < e->n_holders; i++) {
		*how = nest_proven(&e->holders[i], from);
		if (*how != NEST_NONE)
			return &e->holders[i];
	}
	*how = NEST_NONE;
	return NULL;
}

enum nest_how nest_proven(const struct lock_entry *e, pid_t from)
{
	enum nest_how how;

	if (e->holders != NULL)
		return proven_holder(e, from, &how) != NULL ? how : NEST_NONE;
	if (e->state != LOCK_HELD || !e->has_owner)
		return NEST_NONE;
	if (e->live_ino != 0 && nest_holds_file(e->live_dev, e->live_ino))
		return NEST_POSSESSION;
	if (!e->owner.has_start_ticks || !same_pid_space(&e->owner))
		return NEST_NONE;
	if (nest_descends_from(from, e->owner.pid, e->owner.start_ticks))
		return NEST_ANCESTRY;
	return NEST_NONE;
}

int nest_find(struct registry *reg, const char *workspace, pid_t from,
	      struct lock_entry *out, struct wsl_error *err)
{
	struct lock_entry *es;
	size_t n, i;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	out->state = LOCK_FREE;
	/* all levels in one read where the backend can (etcd: one request) */
	if (registry_get_chain(reg, workspace, false, &es, &n, err) != 0)
		return -1;
	for (i = 0; i < n; i++) {
		enum nest_how how;
		struct lock_entry *h = (struct lock_entry *)proven_holder(&es[i], from, &how);

		/* A shared lock: the holder it is inside (out->shared says
		 * so), with the lock's workspace. */
		if (rc == 0 && h != NULL) {
			*out = *h;
			memset(h, 0, sizeof(*h));
			rc = 1;
		} else if (rc == 0 && es[i].holders == NULL && nest_proven(&es[i], from) != NEST_NONE) {
			*out = es[i];
			memset(&es[i], 0, sizeof(es[i]));
			rc = 1;
		}
		lock_entry_free(&es[i]);
	}
	free(es);
	return rc;
}
