/* owner.h - the owner document (DESIGN.md section 3): build, parse,
 * validate, format and compare. The only file that reads or writes owner
 * JSON; jansson does all the JSON. */
#ifndef WSLOCK_OWNER_H
#define WSLOCK_OWNER_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <jansson.h>

#include "crypto.h"
#include "error.h"
#include "mountinfo.h"
#include "platform.h"

#define OWNER_DOC_MAX (64 * 1024)	/* bytes; larger documents are corrupt */
#define OWNER_OPID_MAX 192		/* bytes */
#define OWNER_PURPOSE_MAX 128		/* characters (Unicode code points) */
#define OWNER_KIND "wslock-owner"
#define OWNER_SCHEMA 2		/* what owner_build writes */
#define OWNER_SCHEMA_V1 1	/* 0.1.x documents: still valid, kept as written */
#define OWNER_FS_MAX MOUNTINFO_FS_MAX

enum identity_policy {
	IDENTITY_PID_START_BOOT,	/* "pid-start-boot" */
	IDENTITY_PID_ONLY,		/* "pid-only-fail-closed" */
};

/* One parsed and validated owner document. Optional values (JSON null)
 * have their has_* flag false. A version 1 document (schema 1) has none of
 * the four keys added in version 2: workspace_fs and workspace_fs_path are
 * "" and has_machine_id and has_pid_namespace false; it is formatted back
 * with exactly its own keys. */
struct owner {
	int schema;			/* OWNER_SCHEMA_V1 or OWNER_SCHEMA */
	char token[WSL_TOKEN_HEX + 1];
	char operation_id[OWNER_OPID_MAX + 1];
	char purpose[OWNER_PURPOSE_MAX * 4 + 1];
	char workspace_root[PATH_MAX];
	char workspace_fs[OWNER_FS_MAX + 1];	/* "fsid:<16 hex>" or "dev:MAJ:MIN" */
	char workspace_fs_path[PATH_MAX];	/* the path inside that filesystem */
	char host[WSL_HOST_MAX + 1];
	char machine_id[WSL_MACHINE_ID_LEN + 1];
	bool has_machine_id;
	char boot_id[WSL_BOOT_ID_LEN + 1];
	bool has_boot_id;
	pid_t pid;
	unsigned long long start_ticks;	/* clock ticks after boot, proc(5) */
	bool has_start_ticks;
	char pid_namespace[WSL_PIDNS_MAX + 1];	/* "pid:[INODE]" */
	bool has_pid_namespace;
	enum identity_policy policy;
	char acquired_at[WSL_TIME_LEN + 1];
	char recovery_of[WSL_TOKEN_HEX + 1];
	bool has_recovery_of;
};

/* True for an operation id matching ^[A-Za-z0-9][A-Za-z0-9._-]{0,191}$. */
bool owner_operation_id_valid(const char *s);

/* True for a purpose of 1..128 characters of valid UTF-8 without control
 * characters (C0, DEL, C1). */
bool owner_purpose_valid(const char *s);

/* True for a canonical absolute path: starts with '/', is not "/" itself,
 * shorter than PATH_MAX, no empty, "." or ".." component, no trailing '/',
 * no control characters. Symlinks are not looked at. */
bool owner_path_canonical(const char *s);

/* True for a filesystem identity as mountinfo_identity() writes it:
 * "fsid:" and 16 lowercase hex digits, or "dev:MAJ:MIN" in decimal. */
bool owner_fs_valid(const char *s);

/* Seeds jansson's hash function from libsodium (json_object_seed(3)), once,
 * before any JSON is made; crypto_setup() must have succeeded. */
void owner_setup(void);

/* Writes a fresh operation id, "YYYYMMDDTHHMMSSZ-<8 hex>", into out. */

void owner_new_operation_id(char out[OWNER_OPID_MAX + 1]);

/*
 * Fills o for a new holder, as a schema_version 2 document: a new random
 * token, the current time, this host's name, machine id and boot id, pid
 * with its start ticks and the pid namespace its number belongs to (the
 * caller's: a pid given to acquire --pid is numbered there), and the
 * workspace's identity (mountinfo_identity(), DESIGN.md section 3). When the
 * boot id or the start ticks cannot be read the policy is IDENTITY_PID_ONLY
 * (liveness then fails closed); an unreadable machine id or namespace is
 * recorded as null. recovery_of may be NULL. Fails with WSL_USAGE for an
 * invalid purpose, operation id or pid, WSL_UNSAFE_PATH for a path that is
 * not canonical, WSL_OS when the host name or the workspace's mount cannot
 * be read; returns 0 or -1.
 */
int owner_build(struct owner *o, const char *workspace_root, pid_t pid,
		const char *purpose, const char *operation_id,
		const char *recovery_of, struct wsl_error *err);

/* owner_build, but the workspace identity (workspace_fs, workspace_fs_path)
 * is place's, a version 2 document of the same lock, instead of the
 * directory's: recover of a lock whose workspace was removed takes the lock
 * where it is kept. place NULL: owner_build. */
int owner_build_in(struct owner *o, const struct owner *place,
		   const char *workspace_root, pid_t pid,
		   const char *purpose, const char *operation_id,
		   const char *recovery_of, struct wsl_error *err);

/*
 * Parses and validates len bytes as an owner document: one JSON object with
 * exactly the 17 keys of schema_version 2 or the 13 of schema_version 1
 * (DESIGN.md section 3), every value of its type and range, nothing but white space after it, at most OWNER_DOC_MAX bytes, no
 * duplicate keys, valid UTF-8 without NUL. Returns 0, or -1 with a one-line
 * reason in why (whylen bytes).
 */
int owner_parse(const char *buf, size_t len, struct owner *o, char *why,
		size_t whylen);

/*
 * owner_parse for a document a user saved from wslock: also acquire's
 * output on etcd, which carries the lock's fencing token as "fence" (an
 * integer) beside the owner document's keys; that key is dropped before
 * the document is parsed (it is not the owner's: no owner document has
 * it). Returns and reports as owner_parse.
 */
int owner_parse_saved(const char *buf, size_t len, struct owner *o, char *why,
		      size_t whylen);

/* For a document that failed owner_parse: copies its "workspace_root" into
 * out when it is there, a string and canonical, so that a corrupt lock can
 * still be named. Returns true when it did. The caller must check that the
 * path's key is the lock's before trusting it. */
bool owner_guess_workspace(const char *buf, size_t len, char out[PATH_MAX]);

/* The document as a new jansson object (keys in DESIGN.md order; a version
 * 1 document with its 13 keys only, as 0.1 wrote them; during a listing
 * possibly a new reference to the parsed one: owner_memo_begin), or NULL
 * on allocation failure or a path that is not valid UTF-8. */
json_t *owner_to_json(const struct owner *o);

/* Between owner_memo_begin and owner_memo_end (a listing: inspect --all
 * reads thousands of documents), owner_parse keeps the document it read
 * last, and owner_to_json of an owner equal to the one it gave (every
 * key, owner_equal) returns that very object, one more reference to it,
 * instead of building it again: the same keys, order and values, so the
 * same bytes once dumped. Its callers there must not change the object.
 * The memo holds one document at a time; owner_memo_end drops it. */
void owner_memo_begin(void);
void owner_memo_end(void);

/* The document as a new NUL-terminated string (free(3) it): compact on one
 * line, or indented by two when pretty. NULL on failure. */
char *owner_format(const struct owner *o, bool pretty);

/* Writes the names of the keys whose values differ between a and b into
 * out (len bytes), comma-separated, e.g. "purpose, pid"; "" when equal. */
void owner_diff(const struct owner *a, const struct owner *b, char *out, size_t len);

/* True when a and b are the same document: same schema version (so the
 * same key set) and values,
 * whatever the key order and white space (compare-and-swap input). */
bool owner_equal(const struct owner *a, const struct owner *b);

#endif
