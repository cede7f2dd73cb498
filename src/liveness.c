/* liveness.c - provable death or assumed life (see liveness.h). */
#include "liveness.h"
#include "fsx.h"
#include "platform.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>

const char *liveness_name(enum liveness l)
{
	switch (l) {
	case LIVENESS_LIVE:
		return "live";
	case LIVENESS_DEAD:
		return "dead";
	case LIVENESS_UNKNOWN:
	default:
		return "unknown";
	}
}

int liveness_live_held(int lockdir_fd)
{
	int fd, rc;

	if (lockdir_fd < 0)
		return 0;
	fd = fsx_openat(lockdir_fd, "live", O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	rc = fsx_flock(fd, LOCK_SH | LOCK_NB);
	if (rc == 0) {
		fsx_flock(fd, LOCK_UN);
		fsx_close(fd);
		return 0;
	}
	rc = errno == EWOULDBLOCK ? 1 : -1;
	fsx_close(fd);
	return rc;
}

/* Steps 3 and 4: another machine (unknown), or this one rebooted (dead).
 * Returns 1 with *verdict set when one applies, 0 when o was written on
 * this machine in this boot. */
static int probe_machine(const struct owner *o, enum liveness *verdict,
			 char *reason, size_t reasonlen)
{
	char host[WSL_HOST_MAX + 1], boot[WSL_BOOT_ID_LEN + 1];
	char mid[WSL_MACHINE_ID_LEN + 1];

	if (platform_hostname(host) != 0) {
		snprintf(reason, reasonlen,
			 "this host's name cannot be read, so pid %ld cannot be checked; assumed live",
			 (long)o->pid);
		*verdict = LIVENESS_LIVE;
		return 1;
	}
	if (strcmp(host, o->host) != 0) {
		snprintf(reason, reasonlen,
			 "held on host %s, this is %s: pid %ld cannot be checked from here",
			 o->host, host, (long)o->pid);
		*verdict = LIVENESS_UNKNOWN;
		return 1;
	}
	if (o->has_machine_id && platform_machine_id(mid) == 0 &&
	    strcmp(mid, o->machine_id) != 0) {
		snprintf(reason, reasonlen,
			 "held on another machine with the same host name %s (machine id %s, this is %s): pid %ld cannot be checked from here",
			 o->host, o->machine_id, mid, (long)o->pid);
		*verdict = LIVENESS_UNKNOWN;
		return 1;
	}
	if (o->has_boot_id && platform_boot_id(boot) == 0 &&
	    strcmp(boot, o->boot_id) != 0) {
		snprintf(reason, reasonlen,
			 "host rebooted: boot id %s is not the current %s",
			 o->boot_id, boot);
		*verdict = LIVENESS_DEAD;
		return 1;
	}
	return 0;
}

/* Step 5: 1 (unknown, *reason set) when o's pid is numbered in another pid
 * namespace than this process's; a document without one was written in the
 * initial namespace (DESIGN.md section 3). */
static int probe_namespace(const struct owner *o, char *reason, size_t reasonlen)
{
	const char *theirs = o->has_pid_namespace ? o->pid_namespace : WSL_PIDNS_INITIAL;
	char ours[WSL_PIDNS_MAX + 1];

	if (platform_pid_namespace(0, ours) != 0) {
		snprintf(reason, reasonlen,
			 "this process's pid namespace cannot be read (%s), so pid %ld cannot be checked",
			 strerror(errno), (long)o->pid);
		return 1;
	}
	if (strcmp(ours, theirs) != 0) {
		snprintf(reason, reasonlen,
			 "pid %ld is in pid namespace %s%s, this is %s: it cannot be checked from here",
			 (long)o->pid, theirs, o->has_pid_namespace ? "" : " (not recorded: the initial one)",
			 ours);
		return 1;
	}
	return 0;
}

/* Step 6: the pid itself, in this namespace. */
static enum liveness probe_pid(const struct owner *o, char *reason, size_t reasonlen)
{
	unsigned long long ticks;
	int exists;

	exists = platform_pid_exists(o->pid);
	if (exists == 0) {
		snprintf(reason, reasonlen, "pid %ld no longer exists", (long)o->pid);
		return LIVENESS_DEAD;
	}
	if (exists < 0) {
		snprintf(reason, reasonlen, "kill(%ld, 0) failed: %s; assumed live",
			 (long)o->pid, strerror(errno));
		return LIVENESS_LIVE;
	}
	if (!o->has_start_ticks) {
		snprintf(reason, reasonlen,
			 "pid %ld exists and no start time was recorded (%s); assumed live",
			 (long)o->pid, "pid-only-fail-closed");
		return LIVENESS_LIVE;
	}
	if (platform_pid_start_ticks(o->pid, &ticks) != 0) {
		if (errno == ESRCH) {
			snprintf(reason, reasonlen, "pid %ld no longer exists",
				 (long)o->pid);
			return LIVENESS_DEAD;
		}
		snprintf(reason, reasonlen,
			 "pid %ld exists but its start time cannot be read (%s); assumed live",
			 (long)o->pid, strerror(errno));
		return LIVENESS_LIVE;
	}
	if (ticks != o->start_ticks) {
		snprintf(reason, reasonlen,
			 "pid %ld was reused: it started at tick %llu, the holder at tick %llu",
			 (long)o->pid, ticks, o->start_ticks);
		return LIVENESS_DEAD;
	}
	snprintf(reason, reasonlen, "pid %ld is running (start time matches)",
		 (long)o->pid);
	return LIVENESS_LIVE;
}

enum liveness liveness_probe(int lockdir_fd, const struct owner *o,
			     char *reason, size_t reasonlen)
{
	enum liveness verdict;
	int held;

	held = liveness_live_held(lockdir_fd);
	if (held == 1) {
		snprintf(reason, reasonlen,
			 "the holder's kernel lock on its live file is held (wslock run pid %ld or its command is running)",
			 (long)o->pid);
		return LIVENESS_LIVE;
	}
	if (held < 0) {
		snprintf(reason, reasonlen,
			 "the holder's live file cannot be probed (%s); assumed live: if it is not a regular file, remove it by hand after checking",
			 strerror(errno));
		return LIVENESS_LIVE;
	}
	if (probe_machine(o, &verdict, reason, reasonlen))
		return verdict;
	if (probe_namespace(o, reason, reasonlen))
		return LIVENESS_UNKNOWN;
	return probe_pid(o, reason, reasonlen);
}
