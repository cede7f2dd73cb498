/* test_owner.c - owner document parsing, validation and comparison. */
#include "owner.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *valid =
	"{\"schema_version\":1,\"kind\":\"wslock-owner\",\"token\":\"0123456789abcdef0123456789abcdef\","
	"\"operation_id\":\"op-1\",\"purpose\":\"make test\",\"workspace_root\":\"/srv/app\","
	"\"host\":\"build1\",\"boot_id\":\"4a760414-a5f5-4c44-b75c-0e8b7c280e9a\",\"pid\":123,"
	"\"pid_start_ticks\":456,\"identity_policy\":\"pid-start-boot\","
	"\"acquired_at\":\"2026-11-30T11:28:58.123Z\",\"recovery_of\":null}";

/* valid with the first occurrence of from replaced by to. */
static char *variant(const char *from, const char *to)
{
	const char *at = strstr(valid, from);
	size_t n = strlen(valid) - strlen(from) + strlen(to) + 1;
	char *out = malloc(n);

	if (at == NULL || out == NULL)
		abort();
	snprintf(out, n, "%.*s%s%s", (int)(at - valid), valid, to, at + strlen(from));
	return out;
}

static int parses(const char *doc)
{
	struct owner o;
	char why[256];

	return owner_parse(doc, strlen(doc), &o, why, sizeof(why)) == 0;
}

static void refused(const char *from, const char *to, const char *name)
{
	char *doc = variant(from, to);

	CHECK(!parses(doc), name);
	free(doc);
}

int main(void)
{
	struct owner a, b, built;
	struct wsl_error err = { 0 };
	char why[256], *text, *big;
	size_t i;

	CHECK(crypto_setup() == 0, "libsodium initialises");
	CHECK(owner_parse(valid, strlen(valid), &a, why, sizeof(why)) == 0, "valid document parses");
	CHECK(a.pid == 123 && a.start_ticks == 456 && a.has_boot_id && !a.has_recovery_of,
	      "values are read");

	/* Same document, other key order and white space: equal. */
	{
		const char *reordered =
			"{ \"recovery_of\" : null, \"pid\": 123, \"kind\":\"wslock-owner\",\n"
			"\"schema_version\":1,\"token\":\"0123456789abcdef0123456789abcdef\","
			"\"operation_id\":\"op-1\",\"purpose\":\"make test\",\"workspace_root\":\"/srv/app\","
			"\"host\":\"build1\",\"boot_id\":\"4a760414-a5f5-4c44-b75c-0e8b7c280e9a\","
			"\"pid_start_ticks\":456,\"identity_policy\":\"pid-start-boot\","
			"\"acquired_at\":\"2026-11-30T11:28:58.123Z\"}\n\n";
		CHECK(owner_parse(reordered, strlen(reordered), &b, why, sizeof(why)) == 0 &&
		      owner_equal(&a, &b), "key order and white space do not matter");
	}
	{
		char *doc = variant("\"pid\":123", "\"pid\":124");
		CHECK(owner_parse(doc, strlen(doc), &b, why, sizeof(why)) == 0 &&
		      !owner_equal(&a, &b), "one value differs: not equal");
		free(doc);
	}

	CHECK(!parses(""), "empty refused");
	CHECK(!parses("{"), "truncated refused");
	CHECK(!parses("[]"), "array refused");
	{
		size_t n = strlen(valid) + 3;
		char *doc = malloc(n);
		snprintf(doc, n, "%s{}", valid);
		CHECK(!parses(doc), "trailing bytes refused");
		free(doc);
	}
	refused("\"pid\":123", "\"pid\":123,\"pid\":7", "duplicate key refused");
	refused("\"recovery_of\":null", "\"recovery_of\":null,\"extra\":1", "extra key refused");
	refused("\"pid\":123,", "", "missing key refused (not last)");
	refused(",\"recovery_of\":null", "", "missing key refused");
	refused("\"pid\":123", "\"pid\":0", "pid 0 refused");
	refused("\"pid\":123", "\"pid\":-1", "pid -1 refused");
	refused("\"pid\":123", "\"pid\":4194305", "pid above 4194304 refused");
	refused("\"pid\":123", "\"pid\":99999999999999999999", "huge pid refused");
	refused("\"pid\":123", "\"pid\":\"123\"", "pid as string refused");
	refused("\"pid\":123", "\"pid\":123.0", "pid as real refused");
	refused("\"schema_version\":1", "\"schema_version\":2", "schema 2 refused");
	refused("wslock-owner", "wslock-other", "wrong kind refused");
	refused("0123456789abcdef0123456789abcdef", "0123456789ABCDEF0123456789abcdef", "uppercase token refused");
	refused("0123456789abcdef0123456789abcdef", "0123", "short token refused");
	refused("\"/srv/app\"", "\"/srv/../app\"", "non-canonical path refused");
	refused("\"/srv/app\"", "\"/srv/app/\"", "trailing slash refused");
	refused("\"/srv/app\"", "\"srv/app\"", "relative path refused");
	refused("\"/srv/app\"", "\"/\"", "/ refused");
	refused("\"/srv/app\"", "\"/srv\\nx\"", "newline in path refused");
	refused("\"make test\"", "\"make\\u0000test\"", "NUL in string refused");
	refused("\"make test\"", "\"\"", "empty purpose refused");
	refused("\"make test\"", "\"a\\u0007b\"", "control character in purpose refused");
	refused("\"op-1\"", "\"-op\"", "operation id starting with '-' refused");
	refused("\"build1\"", "\"build 1\"", "host with space refused");
	refused("\"pid-start-boot\"", "\"whatever\"", "unknown identity policy refused");
	refused("\"boot_id\":\"4a760414-a5f5-4c44-b75c-0e8b7c280e9a\"", "\"boot_id\":null",
		"pid-start-boot without boot id refused");
	refused("\"pid_start_ticks\":456", "\"pid_start_ticks\":-4", "negative start ticks refused");
	refused("2026-11-30T11:28:58.123Z", "yesterday", "bad time refused");
	refused("\"recovery_of\":null", "\"recovery_of\":\"xyz\"", "bad recovery_of refused");
	{
		char *doc = variant("\"make test\"", "\"m\xff\"");
		CHECK(!parses(doc), "invalid UTF-8 refused");
		free(doc);
	}
	{
		char *doc = variant("\"boot_id\":\"4a760414-a5f5-4c44-b75c-0e8b7c280e9a\"", "\"boot_id\":null");
		char *doc2 = variant("pid-start-boot", "pid-only-fail-closed");
		free(doc);
		doc = doc2;
		CHECK(parses(doc), "pid-only-fail-closed document parses");
		free(doc);
	}
	big = malloc(OWNER_DOC_MAX + 100);
	memset(big, ' ', OWNER_DOC_MAX + 99);
	memcpy(big, valid, strlen(valid));
	big[OWNER_DOC_MAX + 99] = '\0';
	CHECK(!parses(big), "document over 64 KiB refused");
	free(big);

	{
		char purpose[OWNER_PURPOSE_MAX * 2 + 2];
		for (i = 0; i < OWNER_PURPOSE_MAX; i++)
			purpose[i] = 'x';
		purpose[OWNER_PURPOSE_MAX] = '\0';
		CHECK(owner_purpose_valid(purpose), "128-character purpose is valid");
		purpose[OWNER_PURPOSE_MAX] = 'x';
		purpose[OWNER_PURPOSE_MAX + 1] = '\0';
		CHECK(!owner_purpose_valid(purpose), "129-character purpose is refused");
		CHECK(owner_purpose_valid("d\xc3\xa9ploiement"), "UTF-8 purpose counts characters");
	}
	CHECK(owner_operation_id_valid("a"), "one-character operation id");
	CHECK(!owner_operation_id_valid("a b"), "operation id with space refused");
	CHECK(owner_path_canonical("/a/b.c/..d"), "names starting with dots are canonical");
	CHECK(!owner_path_canonical("/a//b"), "double slash is not canonical");
	CHECK(!owner_path_canonical("/a/./b"), "dot component is not canonical");

	CHECK(owner_build(&built, "/srv/app", getpid(), "unit test", NULL, NULL, &err) == 0,
	      "owner_build for this process");
	text = owner_format(&built, false);
	CHECK(text != NULL && owner_parse(text, strlen(text), &b, why, sizeof(why)) == 0 &&
	      owner_equal(&built, &b), "a built document round-trips");
	CHECK(built.policy == IDENTITY_PID_START_BOOT, "built with pid-start-boot here");
	free(text);
	CHECK(owner_build(&built, "/srv/app", getpid(), "", NULL, NULL, &err) != 0 &&
	      err.code == WSL_USAGE, "empty purpose refused by owner_build");
	wsl_error_clear(&err);
	CHECK(owner_build(&built, "/srv/app/", getpid(), "x", NULL, NULL, &err) != 0,
	      "non-canonical workspace refused by owner_build");
	wsl_error_clear(&err);
	return tap_done();
}
