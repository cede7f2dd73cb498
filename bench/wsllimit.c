/* wsllimit.c - the physical limit of a durable workspace lock, for bench/.
 *
 *   wsllimit DIR CMD...
 *
 * Does only what DESIGN.md section 5 makes every acquire pay for before the
 * command starts, and nothing a lock manager adds: write one owner-sized
 * document (OWNER_BYTES) to a new file in DIR, fsync it, rename it into
 * place, fsync DIR; then fork and exec CMD, wait for it, and remove the
 * document (a release need not be durable). No locking, no checks, no
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

static int fsync_retry(int fd)
{
	while (fsync(fd) != 0)
		if (errno != EINTR)
			return -1;
	return 0;
}

int main(int argc, char **argv)
{
	char tmp[4096], dst[4096], doc[OWNER_BYTES];
	int fd, dfd, status;
	ssize_t w;
	size_t off = 0;
	pid_t pid;

	if (argc < 3) {
		fprintf(stderr, "usage: wsllimit DIR CMD...\n");
		return 64;
	}
	if (snprintf(tmp, sizeof(tmp), "%s/staging.%ld", argv[1], (long)getpid()) >= (int)sizeof(tmp) ||
	    snprintf(dst, sizeof(dst), "%s/owner.json", argv[1]) >= (int)sizeof(dst)) {
		fprintf(stderr, "wsllimit: DIR too long\n");
		return 64;
	}
	memset(doc, 'x', sizeof(doc));
	doc[0] = '{';
	doc[sizeof(doc) - 1] = '}';

	dfd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return fail(argv[1]);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return fail(tmp);
	while (off < sizeof(doc)) {
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
	if (rename(tmp, dst) != 0)
		return fail("rename");
	if (fsync_retry(dfd) != 0)
		return fail("fsync of the directory");
	close(dfd);

	pid = fork();
	if (pid < 0)
		return fail("fork");
	if (pid == 0) {
		execvp(argv[2], argv + 2);
		_exit(errno == ENOENT ? 127 : 126);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return fail("waitpid");
	if (unlink(dst) != 0)
		return fail("unlink");
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
