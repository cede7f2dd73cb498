/* test_error.c - the error record: facts as fields, and messages built
 * around an earlier message (wsl_error_prefix, the lease-lost message). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "registry.h"
#include "tap.h"

static void test_fields(void)
{
	struct wsl_error err = { 0 };

	wsl_error_errno(&err, WSL_IO, ENOENT, "cannot open %s", "/x/owner.json");
	CHECK(err.code == WSL_IO && err.sys_errno == ENOENT,
	      "wsl_error_errno records the OS errno as a field");
	CHECK(strcmp(err.message, "cannot open /x/owner.json: No such file or directory") == 0,
	      "wsl_error_errno appends strerror");
	err.outcome_unknown = true;
	wsl_error_set(&err, WSL_BUSY, "busy");
	CHECK(err.sys_errno == 0 && !err.outcome_unknown,
	      "wsl_error_set starts a new failure: no errno, no flags");
	wsl_error_clear(&err);
}

static void test_prefix(void)
{
	struct wsl_error err = { 0 };
	char want[sizeof(err.message)];
	size_t i;

	wsl_error_errno(&err, WSL_IO, ECONNREFUSED, "etcd /v3/kv/range");
	err.outcome_unknown = true;
	wsl_error_prefix(&err, WSL_BACKEND_UNAVAILABLE, "etcd at %s is not reachable",
			 "http://127.0.0.1:1");
	CHECK(strcmp(err.message, "etcd at http://127.0.0.1:1 is not reachable: etcd /v3/kv/range: Connection refused") == 0,
	      "wsl_error_prefix puts the context before the old message");
	CHECK(err.code == WSL_BACKEND_UNAVAILABLE && err.sys_errno == ECONNREFUSED &&
	      err.outcome_unknown, "wsl_error_prefix keeps errno and flags");
	wsl_error_prefix(&err, WSL_OK, "again");
	CHECK(err.code == WSL_BACKEND_UNAVAILABLE, "WSL_OK keeps the code");

	/* A message that fills the record: the result is cut, never garbled. */
	for (i = 0; i < sizeof(err.message) - 1; i++)
		err.message[i] = (char)('a' + i % 26);
	err.message[sizeof(err.message) - 1] = '\0';
	wsl_error_prefix(&err, WSL_OK, "context");
	snprintf(want, sizeof(want), "context: %s", "abcdefghijklmnopqrstuvwxyz");
	CHECK(strlen(err.message) == sizeof(err.message) - 1 &&
	      strncmp(err.message, want, strlen(want)) == 0,
	      "a long message is cut at the end, its start intact");
	wsl_error_clear(&err);
}

static void test_lease_lost(void)
{
	struct wsl_error err = { 0 };

	wsl_error_set(&err, WSL_BACKEND_UNAVAILABLE,
		      "no etcd endpoint could serve /v3/lease/keepalive: 127.0.0.1:2379: connection refused");
	registry_lease_lost(&err, "/work/ws");
	CHECK(err.code == WSL_OWNERSHIP_LOST, "an unrenewable lease is lost ownership");
	CHECK(strcmp(err.message, "the lease of /work/ws could not be renewed before its deadline: no etcd endpoint could serve /v3/lease/keepalive: 127.0.0.1:2379: connection refused") == 0,
	      "the lease-lost message says why, whole and in order");
	wsl_error_clear(&err);

	wsl_error_set(&err, WSL_OWNERSHIP_LOST, "the lease of /work/ws expired");
	registry_lease_lost(&err, "/work/ws");
	CHECK(strcmp(err.message, "the lease of /work/ws expired") == 0,
	      "an expired lease keeps its own message");
	wsl_error_clear(&err);
}

int main(void)
{
	test_fields();
	test_prefix();
	test_lease_lost();
	return tap_done();
}
