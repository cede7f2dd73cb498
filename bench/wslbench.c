/* wslbench.c - measuring helper for the wslock benchmarks (bench/run.sh).
 *
 * Every measuring mode runs wslock's command and flock(1)'s command side by
 * side, alternating (the order rotates each iteration), and prints one
 * tab-separated summary line per label on stdout:
 *
 *   wslbench alt N WARMUP -- LABEL CMD... [+++ CMD2...] [%%% CMD3...] [::: ...]
 *       fork+exec+wait each command N times (after WARMUP unrecorded runs).
 *       With +++, CMD2 runs right after CMD1 and the two count as one
 *       (acquire + release): an argument @TOKEN@ of CMD2 becomes the
 *       "token" of the owner document CMD1 printed. With %%%, CMD3 runs
 *       after each measured run, untimed (a clean-up that makes every run
 *       start cold). Prints: label n med_us p10_us p90_us p99_us mean_us
 *       maxrss_med_kb maxrss_max_kb cpu_med_us (cpu = user+sys of the
 *       command and its waited-for children, from wait4).
 *
 *   wslbench contend ROUNDS WORKERS ITERS -- LABEL CMD... [::: ...]
 *       per round and label, WORKERS processes start together and each runs
 *       CMD ITERS times in a row. CMD must end in a child that runs
 *       `wslbench stamp` (writes its start instant to fd 9): the wait of one
 *       iteration is that instant minus the fork. Prints: label rounds
 *       wall_med_ms wall_min_ms wall_max_ms wait_mean_us wait_p50_us
 *       wait_p99_us wait_max_us worker_mean_wait_max_over_mean
 *       single_wait_max_over_mean (the last two: worst round).
 *
 *   wslbench rw ROUNDS READERS ITERS WRITES -- LABEL READCMD... +++ WRITECMD... [::: ...]
 *       readers and a writer: per round and label, READERS processes each
 *       run READCMD ITERS times in a row and one more runs WRITECMD WRITES
 *       times, all starting together (the commands end in `wslbench stamp`,
 *       as for contend). Prints: label rounds wall_med_ms wall_min_ms
 *       wall_max_ms read_wait_mean_us read_wait_p99_us write_wait_mean_us
 *       write_wait_p50_us write_wait_max_us (waits over every round).
 *
 *   wslbench wake N DELAY_MS [-c] -- LABEL HOLDCMD... +++ WAITCMD... [::: ...]
 *       per trial: start HOLDCMD, whose child `wslbench hold` reports on fd 7
 *       that it holds the lock; start WAITCMD (whose child is `wslbench
 *       stamp`); after DELAY_MS let the holder's child go: it writes its
 *       exit instant to fd 9 and exits. Latency = waiter child's start -
 *       holder child's exit instant. With -c, the waiter's CPU time between
 *       100 ms after its start and the release is also measured
 *       (/proc/PID/schedstat, ns), and so are its wake-ups in that window:
 *       the growth of voluntary_ctxt_switches in /proc/PID/status (a
 *       process blocked in the kernel until the release has none). Prints:
 *       label n med_us p10_us p90_us p99_us max_us cpu_blocked_med_us
 *       cpu_blocked_max_us blocked_ms wakeups_blocked_med
 *       wakeups_blocked_max.
 *
 * Helper children:
 *   wslbench stamp [MS]     write CLOCK_MONOTONIC ns to fd 9, then sleep
 *                           MS milliseconds (the work done under the
 *                           lock; default none), exit 0
 *   wslbench hold           write 'r' to fd 7, read a byte from fd 8,
 *                           write CLOCK_MONOTONIC ns to fd 9, exit 0
 *   wslbench holdflocks N DIR   flock(LOCK_EX) N files DIR/fN, print
 *                           "ready" on stdout, then sleep until killed
 *   wslbench inotifyclose N DIR time N rounds of inotify_init1 +
 *                           inotify_add_watch(DIR) + close; print the
 *                           median microseconds of the close alone
 *
 * Plain C11 plus POSIX/Linux calls; no dependencies.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_GROUPS 16
#define READY_FD 7
#define GO_FD 8
#define STAMP_FD 9

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "wslbench: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: wslbench alt N WARMUP -- LABEL CMD... [+++ CMD2...] [%%%% CMD3...] [::: ...]\n"
		"       wslbench contend ROUNDS WORKERS ITERS -- LABEL CMD... [::: ...]\n"
		"       wslbench rw ROUNDS READERS ITERS WRITES -- LABEL READCMD... +++ WRITECMD... [::: ...]\n"
		"       wslbench wake N DELAY_MS [-c] -- LABEL HOLDCMD... +++ WAITCMD... [::: ...]\n"
		"       wslbench stamp [MS] | hold | holdflocks N DIR | inotifyclose N DIR\n");
	exit(64);
}

static long parse_num(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 0)
		usage();
	return v;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

/* Percentile (0..100) of v[0..n) by nearest rank; sorts v. */
static long long pct(long long *v, size_t n, double p)
{
	size_t i;

	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_ll);
	i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
	return v[i >= n ? n - 1 : i];
}

static long long mean(const long long *v, size_t n)
{
	long double s = 0;
	size_t i;

	for (i = 0; i < n; i++)
		s += v[i];
	return n ? (long long)(s / n) : 0;
}

static void write_ll(int fd, long long v)
{
	char buf[32];
	int len = snprintf(buf, sizeof(buf), "%lld\n", v);
	ssize_t w = write(fd, buf, (size_t)len);

	(void)w;
}

/* Reads one decimal number from fd (until EOF or newline); -1 when none. */
static long long read_ll(int fd)
{
	char buf[64];
	size_t got = 0;
	ssize_t n;

	while (got < sizeof(buf) - 1) {
		n = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (memchr(buf, '\n', got) != NULL)
			break;
	}
	buf[got] = '\0';
	if (got == 0)
		return -1;
	return strtoll(buf, NULL, 10);
}

/* pipe(2) whose ends are close-on-exec and above the fixed descriptors
 * 7..9 that the children get, so dup2() onto those never hits one. */
static int mkpipe(int p[2])
{
	int q[2], i;

	if (pipe(q) != 0)
		return -1;
	for (i = 0; i < 2; i++) {
		p[i] = fcntl(q[i], F_DUPFD_CLOEXEC, 20);
		close(q[i]);
		if (p[i] < 0)
			return -1;
	}
	return 0;
}

/* A labelled command (and, for wake, a second one). */
struct group {
	const char *label;
	char **cmd;
	char **cmd2;
	char **cmd3;
};

/* Splits argv (after "--") into groups at ":::" and each group's command
 * at "+++" (cmd2) and "%%%" (cmd3); with need2, every group must have a
 * cmd2. Modifies argv (separators become NULL). */
static int parse_groups(char **argv, int argc, struct group *g, int need2)
{
	int n = 0, i = 0;

	while (i < argc) {
		if (n == MAX_GROUPS)
			usage();
		g[n].label = argv[i++];
		g[n].cmd = argv + i;
		g[n].cmd2 = NULL;
		g[n].cmd3 = NULL;
		while (i < argc && strcmp(argv[i], ":::") != 0) {
			if (strcmp(argv[i], "+++") == 0) {
				argv[i] = NULL;
				g[n].cmd2 = argv + i + 1;
			} else if (strcmp(argv[i], "%%%") == 0) {
				argv[i] = NULL;
				g[n].cmd3 = argv + i + 1;
			}
			i++;
		}
		if (i < argc)
			argv[i++] = NULL;
		if (g[n].cmd[0] == NULL || (g[n].cmd2 != NULL && g[n].cmd2[0] == NULL) ||
		    (g[n].cmd3 != NULL && g[n].cmd3[0] == NULL) || (need2 && g[n].cmd2 == NULL))
			usage();
		n++;
	}
	if (n == 0)
		usage();
	return n;
}

/* In a forked child: stdout and stderr to /dev/null, then exec. */
static void exec_quiet(char **cmd)
{
	int fd = open("/dev/null", O_RDWR);

	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	execvp(cmd[0], cmd);
	_exit(127);
}

/* Runs cmd, waits; fills wall ns, maxrss KiB, cpu ns; returns the exit
 * status (or 128+signal). With out != NULL, the command's stdout goes
 * there (up to outsz - 1 bytes, NUL-terminated) instead of /dev/null. */
static int run_once_out(char **cmd, long long *wall, long *maxrss, long long *cpu,
			char *out, size_t outsz)
{
	struct rusage ru;
	long long t0;
	int status, p[2] = { -1, -1 };
	pid_t pid;
	size_t got = 0;

	if (out != NULL && mkpipe(p) != 0)
		die("pipe");
	t0 = now_ns();
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		if (out != NULL) {
			int fd = open("/dev/null", O_RDWR);

			dup2(p[1], 1);
			if (fd >= 0)
				dup2(fd, 2);
			execvp(cmd[0], cmd);
			_exit(127);
		}
		exec_quiet(cmd);
	}
	if (out != NULL) {
		ssize_t r;

		close(p[1]);
		while ((r = read(p[0], out + got, outsz - 1 - got)) != 0) {
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				break;
			got += (size_t)r;
			if (got == outsz - 1)
				break;
		}
		out[got] = '\0';
		close(p[0]);
	}
	while (wait4(pid, &status, 0, &ru) < 0)
		if (errno != EINTR)
			die("wait4");
	*wall = now_ns() - t0;
	*maxrss = ru.ru_maxrss;
	*cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int run_once(char **cmd, long long *wall, long *maxrss, long long *cpu)
{
	return run_once_out(cmd, wall, maxrss, cpu, NULL, 0);
}

/* The 32 hex digits after "token":" in an owner document; 0 when found. */
static int find_token(const char *doc, char tok[33])
{
	const char *p = strstr(doc, "\"token\":\"");
	size_t i;

	if (p == NULL)
		return -1;
	p += 9;
	for (i = 0; i < 32; i++) {
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return -1;
		tok[i] = p[i];
	}
	tok[32] = '\0';
	return 0;
}

/* One measured run of a group: cmd, then cmd2 (timed together, @TOKEN@
 * substituted), then cmd3 untimed. */
static void run_group(const struct group *g, long long *wall, long *maxrss, long long *cpu)
{
	static char out[65536];
	char tok[33], *argv2[256];
	long long w2, c2, w3, c3;
	long r2, r3;
	int st, i, need_tok = 0;

	for (i = 0; g->cmd2 != NULL && g->cmd2[i] != NULL; i++)
		if (strcmp(g->cmd2[i], "@TOKEN@") == 0)
			need_tok = 1;
	st = need_tok ? run_once_out(g->cmd, wall, maxrss, cpu, out, sizeof(out))
		      : run_once(g->cmd, wall, maxrss, cpu);
	if (st != 0) {
		fprintf(stderr, "wslbench: %s: %s exited with status %d\n", g->label, g->cmd[0], st);
		exit(3);
	}
	if (g->cmd2 != NULL) {
		if (need_tok && find_token(out, tok) != 0) {
			fprintf(stderr, "wslbench: %s: no token in the output of %s\n", g->label, g->cmd[0]);
			exit(3);
		}
		for (i = 0; g->cmd2[i] != NULL && i < 255; i++)
			argv2[i] = strcmp(g->cmd2[i], "@TOKEN@") == 0 ? tok : g->cmd2[i];
		argv2[i] = NULL;
		st = run_once(argv2, &w2, &r2, &c2);
		if (st != 0) {
			fprintf(stderr, "wslbench: %s: %s exited with status %d\n", g->label, argv2[0], st);
			exit(3);
		}
		*wall += w2;
		*cpu += c2;
		if (r2 > *maxrss)
			*maxrss = r2;
	}
	if (g->cmd3 != NULL && (st = run_once(g->cmd3, &w3, &r3, &c3)) != 0) {
		fprintf(stderr, "wslbench: %s: %s exited with status %d\n", g->label, g->cmd3[0], st);
		exit(3);
	}
}

static int mode_alt(int argc, char **argv)
{
	struct group g[MAX_GROUPS];
	long n, warm, i;
	int ng, k;
	long long *wall[MAX_GROUPS], *rss[MAX_GROUPS], *cpu[MAX_GROUPS];

	if (argc < 5 || strcmp(argv[3], "--") != 0)
		usage();
	n = parse_num(argv[1]);
	warm = parse_num(argv[2]);
	if (n < 1)
		usage();
	ng = parse_groups(argv + 4, argc - 4, g, 0);
	for (k = 0; k < ng; k++) {
		wall[k] = calloc((size_t)n, sizeof(long long));
		rss[k] = calloc((size_t)n, sizeof(long long));
		cpu[k] = calloc((size_t)n, sizeof(long long));
		if (!wall[k] || !rss[k] || !cpu[k])
			die("calloc");
	}
	for (i = -warm; i < n; i++) {
		for (k = 0; k < ng; k++) {
			/* rotate the order so no command always follows another */
			int j = (int)((k + (i < 0 ? -i : i)) % ng);
			long long w, c;
			long r;

			run_group(&g[j], &w, &r, &c);
			if (i >= 0) {
				wall[j][i] = w;
				rss[j][i] = r;
				cpu[j][i] = c;
			}
		}
	}
	for (k = 0; k < ng; k++) {
		long long m = mean(wall[k], (size_t)n);
		printf("%s\t%ld\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%lld\t%lld\t%.1f\n",
		       g[k].label, n,
		       pct(wall[k], (size_t)n, 50) / 1e3, pct(wall[k], (size_t)n, 10) / 1e3,
		       pct(wall[k], (size_t)n, 90) / 1e3, pct(wall[k], (size_t)n, 99) / 1e3,
		       m / 1e3, pct(rss[k], (size_t)n, 50), pct(rss[k], (size_t)n, 100),
		       pct(cpu[k], (size_t)n, 50) / 1e3);
	}
	return 0;
}

/* One worker of contend: ITERS runs, wait of each into waits[]. */
static void contend_worker(char **cmd, long iters, int start_fd, long long *waits)
{
	char b;
	long i;

	if (read(start_fd, &b, 1) < 0)
		_exit(2);
	for (i = 0; i < iters; i++) {
		int p[2], status;
		long long t0, t;
		pid_t pid;

		if (mkpipe(p) != 0)
			_exit(2);
		t0 = now_ns();
		pid = fork();
		if (pid < 0)
			_exit(2);
		if (pid == 0) {
			dup2(p[1], STAMP_FD);
			close(p[0]);
			close(p[1]);
			exec_quiet(cmd);
		}
		close(p[1]);
		t = read_ll(p[0]);
		close(p[0]);
		while (waitpid(pid, &status, 0) < 0)
			if (errno != EINTR)
				_exit(2);
		if (t < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			_exit(3);
		waits[i] = t - t0;
	}
	_exit(0);
}

/* One round of contend: returns the wall ns; waits[w*iters+i]. With
 * cmd2, one more worker runs cmd2 iters2 times, its waits after the
 * others' (waits[workers*iters+i]). */
static long long contend_round2(char **cmd, long workers, long iters, char **cmd2, long iters2,
				long long *waits)
{
	int go[2], status, bad = 0;
	long long t0, wall;
	long all = workers + (cmd2 != NULL ? 1 : 0);
	pid_t *pids = calloc((size_t)all, sizeof(pid_t));
	long w;

	if (pids == NULL || mkpipe(go) != 0)
		die("contend setup");
	for (w = 0; w < all; w++) {
		pids[w] = fork();
		if (pids[w] < 0)
			die("fork");
		if (pids[w] == 0) {
			close(go[1]);
			if (w == workers)
				contend_worker(cmd2, iters2, go[0], waits + workers * iters);
			contend_worker(cmd, iters, go[0], waits + w * iters);
		}
	}
	close(go[0]);
	usleep(20000);	/* let every worker reach read() */
	t0 = now_ns();
	close(go[1]);	/* all start together */
	for (w = 0; w < all; w++) {
		while (waitpid(pids[w], &status, 0) < 0)
			if (errno != EINTR)
				die("waitpid");
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			bad = 1;
	}
	wall = now_ns() - t0;
	free(pids);
	if (bad) {
		fprintf(stderr, "wslbench: contend: a worker failed (%s)\n", cmd[0]);
		exit(3);
	}
	return wall;
}

static long long contend_round(char **cmd, long workers, long iters, long long *waits)
{
	return contend_round2(cmd, workers, iters, NULL, 0, waits);
}

static int mode_rw(int argc, char **argv)
{
	struct group g[MAX_GROUPS];
	long rounds, readers, iters, writes, r;
	int ng, k;
	long long *walls[MAX_GROUPS], *rd[MAX_GROUPS], *wr[MAX_GROUPS], *waits;
	size_t nr, nw;

	if (argc < 7 || strcmp(argv[5], "--") != 0)
		usage();
	rounds = parse_num(argv[1]);
	readers = parse_num(argv[2]);
	iters = parse_num(argv[3]);
	writes = parse_num(argv[4]);
	if (rounds < 1 || readers < 1 || iters < 1 || writes < 1)
		usage();
	ng = parse_groups(argv + 6, argc - 6, g, 1);
	nr = (size_t)(readers * iters);
	nw = (size_t)writes;
	waits = mmap(NULL, (nr + nw) * sizeof(long long), PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (waits == MAP_FAILED)
		die("mmap");
	for (k = 0; k < ng; k++) {
		walls[k] = calloc((size_t)rounds, sizeof(long long));
		rd[k] = calloc(nr * (size_t)rounds, sizeof(long long));
		wr[k] = calloc(nw * (size_t)rounds, sizeof(long long));
		if (!walls[k] || !rd[k] || !wr[k])
			die("calloc");
	}
	for (r = 0; r < rounds; r++)
		for (k = 0; k < ng; k++) {
			int j = (int)((k + r) % ng);

			walls[j][r] = contend_round2(g[j].cmd, readers, iters, g[j].cmd2, writes, waits);
			memcpy(rd[j] + nr * (size_t)r, waits, nr * sizeof(long long));
			memcpy(wr[j] + nw * (size_t)r, waits + nr, nw * sizeof(long long));
		}
	for (k = 0; k < ng; k++) {
		size_t tr = nr * (size_t)rounds, tw = nw * (size_t)rounds;

		printf("%s\t%ld\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\n",
		       g[k].label, rounds,
		       pct(walls[k], (size_t)rounds, 50) / 1e6,
		       pct(walls[k], (size_t)rounds, 0) / 1e6,
		       pct(walls[k], (size_t)rounds, 100) / 1e6,
		       mean(rd[k], tr) / 1e3, pct(rd[k], tr, 99) / 1e3,
		       mean(wr[k], tw) / 1e3, pct(wr[k], tw, 50) / 1e3, pct(wr[k], tw, 100) / 1e3);
	}
	return 0;
}

static int mode_contend(int argc, char **argv)
{
	struct group g[MAX_GROUPS];
	long rounds, workers, iters, r;
	int ng, k;
	long long *walls[MAX_GROUPS], *all[MAX_GROUPS], *waits;
	double wmax_ratio[MAX_GROUPS] = { 0 }, smax_ratio[MAX_GROUPS] = { 0 };
	size_t per;

	if (argc < 6 || strcmp(argv[4], "--") != 0)
		usage();
	rounds = parse_num(argv[1]);
	workers = parse_num(argv[2]);
	iters = parse_num(argv[3]);
	if (rounds < 1 || workers < 1 || iters < 1)
		usage();
	ng = parse_groups(argv + 5, argc - 5, g, 0);
	per = (size_t)(workers * iters);
	waits = mmap(NULL, per * sizeof(long long), PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (waits == MAP_FAILED)
		die("mmap");
	for (k = 0; k < ng; k++) {
		walls[k] = calloc((size_t)rounds, sizeof(long long));
		all[k] = calloc(per * (size_t)rounds, sizeof(long long));
		if (!walls[k] || !all[k])
			die("calloc");
	}
	for (r = 0; r < rounds; r++) {
		for (k = 0; k < ng; k++) {
			int j = (int)((k + r) % ng);
			long long sum = 0, wsum_max = 0, smax = 0, m;
			long w, i;

			walls[j][r] = contend_round(g[j].cmd, workers, iters, waits);
			for (w = 0; w < workers; w++) {
				long long ws = 0;
				for (i = 0; i < iters; i++) {
					long long v = waits[w * iters + i];
					ws += v;
					if (v > smax)
						smax = v;
				}
				sum += ws;
				if (ws > wsum_max)
					wsum_max = ws;
			}
			m = sum / (long long)workers;	/* mean per-worker total wait */
			if (m > 0 && (double)wsum_max / (double)m > wmax_ratio[j])
				wmax_ratio[j] = (double)wsum_max / (double)m;
			m = sum / (long long)per;	/* mean single wait */
			if (m > 0 && (double)smax / (double)m > smax_ratio[j])
				smax_ratio[j] = (double)smax / (double)m;
			memcpy(all[j] + per * (size_t)r, waits, per * sizeof(long long));
		}
	}
	for (k = 0; k < ng; k++) {
		size_t tot = per * (size_t)rounds;
		long long mw = mean(all[k], tot);
		printf("%s\t%ld\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\t%.2f\n",
		       g[k].label, rounds,
		       pct(walls[k], (size_t)rounds, 50) / 1e6,
		       pct(walls[k], (size_t)rounds, 0) / 1e6,
		       pct(walls[k], (size_t)rounds, 100) / 1e6,
		       mw / 1e3, pct(all[k], tot, 50) / 1e3, pct(all[k], tot, 99) / 1e3,
		       pct(all[k], tot, 100) / 1e3, wmax_ratio[k], smax_ratio[k]);
	}
	return 0;
}

/* CPU ns a process has run, from /proc/PID/schedstat (-1 if unreadable). */
static long long cpu_ns_of(pid_t pid)
{
	char path[64];
	long long run = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/schedstat", (long)pid);
	f = fopen(path, "r");
	if (f != NULL) {
		if (fscanf(f, "%lld", &run) != 1)
			run = -1;
		fclose(f);
	}
	if (run >= 0)
		return run;
	/* Fallback: utime+stime in clock ticks from /proc/PID/stat. */
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	f = fopen(path, "r");
	if (f != NULL) {
		char buf[1024];
		size_t len = fread(buf, 1, sizeof(buf) - 1, f);
		char *p;
		unsigned long ut, st;

		buf[len] = '\0';
		fclose(f);
		p = strrchr(buf, ')');
		if (p != NULL && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
					&ut, &st) == 2)
			return (long long)(ut + st) * (1000000000LL / sysconf(_SC_CLK_TCK));
	}
	return -1;
}

/* voluntary_ctxt_switches of a process, from /proc/PID/status: how often it
 * went to sleep; each wake-up of a blocked process adds one (-1 if
 * unreadable). */
static long long vcsw_of(pid_t pid)
{
	char path[64], line[256];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "voluntary_ctxt_switches: %lld", &v) == 1)
			break;
	fclose(f);
	return v;
}

static void sleep_ns(long long ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL) };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* One wake trial; fills latency, blocked CPU (ns) and wake-ups while
 * blocked (-1 when not asked). */
static void wake_trial(const struct group *g, long delay_ms, int cpu,
		       long long *lat, long long *cpu_blocked, long long *wakeups)
{
	int ready[2], go[2], hout[2], wout[2], st1, st2;
	long long trel, tstart, c0 = -1, c1 = -1, v0 = -1, v1 = -1, t_wait0;
	pid_t hp, wp;
	char b;

	if (mkpipe(ready) || mkpipe(go) || mkpipe(hout) || mkpipe(wout))
		die("pipe");
	hp = fork();
	if (hp < 0)
		die("fork");
	if (hp == 0) {
		dup2(ready[1], READY_FD);
		dup2(go[0], GO_FD);
		dup2(hout[1], STAMP_FD);
		close(ready[0]); close(ready[1]); close(go[0]); close(go[1]);
		close(hout[0]); close(hout[1]); close(wout[0]); close(wout[1]);
		exec_quiet(g->cmd);
	}
	close(ready[1]);
	close(go[0]);
	close(hout[1]);
	if (read(ready[0], &b, 1) != 1) {
		fprintf(stderr, "wslbench: wake: %s: the holder never held the lock\n", g->label);
		exit(3);
	}
	close(ready[0]);
	t_wait0 = now_ns();
	wp = fork();
	if (wp < 0)
		die("fork");
	if (wp == 0) {
		dup2(wout[1], STAMP_FD);
		close(wout[0]); close(wout[1]); close(go[1]); close(hout[0]);
		exec_quiet(g->cmd2);
	}
	close(wout[1]);
	if (cpu) {
		sleep_ns(100 * 1000000LL);
		c0 = cpu_ns_of(wp);
		v0 = vcsw_of(wp);
	}
	sleep_ns(t_wait0 + delay_ms * 1000000LL - now_ns());
	if (cpu) {
		c1 = cpu_ns_of(wp);
		v1 = vcsw_of(wp);
	}
	if (write(go[1], "g", 1) != 1)
		die("write go");
	close(go[1]);
	trel = read_ll(hout[0]);
	tstart = read_ll(wout[0]);
	close(hout[0]);
	close(wout[0]);
	while (waitpid(hp, &st1, 0) < 0)
		if (errno != EINTR)
			die("waitpid");
	while (waitpid(wp, &st2, 0) < 0)
		if (errno != EINTR)
			die("waitpid");
	if (trel < 0 || tstart < 0 || !WIFEXITED(st1) || WEXITSTATUS(st1) != 0 ||
	    !WIFEXITED(st2) || WEXITSTATUS(st2) != 0) {
		fprintf(stderr, "wslbench: wake: %s: a command failed (holder %d, waiter %d)\n",
			g->label, st1, st2);
		exit(3);
	}
	if (tstart < t_wait0 + delay_ms * 1000000LL - 1000000LL)
		fprintf(stderr, "wslbench: wake: %s: the waiter started before the release\n",
			g->label);
	*lat = tstart - trel;
	*cpu_blocked = (cpu && c0 >= 0 && c1 >= 0) ? c1 - c0 : -1;
	*wakeups = (cpu && v0 >= 0 && v1 >= 0) ? v1 - v0 : -1;
}

static int mode_wake(int argc, char **argv)
{
	struct group g[MAX_GROUPS];
	long n, delay, i;
	int ng, k, cpu = 0, a = 3;
	long long *lat[MAX_GROUPS], *cb[MAX_GROUPS], *wk[MAX_GROUPS];

	if (argc < 5)
		usage();
	n = parse_num(argv[1]);
	delay = parse_num(argv[2]);
	if (strcmp(argv[a], "-c") == 0) {
		cpu = 1;
		a++;
	}
	if (a >= argc || strcmp(argv[a], "--") != 0 || n < 1)
		usage();
	if (cpu && delay < 200)
		delay = 200;
	ng = parse_groups(argv + a + 1, argc - a - 1, g, 1);
	for (k = 0; k < ng; k++) {
		lat[k] = calloc((size_t)n, sizeof(long long));
		cb[k] = calloc((size_t)n, sizeof(long long));
		wk[k] = calloc((size_t)n, sizeof(long long));
		if (!lat[k] || !cb[k] || !wk[k])
			die("calloc");
	}
	for (i = 0; i < n; i++)
		for (k = 0; k < ng; k++) {
			int j = (int)((k + i) % ng);
			wake_trial(&g[j], delay, cpu, &lat[j][i], &cb[j][i], &wk[j][i]);
		}
	for (k = 0; k < ng; k++) {
		printf("%s\t%ld\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%ld\t%lld\t%lld\n",
		       g[k].label, n,
		       pct(lat[k], (size_t)n, 50) / 1e3, pct(lat[k], (size_t)n, 10) / 1e3,
		       pct(lat[k], (size_t)n, 90) / 1e3, pct(lat[k], (size_t)n, 99) / 1e3,
		       pct(lat[k], (size_t)n, 100) / 1e3,
		       cpu ? pct(cb[k], (size_t)n, 50) / 1e3 : -1.0,
		       cpu ? pct(cb[k], (size_t)n, 100) / 1e3 : -1.0,
		       cpu ? delay - 100 : delay,
		       cpu ? pct(wk[k], (size_t)n, 50) : -1LL,
		       cpu ? pct(wk[k], (size_t)n, 100) : -1LL);
	}
	return 0;
}

static int mode_holdflocks(int argc, char **argv)
{
	struct rlimit rl;
	long n, i;
	char path[PATH_MAX];

	if (argc != 3)
		usage();
	n = parse_num(argv[1]);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n + 64) {
		rl.rlim_cur = (rlim_t)n + 64;
		if (rl.rlim_max < rl.rlim_cur)
			rl.rlim_max = rl.rlim_cur;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			die("setrlimit");
	}
	for (i = 0; i < n; i++) {
		int fd;
		snprintf(path, sizeof(path), "%s/f%ld", argv[2], i);
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0)
			die(path);
		if (flock(fd, LOCK_EX) != 0)
			die("flock");
	}
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
	return 0;
}

static int mode_inotifyclose(int argc, char **argv)
{
	long n, i;
	long long *v;

	if (argc != 3)
		usage();
	n = parse_num(argv[1]);
	if (n < 1)
		usage();
	v = calloc((size_t)n, sizeof(*v));
	if (v == NULL)
		die("calloc");
	for (i = 0; i < n; i++) {
		int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		long long t0;

		if (fd < 0)
			die("inotify_init1");
		if (inotify_add_watch(fd, argv[2], IN_MOVED_FROM | IN_DELETE | IN_ONLYDIR) < 0)
			die("inotify_add_watch");
		t0 = now_ns();
		close(fd);
		v[i] = now_ns() - t0;
	}
	printf("inotify_close\t%ld\t%.1f\t%.1f\t%.1f\n", n, pct(v, (size_t)n, 50) / 1e3,
	       pct(v, (size_t)n, 10) / 1e3, pct(v, (size_t)n, 90) / 1e3);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	if (strcmp(argv[1], "stamp") == 0) {
		write_ll(STAMP_FD, now_ns());
		if (argc > 2)
			sleep_ns(parse_num(argv[2]) * 1000000LL);
		return 0;
	}
	if (strcmp(argv[1], "hold") == 0) {
		char b;
		ssize_t r;

		if (write(READY_FD, "r", 1) != 1)
			return 2;
		do
			r = read(GO_FD, &b, 1);
		while (r < 0 && errno == EINTR);
		write_ll(STAMP_FD, now_ns());
		return 0;
	}
	if (strcmp(argv[1], "alt") == 0)
		return mode_alt(argc - 1, argv + 1);
	if (strcmp(argv[1], "contend") == 0)
		return mode_contend(argc - 1, argv + 1);
	if (strcmp(argv[1], "rw") == 0)
		return mode_rw(argc - 1, argv + 1);
	if (strcmp(argv[1], "wake") == 0)
		return mode_wake(argc - 1, argv + 1);
	if (strcmp(argv[1], "holdflocks") == 0)
		return mode_holdflocks(argc - 1, argv + 1);
	if (strcmp(argv[1], "inotifyclose") == 0)
		return mode_inotifyclose(argc - 1, argv + 1);
	usage();
	return 64;
}
