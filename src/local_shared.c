/* local_shared.c - shared locks in the local registry (DESIGN.md section 2,
 * issue 15): many holders of one lock, each with its own owner document,
 * token, live file and nested file.
 *
 * Layout. A shared lock lives where every lock lives, locks/KEY/, so that
 * the nest and identity markers, the overlap checks and the listing stay
 * as they are; only its contents differ:
 *
 *   locks/KEY/mode            "shared\n": the mode lives in the lock, not
 *                             in the owner documents (same key set)
 *   locks/KEY/holders/H/      one per holder, H = 32 random hex digits:
 *                             owner.json, live, nested, retained.json -
 *                             exactly the files of an exclusive lock's
 *                             directory, read by the same code
 *
 * An exclusive lock has no mode file and looks exactly as before, so a
 * registry without shared locks is unchanged (no format bump). A binary
 * that does not know shared locks finds no owner.json in locks/KEY: a
 * corrupt lock (WSLOCK_LOCK_CORRUPT, 65), never a free workspace, and one
 * it cannot clear (no bytes to compare).
 *
 * Every change is one rename under .coordination LOCK_EX:
 *  - the first holder publishes locks/KEY whole, as an exclusive lock is
 *    published (registry_local.c publish, with shared_stage): a complete,
 *    fsynced staging directory with mode and holders/H renamed into locks/;
 *  - a later holder stages its own directory in staging/ (fsynced) and
 *    renames it into locks/KEY/holders/H (then fsyncs holders/);
 *  - a holder that leaves (release, reclaim, recover without a command)
 *    renames its directory out of holders/ into staging/; the last one
 *    renames the whole lock out of locks/, as release does;
 *  - recover of one holder replaces its owner.json in place (replace_owner,
 *    as for an exclusive lock).
 * So a crash at any point leaves the old state or the new one, plus
 * staging garbage that reclaim collects: a holder is there whole or not at
 * all, and a shared lock never exists without a holder. A dead holder
 * stays, as an exclusive lock does: a writer gets recovery required.
 */
#include "registry_local.h"
#include "fsx.h"
#include "testhook.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHARED_MODE_FILE "mode"
#define SHARED_MODE_TEXT "shared\n"
#define SHARED_HOLDERS "holders"
#define HOLDER_HEX 32		/* a holder directory's name, hex digits */

bool shared_marked(int lockfd)
{
	struct stat st;

	return fstatat(lockfd, SHARED_MODE_FILE, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

int stage_files(const struct registry *reg, const struct owner *o, int dfd,
		const char *path, bool keep_live, int *lfd, struct wsl_error *err)
{
	char *text = owner_format(o, false);
	size_t len;
	int nfd;

	if (text == NULL)
		return wsl_error_set(err, WSL_INTERNAL, "cannot format the owner document");
	len = strlen(text);
	text[len] = '\n';	/* owner_format left room: the NUL */
	if (fsx_write_new_file(dfd, "owner.json", text, len + 1, sync_data(reg)) != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot write %s/owner.json", path);
		free(text);
		return -1;
	}
	free(text);
	*lfd = fsx_openat(dfd, "live", O_RDWR | O_CREAT | O_EXCL, 0600);
	if (*lfd < 0)
		return wsl_error_errno(err, WSL_IO, errno, "cannot create %s/live", path);
	if (keep_live && fsx_flock(*lfd, LOCK_EX | LOCK_NB) != 0)
		return wsl_error_errno(err, WSL_IO, errno, "cannot lock %s/live", path);
	if (!keep_live) {
		fsx_close(*lfd);
		*lfd = -1;
	}
	/* Nested runs hold it shared (registry_nest_lock). Made here, not by
	 * its first user: a release refused for a wrong token must change
	 * nothing. */
	nfd = fsx_openat(dfd, LOCK_NESTED_FILE, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (nfd < 0)
		return wsl_error_errno(err, WSL_IO, errno, "cannot create %s/%s", path,
				       LOCK_NESTED_FILE);
	fsx_close(nfd);
	return 0;
}

int shared_stage(const struct registry *reg, const struct owner *o, int sfd,
		 const char *path, bool keep_live, int *lfd, struct wsl_error *err)
{
	char hpath[PATH_MAX], name[HOLDER_HEX + 1];
	int hfd, dfd, rc;

	if (fsx_write_new_file(sfd, SHARED_MODE_FILE, SHARED_MODE_TEXT,
			       strlen(SHARED_MODE_TEXT), sync_data(reg)) != 0)
		return wsl_error_errno(err, WSL_IO, errno, "cannot write %s/%s", path,
				       SHARED_MODE_FILE);
	if (path_join(hpath, path, SHARED_HOLDERS, err) != 0)
		return -1;
	hfd = fsx_make_dir_checked(sfd, SHARED_HOLDERS, hpath, err);
	if (hfd < 0)
		return -1;
	crypto_random_hex(name, HOLDER_HEX / 2);
	if (path_join(hpath, hpath, name, err) != 0 ||
	    (dfd = fsx_make_dir_checked(hfd, name, hpath, err)) < 0) {
		fsx_close(hfd);
		return -1;
	}
	rc = stage_files(reg, o, dfd, hpath, keep_live, lfd, err);
	if (rc == 0 && (sync_before_commit(reg, dfd) != 0 || sync_before_commit(reg, hfd) != 0))
		rc = wsl_error_errno(err, WSL_IO, errno, "cannot sync %s", hpath);
	fsx_close(dfd);
	fsx_close(hfd);
	return rc;
}

/* Holders in arrival order (their documents' acquired_at), then by name. */
static int holder_cmp(const void *a, const void *b)
{
	const struct lock_entry *x = a, *y = b;
	int c = strcmp(x->owner.acquired_at, y->owner.acquired_at);

	return c != 0 ? c : strcmp(x->holder, y->holder);
}

/* Reads holder name of the holders/ directory hfd (at hpath) into *h:
 * 1 read (valid, corrupt or unsafe), 0 gone meanwhile, -1 with err. */
static int read_holder(struct registry *reg, const char *key, int hfd, const char *hpath,
		       const char *name, bool probe, struct lock_entry *h,
		       struct wsl_error *err)
{
	char dpath[PATH_MAX];
	struct wsl_error local = { 0 };
	int dfd, rc;

	if (path_join(dpath, hpath, name, err) != 0)
		return -1;
	memset(h, 0, sizeof(*h));
	dfd = fsx_open_dir_checked(hfd, name, dpath, false, &local);
	if (dfd < 0 && local.code == WSL_IO && local.sys_errno == ENOENT) {
		wsl_error_clear(&local);
		return 0;
	}
	if (dfd >= 0) {
		rc = local_read_dir(reg, key, dfd, dpath, probe, h, err);
		fsx_close(dfd);
		if (rc != 0)
			return -1;
	} else {
		h->state = LOCK_FREE;
		set_corrupt(h, local.message);
		h->unsafe = local.code == WSL_UNSAFE_PATH;
		snprintf(h->lock_path, sizeof(h->lock_path), "%s", dpath);
		wsl_error_clear(&local);
	}
	if (!crypto_hex_valid(name, HOLDER_HEX) && h->state != LOCK_CORRUPT)
		set_corrupt(h, "a holder directory's name is not a holder name");
	snprintf(h->key, sizeof(h->key), "%s", key);
	snprintf(h->holder, sizeof(h->holder), "%.*s", HOLDER_HEX, name);
	h->shared = true;
	return 1;
}

/* Makes *e the representative of its holders (lockrules_representative):
 * a copy of that holder's entry that owns its own bytes. */
static int represent(struct lock_entry *e, struct wsl_error *err)
{
	const struct lock_entry *r = &e->holders[lockrules_representative(e->holders,
									 e->n_holders)];
	struct lock_entry *hs = e->holders;
	size_t n = e->n_holders;

	*e = *r;
	e->raw = r->raw != NULL ? malloc(r->raw_len + 1) : NULL;
	e->retained = r->retained != NULL ? strdup(r->retained) : NULL;
	e->holders = hs;
	e->n_holders = n;
	if ((r->raw != NULL && e->raw == NULL) || (r->retained != NULL && e->retained == NULL))
		return wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	if (e->raw != NULL)
		memcpy(e->raw, r->raw, r->raw_len + 1);
	/* A corrupt representative: the lock is still known by its readers. */
	for (size_t i = 0; e->workspace_root[0] == '\0' && i < n; i++)
		memcpy(e->workspace_root, hs[i].workspace_root, sizeof(e->workspace_root));
	return 0;
}

int shared_read(struct registry *reg, const char *key, int fd,
		const char *dirpath, bool probe, struct lock_entry *e,
		struct wsl_error *err)
{
	char path[PATH_MAX], *mode = NULL, **names = NULL;
	struct wsl_error local = { 0 };
	size_t len, n = 0, i;
	int hfd, rc = 0;

	/* What cannot be read is corrupt, named by the lock directory: a
	 * person removes it by hand (no bytes to compare). */
	snprintf(e->lock_path, sizeof(e->lock_path), "%s", dirpath);
	if (path_join(path, dirpath, SHARED_MODE_FILE, err) != 0)
		return -1;
	if (fsx_read_file_checked(fd, SHARED_MODE_FILE, path, 64, &mode, &len, &local) != 0 ||
	    strcmp(mode, SHARED_MODE_TEXT) != 0) {
		set_corrupt(e, local.code != WSL_OK ? local.message :
			    "the lock's mode file does not say \"shared\" (a mode this wslock does not know)");
		e->unsafe = local.code == WSL_UNSAFE_PATH;
		wsl_error_clear(&local);
		free(mode);
		return 0;
	}
	free(mode);
	if (path_join(path, dirpath, SHARED_HOLDERS, err) != 0)
		return -1;
	hfd = fsx_open_dir_checked(fd, SHARED_HOLDERS, path, false, &local);
	if (hfd < 0 || list_names(hfd, &names, &n) != 0) {
		set_corrupt(e, hfd < 0 ? local.message : "its holders/ cannot be read");
		e->unsafe = local.code == WSL_UNSAFE_PATH;
		wsl_error_clear(&local);
		fsx_close(hfd);
		return 0;
	}
	e->holders = n > 0 ? calloc(n, sizeof(*e->holders)) : NULL;
	if (n > 0 && e->holders == NULL)
		rc = wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
	for (i = 0; rc == 0 && i < n; i++) {
		rc = read_holder(reg, key, hfd, path, names[i], probe,
				 &e->holders[e->n_holders], err);
		if (rc > 0)
			e->n_holders++;
		rc = rc < 0 ? -1 : 0;
	}
	free_names(names, n);
	fsx_close(hfd);
	if (rc != 0) {
		lock_entry_free(e);	/* the holders read so far */
		return -1;
	}
	if (e->n_holders == 0) {
		set_corrupt(e, "a shared lock without holders");
		return 0;
	}
	qsort(e->holders, e->n_holders, sizeof(*e->holders), holder_cmp);
	return represent(e, err);
}

/* Opens locks/key/holders (its path into path). */
static int holders_open(struct registry *reg, const char *key, char path[PATH_MAX],
			struct wsl_error *err)
{
	int lfd = holder_dir_open(reg, key, "", path, err), hfd;

	if (lfd < 0 || path_join(path, path, SHARED_HOLDERS, err) != 0) {
		fsx_close(lfd);
		return -1;
	}
	hfd = fsx_open_dir_checked(lfd, SHARED_HOLDERS, path, false, err);
	fsx_close(lfd);
	return hfd;
}

int shared_join(struct registry *reg, const struct owner *o, const char *key,
		int *live_fd, struct wsl_error *err)
{
	char stage[STAGE_NAME_MAX], path[PATH_MAX], hpath[PATH_MAX];
	char name[HOLDER_HEX + 1];
	int sfd, hfd = -1, lfd = -1;

	sfd = stage_dir_make(reg, stage, path, err);
	if (sfd < 0)
		return -1;
	if (stage_files(reg, o, sfd, path, live_fd != NULL, &lfd, err) != 0)
		goto fail;
	if (sync_before_commit(reg, sfd) != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot sync %s", path);
		goto fail;
	}
	CRASH_POINT("shared:staged");
	hfd = holders_open(reg, key, hpath, err);
	if (hfd < 0)
		goto fail;
	crypto_random_hex(name, HOLDER_HEX / 2);
	if (renameat2(loc(reg)->tmp_fd, stage, hfd, name, RENAME_NOREPLACE) != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot add a holder to %s", hpath);
		goto fail;
	}
	CRASH_POINT("shared:joined");
	if (sync_commit(reg, hfd) != 0) {
		/* Joined but not durable: take it back and fail. */
		wsl_error_errno(err, WSL_IO, errno, "cannot sync %s", hpath);
		if (renameat2(hfd, name, loc(reg)->tmp_fd, stage, RENAME_NOREPLACE) != 0)
			fsx_remove_dir_files(hfd, name);
		goto fail;
	}
	fsx_close(sfd);
	fsx_close(hfd);
	if (live_fd != NULL)
		*live_fd = lfd;
	else
		fsx_close(lfd);
	return 0;
fail:
	fsx_close(lfd);
	fsx_close(sfd);
	fsx_close(hfd);
	fsx_remove_dir_files(loc(reg)->tmp_fd, stage);
	return -1;
}

int shared_leave(struct registry *reg, const char *key, const char *workspace,
		 const struct lock_entry *h, size_t n, struct wsl_error *err)
{
	char gone[STAGE_NAME_MAX], hpath[PATH_MAX];
	int hfd, rc = 0;

	if (n <= 1)
		return unpublish(reg, key, workspace, h->has_owner ? &h->owner : NULL, NULL, err);
	hfd = holders_open(reg, key, hpath, err);
	if (hfd < 0)
		return -1;
	stage_name(gone, "rel");
	if (renameat2(hfd, h->holder, loc(reg)->tmp_fd, gone, RENAME_NOREPLACE) != 0)
		rc = wsl_error_errno(err, WSL_IO, errno, "cannot remove the holder %s/%s",
				     hpath, h->holder);
	fsx_close(hfd);
	if (rc != 0)
		return -1;
	CRASH_POINT("shared:left");
	fsx_remove_dir_files(loc(reg)->tmp_fd, gone);
	return 0;
}

size_t shared_pick(struct lock_entry *e, const struct registry_expect *x)
{
	struct lock_entry *h, pick;
	size_t n = e->n_holders;

	if (!e->shared || e->holders == NULL)
		return 0;
	h = (struct lock_entry *)lock_entry_by_owner(e, x->owner, x->raw, x->raw_len);
	if (h == NULL)
		return n;
	pick = *h;
	memset(h, 0, sizeof(*h));
	lock_entry_free(e);
	*e = pick;
	return n;
}

int holder_dir_open(struct registry *reg, const char *key, const char *holder,
		    char dirpath[PATH_MAX], struct wsl_error *err)
{
	int lfd, hfd, dfd;

	if (path_join(dirpath, reg->path, "locks", err) != 0 ||
	    path_join(dirpath, dirpath, key, err) != 0)
		return -1;
	if (holder[0] == '\0')
		return fsx_open_dir_checked(loc(reg)->locks_fd, key, dirpath, false, err);
	lfd = fsx_open_dir_checked(loc(reg)->locks_fd, key, dirpath, false, err);
	if (lfd < 0 || path_join(dirpath, dirpath, SHARED_HOLDERS, err) != 0) {
		fsx_close(lfd);
		return -1;
	}
	hfd = fsx_open_dir_checked(lfd, SHARED_HOLDERS, dirpath, false, err);
	fsx_close(lfd);
	if (hfd < 0 || path_join(dirpath, dirpath, holder, err) != 0) {
		fsx_close(hfd);
		return -1;
	}
	dfd = fsx_open_dir_checked(hfd, holder, dirpath, false, err);
	fsx_close(hfd);
	return dfd;
}

int shared_nest_dir(struct registry *reg, const char *key, int lfd,
		    const char *dirpath, const char *token, char path[PATH_MAX],
		    struct wsl_error *err)
{
	const struct lock_entry *h;
	struct lock_entry e;
	char hdir[PATH_MAX];
	int fd = -2;

	memset(&e, 0, sizeof(e));
	snprintf(e.key, sizeof(e.key), "%s", key);
	if (shared_read(reg, key, lfd, dirpath, false, &e, err) != 0)
		return -1;
	h = lock_entry_by_token(&e, token);
	if (h != NULL) {
		fd = holder_dir_open(reg, key, h->holder, hdir, err);
		if (fd >= 0 && path_join(path, hdir, LOCK_NESTED_FILE, err) != 0) {
			fsx_close(fd);
			fd = -1;
		}
	}
	lock_entry_free(&e);
	return fd;
}
