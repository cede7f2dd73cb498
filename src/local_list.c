/* local_list.c - the local backend's list (the registry contract's list,
 * registry.h): every lock in locks/, read without the coordination lock
 * (DESIGN.md section 5: documents are published by rename) and handed over
 * one at a time, in the order of the lock directories' names, so that a
 * reader's memory is that of the names alone (inspect --all streams).
 */
#include "registry_local.h"
#include "fsx.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

/* locks/ as local_list reads it, one pass at a time: the LIST_PASS_KEYS
 * smallest keys above the last one handed over (a bounded max-heap while
 * the pass reads, sorted after it) as 32 bytes each, and every other
 * name (reported as corrupt) as a string. Sorted bytes of keys are sorted
 * hex strings. */
struct lock_names {
	unsigned char (*keys)[WSL_KEY_HEX / 2];
	size_t nkeys, cap;	/* cap: pass_keys() */
	char **other;
	size_t nother, capother;
};

/* Keys read per pass over locks/ (32 bytes each): a registry with more
 * is read in several passes, each keeping the next LIST_PASS_KEYS keys in
 * name order, so that the memory of inspect --all stays flat however many
 * locks there are. A pass costs one readdir of locks/ (at 10 000 locks, a
 * few milliseconds), so passes are kept full: ceil(keys / LIST_PASS_KEYS). */
#define LIST_PASS_KEYS 2048

/* LIST_PASS_KEYS, or in the test build WSLOCK_TEST_LIST_PASS (1..2048),
 * so that a test sees passes on a handful of locks. */
static size_t pass_keys(void)
{
#ifdef WSLOCK_TEST_HOOKS
	const char *v = getenv("WSLOCK_TEST_LIST_PASS");
	char *end;
	long n = v != NULL ? strtol(v, &end, 10) : 0;

	if (v != NULL && *end == '\0' && n >= 1 && n <= LIST_PASS_KEYS)
		return (size_t)n;
#endif
	return LIST_PASS_KEYS;
}

/* The value of a lowercase hex digit, or -1. */
static int nibble(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Whether name is a key (key_valid: WSL_KEY_HEX lowercase hex digits),
 * decoded into k on the way: one look at each of the readdir's names. */
static bool key_bytes(const char *name, unsigned char k[WSL_KEY_HEX / 2])
{
	for (size_t i = 0; i < WSL_KEY_HEX / 2; i++) {
		int hi = nibble(name[2 * i]), lo = hi < 0 ? -1 : nibble(name[2 * i + 1]);

		if (lo < 0)
			return false;
		k[i] = (unsigned char)(hi << 4 | lo);
	}
	return name[WSL_KEY_HEX] == '\0';
}

static void key_to_hex(const unsigned char *k, char out[WSL_KEY_HEX + 1])
{
	static const char hex[] = "0123456789abcdef";

	for (size_t i = 0; i < WSL_KEY_HEX / 2; i++) {
		out[2 * i] = hex[k[i] >> 4];
		out[2 * i + 1] = hex[k[i] & 15];
	}
	out[WSL_KEY_HEX] = '\0';
}

static int key_bytes_cmp(const void *a, const void *b)
{
	return memcmp(a, b, WSL_KEY_HEX / 2);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Puts k into the max-heap l->keys (at most l->cap, the largest first):
 * the pass keeps the smallest keys it meets. */
static void heap_offer(struct lock_names *l, const unsigned char *k)
{
	size_t i, c;

	if (l->nkeys < l->cap) {
		/* sift up */
		for (i = l->nkeys++; i > 0 && key_bytes_cmp(l->keys[(i - 1) / 2], k) < 0;
		     i = (i - 1) / 2)
			memcpy(l->keys[i], l->keys[(i - 1) / 2], sizeof(l->keys[i]));
		memcpy(l->keys[i], k, sizeof(l->keys[i]));
		return;
	}
	if (key_bytes_cmp(k, l->keys[0]) >= 0)
		return;
	/* replace the largest, sift down */
	for (i = 0; (c = 2 * i + 1) < l->nkeys; i = c) {
		if (c + 1 < l->nkeys && key_bytes_cmp(l->keys[c + 1], l->keys[c]) > 0)
			c++;
		if (key_bytes_cmp(l->keys[c], k) <= 0)
			break;
		memcpy(l->keys[i], l->keys[c], sizeof(l->keys[i]));
	}
	memcpy(l->keys[i], k, sizeof(l->keys[i]));
}

/* Keeps name: a key above after (any key when after is NULL; after_hex
 * is after in hex), or (with others) a name that is not a key. */
static int names_add(struct lock_names *l, const char *name, const unsigned char *after,
		     const char *after_hex, bool others)
{
	unsigned char k[WSL_KEY_HEX / 2];

	/* A later pass: a name not above the last key handed over is no key
	 * it keeps (hex digits sort as their bytes), and is not decoded. */
	if (after != NULL && strncmp(name, after_hex, WSL_KEY_HEX) <= 0)
		return 0;
	if (key_bytes(name, k)) {
		if (after == NULL || key_bytes_cmp(k, after) > 0)
			heap_offer(l, k);
		return 0;
	}
	if (!others)
		return 0;
	if (l->nother == l->capother) {
		size_t cap = l->capother ? l->capother * 2 : 8;
		char **p = realloc(l->other, cap * sizeof(*p));
		if (p == NULL)
			return -1;
		l->other = p;
		l->capother = cap;
	}
	l->other[l->nother] = strdup(name);
	if (l->other[l->nother] == NULL)
		return -1;
	l->nother++;
	return 0;
}

static void names_free(struct lock_names *l)
{
	for (size_t i = 0; i < l->nother; i++)
		free(l->other[i]);
	free(l->other);
	free(l->keys);
}

/* One pass over locks/: the LIST_PASS_KEYS smallest keys above after
 * (NULL: from the first) into l, sorted, and with others the other names
 * too. */
static int names_read(struct registry *reg, struct lock_names *l, const unsigned char *after,
		      bool others, struct wsl_error *err)
{
	char after_hex[WSL_KEY_HEX + 1];
	struct dirent *de;
	DIR *dir;
	int fd, rc = 0;

	if (after != NULL)
		key_to_hex(after, after_hex);
	l->nkeys = 0;
	if (l->keys == NULL) {
		l->cap = pass_keys();
		if ((l->keys = malloc(l->cap * sizeof(*l->keys))) == NULL)
			return wsl_error_errno(err, WSL_OS, errno, "out of memory");
	}
	fd = fsx_openat(loc(reg)->locks_fd, ".", O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0 || (dir = fdopendir(fd)) == NULL) {
		fsx_close(fd);
		return wsl_error_errno(err, WSL_IO, errno, "cannot read %s/locks", reg->path);
	}
	while ((de = readdir(dir)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (names_add(l, de->d_name, after, after_hex, others) != 0) {
			rc = wsl_error_errno(err, WSL_OS, errno, "out of memory");
			break;
		}
	}
	closedir(dir);
	if (rc == 0) {
		/* qsort(3) takes no null base, even for no elements. */
		if (l->nkeys > 0)
			qsort(l->keys, l->nkeys, sizeof(*l->keys), key_bytes_cmp);
		if (others && l->nother > 0)
			qsort(l->other, l->nother, sizeof(*l->other), name_cmp);
	}
	return rc;
}

/* Reads and reports (fn) the entry name of locks/. */
static int list_entry(struct registry *reg, const char *name, bool probe,
		      int (*fn)(const struct lock_entry *e, void *arg), void *arg,
		      struct wsl_error *err)
{
	struct lock_entry e;
	int rc = 0;

	if (strlen(name) >= sizeof(e.key)) {
		memset(&e, 0, sizeof(e));
		snprintf(e.key, sizeof(e.key), "%.64s", name);
		set_corrupt(&e, "unexpected entry in locks/");
	} else if (local_get_key(reg, name, probe, &e, err) != 0) {
		return -1;
	}
	if (e.state != LOCK_FREE)
		rc = fn(&e, arg);
	lock_entry_free(&e);
	return rc;
}

/* Every lock, in the order of its name, each read (without the
 * coordination lock: section 5) and handed to fn as it is read. Each pass
 * over locks/ keeps the next LIST_PASS_KEYS keys above the last one
 * handed over, so memory stays that of LIST_PASS_KEYS keys and a registry
 * of N locks is read in ceil(N / LIST_PASS_KEYS) passes. The few names
 * that are not keys (read in the first pass) are merged in by name. A
 * lock made or removed during the listing is listed or not, as with one
 * readdir; none is listed twice (each pass starts above the last key). */
int local_list(struct registry *reg, bool probe,
	       int (*fn)(const struct lock_entry *e, void *arg), void *arg,
	       struct wsl_error *err)
{
	struct lock_names l = { 0 };
	unsigned char last[WSL_KEY_HEX / 2];
	char hex[WSL_KEY_HEX + 1];
	size_t o = 0;
	bool first = true, more = true;
	int rc = 0;

	if (loc(reg)->locks_fd < 0)
		return 0;
	if (probe)
		liveness_memo_begin();	/* many locks, often of one holder */
	owner_memo_begin();	/* each document is printed as it was read */
	loc(reg)->listing = true;
	while (rc == 0 && more) {
		size_t k = 0;

		rc = names_read(reg, &l, first ? NULL : last, first, err);
		if (rc != 0)
			break;
		/* A full pass may have left keys above its last one. */
		more = l.nkeys == l.cap;
		first = false;
		/* This pass's keys, with the other names that sort before
		 * each. */
		while (rc == 0 && k < l.nkeys) {
			key_to_hex(l.keys[k], hex);
			if (o < l.nother && strcmp(l.other[o], hex) < 0) {
				rc = list_entry(reg, l.other[o++], probe, fn, arg, err);
				continue;
			}
			rc = list_entry(reg, hex, probe, fn, arg, err);
			k++;
		}
		if (l.nkeys > 0)
			memcpy(last, l.keys[l.nkeys - 1], sizeof(last));
	}
	while (rc == 0 && o < l.nother)
		rc = list_entry(reg, l.other[o++], probe, fn, arg, err);
	if (probe)
		liveness_memo_end();
	owner_memo_end();
	loc(reg)->listing = false;
	names_free(&l);
	return rc;
}
