#!/usr/bin/env bash
# bench/run.sh - wslock's benchmarks: every figure of issue 14's table, each
# measured in the same run as flock(1) (alternating runs, ratios of
# medians) and, where one exists, beside the physical limit: bench/wsllimit,
# a static C program that does only the durable steps (fork+exec, one owner
# write, fsync, rename, directory fsync).
#
#   bench/run.sh [--smoke] [FIGURE...]
#
#   FIGURE (default: all, in this order)
#     uncontended        run WS -- true (registry on "ext4", below) vs flock FILE true
#     uncontended-tmpfs  the same with registry and lock file on tmpfs (/dev/shm)
#     uncontended-nojournal  the same on the scratch directory's own
#                        filesystem (this machine: an ext4 without a journal)
#     acquire-release    acquire + release vs lockfile-create + lockfile-remove
#     contended          8 workers x 50 iterations, total wall
#     contended-tmpfs    the same on tmpfs
#     contended-nojournal  the same on the scratch filesystem, with fairness
#     fairness           worst single wait / mean wait, and the worst wait itself
#     wakeup             release -> next holder's command starts: median, p99
#     wakeup-nojournal   the same on the scratch filesystem
#     blocked            wake-ups of a blocked waiter over 5 s (voluntary
#                        context switches, /proc/PID/status)
#     shared             run --shared WS -- true vs flock -s FILE true (and the limit)
#     readers-writer     8 readers (run --shared / flock -s) and 1 writer (run /
#                        flock -x), each holding for 2 ms: total wall, the writer's wait
#     multi3             run A B C -- true vs flock A flock B flock C true (and the
#                        limit of three documents: wsllimit -n 3)
#     depth              depth 30 / depth 1, warm (markers kept) and cold
#                        (reclaim --yes between runs)
#     syscalls           syscalls of one uncontended run (strace -f -c)
#     rss                peak RSS of run -- true
#     scale              acquire + release with 10 000 locks held / none
#     inspect-all        inspect --all at 10 000 locks: us per lock, memory
#     profiles           strace -w, perf stat, callgrind (full runs only)
#     etcd-uncontended   run --backend etcd WS -- true vs etcdctl lock NAME true
#                        (one throwaway etcd member on loopback)
#     etcd-contended     8 workers, etcd backend vs etcdctl lock: total wall
#                        and p99 wait
#
#   --smoke   every figure once at a tiny size (seconds): asserts no timing,
#             fails only when a benchmark itself breaks (CI runs this)
#
# "ext4" is what most registries live on: an ext4 with its journal (the
# default of mkfs.ext4). As root, the disk figures run on one made for the
# run (a 512 MiB sparse image in BENCH_TMP, loop-mounted, unmounted and
# removed at exit); the scratch directory's own filesystem (this machine's
# root: an ext4 made without a journal, where every changed directory is
# fsynced, see the durability note atop src/registry_local.c) is measured
# beside it as "nojournal". Not root, or no loop device (BENCH_EXT4=0 skips
# it): the disk figures run on the scratch filesystem and RESULTS.md says
# so. The registry-scale figures (scale, inspect-all) always run on the
# scratch filesystem: 10 000 locks need more inodes than the image has.
#
# A full run of all figures writes bench/RESULTS.md (wslock, flock and the
# limit side by side, then the raw tables and bench/analysis.md); raw figures
# go to bench/results/MODE/. Environment: WSLOCK (binary, default ./wslock),
# WSLBENCH and WSLLIMIT (helpers, default bench/wslbench, bench/wsllimit),
# BENCH_TMP (registries, default $TMPDIR or /tmp), BENCH_TMPFS (default
# /dev/shm). Needs flock(1), strace and lockfile-progs; hyperfine, perf and
# valgrind are used when present (as root, missing tools are installed with
# apt-get).
set -euo pipefail

MODE=full
FIGS=()
ALL_FIGS=(uncontended uncontended-tmpfs uncontended-nojournal acquire-release contended contended-tmpfs
	contended-nojournal fairness wakeup wakeup-nojournal blocked shared readers-writer multi3 depth
	syscalls rss scale inspect-all profiles etcd-uncontended etcd-contended)
for a in "$@"; do
	case $a in
	--smoke) MODE=smoke ;;
	--full) MODE=full ;;
	-h | --help)
		sed -n '2,60p' "$0"
		exit 0
		;;
	-*)
		echo "usage: bench/run.sh [--smoke] [FIGURE...]" >&2
		exit 64
		;;
	*)
		[[ " ${ALL_FIGS[*]} " == *" $a "* ]] || { echo "bench: unknown figure '$a' (bench/run.sh --help)" >&2; exit 64; }
		FIGS+=("$a")
		;;
	esac
done
WRITE_RESULTS=0
if [ ${#FIGS[@]} -eq 0 ]; then
	FIGS=("${ALL_FIGS[@]}")
	[ "$MODE" = full ] && WRITE_RESULTS=1
fi

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tests/lib.sh
. "$ROOT/tests/lib.sh"
WSLOCK=$(realpath "${WSLOCK:-$ROOT/wslock}")
B=$(realpath "${WSLBENCH:-$ROOT/bench/wslbench}")
LIMIT=$(realpath "${WSLLIMIT:-$ROOT/bench/wsllimit}")
OUT=$ROOT/bench/results/$MODE
RESULTS=$ROOT/bench/RESULTS.md

# The benchmarks may themselves run under a wslock run or with a user's
# settings: none of that may leak in.
wsl_clean_env
unset WSLOCK_DIR
export LC_ALL=C

# --- tools ---------------------------------------------------------------
need_pkgs=()
command -v flock >/dev/null || need_pkgs+=(util-linux)
command -v strace >/dev/null || need_pkgs+=(strace)
command -v lockfile-create >/dev/null || need_pkgs+=(lockfile-progs)
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
		echo "bench: missing ${need_pkgs[*]} (apt-get install ${need_pkgs[*]}); the figures that need them say n/a" >&2
	fi
fi
command -v flock >/dev/null || { echo "bench: flock(1) is required (util-linux)" >&2; exit 1; }
for b in "$WSLOCK" "$B" "$LIMIT"; do
	[ -x "$b" ] || { echo "bench: $b is not built (make bench/wslbench bench/wsllimit)" >&2; exit 1; }
done
have() { command -v "$1" >/dev/null; }

# --- sizes ---------------------------------------------------------------
if [ "$MODE" = full ]; then
	N1=300 W1=20                    # uncontended: runs per command, warm-up
	C_ROUNDS=5 C_WORKERS=8 C_ITERS=50
	WAKE_N=200 WAKE_DELAY=30
	BLK_N=3 BLK_HOLD_MS=5100        # blocked 5 s (from 100 ms after start to the release)
	SCALE=10000 SCALE_MID=1000 N_SCALE=100 N_INSPECT=10
	N_DEPTH=100 DEEP=30
	N_AR=200
	E_N=100 E_ROUNDS=3 E_ITERS=20
	RW_ROUNDS=3 RW_READERS=8 RW_ITERS=50 RW_WRITES=10 RW_WORK_MS=2
else
	N1=3 W1=1
	C_ROUNDS=1 C_WORKERS=2 C_ITERS=3
	WAKE_N=2 WAKE_DELAY=30
	BLK_N=1 BLK_HOLD_MS=300
	SCALE=30 SCALE_MID=10 N_SCALE=3 N_INSPECT=2
	N_DEPTH=3 DEEP=30
	N_AR=3
	E_N=3 E_ROUNDS=1 E_ITERS=2
	RW_ROUNDS=1 RW_READERS=2 RW_ITERS=2 RW_WRITES=1 RW_WORK_MS=2
fi

# --- scratch space -------------------------------------------------------
TMPBASE=${BENCH_TMP:-${TMPDIR:-/tmp}}
REG=$(mktemp -d "$TMPBASE/wslock-bench-reg.XXXXXX")
# Workspaces: at the root when we may write there, so that depth 1 exists.
if WS_BASE=$(mktemp -d /wslock-bench.XXXXXX 2>/dev/null); then :; else
	WS_BASE=$(mktemp -d "$TMPBASE/wslock-bench-ws.XXXXXX")
fi
TMPFS=
tmpfs_dir=${BENCH_TMPFS:-/dev/shm}
if [ "$(stat -f -c %T "$tmpfs_dir" 2>/dev/null)" = tmpfs ]; then
	TMPFS=$(mktemp -d "$tmpfs_dir/wslock-bench.XXXXXX")
fi
# Measure private copies: the tree's binaries may be rebuilt during the run.
WSLOCK_SRC=$WSLOCK
WSLOCK=$(wsl_private_copy "$WSLOCK" "$REG")
LIMIT=$(wsl_private_copy "$LIMIT" "$REG")
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	[ -z "${ETCD_DIR:-}" ] || "$ROOT/tests/etcd/cluster.sh" stop "$ETCD_DIR/c" >/dev/null 2>&1 || true
	if [ -n "$EXT4_MNT" ]; then
		umount "$EXT4_MNT" 2>/dev/null || umount -l "$EXT4_MNT" 2>/dev/null || true
	fi
	rm -rf "$REG" "$WS_BASE" ${TMPFS:+"$TMPFS"} ${ETCD_DIR:+"$ETCD_DIR"} ${EXT4_IMG:+"$EXT4_IMG" "$EXT4_MNT"}
}
EXT4_IMG= EXT4_MNT=
trap cleanup EXIT
trap 'exit 130' INT TERM
rm -rf "$OUT"
mkdir -p "$OUT" "$WS_BASE/f"

note() { printf '%s\n' "bench: $*" >&2; }

# DISK: where the disk figures keep their registries. A journaled ext4
# made for the run when we may (root, a loop device), else the scratch
# filesystem; NOJ: the scratch filesystem, measured beside it when DISK is
# the made one.
DISK=$REG NOJ= DISK_NOTE=
if [ "${BENCH_EXT4:-1}" = 0 ]; then
	DISK_NOTE="BENCH_EXT4=0"
elif [ "$(id -u)" != 0 ]; then
	DISK_NOTE="not root: no loop-mounted ext4"
elif ! command -v mkfs.ext4 >/dev/null; then
	DISK_NOTE="no mkfs.ext4 (e2fsprogs)"
else
	EXT4_IMG=$(mktemp "$TMPBASE/wslock-bench-ext4.XXXXXX")
	EXT4_MNT=$(mktemp -d "$TMPBASE/wslock-bench-ext4mnt.XXXXXX")
	if truncate -s 512M "$EXT4_IMG" && mkfs.ext4 -q -F "$EXT4_IMG" >/dev/null 2>&1 &&
		mount -o loop "$EXT4_IMG" "$EXT4_MNT" 2>/dev/null; then
		DISK=$EXT4_MNT/b NOJ=$REG
		mkdir -m 0700 "$DISK"
	else
		DISK_NOTE="could not loop-mount an ext4 image"
		rmdir "$EXT4_MNT"
		rm -f "$EXT4_IMG"
		EXT4_IMG= EXT4_MNT=
	fi
fi
[ -z "$DISK_NOTE" ] || note "disk figures on $(stat -f -c %T "$REG") at $TMPBASE ($DISK_NOTE)"

# get FILE LABEL FIELD: one field of a helper's summary line.
get() { awk -F'\t' -v l="$2" -v f="$3" '$1 == l { print $f; exit }' "$1"; }
# ratio A B (2 decimals)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b > 0) printf "%.2f", a / b; else print "n/a" }'; }
# verdict VALUE OP LIMIT -> met / MISSED
verdict() {
	[ "$MODE" = full ] || { echo "(smoke)"; return; }
	awk -v v="$1" -v op="$2" -v l="$3" 'BEGIN {
		if (v == "" || v == "n/a") { print "n/a"; exit }
		ok = (op == "<=") ? (v + 0 <= l + 0) : (v + 0 >= l + 0)
		print ok ? "met" : "MISSED" }'
}
ms() { awk -v u="$1" 'BEGIN { if (u == "") print "n/a"; else printf "%.2f ms", u / 1000 }'; }
us() { awk -v u="$1" 'BEGIN { if (u == "") print "n/a"; else printf "%.0f us", u }'; }

SUMMARY=$OUT/summary.tsv
: >"$SUMMARY"
# row FIGURE WSLOCK FLOCK LIMIT RATIO TARGET VERDICT
row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$SUMMARY"; }

# A long-lived process to hold --pid locks for.
wsl_start_sleeper 100000
HOLDER=$SLEEPER_PID
PIDS+=("$HOLDER")

# --- measurements (each once per run; figures share them) ---------------

# uncontended_on BASE TAG: run -- true, flock and the limit, alternating.
uncontended_on() {
	local base=$1 tag=$2 f=$OUT/uncontended-$2.tsv
	[ -s "$f" ] && return 0
	mkdir -p "$base/ws-u" "$base/limit-u" "$base/f"
	note "uncontended ($tag): ${N1} alternating runs each of wslock, flock and the limit"
	"$B" alt "$N1" "$W1" -- \
		wslock "$WSLOCK" -d "$base/reg-u" run -q "$base/ws-u" -- true ::: \
		flock flock "$base/f/u.lock" true ::: \
		limit "$LIMIT" "$base/limit-u" true >"$f"
}
measure_uncontended() { uncontended_on "$DISK" disk; }

# contend_on BASE TAG: WORKERS x ITERS, ROUNDS rounds.
contend_on() {
	local base=$1 tag=$2 f=$OUT/contended-$2.tsv
	[ -s "$f" ] && return 0
	mkdir -p "$base/ws-c" "$base/f"
	note "contended ($tag): ${C_WORKERS} workers x ${C_ITERS} iterations, ${C_ROUNDS} rounds"
	"$B" contend "$C_ROUNDS" "$C_WORKERS" "$C_ITERS" -- \
		wslock "$WSLOCK" -d "$base/reg-c" run -q "$base/ws-c" -- "$B" stamp ::: \
		flock flock "$base/f/c.lock" "$B" stamp >"$f"
}

# wake_measure FILE BASE DELAY_MS N [-c]: registry in BASE.
wake_measure() {
	local f=$1 base=$2 delay=$3 n=$4 ws=$WS_BASE/w1
	shift 4
	[ -s "$f" ] && return 0
	mkdir -p "$ws"
	"$B" wake "$n" "$delay" "$@" -- \
		wslock "$WSLOCK" -d "$base/reg-w" run -q "$ws" -- "$B" hold +++ \
		"$WSLOCK" -d "$base/reg-w" run -q "$ws" -- "$B" stamp ::: \
		flock flock "$WS_BASE/f/w1.lock" "$B" hold +++ \
		flock "$WS_BASE/f/w1.lock" "$B" stamp >"$f"
}

# fill REGISTRY COUNT: COUNT locks held (acquire --pid of the sleeper) on
# unrelated workspaces. Filling is setup, not a measurement: when
# eatmydata(1) is installed it turns the fill's fsyncs into no-ops.
FILL_WRAP=()
have eatmydata && FILL_WRAP=(eatmydata)
fill() {
	local reg=$1 n=$2 t0=$SECONDS got
	[ -d "$reg/locks" ] && return 0
	mkdir -p "$WS_BASE/u"
	(cd "$WS_BASE/u" && seq -f 'd%05g' 0 $((n - 1)) | xargs mkdir -p)
	"$WSLOCK" -d "$reg" run -q "$WS_BASE/u" -- true
	seq -f "$WS_BASE/u/d%05g" 0 $((n - 1)) |
		xargs -P2 -n1 "${FILL_WRAP[@]}" "$WSLOCK" -d "$reg" acquire -q --pid "$HOLDER" >/dev/null
	got=$(find "$reg/locks" -mindepth 1 -maxdepth 1 | wc -l)
	[ "$got" -eq "$n" ] || { note "fill $reg: $got locks, expected $n"; exit 1; }
	echo "$n locks in $((SECONDS - t0)) s${FILL_WRAP[*]:+ (under ${FILL_WRAP[*]})}" >>"$OUT/fill.txt"
}

# --- the figures ---------------------------------------------------------

fig_uncontended() {
	measure_uncontended
	local f=$OUT/uncontended-disk.tsv w l fl
	w=$(get "$f" wslock 3) fl=$(get "$f" flock 3) l=$(get "$f" limit 3)
	row "uncontended run -- true, median" "$(ms "$w")" "$(ms "$fl")" "$(ms "$l")" \
		"$(ratio "$w" "$fl")x (limit $(ratio "$l" "$fl")x)" "<= 1.35x" "$(verdict "$(ratio "$w" "$fl")" '<=' 1.35)"
	if [ "$MODE" = full ] && have hyperfine; then
		hyperfine -N --warmup 20 --runs 200 --export-markdown "$OUT/uncontended-hyperfine.md" \
			"$WSLOCK -d $DISK/reg-u run -q $DISK/ws-u -- true" "flock $DISK/f/u.lock true" \
			"$LIMIT $DISK/limit-u true" >"$OUT/uncontended-hyperfine.txt" 2>&1 ||
			note "hyperfine cross-check failed (ignored)"
	fi
}

fig_uncontended_tmpfs() {
	if [ -z "$TMPFS" ]; then
		row "uncontended run -- true on tmpfs" "-" "-" "-" "no tmpfs at $tmpfs_dir" "<= 1.1x" "n/a"
		return 0
	fi
	uncontended_on "$TMPFS" tmpfs
	local f=$OUT/uncontended-tmpfs.tsv w l fl
	w=$(get "$f" wslock 3) fl=$(get "$f" flock 3) l=$(get "$f" limit 3)
	row "uncontended run -- true on tmpfs, median" "$(ms "$w")" "$(ms "$fl")" "$(ms "$l")" \
		"$(ratio "$w" "$fl")x (limit $(ratio "$l" "$fl")x)" "<= 1.1x" "$(verdict "$(ratio "$w" "$fl")" '<=' 1.1)"
}

# The figures on the scratch filesystem: only when the headline ones ran
# on a filesystem made for the run (else they would repeat them).
nojournal_label() {
	local t dev name
	t=$(findmnt -fno FSTYPE -T "$NOJ" 2>/dev/null | tr -d ' ') || t=
	[ -n "$t" ] || t=$(stat -f -c %T "$NOJ")
	case $t in
	ext3 | ext4)
		dev=$(findmnt -fno MAJ:MIN -T "$NOJ" 2>/dev/null | tr -d ' ')
		name=$(basename "$(readlink -f "/sys/dev/block/$dev" 2>/dev/null)")
		if [ -n "$dev" ] && [ -n "$name" ] && ls /proc/fs/jbd2 2>/dev/null | grep -q "^$name-"; then
			t="$t (journaled)"
		else
			t="$t without a journal"
		fi
		;;
	esac
	echo "$t"
}

fig_uncontended_nojournal() {
	[ -n "$NOJ" ] || return 0
	uncontended_on "$NOJ" nojournal
	local f=$OUT/uncontended-nojournal.tsv w l fl
	w=$(get "$f" wslock 3) fl=$(get "$f" flock 3) l=$(get "$f" limit 3)
	row "uncontended run -- true on $(nojournal_label), median" "$(ms "$w")" "$(ms "$fl")" "$(ms "$l")" \
		"$(ratio "$w" "$fl")x (limit $(ratio "$l" "$fl")x)" "(report)" "-"
}

fig_acquire_release() {
	local f=$OUT/acquire-release.tsv ws=$WS_BASE/ar w lf
	if ! have lockfile-create; then
		row "acquire + release vs lockfile-create + remove" "-" "-" "-" "lockfile-progs missing" "<= 1.4x" "n/a"
		return 0
	fi
	mkdir -p "$ws"
	note "acquire-release: ${N_AR} alternating pairs each"
	"$B" alt "$N_AR" 3 -- \
		wslock "$WSLOCK" -d "$DISK/reg-ar" acquire -q --pid "$HOLDER" "$ws" +++ \
		"$WSLOCK" -d "$DISK/reg-ar" release -q --token @TOKEN@ "$ws" ::: \
		lockfile lockfile-create --retry 0 "$WS_BASE/f/ar" +++ lockfile-remove "$WS_BASE/f/ar" >"$f"
	w=$(get "$f" wslock 3) lf=$(get "$f" lockfile 3)
	row "acquire + release vs lockfile-create + remove, median" "$(ms "$w")" "$(ms "$lf") (lockfile)" "-" \
		"$(ratio "$w" "$lf")x" "<= 1.4x" "$(verdict "$(ratio "$w" "$lf")" '<=' 1.4)"
}

fig_contended() {
	contend_on "$DISK" disk
	local f=$OUT/contended-disk.tsv w fl
	w=$(get "$f" wslock 3) fl=$(get "$f" flock 3)
	row "contended ${C_WORKERS}x${C_ITERS}: total wall, median" "$w ms" "$fl ms" "-" \
		"$(ratio "$w" "$fl")x" "<= 1.5x" "$(verdict "$(ratio "$w" "$fl")" '<=' 1.5)"
}

fig_contended_tmpfs() {
	if [ -z "$TMPFS" ]; then
		row "contended on tmpfs" "-" "-" "-" "no tmpfs at $tmpfs_dir" "(report)" "-"
		return 0
	fi
	contend_on "$TMPFS" tmpfs
	local f=$OUT/contended-tmpfs.tsv w fl
	w=$(get "$f" wslock 3) fl=$(get "$f" flock 3)
	row "contended ${C_WORKERS}x${C_ITERS} on tmpfs: total wall, median" "$w ms" "$fl ms" "-" \
		"$(ratio "$w" "$fl")x" "(report)" "-"
}

fig_contended_nojournal() {
	[ -n "$NOJ" ] || return 0
	contend_on "$NOJ" nojournal
	local f=$OUT/contended-nojournal.tsv w fl
	w=$(get "$f" wslock 3) fl=$(get "$f" flock 3)
	row "contended ${C_WORKERS}x${C_ITERS} on $(nojournal_label): total wall, median" "$w ms" "$fl ms" "-" \
		"$(ratio "$w" "$fl")x" "(report)" "-"
	row "fairness on $(nojournal_label): worst single wait / mean wait" \
		"$(get "$f" wslock 11)x (worst $(ms "$(get "$f" wslock 9)"))" \
		"$(get "$f" flock 11)x (worst $(ms "$(get "$f" flock 9)"))" "~1x (FIFO)" "$(get "$f" wslock 11)x" "(report)" "-"
}

fig_fairness() {
	contend_on "$DISK" disk
	local f=$OUT/contended-disk.tsv w fl wm fm
	# column 11: worst single wait / mean single wait (worst round); 9: the
	# worst single wait itself, 6: the mean wait.
	w=$(get "$f" wslock 11) fl=$(get "$f" flock 11)
	wm=$(get "$f" wslock 9) fm=$(get "$f" flock 9)
	row "fairness: worst single wait / mean wait" "${w}x (worst $(ms "$wm"), mean $(ms "$(get "$f" wslock 6)"))" \
		"${fl}x (worst $(ms "$fm"), mean $(ms "$(get "$f" flock 6)"))" "~1x (FIFO)" "${w}x" "<= 3x" "$(verdict "$w" '<=' 3)"
}

fig_wakeup() {
	note "wakeup: ${WAKE_N} alternating trials each"
	wake_measure "$OUT/wakeup.tsv" "$DISK" "$WAKE_DELAY" "$WAKE_N"
	local f=$OUT/wakeup.tsv w fl wp fp rp
	w=$(get "$f" wslock 3) fl=$(get "$f" flock 3)
	wp=$(get "$f" wslock 6) fp=$(get "$f" flock 6)
	row "wake-up latency, median" "$(us "$w")" "$(us "$fl")" "-" "$(ratio "$w" "$fl")x" "<= 1.5x" \
		"$(verdict "$(ratio "$w" "$fl")" '<=' 1.5)"
	rp=$(ratio "$wp" "$fp")
	row "wake-up latency, p99" "$(us "$wp")" "$(us "$fp")" "-" "${rp}x" "<= 3x flock's p99" "$(verdict "$rp" '<=' 3)"
}

fig_wakeup_nojournal() {
	[ -n "$NOJ" ] || return 0
	note "wakeup-nojournal: ${WAKE_N} alternating trials each"
	wake_measure "$OUT/wakeup-nojournal.tsv" "$NOJ" "$WAKE_DELAY" "$WAKE_N"
	local f=$OUT/wakeup-nojournal.tsv w fl wp fp
	w=$(get "$f" wslock 3) fl=$(get "$f" flock 3)
	wp=$(get "$f" wslock 6) fp=$(get "$f" flock 6)
	row "wake-up latency on $(nojournal_label), median / p99" "$(us "$w") / $(us "$wp")" "$(us "$fl") / $(us "$fp")" "-" \
		"$(ratio "$w" "$fl")x / $(ratio "$wp" "$fp")x" "(report)" "-"
}

fig_blocked() {
	note "blocked: ${BLK_N} trials of a waiter blocked $((BLK_HOLD_MS - 100)) ms"
	wake_measure "$OUT/blocked.tsv" "$DISK" "$BLK_HOLD_MS" "$BLK_N" -c
	local f=$OUT/blocked.tsv w fl win
	# columns 12: wake-ups in the blocked window, worst trial; 9: CPU.
	w=$(get "$f" wslock 12) fl=$(get "$f" flock 12) win=$(get "$f" wslock 10)
	row "blocked waiter: wake-ups in ${win} ms (worst trial)" "$w (CPU $(us "$(get "$f" wslock 9)"))" \
		"$fl (CPU $(us "$(get "$f" flock 9)"))" "0" "$w" "0" "$(verdict "$w" '<=' 0)"
}

fig_depth() {
	local f=$OUT/depth.tsv p k base_depth real d1 dn dc f1 fn
	base_depth=$(printf '%s' "$WS_BASE" | tr -cd / | wc -c)
	p=$WS_BASE
	k=$base_depth
	while [ "$k" -lt "$DEEP" ]; do p=$p/d; k=$((k + 1)); done
	mkdir -p "$p"
	real=$(printf '%s' "$p" | tr -cd / | wc -c)
	note "depth: ${N_DEPTH} alternating runs at depth $base_depth and $real, warm and cold"
	# Cold: reclaim --yes after each run collects whatever markers the run
	# left (DESIGN §5: nest/ kept while useful, collected by reclaim).
	"$B" alt "$N_DEPTH" 3 -- \
		wslock-d1 "$WSLOCK" -d "$DISK/reg-d" run -q "$WS_BASE" -- true ::: \
		wslock-deep "$WSLOCK" -d "$DISK/reg-d" run -q "$p" -- true ::: \
		wslock-deep-cold "$WSLOCK" -d "$DISK/reg-dc" run -q "$p" -- true %%% \
		"$WSLOCK" -d "$DISK/reg-dc" reclaim -q --yes ::: \
		flock-d1 flock "$WS_BASE/.flock" true ::: \
		flock-deep flock "$p/.flock" true >"$f"
	d1=$(get "$f" wslock-d1 3) dn=$(get "$f" wslock-deep 3) dc=$(get "$f" wslock-deep-cold 3)
	f1=$(get "$f" flock-d1 3) fn=$(get "$f" flock-deep 3)
	row "depth $real / depth $base_depth, markers warm" "$(ms "$dn") / $(ms "$d1")" "$(ms "$fn") / $(ms "$f1")" "-" \
		"$(ratio "$dn" "$d1")x (flock $(ratio "$fn" "$f1")x)" "<= 1.3x" "$(verdict "$(ratio "$dn" "$d1")" '<=' 1.3)"
	row "depth $real, cold ancestors / depth $base_depth" "$(ms "$dc") / $(ms "$d1")" "-" "-" \
		"$(ratio "$dc" "$d1")x" "(report)" "-"
}

SYNCS='trace=fsync,fdatasync,syncfs,sync_file_range,sync'
count_syncs() { grep -cE '^[0-9 ]*(fsync|fdatasync|syncfs|sync_file_range|sync)\(' "$1" || true; }
calls_of() { awk '$NF == "total" { print $4 }' "$1"; }
geteuid_of() { awk '$NF == "geteuid" { n = $4 } END { print n + 0 }' "$1"; }

fig_syscalls() {
	local ws=$WS_BASE/p1 r=$DISK/reg-s w fl l nrel nins nall tok
	if ! have strace; then
		row "syscalls per uncontended run" "-" "-" "-" "strace missing" "(report)" "n/a"
		return 0
	fi
	mkdir -p "$ws" "$REG/limit-s"
	"$WSLOCK" -d "$r" run -q "$ws" -- true
	# -f: the command's own calls (true) are counted for all three alike.
	strace -f -c -o "$OUT/strace-run.txt" "$WSLOCK" -d "$r" run -q "$ws" -- true
	strace -f -c -o "$OUT/strace-flock.txt" flock "$WS_BASE/f/p1.lock" true
	strace -f -c -o "$OUT/strace-limit.txt" "$LIMIT" "$REG/limit-s" true
	w=$(calls_of "$OUT/strace-run.txt") fl=$(calls_of "$OUT/strace-flock.txt") l=$(calls_of "$OUT/strace-limit.txt")
	row "syscalls per uncontended run (strace -f -c)" "$w ($(geteuid_of "$OUT/strace-run.txt") geteuid)" "$fl" "$l" \
		"$(ratio "$w" "$fl")x" "close to flock's + the durable steps" "-"
	strace -f -y -e "$SYNCS" -o "$OUT/sync-run.txt" "$WSLOCK" -d "$r" run -q "$ws" -- true
	strace -f -y -e "$SYNCS" -o "$OUT/sync-acquire.txt" "$WSLOCK" -d "$r" acquire -q --pid "$HOLDER" "$ws" >"$OUT/owner.json"
	strace -f -y -e "$SYNCS" -o "$OUT/sync-inspect.txt" "$WSLOCK" -d "$r" inspect "$ws" >/dev/null
	strace -f -y -e "$SYNCS" -o "$OUT/sync-inspect-all.txt" "$WSLOCK" -d "$r" inspect --all >/dev/null
	tok=$(grep -o '"token":"[0-9a-f]*"' "$OUT/owner.json" | cut -d'"' -f4)
	strace -f -y -e "$SYNCS" -o "$OUT/sync-release.txt" "$WSLOCK" -d "$r" release -q --token "$tok" "$ws" >/dev/null
	nrel=$(count_syncs "$OUT/sync-release.txt") nins=$(count_syncs "$OUT/sync-inspect.txt")
	nall=$(count_syncs "$OUT/sync-inspect-all.txt")
	row "fsyncs: run / acquire; release / inspect / inspect --all" \
		"$(count_syncs "$OUT/sync-run.txt") / $(count_syncs "$OUT/sync-acquire.txt"); $nrel / $nins / $nall" \
		"0" "2 (document, directory)" "$((nrel + nins + nall)) in release and readers" "0 in release and readers" \
		"$(verdict "$((nrel + nins + nall))" '<=' 0)"
	if [ -n "$NOJ" ]; then
		"$WSLOCK" -d "$NOJ/reg-s" run -q "$ws" -- true
		strace -f -y -e "$SYNCS" -o "$OUT/sync-run-nojournal.txt" "$WSLOCK" -d "$NOJ/reg-s" run -q "$ws" -- true
		row "fsyncs: run on $(nojournal_label)" "$(count_syncs "$OUT/sync-run-nojournal.txt")" "0" \
			"2 (document, directory)" "-" "(report)" "-"
	fi
}

fig_rss() {
	measure_uncontended
	local f=$OUT/uncontended-disk.tsv w fl l
	w=$(get "$f" wslock 8) fl=$(get "$f" flock 8) l=$(get "$f" limit 8)
	row "peak RSS, run -- true (median)" "$w KiB" "$fl KiB" "$l KiB" "$(ratio "$w" "$fl")x" "<= 1.4x" \
		"$(verdict "$(ratio "$w" "$fl")" '<=' 1.4)"
}

fig_scale() {
	local f=$OUT/scale.tsv ws=$WS_BASE/t/ws w0 wn
	mkdir -p "$ws"
	note "scale: filling a registry with $SCALE locks"
	fill "$REG/reg-big" "$SCALE"
	"$WSLOCK" -d "$REG/reg-none" run -q "$ws" -- true
	note "scale: ${N_SCALE} alternating runs against $SCALE held locks and none"
	"$B" alt "$N_SCALE" 3 -- \
		wslock-0 "$WSLOCK" -d "$REG/reg-none" run -q "$ws" -- true ::: \
		wslock-held "$WSLOCK" -d "$REG/reg-big" run -q "$ws" -- true ::: \
		flock flock "$WS_BASE/f/s.lock" true >"$f"
	w0=$(get "$f" wslock-0 3) wn=$(get "$f" wslock-held 3)
	row "run -- true with $SCALE locks held / none" "$(ms "$wn") / $(ms "$w0")" "$(ms "$(get "$f" flock 3)")" "-" \
		"$(ratio "$wn" "$w0")x" "<= 1.05x" "$(verdict "$(ratio "$wn" "$w0")" '<=' 1.05)"
}

fig_inspect_all() {
	local f=$OUT/inspect-all.tsv fifo i0 im ib rm rb per cpu
	note "inspect-all: registries of $SCALE_MID and $SCALE locks"
	fill "$REG/reg-big" "$SCALE"
	fill "$REG/reg-mid" "$SCALE_MID"
	"$WSLOCK" -d "$REG/reg-empty" inspect --all >/dev/null
	# flock's side: the kernel's own list of as many flock(2) locks.
	mkdir -p "$WS_BASE/fl"
	fifo=$WS_BASE/ready
	mkfifo "$fifo"
	"$B" holdflocks "$SCALE" "$WS_BASE/fl" >"$fifo" &
	PIDS+=("$!")
	read -r _ <"$fifo"
	"$B" alt "$N_INSPECT" 1 -- \
		inspect-0 "$WSLOCK" -d "$REG/reg-empty" inspect --all ::: \
		inspect-mid "$WSLOCK" -d "$REG/reg-mid" inspect --all ::: \
		inspect-big "$WSLOCK" -d "$REG/reg-big" inspect --all ::: \
		proclocks cat /proc/locks >"$f"
	i0=$(get "$f" inspect-0 3) im=$(get "$f" inspect-mid 3) ib=$(get "$f" inspect-big 3)
	rm=$(get "$f" inspect-mid 8) rb=$(get "$f" inspect-big 8)
	per=$(awk -v a="$ib" -v z="$i0" -v n="$SCALE" 'BEGIN { printf "%.1f", (a - z) / n }')
	# The CPU a lock costs beside it: the wall time is that of a shared machine.
	cpu=$(awk -v a="$(get "$f" inspect-big 10)" -v z="$(get "$f" inspect-0 10)" -v n="$SCALE" \
		'BEGIN { printf "%.1f", (a - z) / n }')
	row "inspect --all at $SCALE locks: time per lock" "$(ms "$ib") ($per us/lock; CPU $cpu us/lock)" \
		"$(ms "$(get "$f" proclocks 3)") (cat /proc/locks)" "-" "$per us/lock" "<= 30 us/lock" "$(verdict "$per" '<=' 30)"
	row "inspect --all: peak RSS at $SCALE / at $SCALE_MID locks" "$rb / $rm KiB" \
		"$(get "$f" proclocks 8) KiB (cat /proc/locks)" "-" "$(ratio "$rb" "$rm")x" "flat (~1x)" \
		"$(verdict "$(ratio "$rb" "$rm")" '<=' 1.1)"
}

fig_profiles() {
	[ "$MODE" = full ] || return 0
	local P=$OUT/profile ws=$WS_BASE/p1 r=$DISK/reg-s
	note "profiles: strace -w -c, perf stat, callgrind"
	mkdir -p "$P" "$ws"
	"$WSLOCK" -d "$r" run -q "$ws" -- true
	if have strace; then
		strace -w -c -o "$P/strace-wall-run.txt" "$WSLOCK" -d "$r" run -q "$ws" -- true
		for i in $(seq 20); do
			strace -y -T -e trace=fsync -o "$P/strace-T.$i" "$WSLOCK" -d "$r" run -q "$ws" -- true
		done
		cat "$P"/strace-T.* | grep -E '^fsync\(' | grep -oE '<[0-9.]+>$' | tr -d '<>' |
			awk '{ n++; s += $NF } END { if (n) printf "fsync calls: %d in 20 runs, mean %.0f us each, %.2f ms per run\n", n, s / n * 1e6, s / 20 * 1e3 }' \
				>"$P/fsync-cost.txt"
		rm -f "$P"/strace-T.*
	fi
	if have perf; then
		perf stat -r 50 -e task-clock,context-switches,page-faults \
			"$WSLOCK" -d "$r" run -q "$ws" -- true 2>"$P/perf-stat-run.txt" >/dev/null || true
		perf stat -r 50 -e task-clock,context-switches,page-faults \
			flock "$WS_BASE/f/p1.lock" true 2>"$P/perf-stat-flock.txt" >/dev/null || true
	fi
	if have valgrind && have callgrind_annotate; then
		valgrind --tool=callgrind --callgrind-out-file="$P/callgrind.out" \
			"$WSLOCK" -d "$r" run -q "$ws" -- true >/dev/null 2>&1 || true
		callgrind_annotate --inclusive=no "$P/callgrind.out" 2>/dev/null |
			grep -E '^ *[0-9,]+ \(' | head -12 >"$P/callgrind-top.txt" || true
	fi
}

# --- issue 15: shared locks and several workspaces (DISK) ----------------

fig_shared() {
	local f=$OUT/shared.tsv w fl l
	mkdir -p "$DISK/ws-su" "$DISK/limit-su" "$DISK/f"
	note "shared: ${N1} alternating runs each of run --shared, flock -s and the limit"
	"$B" alt "$N1" "$W1" -- \
		wslock "$WSLOCK" -d "$DISK/reg-su" run -q --shared "$DISK/ws-su" -- true ::: \
		flock flock -s "$DISK/f/su.lock" true ::: \
		limit "$LIMIT" "$DISK/limit-su" true >"$f"
	w=$(get "$f" wslock 3) fl=$(get "$f" flock 3) l=$(get "$f" limit 3)
	row "uncontended run --shared -- true vs flock -s, median" "$(ms "$w")" "$(ms "$fl") (flock -s)" "$(ms "$l")" \
		"$(ratio "$w" "$fl")x (limit $(ratio "$l" "$fl")x)" "<= 1.35x" "$(verdict "$(ratio "$w" "$fl")" '<=' 1.35)"
}

fig_readers_writer() {
	local f=$OUT/readers-writer.tsv ws=$DISK/ws-rw lk=$DISK/f/rw.lock w fl ww fw wm fm
	mkdir -p "$ws" "$DISK/f"
	note "readers-writer: ${RW_READERS} readers x ${RW_ITERS} and 1 writer x ${RW_WRITES}, ${RW_WORK_MS} ms each, ${RW_ROUNDS} rounds"
	"$B" rw "$RW_ROUNDS" "$RW_READERS" "$RW_ITERS" "$RW_WRITES" -- \
		wslock "$WSLOCK" -d "$DISK/reg-rw" run -q --shared "$ws" -- "$B" stamp "$RW_WORK_MS" +++ \
		"$WSLOCK" -d "$DISK/reg-rw" run -q "$ws" -- "$B" stamp "$RW_WORK_MS" ::: \
		flock flock -s "$lk" "$B" stamp "$RW_WORK_MS" +++ \
		flock -x "$lk" "$B" stamp "$RW_WORK_MS" >"$f"
	w=$(get "$f" wslock 3) fl=$(get "$f" flock 3)
	ww=$(get "$f" wslock 8) fw=$(get "$f" flock 8) wm=$(get "$f" wslock 10) fm=$(get "$f" flock 10)
	row "${RW_READERS} readers x ${RW_ITERS} + 1 writer x ${RW_WRITES}: total wall, median" "$w ms" \
		"$fl ms (flock -s / -x)" "-" "$(ratio "$w" "$fl")x" "<= 1.5x" "$(verdict "$(ratio "$w" "$fl")" '<=' 1.5)"
	row "${RW_READERS} readers + 1 writer: the writer's wait, mean / max" "$(us "$ww") / $(us "$wm")" \
		"$(us "$fw") / $(us "$fm") (flock -x)" "-" "$(ratio "$ww" "$fw")x / $(ratio "$wm" "$fm")x" "(report)" "-"
}

fig_multi3() {
	local f=$OUT/multi3.tsv m=$DISK/ws-m w fl l
	mkdir -p "$m/a" "$m/b" "$m/c" "$DISK/limit-m" "$DISK/f"
	note "multi3: ${N1} alternating runs each of run A B C, three nested flock and the limit of three documents"
	"$B" alt "$N1" "$W1" -- \
		wslock "$WSLOCK" -d "$DISK/reg-m" run -q "$m/a" "$m/b" "$m/c" -- true ::: \
		flock flock "$DISK/f/ma.lock" flock "$DISK/f/mb.lock" flock "$DISK/f/mc.lock" true ::: \
		limit "$LIMIT" -n 3 "$DISK/limit-m" true >"$f"
	w=$(get "$f" wslock 3) fl=$(get "$f" flock 3) l=$(get "$f" limit 3)
	row "run A B C -- true vs three nested flock, median" "$(ms "$w")" "$(ms "$fl") (3 flock)" "$(ms "$l") (-n 3)" \
		"$(ratio "$w" "$fl")x (limit $(ratio "$l" "$fl")x)" "<= 1.35x" "$(verdict "$(ratio "$w" "$fl")" '<=' 1.35)"
}

# --- etcd (issue 13): against etcdctl lock on one throwaway member -------
ETCD_DIR= ETCD_EP=
etcd_up() {
	[ -n "$ETCD_EP" ] && return 0
	have etcd && have etcdctl || return 1
	ETCD_DIR=$(mktemp -d "$TMPBASE/wslock-bench-etcd.XXXXXX")
	ETCD_EP=$("$ROOT/tests/etcd/cluster.sh" start "$ETCD_DIR/c" 2>/dev/null) || return 1
	export ETCDCTL_API=3
}
EW=(--backend etcd --etcd-endpoints)

fig_etcd_uncontended() {
	local f=$OUT/etcd-uncontended.tsv w e
	if ! etcd_up; then
		row "etcd: uncontended run -- true vs etcdctl lock" "-" "-" "-" "no etcd/etcdctl" "<= 0.8x" "n/a"
		return 0
	fi
	mkdir -p "$WS_BASE/eu"
	note "etcd-uncontended: ${E_N} alternating runs each of wslock and etcdctl lock"
	"$B" alt "$E_N" 3 -- \
		wslock "$WSLOCK" run -q "${EW[@]}" "$ETCD_EP" "$WS_BASE/eu" -- true ::: \
		etcdctl etcdctl --endpoints="$ETCD_EP" lock wslock-bench-eu true >"$f"
	w=$(get "$f" wslock 3) e=$(get "$f" etcdctl 3)
	row "etcd: uncontended run -- true vs etcdctl lock, median" "$(ms "$w")" "$(ms "$e") (etcdctl)" "-" \
		"$(ratio "$w" "$e")x" "<= 0.8x" "$(verdict "$(ratio "$w" "$e")" '<=' 0.8)"
}

fig_etcd_contended() {
	local f=$OUT/etcd-contended.tsv w e wp ep
	if ! etcd_up; then
		row "etcd: contended vs etcdctl lock" "-" "-" "-" "no etcd/etcdctl" "<= 1.0x" "n/a"
		return 0
	fi
	mkdir -p "$WS_BASE/ec"
	note "etcd-contended: ${C_WORKERS} workers x ${E_ITERS} iterations, ${E_ROUNDS} rounds"
	# etcdctl's child inherits no descriptor but 0-2: the stamp reaches
	# fd 9 of its parent through /proc (the same sh for both sides).
	"$B" contend "$E_ROUNDS" "$C_WORKERS" "$E_ITERS" -- \
		wslock "$WSLOCK" run -q "${EW[@]}" "$ETCD_EP" "$WS_BASE/ec" -- \
		sh -c 'exec "$0" stamp 9>/proc/$$/fd/9' "$B" ::: \
		etcdctl etcdctl --endpoints="$ETCD_EP" lock wslock-bench-ec -- \
		sh -c 'exec "$0" stamp 9>/proc/$PPID/fd/9' "$B" >"$f"
	w=$(get "$f" wslock 3) e=$(get "$f" etcdctl 3)
	wp=$(get "$f" wslock 8) ep=$(get "$f" etcdctl 8)
	row "etcd: contended ${C_WORKERS}x${E_ITERS} vs etcdctl lock: total wall, median" "$w ms" "$e ms (etcdctl)" "-" \
		"$(ratio "$w" "$e")x" "<= 1.0x" "$(verdict "$(ratio "$w" "$e")" '<=' 1.0)"
	row "etcd: contended ${C_WORKERS}x${E_ITERS}: p99 wait" "$(us "$wp")" "$(us "$ep") (etcdctl)" "-" \
		"$(ratio "$wp" "$ep")x" "<= 1.0x" "$(verdict "$(ratio "$wp" "$ep")" '<=' 1.0)"
}

for fig in "${FIGS[@]}"; do
	"fig_${fig//-/_}"
done

# --- the table -----------------------------------------------------------
table() {
	printf '| figure | wslock | flock(1) | limit | result | target | verdict |\n'
	printf '|---|---|---|---|---|---|---|\n'
	awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7 }' "$SUMMARY"
}
echo
echo "wslock benchmarks ($MODE run; raw figures in ${OUT#"$ROOT"/})"
echo
table

[ "$WRITE_RESULTS" = 1 ] || exit 0

# --- RESULTS.md ----------------------------------------------------------
tsv_table() { # tsv_table FILE HEADER...
	local f=$1
	shift
	[ -s "$f" ] || { echo "(not measured)"; return 0; }
	printf '| %s ' "$@"
	printf '|\n|'
	for _ in "$@"; do printf -- '---|'; done
	printf '\n'
	awk -F'\t' '{ s = "|"; for (i = 1; i <= NF; i++) s = s " " $i " |"; print s }' "$f"
}
ALT_H=(label runs median_us p10_us p90_us p99_us mean_us maxrss_median_KiB maxrss_max_KiB cpu_median_us)
CON_H=(label rounds wall_median_ms wall_min_ms wall_max_ms wait_mean_us wait_p50_us wait_p99_us
	wait_max_us max_worker_wait/mean max_single_wait/mean)
WAKE_H=(label trials median_us p10_us p90_us p99_us max_us cpu_blocked_median_us cpu_blocked_max_us
	window_ms wakeups_median wakeups_max)
fsinfo() { echo "$(findmnt -fno FSTYPE -T "$1" 2>/dev/null || stat -f -c %T "$1") ($(findmnt -fno SOURCE,OPTIONS -T "$1" 2>/dev/null || echo '?'))"; }
{
	echo "# wslock benchmark results"
	echo
	echo "Generated by \`make bench\` (bench/run.sh); every figure below comes from"
	echo "that one run. wslock, flock(1) and the limit (bench/wsllimit: fork+exec,"
	echo "one owner write, fsync, rename, directory fsync, static C) run in"
	echo "turn, rotating the order every iteration (bench/wslbench.c); ratios are"
	echo "ratios of medians. \`make bench BENCH=FIGURE\` (or \`bench/run.sh FIGURE\`)"
	echo "measures one figure."
	echo
	echo "## Machine"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "- nproc: $(nproc); CPU: $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
	echo "- kernel: $(uname -srm)"
	echo "- memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
	echo "- registry filesystem (\"ext4\" figures): $(fsinfo "$DISK")${EXT4_IMG:+, a default mkfs.ext4 of a 512 MiB image loop-mounted for the run}${DISK_NOTE:+ ($DISK_NOTE)}"
	[ -z "$NOJ" ] || echo "- beside it (\"$(nojournal_label)\" figures, scale and inspect --all): $(fsinfo "$NOJ")"
	echo "- tmpfs figures: ${TMPFS:+$(fsinfo "$TMPFS")}"
	echo "- load average (1, 5, 15 min) at start: $LOAD_START; at end: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "- wslock: $WSLOCK_SRC, copied before the run: $("$WSLOCK" --version 2>/dev/null | head -1) (git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet -- src 2>/dev/null || echo ', src/ modified'))"
	echo "- flock: $(flock --version 2>&1 | head -1); lockfile-progs: $(dpkg-query -W -f='${Version}' lockfile-progs 2>/dev/null || echo '?'); strace: $(strace -V 2>/dev/null | head -1)"
	echo
	echo "## Summary"
	echo
	table
	echo
	echo "## Uncontended: \`run WS -- true\`, \`flock FILE true\`, \`wsllimit DIR true\`"
	echo
	tsv_table "$OUT/uncontended-disk.tsv" "${ALT_H[@]}"
	echo
	echo "On tmpfs:"
	echo
	tsv_table "$OUT/uncontended-tmpfs.tsv" "${ALT_H[@]}"
	if [ -s "$OUT/uncontended-nojournal.tsv" ]; then
		echo
		echo "On $(nojournal_label):"
		echo
		tsv_table "$OUT/uncontended-nojournal.tsv" "${ALT_H[@]}"
	fi
	if [ -f "$OUT/uncontended-hyperfine.md" ]; then
		echo
		echo "Cross-check with hyperfine (not alternating):"
		echo
		cat "$OUT/uncontended-hyperfine.md"
	fi
	echo
	echo "## acquire + release (two processes) vs lockfile-create + lockfile-remove"
	echo
	tsv_table "$OUT/acquire-release.tsv" "${ALT_H[@]}"
	echo
	echo "## Contended: ${C_WORKERS} workers x ${C_ITERS} iterations, ${C_ROUNDS} rounds (fairness from the same runs)"
	echo
	echo "Wait = from a worker's fork of the command to its child's first instruction"
	echo "(\`wslbench stamp\`). The ratios are those of the worst round."
	echo
	tsv_table "$OUT/contended-disk.tsv" "${CON_H[@]}"
	echo
	echo "On tmpfs:"
	echo
	tsv_table "$OUT/contended-tmpfs.tsv" "${CON_H[@]}"
	if [ -s "$OUT/contended-nojournal.tsv" ]; then
		echo
		echo "On $(nojournal_label):"
		echo
		tsv_table "$OUT/contended-nojournal.tsv" "${CON_H[@]}"
	fi
	echo
	echo "## Wake-up latency (the holder's child exits at a recorded instant -> the waiter's child starts)"
	echo
	tsv_table "$OUT/wakeup.tsv" "${WAKE_H[@]}"
	if [ -s "$OUT/wakeup-nojournal.tsv" ]; then
		echo
		echo "On $(nojournal_label):"
		echo
		tsv_table "$OUT/wakeup-nojournal.tsv" "${WAKE_H[@]}"
	fi
	echo
	echo "## A blocked waiter: wake-ups (voluntary context switches) and CPU from 100 ms after it started until the release"
	echo
	tsv_table "$OUT/blocked.tsv" "${WAKE_H[@]}"
	echo
	echo "## Shared: \`run --shared WS -- true\`, \`flock -s FILE true\`, \`wsllimit DIR true\`"
	echo
	tsv_table "$OUT/shared.tsv" "${ALT_H[@]}"
	echo
	echo "## ${RW_READERS} readers x ${RW_ITERS} (\`run --shared\` / \`flock -s\`) + 1 writer x ${RW_WRITES} (\`run\` / \`flock -x\`), ${RW_WORK_MS} ms of work each, ${RW_ROUNDS} rounds"
	echo
	echo "Wait = from the fork of the command to its child's first instruction; all start together."
	echo
	tsv_table "$OUT/readers-writer.tsv" label rounds wall_median_ms wall_min_ms wall_max_ms \
		read_wait_mean_us read_wait_p99_us write_wait_mean_us write_wait_p50_us write_wait_max_us
	echo
	echo "## Three workspaces: \`run A B C -- true\`, \`flock A flock B flock C true\`, \`wsllimit -n 3 DIR true\`"
	echo
	tsv_table "$OUT/multi3.tsv" "${ALT_H[@]}"
	echo
	echo "## Depth (cold: \`reclaim --yes\` after every run)"
	echo
	tsv_table "$OUT/depth.tsv" "${ALT_H[@]}"
	echo
	echo "## Registry scale: $SCALE held locks on unrelated workspaces / none"
	echo
	tsv_table "$OUT/scale.tsv" "${ALT_H[@]}"
	echo
	echo "## inspect --all at 0, $SCALE_MID and $SCALE locks; \`cat /proc/locks\` over $SCALE flock(2) locks"
	echo
	tsv_table "$OUT/inspect-all.tsv" "${ALT_H[@]}"
	echo
	[ -f "$OUT/fill.txt" ] && echo "Filling (setup, not measured): $(paste -sd';' "$OUT/fill.txt" | sed 's/;/; /g')."
	echo
	echo "## Syscalls of one uncontended run (strace -f -c)"
	for t in run flock limit; do
		[ -f "$OUT/strace-$t.txt" ] || continue
		echo
		echo "$t:"
		echo
		echo '```'
		head -24 "$OUT/strace-$t.txt"
		echo '```'
	done
	echo
	echo "## Profiles (this run)"
	echo
	P=$OUT/profile
	[ -f "$P/fsync-cost.txt" ] && echo "- $(cat "$P/fsync-cost.txt")"
	if [ -f "$P/strace-wall-run.txt" ]; then
		echo
		echo "Wall time per syscall (strace -w -c) of one run:"
		echo
		echo '```'
		head -14 "$P/strace-wall-run.txt"
		echo '```'
	fi
	for t in run flock; do
		if [ -s "$P/perf-stat-$t.txt" ]; then
			echo
			echo "perf stat -r 50 ($t):"
			echo
			echo '```'
			grep -E 'task-clock|context-switches|page-faults|elapsed|Performance' "$P/perf-stat-$t.txt" | sed 's/^ *//'
			echo '```'
		fi
	done
	if [ -s "$P/callgrind-top.txt" ]; then
		echo
		echo "callgrind, wslock process only, top functions by instructions (Ir):"
		echo
		echo '```'
		cat "$P/callgrind-top.txt"
		echo '```'
	fi
	echo
	cat "$ROOT/bench/analysis.md"
} >"$RESULTS"
echo
echo "wrote ${RESULTS#"$ROOT"/}"
