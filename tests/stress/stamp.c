/* stamp.c - the stress test's logger: CLOCK_MONOTONIC timestamps appended
 * to a per-contender log, one write(2) per line, no locks.
 *
 *   stamp LOG WORD WS TAG        append "WORD WS NS TAG"
 *   stamp hold LOG WS TAG MS     append "START WS NS TAG", sleep MS
 *                                milliseconds, append "END WS NS TAG"
 *
 * WS "-" means $WSLOCK_WORKSPACE (the workspace a reclaim hook runs in).
 * The exit status is 0, or 2 when the log cannot be written.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

static int append(const char *log, const char *word, const char *ws, const char *tag)
{
	char line[8192];
	int fd, n;

	n = snprintf(line, sizeof(line), "%s %s %llu %s\n", word, ws, now_ns(), tag);
	if (n < 0 || n >= (int)sizeof(line))
		return -1;
	fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	if (write(fd, line, (size_t)n) != n) {
		close(fd);
		return -1;
	}
	return close(fd);
}

int main(int argc, char **argv)
{
	const char *ws;

	if (argc == 6 && strcmp(argv[1], "hold") == 0) {
		struct timespec d;
		long ms = strtol(argv[5], NULL, 10);

		ws = strcmp(argv[3], "-") == 0 ? getenv("WSLOCK_WORKSPACE") : argv[3];
		if (ws == NULL)
			ws = "?";
		if (append(argv[2], "START", ws, argv[4]) != 0)
			return 2;
		d.tv_sec = ms / 1000;
		d.tv_nsec = (ms % 1000) * 1000000L;
		while (nanosleep(&d, &d) != 0 && errno == EINTR)
			;
		return append(argv[2], "END", ws, argv[4]) != 0 ? 2 : 0;
	}
	if (argc == 5) {
		ws = strcmp(argv[3], "-") == 0 ? getenv("WSLOCK_WORKSPACE") : argv[3];
		return append(argv[1], argv[2], ws != NULL ? ws : "?", argv[4]) != 0 ? 2 : 0;
	}
	fprintf(stderr, "usage: stamp LOG WORD WS TAG | stamp hold LOG WS TAG MS\n");
	return 64;
}
