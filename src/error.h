/* error.h - stable failure codes, their exit statuses, and the error record
 * that the core fills instead of printing or exiting.
 *
 * The code/exit-status table is DESIGN.md section 6; exit statuses follow
 * sysexits.h (EX_USAGE 64, EX_DATAERR 65, EX_NOINPUT 66, EX_UNAVAILABLE 69,
 * EX_SOFTWARE 70, EX_OSERR 71, EX_IOERR 74, EX_TEMPFAIL 75, EX_NOPERM 77,
 * EX_CONFIG 78).
 */
#ifndef WSLOCK_ERROR_H
#define WSLOCK_ERROR_H

#include <stdarg.h>
#include <stdbool.h>

enum wsl_code {
	WSL_OK = 0,
	WSL_USAGE,
	WSL_OWNER_MISMATCH,
	WSL_INVALID_OWNER,
	WSL_LOCK_CORRUPT,
	WSL_NO_WORKSPACE,
	WSL_NOT_HELD,
	WSL_RECOVERY_REQUIRED,
	WSL_LIVENESS_UNKNOWN,
	WSL_BACKEND_UNAVAILABLE,
	WSL_INTERNAL,
	WSL_OS,
	WSL_IO,
	WSL_BUSY,
	WSL_TIMEOUT,
	WSL_OWNER_LIVE,
	WSL_REGISTRY_BUSY,
	WSL_UNSAFE_PATH,
	WSL_NETWORK_FS,
	WSL_OWNERSHIP_LOST,
	WSL_CODE_COUNT
};

/*
 * What a failed core call reports.  message is one line, lowercase, without
 * the "wslock: " prefix and without a final full stop: it is for people, and
 * no code decides anything by its wording.  The facts a caller may branch on
 * are fields: code, sys_errno (the OS errno behind the failure, 0 when there
 * is none) and the flags.  The optional details are heap strings owned by
 * the record (NULL when absent): holder is the owner document's JSON text,
 * the others plain text.
 */
struct wsl_error {
	enum wsl_code code;
	char message[1024];
	int sys_errno;		/* errno of the failed system call, or 0 */
	bool outcome_unknown;	/* a write was sent and may or may not have
				 * been applied (etcd: the connection broke
				 * after the request went out) */
	int signo;		/* a wait was ended by this signal, read
				 * from the caller's signalfd (the caller
				 * exits 128+signo), or 0 */
	char *workspace_root;
	char *holder;
	char *liveness;
	char *liveness_reason;
	char *path;
	/* For WSL_BUSY and WSL_TIMEOUT: the workspace asked for, how the lock in
	 * the way relates to it ("same", "ancestor", "descendant": a static
	 * string, or NULL), and the -w timeout that expired (ms; has_timeout). */
	char *requested;
	const char *relation;
	bool has_timeout;
	long long timeout_ms;
	/* For WSL_LOCK_CORRUPT: the corrupt lock of workspace_root is cleared
	 * by recover --force --reason given a copy of path (its owner.json:
	 * readable, not unsafe, its holder not live); output.c proposes that
	 * as the next step. */
	bool corrupt_clearable;
	/* The holder named (lockrules_error_holder) is a reader of a shared
	 * lock: its repair is not run under its recovered (shared) lock, but
	 * after it, by an exclusive run that waits for the other readers. */
	bool shared_holder;
};

/* "WSLOCK_BUSY" etc. for a code; never NULL. */
const char *wsl_code_name(enum wsl_code code);

/* The process exit status for a code (0 for WSL_OK, 64..78 otherwise). */
int wsl_code_exit(enum wsl_code code);

/* Sets code and a printf-formatted message, clearing sys_errno and the
 * flags; returns -1 so callers can write "return wsl_error_set(...)".
 * Details already set are kept. */
int wsl_error_set(struct wsl_error *err, enum wsl_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Like wsl_error_set, and appends ": strerror(errnum)"; sys_errno is set to
 * errnum. */
int wsl_error_errno(struct wsl_error *err, enum wsl_code code, int errnum,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Puts a printf-formatted context and ": " before err's message (which is
 * cut at the end when the whole does not fit), and sets code (WSL_OK:
 * keeps the code). sys_errno, the flags and the details are kept. Returns
 * -1. */
int wsl_error_prefix(struct wsl_error *err, enum wsl_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Replaces one detail string with a copy of value (NULL clears it). */
void wsl_error_detail(char **slot, const char *value);

/* Frees the details and resets the record to WSL_OK. */
void wsl_error_clear(struct wsl_error *err);

#endif
