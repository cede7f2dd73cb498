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
		/* The close drops the probe's shared lock: the descriptor is
		 * this process's alone (O_CLOEXEC, never inherited), so no
		 * LOCK_UN is needed first (one system call a lock less for
		 * inspect --all). */
		fsx_close(fd);
		return 0;
	}
	rc = errno == EWOULDBLOCK ? 1 : -1;
	fsx_close(fd);
	return rc;
}

/* What the prober compares owners against: its host name, machine id,
 * boot id and pid namespace, read once per process (none of them changes
 * under a running process that matters here: a host name changed meanwhile
 * only makes new owners look foreign, unknown, never dead), so that
 * inspect --all reads them once, not once per lock. */
static struct {
	bool read;
	int host_rc, mid_rc, boot_rc, ns_rc, ns_errno;
	char host[WSL_HOST_MAX + 1], mid[WSL_MACHINE_ID_LEN + 1];
	char boot[WSL_BOOT_ID_LEN + 1], ns[WSL_PIDNS_MAX + 1];
} self;

static void self_read(void)
{
	if (self.read)
		return;
	self.host_rc = platform_hostname(self.host);
	self.mid_rc = platform_machine_id(self.mid);
	self.boot_rc = platform_boot_id(self.boot);
	self.ns_rc = platform_pid_namespace(0, self.ns);
	self.ns_errno = errno;
	self.read = true;
}

/* Steps 3 and 4: another machine (unknown), or this one rebooted (dead).
 * Returns 1 with *verdict set when one applies, 0 when o was written on
 * this machine in this boot. */
static int probe_machine(const struct owner *o, enum liveness *verdict,
			 char *reason, size_t reasonlen)
{
	const char *host = self.host, *boot = self.boot, *mid = self.mid;

	self_read();
	if (self.host_rc != 0) {
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
	if (o->has_machine_id && self.mid_rc == 0 &&
	    strcmp(mid, o->machine_id) != 0) {
		snprintf(reason, reasonlen,
			 "held on another machine with the same host name %s (machine id %s, this is %s): pid %ld cannot be checked from here",
			 o->host, o->machine_id, mid, (long)o->pid);
		*verdict = LIVENESS_UNKNOWN;
		return 1;
	}
	if (o->has_boot_id && self.boot_rc == 0 &&
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
	const char *ours = self.ns;

	self_read();
	if (self.ns_rc != 0) {
		snprintf(reason, reasonlen,
			 "this process's pid namespace cannot be read (%s), so pid %ld cannot be checked",
			 strerror(self.ns_errno), (long)o->pid);
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

/* liveness_memo_begin's memo: running pids whose start ticks matched,
 * one slot per pid modulo MEMO_SLOTS (the last one there), so that a
 * listing reads /proc/PID/stat about once per distinct holder pid. */
#define MEMO_SLOTS 64
static struct {
	bool on;
	struct {
		bool valid;
		pid_t pid;
		unsigned long long ticks;
	} slot[MEMO_SLOTS];
} memo;

void liveness_memo_begin(void)
{
	memset(&memo, 0, sizeof(memo));
	memo.on = true;
}

void liveness_memo_end(void)
{
	memset(&memo, 0, sizeof(memo));
}

/* Step 6: the pid itself, in this namespace (platform_pid_fate). The
 * memo of running pids spares their /proc reads (inspect --all), never
 * their kill(2). */
static enum liveness probe_pid(const struct owner *o, char *reason, size_t reasonlen)
{
	unsigned long long now;
	enum pid_fate fate;
	unsigned m = (unsigned)o->pid % MEMO_SLOTS;

	if (memo.slot[m].valid && o->has_start_ticks && memo.slot[m].pid == o->pid &&
	    memo.slot[m].ticks == o->start_ticks && platform_pid_exists(o->pid) == 1)
		fate = PID_RUNS;
	else
		fate = platform_pid_fate(o->pid, o->has_start_ticks, o->start_ticks, &now);
	switch (fate) {
	case PID_GONE:
		snprintf(reason, reasonlen, "pid %ld no longer exists", (long)o->pid);
		return LIVENESS_DEAD;
	case PID_EXISTS_UNKNOWN:
		snprintf(reason, reasonlen, "kill(%ld, 0) failed: %s; assumed live",
			 (long)o->pid, strerror(errno));
		return LIVENESS_LIVE;
	case PID_RUNS_UNPROVEN:
		if (!o->has_start_ticks)
			snprintf(reason, reasonlen,
				 "pid %ld exists and no start time was recorded (%s); assumed live",
				 (long)o->pid, "pid-only-fail-closed");
		else
			snprintf(reason, reasonlen,
				 "pid %ld exists but its start time cannot be read (%s); assumed live",
				 (long)o->pid, strerror(errno));
		return LIVENESS_LIVE;
	case PID_REUSED:
		snprintf(reason, reasonlen,
			 "pid %ld was reused: it started at tick %llu, the holder at tick %llu",
			 (long)o->pid, now, o->start_ticks);
		return LIVENESS_DEAD;
	case PID_ZOMBIE:
		/* A zombie has exited and closed its files; only its parent's
		 * wait is missing. Nothing of it can touch the workspace. */
		snprintf(reason, reasonlen,
			 "pid %ld has exited (a zombie, not yet reaped)", (long)o->pid);
		return LIVENESS_DEAD;
	case PID_RUNS:
		break;
	}
	if (memo.on && o->has_start_ticks) {
		memo.slot[m].valid = true;
		memo.slot[m].pid = o->pid;
		memo.slot[m].ticks = o->start_ticks;
	}
	snprintf(reason, reasonlen, "pid %ld is running (start time matches)",
		 (long)o->pid);
	return LIVENESS_LIVE;
}

enum liveness liveness_probe(int lockdir_fd, const struct owner *o,
			     char *reason, size_t reasonlen)
{
	return liveness_probe_held(liveness_live_held(lockdir_fd), o, reason, reasonlen);
}

enum liveness liveness_probe_held(int held, const struct owner *o,
				  char *reason, size_t reasonlen)
{
	enum liveness verdict;

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
