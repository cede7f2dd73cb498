/* local_prestage.c - a waiter's lock staged before it sleeps: its
 * staging directory (owner.json, live and nested), written and fsynced
 * outside .coordination (DESIGN.md section 5: "the owner document durable
 * before the command starts"; files fsynced before their rename).
 *
 * The owner document is built once, before the first attempt
 * (hold_set_owners: its acquired_at is the first attempt's time, and it
 * is not rewritten while the caller waits), so one staged directory
 * serves every later attempt. An acquire that meets a conflict and is
 * going to wait stages its exclusive locks before its first sleep
 * (local_wait calls prestage_waiting: staging/acq.PID.RAND, flock()ed
 * LOCK_EX by its stager); once served, publish takes the staged directory
 * (prestage_take), and inside .coordination only the check, the markers,
 * the rename into locks/ and the fsync of locks/ remain: the next
 * holder's document fsync is off the hand-over path. An uncontended
 * acquire stages under .coordination as before: staging ahead of an
 * attempt that then fails would change the registry for a command that
 * must change nothing. A staged directory not published (a timeout, a
 * signal, a nested run) is removed when the registry is closed
 * (prestage_drop); a crash leaves it as garbage (its flock dies with its
 * stager), which reclaim removes; reclaim passes by a staging directory
 * whose flock is held (local_garbage.c), so a waiter's staged lock is
 * never collected.
 *
 * Shared requests are staged under .coordination as before (a reader
 * usually joins an existing lock: nothing to stage).
 *
 * A crash leaves, by step (the points of stage_lock, which publish calls
 * where nothing was staged): acquire:staged, acquire:staging-synced - a
 * staging directory (garbage); the workspace is free.
 */
#include "registry_local.h"
#include "crypto.h"
#include "fsx.h"
#include "testhook.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

/* One staged, not yet published lock of this process. */
struct local_prestage {
	char stage[STAGE_NAME_MAX];
	char token[WSL_TOKEN_HEX + 1];
	char key[WSL_KEY_HEX + 1];	/* of the workspace (crypto_path_key) */
	bool keep_live;
	int sfd, lfd;
};

int stage_dir_make(struct registry *reg, char stage[STAGE_NAME_MAX], char path[PATH_MAX],
		   struct wsl_error *err)
{
	stage_name(stage, "acq");
	if (path_join(path, reg->path, loc(reg)->format >= 2 ? "staging" : "tmp", err) != 0 ||
	    path_join(path, path, stage, err) != 0)
		return -1;
	return fsx_make_dir_checked(loc(reg)->tmp_fd, stage, path, err);
}

int stage_lock(struct registry *reg, const struct owner *o, bool keep_live,
	       char stage[STAGE_NAME_MAX], int *sfd, int *lfd, struct wsl_error *err)
{
	char path[PATH_MAX];

	*sfd = *lfd = -1;
	*sfd = stage_dir_make(reg, stage, path, err);
	if (*sfd < 0)
		return -1;
	/* In use until published or removed: reclaim passes it by. */
	if (fsx_flock(*sfd, LOCK_EX | LOCK_NB) != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot lock %s", path);
		goto fail;
	}
	/* A shared lock: the mode file, and the holder in holders/H. */
	if ((reg->acquire_shared ? shared_stage(reg, o, *sfd, path, keep_live, lfd, err) :
	     stage_files(reg, o, *sfd, path, keep_live, lfd, err)) != 0)
		goto fail;
	CRASH_POINT("acquire:staged");
	if (sync_before_commit(reg, *sfd) != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot sync %s", path);
		goto fail;
	}
	CRASH_POINT("acquire:staging-synced");
	return 0;
fail:
	fsx_close(*lfd);
	fsx_close(*sfd);
	*sfd = *lfd = -1;
	fsx_remove_dir_files(loc(reg)->tmp_fd, stage);
	return -1;
}

/* The prestaged lock of o (same token and workspace, same keep_live), or
 * NULL. */
static struct local_prestage *prestage_of(struct registry *reg, const struct owner *o,
					  bool keep_live)
{
	struct local_prestage *p = loc(reg)->pre;
	char key[WSL_KEY_HEX + 1];

	if (p == NULL)
		return NULL;
	crypto_path_key(o->workspace_root, key);
	for (size_t i = 0; i < REGISTRY_MULTI_MAX; i++)
		if (p[i].sfd >= 0 && p[i].keep_live == keep_live &&
		    strcmp(p[i].token, o->token) == 0 && strcmp(p[i].key, key) == 0)
			return &p[i];
	return NULL;
}

void prestage_note(struct registry *reg, const struct owner *os, size_t n, bool keep_live)
{
	loc(reg)->pre_os = os;
	loc(reg)->pre_n = n;
	loc(reg)->pre_live = keep_live;
}

static void prestage_all(struct registry *reg, const struct owner *os, size_t n,
			 bool keep_live)
{
	struct local *l = loc(reg);

	if (reg->acquire_shared || l->tmp_fd < 0 || l->format < REGISTRY_FORMAT)
		return;
	if (l->pre == NULL) {
		l->pre = calloc(REGISTRY_MULTI_MAX, sizeof(*l->pre));
		if (l->pre == NULL)
			return;
		for (size_t i = 0; i < REGISTRY_MULTI_MAX; i++)
			l->pre[i].sfd = l->pre[i].lfd = -1;
	}
	for (size_t i = 0; i < n && i < REGISTRY_MULTI_MAX; i++) {
		struct local_prestage *p = NULL;
		struct wsl_error ignored = { 0 };

		if (prestage_of(reg, &os[i], keep_live) != NULL)
			continue;
		for (size_t j = 0; j < REGISTRY_MULTI_MAX && p == NULL; j++)
			if (l->pre[j].sfd < 0)
				p = &l->pre[j];
		if (p == NULL)
			return;
		/* A failure stages nothing: publish stages under
		 * .coordination as before and reports what fails there. */
		if (stage_lock(reg, &os[i], keep_live, p->stage, &p->sfd, &p->lfd,
			       &ignored) != 0) {
			wsl_error_clear(&ignored);
			return;
		}
		snprintf(p->token, sizeof(p->token), "%s", os[i].token);
		crypto_path_key(os[i].workspace_root, p->key);
		p->keep_live = keep_live;
	}
}

void prestage_waiting(struct registry *reg)
{
	if (loc(reg)->pre_os != NULL)
		prestage_all(reg, loc(reg)->pre_os, loc(reg)->pre_n, loc(reg)->pre_live);
}

bool prestage_take(struct registry *reg, const struct owner *o, bool keep_live,
		   char stage[STAGE_NAME_MAX], int *sfd, int *lfd)
{
	struct local_prestage *p = prestage_of(reg, o, keep_live);

	if (p == NULL)
		return false;
	memcpy(stage, p->stage, STAGE_NAME_MAX);
	*sfd = p->sfd;
	*lfd = p->lfd;
	p->sfd = p->lfd = -1;
	return true;
}

void prestage_drop(struct registry *reg)
{
	struct local *l = loc(reg);

	for (size_t i = 0; l->pre != NULL && i < REGISTRY_MULTI_MAX; i++) {
		struct local_prestage *p = &l->pre[i];

		if (p->sfd < 0)
			continue;
		fsx_close(p->lfd);
		fsx_remove_dir_files(l->tmp_fd, p->stage);
		fsx_close(p->sfd);
		p->sfd = p->lfd = -1;
	}
	free(l->pre);
	l->pre = NULL;
	l->pre_os = NULL;
}
