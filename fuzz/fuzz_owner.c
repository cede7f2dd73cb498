/* fuzz_owner.c - libFuzzer target for the owner document parser/validator
 * (owner_parse, owner_guess_workspace) and the expected-owner comparison
 * (owner_equal), built by `make fuzz` with clang -fsanitize=fuzzer,address,
 * undefined.
 *
 * An input is one owner document, or two separated by the first RS byte
 * (0x1e, as in RFC 7464 JSON text sequences): the current owner and the
 * expected one, as `recover --expected-owner` compares them. Besides "no
 * crash, no undefined behaviour, no leak", it checks:
 *   - a document that parses satisfies DESIGN.md section 3 (pid range,
 *     canonical path, token shape, policy and its fields, size limit);
 *   - it survives a round trip: format (compact and pretty), parse again,
 *     compare equal; formatting is a fixed point;
 *   - owner_equal is reflexive and symmetric, and two valid documents are
 *     equal exactly when their canonical (compact) forms are the same bytes;
 *   - changing any one value makes the documents unequal.
 */
#include "owner.h"
#include "mountinfo.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                           \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "fuzz_owner: check failed: %s (%s:%d)\n", \
				#cond, __FILE__, __LINE__);                   \
			abort();                                              \
		}                                                             \
	} while (0)

static bool hex32(const char *s)
{
	size_t i;

	if (strlen(s) != WSL_TOKEN_HEX)
		return false;
	for (i = 0; i < WSL_TOKEN_HEX; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static void check_valid(const struct owner *o, size_t len)
{
	CHECK(len <= OWNER_DOC_MAX);
	CHECK(o->pid >= 1 && o->pid <= WSL_PID_MAX);
	CHECK(owner_path_canonical(o->workspace_root));
	CHECK(hex32(o->token));
	CHECK(owner_operation_id_valid(o->operation_id));
	CHECK(owner_purpose_valid(o->purpose));
	CHECK(platform_host_valid(o->host));
	CHECK(platform_time_valid(o->acquired_at));
	CHECK(!o->has_boot_id || platform_boot_id_valid(o->boot_id));
	CHECK(!o->has_recovery_of || hex32(o->recovery_of));
	CHECK(o->policy == IDENTITY_PID_ONLY ||
	      (o->policy == IDENTITY_PID_START_BOOT && o->has_boot_id && o->has_start_ticks));
}

/* Formats o, parses the text again and checks it is the same owner. */
static char *round_trip(const struct owner *o, bool pretty)
{
	struct owner back;
	char why[256];
	char *text = owner_format(o, pretty);

	CHECK(text != NULL);
	CHECK(owner_parse(text, strlen(text), &back, why, sizeof(why)) == 0);
	CHECK(owner_equal(o, &back));
	CHECK(owner_equal(&back, o));
	if (!pretty) {
		char *again = owner_format(&back, false);
		CHECK(again != NULL && strcmp(again, text) == 0);
		free(again);
	}
	return text;
}

/* One value changed at a time must make the comparison fail. */
static void check_sensitive(const struct owner *o)
{
	struct owner m;

	m = *o;
	m.token[0] = m.token[0] == 'a' ? 'b' : 'a';
	CHECK(!owner_equal(o, &m));
	m = *o;
	m.pid = o->pid == 1 ? 2 : o->pid - 1;
	CHECK(!owner_equal(o, &m));
	m = *o;
	m.has_start_ticks = !o->has_start_ticks;
	CHECK(!owner_equal(o, &m));
	m = *o;
	m.has_recovery_of = !o->has_recovery_of;
	if (m.has_recovery_of)
		memcpy(m.recovery_of, o->token, sizeof(m.recovery_of));
	CHECK(!owner_equal(o, &m));
	m = *o;
	m.acquired_at[22] = m.acquired_at[22] == '0' ? '1' : '0';
	CHECK(!owner_equal(o, &m));
	m = *o;
	m.policy = o->policy == IDENTITY_PID_ONLY ? IDENTITY_PID_START_BOOT : IDENTITY_PID_ONLY;
	CHECK(!owner_equal(o, &m));
}

/* Parses one document; returns true (and fills o, text) when it is valid. */
static bool one(const uint8_t *data, size_t len, struct owner *o, char **text)
{
	char why[256], guess[PATH_MAX];

	why[0] = '\0';
	*text = NULL;
	if (owner_parse((const char *)data, len, o, why, sizeof(why)) != 0) {
		CHECK(why[0] != '\0');
		CHECK(memchr(why, '\0', sizeof(why)) != NULL);
		if (owner_guess_workspace((const char *)data, len, guess))
			CHECK(owner_path_canonical(guess));
		return false;
	}
	check_valid(o, len);
	CHECK(owner_equal(o, o));
	check_sensitive(o);
	*text = round_trip(o, false);
	free(round_trip(o, true));
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The mountinfo line parser (src/mountinfo.c) on the same bytes: whatever
 * it accepts has an absolute root and mount point without NUL. */
static void mountinfo_line(const uint8_t *data, size_t size)
{
	static char root[PATH_MAX], target[PATH_MAX];
	int id;

	if (mountinfo_parse_line((const char *)data, size, &id, root, target) == 0) {
		CHECK(root[0] == '/' && target[0] == '/' && id >= 0);
		CHECK(strlen(root) < PATH_MAX && strlen(target) < PATH_MAX);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *rs = memchr(data, 0x1e, size);
	struct owner a, b;
	char *ta = NULL, *tb = NULL;
	bool va, vb;

	if (rs == NULL) {
		if (one(data, size, &a, &ta))
			free(ta);
		mountinfo_line(data, size);
		return 0;
	}
	va = one(data, (size_t)(rs - data), &a, &ta);
	vb = one(rs + 1, size - (size_t)(rs - data) - 1, &b, &tb);
	if (va && vb) {
		bool eq = owner_equal(&a, &b);
		CHECK(eq == owner_equal(&b, &a));
		CHECK(eq == (strcmp(ta, tb) == 0));
	}
	free(ta);
	free(tb);
	return 0;
}
