# mk/hardening.mk - crash injection, race stress, fuzzing and valgrind
# (issue: hardening). Included from the top Makefile:
#
#   include mk/hardening.mk
#
# or used alone from the repository root: make -f Makefile -f mk/hardening.mk TARGET
#
#   make crash-matrix      every CRASH_POINT step x every command (./wslock-test)
#   make stress            STRESS_N contenders x STRESS_ITER operations, checked
#                          (as root also through a bind-mount alias, and every
#                          4th contender in its own pid namespace, every 8th
#                          under another hostname: STRESS_ALIAS, STRESS_PIDNS)
#   make fuzz              libFuzzer over the owner parser, FUZZ_SECONDS (60)
#   make valgrind-check    the core bats files with every wslock under valgrind
#   make hardening         all four
#
# Needs: bats, jq, clang (libFuzzer: libclang-rt-14-dev), valgrind.

STRESS_N ?= 32
STRESS_ITER ?= 30
STRESS_HOLD_MS ?= 10
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZ_FLAGS = -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer \
	     -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_SRCS = src/owner.c src/platform.c src/crypto.c src/error.c src/fsx.c src/testhook.c \
            src/mountinfo.c
FUZZ_WORK ?= $(or $(TMPDIR),/tmp)/wslock-fuzz

# The core bats files, whose every wslock invocation runs under valgrind
# (about 13 minutes here; VALGRIND_BATS="$(wildcard tests/*.bats)" runs all,
# about 20). Of malformed.bats only the lock-file half runs (every class as
# a lock's owner.json, read by every command; VALGRIND_MALFORMED_FILTER,
# empty: none): the expected-owner half goes through the same parser, which
# is fuzzed under ASan/UBSan. Left out by default: errors.bats and
# schema.bats (usage and output shape),
# completion.bats and install.bats (no wslock run), netfs.bats (drives
# ./wslock-test on purpose). No file is left out for timing: under valgrind
# every test of the suite passed as it does natively.
VALGRIND_BATS ?= $(wildcard $(addprefix tests/,acquire.bats attack.bats inspect.bats \
	journal.bats reclaim.bats recover.bats registry.bats release.bats retain.bats run.bats))
VALGRIND_MALFORMED_FILTER ?= ^lock file:
VALGRIND_LOGS ?= $(or $(TMPDIR),/tmp)/wslock-valgrind

crash-matrix: wslock test-build
	tests/crash/matrix.sh

stress: wslock
	tests/stress/check.sh --self-test
	STRESS_N=$(STRESS_N) STRESS_ITER=$(STRESS_ITER) STRESS_HOLD_MS=$(STRESS_HOLD_MS) \
		tests/stress/driver.sh

fuzz/fuzz_owner: fuzz/fuzz_owner.c $(FUZZ_SRCS) src/*.h
	$(FUZZ_CC) $(FUZZ_FLAGS) $(PKG_CFLAGS) -Isrc -o $@ fuzz/fuzz_owner.c $(FUZZ_SRCS) $(PKG_LIBS)

# The seeds are copied to a scratch corpus, so new inputs never land in the
# repository; crash-* artifacts go there too and are listed on failure.
fuzz: fuzz/fuzz_owner
	@rm -rf $(FUZZ_WORK) && mkdir -p $(FUZZ_WORK)/corpus $(FUZZ_WORK)/artifacts
	@cp fuzz/corpus/* $(FUZZ_WORK)/corpus/
	@echo "fuzz: $(FUZZ_SECONDS)s over $$(ls fuzz/corpus | wc -l) seeds"
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	fuzz/fuzz_owner -max_total_time=$(FUZZ_SECONDS) -max_len=66000 -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix=$(FUZZ_WORK)/artifacts/ $(FUZZ_WORK)/corpus \
		>$(FUZZ_WORK)/log 2>&1; rc=$$?; \
	crashes=$$(ls $(FUZZ_WORK)/artifacts | wc -l); \
	execs=$$(sed -n 's/^stat::number_of_executed_units: *//p' $(FUZZ_WORK)/log); \
	echo "fuzz: executions $${execs:-?}, crashes $$crashes (libFuzzer exit $$rc)"; \
	if [ $$rc -ne 0 ] || [ $$crashes -ne 0 ]; then \
		tail -40 $(FUZZ_WORK)/log; ls -l $(FUZZ_WORK)/artifacts; exit 1; fi

# Every wslock the bats helpers start goes through tests/valgrind-wslock.sh
# (through tests/run-bats.sh: in CI a skip not in tests/skips.allowed or
# tests/skips.valgrind fails):
# memcheck with full leak check; an error makes it exit 99 (no wslock exit
# code is 99) and leaves a log; any log with more than valgrind's notice
# that it does not know pidfd_open(2) (syscall 434: valgrind 3.19, Debian
# 12, returns ENOSYS for it, and wslock falls back to checking the pid)
# fails the target.
VALGRIND_KNOWN = ^--[0-9]+-- (WARNING: unhandled amd64-linux syscall: 434|You may be able to write your own handler\.|Read the file README_MISSING_SYSCALL_OR_IOCTL\.|Nevertheless we consider this a bug\.  Please report|it at http://valgrind\.org/support/bug_reports\.html\.)$$
valgrind-check: wslock
	@rm -rf $(VALGRIND_LOGS) && mkdir -p $(VALGRIND_LOGS)
	@export WSLOCK=$(CURDIR)/tests/valgrind-wslock.sh WSLOCK_REAL=$(CURDIR)/wslock \
		VALGRIND_LOGS=$(VALGRIND_LOGS); rc=0; \
	tests/run-bats.sh --allow tests/skips.valgrind $(VALGRIND_BATS) || rc=$$?; \
	if [ -n "$(strip $(VALGRIND_MALFORMED_FILTER))" ]; then \
		tests/run-bats.sh --allow tests/skips.valgrind -f '$(strip $(VALGRIND_MALFORMED_FILTER))' \
			tests/malformed.bats || rc=$$?; fi; \
	bad=$$(for f in $$(find $(VALGRIND_LOGS) -type f -size +0); do \
		grep -qvE '$(VALGRIND_KNOWN)' "$$f" && echo "$$f"; done); \
	echo "valgrind: $$(ls $(VALGRIND_LOGS) | wc -l) wslock processes checked, $$(printf '%s' "$$bad" | grep -c .) with memcheck errors (bats exit $$rc)"; \
	printf '%s\n' $$bad | head -5 | xargs -r cat; \
	[ $$rc -eq 0 ] && [ -z "$$bad" ]

hardening: crash-matrix stress fuzz valgrind-check

.PHONY: crash-matrix stress fuzz valgrind-check hardening
