/* test_etcd.c - the etcd gateway client against a real etcd and a fake one.
 *
 *   WSLOCK_ETCD_ENDPOINTS=$(tests/etcd/cluster.sh start DIR) tests/unit/test_etcd
 *
 * Without WSLOCK_ETCD_ENDPOINTS only the offline tests run (argument checks,
 * prefix ends, base64, a fake gateway on loopback) and the rest is skipped.
 * With a three-member cluster, tests/etcd/three_node.sh also sets
 * WSLOCK_ETCD_KILL_FOLLOWER, WSLOCK_ETCD_REVIVE_FOLLOWER and
 * WSLOCK_ETCD_KILL_LEADER to shell commands that do just that; the client's
 * endpoint list then starts with that follower, followed by the leader.
 *
 * Output is TAP-like: "ok N - what", "not ok N - what" with "# " details,
 * and a last line "P passed, F failed"; the exit status is 1 on any failure.
 */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crypto.h"
#include "error.h"
#include "etcd.h"

#define TIMEOUT_MS 3000

static int n_tests, n_passed, n_failed;
static char prefix[96];		/* every key of this run starts with it */
static size_t prefix_len;

static void ok(bool cond, const struct wsl_error *err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void ok(bool cond, const struct wsl_error *err, const char *fmt, ...)
{
	va_list ap;

	n_tests++;
	printf("%sok %d - ", cond ? "" : "not ", n_tests);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (cond) {
		n_passed++;
	} else {
		n_failed++;
		if (err != NULL && err->code != WSL_OK)
			printf("#   %s: %s\n", wsl_code_name(err->code), err->message);
	}
	fflush(stdout);
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* This run's key for name: prefix + name. */
static size_t key(char *out, size_t cap, const char *name)
{
	return (size_t)snprintf(out, cap, "%s%s", prefix, name);
}

static struct etcd_client *client(const char *endpoints, long timeout_ms)
{
	struct wsl_error err = { 0 };
	struct etcd_client *c;

	if (etcd_open(&c, endpoints, timeout_ms, &err) < 0) {
		fprintf(stderr, "test_etcd: etcd_open %s: %s\n", endpoints,
			err.message);
		exit(1);
	}
	return c;
}

static int put(struct etcd_client *c, const char *k, size_t kl, const char *v,
	       size_t vl, long long lease, struct wsl_error *err)
{
	struct etcd_op op = { .type = ETCD_OP_PUT, .key = k, .key_len = kl,
			      .value = v, .value_len = vl, .lease = lease };
	struct etcd_txn t = { .success = &op, .n_success = 1 };
	bool won;

	return etcd_txn(c, &t, &won, NULL, err);
}

/* Reads one key: 1 found (*kv filled, free its key and value), 0 absent,
 * -1 error. */
static int get(struct etcd_client *c, const char *k, size_t kl,
	       struct etcd_kv *kv, struct wsl_error *err)
{
	struct etcd_kv *kvs;
	size_t n;

	memset(kv, 0, sizeof(*kv));
	if (etcd_range(c, k, kl, NULL, 0, 0, &kvs, &n, NULL, err) < 0)
		return -1;
	if (n == 0)
		return 0;
	*kv = kvs[0];
	kvs[0].key = kvs[0].value = NULL;
	etcd_kvs_free(kvs, n);
	return 1;
}

static void kv_free(struct etcd_kv *kv)
{
	free(kv->key);
	free(kv->value);
	memset(kv, 0, sizeof(*kv));
}

/* ---- offline --------------------------------------------------------- */

static void test_offline(void)
{
	struct wsl_error err = { 0 };
	struct etcd_client *c = NULL;
	char out[8], *dec;
	size_t n, dec_len;
	char *enc;
	int rc;

	rc = etcd_open(&c, "", 1000, &err);
	ok(rc < 0 && c == NULL && err.code == WSL_USAGE, NULL,
	   "etcd_open rejects an empty endpoint list");
	wsl_error_clear(&err);
	rc = etcd_open(&c, "http://a:1,ftp://b:2", 1000, &err);
	ok(rc < 0 && err.code == WSL_USAGE && strstr(err.message, "ftp://b:2"),
	   &err, "etcd_open rejects a non-http endpoint and names it");
	wsl_error_clear(&err);
	rc = etcd_open(&c, "http://a:1,,http://b:2", 1000, &err);
	ok(rc < 0 && err.code == WSL_USAGE, NULL,
	   "etcd_open rejects an empty item");
	wsl_error_clear(&err);
	rc = etcd_open(&c, "http://", 1000, &err);
	ok(rc < 0 && err.code == WSL_USAGE, NULL, "etcd_open rejects a url without host");
	wsl_error_clear(&err);
	rc = etcd_open(&c, " http://a:1/ , https://b:2//", 1000, &err);
	ok(rc == 0 && strcmp(etcd_endpoint(c), "http://a:1") == 0, &err,
	   "etcd_open trims spaces and trailing slashes");
	etcd_close(c);

	n = etcd_prefix_end("ab", 2, out);
	ok(n == 2 && memcmp(out, "ac", 2) == 0, NULL, "prefix end of \"ab\" is \"ac\"");
	n = etcd_prefix_end("a\xff\xff", 3, out);
	ok(n == 1 && out[0] == 'b', NULL, "prefix end drops trailing 0xff bytes");
	n = etcd_prefix_end("\xff", 1, out);
	ok(n == 1 && out[0] == '\0', NULL, "prefix end of all 0xff is \"\\0\"");
	n = etcd_prefix_end("/a/", 3, out);
	ok(n == 3 && memcmp(out, "/a0", 3) == 0, NULL, "prefix end of \"/a/\" is \"/a0\"");

	enc = crypto_base64_encode("a\0\xff", 3);
	ok(enc && strcmp(enc, "YQD/") == 0, NULL, "base64 of binary bytes");
	rc = crypto_base64_decode(enc, strlen(enc), &dec, &dec_len);
	ok(rc == 0 && dec_len == 3 && memcmp(dec, "a\0\xff", 3) == 0 &&
	   dec[3] == '\0', NULL, "base64 round trip, NUL-terminated");
	free(enc);
	free(dec);
	rc = crypto_base64_decode("", 0, &dec, &dec_len);
	ok(rc == 0 && dec_len == 0 && dec[0] == '\0', NULL, "base64 of nothing");
	free(dec);
	ok(crypto_base64_decode("YQ", 2, &dec, &dec_len) < 0 && dec == NULL &&
	   crypto_base64_decode("YQ=!", 4, &dec, &dec_len) < 0 &&
	   crypto_base64_decode("Y===", 4, &dec, &dec_len) < 0 &&
	   crypto_base64_decode("YQ==YQ==", 8, &dec, &dec_len) < 0, NULL,
	   "base64 rejects short, invalid and trailing input");
}

/* ---- a fake gateway -------------------------------------------------- */

/* A loopback port nothing listens on (bound, then closed). */
static int dead_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		perror("test_etcd: dead_port");
		exit(1);
	}
	close(fd);
	return ntohs(a.sin_port);
}

struct fake {
	pid_t pid;
	char url[64];
};

/*
 * Starts a process serving every connection on a loopback port with one
 * canned HTTP response: status line and body (huge: 17 MiB of spaces
 * instead; stall: never answer).
 */
static void fake_start(struct fake *f, const char *status, const char *body,
		       bool huge, bool stall)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char req[8192], head[256];
	static char spaces[65536];
	size_t i;
	int fd;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(lfd, 8) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &len) < 0) {
		perror("test_etcd: fake server");
		exit(1);
	}
	snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d", ntohs(a.sin_port));
	fflush(stdout);
	f->pid = fork();
	if (f->pid < 0) {
		perror("test_etcd: fork");
		exit(1);
	}
	if (f->pid > 0) {
		close(lfd);
		return;
	}
	signal(SIGPIPE, SIG_IGN);
	memset(spaces, ' ', sizeof(spaces));
	for (;;) {
		fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			continue;
		/* one read takes the small requests of these tests */
		if (read(fd, req, sizeof(req)) < 0)
			_exit(1);
		if (stall) {
			pause();
			_exit(0);
		}
		if (huge) {
			snprintf(head, sizeof(head),
				 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				 "Content-Length: %u\r\nConnection: close\r\n\r\n",
				 17u << 20);
			if (write(fd, head, strlen(head)) < 0)
				_exit(1);
			for (i = 0; i < (17u << 20) / sizeof(spaces); i++)
				if (write(fd, spaces, sizeof(spaces)) < 0)
					break;
		} else {
			snprintf(head, sizeof(head),
				 "HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
				 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
				 status, strlen(body));
			if (write(fd, head, strlen(head)) < 0 ||
			    write(fd, body, strlen(body)) < 0)
				_exit(1);
		}
		close(fd);
	}
}

static void fake_stop(struct fake *f)
{
	kill(f->pid, SIGKILL);
	waitpid(f->pid, NULL, 0);
}

static void test_fake(const char *real)
{
	struct wsl_error err = { 0 };
	struct etcd_client *c;
	struct etcd_kv *kvs;
	struct fake f;
	char eps[512], k[160];
	size_t n, kl;
	long long t0;
	int rc;

	fake_start(&f, "200 OK",
		   "{\"header\":{\"revision\":\"5\"},\"kvs\":[{\"key\":\"!!!!\","
		   "\"value\":\"aGk=\"}],\"count\":\"1\"}", false, false);
	c = client(f.url, TIMEOUT_MS);
	rc = etcd_range(c, "k", 1, NULL, 0, 0, &kvs, &n, NULL, &err);
	ok(rc < 0 && err.code == WSL_IO && strstr(err.message, "malformed") &&
	   kvs == NULL && n == 0, &err, "fake: bad base64 in a key is WSL_IO");
	etcd_close(c);
	fake_stop(&f);
	wsl_error_clear(&err);

	fake_start(&f, "200 OK",
		   "{\"header\":{\"revision\":\"5\"},\"count\":true}", false, false);
	c = client(f.url, TIMEOUT_MS);
	rc = etcd_range(c, "k", 1, NULL, 0, 0, &kvs, &n, NULL, &err);
	ok(rc < 0 && err.code == WSL_IO, &err, "fake: a bool count is WSL_IO");
	etcd_close(c);
	fake_stop(&f);
	wsl_error_clear(&err);

	fake_start(&f, "200 OK",
		   "{\"header\":{\"revision\":\"99999999999999999999\"}}", false, false);
	c = client(f.url, TIMEOUT_MS);
	rc = etcd_range(c, "k", 1, NULL, 0, 0, &kvs, &n, NULL, &err);
	ok(rc < 0 && err.code == WSL_IO, &err, "fake: an int64 overflow is WSL_IO");
	etcd_close(c);
	fake_stop(&f);
	wsl_error_clear(&err);

	fake_start(&f, "200 OK", "{}", false, false);
	c = client(f.url, TIMEOUT_MS);
	rc = etcd_range(c, "k", 1, NULL, 0, 0, &kvs, &n, NULL, &err);
	ok(rc < 0 && err.code == WSL_IO, &err,
	   "fake: an empty object (no header) is WSL_IO, not an empty range");
	etcd_close(c);
	fake_stop(&f);
	wsl_error_clear(&err);

	fake_start(&f, "200 OK",
		   "{\"header\":{\"revision\":\"3\"},\"succeeded\":\"yes\"}",
		   false, false);
	c = client(f.url, TIMEOUT_MS);
	{
		struct etcd_txn t = { 0 };
		bool won = true;

		rc = etcd_txn(c, &t, &won, NULL, &err);
		ok(rc < 0 && !won && err.code == WSL_IO, &err,
		   "fake: a string 'succeeded' is WSL_IO, not a success");
	}
	etcd_close(c);
	fake_stop(&f);
	wsl_error_clear(&err);

	fake_start(&f, "200 OK", "", true, false);
	c = client(f.url, TIMEOUT_MS);
	rc = etcd_range(c, "k", 1, NULL, 0, 0, &kvs, &n, NULL, &err);
	ok(rc < 0 && err.code == WSL_IO && strstr(err.message, "larger"), &err,
	   "fake: a 17 MiB response is refused");
	etcd_close(c);
	fake_stop(&f);
	wsl_error_clear(&err);

	fake_start(&f, "400 Bad Request",
		   "{\"error\":\"etcdserver: key is not provided\",\"message\":"
		   "\"etcdserver: key is not provided\",\"code\":3}", false, false);
	c = client(f.url, TIMEOUT_MS);
	rc = etcd_range(c, "k", 1, NULL, 0, 0, &kvs, &n, NULL, &err);
	ok(rc < 0 && err.code == WSL_IO &&
	   strstr(err.message, "key is not provided"), &err,
	   "fake: a gRPC error body is WSL_IO with etcd's message");
	etcd_close(c);
	fake_stop(&f);
	wsl_error_clear(&err);

	fake_start(&f, "200 OK",
		   "{\"result\":{\"header\":{\"revision\":\"3\"},\"ID\":\"7\","
		   "\"TTL\":\"5\"}}", false, false);
	c = client(f.url, TIMEOUT_MS);
	{
		long long ttl = 1;

		rc = etcd_lease_keepalive(c, 8, &ttl, &err);
		ok(rc < 0 && err.code == WSL_IO && ttl == 0, &err,
		   "fake: a keepalive answer for another lease is WSL_IO");
	}
	etcd_close(c);
	fake_stop(&f);
	wsl_error_clear(&err);

	fake_start(&f, "200 OK",
		   "{\"result\":{\"header\":{\"revision\":\"3\"},\"created\":true}}\n"
		   "{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":"
		   "\"etcdserver: no leader\"}}", false, false);
	c = client(f.url, TIMEOUT_MS);
	rc = etcd_wait_change(c, "k", 1, NULL, 0, 0, 2000, &err);
	ok(rc < 0 && err.code == WSL_BACKEND_UNAVAILABLE &&
	   strstr(err.message, "no leader"), &err,
	   "fake: an error ending the watch stream (as etcd sends \"no leader\") is reported, not a change");
	etcd_close(c);
	fake_stop(&f);
	wsl_error_clear(&err);

	fake_start(&f, "200 OK",
		   "{\"result\":{\"created\":true}}\n"
		   "{\"result\":{\"events\":{\"kv\":1}}}\n", false, false);
	c = client(f.url, TIMEOUT_MS);
	rc = etcd_wait_change(c, "k", 1, NULL, 0, 0, 2000, &err);
	ok(rc < 0 && err.code == WSL_IO, &err,
	   "fake: a malformed watch event is WSL_IO");
	etcd_close(c);
	fake_stop(&f);
	wsl_error_clear(&err);

	fake_start(&f, "200 OK", "", false, true);
	c = client(f.url, 500);
	t0 = now_ms();
	rc = etcd_range(c, "k", 1, NULL, 0, 0, &kvs, &n, NULL, &err);
	ok(rc < 0 && err.code == WSL_BACKEND_UNAVAILABLE &&
	   now_ms() - t0 < 2000, &err,
	   "fake: a silent server times out after the per-request timeout");
	etcd_close(c);
	wsl_error_clear(&err);

	if (real == NULL) {
		fake_stop(&f);
		return;
	}
	/* the silent server first, a real one second: a write that reached
	 * the silent one must not be resent */
	snprintf(eps, sizeof(eps), "%s,%s", f.url, real);
	c = client(eps, 500);
	kl = key(k, sizeof(k), "fake/unknown");
	rc = put(c, k, kl, "v", 1, 0, &err);
	ok(rc < 0 && err.code == WSL_BACKEND_UNAVAILABLE &&
	   strstr(err.message, "outcome unknown"), &err,
	   "fake: a put that timed out after sending is not resent elsewhere");
	wsl_error_clear(&err);
	rc = etcd_range(c, k, kl, NULL, 0, 0, &kvs, &n, NULL, &err);
	ok(rc == 0 && n == 0 && strcmp(etcd_endpoint(c), real) == 0, &err,
	   "fake: a range fails over from the silent server to the real one");
	etcd_kvs_free(kvs, n);
	etcd_close(c);
	fake_stop(&f);
	wsl_error_clear(&err);

	fake_start(&f, "503 Service Unavailable",
		   "{\"error\":\"etcdserver: no leader\",\"message\":"
		   "\"etcdserver: no leader\",\"code\":14}", false, false);
	snprintf(eps, sizeof(eps), "%s,%s", f.url, real);
	c = client(eps, TIMEOUT_MS);
	rc = put(c, k, kl, "v", 1, 0, &err);
	ok(rc == 0 && strcmp(etcd_endpoint(c), real) == 0, &err,
	   "fake: a put refused with \"no leader\" is resent to the next endpoint");
	etcd_close(c);
	fake_stop(&f);
	wsl_error_clear(&err);

	fake_start(&f, "503 Service Unavailable",
		   "{\"error\":\"etcdserver: request timed out\",\"message\":"
		   "\"etcdserver: request timed out\",\"code\":14}", false, false);
	snprintf(eps, sizeof(eps), "%s,%s", f.url, real);
	c = client(eps, TIMEOUT_MS);
	rc = put(c, k, kl, "v", 1, 0, &err);
	ok(rc < 0 && err.code == WSL_BACKEND_UNAVAILABLE &&
	   strstr(err.message, "outcome unknown") &&
	   strstr(err.message, "request timed out"), &err,
	   "fake: a put that etcd timed out is reported, outcome unknown");
	wsl_error_clear(&err);
	rc = etcd_range(c, k, kl, NULL, 0, 0, &kvs, &n, NULL, &err);
	ok(rc == 0 && n == 1, &err,
	   "fake: a range after \"request timed out\" fails over");
	etcd_kvs_free(kvs, n);
	etcd_close(c);
	fake_stop(&f);
	wsl_error_clear(&err);
}

/* ---- against etcd ---------------------------------------------------- */

static void test_roundtrip(struct etcd_client *c)
{
	static const char value[] = "owner\0doc\xff\n\"{}\"\x01";
	struct wsl_error err = { 0 };
	struct etcd_kv kv, *kvs;
	char k[160], end[160];
	long long rev = 0, rev2 = 0;
	size_t n, kl, el;
	int rc;

	kl = key(k, sizeof(k), "bin\0key");
	kl += 4;	/* snprintf stopped at the NUL: add "key" and the NUL */
	memcpy(k + kl - 4, "\0key", 4);
	rc = put(c, k, kl, value, sizeof(value) - 1, 0, &err);
	ok(rc == 0, &err, "put of a binary key and value");
	rc = get(c, k, kl, &kv, &err);
	ok(rc == 1 && kv.key_len == kl && memcmp(kv.key, k, kl) == 0 &&
	   kv.value_len == sizeof(value) - 1 &&
	   memcmp(kv.value, value, kv.value_len) == 0 &&
	   kv.value[kv.value_len] == '\0', &err,
	   "range returns the same bytes, NUL included");
	ok(kv.create_revision > 0 && kv.mod_revision == kv.create_revision &&
	   kv.version == 1 && kv.lease == 0, NULL,
	   "a new key has version 1 and create == mod revision");
	rev = kv.create_revision;
	kv_free(&kv);
	rc = put(c, k, kl, "", 0, 0, &err);
	ok(rc == 0 && get(c, k, kl, &kv, &err) == 1 && kv.value_len == 0 &&
	   kv.value[0] == '\0' && kv.create_revision == rev &&
	   kv.mod_revision > rev && kv.version == 2, &err,
	   "an empty value reads back empty; create revision kept, version 2");
	kv_free(&kv);

	kl = key(k, sizeof(k), "absent");
	rc = get(c, k, kl, &kv, &err);
	ok(rc == 0, &err, "range of an absent key gives no kvs");

	kl = key(k, sizeof(k), "list/");
	el = etcd_prefix_end(k, kl, end);
	put(c, "x", 0, "", 0, 0, &err);	/* empty key: etcd refuses */
	ok(err.code == WSL_IO && strstr(err.message, "key is not provided"),
	   &err, "etcd's own error (empty key) is WSL_IO with its message");
	wsl_error_clear(&err);
	for (int i = 0; i < 3; i++) {
		char kk[200];
		size_t kkl = (size_t)snprintf(kk, sizeof(kk), "%s%d", k, i);

		put(c, kk, kkl, "x", 1, 0, &err);
	}
	rc = etcd_range(c, k, kl, end, el, 0, &kvs, &n, &rev2, &err);
	ok(rc == 0 && n == 3 && rev2 >= kvs[2].mod_revision &&
	   kvs[0].key[kl] == '0' && kvs[2].key[kl] == '2', &err,
	   "prefix range returns the keys in order with the header revision");
	etcd_kvs_free(kvs, n);
	rc = etcd_range(c, k, kl, end, el, 1, &kvs, &n, NULL, &err);
	ok(rc == 0 && n == 1, &err, "range limit 1 returns one key");
	etcd_kvs_free(kvs, n);
}

/* Child of test_contenders: tries to create each of rounds keys; exits
 * with the number it won, 100 and more on errors. */
static void contender(const char *endpoints, int go_fd, const char *me, int rounds)
{
	struct wsl_error err = { 0 };
	struct etcd_client *c = client(endpoints, TIMEOUT_MS);
	char k[160], name[32], b;
	int wins = 0;

	if (read(go_fd, &b, 1) != 1)
		_exit(100);
	for (int i = 0; i < rounds; i++) {
		size_t kl;
		struct etcd_compare cmp;
		struct etcd_op op;
		struct etcd_txn t = { .compare = &cmp, .n_compare = 1,
				      .success = &op, .n_success = 1 };
		bool won;

		snprintf(name, sizeof(name), "race/%d", i);
		kl = key(k, sizeof(k), name);
		cmp = (struct etcd_compare){ .target = ETCD_TARGET_CREATE,
					     .cmp = ETCD_CMP_EQUAL, .key = k,
					     .key_len = kl, .number = 0 };
		op = (struct etcd_op){ .type = ETCD_OP_PUT, .key = k,
				       .key_len = kl, .value = me,
				       .value_len = strlen(me) };
		if (etcd_txn(c, &t, &won, NULL, &err) < 0) {
			fprintf(stderr, "contender %s: %s\n", me, err.message);
			etcd_close(c);
			_exit(101);
		}
		wins += won;
	}
	etcd_close(c);
	_exit(wins);
}

static void test_contenders(struct etcd_client *c, const char *endpoints)
{
	enum { ROUNDS = 20 };
	static const char *const names[2] = { "contender-a", "contender-b" };
	struct wsl_error err = { 0 };
	struct etcd_kv kv;
	int go[2], st, wins[2] = { -1, -1 }, held[2] = { 0, 0 };
	pid_t pid[2];
	char k[160], name[32];
	bool consistent = true;

	if (pipe(go) < 0) {
		perror("test_etcd: pipe");
		exit(1);
	}
	fflush(stdout);
	for (int i = 0; i < 2; i++) {
		pid[i] = fork();
		if (pid[i] == 0) {
			close(go[1]);
			contender(endpoints, go[0], names[i], ROUNDS);
		}
	}
	close(go[0]);
	if (write(go[1], "gg", 2) != 2)
		perror("test_etcd: write");
	close(go[1]);
	for (int i = 0; i < 2; i++) {
		if (waitpid(pid[i], &st, 0) == pid[i] && WIFEXITED(st))
			wins[i] = WEXITSTATUS(st);
	}
	for (int i = 0; i < ROUNDS; i++) {
		snprintf(name, sizeof(name), "race/%d", i);
		if (get(c, k, key(k, sizeof(k), name), &kv, &err) != 1) {
			consistent = false;
			continue;
		}
		if (kv.value_len == strlen(names[0]) &&
		    memcmp(kv.value, names[0], kv.value_len) == 0)
			held[0]++;
		else if (kv.value_len == strlen(names[1]) &&
			 memcmp(kv.value, names[1], kv.value_len) == 0)
			held[1]++;
		else
			consistent = false;
		if (kv.version != 1)
			consistent = false;
		kv_free(&kv);
	}
	ok(wins[0] >= 0 && wins[0] <= ROUNDS && wins[1] >= 0 &&
	   wins[1] <= ROUNDS && wins[0] + wins[1] == ROUNDS && consistent &&
	   held[0] == wins[0] && held[1] == wins[1], &err,
	   "two racing processes, create-if-absent: exactly one wins each of %d keys (a %d, b %d)",
	   ROUNDS, wins[0], wins[1]);
}

static void test_txn(struct etcd_client *c)
{
	static const char owner[] = "{\"token\":\"abc\"}\0tail";
	struct wsl_error err = { 0 };
	struct etcd_txn_result res;
	struct etcd_kv kv;
	char k[160], k2[160], pfx[160], pend[160];
	size_t kl, k2l, pl, pel;
	long long fence;
	bool won;
	int rc;

	/* create-if-absent with the holder read back on failure */
	kl = key(k, sizeof(k), "ws/a");
	{
		struct etcd_compare cmp = { .target = ETCD_TARGET_CREATE,
					    .cmp = ETCD_CMP_EQUAL, .key = k,
					    .key_len = kl };
		struct etcd_op put_op = { .type = ETCD_OP_PUT, .key = k,
					  .key_len = kl, .value = owner,
					  .value_len = sizeof(owner) - 1 };
		struct etcd_op get_op = { .type = ETCD_OP_RANGE, .key = k,
					  .key_len = kl };
		struct etcd_txn t = { &cmp, 1, &put_op, 1, &get_op, 1 };

		rc = etcd_txn(c, &t, &won, &res, &err);
		ok(rc == 0 && won && res.n_ops == 1 &&
		   res.ops[0].type == ETCD_OP_PUT && res.revision > 0, &err,
		   "txn create-if-absent succeeds on a free key");
		fence = res.revision;
		etcd_txn_result_free(&res);
		rc = etcd_txn(c, &t, &won, &res, &err);
		ok(rc == 0 && !won && res.n_ops == 1 &&
		   res.ops[0].type == ETCD_OP_RANGE && res.ops[0].n_kvs == 1 &&
		   res.ops[0].count == 1 &&
		   res.ops[0].kvs[0].value_len == sizeof(owner) - 1 &&
		   memcmp(res.ops[0].kvs[0].value, owner, sizeof(owner) - 1) == 0 &&
		   res.ops[0].kvs[0].create_revision == fence, &err,
		   "the second create fails and its failure range returns the holder and its create revision");
		etcd_txn_result_free(&res);
	}

	/* prefix compare: no key under ws/a/ (descendants), and none at the
	 * ancestor ws */
	k2l = key(k2, sizeof(k2), "ws");
	pl = key(pfx, sizeof(pfx), "ws/b/");
	pel = etcd_prefix_end(pfx, pl, pend);
	{
		struct etcd_compare cmp[2] = {
			{ .target = ETCD_TARGET_CREATE, .cmp = ETCD_CMP_EQUAL,
			  .key = k2, .key_len = k2l },
			{ .target = ETCD_TARGET_CREATE, .cmp = ETCD_CMP_EQUAL,
			  .key = pfx, .key_len = pl, .range_end = pend,
			  .range_end_len = pel },
		};
		struct etcd_op put_op = { .type = ETCD_OP_PUT, .key = pfx,
					  .key_len = pl - 1, .value = "b",
					  .value_len = 1 };
		struct etcd_txn t = { cmp, 2, &put_op, 1, NULL, 0 };
		char sub[200];
		size_t subl = (size_t)snprintf(sub, sizeof(sub), "%sc/d", pfx);

		rc = etcd_txn(c, &t, &won, NULL, &err);
		ok(rc == 0 && won, &err,
		   "txn: empty prefix range compares as create revision 0");
		/* the put above took ws/b itself; now a descendant appears */
		put(c, sub, subl, "x", 1, 0, &err);
		rc = etcd_txn(c, &t, &won, NULL, &err);
		ok(rc == 0 && !won, &err,
		   "txn: a key under the prefix makes the prefix compare fail");
		{
			struct etcd_txn_result r2;
			struct etcd_op del = { .type = ETCD_OP_DELETE, .key = pfx,
					       .key_len = pl, .range_end = pend,
					       .range_end_len = pel };
			struct etcd_txn td = { NULL, 0, &del, 1, NULL, 0 };

			rc = etcd_txn(c, &td, &won, &r2, &err);
			ok(rc == 0 && won && r2.n_ops == 1 && r2.ops[0].count == 1,
			   &err, "txn: delete of a prefix range reports 1 deleted");
			etcd_txn_result_free(&r2);
		}
		/* a sibling "ws/bb" is not under "ws/b/" */
		subl = (size_t)snprintf(sub, sizeof(sub), "%.*sb", (int)(pl - 1), pfx);
		put(c, sub, subl, "x", 1, 0, &err);
		rc = etcd_txn(c, &t, &won, NULL, &err);
		ok(rc == 0 && won, &err,
		   "txn: the prefix compare holds again once the range is empty (sibling ws/bb ignored)");
	}

	/* value and create revision compares: release only with the exact
	 * bytes and the right fencing token */
	{
		struct etcd_compare cmp[2] = {
			{ .target = ETCD_TARGET_VALUE, .cmp = ETCD_CMP_EQUAL,
			  .key = k, .key_len = kl, .value = owner,
			  .value_len = sizeof(owner) - 2 },
			{ .target = ETCD_TARGET_CREATE, .cmp = ETCD_CMP_EQUAL,
			  .key = k, .key_len = kl, .number = fence },
		};
		struct etcd_op del = { .type = ETCD_OP_DELETE, .key = k,
				       .key_len = kl };
		struct etcd_txn t = { cmp, 2, &del, 1, NULL, 0 };

		rc = etcd_txn(c, &t, &won, NULL, &err);
		ok(rc == 0 && !won, &err,
		   "txn: a value compare with one byte missing fails");
		cmp[0].value_len = sizeof(owner) - 1;
		cmp[1].number = fence + 1;
		rc = etcd_txn(c, &t, &won, NULL, &err);
		ok(rc == 0 && !won, &err,
		   "txn: the exact value with a wrong create revision fails");
		cmp[1].number = fence;
		rc = etcd_txn(c, &t, &won, &res, &err);
		ok(rc == 0 && won && res.ops[0].count == 1, &err,
		   "txn: the exact value and create revision delete the key");
		etcd_txn_result_free(&res);
		rc = etcd_txn(c, &t, &won, NULL, &err);
		ok(rc == 0 && !won, &err,
		   "txn: a value compare on an absent key fails");
	}
	rc = get(c, k, kl, &kv, &err);
	ok(rc == 0, &err, "the released key is gone");
}

static void test_lease(struct etcd_client *c)
{
	struct wsl_error err = { 0 };
	struct etcd_kv kv;
	long long id = 0, ttl = 0, left = 0, t0;
	char k[160];
	size_t kl;
	int rc;

	rc = etcd_lease_grant(c, 10, &id, &ttl, &err);
	ok(rc == 0 && id != 0 && ttl == 10, &err, "lease grant of 10 s");
	kl = key(k, sizeof(k), "leased");
	rc = put(c, k, kl, "held", 4, id, &err);
	ok(rc == 0 && get(c, k, kl, &kv, &err) == 1 && kv.lease == id, &err,
	   "a put with the lease binds the key to it");
	kv_free(&kv);
	rc = etcd_lease_keepalive(c, id, &left, &err);
	ok(rc == 0 && left == 10, &err, "keepalive renews to the full TTL");
	rc = etcd_lease_revoke(c, id, &err);
	ok(rc == 0, &err, "lease revoke");
	rc = get(c, k, kl, &kv, &err);
	ok(rc == 0, &err, "the key disappears with its revoked lease");
	left = 99;
	rc = etcd_lease_keepalive(c, id, &left, &err);
	ok(rc == 0 && left == 0, &err, "keepalive of a revoked lease says 0");
	rc = etcd_lease_revoke(c, id, &err);
	ok(rc == 0, &err, "revoking a revoked lease succeeds (same end state)");
	rc = put(c, k, kl, "held", 4, id, &err);
	ok(rc < 0 && err.code == WSL_IO && strstr(err.message, "lease not found"),
	   &err, "a put with a revoked lease is WSL_IO \"lease not found\"");
	wsl_error_clear(&err);

	rc = etcd_lease_grant(c, 0, &id, NULL, &err);
	ok(rc < 0 && err.code == WSL_INTERNAL, NULL, "lease grant refuses ttl 0");
	wsl_error_clear(&err);
	rc = etcd_lease_grant(c, 1, &id, &ttl, &err);
	ok(rc == 0 && ttl >= 1, &err,
	   "lease grant of 1 s is granted as %lld s", ttl);
	put(c, k, kl, "held", 4, id, &err);
	t0 = now_ms();
	while ((rc = get(c, k, kl, &kv, &err)) == 1 && now_ms() - t0 < 10000) {
		kv_free(&kv);
		sleep_ms(100);
	}
	ok(rc == 0 && now_ms() - t0 >= ttl * 1000 - 1000, &err,
	   "an unrenewed lease expires and takes its key (after %lld ms)",
	   now_ms() - t0);
	rc = etcd_lease_keepalive(c, id, &left, &err);
	ok(rc == 0 && left == 0, &err, "keepalive of an expired lease says 0");
}

static void test_failover(const char *real)
{
	struct wsl_error err = { 0 };
	struct etcd_client *c;
	struct etcd_kv *kvs;
	char eps[512], dead1[64], dead2[64], k[160];
	size_t n, kl;
	long long t0;
	int rc;

	snprintf(dead1, sizeof(dead1), "http://127.0.0.1:%d", dead_port());
	snprintf(dead2, sizeof(dead2), "http://127.0.0.1:%d", dead_port());
	snprintf(eps, sizeof(eps), "%s,%s", dead1, real);
	c = client(eps, TIMEOUT_MS);
	kl = key(k, sizeof(k), "failover");
	rc = put(c, k, kl, "v", 1, 0, &err);
	ok(rc == 0 && strcmp(etcd_endpoint(c), real) == 0, &err,
	   "failover: a put skips a dead first endpoint (nothing was sent)");
	rc = etcd_range(c, k, kl, NULL, 0, 0, &kvs, &n, NULL, &err);
	ok(rc == 0 && n == 1 && strcmp(etcd_endpoint(c), real) == 0, &err,
	   "failover: the endpoint that worked is used next");
	etcd_kvs_free(kvs, n);
	etcd_close(c);

	snprintf(eps, sizeof(eps), "%s,%s", dead1, dead2);
	c = client(eps, TIMEOUT_MS);
	t0 = now_ms();
	rc = etcd_range(c, k, kl, NULL, 0, 0, &kvs, &n, NULL, &err);
	ok(rc < 0 && err.code == WSL_BACKEND_UNAVAILABLE &&
	   strstr(err.message, dead1) && strstr(err.message, dead2) &&
	   strstr(err.message, "onnect") && now_ms() - t0 < 2000, &err,
	   "all endpoints dead: WSL_BACKEND_UNAVAILABLE naming each with curl's error");
	printf("#   %s\n", err.message);
	wsl_error_clear(&err);
	rc = etcd_wait_change(c, k, kl, NULL, 0, 0, 1000, &err);
	ok(rc < 0 && err.code == WSL_BACKEND_UNAVAILABLE, &err,
	   "all endpoints dead: wait_change fails too");
	wsl_error_clear(&err);
	etcd_close(c);
}

static void test_wait(struct etcd_client *c, const char *endpoints)
{
	struct wsl_error err = { 0 };
	struct etcd_kv *kvs;
	char k[160], other[160];
	size_t kl, ol, n;
	long long rev = 0, t0, el;
	pid_t pid;
	int rc;

	kl = key(k, sizeof(k), "wait/key");
	put(c, k, kl, "v", 1, 0, &err);
	etcd_range(c, k, kl, NULL, 0, 0, &kvs, &n, &rev, &err);
	etcd_kvs_free(kvs, n);

	t0 = now_ms();
	rc = etcd_wait_change(c, k, kl, NULL, 0, rev, 600, &err);
	el = now_ms() - t0;
	ok(rc == 0 && el >= 550 && el < 2000, &err,
	   "wait_change times out when nothing happens (%lld ms for 600)", el);

	ol = key(other, sizeof(other), "wait/other");
	put(c, other, ol, "v", 1, 0, &err);
	rc = etcd_wait_change(c, k, kl, NULL, 0, rev, 300, &err);
	ok(rc == 0, &err, "wait_change ignores changes to other keys");

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct etcd_client *c2 = client(endpoints, TIMEOUT_MS);
		struct etcd_op del = { .type = ETCD_OP_DELETE, .key = k,
				       .key_len = kl };
		struct etcd_txn t = { NULL, 0, &del, 1, NULL, 0 };
		bool won;
		int r;

		sleep_ms(300);
		r = etcd_txn(c2, &t, &won, NULL, &err);
		etcd_close(c2);
		_exit(r == 0 ? 0 : 1);
	}
	t0 = now_ms();
	rc = etcd_wait_change(c, k, kl, NULL, 0, rev, 5000, &err);
	el = now_ms() - t0;
	waitpid(pid, NULL, 0);
	ok(rc == 1 && el >= 250 && el < 3000, &err,
	   "wait_change returns on a delete by another process (%lld ms)", el);
	rc = etcd_wait_change(c, k, kl, NULL, 0, rev, 2000, &err);
	ok(rc == 1, &err,
	   "wait_change after an old revision returns at once (history)");

	/* prefix watch */
	kl = key(k, sizeof(k), "wait/");
	{
		char end[160];
		size_t el2 = etcd_prefix_end(k, kl, end);

		etcd_range(c, k, kl, end, el2, 0, &kvs, &n, &rev, &err);
		etcd_kvs_free(kvs, n);
		put(c, other, ol, "w", 1, 0, &err);
		rc = etcd_wait_change(c, k, kl, end, el2, rev, 2000, &err);
		ok(rc == 1, &err, "wait_change over a prefix sees a put below it");
	}
}

/* Several keys on one stream, with progress notifications asked for: a
 * change to either one counts, a change elsewhere does not. */
static void test_wait_changes(struct etcd_client *c)
{
	struct wsl_error err = { 0 };
	struct etcd_kv *kvs;
	char a[160], b[160], other[160];
	size_t al, bl, ol, n;
	long long rev = 0;
	int rc;

	al = key(a, sizeof(a), "waits/a");
	bl = key(b, sizeof(b), "waits/b");
	ol = key(other, sizeof(other), "waits/other");
	put(c, a, al, "v", 1, 0, &err);
	etcd_range(c, a, al, NULL, 0, 0, &kvs, &n, &rev, &err);
	etcd_kvs_free(kvs, n);
	{
		struct etcd_watch_range r[2] = { { a, al, NULL, 0 }, { b, bl, NULL, 0 } };

		put(c, other, ol, "v", 1, 0, &err);
		rc = etcd_wait_changes(c, r, 2, rev, 300, true, &err);
		ok(rc == 0, &err, "wait_changes ignores changes to other keys");
		put(c, b, bl, "v", 1, 0, &err);
		rc = etcd_wait_changes(c, r, 2, rev, 2000, true, &err);
		ok(rc == 1, &err, "wait_changes sees a put of its second key");
		etcd_range(c, b, bl, NULL, 0, 0, &kvs, &n, &rev, &err);
		etcd_kvs_free(kvs, n);
		put(c, a, al, "w", 1, 0, &err);
		rc = etcd_wait_changes(c, r, 2, rev, 2000, true, &err);
		ok(rc == 1, &err, "wait_changes sees a put of its first key");
		rc = etcd_wait_changes(c, r, 0, rev, 2000, true, &err);
		ok(rc == -1 && err.code == WSL_INTERNAL, &err, "wait_changes of no key is refused");
		wsl_error_clear(&err);
	}
}

/* Compacts the store to its current revision with etcdctl; then a watch
 * from an older revision is canceled, which wait_change reports as a
 * change. */
static void test_compacted(struct etcd_client *c, const char *endpoints)
{
	struct wsl_error err = { 0 };
	struct etcd_kv *kvs;
	char cmd[1024], k[160];
	long long rev = 0;
	size_t kl, n;
	int rc;

	if (system("command -v etcdctl >/dev/null 2>&1") != 0) {
		printf("ok %d - # SKIP compaction: etcdctl not found\n", ++n_tests);
		n_passed++;
		return;
	}
	kl = key(k, sizeof(k), "compact");
	put(c, k, kl, "1", 1, 0, &err);
	etcd_range(c, k, kl, NULL, 0, 0, &kvs, &n, &rev, &err);
	etcd_kvs_free(kvs, n);
	put(c, k, kl, "2", 1, 0, &err);
	put(c, k, kl, "3", 1, 0, &err);
	snprintf(cmd, sizeof(cmd),
		 "ETCDCTL_API=3 etcdctl --endpoints='%s' compact %lld >/dev/null",
		 endpoints, rev + 2);
	rc = system(cmd);
	ok(rc == 0, NULL, "etcdctl compact %lld", rev + 2);
	rc = etcd_wait_change(c, k, kl, NULL, 0, rev, 2000, &err);
	ok(rc == 1, &err,
	   "wait_change from a compacted revision reports a (possible) change");
}

/* Repeats a put, range, txn and lease round until it succeeds or 15 s pass;
 * returns the attempts taken (0: never). */
static int survive(struct etcd_client *c, const char *what, long long *ms)
{
	struct wsl_error err = { 0 };
	struct etcd_kv kv;
	long long id, left, t0 = now_ms();
	char k[160];
	size_t kl = key(k, sizeof(k), what);
	int attempt = 0;

	while (now_ms() - t0 < 15000) {
		attempt++;
		wsl_error_clear(&err);
		if (put(c, k, kl, what, strlen(what), 0, &err) == 0 &&
		    get(c, k, kl, &kv, &err) == 1 &&
		    etcd_lease_grant(c, 5, &id, NULL, &err) == 0 &&
		    etcd_lease_keepalive(c, id, &left, &err) == 0 && left > 0 &&
		    etcd_lease_revoke(c, id, &err) == 0) {
			kv_free(&kv);
			*ms = now_ms() - t0;
			return attempt;
		}
		printf("#   attempt %d: %s: %s\n", attempt,
		       wsl_code_name(err.code), err.message);
		if (err.code != WSL_BACKEND_UNAVAILABLE)
			return 0;
		sleep_ms(200);
	}
	return 0;
}

static void test_members(const char *endpoints)
{
	const char *kill_f = getenv("WSLOCK_ETCD_KILL_FOLLOWER");
	const char *revive_f = getenv("WSLOCK_ETCD_REVIVE_FOLLOWER");
	const char *kill_l = getenv("WSLOCK_ETCD_KILL_LEADER");
	struct etcd_client *c;
	long long ms = 0;
	int tries;

	if (kill_f == NULL || revive_f == NULL || kill_l == NULL) {
		printf("# member kill tests skipped (run tests/etcd/three_node.sh)\n");
		return;
	}
	c = client(endpoints, TIMEOUT_MS);
	tries = survive(c, "members/before", &ms);
	ok(tries == 1, NULL, "three members: requests work (first endpoint %s)",
	   etcd_endpoint(c));
	ok(system(kill_f) == 0, NULL, "killed the follower that was the first endpoint");
	tries = survive(c, "members/no-follower", &ms);
	ok(tries == 1, NULL,
	   "with the follower dead requests work at once (now at %s, %lld ms)",
	   etcd_endpoint(c), ms);
	ok(system(revive_f) == 0, NULL, "revived the follower");
	ok(system(kill_l) == 0, NULL, "killed the current leader");
	tries = survive(c, "members/no-leader", &ms);
	ok(tries > 0, NULL,
	   "with the leader dead requests work again after an election (%d attempts, %lld ms, now at %s)",
	   tries, ms, etcd_endpoint(c));
	etcd_close(c);
}

/* Deletes this run's keys. */
static void cleanup(const char *endpoints)
{
	struct wsl_error err = { 0 };
	struct etcd_client *c = client(endpoints, TIMEOUT_MS);
	struct etcd_op del = { .type = ETCD_OP_DELETE, .key = prefix,
			       .key_len = prefix_len };
	struct etcd_txn t = { NULL, 0, &del, 1, NULL, 0 };
	char end[96];
	bool won;

	del.range_end = end;
	del.range_end_len = etcd_prefix_end(prefix, prefix_len, end);
	ok(etcd_txn(c, &t, &won, NULL, &err) == 0 && won, &err,
	   "delete this run's keys");
	etcd_close(c);
}

int main(void)
{
	const char *endpoints = getenv("WSLOCK_ETCD_ENDPOINTS");
	struct etcd_client *c;
	char token[WSL_TOKEN_HEX + 1];

	/* the loopback servers here must not be reached through a proxy */
	setenv("no_proxy", "127.0.0.1,localhost", 1);
	setenv("NO_PROXY", "127.0.0.1,localhost", 1);
	if (crypto_setup() < 0) {
		fprintf(stderr, "test_etcd: libsodium unusable\n");
		return 1;
	}
	crypto_token(token);
	snprintf(prefix, sizeof(prefix), "wslock-test/%.8s/", token);
	prefix_len = strlen(prefix);

	test_offline();
	if (endpoints == NULL || endpoints[0] == '\0') {
		test_fake(NULL);
		printf("# WSLOCK_ETCD_ENDPOINTS is unset: etcd tests skipped "
		       "(start one with tests/etcd/cluster.sh start)\n");
	} else {
		printf("# etcd at %s, keys under %s\n", endpoints, prefix);
		c = client(endpoints, TIMEOUT_MS);
		test_roundtrip(c);
		test_contenders(c, endpoints);
		test_txn(c);
		test_lease(c);
		test_wait(c, endpoints);
		test_wait_changes(c);
		test_failover(etcd_endpoint(c));
		test_fake(etcd_endpoint(c));
		test_compacted(c, endpoints);
		etcd_close(c);
		test_members(endpoints);
		cleanup(endpoints);
	}
	printf("%d passed, %d failed\n", n_passed, n_failed);
	return n_failed ? 1 : 0;
}
