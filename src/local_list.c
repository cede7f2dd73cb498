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

/* locks/ as local_list reads it, one slice of the key space at a time:
 * the keys of the slice (nearly every entry is a key) as 32 bytes each,
 * and every other name (reported as corrupt) as a string. Sorted bytes of
 * keys are sorted hex strings. */
struct lock_names {
	unsigned char (*keys)[WSL_KEY_HEX / 2];
	size_t nkeys, capkeys;
	size_t seen;		/* keys in locks/, whatever their slice */
	char **other;
	size_t nother, capother;
};

/* Keys read per pass over locks/ (32 bytes each): a registry with more
 * is read in several passes, each keeping one slice of the key space, so
 * that the memory of inspect --all stays flat however many locks there
 * are (a pass costs one readdir, about a microsecond per entry). */
#define LIST_SLICE_KEYS 2048

static int nibble(char c)
{
	return c <= '9' ? c - '0' : c - 'a' + 10;
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

/* Keeps name: a key whose first two bytes are in [lo, hi), or (with
 * others) a name that is not a key. */
static int names_add(struct lock_names *l, const char *name, unsigned lo, unsigned hi,
		     bool others)
{
	/* A later pass (others false) wants only the keys of its slice:
	 * the first four digits tell, before the other 60 are checked. */
	if (!others) {
		unsigned prefix = 0;
		size_t i;

		for (i = 0; i < 4 && ((name[i] >= '0' && name[i] <= '9') ||
				      (name[i] >= 'a' && name[i] <= 'f')); i++)
			prefix = prefix << 4 | (unsigned)nibble(name[i]);
		if (i == 4 && (prefix < lo || prefix >= hi))
			return 0;
	}
	if (key_valid(name)) {
		unsigned char k[WSL_KEY_HEX / 2];
		unsigned prefix;

		for (size_t i = 0; i < sizeof(k); i++)
			k[i] = (unsigned char)(nibble(name[2 * i]) << 4 | nibble(name[2 * i + 1]));
		l->seen++;
		prefix = (unsigned)k[0] << 8 | k[1];
		if (prefix < lo || prefix >= hi)
			return 0;
		if (l->nkeys == l->capkeys) {
			size_t cap = l->capkeys ? l->capkeys * 2 : 256;
			void *p = realloc(l->keys, cap * sizeof(*l->keys));
			if (p == NULL)
				return -1;
			l->keys = p;
			l->capkeys = cap;
		}
		memcpy(l->keys[l->nkeys++], k, sizeof(k));
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

/* One pass over locks/: the keys of the slice [lo, hi) into l (sorted),
 * and with others the other names too. */
static int names_read(struct registry *reg, struct lock_names *l, unsigned lo,
		      unsigned hi, bool others, struct wsl_error *err)
{
	struct dirent *de;
	DIR *dir;
	int fd, rc = 0;

	l->nkeys = 0;
	l->seen = 0;
	fd = fsx_openat(loc(reg)->locks_fd, ".", O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0 || (dir = fdopendir(fd)) == NULL) {
		fsx_close(fd);
		return wsl_error_errno(err, WSL_IO, errno, "cannot read %s/locks", reg->path);
	}
	while ((de = readdir(dir)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		/* The first pass keeps every key only while they are few. */
		if (hi - lo == 0x10000 && l->nkeys >= LIST_SLICE_KEYS)
			lo = hi;	/* from now on only counted */
		if (names_add(l, de->d_name, lo, hi, others) != 0) {
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
 * coordination lock: section 5) and handed to fn as it is read. A first
 * pass over locks/ counts the keys (keeping them when they are few); a
 * larger registry is then read slice by slice of the key space, so memory
 * stays that of LIST_SLICE_KEYS keys. The few names that are not keys are
 * merged in by name. A lock made or removed during the listing is listed
 * or not, as with one readdir; none is listed twice (slices are
 * disjoint). */
int local_list(struct registry *reg, bool probe,
	       int (*fn)(const struct lock_entry *e, void *arg), void *arg,
	       struct wsl_error *err)
{
	struct lock_names l = { 0 };
	char hex[WSL_KEY_HEX + 1];
	size_t o = 0, slices = 1;
	int rc;

	if (loc(reg)->locks_fd < 0)
		return 0;
	if (probe)
		liveness_memo_begin();	/* many locks, often of one holder */
	rc = names_read(reg, &l, 0, 0x10000, true, err);
	if (rc == 0 && l.seen > LIST_SLICE_KEYS)
		/* Room for the unevenness of a slice: 3/4 full on average. */
		slices = (l.seen + LIST_SLICE_KEYS * 3 / 4 - 1) / (LIST_SLICE_KEYS * 3 / 4);
	for (size_t p = 0; rc == 0 && p < slices; p++) {
		unsigned lo = (unsigned)(p * 0x10000 / slices);
		unsigned hi = (unsigned)((p + 1) * 0x10000 / slices);
		size_t k = 0;

		if (slices > 1 && (rc = names_read(reg, &l, lo, hi, false, err)) != 0)
			break;
		/* This slice's keys, with the other names that sort before
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
	}
	while (rc == 0 && o < l.nother)
		rc = list_entry(reg, l.other[o++], probe, fn, arg, err);
	if (probe)
		liveness_memo_end();
	names_free(&l);
	return rc;
}
