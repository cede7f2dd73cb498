/* error.c - the one table of failure codes and exit statuses. */
#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	int exit_status;
} code_table[WSL_CODE_COUNT] = {
	[WSL_OK] = { "WSLOCK_OK", 0 },
	[WSL_USAGE] = { "WSLOCK_USAGE", 64 },
	[WSL_OWNER_MISMATCH] = { "WSLOCK_OWNER_MISMATCH", 65 },
	[WSL_INVALID_OWNER] = { "WSLOCK_INVALID_OWNER", 65 },
	[WSL_LOCK_CORRUPT] = { "WSLOCK_LOCK_CORRUPT", 65 },
	[WSL_NO_WORKSPACE] = { "WSLOCK_NO_WORKSPACE", 66 },
	[WSL_NOT_HELD] = { "WSLOCK_NOT_HELD", 66 },
	[WSL_RECOVERY_REQUIRED] = { "WSLOCK_RECOVERY_REQUIRED", 69 },
	[WSL_LIVENESS_UNKNOWN] = { "WSLOCK_LIVENESS_UNKNOWN", 69 },
	[WSL_BACKEND_UNAVAILABLE] = { "WSLOCK_BACKEND_UNAVAILABLE", 69 },
	[WSL_INTERNAL] = { "WSLOCK_INTERNAL", 70 },
	[WSL_OS] = { "WSLOCK_OS", 71 },
	[WSL_IO] = { "WSLOCK_IO", 74 },
	[WSL_BUSY] = { "WSLOCK_BUSY", 75 },
	[WSL_TIMEOUT] = { "WSLOCK_TIMEOUT", 75 },
	[WSL_OWNER_LIVE] = { "WSLOCK_OWNER_LIVE", 75 },
	[WSL_REGISTRY_BUSY] = { "WSLOCK_REGISTRY_BUSY", 75 },
	[WSL_UNSAFE_PATH] = { "WSLOCK_UNSAFE_PATH", 77 },
	[WSL_NETWORK_FS] = { "WSLOCK_NETWORK_FS", 77 },
	[WSL_OWNERSHIP_LOST] = { "WSLOCK_OWNERSHIP_LOST", 78 },
};

const char *wsl_code_name(enum wsl_code code)
{
	if ((unsigned)code >= WSL_CODE_COUNT)
		return "WSLOCK_INTERNAL";
	return code_table[code].name;
}

int wsl_code_exit(enum wsl_code code)
{
	if ((unsigned)code >= WSL_CODE_COUNT)
		return 70;
	return code_table[code].exit_status;
}

static void set_message(struct wsl_error *err, enum wsl_code code,
			const char *fmt, va_list ap)
{
	err->code = code;
	err->sys_errno = 0;
	err->outcome_unknown = false;
	err->signo = 0;
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
}

int wsl_error_set(struct wsl_error *err, enum wsl_code code, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL)
		return -1;
	va_start(ap, fmt);
	set_message(err, code, fmt, ap);
	va_end(ap);
	return -1;
}

int wsl_error_errno(struct wsl_error *err, enum wsl_code code, int errnum,
		    const char *fmt, ...)
{
	va_list ap;
	size_t len;

	if (err == NULL)
		return -1;
	va_start(ap, fmt);
	set_message(err, code, fmt, ap);
	va_end(ap);
	len = strlen(err->message);
	snprintf(err->message + len, sizeof(err->message) - len, ": %s",
		 strerror(errnum));
	err->sys_errno = errnum;
	return -1;
}

int wsl_error_prefix(struct wsl_error *err, enum wsl_code code, const char *fmt, ...)
{
	char old[sizeof(err->message)];
	va_list ap;
	int n;

	if (err == NULL)
		return -1;
	memcpy(old, err->message, sizeof(old));
	old[sizeof(old) - 1] = '\0';
	va_start(ap, fmt);
	n = vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof(err->message))
		snprintf(err->message + n, sizeof(err->message) - (size_t)n,
			 ": %s", old);
	if (code != WSL_OK)
		err->code = code;
	return -1;
}

void wsl_error_detail(char **slot, const char *value)
{
	free(*slot);
	*slot = NULL;
	if (value != NULL) {
		*slot = strdup(value);
		/* A detail lost to ENOMEM only shortens the report. */
	}
}

void wsl_error_clear(struct wsl_error *err)
{
	free(err->workspace_root);
	free(err->holder);
	free(err->liveness);
	free(err->liveness_reason);
	free(err->path);
	free(err->requested);
	memset(err, 0, sizeof(*err));
}
