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

/* locks/ as local_list reads it: the names of its entries, sorted. Keys
 * (nearly all of them) are kept as 32 bytes each, not as strings, so that
 * 10,000 locks cost 320 KiB; anything else (reported as corrupt) by name.
 * Sorted bytes of keys are sorted hex strings. */
struct lock_names {
	unsigned char (*keys)[WSL_KEY_HEX / 2];
	size_t nkeys, capkeys;
	char **other;
	size_t nother, capother;
};

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

static int names_add(struct lock_names *l, const char *name)
{
	if (key_valid(name)) {
		if (l->nkeys == l->capkeys) {
			size_t cap = l->capkeys ? l->capkeys * 2 : 256;
			void *p = realloc(l->keys, cap * sizeof(*l->keys));
			if (p == NULL)
				return -1;
			l->keys = p;
			l->capkeys = cap;
		}
		for (size_t i = 0; i < WSL_KEY_HEX / 2; i++)
			l->keys[l->nkeys][i] = (unsigned char)(nibble(name[2 * i]) << 4 |
							       nibble(name[2 * i + 1]));
		l->nkeys++;
		return 0;
	}
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
 * coordination lock: section 5) and handed to fn as it is read; memory
 * stays that of the names. */
int local_list(struct registry *reg, bool probe,
		      int (*fn)(const struct lock_entry *e, void *arg), void *arg,
		      struct wsl_error *err)
{
	struct lock_names l = { 0 };
	char hex[WSL_KEY_HEX + 1];
	struct dirent *de;
	size_t k = 0, o = 0;
	DIR *dir;
	int fd, rc = 0;

	if (loc(reg)->locks_fd < 0)
		return 0;
	fd = fsx_openat(loc(reg)->locks_fd, ".", O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0 || (dir = fdopendir(fd)) == NULL) {
		fsx_close(fd);
		return wsl_error_errno(err, WSL_IO, errno, "cannot read %s/locks", reg->path);
	}
	while ((de = readdir(dir)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (names_add(&l, de->d_name) != 0) {
			rc = wsl_error_errno(err, WSL_OS, errno, "out of memory");
			break;
		}
	}
	closedir(dir);
	if (rc == 0) {
		qsort(l.keys, l.nkeys, sizeof(*l.keys), key_bytes_cmp);
		qsort(l.other, l.nother, sizeof(*l.other), name_cmp);
	}
	/* The two sorted lists merged: the order of the names as strings. */
	while (rc == 0 && (k < l.nkeys || o < l.nother)) {
		if (k < l.nkeys)
			key_to_hex(l.keys[k], hex);
		if (k < l.nkeys && (o == l.nother || strcmp(hex, l.other[o]) < 0)) {
			rc = list_entry(reg, hex, probe, fn, arg, err);
			k++;
		} else {
			rc = list_entry(reg, l.other[o], probe, fn, arg, err);
			o++;
		}
	}
	names_free(&l);
	return rc;
}
