# bench/bench.mk - wslock's benchmarks against flock(1) (issue 5).
# Included from the top Makefile; paths are relative to the repository root.
#
#   make bench         full run (~4 min on 2 cores): prints the table and
#                      writes bench/RESULTS.md (raw figures: bench/results/full)
#   make bench-smoke   every benchmark once at a tiny size (a few seconds);
#                      asserts no timing, fails only if a benchmark breaks
#
# Needs flock(1) (util-linux) and strace; hyperfine, perf and valgrind are
# used when present (bench/run.sh installs hyperfine and strace with apt-get
# when they are missing and it runs as root).

BENCH_CC ?= $(CC)
BENCH_CFLAGS = -std=c11 -O2 -Wall -Wextra -Wshadow -Wformat=2 \
	       -Wstrict-prototypes -Wmissing-prototypes $(if $(WERROR),-Werror)

bench/wslbench: bench/wslbench.c
	$(BENCH_CC) $(BENCH_CFLAGS) -o $@ $< $(LDFLAGS)

bench: wslock bench/wslbench
	bench/run.sh

bench-smoke: wslock bench/wslbench
	bench/run.sh --smoke

bench-clean:
	rm -f bench/wslbench
	rm -rf bench/results

.PHONY: bench bench-smoke bench-clean
