/* tap.h - a minimal TAP producer for the C unit tests. */
#ifndef WSLOCK_TAP_H
#define WSLOCK_TAP_H

#include <stdio.h>

static int tap_n, tap_failed;

#define CHECK(cond, name)                                                   \
	do {                                                                \
		tap_n++;                                                    \
		if (cond) {                                                 \
			printf("ok %d - %s\n", tap_n, name);                \
		} else {                                                    \
			tap_failed++;                                       \
			printf("not ok %d - %s (%s:%d)\n", tap_n, name,     \
			       __FILE__, __LINE__);                         \
		}                                                           \
	} while (0)

/* Prints the plan and the closing count line; returns the exit status. */
static inline int tap_done(void)
{
	printf("1..%d\n# %d passed, %d failed\n", tap_n, tap_n - tap_failed,
	       tap_failed);
	return tap_failed == 0 ? 0 : 1;
}

#endif
