/* test_owner.c - owner document parsing, validation and comparison. */
#include "owner.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <unistd.h>

static const char *valid =
	"{\"schema_version\":1,\"kind\":\"wslock-owner\",\"token\":\"0123456789abcdef0123456789abcdef\","
	"\"operation_id\":\"op-1\",\"purpose\":\"make test\",\"workspace_root\":\"/srv/app\","
	"\"host\":\"build1\",\"boot_id\":\"4a760414-a5f5-4c44-b75c-0e8b7c280e9a\",\"pid\":123,"
	"\"pid_start_ticks\":456,\"identity_policy\":\"pid-start-boot\","
	"\"acquired_at\":\"2026-11-30T11:28:58.123Z\",\"recovery_of\":null}";

/* The same holder as a schema_version 2 document. */
static const char *valid2 =
	"{\"schema_version\":2,\"kind\":\"wslock-owner\",\"token\":\"0123456789abcdef0123456789abcdef\","
	"\"operation_id\":\"op-1\",\"purpose\":\"make test\",\"workspace_root\":\"/srv/app\","
	"\"workspace_fs\":\"fsid:91f872ef092c6674\",\"workspace_fs_path\":\"/data/app\","
	"\"host\":\"build1\",\"machine_id\":\"3d1219c7c4c5404aaa1f6d2a48adfda4\","
	"\"boot_id\":\"4a760414-a5f5-4c44-b75c-0e8b7c280e9a\",\"pid\":123,"
	"\"pid_start_ticks\":456,\"pid_namespace\":\"pid:[4026531836]\","
	"\"identity_policy\":\"pid-start-boot\","
	"\"acquired_at\":\"2026-11-30T11:28:58.123Z\",\"recovery_of\":null}";

/* base with the first occurrence of from replaced by to. */
static char *variant_of(const char *base, const char *from, const char *to)
{
	const char *at = strstr(base, from);
	size_t n = strlen(base) - strlen(from) + strlen(to) + 1;
	char *out = malloc(n);

	if (at == NULL || out == NULL)
		abort();
	snprintf(out, n, "%.*s%s%s", (int)(at - base), base, to, at + strlen(from));
	return out;
}

static char *variant(const char *from, const char *to)
{
	return variant_of(valid, from, to);
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

static void refused2(const char *from, const char *to, const char *name)
{
	char *doc = variant_of(valid2, from, to);

	CHECK(!parses(doc), name);
	free(doc);
}

static void accepted2(const char *from, const char *to, const char *name)
{
	char *doc = variant_of(valid2, from, to);

	CHECK(parses(doc), name);
	free(doc);
}

/* Schema version 2 documents; version 1 ones kept exactly as written. */
static void test_schema2(void)
{
	struct owner v1, v2, again;
	char why[256], *text, diff[256];

	CHECK(owner_parse(valid2, strlen(valid2), &v2, why, sizeof(why)) == 0 &&
	      v2.schema == 2 && v2.has_machine_id && v2.has_pid_namespace &&
	      strcmp(v2.workspace_fs_path, "/data/app") == 0, "version 2 document parses");
	text = owner_format(&v2, false);
	CHECK(text != NULL && strcmp(text, valid2) == 0,
	      "version 2 formats back to the same bytes, keys in DESIGN order");
	free(text);
	CHECK(owner_parse(valid, strlen(valid), &v1, why, sizeof(why)) == 0 &&
	      v1.schema == 1 && !v1.has_pid_namespace && !v1.has_machine_id,
	      "version 1 document still parses");
	text = owner_format(&v1, false);
	CHECK(text != NULL && strcmp(text, valid) == 0,
	      "version 1 formats back to its own 13 keys, byte for byte");
	CHECK(text != NULL && owner_parse(text, strlen(text), &again, why, sizeof(why)) == 0 &&
	      owner_equal(&v1, &again), "version 1 round-trips");
	free(text);
	CHECK(!owner_equal(&v1, &v2), "version 1 and 2 of one holder are not equal");
	owner_diff(&v1, &v2, diff, sizeof(diff));
	CHECK(strcmp(diff, "schema_version, workspace_fs, workspace_fs_path, machine_id, pid_namespace") == 0,
	      "diff names the schema and the four new keys");
	{
		char *doc = variant_of(valid2, "\"pid\":123", "\"pid\":124");
		CHECK(owner_parse(doc, strlen(doc), &again, why, sizeof(why)) == 0, "variant parses");
		owner_diff(&v2, &again, diff, sizeof(diff));
		CHECK(!owner_equal(&v2, &again) && strcmp(diff, "pid") == 0,
		      "one value differs in version 2: diff names it");
		free(doc);
	}

	refused("\"recovery_of\":null", "\"recovery_of\":null,\"machine_id\":null",
		"a version 2 key in a version 1 document refused");
	refused2(",\"pid_namespace\":\"pid:[4026531836]\"", "", "version 2 without pid_namespace refused");
	refused2(",\"machine_id\":\"3d1219c7c4c5404aaa1f6d2a48adfda4\"", "",
		 "version 2 without machine_id refused");
	refused2("\"workspace_fs\":\"fsid:91f872ef092c6674\",", "", "version 2 without workspace_fs refused");
	refused2("\"workspace_fs_path\":\"/data/app\",", "", "version 2 without workspace_fs_path refused");
	refused2("\"schema_version\":2", "\"schema_version\":3", "schema 3 refused");
	refused2("\"schema_version\":2", "\"schema_version\":\"2\"", "schema as string refused");
	refused2("\"recovery_of\":null", "\"recovery_of\":null,\"extra\":1", "extra key refused in version 2");
	accepted2("\"3d1219c7c4c5404aaa1f6d2a48adfda4\"", "null", "null machine_id accepted");
	accepted2("\"pid:[4026531836]\"", "null", "null pid_namespace accepted");
	accepted2("fsid:91f872ef092c6674", "dev:259:3", "dev:MAJ:MIN accepted");
	accepted2("\"/data/app\"", "\"/\"", "the root of a filesystem accepted as workspace_fs_path");
	refused2("\"3d1219c7c4c5404aaa1f6d2a48adfda4\"", "\"3D1219C7C4C5404AAA1F6D2A48ADFDA4\"",
		 "uppercase machine_id refused");
	refused2("\"3d1219c7c4c5404aaa1f6d2a48adfda4\"", "\"00000000000000000000000000000000\"",
		 "all-zero machine_id refused");
	refused2("\"3d1219c7c4c5404aaa1f6d2a48adfda4\"", "\"3d12\"", "short machine_id refused");
	refused2("pid:[4026531836]", "net:[4026531840]", "a namespace other than pid refused");
	refused2("pid:[4026531836]", "pid:[]", "empty namespace inode refused");
	refused2("pid:[4026531836]", "pid:[12a]", "non-numeric namespace inode refused");
	refused2("pid:[4026531836]", "pid:[99999999999]", "namespace inode above 32 bits refused");
	refused2("\"pid:[4026531836]\"", "4026531836", "namespace as a number refused");
	refused2("fsid:91f872ef092c6674", "fsid:91F872EF092C6674", "uppercase fsid refused");
	refused2("fsid:91f872ef092c6674", "fsid:91f8", "short fsid refused");
	refused2("fsid:91f872ef092c6674", "uuid:91f872ef092c6674", "unknown identity kind refused");
	refused2("fsid:91f872ef092c6674", "dev:259", "dev without minor refused");
	refused2("fsid:91f872ef092c6674", "dev:259:3:1", "dev with a third number refused");
	refused2("fsid:91f872ef092c6674", "dev::3", "dev with empty major refused");
	refused2("\"/data/app\"", "\"data/app\"", "relative workspace_fs_path refused");
	refused2("\"/data/app\"", "\"/data/../app\"", "non-canonical workspace_fs_path refused");
	refused2("\"/data/app\"", "\"/data/app/\"", "workspace_fs_path with trailing slash refused");
	refused2("\"/data/app\"", "null", "null workspace_fs_path refused");

	CHECK(owner_fs_valid("dev:0:42") && !owner_fs_valid("") && !owner_fs_valid("fsid:"),
	      "owner_fs_valid");
}

int main(void)
{
	struct owner a, b, built;
	struct wsl_error err = { 0 };
	char why[256], *text, *big, dir[] = "/tmp/wslock-unit-XXXXXX", ws[PATH_MAX];
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
	refused("\"schema_version\":1", "\"schema_version\":2",
		"schema 2 without the version 2 keys refused");
	refused("\"schema_version\":1", "\"schema_version\":0", "schema 0 refused");
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

	test_schema2();

	CHECK(mkdtemp(dir) != NULL && realpath(dir, ws) != NULL, "a workspace directory");
	CHECK(owner_build(&built, ws, getpid(), "unit test", NULL, NULL, &err) == 0,
	      "owner_build for this process");
	CHECK(built.schema == OWNER_SCHEMA && built.workspace_fs[0] != '\0' &&
	      built.workspace_fs_path[0] == '/' && built.has_pid_namespace,
	      "owner_build writes version 2 with the workspace's identity");
	text = owner_format(&built, false);
	CHECK(text != NULL && owner_parse(text, strlen(text), &b, why, sizeof(why)) == 0 &&
	      owner_equal(&built, &b), "a built document round-trips");
	CHECK(built.policy == IDENTITY_PID_START_BOOT, "built with pid-start-boot here");
	free(text);
	CHECK(owner_build(&built, ws, getpid(), "", NULL, NULL, &err) != 0 &&
	      err.code == WSL_USAGE, "empty purpose refused by owner_build");
	wsl_error_clear(&err);
	CHECK(owner_build(&built, "/srv/app/", getpid(), "x", NULL, NULL, &err) != 0,
	      "non-canonical workspace refused by owner_build");
	wsl_error_clear(&err);
	{
		char gone[PATH_MAX + 8];
		snprintf(gone, sizeof(gone), "%s/gone", ws);
		CHECK(owner_build(&built, gone, getpid(), "x", NULL, NULL, &err) != 0 &&
		      err.code == WSL_NO_WORKSPACE, "a missing workspace refused by owner_build");
		wsl_error_clear(&err);
	}
	rmdir(ws);
	return tap_done();
}
