/* registry_etcd_nest.c - runs nested under an etcd lock (DESIGN.md
 * sections 2 and 5b): the outer run does not let go while they run.
 *
 * A nested run is proven by ancestry (nest.c), so it runs on the outer
 * run's machine, inside its command: what they share is local. The outer
 * run makes an anonymous file (memfd) named after its lock's token,
 * "wslock-nested-TOKEN", and its command inherits it (the live descriptor
 * of the registry contract). A nested run finds that descriptor among its
 * own by name, opens the file anew (a lock of its own: flock locks belong
 * to the open file, and the command's copy is shared by all of them) and
 * holds it shared while its command runs; the outer run takes it
 * exclusively, on an open of its own that no command inherited, before it
 * releases. No request is sent for this; no etcd key is added.
 *
 * A nested run that did not inherit the file (its command closed the
 * descriptor, or it nests under an `acquire` holder, which has no command
 * to pass one to) holds nothing: the outer does not wait for it. Someone
 * who makes a file of that name proves nothing by it: nesting is proven by
 * ancestry alone, and the outer waits only on its own file.
 */
#include "registry_etcd.h"
#include "fsx.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#define NEST_NAME "wslock-nested-"

/* The target /proc/self/fd shows for a memfd named after token. */
static void nest_target(const char *token, char *buf, size_t cap)
{
	snprintf(buf, cap, "/memfd:" NEST_NAME "%s (deleted)", token);
}

void etcd_nest_make(struct etcd_state *s, const char *token, int *live_fd)
{
	char name[sizeof(NEST_NAME) + WSL_TOKEN_HEX + 1], self[64];
	int fd, own;

	*live_fd = -1;
	if (s->nest_fd >= 0) {
		fsx_close(s->nest_fd);
		s->nest_fd = -1;
	}
	snprintf(name, sizeof(name), NEST_NAME "%s", token);
	fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0)
		return;		/* nested runs then hold nothing: none waited for */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	own = fsx_open(self, O_RDONLY, 0);
	if (own < 0) {
		fsx_close(fd);
		return;
	}
	s->nest_fd = own;
	*live_fd = fd;
}

/* A descriptor of this process whose file is the memfd of token, or -1. */
static int nest_find_fd(const char *token)
{
	char want[PATH_MAX], path[64], got[PATH_MAX];
	struct dirent *de;
	DIR *dir = opendir("/proc/self/fd");
	int found = -1;

	if (dir == NULL)
		return -1;
	nest_target(token, want, sizeof(want));
	while (found < 0 && (de = readdir(dir)) != NULL) {
		char *end;
		long fd;
		ssize_t n;

		errno = 0;
		fd = strtol(de->d_name, &end, 10);
		if (errno != 0 || *end != '\0' || end == de->d_name || fd <= 2 ||
		    fd == dirfd(dir) || fd > 1048576)
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%ld", fd);
		n = readlink(path, got, sizeof(got) - 1);
		if (n <= 0)
			continue;
		got[n] = '\0';
		if (strcmp(got, want) == 0)
			found = (int)fd;
	}
	closedir(dir);
	return found;
}

/* The nested run's side: LOCK_SH on an open of its own of the outer's
 * file, then the lock must still be token's. */
static int nest_shared(struct etcd_state *s, const char *workspace, const char *token,
		       int *fd, struct wsl_error *err)
{
	char path[64];
	struct lock_entry e;
	struct kv_meta m;
	bool ours;
	int inherited = nest_find_fd(token), own;

	if (inherited < 0)
		return 0;	/* not passed down: nothing to hold */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", inherited);
	own = fsx_open(path, O_RDONLY, 0);
	if (own < 0)
		return 0;
	if (fsx_flock(own, LOCK_SH) != 0) {
		fsx_close(own);
		return wsl_error_errno(err, WSL_OS, errno, "flock of the nested runs' file of %s",
				       workspace);
	}
	/* The outer may have released between our read and the flock. */
	if (read_entry(s, workspace, false, &e, &m, err) != 0) {
		fsx_close(own);
		return -1;
	}
	ours = lock_entry_by_token(&e, token) != NULL;	/* a reader's too */
	lock_entry_free(&e);
	if (!ours) {
		fsx_close(own);
		return NEST_LOCK_GONE;
	}
	*fd = own;
	return 0;
}

int etcd_nest_lock(struct registry *reg, const char *workspace, const char *token,
		   int op, int *fd, struct wsl_error *err)
{
	struct etcd_state *s = state(reg);

	*fd = -1;
	if ((op & LOCK_SH) != 0)
		return nest_shared(s, workspace, token, fd, err);
	/* The outer run (or a release by token): only the lock this process
	 * holds has a file here. */
	if (s->nest_fd < 0 || strcmp(s->held_token, token) != 0)
		return 0;
	if (fsx_flock(s->nest_fd, op) != 0) {
		if (errno == EWOULDBLOCK)
			return NEST_LOCK_BUSY;
		return wsl_error_errno(err, WSL_OS, errno, "flock of the nested runs' file of %s",
				       workspace);
	}
	return 0;
}
