/* testhook.c - see testhook.h. Empty unless WSLOCK_TEST_HOOKS is defined. */
#include "testhook.h"

#ifdef WSLOCK_TEST_HOOKS
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void testhook_crash(const char *step)
{
	const char *at = getenv("WSLOCK_CRASH_AT");

	if (at != NULL && strcmp(at, step) == 0)
		kill(getpid(), SIGKILL);
}
#else
/* ISO C forbids an empty translation unit. */
typedef int testhook_unused;
#endif
