/* testhook.h - fault injection for the crash tests (issue: hardening).
 *
 * Compiled in only with -DWSLOCK_TEST_HOOKS (`make test-build`, which makes
 * ./wslock-test); the installed binary has none of it. With the hooks,
 * WSLOCK_CRASH_AT=STEP makes the process SIGKILL itself when it reaches the
 * named step of a registry mutation, and WSLOCK_TEST_FSTYPE=NAME makes the
 * registry look like it is on filesystem NAME ("nfs", or "local").
 */
#ifndef WSLOCK_TESTHOOK_H
#define WSLOCK_TESTHOOK_H

#ifdef WSLOCK_TEST_HOOKS
/* SIGKILLs the process when $WSLOCK_CRASH_AT equals step. */
void testhook_crash(const char *step);
#define CRASH_POINT(step) testhook_crash(step)
#else
#define CRASH_POINT(step) ((void)0)
#endif

#endif
