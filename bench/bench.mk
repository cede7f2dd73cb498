# bench/bench.mk - wslock's benchmarks against flock(1) (issue 5).
# Included from the top Makefile; paths are relative to the repository root.
#
#   make bench         every figure of issues 14 and 15, full size (about
#                      10 min on 2 cores): prints the table and writes
#                      bench/RESULTS.md (raw figures: bench/results/full)
#   make bench BENCH='fairness blocked'
#                      only those figures (bench/run.sh --help lists them);
#                      prints the table, leaves RESULTS.md alone
#   make bench-smoke   every figure once at a tiny size (seconds); asserts
#                      no timing, fails only if a benchmark breaks
#
# Each figure is measured against flock(1) in the same alternating runs,
# and the uncontended ones beside bench/wsllimit, the physical limit (a
# static C program doing only the durable steps). Needs flock(1)
# (util-linux), strace and lockfile-progs; hyperfine, perf and valgrind are
# used when present (bench/run.sh installs missing tools with apt-get when
# it runs as root).

BENCH_CC ?= $(CC)
BENCH_CFLAGS = -std=c11 -O2 -Wall -Wextra -Wshadow -Wformat=2 \
	       -Wstrict-prototypes -Wmissing-prototypes $(if $(WERROR),-Werror)

bench/wslbench: bench/wslbench.c
	$(BENCH_CC) $(BENCH_CFLAGS) -o $@ $< $(LDFLAGS)

# Static: the limit's start-up is the kernel's exec and nothing more.
bench/wsllimit: bench/wsllimit.c
	$(BENCH_CC) $(BENCH_CFLAGS) -static -o $@ $< $(LDFLAGS)

bench: wslock bench/wslbench bench/wsllimit
	bench/run.sh $(BENCH)

bench-smoke: wslock bench/wslbench bench/wsllimit
	bench/run.sh --smoke $(BENCH)

bench-clean:
	rm -f bench/wslbench bench/wsllimit
	rm -rf bench/results

.PHONY: bench bench-smoke bench-clean
