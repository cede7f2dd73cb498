#!/usr/bin/env bash
# bench/run.sh - wslock's benchmarks, each measured side by side with flock(1).
#
#   bench/run.sh            full run (~4 min on 2 cores): prints the table,
#                           writes bench/RESULTS.md and raw figures in
#                           bench/results/
#   bench/run.sh --smoke    every benchmark once at a tiny size (a few
#                           seconds); prints the table, asserts no timing,
#                           fails only when a benchmark itself breaks
#
# Environment: WSLOCK (binary, default ./wslock), WSLBENCH (helper, default
# bench/wslbench), BENCH_TMP (where registries go, default $TMPDIR or /tmp).
# Every figure is a ratio of medians over alternating runs (the order of
# wslock's and flock's commands rotates every iteration; see wslbench.c).
set -euo pipefail

MODE=full
case "${1:-}" in
--smoke) MODE=smoke ;;
--full | "") MODE=full ;;
-h | --help)
	sed -n '2,16p' "$0"
	exit 0
	;;
*)
	echo "usage: bench/run.sh [--smoke|--full]" >&2
	exit 64
	;;
esac

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WSLOCK=$(realpath "${WSLOCK:-$ROOT/wslock}")
B=$(realpath "${WSLBENCH:-$ROOT/bench/wslbench}")
OUT=$ROOT/bench/results/$MODE
RESULTS=$ROOT/bench/RESULTS.md

# The benchmarks may themselves run under a wslock run or with a user's
# settings: none of that may leak in.
unset WSLOCK_TOKEN WSLOCK_WORKSPACE WSLOCK_OWNER WSLOCK_HOST XDG_STATE_HOME \
	WSLOCK_ALLOW_NETWORK_FS WSLOCK_DIR
export LC_ALL=C

# --- tools ---------------------------------------------------------------
need_pkgs=()
command -v flock >/dev/null || need_pkgs+=(util-linux)
command -v strace >/dev/null || need_pkgs+=(strace)
if [ "$MODE" = full ]; then
	command -v hyperfine >/dev/null || need_pkgs+=(hyperfine)
fi
if [ ${#need_pkgs[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "bench: installing ${need_pkgs[*]}" >&2
		apt-get install -y "${need_pkgs[@]}" >/dev/null 2>&1 ||
			{ apt-get update >/dev/null 2>&1 && apt-get install -y "${need_pkgs[@]}" >/dev/null 2>&1; } ||
			echo "bench: could not install ${need_pkgs[*]}" >&2
	else
		echo "bench: missing ${need_pkgs[*]} (apt-get install ${need_pkgs[*]}); the parts that need them are skipped" >&2
	fi
fi
command -v flock >/dev/null || { echo "bench: flock(1) is required (util-linux)" >&2; exit 1; }
[ -x "$WSLOCK" ] || { echo "bench: $WSLOCK is not built (make)" >&2; exit 1; }
[ -x "$B" ] || { echo "bench: $B is not built (make bench/wslbench)" >&2; exit 1; }
have() { command -v "$1" >/dev/null; }

# --- sizes ---------------------------------------------------------------
if [ "$MODE" = full ]; then
	N1=300 W1=20           # 1 uncontended: runs per command, warm-up
	C_ROUNDS=5 C_WORKERS=8 C_ITERS=50
	WAKE_N=200 WAKE_DELAY=30
	CPU_N=3 CPU_HOLD_MS=5100  # blocked 5 s (from 100 ms after start to release)
	SCALE_1K=1000 SCALE_10K=10000 SCALE_SIB=1000 N4=100 NI=10
	N5=100
else
	N1=3 W1=1
	C_ROUNDS=1 C_WORKERS=2 C_ITERS=3
	WAKE_N=2 WAKE_DELAY=30
	CPU_N=1 CPU_HOLD_MS=300
	SCALE_1K=10 SCALE_10K=30 SCALE_SIB=10 N4=3 NI=2
	N5=3
fi

# --- scratch space -------------------------------------------------------
TMPBASE=${BENCH_TMP:-${TMPDIR:-/tmp}}
REG=$(mktemp -d "$TMPBASE/wslock-bench-reg.XXXXXX")
# Workspaces: at the root when we may write there, so that depth 1 exists.
if WS_BASE=$(mktemp -d /wslock-bench.XXXXXX 2>/dev/null); then :; else
	WS_BASE=$(mktemp -d "$TMPBASE/wslock-bench-ws.XXXXXX")
fi
# Measure a private copy: the tree's ./wslock may be rebuilt during the run.
cp "$WSLOCK" "$REG/wslock"
WSLOCK_SRC=$WSLOCK
WSLOCK=$REG/wslock
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$REG" "$WS_BASE"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
rm -rf "$OUT"
mkdir -p "$OUT" "$WS_BASE/f"

note() { printf '%s\n' "bench: $*" >&2; }

# get FILE LABEL FIELD: one field of a helper's summary line.
get() { awk -F'\t' -v l="$2" -v f="$3" '$1 == l { print $f; exit }' "$1"; }
# ratio A B (2 decimals)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
# verdict VALUE OP LIMIT -> met / MISSED
verdict() {
	[ "$MODE" = full ] || { echo "(smoke)"; return; }
	awk -v v="$1" -v op="$2" -v l="$3" 'BEGIN {
		if (v == "" || v == "n/a") { print "n/a"; exit }
		ok = (op == "<=") ? (v + 0 <= l + 0) : (v + 0 >= l + 0)
		print ok ? "met" : "MISSED" }'
}
ms() { awk -v u="$1" 'BEGIN { printf "%.2f ms", u / 1000 }'; }
us() { awk -v u="$1" 'BEGIN { printf "%.0f us", u }'; }

SUMMARY=$OUT/summary.tsv
: >"$SUMMARY"
# row NUM NAME WSLOCK FLOCK FIGURE TARGET VERDICT
row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$SUMMARY"; }

# A long-lived process to hold --pid locks for.
sleep 100000 &
HOLDER=$!
PIDS+=("$HOLDER")

# --- 1. uncontended ------------------------------------------------------
note "1/7 uncontended run (${N1} alternating runs each)"
WS1=$WS_BASE/u1
mkdir -p "$WS1"
WSLOCK_DIR=$REG/b1 "$B" alt "$N1" "$W1" -- \
	wslock "$WSLOCK" -d "$REG/b1" run -q "$WS1" -- true ::: \
	flock flock "$WS_BASE/f/u1.lock" true >"$OUT/1-uncontended.tsv"
w=$(get "$OUT/1-uncontended.tsv" wslock 3)
f=$(get "$OUT/1-uncontended.tsv" flock 3)
R1=$(ratio "$w" "$f")
row 1 "uncontended run -- true (median)" "$(ms "$w")" "$(ms "$f")" "ratio $R1" "<= 1.5" "$(verdict "$R1" '<=' 1.5)"
if [ "$MODE" = full ] && have hyperfine; then
	hyperfine -N --warmup 20 --runs 200 --export-markdown "$OUT/1-hyperfine.md" \
		"$WSLOCK -d $REG/b1 run -q $WS1 -- true" "flock $WS_BASE/f/u1.lock true" \
		>"$OUT/1-hyperfine.txt" 2>&1 || note "hyperfine cross-check failed (ignored)"
fi

# --- 2. contended handoff ------------------------------------------------
note "2/7 contended handoff (${C_WORKERS} workers x ${C_ITERS} iterations, ${C_ROUNDS} rounds)"
WS2=$WS_BASE/c1
mkdir -p "$WS2"
"$B" contend "$C_ROUNDS" "$C_WORKERS" "$C_ITERS" -- \
	wslock "$WSLOCK" -d "$REG/b2" run -q "$WS2" -- "$B" stamp ::: \
	flock flock "$WS_BASE/f/c1.lock" "$B" stamp >"$OUT/2-contended.tsv"
w=$(get "$OUT/2-contended.tsv" wslock 3)
f=$(get "$OUT/2-contended.tsv" flock 3)
R2=$(ratio "$w" "$f")
row 2 "contended ${C_WORKERS}x${C_ITERS}: total wall (median)" "$w ms" "$f ms" "ratio $R2" "<= 1.5" "$(verdict "$R2" '<=' 1.5)"
w=$(get "$OUT/2-contended.tsv" wslock 10)
f=$(get "$OUT/2-contended.tsv" flock 10)
row 2 "contended: max per-worker wait / mean" "$w" "$f" "$w" "<= 5" "$(verdict "$w" '<=' 5)"

# --- 3. wake-up latency and blocked CPU -----------------------------------
note "3/7 wake-up latency (${WAKE_N} alternating trials each)"
WS3=$WS_BASE/w1
mkdir -p "$WS3"
"$B" wake "$WAKE_N" "$WAKE_DELAY" -- \
	wslock "$WSLOCK" -d "$REG/b3" run -q "$WS3" -- "$B" hold +++ \
	"$WSLOCK" -d "$REG/b3" run -q "$WS3" -- "$B" stamp ::: \
	flock flock "$WS_BASE/f/w1.lock" "$B" hold +++ \
	flock "$WS_BASE/f/w1.lock" "$B" stamp >"$OUT/3-wake.tsv"
w=$(get "$OUT/3-wake.tsv" wslock 3)
f=$(get "$OUT/3-wake.tsv" flock 3)
row 3 "wake-up latency, median" "$(us "$w")" "$(us "$f")" "$(us "$w")" "<= 2 ms" "$(verdict "$w" '<=' 2000)"
w=$(get "$OUT/3-wake.tsv" wslock 6)
f=$(get "$OUT/3-wake.tsv" flock 6)
row 3 "wake-up latency, p99" "$(us "$w")" "$(us "$f")" "$(us "$w")" "<= 10 ms" "$(verdict "$w" '<=' 10000)"
note "3/7 CPU of a blocked waiter (${CPU_N} x $((CPU_HOLD_MS - 100)) ms each)"
"$B" wake "$CPU_N" "$CPU_HOLD_MS" -c -- \
	wslock "$WSLOCK" -d "$REG/b3" run -q "$WS3" -- "$B" hold +++ \
	"$WSLOCK" -d "$REG/b3" run -q "$WS3" -- "$B" stamp ::: \
	flock flock "$WS_BASE/f/w1.lock" "$B" hold +++ \
	flock "$WS_BASE/f/w1.lock" "$B" stamp >"$OUT/3-cpu.tsv"
w=$(get "$OUT/3-cpu.tsv" wslock 9)
f=$(get "$OUT/3-cpu.tsv" flock 9)
bl=$(get "$OUT/3-cpu.tsv" wslock 10)
row 3 "CPU while blocked ${bl} ms (max)" "$(us "$w")" "$(us "$f")" "$(us "$w")" "< 20 ms" "$(verdict "$w" '<=' 20000)"

# --- 4. registry scale ---------------------------------------------------
note "4/7 registry scale: filling registries ($SCALE_1K, $SCALE_10K, $SCALE_SIB sibling locks)"
S=$WS_BASE/s
mkdir -p "$S/u" "$S/t/ws" "$S/t/sib"
(cd "$S/u" && seq -f 'd%05g' 0 $((SCALE_10K - 1)) | xargs mkdir)
(cd "$S/t/sib" && seq -f 'd%05g' 0 $((SCALE_SIB - 1)) | xargs mkdir)
# Filling is setup, not a measurement: when eatmydata(1) is installed it
# turns the fill's fsyncs into no-ops (the files written are the same).
FILL_WRAP=()
have eatmydata && FILL_WRAP=(eatmydata)
fill() { # fill REGISTRY DIR COUNT
	local t0=$SECONDS
	seq -f "$2/d%05g" 0 $(($3 - 1)) |
		xargs -P2 -n1 "${FILL_WRAP[@]}" "$WSLOCK" -d "$1" acquire -q --pid "$HOLDER" >/dev/null
	local got
	got=$(find "$1/locks" -mindepth 1 -maxdepth 1 | wc -l)
	[ "$got" -eq "$3" ] || { note "fill $1: $got locks, expected $3"; exit 1; }
	note "  $3 locks in $((SECONDS - t0)) s"
	echo "$3 locks in $(basename "$1"): $((SECONDS - t0)) s" >>"$OUT/4-fill.txt"
}
"$WSLOCK" -d "$REG/s0" inspect --all >/dev/null  # nothing there: creates nothing
fill "$REG/s1k" "$S/u" "$SCALE_1K"
fill "$REG/s10k" "$S/u" "$SCALE_10K"
fill "$REG/ssib" "$S/t/sib" "$SCALE_SIB"
"$WSLOCK" -d "$REG/s0" run -q "$S/t/ws" -- true  # creates the empty registry
note "4/7 acquire+release (run -- true) against each registry (${N4} alternating runs)"
"$B" alt "$N4" 3 -- \
	wslock-0 "$WSLOCK" -d "$REG/s0" run -q "$S/t/ws" -- true ::: \
	wslock-1k "$WSLOCK" -d "$REG/s1k" run -q "$S/t/ws" -- true ::: \
	wslock-10k "$WSLOCK" -d "$REG/s10k" run -q "$S/t/ws" -- true ::: \
	wslock-sib1k "$WSLOCK" -d "$REG/ssib" run -q "$S/t/ws" -- true ::: \
	flock flock "$WS_BASE/f/s.lock" true >"$OUT/4-scale.tsv"
w0=$(get "$OUT/4-scale.tsv" wslock-0 3)
w1=$(get "$OUT/4-scale.tsv" wslock-1k 3)
w10=$(get "$OUT/4-scale.tsv" wslock-10k 3)
ws=$(get "$OUT/4-scale.tsv" wslock-sib1k 3)
f=$(get "$OUT/4-scale.tsv" flock 3)
R4=$(ratio "$w10" "$w0")
p10r=$(ratio "$(get "$OUT/4-scale.tsv" wslock-10k 4)" "$(get "$OUT/4-scale.tsv" wslock-0 4)")
row 4 "acquire+release, ${SCALE_10K} held / 0 held" "$(ms "$w10") / $(ms "$w0")" "$(ms "$f")" "ratio $R4 (p10 ratio $p10r)" "<= 1.2" "$(verdict "$R4" '<=' 1.2)"
R4s=$(ratio "$ws" "$w0")
row 4 "acquire+release, ${SCALE_SIB} under a sibling / 0" "$(ms "$ws") / $(ms "$w0")" "$(ms "$f")" "ratio $R4s" "(report)" "-"
note "4/7 inspect --all against the kernel's lock list over the same number of flock(2) locks (${NI} alternating runs)"
# flock's side: cat /proc/locks lists every kernel lock (lslocks reads it
# too, but resolves paths in O(n^2): it is measured at the 1k size only).
mkdir -p "$WS_BASE/fl1" "$WS_BASE/fl2"
"$B" alt "$NI" 1 -- \
	inspect-0 "$WSLOCK" -d "$REG/s0" inspect --all ::: \
	proclocks-0 cat /proc/locks >"$OUT/4-inspect-0.tsv"
hold_flocks() { # hold_flocks COUNT DIR: background holder, waits until ready
	local fifo=$WS_BASE/ready.$RANDOM
	mkfifo "$fifo"
	"$B" holdflocks "$1" "$2" >"$fifo" &
	PIDS+=("$!")
	read -r _ <"$fifo"
	rm -f "$fifo"
}
hold_flocks "$SCALE_1K" "$WS_BASE/fl1"
"$B" alt "$NI" 1 -- \
	inspect-1k "$WSLOCK" -d "$REG/s1k" inspect --all ::: \
	proclocks-1k cat /proc/locks ::: \
	lslocks-1k lslocks >"$OUT/4-inspect-1k.tsv"
hold_flocks $((SCALE_10K - SCALE_1K)) "$WS_BASE/fl2"
"$B" alt "$NI" 1 -- \
	inspect-10k "$WSLOCK" -d "$REG/s10k" inspect --all ::: \
	proclocks-10k cat /proc/locks >"$OUT/4-inspect-10k.tsv"
cat "$OUT"/4-inspect-*.tsv >"$OUT/4-inspect.tsv"
i0=$(get "$OUT/4-inspect.tsv" inspect-0 3)
i1=$(get "$OUT/4-inspect.tsv" inspect-1k 3)
i10=$(get "$OUT/4-inspect.tsv" inspect-10k 3)
l10=$(get "$OUT/4-inspect.tsv" proclocks-10k 3)
PERLOCK=$(awk -v a="$i10" -v b="$i1" -v n=$((SCALE_10K - SCALE_1K)) 'BEGIN { printf "%.1f", (a - b) / n }')
GROW=$(awk -v a="$i10" -v b="$i1" -v z="$i0" 'BEGIN { if (b - z > 0) printf "%.1f", (a - z) / (b - z); else print "n/a" }')
row 4 "inspect --all, ${SCALE_10K} locks" "$(ms "$i10")" "$(ms "$l10") (cat /proc/locks)" "${PERLOCK} us/lock; (t10k-t0)/(t1k-t0) = $GROW" "linear (10 = linear)" "$(verdict "$GROW" '<=' 13)"

# --- 5. depth ------------------------------------------------------------
note "5/7 workspace depth (${N5} alternating runs)"
DEPTHS="1 8 32 64"
base_depth=$(printf '%s' "$WS_BASE" | tr -cd / | wc -c)
DARGS=()
for d in $DEPTHS; do
	p=$WS_BASE
	k=$base_depth
	while [ "$k" -lt "$d" ]; do p=$p/d; k=$((k + 1)); done
	mkdir -p "$p"
	real=$(printf '%s' "$p" | tr -cd / | wc -c)
	[ "$real" -eq "$d" ] || note "  depth $d not reachable here: using $real"
	DARGS+=(wslock-d$d "$WSLOCK" -d "$REG/b5" run -q "$p" -- true ::: flock-d$d flock "$p/.flock" true :::)
done
unset 'DARGS[${#DARGS[@]}-1]'
"$B" alt "$N5" 3 -- "${DARGS[@]}" >"$OUT/5-depth.tsv"
# Least-squares slope of median vs depth, for both.
slope() { # slope PREFIX
	for d in $DEPTHS; do printf '%s\t%s\n' "$d" "$(get "$OUT/5-depth.tsv" "$1$d" 3)"; done |
		awk -F'\t' '{ n++; sx += $1; sy += $2; sxx += $1 * $1; sxy += $1 * $2 }
			END { printf "%.1f", (n * sxy - sx * sy) / (n * sxx - sx * sx) }'
}
SW=$(slope wslock-d)
SF=$(slope flock-d)
d1=$(get "$OUT/5-depth.tsv" wslock-d1 3)
d64=$(get "$OUT/5-depth.tsv" wslock-d64 3)
f1=$(get "$OUT/5-depth.tsv" flock-d1 3)
f64=$(get "$OUT/5-depth.tsv" flock-d64 3)
row 5 "run -- true, depth 64 / depth 1" "$(ms "$d64") / $(ms "$d1")" "$(ms "$f64") / $(ms "$f1")" "ratio $(ratio "$d64" "$d1"); ${SW} us/level (flock ${SF})" "linear, small constant" "$(verdict "$SW" '<=' 50)"

# --- 6. memory -----------------------------------------------------------
w=$(get "$OUT/1-uncontended.tsv" wslock 8)
f=$(get "$OUT/1-uncontended.tsv" flock 8)
R6=$(ratio "$w" "$f")
row 6 "peak RSS, run -- true (median)" "$w KiB" "$f KiB" "ratio $R6" "<= 2" "$(verdict "$R6" '<=' 2)"
w=$(get "$OUT/4-inspect.tsv" inspect-10k 8)
f=$(get "$OUT/4-inspect.tsv" proclocks-10k 8)
row 6 "peak RSS, inspect --all (${SCALE_10K})" "$w KiB" "$f KiB (cat /proc/locks)" "ratio $(ratio "$w" "$f")" "(report)" "-"

# --- 7. syscall profile --------------------------------------------------
note "7/7 syscall profile"
WS7=$WS_BASE/p1
mkdir -p "$WS7"
R7=$REG/b7
"$WSLOCK" -d "$R7" run -q "$WS7" -- true
SYNCS='trace=fsync,fdatasync,syncfs,sync_file_range,sync'
count_syncs() { grep -cE '^[0-9 ]*(fsync|fdatasync|syncfs|sync_file_range|sync)\(' "$1" || true; }
if have strace; then
	strace -c -o "$OUT/7-strace-run.txt" "$WSLOCK" -d "$R7" run -q "$WS7" -- true
	strace -c -o "$OUT/7-strace-flock.txt" flock "$WS_BASE/f/p1.lock" true
	strace -f -y -e "$SYNCS" -o "$OUT/7-sync-run.txt" "$WSLOCK" -d "$R7" run -q "$WS7" -- true
	strace -f -y -e "$SYNCS" -o "$OUT/7-sync-acquire.txt" "$WSLOCK" -d "$R7" acquire -q --pid "$HOLDER" "$WS7" >"$OUT/7-owner.json"
	strace -f -y -e "$SYNCS" -o "$OUT/7-sync-inspect.txt" "$WSLOCK" -d "$R7" inspect "$WS7" >/dev/null
	strace -f -y -e "$SYNCS" -o "$OUT/7-sync-inspect-all.txt" "$WSLOCK" -d "$R7" inspect --all >/dev/null
	if have jq; then
		token=$(jq -r .token "$OUT/7-owner.json")
	else
		token=$(grep -o '"token":"[0-9a-f]*"' "$OUT/7-owner.json" | cut -d'"' -f4)
	fi
	strace -f -y -e "$SYNCS" -o "$OUT/7-sync-release.txt" "$WSLOCK" -d "$R7" release -q --token "$token" "$WS7" >/dev/null
	nrun=$(count_syncs "$OUT/7-sync-run.txt")
	nacq=$(count_syncs "$OUT/7-sync-acquire.txt")
	nrel=$(count_syncs "$OUT/7-sync-release.txt")
	nins=$(count_syncs "$OUT/7-sync-inspect.txt")
	nall=$(count_syncs "$OUT/7-sync-inspect-all.txt")
	nfl=$(awk '$NF ~ /^(fsync|fdatasync|syncfs)$/ { s += $4 } END { print s + 0 }' "$OUT/7-strace-flock.txt")
	calls=$(awk '$NF == "total" { print $4 }' "$OUT/7-strace-run.txt")
	fcalls=$(awk '$NF == "total" { print $4 }' "$OUT/7-strace-flock.txt")
	row 7 "syscalls of one run (strace -c, no -f)" "$calls" "$fcalls" "syncs: run $nrun, acquire $nacq" "listed below" "-"
	bad=$((nrel + nins + nall))
	row 7 "fsyncs in release / inspect / inspect --all" "$nrel / $nins / $nall" "$nfl" "$bad" "0" "$(verdict "$bad" '<=' 0)"
else
	row 7 "syscall profile" "-" "-" "strace missing" "-" "n/a"
fi

# --- profiles (full run): what bounds the figures -------------------------
if [ "$MODE" = full ]; then
	note "profiles: strace -w -c, perf stat, inotify close, callgrind"
	P=$OUT/profile
	mkdir -p "$P"
	if have strace; then
		strace -w -c -o "$P/strace-wall-run.txt" "$WSLOCK" -d "$R7" run -q "$WS7" -- true
		for i in $(seq 20); do
			strace -y -T -e trace=fsync,close -o "$P/strace-T.$i" "$WSLOCK" -d "$R7" run -q "$WS7" -- true
		done
		cat "$P"/strace-T.* | grep -E '^fsync\(' | grep -oE '<[0-9.]+>$' | tr -d '<>' |
			awk '{ n++; s += $NF } END { printf "fsync calls: %d in 20 runs, mean %.0f us each, %.2f ms per run\n", n, s / n * 1e6, s / 20 * 1e3 }' \
				>"$P/fsync-cost.txt"
		# Since the fix, an uncontended run opens no inotify descriptor at
		# all (it is created only on a conflict): say so rather than fail.
		{ cat "$P"/strace-T.* | grep -F 'anon_inode:inotify' || true; } | grep -oE '<[0-9.]+>$' | tr -d '<>' |
			sort -n | awk '{ v[NR] = $1 } { if ($1 >= 0.005) c++ }
				END { if (NR == 0) { print "close(inotify fd) in 20 runs: none (no watch is created without a conflict)"; exit }
				      printf "close(inotify fd) in 20 runs: min %.0f us, median %.0f us, max %.0f us, >= 5 ms in %d of %d\n", v[1] * 1e6, v[int((NR + 1) / 2)] * 1e6, v[NR] * 1e6, c, NR }' \
				>"$P/inotify-close-in-run.txt" || true
		rm -f "$P"/strace-T.*
	fi
	"$B" inotifyclose 200 "$R7/locks" >"$P/inotify-close.tsv"
	if have perf; then
		perf stat -r 50 -e task-clock,context-switches,page-faults \
			"$WSLOCK" -d "$R7" run -q "$WS7" -- true 2>"$P/perf-stat-run.txt" >/dev/null || true
		perf stat -r 50 -e task-clock,context-switches,page-faults \
			flock "$WS_BASE/f/p1.lock" true 2>"$P/perf-stat-flock.txt" >/dev/null || true
		perf stat -r 50 -e task-clock,context-switches,page-faults \
			"$WSLOCK" --version 2>"$P/perf-stat-version.txt" >/dev/null || true
	fi
	if have valgrind && have callgrind_annotate; then
		valgrind --tool=callgrind --callgrind-out-file="$P/callgrind.out" \
			"$WSLOCK" -d "$R7" run -q "$WS7" -- true >/dev/null 2>&1 || true
		callgrind_annotate --inclusive=no "$P/callgrind.out" 2>/dev/null |
			grep -E '^ *[0-9,]+ \(' | head -12 >"$P/callgrind-top.txt" || true
	fi
fi

# --- the table -----------------------------------------------------------
table() {
	printf '| # | figure | wslock | flock(1) | result | target | verdict |\n'
	printf '|---|---|---|---|---|---|---|\n'
	awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7 }' "$SUMMARY"
}
echo
echo "wslock benchmarks ($MODE run; raw figures in ${OUT#"$ROOT"/})"
echo
table

[ "$MODE" = full ] || exit 0

# --- RESULTS.md ----------------------------------------------------------
tsv_table() { # tsv_table FILE HEADER...
	local f=$1
	shift
	printf '| %s ' "$@"
	printf '|\n|'
	for _ in "$@"; do printf -- '---|'; done
	printf '\n'
	awk -F'\t' '{ s = "|"; for (i = 1; i <= NF; i++) s = s " " $i " |"; print s }' "$f"
}
ALT_H=(label runs median_us p10_us p90_us p99_us mean_us maxrss_median_KiB maxrss_max_KiB cpu_median_us)
fstype=$(findmnt -no FSTYPE -T "$REG" 2>/dev/null || stat -f -c %T "$REG" 2>/dev/null || echo "?")
mnt=$(findmnt -no SOURCE,FSTYPE,OPTIONS -T "$REG" 2>/dev/null || echo "?")
{
	echo "# wslock benchmark results"
	echo
	echo "Generated by \`make bench\` (bench/run.sh); every figure below comes from"
	echo "that one run. Ratios are ratios of medians over alternating runs: the"
	echo "helper (bench/wslbench.c) runs wslock's and flock(1)'s commands in turn,"
	echo "rotating the order every iteration."
	echo
	echo "## Machine"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "- nproc: $(nproc); CPU: $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
	echo "- kernel: $(uname -srm)"
	echo "- memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
	echo "- registry filesystem: $fstype ($mnt)"
	echo "- load average (1, 5, 15 min) at start: $LOAD_START; at end: $(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared: other sessions' builds and tests ran meanwhile; alternating runs expose both tools to the same load)"
	echo "- wslock: $WSLOCK_SRC, copied before the run: $("$WSLOCK" --version 2>/dev/null | head -1) (git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet -- src 2>/dev/null || echo ', src/ modified'))"
	echo "- flock: $(flock --version 2>&1 | head -1); hyperfine: $(hyperfine --version 2>/dev/null || echo missing); strace: $(strace -V 2>/dev/null | head -1)"
	echo "- workspaces under $(dirname "$WS_BASE"), registries under $(dirname "$REG") (fresh per benchmark); durability on (wslock always fsyncs on acquire)"
	echo
	echo "## Summary"
	echo
	table
	echo
	echo "## 1. Uncontended: \`wslock run WS -- true\` vs \`flock FILE true\`"
	echo
	tsv_table "$OUT/1-uncontended.tsv" "${ALT_H[@]}"
	if [ -f "$OUT/1-hyperfine.md" ]; then
		echo
		echo "Cross-check with hyperfine (not alternating: all runs of one command, then the other):"
		echo
		cat "$OUT/1-hyperfine.md"
	fi
	echo
	echo "## 2. Contended handoff: ${C_WORKERS} workers x ${C_ITERS} iterations, ${C_ROUNDS} rounds each"
	echo
	echo "Wait = from the worker's fork of the command to its child's first instruction"
	echo "(the child is \`wslbench stamp\` instead of \`true\`, for both). Per-worker wait"
	echo "= sum of one worker's waits; the ratios are those of the worst round."
	echo
	tsv_table "$OUT/2-contended.tsv" label rounds wall_median_ms wall_min_ms wall_max_ms wait_mean_us wait_p50_us wait_p99_us wait_max_us max_worker_wait/mean max_single_wait/mean
	echo
	echo "## 3. Wake-up latency (holder's child exits at a recorded instant -> waiter's child starts)"
	echo
	tsv_table "$OUT/3-wake.tsv" label trials median_us p10_us p90_us p99_us max_us - - delay_ms
	echo
	echo "CPU time of the blocked waiter process (/proc/PID/schedstat), measured from 100 ms after it"
	echo "started until the release, i.e. while it was blocked:"
	echo
	tsv_table "$OUT/3-cpu.tsv" label trials latency_median_us p10_us p90_us p99_us max_us cpu_blocked_median_us cpu_blocked_max_us blocked_ms
	echo
	echo "## 4. Registry scale"
	echo
	echo "\`run -q WS -- true\` (one acquire + release) on the same workspace against registries holding"
	echo "0, ${SCALE_1K} and ${SCALE_10K} locks on unrelated workspaces (\`$S/u/dNNNNN\`, held with"
	echo "\`acquire --pid\` of a sleeping process) and ${SCALE_SIB} locks under the sibling directory \`$S/t/sib\`"
	echo "of the workspace \`$S/t/ws\`; flock beside it."
	echo
	tsv_table "$OUT/4-scale.tsv" "${ALT_H[@]}"
	echo
	echo "\`inspect --all\` against \`cat /proc/locks\` (and, at ${SCALE_1K}, \`lslocks\`, which is quadratic) listing"
	echo "the same number of kernel flock(2) locks (held by \`wslbench holdflocks\`), alternating, per size:"
	echo
	tsv_table "$OUT/4-inspect.tsv" "${ALT_H[@]}"
	echo
	echo "Filling (setup, not measured side by side${FILL_WRAP[*]:+, under ${FILL_WRAP[*]}}): $(paste -sd';' "$OUT/4-fill.txt" | sed 's/;/; /g')."
	echo
	echo "Growth: $PERLOCK us per additional lock; (t10k - t0) / (t1k - t0) = $GROW (linear = 10)."
	echo
	echo "## 5. Depth: \`run -- true\` at workspace depths $DEPTHS (path components)"
	echo
	tsv_table "$OUT/5-depth.tsv" "${ALT_H[@]}"
	echo
	echo "Least-squares slope of the median: wslock ${SW} us per level, flock ${SF} us per level."
	echo
	echo "## 6. Memory (peak RSS from wait4, the command and its waited-for child)"
	echo
	echo "See the maxrss columns above: run -- true in section 1, inspect --all in section 4."
	echo
	echo "## 7. Syscall profile of one uncontended \`wslock run WS -- true\` (strace -c, wslock process only)"
	echo
	if [ -f "$OUT/7-strace-run.txt" ]; then
		echo '```'
		cat "$OUT/7-strace-run.txt"
		echo '```'
		echo
		echo "flock(1), same way:"
		echo
		echo '```'
		cat "$OUT/7-strace-flock.txt"
		echo '```'
		echo
		echo "Every fsync-family call, by command (strace -f -y):"
		echo
		for c in run acquire release inspect inspect-all; do
			echo "- \`$c\`: $(count_syncs "$OUT/7-sync-$c.txt")"
		done
		echo
		echo '```'
		grep -E '(fsync|fdatasync|syncfs|sync_file_range)\(' "$OUT/7-sync-run.txt" |
			sed -E "s#$REG#REG#g; s/^[0-9]+ +//; s/[0-9a-f]{64}/KEY/g; s/acq\.[0-9]+\.[0-9a-f]+/acq.PID.RAND/"
		echo '```'
	else
		echo "strace was missing: not measured."
	fi
	echo
	echo "## Profiles (this run)"
	echo
	P=$OUT/profile
	for f in fsync-cost.txt inotify-close-in-run.txt; do
		[ -f "$P/$f" ] && { echo "- $(cat "$P/$f")"; }
	done
	if [ -f "$P/inotify-close.tsv" ]; then
		echo "- inotify_init1 + add_watch(locks/) + close, 200 times in a loop (wslbench inotifyclose):"
		echo "  close() median $(cut -f3 "$P/inotify-close.tsv") us, p10 $(cut -f4 "$P/inotify-close.tsv") us, p90 $(cut -f5 "$P/inotify-close.tsv") us"
	fi
	echo
	if [ -f "$P/strace-wall-run.txt" ]; then
		echo "Wall time per syscall (strace -w -c) of one run:"
		echo
		echo '```'
		head -14 "$P/strace-wall-run.txt"
		echo '```'
		echo
	fi
	for f in run flock version; do
		if [ -s "$P/perf-stat-$f.txt" ]; then
			echo "perf stat -r 50 ($f):"
			echo
			echo '```'
			grep -E 'task-clock|context-switches|page-faults|elapsed|Performance' "$P/perf-stat-$f.txt" | sed 's/^ *//'
			echo '```'
			echo
		fi
	done
	if [ -s "$P/callgrind-top.txt" ]; then
		echo "callgrind, wslock process only, top functions by instructions (Ir):"
		echo
		echo '```'
		cat "$P/callgrind-top.txt"
		echo '```'
		echo
	fi
	cat "$ROOT/bench/analysis.md"
} >"$RESULTS"
echo
echo "wrote ${RESULTS#"$ROOT"/}"
