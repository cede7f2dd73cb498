#!/usr/bin/env bash
# tests/stress/check.sh LOG... - the stress checker (see driver.sh).
#
# Each log holds the lines one contender wrote:
#   START WS NS TAG / END WS NS TAG   a held interval (CLOCK_MONOTONIC ns),
#                                     written by the command under the lock
#   OP KIND WS EXIT TAG               an operation and its exit status
# It verifies that
#   - every START has its END and no (TAG, WS) interval appears twice;
#   - no two intervals on overlapping workspaces (the same, or one below the
#     other) intersect in time, unless both are shared (a TAG ending in
#     ".s": a reader; it counts as its operation's TAG without it);
#   - every operation exited as its kind allows (a held interval implies the
#     command's own status; otherwise only "not now" codes are allowed;
#     recover-foreign, a recover of an owner of another pid namespace or
#     host, must never hold);
# and prints the counts. Exit 0 when all hold, 1 otherwise.
#
# check.sh --started LOG TAG: exit 0 when LOG holds the START of TAG (the
# driver's nested operation waits on it). Tags compare as strings: awk
# compares two numeric-looking fields as numbers, and 1.10 == 1.1.
set -u
[ $# -gt 0 ] || { echo "usage: check.sh LOG... | check.sh --started LOG TAG | check.sh --self-test" >&2; exit 64; }

if [ "$1" = --started ]; then
	[ $# = 3 ] || { echo "usage: check.sh --started LOG TAG" >&2; exit 64; }
	awk -v t="$3" '$1 == "START" && $4 "" == t "" { f = 1 } END { exit !f }' "$2"
	exit
fi

# --self-test: the checker must catch an overlap and a bad exit status, and
# accept a clean log.
if [ "$1" = --self-test ]; then
	d=$(mktemp -d "${TMPDIR:-/tmp}/wslock-check-self.XXXXXX")
	trap 'rm -rf "$d"' EXIT
	printf '%s\n' "START /w/a 100 1.0" "END /w/a 200 1.0" "OP run /w/a 0 1.0" \
		"START /w/a/b 300 1.1" "END /w/a/b 400 1.1" "OP acquire /w/a/b 0 1.1" \
		"OP release /w/a/b 0 1.1" "OP run /w/c 75 1.2" >"$d/clean.log"
	printf '%s\n' "START /w/a 150 2.0" "END /w/a 160 2.0" "OP run /w/a 0 2.0" >"$d/sibling-time.log"
	printf '%s\n' "START /w/b 150 2.0" "END /w/b 160 2.0" "OP run /w/b 0 2.0" >"$d/sibling.log"
	printf '%s\n' "START /w/a/b/c 120 3.0" "END /w/a/b/c 130 3.0" "OP run /w/a/b/c 0 3.0" >"$d/nested.log"
	printf '%s\n' "OP run /w/x 65 4.0" >"$d/badexit.log"
	printf '%s\n' "OP recover-foreign /w/y 69 5.0" "OP recover-foreign /w/y 66 5.1" >"$d/foreign.log"
	printf '%s\n' "START /w/z 500 6.0" "END /w/z 600 6.0" "OP recover-foreign /w/z 0 6.0" >"$d/foreign-taken.log"
	printf '%s\n' "START /w/r 100 7.0.s" "END /w/r 200 7.0.s" "OP shared /w/r 0 7.0" >"$d/reader1.log"
	printf '%s\n' "START /w/r/s 150 8.0.s" "END /w/r/s 160 8.0.s" "OP shared /w/r/s 0 8.0" >"$d/reader2.log"
	printf '%s\n' "START /w/r 180 9.0" "END /w/r 190 9.0" "OP run /w/r 0 9.0" >"$d/writer.log"
	"$0" "$d/clean.log" "$d/sibling.log" >/dev/null 2>&1 ||
		{ echo "check.sh self-test: a clean log was rejected" >&2; exit 1; }
	if "$0" "$d/clean.log" "$d/sibling-time.log" >/dev/null 2>&1; then
		echo "check.sh self-test: two holders of /w/a at once were not caught" >&2; exit 1
	fi
	if "$0" "$d/clean.log" "$d/nested.log" >/dev/null 2>&1; then
		echo "check.sh self-test: an ancestor and a descendant held at once were not caught" >&2; exit 1
	fi
	if "$0" "$d/clean.log" "$d/badexit.log" >/dev/null 2>&1; then
		echo "check.sh self-test: an unexpected exit status was not caught" >&2; exit 1
	fi
	"$0" "$d/clean.log" "$d/foreign.log" >/dev/null 2>&1 ||
		{ echo "check.sh self-test: a refused recover of a foreign owner was rejected" >&2; exit 1; }
	if "$0" "$d/clean.log" "$d/foreign-taken.log" >/dev/null 2>&1; then
		echo "check.sh self-test: a recover that took over a foreign owner was not caught" >&2; exit 1
	fi
	"$0" "$d/reader1.log" "$d/reader2.log" >/dev/null 2>&1 ||
		{ echo "check.sh self-test: two readers at once were rejected" >&2; exit 1; }
	if "$0" "$d/reader1.log" "$d/writer.log" >/dev/null 2>&1; then
		echo "check.sh self-test: a writer beside a reader was not caught" >&2; exit 1
	fi
	# --started: op 1.10 has not started although op 1.1 has.
	"$0" --started "$d/clean.log" 1.1 ||
		{ echo "check.sh self-test: --started missed a START" >&2; exit 1; }
	if "$0" --started "$d/clean.log" 1.10; then
		echo "check.sh self-test: --started took the START of 1.1 for one of 1.10" >&2; exit 1
	fi
	echo "check.sh self-test: ok"
	exit 0
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/wslock-check.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# Pass 1: pair the intervals, judge the exit statuses, count.
awk -v ivfile="$TMP/intervals" '
function bad(msg) { errors++; if (errors <= 20) print "stress: " msg > "/dev/stderr" }
$1 == "START" || $1 == "END" {
	if (NF != 4) { bad("malformed line: " $0); next }
	k = $4 SUBSEP $2
	op = $4; sub(/\.s$/, "", op)
	if ($1 == "START") {
		if (k in st) bad("duplicate START for " $4 " on " $2)
		st[k] = $3; held[op] = 1
	} else {
		if (k in en) bad("duplicate END for " $4 " on " $2)
		en[k] = $3
	}
	next
}
$1 == "OP" {
	if (NF != 5) { bad("malformed line: " $0); next }
	nops++
	kind = $2; code = $4; tag = $5
	ops[kind]++
	opn++; okind[opn] = kind; oexit[opn] = code; otag[opn] = tag; ows[opn] = $3
	next
}
{ bad("unexpected line: " $0) }
END {
	for (k in st) {
		if (!(k in en)) { split(k, p, SUBSEP); bad("START without END: " p[1] " on " p[2]); continue }
		if (en[k] + 0 < st[k] + 0) { split(k, p, SUBSEP); bad("END before START: " p[1]) }
		split(k, p, SUBSEP)
		printf "%s %s %s %s\n", st[k], en[k], p[2], p[1] > ivfile
		nint++
	}
	for (k in en) if (!(k in st)) { split(k, p, SUBSEP); bad("END without START: " p[1] " on " p[2]) }
	for (i = 1; i <= opn; i++) {
		kind = okind[i]; code = oexit[i]; tag = otag[i]; got = (tag in held)
		ok = 0
		if (kind == "run" || kind == "multi" || kind == "multi-shared" || kind == "shared" || kind == "nested" || kind == "acquire" || kind == "abandon" || kind == "reclaim-dead")
			ok = got ? code == 0 : (code == 69 || code == 75)
		else if (kind == "run-fail")
			ok = got ? code == 3 : (code == 69 || code == 75)
		else if (kind == "recover")
			ok = got ? code == 0 : (code == 65 || code == 66 || code == 75)
		else if (kind == "recover-foreign")
			# an owner of another pid namespace or host: never taken
			# over without --force (69, WSLOCK_LIVENESS_UNKNOWN), unless
			# it changed meanwhile (65, 66) or its run is still exiting (75)
			ok = !got && (code == 65 || code == 66 || code == 69 || code == 75)
		else if (kind == "reclaim" || kind == "recover-none" || kind == "release")
			ok = code == 0
		if (kind != "release" && kind != "recover-none" && kind != "reclaim") {
			if (got) acq[kind]++
			else notnow[kind "," code]++
		}
		if (kind == "reclaim" && got) acq[kind]++
		if (!ok) { unexpected++; bad("unexpected exit " code " of " kind " " tag " on " ows[i] (got ? " (it held the lock)" : "")) }
	}
	printf "stress: %d operations logged, %d held intervals\n", nops, nint
	for (kind in ops) {
		line = sprintf("  %-13s %5d", kind, ops[kind])
		if (kind in acq) line = line sprintf("  held %d", acq[kind])
		for (k in notnow) { split(k, p, ","); if (p[1] == kind) line = line sprintf("  exit %s: %d", p[2], notnow[k]) }
		print line
	}
	printf "stress: unexpected exits %d, log errors %d\n", unexpected + 0, errors - unexpected
	exit errors > 0 ? 1 : 0
}' "$@"
rc1=$?
[ -f "$TMP/intervals" ] || : >"$TMP/intervals"

# Pass 2: sweep the intervals by start time; each is compared with those
# still open when it starts.
sort -n -k1,1 "$TMP/intervals" | awk '
function overlap(a, b) {
	return a == b || index(b, a "/") == 1 || index(a, b "/") == 1
}
{
	s = $1 + 0; e = $2 + 0; w = $3; t = $4
	m = 0
	for (i = 1; i <= n; i++) {
		if (ae[i] > s) {
			m++; as[m] = as[i]; ae[m] = ae[i]; aw[m] = aw[i]; at[m] = at[i]
			if (overlap(aw[m], w) && !(at[m] ~ /\.s$/ && t ~ /\.s$/)) {
				v++
				if (v <= 20) printf "stress: VIOLATION: %s held %s during [%.0f, %.0f] while %s held %s from %.0f\n", \
					at[m], aw[m], as[m], ae[m], t, w, s > "/dev/stderr"
			}
		}
	}
	n = m + 1; as[n] = s; ae[n] = e; aw[n] = w; at[n] = t
}
END { printf "stress: overlap violations %d\n", v + 0; exit v > 0 ? 1 : 0 }'
rc2=$?
[ "$rc1" = 0 ] && [ "$rc2" = 0 ]
