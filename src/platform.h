/* platform.h - facts about this host and its processes, read from /proc. */
#ifndef WSLOCK_PLATFORM_H
#define WSLOCK_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#define WSL_BOOT_ID_LEN 36	/* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
#define WSL_HOST_MAX 255	/* bytes, without the NUL */
#define WSL_TIME_LEN 24		/* "2026-11-30T11:28:58.123Z" */
#define WSL_PID_MAX 4194304	/* PID_MAX_LIMIT on 64-bit Linux, proc(5) */
#define WSL_MACHINE_ID_LEN 32	/* lowercase hex digits, machine-id(5) */
#define WSL_PIDNS_MAX 32	/* "pid:[4294967295]" and room to spare */
/* The initial pid namespace as readlink(2) of /proc/PID/ns/pid shows it:
 * its inode number is fixed (PROC_PID_INIT_INO in the kernel's
 * include/linux/proc_ns.h). A document without pid_namespace counts as
 * written there (DESIGN.md section 3). */
#define WSL_PIDNS_INITIAL "pid:[4026531836]"

/* True when s is a boot id as the kernel prints it: 36 characters, lowercase
 * hex in groups 8-4-4-4-12 separated by '-' (random(4), boot_id). */
bool platform_boot_id_valid(const char *s);

/* Reads /proc/sys/kernel/random/boot_id into out (37 bytes). Returns 0, or
 * -1 with errno set when it is missing or malformed (EINVAL). */
int platform_boot_id(char out[WSL_BOOT_ID_LEN + 1]);

/* True when s is a machine id as machine-id(5) defines it: 32 lowercase
 * hex digits, not all zero. */
bool platform_machine_id_valid(const char *s);

/* Reads /etc/machine-id (machine-id(5)) into out (33 bytes). Returns 0, or
 * -1 with errno set when it is missing or unreadable, EINVAL when it does
 * not hold a machine id (an empty file, "uninitialized"). */
int platform_machine_id(char out[WSL_MACHINE_ID_LEN + 1]);

/* True when s is a pid namespace as readlink(2) of /proc/PID/ns/pid shows
 * it: "pid:[N]", N a decimal inode number without leading zeros. */
bool platform_pid_namespace_valid(const char *s);

/* The pid namespace of pid (0: the calling process) as "pid:[INODE]", read
 * with readlink(2) from /proc/PID/ns/pid (namespaces(7)). Returns 0, or -1
 * with errno: ESRCH when the process does not exist, EACCES when it is not
 * ours to inspect, EINVAL when the link is not a pid namespace. */
int platform_pid_namespace(pid_t pid, char out[WSL_PIDNS_MAX + 1]);

/* The host name recorded in owner documents: $WSLOCK_HOST when set and
 * valid, else gethostname(2). Returns 0, or -1 with errno (EINVAL for a
 * WSLOCK_HOST that is empty, too long or has spaces or control characters). */
int platform_hostname(char out[WSL_HOST_MAX + 1]);

/* True when s is acceptable as a host name: 1..255 printable ASCII bytes,
 * no space. */
bool platform_host_valid(const char *s);

/*
 * Parses the contents of /proc/PID/stat (len bytes, need not be
 * NUL-terminated) and stores field 22, starttime, in *ticks: the process
 * start time in clock ticks (sysconf(_SC_CLK_TCK)) after boot, proc(5).
 * Field 2, comm, may hold spaces and parentheses, so the fields are counted
 * from the last ')'. Returns 0, or -1 (errno EINVAL) for malformed input.
 */
int platform_parse_stat_start(const char *buf, size_t len,
			      unsigned long long *ticks);

/* platform_parse_stat_start, and also field 3, the one-letter state
 * (proc(5): 'Z' a zombie, exited and not yet reaped), in *state unless
 * state is NULL (and the ticks only when ticks is not NULL). A state
 * field that is not one character is malformed. */
int platform_parse_stat(const char *buf, size_t len,
			unsigned long long *ticks, char *state);

/* Whether /proc is the procfs of this process's own pid namespace: its
 * "self" link names getpid(). After `unshare -p --fork` without
 * --mount-proc, /proc still shows the parent namespace, where /proc/N is
 * another process than this namespace's pid N (pid_namespaces(7), proc(5)):
 * nothing about a pid may then be read from it. Read once, then cached. */
bool platform_proc_is_ours(void);

/* Start time of pid in clock ticks after boot, from /proc/PID/stat.
 * Returns 0; or -1 with errno ESRCH when the process does not exist, EINVAL
 * when the file is malformed, ENOTSUP when /proc belongs to another pid
 * namespace (platform_proc_is_ours), or another errno when it cannot be
 * read. */
int platform_pid_start_ticks(pid_t pid, unsigned long long *ticks);

/* platform_pid_start_ticks, and also the process state letter of
 * /proc/PID/stat field 3 in *state (unless NULL): 'Z' for a zombie. Same
 * returns and errors; ticks may be NULL. */
int platform_pid_stat(pid_t pid, unsigned long long *ticks, char *state);

/* platform_pid_stat without the check that /proc is this pid namespace's:
 * for a pid that /proc itself named (/proc/locks), whichever namespace
 * that /proc shows. Same returns and errors but ENOTSUP. */
int platform_proc_stat(pid_t pid, unsigned long long *ticks, char *state);

/* kill(pid, 0): 1 when the process exists (EPERM counts: it exists, it is
 * someone else's), 0 when it does not (ESRCH), -1 with errno otherwise. */
int platform_pid_exists(pid_t pid);

/* What became of the holder process pid (started at tick ticks when
 * has_ticks), the one answer every place that asks whether a holder
 * lives uses (liveness step 6, DESIGN.md section 4; the waits, the
 * keeper, acquire --pid): */
enum pid_fate {
	PID_RUNS,		/* it exists and its start ticks match */
	PID_RUNS_UNPROVEN,	/* it exists, but no ticks were recorded or
				 * they cannot be read now (errno set): fail
				 * closed, counted as running */
	PID_EXISTS_UNKNOWN,	/* kill(2) failed otherwise (errno set): running */
	PID_GONE,		/* no such process (ESRCH) */
	PID_REUSED,		/* another process has the pid: its ticks in *now */
	PID_ZOMBIE,		/* exited, not yet reaped by its parent: its
				 * files are closed, it can touch nothing */
};

/* kill(pid, 0), then, with has_ticks, /proc/PID/stat (platform_pid_stat:
 * start ticks and state); *now (unless NULL) gets the ticks read. A pid
 * whose /proc cannot be read is PID_RUNS_UNPROVEN, never gone. */
enum pid_fate platform_pid_fate(pid_t pid, bool has_ticks, unsigned long long ticks,
				unsigned long long *now);

/* Whether fate says the holder has ended: PID_GONE, PID_REUSED or
 * PID_ZOMBIE. */
bool platform_pid_ended(enum pid_fate fate);

/* The current UTC time as "YYYY-MM-DDTHH:MM:SS.mmmZ" (RFC 3339, ms). */
void platform_now_iso(char out[WSL_TIME_LEN + 1]);

/* CLOCK_MONOTONIC in milliseconds: for deadlines and elapsed time, never
 * for dates (it does not jump when the wall clock is set). */
/* The UTC calendar time of t (seconds since the epoch) into *tm, as
 * gmtime_r(3) gives it (tm_wday, tm_yday and tm_isdst left 0), without the
 * time-zone file that glibc loads on its first gmtime_r (three syscalls for
 * a stamp that is UTC anyway). */
void platform_utc(time_t t, struct tm *tm);

long long platform_mono_ms(void);

/* True when s has exactly the shape platform_now_iso() produces and its
 * fields are in range (month 1..12, day 1..31, hour 0..23, ...). */
bool platform_time_valid(const char *s);

/* How a filesystem keeps metadata across a crash (see platform_fs_kind). */
enum fs_kind {
	FS_VOLATILE,	/* tmpfs, ramfs: nothing survives, nothing to sync */
	FS_ORDERED,	/* ext3/ext4 and XFS: metadata is journaled and committed
			 * in order, so one fsync commits every earlier change */
	FS_OTHER,	/* anything else: fsync each directory changed */
};

/* Classifies the filesystem behind fd by statfs(2) f_type; ext2/3/4 share
 * one magic number, and one counts as ordered only when jbd2 runs its
 * journal (/proc/fs/jbd2): ext3 and ext4 with a journal, not ext2 nor an
 * ext4 without one. Unknown or unreadable: FS_OTHER. */
enum fs_kind platform_fs_kind(int fd);

/* When the filesystem behind fd is a network filesystem (by statfs(2)
 * f_type: NFS, SMB/CIFS, AFS, Ceph, 9P, Lustre, GFS2, OCFS2...), returns
 * its name; NULL for a local one or when statfs fails. */
const char *platform_network_fs(int fd);

#endif
