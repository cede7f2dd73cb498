/* wsllimit.c - the physical limit of a durable workspace lock, for bench/.
 *
 *   wsllimit [-n N] DIR CMD...
 *
 * Does only what DESIGN.md section 5 makes every acquire pay for before the
 * command starts, and nothing a lock manager adds: write one owner-sized
 * document (OWNER_BYTES) to a new file in DIR, fsync it, rename it into
 * place, fsync DIR; then fork and exec CMD, wait for it, and remove the
 * document (a release need not be durable). With -n N (1..16), N
 * documents, each written, fsynced and renamed, then one fsync of DIR:
 * the limit of a lock on N workspaces at once. No locking, no checks, no
 * libraries: linked statically (bench/bench.mk), so that its start-up is the
 * kernel's exec and nothing more. Exits with CMD's status (128+N for a
 * signal), 126/127 when CMD cannot be run, 2 when a step fails.
 *
 * bench/run.sh runs it beside wslock and flock(1) in the same alternating
 * runs: wslock / limit is what a lock manager costs above the durability
 * promise, limit / flock what the promise itself costs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* About the size of a schema 2 owner document. */
#define OWNER_BYTES 560

static int fail(const char *what)
{
	fprintf(stderr, "wsllimit: %s: %s\n", what, strerror(errno));
	return 2;
}

/* "1".."16" as a number; 0 for anything else. */
static int atoi_small(const char *s)
{
	int v = 0;

	for (; *s >= '0' && *s <= '9' && v <= 16; s++)
		v = v * 10 + (*s - '0');
	return *s == '\0' && v >= 1 && v <= 16 ? v : 0;
}

static int fsync_retry(int fd)
{
	while (fsync(fd) != 0)
		if (errno != EINTR)
			return -1;
	return 0;
}

int main(int argc, char **argv)
{
	char tmp[4096], dst[16][4096], doc[OWNER_BYTES];
	int fd, dfd, status, n = 1, a = 1, i;
	ssize_t w;
	size_t off;
	pid_t pid;

	if (argc > 2 && strcmp(argv[1], "-n") == 0) {
		n = atoi_small(argv[2]);
		a = 3;
	}
	if (n < 1 || argc - a < 2) {
		fprintf(stderr, "usage: wsllimit [-n N] DIR CMD...\n");
		return 64;
	}
	memset(doc, 'x', sizeof(doc));
	doc[0] = '{';
	doc[sizeof(doc) - 1] = '}';

	dfd = open(argv[a], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return fail(argv[a]);
	for (i = 0; i < n; i++) {
		if (snprintf(tmp, sizeof(tmp), "%s/staging.%ld", argv[a], (long)getpid()) >= (int)sizeof(tmp) ||
		    snprintf(dst[i], sizeof(dst[i]), "%s/owner.%d.json", argv[a], i) >= (int)sizeof(dst[i])) {
			fprintf(stderr, "wsllimit: DIR too long\n");
			return 64;
		}
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return fail(tmp);
		for (off = 0; off < sizeof(doc);) {
			w = write(fd, doc + off, sizeof(doc) - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return fail("write");
			off += (size_t)w;
		}
		if (fsync_retry(fd) != 0)
			return fail("fsync");
		close(fd);
		if (rename(tmp, dst[i]) != 0)
			return fail("rename");
	}
	if (fsync_retry(dfd) != 0)
		return fail("fsync of the directory");
	close(dfd);

	pid = fork();
	if (pid < 0)
		return fail("fork");
	if (pid == 0) {
		execvp(argv[a + 1], argv + a + 1);
		_exit(errno == ENOENT ? 127 : 126);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return fail("waitpid");
	for (i = 0; i < n; i++)
		if (unlink(dst[i]) != 0)
			return fail("unlink");
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
