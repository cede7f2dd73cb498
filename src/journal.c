/* journal.c - audit lines for every takeover (see journal.h). */
#include "journal.h"
#include "fsx.h"
#include "platform.h"
#include "testhook.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static json_t *str_or_null(const char *s)
{
	return s != NULL ? json_string(s) : json_null();
}

char *journal_format(const struct journal_event *ev, size_t *len)
{
	char now[WSL_TIME_LEN + 1], host[WSL_HOST_MAX + 1];
	json_t *line, *actor;
	char *text;
	size_t n;

	platform_now_iso(now);
	if (platform_hostname(host) != 0)
		snprintf(host, sizeof(host), "unknown");
	actor = json_pack("{s:I,s:I,s:s}", "pid", (json_int_t)getpid(),
			  "uid", (json_int_t)geteuid(), "host", host);
	line = json_object();
	json_object_set_new(line, "time", json_string(now));
	json_object_set_new(line, "action", json_string(ev->action));
	json_object_set_new(line, "workspace_root", str_or_null(ev->workspace_root));
	json_object_set_new(line, "prior_owner",
			    ev->prior ? owner_to_json(ev->prior) : json_null());
	if (ev->prior_raw != NULL) {
		/* json_stringn refuses invalid UTF-8: such bytes are noted as null. */
		json_t *raw = json_stringn(ev->prior_raw, ev->prior_raw_len);
		json_object_set_new(line, "prior_bytes", raw != NULL ? raw : json_null());
	}
	json_object_set_new(line, "new_owner",
			    ev->next ? owner_to_json(ev->next) : json_null());
	json_object_set_new(line, "liveness", str_or_null(ev->liveness));
	json_object_set_new(line, "liveness_reason", str_or_null(ev->liveness_reason));
	json_object_set_new(line, "forced", json_boolean(ev->force_reason != NULL));
	json_object_set_new(line, "force_reason", str_or_null(ev->force_reason));
	json_object_set_new(line, "actor", actor);
	text = json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(line);
	if (text == NULL)
		return NULL;
	n = strlen(text);
	text[n] = '\n';	/* replaces the NUL */
	*len = n + 1;
	return text;
}

int journal_append(int dir_fd, const char *path, const struct journal_event *ev,
		   bool sync, struct wsl_error *err)
{
	char jpath[4200];
	struct stat st;
	char *text, *out;
	size_t len;
	int fd, rc = -1, saved;

	snprintf(jpath, sizeof(jpath), "%s/journal.jsonl", path);
	text = journal_format(ev, &len);
	if (text == NULL)
		return wsl_error_set(err, WSL_INTERNAL, "cannot format a journal line");
	out = text;

	fd = fsx_openat(dir_fd, "journal.jsonl", O_RDWR | O_APPEND | O_CREAT |
			O_NONBLOCK | O_NOCTTY, 0600);
	if (fd < 0) {
		fsx_open_failed(errno, jpath, err);
		goto out;
	}
	if (fstat(fd, &st) != 0) {
		wsl_error_errno(err, WSL_IO, errno, "cannot stat %s", jpath);
		goto out;
	}
	if (fsx_check_private(&st, S_IFREG, jpath, err) != 0)
		goto out;
	if (st.st_size > 0) {
		/* A line torn by an older binary (or by hand) must not swallow
		 * this one: start on a line of our own. */
		char last = '\n';
		ssize_t got;

		do
			got = pread(fd, &last, 1, st.st_size - 1);
		while (got < 0 && errno == EINTR);
		if (got == 1 && last != '\n') {
			out = malloc(len + 1);
			if (out == NULL) {
				out = text;
				wsl_error_errno(err, WSL_OS, ENOMEM, "out of memory");
				goto out;
			}
			out[0] = '\n';
			memcpy(out + 1, text, len);
			len++;
		}
	}
	CRASH_POINT("journal:opened");
	/* One write(2) per line: with O_APPEND the kernel places it whole at
	 * the end, so lines from concurrent writers never interleave. */
	if (fsx_write_all(fd, out, len) != 0 || (sync && fsx_fsync(fd) != 0)) {
		saved = errno;
		/* A full disk may have taken part of the line: cut it off, so
		 * that the file ends where it did (appends are made under the
		 * registry's coordination lock: nobody appended meanwhile). The
		 * caller changes nothing: no line, no change. */
		if (ftruncate(fd, st.st_size) == 0 && sync)
			fsx_fsync(fd);
		wsl_error_errno(err, WSL_IO, saved, "cannot append to %s", jpath);
		goto out;
	}
	rc = 0;
out:
	fsx_close(fd);
	if (out != text)
		free(out);
	free(text);
	return rc;
}
