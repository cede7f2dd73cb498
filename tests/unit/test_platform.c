/* test_platform.c - /proc/PID/stat parsing, boot ids, times. */
#include "platform.h"
#include "tap.h"

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int start_of(const char *s, unsigned long long *t)
{
	return platform_parse_stat_start(s, strlen(s), t);
}

int main(void)
{
	unsigned long long t = 0, self = 0;
	char boot[WSL_BOOT_ID_LEN + 1], now[WSL_TIME_LEN + 1];
	const char *plain =
		"123 (sh) S 1 123 123 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10 18446744073709551615\n";
	const char *tricky =
		"77 (a) b) (c ) R 1 77 77 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 4242 1000 10 1\n";

	CHECK(start_of(plain, &t) == 0 && t == 98765, "starttime is field 22");
	CHECK(start_of(tricky, &t) == 0 && t == 4242,
	      "comm with spaces and parentheses is skipped to the last ')'");
	CHECK(start_of("123 (sh) S 1 2 3", &t) != 0, "truncated stat is refused");
	CHECK(start_of("123 sh S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20", &t) != 0,
	      "stat without ')' is refused");
	CHECK(start_of("1 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 1 0 12a4 0\n", &t) != 0,
	      "non-numeric starttime is refused");
	CHECK(start_of("1 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 1 0 99999999999999999999999 0\n", &t) != 0,
	      "overflowing starttime is refused");
	CHECK(start_of("", &t) != 0, "empty stat is refused");
	{
		char st = '?';
		const char *z = "9 (z) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 1 0 7 0\n";
		const char *zz = "9 (z) ZZ 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 1 0 7 0\n";

		CHECK(platform_parse_stat(tricky, strlen(tricky), &t, &st) == 0 &&
		      st == 'R' && t == 4242, "state is field 3, after the last ')'");
		CHECK(platform_parse_stat(z, strlen(z), &t, &st) == 0 && st == 'Z', "a zombie's state reads Z");
		CHECK(platform_parse_stat(zz, strlen(zz), &t, &st) != 0, "a state of two letters is refused");
	}
	CHECK(platform_pid_start_ticks(getpid(), &self) == 0 && self > 0,
	      "own start ticks are readable");
	CHECK(platform_pid_start_ticks(4194304 + 1, &t) != 0, "an impossible pid has no start ticks");

	CHECK(platform_boot_id(boot) == 0 && platform_boot_id_valid(boot),
	      "this host's boot id reads and validates");
	CHECK(platform_boot_id_valid("4a760414-a5f5-4c44-b75c-0e8b7c280e9a"), "boot id shape");
	CHECK(!platform_boot_id_valid("4A760414-a5f5-4c44-b75c-0e8b7c280e9a"), "uppercase boot id refused");
	CHECK(!platform_boot_id_valid("4a760414a5f54c44b75c0e8b7c280e9a"), "boot id without dashes refused");
	CHECK(!platform_boot_id_valid(""), "empty boot id refused");

	{
		/* platform_utc against the C library, across eras and leap
		 * days (1811 .. 2255, a step that visits every time of day). */
		int bad = 0;
		for (long long s = -5000000000LL; s < 9000000000LL; s += 604806) {
			struct tm a, b;
			time_t tt = (time_t)s;
			gmtime_r(&tt, &a);
			platform_utc(tt, &b);
			bad += a.tm_year != b.tm_year || a.tm_mon != b.tm_mon ||
			       a.tm_mday != b.tm_mday || a.tm_hour != b.tm_hour ||
			       a.tm_min != b.tm_min || a.tm_sec != b.tm_sec;
		}
		CHECK(bad == 0, "platform_utc agrees with gmtime_r");
	}
	platform_now_iso(now);
	CHECK(platform_time_valid(now), "now formats as a valid time");
	CHECK(platform_time_valid("2026-11-30T11:28:58.123Z"), "time shape");
	CHECK(!platform_time_valid("2026-13-30T11:28:58.123Z"), "month 13 refused");
	CHECK(!platform_time_valid("2026-11-30T11:28:58Z"), "time without ms refused");
	CHECK(!platform_time_valid("2026-11-30 11:28:58.123Z"), "time without T refused");
	CHECK(!platform_time_valid("2026-11-30T11:28:58.123+00:00"), "offset instead of Z refused");

	CHECK(platform_machine_id_valid("3d1219c7c4c5404aaa1f6d2a48adfda4"), "machine id shape");
	CHECK(!platform_machine_id_valid("3d1219c7c4c5404aaa1f6d2a48adfda"), "short machine id refused");
	CHECK(!platform_machine_id_valid("00000000000000000000000000000000"), "all-zero machine id refused");
	CHECK(!platform_machine_id_valid("uninitialized"), "uninitialized machine id refused");
	{
		char mid[WSL_MACHINE_ID_LEN + 1];
		if (access("/etc/machine-id", R_OK) == 0)
			CHECK(platform_machine_id(mid) == 0 && platform_machine_id_valid(mid),
			      "this machine's id reads and validates");
		else
			CHECK(platform_machine_id(mid) != 0, "no /etc/machine-id: no machine id");
	}
	{
		char self_ns[WSL_PIDNS_MAX + 1], pid_ns[WSL_PIDNS_MAX + 1];
		CHECK(platform_pid_namespace(0, self_ns) == 0 &&
		      platform_pid_namespace_valid(self_ns), "own pid namespace reads");
		CHECK(platform_pid_namespace(getpid(), pid_ns) == 0 &&
		      strcmp(self_ns, pid_ns) == 0, "own pid names the same namespace");
		CHECK(platform_pid_namespace(4194304 + 1, pid_ns) != 0 && errno == ESRCH,
		      "an impossible pid has no namespace (ESRCH)");
	}
	CHECK(platform_pid_namespace_valid(WSL_PIDNS_INITIAL), "initial namespace shape");
	CHECK(!platform_pid_namespace_valid("pid:[0123]"), "leading zero refused");
	CHECK(!platform_pid_namespace_valid("mnt:[4026531841]"), "mount namespace refused");
	CHECK(!platform_pid_namespace_valid("pid:[4026531836"), "unclosed bracket refused");
	CHECK(!platform_pid_namespace_valid("pid:[42949672950]"), "inode above 32 bits refused");

	CHECK(platform_host_valid("build-01.example"), "host name");
	CHECK(!platform_host_valid(""), "empty host refused");
	CHECK(!platform_host_valid("a b"), "host with space refused");
	CHECK(!platform_host_valid("a\nb"), "host with newline refused");
	return tap_done();
}
